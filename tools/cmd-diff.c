/* SPDX-License-Identifier: MIT */
/* tinytrace diff — where two recordings of the same program first differ, thread by thread.
 *
 * The question is CI's: "what did the failing run do differently from the passing one?" Two runs
 * of one program interleave their threads differently, so a global order says little; within a
 * thread, program order is the recorded order, and that is what is compared. Each thread of A is
 * paired with one thread of B:
 *   1. by name, where a name occurs exactly once in A and exactly once in B;
 *   2. the threads left over (unnamed, or sharing a name with another thread of their file) in
 *      the order in which they first recorded (thread id order), among themselves;
 *   3. a named thread whose name the other file lacks has no partner: "only in A" / "only in B".
 * Then each pair is read in lockstep, one per-thread cursor on each side, until the first event
 * that differs, or until one side ends before the other.
 *
 * What "the same event" means follows replay's matching (event.h, docs/REPLAY.md): the kind (and
 * the direction of io), the function and the site compared by name (ids are interned per run and
 * may differ), the argument (size, channel, tag, signal) except where it is a process or thread
 * id (session-start, thread-start, thread-end), and the payload bytes, except a crash's, which is
 * a backtrace with addresses that ASLR moves. Times and addresses are never compared.
 *
 * What is kept: one chunk buffer per thread on each side (the readers' probed capacity), the last
 * few matching events (--context, their first 16 payload bytes), and the stack of open calls of
 * the pair being compared, which enter and exit events push and pop; both sides share it up to
 * the difference, since every event before it matched. The stack keeps its outermost STACK_KEEP
 * entries and only counts deeper ones, so a hostile file of endless enters costs bounded memory.
 *
 * The threads are compared one pair after the other, so a difference is found after reading
 * only the threads before it and the difference's own thread up to it.
 */
#include "merge.h"
#include "opts.h"
#include "progress.h"
#include "tool.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PREVIEW_BYTES 16
#define STACK_KEEP 65536u
#define CONTEXT_DEFAULT 5u
#define CONTEXT_MAX 1000u

static const char usage[] =
    "Usage: tinytrace diff [--json] [--context N] [--max-memory MB] A B\n"
    "\n"
    "Compares two recordings of the same program thread by thread and prints, for each thread,\n"
    "the first event where they differ: the last matching events before it (the context), both\n"
    "events, what differs, and the call path (the functions entered and not yet left) on each\n"
    "side. Threads are paired by name where a name is unique in both files, the rest in the\n"
    "order in which they first recorded; a thread without a partner is reported as only in A\n"
    "or only in B.\n"
    "\n"
    "Compared: kind (and io direction), function and site (by name), argument (size, channel,\n"
    "tag, signal; not the process and thread ids of start events), payload bytes (not a\n"
    "crash's backtrace). Not compared: times, addresses.\n"
    "\n"
    "Options:\n"
    "  -j, --json          print one JSON object: {\"a\", \"b\", \"same\", \"threads\": [...],\n"
    "                      \"earliest\"}; each thread {\"thread_a\", \"thread_b\", \"name\",\n"
    "                      \"matched_by\", \"same\", \"events\", \"difference\"}\n"
    "  -c, --context N     matching events shown before a difference (default 5, at most 1000)\n"
    TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP
    "  -h, --help          print this help\n"
    "\n"
    "A progress line is shown on stderr while it reads, when stderr is a terminal.\n"
    "\n"
    "Exits 0 when the recordings are the same, 1 when they differ, 3 when either is corrupt or\n"
    "truncated (what was found before the damage is printed), 7 when either is incomplete, 6\n"
    "when a file cannot be opened or the output cannot be written, 2 on a bad command line.\n";

/* Fields of an event that can differ. */
enum {
    D_KIND = 1u << 0,
    D_FUNCTION = 1u << 1,
    D_SITE = 1u << 2,
    D_ARG = 1u << 3,
    D_LEN = 1u << 4,
    D_PAYLOAD = 1u << 5,
    D_END = 1u << 6, /* one side's thread ends here (no more events, or its thread-end) */
};

static const char *const field_names[] = {"kind", "function", "site", "arg", "len", "payload",
                                          "end"};

/* A kept copy of an event: what the context shows. */
struct kept {
    uint8_t kind, dir;
    uint64_t seq;
    uint64_t time;
    uint32_t function, site;
    uint64_t arg;
    uint64_t len;
    uint8_t preview[PREVIEW_BYTES];
};

struct pair {
    int64_t a, b;   /* thread ids, -1 where the thread has no partner */
    int by_name;
};

