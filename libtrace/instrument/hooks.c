/* -finstrument-functions hooks: function entry and exit of a whole program.
 *
 * Function identity must survive ASLR, position-independent executables and a rebuild that adds
 * a function, so an event never carries a raw address: it carries the id of the function's
 * interned name ("symbol" for the main executable, "libname.so!symbol" for a library, or
 * "module+0xoffset" when there is no symbol).
 *
 * The hot path only looks the address up in a lock-free open-addressing map. Recording: a new
 * address gets a provisional id (TT_FN_PROVISIONAL | index) under a lock, and the swapper
 * resolves and interns the name the first time it encodes that id — names are resolved once per
 * function, off the recording thread. Replay: the name is resolved once per function on the
 * calling thread and looked up among the recording's names, so recorded and live ids compare.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "instrument/runtime.h"

#define FN_CAP (1u << 16)

struct fn_slot {
    _Atomic uintptr_t addr;
    _Atomic uint32_t id;
};

static struct fn_slot fn_map[FN_CAP];
static uintptr_t prov_addr[FN_CAP];
static uint32_t prov_slot[FN_CAP];     /* the map slot of each provisional id */
static uint32_t prov_id[FN_CAP];       /* swapper side: resolved ids */
static uint32_t nprov;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static inline uint32_t slot_of(uintptr_t a)
{
    return (uint32_t)((a >> 4) * 0x9E3779B97F4A7C15ull >> 48) & (FN_CAP - 1);
}

/* Swapper: provisional id -> interned id. Called with the swapper's guard held. */
static uint32_t resolve(tt_session *s, uint32_t prov)
{
    uint32_t idx = prov & ~TT_FN_PROVISIONAL;
    if (idx >= FN_CAP)
        return 0;
    if (prov_id[idx])
        return prov_id[idx];
    char name[512];
    pthread_mutex_lock(&map_lock);
    uintptr_t a = prov_addr[idx];
    pthread_mutex_unlock(&map_lock);
    tt_symbolize(a, name, sizeof name);
    uint32_t id = 0;
    tt_intern(s, TT_OBJ_FUNCTION, name, &id);
    prov_id[idx] = id;
    /* from now on the hooks hand out the final id, and events of this function no longer need
     * the swapper's lookup; relaxed: either id is right, the provisional one just costs more */
    pthread_mutex_lock(&map_lock);
    uint32_t slot = prov_slot[idx];
    pthread_mutex_unlock(&map_lock);
    if (id)
        atomic_store_explicit(&fn_map[slot].id, id, memory_order_relaxed);
    return id;
}

static uint32_t insert(tt_session *s, uintptr_t a)
{
    uint32_t id = 0;
    pthread_mutex_lock(&map_lock);
    uint32_t h = slot_of(a);
    for (uint32_t n = 0; n < FN_CAP; n++, h = (h + 1) & (FN_CAP - 1)) {
        uintptr_t k = atomic_load_explicit(&fn_map[h].addr, memory_order_relaxed);
        if (k == a) {
            id = atomic_load_explicit(&fn_map[h].id, memory_order_relaxed);
            break;
        }
        if (k)
            continue;
        if (tt_session_mode(s) == TT_MODE_RECORD) {
            if (nprov >= FN_CAP - 1)
                break; /* full: the function goes untraced (id 0) */
            prov_addr[nprov] = a;
            prov_slot[nprov] = h;
            id = TT_FN_PROVISIONAL | nprov++;
            tt_session_set_fn_resolver_(s, resolve);
        } else {
            char name[512];
            tt_symbolize(a, name, sizeof name);
            tt_intern(s, TT_OBJ_FUNCTION, name, &id);
        }
        atomic_store_explicit(&fn_map[h].id, id, memory_order_relaxed);
        /* release: a reader that sees the address also sees its id */
        atomic_store_explicit(&fn_map[h].addr, a, memory_order_release);
        break;
    }
    pthread_mutex_unlock(&map_lock);
    return id;
}

static inline uint32_t fn_id(tt_session *s, void *fn)
{
    uintptr_t a = (uintptr_t)fn;
    for (uint32_t h = slot_of(a);; h = (h + 1) & (FN_CAP - 1)) {
        uintptr_t k = atomic_load_explicit(&fn_map[h].addr, memory_order_acquire);
        if (TT_LIKELY(k == a))
            return atomic_load_explicit(&fn_map[h].id, memory_order_relaxed);
        if (k == 0)
            return insert(s, a);
    }
}

void __cyg_profile_func_enter(void *fn, void *call_site);
void __cyg_profile_func_exit(void *fn, void *call_site);

__attribute__((no_instrument_function, always_inline)) static inline void hook(uint32_t kind,
                                                                                void *fn)
{
    if (TT_UNLIKELY(!tt_rt_guard_enter()))
        return;
    tt_session *s = tt_rt_session_hot();
    if (s) {
        uint32_t id = fn_id(s, fn);
        int rc = TT_LIKELY(id) ? tt_fn_event_(s, kind, id) : TT_OK;
        if (TT_UNLIKELY(rc != TT_OK))
            tt_rt_failed(rc, kind == TT_EV_ENTER ? "function entry" : "function exit");
    }
    tt_rt_guard_leave();
}

__attribute__((visibility("default"), no_instrument_function)) void
__cyg_profile_func_enter(void *fn, void *call_site)
{
    (void)call_site;
    hook(TT_EV_ENTER, fn);
}

__attribute__((visibility("default"), no_instrument_function)) void
__cyg_profile_func_exit(void *fn, void *call_site)
{
    (void)call_site;
    hook(TT_EV_EXIT, fn);
}
