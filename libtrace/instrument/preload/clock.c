/* SPDX-License-Identifier: MIT */
/* Clocks: clock_gettime, gettimeofday, time, timespec_get, clock and clock_getres are inputs on
 * TT_CH_CLOCK. The sites of clock_gettime and clock_getres name the clock (CLOCK_SITES and
 * CLOCK_RES_SITES, preload.h), so a replay that reads another clock than the recording did
 * diverges.
 */
#include "preload.h"

#include <sys/time.h>
#include <time.h>

/* The clock's place in CLOCK_SITES and CLOCK_RES_SITES (preload.h), which list the clocks in
 * one order: 0 is CLOCK_REALTIME, whose clock_gettime site is plain clock_gettime. */
static int clock_index(clockid_t clk)
{
    switch (clk) {
    case CLOCK_REALTIME: return 0;
    case CLOCK_MONOTONIC: return 1;
    case CLOCK_PROCESS_CPUTIME_ID: return 2;
    case CLOCK_THREAD_CPUTIME_ID: return 3;
    case CLOCK_MONOTONIC_RAW: return 4;
    case CLOCK_REALTIME_COARSE: return 5;
    case CLOCK_MONOTONIC_COARSE: return 6;
    case CLOCK_BOOTTIME: return 7;
    case CLOCK_REALTIME_ALARM: return 8;
    case CLOCK_BOOTTIME_ALARM: return 9;
    case CLOCK_TAI: return 10;
    default: return 11;
    }
}

static enum site clock_site(clockid_t clk)
{
    int i = clock_index(clk);
    return i ? (enum site)(S_clock_monotonic + i - 1) : S_clock_gettime;
}

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *restrict, void *restrict);
typedef time_t (*time_fn)(time_t *);
typedef int (*timespec_get_fn)(struct timespec *, int);
typedef clock_t (*clock_fn)(void);
typedef int (*clock_getres_fn)(clockid_t, struct timespec *);

TT_EXPORT int clock_gettime(clockid_t clk, struct timespec *ts)
{
    clock_gettime_fn f = REAL(clock_gettime, clock_gettime_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(clk, ts);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { ts, sizeof *ts }; /* glibc declares ts nonnull */
    if (tt_pl_recording(s)) {
        h.ret = f(clk, ts);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? v.iov_len : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CLOCK, clock_site(clk), &h, &v, 1)) {
        h.ret = f(clk, ts);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    gettimeofday_fn f = REAL(gettimeofday, gettimeofday_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(tv, tz);
    int e0 = errno;
    struct in_head h = { 0 };
    /* tv may be NULL (gettimeofday(NULL, &tz) asks for the zone only; the kernel and the vDSO
     * accept it), but glibc declares it nonnull: hide it from the optimizer before testing */
    struct timeval *tvp = tv;
    __asm__("" : "+r"(tvp));
    struct iovec v[2] = { { tvp, tvp ? sizeof *tv : 0 },
                          { tz, tz ? sizeof(struct timezone) : 0 } };
    if (tt_pl_recording(s)) {
        h.ret = f(tv, tz);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? tt_pl_iov_total(v, 2) : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CLOCK, S_gettimeofday, &h, v, 2)) {
        h.ret = f(tv, tz);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT time_t time(time_t *t)
{
    time_fn f = REAL(time, time_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(t);
    int e0 = errno;
    struct in_head h = { 0 };
    if (tt_pl_recording(s)) {
        h.ret = f(NULL);
        h.err = h.ret == -1 ? errno : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CLOCK, S_time, &h, NULL, 0)) {
        h.ret = f(NULL);
        h.err = errno;
    }
    if (t)
        *t = (time_t)h.ret;
    return (time_t)tt_pl_finish(&h, e0);
}

TT_EXPORT int timespec_get(struct timespec *ts, int base)
{
    timespec_get_fn f = REAL(timespec_get, timespec_get_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(ts, base);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { ts, sizeof *ts };
    if (tt_pl_recording(s)) {
        h.ret = f(ts, base);
        h.len = h.ret != 0 ? sizeof *ts : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CLOCK, S_timespec_get, &h, &v, 1))
        h.ret = f(ts, base);
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT clock_t clock(void)
{
    clock_fn f = REAL(clock, clock_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f();
    int e0 = errno;
    struct in_head h = { 0 };
    if (tt_pl_recording(s))
        h.ret = f();
    if (!tt_pl_in_simple(s, TT_CH_CLOCK, S_clock, &h, NULL, 0))
        h.ret = f();
    /* clock() reports failure as (clock_t)-1 without errno: keep the caller's */
    tt_rt_guard_leave();
    errno = e0;
    return (clock_t)h.ret;
}

TT_EXPORT int clock_getres(clockid_t clk, struct timespec *res)
{
    clock_getres_fn f = REAL(clock_getres, clock_getres_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(clk, res);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { res, res ? sizeof *res : 0 }; /* NULL asks only whether the clock is */
    if (tt_pl_recording(s)) {
        h.ret = f(clk, res);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? v.iov_len : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CLOCK, (enum site)(S_res_realtime + clock_index(clk)), &h, &v,
                         1)) {
        h.ret = f(clk, res);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}
