/* SPDX-License-Identifier: MIT */
/* The index reader: the directory, the summary and the seek index in memory, frame blocks read
 * on demand into a small cache (tinytrace/index.h; the format is docs/FORMAT.md §14).
 *
 * Nothing read from the file is used before it is checked: the directory's size against the
 * caller's max_table before it is read; every count against what the manifest and the thread
 * table allow (a block is at least a chunk header, so no thread can claim more blocks than the
 * data area holds; seek entries are exactly ⌈events / K⌉ per thread); every offset against the
 * data area; every frame-block header against the directory (thread, first frame, row count)
 * before its body is read into a buffer sized by the manifest's largest chunk.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index-int.h"


void *tt_ix_realloc(tt_index *ix, void *p, size_t n)
{
    struct ahdr *h = p ? (struct ahdr *)p - 1 : NULL;
    uint64_t old = h ? h->size : 0;
    if (n > ix->max_total || ix->used - old > ix->max_total - n)
        return NULL;
    struct ahdr *nh = realloc(h, sizeof *nh + (n ? n : 1));
    if (!nh)
        return NULL;
    nh->size = n;
    ix->used = ix->used - old + n;
    if (ix->used > ix->peak)
        ix->peak = ix->used;
    return nh + 1;
}

void *tt_ix_malloc(tt_index *ix, size_t n)
{
    return tt_ix_realloc(ix, NULL, n);
}

void *tt_ix_calloc(tt_index *ix, size_t n, size_t k)
{
    if (k && n > SIZE_MAX / k)
        return NULL;
    void *p = tt_ix_malloc(ix, n * k);
    if (p)
        memset(p, 0, n * k);
    return p;
}

void tt_ix_free(tt_index *ix, void *p)
{
    if (!p)
        return;
    struct ahdr *h = (struct ahdr *)p - 1;
    ix->used -= h->size;
    free(h);
}
int tt_ix_rd(tt_index *ix, uint64_t off, void *dst, size_t len, tt_error_info *err,
             const char *what)
{
    return tt_src_read(ix->src, off, dst, len, what, err);
}

int tt_ix_read_chunk(tt_index *ix, uint64_t off, uint64_t end, uint16_t type,
                     struct tt_chunk_header *h, uint8_t **body, uint64_t max_body,
                     tt_error_info *err, const char *what)
{
    const char *nm = ix->src->name;
    uint8_t raw[TT_CHUNK_HEADER];
    *body = NULL;
    if (off < TT_MANIFEST_SIZE)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: %s at offset %" PRIu64 " is inside the "
                       "manifest", nm, what, off);
    int rc = tt_chunk_read_header(ix->src, off, end, type, what, h, raw, err);
    if (rc != TT_OK)
        return rc;
    if (h->body_len > max_body)
        return tt_fail(err, TT_E_CAPACITY, 0, off + 8, "%s: %s at offset %" PRIu64 " claims %u "
                       "bytes, more than the limit of %" PRIu64, nm, what, off, h->body_len,
                       max_body);
    *body = tt_ix_malloc(ix, h->body_len ? h->body_len : 1);
    if (!*body)
        return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total) for %s", nm, what);
    rc = tt_chunk_read_body(ix->src, off, h, raw, *body, what, err);
    if (rc != TT_OK) {
        tt_ix_free(ix, *body);
        *body = NULL;
    }
    return rc;
}


/* Reads and checks the block list at @off: blocks @first..+@n of @thread, the one before the
 * first at offset *@prev (updated to the last). Each block goes to @out as (offset, lowest
 * subtree start) unless @out is NULL; *@lowest gets the lowest start of them all. */
