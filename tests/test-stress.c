/* SPDX-License-Identifier: MIT */
/* Concurrency stress (issue 5, acceptance 5): many threads record at once, and every event is
 * accounted for — each call that returned TT_OK is read back, in its thread's order, with its own
 * tag, length and bytes; each call that was refused is not there.
 *
 * Every thread records user events whose tag is (thread << 24 | i) and whose payload is
 * tt_test_fill(mix(seed, thread, i)); payload sizes come from a per-thread generator seeded from
 * one run seed, printed at the start of each test (set TT_STRESS_SEED to replay a run). Threads
 * name themselves "s<N>", so the reader finds each one's recorded id by name. Waits have
 * deadlines, never fixed sleeps. Runs under ThreadSanitizer (suite 'concurrency'); tests/all.sh
 * repeats it 50 times there.
 */
#include "common.h"

#include "harness.h"
#include "session-int.h" /* lazy_swapper */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

TestSuite(stress, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

#define MAX_THREADS 16
#define MAX_EVENTS 4096

static uint64_t run_seed;

static void seed_init(const char *test)
{
    const char *env = getenv("TT_STRESS_SEED");
    run_seed = env ? strtoull(env, NULL, 0) : tt_test_now_ns() ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "[stress] %s: TT_STRESS_SEED=%" PRIu64 "\n", test, run_seed);
}

/* xorshift64*: a thread's own size sequence */
static uint64_t rng_next(uint64_t *st)
{
    *st ^= *st >> 12;
    *st ^= *st << 25;
    *st ^= *st >> 27;
    return *st * 0x2545F4914F6CDD1Dull;
}

/* Mostly small payloads, some of several KiB, a few larger than a 16 KiB buffer (split). */
static size_t size_of_event(uint64_t *st)
{
    uint64_t r = rng_next(st);
    unsigned pick = (unsigned)(r % 100);
    r >>= 8;
    if (pick < 85)
        return (size_t)(r % 200);
    if (pick < 98)
        return 200 + (size_t)(r % 6000);
    return 16384 + (size_t)(r % 30000);
}

struct worker {
    tt_session *s;
    uint32_t n;                 /* logical thread number */
    uint32_t want;              /* events to attempt; 0 = until refused */
    int end_thread;             /* call tt_session_thread_end when done */
    int flush_half;             /* hand nothing over: exit with a half-full buffer */
    /* results, read by the main thread after the join */
    uint32_t ok, refused, attempted;
    int other_rc;               /* first unexpected result, or TT_OK */
    int named_rc;
    size_t sizes[MAX_EVENTS];
    _Atomic uint32_t progress;  /* calls that returned TT_OK so far */
    /* gated: after its first event the thread waits (deadline 60 s) until gate_n threads have
     * made theirs, so every one of them holds a buffer at once */
    _Atomic uint32_t *gate;
    uint32_t gate_n;
    int gate_timeout;
    _Atomic uint32_t *done;     /* incremented when the thread returns, if set */
    /* until refused (want 0): a thread that made MAX_EVENTS calls before the finish (a slow
     * main thread, as under TSan) waits (deadline 60 s) for this to be set, then goes on */
    _Atomic int *finished;
};

