/* SPDX-License-Identifier: MIT */
/* The swapper thread: the one thread that encodes and writes.
 *
 * It takes the buffers the recording threads hand over, in the order they were queued, turns
 * each into an event chunk (encoder.c), writes block-sized units of them (writer.c), and gives
 * the buffer back to the free list. While it has nothing to do, it faults in the next buffer of
 * the pool, so a recording thread never takes a page fault in a fresh buffer. It holds the
 * tracer's guard for its whole life: its own malloc and symbol lookups are never traced.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "record.h"

/* The swapper's stack when it comes from the region: its deepest path is the encoder and the
 * symbol lookups of the hooks' resolver. */
#define SWAPPER_STACK (2u << 20)

/* How many buffers past the ones carved (pool_used) the idle swapper faults in. Buffers are
 * reused from the free list, so a run whose swapper keeps up carves a handful and never needs
 * the rest. It starts once a thread handed a buffer over, or TT_POOL_DELAY_NS after the
 * swapper started: a process that ends sooner and never filled its first buffer (most of a
 * tree's: a shell's /bin/true, a compiler's helpers) never needs a second, and faulting in 4 of
 * them cost it a millisecond of system time and its close a wait for the fault-in under way. */
#define TT_POOL_AHEAD 4
#define TT_POOL_DELAY_NS 20000000u

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Faults in [off, off + len) of the pool, so no recording thread takes a page fault in its
 * buffer (a first touch costs microseconds). It changes no byte, so a recording thread may be
 * writing into that range already. False when the kernel cannot (before Linux 5.14). */
bool tt_pool_populate(struct tt_writer *w, uint64_t off, uint64_t len)
{
    return madvise(w->pool + off, len, MADV_POPULATE_WRITE) == 0;
}

/* The first buffer of the queue, taken off it. Under qlock; the queue is not empty. */
static struct tt_buf *take_locked(struct tt_writer *w)
{
    struct tt_buf *b = w->qhead;
    w->qhead = b->next;
    if (!w->qhead)
        w->qtail = NULL;
    return b;
}

/* After @b was encoded (and, the queue empty, the partial block written): its counts
 * published, its waiters woken, the buffer back on the free list. Under qlock. */
