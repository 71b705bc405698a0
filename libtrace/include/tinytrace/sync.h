/* SPDX-License-Identifier: MIT */
/* tinytrace — synchronization (the `sync` namespace): the order in which threads take locks.
 *
 * Replay feeds a program its recorded inputs; these calls make it also take its locks, and
 * pass its other synchronization points, in the recorded order. Each operation on a lock, a
 * semaphore, a condition variable, a barrier or a thread is one event of the calling thread
 * (kind TT_EV_SYNC). Its object is named by an id that is stable across runs (never an
 * address): the k-th object the thread of id T met first gets T << 32 | k. An operation that
 * takes a turn on its object also carries the object's own sequence number: this was the k-th
 * ordered operation on the object. In replay, a thread about to take a turn waits until every
 * operation recorded before it on that object has happened; threads otherwise run in
 * parallel, on all cores. Under `tinytrace record` the preload library makes these calls for
 * pthread mutexes, rwlocks, condition variables, semaphores, barriers, spinlocks, once,
 * threads, sched_yield and the sleeps (docs/REPLAY.md, "Thread schedules"); a program linked
 * with tinytrace calls them around its own synchronization.
 *
 * The protocol: tt_sync_begin just before the real operation, tt_sync_end just after it, with
 * no other recording call of the same thread in between.
 *
 *     tt_sync op;
 *     tt_sync_begin(s, &op, TT_SYNC_LOCK, site, &m);
 *     int r = tt_sync_replaying(&op) ? (op.ordered ? real_lock(&m), op.result : op.result)
 *                                    : real_lock(&m);
 *     tt_sync_end(s, &op, r, r == 0);
 *
 * In record mode begin only takes the sequence number of a release (which must be taken while
 * the object is still held) and end appends the event. In replay mode begin reads the thread's
 * next recorded event: it must be a sync event of the same site on the same object (else
 * TT_E_DIVERGED, as any call that went another way). It sets op.result to the recorded result
 * and op.ordered to whether the recorded operation took the object's turn, and when it did,
 * waits for that turn. The caller then makes the real operation only when op.ordered says the
 * recording made it too (a lock that timed out in the recording returns ETIMEDOUT at once,
 * without touching the lock) and returns op.result. end passes the turn on.
 *
 * A turn that does not come within TT_PARAM_ORDER_TIMEOUT_MS is a divergence of reason
 * TT_DIV_SCHEDULE: its message names the thread, the object and the recorded thread whose turn
 * it is.
 *
 * What the order covers: for a program whose shared data is protected by the objects it
 * orders (free of data races), the replay of that data is deterministic. It does not cover C11
 * atomics and lock-free code, raw futex system calls, spin loops on plain variables, or data
 * races: their outcome still depends on timing.
 *
 * Thread safety: every call is thread-safe. The object registry is lock-free for lookups; a
 * first touch of an object takes no lock either (one compare-and-swap). Not async-signal-safe
 * in replay (a turn may be waited for); in record, as safe as the event.h calls, under the
 * rules there. Ownership: a tt_sync lives on the caller's stack; nothing is allocated per
 * operation.
 */
#ifndef TINYTRACE_SYNC_H
#define TINYTRACE_SYNC_H

#include <stdint.h>

#include <tinytrace/event.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an operation does to its object, which decides when it takes its turn. */
typedef enum tt_sync_kind {
    /* takes an exclusive object (a mutex, a spinlock): ordered when it succeeded, after it,
     * by the new holder; only holders touch the object's count, so it costs no atomic */
    TT_SYNC_LOCK = 1,
    /* gives an exclusive object back: ordered before it, by the holder */
    TT_SYNC_UNLOCK = 2,
    /* takes a share of an object others touch at the same time (a rwlock, a semaphore):
     * ordered when it succeeded, after it */
    TT_SYNC_ACQUIRE = 3,
    /* gives to such an object (a rwlock unlock, sem_post, a condition signal): ordered,
     * before it */
    TT_SYNC_RELEASE = 4,
    /* passes a point all its parties reach (a barrier): the real operation first, in any
     * order, then the turn, so that the result (which party was the serial one) is replayed */
    TT_SYNC_PASS = 5,
    /* waits for earlier operations on the object without taking a turn (a condition wait's
     * wake-up: the seq is the count of signals the waiter had seen; replay waits until that
     * many happened) */
    TT_SYNC_OBSERVE = 6,
    /* not ordered: only the result is recorded and replayed (a failed trylock, sched_yield, a
     * sleep, a thread's create, start, exit and join, whose order their own semantics give) */
    TT_SYNC_NOTE = 7,
} tt_sync_kind;

