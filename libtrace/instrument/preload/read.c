/* SPDX-License-Identifier: MIT */
/* Reads: read, readv, recv, recvfrom and recvmsg, and glibc's fortified entry points for them,
 * are inputs when fds.c says the fd is one (TT_CH_READ, TT_CH_RECV, TT_CH_RANDOM). They share
 * one path (in_call). recvfrom and recvmsg also record the peer's address, in the fixed address
 * area of the event (preload.h); recvmsg's control data is not replayed.
 *
 * A replayed read of a pipe also takes from the real pipe the bytes the recording read (drain):
 * what it gets comes from the recording all the same, but the process at the other end, replayed
 * too, writes into a pipe that empties as it did when recorded, so it neither blocks on a full
 * pipe nor meets a reader that has gone (SIGPIPE). The read takes what the pipe holds and goes on;
 * what is not there yet is owed (the pipe's debt, below) and taken by the next replayed read of
 * that descriptor, or waited for where the process could leave the writer behind: before it closes
 * that descriptor (close, or fclose of the replaced stdin: stdio.c), waits for a child, execs or
 * exits (tt_pl_pipes_settle, which takes what every owed pipe holds while it waits for one; any
 * settle makes one pass that does not wait over all of them). Waiting at the read itself stalled a
 * pipe with several readers (multiprocessing's task queue: every worker reads it, and the order
 * between processes is not replayed): a worker waited for bytes another had taken, until the
 * timeout. A recorded end of file is still waited for at the read (the writers' closes). A wait
 * lasts at most as long as a thread waits for its turn (TINYTRACE_ORDER_TIMEOUT_MS); a pipe
 * written from outside the tree (the tool's own stdin, TINYTRACE_OUTSIDE_FIFO) is never waited for
 * nor owed, and a process that runs alone drains nothing.
 */
#include "preload.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* glibc's fortified entry points: called instead of read & co. by programs built with
 * _FORTIFY_SOURCE, and reaching the kernel through glibc's internal aliases. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *addrlen);

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*readv_fn)(int, const struct iovec *, int);
typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*recvfrom_fn)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t (*recvmsg_fn)(int, struct msghdr *, int);

enum in_kind { IN_READ, IN_READV, IN_RECV, IN_RECVFROM, IN_RECVMSG };

struct in_args {
    enum in_kind kind;
    int fd, flags;
    void *buf;                  /* read, recv, recvfrom */
    size_t len;
    const struct iovec *iov;    /* readv */
    int iovcnt;
    struct sockaddr *addr;      /* recvfrom */
    socklen_t *addrlen;
    struct msghdr *msg;         /* recvmsg */
};

static const enum site in_sites[] = { S_read, S_readv, S_recv, S_recvfrom, S_recvmsg };

static ssize_t in_real(const struct in_args *a)
{
    switch (a->kind) {
    case IN_READ:
        return REAL(read, read_fn)(a->fd, a->buf, a->len);
    case IN_READV:
        return REAL(readv, readv_fn)(a->fd, a->iov, a->iovcnt);
    case IN_RECV:
        return REAL(recv, recv_fn)(a->fd, a->buf, a->len, a->flags);
    case IN_RECVFROM:
        return REAL(recvfrom, recvfrom_fn)(a->fd, a->buf, a->len, a->flags, a->addr, a->addrlen);
    case IN_RECVMSG:
        return REAL(recvmsg, recvmsg_fn)(a->fd, a->msg, a->flags);
    }
    errno = EINVAL;
    return -1;
}

/* recv* with MSG_TRUNC on a stream socket discards the bytes: nothing reaches the buffer
 * (which may be NULL), so there is nothing to record or to hand back. */
