/* SPDX-License-Identifier: MIT */
/* Network peers: sockets whose other end is outside the recording.
 *
 * A socket of the internet families (AF_INET, AF_INET6) or of AF_UNIX that the program makes
 * with socket(), or gets from accept() on one, is *virtual*: every call on it is recorded, and
 * in replay none of them reaches the network. The results of socket, connect, bind, listen,
 * accept, accept4, shutdown, setsockopt, getsockopt, getsockname and getpeername are io IN
 * events on TT_CH_NET (struct in_head; the returned address in the address area, getsockopt's
 * value as the data). An address the program gives (connect, bind, sendto, sendmsg) is an io
 * OUT event on TT_CH_NET, compared in replay, so a replay that connects elsewhere stops there.
 * A send (send, sendto, sendmsg, and write and writev, which output.c hands over) is an IN
 * event with its result, then the bytes the kernel took as io OUT events on TT_CH_SEND, in
 * pieces of at most PIECE bytes: replay compares them with what the program sends now. The
 * bytes received come through read.c (a virtual socket is a socket to fstat), readiness
 * through poll.c, names through resolve.c.
 *
 * In replay a virtual socket is a *stand-in*: an unbound, unconnected AF_UNIX socket of the
 * same kind (stream, datagram, seqpacket) and the same SOCK_NONBLOCK and SOCK_CLOEXEC flags,
 * moved to the fd number the recording had when that number is free (else it keeps the one
 * the kernel gave it, and the program sees another number than the recording did). It is a
 * real descriptor, so the program's fd numbers, its fd_sets, fcntl, close, epoll_ctl and fstat
 * behave; it is a socket, so read.c replays its reads; it has no peer, so a write that reaches
 * it behind tinytrace's back (stdio's internal write, a child) fails with ENOTCONN instead of
 * going anywhere. Nothing connects, binds, listens or sends: a client replays without its server, a
 * server without its clients, and a server that runs during the replay sees nothing.
 *
 * Which fds are virtual: a table by fd number holding the socket's inode (the real socket's
 * while recording, the stand-in's in replay), checked with fstat at each call, so a number the
 * program closed and reused for something else is not mistaken for the socket. dup, dup2, dup3
 * and fcntl(F_DUPFD) are not followed (tt_pl_net_dup is there for the fd family to call).
 * Sockets of other families (netlink, packet), socketpair and sockets inherited from the
 * parent stay real.
 */
#include "preload.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*socket_fn)(int, int, int);
typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*listen_fn)(int, int);
typedef int (*shutdown_fn)(int, int);
typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);
typedef int (*getsockopt_fn)(int, int, int, void *, socklen_t *);
typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*sendto_fn)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

/* ---------------------------------------------------------------- which fds are virtual */

#define VFD_MAX 65536

/* The inode of the virtual socket at each fd number, 0 for none. Relaxed: an fd is made and
 * used in the program's own order, which orders these; a stale entry is caught by the inode. */
static _Atomic uint64_t vfd_ino[VFD_MAX] TT_BIG_BSS;

static void vfd_mark(int fd)
{
    struct stat st;
    if (fd >= 0 && fd < VFD_MAX && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
        atomic_store_explicit(&vfd_ino[fd], (uint64_t)st.st_ino, memory_order_relaxed);
}

static bool vfd_is(int fd)
{
    if (fd < 0 || fd >= VFD_MAX)
        return false;
    uint64_t ino = atomic_load_explicit(&vfd_ino[fd], memory_order_relaxed);
    if (!ino)
        return false;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && (uint64_t)st.st_ino == ino)
        return true;
    /* closed and reused for something else: forget it, unless it was marked anew meanwhile */
    atomic_compare_exchange_strong_explicit(&vfd_ino[fd], &ino, 0, memory_order_relaxed,
                                            memory_order_relaxed);
    return false;
}

bool tt_pl_net_maybe(int fd)
{
    return fd >= 0 && fd < VFD_MAX &&
           atomic_load_explicit(&vfd_ino[fd], memory_order_relaxed) != 0;
}

void tt_pl_net_dup(int from, int to)
{
    if (vfd_is(from))
        vfd_mark(to);
}

static bool virtual_domain(int domain)
{
    return domain == AF_INET || domain == AF_INET6 || domain == AF_UNIX;
}

