/* SPDX-License-Identifier: MIT */
/* The record layer: thread buffers and the memory budget (pool.c), the swapper thread
 * (swapper.c), the encoder (encoder.c), the index tables' builder (tables.c), the file and
 * sinks (writer.c), and the record backend of a session (backend.c).
 *
 * What belongs here: what two or more of those files share: struct tt_writer, the recorder's
 * part of a thread, the raw records in a thread buffer, and the calls between the files. The
 * inline fast path is record_api.h. Never installed; see docs/ARCHITECTURE.md.
 */
#ifndef TT_RECORD_H
#define TT_RECORD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "format.h"
#include "session-int.h"

/* Raw records in a thread buffer: native byte order, 8-byte aligned, never on disk. */
struct tt_raw_short {
    uint32_t kind;      /* kind | dir << 8, or an address form (below) */
    uint32_t function;
    uint64_t time;      /* absolute ticks */
};
/* The -finstrument-functions hooks record an enter or exit with the function's address instead
 * of its id, which the encoder looks up (the session's fn_resolver): kind | TT_RAW_ADDR |
 * address bits 32..47 << 16, and function = address bits 0..31. Addresses from
 * TT_RAW_ADDR_END up take the id path on the recording thread. */
#define TT_RAW_ADDR 0x200u
#define TT_RAW_ADDR_END (UINT64_C(1) << 48)

/* A synchronization operation without a payload (record/sync.c): kind TT_EV_SYNC | dir << 8 |
 * TT_RAW_SYNC, then its site where the other forms have the function (a sync event's function
 * is 0), its time, object id and sequence number: 32 bytes, against 48 for a long record. */
#define TT_RAW_SYNC 0x400u
struct tt_raw_sync {
    uint32_t kind;
    uint32_t site;
    uint64_t time;
    uint64_t arg;
    uint64_t addr;
};
/* The 16-byte form of one that takes the time of the thread's previous event (time 0: a release,
 * a lock found free), whose site is at most TT_RAW_SYNC16_SITE_MAX and whose sequence number fits
 * 32 bits: the kind word has TT_RAW_SYNC | TT_RAW_SYNC16 and the site in its bits 12..31, then
 * the sequence number (32 bits) where the short form has the function, then the object id where
 * it has the time. Most sync events are of this kind (an uncontended lock and its unlock), and
 * half the bytes is half of what the recording thread writes and the swapper reads per event. */
#define TT_RAW_SYNC16 0x800u
#define TT_RAW_SYNC16_SHIFT 12
#define TT_RAW_SYNC16_SITE_MAX ((UINT32_C(1) << (32 - TT_RAW_SYNC16_SHIFT)) - 1)

struct tt_raw_long {
    uint32_t kind;
    uint32_t function;
    uint64_t time;
    uint32_t site;
    uint32_t pad_;
    uint64_t arg;
    uint64_t addr;
    uint64_t len;       /* payload bytes that follow, then padding to 8 */
};


/* One thread buffer: @data holds raw records, handed to the swapper when full. */
struct tt_buf {
    struct tt_buf *next;
    uint8_t *data;
    uint32_t used;
    uint32_t thread;
    uint32_t last;           /* the thread's final buffer */
};

/* A recording thread: the session's part, then the recorder's, then the swapper's. */
struct tt_rec_thread {
    struct tt_thread base;   /* busy first: the hot path reads it with pos, end and steal */
    /* hot: written by the owning thread only (a thief and close write them under qlock, when
     * the owner is outside a call: see steal_one) */
    uint8_t *pos;
    uint8_t *end;
    _Atomic uint32_t steal;  /* a thread waiting for the budget took, or is taking, the buffer:
                              * see tt_writer_refill (written under the writer's qlock) */
    struct tt_buf *buf;
    /* swapper side: touched only by the swapper thread, on a cache line of its own: the
     * swapper updates these per event, and sharing a line with pos and busy cost the recording
     * thread a cache miss per event */
    _Alignas(64) uint64_t seq;
    uint64_t pending;        /* raw payload bytes of an event that goes on in the next buffer */
    uint64_t chunks;
    uint64_t first_time;
    uint64_t last_time;
    bool has_time;
    /* schedule chaos (sync.c): this thread's random state; its own */
    uint64_t chaos_rng;
    /* chaos at function events: bytes of records from chaos_mark (a pos in this buffer, or
     * NULL) to the next chaos point; the owner's, and a thief's under qlock, as pos and end */
    uint8_t *chaos_mark;
    uint64_t chaos_left;
};

