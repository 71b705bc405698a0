/* SPDX-License-Identifier: MIT */
/* Thread buffers and the memory budget: the recording thread's slow path.
 *
 * A recording thread appends fixed raw records (record.h) to its own buffer. When the buffer is
 * full it is queued for the swapper and the thread takes a free one. Every buffer of the budget
 * is used in turn, oldest free first (FIFO, see tt_writer_refill), so a hot thread does not
 * write into lines the swapper has just read. The budget (TT_PARAM_MEMORY_BYTES) caps how many
 * buffers exist; when all are in flight the thread waits, and the wait is counted. Nothing is
 * dropped. When none is in flight either, every buffer is held by a recording thread (more
 * threads than the budget has buffers, idle ones among them), and waiting would never end: the
 * waiting thread takes the buffer of a thread that is not inside a recording call and hands it
 * to the swapper (steal_one), which gives it back.
 *
 * A wait lands where it happened: the thread records it as a call of its own, an enter and an
 * exit of TT_STALL_FUNCTION at the wait's start and end, first in the buffer it got (stall_frame).
 * The event it was appending follows with its time raised to the wait's end (the encoder keeps a
 * thread's times non-decreasing), so the frame the wait interrupted shows the wait as a child's
 * time, not its own, and `stats`, `tree` and `export` show it as the tracer's.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record_api.h"

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
        if (w->pool_used + w->buffer_bytes > w->pool_map_len || !(b = malloc(sizeof *b)))
            return NULL;
        b->data = w->pool + w->pool_used;
        w->pool_used += w->buffer_bytes;
    }
    b->next = NULL;
    return b;
}

/* Queues @t's buffer for the swapper, if it has one. Under qlock. */
void tt_writer_hand_over_locked(struct tt_writer *w, struct tt_rec_thread *t, bool last)
{
    struct tt_buf *b = t->buf;
    if (!b)
        return;
    b->used = (uint32_t)(t->pos - b->data);
    b->last = last;
    if (t->chaos_mark != NULL) {
        /* schedule chaos: what this buffer took of the distance to the next point */
        uint64_t used = (uint64_t)(t->pos - t->chaos_mark);
        t->chaos_left = used < t->chaos_left ? t->chaos_left - used : sizeof(struct tt_raw_short);
        t->chaos_mark = NULL;
    }
    b->next = NULL;
    if (w->qtail)
        w->qtail->next = b;
    else
        w->qhead = b;
    w->qtail = b;
    w->inflight++;
    w->handed++;
    t->buf = NULL;
    t->pos = t->end = NULL;
    pthread_cond_signal(&w->qcond);
}

/* Takes @v's buffer for the swapper unless @v is inside a recording call; true when it did.
 * Under qlock.
 *
 * The owner stores busy (relaxed) and then loads steal; we store steal and run a process-wide
 * barrier, then load busy: as in tt_writer_close, either we see the owner busy or its next call
 * sees steal and waits on qlock (tt_writer_steal_ack_) before it touches pos. */
static bool try_steal(struct tt_writer *w, struct tt_rec_thread *v)
{
    atomic_store_explicit(&v->steal, 1, memory_order_seq_cst);
#if !defined(__SANITIZE_THREAD__) /* TSan: the seq_cst store and load order it (tt_rec_begin_) */
    if (!w->membarrier_ok ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        atomic_thread_fence(memory_order_seq_cst);
#endif
    if (atomic_load_explicit(&v->base.busy, memory_order_seq_cst)) {
        atomic_store_explicit(&v->steal, 0, memory_order_relaxed);
        return false;
    }
    /* steal stays set: the owner clears it under qlock (tt_writer_steal_ack_), which orders
     * these writes before its next look at pos and end */
    tt_writer_hand_over_locked(w, v, false);
    w->steals++;
    return true;
}

/* Every buffer is held by a recording thread, none is free or in flight: takes the buffer of
 * one thread (not @self) that is outside a recording call and queues it, so the swapper gives
 * it back to the waiters. Its owner finds pos == end == NULL on its next call and refills, the
 * way it does after a full buffer; the thread's chunks stay in order, since the stolen one is
 * queued before the owner can queue another. Under qlock; false if every holder is inside a
 * call (it hands its buffer over or leaves the call soon). */
static bool steal_one(tt_session *s, struct tt_writer *w, struct tt_rec_thread *self)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->nthreads;
    pthread_mutex_unlock(&s->lock);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (w->steal_next + k) % n;
        struct tt_rec_thread *v = tt_rec_of(s->threads[i]);
        if (v == self || !v->buf || !try_steal(w, v))
            continue;
        w->steal_next = i + 1;
        return true;
    }
    return false;
}

