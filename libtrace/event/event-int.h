/* SPDX-License-Identifier: MIT */
/* The event layer: the public recording calls (event.c) and tt_session_open (open.c), which
 * chooses a session's backend from its config.
 *
 * What belongs here: the one inline path of an enter or exit in either mode, for the public
 * tt_enter/tt_exit (through tt_event_fn_) and the -finstrument-functions hooks (instrument/),
 * and its slow path. Never installed; see docs/ARCHITECTURE.md.
 */
#ifndef TT_EVENT_INT_H
#define TT_EVENT_INT_H

#include "record_api.h"

/* Everything the fast path does not take: registration, a full buffer, replay. Starts over from
 * the thread lookup. @now is the event's tt_ticks() (0 in replay, which reads no clock). */
int tt_event_fn_slow_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now) TT_HIDDEN;

/* A recorded enter or exit: the fast path, else the slow path. */
static inline int tt_record_fn_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now)
{
    int rc = tt_record_fn_fast_(s, kind, function, now);
    if (TT_LIKELY(rc != TT_RECORD_SLOW_))
        return rc;
    return tt_event_fn_slow_(s, kind, function, now);
}

/* An enter or exit in either mode; replay does not read the clock (rdtsc is most of an
 * event's cost). */
static inline int tt_fn_event_(tt_session *s, uint32_t kind, uint32_t function)
{
    if (TT_LIKELY(s->head.mode == TT_MODE_RECORD))
        return tt_record_fn_(s, kind, function, tt_ticks());
    return tt_event_fn_slow_(s, kind, function, 0);
}

/* ---- the record fast path of a lock that did not wait, and of its release ----
 * For the preload library's mutex lock and unlock: an exclusive object's take (found free, so
 * the event reads no clock) or release, recorded as sync.c's full path records it (the same
 * event, the same sequence number from the same entry), without a tt_sync, the backend's
 * calls or the thread lookup's slow path. Anything else takes the full path: replay, schedule
 * chaos (its points are the full path's), an object without an id yet or not in its home slot
 * of the registry, a thread not in the first TLS way, no room for a record, a nested call. */
struct tt_sync_fast_ {
    struct tt_rec_thread *t;
    struct tt_sync_obj *e;
    uint64_t id;
    uint32_t site;
};

/* Begins: true with @f filled and the thread inside a recording call (end or cancel must
 * follow, with nothing between that can record); false, having changed nothing. @site is the
 * operation's interned site id; the caller holds the runtime's nesting guard. */
static inline bool tt_sync_fast_begin_(tt_session *s, const void *obj, uint32_t site,
                                       struct tt_sync_fast_ *f)
{
    if (!tt_active_(s) || s->head.mode != TT_MODE_RECORD || TT_UNLIKELY(s->w->chaos != NULL))
        return false;
    const struct tls_way *w = &tt_tls_cache[0];
    if (TT_UNLIKELY(w->s != s || w->uid != s->uid))
        return false;
    /* the registry's home slot, as tt_sync_obj_get_ looks first, but never making an entry */
    struct tt_sync_obj *tab = atomic_load_explicit(&s->sync.slots, memory_order_acquire);
    uintptr_t key = (uintptr_t)obj;
    if (TT_UNLIKELY(tab == NULL || key == 0))
        return false;
    struct tt_sync_obj *e = &tab[tt_sync_slot_of_(key)];
    if (TT_UNLIKELY(atomic_load_explicit(&e->key, memory_order_acquire) != key))
        return false;
    /* acquire: as tt_sync_obj_id_ */
    uint64_t id = atomic_load_explicit(&e->id, memory_order_acquire);
    if (TT_UNLIKELY(id == 0))
        return false;
    struct tt_rec_thread *t = tt_rec_of(w->t);
    if (TT_UNLIKELY(tt_rec_begin_(s, t) != TT_OK))
        return false; /* nested (busy is the interrupted call's) or closing (busy cleared) */
    if (TT_UNLIKELY(t->base.ended || (size_t)(t->end - t->pos) < sizeof(struct tt_raw_sync))) {
        tt_rec_end_(t);
        return false;
    }
    f->t = t;
    f->e = e;
    f->id = id;
    f->site = site;
    return true;
}

/* The take is done (the thread holds the object), or the release is about to be: the
 * operation's turn is the entry's count, which only the holder touches (a load and a store,
 * as sync.c's), and its event is appended. Ends the recording call. */
static inline void tt_sync_fast_end_(struct tt_sync_fast_ *f)
{
    uint64_t seq = atomic_load_explicit(&f->e->seq, memory_order_relaxed);
    atomic_store_explicit(&f->e->seq, seq + 1, memory_order_relaxed);
    tt_rec_put_sync_(f->t, TT_EV_SYNC | 1u << 8, f->site, f->id, seq, 0,
                     tt_rec_sync_size_(f->site, seq, 0));
    tt_rec_end_(f->t);
}

/* The operation did not happen (a trylock found the object taken): nothing recorded. */
static inline void tt_sync_fast_cancel_(struct tt_sync_fast_ *f)
{
    tt_rec_end_(f->t);
}

#endif
