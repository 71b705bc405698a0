/* The recording side: thread buffers, the swapper thread, the encoder and the sinks.
 *
 * A recording thread appends fixed raw records (format.h) to its own buffer. When the buffer is
 * full it is queued for the swapper and the thread takes a free one; buffers are recycled LIFO,
 * so a hot thread keeps writing into pages that are already faulted in. The budget
 * (TT_PARAM_MEMORY_BYTES) caps how many buffers exist; when all are in flight the thread waits,
 * and the wait is counted. Nothing is dropped. When none is in flight either, every buffer is
 * held by a recording thread (more threads than the budget has buffers, idle ones among them),
 * and waiting would never end: the waiting thread takes the buffer of a thread that is not
 * inside a recording call and hands it to the swapper (steal_one), which gives it back.
 *
 * The swapper turns one raw buffer into exactly one event chunk (the encoding never grows a
 * buffer by more than 1/16, see tt_chunk_body_max), checksums it and appends it to a block
 * buffer that is written in block-size units. A payload larger than a quarter of a buffer may be
 * split over several buffers; the swapper marks such chunks CONT_OUT / CONT_IN.
 *
 * The file is created as "<file>.<pid>.partial" (O_EXCL | O_NOFOLLOW, mode 0600) with a
 * provisional manifest, so a dead run's file can be recognised and salvaged. Close writes the
 * thread and object tables, rewrites the manifest at offset 0, syncs and renames.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tables.h"

struct tt_writer {
    /* sink */
    int fd;
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
    struct tt_buf *free_list, *free_tail;  /* FIFO: see tt_writer_refill */
    uint64_t nbufs, nbufs_max;
    uint64_t inflight;         /* buffers queued for or being encoded by the swapper */
    uint32_t steal_next;       /* where the next steal looks first (steal_one) */
    uint64_t buffer_bytes;
    uint8_t *storage;          /* caller storage, or NULL */
    uint64_t storage_used, storage_len;
    uint8_t *pool;             /* without caller storage: the buffers' data, mapped at open */
    uint64_t pool_used, pool_len;
    uint64_t pool_ready;       /* swapper: the pool is faulted in up to here (pool_map) */
    struct tt_calib calib;     /* the tick rate's first point, taken at open */
    uint8_t *threads_area;     /* caller storage for per-thread state */
    uint64_t threads_used, threads_len;
    bool stop;
    pthread_t swapper;
    bool swapper_started;
    bool membarrier_ok;

    /* swapper state */
    uint8_t *chunk;            /* header + body */
    uint64_t chunk_cap;
    uint8_t *block;
    uint32_t block_len, block_size;
    uint64_t file_off;
    uint64_t wb_off;           /* file: writeback started up to here (block_flush) */

    /* index tables, built by the swapper (tables.c); NULL: the file gets none */
    struct tt_tables *tables;

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
    /* copies of the swapper's counts, published under qlock for tt_session_stats_get */
    uint64_t pub_events, pub_payload, pub_chunks, pub_bytes;
    int pub_errno;
};

#define TT_CALIB_OPEN_NS 200000u  /* the provisional tick rate's interval */
#define TT_CALIB_MIN_NS 2000000u  /* the final one's, at least */

uint64_t tt_chunk_body_max(uint64_t buffer_bytes)
{
    /* a raw long record of 48 + p bytes encodes to at most 51 + p, a short one of 16 to 16 */
    return buffer_bytes + buffer_bytes / 8 + 64;
}

int tt_writer_capacity_of(const tt_writer_limits *lim, tt_writer_capacity *cap, tt_error_info *err)
{
    if (!lim || !cap)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "NULL argument");
    if (lim->buffer_bytes < 4096 || lim->buffer_bytes % 4096)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX,
                       "buffer_bytes %llu is not a positive multiple of 4096",
                       (unsigned long long)lim->buffer_bytes);
    if (lim->memory_bytes < 2 * lim->buffer_bytes)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX,
                       "memory_bytes %llu holds fewer than two buffers of %llu",
                       (unsigned long long)lim->memory_bytes, (unsigned long long)lim->buffer_bytes);
    if (lim->block_bytes < 4096 || (lim->block_bytes & (lim->block_bytes - 1)))
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX, "block_bytes %u is not a power of two >= 4096",
                       lim->block_bytes);
    if (lim->max_threads == 0)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX, "max_threads is 0");
    uint64_t n = lim->memory_bytes / lim->buffer_bytes;
    cap->buffers = n * (lim->buffer_bytes + 128); /* a buffer, its header, alignment */
    cap->swapper = (tt_chunk_body_max(lim->buffer_bytes) + TT_CHUNK_HEADER + 63) / 64 * 64 +
                   lim->block_bytes;
    cap->threads = (uint64_t)lim->max_threads * (sizeof(struct tt_thread) + 64);
    cap->objects = lim->object_bytes;
    cap->total = cap->buffers + cap->swapper + cap->threads + cap->objects;
    return TT_OK;
}

/* ---------------------------------------------------------------- sinks */

static int sink_write(struct tt_writer *w, uint64_t off, const void *data, size_t len)
{
    if (w->write_errno)
        return w->write_errno;
    int e = 0;
    if (w->cb) {
        e = w->cb(w->cb_ctx, off, data, len);
    } else if (w->msink) {
        tt_memory_sink *ms = w->msink;
        if (off + len > ms->cap_) {
            size_t ncap = ms->cap_ ? ms->cap_ : 65536;
            while (ncap < off + len)
                ncap *= 2;
            void *nd = realloc(ms->data, ncap);
            if (!nd) {
                e = ENOMEM;
                goto out;
            }
            ms->data = nd;
            ms->cap_ = ncap;
        }
        memcpy((uint8_t *)ms->data + off, data, len);
        if (off + len > ms->len)
            ms->len = off + len;
    } else {
        const uint8_t *p = data;
        size_t left = len;
        while (left) {
            ssize_t k = pwrite(w->fd, p, left, (off_t)off);
            if (k < 0) {
                if (errno == EINTR)
                    continue;
                e = errno;
                break;
            }
            if (k == 0) {
                e = ENOSPC;
                break;
            }
            p += k;
            off += (uint64_t)k;
            left -= (size_t)k;
        }
    }
out:
    if (e) {
        w->write_errno = e;
        w->write_errno_off = off; /* for a file: after the bytes a short write did take */
        return e;
    }
    w->bytes_written += len;
    return 0;
}

/* Written file bytes are handed to the kernel's writeback every TT_WRITEBACK_STEP, without
 * waiting, so the fdatasync at close finds little left to write (it took 60 ms, a tenth of the
 * recording's cost, for an 88 MB trace when all of it was still dirty then). */
