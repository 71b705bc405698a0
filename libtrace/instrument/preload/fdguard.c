/* SPDX-License-Identifier: MIT */
/* The fd guard: the tracer's own descriptors stay out of the program's way.
 *
 * The runtime holds a descriptor for the whole run, the writer's trace file, on a high number
 * with FD_CLOEXEC, reserved in the fd registry (base/fds.c). Programs close what they did not
 * open (close_range(3, ~0U, 0), closefrom(3), close() over 0..1023) and put their own files on
 * every number (dup2 over 3..1023); done to that descriptor, the recording would be lost. Each
 * call here gives the program the result it would have had, had the reserved number not been
 * open:
 *
 * - close(reserved): -1, EBADF, nothing closed;
 * - close_range(first, last, flags) and closefrom(low): the real call on the sub-ranges around
 *   the reserved numbers. CLOSE_RANGE_UNSHARE unshares the fd table first (unshare(CLONE_FILES),
 *   which is what the flag does before it closes), then the sub-ranges are closed in the new
 *   table, so the reserved descriptor survives in the caller's table as in the others;
 *   CLOSE_RANGE_CLOEXEC marks the sub-ranges; flags the kernel does not know are refused with
 *   EINVAL, as the kernel refuses them, before anything is closed;
 * - dup2(old, reserved) and dup3(old, reserved, flags): the owner moves its descriptor to
 *   another number first (tt_fd_move: the writer dups it, switches to it under the lock its
 *   block writes take, and closes the old number), then the real call runs; a move that finds
 *   no free number lets the number go, and the writer opens the file again later (writer.c);
 * - dup2(reserved, new), dup3(reserved, …), dup(reserved), fcntl(reserved, any command): EBADF;
 *   the kernel already never hands out a reserved number (open, dup, F_DUPFD: it is taken);
 * - syscall(SYS_close, …), SYS_close_range, SYS_dup, SYS_dup2, SYS_dup3 and SYS_fcntl come here
 *   too (syscall.c).
 *
 * Argument checks the kernel makes before it looks at a descriptor are left to the real call
 * (dup3 with old == new or unknown flags: EINVAL), so their errors stay what they were.
 *
 * Every wrapper takes the nesting guard first and forwards when it is held: tinytrace's own
 * closes and dups (the writer moving its descriptor, the swapper reopening the file) go straight
 * to libc. It forwards too when the process is not traced, which here means that it holds no
 * reserved descriptor: the registry's reservations are per process, so a fork or vfork child,
 * whose copy of the trace descriptor is its own, closes or replaces it freely, and so does a
 * process whose session has ended. The guard does not ask for the session (tt_pl_enter): the
 * descriptor is the writer's until the writer closes it, after the session stopped being the
 * runtime's live one at exit.
 *
 * In the child of a real vfork (process.c), whose calls all forward, close, close_range,
 * closefrom, dup2, dup3 and fcntl still spare the descriptors its exec must hand on, as they
 * spare a reserved one: the runtime's settings and a replay's report channel
 * (tt_pl_vfork_kept).
 *
 * Not covered: a raw system call instruction, a program linked statically, a signal handler
 * that interrupts tinytrace itself (the guard is held: its calls forward). The writer notices a
 * lost descriptor at its next write and opens the file again by name (writer.c).
 */
#include "preload.h"

#include "base.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <stdarg.h>
#include <unistd.h>

