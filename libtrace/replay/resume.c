/* The saved state of any recorded checkpoint, for a restore of one that is not the retained
 * one: read with a reader of its own (the replay's cursors stay where they are), sought with the
 * checkpoint table's row (the chunk and the index in it: one seek, one chunk read), and checked
 * to be the checkpoint event the row says.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay-int.h"

/* ---------------------------------------------------------------- a reader of its own */

struct side {
    void *mem;
    tt_reader *r;
};

static int side_open(tt_session *s, struct side *sd, tt_error_info *err)
{
    struct tt_replayer *rp = s->rp;
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    lim.max_event = s->cfg.max_event;
    lim.max_threads = (uint32_t)s->cfg.max_threads;
    tt_reader_capacity cap;
    sd->mem = NULL;
    sd->r = NULL;
    int rc = tt_reader_probe(rp->src, &lim, TT_CURSORS_PER_THREAD, NULL, &cap, err);
    if (rc != TT_OK)
        return rc;
    sd->mem = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    if (!sd->mem)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for a second reader");
    rc = tt_reader_open(rp->src, &lim, TT_CURSORS_PER_THREAD, sd->mem, cap.total, &sd->r, err);
    if (rc != TT_OK) {
        free(sd->mem);
        sd->mem = NULL;
    }
    return rc;
}

static void side_close(struct side *sd)
{
    if (sd->r)
        tt_reader_close(sd->r);
    free(sd->mem);
}

static tt_timepoint_entry entry_of(const tt_checkpoint_entry *e)
{
    return (tt_timepoint_entry){ .thread = e->tp.thread, .index = e->index, .seq = e->tp.seq,
                                 .time = e->time, .chunk_offset = e->chunk_offset };
}

int tt_rp_read_checkpoint_(tt_session *s, uint64_t n, uint8_t **state, size_t *len,
                           tt_checkpoint_entry *e, tt_error_info *err)
{
    tt_reader *r = s->rp->r;
    *state = NULL;
    *len = 0;
    if (tt_reader_checkpoint(r, n, e) != TT_OK) {
        const tt_manifest *m = tt_reader_manifest(r);
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the recording has no checkpoint %" PRIu64
                       " (%s%" PRIu64 " checkpoint%s)", n,
                       m->checkpoints_offset ? "it has " : "no checkpoint table: it has ",
                       tt_reader_checkpoint_count(r), tt_reader_checkpoint_count(r) == 1 ? "" : "s");
    }
    struct side sd;
    int rc = side_open(s, &sd, err);
    tt_timepoint_entry te = entry_of(e);
    tt_event ev;
    if (rc == TT_OK)
        rc = tt_reader_seek(sd.r, te.thread, &te, err);
    if (rc == TT_OK)
        rc = tt_reader_peek(sd.r, te.thread, &ev, err);
    if (rc == TT_OK && (ev.kind != TT_EV_CHECKPOINT || ev.tp.seq != e->tp.seq ||
                        ev.payload_len != e->length))
        rc = tt_fail(err, TT_E_CORRUPT, 0, e->chunk_offset, "%s: checkpoint %" PRIu64 " of the "
                     "checkpoint table is not the event at thread %u seq %" PRIu64,
                     s->rp->src->name, n, te.thread, te.seq);
    if (rc == TT_OK) {
        *state = malloc(ev.payload_len ? ev.payload_len : 1);
        if (!*state)
            rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for checkpoint %" PRIu64,
                         n);
        else if (ev.payload_len)
            memcpy(*state, ev.payload, ev.payload_len);
        *len = ev.payload_len;
    }
    side_close(&sd);
    return rc;
}
