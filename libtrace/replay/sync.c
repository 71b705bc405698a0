/* SPDX-License-Identifier: MIT */
/* The replay half of a synchronization operation (sync.h): the recorded operation is matched,
 * its result handed back, and the operation waits for its object's turn.
 *
 * An object's entry counts the ordered operations done on it in this replay (its seq); the
 * thread whose recorded operation has sequence number k may go when the count is k, and
 * passes the turn on by storing k + 1. Waiting spins briefly, then sleeps on the entry's
 * generation word (a futex) in slices, up to the order timeout; the thread that passes turn k
 * wakes only the sleeper of turn k (each sleeper says which turn it sleeps for), and makes no
 * system call when none sleeps. Passing a turn is a plain store and a load: the sleeper, which
 * is rare, makes the barrier that orders them for both (membarrier(2), as an asymmetric
 * fence), where the kernel has it; else the store is an exchange. Every turn a thread waits for
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
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "replay-int.h"

#define SPINS 64u
/* with more threads than cores the turn's thread may wait for this core: on the contended
 * bench trace 4 yields before a sleep replayed in 2.4-2.7 s, 64 in 2.0 s */
#define YIELDS 64u
#define SLICE_NS 50000000L           /* a futex sleep, between two looks at the deadline */
#define UNFENCED_SLICE_NS 1000000L   /* ... when the sleeper could not make the barrier */
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

/* The sleepers bit of @t: its recorded thread number modulo 31 for the first TT_RP_SLEEP_MAX
 * threads (the waker tells those of one bit apart by what they sleep for), bit 31 for the
 * rest (woken at every turn passed while set, to look again). */
#define SHARED_BIT 31u
static inline uint32_t sleep_bit(const struct tt_rp_thread *t)
{
    return t->rec < TT_RP_SLEEP_MAX ? t->rec % SHARED_BIT : SHARED_BIT;
}

static inline bool turn_ready(uint64_t v, uint64_t want, bool at_least)
{
    return v == want || (at_least && v > want);
}