static int load_block_list(tt_index *ix, uint32_t thread, uint64_t *out, uint64_t *prev,
                           uint64_t *lowest, uint64_t off, uint64_t first, uint64_t n,
                           tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    struct tt_chunk_header h;
    uint8_t *body;
    int rc = tt_ix_read_chunk(ix, off, m->data_end, TT_CHUNK_BLOCKS, &h, &body, m->largest_chunk, err,
                        "a frame block list");
    if (rc != TT_OK)
        return rc;
    uint64_t base = off + TT_CHUNK_HEADER, boff = 0, v, back;
    const uint8_t *p = body, *end = body + h.body_len;
    if (h.thread != thread || h.first_seq != first || h.count != n) {
        tt_ix_free(ix, body);
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: block list at offset %" PRIu64 " (thread %u,"
                       " blocks %" PRIu64 "..+%u) is not the directory's (thread %u, blocks %"
                       PRIu64 "..+%" PRIu64 ")", nm, off, h.thread, h.first_seq, h.count, thread,
                       first, n);
    }
    *lowest = UINT64_MAX;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t b = first + k;
        const uint8_t *q = p;
        if (tt_get_varint(&p, end, &v) || tt_get_varint(&p, end, &back) || v > m->data_end ||
            boff + v < m->data_offset || boff + v > m->data_end - TT_CHUNK_HEADER ||
            (k && v == 0) || (b && boff + v <= *prev) ||
            back > b * ix->block_rows) {
            tt_ix_free(ix, body);
            return tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(q - body), "%s: block %" PRIu64
                           " of thread %u (list at offset %" PRIu64 ") is outside the data area "
                           "or out of order", nm, b, thread, off);
        }
        boff += v;
        *prev = boff;
        const uint64_t low = b * ix->block_rows - back;
        if (low < *lowest)
            *lowest = low;
        if (out) {
            out[2 * k] = boff;
            out[2 * k + 1] = low;
        }
    }
    rc = p == end ? TT_OK
                  : tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(p - body),
                            "%s: block list at offset %" PRIu64 " has trailing bytes", nm, off);
    tt_ix_free(ix, body);
    return rc;
}

/* One thread's entry of the directory at *@pp (FORMAT.md §14.9): its counts, checked against the
 * thread table, and its block lists, each read and checked. @used and @all_blocks add up what
 * the entries so far need. */
