/* SPDX-License-Identifier: MIT */
/* tinytrace tree — the call tree of a trace, from its frame table.
 *
 * The frame table holds each thread's calls in post-order, each with its depth and its number of
 * descendants (tinytrace/index.h). The tree is printed top-down, in call order, by one loop with
 * no recursion: in post-order the first frame of a subtree is its leftmost leaf, so the frame a
 * walk meets next is found by climbing (tt_index_parent) from the frame just after the subtree
 * it has finished — the leftmost leaf of the next sibling, or else the parent — and each climb
 * keeps the frames it passed through (their indexes, 8 bytes each) to print them on the way
 * down. Every frame is climbed through once, so a tree 10^6 calls deep costs 10^6 climbs, not
 * 10^12; memory is one index per level of the chain being climbed, never a list of children.
 * Only the frames that are printed, the chains under them and the frames after a finished
 * subtree are read: `--depth 3` on a run of billions of calls reads the blocks of its first
 * three levels (and the leftmost chains below them), not the run.
 *
 * Lines are indented two spaces per level up to TREE_INDENT_MAX levels; deeper lines keep that
 * indentation and start with their level in brackets, so that the output grows with the calls,
 * not with calls times depth.
 *
 * --function scans every frame of the thread(s) in order (sequential block reads) for the
 * function's calls, and climbs from each only to the ancestors the previous call did not share;
 * --folded walks every frame and adds each one's self time to its stack in a hash table of
 * distinct call paths, so memory grows with the paths, not the calls. A path is cut after
 * FOLD_MAX frames: what runs deeper is counted in one frame "..." below the cut (a recursion
 * 10^6 deep would otherwise print 10^6 lines of up to 10^6 names each).
 */
#include "opts.h"
#include "tool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: tinytrace tree [--thread N] [--depth D] [--min-duration TIME] [--function NAME]\n"
    "                      [--folded | --json] [--no-demangle] [--max-memory MB]\n"
    "                      [--process P] FILE\n"
    "\n"
    "Prints the call tree of trace FILE from its index tables, one call per line, indented two\n"
    "spaces per level, for each thread:\n"
    "  thread ID NAME: FRAMES calls\n"
    "    FUNCTION DURATION_NS ns [OUTCOME]\n"
    "OUTCOME is shown when a call did not return: 'crashed' (its thread crashed inside it),\n"
    "'open' (still running when the recording ended) or 'abandoned' (a caller exited first).\n"
    "Indentation stops at 64 levels: a call at level 64 or deeper (0 is a top-level call, or the\n"
    "call --function found) is indented as level 64, and its line starts with its level:\n"
    "  [LEVEL] FUNCTION DURATION_NS ns [OUTCOME]\n"
    "\n"
    "Options:\n"
    "  -t, --thread N          only thread N\n"
    "  -d, --depth D           only calls at nesting levels 0 .. D-1\n"
    "  -m, --min-duration TIME only calls that took at least TIME (250us, 1.5ms, 2s, 800ns),\n"
    "                          and their subtrees\n"
    "  -f, --function NAME     every call of function NAME, each with its subtree (--depth\n"
    "                          counts from it), after a line with its call path\n"
    "  -j, --json              one JSON object a line: {\"thread\", \"name\", \"calls\"} for\n"
    "                          each thread, {\"thread\", \"frame\", \"level\", \"function\",\n"
    "                          \"duration_ns\", \"outcome\" (when it did not return)} for each\n"
    "                          call, {\"thread\", \"frame\", \"call_path\": [names],\n"
    "                          \"call_path_cut\"} before each call --function found\n"
    "  -F, --folded            folded stacks for flame-graph tools: one line per distinct call\n"
    "                          path, 'thread-name;caller;...;function SELF_NS'; a path is cut\n"
    "                          after 512 calls, and what runs deeper is counted in one last\n"
    "                          frame '...'\n" TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP
    TOOL_PROCESS_HELP
    "  -h, --help              print this help\n"
    "\n"
    "A trace without index tables (record's default, recovered) gets them built in a temporary\n"
    "copy first (tinytrace index writes them into the file once for all).\n"
    "\n"
    "Exits 0 on success; 2 on a usage error (an unknown thread or function); 3 when the trace\n"
    "or its tables are damaged; 6 when FILE cannot be opened or the output written.\n";

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
    int json;
};

/* Lines deeper than this many levels are not indented further (the usage text says 64). */
#define TREE_INDENT_MAX 64
/* Frames of a folded path, below the thread (the usage text says 512). */
#define FOLD_MAX 512

struct ctx {
    tool_trace *t;
    tt_index *ix;
    struct opts o;
    tt_error_info err;
    /* print_forest's chain: frames climbed through and not yet printed, the shallowest on top */
    uint64_t *chain;
    size_t n, cap;
};

static int push(struct ctx *c, uint64_t frame)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        uint64_t *nc = realloc(c->chain, ncap * sizeof *nc);
        if (nc == NULL)
            return TT_E_NOMEM;
        c->chain = nc;
        c->cap = ncap;
    }
    c->chain[c->n++] = frame;
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

