/* SPDX-License-Identifier: MIT */
/* prog-fdguard MODE [CALLS]: a program that clears its fd table at start, as daemons and
 * sandboxes do, then reads its environment through calls the preload library records, and
 * exits with a status of its own (42; another status says which check of its own failed).
 *
 * MODE is how it clears the table:
 *   close-range          close_range(3, ~0U, 0)
 *   close-range-unshare  close_range(3, ~0U, CLOSE_RANGE_UNSHARE), while a thread records
 *   close-range-cloexec  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC)
 *   closefrom            closefrom(3)
 *   close-loop           close() on 0..1023, stdio included (nothing is printed afterwards)
 *   dup2-all             dup2(own, fd) for every fd 3..1023 but its own, each must succeed;
 *                        own is /dev/null opened for writing: what goes there is gone
 *   fcntl-all            fcntl(fd, F_SETFD, 0) and F_SETFL on 3..1023; then no .partial file
 *                        open here may have lost FD_CLOEXEC (/proc/self/fdinfo)
 *   syscall-close-range  syscall(SYS_close_range, 3, ~0U, 0)
 *   syscall-close-loop   syscall(SYS_close, fd) on 3..1023
 *   syscall-dup2-all     syscall(SYS_dup2 or SYS_dup3, own, fd) on 3..1023
 *   none                 nothing
 * Then it checks that it sees no descriptor it should not (fcntl(F_GETFD) on 3..4095: after
 * clearing, none, or its own), makes CALLS clock_gettime(CLOCK_MONOTONIC) reads in all
 * (default 100; close-range-unshare makes 50 of them on a second thread, at the same time as the
 * main thread closes) and 10 getrandom calls of 16 bytes, and exits 42.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STATUS 42
#define TOP 1024  /* the numbers a program clears: 0..1023 */
#define SCAN 4096 /* the numbers it looks at afterwards */

static void clock_reads(long calls)
{
    struct timespec ts;
    for (long i = 0; i < calls; i++)
        clock_gettime(CLOCK_MONOTONIC, &ts);
}

static void random_reads(void)
{
    char b[16];
    for (int i = 0; i < 10; i++)
        if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
            exit(30);
}

/* Whether some descriptor of this process on a ".partial" file lacks FD_CLOEXEC. */
static bool partial_inherits(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        exit(32);
    bool bad = false;
    struct dirent *e;
    while (!bad && (e = readdir(d)) != NULL) {
        char link[300], target[4096], info[256];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n < 8 || memcmp(target + n - 8, ".partial", 8) != 0)
            continue;
        /* the runtime's own file, there when recording only: read through raw system calls,
         * which the runtime does not record (a recorded /proc read here would have no
         * counterpart in the replay, which has no .partial file) */
        snprintf(link, sizeof link, "/proc/self/fdinfo/%s", e->d_name);
        int fd = (int)syscall(SYS_openat, AT_FDCWD, link, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd >= 0 ? syscall(SYS_read, fd, info, sizeof info - 1) : -1;
        if (fd >= 0)
            syscall(SYS_close, fd);
        info[got > 0 ? got : 0] = '\0';
        const char *fl = strstr(info, "flags:");
        unsigned flags = 0;
        if (fl)
            sscanf(fl, "flags: %o", &flags);
        bad = !(flags & O_CLOEXEC);
    }
    closedir(d);
    return bad;
}

static int visible(void)
{
    int n = 0;
    for (int fd = 3; fd < SCAN; fd++)
        if (fcntl(fd, F_GETFD) != -1)
            n++;
        else if (errno != EBADF)
            exit(31);
    return n;
}

static atomic_int go;

/* records while the main thread unshares and closes */
static void *recorder(void *arg)
{
    (void)arg;
    while (!atomic_load(&go))
        ;
    clock_reads(50);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *m = argv[1];
    long calls = argc > 2 ? atol(argv[2]) : 100;
    int own = -1, expect = 0;
    if (!strcmp(m, "close-range")) {
        if (close_range(3, ~0U, 0) != 0)
            return 20;
    } else if (!strcmp(m, "close-range-unshare")) {
        pthread_t t;
        if (pthread_create(&t, NULL, recorder, NULL) != 0)
            return 21;
        atomic_store(&go, 1);
        if (close_range(3, ~0U, CLOSE_RANGE_UNSHARE) != 0)
            return 20;
        pthread_join(t, NULL);
        calls -= 50;
    } else if (!strcmp(m, "close-range-cloexec")) {
        expect = visible();
        if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
            return 20;
    } else if (!strcmp(m, "closefrom")) {
        closefrom(3);
    } else if (!strcmp(m, "close-loop")) {
        for (int fd = 0; fd < TOP; fd++)
            close(fd);
    } else if (!strcmp(m, "dup2-all") || !strcmp(m, "syscall-dup2-all")) {
        bool sys = m[0] == 's';
        own = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (own < 0)
            return 22;
        for (int fd = 3; fd < TOP; fd++) {
            if (fd == own)
                continue;
            long r = !sys ? dup2(own, fd) : fd % 2 ? syscall(SYS_dup2, own, fd)
                                                 : syscall(SYS_dup3, own, fd, O_CLOEXEC);
            if (r != fd)
                return 23;
        }
        expect = TOP - 3;
        for (int fd = TOP; fd < SCAN; fd++) /* what it did not put there, it does not see */
            if (fcntl(fd, F_GETFD) != -1)
                expect++;
    } else if (!strcmp(m, "fcntl-all")) {
        expect = visible();
        for (int fd = 3; fd < TOP; fd++) {
            int fl = fcntl(fd, F_GETFL);
            if (fcntl(fd, F_SETFD, 0) == 0 && fl >= 0)
                fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        }
        if (partial_inherits())
            return 26;
    } else if (!strcmp(m, "syscall-close-range")) {
        if (syscall(SYS_close_range, 3, ~0U, 0) != 0)
            return 20;
    } else if (!strcmp(m, "syscall-close-loop")) {
        for (int fd = 3; fd < TOP; fd++)
            syscall(SYS_close, fd);
    } else if (!strcmp(m, "none")) {
        expect = visible();
    } else {
        return 2;
    }
    int seen = visible();
    if (seen != expect)
        return seen > expect ? 24 : 25;
    clock_reads(calls);
    random_reads();
    return STATUS;
}
