/* SPDX-License-Identifier: MIT */
/* The real functions: what each interposer forwards to, as dlsym(RTLD_NEXT) finds it. Before
 * the constructor a call looks its function up with dlsym. The constructor reads the symbol
 * tables of the libraries after this one (base/dso.c): a function that only libc (the library
 * that defines close) can define, every other library ruling it out by its bloom filter or its
 * table, is found in libc's table; the rest with dlsym. It looks up every function a signal
 * handler may call; the others (lazy: malloc, stdio, the thread library's locks...) wait for
 * their first call, found in libc's table (async-signal-safe, but it need not be) or with
 * dlsym. A traced /bin/true calls some thirty of the ~200; looking all of them up with dlsym
 * in the constructor cost it 38 µs. The tables are loaded by the library's first constructor
 * (life.c), so the runtime's own, which opens the session, finds its functions there.
 *
 * Not decided at the first call instead: libc's own entry may be one only dlsym answers (an
 * IFUNC but on x86-64; before glibc 2.36, a name of two versions: clock_gettime, pthread_kill;
 * base/dso.c), which a handler must not meet there; and the other libraries' tables would
 * have to stay mapped, which pinning them (RTLD_NODELETE) would keep a plugin an earlier
 * constructor opened from ever being unloaded.
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
static uint8_t from_home[RF_COUNT_];

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

static fnptr lookup(enum real_fn id)
{
    void *t;
    if (atomic_load_explicit(&home_ready, memory_order_acquire) && from_home[id] &&
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
static bool take_home(const struct tt_dso_scope *scope, uint32_t *at)
{
    static const enum real_fn probe[] = { RF_close, RF_read, RF_write, RF_getpid };
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        void *t;
        uint32_t k;
        if (tt_dso_find(scope, real_names[probe[i]], &t, &k) != TT_DSO_FOUND)
            continue;
        tt_pl_in_dlsym++;
        void *p = dlsym(RTLD_NEXT, real_names[probe[i]]);
        void *pin = p == t ? dlopen(scope->obj[k].name, RTLD_NOLOAD | RTLD_NODELETE | RTLD_LAZY)
                           : NULL;
        tt_pl_in_dlsym--;
        if (!pin)
            return false;
        home = scope->obj[k];
        *at = k;
        store(probe[i], t);
        return true;
    }
    return false;
}

void tt_pl_real_load_all(void)
{
    /* the constructor's only: not read again after it (3 KiB, off its stack) */
    static struct tt_dso_scope scope TT_BIG_BSS;
    /* an audit library may rebind what dlsym returns: then dlsym answers for everything */
    uint32_t at = 0;
    bool walk = !getenv("LD_AUDIT") && tt_dso_scope_after(&scope, &scope) &&
                take_home(&scope, &at);
    for (int i = 0; walk && i < RF_COUNT_; i++) {
        /* a lazy one is found at its first call; the others now, with the same hash */
        void *t = NULL, **now = lazy((enum real_fn)i) ? NULL : &t;
        if (!versioned((enum real_fn)i) && tt_dso_only(&scope, real_names[i], at, now)) {
            from_home[i] = 1;
            if (t)
                store((enum real_fn)i, t); /* what the look-up below would find */
        }
    }
    /* release: home and from_home, for a thread or a handler that sees it ready */
    atomic_store_explicit(&home_ready, walk, memory_order_release);
    for (int i = 0; i < RF_COUNT_; i++)
        if (!atomic_load_explicit(&tt_pl_real_tab[i], memory_order_relaxed) &&
            !(walk && lazy((enum real_fn)i)))
            lookup((enum real_fn)i);
}
