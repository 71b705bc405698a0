/* SPDX-License-Identifier: MIT */
/* The real functions: what each interposer forwards to, as dlsym(RTLD_NEXT) finds it. Before
 * the constructor a call looks its function up with dlsym. The constructor reads the symbol
 * tables of the libraries after this one (base/dso.c): a function that only libc (the library
 * that defines close) can define, every other library ruling it out by its bloom filter or its
 * table, is found in libc's table (from home); the rest with dlsym. A function found from home
 * is looked up at its first call: reading a table takes no lock and allocates nothing, so that
 * is async-signal-safe. The constructor decides, for every function a signal handler may call,
 * whether it is found from home, and looks up with dlsym those that are not; the others (lazy:
 * malloc, stdio, the thread library's locks...) wait for their first call to decide too. A
 * traced /bin/true calls some thirty of the ~200: looking all of them up with dlsym in the
 * constructor cost it 38 µs, and deciding and looking up all of them in the tables some 20 µs
 * more than this (docs/PERFORMANCE.md).
 *
 * dlsym may itself allocate, before the real calloc is known: while a thread is inside dlsym,
 * its allocations are served from alloc.c's bootstrap arena (tt_pl_in_dlsym).
 */
#include "preload.h"

#include "base.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static const char *const real_names[RF_COUNT_] = {
#define X(n) #n,
    REAL_FUNCS(X)
#undef X
};

/* Written once per function (by whichever thread gets there first, all with the same value);
 * relaxed is enough: the pointer leads to code, not to data another thread published. */
_Atomic(fnptr) tt_pl_real_tab[RF_COUNT_];

/* Set while this thread is inside dlsym: its allocations come from the bootstrap arena. */
__thread int tt_pl_in_dlsym;

/* The one library whose symbol table a function is looked up in after the constructor (libc,
 * as a rule): the constructor pins it (RTLD_NODELETE, so no dlclose unmaps its table) and marks
 * the functions that no other library after this one can define (from_home: every other
 * library's bloom filter or table says no). A look-up there allocates nothing and takes no
 * lock, so it is async-signal-safe. */
static struct tt_dso home;
static atomic_int home_ready;
/* The libraries after this one as the constructor found them (3 KiB), home among them at
 * home_at: each function's answer is decided from their tables at its first look-up, once the
 * constructor has pinned them all (RTLD_NODELETE); else by the constructor for every one. */
static struct tt_dso_scope scope TT_BIG_BSS;
static uint32_t home_at;
/* Per function: 0 not decided yet, HOME found in home's table, ELSEWHERE with dlsym. Decided
 * by whichever thread gets there first, all with the same answer. */
enum { HOME = 1, ELSEWHERE = 2 };
static _Atomic uint8_t from_home[RF_COUNT_];

/* glibc's condition variables have two versions, and dlsym is asked for the current one by name
 * (below); the tables answer for unversioned look-ups only. */
static bool versioned(enum real_fn id)
{
    return strncmp(real_names[id], "pthread_cond_", 13) == 0;
}

/* The functions a signal handler may not call (POSIX's list of async-signal-safe functions has
 * none of them): the memory allocator, stdio, the name resolver, readdir, the spawners, the
 * thread library's locks, waits and threads. Each is looked up at its first call. Every other
 * function is looked up by the constructor, so that no dlsym runs later inside a handler. */
static bool lazy(enum real_fn id)
{
    switch (id) {
    case RF_malloc: case RF_calloc: case RF_realloc: case RF_free: case RF_posix_memalign:
    case RF_aligned_alloc: case RF_memalign: case RF_valloc: case RF_pvalloc:
    case RF_reallocarray: case RF_fopen: case RF_fopen64: case RF_fdopen: case RF_fwrite:
    case RF_fputc: case RF_putc: case RF_fputs: case RF_fflush: case RF_fread: case RF_getc:
    case RF_ungetc: case RF_fgetwc: case RF_getwc: case RF_getwchar: case RF_fgetwc_unlocked:
    case RF_getwc_unlocked: case RF_getwchar_unlocked: case RF_fgetws: case RF_fgetws_unlocked:
    case RF___fgetws_chk: case RF___fgetws_unlocked_chk: case RF_ungetwc: case RF_fputwc:
    case RF_putwc: case RF_putwchar: case RF_fputwc_unlocked: case RF_putwc_unlocked:
    case RF_putwchar_unlocked: case RF_fputws: case RF_fputws_unlocked: case RF_vfwprintf:
    case RF___vfwprintf_chk: case RF_vfwscanf: case RF___isoc99_vfwscanf: case RF_fwide:
    case RF_execvpe: case RF_posix_spawn: case RF_posix_spawnp: case RF_system: case RF_popen:
    case RF_getaddrinfo: case RF_getnameinfo: case RF_gethostbyname: case RF_gethostbyname2:
    case RF_gethostbyaddr: case RF_gethostbyname_r: case RF_gethostbyname2_r:
    case RF_gethostbyaddr_r: case RF_readdir: case RF_readdir64: case RF_closedir:
    case RF_arc4random: case RF_arc4random_buf: case RF_arc4random_uniform: case RF_getloadavg:
        return true;
    default:
        /* the thread library's, but for pthread_kill and sem_post, which a handler may call */
        return (strncmp(real_names[id], "pthread_", 8) == 0 && id != RF_pthread_kill) ||
               (strncmp(real_names[id], "sem_", 4) == 0 && id != RF_sem_post);
    }
}

