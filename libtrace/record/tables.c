/* SPDX-License-Identifier: MIT */
/* The index tables, built by the swapper while it encodes (format version 2, docs/FORMAT.md §14).
 *
 * The recording threads do nothing for the index: their raw records stay as they are. The
 * swapper, while it turns a raw buffer into an event chunk (writer.c, encode_buffer), hands
 * every event to tt_tables_event(), which
 *
 *   - keeps, per thread, the stack of open frames (an enter pushes one, the matching exit pops
 *     it), each with the count and total duration of its children closed so far;
 *   - turns each closed frame into one row of the thread's frame table, numbered in post-order
 *     (completion order), and appends it to the thread's current frame block; a block of
 *     TT_FRAME_BLOCK_ROWS rows is written as a FRAMES chunk into the data area, after the event
 *     chunk being encoded, so only the open frames and one block per thread stay in memory;
 *   - adds the closed frame to its function's summary row (calls, total, self, deepest nesting,
 *     longest call);
 *   - counts events per thread and kind;
 *   - records every TT_SEEK_EVERY-th event of each thread (seq % K = 0) in the seek index,
 *     with the offset of its event chunk and its index inside it; SEEK chunks of
 *     TT_SEEK_BATCH entries go into the data area like the frame blocks.
 *
 * At close, tt_tables_finish() closes the frames still open (outcome CRASHED when the thread
 * recorded a crash event, else OPEN) and writes the last partial blocks, still in the data area;
 * tt_tables_write_tail() writes the summary chunk and the directory chunk that ends the file.
 *
 * Children: a row stores `desc`, its number of descendants, and its child count, so its subtree
 * is [index - desc, index]; its last child is index - 1, and the child before a child c is
 * c - desc(c) - 1, down to the subtree's start. That is the whole children list, stored in the
 * rows themselves: a separate children array would have to hold every child of a frame until
 * the frame closes, and a frame that calls a leaf 10^8 times would hold 10^8 entries (the
 * bounded-memory rule of docs/ARCHITECTURE.md wins over a stored list). A row's parent is not
 * stored either (it is not known when the child's row is streamed); the reader finds it as the first
 * later frame whose subtree covers the child, helped by each block's lowest subtree start.
 *
 * Memory: per thread, the open-frame stack (48 bytes a level), one frame block being filled
 * (about 3 bytes a row for a loop's leaves, at most 71) and the directory's block offsets not
 * yet written out (about 4 bytes a block, written as a BLOCKS chunk every TT_BLOCK_LIST blocks,
 * so the directory only lists the lists); one seek batch; one summary row per function. None of
 * it grows with the length of the run.
 *
 * A session recording into caller storage (tt_config_set_writer_storage) allocates nothing on its own, so
 * it writes no index: its files are version 2 without a directory (index_offset = 0). Nor does
 * one with TT_PARAM_INDEX 0, which asked for none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "tables.h"

/* ---------------------------------------------------------------- small helpers */

bool tt_tables_grow_(struct tt_tables *tb, void **p, size_t *cap, size_t need, size_t elem)
{
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) {
        tb->failed = true;
        return false;
    }
    *p = q;
    *cap = n;
    return true;
}

static inline uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

int tt_tables_open(tt_session *s, struct tt_tables **out)
{
    *out = NULL;
    if (s->cfg.storage)
        return TT_OK; /* caller storage: no allocation of our own, so no index */
    struct tt_tables *tb = calloc(1, sizeof *tb);
    if (!tb)
        return TT_E_NOMEM;
    tb->s = s;
    tb->marks_only = !s->cfg.index; /* TT_PARAM_INDEX 0: the checkpoint table, no index */
    *out = tb;
    return TT_OK;
}

void tt_tables_free(struct tt_tables *tb)
{
    if (!tb)
        return;
    for (uint32_t i = 0; i < tb->nthreads; i++) {
        struct tb_thread *t = &tb->threads[i];
        free(t->stack);
        free(t->rows);
        free(t->bl);
        free(t->lists);
    }
    free(tb->threads);
    free(tb->sum);
    free(tb->seek);
    free(tb->seek_batches);
    free(tb->out);
    free(tb->fix);
    free(tb->marks);
    free(tb);
}

