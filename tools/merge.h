/* SPDX-License-Identifier: MIT */
/* tinytrace — the recorded order of several threads' events: a merge of per-thread cursors.
 *
 * The recorded order is the total order (time, thread, seq) of event.h. Chunks in a file are in
 * the order the swapper wrote them, not in that order, so a verb that wants the events in
 * recorded order opens its reader with one cursor per recorded thread (TT_CURSORS_PER_THREAD):
 * each cursor yields its thread's events in program order, and the merge keeps the head of each
 * (tt_reader_peek_ref, no copy) in a binary min-heap keyed by (time, thread, seq, cursor). The
 * smallest head is the next event of the recorded order; taking it advances its cursor and
 * sifts the cursor's next head down from the top. Memory is a pointer and an index per cursor;
 * time is O(log cursors) per event: for 10^5 threads, a sift through 17 levels of the heap (two
 * comparisons a level), where a scan of the heads would compare 10^5.
 *
 *     tool_merge mg;
 *     if (tool_merge_init(&mg, t->r, t->cap.cursors) != TT_OK) ...out of memory...
 *     for (uint32_t c = 0; c < t->cap.cursors && rc == TT_OK; c++)
 *         rc = tool_merge_add(&mg, c, &err);          // any subset of the cursors
 *     while (rc == TT_OK && (ev = tool_merge_head(&mg)) != NULL) {
 *         ...use ev...                                // valid until tool_merge_next
 *         rc = tool_merge_next(&mg, &err);
 *     }
 *     tool_merge_free(&mg);
 *
 * The cursor number breaks ties, so the order is total even between two events a damaged file
 * gives the same (time, thread, seq): the output does not depend on how the heap was built.
 *
 * Many threads. A per-thread cursor finds its thread's next chunk by reading the chunk headers
 * after its current one, and finds that it has ended by reading them to the end of the data
 * (the reader, store.h): for a trace of T threads of a few events each, that is T x chunks
 * header reads, 4 * 10^8 for 20 000 threads. So the merge does neither where it can: a cursor
 * whose thread has delivered as many events as the thread table counts is done without
 * another read (tool_merge_next), a thread with no events is never read (tool_merge_add), and
 * tool_cursor_begin puts a cursor at its thread's first chunk through the seek index instead of
 * a scan from the start of the data. What this leaves unread is a thread's chunks after the
 * count its thread table gives; the sequential pass of `tinytrace verify` checks those counts
 * against the chunks. The cost left is the reader's scan between two chunks of one thread: the
 * headers of the other threads' chunks in between.
 */
#ifndef TINYTRACE_TOOL_MERGE_H
#define TINYTRACE_TOOL_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/tinytrace.h>

typedef struct tool_merge {
    tt_reader *r;
    const tt_event **heads; /* heads[c]: cursor c's head (the reader's), while c is in the heap */
    uint32_t *heap;         /* cursor numbers, heap-ordered by their heads */
    uint64_t *ends;         /* ends[c]: thread c's event count (the thread table) */
    uint32_t len;           /* cursors in the heap */
    uint32_t cursors;
} tool_merge;

/* An empty merge over the per-thread cursors 0 .. @cursors - 1 of @r (TT_CURSORS_PER_THREAD:
 * cursor c reads thread c). TT_OK, or TT_E_NOMEM (then *@mg needs no tool_merge_free, and one
 * is harmless). */
int tool_merge_init(tool_merge *mg, tt_reader *r, uint32_t cursors);

/* Puts cursor @c (not already in the merge) in: peeks its next event. TT_OK, also when the
 * cursor has no events left or its thread has none (it then stays out); else the reader's
 * error, with @err filled. */
int tool_merge_add(tool_merge *mg, uint32_t c, tt_error_info *err);

/* Puts per-thread cursor @c of @r, not yet read, at the first event of its thread through the
 * seek index @ix (tt_index_seek_seq, tt_reader_seek), so that it reads no other thread's chunk
 * headers before its own. Nothing to do when @ix is NULL (no index tables) or the thread has
 * no events. Where the seek index cannot be used (damaged: the seek fails and moves nothing)
 * the cursor stays at the start and scans from there, as without an index: the events and
 * their checks are the same either way, only the cost differs. */
void tool_cursor_begin(tt_reader *r, tt_index *ix, uint32_t c);

/* Whether @ev, read by the per-thread cursor of its thread in @r, is that thread's last event
 * as its thread table counts them: the cursor has nothing more to give, and reading on would
 * only scan the rest of the data to find that out. */
static inline int tool_cursor_at_end(const tt_reader *r, const tt_event *ev)
{
    const tt_thread_entry *e = tt_reader_thread(r, ev->tp.thread);
    return e == NULL || ev->tp.seq + 1 >= e->event_count;
}

/* The next event in recorded order, or NULL when every cursor in the merge has ended. Owned by
 * the reader, valid until tool_merge_next or tool_merge_free. */
static inline const tt_event *tool_merge_head(const tool_merge *mg)
{
    return mg->len > 0 ? mg->heads[mg->heap[0]] : NULL;
}

/* The cursor of tool_merge_head (call only while there is one). */
static inline uint32_t tool_merge_head_cursor(const tool_merge *mg)
{
    return mg->heap[0];
}

/* Consumes tool_merge_head and peeks its cursor's next event. TT_OK, or the reader's error
 * (with @err filled; the merge is then only fit for tool_merge_free). */
int tool_merge_next(tool_merge *mg, tt_error_info *err);

/* Frees the heap; the reader and its cursors are the caller's. */
void tool_merge_free(tool_merge *mg);

#endif
