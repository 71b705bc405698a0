/* SPDX-License-Identifier: MIT */
/* tinytrace — reading the report the runtime writes during a replay, as JSON, with jansson.
 *
 * The report is written by another process that may have been stopped half-way, so its text is
 * checked like any input. jansson (Debian's libjansson) does the parsing: the RFC 8259 grammar,
 * control characters in strings refused, escapes and surrogate pairs decoded, UTF-8 checked
 * (the runtime escapes every byte that is not valid UTF-8, so a report with one did not come
 * from it), nothing allowed after the value, a nesting limit of its own. What the tool reads is
 * then copied out of jansson's tree into the tool_jdoc of tool.h: the values as nodes in one
 * array (index 0 means "none"), strings and number texts, NUL-terminated, in one buffer sized
 * in a first pass, so that nothing points into memory that moves and the tree is freed before
 * the tool looks at the values. Nesting deeper than MAX_DEPTH is refused, as before.
 *
 * Numbers keep a text, as tool_json_u64 reads them: an integer as its decimal digits, a real
 * with a point or an exponent, so that 1.0 is never taken for the integer 1. An integer beyond
 * the range of json_int_t (a signed 64-bit integer) fails the parse; the runtime writes counts,
 * which never come near it.
 */
#include "tool.h"

#include <jansson.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define NUM_TEXT 40 /* the text of a number: %.17g or an int64 */

/* The text of number @j into @buf. */
static size_t number_text(const json_t *j, char *buf, size_t cap)
{
    int n;
    if (json_is_integer(j)) {
        n = snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
    } else {
        n = snprintf(buf, cap, "%.17g", json_real_value(j));
        if (n > 0 && (size_t)n < cap - 2 && strpbrk(buf, ".eEn") == NULL) {
            buf[n++] = '.'; /* a real stays a real: "1" would read as an integer */
            buf[n++] = '0';
            buf[n] = '\0';
        }
    }
    return n > 0 ? (size_t)n : 0;
}

/* First pass: the nodes and text bytes @j needs. Returns -1 when it is nested too deeply. */
static int measure(const json_t *j, unsigned depth, size_t *nodes, size_t *text)
{
    if (depth > MAX_DEPTH)
        return -1;
    (*nodes)++;
    switch (json_typeof(j)) {
    case JSON_STRING:
        *text += json_string_length(j) + 1;
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        *text += NUM_TEXT + 1;
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < json_array_size(j); i++)
            if (measure(json_array_get(j, i), depth + 1, nodes, text))
                return -1;
        break;
    case JSON_OBJECT:
        for (void *it = json_object_iter((json_t *)j); it != NULL;
             it = json_object_iter_next((json_t *)j, it)) {
            *text += json_object_iter_key_len(it) + 1;
            if (measure(json_object_iter_value(it), depth + 1, nodes, text))
                return -1;
        }
        break;
    default:
        break;
    }
    return 0;
}

struct copy {
    tool_jdoc *d;
    size_t text_len;
};

static const char *put_text(struct copy *c, const char *s, size_t n)
{
    char *o = c->d->text + c->text_len;
    memcpy(o, s, n);
    o[n] = '\0';
    c->text_len += n + 1;
    return o;
}

/* Second pass: copies @j into node @node (allocated by the caller), its children after it. */
static void copy_value(struct copy *c, const json_t *j, uint32_t node)
{
    tool_jdoc *d = c->d;
    tool_jvalue *v = &d->v[node];
    uint32_t last = 0;

    switch (json_typeof(j)) {
    case JSON_NULL:
        v->type = TOOL_J_NULL;
        return;
    case JSON_TRUE:
    case JSON_FALSE:
        v->type = TOOL_J_BOOL;
        v->boolean = json_is_true(j);
        return;
    case JSON_INTEGER:
    case JSON_REAL: {
        char num[NUM_TEXT + 1];
        v->type = TOOL_J_NUMBER;
        v->len = number_text(j, num, sizeof num);
        v->str = put_text(c, num, v->len);
        return;
    }
    case JSON_STRING:
        v->type = TOOL_J_STRING;
        v->len = json_string_length(j);
        v->str = put_text(c, json_string_value(j), v->len);
        return;
    case JSON_ARRAY:
        v->type = TOOL_J_ARRAY;
        for (size_t i = 0; i < json_array_size(j); i++) {
            uint32_t child = d->n++;
            memset(&d->v[child], 0, sizeof d->v[child]);
            copy_value(c, json_array_get(j, i), child);
            if (last == 0)
                d->v[node].child = child;
            else
                d->v[last].next = child;
            last = child;
        }
        return;
    case JSON_OBJECT:
        v->type = TOOL_J_OBJECT;
        for (void *it = json_object_iter((json_t *)j); it != NULL;
             it = json_object_iter_next((json_t *)j, it)) {
            uint32_t child = d->n++;
            memset(&d->v[child], 0, sizeof d->v[child]);
            d->v[child].key_len = json_object_iter_key_len(it);
            d->v[child].key = put_text(c, json_object_iter_key(it), d->v[child].key_len);
            copy_value(c, json_object_iter_value(it), child);
            if (last == 0)
                d->v[node].child = child;
            else
                d->v[last].next = child;
            last = child;
        }
        return;
    }
}

