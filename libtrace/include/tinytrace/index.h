/* SPDX-License-Identifier: MIT */
/* tinytrace — the index tables of a trace: frames, per-function summary, seek index.
 *
 * A version-2 file recorded by a session (not into caller storage) carries index tables that
 * the swapper built while recording (docs/FORMAT.md §14): one frame row per call, a summary row
 * per function, per-thread counts of every event kind, and a seek index that maps every
 * K-th event of each thread to its chunk. They answer "what was the call tree", "where did the
 * time go" and "where in the file is event N / time T" without reading the events.
 *
 * Opening: tt_index_open() reads the manifest's directory chunk and the summary chunk, and
 * reads and checks every frame block list and seek batch one chunk at a time, keeping none of
 * them: its memory is the same for a run of 10^6 events and one of 10^10. Each read is
 * bounded: a table is refused (TT_E_CAPACITY) before it is read if it is larger than
 * @lim->max_table, and the index as a whole if it would need more than @lim->max_total bytes.
 * What a lookup needs is read on the first lookup that needs it: a thread's block offsets
 * (16 bytes per block of 256 frames) on its first frame lookup, the seek index (32 bytes per
 * entry, one entry per tt_index_seek_every() events) on the first seek. Frame rows are never
 * all in memory: they are read a block (256 rows as written, one seek and one read) at a time
 * into a small fixed cache, so a lookup costs at most one read.
 *
 * Every offset, count and index read from the file is checked before use: against the manifest
 * (offsets inside the file, blocks inside the data area, counts against the thread table), the
 * directory (a block's first frame and row count) and the caller's limits. A failure names the
 * file, the offset and what was wrong (tt_error_info).
 *
 * Ownership: the index borrows @r (its source, manifest and tables) and must be closed before
 * it. Thread safety: an index is used by one thread at a time (lookups fill its block cache);
 * different indexes over one file may be used from different threads. Nothing here is
 * async-signal-safe.
 *
 * Example (r: a reader opened as in store.h's example; each "…" stands for the caller's
 * handling of the error that err describes; the test header-examples compiles and runs it):
 *     tt_index *ix; tt_error_info err;
 *     if (tt_index_open(r, NULL, &ix, &err) != TT_OK) …
 *     const tt_index_thread *ti = tt_index_thread_info(ix, 0);
 *     tt_frame f;
 *     for (uint64_t i = ti->frames; i-- > 0; i -= f.desc)     // the thread's top-level calls,
 *         if (tt_index_frame(ix, 0, i, &f, &err) != TT_OK) …  // last to first
 *     tt_index_close(ix);
 */
#ifndef TINYTRACE_INDEX_H
#define TINYTRACE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/error.h>
#include <tinytrace/event.h>
#include <tinytrace/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a frame ended. */
typedef enum tt_frame_outcome {
    TT_FRAME_RETURNED = 0,  /* its exit event was recorded */
    TT_FRAME_CRASHED = 1,   /* open when its thread recorded a crash event: unwound by it */
    TT_FRAME_OPEN = 2,      /* still open when the recording ended */
    TT_FRAME_ABANDONED = 3, /* an enclosing frame exited first (longjmp, exception) */
} tt_frame_outcome;

#define TT_FRAME_NONE UINT64_MAX

/* Frame: one call. Numbers are per thread, in post-order (a frame after all its descendants),
 * so a frame's subtree is the contiguous range [index - desc, index]. Times are ticks since
 * session open (tt_manifest.ticks_per_sec). A frame still open at the end has the time of its
 * thread's last event as its end. */
typedef struct tt_frame {
    uint64_t index;
    tt_thread_id thread;
    uint32_t function;        /* function id (object table) */
    uint32_t depth;           /* 0 for a top-level call */
    uint32_t outcome;         /* tt_frame_outcome */
    uint64_t desc;            /* number of descendants */
    uint64_t start, duration; /* ticks */
    uint64_t child_count;     /* direct children (tt_frame_last_child, tt_frame_prev_child) */
    uint64_t chunk_offset;    /* file offset of the event chunk that holds its enter event */
} tt_frame;

/* SummaryEntry: one function's totals over all threads. @total adds up every call's duration,
 * so a recursive function's nested time counts once per level; @self excludes the time of
 * direct children. */
typedef struct tt_summary_entry {
    uint32_t function;
    uint32_t max_depth;       /* deepest nesting (0 = top level) of any call */
    uint64_t calls;
    uint64_t total, self;     /* ticks */
    uint64_t longest;         /* ticks of the longest single call */
    tt_thread_id longest_thread;
    uint64_t longest_frame;   /* its frame index in that thread */
} tt_summary_entry;

/* TimepointEntry: one seek-index entry. Event @seq of @thread (the per-thread sequence number
 * of its timepoint) has time @time and is event number @index (0-based) of the event chunk at
 * file offset @chunk_offset. Entries exist for every seq that is a multiple of
 * tt_index_seek_every() in every thread, so seq 0 of every thread with events has one. */
typedef struct tt_timepoint_entry {
    tt_thread_id thread;
    uint32_t index;
    uint64_t seq;
    uint64_t time;
    uint64_t chunk_offset;
} tt_timepoint_entry;

