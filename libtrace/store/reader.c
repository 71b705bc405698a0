/* SPDX-License-Identifier: MIT */
/* The bounded reader.
 *
 * Every buffer the reader uses is carved from the caller's storage, whose size comes from
 * tt_reader_probe: the manifest's largest chunk and largest split payload, its table sizes and
 * thread count, each checked against the caller's limits first. Nothing read from the file is
 * used as a size, a count or an index before it is checked against those numbers, so a hostile
 * file ends in an error, never in an overflow or an unbounded allocation.
 *
 * A cursor walks chunk headers from the start of the data area. A sequential cursor takes every
 * chunk; a per-thread cursor skips the chunks of other threads after reading only their 48-byte
 * header. A payload split over several chunks is assembled into the cursor's split buffer by
 * reading ahead the continuation bytes of the thread's next chunks; those chunks' checksums are
 * checked when the cursor reaches them.
 *
 * The sequential cursor also checks what only a whole pass can: the sequence numbers and
 * continuation state of every thread, and at the end of the stream every count of the manifest
 * and the chained checksum over all event chunks.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cursor.h"

/* ---------------------------------------------------------------- sources */

void tt_reader_limits_default(tt_reader_limits *lim)
{
    lim->max_chunk = 256u << 20;
    lim->max_event = 4ull << 30;
    lim->max_threads = 65536;
    lim->max_objects = 1u << 24;
    lim->max_table = 1u << 30;
    lim->max_total = 8ull << 30;
}

static inline uint64_t al16(uint64_t v)
{
    return (v + 15) & ~(uint64_t)15;
}

/* ---------------------------------------------------------------- probe and open */

static int capacity(const tt_source *src, const tt_manifest *m, const tt_reader_limits *lim,
                    tt_cursor_mode mode, tt_reader_capacity *cap, tt_error_info *err)
{
    const char *nm = src->name;
    if (m->largest_chunk > lim->max_chunk)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_LCHUNK,
                       "%s: the largest chunk (%" PRIu64 " bytes) exceeds the limit max_chunk "
                       "(%" PRIu64 ")", nm, m->largest_chunk, lim->max_chunk);
    if (m->largest_event > lim->max_event)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_LEVENT,
                       "%s: the largest event (%" PRIu64 " bytes) exceeds the limit max_event "
                       "(%" PRIu64 ")", nm, m->largest_event, lim->max_event);
    if (m->thread_count > lim->max_threads)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_THREADS,
                       "%s: %u threads exceed the limit max_threads (%u)", nm, m->thread_count,
                       lim->max_threads);
    if (m->object_count > lim->max_objects)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_OBJECTS,
                       "%s: %u objects exceed the limit max_objects (%u)", nm, m->object_count,
                       lim->max_objects);
    if (m->objects_length > lim->max_table || m->threads_length > lim->max_table)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_OBJ_LEN,
                       "%s: a table exceeds the limit max_table (%" PRIu64 ")", nm, lim->max_table);
    if (m->checkpoints_length > lim->max_table)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_CP_LEN,
                       "%s: the checkpoint table (%" PRIu64 " bytes) exceeds the limit max_table "
                       "(%" PRIu64 ")", nm, m->checkpoints_length, lim->max_table);
    uint32_t n = mode == TT_CURSORS_PER_THREAD ? m->thread_count : 1;
    cap->cursors = n;
    cap->per_cursor = al16(m->largest_chunk) + al16(m->largest_split);
    cap->fixed = al16(sizeof(struct tt_reader)) +
                 al16((uint64_t)m->thread_count * sizeof(tt_thread_entry)) +
                 al16((uint64_t)m->thread_count * sizeof(struct thread_state)) +
                 al16((uint64_t)n * sizeof(struct tt_cursor)) + al16(m->objects_length) +
                 al16((uint64_t)m->object_count * sizeof(uint32_t)) +
                 al16(m->checkpoints_length) + al16((uint64_t)m->checkpoint_count * 8) +
                 al16((uint64_t)m->restore_count * sizeof(struct tt_restore_row));
    cap->total = cap->fixed + cap->per_cursor * n;
    if (cap->total > lim->max_total)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX,
                       "%s: the reader needs %" PRIu64 " bytes, more than the limit max_total "
                       "(%" PRIu64 ")", nm, cap->total, lim->max_total);
    return TT_OK;
}

