/* SPDX-License-Identifier: MIT */
/* Random bytes: getrandom, getentropy and the arc4random family are inputs on TT_CH_RANDOM
 * (reads of /dev/urandom and /dev/random are too: fds.c, read.c, and fopen in stdio.c).
 */
#include "preload.h"

#include <stdlib.h>
#include <sys/random.h>

typedef ssize_t (*getrandom_fn)(void *, size_t, unsigned);
typedef int (*getentropy_fn)(void *, size_t);
typedef uint32_t (*arc4random_fn)(void);
typedef void (*arc4random_buf_fn)(void *, size_t);
typedef uint32_t (*arc4random_uniform_fn)(uint32_t);

TT_EXPORT ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    getrandom_fn f = REAL(getrandom, getrandom_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(buf, n, flags);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { buf, n };
    if (tt_pl_recording(s)) {
        h.ret = f(buf, n, flags);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret > 0 ? (uint64_t)h.ret : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_RANDOM, S_getrandom, &h, &v, 1)) {
        h.ret = f(buf, n, flags);
        h.err = errno;
    }
    return (ssize_t)tt_pl_finish(&h, e0);
}

TT_EXPORT int getentropy(void *buf, size_t n)
{
    getentropy_fn f = REAL(getentropy, getentropy_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(buf, n);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { buf, n };
    if (tt_pl_recording(s)) {
        h.ret = f(buf, n);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? n : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_RANDOM, S_getentropy, &h, &v, 1)) {
        h.ret = f(buf, n);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT uint32_t arc4random(void)
{
    arc4random_fn f = REAL(arc4random, arc4random_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f();
    uint32_t r = 0;
    struct in_head h = { .len = sizeof r };
    struct iovec v = { &r, sizeof r };
    if (tt_pl_recording(s))
        r = f();
    if (!tt_pl_in_simple(s, TT_CH_RANDOM, S_arc4random, &h, &v, 1))
        r = f();
    tt_rt_guard_leave();
    return r;
}

TT_EXPORT void arc4random_buf(void *buf, size_t n)
{
    arc4random_buf_fn f = REAL(arc4random_buf, arc4random_buf_fn);
    tt_session *s = tt_pl_enter();
    if (!s) {
        f(buf, n);
        return;
    }
    struct in_head h = { .len = n };
    struct iovec v = { buf, n };
    if (tt_pl_recording(s))
        f(buf, n);
    if (!tt_pl_in_simple(s, TT_CH_RANDOM, S_arc4random_buf, &h, &v, 1))
        f(buf, n);
    tt_rt_guard_leave();
}

TT_EXPORT uint32_t arc4random_uniform(uint32_t bound)
{
    arc4random_uniform_fn f = REAL(arc4random_uniform, arc4random_uniform_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(bound);
    uint32_t r = 0;
    struct in_head h = { .len = sizeof r };
    struct iovec v = { &r, sizeof r };
    if (tt_pl_recording(s))
        r = f(bound);
    if (!tt_pl_in_simple(s, TT_CH_RANDOM, S_arc4random_uniform, &h, &v, 1))
        r = f(bound);
    tt_rt_guard_leave();
    return r;
}
