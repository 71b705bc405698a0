/* SPDX-License-Identifier: MIT */
/* Bounded storage: the reader lives in exactly the capacity it computed and refuses less; a file
 * that needs more than the limits is refused by the probe before any chunk is read; a recorder
 * with a small memory budget and a slow sink waits instead of dropping, and says so. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

TestSuite(reader);
TestSuite(recorder);

#define GUARD 4096u
#define N_EVENTS 3000u
#define BIG_EVENT 300000u /* larger than one 256 KiB buffer: a split payload */

static uint8_t *image;
static size_t image_len;

static size_t ev_len(uint32_t i) { return i == 1234 ? BIG_EVENT : (size_t)(tt_test_mix(7, i, 1) % 90); }

static void *second_thread(void *arg)
{
    tt_session *s = arg;
    for (uint32_t i = 0; i < 100; i++)
        if (tt_safepoint(s, 77, 1000 + i) != TT_OK)
            break;
    return NULL;
}

static void record_image(void)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    int rc = tt_test_open_record_mem(&sink, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    uint8_t *buf = malloc(BIG_EVENT);
    cr_assert_not_null(buf);
    for (uint32_t i = 0; i < N_EVENTS; i++) {
        size_t n = ev_len(i);
        tt_test_fill(buf, n, tt_test_mix(7, i, 2));
        rc = tt_user(s, i, buf, n);
        cr_assert_eq(rc, TT_OK, "event %u: %s", i, tt_error_name(rc));
    }
    free(buf);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, second_thread, s), 0);
    pthread_join(th, NULL);
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    image = sink.data;
    image_len = sink.len;
}

/* Runs after the suite's .init (which made the test's directory). */
static void setup(void)
{
    record_image();
}

static void teardown(void)
{
    free(image);
    image = NULL;
}

/* Reads every event of every cursor; checks the main thread's user events. */
static void read_and_check(tt_reader *r, uint32_t cursors)
{
    uint32_t users = 0, safepoints = 0;
    for (uint32_t c = 0; c < cursors; c++) {
        for (;;) {
            tt_event ev;
            tt_error_info err;
            int rc = tt_reader_next(r, c, &ev, &err);
            if (rc == TT_E_END)
                break;
            cr_assert_eq(rc, TT_OK, "cursor %u: %s: %s", c, tt_error_name(rc), err.message);
            if (ev.kind == TT_EV_USER) {
                uint32_t i = users++;
                cr_assert_eq(ev.arg, i, "user event %u has tag %llu", i,
                             (unsigned long long)ev.arg);
                cr_assert_eq(ev.payload_len, ev_len(i));
                cr_assert_eq(tt_test_check_fill(ev.payload, ev_len(i), tt_test_mix(7, i, 2)),
                             ev_len(i), "user event %u: payload differs", i);
            } else if (ev.kind == TT_EV_SAFEPOINT) {
                cr_assert_eq(ev.sp.site, 1000 + safepoints, "safepoint %u at site %u", safepoints,
                             ev.sp.site);
                safepoints++;
            }
        }
    }
    cr_assert_eq(users, N_EVENTS);
    cr_assert_eq(safepoints, 100u);
}

