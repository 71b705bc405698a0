/* SPDX-License-Identifier: MIT */
/* The in-process runtime shared by the -finstrument-functions hooks and the preload library.
 *
 * A program run under `tinytrace record|replay` (or linked with tinytrace and started with
 * TINYTRACE_MODE set) gets one process-wide session, opened from the TINYTRACE_* environment by
 * a constructor and closed at exit. Everything here is private to the library.
 *
 * The nesting guard: every interposed function and hook calls tt_rt_guard_enter() first and does
 * nothing but forward to the real function when it returns false. The guard is per thread and is
 * held while tinytrace itself runs, so the tracer never traces itself — not from its own malloc
 * calls, not from its swapper thread (which holds the guard for its whole life), not from a
 * signal handler that interrupts it. The hooks' fast path (hooks.c) is the exception: it tests
 * the guard but does not take it, and its append's busy flag stands for it (tt_rt_appending).
 *
 * The environment the tool sets for it, its exit status and its report: protocol.h.
 */
#ifndef TT_INSTRUMENT_RUNTIME_H
#define TT_INSTRUMENT_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tinytrace/tinytrace.h>

#include "protocol.h"
#include "session-int.h"

/* io channels of the environment, fixed so that recording and replay agree. */
enum tt_rt_channel {
    TT_CH_CLOCK = 1,      /* clock_gettime, gettimeofday, time */
    TT_CH_RANDOM = 2,     /* getrandom, getentropy, reads of /dev/urandom and /dev/random */
    TT_CH_READ = 3,       /* read on pipes, sockets, terminals (arg of the io event = channel) */
    TT_CH_RECV = 4,       /* recv, recvfrom, recvmsg */
    TT_CH_PID = 5,        /* getpid, getppid, gettid */
    TT_CH_HOSTNAME = 6,   /* gethostname */
    TT_CH_STDOUT = 7,     /* writes to fd 1, compared with --check-output */
    TT_CH_STDERR = 8,     /* writes to fd 2 */
    TT_CH_USAGE = 9,      /* getrusage, times, sysinfo, getloadavg */
    TT_CH_CPU = 10,       /* sched_getcpu, getcpu */
    TT_CH_PSEUDO = 11,    /* opening, reading and seeking /proc and /sys files (pseudo.c) */
    TT_CH_NET = 12,       /* socket calls' results (in), the addresses given (out): net.c */
    TT_CH_SEND = 13,      /* bytes sent on a virtual socket (out): net.c */
    TT_CH_POLL = 14,      /* poll, select, epoll_wait: the request (out), the result (in) */
    TT_CH_RESOLVE = 15,   /* getaddrinfo & co.: the query (out), the answer (in): resolve.c */
    TT_CH_DIR = 16,       /* readdir: the entries of a directory listing (dir.c) */
    TT_CH_PROC = 17,      /* fork, posix_spawn, system, the wait family: pids, statuses */
};

/* The process-wide session, or NULL when the runtime is not active (no TINYTRACE_MODE, off
 * mode, in a forked child, or after exit began). Cheap: one load. */
tt_session *tt_rt_session(void);

/* The same, inline for the function hooks: a live session is one load; anything else (the
 * runtime of a linked program that has not started yet, or no session) takes tt_rt_session(). */
extern tt_session *_Atomic tt_rt_live __attribute__((visibility("hidden")));

static inline tt_session *tt_rt_session_hot(void)
{
    /* acquire: pairs with the release store in rt_init, so the session is fully built */
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_acquire);
    return __builtin_expect(s != NULL, 1) ? s : tt_rt_session();
}

/* Enters the calling thread's nesting guard. Returns false when the thread is already inside
 * tinytrace (then the caller must only forward to the real function). Async-signal-safe.
 * Inline: the guard is the library's per-thread tt_in_tracer flag (initial-exec TLS). */
extern __thread int tt_in_tracer __attribute__((visibility("hidden")));

/* A signal handler runs on the thread it interrupted, so the guard needs no atomics; it needs
 * the compiler to keep the flag's stores where they are written: the signal fences stop the
 * store of 1 from sinking below the work it guards (or merging with the store of 0), and the
 * work from leaking out of the guarded span. A handler that interrupts between the test and the
 * store finds 0, runs its own hook to the end and leaves 0 again. */
/* A signal that came while the guard was held and waits for its release (preload/signal.c:
 * a child's SIGCHLD for the program's handler, held in a recording, or a replay's delivery
 * recorded at the return of the call just replayed): nonzero until tt_rt_held_run_ has made
 * it. Set by the thread itself (and by a handler on it). */
extern __thread int tt_rt_held __attribute__((visibility("hidden")));
/* The io events the thread recorded (preload.h counts them), and their count when it last
 * took the guard: a span that recorded one returns from a call that the replay meets. */
