/* SPDX-License-Identifier: MIT */
/* What costs nothing: in off mode tt_session_open allocates nothing, starts no thread and opens
 * no file, and every recording call is free of all three. The reader allocates nothing beyond
 * the storage it is given. Counting interposers (count-calls.c) watch this thread's calls; a
 * control test in record mode proves that they count. */
#include "common.h"
#include "count-calls.h"

#include "harness.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

TestSuite(offmode, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);
TestSuite(reader, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

static size_t cp_size(void *ctx)
{
    (void)ctx;
    return 8;
}

static int cp_save(void *ctx, void *dst, size_t len)
{
    (void)ctx;
    memset(dst, 0x42, len);
    return 0;
}

static int cp_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx, (void)src, (void)len;
    return 0;
}

static void cp_nop(void *ctx) { (void)ctx; }

typedef struct results {
    int open_rc, close_rc;
    int bad_rc;          /* first recording call that did not return TT_OK */
    const char *bad_call;
    unsigned bad_index;
} results;

#define NOTE(call, i, expr)                                                                        \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != TT_OK && r->bad_rc == TT_OK)                                                    \
            r->bad_rc = rc_, r->bad_call = (call), r->bad_index = (i);                             \
    } while (0)

/* Every recording call @n times, with values of their own. Everything between count_start and
 * count_stop runs in the caller, with nothing else allocated on the way. */
static void exercise(tt_session *s, unsigned n, results *r)
{
    static uint8_t buf[256];
    tt_checkpoint_provider p = {
        .struct_size = sizeof p, .id = 1, .size = cp_size, .save = cp_save, .stage = cp_stage,
        .commit = cp_nop, .cancel = cp_nop,
    };
    (void)tt_checkpoint_register(s, &p); /* off mode may refuse it; only the counters matter */
    NOTE("tt_thread_name", 0, tt_thread_name(s, "offmode-main"));
    for (unsigned i = 0; i < n; i++) {
        uint32_t id = 0;
        size_t got = 0;
        buf[i % sizeof buf] = (uint8_t)i;
        NOTE("tt_intern", i, tt_intern(s, TT_OBJ_FUNCTION, "offmode_fn", &id));
        NOTE("tt_enter", i, tt_enter(s, 1000 + i));
        NOTE("tt_safepoint", i, tt_safepoint(s, 1000 + i, 7 + i));
        NOTE("tt_alloc", i, tt_alloc(s, 3 + i, 64 + i, buf + (i % 8)));
        NOTE("tt_io(IN)", i, tt_io(s, TT_IO_IN, 5 + i, buf, 1 + i % 200, &got));
        NOTE("tt_io(OUT)", i, tt_io(s, TT_IO_OUT, 6 + i, buf, i % 200, NULL));
        NOTE("tt_user", i, tt_user(s, 9 + i, buf, i % 100));
        NOTE("tt_free", i, tt_free(s, 4 + i, buf + (i % 8)));
        NOTE("tt_checkpoint", i, tt_checkpoint(s, 11 + i));
        NOTE("tt_exit", i, tt_exit(s, 1000 + i));
    }
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

#define CALLS 1000u

Test(offmode, allocates_nothing_starts_no_thread_and_opens_no_file)
{
    const char *path = tt_test_path("off.tt");
    tt_config cfg;
    tt_error_info err;
    tt_session *s = NULL;
    tt_session_stats st;
    results rr = {0}, *r = &rr;
    memset(&err, 0, sizeof err);

    count_start();
    tt_config_init(&cfg);
    int set_rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_OFF, &err);
    int str_rc = tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err);
    r->open_rc = tt_session_open(&cfg, &s, &err);
    exercise(s, CALLS, r);
    NOTE("tt_session_flush_thread", 0, tt_session_flush_thread(s));
    tt_session_stats_get(s, &st);
    tt_mode mode = tt_session_mode(s);
    NOTE("tt_session_thread_end", 0, tt_session_thread_end(s));
    r->close_rc = tt_session_close(s, &err);
    call_counts c = count_stop();

    cr_assert_eq(set_rc, TT_OK);
    cr_assert_eq(str_rc, TT_OK);
    cr_assert_eq(r->open_rc, TT_OK, "off-mode open: %s: %s", tt_error_name(r->open_rc),
                 err.message);
    cr_assert_eq(mode, TT_MODE_OFF);
    cr_assert_eq(r->bad_rc, TT_OK, "off mode: %s (call %u) returned %s", r->bad_call, r->bad_index,
                 tt_error_name(r->bad_rc));
    cr_assert_eq(r->close_rc, TT_OK, "off-mode close: %s", tt_error_name(r->close_rc));
    cr_assert_eq(c.mallocs, 0, "off mode allocated %lu times (%llu bytes)", c.mallocs, c.bytes);
    cr_assert_eq(c.frees, 0, "off mode freed %lu times", c.frees);
    cr_assert_eq(c.threads, 0, "off mode started %lu threads", c.threads);
    cr_assert_eq(c.opens, 0, "off mode opened %lu files", c.opens);
    cr_assert_eq(c.mmaps, 0, "off mode mapped memory %lu times", c.mmaps);
    cr_assert_eq(dir_entries(tt_test_dir), 0, "off mode left a file in the directory");
}

