/* SPDX-License-Identifier: MIT */
/* tinytrace — the names the tool shows for functions: demangled C++ names.
 *
 * The runtime records a function's name as the symbol table has it ("_ZN4shop4Cart3addEi", or
 * "libfoo.so!_ZN..." for a library): demangling in the traced process would cost it time and
 * an allocator call inside a hook, and replay compares names as recorded. The tool turns them
 * into what a person reads ("shop::Cart::add(int)") with the C++ runtime's __cxa_demangle, once
 * per function object and reader, on first use: tool_object_name hands out the cached text, so
 * every verb that names a function (stats, tree, dump, diff, export, report, the replay report)
 * shows the same name, and the name filters (tree --function, report and stats --function)
 * take it. --no-demangle (tool_names_demangle(0)) shows the names as recorded.
 *
 * Memory: one pointer and one byte per object of a reader that named a function, and the
 * demangled texts of the functions named; freed by tool_names_forget (tool_trace_close).
 * Not thread-safe: the tool runs one thread.
 */
#include "debuginfo.h"
#include "meta.h"
#include "tool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The C++ ABI's demangler (libstdc++; <cxxabi.h> is C++ only). */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static int demangle_on = 1;

void tool_names_demangle(int on)
{
    demangle_on = on;
}

int tool_names_demangling(void)
{
    return demangle_on;
}

enum { NAME_UNKNOWN = 0, NAME_AS_RECORDED, NAME_DISPLAY };

struct cache {
    const tt_reader *r;
    uint32_t n;
    uint8_t *state;
    char **text;
    char **loc;        /* "file:line" of function objects, once looked up (loc_done) */
    uint8_t *loc_done;
    int dbg_tried;     /* the program's debug information, looked for once */
    tool_dbg *dbg;
    char module[256];  /* the program's file name: the module of its offsets */
};

/* diff reads two traces at once; replay's report one. dump formats on two threads (its printer
 * and, at the end, the main one): every use of the caches holds names_lock. */
#define CACHES 4
static struct cache caches[CACHES];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cache *cache_of(const tt_reader *r, uint32_t count)
{
    struct cache *free_slot = NULL;
    for (int i = 0; i < CACHES; i++) {
        if (caches[i].r == r)
            return &caches[i];
        if (caches[i].r == NULL && free_slot == NULL)
            free_slot = &caches[i];
    }
    if (free_slot == NULL)
        return NULL;
    free_slot->state = calloc((size_t)count + 1, 1);
    free_slot->text = calloc((size_t)count + 1, sizeof *free_slot->text);
    free_slot->loc = calloc((size_t)count + 1, sizeof *free_slot->loc);
    free_slot->loc_done = calloc((size_t)count + 1, 1);
    if (free_slot->state == NULL || free_slot->text == NULL || free_slot->loc == NULL ||
        free_slot->loc_done == NULL) {
        free(free_slot->state);
        free(free_slot->text);
        free(free_slot->loc);
        free(free_slot->loc_done);
        memset(free_slot, 0, sizeof *free_slot);
        return NULL;
    }
    free_slot->r = r;
    free_slot->n = count;
    return free_slot;
}

void tool_names_forget(const tt_reader *r)
{
    pthread_mutex_lock(&names_lock);
    for (int i = 0; i < CACHES; i++) {
        if (caches[i].r != r)
            continue;
        for (uint32_t k = 0; k <= caches[i].n; k++) {
            free(caches[i].text[k]);
            free(caches[i].loc[k]);
        }
        free(caches[i].text);
        free(caches[i].state);
        free(caches[i].loc);
        free(caches[i].loc_done);
        memset(&caches[i], 0, sizeof caches[i]);
    }
    pthread_mutex_unlock(&names_lock);
}

char *tool_demangle(const char *name, size_t len)
{
    /* "lib.so!_Z...": the library's name stays in front */
    const char *bang = memchr(name, '!', len);
    size_t pre = bang != NULL ? (size_t)(bang - name) + 1 : 0;
    if (len - pre < 3 || name[pre] != '_' || name[pre + 1] != 'Z')
        return NULL;
    char *sym = malloc(len - pre + 1);
    if (sym == NULL)
        return NULL;
    memcpy(sym, name + pre, len - pre);
    sym[len - pre] = '\0';
    int status = -1;
    char *d = __cxa_demangle(sym, NULL, NULL, &status);
    free(sym);
    if (d == NULL || status != 0) {
        free(d);
        return NULL;
    }
    if (pre == 0)
        return d;
    size_t dl = strlen(d);
    char *full = malloc(pre + dl + 1);
    if (full != NULL) {
        memcpy(full, name, pre);
        memcpy(full + pre, d, dl + 1);
    }
    free(d);
    return full;
}

