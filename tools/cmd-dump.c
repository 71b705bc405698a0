/* SPDX-License-Identifier: MIT */
/* tinytrace dump — every event of a trace, one per line, in recorded order.
 *
 * The recorded order is the total order (time, thread, seq) of event.h. Chunks in the file are in
 * the order the swapper wrote them, not in that order, so the dump is the tool's k-way merge
 * (merge.h): the reader is opened with one cursor per recorded thread (TT_CURSORS_PER_THREAD),
 * the heads of the cursors sit in a binary min-heap, and the smallest head is printed and its
 * cursor advanced. Memory is one chunk buffer per thread (the reader's capacity) plus a heap of
 * thread count entries, and for text the ring the printer thread shares (8 batches of 1024 lines
 * and their text, about 1 MiB); time is O(events * log threads).
 *
 * With --thread N only cursor N is read: within a thread, program order is the recorded order.
 *
 * What a dump checks: the reader checks every chunk it loads (frame, checksum, the thread's
 * sequence) and each cursor's count against the thread table; here, the totals of events and
 * payload bytes against the manifest. The chained checksum over all chunks in file order is left
 * to verify: per-thread cursors do not visit the chunks in file order.
 */
#include "merge.h"
#include "opts.h"
#include "tool.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PREVIEW_BYTES 16

static const char usage[] =
    "Usage: tinytrace dump [--json] [--thread N] [--kind NAME[,NAME...]] [--from SEQ|TIME]\n"
    "                      [--count N] [--max-memory MB] [--process P] FILE\n"
    "       tinytrace dump --checkpoints [--json] [--max-memory MB] [--process P] FILE\n"
    "\n"
    "Prints the events of trace FILE in recorded order (epoch, time, thread, sequence), one per\n"
    "line:\n"
    "  SEQ THREAD TIME_NS KIND FUNCTION SITE ARG ADDR LEN PAYLOAD\n"
    "SEQ is the event's number within its thread; TIME_NS is nanoseconds since the session\n"
    "opened; KIND is 'io:in' or 'io:out' for io events, 'sync:turn' for a synchronization that\n"
    "took its object's turn (ARG the object, ADDR its place in the object's order), 'sync' for\n"
    "one that did not; FUNCTION and SITE are names ('-' for\n"
    "none, '#ID' for an id without a name); ADDR is hex; PAYLOAD is the hex of the first 16\n"
    "bytes, followed by '..' when there are more, or '-' when there are none. A trace that\n"
    "restored checkpoints has one more column first, EPOCH: the restores before the event\n"
    "(docs/REPLAY.md, \"Checkpoints\").\n"
    "\n"
    "Options:\n"
    "  -c, --checkpoints   print the checkpoint table instead, in recorded order: one line\n"
    "                        checkpoint N THREAD SEQ EPOCH TIME_NS SITE LEN PROVIDERS\n"
    "                      per checkpoint (PROVIDERS: ID:LEN,... of their saved states), and\n"
    "                        restore EPOCH THREAD SEQ TIME_NS SITE CHECKPOINT\n"
    "                      per restore; with --json one object per line\n"
    "  -j, --json          print JSON Lines: one object per event with seq, thread, epoch,\n"
    "                      time (ticks), time_ns, kind, dir (io only), function_id, function,\n"
    "                      site_id, site, arg, addr, len, payload (hex of the first 16 bytes)\n"
    "  -t, --thread N      only the events of thread N\n"
    "  -k, --kind NAMES    only events of these kinds (comma-separated, the option may repeat;\n"
    "                      the kinds are listed below)\n"
    "  -f, --from SEQ|TIME start at event number SEQ of the recorded order (0 = the first;\n"
    "                      with --thread N, SEQ is thread N's own sequence number, the first\n"
    "                      column), or at the first event at or after TIME since the session\n"
    "                      opened, a number with a unit: 250us, 1.5ms, 2s, 800ns. Uses the\n"
    "                      file's seek index: one seek per thread, then only the chunks\n"
    "                      needed are read (a file without index tables is read from the\n"
    "                      start)\n"
    "  -n, --count N       print at most N events (after --kind), then stop\n"
    TOOL_NO_DEMANGLE_HELP TOOL_MAX_MEMORY_HELP TOOL_PROCESS_HELP
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
            fprintf(stderr, "%s: unknown event kind '", prog);
            tool_print_text(stderr, p, len);
            fputs("'; the kinds are:", stderr);
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

/* A text line is built in memory and written with one call: a dump is millions of lines of
 * ten short fields, and a stdio call per field (and per character of a name) cost several times
 * the reading. Names are escaped once per object (tool_print_object's form) and kept in a small
 * direct-mapped cache. */
struct name_slot {
    uint32_t id;          /* 0: empty */
    size_t len;
    char *text;
};

/* A thread's sequence numbers come one after another: the last one printed is kept as text and
 * counted up in place, so most lines print it without a division. */
struct seq_text {
    uint64_t seq;
    uint32_t thread;
    uint32_t len; /* 0: empty */
    char s[24];
};

#define OUT_LINE 1024 /* room a line is built in; a line that needs more takes the slow path */

/* Names are copied with one fixed-size copy (no call to memcpy): a cached name's buffer has
 * NAME_COPY bytes of zeros after the text, and a line has that much room after its fields. */
#define NAME_COPY 32

/* What one formatting thread keeps (see "the printer thread": two may format at once, each
 * with its own). Allocated whole, so it shares no cache line with anything else. */
