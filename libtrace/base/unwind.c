/* SPDX-License-Identifier: MIT */
/* Backtraces for divergence reports and crash events, and function names. The frames come
 * from the compiler's unwinder (<unwind.h>: libgcc_eh, linked into the library and the runtime
 * statically and kept local to them, so a traced process maps no unwinding library of ours);
 * the names from each module's .symtab. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef TT_HAVE_UNWIND
#include <unwind.h>
#endif

#include "base.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- function names from a module's .symtab ----
 * dladdr sees only dynamic symbols, so a program's static functions would go by offset, and an
 * offset changes with every rebuild. Each module's file is mapped once (read-only, shared) and
 * its symbol table searched; every size and index is checked against the mapping. */

struct symmod {
    uintptr_t base;
    const uint8_t *map;
    size_t len;
    const Elf64_Sym *syms;
    size_t nsyms;
    const char *str;
    size_t strlen_;
};

static struct symmod symmods[32];
static unsigned nsymmods;
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

static void symmod_load(struct symmod *m, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    m->map = map;
    m->len = (size_t)st.st_size;
    const Elf64_Ehdr *eh = map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > m->len ||
        (size_t)eh->e_shnum > (m->len - eh->e_shoff) / sizeof(Elf64_Shdr))
        return;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(const void *)(m->map + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *ss = &sh[i], *st2 = &sh[ss->sh_link];
        if (ss->sh_offset > m->len || ss->sh_size > m->len - ss->sh_offset ||
            st2->sh_offset > m->len || st2->sh_size > m->len - st2->sh_offset)
            return;
        m->syms = (const Elf64_Sym *)(const void *)(m->map + ss->sh_offset);
        m->nsyms = ss->sh_size / sizeof(Elf64_Sym);
        m->str = (const char *)m->map + st2->sh_offset;
        m->strlen_ = st2->sh_size;
        return;
    }
}

/* The name of the function containing @off (an offset from the module's load base). */
static bool symtab_lookup(const char *path, uintptr_t base, uintptr_t off, char *out, size_t cap)
{
    bool found = false;
    pthread_mutex_lock(&sym_lock);
    struct symmod *m = NULL;
    for (unsigned i = 0; i < nsymmods; i++)
        if (symmods[i].base == base)
            m = &symmods[i];
    if (!m && nsymmods < sizeof symmods / sizeof symmods[0]) {
        m = &symmods[nsymmods++];
        memset(m, 0, sizeof *m);
        m->base = base;
        symmod_load(m, path);
    }
    if (m && m->syms) {
        /* PIE and libraries: symbol values are offsets; a fixed executable's are addresses */
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)m->map;
        uintptr_t want = eh->e_type == ET_EXEC ? off + base : off;
        for (size_t i = 0; i < m->nsyms; i++) {
            const Elf64_Sym *sy = &m->syms[i];
            if (ELF64_ST_TYPE(sy->st_info) != STT_FUNC || sy->st_value != want ||
                sy->st_name >= m->strlen_)
                continue;
            size_t n = strnlen(m->str + sy->st_name, m->strlen_ - sy->st_name);
            if (n == 0 || n >= cap)
                continue;
            memcpy(out, m->str + sy->st_name, n);
            out[n] = '\0';
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&sym_lock);
    return found;
}

/* The module that maps @addr, in *@info (false: none), whether it is the main executable, and
 * the name of the function that starts at @addr in @sym ("" when it has none): from the
 * module's .symtab, else its dynamic symbols. */
static bool symbol_at(uintptr_t addr, Dl_info *info, bool *in_main, char *sym, size_t cap)
{
    memset(info, 0, sizeof *info);
    sym[0] = '\0';
    *in_main = false;
    if (!dladdr((void *)addr, info))
        return false;
    Dl_info main_info;
    void *main_phdr = (void *)getauxval(AT_PHDR); /* lies inside the executable's mapping */
    *in_main = main_phdr && dladdr(main_phdr, &main_info) &&
               main_info.dli_fbase == info->dli_fbase;
    const char *path = *in_main ? "/proc/self/exe" : info->dli_fname;
    uintptr_t base = (uintptr_t)info->dli_fbase;
    if (!symtab_lookup(path, base, addr - base, sym, cap) && info->dli_sname &&
        info->dli_saddr == (void *)addr)
        snprintf(sym, cap, "%s", info->dli_sname);
    return true;
}