struct tb_thread *tt_tables_thread_(struct tt_tables *tb, uint32_t id)
{
    if (id >= tb->nthreads) {
        uint32_t n = tb->nthreads ? tb->nthreads : 4;
        while (n <= id)
            n *= 2;
        struct tb_thread *nt = realloc(tb->threads, (size_t)n * sizeof *nt);
        if (!nt) {
            tb->failed = true;
            return NULL;
        }
        memset(nt + tb->nthreads, 0, (size_t)(n - tb->nthreads) * sizeof *nt);
        tb->threads = nt;
        tb->nthreads = n;
    }
    return &tb->threads[id];
}

/* ---------------------------------------------------------------- staging chunks */

/* Appends a framed chunk to the outbox; writer.c writes the outbox after the event chunk. */
static void stage_chunk(struct tt_tables *tb, struct tt_chunk_header *h, const uint8_t *a,
                        size_t alen, const uint8_t *b, size_t blen)
{
    size_t need = tb->out_len + TT_CHUNK_HEADER + alen + blen;
    if (!grow(tb, (void **)&tb->out, &tb->out_cap, need, 1))
        return;
    uint8_t *hdr = tb->out + tb->out_len, *body = hdr + TT_CHUNK_HEADER;
    memcpy(body, a, alen);
    if (blen)
        memcpy(body + alen, b, blen);
    h->body_len = (uint32_t)(alen + blen);
    tt_chunk_header_encode(hdr, h, body);
    tb->out_len = need;
}

/* The outbox-relative offset of a chunk staged now; noted for chunk_end to make absolute. */
static uint64_t staged_offset(struct tt_tables *tb, uint32_t thread, uint64_t at, uint64_t back)
{
    if (grow(tb, (void **)&tb->fix, &tb->fix_cap, tb->nfix + 1, sizeof *tb->fix))
        tb->fix[tb->nfix++] = (struct fixup){ thread, thread == UINT32_MAX ? at : tb->out_len,
                                              back };
    return tb->out_len;
}

static void flush_block(struct tt_tables *tb, struct tt_writer *w, uint32_t thread,
                        struct tb_thread *t)
{
    if (t->nrows == 0 || tb->failed)
        return;
    struct tt_chunk_header h = { .type = TT_CHUNK_FRAMES, .thread = thread,
                                 .first_seq = t->frames - t->nrows, .count = t->nrows,
                                 .base_time = t->blk_first_end };
    staged_offset(tb, thread, 0, h.first_seq - t->blk_min_first);
    stage_chunk(tb, &h, t->rows, t->rows_len, NULL, 0);
    t->nblocks++;
    t->nrows = 0;
    t->rows_len = 0;
    t->run_at = 0;
}

void tt_tables_flush_seek_(struct tt_tables *tb, struct tt_writer *w)
{
    if (tb->seek_n == 0 || tb->failed)
        return;
    if (!grow(tb, (void **)&tb->seek_batches, &tb->seek_batches_cap,
              2 * (tb->nseek_batches + 1), sizeof(uint64_t)))
        return;
    struct tt_chunk_header h = { .type = TT_CHUNK_SEEK, .thread = TT_NO_THREAD,
                                 .first_seq = tb->seek_total - tb->seek_n, .count = tb->seek_n };
    uint64_t off = staged_offset(tb, UINT32_MAX, tb->nseek_batches, 0);
    stage_chunk(tb, &h, tb->seek, tb->seek_len, NULL, 0);
    tb->seek_batches[2 * tb->nseek_batches] = off;
    tb->seek_batches[2 * tb->nseek_batches + 1] = tb->seek_n;
    tb->nseek_batches++;
    tb->seek_n = 0;
    tb->seek_len = 0;
    tb->seek_prev_off = 0;
}

/* ---------------------------------------------------------------- frames */

