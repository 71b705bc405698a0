/* SPDX-License-Identifier: MIT */
/* Synchronization: pthread mutexes, rwlocks, condition variables, semaphores, barriers,
 * spinlocks and pthread_once, each operation a sync event of the calling thread (sync.h).
 *
 * The shape of every interposer: tt_sync_begin, then the real operation (in replay only when
 * the recorded one got that far), then tt_sync_end with what it returned. In replay an
 * operation returns what it returned in the recording: a trylock that failed fails again
 * without touching the lock, a timed lock or wait that timed out times out at once, and one
 * that succeeded waits for its turn on its object and then takes it for real (with the
 * blocking call: at its turn the object is free). What each operation orders:
 *
 * - mutex and spinlock lock, trylock, timedlock, clocklock: an exclusive acquisition when it
 *   succeeded (EOWNERDEAD counts: the robust mutex is held), unlock: an exclusive release;
 *   a release is recorded before it happens (so that a thread the release lets go never
 *   finds its own operation in the trace without the release before it, even when the
 *   process ends right then), without its result: replay returns what the real call
 *   returns (0, or EPERM for a mutex the thread does not hold);
 * - rwlock read and write locks in all their forms: a shared acquisition, unlock: a release;
 * - condition wait, timedwait, clockwait: three events — the mutex released (in turn), the
 *   wake-up on the condition (it waits until as many signals happened as the waiter had seen:
 *   one that was signalled waits for its signal; one that timed out returns ETIMEDOUT at once),
 *   the mutex taken again (in turn). Replay does not call the real wait: it unlocks, waits,
 *   and locks;
 * - signal and broadcast: a release on the condition;
 * - sem_wait, sem_trywait, sem_timedwait, sem_clockwait: a shared acquisition when it
 *   succeeded (errno replayed when not), sem_post: a release; named semaphores the same, by
 *   their address in this process;
 * - barrier wait: every party passes the real barrier, then they take their turns, and the
 *   serial one is the recorded one;
 * - pthread_once: the thread that ran the routine in the recording runs it (the others wait
 *   for it before they call the real pthread_once);
 * - init and destroy of each object: no event, but the object is forgotten, so that memory
 *   used again is a new object with a new id.
 *
 * Process-shared objects (a semaphore from sem_open or sem_init with pshared, a mutex or rwlock
 * initialized PTHREAD_PROCESS_SHARED: told by the object's own bytes, below, so one that another
 * process made or that a fork inherited is known too) are used by processes whose operations no
 * single recording orders. Their operations are counted (META "sync_shared=N", shown by info)
 * and still ordered within this process only: the order between processes is the live one, and
 * a turn may wait for an acquisition another process makes first (a divergence of reason
 * schedule after the order timeout, never a hang). Running them unordered, live, with the
 * recorded results, was tried and measured worse (docs/REPLAY.md, "Process trees"): a queue's
 * lock that another process takes first then holds a read of bytes not yet written.
 *
 * A program that holds the guard (tinytrace's own locks) only forwards, like every family.
 * errno is kept as the real call left it, or as it was for the calls that report through
 * their return value.
 */
#include "preload.h"

#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "event-int.h"

/* ---------------------------------------------------------------- the common shape */

static inline tt_session *sync_enter(tt_sync *op, tt_sync_kind kind, enum site k,
                                     const void *obj)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return NULL;
    int rc = tt_sync_begin_(s, op, kind, tt_pl_site_id(s, k), obj);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        op->mode = TT_MODE_OFF; /* the runtime lets the program go on: live, unordered */
    }
    return s;
}

/* The same for an object that @shared says other processes use: counted. */
static inline tt_session *sync_enter_sh(tt_sync *op, tt_sync_kind kind, enum site k,
                                        const void *obj, bool shared)
{
    tt_session *s = sync_enter(op, kind, k, obj);
    if (s && shared)
        tt_rt_sync_shared(s);
    return s;
}