static void exact_capacity(tt_cursor_mode mode)
{
    tt_source src;
    tt_source_memory(&src, image, image_len);
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    tt_manifest m;
    tt_reader_capacity cap;
    tt_error_info err = {0};
    int rc = tt_reader_probe(&src, &lim, mode, &m, &cap, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    cr_assert_eq(cap.total, cap.fixed + cap.per_cursor * cap.cursors,
                 "total %llu != fixed %llu + %llu x %u", (unsigned long long)cap.total,
                 (unsigned long long)cap.fixed, (unsigned long long)cap.per_cursor, cap.cursors);
    cr_assert_eq(cap.cursors, mode == TT_CURSORS_PER_THREAD ? m.thread_count : 1u);
    cr_assert_geq(cap.per_cursor, m.largest_chunk, "a cursor cannot hold the largest chunk");

    size_t total = GUARD + cap.total + GUARD;
    uint8_t *mem = aligned_alloc(GUARD, (total + GUARD - 1) / GUARD * GUARD);
    cr_assert_not_null(mem);
    memset(mem, 0xA5, total);
    memset(mem + GUARD, 0x5A, cap.total);
    tt_reader *r = NULL;
    rc = tt_reader_open(&src, &lim, mode, mem + GUARD, cap.total, &r, &err);
    cr_assert_eq(rc, TT_OK, "open with exactly the capacity: %s: %s", tt_error_name(rc),
                 err.message);
    read_and_check(r, cap.cursors);
    tt_reader_close(r);
    for (size_t i = 0; i < GUARD; i++) {
        cr_assert_eq(mem[i], 0xA5, "the reader wrote %zu bytes before its storage", GUARD - i);
        cr_assert_eq(mem[GUARD + cap.total + i], 0xA5,
                     "the reader wrote at byte %zu past its storage of %llu bytes", i,
                     (unsigned long long)cap.total);
    }

    /* One byte less is refused, and nothing is written outside what was given. */
    memset(mem, 0xA5, total);
    r = NULL;
    memset(&err, 0, sizeof err);
    rc = tt_reader_open(&src, &lim, mode, mem + GUARD, cap.total - 1, &r, &err);
    cr_assert_eq(rc, TT_E_STORAGE, "open with capacity - 1: %s", tt_error_name(rc));
    cr_assert_eq(err.code, TT_E_STORAGE);
    cr_assert_neq(err.message[0], '\0');
    for (size_t i = 0; i < GUARD; i++)
        cr_assert_eq(mem[i], 0xA5, "a refused open wrote before the storage");
    for (size_t i = cap.total - 1; i < cap.total + GUARD; i++)
        cr_assert_eq(mem[GUARD + i], 0xA5, "a refused open wrote past the given length");
    free(mem);
}

Test(reader, uses_exactly_its_computed_capacity_with_per_thread_cursors, .init = setup,
     .fini = teardown)
{
    exact_capacity(TT_CURSORS_PER_THREAD);
}

Test(reader, uses_exactly_its_computed_capacity_with_the_sequential_cursor, .init = setup,
     .fini = teardown)
{
    exact_capacity(TT_CURSORS_SEQUENTIAL);
}

/* ---- the probe reads nothing but the manifest ---- */

typedef struct tracking_source {
    const uint8_t *data;
    size_t len;
    uint64_t highest_end; /* one past the highest byte read */
    uint64_t reads;
} tracking_source;

static int tracking_read(void *ctx, uint64_t offset, void *dst, size_t len, size_t *got)
{
    tracking_source *t = ctx;
    t->reads++;
    size_t n = 0;
    if (offset < t->len) {
        n = t->len - (size_t)offset;
        if (n > len)
            n = len;
        memcpy(dst, t->data + offset, n);
    }
    if (n > 0 && offset + n > t->highest_end)
        t->highest_end = offset + n;
    *got = n;
    return 0;
}

static int probe_tracked(tracking_source *t, const tt_reader_limits *lim, tt_error_info *err)
{
    *t = (tracking_source){.data = image, .len = image_len};
    tt_source src;
    tt_source_callback(&src, tracking_read, t, image_len);
    tt_reader_capacity cap;
    memset(err, 0, sizeof *err);
    return tt_reader_probe(&src, lim, TT_CURSORS_PER_THREAD, NULL, &cap, err);
}

Test(reader, probe_refuses_a_file_that_needs_more_than_the_limits_before_reading_a_chunk,
     .init = setup, .fini = teardown)
{
    tt_reader_limits lim;
    tracking_source t;
    tt_error_info err;

    /* Control: with the defaults the probe passes, reading the manifest only... */
    tt_reader_limits_default(&lim);
    int rc = probe_tracked(&t, &lim, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    cr_assert_gt(t.reads, 0u);
    cr_assert_leq(t.highest_end, TT_MANIFEST_SIZE, "the probe read up to byte %llu",
                  (unsigned long long)t.highest_end);
    /* ... and a reader over the same source does read past it, so the tracking works. */
    tt_source src;
    tt_source_callback(&src, tracking_read, &t, image_len);
    tt_reader_capacity cap;
    cr_assert_eq(tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, NULL, &cap, &err), TT_OK);
    void *mem = aligned_alloc(64, (cap.total + 63) / 64 * 64);
    tt_reader *r;
    cr_assert_eq(tt_reader_open(&src, &lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &err),
                 TT_OK, "%s", err.message);
    read_and_check(r, 1);
    tt_reader_close(r);
    free(mem);
    cr_assert_gt(t.highest_end, TT_MANIFEST_SIZE);

    struct {
        const char *what;
        const char *word; /* the message names the limit */
    } cases[] = {
        {"max_chunk = 64", "chunk"},
        {"max_event = 1024", "event"},
        {"max_threads = 1", "thread"},
        {"max_total = 4096", ""},
    };
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tt_reader_limits_default(&lim);
        switch (c) {
        case 0: lim.max_chunk = 64; break;
        case 1: lim.max_event = 1024; break;
        case 2: lim.max_threads = 1; break;
        case 3: lim.max_total = 4096; break;
        }
        rc = probe_tracked(&t, &lim, &err);
        cr_assert_eq(rc, TT_E_CAPACITY, "%s: probe returned %s", cases[c].what,
                     tt_error_name(rc));
        cr_assert_eq(err.code, TT_E_CAPACITY);
        cr_assert_leq(t.highest_end, TT_MANIFEST_SIZE,
                     "%s: the probe read up to byte %llu, past the manifest", cases[c].what,
                     (unsigned long long)t.highest_end);
        cr_assert_neq(err.message[0], '\0', "%s: no message", cases[c].what);
        cr_assert(strcasestr(err.message, cases[c].word) != NULL,
                  "%s: the message does not name the limit: %s", cases[c].what, err.message);
    }
}