static int parse_thread(tt_index *ix, uint32_t i, const uint8_t **pp, const uint8_t *body,
                        const uint8_t *end, uint64_t base, uint64_t max_blocks,
                        uint64_t *all_blocks, uint64_t *used, const tt_reader_limits *lim,
                        tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    const uint8_t *p = *pp;
    uint64_t v;
    struct ithread *t = &ix->threads[i];
    const tt_thread_entry *te = tt_reader_thread(ix->r, i);
    uint64_t crashed, depth;
    GETV(t->info.frames, "a thread's frame count");
    GETV(t->info.children, "a thread's children count");
    GETV(depth, "a thread's depth");
    GETV(crashed, "a thread's crash flag");
    GETV(t->nblocks, "a thread's block count");
    BAD(t->info.frames > te->event_count || t->info.children >= t->info.frames + !t->info.frames ||
        depth > t->info.frames || depth > UINT32_MAX || crashed > 1 ||
        t->nblocks != ceil_div(t->info.frames, ix->block_rows),
        "%s: directory entry of thread %u is inconsistent (%" PRIu64 " frames, %" PRIu64
        " children, %" PRIu64 " blocks, %" PRIu64 " events)", nm, i, t->info.frames,
        t->info.children, t->nblocks, te->event_count);
    t->info.max_depth = (uint32_t)depth;
    t->info.crashed = (uint32_t)crashed;
    uint64_t kinds = 0;
    /* 13 kinds up to version 2, 14 from version 3 */
    const unsigned nkinds = tt_kind_max(tt_reader_manifest(ix->r)->version);
    for (unsigned k = 1; k <= nkinds; k++) {
        GETV(t->info.kinds[k], "a kind count");
        BAD(t->info.kinds[k] > te->event_count - kinds,
            "%s: kind counts of thread %u exceed its %" PRIu64 " events", nm, i, te->event_count);
        kinds += t->info.kinds[k];
    }
    BAD(kinds != te->event_count, "%s: kind counts of thread %u add up to %" PRIu64 ", the "
        "thread table says %" PRIu64 " events", nm, i, kinds, te->event_count);
    BAD(crashed != (uint64_t)(t->info.kinds[TT_EV_CRASH] != 0), "%s: directory entry of "
        "thread %u says crashed = %" PRIu64 " with %" PRIu64 " crash events", nm, i, crashed,
        t->info.kinds[TT_EV_CRASH]);
    *all_blocks += t->nblocks;
    BAD(*all_blocks > max_blocks, "%s: the directory lists more frame blocks than the data "
        "area can hold", nm);
    *used += t->nblocks * 16;
    if (*used > lim->max_total)
        return tt_fail(err, TT_E_CAPACITY, 0, base, "%s: the index directory needs more "
                       "than max_total (%" PRIu64 " bytes)", nm, lim->max_total);
    /* the block offsets, in BLOCKS chunks of the data area that the directory lists: each
     * list is read and checked here, one at a time, and read again when a lookup needs a
     * block it holds (block_at); one list per thread is in memory at a time */
    uint64_t nlists, loff = 0, b = 0, prev = 0;
    GETV(nlists, "a thread's block list count");
    BAD(nlists > t->nblocks, "%s: thread %u has %" PRIu64 " block lists for %" PRIu64
        " blocks", nm, i, nlists, t->nblocks);
    t->lists = tt_ix_malloc(ix, nlists ? nlists * LIST_W * 8 : 1);
    if (!t->lists)
        return tt_fail(err, TT_E_NOMEM, 0, base, "%s: out of memory (or over max_total)", nm);
    t->nlists = nlists;
    for (uint64_t l = 0; l < nlists; l++) {
        uint64_t n;
        GETV(v, "a block list offset");
        GETV(n, "a block list count");
        /* FORMAT.md §14.9: TT_BLOCK_LIST blocks a list, fewer only in the thread's last;
         * so a lookup's window is at most TT_BLOCK_LIST * 16 bytes */
        BAD(v > m->data_end || loff + v < m->data_offset ||
            loff + v > m->data_end - TT_CHUNK_HEADER || (l && v == 0) || n == 0 ||
            n > t->nblocks - b || n > TT_BLOCK_LIST ||
            (l + 1 < nlists && n != TT_BLOCK_LIST),
            "%s: block list %" PRIu64 " of thread %u (offset %" PRIu64 ", %" PRIu64
            " blocks) is invalid", nm, l, i, loff + v, n);
        loff += v;
        uint64_t *e = &t->lists[LIST_W * l];
        e[0] = loff;
        e[1] = b;
        e[2] = n;
        e[3] = prev;
        int rc = load_block_list(ix, i, NULL, &prev, &e[4], loff, b, n, err);
        if (rc != TT_OK)
            return rc;
        b += n;
    }
    BAD(b != t->nblocks, "%s: the block lists of thread %u hold %" PRIu64 " blocks, not %"
        PRIu64, nm, i, b, t->nblocks);
    ix->nlists += nlists;
    *pp = p;
    return TT_OK;
}

