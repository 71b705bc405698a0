/* SPDX-License-Identifier: MIT */
/* Round trip under concurrency: four threads record a million events of every kind, each with
 * its own values, into a file; the file reads back through per-thread cursors (read from four
 * threads at once) with every field identical, in program order, and verifies. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4
#define EVENTS_TOTAL 1000000u
#define PER_THREAD (EVENTS_TOTAL / THREADS)
#define BIG_MAX (1u << 20)

TestSuite(roundtrip, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

/* ---- the schedule: what event i of thread t is ---- */

enum slot { S_ENTER, S_SAFEPOINT, S_ALLOC, S_IO_IN, S_USER, S_IO_OUT, S_FREE, S_EXIT, S_CHECKPOINT };

static const size_t big_sizes[] = {0, 1, 4095, 4096, 65537, 262145, 1u << 20};
#define N_BIG (sizeof big_sizes / sizeof big_sizes[0])

static enum slot slot_of(uint32_t i)
{
    if (i % 1000 == 500)
        return S_CHECKPOINT; /* replaces a user event (500 % 8 == 4) */
    return (enum slot)(i % 8);
}

/* Every value carries the thread in its top bits and the index in the rest. */
static uint32_t id_of(uint32_t t, uint32_t i) { return (t << 28) | (i & 0x0fffffffu); }

static uint32_t site_of(uint32_t t, uint32_t i) { return (uint32_t)tt_test_mix(t, i, 11) | 1u; }

static uint64_t alloc_size(uint32_t t, uint32_t i) { return tt_test_mix(t, i, 2) & 0xffffffffffull; }

static uint64_t alloc_addr(uint32_t t, uint32_t i) { return tt_test_mix(t, i, 3) & ~0xfull; }

static uint64_t payload_seed(uint32_t t, uint32_t i) { return tt_test_mix(t, i, 4); }

/* Most payloads are small (0..40 bytes); a few are big, one of each size per direction/kind. */
static size_t payload_size(uint32_t t, uint32_t i)
{
    uint32_t u = i / 8;
    enum slot s = slot_of(i);
    if (s == S_IO_IN && u >= 100 && u < 100 + N_BIG)
        return big_sizes[u - 100];
    if (s == S_IO_OUT && u >= 1000 && u < 1000 + N_BIG)
        return big_sizes[u - 1000];
    if (s == S_USER && u >= 20000 && u < 20000 + N_BIG)
        return big_sizes[u - 20000];
    return (size_t)(tt_test_mix(t, i, 5) % 41);
}

static size_t cp_size_of(uint32_t t, uint32_t i) { return 8 + (size_t)(tt_test_mix(t, i, 6) % 57); }

/* ---- a checkpoint provider whose state is the calling thread's ---- */

#define PROVIDER_ID 7u

static _Thread_local struct {
    uint8_t bytes[64];
    size_t len;
} cp_state;

static size_t cp_size(void *ctx)
{
    (void)ctx;
    return cp_state.len;
}

static int cp_save(void *ctx, void *dst, size_t len)
{
    (void)ctx;
    if (len != cp_state.len)
        return -1;
    memcpy(dst, cp_state.bytes, len);
    return 0;
}

static int cp_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx, (void)src, (void)len;
    return -1;
}

static void cp_commit(void *ctx) { (void)ctx; }
static void cp_cancel(void *ctx) { (void)ctx; }

static void register_provider(tt_session *s)
{
    tt_checkpoint_provider p = {
        .struct_size = sizeof p, .id = PROVIDER_ID, .ctx = NULL, .size = cp_size, .save = cp_save,
        .stage = cp_stage, .commit = cp_commit, .cancel = cp_cancel,
    };
    int rc = tt_checkpoint_register(s, &p);
    cr_assert_eq(rc, TT_OK, "tt_checkpoint_register: %s", tt_error_name(rc));
}

/* The checkpoint payload (docs/FORMAT.md section 8) is, per provider in registration order:
 * u32 provider id, u64 state length, the state; little-endian, no padding. */