static bool discards(const struct in_args *a)
{
    int type;
    socklen_t l = sizeof type;
    return (a->flags & MSG_TRUNC) && a->kind != IN_READ && a->kind != IN_READV &&
           getsockopt(a->fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_STREAM;
}

/* Milliseconds until @deadline (tt_mono_ns's clock; 0: none, and so none left), at most 50:
 * the longest a wait polls before it looks again. */
static int ms_left(uint64_t deadline)
{
    uint64_t now = tt_mono_ns();
    if (!deadline || now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999u) / 1000000u;
    return ms < 50 ? (int)ms : 50;
}

/* Whether @st is the pipe the tool's stdin is (written from outside the tree). */
static bool outside_fifo(const struct stat *st)
{
    static _Atomic int parsed; /* 0 not yet, 1 none, 2 known; relaxed: all compute the same */
    static unsigned long long dev, ino;
    int p = atomic_load_explicit(&parsed, memory_order_relaxed);
    if (!p) {
        const char *v = tt_rt_setting(TT_ENV_OUTSIDE_FIFO);
        p = v && sscanf(v, "%llu:%llu", &dev, &ino) == 2 ? 2 : 1;
        atomic_store_explicit(&parsed, p, memory_order_relaxed);
    }
    return p == 2 && (unsigned long long)st->st_dev == dev &&
           (unsigned long long)st->st_ino == ino;
}

/* Reads up to @n bytes of pipe @fd that are there now, without waiting: -1 with EAGAIN when
 * there are none. RWF_NOWAIT, where the kernel takes it for a pipe (Linux 6.4 and later): a
 * count taken first (FIONREAD), the way on older kernels, can be emptied by another reader
 * before the read, which then waits for the pipe's next bytes. */
static ssize_t read_now(int fd, void *buf, size_t n)
{
    static atomic_int no_nowait; /* the kernel refused RWF_NOWAIT once: the count, then */
    if (!atomic_load_explicit(&no_nowait, memory_order_relaxed)) {
        struct iovec v = { buf, n };
        ssize_t r = syscall(SYS_preadv2, fd, &v, 1, -1L, -1L, RWF_NOWAIT);
        if (r >= 0 || errno == EAGAIN || errno == EINTR)
            return r;
        if (errno != EOPNOTSUPP && errno != EINVAL && errno != ENOSYS)
            return r;
        atomic_store_explicit(&no_nowait, 1, memory_order_relaxed);
    }
    int avail = 0;
    if (ioctl(fd, FIONREAD, &avail) != 0 || avail <= 0) {
        errno = EAGAIN;
        return -1;
    }
    size_t m = n < (size_t)avail ? n : (size_t)avail;
    return REAL(read, ssize_t (*)(int, void *, size_t))(fd, buf, m);
}

/* Takes up to @want bytes from pipe @fd and drops them (@eof: and then on to its end), waiting
 * for them until @deadline (tt_mono_ns; 0: no wait). Returns how many it did not get. */
static uint64_t take(int fd, uint64_t want, bool eof, uint64_t deadline)
{
    char buf[4096];
    while (want > 0 || eof) {
        size_t n = sizeof buf;
        if (!eof && n > want)
            n = (size_t)want;
        ssize_t r = read_now(fd, buf, n);
        if (r > 0) {
            want -= (uint64_t)r < want ? (uint64_t)r : want;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            return want; /* the end, or a descriptor that cannot be read */
        int left = ms_left(deadline);
        if (left <= 0)
            return want;
        struct pollfd pf = { fd, POLLIN, 0 };
        int pr = poll(&pf, 1, left);
        if (pr > 0 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL)) && !(pf.revents & POLLIN))
            return want; /* every writer has gone */
    }
    return 0;
}

/* The pipes' debts: bytes replayed reads took from the recording that their pipe did not hold
 * yet, by descriptor and pipe. Under debt_lock, a spin lock held for a scan of the table, never
 * across a call that may wait, and only with the guard held, so a signal handler on the same
 * thread never meets it held. A settle takes out of the table only what it was asked to pay;
 * the other pipes' entries stay in it, and are marked held while it takes what their pipes
 * hold (a pass of reads that do not wait), so that no other thread's drain or settle takes
 * them meanwhile: those skip a held entry, or come back for it. debt_n is how many slots are
 * used, read without the lock by the calls that pay (close's common case is one load). */
#define DEBT_MAX 32
struct debt {
    int fd;
    dev_t dev;
    ino_t ino;
    uint64_t bytes;
    bool held;
};
static struct debt debts[DEBT_MAX];
static atomic_flag debt_lock = ATOMIC_FLAG_INIT;
static atomic_uint debt_n;

static void debt_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&debt_lock, memory_order_acquire))
        ;
}

static void debt_release(void)
{
    atomic_flag_clear_explicit(&debt_lock, memory_order_release);
}

