/* tinytrace — a small JSON reader, for the report the runtime writes during a replay.
 *
 * The report is written by another process that may have been stopped half-way, so its text is
 * checked like any input: the RFC 8259 grammar, a nesting limit, strings decoded (escapes,
 * surrogate pairs; a lone surrogate becomes U+FFFD), control characters refused. Bytes that are
 * not valid UTF-8 are kept as they are: whoever prints a string escapes it. The values are
 * kept as a tree of nodes in one growing array (index 0 means "none"); decoded strings go into
 * one buffer sized up front — decoding never makes a string longer than its JSON text, and the
 * NUL after each fits in the quote characters — so nothing points into memory that moves.
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

struct parser {
    tool_jdoc *d;
    const char *s;
    size_t len, pos;
    size_t text_len;
    char *why;
    size_t why_cap;
    int failed;
};

static int fail(struct parser *p, const char *what)
{
    if (!p->failed)
        snprintf(p->why, p->why_cap, "%s at byte %zu", what, p->pos);
    p->failed = 1;
    return -1;
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

/* A new node; returns its index or 0 when out of memory. */
static uint32_t new_node(struct parser *p, tool_jtype type)
{
    tool_jdoc *d = p->d;
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        tool_jvalue *v;
        if (cap <= d->cap || cap > UINT32_MAX / 2 ||
            (v = realloc(d->v, (size_t)cap * sizeof *v)) == NULL) {
            fail(p, "out of memory");
            return 0;
        }
        d->v = v;
        d->cap = cap;
    }
    memset(&d->v[d->n], 0, sizeof d->v[d->n]);
    d->v[d->n].type = type;
    return d->n++;
}

static int hex4(struct parser *p, uint32_t *out)
{
    uint32_t v = 0;
    if (p->len - p->pos < 4)
        return fail(p, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return fail(p, "bad \\u escape");
    }
    *out = v;
    return 0;
}

static void put_utf8(char *o, size_t *n, uint32_t cp)
{
    if (cp < 0x80) {
        o[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*n)++] = (char)(0xc0 | cp >> 6);
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o[(*n)++] = (char)(0xe0 | cp >> 12);
        o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[(*n)++] = (char)(0xf0 | cp >> 18);
        o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* Parses the string at p->pos (its opening quote) into the text buffer. */
static int parse_string(struct parser *p, const char **out, size_t *out_len)
{
    char *o = p->d->text + p->text_len;
    size_t n = 0;

    p->pos++; /* the quote */
    for (;;) {
        unsigned char c;
        if (p->pos >= p->len)
            return fail(p, "unterminated string");
        c = (unsigned char)p->s[p->pos++];
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(p, "control character in a string");
        if (c != '\\') {
            o[n++] = (char)c;
            continue;
        }
        if (p->pos >= p->len)
            return fail(p, "unterminated string");
        c = (unsigned char)p->s[p->pos++];
        switch (c) {
        case '"': case '\\': case '/': o[n++] = (char)c; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (hex4(p, &cp))
                return -1;
            if (cp >= 0xd800 && cp < 0xdc00 && p->len - p->pos >= 6 && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                size_t save = p->pos;
                p->pos += 2;
                if (hex4(p, &lo))
                    return -1;
                if (lo >= 0xdc00 && lo < 0xe000)
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                else
                    p->pos = save; /* not a pair: the high half is lone */
            }
            if (cp >= 0xd800 && cp < 0xe000)
                cp = 0xfffd;
            put_utf8(o, &n, cp);
            break;
        }
        default:
            return fail(p, "bad escape in a string");
        }
    }
    o[n] = '\0';
    *out = o;
    *out_len = n;
    p->text_len += n + 1;
    return 0;
}

