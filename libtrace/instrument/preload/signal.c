/* SPDX-License-Identifier: MIT */
/* Signal handlers.
 *
 * The first call that installs a handler function (not SIG_DFL, SIG_IGN or SIG_HOLD) tells the
 * runtime, which then starts a recording's swapper if it has not started yet
 * (tt_rt_handler_installed). Until a process has a handler, none of its code runs inside one,
 * so a buffer that fills may start the swapper where it fills; after, it might be inside a
 * handler, where starting a thread is not safe. An exec leaves no handler; a fork child keeps
 * its parent's (and the runtime's note). The runtime's own handlers (the crash handler,
 * installed with the guard held) do not count.
 *
 * A SIGCHLD handler is replayed where it ran. The program's handler is kept here and the kernel
 * is given a trampoline with the program's flags and mask; sigaction and the signal() family
 * report the program's own handler. When a child's end (or stop) is delivered, the trampoline
 * records a delivery (an io event at site "tinytrace:signal", its payload the siginfo_t) on the
 * thread it interrupted, then calls the handler, whose calls follow it in that thread's events.
 * In a replay the live SIGCHLD (the re-run children's) is swallowed, and the replayer calls the
 * handler at each recorded delivery instead, before the call the program makes next
 * (tt_pl_signal_deliver_): the handler's waits then meet the recording's, in its order. A
 * SIGCHLD the process sent itself (kill, raise) is synchronous and runs live in both. A thread
 * that waits for its handler outside any call (pause, sigsuspend) gets its recorded deliveries
 * when it begins to wait, or when a live SIGCHLD interrupts the wait.
 */
#include "preload.h"

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef __sighandler_t (*signal_fn)(int, __sighandler_t);

/* glibc's, without a declaration in its headers any more (or only under some feature macros:
 * with _XOPEN_SOURCE alone, signal() is __sysv_signal) */
__sighandler_t bsd_signal(int sig, __sighandler_t h);
__sighandler_t ssignal(int sig, __sighandler_t h);
__sighandler_t __sysv_signal(int sig, __sighandler_t h);

/* The program's SIGCHLD handler, while the kernel has the trampoline: its function (NULL: the
 * kernel has the program's own disposition), flags and mask. Written by sigaction, read by the
 * trampoline and the replay's delivery (which may interrupt it: each field is one load). */
static struct {
    _Atomic uintptr_t fn; /* sa_handler or sa_sigaction, as flags say */
    _Atomic int flags;
    sigset_t mask;
} g_chld;

static void installing(__sighandler_t h)
{
    if (h == SIG_DFL || h == SIG_IGN || h == SIG_HOLD || !tt_rt_guard_enter())
        return;
    tt_rt_handler_installed();
    /* the deliveries' sites, interned now: a handler may not intern */
    tt_session *s = tt_rt_session();
    if (tt_active_(s)) {
        tt_pl_site_id(s, S_signal_delivery);
        tt_pl_site_id(s, S_signal_return);
    }
    tt_rt_guard_leave();
}

typedef long (*syscall_fn)(long, ...);

/* Whether @si is a delivery the process did not cause itself: a child's end, stop or continue,
 * or a signal another process sent. */
static bool from_elsewhere(const siginfo_t *si)
{
    if (si->si_code > 0)
        return true; /* CLD_EXITED and the other CLD_ codes: the kernel's */
    /* libc's syscall: this library's would record a getpid */
    return si->si_pid != (pid_t)REAL(syscall, syscall_fn)(SYS_getpid);
}

/* The SIGCHLDs that came while the thread was inside the runtime (the guard held), in a
 * recording. Their handler does not run there: its calls would go unrecorded, and a replay,
 * which never ran it, would diverge where the program saw what it did (bash's command
 * substitution finding its child already reaped). They wait in this ring until the guard is
 * released, and tt_pl_signal_release_ then gives each back to the thread (rt_tgsigqueueinfo,
 * with its siginfo): the kernel delivers it at once, or when the program next unblocks
 * SIGCHLD, and the trampoline records it there. Beyond HELD_CAP waiting, one is dropped (as a
 * pending SIGCHLD merges with one already pending). The trampoline writes tail, the release
 * head; a signal may interrupt the release, never the other way round. */
#define HELD_CAP 8u
static __thread struct {
    siginfo_t q[HELD_CAP];
    unsigned head, tail;
} held;
/* While a release gives one back: the site its delivery is recorded at, read and cleared by
 * the trampoline that gets it at once (0: none is being given back) */
static __thread int giving_back;

/* From the trampoline, SIGCHLD blocked (a handler without SA_NODEFER): no other hold
 * interrupts it */
static void hold(const siginfo_t *si)
{
    if (held.tail - held.head < HELD_CAP) {
        held.q[held.tail % HELD_CAP] = *si;
        atomic_signal_fence(memory_order_seq_cst);
        held.tail++;
    }
    tt_rt_held = 1;
}

