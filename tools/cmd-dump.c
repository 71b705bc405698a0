/* tinytrace dump — every event of a trace, one per line, in recorded order.
 *
 * The recorded order is the total order (time, thread, seq) of event.h. Chunks in the file are in
 * the order the swapper wrote them, not in that order, so the dump is a k-way merge: the reader
 * is opened with one cursor per recorded thread (TT_CURSORS_PER_THREAD); each cursor yields its
 * thread's events in program order, the head of each (tt_reader_peek) sits in a binary min-heap
 * keyed by (time, thread, seq), and the smallest head is printed and its cursor advanced. Memory
 * is one chunk buffer per thread (the reader's capacity) plus a heap of thread count entries;
 * time is O(events * log threads).
 *
 * With --thread N only cursor N is read: within a thread, program order is the recorded order.
 *
 * What a dump checks: the reader checks every chunk it loads (frame, checksum, the thread's
 * sequence) and each cursor's count against the thread table; here, the totals of events and
 * payload bytes against the manifest. The chained checksum over all chunks in file order is left
 * to verify: per-thread cursors do not visit the chunks in file order.
 */
#include "tool.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PREVIEW_BYTES 16

static const char usage[] =
    "Usage: tinytrace dump [--json] [--thread N] [--kind NAME[,NAME...]] [--max-memory MB] FILE\n"
    "\n"
    "Prints the events of trace FILE in recorded order (time, thread, sequence), one per line:\n"
    "  SEQ THREAD TIME_NS KIND FUNCTION SITE ARG ADDR LEN PAYLOAD\n"
    "SEQ is the event's number within its thread; TIME_NS is nanoseconds since the session\n"
    "opened; KIND is 'io:in' or 'io:out' for io events; FUNCTION and SITE are names ('-' for\n"
    "none, '#ID' for an id without a name); ADDR is hex; PAYLOAD is the hex of the first 16\n"
    "bytes, followed by '..' when there are more, or '-' when there are none.\n"
    "\n"
    "Options:\n"
    "  -j, --json          print JSON Lines: one object per event with seq, thread, epoch,\n"
    "                      time (ticks), time_ns, kind, dir (io only), function_id, function,\n"
    "                      site_id, site, arg, addr, len, payload (hex of the first 16 bytes)\n"
    "  -t, --thread N      only the events of thread N\n"
    "  -k, --kind NAMES    only events of these kinds (comma-separated, the option may repeat;\n"
    "                      the kinds are listed below)\n" TOOL_MAX_MEMORY_HELP
    "  -h, --help          print this help\n"
    "\n"
    "Each chunk's checksum and each thread's sequence are checked as the events are read, and\n"
    "the event and payload counts at the end; the checks over the whole file (the chained\n"
    "checksum of all chunks, the largest sizes) are `tinytrace verify`'s.\n"
    "\n"
    "Exits 0 when every event was read; 3 when the trace is corrupt or truncated (the events\n"
    "before the damage are printed); 7 when it is marked incomplete (a write error stopped\n"
    "the recording); 6 when it cannot be opened or the output cannot be written.\n";

/* Parses a comma-separated list of kind names into a bit mask (bit k = kind k). The names are
 * the library's own (tt_event_kind_name), so the tool and the library cannot disagree. */
static int parse_kinds(const char *prog, const char *list, uint32_t *mask)
{
    const char *p = list;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        unsigned k;
        if (len == 0)
            return tool_usage_error(prog, "--kind: empty name in '%s'", list);
        for (k = 1; k <= TT_EV_KIND_MAX; k++) {
            const char *name = tt_event_kind_name(k);
            if (strlen(name) == len && strncmp(name, p, len) == 0)
                break;
        }
        if (k > TT_EV_KIND_MAX) {
            fflush(stdout);
            fprintf(stderr, "%s: unknown event kind '%.*s'; the kinds are:", prog, (int)len, p);
            for (k = 1; k <= TT_EV_KIND_MAX; k++)
                fprintf(stderr, " %s", tt_event_kind_name(k));
            fputc('\n', stderr);
            return tool_usage_hint(prog);
        }
        *mask |= UINT32_C(1) << k;
        p += len;
        if (*p == ',' && *++p == '\0')
            return tool_usage_error(prog, "--kind: empty name in '%s'", list);
    }
    return TOOL_EXIT_OK;
}

