/* SPDX-License-Identifier: MIT */
/* A full disk and I/O errors (issue 5, acceptance 2), through the C API.
 *
 * A recording that runs into RLIMIT_FSIZE (EFBIG), or a callback sink that reports ENOSPC, must
 * not stop the program: recording goes on in memory up to the budget, then calls are refused with
 * TT_E_STOPPED at once and counted; close reports the errno, the file and the offset; the file is
 * marked incomplete, refused by the reader and by replay, and the chunks written before the error
 * are intact (tt_recover salvages them, each event with its own value).
 *
 * Criterion runs every test in its own process, so a setrlimit here ends with the test; a
 * SIGXFSZ that reached the program would kill that process and fail the test.
 */
#include "common.h"

#include "harness.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(diskfull, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

#define BUFFER (64u * 1024)
#define BUDGET (1024u * 1024)

static int open_record(const char *path, tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, BUFFER, err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, BUDGET, err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, path, err), TT_OK);
    return tt_session_open(&cfg, s, err);
}

static size_t payload_len(uint32_t i)
{
    return 700 + (size_t)(tt_test_mix(i, 7, 11) % 3000);
}

/* Records user events 0, 1, ... until @n; returns how many returned TT_OK. The results must be
 * TT_OK up to some call and TT_E_STOPPED from then on: once the budget is spent no buffer ever
 * comes back. */
static uint32_t record_until_stopped(tt_session *s, uint32_t n, uint32_t *stopped)
{
    static uint8_t buf[4096];
    uint32_t ok = 0;
    *stopped = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = payload_len(i);
        tt_test_fill(buf, len, i);
        int rc = tt_user(s, i, buf, len);
        if (rc == TT_OK) {
            cr_assert_eq(*stopped, 0u, "call %u succeeded after %u refusals", i, *stopped);
            ok++;
        } else {
            cr_assert_eq(rc, TT_E_STOPPED, "call %u: %s", i, tt_error_name(rc));
            (*stopped)++;
        }
    }
    return ok;
}

/* The file at @path is marked incomplete with @errno_want; the reader and replay refuse it; the
 * chunks before the error are recovered, user events 0..k-1 each with its own bytes, k >= 1 and
 * k <= @ok. Returns k. */
static uint64_t check_incomplete_and_salvage(const char *path, int errno_want, uint32_t ok,
                                             size_t (*len_of)(uint32_t))
{
    tt_test_reader tr;
    tt_error_info err;
    int rc = tt_test_reader_open_file(&tr, path, TT_CURSORS_SEQUENTIAL, &err);
    cr_assert_eq(rc, TT_E_INCOMPLETE, "reader open: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_eq(err.sys_errno, errno_want, "the refusal names errno %d, not %d", err.sys_errno,
                 errno_want);
    cr_assert(strstr(err.message, path) != NULL, "the refusal names the file: %s", err.message);
    cr_assert(strstr(err.message, strerror(errno_want)) != NULL,
              "the refusal names the error: %s", err.message);
    cr_assert(tr.m.flags & TT_MF_INCOMPLETE);
    cr_assert_eq(tr.m.write_errno, errno_want);
    tt_test_reader_close(&tr);

    tt_source src;
    cr_assert_eq(tt_source_file(&src, path, &err), TT_OK, "%s", err.message);
    tt_verify_result vr;
    cr_assert_neq(tt_verify(&src, NULL, &vr), TT_OK);
    cr_assert_eq(vr.status, TT_VERIFY_INCOMPLETE, "verify says %s: %s",
                 tt_verify_status_name(vr.status), vr.message);

    tt_session *rs = NULL;
    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err), TT_OK);
    rc = tt_session_open(&cfg, &rs, &err);
    cr_assert_eq(rc, TT_E_INCOMPLETE, "replay open: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_null(rs);

    const char *out = tt_test_path("salvaged.tt");
    tt_recover_result res;
    rc = tt_recover(&src, out, &res, &err);
    tt_source_close(&src);
    cr_assert_eq(rc, TT_OK, "recover: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_gt(res.events, 0u, "nothing written before the error was saved");

    rc = tt_test_reader_open_file(&tr, out, TT_CURSORS_SEQUENTIAL, &err);
    cr_assert_eq(rc, TT_OK, "reading the salvaged file: %s (%s)", tt_error_name(rc), err.message);
    tt_test_events ev;
    tt_test_read_cursor(&tr, 0, &ev);
    cr_assert_eq(ev.end_code, TT_E_END, "salvaged file: %s", ev.err.message);
    uint64_t k = 0;
    for (size_t i = 0; i < ev.n; i++) {
        const tt_event *e = &ev.v[i].ev;
        if (e->kind != TT_EV_USER)
            continue;
        cr_assert_eq(e->arg, k, "user event %llu carries tag %llu", (unsigned long long)k,
                     (unsigned long long)e->arg);
        cr_assert_eq(e->payload_len, len_of((uint32_t)k));
        size_t bad = tt_test_check_fill(ev.v[i].payload, e->payload_len, k);
        cr_assert_eq(bad, e->payload_len, "user event %llu differs at byte %zu",
                     (unsigned long long)k, bad);
        k++;
    }
    cr_assert_gt(k, 0u);
    cr_assert_leq(k, ok, "salvaged %llu events, only %u were accepted", (unsigned long long)k, ok);
    tt_test_events_free(&ev);
    tt_test_reader_close(&tr);
    return k;
}

Test(diskfull, a_file_size_limit_stops_the_recording_cleanly_and_marks_the_file_incomplete)
{
    const char *path = tt_test_path("limited.tt");
    const rlim_t limit = 256 * 1024;
    struct rlimit rl = { limit, limit };
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0, "setrlimit: %s", strerror(errno));

    tt_session *s;
    tt_error_info err;
    cr_assert_eq(open_record(path, &s, &err), TT_OK, "%s", err.message);
    /* about 9 MiB of payload against 256 KiB of file and 1 MiB of memory */
    uint32_t stopped, n = 4000;
    uint32_t ok = record_until_stopped(s, n, &stopped);
    cr_assert_gt(stopped, 0u, "all %u calls succeeded past a 256 KiB file limit", n);
    cr_assert_gt(ok, 0u);
    tt_session_stats st;
    tt_session_stats_get(s, &st);
    cr_assert_eq(st.write_errno, EFBIG, "stats.write_errno = %d", st.write_errno);
    cr_assert_eq(st.refused, (uint64_t)stopped, "stats.refused = %llu, %u calls were refused",
                 (unsigned long long)st.refused, stopped);

    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_E_IO, "close: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_eq(err.sys_errno, EFBIG, "close names errno %d", err.sys_errno);
    cr_assert(err.offset > 512 && err.offset <= limit, "close names offset %llu",
              (unsigned long long)err.offset);
    char off[32];
    snprintf(off, sizeof off, "offset %llu", (unsigned long long)err.offset);
    cr_assert(strstr(err.message, path) && strstr(err.message, off) &&
                  strstr(err.message, strerror(EFBIG)) && strstr(err.message, "incomplete"),
              "close message: %s", err.message);

    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "the file keeps its final name: %s", strerror(errno));
    cr_assert_leq((uint64_t)sb.st_size, (uint64_t)limit);
    cr_assert_eq(sb.st_mode & 07777, 0600);
    check_incomplete_and_salvage(path, EFBIG, ok, payload_len);
}