static uint64_t value_of(uint32_t n, uint32_t i)
{
    return tt_test_mix(run_seed, n, i);
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    char name[16];
    snprintf(name, sizeof name, "s%u", w->n);
    w->named_rc = tt_thread_name(w->s, name);
    uint64_t st = tt_test_mix(run_seed, w->n, 0xabc) | 1;
    uint8_t *buf = malloc(64 * 1024);
    if (!buf) {
        w->other_rc = TT_E_NOMEM;
        return NULL;
    }
    w->other_rc = TT_OK;
    for (uint32_t i = 0; w->want == 0 || i < w->want; i++) {
        if (i >= MAX_EVENTS) {
            if (w->want != 0 || w->finished == NULL) {
                w->other_rc = TT_E_LIMIT;
                break;
            }
            uint64_t deadline = tt_test_now_ns() + 60ull * 1000000000;
            while (w->refused == 0 && !atomic_load(w->finished) && tt_test_now_ns() < deadline)
                sched_yield();
        }
        size_t len = size_of_event(&st);
        tt_test_fill(buf, len, value_of(w->n, i));
        w->attempted++;
        int rc = tt_user(w->s, (w->n << 24) | i, buf, len);
        if (rc == TT_OK && w->refused == 0) {
            if (w->ok == MAX_EVENTS) { /* recorded, and no room to remember it: a failure */
                w->other_rc = TT_E_LIMIT;
                break;
            }
            w->sizes[w->ok++] = len;
            atomic_store_explicit(&w->progress, w->ok, memory_order_release);
            if (w->gate && w->ok == 1) {
                atomic_fetch_add(w->gate, 1);
                uint64_t deadline = tt_test_now_ns() + 60ull * 1000000000;
                while (atomic_load(w->gate) < w->gate_n && tt_test_now_ns() < deadline)
                    sched_yield();
                w->gate_timeout = atomic_load(w->gate) < w->gate_n;
            }
        } else if (rc == TT_E_CLOSED) {
            /* finish began: this and every later call is refused */
            w->refused++;
            if (w->refused == 4)
                break;
        } else {
            w->other_rc = rc;
            break;
        }
    }
    if (w->end_thread && w->other_rc == TT_OK && w->refused == 0) {
        int rc = tt_session_thread_end(w->s);
        if (rc != TT_OK)
            w->other_rc = rc;
    }
    free(buf);
    if (w->done)
        atomic_fetch_add(w->done, 1);
    return NULL;
}

static void start(pthread_t *th, struct worker *w)
{
    cr_assert_eq(pthread_create(th, NULL, worker_main, w), 0);
}

/* Checks that thread "s<n>" of the trace holds exactly w->ok user events, in order, each with
 * its own tag, length and bytes. */
static void check_worker(tt_test_reader *tr, const struct worker *w)
{
    cr_assert_eq(w->other_rc, TT_OK, "thread s%u: unexpected %s", w->n,
                 tt_error_name(w->other_rc));
    cr_assert_eq(w->named_rc, TT_OK, "thread s%u could not name itself", w->n);
    char name[16];
    snprintf(name, sizeof name, "s%u", w->n);
    uint32_t id = tt_test_thread_by_name(tr, name);
    cr_assert_neq(id, UINT32_MAX, "thread %s is not in the thread table", name);
    tt_test_events ev;
    tt_test_read_cursor(tr, id, &ev);
    cr_assert_eq(ev.end_code, TT_E_END, "thread %s: %s (%s)", name, tt_error_name(ev.end_code),
                 ev.err.message);
    uint32_t k = 0;
    for (size_t j = 0; j < ev.n; j++) {
        const tt_event *e = &ev.v[j].ev;
        if (e->kind != TT_EV_USER)
            continue;
        cr_assert_lt(k, w->ok, "thread %s: more user events in the file than the %u accepted",
                     name, w->ok);
        cr_assert_eq(e->arg, ((uint64_t)w->n << 24) | k, "thread %s event %u has tag %#llx",
                     name, k, (unsigned long long)e->arg);
        cr_assert_eq(e->payload_len, w->sizes[k], "thread %s event %u: length %llu, not %zu",
                     name, k, (unsigned long long)e->payload_len, w->sizes[k]);
        size_t bad = tt_test_check_fill(ev.v[j].payload, e->payload_len, value_of(w->n, k));
        cr_assert_eq(bad, e->payload_len, "thread %s event %u differs at byte %zu", name, k, bad);
        k++;
    }
    cr_assert_eq(k, w->ok, "thread %s: %u user events in the file, %u calls returned TT_OK", name,
                 k, w->ok);
    cr_assert_eq(w->ok + w->refused, w->attempted, "thread %s: %u ok + %u refused != %u made",
                 name, w->ok, w->refused, w->attempted);
    tt_test_events_free(&ev);
}

