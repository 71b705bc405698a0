/* SPDX-License-Identifier: MIT */
/* The runtime's crash handling: a fatal signal while recording appends a crash event on the
 * crashing thread, closes the session and dies by the same signal (runtime.c's header says
 * what is finalized and what is not). Split from runtime.c, whose state it shares (rt-int.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event-int.h"
#include "rt-int.h"
#include "runtime.h"

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };
#define NFATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction old_actions[NFATAL];

_Noreturn void wait_forever(void)
{
    for (;;)
        pause();
}

/* Dies by @sig with its default action, from a handler where @sig may be blocked. */
static void die_by(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
}

/* Finalizing can still block (a lock the crashed code held): after a few seconds, give up and
 * die by the crash's signal, leaving the .partial file, rather than hang the program. */
static void watchdog(int unused)
{
    (void)unused;
    die_by(g_crash_sig);
}

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static void arm_watchdog(int sig)
{
    g_crash_sig = sig;
    struct sigaction wa;
    memset(&wa, 0, sizeof wa);
    wa.sa_handler = watchdog;
    wa.sa_flags = SA_ONSTACK;
    sigaction(SIGALRM, &wa, NULL);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev.sigev_notify_thread_id = (pid_t)os_tid();
    timer_t tm;
    if (timer_create(CLOCK_MONOTONIC, &sev, &tm) == 0) {
        struct itimerspec its = { .it_value = { 5, 0 } };
        timer_settime(tm, 0, &its, NULL);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void crash_handler(int sig, siginfo_t *info, void *uctx)
{
    /* replay --stop-at without a debugger: our own trap, for whoever is attached */
    if (sig == SIGTRAP && atomic_load(&g_trap))
        return;
    /* a handler the program had before us decides: it may recover (siglongjmp), or die */
    for (size_t i = 0; i < NFATAL; i++) {
        const struct sigaction *old = &old_actions[i];
        if (fatal_signals[i] != sig || old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN)
            continue;
        if (old->sa_flags & SA_SIGINFO)
            old->sa_sigaction(sig, info, uctx);
        else
            old->sa_handler(sig);
        return;
    }
    long me = os_tid();
    tt_session *s = cur();
    /* One thread finalizes: the first to move g_closing from 0 (exit's close takes it to 1, a
     * crash to 2). Whoever lost looks at what the winner does, whenever it lost. */
    int zero = 0;
    bool mine = s && !tt_rt_guard_held() && atomic_compare_exchange_strong(&g_closing, &zero, 2);
    if (!mine) {
        int state = atomic_load(&g_closing);
        if (state == 2 && atomic_load(&g_crash_tid) != me)
            wait_forever(); /* another thread's crash is being finalized; it ends the process */
        if (state == 1 && !guard) {
            /* exit is closing the session: let it finish (bounded), then die by this signal */
            for (int i = 0; i < 2000 && !atomic_load(&g_closed); i++)
                usleep(1000);
        }
        die_by(sig);
        return;
    }
    if (g_mode == TT_MODE_REPLAY) {
        atomic_store(&g_crash_tid, me);
        arm_watchdog(sig);
        /* Replay: did the recording crash here too, by the same signal? */
        guard = 1;
        char bt[4096];
        tt_backtrace(bt, sizeof bt, 1);
        tt_event ev = { .kind = TT_EV_CRASH, .arg = (uint64_t)sig };
        int rc = tt_event_full_(s, &ev, NULL, 0, NULL);
        char msg[160];
        if (rc == TT_OK) {
            snprintf(msg, sizeof msg, "the program died by signal %d where the recording did", sig);
            write_report(s, TT_REPORT_STATUS_MATCHED, TT_OK, msg, NULL, NULL, 0);
        } else if (rc == TT_E_DIVERGED) {
            tt_divergence d;
            if (tt_replay_divergence(s, &d) != TT_OK)
                memset(&d, 0, sizeof d);
            fprintf(stderr, "tinytrace: the program died by signal %d where the recording did "
                    "not\n%s", sig, bt);
            write_report(s, TT_REPORT_STATUS_DIVERGED, rc, d.message, &d, bt, 1);
        }
    } else {
        /* record; inside tinytrace (the guard is held) the locks may be ours: not finalized,
         * the guard test above left it to die */
        atomic_store(&g_crash_tid, me);
        arm_watchdog(sig);
        guard = 1;
        tt_session_swapper_(s, false); /* no thread starts in a crash: close encodes */
        char bt[4096];
        size_t n = tt_backtrace(bt, sizeof bt, 1);
        tt_event ev = { .kind = TT_EV_CRASH, .arg = (uint64_t)sig, .payload = bt,
                        .payload_len = n };
        tt_event_full_(s, &ev, NULL, 0, NULL);
        tt_error_info err;
        atomic_store_explicit(&tt_rt_live, NULL, memory_order_release);
        tt_session_mark_crashed_(s);
        note_processes(s);
        tt_session_finish_(s, &err); /* not freed: other threads may still hold it */
    }
    /* die as the program would have: default action, signal unblocked, raised again */
    die_by(sig);
}

void tt_rt_before_sigkill(void)
{
    /* SIGKILL runs no handler: unlike a crash there is no later point to finalize at, and the
     * session is not finished here either (the kill may fail, or be of the process group the
     * program goes on in until the signal lands): its buffers are written, the file stays a
     * .partial, the manifest's status says signal 9, and recover makes a trace of it */
    tt_session *s = cur();
    if (s && g_mode == TT_MODE_RECORD && os_pid() == g_pid)
        tt_session_flush_all_(s);
}

void install_crash_handlers(void)
{
    static char stack[64 * 1024] TT_BIG_BSS;
    stack_t ss = { .ss_sp = stack, .ss_size = sizeof stack };
    sigaltstack(&ss, NULL); /* a stack overflow still gets its crash event (main thread) */
    for (size_t i = 0; i < NFATAL; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = crash_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        /* an ignored signal stays ignored (SIGTRAP, SIGSYS: the program goes on) */
        if (sigaction(fatal_signals[i], NULL, &old_actions[i]) == 0 &&
            old_actions[i].sa_handler == SIG_IGN)
            continue;
        sigaction(fatal_signals[i], &sa, &old_actions[i]);
    }
}