/* Before the process dies by a signal no handler sees (SIGKILL it sends itself): every buffer
 * that can be taken now goes to the swapper, and the call returns once the swapper has encoded
 * them all and written its last partial block (it writes that when its queue runs empty, before
 * it counts the buffer encoded), so the events are in the page cache, where the .partial file
 * keeps them for recover. @self (the calling thread, outside any recording call: the preload
 * holds the guard) hands its own buffer over; another thread's is taken as steal_one takes it,
 * unless it is inside a recording call at that moment (then its buffer is left: the caller
 * cannot wait for a thread that may be blocked). Bounded: the wait is for the swapper alone,
 * which takes no lock a recording thread holds; a write error stops it waiting. */
void tt_writer_flush_all(tt_session *s, struct tt_rec_thread *self)
{
    struct tt_writer *w = s->w;
    if (!w || (!w->swapper_started && !w->swapper_lazy))
        return;
    pthread_mutex_lock(&w->qlock);
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->nthreads;
    pthread_mutex_unlock(&s->lock);
    for (uint32_t i = 0; i < n; i++) {
        struct tt_rec_thread *v = tt_rec_of(s->threads[i]);
        if (!v->buf || v->base.ended)
            continue;
        if (v == self)
            tt_writer_hand_over_locked(w, v, false);
        else
            try_steal(w, v);
    }
    uint64_t ticket = w->handed;
    tt_swapper_encode_here_locked(s, w); /* no swapper runs: this thread encodes them */
    w->sync_waiters++;
    while ((w->encoded < ticket || w->qhead) && !w->stopped)
        pthread_cond_wait(&w->scond, &w->qlock);
    w->sync_waiters--;
    pthread_mutex_unlock(&w->qlock);
}

void tt_writer_steal_ack_(tt_session *s, struct tt_rec_thread *t)
{
    struct tt_writer *w = s->w;
    pthread_mutex_lock(&w->qlock);
    atomic_store_explicit(&t->steal, 0, memory_order_relaxed);
    pthread_mutex_unlock(&w->qlock);
}

/* The wait [t0, t1] (ticks) as a frame of TT_STALL_FUNCTION at the front of @t's new buffer,
 * which has room for it. Interning takes the names' lock, never qlock, and happens once. */
static void stall_frame(tt_session *s, struct tt_rec_thread *t, uint64_t t0, uint64_t t1)
{
    struct tt_writer *w = s->w;
    /* relaxed: the id is a plain number, and tt_intern returns the same one to every thread */
    uint32_t fn = atomic_load_explicit(&w->stall_fn, memory_order_relaxed);
    if (fn == 0) {
        if (tt_intern(s, TT_OBJ_FUNCTION, TT_STALL_FUNCTION, &fn) != TT_OK)
            return;
        atomic_store_explicit(&w->stall_fn, fn, memory_order_relaxed);
    }
    struct tt_raw_short r[2] = { { TT_EV_ENTER, fn, t0 }, { TT_EV_EXIT, fn, t1 } };
    if ((size_t)(tt_rec_buf_end(w, t) - t->pos) < sizeof r)
        return;
    memcpy(t->pos, r, sizeof r);
    t->pos += sizeof r;
}

/* Buffers are queued and no swapper runs: it starts now, the first time a thread hands a buffer
 * over (a full one, or its last; most of a tree's processes never do before close); when it
 * cannot, this thread encodes the queue. Under qlock, which it lets go meanwhile. */
static void need_swapper_locked(tt_session *s, struct tt_writer *w)
{
    if (w->swapper_started || !w->qhead)
        return;
    if (w->swapper_lazy) {
        pthread_mutex_unlock(&w->qlock);
        tt_swapper_ensure(s, w);
        pthread_mutex_lock(&w->qlock);
    }
    tt_swapper_encode_here_locked(s, w);
}