/* ---- a small memory budget and a slow sink ---- */

typedef struct slow_sink {
    pthread_mutex_t lock;
    uint8_t *data;
    size_t len, cap;
    uint64_t calls;
} slow_sink;

static int slow_write(void *ctx, uint64_t offset, const void *data, size_t len)
{
    slow_sink *k = ctx;
    /* Deliberately slow: a sink that takes 2 ms per write, so producers outrun it. */
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&k->lock);
    size_t end = (size_t)offset + len;
    if (end > k->cap) {
        size_t ncap = k->cap ? k->cap : 1u << 20;
        while (ncap < end)
            ncap *= 2;
        uint8_t *p = realloc(k->data, ncap);
        if (p == NULL) {
            pthread_mutex_unlock(&k->lock);
            return 12; /* ENOMEM */
        }
        memset(p + k->cap, 0, ncap - k->cap);
        k->data = p, k->cap = ncap;
    }
    memcpy(k->data + offset, data, len);
    if (end > k->len)
        k->len = end;
    k->calls++;
    pthread_mutex_unlock(&k->lock);
    return 0;
}

#define STALL_THREADS 2u
#define STALL_EVENTS 40000u

typedef struct producer {
    tt_session *s;
    uint32_t t;
    int rc;
    uint32_t done;
} producer;

static size_t stall_len(uint32_t t, uint32_t i) { return 40 + (size_t)(tt_test_mix(t, i, 3) % 80); }

static void *produce(void *arg)
{
    producer *p = arg;
    uint8_t buf[128];
    char name[16] = "producer-0";
    name[9] = (char)('0' + p->t);
    p->rc = tt_thread_name(p->s, name);
    for (uint32_t i = 0; p->rc == TT_OK && i < STALL_EVENTS; i++) {
        size_t n = stall_len(p->t, i);
        tt_test_fill(buf, n, tt_test_mix(p->t, i, 4));
        p->rc = tt_user(p->s, (p->t << 24) | i, buf, n);
        if (p->rc == TT_OK)
            p->done++;
    }
    return NULL;
}