void tt_pl_signal_release_(bool at_return)
{
    if (held.head == held.tail)
        return;
    if (tt_pl_vforked) {
        tt_rt_held = 1; /* the parent's: its thread gives them back when it runs again */
        return;
    }
    int e = errno;
    /* taken out with every signal blocked: a handler that runs here (another signal's, or a
     * delivery's made in the loop below) may release too */
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    siginfo_t q[HELD_CAP];
    unsigned n = 0;
    while (held.head != held.tail && n < HELD_CAP)
        q[n++] = held.q[held.head++ % HELD_CAP];
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    syscall_fn sys = REAL(syscall, syscall_fn);
    long pid = sys(SYS_getpid), tid = sys(SYS_gettid);
    for (unsigned i = 0; i < n; i++) {
        /* at the return of the call whose events came before (the replay makes it where that
         * call returns), or where no call had one yet (before the next call, as any other) */
        giving_back = at_return ? S_signal_return : S_signal_delivery;
        atomic_signal_fence(memory_order_seq_cst);
        sys(SYS_rt_tgsigqueueinfo, pid, tid, SIGCHLD, &q[i]);
        atomic_signal_fence(memory_order_seq_cst);
        giving_back = 0;
    }
    errno = e;
}

void tt_pl_signal_sites_(tt_session *s)
{
    if (!atomic_load_explicit(&g_chld.fn, memory_order_acquire))
        return;
    tt_pl_site_id(s, S_signal_delivery);
    tt_pl_site_id(s, S_signal_return);
}

void tt_pl_signal_fork_child_(void)
{
    held.head = held.tail = 0; /* a fork child has no pending signal of its parent's */
    tt_rt_held = 0;
}

static void call_handler(uintptr_t fn, int flags, int sig, siginfo_t *si, void *uc)
{
    if (flags & SA_SIGINFO)
        ((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
    else
        ((void (*)(int))fn)(sig);
}

static void trampoline(int sig, siginfo_t *si, void *uc)
{
    int e = errno;
    uintptr_t fn = atomic_load_explicit(&g_chld.fn, memory_order_acquire);
    int flags = atomic_load_explicit(&g_chld.flags, memory_order_relaxed);
    if (!fn)
        return;
    /* the live session only (a handler opens none); in a tree only, where the children and
     * the waits replay too (without it, children and waits are live, and so is the signal) */
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    if (si && tt_rt_tree() && from_elsewhere(si) && tt_active_(s)) {
        if (!tt_pl_recording(s)) {
            /* replay: the recorded deliveries are the ones that run, even where this one
             * interrupted the runtime; the handler stays for them (with SA_RESETHAND the
             * kernel has reset the disposition, and the recorded delivery resets the view).
             * Outside the runtime the thread may wait for its handler where it makes no call
             * (pause, sigsuspend): the deliveries it has next are made now */
            if (tt_rt_guard_enter()) {
                tt_rt_deliver_next();
                tt_rt_guard_leave();
            }
            errno = e;
            return;
        }
        /* inside the runtime (the guard held, or a hook's append under way): held until it
         * is released, and recorded then (a vfork child's is its own; with SA_RESETHAND the
         * kernel has already reset the disposition, and with SA_NODEFER another could come in
         * the middle of the hold: the handler runs here, unrecorded, with its calls) */
        if (tt_rt_guard_held() && !tt_pl_vforked && !(flags & (SA_RESETHAND | SA_NODEFER))) {
            hold(si);
            errno = e;
            return;
        }
        int given = giving_back;
        giving_back = 0;
        uint32_t site = atomic_load_explicit(
            &tt_pl_site_ids[given == S_signal_return ? S_signal_return : S_signal_delivery],
            memory_order_relaxed);
        /* nor is a thread registered in a handler (a lock, and memory) */
        if (site != 0 && tt_rt_thread_known() && tt_rt_guard_enter()) {
            siginfo_t copy = *si;
            tt_event ev = { .kind = TT_EV_IO, .dir = TT_IO_IN, .arg = TT_CH_PROC,
                            .sp = { 0, site }, .payload_len = sizeof copy, .payload = &copy };
            tt_event_full_(s, &ev, &copy, sizeof copy, NULL);
            tt_rt_guard_leave();
        }
    }
    if (flags & SA_RESETHAND) /* the kernel reset its disposition; so does the program's view */
        atomic_store_explicit(&g_chld.fn, 0, memory_order_release);
    errno = e;
    call_handler(fn, flags, sig, si, uc);
}

void tt_pl_signal_deliver_(const void *info, size_t len)
{
    siginfo_t si;
    if (len != sizeof si)
        return;
    memcpy(&si, info, sizeof si);
    uintptr_t fn = atomic_load_explicit(&g_chld.fn, memory_order_acquire);
    int flags = atomic_load_explicit(&g_chld.flags, memory_order_relaxed);
    if (si.si_signo != SIGCHLD || !fn)
        return; /* the program has no handler now: it had one when this was recorded */
    sigset_t block = g_chld.mask, was;
    if (!(flags & SA_NODEFER))
        sigaddset(&block, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &block, &was);
    if (flags & SA_RESETHAND) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        atomic_store_explicit(&g_chld.fn, 0, memory_order_release);
        REAL(sigaction, sigaction_fn)(SIGCHLD, &dfl, NULL);
    }
    ucontext_t uc;
    if (flags & SA_SIGINFO)
        getcontext(&uc);
    int e = errno;
    /* the handler's calls are the program's: outside the guard the caller holds */
    tt_rt_guard_leave();
    call_handler(fn, flags, SIGCHLD, &si, &uc);
    tt_rt_guard_enter();
    errno = e;
    pthread_sigmask(SIG_SETMASK, &was, NULL);
}

TT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    sigaction_fn real = REAL(sigaction, sigaction_fn);
    if (act)
        installing(act->sa_handler); /* sa_sigaction shares its storage */
    if (sig != SIGCHLD)
        return real(sig, act, old);
    /* SIGCHLD: the kernel gets the trampoline for a handler function, the program's own
     * disposition otherwise; @old reports the program's handler either way */
    struct sigaction prog, tramp;
    uintptr_t fn = atomic_load_explicit(&g_chld.fn, memory_order_acquire);
    if (fn) {
        memset(&prog, 0, sizeof prog);
        prog.sa_flags = atomic_load_explicit(&g_chld.flags, memory_order_relaxed);
        prog.sa_mask = g_chld.mask;
        if (prog.sa_flags & SA_SIGINFO)
            prog.sa_sigaction = (void (*)(int, siginfo_t *, void *))fn;
        else
            prog.sa_handler = (__sighandler_t)fn;
    }
    const struct sigaction *give = act;
    if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
        act->sa_handler != SIG_HOLD) {
        tramp = *act;
        tramp.sa_sigaction = trampoline;
        tramp.sa_flags |= SA_SIGINFO;
        give = &tramp;
    }
    struct sigaction real_old;
    int rc = real(sig, give, &real_old);
    if (rc != 0)
        return rc;
    if (act && !tt_pl_vforked) { /* a vfork child's dispositions are its own, not its memory */
        if (give == &tramp) {
            g_chld.mask = act->sa_mask;
            atomic_store_explicit(&g_chld.flags, act->sa_flags, memory_order_relaxed);
            atomic_store_explicit(&g_chld.fn,
                                  (act->sa_flags & SA_SIGINFO) ? (uintptr_t)act->sa_sigaction
                                                               : (uintptr_t)act->sa_handler,
                                  memory_order_release);
        } else {
            atomic_store_explicit(&g_chld.fn, 0, memory_order_release);
        }
    }
    if (old)
        *old = fn && real_old.sa_sigaction == trampoline ? prog : real_old;
    return 0;
}

