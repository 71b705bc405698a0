/* SPDX-License-Identifier: MIT */
/* -finstrument-functions hooks: function entry and exit of a whole program.
 *
 * Function identity must survive ASLR, position-independent executables and a rebuild that adds
 * a function, so the file never carries a raw address: an event carries the id of the
 * function's interned name ("symbol" for the main executable, "libname.so!symbol" for a
 * library, or "module+0xoffset" when there is no symbol).
 *
 * Recording: the hook stores the function's address in the raw record (TT_RAW_ADDR, format.h)
 * and nothing else: no lookup on the recording thread. The swapper maps the address to the id
 * as it encodes (resolve_addr: its own table, touched by no other thread; a name is resolved
 * and interned once per function). Replay: the name is resolved once per function on the
 * calling thread, through a lock-free open-addressing map, and looked up among the recording's
 * names, so recorded and live ids compare.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "event-int.h"
#include "filter.h"
#include "runtime.h"

#define FN_BITS 16
#define FN_CAP (1u << FN_BITS)
/* Functions the hooks name while recording, the first ones the swapper meets; the rest go
 * unrecorded (the encoder drops their events). Replay replays the functions the recording
 * named, whatever order they are called in now (see insert). Also the most entries either map
 * holds: half the table, so a probe stays short and always meets an empty slot. */
#define FN_MAX (FN_CAP / 2)

/* Record: functions named so far by either map (the swapper's, and the callers' map for the
 * rare address at or above TT_RAW_ADDR_END), so that both together stop at FN_MAX. */
static _Atomic uint32_t fn_named;

static bool claim_name(void)
{
    if (atomic_fetch_add_explicit(&fn_named, 1, memory_order_relaxed) < FN_MAX)
        return true;
    atomic_fetch_sub_explicit(&fn_named, 1, memory_order_relaxed);
    return false;
}

/* ---------------------------------------------------------------- record: the swapper's map */

struct addr_slot {
    uint64_t addr;  /* 0: empty */
    uint32_t id;
};

static struct addr_slot addr_map[FN_CAP] TT_BIG_BSS;
static uint32_t addr_used;

/* The home slot of address @a in a table of 2^@bits slots: the top bits of a multiplicative
 * hash (Fibonacci hashing). */
static inline uint32_t slot_of(uint64_t a, unsigned bits)
{
    return (uint32_t)((a >> 4) * 0x9E3779B97F4A7C15ull >> (64 - bits));
}

/* Swapper (or whoever encodes: encoding is never concurrent): address -> interned id, 0 for
 * functions past FN_MAX. Called with the encoder's guard held. */
static uint32_t resolve_addr(tt_session *s, uint64_t a)
{
    uint32_t h = slot_of(a, FN_BITS);
    for (uint32_t n = 0; n < FN_CAP; n++, h = (h + 1) & (FN_CAP - 1)) {
        if (addr_map[h].addr == a)
            return addr_map[h].id;
        if (addr_map[h].addr == 0)
            break;
    }
    if (addr_used >= FN_MAX || addr_map[h].addr != 0 || !claim_name())
        return 0;
    char name[512];
    tt_symbolize((uintptr_t)a, name, sizeof name);
    uint32_t id = 0;
    tt_intern(s, TT_OBJ_FUNCTION, name, &id);
    addr_map[h].addr = a;
    addr_map[h].id = id;
    addr_used++;
    return id;
}

void tt_hooks_attach(tt_session *s)
{
    tt_session_set_fn_resolver_(s, resolve_addr);
}

/* ---------------------------------------------------------------- replay: the callers' map */

struct fn_slot {
    _Atomic uintptr_t addr;
    _Atomic uint32_t id;
};

/* Twice the swapper's table: in replay it holds the recording's functions (up to FN_MAX) and
 * as many again that the recording never named (skipped or diverging), before it is full. */
#define CALL_CAP (2 * FN_CAP)
#define CALL_MAX (CALL_CAP / 2)
static struct fn_slot fn_map[CALL_CAP] TT_BIG_BSS;
static uint32_t fn_used;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t insert(tt_session *s, uintptr_t a)
{
    uint32_t id = 0;
    pthread_mutex_lock(&map_lock);
    uint32_t h = slot_of(a, FN_BITS + 1);
    for (uint32_t n = 0; n < CALL_CAP; n++, h = (h + 1) & (CALL_CAP - 1)) {
        uintptr_t k = atomic_load_explicit(&fn_map[h].addr, memory_order_relaxed);
        if (k == a) {
            id = atomic_load_explicit(&fn_map[h].id, memory_order_relaxed);
            break;
        }
        if (k)
            continue;
        if (fn_used >= CALL_MAX)
            break; /* the map is full: unnamed (id 0), asked again on the next call */
        if (s->head.mode == TT_MODE_RECORD && !claim_name()) {
            id = 0; /* as resolve_addr past FN_MAX: not recorded */
        } else {
            char name[512];
            tt_symbolize(a, name, sizeof name);
            tt_intern(s, TT_OBJ_FUNCTION, name, &id);
            /* Replay: a function the recording named has its id, in whatever order the calls
             * come now. One it never named gets a fresh id, so calling it is a divergence,
             * unless the recording named FN_MAX functions: then it may be one that recording
             * dropped at its cap, and it is skipped (id 0) as it was then. */
            if (s->head.mode != TT_MODE_RECORD && id > s->names.base_count &&
                s->names.base_functions >= FN_MAX)
                id = 0;
        }
        fn_used++;
        atomic_store_explicit(&fn_map[h].id, id, memory_order_relaxed);
        /* release: a reader that sees the address also sees its id */
        atomic_store_explicit(&fn_map[h].addr, a, memory_order_release);
        break;
    }
    pthread_mutex_unlock(&map_lock);
    return id;
}

