/* Opening and closing: open, open64, openat and openat64 remember whether the new fd is on a
 * random device, close forgets it (fds.c). Nothing is recorded here. fopen, which must return a
 * stream whose reads reach the interposers, is in stdio.c.
 */
#include "preload.h"

#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*close_fn)(int);

static inline bool needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

TT_EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(open, open_fn)(path, flags, mode);
    tt_pl_fd_mark(fd, tt_pl_is_random_path(path));
    return fd;
}

TT_EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(open64, open_fn)(path, flags, mode);
    tt_pl_fd_mark(fd, tt_pl_is_random_path(path));
    return fd;
}

TT_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(openat, openat_fn)(dirfd, path, flags, mode);
    tt_pl_fd_mark(fd, tt_pl_is_random_path(path));
    return fd;
}

TT_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(openat64, openat_fn)(dirfd, path, flags, mode);
    tt_pl_fd_mark(fd, tt_pl_is_random_path(path));
    return fd;
}

TT_EXPORT int close(int fd)
{
    tt_pl_fd_mark(fd, false);
    return REAL(close, close_fn)(fd);
}