#define TT_WRITEBACK_STEP (8u << 20)

static void block_flush(struct tt_writer *w)
{
    if (w->block_len) {
        sink_write(w, w->file_off, w->block, w->block_len);
        w->file_off += w->block_len;
        w->block_len = 0;
        if (w->fd >= 0 && w->file_off - w->wb_off >= TT_WRITEBACK_STEP && !w->write_errno) {
            /* advisory: an error here shows again, and is reported, at fdatasync */
            (void)sync_file_range(w->fd, (off_t)w->wb_off, (off_t)(w->file_off - w->wb_off),
                                  SYNC_FILE_RANGE_WRITE);
            w->wb_off = w->file_off;
        }
    }
}

static void block_append(struct tt_writer *w, const uint8_t *p, size_t len)
{
    while (len) {
        size_t n = w->block_size - w->block_len;
        if (n > len)
            n = len;
        memcpy(w->block + w->block_len, p, n);
        w->block_len += (uint32_t)n;
        p += n;
        len -= n;
        if (w->block_len == w->block_size)
            block_flush(w);
    }
}

/* Frames the body already in w->chunk + TT_CHUNK_HEADER and appends it. */
static uint64_t chunk_emit(struct tt_writer *w, struct tt_chunk_header *h)
{
    uint8_t *body = w->chunk + TT_CHUNK_HEADER;
    tt_chunk_header_encode(w->chunk, h, body);
    block_append(w, w->chunk, TT_CHUNK_HEADER + (size_t)h->body_len);
    if (h->body_len > w->m.largest_chunk)
        w->m.largest_chunk = h->body_len;
    return tt_get64(w->chunk + 40);
}

/* For tables.c: where the next appended byte lands, and appending through the block buffer. */
uint64_t tt_writer_tail_(struct tt_writer *w)
{
    return w->file_off + w->block_len;
}

void tt_writer_put_raw_(struct tt_writer *w, const uint8_t *p, size_t len)
{
    /* framed chunks from tables.c: keep the largest body for the manifest */
    for (size_t off = 0; off + TT_CHUNK_HEADER <= len;) {
        uint32_t body = tt_get32(p + off + 8);
        if (body > w->m.largest_chunk)
            w->m.largest_chunk = body;
        off += TT_CHUNK_HEADER + (size_t)body;
    }
    block_append(w, p, len);
}

void tt_writer_put_chunk_(struct tt_writer *w, struct tt_chunk_header *h, const uint8_t *body)
{
    uint8_t hdr[TT_CHUNK_HEADER];
    tt_chunk_header_encode(hdr, h, body);
    block_append(w, hdr, sizeof hdr);
    if (h->body_len)
        block_append(w, body, h->body_len);
    /* the summary and the directory are not counted in largest_chunk: max_table bounds them */
}

tt_manifest *tt_writer_manifest_(struct tt_writer *w)
{
    return &w->m;
}

/* ---------------------------------------------------------------- the encoder */

static inline uint64_t align8(uint64_t v)
{
    return (v + 7) & ~(uint64_t)7;
}

/* A loop's leaf calls, in bulk. Called after an exit whose frame row went into a run of
 * repeated leaves (tables.h, leaf_again); while the next two raw records are an enter and an
 * exit of the same function, at the same depth, each close enough to the one before for a
 * short tag, this encodes both and adds the leaf to the run, with the state in registers
 * instead of a push and a pop of the open-frame stack per call. It stops before the first pair
 * that needs anything more (another function, a long step, a full run or block, a seek entry)
 * and leaves that pair to the general path: the bytes written, event and table alike, are
 * exactly the general path's. @fn is the function of the exit just encoded, @exit_word its raw
 * record's first 8 bytes (kind and function as recorded), @last_time its time
 * (the encoder's last and previous time alike). Returns the raw bytes consumed. */
static inline size_t leaf_run(struct tt_tables *restrict tb, struct tb_thread *restrict t,
                              const uint8_t *raw, const uint8_t *end, uint8_t **op,
                              uint64_t origin, uint64_t *last_time, uint32_t fn,
                              uint64_t exit_word, uint64_t *seq)
{
    const uint32_t depth = t->depth;
    if (!(t->run_at && fn == t->prev_fn && depth == t->prev_depth &&
          t->prev_chunk == tb->chunk_off && depth < t->max_depth && t->rows_cap >= 40 &&
          !tb->failed && summary_last_is(tb, fn)))
        return 0;
    uint8_t *o = *op, *const rows = t->rows;
    const uint64_t last0 = *last_time, sq = *seq;
    if (t->prev_end != last0)
        return 0; /* the last exit's row ends the run: its end is the encoder's last time */
    /* how many pairs may be taken before a limit where the general path must take over: the
     * raw records left, the run's count byte (at most TT_ROW_RUN_MAX rows), the block (a block
     * of TT_FRAME_BLOCK_ROWS rows is flushed by the general path), the room in the rows
     * buffer (a pair adds two bytes there: gap and duration, each under 64, one varint byte),
     * and the next seek entry (neither event of a pair may have a seq that is a multiple of
     * TT_SEEK_EVERY) */
    const unsigned runb0 = t->rows[t->run_at - 1];
    uint64_t nmax = (uint64_t)(end - raw) / (2 * sizeof(struct tt_raw_short));
    uint64_t lim = runb0 < (TT_ROW_RUN | TT_ROW_RUN_MAX) ? (TT_ROW_RUN | TT_ROW_RUN_MAX) - runb0 : 0;
    nmax = lim < nmax ? lim : nmax;
    lim = t->nrows + 1 < TT_FRAME_BLOCK_ROWS ? TT_FRAME_BLOCK_ROWS - 1 - t->nrows : 0;
    nmax = lim < nmax ? lim : nmax;
    lim = t->rows_len + 20 <= t->rows_cap ? (t->rows_cap - 20 - t->rows_len) / 2 + 1 : 0;
    nmax = lim < nmax ? lim : nmax;
    const uint64_t m = sq & (TT_SEEK_EVERY - 1);
    lim = m ? (TT_SEEK_EVERY - m) / 2 : 0;
    nmax = lim < nmax ? lim : nmax;
    uint8_t *rp = rows + t->rows_len;
    uint64_t last = last0, n = 0, total = 0;
    struct summary_row *const r = &tb->sum[tb->sum_last];
    uint64_t longest = r->longest, longest_at = 0;
    /* the pair's raw records as the last exit's: the same words, but for the kind byte (the
     * function as an id or as an address, TT_RAW_ADDR, compares either way) */
    const uint64_t enter_word = exit_word - (TT_EV_EXIT - TT_EV_ENTER);
    for (; n < nmax; n++, raw += 2 * sizeof(struct tt_raw_short)) {
        struct tt_raw_short e, x;
        memcpy(&e, raw, sizeof e);
        memcpy(&x, raw + sizeof e, sizeof x);
        uint64_t ew, xw;
        memcpy(&ew, &e, sizeof ew);
        memcpy(&xw, &x, sizeof xw);
        if (ew != enter_word || xw != exit_word)
            break;
        uint64_t t1 = e.time > origin ? e.time - origin : 0;
        if (t1 < last)
            t1 = last;
        uint64_t t2 = x.time > origin ? x.time - origin : 0;
        if (t2 < t1)
            t2 = t1;
        const uint64_t s1 = t1 - last, dur = t2 - t1;
        if ((s1 | dur) > TT_TAG_SHORT_STEP)
            break;
        o[2 * n] = (uint8_t)(TT_TAG_SHORT | s1);
        o[2 * n + 1] = (uint8_t)(TT_TAG_SHORT | TT_TAG_SHORT_EXIT | dur);
        rp[2 * n] = (uint8_t)s1; /* the gap from the previous row's end, which is `last` */
        rp[2 * n + 1] = (uint8_t)dur;
        if (dur > longest) {
            longest = dur;
            longest_at = n + 1; /* + 1: 0 is "no longer call" */
        }
        total += dur;
        last = t2;
    }
    if (n == 0)
        return 0;
    const uint64_t frame0 = t->frames;
    o += 2 * n;
    rp += 2 * n;
    const uint64_t frame = frame0 + n, longest_frame = longest_at ? frame0 + longest_at : 0;
    const uint32_t nrows = t->nrows + (uint32_t)n;
    rows[t->run_at - 1] = (uint8_t)(runb0 + n);
    t->rows_len = (size_t)(rp - rows);
    t->nrows = nrows;
    t->frames = frame;
    t->prev_end = last; /* the last leaf's end */
    t->last_time = last;
    t->kinds[TT_EV_ENTER] += n;
    t->kinds[TT_EV_EXIT] += n;
    r->calls += n;
    r->total += total;
    r->self += total;
    if (longest_frame) {
        r->longest = longest;
        r->longest_thread = (uint32_t)(t - tb->threads);
        r->longest_frame = longest_frame - 1;
    }
    if (depth) {
        t->stack[depth - 1].kid_time += total;
        t->stack[depth - 1].nkids += n;
    }
    *op = o;
    *last_time = last;
    *seq = sq + 2 * n;
    return (size_t)n * 2 * sizeof(struct tt_raw_short);
}