extern __thread uint32_t tt_rt_io_count __attribute__((visibility("hidden")));
extern __thread uint32_t tt_rt_span_base __attribute__((visibility("hidden")));
/* Makes what tt_rt_held says waits, now that the guard is free: @at_return, the span just left
 * recorded the call's events (the delivery then follows them, made where the call returns).
 * Out of line, and rare. */
void tt_rt_held_run_(bool at_return);

/* The thread is inside an append of the function hooks' fast path (hooks.c), which takes the
 * thread's busy flag (record_api.h) but not the guard, to keep two stores off every enter and
 * exit. Only a signal handler that interrupted the append can see it set, and for the handler
 * it counts as the guard held: its calls forward unrecorded, a SIGCHLD is held until the append
 * is done. Only in a recording (a replay's hooks take the guard). Async-signal-safe: loads
 * only. */
static inline bool tt_rt_appending(void)
{
    tt_session *s = atomic_load_explicit(&tt_rt_live, memory_order_relaxed);
    const struct tls_way *w = &tt_tls_cache[0];
    return s != NULL && s->head.mode == TT_MODE_RECORD && w->s == s && w->uid == s->uid &&
           atomic_load_explicit(&w->t->busy, memory_order_relaxed) != 0;
}

/* The thread is inside tinytrace: the guard held, or a hook's append under way. What a signal
 * handler tests before it records or closes anything. */
static inline bool tt_rt_guard_held(void)
{
    return tt_in_tracer || tt_rt_appending();
}

static inline bool tt_rt_guard_enter(void)
{
    if (tt_rt_guard_held())
        return false;
    tt_in_tracer = 1;
    tt_rt_span_base = tt_rt_io_count;
    atomic_signal_fence(memory_order_seq_cst);
    return true;
}

/* The guard's release, then what waited for it: the flag is tested after the store, so a
 * signal held just before it is made here, and one that comes after finds the guard free. */
static inline void tt_rt_guard_leave(void)
{
    /* read before the release: a handler that runs after it takes the guard (and the base) */
    bool at_return = tt_rt_io_count != tt_rt_span_base;
    atomic_signal_fence(memory_order_seq_cst);
    tt_in_tracer = 0;
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(tt_rt_held != 0, 0))
        tt_rt_held_run_(at_return);
}

/* Around live work in the middle of an interposed call whose recorded event a replay has
 * already met (a replayed posix_spawn's real spawn, a replayed wait's real wait): a delivery
 * recorded at the call's return keeps waiting for it. Leave returns what enter takes back. */
int tt_rt_guard_leave_live(void);
void tt_rt_guard_enter_live(int held);

/* The program installed a signal handler (preload/signal.c), from now on a buffer may fill
 * inside one: a recording whose swapper waits for its first buffer starts it now. The
 * guard is held. */
void tt_rt_handler_installed(void);

/* The site of a recorded signal delivery (preload/signal.c), and the replay's delivery of
 * one (the preload library's only): @info is its recorded siginfo_t. Called by the replayer on the thread the delivery was
 * recorded on, with the guard held (it runs the handler outside it). */
#define TT_RT_SIGNAL_SITE "tinytrace:signal"
/* ... and of one that came while the runtime worked inside a call, recorded after that call's
 * events: a replay makes it where that call returns. */
#define TT_RT_SIGNAL_RETURN_SITE "tinytrace:signal-at-return"
void tt_pl_signal_deliver_(const void *info, size_t len);
/* Record, the guard free: the SIGCHLDs held while it was taken are given back to the thread
 * (preload/signal.c); @at_return as tt_rt_held_run_'s. */
void tt_pl_signal_release_(bool at_return);
/* Record, a fork child's session just opened (the guard held): the deliveries' sites interned
 * again when the program has a SIGCHLD handler (a handler may not intern). */
void tt_pl_signal_sites_(tt_session *s);
/* Replay, from the handler of a live signal the replay swallows, the guard held: the
 * deliveries the calling thread's recording has next are made now (async-signal-safe as far
 * as the program's handler is). */
void tt_rt_deliver_next(void);
/* Whether the calling thread has recorded (or replayed) in the live session already, from its
 * thread cache alone: async-signal-safe. A handler records only on such a thread. */
bool tt_rt_thread_known(void);
/* Replay, the guard held: the same from a call (pause, sigsuspend); whether any was made. */
bool tt_rt_deliver_waiting(void);

/* Options from the environment, read once at start. */
bool tt_rt_record_allocs(void);
bool tt_rt_check_output(void);

/* hooks.c: lets the encoder of @s map the hooks' function addresses to ids (TT_RAW_ADDR).
 * Called by the runtime before it publishes the session. */
void tt_hooks_attach(tt_session *s);