/* The directory's seek batches at *@pp: their count, offsets and entry counts. */
static int parse_seek_batches(tt_index *ix, const uint8_t **pp, const uint8_t *body,
                              const uint8_t *end, uint64_t base, uint64_t max_blocks,
                              uint64_t used, const tt_reader_limits *lim, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    const uint8_t *p = *pp;
    uint64_t v;
    GETV(ix->nseek_batches, "the seek batch count");
    BAD(ix->nseek_batches > max_blocks || ix->nseek_batches > ix->nseek,
        "%s: %" PRIu64 " seek batches cannot be", nm, ix->nseek_batches);
    used += ix->nseek_batches * 16 + ix->nseek * sizeof(tt_timepoint_entry);
    if (used > lim->max_total)
        return tt_fail(err, TT_E_CAPACITY, 0, base, "%s: the index needs more than max_total "
                       "(%" PRIu64 " bytes)", nm, lim->max_total);
    ix->seek_batches = tt_ix_malloc(ix, ix->nseek_batches ? ix->nseek_batches * 16 : 1);
    if (!ix->seek_batches)
        return tt_fail(err, TT_E_NOMEM, 0, base, "%s: out of memory (or over max_total)", nm);
    uint64_t off = 0, total = 0;
    for (uint64_t b = 0; b < ix->nseek_batches; b++) {
        uint64_t n;
        GETV(v, "a seek batch offset");
        GETV(n, "a seek batch count");
        BAD(v > m->data_end || off + v < m->data_offset || off + v > m->data_end - TT_CHUNK_HEADER ||
            (b && v == 0) || n == 0 || n > ix->nseek - total,
            "%s: seek batch %" PRIu64 " (offset %" PRIu64 ", %" PRIu64 " entries) is invalid", nm,
            b, off + v, n);
        off += v;
        total += n;
        ix->seek_batches[2 * b] = off;
        ix->seek_batches[2 * b + 1] = n;
    }
    BAD(total != ix->nseek, "%s: seek batches hold %" PRIu64 " entries, not %" PRIu64, nm, total,
        ix->nseek);
    *pp = p;
    return TT_OK;
}

static int parse_directory(tt_index *ix, const uint8_t *body, uint64_t len, uint64_t base,
                           const tt_reader_limits *lim, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    const uint8_t *p = body, *end = body + len;
    uint64_t nthreads;
    GETV(ix->block_rows, "the directory's block size");
    BAD(ix->block_rows == 0 || ix->block_rows > 65536,
        "%s: directory block size %" PRIu64 " is invalid", nm, ix->block_rows);
    GETV(ix->seek_every, "the directory's seek step");
    BAD(ix->seek_every == 0, "%s: directory seek step is 0", nm);
    GETV(ix->sum_off, "the summary offset");
    GETV(ix->sum_len, "the summary length");
    BAD(ix->sum_off != m->objects_offset + m->objects_length || ix->sum_len < TT_CHUNK_HEADER ||
        ix->sum_len > m->index_offset - ix->sum_off || ix->sum_off + ix->sum_len != m->index_offset,
        "%s: the summary (offset %" PRIu64 ", %" PRIu64 " bytes) is not between the object table "
        "and the directory", nm, ix->sum_off, ix->sum_len);
    GETV(nthreads, "the directory's thread count");
    BAD(nthreads != m->thread_count, "%s: directory lists %" PRIu64 " threads, the manifest %u",
        nm, nthreads, m->thread_count);
    ix->nthreads = (uint32_t)nthreads;
    ix->threads = tt_ix_calloc(ix, nthreads ? nthreads : 1, sizeof *ix->threads);
    if (!ix->threads)
        return tt_fail(err, TT_E_NOMEM, 0, base, "%s: out of memory (or over max_total)", nm);
    /* a block is at least a chunk header in the data area */
    uint64_t max_blocks = (m->data_end - m->data_offset) / TT_CHUNK_HEADER, all_blocks = 0;
    uint64_t used = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
        int rc = parse_thread(ix, i, &p, body, end, base, max_blocks, &all_blocks, &used, lim,
                              err);
        if (rc != TT_OK)
            return rc;
    }
    uint64_t want = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
        uint64_t ev = tt_reader_thread(ix->r, i)->event_count;
        want += ceil_div(ev, ix->seek_every);
    }
    GETV(ix->nseek, "the seek entry count");
    BAD(ix->nseek != want, "%s: the seek index has %" PRIu64 " entries, the thread table needs %"
        PRIu64, nm, ix->nseek, want);
    int rc = parse_seek_batches(ix, &p, body, end, base, max_blocks, used, lim, err);
    if (rc != TT_OK)
        return rc;
    BAD(p != end, "%s: the directory has trailing bytes", nm);
    return TT_OK;
}