static int checkpoint_holds(const tt_event *ev, uint32_t provider, const void *state, size_t len)
{
    const uint8_t *p = ev->payload;
    if (ev->payload_len != 12 + len)
        return 0;
    uint64_t id = 0, n = 0;
    for (int i = 0; i < 4; i++)
        id |= (uint64_t)p[i] << (8 * i);
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)p[4 + i] << (8 * i);
    return id == provider && n == len && memcmp(p + 12, state, len) == 0;
}

/* ---- recording ---- */

typedef struct worker {
    tt_session *s;
    uint32_t t;
    pthread_barrier_t *start;
    pid_t tid;
    uint32_t count;          /* events recorded with TT_OK */
    int fail_rc;
    uint32_t fail_index;
    const char *fail_call;
} worker;

static int record_one(tt_session *s, uint32_t t, uint32_t i, uint8_t *buf, const char **what)
{
    size_t got = 0;
    size_t n;
    switch (slot_of(i)) {
    case S_ENTER:
        *what = "tt_enter";
        return tt_enter(s, id_of(t, i));
    case S_SAFEPOINT:
        *what = "tt_safepoint";
        return tt_safepoint(s, id_of(t, i), site_of(t, i));
    case S_ALLOC:
        *what = "tt_alloc";
        return tt_alloc(s, site_of(t, i), alloc_size(t, i),
                        (const void *)(uintptr_t)alloc_addr(t, i));
    case S_IO_IN:
        *what = "tt_io(IN)";
        n = payload_size(t, i);
        tt_test_fill(buf, n, payload_seed(t, i));
        return tt_io(s, TT_IO_IN, id_of(t, i), buf, n, &got);
    case S_USER:
        *what = "tt_user";
        n = payload_size(t, i);
        tt_test_fill(buf, n, payload_seed(t, i));
        return tt_user(s, id_of(t, i), buf, n);
    case S_IO_OUT:
        *what = "tt_io(OUT)";
        n = payload_size(t, i);
        tt_test_fill(buf, n, payload_seed(t, i));
        return tt_io(s, TT_IO_OUT, id_of(t, i), buf, n, NULL);
    case S_FREE:
        *what = "tt_free";
        return tt_free(s, site_of(t, i), (const void *)(uintptr_t)alloc_addr(t, i - 4));
    case S_EXIT:
        *what = "tt_exit";
        return tt_exit(s, id_of(t, i - 7));
    case S_CHECKPOINT:
        *what = "tt_checkpoint";
        cp_state.len = cp_size_of(t, i);
        tt_test_fill(cp_state.bytes, cp_state.len, payload_seed(t, i));
        return tt_checkpoint(s, site_of(t, i));
    }
    return TT_E_INVAL;
}

static void *record_worker(void *arg)
{
    worker *w = arg;
    w->tid = gettid();
    uint8_t *buf = malloc(BIG_MAX);
    char name[32];
    snprintf(name, sizeof name, "worker-%u", w->t);
    int rc = tt_thread_name(w->s, name);
    pthread_barrier_wait(w->start);
    if (buf == NULL) {
        w->fail_rc = TT_E_NOMEM, w->fail_call = "malloc";
        return NULL;
    }
    if (rc != TT_OK) {
        w->fail_rc = rc, w->fail_call = "tt_thread_name";
        free(buf);
        return NULL;
    }
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        const char *what = "";
        rc = record_one(w->s, w->t, i, buf, &what);
        if (rc != TT_OK) {
            w->fail_rc = rc, w->fail_index = i, w->fail_call = what;
            break;
        }
        w->count++;
    }
    if (w->fail_rc == TT_OK) {
        rc = tt_session_thread_end(w->s);
        if (rc != TT_OK)
            w->fail_rc = rc, w->fail_call = "tt_session_thread_end", w->fail_index = PER_THREAD;
    }
    free(buf);
    return NULL;
}

