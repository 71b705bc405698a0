/* SPDX-License-Identifier: MIT */
/* Checkpoints: the providers' saved state as one payload, the retained last checkpoint, and
 * the restore.
 *
 * The payload of a checkpoint event is, for each registered provider in registration order,
 * [u32 provider id][u64 state length][state bytes], little-endian (docs/FORMAT.md §8).
 *
 * A restore is two-phase so that it is never half done: every provider stages from its state in
 * the checkpoint (nothing visible yet); one that cannot makes every provider that staged cancel,
 * in reverse order, and the call fails naming it. Only when all staged does the backend record
 * (or, in replay, match) the restore event, and only when that succeeded do all commit; a
 * failed append cancels them too. The session's cp_lock makes one checkpoint or restore happen
 * at a time, so checkpoint numbers and epochs follow the order of their events: a checkpoint's
 * number is its event's arg, and the epoch a restore begins is one more than the last. The
 * replay side compares the restore with the recording's before anything stages, so a diverging
 * restore stages nothing either.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint-int.h"
#include "format.h"

int tt_checkpoint_register(tt_session *s, const tt_checkpoint_provider *p)
{
    if (!s || !p || p->struct_size < sizeof *p || !p->size || !p->save)
        return TT_E_INVAL;
    if (!s->head.active)
        return TT_OK;
    pthread_mutex_lock(&s->lock);
    int rc = TT_OK;
    for (uint32_t i = 0; i < s->nproviders; i++)
        if (s->providers[i].id == p->id)
            rc = TT_E_INVAL;
    if (rc == TT_OK && s->nproviders == sizeof s->providers / sizeof s->providers[0])
        rc = TT_E_LIMIT;
    if (rc == TT_OK)
        s->providers[s->nproviders++] = *p;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int tt_checkpoint_collect(tt_session *s, uint8_t **out, size_t *len)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->nproviders;
    tt_checkpoint_provider prov[64];
    memcpy(prov, s->providers, n * sizeof prov[0]);
    pthread_mutex_unlock(&s->lock);
    size_t sizes[64], total = 0;
    for (uint32_t i = 0; i < n; i++) {
        sizes[i] = prov[i].size(prov[i].ctx);
        if (sizes[i] > s->cfg.max_event || total + 12 + sizes[i] > s->cfg.max_event)
            return TT_E_LIMIT;
        total += 12 + sizes[i];
    }
    uint8_t *buf = malloc(total ? total : 1);
    if (!buf)
        return TT_E_NOMEM;
    uint8_t *p = buf;
    for (uint32_t i = 0; i < n; i++) {
        tt_put32(p, prov[i].id);
        tt_put64(p + 4, sizes[i]);
        if (prov[i].save(prov[i].ctx, p + 12, sizes[i]) != 0) {
            free(buf);
            return TT_E_INVAL;
        }
        p += 12 + sizes[i];
    }
    *out = buf;
    *len = total;
    return TT_OK;
}

void tt_checkpoint_retain(tt_session *s, const void *data, size_t len, tt_timepoint tp,
                          uint64_t number)
{
    s->last_cp_number = number;
    s->cp_count = number + 1;
    pthread_mutex_lock(&s->lock);
    if (len > s->last_cp_cap) {
        uint8_t *nb = realloc(s->last_cp, len);
        if (!nb) {
            pthread_mutex_unlock(&s->lock);
            return;
        }
        s->last_cp = nb;
        s->last_cp_cap = len;
    }
    if (len)
        memcpy(s->last_cp, data, len);
    s->last_cp_len = len;
    s->last_cp_tp = tp;
    s->has_cp = true;
    pthread_mutex_unlock(&s->lock);
}

int tt_checkpoint_last(tt_session *s, const void **data, size_t *len, tt_timepoint *tp)
{
    if (!s || !s->head.active)
        return TT_E_INVAL;
    pthread_mutex_lock(&s->lock);
    if (!s->has_cp) {
        pthread_mutex_unlock(&s->lock);
        return TT_E_INVAL;
    }
    *data = s->last_cp;
    *len = s->last_cp_len;
    if (tp)
        *tp = s->last_cp_tp;
    pthread_mutex_unlock(&s->lock);
    return TT_OK;
}

void tt_checkpoint_lock_(tt_session *s)
{
    pthread_mutex_lock(&s->cp_lock);
}

void tt_checkpoint_unlock_(tt_session *s)
{
    pthread_mutex_unlock(&s->cp_lock);
}

uint32_t tt_checkpoint_epoch(tt_session *s)
{
    if (!s || !s->head.active)
        return 0;
    /* acquire: pairs with the release of a restore's commit */
    return atomic_load_explicit(&s->epoch, memory_order_acquire);
}

