/* SPDX-License-Identifier: MIT */
/* The record half of a synchronization operation (sync.h), and schedule chaos.
 *
 * Recording an operation: begin takes the sequence number of a release while the object is
 * still held (an unlock) or still to be given (a sem_post, a signal); end takes the number of
 * an acquisition that succeeded, now that the thread holds the object, and appends the event.
 * An exclusive object's count is touched only by its holder, so it costs a load and a store;
 * a shared one's (a rwlock, a semaphore, a condition variable, a barrier) a fetch-and-add.
 *
 * The event is kind TT_EV_SYNC with dir 1 when the operation took its object's turn, site = the
 * operation, arg = the object's id, addr = its sequence number, and a payload only when there
 * is something to say: the result as 4 bytes little-endian when it is not 0 or when extra bytes
 * (a sleep's remaining time) follow. Without a payload it is a compact raw record (record.h):
 * 16 bytes for an operation that did not wait (no time of its own), 32 bytes for one that did.
 * An operation that did not wait (a release; a lock the caller found free, TT_SYNC_AT_ONCE)
 * reads no clock: it takes the time of the thread's previous event.
 *
 * Schedule chaos (TT_PARAM_CHAOS): a PCT-style scheme (Burckhardt et al., ASPLOS 2010) over the
 * sync points. Every thread gets a random priority at its first sync point; depth - 1 change
 * points are drawn, log-uniformly over the first 2^14 sync points of the process, and the
 * thread that reaches one drops below every other. At a sync point a thread that is not the
 * highest-priority live thread sleeps, one time in two, for a random time up to delay_us; the
 * highest one yields one time in sixteen. Acquisitions are perturbed before they happen,
 * releases after: the window between two critical sections is where an atomicity violation
 * hides. Function events are chaos points too, one in about 2^15 (below). Between two points
 * the program runs at native speed. The seed and the parameters go
 * into the trace as the META object "chaos=...", so a recording says how it was made.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "record_api.h"

#define CHAOS_THREADS 256u
#define CHAOS_OCTAVES 14u /* change points among the first 2^14 sync points */
#define CHAOS_FN_SPAN 65536u /* function events between two of their chaos points, at most */

struct tt_chaos {
    uint64_t seed;
    uint32_t depth, delay_us;
    uint64_t change[16];
    uint32_t nchange;
    _Atomic uint64_t step;
    _Atomic uint64_t fn_points;               /* chaos points at function events */
    _Atomic int64_t next_low;                 /* the priority the next change point gives */
    _Atomic uint32_t nthreads;                /* highest thread id seen + 1 */
    _Atomic int64_t prio[CHAOS_THREADS];      /* 0: no priority yet (or ended) */
};

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

int tt_chaos_open(tt_session *s)
{
    if (!s->cfg.chaos)
        return TT_OK;
    struct tt_chaos *c = calloc(1, sizeof *c);
    if (!c)
        return TT_E_NOMEM;
    c->seed = s->cfg.chaos_seed;
    c->depth = (uint32_t)s->cfg.chaos_depth;
    c->delay_us = (uint32_t)s->cfg.chaos_delay_us;
    uint64_t x = c->seed;
    c->nchange = c->depth - 1;
    for (uint32_t i = 0; i < c->nchange; i++) {
        /* log-uniform: an octave [2^b, 2^(b+1)) of the first 2^CHAOS_OCTAVES steps, then a
         * step in it, so that a short run meets its change points as often as a long one */
        uint64_t r = splitmix(&x);
        uint32_t b = (uint32_t)(r % CHAOS_OCTAVES);
        c->change[i] = (UINT64_C(1) << b) + ((r >> 8) & ((UINT64_C(1) << b) - 1));
    }
    atomic_store_explicit(&c->next_low, -1, memory_order_relaxed);
    s->w->chaos = c;
    return TT_OK;
}