/* The program a trace recorded, for its debug information: the path execve was given, or
 * argv[0] in the recorded directory; its build-id is the manifest's. */
static tool_dbg *program_of(struct cache *c)
{
    if (c->dbg_tried)
        return c->dbg;
    c->dbg_tried = 1;
    tool_meta mt;
    char why[64], path[4096];
    memset(&mt, 0, sizeof mt);
    if (tool_meta_parse(c->r, &mt, why, sizeof why) == TT_OK) {
        const char *p = mt.execfn ? mt.execfn : mt.argv && mt.argc ? mt.argv[0] : NULL;
        int n = -1;
        if (p != NULL && p[0] == '/')
            n = snprintf(path, sizeof path, "%s", p);
        else if (p != NULL && strchr(p, '/') && mt.cwd)
            n = snprintf(path, sizeof path, "%s/%s", mt.cwd, p);
        if (n > 0 && (size_t)n < sizeof path) {
            const tt_manifest *m = tt_reader_manifest(c->r);
            const char *base = strrchr(path, '/');
            snprintf(c->module, sizeof c->module, "%.255s", base ? base + 1 : path);
            c->dbg = tool_dbg_open(path, m->build_id,
                                   m->build_id_len <= TT_BUILD_ID_MAX ? m->build_id_len : 0);
        }
    }
    tool_meta_free(&mt);
    return c->dbg;
}

/* The symbol of an offset name ("prog+0x119c@...") of @dbg's program @module, or NULL. */
static const char *offset_symbol(tool_dbg *dbg, const char *module, const char *name, size_t len,
                                 uint64_t *offset)
{
    const char *mod;
    size_t mod_len;
    if (dbg == NULL || tool_dbg_parse_offset(name, len, &mod, &mod_len, offset) != 0 ||
        strlen(module) != mod_len || memcmp(module, mod, mod_len) != 0)
        return NULL;
    return tool_dbg_symbol(dbg, *offset);
}

static const char *display_locked(const tt_reader *r, uint32_t id, const char *name,
                                  size_t len, size_t *out_len)
{
    const tt_manifest *m;
    struct cache *c;
    if ((m = tt_reader_manifest(r)) == NULL || id > m->object_count)
        return NULL;
    if ((c = cache_of(r, m->object_count)) == NULL)
        return NULL;
    if (c->state[id] == NAME_UNKNOWN) {
        /* a function without a symbol: its name from the debug information, where there is
         * some; then demangled */
        uint64_t off;
        const char *sym = memchr(name, '+', len) != NULL
                              ? offset_symbol(program_of(c), c->module, name, len, &off)
                              : NULL;
        char *d = sym != NULL && demangle_on ? tool_demangle(sym, strlen(sym)) : NULL;
        if (d == NULL && sym != NULL)
            d = strdup(sym);
        if (d == NULL && demangle_on)
            d = tool_demangle(name, len);
        c->text[id] = d;
        c->state[id] = d != NULL ? NAME_DISPLAY : NAME_AS_RECORDED;
    }
    if (c->state[id] != NAME_DISPLAY)
        return NULL;
    *out_len = strlen(c->text[id]);
    return c->text[id];
}

const char *tool_function_display(const tt_reader *r, uint32_t id, const char *name, size_t len,
                                  size_t *out_len)
{
    pthread_mutex_lock(&names_lock);
    const char *d = display_locked(r, id, name, len, out_len);
    pthread_mutex_unlock(&names_lock);
    return d; /* the cache's: valid until tool_names_forget */
}

/* "file:line" of @name (recorded) in @dbg's program @module, into @buf; 0 or -1. */
static int location_of(tool_dbg *dbg, const char *module, const char *name, size_t len,
                       char *buf, size_t cap)
{
    uint64_t off;
    const char *mod;
    size_t mod_len;
    char sym[512];
    if (dbg == NULL)
        return -1;
    if (tool_dbg_parse_offset(name, len, &mod, &mod_len, &off) == 0)
        return strlen(module) == mod_len && memcmp(module, mod, mod_len) == 0
                   ? tool_dbg_line_of_offset(dbg, off, buf, cap)
                   : -1;
    if (memchr(name, '!', len) != NULL || len >= sizeof sym)
        return -1; /* a library's: not the program's debug information */
    memcpy(sym, name, len);
    sym[len] = '\0';
    return tool_dbg_line_of_symbol(dbg, sym, buf, cap);
}