/* Per-thread figures of the index. */
typedef struct tt_index_thread {
    uint64_t frames;          /* rows of its frame table */
    uint64_t children;        /* entries of its children array */
    uint32_t max_depth;       /* deepest open-frame stack */
    uint32_t crashed;         /* 1 if it recorded a crash event */
    uint64_t kinds[TT_EV_KIND_MAX + 1]; /* events per kind; [0] unused */
} tt_index_thread;

typedef struct tt_index tt_index;

/* Opens the index of the file @r reads. TT_E_INVAL (with a message) when the file has no index
 * tables: version 1, recovered (`tinytrace recover` omits them), or recorded into caller
 * storage. @lim NULL = tt_reader_limits_default. On success *@out is allocated with malloc,
 * at most @lim->max_total bytes (refused with TT_E_CAPACITY before reading otherwise). */
TT_API int tt_index_open(tt_reader *r, const tt_reader_limits *lim, tt_index **out,
                         tt_error_info *err);
TT_API void tt_index_close(tt_index *ix);

/* What tt_index_build wrote. */
typedef struct tt_index_build_result {
    uint64_t events;          /* events read and indexed */
    uint64_t frames;          /* frame rows written, all threads */
    uint64_t bytes_in;        /* the source's size */
    uint64_t bytes_out;       /* the new file's */
} tt_index_build_result;

/* tt_index_build flags. TT_INDEX_BUILD_NO_SYNC: the new file is not made durable (no
 * fdatasync) before it gets its name: for a copy that is read once and removed. */
#define TT_INDEX_BUILD_NO_SYNC 0x1u

/* Builds the index tables of a finished trace that has none (recorded with TT_PARAM_INDEX 0,
 * as `tinytrace record` records by default, into caller storage, or recovered) and writes the
 * trace with them to @out_path: the same manifest fields, event chunks, thread and object tables
 * and checkpoint table, with the tables a recording with TT_PARAM_INDEX 1 would have written
 * (docs/FORMAT.md §14.10). A source that has its tables gets them built afresh; the file is then
 * the same, byte for byte. The manifest is rewritten, so a MAC in it (tt_manifest.auth) is copied
 * but no longer matches: the caller signs the new file again if it should be trusted. The file is
 * written as "<out_path>.<pid>.partial" and renamed, so @out_path may be the source's own path:
 * the source is replaced only by a whole file. The source is untrusted: it is checked first as
 * tt_verify checks it with the default reader limits (a refusal has tt_verify's code, offset and
 * message), then every chunk's checksum and every event again as they are copied. A hostile file
 * is refused (TT_E_CORRUPT, TT_E_LIMIT, with the offset) before the tables pass about 400 MiB
 * (2^21 calls open at once in all threads, 2^19 functions, one checkpoint mark per row of the
 * source's checkpoint table) or their time grows faster than the events (exits that are not of
 * the innermost open call may pass over 64 open frames an event, plus 2^26). TT_E_INVAL for a
 * file that was not closed whole (tt_recover first). @flags: 0 or TT_INDEX_BUILD_NO_SYNC.
 * Thread-safe; memory: the reader storage tt_verify probes, the largest chunk, and the tables. */
TT_API int tt_index_build(const tt_source *src, const char *out_path, unsigned flags,
                          tt_index_build_result *res, tt_error_info *err);
/* The most heap memory @ix has held at once so far, bytes (never more than @lim->max_total). */
TT_API uint64_t tt_index_memory(const tt_index *ix);

/* Figures of thread @thread, or NULL for an unknown thread. Valid while @ix is open. */
TT_API const tt_index_thread *tt_index_thread_info(const tt_index *ix, tt_thread_id thread);

/* Frame @index of @thread. TT_E_INVAL for an index out of range; TT_E_CORRUPT / TT_E_CHECKSUM
 * etc. when its block is damaged. */
TT_API int tt_index_frame(tt_index *ix, tt_thread_id thread, uint64_t index, tt_frame *out,
                          tt_error_info *err);
/* Children, last to first, without a lookup: the last child of @f is frame @f->index - 1, and
 * the child before child @c is the frame just before @c's subtree, until @f's subtree begins.
 * Each step reads one frame (tt_index_frame), so listing a frame's children costs one frame
 * read per child and no memory. TT_FRAME_NONE when there is none. Async-signal-safe. */
static inline uint64_t tt_frame_last_child(const tt_frame *f)
{
    return f->desc ? f->index - 1 : TT_FRAME_NONE;
}
static inline uint64_t tt_frame_prev_child(const tt_frame *f, const tt_frame *c)
{
    return c->index - c->desc > f->index - f->desc ? c->index - c->desc - 1 : TT_FRAME_NONE;
}
/* The parent of frame @index (TT_FRAME_NONE for a top-level frame): the first later frame whose
 * subtree covers it. Costs at most a few block reads (the directory keeps each block's lowest
 * subtree start). */
TT_API int tt_index_parent(tt_index *ix, tt_thread_id thread, uint64_t index, uint64_t *parent,
                           tt_error_info *err);