/* Takes out of the table what is owed on @fd (-1: on every pipe) into @out (room for
 * DEBT_MAX), but for entries another thread holds; returns how many it took, and sets *@busy
 * when it left a held one. */
static unsigned debt_take_all(int fd, struct debt *out, bool *busy)
{
    unsigned n = 0;
    if (!atomic_load_explicit(&debt_n, memory_order_relaxed))
        return 0;
    debt_acquire();
    for (unsigned i = 0; i < DEBT_MAX; i++)
        if (debts[i].bytes && (fd < 0 || debts[i].fd == fd)) {
            if (debts[i].held) {
                *busy = true;
                continue;
            }
            out[n++] = debts[i];
            debts[i].bytes = 0;
            atomic_fetch_sub_explicit(&debt_n, 1, memory_order_relaxed);
        }
    debt_release();
    return n;
}

/* Notes @n bytes owed on @fd, pipe @dev:@ino; false when the table is full. */
static bool debt_put(int fd, dev_t dev, ino_t ino, uint64_t n)
{
    bool put = false;
    debt_acquire();
    for (unsigned i = 0; i < DEBT_MAX && !put; i++)
        if (!debts[i].bytes) {
            debts[i] = (struct debt){ fd, dev, ino, n, false };
            atomic_fetch_add_explicit(&debt_n, 1, memory_order_relaxed);
            put = true;
        }
    debt_release();
    return put;
}

/* The end of a wait for a pipe: as long as a thread waits for its turn. */
static uint64_t wait_end(void)
{
    return tt_mono_ns() + (uint64_t)tt_rt_wait_ms() * 1000000u;
}

/* Whether @d's descriptor is still the pipe it was owed on (a close that does not pay, fclose
 * through glibc's own close, leaves the number closed or reused: then nothing is owed). */