static void encode_buffer(tt_session *s, struct tt_writer *w, struct tt_buf *b)
{
    struct tt_thread *t = s->threads[b->thread];
    uint8_t *body = w->chunk + TT_CHUNK_HEADER, *o = body;
    const uint8_t *raw = b->data, *end = b->data + b->used;
    struct tt_chunk_header h = { .type = TT_CHUNK_EVENTS, .thread = t->id, .first_seq = t->seq };
    uint64_t origin = w->m.tick_origin;
    struct tt_tables *tb = w->tables;
    if (tb)
        tt_tables_chunk_begin(tb, w);

    if (t->pending) {
        uint64_t n = t->pending < (uint64_t)(end - raw) ? t->pending : (uint64_t)(end - raw);
        memcpy(o, raw, n);
        o += n;
        raw += n;
        t->pending -= n;
        h.flags |= TT_CF_CONT_IN;
        h.cont_len = (uint32_t)n;
        if (t->pending == 0)
            raw = b->data + align8((uint64_t)(raw - b->data));
    }
    uint64_t prev_time = 0;
    uint32_t prev_fn = 0;
    bool first = true;
    /* per-event state in locals: every store through o may alias the structs, so fields would
     * be reloaded and stored again for each event */
    uint64_t seq = t->seq, last_time = t->last_time, count = 0;
    const uint32_t tid = t->id; /* on the recording thread's line: read once, not per event */
    /* NULL without tables, or when there was no memory for this thread's (the index is then
     * marked failed) */
    struct tb_thread *tbt = tb ? tt_tables_of(tb, tid) : NULL;
    bool has_time = t->has_time, split = t->pending != 0;
    uint64_t last_addr = 0; /* the last address-form function and its id */
    uint32_t last_id = 0;
    while (!split && raw + sizeof(struct tt_raw_short) <= end) {
        struct tt_raw_short sr;
        uint64_t raw_word; /* kind and function as recorded, for leaf_run */
        memcpy(&sr, raw, sizeof sr);
        memcpy(&raw_word, raw, sizeof raw_word);
        if (sr.kind & TT_RAW_ADDR) {
            /* the hooks left the function's id to us: one lookup per change of function */
            uint64_t a = (uint64_t)(sr.kind >> 16) << 32 | sr.function;
            if (a != last_addr) {
                tt_fn_resolver res = atomic_load_explicit(&s->fn_resolver, memory_order_acquire);
                last_id = res ? res(s, a) : 0;
                last_addr = a;
            }
            if (TT_UNLIKELY(last_id == 0)) {
                /* no id (more functions than the hooks name): not recorded, as replay's hooks
                 * do not replay it */
                raw += sizeof sr;
                continue;
            }
            sr.function = last_id;
        }
        uint32_t kind = sr.kind & 0xFF, dir = (sr.kind >> 8) & 1;
        uint64_t rel = sr.time > origin ? sr.time - origin : 0;
        if (has_time && rel < last_time)
            rel = last_time; /* keep each thread's time non-decreasing across cores */
        if (TT_UNLIKELY(!has_time)) {
            t->first_time = rel;
            has_time = true;
        }
        last_time = rel;
        if (first) {
            h.base_time = rel;
            prev_time = rel;
            first = false;
        }
        uint8_t tag = (uint8_t)kind | (dir ? TT_TAG_OUT : 0);
        bool same = sr.function == prev_fn;
        uint64_t step = rel - prev_time;
        prev_time = rel;
        if (same && step <= TT_TAG_SHORT_STEP && (kind == TT_EV_ENTER || kind == TT_EV_EXIT)) {
            /* a loop's enter or exit: one byte */
            *o++ = (uint8_t)(TT_TAG_SHORT | (kind == TT_EV_EXIT ? TT_TAG_SHORT_EXIT : 0) | step);
        } else {
            if (same)
                tag |= TT_TAG_FSAME;
            *o++ = tag;
            o = tt_put_varint(o, step);
            if (!same)
                o = tt_put_varint(o, sr.function);
        }
        prev_fn = sr.function;
        if (tbt)
            tt_tables_event(tb, w, tbt, tid, kind, sr.function, rel, seq, (uint32_t)count);
        seq++;
        count++;
        if (kind == TT_EV_ENTER || kind == TT_EV_EXIT) {
            raw += sizeof sr;
            if (kind == TT_EV_EXIT && tbt && tbt->run_at) {
                uint64_t s0 = seq;
                raw += leaf_run(tb, tbt, raw, end, &o, origin, &last_time, sr.function, raw_word,
                                &seq);
                count += seq - s0;
                prev_time = last_time;
            }
            continue;
        }
        struct tt_raw_long lr;
        memcpy(&lr, raw, sizeof lr);
        raw += sizeof lr;
        o = tt_put_varint(o, lr.site);
        o = tt_put_varint(o, lr.arg);
        o = tt_put_varint(o, lr.addr);
        o = tt_put_varint(o, lr.len);
        uint64_t have = (uint64_t)(end - raw);
        uint64_t n = lr.len < have ? lr.len : have;
        memcpy(o, raw, n);
        o += n;
        raw += n;
        w->m.payload_bytes += lr.len;
        if (lr.len > w->m.largest_event)
            w->m.largest_event = lr.len;
        if (n < lr.len) {
            t->pending = lr.len - n;
            split = true;
            h.flags |= TT_CF_CONT_OUT;
            if (lr.len > w->m.largest_split)
                w->m.largest_split = lr.len;
        } else {
            raw = b->data + align8((uint64_t)(raw - b->data));
        }
    }
    t->seq = seq;
    t->last_time = last_time;
    t->has_time = has_time;
    h.count = (uint32_t)count;
    w->m.event_count += count;
    if (t->pending)
        h.flags |= TT_CF_CONT_OUT;
    h.body_len = (uint32_t)(o - body);
    if (h.body_len == 0) {
        if (tb)
            tt_tables_chunk_end(tb, w);
        return;
    }
    uint64_t sum = chunk_emit(w, &h);
    uint8_t le[8];
    tt_put64(le, sum);
    w->m.events_checksum = tt_hash64(le, 8, w->m.events_checksum);
    w->m.chunk_count++;
    t->chunks++;
    if (tb)
        tt_tables_chunk_end(tb, w); /* frame blocks and seek batches finished in this chunk */
}

