/* SPDX-License-Identifier: MIT */
/* Synchronization events (sync.h): ids, sequence numbers, results, the replayed order and the
 * schedule divergence, through the public calls a linked program makes. */
#include "common.h"
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(sync, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

static uint32_t site_of(tt_session *s, const char *name)
{
    uint32_t id = 0;
    cr_assert_eq(tt_intern(s, TT_OBJ_SITE, name, &id), TT_OK);
    return id;
}

/* Record one operation of @kind on @obj that returns @result (and took it when @took). */
static void op(tt_session *s, tt_sync_kind kind, uint32_t site, const void *obj, int result,
               int took)
{
    tt_sync o;
    cr_assert_eq(tt_sync_begin(s, &o, kind, site, obj), TT_OK);
    cr_assert_eq(tt_sync_end(s, &o, result, took), TT_OK);
}

/* The sync events of @tr's thread @t, in order. */
static size_t sync_events(tt_test_reader *tr, uint32_t t, tt_test_event *out, size_t cap)
{
    tt_test_events e;
    tt_test_read_cursor(tr, t, &e);
    size_t n = 0;
    for (size_t i = 0; i < e.n && n < cap; i++) {
        if (e.v[i].ev.kind != TT_EV_SYNC)
            continue;
        out[n] = e.v[i];
        out[n].payload = NULL;
        n++;
    }
    tt_test_events_free(&e);
    return n;
}

Test(sync, objects_get_stable_ids_and_each_counts_its_own_operations)
{
    tt_memory_sink ms;
    tt_session *s;
    tt_error_info err;
    int a, b;
    cr_assert_eq(tt_test_open_record_mem(&ms, &s, &err), TT_OK, "%s", err.message);
    uint32_t lock = site_of(s, "lock"), unlock = site_of(s, "unlock"), trylock = site_of(s, "trylock");
    op(s, TT_SYNC_LOCK, lock, &a, 0, 1);      /* a: seq 0 */
    op(s, TT_SYNC_LOCK, lock, &b, 0, 1);      /* b: seq 0 */
    op(s, TT_SYNC_UNLOCK, unlock, &a, 0, 1);  /* a: seq 1 */
    op(s, TT_SYNC_LOCK, trylock, &a, EBUSY, 0); /* a busy: no turn, its result recorded */
    op(s, TT_SYNC_UNLOCK, unlock, &b, 0, 1);  /* b: seq 1 */
    tt_sync_forget(s, &a);
    op(s, TT_SYNC_LOCK, lock, &a, 0, 1);      /* a is a new object: new id, seq 0 */
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, ms.data, ms.len, TT_CURSORS_PER_THREAD, &err), TT_OK);
    tt_test_event ev[8];
    size_t n = sync_events(&tr, 0, ev, 8);
    cr_assert_eq(n, 6);
    const uint64_t A = 1, B = 2, A2 = 3; /* thread 0's first, second and third objects */
    const uint64_t want_id[6] = { A, B, A, A, B, A2 }, want_seq[6] = { 0, 0, 1, 1, 1, 0 };
    const uint8_t want_dir[6] = { 1, 1, 1, 0, 1, 1 };
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(ev[i].ev.arg, want_id[i], "event %zu: object %llu", i,
                     (unsigned long long)ev[i].ev.arg);
        cr_assert_eq(ev[i].ev.dir, want_dir[i], "event %zu: ordered %u", i, ev[i].ev.dir);
        if (want_dir[i])
            cr_assert_eq(ev[i].ev.addr, want_seq[i], "event %zu: seq %llu", i,
                         (unsigned long long)ev[i].ev.addr);
    }
    cr_assert_eq(ev[3].ev.payload_len, 4, "the failed trylock keeps its result");
    cr_assert_eq(ev[0].ev.payload_len, 0, "a result of 0 takes no payload");
    tt_test_reader_close(&tr);

    /* replay: the results come back, and a trylock that failed says so without a turn */
    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, ms.data, ms.len, &s, &err), TT_OK, "%s",
                 err.message);
    tt_sync o;
    int want[6][2] = { { 0, 1 }, { 0, 1 }, { 0, 1 }, { EBUSY, 0 }, { 0, 1 }, { 0, 1 } };
    const void *objs[6] = { &a, &b, &a, &a, &b, &a };
    tt_sync_kind kinds[6] = { TT_SYNC_LOCK, TT_SYNC_LOCK, TT_SYNC_UNLOCK, TT_SYNC_LOCK,
                              TT_SYNC_UNLOCK, TT_SYNC_LOCK };
    uint32_t sites[6] = { lock, lock, unlock, trylock, unlock, lock };
    for (int i = 0; i < 6; i++) {
        if (i == 5)
            tt_sync_forget(s, &a);
        cr_assert_eq(tt_sync_begin(s, &o, kinds[i], sites[i], objs[i]), TT_OK, "op %d", i);
        cr_assert(tt_sync_replaying(&o));
        cr_assert_eq(o.result, want[i][0], "op %d: result %d", i, o.result);
        cr_assert_eq(o.ordered, want[i][1], "op %d: ordered %d", i, o.ordered);
        cr_assert_eq(tt_sync_end(s, &o, o.result, o.ordered), TT_OK);
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    free(ms.data);
}

