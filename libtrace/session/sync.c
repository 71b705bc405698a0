/* SPDX-License-Identifier: MIT */
/* The registry of synchronization objects: an object's address to its id and its count of
 * ordered operations (sync.h says what they mean; session-int.h what an entry holds).
 *
 * A fixed open-addressing table, mapped at the first operation of the session: in the
 * runtime's own region when there is one (so that a program's mappings are the same in record
 * and replay), else an anonymous mapping whose pages the kernel gives only as they are
 * touched. A slot, once it holds an address, holds it for the life of the session: an object
 * that is destroyed (tt_sync_forget) keeps its slot and gets a new id at its next operation,
 * so a lookup never meets a slot that changes address under it and needs no lock. A table
 * that filled up leaves later objects untracked; the count says so.
 */
#include <sys/mman.h>

#include "session-int.h"

#define TABLE_BYTES ((size_t)TT_SYNC_SLOTS * sizeof(struct tt_sync_obj))

_Static_assert((TT_SYNC_SLOTS & (TT_SYNC_SLOTS - 1)) == 0, "a power of two");

static struct tt_sync_obj *table_of(tt_session *s, bool make)
{
    struct tt_sync_obj *t = atomic_load_explicit(&s->sync.slots, memory_order_acquire);
    if (TT_LIKELY(t) || !make)
        return t;
    bool in_region = true;
    void *p = tt_region_map(TABLE_BYTES);
    if (!p) {
        in_region = false;
        p = mmap(NULL, TABLE_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
    }
    struct tt_sync_obj *want = NULL;
    /* acq_rel: the winner's zeroed pages are what the others see */
    if (atomic_compare_exchange_strong_explicit(&s->sync.slots, &want, p, memory_order_acq_rel,
                                                memory_order_acquire)) {
        s->sync.in_region = in_region;
        return p;
    }
    if (in_region)
        tt_region_unmap(p, TABLE_BYTES);
    else
        munmap(p, TABLE_BYTES);
    return want;
}

static struct tt_sync_obj *probe(tt_session *s, const void *addr, bool make)
{
    uintptr_t key = (uintptr_t)addr;
    if (!key)
        return NULL;
    struct tt_sync_obj *t = table_of(s, make);
    if (!t) {
        if (!make)
            return NULL; /* a lookup before the first operation: nothing there yet */
        goto full;
    }
    uint64_t i = tt_sync_slot_of_(key);
    for (unsigned n = 0; n < TT_SYNC_PROBE; n++, i = (i + 1) & (TT_SYNC_SLOTS - 1)) {
        struct tt_sync_obj *e = &t[i];
        /* acquire: pairs with the CAS below, so the slot's other fields are the table's */
        uintptr_t k = atomic_load_explicit(&e->key, memory_order_acquire);
        if (k == key)
            return e;
        if (k != 0)
            continue;
        if (!make)
            return NULL;
        if (atomic_compare_exchange_strong_explicit(&e->key, &k, key, memory_order_acq_rel,
                                                    memory_order_acquire) ||
            k == key)
            return e;
    }
    if (!make)
        return NULL;
full:
    atomic_fetch_add_explicit(&s->sync.untracked, 1, memory_order_relaxed);
    return NULL;
}

struct tt_sync_obj *tt_sync_obj_make_(tt_session *s, const void *addr)
{
    return probe(s, addr, true);
}

struct tt_sync_obj *tt_sync_obj_find_(tt_session *s, const void *addr)
{
    return probe(s, addr, false);
}

uint64_t tt_sync_obj_name_(tt_session *s, struct tt_sync_obj *e, uint32_t tid,
                           uint32_t *next_k)
{
    (void)s;
    uint64_t id = atomic_load_explicit(&e->id, memory_order_acquire);
    if (TT_LIKELY(id))
        return id;
    uint64_t mine = (uint64_t)tid << 32 | (uint64_t)(*next_k + 1);
    /* the first thread to touch the object names it; a thread that lost the race takes the
     * winner's id and keeps its own k for its next object */
    if (atomic_compare_exchange_strong_explicit(&e->id, &id, mine, memory_order_acq_rel,
                                                memory_order_acquire)) {
        (*next_k)++;
        return mine;
    }
    return id;
}

void tt_sync_table_free_(tt_session *s)
{
    struct tt_sync_obj *t = atomic_load_explicit(&s->sync.slots, memory_order_acquire);
    if (!t)
        return;
    if (s->sync.in_region)
        tt_region_unmap(t, TABLE_BYTES);
    else
        munmap(t, TABLE_BYTES);
    atomic_store_explicit(&s->sync.slots, NULL, memory_order_relaxed);
}