int tt_reader_probe(const tt_source *src, const tt_reader_limits *lim, tt_cursor_mode mode,
                    tt_manifest *mout, tt_reader_capacity *cout, tt_error_info *err)
{
    uint8_t buf[TT_MANIFEST_SIZE];
    tt_manifest m;
    tt_reader_capacity cap;
    tt_reader_limits dl;
    if (!src)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "NULL source");
    if (!lim) {
        tt_reader_limits_default(&dl);
        lim = &dl;
    }
    if (src->size < TT_MANIFEST_SIZE) {
        /* a short file may still announce another format: say so if it does */
        uint8_t head[12] = { 0 };
        size_t got = 0;
        if (src->size >= 12 && src->read(src->ctx, 0, head, 12, &got) == TT_OK && got == 12 &&
            memcmp(head, TT_MAGIC, 8) != 0)
            return tt_fail(err, TT_E_FORMAT, 0, 0, "%s: not a tinytrace file (bad magic)",
                           src->name);
        return tt_fail(err, TT_E_TRUNCATED, 0, src->size,
                       "%s: %" PRIu64 " bytes is shorter than the %u-byte manifest", src->name,
                       src->size, TT_MANIFEST_SIZE);
    }
    int rc = tt_src_read(src, 0, buf, sizeof buf, "the manifest", err);
    if (rc != TT_OK)
        return rc;
    rc = tt_manifest_decode(buf, src->size, &m, err);
    if (rc != TT_OK) {
        if (err) {
            /* prefix the file name; the message may lose its tail, never its head */
            char tmp[sizeof err->message];
            size_t n = strnlen(src->name, sizeof src->name);
            if (n + 2 < sizeof tmp) {
                memcpy(tmp, src->name, n);
                memcpy(tmp + n, ": ", 2);
                size_t rest = sizeof tmp - n - 3;
                size_t ml = strnlen(err->message, rest);
                memcpy(tmp + n + 2, err->message, ml);
                tmp[n + 2 + ml] = '\0';
                memcpy(err->message, tmp, sizeof tmp);
            }
        }
        return rc;
    }
    /* from here on the manifest is decoded: give it to the caller even when refusing the file,
     * so a tool can show the flags, the write error and the counts of what it refuses */
    if (mout)
        *mout = m;
    if (m.flags & TT_MF_INCOMPLETE)
        return tt_fail(err, TT_E_INCOMPLETE, m.write_errno, TT_M_FLAGS,
                       "%s: the recording stopped after a write error (%s); the file does not "
                       "hold the whole run", src->name, strerror(m.write_errno));
    if (!(m.flags & TT_MF_FINALIZED))
        return tt_fail(err, TT_E_TRUNCATED, 0, TT_M_FLAGS,
                       "%s: the recording was never closed (no final manifest); "
                       "`tinytrace recover` can save its intact chunks", src->name);
    rc = capacity(src, &m, lim, mode, &cap, err);
    if (rc != TT_OK)
        return rc;
    if (cout)
        *cout = cap;
    return TT_OK;
}

/* The format's read-and-check primitive, plus what only a reader knows: which types belong in the
 * data area of this file's version, and for an event chunk its thread, its capacity and its
 * count. @want_type 0: the data area. */
static int chunk_read_header(tt_reader *r, uint64_t off, uint64_t limit_end, uint16_t want_type,
                             struct tt_chunk_header *h, uint8_t raw[TT_CHUNK_HEADER],
                             tt_error_info *err)
{
    const char *nm = r->src.name;
    int rc = tt_chunk_read_header(&r->src, off, limit_end, want_type, "chunk", h, raw, err);
    if (rc != TT_OK)
        return rc;
    /* version 2 puts frame blocks and seek batches between the event chunks */
    bool data_ok = h->type == TT_CHUNK_EVENTS ||
                   (r->m.version >= 2 && (h->type == TT_CHUNK_FRAMES || h->type == TT_CHUNK_SEEK ||
                                          h->type == TT_CHUNK_BLOCKS)) ||
                   (r->m.version >= 4 && h->type == TT_CHUNK_CHECKPOINTS);
    if (want_type == 0 && !data_ok)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 4,
                       "%s: chunk at offset %" PRIu64 " has type %u, which does not belong in "
                       "the data area of a version %u file", nm, off, h->type, r->m.version);
    if (h->type == TT_CHUNK_EVENTS) {
        if (h->thread >= r->m.thread_count)
            return tt_fail(err, TT_E_CORRUPT, 0, off + 12,
                           "%s: chunk at offset %" PRIu64 " names thread %u of %u", nm, off,
                           h->thread, r->m.thread_count);
        if (h->body_len > r->chunk_cap)
            return tt_fail(err, TT_E_EXHAUSTED, 0, off + 8,
                           "%s: chunk at offset %" PRIu64 " claims %u bytes, more than the "
                           "capacity of %" PRIu64 " (TraceReaderStorageExhaustion)",
                           nm, off, h->body_len, r->chunk_cap);
        if (h->count > h->body_len)
            return tt_fail(err, TT_E_CORRUPT, 0, off + 24,
                           "%s: chunk at offset %" PRIu64 " claims %u events in %u bytes", nm, off,
                           h->count, h->body_len);
    }
    return TT_OK;
}

static int chunk_read_body(tt_reader *r, uint64_t off, const struct tt_chunk_header *h,
                           const uint8_t raw[TT_CHUNK_HEADER], uint8_t *dst, tt_error_info *err)
{
    return tt_chunk_read_body(&r->src, off, h, raw, dst, "chunk", err);
}