typedef int (*close_fn)(int);
typedef int (*close_range_fn)(unsigned, unsigned, int);
typedef void (*closefrom_fn)(int);
typedef int (*dup_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef int (*fcntl_fn)(int, int, ...);

static int refuse(int e)
{
    tt_rt_guard_leave();
    errno = e;
    return -1;
}

/* In a vfork child: whether @fd is one its exec must hand on (tt_pl_vfork_kept). */
static inline bool vfork_keeps(int fd)
{
    if (__builtin_expect(!tt_pl_vforked, 1)) /* every other process: one load, no call */
        return false;
    int k[2];
    size_t n = tt_pl_vfork_kept(k);
    return n && (fd == k[0] || (n > 1 && fd == k[1]));
}

TT_EXPORT int close(int fd)
{
    close_fn f = REAL(close, close_fn);
    if (UNLIKELY(vfork_keeps(fd))) {
        errno = EBADF;
        return -1;
    }
    if (tt_rt_guard_enter()) {
        bool reserved = tt_fd_is_reserved(fd);
        if (!reserved)
            tt_pl_pipes_settle(fd); /* read.c: a replay's reads of a pipe owe it nothing more */
        tt_rt_guard_leave();
        if (UNLIKELY(reserved)) {
            errno = EBADF;
            return -1;
        }
    }
    tt_pl_fd_mark(fd, false); /* fds.c: no longer open on a random device */
    return f(fd);
}

/* The real close_range over [first, last] but the reserved numbers @r[0..n) (ascending, all
 * in the range): each sub-range around them, in order; the first error is returned. */
static int close_around(int64_t first, int64_t last, int flags, const int *r, size_t n)
{
    close_range_fn f = REAL(close_range, close_range_fn);
    int rc = 0, e = 0;
    for (size_t i = 0; i <= n; i++) {
        int64_t to = i < n ? (int64_t)r[i] - 1 : last; /* up to the next reserved one */
        if (first <= to && f((unsigned)first, (unsigned)to, flags) != 0 && !rc) {
            rc = -1;
            e = errno;
        }
        if (i < n)
            first = (int64_t)r[i] + 1;
    }
    if (rc)
        errno = e;
    return rc;
}

/* close_range(@first, @last, @flags) but @r[0..n) (ascending, all in the range), as the kernel
 * would do it: flags it does not know refused with EINVAL before anything is closed; the
 * table unshared first, as CLOSE_RANGE_UNSHARE would, and the caller's new table closed. */
static int close_range_around(unsigned first, unsigned last, int flags, const int *r, size_t n)
{
    if (flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) {
        errno = EINVAL;
        return -1;
    }
    if ((flags & CLOSE_RANGE_UNSHARE) && unshare(CLONE_FILES) != 0)
        return -1;
    return close_around(first, last, flags & ~CLOSE_RANGE_UNSHARE, r, n);
}

/* closefrom(@first) but @r[0..n) (ascending, all from @first up, n > 0): the sub-ranges below
 * the last of them (a close per number where close_range fails: a kernel before 5.9), then
 * the real closefrom above it, which has its own fallback. */
static void closefrom_around(unsigned first, const int *r, size_t n, closefrom_fn f)
{
    int top = r[n - 1];
    if (close_around(first, (int64_t)top - 1, 0, r, n - 1) != 0) {
        close_fn c = REAL(close, close_fn);
        for (int fd = (int)first, i = 0; fd < top; fd++) {
            while ((size_t)i < n && r[i] < fd)
                i++;
            if ((size_t)i == n || r[i] != fd)
                c(fd);
        }
    }
    f(top + 1);
}

/* The descriptors a vfork child keeps within [first, last] into @r (ascending): how many. */
static inline size_t vfork_kept_in(unsigned first, unsigned last, int r[2])
{
    if (__builtin_expect(!tt_pl_vforked, 1))
        return 0;
    int k[2];
    size_t n = tt_pl_vfork_kept(k), m = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned)k[i] >= first && (unsigned)k[i] <= last)
            r[m++] = k[i];
    return m;
}

TT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    close_range_fn f = REAL(close_range, close_range_fn);
    int kept[2];
    size_t nk = first <= last ? vfork_kept_in(first, last, kept) : 0;
    if (UNLIKELY(nk)) /* a vfork child, whose calls all forward: around what its exec hands on */
        return close_range_around(first, last, flags, kept, nk);
    if (!tt_rt_guard_enter())
        return f(first, last, flags);
    int r[TT_FD_SLOTS];
    size_t n = first <= last ? tt_fd_reserved_in(first, last, r, TT_FD_SLOTS) : 0;
    if (n == 0) {
        tt_rt_guard_leave();
        return f(first, last, flags);
    }
    int rc = close_range_around(first, last, flags, r, n);
    int e = errno;
    tt_rt_guard_leave();
    errno = e;
    return rc;
}

