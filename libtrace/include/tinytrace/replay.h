/* SPDX-License-Identifier: MIT */
/* tinytrace — replay (the `replay` namespace).
 *
 * A session opened in TT_MODE_REPLAY reads a recording through a bounded per-thread reader. Each
 * recording call is compared with the next recorded event of the same thread: kind, safepoint and
 * payload; for an allocation its size (never its address). Threads are matched by the order in
 * which they first call into the session, or by name when a thread calls tt_thread_name first.
 *
 * tt_io(TT_IO_IN) hands back the recorded bytes; TT_IO_OUT is compared.
 *
 * On a mismatch the call returns TT_E_DIVERGED and changes nothing: not the sequence, not the
 * cursor, not the retained checkpoint. The same call with the recorded values then succeeds.
 * The report of the last divergence is kept per session (tt_replay_divergence).
 */
#ifndef TINYTRACE_REPLAY_H
#define TINYTRACE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/event.h>
#include <tinytrace/session.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Divergence policy (TT_PARAM_DIVERGENCE). RETURN (the default): a diverging call returns
 * TT_E_DIVERGED and changes nothing, so the corrected call can be retried. COUNT: it returns
 * TT_E_DIVERGED too, and the replay re-aligns (`tinytrace replay --keep-going`): if the call is
 * among the thread's next 64 recorded events, the ones before it are skipped as missed and the
 * call's own event is consumed; otherwise the call is taken as an extra one and nothing moves.
 * Either way the count is in tt_replay_progress. */
typedef enum tt_divergence_policy { TT_DIVERGE_RETURN = 0, TT_DIVERGE_COUNT = 1 } tt_divergence_policy;

/* Why a call diverged. */
typedef enum tt_diverge_reason {
    TT_DIV_NONE = 0,
    TT_DIV_KIND,          /* another kind of event was recorded here */
    TT_DIV_FUNCTION,
    TT_DIV_SITE,
    TT_DIV_ARG,           /* io channel, user tag */
    TT_DIV_SIZE,          /* allocation size */
    TT_DIV_LENGTH,        /* payload length (io, user, checkpoint) */
    TT_DIV_PAYLOAD,       /* payload bytes; see first_diff */
    TT_DIV_DIRECTION,     /* io in versus out */
    TT_DIV_END,           /* the recording of this thread ended */
    TT_DIV_THREAD,        /* more threads than the recording had */
    TT_DIV_ORDER,         /* ordered replay: waited too long for this thread's turn */
    TT_DIV_OUTPUT,        /* the program's output differs (stdout, stderr): given by the runtime
                           * of `tinytrace replay` to a divergence on its output channels */
    TT_DIV_SCHEDULE,      /* a thread's turn on a synchronization object (sync.h) did not come
                           * within TT_PARAM_ORDER_TIMEOUT_MS; the message names the thread,
                           * the object and the recorded thread whose turn it is */
    TT_DIV_RESTORE,       /* the recording restored another checkpoint here (checkpoint.h) */
} tt_diverge_reason;

#define TT_REPORT_HISTORY 8
#define TT_REPORT_PREVIEW 160  /* enough for a line of output */

/* One event in a report, with the first bytes of its payload copied. */
typedef struct tt_report_event {
    tt_event ev;                              /* ev.payload is NULL in a report */
    uint8_t preview[TT_REPORT_PREVIEW];
    uint32_t preview_len;
} tt_report_event;

/* The divergence report. */
typedef struct tt_divergence {
    tt_diverge_reason reason;
    tt_timepoint tp;                          /* where: thread and sequence of the expected event */
    int has_expected;                         /* 0 when the thread's recording ended */
    tt_report_event expected;
    tt_report_event actual;
    uint64_t first_diff;                      /* first differing payload byte, for TT_DIV_PAYLOAD */
    uint32_t history_len;                     /* last matched events of that thread, oldest first */
    tt_report_event history[TT_REPORT_HISTORY];
    char message[256];
} tt_divergence;

