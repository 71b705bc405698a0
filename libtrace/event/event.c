/* SPDX-License-Identifier: MIT */
/* The recording calls. In record mode they append raw records to the calling thread's buffer;
 * in replay mode they hand the call to the replayer for comparison.
 *
 * The enter/exit path is the one that must be cheap: tt_record_fn_ (event-int.h, over
 * record/record_api.h) is a cache hit on the thread-local lookup, a relaxed busy flag around
 * the append (see tt_writer_close for why no fence is needed), one rdtsc and a 16-byte store.
 * Everything else is out of line, through the session's backend.
 *
 * The busy flag is also the nesting guard against signal handlers: a call that finds its own
 * thread already busy was made by a handler that interrupted a recording (or replay) call, and
 * is refused with TT_E_MODE before it touches the buffer or the replay cursor (see event.h for
 * the policy and tt_rec_begin_ for why that costs no extra branch).
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint-int.h"
#include "event-int.h"


int tt_event_fn_(tt_session *s, uint32_t kind, uint32_t function)
{
    return tt_fn_event_(s, kind, function);
}

int tt_event_fn_slow_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now)
{
    int rc = TT_OK;
    struct tt_thread *t = tt_thread_of(s, &rc);
    if (!t)
        return rc;
    return s->be->fn_event(s, t, kind, function, now);
}

int tt_event_full_(tt_session *s, const tt_event *ev, void *in_buf, size_t in_cap, size_t *in_len)
{
    int rc = TT_OK;
    if (!tt_active_(s))
        return TT_OK;
    /* exported, so checked: only the kinds with a long record, and a direction only for io */
    if (ev->kind < TT_EV_SAFEPOINT || ev->kind > TT_EV_CRASH || ev->dir > TT_IO_OUT ||
        (ev->dir && ev->kind != TT_EV_IO))
        return TT_E_INVAL;
    if (ev->payload_len > s->cfg.max_event)
        return TT_E_LIMIT;
    if (ev->payload_len && !ev->payload)
        return TT_E_INVAL;
    struct tt_thread *t = tt_thread_of(s, &rc);
    if (!t)
        return rc;
    return s->be->event(s, t, ev, in_buf, in_cap, in_len);
}

int tt_safepoint(tt_session *s, uint32_t function, uint32_t site)
{
    tt_event ev = { .kind = TT_EV_SAFEPOINT, .sp = { function, site } };
    return tt_event_full_(s, &ev, NULL, 0, NULL);
}

int tt_alloc(tt_session *s, uint32_t site, uint64_t size, const void *addr)
{
    tt_event ev = { .kind = TT_EV_ALLOC, .sp = { 0, site }, .arg = size,
                    .addr = (uint64_t)(uintptr_t)addr };
    return tt_event_full_(s, &ev, NULL, 0, NULL);
}

int tt_free(tt_session *s, uint32_t site, const void *addr)
{
    tt_event ev = { .kind = TT_EV_FREE, .sp = { 0, site }, .addr = (uint64_t)(uintptr_t)addr };
    return tt_event_full_(s, &ev, NULL, 0, NULL);
}

int tt_io(tt_session *s, tt_io_dir dir, uint32_t channel, void *buf, size_t len, size_t *out_len)
{
    if (dir != TT_IO_IN && dir != TT_IO_OUT)
        return TT_E_INVAL;
    tt_event ev = { .kind = TT_EV_IO, .dir = (uint8_t)dir, .arg = channel, .payload_len = len,
                    .payload = buf };
    return tt_event_full_(s, &ev, buf, len, out_len);
}

int tt_user(tt_session *s, uint32_t tag, const void *data, size_t len)
{
    tt_event ev = { .kind = TT_EV_USER, .arg = tag, .payload_len = len, .payload = data };
    return tt_event_full_(s, &ev, NULL, 0, NULL);
}

int tt_checkpoint(tt_session *s, uint32_t site)
{
    if (!tt_active_(s))
        return TT_OK;
    /* one at a time with restores: the number is the event's, in the order of the events */
    tt_checkpoint_lock_(s);
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = tt_checkpoint_collect(s, &data, &len);
    if (rc == TT_OK) {
        tt_event ev = { .kind = TT_EV_CHECKPOINT, .sp = { 0, site }, .arg = s->cp_count,
                        .payload_len = len, .payload = data };
        /* the backend retains it with its timepoint and number: recorded, or matched */
        rc = tt_event_full_(s, &ev, NULL, 0, NULL);
    }
    tt_checkpoint_unlock_(s);
    free(data);
    return rc;
}

const char *tt_event_kind_name(unsigned kind)
{
    static const char *const names[] = {
        [TT_EV_SESSION_START] = "session-start", [TT_EV_SESSION_END] = "session-end",
        [TT_EV_THREAD_START] = "thread-start",   [TT_EV_THREAD_END] = "thread-end",
        [TT_EV_ENTER] = "enter",                 [TT_EV_EXIT] = "exit",
        [TT_EV_SAFEPOINT] = "safepoint",         [TT_EV_ALLOC] = "alloc",
        [TT_EV_FREE] = "free",                   [TT_EV_IO] = "io",
        [TT_EV_CHECKPOINT] = "checkpoint",       [TT_EV_USER] = "user",
        [TT_EV_CRASH] = "crash",                 [TT_EV_SYNC] = "sync",
        [TT_EV_RESTORE] = "restore",
    };
    if (kind == 0 || kind > TT_EV_KIND_MAX)
        return "unknown";
    return names[kind];
}