TT_EXPORT void closefrom(int low)
{
    closefrom_fn f = REAL(closefrom, closefrom_fn);
    int kept[2];
    size_t nk = vfork_kept_in(low < 0 ? 0 : (unsigned)low, ~0U, kept);
    if (UNLIKELY(nk)) { /* a vfork child: around what its exec hands on */
        closefrom_around(low < 0 ? 0 : (unsigned)low, kept, nk, f);
        return;
    }
    if (!tt_rt_guard_enter()) {
        f(low);
        return;
    }
    unsigned first = low < 0 ? 0 : (unsigned)low;
    int r[TT_FD_SLOTS];
    size_t n = tt_fd_reserved_in(first, ~0U, r, TT_FD_SLOTS);
    if (n == 0) {
        tt_rt_guard_leave();
        f(low);
        return;
    }
    closefrom_around(first, r, n, f);
    tt_rt_guard_leave();
}

TT_EXPORT int dup(int old)
{
    dup_fn f = REAL(dup, dup_fn);
    if (!tt_rt_guard_enter())
        return f(old);
    if (UNLIKELY(tt_fd_is_reserved(old)))
        return refuse(EBADF);
    tt_rt_guard_leave();
    return f(old);
}

/* dup2 and dup3 onto @new: the owner of a reserved @new takes its descriptor away first. */
static void make_room(int old, int new)
{
    if (old != new && UNLIKELY(tt_fd_is_reserved(new)))
        (void)tt_fd_move(new); /* failing, the owner let the number go: the call proceeds */
}

TT_EXPORT int dup2(int old, int new)
{
    dup2_fn f = REAL(dup2, dup2_fn);
    if (UNLIKELY(old != new && vfork_keeps(new))) {
        errno = EBADF; /* a vfork child cannot move the runtime's descriptor away */
        return -1;
    }
    if (!tt_rt_guard_enter())
        return f(old, new);
    if (UNLIKELY(tt_fd_is_reserved(old)))
        return refuse(EBADF); /* dup2(r, r) too: the kernel's answer for a number not open */
    make_room(old, new);
    tt_rt_guard_leave();
    return f(old, new);
}

TT_EXPORT int dup3(int old, int new, int flags)
{
    dup3_fn f = REAL(dup3, dup3_fn);
    if (UNLIKELY(old != new && vfork_keeps(new))) {
        errno = EBADF;
        return -1;
    }
    if (!tt_rt_guard_enter())
        return f(old, new, flags);
    /* the kernel refuses these with EINVAL before it looks at @old: let it */
    if ((flags & ~O_CLOEXEC) || old == new) {
        tt_rt_guard_leave();
        return f(old, new, flags);
    }
    if (UNLIKELY(tt_fd_is_reserved(old)))
        return refuse(EBADF);
    make_room(old, new);
    tt_rt_guard_leave();
    return f(old, new, flags);
}

/* The third argument is read as a pointer whatever the command, as glibc's fcntl does: an int
 * passed there reaches the kernel the same way. */
#define FCNTL_LIKE(name)                                                                       \
    TT_EXPORT int name(int fd, int cmd, ...)                                                   \
    {                                                                                          \
        va_list ap;                                                                            \
        va_start(ap, cmd);                                                                     \
        void *arg = va_arg(ap, void *);                                                        \
        va_end(ap);                                                                            \
        fcntl_fn f = REAL(name, fcntl_fn);                                                     \
        if (UNLIKELY(vfork_keeps(fd))) {                                                       \
            errno = EBADF;                                                                     \
            return -1;                                                                         \
        }                                                                                      \
        if (!tt_rt_guard_enter())                                                              \
            return f(fd, cmd, arg);                                                            \
        if (UNLIKELY(tt_fd_is_reserved(fd)))                                                   \
            return refuse(EBADF);                                                              \
        tt_rt_guard_leave();                                                                   \
        return f(fd, cmd, arg);                                                                \
    }
FCNTL_LIKE(fcntl)
FCNTL_LIKE(fcntl64)
