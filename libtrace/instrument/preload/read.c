/* Reads: read, readv, recv, recvfrom and recvmsg, and glibc's fortified entry points for them,
 * are inputs when fds.c says the fd is one (TT_CH_READ, TT_CH_RECV, TT_CH_RANDOM). They share
 * one path (in_call). recvfrom and recvmsg also record the peer's address, in the fixed address
 * area of the event (preload.h); recvmsg's control data is not replayed.
 */
#include "preload.h"

#include <string.h>
#include <sys/socket.h>
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
