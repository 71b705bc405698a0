/* tinytrace tree — the call tree of a trace, from its frame table.
 *
 * The frame table holds each thread's calls in post-order with explicit child lists
 * (tinytrace/index.h). The tree is walked top-down: a thread's top-level calls are found from
 * its last frame backwards (the one before a top-level frame's subtree is the previous top-level
 * frame), and each printed frame's children come from its child list. Only the frames that are
 * printed, and the children of printed frames that a filter rejects, are read: `--depth 3` on a
 * run of billions of calls reads the blocks of its first three levels, not the run.
 *
 * --function scans every frame of the thread(s) in order (sequential block reads) for the
 * function's calls, and climbs from each only to the ancestors the previous call did not share; --folded walks every frame and adds each one's self time to its stack in a
 * hash table of distinct call paths, so memory grows with the paths, not the calls.
 */
#include "opts.h"
#include "tool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: tinytrace tree [--thread N] [--depth D] [--min-duration TIME] [--function NAME]\n"
    "                      [--folded] [--max-memory MB] FILE\n"
    "\n"
    "Prints the call tree of trace FILE from its index tables, one call per line, indented two\n"
    "spaces per level, for each thread:\n"
    "  thread ID NAME: FRAMES calls\n"
    "    FUNCTION DURATION_NS ns [OUTCOME]\n"
    "OUTCOME is shown when a call did not return: 'crashed' (its thread crashed inside it),\n"
    "'open' (still running when the recording ended) or 'abandoned' (a caller exited first).\n"
    "\n"
    "Options:\n"
    "  -t, --thread N          only thread N\n"
    "  -d, --depth D           only calls at nesting levels 0 .. D-1\n"
    "  -m, --min-duration TIME only calls that took at least TIME (250us, 1.5ms, 2s, 800ns),\n"
    "                          and their subtrees\n"
    "  -f, --function NAME     every call of function NAME, each with its subtree (--depth\n"
    "                          counts from it), after a line with its call path\n"
    "  -F, --folded            folded stacks for flame-graph tools: one line per distinct call\n"
    "                          path, 'thread-name;caller;...;function SELF_NS'\n" TOOL_MAX_MEMORY_HELP
    "  -h, --help              print this help\n"
    "\n"
    "Exits 0 on success; 2 on a usage error (an unknown thread or function); 3 when the tables\n"
    "are damaged or missing (recovered and version-1 traces have none); 6 when FILE cannot be\n"
    "opened or the output written.\n";

struct opts {
    int one_thread;
    uint32_t thread;
    uint64_t depth;        /* UINT64_MAX: all */
    uint64_t min_ns;       /* --min-duration, as given */
    uint64_t min_ticks;    /* the same in the trace's ticks */
    const char *fname;     /* --function, as given */
    int by_function;
    uint32_t function;
    int folded;
};

struct ctx {
    tool_trace *t;
    tt_index *ix;
    struct opts o;
    tt_error_info err;
    /* print_subtree's stack: per printed level, a frame and its next child to find */
    struct item { uint64_t frame, next; uint32_t depth, level; } *stack;
    size_t n, cap;
};

static int push(struct ctx *c, uint64_t frame, uint32_t depth, uint64_t next, uint32_t level)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        struct item *ns = realloc(c->stack, ncap * sizeof *ns);
        if (ns == NULL)
            return TT_E_NOMEM;
        c->stack = ns;
        c->cap = ncap;
    }
    c->stack[c->n++] = (struct item){ frame, next, depth, level };
    return TT_OK;
}

static const char *outcome_name(uint32_t o)
{
    switch (o) {
    case TT_FRAME_CRASHED: return " crashed";
    case TT_FRAME_OPEN: return " open";
    case TT_FRAME_ABANDONED: return " abandoned";
    default: return "";
    }
}

static void print_frame(struct ctx *c, const tt_frame *f, uint32_t level)
{
    for (uint32_t i = 0; i < level + 1; i++)
        fputs("  ", stdout);
    tool_print_object(stdout, c->t->r, f->function);
    fputc(' ', stdout);
    tool_print_u64(stdout, tool_ticks_to_ns(f->duration, c->t->m.ticks_per_sec));
    fputs(" ns", stdout);
    fputs(outcome_name(f->outcome), stdout);
    fputc('\n', stdout);
}

