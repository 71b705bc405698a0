/* SPDX-License-Identifier: MIT */
/* Threads: pthread_create, the start and the end of each thread, pthread_join in its forms,
 * pthread_detach and pthread_exit, each a sync event of no order of its own (TT_SYNC_NOTE:
 * a thread cannot start before it was created nor be joined before it ended).
 *
 * A created thread is an object without an address of its own: its id comes from its
 * creator (tt_sync_new_id), is bound to its pthread_t for the join, and travels to the new
 * thread with its start routine. The new thread first takes its name (runtime.c: its creation
 * path, "main/2", by which replay pairs it with its recorded thread), then records "thread
 * start", runs the program's routine, and records "thread exit" when the routine returns (or
 * when it calls pthread_exit). In replay a create that failed in the recording fails again
 * (EAGAIN) without creating a thread, and a join that failed returns its error without
 * joining; every other call is made for real and returns what it returned in the recording.
 */
#include "preload.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct start_args {
    void *(*fn)(void *);
    void *arg;
    uint64_t id;
    char path[96];
};

/* the calling thread's own id as an object, for its exit (0: not created through here) */
static __thread uint64_t self_id;
static __thread bool exit_recorded;

static void note(tt_session *s, enum site k, uint64_t id, int result)
{
    tt_sync op;
    int rc = tt_sync_begin(s, &op, TT_SYNC_NOTE, tt_pl_site_id(s, k), NULL);
    if (rc == TT_OK) {
        if (!tt_sync_replaying(&op))
            op.id = id;
        rc = tt_sync_end(s, &op, result, 0);
    }
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
}

static void thread_exit_note(void)
{
    if (exit_recorded || !self_id)
        return;
    tt_session *s = tt_pl_enter();
    if (!s)
        return;
    exit_recorded = true;
    note(s, S_thread_end, self_id, 0);
    tt_rt_guard_leave();
}

static void *thread_trampoline(void *p)
{
    struct start_args a = *(struct start_args *)p;
    tt_rt_guard_enter();
    free(p);
    tt_rt_thread_begin(a.path);
    self_id = a.id;
    tt_session *s = tt_rt_session();
    if (s && tt_active_(s))
        note(s, S_thread_start, a.id, 0);
    tt_rt_guard_leave();
    void *ret = a.fn(a.arg);
    thread_exit_note();
    return ret;
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

TT_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    create_fn f = REAL(pthread_create, create_fn);
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(th, attr, fn, arg);
    tt_sync op;
    uint32_t site = tt_pl_site_id(s, S_pthread_create);
    int rc = tt_sync_begin(s, &op, TT_SYNC_NOTE, site, NULL);
    if (rc != TT_OK) {
        tt_rt_failed(rc, "pthread_create");
        op.mode = TT_MODE_OFF;
    }
    bool replay = tt_sync_replaying(&op);
    if (!replay)
        op.id = tt_sync_new_id(s);
    int r;
    if (replay && op.result != 0) {
        r = op.result; /* the recording could not create it either */
    } else {
        struct start_args *a = malloc(sizeof *a);
        if (!a) {
            r = EAGAIN;
        } else {
            a->fn = fn;
            a->arg = arg;
            a->id = op.id;
            tt_rt_thread_child_path(a->path, sizeof a->path);
            r = f(th, attr, thread_trampoline, a);
            if (r != 0)
                free(a);
            else
                tt_sync_bind(s, (const void *)*th, op.id);
        }
        if (replay && r == 0 && op.result != 0)
            r = op.result;
    }
    rc = tt_sync_end(s, &op, r, 0);
    if (rc != TT_OK)
        tt_rt_failed(rc, "pthread_create");
    tt_rt_guard_leave();
    errno = e0;
    return r;
}

typedef int (*join_fn)(pthread_t, void **);
typedef int (*timedjoin_fn)(pthread_t, void **, const struct timespec *);
typedef int (*clockjoin_fn)(pthread_t, void **, clockid_t, const struct timespec *);
typedef int (*detach_fn)(pthread_t);

