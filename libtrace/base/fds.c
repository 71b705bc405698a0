/* SPDX-License-Identifier: MIT */
/* The tracer's own file descriptors, and where they are kept out of the program's way.
 *
 * A program may close every descriptor it did not open itself (close_range(3, ~0U, 0), a loop
 * over 0..1023, closefrom), or put its own files on every number (dup2 over 3..1023): daemons,
 * shells and sandboxes do. A descriptor tinytrace holds for the whole run (the writer's trace
 * file) is therefore put high up (tt_fd_high: a little below the soft RLIMIT_NOFILE, or below
 * 1024 when the limit is higher, so the kernel's table stays small), with FD_CLOEXEC, and
 * registered here. The preload library's fd family (instrument/preload/fdguard.c) reads the
 * registry on every close, close_range, closefrom, dup2, dup3 and fcntl, and answers for a
 * reserved descriptor what the program would have got had it not been there; when the program
 * puts a file on a reserved number, the owner's move function takes its descriptor elsewhere
 * first.
 *
 * A slot holds the reserving process's pid and the descriptor in one 64-bit atomic, so a
 * reader sees both of one reservation, never a torn pair, and lock-free (async-signal-safe: an
 * interposed close may run in a signal handler). A fork or vfork child, or a clone(2) without
 * them, inherits the slots but not their pid: its copies of the descriptors are its own to
 * close, and a slot of another pid counts as free. Reservations, releases and moves take one
 * mutex, so a release waits for a move in progress: after tt_fd_release no move function of
 * that slot runs, and its owner may close and free what the context points to.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base.h"

#define KEY(pid, fd) ((uint64_t)(uint32_t)(pid) << 32 | (uint32_t)((fd) + 1))
#define KEY_PID(k) ((int)(uint32_t)((k) >> 32))
#define KEY_FD(k) ((int)(uint32_t)(k) - 1) /* -1: the slot's descriptor was lost */

/* Below this many descriptors under the limit a descriptor is placed (tt_fd_high): a few more
 * of the tracer's own, and room for a move or two without leaving the top of the table. */
#define HEADROOM 16
/* The number tt_fd_high aims below when RLIMIT_NOFILE is higher (Linux: often 2^20): the
 * kernel's table grows to the highest descriptor, and a million entries cost 8 MiB. */
#define HIGH_CAP 1024

struct slot {
    /* KEY(pid, fd) of a reservation, 0: free. Relaxed everywhere: a reader needs nothing but
     * the key itself (the pid and the number come in one load), and the move and ctx fields
     * are only read under `lock`, which orders them. A reservation made before the program's
     * thread existed, or before its call in any order the program made, happens-before that
     * call, so coherence alone makes the call see it; a call that races with a reservation or
     * a move was racing with the tracer's own open or dup anyway, and either answer is one the
     * program could have had. */
    _Atomic uint64_t key;
    tt_fd_move_fn move; /* under lock */
    void *ctx;          /* under lock */
};

static struct slot slots[TT_FD_SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A fork child starts with the lock as the parent's thread left it: possibly held by a thread
 * that does not exist in the child. The slots are the parent's (another pid): nothing else to
 * reset. */
static void child_reset(void)
{
    pthread_mutex_init(&lock, NULL);
}

static void atfork_install(void)
{
    pthread_atfork(NULL, NULL, child_reset);
}

/* The calling process's pid. getpid itself, with the tracer's flag held, so that the preload
 * library's getpid (an input it records) only forwards. Async-signal-safe. */
static int self_pid(void)
{
    int was = tt_in_tracer;
    tt_in_tracer = 1;
    atomic_signal_fence(memory_order_seq_cst);
    int pid = (int)getpid();
    atomic_signal_fence(memory_order_seq_cst);
    tt_in_tracer = was;
    return pid;
}

int tt_fd_reserve(int fd, tt_fd_move_fn move, void *ctx)
{
    if (fd < 0)
        return -1;
    pthread_once(&atfork_once, atfork_install);
    int pid = self_pid(), got = -1;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < TT_FD_SLOTS && got < 0; i++) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_relaxed);
        if (k == 0 || KEY_PID(k) != pid) { /* free, or a parent's: this process has none there */
            slots[i].move = move;
            slots[i].ctx = ctx;
            atomic_store_explicit(&slots[i].key, KEY(pid, fd), memory_order_relaxed);
            got = i;
        }
    }
    pthread_mutex_unlock(&lock);
    return got;
}