/* @lazy: the swapper starts at the first full buffer, as in the runtime's processes */
static tt_session *open_mem_as(tt_memory_sink *sink, uint64_t buffer, uint64_t budget, bool lazy)
{
    tt_config cfg;
    tt_error_info err;
    tt_config_init(&cfg);
    ((struct tt_config_impl *)(void *)&cfg)->lazy_swapper = lazy;
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, buffer, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, budget, &err), TT_OK, "%s",
                 err.message);
    tt_config_set_memory_sink(&cfg, sink);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    return s;
}

static tt_session *open_mem(tt_memory_sink *sink, uint64_t buffer, uint64_t budget)
{
    return open_mem_as(sink, buffer, budget, false);
}

static void read_back(tt_test_reader *tr, const void *data, size_t len)
{
    tt_error_info err;
    int rc = tt_test_reader_open_mem(tr, data, len, TT_CURSORS_PER_THREAD, &err);
    cr_assert_eq(rc, TT_OK, "reading the trace: %s (%s)", tt_error_name(rc), err.message);
    tt_source src;
    tt_source_memory(&src, data, len);
    tt_verify_result vr;
    rc = tt_verify(&src, NULL, &vr);
    cr_assert_eq(rc, TT_OK, "verify: %s at %llu: %s", tt_verify_status_name(vr.status),
                 (unsigned long long)vr.offset, vr.message);
}

static struct worker W[MAX_THREADS];

/* Eight threads record into @s (thread i makes @want + i * @step calls; the odd ones end with
 * tt_session_thread_end); then close, and every event is read back from @sink. */
static void eight_workers(tt_session *s, tt_memory_sink *sink, uint32_t want, uint32_t step)
{
    pthread_t th[8];
    for (uint32_t i = 0; i < 8; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = want + step * i, .end_thread = i % 2 };
        start(&th[i], &W[i]);
    }
    for (uint32_t i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    tt_error_info err;
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_reader tr;
    read_back(&tr, sink->data, sink->len);
    for (uint32_t i = 0; i < 8; i++) {
        cr_assert_eq(W[i].ok, W[i].want, "thread %u", i);
        check_worker(&tr, &W[i]);
    }
    tt_test_reader_close(&tr);
    free(sink->data);
}

Test(stress, eight_threads_with_random_payload_sizes_every_event_read_back)
{
    seed_init("eight_threads");
    tt_memory_sink sink;
    eight_workers(open_mem(&sink, 16384, 256 * 1024), &sink, 600, 100);
}

/* The runtime's processes start their swapper at the first buffer a thread hands over
 * (record/swapper.c): eight threads fill theirs at once and race to start it; with buffers
 * they never fill, close encodes everything on the closing thread. Every event is read back
 * either way. */
Test(stress, a_swapper_started_at_the_first_full_buffer_or_never_loses_nothing)
{
    seed_init("lazy_swapper");
    tt_memory_sink sink;
    eight_workers(open_mem_as(&sink, 16384, 256 * 1024, true), &sink, 600, 100);
    eight_workers(open_mem_as(&sink, 1u << 20, 32u << 20, true), &sink, 5, 1);
}

