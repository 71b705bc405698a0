/* SPDX-License-Identifier: MIT */
/* syscall(). Programs that skip the libc wrapper (older Rust, Go's cgo helpers, Python builds
 * without getrandom()) reach the same interposers; everything else goes straight through. The
 * calls that close or replace descriptors (close, close_range, dup, dup2, dup3, fcntl) go to the
 * fd guard (fdguard.c), so syscall(SYS_close_range, 3, ~0U, 0) spares the trace's descriptor as
 * close_range() does.
 */
#include "preload.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef long (*syscall_fn)(long, ...);

/* Reading six arguments whatever the call takes is what glibc's own syscall() does. */
TT_EXPORT long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    switch (nr) {
#ifdef SYS_getrandom
    case SYS_getrandom:
        return getrandom((void *)a[0], (size_t)a[1], (unsigned)a[2]);
#endif
    case SYS_clock_gettime:
        return clock_gettime((clockid_t)a[0], (struct timespec *)a[1]);
    case SYS_gettimeofday:
        return gettimeofday((struct timeval *)a[0], (void *)a[1]);
#ifdef SYS_time
    case SYS_time:
        return (long)time((time_t *)a[0]);
#endif
    case SYS_getpid:
        return getpid();
    case SYS_close:
        return close((int)a[0]);
#ifdef SYS_close_range
    case SYS_close_range:
        return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]);
#endif
    case SYS_dup:
        return dup((int)a[0]);
#ifdef SYS_dup2
    case SYS_dup2:
        return dup2((int)a[0], (int)a[1]);
#endif
    case SYS_dup3:
        return dup3((int)a[0], (int)a[1], (int)a[2]);
    case SYS_fcntl:
        return fcntl((int)a[0], (int)a[1], (void *)a[2]);
    case SYS_getppid:
        return getppid();
    case SYS_gettid:
        return gettid();
    case SYS_kill:
        return kill((pid_t)a[0], (int)a[1]);
    case SYS_tgkill:
        return tgkill((pid_t)a[0], (pid_t)a[1], (int)a[2]);
    case SYS_tkill:
        tt_pl_before_tkill(tt_pl_id_live((pid_t)a[0]), (int)a[1]);
        return REAL(syscall, syscall_fn)(nr, (long)tt_pl_id_live((pid_t)a[0]), a[1]);
    default:
        return REAL(syscall, syscall_fn)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
}
