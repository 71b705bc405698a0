/* SPDX-License-Identifier: MIT */
/* tinytrace export — a trace for timeline viewers: Chrome trace-event JSON, or Perfetto's own
 * protobuf format.
 *
 * Chrome JSON (--format chrome, the default) is one object: {"traceEvents": [...],
 * "displayTimeUnit": "ns", "otherData": {...}}. Each event has a name, a phase "ph", a timestamp
 * "ts" in microseconds (fractional: we give nanoseconds as three decimals), a process "pid" and
 * a thread "tid". We use:
 *   "M" metadata: process_name, thread_name (each thread's recorded name, or "thread N") and
 *       thread_sort_index, so the viewer lists the threads in the order they first recorded;
 *   "X" complete events, one per call (an enter and its exit), with "dur" and, only with --args,
 *       "args" (the enter's seq). Viewers such as speedscope fold args into the frame's name,
 *       so a call with args of its own is a function of its own, and nothing aggregates;
 *   "i" instant events, thread-scoped ("s": "t"), for safepoint, alloc, free, io, checkpoint,
 *       user, crash and sync events, with their fields in "args".
 * tid is the OS thread id; a thread whose OS id an earlier thread of the run already had (ids
 * are reused) gets 0x40000000 + its dense tinytrace id, so that the viewers keep them apart.
 *
 * chrome-profile (--format chrome-profile) is the same JSON with the calls, instead of "X" events,
 * as one CPU profile per thread in Chrome's own "Profile" / "ProfileChunk" events, written by
 * cpuprofile.c (cpuprofile.h says how): a sample at each written enter and exit, a node per
 * call path. A few bytes an event, and speedscope loads it where it cannot load the "X" events
 * of a large run.
 *
 * Perfetto (--format perfetto) is TracePacket protobuf, written by perfetto.c (perfetto.h says
 * how it is laid out): one track per thread, a slice (begin and end) per call, an instant per
 * other event, the function names interned.
 *
 * Streaming: without a window the trace is read once, in file order, with one sequential
 * cursor. Memory is the reader's chunk buffer plus, per thread, the stack of open calls
 * (function, start, seq), bounded in total by --max-open-calls.
 *
 * Windows. --from and --to (a time, or a thread's sequence number), --thread, --max-depth and
 * --min-duration choose what is written. With index tables a window reads only what it needs:
 * each thread has a cursor of its own, put by the seek index at the last entry before the
 * window, and the calls open when the window starts come from the frame table, without reading
 * the events before it: in post-order a frame's end never comes before the previous frame's
 * end, so a binary search finds the first frame that ends at or after the start, and that frame
 * and its ancestors that started before the start are exactly the open calls. A thread's events
 * after --to are not read. Without index tables the window is read from the start of the file.
 * --min-duration writes a call only when it took that long: its begin (and those of its
 * ancestors, which took longer) is written when a call is known to qualify, at its end, which
 * keeps each thread's slices in time order (perfetto.h).
 *
 * Calls that never return: at the end of the trace each thread's open calls are closed at the
 * time of that thread's last event, innermost first, with outcome "unwound by a crash" when the
 * thread recorded a crash event and "still open at the end of the trace" otherwise (at the end
 * of a window: "open at the end of the window", closed at its end). An exit that is not the
 * innermost open call's (longjmp, an exception through uninstrumented code) closes the calls
 * above the one it exits, with outcome "left without an exit"; an exit with no matching open
 * call (within the innermost SEARCH_DEPTH) is counted and skipped. The outcome is an arg of
 * such a call in JSON, always: it is rare, and says why the call ends where it does.
 *
 * Times: each thread's times are made non-decreasing (the largest time seen so far in that
 * thread is used), so a clock that stepped back by a few ticks cannot give a negative duration
 * or a child outside its parent. And no two calls of a thread start at the same nanosecond (a
 * call that would is moved 1 ns after the previous start): X events with equal ts are
 * ambiguous, and both Perfetto and chrome://tracing may then draw a parent that comes later in
 * the file (as post-order puts it) inside its child. Recorded events are tens of nanoseconds
 * apart, so this only ever moves a call whose clock reading did not advance.
 */
#include "cpuprofile.h"
#include "merge.h"
#include "opts.h"
#include "perfetto.h"
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
#define TID_REUSED 0x40000000u  /* + the dense id: a thread whose OS tid was used before */

