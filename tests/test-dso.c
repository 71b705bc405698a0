/* SPDX-License-Identifier: MIT */
/* base/dso.c against the loader: for every function libc exports, the answer of the symbol-table
 * walk must be dlsym(RTLD_NEXT)'s, or a refusal to answer (TT_DSO_ASK). The preload library finds
 * its ~200 real functions this way (preload/real.c); a wrong answer there would send a program's
 * calls to the wrong function. */
#include "harness.h"

#include "base.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

TestSuite(dso);

static struct tt_dso_scope scope; /* the objects after this test program */

/* The index in @sc of the (last) object whose name holds @part; sc->n when none does. */
static uint32_t index_of(const struct tt_dso_scope *sc, const char *part)
{
    uint32_t k = sc->n;
    for (uint32_t i = 0; i < sc->n; i++)
        if (sc->obj[i].name && strstr(sc->obj[i].name, part))
            k = i;
    return k;
}

static const struct tt_dso *libc_of(const struct tt_dso_scope *sc)
{
    uint32_t k = index_of(sc, "/libc.so");
    return k < sc->n ? &sc->obj[k] : NULL;
}

/* What libc itself answers for @name (dlsym on its handle: libc's table, not whichever object
 * comes first; a sanitizer's runtime, after the test program, defines many of libc's names). */
static void *libc_answer(const char *name, const char *version)
{
    void *h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
    cr_assert(h, "libc.so.6 is loaded: %s", dlerror());
    void *p = version ? dlvsym(h, name, version) : dlsym(h, name);
    dlclose(h);
    return p;
}

/* How many symbols @d's dynamic symbol table has: past the highest one a GNU hash bucket
 * reaches, to the end of its chain. */
static uint32_t nsyms_of(const struct tt_dso *d);

/* How many entries of @d's table are named @name (a name of several versions has more). */
static unsigned count_entries(const struct tt_dso *d, const char *name)
{
    const ElfW(Sym) *syms = d->sym;
    unsigned k = 0;
    for (uint32_t i = d->gnu[1], n = nsyms_of(d); i < n; i++)
        k += syms[i].st_shndx != SHN_UNDEF && strcmp(d->str + syms[i].st_name, name) == 0;
    return k;
}

static uint32_t nsyms_of(const struct tt_dso *d)
{
    const uint32_t nbuckets = d->gnu[0], symoffset = d->gnu[1], nbloom = d->gnu[2];
    const uint32_t *buckets = d->gnu + 4 + nbloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        last = buckets[b] > last ? buckets[b] : last;
    if (last < symoffset)
        return symoffset;
    while (!(chain[last - symoffset] & 1))
        last++;
    return last + 1;
}

