/* SPDX-License-Identifier: MIT */
/* bench-offmode — what a TT_* macro costs when the session is off.
 *
 * A program that keeps its TT_* calls in a release build pays for them in off mode. Each macro
 * is timed in a loop of N calls against the same loop without it, in one process, the variants
 * alternating over R rounds; the figure is the median over the rounds of (macro loop - empty
 * loop) / N, in ns per call. Two forms of each macro are timed:
 *
 *   gated     the macro as <tinytrace/event.h> defines it: an inline test of the session, and
 *             a call only when it is active
 *   call      the out-of-line function the macro used to expand to (tt_safepoint, tt_io, ...),
 *             which tests the session after the call
 *
 * The loop stores to a volatile after each call, so the compiler must test the session each
 * time (it cannot hoist the load: the store might alias it). Prints a table, or JSON with
 * --json. Usage: bench-offmode [--calls N] [--rounds R] [--json]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

static volatile uint64_t g_sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { V_EMPTY, V_SAFEPOINT, V_IO, V_USER, V_ALLOC, V_FREE, V_ENTER_EXIT,
       C_SAFEPOINT, C_IO, C_USER, C_ALLOC, C_FREE, V_COUNT };
static const char *const names[V_COUNT] = {
    "empty loop", "TT_SAFEPOINT", "TT_IO", "TT_USER", "TT_ALLOC", "TT_FREE", "TT_ENTER+TT_EXIT",
    "tt_safepoint()", "tt_io()", "tt_user()", "tt_alloc()", "tt_free()",
};

/* One function per variant, all of the same shape (noinline, so each is compiled alike and
 * timed as a whole; a switch inside one loop would time the switch). */
#define LOOP(name, call)                                                                           \
    __attribute__((noinline)) static uint64_t name(tt_session *s, uint64_t n)                     \
    {                                                                                              \
        uint64_t acc = 0;                                                                          \
        char buf[8] = "abcdefg";                                                                   \
        size_t got = 0;                                                                            \
        (void)buf;                                                                                 \
        (void)got;                                                                                 \
        (void)s;                                                                                   \
        for (uint64_t i = 0; i < n; i++) {                                                         \
            acc += i ^ (acc >> 3);                                                                 \
            call;                                                                                  \
            g_sink = acc;                                                                          \
        }                                                                                          \
        return acc;                                                                                \
    }
LOOP(l_empty, (void)0)
LOOP(l_safepoint, TT_SAFEPOINT(s, 1, 2))
LOOP(l_io, TT_IO(s, TT_IO_OUT, 3, buf, sizeof buf, &got))
LOOP(l_user, TT_USER(s, 4, buf, sizeof buf))
LOOP(l_alloc, TT_ALLOC(s, 5, 64, buf))
LOOP(l_free, TT_FREE(s, 6, buf))
LOOP(l_enter_exit, (TT_ENTER(s, 7), TT_EXIT(s, 7)))
LOOP(c_safepoint, tt_safepoint(s, 1, 2))
LOOP(c_io, tt_io(s, TT_IO_OUT, 3, buf, sizeof buf, &got))
LOOP(c_user, tt_user(s, 4, buf, sizeof buf))
LOOP(c_alloc, tt_alloc(s, 5, 64, buf))
LOOP(c_free, tt_free(s, 6, buf))

static uint64_t (*const loops[V_COUNT])(tt_session *, uint64_t) = {
    l_empty, l_safepoint, l_io, l_user, l_alloc, l_free, l_enter_exit,
    c_safepoint, c_io, c_user, c_alloc, c_free,
};

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    uint64_t n = 20000000;
    unsigned rounds = 7;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: bench-offmode [--calls N] [--rounds R] [--json]\n");
            return 2;
        }
    }
    if (n == 0 || rounds == 0 || rounds > 99) {
        fprintf(stderr, "bench-offmode: --calls must be > 0, --rounds 1..99\n");
        return 2;
    }
    tt_config cfg;
    tt_session *s = NULL;
    tt_error_info err;
    tt_config_init(&cfg);
    if (tt_session_open(&cfg, &s, &err) != TT_OK || tt_session_mode(s) != TT_MODE_OFF) {
        fprintf(stderr, "bench-offmode: no off session: %s\n", err.message);
        return 1;
    }
    static double ns[V_COUNT][100];
    uint64_t expect = loops[V_EMPTY](s, n); /* and a warm-up */
    for (unsigned r = 0; r < rounds; r++) {
        double base = 0;
        for (int v = 0; v < V_COUNT; v++) {
            uint64_t t0 = now_ns();
            uint64_t acc = loops[v](s, n);
            double dt = (double)(now_ns() - t0);
            if (acc != expect) {
                fprintf(stderr, "bench-offmode: %s computed another value\n", names[v]);
                return 1;
            }
            if (v == V_EMPTY)
                base = dt;
            ns[v][r] = v == V_EMPTY ? dt / (double)n : (dt - base) / (double)n;
        }
    }
    if (json)
        printf("{\"calls\": %" PRIu64 ", \"rounds\": %u", n, rounds);
    else
        printf("off mode, %" PRIu64 " calls, median of %u rounds, ns per call over the empty loop\n",
               n, rounds);
    for (int v = 0; v < V_COUNT; v++) {
        double sorted[100];
        memcpy(sorted, ns[v], rounds * sizeof sorted[0]);
        qsort(sorted, rounds, sizeof sorted[0], cmp);
        double med = sorted[rounds / 2];
        if (json)
            printf(", \"%s\": {\"median_ns\": %.3f, \"min_ns\": %.3f, \"max_ns\": %.3f}", names[v],
                   med, sorted[0], sorted[rounds - 1]);
        else
            printf("  %-18s %7.3f  (min %.3f, max %.3f)%s\n", names[v], med, sorted[0],
                   sorted[rounds - 1], v == V_EMPTY ? "  ns per iteration" : "");
    }
    if (json)
        printf("}\n");
    tt_session_close(s, NULL);
    return 0;
}
