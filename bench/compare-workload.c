/* The workload of bench/compare: a call-heavy loop, in every variant the comparison needs.
 *
 * Usage: compare-workload loop|rec CALLS [THREADS]
 *
 *   loop  a tight loop calling the non-inlined leaf() CALLS times;
 *   rec   a loop calling rec(DEPTH - 1), which recurses down to 0: CALLS calls of rec() in all.
 *
 * CALLS must be a multiple of THREADS (and, for rec, of THREADS * DEPTH); each of the THREADS
 * threads makes CALLS / THREADS calls. With THREADS = 1, main calls worker() itself.
 *
 * The variants are compile-time:
 *   (nothing)                plain: no tracing at all;
 *   -finstrument-functions   every function but the helpers marked NOINSTR gets the
 *                            __cyg_profile_func_enter/exit calls: main, worker and leaf/rec,
 *                            i.e. 2 * CALLS + 2 + 2 * THREADS events. Whoever provides the hooks
 *                            (glibc's empty ones, the ideal recorder, tinytrace's preload library,
 *                            uftrace) records them;
 *   -DWL_CAPI                tinytrace's C API: tt_enter/tt_exit around the body of leaf/rec, in
 *                            a session opened from TINYTRACE_MODE/TINYTRACE_FILE: 2 * CALLS
 *                            events (+ the session's structural ones);
 *   -DWL_LTTNG               an LTTng-UST tracepoint at entry and exit of leaf/rec (provider in
 *                            compare-tp.h): 2 * CALLS events.
 *
 * Prints a checksum of the work on stdout, so that nothing is optimized away; exits non-zero if a
 * tracing call failed (C API), naming the first failure.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINSTR __attribute__((no_instrument_function))
#if defined(__GNUC__) && !defined(__clang__)
#define NOIPA __attribute__((noipa))
#else
#define NOIPA __attribute__((noinline))
#endif
#define BARRIER_ON(v) __asm__ __volatile__("" : "+r"(v) : : "memory")
#define DEPTH 16

#if defined(WL_CAPI)
#include <tinytrace/tinytrace.h>
static tt_session *sess;
static uint32_t fn_leaf, fn_rec;
static unsigned long fails;
static int first_rc;
static NOINSTR __attribute__((noinline, cold)) void failed(int rc)
{
    if (__atomic_fetch_add(&fails, 1, __ATOMIC_RELAXED) == 0)
        first_rc = rc;
}
#define ENTER(fn)                                                                                  \
    do {                                                                                           \
        int rc_ = tt_enter(sess, (fn));                                                            \
        if (__builtin_expect(rc_ != TT_OK, 0))                                                     \
            failed(rc_);                                                                           \
    } while (0)
#define EXIT(fn)                                                                                   \
    do {                                                                                           \
        int rc_ = tt_exit(sess, (fn));                                                             \
        if (__builtin_expect(rc_ != TT_OK, 0))                                                     \
            failed(rc_);                                                                           \
    } while (0)
#elif defined(WL_LTTNG)
#include "compare-tp.h"
enum { fn_leaf = 1, fn_rec = 2 };
#define ENTER(fn) lttng_ust_tracepoint(tt_compare, enter, (fn))
#define EXIT(fn) lttng_ust_tracepoint(tt_compare, exit, (fn))
#else
#define ENTER(fn) ((void)0)
#define EXIT(fn) ((void)0)
#endif

static int mode_rec;
static unsigned long per_thread;

NOIPA unsigned long leaf(unsigned long i);
NOIPA unsigned long rec(unsigned long d, unsigned long i);

NOIPA unsigned long leaf(unsigned long i)
{
    ENTER(fn_leaf);
    BARRIER_ON(i);
    unsigned long v = (i * 0x9E3779B97F4A7C15ull) ^ (i >> 29);
    BARRIER_ON(v);
    EXIT(fn_leaf);
    return v;
}

NOIPA unsigned long rec(unsigned long d, unsigned long i)
{
    ENTER(fn_rec);
    BARRIER_ON(i);
    unsigned long v = d ? rec(d - 1, i + 1) : i * 0x9E3779B97F4A7C15ull;
    BARRIER_ON(v);
    EXIT(fn_rec);
    return v ^ d;
}

static void *worker(void *arg)
{
    unsigned long acc = 0, base = (unsigned long)(uintptr_t)arg;
    if (mode_rec) {
        for (unsigned long i = 0; i < per_thread / DEPTH; i++)
            acc += rec(DEPTH - 1, base + i);
    } else {
        for (unsigned long i = 0; i < per_thread; i++)
            acc += leaf(base + i);
    }
    return (void *)(uintptr_t)acc;
}

static NOINSTR int usage(const char *msg)
{
    fprintf(stderr, "compare-workload: %s\nUsage: compare-workload loop|rec CALLS [THREADS]\n", msg);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4)
        return usage("wrong number of arguments");
    if (strcmp(argv[1], "loop") != 0 && strcmp(argv[1], "rec") != 0)
        return usage("the mode is loop or rec");
    mode_rec = argv[1][0] == 'r';
    char *end;
    unsigned long calls = strtoul(argv[2], &end, 10);
    unsigned long threads = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
    if (*end || threads < 1 || threads > 64 || calls % (threads * (mode_rec ? DEPTH : 1)))
        return usage("CALLS must be a multiple of THREADS (times 16 for rec); 1 <= THREADS <= 64");
    per_thread = calls / threads;

#if defined(WL_CAPI)
    tt_config cfg;
    tt_error_info err;
    int rc = tt_config_from_env(&cfg, &err);
    if (rc == TT_OK)
        rc = tt_session_open(&cfg, &sess, &err);
    if (rc == TT_OK)
        rc = tt_intern(sess, TT_OBJ_FUNCTION, "leaf", &fn_leaf);
    if (rc == TT_OK)
        rc = tt_intern(sess, TT_OBJ_FUNCTION, "rec", &fn_rec);
    if (rc != TT_OK) {
        fprintf(stderr, "compare-workload: %s\n", err.message);
        return 1;
    }
#endif

    unsigned long acc = 0;
    if (threads == 1) {
        acc = (unsigned long)(uintptr_t)worker(NULL);
    } else {
        pthread_t t[64];
        for (unsigned long k = 0; k < threads; k++)
            if (pthread_create(&t[k], NULL, worker, (void *)(uintptr_t)(k * per_thread)) != 0)
                return usage("pthread_create failed");
        for (unsigned long k = 0; k < threads; k++) {
            void *r;
            pthread_join(t[k], &r);
            acc += (unsigned long)(uintptr_t)r;
        }
    }
    printf("%lu\n", acc);

#if defined(WL_CAPI)
    rc = tt_session_close(sess, &err);
    if (rc != TT_OK || fails) {
        fprintf(stderr, "compare-workload: %lu failed calls (first: %s); close: %s\n", fails,
                tt_error_name(first_rc), rc == TT_OK ? "ok" : err.message);
        return 1;
    }
#endif
    return 0;
}
