/* SPDX-License-Identifier: MIT */
/* The checkpoint table and the epochs of a reader (FORMAT.md §15, version 4): the table read and
 * checked at open, the lookups of its rows, and every event's epoch from the restore rows.
 * Split from reader.c, which calls tt_reader_load_checkpoints_ at open and
 * tt_reader_epoch_of_ for each event it decodes (cursor.h). */
#include <inttypes.h>
#include <string.h>

#include "cursor.h"

/* The checkpoint table (version 4, FORMAT.md §15): read whole at open, since every event's
 * epoch depends on the restores. Each row is checked against the manifest and the thread
 * table here, so that the lookups below can decode it without failing. */
int tt_reader_load_checkpoints_(tt_reader *r, tt_error_info *err)
{
    const tt_manifest *m = &r->m;
    const char *nm = r->src.name;
    uint64_t off = m->checkpoints_offset;
    if (off == 0)
        return TT_OK;
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    int rc = tt_chunk_read_header(&r->src, off, off + m->checkpoints_length,
                                  TT_CHUNK_CHECKPOINTS, "chunk", &h, raw, err);
    if (rc != TT_OK)
        return rc;
    if ((uint64_t)h.body_len != m->checkpoints_length - TT_CHUNK_HEADER ||
        (uint64_t)h.count != (uint64_t)m->checkpoint_count + m->restore_count)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 24,
                       "%s: the checkpoint table at offset %" PRIu64 " does not match the manifest",
                       nm, off);
    rc = tt_chunk_read_body(&r->src, off, &h, raw, r->cp_body, "chunk", err);
    if (rc != TT_OK)
        return rc;
    r->cp_len = h.body_len;
    const uint8_t *body = r->cp_body, *p = body, *end = body + h.body_len;
    const uint64_t base = off + TT_CHUNK_HEADER;
    for (uint64_t i = 0; i < (uint64_t)m->checkpoint_count + m->restore_count; i++) {
        const uint8_t *q = p;
        bool cp = i < m->checkpoint_count;
        uint64_t th, seq, time, coff, idx, site, v = 0, len = 0, np = 0, sum = 0;
        bool ok = !tt_get_varint(&p, end, &th) && !tt_get_varint(&p, end, &seq) &&
                  !tt_get_varint(&p, end, &time) && !tt_get_varint(&p, end, &coff) &&
                  !tt_get_varint(&p, end, &idx) && !tt_get_varint(&p, end, &site) &&
                  th < m->thread_count && seq < r->threads[th].event_count &&
                  coff >= m->data_offset && coff < m->data_end && idx <= seq &&
                  idx <= UINT32_MAX && site <= UINT32_MAX;
        if (ok && cp) {
            ok = !tt_get_varint(&p, end, &len) && !tt_get_varint(&p, end, &np) &&
                 len <= m->largest_event && np <= (uint64_t)(end - p) / 2;
            for (uint64_t k = 0; ok && k < np; k++) {
                uint64_t id, sl;
                ok = !tt_get_varint(&p, end, &id) && !tt_get_varint(&p, end, &sl) &&
                     id <= UINT32_MAX && sl <= len && 12 + sl <= len - sum;
                sum += ok ? 12 + sl : 0;
            }
            ok = ok && sum == len;
        } else if (ok) {
            ok = !tt_get_varint(&p, end, &v) && v < m->checkpoint_count;
        }
        if (ok && !cp) {
            /* restores in recorded order: epoch k begins at the k-th of them (FORMAT.md §15) */
            uint32_t k = (uint32_t)(i - m->checkpoint_count);
            const struct tt_restore_row *pr = k ? &r->rest[k - 1] : NULL;
            ok = !pr || time > pr->time ||
                 (time == pr->time && (th > pr->thread || (th == pr->thread && seq > pr->seq)));
            r->rest[k] = (struct tt_restore_row){ .time = time, .seq = seq, .chunk_offset = coff,
                                                  .checkpoint = v, .thread = (uint32_t)th,
                                                  .index = (uint32_t)idx, .site = (uint32_t)site };
        } else if (ok) {
            r->cp_row[i] = (uint64_t)(q - body);
        }
        if (!ok)
            return tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(q - body),
                           "%s: %s row %" PRIu64 " of the checkpoint table at offset %" PRIu64
                           " is invalid", nm, cp ? "checkpoint" : "restore",
                           cp ? i : i - m->checkpoint_count, base + (uint64_t)(q - body));
    }
    if (p != end)
        return tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(p - body),
                       "%s: the checkpoint table has trailing bytes", nm);
    r->ncp = m->checkpoint_count;
    r->nrest = m->restore_count;
    return TT_OK;
}