/* The stand-in of a virtual socket of @type (with its SOCK_* flags) that the recording had at
 * fd @want: placed there when that number is free, else left where the kernel put it. */
static int standin(int want, int type)
{
    int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
    int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (base != SOCK_STREAM && base != SOCK_SEQPACKET)
        base = SOCK_DGRAM;
    int fd = REAL(socket, socket_fn)(AF_UNIX, base | flags, 0);
    if (fd >= 0 && want >= 0 && fd != want) {
        /* F_DUPFD takes the lowest free number from @want on: it never replaces an fd that
         * another thread opened there meanwhile, as dup2 would */
        int d = fcntl(fd, (flags & SOCK_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, want);
        if (d == want) {
            close(fd);
            fd = d;
        } else if (d >= 0) {
            close(d);
        }
    }
    if (fd >= 0)
        vfd_mark(fd);
    return fd;
}

/* ---------------------------------------------------------------- the calls */

enum net_kind {
    NK_SOCKET, NK_CONNECT, NK_BIND, NK_LISTEN, NK_SHUTDOWN, NK_SETSOCKOPT, NK_GETSOCKOPT,
    NK_GETSOCKNAME, NK_GETPEERNAME, NK_ACCEPT, NK_ACCEPT4,
    NK_SEND, NK_SENDTO, NK_SENDMSG, NK_WRITE, NK_WRITEV, /* sends: from NK_SEND on */
};

static const enum site net_sites[] = {
    S_socket, S_connect, S_bind, S_listen, S_shutdown, S_setsockopt, S_getsockopt,
    S_getsockname, S_getpeername, S_accept, S_accept4,
    S_send, S_sendto, S_sendmsg, S_write, S_writev,
};

struct net_args {
    enum net_kind kind;
    int fd;
    int i1, i2, i3;            /* socket: domain, type, protocol; listen: backlog; shutdown:
                                * how; *sockopt: level, optname; accept4 and sends: flags */
    const struct sockaddr *to; /* connect, bind, sendto: the address the program gives */
    socklen_t tolen;
    struct sockaddr *addr;     /* accept, getsockname, getpeername: the address returned */
    socklen_t *addrlen;
    void *optval;              /* getsockopt */
    socklen_t *optlen;
    const void *coptval;       /* setsockopt */
    socklen_t coptlen;
    const void *buf;           /* send, sendto, write */
    size_t len;
    const struct iovec *iov;   /* writev */
    int iovcnt;
    const struct msghdr *msg;  /* sendmsg */
};

static ssize_t net_real(const struct net_args *a)
{
    switch (a->kind) {
    case NK_SOCKET:
        return REAL(socket, socket_fn)(a->i1, a->i2, a->i3);
    case NK_CONNECT:
        return REAL(connect, connect_fn)(a->fd, a->to, a->tolen);
    case NK_BIND:
        return REAL(bind, connect_fn)(a->fd, a->to, a->tolen);
    case NK_LISTEN:
        return REAL(listen, listen_fn)(a->fd, a->i1);
    case NK_SHUTDOWN:
        return REAL(shutdown, shutdown_fn)(a->fd, a->i1);
    case NK_SETSOCKOPT:
        return REAL(setsockopt, setsockopt_fn)(a->fd, a->i1, a->i2, a->coptval, a->coptlen);
    case NK_GETSOCKOPT:
        return REAL(getsockopt, getsockopt_fn)(a->fd, a->i1, a->i2, a->optval, a->optlen);
    case NK_GETSOCKNAME:
        return REAL(getsockname, accept_fn)(a->fd, a->addr, a->addrlen);
    case NK_GETPEERNAME:
        return REAL(getpeername, accept_fn)(a->fd, a->addr, a->addrlen);
    case NK_ACCEPT:
        return REAL(accept, accept_fn)(a->fd, a->addr, a->addrlen);
    case NK_ACCEPT4:
        return REAL(accept4, accept4_fn)(a->fd, a->addr, a->addrlen, a->i1);
    case NK_SEND:
        return REAL(send, send_fn)(a->fd, a->buf, a->len, a->i1);
    case NK_SENDTO:
        return REAL(sendto, sendto_fn)(a->fd, a->buf, a->len, a->i1, a->to, a->tolen);
    case NK_SENDMSG:
        return REAL(sendmsg, sendmsg_fn)(a->fd, a->msg, a->i1);
    case NK_WRITE:
        return REAL(write, write_fn)(a->fd, a->buf, a->len);
    case NK_WRITEV:
        return REAL(writev, writev_fn)(a->fd, a->iov, a->iovcnt);
    }
    errno = EINVAL;
    return -1;
}

static bool is_send(enum net_kind k)
{
    return k >= NK_SEND;
}

/* connect, accept and the sends may block: the real call is made outside the guard (read.c
 * says why) */
static bool may_block(enum net_kind k)
{
    return k == NK_CONNECT || k == NK_ACCEPT || k == NK_ACCEPT4 || is_send(k);
}

static bool returns_address(enum net_kind k)
{
    return k == NK_ACCEPT || k == NK_ACCEPT4 || k == NK_GETSOCKNAME || k == NK_GETPEERNAME;
}

/* The data a send hands the kernel, as an iovec. */
static const struct iovec *send_iov(const struct net_args *a, struct iovec *one, int *cnt)
{
    if (a->kind == NK_WRITEV) {
        *cnt = a->iovcnt;
        return a->iov;
    }
    if (a->kind == NK_SENDMSG) {
        *cnt = (int)a->msg->msg_iovlen;
        return a->msg->msg_iov;
    }
    *one = (struct iovec){ (void *)a->buf, a->len };
    *cnt = 1;
    return one;
}

/* The address the program gives, normalized into @out: an AF_INET address without its
 * sin_zero padding, which programs need not clear. Returns its length, 0 for none. */
static size_t given_address(const struct net_args *a, unsigned char out[NAME_CAP])
{
    const struct sockaddr *to = a->to;
    socklen_t len = a->tolen;
    if (a->kind == NK_SENDMSG) {
        to = a->msg->msg_name;
        len = a->msg->msg_namelen;
    } else if (a->kind != NK_CONNECT && a->kind != NK_BIND && a->kind != NK_SENDTO) {
        return 0;
    }
    if (!to || !len)
        return 0;
    size_t n = len < NAME_CAP ? len : NAME_CAP;
    memcpy(out, to, n);
    if (n >= sizeof(struct sockaddr_in) && to->sa_family == AF_INET)
        n = offsetof(struct sockaddr_in, sin_zero);
    return n;
}

/* The first @n bytes the program sends, as io OUT events on TT_CH_SEND: recorded, or compared
 * with the recorded ones. */
static int send_out(tt_session *s, enum site k, const struct iovec *iov, int cnt, size_t n)
{
    if (cnt == 1) { /* no copy */
        for (size_t off = 0; off < n;) {
            size_t piece = n - off < PIECE ? n - off : PIECE;
            int rc = tt_pl_io_event(s, TT_IO_OUT, TT_CH_SEND, k, (char *)iov[0].iov_base + off,
                                    piece, NULL);
            if (rc != TT_OK)
                return rc;
            off += piece;
        }
        return TT_OK;
    }
    char small[1024];
    size_t cap = n < PIECE ? n : PIECE;
    char *buf = cap <= sizeof small ? small : malloc(cap);
    if (!buf)
        return TT_E_NOMEM;
    int rc = TT_OK;
    int i = 0;
    size_t ioff = 0;
    for (size_t done = 0; done < n && rc == TT_OK;) {
        size_t piece = n - done < PIECE ? n - done : PIECE;
        for (size_t got = 0; got < piece;) { /* n <= the iovec's total: it does not run out */
            size_t take = iov[i].iov_len - ioff;
            if (take > piece - got)
                take = piece - got;
            memcpy(buf + got, (char *)iov[i].iov_base + ioff, take);
            got += take;
            ioff += take;
            if (ioff == iov[i].iov_len) {
                i++;
                ioff = 0;
            }
        }
        rc = tt_pl_io_event(s, TT_IO_OUT, TT_CH_SEND, k, buf, piece, NULL);
        done += piece;
    }
    if (buf != small)
        free(buf);
    return rc;
}

static ssize_t net_call(const struct net_args *a)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return net_real(a);
    if (a->kind == NK_SOCKET ? !virtual_domain(a->i1) : !vfd_is(a->fd)) {
        tt_rt_guard_leave();
        return net_real(a);
    }
    enum site k = net_sites[a->kind];
    const char *what = tt_pl_site_names[k];
    int e0 = errno;
    int rc;

    struct iovec one;
    int cnt = 0;
    const struct iovec *iov = NULL;
    size_t total = 0;
    if (is_send(a->kind)) {
        iov = send_iov(a, &one, &cnt);
        if (cnt < 0 || (cnt > 0 && !iov)) {
            tt_rt_guard_leave();
            return net_real(a); /* the kernel reports the bad argument; nothing is sent */
        }
        total = tt_pl_iov_total(iov, cnt);
    }

    unsigned char to[NAME_CAP];
    size_t tolen = given_address(a, to);
    if (tolen && (rc = tt_pl_io_event(s, TT_IO_OUT, TT_CH_NET, k, to, tolen, NULL)) != TT_OK)
        tt_rt_failed(rc, what);

    /* getsockopt's value is the data of the event */
    struct iovec val = { 0 };
    int vcnt = 0;
    if (a->kind == NK_GETSOCKOPT && a->optval && a->optlen) {
        val = (struct iovec){ a->optval, *a->optlen };
        vcnt = 1;
    }
    bool area = returns_address(a->kind);
    socklen_t room = area && a->addr && a->addrlen ? *a->addrlen : 0;
    struct in_head h = { 0 };

    if (tt_pl_recording(s)) {
        ssize_t r;
        if (may_block(a->kind)) {
            tt_rt_guard_leave();
            r = net_real(a);
            int real_errno = errno;
            if (!(s = tt_pl_enter())) {
                errno = real_errno;
                return r;
            }
            errno = real_errno;
        } else {
            r = net_real(a);
        }
        h.ret = r;
        h.err = r < 0 ? errno : 0;
        if (r >= 0 && area && a->addrlen) {
            h.namelen = *a->addrlen;
            size_t nb = h.namelen < room ? h.namelen : room;
            h.namebytes = (uint32_t)(nb < NAME_CAP ? nb : NAME_CAP);
        }
        if (r >= 0 && vcnt) {
            h.namelen = *a->optlen;
            h.len = *a->optlen < val.iov_len ? *a->optlen : val.iov_len;
        }
        if (r >= 0 && (a->kind == NK_SOCKET || a->kind == NK_ACCEPT || a->kind == NK_ACCEPT4))
            vfd_mark((int)r);
        rc = tt_pl_in_record(s, TT_CH_NET, k, &h, area, a->addr, &val, vcnt);
        if (rc != TT_OK)
            tt_rt_failed(rc, what);
    } else {
        char name[NAME_CAP];
        rc = tt_pl_in_replay(s, TT_CH_NET, k, &h, area, name, &val, vcnt);
        if (rc != TT_OK) {
            tt_rt_failed(rc, what);
            /* the program goes on (--keep-going): still nothing reaches the network */
            int fd = a->kind == NK_SOCKET ? standin(-1, a->i2) : -1;
            tt_rt_guard_leave();
            return fd >= 0 ? fd : net_real(a);
        }
        if (h.ret >= 0 && area && a->addrlen) {
            if (a->addr)
                memcpy(a->addr, name, h.namebytes < room ? h.namebytes : room);
            *a->addrlen = h.namelen;
        }
        if (h.ret >= 0 && vcnt)
            *a->optlen = h.namelen;
        if (h.ret >= 0 && (a->kind == NK_SOCKET || a->kind == NK_ACCEPT ||
                           a->kind == NK_ACCEPT4)) {
            int type = a->kind == NK_SOCKET ? a->i2
                       : a->kind == NK_ACCEPT4 ? SOCK_STREAM | a->i1 : SOCK_STREAM;
            int fd = standin((int)h.ret, type);
            h.ret = fd;
            h.err = fd < 0 ? errno : 0;
        }
    }

    bool sigpipe = false;
    if (is_send(a->kind)) {
        if (h.ret > 0) {
            size_t n = (size_t)h.ret < total ? (size_t)h.ret : total;
            if ((rc = send_out(s, k, iov, cnt, n)) != TT_OK)
                tt_rt_failed(rc, what);
        }
        /* the recorded run got SIGPIPE from the kernel; the replayed one gets it from here */
        bool nosig = (a->kind == NK_SEND || a->kind == NK_SENDTO || a->kind == NK_SENDMSG) &&
                     (a->i1 & MSG_NOSIGNAL);
        sigpipe = !tt_pl_recording(s) && h.ret < 0 && h.err == EPIPE && !nosig;
    }
    ssize_t r = (ssize_t)tt_pl_finish(&h, e0);
    if (sigpipe) {
        raise(SIGPIPE);
        errno = EPIPE;
    }
    return r;
}

