/* SPDX-License-Identifier: MIT */
/* The record backend of a session: what each session call does when it records.
 *
 * The session layer calls these through struct tt_backend (session-int.h); the enter/exit fast
 * path (record_api.h) never comes here, only its slow path does. Every call that appends takes
 * the nesting guard (tt_rec_begin_), so a signal handler that interrupts it is refused instead
 * of writing into a half-written record.
 */
#include <inttypes.h>
#include <string.h>

#include "checkpoint-int.h"
#include "record_api.h"

static int rec_thread_start(tt_session *s, struct tt_thread *t)
{
    return tt_writer_thread_init(s, tt_rec_of(t));
}

static int rec_thread_flush(tt_session *s, struct tt_thread *bt)
{
    struct tt_rec_thread *t = tt_rec_of(bt);
    int rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    rc = t->base.ended ? TT_E_CLOSED : tt_writer_refill(s, t, false);
    tt_rec_end_(t);
    return rc;
}

static int rec_thread_end(tt_session *s, struct tt_thread *bt)
{
    struct tt_rec_thread *t = tt_rec_of(bt);
    if (t->base.ended)
        return TT_OK;
    /* busy, like any recording call: a thread waiting for the budget may be taking the buffer */
    int rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    tt_chaos_thread_end(s, t);
    rc = tt_writer_append_structural(s, t, TT_EV_THREAD_END, t->base.os_tid);
    if (rc == TT_OK)
        rc = tt_writer_refill(s, t, true);
    t->base.ended = 1;
    tt_rec_end_(t);
    return rc;
}

static int rec_thread_name(tt_session *s, struct tt_thread *t, uint32_t name_id)
{
    (void)s;
    t->name_id = name_id;
    return TT_OK;
}

/* An enter or exit the fast path did not take: a full buffer, or a thread not in the first way
 * of the cache (the event layer found it). */
static int rec_fn_event(tt_session *s, struct tt_thread *bt, uint32_t kind, uint32_t function,
                        uint64_t now)
{
    struct tt_rec_thread *t = tt_rec_of(bt);
    bool chaos_point = false;
    int rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    if ((size_t)(t->end - t->pos) < sizeof(struct tt_raw_short)) {
        if (t->base.ended) {
            tt_rec_end_(t);
            return TT_E_CLOSED;
        }
        /* schedule chaos: a false end (sync.c) is a chaos point, not a full buffer */
        if (TT_UNLIKELY(s->w->chaos != NULL) && tt_chaos_fn_end_(s->w, t))
            chaos_point = true;
        else if ((rc = tt_writer_refill(s, t, false)) != TT_OK) {
            tt_rec_end_(t);
            return rc;
        }
    }
    struct tt_raw_short r = { kind, function, now };
    memcpy(t->pos, &r, sizeof r);
    t->pos += sizeof r;
    tt_rec_end_(t);
    if (TT_UNLIKELY(chaos_point))
        tt_chaos_fn_point_(s, t); /* outside the call: a thief may take the buffer meanwhile */
    return TT_OK;
}

static int rec_event(tt_session *s, struct tt_thread *bt, const tt_event *ev, void *in_buf,
                     size_t in_cap, size_t *in_len)
{
    (void)in_buf;
    (void)in_cap;
    struct tt_rec_thread *t = tt_rec_of(bt);
    int rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    if (t->base.ended) {
        tt_rec_end_(t);
        return TT_E_CLOSED;
    }
    /* A checkpoint starts a chunk of its own, once the swapper has encoded everything before
     * it: its timepoint is then known here (the swapper numbers the events), and a replay can
     * later seek straight to it. */
    tt_timepoint tp = { t->base.id, 0, 0 };
    if (ev->kind == TT_EV_CHECKPOINT) {
        if ((rc = tt_writer_sync_thread(s, t)) != TT_OK) {
            tt_rec_end_(t);
            return rc;
        }
        /* the swapper's count, read after it encoded every earlier buffer (under qlock) */
        tp.seq = t->seq;
    }
    struct tt_raw_long r = { .kind = ev->kind | ((uint32_t)ev->dir << 8),
                             .function = ev->sp.function, .time = tt_ticks(),
                             .site = ev->sp.site, .arg = ev->arg, .addr = ev->addr,
                             .len = ev->payload_len };
    rc = tt_writer_append_long(s, t, &r, ev->payload);
    tt_rec_end_(t);
    if (rc == TT_OK && in_len)
        *in_len = ev->payload_len;
    if (rc == TT_OK && ev->kind == TT_EV_CHECKPOINT) {
        /* tt_checkpoint holds cp_lock: the number is ev->arg, the epoch the session's */
        tp.epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
        tt_checkpoint_retain(s, ev->payload, ev->payload_len, tp, ev->arg);
        tt_checkpoint_note_(s, TT_EV_CHECKPOINT, tp.thread, tp.seq, ev->sp.site, ev->arg,
                            ev->payload, ev->payload_len);
    }
    return rc;
}

