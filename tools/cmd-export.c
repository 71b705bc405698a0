/* tinytrace export — a trace as Chrome trace-event JSON, for Perfetto's UI and chrome://tracing.
 *
 * The Trace Event Format is one JSON object: {"traceEvents": [...], "displayTimeUnit": "ns",
 * "otherData": {...}}. Each event has a name, a phase "ph", a timestamp "ts" in microseconds
 * (fractional: we give nanoseconds as three decimals), a process "pid" and a thread "tid". We use:
 *   "M" metadata: process_name, thread_name (each thread's recorded name, or "thread N") and
 *       thread_sort_index, so the viewer lists the threads in the order they first recorded;
 *   "X" complete events, one per call (an enter and its exit), with "dur";
 *   "i" instant events, thread-scoped ("s": "t"), for safepoint, alloc, free, io, checkpoint,
 *       user and crash events, with their fields in "args".
 * tid is the dense tinytrace thread id (OS thread ids can be reused within a run), pid the
 * recorded process id.
 *
 * Streaming: the trace is read once, in file order, with one sequential cursor; an X event can
 * only be written when its call returns, so calls come out in post-order (children before their
 * parent). The viewers sort by time; what the output guarantees per thread is that the end of
 * each event (ts for "i", ts + dur for "X") never decreases from one event to the next. Memory is
 * the reader's one chunk buffer plus, per thread, the stack of open calls (function, start, seq),
 * bounded in total by --max-open-calls.
 *
 * Calls that never return: at the end of the trace each thread's open calls are closed at the
 * time of that thread's last event, innermost first, with args.outcome "unwound by a crash" when
 * the thread recorded a crash event and "still open at the end of the trace" otherwise. An exit
 * that is not the innermost open call's (longjmp, an exception through uninstrumented code)
 * closes the calls above the one it exits, with outcome "left without an exit"; an exit with no
 * matching open call (within the innermost SEARCH_DEPTH) is counted and skipped.
 *
 * Times: each thread's times are made non-decreasing (the largest time seen so far in that
 * thread is used), so a clock that stepped back by a few ticks cannot give a negative duration
 * or a child outside its parent. And no two calls of a thread start at the same nanosecond (a
 * call that would is moved 1 ns after the previous start): X events with equal ts are
 * ambiguous, and both Perfetto and chrome://tracing may then draw a parent that comes later in
 * the file (as post-order puts it) inside its child. Recorded events are tens of nanoseconds
 * apart, so this only ever moves a call whose clock reading did not advance.
 */
#include "opts.h"
#include "progress.h"
#include "tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#define PREVIEW_BYTES 32
#define TEXT_MAX 4096           /* crash backtraces: at most this much of the text */
#define SEARCH_DEPTH 256        /* how far below the innermost call an exit is looked for */
#define MAX_OPEN_DEFAULT (1u << 22)