/* Whether an object is process-shared, from glibc's own layout of it (its ABI: these objects
 * live in the program's memory, shared between processes, so their layout cannot change): a
 * semaphore's flag word is LLL_SHARED (128) rather than LLL_PRIVATE (0), a mutex's kind
 * has PTHREAD_MUTEX_PSHARED_BIT, an rwlock's __shared is set. */
struct glibc_sem {
#if UINTPTR_MAX > 0xFFFFFFFFu
    uint64_t data;
#else
    unsigned value;
#endif
    int private_;
};
_Static_assert(sizeof(struct glibc_sem) <= sizeof(sem_t), "glibc's semaphore layout");
#define GLIBC_MUTEX_PSHARED_BIT 128

static inline bool sem_pshared(const sem_t *sem)
{
    return sem && ((const struct glibc_sem *)(const void *)sem)->private_ != 0;
}

static inline bool mutex_pshared(const void *m)
{
    return m && (((const pthread_mutex_t *)m)->__data.__kind & GLIBC_MUTEX_PSHARED_BIT) != 0;
}

static inline bool rwlock_pshared(const void *l)
{
    return l && ((const pthread_rwlock_t *)l)->__data.__shared != 0;
}

static inline void sync_end(tt_session *s, tt_sync *op, enum site k, int result, int took)
{
    int rc = tt_sync_end_(s, op, result, took);
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
}

static inline void sync_leave(int saved_errno)
{
    tt_rt_guard_leave();
    errno = saved_errno;
}

/* ---------------------------------------------------------------- exclusive: mutex, spinlock */

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_init_fn)(pthread_mutex_t *, const pthread_mutexattr_t *);

static inline bool mutex_held(int r)
{
    return r == 0 || r == EOWNERDEAD;
}

static inline bool zero_held(int r)
{
    return r == 0;
}

/* What tt_sync_end is told of an acquisition (@at_once: it did not wait). */
static inline int took_flags(bool held, bool at_once)
{
    return (held ? TT_SYNC_TOOK : 0) | (held && at_once ? TT_SYNC_AT_ONCE : 0);
}

/* The real calls of one acquisition, by their shape: the object alone, with a deadline, or with
 * a clock and a deadline (every lock function of pthreads takes its object first). */
typedef int (*one_fn)(void *);
typedef int (*timed_fn)(void *, const struct timespec *);
typedef int (*clocked_fn)(void *, clockid_t, const struct timespec *);

enum form { PLAIN, TRY, TIMED, CLOCKED };

struct acquisition {
    enum site site;
    tt_sync_kind kind;      /* TT_SYNC_LOCK (exclusive) or TT_SYNC_ACQUIRE (shared) */
    enum form form;
    enum real_fn call;      /* the call the program made */
    enum real_fn take;      /* the blocking form: replay takes the object with it, at its turn */
    enum real_fn try_first; /* record, PLAIN: tried first, so that a free object is taken
                             * without waiting (and its event reads no clock); RF_COUNT_: none */
    bool (*held)(int r);    /* whether result @r holds the object */
    bool (*pshared)(const void *obj); /* whether @obj is process-shared; NULL: never told */
};

/* How an object of the family whose blocking take is @take tells it is process-shared. */
#define pshared_of(take)                                                                       \
    ((take) == RF_pthread_mutex_lock ? mutex_pshared                                           \
     : (take) == RF_pthread_rwlock_rdlock || (take) == RF_pthread_rwlock_wrlock ? rwlock_pshared \
                                                                                 : NULL)

/* One acquisition of a pthread object (its result is an error number, 0 when taken). In
 * record the real call is made (a PLAIN one tried first); in replay the recorded result comes
 * back, and an acquisition that took the object takes it for real at its turn. */
