/* SPDX-License-Identifier: MIT */
/* Replay: each recording call is compared with the next recorded event of the same thread.
 *
 * The session opens a bounded reader with one cursor per recorded thread. A live thread is bound
 * to a recorded thread at its first call: by name if it named itself first, otherwise to the
 * lowest recorded thread not yet bound, which is the order in which threads first recorded.
 * Structural events (session and thread start and end) are stepped over; they are not calls.
 *
 * Compare first, move second: a call that diverges leaves the cursor, the sequence and the
 * retained checkpoint untouched, so the corrected call succeeds on retry.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay-int.h"

static void rp_destroy(tt_session *s);
static int replay_event(tt_session *s, struct tt_rp_thread *t, const tt_event *act,
                        void *in_buf, size_t in_cap, size_t *in_len);

static bool structural_kind(uint8_t kind)
{
    return kind == TT_EV_SESSION_START || kind == TT_EV_SESSION_END ||
           kind == TT_EV_THREAD_START || kind == TT_EV_THREAD_END;
}

/* The tracer's own frame: a wait for the memory budget, recorded as a call of TT_STALL_FUNCTION
 * (record/pool.c). No call of the program meets it. */
static bool tracer_event(const struct tt_replayer *rp, const tt_event *ev)
{
    return rp->stall_fn && (ev->kind == TT_EV_ENTER || ev->kind == TT_EV_EXIT) &&
           ev->sp.function == rp->stall_fn;
}

/* Events no call meets: structural ones, the tracer's own, and io OUT on a channel the replay
 * does not compare. */
static bool stepped_over(const struct tt_replayer *rp, const tt_event *ev)
{
    if (structural_kind(ev->kind) || tracer_event(rp, ev))
        return true;
    if (ev->kind != TT_EV_IO || ev->dir != TT_IO_OUT)
        return false;
    for (uint32_t i = 0; i < rp->nskip_out; i++)
        if (rp->skip_out[i] == ev->arg)
            return true;
    return false;
}

int tt_replay_skip_out_channel_(tt_session *s, uint64_t channel)
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    if (!rp || rp->nskip_out == sizeof rp->skip_out / sizeof rp->skip_out[0])
        return TT_E_INVAL;
    rp->skip_out[rp->nskip_out++] = channel;
    return TT_OK;
}

int tt_replay_stop_at_exit_(tt_session *s)
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    if (!rp)
        return TT_E_INVAL;
    rp->stop_at_exit = true;
    return TT_OK;
}

uint32_t tt_replay_cut_off_(tt_session *s)
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    return rp ? atomic_load_explicit(&rp->cut_off, memory_order_relaxed) : 0;
}

int tt_replay_stop_at_(tt_session *s, uint32_t thread, uint64_t seq,
                       void (*fn)(tt_session *s, const tt_event *ev))
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    if (!rp)
        return TT_E_INVAL;
    rp->stop_thread = thread;
    rp->stop_seq = seq;
    rp->stop_fn = fn;
    return TT_OK;
}

int tt_replay_signals_(tt_session *s, const char *site, const char *site_at_return,
                       void (*fn)(tt_session *s, const tt_event *ev), void (*held)(tt_session *s))
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    if (!rp || !site || !site_at_return || !fn || !held)
        return TT_E_INVAL;
    rp->signal_site = tt_reader_find_object(rp->r, TT_OBJ_SITE, site);
    rp->signal_return_site = tt_reader_find_object(rp->r, TT_OBJ_SITE, site_at_return);
    rp->deliver = fn;
    rp->held = held;
    return TT_OK;
}

static bool is_delivery(const struct tt_replayer *rp, const tt_event *ev)
{
    return ev->kind == TT_EV_IO && ev->sp.site != 0 &&
           (ev->sp.site == rp->signal_site || ev->sp.site == rp->signal_return_site);
}

/* The delivery @ev (the cursor's) of thread @t, whose busy flag is set: consumed, then made
 * with the flag cleared; returns with the flag set again, or an error. */
static int deliver(tt_session *s, struct tt_rp_thread *t, const tt_event *ev)
{
    uint8_t info[256];
    tt_event d = *ev;
    d.payload_len = ev->payload_len < sizeof info ? ev->payload_len : sizeof info;
    memcpy(info, ev->payload, d.payload_len);
    d.payload = info;
    int rc = tt_rp_consume_(s, t, ev);
    if (rc != TT_OK)
        return rc;
    tt_rp_busy_end_(t);
    s->rp->deliver(s, &d);
    return tt_rp_busy_begin_(t);
}

int tt_replay_first_left_(tt_session *s, tt_report_event *out)
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    if (!rp || !rp->has_first_left)
        return TT_E_INVAL;
    *out = rp->first_left;
    return TT_OK;
}

