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
    "Usage: tinytrace stats [--json] [--max-memory MB] FILE\n"
    "\n"
    "Prints, from the index tables of trace FILE (no event is read):\n"
    "  functions  one line per function, sorted by self time (longest first):\n"
    "             SELF_NS TOTAL_NS CALLS AVG_NS LONGEST_NS MAX_DEPTH FUNCTION\n"
    "             self time excludes the time of direct callees; total time adds up every\n"
    "             call, so a recursive function's nested calls count once per level\n"
    "  threads    ID EVENTS FRAMES MAX_DEPTH FIRST_NS LAST_NS NAME (CRASHED when it recorded\n"
    "             a crash)\n"
    "  kinds      the number of events of each kind, over all threads\n"
    "\n"
    "Options:\n"
    "  -j, --json          one JSON object: file, events, frames, functions[], threads[],\n"
    "                      kinds{}\n" TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP
    "  -h, --help          print this help\n"
    "\n"
    "Exits 0 on success; 3 when the tables are damaged or missing (a recovered or version-1\n"
    "trace has no index tables); 6 when FILE cannot be opened or the output written.\n";

struct ctx {
    tool_trace *t;
    tt_index *ix;
    const tt_summary_entry **rows;
    uint32_t nrows;
};

static int by_self(const void *a, const void *b)
{
    const tt_summary_entry *x = *(const tt_summary_entry *const *)a;
    const tt_summary_entry *y = *(const tt_summary_entry *const *)b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    return x->function < y->function ? -1 : x->function > y->function;
}

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
    printf("\nfunctions (by self time)\n%14s %14s %10s %12s %14s %5s  %s\n", "SELF_NS", "TOTAL_NS",
           "CALLS", "AVG_NS", "LONGEST_NS", "DEPTH", "FUNCTION");
    for (uint32_t i = 0; i < c->nrows; i++) {
        const tt_summary_entry *e = c->rows[i];
        printf("%14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %5u  ",
               ns(c, e->self), ns(c, e->total), e->calls, ns(c, e->total) / e->calls,
               ns(c, e->longest), e->max_depth);
        tool_print_object(stdout, c->t->r, e->function);
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
    tj_array_begin(&j, "functions");
    for (uint32_t i = 0; i < c->nrows; i++) {
        const tt_summary_entry *e = c->rows[i];
        tj_object_begin(&j, NULL);
        tj_u64(&j, "function_id", e->function);
        tj_object_name(&j, "function", c->t->r, e->function);
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
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY |
                                             TOOL_OPT_NO_DEMANGLE};
    tool_opts o;
    tool_trace t;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, NULL, argc, argv)) != TOOL_GO_ON)
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
        qsort(cx.rows, cx.nrows, sizeof *cx.rows, by_self);
        if (o.json)
            print_json(&cx);
        else
            print_text(&cx);
    }
    free(cx.rows);
    tool_trace_close(&t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