static void print_event_text(const tool_trace *t, const tt_event *ev)
{
    FILE *f = stdout;
    size_t n = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;

    tool_print_u64(f, ev->tp.seq);
    fputc(' ', f);
    tool_print_u64(f, ev->tp.thread);
    fputc(' ', f);
    tool_print_u64(f, tool_ticks_to_ns(ev->time, t->m.ticks_per_sec));
    fputc(' ', f);
    fputs(tt_event_kind_name(ev->kind), f);
    if (ev->kind == TT_EV_IO)
        fputs(ev->dir == TT_IO_IN ? ":in" : ev->dir == TT_IO_OUT ? ":out" : ":?", f);
    fputc(' ', f);
    tool_print_object(f, t->r, ev->sp.function);
    fputc(' ', f);
    tool_print_object(f, t->r, ev->sp.site);
    fputc(' ', f);
    tool_print_u64(f, ev->arg);
    fprintf(f, " 0x%" PRIx64 " ", ev->addr);
    tool_print_u64(f, ev->payload_len);
    fputc(' ', f);
    if (n == 0 || ev->payload == NULL) {
        fputc('-', f);
    } else {
        tool_print_hex(f, ev->payload, n);
        if (ev->payload_len > n)
            fputs("..", f);
    }
    fputc('\n', f);
}

static void print_event_json(const tool_trace *t, const tt_event *ev)
{
    size_t n = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;
    char addr[24];
    tool_json j;

    tj_init(&j, stdout);
    tj_object_begin(&j, NULL);
    tj_u64(&j, "seq", ev->tp.seq);
    tj_u64(&j, "thread", ev->tp.thread);
    tj_u64(&j, "epoch", ev->tp.epoch);
    tj_u64(&j, "time", ev->time);
    tj_u64(&j, "time_ns", tool_ticks_to_ns(ev->time, t->m.ticks_per_sec));
    tj_str(&j, "kind", tt_event_kind_name(ev->kind));
    if (ev->kind == TT_EV_IO)
        tj_str(&j, "dir", ev->dir == TT_IO_IN ? "in" : ev->dir == TT_IO_OUT ? "out" : "?");
    tj_u64(&j, "function_id", ev->sp.function);
    tj_object_name(&j, "function", t->r, ev->sp.function);
    tj_u64(&j, "site_id", ev->sp.site);
    tj_object_name(&j, "site", t->r, ev->sp.site);
    tj_u64(&j, "arg", ev->arg);
    snprintf(addr, sizeof addr, "0x%" PRIx64, ev->addr);
    tj_str(&j, "addr", addr);
    tj_u64(&j, "len", ev->payload_len);
    tj_hex(&j, "payload", ev->payload, ev->payload != NULL ? n : 0);
    tj_object_end(&j);
    tj_newline(&j);
}

/* ---- the merge ---- */

struct merge {
    tt_event *heads;   /* heads[c]: the peeked head of cursor c, valid while it is in the heap */
    uint32_t *heap;    /* cursor numbers, heap-ordered by their heads */
    uint32_t len;
};

/* The total order of a recording: (time, thread, seq). */
static int head_before(const struct merge *mg, uint32_t a, uint32_t b)
{
    const tt_event *x = &mg->heads[a], *y = &mg->heads[b];
    if (x->time != y->time)
        return x->time < y->time;
    if (x->tp.thread != y->tp.thread)
        return x->tp.thread < y->tp.thread;
    if (x->tp.seq != y->tp.seq)
        return x->tp.seq < y->tp.seq;
    return a < b;
}

static void sift_down(struct merge *mg, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i, tmp;
        if (l < mg->len && head_before(mg, mg->heap[l], mg->heap[m]))
            m = l;
        if (r < mg->len && head_before(mg, mg->heap[r], mg->heap[m]))
            m = r;
        if (m == i)
            return;
        tmp = mg->heap[i];
        mg->heap[i] = mg->heap[m];
        mg->heap[m] = tmp;
        i = m;
    }
}

static void sift_up(struct merge *mg, uint32_t i)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2, tmp;
        if (!head_before(mg, mg->heap[i], mg->heap[parent]))
            return;
        tmp = mg->heap[i];
        mg->heap[i] = mg->heap[parent];
        mg->heap[parent] = tmp;
        i = parent;
    }
}

/* Peeks cursor @c; on an event, puts it into the heap. Returns TT_OK, TT_E_END or an error. */
static int load_head(tool_trace *t, struct merge *mg, uint32_t c, tt_error_info *err)
{
    int rc;
    /* @err was initialized once: the reader fills it on a failure, and a failure ends the
     * dump, so it never needs clearing between events */
    rc = tt_reader_peek(t->r, c, &mg->heads[c], err);
    if (rc == TT_OK) {
        mg->heap[mg->len] = c;
        sift_up(mg, mg->len++);
    }
    return rc;
}

struct filter {
    int json;
    int one_thread;
    uint32_t thread;
    uint32_t kinds; /* 0: all */
};