Test(dso, every_function_after_the_program_is_dlsyms_answer_or_left_to_dlsym)
{
    cr_assert(tt_dso_scope_after(&scope, &scope), "the objects after the test can be searched");
    cr_assert(libc_of(&scope) != NULL, "libc is among the %u objects after the test", scope.n);
    unsigned found = 0, asked = 0, functions = 0, unversioned = 0, ifuncs = 0, versions = 0;
    for (uint32_t k = 0; k < scope.n; k++) {
        const struct tt_dso *d = &scope.obj[k];
        const ElfW(Sym) *syms = d->sym;
        const uint32_t n = nsyms_of(d);
        for (uint32_t i = d->gnu[1]; i < n; i++) {
            const ElfW(Sym) *s = &syms[i];
            const unsigned type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
            if (s->st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
                (bind != STB_GLOBAL && bind != STB_WEAK))
                continue;
            if (d->versym && (d->versym[i] & 0x8000))
                continue; /* a non-default version: no unversioned look-up returns it */
            const char *name = d->str + s->st_name;
            functions++;
            void *p = NULL;
            /* the object's own table and bloom filter know the name */
            cr_assert(tt_dso_find_in(d, name, &p) != TT_DSO_NONE, "%s: %s", name, d->name);
            uint32_t last;
            cr_assert_geq(tt_dso_maybe(&scope, name, &last), 1u, "%s: no bloom filter", name);
            int rc = tt_dso_find(&scope, name, &p, NULL);
            void *want = dlsym(RTLD_NEXT, name);
            cr_assert(rc != TT_DSO_NONE, "%s: %s defines it, the walk says no one does", name,
                      d->name);
            if (rc == TT_DSO_ASK) {
                asked++;
                continue;
            }
            found++;
            unversioned += !d->versym || (d->versym[i] & 0x7fff) < 2;
            ifuncs += type == STT_GNU_IFUNC;
            void *one = NULL; /* found with another entry of the name in the same table */
            versions += d->versym && tt_dso_find_in(d, name, &one) == TT_DSO_FOUND &&
                        count_entries(d, name) > 1;
            cr_assert(p == want, "%s: the walk found %p, dlsym(RTLD_NEXT) %p%s", name, p, want,
                      type == STT_GNU_IFUNC ? " (an IFUNC: its resolver's answer)" : "");
        }
    }
#if defined(__x86_64__) && defined(__GLIBC__)
    /* glibc's string functions on x86-64 are IFUNCs: their resolvers' answers were compared */
    cr_assert_gt(ifuncs, 10u, "%u IFUNCs answered", ifuncs);
#endif
    /* from glibc 2.36, a name of several versions is dlsym's default one: compared above */
    if (libc_of(&scope)->newest)
        cr_assert_gt(versions, 5u, "%u names of several versions answered", versions);
    else
        cr_assert_eq(versions, 0u, "before glibc 2.36, a name of several versions is asked");
    /* a sanitizer's runtime defines hundreds of libc's names before libc: those are asked */
    cr_assert_gt(functions, 1000u, "the objects after the test export %u functions", functions);
    cr_assert_gt(found, functions / 2, "the walk answered for %u of %u functions (%u left to "
                                       "dlsym)", found, functions, asked);
    /* the test harness's library has no symbol versions: that path is taken too */
    cr_assert_gt(unversioned, 0u, "no unversioned function was looked up");
}

Test(dso, an_ifunc_is_its_resolvers_answer_and_an_unknown_name_is_not_found)
{
    cr_assert(tt_dso_scope_after(&scope, &scope));
    void *p = NULL;
    /* glibc's string functions on x86-64 are IFUNCs: the symbol's value is the resolver, and
     * the answer what the resolver returns (elsewhere the loader's to give) */
#if defined(__x86_64__) && defined(__GLIBC__)
    const struct tt_dso *libc = libc_of(&scope);
    cr_assert_eq(tt_dso_find_in(libc, "strlen", &p), TT_DSO_FOUND);
    cr_assert_eq(p, libc_answer("strlen", NULL), "strlen: not libc's resolver's answer");
    if (tt_dso_only(&scope, "strlen", index_of(&scope, "/libc.so"), NULL)) {
        void *q = NULL; /* no sanitizer's strlen before it: the scope's answer is dlsym's */
        cr_assert_eq(tt_dso_find(&scope, "strlen", &q, NULL), TT_DSO_FOUND);
        cr_assert_eq(q, dlsym(RTLD_NEXT, "strlen"));
    }
    void *resolver = NULL;
    for (uint32_t i = libc->gnu[1], n = nsyms_of(libc); i < n; i++) {
        const ElfW(Sym) *s = (const ElfW(Sym) *)libc->sym + i;
        if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC && s->st_shndx != SHN_UNDEF &&
            strcmp(libc->str + s->st_name, "strlen") == 0)
            resolver = (void *)(libc->base + s->st_value);
    }
    cr_assert(resolver && resolver != p, "strlen's table entry is its resolver, not the answer");
#else
    cr_assert_eq(tt_dso_find(&scope, "strlen", &p, NULL), TT_DSO_ASK);
#endif
    cr_assert_eq(tt_dso_find(&scope, "tinytrace_no_such_function_anywhere", &p, NULL),
                 TT_DSO_NONE);
    cr_assert_eq(dlsym(RTLD_NEXT, "tinytrace_no_such_function_anywhere"), NULL);
}