/* Sets c->err to a damaged frame table: "FILE: frame @frame of thread @th " and @fmt. */
__attribute__((format(printf, 4, 5))) static int damaged(struct ctx *c, uint32_t th,
                                                          uint64_t frame, const char *fmt, ...)
{
    c->err.code = TT_E_CORRUPT;
    c->err.sys_errno = 0;
    c->err.offset = UINT64_MAX;
    int n = snprintf(c->err.message, sizeof c->err.message, "%s: frame %" PRIu64 " of thread %"
                     PRIu32 " ", c->t->path, frame, th);
    if (n > 0 && (size_t)n < sizeof c->err.message) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err.message + n, sizeof c->err.message - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return TT_E_CORRUPT;
}

/* The frame at depth @depth whose subtree starts at frame @x: @x itself or an ancestor. In
 * post-order the first frame of a subtree is its leftmost leaf, so climbing from the frame just
 * after a sibling (or from a subtree's first frame) reaches the next sibling (or first child). */
static int climb(struct ctx *c, uint32_t th, uint64_t x, uint32_t depth, tt_frame *f)
{
    int rc;
    const uint64_t from = x;
    for (;;) {
        if ((rc = tt_index_frame(c->ix, th, x, f, &c->err)) != TT_OK)
            return rc;
        if (f->depth <= depth)
            break;
        if ((rc = tt_index_parent(c->ix, th, x, &x, &c->err)) != TT_OK)
            return rc;
        if (x == TT_FRAME_NONE)
            break;
    }
    if (f->depth != depth)
        return damaged(c, th, from, "has no ancestor at depth %" PRIu32 ": the frame table is "
                       "damaged", depth);
    return TT_OK;
}

/* Prints the subtree of @root (at printed level 0), depth-first in call order. Children are
 * found first to last by climbing (above), so the stack holds one entry per printed level,
 * never a frame's list of children: a frame with 10^8 children costs no memory. */
static int print_subtree(struct ctx *c, uint32_t th, uint64_t root)
{
    int rc;
    tt_frame f;
    if ((rc = tt_index_frame(c->ix, th, root, &f, &c->err)) != TT_OK)
        return rc;
    if (f.duration < c->o.min_ticks)
        return TT_OK;
    print_frame(c, &f, 0);
    c->n = 0;
    if (f.desc && c->o.depth > 1 && (rc = push(c, f.index, f.depth, f.index - f.desc, 1)) != TT_OK)
        return rc;
    while (c->n) {
        struct item *it = &c->stack[c->n - 1];
        if (it->next >= it->frame) { /* every child printed */
            c->n--;
            continue;
        }
        uint32_t level = it->level;
        if ((rc = climb(c, th, it->next, it->depth + 1, &f)) != TT_OK)
            return rc;
        if (f.index >= it->frame)
            return damaged(c, th, f.index, "is not inside its parent's subtree: the frame table "
                           "is damaged");
        it->next = f.index + 1;
        if (f.duration < c->o.min_ticks)
            continue;
        print_frame(c, &f, level);
        if (f.desc && level + 1 < c->o.depth &&
            (rc = push(c, f.index, f.depth, f.index - f.desc, level + 1)) != TT_OK)
            return rc;
    }
    return TT_OK;
}

static void print_thread_head(struct ctx *c, uint32_t th)
{
    const tt_thread_entry *te = tt_reader_thread(c->t->r, th);
    printf("thread %" PRIu32 " ", th);
    tool_print_object(stdout, c->t->r, te->name);
    printf(": %" PRIu64 " calls\n", tt_index_thread_info(c->ix, th)->frames);
}

static int tree_thread(struct ctx *c, uint32_t th)
{
    uint64_t frames = tt_index_thread_info(c->ix, th)->frames;
    int rc = TT_OK;
    print_thread_head(c, th);
    /* the top-level calls, first to last: each one starts right after the one before */
    for (uint64_t y = 0; y < frames && rc == TT_OK;) {
        tt_frame f;
        if ((rc = climb(c, th, y, 0, &f)) != TT_OK)
            break;
        rc = print_subtree(c, th, f.index);
        y = f.index + 1;
    }
    return rc;
}