static int dump(tool_trace *t, const struct filter *flt)
{
    struct merge mg = {0};
    tt_error_info err;
    uint64_t read = 0, payload = 0, expected;
    uint32_t ncur = t->cap.cursors;
    int rc = TT_OK, code;

    if (flt->one_thread && flt->thread >= ncur) {
        tool_error("%s: the trace has no thread %" PRIu32 " (it has %" PRIu32 ")", t->path,
                   flt->thread, ncur);
        return TOOL_EXIT_USAGE;
    }
    mg.heads = calloc(ncur ? ncur : 1, sizeof *mg.heads);
    mg.heap = calloc(ncur ? ncur : 1, sizeof *mg.heap);
    if (mg.heads == NULL || mg.heap == NULL) {
        free(mg.heads);
        free(mg.heap);
        tool_error("%s: out of memory for %" PRIu32 " cursors", t->path, ncur);
        return TOOL_EXIT_SYSTEM;
    }

    tool_error_info_init(&err);
    for (uint32_t c = 0; c < ncur && rc == TT_OK; c++) {
        if (flt->one_thread && c != flt->thread)
            continue;
        rc = load_head(t, &mg, c, &err);
        if (rc == TT_E_END)
            rc = TT_OK;
    }
    while (rc == TT_OK && mg.len > 0) {
        uint32_t c = mg.heap[0];
        const tt_event *ev = &mg.heads[c];
        if (flt->kinds == 0 || (ev->kind < 32 && (flt->kinds & (UINT32_C(1) << ev->kind)))) {
            if (flt->json)
                print_event_json(t, ev);
            else
                print_event_text(t, ev);
        }
        read++;
        payload += ev->payload_len;
        tt_reader_advance(t->r, c);
        /* take c out of the heap and put it back with its next head, if it has one */
        mg.heap[0] = mg.heap[--mg.len];
        sift_down(&mg, 0);
        rc = load_head(t, &mg, c, &err);
        if (rc == TT_E_END)
            rc = TT_OK;
    }
    free(mg.heads);
    free(mg.heap);

    if (rc != TT_OK) {
        char what[64];
        snprintf(what, sizeof what, "after %" PRIu64 " events", read);
        return tool_report(t->path, what, rc, &err);
    }

    /* Every cursor ended: the count must be the one the file promises. */
    expected = t->m.event_count;
    if (flt->one_thread) {
        const tt_thread_entry *e = tt_reader_thread(t->r, flt->thread);
        expected = e != NULL ? e->event_count : read;
    }
    if (read != expected) {
        tool_error("%s: read %" PRIu64 " events, but the %s says %" PRIu64, t->path, read,
                   flt->one_thread ? "thread table" : "manifest", expected);
        return TOOL_EXIT_CORRUPT;
    }
    if (!flt->one_thread && payload != t->m.payload_bytes) {
        tool_error("%s: read %" PRIu64 " payload bytes, but the manifest says %" PRIu64, t->path,
                   payload, t->m.payload_bytes);
        return TOOL_EXIT_CORRUPT;
    }
    /* The reader refuses an incomplete file when it is opened (FORMAT.md 11.3); should it ever
     * hand one over, its events are not the whole run, and the exit code must say so. */
    if (t->m.flags & TT_MF_INCOMPLETE) {
        code = t->m.write_errno;
        tool_error("%s: the recording is incomplete: a write error (%s) stopped it; the events "
                   "above are what was written",
                   t->path, code != 0 ? strerror(code) : "unknown");
        return TOOL_EXIT_INCOMPLETE;
    }
    return TOOL_EXIT_OK;
}

int cmd_dump(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"thread", required_argument, NULL, 't'},
        {"kind", required_argument, NULL, 'k'},
        {"max-memory", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct filter flt = {0};
    uint64_t max_mb = 0, v;
    tt_reader_limits lim;
    tool_trace t;
    int c, rc;

    while ((c = getopt_long(argc, argv, "jt:k:h", options, NULL)) != -1) {
        switch (c) {
        case 'j':
            flt.json = 1;
            break;
        case 't':
            if (tool_parse_u64(argv[0], "--thread", optarg, 0, UINT32_MAX, &v))
                return TOOL_EXIT_USAGE;
            flt.one_thread = 1;
            flt.thread = (uint32_t)v;
            break;
        case 'k':
            if (parse_kinds(argv[0], optarg, &flt.kinds))
                return TOOL_EXIT_USAGE;
            break;
        case 'm':
            if (tool_parse_u64(argv[0], "--max-memory", optarg, 1, UINT64_MAX >> 20, &max_mb))
                return TOOL_EXIT_USAGE;
            break;
        case 'h':
            fputs(usage, stdout);
            fputs("\nEvent kinds:", stdout);
            for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
                printf(" %s", tt_event_kind_name(k));
            fputc('\n', stdout);
            return tool_finish_stdout(TOOL_EXIT_OK);
        default:
            return tool_usage_hint(argv[0]);
        }
    }
    if ((c = tool_one_operand(argc, argv, optind)) != TOOL_EXIT_OK)
        return c;

    tool_limits(&lim, max_mb);
    rc = tool_trace_probe(&t, argv[optind], &lim, TT_CURSORS_PER_THREAD);
    if (rc == TOOL_EXIT_OK)
        rc = tool_trace_open(&t);
    if (rc == TOOL_EXIT_OK)
        rc = dump(&t, &flt);
    tool_trace_close(&t);
    /* an output error (a closed pipe, a full disk) outranks the verdict: the output is lost */
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
