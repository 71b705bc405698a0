/* Checkpoints: the providers' saved state as one payload, and the retained last checkpoint.
 *
 * The payload of a checkpoint event is, for each registered provider in registration order,
 * [u32 provider id][u64 state length][state bytes], little-endian (docs/FORMAT.md). */
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

void tt_checkpoint_retain(tt_session *s, const void *data, size_t len, tt_timepoint tp)
{
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