static void summary_add(struct tt_tables *tb, uint32_t fn, uint32_t depth, uint64_t dur,
                        uint64_t self, uint32_t thread, uint64_t frame)
{
    if (summary_last_is(tb, fn))
        goto found;
    if (tb->sum_used * 2 >= tb->sum_cap) {
        uint32_t ncap = tb->sum_cap ? tb->sum_cap * 2 : 256;
        struct summary_row *ns = calloc(ncap, sizeof *ns);
        if (!ns) {
            tb->failed = true;
            return;
        }
        for (uint32_t i = 0; i < tb->sum_cap; i++) {
            if (!tb->sum[i].used)
                continue;
            uint32_t j = (tb->sum[i].fn * 2654435761u) & (ncap - 1);
            while (ns[j].used)
                j = (j + 1) & (ncap - 1);
            ns[j] = tb->sum[i];
        }
        free(tb->sum);
        tb->sum = ns;
        tb->sum_cap = ncap;
    }
    uint32_t j = (fn * 2654435761u) & (tb->sum_cap - 1);
    while (tb->sum[j].used && tb->sum[j].fn != fn)
        j = (j + 1) & (tb->sum_cap - 1);
    if (!tb->sum[j].used) {
        tb->sum[j].used = true;
        tb->sum[j].fn = fn;
        tb->sum_used++;
    }
    tb->sum_last = j;
found:;
    struct summary_row *r = &tb->sum[tb->sum_last];
    r->calls++;
    r->total += dur;
    r->self += self;
    if (depth > r->max_depth)
        r->max_depth = depth;
    if (r->calls == 1 || dur > r->longest) {
        r->longest = dur;
        r->longest_thread = thread;
        r->longest_frame = frame;
    }
}

/* Closes the top frame of @t at @end with @outcome and emits its row. */
void tt_tables_close_frame_(struct tt_tables *tb, struct tt_writer *w, uint32_t thread,
                            struct tb_thread *t, uint64_t end, unsigned outcome)
{
    /* everything in locals first: the row is written through a uint8_t pointer, which may
     * alias any field, so fields read after it would be loaded again (this runs per call) */
    const uint32_t depth = --t->depth;
    const struct open_frame fr = t->stack[depth];
    const uint64_t index = t->frames++;
    const uint64_t nkids = fr.nkids;
    const uint64_t dur = end >= fr.start ? end - fr.start : 0;
    const uint64_t self = dur >= fr.kid_time ? dur - fr.kid_time : 0;
    uint64_t prev_end = t->prev_end, prev_chunk = t->prev_chunk;
    uint32_t prev_fn = t->prev_fn, prev_depth = t->prev_depth;

