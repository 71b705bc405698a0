/* tinytrace — checkpoints (the `checkpoint` namespace).
 *
 * A CheckpointProvider is a caller's set of hooks over some state of the program. tt_checkpoint()
 * asks every registered provider to save its state into the checkpoint event (record), or to save
 * it and compare it with the recorded state (replay: a mismatch is TT_E_DIVERGED with the first
 * differing byte in the report). The session retains the last checkpoint.
 *
 * Restoring a checkpoint (stage on every provider, then commit all or cancel all) comes in a later
 * version; the provider interface already has the four hooks.
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
    /* Prepares a restore from @src without making it visible. 0 on success. */
    int (*stage)(void *ctx, const void *src, size_t len);
    /* Makes the staged restore visible; cannot fail. */
    void (*commit)(void *ctx);
    /* Drops the staged restore. */
    void (*cancel)(void *ctx);
} tt_checkpoint_provider;

/* Registers @p (copied) with @s. At most 64 providers. Not thread-safe against tt_checkpoint on
 * the same session: register before recording starts. */
TT_API int tt_checkpoint_register(tt_session *s, const tt_checkpoint_provider *p);

/* The last checkpoint taken (record) or matched (replay): a pointer to the session's copy of its
 * payload, valid until the next tt_checkpoint on @s or its close. TT_E_INVAL if none. */
TT_API int tt_checkpoint_last(tt_session *s, const void **data, size_t *len, tt_timepoint *tp);

#ifdef __cplusplus
}
#endif
#endif