int tool_json_parse(tool_jdoc *d, const char *src, size_t len, char *why, size_t why_cap)
{
    json_error_t jerr;
    json_t *root;
    size_t nodes = 1, text = 0; /* node 0 means "none" */

    memset(d, 0, sizeof *d);
    if (why_cap > 0)
        why[0] = '\0';
    /* JSON_ALLOW_NUL: a string may hold \u0000 (it keeps its length); JSON_DECODE_ANY: any
     * value at the top, the caller checks for an object */
    root = json_loadb(src, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    if (root == NULL) {
        snprintf(why, why_cap, "%s at byte %d", jerr.text, jerr.position);
        return -1;
    }
    if (measure(root, 0, &nodes, &text) != 0) {
        snprintf(why, why_cap, "nested too deeply");
        json_decref(root);
        return -1;
    }
    if (nodes > UINT32_MAX / 2 || (d->v = calloc(nodes, sizeof *d->v)) == NULL ||
        (d->text = malloc(text + 1)) == NULL) {
        snprintf(why, why_cap, "out of memory");
        json_decref(root);
        return -1;
    }
    d->cap = (uint32_t)nodes;
    d->n = 2;
    struct copy c = {d, 0};
    copy_value(&c, root, 1);
    json_decref(root);
    return 0;
}

const tool_jvalue *tool_json_root(const tool_jdoc *d)
{
    return d->n > 1 ? &d->v[1] : NULL;
}

const tool_jvalue *tool_json_member(const tool_jdoc *d, const tool_jvalue *obj, const char *key)
{
    size_t n = strlen(key);
    if (obj == NULL || obj->type != TOOL_J_OBJECT)
        return NULL;
    /* jansson keeps the last of duplicate keys: there is at most one */
    for (uint32_t i = obj->child; i != 0; i = d->v[i].next)
        if (d->v[i].key_len == n && memcmp(d->v[i].key, key, n) == 0)
            return &d->v[i];
    return NULL;
}

const tool_jvalue *tool_json_next(const tool_jdoc *d, const tool_jvalue *v)
{
    return v->next != 0 ? &d->v[v->next] : NULL;
}

const tool_jvalue *tool_json_first(const tool_jdoc *d, const tool_jvalue *v)
{
    if (v == NULL || (v->type != TOOL_J_ARRAY && v->type != TOOL_J_OBJECT) || v->child == 0)
        return NULL;
    return &d->v[v->child];
}

int tool_json_u64(const tool_jvalue *v, uint64_t *out)
{
    uint64_t x = 0;
    if (v == NULL || v->type != TOOL_J_NUMBER || v->len == 0)
        return -1;
    for (size_t i = 0; i < v->len; i++) {
        unsigned dgt = (unsigned)(v->str[i] - '0');
        if (dgt > 9 || x > (UINT64_MAX - dgt) / 10)
            return -1; /* negative, fractional, exponent or too large */
        x = x * 10 + dgt;
    }
    *out = x;
    return 0;
}

const char *tool_json_str(const tool_jdoc *d, const tool_jvalue *obj, const char *key,
                          size_t *len)
{
    const tool_jvalue *v = tool_json_member(d, obj, key);
    if (v == NULL || v->type != TOOL_J_STRING)
        return NULL;
    if (len != NULL)
        *len = v->len;
    return v->str;
}

void tool_json_free(tool_jdoc *d)
{
    free(d->v);
    free(d->text);
    memset(d, 0, sizeof *d);
}
