/* SPDX-License-Identifier: MIT */
/* Frame blocks: read on demand, checked, decoded into rows in a small cache, and the call-tree
 * queries on them (tt_index_frame, tt_index_parent). The row encoding is FORMAT.md §14.3; the
 * writer is record/tables.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index-int.h"

/* Reads block @b of @thread into @s->body (header checked against the directory, checksum
 * checked); *@h and *@at get its header and offset. */
static int read_block(tt_index *ix, struct slot *s, uint32_t thread, uint64_t b,
                      struct tt_chunk_header *hp, uint64_t *at, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    struct ithread *t = &ix->threads[thread];
    uint64_t off, low;
    int brc = tt_ix_block_at(ix, thread, b, &off, &low, err);
    if (brc != TT_OK)
        return brc;
    uint64_t first = b * ix->block_rows;
    uint64_t rows = t->info.frames - first < ix->block_rows ? t->info.frames - first : ix->block_rows;
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    *at = off;
    /* one read for the header and, usually, the whole body: a block of a loop is well under
     * BLOCK_READ bytes, and a read per block is most of what a full check costs */
    if (!s->body && !(s->body = tt_ix_malloc(ix, BLOCK_READ)))
        return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total)", nm);
    s->body_cap = s->body_cap < BLOCK_READ ? BLOCK_READ : s->body_cap;
    uint64_t ahead = m->data_end > off ? m->data_end - off : 0;
    size_t first_read = ahead < BLOCK_READ ? (size_t)ahead : BLOCK_READ;
    if (first_read < TT_CHUNK_HEADER)
        first_read = TT_CHUNK_HEADER; /* rd reports the cut */
    int rc = tt_ix_rd(ix, off, s->body, first_read, err, "a frame block");
    if (rc != TT_OK)
        return rc;
    memcpy(raw, s->body, sizeof raw);
    rc = tt_chunk_header_check(ix->src, raw, off, m->data_end, TT_CHUNK_FRAMES, "frame block", &h,
                               err);
    if (rc != TT_OK)
        return rc;
    if (h.thread != thread || h.first_seq != first || h.count != rows ||
        h.body_len > m->largest_chunk)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame block at offset %" PRIu64 " (type %u,"
                       " thread %u, frames %" PRIu64 "..+%u, %u bytes) is not block %" PRIu64
                       " of thread %u", nm, off, h.type, h.thread, h.first_seq, h.count,
                       h.body_len, b, thread);
    if (!s->rows && !(s->rows = tt_ix_malloc(ix, ix->block_rows * sizeof *s->rows)))
        return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total)", nm);
    if (TT_CHUNK_HEADER + (size_t)h.body_len <= first_read) {
        memmove(s->body, s->body + TT_CHUNK_HEADER, h.body_len);
    } else {
        if (h.body_len > s->body_cap) {
            uint8_t *nb = tt_ix_realloc(ix, s->body, h.body_len);
            if (!nb)
                return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total)", nm);
            s->body = nb;
            s->body_cap = h.body_len;
        }
        rc = tt_ix_rd(ix, off + TT_CHUNK_HEADER, s->body, h.body_len, err, "a frame block");
        if (rc != TT_OK)
            return rc;
    }
    if ((rc = tt_chunk_body_check(ix->src, raw, off, &h, s->body, "frame block", err)) != TT_OK)
        return rc;
    *hp = h;
    return TT_OK;
}

/* Block @b of @thread, read, checked and decoded into @s's rows (FORMAT.md §14.3). Every row is
 * checked as it is decoded: a varint that ends inside the block, counts and times that cannot
 * overflow, a depth within the thread's, a chunk inside the data area. */