/* A call path, from the top: the ancestors of the last match, each with the first frame of
 * its subtree. The next match's path shares every ancestor whose subtree holds it, so only the
 * rest is climbed (tt_index_parent scans forward to the parent: climbing again from every match
 * to the top would scan to the thread's end each time). */
#define PATH_MAX_SHOWN 256

struct anc {
    uint64_t index, first;
    uint32_t function;
};

static int corrupt_path(struct ctx *c, uint32_t th, uint64_t i)
{
    return damaged(c, th, i, "lies inside a frame that is not among its ancestors: the frame "
                   "table is damaged");
}

/* Fills @path (*@np entries on entry: the previous match's ancestors from the top, or 0) with
 * the ancestors of frame @i, which is at depth @depth: all of them, or the nearest
 * PATH_MAX_SHOWN when there are more (*@cut is then set). A frame's depth is its number of
 * ancestors, so those of the previous path whose subtree holds @i are its top ones, and only
 * the rest are climbed to. */
static int path_of_frame(struct ctx *c, uint32_t th, uint64_t i, uint32_t depth, struct anc *path,
                         size_t *np, int *cut)
{
    size_t n = *np;
    while (n > 0 && !(path[n - 1].first <= i && i < path[n - 1].index))
        n--;
    if (n > depth)
        return corrupt_path(c, th, i);
    *cut = depth > PATH_MAX_SHOWN;
    const size_t need = depth - n < PATH_MAX_SHOWN ? depth - n : PATH_MAX_SHOWN;
    uint64_t up[PATH_MAX_SHOWN], p = i;
    for (size_t k = 0; k < need; k++) {
        int rc = tt_index_parent(c->ix, th, p, &p, &c->err);
        if (rc != TT_OK)
            return rc;
        if (p == TT_FRAME_NONE)
            return corrupt_path(c, th, i);
        up[k] = p;
    }
    if (n + need > PATH_MAX_SHOWN) { /* the nearest PATH_MAX_SHOWN: up, then the memo's last */
        size_t keep = PATH_MAX_SHOWN - need;
        memmove(path, path + n - keep, keep * sizeof *path);
        n = keep;
    }
    for (size_t k = need; k-- > 0;) {
        tt_frame a;
        int rc = tt_index_frame(c->ix, th, up[k], &a, &c->err);
        if (rc != TT_OK)
            return rc;
        /* what was climbed to must lie inside the subtree of the memo's deepest ancestor */
        if (n > 0 && !(path[n - 1].first <= a.index - a.desc && a.index < path[n - 1].index))
            return corrupt_path(c, th, i);
        path[n++] = (struct anc){ .index = a.index, .first = a.index - a.desc,
                                  .function = a.function };
    }
    *np = n;
    return TT_OK;
}

static int function_thread(struct ctx *c, uint32_t th)
{
    uint64_t frames = tt_index_thread_info(c->ix, th)->frames;
    int rc = TT_OK;
    struct anc path[PATH_MAX_SHOWN];
    size_t np = 0;
    int cut = 0;
    tool_progress_begin("tree: looking for the function", frames);
    for (uint64_t i = 0; i < frames && rc == TT_OK; i++) {
        tt_frame f;
        tool_progress_update(i);
        if ((rc = tt_index_frame(c->ix, th, i, &f, &c->err)) != TT_OK)
            break;
        if (f.function != c->o.function || f.duration < c->o.min_ticks)
            continue;
        if (cut) /* a cut path is no memo: its top is unknown */
            np = 0;
        if ((rc = path_of_frame(c, th, i, f.depth, path, &np, &cut)) != TT_OK)
            break;
        printf("thread %" PRIu32 " frame %" PRIu64 ":", th, i);
        if (cut)
            fputs(" ...", stdout);
        for (size_t k = 0; k < np; k++) {
            fputc(' ', stdout);
            tool_print_object(stdout, c->t->r, path[k].function);
            fputs(" >", stdout);
        }
        fputc(' ', stdout);
        tool_print_object(stdout, c->t->r, f.function);
        fputc('\n', stdout);
        rc = print_subtree(c, th, i);
    }
    tool_progress_end();
    return rc;
}