/* ReplayProgress. */
typedef struct tt_replay_progress {
    uint64_t matched;          /* events matched so far, all threads */
    uint64_t total;            /* events in the recording (structural ones included) */
    uint64_t divergences;      /* diverging calls so far */
    uint32_t threads_seen;
    int has_next;              /* for the calling thread */
    tt_event next;             /* its next expected event (payload NULL) */
    /* the recorded order's waits, all threads: how often a thread went to sleep until another
     * passed it its turn, and how often a pass woke it while its turn had not come yet (a
     * sleep that timed out to look at the deadline, or a signal, is not counted) */
    uint64_t turn_sleeps;
    uint64_t turn_early_wakes;
} tt_replay_progress;

/* Copies the last divergence report into @out. Returns TT_E_INVAL if there was none.
 * Thread-safe. */
TT_API int tt_replay_divergence(tt_session *s, tt_divergence *out);

/* Where the replay stands, with the calling thread's next event. Thread-safe. */
TT_API int tt_replay_progress_get(tt_session *s, tt_replay_progress *out);

/* Formats @d as text for a human. Returns the length written (truncated to @cap). Uses the
 * session's object table to name functions and sites. Thread-safe. */
TT_API size_t tt_divergence_format(tt_session *s, const tt_divergence *d, char *buf, size_t cap);

/* ---- replay from a checkpoint ----
 * A program whose state is all in its checkpoint providers can start its replay at a
 * checkpoint instead of at the beginning: every thread's cursor goes to its first event after
 * checkpoint @n in the recorded order (through the checkpoint table and the seek index, without
 * reading what came before), every provider stages and commits the state saved there (all or
 * none, as tt_checkpoint_restore), the session retains that checkpoint as if it had just been
 * matched and takes its epoch, and each synchronization object's turn starts where the
 * recording was at that point. Everything after it is compared as in any replay, and closing
 * the session checks that all of it was met. The program then goes on from its restored state:
 * it must not make the calls the recording made before the checkpoint.
 *
 * Call it after registering the providers, before the replay reaches the checkpoint, and
 * before other threads replay. Returns TT_OK; TT_E_MODE outside replay; TT_E_INVAL when the
 * recording has no checkpoint @n (or no checkpoint table: format version 4, docs/FORMAT.md
 * §15) or the replay already started at one; TT_E_RESTORE when a provider could not stage
 * (nothing changed); a reader's error (TT_E_CORRUPT, TT_E_IO, ...) when the file is damaged
 * there. Thread-safe; not async-signal-safe. @err may be NULL. */
TT_API int tt_replay_from_checkpoint(tt_session *s, uint64_t n, tt_error_info *err);

/* The start that the configuration asks for: with TT_PARAM_REPLAY_FROM ("checkpoint:N", the
 * TINYTRACE_REPLAY_FROM variable) set on a replay session, tt_replay_from_checkpoint(s, N)
 * (once: again, it does nothing), and *@from = N; otherwise nothing, and *@from = UINT64_MAX.
 * So a program calls it at the same place in every mode (after registering its providers):
 * in record and off mode, or without the setting, it does nothing and returns TT_OK. @from
 * and @err may be NULL. */
TT_API int tt_replay_resume(tt_session *s, uint64_t *from, tt_error_info *err);

/* ---- a debugger at the divergence ----
 * The runtime of `tinytrace replay` calls tt_divergence_break with its report as text at every
 * divergence it reports (after printing it, before the diverging call returns to the program)
 * and where `replay --stop-at` asks (the call that matched the recorded event named there,
 * before it returns). It does nothing: it is a place for a breakpoint. In gdb,
 * `break tt_divergence_break`, then `up` to the program's frame (the first one outside the
 * runtime library); `tinytrace replay --gdb` sets the breakpoint, prints @report and selects
 * that frame (tools/tinytrace-gdb.py, docs/REPLAY.md "A debugger at the divergence").
 * @report is valid during the call only. Thread-safe, async-signal-safe. */
TT_API void tt_divergence_break(const char *report);

#ifdef __cplusplus
}
#endif
#endif
