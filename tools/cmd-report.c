/* SPDX-License-Identifier: MIT */
/* tinytrace report — the call graph merged by path: where the time went, call path by call path.
 *
 * `tree` prints one line per call; on a run of 10^8 events that is 5 * 10^7 lines. `report`
 * merges the calls that have the same call path (main > work > leaf) into one node, with the
 * number of calls, their total and self time, the average and the longest, in the manner of
 * `uftrace graph` / `uftrace report`. The nodes come from the frame table alone (no event is
 * read): each thread's frames are read from the last to the first, which in post-order meets
 * every frame before its descendants, and a frame at depth d is a child of the node the last
 * frame at depth d - 1 went into; so one array of nodes by depth is all the state of the walk,
 * and the frames are read block by block in order, each once.
 *
 * Memory: one node per distinct call path (64 bytes, in a hash table keyed by parent and
 * function), never per call. A path is cut after REPORT_DEPTH_MAX calls: deeper frames merge
 * into a node "..." below the cut, so a recursion 10^6 deep is 512 nodes, not 10^6. Threads are
 * merged: a path is the same path in every thread (--thread N: one thread only).
 *
 * Totals: a node's total adds up its calls' durations, its self time excludes its direct
 * callees', as `stats` counts them per function; summed by function over the nodes they agree
 * with `stats` (calls, total and self), which the tests check.
 */
#include "opts.h"
#include "tool.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_DEPTH_MAX 512
#define NO_NODE UINT32_MAX
#define ELLIPSIS_FN UINT32_MAX /* the "..." node below the depth cut */

static const char usage[] =
    "Usage: tinytrace report [--sort KEY] [--limit N] [--threshold LIMIT] [--thread N]\n"
    "                        [--json] [--no-demangle] [--max-memory MB] FILE\n"
    "\n"
    "Prints the call graph of trace FILE merged by call path, from its index tables: every\n"
    "distinct path (main > work > leaf) once, with its calls and times over all threads,\n"
    "children indented under their caller:\n"
    "  TOTAL_NS SELF_NS CALLS AVG_NS MAX_NS  FUNCTION\n"
    "TOTAL adds up the calls' durations, SELF leaves out the time of direct callees, AVG is\n"
    "TOTAL / CALLS, MAX the longest call. A path deeper than 512 calls is cut, and what runs\n"
    "deeper is counted in one node '...'.\n"
    "\n"
    "Options:\n"
    "  -s, --sort KEY      order of the callees of each node: total (default), self, calls,\n"
    "                      avg, max or name\n"
    "  -n, --limit N       at most N callees of each node (the first N by --sort); the rest are\n"
    "                      summed in one line '(N more)'\n"
    "  -T, --threshold LIMIT\n"
    "                      LIMIT is PCT% or TIME: leave out nodes whose total is below PCT\n"
    "                      percent of the whole run's (1%, 0.5%) or below TIME (250us, 2ms)\n"
    "  -t, --thread N      only thread N\n"
    "  -j, --json          one JSON object: {\"file\", \"ticks_per_sec\", \"paths\", \"frames\",\n"
    "                      \"graph\": [NODE...]}, the nodes in the text's order, each\n"
    "                      {\"id\", \"parent\" (an id, null at the top), \"depth\", \"function\",\n"
    "                      \"calls\", \"total\", \"self\", \"max\" (ticks), \"total_ns\",\n"
    "                      \"self_ns\", \"avg_ns\", \"max_ns\"}, or for what is left out\n"
    "                      {\"parent\", \"depth\", \"more\" (nodes), \"calls\", \"total\",\n"
    "                      \"total_ns\"}\n"
    TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP
    "  -h, --help          print this help\n"
    "\n"
    "A trace without index tables (record's default, recovered) gets them built in a temporary\n"
    "copy first (tinytrace index writes them into the file once for all).\n"
    "\n"
    "Exits 0 on success; 2 on a usage error; 3 when the trace or its tables are damaged; 6 when\n"
    "FILE cannot be opened, memory runs out or the output cannot be written.\n";

enum sort_key { BY_TOTAL, BY_SELF, BY_CALLS, BY_AVG, BY_MAX, BY_NAME };

struct node {
    uint32_t parent, function;
    uint32_t first, next; /* callees, after sorting */
    uint64_t calls, total, self, max; /* ticks */
    int64_t self_acc;     /* self while the walk runs: total minus the callees' totals */
};