static int load_tables(tt_reader *r, tt_error_info *err)
{
    const tt_manifest *m = &r->m;
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    const char *nm = r->src.name;
    uint64_t off = m->threads_offset;
    int rc = chunk_read_header(r, off, off + m->threads_length, TT_CHUNK_THREADS, &h, raw, err);
    if (rc != TT_OK)
        return rc;
    if (h.count != m->thread_count || (uint64_t)h.body_len != m->threads_length - TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 24,
                       "%s: thread table at offset %" PRIu64 " does not match the manifest", nm, off);
    /* the rows are decoded in place of the raw bytes: read them into the objects area first */
    uint8_t *tmp = (uint8_t *)r->threads;
    if ((uint64_t)h.body_len > m->thread_count * sizeof(tt_thread_entry))
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: thread table too large", nm);
    rc = chunk_read_body(r, off, &h, raw, tmp, err);
    if (rc != TT_OK)
        return rc;
    /* decode back to front: a row grows from 48 to sizeof(tt_thread_entry) bytes */
    _Static_assert(sizeof(tt_thread_entry) >= TT_THREAD_ROW, "row sizes");
    uint64_t ev = 0, ch = 0;
    for (uint32_t i = m->thread_count; i-- > 0;) {
        tt_thread_entry e;
        tt_thread_row_decode(tmp + (uint64_t)i * TT_THREAD_ROW, &e);
        r->threads[i] = e;
    }
    for (uint32_t i = 0; i < m->thread_count; i++) {
        const tt_thread_entry *e = &r->threads[i];
        uint64_t roff = off + TT_CHUNK_HEADER + (uint64_t)i * TT_THREAD_ROW;
        if (e->id != i || e->name > m->object_count || e->flags != 0 ||
            e->first_time > e->last_time)
            return tt_fail(err, TT_E_CORRUPT, 0, roff,
                           "%s: thread table row %u at offset %" PRIu64 " is invalid", nm, i, roff);
        ev += e->event_count;
        ch += e->chunk_count;
    }
    if (ev != m->event_count || ch != m->chunk_count)
        return tt_fail(err, TT_E_COUNTS, 0, off,
                       "%s: thread table counts (%" PRIu64 " events, %" PRIu64 " chunks) differ "
                       "from the manifest (%" PRIu64 ", %" PRIu64 ")",
                       nm, ev, ch, m->event_count, m->chunk_count);

    off = m->objects_offset;
    rc = chunk_read_header(r, off, off + m->objects_length, TT_CHUNK_OBJECTS, &h, raw, err);
    if (rc != TT_OK)
        return rc;
    if (h.count != m->object_count || (uint64_t)h.body_len != m->objects_length - TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 24,
                       "%s: object table at offset %" PRIu64 " does not match the manifest", nm, off);
    rc = chunk_read_body(r, off, &h, raw, r->objects, err);
    if (rc != TT_OK)
        return rc;
    const uint8_t *p = r->objects, *end = r->objects + h.body_len;
    for (uint32_t i = 0; i < m->object_count; i++) {
        uint64_t len;
        if (p >= end || *p < 1 || *p > TT_OBJ_KIND_MAX)
            goto bad_obj;
        r->obj_off[i] = (uint32_t)(p - r->objects);
        const uint8_t *q = p + 1;
        if (tt_get_varint(&q, end, &len) != 0 || len > 65535 || len > (uint64_t)(end - q))
            goto bad_obj;
        p = q + len;
        continue;
    bad_obj:
        return tt_fail(err, TT_E_CORRUPT, 0, off + TT_CHUNK_HEADER + (uint64_t)(p - r->objects),
                       "%s: object %u at offset %" PRIu64 " is invalid", nm, i + 1,
                       off + TT_CHUNK_HEADER + (uint64_t)(p - r->objects));
    }
    if (p != end)
        return tt_fail(err, TT_E_CORRUPT, 0, off + TT_CHUNK_HEADER + (uint64_t)(p - r->objects),
                       "%s: object table has trailing bytes", nm);
    if (h.body_len > r->largest_chunk)
        r->largest_chunk = h.body_len;
    if (m->threads_length - TT_CHUNK_HEADER > r->largest_chunk)
        r->largest_chunk = m->threads_length - TT_CHUNK_HEADER;
    return TT_OK;
}

