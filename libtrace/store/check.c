/* SPDX-License-Identifier: MIT */
/* tt_index_check: every frame row of every thread decoded and checked against the call tree it
 * claims, the summary and the seek index (FORMAT.md §14.7, invariants I5-I8). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index-int.h"


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

/* The check of one thread's frames, as it goes. */
struct thread_check {
    struct pend *st;          /* by depth */
    uint64_t children;
    uint32_t top;             /* the depth of the last frame: nothing deeper is pending */
    uint64_t blk_low;         /* the lowest subtree start of the current block's rows so far */
    uint64_t stack;           /* the deepest open-frame stack the rows imply: depth + 1 */
    const tt_summary_entry *se;
};

/* Frame @i of thread @th, row @row of block @b (at @off, whose list says its subtrees reach
 * back to @low): its place in the tree (its children are the pending frames one level down),
 * and its summary row recomputed into @re. */
static int check_frame(tt_index *ix, struct thread_check *c, tt_summary_entry *re, uint32_t th,
                       uint64_t i, const struct drow *d, uint64_t row, uint64_t b, uint64_t off,
                       uint64_t low, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const struct ithread *t = &ix->threads[th];
    const struct { uint32_t function, depth; uint64_t desc, start, duration, child_count; }
        f = { d->fn, d->depth, d->desc, d->start, d->dur, d->nch };
    /* the block list's reach-back, which tt_index_parent trusts to skip blocks, is the lowest
     * subtree start of the block's rows (§14.9) */
    uint64_t lo = i - f.desc; /* desc <= i: checked when the block was decoded */
    if (row == 0 || lo < c->blk_low)
        c->blk_low = lo;
    if ((row + 1 == ix->block_rows || i + 1 == t->info.frames) && c->blk_low != low)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: the block list of thread %u says the "
                       "subtrees of block %" PRIu64 " (offset %" PRIu64 ") reach back to frame %"
                       PRIu64 ", its rows reach back to frame %" PRIu64, nm, th, b, off, low,
                       c->blk_low);
    /* its children are the pending frames one level down, which must end just before it and
     * cover its whole subtree; nothing deeper may be pending */
    const struct pend *k = &c->st[f.depth + 1];
    uint64_t fend = f.start + f.duration;
    if (c->top > f.depth + 1)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame %" PRIu64 " of thread %u (block at "
                       "offset %" PRIu64 ") leaves deeper frames without a parent", nm, i, th, off);
    if (k->n != f.child_count || k->desc != f.desc ||
        (k->n && (k->last_index != i - 1 || k->first_start < f.start || k->last_end > fend)))
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame %" PRIu64 " of thread %u (block at "
                       "offset %" PRIu64 ") has %" PRIu64 " children and %" PRIu64 " descendants;"
                       " the frames before it give %" PRIu64 " and %" PRIu64 ", or their times "
                       "or order do not fit", nm, i, th, off, f.child_count, f.desc, k->n,
                       k->desc);
    uint64_t kid_time = k->time;
    if ((uint64_t)f.depth + 1 > c->stack)
        c->stack = (uint64_t)f.depth + 1;
    c->children += f.child_count;
    c->st[f.depth + 1] = (struct pend){ 0 };
    struct pend *me = &c->st[f.depth];
    if (me->n && f.start < me->last_end)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: frame %" PRIu64 " of thread %u (block at "
                       "offset %" PRIu64 ") starts before its previous sibling ends", nm, i, th,
                       off);
    if (!me->n)
        me->first_start = f.start;
    me->n++;
    me->desc += f.desc + 1;
    me->time += f.duration;
    me->last_end = fend;
    me->last_index = i;
    c->top = f.depth;
    /* recompute the summary from the rows (a loop repeats the function: no search) */
    if (!c->se || c->se->function != f.function)
        c->se = bsearch(&f.function, ix->sum, ix->nsum, sizeof *ix->sum, cmp_sum);
    if (!c->se)
        return tt_fail(err, TT_E_CORRUPT, 0, ix->sum_off, "%s: function %u of frame %" PRIu64
                       " has no summary row", nm, f.function, i);
    tt_summary_entry *r = &re[c->se - ix->sum];
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
    return TT_OK;
}

/* Every frame of thread @th, in post-order, straight from the decoded blocks (a check of 10^8
 * frames must not pay a lookup per frame), then the thread's totals against the directory.
 * @st has room for @cap depths (grown here). */