const char *tool_function_location(const tt_reader *r, uint32_t id)
{
    const tt_manifest *m = tt_reader_manifest(r);
    tt_object_entry o;
    struct cache *c;
    char buf[512];
    const char *loc = NULL;
    if (m == NULL || id == 0 || id > m->object_count)
        return NULL;
    pthread_mutex_lock(&names_lock);
    if ((c = cache_of(r, m->object_count)) != NULL) {
        if (!c->loc_done[id]) {
            c->loc_done[id] = 1;
            if (tt_reader_object(r, id, &o) == TT_OK && o.kind == TT_OBJ_FUNCTION &&
                o.name != NULL &&
                location_of(program_of(c), c->module, o.name, o.name_len, buf, sizeof buf) == 0)
                c->loc[id] = strdup(buf);
        }
        loc = c->loc[id];
    }
    pthread_mutex_unlock(&names_lock);
    return loc;
}

/* replay: the program it runs, for the names in the runtime's report. Opened on first use,
 * never before: libdwfl keeps the program's file open (without O_CLOEXEC), and a descriptor
 * open in the tool when it starts the program would be inherited and shift the program's own
 * descriptor numbers from the recorded ones. */
static int replayed_set, replayed_tried;
static tool_dbg *replayed;
static char replayed_module[256], replayed_path[4096];
static uint8_t replayed_id[TT_BUILD_ID_MAX];
static size_t replayed_id_len;

void tool_names_set_program(const char *path, const uint8_t *build_id, size_t len)
{
    const char *base = strrchr(path, '/');
    if (strlen(path) >= sizeof replayed_path || len > sizeof replayed_id)
        return;
    snprintf(replayed_module, sizeof replayed_module, "%.255s", base ? base + 1 : path);
    strcpy(replayed_path, path);
    memcpy(replayed_id, build_id, len);
    replayed_id_len = len;
    replayed_set = 1;
    replayed_tried = 0;
}

static tool_dbg *replayed_dbg(void)
{
    if (replayed_set && !replayed_tried) {
        replayed_tried = 1;
        replayed = tool_dbg_open(replayed_path, replayed_id, replayed_id_len);
    }
    return replayed;
}

int tool_names_program_location(const char *name, size_t len, char *buf, size_t cap)
{
    return location_of(replayed_dbg(), replayed_module, name, len, buf, cap);
}

uint32_t tool_find_function(const tt_reader *r, const char *name)
{
    uint32_t id = tt_reader_find_object(r, TT_OBJ_FUNCTION, name);
    const tt_manifest *m = tt_reader_manifest(r);
    size_t want = strlen(name);
    if (id != 0 || m == NULL)
        return id;
    /* not a recorded name: the names as shown (demangled), and a demangled name without its
     * parameter list ("shop::Cart::add" for "shop::Cart::add(int)") */
    for (uint32_t k = 1; k <= m->object_count; k++) {
        tt_object_entry o;
        size_t len;
        const char *s;
        if (tt_reader_object(r, k, &o) != TT_OK || o.kind != TT_OBJ_FUNCTION)
            continue;
        if ((s = tool_object_name(r, k, &len)) == NULL)
            continue;
        if ((len == want && memcmp(s, name, len) == 0) ||
            (len > want && s[want] == '(' && memcmp(s, name, want) == 0))
            return k;
    }
    return 0;
}

/* A character of a mangled name: the Itanium ABI's names are letters, digits, '_', and '.'
 * or '$' in clones ("_Z3fooi.constprop.0"). */
static int mangled_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '$';
}

/* A character of a name the runtime gives a function without a symbol: "prog+0x119c@5f0c". */
static int offset_char(char c)
{
    return mangled_char(c) || c == '+' || c == '@' || c == '-';
}

void tool_print_names(FILE *f, const char *s, size_t n)
{
    size_t i = 0, plain = 0;
    while (i < n) {
        if (replayed_set && offset_char(s[i]) && (i == 0 || !offset_char(s[i - 1])) &&
            replayed_dbg() != NULL) {
            size_t j = i;
            uint64_t off;
            while (j < n && offset_char(s[j]))
                j++;
            const char *sym = offset_symbol(replayed, replayed_module, s + i, j - i, &off);
            if (sym != NULL) {
                char *d = demangle_on ? tool_demangle(sym, strlen(sym)) : NULL;
                tool_print_text(f, s + plain, i - plain);
                tool_print_text(f, d ? d : sym, strlen(d ? d : sym));
                free(d);
                i = plain = j;
                continue;
            }
        }
        if (demangle_on && s[i] == '_' && i + 2 < n && s[i + 1] == 'Z' &&
            (i == 0 || !mangled_char(s[i - 1]))) {
            size_t j = i;
            while (j < n && mangled_char(s[j]))
                j++;
            char *d = tool_demangle(s + i, j - i);
            if (d != NULL) {
                tool_print_text(f, s + plain, i - plain);
                tool_print_text(f, d, strlen(d));
                free(d);
                i = plain = j;
                continue;
            }
            i = j;
            continue;
        }
        i++;
    }
    tool_print_text(f, s + plain, n - plain);
}
