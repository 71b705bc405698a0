/* SPDX-License-Identifier: MIT */
/* dlsym(RTLD_NEXT)'s answer without dlsym's cost, for the preload library's ~200 real functions.
 *
 * Every traced process looks all of them up in its constructor (preload/real.c), so that no
 * dlsym runs later inside a signal handler. One dlsym(RTLD_NEXT) costs about 180 ns here (it
 * finds the caller's object by address, takes the loader's lock, sets up error recovery), so
 * the loop was some 38 µs of a /bin/true that takes 740 µs untraced (docs/PERFORMANCE.md).
 *
 * The objects dlsym(RTLD_NEXT) searches are those after the caller in the global scope. At
 * startup, which is when the constructor runs, that is the link-map chain after the caller
 * (main, the preloads, then the needed libraries, breadth first). Each object's GNU hash table
 * answers whether it defines a name, as the loader's own lookup does. The answer is taken only
 * when it cannot differ from dlsym's, whatever the order of the objects:
 *   - exactly one object after the caller defines the name, as a function (STT_FUNC);
 *   - in that object the definition is unversioned, or is the one default (non-hidden) version,
 *     which is what an unversioned dlsym returns (glibc's check_match with
 *     DL_LOOKUP_RETURN_NEWEST).
 * Anything else (an IFUNC, whose address is its resolver's answer; a name defined in two
 * objects, where the search order decides; an object without a GNU hash table; more than
 * TT_DSO_MAX objects) is left to dlsym: TT_DSO_ASK. tests/test-dso.c holds every function of
 * libc against dlsym.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "base.h"

/* A d_ptr of the dynamic section: glibc has made it absolute, except in an object whose dynamic
 * section is read-only (the vDSO), where it is still relative to the load address. */
static uintptr_t dyn_ptr(const struct link_map *l, ElfW(Addr) p)
{
    return p < l->l_addr ? l->l_addr + p : p;
}

/* @l's tables into @d; false when it has no GNU hash table (or no symbols) to search. */
static bool dso_load(struct tt_dso *d, const struct link_map *l)
{
    memset(d, 0, sizeof *d);
    if (!l->l_ld)
        return false;
    for (const ElfW(Dyn) *e = l->l_ld; e->d_tag != DT_NULL; e++) {
        switch (e->d_tag) {
        case DT_SYMTAB:
            d->sym = (const void *)dyn_ptr(l, e->d_un.d_ptr);
            break;
        case DT_STRTAB:
            d->str = (const char *)dyn_ptr(l, e->d_un.d_ptr);
            break;
        case DT_VERSYM:
            d->versym = (const uint16_t *)dyn_ptr(l, e->d_un.d_ptr);
            break;
        case DT_GNU_HASH:
            d->gnu = (const uint32_t *)dyn_ptr(l, e->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    d->base = l->l_addr;
    d->name = l->l_name;
    /* the bloom filter's word count must be a power of two (the loader asserts the same) */
    return d->sym && d->str && d->gnu && d->gnu[0] != 0 && d->gnu[2] != 0 &&
           (d->gnu[2] & (d->gnu[2] - 1)) == 0;
}

bool tt_dso_scope_after(struct tt_dso_scope *sc, const void *self)
{
    sc->n = 0;
    Dl_info info;
    struct link_map *me = NULL;
    if (!dladdr1(self, &info, (void **)&me, RTLD_DL_LINKMAP) || !me)
        return false;
    for (const struct link_map *l = me->l_next; l; l = l->l_next) {
        /* the vDSO is on the chain but not in the scope dlsym searches */
        if (l->l_name && strncmp(l->l_name, "linux-vdso", 10) == 0)
            continue;
        if (sc->n == TT_DSO_MAX || !dso_load(&sc->obj[sc->n], l))
            return false; /* one object that cannot be searched: every answer is dlsym's */
        sc->n++;
    }
    return true;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (uint8_t)*s;
    return h;
}

/* The definition dlsym would take from @d alone: TT_DSO_FOUND (@out set), TT_DSO_NONE, or
 * TT_DSO_ASK when only the loader can say. */
static int dso_find(const struct tt_dso *d, const char *name, uint32_t h, void **out)
{
    const uint32_t nbuckets = d->gnu[0], symoffset = d->gnu[1], nbloom = d->gnu[2],
                   shift = d->gnu[3];
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(d->gnu + 4);
    const uint32_t *buckets = (const uint32_t *)(const void *)(bloom + nbloom);
    const uint32_t *chain = buckets + nbuckets;
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    const ElfW(Addr) word = bloom[(h / bits) & (nbloom - 1)];
    const ElfW(Addr) mask = (ElfW(Addr))1 << (h % bits) | (ElfW(Addr))1 << ((h >> shift) % bits);
    if ((word & mask) != mask)
        return TT_DSO_NONE;
    uint32_t i = buckets[h % nbuckets];
    if (i == 0 || i < symoffset)
        return TT_DSO_NONE;
    const ElfW(Sym) *syms = d->sym, *versioned = NULL;
    unsigned nversioned = 0;
    for (;; i++) {
        const uint32_t h2 = chain[i - symoffset];
        const ElfW(Sym) *s = &syms[i];
        if ((h | 1) == (h2 | 1) && strcmp(name, d->str + s->st_name) == 0 &&
            s->st_shndx != SHN_UNDEF) {
            const unsigned bind = ELF64_ST_BIND(s->st_info), type = ELF64_ST_TYPE(s->st_info);
            const uint16_t ver = d->versym ? d->versym[i] : 1;
            if (bind != STB_GLOBAL && bind != STB_WEAK)
                return TT_DSO_ASK;
            if ((ver & 0x7fff) >= 2) {
                if (!(ver & 0x8000)) { /* a default version; a hidden one is never taken */
                    versioned = s;
                    nversioned++;
                }
            } else {
                if (type != STT_FUNC || s->st_value == 0)
                    return TT_DSO_ASK;
                *out = (void *)(d->base + s->st_value);
                return TT_DSO_FOUND;
            }
        }
        if (h2 & 1)
            break;
    }
    if (nversioned == 0)
        return TT_DSO_NONE;
    if (nversioned > 1 || ELF64_ST_TYPE(versioned->st_info) != STT_FUNC ||
        versioned->st_value == 0)
        return TT_DSO_ASK;
    *out = (void *)(d->base + versioned->st_value);
    return TT_DSO_FOUND;
}

int tt_dso_find(const struct tt_dso_scope *sc, const char *name, void **out)
{
    const uint32_t h = gnu_hash(name);
    void *found = NULL;
    for (uint32_t k = 0; k < sc->n; k++) {
        void *p = NULL;
        int rc = dso_find(&sc->obj[k], name, h, &p);
        if (rc == TT_DSO_ASK || (rc == TT_DSO_FOUND && found))
            return TT_DSO_ASK; /* the search order would decide */
        if (rc == TT_DSO_FOUND)
            found = p;
    }
    if (!found)
        return TT_DSO_NONE;
    *out = found;
    return TT_DSO_FOUND;
}