static int acquire(const struct acquisition *a, void *obj, clockid_t clk,
                   const struct timespec *at)
{
    fnptr call = tt_pl_real(a->call);
    int e0 = errno;
    tt_sync op;
    bool shared = a->pshared && a->pshared(obj);
    tt_session *s = sync_enter_sh(&op, a->kind, a->site, obj, shared);
    if (!s) {
        switch (a->form) {
        case TIMED: return ((timed_fn)call)(obj, at);
        case CLOCKED: return ((clocked_fn)call)(obj, clk, at);
        default: return ((one_fn)call)(obj);
        }
    }
    int r;
    bool at_once = a->form == TRY;
    if (tt_sync_replaying(&op)) {
        r = op.result;
        if (op.ordered)
            ((one_fn)tt_pl_real(a->take))(obj);
    } else if (a->form == PLAIN && a->try_first != RF_COUNT_ &&
               (r = ((one_fn)tt_pl_real(a->try_first))(obj)) != EBUSY) {
        /* taken, or refused for a reason the blocking call would give too (an error-checking
         * mutex the caller holds: EDEADLK from the lock) */
        at_once = true;
    } else if (a->form == TIMED) {
        r = ((timed_fn)call)(obj, at);
    } else if (a->form == CLOCKED) {
        r = ((clocked_fn)call)(obj, clk, at);
    } else {
        r = ((one_fn)call)(obj);
    }
    sync_end(s, &op, a->site, r, took_flags(a->held(r), at_once));
    sync_leave(e0);
    return r;
}

#define ACQUISITION(site_, kind_, form_, call_, take_, try_, held_)                            \
    static const struct acquisition a = { S_##site_, kind_, form_, RF_##call_, RF_##take_,    \
                                          try_, held_, pshared_of(RF_##take_) }

/* ---- the fast path of a default mutex (event-int.h's tt_sync_fast_) ----
 * A lock of a default mutex that its trylock takes at once, and the unlock of one, recording:
 * the same events as acquire() and pthread_mutex_unlock's full path (a take that did not wait,
 * a release recorded before it happens), without filling a tt_sync or saving errno (a default
 * mutex's trylock and unlock never set it). A default mutex is one of kind 0
 * (PTHREAD_MUTEX_NORMAL or DEFAULT, private, not robust): its trylock returns 0 or EBUSY, and
 * EBUSY changed nothing, so the full path may try again. Every other case, the other kinds
 * included, is the full path's. */
static inline bool fast_enter(const pthread_mutex_t *m, enum site k, struct tt_sync_fast_ *f)
{
    if (m == NULL || m->__data.__kind != 0)
        return false;
    uint32_t site = atomic_load_explicit(&tt_pl_site_ids[k], memory_order_relaxed);
    if (TT_UNLIKELY(site == 0) || !tt_rt_guard_enter())
        return false;
    /* acquire: as tt_rt_session_hot, which this is without its slow path */
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    if (TT_LIKELY(s != NULL) && TT_LIKELY(tt_sync_fast_begin_(s, m, site, f)))
        return true;
    tt_rt_guard_leave();
    return false;
}

/* The full paths out of line, so that the fast path keeps no frame for a tt_sync */
static __attribute__((noinline)) int mutex_lock_full(pthread_mutex_t *m)
{
    ACQUISITION(pthread_mutex_lock, TT_SYNC_LOCK, PLAIN, pthread_mutex_lock, pthread_mutex_lock,
                RF_pthread_mutex_trylock, mutex_held);
    return acquire(&a, m, 0, NULL);
}

TT_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    struct tt_sync_fast_ f;
    if (fast_enter(m, S_pthread_mutex_lock, &f)) {
        if (REAL(pthread_mutex_trylock, mutex_fn)(m) == 0) {
            tt_sync_fast_end_(&f);
            tt_rt_guard_leave();
            return 0;
        }
        tt_sync_fast_cancel_(&f);
        tt_rt_guard_leave();
    }
    return mutex_lock_full(m);
}

TT_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
    ACQUISITION(pthread_mutex_trylock, TT_SYNC_LOCK, TRY, pthread_mutex_trylock,
                pthread_mutex_lock, RF_COUNT_, mutex_held);
    return acquire(&a, m, 0, NULL);
}

TT_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *at)
{
    ACQUISITION(pthread_mutex_timedlock, TT_SYNC_LOCK, TIMED, pthread_mutex_timedlock,
                pthread_mutex_lock, RF_COUNT_, mutex_held);
    return acquire(&a, m, 0, at);
}