/* Counts a tracer event that @t (NULL: not bound yet) steps over, for tt_replay_drain_. */
static void count_tracer(const struct tt_replayer *rp, struct tt_rp_thread *t, const tt_event *ev)
{
    /* relaxed: written by the thread only; drain reads a count that only grows */
    if (t && tracer_event(rp, ev))
        atomic_store_explicit(&t->tracer_events, t->tracer_events + 1, memory_order_relaxed);
}

int tt_replay_deliver_left_(tt_session *s, bool in_handler)
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    int rc, made = 0;
    if (!rp || !rp->signal_site || !rp->deliver)
        return 0;
    struct tt_thread *bt = in_handler ? tt_thread_cached_(s, s->uid)
                                      : tt_thread_lookup_slow(s, &rc);
    if (!bt)
        return 0;
    struct tt_rp_thread *t = tt_rp_of(bt);
    if (t->rec == UINT32_MAX || t->base.ended || tt_rp_busy_begin_(t) != TT_OK)
        return 0;
    for (;;) {
        const tt_event *ev;
        tt_error_info err;
        if (tt_reader_peek_ref(rp->r, t->rec, &ev, &err) != TT_OK)
            break;
        if (is_delivery(rp, ev)) {
            made++;
            if (deliver(s, t, ev) != TT_OK)
                return made;
            continue;
        }
        /* over the tracer's own events, not past the thread's end */
        if (!stepped_over(rp, ev) || ev->kind == TT_EV_THREAD_END ||
            ev->kind == TT_EV_SESSION_END)
            break;
        count_tracer(rp, t, ev);
        tt_reader_advance(rp->r, t->rec);
    }
    tt_rp_busy_end_(t);
    return made;
}

/* Ordered replay: steps @rec's cursor over structural events and publishes the time of its
 * next real event. Called by the thread bound to @rec (@t; NULL at open or at a
 * resume, before any thread runs). */
int tt_rp_publish_next_(struct tt_replayer *rp, struct tt_rp_thread *t, uint32_t rec,
                        tt_error_info *err)
{
    tt_event ev;
    int rc;
    while ((rc = tt_reader_peek(rp->r, rec, &ev, err)) == TT_OK && stepped_over(rp, &ev)) {
        count_tracer(rp, t, &ev);
        tt_reader_advance(rp->r, rec);
    }
    /* a sync event keeps its own order (sync.c) and may carry an earlier event's time (one that
     * did not wait reads no clock): it holds no other thread back */
    uint64_t next = rc == TT_OK && ev.kind != TT_EV_SYNC ? ev.time : UINT64_MAX;
    /* release: a thread that sees this time sees that @rec is done with everything before it */
    atomic_store_explicit(&rp->next_time[rec], next, memory_order_release);
    return rc == TT_E_END ? TT_OK : rc;
}

/* Ordered replay: waits until @rec's next event at @t is the globally next one, that is until no
 * other thread has an earlier unconsumed event (ties go to the lower thread id). */
static bool wait_turn(tt_session *s, uint32_t rec, uint64_t t)
{
    struct tt_replayer *rp = s->rp;
    uint64_t deadline = 0;
    for (unsigned spins = 0;; spins++) {
        bool mine = true;
        for (uint32_t u = 0; u < rp->nthreads && mine; u++) {
            if (u == rec)
                continue;
            uint64_t tu = atomic_load_explicit(&rp->next_time[u], memory_order_acquire);
            if (tu < t || (tu == t && u < rec))
                mine = false;
        }
        if (mine)
            return true;
        if (spins < 64)
            continue;
        uint64_t now = tt_mono_ns();
        if (!deadline)
            deadline = now + s->cfg.order_timeout_ms * 1000000u;
        else if (now > deadline)
            return false;
        sched_yield();
    }
}