/* The "sync again" form (FORMAT.md §5.2): a loop of locks and unlocks on one mutex, now and
 * then another, a failed trylock (a payload: the long form) and an operation without a turn
 * (addr 0: a step back), each decoded with its own object, seq, site and result, in under 6
 * bytes an event; verified, and replayed. */
#define AGAIN_ROUNDS 3000
Test(sync, repeated_operations_on_one_object_take_four_bytes_and_decode_to_their_own_values)
{
    tt_memory_sink ms, empty;
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(tt_test_open_record_mem(&empty, &s, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    static struct want { uint32_t site; uint64_t id, addr; uint8_t dir, result; } w[4 * AGAIN_ROUNDS];
    size_t nw = 0;
    int a, b;
    uint64_t seq[3] = { 0, 0, 0 };
    cr_assert_eq(tt_test_open_record_mem(&ms, &s, &err), TT_OK, "%s", err.message);
    uint32_t lock = site_of(s, "lock"), unlock = site_of(s, "unlock"), note = site_of(s, "note");
    for (int i = 0; i < AGAIN_ROUNDS; i++) {
        const void *o = i % 10 == 9 ? (const void *)&b : (const void *)&a;
        uint64_t id = o == &a ? 1 : 2; /* thread 0's first and second objects */
        op(s, TT_SYNC_LOCK, lock, o, 0, 1);
        w[nw++] = (struct want){ lock, id, seq[id]++, 1, 0 };
        op(s, TT_SYNC_UNLOCK, unlock, o, 0, 1);
        w[nw++] = (struct want){ unlock, id, seq[id]++, 1, 0 };
        if (i % 7 == 3) {
            op(s, TT_SYNC_LOCK, lock, &a, EBUSY, 0);
            w[nw++] = (struct want){ lock, 1, 0, 0, EBUSY };
        }
        if (i % 5 == 1) {
            op(s, TT_SYNC_NOTE, note, o, 0, 0);
            w[nw++] = (struct want){ note, id, 0, 0, 0 };
        }
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    /* a lock or unlock on the object before it: tag, dt, site, step, 4 bytes (13 in the long
     * form); the changes of object, the payloads, the steps back to 0 and the chunk headers and
     * index tables make the mix about 5.1 */
    cr_assert_lt(ms.len - empty.len, 6 * nw, "%zu bytes for %zu sync events", ms.len - empty.len,
                 nw);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, ms.data, ms.len, TT_CURSORS_PER_THREAD, &err), TT_OK);
    tt_test_events e;
    tt_test_read_cursor(&tr, 0, &e);
    size_t k = 0;
    for (size_t i = 0; i < e.n; i++) {
        const tt_event *ev = &e.v[i].ev;
        if (ev->kind != TT_EV_SYNC)
            continue;
        cr_assert_lt(k, nw, "more sync events than recorded");
        const struct want *x = &w[k];
        cr_assert(ev->sp.site == x->site && ev->arg == x->id && ev->dir == x->dir,
                  "sync event %zu: site %u object %llu ordered %u, expected %u %llu %u", k,
                  ev->sp.site, (unsigned long long)ev->arg, ev->dir, x->site,
                  (unsigned long long)x->id, x->dir);
        cr_assert_eq(ev->addr, x->addr, "sync event %zu: addr %llu, expected %llu", k,
                     (unsigned long long)ev->addr, (unsigned long long)x->addr);
        cr_assert_eq(ev->payload_len, x->result ? 4u : 0u, "sync event %zu: payload %llu", k,
                     (unsigned long long)ev->payload_len);
        k++;
    }
    cr_assert_eq(k, nw, "%zu sync events read, %zu recorded", k, nw);
    tt_test_events_free(&e);
    tt_test_reader_close(&tr);
    tt_verify_result vr;
    tt_source vsrc;
    tt_source_memory(&vsrc, ms.data, ms.len);
    cr_assert_eq(tt_verify_ex(&vsrc, NULL, TT_VERIFY_FRAMES, &vr), TT_OK, "%s", vr.message);

    /* replay: each operation in turn, with its recorded result */
    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, ms.data, ms.len, &s, &err), TT_OK, "%s",
                 err.message);
    for (size_t i = 0; i < nw; i++) {
        tt_sync o;
        const void *obj = w[i].id == 1 ? (const void *)&a : (const void *)&b;
        tt_sync_kind kind = w[i].site == note ? TT_SYNC_NOTE
                            : w[i].site == lock ? TT_SYNC_LOCK : TT_SYNC_UNLOCK;
        cr_assert_eq(tt_sync_begin(s, &o, kind, w[i].site, obj), TT_OK, "op %zu", i);
        cr_assert_eq(o.result, w[i].result, "op %zu: result %d", i, o.result);
        cr_assert_eq(o.ordered, w[i].dir, "op %zu: ordered %d", i, o.ordered);
        cr_assert_eq(tt_sync_end(s, &o, o.result, o.ordered), TT_OK);
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    free(ms.data);
    free(empty.data);
}