Test(offmode, counters_see_the_allocations_threads_and_files_of_record_mode)
{
    const char *path = tt_test_path("on.tt");
    tt_config cfg;
    tt_error_info err;
    tt_session *s = NULL;
    results rr = {0}, *r = &rr;
    memset(&err, 0, sizeof err);

    count_start();
    tt_config_init(&cfg);
    int set_rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err);
    int str_rc = tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err);
    r->open_rc = tt_session_open(&cfg, &s, &err);
    if (r->open_rc == TT_OK) {
        exercise(s, 100, r);
        r->close_rc = tt_session_close(s, &err);
    }
    call_counts c = count_stop();

    cr_assert_eq(set_rc, TT_OK);
    cr_assert_eq(str_rc, TT_OK);
    cr_assert_eq(r->open_rc, TT_OK, "%s: %s", tt_error_name(r->open_rc), err.message);
    cr_assert_eq(r->bad_rc, TT_OK, "record mode: %s (call %u) returned %s", r->bad_call,
                 r->bad_index, tt_error_name(r->bad_rc));
    cr_assert_eq(r->close_rc, TT_OK, "%s: %s", tt_error_name(r->close_rc), err.message);
    cr_assert_gt(c.mallocs + c.mmaps, 0, "record mode allocated nothing: the counters are blind");
    cr_assert_gt(c.threads, 0, "record mode started no thread: the counters are blind");
    cr_assert_gt(c.opens, 0, "record mode opened no file: the counters are blind");
    cr_log_info("record mode: %lu allocations (%llu bytes), %lu threads, %lu opens, %lu mmaps",
                c.mallocs, c.bytes, c.threads, c.opens, c.mmaps);
}

/* ---- the reader lives in the storage it is given ---- */

static void record_small(tt_memory_sink *sink)
{
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(sink, &s, &err), TT_OK, "%s", err.message);
    static uint8_t buf[300000];
    for (uint32_t i = 0; i < 500; i++) {
        size_t n = i == 250 ? sizeof buf : (size_t)(tt_test_mix(1, i, 1) % 64);
        tt_test_fill(buf, n, i);
        cr_assert_eq(tt_user(s, i, buf, n), TT_OK);
        cr_assert_eq(tt_safepoint(s, 5, i), TT_OK);
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
}