static int decode_block(tt_index *ix, struct slot *s, uint32_t thread, uint64_t b,
                        tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    struct ithread *t = &ix->threads[thread];
    struct tt_chunk_header h = { 0 };
    uint64_t off = 0;
    s->block = UINT64_MAX;
    int rc = read_block(ix, s, thread, b, &h, &off, err);
    if (rc != TT_OK)
        return rc;
    uint64_t first = b * ix->block_rows, rows = h.count;
    const uint8_t *body = s->body, *p = body, *end = body + h.body_len;
    uint64_t base = off + TT_CHUNK_HEADER;
    uint64_t prev_end = h.base_time, prev_chunk = 0, prev_fn = 0, prev_depth = 0;
    uint64_t run = 0; /* rows left in a run of repeated leaves */
    const bool v4 = m->version >= 4; /* parent rows; runs of at most 63 */
    const unsigned run_max = v4 ? TT_ROW_RUN_MAX : TT_ROW_RUN_MAX_V3;
    for (uint64_t i = 0; i < rows; i++) {
        struct drow *d = &s->rows[i];
        uint64_t idx = first + i, fn = prev_fn, depth = prev_depth, dend, dc = 0;
        const uint8_t *q = p;
        BAD(p >= end, "%s: frame block at offset %" PRIu64 " ends inside its rows", nm, off);
        if (!run && v4 && (*p & TT_ROW_PARENT) == TT_ROW_PARENT) {
            /* a parent row: its kids are the rows before it in this block, the last one just
             * before it; depth, descendants and start follow from theirs */
            uint8_t fl = *p++;
            uint64_t kids = fl & TT_ROW_PARENT_KIDS, lead, desc = 0, c = i;
            if (!(fl & TT_ROW_PARENT_SAME_FN))
                GETV(fn, "a frame's function");
            GETV(dend, "a frame's end");
            GETV(lead, "a frame's start");
            bool bad = kids == 0 || i == 0 || prev_depth == 0 || fn > UINT32_MAX ||
                       dend > UINT64_MAX - prev_end;
            for (uint64_t k = 0; k < kids && !bad; k++) {
                /* the next child back: the row before the previous child's subtree */
                uint64_t back = k ? s->rows[c].desc + 1 : 1;
                bad = back > c;
                if (!bad) {
                    c -= back;
                    desc += s->rows[c].desc + 1;
                    bad = s->rows[c].depth != prev_depth;
                }
            }
            bad = bad || lead > s->rows[c].start || desc > idx;
            if (!bad) {
                d->start = s->rows[c].start - lead;
                bad = d->start > prev_end + dend;
            }
            if (bad) {
                p = q;
                BAD(1, "%s: frame %" PRIu64 " of thread %u at offset %" PRIu64 " is invalid", nm,
                    idx, thread, base + (uint64_t)(q - body));
            }
            prev_end += dend;
            d->dur = prev_end - d->start;
            d->fn = (uint32_t)fn;
            d->depth = (uint32_t)(prev_depth - 1);
            d->outcome = TT_FRAME_RETURNED;
            d->desc = desc;
            d->nch = kids;
            d->chunk_off = prev_chunk;
            prev_fn = fn;
            prev_depth = d->depth;
            continue;
        }
        if (!run && (*p & TT_ROW_RUN)) {
            run = *p & run_max;
            BAD(run == 0 || i == 0 || run > rows - i, "%s: frame %" PRIu64 " of thread %u at "
                "offset %" PRIu64 " opens a run of %" PRIu64 " repeated rows that cannot be", nm,
                idx, thread, base + (uint64_t)(q - body), run);
            p++;
        }
        if (run) {
            /* the previous row's function, depth and chunk; a returned leaf after it */
            run--;
            GETV(dend, "a frame's start");
            GETV(d->dur, "a frame's duration");
            if (dend > UINT64_MAX - prev_end || d->dur > UINT64_MAX - prev_end - dend) {
                p = q;
                BAD(1, "%s: frame %" PRIu64 " of thread %u at offset %" PRIu64 " is invalid", nm,
                    idx, thread, base + (uint64_t)(q - body));
            }
            d->fn = (uint32_t)prev_fn;
            d->depth = (uint32_t)prev_depth;
            d->outcome = TT_FRAME_RETURNED;
            d->desc = 0;
            d->nch = 0;
            d->start = prev_end + dend;
            prev_end = d->start + d->dur;
            d->chunk_off = prev_chunk;
            continue;
        }
        uint8_t fl = *p++;
        if (!(fl & TT_ROW_SAME_FN))
            GETV(fn, "a frame's function");
        if (!(fl & TT_ROW_SAME_DEPTH))
            GETV(depth, "a frame's depth");
        d->desc = 0;
        d->nch = 0;
        if (!(fl & TT_ROW_LEAF)) {
            GETV(d->desc, "a frame's descendant count");
            GETV(d->nch, "a frame's children count");
        }
        GETV(dend, (fl & TT_ROW_GAP) ? "a frame's start" : "a frame's end");
        GETV(d->dur, "a frame's duration");
        if (!(fl & TT_ROW_SAME_CHUNK))
            GETV(dc, "a frame's chunk");
        uint64_t chunk = prev_chunk + ((dc >> 1) ^ (0 - (dc & 1)));
        unsigned oc = (fl >> TT_ROW_OUTCOME_SHIFT) & 3;
        if (fn > UINT32_MAX || depth > t->info.max_depth || d->desc > idx ||
            dend > UINT64_MAX - prev_end ||
            ((fl & TT_ROW_GAP) ? d->dur > UINT64_MAX - prev_end - dend || i == 0
                               : d->dur > prev_end + dend) ||
            d->nch > d->desc || (!(fl & TT_ROW_LEAF) && (d->desc == 0 || d->nch == 0)) ||
            (i == 0 && dend != 0) || chunk < m->data_offset || chunk >= m->data_end) {
            p = q;
            BAD(1, "%s: frame %" PRIu64 " of thread %u at offset %" PRIu64 " is invalid", nm, idx,
                thread, base + (uint64_t)(q - body));
        }
        d->fn = (uint32_t)fn;
        d->depth = (uint32_t)depth;
        d->outcome = oc;
        prev_fn = fn;
        prev_depth = depth;
        if (fl & TT_ROW_GAP) {
            d->start = prev_end + dend;
            prev_end = d->start + d->dur;
        } else {
            prev_end += dend;
            d->start = prev_end - d->dur;
        }
        d->chunk_off = chunk;
        prev_chunk = chunk;
    }
    BAD(p != end, "%s: frame block at offset %" PRIu64 " has trailing bytes", nm, off);
    s->thread = thread;
    s->block = b;
    s->nrows = (uint32_t)rows;
    return TT_OK;
}

