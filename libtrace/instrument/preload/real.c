/* SPDX-License-Identifier: MIT */
/* The real functions: what each interposer forwards to, as dlsym(RTLD_NEXT) finds it. Before
 * the constructor a call looks its function up with dlsym. The constructor takes the symbol
 * tables of the objects after this one (base/dso.c); from then on each function is found at
 * its first call in those tables, which is async-signal-safe, and only what they cannot answer
 * for alone (an IFUNC, a name two objects define, glibc's versioned pthread_cond_*) goes to
 * dlsym. Of those, what a signal handler may call first the constructor looks up itself
 * (needs_dlsym), so that dlsym does not run inside a handler. A traced /bin/true calls some
 * thirty of the ~200; looking all of them up in the constructor cost it 38 µs.
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

/* The symbol tables of the objects after this library (base/dso.c), taken by the constructor
 * and read-only from then on: a lookup in them allocates nothing, takes no lock and is
 * async-signal-safe, so each function is found at its first call. */
static struct tt_dso_scope scope;
static atomic_int scope_ready;

/* glibc's condition variables have two versions, and dlsym is asked for the current one by name
 * (below); the tables answer for unversioned look-ups only. */
static bool versioned(enum real_fn id)
{
    return strncmp(real_names[id], "pthread_cond_", 13) == 0;
}

/* What only dlsym answers and a signal handler may well call first, looked up by the
 * constructor: glibc's IFUNCs among them on x86-64 (the table holds the resolver, not the
 * function). The rest dlsym must answer for (pthread_cond_*, none of which a handler may call;
 * a name that a second library defines too) are found with dlsym at their first call. glibc's
 * loader lock is recursive, so even one of those, first called from a handler that interrupted
 * dlopen, does not deadlock. */
static bool needs_dlsym(enum real_fn id)
{
    return id == RF_time || id == RF_gettimeofday;
}

static fnptr lookup(enum real_fn id)
{
    void *t;
    if (atomic_load_explicit(&scope_ready, memory_order_acquire) && !versioned(id) &&
        tt_dso_find(&scope, real_names[id], &t) == TT_DSO_FOUND) {
        fnptr f;
        memcpy(&f, &t, sizeof f);
        atomic_store_explicit(&tt_pl_real_tab[id], f, memory_order_relaxed);
        return f;
    }
    tt_pl_in_dlsym++;
    /* glibc keeps the condition variables of before 2.3.2 under the old version: ask for the
     * current one, which is what programs link against */
    void *p = versioned(id) ? dlvsym(RTLD_NEXT, real_names[id], "GLIBC_2.3.2") : NULL;
    if (!p)
        p = dlsym(RTLD_NEXT, real_names[id]);
    tt_pl_in_dlsym--;
    fnptr f = NULL;
    if (p) {
        memcpy(&f, &p, sizeof f); /* ISO C has no cast from object to function pointer */
        atomic_store_explicit(&tt_pl_real_tab[id], f, memory_order_relaxed);
    }
    return f;
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

/* The tables agree with dlsym on one function they answer for: the library was loaded at
 * startup, where the chain after it is the scope dlsym searches (a library loaded by dlopen
 * has its own). One dlsym, of the ~200 the tables spare. */
static bool scope_agrees(void)
{
    static const enum real_fn probe[] = { RF_close, RF_read, RF_write, RF_getpid };
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        void *t;
        if (tt_dso_find(&scope, real_names[probe[i]], &t) != TT_DSO_FOUND)
            continue;
        tt_pl_in_dlsym++;
        void *p = dlsym(RTLD_NEXT, real_names[probe[i]]);
        tt_pl_in_dlsym--;
        return p == t;
    }
    return false;
}

void tt_pl_real_load_all(void)
{
    if (!tt_dso_scope_after(&scope, &scope) || !scope_agrees()) {
        for (int i = 0; i < RF_COUNT_; i++) /* no tables to walk: dlsym, all of them now */
            if (!atomic_load_explicit(&tt_pl_real_tab[i], memory_order_relaxed))
                lookup((enum real_fn)i);
        return;
    }
    /* release: the scope's fields, for a thread or a handler that sees it ready */
    atomic_store_explicit(&scope_ready, 1, memory_order_release);
    /* the rest are found at their first call, from the tables; now only those dlsym must
     * answer, so that it never runs in a signal handler */
    for (int i = 0; i < RF_COUNT_; i++)
        if (!atomic_load_explicit(&tt_pl_real_tab[i], memory_order_relaxed) &&
            needs_dlsym((enum real_fn)i))
            lookup((enum real_fn)i);
}
