/* SPDX-License-Identifier: MIT */
/* Opening: open, open64, openat and openat64 remember whether the new fd is on a random device
 * (fds.c); close, which forgets it, is the fd guard's (fdguard.c). Nothing is recorded here:
 * opens in /proc and /sys are pseudo.c's. fopen, which must return a stream whose reads reach
 * the interposers, is in stdio.c.
 */
#include "preload.h"

#include <fcntl.h>
#include <stdarg.h>

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);

static inline bool needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* open, open64, openat and openat64: the mode is read only when the flags say it was passed.
 * Paths in /proc and /sys are pseudo.c's to open. */
#define OPEN_LIKE(name, fn_type, at, site, params, args)                                       \
    TT_EXPORT int name params                                                                  \
    {                                                                                          \
        mode_t mode = 0;                                                                       \
        if (needs_mode(flags)) {                                                               \
            va_list ap;                                                                        \
            va_start(ap, flags);                                                               \
            mode = va_arg(ap, mode_t);                                                         \
            va_end(ap);                                                                        \
        }                                                                                      \
        int fd;                                                                                \
        if (!tt_pl_pseudo_open(site, at, path, flags, mode, &fd)) {                            \
            fd = REAL(name, fn_type) args;                                                     \
            tt_pl_fd_mark(fd, tt_pl_is_random_path(path));                                     \
        }                                                                                      \
        return fd;                                                                             \
    }
OPEN_LIKE(open, open_fn, AT_FDCWD, S_open, (const char *path, int flags, ...),
          (path, flags, mode))
OPEN_LIKE(open64, open_fn, AT_FDCWD, S_open, (const char *path, int flags, ...),
          (path, flags, mode))
OPEN_LIKE(openat, openat_fn, dirfd, S_openat, (int dirfd, const char *path, int flags, ...),
          (dirfd, path, flags, mode))
OPEN_LIKE(openat64, openat_fn, dirfd, S_openat, (int dirfd, const char *path, int flags, ...),
          (dirfd, path, flags, mode))