TT_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *at)
{
    ACQUISITION(pthread_mutex_clocklock, TT_SYNC_LOCK, CLOCKED, pthread_mutex_clocklock,
                pthread_mutex_lock, RF_COUNT_, mutex_held);
    return acquire(&a, m, clk, at);
}

static __attribute__((noinline)) int mutex_unlock_full(pthread_mutex_t *m)
{
    mutex_fn f = REAL(pthread_mutex_unlock, mutex_fn);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter_sh(&op, TT_SYNC_UNLOCK, S_pthread_mutex_unlock, m,
                                  mutex_pshared(m));
    if (!s)
        return f(m);
    int r = f(m); /* a release records no result: replay returns its own */
    sync_end(s, &op, S_pthread_mutex_unlock, r, 1);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
    struct tt_sync_fast_ f;
    if (fast_enter(m, S_pthread_mutex_unlock, &f)) {
        tt_sync_fast_end_(&f);
        int r = REAL(pthread_mutex_unlock, mutex_fn)(m);
        tt_rt_guard_leave();
        return r;
    }
    return mutex_unlock_full(m);
}

/* init and destroy: the memory is a new object from now on (errno as the caller left it) */
static void forget(const void *obj)
{
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (s) {
        tt_sync_forget(s, obj);
        tt_rt_guard_leave();
    }
    errno = e0;
}

TT_EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
    forget(m);
    return REAL(pthread_mutex_init, mutex_init_fn)(m, a);
}

TT_EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
    forget(m);
    return REAL(pthread_mutex_destroy, mutex_fn)(m);
}

typedef int (*spin_fn)(pthread_spinlock_t *);
typedef int (*spin_init_fn)(pthread_spinlock_t *, int);

TT_EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
    ACQUISITION(pthread_spin_lock, TT_SYNC_LOCK, PLAIN, pthread_spin_lock, pthread_spin_lock,
                RF_pthread_spin_trylock, zero_held);
    return acquire(&a, (void *)l, 0, NULL);
}

TT_EXPORT int pthread_spin_trylock(pthread_spinlock_t *l)
{
    ACQUISITION(pthread_spin_trylock, TT_SYNC_LOCK, TRY, pthread_spin_trylock, pthread_spin_lock,
                RF_COUNT_, zero_held);
    return acquire(&a, (void *)l, 0, NULL);
}

TT_EXPORT int pthread_spin_unlock(pthread_spinlock_t *l)
{
    spin_fn f = REAL(pthread_spin_unlock, spin_fn);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter(&op, TT_SYNC_UNLOCK, S_pthread_spin_unlock, (const void *)l);
    if (!s)
        return f(l);
    int r = f(l);
    sync_end(s, &op, S_pthread_spin_unlock, r, 1);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_spin_init(pthread_spinlock_t *l, int pshared)
{
    int e0 = errno;
    forget((const void *)l);
    errno = e0;
    return REAL(pthread_spin_init, spin_init_fn)(l, pshared);
}

TT_EXPORT int pthread_spin_destroy(pthread_spinlock_t *l)
{
    int e0 = errno;
    forget((const void *)l);
    errno = e0;
    return REAL(pthread_spin_destroy, spin_fn)(l);
}

/* ---------------------------------------------------------------- shared: rwlock */

typedef int (*rw_fn)(pthread_rwlock_t *);
typedef int (*rw_init_fn)(pthread_rwlock_t *, const pthread_rwlockattr_t *);

TT_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    ACQUISITION(pthread_rwlock_rdlock, TT_SYNC_ACQUIRE, PLAIN, pthread_rwlock_rdlock,
                pthread_rwlock_rdlock, RF_pthread_rwlock_tryrdlock, zero_held);
    return acquire(&a, l, 0, NULL);
}

TT_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    ACQUISITION(pthread_rwlock_wrlock, TT_SYNC_ACQUIRE, PLAIN, pthread_rwlock_wrlock,
                pthread_rwlock_wrlock, RF_pthread_rwlock_trywrlock, zero_held);
    return acquire(&a, l, 0, NULL);
}

