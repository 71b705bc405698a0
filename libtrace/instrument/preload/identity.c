/* SPDX-License-Identifier: MIT */
/* Identity: getpid, getppid and gettid (TT_CH_PID), gethostname and uname (TT_CH_HOSTNAME) are
 * inputs.
 *
 * An id the program learned keeps naming the live process. Each pid, ppid and tid a replay
 * hands out is remembered with its live counterpart (tt_pl_id_live), so kill, tgkill, sigqueue
 * and syscall()'s kill, tgkill and tkill of it reach this process, its parent or the live
 * thread, and /proc/<id>/ paths open the live process's files (pseudo.c). The recording has
 * nothing to map: its ids are the live ones.
 *
 * A SIGKILL that reaches this very process (kill of its pid, of 0 or of its process group,
 * killpg, raise, pthread_kill, tgkill or tkill of one of its threads, sigqueue) ends it where no
 * handler runs and no buffer is written: before the real call the recording's buffers are handed
 * to the swapper and written (tt_rt_before_sigkill), so the .partial it leaves holds its events
 * for recover. kill(-1) is not among them: the kernel spares the caller.
 */
#include "preload.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* glibc's fortified gethostname, called by programs built with _FORTIFY_SOURCE. */
int __gethostname_chk(char *name, size_t len, size_t buflen);

typedef pid_t (*id_fn)(void);
typedef int (*gethostname_fn)(char *, size_t);
typedef int (*uname_fn)(struct utsname *);
typedef int (*kill_fn)(pid_t, int);
typedef int (*tgkill_fn)(pid_t, pid_t, int);
typedef int (*sigqueue_fn)(pid_t, int, const union sigval);

/* ---------------------------------------------------------------- recorded ids -> live ids */

/* One slot per id a replay handed out: recorded << 32 | live, 0 while free. Slots are taken in
 * order and never change once taken, so a lookup stops at the first free one, and a key and its
 * value are one load. Relaxed: an id is used after the call that produced it, on the same
 * thread or in an order the program made (which orders these too). Past IDMAP_CAP ids (a
 * program with thousands of threads that each asked for their tid), the later ones are not
 * mapped. */
#define IDMAP_CAP 4096
static _Atomic uint64_t idmap[IDMAP_CAP] TT_BIG_BSS;

void tt_pl_id_remember(pid_t rec, pid_t live)
{
    if (rec <= 0 || live <= 0)
        return;
    uint64_t want = (uint64_t)(uint32_t)rec << 32 | (uint32_t)live;
    for (size_t i = 0; i < IDMAP_CAP; i++) {
        uint64_t e = atomic_load_explicit(&idmap[i], memory_order_relaxed);
        if (!e && atomic_compare_exchange_strong_explicit(&idmap[i], &e, want,
                                                          memory_order_relaxed,
                                                          memory_order_relaxed))
            return;
        if ((pid_t)(e >> 32) == rec)
            return; /* known already (or another thread took this slot for it) */
    }
}

pid_t tt_pl_id_live(pid_t id)
{
    if (id <= 0)
        return id;
    for (size_t i = 0; i < IDMAP_CAP; i++) {
        uint64_t e = atomic_load_explicit(&idmap[i], memory_order_relaxed);
        if (!e)
            break;
        if ((pid_t)(e >> 32) == id)
            return (pid_t)(uint32_t)e;
    }
    return id;
}

/* kill's pid argument: a pid, or minus a process group (whose id is its leader's pid). */
static pid_t kill_target(pid_t pid)
{
    return pid < -1 && pid != INT_MIN ? -tt_pl_id_live(-pid) : tt_pl_id_live(pid);
}

/* ---------------------------------------------------------------- getpid, getppid, gettid */

/* The last recorded id each call remembered, so that a program calling getpid in a loop maps
 * it once (tids per thread). Relaxed: a stale value only costs one more id_remember. */
static _Atomic pid_t seen_pid, seen_ppid;
static __thread _Atomic pid_t seen_tid;