static bool debt_live(const struct debt *d)
{
    struct stat st;
    return fstat(d->fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == d->dev &&
           st.st_ino == d->ino;
}

/* One pass over the pipes still in the table that no other thread holds: each is held, what
 * its pipe has now is taken (no wait), and the rest stays owed. Their descriptors go into
 * @pf (room for DEBT_MAX) for the caller's poll; returns how many. */
static unsigned debt_pass_others(struct pollfd *pf)
{
    unsigned idx[DEBT_MAX], n = 0;
    struct debt d[DEBT_MAX];
    if (!atomic_load_explicit(&debt_n, memory_order_relaxed))
        return 0;
    debt_acquire();
    for (unsigned i = 0; i < DEBT_MAX; i++)
        if (debts[i].bytes && !debts[i].held) {
            debts[i].held = true;
            idx[n] = i;
            d[n++] = debts[i];
        }
    debt_release();
    unsigned np = 0;
    for (unsigned k = 0; k < n; k++) {
        /* a descriptor no longer that pipe owes nothing; the others take what is there */
        d[k].bytes = debt_live(&d[k]) ? take(d[k].fd, d[k].bytes, false, 0) : 0;
        if (d[k].bytes)
            pf[np++] = (struct pollfd){ d[k].fd, POLLIN, 0 };
    }
    debt_acquire();
    for (unsigned k = 0; k < n; k++) {
        struct debt *e = &debts[idx[k]];
        e->held = false;
        e->bytes = d[k].bytes; /* held: no one else changed it meanwhile */
        if (!e->bytes)
            atomic_fetch_sub_explicit(&debt_n, 1, memory_order_relaxed);
    }
    debt_release();
    return np;
}

void tt_pl_pipes_settle(int fd)
{
    /* a vfork child's table is its parent's, who pays its own (and is stopped meanwhile) */
    if (!atomic_load_explicit(&debt_n, memory_order_relaxed) || UNLIKELY(tt_pl_vforked))
        return;
    struct debt mine[DEBT_MAX];
    unsigned n = 0;
    const uint64_t deadline = wait_end();
    for (;;) {
        /* what is asked for comes out of the table (an entry another thread holds for a
         * moment is taken at the next turn); the others stay, and are drained as they are */
        bool busy = false;
        struct debt more[DEBT_MAX];
        unsigned m = debt_take_all(fd, more, &busy), kept = 0;
        for (unsigned k = 0; k < n; k++)
            if (mine[k].bytes)
                mine[kept++] = mine[k];
        n = kept;
        for (unsigned k = 0; k < m && n < DEBT_MAX; k++)
            mine[n++] = more[k];
        struct pollfd pf[2 * DEBT_MAX];
        unsigned np = 0;
        bool wanted = busy;
        for (unsigned k = 0; k < n; k++) {
            /* checked at every turn: another thread may close the number meanwhile */
            mine[k].bytes = debt_live(&mine[k]) ? take(mine[k].fd, mine[k].bytes, false, 0)
                                                : 0;
            if (mine[k].bytes) {
                wanted = true;
                pf[np++] = (struct pollfd){ mine[k].fd, POLLIN, 0 };
            }
        }
        /* the writer this waits for may be stuck on a full pipe this process owes too */
        np += debt_pass_others(pf + np);
        int left = ms_left(deadline);
        if (!wanted || left <= 0)
            break; /* what is asked for is paid, or forgiven at the deadline */
        int pr = poll(pf, np, busy ? 1 : left);
        for (unsigned i = 0; pr > 0 && i < np; i++)
            if ((pf[i].revents & (POLLHUP | POLLERR | POLLNVAL)) && !(pf[i].revents & POLLIN))
                for (unsigned k = 0; k < n; k++)
                    if (mine[k].fd == pf[i].fd)
                        mine[k].bytes = 0; /* every writer has gone */
    }
}

void tt_pl_pipes_forget(void)
{
    atomic_flag_clear_explicit(&debt_lock, memory_order_relaxed);
    memset(debts, 0, sizeof debts);
    atomic_store_explicit(&debt_n, 0, memory_order_relaxed);
}

/* Replay: takes @want bytes from pipe @fd (@eof: the recording read its end) and drops them;
 * see the top of the file. The guard is held. */
static void drain(tt_session *s, int fd, uint64_t want, bool eof)
{
    struct stat st;
    (void)s;
    if (!tt_rt_tree() || tt_rt_alone() || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
        return;
    if (outside_fifo(&st)) {
        take(fd, want, eof, 0); /* what is there: its writer is not replayed */
        return;
    }
    struct debt old[DEBT_MAX];
    bool busy = false; /* held by another thread's settle: it stays owed, for later */
    unsigned n = debt_take_all(fd, old, &busy);
    for (unsigned k = 0; k < n; k++)
        if (old[k].dev == st.st_dev && old[k].ino == st.st_ino)
            want += old[k].bytes; /* an entry of a pipe this number no longer is: forgiven */
    if (eof) {
        take(fd, want, true, wait_end());
        return;
    }
    uint64_t owed = take(fd, want, false, 0);
    /* a full table: this read waits for its bytes, as every read once did */
    if (owed && !debt_put(fd, st.st_dev, st.st_ino, owed))
        take(fd, owed, false, wait_end());
}

static ssize_t in_call(const struct in_args *a)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return in_real(a);
    bool is_recv = a->kind == IN_RECV || a->kind == IN_RECVFROM || a->kind == IN_RECVMSG;
    uint32_t ch = tt_pl_fd_channel(a->fd, is_recv);
    if (!ch) {
        tt_rt_guard_leave();
        return in_real(a);
    }
    enum site k = in_sites[a->kind];
    int e0 = errno;

    struct iovec one = { a->buf, a->len };
    const struct iovec *iov = &one;
    int cnt = 1;
    void *name = NULL;
    socklen_t *namelen = NULL;
    if (a->kind == IN_READV) {
        iov = a->iov;
        cnt = a->iovcnt;
    } else if (a->kind == IN_RECVFROM) {
        name = a->addr;
        namelen = a->addrlen;
    } else if (a->kind == IN_RECVMSG) {
        iov = a->msg->msg_iov;
        cnt = (int)a->msg->msg_iovlen;
        name = a->msg->msg_name;
        namelen = &a->msg->msg_namelen;
    }
    bool area = a->kind == IN_RECVFROM || a->kind == IN_RECVMSG;
    socklen_t name_room = name && namelen ? *namelen : 0;
    if (cnt < 0 || (cnt > 0 && !iov)) {
        tt_rt_guard_leave();
        return in_real(a); /* let the real call report the bad argument; nothing is read */
    }

    struct in_head h = { 0 };
    int rc;
    if (tt_pl_recording(s)) {
        /* The real call may block: not under the guard, or a handler that siglongjmps out of
         * it (alarm timeouts) leaves the guard held and the rest of the thread unrecorded. */
        tt_rt_guard_leave();
        ssize_t r = in_real(a);
        int real_errno = errno;
        if (!(s = tt_pl_enter())) {
            errno = real_errno;
            return r;
        }
        errno = real_errno;
        h.ret = r;
        h.err = r < 0 ? errno : 0;
        /* recv with MSG_TRUNC returns a datagram's full length, more than was copied */
        size_t room = tt_pl_iov_total(iov, cnt);
        h.len = r > 0 && !discards(a) ? ((size_t)r < room ? (uint64_t)r : room) : 0;
        if (area && r >= 0 && namelen) {
            h.namelen = *namelen;
            size_t nb = h.namelen < name_room ? h.namelen : name_room;
            h.namebytes = (uint32_t)(nb < NAME_CAP ? nb : NAME_CAP);
        }
        if (a->kind == IN_RECVMSG && r >= 0)
            h.flags = (uint32_t)a->msg->msg_flags;
        rc = tt_pl_in_record(s, ch, k, &h, area, name, iov, cnt);
        if (rc != TT_OK)
            tt_rt_failed(rc, tt_pl_site_names[k]);
    } else {
        char addr[NAME_CAP];
        rc = tt_pl_in_replay(s, ch, k, &h, area, addr, iov, cnt);
        if (rc != TT_OK) {
            tt_rt_failed(rc, tt_pl_site_names[k]);
            tt_rt_guard_leave();
            return in_real(a);
        }
        if (area && h.ret >= 0 && namelen) {
            if (name) {
                size_t nb = h.namebytes < name_room ? h.namebytes : name_room;
                memcpy(name, addr, nb);
            }
            *namelen = h.namelen;
        }
        if (a->kind == IN_RECVMSG && h.ret >= 0) {
            a->msg->msg_flags = (int)h.flags;
            a->msg->msg_controllen = 0; /* control data (fds, credentials) is not replayed */
        }
        if (ch == TT_CH_READ && (a->kind == IN_READ || a->kind == IN_READV) && h.ret >= 0)
            drain(s, a->fd, (uint64_t)h.ret, h.ret == 0);
    }
    return (ssize_t)tt_pl_finish(&h, e0);
}

ssize_t tt_pl_read_fd(int fd, void *buf, size_t n)
{
    struct in_args a = { .kind = IN_READ, .fd = fd, .buf = buf, .len = n };
    return in_call(&a);
}

TT_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    return tt_pl_read_fd(fd, buf, n);
}

