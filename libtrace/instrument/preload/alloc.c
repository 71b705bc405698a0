/* SPDX-License-Identifier: MIT */
/* Allocations become alloc/free events when TINYTRACE_ALLOC is set. realloc is recorded as a
 * free of the old block (when there was one) followed by an alloc of the new size, both at site
 * "realloc"; free(NULL) records nothing; a failed allocation records its size with address 0.
 * Replay compares sizes and sites. When TINYTRACE_ALLOC is not set, the malloc family is one
 * branch and a tail call to the real one. dlsym may itself allocate before the real calloc is
 * known (real.c): such requests are served from a small static arena, whose blocks are never
 * freed.
 *
 * What tinytrace allocates for itself (the guard is held: the runtime, the swapper, the
 * interposers' own work, and glibc's allocations on their behalf) comes from the region
 * (base/region.c), never from the program's heap, so that the heap is the same in record and
 * replay. free and realloc know a region block by its address, whoever frees it.
 */
#include "preload.h"

#include "base.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_alloc_fn)(size_t, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);

/* dlsym's own allocations, made before the real allocator is known. */
#define BOOT_BYTES 65536
static _Alignas(max_align_t) unsigned char boot_arena[BOOT_BYTES] TT_BIG_BSS;
/* relaxed: each fetch_add hands its caller a range of its own, which only that thread writes */
static _Atomic size_t boot_used;

static void *boot_alloc(size_t n)
{
    /* 16-byte header holding the size, so realloc can copy out of the arena */
    size_t need = ((n + 15) & ~(size_t)15) + 16;
    size_t at = atomic_fetch_add_explicit(&boot_used, need, memory_order_relaxed);
    if (at + need > BOOT_BYTES)
        return NULL;
    memcpy(boot_arena + at, &n, sizeof n);
    return boot_arena + at + 16;
}

static inline bool is_boot(const void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)boot_arena;
    return a >= b && a < b + BOOT_BYTES;
}

static inline fnptr real_alloc(enum real_fn id)
{
    fnptr f = atomic_load_explicit(&tt_pl_real_tab[id], memory_order_relaxed);
    if (UNLIKELY(!f) && !tt_pl_in_dlsym)
        f = tt_pl_real_resolve(id);
    return f; /* NULL only inside dlsym */
}

static void note_alloc(enum site k, uint64_t size, const void *p)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return;
    int e = errno;
    int rc = tt_alloc(s, tt_pl_site_id(s, k), size, p);
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
    tt_rt_guard_leave();
    errno = e;
}

static void note_free(enum site k, const void *p)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return;
    int e = errno;
    int rc = tt_free(s, tt_pl_site_id(s, k), p);
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
    tt_rt_guard_leave();
    errno = e;
}

/* An allocation of tinytrace's own: the region, once the runtime has reserved it. */
static inline bool ours(void)
{
    /* a vfork child holds the guard for the program's calls: its allocations are the
     * program's (libc's heap, as without the runtime), not the tracer's region */
    return UNLIKELY(tt_in_tracer) && !tt_pl_vforked && tt_region_active();
}

TT_EXPORT void *malloc(size_t n)
{
    if (ours())
        return tt_region_malloc(n);
    malloc_fn f = (malloc_fn)real_alloc(RF_malloc);
    if (UNLIKELY(!f))
        return boot_alloc(n);
    void *p = f(n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_malloc, n, p);
    return p;
}

TT_EXPORT void *calloc(size_t n, size_t size)
{
    if (ours())
        return tt_region_calloc(n, size);
    calloc_fn f = (calloc_fn)real_alloc(RF_calloc);
    if (UNLIKELY(!f)) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total))
            return NULL;
        return boot_alloc(total); /* static, hence zeroed */
    }
    void *p = f(n, size);
    if (UNLIKELY(tt_rt_record_allocs())) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total))
            total = SIZE_MAX;
        note_alloc(S_calloc, total, p);
    }
    return p;
}

static void *realloc_common(enum site k, void *old, size_t n, bool rec)
{
    if (UNLIKELY(tt_region_contains(old)) || (!old && ours()))
        return tt_region_realloc(old, n);
    if (UNLIKELY(is_boot(old))) {
        size_t was;
        memcpy(&was, (unsigned char *)old - 16, sizeof was);
        void *p = malloc(n);
        if (p)
            memcpy(p, old, was < n ? was : n);
        return p;
    }
    realloc_fn f = (realloc_fn)real_alloc(RF_realloc);
    if (UNLIKELY(!f))
        return boot_alloc(n);
    void *p = f(old, n);
    if (UNLIKELY(rec)) {
        if (old && (p || n == 0))
            note_free(k, old);
        if (!old || n != 0)
            note_alloc(k, n, p);
    }
    return p;
}

TT_EXPORT void *realloc(void *old, size_t n)
{
    return realloc_common(S_realloc, old, n, tt_rt_record_allocs());
}

TT_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_common(S_reallocarray, old, total, tt_rt_record_allocs());
}

TT_EXPORT void free(void *p)
{
    if (UNLIKELY(!p || is_boot(p)))
        return;
    if (UNLIKELY(tt_region_contains(p))) {
        tt_region_free(p);
        return;
    }
    free_fn f = (free_fn)real_alloc(RF_free);
    if (UNLIKELY(!f))
        return; /* inside dlsym, before free is known: leak rather than guess */
    if (UNLIKELY(tt_rt_record_allocs()))
        note_free(S_free, p);
    f(p);
}

TT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (ours()) {
        *out = tt_region_memalign(align, n);
        return *out ? 0 : ENOMEM;
    }
    posix_memalign_fn f = (posix_memalign_fn)real_alloc(RF_posix_memalign);
    if (UNLIKELY(!f))
        return ENOMEM;
    int rc = f(out, align, n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_posix_memalign, n, rc == 0 ? *out : NULL);
    return rc;
}

/* aligned_alloc, memalign, valloc and pvalloc, which the bootstrap arena does not serve: inside
 * dlsym, before the real one is known, they fail. */
#define ALLOC_UNSERVED(name, fn_type, params, args)                                            \
    TT_EXPORT void *name params                                                                \
    {                                                                                          \
        if (ours())                                                                            \
            return tt_region_memalign(ours_align, n);                                          \
        fn_type f = (fn_type)real_alloc(RF_##name);                                            \
        if (UNLIKELY(!f))                                                                      \
            return NULL;                                                                       \
        void *p = f args;                                                                      \
        if (UNLIKELY(tt_rt_record_allocs()))                                                   \
            note_alloc(S_##name, n, p);                                                        \
        return p;                                                                              \
    }
#define ours_align align
ALLOC_UNSERVED(aligned_alloc, aligned_alloc_fn, (size_t align, size_t n), (align, n))
ALLOC_UNSERVED(memalign, aligned_alloc_fn, (size_t align, size_t n), (align, n))
#undef ours_align
#define ours_align 4096
ALLOC_UNSERVED(valloc, malloc_fn, (size_t n), (n))
ALLOC_UNSERVED(pvalloc, malloc_fn, (size_t n), (n))
#undef ours_align
