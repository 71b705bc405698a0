/* SPDX-License-Identifier: MIT */
/* tinytrace — calls as CPU profiles in Chrome trace-event JSON (cpuprofile.h says what and
 * why). */
#include "cpuprofile.h"

#include <stdlib.h>
#include <string.h>

#define CP_CAT "disabled-by-default-v8.cpu_profiler"

struct cp_thread {
    uint32_t root;       /* its root node; 0: no sample yet */
    int profile_written; /* its "Profile" event is out */
    int sampled;         /* it has had a sample */
    uint64_t first, last; /* ns: the first and the latest sample */
    uint32_t *node;       /* samples waiting for a chunk */
    uint64_t *delta;      /* ns since the sample before each */
    uint32_t n, cap;
    uint32_t *fresh;      /* nodes made since its last chunk */
    uint32_t nfresh, fresh_cap;
};

int cp_init(cp_writer *w, FILE *f, uint64_t *written, uint32_t pid, const uint32_t *tids,
            uint32_t nthreads, cp_name_fn *name, void *name_ctx)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->written = written;
    w->pid = pid;
    w->tids = tids;
    w->nthreads = nthreads;
    w->name = name;
    w->name_ctx = name_ctx;
    w->threads = calloc(nthreads ? nthreads : 1, sizeof *w->threads);
    w->slot_mask = 1023;
    w->slots = calloc(w->slot_mask + 1, sizeof *w->slots);
    if (w->threads == NULL || w->slots == NULL) {
        cp_free(w);
        return -1;
    }
    return 0;
}

void cp_free(cp_writer *w)
{
    for (uint32_t i = 0; w->threads != NULL && i < w->nthreads; i++) {
        free(w->threads[i].node);
        free(w->threads[i].delta);
        free(w->threads[i].fresh);
    }
    free(w->threads);
    free(w->parent);
    free(w->function);
    free(w->slots);
    w->threads = NULL;
    w->parent = w->function = w->slots = NULL;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    if (ncap > UINT32_MAX)
        return -1;
    void *q = realloc(*p, (size_t)ncap * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = (uint32_t)ncap;
    return 0;
}

static uint32_t slot_of(const cp_writer *w, uint32_t parent, uint32_t function)
{
    uint64_t k = ((uint64_t)parent << 32 | function) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32) & w->slot_mask;
}

/* A new node, also listed as fresh in @thread's next chunk. */
static uint32_t make_node(cp_writer *w, uint32_t thread, uint32_t parent, uint32_t function)
{
    cp_thread *t = &w->threads[thread];
    uint32_t id = w->nodes + 1, cap = w->node_cap;
    if (id == UINT32_MAX || grow((void **)&w->parent, &cap, id + 1, sizeof *w->parent) != 0)
        return 0;
    if (cap != w->node_cap) {
        /* function has parent's capacity: grown with it */
        uint32_t *fn = realloc(w->function, (size_t)cap * sizeof *fn);
        if (fn == NULL)
            return 0;
        w->function = fn;
        w->node_cap = cap;
    }
    if (grow((void **)&t->fresh, &t->fresh_cap, t->nfresh + 1, sizeof *t->fresh) != 0)
        return 0;
    w->parent[id] = parent;
    w->function[id] = function;
    w->nodes = id;
    t->fresh[t->nfresh++] = id;
    return id;
}

static int rehash(cp_writer *w)
{
    uint32_t mask = w->slot_mask * 2 + 1;
    uint32_t *slots = calloc((size_t)mask + 1, sizeof *slots);
    if (slots == NULL)
        return -1;
    free(w->slots);
    w->slots = slots;
    w->slot_mask = mask;
    for (uint32_t id = 1; id <= w->nodes; id++) {
        if (w->parent[id] == 0)
            continue; /* a root: never looked up */
        uint32_t s = slot_of(w, w->parent[id], w->function[id]);
        while (slots[s] != 0)
            s = (s + 1) & mask;
        slots[s] = id;
    }
    return 0;
}

static uint32_t root_of(cp_writer *w, uint32_t thread)
{
    cp_thread *t = &w->threads[thread];
    if (t->root == 0)
        t->root = make_node(w, thread, 0, 0);
    return t->root;
}

uint32_t cp_node(cp_writer *w, uint32_t thread, uint32_t parent, uint32_t function)
{
    if (parent == 0 && (parent = root_of(w, thread)) == 0)
        return 0;
    uint32_t s = slot_of(w, parent, function);
    for (uint32_t id; (id = w->slots[s]) != 0; s = (s + 1) & w->slot_mask)
        if (w->parent[id] == parent && w->function[id] == function)
            return id;
    /* at most half full: probes stay short */
    if ((uint64_t)(w->nodes + 1) * 2 > w->slot_mask) {
        if (rehash(w) != 0)
            return 0;
        s = slot_of(w, parent, function);
        while (w->slots[s] != 0)
            s = (s + 1) & w->slot_mask;
    }
    uint32_t id = make_node(w, thread, parent, function);
    if (id != 0)
        w->slots[s] = id;
    return id;
}

/* ---- writing ---- */

