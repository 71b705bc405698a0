/* SPDX-License-Identifier: MIT */
/* Replay from a checkpoint (replay.h: tt_replay_from_checkpoint, tt_replay_resume), and the
 * saved state of any recorded checkpoint (a restore of one that is not the retained one).
 *
 * Where a replay starts. Checkpoint N of the recording is an event of one thread; the cut is
 * its place in the recorded order (time, thread, seq). Every thread's cursor goes to its first
 * event after the cut: the checkpoint's thread by the checkpoint table's row (the chunk and the
 * index in it: one seek, one chunk read), every other thread by the seek index (its last entry
 * before the checkpoint's time, then the events up to the cut passed over: at most the index's
 * step, 4096 events). The providers stage the checkpoint's state and commit; the session
 * retains the checkpoint, as if it had just been matched, and takes its epoch. Nothing before
 * the cut is read again, nor compared: the program is where the recording was at the cut,
 * because its state is all in the providers. That is the contract for a program that starts
 * its replay there, and what makes it as fast as the part it replays.
 *
 * Thread schedules (sync.h). In replay, an object's turn counts the ordered operations done on
 * it in this replay, and a thread waits until the count is its recorded operation's number.
 * From a cut, the operations before it are not done again, so each object's count must start
 * where the recording was. Nothing about the schedule is saved at a checkpoint; the recording
 * after the cut says all of it. One pass over the rest of the recording (a reader of its own,
 * sought like the replay's) finds, for every object, the ordered operations that come after
 * the cut: the lowest number is where its count starts. The first operation the replay happens
 * to meet on an object would not do: threads reach their operations in any order live, and a
 * later number arriving first would start the count past an earlier one that is still to come.
 * An object's operations are numbered when they happen, a little before their events are
 * timed, so two threads releasing a shared object (a semaphore, a rwlock) at once can have
 * their events in the other order; a cut between those two events leaves the later number
 * before the cut and the earlier after it. The pass sees that as a hole in the numbers after
 * the cut, and passing the turn skips the holes, which were done before the cut. An object
 * that has only waits after the cut (a condition variable's wake-ups) starts past every number,
 * since all it waits for came before. This costs one more read of what the replay reads anyway,
 * and memory for each object used after the cut (and a bit per number for an object with a
 * hole); a recording without sync events skips it. The start is taken when an object gets its
 * id in this replay (sync.c), or, for an object the replay met before the start, here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay-int.h"

/* ---------------------------------------------------------------- a reader of its own */

struct side {
    void *mem;
    tt_reader *r;
};

static int side_open(tt_session *s, struct side *sd, tt_error_info *err)
{
    struct tt_replayer *rp = s->rp;
    tt_reader_limits lim;
    tt_rp_limits_(s, &lim);
    tt_reader_capacity cap;
    sd->mem = NULL;
    sd->r = NULL;
    int rc = tt_reader_probe(rp->src, &lim, TT_CURSORS_PER_THREAD, NULL, &cap, err);
    if (rc != TT_OK)
        return rc;
    sd->mem = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    if (!sd->mem)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for a second reader");
    rc = tt_reader_open(rp->src, &lim, TT_CURSORS_PER_THREAD, sd->mem, cap.total, &sd->r, err);
    if (rc != TT_OK) {
        free(sd->mem);
        sd->mem = NULL;
    }
    return rc;
}

static void side_close(struct side *sd)
{
    if (sd->r)
        tt_reader_close(sd->r);
    free(sd->mem);
}

static tt_timepoint_entry entry_of(const tt_checkpoint_entry *e)
{
    return (tt_timepoint_entry){ .thread = e->tp.thread, .index = e->index, .seq = e->tp.seq,
                                 .time = e->time, .chunk_offset = e->chunk_offset };
}