struct fmt {
    alignas(64) struct name_slot names[256];
    int epochs;        /* the trace restored checkpoints: each line opens with its epoch */
    struct seq_text seq_texts[64];
    char kind_text[256][16]; /* by event kind (a uint8_t): its name and a space, zero-padded */
    uint8_t kind_len[256];   /* its length; 0: not made yet */
    const tool_trace *t;
    tool_ns_conv conv; /* the trace's tick rate */
    int nomem;         /* a line was lost for want of memory */
};

/* Text being built: lines go to the end; it grows so that a line always has OUT_LINE bytes. */
struct text {
    char *p;
    size_t len, cap;
};

static int text_reserve(struct text *x, size_t n)
{
    if (x->cap - x->len >= n)
        return 0;
    size_t cap = x->cap ? x->cap : 1 << 16;
    while (cap - x->len < n)
        cap *= 2;
    char *p = realloc(x->p, cap);
    if (p == NULL)
        return -1;
    x->p = p;
    x->cap = cap;
    return 0;
}

static void text_append(struct fmt *f, struct text *x, const void *s, size_t n)
{
    if (text_reserve(x, n) != 0) {
        f->nomem = 1;
        return;
    }
    memcpy(x->p + x->len, s, n);
    x->len += n;
}

static void text_write(struct text *x)
{
    if (x->len)
        fwrite(x->p, 1, x->len, stdout);
    x->len = 0;
}

static void put(char **o, const void *s, size_t n)
{
    memcpy(*o, s, n);
    *o += n;
}

static inline void put_u64(char **o, uint64_t v)
{
    if (v < 10) /* thread, arg, length: mostly single digits */
        *(*o)++ = (char)('0' + v);
    else
        *o = tool_fmt_u64(*o, v);
}

static inline void put_seq(struct fmt *f, char **o, uint32_t thread, uint64_t seq)
{
    struct seq_text *st = &f->seq_texts[thread & 63];
    char *d = *o;
    if (st->len && st->thread == thread && st->seq + 1 == seq) {
        /* The text as last printed (its bytes were stored a line ago: a wide load right after
         * byte stores would wait for them), then the count up, in both copies. */
        memcpy(d, st->s, 20); /* fixed size: the digits, then scratch the line overwrites */
        uint32_t i = st->len;
        while (i > 0 && st->s[i - 1] == '9') {
            st->s[--i] = '0';
            d[i] = '0';
        }
        if (i > 0) {
            d[i - 1] = ++st->s[i - 1];
            st->seq = seq;
            *o = d + st->len;
            return;
        }
        /* 99..9 + 1: one digit more, the general path */
    }
    st->len = (uint32_t)(tool_fmt_u64(st->s, seq) - st->s);
    st->thread = thread;
    st->seq = seq;
    memcpy(d, st->s, 20);
    *o = d + st->len;
}

/* The escaped name of object @id, as tool_print_object prints it. */
static const struct name_slot *name_of(struct fmt *f, uint32_t id)
{
    struct name_slot *sl = &f->names[id & 255];
    if (sl->id == id && sl->text)
        return sl;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL)
        return NULL;
    tool_print_object(m, f->t->r, id);
    if (fclose(m) != 0 || text == NULL) {
        free(text);
        return NULL;
    }
    char *padded = realloc(text, len + NAME_COPY);
    if (padded == NULL) {
        free(text);
        return NULL;
    }
    memset(padded + len, 0, NAME_COPY);
    free(sl->text);
    *sl = (struct name_slot){ id, len, padded };
    return sl;
}

static struct fmt *fmt_new(const tool_trace *t)
{
    struct fmt *f = aligned_alloc(64, (sizeof(struct fmt) + 63) / 64 * 64);
    if (f == NULL)
        return NULL;
    memset(f, 0, sizeof *f);
    f->t = t;
    f->epochs = tt_reader_restore_count(t->r) != 0;
    tool_ns_conv_init(&f->conv, t->m.ticks_per_sec);
    return f;
}

static void fmt_free(struct fmt *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < sizeof f->names / sizeof f->names[0]; i++)
        free(f->names[i].text);
    free(f);
}

static void put_name(struct fmt *f, char **o, const char *end, uint32_t id)
{
    const struct name_slot *sl = id ? name_of(f, id) : NULL;
    /* *o may be one past end: a first name that filled the room to end, then its space */
    size_t room = *o < end ? (size_t)(end - *o) : 0;
    if (id == 0) {
        *(*o)++ = '-';
    } else if (sl && sl->len <= NAME_COPY) { /* *o <= end + 1, and the line has 160 after end */
        memcpy(*o, sl->text, NAME_COPY);
        *o += sl->len;
    } else if (sl && sl->len <= room) {
        put(o, sl->text, sl->len);
    } else {
        *o = NULL; /* a name longer than the room left (or no memory): the caller's slow path */
    }
}

/* A name longer than a line's room, appended whole (the slow path of print_line). */
static void append_name(struct fmt *f, struct text *x, uint32_t id)
{
    const struct name_slot *sl = id ? name_of(f, id) : NULL;
    if (id == 0) {
        text_append(f, x, "-", 1);
    } else if (sl) {
        text_append(f, x, sl->text, sl->len);
    } else {
        char b[16];
        int n = snprintf(b, sizeof b, "#%" PRIu32, id); /* no memory for the name */
        text_append(f, x, b, (size_t)n);
        f->nomem = 1;
    }
}

/* What a text line shows of one event, copied out of the reader's buffer (the payload's first
 * bytes included), so that another thread can print it while the reader goes on. */
struct line {
    uint64_t seq, time, arg, addr, payload_len;
    uint32_t thread, function, site, epoch;
    uint8_t kind, dir, npre;
    uint8_t pre[PREVIEW_BYTES];
};