static const char usage[] =
    "Usage: tinytrace export [--format chrome|chrome-profile|perfetto] [-o OUT [--force]]\n"
    "                        [--json] [--args]\n"
    "                        [--from SEQ|TIME] [--to SEQ|TIME] [--thread N] [--process P]\n"
    "                        [--max-depth D] [--min-duration TIME] [--max-open-calls N]\n"
    "                        [--no-demangle] [--max-memory MB] FILE\n"
    "\n"
    "Writes trace FILE for a timeline viewer: every call (enter ... exit) with its duration,\n"
    "safepoint, alloc, free, io, checkpoint, user, crash and sync events as instant events with\n"
    "their fields, the threads named by their recorded names and OS thread ids. Times are\n"
    "since the session opened. Calls still open at the end of a thread end at its last event.\n"
    "\n"
    "Formats:\n"
    "  chrome    Chrome trace-event JSON (the default), which Perfetto's UI, chrome://tracing\n"
    "            and speedscope open: calls as complete events (\"X\"), instants as \"i\"\n"
    "  chrome-profile  the same JSON with the calls as one exact CPU profile per thread\n"
    "            (\"Profile\" and \"ProfileChunk\" events, as Chrome writes them): a sample at\n"
    "            every enter and exit, a node per call path; about 9 bytes an event where \"X\"\n"
    "            takes 38, for speedscope and Chrome DevTools' Performance panel on big runs\n"
    "  perfetto  Perfetto's protobuf trace (TrackEvent): a track per thread, a slice per call,\n"
    "            function names interned; Perfetto's UI and trace_processor read it, and it is\n"
    "            a few bytes per event where JSON takes tens\n"
    "\n"
    "Options:\n"
    "  -f, --format NAME   chrome, chrome-profile or perfetto\n"
    "  -o, --output OUT    write to OUT (default, or '-': standard output) under a temporary\n"
    "                      name beside it, renamed to OUT when complete. Refused (exit 2): an\n"
    "                      OUT that exists (see --force), that is the trace itself, or that is\n"
    "                      a directory, a device, a FIFO or a socket\n"
    "      --force         let -o replace an existing regular file (or a symbolic link: the\n"
    "                      link is replaced, never the file it points to)\n"
    "  -j, --json          print the summary as one JSON object on stdout (needs -o)\n"
    "      --args          chrome: give each call its args (the enter's seq); without it a\n"
    "                      call has none, so that viewers aggregate calls by name\n"
    "      --from SEQ|TIME only what happens from TIME on (250us, 1.5ms, 2s: since the session\n"
    "                      opened) or, a plain number, from each thread's event SEQ on; calls\n"
    "                      open then are written from their start\n"
    "      --to SEQ|TIME   only what happens up to TIME or each thread's event SEQ (included);\n"
    "                      calls open then end there\n"
    "  -t, --thread N      only thread N\n"
    "      --max-depth D   only calls at nesting levels 0 .. D-1\n"
    "  -m, --min-duration TIME\n"
    "                      only calls that took at least TIME\n"
    "      --max-open-calls N\n"
    "                      calls open at the same time, all threads together, that the export\n"
    "                      keeps (default 4194304, 32 bytes each); a trace that needs more is\n"
    "                      refused\n"
    TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP TOOL_PROCESS_HELP
    "  -h, --help          print this help\n"
    "\n"
    "A window (--from, --to, --thread) of a trace with index tables reads only the events it\n"
    "needs. At the end it prints \"N frames\" (calls exported) and the other counts on stderr.\n"
    "A progress line is shown on stderr while it reads, when stderr is a terminal.\n"
    "\n"
    "Exits 0 on success; 3 when the trace is corrupt or truncated, or needs more open calls\n"
    "than allowed (the output file is then removed); 7 when it is incomplete; 6 when a file\n"
    "cannot be opened or written; 2 on a bad command line or a refused OUT.\n";

enum { CALL_BEGUN = 1, CALL_HIDDEN = 2 };

struct open_call {
    uint32_t function;
    uint32_t flags; /* CALL_BEGUN: its begin is written (or, JSON, it will be written);
                     * CALL_HIDDEN: deeper than --max-depth, never written */
    uint64_t start; /* ns since the session opened */
    uint64_t seq;   /* of its enter; UINT64_MAX: from the frame table (a window's open call) */
    uint32_t node;  /* chrome-profile: its call path's node, once begun */
};

struct thread_state {
    struct open_call *stack;
    uint32_t depth, cap;
    uint64_t now;        /* ns: the largest time seen in this thread */
    uint64_t last_start; /* ns: when the thread's latest call started (if has_start) */
    int has_start;
    int crashed;
    int in_window;       /* an event at or after --from was seen: calls are written */
    int done;            /* an event after --to was seen: nothing more is written */
    int seeded;          /* the open calls at --from came from the frame table */
    int track;           /* perfetto: its track is written */
    uint64_t from, to;   /* the window in ticks, or in seqs (x->from_seq, x->to_seq) */
};

struct counts {
    uint64_t events, frames, returned, open_at_end, crashed, left, instants, unmatched_exits,
        window_end;
};

