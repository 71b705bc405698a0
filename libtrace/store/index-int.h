/* SPDX-License-Identifier: MIT */
/* The index reader's state, shared by its three files: index.c (open: the directory, the summary,
 * the seek index; and the allocator), frames.c (frame blocks and the call-tree queries) and
 * check.c (tt_index_check, the whole-tree check).
 *
 * What belongs here: struct tt_index and what it holds, and the helpers two of those files use.
 * Never installed; the API is tinytrace/index.h.
 */
#ifndef TT_STORE_INDEX_INT_H
#define TT_STORE_INDEX_INT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "cursor.h"

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

/* Every allocation of an index goes through these: they keep the bytes in use, refuse to go
 * past the caller's max_total (NULL, reported as TT_E_CAPACITY by the callers' "out of
 * memory" paths), and record the peak for tt_index_memory(). */
void *tt_ix_realloc(tt_index *ix, void *p, size_t n);
void *tt_ix_malloc(tt_index *ix, size_t n);
void *tt_ix_calloc(tt_index *ix, size_t n, size_t k);
void tt_ix_free(tt_index *ix, void *p);

/* @len bytes of the source at @off (@what names them in messages). */
int tt_ix_rd(tt_index *ix, uint64_t off, void *dst, size_t len, tt_error_info *err,
             const char *what);
/* Reads the chunk at @off (type @type, inside [@off, @end)) into a body from tt_ix_malloc. */
int tt_ix_read_chunk(tt_index *ix, uint64_t off, uint64_t end, uint16_t type,
                     struct tt_chunk_header *h, uint8_t **body, uint64_t max_body,
                     tt_error_info *err, const char *what);
/* The offset and lowest subtree start of block @b of @thread (index.c, through its block list). */
int tt_ix_block_at(tt_index *ix, uint32_t thread, uint64_t b, uint64_t *off, uint64_t *low,
                   tt_error_info *err);
/* The seek index in memory (read on first use). */
int tt_ix_ensure_seek(tt_index *ix, tt_error_info *err);
/* Block @b of @thread, decoded, from the cache (frames.c). */
int tt_ix_get_block(tt_index *ix, uint32_t thread, uint64_t b, struct slot **out,
                    tt_error_info *err);

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

#endif