TT_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
    ACQUISITION(pthread_rwlock_tryrdlock, TT_SYNC_ACQUIRE, TRY, pthread_rwlock_tryrdlock,
                pthread_rwlock_rdlock, RF_COUNT_, zero_held);
    return acquire(&a, l, 0, NULL);
}

TT_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
    ACQUISITION(pthread_rwlock_trywrlock, TT_SYNC_ACQUIRE, TRY, pthread_rwlock_trywrlock,
                pthread_rwlock_wrlock, RF_COUNT_, zero_held);
    return acquire(&a, l, 0, NULL);
}

TT_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *at)
{
    ACQUISITION(pthread_rwlock_timedrdlock, TT_SYNC_ACQUIRE, TIMED, pthread_rwlock_timedrdlock,
                pthread_rwlock_rdlock, RF_COUNT_, zero_held);
    return acquire(&a, l, 0, at);
}

TT_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *at)
{
    ACQUISITION(pthread_rwlock_timedwrlock, TT_SYNC_ACQUIRE, TIMED, pthread_rwlock_timedwrlock,
                pthread_rwlock_wrlock, RF_COUNT_, zero_held);
    return acquire(&a, l, 0, at);
}

TT_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clk,
                                         const struct timespec *at)
{
    ACQUISITION(pthread_rwlock_clockrdlock, TT_SYNC_ACQUIRE, CLOCKED, pthread_rwlock_clockrdlock,
                pthread_rwlock_rdlock, RF_COUNT_, zero_held);
    return acquire(&a, l, clk, at);
}

TT_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clk,
                                         const struct timespec *at)
{
    ACQUISITION(pthread_rwlock_clockwrlock, TT_SYNC_ACQUIRE, CLOCKED, pthread_rwlock_clockwrlock,
                pthread_rwlock_wrlock, RF_COUNT_, zero_held);
    return acquire(&a, l, clk, at);
}

TT_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
    rw_fn f = REAL(pthread_rwlock_unlock, rw_fn);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter_sh(&op, TT_SYNC_RELEASE, S_pthread_rwlock_unlock, l,
                                  rwlock_pshared(l));
    if (!s)
        return f(l);
    int r = f(l);
    sync_end(s, &op, S_pthread_rwlock_unlock, r, 1);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *a)
{
    forget(l);
    return REAL(pthread_rwlock_init, rw_init_fn)(l, a);
}

TT_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *l)
{
    forget(l);
    return REAL(pthread_rwlock_destroy, rw_fn)(l);
}

/* ---------------------------------------------------------------- condition variables */

typedef int (*cond_wait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timed_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
typedef int (*cond_clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                             const struct timespec *);
typedef int (*cond_fn)(pthread_cond_t *);
typedef int (*cond_init_fn)(pthread_cond_t *, const pthread_condattr_t *);

enum cond_form { COND_WAIT, COND_TIMED, COND_CLOCK };

/* The three events of a wait: the mutex released, the wake-up, the mutex taken again. */
static int cond_wait_any(tt_session *s, enum site k, enum cond_form form, pthread_cond_t *c,
                         pthread_mutex_t *m, clockid_t clk, const struct timespec *at)
{
    tt_sync rel, wake, acq;
    int rc = tt_sync_begin(s, &rel, TT_SYNC_UNLOCK, tt_pl_site_id(s, S_cond_release), m);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        rel.mode = TT_MODE_OFF;
    }
    bool replay = tt_sync_replaying(&rel);
    if (replay)
        REAL(pthread_mutex_unlock, mutex_fn)(m);
    sync_end(s, &rel, k, 0, 1);
    int r = 0;
    if (!replay) {
        if (form == COND_WAIT)
            r = REAL(pthread_cond_wait, cond_wait_fn)(c, m);
        else if (form == COND_TIMED)
            r = REAL(pthread_cond_timedwait, cond_timed_fn)(c, m, at);
        else
            r = REAL(pthread_cond_clockwait, cond_clock_fn)(c, m, clk, at);
    }
    rc = tt_sync_begin(s, &wake, TT_SYNC_OBSERVE, tt_pl_site_id(s, k), c);
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
    else if (tt_sync_replaying(&wake))
        r = wake.result;
    sync_end(s, &wake, k, r, 0);
    rc = tt_sync_begin(s, &acq, TT_SYNC_LOCK, tt_pl_site_id(s, S_cond_reacquire), m);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        acq.mode = TT_MODE_OFF;
    }
    if (replay) {
        int lr = REAL(pthread_mutex_lock, mutex_fn)(m);
        if (lr == EOWNERDEAD && r == 0)
            r = lr;
    }
    sync_end(s, &acq, k, 0, 1);
    return r;
}