Test(stress, threads_that_start_after_others_ended_and_threads_that_exit_half_full)
{
    seed_init("late_and_half_full");
    tt_memory_sink sink;
    /* 32 buffers for 12 threads: a thread that exits without tt_session_thread_end keeps its
     * buffer until close, so the budget must hold one per such thread plus one (see report) */
    tt_session *s = open_mem(&sink, 16384, 512 * 1024);
    pthread_t th[12];
    /* wave 1: four threads; two end properly, two just return (buffers partly full) */
    for (uint32_t i = 0; i < 4; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = 300 + 50 * i, .end_thread = i < 2 };
        start(&th[i], &W[i]);
    }
    for (uint32_t i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* wave 2, after wave 1 ended (their OS thread ids may be reused): four more */
    for (uint32_t i = 4; i < 8; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = 400, .end_thread = i % 2 };
        start(&th[i], &W[i]);
    }
    /* meanwhile, four threads with a handful of events each: their buffers are far from full
     * when they exit, and nobody hands them over but close */
    for (uint32_t i = 8; i < 12; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = 3 + i };
        start(&th[i], &W[i]);
    }
    for (uint32_t i = 4; i < 12; i++)
        pthread_join(th[i], NULL);
    tt_error_info err;
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_reader tr;
    read_back(&tr, sink.data, sink.len);
    cr_assert_eq(tr.m.thread_count, 13u, "12 workers and the closing thread, not %u",
                 tr.m.thread_count);
    for (uint32_t i = 0; i < 12; i++)
        check_worker(&tr, &W[i]);
    tt_test_reader_close(&tr);
    free(sink.data);
}

static void *late_thread(void *p)
{
    int rc = tt_user(p, 0xdead, "late", 4);
    return (void *)(intptr_t)rc;
}

Test(stress, finishing_while_threads_record_accounts_for_every_call)
{
    seed_init("finish_while_recording");
    tt_memory_sink sink;
    tt_session *s = open_mem(&sink, 16384, 256 * 1024);
    pthread_t th[8];
    _Atomic int finished = 0;
    for (uint32_t i = 0; i < 8; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = 0, .finished = &finished };
        start(&th[i], &W[i]);
    }
    /* wait (deadline 60 s) until every thread has recorded something, then finish under them */
    uint64_t deadline = tt_test_now_ns() + 60ull * 1000000000;
    for (uint32_t i = 0; i < 8; i++)
        while (atomic_load_explicit(&W[i].progress, memory_order_acquire) < 50 &&
               tt_test_now_ns() < deadline)
            sched_yield();
    for (uint32_t i = 0; i < 8; i++)
        cr_assert_geq(atomic_load(&W[i].progress), 50u, "thread %u never got going", i);
    tt_error_info err;
    cr_assert_eq(tt_session_finish(s, &err), TT_OK, "%s", err.message);
    atomic_store(&finished, 1);
    for (uint32_t i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    /* a thread that first records after finish is refused too */
    pthread_t late;
    void *late_rc;
    cr_assert_eq(pthread_create(&late, NULL, late_thread, s), 0);
    pthread_join(late, &late_rc);
    cr_assert_eq((int)(intptr_t)late_rc, TT_E_CLOSED);
    cr_assert_eq(tt_user(s, 1, "x", 1), TT_E_CLOSED);
    cr_assert_eq(tt_session_finish(s, &err), TT_OK, "finish again");
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    read_back(&tr, sink.data, sink.len);
    for (uint32_t i = 0; i < 8; i++) {
        cr_assert_eq(W[i].refused, 4u, "thread %u: %u refusals", i, W[i].refused);
        check_worker(&tr, &W[i]);
    }
    /* the eight workers and the thread that finished; not the late one */
    cr_assert_eq(tr.m.thread_count, 9u, "%u threads in the file", tr.m.thread_count);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* A sink that takes its time: every write sleeps 200 µs. Only the swapper (and close) call it. */
struct slow_sink {
    uint8_t *data;
    size_t len, cap;
    unsigned writes;
};

static int slow_write(void *ctx, uint64_t off, const void *data, size_t len)
{
    struct slow_sink *ss = ctx;
    struct timespec d = { 0, 200000 };
    nanosleep(&d, NULL);
    if (off + len > ss->cap) {
        size_t nc = ss->cap ? ss->cap : 65536;
        while (nc < off + len)
            nc *= 2;
        uint8_t *nd = realloc(ss->data, nc);
        if (!nd)
            return ENOMEM;
        memset(nd + ss->cap, 0, nc - ss->cap);
        ss->data = nd;
        ss->cap = nc;
    }
    memcpy(ss->data + off, data, len);
    if (off + len > ss->len)
        ss->len = off + len;
    ss->writes++;
    return 0;
}

Test(stress, a_tiny_budget_and_a_sink_that_sleeps_lose_nothing)
{
    seed_init("tiny_budget_slow_sink");
    struct slow_sink ss = { 0 };
    tt_config cfg;
    tt_error_info err;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, &err), TT_OK);
    /* six buffers for four threads: each thread holds one buffer while it records, so a budget
     * of fewer buffers than threads + 1 can leave every holder waiting for another */
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 6 * 4096, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BLOCK_BYTES, 4096, &err), TT_OK);
    tt_config_set_callback_sink(&cfg, slow_write, &ss);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    pthread_t th[4];
    for (uint32_t i = 0; i < 4; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = 150, .end_thread = i % 2 };
        start(&th[i], &W[i]);
    }
    for (uint32_t i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    tt_session_stats st;
    tt_session_stats_get(s, &st);
    cr_assert_gt(st.stalls, 0u, "six 4 KiB buffers and a slow sink, yet no thread waited");
    cr_assert_eq(st.refused, 0u);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_reader tr;
    read_back(&tr, ss.data, ss.len);
    cr_assert_geq(tr.m.stall_count, st.stalls); /* close may wait once more */
    for (uint32_t i = 0; i < 4; i++)
        check_worker(&tr, &W[i]);
    tt_test_reader_close(&tr);
    free(ss.data);
}