/* ---- folded stacks: a hash table of call paths (parent path, function) -> self time ---- */

struct path {
    uint32_t parent;   /* path number + 1; 0: the thread */
    uint32_t fn;
    uint64_t self;
};

struct paths {
    struct path *v;
    uint32_t n, cap;
    uint32_t *slots;   /* path number + 1 */
    uint32_t nslots;
};

static uint32_t path_of(struct paths *ps, uint32_t parent, uint32_t fn)
{
    if ((uint64_t)(ps->n + 1) * 2 > ps->nslots) {
        uint32_t ns = ps->nslots ? ps->nslots * 2 : 1024;
        uint32_t *sl = calloc(ns, sizeof *sl);
        if (sl == NULL)
            return UINT32_MAX;
        for (uint32_t i = 0; i < ps->n; i++) {
            uint32_t h = (ps->v[i].parent * 2654435761u ^ ps->v[i].fn * 40503u) & (ns - 1);
            while (sl[h])
                h = (h + 1) & (ns - 1);
            sl[h] = i + 1;
        }
        free(ps->slots);
        ps->slots = sl;
        ps->nslots = ns;
    }
    uint32_t h = (parent * 2654435761u ^ fn * 40503u) & (ps->nslots - 1);
    while (ps->slots[h]) {
        struct path *p = &ps->v[ps->slots[h] - 1];
        if (p->parent == parent && p->fn == fn)
            return ps->slots[h] - 1;
        h = (h + 1) & (ps->nslots - 1);
    }
    if (ps->n == ps->cap) {
        uint32_t nc = ps->cap ? ps->cap * 2 : 1024;
        struct path *nv = realloc(ps->v, nc * sizeof *nv);
        if (nv == NULL)
            return UINT32_MAX;
        ps->v = nv;
        ps->cap = nc;
    }
    ps->v[ps->n] = (struct path){ parent, fn, 0 };
    ps->slots[h] = ps->n + 1;
    return ps->n++;
}

static void print_path(struct ctx *c, const struct paths *ps, uint32_t p)
{
    if (ps->v[p].parent)
        print_path(c, ps, ps->v[p].parent - 1);
    fputc(';', stdout);
    tool_print_object(stdout, c->t->r, ps->v[p].fn);
}

static int folded_thread(struct ctx *c, uint32_t th)
{
    struct paths ps = {0};
    uint64_t frames = tt_index_thread_info(c->ix, th)->frames, done = 0;
    int rc = TT_OK;
    /* Frames last to first: in reverse post-order a frame's parent comes before it, so the
     * path of the last frame seen at each depth is the whole state (memory grows with the
     * depth, not with the number of calls). A frame's duration is added to its own path's self
     * time and taken off its parent's. */
    uint32_t levels = tt_index_thread_info(c->ix, th)->max_depth + 1;
    uint32_t *at = malloc((size_t)levels * sizeof *at);
    if (at == NULL)
        rc = TT_E_NOMEM;
    for (uint32_t d = 0; at && d < levels; d++)
        at[d] = UINT32_MAX;
    tool_progress_begin("tree: folding", frames);
    for (uint64_t i = frames; i-- > 0 && rc == TT_OK;) {
        tt_frame f;
        if ((rc = tt_index_frame(c->ix, th, i, &f, &c->err)) != TT_OK)
            break;
        tool_progress_update(++done);
        if (f.depth >= levels || (f.depth && at[f.depth - 1] == UINT32_MAX)) {
            rc = damaged(c, th, i, "has depth %" PRIu32 " but no parent", f.depth);
            break;
        }
        uint32_t parent = f.depth ? at[f.depth - 1] + 1 : 0;
        uint32_t p = path_of(&ps, parent, f.function);
        if (p == UINT32_MAX) {
            rc = TT_E_NOMEM;
            break;
        }
        at[f.depth] = p;
        ps.v[p].self += f.duration;
        if (parent)
            ps.v[parent - 1].self -= f.duration;
    }
    free(at);
    tool_progress_end();
    const tt_thread_entry *te = tt_reader_thread(c->t->r, th);
    for (uint32_t p = 0; rc == TT_OK && p < ps.n; p++) {
        if (ps.v[p].self == 0 || ps.v[p].self > INT64_MAX) /* (children longer: a bad file) */
            continue;
        if (te->name)
            tool_print_object(stdout, c->t->r, te->name);
        else
            printf("thread-%" PRIu32, th);
        print_path(c, &ps, p);
        fputc(' ', stdout);
        tool_print_u64(stdout, tool_ticks_to_ns(ps.v[p].self, c->t->m.ticks_per_sec));
        fputc('\n', stdout);
    }
    free(ps.v);
    free(ps.slots);
    return rc;
}

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct opts *o = ctx;

    switch (c) {
    case 'd':
        return tool_parse_u64(prog, "--depth", arg, 1, UINT64_MAX, &o->depth);
    case 'm':
        if (tool_parse_time_ns(arg, &o->min_ns) != 0)
            return tool_usage_error(prog, "--min-duration: '%s' is not a time with a unit (ns, "
                                    "us, ms, s)", arg);
        return TOOL_EXIT_OK;
    case 'f':
        o->fname = arg;
        return TOOL_EXIT_OK;
    case 'F':
        o->folded = 1;
        return TOOL_EXIT_OK;
    default:
        return tool_usage_hint(prog);
    }
}

