/* SPDX-License-Identifier: MIT */
/* The event layer: the public recording calls (event.c) and tt_session_open (open.c), which
 * chooses a session's backend from its config.
 *
 * What belongs here: the one inline path of an enter or exit in either mode, for the public
 * tt_enter/tt_exit (through tt_event_fn_) and the -finstrument-functions hooks (instrument/),
 * and its slow path. Never installed; see docs/ARCHITECTURE.md.
 */
#ifndef TT_EVENT_INT_H
#define TT_EVENT_INT_H

#include "record_api.h"

/* Everything the fast path does not take: registration, a full buffer, replay. Starts over from
 * the thread lookup. @now is the event's tt_ticks() (0 in replay, which reads no clock). */
int tt_event_fn_slow_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now) TT_HIDDEN;

/* A recorded enter or exit: the fast path, else the slow path. */
static inline int tt_record_fn_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now)
{
    int rc = tt_record_fn_fast_(s, kind, function, now);
    if (TT_LIKELY(rc != TT_RECORD_SLOW_))
        return rc;
    return tt_event_fn_slow_(s, kind, function, now);
}

/* An enter or exit in either mode; replay does not read the clock (rdtsc is most of an
 * event's cost). */
static inline int tt_fn_event_(tt_session *s, uint32_t kind, uint32_t function)
{
    if (TT_LIKELY(s->head.mode == TT_MODE_RECORD))
        return tt_record_fn_(s, kind, function, tt_ticks());
    return tt_event_fn_slow_(s, kind, function, 0);
}

#endif