static bool grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint64_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

void tt_checkpoint_note_(tt_session *s, uint32_t kind, uint32_t thread, uint64_t seq,
                         uint32_t site, uint64_t number, const uint8_t *payload, size_t len)
{
    if (s->cp_notes_lost)
        return;
    struct tt_cp_note n = { .kind = kind, .thread = thread, .site = site, .seq = seq,
                            .number = number, .length = payload ? len : 0,
                            .prov_at = s->cp_nprov };
    /* the providers of a checkpoint, from its payload (collect wrote it: well framed) */
    for (size_t o = 0; payload && o + 12 <= len;) {
        uint64_t sl = tt_get64(payload + o + 4);
        if (!grow((void **)&s->cp_prov, &s->cp_prov_cap, s->cp_nprov + 2, sizeof *s->cp_prov)) {
            s->cp_notes_lost = true;
            return;
        }
        s->cp_prov[s->cp_nprov++] = tt_get32(payload + o);
        s->cp_prov[s->cp_nprov++] = sl;
        n.nprov++;
        o += 12 + sl;
    }
    if (!grow((void **)&s->cp_notes, &s->cp_notes_cap, s->cp_nnotes + 1, sizeof *s->cp_notes)) {
        s->cp_notes_lost = true;
        return;
    }
    s->cp_notes[s->cp_nnotes++] = n;
}

/* ---------------------------------------------------------------- restore */

/* The state of provider @id in checkpoint payload @p, or NULL. */
static const uint8_t *state_of(const uint8_t *p, size_t len, uint32_t id, size_t *n)
{
    for (size_t o = 0; o + 12 <= len;) {
        uint64_t sl = tt_get64(p + o + 4);
        if (sl > len - o - 12)
            return NULL;
        if (tt_get32(p + o) == id) {
            *n = (size_t)sl;
            return p + o + 12;
        }
        o += 12 + (size_t)sl;
    }
    return NULL;
}

void tt_checkpoint_cancel_(struct tt_cp_staged *st)
{
    while (st->staged > 0) {
        const tt_checkpoint_provider *p = &st->prov[--st->staged];
        p->cancel(p->ctx);
    }
}

void tt_checkpoint_commit_(struct tt_cp_staged *st)
{
    for (uint32_t i = 0; i < st->staged; i++)
        st->prov[i].commit(st->prov[i].ctx);
    st->staged = 0;
}

