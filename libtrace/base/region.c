/* SPDX-License-Identifier: MIT */
/* The region: address space tinytrace keeps for itself, so that the program's does not move.
 *
 * With ASLR off, a program's heap and mappings land at the same addresses in two runs as long as
 * everything that maps or allocates before and around it does the same. The runtime does not:
 * a recording maps a buffer pool and starts a swapper thread, a replay allocates a reader sized
 * by the trace. So the runtime reserves one range of address space at start, of the same size in
 * both modes (PROT_NONE, MAP_NORESERVE: it costs nothing until used), and takes everything of its
 * own from there: the buffer pool, the swapper's stack, and every malloc made while the tracer's
 * guard is held (the preload library's allocator routes them here; free and realloc recognise the
 * range). The program's heap (brk) and its own mmaps never see tinytrace.
 *
 * Pages are committed with mprotect as they are handed out, the never-used ones a megabyte
 * ahead of need (untouched, a read-write page takes no memory; under strict overcommit,
 * vm.overcommit_memory=2, the megabyte is charged, and a stray write just past the last block
 * no longer faults), and given back with MADV_DONTNEED + PROT_NONE onto a free list of runs.
 * Small blocks (up to 32 KiB) come from size classes of powers of two, carved from 64 KiB
 * runs a block at a time as they are first needed (threading a new run's free list through
 * all its blocks faulted in every page of it: a short traced process paid a hundred page
 * faults for runs it barely used). The classes below a page share one run, carved in the
 * order asked, so a session's first few dozen blocks of a dozen sizes sit on a few pages, not
 * one page (and one mprotect) per class; a class of a page or more has runs of its own, so
 * that no run loses more than a small block's worth at its end. Each block has a 16-byte
 * header that says its class (or, for a large block, its run): a freed block goes to its
 * class's free list wherever it was carved. One mutex: this is the tracer's own memory, off
 * every hot path (the recording thread's buffers are allocated once).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base.h"

#define PAGE 4096u
#define RUN (64u * 1024u)           /* small blocks are carved from runs of this size */
#define MIN_SHIFT 4                  /* 16-byte blocks */
#define MAX_SHIFT 15                 /* 32 KiB blocks; larger ones get their own run */
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
#define SHARED_SHIFT 11              /* classes up to 2 KiB blocks are carved from one run */
#define SHARED (SHARED_SHIFT - MIN_SHIFT + 1) /* the classes below this index share a run */
#define HEADER 16u
#define COMMIT_AHEAD (1u << 20)     /* never-used pages made read-write ahead of need */
#define LARGE_TAG UINT64_C(0x6c61726765000000) /* "large"; low 24 bits: the run starts this many
                                                * pages before the header's page */
#define LARGE_MASK UINT64_C(0xffffffffff000000)

struct header {
    uint64_t tag;   /* class index for a small block; LARGE_TAG | 0 for a large one */
    uint64_t len;   /* large: the run's length (the run begins at the header's page) */
};

struct free_run {
    uintptr_t at;
    size_t len;
};

/* set once, before any thread but the runtime's: relaxed loads elsewhere are enough, because
 * the values are published by the pthread_create or the program start that follows them */
static _Atomic uintptr_t region_base;
static _Atomic size_t region_size;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The lock, taken with the guard held: a free of tinytrace's memory may come from the
 * program's own code (fclose of a stream the runtime made), and the preload library must not
 * take the region's lock for one of the program's (preload/sync.c). */
static int lock_take(void)
{
    int was = tt_in_tracer;
    tt_in_tracer = 1;
    pthread_mutex_lock(&lock);
    return was;
}

static void lock_give(int was)
{
    pthread_mutex_unlock(&lock);
    tt_in_tracer = was;
}
static uintptr_t top;                          /* first never-used byte (lock) */
static uintptr_t committed;                    /* pages below are read-write (lock) */
static struct free_run runs[1024] TT_BIG_BSS; /* freed runs, first fit (lock) */
static unsigned nruns;
static void *free_lists[NCLASS];               /* small blocks given back (lock) */
static uint8_t *carve[NCLASS], *carve_end[NCLASS]; /* the runs being carved (lock): [0] the
                                                    * one the classes below SHARED share,
                                                    * [c] for c >= SHARED class c's own */

