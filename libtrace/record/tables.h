/* SPDX-License-Identifier: MIT */
/* The index tables' per-event step, inline in the swapper's encode loop (writer.c), and the
 * state it works on. The rest, and the essay on what the tables hold, is in tables.c. */
#ifndef TT_STORE_TABLES_H
#define TT_STORE_TABLES_H

#include <stdbool.h>
#include <stdint.h>

#include "record.h"

struct open_frame {
    uint32_t fn;
    uint32_t pad_;
    uint64_t start;
    uint64_t chunk_off;   /* event chunk holding the enter */
    uint64_t first;       /* post-order number of the first frame that can be in its subtree */
    uint64_t nkids;       /* its children closed so far */
    uint64_t kid_time;    /* sum of its children's durations */
    uint64_t kid_start;   /* its first child's start (once nkids > 0): a parent row's lead */
};

struct tb_thread {
    struct open_frame *stack;
    uint32_t depth;
    size_t stack_cap;
    uint64_t frames;          /* rows emitted (next post-order number) */
    uint64_t children_total;  /* frames that have a parent */
    /* the block being filled */
    uint8_t *rows;
    size_t rows_len, rows_cap;
    uint32_t nrows;
    size_t run_at;            /* rows offset of the open run's byte + 1; 0: none */
    uint64_t blk_first_end, prev_end, prev_chunk, blk_min_first;
    uint32_t prev_fn, prev_depth;
    /* directory: offset and smallest subtree start of every written block */
    uint8_t *bl;              /* per block: varint offset delta, varint reach-back (§14.3) */
    size_t bl_len, bl_cap;
    uint64_t nblocks, last_off;
    uint32_t bl_n;            /* blocks in bl, not yet written as a BLOCKS chunk */
    uint64_t *lists;          /* (offset, count) of its BLOCKS chunks */
    uint64_t nlists, lists_cap;
    uint64_t kinds[TT_EV_KIND_MAX + 1];
    uint64_t last_time;
    uint32_t max_depth;
    bool crashed;
};

struct summary_row {
    uint32_t fn;
    uint32_t max_depth;
    bool used;
    uint64_t calls, total, self, longest;
    uint32_t longest_thread;
    uint64_t longest_frame;
};

struct tt_tables {
    struct tb_thread *threads;
    uint32_t nthreads;
    struct summary_row *sum;
    uint32_t sum_cap, sum_used;
    uint32_t sum_last;        /* slot of the last function added: loops repeat it */
    /* seek batch */
    uint8_t *seek;
    size_t seek_len, seek_cap;
    uint32_t seek_n;
    uint64_t seek_total, seek_prev_off;
    uint64_t *seek_batches;   /* (offset, count) pairs */
    uint64_t nseek_batches, seek_batches_cap;
    /* chunks produced while an event chunk is being encoded, written after it */
    uint8_t *out;
    size_t out_len, out_cap;
    uint64_t chunk_off;       /* offset the event chunk being encoded will get */
    /* offsets of staged chunks are outbox-relative until the outbox is written: which
     * directory entries to fix up then (thread, block; UINT32_MAX = a seek batch) */
    struct fixup { uint32_t thread; uint64_t at, back; } *fix;
    size_t nfix, fix_cap;
    bool failed;              /* out of memory: the file gets no index */
    bool marks_only;          /* TT_PARAM_INDEX 0: no index, only the checkpoint marks below */
    /* where each checkpoint and restore event went (tt_tables_mark_), for the checkpoint table
     * (tables.c, at close, with the session's notes of them) */
    tt_session *s;
    struct cp_mark { uint32_t thread, index; uint64_t seq, time, chunk_off; uint32_t kind; } *marks;
    size_t nmarks, marks_cap;
};

bool tt_tables_grow_(struct tt_tables *tb, void **p, size_t *cap, size_t need, size_t elem);
struct tb_thread *tt_tables_thread_(struct tt_tables *tb, uint32_t id);
void tt_tables_flush_seek_(struct tt_tables *tb, struct tt_writer *w);
void tt_tables_close_frame_(struct tt_tables *tb, struct tt_writer *w, uint32_t thread,
                            struct tb_thread *t, uint64_t end, unsigned outcome);
/* A checkpoint or restore event: where it is, for the checkpoint table. */
void tt_tables_mark_(struct tt_tables *tb, uint32_t thread, uint64_t seq, uint64_t time,
                     uint32_t index, uint32_t kind);


/* The summary row used last is @fn's, and the table needs no growing before it is updated
 * (summary_add grows it at half full): the case of a loop, which repeats its function. */
static inline bool summary_last_is(const struct tt_tables *tb, uint32_t fn)
{
    return tb->sum_last < tb->sum_cap && tb->sum[tb->sum_last].used &&
           tb->sum[tb->sum_last].fn == fn && tb->sum_used * 2 < tb->sum_cap;
}

/* Makes room for @need elements; the check is inline, the growing is not (per event). */
static inline bool grow(struct tt_tables *tb, void **p, size_t *cap, size_t need, size_t elem)
{
    return TT_LIKELY(need <= *cap) || tt_tables_grow_(tb, p, cap, need, elem);
}

/* close_frame's commonest case in a few stores: the top frame is a leaf that repeats the
 * previous row (same function, depth and enter chunk, started after it ended), so its row joins
 * a run of repeats (TT_ROW_RUN), its summary row is the one last used, and the block is not
 * full after it. Returns false, having changed nothing, when any of that does not hold. */