int tt_reader_open(const tt_source *src, const tt_reader_limits *lim, tt_cursor_mode mode,
                   void *storage, size_t storage_len, tt_reader **out, tt_error_info *err)
{
    tt_manifest m;
    tt_reader_capacity cap;
    tt_reader_limits dl;
    if (!lim) {
        tt_reader_limits_default(&dl);
        lim = &dl;
    }
    *out = NULL;
    int rc = tt_reader_probe(src, lim, mode, &m, &cap, err);
    if (rc != TT_OK)
        return rc;
    if (!storage || storage_len < cap.total)
        return tt_fail(err, TT_E_STORAGE, 0, UINT64_MAX,
                       "%s: reader storage of %zu bytes is smaller than the capacity %" PRIu64,
                       src->name, storage_len, cap.total);
    if ((uintptr_t)storage & 15)
        return tt_fail(err, TT_E_STORAGE, 0, UINT64_MAX, "reader storage is not 16-byte aligned");
    uint8_t *p = storage;
    tt_reader *r = (tt_reader *)(void *)p;
    memset(r, 0, sizeof *r);
    p += al16(sizeof *r);
    r->src = *src;
    if (src->mem && src->read == tt_source_mem_read_)
        r->src.ctx = &r->src;
    r->m = m;
    r->lim = *lim;
    r->mode = mode;
    r->ncursors = cap.cursors;
    r->chunk_cap = m.largest_chunk;
    r->split_cap = m.largest_split;
    r->threads = (tt_thread_entry *)(void *)p;
    p += al16((uint64_t)m.thread_count * sizeof(tt_thread_entry));
    r->ts = (struct thread_state *)(void *)p;
    memset(r->ts, 0, (uint64_t)m.thread_count * sizeof(struct thread_state));
    p += al16((uint64_t)m.thread_count * sizeof(struct thread_state));
    r->cursors = (struct tt_cursor *)(void *)p;
    p += al16((uint64_t)r->ncursors * sizeof(struct tt_cursor));
    r->objects = p;
    p += al16(m.objects_length);
    r->obj_off = (uint32_t *)(void *)p;
    p += al16((uint64_t)m.object_count * sizeof(uint32_t));
    r->cp_body = p;
    p += al16(m.checkpoints_length);
    r->cp_row = (uint64_t *)(void *)p;
    p += al16((uint64_t)m.checkpoint_count * 8);
    r->rest = (struct tt_restore_row *)(void *)p;
    p += al16((uint64_t)m.restore_count * sizeof(struct tt_restore_row));
    for (uint32_t i = 0; i < r->ncursors; i++) {
        struct tt_cursor *c = &r->cursors[i];
        memset(c, 0, sizeof *c);
        c->chunk = p;
        p += al16(m.largest_chunk);
        c->split = p;
        p += al16(m.largest_split);
        c->thread = mode == TT_CURSORS_PER_THREAD ? i : TT_NO_THREAD;
        c->next_off = m.data_offset;
    }
    rc = load_tables(r, err);
    if (rc == TT_OK)
        rc = tt_reader_load_checkpoints_(r, err);
    if (rc != TT_OK)
        return rc;
    *out = r;
    return TT_OK;
}

const tt_manifest *tt_reader_manifest(const tt_reader *r)
{
    return &r->m;
}

const tt_thread_entry *tt_reader_thread(const tt_reader *r, tt_thread_id id)
{
    return id < r->m.thread_count ? &r->threads[id] : NULL;
}

int tt_reader_object(const tt_reader *r, uint32_t id, tt_object_entry *out)
{
    if (id == 0 || id > r->m.object_count)
        return TT_E_INVAL;
    const uint8_t *p = r->objects + r->obj_off[id - 1], *q = p + 1;
    uint64_t len = 0;
    tt_get_varint(&q, r->objects + r->m.objects_length, &len);
    out->id = id;
    out->kind = p[0];
    out->name_len = (uint32_t)len;
    out->name = (const char *)q;
    return TT_OK;
}

uint32_t tt_reader_find_object(const tt_reader *r, uint8_t kind, const char *name)
{
    size_t n = strlen(name);
    for (uint32_t id = 1; id <= r->m.object_count; id++) {
        tt_object_entry e;
        tt_reader_object(r, id, &e);
        if (e.kind == kind && e.name_len == n && memcmp(e.name, name, n) == 0)
            return id;
    }
    return 0;
}

void tt_reader_close(tt_reader *r)
{
    (void)r; /* everything lives in the caller's storage */
}

/* ---------------------------------------------------------------- cursors */

static bool seq_mode(const struct tt_cursor *c)
{
    return c->thread == TT_NO_THREAD;
}

/* Finds the next event chunk for @c at or after *off (a per-thread cursor skips other threads'
 * chunks); reads its header. Returns TT_E_END when the data area ends. */
static int find_chunk(tt_reader *r, uint32_t thread, uint64_t *off, struct tt_chunk_header *h,
                      uint8_t raw[TT_CHUNK_HEADER], tt_error_info *err)
{
    while (*off < r->m.data_end) {
        int rc = chunk_read_header(r, *off, r->m.data_end, 0, h, raw, err);
        if (rc != TT_OK)
            return rc;
        if (h->type != TT_CHUNK_EVENTS) {
            /* index chunks: tt_index_check reads them; the sequential pass counts them */
            if (thread == TT_NO_THREAD) {
                /* the sequential pass (verify) checks their frame and checksum here, so a
                 * changed byte is named at its chunk; tt_index_check checks their contents */
                if (h->body_len > r->chunk_cap)
                    return tt_fail(err, TT_E_EXHAUSTED, 0, *off + 8,
                                   "%s: chunk at offset %" PRIu64 " claims %u bytes, more than "
                                   "the capacity of %" PRIu64, r->src.name, *off, h->body_len,
                                   r->chunk_cap);
                int brc = chunk_read_body(r, *off, h, raw, r->cursors[0].chunk, err);
                if (brc != TT_OK)
                    return brc;
                if (h->type == TT_CHUNK_CHECKPOINTS)
                    r->cp_chunks++; /* read at open; verify counts it apart from the index */
                else
                    r->index_chunks++;
                if (h->body_len > r->largest_chunk)
                    r->largest_chunk = h->body_len;
            }
        } else if (thread == TT_NO_THREAD || h->thread == thread) {
            return TT_OK;
        }
        *off += TT_CHUNK_HEADER + h->body_len;
    }
    return TT_E_END;
}