/* ---------------------------------------------------------------- the swapper thread */

/* Faults in [off, off + len) of the pool, so no recording thread takes a page fault in its
 * buffer (a first touch costs microseconds). It changes no byte, so a recording thread may be
 * writing into that range already. False when the kernel cannot (before Linux 5.14). */
static bool pool_populate(struct tt_writer *w, uint64_t off, uint64_t len)
{
    return madvise(w->pool + off, len, MADV_POPULATE_WRITE) == 0;
}


static void *swapper_main(void *arg)
{
    tt_session *s = arg;
    struct tt_writer *w = s->w;
    tt_in_tracer = 1; /* never trace the swapper (its malloc, its symbol lookups) */
    pthread_mutex_lock(&w->qlock);
    for (;;) {
        while (!w->qhead && !w->stop) {
            if (w->pool_ready < w->pool_len) {
                /* idle: fault in the next buffer of the pool (pool_map) */
                pthread_mutex_unlock(&w->qlock);
                bool ok = pool_populate(w, w->pool_ready, w->buffer_bytes);
                w->pool_ready = ok ? w->pool_ready + w->buffer_bytes : w->pool_len;
                pthread_mutex_lock(&w->qlock);
                continue;
            }
            pthread_cond_wait(&w->qcond, &w->qlock);
        }
        struct tt_buf *b = w->qhead;
        if (!b)
            break;
        w->qhead = b->next;
        if (!w->qhead)
            w->qtail = NULL;
        pthread_mutex_unlock(&w->qlock);

        encode_buffer(s, w, b);

        /* Nothing else waiting: write the partial block now, so whatever a thread handed over
         * is on disk (in the page cache, safe from SIGKILL) and its count is published after.
         * Under load the queue is rarely empty and writes stay block-sized. */
        pthread_mutex_lock(&w->qlock);
        bool idle = w->qhead == NULL;
        pthread_mutex_unlock(&w->qlock);
        if (idle)
            block_flush(w);

        pthread_mutex_lock(&w->qlock);
        w->pub_events = w->m.event_count;
        w->pub_payload = w->m.payload_bytes;
        w->pub_chunks = w->m.chunk_count;
        w->pub_bytes = w->bytes_written;
        w->pub_errno = w->write_errno;
        w->inflight--;
        if (w->write_errno) {
            /* nothing more reaches the file: keep the buffer (the budget bounds them all) and
             * wake every waiter, who will be refused once no free buffer is left */
            b->next = w->held;
            w->held = b;
            w->stopped = true;
            pthread_cond_broadcast(&w->fcond);
            continue;
        }
        b->next = NULL;
        if (w->free_list)
            w->free_tail->next = b;
        else
            w->free_list = b;
        w->free_tail = b;
        /* the last buffer in flight: a waiter that does not get this one must look for a
         * buffer to take (steal_one) instead of waiting for one more from here */
        if (w->inflight)
            pthread_cond_signal(&w->fcond);
        else
            pthread_cond_broadcast(&w->fcond);
    }
    pthread_mutex_unlock(&w->qlock);
    return NULL;
}

/* ---------------------------------------------------------------- buffers */

static struct tt_buf *buf_new(struct tt_writer *w)
{
    struct tt_buf *b;
    if (w->storage) {
        uint64_t need = sizeof *b + 64 + w->buffer_bytes;
        if (w->storage_used + need > w->storage_len)
            return NULL;
        b = (struct tt_buf *)(void *)(w->storage + w->storage_used);
        b->data = (uint8_t *)(((uintptr_t)(b + 1) + 63) & ~(uintptr_t)63);
        w->storage_used += need;
    } else {
        if (w->pool_used + w->buffer_bytes > w->pool_len || !(b = malloc(sizeof *b)))
            return NULL;
        b->data = w->pool + w->pool_used;
        w->pool_used += w->buffer_bytes;
    }
    b->next = NULL;
    return b;
}

/* Queues @t's buffer for the swapper, if it has one. Under qlock. */
static void hand_over_locked(struct tt_writer *w, struct tt_thread *t, bool last)
{
    struct tt_buf *b = t->buf;
    if (!b)
        return;
    b->used = (uint32_t)(t->pos - b->data);
    b->last = last;
    b->next = NULL;
    if (w->qtail)
        w->qtail->next = b;
    else
        w->qhead = b;
    w->qtail = b;
    w->inflight++;
    t->buf = NULL;
    t->pos = t->end = NULL;
    pthread_cond_signal(&w->qcond);
}