struct result {
    int same;
    uint64_t events;        /* matching events before the difference (all of them if same) */
    unsigned fields;        /* D_* of the difference */
    int has_a, has_b;       /* the side has an event at the difference */
    char ended;             /* D_END: 'a' or 'b', the side whose thread ends here */
    struct kept a, b;       /* the two events at the difference */
    uint64_t payload_at;    /* first differing payload byte (D_PAYLOAD) */
    uint8_t win_a[PREVIEW_BYTES], win_b[PREVIEW_BYTES]; /* the payloads from payload_at on */
    size_t win_na, win_nb;
    uint64_t ctx_n;         /* events in the context ring */
    uint64_t depth;         /* call depth before the difference (may exceed STACK_KEEP) */
};

struct diff {
    tool_trace ta, tb;
    const char *pa, *pb;
    unsigned context;
    int json;
    struct kept *ring;      /* context: the last @context matching events of A */
    uint32_t *stack;        /* function ids (A's) of the open calls, outermost first */
    progress pr;
    uint64_t done;          /* event pairs compared, all threads */
    uint32_t stall_a, stall_b; /* each trace's id of TT_STALL_FUNCTION, 0: none */
};

static void keep(struct kept *k, const tt_event *ev)
{
    size_t n = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;
    k->kind = ev->kind;
    k->dir = ev->dir;
    k->seq = ev->tp.seq;
    k->time = ev->time;
    k->function = ev->sp.function;
    k->site = ev->sp.site;
    k->arg = ev->arg;
    k->len = ev->payload_len;
    memset(k->preview, 0, sizeof k->preview);
    if (n > 0 && ev->payload != NULL)
        memcpy(k->preview, ev->payload, n);
}

/* ---- names ---- */

/* The name of thread @id of @r, or NULL (len 0) for an unnamed one. */
static const char *thread_name(const tt_reader *r, uint32_t id, size_t *len)
{
    const tt_thread_entry *e = tt_reader_thread(r, id);
    const char *s;
    *len = 0;
    if (e == NULL || e->name == 0)
        return NULL;
    s = tool_object_name(r, e->name, len);
    if (s == NULL || *len == 0) {
        *len = 0;
        return NULL;
    }
    return s;
}

/* Objects @x of @ra and @y of @rb are the same: equal names where both have one, else equal ids
 * (an id without a name can only be compared as a number). */
static int same_object(const tt_reader *ra, uint32_t x, const tt_reader *rb, uint32_t y)
{
    size_t lx = 0, ly = 0;
    const char *nx, *ny;
    if (x == 0 || y == 0)
        return x == y;
    nx = tool_object_name(ra, x, &lx);
    ny = tool_object_name(rb, y, &ly);
    if (nx == NULL || ny == NULL || lx == 0 || ly == 0)
        return x == y;
    return lx == ly && memcmp(nx, ny, lx) == 0;
}

/* ---- pairing the threads ---- */

struct named {
    const char *name;
    size_t len;
    uint32_t id;
};

static int named_cmp(const void *x, const void *y)
{
    const struct named *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->name, b->name, n);
    if (c != 0)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Fills @list with the named threads of @r sorted by name, and sets unique[id] = 1 for the
 * threads whose name no other thread of @r has. Returns the number of named threads. */
static uint32_t sorted_names(const tt_reader *r, uint32_t n, struct named *list,
                             unsigned char *unique)
{
    uint32_t k = 0;
    for (uint32_t id = 0; id < n; id++) {
        size_t len;
        const char *s = thread_name(r, id, &len);
        unique[id] = 0;
        if (s != NULL)
            list[k++] = (struct named){s, len, id};
    }
    qsort(list, k, sizeof *list, named_cmp);
    for (uint32_t i = 0; i < k; i++) {
        int dup = (i > 0 && list[i - 1].len == list[i].len &&
                   memcmp(list[i - 1].name, list[i].name, list[i].len) == 0) ||
                  (i + 1 < k && list[i + 1].len == list[i].len &&
                   memcmp(list[i + 1].name, list[i].name, list[i].len) == 0);
        unique[list[i].id] = !dup;
    }
    return k;
}

/* Pairs the threads of A and B (see the top of the file). Returns the number of entries of
 * *@out, sorted by A's thread id, B-only threads last; NULL *@out when out of memory. */
static uint32_t pair_threads(const tt_reader *ra, uint32_t na, const tt_reader *rb, uint32_t nb,
                             struct pair **out)
{
    struct named *la = calloc(na ? na : 1, sizeof *la), *lb = calloc(nb ? nb : 1, sizeof *lb);
    unsigned char *ua = calloc(na ? na : 1, 1), *ub = calloc(nb ? nb : 1, 1);
    int64_t *mate_a = calloc(na ? na : 1, sizeof *mate_a), *mate_b = calloc(nb ? nb : 1,
                                                                            sizeof *mate_b);
    struct pair *p = calloc((size_t)na + nb + 1, sizeof *p);
    uint32_t ka, kb, i = 0, j = 0, n = 0;

