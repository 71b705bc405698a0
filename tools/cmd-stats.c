/* SPDX-License-Identifier: MIT */
/* tinytrace stats — where the time went: per-function totals, per-thread and per-kind counts.
 *
 * Everything comes from the index tables (the summary, the directory's per-thread kind counts)
 * and the thread and object tables: no event chunk and no frame block is read, so the answer
 * takes the same time and memory for a trace of a thousand events as for one of billions.
 */
#include "opts.h"
#include "tool.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: tinytrace stats [--sort KEY] [--limit N] [--json] [--no-demangle]\n"
    "                       [--max-memory MB] [--process P] FILE\n"
    "\n"
    "Prints, from the index tables of trace FILE (no event is read):\n"
    "  functions  one line per function, sorted by self time (longest first) or --sort:\n"
    "             SELF_NS TOTAL_NS CALLS AVG_NS LONGEST_NS MAX_DEPTH FUNCTION\n"
    "             (FILE:LINE where the program's debug information says, debug file too)\n"
    "             self time excludes the time of direct callees; total time adds up every\n"
    "             call, so a recursive function's nested calls count once per level\n"
    "  threads    ID EVENTS FRAMES MAX_DEPTH FIRST_NS LAST_NS NAME (CRASHED when it recorded\n"
    "             a crash)\n"
    "  kinds      the number of events of each kind, over all threads\n"
    "\n"
    "Options:\n"
    "  -s, --sort KEY      order of the functions: self (default), total, calls, avg, max or\n"
    "                      name\n"
    "  -n, --limit N       only the first N functions in that order\n"
    "  -j, --json          one JSON object: file, events, frames, functions[], threads[],\n"
    "                      kinds{}\n" TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP TOOL_PROCESS_HELP
    "  -h, --help          print this help\n"
    "\n"
    "A trace without index tables (record's default, recovered) gets them built in a temporary\n"
    "copy first (tinytrace index writes them into the file once for all).\n"
    "\n"
    "Exits 0 on success; 3 when the trace or its tables are damaged; 6 when FILE cannot be\n"
    "opened or the output written.\n";

struct ctx {
    tool_trace *t;
    tt_index *ix;
    const tt_summary_entry **rows;
    uint32_t nrows;
    uint32_t shown;       /* the first rows that --limit leaves */
    const char *sorted_by;
};

enum sort_key { BY_SELF, BY_TOTAL, BY_CALLS, BY_AVG, BY_MAX, BY_NAME };

struct options {
    enum sort_key sort;
    uint64_t limit; /* 0: all */
};

/* qsort has no context: the one sort of the one run */
static struct {
    enum sort_key key;
    const tt_reader *r;
} sorting;

static int by_key(const void *a, const void *b)
{
    const tt_summary_entry *x = *(const tt_summary_entry *const *)a;
    const tt_summary_entry *y = *(const tt_summary_entry *const *)b;
    uint64_t u = 0, v = 0;
    switch (sorting.key) {
    case BY_SELF: u = x->self, v = y->self; break;
    case BY_TOTAL: u = x->total, v = y->total; break;
    case BY_CALLS: u = x->calls, v = y->calls; break;
    case BY_AVG: u = x->total / x->calls, v = y->total / y->calls; break;
    case BY_MAX: u = x->longest, v = y->longest; break;
    case BY_NAME: {
        size_t lx = 0, ly = 0;
        const char *sx = tool_object_name(sorting.r, x->function, &lx);
        const char *sy = tool_object_name(sorting.r, y->function, &ly);
        int c = memcmp(sx ? sx : "", sy ? sy : "", (sx ? lx : 0) < (sy ? ly : 0) ? lx : ly);
        if (sx == NULL || sy == NULL)
            c = (sx != NULL) - (sy != NULL);
        if (c != 0)
            return c;
        if (lx != ly)
            return lx < ly ? -1 : 1;
        break;
    }
    }
    if (u != v)
        return u > v ? -1 : 1;
    return x->function < y->function ? -1 : x->function > y->function;
}