/* A fork while another thread (the swapper, growing a table) holds the lock would leave the
 * child a lock no thread of it can give back: its first allocation, the environment of its
 * exec for one, would wait forever (seen: a shell's child, 1 fork in about 4000 of a loop of
 * /bin/true under `tinytrace record`). So fork takes the lock first and both sides give it back.
 * A raw clone without CLONE_THREAD runs no fork handlers and is not covered. */
static int fork_was;

static void fork_prepare(void)
{
    fork_was = lock_take();
}

static void fork_after(void)
{
    lock_give(fork_was);
}

bool tt_region_init(size_t size)
{
    if (atomic_load_explicit(&region_base, memory_order_relaxed))
        return true;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    pthread_atfork(fork_prepare, fork_after, fork_after);
    top = committed = (uintptr_t)p;
    atomic_store_explicit(&region_size, size, memory_order_relaxed);
    atomic_store_explicit(&region_base, (uintptr_t)p, memory_order_release);
    return true;
}

bool tt_region_active(void)
{
    return atomic_load_explicit(&region_base, memory_order_relaxed) != 0;
}

bool tt_region_contains(const void *p)
{
    uintptr_t b = atomic_load_explicit(&region_base, memory_order_relaxed);
    return b && (uintptr_t)p - b < atomic_load_explicit(&region_size, memory_order_relaxed);
}

/* @len bytes (a multiple of PAGE) of committed, zeroed pages; under the lock. */
static void *pages_locked(size_t len)
{
    for (unsigned i = 0; i < nruns; i++) {
        if (runs[i].len < len)
            continue;
        uintptr_t at = runs[i].at;
        runs[i].at += len;
        runs[i].len -= len;
        if (!runs[i].len)
            runs[i] = runs[--nruns];
        if (mprotect((void *)at, len, PROT_READ | PROT_WRITE) != 0)
            return NULL;
        return (void *)at; /* zero: it was given back with MADV_DONTNEED */
    }
    uintptr_t b = atomic_load_explicit(&region_base, memory_order_relaxed);
    size_t size = atomic_load_explicit(&region_size, memory_order_relaxed);
    if (len > size - (top - b))
        return NULL;
    uintptr_t at = top;
    if (at + len > committed) {
        /* at least COMMIT_AHEAD past what is asked, within the region: a session's first
         * dozen blocks and its buffer pool take two mprotects, not one each */
        uintptr_t end = at + len, left = b + size - end;
        end += left < COMMIT_AHEAD ? left : COMMIT_AHEAD;
        if (mprotect((void *)committed, end - committed, PROT_READ | PROT_WRITE) != 0)
            return NULL;
        committed = end;
    }
    top += len;
    return (void *)at;
}

static void unpages_locked(void *p, size_t len)
{
    madvise(p, len, MADV_DONTNEED);
    mprotect(p, len, PROT_NONE);
    if (nruns < sizeof runs / sizeof runs[0])
        runs[nruns++] = (struct free_run){ (uintptr_t)p, len };
    /* else the run is lost to reuse, not to the program: it stays reserved */
}