/* Every buffer is held by a recording thread, none is free or in flight: takes the buffer of
 * one thread (not @self) that is outside a recording call and queues it, so the swapper gives
 * it back to the waiters. Its owner finds pos == end == NULL on its next call and refills, the
 * way it does after a full buffer; the thread's chunks stay in order, since the stolen one is
 * queued before the owner can queue another. Under qlock; false if every holder is inside a
 * call (it hands its buffer over or leaves the call soon).
 *
 * The owner stores busy (relaxed) and then loads steal; we store steal and run a process-wide
 * barrier, then load busy: as in tt_writer_close, either we see the owner busy or its next call
 * sees steal and waits on qlock (tt_writer_steal_ack_) before it touches pos. */
static bool steal_one(tt_session *s, struct tt_writer *w, struct tt_thread *self)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->nthreads;
    pthread_mutex_unlock(&s->lock);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (w->steal_next + k) % n;
        struct tt_thread *v = s->threads[i];
        if (v == self || !v->buf)
            continue;
        atomic_store_explicit(&v->steal, 1, memory_order_seq_cst);
#if !defined(__SANITIZE_THREAD__) /* TSan: the seq_cst store and load order it (tt_rec_begin_) */
        if (!w->membarrier_ok ||
            syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
            atomic_thread_fence(memory_order_seq_cst);
#endif
        if (atomic_load_explicit(&v->busy, memory_order_seq_cst)) {
            atomic_store_explicit(&v->steal, 0, memory_order_relaxed);
            continue;
        }
        /* steal stays set: the owner clears it under qlock, which orders these writes before
         * its next look at pos and end */
        hand_over_locked(w, v, false);
        w->steals++;
        w->steal_next = i + 1;
        return true;
    }
    return false;
}

void tt_writer_steal_ack_(tt_session *s, struct tt_thread *t)
{
    struct tt_writer *w = s->w;
    pthread_mutex_lock(&w->qlock);
    atomic_store_explicit(&t->steal, 0, memory_order_relaxed);
    pthread_mutex_unlock(&w->qlock);
}

int tt_writer_refill(tt_session *s, struct tt_thread *t, bool last)
{
    struct tt_writer *w = s->w;
    pthread_mutex_lock(&w->qlock);
    hand_over_locked(w, t, last);
    if (last) {
        pthread_mutex_unlock(&w->qlock);
        return TT_OK;
    }
    /* Every buffer of the budget is used in turn (new ones first, then the free list in the
     * order the swapper gave them back) rather than the one the swapper freed last: that one's
     * lines are still in the swapper's cache, and writing them costs the recording thread a
     * transfer from the other core per line. The pool is mapped and faulted in at open, so a
     * new buffer costs nothing here. */
    struct tt_buf *b = NULL;
    if (w->nbufs < w->nbufs_max && (b = buf_new(w)) != NULL)
        w->nbufs++;
    else
        b = w->free_list;
    if (!b && w->nbufs == 0) {
        /* no buffer exists and none could be made: waiting would never end */
        pthread_mutex_unlock(&w->qlock);
        return TT_E_NOMEM;
    } else if (!b && !w->stopped) {
        uint64_t t0 = tt_mono_ns();
        atomic_fetch_add_explicit(&w->stalls, 1, memory_order_relaxed);
        while (!w->free_list && !w->stopped) {
            if (w->inflight || steal_one(s, w, t)) {
                pthread_cond_wait(&w->fcond, &w->qlock);
            } else {
                /* every holder is inside a call: look again shortly */
                struct timespec dl;
                clock_gettime(CLOCK_REALTIME, &dl);
                dl.tv_nsec += 1000000;
                if (dl.tv_nsec >= 1000000000) {
                    dl.tv_sec++;
                    dl.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&w->fcond, &w->qlock, &dl);
            }
        }
        atomic_fetch_add_explicit(&w->stall_ns, tt_mono_ns() - t0, memory_order_relaxed);
        b = w->free_list;
    }
    if (!b) {
        /* a write error stopped the file and the budget is spent: refuse, never wait */
        w->refused++;
        pthread_mutex_unlock(&w->qlock);
        return TT_E_STOPPED;
    }
    if (b == w->free_list)
        w->free_list = b->next;
    b->thread = t->id;
    b->used = 0;
    b->last = 0;
    /* under qlock: a thief reads t->buf (steal_one) */
    t->buf = b;
    t->pos = b->data;
    t->end = b->data + w->buffer_bytes;
    pthread_mutex_unlock(&w->qlock);
    return TT_OK;
}

int tt_writer_append_long(tt_session *s, struct tt_thread *t, const struct tt_raw_long *rec,
                          const void *payload)
{
    struct tt_writer *w = s->w;
    uint64_t len = rec->len, need = sizeof *rec + align8(len);
    int rc;
    if ((uint64_t)(t->end - t->pos) < need) {
        if (need <= w->buffer_bytes / 4 + sizeof *rec || (uint64_t)(t->end - t->pos) < sizeof *rec) {
            if ((rc = tt_writer_refill(s, t, false)) != TT_OK)
                return rc;
        }
    }
    memcpy(t->pos, rec, sizeof *rec);
    t->pos += sizeof *rec;
    const uint8_t *p = payload;
    while (len) {
        if (t->pos == t->end && (rc = tt_writer_refill(s, t, false)) != TT_OK)
            return rc;
        uint64_t n = (uint64_t)(t->end - t->pos);
        if (n > len)
            n = len;
        memcpy(t->pos, p, n);
        t->pos += n;
        p += n;
        len -= n;
    }
    t->pos = t->buf->data + align8((uint64_t)(t->pos - t->buf->data));
    return TT_OK;
}

static int append_structural(tt_session *s, struct tt_thread *t, uint32_t kind, uint64_t arg)
{
    struct tt_raw_long r = { .kind = kind, .time = tt_ticks(), .arg = arg };
    return tt_writer_append_long(s, t, &r, NULL);
}

struct tt_thread *tt_writer_thread_alloc(tt_session *s)
{
    struct tt_writer *w = s->w;
    if (!w || !w->threads_area)
        return tt_thread_new();
    /* the capacity allows 64 bytes of alignment per thread */
    uint64_t pad = (uint64_t)(-(uintptr_t)(w->threads_area + w->threads_used) & 63);
    uint64_t need = pad + ((sizeof(struct tt_thread) + 63) & ~(uint64_t)63);
    if (w->threads_used + need > w->threads_len)
        return NULL;
    struct tt_thread *t = (struct tt_thread *)(void *)(w->threads_area + w->threads_used + pad);
    w->threads_used += need;
    memset(t, 0, sizeof *t);
    t->carved = 1;
    return t;
}

