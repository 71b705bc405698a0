/* SPDX-License-Identifier: MIT */
/* The replay half of a synchronization operation (sync.h): the recorded operation is matched,
 * its result handed back, and the operation waits for its object's turn.
 *
 * An object's entry counts the ordered operations done on it in this replay (its seq); the
 * thread whose recorded operation has sequence number k may go when the count is k, and
 * passes the turn on by storing k + 1. Waiting spins briefly, then sleeps on the entry's
 * generation word (a futex) in slices, up to the order timeout; the thread that passes turn k
 * wakes only the sleepers of turn k (a futex bitset on k % 32), and makes no system call when
 * none sleeps. Every turn a thread waits for
 * was taken, in the recording, earlier than its own: replay never waits for something that
 * came later, so the waits cannot form a cycle as long as every thread replays its own
 * recorded operations.
 *
 * A turn that does not come in time is a divergence of reason schedule. Its message names the
 * thread, the operation and its object, and the recorded thread whose operation the object
 * waits for; that one is found by a second pass over the recording (a reader of its own, at
 * most SCAN_MAX events), since the thread that holds the turn may not have reached it yet.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "replay-int.h"

#define SPINS 64u
#define YIELDS 4u /* more did not help once a wake is for one turn only */
#define SLICE_NS 50000000L           /* a futex sleep, between two looks at the deadline */
#define SCAN_MAX (UINT64_C(50000000)) /* events the owner search reads at most */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The recorded thread whose ordered operation number @seq on object @id is, or UINT32_MAX. */
static uint32_t turn_owner(tt_session *s, uint64_t id, uint64_t seq)
{
    struct tt_replayer *rp = s->rp;
    tt_reader_limits lim;
    tt_rp_limits_(s, &lim);
    tt_manifest m;
    tt_reader_capacity cap;
    tt_error_info err;
    if (tt_reader_probe(rp->src, &lim, 1, &m, &cap, &err) != TT_OK)
        return UINT32_MAX;
    void *mem = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    tt_reader *r;
    if (!mem || tt_reader_open(rp->src, &lim, 1, mem, cap.total, &r, &err) != TT_OK) {
        free(mem);
        return UINT32_MAX;
    }
    uint32_t owner = UINT32_MAX;
    uint64_t read = 0;
    for (uint32_t i = 0; i < m.thread_count && owner == UINT32_MAX && read < SCAN_MAX; i++) {
        tt_event ev;
        while (read++ < SCAN_MAX && tt_reader_next(r, i, &ev, &err) == TT_OK) {
            if (ev.kind == TT_EV_SYNC && ev.dir && ev.arg == id && ev.addr == seq) {
                owner = i;
                break;
            }
        }
    }
    tt_reader_close(r);
    free(mem);
    return owner;
}

static int schedule_divergence(tt_session *s, struct tt_rp_thread *t, const tt_sync *op,
                               const tt_event *rec, uint64_t at, uint64_t waited_ms)
{
    char site[96];
    if (tt_names_copy(s, op->site, site, sizeof site) < 0)
        snprintf(site, sizeof site, "site %u", op->site);
    uint32_t owner = turn_owner(s, op->id, at);
    char who[64];
    if (owner == UINT32_MAX)
        snprintf(who, sizeof who, "which no recorded thread made");
    else
        snprintf(who, sizeof who, "the turn of recorded thread %u", owner);
    char msg[400];
    snprintf(msg, sizeof msg,
             "waited %" PRIu64 " ms for its turn at %s on object %" PRIu64 ":%" PRIu64
             " (operation %" PRIu64 "); the object is at operation %" PRIu64 ", %s",
             waited_ms, site, op->id >> 32, op->id & 0xFFFFFFFFu, op->seq, at, who);
    tt_event act = *rec;
    act.payload = NULL;
    act.payload_len = 0;
    return tt_rp_diverge_(s, t, TT_DIV_SCHEDULE, rec, &act, 0, msg);
}

/* The bit of turn @seq in an object's sleepers mask and in the futex bitset of its gen word. */
static inline uint32_t turn_bit(uint64_t seq)
{
    return UINT32_C(1) << (seq & 31);
}

/* Waits until @e's count is @op's seq (or, @at_least, has reached it). A waiter spins a little,
 * yields a little, then sleeps on the gen word with its turn's bit set in the object's sleepers
 * mask, so that the thread that passes the turn to it wakes it, and only it (and the few whose
 * turns share the bit, which look and sleep again). */