static void print_frame(struct ctx *c, const tt_frame *f, uint64_t level)
{
    if (c->o.json) {
        /* one object per call, in the order of the text's lines */
        tool_json j;
        tj_init(&j, stdout);
        tj_object_begin(&j, NULL);
        tj_u64(&j, "thread", f->thread);
        tj_u64(&j, "frame", f->index);
        tj_u64(&j, "level", level);
        tj_object_name(&j, "function", c->t->r, f->function);
        tj_u64(&j, "duration_ns", tool_ticks_to_ns(f->duration, c->t->m.ticks_per_sec));
        if (f->outcome != TT_FRAME_RETURNED)
            tj_str(&j, "outcome", outcome_name(f->outcome) + 1);
        tj_object_end(&j);
        tj_newline(&j);
        return;
    }
    char spaces[2 * (TREE_INDENT_MAX + 1)];
    size_t n = 2 * (size_t)((level < TREE_INDENT_MAX ? level : TREE_INDENT_MAX) + 1);
    memset(spaces, ' ', n);
    fwrite(spaces, 1, n, stdout);
    if (level >= TREE_INDENT_MAX) {
        fputc('[', stdout);
        tool_print_u64(stdout, level);
        fputs("] ", stdout);
    }
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

/* Climbs from frame @x (the first frame of a subtree not yet visited) to its ancestor at depth
 * @depth, the frame whose subtree starts at @x, into *@f; pushes every frame on the way whose
 * printed level (its depth less @base) is below --depth, so that the shallowest is on top. */
static int climb(struct ctx *c, uint32_t th, uint64_t x, uint32_t depth, uint32_t base,
                 tt_frame *f)
{
    const uint64_t from = x;
    int rc;
    for (;;) {
        if ((rc = tt_index_frame(c->ix, th, x, f, &c->err)) != TT_OK)
            return rc;
        if (f->depth < depth || f->index - f->desc != from)
            break;
        if ((uint64_t)(f->depth - base) < c->o.depth && (rc = push(c, x)) != TT_OK)
            return rc;
        if (f->depth == depth)
            return TT_OK;
        if ((rc = tt_index_parent(c->ix, th, x, &x, &c->err)) != TT_OK)
            return rc;
        if (x == TT_FRAME_NONE)
            break;
    }
    return damaged(c, th, from, "has no ancestor at depth %" PRIu32 " whose calls start with "
                   "it: the frame table is damaged", depth);
}

/* Prints, in call order, the frames @lo .. @hi of thread @th: the subtrees of consecutive
 * frames at depth @base, the last of them frame @hi (a thread's top-level calls, or the one
 * call --function found). A frame is printed at level (depth - @base). No recursion, and no
 * frame is climbed through twice (the top of the file). */
static int print_forest(struct ctx *c, uint32_t th, uint64_t lo, uint64_t hi, uint32_t base)
{
    uint64_t next = lo;       /* the first frame of the next subtree to visit */
    uint32_t depth = base;    /* the depth of that subtree's root */
    tt_frame f;
    int rc;

    while (next <= hi) {
        /* down: the chain from the subtree's root to its leftmost leaf (within --depth) */
        c->n = 0;
        if ((rc = climb(c, th, next, depth, base, &f)) != TT_OK)
            return rc;
        if (f.index > hi)
            return damaged(c, th, f.index, "lies outside the calls it should be part of: the "
                           "frame table is damaged");
        uint64_t done = f.index; /* the last frame finished: the subtree's root for now */
        uint32_t done_depth = f.depth;
        while (c->n > 0) {
            uint64_t i = c->chain[--c->n];
            if ((rc = tt_index_frame(c->ix, th, i, &f, &c->err)) != TT_OK)
                return rc;
            done = i;
            done_depth = f.depth;
            if (f.duration < c->o.min_ticks) {
                c->n = 0; /* the rest of the chain is inside it: its subtree is not shown */
                break;
            }
            print_frame(c, &f, f.depth - base);
        }
        /* up: past every subtree that ends here, to the first frame of the next one */
        for (next = done + 1; next <= hi; next = done + 1) {
            if ((rc = tt_index_frame(c->ix, th, next, &f, &c->err)) != TT_OK)
                return rc;
            if (f.depth >= done_depth)
                break; /* the next sibling's leftmost leaf */
            if (f.depth + 1 != done_depth || f.depth < base)
                return damaged(c, th, next, "follows a frame at depth %" PRIu32 " but has depth "
                               "%" PRIu32 ": the frame table is damaged", done_depth, f.depth);
            done = next; /* the parent: its subtree ends with it */
            done_depth = f.depth;
        }
        depth = done_depth;
    }
    return TT_OK;
}

/* Prints the subtree of @root at printed level 0 (--function). */
static int print_subtree(struct ctx *c, uint32_t th, uint64_t root)
{
    tt_frame f;
    int rc = tt_index_frame(c->ix, th, root, &f, &c->err);
    if (rc != TT_OK)
        return rc;
    return print_forest(c, th, root - f.desc, root, f.depth);
}

static void print_thread_head(struct ctx *c, uint32_t th)
{
    const tt_thread_entry *te = tt_reader_thread(c->t->r, th);
    if (c->o.json) {
        tool_json j;
        tj_init(&j, stdout);
        tj_object_begin(&j, NULL);
        tj_u64(&j, "thread", th);
        tj_object_name(&j, "name", c->t->r, te->name);
        tj_u64(&j, "calls", tt_index_thread_info(c->ix, th)->frames);
        tj_object_end(&j);
        tj_newline(&j);
        return;
    }
    printf("thread %" PRIu32 " ", th);
    tool_print_object(stdout, c->t->r, te->name);
    printf(": %" PRIu64 " calls\n", tt_index_thread_info(c->ix, th)->frames);
}

static int tree_thread(struct ctx *c, uint32_t th)
{
    uint64_t frames = tt_index_thread_info(c->ix, th)->frames;
    print_thread_head(c, th);
    return frames > 0 ? print_forest(c, th, 0, frames - 1, 0) : TT_OK;
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
        if (c->o.json) {
            tool_json j;
            tj_init(&j, stdout);
            tj_object_begin(&j, NULL);
            tj_u64(&j, "thread", th);
            tj_u64(&j, "frame", i);
            tj_array_begin(&j, "call_path");
            for (size_t k = 0; k < np; k++)
                tj_object_name(&j, NULL, c->t->r, path[k].function);
            tj_object_name(&j, NULL, c->t->r, f.function);
            tj_array_end(&j);
            tj_bool(&j, "call_path_cut", cut);
            tj_object_end(&j);
            tj_newline(&j);
            rc = print_subtree(c, th, i);
            continue;
        }
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

/* The function of the frame that stands for everything below a cut path. */
#define FN_CUT UINT32_MAX

/* ";caller;...;function" of path @p, from the top: at most FOLD_MAX + 1 frames, collected
 * bottom-up first (no recursion on the depth). */
static void print_path(struct ctx *c, const struct paths *ps, uint32_t p)
{
    uint32_t up[FOLD_MAX + 1];
    size_t n = 0;
    for (uint32_t q = p + 1; q != 0 && n < FOLD_MAX + 1; q = ps->v[q - 1].parent)
        up[n++] = q - 1;
    while (n-- > 0) {
        fputc(';', stdout);
        if (ps->v[up[n]].fn == FN_CUT)
            fputs("...", stdout);
        else
            tool_print_object(stdout, c->t->r, ps->v[up[n]].fn);
    }
}

static int folded_thread(struct ctx *c, uint32_t th)
{
    struct paths ps = {0};
    uint64_t frames = tt_index_thread_info(c->ix, th)->frames, done = 0;
    int rc = TT_OK;
    /* Frames last to first: in reverse post-order a frame's parent comes before it, so the
     * path of the last frame seen at each depth is the whole state (memory grows with the
     * depth, up to the cut, not with the number of calls). A frame's duration is added to its
     * own path's self time and taken off its parent's. Every frame at depth FOLD_MAX or deeper
     * has the cut path below its ancestor at depth FOLD_MAX - 1 (at[FOLD_MAX]): what runs
     * there adds up to the time of the subtrees cut off. */
    uint64_t levels = (uint64_t)tt_index_thread_info(c->ix, th)->max_depth + 1;
    if (levels > FOLD_MAX + 1)
        levels = FOLD_MAX + 1;
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
        uint32_t d = f.depth < FOLD_MAX ? f.depth : FOLD_MAX;      /* its slot in at[] */
        uint32_t pd = f.depth <= FOLD_MAX ? d - 1 : FOLD_MAX;      /* its parent's */
        if (d >= levels || (f.depth && at[pd] == UINT32_MAX)) {
            rc = damaged(c, th, i, "has depth %" PRIu32 " but no parent", f.depth);
            break;
        }
        uint32_t parent = f.depth ? at[pd] + 1 : 0;
        uint32_t p = f.depth > FOLD_MAX ? at[pd]
                     : path_of(&ps, parent, f.depth == FOLD_MAX ? FN_CUT : f.function);
        if (p == UINT32_MAX) {
            rc = TT_E_NOMEM;
            break;
        }
        at[d] = p;
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
        cx->o.function = tool_find_function(t->r, cx->o.fname);
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
                                   .common = TOOL_OPT_JSON | TOOL_OPT_THREAD |
                                             TOOL_OPT_MAX_MEMORY |
                                             TOOL_OPT_NO_DEMANGLE | TOOL_OPT_PROCESS,
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
    if (cx.o.folded && o.json)
        return tool_usage_error(argv[0], "--folded and --json do not go together");
    cx.o.one_thread = o.one_thread;
    cx.o.thread = o.thread;
    cx.o.json = o.json;
    rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_INDEX);
    cx.t = &t;
    cx.ix = t.ix;
    if (rc == TOOL_EXIT_OK)
        rc = resolve_options(&cx);
    if (rc == TOOL_EXIT_OK)
        rc = print_threads(&cx);
    free(cx.chain);
    tool_trace_close(&t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