struct export {
    tool_trace t;
    FILE *out;
    tool_json j;
    uint64_t written;     /* trace events written (JSON) */
    uint32_t pid;
    uint32_t *tids;       /* per thread: the tid the output gives it */
    struct thread_state *threads;
    uint64_t open_total, max_open;
    struct counts n;
    tool_ns_conv conv;
    int perfetto;
    pf_writer pf;
    int profile;          /* --format chrome-profile: JSON with the calls as CPU profiles */
    cp_writer cp;
    int oom;              /* the profile writer ran out of memory */
    /* options */
    int args;
    int has_from, has_to, from_seq, to_seq;
    uint64_t from, to;    /* ns, or a seq when from_seq / to_seq */
    uint64_t max_depth;   /* UINT64_MAX: all */
    uint64_t min_ns;      /* 0: all */
    int one_thread;
    uint32_t thread;
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
static void ev_begin(struct export *x, const char *ph, uint32_t th, uint64_t ts, uint64_t dur)
{
    uint32_t tid = x->tids[th];
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


/* ---- metadata ---- */

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The tid of each thread in the output: its OS tid, unless an earlier thread had it. */
static int assign_tids(struct export *x)
{
    uint32_t n = x->t.m.thread_count;
    uint64_t *key = malloc((n ? n : 1) * sizeof *key);
    x->tids = malloc((n ? n : 1) * sizeof *x->tids);
    if (key == NULL || x->tids == NULL) {
        free(key);
        tool_error("out of memory for %" PRIu32 " threads", n);
        return TOOL_EXIT_SYSTEM;
    }
    for (uint32_t id = 0; id < n; id++) {
        const tt_thread_entry *e = tt_reader_thread(x->t.r, id);
        uint32_t os = e != NULL && e->os_tid != 0 ? e->os_tid : TID_REUSED + id;
        key[id] = (uint64_t)os << 32 | id;
        x->tids[id] = os;
    }
    /* sorted by (os tid, id): each thread after the first of its os tid is a reuse */
    qsort(key, n, sizeof *key, by_u64);
    for (uint32_t i = 1; i < n; i++)
        if (key[i] >> 32 == key[i - 1] >> 32 && (uint32_t)(key[i] >> 32) < TID_REUSED)
            x->tids[(uint32_t)key[i]] = TID_REUSED + (uint32_t)key[i];
    free(key);
    return TOOL_EXIT_OK;
}

static void thread_name(const struct export *x, uint32_t id, char *buf, size_t cap,
                        const char **s, size_t *len)
{
    const tt_thread_entry *e = tt_reader_thread(x->t.r, id);
    *s = e != NULL && e->name != 0 ? tool_object_name(x->t.r, e->name, len) : NULL;
    if (*s == NULL || *len == 0) {
        snprintf(buf, cap, "thread %" PRIu32, id);
        *s = buf;
        *len = strlen(buf);
    }
}

/* A metadata event. chrome-profile gives it a time and a category: speedscope takes a file
 * for a Chrome CPU profile only when its first event has "cat", and sorts the events by "ts"
 * (an event without one compares equal to every other, which leaves the sort's order to
 * chance). */
static void meta_begin(struct export *x, uint32_t thread)
{
    ev_begin(x, "M", thread, x->profile ? 0 : NO_TIME, NO_TIME);
    if (x->profile)
        tj_str(&x->j, "cat", "__metadata");
}

static void write_metadata(struct export *x)
{
    const char *s;
    size_t len;
    char buf[32];

    process_name(&x->t, &s, &len);
    if (x->perfetto) {
        pf_process(&x->pf, s, len);
        return; /* thread tracks come with their first event */
    }
    meta_begin(x, 0);
    tj_str(&x->j, "name", "process_name");
    tj_object_begin(&x->j, "args");
    tj_strn(&x->j, "name", s, len);
    tj_object_end(&x->j);
    ev_end(x);
    for (uint32_t id = 0; id < x->t.m.thread_count; id++) {
        if (x->one_thread && id != x->thread)
            continue;
        thread_name(x, id, buf, sizeof buf, &s, &len);
        meta_begin(x, id);
        tj_str(&x->j, "name", "thread_name");
        tj_object_begin(&x->j, "args");
        tj_strn(&x->j, "name", s, len);
        tj_object_end(&x->j);
        ev_end(x);
        meta_begin(x, id);
        tj_str(&x->j, "name", "thread_sort_index");
        tj_object_begin(&x->j, "args");
        tj_u64(&x->j, "sort_index", id);
        tj_object_end(&x->j);
        ev_end(x);
    }
}

/* perfetto: thread @id's track, before its first packet */
static void need_track(struct export *x, uint32_t id)
{
    struct thread_state *th = &x->threads[id];
    if (!x->perfetto || th->track)
        return;
    const char *s;
    size_t len;
    char buf[32];
    thread_name(x, id, buf, sizeof buf, &s, &len);
    pf_thread_track(&x->pf, id, x->tids[id], s, len);
    th->track = 1;
}

/* ---- calls ---- */

static void profile_name(void *ctx, uint32_t id, char *buf, size_t cap, const char **s,
                         size_t *len)
{
    const struct export *x = ctx;
    name_of(x->t.r, id, buf, cap, s, len);
}

/* Writes the begin of @c (thread @tid) unless it is written or hidden. */
static void begin_call(struct export *x, uint32_t tid, struct open_call *c)
{
    if (c->flags & (CALL_BEGUN | CALL_HIDDEN))
        return;
    c->flags |= CALL_BEGUN;
    if (x->perfetto) {
        char buf[32];
        const char *s;
        size_t len;
        need_track(x, tid);
        name_of(x->t.r, c->function, buf, sizeof buf, &s, &len);
        pf_begin(&x->pf, tid, c->function != 0 ? c->function : UINT32_MAX, s, len, c->start);
    } else if (x->profile) {
        /* the calls below it are begun (or it is the outermost): its path is theirs + it */
        const struct thread_state *th = &x->threads[tid];
        uint32_t parent = c > th->stack ? c[-1].node : 0;
        c->node = cp_node(&x->cp, tid, parent, c->function);
        if (c->node == 0 || cp_sample(&x->cp, tid, c->node, c->start) != 0)
            x->oom = 1;
    }
}

/* Ends call @k of @th's stack at @end: written when it is begun or, unless hidden, when it is
 * in the window and long enough (then its ancestors are begun first). Returns 1 if written. */
static int end_call(struct export *x, uint32_t tid, struct thread_state *th, uint32_t k,
                    uint64_t end, const char *outcome)
{
    struct open_call *c = &th->stack[k];
    if (!(c->flags & CALL_BEGUN)) {
        if ((c->flags & CALL_HIDDEN) || !th->in_window || end - c->start < x->min_ns)
            return 0;
        for (uint32_t i = 0; i <= k; i++)
            begin_call(x, tid, &th->stack[i]);
    }
    if (x->perfetto) {
        pf_end(&x->pf, tid, end);
    } else if (x->profile) {
        /* from its end on, the thread is back in its caller's node */
        if (cp_sample(&x->cp, tid, k > 0 ? th->stack[k - 1].node : 0, end) != 0)
            x->oom = 1;
    } else {
        char buf[32];
        const char *s;
        size_t len;
        name_of(x->t.r, c->function, buf, sizeof buf, &s, &len);
        ev_begin(x, "X", tid, c->start, end - c->start);
        tj_strn(&x->j, "name", s, len);
        if (x->args || outcome != NULL) {
            tj_object_begin(&x->j, "args");
            if (x->args && c->seq != UINT64_MAX)
                tj_u64(&x->j, "seq", c->seq);
            if (outcome != NULL)
                tj_str(&x->j, "outcome", outcome);
            tj_object_end(&x->j);
        }
        ev_end(x);
    }
    x->n.frames++;
    return 1;
}

static int push_call(struct export *x, struct thread_state *th, uint32_t thread,
                     uint32_t function, uint64_t start, uint64_t seq)
{
    if (x->open_total >= x->max_open) {
        tool_error("%s: thread %" PRIu32 ", seq %" PRIu64 ": more than %" PRIu64
                   " calls open at the same time (see --max-open-calls)",
                   x->t.path, thread, seq, x->max_open);
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
    if (th->has_start && start <= th->last_start)
        start = th->last_start + 1;
    if (start > th->now)
        th->now = start;
    th->last_start = start;
    th->has_start = 1;
    th->stack[th->depth] = (struct open_call){function, th->depth >= x->max_depth ? CALL_HIDDEN : 0,
                                              start, seq, 0};
    th->depth++;
    x->open_total++;
    return TOOL_EXIT_OK;
}

/* An exit: closes the innermost open call of its function, and the calls above it. @quiet:
 * before the window, nothing is written. */
static void pop_call(struct export *x, uint32_t tid, struct thread_state *th, const tt_event *ev,
                     int quiet)
{
    uint32_t lo = th->depth > SEARCH_DEPTH ? th->depth - SEARCH_DEPTH : 0, k = th->depth;
    while (k > lo && th->stack[k - 1].function != ev->sp.function)
        k--;
    if (k == lo) {
        if (!quiet)
            x->n.unmatched_exits++;
        return;
    }
    /* calls above the one that exits were left without their own exit */
    while (th->depth > k) {
        th->depth--;
        if (!quiet && end_call(x, tid, th, th->depth, th->now, "left without an exit"))
            x->n.left++;
        x->open_total--;
    }
    th->depth--;
    if (!quiet && end_call(x, tid, th, th->depth, th->now, NULL))
        x->n.returned++;
    x->open_total--;
}

/* ---- instant events ---- */

static void instant_name(const struct export *x, const tt_event *ev, char *name, size_t cap)
{
    const tt_reader *r = x->t.r;
    char buf[32];
    const char *s;
    size_t len;
    int k;

    switch (ev->kind) {
    case TT_EV_IO:
        k = snprintf(name, cap, "io %s", ev->dir == TT_IO_IN ? "in" : "out");
        break;
    case TT_EV_ALLOC:
        k = snprintf(name, cap, "alloc %" PRIu64, ev->arg);
        break;
    case TT_EV_USER:
        k = snprintf(name, cap, "user %" PRIu64, ev->arg);
        break;
    case TT_EV_CRASH:
        k = snprintf(name, cap, "crash (signal %" PRIu64 ")", ev->arg);
        break;
    default:
        k = snprintf(name, cap, "%s", tt_event_kind_name(ev->kind));
        break;
    }
    if (k < 0 || (size_t)k >= cap)
        k = 0;
    name[k] = '\0';
    if (ev->sp.site != 0 && ev->kind != TT_EV_CRASH) {
        /* the site says where: "io in read", "safepoint site.loop", "sync mutex_lock" */
        name_of(r, ev->sp.site, buf, sizeof buf, &s, &len);
        if (len > cap - (size_t)k - 2)
            len = cap - (size_t)k - 2;
        name[k] = ' ';
        memcpy(name + k + 1, s, len);
        name[k + 1 + len] = '\0';
    }
}

static void write_instant_json(struct export *x, const tt_event *ev, const char *name)
{
    const tt_reader *r = x->t.r;
    char addr[24];
    size_t n = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;

    ev_begin(x, "i", ev->tp.thread, x->threads[ev->tp.thread].now, NO_TIME);
    tj_str(&x->j, "s", "t");
    tj_str(&x->j, "name", name);
    tj_str(&x->j, "cat", tt_event_kind_name(ev->kind));
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
    case TT_EV_SYNC:
        tj_u64(&x->j, "object", ev->arg);
        tj_u64(&x->j, "object_seq", ev->addr);
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
}

/* The same fields as debug annotations. */
static void write_instant_pf(struct export *x, const tt_event *ev, const char *name)
{
    const tt_reader *r = x->t.r;
    pf_arg a[8];
    size_t n = 0, len;
    char hex[2 * PREVIEW_BYTES + 1];
    const char *s;

    a[n++] = (pf_arg){.name = "seq", .type = PF_UINT, .v = ev->tp.seq};
    if (ev->sp.function != 0 && (s = tool_object_name(r, ev->sp.function, &len)) != NULL)
        a[n++] = (pf_arg){.name = "function", .type = PF_STR, .str = s, .len = len};
    if (ev->sp.site != 0 && (s = tool_object_name(r, ev->sp.site, &len)) != NULL)
        a[n++] = (pf_arg){.name = "site", .type = PF_STR, .str = s, .len = len};
    switch (ev->kind) {
    case TT_EV_IO:
        a[n++] = (pf_arg){.name = "dir", .type = PF_STR, .str = ev->dir == TT_IO_IN ? "in" : "out",
                          .len = ev->dir == TT_IO_IN ? 2 : 3};
        a[n++] = (pf_arg){.name = "channel", .type = PF_UINT, .v = ev->arg};
        break;
    case TT_EV_ALLOC:
        a[n++] = (pf_arg){.name = "size", .type = PF_UINT, .v = ev->arg};
        a[n++] = (pf_arg){.name = "addr", .type = PF_PTR, .v = ev->addr};
        break;
    case TT_EV_FREE:
        a[n++] = (pf_arg){.name = "addr", .type = PF_PTR, .v = ev->addr};
        break;
    case TT_EV_USER:
        a[n++] = (pf_arg){.name = "tag", .type = PF_UINT, .v = ev->arg};
        break;
    case TT_EV_CRASH:
        a[n++] = (pf_arg){.name = "signal", .type = PF_UINT, .v = ev->arg};
        break;
    case TT_EV_SYNC:
        a[n++] = (pf_arg){.name = "object", .type = PF_UINT, .v = ev->arg};
        a[n++] = (pf_arg){.name = "object_seq", .type = PF_UINT, .v = ev->addr};
        break;
    default:
        if (ev->arg != 0)
            a[n++] = (pf_arg){.name = "arg", .type = PF_UINT, .v = ev->arg};
        break;
    }
    if (ev->payload_len > 0 && ev->payload != NULL) {
        a[n++] = (pf_arg){.name = "len", .type = PF_UINT, .v = ev->payload_len};
        if (ev->kind == TT_EV_CRASH) {
            a[n++] = (pf_arg){.name = "backtrace", .type = PF_STR, .str = ev->payload,
                              .len = ev->payload_len < TEXT_MAX ? (size_t)ev->payload_len
                                                                : TEXT_MAX};
        } else {
            static const char digits[] = "0123456789abcdef";
            size_t k = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;
            const unsigned char *p = ev->payload;
            for (size_t i = 0; i < k; i++) {
                hex[2 * i] = digits[p[i] >> 4];
                hex[2 * i + 1] = digits[p[i] & 15];
            }
            a[n++] = (pf_arg){.name = "payload", .type = PF_STR, .str = hex, .len = 2 * k};
        }
    }
    need_track(x, ev->tp.thread);
    pf_instant(&x->pf, ev->tp.thread, x->threads[ev->tp.thread].now, name, strlen(name),
               tt_event_kind_name(ev->kind), a, n);
}

static void write_instant(struct export *x, const tt_event *ev)
{
    char name[352];
    instant_name(x, ev, name, sizeof name);
    if (x->perfetto)
        write_instant_pf(x, ev, name);
    else
        write_instant_json(x, ev, name);
    x->n.instants++;
}

/* ---- one event ---- */

static int before_window(const struct export *x, const struct thread_state *th,
                         const tt_event *ev)
{
    return x->has_from && (x->from_seq ? ev->tp.seq < th->from : ev->time < th->from);
}

static int after_window(const struct export *x, const struct thread_state *th,
                        const tt_event *ev)
{
    return x->has_to && (x->to_seq ? ev->tp.seq > th->to : ev->time > th->to);
}

/* The window starts for @th: the calls open now are written (at once, or with --min-duration
 * when one proves long enough). */
static void enter_window(struct export *x, uint32_t tid, struct thread_state *th)
{
    th->in_window = 1;
    if (x->min_ns == 0)
        for (uint32_t i = 0; i < th->depth; i++)
            begin_call(x, tid, &th->stack[i]);
}

static int handle(struct export *x, const tt_event *ev)
{
    uint32_t tid = ev->tp.thread;
    struct thread_state *th = &x->threads[tid];
    uint64_t ns;
    int quiet = 0;

    if (th->done || (x->one_thread && tid != x->thread))
        return TOOL_EXIT_OK;
    if (before_window(x, th, ev)) {
        if (th->seeded)
            return TOOL_EXIT_OK; /* the open calls at the start are on the stack already */
        quiet = 1;               /* read to know the calls open at the start */
    } else if (after_window(x, th, ev)) {
        if (!th->in_window)
            enter_window(x, tid, th); /* calls open across the whole window */
        th->done = 1;
        return TOOL_EXIT_OK;
    } else if (!th->in_window) {
        enter_window(x, tid, th);
    }
    ns = tool_ns_conv_ns(&x->conv, ev->time);
    if (ns > th->now)
        th->now = ns;
    switch (ev->kind) {
    case TT_EV_ENTER: {
        int rc = push_call(x, th, tid, ev->sp.function, th->now, ev->tp.seq);
        if (rc != TOOL_EXIT_OK)
            return rc;
        if (!quiet && x->min_ns == 0)
            begin_call(x, tid, &th->stack[th->depth - 1]);
        return TOOL_EXIT_OK;
    }
    case TT_EV_EXIT:
        pop_call(x, tid, th, ev, quiet);
        return TOOL_EXIT_OK;
    case TT_EV_SESSION_START:
    case TT_EV_SESSION_END:
    case TT_EV_THREAD_START:
    case TT_EV_THREAD_END:
        return TOOL_EXIT_OK; /* the thread's extent: only its time counts */
    default:
        if (ev->kind == TT_EV_CRASH)
            th->crashed = 1;
        if (!quiet)
            write_instant(x, ev);
        return TOOL_EXIT_OK;
    }
}

/* The calls of @th still open at its end, innermost first. */
static void close_thread(struct export *x, uint32_t tid)
{
    struct thread_state *th = &x->threads[tid];
    uint64_t end = th->now;
    const char *outcome = th->crashed ? "unwound by a crash" : "still open at the end of the trace";
    if (th->done && !x->to_seq) {
        uint64_t to = tool_ticks_to_ns(th->to, x->t.m.ticks_per_sec);
        end = to > th->now ? to : th->now;
    }
    if (th->done)
        outcome = "open at the end of the window";
    while (th->depth > 0) {
        th->depth--;
        x->open_total--;
        if (!end_call(x, tid, th, th->depth, end, outcome))
            continue;
        if (th->done)
            x->n.window_end++;
        else if (th->crashed)
            x->n.crashed++;
        else
            x->n.open_at_end++;
    }
    if (x->profile)
        cp_end_thread(&x->cp, tid);
}

/* ---- reading ---- */

static int read_error(struct export *x, int r, const tt_error_info *err)
{
    char what[64];
    snprintf(what, sizeof what, "after %" PRIu64 " events", x->n.events);
    return tool_report(x->t.path, what, r, err);
}

static int check_thread(struct export *x, const tt_event *ev)
{
    if (ev->tp.thread < x->t.m.thread_count)
        return TOOL_EXIT_OK;
    /* the reader checks this; a tool never trusts blindly */
    tool_error("%s: event %" PRIu64 " belongs to thread %" PRIu32 ", but the trace has %" PRIu32,
               x->t.path, x->n.events, ev->tp.thread, x->t.m.thread_count);
    return TOOL_EXIT_CORRUPT;
}

/* The whole trace in file order (no index tables, or no window that needs them). */
static int export_sequential(struct export *x)
{
    tt_error_info err;
    progress pr;
    tt_event ev;
    int rc = TOOL_EXIT_OK, r;

    progress_begin(&pr, "tinytrace export", x->t.m.event_count);
    tool_error_info_init(&err);
    while (rc == TOOL_EXIT_OK && (r = tt_reader_next(x->t.r, 0, &ev, &err)) == TT_OK) {
        if ((rc = check_thread(x, &ev)) == TOOL_EXIT_OK)
            rc = handle(x, &ev);
        x->n.events++;
        progress_update(&pr, x->n.events);
    }
    progress_end(&pr);
    if (rc != TOOL_EXIT_OK)
        return rc;
    if (r != TT_E_END)
        return read_error(x, r, &err);
    if (x->n.events != x->t.m.event_count) {
        tool_error("%s: read %" PRIu64 " events, but the manifest says %" PRIu64, x->t.path,
                   x->n.events, x->t.m.event_count);
        return TOOL_EXIT_CORRUPT;
    }
    for (uint32_t id = 0; id < x->t.m.thread_count; id++)
        close_thread(x, id);
    return TOOL_EXIT_OK;
}

static int index_error(struct export *x, const tt_error_info *err, int r)
{
    return tool_report(x->t.path, "index tables", r, err);
}

/* The time (ticks) of event @seq of thread @id: the seek index, then at most one batch of its
 * events. *@found 0 when the thread has no such event. */
static int seq_time(struct export *x, uint32_t id, uint64_t seq, uint64_t *time, int *found)
{
    tt_timepoint_entry e;
    tt_error_info err;
    tt_event ev;
    int r;

    *found = 0;
    tool_error_info_init(&err);
    if ((r = tt_index_seek_seq(x->t.ix, id, seq, &e, &err)) != TT_OK ||
        (r = tt_reader_seek(x->t.r, id, &e, &err)) != TT_OK)
        return index_error(x, &err, r);
    while ((r = tt_reader_next(x->t.r, id, &ev, &err)) == TT_OK) {
        if (ev.tp.seq >= seq) {
            *time = ev.time;
            *found = ev.tp.seq == seq;
            return TOOL_EXIT_OK;
        }
        if (tool_cursor_at_end(x->t.r, &ev))
            break;
    }
    if (r != TT_OK && r != TT_E_END)
        return read_error(x, r, &err);
    return TOOL_EXIT_OK;
}

/* The calls of thread @id open at time @from (ticks): the first frame that ends at or after it
 * (frames end in post-order), and those of it and its ancestors that started before it, pushed
 * outermost first. */
static int seed(struct export *x, uint32_t id, uint64_t from)
{
    const tt_index_thread *ti = tt_index_thread_info(x->t.ix, id);
    struct thread_state *th = &x->threads[id];
    uint64_t lo = 0, hi = ti != NULL ? ti->frames : 0, at;
    tt_error_info err;
    tt_frame f;
    int r;

    tool_error_info_init(&err);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((r = tt_index_frame(x->t.ix, id, mid, &f, &err)) != TT_OK)
            return index_error(x, &err, r);
        if (f.start + f.duration < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    th->seeded = 1;
    if (ti == NULL || lo >= ti->frames)
        return TOOL_EXIT_OK;
    /* climb; the chain is at most the thread's deepest nesting */
    uint64_t *chain = NULL;
    size_t n = 0, cap = 0;
    for (at = lo; at != TT_FRAME_NONE;) {
        if ((r = tt_index_frame(x->t.ix, id, at, &f, &err)) != TT_OK) {
            free(chain);
            return index_error(x, &err, r);
        }
        if (f.start < from) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 64;
                uint64_t *nc = realloc(chain, ncap * sizeof *nc);
                if (nc == NULL) {
                    free(chain);
                    tool_error("out of memory");
                    return TOOL_EXIT_SYSTEM;
                }
                chain = nc;
                cap = ncap;
            }
            chain[n++] = at;
        }
        if ((r = tt_index_parent(x->t.ix, id, at, &at, &err)) != TT_OK) {
            free(chain);
            return index_error(x, &err, r);
        }
    }
    int rc = TOOL_EXIT_OK;
    while (n > 0 && rc == TOOL_EXIT_OK) {
        if ((r = tt_index_frame(x->t.ix, id, chain[--n], &f, &err)) != TT_OK)
            rc = index_error(x, &err, r);
        else
            rc = push_call(x, th, id, f.function, tool_ns_conv_ns(&x->conv, f.start), UINT64_MAX);
    }
    free(chain);
    return rc;
}

/* A window, thread by thread, each through its own cursor and the index. */
static int export_windowed(struct export *x)
{
    tt_error_info err;
    progress pr;
    tt_event ev;
    int rc = TOOL_EXIT_OK, r = TT_OK;

    progress_begin(&pr, "tinytrace export", x->t.m.event_count);
    for (uint32_t id = 0; id < x->t.m.thread_count && rc == TOOL_EXIT_OK; id++) {
        struct thread_state *th = &x->threads[id];
        const tt_thread_entry *te = tt_reader_thread(x->t.r, id);
        uint64_t from_ticks = 0;
        int found = 1;

        if ((x->one_thread && id != x->thread) || te == NULL || te->event_count == 0)
            continue;
        if (x->has_from) {
            if (!x->from_seq) {
                from_ticks = th->from;
            } else if ((rc = seq_time(x, id, th->from, &from_ticks, &found)) != TOOL_EXIT_OK) {
                break;
            }
            if (!found)
                continue; /* the thread ends before the window */
        }
        tool_error_info_init(&err);
        if (x->has_from) {
            tt_timepoint_entry e;
            if ((rc = seed(x, id, from_ticks)) != TOOL_EXIT_OK)
                break;
            if ((r = tt_index_seek_time(x->t.ix, id, from_ticks, &e, &err)) != TT_OK ||
                (r = tt_reader_seek(x->t.r, id, &e, &err)) != TT_OK) {
                rc = index_error(x, &err, r);
                break;
            }
        } else {
            tool_cursor_begin(x->t.r, x->t.ix, id);
        }
        while (!th->done && (r = tt_reader_next(x->t.r, id, &ev, &err)) == TT_OK) {
            if ((rc = check_thread(x, &ev)) != TOOL_EXIT_OK ||
                (rc = handle(x, &ev)) != TOOL_EXIT_OK)
                break;
            x->n.events++;
            progress_update(&pr, x->n.events);
            if (tool_cursor_at_end(x->t.r, &ev))
                break;
        }
        if (rc == TOOL_EXIT_OK && r != TT_OK && r != TT_E_END)
            rc = read_error(x, r, &err);
        if (rc == TOOL_EXIT_OK)
            close_thread(x, id);
    }
    progress_end(&pr);
    return rc;
}

static void write_trailer(struct export *x)
{
    tool_json *j = &x->j;
    if (x->perfetto)
        return;
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
        tj_str(&j, "format", x->perfetto ? "perfetto" : x->profile ? "chrome-profile" : "chrome");
        tj_u64(&j, "events", x->n.events);
        tj_u64(&j, "threads", x->t.m.thread_count);
        tj_u64(&j, "frames", x->n.frames);
        tj_u64(&j, "frames_returned", x->n.returned);
        tj_u64(&j, "frames_open_at_end", x->n.open_at_end);
        tj_u64(&j, "frames_unwound_by_crash", x->n.crashed);
        tj_u64(&j, "frames_left_without_exit", x->n.left);
        tj_u64(&j, "frames_open_at_window_end", x->n.window_end);
        tj_u64(&j, "unmatched_exits", x->n.unmatched_exits);
        tj_u64(&j, "instant_events", x->n.instants);
        if (x->perfetto)
            tj_u64(&j, "packets", x->pf.packets);
        if (x->profile) {
            tj_u64(&j, "samples", x->cp.samples);
            tj_u64(&j, "call_paths", x->cp.nodes);
        }
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
    if (x->n.window_end > 0)
        fprintf(stderr, ", %" PRIu64 " frames open at the end of the window", x->n.window_end);
    if (x->n.unmatched_exits > 0)
        fprintf(stderr, ", %" PRIu64 " exits without a matching call skipped",
                x->n.unmatched_exits);
    fputc('\n', stderr);
}

/* ---- the command line and the output file ---- */

enum {
    OPT_MAX_OPEN = 256,
    OPT_FORCE,
    OPT_ARGS,
    OPT_FROM,
    OPT_TO,
    OPT_MAX_DEPTH,
};

struct export_options {
    struct export *x;
    const char *out_path; /* -o; NULL: stdout */
    int force;            /* --force: -o may replace a regular file */
};

/* --from / --to: a time with a unit, or a plain sequence number. */
static int take_bound(const char *prog, const char *option, const char *arg, uint64_t *v,
                      int *is_seq)
{
    if (tool_parse_time_ns(arg, v) == 0) {
        *is_seq = 0;
        return TOOL_EXIT_OK;
    }
    *is_seq = 1;
    return tool_parse_u64(prog, option, arg, 0, UINT64_MAX, v) == TOOL_EXIT_OK
               ? TOOL_EXIT_OK
               : TOOL_EXIT_USAGE;
}

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct export_options *eo = ctx;
    struct export *x = eo->x;
    switch (c) {
    case 'f':
        x->perfetto = x->profile = 0;
        if (strcmp(arg, "chrome") == 0)
            ;
        else if (strcmp(arg, "perfetto") == 0)
            x->perfetto = 1;
        else if (strcmp(arg, "chrome-profile") == 0)
            x->profile = 1;
        else
            return tool_usage_error(prog, "unknown format '%s'; the formats are: chrome, "
                                          "chrome-profile, perfetto", arg);
        return TOOL_EXIT_OK;
    case 'o':
        eo->out_path = arg;
        return TOOL_EXIT_OK;
    case 'm':
        if (tool_parse_time_ns(arg, &x->min_ns) != 0)
            return tool_usage_error(prog, "--min-duration: '%s' is not a time (250us, 1.5ms, 2s)",
                                    arg);
        return TOOL_EXIT_OK;
    case OPT_MAX_OPEN:
        return tool_parse_u64(prog, "--max-open-calls", arg, 1, UINT32_MAX, &x->max_open);
    case OPT_FORCE:
        eo->force = 1;
        return TOOL_EXIT_OK;
    case OPT_ARGS:
        x->args = 1;
        return TOOL_EXIT_OK;
    case OPT_FROM:
        x->has_from = 1;
        return take_bound(prog, "--from", arg, &x->from, &x->from_seq);
    case OPT_TO:
        x->has_to = 1;
        return take_bound(prog, "--to", arg, &x->to, &x->to_seq);
    case OPT_MAX_DEPTH:
        return tool_parse_u64(prog, "--max-depth", arg, 1, UINT32_MAX, &x->max_depth);
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
        {"args", no_argument, NULL, OPT_ARGS},
        {"from", required_argument, NULL, OPT_FROM},
        {"to", required_argument, NULL, OPT_TO},
        {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
        {"min-duration", required_argument, NULL, 'm'},
        {"max-open-calls", required_argument, NULL, OPT_MAX_OPEN},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY | TOOL_OPT_THREAD |
                                             TOOL_OPT_PROCESS | TOOL_OPT_NO_DEMANGLE,
                                   .options = options,
                                   .take = take_option};
    struct export x;
    struct export_options eo = {.x = &x};
    tool_output out = {.fd = -1};
    tool_opts o;
    int rc, windowed;

    memset(&x, 0, sizeof x);
    x.max_open = MAX_OPEN_DEFAULT;
    x.max_depth = UINT64_MAX;
    if ((rc = tool_opts_parse(&o, &verb, &eo, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (eo.out_path != NULL && strcmp(eo.out_path, "-") == 0)
        eo.out_path = NULL;
    if (o.json && eo.out_path == NULL)
        return tool_usage_error(argv[0], "--json prints the summary on stdout: it needs -o FILE");
    if (x.args && (x.perfetto || x.profile))
        return tool_usage_error(argv[0], "--args is for --format chrome");
    if (!x.has_to)
        x.to = UINT64_MAX;
    if (x.has_from && x.has_to && x.from_seq == x.to_seq && x.from > x.to)
        return tool_usage_error(argv[0], "--from is after --to: the window is empty");
    x.one_thread = o.one_thread;
    x.thread = o.thread;
    const char *const inputs[] = {o.file, NULL};
    if (eo.out_path != NULL &&
        (rc = tool_output_check(argv[0], eo.out_path, inputs, eo.force)) != TOOL_EXIT_OK)
        return rc;

    /* A window is read thread by thread through the index where the trace has one. */
    windowed = x.has_from || x.has_to || x.one_thread;
    rc = tool_trace_start(&x.t, o.file, &o,
                          windowed ? TT_CURSORS_PER_THREAD : TT_CURSORS_SEQUENTIAL,
                          TOOL_TRACE_OPEN);
    if (rc == TOOL_EXIT_OK && windowed) {
        tt_error_info err;
        tool_error_info_init(&err);
        if (tt_index_open(x.t.r, &x.t.lim, &x.t.ix, &err) != TT_OK) {
            x.t.ix = NULL;
            /* no index tables: a per-thread cursor per thread, all read from the start */
            tool_trace_close(&x.t);
            rc = tool_trace_start(&x.t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_OPEN);
            windowed = 0;
        }
    }
    if (rc == TOOL_EXIT_OK && o.one_thread && o.thread >= x.t.m.thread_count) {
        tool_error("%s: the trace has no thread %" PRIu32 " (it has %" PRIu32 ")", x.t.path,
                   o.thread, x.t.m.thread_count);
        rc = TOOL_EXIT_USAGE;
    }
    if (rc == TOOL_EXIT_OK) {
        x.pid = x.t.m.pid;
        tool_ns_conv_init(&x.conv, x.t.m.ticks_per_sec);
        rc = assign_tids(&x);
    }
    if (rc == TOOL_EXIT_OK) {
        uint32_t n = x.t.m.thread_count;
        x.threads = calloc(n ? n : 1, sizeof *x.threads);
        if (x.threads == NULL) {
            tool_error("out of memory for %" PRIu32 " threads", n);
            rc = TOOL_EXIT_SYSTEM;
        }
        for (uint32_t id = 0; rc == TOOL_EXIT_OK && id < n; id++) {
            x.threads[id].from = x.from_seq ? x.from
                                            : tool_ns_to_ticks(x.from, x.t.m.ticks_per_sec);
            /* --to TIME includes every tick shown as TIME ns: up to the one before the
             * first tick of TIME + 1 ns (a tick is shorter than a nanosecond) */
            x.threads[id].to = x.to_seq || x.to == UINT64_MAX
                                   ? x.to
                                   : tool_ns_to_ticks(x.to + 1, x.t.m.ticks_per_sec) - 1;
        }
    }
    if (rc == TOOL_EXIT_OK)
        rc = open_output(&x, eo.out_path, &out);
    if (rc == TOOL_EXIT_OK && x.perfetto && pf_init(&x.pf, x.out, x.t.m.pid, x.t.m.thread_count)) {
        tool_error("out of memory");
        rc = TOOL_EXIT_SYSTEM;
    }
    if (rc == TOOL_EXIT_OK && x.profile &&
        cp_init(&x.cp, x.out, &x.written, x.pid, x.tids, x.t.m.thread_count, profile_name, &x)) {
        tool_error("out of memory");
        rc = TOOL_EXIT_SYSTEM;
    }
    if (rc != TOOL_EXIT_OK) {
        if (x.out != NULL && x.out != stdout)
            close_output(&x, rc, &out, argv[0], inputs, eo.force);
        free(x.threads);
        free(x.tids);
        tool_trace_close(&x.t);
        return rc;
    }

    if (!x.perfetto)
        fputs("{\"traceEvents\":[\n", x.out);
    write_metadata(&x);
    rc = windowed ? export_windowed(&x) : export_sequential(&x);
    if (rc == TOOL_EXIT_OK && x.oom) {
        tool_error("out of memory for the call paths of the profile (%" PRIu32 " so far)",
                   x.cp.nodes);
        rc = TOOL_EXIT_SYSTEM;
    }
    if (rc == TOOL_EXIT_OK)
        write_trailer(&x);
    if (x.perfetto)
        pf_free(&x.pf);
    if (x.profile)
        cp_free(&x.cp);
    if (x.out != stdout)
        rc = close_output(&x, rc, &out, argv[0], inputs, eo.force);
    if (rc == TOOL_EXIT_OK)
        print_summary(&x, o.json, eo.out_path != NULL ? eo.out_path : "-");
    for (uint32_t id = 0; x.threads != NULL && id < x.t.m.thread_count; id++)
        free(x.threads[id].stack);
    free(x.threads);
    free(x.tids);
    tool_trace_close(&x.t);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
