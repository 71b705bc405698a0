/* SPDX-License-Identifier: MIT */
/* The bounded reader's state, for the decoders that work on a cursor in place.
 *
 * What belongs here: struct tt_reader and struct tt_cursor themselves, and the reader's own
 * steps on a cursor (load the next chunk, decode one event, consume it) for the two decoders that
 * live outside reader.c because they belong to other modules: verify's window skim (verify.c)
 * and replay's enter/exit matcher (replay/matcher.c). Nothing else of the store layer needs it;
 * everything else goes through store.h. Never installed.
 */
#ifndef TT_STORE_CURSOR_H
#define TT_STORE_CURSOR_H

#include <stdbool.h>
#include <stdint.h>

#include <tinytrace/index.h>

#include "format.h"

struct thread_state {
    uint64_t seq;
    uint64_t pending;      /* continuation bytes the thread's next chunk must start with */
    uint64_t chunks;
    uint64_t last_time;
};

struct tt_cursor {
    uint8_t *chunk;
    uint8_t *split;
    uint32_t thread;       /* TT_NO_THREAD: sequential */
    uint64_t next_off;     /* next chunk header to look at */
    uint64_t chunk_off;
    struct tt_chunk_header h;
    uint64_t chunk_index;  /* sequential cursor: index of the current event chunk */
    const uint8_t *p, *end;
    uint32_t left;
    uint64_t prev_time;
    uint32_t prev_fn;
    uint64_t prev_obj, prev_ord; /* the chunk's previous sync event (kind 16, FORMAT.md §5.2) */
    uint64_t seq;          /* per-thread cursor: next sequence number */
    uint64_t pending;      /* per-thread cursor: continuation bytes still to skip */
    bool loaded;
    bool done;
    /* peek cache */
    bool peeked;
    tt_event pev;
    const uint8_t *pp;
    uint32_t pleft;
    uint64_t ptime;
    uint32_t pfn;
    uint64_t pobj, pord;
    uint64_t pavail;       /* bytes of a split payload that were in the current chunk */
    uint32_t ep_next;      /* epochs: the first restore after the last event decoded */
};

/* A restore row of the checkpoint table (FORMAT.md §15), decoded at open. */
struct tt_restore_row {
    uint64_t time, seq, chunk_offset, checkpoint;
    uint32_t thread, index, site, pad_;
};

struct tt_reader {
    tt_source src;
    tt_manifest m;
    tt_reader_limits lim;
    tt_cursor_mode mode;
    uint32_t ncursors;
    uint64_t chunk_cap, split_cap;
    tt_thread_entry *threads;
    struct thread_state *ts;
    struct tt_cursor *cursors;
    uint8_t *objects;       /* object table body */
    uint32_t *obj_off;
    uint64_t index_chunks;  /* frame blocks and seek batches passed by the sequential cursor */
    /* version 4: the checkpoint table, read at open: its body, where each checkpoint row
     * starts in it, and the restore rows in recorded order (epoch i + 1 begins at row i) */
    uint8_t *cp_body;
    uint64_t cp_len;
    uint64_t *cp_row;
    struct tt_restore_row *rest;
    uint32_t ncp, nrest;
    uint64_t cp_chunks;     /* checkpoint tables passed by the sequential cursor */
    /* sequential totals */
    uint64_t events, payload, chunks, largest_chunk, largest_event, largest_split, evsum;
};

/* reader.c: the cursor steps that tt_reader_next is made of. tt_cursor_load_ takes the next
 * chunk of the cursor's thread (or of any thread, for the sequential cursor); tt_cursor_decode_
 * decodes the next event of the loaded chunk into @ev (the cursor keeps where it was, in pp..pfn,
 * until tt_cursor_consume_ commits it). */
int tt_cursor_load_(tt_reader *r, struct tt_cursor *c, tt_error_info *err);
int tt_cursor_decode_(tt_reader *r, struct tt_cursor *c, tt_event *ev, tt_error_info *err);
void tt_cursor_consume_(tt_reader *r, struct tt_cursor *c, const tt_event *ev);

/* checkpoints.c: the checkpoint table, read and checked at open (version 4), and an event's
 * epoch (the cursor keeps where its last search ended) */
int tt_reader_load_checkpoints_(tt_reader *r, tt_error_info *err);
uint32_t tt_reader_epoch_of_(const tt_reader *r, struct tt_cursor *c, const tt_event *ev);

/* verify.c: verify's pass over the sequential cursor (see there). */
int tt_reader_skim_(tt_reader *r, uint64_t *events, tt_error_info *err);

/* replay/matcher.c: replay's enter/exit fast path and the counting policy's look-ahead. */
bool tt_reader_match_fn_(tt_reader *r, uint32_t cursor, uint8_t kind, uint32_t function,
                         uint64_t *seq, uint64_t *time);
int tt_reader_find_ahead_(tt_reader *r, uint32_t cursor, int max,
                          bool (*match)(const tt_event *ev, void *ctx), void *ctx);
/* replay's sync fast path: the next event of @cursor is a sync event without a payload at
 * @site on object @id; consumed, with its place in the object's order (*@ord), OUT (*@dir),
 * seq and time. False, nothing moved, whenever the general path must look. */
bool tt_reader_match_sync_(tt_reader *r, uint32_t cursor, uint32_t site, uint64_t id,
                           uint64_t *ord, uint8_t *dir, uint64_t *seq, uint64_t *time);

/* source.c: a memory source's read function (its ctx is the source itself, so a reader's copy
 * of the source points its ctx at the copy) */
int tt_source_mem_read_(void *ctx, uint64_t off, void *dst, size_t len, size_t *got);
/* index.c: frame blocks and seek batches the directory lists */
uint64_t tt_index_chunks_(const tt_index *ix);

/* index chunks (frame blocks, seek batches) a sequential cursor passed in the data area, and the
 * event chunks it took */
uint64_t tt_reader_chunks_read_(const tt_reader *r);
uint64_t tt_reader_index_chunks_(const tt_reader *r);
/* checkpoint tables (type 9) the sequential cursor passed in the data area */
uint64_t tt_reader_cp_chunks_(const tt_reader *r);
const tt_source *tt_reader_source_(const tt_reader *r);

#endif