    if (t->nrows == 0) {
        t->blk_first_end = end;
        prev_end = end;
        prev_chunk = 0;
        prev_fn = 0;
        prev_depth = 0;
        t->blk_min_first = fr.first;
    } else if (fr.first < t->blk_min_first) {
        t->blk_min_first = fr.first;
    }
    /* a row: a flag byte saying what it shares with the previous row, then what differs: fn,
     * depth, desc and child count (not for a leaf), the time from the previous row's end to
     * this one's start (GAP) when it started after that, else to this one's end; duration;
     * chunk delta. A leaf that repeats the previous row goes into a run: gap and duration only */
    size_t rows_len = t->rows_len;
    const uint64_t start = end - dur;
    if (TT_UNLIKELY(!grow(tb, (void **)&t->rows, &t->rows_cap, rows_len + 71, 1))) {
        /* out of memory: tb->failed, the file gets no index */
    } else if (fr.fn == prev_fn && depth == prev_depth && index == fr.first &&
               fr.chunk_off == prev_chunk && start >= prev_end && t->nrows &&
               outcome == TT_FRAME_RETURNED) {
        /* a loop's leaf again: only its gap and duration, in a run of such rows */
        uint8_t *base = t->rows, *o = base + rows_len;
        if (t->run_at && base[t->run_at - 1] < (TT_ROW_RUN | TT_ROW_RUN_MAX)) {
            base[t->run_at - 1]++;
        } else {
            *o++ = TT_ROW_RUN | 1;
            t->run_at = rows_len + 1;
        }
        o = tt_put_varint(o, start - prev_end);
        o = tt_put_varint(o, dur);
        t->rows_len = (size_t)(o - base);
    } else if (outcome == TT_FRAME_RETURNED && nkids - 1 < TT_ROW_PARENT_KIDS &&
               fr.first >= index - t->nrows && t->nrows && fr.chunk_off == prev_chunk &&
               depth + 1 == prev_depth && fr.kid_start >= start) {
        /* a call whose children are all in this block just before it (a recursion's, a
         * caller's): its depth, descendants and start follow from their rows; the lead is the
         * time from its start to its first child's */
        uint8_t *base = t->rows, *o = base + rows_len + 1;
        unsigned fl = TT_ROW_PARENT | (unsigned)nkids;
        if (fr.fn == prev_fn)
            fl |= TT_ROW_PARENT_SAME_FN;
        else
            o = tt_put_varint(o, fr.fn);
        o = tt_put_varint(o, end - prev_end);
        o = tt_put_varint(o, fr.kid_start - start);
        base[rows_len] = (uint8_t)fl;
        t->run_at = 0;
        t->rows_len = (size_t)(o - base);
    } else {
        uint8_t *base = t->rows, *o = base + rows_len + 1;
        unsigned fl = outcome << TT_ROW_OUTCOME_SHIFT;
        if (fr.fn == prev_fn)
            fl |= TT_ROW_SAME_FN;
        else
            o = tt_put_varint(o, fr.fn);
        if (depth == prev_depth)
            fl |= TT_ROW_SAME_DEPTH;
        else
            o = tt_put_varint(o, depth);
        if (index == fr.first) {
            fl |= TT_ROW_LEAF;
        } else {
            o = tt_put_varint(o, index - fr.first);
            o = tt_put_varint(o, nkids);
        }
        if (start >= prev_end && t->nrows) {
            fl |= TT_ROW_GAP;
            o = tt_put_varint(o, start - prev_end);
        } else {
            o = tt_put_varint(o, end - prev_end);
        }
        o = tt_put_varint(o, dur);
        if (fr.chunk_off == prev_chunk)
            fl |= TT_ROW_SAME_CHUNK;
        else
            o = tt_put_varint(o, zigzag((int64_t)(fr.chunk_off - prev_chunk)));
        base[rows_len] = (uint8_t)fl;
        t->run_at = 0;
        t->rows_len = (size_t)(o - base);
    }
    t->prev_end = end;
    t->prev_chunk = fr.chunk_off;
    t->prev_fn = fr.fn;
    t->prev_depth = depth;
    t->children_total += nkids;
    uint32_t nrows = ++t->nrows;
    summary_add(tb, fr.fn, depth, dur, self, thread, index);
    if (depth) {
        struct open_frame *up = &t->stack[depth - 1];
        if (up->nkids == 0)
            up->kid_start = start;
        up->kid_time += dur;
        up->nkids++;
    }
    if (nrows == TT_FRAME_BLOCK_ROWS)
        flush_block(tb, w, thread, t);
}

void tt_tables_chunk_begin(struct tt_tables *tb, struct tt_writer *w)
{
    tb->chunk_off = tt_writer_tail_(w);
    tb->out_len = 0;
    tb->nfix = 0;
}

/* Writes what the event chunk just written finished: its frame blocks and seek batches. */
/* Writes @t's pending block offsets as a BLOCKS chunk at the writer's tail, so the directory
 * need not keep every block of a long run in memory: it lists the lists. */
static void write_block_list(struct tt_tables *tb, struct tt_writer *w, uint32_t thread,
                             struct tb_thread *t)
{
    if (t->bl_n == 0 || tb->failed)
        return;
    if (!grow(tb, (void **)&t->lists, &t->lists_cap, 2 * (t->nlists + 1), sizeof(uint64_t)))
        return;
    uint8_t *c = malloc(TT_CHUNK_HEADER + t->bl_len);
    if (!c) {
        tb->failed = true;
        return;
    }
    memcpy(c + TT_CHUNK_HEADER, t->bl, t->bl_len);
    uint64_t listed = 0;
    for (uint64_t k = 0; k < t->nlists; k++)
        listed += t->lists[2 * k + 1];
    struct tt_chunk_header h = { .type = TT_CHUNK_BLOCKS, .thread = thread, .first_seq = listed,
                                 .count = t->bl_n, .body_len = (uint32_t)t->bl_len };
    tt_chunk_header_encode(c, &h, c + TT_CHUNK_HEADER);
    t->lists[2 * t->nlists] = tt_writer_tail_(w);
    t->lists[2 * t->nlists + 1] = t->bl_n;
    t->nlists++;
    tt_writer_put_raw_(w, c, TT_CHUNK_HEADER + t->bl_len);
    free(c);
    t->bl_len = 0;
    t->bl_n = 0;
    t->last_off = 0; /* each list starts with an absolute offset */
}