Test(dso, a_name_two_objects_define_is_left_to_dlsym)
{
    /* where two objects define a name, the search order decides, so the walk must refuse:
     * here the scope holds libc's table twice */
    cr_assert(tt_dso_scope_after(&scope, &scope));
    const struct tt_dso *libc = libc_of(&scope);
    cr_assert(libc != NULL);
    static const char *const names[] = { "getloadavg", "confstr", "getpriority", "sethostid" };
    const char *name = NULL;
    void *p = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !name; i++)
        if (tt_dso_find(&scope, names[i], &p, NULL) == TT_DSO_FOUND)
            name = names[i];
    cr_assert(name != NULL, "one of libc's plain functions is found once");
    cr_assert_eq(p, dlsym(RTLD_NEXT, name));
    static struct tt_dso_scope twice;
    twice = scope;
    cr_assert_lt(twice.n, TT_DSO_MAX);
    twice.obj[twice.n++] = *libc;
    cr_assert_eq(tt_dso_find(&twice, name, &p, NULL), TT_DSO_ASK, "%s is defined twice", name);
}

extern unsigned tt_test_ifunc_resolved; /* libdso-ifunc (dso-ifunc.c) */
int tt_test_ifunc(int x);

/* An IFUNC's resolver runs only where its address is the answer: not in an object that is only
 * asked whether it defines the name (tt_dso_only's others, tt_dso_find's count of definers). */
Test(dso, an_ifuncs_resolver_runs_only_where_its_address_is_wanted)
{
    cr_assert(tt_dso_scope_after(&scope, &scope));
    const uint32_t k = index_of(&scope, "libdso-ifunc");
    cr_assert_lt(k, scope.n, "libdso-ifunc is after the test program");
    static struct tt_dso_scope twice;
    twice = scope;
    cr_assert_lt(twice.n, TT_DSO_MAX);
    twice.obj[twice.n++] = scope.obj[k];
    const unsigned before = tt_test_ifunc_resolved;
    void *p = &twice;
    cr_assert(!tt_dso_only(&twice, "tt_test_ifunc", k, &p), "defined twice: not alone");
    cr_assert_null(p);
    cr_assert_eq(tt_dso_find(&twice, "tt_test_ifunc", &p, NULL), TT_DSO_ASK);
    cr_assert_eq(tt_test_ifunc_resolved, before, "a resolver ran %u times only to count the "
                 "objects that define its name", tt_test_ifunc_resolved - before);
#if defined(__x86_64__) && defined(__GLIBC__)
    p = NULL;
    cr_assert_eq(tt_dso_find(&scope, "tt_test_ifunc", &p, NULL), TT_DSO_FOUND);
    cr_assert_eq(tt_test_ifunc_resolved, before + 1, "the one that answers runs its resolver");
    cr_assert_eq(p, dlsym(RTLD_NEXT, "tt_test_ifunc"), "dlsym's answer");
    int (*plus)(int);
    memcpy(&plus, &p, sizeof plus);
    cr_assert_eq(plus(41), 42, "the resolver's function");
    cr_assert_eq(tt_test_ifunc(1), 2); /* and the loader's binding of it */
#else
    cr_assert_eq(tt_dso_find(&scope, "tt_test_ifunc", &p, NULL), TT_DSO_ASK);
#endif
}

/* A name with two versions in one table: glibc before 2.36 answers RTLD_NEXT with the oldest
 * (its bug 14932), so there it is left to dlsym; from 2.36 dlsym takes the default version, and
 * so does the walk. posix_spawn has GLIBC_2.2.5 and GLIBC_2.15 in glibc's libc on x86-64 (as
 * clock_gettime has GLIBC_2.2.5 and GLIBC_2.17). */
Test(dso, a_name_with_two_versions_is_the_default_one_or_left_to_dlsym)
{
    cr_assert(tt_dso_scope_after(&scope, &scope));
    const struct tt_dso *libc = libc_of(&scope);
    cr_assert(libc != NULL);
    static const char *const two[] = { "posix_spawn", "clock_gettime" };
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++) {
        void *p = NULL;
        cr_assert_gt(count_entries(libc, two[i]), 1u, "%s has several versions", two[i]);
        if (libc->newest) {
            cr_assert_eq(tt_dso_find_in(libc, two[i], &p), TT_DSO_FOUND, "%s", two[i]);
            cr_assert_eq(p, libc_answer(two[i], NULL), "%s: not dlsym's version", two[i]);
            cr_assert_eq(p, libc_answer(two[i], i == 0 ? "GLIBC_2.15" : "GLIBC_2.17"),
                         "%s: not the default version", two[i]);
        } else {
            cr_assert_eq(tt_dso_find_in(libc, two[i], &p), TT_DSO_ASK, "%s", two[i]);
        }
    }
    void *p = NULL;
    /* close has one version: found, and it is dlsym's */
    cr_assert_eq(tt_dso_find_in(libc, "close", &p), TT_DSO_FOUND);
    cr_assert_eq(p, dlsym(RTLD_NEXT, "close"));
}