/* A count the recording carries as the META name "KEY=N" (tools/meta.c reads it), unless 0. */
static void note_count(tt_session *s, const char *key, _Atomic uint64_t *count)
{
    uint64_t n = atomic_load_explicit(count, memory_order_relaxed);
    if (n == 0)
        return;
    char text[64];
    uint32_t id;
    snprintf(text, sizeof text, "%s=%" PRIu64, key, n);
    tt_intern(s, TT_OBJ_META, text, &id);
}

void tt_chaos_note(tt_session *s)
{
    /* operations the registry had no room for: recorded on no object, not ordered in a replay,
     * and the replay's verdict says so */
    note_count(s, "sync_untracked", &s->sync.untracked);
    /* operations on process-shared objects: ordered within this process only, their order
     * between processes is not replayed; `info` says how many */
    note_count(s, "sync_shared", &s->sync.shared);
    struct tt_chaos *c = s->w ? s->w->chaos : NULL;
    if (!c)
        return;
    char meta[512];
    int n = snprintf(meta, sizeof meta, "chaos=seed=%" PRIu64 " depth=%u delay_us=%u fn_span=%u"
                     " sync_points=%" PRIu64 " fn_points=%" PRIu64 " changes=",
                     c->seed, c->depth, c->delay_us, CHAOS_FN_SPAN,
                     atomic_load_explicit(&c->step, memory_order_relaxed),
                     atomic_load_explicit(&c->fn_points, memory_order_relaxed));
    for (uint32_t i = 0; i < c->nchange && n > 0 && (size_t)n < sizeof meta; i++)
        n += snprintf(meta + n, sizeof meta - (size_t)n, "%s%" PRIu64, i ? "," : "",
                      c->change[i]);
    uint32_t id;
    tt_intern(s, TT_OBJ_META, meta, &id);
}

void tt_chaos_free(tt_session *s)
{
    if (s->w) {
        free(s->w->chaos);
        s->w->chaos = NULL;
    }
}

void tt_chaos_thread_end(tt_session *s, struct tt_rec_thread *t)
{
    struct tt_chaos *c = s->w ? s->w->chaos : NULL;
    if (c && t->base.id < CHAOS_THREADS)
        atomic_store_explicit(&c->prio[t->base.id], 0, memory_order_relaxed);
}

static void sleep_us(uint32_t us)
{
    struct timespec ts = { us / 1000000u, (long)(us % 1000000u) * 1000 };
    /* the guard is held: the preload library's nanosleep passes this straight on */
    nanosleep(&ts, NULL);
}

static uint64_t *thread_rng(const struct tt_chaos *c, struct tt_rec_thread *t)
{
    if (!t->chaos_rng)
        t->chaos_rng = c->seed ^ (UINT64_C(0xD1B54A32D192ED03) * (t->base.id + 1));
    return &t->chaos_rng;
}

/* A sync point of thread @t (@fn: a function event's, which draws no change point). */
static void chaos_point(struct tt_chaos *c, struct tt_rec_thread *t, bool fn)
{
    uint32_t me = t->base.id;
    thread_rng(c, t);
    int64_t mine = me < CHAOS_THREADS ? atomic_load_explicit(&c->prio[me], memory_order_relaxed)
                                      : INT64_MIN + 1;
    if (me < CHAOS_THREADS && mine == 0) {
        mine = (int64_t)(1000000 + splitmix(&t->chaos_rng) % 1000000);
        atomic_store_explicit(&c->prio[me], mine, memory_order_relaxed);
        uint32_t n = atomic_load_explicit(&c->nthreads, memory_order_relaxed);
        while (n <= me && !atomic_compare_exchange_weak_explicit(&c->nthreads, &n, me + 1,
                                                                 memory_order_relaxed,
                                                                 memory_order_relaxed))
            ;
    }
    uint64_t step = fn ? 0 : atomic_fetch_add_explicit(&c->step, 1, memory_order_relaxed) + 1;
    for (uint32_t i = 0; i < c->nchange && step; i++) {
        if (c->change[i] == step && me < CHAOS_THREADS) {
            mine = atomic_fetch_sub_explicit(&c->next_low, 1, memory_order_relaxed);
            atomic_store_explicit(&c->prio[me], mine, memory_order_relaxed);
        }
    }
    bool top = true;
    uint32_t n = atomic_load_explicit(&c->nthreads, memory_order_relaxed);
    for (uint32_t i = 0; i < n && top; i++) {
        int64_t p = atomic_load_explicit(&c->prio[i], memory_order_relaxed);
        if (i != me && p != 0 && p > mine)
            top = false;
    }
    uint64_t r = splitmix(&t->chaos_rng);
    if (!top && (r & 1))
        sleep_us(1 + (uint32_t)((r >> 8) % c->delay_us));
    else if (top && (r & 0xF0) == 0)
        sched_yield();
}