static inline bool leaf_again(struct tt_tables *tb, struct tb_thread *t, uint64_t end)
{
    const uint32_t depth = t->depth - 1;
    const struct open_frame *fr = &t->stack[depth];
    const uint64_t index = t->frames, prev_end = t->prev_end;
    size_t rows_len = t->rows_len, run_at = t->run_at;
    if (!(index == fr->first && fr->fn == t->prev_fn && depth == t->prev_depth &&
          fr->chunk_off == t->prev_chunk && fr->start >= prev_end && end >= fr->start &&
          run_at && t->rows[run_at - 1] < (TT_ROW_RUN | TT_ROW_RUN_MAX) &&
          rows_len + 20 <= t->rows_cap && t->nrows + 1 < TT_FRAME_BLOCK_ROWS &&
          summary_last_is(tb, fr->fn)))
        return false;
    const uint64_t start = fr->start, dur = end - start;
    uint8_t *base = t->rows;
    base[run_at - 1]++;
    uint8_t *o = tt_put_varint(base + rows_len, start - prev_end);
    o = tt_put_varint(o, dur);
    t->rows_len = (size_t)(o - base);
    t->prev_end = end;
    t->frames = index + 1;
    t->nrows++;
    t->depth = depth;
    struct summary_row *r = &tb->sum[tb->sum_last];
    r->calls++;
    r->total += dur;
    r->self += dur;
    if (dur > r->longest) {
        r->longest = dur;
        r->longest_thread = (uint32_t)(t - tb->threads);
        r->longest_frame = index;
    }
    if (depth) {
        t->stack[depth - 1].kid_time += dur;
        t->stack[depth - 1].nkids++;
    }
    return true;
}

/* The tables of thread @thread, made on its first event; NULL when out of memory. */
static inline struct tb_thread *tt_tables_of(struct tt_tables *tb, uint32_t thread)
{
    return thread < tb->nthreads ? &tb->threads[thread] : tt_tables_thread_(tb, thread);
}

/* One event of thread @thread (whose tables @t are, from tt_tables_of, resolved once per
 * buffer: a buffer holds one thread's events), the @index-th of the event chunk being encoded,
 * as the swapper encodes it. */
static inline void tt_tables_event(struct tt_tables *restrict tb, struct tt_writer *w,
                                   struct tb_thread *restrict t, uint32_t thread, uint32_t kind,
                                   uint32_t fn, uint64_t time, uint64_t seq, uint32_t index)
{
    if (TT_UNLIKELY(tb->failed || kind > TT_EV_KIND_MAX))
        return;
    t->kinds[kind]++;
    t->last_time = time;
    if (TT_UNLIKELY(seq % TT_SEEK_EVERY == 0)) {
        if (grow(tb, (void **)&tb->seek, &tb->seek_cap, tb->seek_len + 60, 1)) {
            /* an entry: thread, seq / K, time, chunk offset delta, index in chunk */
            uint8_t *o = tb->seek + tb->seek_len;
            o = tt_put_varint(o, thread);
            o = tt_put_varint(o, seq / TT_SEEK_EVERY);
            o = tt_put_varint(o, time);
            o = tt_put_varint(o, tb->chunk_off - tb->seek_prev_off);
            o = tt_put_varint(o, index);
            tb->seek_len = (size_t)(o - tb->seek);
            tb->seek_prev_off = tb->chunk_off;
            tb->seek_n++;
            tb->seek_total++;
            if (tb->seek_n == TT_SEEK_BATCH)
                tt_tables_flush_seek_(tb, w);
        }
    }
    if (kind == TT_EV_ENTER) {
        if (!grow(tb, (void **)&t->stack, &t->stack_cap, (size_t)t->depth + 1,
                  sizeof *t->stack))
            return;
        struct open_frame *f = &t->stack[t->depth++];
        f->fn = fn;
        f->start = time;
        f->chunk_off = tb->chunk_off;
        f->first = t->frames;
        f->nkids = 0;
        f->kid_time = 0;
        if (t->depth > t->max_depth)
            t->max_depth = t->depth;
    } else if (kind == TT_EV_EXIT) {
        /* the innermost open frame of this function; the frames above it lost their exit
         * (longjmp, an exception): they end here, ABANDONED */
        uint32_t d = t->depth;
        if (TT_LIKELY(d > 0 && t->stack[d - 1].fn == fn)) {
            if (leaf_again(tb, t, time))
                return;
            tt_tables_close_frame_(tb, w, thread, t, time, TT_FRAME_RETURNED);
            return;
        }
        while (d > 0 && t->stack[d - 1].fn != fn)
            d--;
        if (d == 0)
            return; /* an exit without its enter (recording began inside the call) */
        while (t->depth > d)
            tt_tables_close_frame_(tb, w, thread, t, time, TT_FRAME_ABANDONED);
        tt_tables_close_frame_(tb, w, thread, t, time, TT_FRAME_RETURNED);
    } else if (kind == TT_EV_CRASH) {
        t->crashed = true;
    } else if (TT_UNLIKELY(kind == TT_EV_CHECKPOINT || kind == TT_EV_RESTORE)) {
        tt_tables_mark_(tb, thread, seq, time, index, kind);
    }
}

#endif
