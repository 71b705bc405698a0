/* SPDX-License-Identifier: MIT */
/* Signal handlers: the calls that install one are passed on unchanged; the first that installs
 * a handler function (not SIG_DFL, SIG_IGN or SIG_HOLD) tells the runtime, which then starts
 * a recording's swapper if it has not started yet (tt_rt_handler_installed). Until a process
 * has a handler, none of its code runs inside one, so a buffer that fills may start the
 * swapper where it fills; after, it might be inside a handler, where starting a thread is not
 * safe. An exec leaves no handler; a fork child keeps its parent's (and the runtime's note).
 * The runtime's own handlers (the crash handler, installed with the guard held) do not count.
 */
#include "preload.h"

#include <signal.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef __sighandler_t (*signal_fn)(int, __sighandler_t);

/* glibc's, without a declaration in its headers any more (or only under some feature macros:
 * with _XOPEN_SOURCE alone, signal() is __sysv_signal) */
__sighandler_t bsd_signal(int sig, __sighandler_t h);
__sighandler_t ssignal(int sig, __sighandler_t h);
__sighandler_t __sysv_signal(int sig, __sighandler_t h);

static void installing(__sighandler_t h)
{
    if (h == SIG_DFL || h == SIG_IGN || h == SIG_HOLD || !tt_rt_guard_enter())
        return;
    tt_rt_handler_installed();
    tt_rt_guard_leave();
}

TT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (act)
        installing(act->sa_handler); /* sa_sigaction shares its storage */
    return REAL(sigaction, sigaction_fn)(sig, act, old);
}

/* The functions that install a handler one argument at a time: all the same but the name */
#define SIGNAL_LIKE(name)                                                                      \
    TT_EXPORT __sighandler_t name(int sig, __sighandler_t h)                                   \
    {                                                                                          \
        installing(h);                                                                         \
        return REAL(name, signal_fn)(sig, h);                                                  \
    }

SIGNAL_LIKE(signal)
SIGNAL_LIKE(sysv_signal)
SIGNAL_LIKE(__sysv_signal)
SIGNAL_LIKE(ssignal)
SIGNAL_LIKE(bsd_signal)
SIGNAL_LIKE(sigset)
