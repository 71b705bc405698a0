/* SPDX-License-Identifier: MIT */
/* The workload of bench/compare: call-heavy code, in every variant the comparison needs.
 *
 * Usage: compare-workload loop|rec|fib|many CALLS [THREADS]
 *
 *   loop  a tight loop calling the non-inlined leaf() CALLS times;
 *   rec   a loop calling rec(DEPTH - 1), which recurses down to 0: CALLS calls of rec() in all;
 *   fib   naive binary-recursive fib(): fib(FIB_N) again and again, then smaller fib(k) for
 *         the rest, so that the calls add up to exactly CALLS;
 *   many  (built with -DWL_MANY and the file bench/gen-many.py generates) the entry points of a
 *         generated program of a few thousand functions in turn, each while its calls fit,
 *         then many_leaf() for the rest: exactly CALLS calls.
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
#define FIB_N 20 /* fib(20): 21 891 calls, 20 deep */

#if defined(WL_CAPI)
#include <tinytrace/tinytrace.h>
static tt_session *sess;
static uint32_t fn_leaf, fn_rec, fn_fib;
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
enum { fn_leaf = 1, fn_rec = 2, fn_fib = 3 };
#define ENTER(fn) lttng_ust_tracepoint(tt_compare, enter, (fn))
#define EXIT(fn) lttng_ust_tracepoint(tt_compare, exit, (fn))
#else
#define ENTER(fn) ((void)0)
#define EXIT(fn) ((void)0)
#endif

enum { MODE_LOOP, MODE_REC, MODE_FIB, MODE_MANY };
static int mode;
static unsigned long per_thread;

NOIPA unsigned long leaf(unsigned long i);
NOIPA unsigned long rec(unsigned long d, unsigned long i);
NOIPA unsigned long fib(unsigned long n);

#if defined(WL_MANY)
struct many_entry {
    unsigned long (*fn)(unsigned long);
    unsigned long calls;
};
extern const struct many_entry many_entries[];
extern const unsigned long many_nentries;
unsigned long many_leaf(unsigned long x);
#endif

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

NOIPA unsigned long fib(unsigned long n)
{
    ENTER(fn_fib);
    BARRIER_ON(n);
    unsigned long v = n < 2 ? n : fib(n - 1) + fib(n - 2);
    BARRIER_ON(v);
    EXIT(fn_fib);
    return v;
}

/* Calls of fib(n) in all: 1 for n < 2, else 1 + those of fib(n - 1) and fib(n - 2). */
static NOINSTR unsigned long fib_calls(unsigned long n)
{
    unsigned long a = 1, b = 1; /* fib_calls(0), fib_calls(1) */
    for (unsigned long k = 2; k <= n; k++) {
        unsigned long c = 1 + a + b;
        a = b;
        b = c;
    }
    return n == 0 ? a : b;
}

static void *worker(void *arg)
{
    unsigned long acc = 0, base = (unsigned long)(uintptr_t)arg;
    if (mode == MODE_REC) {
        for (unsigned long i = 0; i < per_thread / DEPTH; i++)
            acc += rec(DEPTH - 1, base + i);
    } else if (mode == MODE_FIB) {
        unsigned long left = per_thread;
        for (unsigned long n = FIB_N + 1; n-- > 0;)
            for (unsigned long c = fib_calls(n); left >= c; left -= c)
                acc += fib(n);
    } else if (mode == MODE_MANY) {
#if defined(WL_MANY)
        unsigned long left = per_thread;
        for (int fit = 1; fit;) {
            fit = 0;
            for (unsigned long k = 0; k < many_nentries; k++) {
                if (many_entries[k].calls <= left) {
                    left -= many_entries[k].calls;
                    acc += many_entries[k].fn(base + left);
                    fit = 1;
                }
            }
        }
        for (; left; left--)
            acc += many_leaf(base + left);
#endif
    } else {
        for (unsigned long i = 0; i < per_thread; i++)
            acc += leaf(base + i);
    }
    return (void *)(uintptr_t)acc;
}

static NOINSTR int usage(const char *msg)
{
    fprintf(stderr, "compare-workload: %s\nUsage: compare-workload loop|rec|fib|many CALLS [THREADS]\n",
            msg);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4)
        return usage("wrong number of arguments");
    static const char *const modes[] = { "loop", "rec", "fib", "many" };
    mode = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(argv[1], modes[k]) == 0)
            mode = k;
    if (mode < 0)
        return usage("the mode is loop, rec, fib or many");
#if !defined(WL_MANY)
    if (mode == MODE_MANY)
        return usage("many: this build has no generated program (-DWL_MANY)");
#endif
    char *end;
    unsigned long calls = strtoul(argv[2], &end, 10);
    unsigned long threads = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
    if (*end || threads < 1 || threads > 64 || calls % (threads * (mode == MODE_REC ? DEPTH : 1)))
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
    if (rc == TT_OK)
        rc = tt_intern(sess, TT_OBJ_FUNCTION, "fib", &fn_fib);
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
