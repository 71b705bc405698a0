/* SPDX-License-Identifier: MIT */
/* The recording thread's fast path, inline: what an enter or exit costs when it is recorded.
 *
 * What belongs here: the nesting guard around a recording call (tt_rec_begin_, tt_rec_end_) and
 * the append of a short raw record (tt_record_fn_fast_), and nothing that may take a lock or
 * make a system call. Everything else is the slow path, out of line (pool.c; the event layer's
 * tt_event_fn_slow_ for an enter or exit). One inline copy serves the public calls (event/) and
 * the -finstrument-functions hooks, so a hook does not pay two calls through the PLT.
 */
#ifndef TT_RECORD_API_H
#define TT_RECORD_API_H

#include "record.h"

/* Begins a recording call on @t: TT_OK, TT_E_MODE if @t is already inside a recording call (a
 * signal handler interrupted it: the call must not touch the buffer, and busy stays set for the
 * call it interrupted), or TT_E_CLOSED if the session is closing.
 *
 * The nesting check costs a load and an OR, not a branch: `busy` and `closing` are tested by the
 * one branch that was already here. A handler sees its own thread's writes in program order,
 * so no hardware fence is needed against it, only a compiler one: the signal fence keeps the
 * buffer accesses below the busy store, where an interrupting handler can see that they are
 * about to happen. A handler that runs between the load and the store of busy finds 0, appends
 * its whole event and leaves busy 0 again; this call then reads t->pos afresh. */
static inline int tt_rec_begin_(tt_session *s, struct tt_rec_thread *t)
{
    /* relaxed: busy is written by this thread only (and by a handler running on it) */
    uint32_t nested = atomic_load_explicit(&t->base.busy, memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
    /* TSan does not model membarrier; give it the orderings it can see */
    atomic_store_explicit(&t->base.busy, 1, memory_order_seq_cst);
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t closing = atomic_load_explicit(&s->closing, memory_order_seq_cst);
    uint32_t steal = atomic_load_explicit(&t->steal, memory_order_seq_cst);
#else
    /* relaxed: tt_writer_close's (and a thief's) membarrier orders this store before its load
     * of busy */
    atomic_store_explicit(&t->base.busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t closing = atomic_load_explicit(&s->closing, memory_order_relaxed);
    uint32_t steal = atomic_load_explicit(&t->steal, memory_order_relaxed);
#endif
    if (TT_UNLIKELY(nested | closing | steal)) {
        if (nested)
            return TT_E_MODE; /* busy belongs to the interrupted call: leave it set */
        if (closing) {
            atomic_store_explicit(&t->base.busy, 0, memory_order_release);
            return TT_E_CLOSED;
        }
        /* another thread took (or looked at) the buffer while this one was idle: pos and end
         * are read only after its writes are in */
        tt_writer_steal_ack_(s, t);
    }
    return TT_OK;
}

static inline void tt_rec_end_(struct tt_rec_thread *t)
{
    /* release: the closer's acquire load of busy == 0 sees every byte this call appended (and,
     * as a compiler barrier, keeps the appends above the store a handler looks at) */
    atomic_store_explicit(&t->base.busy, 0, memory_order_release);
}

/* tt_record_fn_fast_ could not take the event: the caller's slow path must. */
#define TT_RECORD_SLOW_ 1

/* The fast path of an enter or exit: a recording thread that is in the first TLS way and has
 * room in its buffer appends a 16-byte record. Returns TT_OK, an error of tt_rec_begin_, or
 * TT_RECORD_SLOW_ for everything else (registration, a full buffer), having changed nothing.
 * @now is the event's tt_ticks(). */
static inline int tt_record_fn_fast_(tt_session *s, uint32_t kind, uint32_t function,
                                     uint64_t now)
{
    const struct tls_way *w = &tt_tls_cache[0];
    if (TT_LIKELY(w->s == s && w->uid == s->uid)) {
        struct tt_rec_thread *t = tt_rec_of(w->t);
        int rc = tt_rec_begin_(s, t);
        if (TT_UNLIKELY(rc != TT_OK))
            return rc;
        if (TT_LIKELY((size_t)(t->end - t->pos) >= sizeof(struct tt_raw_short))) {
            struct tt_raw_short r = { kind, function, now };
            /* the buffers are used in turn and the swapper read this one last, from the other
             * core: ask for the line 8 ahead for writing, as the sync append does (a prefetch
             * never faults, past the buffer's end included) */
            __builtin_prefetch(t->pos + 512, 1, 3);
            memcpy(t->pos, &r, sizeof r);
            t->pos += sizeof r;
            tt_rec_end_(t);
            return TT_OK;
        }
        tt_rec_end_(t);
    }
    return TT_RECORD_SLOW_;
}

/* The size of a sync event's compact raw record (record.h): 16 bytes when it takes the previous
 * event's time (@time 0) and its site and sequence number fit, else 32. */
static inline size_t tt_rec_sync_size_(uint32_t site, uint64_t seq, uint64_t time)
{
    return time == 0 && site <= TT_RAW_SYNC16_SITE_MAX && seq <= UINT32_MAX
               ? sizeof(struct tt_raw_short)
               : sizeof(struct tt_raw_sync);
}

/* Writes a sync event's compact raw record of @size (tt_rec_sync_size_) at t->pos, inside a
 * recording call, and moves pos past it; the caller made the room. @kind is TT_EV_SYNC with
 * the turn flag (bit 8). Field by field into the buffer: a record built on the stack and
 * copied with one memcpy was read back by 16-byte loads from 4- and 8-byte stores, two
 * store-forwarding stalls per event that were most of the sync append's time (perf annotate). */
static inline void tt_rec_put_sync_(struct tt_rec_thread *t, uint32_t kind, uint32_t site,
                                    uint64_t id, uint64_t seq, uint64_t time, size_t size)
{
    uint8_t *p = t->pos;
    /* the buffers are used in turn (pool.c), so the line a record goes to is cold: ask for it
     * for writing 8 lines ahead, so that the store, and the lock instruction after it that
     * waits for the store buffer to drain, do not wait for it (a prefetch never faults, past
     * the buffer's end included) */
    __builtin_prefetch(p + 512, 1, 3);
    if (TT_LIKELY(size == sizeof(struct tt_raw_short))) {
        const uint32_t w0 = kind | TT_RAW_SYNC | TT_RAW_SYNC16 | site << TT_RAW_SYNC16_SHIFT;
        const uint32_t seq32 = (uint32_t)seq;
        memcpy(p, &w0, 4);
        memcpy(p + 4, &seq32, 4);
        memcpy(p + 8, &id, 8);
    } else {
        const uint32_t w0 = kind | TT_RAW_SYNC;
        memcpy(p, &w0, 4);
        memcpy(p + 4, &site, 4);
        memcpy(p + 8, &time, 8);
        memcpy(p + 16, &id, 8);
        memcpy(p + 24, &seq, 8);
    }
    t->pos = p + size;
}

#endif