/* Reads and checks every seek batch: each entry inside the file, each thread's entries for seq
 * 0, K, 2K, ... in that order (the swapper writes them as it encodes) with times that do not
 * decrease, and exactly as many as its events need. With @store, the entries go into ix->seek,
 * each thread's together (seek_first, seek_n); without, nothing is kept but two figures per
 * thread, so tt_index_open's check costs the same memory for any run length. */
static int scan_seek(tt_index *ix, const tt_reader_limits *lim, bool store, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    uint64_t first = 0;
    for (uint32_t t = 0; t < ix->nthreads; t++) {
        struct ithread *it = &ix->threads[t];
        it->seek_first = first;
        it->seek_n = ceil_div(tt_reader_thread(ix->r, t)->event_count, ix->seek_every);
        it->seek_next = 0;
        it->seek_time = 0;
        first += it->seek_n; /* the directory's entry count was checked against this sum */
    }
    if (store) {
        ix->seek = tt_ix_malloc(ix, ix->nseek ? ix->nseek * sizeof *ix->seek : 1);
        if (!ix->seek)
            return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)", nm);
    }
    uint64_t k = 0;
    for (uint64_t b = 0; b < ix->nseek_batches; b++) {
        struct tt_chunk_header h;
        uint8_t *body;
        uint64_t base = ix->seek_batches[2 * b], n = ix->seek_batches[2 * b + 1];
        int rc = tt_ix_read_chunk(ix, base, m->data_end, TT_CHUNK_SEEK, &h, &body,
                            lim->max_table < m->largest_chunk ? lim->max_table : m->largest_chunk,
                            err, "a seek batch");
        if (rc != TT_OK)
            return rc;
        base += TT_CHUNK_HEADER;
        const uint8_t *p = body, *end = body + h.body_len;
        uint64_t prev_off = 0;
        rc = TT_OK;
        if (h.count != n || h.first_seq != k) {
            rc = tt_fail(err, TT_E_CORRUPT, 0, base - TT_CHUNK_HEADER + 16, "%s: seek batch at "
                         "offset %" PRIu64 " holds entries %" PRIu64 "..+%u, the directory says %"
                         PRIu64 "..+%" PRIu64, nm, base - TT_CHUNK_HEADER, h.first_seq, h.count, k, n);
        }
        for (uint64_t i = 0; rc == TT_OK && i < n; i++, k++) {
            uint64_t th, seq, time, doff, idx;
            const uint8_t *q = p;
            if (tt_get_varint(&p, end, &th) || tt_get_varint(&p, end, &seq) ||
                tt_get_varint(&p, end, &time) || tt_get_varint(&p, end, &doff) ||
                tt_get_varint(&p, end, &idx) || th >= ix->nthreads ||
                doff > m->data_end || prev_off + doff < m->data_offset ||
                prev_off + doff >= m->data_end || idx > UINT32_MAX) {
                rc = tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(q - body), "%s: seek entry %"
                             PRIu64 " at offset %" PRIu64 " is invalid", nm, k,
                             base + (uint64_t)(q - body));
                break;
            }
            struct ithread *it = &ix->threads[th];
            if (seq != it->seek_next || seq >= it->seek_n || (seq && time < it->seek_time)) {
                rc = tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(q - body), "%s: seek entry %"
                             PRIu64 " at offset %" PRIu64 " (thread %u, seq %" PRIu64 ") is not "
                             "the next of its thread, or goes back in time", nm, k,
                             base + (uint64_t)(q - body), (unsigned)th, seq * ix->seek_every);
                break;
            }
            it->seek_next = seq + 1;
            it->seek_time = time;
            prev_off += doff;
            if (store) {
                tt_timepoint_entry *e = &ix->seek[it->seek_first + seq];
                e->thread = (uint32_t)th;
                e->seq = seq * ix->seek_every;
                e->time = time;
                e->chunk_offset = prev_off;
                e->index = (uint32_t)idx;
            }
        }
        if (rc == TT_OK && p != end)
            rc = tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(p - body), "%s: seek batch at "
                         "offset %" PRIu64 " has trailing bytes", nm, base - TT_CHUNK_HEADER);
        tt_ix_free(ix, body);
        if (rc != TT_OK)
            return rc;
    }
    for (uint32_t t = 0; t < ix->nthreads; t++)
        if (ix->threads[t].seek_next != ix->threads[t].seek_n)
            return tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: the seek index of thread %u "
                           "lacks the entry for seq %" PRIu64, nm, t,
                           ix->threads[t].seek_next * ix->seek_every);
    return TT_OK;
}