TT_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (!s)
        return REAL(pthread_cond_wait, cond_wait_fn)(c, m);
    int r = cond_wait_any(s, S_pthread_cond_wait, COND_WAIT, c, m, 0, NULL);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                     const struct timespec *at)
{
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (!s)
        return REAL(pthread_cond_timedwait, cond_timed_fn)(c, m, at);
    int r = cond_wait_any(s, S_pthread_cond_timedwait, COND_TIMED, c, m, 0, at);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
                                     const struct timespec *at)
{
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (!s)
        return REAL(pthread_cond_clockwait, cond_clock_fn)(c, m, clk, at);
    int r = cond_wait_any(s, S_pthread_cond_clockwait, COND_CLOCK, c, m, clk, at);
    sync_leave(e0);
    return r;
}

static int cond_give(enum site k, enum real_fn real, pthread_cond_t *c)
{
    cond_fn f = (cond_fn)tt_pl_real(real);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter(&op, TT_SYNC_RELEASE, k, c);
    if (!s)
        return f(c);
    int r = f(c);
    sync_end(s, &op, k, r, 1);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_cond_signal(pthread_cond_t *c)
{
    return cond_give(S_pthread_cond_signal, RF_pthread_cond_signal, c);
}

TT_EXPORT int pthread_cond_broadcast(pthread_cond_t *c)
{
    return cond_give(S_pthread_cond_broadcast, RF_pthread_cond_broadcast, c);
}

TT_EXPORT int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
    forget(c);
    return REAL(pthread_cond_init, cond_init_fn)(c, a);
}

TT_EXPORT int pthread_cond_destroy(pthread_cond_t *c)
{
    forget(c);
    return REAL(pthread_cond_destroy, cond_fn)(c);
}

/* ---------------------------------------------------------------- semaphores */

typedef int (*sem_fn)(sem_t *);
typedef int (*sem_timed_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clock_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*sem_init_fn)(sem_t *, int, unsigned);

/* Replay of a wait that succeeded: the real wait, at its turn (a signal may interrupt it). */
static void sem_take(sem_t *sem)
{
    sem_fn f = REAL(sem_wait, sem_fn);
    while (f(sem) != 0 && errno == EINTR)
        ;
}

/* A sem_* acquisition: 0, or -1 with errno; @call makes it live. */
#define SEM_ACQUIRE(at_once, site, call)                                                      \
    do {                                                                                      \
        int e0 = errno;                                                                       \
        tt_sync op;                                                                           \
        bool shared = sem_pshared(sem);                                                       \
        tt_session *s = sync_enter_sh(&op, TT_SYNC_ACQUIRE, site, sem, shared);               \
        if (!s)                                                                               \
            return call;                                                                      \
        int r, e;                                                                             \
        if (tt_sync_replaying(&op)) {                                                         \
            if (op.ordered)                                                                   \
                sem_take(sem);                                                                \
            r = op.result ? -1 : 0;                                                           \
            e = op.result;                                                                    \
        } else {                                                                              \
            r = call;                                                                         \
            e = r ? errno : 0;                                                                \
        }                                                                                     \
        sync_end(s, &op, site, e, took_flags(r == 0, at_once));                               \
        sync_leave(r ? e : e0);                                                               \
        return r;                                                                             \
    } while (0)

TT_EXPORT int sem_wait(sem_t *sem)
{
    SEM_ACQUIRE(false, S_sem_wait, REAL(sem_wait, sem_fn)(sem));
}

TT_EXPORT int sem_trywait(sem_t *sem)
{
    SEM_ACQUIRE(true, S_sem_trywait, REAL(sem_trywait, sem_fn)(sem));
}