static int check_thread(tt_index *ix, uint32_t th, struct pend **st, uint64_t *cap,
                        tt_summary_entry *re, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    const struct ithread *t = &ix->threads[th];
    if ((uint64_t)t->info.max_depth + 2 > *cap) {
        uint64_t nc = (uint64_t)t->info.max_depth + 2;
        struct pend *ns = tt_ix_realloc(ix, *st, nc * sizeof *ns);
        if (!ns)
            return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)",
                           nm);
        *st = ns;
        *cap = nc;
    }
    memset(*st, 0, *cap * sizeof **st);
    struct thread_check c = { .st = *st };
    struct slot *blk = NULL;
    uint64_t b = UINT64_MAX, row = ix->block_rows; /* (no division per frame) */
    uint64_t off = 0, low = 0; /* block b's offset and reach-back, from its list */
    int rc = TT_OK;
    for (uint64_t i = 0; i < t->info.frames && rc == TT_OK; i++, row++) {
        if (row == ix->block_rows) {
            row = 0;
            if ((rc = tt_ix_get_block(ix, th, ++b, &blk, err)) != TT_OK ||
                (rc = tt_ix_block_at(ix, th, b, &off, &low, err)) != TT_OK)
                break;
        }
        rc = check_frame(ix, &c, re, th, i, &blk->rows[row], row, b, off, low, err);
    }
    if (rc != TT_OK)
        return rc;
    if (c.stack != t->info.max_depth)
        return tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: the frames of thread %u nest "
                       "%" PRIu64 " deep, the directory says %u", nm, th, c.stack,
                       t->info.max_depth);
    if (c.children != t->info.children)
        return tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: thread %u has %" PRIu64
                       " children, the directory says %" PRIu64, nm, th, c.children,
                       t->info.children);
    for (uint32_t d = 1; d < *cap; d++)
        if (c.st[d].n)
            return tt_fail(err, TT_E_CORRUPT, 0, m->index_offset, "%s: frame %" PRIu64 " of "
                           "thread %u has no parent but depth %u", nm, c.st[d].last_index, th, d);
    return TT_OK;
}

/* The summary against the rows recomputed from the frames (@re). */
static int check_summary(tt_index *ix, const tt_summary_entry *re, tt_error_info *err)
{
    const char *nm = ix->src->name;
    for (uint32_t i = 0; i < ix->nsum; i++) {
        const tt_summary_entry *a = &ix->sum[i], *b = &re[i];
        if (a->calls != b->calls || a->total != b->total || a->self != b->self ||
            a->max_depth != b->max_depth || a->longest != b->longest)
            return tt_fail(err, TT_E_CORRUPT, 0, ix->sum_off, "%s: the summary row of function "
                           "%u differs from its frames", nm, a->function);
        /* the call it names as the longest is one of this function that took that long */
        tt_frame lf;
        int rc = tt_index_frame(ix, a->longest_thread, a->longest_frame, &lf, err);
        if (rc != TT_OK)
            return rc;
        if (lf.function != a->function || lf.duration != a->longest)
            return tt_fail(err, TT_E_CORRUPT, 0, ix->sum_off, "%s: the summary row of function "
                           "%u names frame %" PRIu64 " of thread %u as its longest call, which "
                           "is not", nm, a->function, a->longest_frame, a->longest_thread);
    }
    return TT_OK;
}

/* Every seek entry names an event chunk of its thread that holds that event. */
static int check_seek(tt_index *ix, tt_error_info *err)
{
    const char *nm = ix->src->name;
    const tt_manifest *m = ix->m;
    int rc = tt_ix_ensure_seek(ix, err);
    for (uint64_t i = 0; rc == TT_OK && i < ix->nseek; i++) {
        const tt_timepoint_entry *e = &ix->seek[i];
        uint8_t raw[TT_CHUNK_HEADER];
        struct tt_chunk_header h;
        if (e->chunk_offset > m->data_end - TT_CHUNK_HEADER)
            return tt_fail(err, TT_E_CORRUPT, 0, e->chunk_offset, "%s: seek entry at %" PRIu64
                           " is outside the data area", nm, e->chunk_offset);
        if ((rc = tt_ix_rd(ix, e->chunk_offset, raw, sizeof raw, err, "a chunk header")) != TT_OK)
            break;
        if (tt_chunk_header_decode(raw, &h) || h.type != TT_CHUNK_EVENTS || h.thread != e->thread ||
            e->seq < h.first_seq || e->seq - h.first_seq >= h.count ||
            e->seq - h.first_seq != e->index)
            return tt_fail(err, TT_E_CORRUPT, 0, e->chunk_offset, "%s: seek entry (thread %u, seq "
                           "%" PRIu64 ") does not match the chunk at offset %" PRIu64, nm,
                           e->thread, e->seq, e->chunk_offset);
    }
    return rc;
}

int tt_index_check(tt_index *ix, tt_error_info *err)
{
    const char *nm = ix->src->name;
    tt_summary_entry *re = tt_ix_calloc(ix, ix->nsum ? ix->nsum : 1, sizeof *re);
    struct pend *st = NULL;
    uint64_t cap = 0;
    if (!re)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "%s: out of memory (or over max_total)", nm);
    int rc = TT_OK;
    for (uint32_t th = 0; th < ix->nthreads && rc == TT_OK; th++)
        rc = check_thread(ix, th, &st, &cap, re, err);
    if (rc == TT_OK)
        rc = check_summary(ix, re, err);
    if (rc == TT_OK)
        rc = check_seek(ix, err);
    tt_ix_free(ix, st);
    tt_ix_free(ix, re);
    return rc;
}