struct report {
    tool_trace *t;
    struct node *nodes;
    uint32_t n, cap;
    uint32_t *slots; /* hash table of node indexes, NO_NODE empty */
    uint32_t nslots;
    enum sort_key sort;
    uint64_t limit;          /* 0: all */
    double threshold_pct;    /* < 0: none */
    uint64_t threshold_ns;
    uint64_t threshold_ticks;
    uint64_t frames;
    uint64_t grand_total;    /* ticks of the roots */
    tt_error_info err;
};

static uint32_t hash(uint32_t parent, uint32_t fn)
{
    uint64_t k = ((uint64_t)parent << 32 | fn) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

static int grow(struct report *rp)
{
    uint32_t nslots = rp->nslots ? rp->nslots * 2 : 1024;
    uint32_t *slots = malloc((size_t)nslots * sizeof *slots);
    if (slots == NULL)
        return -1;
    memset(slots, 0xff, (size_t)nslots * sizeof *slots);
    for (uint32_t i = 0; i < rp->n; i++) {
        uint32_t h = hash(rp->nodes[i].parent, rp->nodes[i].function) & (nslots - 1);
        while (slots[h] != NO_NODE)
            h = (h + 1) & (nslots - 1);
        slots[h] = i;
    }
    free(rp->slots);
    rp->slots = slots;
    rp->nslots = nslots;
    return 0;
}

/* The node of @fn under @parent (NO_NODE: a root), made when new; NO_NODE when out of memory. */
static uint32_t node_of(struct report *rp, uint32_t parent, uint32_t fn)
{
    if (rp->nslots == 0 || rp->n >= rp->nslots / 2) {
        if (grow(rp) != 0)
            return NO_NODE;
    }
    uint32_t h = hash(parent, fn) & (rp->nslots - 1);
    for (;; h = (h + 1) & (rp->nslots - 1)) {
        uint32_t i = rp->slots[h];
        if (i == NO_NODE)
            break;
        if (rp->nodes[i].parent == parent && rp->nodes[i].function == fn)
            return i;
    }
    if (rp->n == rp->cap) {
        uint32_t cap = rp->cap ? rp->cap * 2 : 1024;
        struct node *nn = realloc(rp->nodes, (size_t)cap * sizeof *nn);
        if (nn == NULL || rp->n == NO_NODE - 1)
            return NO_NODE;
        rp->nodes = nn;
        rp->cap = cap;
    }
    rp->nodes[rp->n] = (struct node){.parent = parent, .function = fn, .first = NO_NODE,
                                     .next = NO_NODE};
    rp->slots[h] = rp->n;
    return rp->n++;
}

/* One thread's frames, last to first (see the top of the file). */
static int walk_thread(struct report *rp, uint32_t th)
{
    const tt_index_thread *ti = tt_index_thread_info(rp->t->ix, th);
    uint32_t at_depth[REPORT_DEPTH_MAX + 1];
    tt_frame f;
    int rc;

    if (ti == NULL)
        return TT_OK;
    for (uint64_t i = ti->frames; i-- > 0;) {
        if ((rc = tt_index_frame(rp->t->ix, th, i, &f, &rp->err)) != TT_OK)
            return rc;
        if ((++rp->frames & ((1u << 20) - 1)) == 0) {
            tool_progress_update(rp->frames);
            tool_trace_drop_pages(rp->t); /* a bounded resident size: tool.h */
        }
        if (f.depth > REPORT_DEPTH_MAX)
            continue; /* inside a "..." node, whose total holds it already */
        uint32_t d = f.depth;
        uint32_t parent = d == 0 ? NO_NODE : at_depth[d - 1];
        if (d > 0 && parent == NO_NODE)
            continue; /* below a frame that could not be placed: a damaged table */
        uint32_t k = node_of(rp, parent, d < REPORT_DEPTH_MAX ? f.function : ELLIPSIS_FN);
        if (k == NO_NODE)
            return TT_E_NOMEM;
        struct node *n = &rp->nodes[k];
        n->calls++;
        n->total += f.duration;
        n->self_acc += (int64_t)f.duration;
        if (f.duration > n->max)
            n->max = f.duration;
        if (parent != NO_NODE)
            rp->nodes[parent].self_acc -= (int64_t)f.duration; /* a direct callee's time */
        else
            rp->grand_total += f.duration;
        if (d < REPORT_DEPTH_MAX) {
            at_depth[d] = k;
            at_depth[d + 1] = NO_NODE; /* until a frame of that depth comes */
        }
    }
    return TT_OK;
}

static struct report *sort_ctx;

static int compare(const void *pa, const void *pb)
{
    const struct node *a = &sort_ctx->nodes[*(const uint32_t *)pa];
    const struct node *b = &sort_ctx->nodes[*(const uint32_t *)pb];
    uint64_t x = 0, y = 0;
    switch (sort_ctx->sort) {
    case BY_TOTAL: x = a->total, y = b->total; break;
    case BY_SELF: x = a->self, y = b->self; break;
    case BY_CALLS: x = a->calls, y = b->calls; break;
    case BY_AVG: x = a->total / a->calls, y = b->total / b->calls; break;
    case BY_MAX: x = a->max, y = b->max; break;
    case BY_NAME: {
        size_t la = 0, lb = 0;
        const char *sa = a->function == ELLIPSIS_FN ? "..." :
                         tool_object_name(sort_ctx->t->r, a->function, &la);
        const char *sb = b->function == ELLIPSIS_FN ? "..." :
                         tool_object_name(sort_ctx->t->r, b->function, &lb);
        if (a->function == ELLIPSIS_FN)
            la = 3;
        if (b->function == ELLIPSIS_FN)
            lb = 3;
        int c = memcmp(sa ? sa : "", sb ? sb : "", la < lb ? la : lb);
        if (c != 0)
            return c;
        if (la != lb)
            return la < lb ? -1 : 1;
        break;
    }
    }
    if (x != y)
        return x > y ? -1 : 1;
    return a->function < b->function ? -1 : a->function > b->function;
}

/* Links every node's callees in --sort order; returns the first root, or NO_NODE. */
static uint32_t link_sorted(struct report *rp, uint32_t *order)
{
    for (uint32_t i = 0; i < rp->n; i++) {
        struct node *n = &rp->nodes[i];
        n->self = n->self_acc > 0 ? (uint64_t)n->self_acc : 0;
        order[i] = i;
    }
    sort_ctx = rp;
    qsort(order, rp->n, sizeof *order, compare);
    /* walking the sorted order backwards and pushing each node in front of its parent's list
     * leaves every list in sorted order */
    uint32_t roots = NO_NODE;
    for (uint32_t k = rp->n; k-- > 0;) {
        struct node *n = &rp->nodes[order[k]];
        uint32_t *head = n->parent == NO_NODE ? &roots : &rp->nodes[n->parent].first;
        n->next = *head;
        *head = order[k];
    }
    return roots;
}

static uint64_t ns(const struct report *rp, uint64_t ticks)
{
    return tool_ticks_to_ns(ticks, rp->t->m.ticks_per_sec);
}

static int shown(const struct report *rp, const struct node *n)
{
    if (rp->threshold_pct >= 0)
        return (double)n->total * 100.0 >= rp->threshold_pct * (double)rp->grand_total;
    return n->total >= rp->threshold_ticks;
}

static void print_name(const struct report *rp, const struct node *n)
{
    if (n->function == ELLIPSIS_FN)
        fputs("...", stdout);
    else
        tool_print_object(stdout, rp->t->r, n->function);
}

static void print_line(const struct report *rp, const struct node *n, unsigned level)
{
    printf("%14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %12" PRIu64 " %14" PRIu64 "  ",
           ns(rp, n->total), ns(rp, n->self), n->calls, ns(rp, n->total) / n->calls,
           ns(rp, n->max));
    for (unsigned i = 0; i < level && i < 64; i++)
        fputs("  ", stdout);
    if (level > 64)
        printf("[%u] ", level);
    print_name(rp, n);
    fputc('\n', stdout);
}

/* What the walk meets: a node to show at @depth, or the rest of a list that --limit or
 * --threshold leaves out (@n NULL: @count nodes, @calls calls, @total ticks), under @parent. */
struct out {
    void (*node)(struct report *rp, struct out *o, uint32_t k, unsigned depth);
    void (*more)(struct report *rp, struct out *o, uint32_t parent, uint64_t count,
                 uint64_t calls, uint64_t total, unsigned depth);
    tool_json j;
};

/* Depth-first in --sort order, without recursion: each node's next sibling is the way back. */
static void walk(struct report *rp, uint32_t roots, struct out *o)
{
    uint32_t stack[REPORT_DEPTH_MAX + 2];
    uint64_t seen[REPORT_DEPTH_MAX + 2];
    unsigned depth = 0;
    uint32_t at = roots;

    seen[0] = 0;
    for (;;) {
        if (at == NO_NODE || (rp->limit && seen[depth] >= rp->limit) ||
            !shown(rp, &rp->nodes[at])) {
            uint64_t count = 0, calls = 0, total = 0;
            for (; at != NO_NODE; at = rp->nodes[at].next) {
                count++;
                calls += rp->nodes[at].calls;
                total += rp->nodes[at].total;
            }
            if (count > 0)
                o->more(rp, o, depth ? stack[depth - 1] : NO_NODE, count, calls, total, depth);
            if (depth == 0)
                break;
            at = rp->nodes[stack[--depth]].next;
            continue;
        }
        struct node *n = &rp->nodes[at];
        o->node(rp, o, at, depth);
        seen[depth]++;
        if (n->first != NO_NODE && depth + 1 < REPORT_DEPTH_MAX + 2) {
            stack[depth++] = at;
            seen[depth] = 0;
            at = n->first;
        } else {
            at = n->next;
        }
    }
}

static void text_node(struct report *rp, struct out *o, uint32_t k, unsigned depth)
{
    (void)o;
    print_line(rp, &rp->nodes[k], depth);
}

static void text_more(struct report *rp, struct out *o, uint32_t parent, uint64_t count,
                      uint64_t calls, uint64_t total, unsigned depth)
{
    (void)o;
    (void)parent;
    printf("%14" PRIu64 " %14s %10" PRIu64 " %12s %14s  ", ns(rp, total), "", calls, "", "");
    for (unsigned i = 0; i < depth && i < 64; i++)
        fputs("  ", stdout);
    printf("(%" PRIu64 " more)\n", count);
}

static void print_text(struct report *rp, uint32_t roots)
{
    struct out o = {.node = text_node, .more = text_more};
    tool_print_text(stdout, rp->t->path, strlen(rp->t->path));
    printf(": %" PRIu64 " frames, %" PRIu32 " call paths\n\n", rp->frames, rp->n);
    printf("%14s %14s %10s %12s %14s  %s\n", "TOTAL_NS", "SELF_NS", "CALLS", "AVG_NS", "MAX_NS",
           "FUNCTION");
    walk(rp, roots, &o);
}

static void json_parent(tool_json *j, uint32_t parent)
{
    if (parent == NO_NODE)
        tj_null(j, "parent");
    else
        tj_u64(j, "parent", parent);
}

static void json_node(struct report *rp, struct out *o, uint32_t k, unsigned depth)
{
    const struct node *n = &rp->nodes[k];
    tool_json *j = &o->j;
    tj_object_begin(j, NULL);
    tj_u64(j, "id", k);
    json_parent(j, n->parent);
    tj_u64(j, "depth", depth);
    if (n->function == ELLIPSIS_FN)
        tj_str(j, "function", "...");
    else
        tj_object_name(j, "function", rp->t->r, n->function);
    tj_u64(j, "calls", n->calls);
    tj_u64(j, "total", n->total);
    tj_u64(j, "self", n->self);
    tj_u64(j, "max", n->max);
    tj_u64(j, "total_ns", ns(rp, n->total));
    tj_u64(j, "self_ns", ns(rp, n->self));
    tj_u64(j, "avg_ns", ns(rp, n->total) / n->calls);
    tj_u64(j, "max_ns", ns(rp, n->max));
    tj_object_end(j);
}

static void json_more(struct report *rp, struct out *o, uint32_t parent, uint64_t count,
                      uint64_t calls, uint64_t total, unsigned depth)
{
    tool_json *j = &o->j;
    tj_object_begin(j, NULL);
    json_parent(j, parent);
    tj_u64(j, "depth", depth);
    tj_u64(j, "more", count);
    tj_u64(j, "calls", calls);
    tj_u64(j, "total", total);
    tj_u64(j, "total_ns", ns(rp, total));
    tj_object_end(j);
}

static void print_json(struct report *rp, uint32_t roots)
{
    struct out o = {.node = json_node, .more = json_more};
    tool_json *j = &o.j;
    tj_init(j, stdout);
    tj_object_begin(j, NULL);
    tj_str(j, "file", rp->t->path);
    tj_u64(j, "ticks_per_sec", rp->t->m.ticks_per_sec);
    tj_u64(j, "paths", rp->n);
    tj_u64(j, "frames", rp->frames);
    tj_array_begin(j, "graph");
    walk(rp, roots, &o);
    tj_array_end(j);
    tj_object_end(j);
    tj_newline(j);
}

enum { OPT_SORT = 's', OPT_LIMIT = 'n', OPT_THRESHOLD = 'T' };

static int take(void *ctx, const char *prog, int c, const char *arg)
{
    struct report *rp = ctx;
    static const char *const keys[] = {"total", "self", "calls", "avg", "max", "name"};
    switch (c) {
    case OPT_SORT:
        for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (strcmp(arg, keys[i]) == 0) {
                rp->sort = (enum sort_key)i;
                return TOOL_EXIT_OK;
            }
        return tool_usage_error(prog, "--sort: '%s' is none of total, self, calls, avg, max, "
                                "name", arg);
    case OPT_LIMIT:
        return tool_parse_u64(prog, "--limit", arg, 1, UINT64_MAX, &rp->limit);
    case OPT_THRESHOLD: {
        size_t len = strlen(arg);
        if (len > 1 && arg[len - 1] == '%') {
            char *end;
            double v = strtod(arg, &end);
            if (end == arg + len - 1 && v >= 0 && v <= 100) {
                rp->threshold_pct = v;
                return TOOL_EXIT_OK;
            }
        } else if (tool_parse_time_ns(arg, &rp->threshold_ns) == 0) {
            rp->threshold_pct = -1;
            return TOOL_EXIT_OK;
        }
        return tool_usage_error(prog, "--threshold: '%s' is neither a percentage (1%%) nor a "
                                "time (250us)", arg);
    }
    default:
        return tool_usage_hint(prog);
    }
}

int cmd_report(int argc, char **argv)
{
    static const struct option own[] = {
        {"sort", required_argument, NULL, OPT_SORT},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"threshold", required_argument, NULL, OPT_THRESHOLD},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_THREAD |
                                             TOOL_OPT_MAX_MEMORY | TOOL_OPT_NO_DEMANGLE,
                                   .options = own,
                                   .take = take};
    struct report rp = {.threshold_pct = 0};
    tool_opts o;
    tool_trace t;
    uint32_t *order = NULL;
    int rc, e = TT_OK;

    if ((rc = tool_opts_parse(&o, &verb, &rp, argc, argv)) != TOOL_GO_ON)
        return rc;
    tool_trace_map_files(1); /* every frame block is read: no system call per block */
    rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_INDEX);
    rp.t = &t;
    tool_error_info_init(&rp.err);
    if (rc == TOOL_EXIT_OK) {
        rp.threshold_ticks = tool_ns_to_ticks(rp.threshold_ns, t.m.ticks_per_sec);
        uint64_t frames = 0;
        for (uint32_t th = 0; th < t.m.thread_count; th++)
            if (!o.one_thread || th == o.thread)
                frames += tt_index_thread_info(t.ix, th)->frames;
        tool_progress_begin("tinytrace report", frames);
        for (uint32_t th = 0; th < t.m.thread_count && e == TT_OK; th++)
            if (!o.one_thread || th == o.thread)
                e = walk_thread(&rp, th);
        tool_progress_end();
        if (e == TT_E_NOMEM) {
            tool_error("%s: out of memory for %" PRIu32 " call paths", t.path, rp.n);
            rc = TOOL_EXIT_SYSTEM;
        } else if (e != TT_OK) {
            rc = tool_report(t.path, "frame table", e, &rp.err);
        }
    }
    if (rc == TOOL_EXIT_OK && (order = malloc(((size_t)rp.n + 1) * sizeof *order)) == NULL) {
        tool_error("%s: out of memory", t.path);
        rc = TOOL_EXIT_SYSTEM;
    }
    if (rc == TOOL_EXIT_OK) {
        uint32_t roots = link_sorted(&rp, order);
        if (o.json)
            print_json(&rp, roots);
        else
            print_text(&rp, roots);
    }
    free(order);
    free(rp.nodes);
    free(rp.slots);
    tool_trace_close(&t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
