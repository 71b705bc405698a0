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
#include "tool.h"

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
};

/* diff reads two traces at once; replay's report one */
#define CACHES 4
static struct cache caches[CACHES];

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
    if (free_slot->state == NULL || free_slot->text == NULL) {
        free(free_slot->state);
        free(free_slot->text);
        free_slot->state = NULL;
        free_slot->text = NULL;
        return NULL;
    }
    free_slot->r = r;
    free_slot->n = count;
    return free_slot;
}

void tool_names_forget(const tt_reader *r)
{
    for (int i = 0; i < CACHES; i++) {
        if (caches[i].r != r)
            continue;
        for (uint32_t k = 0; k <= caches[i].n; k++)
            free(caches[i].text[k]);
        free(caches[i].text);
        free(caches[i].state);
        memset(&caches[i], 0, sizeof caches[i]);
    }
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

const char *tool_function_display(const tt_reader *r, uint32_t id, const char *name, size_t len,
                                  size_t *out_len)
{
    const tt_manifest *m;
    struct cache *c;
    if (!demangle_on || (m = tt_reader_manifest(r)) == NULL || id > m->object_count)
        return NULL;
    if ((c = cache_of(r, m->object_count)) == NULL)
        return NULL;
    if (c->state[id] == NAME_UNKNOWN) {
        c->text[id] = tool_demangle(name, len);
        c->state[id] = c->text[id] != NULL ? NAME_DISPLAY : NAME_AS_RECORDED;
    }
    if (c->state[id] != NAME_DISPLAY)
        return NULL;
    *out_len = strlen(c->text[id]);
    return c->text[id];
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

void tool_print_names(FILE *f, const char *s, size_t n)
{
    size_t i = 0, plain = 0;
    while (i < n) {
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