static void record_all(const char *path, worker *w)
{
    tt_session *s = NULL;
    tt_error_info err = {0};
    int rc = tt_test_open_record_file(path, &s, &err);
    cr_assert_eq(rc, TT_OK, "tt_session_open: %s: %s", tt_error_name(rc), err.message);
    register_provider(s);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t th[THREADS];
    for (uint32_t t = 0; t < THREADS; t++) {
        w[t] = (worker){.s = s, .t = t, .start = &start};
        cr_assert_eq(pthread_create(&th[t], NULL, record_worker, &w[t]), 0);
    }
    for (uint32_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);

    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "tt_session_close: %s: %s", tt_error_name(rc), err.message);
    for (uint32_t t = 0; t < THREADS; t++)
        cr_assert_eq(w[t].fail_rc, TT_OK, "thread %u: %s failed at event %u: %s", t,
                     w[t].fail_call, w[t].fail_index, tt_error_name(w[t].fail_rc));
}

/* ---- checking one recorded event against the schedule ---- */

/* Returns NULL when @ev is event @i of thread @t, else what differs (static text). */
static const char *check_event(uint32_t t, uint32_t i, const tt_event *ev, uint8_t *scratch)
{
    static _Thread_local char why[200];
    size_t n;
    enum slot s = slot_of(i);
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(why, sizeof why, __VA_ARGS__);                                                \
            return why;                                                                            \
        }                                                                                          \
    } while (0)
    switch (s) {
    case S_ENTER:
    case S_EXIT:
        EXPECT(ev->kind == (s == S_ENTER ? TT_EV_ENTER : TT_EV_EXIT), "kind %u, expected %s",
               ev->kind, s == S_ENTER ? "enter" : "exit");
        EXPECT(ev->sp.function == id_of(t, s == S_ENTER ? i : i - 7), "function %#x",
               ev->sp.function);
        return NULL;
    case S_SAFEPOINT:
        EXPECT(ev->kind == TT_EV_SAFEPOINT, "kind %u, expected safepoint", ev->kind);
        EXPECT(ev->sp.function == id_of(t, i), "function %#x", ev->sp.function);
        EXPECT(ev->sp.site == site_of(t, i), "site %#x, expected %#x", ev->sp.site, site_of(t, i));
        return NULL;
    case S_ALLOC:
        EXPECT(ev->kind == TT_EV_ALLOC, "kind %u, expected alloc", ev->kind);
        EXPECT(ev->sp.site == site_of(t, i), "site %#x, expected %#x", ev->sp.site, site_of(t, i));
        EXPECT(ev->arg == alloc_size(t, i), "size %llu, expected %llu",
               (unsigned long long)ev->arg, (unsigned long long)alloc_size(t, i));
        EXPECT(ev->addr == alloc_addr(t, i), "addr %#llx, expected %#llx",
               (unsigned long long)ev->addr, (unsigned long long)alloc_addr(t, i));
        return NULL;
    case S_FREE:
        EXPECT(ev->kind == TT_EV_FREE, "kind %u, expected free", ev->kind);
        EXPECT(ev->sp.site == site_of(t, i), "site %#x, expected %#x", ev->sp.site, site_of(t, i));
        EXPECT(ev->addr == alloc_addr(t, i - 4), "addr %#llx, expected %#llx",
               (unsigned long long)ev->addr, (unsigned long long)alloc_addr(t, i - 4));
        return NULL;
    case S_IO_IN:
    case S_IO_OUT:
    case S_USER:
        if (s == S_USER) {
            EXPECT(ev->kind == TT_EV_USER, "kind %u, expected user", ev->kind);
        } else {
            EXPECT(ev->kind == TT_EV_IO, "kind %u, expected io", ev->kind);
            EXPECT(ev->dir == (s == S_IO_IN ? TT_IO_IN : TT_IO_OUT), "dir %u", ev->dir);
        }
        EXPECT(ev->arg == id_of(t, i), "arg %#llx, expected %#x", (unsigned long long)ev->arg,
               id_of(t, i));
        n = payload_size(t, i);
        EXPECT(ev->payload_len == n, "payload_len %llu, expected %zu",
               (unsigned long long)ev->payload_len, n);
        if (n > 0) {
            EXPECT(ev->payload != NULL, "NULL payload");
            size_t d = tt_test_check_fill(ev->payload, n, payload_seed(t, i));
            EXPECT(d == n, "payload differs at byte %zu of %zu", d, n);
        }
        return NULL;
    case S_CHECKPOINT:
        EXPECT(ev->kind == TT_EV_CHECKPOINT, "kind %u, expected checkpoint", ev->kind);
        EXPECT(ev->sp.site == site_of(t, i), "site %#x, expected %#x", ev->sp.site, site_of(t, i));
        n = cp_size_of(t, i);
        tt_test_fill(scratch, n, payload_seed(t, i));
        EXPECT(checkpoint_holds(ev, PROVIDER_ID, scratch, n),
               "checkpoint payload (%llu bytes) is not provider 7's %zu-byte state, framed",
               (unsigned long long)ev->payload_len, n);
        return NULL;
    }