static inline void chaos_maybe(tt_session *s, struct tt_rec_thread *t)
{
    struct tt_chaos *c = s->w->chaos;
    if (TT_UNLIKELY(c != NULL))
        chaos_point(c, t, false);
}

/* ---- chaos at function events ----
 * The enter/exit fast path (record_api.h) is not touched: t->end is set a random number of
 * records ahead, 4 to CHAOS_FN_SPAN + 3 (a mean of about 2^15, some 0.3 to 1 ms of a program
 * that makes calls all the time), and the record that finds it is taken by the slow path,
 * which then makes a chaos point after the event, outside the call: a function event's, the
 * same as a sync point's but drawing no change point. Between two of them the program runs at
 * the fast path's speed. */
void tt_chaos_arm_(struct tt_writer *w, struct tt_rec_thread *t, bool fresh)
{
    uint8_t *end = tt_rec_buf_end(w, t);
    if (t->pos == NULL || end == NULL)
        return; /* no buffer: the next event refills, and refill arms */
    const uint64_t rec = sizeof(struct tt_raw_short);
    if (fresh || t->chaos_left == 0) {
        t->chaos_left = (4 + splitmix(thread_rng(w->chaos, t)) % CHAOS_FN_SPAN) * rec;
    } else if (t->chaos_mark != NULL) {
        /* the distance goes on across buffers and the records of the other paths */
        uint64_t used = (uint64_t)(t->pos - t->chaos_mark);
        t->chaos_left = used < t->chaos_left ? t->chaos_left - used : rec;
    }
    t->chaos_mark = t->pos;
    size_t room = (size_t)(end - t->pos);
    t->end = t->chaos_left < room ? t->pos + t->chaos_left : end;
}

bool tt_chaos_fn_end_(struct tt_writer *w, struct tt_rec_thread *t)
{
    uint8_t *end = tt_rec_buf_end(w, t);
    if (t->end == end || (size_t)(end - t->pos) < sizeof(struct tt_raw_short))
        return false; /* the true end: refill */
    tt_chaos_arm_(w, t, true);
    if ((size_t)(t->end - t->pos) < sizeof(struct tt_raw_short))
        t->end = end;
    return true;
}

void tt_chaos_fn_point_(tt_session *s, struct tt_rec_thread *t)
{
    struct tt_chaos *c = s->w->chaos;
    atomic_fetch_add_explicit(&c->fn_points, 1, memory_order_relaxed);
    chaos_point(c, t, true);
}

/* Appends @op's event with @result; @timed: with the clock's time, else with the thread's
 * previous event's (the encoder keeps a thread's times non-decreasing: a time of 0 becomes the
 * last one). */