    *out = NULL;
    if (la == NULL || lb == NULL || ua == NULL || ub == NULL || mate_a == NULL ||
        mate_b == NULL || p == NULL)
        goto done;
    for (uint32_t t = 0; t < na; t++)
        mate_a[t] = -1;
    for (uint32_t t = 0; t < nb; t++)
        mate_b[t] = -1;
    ka = sorted_names(ra, na, la, ua);
    kb = sorted_names(rb, nb, lb, ub);
    /* 1. unique names, by a merge of the two sorted lists */
    while (i < ka && j < kb) {
        struct named x = la[i], y = lb[j];
        int c;
        x.id = y.id = 0; /* compare the names only */
        c = named_cmp(&x, &y);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            if (ua[la[i].id] && ub[lb[j].id]) {
                mate_a[la[i].id] = lb[j].id;
                mate_b[lb[j].id] = la[i].id;
            }
            i++;
            j++;
        }
    }
    /* 2. the threads without a unique name, in order, among themselves */
    i = j = 0;
    for (;;) {
        while (i < na && (mate_a[i] >= 0 || ua[i]))
            i++;
        while (j < nb && (mate_b[j] >= 0 || ub[j]))
            j++;
        if (i >= na || j >= nb)
            break;
        mate_a[i] = j;
        mate_b[j] = i;
        i++;
        j++;
    }
    /* the list: A's threads in order, then B's without a partner */
    n = 0;
    for (uint32_t t = 0; t < na; t++)
        p[n++] = (struct pair){t, mate_a[t], mate_a[t] >= 0 && ua[t]};
    for (uint32_t t = 0; t < nb; t++)
        if (mate_b[t] < 0)
            p[n++] = (struct pair){-1, t, 0};
    *out = p;
    p = NULL;
done:
    free(la);
    free(lb);
    free(ua);
    free(ub);
    free(mate_a);
    free(mate_b);
    free(p);
    return *out != NULL ? n : 0;
}

/* ---- comparing one pair ---- */

static int is_end(const tt_event *ev)
{
    return ev->kind == TT_EV_THREAD_END || ev->kind == TT_EV_SESSION_END;
}

/* The D_* fields in which @x (of A) and @y (of B) differ; *@at the first differing payload
 * byte. */
static unsigned compare_events(const tt_reader *ra, const tt_event *x, const tt_reader *rb,
                               const tt_event *y, uint64_t *at)
{
    unsigned d = 0;
    if (is_end(x) != is_end(y))
        return D_END; /* one thread stops here, the other goes on */
    if (x->kind != y->kind || (x->kind == TT_EV_IO && x->dir != y->dir))
        return D_KIND; /* the other fields mean different things: not worth listing */
    if (!same_object(ra, x->sp.function, rb, y->sp.function))
        d |= D_FUNCTION;
    if (!same_object(ra, x->sp.site, rb, y->sp.site))
        d |= D_SITE;
    if (x->kind != TT_EV_SESSION_START && x->kind != TT_EV_THREAD_START &&
        x->kind != TT_EV_THREAD_END && x->arg != y->arg)
        d |= D_ARG;
    if (x->kind != TT_EV_CRASH) {
        uint64_t n = x->payload_len < y->payload_len ? x->payload_len : y->payload_len;
        if (x->payload_len != y->payload_len)
            d |= D_LEN;
        if (n > 0 && x->payload != NULL && y->payload != NULL &&
            memcmp(x->payload, y->payload, (size_t)n) != 0) {
            const unsigned char *p = x->payload, *q = y->payload;
            uint64_t k = 0;
            while (p[k] == q[k])
                k++;
            *at = k;
            d |= D_PAYLOAD;
        }
    }
    return d;
}

/* Copies up to PREVIEW_BYTES of @ev's payload from byte @at into @dst; returns the count. */
static size_t window(const tt_event *ev, uint64_t at, uint8_t *dst)
{
    uint64_t n;
    if (ev->payload == NULL || at >= ev->payload_len)
        return 0;
    n = ev->payload_len - at < PREVIEW_BYTES ? ev->payload_len - at : PREVIEW_BYTES;
    memcpy(dst, (const uint8_t *)ev->payload + at, (size_t)n);
    return (size_t)n;
}

/* The next event of cursor @c that is not the tracer's own (a wait for the memory budget, a call
 * of TT_STALL_FUNCTION, id @stall): it says how that run went, not what the program did. *@end
 * is set once the thread's last event has been read. */
static int next_event(tt_reader *r, uint32_t c, uint32_t stall, tt_event *x, tt_error_info *e,
                      int *end)
{
    for (;;) {
        int rc = tt_reader_next(r, c, x, e);
        if (rc != TT_OK)
            return rc;
        *end = *end || tool_cursor_at_end(r, x);
        if (!stall || (x->kind != TT_EV_ENTER && x->kind != TT_EV_EXIT) ||
            x->sp.function != stall)
            return TT_OK;
        if (*end)
            return TT_E_END;
    }
}

