/* SPDX-License-Identifier: MIT */
/* dlsym(RTLD_NEXT)'s answer without dlsym's cost, for the preload library's ~200 real functions
 * (preload/real.c). One dlsym(RTLD_NEXT) costs about 180 ns here (it finds the caller's object
 * by address, takes the loader's lock, sets up error recovery): looking all of them up in the
 * constructor was some 38 µs of a /bin/true that takes 740 µs untraced (docs/PERFORMANCE.md).
 *
 * The objects dlsym(RTLD_NEXT) searches are those after the caller in the global scope. At
 * startup, which is when the constructor runs, they are the objects loaded after the caller
 * (main, the preloads, then the needed libraries, breadth first), in dl_iterate_phdr's order.
 * Each object's GNU hash table answers whether it defines a name, as the loader's own lookup
 * does. The answer is taken only when it cannot differ from dlsym's, whatever the order of the
 * objects:
 *   - exactly one object of the scope defines the name, as a function, visible;
 *   - that object's table has one entry of that name, unversioned or of a default (non-hidden)
 *     version: then every glibc's unversioned dlsym returns it; or, from glibc 2.36 on, several
 *     entries of which exactly one is of a default version and none unversioned: dlsym returns
 *     that one (glibc's bug 14932: a glibc before 2.36 answers RTLD_NEXT with the oldest, and
 *     there such a name is left to dlsym);
 *   - a function (STT_FUNC) is its address; an IFUNC (STT_GNU_IFUNC) is what its resolver
 *     returns, and on x86-64 glibc's loader calls a resolver without arguments, which this
 *     does too (elsewhere an IFUNC is left to dlsym).
 * Anything else (a name defined in two objects, where the search order decides; an object
 * without a GNU hash table; more than TT_DSO_MAX objects) is left to dlsym: TT_DSO_ASK. The
 * caller decides which objects may be read later (preload/real.c pins the one it reads).
 * tests/test-dso.c holds every function of the objects after the test program against dlsym.
 * In the preload library's constructor, the clock's functions (two versions, or IFUNCs) were
 * the only eager ones left to dlsym: seven calls, some 8 µs of a traced /bin/true.
 */
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif

#include "base.h"

/* Whether this glibc's dlsym(RTLD_NEXT) returns a name's default version (2.36 and later). */
static bool glibc_newest(void)
{
#ifdef __GLIBC__
    static int known; /* 1: no, 2: yes; the constructor's, before any other thread */
    if (!known) {
        const char *v = gnu_get_libc_version();
        char *end;
        long major = strtol(v, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
        known = major > 2 || (major == 2 && minor >= 36) ? 2 : 1;
    }
    return known == 2;
#else
    return false;
#endif
}

/* The object of @info's tables into @d; false when it has none to search (no dynamic section,
 * no GNU hash table). glibc makes the dynamic section's pointers absolute where the section is
 * writable (dl_relocate_ld); a read-only one keeps them relative to the load address. */
static bool dso_load(struct tt_dso *d, const struct dl_phdr_info *info)
{
    memset(d, 0, sizeof *d);
    const ElfW(Dyn) *dyn = NULL;
    bool relocated = false;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            relocated = (info->dlpi_phdr[i].p_flags & PF_W) != 0;
        }
    if (!dyn)
        return false;
    const uintptr_t add = relocated ? 0 : info->dlpi_addr;
    for (const ElfW(Dyn) *e = dyn; e->d_tag != DT_NULL; e++) {
        switch (e->d_tag) {
        case DT_SYMTAB:
            d->sym = (const void *)(add + e->d_un.d_ptr);
            break;
        case DT_STRTAB:
            d->str = (const char *)(add + e->d_un.d_ptr);
            break;
        case DT_VERSYM:
            d->versym = (const uint16_t *)(add + e->d_un.d_ptr);
            break;
        case DT_GNU_HASH:
            d->gnu = (const uint32_t *)(add + e->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    d->base = info->dlpi_addr;
    d->name = info->dlpi_name;
    d->newest = glibc_newest();
    /* the bloom filter's word count must be a power of two (the loader asserts the same) */
    return d->sym && d->str && d->gnu && d->gnu[0] != 0 && d->gnu[2] != 0 &&
           (d->gnu[2] & (d->gnu[2] - 1)) == 0;
}

struct scope_walk {
    struct tt_dso_scope *sc;
    uintptr_t self;
    int state; /* 0: before the object holding self, 1: after it, -1: failed */
};

static bool holds(const struct dl_phdr_info *info, uintptr_t a)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz)
            return true;
    }
    return false;
}

static int scope_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct scope_walk *w = data;
    (void)size;
    if (w->state == 0) {
        if (holds(info, w->self))
            w->state = 1;
        return 0;
    }
    /* the vDSO is an object of the process but not of the scope dlsym searches */
    if (info->dlpi_name && strncmp(info->dlpi_name, "linux-vdso", 10) == 0)
        return 0;
    if (w->sc->n == TT_DSO_MAX || !dso_load(&w->sc->obj[w->sc->n], info)) {
        w->state = -1; /* one object that cannot be searched: every answer is dlsym's */
        return 1;
    }
    w->sc->n++;
    return 0;
}

bool tt_dso_scope_after(struct tt_dso_scope *sc, const void *self)
{
    sc->n = 0;
    struct scope_walk w = { sc, (uintptr_t)self, 0 };
    dl_iterate_phdr(scope_cb, &w);
    return w.state == 1;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (uint8_t)*s;
    return h;
}