static fnptr store(enum real_fn id, void *p)
{
    fnptr f;
    memcpy(&f, &p, sizeof f); /* ISO C has no cast from object to function pointer */
    atomic_store_explicit(&tt_pl_real_tab[id], f, memory_order_relaxed);
    return f;
}

/* Whether @id is found in home's table (home_ready): decided at the first ask. */
static bool is_home(enum real_fn id)
{
    uint8_t st = atomic_load_explicit(&from_home[id], memory_order_relaxed);
    if (!st) {
        st = !versioned(id) && tt_dso_only(&scope, real_names[id], home_at) ? HOME : ELSEWHERE;
        atomic_store_explicit(&from_home[id], st, memory_order_relaxed);
    }
    return st == HOME;
}

static fnptr lookup(enum real_fn id)
{
    void *t;
    if (atomic_load_explicit(&home_ready, memory_order_acquire) && is_home(id) &&
        tt_dso_find_in(&home, real_names[id], &t) == TT_DSO_FOUND)
        return store(id, t);
    tt_pl_in_dlsym++;
    /* glibc keeps the condition variables of before 2.3.2 under the old version: ask for the
     * current one, which is what programs link against */
    void *p = versioned(id) ? dlvsym(RTLD_NEXT, real_names[id], "GLIBC_2.3.2") : NULL;
    if (!p)
        p = dlsym(RTLD_NEXT, real_names[id]);
    tt_pl_in_dlsym--;
    return p ? store(id, p) : NULL;
}

fnptr tt_pl_real_resolve(enum real_fn id)
{
    fnptr f = lookup(id);
    if (!f) {
        /* the program called a function that no library after us defines: nothing sane to do */
        dprintf(2, "tinytrace: preload: no real %s after this library\n", real_names[id]);
        abort();
    }
    return f;
}

/* Takes @scope's object that defines the probe function as home, when the tables' answer for it
 * is dlsym's (the library was loaded at startup, where the objects after it are the scope dlsym
 * searches; one loaded by dlopen has its own) and the object can be pinned. */
static bool take_home(const struct tt_dso_scope *sc, uint32_t *at)
{
    static const enum real_fn probe[] = { RF_close, RF_read, RF_write, RF_getpid };
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        void *t;
        uint32_t k;
        if (tt_dso_find(sc, real_names[probe[i]], &t, &k) != TT_DSO_FOUND)
            continue;
        tt_pl_in_dlsym++;
        void *p = dlsym(RTLD_NEXT, real_names[probe[i]]);
        void *pin = p == t ? dlopen(sc->obj[k].name, RTLD_NOLOAD | RTLD_NODELETE | RTLD_LAZY)
                           : NULL;
        tt_pl_in_dlsym--;
        if (!pin)
            return false;
        home = sc->obj[k];
        *at = k;
        store(probe[i], t);
        return true;
    }
    return false;
}

/* Whether every library of the scope stays loaded (an object of the startup's, as a rule; one
 * an earlier constructor opened could be closed, its tables unmapped). */
static bool pin_scope(void)
{
    bool all = true;
    tt_pl_in_dlsym++;
    for (uint32_t k = 0; k < scope.n && all; k++)
        all = k == home_at ||
              dlopen(scope.obj[k].name, RTLD_NOLOAD | RTLD_NODELETE | RTLD_LAZY) != NULL;
    tt_pl_in_dlsym--;
    return all;
}

void tt_pl_real_load_all(void)
{
    /* an audit library may rebind what dlsym returns: then dlsym answers for everything */
    bool walk = !getenv("LD_AUDIT") && tt_dso_scope_after(&scope, &scope) &&
                take_home(&scope, &home_at);
    if (walk && !pin_scope()) /* the scope is not read after the constructor: decide now */
        for (int i = 0; i < RF_COUNT_; i++)
            is_home((enum real_fn)i);
    /* release: home and the scope, for a thread or a handler that sees it ready */
    atomic_store_explicit(&home_ready, walk, memory_order_release);
    /* what a handler may call and home cannot answer: with dlsym, now */
    for (int i = 0; i < RF_COUNT_; i++)
        if (!atomic_load_explicit(&tt_pl_real_tab[i], memory_order_relaxed) &&
            !(walk && (lazy((enum real_fn)i) || is_home((enum real_fn)i))))
            lookup((enum real_fn)i);
}
