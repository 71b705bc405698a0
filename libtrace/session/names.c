/* SPDX-License-Identifier: MIT */
/* The intern table: names (functions, sites, threads, ...) stored once, referenced by id.
 *
 * An arena of [kind][length][bytes][NUL] records in id order, an offset per id, and an
 * open-addressing hash of (kind, name) to id. In replay mode the recording's names are interned
 * first, in the recording's order, so a live name gets the id the recording gave it. The arena
 * may move when it grows: readers on other threads copy a name under the session lock
 * (tt_names_copy) instead of keeping a pointer into it.
 */
#include <stdlib.h>
#include <string.h>

#include "session-int.h"

static uint64_t name_hash(uint8_t kind, const char *name, size_t len)
{
    return tt_hash64(name, len, kind);
}

static int grow_slots(struct tt_intern_table *t)
{
    uint32_t ncap = t->slots_cap ? t->slots_cap * 2 : 256;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return TT_E_NOMEM;
    for (uint32_t id = 1; id <= t->count; id++) {
        uint8_t kind = 0;
        const char *nm = NULL;
        uint32_t len = 0;
        tt_names_get(t, id, &kind, &nm, &len);
        uint64_t h = name_hash(kind, nm, len);
        for (uint32_t i = (uint32_t)h & (ncap - 1);; i = (i + 1) & (ncap - 1)) {
            if (!ns[i]) {
                ns[i] = id;
                break;
            }
        }
    }
    free(t->slots);
    t->slots = ns;
    t->slots_cap = ncap;
    return TT_OK;
}

int tt_names_get(const struct tt_intern_table *t, uint32_t id, uint8_t *kind, const char **name,
                 uint32_t *len)
{
    if (id == 0 || id > t->count)
        return TT_E_INVAL;
    const uint8_t *p = t->arena + t->offsets[id - 1];
    *kind = p[0];
    memcpy(len, p + 1, 4);
    *name = (const char *)p + 5;
    return TT_OK;
}

int tt_names_intern(struct tt_intern_table *t, uint8_t kind, const char *name, size_t len,
                    uint64_t limit, uint32_t *id)
{
    if (len > 65535)
        return TT_E_LIMIT;
    if ((uint64_t)(t->count + 1) * 2 > t->slots_cap && grow_slots(t) != TT_OK)
        return TT_E_NOMEM;
    uint64_t h = name_hash(kind, name, len);
    uint32_t i = (uint32_t)h & (t->slots_cap - 1);
    for (;; i = (i + 1) & (t->slots_cap - 1)) {
        uint32_t cand = t->slots[i];
        if (!cand)
            break;
        uint8_t k = 0;
        const char *nm = NULL;
        uint32_t l = 0;
        tt_names_get(t, cand, &k, &nm, &l);
        if (k == kind && l == len && memcmp(nm, name, len) == 0) {
            *id = cand;
            return TT_OK;
        }
    }
    uint64_t need = 5 + len + 1; /* names stay NUL-terminated in the arena */
    if (t->arena_len + need > limit)
        return TT_E_LIMIT;
    if (t->arena_len + need > t->arena_cap) {
        uint64_t ncap = t->arena_cap ? t->arena_cap * 2 : 4096;
        while (ncap < t->arena_len + need)
            ncap *= 2;
        if (ncap > limit)
            ncap = limit;
        uint8_t *na = realloc(t->arena, ncap);
        if (!na)
            return TT_E_NOMEM;
        t->arena = na;
        t->arena_cap = ncap;
    }
    if (t->count == t->offsets_cap) {
        uint32_t ncap = t->offsets_cap ? t->offsets_cap * 2 : 256;
        uint32_t *no = realloc(t->offsets, ncap * sizeof *no);
        if (!no)
            return TT_E_NOMEM;
        t->offsets = no;
        t->offsets_cap = ncap;
    }
    uint8_t *p = t->arena + t->arena_len;
    uint32_t l32 = (uint32_t)len;
    p[0] = kind;
    memcpy(p + 1, &l32, 4);
    memcpy(p + 5, name, len);
    p[5 + len] = 0;
    t->offsets[t->count] = (uint32_t)t->arena_len;
    t->arena_len += need;
    t->count++;
    t->slots[i] = t->count;
    *id = t->count;
    return TT_OK;
}

void tt_names_free(struct tt_intern_table *t)
{
    free(t->arena);
    free(t->offsets);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

int tt_intern(tt_session *s, tt_object_kind kind, const char *name, uint32_t *id)
{
    if (!id)
        return TT_E_INVAL;
    *id = 0;
    if (!s || !name || kind < 1 || kind > TT_OBJ_KIND_MAX)
        return TT_E_INVAL;
    if (!s->head.active)
        return TT_OK;
    pthread_mutex_lock(&s->lock);
    int rc = tt_names_intern(&s->names, (uint8_t)kind, name, strlen(name), s->cfg.object_bytes, id);
    pthread_mutex_unlock(&s->lock);
    return rc;
}


int tt_names_copy(tt_session *s, uint32_t id, char *buf, size_t cap)
{
    uint8_t kind;
    const char *nm;
    uint32_t len;
    pthread_mutex_lock(&s->lock);
    int rc = tt_names_get(&s->names, id, &kind, &nm, &len);
    if (rc == TT_OK && cap) {
        size_t n = len < cap - 1 ? len : cap - 1;
        memcpy(buf, nm, n);
        buf[n] = '\0';
    }
    pthread_mutex_unlock(&s->lock);
    return rc == TT_OK ? (int)len : -1;
}