static void line_of(struct line *l, const tt_event *ev)
{
    size_t n = ev->payload_len < PREVIEW_BYTES ? (size_t)ev->payload_len : PREVIEW_BYTES;
    if (ev->payload == NULL)
        n = 0;
    l->seq = ev->tp.seq;
    l->time = ev->time;
    l->arg = ev->arg;
    l->addr = ev->addr;
    l->payload_len = ev->payload_len;
    l->thread = ev->tp.thread;
    l->epoch = ev->tp.epoch;
    l->function = ev->sp.function;
    l->site = ev->sp.site;
    l->kind = ev->kind;
    l->dir = ev->dir;
    l->npre = (uint8_t)n;
    if (n)
        memcpy(l->pre, ev->payload, n);
}

/* Appends @ev's line to @x. */
static void print_line(struct fmt *f, struct text *x, const struct line *ev)
{
    static const char digits[] = "0123456789abcdef";
    if (text_reserve(x, OUT_LINE) != 0) {
        f->nomem = 1;
        return;
    }
    char *line = x->p + x->len, *o = line;
    const char *end = line + OUT_LINE - 160; /* the fields other than the names fit in 160 */

    if (f->epochs) { /* within the 160: an epoch is at most 10 digits */
        put_u64(&o, ev->epoch);
        *o++ = ' ';
    }
    put_seq(f, &o, ev->thread, ev->seq);
    *o++ = ' ';
    put_u64(&o, ev->thread);
    *o++ = ' ';
    put_u64(&o, tool_ns_conv_ns(&f->conv, ev->time));
    *o++ = ' ';
    if (ev->kind == TT_EV_IO) {
        const char *d = ev->dir == TT_IO_IN ? "io:in " : ev->dir == TT_IO_OUT ? "io:out " : "io:? ";
        put(&o, d, strlen(d));
    } else if (ev->kind == TT_EV_SYNC && ev->dir) {
        put(&o, "sync:turn ", 10); /* took its object's turn: ADDR is the object's sequence */
    } else {
        if (!f->kind_len[ev->kind]) {
            const char *kind = tt_event_kind_name(ev->kind);
            size_t n = strlen(kind);
            n = n < sizeof f->kind_text[0] - 1 ? n : sizeof f->kind_text[0] - 1;
            memcpy(f->kind_text[ev->kind], kind, n);
            f->kind_text[ev->kind][n] = ' ';
            f->kind_len[ev->kind] = (uint8_t)(n + 1);
        }
        memcpy(o, f->kind_text[ev->kind], sizeof f->kind_text[0]); /* fixed size, as names */
        o += f->kind_len[ev->kind];
    }
    char *mark = o;
    put_name(f, &o, end, ev->function);
    if (o != NULL) {
        *o++ = ' ';
        put_name(f, &o, end, ev->site);
    }
    if (o == NULL) {
        /* a very long name: the names appended whole, then the rest of the line after them */
        x->len += (size_t)(mark - line);
        append_name(f, x, ev->function);
        text_append(f, x, " ", 1);
        append_name(f, x, ev->site);
        if (text_reserve(x, OUT_LINE) != 0) {
            f->nomem = 1;
            return;
        }
        line = o = x->p + x->len;
    }
    *o++ = ' ';
    put_u64(&o, ev->arg);
    if (ev->addr == 0) {
        memcpy(o, " 0x0", 4);
        o += 4;
    } else {
        put(&o, " 0x", 3);
        char buf[16];
        size_t i = sizeof buf;
        uint64_t v = ev->addr;
        do {
            buf[--i] = digits[v & 15];
            v >>= 4;
        } while (v != 0);
        put(&o, buf + i, sizeof buf - i);
    }
    *o++ = ' ';
    put_u64(&o, ev->payload_len);
    *o++ = ' ';
    if (ev->npre == 0) {
        *o++ = '-';
    } else {
        for (size_t i = 0; i < ev->npre; i++) {
            *o++ = digits[ev->pre[i] >> 4];
            *o++ = digits[ev->pre[i] & 15];
        }
        if (ev->payload_len > ev->npre)
            put(&o, "..", 2);
    }
    *o++ = '\n';
    assert(o - line <= OUT_LINE); /* the room the line was promised */
    x->len = (size_t)(o - x->p);
}

/* ---- the printer thread ----
 * Reading and merging the events costs about as much as formatting them, and writing them to
 * a file costs more, so a long text dump runs on two threads. This one (the reader) fills
 * batches of 1024 lines into a ring of NSLOT slots; the printer thread writes the batches in
 * order. Either thread formats a filled batch into the slot's own text: the printer the oldest
 * first, the reader the newest, whenever it would otherwise wait for a free slot, so the work
 * is shared whichever side is slower. Each has its own formatter state (name cache, sequence
 * texts). A slot goes EMPTY -> FILLED (reader) -> CLAIMED (a formatter) -> FORMATTED -> EMPTY
 * (the printer, once written); the state moves by compare-and-swap, and the release of each
 * move publishes what the slot holds. A wait spins for a while before it sleeps: waking a
 * sleeping thread on these VMs can take longer than formatting a batch. Only the printer
 * writes to stdout until pipe_finish has joined it. A dump of one batch or less, and one whose
 * thread cannot start, formats and writes on this thread. */
#define BATCH 1024
#define NSLOT 8
#define SPINS 4000 /* pause instructions: about 80 us where one takes 20 ns (this Intel VM) */

enum { S_EMPTY, S_FILLED, S_CLAIMED, S_FORMATTED };

struct slot {
    alignas(64) _Atomic int state;
    uint32_t n;       /* lines in the batch */
    struct text text; /* its formatted lines */
};

