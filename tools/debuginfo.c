/* SPDX-License-Identifier: MIT */
/* tinytrace — function names and source lines from a program's debug information (libdw).
 *
 * A stripped program has no symbol table, so the runtime records its functions as
 * "prog+0x119c@BUILDID" (the offset in the module, its GNU build-id). The tool finds the debug
 * information the way debuggers do, through elfutils' libdwfl: the program's .gnu_debuglink
 * (beside the program, in its .debug/ directory, or under /usr/lib/debug with the program's
 * directory), or the build-id path /usr/lib/debug/.build-id/xx/yyyy.debug (the directories:
 * TINYTRACE_DEBUGINFO_PATH, below); an unstripped program
 * is its own debug file. From there a function's name (the symbol at that offset) and its
 * file:line (where DWARF declares the function, else the line table at its entry) for any
 * function, named or not.
 *
 * The program is the one the trace names (its recorded execve path, or argv[0] in its recorded
 * directory), and it is used only when its build-id is the recording's: a rebuilt program would
 * give the names of other code. libdw is the tool's alone: the library and the runtime never
 * link it. Each program is opened once per process (at most TOOL_DBG_MAX), on first use.
 */
#include "debuginfo.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL_DBG_MAX 4

struct sym {
    const char *name;
    Dwarf_Addr addr;
};

struct tool_dbg {
    char path[4096];
    int ok;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    Dwarf_Addr low;      /* the module's lowest address: an offset's base */
    struct sym *syms;    /* functions by name, for the line of a named function */
    size_t nsyms;
};

static struct tool_dbg dbgs[TOOL_DBG_MAX];
/* Where libdwfl looks: TINYTRACE_DEBUGINFO_PATH in libdwfl's syntax (directories separated by
 * ':'; a relative one is taken from the program's directory, an absolute one also holds
 * .build-id/), or, NULL, libdwfl's default ":.debug:/usr/lib/debug". */
static char *debuginfo_path;

static const Dwfl_Callbacks callbacks = {
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct sym *)a)->name, ((const struct sym *)b)->name);
}

static void load_symbols(struct tool_dbg *d)
{
    int n = dwfl_module_getsymtab(d->mod);
    if (n <= 0 || (d->syms = calloc((size_t)n, sizeof *d->syms)) == NULL)
        return;
    for (int i = 0; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(d->mod, i, &sym, &addr, NULL, NULL, NULL);
        if (name != NULL && *name && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
            sym.st_shndx != SHN_UNDEF)
            d->syms[d->nsyms++] = (struct sym){name, addr};
    }
    qsort(d->syms, d->nsyms, sizeof *d->syms, by_name);
}

tool_dbg *tool_dbg_open(const char *path, const uint8_t *build_id, size_t build_id_len)
{
    struct tool_dbg *free_slot = NULL;
    if (path == NULL || strlen(path) >= sizeof dbgs[0].path)
        return NULL;
    for (int i = 0; i < TOOL_DBG_MAX; i++) {
        if (dbgs[i].path[0] && strcmp(dbgs[i].path, path) == 0)
            return dbgs[i].ok ? &dbgs[i] : NULL;
        if (!dbgs[i].path[0] && free_slot == NULL)
            free_slot = &dbgs[i];
    }
    if (free_slot == NULL)
        return NULL;
    struct tool_dbg *d = free_slot;
    strcpy(d->path, path);
    const char *env = getenv("TINYTRACE_DEBUGINFO_PATH");
    debuginfo_path = env != NULL && *env ? (char *)env : NULL; /* libdwfl only reads it */
    if (access(path, R_OK) != 0 || (d->dwfl = dwfl_begin(&callbacks)) == NULL)
        return NULL;
    d->mod = dwfl_report_offline(d->dwfl, "", path, -1);
    dwfl_report_end(d->dwfl, NULL, NULL);
    if (d->mod == NULL)
        return NULL;
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(d->mod, &bits, &vaddr);
    if (build_id_len > 0 && (len != (int)build_id_len || memcmp(bits, build_id, build_id_len)))
        return NULL; /* another build than the one recorded */
    dwfl_module_info(d->mod, NULL, &d->low, NULL, NULL, NULL, NULL, NULL);
    load_symbols(d);
    d->ok = 1;
    return d;
}

const char *tool_dbg_symbol(tool_dbg *d, uint64_t offset)
{
    GElf_Sym sym;
    GElf_Off off = 0;
    const char *name = dwfl_module_addrinfo(d->mod, d->low + offset, &off, &sym, NULL, NULL,
                                            NULL);
    return name != NULL && off == 0 ? name : NULL; /* a function's entry, nothing inside one */
}

/* "file:line" of the function that starts at @addr: where DWARF declares it (the line of its
 * name), else the line table's line of its first instruction (its opening brace). */
static int line_at(tool_dbg *d, Dwarf_Addr addr, char *buf, size_t cap)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(d->mod, addr, &bias);
    Dwarf_Die *scopes = NULL;
    const char *file = NULL;
    int lineno = 0;
    int n = cu != NULL ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
    for (int i = 0; i < n && file == NULL; i++)
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram &&
            (file = dwarf_decl_file(&scopes[i])) != NULL && dwarf_decl_line(&scopes[i], &lineno))
            file = NULL;
    free(scopes);
    if (file == NULL || lineno <= 0) {
        Dwfl_Line *line = dwfl_module_getsrc(d->mod, addr);
        file = line != NULL ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    }
    if (file == NULL || lineno <= 0)
        return -1;
    const char *base = strrchr(file, '/');
    int k = snprintf(buf, cap, "%s:%d", base != NULL ? base + 1 : file, lineno);
    return k > 0 && (size_t)k < cap ? 0 : -1;
}

int tool_dbg_line_of_offset(tool_dbg *d, uint64_t offset, char *buf, size_t cap)
{
    return line_at(d, d->low + offset, buf, cap);
}

int tool_dbg_line_of_symbol(tool_dbg *d, const char *name, char *buf, size_t cap)
{
    struct sym key = {name, 0}, *hit;
    if (d->nsyms == 0 ||
        (hit = bsearch(&key, d->syms, d->nsyms, sizeof *d->syms, by_name)) == NULL)
        return -1;
    return line_at(d, hit->addr, buf, cap);
}

int tool_dbg_parse_offset(const char *name, size_t len, const char **module, size_t *module_len,
                          uint64_t *offset)
{
    /* "MODULE+0xHEX" or "MODULE+0xHEX@BUILDID" */
    const char *at = memchr(name, '@', len), *end = at != NULL ? at : name + len;
    const char *plus = NULL;
    for (const char *p = name; p + 3 <= end; p++)
        if (p[0] == '+' && p[1] == '0' && p[2] == 'x')
            plus = p;
    if (plus == NULL || plus == name || plus + 3 == end)
        return -1;
    uint64_t v = 0;
    for (const char *p = plus + 3; p < end; p++) {
        int c = *p;
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (h < 0 || v >> 60)
            return -1;
        v = v << 4 | (uint64_t)h;
    }
    *module = name;
    *module_len = (size_t)(plus - name);
    *offset = v;
    return 0;
}
