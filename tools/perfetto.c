/* SPDX-License-Identifier: MIT */
/* tinytrace — a writer of Perfetto's native trace format (perfetto.h).
 *
 * Protobuf on the wire, as much of it as is needed here: a field is a key, (number << 3) | wire
 * type, then its value; wire type 0 is a varint (7 bits a byte, low bits first, the high bit set
 * on every byte but the last), wire type 2 is a varint length and that many bytes (strings and
 * nested messages). A packet is built in the writer's scratch buffer, then framed as field 1 of
 * Trace. A nested message's length is reserved as two bytes (messages here are under 16 KiB:
 * names and annotations are cut before they reach that) and moved down to one when it fits.
 * Begins and ends, nearly every packet of a trace, skip the general code and are written byte
 * by byte straight into the output buffer.
 */
#include "perfetto.h"

#include <stdlib.h>
#include <string.h>

#define SCRATCH 16384
#define NAME_MAX_BYTES 1024 /* a name or a string annotation is cut here */
#define ARG_MAX_BYTES 4096

struct pf_thread {
    uint64_t last[2];     /* the time of the previous packet of the slice and instant sequences */
    int open[2];          /* the sequence's first packet is written */
    uint8_t *interned;    /* bit per function id: its name is interned on the slice sequence */
    uint32_t interned_cap; /* bits */
};

/* ---- encoding into a byte buffer ---- */

typedef struct pb {
    unsigned char *p, *end;
    unsigned char *open[8]; /* where each open nested message's reserved length is */
    unsigned depth;
} pb;

static inline unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static void pb_varint(pb *b, unsigned field, uint64_t v)
{
    if (b->end - b->p < 22)
        return;
    b->p = put_varint(b->p, (uint64_t)field << 3);
    b->p = put_varint(b->p, v);
}

static void pb_bytes(pb *b, unsigned field, const void *s, size_t len, size_t max)
{
    if (len > max)
        len = max;
    if ((size_t)(b->end - b->p) < len + 16)
        return;
    b->p = put_varint(b->p, (uint64_t)field << 3 | 2);
    b->p = put_varint(b->p, len);
    memcpy(b->p, s, len);
    b->p += len;
}

static void pb_begin(pb *b, unsigned field)
{
    b->p = put_varint(b->p, (uint64_t)field << 3 | 2);
    b->open[b->depth++] = b->p;
    b->p += 2;
}

static void pb_end(pb *b)
{
    unsigned char *at = b->open[--b->depth];
    size_t len = (size_t)(b->p - at - 2);
    if (len < 0x80) {
        at[0] = (unsigned char)len;
        memmove(at + 1, at + 2, len);
        b->p--;
    } else {
        at[0] = (unsigned char)(len | 0x80);
        at[1] = (unsigned char)(len >> 7);
    }
}

/* ---- the output ---- */

void pf_flush(pf_writer *w)
{
    if (w->len > 0)
        fwrite(w->buf, 1, w->len, w->f);
    w->len = 0;
}

/* Room for @n more bytes in the output buffer. */
static inline unsigned char *room(pf_writer *w, size_t n)
{
    if (sizeof w->buf - w->len < n)
        pf_flush(w);
    return w->buf + w->len;
}

/* Frames the packet body @body .. @end as Trace.packet. */
static void emit(pf_writer *w, const unsigned char *body, const unsigned char *end)
{
    size_t len = (size_t)(end - body);
    unsigned char *p = room(w, len + 8);
    unsigned char *q = put_varint(p, PF_TRACE_PACKET << 3 | 2);
    q = put_varint(q, len);
    memcpy(q, body, len);
    w->len += (size_t)(q + len - p);
    w->packets++;
}

int pf_init(pf_writer *w, FILE *f, uint32_t pid, uint32_t nthreads)
{
    w->f = f;
    w->pid = pid;
    w->nthreads = nthreads;
    w->packets = 0;
    w->len = 0;
    w->threads = calloc(nthreads ? nthreads : 1, sizeof *w->threads);
    return w->threads != NULL ? 0 : -1;
}

void pf_free(pf_writer *w)
{
    if (w->f != NULL)
        pf_flush(w);
    for (uint32_t i = 0; w->threads != NULL && i < w->nthreads; i++)
        free(w->threads[i].interned);
    free(w->threads);
    w->threads = NULL;
}

static uint32_t seq_of(uint32_t th, int instants)
{
    return 2 * th + 1 + (instants ? 1 : 0);
}