struct pipe {
    /* set before the printer starts */
    const tool_trace *t;
    struct line (*b)[BATCH];
    struct fmt *fmt[2]; /* [0] the printer's, [1] the reader's */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    struct slot slot[NSLOT];
    /* Each group below in its own cache line: a waiting side reads them in a loop, and a line
     * the other side wrote per event beside them would bounce between the cores. */
    alignas(64) _Atomic uint64_t filled;  /* batches handed over (the reader's) */
    alignas(64) _Atomic uint64_t written; /* batches written (the printer's) */
    alignas(64) _Atomic int done;         /* no more batches */
    _Atomic int sleepers;                 /* threads in pthread_cond_wait, or about to be */
    alignas(64) uint32_t cur;             /* the reader's own: lines in batch `next` */
    uint64_t next;                        /* the batch being filled, in slot next % NSLOT */
    int running, tried;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until ready(@p) holds. The sleeper count and every state the predicates read are
 * sequentially consistent, so a waker that stores a state either sees the count (and wakes
 * the sleeper under the mutex) or the waiter sees the state before it sleeps. */
static void pipe_wait(struct pipe *p, int (*ready)(struct pipe *))
{
    for (int i = 0; i < SPINS; i++) {
        if (ready(p))
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    while (!ready(p))
        pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
}

/* After a store the other thread may be waiting for. */
static void pipe_wake(struct pipe *p)
{
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Formats batch @k if it is filled and nobody else has taken it. Returns 1 if it did. */
static int format_batch(struct pipe *p, uint64_t k, struct fmt *f)
{
    struct slot *s = &p->slot[k % NSLOT];
    int want = S_FILLED;
    if (!atomic_compare_exchange_strong(&s->state, &want, S_CLAIMED))
        return 0;
    s->text.len = 0;
    for (uint32_t i = 0; i < s->n; i++)
        print_line(f, &s->text, &p->b[k % NSLOT][i]);
    atomic_store(&s->state, S_FORMATTED);
    pipe_wake(p);
    return 1;
}

/* Some batch handed over and not yet written is waiting for a formatter. */
static int any_filled(struct pipe *p)
{
    uint64_t w = atomic_load(&p->written), f = atomic_load(&p->filled);
    for (uint64_t k = w; k < f; k++)
        if (atomic_load(&p->slot[k % NSLOT].state) == S_FILLED)
            return 1;
    return 0;
}

static int printer_ready(struct pipe *p)
{
    uint64_t w = atomic_load(&p->written);
    return (w < atomic_load(&p->filled) &&
            atomic_load(&p->slot[w % NSLOT].state) == S_FORMATTED) ||
           any_filled(p) || atomic_load(&p->done);
}

static int reader_ready(struct pipe *p)
{
    return atomic_load(&p->slot[p->next % NSLOT].state) == S_EMPTY || any_filled(p);
}

static void *printer(void *arg)
{
    struct pipe *p = arg;
    for (;;) {
        int done = atomic_load(&p->done);
        uint64_t w = atomic_load(&p->written), f = atomic_load(&p->filled);
        if (w == f) {
            if (done)
                break; /* done was set after the last batch was filled: all written */
            pipe_wait(p, printer_ready);
            continue;
        }
        struct slot *s = &p->slot[w % NSLOT];
        if (atomic_load(&s->state) == S_FORMATTED) {
            text_write(&s->text);
            atomic_store(&s->state, S_EMPTY);
            atomic_store(&p->written, w + 1);
            pipe_wake(p);
            continue;
        }
        int did = 0;
        for (uint64_t k = w; k < f && !did; k++) /* the oldest first */
            did = format_batch(p, k, p->fmt[0]);
        if (!did)
            pipe_wait(p, printer_ready);
    }
    return NULL;
}

static void pipe_free(struct pipe *p)
{
    for (int i = 0; i < NSLOT; i++)
        free(p->slot[i].text.p);
    fmt_free(p->fmt[0]);
    fmt_free(p->fmt[1]);
    free(p->b);
    p->b = NULL;
}

static int pipe_init(struct pipe *p, const tool_trace *t)
{
    memset(p, 0, sizeof *p);
    p->t = t;
    p->b = malloc(NSLOT * sizeof *p->b);
    p->fmt[0] = fmt_new(t);
    p->fmt[1] = fmt_new(t);
    if (p->b == NULL || p->fmt[0] == NULL || p->fmt[1] == NULL) {
        pipe_free(p);
        return -1;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    return 0;
}

/* Without a printer thread: the @n lines of the batch being filled, formatted and written here
 * (the slot stays EMPTY). */
static void print_here(struct pipe *p, uint32_t n)
{
    struct slot *s = &p->slot[p->next % NSLOT];
    s->text.len = 0;
    for (uint32_t i = 0; i < n; i++)
        print_line(p->fmt[0], &s->text, &p->b[p->next % NSLOT][i]);
    text_write(&s->text);
}

/* Hands the batch being filled over (the printer started on the first one), then waits until
 * the next slot is free, formatting the newest filled batches meanwhile. */
static void pipe_hand_over(struct pipe *p)
{
    struct slot *s = &p->slot[p->next % NSLOT];
    if (!p->tried) {
        p->tried = 1;
        p->running = pthread_create(&p->th, NULL, printer, p) == 0;
    }
    if (!p->running) {
        print_here(p, p->cur);
        p->cur = 0;
        return;
    }
    s->n = p->cur;
    p->cur = 0;
    atomic_store(&s->state, S_FILLED);
    atomic_store(&p->filled, p->next + 1);
    pipe_wake(p);
    p->next++;
    while (atomic_load(&p->slot[p->next % NSLOT].state) != S_EMPTY) {
        int did = 0;
        for (uint64_t k = p->next; k-- > atomic_load(&p->written) && !did;) /* the newest first */
            did = format_batch(p, k, p->fmt[1]);
        if (!did)
            pipe_wait(p, reader_ready);
    }
}

static void pipe_put(struct pipe *p, const tt_event *ev)
{
    line_of(&p->b[p->next % NSLOT][p->cur], ev);
    if (++p->cur == BATCH)
        pipe_hand_over(p);
}

/* Prints what is left, stops the printer and frees the ring. Returns -1 if a line was lost
 * for want of memory. */
static int pipe_finish(struct pipe *p)
{
    if (p->b == NULL)
        return 0;
    if (p->running) {
        if (p->cur)
            pipe_hand_over(p);
        atomic_store(&p->done, 1);
        pipe_wake(p);
        /* help with what is left: the batches filled and not yet formatted */
        for (uint64_t k = atomic_load(&p->written); k < p->next; k++)
            format_batch(p, k, p->fmt[1]);
        pthread_join(p->th, NULL);
    } else {
        print_here(p, p->cur);
    }
    int nomem = p->fmt[0]->nomem | p->fmt[1]->nomem;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pipe_free(p);
    return nomem ? -1 : 0;
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
    if (ev->kind == TT_EV_SYNC) {
        /* the object as "THREAD:K" (the K-th object that thread met first), whether the
         * operation took the object's turn (then seq is its place on the object), its result */
        char obj[48];
        snprintf(obj, sizeof obj, "%" PRIu64 ":%" PRIu64, ev->arg >> 32, ev->arg & 0xFFFFFFFFu);
        tj_str(&j, "object", ev->arg ? obj : "");
        tj_bool(&j, "turn", ev->dir != 0);
        tj_u64(&j, "object_seq", ev->addr);
        tj_i64(&j, "result", ev->payload_len >= 4 && ev->payload
                                 ? (int32_t)((const uint8_t *)ev->payload)[0] |
                                       (int32_t)((const uint8_t *)ev->payload)[1] << 8 |
                                       (int32_t)((const uint8_t *)ev->payload)[2] << 16 |
                                       (int32_t)((uint32_t)((const uint8_t *)ev->payload)[3] << 24)
                                 : 0);
    }
    tj_object_end(&j);
    tj_newline(&j);
}

struct filter {
    int json;
    int checkpoints; /* --checkpoints: the checkpoint table, not the events */
    int one_thread;
    uint32_t thread;
    uint32_t kinds; /* 0: all */
    int from_set, from_time;
    uint64_t from;  /* a sequence number, or nanoseconds when from_time */
    uint64_t count; /* UINT64_MAX: all */
};

/* Where --from starts, found with the seek index. Each thread's cursor is put at a seek entry
 * at or before the start; the merge then passes over what lies before it:
 *   skip_before_time  events earlier than this time (ticks) are passed over, not counted;
 *   skip_seq          (--thread) events of a lower sequence number are passed over;
 *   skip_more         then this many events of the merged order are passed over.
 * For a global SEQ it picks the latest time T at which at most SEQ events can precede: for each
 * thread, the events before T are fewer than the seq of its first seek entry at or after T (the
 * upper bound UB(T)); T is the largest entry time with UB(T) <= SEQ. The events before T are
 * then counted exactly while they are passed over, and SEQ minus that many more are skipped:
 * at most about threads x K events (K = the index's seek step) are decoded in vain. */
struct start {
    uint64_t skip_before_time;
    uint64_t skip_seq;
    uint64_t skip_more;
    uint64_t before;     /* events known to precede the cursors' positions (global SEQ) */
    int global;          /* global SEQ: count the passed-over events into `before` */
    unsigned char *use;  /* per cursor: 1 = take part (0: no events from the start on) */
};

/* ceil(@a / @b), @b >= 1, without wrapping: a hostile file's seek step can be 2^64 - 1 */
static uint64_t ceil_div_(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Seeks thread @th's cursor to its last entry before @time (its first when none is). */
static int seek_thread_time(tool_trace *t, tt_index *ix, uint32_t th, uint64_t time,
                            uint64_t *seq_at, tt_error_info *err)
{
    tt_timepoint_entry e;
    int rc = tt_index_seek_time(ix, th, time, &e, err);
    if (rc == TT_E_INVAL)
        return TT_E_END; /* no events */
    if (rc != TT_OK)
        return rc;
    *seq_at = e.seq;
    return tt_reader_seek(t->r, th, &e, err);
}

static int find_start(tool_trace *t, tt_index *ix, const struct filter *flt, struct start *st,
                      tt_error_info *err)
{
    uint32_t n = t->cap.cursors;
    uint64_t k = tt_index_seek_every(ix);
    int rc;
    memset(st->use, 0, n);
    if (flt->one_thread && !flt->from_time) {
        tt_timepoint_entry e;
        rc = tt_index_seek_seq(ix, flt->thread, flt->from, &e, err);
        if (rc == TT_E_INVAL)
            return TT_OK; /* no events */
        if (rc != TT_OK)
            return rc;
        st->skip_seq = flt->from;
        st->use[flt->thread] = 1;
        return tt_reader_seek(t->r, flt->thread, &e, err);
    }
    if (flt->from_time) {
        st->skip_before_time = tool_ns_to_ticks(flt->from, t->m.ticks_per_sec);
    } else {
        /* every entry time is a candidate T */
        uint64_t total = 0, *times, m = 0, n_entries;
        for (uint32_t th = 0; th < n; th++)
            total += ceil_div_(tt_reader_thread(t->r, th)->event_count, k);
        times = malloc((total + 1) * sizeof *times);
        if (times == NULL)
            return TT_E_NOMEM;
        times[m++] = 0;
        for (uint32_t th = 0; th < n; th++) {
            n_entries = ceil_div_(tt_reader_thread(t->r, th)->event_count, k);
            for (uint64_t j = 0; j < n_entries; j++) {
                tt_timepoint_entry e;
                if ((rc = tt_index_seek_seq(ix, th, j * k, &e, err)) != TT_OK) {
                    free(times);
                    return rc; /* the thread has events: the seek index is bad */
                }
                times[m++] = e.time;
            }
        }
        qsort(times, m, sizeof *times, cmp_u64);
        uint64_t lo = 0, hi = m - 1; /* times[lo] satisfies UB <= SEQ (UB(0) = 0) */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo + 1) / 2, ub = 0;
            for (uint32_t th = 0; th < n; th++) {
                uint64_t ev = tt_reader_thread(t->r, th)->event_count;
                tt_timepoint_entry e;
                if (ev == 0)
                    continue;
                if ((rc = tt_index_seek_time(ix, th, times[mid], &e, err)) != TT_OK) {
                    free(times);
                    return rc;
                }
                /* the first entry at or after T: the next one, unless e is already */
                uint64_t first = e.time >= times[mid] ? e.seq : e.seq + k;
                ub += first < ev ? first : ev;
            }
            if (ub <= flt->from)
                lo = mid;
            else
                hi = mid - 1;
        }
        st->skip_before_time = times[lo];
        st->global = 1;
        free(times);
    }
    for (uint32_t th = 0; th < n; th++) {
        if (flt->one_thread && th != flt->thread)
            continue;
        uint64_t seq_at = 0;
        rc = seek_thread_time(t, ix, th, st->skip_before_time, &seq_at, err);
        if (rc == TT_E_END)
            continue;
        if (rc != TT_OK)
            return rc;
        st->use[th] = 1;
        st->before += seq_at;
    }
    return TT_OK;
}

/* ---- the dump ---- */

/* One dump: the merge of the cursors, the printer, where --from starts, what was read. */
struct dump {
    tool_trace *t;
    const struct filter *flt;
    tool_merge mg;
    struct pipe pp;
    struct start st;
    tt_error_info err; /* initialized once: the reader fills it on the failure that ends the dump */
    int seeking;       /* --from: events are still passed over (see struct start) */
    uint64_t read, payload, printed;
};

/* The merge, the printer's ring, and which cursors take part (all of them unless --from says
 * otherwise). Reports a failure and returns its exit code. */
static int dump_alloc(struct dump *d)
{
    uint32_t ncur = d->t->cap.cursors;
    if (tool_merge_init(&d->mg, d->t->r, ncur) != TT_OK ||
        (!d->flt->json && pipe_init(&d->pp, d->t) != 0)) {
        tool_error("%s: out of memory for %" PRIu32 " cursors", d->t->path, ncur);
        return TOOL_EXIT_SYSTEM;
    }
    d->st.use = malloc(ncur ? ncur : 1);
    if (d->st.use == NULL) {
        tool_error("%s: out of memory", d->t->path);
        return TOOL_EXIT_SYSTEM;
    }
    memset(d->st.use, 1, ncur ? ncur : 1);
    return TOOL_EXIT_OK;
}

/* --from: puts the cursors where the seek index says the start is, or, in a file without index
 * tables, sets the dump to pass over everything before it. Reports a failure. */
static int dump_seek(struct dump *d)
{
    tool_trace *t = d->t;
    const struct filter *flt = d->flt;
    int rc = tt_index_open(t->r, &t->lim, &t->ix, &d->err);

    if (rc == TT_E_INVAL) {
        /* no index tables: read from the start and pass over what comes before */
        tool_error("%s: %s; reading from the start", t->path,
                   tool_strip_path(d->err.message, t->path));
        rc = TT_OK;
        tool_error_info_init(&d->err);
        if (flt->from_time)
            d->st.skip_before_time = tool_ns_to_ticks(flt->from, t->m.ticks_per_sec);
        else if (flt->one_thread)
            d->st.skip_seq = flt->from;
        else
            d->st.skip_more = flt->from, d->st.global = 0;
    } else if (rc == TT_OK) {
        rc = find_start(t, t->ix, flt, &d->st, &d->err);
        if (rc == TT_OK && d->st.global)
            d->st.skip_more = flt->from; /* minus the events found before, see dump_heads */
    }
    if (rc != TT_OK)
        return tool_report(t->path, "seeking", rc, &d->err);
    return TOOL_EXIT_OK;
}

/* Puts the cursors that take part into the merge, each at its thread's first chunk where the
 * index says where that is (merge.h: many threads), or where --from put it. TT_OK or the
 * reader's error. */
static int dump_heads(struct dump *d)
{
    tool_trace *t = d->t;
    int rc = TT_OK;
    if (!d->flt->from_set && t->ix == NULL) {
        /* no index tables, or damaged ones: the cursors scan from the start, as they can */
        tt_error_info ierr;
        tool_error_info_init(&ierr);
        if (tt_index_open(t->r, &t->lim, &t->ix, &ierr) != TT_OK)
            t->ix = NULL;
    }
    for (uint32_t c = 0; c < t->cap.cursors && rc == TT_OK; c++) {
        if ((d->flt->one_thread && c != d->flt->thread) || !d->st.use[c])
            continue;
        if (!d->flt->from_set)
            tool_cursor_begin(t->r, t->ix, c);
        rc = tool_merge_add(&d->mg, c, &d->err);
    }
    if (d->st.global)
        d->st.skip_more -= d->st.before < d->st.skip_more ? d->st.before : d->st.skip_more;
    return rc;
}

/* Whether @ev comes before the start --from asked for (it is passed over, not shown). */
static int before_start(struct dump *d, const tt_event *ev)
{
    struct start *st = &d->st;
    if (!d->seeking)
        return 0;
    if (ev->time < st->skip_before_time || ev->tp.seq < st->skip_seq) {
        if (st->global && st->skip_more)
            st->skip_more--; /* an event before T: it counts towards SEQ */
        return 1;
    }
    if (st->skip_more) {
        st->skip_more--;
        return 1;
    }
    d->seeking = 0;
    return 0;
}

/* The merge: every event in recorded order, shown when it passes the filter, until the cursors
 * end or --count events were shown. TT_OK or the reader's error. */
static int dump_events(struct dump *d)
{
    const struct filter *flt = d->flt;
    const tt_event *ev;
    int rc = TT_OK;

    while (rc == TT_OK && (ev = tool_merge_head(&d->mg)) != NULL && d->printed < flt->count) {
        if (!before_start(d, ev) &&
            (flt->kinds == 0 || (ev->kind < 32 && (flt->kinds & (UINT32_C(1) << ev->kind))))) {
            if (flt->json)
                print_event_json(d->t, ev);
            else
                pipe_put(&d->pp, ev);
            d->printed++;
        }
        d->read++;
        tool_progress_update(d->read);
        d->payload += ev->payload_len;
        rc = tool_merge_next(&d->mg, &d->err);
    }
    return rc;
}

/* After a whole dump: the counts the file promised. Reports a difference and returns its exit
 * code. */
static int check_totals(const struct dump *d)
{
    const tool_trace *t = d->t;
    const struct filter *flt = d->flt;
    uint64_t expected = t->m.event_count;
    int code;

    if (flt->one_thread) {
        const tt_thread_entry *e = tt_reader_thread(t->r, flt->thread);
        expected = e != NULL ? e->event_count : d->read;
    }
    if (d->read != expected) {
        tool_error("%s: read %" PRIu64 " events, but the %s says %" PRIu64, t->path, d->read,
                   flt->one_thread ? "thread table" : "manifest", expected);
        return TOOL_EXIT_CORRUPT;
    }
    if (!flt->one_thread && d->payload != t->m.payload_bytes) {
        tool_error("%s: read %" PRIu64 " payload bytes, but the manifest says %" PRIu64, t->path,
                   d->payload, t->m.payload_bytes);
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

/* ---- --checkpoints ---- */

static void print_checkpoint(const tool_trace *t, const tt_checkpoint_entry *e, int json)
{
    uint64_t ns = tool_ticks_to_ns(e->time, t->m.ticks_per_sec);
    tool_json j;
    if (json) {
        tj_init(&j, stdout);
        tj_object_begin(&j, NULL);
        tj_u64(&j, "checkpoint", e->number);
        tj_u64(&j, "thread", e->tp.thread);
        tj_u64(&j, "seq", e->tp.seq);
        tj_u64(&j, "epoch", e->tp.epoch);
        tj_u64(&j, "time", e->time);
        tj_u64(&j, "time_ns", ns);
        tj_u64(&j, "site_id", e->site);
        tj_object_name(&j, "site", t->r, e->site);
        tj_u64(&j, "len", e->length);
        tj_u64(&j, "chunk_offset", e->chunk_offset);
        tj_array_begin(&j, "providers");
    } else {
        printf("checkpoint %" PRIu64 " %" PRIu32 " %" PRIu64 " %" PRIu32 " %" PRIu64 " ",
               e->number, e->tp.thread, e->tp.seq, e->tp.epoch, ns);
        if (e->site)
            tool_print_object(stdout, t->r, e->site);
        else
            fputc('-', stdout);
        printf(" %" PRIu64 " ", e->length);
    }
    for (uint32_t k = 0; k < e->providers; k++) {
        uint32_t id = 0;
        uint64_t len = 0;
        tt_reader_checkpoint_provider(t->r, e->number, k, &id, &len);
        if (json) {
            tj_object_begin(&j, NULL);
            tj_u64(&j, "id", id);
            tj_u64(&j, "len", len);
            tj_object_end(&j);
        } else {
            printf("%s%" PRIu32 ":%" PRIu64, k ? "," : "", id, len);
        }
    }
    if (json) {
        tj_array_end(&j);
        tj_object_end(&j);
        tj_newline(&j);
    } else {
        if (!e->providers)
            fputc('-', stdout);
        fputc('\n', stdout);
    }
}

static void print_restore(const tool_trace *t, const tt_restore_entry *e, int json)
{
    uint64_t ns = tool_ticks_to_ns(e->time, t->m.ticks_per_sec);
    if (json) {
        tool_json j;
        tj_init(&j, stdout);
        tj_object_begin(&j, NULL);
        tj_u64(&j, "restore", e->epoch);
        tj_u64(&j, "thread", e->tp.thread);
        tj_u64(&j, "seq", e->tp.seq);
        tj_u64(&j, "epoch", e->epoch);
        tj_u64(&j, "time", e->time);
        tj_u64(&j, "time_ns", ns);
        tj_u64(&j, "site_id", e->site);
        tj_object_name(&j, "site", t->r, e->site);
        tj_u64(&j, "checkpoint", e->checkpoint);
        tj_object_end(&j);
        tj_newline(&j);
        return;
    }
    printf("restore %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRIu64 " ", e->epoch, e->tp.thread,
           e->tp.seq, ns);
    if (e->site)
        tool_print_object(stdout, t->r, e->site);
    else
        fputc('-', stdout);
    printf(" %" PRIu64 "\n", e->checkpoint);
}

/* (time, thread, seq) of @a before @b's */
static int tp_before(uint64_t ta, const tt_timepoint *a, uint64_t tb, const tt_timepoint *b)
{
    if (ta != tb)
        return ta < tb;
    if (a->thread != b->thread)
        return a->thread < b->thread;
    return a->seq < b->seq;
}

/* The checkpoint table (read with the reader's tables), checkpoints and restores merged into
 * the recorded order. */
static int run_checkpoints(tool_trace *t, int json)
{
    uint64_t n = tt_reader_checkpoint_count(t->r), i = 0;
    uint32_t m = tt_reader_restore_count(t->r), k = 1;
    if (n == 0 && !json) {
        fflush(stdout);
        if (t->m.version < 4)
            tool_error("%s: format version %" PRIu32 " has no checkpoint table", t->path,
                       t->m.version);
        else
            tool_error("%s: no checkpoint table (no checkpoint was taken, or the file was "
                       "recovered or recorded into caller storage)", t->path);
    }
    while (i < n || k <= m) {
        tt_checkpoint_entry ce;
        tt_restore_entry re;
        int have_c = i < n && tt_reader_checkpoint(t->r, i, &ce) == TT_OK;
        int have_r = k <= m && tt_reader_restore(t->r, k, &re) == TT_OK;
        if (!have_c && !have_r)
            break;
        if (have_c && (!have_r || tp_before(ce.time, &ce.tp, re.time, &re.tp))) {
            print_checkpoint(t, &ce, json);
            i++;
        } else {
            print_restore(t, &re, json);
            k++;
        }
    }
    return TOOL_EXIT_OK;
}

static int run_dump(tool_trace *t, const struct filter *flt)
{
    if (flt->checkpoints)
        return run_checkpoints(t, flt->json);

    struct dump d = {.t = t, .flt = flt, .seeking = flt->from_set};
    int rc, lost;

    /* --thread N is one of the trace's (tool_trace_start), and has cursor N */
    tool_error_info_init(&d.err);
    rc = dump_alloc(&d);
    if (rc == TOOL_EXIT_OK && flt->from_set)
        rc = dump_seek(&d);
    if (rc != TOOL_EXIT_OK) {
        tool_merge_free(&d.mg);
        pipe_finish(&d.pp);
        free(d.st.use);
        return rc;
    }
    rc = dump_heads(&d);
    tool_progress_begin("dump: reading events", 0);
    if (rc == TT_OK)
        rc = dump_events(&d);
    lost = !flt->json && pipe_finish(&d.pp) != 0;
    tool_progress_end();
    tool_merge_free(&d.mg);
    free(d.st.use);

    if (lost) {
        tool_error("%s: out of memory while printing: lines are missing from the output",
                   t->path);
        return TOOL_EXIT_SYSTEM;
    }
    if (rc != TT_OK) {
        char what[64];
        snprintf(what, sizeof what, "after %" PRIu64 " events", d.read);
        return tool_report(t->path, what, rc, &d.err);
    }
    if (flt->from_set || flt->count != UINT64_MAX)
        return TOOL_EXIT_OK; /* a part of the stream: its cursors' own checks are all there is */
    return check_totals(&d); /* every cursor ended: the counts must be the ones promised */
}

/* ---- the command line ---- */

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct filter *flt = ctx;

    switch (c) {
    case 'c':
        flt->checkpoints = 1;
        return TOOL_EXIT_OK;
    case 'k':
        return parse_kinds(prog, arg, &flt->kinds);
    case 'f':
        flt->from_set = 1;
        if (tool_parse_time_ns(arg, &flt->from) == 0) {
            flt->from_time = 1;
            return TOOL_EXIT_OK;
        }
        return tool_parse_u64(prog, "--from (a sequence number, or a time with a unit: ns, us, "
                              "ms, s)", arg, 0, UINT64_MAX, &flt->from);
    case 'n':
        return tool_parse_u64(prog, "--count", arg, 0, UINT64_MAX, &flt->count);
    default:
        return tool_usage_hint(prog);
    }
}

static void print_kinds(FILE *f)
{
    fputs("\nEvent kinds:", f);
    for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
        fprintf(f, " %s", tt_event_kind_name(k));
    fputc('\n', f);
}

int cmd_dump(int argc, char **argv)
{
    static const struct option options[] = {
        {"checkpoints", no_argument, NULL, 'c'},
        {"kind", required_argument, NULL, 'k'},
        {"from", required_argument, NULL, 'f'},
        {"count", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_THREAD | TOOL_OPT_MAX_MEMORY |
                                             TOOL_OPT_PROCESS | TOOL_OPT_NO_DEMANGLE,
                                   .options = options,
                                   .take = take_option,
                                   .more_help = print_kinds};
    struct filter flt = {.count = UINT64_MAX};
    tool_opts o;
    tool_trace t;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, &flt, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (flt.checkpoints && (o.one_thread || flt.kinds || flt.from_set || flt.count != UINT64_MAX))
        return tool_usage_error(argv[0], "--checkpoints lists the checkpoint table: it takes "
                                "no --thread, --kind, --from or --count");
    flt.json = o.json;
    flt.one_thread = o.one_thread;
    flt.thread = o.thread;
    rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_PER_THREAD, TOOL_TRACE_OPEN);
    if (rc == TOOL_EXIT_OK)
        rc = run_dump(&t, &flt);
    tool_trace_close(&t);
    /* an output error (a closed pipe, a full disk) outranks the verdict: the output is lost */
    return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
}