/* Reads the pair's two threads in lockstep up to the first difference. Returns TOOL_EXIT_OK
 * with *@res filled, or the exit code of a read error (reported). */
static int compare_pair(struct diff *d, const struct pair *p, struct result *res)
{
    tt_reader *ra = d->ta.r, *rb = d->tb.r;
    uint32_t ca = (uint32_t)p->a, cb = (uint32_t)p->b;
    tt_error_info ea, eb;
    tt_event x, y;

    memset(res, 0, sizeof *res);
    tool_error_info_init(&ea);
    tool_error_info_init(&eb);
    /* each cursor from its thread's first chunk, and done at its last event (merge.h: a
     * per-thread cursor would scan the other threads' chunks for both) */
    tool_cursor_begin(ra, d->ta.ix, ca);
    tool_cursor_begin(rb, d->tb.ix, cb);
    int end_a = tt_reader_thread(ra, ca)->event_count == 0;
    int end_b = tt_reader_thread(rb, cb)->event_count == 0;
    for (;;) {
        int rx = end_a ? TT_E_END : next_event(ra, ca, d->stall_a, &x, &ea, &end_a);
        int ry = end_b ? TT_E_END : next_event(rb, cb, d->stall_b, &y, &eb, &end_b);
        unsigned f;
        char what[96];

        if (rx != TT_OK && rx != TT_E_END) {
            progress_end(&d->pr);
            snprintf(what, sizeof what, "thread %" PRIu32 ", after %" PRIu64 " events", ca,
                     res->events);
            return tool_report(d->pa, what, rx, &ea);
        }
        if (ry != TT_OK && ry != TT_E_END) {
            progress_end(&d->pr);
            snprintf(what, sizeof what, "thread %" PRIu32 ", after %" PRIu64 " events", cb,
                     res->events);
            return tool_report(d->pb, what, ry, &eb);
        }
        if (rx == TT_E_END && ry == TT_E_END) {
            res->same = 1;
            return TOOL_EXIT_OK;
        }
        if (rx == TT_E_END || ry == TT_E_END) {
            f = D_END;
        } else {
            f = compare_events(ra, &x, rb, &y, &res->payload_at);
        }
        if (f != 0) {
            res->fields = f;
            res->has_a = rx == TT_OK;
            res->has_b = ry == TT_OK;
            if (f & D_END)
                res->ended = rx == TT_E_END || (ry == TT_OK && is_end(&x)) ? 'a' : 'b';
            if (res->has_a)
                keep(&res->a, &x);
            if (res->has_b)
                keep(&res->b, &y);
            if (f & D_PAYLOAD) {
                res->win_na = window(&x, res->payload_at, res->win_a);
                res->win_nb = window(&y, res->payload_at, res->win_b);
            }
            return TOOL_EXIT_OK;
        }
        /* a match: into the context ring, and onto or off the call stack */
        if (d->context > 0)
            keep(&d->ring[res->events % d->context], &x);
        if (x.kind == TT_EV_ENTER) {
            if (res->depth < STACK_KEEP)
                d->stack[res->depth] = x.sp.function;
            res->depth++;
        } else if (x.kind == TT_EV_EXIT && res->depth > 0) {
            res->depth--;
        }
        res->events++;
        progress_update(&d->pr, ++d->done);
    }
}

/* ---- output ---- */

static void print_name(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    tool_print_text(f, s, len);
    fputc('"', f);
}

static void print_thread_label(FILE *f, const tt_reader *r, int64_t id)
{
    size_t len;
    const char *s = thread_name(r, (uint32_t)id, &len);
    fprintf(f, "thread %" PRId64, id);
    if (s != NULL) {
        fputc(' ', f);
        print_name(f, s, len);
    }
}

static int kind_has_arg(unsigned kind)
{
    return kind == TT_EV_ALLOC || kind == TT_EV_IO || kind == TT_EV_USER ||
           kind == TT_EV_CRASH || kind == TT_EV_CHECKPOINT;
}

static void print_kind(FILE *f, const struct kept *k)
{
    fputs(tt_event_kind_name(k->kind), f);
    if (k->kind == TT_EV_IO)
        fputs(k->dir == TT_IO_IN ? ":in" : k->dir == TT_IO_OUT ? ":out" : ":?", f);
}

static void print_kept(FILE *f, const tt_reader *r, const struct kept *k, uint64_t tps)
{
    size_t n = k->len < PREVIEW_BYTES ? (size_t)k->len : PREVIEW_BYTES;
    fprintf(f, "seq %" PRIu64 "  ", k->seq);
    print_kind(f, k);
    if (k->function != 0) {
        fputc(' ', f);
        tool_print_object(f, r, k->function);
    }
    if (k->site != 0) {
        fputs(" @", f);
        tool_print_object(f, r, k->site);
    }
    if (kind_has_arg(k->kind) || k->arg != 0)
        fprintf(f, " arg=%" PRIu64, k->arg);
    if (k->len > 0) {
        fprintf(f, " len=%" PRIu64 " payload=", k->len);
        tool_print_hex(f, k->preview, n);
        if (k->len > n)
            fputs("..", f);
    }
    fprintf(f, "  (%" PRIu64 " ns)\n", tool_ticks_to_ns(k->time, tps));
}