/* The sink of the next test: a file that is "full" past @limit, and slow. */
struct full_sink {
    FILE *f;
    uint64_t limit;
};

static int full_sink_write(void *ctx, uint64_t off, const void *data, size_t len)
{
    struct full_sink *fs = ctx;
    if (off + len > fs->limit)
        return ENOSPC;
    if (fseek(fs->f, (long)off, SEEK_SET) != 0 || fwrite(data, 1, len, fs->f) != len)
        return EIO;
    fflush(fs->f);
    return 0;
}

struct writer_arg {
    tt_session *s;
    uint32_t thread;
    uint32_t ok, stopped, other;
    int other_rc;
};

static void *writer_main(void *p)
{
    struct writer_arg *a = p;
    uint8_t buf[2048];
    for (uint32_t i = 0; i < 3000; i++) {
        uint64_t v = tt_test_mix(a->thread, i, 3);
        tt_test_fill(buf, sizeof buf, v);
        int rc = tt_user(a->s, (uint32_t)v, buf, 256 + v % 1792);
        if (rc == TT_OK)
            a->ok++;
        else if (rc == TT_E_STOPPED)
            a->stopped++;
        else {
            a->other++;
            a->other_rc = rc;
        }
    }
    return NULL;
}

Test(diskfull, threads_waiting_for_the_budget_are_refused_not_left_waiting_after_enospc)
{
    const char *path = tt_test_path("sink.img");
    struct full_sink fs = { fopen(path, "w+"), 128 * 1024 };
    cr_assert_not_null(fs.f);
    tt_config cfg;
    tt_error_info err;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 16384, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 4 * 16384, &err), TT_OK);
    tt_config_set_callback_sink(&cfg, full_sink_write, &fs);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);

    enum { N = 4 };
    pthread_t th[N];
    struct writer_arg a[N];
    for (uint32_t i = 0; i < N; i++) {
        a[i] = (struct writer_arg){ .s = s, .thread = i };
        cr_assert_eq(pthread_create(&th[i], NULL, writer_main, &a[i]), 0);
    }
    uint32_t ok = 0, stopped = 0;
    for (uint32_t i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(a[i].other, 0u, "thread %u got %u other errors (%s)", i, a[i].other,
                     tt_error_name(a[i].other_rc));
        cr_assert_eq(a[i].ok + a[i].stopped, 3000u);
        ok += a[i].ok;
        stopped += a[i].stopped;
    }
    cr_assert_gt(stopped, 0u, "~4 MiB went into a 128 KiB sink with no refusal");
    tt_session_stats st;
    tt_session_stats_get(s, &st);
    cr_assert_eq(st.write_errno, ENOSPC);
    /* a thread's first refused call may be its registration... none here: all started early */
    cr_assert_eq(st.refused, (uint64_t)stopped);
    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_E_IO, "close: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_eq(err.sys_errno, ENOSPC);
    cr_assert(strstr(err.message, strerror(ENOSPC)), "%s", err.message);
    fclose(fs.f);

    /* the image holds the final manifest, marked incomplete */
    tt_source src;
    cr_assert_eq(tt_source_file(&src, path, &err), TT_OK);
    tt_manifest m;
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    rc = tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, &m, NULL, &err);
    tt_source_close(&src);
    cr_assert_eq(rc, TT_E_INCOMPLETE, "probe: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_eq(m.write_errno, ENOSPC);
}