/* Whether @d's bloom filter lets @d define the name hashed @h (no: it does not; yes: it may). */
static bool dso_maybe(const struct tt_dso *d, uint32_t h)
{
    const uint32_t nbloom = d->gnu[2], shift = d->gnu[3];
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(d->gnu + 4);
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    const ElfW(Addr) word = bloom[(h / bits) & (nbloom - 1)];
    const ElfW(Addr) mask = (ElfW(Addr))1 << (h % bits) | (ElfW(Addr))1 << ((h >> shift) % bits);
    return (word & mask) == mask;
}

/* The definition dlsym would take from @d alone: TT_DSO_FOUND (@out set, unless NULL: then
 * an IFUNC's resolver is not run), TT_DSO_NONE, or TT_DSO_ASK when only the loader can say. */
static int dso_find(const struct tt_dso *d, const char *name, uint32_t h, void **out)
{
    if (!dso_maybe(d, h))
        return TT_DSO_NONE;
    const uint32_t nbuckets = d->gnu[0], symoffset = d->gnu[1], nbloom = d->gnu[2];
    const uint32_t *buckets = d->gnu + 4 + nbloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t i = buckets[h % nbuckets];
    if (i == 0 || i < symoffset)
        return TT_DSO_NONE;
    const ElfW(Sym) *syms = d->sym, *found = NULL, *deflt = NULL;
    unsigned entries = 0, defaults = 0, plain = 0;
    for (;; i++) {
        const uint32_t h2 = chain[i - symoffset];
        const ElfW(Sym) *s = &syms[i];
        if ((h | 1) == (h2 | 1) && s->st_shndx != SHN_UNDEF &&
            strcmp(name, d->str + s->st_name) == 0) {
            entries++;
            found = s;
            const uint16_t v = d->versym ? d->versym[i] : 1;
            if ((v & 0x7fff) < 2)
                plain++; /* unversioned (local or global base) */
            else if (!(v & 0x8000)) {
                defaults++; /* a default version, name@@V */
                deflt = s;
            }
        }
        if (h2 & 1)
            break;
    }
    if (entries == 0)
        return TT_DSO_NONE;
    /* one entry, not hidden (a hidden one some glibc take for RTLD_NEXT); or several, of which
     * dlsym takes the default version, from glibc 2.36 on */
    if (entries > 1 && d->newest && plain == 0 && defaults == 1)
        found = deflt;
    else if (entries > 1 || (d->versym && (d->versym[found - syms] & 0x8000)))
        return TT_DSO_ASK;
    const unsigned bind = ELF64_ST_BIND(found->st_info), type = ELF64_ST_TYPE(found->st_info);
    const unsigned vis = ELF64_ST_VISIBILITY(found->st_other);
    if ((bind != STB_GLOBAL && bind != STB_WEAK) || found->st_value == 0 ||
        vis == STV_HIDDEN || vis == STV_INTERNAL)
        return TT_DSO_ASK;
    uintptr_t at = d->base + found->st_value;
    if (type == STT_GNU_IFUNC) {
        if (!out)
            return TT_DSO_FOUND; /* defined: whether, not where (no resolver of another's run) */
#if defined(__x86_64__) && defined(__GLIBC__)
        uintptr_t (*resolver)(void);
        memcpy(&resolver, &at, sizeof resolver); /* ISO C: no cast from object to function */
        at = resolver(); /* what glibc's loader does on x86-64 (elf_ifunc_invoke) */
        if (!at)
            return TT_DSO_ASK;
#else
        return TT_DSO_ASK;
#endif
    } else if (type != STT_FUNC) {
        return TT_DSO_ASK;
    }
    if (out)
        *out = (void *)at;
    return TT_DSO_FOUND;
}

int tt_dso_find_in(const struct tt_dso *d, const char *name, void **out)
{
    return dso_find(d, name, gnu_hash(name), out);
}

uint32_t tt_dso_maybe(const struct tt_dso_scope *sc, const char *name, uint32_t *which)
{
    const uint32_t h = gnu_hash(name);
    uint32_t n = 0;
    for (uint32_t k = 0; k < sc->n; k++)
        if (dso_maybe(&sc->obj[k], h)) {
            n++;
            *which = k;
        }
    return n;
}

bool tt_dso_only(const struct tt_dso_scope *sc, const char *name, uint32_t k, void **out)
{
    const uint32_t h = gnu_hash(name);
    if (out)
        *out = NULL;
    if (k >= sc->n || !dso_maybe(&sc->obj[k], h))
        return false;
    /* dso_find asks the bloom filter first: most objects rule a name out there */
    for (uint32_t i = 0; i < sc->n; i++)
        if (i != k && dso_find(&sc->obj[i], name, h, NULL) != TT_DSO_NONE)
            return false;
    void *p;
    if (out && dso_find(&sc->obj[k], name, h, &p) == TT_DSO_FOUND)
        *out = p; /* with the hash made once: the constructor's ~200 names each want both */
    return true;
}

int tt_dso_find(const struct tt_dso_scope *sc, const char *name, void **out, uint32_t *which)
{
    const uint32_t h = gnu_hash(name);
    uint32_t at = sc->n;
    /* which objects define it, first (no IFUNC's resolver run), then its address in the one */
    for (uint32_t k = 0; k < sc->n; k++) {
        int rc = dso_find(&sc->obj[k], name, h, NULL);
        if (rc == TT_DSO_ASK || (rc == TT_DSO_FOUND && at < sc->n))
            return TT_DSO_ASK; /* the search order would decide */
        if (rc == TT_DSO_FOUND)
            at = k;
    }
    if (at == sc->n)
        return TT_DSO_NONE;
    int rc = dso_find(&sc->obj[at], name, h, out);
    if (rc == TT_DSO_FOUND && which)
        *which = at;
    return rc;
}
