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

#include "internal.h"

#define CACHE_SLOTS 8u
#define LIST_W 5u       /* uint64_t per block list in ithread.lists */
#define BLOCK_READ 4096u /* a frame block's first read: header and (usually) body */

struct drow {
    uint32_t fn, depth;
    uint32_t outcome, pad_;
    uint64_t desc, start, dur, nch, chunk_off;
};

struct slot {
    uint32_t thread;
    uint64_t block;        /* UINT64_MAX: empty */
    uint32_t nrows;
    struct drow *rows;     /* TT_FRAME_BLOCK_ROWS */
    uint8_t *body;
    size_t body_cap;
};

struct ithread {
    tt_index_thread info;
    uint64_t nblocks;
    uint64_t nlists;
    uint64_t *lists;       /* LIST_W per BLOCKS chunk: offset, first block, block count, the
                            * offset of the block before its first (for the order check on a
                            * reread), and the lowest subtree start of its blocks */
    /* the one block list in memory: blocks [win_first, win_first + win_n), each as (offset,
     * lowest subtree start); win_cap entries allocated */
    uint64_t *win, win_first, win_n, win_cap;
    uint64_t seek_first, seek_n; /* its entries in the seek array */
    uint64_t seek_next, seek_time; /* scan_seek: the entry it expects next, the last one's time */
};

struct tt_index {
    tt_reader *r;
    const tt_source *src;
    const tt_manifest *m;
    uint64_t block_rows, seek_every;
    uint32_t nthreads;
    struct ithread *threads;
    tt_summary_entry *sum;
    uint32_t nsum;
    tt_timepoint_entry *seek;
    uint64_t nseek;
    uint64_t nseek_batches;
    uint64_t *seek_batches;  /* (offset, count) */
    uint64_t nlists;         /* BLOCKS chunks */
    struct slot cache[CACHE_SLOTS];
    uint64_t sum_off, sum_len;
    tt_reader_limits lim;
    uint64_t max_total, used, peak;
};

/* Every allocation of an index goes through these: they keep the bytes in use, refuse to go
 * past the caller's max_total (NULL, reported as TT_E_CAPACITY by the callers' "out of
 * memory" paths), and record the peak for tt_index_memory(). */
struct ahdr {
    uint64_t size;
    uint64_t pad_;
};

/* ceil(@a / @b) for @b >= 1, without the overflow of (a + b - 1) / b: a file's counts and steps
 * can be anything up to 2^64 - 1 */
static inline uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static void *ix_realloc(tt_index *ix, void *p, size_t n)
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

static void *ix_malloc(tt_index *ix, size_t n)
{
    return ix_realloc(ix, NULL, n);
}

static void *ix_calloc(tt_index *ix, size_t n, size_t k)
{
    if (k && n > SIZE_MAX / k)
        return NULL;
    void *p = ix_malloc(ix, n * k);
    if (p)
        memset(p, 0, n * k);
    return p;
}

static void ix_free(tt_index *ix, void *p)
{
    if (!p)
        return;
    struct ahdr *h = (struct ahdr *)p - 1;
    ix->used -= h->size;
    free(h);
}

static int rd(tt_index *ix, uint64_t off, void *dst, size_t len, tt_error_info *err,
              const char *what)
{
    size_t got = 0;
    const tt_source *src = ix->src;
    if (off > src->size || len > src->size - off)
        return tt_fail(err, TT_E_TRUNCATED, 0, off, "%s: %s at offset %" PRIu64 " runs past the "
                       "end of the file", src->name, what, off);
    if (src->read(src->ctx, off, dst, len, &got) != TT_OK || got != len)
        return tt_fail(err, TT_E_IO, 0, off, "%s: cannot read %s at offset %" PRIu64, src->name,
                       what, off);
    return TT_OK;
}