/* ---------------------------------------------------------------- the interposed functions */

/* With _GNU_SOURCE, glibc declares the address arguments as transparent unions. */
#ifdef __SOCKADDR_ARG
#define SOCKADDR_PTR(a) (a)
#define CSOCKADDR_PTR(a) (a)
#else
#define SOCKADDR_PTR(a) ((a).__sockaddr__)
#define CSOCKADDR_PTR(a) ((a).__sockaddr__)
#endif

TT_EXPORT int socket(int domain, int type, int protocol)
{
    struct net_args a = { .kind = NK_SOCKET, .fd = -1, .i1 = domain, .i2 = type,
                          .i3 = protocol };
    return (int)net_call(&a);
}

TT_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    struct net_args a = { .kind = NK_CONNECT, .fd = fd, .to = CSOCKADDR_PTR(addr),
                          .tolen = len };
    return (int)net_call(&a);
}

TT_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    struct net_args a = { .kind = NK_BIND, .fd = fd, .to = CSOCKADDR_PTR(addr), .tolen = len };
    return (int)net_call(&a);
}

TT_EXPORT int listen(int fd, int backlog)
{
    struct net_args a = { .kind = NK_LISTEN, .fd = fd, .i1 = backlog };
    return (int)net_call(&a);
}

TT_EXPORT int shutdown(int fd, int how)
{
    struct net_args a = { .kind = NK_SHUTDOWN, .fd = fd, .i1 = how };
    return (int)net_call(&a);
}