TT_EXPORT int sem_timedwait(sem_t *sem, const struct timespec *at)
{
    SEM_ACQUIRE(false, S_sem_timedwait, REAL(sem_timedwait, sem_timed_fn)(sem, at));
}

TT_EXPORT int sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *at)
{
    SEM_ACQUIRE(false, S_sem_clockwait, REAL(sem_clockwait, sem_clock_fn)(sem, clk, at));
}

TT_EXPORT int sem_post(sem_t *sem)
{
    sem_fn f = REAL(sem_post, sem_fn);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter_sh(&op, TT_SYNC_RELEASE, S_sem_post, sem, sem_pshared(sem));
    if (!s)
        return f(sem);
    int r = f(sem), e = r ? errno : 0;
    sync_end(s, &op, S_sem_post, e, 1);
    sync_leave(r ? e : e0);
    return r;
}

TT_EXPORT int sem_init(sem_t *sem, int pshared, unsigned value)
{
    forget(sem);
    return REAL(sem_init, sem_init_fn)(sem, pshared, value);
}

TT_EXPORT int sem_destroy(sem_t *sem)
{
    forget(sem);
    return REAL(sem_destroy, sem_fn)(sem);
}

/* ---------------------------------------------------------------- barriers */

typedef int (*barrier_fn)(pthread_barrier_t *);
typedef int (*barrier_init_fn)(pthread_barrier_t *, const pthread_barrierattr_t *, unsigned);

TT_EXPORT int pthread_barrier_wait(pthread_barrier_t *b)
{
    barrier_fn f = REAL(pthread_barrier_wait, barrier_fn);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter(&op, TT_SYNC_PASS, S_pthread_barrier_wait, b);
    if (!s)
        return f(b);
    int r = f(b);
    if (tt_sync_replaying(&op))
        r = op.result;
    sync_end(s, &op, S_pthread_barrier_wait, r, 1);
    sync_leave(e0);
    return r;
}

TT_EXPORT int pthread_barrier_init(pthread_barrier_t *b, const pthread_barrierattr_t *a,
                                   unsigned count)
{
    forget(b);
    return REAL(pthread_barrier_init, barrier_init_fn)(b, a, count);
}

TT_EXPORT int pthread_barrier_destroy(pthread_barrier_t *b)
{
    forget(b);
    return REAL(pthread_barrier_destroy, barrier_fn)(b);
}

/* ---------------------------------------------------------------- pthread_once */

typedef int (*once_fn)(pthread_once_t *, void (*)(void));

/* The routine's run, for the thread that runs it; nested once calls stack. The guard is not
 * held while the routine runs: its calls are the program's. */
struct once_run {
    tt_session *s;
    tt_sync *op;
    void (*fn)(void);
    bool ran;
    struct once_run *prev;
};
static __thread struct once_run *once_top;

static void once_trampoline(void)
{
    struct once_run *c = once_top;
    c->ran = true;
    /* the routine's thread takes its turn before the routine runs: in the recording that puts
     * it ahead of every thread that waited for the routine */
    if (tt_rt_guard_enter()) {
        sync_end(c->s, c->op, S_pthread_once, 1, 1);
        tt_rt_guard_leave();
    }
    c->fn();
}

TT_EXPORT int pthread_once(pthread_once_t *ctl, void (*fn)(void))
{
    once_fn f = REAL(pthread_once, once_fn);
    int e0 = errno;
    tt_sync op;
    tt_session *s = sync_enter(&op, TT_SYNC_ACQUIRE, S_pthread_once, ctl);
    if (!s)
        return f(ctl, fn);
    struct once_run c = { s, &op, fn, false, once_top };
    once_top = &c;
    tt_rt_guard_leave();
    errno = e0;
    int r = f(ctl, once_trampoline);
    int e1 = errno;
    bool in = tt_rt_guard_enter();
    once_top = c.prev;
    if (!c.ran && in)
        sync_end(s, &op, S_pthread_once, 0, 1);
    if (in)
        tt_rt_guard_leave();
    errno = e1;
    return r;
}
