/* SPDX-License-Identifier: MIT */
/* The per-thread registry of a session.
 *
 * A thread finds its state in a session through a small thread-local cache keyed by the session
 * pointer and the session's unique id (a new session may reuse a freed one's address). On a miss
 * the thread registers under the session lock: it gets the next dense thread id and the
 * backend's per-thread state (a buffer and its THREAD_START event when recording, a cursor
 * binding when replaying). A thread is identified by a per-thread serial number, never by its OS
 * tid, which the kernel reuses.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "session-int.h"

static _Atomic uint64_t next_serial = 1;

/* initial-exec TLS (see meson.build): a plain %fs-relative load on the hot path */
__thread struct tls_way tt_tls_cache[TLS_WAYS];
static __thread uint64_t tls_serial;
/* the uid of the session that refused this thread (past max_threads): refused again at once */
static __thread uint64_t tls_refused_uid;

static void tls_insert(tt_session *s, struct tt_thread *t)
{
    memmove(&tt_tls_cache[1], &tt_tls_cache[0], sizeof tt_tls_cache[0] * (TLS_WAYS - 1));
    tt_tls_cache[0] = (struct tls_way){ s, s->uid, t };
}

void *tt_thread_alloc_aligned(size_t size)
{
    size = (size + 63) & ~(size_t)63;
    void *t = aligned_alloc(64, size);
    if (t)
        memset(t, 0, size);
    return t;
}

/* Under s->lock: the thread that has this serial, or a new one (NULL when refused, *rc why). */
static struct tt_thread *register_locked(tt_session *s, int *rc, bool *fresh)
{
    /* registered before, then pushed out of the cache by other sessions */
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i]->serial == tls_serial)
            return s->threads[i];
    /* acquire: pairs with the release store in the backends' finish, so a thread that registers
     * after close began sees it and is refused */
    if (atomic_load_explicit(&s->closing, memory_order_acquire)) {
        *rc = TT_E_CLOSED;
        return NULL;
    }
    if (s->nthreads >= s->cfg.max_threads) {
        *rc = TT_E_THREADS;
        tls_refused_uid = s->uid;
        atomic_fetch_add_explicit(&s->threads_refused, 1, memory_order_relaxed);
        return NULL;
    }
    struct tt_thread *t = s->be->thread_new(s);
    if (!t) {
        *rc = TT_E_NOMEM;
        return NULL;
    }
    t->s = s;
    t->id = s->nthreads;
    t->serial = tls_serial;
    t->os_tid = (uint32_t)syscall(SYS_gettid);
    /* busy until its start events are in: a close that begins meanwhile waits for it instead
     * of handing over a buffer being written */
    atomic_store_explicit(&t->busy, 1, memory_order_relaxed);
    s->threads[s->nthreads++] = t;
    *fresh = true;
    return t;
}

struct tt_thread *tt_thread_lookup_slow(tt_session *s, int *rc)
{
    *rc = TT_OK;
    for (int i = 1; i < TLS_WAYS; i++) {
        if (tt_tls_cache[i].s == s && tt_tls_cache[i].uid == s->uid) {
            struct tt_thread *t = tt_tls_cache[i].t;
            tls_insert(s, t);
            return t;
        }
    }
    if (tls_refused_uid == s->uid) {
        *rc = TT_E_THREADS;
        return NULL;
    }
    if (!tls_serial)
        tls_serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    bool fresh = false;
    pthread_mutex_lock(&s->lock);
    struct tt_thread *t = register_locked(s, rc, &fresh);
    pthread_mutex_unlock(&s->lock);
    if (!t)
        return NULL;
    if (fresh) {
        /* outside the session lock: taking a buffer may wait for the swapper, and the swapper
         * takes the session lock to intern function names */
        *rc = s->be->thread_start(s, t);
        if (*rc != TT_OK)
            t->ended = 1; /* registered, but records nothing */
        /* release: the closer's acquire load of busy == 0 sees the start events */
        atomic_store_explicit(&t->busy, 0, memory_order_release);
        if (*rc != TT_OK)
            return NULL;
    }
    tls_insert(s, t);
    void (*hook)(tt_session *) = atomic_load_explicit(&s->on_thread, memory_order_acquire);
    if (fresh && hook)
        hook(s);
    return t;
}

int tt_thread_name(tt_session *s, const char *name)
{
    if (!s || !name)
        return TT_E_INVAL;
    if (!s->head.active)
        return TT_OK;
    uint32_t id;
    int rc = tt_intern(s, TT_OBJ_THREAD, name, &id);
    if (rc != TT_OK)
        return rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    if (!t)
        return rc;
    return s->be->thread_name(s, t, id);
}

/* The calling thread's state in @s, then @op of the backend on it (flush or end). */
static int thread_op(tt_session *s, int (*const *op)(tt_session *, struct tt_thread *))
{
    if (!s || !s->head.active)
        return TT_OK;
    int rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    return t ? (*op)(s, t) : rc;
}

int tt_session_flush_thread(tt_session *s)
{
    return thread_op(s, s && s->head.active ? &s->be->thread_flush : NULL);
}

int tt_session_thread_end(tt_session *s)
{
    return thread_op(s, s && s->head.active ? &s->be->thread_end : NULL);
}

/* Every cache way that names @s is cleared: a later session may get this address (the uid tells
 * them apart, but a stale pointer must not outlive the memory). Only the calling thread's ways
 * can be reached; other threads' ways keep a pointer whose uid no live session has. */
void tt_threads_forget_(tt_session *s)
{
    for (int i = 0; i < TLS_WAYS; i++)
        if (tt_tls_cache[i].s == s)
            tt_tls_cache[i].s = NULL;
}