/* End of a cursor's stream: the last checks, which a sequential pass makes over everything. */
static int stream_end(tt_reader *r, struct tt_cursor *c, tt_error_info *err)
{
    const tt_manifest *m = &r->m;
    const char *nm = r->src.name;
    if (!seq_mode(c)) {
        const tt_thread_entry *e = &r->threads[c->thread];
        if (c->pending)
            return tt_fail(err, TT_E_TRUNCATED, 0, m->data_end,
                           "%s: thread %u ends inside a split payload", nm, c->thread);
        if (c->seq != e->event_count)
            return tt_fail(err, TT_E_COUNTS, 0, m->data_end,
                           "%s: thread %u has %" PRIu64 " events, the thread table says %" PRIu64,
                           nm, c->thread, c->seq, e->event_count);
        c->done = true;
        return TT_E_END;
    }
    for (uint32_t i = 0; i < m->thread_count; i++) {
        const struct thread_state *t = &r->ts[i];
        const tt_thread_entry *e = &r->threads[i];
        if (t->pending)
            return tt_fail(err, TT_E_TRUNCATED, 0, m->data_end,
                           "%s: thread %u ends inside a split payload", nm, i);
        if (t->seq != e->event_count || t->chunks != e->chunk_count)
            return tt_fail(err, TT_E_COUNTS, 0, m->threads_offset,
                           "%s: thread %u has %" PRIu64 " events in %" PRIu64 " chunks, the thread "
                           "table says %" PRIu64 " in %" PRIu64,
                           nm, i, t->seq, t->chunks, e->event_count, e->chunk_count);
        if (e->event_count && t->last_time != e->last_time)
            return tt_fail(err, TT_E_COUNTS, 0, m->threads_offset,
                           "%s: thread %u's last time differs from the thread table", nm, i);
    }
/* each mismatch names the manifest field that disagrees with the file */
#define CHECK_COUNT(field, have, what, where)                                                      \
    if ((have) != m->field)                                                                        \
        return tt_fail(err, TT_E_COUNTS, 0, where,                                                 \
                       "%s: the file holds %" PRIu64 " " what ", the manifest says %" PRIu64, nm,  \
                       (uint64_t)(have), (uint64_t)m->field);
    CHECK_COUNT(event_count, r->events, "events", TT_M_EVENTS)
    CHECK_COUNT(payload_bytes, r->payload, "payload bytes", TT_M_PAYLOAD)
    CHECK_COUNT(chunk_count, r->chunks, "event chunks", TT_M_CHUNKS)
    CHECK_COUNT(largest_chunk, r->largest_chunk, "bytes in its largest chunk", TT_M_LCHUNK)
    CHECK_COUNT(largest_event, r->largest_event, "bytes in its largest event", TT_M_LEVENT)
    CHECK_COUNT(largest_split, r->largest_split, "bytes in its largest split event", TT_M_LSPLIT)
#undef CHECK_COUNT
    if (r->evsum != m->events_checksum)
        return tt_fail(err, TT_E_CHECKSUM, 0, TT_M_EVSUM,
                       "%s: the events checksum %016" PRIx64 " differs from the manifest's %016"
                       PRIx64, nm, r->evsum, m->events_checksum);
    c->done = true;
    return TT_E_END;
}