static int rp_open(tt_session *s, tt_error_info *err)
{
    struct tt_replayer *rp = calloc(1, sizeof *rp);
    if (!rp)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
    s->rp = rp;
    pthread_mutex_init(&rp->lock, NULL);
    rp->own_src.fd = -1;
    int rc;
    if (s->cfg.source) {
        rp->src = s->cfg.source;
    } else {
        if (!s->cfg.file[0]) {
            rc = tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "replay mode needs a file (TT_PARAM_FILE)");
            goto fail;
        }
        if ((rc = tt_source_file(&rp->own_src, s->cfg.file, err)) != TT_OK)
            goto fail;
        rp->src = &rp->own_src;
    }
    tt_reader_limits lim;
    tt_rp_limits_(s, &lim);
    tt_manifest m;
    tt_reader_capacity cap;
    if ((rc = tt_reader_probe(rp->src, &lim, TT_CURSORS_PER_THREAD, &m, &cap, err)) != TT_OK)
        goto fail;
    rp->storage = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    rp->bound = calloc(m.thread_count ? m.thread_count : 1, 1);
    if (!rp->storage || !rp->bound) {
        rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for the replay reader");
        goto fail;
    }
    if ((rc = tt_reader_open(rp->src, &lim, TT_CURSORS_PER_THREAD, rp->storage, cap.total, &rp->r,
                             err)) != TT_OK)
        goto fail;
    /* the recording's names get the recording's ids */
    for (uint32_t id = 1; id <= m.object_count; id++) {
        tt_object_entry e;
        uint32_t got;
        tt_reader_object(rp->r, id, &e);
        rc = tt_names_intern(&s->names, e.kind, e.name, e.name_len, UINT64_MAX, &got);
        s->names.base_functions += e.kind == TT_OBJ_FUNCTION;
        if (rc != TT_OK || got != id) {
            rc = tt_fail(err, TT_E_CORRUPT, 0, m.objects_offset,
                         "%s: object %u is a duplicate in the object table", rp->src->name, id);
            goto fail;
        }
    }
    s->names.base_count = m.object_count;
    rp->stall_fn = tt_reader_find_object(rp->r, TT_OBJ_FUNCTION, TT_STALL_FUNCTION);
    rp->nthreads = m.thread_count;
    rp->ordered = s->cfg.ordered != 0;
    tt_rp_sync_init_(rp);
    if (rp->ordered) {
        rp->next_time = calloc(m.thread_count ? m.thread_count : 1, sizeof *rp->next_time);
        if (!rp->next_time) {
            rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
            goto fail;
        }
        for (uint32_t i = 0; i < m.thread_count; i++) {
            if ((rc = tt_rp_publish_next_(rp, NULL, i, err)) != TT_OK)
                goto fail;
        }
    }
    return TT_OK;
fail:
    rp_destroy(s);
    return rc;
}

static void rp_destroy(tt_session *s)
{
    struct tt_replayer *rp = s->rp;
    if (!rp)
        return;
    tt_source_close(&rp->own_src);
    free(rp->storage);
    free(rp->bound);
    free((void *)rp->next_time);
    tt_rp_resume_free_(rp);
    pthread_mutex_destroy(&rp->lock);
    free(rp);
    s->rp = NULL;
}

static struct tt_thread *rp_thread_new(tt_session *s)
{
    (void)s;
    struct tt_rp_thread *t = tt_thread_alloc_aligned(sizeof *t);
    if (t)
        t->rec = UINT32_MAX;
    return t ? &t->base : NULL;
}

static int rp_thread_start(tt_session *s, struct tt_thread *t)
{
    (void)s;
    (void)t;
    return TT_OK;
}

static int rp_thread_name(tt_session *s, struct tt_thread *bt, uint32_t name_id)
{
    struct tt_rp_thread *t = tt_rp_of(bt);
    t->base.name_id = name_id;
    if (t->rec != UINT32_MAX)
        return TT_OK;
    struct tt_replayer *rp = s->rp;
    const tt_manifest *m = tt_reader_manifest(rp->r);
    pthread_mutex_lock(&rp->lock);
    for (uint32_t i = 0; i < m->thread_count; i++) {
        if (!rp->bound[i] && tt_reader_thread(rp->r, i)->name == name_id) {
            rp->bound[i] = 1;
            t->rec = i;
            break;
        }
    }
    pthread_mutex_unlock(&rp->lock);
    return TT_OK;
}

/* Binds @t to the first recorded thread nobody has, in recording order. */
static bool bind_by_order(struct tt_replayer *rp, struct tt_rp_thread *t)
{
    const tt_manifest *m = tt_reader_manifest(rp->r);
    pthread_mutex_lock(&rp->lock);
    for (uint32_t i = 0; i < m->thread_count; i++) {
        if (!rp->bound[i]) {
            rp->bound[i] = 1;
            t->rec = i;
            break;
        }
    }
    pthread_mutex_unlock(&rp->lock);
    return t->rec != UINT32_MAX;
}

/* For a checkpoint, turns a payload offset into (provider id, offset in its state). */
static void checkpoint_locate(const uint8_t *p, uint64_t len, uint64_t at, uint32_t *prov,
                              uint64_t *off)
{
    uint64_t o = 0;
    *prov = 0;
    *off = at;
    while (o + 12 <= len) {
        uint32_t id = tt_get32(p + o);
        uint64_t n = tt_get64(p + o + 4);
        if (n > len - o - 12)
            return;
        if (at < o + 12 + n) {
            *prov = id;
            *off = at >= o + 12 ? at - o - 12 : 0;
            return;
        }
        o += 12 + n;
    }
}