/* The functions that install a handler one argument at a time: all the same but the name.
 * For SIGCHLD, the ones glibc gives BSD semantics (signal, bsd_signal, ssignal: restarting,
 * the signal blocked in its handler) and System V ones (sysv_signal: reset at delivery, not
 * blocked) go through sigaction above; sigset is passed on. */
static __sighandler_t chld_signal(__sighandler_t h, int flags)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = h;
    act.sa_flags = flags;
    sigemptyset(&act.sa_mask);
    if (!(flags & SA_NODEFER))
        sigaddset(&act.sa_mask, SIGCHLD);
    if (sigaction(SIGCHLD, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

#define SIGNAL_LIKE(name, chld, chld_flags)                                                    \
    TT_EXPORT __sighandler_t name(int sig, __sighandler_t h)                                   \
    {                                                                                          \
        if (sig == SIGCHLD && (chld))                                                          \
            return chld_signal(h, (int)(chld_flags));                                          \
        installing(h);                                                                         \
        return REAL(name, signal_fn)(sig, h);                                                  \
    }

SIGNAL_LIKE(signal, true, SA_RESTART)
SIGNAL_LIKE(bsd_signal, true, SA_RESTART)
SIGNAL_LIKE(ssignal, true, SA_RESTART)
SIGNAL_LIKE(sysv_signal, true, SA_RESETHAND | SA_NODEFER)
SIGNAL_LIKE(__sysv_signal, true, SA_RESETHAND | SA_NODEFER)
SIGNAL_LIKE(sigset, false, 0)

/* The waits for a signal. In a replay the handler's recorded deliveries come from the
 * recording: a thread about to wait for one, whose recording has it next, gets it now and
 * returns as after a handler (-1, EINTR); otherwise it waits for real. */
static bool delivered_instead(void)
{
    if (!tt_rt_tree() || !tt_rt_guard_enter())
        return false;
    bool made = tt_rt_deliver_waiting();
    tt_rt_guard_leave();
    if (made)
        errno = EINTR;
    return made;
}

TT_EXPORT int pause(void)
{
    if (delivered_instead())
        return -1;
    return REAL(pause, int (*)(void))();
}

TT_EXPORT int sigsuspend(const sigset_t *mask)
{
    if (delivered_instead())
        return -1;
    return REAL(sigsuspend, int (*)(const sigset_t *))(mask);
}