Test(sync, a_replay_on_another_object_diverges)
{
    tt_memory_sink ms;
    tt_session *s;
    tt_error_info err;
    int a, b;
    cr_assert_eq(tt_test_open_record_mem(&ms, &s, &err), TT_OK, "%s", err.message);
    uint32_t lock = site_of(s, "lock");
    op(s, TT_SYNC_LOCK, lock, &a, 0, 1);
    op(s, TT_SYNC_LOCK, lock, &a, 0, 1);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, ms.data, ms.len, &s, &err), TT_OK);
    tt_sync o;
    cr_assert_eq(tt_sync_begin(s, &o, TT_SYNC_LOCK, lock, &a), TT_OK);
    tt_sync_end(s, &o, 0, 1);
    /* the recording's second lock was on a again; b already has no id, and gets a's: that is
     * a divergence only once b and a are told apart, so bind b to another id first */
    tt_sync_bind(s, &b, UINT64_C(7) << 32 | 7);
    cr_assert_eq(tt_sync_begin(s, &o, TT_SYNC_LOCK, lock, &b), TT_E_DIVERGED);
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_ARG);
    cr_assert(strstr(d.message, "another synchronization object") != NULL, "%s", d.message);
    tt_session_close(s, &err);
    free(ms.data);
}

/* Two threads take one object in turns; the replay, whose threads start in the other order
 * and do not take turns of their own, must make the recorded order. */
#define TURNS 300
struct duo {
    tt_session *s;
    uint32_t site;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int order[2 * TURNS]; /* recording: whose turn each one is (TURNS each, shuffled) */
    int done;             /* recording: turns taken */
    int strict;
    int obj;
    _Atomic unsigned pos;
    int log[2 * TURNS];
    _Atomic int failures;
};

struct member {
    struct duo *d;
    int id;
};

static void *member_thread(void *arg)
{
    struct member *m = arg;
    struct duo *d = m->d;
    char name[16];
    snprintf(name, sizeof name, "member-%d", m->id);
    tt_thread_name(d->s, name);
    for (int i = 0; i < TURNS; i++) {
        if (d->strict) {
            pthread_mutex_lock(&d->mu);
            while (d->order[d->done] != m->id)
                pthread_cond_wait(&d->cv, &d->mu);
        }
        tt_sync o;
        if (tt_sync_begin(d->s, &o, TT_SYNC_ACQUIRE, d->site, &d->obj) != TT_OK)
            atomic_fetch_add(&d->failures, 1);
        d->log[atomic_fetch_add(&d->pos, 1)] = m->id;
        if (tt_sync_end(d->s, &o, 0, 1) != TT_OK)
            atomic_fetch_add(&d->failures, 1);
        if (d->strict) {
            d->done++;
            pthread_cond_broadcast(&d->cv);
            pthread_mutex_unlock(&d->mu);
        }
    }
    tt_session_thread_end(d->s);
    return NULL;
}