TT_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    struct net_args a = { .kind = NK_SETSOCKOPT, .fd = fd, .i1 = level, .i2 = name,
                          .coptval = val, .coptlen = len };
    return (int)net_call(&a);
}

TT_EXPORT int getsockopt(int fd, int level, int name, void *restrict val,
                         socklen_t *restrict len)
{
    struct net_args a = { .kind = NK_GETSOCKOPT, .fd = fd, .i1 = level, .i2 = name,
                          .optval = val, .optlen = len };
    return (int)net_call(&a);
}

TT_EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len)
{
    struct net_args a = { .kind = NK_GETSOCKNAME, .fd = fd, .addr = SOCKADDR_PTR(addr),
                          .addrlen = len };
    return (int)net_call(&a);
}

TT_EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len)
{
    struct net_args a = { .kind = NK_GETPEERNAME, .fd = fd, .addr = SOCKADDR_PTR(addr),
                          .addrlen = len };
    return (int)net_call(&a);
}

TT_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len)
{
    struct net_args a = { .kind = NK_ACCEPT, .fd = fd, .addr = SOCKADDR_PTR(addr),
                          .addrlen = len };
    return (int)net_call(&a);
}

TT_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len, int flags)
{
    struct net_args a = { .kind = NK_ACCEPT4, .fd = fd, .addr = SOCKADDR_PTR(addr),
                          .addrlen = len, .i1 = flags };
    return (int)net_call(&a);
}

TT_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    struct net_args a = { .kind = NK_SEND, .fd = fd, .buf = buf, .len = n, .i1 = flags };
    return net_call(&a);
}

TT_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, __CONST_SOCKADDR_ARG addr,
                         socklen_t len)
{
    struct net_args a = { .kind = NK_SENDTO, .fd = fd, .buf = buf, .len = n, .i1 = flags,
                          .to = CSOCKADDR_PTR(addr), .tolen = len };
    return net_call(&a);
}

TT_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (!msg)
        return REAL(sendmsg, sendmsg_fn)(fd, msg, flags);
    struct net_args a = { .kind = NK_SENDMSG, .fd = fd, .msg = msg, .i1 = flags };
    return net_call(&a);
}

ssize_t tt_pl_net_write(int fd, const void *buf, size_t n)
{
    struct net_args a = { .kind = NK_WRITE, .fd = fd, .buf = buf, .len = n };
    return net_call(&a);
}

ssize_t tt_pl_net_writev(int fd, const struct iovec *iov, int cnt)
{
    struct net_args a = { .kind = NK_WRITEV, .fd = fd, .iov = iov, .iovcnt = cnt };
    return net_call(&a);
}