/* The call path at the difference: the shared stack, plus the differing event's own function
 * when it enters one. */
static void print_path(FILE *f, const struct diff *d, const struct result *res,
                       const tt_reader *r, const struct kept *k, int has)
{
    uint64_t kept = res->depth < STACK_KEEP ? res->depth : STACK_KEEP;
    int any = 0;
    for (uint64_t i = 0; i < kept; i++) {
        if (any)
            fputs(" > ", f);
        tool_print_object(f, d->ta.r, d->stack[i]);
        any = 1;
    }
    if (res->depth > kept) {
        fprintf(f, " > ... (%" PRIu64 " deeper calls not kept)", res->depth - kept);
        any = 1;
    }
    if (has && k->kind == TT_EV_ENTER) {
        if (any)
            fputs(" > ", f);
        tool_print_object(f, r, k->function);
        fputs(" (entering)", f);
        any = 1;
    }
    if (!any)
        fputs("(no open call)", f);
    fputc('\n', f);
}

static void print_fields(FILE *f, const struct result *res)
{
    const char *sep = "";
    fputs("  differs in: ", f);
    if (res->fields & D_END) {
        fputs(res->ended == 'b' ? "end: B's thread ends here, A's goes on"
                                : "end: A's thread ends here, B's goes on",
              f);
        fputc('\n', f);
        return;
    }
    for (unsigned i = 0; i < sizeof field_names / sizeof field_names[0]; i++) {
        if (!(res->fields & (1u << i)))
            continue;
        fputs(sep, f);
        fputs(field_names[i], f);
        if ((1u << i) == D_KIND) {
            fputs(" (", f);
            print_kind(f, &res->a);
            fputs(" vs ", f);
            print_kind(f, &res->b);
            fputc(')', f);
        } else if ((1u << i) == D_ARG) {
            fprintf(f, " (%" PRIu64 " vs %" PRIu64 ")", res->a.arg, res->b.arg);
        } else if ((1u << i) == D_LEN) {
            fprintf(f, " (%" PRIu64 " vs %" PRIu64 ")", res->a.len, res->b.len);
        } else if ((1u << i) == D_PAYLOAD) {
            fprintf(f, " from byte %" PRIu64 " (A ", res->payload_at);
            tool_print_hex(f, res->win_a, res->win_na);
            fputs(" vs B ", f);
            tool_print_hex(f, res->win_b, res->win_nb);
            fputc(')', f);
        }
        sep = ", ";
    }
    fputc('\n', f);
}

static void print_pair_text(const struct diff *d, const struct pair *p, const struct result *res)
{
    FILE *f = stdout;
    uint64_t tpa = d->ta.m.ticks_per_sec, tpb = d->tb.m.ticks_per_sec;
    uint64_t n;

    if (p->a < 0 || p->b < 0) {
        const tt_reader *r = p->a < 0 ? d->tb.r : d->ta.r;
        int64_t id = p->a < 0 ? p->b : p->a;
        const tt_thread_entry *e = tt_reader_thread(r, (uint32_t)id);
        fputs(p->a < 0 ? "B " : "A ", f);
        print_thread_label(f, r, id);
        fprintf(f, ": only in %s (%" PRIu64 " events)\n", p->a < 0 ? "B" : "A",
                e != NULL ? e->event_count : 0);
        return;
    }
    print_thread_label(f, d->ta.r, p->a);
    if (p->b != p->a || !p->by_name)
        fprintf(f, " (B: thread %" PRId64 ", paired %s)", p->b, p->by_name ? "by name"
                                                                         : "by order");
    if (res->same) {
        fprintf(f, ": same (%" PRIu64 " events)\n", res->events);
        return;
    }
    fprintf(f, ": differs at seq %" PRIu64 " (after %" PRIu64 " matching events)\n",
            res->has_a ? res->a.seq : res->b.seq, res->events);
    n = res->events < d->context ? res->events : d->context;
    if (n > 0) {
        fprintf(f, "  last %" PRIu64 " matching event%s:\n", n, n == 1 ? "" : "s");
        for (uint64_t i = res->events - n; i < res->events; i++) {
            fputs("    ", f);
            print_kept(f, d->ta.r, &d->ring[i % d->context], tpa);
        }
    }
    fputs("  A ", f);
    if (res->has_a)
        print_kept(f, d->ta.r, &res->a, tpa);
    else
        fputs("(end of thread)\n", f);
    fputs("  B ", f);
    if (res->has_b)
        print_kept(f, d->tb.r, &res->b, tpb);
    else
        fputs("(end of thread)\n", f);
    print_fields(f, res);
    fputs("  A call path: ", f);
    print_path(f, d, res, d->ta.r, &res->a, res->has_a);
    fputs("  B call path: ", f);
    print_path(f, d, res, d->tb.r, &res->b, res->has_b);
}