int tt_checkpoint_stage_(tt_session *s, const uint8_t *state, size_t len, uint64_t number,
                         struct tt_cp_staged *st, tt_error_info *err)
{
    pthread_mutex_lock(&s->lock);
    st->n = s->nproviders;
    memcpy(st->prov, s->providers, st->n * sizeof st->prov[0]);
    pthread_mutex_unlock(&s->lock);
    st->staged = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        const tt_checkpoint_provider *p = &st->prov[i];
        size_t n = 0;
        const uint8_t *mine = state_of(state, len, p->id, &n);
        int rc = 0;
        if (!p->stage || !p->commit || !p->cancel)
            tt_fail(err, TT_E_RESTORE, 0, UINT64_MAX, "provider %" PRIu32 " (registered #%" PRIu32
                    ") has no stage, commit or cancel hook: it cannot be restored", p->id,
                    i + 1);
        else if (!mine)
            tt_fail(err, TT_E_RESTORE, 0, UINT64_MAX, "checkpoint %" PRIu64 " holds no state "
                    "of provider %" PRIu32 " (registered #%" PRIu32 ")", number, p->id, i + 1);
        else if ((rc = p->stage(p->ctx, mine, n)) != 0)
            tt_fail(err, TT_E_RESTORE, 0, UINT64_MAX, "provider %" PRIu32 " (registered #%" PRIu32
                    ") refused to stage checkpoint %" PRIu64 " (its stage returned %d); the %"
                    PRIu32 " provider%s staged before it cancelled", p->id, i + 1, number, rc, i,
                    i == 1 ? "" : "s");
        if (!p->stage || !p->commit || !p->cancel || !mine || rc != 0) {
            tt_checkpoint_cancel_(st);
            return TT_E_RESTORE;
        }
        st->staged++;
    }
    return TT_OK;
}

/* The retained checkpoint, if @sel names it: its number and payload. */
static bool sel_is_last(const tt_session *s, const tt_checkpoint_sel *sel)
{
    if (!s->has_cp)
        return false;
    switch (sel ? sel->which : TT_CHECKPOINT_LAST) {
    case TT_CHECKPOINT_LAST:
        return true;
    case TT_CHECKPOINT_NUMBER:
        return sel->number == s->last_cp_number;
    case TT_CHECKPOINT_AT:
        return sel->at.thread == s->last_cp_tp.thread && sel->at.seq == s->last_cp_tp.seq;
    default:
        return false;
    }
}

int tt_checkpoint_restore(tt_session *s, const tt_checkpoint_sel *sel, uint32_t site,
                          tt_error_info *err)
{
    if (!s)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_checkpoint_restore: NULL session");
    if (!s->head.active)
        return TT_OK;
    if (sel && (uint32_t)sel->which > TT_CHECKPOINT_AT)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_checkpoint_restore: which = %u is "
                       "none of LAST, NUMBER, AT", (unsigned)sel->which);
    int rc = TT_OK;
    struct tt_thread *t = tt_thread_of(s, &rc);
    if (!t)
        return tt_fail(err, rc, 0, UINT64_MAX, "tt_checkpoint_restore: %s", tt_strerror(rc));
    tt_checkpoint_lock_(s);
    struct tt_restore_op op = { .site = site };
    uint8_t *state = NULL, *own = NULL;
    size_t len = 0;
    if (sel_is_last(s, sel)) {
        /* the retained copy: nothing can replace it while cp_lock is held */
        op.number = s->last_cp_number;
        state = s->last_cp;
        len = s->last_cp_len;
    } else if (!s->has_cp && (!sel || sel->which == TT_CHECKPOINT_LAST)) {
        rc = tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "no checkpoint to restore: none was %s "
                     "yet", s->head.mode == TT_MODE_REPLAY ? "matched" : "taken");
    } else {
        tt_timepoint tp;
        rc = s->be->checkpoint_state(s, sel, &op.number, &tp, &own, &len, err);
        state = own;
    }
    struct tt_cp_staged st;
    if (rc == TT_OK)
        rc = s->be->restore_check(s, t, &op, err);
    if (rc == TT_OK)
        rc = tt_checkpoint_stage_(s, state, len, op.number, &st, err);
    if (rc == TT_OK) {
        rc = s->be->restore_apply(s, t, &op, err);
        if (rc != TT_OK)
            tt_checkpoint_cancel_(&st);
    }
    if (rc == TT_OK) {
        tt_checkpoint_commit_(&st);
        /* release: a thread that sees the new epoch sees the state the providers committed */
        atomic_store_explicit(&s->epoch, op.epoch, memory_order_release);
    }
    tt_checkpoint_unlock_(s);
    free(own);
    return rc;
}