/* The seek index, read on the first lookup. */
int tt_ix_ensure_seek(tt_index *ix, tt_error_info *err)
{
    if (ix->seek)
        return TT_OK;
    int rc = scan_seek(ix, &ix->lim, true, err);
    if (rc != TT_OK) {
        tt_ix_free(ix, ix->seek);
        ix->seek = NULL;
    }
    return rc;
}

/* The file offset of frame block @b of @thread and the lowest subtree start of its rows, from
 * the block list that holds it, which is read (and checked again) when it is not the one in
 * memory. */
int tt_ix_block_at(tt_index *ix, uint32_t thread, uint64_t b, uint64_t *off, uint64_t *low,
                    tt_error_info *err)
{
    struct ithread *t = &ix->threads[thread];
    if (!t->win || b - t->win_first >= t->win_n) {
        uint64_t lo = 0, hi = t->nlists; /* the last list whose first block is <= b */
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (t->lists[LIST_W * mid + 1] <= b)
                lo = mid;
            else
                hi = mid;
        }
        const uint64_t *l = &t->lists[LIST_W * lo];
        if (lo >= t->nlists || b - l[1] >= l[2])
            return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "%s: no frame block %" PRIu64 " in "
                           "thread %u", ix->src->name, b, thread);
        if (l[2] > t->win_cap) {
            uint64_t *nw = tt_ix_realloc(ix, t->win, l[2] * 16);
            if (!nw)
                return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over "
                               "max_total) for a block list of thread %u", ix->src->name, thread);
            t->win = nw;
            t->win_cap = l[2];
        }
        uint64_t prev = l[3], lowest;
        t->win_n = 0;
        int rc = load_block_list(ix, thread, t->win, &prev, &lowest, l[0], l[1], l[2], err);
        if (rc != TT_OK)
            return rc;
        if (lowest != l[4]) /* tt_index_parent skipped lists by the value read at open */
            return tt_fail(err, TT_E_CORRUPT, 0, l[0], "%s: block list at offset %" PRIu64
                           " changed since the file was opened", ix->src->name, l[0]);
        t->win_first = l[1];
        t->win_n = l[2];
    }
    *off = t->win[2 * (b - t->win_first)];
    *low = t->win[2 * (b - t->win_first) + 1];
    return TT_OK;
}