int tt_rp_read_checkpoint_(tt_session *s, uint64_t n, uint8_t **state, size_t *len,
                           tt_checkpoint_entry *e, tt_error_info *err)
{
    tt_reader *r = s->rp->r;
    *state = NULL;
    *len = 0;
    if (tt_reader_checkpoint(r, n, e) != TT_OK) {
        const tt_manifest *m = tt_reader_manifest(r);
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the recording has no checkpoint %" PRIu64
                       " (%s%" PRIu64 " checkpoint%s)", n,
                       m->checkpoints_offset ? "it has " : "no checkpoint table: it has ",
                       tt_reader_checkpoint_count(r), tt_reader_checkpoint_count(r) == 1 ? "" : "s");
    }
    struct side sd;
    int rc = side_open(s, &sd, err);
    tt_timepoint_entry te = entry_of(e);
    tt_event ev;
    if (rc == TT_OK)
        rc = tt_reader_seek(sd.r, te.thread, &te, err);
    if (rc == TT_OK)
        rc = tt_reader_peek(sd.r, te.thread, &ev, err);
    if (rc == TT_OK && (ev.kind != TT_EV_CHECKPOINT || ev.tp.seq != e->tp.seq ||
                        ev.payload_len != e->length))
        rc = tt_fail(err, TT_E_CORRUPT, 0, e->chunk_offset, "%s: checkpoint %" PRIu64 " of the "
                     "checkpoint table is not the event at thread %u seq %" PRIu64,
                     s->rp->src->name, n, te.thread, te.seq);
    if (rc == TT_OK) {
        *state = malloc(ev.payload_len ? ev.payload_len : 1);
        if (!*state)
            rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for checkpoint %" PRIu64,
                         n);
        else if (ev.payload_len)
            memcpy(*state, ev.payload, ev.payload_len);
        *len = ev.payload_len;
    }
    side_close(&sd);
    return rc;
}

/* ---------------------------------------------------------------- the cut */

/* (time, thread, seq) of @ev is after the cut at @e's */
static bool after_cut(const tt_event *ev, const tt_checkpoint_entry *e)
{
    if (ev->time != e->time)
        return ev->time > e->time;
    if (ev->tp.thread != e->tp.thread)
        return ev->tp.thread > e->tp.thread;
    return ev->tp.seq > e->tp.seq;
}

/* Puts every cursor of @r at its thread's first event after the cut. @targets holds where each
 * thread's cursor is sought first (has[t] = 0: a thread without events, left alone). */
static int seek_to_cut(tt_reader *r, uint32_t nthreads, const tt_timepoint_entry *targets,
                       const uint8_t *has, const tt_checkpoint_entry *e, tt_error_info *err)
{
    for (uint32_t u = 0; u < nthreads; u++) {
        if (!has[u])
            continue;
        int rc = tt_reader_seek(r, u, &targets[u], err);
        tt_event ev;
        while (rc == TT_OK && (rc = tt_reader_peek(r, u, &ev, err)) == TT_OK &&
               !after_cut(&ev, e))
            tt_reader_advance(r, u);
        if (rc != TT_OK && rc != TT_E_END)
            return rc;
    }
    return TT_OK;
}

/* ---------------------------------------------------------------- objects after the cut */

struct obj {
    uint64_t id;              /* 0: a free slot */
    uint64_t min, max, count; /* its ordered operations after the cut */
    uint64_t *bits;           /* with a hole: bit (k - min) set for each number k after the cut */
};

struct tt_rp_resume {
    struct obj *slot;
    uint64_t cap, used;       /* cap: a power of two */
};

static uint64_t hash_id(uint64_t id)
{
    return id * UINT64_C(0x9E3779B97F4A7C15);
}

static struct obj *obj_find(const struct tt_rp_resume *m, uint64_t id)
{
    if (!m || !m->cap || !id)
        return NULL;
    for (uint64_t i = hash_id(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->slot[i].id == id)
            return &m->slot[i];
        if (m->slot[i].id == 0)
            return NULL;
    }
}

static struct obj *obj_get(struct tt_rp_resume *m, uint64_t id)
{
    struct obj *o = obj_find(m, id);
    if (o)
        return o;
    if ((m->used + 1) * 2 > m->cap) {
        uint64_t ncap = m->cap ? m->cap * 2 : 1024;
        struct obj *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return NULL;
        for (uint64_t i = 0; i < m->cap; i++) {
            if (!m->slot[i].id)
                continue;
            uint64_t j = hash_id(m->slot[i].id) & (ncap - 1);
            while (ns[j].id)
                j = (j + 1) & (ncap - 1);
            ns[j] = m->slot[i];
        }
        free(m->slot);
        m->slot = ns;
        m->cap = ncap;
    }
    uint64_t i = hash_id(id) & (m->cap - 1);
    while (m->slot[i].id)
        i = (i + 1) & (m->cap - 1);
    m->slot[i] = (struct obj){ .id = id, .min = UINT64_MAX };
    m->used++;
    return &m->slot[i];
}