static void json_kept(tool_json *j, const char *key, const tt_reader *r, const struct kept *k,
                      uint64_t tps)
{
    size_t n = k->len < PREVIEW_BYTES ? (size_t)k->len : PREVIEW_BYTES;
    tj_object_begin(j, key);
    tj_u64(j, "seq", k->seq);
    tj_u64(j, "time_ns", tool_ticks_to_ns(k->time, tps));
    tj_str(j, "kind", tt_event_kind_name(k->kind));
    if (k->kind == TT_EV_IO)
        tj_str(j, "dir", k->dir == TT_IO_IN ? "in" : k->dir == TT_IO_OUT ? "out" : "?");
    tj_object_name(j, "function", r, k->function);
    tj_object_name(j, "site", r, k->site);
    tj_u64(j, "arg", k->arg);
    tj_u64(j, "len", k->len);
    tj_hex(j, "payload", k->preview, n);
    tj_object_end(j);
}

static void json_path(tool_json *j, const char *key, const struct diff *d,
                      const struct result *res, const tt_reader *r, const struct kept *k,
                      int has)
{
    uint64_t kept = res->depth < STACK_KEEP ? res->depth : STACK_KEEP;
    tj_array_begin(j, key);
    for (uint64_t i = 0; i < kept; i++)
        tj_object_name(j, NULL, d->ta.r, d->stack[i]);
    if (has && k->kind == TT_EV_ENTER)
        tj_object_name(j, NULL, r, k->function);
    tj_array_end(j);
}

static void json_thread_name(tool_json *j, const char *key, const tt_reader *r, int64_t id)
{
    size_t len;
    const char *s = id >= 0 ? thread_name(r, (uint32_t)id, &len) : NULL;
    if (s == NULL)
        tj_null(j, key);
    else
        tj_strn(j, key, s, len);
}

static void print_pair_json(tool_json *j, const struct diff *d, const struct pair *p,
                            const struct result *res)
{
    uint64_t tpa = d->ta.m.ticks_per_sec, tpb = d->tb.m.ticks_per_sec;
    tj_object_begin(j, NULL);
    if (p->a >= 0)
        tj_u64(j, "thread_a", (uint64_t)p->a);
    else
        tj_null(j, "thread_a");
    if (p->b >= 0)
        tj_u64(j, "thread_b", (uint64_t)p->b);
    else
        tj_null(j, "thread_b");
    json_thread_name(j, "name", p->a >= 0 ? d->ta.r : d->tb.r, p->a >= 0 ? p->a : p->b);
    if (p->a < 0 || p->b < 0) {
        const tt_reader *r = p->a < 0 ? d->tb.r : d->ta.r;
        const tt_thread_entry *e = tt_reader_thread(r, (uint32_t)(p->a < 0 ? p->b : p->a));
        tj_null(j, "matched_by");
        tj_bool(j, "same", 0);
        tj_str(j, "only_in", p->a < 0 ? "b" : "a");
        tj_u64(j, "events", e != NULL ? e->event_count : 0);
        tj_object_end(j);
        return;
    }
    tj_str(j, "matched_by", p->by_name ? "name" : "order");
    tj_bool(j, "same", res->same);
    tj_u64(j, "events", res->events);
    if (!res->same) {
        uint64_t n = res->events < d->context ? res->events : d->context;
        tj_object_begin(j, "difference");
        tj_u64(j, "seq", res->has_a ? res->a.seq : res->b.seq);
        tj_array_begin(j, "fields");
        for (unsigned i = 0; i < sizeof field_names / sizeof field_names[0]; i++)
            if (res->fields & (1u << i))
                tj_str(j, NULL, field_names[i]);
        tj_array_end(j);
        if (res->fields & D_END)
            tj_str(j, "ended", res->ended == 'a' ? "a" : "b");
        if (res->fields & D_PAYLOAD) {
            tj_u64(j, "payload_offset", res->payload_at);
            tj_hex(j, "payload_a_at_offset", res->win_a, res->win_na);
            tj_hex(j, "payload_b_at_offset", res->win_b, res->win_nb);
        }
        if (res->has_a)
            json_kept(j, "a", d->ta.r, &res->a, tpa);
        else
            tj_null(j, "a");
        if (res->has_b)
            json_kept(j, "b", d->tb.r, &res->b, tpb);
        else
            tj_null(j, "b");
        tj_array_begin(j, "context");
        for (uint64_t i = res->events - n; i < res->events; i++)
            json_kept(j, NULL, d->ta.r, &d->ring[i % d->context], tpa);
        tj_array_end(j);
        json_path(j, "call_path_a", d, res, d->ta.r, &res->a, res->has_a);
        json_path(j, "call_path_b", d, res, d->tb.r, &res->b, res->has_b);
        tj_u64(j, "call_depth", res->depth);
        tj_u64(j, "call_path_dropped", res->depth > STACK_KEEP ? res->depth - STACK_KEEP : 0);
        tj_object_end(j);
    }
    tj_object_end(j);
}