static inline struct tt_rec_thread *tt_rec_of(struct tt_thread *t)
{
    return (struct tt_rec_thread *)(void *)t;
}

struct tt_writer {
    /* sink */
    bool file;                 /* the sink is the file (fd may be -1 for a while: lost) */
    /* The file's descriptor: read and changed under fd_lock only, by the swapper's writes, the
     * closing thread, and the move the fd registry asks for when the program puts a file on
     * its number (writer.c, base/fds.c) */
    pthread_mutex_t fd_lock;
    int fd;
    int fd_slot;               /* its slot in the fd registry, -1: none */
    uint64_t file_dev, file_ino; /* the .partial file's, for reopening it by name */
    uint64_t checked_off;      /* the file holds everything written before this (fd_check) */
    int fd_lost;               /* the number the program took from us, -1: never */
    int reopen_errno;          /* why the file could not be opened again, 0: it could */
    bool fd_replaced;          /* fd_check found another file on the number */
    bool fd_relock;            /* reopened while the old description held the lock (fd_regain) */
    char final_path[4096];
    char temp_path[4096 + 32];
    tt_memory_sink *msink;
    tt_sink_write_fn cb;
    void *cb_ctx;

    /* buffers */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;      /* swapper waits for work */
    pthread_cond_t fcond;      /* recording threads wait for a free buffer */
    struct tt_buf *qhead, *qtail;
    struct tt_buf *free_list, *free_tail;  /* FIFO: see tt_writer_refill (pool.c) */
    uint64_t nbufs, nbufs_max;
    uint64_t nbufs_cap;        /* nbufs_max may grow to this (pool.c, grow_budget) */
    uint64_t grown;            /* buffers added beyond the budget */
    uint64_t inflight;         /* buffers queued for or being encoded by the swapper */
    uint32_t steal_next;       /* where the next steal looks first (steal_one) */
    uint64_t buffer_bytes;
    uint8_t *storage;          /* caller storage, or NULL */
    uint64_t storage_used, storage_len;
    uint8_t *pool;             /* without caller storage: the buffers' data, mapped at open */
    uint64_t pool_used, pool_len;  /* pool_len: the budget, faulted in by the idle swapper a few
                                    * buffers ahead of pool_used (carved, under qlock) */
    uint64_t pool_map_len;     /* the mapping: room for nbufs_cap buffers (address space only) */
    uint64_t pool_ready;       /* swapper: the pool is faulted in up to here (pool_map) */
    bool pool_in_region;       /* the pool is in the runtime's region (base/region.c) */
    void *swapper_stack;       /* ... and so is the swapper's stack, or NULL */
    struct tt_calib calib;     /* the tick rate's first point, taken at open */
    uint8_t *threads_area;     /* caller storage for per-thread state */
    uint64_t threads_used, threads_len;
    bool stop;
    pthread_t swapper;
    /* The swapper starts at open, or, for the runtime's processes (swapper_lazy), when first
     * needed (tt_swapper_ensure): most of a tree's processes end before they fill a buffer and
     * never need a thread of their own. Until then, a thread that waits for the queue encodes
     * it itself (tt_swapper_encode_here_locked). swapper_started is written under encode_lock
     * and qlock, read under either; encode_lock is taken before qlock. */
    _Atomic bool swapper_started;
    bool swapper_lazy;         /* set at open */
    bool swapper_failed;       /* under encode_lock: no start is tried again */
    pthread_mutex_t encode_lock;
    bool membarrier_ok;

    /* swapper state */
    uint8_t *chunk;            /* header + body */
    uint64_t chunk_cap;
    uint8_t *block;
    uint32_t block_len, block_size;
    uint64_t file_off;
    uint64_t wb_off;           /* file: writeback started up to here (block_flush) */

    /* schedule chaos (sync.c), or NULL */
    struct tt_chaos *chaos;

    /* index tables, built by the swapper (tables.c); NULL: the file gets none */
    struct tt_tables *tables;