void pf_process(pf_writer *w, const char *name, size_t len)
{
    unsigned char body[SCRATCH];
    pb b = {.p = body, .end = body + sizeof body};
    pb_begin(&b, PF_PACKET_TRACK_DESCRIPTOR);
    pb_varint(&b, PF_TD_UUID, 1);
    pb_begin(&b, PF_TD_PROCESS);
    pb_varint(&b, PF_PD_PID, w->pid);
    pb_bytes(&b, PF_PD_PROCESS_NAME, name, len, NAME_MAX_BYTES);
    pb_end(&b);
    pb_end(&b);
    emit(w, body, b.p);
}

/* The packet that opens a sequence: incremental state cleared, the defaults (the thread's
 * track, the sequence's clock) and the clock itself, incremental from @t0_ns. The packet's own
 * timestamp is on BOOTTIME, the clock the snapshot relates the sequence's clock to. */
static void open_sequence(pf_writer *w, uint32_t seq, uint64_t track, uint64_t t0_ns)
{
    unsigned char body[256];
    pb b = {.p = body, .end = body + sizeof body};
    pb_varint(&b, PF_PACKET_TIMESTAMP, t0_ns);
    pb_varint(&b, PF_PACKET_TIMESTAMP_CLOCK_ID, PF_CLOCK_BOOTTIME);
    pb_varint(&b, PF_PACKET_SEQUENCE_ID, seq);
    pb_varint(&b, PF_PACKET_SEQUENCE_FLAGS, PF_SEQ_INCREMENTAL_STATE_CLEARED);
    pb_begin(&b, PF_PACKET_DEFAULTS);
    pb_varint(&b, PF_DEFAULTS_CLOCK_ID, PF_CLOCK_SEQUENCE);
    pb_begin(&b, PF_DEFAULTS_TRACK_EVENT);
    pb_varint(&b, PF_TE_DEFAULTS_TRACK_UUID, track);
    pb_end(&b);
    pb_end(&b);
    pb_begin(&b, PF_PACKET_CLOCK_SNAPSHOT);
    pb_begin(&b, PF_CLOCKS);
    pb_varint(&b, PF_CLOCK_ID, PF_CLOCK_BOOTTIME);
    pb_varint(&b, PF_CLOCK_TIMESTAMP, t0_ns);
    pb_end(&b);
    pb_begin(&b, PF_CLOCKS);
    pb_varint(&b, PF_CLOCK_ID, PF_CLOCK_SEQUENCE);
    pb_varint(&b, PF_CLOCK_TIMESTAMP, t0_ns);
    pb_varint(&b, PF_CLOCK_INCREMENTAL, 1);
    pb_end(&b);
    pb_end(&b);
    emit(w, body, b.p);
}

void pf_thread_track(pf_writer *w, uint32_t th, uint32_t tid, const char *name, size_t len)
{
    unsigned char body[SCRATCH];
    pb b = {.p = body, .end = body + sizeof body};
    uint64_t track = 2 + (uint64_t)th;

    pb_begin(&b, PF_PACKET_TRACK_DESCRIPTOR);
    pb_varint(&b, PF_TD_UUID, track);
    pb_varint(&b, PF_TD_PARENT_UUID, 1);
    pb_begin(&b, PF_TD_THREAD);
    pb_varint(&b, PF_THD_PID, w->pid);
    pb_varint(&b, PF_THD_TID, tid);
    pb_bytes(&b, PF_THD_THREAD_NAME, name, len, NAME_MAX_BYTES);
    pb_end(&b);
    pb_end(&b);
    emit(w, body, b.p);
}

/* Marks function @fn interned on @t's slice sequence; returns whether it was already. A
 * function id that does not fit the bitmap (out of memory) is interned again each time. */
static int interned(pf_thread *t, uint32_t fn)
{
    if (fn >= t->interned_cap) {
        uint32_t cap = t->interned_cap ? t->interned_cap : 256;
        while (cap <= fn && cap < (1u << 31))
            cap *= 2;
        uint8_t *m = realloc(t->interned, cap / 8);
        if (m == NULL)
            return 0;
        memset(m + t->interned_cap / 8, 0, (cap - t->interned_cap) / 8);
        t->interned = m;
        t->interned_cap = cap;
    }
    if (t->interned[fn / 8] & (1u << (fn % 8)))
        return 1;
    t->interned[fn / 8] |= (uint8_t)(1u << (fn % 8));
    return 0;
}

/* Ticks since the previous packet of the sequence; times never go back (the caller keeps each
 * thread's times non-decreasing). */
static inline uint64_t delta(pf_writer *w, uint32_t th, int k, uint64_t ts)
{
    pf_thread *t = &w->threads[th];
    if (!t->open[k]) {
        open_sequence(w, seq_of(th, k), 2 + (uint64_t)th, ts);
        t->open[k] = 1;
        t->last[k] = ts;
    }
    uint64_t d = ts >= t->last[k] ? ts - t->last[k] : 0;
    if (ts > t->last[k])
        t->last[k] = ts;
    return d;
}