void tt_rp_resume_free_(struct tt_replayer *rp)
{
    struct tt_rp_resume *m = rp->resume;
    if (!m)
        return;
    for (uint64_t i = 0; i < m->cap; i++)
        free(m->slot[i].bits);
    free(m->slot);
    free(m);
    rp->resume = NULL;
}

/* Where @o's count starts: its first number after the cut; past every number when nothing
 * after the cut takes a turn on it. */
static uint64_t obj_start(const struct obj *o)
{
    return o->count ? o->min : UINT64_MAX >> 1;
}

/* One pass over the rest of the recording, from the cut (@pass 1: numbers, lowest, highest;
 * 2: the bits of the objects with a hole). */
static int scan_rest(tt_session *s, struct tt_rp_resume *m, int pass, const tt_timepoint_entry *tg,
                     const uint8_t *has, const tt_checkpoint_entry *e, tt_error_info *err)
{
    struct side sd;
    uint32_t n = s->rp->nthreads;
    int rc = side_open(s, &sd, err);
    if (rc == TT_OK)
        rc = seek_to_cut(sd.r, n, tg, has, e, err);
    for (uint32_t u = 0; rc == TT_OK && u < n; u++) {
        tt_event ev;
        while (has[u] && (rc = tt_reader_next(sd.r, u, &ev, err)) == TT_OK) {
            if (ev.kind != TT_EV_SYNC || !ev.arg)
                continue;
            struct obj *o = pass == 1 ? obj_get(m, ev.arg) : obj_find(m, ev.arg);
            if (!o) {
                if (pass == 1)
                    rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for the "
                                 "synchronization objects after the checkpoint");
                continue;
            }
            if (!ev.dir) /* no turn (a wait's wake-up, a note): only the object is known */
                continue;
            if (pass == 1) {
                o->count++;
                o->min = ev.addr < o->min ? ev.addr : o->min;
                o->max = ev.addr > o->max ? ev.addr : o->max;
            } else if (o->bits && ev.addr >= o->min && ev.addr <= o->max) {
                o->bits[(ev.addr - o->min) / 64] |= UINT64_C(1) << ((ev.addr - o->min) % 64);
            }
        }
        if (rc == TT_E_END)
            rc = TT_OK;
    }
    side_close(&sd);
    return rc;
}

static int find_turns(tt_session *s, const tt_timepoint_entry *tg, const uint8_t *has,
                      const tt_checkpoint_entry *e, tt_error_info *err)
{
    struct tt_replayer *rp = s->rp;
    struct tt_rp_resume *m = calloc(1, sizeof *m);
    if (!m)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
    int rc = scan_rest(s, m, 1, tg, has, e, err);
    bool holes = false;
    for (uint64_t i = 0; rc == TT_OK && i < m->cap; i++) {
        struct obj *o = &m->slot[i];
        if (!o->id || !o->count || o->count == o->max - o->min + 1)
            continue;
        o->bits = calloc((o->max - o->min) / 64 + 1, sizeof *o->bits);
        if (!o->bits)
            rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
        holes = true;
    }
    if (rc == TT_OK && holes)
        rc = scan_rest(s, m, 2, tg, has, e, err);
    if (rc != TT_OK) {
        rp->resume = m;
        tt_rp_resume_free_(rp);
        return rc;
    }
    rp->resume = m;
    /* objects the replay met before its start: their counts are this replay's so far */
    struct tt_sync_obj *t = atomic_load_explicit(&s->sync.slots, memory_order_acquire);
    for (uint64_t i = 0; t && i < TT_SYNC_SLOTS; i++) {
        uint64_t id = atomic_load_explicit(&t[i].id, memory_order_acquire);
        const struct obj *o = id ? obj_find(m, id) : NULL;
        if (o)
            atomic_store_explicit(&t[i].seq, obj_start(o), memory_order_release);
    }
    return TT_OK;
}

void tt_rp_resume_turn_(tt_session *s, struct tt_sync_obj *e, uint64_t id)
{
    const struct obj *o = obj_find(s->rp->resume, id);
    uint64_t zero = 0;
    /* from 0 only, and never to 0: a thread that saw the id before this store waits for its
     * own number, which is at least the start, so it cannot have passed a turn yet unless the
     * start is 0, which is the count already */
    if (o && obj_start(o))
        atomic_compare_exchange_strong_explicit(&e->seq, &zero, obj_start(o),
                                                memory_order_acq_rel, memory_order_relaxed);
}

