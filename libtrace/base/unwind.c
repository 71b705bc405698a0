/* SPDX-License-Identifier: MIT */
/* The only file that includes libunwind: backtraces for divergence reports and crash events. */
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

#include "base.h"

#ifdef TT_HAVE_UNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>

size_t tt_backtrace(char *buf, size_t cap, int skip)
{
    unw_context_t uc;
    unw_cursor_t cur;
    size_t n = 0;
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cur, &uc) != 0)
        return 0;
    int depth = 0;
    while (unw_step(&cur) > 0 && n + 1 < cap && depth < 64) {
        unw_word_t ip = 0, off = 0;
        char sym[256];
        unw_get_reg(&cur, UNW_REG_IP, &ip);
        if (skip > 0) {
            skip--;
            continue;
        }
        if (unw_get_proc_name(&cur, sym, sizeof sym, &off) != 0)
            strcpy(sym, "??");
        int k = snprintf(buf + n, cap - n, "#%d 0x%016lx %s+0x%lx\n", depth, (unsigned long)ip, sym,
                         (unsigned long)off);
        if (k < 0)
            break;
        n += (size_t)k < cap - n ? (size_t)k : cap - n - 1;
        depth++;
    }
    return n;
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

void tt_symbolize(uintptr_t addr, char *buf, size_t cap)
{
    Dl_info info;
    memset(&info, 0, sizeof info);
    int have = dladdr((void *)addr, &info);
    const char *module = have && info.dli_fname && info.dli_fname[0] ? base_name(info.dli_fname)
                                                                      : "?";
    /* the main executable's functions go by their bare name */
    Dl_info main_info;
    void *main_phdr = (void *)getauxval(AT_PHDR); /* lies inside the executable's mapping */
    bool in_main = have && main_phdr && dladdr(main_phdr, &main_info) &&
                   main_info.dli_fbase == info.dli_fbase;
    char sym[400];
    sym[0] = '\0';
    if (have) {
        const char *path = in_main ? "/proc/self/exe" : info.dli_fname;
        uintptr_t base = (uintptr_t)info.dli_fbase;
        if (!symtab_lookup(path, base, addr - base, sym, sizeof sym) && info.dli_sname &&
            info.dli_saddr == (void *)addr)
            snprintf(sym, sizeof sym, "%s", info.dli_sname);
    }
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
