/* SPDX-License-Identifier: MIT */
/* sched_yield and the sleeps: nanosleep, clock_nanosleep, usleep and sleep, each a sync event
 * without an object (TT_SYNC_NOTE) that holds the result and, for a sleep a signal cut short,
 * the time that was left.
 *
 * The clock is replayed, so a replay need not sleep: a recorded sleep returns at once with its
 * recorded result and remaining time, and a program whose run is mostly waiting replays
 * faster than it ran. TINYTRACE_REAL_SLEEP=1 (`tinytrace replay --real-sleep`) makes the sleeps
 * sleep for real, for a program that watches another process or a peer meanwhile. A sleep is
 * also a point where schedule chaos may delay the thread (record/sync.c).
 *
 * glibc's sleep and usleep call its internal nanosleep, not the interposed one: each is
 * interposed on its own.
 */
#include "preload.h"

#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*yield_fn)(void);
typedef int (*nanosleep_fn)(const struct timespec *, struct timespec *);
typedef int (*clock_nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);
typedef int (*usleep_fn)(useconds_t);
typedef unsigned (*sleep_fn)(unsigned);

/* Begins the note of sleep @k; false when the session is gone (then only forward). */
static bool sleep_begin(tt_session **sp, tt_sync *op, enum site k)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return false;
    int rc = tt_sync_begin(s, op, TT_SYNC_NOTE, tt_pl_site_id(s, k), NULL);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        op->mode = TT_MODE_OFF;
    }
    *sp = s;
    return true;
}

static void sleep_end(tt_session *s, tt_sync *op, enum site k, int result)
{
    int rc = tt_sync_end(s, op, result, 0);
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
    tt_rt_guard_leave();
}

/* Replay: sleep for real only when asked to. */
static bool sleep_for_real(const tt_sync *op)
{
    return !tt_sync_replaying(op) || tt_rt_real_sleep();
}

TT_EXPORT int sched_yield(void)
{
    yield_fn f = REAL(sched_yield, yield_fn);
    int e0 = errno;
    tt_session *s;
    tt_sync op;
    if (!sleep_begin(&s, &op, S_sched_yield))
        return f();
    int r = f();
    if (tt_sync_replaying(&op))
        r = op.result;
    sleep_end(s, &op, S_sched_yield, r);
    errno = e0;
    return r;
}

TT_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    nanosleep_fn f = REAL(nanosleep, nanosleep_fn);
    int e0 = errno;
    tt_session *s;
    tt_sync op;
    if (!sleep_begin(&s, &op, S_nanosleep))
        return f(req, rem);
    int r = 0, e = 0;
    struct timespec left = { 0, 0 };
    if (sleep_for_real(&op)) {
        r = f(req, &left);
        e = r ? errno : 0;
    }
    if (tt_sync_replaying(&op)) {
        e = op.result;
        r = e ? -1 : 0;
        if (op.data_len == sizeof left)
            memcpy(&left, op.data, sizeof left);
    } else if (e == EINTR) {
        memcpy(op.data, &left, sizeof left);
        op.data_len = sizeof left;
    }
    if (r && e == EINTR && rem)
        *rem = left;
    sleep_end(s, &op, S_nanosleep, e);
    errno = r ? e : e0;
    return r;
}

TT_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
                              struct timespec *rem)
{
    clock_nanosleep_fn f = REAL(clock_nanosleep, clock_nanosleep_fn);
    int e0 = errno;
    tt_session *s;
    tt_sync op;
    if (!sleep_begin(&s, &op, S_clock_nanosleep))
        return f(clk, flags, req, rem);
    int r = 0;
    struct timespec left = { 0, 0 };
    if (sleep_for_real(&op))
        r = f(clk, flags, req, &left);
    if (tt_sync_replaying(&op)) {
        r = op.result;
        if (op.data_len == sizeof left)
            memcpy(&left, op.data, sizeof left);
    } else if (r == EINTR && !(flags & TIMER_ABSTIME)) {
        memcpy(op.data, &left, sizeof left);
        op.data_len = sizeof left;
    }
    if (r == EINTR && rem && !(flags & TIMER_ABSTIME))
        *rem = left;
    sleep_end(s, &op, S_clock_nanosleep, r);
    errno = e0; /* clock_nanosleep reports through its return value */
    return r;
}

TT_EXPORT int usleep(useconds_t us)
{
    usleep_fn f = REAL(usleep, usleep_fn);
    int e0 = errno;
    tt_session *s;
    tt_sync op;
    if (!sleep_begin(&s, &op, S_usleep))
        return f(us);
    int r = 0, e = 0;
    if (sleep_for_real(&op)) {
        r = f(us);
        e = r ? errno : 0;
    }
    if (tt_sync_replaying(&op)) {
        e = op.result;
        r = e ? -1 : 0;
    }
    sleep_end(s, &op, S_usleep, e);
    errno = r ? e : e0;
    return r;
}

TT_EXPORT unsigned sleep(unsigned secs)
{
    sleep_fn f = REAL(sleep, sleep_fn);
    int e0 = errno;
    tt_session *s;
    tt_sync op;
    if (!sleep_begin(&s, &op, S_sleep))
        return f(secs);
    unsigned left = 0;
    if (sleep_for_real(&op))
        left = f(secs);
    if (tt_sync_replaying(&op))
        left = (unsigned)op.result; /* the seconds that were left: 0 unless a signal came */
    sleep_end(s, &op, S_sleep, (int)left);
    errno = e0;
    return left;
}