static int take(void *ctx, const char *prog, int c, const char *arg)
{
    struct options *op = ctx;
    static const char *const keys[] = {"self", "total", "calls", "avg", "max", "name"};
    if (c == 'n')
        return tool_parse_u64(prog, "--limit", arg, 1, UINT32_MAX, &op->limit);
    for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(arg, keys[i]) == 0) {
            op->sort = (enum sort_key)i;
            return TOOL_EXIT_OK;
        }
    return tool_usage_error(prog, "--sort: '%s' is none of self, total, calls, avg, max, name",
                            arg);
}

static const char *const sort_names[] = {"self time", "total time", "calls", "average time",
                                         "longest call", "name"};

static uint64_t ns(const struct ctx *c, uint64_t ticks)
{
    return tool_ticks_to_ns(ticks, c->t->m.ticks_per_sec);
}

/* The frames and the events of each kind, over all threads. */
static void totals(const struct ctx *c, uint64_t *frames, uint64_t kinds[TT_EV_KIND_MAX + 1])
{
    *frames = 0;
    memset(kinds, 0, (TT_EV_KIND_MAX + 1) * sizeof kinds[0]);
    for (uint32_t i = 0; i < c->t->m.thread_count; i++) {
        const tt_index_thread *ti = tt_index_thread_info(c->ix, i);
        *frames += ti->frames;
        for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
            kinds[k] += ti->kinds[k];
    }
}

static void print_text(const struct ctx *c)
{
    const tt_manifest *m = &c->t->m;
    uint64_t frames, kinds[TT_EV_KIND_MAX + 1];
    totals(c, &frames, kinds);
    tool_print_text(stdout, c->t->path, strlen(c->t->path));
    printf(": %" PRIu64 " events, %" PRIu64 " frames, %u threads, %u functions called\n",
           m->event_count, frames, m->thread_count, c->nrows);
    printf("\nfunctions (by %s", c->sorted_by);
    if (c->shown < c->nrows)
        printf(", the first %" PRIu32, c->shown);
    printf(")\n%14s %14s %10s %12s %14s %5s  %s\n", "SELF_NS", "TOTAL_NS", "CALLS", "AVG_NS",
           "LONGEST_NS", "DEPTH", "FUNCTION");
    for (uint32_t i = 0; i < c->shown; i++) {
        const tt_summary_entry *e = c->rows[i];
        printf("%14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %5u  ",
               ns(c, e->self), ns(c, e->total), e->calls, ns(c, e->total) / e->calls,
               ns(c, e->longest), e->max_depth);
        tool_print_object(stdout, c->t->r, e->function);
        const char *at = tool_function_location(c->t->r, e->function);
        if (at != NULL) {
            fputs(" (", stdout);
            tool_print_text(stdout, at, strlen(at));
            fputc(')', stdout);
        }
        fputc('\n', stdout);
    }
    printf("\nthreads\n%6s %12s %12s %5s %14s %14s  %s\n", "ID", "EVENTS", "FRAMES", "DEPTH",
           "FIRST_NS", "LAST_NS", "NAME");
    for (uint32_t i = 0; i < m->thread_count; i++) {
        const tt_thread_entry *te = tt_reader_thread(c->t->r, i);
        const tt_index_thread *ti = tt_index_thread_info(c->ix, i);
        printf("%6u %12" PRIu64 " %12" PRIu64 " %5u %14" PRIu64 " %14" PRIu64 "  ", i,
               te->event_count, ti->frames, ti->max_depth, ns(c, te->first_time),
               ns(c, te->last_time));
        tool_print_object(stdout, c->t->r, te->name);
        if (ti->crashed)
            fputs(" CRASHED", stdout);
        fputc('\n', stdout);
    }
    printf("\nkinds\n");
    for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
        if (kinds[k])
            printf("%14" PRIu64 "  %s\n", kinds[k], tt_event_kind_name(k));
}