static int load_summary(tt_index *ix, const tt_reader_limits *lim, tt_error_info *err)
{
    const char *nm = ix->src->name;
    struct tt_chunk_header h;
    uint8_t *body;
    uint64_t base = ix->sum_off;
    int rc = tt_ix_read_chunk(ix, base, base + ix->sum_len, TT_CHUNK_SUMMARY, &h, &body, lim->max_table,
                        err, "the summary table");
    if (rc != TT_OK)
        return rc;
    if ((uint64_t)h.body_len != ix->sum_len - TT_CHUNK_HEADER || h.count > h.body_len / 8) {
        tt_ix_free(ix, body);
        return tt_fail(err, TT_E_CORRUPT, 0, base + 8, "%s: the summary table at offset %" PRIu64
                       " does not match the directory", nm, base);
    }
    ix->nsum = h.count;
    ix->sum = tt_ix_calloc(ix, h.count ? h.count : 1, sizeof *ix->sum);
    if (!ix->sum) {
        tt_ix_free(ix, body);
        return tt_fail(err, TT_E_NOMEM, 0, base, "%s: out of memory (or over max_total)", nm);
    }
    base += TT_CHUNK_HEADER;
    const uint8_t *p = body, *end = body + h.body_len;
    uint64_t fn = 0;
    for (uint32_t i = 0; i < h.count; i++) {
        uint64_t v[8];
        const uint8_t *q = p;
        bool ok = true;
        for (int j = 0; j < 8 && ok; j++)
            ok = tt_get_varint(&p, end, &v[j]) == 0;
        ok = ok && v[0] <= UINT32_MAX - fn; /* no wrap: rows are in increasing function order */
        fn += ok ? v[0] : 0;
        if (!ok || (i && v[0] == 0) || fn > UINT32_MAX || v[1] == 0 || v[3] > v[2] ||
            v[5] > v[2] || v[4] > UINT32_MAX || v[6] >= ix->nthreads ||
            v[7] >= ix->threads[v[6]].info.frames) {
            uint64_t at = base + (uint64_t)(q - body);
            tt_ix_free(ix, body);
            return tt_fail(err, TT_E_CORRUPT, 0, at, "%s: summary row %u at offset %" PRIu64
                           " is invalid", nm, i, at);
        }
        tt_summary_entry *e = &ix->sum[i];
        e->function = (uint32_t)fn;
        e->calls = v[1];
        e->total = v[2];
        e->self = v[3];
        e->max_depth = (uint32_t)v[4];
        e->longest = v[5];
        e->longest_thread = (uint32_t)v[6];
        e->longest_frame = v[7];
    }
    rc = p == end ? TT_OK
                  : tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(p - body),
                            "%s: the summary table has trailing bytes", nm);
    tt_ix_free(ix, body);
    return rc;
}

int tt_index_open(tt_reader *r, const tt_reader_limits *lim, tt_index **out, tt_error_info *err)
{
    tt_reader_limits dl;
    *out = NULL;
    if (!lim) {
        tt_reader_limits_default(&dl);
        lim = &dl;
    }
    const tt_manifest *m = tt_reader_manifest(r);
    const tt_source *src = tt_reader_source_(r);
    if (m->version < 2 || m->index_offset == 0)
        return tt_fail(err, TT_E_INVAL, 0, TT_M_INDEX_OFF,
                       "%s: the file has no index tables (%s)", src->name,
                       m->version < 2 ? "format version 1"
                       : (m->flags & TT_MF_RECOVERED) ? "recovered files have none"
                                                       : "recorded without them");
    if (m->index_length > lim->max_table)
        return tt_fail(err, TT_E_CAPACITY, 0, TT_M_INDEX_LEN, "%s: the index directory (%" PRIu64
                       " bytes) exceeds the limit max_table (%" PRIu64 ")", src->name,
                       m->index_length, lim->max_table);
    tt_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)", src->name);
    ix->lim = *lim;
    ix->max_total = lim->max_total;
    ix->used = ix->peak = sizeof *ix;
    ix->r = r;
    ix->src = src;
    ix->m = m;
    for (unsigned i = 0; i < CACHE_SLOTS; i++)
        ix->cache[i].block = UINT64_MAX;
    struct tt_chunk_header h;
    uint8_t *body;
    int rc = tt_ix_read_chunk(ix, m->index_offset, m->file_size, TT_CHUNK_INDEX, &h, &body,
                        lim->max_table, err, "the index directory");
    if (rc == TT_OK) {
        if (h.count != m->thread_count ||
            (uint64_t)h.body_len != m->index_length - TT_CHUNK_HEADER)
            rc = tt_fail(err, TT_E_CORRUPT, 0, m->index_offset + 8, "%s: the index directory at "
                         "offset %" PRIu64 " does not match the manifest", src->name,
                         m->index_offset);
        else
            rc = parse_directory(ix, body, h.body_len, m->index_offset + TT_CHUNK_HEADER, lim, err);
        tt_ix_free(ix, body);
    }
    if (rc == TT_OK) {
        uint64_t cache = CACHE_SLOTS * (ix->block_rows * sizeof(struct drow) + m->largest_chunk);
        if (cache > lim->max_total)
            rc = tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX, "%s: the frame block cache needs %"
                         PRIu64 " bytes, more than max_total", src->name, cache);
    }
    if (rc == TT_OK)
        rc = scan_seek(ix, lim, false, err);
    if (rc == TT_OK)
        rc = load_summary(ix, lim, err);
    if (rc != TT_OK) {
        tt_index_close(ix);
        return rc;
    }
    *out = ix;
    return TT_OK;
}