/* More threads than the budget has buffers, all recording at once: 16 threads, 4 buffers. Each
 * makes one event, so it holds a buffer, and waits until all 16 have made theirs; a thread that
 * cannot get a buffer while the others hold theirs idle must take one of those (the swapper
 * gives it back) rather than wait forever. Half the threads end, half exit holding a buffer.
 * Fails, not hangs, without that: the main thread waits for the workers with a deadline. */
Test(stress, more_threads_than_buffers_all_holding_one_lose_nothing)
{
    seed_init("more_threads_than_buffers");
    tt_memory_sink sink = { 0 };
    tt_session *s = open_mem(&sink, 4096, 4 * 4096);
    static _Atomic uint32_t gate, done;
    atomic_store(&gate, 0);
    atomic_store(&done, 0);
    pthread_t th[MAX_THREADS];
    for (uint32_t i = 0; i < MAX_THREADS; i++) {
        W[i] = (struct worker){ .s = s, .n = i, .want = 100, .end_thread = i % 2, .gate = &gate,
                                .gate_n = MAX_THREADS, .done = &done };
        start(&th[i], &W[i]);
    }
    uint64_t deadline = tt_test_now_ns() + 90ull * 1000000000;
    while (atomic_load(&done) < MAX_THREADS && tt_test_now_ns() < deadline)
        sched_yield();
    cr_assert_eq(atomic_load(&done), MAX_THREADS,
                 "%u of %u threads finished within 90 s (%u made their first event): the rest "
                 "wait for a buffer that the others hold", atomic_load(&done), MAX_THREADS,
                 atomic_load(&gate));
    for (uint32_t i = 0; i < MAX_THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(W[i].gate_timeout, 0, "thread s%u: the others never made their first event",
                     i);
    }
    tt_error_info err;
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_reader tr;
    read_back(&tr, sink.data, sink.len);
    cr_assert_eq(tr.m.thread_count, MAX_THREADS + 1); /* and the closing thread */
    for (uint32_t i = 0; i < MAX_THREADS; i++)
        check_worker(&tr, &W[i]);
    tt_test_reader_close(&tr);
    free(sink.data);
}