static const char usage[] =
    "Usage: tinytrace export [--format chrome] [-o OUT.json [--force]] [--json]\n"
    "                        [--max-open-calls N] [--max-memory MB] [--process P]\n"
    "                        FILE\n"
    "\n"
    "Writes trace FILE as Chrome trace-event JSON, which Perfetto's UI (ui.perfetto.dev) and\n"
    "chrome://tracing open: every call (enter ... exit) as a complete event (\"X\") with its\n"
    "duration, safepoint, alloc, free, io, checkpoint, user and crash events as instant events\n"
    "(\"i\") with their fields in args, and the threads named. Times are microseconds since\n"
    "the session opened. Calls still open at the end of a thread end at its last event, with\n"
    "args.outcome \"still open at the end of the trace\" or, when the thread crashed, \"unwound\n"
    "by a crash\".\n"
    "\n"
    "Options:\n"
    "  -f, --format NAME   the output format; only 'chrome' (the default)\n"
    "  -o, --output OUT    write to OUT (default, or '-': standard output) under a temporary\n"
    "                      name beside it, renamed to OUT when complete. Refused (exit 2): an\n"
    "                      OUT that exists (see --force), that is the trace itself, or that is\n"
    "                      a directory, a device, a FIFO or a socket\n"
    "      --force         let -o replace an existing regular file (or a symbolic link: the\n"
    "                      link is replaced, never the file it points to)\n"
    "  -j, --json          print the summary as one JSON object on stdout (needs -o)\n"
    "      --max-open-calls N\n"
    "                      calls open at the same time, all threads together, that the export\n"
    "                      keeps (default 4194304, 24 bytes each); a trace that needs more is\n"
    "                      refused\n" TOOL_MAX_MEMORY_HELP TOOL_PROCESS_HELP
    "  -h, --help          print this help\n"
    "\n"
    "At the end it prints \"N frames\" (calls exported) and the other counts on stderr. A\n"
    "progress line is shown on stderr while it reads, when stderr is a terminal.\n"
    "\n"
    "Exits 0 on success; 3 when the trace is corrupt or truncated, or needs more open calls\n"
    "than allowed (the output file is then removed); 7 when it is incomplete; 6 when a file\n"
    "cannot be opened or written; 2 on a bad command line or a refused OUT.\n";

struct open_call {
    uint32_t function;
    uint64_t start; /* ns since the session opened */
    uint64_t seq;
};

struct thread_state {
    struct open_call *stack;
    uint32_t depth, cap;
    uint64_t now; /* ns: the largest time seen in this thread */
    uint64_t last_start; /* ns: when the thread's latest call started (if has_start) */
    int has_start;
    int crashed;
};

struct counts {
    uint64_t events, frames, returned, open_at_end, crashed, left, instants, unmatched_exits;
};

struct export {
    tool_trace t;
    FILE *out;
    tool_json j;
    uint64_t written;     /* trace events written */
    uint32_t pid;
    struct thread_state *threads;
    uint64_t open_total, max_open;
    struct counts n;
};

/* ---- writing one event ---- */

/* Appends @v in decimal at @p; returns the end. (A million events are tens of millions of
 * numbers: printf is the slow way.) */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* Appends @ns as microseconds with three decimals at @p: exact, and what "ts" and "dur" want. */