Test(reader, allocates_nothing_beyond_the_storage_it_is_given)
{
    tt_memory_sink sink;
    record_small(&sink);
    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    tt_reader_capacity cap;
    tt_error_info err = {0};
    cr_assert_eq(tt_reader_probe(&src, &lim, TT_CURSORS_PER_THREAD, NULL, &cap, &err), TT_OK);
    void *mem = aligned_alloc(64, (cap.total + 63) / 64 * 64);
    cr_assert_not_null(mem);

    tt_reader *r = NULL;
    uint64_t events = 0;
    int last = TT_OK;
    count_start();
    int probe_rc = tt_reader_probe(&src, &lim, TT_CURSORS_PER_THREAD, NULL, &cap, &err);
    int open_rc = tt_reader_open(&src, &lim, TT_CURSORS_PER_THREAD, mem, cap.total, &r, &err);
    if (open_rc == TT_OK) {
        for (uint32_t c = 0; c < cap.cursors; c++) {
            tt_event ev;
            while ((last = tt_reader_next(r, c, &ev, &err)) == TT_OK)
                events++;
            if (last != TT_E_END)
                break;
        }
        tt_reader_close(r);
    }
    call_counts c = count_stop();
    cr_assert_eq(probe_rc, TT_OK);
    cr_assert_eq(open_rc, TT_OK, "%s", err.message);
    cr_assert_eq(last, TT_E_END, "%s: %s", tt_error_name(last), err.message);
    cr_assert_geq(events, 1000u);
    cr_assert_eq(c.mallocs, 0, "the reader allocated %lu times (%llu bytes)", c.mallocs, c.bytes);
    cr_assert_eq(c.mmaps, 0, "the reader mapped memory %lu times", c.mmaps);
    cr_assert_eq(c.threads, 0);
    cr_assert_eq(c.opens, 0);
    free(mem);
    free(sink.data);
}

Test(reader, verify_allocates_no_more_than_the_probed_capacity_and_the_index)
{
    tt_memory_sink sink;
    record_small(&sink);
    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_reader_capacity seq, thr;
    cr_assert_eq(tt_reader_probe(&src, NULL, TT_CURSORS_SEQUENTIAL, NULL, &seq, NULL), TT_OK);
    cr_assert_eq(tt_reader_probe(&src, NULL, TT_CURSORS_PER_THREAD, NULL, &thr, NULL), TT_OK);
    uint64_t most = seq.total > thr.total ? seq.total : thr.total;

    /* what opening and checking the index tables costs on its own, measured the same way */
    void *mem = aligned_alloc(16, (seq.total + 15) & ~(uint64_t)15);
    cr_assert_not_null(mem);
    tt_reader *r;
    tt_error_info err = {0};
    cr_assert_eq(tt_reader_open(&src, NULL, TT_CURSORS_SEQUENTIAL, mem, seq.total, &r, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    count_start();
    int irc = tt_index_open(r, NULL, &ix, &err);
    if (irc == TT_OK)
        irc = tt_index_check(ix, &err);
    call_counts ic = count_stop();
    cr_assert_eq(irc, TT_OK, "%s", err.message);
    uint64_t peak = tt_index_memory(ix);
    cr_assert_gt(peak, 0);
    tt_reader_limits small;
    tt_reader_limits_default(&small);
    tt_index_close(ix);
    tt_reader_close(r);
    free(mem);

    tt_verify_result res;
    count_start();
    int rc = tt_verify(&src, NULL, &res);
    call_counts c = count_stop();
    cr_assert_eq(rc, TT_OK, "%s", res.message);
    /* the reader's one allocation, and nothing but what the index itself takes */
    cr_assert_leq(c.mallocs, 1 + ic.mallocs, "verify allocated %lu times (index: %lu)", c.mallocs,
                  ic.mallocs);
    cr_assert_leq(c.bytes, most + ic.bytes + 4096,
                  "verify asked for %llu bytes, the capacity is %llu and the index took %llu",
                  c.bytes, (unsigned long long)most, (unsigned long long)ic.bytes);
    cr_assert_eq(c.threads, 0);
    cr_assert_eq(c.opens, 0);

    /* the index never holds more than max_total: a limit below its need is refused */
    cr_assert_eq(tt_reader_open(&src, NULL, TT_CURSORS_SEQUENTIAL,
                                mem = aligned_alloc(16, (seq.total + 15) & ~(uint64_t)15),
                                seq.total, &r, &err), TT_OK);
    small.max_total = peak / 2;
    cr_assert_neq(tt_index_open(r, &small, &ix, &err), TT_OK,
                  "an index that needs %llu bytes opened under a limit of %llu",
                  (unsigned long long)peak, (unsigned long long)small.max_total);
    free(mem);
    free(sink.data);
}