static size_t round_pages(size_t n)
{
    return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

void *tt_region_map(size_t len)
{
    if (!tt_region_active() || len == 0 || len > SIZE_MAX - PAGE)
        return NULL;
    int was = lock_take();
    void *p = pages_locked(round_pages(len));
    lock_give(was);
    return p;
}

void tt_region_unmap(void *p, size_t len)
{
    if (!p || !len)
        return;
    int was = lock_take();
    unpages_locked(p, round_pages(len));
    lock_give(was);
}

static unsigned class_of(size_t n)
{
    unsigned c = 0;
    while (((size_t)1 << (c + MIN_SHIFT)) < n)
        c++;
    return c;
}

/* A block of @n bytes; *@fresh says whether its bytes after the header are still the zeros of
 * their pages (never used since pages_locked), which calloc then need not clear. */
static void *region_alloc(size_t n, bool *fresh)
{
    if (n > SIZE_MAX - RUN)
        return NULL;
    size_t need = n + HEADER;
    struct header *h;
    *fresh = true;
    int was = lock_take();
    if (need <= ((size_t)1 << MAX_SHIFT)) {
        unsigned c = class_of(need);
        size_t bs = (size_t)1 << (c + MIN_SHIFT);
        h = free_lists[c];
        if (h) {
            free_lists[c] = *(void **)(void *)h;
            *fresh = false;
        } else {
            unsigned r = c < SHARED ? 0 : c;
            if (!carve[r] || (size_t)(carve_end[r] - carve[r]) < bs) {
                carve[r] = pages_locked(RUN);
                carve_end[r] = carve[r] ? carve[r] + RUN : NULL;
            }
            h = (struct header *)(void *)carve[r];
            if (h)
                carve[r] += bs;
        }
        if (h) {
            h->tag = c;
            h->len = bs;
        }
    } else {
        size_t len = round_pages(need);
        h = pages_locked(len);
        if (h) {
            h->tag = LARGE_TAG;
            h->len = len;
        }
    }
    lock_give(was);
    return h ? (uint8_t *)h + HEADER : NULL;
}

void *tt_region_malloc(size_t n)
{
    bool fresh;
    return region_alloc(n, &fresh);
}

size_t tt_region_usable(const void *p)
{
    const struct header *h = (const struct header *)((const uint8_t *)p - HEADER);
    if ((h->tag & LARGE_MASK) == LARGE_TAG) {
        uintptr_t hpage = (uintptr_t)h & ~(uintptr_t)(PAGE - 1);
        uintptr_t run = hpage - (h->tag & ~LARGE_MASK) * PAGE;
        return run + h->len - (uintptr_t)p;
    }
    return h->len - HEADER;
}

void tt_region_free(void *p)
{
    if (!p)
        return;
    struct header *h = (struct header *)((uint8_t *)p - HEADER);
    int was = lock_take();
    if ((h->tag & LARGE_MASK) == LARGE_TAG) {
        uintptr_t hpage = (uintptr_t)h & ~(uintptr_t)(PAGE - 1);
        unpages_locked((void *)(hpage - (h->tag & ~LARGE_MASK) * PAGE), h->len);
    } else if (h->tag < NCLASS) {
        unsigned c = (unsigned)h->tag;
        *(void **)(void *)h = free_lists[c];
        free_lists[c] = h;
    }
    lock_give(was);
}

void *tt_region_calloc(size_t n, size_t k)
{
    if (k && n > SIZE_MAX / k)
        return NULL;
    bool fresh;
    void *p = region_alloc(n * k, &fresh);
    if (p && !fresh)
        memset(p, 0, n * k); /* a reused small block; fresh pages are zero untouched */
    return p;
}

void *tt_region_realloc(void *p, size_t n)
{
    if (!p)
        return tt_region_malloc(n);
    size_t have = tt_region_usable(p);
    if (n <= have)
        return p;
    void *q = tt_region_malloc(n);
    if (q) {
        memcpy(q, p, have);
        tt_region_free(p);
    }
    return q;
}

void *tt_region_memalign(size_t align, size_t n)
{
    if (align <= HEADER)
        return tt_region_malloc(n);
    if (align & (align - 1) || align > RUN || n > SIZE_MAX - 2 * (size_t)RUN)
        return NULL;
    /* a run of its own: the user block at the first @align boundary with room for the header
     * before it (on the same page as the block when @align is below a page: a thread's 256
     * bytes at 64 took two pages when the block began a page into its run), and in the
     * header's tag how many pages the run begins before the header's page (free() needs the
     * run's start) */
    size_t len = round_pages(n + HEADER + align);
    int was = lock_take();
    uint8_t *run = pages_locked(len);
    lock_give(was);
    if (!run)
        return NULL;
    uintptr_t user = ((uintptr_t)run + HEADER + align - 1) & ~(uintptr_t)(align - 1);
    struct header *h = (struct header *)(user - HEADER);
    uintptr_t hpage = (uintptr_t)h & ~(uintptr_t)(PAGE - 1);
    h->tag = LARGE_TAG | ((hpage - (uintptr_t)run) / PAGE);
    h->len = len;
    return (void *)user;
}