static size_t len_300(uint32_t i)
{
    (void)i;
    return 300;
}

Test(diskfull, a_limit_reached_by_the_tables_at_close_does_not_raise_sigxfsz_in_the_caller)
{
    const char *path = tt_test_path("tables.tt");
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(open_record(path, &s, &err), TT_OK, "%s", err.message);
    /* a long name makes the object table far larger than the session-end chunk */
    static char name[8000];
    memset(name, 'n', sizeof name - 1);
    uint32_t id;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, name, &id), TT_OK);
    uint8_t b[300];
    for (uint32_t i = 0; i < 50; i++) {
        tt_test_fill(b, sizeof b, i);
        cr_assert_eq(tt_user(s, i, b, sizeof b), TT_OK);
    }
    cr_assert_eq(tt_session_flush_thread(s), TT_OK);
    /* wait (with a deadline) until the swapper wrote all 50 and more */
    tt_session_stats st;
    uint64_t deadline = tt_test_now_ns() + 10ull * 1000000000;
    do {
        tt_session_stats_get(s, &st);
    } while (st.events < 52 && tt_test_now_ns() < deadline);
    cr_assert_geq(st.events, 52u, "the swapper wrote %llu events", (unsigned long long)st.events);
    struct stat sb;
    char partial[4200];
    snprintf(partial, sizeof partial, "%s.%ld.partial", path, (long)getpid());
    cr_assert_eq(stat(partial, &sb), 0);
    /* room for the session-end chunk, not for the tables */
    struct rlimit rl = { (rlim_t)sb.st_size + 400, (rlim_t)sb.st_size + 400 };
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);

    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_E_IO, "close: %s (%s)", tt_error_name(rc), err.message);
    cr_assert_eq(err.sys_errno, EFBIG, "%s", err.message);
    sigset_t pending;
    sigpending(&pending);
    cr_assert(!sigismember(&pending, SIGXFSZ), "a SIGXFSZ is left pending for the program");
    check_incomplete_and_salvage(path, EFBIG, 50, len_300);
}

static size_t len_split(uint32_t i)
{
    return 70000 + (size_t)(tt_test_mix(i, 5, 5) % 20000);
}

/* Payloads of ~70-90 KiB in 256 KiB buffers: nearly every chunk finishes the previous chunk's
 * split payload and starts another one, so the chunks form one chain. The disk fills in the
 * middle of it: what recover keeps must still verify (a split payload is never left open). */
Test(diskfull, recover_keeps_a_file_that_verifies_when_the_disk_fills_inside_a_chain_of_splits)
{
    const char *img = tt_test_path("chain.img");
    struct full_sink fs = { fopen(img, "w+"), 3 * 256 * 1024 + 100000 };
    cr_assert_not_null(fs.f);
    tt_config cfg;
    tt_error_info err;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 2 * 1024 * 1024, &err), TT_OK);
    tt_config_set_callback_sink(&cfg, full_sink_write, &fs);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    static uint8_t buf[100000];
    uint32_t ok = 0;
    for (uint32_t i = 0; i < 100; i++) {
        size_t len = len_split(i);
        tt_test_fill(buf, len, i);
        int rc = tt_user(s, i, buf, len);
        cr_assert(rc == TT_OK || rc == TT_E_STOPPED, "call %u: %s", i, tt_error_name(rc));
        if (rc == TT_OK)
            ok++;
    }
    cr_assert_eq(tt_session_close(s, &err), TT_E_IO, "%s", err.message);
    fclose(fs.f);

    tt_source src;
    cr_assert_eq(tt_source_file(&src, img, &err), TT_OK);
    const char *out = tt_test_path("chain.tt");
    tt_recover_result res;
    int rc = tt_recover(&src, out, &res, &err);
    tt_source_close(&src);
    cr_assert_eq(rc, TT_OK, "recover: %s", err.message);
    cr_assert_gt(res.dropped_events, 0u, "the cut fell inside a split payload, nothing dropped?");
    cr_assert_eq(tt_source_file(&src, out, &err), TT_OK);
    tt_verify_result vr;
    rc = tt_verify(&src, NULL, &vr);
    tt_source_close(&src);
    cr_assert_eq(rc, TT_OK, "the recovered file does not verify: %s at offset %llu: %s",
                 tt_verify_status_name(vr.status), (unsigned long long)vr.offset, vr.message);
    cr_assert_eq(vr.events, res.events);
    (void)ok;
}