/* ---- processes the traced one starts (preload/process.c) ----
 * Callers hold the guard. */
/* True in the process the runtime traces (not in a child of it, nor after exit began). */
bool tt_rt_is_traced_process(void);
/* The traced process started a child that runs untraced; @cmd its command line, or NULL when
 * the child will say it at its exec (tt_rt_child_exec). */
void tt_rt_child_untraced(const char *cmd);
/* The environment for an exec of the traced process (it carries the settings on). */
char *const *tt_rt_exec_env(char *const envp[]);
/* In a child of the traced process, about to exec @cmd: names the first child, once. */
void tt_rt_child_exec(const char *cmd);
/* The traced process is about to exec @cmd, which the runtime cannot follow: the recording (or
 * the replay) ends here, counted, and the file is finished. */
void tt_rt_exec_untraceable(const char *cmd);

/* ---- the process tree (runtime.c says how processes are named) ----
 * Callers hold the guard unless said otherwise. */
/* Every process the program starts is traced (settings from the tool). */
bool tt_rt_tree(void);
/* Replay --process: this process runs alone; it starts no child, its waits do not wait. */
bool tt_rt_alone(void);
/* The number of the child the calling process is about to start: 1, 2, ... */
unsigned tt_rt_child_next(void);
/* In a fork child, first thing (guard not held): its path is the parent's + "/@n"; its copy of
 * @parent (the parent's session, or NULL) is dropped, and its own opens at its first call. */
void tt_rt_fork_child(tt_session *parent, unsigned n);
/* @envp with the identity of child @n (a posix_spawn, system or popen child) for the program
 * it runs; malloc'd, or @envp itself. */
char *const *tt_rt_spawn_env(char *const envp[], unsigned n);
/* The value of TT_ENV_RT for child @n, as tt_rt_spawn_env gives it, into @out, and the
 * settings descriptor it names into *@fd: 0, or -1 when there is nothing to hand on (no tree,
 * no settings descriptor). Allocates nothing, takes no lock: a vfork child calls it. */
int tt_rt_spawn_rt_value(unsigned n, char *out, size_t cap, int *fd);
/* The descriptors the programs this process execs inherit from the runtime (the settings,
 * and in a replay the report channel), ascending, into @out: how many (0 to 2). */
size_t tt_rt_inherited_fds(int out[2]);
/* A vfork child of this process exec'd @cmd, which the runtime cannot follow: counted and
 * named as this image's untraceable exec (the child has no recording to say it). */
void tt_rt_vfork_untraceable(const char *cmd);
/* A setting the runtime was started with (TINYTRACE_*), or NULL. */
const char *tt_rt_setting(const char *name);
/* Replay: how long a wait for the rest of the tree may last (TINYTRACE_ORDER_TIMEOUT_MS). */
long tt_rt_wait_ms(void);
/* Record: @meta as a META object of this process's recording. */
void tt_rt_note(const char *meta);
/* Record: child @n was started, as process @pid, by @how ("fork", "spawn sh -c ..."). */
void tt_rt_note_child(unsigned n, long pid, const char *how);
/* The status the program gave _exit, for the tree's manifest. */
void tt_rt_exit_status(int status);
/* The traced process is about to exec a program the runtime follows: this image's recording or
 * replay ends here (guard held or not). */
void tt_rt_exec_begin(void);

/* ---- threads (preload/thread.c starts them) ----
 * Callers hold the guard. */
/* The creation path of the next thread the calling thread creates ("main/2"), into @out. */
void tt_rt_thread_child_path(char *out, size_t cap);
/* In a new thread, before it runs the program's code: its alternate signal stack, and its
 * name @path in the session, by which replay pairs it with its recorded thread. */
void tt_rt_thread_begin(const char *path);
/* Replay: the sleeps sleep for real (TINYTRACE_REAL_SLEEP), not just return. */
bool tt_rt_real_sleep(void);

/* Record: the process is about to send itself SIGKILL (identity.c): every thread buffer that can
 * be taken is written into the .partial file before the call returns, so recover finds the
 * events (rt-crash.c). Nothing in replay. The guard is held. */
void tt_rt_before_sigkill(void);

/* sync.c: record, one more operation on a process-shared object, counted for the META object
 * "sync_shared=N". The guard is held. */
void tt_rt_sync_shared(tt_session *s);

/* Called when a recording call made on the program's behalf returned @rc != TT_OK. For
 * TT_E_DIVERGED it writes the report (stderr, and TINYTRACE_REPORT as JSON) and, unless
 * TINYTRACE_KEEP_GOING is set, ends the process with TT_RT_EXIT_DIVERGED. Other errors are
 * reported once and tracing stops. Returns only when the program may go on. */
void tt_rt_failed(int rc, const char *what);

#endif