#define TT_SYNC_DATA_MAX 16u

/* One operation, on the caller's stack. The caller sets nothing; begin fills it. */
typedef struct tt_sync {
    uint32_t kind;          /* tt_sync_kind */
    uint32_t site;          /* the operation: an interned TT_OBJ_SITE id */
    uint64_t id;            /* the object's id; 0: no object */
    uint64_t seq;           /* the object's sequence number of this operation */
    int32_t result;         /* replay, after begin: the recorded result (0 or an errno value) */
    int32_t ordered;        /* replay, after begin: the recorded operation took its turn */
    uint32_t mode;          /* the session's mode at begin (private) */
    uint32_t data_len;      /* extra result bytes (a sleep's remaining time): record, set
                             * before end; replay, filled by begin */
    uint8_t data[TT_SYNC_DATA_MAX];
    void *entry_;           /* private: the object's registry entry */
} tt_sync;

/* Begins operation @kind at @site on @object (an address: the registry maps it to the
 * object's id, giving it one at its first touch). @object may be NULL for an operation on no
 * object, or on an object that has no address of its own: then op->id is the caller's
 * (record: set it after begin, from tt_sync_new_id; replay: begin sets it from the recording).
 * Returns TT_OK; in replay TT_E_DIVERGED when the recording went another way (then op->result
 * is not the recording's: make the real operation), TT_E_DIVERGED after a turn that did not
 * come in time. In off mode (or with a NULL session) it does nothing and returns TT_OK. */
TT_API int tt_sync_begin(tt_session *s, tt_sync *op, tt_sync_kind kind, uint32_t site,
                         const void *object);

/* Ends the operation begun on @op: @result is what the real operation returned (0 or an
 * errno value), @took a set of flags: TT_SYNC_TOOK when it took the object (a lock that
 * succeeded; ignored for UNLOCK, RELEASE and PASS, which always take their turn, and NOTE and
 * OBSERVE, which never do), TT_SYNC_AT_ONCE when it did not wait (a lock that was free): its
 * event then carries the time of the thread's previous event instead of reading the clock,
 * which is most of what recording an uncontended lock costs. Releases never wait and are always
 * recorded that way. Record: appends the event. Replay: passes the turn on. */
#define TT_SYNC_TOOK 1
#define TT_SYNC_AT_ONCE 2
TT_API int tt_sync_end(tt_session *s, tt_sync *op, int result, int took);

/* Whether @op, after begin, is being replayed (op->result and op->ordered are the
 * recording's). */
static inline int tt_sync_replaying(const tt_sync *op)
{
    return op->mode == 2; /* TT_MODE_REPLAY */
}

/* A fresh object id for the calling thread, for an object without an address of its own (a
 * thread being created). Record mode only; 0 otherwise. */
TT_API uint64_t tt_sync_new_id(tt_session *s);

/* Forgets @object: its next operation gives it a new id and starts its count over. Call it
 * where the object is initialized or destroyed (pthread_mutex_init, pthread_mutex_destroy),
 * so that memory used again for another object is another object. */
TT_API void tt_sync_forget(tt_session *s, const void *object);

/* Binds @object to @id (a thread's id, to a pthread_t value), so that later operations on it
 * carry that id. */
TT_API void tt_sync_bind(tt_session *s, const void *object, uint64_t id);

/* The id bound to @object, or 0. */
TT_API uint64_t tt_sync_lookup(tt_session *s, const void *object);

#ifdef __cplusplus
}
#endif

#endif
