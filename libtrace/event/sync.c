/* SPDX-License-Identifier: MIT */
/* The synchronization calls (sync.h): the object's entry from the session's registry, then
 * the backend's half of the operation. */
#include <string.h>

#include "event-int.h"

/* tt_sync_begin_ and tt_sync_end_: the calls themselves, hidden, so that the preload library's
 * interposers reach them with a direct call instead of through its PLT (the public names are
 * exported by that library too, and a call to an exported name goes through the PLT); the
 * public ones only forward. */
int tt_sync_begin_(tt_session *s, tt_sync *op, tt_sync_kind kind, uint32_t site,
                   const void *object) TT_HIDDEN;
int tt_sync_end_(tt_session *s, tt_sync *op, int result, int took) TT_HIDDEN;

int tt_sync_begin_(tt_session *s, tt_sync *op, tt_sync_kind kind, uint32_t site,
                   const void *object)
{
    op->kind = (uint32_t)kind;
    op->site = site;
    op->id = 0;
    op->seq = 0;
    op->result = 0;
    op->ordered = 0;
    op->data_len = 0;
    op->entry_ = NULL;
    op->mode = TT_MODE_OFF;
    if (!tt_active_(s))
        return TT_OK;
    if (kind < TT_SYNC_LOCK || kind > TT_SYNC_NOTE)
        return TT_E_INVAL;
    int rc = TT_OK;
    struct tt_thread *t = tt_thread_of(s, &rc);
    if (!t)
        return rc;
    struct tt_sync_obj *e = object ? tt_sync_obj_get_(s, object) : NULL;
    op->entry_ = e;
    op->mode = s->head.mode;
    /* record: no call through the backend (the indirect call is most of what is left) */
    if (TT_LIKELY(op->mode == TT_MODE_RECORD))
        return tt_rec_sync_begin(s, t, op, e);
    return s->be->sync_begin(s, t, op, e);
}

int tt_sync_end_(tt_session *s, tt_sync *op, int result, int took)
{
    if (op->mode == TT_MODE_OFF || !tt_active_(s))
        return TT_OK;
    int rc = TT_OK;
    struct tt_thread *t = tt_thread_of(s, &rc);
    if (!t)
        return rc;
    if (TT_LIKELY(op->mode == TT_MODE_RECORD))
        return tt_rec_sync_end(s, t, op, result, took);
    return s->be->sync_end(s, t, op, result, took);
}

void tt_sync_note_shared_(tt_session *s)
{
    if (tt_active_(s) && s->head.mode == TT_MODE_RECORD)
        atomic_fetch_add_explicit(&s->sync.shared, 1, memory_order_relaxed);
}

int tt_sync_begin(tt_session *s, tt_sync *op, tt_sync_kind kind, uint32_t site,
                  const void *object)
{
    return tt_sync_begin_(s, op, kind, site, object);
}

int tt_sync_end(tt_session *s, tt_sync *op, int result, int took)
{
    return tt_sync_end_(s, op, result, took);
}

uint64_t tt_sync_new_id(tt_session *s)
{
    if (!tt_active_(s) || s->head.mode != TT_MODE_RECORD)
        return 0;
    int rc;
    struct tt_thread *t = tt_thread_of(s, &rc);
    if (!t)
        return 0;
    return (uint64_t)t->id << 32 | ++t->sync_objects;
}

void tt_sync_forget(tt_session *s, const void *object)
{
    if (!tt_active_(s) || !object)
        return;
    struct tt_sync_obj *e = tt_sync_obj_find_(s, object);
    if (!e)
        return;
    atomic_store_explicit(&e->id, 0, memory_order_release);
    atomic_store_explicit(&e->seq, 0, memory_order_release);
}

void tt_sync_bind(tt_session *s, const void *object, uint64_t id)
{
    if (!tt_active_(s) || !object)
        return;
    struct tt_sync_obj *e = tt_sync_obj_get_(s, object);
    if (!e)
        return;
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&e->id, id, memory_order_release);
}

uint64_t tt_sync_lookup(tt_session *s, const void *object)
{
    if (!tt_active_(s) || !object)
        return 0;
    struct tt_sync_obj *e = tt_sync_obj_find_(s, object);
    return e ? atomic_load_explicit(&e->id, memory_order_acquire) : 0;
}
