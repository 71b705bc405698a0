/* SPDX-License-Identifier: MIT */
/* The checkpoint module: the providers' state as one payload, the retained last checkpoint, the
 * restore (stage every provider, then commit all or cancel all), and the notes of every
 * checkpoint and restore that the record side turns into the checkpoint table.
 *
 * What belongs here: what the event layer (tt_checkpoint), the backends (a checkpoint that was
 * recorded or matched is retained; a restore's event) and the replay's start at a checkpoint
 * call. The providers, the retained copy and the notes live in the session (session-int.h);
 * this module is the only one that reads or writes them, under the session's cp_lock. Never
 * installed.
 */
#ifndef TT_CHECKPOINT_INT_H
#define TT_CHECKPOINT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "session-int.h"

/* Every registered provider's state, as the payload of a checkpoint event (FORMAT.md):
 * [u32 id][u64 length][state] per provider. *@out is malloc'd; the caller frees it. */
int tt_checkpoint_collect(tt_session *s, uint8_t **out, size_t *len);
/* Keeps a copy of @data as the session's last checkpoint, number @number, taken at @tp; the
 * next checkpoint's number is @number + 1. Under cp_lock. */
void tt_checkpoint_retain(tt_session *s, const void *data, size_t len, tt_timepoint tp,
                          uint64_t number);
/* One checkpoint or restore at a time (tt_checkpoint, tt_checkpoint_restore, a replay's start
 * at a checkpoint). */
void tt_checkpoint_lock_(tt_session *s);
void tt_checkpoint_unlock_(tt_session *s);

/* Record, under cp_lock: a note of a checkpoint (@payload its event's) or a restore
 * (@payload NULL; @number the checkpoint restored) whose event is @thread's @seq. */
void tt_checkpoint_note_(tt_session *s, uint32_t kind, uint32_t thread, uint64_t seq,
                         uint32_t site, uint64_t number, const uint8_t *payload, size_t len);

/* A restore in progress: the providers as registered when it began, and how many staged. */
struct tt_cp_staged {
    tt_checkpoint_provider prov[64];
    uint32_t n, staged;
};
/* Stages every provider from @state (@len bytes, a checkpoint payload: FORMAT.md §8) of
 * checkpoint @number. TT_OK with all staged, or TT_E_RESTORE with none staged any more (those
 * that had were cancelled) and @err naming the provider. */
int tt_checkpoint_stage_(tt_session *s, const uint8_t *state, size_t len, uint64_t number,
                         struct tt_cp_staged *st, tt_error_info *err);
void tt_checkpoint_commit_(struct tt_cp_staged *st);
void tt_checkpoint_cancel_(struct tt_cp_staged *st);

#endif