static void json_side(tool_json *j, const char *key, const tool_trace *t)
{
    tj_object_begin(j, key);
    tj_str(j, "file", t->path);
    tj_u64(j, "threads", t->m.thread_count);
    tj_u64(j, "events", t->m.event_count);
    tj_hex(j, "build_id", t->m.build_id,
           t->m.build_id_len <= TT_BUILD_ID_MAX ? t->m.build_id_len : 0);
    tj_object_end(j);
}

/* The time at which pair @p's difference happened, for "earliest": A's event where A has one. */
static uint64_t diff_time_ns(const struct diff *d, const struct pair *p, const struct result *r)
{
    if (p->a < 0 || p->b < 0) {
        const tool_trace *t = p->a < 0 ? &d->tb : &d->ta;
        const tt_thread_entry *e = tt_reader_thread(t->r, (uint32_t)(p->a < 0 ? p->b : p->a));
        return e != NULL ? tool_ticks_to_ns(e->first_time, t->m.ticks_per_sec) : 0;
    }
    if (r->has_a)
        return tool_ticks_to_ns(r->a.time, d->ta.m.ticks_per_sec);
    return tool_ticks_to_ns(r->b.time, d->tb.m.ticks_per_sec);
}

static int run_diff(struct diff *d)
{
    uint32_t na = d->ta.cap.cursors, nb = d->tb.cap.cursors, np, differing = 0;
    struct pair *pairs = NULL;
    struct result res;
    int rc = TOOL_EXIT_OK, have_earliest = 0;
    uint64_t earliest_ns = 0;
    struct pair earliest = {0, 0, 0};
    uint64_t earliest_seq = 0;
    tool_json j;

    /* one cursor per thread (PER_THREAD); the probe bounded their number by max_threads */
    np = pair_threads(d->ta.r, na, d->tb.r, nb, &pairs);
    d->stall_a = tt_reader_find_object(d->ta.r, TT_OBJ_FUNCTION, TT_STALL_FUNCTION);
    d->stall_b = tt_reader_find_object(d->tb.r, TT_OBJ_FUNCTION, TT_STALL_FUNCTION);
    d->ring = calloc(d->context ? d->context : 1, sizeof *d->ring);
    d->stack = malloc(STACK_KEEP * sizeof *d->stack);
    if (pairs == NULL || d->ring == NULL || d->stack == NULL) {
        tool_error("out of memory pairing %" PRIu32 " and %" PRIu32 " threads", na, nb);
        free(pairs);
        return TOOL_EXIT_SYSTEM;
    }

    if (d->json) {
        tj_init(&j, stdout);
        tj_object_begin(&j, NULL);
        json_side(&j, "a", &d->ta);
        json_side(&j, "b", &d->tb);
        tj_array_begin(&j, "threads");
    } else {
        printf("A: ");
        tool_print_text(stdout, d->pa, strlen(d->pa));
        printf(" (%" PRIu32 " threads, %" PRIu64 " events)\nB: ", na, d->ta.m.event_count);
        tool_print_text(stdout, d->pb, strlen(d->pb));
        printf(" (%" PRIu32 " threads, %" PRIu64 " events)\n", nb, d->tb.m.event_count);
        if (d->ta.m.build_id_len != d->tb.m.build_id_len ||
            memcmp(d->ta.m.build_id, d->tb.m.build_id,
                   d->ta.m.build_id_len <= TT_BUILD_ID_MAX ? d->ta.m.build_id_len : 0) != 0)
            printf("note: the build ids differ: these may not be the same program\n");
        if (na != nb)
            printf("the thread counts differ: %" PRIu32 " in A, %" PRIu32 " in B\n", na, nb);
    }

    progress_begin(&d->pr, "tinytrace diff",
                   d->ta.m.event_count > d->tb.m.event_count ? d->ta.m.event_count
                                                             : d->tb.m.event_count);
    for (uint32_t i = 0; i < np && rc == TOOL_EXIT_OK; i++) {
        const struct pair *p = &pairs[i];
        memset(&res, 0, sizeof res);
        if (p->a >= 0 && p->b >= 0)
            rc = compare_pair(d, p, &res);
        if (rc != TOOL_EXIT_OK)
            break;
        if (p->a < 0 || p->b < 0 || !res.same) {
            uint64_t t = diff_time_ns(d, p, &res);
            differing++;
            if (!have_earliest || t < earliest_ns) {
                have_earliest = 1;
                earliest_ns = t;
                earliest = *p;
                earliest_seq = p->a < 0 || p->b < 0 ? 0 : res.has_a ? res.a.seq : res.b.seq;
            }
        }
        progress_clear(&d->pr); /* erased under each thread's lines; drawn again by the next */
        if (d->json)
            print_pair_json(&j, d, p, &res);
        else
            print_pair_text(d, p, &res);
    }
    progress_end(&d->pr);

    if (d->json) {
        tj_array_end(&j);
        tj_bool(&j, "same", rc == TOOL_EXIT_OK && differing == 0);
        tj_u64(&j, "differing_threads", differing);
        if (have_earliest) {
            tj_object_begin(&j, "earliest");
            if (earliest.a >= 0)
                tj_u64(&j, "thread_a", (uint64_t)earliest.a);
            else
                tj_null(&j, "thread_a");
            if (earliest.b >= 0)
                tj_u64(&j, "thread_b", (uint64_t)earliest.b);
            else
                tj_null(&j, "thread_b");
            tj_u64(&j, "seq", earliest_seq);
            tj_u64(&j, "time_ns", earliest_ns);
            tj_object_end(&j);
        } else {
            tj_null(&j, "earliest");
        }
        if (rc != TOOL_EXIT_OK)
            tj_bool(&j, "complete", 0);
        tj_object_end(&j);
        tj_newline(&j);
    } else if (rc == TOOL_EXIT_OK) {
        if (differing == 0) {
            printf("same: no difference in %" PRIu32 " thread%s\n", na, na == 1 ? "" : "s");
        } else {
            printf("differ: %" PRIu32 " of %" PRIu32 " thread%s; earliest difference: ",
                   differing, np, np == 1 ? "" : "s");
            if (earliest.a >= 0)
                print_thread_label(stdout, d->ta.r, earliest.a);
            else
                print_thread_label(stdout, d->tb.r, earliest.b);
            if (earliest.a >= 0 && earliest.b >= 0)
                printf(" seq %" PRIu64, earliest_seq);
            else
                printf(" (only in %s)", earliest.a < 0 ? "B" : "A");
            printf(", %" PRIu64 " ns into the run\n", earliest_ns);
        }
    }
    free(pairs);
    if (rc != TOOL_EXIT_OK)
        return rc;
    return differing == 0 ? TOOL_EXIT_OK : TOOL_EXIT_DIVERGED;
}

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct diff *d = ctx;
    uint64_t v;
    if (c != 'c')
        return tool_usage_hint(prog);
    if (tool_parse_u64(prog, "--context", arg, 0, CONTEXT_MAX, &v))
        return TOOL_EXIT_USAGE;
    d->context = (unsigned)v;
    return TOOL_EXIT_OK;
}