/* Loads the next chunk of @c and checks how it continues the thread's stream. */
static int load_next(tt_reader *r, struct tt_cursor *c, tt_error_info *err)
{
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    const char *nm = r->src.name;
    for (;;) {
        int rc = find_chunk(r, c->thread, &c->next_off, &h, raw, err);
        if (rc == TT_E_END)
            return stream_end(r, c, err);
        if (rc != TT_OK)
            return rc;
        uint64_t off = c->next_off;
        rc = chunk_read_body(r, off, &h, raw, c->chunk, err);
        if (rc != TT_OK)
            return rc;
        c->next_off = off + TT_CHUNK_HEADER + h.body_len;
        c->chunk_off = off;
        c->h = h;

        /* where the thread stands, for either kind of cursor */
        uint64_t *seq = seq_mode(c) ? &r->ts[h.thread].seq : &c->seq;
        uint64_t pending = seq_mode(c) ? r->ts[h.thread].pending : c->pending;
        uint64_t last_time = r->ts[h.thread].last_time;
        if (h.first_seq != *seq)
            return tt_fail(err, TT_E_CORRUPT, 0, off + 16,
                           "%s: chunk at offset %" PRIu64 " of thread %u starts at sequence %" PRIu64
                           ", expected %" PRIu64, nm, off, h.thread, h.first_seq, *seq);
        if (pending ? (h.cont_len != (pending < h.body_len ? pending : h.body_len))
                    : (h.cont_len != 0))
            return tt_fail(err, TT_E_CORRUPT, 0, off + 28,
                           "%s: chunk at offset %" PRIu64 " continues %u payload bytes, expected %"
                           PRIu64, nm, off, h.cont_len, pending);
        pending -= h.cont_len;
        if (pending && (h.count || !(h.flags & TT_CF_CONT_OUT)))
            return tt_fail(err, TT_E_CORRUPT, 0, off + 6,
                           "%s: chunk at offset %" PRIu64 " ends a split payload too early", nm, off);
        if (!pending && h.count == 0 && !(h.flags & TT_CF_CONT_OUT) && h.cont_len == 0)
            return tt_fail(err, TT_E_CORRUPT, 0, off + 24, "%s: empty chunk at offset %" PRIu64,
                           nm, off);
        if (h.count == 0 && !pending && (h.flags & TT_CF_CONT_OUT))
            return tt_fail(err, TT_E_CORRUPT, 0, off + 6,
                           "%s: chunk at offset %" PRIu64 " continues a payload that ended", nm, off);
        if (h.count && h.base_time < last_time && seq_mode(c))
            return tt_fail(err, TT_E_CORRUPT, 0, off + 32,
                           "%s: chunk at offset %" PRIu64 " goes back in time", nm, off);
        if (seq_mode(c)) {
            struct thread_state *t = &r->ts[h.thread];
            t->pending = pending;
            t->chunks++;
            r->chunks++;
            if (h.body_len > r->largest_chunk)
                r->largest_chunk = h.body_len;
            uint8_t le[8];
            tt_put64(le, h.checksum);
            r->evsum = tt_hash64(le, 8, r->evsum);
        } else {
            c->pending = pending;
        }
        c->p = c->chunk + h.cont_len;
        c->end = c->chunk + h.body_len;
        c->left = h.count;
        c->prev_time = h.base_time;
        c->prev_fn = 0;
        c->prev_obj = c->prev_ord = 0;
        c->loaded = true;
        if (c->left)
            return TT_OK;
        if (c->p != c->end)
            return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: chunk at offset %" PRIu64
                           " has bytes after its last event", nm, off);
    }
}

/* Reads the rest of a split payload from the thread's following chunks into c->split. */
static int assemble_split(tt_reader *r, struct tt_cursor *c, uint64_t have, uint64_t len,
                          tt_error_info *err)
{
    uint64_t off = c->next_off;
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    while (have < len) {
        int rc = find_chunk(r, c->h.thread, &off, &h, raw, err);
        if (rc == TT_E_END)
            return tt_fail(err, TT_E_TRUNCATED, 0, r->m.data_end,
                           "%s: the split payload of thread %u ends early", r->src.name, c->h.thread);
        if (rc != TT_OK)
            return rc;
        uint64_t want = len - have < h.body_len ? len - have : h.body_len;
        if (h.cont_len != want || !(h.flags & TT_CF_CONT_IN))
            return tt_fail(err, TT_E_CORRUPT, 0, off + 28,
                           "%s: chunk at offset %" PRIu64 " continues %u bytes, expected %" PRIu64,
                           r->src.name, off, h.cont_len, want);
        rc = tt_src_read(&r->src, off + TT_CHUNK_HEADER, c->split + have, h.cont_len,
                         "a payload continuation", err);
        if (rc != TT_OK)
            return rc;
        have += h.cont_len;
        off += TT_CHUNK_HEADER + h.body_len;
    }
    return TT_OK;
}

/* Decodes the event at c->p into @ev without moving the cursor; the position after it goes to
 * c->pp and friends. */