void tt_index_close(tt_index *ix)
{
    if (!ix)
        return;
    for (uint32_t i = 0; i < ix->nthreads && ix->threads; i++) {
        tt_ix_free(ix, ix->threads[i].win);
        tt_ix_free(ix, ix->threads[i].lists);
    }
    tt_ix_free(ix, ix->threads);
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        tt_ix_free(ix, ix->cache[i].rows);
        tt_ix_free(ix, ix->cache[i].body);
    }
    tt_ix_free(ix, ix->sum);
    tt_ix_free(ix, ix->seek);
    tt_ix_free(ix, ix->seek_batches);
    free(ix);
}

const tt_index_thread *tt_index_thread_info(const tt_index *ix, tt_thread_id thread)
{
    return thread < ix->nthreads ? &ix->threads[thread].info : NULL;
}

uint32_t tt_index_summary_count(const tt_index *ix)
{
    return ix->nsum;
}

const tt_summary_entry *tt_index_summary(const tt_index *ix, uint32_t i)
{
    return i < ix->nsum ? &ix->sum[i] : NULL;
}

uint64_t tt_index_seek_every(const tt_index *ix)
{
    return ix->seek_every;
}

/* ---------------------------------------------------------------- frame blocks */

static int thread_seek(tt_index *ix, tt_thread_id thread, const tt_timepoint_entry **e,
                       uint64_t *n, tt_error_info *err)
{
    if (!ix || thread >= ix->nthreads || ix->threads[thread].seek_n == 0)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "%s: thread %u has no events",
                       ix ? ix->src->name : "(no index)", thread);
    int rc = tt_ix_ensure_seek(ix, err);
    if (rc != TT_OK)
        return rc;
    *e = ix->seek + ix->threads[thread].seek_first;
    *n = ix->threads[thread].seek_n;
    return TT_OK;
}

int tt_index_seek_seq(tt_index *ix, tt_thread_id thread, uint64_t seq, tt_timepoint_entry *out,
                      tt_error_info *err)
{
    const tt_timepoint_entry *e = NULL; /* set when rc is TT_OK; gcc -O3 cannot tell */
    uint64_t n = 0;
    int rc = thread_seek(ix, thread, &e, &n, err);
    if (rc != TT_OK)
        return rc;
    uint64_t j = seq / ix->seek_every;
    *out = e[j < n ? j : n - 1];
    return TT_OK;
}

int tt_index_seek_time(tt_index *ix, tt_thread_id thread, uint64_t time, tt_timepoint_entry *out,
                       tt_error_info *err)
{
    const tt_timepoint_entry *e = NULL; /* set when rc is TT_OK; gcc -O3 cannot tell */
    uint64_t n = 0;
    int rc = thread_seek(ix, thread, &e, &n, err);
    if (rc != TT_OK)
        return rc;
    uint64_t lo = 0, hi = n; /* first entry with time >= @time */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (e[mid].time < time)
            lo = mid + 1;
        else
            hi = mid;
    }
    *out = e[lo ? lo - 1 : 0];
    return TT_OK;
}

/* ---------------------------------------------------------------- the whole check */
uint64_t tt_index_chunks_(const tt_index *ix)
{
    uint64_t n = ix->nseek_batches + ix->nlists;
    for (uint32_t i = 0; i < ix->nthreads; i++)
        n += ix->threads[i].nblocks;
    return n;
}

uint64_t tt_index_memory(const tt_index *ix)
{
    return ix->peak;
}