static void run_duo(struct duo *d, int strict)
{
    pthread_t th[2];
    struct member m[2] = { { d, 0 }, { d, 1 } };
    d->strict = strict;
    d->done = 0;
    /* a random-looking order with TURNS turns each; member 0 first */
    for (int i = 0; i < 2 * TURNS; i++)
        d->order[i] = i & 1;
    for (int i = 2 * TURNS - 1; i > 1; i--) {
        int j = 1 + (int)(tt_test_mix((uint64_t)i, 17, 5) % (uint64_t)i);
        int t = d->order[i];
        d->order[i] = d->order[j];
        d->order[j] = t;
    }
    atomic_store(&d->pos, 0);
    for (int i = 1; i >= 0; i--)
        cr_assert_eq(pthread_create(&th[i], NULL, member_thread, &m[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
}

Test(sync, a_replay_takes_each_object_in_the_recorded_order_on_all_cores)
{
    static struct duo d;
    static int recorded[2 * TURNS];
    tt_memory_sink ms;
    tt_error_info err;
    memset(&d, 0, sizeof d);
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    cr_assert_eq(tt_test_open_record_mem(&ms, &d.s, &err), TT_OK, "%s", err.message);
    d.site = site_of(d.s, "take");
    run_duo(&d, 1);
    cr_assert_eq(atomic_load(&d.failures), 0);
    memcpy(recorded, d.log, sizeof recorded);
    cr_assert_eq(tt_session_close(d.s, &err), TT_OK, "%s", err.message);

    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, ms.data, ms.len, &d.s, &err), TT_OK);
    run_duo(&d, 0);
    cr_assert_eq(atomic_load(&d.failures), 0, "%d calls failed", atomic_load(&d.failures));
    /* the log is written between begin (the turn taken) and end (the turn passed on): exact */
    for (int i = 0; i < 2 * TURNS; i++)
        cr_assert_eq(d.log[i], recorded[i], "turn %d went to %d, recorded %d", i, d.log[i],
                     recorded[i]);
    cr_assert_eq(tt_session_close(d.s, &err), TT_OK, "%s", err.message);
    pthread_mutex_destroy(&d.mu);
    pthread_cond_destroy(&d.cv);
    free(ms.data);
}

/* Member 1 alone: its first turn is after member 0's first, which never comes. */
static void *lone_member(void *arg)
{
    struct duo *d = arg;
    tt_thread_name(d->s, "member-1");
    tt_sync o;
    int rc = tt_sync_begin(d->s, &o, TT_SYNC_ACQUIRE, d->site, &d->obj);
    atomic_store(&d->failures, rc);
    return NULL;
}

Test(sync, a_turn_that_never_comes_is_a_schedule_divergence_that_names_whose_turn_it_is)
{
    static struct duo d;
    tt_memory_sink ms;
    tt_error_info err;
    memset(&d, 0, sizeof d);
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    cr_assert_eq(tt_test_open_record_mem(&ms, &d.s, &err), TT_OK, "%s", err.message);
    d.site = site_of(d.s, "take");
    run_duo(&d, 1); /* member 0 goes first */
    cr_assert_eq(tt_session_close(d.s, &err), TT_OK, "%s", err.message);

    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_ORDER_TIMEOUT_MS, 150, &err), TT_OK);
    tt_source src;
    tt_source_memory(&src, ms.data, ms.len);
    tt_config_set_source(&cfg, &src);
    cr_assert_eq(tt_session_open(&cfg, &d.s, &err), TT_OK, "%s", err.message);
    /* member 0 registers (so that member 1 binds by its name) and never calls */
    cr_assert_eq(tt_thread_name(d.s, "member-0"), TT_OK);
    pthread_t th;
    uint64_t t0 = tt_test_now_ns();
    cr_assert_eq(pthread_create(&th, NULL, lone_member, &d), 0);
    pthread_join(th, NULL);
    uint64_t waited = tt_test_now_ns() - t0;
    cr_assert_eq(atomic_load(&d.failures), TT_E_DIVERGED, "got %s",
                 tt_error_name(atomic_load(&d.failures)));
    cr_assert_geq(waited, 150000000u, "gave up after %llu ns", (unsigned long long)waited);
    tt_divergence dv;
    cr_assert_eq(tt_replay_divergence(d.s, &dv), TT_OK);
    cr_assert_eq(dv.reason, TT_DIV_SCHEDULE);
    cr_assert(strstr(dv.message, "take") != NULL, "names the operation: %s", dv.message);
    char obj[64];
    snprintf(obj, sizeof obj, "object %llu:1", (unsigned long long)(dv.expected.ev.arg >> 32));
    cr_assert(strstr(dv.message, obj) != NULL, "names the object: %s", dv.message);
    cr_assert(strstr(dv.message, "is at operation 0") != NULL, "%s", dv.message);
    cr_assert(strstr(dv.message, "the turn of recorded thread") != NULL, "names whose turn: %s",
              dv.message);
    tt_session_close(d.s, &err);
    pthread_mutex_destroy(&d.mu);
    pthread_cond_destroy(&d.cv);
    free(ms.data);
}