static inline int append(tt_session *s, struct tt_rec_thread *t, const tt_sync *op, int result,
                         bool timed)
{
    uint8_t payload[4 + TT_SYNC_DATA_MAX];
    uint32_t len = 0;
    if (result != 0 || op->data_len) {
        uint32_t dl = op->data_len < TT_SYNC_DATA_MAX ? op->data_len : TT_SYNC_DATA_MAX;
        tt_put32(payload, (uint32_t)result);
        memcpy(payload + 4, op->data, dl);
        len = 4 + dl;
    }
    const uint32_t kind = TT_EV_SYNC | ((uint32_t)(op->ordered != 0) << 8);
    int rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    if (t->base.ended) {
        tt_rec_end_(t);
        return TT_E_CLOSED;
    }
    if (TT_LIKELY(len == 0)) {
        /* the common case: a compact form, 16 bytes when the event takes the previous one's
         * time and its site and sequence number fit (record.h), else 32 */
        const uint64_t time = timed ? tt_ticks() : 0;
        const size_t need = tt_rec_sync_size_(op->site, op->seq, time);
        /* the end the fast path sees first; the true one only when that is short (a false
         * end of schedule chaos is no reason to refill) */
        if (TT_UNLIKELY((size_t)(t->end - t->pos) < need) &&
            (size_t)(tt_rec_buf_end(s->w, t) - t->pos) < need &&
            (rc = tt_writer_refill(s, t, false)) != TT_OK) {
            tt_rec_end_(t);
            return rc;
        }
        tt_rec_put_sync_(t, kind, op->site, op->id, op->seq, time, need);
        if (TT_UNLIKELY(t->pos > t->end))
            tt_chaos_arm_(s->w, t, false); /* it passed a false end (chaos only) */
        tt_rec_end_(t);
        return TT_OK;
    }
    struct tt_raw_long r = { .kind = kind, .time = timed ? tt_ticks() : 0, .site = op->site, .arg = op->id,
                             .addr = op->seq, .len = len };
    rc = tt_writer_append_long(s, t, &r, payload);
    tt_rec_end_(t);
    return rc;
}

int tt_rec_sync_begin(tt_session *s, struct tt_thread *bt, tt_sync *op, struct tt_sync_obj *e)
{
    struct tt_rec_thread *t = tt_rec_of(bt);
    if (e)
        op->id = tt_sync_obj_id_(s, e, bt->id, &bt->sync_objects);
    switch (op->kind) {
    case TT_SYNC_UNLOCK:
        if (e) {
            /* the holder's: relaxed, the object's own release orders it for the next one */
            op->seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
            atomic_store_explicit(&e->seq, op->seq + 1, memory_order_relaxed);
            op->ordered = 1;
        }
        return append(s, t, op, 0, false);
    case TT_SYNC_RELEASE:
        if (e) {
            op->seq = atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
            op->ordered = 1;
        }
        return append(s, t, op, 0, false);
    default:
        chaos_maybe(s, t);
        return TT_OK;
    }
}

int tt_rec_sync_end(tt_session *s, struct tt_thread *bt, tt_sync *op, int result, int took)
{
    struct tt_rec_thread *t = tt_rec_of(bt);
    struct tt_sync_obj *e = op->entry_;
    if (e) {
        switch (op->kind) {
        case TT_SYNC_LOCK:
            if (took & TT_SYNC_TOOK) {
                op->seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
                atomic_store_explicit(&e->seq, op->seq + 1, memory_order_relaxed);
                op->ordered = 1;
            }
            break;
        case TT_SYNC_ACQUIRE:
            if (!(took & TT_SYNC_TOOK))
                break;
            /* fall through */
        case TT_SYNC_PASS:
            op->seq = atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
            op->ordered = 1;
            break;
        case TT_SYNC_OBSERVE:
            op->seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
            break;
        default:
            break;
        }
    }
    if (op->kind == TT_SYNC_UNLOCK || op->kind == TT_SYNC_RELEASE) {
        chaos_maybe(s, t); /* recorded at begin */
        return TT_OK;
    }
    return append(s, t, op, result, !(took & TT_SYNC_AT_ONCE));
}