/* ---------------------------------------------------------------- epochs
 * An event's epoch is the number of restores at or before it in the recorded order (time,
 * thread, seq): the restore rows are in that order, so it is the index of the first row after
 * the event. A cursor's events come in its thread's order, so the row it stopped at last is
 * where the next search starts; anything else (the sequential cursor moving between threads,
 * a seek) is a binary search. */

static inline bool before_row(uint64_t time, uint32_t thread, uint64_t seq,
                              const struct tt_restore_row *rr)
{
    return time < rr->time ||
           (time == rr->time && (thread < rr->thread || (thread == rr->thread && seq < rr->seq)));
}

static uint32_t epoch_search(const tt_reader *r, uint64_t time, uint32_t thread, uint64_t seq)
{
    uint32_t lo = 0, hi = r->nrest; /* the first row the event is before */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (before_row(time, thread, seq, &r->rest[mid]))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

uint32_t tt_reader_epoch_of_(const tt_reader *r, struct tt_cursor *c, const tt_event *ev)
{
    uint32_t i = c->ep_next;
    const uint64_t t = ev->time, q = ev->tp.seq;
    const uint32_t th = ev->tp.thread, n = r->nrest;
    if (i > n || (i > 0 && before_row(t, th, q, &r->rest[i - 1])))
        i = epoch_search(r, t, th, q); /* before where the cursor was */
    else if (i < n && !before_row(t, th, q, &r->rest[i]))
        i = i + 1 == n || before_row(t, th, q, &r->rest[i + 1]) ? i + 1 /* past one restore */
                                                                : epoch_search(r, t, th, q);
    c->ep_next = i;
    return i;
}

uint32_t tt_reader_epoch_at(const tt_reader *r, uint64_t time, tt_thread_id thread, uint64_t seq)
{
    return r && r->nrest ? epoch_search(r, time, thread, seq) : 0;
}

/* ---------------------------------------------------------------- the checkpoint table */

uint64_t tt_reader_checkpoint_count(const tt_reader *r)
{
    return r ? r->ncp : 0;
}

uint32_t tt_reader_restore_count(const tt_reader *r)
{
    return r ? r->nrest : 0;
}

/* Row @n's fields up to its provider count (checked at open: nothing here can fail); *@pp is
 * left at its first provider. */
static void cp_row_decode(const tt_reader *r, uint64_t n, tt_checkpoint_entry *e,
                          const uint8_t **pp)
{
    const uint8_t *p = r->cp_body + r->cp_row[n], *end = r->cp_body + r->cp_len;
    uint64_t v[9];
    for (int k = 0; k < 8; k++)
        tt_get_varint(&p, end, &v[k]);
    memset(e, 0, sizeof *e);
    e->number = n;
    e->tp.thread = (uint32_t)v[0];
    e->tp.seq = v[1];
    e->time = v[2];
    e->chunk_offset = v[3];
    e->index = (uint32_t)v[4];
    e->site = (uint32_t)v[5];
    e->length = v[6];
    e->providers = (uint32_t)v[7];
    e->tp.epoch = epoch_search(r, e->time, e->tp.thread, e->tp.seq);
    *pp = p;
}

int tt_reader_checkpoint(const tt_reader *r, uint64_t n, tt_checkpoint_entry *out)
{
    if (!r || !out || n >= r->ncp)
        return TT_E_INVAL;
    const uint8_t *p;
    cp_row_decode(r, n, out, &p);
    return TT_OK;
}

int tt_reader_checkpoint_provider(const tt_reader *r, uint64_t n, uint32_t i, uint32_t *id,
                                  uint64_t *state_len)
{
    tt_checkpoint_entry e;
    const uint8_t *p, *end;
    if (!r || n >= r->ncp)
        return TT_E_INVAL;
    cp_row_decode(r, n, &e, &p);
    if (i >= e.providers)
        return TT_E_INVAL;
    end = r->cp_body + r->cp_len;
    uint64_t v = 0, l = 0;
    for (uint32_t k = 0; k <= i; k++) {
        tt_get_varint(&p, end, &v);
        tt_get_varint(&p, end, &l);
    }
    if (id)
        *id = (uint32_t)v;
    if (state_len)
        *state_len = l;
    return TT_OK;
}

int tt_reader_restore(const tt_reader *r, uint32_t epoch, tt_restore_entry *out)
{
    if (!r || !out || epoch == 0 || epoch > r->nrest)
        return TT_E_INVAL;
    const struct tt_restore_row *rr = &r->rest[epoch - 1];
    memset(out, 0, sizeof *out);
    out->epoch = epoch;
    out->tp.thread = rr->thread;
    out->tp.epoch = epoch;
    out->tp.seq = rr->seq;
    out->time = rr->time;
    out->chunk_offset = rr->chunk_offset;
    out->index = rr->index;
    out->site = rr->site;
    out->checkpoint = rr->checkpoint;
    return TT_OK;
}

