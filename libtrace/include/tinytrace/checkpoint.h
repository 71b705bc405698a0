/* SPDX-License-Identifier: MIT */
/* tinytrace — checkpoints (the `checkpoint` namespace).
 *
 * A CheckpointProvider is a caller's set of hooks over some state of the program. tt_checkpoint()
 * asks every registered provider to save its state into the checkpoint event (record), or to save
 * it and compare it with the recorded state (replay: a mismatch is TT_E_DIVERGED with the first
 * differing byte in the report). The session retains the last checkpoint. Checkpoints are
 * numbered in the order they are taken, from 0; the event carries its number (arg).
 *
 * A restore (tt_checkpoint_restore) puts the program's state back to a checkpoint: every
 * provider stages the state it saved there; if all of them can, all commit, else every one that
 * staged cancels and the call fails, naming the provider, with nothing changed. There is never
 * a half restore. A committed restore is an event of its own (TT_EV_RESTORE) and begins a new
 * epoch: the events after it carry the epoch in their timepoint, and the recording's total
 * order is (epoch, time, thread, seq) (docs/FORMAT.md §15). In replay a restore must meet the
 * recording's restore of the same checkpoint at the same point.
 *
 * A provider's hooks run on the thread that called tt_checkpoint or tt_checkpoint_restore, one
 * call at a time per session (the session serializes checkpoints and restores); they must not
 * call tt_checkpoint or tt_checkpoint_restore themselves.
 *
 * Example, an undo:
 *     tt_checkpoint(s, site);                      // state saved, retained
 *     if (try_step() != 0)
 *         tt_checkpoint_restore(s, NULL, site, &err); // every provider back to it, or none
 */
#ifndef TINYTRACE_CHECKPOINT_H
#define TINYTRACE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/event.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tt_checkpoint_provider {
    uint32_t struct_size;   /* sizeof(tt_checkpoint_provider) */
    uint32_t id;            /* caller's id for this provider, unique in the session */
    void *ctx;
    /* Bytes save() will write now. */
    size_t (*size)(void *ctx);
    /* Writes exactly @len bytes of state into @dst. 0 on success. */
    int (*save)(void *ctx, void *dst, size_t len);
    /* Prepares a restore from @src (@len bytes, as save wrote them; valid during the call
     * only) without making it visible. 0 on success; anything else refuses the restore. */
    int (*stage)(void *ctx, const void *src, size_t len);
    /* Makes the staged restore visible; cannot fail. */
    void (*commit)(void *ctx);
    /* Drops the staged restore; the state stays as it was before stage. */
    void (*cancel)(void *ctx);
} tt_checkpoint_provider;

/* Registers @p (copied) with @s. At most 64 providers. A provider without stage, commit and
 * cancel can be checkpointed but not restored. Not thread-safe against tt_checkpoint on the
 * same session: register before recording starts. */
TT_API int tt_checkpoint_register(tt_session *s, const tt_checkpoint_provider *p);

/* The last checkpoint taken (record) or matched (replay): a pointer to the session's copy of its
 * payload, valid until the next tt_checkpoint on @s or its close. TT_E_INVAL if none. A restore
 * does not change which checkpoint is the last. */
TT_API int tt_checkpoint_last(tt_session *s, const void **data, size_t *len, tt_timepoint *tp);

/* Which checkpoint a restore goes back to. */
typedef enum tt_checkpoint_which {
    TT_CHECKPOINT_LAST = 0,   /* the last one (tt_checkpoint_last) */
    TT_CHECKPOINT_NUMBER = 1, /* number @number: 0 is the session's first */
    TT_CHECKPOINT_AT = 2,     /* the one whose event is at @at (its thread and seq) */
} tt_checkpoint_which;

/* A checkpoint, named for tt_checkpoint_restore. Zero it, then set what @which needs. */
typedef struct tt_checkpoint_sel {
    tt_checkpoint_which which;
    uint64_t number;
    tt_timepoint at;
} tt_checkpoint_sel;

/* Restores the checkpoint @sel names (NULL: the last) at @site. Every registered provider
 * stages the state it saved in that checkpoint; when all did, all commit, the session's epoch
 * goes up by one and a restore event is recorded (record) or matched (replay). Returns TT_OK;
 * TT_E_RESTORE when a provider refused to stage or cannot (no stage, commit or cancel hook, or
 * no state of it in the checkpoint): every provider that staged was cancelled, and @err says
 * which one; TT_E_INVAL when there is no such checkpoint (record mode keeps the last one only:
 * an earlier one is in the file being written); TT_E_DIVERGED in replay when the recording did
 * not restore this checkpoint here (nothing staged). A failed call changes nothing: not the
 * providers' state, the epoch, the sequence, the replay cursor or the retained checkpoint, so
 * the call can be retried. In off mode it does nothing and returns TT_OK. Thread-safe (one
 * checkpoint or restore at a time per session); not async-signal-safe. @err may be NULL. */
TT_API int tt_checkpoint_restore(tt_session *s, const tt_checkpoint_sel *sel, uint32_t site,
                                 tt_error_info *err);

/* The epoch of the events @s records (record) or replays now: the restores so far (in a
 * replay that started at a checkpoint, those of the recording before it too). 0 in off mode.
 * Thread-safe, async-signal-safe. */
TT_API uint32_t tt_checkpoint_epoch(tt_session *s);

#ifdef __cplusplus
}
#endif
#endif