/* tt_dso_only: a name libc alone may define. Every other object's table must say no, the answer
 * must hold wherever the bloom filters alone said yes, and a bloom filter's false positive in
 * another object (ld.so's small filter has some for libc's names) must not make a name shared. */
Test(dso, a_name_only_one_object_defines_is_told_apart_from_a_bloom_filters_false_positive)
{
    cr_assert(tt_dso_scope_after(&scope, &scope));
    const uint32_t k = index_of(&scope, "/libc.so");
    cr_assert_lt(k, scope.n, "libc is after the test program");
    const struct tt_dso *d = &scope.obj[k];
    const ElfW(Sym) *syms = d->sym;
    const uint32_t n = nsyms_of(d);
    unsigned only = 0, by_bloom = 0, false_positive = 0;
    for (uint32_t i = d->gnu[1]; i < n; i++) {
        const ElfW(Sym) *s = &syms[i];
        if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC)
            continue;
        const char *name = d->str + s->st_name;
        uint32_t last;
        const uint32_t maybe = tt_dso_maybe(&scope, name, &last);
        const bool alone = tt_dso_only(&scope, name, k, NULL);
        bool elsewhere = false;
        for (uint32_t j = 0; j < scope.n; j++) {
            void *p;
            if (j != k && tt_dso_find_in(&scope.obj[j], name, &p) != TT_DSO_NONE)
                elsewhere = true;
        }
        cr_assert(!(alone && elsewhere), "%s: said libc's alone, another object defines it", name);
        cr_assert(alone || elsewhere, "%s: no other object defines it, not said libc's", name);
        only += alone;
        by_bloom += maybe == 1;
        false_positive += alone && maybe > 1;
    }
    cr_assert_geq(only, by_bloom, "the tables answer at least where the filters did");
    cr_assert_gt(false_positive, 0u, "no name of libc's passed another object's bloom filter: "
                                     "the tables' part was not tried");
    cr_assert_gt(only, 1000u, "libc alone defines %u of its functions", only);
    /* the same table twice in the scope: nothing is libc's alone any more */
    static struct tt_dso_scope twice;
    twice = scope;
    cr_assert_lt(twice.n, TT_DSO_MAX);
    twice.obj[twice.n++] = *d;
    cr_assert(!tt_dso_only(&twice, "close", k, NULL), "close is in two objects");
    void *found = &scope, *in_libc = NULL;
    cr_assert(tt_dso_only(&scope, "close", k, &found));
    cr_assert_eq(tt_dso_find_in(d, "close", &in_libc), TT_DSO_FOUND);
    cr_assert(found && found == in_libc, "close: tt_dso_only gave %p, libc's table %p", found,
              in_libc);
    /* of two versions: the default one from glibc 2.36, else no address (alone: a sanitizer's
     * runtime defines clock_gettime too, and then there is none either) */
    found = &scope;
    const bool alone = tt_dso_only(&scope, "clock_gettime", k, &found);
    cr_assert(alone && d->newest ? found == libc_answer("clock_gettime", NULL) : found == NULL,
              "clock_gettime: tt_dso_only gave %p (alone: %d)", found, alone);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    cr_assert(alone, "clock_gettime is libc's alone");
#endif
    found = &scope;
    cr_assert(!tt_dso_only(&twice, "close", k, &found));
    cr_assert_null(found, "not alone: no address");
    cr_assert(!tt_dso_only(&scope, "tinytrace_no_such_function_anywhere", k, &found));
    cr_assert_null(found);
    cr_log_info("libc alone: %u functions, %u of them past another filter's false positive",
                only, false_positive);
}