TT_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    if (n > buflen)
        __chk_fail();
    return tt_pl_read_fd(fd, buf, n);
}

TT_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    struct in_args a = { .kind = IN_READV, .fd = fd, .iov = iov, .iovcnt = iovcnt };
    return in_call(&a);
}

TT_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    struct in_args a = { .kind = IN_RECV, .fd = fd, .buf = buf, .len = n, .flags = flags };
    return in_call(&a);
}

TT_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
    if (n > buflen)
        __chk_fail();
    return recv(fd, buf, n, flags);
}

/* With _GNU_SOURCE, glibc declares the address argument as a transparent union. */
#ifdef __SOCKADDR_ARG
#define SOCKADDR_PTR(a) (a)
#else
#define SOCKADDR_PTR(a) ((a).__sockaddr__)
#endif

static ssize_t recvfrom_impl(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
                             socklen_t *addrlen)
{
    struct in_args a = { .kind = IN_RECVFROM, .fd = fd, .buf = buf, .len = n, .flags = flags,
                         .addr = addr, .addrlen = addrlen };
    return in_call(&a);
}

TT_EXPORT ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags, __SOCKADDR_ARG addr,
                           socklen_t *restrict addrlen)
{
    return recvfrom_impl(fd, buf, n, flags, SOCKADDR_PTR(addr), addrlen);
}

TT_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                                 struct sockaddr *addr, socklen_t *addrlen)
{
    if (n > buflen)
        __chk_fail();
    return recvfrom_impl(fd, buf, n, flags, addr, addrlen);
}

TT_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (!msg)
        return REAL(recvmsg, recvmsg_fn)(fd, msg, flags);
    struct in_args a = { .kind = IN_RECVMSG, .fd = fd, .msg = msg, .flags = flags };
    return in_call(&a);
}