    /* the encoder's small cache of the function resolver's answers (encoder.c, fn_cached):
     * address << 16 | id, direct-mapped by address; 0 is empty. Touched by whoever encodes
     * (encoding is never concurrent) */
#define TT_FN_CACHE 512u
    uint64_t fn_cache[TT_FN_CACHE];

    /* results, written by the swapper; read by others under qlock */
    tt_manifest m;
    uint64_t bytes_written;
    int write_errno;
    uint64_t write_errno_off;  /* file offset of the first failed write */
    /* after a write error: the swapper keeps the buffers it is handed (held) instead of
     * recycling them, so recording goes on in memory up to the budget; then `stopped` makes
     * refill refuse with TT_E_STOPPED (counted in `refused`) instead of waiting forever.
     * Under qlock. */
    struct tt_buf *held;
    bool stopped;
    uint64_t refused;
    uint64_t steals;           /* buffers taken from idle threads (steal_one) */
    _Atomic uint64_t stalls;
    _Atomic uint64_t stall_ns;
    /* the id of TT_STALL_FUNCTION, interned at the first stall (0: not yet, or no room) */
    _Atomic uint32_t stall_fn;
    /* copies of the swapper's counts, published under qlock for tt_session_stats_get */
    uint64_t pub_events, pub_payload, pub_chunks, pub_bytes;
    int pub_errno;
    /* tt_writer_sync_thread: buffers handed to the swapper, and of those encoded, ever; a
     * thread that waits for its buffers to be encoded waits on scond (under qlock) */
    uint64_t handed, encoded;
    uint32_t sync_waiters;
    pthread_cond_t scond;
};

/* The true end of @t's buffer (t->end is a false one under schedule chaos, sync.c). */
static inline uint8_t *tt_rec_buf_end(const struct tt_writer *w, const struct tt_rec_thread *t)
{
    return t->buf != NULL ? t->buf->data + w->buffer_bytes : t->end;
}


static inline uint64_t tt_align8(uint64_t v)
{
    return (v + 7) & ~(uint64_t)7;
}

/* ---- pool.c: buffers, the budget, and the recording thread's slow path ---- */
/* Gives the thread a buffer that can take a raw record; may wait for the budget. @last: hand the
 * current one over as the thread's final buffer and take none. */
int tt_writer_refill(tt_session *s, struct tt_rec_thread *t, bool last);
/* Appends a long record with payload (splits only payloads > buffer/4). */
int tt_writer_append_long(tt_session *s, struct tt_rec_thread *t, const struct tt_raw_long *rec,
                          const void *payload);
/* A structural event (session or thread start and end) with @arg. */
int tt_writer_append_structural(tt_session *s, struct tt_rec_thread *t, uint32_t kind,
                                uint64_t arg);
/* Hands @t's buffer over and waits until the swapper has encoded every buffer of it, so that
 * t->seq (the swapper's) is the sequence number of the thread's next event. */
int tt_writer_sync_thread(tt_session *s, struct tt_rec_thread *t);
/* Hands every buffer it can take to the swapper and waits until they are written (a process
 * about to die by SIGKILL). @self: the calling thread's, or NULL. */
void tt_writer_flush_all(tt_session *s, struct tt_rec_thread *self);
/* Queues @t's buffer, if it has one, for the swapper. Under qlock. */
void tt_writer_hand_over_locked(struct tt_writer *w, struct tt_rec_thread *t, bool last);
/* Zeroed per-thread state: from caller storage when the session has some, else aligned heap. */
struct tt_thread *tt_writer_thread_alloc(tt_session *s);
/* The first events of a new thread: its buffer, SESSION_START (thread 0), THREAD_START. */
int tt_writer_thread_init(tt_session *s, struct tt_rec_thread *t);
void tt_writer_stats(tt_session *s, tt_session_stats *st);
/* The owner's side of a steal: with busy set, waits out a thief that is looking at @t's buffer
 * and takes its writes (t->buf, pos, end) in, then clears the flag. */
void tt_writer_steal_ack_(tt_session *s, struct tt_rec_thread *t) TT_HIDDEN;