void tt_rp_sync_init_(struct tt_replayer *rp)
{
    rp->asym = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* The sleeper's half of the asymmetric fence: every thread of the process that runs now
 * passes a full barrier, so that a waker's store of the count and its load of the mask are
 * in order with this thread's bit and its load of the count. False when the kernel refused
 * (a fork child that did not register: the registration is the address space's). */
static bool heavy_fence(const struct tt_replayer *rp)
{
    if (!rp->asym)
        return true; /* the waker's exchange is the barrier */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return true;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* The recorded threads that have a sleep entry (and a bit of their own class). */
static inline uint32_t sleep_threads(const struct tt_replayer *rp)
{
    return rp->nthreads < TT_RP_SLEEP_MAX ? rp->nthreads : TT_RP_SLEEP_MAX;
}

/* Whether recorded thread @rec has its sleepers bit to itself. */
static bool bit_alone(const struct tt_replayer *rp, uint32_t rec)
{
    return rec < SHARED_BIT && rec + SHARED_BIT >= sleep_threads(rp);
}

/* Waits until @e's count is @op's seq (or, @at_least, has reached it). A waiter spins a little,
 * yields a little, then says what it sleeps for (its object and turn), sets its bit in the
 * object's sleepers mask and sleeps on the gen word's futex with that bit, so that the thread
 * that passes this very turn wakes it, and no other pass does. */
static int wait_turn(tt_session *s, struct tt_rp_thread *t, const tt_sync *op,
                     struct tt_sync_obj *e, bool at_least, const tt_event *rec)
{
    uint64_t want = op->seq, start = 0;
    const uint32_t b = sleep_bit(t), bit = UINT32_C(1) << b;
    struct tt_rp_sleep *me = t->rec < TT_RP_SLEEP_MAX ? &s->rp->sleep[t->rec] : NULL;
    bool slept = false, woke = false;
    for (unsigned n = 0;; n++) {
        uint64_t v = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (woke && !turn_ready(v, want, at_least))
            atomic_fetch_add_explicit(&s->rp->turn_early_wakes, 1, memory_order_relaxed);
        woke = false;
        if (turn_ready(v, want, at_least)) {
            /* a bit left set would make every pass look at this thread's entry; it is cleared
             * only when no other thread has it */
            if (slept && bit_alone(s->rp, t->rec) &&
                (atomic_load_explicit(&e->sleepers, memory_order_relaxed) & bit))
                atomic_fetch_and_explicit(&e->sleepers, ~bit, memory_order_relaxed);
            return TT_OK;
        }
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
        /* gen before the bit: a waker that cleared the bit (waking another of this bit) before
         * it is set again has bumped gen before this load, or the futex wait finds gen moved */
        uint32_t g = atomic_load_explicit(&e->gen, memory_order_seq_cst);
        /* again at every sleep: a signal handler's wait on this thread may have changed it */
        if (me) {
            atomic_store_explicit(&me->obj, e, memory_order_relaxed);
            atomic_store_explicit(&me->want, (want + 1) | (at_least ? TT_RP_AT_LEAST : 0),
                                  memory_order_relaxed);
        }
        atomic_fetch_or_explicit(&e->sleepers, bit, memory_order_seq_cst);
        slept = true;
        /* without the barrier a waker may miss the bit: then sleep briefly, and look again */
        long slice = heavy_fence(s->rp) ? SLICE_NS : UNFENCED_SLICE_NS;
        v = atomic_load_explicit(&e->seq, memory_order_seq_cst);
        if (!turn_ready(v, want, at_least)) {
            uint64_t until = now + (uint64_t)slice; /* FUTEX_WAIT_BITSET's deadline is absolute */
            struct timespec ts = { (time_t)(until / 1000000000u), (long)(until % 1000000000u) };
            atomic_fetch_add_explicit(&s->rp->turn_sleeps, 1, memory_order_relaxed);
            /* woken, or gen moved before the sleep: by a pass; a slice that ran out or a
             * signal is not counted */
            woke = syscall(SYS_futex, &e->gen, FUTEX_WAIT_BITSET_PRIVATE, g, &ts, NULL, bit) ==
                       0 ||
                   errno == EAGAIN;
        }
    }
}

/* Whether the sleepers of bit @b (< SHARED_BIT) on @e include one that turn @next lets go:
 * recorded threads b, b + 31, ... below TT_RP_SLEEP_MAX and the recording's thread count. */
static bool bit_wants(const struct tt_replayer *rp, const struct tt_sync_obj *e, uint32_t b,
                      uint64_t next)
{
    for (uint32_t k = b, n = sleep_threads(rp); k < n; k += SHARED_BIT) {
        const struct tt_rp_sleep *z = &rp->sleep[k];
        /* acquire, after the mask's load: the entry was stored before the bit was set */
        uint64_t w = atomic_load_explicit(&z->want, memory_order_acquire);
        if (atomic_load_explicit(&z->obj, memory_order_relaxed) != e)
            continue;
        uint64_t turn = (w & ~TT_RP_AT_LEAST) - 1;
        if (turn == next || ((w & TT_RP_AT_LEAST) && turn <= next))
            return true;
    }
    return false;
}

/* The waker's half of the sleep protocol: the new count is ordered before the load of the
 * sleepers mask (by the sleeper's membarrier, or by the exchange), as the waiter's fetch-or
 * and fence order its entry and bit before its load of the count; so either the waiter sees
 * the count, or the waker sees the bit and the entry, bumps gen (which the waiter's futex
 * wait then finds changed, if it is not asleep yet) and wakes that bit. A sleeper whose turn
 * this is not stays asleep; a count that jumps (past the numbers a checkpoint did) wakes all. */
static void pass_turn(const struct tt_replayer *rp, struct tt_sync_obj *e, uint64_t next)
{
    uint64_t was;
    uint32_t mask;
    if (TT_LIKELY(rp->asym && rp->resume == NULL)) {
        /* the light half of the fence: only the compiler's order; the sleeper's membarrier
         * does the rest. No jump without a checkpoint */
        was = next - 1;
        atomic_store_explicit(&e->seq, next, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
        mask = atomic_load_explicit(&e->sleepers, memory_order_acquire);
    } else {
        was = atomic_exchange_explicit(&e->seq, next, memory_order_seq_cst);
        /* seq_cst: in the single order with the waiter's fetch-or (a plain load on x86) */
        mask = atomic_load_explicit(&e->sleepers, memory_order_seq_cst);
    }
    if (TT_LIKELY(mask == 0))
        return;
    uint32_t bits = mask;
    if (next == was + 1) {
        bits = mask & (UINT32_C(1) << SHARED_BIT);
        for (uint32_t m = mask & ~bits; m; m &= m - 1) {
            uint32_t b = (uint32_t)__builtin_ctz(m);
            if (bit_wants(rp, e, b, next))
                bits |= UINT32_C(1) << b;
        }
    }
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
        bool observe = op->kind == TT_SYNC_OBSERVE && op->seq;
        /* a turn already come needs no copy of the event (the report of a wait too long):
         * reading back the slot just written, field by field, stalls */
        if (!(observe || (op->ordered && waits_before(op->kind))) ||
            turn_ready(atomic_load_explicit(&e->seq, memory_order_acquire), ord, observe)) {
            tt_rp_busy_end_(t);
            return TT_OK;
        }
        tt_event rec = h->ev;
        tt_rp_busy_end_(t);
        return wait_turn(s, t, op, e, observe, &rec);
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
    uint64_t next = op->seq + 1;
    if (TT_UNLIKELY(s->rp->resume != NULL))
        next = tt_rp_resume_next_(s, op->id, next);
    pass_turn(s->rp, e, next);
    return TT_OK;
}