/* @ns as microseconds with three decimals, at @p; returns the end. */
static char *fmt_us(char *p, uint64_t ns)
{
    char *q = tool_fmt_u64(p, ns / 1000);
    unsigned frac = (unsigned)(ns % 1000);
    *q++ = '.';
    *q++ = (char)('0' + frac / 100);
    *q++ = (char)('0' + frac / 10 % 10);
    *q++ = (char)('0' + frac % 10);
    return q;
}

static void put_us(tool_json *j, const char *key, uint64_t ns)
{
    char buf[32];
    tj_number(j, key, buf, (size_t)(fmt_us(buf, ns) - buf));
}

/* The fields a "P" event starts with; the caller ends the object. */
static void p_event(cp_writer *w, uint32_t thread, const char *name, uint64_t ns)
{
    char id[16];
    if ((*w->written)++ > 0)
        fputc(',', w->f);
    tj_init(&w->j, w->f);
    tj_object_begin(&w->j, NULL);
    tj_str(&w->j, "ph", "P");
    tj_u64(&w->j, "pid", w->pid);
    tj_u64(&w->j, "tid", w->tids[thread]);
    put_us(&w->j, "ts", ns);
    tj_str(&w->j, "name", name);
    snprintf(id, sizeof id, "0x%x", thread + 1);
    tj_str(&w->j, "id", id);
    tj_str(&w->j, "cat", CP_CAT);
}

static void write_node(cp_writer *w, uint32_t id)
{
    char buf[32];
    const char *s = "(root)";
    size_t len = strlen(s);
    tool_json *j = &w->j;

    if (w->parent[id] != 0)
        w->name(w->name_ctx, w->function[id], buf, sizeof buf, &s, &len);
    tj_object_begin(j, NULL);
    tj_u64(j, "id", id);
    if (w->parent[id] != 0)
        tj_u64(j, "parent", w->parent[id]);
    tj_object_begin(j, "callFrame");
    tj_strn(j, "functionName", s, len);
    tj_str(j, "url", "");
    tj_str(j, "scriptId", "0");
    tj_i64(j, "lineNumber", -1);
    tj_i64(j, "columnNumber", -1);
    tj_object_end(j);
    tj_object_end(j);
}

/* Writes @thread's waiting samples as a chunk (its "Profile" first, once); @last: with the
 * profile's end time. */
static void flush_thread(cp_writer *w, uint32_t thread, int last)
{
    cp_thread *t = &w->threads[thread];
    tool_json *j = &w->j;

    if (t->n == 0 && t->nfresh == 0 && !last)
        return;
    if (!t->sampled)
        return; /* no sample ever: no profile */
    if (!t->profile_written) {
        p_event(w, thread, "Profile", t->first);
        tj_object_begin(j, "args");
        tj_object_begin(j, "data");
        tj_u64(j, "startTime", 0); /* times are since the session opened, as "ts" */
        tj_object_end(j);
        tj_object_end(j);
        tj_object_end(j);
        tj_newline(j);
        t->profile_written = 1;
    }
    p_event(w, thread, "ProfileChunk", t->last);
    tj_object_begin(j, "args");
    tj_object_begin(j, "data");
    tj_object_begin(j, "cpuProfile");
    tj_array_begin(j, "nodes");
    for (uint32_t i = 0; i < t->nfresh; i++)
        write_node(w, t->fresh[i]);
    tj_array_end(j);
    tj_array_begin(j, "samples");
    for (uint32_t i = 0; i < t->n; i++)
        tj_u64(j, NULL, t->node[i]);
    tj_array_end(j);
    tj_object_end(j);
    tj_array_begin(j, "timeDeltas");
    for (uint32_t i = 0; i < t->n; i++)
        put_us(j, NULL, t->delta[i]);
    tj_array_end(j);
    if (last)
        put_us(j, "endTime", t->last);
    tj_object_end(j);
    tj_object_end(j);
    tj_object_end(j);
    tj_newline(j);
    w->samples += t->n;
    w->chunks++;
    w->pending -= t->n;
    t->n = 0;
    t->nfresh = 0;
}

int cp_sample(cp_writer *w, uint32_t thread, uint32_t node, uint64_t ns)
{
    cp_thread *t = &w->threads[thread];

    if (node == 0 && (node = root_of(w, thread)) == 0)
        return -1;
    if (!t->sampled) {
        t->first = t->last = ns;
    } else if (ns < t->last) {
        ns = t->last;
    }
    if (t->n == t->cap) {
        uint32_t cap = t->cap;
        if (grow((void **)&t->node, &cap, t->n + 1, sizeof *t->node) != 0)
            return -1;
        uint64_t *d = realloc(t->delta, (size_t)cap * sizeof *d);
        if (d == NULL)
            return -1;
        t->delta = d;
        t->cap = cap;
    }
    /* the first delta is from the profile's startTime, 0 */
    t->delta[t->n] = t->sampled ? ns - t->last : ns;
    t->node[t->n++] = node;
    t->last = ns;
    t->sampled = 1;
    w->pending++;
    if (t->n >= CP_CHUNK) {
        flush_thread(w, thread, 0);
    } else if (w->pending >= CP_PENDING_MAX) {
        for (uint32_t i = 0; i < w->nthreads; i++)
            flush_thread(w, i, 0);
    }
    return 0;
}

void cp_end_thread(cp_writer *w, uint32_t thread)
{
    flush_thread(w, thread, 1);
}