uint64_t tt_rp_resume_next_(tt_session *s, uint64_t id, uint64_t next)
{
    const struct obj *o = obj_find(s->rp->resume, id);
    if (!o || !o->bits)
        return next;
    /* a hole is a number done before the cut */
    while (next > o->min && next < o->max &&
           !(o->bits[(next - o->min) / 64] & (UINT64_C(1) << ((next - o->min) % 64))))
        next++;
    return next;
}

/* ---------------------------------------------------------------- the start */

int tt_replay_from_checkpoint(tt_session *s, uint64_t n, tt_error_info *err)
{
    if (!s || s->be != &tt_replay_backend || !s->rp)
        return tt_fail(err, TT_E_MODE, 0, UINT64_MAX,
                       "tt_replay_from_checkpoint: not a replay session");
    struct tt_replayer *rp = s->rp;
    tt_reader *r = rp->r;
    const uint32_t nthreads = rp->nthreads;
    tt_checkpoint_lock_(s);
    uint8_t *state = NULL;
    size_t len = 0;
    tt_checkpoint_entry e;
    tt_index *ix = NULL;
    tt_timepoint_entry *tg = calloc(nthreads ? nthreads : 1, sizeof *tg);
    uint8_t *has = calloc(nthreads ? nthreads : 1, 1);
    int rc = tg && has ? TT_OK : tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
    if (rc == TT_OK && rp->from)
        rc = tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the replay already started at checkpoint "
                     "%" PRIu64, rp->from - 1);
    if (rc == TT_OK)
        rc = tt_rp_read_checkpoint_(s, n, &state, &len, &e, err);
    /* where each cursor is sought: the checkpoint's own row, the seek index for the others */
    if (rc == TT_OK) {
        tg[e.tp.thread] = entry_of(&e);
        has[e.tp.thread] = 1;
    }
    bool sync = false;
    if (rc == TT_OK && tt_reader_manifest(r)->index_offset) {
        tt_reader_limits lim;
        tt_reader_limits_default(&lim);
        rc = tt_index_open(r, &lim, &ix, err);
    } else if (rc == TT_OK && nthreads > 1) {
        rc = tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "%s: a replay from a checkpoint of a "
                     "recording of %u threads needs its index tables, and it has none",
                     rp->src->name, nthreads);
    }
    for (uint32_t u = 0; rc == TT_OK && u < nthreads; u++) {
        const tt_index_thread *ti = ix ? tt_index_thread_info(ix, u) : NULL;
        sync |= !ix || (ti && ti->kinds[TT_EV_SYNC] != 0);
        if (u == e.tp.thread || tt_reader_thread(r, u)->event_count == 0)
            continue;
        rc = tt_index_seek_time(ix, u, e.time, &tg[u], err);
        has[u] = 1;
    }
    struct tt_cp_staged st;
    if (rc == TT_OK)
        rc = tt_checkpoint_stage_(s, state, len, n, &st, err);
    if (rc == TT_OK) {
        /* the schedule first: it reads only, with a reader of its own */
        if (sync)
            rc = find_turns(s, tg, has, &e, err);
        if (rc == TT_OK)
            rc = seek_to_cut(r, nthreads, tg, has, &e, err);
        if (rc != TT_OK) {
            tt_rp_resume_free_(rp);
            tt_checkpoint_cancel_(&st);
        }
    }
    if (rc == TT_OK) {
        tt_checkpoint_commit_(&st);
        tt_checkpoint_retain(s, state, len, e.tp, n);
        atomic_store_explicit(&s->epoch, e.tp.epoch, memory_order_release);
        rp->from = n + 1;
        for (uint32_t u = 0; rp->ordered && rc == TT_OK && u < nthreads; u++)
            rc = tt_rp_publish_next_(rp, NULL, u, err);
    }
    tt_checkpoint_unlock_(s);
    if (ix)
        tt_index_close(ix);
    free(state);
    free(tg);
    free(has);
    return rc;
}

int tt_replay_resume(tt_session *s, uint64_t *from, tt_error_info *err)
{
    if (from)
        *from = UINT64_MAX;
    if (!s || s->be != &tt_replay_backend || !s->rp || !s->cfg.replay_from)
        return TT_OK;
    int rc = s->rp->from ? TT_OK : tt_replay_from_checkpoint(s, s->cfg.replay_from - 1, err);
    if (rc == TT_OK && from)
        *from = s->rp->from - 1;
    return rc;
}