enum join_form { JOIN, TRYJOIN, TIMEDJOIN, CLOCKJOIN };

static int join_live(enum join_form form, pthread_t th, void **ret, clockid_t clk,
                     const struct timespec *at)
{
    switch (form) {
    case JOIN: return REAL(pthread_join, join_fn)(th, ret);
    case TRYJOIN: return REAL(pthread_tryjoin_np, join_fn)(th, ret);
    case TIMEDJOIN: return REAL(pthread_timedjoin_np, timedjoin_fn)(th, ret, at);
    default: return REAL(pthread_clockjoin_np, clockjoin_fn)(th, ret, clk, at);
    }
}

static int join_any(enum site k, enum join_form form, pthread_t th, void **ret, clockid_t clk,
                    const struct timespec *at)
{
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (!s)
        return join_live(form, th, ret, clk, at);
    tt_sync op;
    int rc = tt_sync_begin(s, &op, TT_SYNC_NOTE, tt_pl_site_id(s, k), NULL);
    if (rc != TT_OK) {
        tt_rt_failed(rc, tt_pl_site_names[k]);
        op.mode = TT_MODE_OFF;
    }
    int r;
    if (tt_sync_replaying(&op)) {
        /* a join that succeeded waits for the thread for real; one that did not returns its
         * error (a tryjoin that found the thread running, a timed one that timed out) */
        r = op.result;
        if (r == 0)
            join_live(JOIN, th, ret, 0, NULL);
    } else {
        op.id = tt_sync_lookup(s, (const void *)th);
        r = join_live(form, th, ret, clk, at);
    }
    if (r == 0)
        tt_sync_forget(s, (const void *)th); /* its pthread_t may name another thread later */
    rc = tt_sync_end(s, &op, r, 0);
    if (rc != TT_OK)
        tt_rt_failed(rc, tt_pl_site_names[k]);
    tt_rt_guard_leave();
    errno = e0;
    return r;
}

TT_EXPORT int pthread_join(pthread_t th, void **ret)
{
    return join_any(S_pthread_join, JOIN, th, ret, 0, NULL);
}

TT_EXPORT int pthread_tryjoin_np(pthread_t th, void **ret)
{
    return join_any(S_pthread_tryjoin_np, TRYJOIN, th, ret, 0, NULL);
}

TT_EXPORT int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *at)
{
    return join_any(S_pthread_timedjoin_np, TIMEDJOIN, th, ret, 0, at);
}

TT_EXPORT int pthread_clockjoin_np(pthread_t th, void **ret, clockid_t clk,
                                   const struct timespec *at)
{
    return join_any(S_pthread_clockjoin_np, CLOCKJOIN, th, ret, clk, at);
}

TT_EXPORT int pthread_detach(pthread_t th)
{
    detach_fn f = REAL(pthread_detach, detach_fn);
    int e0 = errno;
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(th);
    tt_sync op;
    int rc = tt_sync_begin(s, &op, TT_SYNC_NOTE, tt_pl_site_id(s, S_pthread_detach), NULL);
    if (rc != TT_OK) {
        tt_rt_failed(rc, "pthread_detach");
        op.mode = TT_MODE_OFF;
    }
    if (!tt_sync_replaying(&op))
        op.id = tt_sync_lookup(s, (const void *)th);
    int r = f(th);
    if (tt_sync_replaying(&op))
        r = op.result;
    rc = tt_sync_end(s, &op, r, 0);
    if (rc != TT_OK)
        tt_rt_failed(rc, "pthread_detach");
    tt_rt_guard_leave();
    errno = e0;
    return r;
}

typedef void (*exit_fn)(void *);

TT_EXPORT _Noreturn void pthread_exit(void *ret)
{
    exit_fn f = REAL(pthread_exit, exit_fn);
    thread_exit_note();
    f(ret);
    __builtin_unreachable();
}
