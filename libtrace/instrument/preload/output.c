/* SPDX-License-Identifier: MIT */
/* Output. What reaches fds 1 and 2 (through write, writev or the stdio streams of stdio.c) is
 * cut into segments by content alone — a segment ends after a newline or at SEG_MAX bytes — and
 * each segment is one io OUT event, when TINYTRACE_CHECK_OUTPUT is set. So a recording made on a
 * terminal (line-buffered stdout) replays against a pipe (block-buffered) without a false
 * divergence. A last segment without newline is emitted by the destructor (life.c).
 */
#include "preload.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

/* Segments of what reached fd 1 and fd 2. */
#define SEG_MAX 4096

struct seg {
    pthread_mutex_t mu;
    size_t len;
    char *buf; /* SEG_MAX bytes */
};

/* the bytes apart from the heads: the child's reset at every start touches the two heads,
 * which then share one page of .bss with the rest of the small variables */
static char seg_bytes[2][SEG_MAX] TT_BIG_BSS;
static struct seg segs[2] = { { PTHREAD_MUTEX_INITIALIZER, 0, seg_bytes[0] },
                              { PTHREAD_MUTEX_INITIALIZER, 0, seg_bytes[1] } };

void tt_pl_child_reset(void)
{
    for (int i = 0; i < 2; i++) {
        pthread_mutex_init(&segs[i].mu, NULL);
        segs[i].len = 0;
    }
}

/* Called with the guard and g->mu held; returns with g->mu held. The event itself is made
 * without the mutex: in an ordered replay it waits for this thread's turn, and the thread whose
 * turn it is may need the mutex to write its own segment. */
static void seg_emit(tt_session *s, int fd, struct seg *g)
{
    if (!g->len)
        return;
    char out[SEG_MAX];
    size_t n = g->len;
    memcpy(out, g->buf, n);
    g->len = 0;
    pthread_mutex_unlock(&g->mu);
    int rc = tt_pl_io_event(s, TT_IO_OUT, fd == 1 ? TT_CH_STDOUT : TT_CH_STDERR, S_write, out,
                            n, NULL);
    if (rc != TT_OK)
        tt_rt_failed(rc, fd == 1 ? "write to stdout" : "write to stderr");
    pthread_mutex_lock(&g->mu);
}

static void seg_push(tt_session *s, int fd, const char *p, size_t n)
{
    struct seg *g = &segs[fd - 1];
    pthread_mutex_lock(&g->mu);
    while (n) {
        size_t room = SEG_MAX - g->len;
        size_t take = n < room ? n : room;
        const char *nl = memchr(p, '\n', take);
        if (nl)
            take = (size_t)(nl - p) + 1;
        memcpy(g->buf + g->len, p, take);
        g->len += take;
        p += take;
        n -= take;
        if (nl || g->len == SEG_MAX)
            seg_emit(s, fd, g);
    }
    pthread_mutex_unlock(&g->mu);
}

void tt_pl_seg_flush(tt_session *s, int fd)
{
    struct seg *g = &segs[fd - 1];
    pthread_mutex_lock(&g->mu);
    seg_emit(s, fd, g);
    pthread_mutex_unlock(&g->mu);
}

/* A replay's write is made for real before its bytes meet the recording: a signal delivery
 * the recording has next (a handler that ran, and wrote, before this write did) is made
 * first, or the handler's output would follow this write's. */
static void deliveries_first(tt_session *s)
{
    if (!tt_pl_recording(s) && tt_rt_tree())
        tt_rt_deliver_next();
}

/* A write to fd 1 or 2 while output is checked: written for real (in replay too), then the
 * bytes that were written are compared (replay) or recorded. */
ssize_t tt_pl_out_write(int fd, const void *buf, size_t n)
{
    write_fn f = REAL(write, write_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(fd, buf, n);
    deliveries_first(s);
    ssize_t r = f(fd, buf, n);
    int err = errno;
    if (r > 0)
        seg_push(s, fd, buf, (size_t)r);
    tt_rt_guard_leave();
    errno = err;
    return r;
}

TT_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    if ((fd == 1 || fd == 2) && tt_rt_check_output())
        return tt_pl_out_write(fd, buf, n);
    if (UNLIKELY(tt_pl_net_maybe(fd)))
        return tt_pl_net_write(fd, buf, n);
    return REAL(write, write_fn)(fd, buf, n);
}

TT_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    writev_fn f = REAL(writev, writev_fn);
    if (UNLIKELY(tt_pl_net_maybe(fd)) && fd != 1 && fd != 2)
        return tt_pl_net_writev(fd, iov, cnt);
    if ((fd != 1 && fd != 2) || !tt_rt_check_output())
        return f(fd, iov, cnt);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(fd, iov, cnt);
    deliveries_first(s);
    ssize_t r = f(fd, iov, cnt);
    int err = errno;
    size_t left = r > 0 ? (size_t)r : 0;
    for (int i = 0; i < cnt && left; i++) {
        size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
        seg_push(s, fd, iov[i].iov_base, k);
        left -= k;
    }
    tt_rt_guard_leave();
    errno = err;
    return r;
}
