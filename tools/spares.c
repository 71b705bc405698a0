/* SPDX-License-Identifier: MIT */
/* tinytrace — the empty files a recording's processes take for their traces (procs.h).
 *
 * Every process of a recorded tree writes its own trace, and creating a file is not cheap on every
 * file system: on ext4 without a journal (the VMs this is measured on) a create scans past the
 * inodes deleted in the last half minute, 0.4 to 1 ms when a tree of a thousand processes was just
 * removed, which a shell loop of `/bin/true` pays once per process, in its critical path. So the
 * tool makes the files ahead, on its own thread, while it waits for the program: FILE.procs/.spares
 * holds up to TOOL_SPARES empty files, and a process that opens its session (TINYTRACE_SPARES=1)
 * renames one of them to its partial name (tt_partial_take) and creates one only when none is left.
 * Each spare is made unnamed and then linked in (make_file), so that a process taking one never
 * waits for a create to end. No process waits for the thread, and none tells it anything: it looks
 * at the folder, every millisecond while spares are being taken and half as often each time it
 * finds none taken, down to every TOOL_LOOK_MAX_MS. The folder is made when the first process of
 * the tree has made its own file in FILE.procs, so a program that starts no process pays for no
 * spare. When the program has ended, what is left is removed with the folder.
 *
 * The same thread reads and signs the traces the tree's processes have finished
 * (tool_scan_step, procs.c), every TOOL_SCAN_EVERY_MS: on a machine with a core to spare that
 * work no longer comes after the program, where the user waits for it.
 *
 * Not inotify: closing an instance that ever had a watch waits for an SRCU grace period, 1.8
 * to 6 ms measured here, which every recording, a single process's too, would pay at its end.
 */
#include "procs.h"
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tinytrace/store.h>

/* The folder's depth: it starts at TOOL_SPARES_FIRST and grows by two for each spare found
 * taken, up to TOOL_SPARES (make -j2 takes about 200 a second, 2 ms apart). */
#define TOOL_SPARES 8
#define TOOL_SPARES_FIRST 2
#define TOOL_LOOK_MAX_MS 128
/* How often the thread reads the traces finished since it last looked (tool_scan_step): a
 * folder of a thousand names is read in a tenth of a millisecond. */
#define TOOL_SCAN_EVERY_MS 16

struct tool_spares {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* the program has ended */
    bool stopping;       /* under lock */
    int procs;           /* FILE.procs */
    int dir;             /* FILE.procs/.spares, once made (-1 before) */
    unsigned long next;  /* the next spare's name: names are never used twice */
    unsigned held;       /* spares in the folder when last looked, and made since */
    unsigned depth;      /* how many it keeps */
    int failed;          /* a spare could not be made: the processes create their files */
    bool plain;          /* spares are created by name (no O_TMPFILE and link here) */
    tool_scan *early;    /* the tree's finished traces, read as they come (NULL: at the end) */
    char path[4200];
};

static bool stopping(struct tool_spares *s)
{
    pthread_mutex_lock(&s->lock);
    bool v = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return v;
}

/* Empty file @name in folder @dir, made unnamed first (O_TMPFILE) and then linked in: a
 * create allocates its inode under the folder's lock (0.4 to 1 ms, above), and a process that
 * takes a spare, a rename out of the folder, waited for that lock; a link holds it only while
 * the name goes in. Where the file system or /proc cannot do that (*@plain then set), a plain
 * create. */
static int make_file(int dir, const char *name, bool *plain)
{
    int fd = *plain ? -1 : openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) {
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, self, dir, name, AT_SYMLINK_FOLLOW) == 0)
            return fd;
        int e = errno;
        close(fd); /* unnamed: it goes with its descriptor */
        if (e == EEXIST || e == ENOSPC || e == EDQUOT) {
            errno = e;
            return -1;
        }
    }
    *plain = true;
    return openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static void make_one(struct tool_spares *s)
{
    char name[32];
    snprintf(name, sizeof name, "%lu", s->next++);
    int fd = make_file(s->dir, name, &s->plain);
    if (fd < 0) {
        s->failed = errno; /* a full disk, a quota: nothing is lost, the processes create */
        return;
    }
    close(fd);
    s->held++;
}