static void buffer_done_locked(struct tt_writer *w, struct tt_buf *b)
{
    w->pub_events = w->m.event_count;
    w->pub_payload = w->m.payload_bytes;
    w->pub_chunks = w->m.chunk_count;
    w->pub_bytes = w->bytes_written;
    w->pub_errno = w->write_errno;
    w->inflight--;
    w->encoded++;
    if (w->sync_waiters)
        pthread_cond_broadcast(&w->scond);
    if (w->write_errno) {
        /* nothing more reaches the file: keep the buffer (the budget bounds them all) and
         * wake every waiter, who will be refused once no free buffer is left */
        b->next = w->held;
        w->held = b;
        w->stopped = true;
        pthread_cond_broadcast(&w->fcond);
        return;
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

static void *swapper_main(void *arg)
{
    tt_session *s = arg;
    struct tt_writer *w = s->w;
    tt_in_tracer = 1; /* never trace the swapper (its malloc, its symbol lookups) */
    struct timespec ahead_at; /* qcond's clock: the default, CLOCK_REALTIME */
    clock_gettime(CLOCK_REALTIME, &ahead_at);
    ahead_at.tv_nsec += TT_POOL_DELAY_NS;
    if (ahead_at.tv_nsec >= 1000000000) {
        ahead_at.tv_sec++;
        ahead_at.tv_nsec -= 1000000000;
    }
    bool ahead = false;
    pthread_mutex_lock(&w->qlock);
    for (;;) {
        while (!w->qhead && !w->stop) {
            bool more = w->pool_ready < w->pool_len;
            if (more && !ahead && !w->handed) {
                /* a young session that filled no buffer yet: it may end before it needs one */
                if (pthread_cond_timedwait(&w->qcond, &w->qlock, &ahead_at) == ETIMEDOUT)
                    ahead = true;
                continue;
            }
            if (more &&
                w->pool_ready < w->pool_used + TT_POOL_AHEAD * w->buffer_bytes) {
                /* idle: fault in the rest of the pool's buffer at pool_ready (pool_map), up to
                 * TT_POOL_AHEAD buffers past those carved so far */
                uint64_t n = w->buffer_bytes - w->pool_ready % w->buffer_bytes;
                pthread_mutex_unlock(&w->qlock);
                bool ok = tt_pool_populate(w, w->pool_ready, n);
                w->pool_ready = ok ? w->pool_ready + n : w->pool_len;
                pthread_mutex_lock(&w->qlock);
                continue;
            }
            pthread_cond_wait(&w->qcond, &w->qlock);
        }
        if (!w->qhead)
            break;
        struct tt_buf *b = take_locked(w);
        pthread_mutex_unlock(&w->qlock);

        tt_encode_buffer(s, w, b);

        /* Nothing else waiting: write the partial block now, so whatever a thread handed over
         * is on disk (in the page cache, safe from SIGKILL) and its count is published after.
         * Under load the queue is rarely empty and writes stay block-sized. */
        pthread_mutex_lock(&w->qlock);
        bool idle = w->qhead == NULL;
        pthread_mutex_unlock(&w->qlock);
        if (idle)
            tt_writer_block_flush(w);

        pthread_mutex_lock(&w->qlock);
        buffer_done_locked(w, b);
    }
    pthread_mutex_unlock(&w->qlock);
    return NULL;
}

void tt_swapper_encode_here_locked(tt_session *s, struct tt_writer *w)
{
    if (w->swapper_started || !w->qhead)
        return; /* the swapper's work, or none */
    pthread_mutex_unlock(&w->qlock);
    pthread_mutex_lock(&w->encode_lock);
    pthread_mutex_lock(&w->qlock);
    /* swapper_started changes only under encode_lock: no swapper runs while this does */
    while (!w->swapper_started && w->qhead) {
        struct tt_buf *b = take_locked(w);
        pthread_mutex_unlock(&w->qlock);
        tt_encode_buffer(s, w, b);
        pthread_mutex_lock(&w->qlock);
        if (!w->qhead) {
            pthread_mutex_unlock(&w->qlock);
            tt_writer_block_flush(w);
            pthread_mutex_lock(&w->qlock);
        }
        buffer_done_locked(w, b);
    }
    pthread_mutex_unlock(&w->qlock);
    pthread_mutex_unlock(&w->encode_lock);
    pthread_mutex_lock(&w->qlock);
}

bool tt_swapper_ensure(tt_session *s, struct tt_writer *w)
{
    pthread_mutex_lock(&w->encode_lock);
    if (!w->swapper_started && !w->swapper_failed && tt_swapper_start(s, w) != 0)
        w->swapper_failed = true; /* the queue is encoded by whoever waits for it */
    bool on = w->swapper_started;
    pthread_mutex_unlock(&w->encode_lock);
    return on;
}


int tt_swapper_start(tt_session *s, struct tt_writer *w)
{
    /* The swapper runs with every asynchronous signal blocked: the program's handlers never run
     * on it, and a write past RLIMIT_FSIZE gives it EFBIG instead of killing the process with
     * SIGXFSZ (the signal stays pending on the swapper and dies with it). Faults stay unblocked
     * so a crash of the swapper still reaches the crash handler. It inherits the mask. */
    sigset_t all, old;
    sigfillset(&all);
    static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    /* its stack from the runtime's region too: a thread's stack is a mapping, and a replay has
     * no swapper, so the program's later mappings would land elsewhere in the two modes */
    pthread_attr_t attr, *ap = NULL;
    if ((w->swapper_stack = tt_region_map(SWAPPER_STACK + 4096)) != NULL &&
        pthread_attr_init(&attr) == 0) {
        /* a page below the stack that faults, as a thread stack's guard page does */
        mprotect(w->swapper_stack, 4096, PROT_NONE);
        if (pthread_attr_setstack(&attr, (uint8_t *)w->swapper_stack + 4096, SWAPPER_STACK) == 0)
            ap = &attr;
    }
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&w->swapper, ap, swapper_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ap)
        pthread_attr_destroy(ap);
    if (prc != 0)
        return prc;
    pthread_mutex_lock(&w->qlock);
    w->swapper_started = true;
    pthread_mutex_unlock(&w->qlock);
    return 0;
}

void tt_swapper_stop(struct tt_writer *w)
{
    if (!w->swapper_started)
        return;
    pthread_mutex_lock(&w->qlock);
    w->stop = true;
    pthread_cond_signal(&w->qcond);
    pthread_mutex_unlock(&w->qlock);
    pthread_join(w->swapper, NULL);
    w->swapper_started = false;
    if (w->swapper_stack) {
        tt_region_unmap(w->swapper_stack, SWAPPER_STACK + 4096);
        w->swapper_stack = NULL;
    }
}