void tt_fd_swap(int slot, int fd)
{
    if (slot < 0 || slot >= TT_FD_SLOTS)
        return;
    /* only the owner writes a taken slot; reserve and release do not touch it meanwhile */
    uint64_t k = atomic_load_explicit(&slots[slot].key, memory_order_relaxed);
    atomic_store_explicit(&slots[slot].key, KEY(KEY_PID(k), fd < 0 ? -1 : fd),
                          memory_order_relaxed);
}

void tt_fd_release(int slot)
{
    if (slot < 0 || slot >= TT_FD_SLOTS)
        return;
    pthread_mutex_lock(&lock); /* waits for a move of this slot in progress (tt_fd_move) */
    atomic_store_explicit(&slots[slot].key, 0, memory_order_relaxed);
    slots[slot].move = NULL;
    slots[slot].ctx = NULL;
    pthread_mutex_unlock(&lock);
}

/* The slot that reserves @fd for this process, or -1. Lock-free. */
static int find(int fd)
{
    if (fd < 0)
        return -1;
    int pid = 0;
    for (int i = 0; i < TT_FD_SLOTS; i++) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_relaxed);
        if (k == 0 || KEY_FD(k) != fd)
            continue;
        if (!pid)
            pid = self_pid(); /* only on a match: close() of the program's own fds needs none */
        if (KEY_PID(k) == pid)
            return i;
    }
    return -1;
}

void tt_fd_drop_inherited(const int *keep, int nkeep)
{
    int pid = self_pid();
    for (int i = 0; i < TT_FD_SLOTS; i++) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_relaxed);
        if (k == 0 || KEY_PID(k) == pid)
            continue;
        int fd = KEY_FD(k);
        bool kept = false;
        for (int j = 0; j < nkeep && !kept; j++)
            kept = keep[j] == fd;
        if (fd >= 0 && !kept)
            close(fd);
        atomic_store_explicit(&slots[i].key, 0, memory_order_relaxed);
        slots[i].move = NULL;
        slots[i].ctx = NULL;
    }
}

bool tt_fd_is_reserved(int fd)
{
    return find(fd) >= 0;
}

size_t tt_fd_reserved_in(unsigned first, unsigned last, int *out, size_t cap)
{
    size_t n = 0;
    int pid = 0;
    for (int i = 0; i < TT_FD_SLOTS && n < cap; i++) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_relaxed);
        int fd = k ? KEY_FD(k) : -1;
        if (fd < 0 || (unsigned)fd < first || (unsigned)fd > last)
            continue;
        if (!pid)
            pid = self_pid();
        if (KEY_PID(k) != pid)
            continue;
        size_t j = n++; /* insertion, ascending (a number is one owner's: no duplicates) */
        while (j > 0 && out[j - 1] > fd) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = fd;
    }
    return n;
}

int tt_fd_move(int fd)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    int i = find(fd); /* again under the lock: the owner may have moved or released it */
    if (i >= 0 && slots[i].move)
        rc = slots[i].move(slots[i].ctx, fd);
    pthread_mutex_unlock(&lock);
    return rc;
}

int tt_fd_relocate(int slot, int fd)
{
    int hi = tt_fd_high(fd);
    int e = errno;
    tt_fd_swap(slot, hi);
    close(fd);
    errno = e;
    return hi;
}

int tt_fd_high(int fd)
{
    struct rlimit rl;
    rlim_t lim = HIGH_CAP;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < lim)
        lim = rl.rlim_cur;
    int base = lim > 3 + 2 * HEADROOM ? (int)lim - HEADROOM : 3;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (hi < 0 && base > 3) /* nothing free up there: the lowest number above stdio */
        hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    return hi;
}