/* A sleeper's turn is far off: the passes before it must not wake it. The replay counts the
 * sleeps for a turn, and the wakes by a pass before the turn came (tt_replay_progress). */
#define FAR_TURN 200
struct far {
    tt_session *s;
    uint32_t site;
    int obj;
    _Atomic int tid;
    _Atomic int rc;
    bool pace;
    _Atomic int late;
};

static void *far_member(void *arg)
{
    struct far *d = arg;
    tt_thread_name(d->s, "member-1");
    atomic_store(&d->tid, (int)gettid());
    tt_sync o;
    int rc = tt_sync_begin(d->s, &o, TT_SYNC_ACQUIRE, d->site, &d->obj);
    if (rc == TT_OK)
        rc = tt_sync_end(d->s, &o, 0, 1);
    atomic_store(&d->rc, rc);
    return NULL;
}

/* Whether thread @tid of this process is asleep (state S). */
static bool asleep(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

/* Member 1 asleep, within 10 s (a wake makes it runnable before the waker's call returns). */
static bool wait_asleep(struct far *d)
{
    uint64_t deadline = tt_test_now_ns() + 10000000000u;
    while (atomic_load(&d->tid) == 0 || !asleep(atomic_load(&d->tid))) {
        if (tt_test_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* Member 0's turns; in replay, each once member 1 sleeps (again, had the turn before woken it) */
static void *far_first(void *arg)
{
    struct far *d = arg;
    tt_thread_name(d->s, "member-0");
    for (int i = 0; i < FAR_TURN; i++) {
        if (d->pace && !wait_asleep(d))
            atomic_store(&d->late, 1);
        tt_sync o;
        tt_sync_begin(d->s, &o, TT_SYNC_ACQUIRE, d->site, &d->obj);
        tt_sync_end(d->s, &o, 0, 1);
    }
    return NULL;
}

Test(sync, a_sleeping_turn_is_woken_by_the_pass_that_lets_it_go_and_by_no_other)
{
    static struct far d;
    tt_memory_sink ms;
    tt_error_info err;
    memset(&d, 0, sizeof d);
    cr_assert_eq(tt_test_open_record_mem(&ms, &d.s, &err), TT_OK, "%s", err.message);
    d.site = site_of(d.s, "take");
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, far_first, &d), 0);
    pthread_join(th, NULL);
    cr_assert_eq(pthread_create(&th, NULL, far_member, &d), 0);
    pthread_join(th, NULL);
    cr_assert_eq(tt_session_close(d.s, &err), TT_OK, "%s", err.message);

    /* replay: member 1 waits for turn FAR_TURN, asleep, while member 0 takes the turns before */
    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, ms.data, ms.len, &d.s, &err), TT_OK, "%s",
                 err.message);
    atomic_store(&d.tid, 0);
    d.pace = true;
    cr_assert_eq(pthread_create(&th, NULL, far_member, &d), 0);
    pthread_t first;
    cr_assert_eq(pthread_create(&first, NULL, far_first, &d), 0);
    pthread_join(first, NULL);
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&d.rc), TT_OK, "%s", tt_error_name(atomic_load(&d.rc)));
    cr_assert_eq(atomic_load(&d.late), 0, "member 1 was not asleep within 10 s");
    /* it slept (more than once if a 50 ms slice ran out on a slow machine), and no pass but
     * its own woke it. A wake at every pass of a turn that shares its bit (200 % 32: the 9th,
     * 41st, ...) made 6 early wakes; one is allowed for a spurious wake of the futex */
    tt_replay_progress pr;
    cr_assert_eq(tt_replay_progress_get(d.s, &pr), TT_OK);
    cr_assert_geq(pr.turn_sleeps, 1, "it never slept");
    cr_assert_leq(pr.turn_early_wakes, 1, "passes not its own woke it %llu times in %llu sleeps",
                  (unsigned long long)pr.turn_early_wakes, (unsigned long long)pr.turn_sleeps);
    cr_assert_eq(tt_session_close(d.s, &err), TT_OK, "%s", err.message);
    free(ms.data);
}