/* Reads the chunk at @off (type @type, inside [@off, @end)) into a malloc'd body. */
static int read_chunk(tt_index *ix, uint64_t off, uint64_t end, uint16_t type,
                      struct tt_chunk_header *h, uint8_t **body, uint64_t max_body,
                      tt_error_info *err, const char *what)
{
    const char *nm = ix->src->name;
    uint8_t raw[TT_CHUNK_HEADER];
    *body = NULL;
    if (off < TT_MANIFEST_SIZE || end < off || end - off < TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: %s at offset %" PRIu64 " does not fit "
                       "its area", nm, what, off);
    int rc = rd(ix, off, raw, sizeof raw, err, what);
    if (rc != TT_OK)
        return rc;
    const char *why = tt_chunk_header_decode(raw, h);
    if (why)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: %s at offset %" PRIu64 ": %s", nm, what,
                       off, why);
    if (h->type != type)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 4, "%s: %s at offset %" PRIu64 " has chunk "
                       "type %u, not %u", nm, what, off, h->type, type);
    if ((uint64_t)h->body_len > end - off - TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 8, "%s: %s at offset %" PRIu64 " claims %u "
                       "bytes, past the end of its area", nm, what, off, h->body_len);
    if (h->body_len > max_body)
        return tt_fail(err, TT_E_CAPACITY, 0, off + 8, "%s: %s at offset %" PRIu64 " claims %u "
                       "bytes, more than the limit of %" PRIu64, nm, what, off, h->body_len,
                       max_body);
    *body = ix_malloc(ix, h->body_len ? h->body_len : 1);
    if (!*body)
        return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total) for %s", nm, what);
    rc = rd(ix, off + TT_CHUNK_HEADER, *body, h->body_len, err, what);
    if (rc == TT_OK && tt_chunk_checksum(raw, *body, h->body_len) != h->checksum)
        rc = tt_fail(err, TT_E_CHECKSUM, 0, off, "%s: %s at offset %" PRIu64 " fails its "
                     "checksum", nm, what, off);
    if (rc != TT_OK) {
        ix_free(ix, *body);
        *body = NULL;
    }
    return rc;
}

/* A varint from the body; on failure, an error naming the file offset. */
#define GETV(var, what)                                                                            \
    do {                                                                                           \
        if (tt_get_varint(&p, end, &(var)) != 0)                                                   \
            return tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(p - body),                      \
                           "%s: %s at offset %" PRIu64 " is not a valid varint", nm, what,          \
                           base + (uint64_t)(p - body));                                           \
    } while (0)
#define BAD(cond, ...)                                                                             \
    do {                                                                                           \
        if (cond)                                                                                  \
            return tt_fail(err, TT_E_CORRUPT, 0, base + (uint64_t)(p - body), __VA_ARGS__);        \
    } while (0)

/* Reads and checks the BLOCKS chunk at @off: @n block offsets of thread @thread from block
 * @first on, each after *@prev (the offset of block @first - 1; updated), stored in @out
 * (block @first at out[0]; NULL: only checked). */
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
    int rc = read_chunk(ix, off, m->data_end, TT_CHUNK_BLOCKS, &h, &body, m->largest_chunk, err,
                        "a frame block list");
    if (rc != TT_OK)
        return rc;
    uint64_t base = off + TT_CHUNK_HEADER, boff = 0, v, back;
    const uint8_t *p = body, *end = body + h.body_len;
    if (h.thread != thread || h.first_seq != first || h.count != n) {
        ix_free(ix, body);
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
            ix_free(ix, body);
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
    ix_free(ix, body);
    return rc;
}