/* @frame_ok: the new buffer may begin with the stall frame (not while a payload runs on). */
static int refill(tt_session *s, struct tt_rec_thread *t, bool last, bool frame_ok)
{
    struct tt_writer *w = s->w;
    pthread_mutex_lock(&w->qlock);
    bool full = t->buf != NULL; /* else a thread's first buffer */
    tt_writer_hand_over_locked(w, t, last);
    if (full) /* a buffer handed over reaches the file soon, safe from a SIGKILL after */
        need_swapper_locked(s, w);
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
    uint64_t stall_t0 = 0, stall_t1 = 0;
    bool stalled = false;
    if (w->nbufs < w->nbufs_max && (b = buf_new(w)) != NULL)
        w->nbufs++;
    else
        b = w->free_list;
    bool grew = false;
    if (!b && w->nbufs_max < w->nbufs_cap && !w->stopped && (b = buf_new(w)) != NULL) {
        /* grow before waiting (the bound: writer.c, tt_writer_open) */
        w->nbufs_max++;
        w->nbufs++;
        w->grown++;
        grew = true;
    }
    if (!b && w->nbufs == 0) {
        /* no buffer exists and none could be made: waiting would never end */
        pthread_mutex_unlock(&w->qlock);
        return TT_E_NOMEM;
    } else if (!b && !w->stopped) {
        stall_t0 = tt_ticks();
        uint64_t t0 = tt_mono_ns();
        atomic_fetch_add_explicit(&w->stalls, 1, memory_order_relaxed);
        while (!w->free_list && !w->stopped) {
            need_swapper_locked(s, w); /* a buffer queued, no swapper yet */
            if (w->free_list)
                break;
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
        stall_t1 = tt_ticks();
        stalled = frame_ok;
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
    b->thread = t->base.id;
    b->used = 0;
    b->last = 0;
    /* under qlock: a thief reads t->buf (steal_one) */
    t->buf = b;
    t->pos = b->data;
    t->end = b->data + w->buffer_bytes;
    pthread_mutex_unlock(&w->qlock);
    if (grew && !tt_pool_populate(w, (uint64_t)(b->data - w->pool), w->buffer_bytes)) {
        /* an older kernel: the pages fault in as the thread writes them */
    }
    if (stalled)
        stall_frame(s, t, stall_t0, stall_t1);
    if (TT_UNLIKELY(w->chaos != NULL))
        tt_chaos_arm_(w, t, false);
    return TT_OK;
}

int tt_writer_refill(tt_session *s, struct tt_rec_thread *t, bool last)
{
    return refill(s, t, last, true);
}

int tt_writer_append_long(tt_session *s, struct tt_rec_thread *t, const struct tt_raw_long *rec,
                          const void *payload)
{
    struct tt_writer *w = s->w;
    uint64_t len = rec->len, need = sizeof *rec + tt_align8(len);
    int rc;
    /* the true end, not a false one of schedule chaos */
    uint64_t room = (uint64_t)(tt_rec_buf_end(w, t) - t->pos);
    if (room < need) {
        if (need <= w->buffer_bytes / 4 + sizeof *rec || room < sizeof *rec) {
            if ((rc = tt_writer_refill(s, t, false)) != TT_OK)
                return rc;
        }
    }
    memcpy(t->pos, rec, sizeof *rec);
    t->pos += sizeof *rec;
    const uint8_t *p = payload;
    while (len) {
        if (t->pos == tt_rec_buf_end(w, t) && (rc = refill(s, t, false, false)) != TT_OK)
            return rc;
        uint64_t n = (uint64_t)(tt_rec_buf_end(w, t) - t->pos);
        if (n > len)
            n = len;
        memcpy(t->pos, p, n);
        t->pos += n;
        p += n;
        len -= n;
    }
    t->pos = t->buf->data + tt_align8((uint64_t)(t->pos - t->buf->data));
    if (TT_UNLIKELY(t->pos > t->end))
        tt_chaos_arm_(w, t, false); /* it passed a false end (chaos only) */
    return TT_OK;
}

int tt_writer_append_structural(tt_session *s, struct tt_rec_thread *t, uint32_t kind,
                                uint64_t arg)
{
    struct tt_raw_long r = { .kind = kind, .time = tt_ticks(), .arg = arg };
    return tt_writer_append_long(s, t, &r, NULL);
}

struct tt_thread *tt_writer_thread_alloc(tt_session *s)
{
    struct tt_writer *w = s->w;
    if (!w || !w->threads_area)
        return tt_thread_alloc_aligned(sizeof(struct tt_rec_thread));
    /* the capacity allows 64 bytes of alignment per thread */
    uint64_t pad = (uint64_t)(-(uintptr_t)(w->threads_area + w->threads_used) & 63);
    uint64_t need = pad + ((sizeof(struct tt_rec_thread) + 63) & ~(uint64_t)63);
    if (w->threads_used + need > w->threads_len)
        return NULL;
    struct tt_rec_thread *t = (struct tt_rec_thread *)(void *)(w->threads_area + w->threads_used + pad);
    w->threads_used += need;
    memset(t, 0, sizeof *t);
    t->base.carved = 1;
    return &t->base;
}

int tt_writer_thread_init(tt_session *s, struct tt_rec_thread *t)
{
    /* no stall frame before the thread's start events: its stream begins with them */
    int rc = refill(s, t, false, false);
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
    if (rc == TT_OK && t->base.id == 0)
        rc = tt_writer_append_structural(s, t, TT_EV_SESSION_START, (uint64_t)getpid());
    if (rc == TT_OK)
        rc = tt_writer_append_structural(s, t, TT_EV_THREAD_START, t->base.os_tid);
    return rc;
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


int tt_writer_sync_thread(tt_session *s, struct tt_rec_thread *t)
{
    struct tt_writer *w = s->w;
    pthread_mutex_lock(&w->qlock);
    tt_writer_hand_over_locked(w, t, false);
    uint64_t ticket = w->handed;
    tt_swapper_encode_here_locked(s, w);
    w->sync_waiters++;
    while (w->encoded < ticket && !w->stopped)
        pthread_cond_wait(&w->scond, &w->qlock);
    w->sync_waiters--;
    pthread_mutex_unlock(&w->qlock);
    return tt_writer_refill(s, t, false);
}
