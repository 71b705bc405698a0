/* SPDX-License-Identifier: MIT */
/* Which reads are inputs. read/readv/recv* are recorded when fstat says the fd is a socket, a
 * FIFO or a character device (terminals, /dev/null, /dev/urandom …); reads of regular files are
 * the program's input files and pass through untouched. Fds opened on /dev/urandom or
 * /dev/random are remembered (by open.c and fopen in stdio.c), so their reads go to
 * TT_CH_RANDOM instead of TT_CH_READ. Fds on pseudo-files (pseudo.c) are remembered too: their
 * reads are inputs on TT_CH_PSEUDO, although they are regular files (and, in a replay, maybe a
 * /dev/null stand-in).
 */
#include "preload.h"

#include <string.h>
#include <sys/stat.h>

/* Fds opened on /dev/urandom or /dev/random. Only the channel depends on it (a character
 * device is recorded anyway), so an fd beyond the map is still recorded, as TT_CH_READ. */
#define RANDFD_MAX 4096
static _Atomic uint64_t randfd[RANDFD_MAX / 64];

bool tt_pl_is_random_path(const char *path)
{
    return path && (!strcmp(path, "/dev/urandom") || !strcmp(path, "/dev/random"));
}

/* Fds on pseudo-files, by the same rules (an fd beyond the map reads live, in both runs). */
static _Atomic uint64_t pseudofd[RANDFD_MAX / 64];

void tt_pl_fd_mark(int fd, bool random)
{
    if (fd < 0 || fd >= RANDFD_MAX || UNLIKELY(tt_pl_vforked))
        return;
    uint64_t bit = 1ull << (fd % 64);
    if (atomic_load_explicit(&pseudofd[fd / 64], memory_order_relaxed) & bit)
        atomic_fetch_and_explicit(&pseudofd[fd / 64], ~bit, memory_order_relaxed);
    /* relaxed: the map is a hint for the channel; an fd is opened and read by the program's
     * own ordering, which already orders these */
    if (random)
        atomic_fetch_or_explicit(&randfd[fd / 64], bit, memory_order_relaxed);
    else if (atomic_load_explicit(&randfd[fd / 64], memory_order_relaxed) & bit)
        atomic_fetch_and_explicit(&randfd[fd / 64], ~bit, memory_order_relaxed);
}

void tt_pl_fd_mark_pseudo(int fd)
{
    if (fd >= 0 && fd < RANDFD_MAX && !tt_pl_vforked)
        atomic_fetch_or_explicit(&pseudofd[fd / 64], 1ull << (fd % 64), memory_order_relaxed);
}

bool tt_pl_fd_is_pseudo(int fd)
{
    return fd >= 0 && fd < RANDFD_MAX &&
           (atomic_load_explicit(&pseudofd[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

static bool fd_is_random(int fd)
{
    return fd >= 0 && fd < RANDFD_MAX &&
           (atomic_load_explicit(&randfd[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

uint32_t tt_pl_fd_channel(int fd, bool recv_call)
{
    if (tt_pl_fd_is_pseudo(fd))
        return recv_call ? 0 : TT_CH_PSEUDO;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return 0;
    if (S_ISCHR(st.st_mode) && fd_is_random(fd))
        return TT_CH_RANDOM;
    if (S_ISSOCK(st.st_mode))
        return recv_call ? TT_CH_RECV : TT_CH_READ;
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))
        return recv_call ? 0 : TT_CH_READ;
    if (!(st.st_mode & S_IFMT) && !recv_call && tt_pl_anon_input(fd))
        return TT_CH_READ; /* an eventfd, timerfd, signalfd or inotify fd (poll.c) */
    return 0;
}