#undef EXPECT
    return "unknown slot";
}

/* ---- reading back, one thread per cursor ---- */

typedef struct stamp {
    uint64_t time;
    uint32_t thread;
    uint64_t seq;
} stamp;

typedef struct checker {
    tt_reader *r;
    uint32_t cursor;
    uint32_t worker;        /* schedule thread t whose events this cursor must hold */
    pid_t os_tid;
    stamp *stamps;
    size_t n_stamps, cap_stamps;
    uint32_t calls;
    uint64_t structural[TT_EV_KIND_MAX + 1];
    char fail[400];
} checker;

static void *check_worker(void *arg)
{
    checker *c = arg;
    uint8_t scratch[64];
    uint64_t seq = 0;
    uint64_t last_time = 0;
    int saw_thread_start = 0;
    int after_end = 0;
    for (;;) {
        tt_event ev;
        tt_error_info err = {0};
        int rc = tt_reader_next(c->r, c->cursor, &ev, &err);
        if (rc == TT_E_END)
            break;
        if (rc != TT_OK) {
            snprintf(c->fail, sizeof c->fail, "cursor %u: tt_reader_next after %llu events: %s: %.300s",
                     c->cursor, (unsigned long long)seq, tt_error_name(rc), err.message);
            return NULL;
        }
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        int k_ = snprintf(c->fail, sizeof c->fail, "cursor %u seq %llu: ", c->cursor,              \
                          (unsigned long long)seq);                                                \
        snprintf(c->fail + k_, sizeof c->fail - (size_t)k_, __VA_ARGS__);                          \
        return NULL;                                                                               \
    } while (0)
        if (after_end)
            FAIL("event of kind %u after the thread's end event", ev.kind);
        if (ev.tp.thread != c->cursor)
            FAIL("tp.thread %u on cursor %u", ev.tp.thread, c->cursor);
        if (ev.tp.seq != seq)
            FAIL("tp.seq %llu, expected %llu", (unsigned long long)ev.tp.seq,
                 (unsigned long long)seq);
        if (seq > 0 && ev.time < last_time)
            FAIL("time went back from %llu to %llu", (unsigned long long)last_time,
                 (unsigned long long)ev.time);
        last_time = ev.time;
        if (c->n_stamps == c->cap_stamps) {
            c->cap_stamps = c->cap_stamps ? 2 * c->cap_stamps : 1024;
            c->stamps = realloc(c->stamps, c->cap_stamps * sizeof *c->stamps);
            if (c->stamps == NULL)
                FAIL("out of memory");
        }
        c->stamps[c->n_stamps++] = (stamp){ev.time, ev.tp.thread, ev.tp.seq};

        if (tt_test_is_structural(ev.kind)) {
            c->structural[ev.kind]++;
            switch (ev.kind) {
            case TT_EV_SESSION_START:
                if (c->cursor != 0 || seq != 0)
                    FAIL("session start outside thread 0 seq 0");
                if (ev.arg != (uint64_t)getpid())
                    FAIL("session start arg %llu, expected pid %d", (unsigned long long)ev.arg,
                         (int)getpid());
                break;
            case TT_EV_THREAD_START:
                if (saw_thread_start || c->calls > 0)
                    FAIL("thread start is not the thread's first event");
                if (c->os_tid != 0 && ev.arg != (uint64_t)c->os_tid)
                    FAIL("thread start arg %llu, expected tid %d", (unsigned long long)ev.arg,
                         (int)c->os_tid);
                saw_thread_start = 1;
                break;
            case TT_EV_THREAD_END:
            case TT_EV_SESSION_END:
                after_end = 1;
                break;
            }
        } else {
            if (!saw_thread_start)
                FAIL("event of kind %u before the thread start", ev.kind);
            if (c->worker == UINT32_MAX)
                FAIL("a thread that recorded nothing has an event of kind %u", ev.kind);
            if (c->calls >= PER_THREAD)
                FAIL("more than %u events", PER_THREAD);
            const char *why = check_event(c->worker, c->calls, &ev, scratch);
            if (why != NULL)
                FAIL("event %u of worker %u: %s", c->calls, c->worker, why);
            c->calls++;
        }
#undef FAIL
        seq++;
    }
    return NULL;
}