int tt_writer_thread_init(tt_session *s, struct tt_thread *t)
{
    int rc = tt_writer_refill(s, t, false);
    if (rc == TT_E_STOPPED) {
        /* a thread that first records after a write error spent the budget: register it
         * without a buffer, so its calls (not its start events) are the ones refused and
         * counted, each with TT_E_STOPPED like every other thread's */
        struct tt_writer *w = s->w;
        pthread_mutex_lock(&w->qlock);
        w->refused--;
        pthread_mutex_unlock(&w->qlock);
        return TT_OK;
    }
    if (rc == TT_OK && t->id == 0)
        rc = append_structural(s, t, TT_EV_SESSION_START, (uint64_t)getpid());
    if (rc == TT_OK)
        rc = append_structural(s, t, TT_EV_THREAD_START, t->os_tid);
    return rc;
}

int tt_session_flush_thread(tt_session *s)
{
    if (!s || !s->head.active || s->head.mode != TT_MODE_RECORD)
        return TT_OK;
    int rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    if (!t)
        return rc;
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    rc = t->ended ? TT_E_CLOSED : tt_writer_refill(s, t, false);
    tt_rec_end_(t);
    return rc;
}

int tt_session_thread_end(tt_session *s)
{
    if (!s || !s->head.active)
        return TT_OK;
    int rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    if (!t)
        return rc;
    if (s->head.mode != TT_MODE_RECORD) {
        t->ended = 1;
        return TT_OK;
    }
    if (t->ended)
        return TT_OK;
    /* busy, like any recording call: a thread waiting for the budget may be taking the buffer */
    if ((rc = tt_rec_begin_(s, t)) != TT_OK)
        return rc;
    rc = append_structural(s, t, TT_EV_THREAD_END, t->os_tid);
    if (rc == TT_OK)
        rc = tt_writer_refill(s, t, true);
    t->ended = 1;
    tt_rec_end_(t);
    return rc;
}

/* ---------------------------------------------------------------- open */

static int open_file(tt_session *s, struct tt_writer *w, tt_error_info *err)
{
    const char *path = s->cfg.file;
    if (!path[0])
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "record mode needs a file (TT_PARAM_FILE)");
    /* a relative path is made absolute now: the rename at close must name the same file after
     * the program changed its working directory */
    char abs[sizeof w->final_path];
    if (path[0] != '/' && getcwd(abs, sizeof abs) != NULL) {
        size_t n = strlen(abs);
        if (n + 1 + strlen(path) < sizeof abs) {
            snprintf(abs + n, sizeof abs - n, "/%s", path);
            path = abs;
        }
    }
    snprintf(w->final_path, sizeof w->final_path, "%s", path);
    int k = snprintf(w->temp_path, sizeof w->temp_path, "%s.%ld.partial", path, (long)getpid());
    if (k < 0 || (size_t)k >= sizeof w->temp_path)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "%s: path too long", path);
    /* O_EXCL refuses an existing file or symlink; O_NOFOLLOW refuses a symlink in the last
     * component even where O_EXCL would not be honoured */
    w->fd = open(w->temp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w->fd < 0) {
        int e = errno;
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "cannot create %s: %s", w->temp_path,
                       strerror(e));
    }
    return TT_OK;
}

