/* SPDX-License-Identifier: MIT */
/* Readiness: poll, ppoll, select, pselect, epoll_wait, epoll_pwait and epoll_pwait2 are
 * inputs, and so are the reads of eventfd, timerfd, signalfd and inotify descriptors.
 *
 * Every such call is recorded, whatever its fds are: in replay the reads of sockets, pipes,
 * terminals and the descriptors below come from the recording and never drain anything real,
 * so readiness has to come from it too, and a virtual socket (net.c) has no real readiness at
 * all. So the recorded result is returned for the whole call, without the real call: a real fd
 * in the set is not polled, and a replay never waits in poll. The request — each pollfd's fd
 * and events, select's nfds and its three sets — is an io OUT event on TT_CH_POLL, compared in
 * replay, so a program that polls other fds than the recording did stops there. The result is
 * an io IN event on TT_CH_POLL: struct in_head (the count, errno), then poll's revents in the
 * order of the array, select's three sets and the remaining timeout Linux writes back, or
 * epoll's events in the order the kernel gave them (their data as the program registered it,
 * which holds fds or, with ASLR off in both runs, the same pointers). The timeout and the
 * signal mask of ppoll, pselect and epoll_pwait are not applied in replay: no signal is
 * delivered there.
 *
 * eventfd, timerfd_create, signalfd, inotify_init and inotify_init1 stay real; the fds they
 * return are remembered, and fds.c makes their reads inputs (TT_CH_READ). They are anonymous
 * inodes, which share one inode number, so the mark is checked against the fd's kind only.
 */
#include "preload.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

typedef int (*poll_fn)(struct pollfd *, nfds_t, int);
typedef int (*ppoll_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
typedef int (*select_fn)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int (*pselect_fn)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                          const sigset_t *);
typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*epoll_pwait2_fn)(int, struct epoll_event *, int, const struct timespec *,
                               const sigset_t *);
typedef int (*eventfd_fn)(unsigned, int);
typedef int (*timerfd_create_fn)(int, int);
typedef int (*signalfd_fn)(int, const sigset_t *, int);
typedef int (*inotify_init_fn)(void);
typedef int (*inotify_init1_fn)(int);

/* glibc's fortified entry points. */
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
                const sigset_t *mask, size_t fdslen);

/* Larger requests than this pass through unrecorded (the events must stay under 1 MiB). */
#define POLL_MAX 65536

/* ---------------------------------------------------------------- anonymous-inode inputs */

#define ANON_MAX 65536
/* relaxed: as net.c's table, ordered by the program's own use of the fd */
static _Atomic uint64_t anon_bits[ANON_MAX / 64] TT_BIG_BSS;

static int anon_mark(int fd)
{
    if (fd >= 0 && fd < ANON_MAX && !tt_pl_vforked) /* a vfork child's map is its parent's */
        atomic_fetch_or_explicit(&anon_bits[fd / 64], 1ull << (fd % 64), memory_order_relaxed);
    return fd;
}

