/* SPDX-License-Identifier: MIT */
/* The runtime's state, shared by its files: runtime.c (life, threads, processes, the program's
 * world), rt-report.c (the report and the output in the verdict) and rt-crash.c (fatal
 * signals). Nothing here is the library's API: every symbol is hidden, and runtime.h is the
 * contract with the preload library and the tool. */
#ifndef TT_RT_INT_H
#define TT_RT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "event-int.h"
#include "protocol.h"
#include "runtime.h"

/* The runtime's own descriptors go at or above this number, out of the way of the program's,
 * which the kernel numbers from the lowest free one. */
#define RT_FD_LOW 900

#define ARG_META_MAX 65500u

/* the guard is the library's own per-thread flag, which the swapper holds for its whole life */
#define guard tt_in_tracer

/* ---- the process's state (runtime.c defines it) ---- */
extern tt_mode g_mode TT_HIDDEN;
extern pid_t g_pid TT_HIDDEN;
extern bool opt_alloc TT_HIDDEN, opt_check_output TT_HIDDEN, opt_keep_going TT_HIDDEN;
/* the report channel (protocol.h): a socket, and the nonce every report line carries */
extern _Atomic int report_fd TT_HIDDEN;
extern int report_slot TT_HIDDEN;
extern char report_nonce[TT_REPORT_NONCE_LEN + 1] TT_HIDDEN;
/* 0: open; 1: closing at exit (g_closed once done); 2: a crash is being finalized, by the
 * thread g_crash_tid, which ends the process */
extern _Atomic int g_closing TT_HIDDEN, g_closed TT_HIDDEN;
extern _Atomic long g_crash_tid TT_HIDDEN;
extern int g_crash_sig TT_HIDDEN;
/* replay --gdb, and the SIGTRAP of --stop-at without it (g_trap set while it is raised) */
extern bool opt_gdb TT_HIDDEN;
extern _Atomic int g_trap TT_HIDDEN;
/* the process tree (runtime.c, docs/FORMAT.md §16) */
extern bool g_tree TT_HIDDEN, g_alone TT_HIDDEN;
extern char g_path[200] TT_HIDDEN;
extern unsigned g_gen TT_HIDDEN;
extern _Atomic unsigned g_nchild TT_HIDDEN;
extern _Atomic int g_pending TT_HIDDEN;
extern int g_exit_status TT_HIDDEN;
extern tt_session *g_parent_session TT_HIDDEN; /* a fork child's: the names it starts with */
extern pthread_mutex_t g_open_lock TT_HIDDEN;   /* a fork child's session opening */
/* the settings descriptor (runtime.c: the program's world), and its registry move */
extern _Atomic int g_rt_fd TT_HIDDEN;
extern int g_rt_slot TT_HIDDEN;
int rt_fd_move(void *ctx, int fd) TT_HIDDEN;
/* the calling thread's creation path, and the threads it started (runtime.c: threads) */
extern __thread char thread_path[96] TT_HIDDEN;
extern __thread unsigned thread_children TT_HIDDEN;
/* children the runtime did not follow, and execs it could not (runtime.c) */
extern _Atomic uint32_t g_children TT_HIDDEN, g_untraceable TT_HIDDEN;

/* The session as it stands, never starting the runtime (for the runtime's own use). */
static inline tt_session *cur(void)
{
    return atomic_load_explicit(&tt_rt_live, memory_order_acquire);
}

/* ---- runtime.c ---- */
/* The calling thread's kernel tid, and the process's pid, past the interposed calls. */
long os_tid(void) TT_HIDDEN;
pid_t os_pid(void) TT_HIDDEN;
/* Ends the process at once, past the interposed _exit. */
_Noreturn void exit_now(int status) TT_HIDDEN;
/* A TINYTRACE_* flag setting: set, non-empty and not "0". */
bool env_flag(const char *name) TT_HIDDEN;
/* "root/2@1": this image, as reports and notes name it. */
void proc_name(char *out, size_t cap) TT_HIDDEN;
/* The first child's or untraceable exec's command line, for the verdict. */
void first_child_cmd(char *out, size_t cap) TT_HIDDEN;
/* The live children and untraceable execs as META objects, before close. */
void note_processes(tt_session *s) TT_HIDDEN;
/* Finishes this process's session (its file complete, or its replay's verdict written). With
 * @exiting (the destructor, _exit), the process is about to end: its memory, mappings and
 * descriptors go with it, so the session is left unfreed; the kernel takes them back at once,
 * and a thread still running meets no freed memory. */
void rt_close(bool flush_stdio, bool exiting) TT_HIDDEN;

#ifdef TT_RT_PRELOAD
/* preload/output.c (preload.h): a fork child's output state starts afresh */
void tt_pl_child_reset(void) TT_HIDDEN;
/* preload/read.c (preload.h): the pipes' debts paid before the process ends, and a fork
 * child's forgotten */
void tt_pl_pipes_settle(int fd) TT_HIDDEN;
void tt_pl_pipes_forget(void) TT_HIDDEN;
#endif

/* ---- rt-procs.c ---- */
/* The page where a fork child finds what its parent knew of the first child (at open). */
void child_page_map(void) TT_HIDDEN;
/* pthread_atfork's child handler. */
void fork_child(void) TT_HIDDEN;
/* Record: the command line, the working directory and the environment as META objects. The
 * command line is @argv (@argc arguments) where the caller has it as the kernel laid it out
 * (the preload library's constructor, checked there); with @argv NULL it is read from
 * /proc/self/cmdline. */
void record_meta(tt_session *s, int argc, char *const *argv) TT_HIDDEN;

/* ---- rt-report.c ---- */
/* Writes the JSON report; @d may be NULL. */
void write_report(tt_session *s, const char *status, int code, const char *message,
                  const tt_divergence *d, const char *bt, uint64_t divergences) TT_HIDDEN;
void report_channel_open(void) TT_HIDDEN;
/* The fd registry's move of the report socket. */
int report_fd_move(void *ctx, int fd) TT_HIDDEN;
/* Output in the verdict: whether @re is an output event, the line it quotes, and the reason
 * of a divergence of the output. */
bool output_event(const tt_report_event *re) TT_HIDDEN;
void quote_line(char *buf, size_t cap, const tt_report_event *re) TT_HIDDEN;
void output_reason(tt_divergence *d) TT_HIDDEN;

/* ---- rt-crash.c ---- */
void install_crash_handlers(void) TT_HIDDEN;
_Noreturn void wait_forever(void) TT_HIDDEN;

#endif