Test(recorder, loses_nothing_with_a_one_mebibyte_budget_and_a_slow_sink_and_reports_stalls,
     .timeout = 280)
{
    slow_sink k = {.lock = PTHREAD_MUTEX_INITIALIZER};
    tt_config cfg;
    tt_error_info err = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 64u << 10, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 1u << 20, &err), TT_OK, "%s",
                 err.message);
    tt_config_set_callback_sink(&cfg, slow_write, &k);
    tt_session *s;
    int rc = tt_session_open(&cfg, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);

    producer p[STALL_THREADS];
    pthread_t th[STALL_THREADS];
    for (uint32_t t = 0; t < STALL_THREADS; t++) {
        p[t] = (producer){.s = s, .t = t};
        cr_assert_eq(pthread_create(&th[t], NULL, produce, &p[t]), 0);
    }
    for (uint32_t t = 0; t < STALL_THREADS; t++)
        pthread_join(th[t], NULL);
    tt_session_stats st;
    memset(&st, 0, sizeof st);
    tt_session_stats_get(s, &st);
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    for (uint32_t t = 0; t < STALL_THREADS; t++)
        cr_assert_eq(p[t].rc, TT_OK, "producer %u stopped after %u events: %s", t, p[t].done,
                     tt_error_name(p[t].rc));
    cr_assert_gt(st.stalls, 0u, "a 1 MiB budget against a 2 ms-per-write sink never stalled");
    cr_assert_gt(st.stall_ns, 0u);
    cr_log_info("slow sink: %llu stalls, %.1f ms waited, %llu writes",
                (unsigned long long)st.stalls, (double)st.stall_ns / 1e6,
                (unsigned long long)k.calls);

    tt_test_reader tr;
    rc = tt_test_reader_open_mem(&tr, k.data, k.len, TT_CURSORS_PER_THREAD, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    cr_assert_geq(tr.m.stall_count, st.stalls, "manifest stall_count %llu, stats said %llu",
                  (unsigned long long)tr.m.stall_count, (unsigned long long)st.stalls);
    cr_assert_eq(tr.m.flags & TT_MF_INCOMPLETE, 0u);
    uint64_t total = 0;
    for (uint32_t t = 0; t < STALL_THREADS; t++) {
        char name[16] = "producer-0";
        name[9] = (char)('0' + t);
        uint32_t id = tt_test_thread_by_name(&tr, name);
        cr_assert_neq(id, UINT32_MAX, "no thread named %s", name);
        uint32_t i = 0;
        for (;;) {
            tt_event ev;
            rc = tt_reader_next(tr.r, id, &ev, &err);
            if (rc == TT_E_END)
                break;
            cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
            total++;
            if (tt_test_is_structural(ev.kind) || tt_test_is_tracer(tr.r, &ev))
                continue;
            cr_assert_eq(ev.kind, TT_EV_USER);
            cr_assert_eq(ev.arg, (t << 24) | i, "producer %u event %u: tag %#llx", t, i,
                         (unsigned long long)ev.arg);
            cr_assert_eq(ev.payload_len, stall_len(t, i));
            cr_assert_eq(tt_test_check_fill(ev.payload, stall_len(t, i), tt_test_mix(t, i, 4)),
                         stall_len(t, i), "producer %u event %u: payload differs", t, i);
            i++;
        }
        cr_assert_eq(i, STALL_EVENTS, "producer %u: %u of %u events read back", t, i,
                     STALL_EVENTS);
    }
    tt_test_reader_close(&tr);

    tt_source src;
    tt_source_memory(&src, k.data, k.len);
    tt_verify_result res;
    rc = tt_verify(&src, NULL, &res);
    cr_assert_eq(rc, TT_OK, "verify: %s: %s", tt_error_name(rc), res.message);
    free(k.data);
}

/* ---- a refused call leaves no trace ---- */

