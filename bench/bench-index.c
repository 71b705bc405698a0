/* SPDX-License-Identifier: MIT */
/* bench-index — records a run of a known shape for bench/run-index.sh.
 *
 *   bench-index --events N FILE
 *
 * One thread, a call tree of four levels: main → 10 phases → batches → leaves, where every 16th
 * leaf calls an inner function (so the tree has a fifth level). The number of batches per phase
 * is chosen so that the run records about N enter/exit events; the leaves rotate over four
 * functions. Every call's body is a small computation on its own value (no two leaves do the same
 * arithmetic), never a fixed sleep.
 *
 * Prints one line of key=value figures: events recorded (from the manifest of the closed file),
 * frames, wall seconds of the recording, and the process's peak RSS (getrusage ru_maxrss, which
 * includes the swapper thread). The exit status is non-zero only if a call failed or the
 * session did not close cleanly.
 */
#include <tinytrace/tinytrace.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define LEAVES_PER_BATCH 2000u
#define PHASES 10u

static uint64_t failures;

static inline void call(tt_session *s, int enter, uint32_t fn)
{
    if ((enter ? tt_enter(s, fn) : tt_exit(s, fn)) != TT_OK)
        failures++;
}

__attribute__((noinline)) static uint64_t leaf(tt_session *s, uint32_t fn, uint32_t inner,
                                                uint64_t v)
{
    call(s, 1, fn);
    v = v * 6364136223846793005u + 1442695040888963407u;
    if ((v >> 60) == 0 || (v & 15) == 0) {
        call(s, 1, inner);
        v ^= v >> 29;
        call(s, 0, inner);
    }
    call(s, 0, fn);
    return v;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    uint64_t events = 100000000u;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
            events = strtoull(argv[++i], NULL, 10);
        else
            file = argv[i];
    }
    if (!file) {
        fprintf(stderr, "usage: bench-index [--events N] FILE\n");
        return 2;
    }
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    tt_config_init(&cfg);
    if (tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err) != TT_OK ||
        tt_config_set_str(&cfg, TT_PARAM_FILE, file, &err) != TT_OK ||
        tt_config_set_str(&cfg, TT_PARAM_CALLER, "bench-index", &err) != TT_OK ||
        tt_session_open(&cfg, &s, &err) != TT_OK) {
        fprintf(stderr, "bench-index: %s\n", err.message);
        return 1;
    }
    uint32_t fmain, fphase, fbatch, finner, fleaf[4];
    tt_intern(s, TT_OBJ_FUNCTION, "main", &fmain);
    tt_intern(s, TT_OBJ_FUNCTION, "phase", &fphase);
    tt_intern(s, TT_OBJ_FUNCTION, "batch", &fbatch);
    tt_intern(s, TT_OBJ_FUNCTION, "inner", &finner);
    for (int i = 0; i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "leaf%d", i);
        tt_intern(s, TT_OBJ_FUNCTION, nm, &fleaf[i]);
    }
    tt_thread_name(s, "main");
    /* a leaf is 2 events, plus 2 for every 16th: about 2.125 events per leaf */
    uint64_t batches = (uint64_t)((double)events / 2.125 / LEAVES_PER_BATCH / PHASES);
    if (batches == 0)
        batches = 1;
    double t0 = now();
    uint64_t v = 12345;
    call(s, 1, fmain);
    for (uint32_t p = 0; p < PHASES; p++) {
        call(s, 1, fphase);
        for (uint64_t b = 0; b < batches; b++) {
            call(s, 1, fbatch);
            for (uint32_t l = 0; l < LEAVES_PER_BATCH; l++)
                v = leaf(s, fleaf[l & 3], finner, v + l);
            call(s, 0, fbatch);
        }
        call(s, 0, fphase);
    }
    call(s, 0, fmain);
    double t1 = now();
    if (tt_session_close(s, &err) != TT_OK) {
        fprintf(stderr, "bench-index: close: %s\n", err.message);
        return 1;
    }
    double t2 = now();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    tt_source src;
    tt_manifest m;
    if (tt_source_file(&src, file, &err) != TT_OK ||
        tt_reader_probe(&src, NULL, TT_CURSORS_SEQUENTIAL, &m, NULL, &err) != TT_OK) {
        fprintf(stderr, "bench-index: %s\n", err.message);
        return 1;
    }
    tt_source_close(&src);
    printf("events=%" PRIu64 " file_bytes=%" PRIu64 " record_s=%.3f close_s=%.3f "
           "peak_rss_kib=%ld checksum=%" PRIu64 " failures=%" PRIu64 "\n",
           m.event_count, m.file_size, t1 - t0, t2 - t1, ru.ru_maxrss, v & 0xffff, failures);
    return failures ? 1 : 0;
}