static void manifest_write(struct tt_writer *w)
{
    uint8_t buf[TT_MANIFEST_SIZE];
    tt_manifest_encode(buf, &w->m);
    int saved = w->write_errno;
    w->write_errno = 0; /* the manifest is always attempted: it records the error */
    sink_write(w, 0, buf, sizeof buf);
    if (saved)
        w->write_errno = saved;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Maps the whole memory budget for the buffers and faults it in now. A first touch of a page
 * costs several microseconds on virtual machines (7 us measured on ours: 450 us per 256 KiB
 * buffer), so paying it here keeps it off the recording threads, and the recording's footprint
 * is fixed at open: it does not grow with the length of the run. Buffers are carved from the
 * pool as they are first needed and reused from the free list, so no page is faulted twice. */
/* The pool is mapped at open with only its first buffer faulted in; the swapper faults in the
 * rest a buffer at a time while it has nothing else to do (swapper_main), in the order buf_new
 * hands them out, so opening a session does not wait for the whole budget (8 MiB took about
 * 5 ms) and a short run never pays for buffers it does not use. */
static int pool_map(struct tt_writer *w)
{
    w->pool_len = w->nbufs_max * w->buffer_bytes;
    void *p = mmap(NULL, w->pool_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    w->pool = p;
    w->pool_ready = w->buffer_bytes;
    if (!pool_populate(w, 0, w->buffer_bytes)) {
        /* an older kernel: touch every page now, before any thread writes there */
        long page = sysconf(_SC_PAGESIZE);
        for (uint64_t at = 0; at < w->pool_len; at += (uint64_t)(page > 0 ? page : 4096))
            ((volatile uint8_t *)p)[at] = 0;
        w->pool_ready = w->pool_len;
    }
    return 0;
}

int tt_writer_open(tt_session *s, tt_error_info *err)
{
    struct tt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    s->w = w;
    w->fd = -1;
    const struct tt_config_impl *c = &s->cfg;
    w->buffer_bytes = c->buffer_bytes;
    w->nbufs_max = c->memory_bytes / c->buffer_bytes;
    w->block_size = (uint32_t)c->block_bytes;
    w->chunk_cap = tt_chunk_body_max(c->buffer_bytes);
    if (c->storage) {
        tt_writer_limits lim = { c->buffer_bytes, c->memory_bytes, (uint32_t)c->block_bytes,
                                 (uint32_t)c->max_threads, c->max_event, c->object_bytes };
        tt_writer_capacity cap;
        int rc = tt_writer_capacity_of(&lim, &cap, err);
        if (rc == TT_OK && c->storage_len < cap.total)
            rc = tt_fail(err, TT_E_STORAGE, 0, UINT64_MAX,
                         "writer storage of %zu bytes is smaller than the capacity %llu",
                         c->storage_len, (unsigned long long)cap.total);
        if (rc != TT_OK) {
            free(w);
            s->w = NULL;
            return rc;
        }
        /* [buffers][chunk buffer ... block buffer][per-thread state][objects] */
        w->storage = c->storage;
        w->storage_len = cap.buffers;
        w->chunk = w->storage + cap.buffers;
        w->block = w->chunk + (cap.swapper - c->block_bytes);
        w->threads_area = w->chunk + cap.swapper;
        w->threads_len = cap.threads;
    } else {
        w->chunk = malloc(TT_CHUNK_HEADER + w->chunk_cap);
        w->block = malloc(w->block_size);
        if (!w->chunk || !w->block || pool_map(w) != 0) {
            tt_writer_free(s);
            return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
        }
    }
    pthread_mutex_init(&w->qlock, NULL);
    pthread_cond_init(&w->qcond, NULL);
    pthread_cond_init(&w->fcond, NULL);

    w->msink = c->memory_sink;
    w->cb = c->cb_fn;
    w->cb_ctx = c->cb_ctx;
    if (!w->msink && !w->cb) {
        int rc = open_file(s, w, err);
        if (rc != TT_OK) {
            tt_writer_free(s);
            return rc;
        }
    }
    if (w->msink) {
        w->msink->data = NULL;
        w->msink->len = 0;
        w->msink->cap_ = 0;
    }

    tt_manifest *m = &w->m;
    m->version = TT_FORMAT_VERSION;
    m->lib_version = TT_VERSION_NUMBER;
    m->block_size = w->block_size;
    m->build_id_len = (uint32_t)tt_build_id_self(m->build_id, sizeof m->build_id);
    snprintf(m->caller, sizeof m->caller, "%s", c->caller);
    /* provisional, over 0.2 ms, for a file whose run dies before close (recover); close
     * measures the rate over the whole run */
    tt_calib_begin(&w->calib);
    m->ticks_per_sec = tt_calib_end(&w->calib, TT_CALIB_OPEN_NS, 0);
    m->flags = tt_ticks_are_tsc() ? TT_MF_TSC : 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    m->tick_origin = tt_ticks();
    m->realtime_origin_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
    m->pid = (uint32_t)getpid();
    m->data_offset = TT_MANIFEST_SIZE;
    m->data_end = TT_MANIFEST_SIZE;
    m->file_size = TT_MANIFEST_SIZE;
    w->file_off = TT_MANIFEST_SIZE;
    manifest_write(w);
    if (w->write_errno) {
        int e = w->write_errno;
        int rc = tt_fail(err, TT_E_IO, e, 0, "cannot write the manifest of %s: %s",
                         w->fd >= 0 ? w->temp_path : "the sink", strerror(e));
        if (w->fd >= 0)
            unlink(w->temp_path);
        tt_writer_free(s);
        return rc;
    }

    /* close uses an asymmetric barrier, so the hot path needs no fence (see tt_writer_close) */
    if (tt_tables_open(s, &w->tables) != TT_OK) {
        if (w->fd >= 0)
            unlink(w->temp_path);
        tt_writer_free(s);
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    }

    w->membarrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;

    /* The swapper runs with every asynchronous signal blocked: the program's handlers never run
     * on it, and a write past RLIMIT_FSIZE gives it EFBIG instead of killing the process with
     * SIGXFSZ (the signal stays pending on the swapper and dies with it). Faults stay unblocked
     * so a crash of the swapper still reaches the crash handler. It inherits the mask. */
    sigset_t all, old;
    sigfillset(&all);
    static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&w->swapper, NULL, swapper_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc != 0) {
        if (w->fd >= 0)
            unlink(w->temp_path);
        tt_writer_free(s);
        return tt_fail(err, TT_E_NOMEM, EAGAIN, UINT64_MAX, "cannot start the swapper thread");
    }
    w->swapper_started = true;
    return TT_OK;
}

/* ---------------------------------------------------------------- close */

static void write_tables(tt_session *s, struct tt_writer *w)
{
    tt_manifest *m = &w->m;
    /* the tables are chunks too; they reuse the chunk buffer, growing it if needed */
    uint64_t need_thr = (uint64_t)s->nthreads * TT_THREAD_ROW;
    uint64_t need_obj = 0;
    for (uint32_t id = 1; id <= s->names.count; id++) {
        uint8_t k = 0;
        const char *nm = NULL;
        uint32_t len = 0;
        tt_names_get(&s->names, id, &k, &nm, &len);
        need_obj += 1 + 5 + len;
    }
    uint64_t need = need_thr > need_obj ? need_thr : need_obj;
    uint8_t *buf = w->chunk;
    bool own = false;
    if (need > w->chunk_cap) {
        buf = malloc(TT_CHUNK_HEADER + need);
        own = true;
        if (!buf) {
            w->write_errno = ENOMEM;
            return;
        }
    }
    uint8_t *saved = w->chunk;
    w->chunk = buf;

    m->threads_offset = w->file_off + w->block_len;
    uint8_t *o = buf + TT_CHUNK_HEADER;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        struct tt_thread *t = s->threads[i];
        tt_thread_entry e = { t->id, t->os_tid, t->name_id, 0, t->seq, t->chunks,
                              t->first_time, t->last_time };
        tt_thread_row_encode(o, &e);
        o += TT_THREAD_ROW;
    }
    struct tt_chunk_header h = { .type = TT_CHUNK_THREADS, .thread = TT_NO_THREAD,
                                 .count = s->nthreads, .body_len = (uint32_t)need_thr };
    chunk_emit(w, &h);
    m->threads_length = TT_CHUNK_HEADER + need_thr;
    m->thread_count = s->nthreads;

    m->objects_offset = w->file_off + w->block_len;
    o = buf + TT_CHUNK_HEADER;
    for (uint32_t id = 1; id <= s->names.count; id++) {
        uint8_t k = 0;
        const char *nm = NULL;
        uint32_t len = 0;
        tt_names_get(&s->names, id, &k, &nm, &len);
        *o++ = k;
        o = tt_put_varint(o, len);
        memcpy(o, nm, len);
        o += len;
    }
    h = (struct tt_chunk_header){ .type = TT_CHUNK_OBJECTS, .thread = TT_NO_THREAD,
                                  .count = s->names.count, .body_len = (uint32_t)(o - buf - TT_CHUNK_HEADER) };
    chunk_emit(w, &h);
    m->objects_length = TT_CHUNK_HEADER + h.body_len;
    m->object_count = s->names.count;
    w->chunk = saved;
    if (own)
        free(buf);
}

/* Lets the swapper drain the queue and waits for it to end; idempotent. */
static void swapper_stop(struct tt_writer *w)
{
    if (!w->swapper_started)
        return;
    pthread_mutex_lock(&w->qlock);
    w->stop = true;
    pthread_cond_signal(&w->qcond);
    pthread_mutex_unlock(&w->qlock);
    pthread_join(w->swapper, NULL);
    w->swapper_started = false;
}