/* An id on TT_CH_PID at site @k; in replay the recorded one, remembered with the live one. */
static pid_t id_call(enum real_fn fn, enum site k, _Atomic pid_t *seen)
{
    id_fn f = (id_fn)tt_pl_real(fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f();
    int e0 = errno;
    struct in_head h = { 0 };
    if (tt_pl_recording(s))
        h.ret = f();
    if (!tt_pl_in_simple(s, TT_CH_PID, k, &h, NULL, 0)) {
        h.ret = f();
    } else if (!tt_pl_recording(s) &&
               atomic_load_explicit(seen, memory_order_relaxed) != (pid_t)h.ret) {
        tt_pl_id_remember((pid_t)h.ret, f());
        atomic_store_explicit(seen, (pid_t)h.ret, memory_order_relaxed);
    }
    return (pid_t)tt_pl_finish(&h, e0);
}

TT_EXPORT pid_t getpid(void)
{
    return id_call(RF_getpid, S_getpid, &seen_pid);
}

TT_EXPORT pid_t getppid(void)
{
    return id_call(RF_getppid, S_getppid, &seen_ppid);
}

TT_EXPORT pid_t gettid(void)
{
    return id_call(RF_gettid, S_gettid, &seen_tid);
}

/* ---------------------------------------------------------------- signals to an id */

typedef int (*raise_fn)(int);
typedef int (*pthread_kill_fn)(pthread_t, int);

static pid_t own_pid(void)
{
    return ((id_fn)tt_pl_real(RF_getpid))();
}

/* The process is about to send itself SIGKILL: its events go to the file first. Only while it
 * is the traced process (a fork child that made no call has no session of its own yet). */
static void before_own_sigkill(void)
{
    if (!tt_rt_guard_enter())
        return;
    tt_rt_before_sigkill();
    tt_rt_guard_leave();
}

/* Whether kill(@live, SIGKILL) (a live pid, 0, or minus a live process group) reaches this
 * process. */
static bool kill_reaches_me(pid_t live)
{
    return live == 0 || live == own_pid() || (live < -1 && -live == getpgrp());
}

TT_EXPORT int kill(pid_t pid, int sig)
{
    pid_t live = kill_target(pid);
    if (UNLIKELY(sig == SIGKILL) && kill_reaches_me(live))
        before_own_sigkill();
    return REAL(kill, kill_fn)(live, sig);
}

TT_EXPORT int killpg(pid_t pgrp, int sig)
{
    pid_t live = pgrp > 0 ? tt_pl_id_live(pgrp) : pgrp;
    if (UNLIKELY(sig == SIGKILL) && live >= 0 && kill_reaches_me(-live))
        before_own_sigkill();
    return ((int (*)(pid_t, int))tt_pl_real(RF_killpg))(live, sig);
}

TT_EXPORT int tgkill(pid_t tgid, pid_t tid, int sig)
{
    pid_t live = tt_pl_id_live(tgid);
    if (UNLIKELY(sig == SIGKILL) && live == own_pid())
        before_own_sigkill();
    return REAL(tgkill, tgkill_fn)(live, tt_pl_id_live(tid), sig);
}

/* syscall(SYS_tkill, tid, sig) (syscall.c): @tid live already. A tid is one of this process's
 * threads when a null signal to it within the process's own group reaches it. */
void tt_pl_before_tkill(pid_t tid, int sig)
{
    if (UNLIKELY(sig == SIGKILL) && tid > 0 &&
        REAL(tgkill, tgkill_fn)(own_pid(), tid, 0) == 0)
        before_own_sigkill();
}

TT_EXPORT int sigqueue(pid_t pid, int sig, const union sigval value)
{
    pid_t live = tt_pl_id_live(pid);
    if (UNLIKELY(sig == SIGKILL) && live == own_pid())
        before_own_sigkill();
    return REAL(sigqueue, sigqueue_fn)(live, sig, value);
}

/* glibc's raise, and pthread_kill of any thread of the process, reach the kernel without kill. */
TT_EXPORT int raise(int sig)
{
    if (UNLIKELY(sig == SIGKILL))
        before_own_sigkill();
    return REAL(raise, raise_fn)(sig);
}

TT_EXPORT int pthread_kill(pthread_t thread, int sig)
{
    if (UNLIKELY(sig == SIGKILL))
        before_own_sigkill(); /* a pthread_t is always a thread of this process */
    return REAL(pthread_kill, pthread_kill_fn)(thread, sig);
}

/* ---------------------------------------------------------------- host name */

static int gethostname_impl(char *name, size_t len)
{
    gethostname_fn f = REAL(gethostname, gethostname_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(name, len);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { name, len };
    if (tt_pl_recording(s)) {
        h.ret = f(name, len);
        h.err = h.ret < 0 ? errno : 0;
        /* glibc fills the buffer with the cut name too when it fails with ENAMETOOLONG */
        if (h.ret == 0 || h.err == ENAMETOOLONG) {
            size_t n = strnlen(name, len);
            h.len = n < len ? n + 1 : len;
        }
    }
    if (!tt_pl_in_simple(s, TT_CH_HOSTNAME, S_gethostname, &h, &v, 1)) {
        h.ret = f(name, len);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int gethostname(char *name, size_t len)
{
    return gethostname_impl(name, len);
}

TT_EXPORT int __gethostname_chk(char *name, size_t len, size_t buflen)
{
    if (len > buflen)
        __chk_fail();
    return gethostname_impl(name, len);
}

TT_EXPORT int uname(struct utsname *u)
{
    uname_fn f = REAL(uname, uname_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(u);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { u, sizeof *u };
    if (tt_pl_recording(s)) {
        h.ret = f(u);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? sizeof *u : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_HOSTNAME, S_uname, &h, &v, 1)) {
        h.ret = f(u);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}