int tt_ix_get_block(tt_index *ix, uint32_t thread, uint64_t b, struct slot **out,
                     tt_error_info *err)
{
    struct slot *s = &ix->cache[(b * 7 + thread) % CACHE_SLOTS];
    if (s->block != b || s->thread != thread) {
        int rc = decode_block(ix, s, thread, b, err);
        if (rc != TT_OK)
            return rc;
    }
    *out = s;
    return TT_OK;
}

int tt_index_frame(tt_index *ix, tt_thread_id thread, uint64_t index, tt_frame *out,
                   tt_error_info *err)
{
    if (!ix || thread >= ix->nthreads || index >= ix->threads[thread].info.frames)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "no frame %" PRIu64 " in thread %u", index,
                       thread);
    struct slot *s;
    int rc = tt_ix_get_block(ix, thread, index / ix->block_rows, &s, err);
    if (rc != TT_OK)
        return rc;
    const struct drow *d = &s->rows[index % ix->block_rows];
    out->index = index;
    out->thread = thread;
    out->function = d->fn;
    out->depth = d->depth;
    out->outcome = d->outcome;
    out->desc = d->desc;
    out->start = d->start;
    out->duration = d->dur;
    out->child_count = d->nch;
    out->chunk_offset = d->chunk_off;
    return TT_OK;
}

int tt_index_parent(tt_index *ix, tt_thread_id thread, uint64_t index, uint64_t *parent,
                    tt_error_info *err)
{
    if (!ix || thread >= ix->nthreads || index >= ix->threads[thread].info.frames)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "no frame %" PRIu64 " in thread %u", index,
                       thread);
    const struct ithread *t = &ix->threads[thread];
    int rc;
    /* every frame between a child and its parent lies in a later sibling's subtree, which
     * starts after the child: the parent is the first later frame whose subtree reaches it.
     * A block (and a whole block list) whose subtrees all start after @index is skipped. */
    const uint64_t b0 = index / ix->block_rows;
    for (uint64_t b = b0; b < t->nblocks; b++) {
        uint64_t off, low;
        if (b != b0) {
            /* every list but the last holds TT_BLOCK_LIST blocks (checked at open) */
            const uint64_t *l = &t->lists[LIST_W * (b / TT_BLOCK_LIST)];
            if (b == l[1] && l[4] > index) {
                b += l[2] - 1;
                continue;
            }
            if ((rc = tt_ix_block_at(ix, thread, b, &off, &low, err)) != TT_OK)
                return rc;
            if (low > index)
                continue;
        }
        struct slot *s;
        rc = tt_ix_get_block(ix, thread, b, &s, err);
        if (rc != TT_OK)
            return rc;
        uint64_t first = b * ix->block_rows;
        for (uint64_t i = index >= first ? index - first + 1 : 0; i < s->nrows; i++)
            if (first + i - s->rows[i].desc <= index) {
                *parent = first + i;
                return TT_OK;
            }
    }
    *parent = TT_FRAME_NONE;
    return TT_OK;
}

/* @thread's seek entries (*@n of them, in seq order), the seek index read first if need be. */