/* What the options name in this trace (tool_trace_start checked the thread): the function
 * must be one of its objects, the duration is taken in its ticks. Reports a mistake (a usage
 * error). */
static int resolve_options(struct ctx *cx)
{
    const tool_trace *t = cx->t;
    if (cx->o.fname != NULL) {
        cx->o.by_function = 1;
        cx->o.function = tt_reader_find_object(t->r, TT_OBJ_FUNCTION, cx->o.fname);
        if (cx->o.function == 0) {
            tool_error("%s: no function named '%s' in the trace", t->path, cx->o.fname);
            return TOOL_EXIT_USAGE;
        }
    }
    cx->o.min_ticks = cx->o.min_ns ? tool_ns_to_ticks(cx->o.min_ns, t->m.ticks_per_sec) : 0;
    return TOOL_EXIT_OK;
}

/* Prints every thread (or the one of --thread) as the options ask. */
static int print_threads(struct ctx *cx)
{
    int e = TT_OK;
    tool_error_info_init(&cx->err);
    for (uint32_t th = 0; th < cx->t->m.thread_count && e == TT_OK; th++) {
        if (cx->o.one_thread && th != cx->o.thread)
            continue;
        if (cx->o.folded)
            e = folded_thread(cx, th);
        else if (cx->o.by_function)
            e = function_thread(cx, th);
        else
            e = tree_thread(cx, th);
    }
    if (e == TT_E_NOMEM) {
        tool_error("%s: out of memory", cx->t->path);
        return TOOL_EXIT_SYSTEM;
    }
    if (e != TT_OK)
        return tool_report(cx->t->path, "frame table", e, &cx->err);
    return TOOL_EXIT_OK;
}

int cmd_tree(int argc, char **argv)
{
    static const struct option options[] = {
        {"depth", required_argument, NULL, 'd'},
        {"min-duration", required_argument, NULL, 'm'},
        {"function", required_argument, NULL, 'f'},
        {"folded", no_argument, NULL, 'F'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_THREAD | TOOL_OPT_MAX_MEMORY,
                                   .options = options,
                                   .take = take_option};
    struct ctx cx = {.o.depth = UINT64_MAX};
    tool_opts o;
    tool_trace t;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, &cx.o, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (cx.o.folded && cx.o.fname != NULL)
        return tool_usage_error(argv[0], "--folded and --function do not go together");
    cx.o.one_thread = o.one_thread;
    cx.o.thread = o.thread;
    rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_INDEX);
    cx.t = &t;
    cx.ix = t.ix;
    if (rc == TOOL_EXIT_OK)
        rc = resolve_options(&cx);
    if (rc == TOOL_EXIT_OK)
        rc = print_threads(&cx);
    free(cx.stack);
    tool_trace_close(&t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
