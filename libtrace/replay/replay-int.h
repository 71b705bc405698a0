/* SPDX-License-Identifier: MIT */
/* The replay layer: the replayer (replayer.c: open, the binding of live threads to recorded
 * ones, the comparison of each call, close), its matcher (matcher.c: enter and exit straight
 * from the encoded bytes), the divergence report (report.c), and the replay backend.
 *
 * What belongs here: what those files share: the replayer's state and the replaying thread's.
 * Never installed; see docs/ARCHITECTURE.md.
 */
#ifndef TT_REPLAY_INT_H
#define TT_REPLAY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "checkpoint-int.h"
#include "cursor.h"
#include "session-int.h"

/* A replaying thread: the session's part, then the binding and the history of its matches. */
struct tt_rp_thread {
    struct tt_thread base;
    uint32_t rec;                        /* recorded thread id, or UINT32_MAX before binding */
    _Atomic uint64_t matched;            /* written by its thread only; read by progress */
    _Atomic uint64_t tracer_events;      /* the tracer's own events stepped over (its stall
                                          * frames); written by its thread only, read by drain */
    uint32_t rec_ended;                  /* its recording's end (THREAD_END) was stepped over */
    uint32_t hist_len, hist_pos;
    tt_report_event hist[TT_REPORT_HISTORY];
};

static inline struct tt_rp_thread *tt_rp_of(struct tt_thread *t)
{
    return (struct tt_rp_thread *)(void *)t;
}

/* The limits a replay reads its recording within: the defaults, but the largest event and the
 * number of threads the session's settings allow. */
static inline void tt_rp_limits_(const tt_session *s, tt_reader_limits *lim)
{
    tt_reader_limits_default(lim);
    lim->max_event = s->cfg.max_event;
    lim->max_threads = (uint32_t)s->cfg.max_threads;
}

#define TT_RP_SLEEP_MAX 256u
#define TT_RP_AT_LEAST (UINT64_C(1) << 63)
struct tt_replayer {
    /* ordered replay: per recorded thread, the time of its next non-structural event
     * (UINT64_MAX when it has none); written by that thread only */
    _Atomic uint64_t *next_time;
    uint32_t nthreads;
    bool ordered;
    tt_source own_src;
    const tt_source *src;
    void *storage;
    tt_reader *r;
    uint8_t *bound;                      /* per recorded thread */
    pthread_mutex_t lock;                /* bound, last */
    tt_divergence last;
    bool has_last;
    /* io OUT channels whose recorded events are stepped over like structural ones (the
     * runtime's output, when the replay does not compare it): set before any thread runs */
    uint64_t skip_out[4];
    uint32_t nskip_out;
    /* the recording's id of TT_STALL_FUNCTION (format.h), 0 if it never stalled: those frames
     * are the tracer's, stepped over like structural events */
    uint32_t stall_fn;
    /* threads stopped where their recording ended without their end (stop_at_exit) */
    _Atomic uint32_t cut_off;
    bool stop_at_exit;                   /* set by the runtime: the replay is a whole process's */
    /* close: the first recorded event no call consumed */
    tt_report_event first_left;
    bool has_first_left;
    /* a replay from a checkpoint (resume.c): its number + 1 (0: from the start), and where
     * each synchronization object's turn starts, or NULL */
    uint64_t from;
    struct tt_rp_resume *resume;
    /* the runtime's --stop-at: the recorded event, and what to call when it is matched (NULL:
     * none). Set before any thread runs */
    void (*stop_fn)(tt_session *s, const tt_event *ev);
    uint32_t stop_thread;
    uint64_t stop_seq;
    /* the runtime's recorded signal deliveries: io events at site signal_site or
     * signal_return_site (0: the recording has none), each handed to deliver where a call
     * meets it; one at signal_return_site is told to held as soon as it is the thread's next
     * event, so it is made where the call before it returns. Set before any thread runs */
    uint32_t signal_site;
    uint32_t signal_return_site;
    void (*deliver)(tt_session *s, const tt_event *ev);
    void (*held)(tt_session *s);
    /* sync.c: what recorded thread k (< TT_RP_SLEEP_MAX) last slept for: its object and its
     * turn + 1, with TT_RP_AT_LEAST for "or later"; written by that thread only */
    struct tt_rp_sleep {
        struct tt_sync_obj *_Atomic obj;
        _Atomic uint64_t want;
    } sleep[TT_RP_SLEEP_MAX];
    /* sync.c: a turn is passed with a plain store, the sleeper making the barrier for both
     * (membarrier(2) registered at open); false: an exchange */
    bool asym;
    /* sync.c: sleeps for a turn, and wakes before it came (tt_replay_progress) */
    _Atomic uint64_t turn_sleeps, turn_early_wakes;
};