/* How many names but "." and ".." folder @dir holds, counting up to @most. */
static unsigned names_in(int dir, unsigned most)
{
    int d = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dp = d >= 0 ? fdopendir(d) : NULL;
    unsigned n = 0;
    for (struct dirent *de; dp && n < most && (de = readdir(dp)) != NULL;)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    if (dp)
        closedir(dp);
    else if (d >= 0)
        close(d);
    return n;
}

/* One look: makes the folder once the tree has a file, then tops it up. True when it found
 * something to do (a look again soon), false when nothing had changed. */
static bool look(struct tool_spares *s)
{
    if (s->dir < 0) {
        if (names_in(s->procs, 1) == 0)
            return false;
        if (mkdirat(s->procs, TT_SPARES_DIR, 0700) != 0 ||
            (s->dir = openat(s->procs, TT_SPARES_DIR,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            s->failed = errno ? errno : EIO;
            return false;
        }
        s->depth = TOOL_SPARES_FIRST;
    } else {
        unsigned have = names_in(s->dir, TOOL_SPARES + 1);
        if (have >= s->held)
            return false; /* none taken */
        unsigned taken = s->held - have;
        s->held = have;
        s->depth = s->depth + 2 * taken < TOOL_SPARES ? s->depth + 2 * taken : TOOL_SPARES;
    }
    while (s->held < s->depth && !s->failed && !stopping(s))
        make_one(s);
    return true;
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void *keeper(void *arg)
{
    struct tool_spares *s = arg;
    unsigned ms = 1;
    uint64_t scanned = now_ms();
    pthread_mutex_lock(&s->lock);
    while (!s->stopping && !s->failed) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_nsec += (long)ms * 1000000L;
        at.tv_sec += at.tv_nsec / 1000000000L;
        at.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&s->cond, &s->lock, &at) != ETIMEDOUT || s->stopping)
            continue;
        pthread_mutex_unlock(&s->lock);
        bool busy = look(s);
        /* the finished traces, read and signed now rather than after the program */
        if (s->early && now_ms() - scanned >= TOOL_SCAN_EVERY_MS) {
            busy |= tool_scan_step(s->early) > 0;
            scanned = now_ms();
        }
        pthread_mutex_lock(&s->lock);
        ms = busy ? 1 : (ms * 2 < TOOL_LOOK_MAX_MS ? ms * 2 : TOOL_LOOK_MAX_MS);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Removes every spare left, then the folder (@procs: FILE.procs, @dir: its .spares). */
static void empty(int procs, int dir)
{
    int d = dup(dir);
    DIR *dp = d >= 0 ? fdopendir(d) : NULL;
    for (struct dirent *de; dp && (de = readdir(dp)) != NULL;)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            unlinkat(dir, de->d_name, 0);
    if (dp)
        closedir(dp);
    else if (d >= 0)
        close(d);
    unlinkat(procs, TT_SPARES_DIR, AT_REMOVEDIR);
}

void tool_spares_clear(const char *procs_dir)
{
    int p = open(procs_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int d = p >= 0 ? openat(p, TT_SPARES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                   : -1;
    if (d >= 0) {
        empty(p, d);
        close(d);
    }
    if (p >= 0)
        close(p);
}

tool_spares *tool_spares_start(const char *file, tool_scan *early)
{
    char procs[4096];
    struct tool_spares *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dir = -1;
    s->early = early;
    if (tool_procs_dir(file, procs, sizeof procs) != 0 ||
        (s->procs = open(procs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        free(s);
        return NULL; /* not an error: every process creates its own file, as without the tool */
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->lock, NULL);
    /* the thread takes no signal: the tool's handlers run on the thread that waits */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&s->thread, NULL, keeper, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0)
        return s;
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    close(s->procs);
    free(s);
    return NULL;
}

void tool_spares_stop(tool_spares *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    if (s->dir >= 0) {
        empty(s->procs, s->dir);
        close(s->dir);
    }
    close(s->procs);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