static int wait_turn(tt_session *s, struct tt_rp_thread *t, const tt_sync *op,
                     struct tt_sync_obj *e, bool at_least, const tt_event *rec)
{
    uint64_t want = op->seq, start = 0;
    const uint32_t bit = turn_bit(want);
    for (unsigned n = 0;; n++) {
        uint64_t v = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (v == want || (at_least && v > want))
            return TT_OK;
        if (n < SPINS) {
            cpu_relax();
            continue;
        }
        if (n < SPINS + YIELDS) {
            /* the thread whose turn it is may be waiting for this core (more threads than
             * cores): give it the core before going to sleep */
            sched_yield();
            continue;
        }
        uint64_t now = tt_mono_ns();
        if (!start)
            start = now;
        else if (now - start > s->cfg.order_timeout_ms * 1000000u)
            return schedule_divergence(s, t, op, rec, v, (now - start) / 1000000u);
        atomic_fetch_or_explicit(&e->sleepers, bit, memory_order_seq_cst);
        uint32_t g = atomic_load_explicit(&e->gen, memory_order_seq_cst);
        v = atomic_load_explicit(&e->seq, memory_order_seq_cst);
        if (!(v == want || (at_least && v > want))) {
            uint64_t until = now + SLICE_NS; /* FUTEX_WAIT_BITSET's deadline is absolute */
            struct timespec ts = { (time_t)(until / 1000000000u), (long)(until % 1000000000u) };
            syscall(SYS_futex, &e->gen, FUTEX_WAIT_BITSET_PRIVATE, g, &ts, NULL, bit);
        }
        /* the bit stays: the waker clears it, and one that shares it sets it again */
    }
}

/* The waker's half of the sleep protocol: the exchange orders the new count before the load
 * of the sleepers mask (a full barrier), as the waiter's fetch-or orders its bit before its
 * load of the count; so either the waiter sees the count, or the waker sees the bit, bumps gen
 * (which the waiter's futex wait then finds changed, if it is not asleep yet) and wakes the
 * sleepers of that bit. A count that jumps (past the numbers a checkpoint did) wakes all. */
static void pass_turn(struct tt_sync_obj *e, uint64_t next)
{
    uint64_t was = atomic_exchange_explicit(&e->seq, next, memory_order_seq_cst);
    /* seq_cst: in the single order with the waiter's fetch-or (a plain load on x86) */
    uint32_t mask = atomic_load_explicit(&e->sleepers, memory_order_seq_cst);
    if (TT_LIKELY(mask == 0))
        return;
    uint32_t bits = next == was + 1 ? turn_bit(next) & mask : mask;
    if (!bits)
        return;
    atomic_fetch_and_explicit(&e->sleepers, ~bits, memory_order_seq_cst);
    atomic_fetch_add_explicit(&e->gen, 1, memory_order_seq_cst);
    syscall(SYS_futex, &e->gen, FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, NULL, NULL, bits);
}

static bool waits_before(uint32_t kind)
{
    return kind == TT_SYNC_LOCK || kind == TT_SYNC_UNLOCK || kind == TT_SYNC_ACQUIRE ||
           kind == TT_SYNC_RELEASE;
}