static int parse_directory(tt_index *ix, const uint8_t *body, uint64_t len, uint64_t base,
                           const tt_reader_limits *lim, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    const uint8_t *p = body, *end = body + len;
    uint64_t v, nthreads;
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
    ix->threads = ix_calloc(ix, nthreads ? nthreads : 1, sizeof *ix->threads);
    if (!ix->threads)
        return tt_fail(err, TT_E_NOMEM, 0, base, "%s: out of memory (or over max_total)", nm);
    /* a block is at least a chunk header in the data area */
    uint64_t max_blocks = (m->data_end - m->data_offset) / TT_CHUNK_HEADER, all_blocks = 0;
    uint64_t used = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
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
        for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++) {
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
        all_blocks += t->nblocks;
        BAD(all_blocks > max_blocks, "%s: the directory lists more frame blocks than the data "
            "area can hold", nm);
        used += t->nblocks * 16;
        if (used > lim->max_total)
            return tt_fail(err, TT_E_CAPACITY, 0, base, "%s: the index directory needs more "
                           "than max_total (%" PRIu64 " bytes)", nm, lim->max_total);
        /* the block offsets, in BLOCKS chunks of the data area that the directory lists: each
         * list is read and checked here, one at a time, and read again when a lookup needs a
         * block it holds (block_at); one list per thread is in memory at a time */
        uint64_t nlists, loff = 0, b = 0, prev = 0;
        GETV(nlists, "a thread's block list count");
        BAD(nlists > t->nblocks, "%s: thread %u has %" PRIu64 " block lists for %" PRIu64
            " blocks", nm, i, nlists, t->nblocks);
        t->lists = ix_malloc(ix, nlists ? nlists * LIST_W * 8 : 1);
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
    }
    uint64_t want = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
        uint64_t ev = tt_reader_thread(ix->r, i)->event_count;
        want += ceil_div(ev, ix->seek_every);
    }
    GETV(ix->nseek, "the seek entry count");
    BAD(ix->nseek != want, "%s: the seek index has %" PRIu64 " entries, the thread table needs %"
        PRIu64, nm, ix->nseek, want);
    GETV(ix->nseek_batches, "the seek batch count");
    BAD(ix->nseek_batches > max_blocks || ix->nseek_batches > ix->nseek,
        "%s: %" PRIu64 " seek batches cannot be", nm, ix->nseek_batches);
    used += ix->nseek_batches * 16 + ix->nseek * sizeof(tt_timepoint_entry);
    if (used > lim->max_total)
        return tt_fail(err, TT_E_CAPACITY, 0, base, "%s: the index needs more than max_total "
                       "(%" PRIu64 " bytes)", nm, lim->max_total);
    ix->seek_batches = ix_malloc(ix, ix->nseek_batches ? ix->nseek_batches * 16 : 1);
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
        ix->seek = ix_malloc(ix, ix->nseek ? ix->nseek * sizeof *ix->seek : 1);
        if (!ix->seek)
            return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)", nm);
    }
    uint64_t k = 0;
    for (uint64_t b = 0; b < ix->nseek_batches; b++) {
        struct tt_chunk_header h;
        uint8_t *body;
        uint64_t base = ix->seek_batches[2 * b], n = ix->seek_batches[2 * b + 1];
        int rc = read_chunk(ix, base, m->data_end, TT_CHUNK_SEEK, &h, &body,
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
        ix_free(ix, body);
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
static int ensure_seek(tt_index *ix, tt_error_info *err)
{
    if (ix->seek)
        return TT_OK;
    int rc = scan_seek(ix, &ix->lim, true, err);
    if (rc != TT_OK) {
        ix_free(ix, ix->seek);
        ix->seek = NULL;
    }
    return rc;
}

/* The file offset of frame block @b of @thread and the lowest subtree start of its rows, from
 * the block list that holds it, which is read (and checked again) when it is not the one in
 * memory. */
static int block_at(tt_index *ix, uint32_t thread, uint64_t b, uint64_t *off, uint64_t *low,
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
            uint64_t *nw = ix_realloc(ix, t->win, l[2] * 16);
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
    int rc = read_chunk(ix, base, base + ix->sum_len, TT_CHUNK_SUMMARY, &h, &body, lim->max_table,
                        err, "the summary table");
    if (rc != TT_OK)
        return rc;
    if ((uint64_t)h.body_len != ix->sum_len - TT_CHUNK_HEADER || h.count > h.body_len / 8) {
        ix_free(ix, body);
        return tt_fail(err, TT_E_CORRUPT, 0, base + 8, "%s: the summary table at offset %" PRIu64
                       " does not match the directory", nm, base);
    }
    ix->nsum = h.count;
    ix->sum = ix_calloc(ix, h.count ? h.count : 1, sizeof *ix->sum);
    if (!ix->sum) {
        ix_free(ix, body);
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
            ix_free(ix, body);
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
    ix_free(ix, body);
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
    int rc = read_chunk(ix, m->index_offset, m->file_size, TT_CHUNK_INDEX, &h, &body,
                        lim->max_table, err, "the index directory");
    if (rc == TT_OK) {
        if (h.count != m->thread_count ||
            (uint64_t)h.body_len != m->index_length - TT_CHUNK_HEADER)
            rc = tt_fail(err, TT_E_CORRUPT, 0, m->index_offset + 8, "%s: the index directory at "
                         "offset %" PRIu64 " does not match the manifest", src->name,
                         m->index_offset);
        else
            rc = parse_directory(ix, body, h.body_len, m->index_offset + TT_CHUNK_HEADER, lim, err);
        ix_free(ix, body);
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
        ix_free(ix, ix->threads[i].win);
        ix_free(ix, ix->threads[i].lists);
    }
    ix_free(ix, ix->threads);
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        ix_free(ix, ix->cache[i].rows);
        ix_free(ix, ix->cache[i].body);
    }
    ix_free(ix, ix->sum);
    ix_free(ix, ix->seek);
    ix_free(ix, ix->seek_batches);
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

static int decode_block(tt_index *ix, struct slot *s, uint32_t thread, uint64_t b,
                        tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    struct ithread *t = &ix->threads[thread];
    uint64_t off, low;
    int brc = block_at(ix, thread, b, &off, &low, err);
    if (brc != TT_OK)
        return brc;
    uint64_t first = b * ix->block_rows;
    uint64_t rows = t->info.frames - first < ix->block_rows ? t->info.frames - first : ix->block_rows;
    struct tt_chunk_header h;
    uint8_t raw[TT_CHUNK_HEADER];
    s->block = UINT64_MAX;
    /* one read for the header and, usually, the whole body: a block of a loop is well under
     * BLOCK_READ bytes, and a read per block is most of what a full check costs */
    if (!s->body && !(s->body = ix_malloc(ix, BLOCK_READ)))
        return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total)", nm);
    s->body_cap = s->body_cap < BLOCK_READ ? BLOCK_READ : s->body_cap;
    uint64_t ahead = m->data_end > off ? m->data_end - off : 0;
    size_t first_read = ahead < BLOCK_READ ? (size_t)ahead : BLOCK_READ;
    if (first_read < TT_CHUNK_HEADER)
        first_read = TT_CHUNK_HEADER; /* rd reports the cut */
    int rc = rd(ix, off, s->body, first_read, err, "a frame block");
    if (rc != TT_OK)
        return rc;
    memcpy(raw, s->body, sizeof raw);
    const char *why = tt_chunk_header_decode(raw, &h);
    if (why)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame block at offset %" PRIu64 ": %s", nm,
                       off, why);
    if (h.type != TT_CHUNK_FRAMES || h.thread != thread || h.first_seq != first ||
        h.count != rows || h.body_len > m->largest_chunk ||
        h.body_len > m->data_end - off - TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame block at offset %" PRIu64 " (type %u,"
                       " thread %u, frames %" PRIu64 "..+%u, %u bytes) is not block %" PRIu64
                       " of thread %u", nm, off, h.type, h.thread, h.first_seq, h.count,
                       h.body_len, b, thread);
    if (!s->rows && !(s->rows = ix_malloc(ix, ix->block_rows * sizeof *s->rows)))
        return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total)", nm);
    if (TT_CHUNK_HEADER + (size_t)h.body_len <= first_read) {
        memmove(s->body, s->body + TT_CHUNK_HEADER, h.body_len);
    } else {
        if (h.body_len > s->body_cap) {
            uint8_t *nb = ix_realloc(ix, s->body, h.body_len);
            if (!nb)
                return tt_fail(err, TT_E_NOMEM, 0, off, "%s: out of memory (or over max_total)", nm);
            s->body = nb;
            s->body_cap = h.body_len;
        }
        rc = rd(ix, off + TT_CHUNK_HEADER, s->body, h.body_len, err, "a frame block");
        if (rc != TT_OK)
            return rc;
    }
    if (tt_chunk_checksum(raw, s->body, h.body_len) != h.checksum)
        return tt_fail(err, TT_E_CHECKSUM, 0, off, "%s: frame block at offset %" PRIu64 " fails its"
                       " checksum", nm, off);
    const uint8_t *body = s->body, *p = body, *end = body + h.body_len;
    uint64_t base = off + TT_CHUNK_HEADER;
    uint64_t prev_end = h.base_time, prev_chunk = 0, prev_fn = 0, prev_depth = 0;
    uint64_t run = 0; /* rows left in a run of repeated leaves */
    for (uint64_t i = 0; i < rows; i++) {
        struct drow *d = &s->rows[i];
        uint64_t idx = first + i, fn = prev_fn, depth = prev_depth, dend, dc = 0;
        const uint8_t *q = p;
        BAD(p >= end, "%s: frame block at offset %" PRIu64 " ends inside its rows", nm, off);
        if (!run && (*p & TT_ROW_RUN)) {
            run = *p & TT_ROW_RUN_MAX;
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

static int get_block(tt_index *ix, uint32_t thread, uint64_t b, struct slot **out,
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
    int rc = get_block(ix, thread, index / ix->block_rows, &s, err);
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
            if ((rc = block_at(ix, thread, b, &off, &low, err)) != TT_OK)
                return rc;
            if (low > index)
                continue;
        }
        struct slot *s;
        rc = get_block(ix, thread, b, &s, err);
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
static int thread_seek(tt_index *ix, tt_thread_id thread, const tt_timepoint_entry **e,
                       uint64_t *n, tt_error_info *err)
{
    if (!ix || thread >= ix->nthreads || ix->threads[thread].seek_n == 0)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "%s: thread %u has no events",
                       ix ? ix->src->name : "(no index)", thread);
    int rc = ensure_seek(ix, err);
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

/* The closed frames of one depth whose parent has not been read yet. In post-order they all
 * have the same parent (the open frame one level up), so a running total per depth is the
 * whole state of the check: its memory grows with the depth, not with the children. */
struct pend {
    uint64_t n, desc, time;   /* frames, their descendants + themselves, their durations */
    uint64_t first_start, last_end, last_index;
};
static int cmp_sum(const void *key, const void *elem)
{
    uint32_t fn = *(const uint32_t *)key;
    const tt_summary_entry *e = elem;
    return fn < e->function ? -1 : fn > e->function;
}

int tt_index_check(tt_index *ix, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    int rc = TT_OK;
    tt_summary_entry *re = ix_calloc(ix, ix->nsum ? ix->nsum : 1, sizeof *re);
    struct pend *st = NULL; /* by depth */
    uint64_t cap = 0;
    if (!re)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)", nm);
    for (uint32_t th = 0; th < ix->nthreads && rc == TT_OK; th++) {
        const struct ithread *t = &ix->threads[th];
        uint64_t children = 0;
        uint32_t top = 0; /* the depth of the last frame: nothing deeper is pending */
        uint64_t blk_low = 0; /* the lowest subtree start of the current block's rows so far */
        uint64_t stack = 0;   /* the deepest open-frame stack the rows imply: depth + 1 */
        if ((uint64_t)t->info.max_depth + 2 > cap) {
            uint64_t nc = (uint64_t)t->info.max_depth + 2;
            struct pend *ns = ix_realloc(ix, st, nc * sizeof *ns);
            if (!ns) {
                rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)", nm);
                break;
            }
            st = ns;
            cap = nc;
        }
        memset(st, 0, cap * sizeof *st);
        struct slot *blk = NULL;
        const tt_summary_entry *se = NULL;
        uint64_t b = UINT64_MAX, row = ix->block_rows; /* (no division per frame) */
        uint64_t off = 0, low = 0; /* block b's offset and reach-back, from its list */
        for (uint64_t i = 0; i < t->info.frames && rc == TT_OK; i++, row++) {
            /* the rows straight from the decoded block: a check of 10^8 frames must not pay
             * a lookup per frame */
            if (row == ix->block_rows) {
                row = 0;
                if ((rc = get_block(ix, th, ++b, &blk, err)) != TT_OK ||
                    (rc = block_at(ix, th, b, &off, &low, err)) != TT_OK)
                    break;
            }
            const struct drow *d = &blk->rows[row];
            const struct { uint32_t function, depth; uint64_t desc, start, duration, child_count; }
                f = { d->fn, d->depth, d->desc, d->start, d->dur, d->nch };
            /* the block list's reach-back, which tt_index_parent trusts to skip blocks, is the
             * lowest subtree start of the block's rows (§14.9) */
            uint64_t lo = i - f.desc; /* desc <= i: checked when the block was decoded */
            if (row == 0 || lo < blk_low)
                blk_low = lo;
            if ((row + 1 == ix->block_rows || i + 1 == t->info.frames) &&
                blk_low != low) {
                rc = tt_fail(err, TT_E_CORRUPT, 0, off, "%s: the block list of thread %u says "
                             "the subtrees of block %" PRIu64 " (offset %" PRIu64 ") reach back "
                             "to frame %" PRIu64 ", its rows reach back to frame %" PRIu64, nm,
                             th, b, off, low, blk_low);
                break;
            }
            /* its children are the pending frames one level down, which must end just before
             * it and cover its whole subtree; nothing deeper may be pending */
            const struct pend *k = &st[f.depth + 1];
            uint64_t fend = f.start + f.duration;
            if (top > f.depth + 1)
                rc = tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame %" PRIu64 " of thread %u "
                             "(block at offset %" PRIu64 ") leaves deeper frames without a parent",
                             nm, i, th, off);
            else if (k->n != f.child_count || k->desc != f.desc ||
                     (k->n && (k->last_index != i - 1 || k->first_start < f.start ||
                               k->last_end > fend)))
                rc = tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame %" PRIu64 " of thread %u "
                             "(block at offset %" PRIu64 ") has %" PRIu64 " children and %" PRIu64
                             " descendants; the frames before it give %" PRIu64 " and %" PRIu64
                             ", or their times or order do not fit", nm, i, th, off,
                             f.child_count, f.desc, k->n, k->desc);
            if (rc != TT_OK)
                break;
            uint64_t kid_time = k->time;
            if ((uint64_t)f.depth + 1 > stack)
                stack = (uint64_t)f.depth + 1;
            children += f.child_count;
            st[f.depth + 1] = (struct pend){ 0 };
            struct pend *me = &st[f.depth];
            if (me->n && f.start < me->last_end)
                rc = tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame %" PRIu64 " of thread %u "
                             "(block at offset %" PRIu64 ") starts before its previous sibling "
                             "ends", nm, i, th, off);
            if (rc != TT_OK)
                break;
            if (!me->n)
                me->first_start = f.start;
            me->n++;
            me->desc += f.desc + 1;
            me->time += f.duration;
            me->last_end = fend;
            me->last_index = i;
            top = f.depth;
            /* recompute the summary from the rows (a loop repeats the function: no search) */
            if (!se || se->function != f.function)
                se = bsearch(&f.function, ix->sum, ix->nsum, sizeof *ix->sum, cmp_sum);
            if (!se) {
                rc = tt_fail(err, TT_E_CORRUPT, 0, ix->sum_off, "%s: function %u of frame %" PRIu64
                             " has no summary row", nm, f.function, i);
                break;
            }
            tt_summary_entry *r = &re[se - ix->sum];
            r->calls++;
            r->total += f.duration;
            r->self += f.duration >= kid_time ? f.duration - kid_time : 0;
            if (f.depth > r->max_depth)
                r->max_depth = f.depth;
            if (r->calls == 1 || f.duration > r->longest) {
                r->longest = f.duration;
                r->longest_thread = th;
                r->longest_frame = i;
            }
        }
        if (rc == TT_OK && stack != t->info.max_depth)
            rc = tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: the frames of thread %u nest "
                         "%" PRIu64 " deep, the directory says %u", nm, th, stack,
                         t->info.max_depth);
        if (rc == TT_OK && children != t->info.children)
            rc = tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: thread %u has %" PRIu64
                         " children, the directory says %" PRIu64, nm, th, children,
                         t->info.children);
        for (uint32_t d = 1; rc == TT_OK && d < cap; d++)
            if (st[d].n)
                rc = tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: frame %" PRIu64 " of "
                             "thread %u has no parent but depth %u", nm, st[d].last_index, th, d);
    }
    for (uint32_t i = 0; rc == TT_OK && i < ix->nsum; i++) {
        const tt_summary_entry *a = &ix->sum[i], *b = &re[i];
        if (a->calls != b->calls || a->total != b->total || a->self != b->self ||
            a->max_depth != b->max_depth || a->longest != b->longest)
            rc = tt_fail(err, TT_E_CORRUPT, 0, ix->sum_off, "%s: the summary row of function %u "
                         "differs from its frames", nm, a->function);
        /* the call it names as the longest is one of this function that took that long */
        tt_frame lf;
        if (rc == TT_OK &&
            (rc = tt_index_frame(ix, a->longest_thread, a->longest_frame, &lf, err)) == TT_OK &&
            (lf.function != a->function || lf.duration != a->longest))
            rc = tt_fail(err, TT_E_CORRUPT, 0, ix->sum_off, "%s: the summary row of function %u "
                         "names frame %" PRIu64 " of thread %u as its longest call, which is not",
                         nm, a->function, a->longest_frame, a->longest_thread);
    }
    /* every seek entry names an event chunk of its thread that holds that event */
    if (rc == TT_OK)
        rc = ensure_seek(ix, err);
    for (uint64_t i = 0; rc == TT_OK && i < ix->nseek; i++) {
        const tt_timepoint_entry *e = &ix->seek[i];
        uint8_t raw[TT_CHUNK_HEADER];
        struct tt_chunk_header h;
        if (e->chunk_offset > m->data_end - TT_CHUNK_HEADER) {
            rc = tt_fail(err, TT_E_CORRUPT, 0, e->chunk_offset, "%s: seek entry at %" PRIu64
                         " is outside the data area", nm, e->chunk_offset);
            break;
        }
        if ((rc = rd(ix, e->chunk_offset, raw, sizeof raw, err, "a chunk header")) != TT_OK)
            break;
        if (tt_chunk_header_decode(raw, &h) || h.type != TT_CHUNK_EVENTS || h.thread != e->thread ||
            e->seq < h.first_seq || e->seq - h.first_seq >= h.count ||
            e->seq - h.first_seq != e->index)
            rc = tt_fail(err, TT_E_CORRUPT, 0, e->chunk_offset, "%s: seek entry (thread %u, seq %"
                         PRIu64 ") does not match the chunk at offset %" PRIu64, nm, e->thread,
                         e->seq, e->chunk_offset);
    }
    ix_free(ix, st);
    ix_free(ix, re);
    return rc;
}

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