void tt_tables_chunk_end(struct tt_tables *tb, struct tt_writer *w)
{
    uint64_t base = tt_writer_tail_(w);
    if (tb->out_len && !tb->failed)
        tt_writer_put_raw_(w, tb->out, tb->out_len);
    tb->out_len = 0;
    for (size_t i = 0; i < tb->nfix; i++) {
        struct fixup *f = &tb->fix[i];
        if (f->thread == UINT32_MAX) {
            tb->seek_batches[2 * f->at] += base;
            continue;
        }
        /* the directory's list of this thread's blocks, kept as the varints it is written as */
        struct tb_thread *t = &tb->threads[f->thread];
        if (!grow(tb, (void **)&t->bl, &t->bl_cap, t->bl_len + 20, 1))
            break;
        uint8_t *o = tt_put_varint(t->bl + t->bl_len, base + f->at - t->last_off);
        o = tt_put_varint(o, f->back);
        t->bl_len = (size_t)(o - t->bl);
        t->last_off = base + f->at;
        if (++t->bl_n == TT_BLOCK_LIST)
            write_block_list(tb, w, f->thread, t);
    }
    tb->nfix = 0;
}

/* ---------------------------------------------------------------- the checkpoint table
 * (format version 4, docs/FORMAT.md §15). The recording thread knows what a checkpoint or a
 * restore was (its number, site, providers and their sizes: the session's notes), the swapper
 * where its event went (chunk, index in it, time: the marks). At close the two are joined by
 * (thread, seq): checkpoints in number order, restores in the recorded order (time, thread,
 * seq), which is what numbers the epochs. A note without its event (the recording stopped
 * after a write error), or a lack of memory, leaves the file without the table, as the index
 * goes without its tables. Memory: one note and one mark per checkpoint or restore, never per
 * event. */

void tt_tables_mark_(struct tt_tables *tb, uint32_t thread, uint64_t seq, uint64_t time,
                     uint32_t index, uint32_t kind)
{
    if (tb->failed || !grow(tb, (void **)&tb->marks, &tb->marks_cap, tb->nmarks + 1,
                            sizeof *tb->marks))
        return;
    tb->marks[tb->nmarks++] = (struct cp_mark){ thread, index, seq, time, tb->chunk_off, kind };
}