bool tt_pl_anon_input(int fd)
{
    return fd >= 0 && fd < ANON_MAX &&
           (atomic_load_explicit(&anon_bits[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

TT_EXPORT int eventfd(unsigned count, int flags)
{
    return anon_mark(REAL(eventfd, eventfd_fn)(count, flags));
}

/* glibc's eventfd_read reads through its internal read */
TT_EXPORT int eventfd_read(int fd, eventfd_t *value)
{
    return tt_pl_read_fd(fd, value, sizeof *value) == sizeof *value ? 0 : -1;
}

TT_EXPORT int timerfd_create(int clock, int flags)
{
    return anon_mark(REAL(timerfd_create, timerfd_create_fn)(clock, flags));
}

TT_EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
    return anon_mark(REAL(signalfd, signalfd_fn)(fd, mask, flags));
}

TT_EXPORT int inotify_init(void)
{
    return anon_mark(REAL(inotify_init, inotify_init_fn)());
}

TT_EXPORT int inotify_init1(int flags)
{
    return anon_mark(REAL(inotify_init1, inotify_init1_fn)(flags));
}

/* ---------------------------------------------------------------- the common part */

/* A buffer on the stack when small, else from the real malloc (the guard is held). */
struct pbuf {
    void *p;
    char small[512];
};

static void *pbuf_get(struct pbuf *b, size_t n)
{
    b->p = n <= sizeof b->small ? b->small : malloc(n ? n : 1);
    return b->p;
}

static void pbuf_put(struct pbuf *b)
{
    if (b->p != b->small)
        free(b->p);
}

/* The request, compared in replay; false when the replay diverged and the runtime let the
 * program go on (then the real call is made). */
static bool request(tt_session *s, enum site k, void *req, size_t len)
{
    int rc = tt_pl_io_event(s, TT_IO_OUT, TT_CH_POLL, k, req, len, NULL);
    if (rc == TT_OK)
        return true;
    tt_rt_failed(rc, tt_pl_site_names[k]);
    return tt_pl_recording(s);
}

/* A readiness call: @real makes it (outside the guard: it blocks); its result is recorded
 * from, or replayed into, @data (at most @len bytes). Returns false when the replay failed and
 * the runtime let the program go on: then the caller makes the real call. *@sp is updated
 * (NULL: the session ended while the call blocked). */
struct ready_call {
    int (*real)(void *ctx);
    void *ctx;
    /* record: puts the result of the call that returned @r into @data; returns its length */
    size_t (*fill)(void *ctx, int r, void *data);
    /* replay: hands the @n recorded bytes at @data to the caller (NULL: they are in place) */
    void (*give)(void *ctx, int r, const void *data, size_t n);
};

static bool ready(tt_session **sp, enum site k, const struct ready_call *c, void *data,
                  size_t len, int *ret, int *err)
{
    tt_session *s = *sp;
    struct in_head h = { 0 };
    struct iovec v = { data, len };
    if (tt_pl_recording(s)) {
        tt_rt_guard_leave();
        int r = c->real(c->ctx);
        int e = errno;
        *ret = r;
        *err = e;
        if (!(*sp = s = tt_pl_enter()))
            return true;
        h.ret = r;
        h.err = r < 0 ? e : 0;
        h.len = len ? c->fill(c->ctx, r, data) : 0;
        int rc = tt_pl_in_record(s, TT_CH_POLL, k, &h, false, NULL, &v, len ? 1 : 0);
        if (rc != TT_OK)
            tt_rt_failed(rc, tt_pl_site_names[k]);
        return true;
    }
    int rc = tt_pl_in_replay(s, TT_CH_POLL, k, &h, false, NULL, &v, len ? 1 : 0);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        return false;
    }
    if (h.len && c->give)
        c->give(c->ctx, (int)h.ret, data, (size_t)h.len);
    *ret = (int)h.ret;
    *err = h.err;
    return true;
}

/* Ends a readiness call made through ready(). */
static int ready_end(tt_session *s, int ret, int err, int e0)
{
    if (s)
        tt_rt_guard_leave();
    errno = ret < 0 ? err : e0;
    return ret;
}

/* ---------------------------------------------------------------- poll, ppoll */

struct poll_ctx {
    struct pollfd *fds;
    nfds_t nfds;
    int timeout;
    const struct timespec *ts;
    const sigset_t *mask;
    bool ppoll;
};

static int poll_real(void *p)
{
    struct poll_ctx *c = p;
    if (c->ppoll)
        return REAL(ppoll, ppoll_fn)(c->fds, c->nfds, c->ts, c->mask);
    return REAL(poll, poll_fn)(c->fds, c->nfds, c->timeout);
}

static size_t poll_fill(void *p, int r, void *data)
{
    struct poll_ctx *c = p;
    short *rev = data;
    for (nfds_t i = 0; i < c->nfds; i++)
        rev[i] = c->fds[i].revents;
    return c->nfds * sizeof *rev;
}

static void poll_give(void *p, int r, const void *data, size_t n)
{
    struct poll_ctx *c = p;
    const short *rev = data;
    for (nfds_t i = 0; i < c->nfds && i < n / sizeof *rev; i++)
        c->fds[i].revents = rev[i];
}

static int poll_common(struct poll_ctx *c)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return poll_real(c);
    if (c->nfds > POLL_MAX || (c->nfds && !c->fds)) {
        tt_rt_guard_leave();
        return poll_real(c);
    }
    enum site k = c->ppoll ? S_ppoll : S_poll;
    int e0 = errno;
    struct pbuf rb, vb;
    struct pollfd *req = pbuf_get(&rb, c->nfds * sizeof *req);
    short *rev = pbuf_get(&vb, c->nfds * sizeof *rev);
    int ret = -1, err = ENOMEM;
    bool done = false;
    if (req && rev) {
        for (nfds_t i = 0; i < c->nfds; i++)
            req[i] = (struct pollfd){ c->fds[i].fd, c->fds[i].events, 0 };
        struct ready_call rc = { poll_real, c, poll_fill, poll_give };
        done = (!c->nfds || request(s, k, req, c->nfds * sizeof *req)) &&
               ready(&s, k, &rc, rev, c->nfds * sizeof *rev, &ret, &err);
    }
    pbuf_put(&rb); /* (without the guard when the session ended meanwhile: nothing records) */
    pbuf_put(&vb);
    if (!done) {
        if (s)
            tt_rt_guard_leave();
        return poll_real(c);
    }
    return ready_end(s, ret, err, e0);
}

TT_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    struct poll_ctx c = { fds, nfds, timeout, NULL, NULL, false };
    return poll_common(&c);
}