static char *put_us(char *p, uint64_t ns)
{
    unsigned frac = (unsigned)(ns % 1000);
    p = put_u64(p, ns / 1000);
    *p++ = '.';
    *p++ = (char)('0' + frac / 100);
    *p++ = (char)('0' + frac / 10 % 10);
    *p++ = (char)('0' + frac % 10);
    return p;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Starts one trace event: the fields every phase has, and "ts" and "dur" where @ts / @dur are not
 * NO_TIME. The rest of the object is written with the JSON writer, which escapes strings; ev_end
 * closes it. */
#define NO_TIME UINT64_MAX
static void ev_begin(struct export *x, const char *ph, uint32_t tid, uint64_t ts, uint64_t dur)
{
    char buf[160], *p = buf;
    if (x->written++ > 0)
        *p++ = ',';
    p = put_str(p, "{\"ph\":\"");
    p = put_str(p, ph);
    p = put_str(p, "\",\"pid\":");
    p = put_u64(p, x->pid);
    p = put_str(p, ",\"tid\":");
    p = put_u64(p, tid);
    if (ts != NO_TIME) {
        p = put_str(p, ",\"ts\":");
        p = put_us(p, ts);
    }
    if (dur != NO_TIME) {
        p = put_str(p, ",\"dur\":");
        p = put_us(p, dur);
    }
    fwrite(buf, 1, (size_t)(p - buf), x->out);
    tj_init(&x->j, x->out);
    x->j.first[0] = 0; /* fields follow: the writer puts a comma before the first one */
}

static void ev_end(struct export *x)
{
    tj_object_end(&x->j);
    tj_newline(&x->j);
}

/* The name of object @id: its own, "#ID" when it has none, "(none)" for 0. */
static void name_of(const tt_reader *r, uint32_t id, char *buf, size_t cap, const char **s,
                    size_t *len)
{
    *s = id != 0 ? tool_object_name(r, id, len) : NULL;
    if (*s == NULL || *len == 0) {
        int n = id != 0 ? snprintf(buf, cap, "#%" PRIu32, id) : snprintf(buf, cap, "(none)");
        *s = buf;
        *len = n > 0 ? (size_t)n : 0;
    }
}

/* ---- metadata ---- */

/* A process name for the viewer: the recorded program's argv[0] (the preload runtime interns it
 * as a meta object), else the caller string of the manifest, else "tinytrace". */
static void process_name(const tool_trace *t, const char **s, size_t *len)
{
    static const char prefix[] = "argv[0]=";
    for (uint32_t id = 1; id <= t->m.object_count; id++) {
        tt_object_entry o;
        if (tt_reader_object(t->r, id, &o) != TT_OK || o.kind != TT_OBJ_META)
            continue;
        if (o.name_len > sizeof prefix - 1 && memcmp(o.name, prefix, sizeof prefix - 1) == 0) {
            const char *p = o.name + sizeof prefix - 1, *end = o.name + o.name_len, *base = p;
            for (const char *q = p; q < end; q++)
                if (*q == '/' && q + 1 < end)
                    base = q + 1;
            *s = base;
            *len = (size_t)(end - base);
            return;
        }
    }
    *s = t->m.caller;
    *len = strnlen(t->m.caller, sizeof t->m.caller);
    if (*len == 0) {
        *s = "tinytrace";
        *len = strlen(*s);
    }
}

static void write_metadata(struct export *x)
{
    const char *s;
    size_t len;
    char buf[32];

    process_name(&x->t, &s, &len);
    ev_begin(x, "M", 0, NO_TIME, NO_TIME);
    tj_str(&x->j, "name", "process_name");
    tj_object_begin(&x->j, "args");
    tj_strn(&x->j, "name", s, len);
    tj_object_end(&x->j);
    ev_end(x);
    for (uint32_t id = 0; id < x->t.m.thread_count; id++) {
        const tt_thread_entry *e = tt_reader_thread(x->t.r, id);
        s = e != NULL && e->name != 0 ? tool_object_name(x->t.r, e->name, &len) : NULL;
        if (s == NULL || len == 0) {
            snprintf(buf, sizeof buf, "thread %" PRIu32, id);
            s = buf;
            len = strlen(buf);
        }
        ev_begin(x, "M", id, NO_TIME, NO_TIME);
        tj_str(&x->j, "name", "thread_name");
        tj_object_begin(&x->j, "args");
        tj_strn(&x->j, "name", s, len);
        tj_object_end(&x->j);
        ev_end(x);
        ev_begin(x, "M", id, NO_TIME, NO_TIME);
        tj_str(&x->j, "name", "thread_sort_index");
        tj_object_begin(&x->j, "args");
        tj_u64(&x->j, "sort_index", id);
        tj_object_end(&x->j);
        ev_end(x);
    }
}

/* ---- calls ---- */

static void write_call(struct export *x, uint32_t tid, const struct open_call *c, uint64_t end,
                       const char *outcome)
{
    char buf[32];
    const char *s;
    size_t len;

    name_of(x->t.r, c->function, buf, sizeof buf, &s, &len);
    ev_begin(x, "X", tid, c->start, end - c->start);
    tj_strn(&x->j, "name", s, len);
    tj_str(&x->j, "cat", "call");
    tj_object_begin(&x->j, "args");
    tj_u64(&x->j, "seq", c->seq);
    if (outcome != NULL)
        tj_str(&x->j, "outcome", outcome);
    tj_object_end(&x->j);
    ev_end(x);
    x->n.frames++;
}

static int push_call(struct export *x, struct thread_state *th, const tt_event *ev)
{
    if (x->open_total >= x->max_open) {
        tool_error("%s: thread %" PRIu32 ", seq %" PRIu64 ": more than %" PRIu64
                   " calls open at the same time (see --max-open-calls)",
                   x->t.path, ev->tp.thread, ev->tp.seq, x->max_open);
        return TOOL_EXIT_CORRUPT;
    }
    if (th->depth == th->cap) {
        uint32_t cap = th->cap ? th->cap * 2 : 64;
        struct open_call *s = realloc(th->stack, (size_t)cap * sizeof *s);
        if (s == NULL) {
            tool_error("out of memory for %" PRIu32 " open calls", cap);
            return TOOL_EXIT_SYSTEM;
        }
        th->stack = s;
        th->cap = cap;
    }
    /* strictly after the previous call's start (see the top of the file) */
    if (th->has_start && th->now <= th->last_start)
        th->now = th->last_start + 1;
    th->last_start = th->now;
    th->has_start = 1;
    th->stack[th->depth++] = (struct open_call){ev->sp.function, th->now, ev->tp.seq};
    x->open_total++;
    return TOOL_EXIT_OK;
}

static void pop_call(struct export *x, uint32_t tid, struct thread_state *th, const tt_event *ev)
{
    uint32_t lo = th->depth > SEARCH_DEPTH ? th->depth - SEARCH_DEPTH : 0, k = th->depth;
    while (k > lo && th->stack[k - 1].function != ev->sp.function)
        k--;
    if (k == lo) {
        x->n.unmatched_exits++;
        return;
    }
    /* calls above the one that exits were left without their own exit */
    while (th->depth > k) {
        write_call(x, tid, &th->stack[--th->depth], th->now, "left without an exit");
        x->n.left++;
        x->open_total--;
    }
    write_call(x, tid, &th->stack[--th->depth], th->now, NULL);
    x->n.returned++;
    x->open_total--;
}

/* ---- instant events ---- */

static void write_instant(struct export *x, const tt_event *ev)
{
    const tt_reader *r = x->t.r;
    char name[96], buf[32], addr[24];
    const char *s;
    size_t len, n = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;
    const char *kind = tt_event_kind_name(ev->kind);
    int k;

    switch (ev->kind) {
    case TT_EV_IO:
        k = snprintf(name, sizeof name, "io %s", ev->dir == TT_IO_IN ? "in" : "out");
        break;
    case TT_EV_ALLOC:
        k = snprintf(name, sizeof name, "alloc %" PRIu64, ev->arg);
        break;
    case TT_EV_USER:
        k = snprintf(name, sizeof name, "user %" PRIu64, ev->arg);
        break;
    case TT_EV_CRASH:
        k = snprintf(name, sizeof name, "crash (signal %" PRIu64 ")", ev->arg);
        break;
    default:
        k = snprintf(name, sizeof name, "%s", kind);
        break;
    }
    if (k < 0)
        name[0] = '\0';

    ev_begin(x, "i", ev->tp.thread, x->threads[ev->tp.thread].now, NO_TIME);
    tj_str(&x->j, "s", "t");
    if (ev->sp.site != 0 && ev->kind != TT_EV_CRASH) {
        /* the site says where: "io in read", "safepoint site.loop" */
        name_of(r, ev->sp.site, buf, sizeof buf, &s, &len);
        {
            char full[96 + 256];
            size_t a = strlen(name), b = len < 255 ? len : 255;
            memcpy(full, name, a);
            full[a] = ' ';
            memcpy(full + a + 1, s, b);
            tj_strn(&x->j, "name", full, a + 1 + b);
        }
    } else {
        tj_str(&x->j, "name", name);
    }
    tj_str(&x->j, "cat", kind);
    tj_object_begin(&x->j, "args");
    tj_u64(&x->j, "seq", ev->tp.seq);
    if (ev->sp.function != 0)
        tj_object_name(&x->j, "function", r, ev->sp.function);
    if (ev->sp.site != 0)
        tj_object_name(&x->j, "site", r, ev->sp.site);
    switch (ev->kind) {
    case TT_EV_IO:
        tj_str(&x->j, "dir", ev->dir == TT_IO_IN ? "in" : "out");
        tj_u64(&x->j, "channel", ev->arg);
        break;
    case TT_EV_ALLOC:
        tj_u64(&x->j, "size", ev->arg);
        snprintf(addr, sizeof addr, "0x%" PRIx64, ev->addr);
        tj_str(&x->j, "addr", addr);
        break;
    case TT_EV_FREE:
        snprintf(addr, sizeof addr, "0x%" PRIx64, ev->addr);
        tj_str(&x->j, "addr", addr);
        break;
    case TT_EV_USER:
        tj_u64(&x->j, "tag", ev->arg);
        break;
    case TT_EV_CRASH:
        tj_u64(&x->j, "signal", ev->arg);
        break;
    default:
        if (ev->arg != 0)
            tj_u64(&x->j, "arg", ev->arg);
        break;
    }
    if (ev->payload_len > 0 && ev->payload != NULL) {
        tj_u64(&x->j, "len", ev->payload_len);
        if (ev->kind == TT_EV_CRASH)
            tj_strn(&x->j, "backtrace", ev->payload,
                    ev->payload_len < TEXT_MAX ? (size_t)ev->payload_len : TEXT_MAX);
        else
            tj_hex(&x->j, "payload", ev->payload, n);
    }
    tj_object_end(&x->j);
    ev_end(x);
    x->n.instants++;
}

/* ---- the pass ---- */

static int export_events(struct export *x)
{
    uint32_t nthreads = x->t.m.thread_count;
    tool_ns_conv conv;
    tt_error_info err;
    progress pr;
    tt_event ev;
    int rc = TOOL_EXIT_OK, r;

    x->threads = calloc(nthreads ? nthreads : 1, sizeof *x->threads);
    if (x->threads == NULL) {
        tool_error("out of memory for %" PRIu32 " threads", nthreads);
        return TOOL_EXIT_SYSTEM;
    }
    write_metadata(x);
    tool_ns_conv_init(&conv, x->t.m.ticks_per_sec);

    progress_begin(&pr, "tinytrace export", x->t.m.event_count);
    tool_error_info_init(&err);
    while (rc == TOOL_EXIT_OK && (r = tt_reader_next(x->t.r, 0, &ev, &err)) == TT_OK) {
        struct thread_state *th;
        uint64_t ns;
        if (ev.tp.thread >= nthreads) { /* the reader checks this; a tool never trusts blindly */
            progress_end(&pr);
            tool_error("%s: event %" PRIu64 " belongs to thread %" PRIu32
                       ", but the trace has %" PRIu32,
                       x->t.path, x->n.events, ev.tp.thread, nthreads);
            rc = TOOL_EXIT_CORRUPT;
            break;
        }
        th = &x->threads[ev.tp.thread];
        ns = tool_ns_conv_ns(&conv, ev.time);
        if (ns > th->now)
            th->now = ns;
        switch (ev.kind) {
        case TT_EV_ENTER:
            rc = push_call(x, th, &ev);
            break;
        case TT_EV_EXIT:
            pop_call(x, ev.tp.thread, th, &ev);
            break;
        case TT_EV_SESSION_START:
        case TT_EV_SESSION_END:
        case TT_EV_THREAD_START:
        case TT_EV_THREAD_END:
            break; /* the thread's extent: only its time counts */
        default:
            if (ev.kind == TT_EV_CRASH)
                th->crashed = 1;
            write_instant(x, &ev);
            break;
        }
        x->n.events++;
        progress_update(&pr, x->n.events);
    }
    progress_end(&pr);
    if (rc != TOOL_EXIT_OK)
        return rc;
    if (r != TT_E_END) {
        char what[64];
        snprintf(what, sizeof what, "after %" PRIu64 " events", x->n.events);
        return tool_report(x->t.path, what, r, &err);
    }
    if (x->n.events != x->t.m.event_count) {
        tool_error("%s: read %" PRIu64 " events, but the manifest says %" PRIu64, x->t.path,
                   x->n.events, x->t.m.event_count);
        return TOOL_EXIT_CORRUPT;
    }
    /* the calls that never returned, innermost first, ending at their thread's last event */
    for (uint32_t id = 0; id < nthreads; id++) {
        struct thread_state *th = &x->threads[id];
        while (th->depth > 0) {
            write_call(x, id, &th->stack[--th->depth], th->now,
                       th->crashed ? "unwound by a crash" : "still open at the end of the trace");
            if (th->crashed)
                x->n.crashed++;
            else
                x->n.open_at_end++;
        }
    }
    return TOOL_EXIT_OK;
}

static void write_trailer(struct export *x)
{
    tool_json *j = &x->j;
    fputs("],\"displayTimeUnit\":\"ns\",\"otherData\":", x->out);
    tj_init(j, x->out);
    tj_object_begin(j, NULL);
    tj_str(j, "exporter", "tinytrace " TT_VERSION_STRING);
    tj_str(j, "source", x->t.path);
    tj_hex(j, "build_id", x->t.m.build_id,
           x->t.m.build_id_len <= TT_BUILD_ID_MAX ? x->t.m.build_id_len : 0);
    tj_u64(j, "events", x->n.events);
    tj_u64(j, "frames", x->n.frames);
    tj_u64(j, "instant_events", x->n.instants);
    tj_object_end(j);
    tj_newline(j);
    fputs("}\n", x->out);
}

static void print_summary(const struct export *x, int json, const char *out)
{
    if (json) {
        tool_json j;
        tj_init(&j, stdout);
        tj_object_begin(&j, NULL);
        tj_str(&j, "file", x->t.path);
        tj_str(&j, "output", out);
        tj_u64(&j, "events", x->n.events);
        tj_u64(&j, "threads", x->t.m.thread_count);
        tj_u64(&j, "frames", x->n.frames);
        tj_u64(&j, "frames_returned", x->n.returned);
        tj_u64(&j, "frames_open_at_end", x->n.open_at_end);
        tj_u64(&j, "frames_unwound_by_crash", x->n.crashed);
        tj_u64(&j, "frames_left_without_exit", x->n.left);
        tj_u64(&j, "unmatched_exits", x->n.unmatched_exits);
        tj_u64(&j, "instant_events", x->n.instants);
        tj_object_end(&j);
        tj_newline(&j);
        return;
    }
    fprintf(stderr,
            "tinytrace export: %" PRIu64 " frames (%" PRIu64 " returned, %" PRIu64
            " still open at the end, %" PRIu64 " unwound by a crash, %" PRIu64
            " left without an exit), %" PRIu64 " instant events, %" PRIu32 " threads",
            x->n.frames, x->n.returned, x->n.open_at_end, x->n.crashed, x->n.left,
            x->n.instants, x->t.m.thread_count);
    if (x->n.unmatched_exits > 0)
        fprintf(stderr, ", %" PRIu64 " exits without a matching call skipped",
                x->n.unmatched_exits);
    fputc('\n', stderr);
}

/* ---- the command line and the output file ---- */

enum { OPT_MAX_OPEN = 256, OPT_FORCE };

struct export_options {
    struct export *x;
    const char *out_path; /* -o; NULL: stdout */
    int force;            /* --force: -o may replace a regular file */
};

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct export_options *eo = ctx;
    switch (c) {
    case 'f':
        if (strcmp(arg, "chrome") != 0)
            return tool_usage_error(prog, "unknown format '%s'; the formats are: chrome", arg);
        return TOOL_EXIT_OK;
    case 'o':
        eo->out_path = arg;
        return TOOL_EXIT_OK;
    case OPT_MAX_OPEN:
        return tool_parse_u64(prog, "--max-open-calls", arg, 1, UINT32_MAX, &eo->x->max_open);
    case OPT_FORCE:
        eo->force = 1;
        return TOOL_EXIT_OK;
    default:
        return tool_usage_hint(prog);
    }
}