static int decode(tt_reader *r, struct tt_cursor *c, tt_event *ev, tt_error_info *err)
{
    const uint8_t *p = c->p, *end = c->end;
    const char *nm = r->src.name;
    uint64_t at = c->chunk_off + TT_CHUNK_HEADER + (uint64_t)(p - c->chunk);
    uint64_t v, dt = 0;
    memset(ev, 0, sizeof *ev);
    if (p >= end)
        goto bad;
    uint8_t tag = *p++;
    bool short_tag = (tag & TT_TAG_SHORT) != 0;
    tag = tt_tag_full(tag, &dt);
    uint8_t kind = tag & TT_TAG_KIND;
    if (kind == 0 || kind > tt_tag_kind_max(r->m.version))
        goto bad;
    if ((!short_tag && tt_get_varint(&p, end, &dt) != 0) || dt > UINT64_MAX - c->prev_time)
        goto bad;
    uint32_t fn = c->prev_fn;
    if (!(tag & TT_TAG_FSAME)) {
        if (tt_get_varint(&p, end, &v) != 0 || v > UINT32_MAX)
            goto bad;
        fn = (uint32_t)v;
    }
    /* kind and dir in one 16-bit store: a caller's test of both, which the compiler makes one
     * 16-bit load (replay's stepped_over), is forwarded from it; behind two byte stores it
     * waited for both to reach the cache (a tenth of a replayed lock's time) */
    _Static_assert(offsetof(tt_event, dir) == offsetof(tt_event, kind) + 1, "kind, dir adjacent");
    const uint8_t kind_dir[2] = { kind == TT_TAG_SYNC_AGAIN ? TT_EV_SYNC : kind,
                                  (tag & TT_TAG_OUT) ? TT_IO_OUT : TT_IO_IN };
    memcpy(&ev->kind, kind_dir, sizeof kind_dir);
    ev->time = c->prev_time + dt;
    ev->sp.function = fn;
    ev->tp.thread = c->h.thread;
    ev->tp.seq = c->h.first_seq + (c->h.count - c->left);
    uint64_t sobj = c->prev_obj, sord = c->prev_ord;
    if (kind == TT_EV_ENTER || kind == TT_EV_EXIT) {
        if (tag & TT_TAG_OUT)
            goto bad;
    } else if (kind == TT_TAG_SYNC_AGAIN) {
        uint64_t site, step;
        if (tt_get_varint(&p, end, &site) != 0 || site > UINT32_MAX ||
            tt_get_varint(&p, end, &step) != 0)
            goto bad;
        ev->sp.site = (uint32_t)site;
        ev->arg = sobj;
        ev->addr = sord += tt_unzigzag(step);
    } else {
        uint64_t site, len;
        if (tt_get_varint(&p, end, &site) != 0 || site > UINT32_MAX ||
            tt_get_varint(&p, end, &ev->arg) != 0 || tt_get_varint(&p, end, &ev->addr) != 0 ||
            tt_get_varint(&p, end, &len) != 0)
            goto bad;
        if ((tag & TT_TAG_OUT) && !tt_out_allowed(kind))
            goto bad;
        if (len > r->m.largest_event)
            return tt_fail(err, TT_E_CORRUPT, 0, at,
                           "%s: event at offset %" PRIu64 " claims a %" PRIu64 "-byte payload, "
                           "larger than the manifest's largest event", nm, at, len);
        ev->sp.site = (uint32_t)site;
        ev->payload_len = len;
        if (kind == TT_EV_SYNC) {
            sobj = ev->arg;
            sord = ev->addr;
        }
        uint64_t avail = (uint64_t)(end - p);
        if (len <= avail) {
            ev->payload = len ? p : NULL;
            p += len;
        } else {
            if (c->left != 1 || !(c->h.flags & TT_CF_CONT_OUT) || len > r->split_cap)
                return tt_fail(err, TT_E_CORRUPT, 0, at,
                               "%s: event at offset %" PRIu64 " runs past its chunk", nm, at);
            memcpy(c->split, p, avail);
            p += avail;
            c->pavail = avail;
            int rc = assemble_split(r, c, avail, len, err);
            if (rc != TT_OK)
                return rc;
            ev->payload = c->split;
        }
    }
    if (c->left == 1 && p != end)
        return tt_fail(err, TT_E_CORRUPT, 0, at,
                       "%s: chunk at offset %" PRIu64 " has bytes after its last event", nm,
                       c->chunk_off);
    if (c->left == 1 && ev->payload != c->split && (c->h.flags & TT_CF_CONT_OUT))
        return tt_fail(err, TT_E_CORRUPT, 0, c->chunk_off + 6,
                       "%s: chunk at offset %" PRIu64 " says its last payload continues, but it "
                       "does not", nm, c->chunk_off);
    c->pp = p;
    c->pleft = c->left - 1;
    c->ptime = ev->time;
    c->pfn = fn;
    c->pobj = sobj;
    c->pord = sord;
    if (TT_UNLIKELY(r->nrest != 0))
        ev->tp.epoch = tt_reader_epoch_of_(r, c, ev);
    return TT_OK;
bad:
    return tt_fail(err, TT_E_CORRUPT, 0, at, "%s: malformed event at offset %" PRIu64, nm, at);
}

int tt_reader_peek_ref(tt_reader *r, uint32_t cursor, const tt_event **ev, tt_error_info *err)
{
    if (!r || cursor >= r->ncursors)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "no cursor %u", cursor);
    struct tt_cursor *c = &r->cursors[cursor];
    if (c->peeked) {
        *ev = &c->pev;
        return TT_OK;
    }
    if (c->done)
        return TT_E_END;
    if (!c->loaded || c->left == 0) {
        int rc = load_next(r, c, err);
        if (rc != TT_OK)
            return rc;
    }
    /* decoded in place: copying the event just written field by field would wait for those
     * stores (a fifth of a dump's reading time went there) */
    int rc = decode(r, c, &c->pev, err);
    if (rc != TT_OK)
        return rc;
    c->peeked = true;
    *ev = &c->pev;
    return TT_OK;
}

int tt_reader_peek(tt_reader *r, uint32_t cursor, tt_event *ev, tt_error_info *err)
{
    const tt_event *e;
    int rc = tt_reader_peek_ref(r, cursor, &e, err);
    if (rc == TT_OK)
        *ev = *e;
    return rc;
}