static bool same_call(const tt_event *ev, void *ctx)
{
    const tt_event *act = ctx;
    if (ev->kind != act->kind || ev->sp.site != act->sp.site)
        return false;
    switch (ev->kind) {
    case TT_EV_ENTER:
    case TT_EV_EXIT:
    case TT_EV_SAFEPOINT:
        return ev->sp.function == act->sp.function;
    case TT_EV_ALLOC:
    case TT_EV_USER:
    case TT_EV_CRASH:
        return ev->arg == act->arg;
    case TT_EV_IO:
        return ev->arg == act->arg && ev->dir == act->dir;
    default:
        return true;
    }
}

/* Counting policy: after a divergence, find where the replay goes on. If the actual call is
 * among the next events of the recording, the ones before it were missed: they are consumed and
 * so is the call's own event. If it is not, the call was an extra one: nothing is consumed. */
static void realign(tt_session *s, struct tt_rp_thread *t, const tt_event *act)
{
    struct tt_replayer *rp = s->rp;
    uint32_t rec = t->rec;
    int k = tt_reader_find_ahead_(rp->r, rec, 64, same_call, (void *)(uintptr_t)act);
    tt_error_info e2;
    tt_event ev;
    for (int i = 0; i <= k; i++) {
        if (tt_reader_peek(rp->r, rec, &ev, &e2) != TT_OK)
            break;
        tt_reader_advance(rp->r, rec);
    }
    if (k >= 0 && rp->ordered)
        tt_rp_publish_next_(rp, t, rec, &e2);
}

int tt_rp_diverge_(tt_session *s, struct tt_rp_thread *t, tt_diverge_reason why,
                   const tt_event *exp, const tt_event *act, uint64_t first_diff,
                   const char *message)
{
    struct tt_replayer *rp = s->rp;
    tt_divergence d;
    memset(&d, 0, sizeof d);
    d.reason = why;
    d.first_diff = first_diff;
    if (exp) {
        d.has_expected = 1;
        d.tp = exp->tp;
        tt_report_event_set(&d.expected, exp);
    } else {
        /* no recorded event: place the call just after the last one this thread matched */
        const struct tt_rp_thread *r0 = t;
        d.tp.thread = r0->rec;
        d.tp.epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
        if (r0->hist_len)
            d.tp.seq = r0->hist[(r0->hist_pos + TT_REPORT_HISTORY - 1) % TT_REPORT_HISTORY]
                           .ev.tp.seq + 1;
    }
    tt_report_event_set(&d.actual, act);
    /* the actual call of an input is replayed into its buffer: before that, the buffer holds
     * whatever the program left there (valgrind: uninitialised), not data worth showing */
    if (act->kind == TT_EV_IO && act->dir == TT_IO_IN)
        d.actual.preview_len = 0;
    d.actual.ev.tp = d.tp;
    struct tt_rp_thread *rt = t;
    for (uint32_t i = 0; i < rt->hist_len; i++)
        d.history[i] = rt->hist[(rt->hist_pos + TT_REPORT_HISTORY - rt->hist_len + i) %
                                TT_REPORT_HISTORY];
    d.history_len = rt->hist_len;
    static const char *const why_text[] = {
        [TT_DIV_NONE] = "no divergence", [TT_DIV_KIND] = "another kind of event was recorded",
        [TT_DIV_FUNCTION] = "another function was recorded", [TT_DIV_SITE] = "another site was recorded",
        [TT_DIV_ARG] = "another channel or tag was recorded", [TT_DIV_SIZE] = "another allocation size was recorded",
        [TT_DIV_LENGTH] = "another payload length was recorded", [TT_DIV_PAYLOAD] = "the payload bytes differ",
        [TT_DIV_DIRECTION] = "the io direction differs", [TT_DIV_END] = "the recording of this thread ended",
        [TT_DIV_THREAD] = "the recording has no thread left for this one",
        [TT_DIV_ORDER] = "this thread's turn did not come in time",
        [TT_DIV_OUTPUT] = "the program's output differs",
        [TT_DIV_SCHEDULE] = "this thread's turn on a synchronization object did not come in time",
        [TT_DIV_RESTORE] = "another checkpoint was restored here in the recording",
    };
    if (message) {
        snprintf(d.message, sizeof d.message, "thread %u seq %" PRIu64 ": %s", d.tp.thread,
                 d.tp.seq, message);
    } else if (why == TT_DIV_PAYLOAD && exp && exp->kind == TT_EV_CHECKPOINT) {
        uint32_t prov;
        uint64_t off;
        checkpoint_locate(exp->payload, exp->payload_len, first_diff, &prov, &off);
        d.first_diff = off;
        snprintf(d.message, sizeof d.message,
                 "thread %u seq %" PRIu64 ": checkpoint state of provider %u differs at byte %" PRIu64,
                 d.tp.thread, d.tp.seq, prov, off);
    } else if (why == TT_DIV_PAYLOAD) {
        snprintf(d.message, sizeof d.message, "thread %u seq %" PRIu64 ": %s at byte %" PRIu64,
                 d.tp.thread, d.tp.seq, why_text[why], first_diff);
    } else {
        snprintf(d.message, sizeof d.message, "thread %u seq %" PRIu64 ": %s", d.tp.thread,
                 d.tp.seq, why_text[why]);
    }
    pthread_mutex_lock(&rp->lock);
    rp->last = d;
    rp->has_last = true;
    pthread_mutex_unlock(&rp->lock);
    atomic_fetch_add_explicit(&s->divergences, 1, memory_order_relaxed);
    if (s->cfg.divergence == TT_DIVERGE_COUNT && exp && why != TT_DIV_ORDER &&
        why != TT_DIV_SCHEDULE)
        realign(s, t, act);
    return TT_E_DIVERGED;
}