TT_API uint32_t tt_index_summary_count(const tt_index *ix);
/* Summary row @i, in function id order, or NULL. Valid while @ix is open. */
TT_API const tt_summary_entry *tt_index_summary(const tt_index *ix, uint32_t i);

/* K of "every K-th event" of the seek index. */
TT_API uint64_t tt_index_seek_every(const tt_index *ix);
/* The last entry of @thread whose seq ≤ @seq. TT_E_INVAL if the thread has no events. The
 * first seek reads the seek index into memory (32 bytes per entry; tt_index_open only checked
 * it), so it can also fail as tt_index_open does, with @err (may be NULL) saying why. */
TT_API int tt_index_seek_seq(tt_index *ix, tt_thread_id thread, uint64_t seq,
                             tt_timepoint_entry *out, tt_error_info *err);
/* The last entry of @thread whose time < @time, or its first entry when there is none (so
 * reading on from it reaches every event at or after @time). TT_E_INVAL if no events; errors
 * as tt_index_seek_seq. */
TT_API int tt_index_seek_time(tt_index *ix, tt_thread_id thread, uint64_t time,
                              tt_timepoint_entry *out, tt_error_info *err);

/* Reads and checks every frame block and seek batch against the directory: framing,
 * checksums, counts, depths and subtrees consistent with the children lists, references inside
 * the file. The first problem is returned with file, offset and reason. */
TT_API int tt_index_check(tt_index *ix, tt_error_info *err);

/* ---- the checkpoint table (version 4, docs/FORMAT.md §15) ----
 * Every checkpoint and restore of the recording, read by tt_reader_open with the thread and
 * object tables (it is small: one row per checkpoint, not per event), so these calls need no
 * tt_index and read nothing. A file without the table (no checkpoint was taken, an earlier
 * version, recovered, recorded into caller storage) has no rows. Every call is thread-safe
 * (the reader's tables are not written after open) and async-signal-safe; the entries are the
 * caller's. */

/* CheckpointEntry: checkpoint number @number, its event's timepoint (@tp.epoch: the restores
 * before it), time, and where it is in the file (a tt_timepoint_entry for tt_reader_seek). */
typedef struct tt_checkpoint_entry {
    uint64_t number;          /* 0 for the recording's first checkpoint */
    tt_timepoint tp;
    uint64_t time;            /* ticks, as the event's */
    uint64_t chunk_offset;    /* the event chunk that holds the checkpoint event */
    uint32_t index;           /* its position in that chunk */
    uint32_t site;
    uint64_t length;          /* payload bytes: the providers' framed states (FORMAT.md §8) */
    uint32_t providers;       /* how many providers saved a state in it */
} tt_checkpoint_entry;

/* One restore: the epoch it began (1 for the first), its event's timepoint and place, and the
 * checkpoint it restored. */
typedef struct tt_restore_entry {
    uint32_t epoch;
    tt_timepoint tp;
    uint64_t time;
    uint64_t chunk_offset;
    uint32_t index;
    uint32_t site;
    uint64_t checkpoint;
} tt_restore_entry;

/* Checkpoints (numbered 0 … count - 1) and restores (epochs 1 … count) of the recording. */
TT_API uint64_t tt_reader_checkpoint_count(const tt_reader *r);
TT_API uint32_t tt_reader_restore_count(const tt_reader *r);
/* Checkpoint @n. TT_E_INVAL when there is none. */
TT_API int tt_reader_checkpoint(const tt_reader *r, uint64_t n, tt_checkpoint_entry *out);
/* The @i-th provider (in the order their states are in the payload) of checkpoint @n: its id
 * and the length of its state. TT_E_INVAL when there is none. @id, @state_len may be NULL. */
TT_API int tt_reader_checkpoint_provider(const tt_reader *r, uint64_t n, uint32_t i, uint32_t *id,
                                         uint64_t *state_len);
/* The restore that began @epoch (1 … count). TT_E_INVAL when there is none. */
TT_API int tt_reader_restore(const tt_reader *r, uint32_t epoch, tt_restore_entry *out);
/* The epoch of an event of @thread at @time with sequence number @seq: the number of restores
 * at or before it in the recorded order (the reader gives every event it decodes its epoch this
 * way; this is for a timepoint the caller has). */
TT_API uint32_t tt_reader_epoch_at(const tt_reader *r, uint64_t time, tt_thread_id thread,
                                   uint64_t seq);

/* Positions per-thread cursor @cursor (TT_CURSORS_PER_THREAD, cursor = @e->thread) so that its
 * next event is the one @e names: one seek to @e->chunk_offset, one chunk read, @e->index events
 * skipped. The chunk is checked (frame, checksum, thread, first_seq ≤ seq < first_seq + count,
 * index = seq - first_seq) before the cursor moves; on failure the cursor is unchanged. After a
 * seek the cursor's end-of-stream check covers the events from there on. */
TT_API int tt_reader_seek(tt_reader *r, uint32_t cursor, const tt_timepoint_entry *e,
                          tt_error_info *err);

#ifdef __cplusplus
}
#endif
#endif