/* A small direct-mapped cache in front of fn_map, shared by the threads: address << 16 | id,
 * 0 empty. fn_map has room for every function a program may call, so with thousands of them
 * nearly every probe missed the processor's cache (a replay of bench/compare's `many`, 3000
 * functions); the functions called in a while fit in 8 KiB. An entry is one word, so a reader
 * sees an old entry or a new one, each a true mapping (an address never changes its id). Ids
 * above 16 bits and 0 (unnamed: asked again next time) are not cached. */
#define CACHE_SLOTS 1024u
static _Atomic uint64_t fn_cache[CACHE_SLOTS];

static inline uint32_t fn_id(tt_session *s, void *fn)
{
    const uintptr_t a = (uintptr_t)fn;
    _Atomic uint64_t *const c = &fn_cache[(a >> 4) & (CACHE_SLOTS - 1)];
    const uint64_t e = atomic_load_explicit(c, memory_order_acquire);
    if (TT_LIKELY(e >> 16 == a && e != 0))
        return (uint32_t)(e & 0xFFFF);
    uint32_t id;
    for (uint32_t h = slot_of(a, FN_BITS + 1);; h = (h + 1) & (CALL_CAP - 1)) {
        uintptr_t k = atomic_load_explicit(&fn_map[h].addr, memory_order_acquire);
        if (TT_LIKELY(k == a)) {
            id = atomic_load_explicit(&fn_map[h].id, memory_order_relaxed);
            break;
        }
        if (k == 0) {
            id = insert(s, a);
            break;
        }
    }
    if (id != 0 && id <= 0xFFFF && a < TT_RAW_ADDR_END)
        atomic_store_explicit(c, (uint64_t)a << 16 | id, memory_order_release);
    return id;
}

void __cyg_profile_func_enter(void *fn, void *call_site);
void __cyg_profile_func_exit(void *fn, void *call_site);

/* Everything but the common case: the guard, a session not yet live, the filters, replay, a
 * function above TT_RAW_ADDR_END, a thread not in the first TLS way, a full buffer. */
__attribute__((no_instrument_function, noinline)) static void hook_slow(uint32_t kind, void *fn)
{
    if (TT_UNLIKELY(!tt_rt_guard_enter()))
        return;
    tt_session *s = tt_rt_session_hot();
    if (s && !tt_filter_skip(kind, fn)) { /* record --filter/--notrace/--depth (filter.h) */
        const uint64_t a = (uint64_t)(uintptr_t)fn;
        int rc;
        if (TT_LIKELY(s->head.mode == TT_MODE_RECORD && a < TT_RAW_ADDR_END)) {
            rc = tt_record_fn_(s, kind | TT_RAW_ADDR | (uint32_t)(a >> 32) << 16, (uint32_t)a,
                               tt_ticks());
        } else {
            uint32_t id = fn_id(s, fn);
            rc = TT_LIKELY(id) ? tt_fn_event_(s, kind, id) : TT_OK;
        }
        if (TT_UNLIKELY(rc != TT_OK))
            tt_rt_failed(rc, kind == TT_EV_ENTER ? "function entry" : "function exit");
    }
    tt_rt_guard_leave();
}

/* The common case inline and with no call, so that the hook saves no registers (with the slow
 * path inline, gcc pushed and popped six on every event): a live recording session, no filter,
 * the guard free, the thread in the first TLS way with room in its buffer. It does not take the
 * guard (two stores and the compiler fences around them were 4-7% of a recorded loop's time):
 * the append's busy flag stands for it (runtime.h, tt_rt_appending), and a call nested in the
 * append (a signal handler's) is dropped here, as the guard dropped it. Anything else goes to
 * hook_slow, which does it all again from the start: a failure of the append (a closing
 * session) fails there the same way and is reported. */
__attribute__((no_instrument_function, always_inline)) static inline void hook(uint32_t kind,
                                                                                void *fn)
{
    /* acquire: as tt_rt_session_hot */
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    const uint64_t a = (uint64_t)(uintptr_t)fn;
    if (TT_LIKELY(s != NULL && !tt_in_tracer && !tt_filter_on &&
                  s->head.mode == TT_MODE_RECORD && a < TT_RAW_ADDR_END)) {
        /* not the guard: the append's busy flag is the guard for a handler that interrupts
         * it (runtime.h, tt_rt_appending) */
        int rc = tt_record_fn_fast_(s, kind | TT_RAW_ADDR | (uint32_t)(a >> 32) << 16,
                                    (uint32_t)a, tt_ticks());
        if (TT_LIKELY(rc == TT_OK)) {
            /* a SIGCHLD held during the append is made now, at the return of the call whose
             * event it follows (the flag is read after busy's release) */
            atomic_signal_fence(memory_order_seq_cst);
            if (__builtin_expect(tt_rt_held != 0, 0))
                tt_rt_held_run_(true);
            return;
        }
        if (rc == TT_E_MODE)
            return; /* a handler's call inside another's append: not recorded, as under the
                     * guard (record_api.h, tt_rec_begin_) */
    }
    hook_slow(kind, fn);
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