static uint64_t first_difference(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* Enter and exit: matched straight from the encoded bytes when they agree (the common case), so
 * the call builds no event and copies nothing; anything else takes the general path. */
static int replay_fn(tt_session *s, struct tt_rp_thread *t, uint8_t k, uint32_t function)
{
    struct tt_rp_thread *rt = t;
    uint64_t seq, time;
    if (TT_LIKELY(rt->rec != UINT32_MAX && !t->base.ended && !s->rp->ordered) &&
        tt_reader_match_fn_(s->rp->r, rt->rec, k, function, &seq, &time)) {
        /* only the fields a history line shows */
        tt_report_event *h = &rt->hist[rt->hist_pos];
        h->ev.kind = k;
        h->ev.dir = 0;
        h->ev.tp.seq = seq;
        h->ev.time = time;
        h->ev.sp.function = function;
        h->ev.sp.site = 0;
        h->ev.arg = h->ev.addr = h->ev.payload_len = 0;
        tt_rp_matched_fast_(s, rt, h);
        return TT_OK;
    }
    tt_event ev = { .kind = k, .sp = { function, 0 } };
    return replay_event(s, t, &ev, NULL, 0, NULL);
}

static int replay_event(tt_session *s, struct tt_rp_thread *t, const tt_event *act,
                        void *in_buf, size_t in_cap, size_t *in_len)
{
    const tt_event *ev;
    int rc;
    if ((rc = tt_rp_peek_(s, t, act, &ev)) != TT_OK)
        return rc;
    uint8_t k = act->kind;
    tt_diverge_reason why = TT_DIV_NONE;
    uint64_t diff = 0;
    if (ev->kind != k)
        why = TT_DIV_KIND;
    else if ((k == TT_EV_ENTER || k == TT_EV_EXIT || k == TT_EV_SAFEPOINT) &&
             ev->sp.function != act->sp.function)
        why = TT_DIV_FUNCTION;
    else if (k != TT_EV_ENTER && k != TT_EV_EXIT && ev->sp.site != act->sp.site)
        why = TT_DIV_SITE;
    else if (k == TT_EV_ALLOC && ev->arg != act->arg)
        why = TT_DIV_SIZE;
    else if ((k == TT_EV_IO || k == TT_EV_USER) && ev->arg != act->arg)
        why = TT_DIV_ARG;
    else if (k == TT_EV_IO && ev->dir != act->dir)
        why = TT_DIV_DIRECTION;
    else if (k == TT_EV_IO && act->dir == TT_IO_IN) {
        if (ev->payload_len > in_cap)
            why = TT_DIV_LENGTH;
    } else if (k == TT_EV_CRASH) {
        /* the same signal at the same point; the backtrace text holds addresses, not compared */
        if (ev->arg != act->arg)
            why = TT_DIV_ARG;
    } else if (ev->payload_len != act->payload_len) {
        why = TT_DIV_LENGTH;
    } else if (ev->payload_len) {
        diff = first_difference(ev->payload, act->payload, ev->payload_len);
        if (diff < ev->payload_len)
            why = TT_DIV_PAYLOAD;
    }
    if (why != TT_DIV_NONE)
        return tt_rp_diverge_(s, t, why, ev, act, diff, NULL);

    if (k == TT_EV_IO && act->dir == TT_IO_IN) {
        if (ev->payload_len)
            memcpy(in_buf, ev->payload, ev->payload_len);
        if (in_len)
            *in_len = ev->payload_len;
    }
    if (k == TT_EV_CHECKPOINT) {
        /* tt_checkpoint holds cp_lock. From version 4 the event carries its number; before,
         * checkpoints were numbered only by their order */
        uint64_t number = tt_reader_manifest(s->rp->r)->version >= 4 ? ev->arg : s->cp_count;
        tt_checkpoint_retain(s, ev->payload, ev->payload_len, ev->tp, number);
    }
    return tt_rp_consume_(s, t, ev);
}

/* A thread whose recording ends without its end: in the recording the process exited (or
 * the session closed) while the thread still ran, and its later calls were never recorded.
 * Replay stops it there, as the recording did: it waits for the process to end, and the
 * count says so (tt_replay_progress). */
static _Noreturn void stop_at_exit(tt_session *s, struct tt_rp_thread *t)
{
    atomic_fetch_add_explicit(&s->rp->cut_off, 1, memory_order_relaxed);
    tt_rp_busy_end_(t);
    for (;;)
        pause();
}

int tt_rp_peek_(tt_session *s, struct tt_rp_thread *t, const tt_event *act, const tt_event **evp)
{
    const tt_event *ev;
    struct tt_replayer *rp = s->rp;
    tt_error_info err;
    int rc;
    if (t->base.ended)
        return TT_E_CLOSED;
    if (t->rec == UINT32_MAX && !bind_by_order(rp, t))
        return tt_rp_diverge_(s, t, TT_DIV_THREAD, NULL, act, 0, NULL);
    for (;;) {
        /* the cursor's own event, not a copy: copying what decode just stored field by field
         * waits for those stores */
        rc = tt_reader_peek_ref(rp->r, t->rec, &ev, &err);
        if (rc == TT_E_END && !t->rec_ended && rp->stop_at_exit)
            stop_at_exit(s, t);
        if (rc == TT_E_END)
            return tt_rp_diverge_(s, t, TT_DIV_END, NULL, act, 0, NULL);
        if (rc != TT_OK)
            return rc;
        if (TT_UNLIKELY(is_delivery(rp, ev)) && rp->deliver) {
            /* a signal delivered here in the recording: its handler runs now, and its calls
             * meet the events after this one; then this call looks again */
            if ((rc = deliver(s, t, ev)) != TT_OK)
                return rc;
            continue;
        }
        if (!stepped_over(rp, ev))
            break;
        if (ev->kind == TT_EV_THREAD_END || ev->kind == TT_EV_SESSION_END)
            t->rec_ended = 1;
        count_tracer(rp, t, ev);
        tt_reader_advance(rp->r, t->rec);
    }
    *evp = ev;
    if (rp->ordered && ev->kind != TT_EV_SYNC && !wait_turn(s, t->rec, ev->time))
        return tt_rp_diverge_(s, t, TT_DIV_ORDER, ev, act, 0, NULL);
    return TT_OK;
}

int tt_rp_consume_(tt_session *s, struct tt_rp_thread *t, const tt_event *ev)
{
    struct tt_replayer *rp = s->rp;
    tt_report_history_push(t, ev);
    if (TT_UNLIKELY(rp->stop_fn != NULL) && ev->tp.seq == rp->stop_seq &&
        t->rec == rp->stop_thread)
        rp->stop_fn(s, ev); /* before the advance: @ev may be the cursor's */
    tt_reader_advance(rp->r, t->rec);
    atomic_store_explicit(&t->matched, t->matched + 1, memory_order_relaxed);
    if (rp->ordered) {
        tt_error_info e2;
        int rc2 = tt_rp_publish_next_(rp, t, t->rec, &e2);
        if (rc2 != TT_OK)
            return rc2;
    }
    if (TT_UNLIKELY(rp->signal_return_site != 0)) {
        /* a delivery recorded at this call's return, past the tracer's own events: the
         * runtime makes it there (an error of the peek is met again by the next call's) */
        const tt_event *next;
        tt_error_info e3;
        while (tt_reader_peek_ref(rp->r, t->rec, &next, &e3) == TT_OK) {
            if (next->kind == TT_EV_IO && next->sp.site == rp->signal_return_site) {
                rp->held(s);
                break;
            }
            if (!stepped_over(rp, next) || next->kind == TT_EV_THREAD_END ||
                next->kind == TT_EV_SESSION_END)
                break;
            count_tracer(rp, t, next);
            tt_reader_advance(rp->r, t->rec);
        }
    }
    return TT_OK;
}

/* The calls a recorded thread made: its events but the structural ones, from the index. */
static bool calls_per_thread(struct tt_replayer *rp, uint64_t *calls, uint32_t n)
{
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    tt_manifest m;
    tt_reader_capacity cap;
    tt_error_info err;
    if (tt_reader_probe(rp->src, &lim, 1, &m, &cap, &err) != TT_OK)
        return false;
    void *mem = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    tt_reader *r;
    tt_index *ix = NULL;
    bool ok = mem && tt_reader_open(rp->src, &lim, 1, mem, cap.total, &r, &err) == TT_OK;
    if (ok) {
        ok = tt_index_open(r, &lim, &ix, &err) == TT_OK;
        for (uint32_t i = 0; ok && i < n; i++) {
            const tt_index_thread *ti = tt_index_thread_info(ix, i);
            const tt_thread_entry *te = tt_reader_thread(r, i);
            if (!ti || !te) {
                ok = false;
                break;
            }
            uint64_t structural = ti->kinds[TT_EV_SESSION_START] + ti->kinds[TT_EV_SESSION_END] +
                                  ti->kinds[TT_EV_THREAD_START] + ti->kinds[TT_EV_THREAD_END];
            calls[i] = te->event_count - structural;
        }
        if (ix)
            tt_index_close(ix);
        tt_reader_close(r);
    }
    free(mem);
    return ok;
}

/* A whole process's replay ends at its exit, while other threads may still run: in the
 * recording every event of the file came before the close, so a thread that has not made all
 * its recorded calls yet is given the order timeout to make them (a Python thread, say, whose
 * join returned before the thread itself ended). Without an index (a recovered file) there is
 * nothing to wait for. The runtime calls it at exit, while the session still serves the other
 * threads. */
void tt_replay_drain_(tt_session *s)
{
    struct tt_replayer *rp = s->be == &tt_replay_backend ? s->rp : NULL;
    if (!rp)
        return;
    if (rp->nthreads < 2)
        return;
    uint64_t *calls = calloc(rp->nthreads, sizeof *calls);
    if (!calls || !calls_per_thread(rp, calls, rp->nthreads)) {
        free(calls);
        return;
    }
    int rc;
    struct tt_thread *self = tt_thread_lookup_slow(s, &rc);
    uint64_t deadline = tt_mono_ns() + s->cfg.order_timeout_ms * 1000000u;
    for (bool waiting = true; waiting && tt_mono_ns() < deadline;) {
        waiting = false;
        pthread_mutex_lock(&s->lock);
        for (uint32_t i = 0; i < s->nthreads && !waiting; i++) {
            struct tt_rp_thread *t = tt_rp_of(s->threads[i]);
            if (&t->base == self || t->base.ended || t->rec == UINT32_MAX ||
                t->rec >= rp->nthreads)
                continue;
            waiting = atomic_load_explicit(&t->matched, memory_order_relaxed) +
                          atomic_load_explicit(&t->tracer_events, memory_order_relaxed) <
                      calls[t->rec];
        }
        pthread_mutex_unlock(&s->lock);
        if (waiting) {
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
    }
    free(calls);
}

static int rp_finish(tt_session *s, tt_error_info *err)
{
    struct tt_replayer *rp = s->rp;
    const tt_manifest *m = tt_reader_manifest(rp->r);
    uint64_t left = 0;
    tt_event first;
    bool have_first = false;
    tt_error_info e2;
    atomic_store_explicit(&s->closing, 1, memory_order_release);
    for (uint32_t i = 0; i < m->thread_count; i++) {
        tt_event ev;
        int rc;
        while ((rc = tt_reader_next(rp->r, i, &ev, &e2)) == TT_OK) {
            if (stepped_over(rp, &ev) || is_delivery(rp, &ev))
                continue;
            if (!have_first) {
                first = ev;
                have_first = true;
                tt_report_event_set(&rp->first_left, &ev);
                rp->has_first_left = true;
            }
            left++;
        }
        if (rc != TT_E_END) {
            if (err)
                *err = e2;
            return rc;
        }
    }
    if (left)
        return tt_fail(err, TT_E_UNCONSUMED, 0, UINT64_MAX,
                       "replay closed with %" PRIu64 " recorded events left; the next was %s "
                       "(thread %u, seq %" PRIu64 ", function %u, site %u)",
                       left, tt_event_kind_name(first.kind), first.tp.thread, first.tp.seq,
                       first.sp.function, first.sp.site);
    return TT_OK;
}

int tt_replay_divergence(tt_session *s, tt_divergence *out)
{
    if (!s || s->be != &tt_replay_backend || !s->rp)
        return TT_E_INVAL;
    pthread_mutex_lock(&s->rp->lock);
    bool has = s->rp->has_last;
    if (has)
        *out = s->rp->last;
    pthread_mutex_unlock(&s->rp->lock);
    return has ? TT_OK : TT_E_INVAL;
}

int tt_replay_progress_get(tt_session *s, tt_replay_progress *out)
{
    memset(out, 0, sizeof *out);
    if (!s || s->be != &tt_replay_backend || !s->rp)
        return TT_E_MODE;
    struct tt_replayer *rp = s->rp;
    out->total = tt_reader_manifest(rp->r)->event_count;
    out->divergences = atomic_load_explicit(&s->divergences, memory_order_relaxed);
    out->turn_sleeps = atomic_load_explicit(&rp->turn_sleeps, memory_order_relaxed);
    out->turn_early_wakes = atomic_load_explicit(&rp->turn_early_wakes, memory_order_relaxed);
    pthread_mutex_lock(&s->lock);
    out->threads_seen = s->nthreads;
    /* each thread counts its own matches; call this from the replaying threads' quiet points
     * (or after joining them) for an exact figure */
    for (uint32_t i = 0; i < s->nthreads; i++) {
        /* a thread still registering has no replay state yet (it is set up outside the lock) */
        struct tt_rp_thread *rt = tt_rp_of(s->threads[i]);
        out->matched += atomic_load_explicit(&rt->matched, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->lock);
    int rc;
    struct tt_rp_thread *t = tt_rp_of(tt_thread_lookup_slow(s, &rc));
    if (t && (t->rec != UINT32_MAX || bind_by_order(rp, t))) {
        tt_error_info e;
        tt_event ev;
        while (tt_reader_peek(rp->r, t->rec, &ev, &e) == TT_OK) {
            if (!stepped_over(rp, &ev)) {
                out->has_next = 1;
                out->next = ev;
                out->next.payload = NULL;
                break;
            }
            tt_reader_advance(rp->r, t->rec);
        }
    }
    return TT_OK;
}


/* Replay's nesting guard: the same busy flag as recording (nobody else reads it in replay), so
 * a signal handler that interrupted a replay call on this thread is refused instead of moving
 * the cursor under the interrupted comparison. Replay is not the hot path: a plain branch. */
int tt_rp_busy_begin_(struct tt_rp_thread *t)
{
    /* relaxed: only this thread, and a handler running on it, touch busy in replay */
    if (atomic_load_explicit(&t->base.busy, memory_order_relaxed))
        return TT_E_MODE;
    atomic_store_explicit(&t->base.busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the cursor is touched only below the store */
    return TT_OK;
}

void tt_rp_busy_end_(struct tt_rp_thread *t)
{
    atomic_store_explicit(&t->base.busy, 0, memory_order_release);
}

static int rp_fn_event(tt_session *s, struct tt_thread *bt, uint32_t kind, uint32_t function,
                       uint64_t now)
{
    (void)now;
    struct tt_rp_thread *t = tt_rp_of(bt);
    int rc;
    if ((rc = tt_rp_busy_begin_(t)) != TT_OK)
        return rc;
    rc = replay_fn(s, t, (uint8_t)kind, function);
    tt_rp_busy_end_(t);
    return rc;
}

static int rp_event(tt_session *s, struct tt_thread *bt, const tt_event *ev, void *in_buf,
                    size_t in_cap, size_t *in_len)
{
    struct tt_rp_thread *t = tt_rp_of(bt);
    int rc;
    if ((rc = tt_rp_busy_begin_(t)) != TT_OK)
        return rc;
    rc = replay_event(s, t, ev, in_buf, in_cap, in_len);
    tt_rp_busy_end_(t);
    return rc;
}

static int rp_thread_end(tt_session *s, struct tt_thread *t)
{
    (void)s;
    t->ended = 1;
    return TT_OK;
}

static int rp_thread_flush(tt_session *s, struct tt_thread *t)
{
    (void)s;
    (void)t;
    return TT_OK;
}

static void rp_stats(tt_session *s, tt_session_stats *st)
{
    (void)s;
    (void)st;
}

static void rp_mark_crashed(tt_session *s)
{
    (void)s;
}

const struct tt_backend tt_replay_backend = {
    .name = "replay",
    .open = rp_open,
    .finish = rp_finish,
    .destroy = rp_destroy,
    .thread_new = rp_thread_new,
    .thread_start = rp_thread_start,
    .thread_end = rp_thread_end,
    .thread_flush = rp_thread_flush,
    .thread_name = rp_thread_name,
    .fn_event = rp_fn_event,
    .event = rp_event,
    .stats = rp_stats,
    .mark_crashed = rp_mark_crashed,
    .sync_begin = tt_rp_sync_begin,
    .sync_end = tt_rp_sync_end,
    .checkpoint_state = tt_rp_checkpoint_state,
    .restore_check = tt_rp_restore_check,
    .restore_apply = tt_rp_restore_apply,
};