static int parse_number(struct parser *p, uint32_t node)
{
    size_t start = p->pos;
    const char *s = p->s;
    if (p->pos < p->len && s[p->pos] == '-')
        p->pos++;
    if (p->pos < p->len && s[p->pos] == '0') {
        p->pos++;
    } else if (p->pos < p->len && s[p->pos] >= '1' && s[p->pos] <= '9') {
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    } else {
        return fail(p, "bad number");
    }
    if (p->pos < p->len && s[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
            return fail(p, "bad number");
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    }
    if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
            return fail(p, "bad number");
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    }
    /* numbers keep their text (copied, so that it is NUL-terminated) */
    {
        char *o = p->d->text + p->text_len;
        size_t n = p->pos - start;
        memcpy(o, s + start, n);
        o[n] = '\0';
        p->text_len += n + 1;
        p->d->v[node].str = o;
        p->d->v[node].len = n;
    }
    return 0;
}

static int literal(struct parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, "unexpected character");
    p->pos += n;
    return 0;
}

static uint32_t parse_value(struct parser *p, unsigned depth);

/* Parses the members or elements of an object or array whose node is @node. */
static int parse_container(struct parser *p, uint32_t node, int object, unsigned depth)
{
    char close = object ? '}' : ']';
    uint32_t last = 0;

    p->pos++; /* the bracket */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        uint32_t child;

        skip_ws(p);
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail(p, "expected a key");
            if (parse_string(p, &key, &key_len))
                return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fail(p, "expected ':'");
            p->pos++;
        }
        child = parse_value(p, depth + 1);
        if (child == 0)
            return -1;
        p->d->v[child].key = key;
        p->d->v[child].key_len = key_len;
        if (last == 0)
            p->d->v[node].child = child;
        else
            p->d->v[last].next = child;
        last = child;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return 0;
        }
        return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* Returns the node index of the value at p->pos, or 0 on error. */
static uint32_t parse_value(struct parser *p, unsigned depth)
{
    uint32_t node;
    char c;

    if (depth > MAX_DEPTH) {
        fail(p, "nested too deeply");
        return 0;
    }
    skip_ws(p);
    if (p->pos >= p->len) {
        fail(p, "unexpected end");
        return 0;
    }
    c = p->s[p->pos];
    switch (c) {
    case '{':
    case '[':
        node = new_node(p, c == '{' ? TOOL_J_OBJECT : TOOL_J_ARRAY);
        if (node == 0 || parse_container(p, node, c == '{', depth))
            return 0;
        return node;
    case '"':
        node = new_node(p, TOOL_J_STRING);
        if (node == 0 || parse_string(p, &p->d->v[node].str, &p->d->v[node].len))
            return 0;
        return node;
    case 't':
    case 'f':
        node = new_node(p, TOOL_J_BOOL);
        if (node == 0 || literal(p, c == 't' ? "true" : "false"))
            return 0;
        p->d->v[node].boolean = c == 't';
        return node;
    case 'n':
        node = new_node(p, TOOL_J_NULL);
        if (node == 0 || literal(p, "null"))
            return 0;
        return node;
    default:
        node = new_node(p, TOOL_J_NUMBER);
        if (node == 0 || parse_number(p, node))
            return 0;
        return node;
    }
}

int tool_json_parse(tool_jdoc *d, const char *src, size_t len, char *why, size_t why_cap)
{
    struct parser p;

    memset(d, 0, sizeof *d);
    memset(&p, 0, sizeof p);
    p.d = d;
    p.s = src;
    p.len = len;
    p.why = why;
    p.why_cap = why_cap;
    if (why_cap > 0)
        why[0] = '\0';
    /* every string or number needs at most its text plus one NUL, which its quotes or the
     * character that ends it pay for: len + 1 bytes are enough */
    if (len > SIZE_MAX - 1 || (d->text = malloc(len + 1)) == NULL)
        return fail(&p, "out of memory");
    new_node(&p, TOOL_J_NULL); /* index 0, which means "none" */
    if (p.failed)
        return -1;
    if (parse_value(&p, 0) != 1)
        return -1;
    skip_ws(&p);
    if (p.pos != len)
        return fail(&p, "text after the value");
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
    /* the last of duplicate keys wins, as in most readers */
    const tool_jvalue *found = NULL;
    for (uint32_t i = obj->child; i != 0; i = d->v[i].next)
        if (d->v[i].key_len == n && memcmp(d->v[i].key, key, n) == 0)
            found = &d->v[i];
    return found;
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