int tt_rp_sync_begin(tt_session *s, struct tt_thread *bt, tt_sync *op, struct tt_sync_obj *e)
{
    struct tt_rp_thread *t = tt_rp_of(bt);
    int rc;
    if ((rc = tt_rp_busy_begin_(t)) != TT_OK)
        return rc;
    uint64_t live_id = e ? atomic_load_explicit(&e->id, memory_order_acquire) : 0;
    struct tt_replayer *rp = s->rp;
    uint64_t ord, seq, time;
    uint8_t dir;
    /* the common case straight from the bytes (matcher.c): an object that has its id, a sync
     * event without a payload at this site on it, an unordered replay; the history gets the
     * fields its lines show, as replay_fn's */
    if (TT_LIKELY(live_id != 0 && t->rec != UINT32_MAX && !t->base.ended && !rp->ordered) &&
        tt_reader_match_sync_(rp->r, t->rec, op->site, live_id, &ord, &dir, &seq, &time)) {
        op->id = live_id;
        op->seq = ord;
        op->ordered = dir != 0;
        op->result = 0;
        op->data_len = 0;
        tt_report_event *h = &t->hist[t->hist_pos];
        h->ev = (tt_event){ .kind = TT_EV_SYNC, .dir = dir, .time = time, .sp = { 0, op->site },
                            .arg = live_id, .addr = ord };
        h->ev.tp.seq = seq;
        tt_rp_matched_fast_(s, t, h);
        tt_event rec = h->ev;
        tt_rp_busy_end_(t);
        if (op->ordered && waits_before(op->kind))
            return wait_turn(s, t, op, e, false, &rec);
        if (op->kind == TT_SYNC_OBSERVE && op->seq)
            return wait_turn(s, t, op, e, true, &rec);
        return TT_OK;
    }
    tt_event act = { .kind = TT_EV_SYNC, .sp = { 0, op->site }, .arg = live_id };
    const tt_event *ev;
    if ((rc = tt_rp_peek_(s, t, &act, &ev)) != TT_OK)
        goto out;
    tt_diverge_reason why = TT_DIV_NONE;
    const char *msg = NULL;
    if (ev->kind != TT_EV_SYNC)
        why = TT_DIV_KIND;
    else if (ev->sp.site != op->site)
        why = TT_DIV_SITE;
    else if (ev->payload_len != 0 && (ev->payload_len < 4 || ev->payload_len > 4 + TT_SYNC_DATA_MAX))
        why = TT_DIV_LENGTH;
    if (why == TT_DIV_NONE && e) {
        /* the object gets the recording's id at its first operation of this replay (and, in
         * a replay from a checkpoint, the turn where the recording was there: resume.c) */
        if (!live_id) {
            if (atomic_compare_exchange_strong_explicit(&e->id, &live_id, ev->arg,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire)) {
                if (TT_UNLIKELY(s->rp->resume != NULL))
                    tt_rp_resume_turn_(s, e, ev->arg);
            } else if (live_id != ev->arg) {
                why = TT_DIV_ARG;
            }
        } else if (live_id != ev->arg) {
            why = TT_DIV_ARG;
        }
        if (why == TT_DIV_ARG) {
            act.arg = live_id;
            msg = "another synchronization object was recorded";
        }
    }
    if (why != TT_DIV_NONE) {
        rc = tt_rp_diverge_(s, t, why, ev, &act, 0, msg);
        goto out;
    }
    op->id = ev->arg;
    op->seq = ev->addr;
    op->ordered = ev->dir != 0;
    op->result = ev->payload_len ? (int32_t)tt_get32(ev->payload) : 0;
    op->data_len = ev->payload_len ? (uint32_t)ev->payload_len - 4 : 0;
    if (op->data_len)
        memcpy(op->data, (const uint8_t *)ev->payload + 4, op->data_len);
    /* field by field, without the payload: what a schedule divergence reports */
    tt_event rec = { .kind = ev->kind, .dir = ev->dir, .tp = ev->tp, .time = ev->time,
                     .sp = ev->sp, .arg = ev->arg, .addr = ev->addr };
    if ((rc = tt_rp_consume_(s, t, ev)) != TT_OK)
        goto out;
    tt_rp_busy_end_(t);
    /* outside the nesting guard: a wait may be long, and a signal handler's events are its own */
    if (e && op->ordered && waits_before(op->kind))
        return wait_turn(s, t, op, e, false, &rec);
    if (e && op->kind == TT_SYNC_OBSERVE && op->seq)
        return wait_turn(s, t, op, e, true, &rec);
    return TT_OK;
out:
    tt_rp_busy_end_(t);
    return rc;
}

int tt_rp_sync_end(tt_session *s, struct tt_thread *bt, tt_sync *op, int result, int took)
{
    (void)result;
    (void)took;
    struct tt_sync_obj *e = op->entry_;
    if (!e || !op->ordered || op->kind == TT_SYNC_NOTE || op->kind == TT_SYNC_OBSERVE)
        return TT_OK;
    if (op->kind == TT_SYNC_PASS) {
        tt_event rec = { .kind = TT_EV_SYNC, .dir = 1, .sp = { 0, op->site }, .arg = op->id,
                         .addr = op->seq };
        int rc = wait_turn(s, tt_rp_of(bt), op, e, false, &rec);
        if (rc != TT_OK)
            return rc;
    }
    /* from a checkpoint, the numbers done before it are passed over (resume.c) */
    pass_turn(e, TT_UNLIKELY(s->rp->resume != NULL) ? tt_rp_resume_next_(s, op->id, op->seq + 1)
                                                   : op->seq + 1);
    return TT_OK;
}