/* Opens x->out: a temporary file beside @out_path (tool_output_open; tool_output_commit
 * renames it), or stdout when @out_path is NULL. Reports a failure and returns its exit code. */
static int open_output(struct export *x, const char *out_path, tool_output *out)
{
    out->tmp = NULL;
    out->fd = -1;
    if (out_path == NULL) {
        x->out = stdout;
        return TOOL_EXIT_OK;
    }
    /* a regular file is written beside its final name and renamed when whole: a failed
     * export leaves no file that looks complete */
    int rc = tool_output_open(out, out_path, 0644);
    if (rc != TOOL_EXIT_OK)
        return rc;
    x->out = fdopen(out->fd, "w");
    if (x->out == NULL) {
        tool_error("%s: cannot open: %s", out->tmp, strerror(errno));
        tool_output_discard(out);
        return TOOL_EXIT_SYSTEM;
    }
    out->fd = -1; /* x->out's now */
    setvbuf(x->out, NULL, _IOFBF, 1 << 20);
    __fsetlocking(x->out, FSETLOCKING_BYCALLER); /* one thread writes it */
    return TOOL_EXIT_OK;
}

/* Closes the file x->out (not stdout) after an export that ended with @rc: a write error is an
 * error, a whole temporary file becomes the output (checked again, tool_output_commit), any
 * other is removed. Returns the export's exit code from here on. */
