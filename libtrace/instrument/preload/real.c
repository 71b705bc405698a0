/* SPDX-License-Identifier: MIT */
/* The real functions: what each interposer forwards to, found with dlsym(RTLD_NEXT) at the
 * first call (or by the constructor, which looks up all of them before the program runs).
 *
 * dlsym may itself allocate, before the real calloc is known: while a thread is inside dlsym,
 * its allocations are served from alloc.c's bootstrap arena (tt_pl_in_dlsym).
 */
#include "preload.h"

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

static fnptr lookup(enum real_fn id)
{
    tt_pl_in_dlsym++;
    /* glibc keeps the condition variables of before 2.3.2 under the old version: ask for the
     * current one, which is what programs link against */
    void *p = strncmp(real_names[id], "pthread_cond_", 13) == 0
                  ? dlvsym(RTLD_NEXT, real_names[id], "GLIBC_2.3.2")
                  : NULL;
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

void tt_pl_real_load_all(void)
{
    for (int i = 0; i < RF_COUNT_; i++)
        if (!atomic_load_explicit(&tt_pl_real_tab[i], memory_order_relaxed))
            lookup((enum real_fn)i);
}