TT_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
    if (fdslen / sizeof *fds < nfds)
        __chk_fail();
    return poll(fds, nfds, timeout);
}

TT_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
                    const sigset_t *mask)
{
    struct poll_ctx c = { fds, nfds, 0, ts, mask, true };
    return poll_common(&c);
}

TT_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
                          const sigset_t *mask, size_t fdslen)
{
    if (fdslen / sizeof *fds < nfds)
        __chk_fail();
    return ppoll(fds, nfds, ts, mask);
}

/* ---------------------------------------------------------------- select, pselect */

struct select_ctx {
    int nfds;
    fd_set *set[3];
    struct timeval *tv;        /* select: written back by Linux */
    const struct timespec *ts; /* pselect */
    const sigset_t *mask;
    bool pselect;
    size_t bytes;              /* of each set that nfds covers */
};

static int select_real(void *p)
{
    struct select_ctx *c = p;
    if (c->pselect)
        return REAL(pselect, pselect_fn)(c->nfds, c->set[0], c->set[1], c->set[2], c->ts,
                                         c->mask);
    return REAL(select, select_fn)(c->nfds, c->set[0], c->set[1], c->set[2], c->tv);
}

/* The data: each set the caller gave, then select's timeout. */
static size_t select_fill(void *p, int r, void *data)
{
    struct select_ctx *c = p;
    char *o = data;
    for (int i = 0; i < 3; i++)
        if (c->set[i]) {
            memcpy(o, c->set[i], c->bytes);
            o += c->bytes;
        }
    if (!c->pselect && c->tv) {
        memcpy(o, c->tv, sizeof *c->tv);
        o += sizeof *c->tv;
    }
    return (size_t)(o - (char *)data);
}

/* (the request, compared first, gave the same sets: @n is what select_fill returned) */
static void select_give(void *p, int r, const void *data, size_t n)
{
    struct select_ctx *c = p;
    const char *o = data;
    for (int i = 0; i < 3; i++)
        if (c->set[i]) {
            memcpy(c->set[i], o, c->bytes);
            o += c->bytes;
        }
    if (!c->pselect && c->tv)
        memcpy(c->tv, o, sizeof *c->tv);
}