/* sync.c: the turns' barrier, chosen at open */
void tt_rp_sync_init_(struct tt_replayer *rp);

/* report.c: the event @ev as a report line's event (its payload's first bytes copied) */
void tt_report_event_set(tt_report_event *re, const tt_event *ev);
/* report.c: appends @ev to @t's history of matches */
void tt_report_history_push(struct tt_rp_thread *t, const tt_event *ev);

/* replayer.c, for sync.c: the next recorded event of @t that a call meets, in *@ev (binding
 * @t first; in an ordered replay, waiting for its turn); a divergence when there is none
 * (@act: the call, for the report) */
int tt_rp_peek_(tt_session *s, struct tt_rp_thread *t, const tt_event *act,
                const tt_event **ev);
/* ... and its consumption, once the call matched it */
int tt_rp_consume_(tt_session *s, struct tt_rp_thread *t, const tt_event *ev);

/* The fast paths' match straight from the bytes (replay_fn, tt_rp_sync_begin): the caller has
 * filled the history slot @h = &t->hist[t->hist_pos] with the fields a line shows (kind, dir,
 * time, sp, arg, addr, payload_len and tp.seq); this completes it, takes it, counts the match
 * and makes a --stop-at stop there. No event is built and nothing is copied. */
static inline void tt_rp_matched_fast_(tt_session *s, struct tt_rp_thread *t, tt_report_event *h)
{
    h->ev.tp.thread = t->rec;
    h->ev.tp.epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    h->preview_len = 0;
    t->hist_pos = (t->hist_pos + 1) % TT_REPORT_HISTORY;
    if (t->hist_len < TT_REPORT_HISTORY)
        t->hist_len++;
    atomic_store_explicit(&t->matched, t->matched + 1, memory_order_relaxed);
    if (TT_UNLIKELY(s->rp->stop_fn != NULL) && h->ev.tp.seq == s->rp->stop_seq &&
        t->rec == s->rp->stop_thread)
        s->rp->stop_fn(s, &h->ev);
}
/* A divergence of @t (the report, the count, the re-alignment of the COUNT policy); @message
 * replaces the reason's text when not NULL. Returns TT_E_DIVERGED. */
int tt_rp_diverge_(tt_session *s, struct tt_rp_thread *t, tt_diverge_reason why,
                   const tt_event *exp, const tt_event *act, uint64_t first_diff,
                   const char *message);
/* The nesting guard of a replay call (TT_E_MODE inside another one on the same thread). */
int tt_rp_busy_begin_(struct tt_rp_thread *t);
void tt_rp_busy_end_(struct tt_rp_thread *t);

/* replayer.c, for resume.c: steps @rec's cursor over structural events and the tracer's own
 * (counted for @t, NULL: none bound yet) and, in an ordered replay, publishes the time of its
 * next event */
int tt_rp_publish_next_(struct tt_replayer *rp, struct tt_rp_thread *t, uint32_t rec,
                        tt_error_info *err);

/* resume.c: checkpoint @n's saved state from the recording (*@state malloc'd) and its row */
int tt_rp_read_checkpoint_(tt_session *s, uint64_t n, uint8_t **state, size_t *len,
                           tt_checkpoint_entry *e, tt_error_info *err);
/* resume.c, for sync.c, in a replay from a checkpoint (rp->resume set): object @e, which just
 * got recorded id @id, starts its turn where the recording was at the cut; and the turn that
 * follows number @next - 1 on object @id, past the numbers done before the cut */
void tt_rp_resume_turn_(tt_session *s, struct tt_sync_obj *e, uint64_t id);
uint64_t tt_rp_resume_next_(tt_session *s, uint64_t id, uint64_t next);
void tt_rp_resume_free_(struct tt_replayer *rp);

/* sync.c: the replay half of a synchronization operation */
int tt_rp_sync_begin(tt_session *s, struct tt_thread *t, tt_sync *op, struct tt_sync_obj *e);
int tt_rp_sync_end(tt_session *s, struct tt_thread *t, tt_sync *op, int result, int took);

extern const struct tt_backend tt_replay_backend TT_HIDDEN;

/* resume.c: the replay backend's restores (checkpoint.c runs them, tinytrace/checkpoint.h): a
 * checkpoint's state from the recording, the check that the recording restored the same one
 * here, and the step over its restore event. */
int tt_rp_checkpoint_state(tt_session *s, const tt_checkpoint_sel *sel, uint64_t *number,
                           tt_timepoint *tp, uint8_t **state, size_t *len, tt_error_info *err);
int tt_rp_restore_check(tt_session *s, struct tt_thread *bt, struct tt_restore_op *op,
                        tt_error_info *err);
int tt_rp_restore_apply(tt_session *s, struct tt_thread *bt, struct tt_restore_op *op,
                        tt_error_info *err);

#endif
