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

static const struct tt_dso *libc_of(const struct tt_dso_scope *sc)
{
    for (uint32_t k = 0; k < sc->n; k++)
        if (sc->obj[k].name && strstr(sc->obj[k].name, "/libc.so"))
            return &sc->obj[k];
    return NULL;
}

/* How many symbols @d's dynamic symbol table has: past the highest one a GNU hash bucket
 * reaches, to the end of its chain. */
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
    unsigned found = 0, asked = 0, functions = 0, unversioned = 0;
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
            cr_assert(p == want, "%s: the walk found %p, dlsym(RTLD_NEXT) %p", name, p, want);
            cr_assert(type == STT_FUNC, "%s: an IFUNC's table entry is its resolver", name);
        }
    }
    /* a sanitizer's runtime defines hundreds of libc's names before libc: those are asked */
    cr_assert_gt(functions, 1000u, "the objects after the test export %u functions", functions);
    cr_assert_gt(found, functions / 2, "the walk answered for %u of %u functions (%u left to "
                                       "dlsym)", found, functions, asked);
    /* the test harness's library has no symbol versions: that path is taken too */
    cr_assert_gt(unversioned, 0u, "no unversioned function was looked up");
}

Test(dso, an_ifunc_is_left_to_dlsym_and_an_unknown_name_is_not_found)
{
    cr_assert(tt_dso_scope_after(&scope, &scope));
    void *p = NULL;
    /* glibc's string functions on x86-64 are IFUNCs: the symbol's value is the resolver */
    cr_assert_eq(tt_dso_find(&scope, "strlen", &p, NULL), TT_DSO_ASK);
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

/* A name with two versions in one table is the loader's to choose: glibc before 2.35 answers
 * RTLD_NEXT with the oldest, later ones with the default. posix_spawn has GLIBC_2.2.5 and
 * GLIBC_2.15 in glibc's libc on x86-64 (as clock_gettime has GLIBC_2.2.5 and GLIBC_2.17). */
Test(dso, a_name_with_two_versions_is_left_to_dlsym)
{
    cr_assert(tt_dso_scope_after(&scope, &scope));
    const struct tt_dso *libc = libc_of(&scope);
    cr_assert(libc != NULL);
    void *p = NULL;
    cr_assert_eq(tt_dso_find_in(libc, "posix_spawn", &p), TT_DSO_ASK);
    cr_assert_eq(tt_dso_find_in(libc, "clock_gettime", &p), TT_DSO_ASK);
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
    uint32_t k = scope.n;
    for (uint32_t i = 0; i < scope.n; i++)
        if (scope.obj[i].name && strstr(scope.obj[i].name, "/libc.so"))
            k = i;
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
        const bool alone = tt_dso_only(&scope, name, k);
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
    cr_assert(!tt_dso_only(&twice, "close", k), "close is in two objects");
    cr_assert(tt_dso_only(&scope, "close", k));
    cr_assert(!tt_dso_only(&scope, "tinytrace_no_such_function_anywhere", k));
    cr_log_info("libc alone: %u functions, %u of them past another filter's false positive",
                only, false_positive);
}