int tt_writer_close(tt_session *s, tt_error_info *err)
{
    struct tt_writer *w = s->w;
    int rc = TT_OK, lrc;

    /* the closing thread's last event */
    struct tt_thread *self = tt_thread_lookup_slow(s, &lrc);
    if (self && !self->ended) {
        atomic_store_explicit(&self->busy, 1, memory_order_seq_cst);
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&self->steal, memory_order_seq_cst))
            tt_writer_steal_ack_(s, self);
        append_structural(s, self, TT_EV_SESSION_END, 0);
        atomic_store_explicit(&self->busy, 0, memory_order_release);
    }

    /* Stop the recording threads. A thread marks itself busy (relaxed store), then reads
     * `closing` (relaxed load). We store `closing`, then run a process-wide barrier: after it,
     * every thread either has its busy store visible to us or will see closing = 1 in its next
     * call. Then we wait for each busy flag to drop (acquire: its appends are visible). */
    atomic_store_explicit(&s->closing, 1, memory_order_seq_cst);
    if (!w->membarrier_ok || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        atomic_thread_fence(memory_order_seq_cst);
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->nthreads;
    pthread_mutex_unlock(&s->lock);
    for (uint32_t i = 0; i < n; i++) {
        struct tt_thread *t = s->threads[i];
        while (atomic_load_explicit(&t->busy, memory_order_acquire))
            sched_yield();
        /* under qlock: a thread waiting for the budget may be taking the buffer (steal_one) */
        pthread_mutex_lock(&w->qlock);
        if (!t->ended && t->buf) {
            t->ended = 1;
            hand_over_locked(w, t, true);
        }
        pthread_mutex_unlock(&w->qlock);
    }

    swapper_stop(w);

    /* The rest is written by the closing thread: hold SIGXFSZ off it, as on the swapper, so a
     * file-size limit is an EFBIG here too; the signal our own write raised is taken back below
     * (sigtimedwait), never delivered to the program. */
    sigset_t xfsz, old_mask;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old_mask);
    bool failed_before = w->write_errno != 0;

    tt_manifest *m = &w->m;
    if (w->tables)
        tt_tables_finish(w->tables, w); /* the frames still open, the last partial blocks */
    block_flush(w);
    m->data_end = w->file_off;
    write_tables(s, w);
    if (w->tables)
        tt_tables_write_tail(w->tables, w, s->nthreads);
    block_flush(w);
    m->file_size = w->file_off;
    m->block_count = (m->file_size - m->data_offset + w->block_size - 1) / w->block_size;
    /* The whole run's rate, checked against the estimate made at open: more than 5% off, a
     * deep suspend stopped the TSC or close runs on a core whose TSC disagrees with the opening
     * one's, and tt_calib_end measures afresh on this thread. */
    m->ticks_per_sec = tt_calib_end(&w->calib, TT_CALIB_MIN_NS, m->ticks_per_sec);
    m->stall_count = atomic_load(&w->stalls);
    m->threads_refused = atomic_load(&s->threads_refused);
    m->stall_ns = atomic_load(&w->stall_ns);
    m->flags |= TT_MF_FINALIZED;
    if (w->write_errno) {
        m->flags |= TT_MF_INCOMPLETE;
        m->write_errno = w->write_errno;
    }
    int werr = w->write_errno;
    manifest_write(w);
    if (!werr && w->write_errno)
        werr = w->write_errno;
    if (!failed_before && werr == EFBIG && !sigismember(&old_mask, SIGXFSZ)) {
        struct timespec zero = { 0, 0 };
        sigtimedwait(&xfsz, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);

    if (w->fd >= 0) {
        if (!werr && fdatasync(w->fd) != 0)
            werr = errno;
        if (close(w->fd) != 0 && !werr)
            werr = errno;
        w->fd = -1;
        if (rename(w->temp_path, w->final_path) != 0) {
            int e = errno;
            return tt_fail(err, TT_E_IO, e, UINT64_MAX, "cannot rename %s to %s: %s",
                           w->temp_path, w->final_path, strerror(e));
        }
    }
    if (werr && (m->flags & TT_MF_INCOMPLETE)) {
        pthread_mutex_lock(&w->qlock);
        uint64_t refused = w->refused;
        pthread_mutex_unlock(&w->qlock);
        rc = tt_fail(err, TT_E_IO, werr, w->write_errno_off,
                     "writing %s failed at offset %llu: %s (errno %d); the file is marked "
                     "incomplete (%llu recording calls refused with TT_E_STOPPED)",
                     w->final_path[0] ? w->final_path : "the sink",
                     (unsigned long long)w->write_errno_off, strerror(werr), werr,
                     (unsigned long long)refused);
    } else if (werr) {
        rc = tt_fail(err, TT_E_IO, werr, UINT64_MAX, "finishing %s failed: %s (errno %d)",
                     w->final_path[0] ? w->final_path : "the sink", strerror(werr), werr);
    }
    return rc;
}

void tt_writer_free(tt_session *s)
{
    struct tt_writer *w = s->w;
    if (!w)
        return;
    swapper_stop(w);
    if (w->fd >= 0)
        close(w->fd);
    if (!w->storage) {
        struct tt_buf *b = w->free_list;
        while (b) {
            struct tt_buf *next = b->next;
            free(b);
            b = next;
        }
        for (struct tt_buf *q = w->held; q;) { /* data is in the pool */
            struct tt_buf *next = q->next;
            free(q);
            q = next;
        }
        for (struct tt_buf *q = w->qhead; q;) {
            struct tt_buf *next = q->next;
            free(q);
            q = next;
        }
        for (uint32_t i = 0; i < s->nthreads; i++) {
            if (s->threads[i]->buf) {
                free(s->threads[i]->buf);
            }
        }
        free(w->chunk);
        free(w->block);
        if (w->pool)
            munmap(w->pool, w->pool_len);
    }
    tt_tables_free(w->tables);
    pthread_mutex_destroy(&w->qlock);
    pthread_cond_destroy(&w->qcond);
    pthread_cond_destroy(&w->fcond);
    free(w);
    s->w = NULL;
}

void tt_writer_stats(tt_session *s, tt_session_stats *st)
{
    struct tt_writer *w = s->w;
    if (!w)
        return;
    pthread_mutex_lock(&w->qlock);
    st->events = w->pub_events;
    st->payload_bytes = w->pub_payload;
    st->chunks = w->pub_chunks;
    st->bytes_written = w->pub_bytes;
    st->write_errno = w->pub_errno;
    st->refused = w->refused;
    pthread_mutex_unlock(&w->qlock);
    st->stalls = atomic_load_explicit(&w->stalls, memory_order_relaxed);
    st->stall_ns = atomic_load_explicit(&w->stall_ns, memory_order_relaxed);
}

void tt_session_mark_crashed_(tt_session *s)
{
    if (s->w)
        s->w->m.flags |= TT_MF_CRASHED;
}