/* ---- restores (checkpoint.c runs them: tinytrace/checkpoint.h) ---- */

/* A checkpoint's saved state from the recording, when it is not the retained one. */
int tt_rp_checkpoint_state(tt_session *s, const tt_checkpoint_sel *sel, uint64_t *number,
                           tt_timepoint *tp, uint8_t **state, size_t *len, tt_error_info *err)
{
    tt_reader *r = s->rp->r;
    uint64_t n = sel->number, count = tt_reader_checkpoint_count(r);
    if (sel->which == TT_CHECKPOINT_AT) {
        tt_checkpoint_entry e;
        for (n = 0; n < count; n++)
            if (tt_reader_checkpoint(r, n, &e) == TT_OK && e.tp.thread == sel->at.thread &&
                e.tp.seq == sel->at.seq)
                break;
        if (n == count)
            return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the recording has no checkpoint at "
                           "thread %u seq %" PRIu64, sel->at.thread, sel->at.seq);
    }
    tt_checkpoint_entry e;
    int rc = tt_rp_read_checkpoint_(s, n, state, len, &e, err);
    if (rc == TT_OK) {
        *number = n;
        *tp = e.tp;
    }
    return rc;
}

/* The recording's next event of this thread must be the restore of the same checkpoint at the
 * same site; nothing moves yet (the providers stage after this). */
int tt_rp_restore_check(tt_session *s, struct tt_thread *bt, struct tt_restore_op *op,
                        tt_error_info *err)
{
    struct tt_rp_thread *t = tt_rp_of(bt);
    int rc;
    if ((rc = tt_rp_busy_begin_(t)) != TT_OK)
        return tt_fail(err, rc, 0, UINT64_MAX, "a restore inside another call");
    tt_event act = { .kind = TT_EV_RESTORE, .sp = { 0, op->site }, .addr = op->number };
    const tt_event *ev;
    rc = tt_rp_peek_(s, t, &act, &ev);
    if (rc == TT_OK) {
        tt_diverge_reason why = ev->kind != TT_EV_RESTORE    ? TT_DIV_KIND
                                : ev->sp.site != op->site     ? TT_DIV_SITE
                                : ev->addr != op->number      ? TT_DIV_RESTORE
                                                             : TT_DIV_NONE;
        if (why != TT_DIV_NONE) {
            char msg[160];
            if (why == TT_DIV_RESTORE)
                snprintf(msg, sizeof msg, "the recording restored checkpoint %" PRIu64
                         " here, not %" PRIu64, ev->addr, op->number);
            rc = tt_rp_diverge_(s, t, why, ev, &act, 0, why == TT_DIV_RESTORE ? msg : NULL);
        } else {
            /* the recording's epoch: the restores of every thread before this one */
            op->epoch = ev->tp.epoch ? ev->tp.epoch
                                    : atomic_load_explicit(&s->epoch, memory_order_relaxed) + 1;
        }
    }
    tt_rp_busy_end_(t);
    if (rc == TT_E_DIVERGED) {
        tt_divergence d;
        if (tt_replay_divergence(s, &d) == TT_OK)
            tt_fail(err, rc, 0, UINT64_MAX, "%s", d.message);
    } else if (rc != TT_OK) {
        tt_fail(err, rc, 0, UINT64_MAX, "the restore: %s", tt_strerror(rc));
    }
    return rc;
}

int tt_rp_restore_apply(tt_session *s, struct tt_thread *bt, struct tt_restore_op *op,
                        tt_error_info *err)
{
    (void)op;
    struct tt_rp_thread *t = tt_rp_of(bt);
    int rc;
    if ((rc = tt_rp_busy_begin_(t)) != TT_OK)
        return tt_fail(err, rc, 0, UINT64_MAX, "a restore inside another call");
    tt_event ev;
    tt_error_info e2;
    /* the event restore_check peeked at: still the cursor's next (cp_lock, this thread's) */
    rc = tt_reader_peek(s->rp->r, t->rec, &ev, &e2);
    if (rc == TT_OK)
        rc = tt_rp_consume_(s, t, &ev);
    tt_rp_busy_end_(t);
    if (rc != TT_OK)
        return tt_fail(err, rc, 0, UINT64_MAX, "the restore: %s", tt_strerror(rc));
    return TT_OK;
}