static void print_json(const struct ctx *c)
{
    const tt_manifest *m = &c->t->m;
    tool_json j;
    uint64_t frames, kinds[TT_EV_KIND_MAX + 1];
    totals(c, &frames, kinds);
    tj_init(&j, stdout);
    tj_object_begin(&j, NULL);
    tj_str(&j, "file", c->t->path);
    tj_u64(&j, "events", m->event_count);
    tj_u64(&j, "frames", frames);
    tj_u64(&j, "ticks_per_sec", m->ticks_per_sec);
    tj_u64(&j, "functions_called", c->nrows);
    tj_array_begin(&j, "functions");
    for (uint32_t i = 0; i < c->shown; i++) {
        const tt_summary_entry *e = c->rows[i];
        tj_object_begin(&j, NULL);
        tj_u64(&j, "function_id", e->function);
        tj_object_name(&j, "function", c->t->r, e->function);
        const char *at = tool_function_location(c->t->r, e->function);
        if (at != NULL)
            tj_str(&j, "location", at);
        else
            tj_null(&j, "location");
        tj_u64(&j, "calls", e->calls);
        tj_u64(&j, "self", e->self);
        tj_u64(&j, "total", e->total);
        tj_u64(&j, "self_ns", ns(c, e->self));
        tj_u64(&j, "total_ns", ns(c, e->total));
        tj_u64(&j, "longest", e->longest);
        tj_u64(&j, "longest_ns", ns(c, e->longest));
        tj_u64(&j, "longest_thread", e->longest_thread);
        tj_u64(&j, "longest_frame", e->longest_frame);
        tj_u64(&j, "max_depth", e->max_depth);
        tj_object_end(&j);
    }
    tj_array_end(&j);
    tj_array_begin(&j, "threads");
    for (uint32_t i = 0; i < m->thread_count; i++) {
        const tt_thread_entry *te = tt_reader_thread(c->t->r, i);
        const tt_index_thread *ti = tt_index_thread_info(c->ix, i);
        tj_object_begin(&j, NULL);
        tj_u64(&j, "id", i);
        tj_object_name(&j, "name", c->t->r, te->name);
        tj_u64(&j, "events", te->event_count);
        tj_u64(&j, "frames", ti->frames);
        tj_u64(&j, "max_depth", ti->max_depth);
        tj_bool(&j, "crashed", (int)ti->crashed);
        tj_u64(&j, "first_ns", ns(c, te->first_time));
        tj_u64(&j, "last_ns", ns(c, te->last_time));
        tj_object_begin(&j, "kinds");
        for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
            if (ti->kinds[k])
                tj_u64(&j, tt_event_kind_name(k), ti->kinds[k]);
        tj_object_end(&j);
        tj_object_end(&j);
    }
    tj_array_end(&j);
    tj_object_begin(&j, "kinds");
    for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
        tj_u64(&j, tt_event_kind_name(k), kinds[k]);
    tj_object_end(&j);
    tj_object_end(&j);
    tj_newline(&j);
}

int cmd_stats(int argc, char **argv)
{
    static const struct option own[] = {
        {"sort", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    struct options op = {.sort = BY_SELF};
    static const tool_verb verb = {.usage = usage, .options = own, .take = take,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY |
                                             TOOL_OPT_NO_DEMANGLE | TOOL_OPT_PROCESS};
    tool_opts o;
    tool_trace t;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, &op, argc, argv)) != TOOL_GO_ON)
        return rc;
    rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_INDEX);
    struct ctx cx = { .t = &t, .ix = t.ix };
    if (rc == TOOL_EXIT_OK) {
        cx.nrows = tt_index_summary_count(cx.ix);
        cx.rows = malloc((cx.nrows ? cx.nrows : 1) * sizeof *cx.rows);
        if (cx.rows == NULL) {
            tool_error("%s: out of memory", t.path);
            rc = TOOL_EXIT_SYSTEM;
        }
    }
    if (rc == TOOL_EXIT_OK) {
        for (uint32_t i = 0; i < cx.nrows; i++)
            cx.rows[i] = tt_index_summary(cx.ix, i);
        sorting.key = op.sort;
        sorting.r = t.r;
        qsort(cx.rows, cx.nrows, sizeof *cx.rows, by_key);
        cx.sorted_by = sort_names[op.sort];
        cx.shown = op.limit && op.limit < cx.nrows ? (uint32_t)op.limit : cx.nrows;
        if (o.json)
            print_json(&cx);
        else
            print_text(&cx);
    }
    free(cx.rows);
    tool_trace_close(&t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