static int cmp_mark(const void *a, const void *b)
{
    const struct cp_mark *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const struct cp_mark *mark_of(const struct tt_tables *tb, uint32_t thread, uint64_t seq)
{
    struct cp_mark key = { .thread = thread, .seq = seq };
    return bsearch(&key, tb->marks, tb->nmarks, sizeof key, cmp_mark);
}

/* restores in the recorded order: by their marks' (time, thread, seq) */
static int cmp_recorded(const void *a, const void *b)
{
    const struct cp_mark *x = *(const struct cp_mark *const *)a;
    const struct cp_mark *y = *(const struct cp_mark *const *)b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool put(struct tt_tables *tb, uint8_t **buf, size_t *len, size_t *cap, uint64_t v);

static void write_checkpoint_table(struct tt_tables *tb, struct tt_writer *w)
{
    tt_session *s = tb->s;
    tt_manifest *m = tt_writer_manifest_(w);
    pthread_mutex_lock(&s->cp_lock); /* the recording threads are done; the notes are final */
    uint64_t ncp = 0, nrest = 0;
    for (uint64_t i = 0; i < s->cp_nnotes; i++)
        ncp += s->cp_notes[i].kind == TT_EV_CHECKPOINT;
    nrest = s->cp_nnotes - ncp;
    const struct cp_mark **rest = NULL;
    uint8_t *b = NULL;
    size_t len = 0, cap = 0;
    bool ok = !tb->failed && !s->cp_notes_lost && s->cp_nnotes > 0 &&
              s->cp_nnotes == tb->nmarks && ncp <= UINT32_MAX && nrest <= UINT32_MAX;
    if (ok) {
        qsort(tb->marks, tb->nmarks, sizeof *tb->marks, cmp_mark);
        rest = malloc((nrest ? nrest : 1) * sizeof *rest);
        ok = rest != NULL;
    }
    /* checkpoints: the notes are in number order (taken under cp_lock), from 0 */
    uint64_t want = 0, r = 0;
    for (uint64_t i = 0; ok && i < s->cp_nnotes; i++) {
        const struct tt_cp_note *n = &s->cp_notes[i];
        const struct cp_mark *mk = mark_of(tb, n->thread, n->seq);
        ok = mk != NULL;
        if (ok && n->kind == TT_EV_RESTORE) {
            rest[r++] = mk;
            continue;
        }
        ok = ok && n->number == want++;
        ok = ok && put(tb, &b, &len, &cap, n->thread) && put(tb, &b, &len, &cap, n->seq) &&
             put(tb, &b, &len, &cap, mk->time) && put(tb, &b, &len, &cap, mk->chunk_off) &&
             put(tb, &b, &len, &cap, mk->index) && put(tb, &b, &len, &cap, n->site) &&
             put(tb, &b, &len, &cap, n->length) && put(tb, &b, &len, &cap, n->nprov);
        for (uint32_t k = 0; ok && k < n->nprov; k++)
            ok = put(tb, &b, &len, &cap, s->cp_prov[n->prov_at + 2 * k]) &&
                 put(tb, &b, &len, &cap, s->cp_prov[n->prov_at + 2 * k + 1]);
    }
    if (ok && nrest)
        qsort(rest, nrest, sizeof *rest, cmp_recorded);
    for (uint64_t k = 0; ok && k < nrest; k++) {
        const struct cp_mark *mk = rest[k];
        /* the note of this event, for its site and the checkpoint it restored */
        const struct tt_cp_note *n = NULL;
        for (uint64_t i = 0; !n && i < s->cp_nnotes; i++)
            if (s->cp_notes[i].kind == TT_EV_RESTORE && s->cp_notes[i].thread == mk->thread &&
                s->cp_notes[i].seq == mk->seq)
                n = &s->cp_notes[i];
        ok = n && n->number < ncp && put(tb, &b, &len, &cap, mk->thread) &&
             put(tb, &b, &len, &cap, mk->seq) && put(tb, &b, &len, &cap, mk->time) &&
             put(tb, &b, &len, &cap, mk->chunk_off) && put(tb, &b, &len, &cap, mk->index) &&
             put(tb, &b, &len, &cap, n->site) && put(tb, &b, &len, &cap, n->number);
    }
    pthread_mutex_unlock(&s->cp_lock);
    if (ok && len <= UINT32_MAX) {
        struct tt_chunk_header h = { .type = TT_CHUNK_CHECKPOINTS, .thread = TT_NO_THREAD,
                                     .count = (uint32_t)(ncp + nrest), .body_len = (uint32_t)len };
        m->checkpoints_offset = tt_writer_tail_(w);
        tt_writer_put_chunk_(w, &h, b);
        if (len > m->largest_chunk) /* a chunk of the data area: it counts (FORMAT.md §3.1) */
            m->largest_chunk = len;
        m->checkpoints_length = TT_CHUNK_HEADER + len;
        m->checkpoint_count = (uint32_t)ncp;
        m->restore_count = (uint32_t)nrest;
    }
    free(rest);
    free(b);
}

void tt_tables_finish(struct tt_tables *tb, struct tt_writer *w)
{
    tt_tables_chunk_begin(tb, w);
    for (uint32_t i = 0; i < tb->nthreads; i++) {
        struct tb_thread *t = &tb->threads[i];
        while (t->depth)
            tt_tables_close_frame_(tb, w, i, t, t->last_time,
                        t->crashed ? TT_FRAME_CRASHED : TT_FRAME_OPEN);
        flush_block(tb, w, i, t);
    }
    tt_tables_flush_seek_(tb, w);
    tt_tables_chunk_end(tb, w);
    for (uint32_t i = 0; i < tb->nthreads; i++)
        write_block_list(tb, w, i, &tb->threads[i]);
    if (tb->s) /* NULL: built after the recording (reindex.c), which carries the table over */
        write_checkpoint_table(tb, w);
}

/* ---------------------------------------------------------------- summary and directory */

static int cmp_fn(const void *a, const void *b)
{
    const struct summary_row *x = a, *y = b;
    return x->fn < y->fn ? -1 : x->fn > y->fn;
}

static bool put(struct tt_tables *tb, uint8_t **buf, size_t *len, size_t *cap, uint64_t v)
{
    if (!grow(tb, (void **)buf, cap, *len + 10, 1))
        return false;
    *len = (size_t)(tt_put_varint(*buf + *len, v) - *buf);
    return true;
}

void tt_tables_write_tail(struct tt_tables *tb, struct tt_writer *w, uint32_t nthreads)
{
    tt_manifest *m = tt_writer_manifest_(w);
    if (tb->failed || tb->marks_only)
        return;
    /* summary: rows sorted by function id */
    uint32_t n = 0;
    for (uint32_t i = 0; i < tb->sum_cap; i++)
        if (tb->sum[i].used)
            tb->sum[n++] = tb->sum[i];
    if (n)
        qsort(tb->sum, n, sizeof *tb->sum, cmp_fn);
    uint8_t *b = NULL;
    size_t len = 0, cap = 0;
    bool ok = true;
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n && ok; i++) {
        const struct summary_row *r = &tb->sum[i];
        ok = put(tb, &b, &len, &cap, r->fn - prev) && put(tb, &b, &len, &cap, r->calls) &&
             put(tb, &b, &len, &cap, r->total) && put(tb, &b, &len, &cap, r->self) &&
             put(tb, &b, &len, &cap, r->max_depth) && put(tb, &b, &len, &cap, r->longest) &&
             put(tb, &b, &len, &cap, r->longest_thread) &&
             put(tb, &b, &len, &cap, r->longest_frame);
        prev = r->fn;
    }
    tb->sum_cap = 0; /* the rows are compacted: the hash is gone */
    /* both bodies are built before either is written: the file gets both or neither */
    uint64_t sum_off = tt_writer_tail_(w), sum_len = TT_CHUNK_HEADER + len;
    uint8_t *d = NULL;
    size_t dlen = 0, dcap = 0;
    ok = ok && put(tb, &d, &dlen, &dcap, TT_FRAME_BLOCK_ROWS) &&
         put(tb, &d, &dlen, &dcap, TT_SEEK_EVERY) && put(tb, &d, &dlen, &dcap, sum_off) &&
         put(tb, &d, &dlen, &dcap, sum_len) && put(tb, &d, &dlen, &dcap, nthreads);
    for (uint32_t i = 0; i < nthreads && ok; i++) {
        struct tb_thread z = { 0 }, *t = i < tb->nthreads ? &tb->threads[i] : &z;
        ok = put(tb, &d, &dlen, &dcap, t->frames) &&
             put(tb, &d, &dlen, &dcap, t->children_total) &&
             put(tb, &d, &dlen, &dcap, t->max_depth) && put(tb, &d, &dlen, &dcap, t->crashed) &&
             put(tb, &d, &dlen, &dcap, t->nblocks);
        for (unsigned k = 1; k <= TT_EV_KIND_MAX && ok; k++)
            ok = put(tb, &d, &dlen, &dcap, t->kinds[k]);
        ok = ok && put(tb, &d, &dlen, &dcap, t->nlists);
        uint64_t prev_list = 0;
        for (uint64_t k = 0; k < t->nlists && ok; k++) {
            ok = put(tb, &d, &dlen, &dcap, t->lists[2 * k] - prev_list) &&
                 put(tb, &d, &dlen, &dcap, t->lists[2 * k + 1]);
            prev_list = t->lists[2 * k];
        }
    }
    ok = ok && put(tb, &d, &dlen, &dcap, tb->seek_total) &&
         put(tb, &d, &dlen, &dcap, tb->nseek_batches);
    uint64_t prev_off = 0;
    for (uint64_t k = 0; k < tb->nseek_batches && ok; k++) {
        ok = put(tb, &d, &dlen, &dcap, tb->seek_batches[2 * k] - prev_off) &&
             put(tb, &d, &dlen, &dcap, tb->seek_batches[2 * k + 1]);
        prev_off = tb->seek_batches[2 * k];
    }
    if (ok) {
        struct tt_chunk_header h = { .type = TT_CHUNK_SUMMARY, .thread = TT_NO_THREAD,
                                     .count = n, .body_len = (uint32_t)len };
        tt_writer_put_chunk_(w, &h, b);
        m->index_offset = tt_writer_tail_(w);
        h = (struct tt_chunk_header){ .type = TT_CHUNK_INDEX, .thread = TT_NO_THREAD,
                                      .count = nthreads, .body_len = (uint32_t)dlen };
        tt_writer_put_chunk_(w, &h, d);
        m->index_length = TT_CHUNK_HEADER + dlen;
    }
    free(d);
    free(b);
}