/* Record keeps only the last checkpoint in memory; an earlier one is in the file being
 * written, where the swapper may not even have put it yet. */
static int rec_checkpoint_state(tt_session *s, const tt_checkpoint_sel *sel, uint64_t *number,
                                tt_timepoint *tp, uint8_t **state, size_t *len,
                                tt_error_info *err)
{
    (void)number;
    (void)tp;
    (void)state;
    (void)len;
    if (sel->which == TT_CHECKPOINT_NUMBER && sel->number >= s->cp_count)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "no checkpoint %" PRIu64 ": %" PRIu64
                       " were taken", sel->number, s->cp_count);
    return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "a recording keeps only its last checkpoint "
                   "(number %" PRIu64 ") to restore; %s", s->last_cp_number,
                   sel->which == TT_CHECKPOINT_NUMBER ? "this one is in the file being written"
                                                      : "no such checkpoint is");
}

static int rec_restore_check(tt_session *s, struct tt_thread *t, struct tt_restore_op *op,
                             tt_error_info *err)
{
    (void)t;
    (void)err;
    op->epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed) + 1;
    return TT_OK;
}

/* The restore event, once every provider staged: its own chunk, like a checkpoint's, so that
 * its sequence number is known here for the checkpoint table. */
static int rec_restore_apply(tt_session *s, struct tt_thread *bt, struct tt_restore_op *op,
                             tt_error_info *err)
{
    struct tt_rec_thread *t = tt_rec_of(bt);
    int rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return tt_fail(err, rc, 0, UINT64_MAX, "the restore event: %s", tt_strerror(rc));
    if (t->base.ended)
        rc = TT_E_CLOSED;
    if (rc == TT_OK)
        rc = tt_writer_sync_thread(s, t);
    uint64_t seq = t->seq;
    if (rc == TT_OK) {
        struct tt_raw_long r = { .kind = TT_EV_RESTORE, .time = tt_ticks(), .site = op->site,
                                 .arg = op->epoch, .addr = op->number };
        rc = tt_writer_append_long(s, t, &r, NULL);
    }
    tt_rec_end_(t);
    if (rc != TT_OK)
        return tt_fail(err, rc, 0, UINT64_MAX, "the restore event could not be recorded: %s",
                       tt_strerror(rc));
    tt_checkpoint_note_(s, TT_EV_RESTORE, t->base.id, seq, op->site, op->number, NULL, 0);
    return TT_OK;
}

static void rec_mark_crashed(tt_session *s)
{
    if (s->w)
        s->w->m.flags |= TT_MF_CRASHED;
}

void tt_session_swapper_(tt_session *s, bool now)
{
    if (!s || s->head.mode != TT_MODE_RECORD || !s->w || !s->w->swapper_lazy)
        return;
    if (now) {
        tt_swapper_ensure(s, s->w);
        return;
    }
    pthread_mutex_lock(&s->w->encode_lock);
    s->w->swapper_failed = true;
    pthread_mutex_unlock(&s->w->encode_lock);
}

void tt_session_flush_all_(tt_session *s)
{
    if (!s || s->head.mode != TT_MODE_RECORD || !s->w || !tt_active_(s))
        return;
    int rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    tt_writer_flush_all(s, t ? tt_rec_of(t) : NULL);
}

const struct tt_backend tt_record_backend = {
    .name = "record",
    .open = tt_writer_open,
    .finish = tt_writer_close,
    .destroy = tt_writer_free,
    .thread_new = tt_writer_thread_alloc,
    .thread_start = rec_thread_start,
    .thread_end = rec_thread_end,
    .thread_flush = rec_thread_flush,
    .thread_name = rec_thread_name,
    .fn_event = rec_fn_event,
    .event = rec_event,
    .stats = tt_writer_stats,
    .mark_crashed = rec_mark_crashed,
    .sync_begin = tt_rec_sync_begin,
    .sync_end = tt_rec_sync_end,
    .checkpoint_state = rec_checkpoint_state,
    .restore_check = rec_restore_check,
    .restore_apply = rec_restore_apply,
};