int cmd_diff(int argc, char **argv)
{
    static const struct option options[] = {
        {"context", required_argument, NULL, 'c'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY |
                                             TOOL_OPT_NO_DEMANGLE,
                                   .options = options,
                                   .take = take_option,
                                   .operands = TOOL_OPERANDS_ANY};
    struct diff d;
    tool_opts o;
    int rc;

    memset(&d, 0, sizeof d);
    d.context = CONTEXT_DEFAULT;
    if ((rc = tool_opts_parse(&o, &verb, &d, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (argc - o.first != 2)
        return tool_usage_error(argv[0], "takes two files, A and B, not %d", argc - o.first);
    d.json = o.json;
    d.pa = argv[o.first];
    d.pb = argv[o.first + 1];

    /* both manifests before either reader: a file that is not a trace is named first */
    rc = tool_trace_start(&d.ta, d.pa, &o, TT_CURSORS_PER_THREAD, TOOL_TRACE_PROBE);
    if (rc == TOOL_EXIT_OK)
        rc = tool_trace_start(&d.tb, d.pb, &o, TT_CURSORS_PER_THREAD, TOOL_TRACE_PROBE);
    if (rc == TOOL_EXIT_OK)
        rc = tool_trace_open(&d.ta);
    if (rc == TOOL_EXIT_OK)
        rc = tool_trace_open(&d.tb);
    if (rc == TOOL_EXIT_OK) {
        /* the index tables, where the files have them whole, say where each thread begins
         * (compare_pair); without them the cursors scan, as they can */
        tt_error_info err;
        tool_error_info_init(&err);
        if (tt_index_open(d.ta.r, &d.ta.lim, &d.ta.ix, &err) != TT_OK)
            d.ta.ix = NULL;
        tool_error_info_init(&err);
        if (tt_index_open(d.tb.r, &d.tb.lim, &d.tb.ix, &err) != TT_OK)
            d.tb.ix = NULL;
        rc = run_diff(&d);
    }
    free(d.ring);
    free(d.stack);
    tool_trace_close(&d.ta);
    tool_trace_close(&d.tb);
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