void tt_symbolize(uintptr_t addr, char *buf, size_t cap)
{
    Dl_info info;
    bool in_main;
    char sym[400];
    bool have = symbol_at(addr, &info, &in_main, sym, sizeof sym);
    const char *module = have && info.dli_fname && info.dli_fname[0] ? base_name(info.dli_fname)
                                                                      : "?";
    /* the main executable's functions go by their bare name */
    if (sym[0] && in_main)
        snprintf(buf, cap, "%s", sym);
    else if (sym[0])
        snprintf(buf, cap, "%s!%s", module, sym);
    else {
        /* no symbol: the offset in its module and, where the module has one, its build-id
         * ("prog+0x119c@5f0c..."), by which the tool finds the module's debug file */
        uint8_t id[20];
        size_t n = have ? tt_build_id_of(addr, id, sizeof id) : 0;
        int k = snprintf(buf, cap, "%s+0x%lx", module,
                         (unsigned long)(addr - (have ? (uintptr_t)info.dli_fbase : 0)));
        if (n > 0 && k > 0 && (size_t)k + 1 + 2 * n < cap) {
            buf[k++] = '@';
            for (size_t i = 0; i < n; i++, k += 2)
                snprintf(buf + k, 3, "%02x", id[i]);
        }
    }
}

#ifdef TT_HAVE_UNWIND
struct bt {
    char *buf;
    size_t cap, n;
    int skip, depth;
};

static _Unwind_Reason_Code bt_frame(struct _Unwind_Context *ctx, void *arg)
{
    struct bt *b = arg;
    int before = 0;
    uintptr_t ip = (uintptr_t)_Unwind_GetIPInfo(ctx, &before);
    if (ip == 0)
        return _URC_END_OF_STACK;
    if (b->skip > 0) {
        b->skip--;
        return _URC_NO_REASON;
    }
    if (b->depth >= 64 || b->n + 1 >= b->cap)
        return _URC_END_OF_STACK;
    /* a return address is past its call: the function is the one holding the byte before it,
     * unless this frame was interrupted (a signal frame), where ip is the instruction itself */
    uintptr_t in = before ? ip : ip - 1;
    uintptr_t start = (uintptr_t)_Unwind_FindEnclosingFunction((void *)in);
    Dl_info info;
    bool in_main;
    char sym[256];
    bool have = symbol_at(start ? start : in, &info, &in_main, sym, sizeof sym);
    if (!start || !sym[0]) {
        /* no name (a stripped library's static function, a signal trampoline): the offset
         * in its module, never the nearest exported name before it, which is another's */
        if (have && info.dli_fname && info.dli_fname[0]) {
            snprintf(sym, sizeof sym, "%s", base_name(info.dli_fname));
            start = (uintptr_t)info.dli_fbase;
        } else {
            strcpy(sym, "??");
            start = ip;
        }
    }
    int k = snprintf(b->buf + b->n, b->cap - b->n, "#%d 0x%016lx %s+0x%lx\n", b->depth,
                     (unsigned long)ip, sym, (unsigned long)(ip - start));
    if (k < 0)
        return _URC_END_OF_STACK;
    b->n += (size_t)k < b->cap - b->n ? (size_t)k : b->cap - b->n - 1;
    b->depth++;
    return _URC_NO_REASON;
}

size_t tt_backtrace(char *buf, size_t cap, int skip)
{
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    /* the first frame is this function's own */
    struct bt b = { .buf = buf, .cap = cap, .skip = skip + 1 };
    _Unwind_Backtrace(bt_frame, &b);
    return b.n;
}
#else
size_t tt_backtrace(char *buf, size_t cap, int skip)
{
    (void)skip;
    if (cap)
        buf[0] = '\0';
    return 0;
}
#endif