static int close_output(struct export *x, int rc, tool_output *out, const char *prog,
                        const char *const *inputs, int force)
{
    int bad = ferror(x->out), e = errno;

    if (fclose(x->out) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    x->out = NULL;
    if (rc == TOOL_EXIT_OK && bad) {
        tool_error("%s: write error: %s", out->tmp, strerror(e));
        rc = TOOL_EXIT_SYSTEM;
    }
    if (rc == TOOL_EXIT_OK)
        return tool_output_commit(prog, out, inputs, force);
    tool_output_discard(out);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    static const struct option options[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, OPT_FORCE},
        {"max-open-calls", required_argument, NULL, OPT_MAX_OPEN},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY | TOOL_OPT_PROCESS,
                                   .options = options,
                                   .take = take_option};
    struct export x;
    struct export_options eo = {.x = &x};
    tool_output out = {.fd = -1};
    tool_opts o;
    int rc;

    memset(&x, 0, sizeof x);
    x.max_open = MAX_OPEN_DEFAULT;
    if ((rc = tool_opts_parse(&o, &verb, &eo, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (eo.out_path != NULL && strcmp(eo.out_path, "-") == 0)
        eo.out_path = NULL;
    if (o.json && eo.out_path == NULL)
        return tool_usage_error(argv[0], "--json prints the summary on stdout: it needs -o FILE");
    const char *const inputs[] = {o.file, NULL};
    if (eo.out_path != NULL &&
        (rc = tool_output_check(argv[0], eo.out_path, inputs, eo.force)) != TOOL_EXIT_OK)
        return rc;

    rc = tool_trace_start(&x.t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_OPEN);
    if (rc == TOOL_EXIT_OK) {
        x.pid = x.t.m.pid;
        rc = open_output(&x, eo.out_path, &out);
    }
    if (rc != TOOL_EXIT_OK) {
        tool_trace_close(&x.t);
        return rc;
    }

    fputs("{\"traceEvents\":[\n", x.out);
    rc = export_events(&x);
    if (rc == TOOL_EXIT_OK)
        write_trailer(&x);
    if (x.out != stdout)
        rc = close_output(&x, rc, &out, argv[0], inputs, eo.force);
    if (rc == TOOL_EXIT_OK)
        print_summary(&x, o.json, eo.out_path != NULL ? eo.out_path : "-");
    for (uint32_t id = 0; x.threads != NULL && id < x.t.m.thread_count; id++)
        free(x.threads[id].stack);
    free(x.threads);
    tool_trace_close(&x.t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
