/* SPDX-License-Identifier: MIT */
/* tinytrace — the empty files a recording's processes take for their traces (procs.h).
 *
 * Every process of a recorded tree writes its own trace, and creating a file is not cheap on
 * every file system: on ext4 without a journal (the VMs this is measured on) a create scans
 * past the inodes deleted in the last half minute, 0.4 to 0.9 ms when a tree of a thousand
 * processes was just removed, which a shell loop of `/bin/true` pays once per process, in its
 * critical path. So the tool makes the files ahead, on its own thread, while it waits for the
 * program: FILE.procs/.spares holds TOOL_SPARES empty files, and a process that opens its
 * session (TINYTRACE_SPARES=1) renames one of them to its partial name (tt_partial_take) and
 * creates one only when none is left. The thread learns of each spare taken from inotify (the
 * rename out of the folder) and makes another; no process waits for it, and none tells it
 * anything. When the program has ended, what is left is removed with the folder.
 */
#include "procs.h"
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tinytrace/store.h>

#define TOOL_SPARES 8 /* the folder's depth: make -j2 takes about 200 a second, 2 ms apart */

struct tool_spares {
    pthread_t thread;
    int dir;           /* FILE.procs/.spares */
    int watch;         /* inotify: a spare renamed out (taken) or removed */
    int stop;          /* eventfd: the program has ended */
    unsigned long next; /* the next spare's name: names are never used twice */
    int failed;        /* a spare could not be made: the processes create their files */
    char path[4200];
};

static void make_one(struct tool_spares *s)
{
    if (s->failed)
        return;
    char name[32];
    snprintf(name, sizeof name, "%lu", s->next++);
    int fd = openat(s->dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        s->failed = errno; /* a full disk, a quota: nothing is lost, the processes create */
        return;
    }
    close(fd);
}

/* How many spares the folder holds (after an inotify queue overflow). */
static unsigned count(struct tool_spares *s)
{
    int d = openat(s->dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dp = d >= 0 ? fdopendir(d) : NULL;
    unsigned n = 0;
    for (struct dirent *de; dp && (de = readdir(dp)) != NULL;)
        n += de->d_name[0] != '.';
    if (dp)
        closedir(dp);
    else if (d >= 0)
        close(d);
    return n;
}

static void *keeper(void *arg)
{
    struct tool_spares *s = arg;
    for (int i = 0; i < TOOL_SPARES; i++)
        make_one(s);
    struct pollfd pf[2] = {{.fd = s->watch, .events = POLLIN}, {.fd = s->stop, .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        _Alignas(struct inotify_event) char buf[4096];
        ssize_t n = read(s->watch, buf, sizeof buf);
        if (n <= 0)
            continue;
        unsigned taken = 0;
        bool overflow = false;
        for (ssize_t off = 0; off < n;) {
            const struct inotify_event *ev = (const void *)(buf + off);
            off += (ssize_t)(sizeof *ev + ev->len);
            if (ev->mask & IN_Q_OVERFLOW)
                overflow = true;
            else if (ev->mask & (IN_MOVED_FROM | IN_DELETE))
                taken++;
        }
        if (overflow) {
            unsigned have = count(s);
            taken = have < TOOL_SPARES ? TOOL_SPARES - have : 0;
        }
        while (taken-- > 0)
            make_one(s);
    }
    return NULL;
}

/* Removes every spare left, then the folder. */
static void empty(int dir, const char *path)
{
    int d = dup(dir);
    DIR *dp = d >= 0 ? fdopendir(d) : NULL;
    for (struct dirent *de; dp && (de = readdir(dp)) != NULL;)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
            unlinkat(dir, de->d_name, 0);
    if (dp)
        closedir(dp);
    else if (d >= 0)
        close(d);
    rmdir(path);
}

void tool_spares_clear(const char *procs_dir)
{
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", procs_dir, TT_SPARES_DIR) >= (int)sizeof path)
        return;
    int d = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return;
    empty(d, path);
    close(d);
}

tool_spares *tool_spares_start(const char *file)
{
    char procs[4096];
    struct tool_spares *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dir = s->watch = s->stop = -1;
    if (tool_procs_dir(file, procs, sizeof procs) != 0 ||
        snprintf(s->path, sizeof s->path, "%s/%s", procs, TT_SPARES_DIR) >= (int)sizeof s->path)
        goto none;
    if (mkdir(s->path, 0700) != 0 ||
        (s->dir = open(s->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        (s->watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0 ||
        inotify_add_watch(s->watch, s->path, IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR) < 0 ||
        (s->stop = eventfd(0, EFD_CLOEXEC)) < 0)
        goto none;
    /* the thread takes no signal: the tool's handlers run on the thread that waits */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&s->thread, NULL, keeper, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0)
        return s;
none:
    /* not an error: every process creates its own file, as without the tool */
    if (s->dir >= 0) {
        empty(s->dir, s->path);
        close(s->dir);
    }
    if (s->watch >= 0)
        close(s->watch);
    if (s->stop >= 0)
        close(s->stop);
    free(s);
    return NULL;
}

void tool_spares_stop(tool_spares *s)
{
    if (!s)
        return;
    uint64_t one = 1;
    /* an eventfd's count starts at 0: a write of 1 cannot block or fail but for a signal */
    while (write(s->stop, &one, sizeof one) < 0 && errno == EINTR)
        ;
    pthread_join(s->thread, NULL);
    empty(s->dir, s->path);
    close(s->dir);
    close(s->watch);
    close(s->stop);
    free(s);
}