Test(recorder, a_payload_above_the_event_limit_is_refused_and_leaves_no_gap)
{
    tt_config cfg;
    tt_error_info err = {0};
    tt_memory_sink sink = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MAX_EVENT_BYTES, 1024, &err), TT_OK, "%s",
                 err.message);
    tt_config_set_memory_sink(&cfg, &sink);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    static uint8_t buf[2048];
    tt_test_fill(buf, sizeof buf, 99);
    cr_assert_eq(tt_user(s, 1, buf, 1024), TT_OK, "a payload of exactly the limit");
    int rc = tt_user(s, 2, buf, 1025);
    cr_assert_eq(rc, TT_E_LIMIT, "a payload above the limit: %s", tt_error_name(rc));
    rc = tt_io(s, TT_IO_OUT, 3, buf, 2048, NULL);
    cr_assert_eq(rc, TT_E_LIMIT, "io above the limit: %s", tt_error_name(rc));
    cr_assert_eq(tt_user(s, 4, buf, 10), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    tt_test_events ev;
    tt_test_read_cursor(&tr, 0, &ev);
    cr_assert_eq(ev.end_code, TT_E_END, "%s", ev.err.message);
    for (size_t i = 0; i < ev.n; i++)
        cr_assert_eq(ev.v[i].ev.tp.seq, i, "seq %llu at position %zu: a gap",
                     (unsigned long long)ev.v[i].ev.tp.seq, i);
    cr_assert_eq(tt_test_events_count_calls(&ev), 2u, "only the two accepted calls are recorded");
    tt_test_event *a = &ev.v[tt_test_events_nth_call(&ev, 0)];
    tt_test_event *b = &ev.v[tt_test_events_nth_call(&ev, 1)];
    cr_assert_eq(a->ev.arg, 1u);
    cr_assert_eq(a->ev.payload_len, 1024u);
    cr_assert_eq(memcmp(a->payload, buf, 1024), 0);
    cr_assert_eq(b->ev.arg, 4u);
    cr_assert_eq(b->ev.payload_len, 10u);
    tt_test_events_free(&ev);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- peek, advance, names ---- */

Test(reader, peek_shows_the_next_event_without_consuming_it, .init = setup, .fini = teardown)
{
    tt_test_reader tr;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_reader_open_mem(&tr, image, image_len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    uint64_t n = 0;
    for (;;) {
        tt_event p1, p2, nx;
        int rc = tt_reader_peek(tr.r, 0, &p1, &err);
        if (rc == TT_E_END) {
            cr_assert_eq(tt_reader_next(tr.r, 0, &nx, &err), TT_E_END);
            break;
        }
        cr_assert_eq(rc, TT_OK, "%s", err.message);
        cr_assert_eq(tt_reader_peek(tr.r, 0, &p2, &err), TT_OK);
        cr_assert_eq(p2.tp.seq, p1.tp.seq, "a second peek moved on");
        cr_assert_eq(p2.tp.thread, p1.tp.thread);
        /* peek_ref: the same event, in the reader, payload included, without a copy */
        const tt_event *ref = NULL;
        cr_assert_eq(tt_reader_peek_ref(tr.r, 0, &ref, &err), TT_OK);
        cr_assert_not_null(ref);
        cr_assert_eq(ref->tp.seq, p1.tp.seq, "peek_ref moved on");
        cr_assert_eq(ref->time, p1.time);
        cr_assert_eq(ref->kind, p1.kind);
        cr_assert_eq(ref->arg, p1.arg);
        cr_assert_eq(ref->payload_len, p1.payload_len);
        if (p1.payload_len)
            cr_assert_eq(memcmp(ref->payload, p1.payload, (size_t)p1.payload_len), 0);
        if (n % 2 == 0) {
            tt_reader_advance(tr.r, 0);
            n++;
            continue;
        }
        cr_assert_eq(tt_reader_next(tr.r, 0, &nx, &err), TT_OK);
        cr_assert_eq(nx.tp.seq, p1.tp.seq);
        cr_assert_eq(nx.tp.thread, p1.tp.thread);
        cr_assert_eq(nx.kind, p1.kind);
        cr_assert_eq(nx.arg, p1.arg);
        cr_assert_eq(nx.payload_len, p1.payload_len);
        n++;
    }
    cr_assert_eq(n, tr.m.event_count, "peek/advance/next saw %llu of %llu events",
                 (unsigned long long)n, (unsigned long long)tr.m.event_count);
    tt_test_reader_close(&tr);
}

Test(reader, finds_interned_names_in_the_object_table)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    static const char *const names[] = {
        "parse_header", "read_chunk", "x",
        "a_very_long_name_that_goes_on_and_on_for_quite_a_while_0123456789",
    };
    uint32_t ids[4], again;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, names[i], &ids[i]), TT_OK);
        cr_assert_geq(ids[i], 1u);
        for (int j = 0; j < i; j++)
            cr_assert_neq(ids[i], ids[j], "%s and %s share id %u", names[i], names[j], ids[i]);
        cr_assert_eq(tt_enter(s, ids[i]), TT_OK);
    }
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "read_chunk", &again), TT_OK);
    cr_assert_eq(again, ids[1], "interning the same name twice gave %u and %u", ids[1], again);
    uint32_t site;
    cr_assert_eq(tt_intern(s, TT_OBJ_SITE, "read_chunk", &site), TT_OK);
    cr_assert_neq(site, ids[1], "a site and a function of the same name share an id");
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tt_reader_find_object(tr.r, TT_OBJ_FUNCTION, names[i]), ids[i],
                     "find_object(%s)", names[i]);
        tt_object_entry o;
        cr_assert_eq(tt_reader_object(tr.r, ids[i], &o), TT_OK);
        cr_assert_eq(o.id, ids[i]);
        cr_assert_eq(o.kind, TT_OBJ_FUNCTION);
        cr_assert_eq(o.name_len, strlen(names[i]));
        cr_assert_eq(memcmp(o.name, names[i], o.name_len), 0);
    }
    cr_assert_eq(tt_reader_find_object(tr.r, TT_OBJ_SITE, "read_chunk"), site);
    cr_assert_eq(tt_reader_find_object(tr.r, TT_OBJ_FUNCTION, "never_interned"), 0u);
    tt_object_entry o;
    cr_assert_eq(tt_reader_object(tr.r, 100000, &o), TT_E_INVAL);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- the thread limit ---- */

