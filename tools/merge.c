/* SPDX-License-Identifier: MIT */
/* tinytrace — the recorded-order merge of per-thread cursors (merge.h: the order, the cost). */
#include "merge.h"

#include <stdlib.h>

/* The total order of a recording: (time, thread, seq), then the cursor. */
static int head_before(const tool_merge *mg, uint32_t a, uint32_t b)
{
    const tt_event *x = mg->heads[a], *y = mg->heads[b];
    if (x->time != y->time)
        return x->time < y->time;
    if (x->tp.thread != y->tp.thread)
        return x->tp.thread < y->tp.thread;
    if (x->tp.seq != y->tp.seq)
        return x->tp.seq < y->tp.seq;
    return a < b;
}

static void sift_down(tool_merge *mg, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i, tmp;
        if (l < mg->len && head_before(mg, mg->heap[l], mg->heap[m]))
            m = l;
        if (r < mg->len && head_before(mg, mg->heap[r], mg->heap[m]))
            m = r;
        if (m == i)
            return;
        tmp = mg->heap[i];
        mg->heap[i] = mg->heap[m];
        mg->heap[m] = tmp;
        i = m;
    }
}

static void sift_up(tool_merge *mg, uint32_t i)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2, tmp;
        if (!head_before(mg, mg->heap[i], mg->heap[parent]))
            return;
        tmp = mg->heap[i];
        mg->heap[i] = mg->heap[parent];
        mg->heap[parent] = tmp;
        i = parent;
    }
}

int tool_merge_init(tool_merge *mg, tt_reader *r, uint32_t cursors)
{
    mg->r = r;
    mg->len = 0;
    mg->cursors = cursors;
    mg->heads = calloc(cursors ? cursors : 1, sizeof *mg->heads);
    mg->heap = calloc(cursors ? cursors : 1, sizeof *mg->heap);
    mg->ends = calloc(cursors ? cursors : 1, sizeof *mg->ends);
    if (mg->heads == NULL || mg->heap == NULL || mg->ends == NULL) {
        tool_merge_free(mg);
        return TT_E_NOMEM;
    }
    for (uint32_t c = 0; c < cursors; c++) {
        const tt_thread_entry *e = tt_reader_thread(r, c);
        mg->ends[c] = e != NULL ? e->event_count : 0;
    }
    return TT_OK;
}

int tool_merge_add(tool_merge *mg, uint32_t c, tt_error_info *err)
{
    /* @err is filled only on a failure, and a failure ends the merge: callers initialize it
     * once, not per event */
    if (mg->ends[c] == 0)
        return TT_OK; /* no events: a peek would only scan the data to find none */
    int rc = tt_reader_peek_ref(mg->r, c, &mg->heads[c], err);
    if (rc == TT_E_END)
        return TT_OK;
    if (rc == TT_OK) {
        mg->heap[mg->len] = c;
        sift_up(mg, mg->len++);
    }
    return rc;
}

void tool_cursor_begin(tt_reader *r, tt_index *ix, uint32_t c)
{
    const tt_thread_entry *e = tt_reader_thread(r, c);
    tt_timepoint_entry at;
    tt_error_info err; /* a refused seek changes nothing (store.h): the scan from the start */

    if (ix == NULL || e == NULL || e->event_count == 0)
        return;
    if (tt_index_seek_seq(ix, c, 0, &at, &err) == TT_OK)
        (void)tt_reader_seek(r, c, &at, &err);
}

int tool_merge_next(tool_merge *mg, tt_error_info *err)
{
    uint32_t c = mg->heap[0];
    int rc;

    /* the thread's last event as the thread table counts them: done, without the scan to the
     * end of the data that would find no more (merge.h) */
    int last = mg->heads[c]->tp.seq + 1 >= mg->ends[c];
    tt_reader_advance(mg->r, c);
    rc = last ? TT_E_END : tt_reader_peek_ref(mg->r, c, &mg->heads[c], err);
    if (rc == TT_E_END) {
        mg->heap[0] = mg->heap[--mg->len]; /* c is done: the last cursor takes its place */
        rc = TT_OK;
    } else if (rc != TT_OK) {
        return rc;
    }
    /* c's next head, or the moved cursor, at the top: one sift restores the order (a pop and a
     * push would be two) */
    sift_down(mg, 0);
    return rc;
}

void tool_merge_free(tool_merge *mg)
{
    free(mg->heads);
    free(mg->heap);
    free(mg->ends);
    mg->heads = NULL;
    mg->heap = NULL;
    mg->ends = NULL;
    mg->len = 0;
}
