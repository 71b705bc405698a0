/* SPDX-License-Identifier: MIT */
/* Resource use and where the process runs: getrusage, times, sysinfo and getloadavg are inputs
 * on TT_CH_USAGE, sched_getcpu and getcpu on TT_CH_CPU. Each records the call's result and the
 * structure it filled; a replay hands both back without calling the real function. (glibc's
 * getloadavg reads /proc/loadavg through its internal open and read, which pseudo.c does not
 * see: hence its own interposer.)
 */
#include "preload.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/times.h>

typedef int (*getrusage_fn)(int, struct rusage *);
typedef clock_t (*times_fn)(struct tms *);
typedef int (*sysinfo_fn)(struct sysinfo *);
typedef int (*getloadavg_fn)(double *, int);
typedef int (*sched_getcpu_fn)(void);
typedef int (*getcpu_fn)(unsigned *, unsigned *);

/* glibc's prototype uses a transparent union for @who with _GNU_SOURCE. */
#ifdef __USE_GNU
#define WHO_ARG __rusage_who_t
#else
#define WHO_ARG int
#endif

TT_EXPORT int getrusage(WHO_ARG who, struct rusage *ru)
{
    getrusage_fn f = REAL(getrusage, getrusage_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f((int)who, ru);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { ru, sizeof *ru };
    if (tt_pl_recording(s)) {
        h.ret = f((int)who, ru);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? sizeof *ru : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_USAGE, S_getrusage, &h, &v, 1)) {
        h.ret = f((int)who, ru);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT clock_t times(struct tms *t)
{
    times_fn f = REAL(times, times_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(t);
    int e0 = errno;
    struct in_head h = { 0 };
    /* Linux accepts a NULL buffer and returns the ticks alone */
    struct iovec v = { t, t ? sizeof *t : 0 };
    if (tt_pl_recording(s)) {
        h.ret = f(t);
        h.err = h.ret == (clock_t)-1 ? errno : 0;
        h.len = h.ret != (clock_t)-1 ? v.iov_len : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_USAGE, S_times, &h, &v, 1)) {
        h.ret = f(t);
        h.err = errno;
    }
    return (clock_t)tt_pl_finish(&h, e0);
}

TT_EXPORT int sysinfo(struct sysinfo *info)
{
    sysinfo_fn f = REAL(sysinfo, sysinfo_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(info);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { info, sizeof *info };
    if (tt_pl_recording(s)) {
        h.ret = f(info);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? sizeof *info : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_USAGE, S_sysinfo, &h, &v, 1)) {
        h.ret = f(info);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int getloadavg(double *avg, int n)
{
    getloadavg_fn f = REAL(getloadavg, getloadavg_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(avg, n);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { avg, n > 0 ? (size_t)n * sizeof *avg : 0 };
    if (tt_pl_recording(s)) {
        h.ret = f(avg, n);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret > 0 ? (uint64_t)h.ret * sizeof *avg : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_USAGE, S_getloadavg, &h, &v, 1)) {
        h.ret = f(avg, n);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int sched_getcpu(void)
{
    sched_getcpu_fn f = REAL(sched_getcpu, sched_getcpu_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f();
    int e0 = errno;
    struct in_head h = { 0 };
    if (tt_pl_recording(s)) {
        h.ret = f();
        h.err = h.ret < 0 ? errno : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CPU, S_sched_getcpu, &h, NULL, 0)) {
        h.ret = f();
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int getcpu(unsigned *cpu, unsigned *node)
{
    getcpu_fn f = REAL(getcpu, getcpu_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(cpu, node);
    int e0 = errno;
    struct in_head h = { 0 };
    /* either may be NULL: the one asked for is recorded, and must be asked for again */
    struct iovec v[2] = { { cpu, cpu ? sizeof *cpu : 0 }, { node, node ? sizeof *node : 0 } };
    if (tt_pl_recording(s)) {
        h.ret = f(cpu, node);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? tt_pl_iov_total(v, 2) : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_CPU, S_getcpu, &h, v, 2)) {
        h.ret = f(cpu, node);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}