Test(sync, chaos_is_recorded_with_its_seed_and_parameters)
{
    tt_memory_sink ms;
    tt_session *s;
    tt_error_info err;
    tt_config cfg;
    tt_config_init(&cfg);
    memset(&ms, 0, sizeof ms);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_CHAOS, 1, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_CHAOS_SEED, 424242, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_CHAOS_DEPTH, 4, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_CHAOS_DELAY_US, 5, &err), TT_OK);
    cr_assert_neq(tt_config_set(&cfg, TT_PARAM_CHAOS_DEPTH, 17, &err), TT_OK,
                  "a depth past 16 is refused when given");
    tt_config_set_memory_sink(&cfg, &ms);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    int a;
    uint32_t lock = site_of(s, "lock");
    for (int i = 0; i < 50; i++) {
        op(s, TT_SYNC_LOCK, lock, &a, 0, 1);
        op(s, TT_SYNC_UNLOCK, lock, &a, 0, 1);
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, ms.data, ms.len, TT_CURSORS_PER_THREAD, &err), TT_OK);
    bool found = false;
    for (uint32_t id = 1; id <= tr.m.object_count; id++) {
        tt_object_entry o;
        tt_reader_object(tr.r, id, &o);
        if (o.kind == TT_OBJ_META && o.name_len > 6 && memcmp(o.name, "chaos=", 6) == 0) {
            char text[256];
            snprintf(text, sizeof text, "%.*s", (int)o.name_len, o.name);
            /* 50 locks and 50 unlocks: 100 sync points; no function event, so no point of
             * theirs */
            cr_assert(strstr(text, "seed=424242 depth=4 delay_us=5 fn_span=65536 "
                                   "sync_points=100 fn_points=0 changes=") != NULL, "%s", text);
            found = true;
        }
    }
    cr_assert(found, "no chaos= META object");
    tt_test_reader_close(&tr);
    free(ms.data);
}

/* The registry's slot of an address (session/sync.c's slot_of: Fibonacci hashing of the address
 * without its low two bits, the top 20 bits). Kept in step with it by this test: if it changes,
 * the addresses below stop colliding and the test says so. */
static uint64_t slot_of(uintptr_t key)
{
    return ((uint64_t)(key >> 2) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - 20);
}

Test(sync, objects_past_the_registry_s_room_are_recorded_unordered_and_counted)
{
    /* 80 addresses whose probes all start in one slot: past TT_SYNC_PROBE (64) of them, an
     * object has no entry. The addresses are names only: nothing is read there. */
    static uintptr_t addr[80];
    size_t n = 0;
    const uint64_t want = 12345;
    for (uintptr_t a = (uintptr_t)0x100000000000u; n < 80; a += 4)
        if (slot_of(a) == want)
            addr[n++] = a;
    tt_memory_sink ms;
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(tt_test_open_record_mem(&ms, &s, &err), TT_OK, "%s", err.message);
    uint32_t lock = site_of(s, "lock");
    for (size_t i = 0; i < n; i++)
        op(s, TT_SYNC_LOCK, lock, (const void *)addr[i], 0, TT_SYNC_TOOK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, ms.data, ms.len, TT_CURSORS_PER_THREAD, &err), TT_OK);
    tt_test_event ev[80];
    size_t got = sync_events(&tr, 0, ev, 80);
    cr_assert_eq(got, 80);
    size_t unordered = 0;
    for (size_t i = 0; i < got; i++)
        unordered += ev[i].ev.arg == 0 && !ev[i].ev.dir;
    cr_assert_eq(unordered, 80 - 64, "%zu operations on no object", unordered);
    bool noted = false;
    for (uint32_t id = 1; id <= tr.m.object_count; id++) {
        tt_object_entry o;
        tt_reader_object(tr.r, id, &o);
        noted |= o.kind == TT_OBJ_META && o.name_len == 17 &&
                 memcmp(o.name, "sync_untracked=16", 17) == 0;
    }
    cr_assert(noted, "the recording says how many were not ordered (sync_untracked=16)");
    tt_test_reader_close(&tr);
    free(ms.data);
}