/* A thread past the limit: three calls, each refused; returns the first refusal that is not
 * TT_E_THREADS, or TT_E_THREADS. */
static void *third_thread(void *arg)
{
    tt_session *s = arg;
    for (uint32_t k = 0; k < 3; k++) {
        int rc = tt_user(s, 3 + k, "third", 5);
        if (rc != TT_E_THREADS)
            return (void *)(intptr_t)rc;
    }
    return (void *)(intptr_t)TT_E_THREADS;
}

static void *second_of_two(void *arg)
{
    tt_session *s = arg;
    return (void *)(intptr_t)tt_user(s, 2, "second", 6);
}

Test(recorder, a_thread_beyond_the_thread_limit_is_refused_and_the_others_are_kept)
{
    tt_config cfg;
    tt_error_info err = {0};
    tt_memory_sink sink = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MAX_THREADS, 2, &err), TT_OK, "%s", err.message);
    tt_config_set_memory_sink(&cfg, &sink);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_user(s, 1, "first", 5), TT_OK);
    pthread_t th;
    void *ret;
    cr_assert_eq(pthread_create(&th, NULL, second_of_two, s), 0);
    pthread_join(th, &ret);
    cr_assert_eq((int)(intptr_t)ret, TT_OK, "the second thread: %s",
                 tt_error_name((int)(intptr_t)ret));
    for (int k = 0; k < 2; k++) { /* two threads past the limit, each refused three times */
        cr_assert_eq(pthread_create(&th, NULL, third_thread, s), 0);
        pthread_join(th, &ret);
        cr_assert_eq((int)(intptr_t)ret, TT_E_THREADS, "a thread beyond a limit of two: %s",
                     tt_error_name((int)(intptr_t)ret));
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tr.m.thread_count, 2u);
    cr_assert_eq(tr.m.threads_refused, 2u, "the manifest counts %u refused threads",
                 tr.m.threads_refused);
    uint64_t tags = 0;
    for (;;) {
        tt_event ev;
        int rc = tt_reader_next(tr.r, 0, &ev, &err);
        if (rc == TT_E_END)
            break;
        cr_assert_eq(rc, TT_OK, "%s", err.message);
        if (ev.kind == TT_EV_USER)
            tags |= 1u << ev.arg;
    }
    cr_assert_eq(tags, (1u << 1) | (1u << 2), "user tags recorded: %#llx",
                 (unsigned long long)tags);
    tt_test_reader_close(&tr);
    free(sink.data);
}