void pf_begin(pf_writer *w, uint32_t th, uint32_t fn, const char *name, size_t len,
              uint64_t ts_ns)
{
    pf_thread *t = &w->threads[th];
    uint64_t d = delta(w, th, 0, ts_ns);
    uint32_t seq = seq_of(th, 0);

    if (!interned(t, fn)) {
        unsigned char body[SCRATCH];
        pb b = {.p = body, .end = body + sizeof body};
        pb_varint(&b, PF_PACKET_TIMESTAMP, d);
        pb_varint(&b, PF_PACKET_SEQUENCE_ID, seq);
        pb_begin(&b, PF_PACKET_INTERNED_DATA);
        pb_begin(&b, PF_INTERNED_EVENT_NAMES);
        pb_varint(&b, PF_EVENT_NAME_IID, fn);
        pb_bytes(&b, PF_EVENT_NAME_NAME, name, len, NAME_MAX_BYTES);
        pb_end(&b);
        pb_end(&b);
        pb_begin(&b, PF_PACKET_TRACK_EVENT);
        pb_varint(&b, PF_TE_TYPE, PF_TYPE_SLICE_BEGIN);
        pb_varint(&b, PF_TE_NAME_IID, fn);
        pb_end(&b);
        emit(w, body, b.p);
        return;
    }
    /* the common case, by hand: timestamp, sequence, track_event {type, name_iid} */
    unsigned char body[40], *p = body, *te;
    *p++ = PF_PACKET_TIMESTAMP << 3;
    p = put_varint(p, d);
    *p++ = PF_PACKET_SEQUENCE_ID << 3;
    p = put_varint(p, seq);
    *p++ = PF_PACKET_TRACK_EVENT << 3 | 2;
    te = p++;
    *p++ = PF_TE_TYPE << 3;
    *p++ = PF_TYPE_SLICE_BEGIN;
    *p++ = PF_TE_NAME_IID << 3;
    p = put_varint(p, fn);
    *te = (unsigned char)(p - te - 1);
    emit(w, body, p);
}

void pf_end(pf_writer *w, uint32_t th, uint64_t ts_ns)
{
    unsigned char body[32], *p = body;
    *p++ = PF_PACKET_TIMESTAMP << 3;
    p = put_varint(p, delta(w, th, 0, ts_ns));
    *p++ = PF_PACKET_SEQUENCE_ID << 3;
    p = put_varint(p, seq_of(th, 0));
    *p++ = PF_PACKET_TRACK_EVENT << 3 | 2;
    *p++ = 2;
    *p++ = PF_TE_TYPE << 3;
    *p++ = PF_TYPE_SLICE_END;
    emit(w, body, p);
}

void pf_instant(pf_writer *w, uint32_t th, uint64_t ts_ns, const char *name, size_t len,
                const char *cat, const pf_arg *args, size_t nargs)
{
    unsigned char body[SCRATCH];
    pb b = {.p = body, .end = body + sizeof body - 64};

    pb_varint(&b, PF_PACKET_TIMESTAMP, delta(w, th, 1, ts_ns));
    pb_varint(&b, PF_PACKET_SEQUENCE_ID, seq_of(th, 1));
    pb_begin(&b, PF_PACKET_TRACK_EVENT);
    pb_varint(&b, PF_TE_TYPE, PF_TYPE_INSTANT);
    pb_bytes(&b, PF_TE_NAME, name, len, NAME_MAX_BYTES);
    pb_bytes(&b, PF_TE_CATEGORIES, cat, strlen(cat), NAME_MAX_BYTES);
    for (size_t i = 0; i < nargs; i++) {
        if (b.end - b.p < ARG_MAX_BYTES + 64)
            break;
        pb_begin(&b, PF_TE_DEBUG_ANNOTATIONS);
        pb_bytes(&b, PF_DA_NAME, args[i].name, strlen(args[i].name), NAME_MAX_BYTES);
        switch (args[i].type) {
        case PF_STR:
            pb_bytes(&b, PF_DA_STRING, args[i].str, args[i].len, ARG_MAX_BYTES);
            break;
        case PF_UINT:
            pb_varint(&b, PF_DA_UINT, args[i].v);
            break;
        case PF_PTR:
            pb_varint(&b, PF_DA_POINTER, args[i].v);
            break;
        }
        pb_end(&b);
    }
    pb_end(&b);
    emit(w, body, b.p);
}