/* ---- sync.c: synchronization operations and schedule chaos ---- */
int tt_rec_sync_begin(tt_session *s, struct tt_thread *t, tt_sync *op, struct tt_sync_obj *e);
int tt_rec_sync_end(tt_session *s, struct tt_thread *t, tt_sync *op, int result, int took);
/* The chaos state of TT_PARAM_CHAOS (nothing when it is off). */
int tt_chaos_open(tt_session *s);
/* Its META object "chaos=...", at close (the session interns nothing before it is open). */
void tt_chaos_note(tt_session *s);
void tt_chaos_free(tt_session *s);
void tt_chaos_thread_end(tt_session *s, struct tt_rec_thread *t);
/* Chaos at function events: while chaos is on, t->end is a false end a random number of
 * records ahead, so that the enter/exit fast path, unchanged, falls into the slow one there.
 * tt_chaos_arm_ sets the next false end (@fresh: a new distance, else what is left of the
 * last one; never past the true end, never before pos; every path that appends without the
 * fast path calls it after, since it may have passed the false end). tt_chaos_fn_end_ (the slow path found no room): true at a false end, with the next
 * one set and room for a record; the caller then calls tt_chaos_fn_point_ outside its call. */
void tt_chaos_arm_(struct tt_writer *w, struct tt_rec_thread *t, bool fresh) TT_HIDDEN;
bool tt_chaos_fn_end_(struct tt_writer *w, struct tt_rec_thread *t) TT_HIDDEN;
void tt_chaos_fn_point_(tt_session *s, struct tt_rec_thread *t) TT_HIDDEN;

/* ---- swapper.c ---- */
int tt_swapper_start(tt_session *s, struct tt_writer *w);
/* Starts the swapper unless it runs (or could not start: then swapper_failed); true when it
 * runs. Takes encode_lock, then qlock: not under qlock. */
bool tt_swapper_ensure(tt_session *s, struct tt_writer *w);
/* With no swapper running: encodes every queued buffer on the calling thread, as the swapper
 * would, under encode_lock; does nothing once the swapper runs. Called and returns with qlock
 * held, which it lets go meanwhile. */
void tt_swapper_encode_here_locked(tt_session *s, struct tt_writer *w);
/* Lets the swapper drain the queue and waits for it to end; idempotent. */
void tt_swapper_stop(struct tt_writer *w);
/* Faults in [off, off + len) of the pool; false when the kernel cannot (before Linux 5.14). */
bool tt_pool_populate(struct tt_writer *w, uint64_t off, uint64_t len);

/* ---- encoder.c ---- */
/* Turns one raw buffer into one event chunk, with the index tables' step for each event. */
void tt_encode_buffer(tt_session *s, struct tt_writer *w, struct tt_buf *b);

/* ---- writer.c: the file and the sinks ---- */
int tt_writer_open(tt_session *s, tt_error_info *err);
int tt_writer_close(tt_session *s, tt_error_info *err);
void tt_writer_free(tt_session *s);
/* Writes the partial block now (the swapper, when nothing else waits). */
void tt_writer_block_flush(struct tt_writer *w);
/* Frames the body already in w->chunk + TT_CHUNK_HEADER, appends it, and returns its
 * checksum. */
uint64_t tt_writer_chunk_emit(struct tt_writer *w, struct tt_chunk_header *h);
/* For tables.c: the offset the next appended byte gets; appending framed bytes or a chunk
 * (framed here) through the block buffer; the manifest being built */
uint64_t tt_writer_tail_(struct tt_writer *w);
void tt_writer_put_raw_(struct tt_writer *w, const uint8_t *p, size_t len);
void tt_writer_put_chunk_(struct tt_writer *w, struct tt_chunk_header *h, const uint8_t *body);
tt_manifest *tt_writer_manifest_(struct tt_writer *w);

/* ---- tables.c: the index tables, built on the swapper (see its essay) ---- */
struct tt_tables;
int tt_tables_open(tt_session *s, struct tt_tables **out);
void tt_tables_free(struct tt_tables *tb);
void tt_tables_chunk_begin(struct tt_tables *tb, struct tt_writer *w);
/* tt_tables_event: inline, tables.h */
void tt_tables_chunk_end(struct tt_tables *tb, struct tt_writer *w);
void tt_tables_finish(struct tt_tables *tb, struct tt_writer *w);
void tt_tables_write_tail(struct tt_tables *tb, struct tt_writer *w, uint32_t nthreads);

/* ---- backend.c ---- */
extern const struct tt_backend tt_record_backend TT_HIDDEN;

#endif
