/* The checkpoint module: the providers' state as one payload, and the retained last checkpoint.
 *
 * What belongs here: what the event layer (tt_checkpoint) and the backends (a checkpoint that was
 * recorded or matched is retained) call. The providers and the retained copy live in the
 * session (session-int.h); this module is the only one that reads or writes them. Never
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
/* Keeps a copy of @data as the session's last checkpoint, taken at @tp. */
void tt_checkpoint_retain(tt_session *s, const void *data, size_t len, tt_timepoint tp);

#endif