static void consume(tt_reader *r, struct tt_cursor *c, const tt_event *ev);

void tt_reader_advance(tt_reader *r, uint32_t cursor)
{
    struct tt_cursor *c = &r->cursors[cursor];
    if (!c->peeked)
        return;
    c->peeked = false;
    consume(r, c, &c->pev);
}

/* Moves @c past @ev, the event decode() just returned, and keeps the counts. */
static void consume(tt_reader *r, struct tt_cursor *c, const tt_event *ev)
{
    c->p = c->pp;
    c->left = c->pleft;
    c->prev_time = c->ptime;
    c->prev_fn = c->pfn;
    c->prev_obj = c->pobj;
    c->prev_ord = c->pord;
    bool split = ev->payload_len && ev->payload == c->split;
    if (seq_mode(c)) {
        struct thread_state *t = &r->ts[ev->tp.thread];
        t->seq++;
        t->last_time = ev->time;
        r->events++;
        r->payload += ev->payload_len;
        if (ev->payload_len > r->largest_event)
            r->largest_event = ev->payload_len;
        if (split) {
            /* the thread's next chunks open with the rest, which load_next skips */
            t->pending = ev->payload_len - c->pavail;
            if (ev->payload_len > r->largest_split)
                r->largest_split = ev->payload_len;
        }
    } else {
        c->seq++;
        r->ts[ev->tp.thread].last_time = ev->time;
        if (split)
            c->pending = ev->payload_len - c->pavail;
    }
}

int tt_reader_next(tt_reader *r, uint32_t cursor, tt_event *ev, tt_error_info *err)
{
    int rc = tt_reader_peek(r, cursor, ev, err);
    if (rc == TT_OK)
        tt_reader_advance(r, cursor);
    return rc;
}

uint64_t tt_reader_chunks_read_(const tt_reader *r)
{
    return r->chunks;
}

uint64_t tt_reader_index_chunks_(const tt_reader *r)
{
    return r->index_chunks;
}

uint64_t tt_reader_cp_chunks_(const tt_reader *r)
{
    return r->cp_chunks;
}

const tt_source *tt_reader_source_(const tt_reader *r)
{
    return &r->src;
}

int tt_reader_seek(tt_reader *r, uint32_t cursor, const tt_timepoint_entry *e, tt_error_info *err)
{
    if (!r || !e || cursor >= r->ncursors || r->mode != TT_CURSORS_PER_THREAD ||
        e->thread != cursor)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX,
                       "tt_reader_seek needs a per-thread cursor of the entry's thread");
    const char *nm = r->src.name;
    uint64_t off = e->chunk_offset;
    if (off < r->m.data_offset || off >= r->m.data_end)
        return tt_fail(err, TT_E_CORRUPT, 0, off,
                       "%s: seek entry points to offset %" PRIu64 ", outside the data area", nm,
                       off);
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    int rc = chunk_read_header(r, off, r->m.data_end, TT_CHUNK_EVENTS, &h, raw, err);
    if (rc != TT_OK)
        return rc;
    if (h.thread != e->thread || e->seq < h.first_seq || e->seq - h.first_seq >= h.count ||
        e->seq - h.first_seq != e->index)
        return tt_fail(err, TT_E_CORRUPT, 0, off,
                       "%s: seek entry (thread %u, seq %" PRIu64 ", index %u) does not match the "
                       "chunk at offset %" PRIu64 " (thread %u, events %" PRIu64 "..+%u)",
                       nm, e->thread, e->seq, e->index, off, h.thread, h.first_seq, h.count);
    struct tt_cursor *c = &r->cursors[cursor];
    struct tt_cursor saved = *c;
    c->next_off = off;
    c->seq = h.first_seq;
    c->pending = h.cont_len; /* whatever continues an earlier payload is skipped */
    c->loaded = false;
    c->done = false;
    c->peeked = false;
    c->left = 0;
    c->ep_next = 0;
    rc = load_next(r, c, err);
    for (uint32_t i = 0; rc == TT_OK && i < e->index; i++) {
        tt_event ev;
        rc = decode(r, c, &ev, err);
        if (rc == TT_OK)
            consume(r, c, &ev);
    }
    if (rc != TT_OK) {
        *c = saved;
        return rc == TT_E_END ? tt_fail(err, TT_E_CORRUPT, 0, off, "%s: seek past the end", nm)
                              : rc;
    }
    return TT_OK;
}

/* The steps above for the decoders outside this file (cursor.h). */
int tt_cursor_load_(tt_reader *r, struct tt_cursor *c, tt_error_info *err)
{
    return load_next(r, c, err);
}

int tt_cursor_decode_(tt_reader *r, struct tt_cursor *c, tt_event *ev, tt_error_info *err)
{
    return decode(r, c, ev, err);
}

void tt_cursor_consume_(tt_reader *r, struct tt_cursor *c, const tt_event *ev)
{
    consume(r, c, ev);
}