static int select_common(struct select_ctx *c)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return select_real(c);
    if (c->nfds < 0 || c->nfds > FD_SETSIZE) {
        tt_rt_guard_leave();
        return select_real(c);
    }
    enum site k = c->pselect ? S_pselect : S_select;
    int e0 = errno;
    c->bytes = (size_t)(c->nfds + 63) / 64 * 8;
    /* the request: nfds, which sets were given, their bits */
    unsigned char req[8 + 3 * sizeof(fd_set)];
    uint32_t n32 = (uint32_t)c->nfds, which = 0;
    size_t rl = 8, dl = 0;
    for (int i = 0; i < 3; i++)
        if (c->set[i]) {
            which |= 1u << i;
            memcpy(req + rl, c->set[i], c->bytes);
            rl += c->bytes;
            dl += c->bytes;
        }
    memcpy(req, &n32, 4);
    memcpy(req + 4, &which, 4);
    if (!c->pselect && c->tv)
        dl += sizeof *c->tv;
    unsigned char data[3 * sizeof(fd_set) + sizeof(struct timeval)];
    struct ready_call rc = { select_real, c, select_fill, select_give };
    int ret = -1, err = 0;
    if (!request(s, k, req, rl) || !ready(&s, k, &rc, data, dl, &ret, &err)) {
        tt_rt_guard_leave();
        return select_real(c);
    }
    return ready_end(s, ret, err, e0);
}

TT_EXPORT int select(int nfds, fd_set *restrict r, fd_set *restrict w, fd_set *restrict e,
                     struct timeval *restrict tv)
{
    struct select_ctx c = { nfds, { r, w, e }, tv, NULL, NULL, false, 0 };
    return select_common(&c);
}

TT_EXPORT int pselect(int nfds, fd_set *restrict r, fd_set *restrict w, fd_set *restrict e,
                      const struct timespec *restrict ts, const sigset_t *restrict mask)
{
    struct select_ctx c = { nfds, { r, w, e }, NULL, ts, mask, true, 0 };
    return select_common(&c);
}

/* ---------------------------------------------------------------- epoll */

struct epoll_ctx {
    enum site k;
    int epfd, maxevents, timeout;
    struct epoll_event *events;
    const struct timespec *ts;
    const sigset_t *mask;
};

static int epoll_real(void *p)
{
    struct epoll_ctx *c = p;
    if (c->k == S_epoll_pwait2)
        return REAL(epoll_pwait2, epoll_pwait2_fn)(c->epfd, c->events, c->maxevents, c->ts,
                                                   c->mask);
    if (c->k == S_epoll_pwait)
        return REAL(epoll_pwait, epoll_pwait_fn)(c->epfd, c->events, c->maxevents, c->timeout,
                                                 c->mask);
    return REAL(epoll_wait, epoll_wait_fn)(c->epfd, c->events, c->maxevents, c->timeout);
}

/* epoll's data is the ready events only, straight from (and into) the caller's array */
static size_t epoll_fill(void *p, int r, void *data)
{
    return r > 0 ? (size_t)r * sizeof(struct epoll_event) : 0;
}

static int epoll_common(struct epoll_ctx *c)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return epoll_real(c);
    if (c->maxevents <= 0 || c->maxevents > POLL_MAX || !c->events) {
        tt_rt_guard_leave();
        return epoll_real(c);
    }
    int e0 = errno;
    struct ready_call rc = { epoll_real, c, epoll_fill, NULL };
    int ret = -1, err = 0;
    if (!ready(&s, c->k, &rc, c->events, (size_t)c->maxevents * sizeof *c->events, &ret,
               &err)) {
        tt_rt_guard_leave();
        return epoll_real(c);
    }
    return ready_end(s, ret, err, e0);
}

TT_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    struct epoll_ctx c = { S_epoll_wait, epfd, maxevents, timeout, events, NULL, NULL };
    return epoll_common(&c);
}

TT_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
                          const sigset_t *mask)
{
    struct epoll_ctx c = { S_epoll_pwait, epfd, maxevents, timeout, events, NULL, mask };
    return epoll_common(&c);
}

TT_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                           const struct timespec *ts, const sigset_t *mask)
{
    struct epoll_ctx c = { S_epoll_pwait2, epfd, maxevents, 0, events, ts, mask };
    return epoll_common(&c);
}