static int stamp_cmp(const void *a, const void *b)
{
    const stamp *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return 0;
}

Test(roundtrip, four_threads_read_back_a_million_events_with_every_field_identical,
     .timeout = 280)
{
    const char *path = tt_test_path("roundtrip.tt");
    worker w[THREADS];
    record_all(path, w);

    tt_test_reader tr;
    tt_error_info err = {0};
    int rc = tt_test_reader_open_file(&tr, path, TT_CURSORS_PER_THREAD, &err);
    cr_assert_eq(rc, TT_OK, "open reader: %s: %s", tt_error_name(rc), err.message);
    uint32_t nthreads = tr.m.thread_count;
    cr_assert_geq(nthreads, THREADS, "thread_count %u", nthreads);
    cr_assert_leq(nthreads, THREADS + 1, "thread_count %u (only the closing thread may add one)",
                  nthreads);
    cr_assert_eq(tr.cap.cursors, nthreads, "one cursor per thread");

    /* Which recorded thread is which worker: by the name each gave itself. */
    checker *c = calloc(nthreads, sizeof *c);
    cr_assert_not_null(c);
    for (uint32_t id = 0; id < nthreads; id++)
        c[id] = (checker){.r = tr.r, .cursor = id, .worker = UINT32_MAX};
    for (uint32_t t = 0; t < THREADS; t++) {
        char name[32];
        snprintf(name, sizeof name, "worker-%u", t);
        uint32_t id = tt_test_thread_by_name(&tr, name);
        cr_assert_neq(id, UINT32_MAX, "no thread table row named %s", name);
        cr_assert_eq(c[id].worker, UINT32_MAX, "two workers map to thread %u", id);
        c[id].worker = t;
        c[id].os_tid = w[t].tid;
        const tt_thread_entry *te = tt_reader_thread(tr.r, id);
        cr_assert_eq(te->id, id);
        cr_assert_eq(te->os_tid, (uint32_t)w[t].tid, "thread %u os_tid %u, expected %d", id,
                     te->os_tid, (int)w[t].tid);
    }

    pthread_t th[THREADS + 1];
    for (uint32_t id = 0; id < nthreads; id++)
        cr_assert_eq(pthread_create(&th[id], NULL, check_worker, &c[id]), 0);
    for (uint32_t id = 0; id < nthreads; id++)
        pthread_join(th[id], NULL);

    uint64_t total = 0;
    uint64_t structural[TT_EV_KIND_MAX + 1] = {0};
    for (uint32_t id = 0; id < nthreads; id++) {
        cr_assert_eq(c[id].fail[0], '\0', "%s", c[id].fail);
        const tt_thread_entry *te = tt_reader_thread(tr.r, id);
        cr_assert_not_null(te);
        cr_assert_eq(te->event_count, c[id].n_stamps, "thread %u: table says %llu events, read %zu",
                     id, (unsigned long long)te->event_count, c[id].n_stamps);
        if (c[id].worker != UINT32_MAX) {
            cr_assert_eq(c[id].calls, PER_THREAD, "worker %u: read %u of %u events",
                         c[id].worker, c[id].calls, PER_THREAD);
            cr_assert_eq(c[id].structural[TT_EV_THREAD_END], 1,
                         "worker %u called tt_session_thread_end: one THREAD_END expected",
                         c[id].worker);
        }
        cr_assert_eq(c[id].structural[TT_EV_THREAD_START], 1, "thread %u: %llu thread starts", id,
                     (unsigned long long)c[id].structural[TT_EV_THREAD_START]);
        for (unsigned k = 0; k <= TT_EV_KIND_MAX; k++)
            structural[k] += c[id].structural[k];
        total += c[id].n_stamps;
    }
    cr_assert_eq(structural[TT_EV_SESSION_START], 1, "one session start");
    cr_assert_eq(structural[TT_EV_SESSION_END], 1, "one session end");
    cr_assert_eq(tr.m.event_count, total, "manifest says %llu events, read %llu",
                 (unsigned long long)tr.m.event_count, (unsigned long long)total);

    /* The total order (time, thread, seq) agrees with every thread's program order. */
    stamp *all = malloc(total * sizeof *all);
    cr_assert_not_null(all);
    size_t k = 0;
    for (uint32_t id = 0; id < nthreads; id++) {
        memcpy(all + k, c[id].stamps, c[id].n_stamps * sizeof *all);
        k += c[id].n_stamps;
    }
    qsort(all, total, sizeof *all, stamp_cmp);
    uint64_t *next_seq = calloc(nthreads, sizeof *next_seq);
    cr_assert_not_null(next_seq);
    for (size_t j = 0; j < total; j++) {
        cr_assert_lt(all[j].thread, nthreads);
        cr_assert_eq(all[j].seq, next_seq[all[j].thread],
                     "in (time, thread, seq) order, thread %u's seq %llu comes where %llu should",
                     all[j].thread, (unsigned long long)all[j].seq,
                     (unsigned long long)next_seq[all[j].thread]);
        next_seq[all[j].thread]++;
    }
    free(next_seq);
    free(all);
    for (uint32_t id = 0; id < nthreads; id++)
        free(c[id].stamps);
    free(c);
    tt_test_reader_close(&tr);

    tt_source src;
    rc = tt_source_file(&src, path, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    tt_verify_result res;
    memset(&res, 0, sizeof res);
    rc = tt_verify(&src, NULL, &res);
    cr_assert_eq(rc, TT_OK, "tt_verify: %s (%s) at %llu: %s", tt_error_name(rc),
                 tt_verify_status_name(res.status), (unsigned long long)res.offset, res.message);
    cr_assert_eq(res.status, TT_VERIFY_OK);
    cr_assert_eq(res.events, total, "verify checked %llu events of %llu",
                 (unsigned long long)res.events, (unsigned long long)total);
    tt_source_close(&src);
}

/* A smaller recording read with the sequential cursor: every event of every worker appears
 * exactly once, and each worker's events come in its program order. */
#define SEQ_PER_THREAD 20000u

typedef struct small_worker {
    tt_session *s;
    uint32_t t;
    pthread_barrier_t *start;
    int fail_rc;
    uint32_t fail_index;
} small_worker;

static void *small_record(void *arg)
{
    small_worker *w = arg;
    uint8_t buf[48];
    char name[32];
    snprintf(name, sizeof name, "seq-%u", w->t);
    int rc = tt_thread_name(w->s, name);
    pthread_barrier_wait(w->start);
    for (uint32_t i = 0; rc == TT_OK && i < SEQ_PER_THREAD; i++) {
        size_t n = (size_t)(tt_test_mix(w->t, i, 9) % sizeof buf);
        tt_test_fill(buf, n, tt_test_mix(w->t, i, 10));
        rc = tt_user(w->s, id_of(w->t, i), buf, n);
        w->fail_index = i;
    }
    w->fail_rc = rc;
    return NULL;
}

Test(roundtrip, sequential_cursor_reads_every_event_of_every_thread_once_in_program_order)
{
    const char *path = tt_test_path("seq.tt");
    tt_session *s = NULL;
    tt_error_info err = {0};
    int rc = tt_test_open_record_file(path, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t th[THREADS];
    small_worker w[THREADS];
    for (uint32_t t = 0; t < THREADS; t++) {
        w[t] = (small_worker){.s = s, .t = t, .start = &start};
        cr_assert_eq(pthread_create(&th[t], NULL, small_record, &w[t]), 0);
    }
    for (uint32_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    for (uint32_t t = 0; t < THREADS; t++)
        cr_assert_eq(w[t].fail_rc, TT_OK, "worker %u failed at %u: %s", t, w[t].fail_index,
                     tt_error_name(w[t].fail_rc));

    tt_test_reader tr;
    rc = tt_test_reader_open_file(&tr, path, TT_CURSORS_SEQUENTIAL, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    cr_assert_eq(tr.cap.cursors, 1);
    uint32_t worker_of[THREADS + 1];
    for (uint32_t id = 0; id < THREADS + 1; id++)
        worker_of[id] = UINT32_MAX;
    for (uint32_t t = 0; t < THREADS; t++) {
        char name[32];
        snprintf(name, sizeof name, "seq-%u", t);
        uint32_t id = tt_test_thread_by_name(&tr, name);
        cr_assert_lt(id, THREADS + 1, "no thread named %s", name);
        worker_of[id] = t;
    }
    uint32_t next[THREADS] = {0};
    uint64_t next_seq[THREADS + 1] = {0};
    uint64_t total = 0;
    for (;;) {
        tt_event ev;
        rc = tt_reader_next(tr.r, 0, &ev, &err);
        if (rc == TT_E_END)
            break;
        cr_assert_eq(rc, TT_OK, "after %llu events: %s: %s", (unsigned long long)total,
                     tt_error_name(rc), err.message);
        total++;
        cr_assert_lt(ev.tp.thread, THREADS + 1);
        cr_assert_eq(ev.tp.seq, next_seq[ev.tp.thread], "thread %u seq %llu, expected %llu",
                     ev.tp.thread, (unsigned long long)ev.tp.seq,
                     (unsigned long long)next_seq[ev.tp.thread]);
        next_seq[ev.tp.thread]++;
        if (tt_test_is_structural(ev.kind))
            continue;
        uint32_t t = worker_of[ev.tp.thread];
        cr_assert_neq(t, UINT32_MAX, "call event on unnamed thread %u", ev.tp.thread);
        uint32_t i = next[t]++;
        cr_assert_lt(i, SEQ_PER_THREAD);
        cr_assert_eq(ev.kind, TT_EV_USER);
        cr_assert_eq(ev.arg, id_of(t, i), "worker %u event %u: tag %#llx", t, i,
                     (unsigned long long)ev.arg);
        size_t n = (size_t)(tt_test_mix(t, i, 9) % 48);
        cr_assert_eq(ev.payload_len, n);
        cr_assert_eq(tt_test_check_fill(ev.payload, n, tt_test_mix(t, i, 10)), n,
                     "worker %u event %u: payload differs", t, i);
    }
    for (uint32_t t = 0; t < THREADS; t++)
        cr_assert_eq(next[t], SEQ_PER_THREAD, "worker %u: %u events read", t, next[t]);
    cr_assert_eq(total, tr.m.event_count);
    tt_test_reader_close(&tr);
}
