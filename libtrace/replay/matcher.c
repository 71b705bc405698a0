/* SPDX-License-Identifier: MIT */
/* Replay's matcher: compares a live call with the next recorded event of its thread straight
 * from the encoded bytes of the reader's cursor, and looks ahead for the counting policy.
 *
 * It lives with replay, not in the reader, because what it decides is replay's (what counts as
 * the same call); it reads the cursor's state in place (store/cursor.h) because building a
 * tt_event for every enter and exit would cost more than the comparison itself.
 */
#include "replay-int.h"


/* Replay's fast path for enter and exit: matches the next event of a per-thread cursor against
 * (@kind, @function) straight from the encoded bytes and consumes it. Returns false, with the
 * cursor untouched, whenever the general path has to decide (a chunk boundary, a peeked event, a
 * mismatch); the general path then reports what differs. */
bool tt_reader_match_fn_(tt_reader *r, uint32_t cursor, uint8_t kind, uint32_t function,
                         uint64_t *seq, uint64_t *time)
{
    struct tt_cursor *c = &r->cursors[cursor];
    /* two bytes left at least: a valid chunk has them (this event and one after it), and a
     * hostile one whose count claims more events than its bytes hold goes to decode(), which
     * says so; both paths below read p[1] */
    if (TT_UNLIKELY(c->peeked || c->left <= 1 || !c->loaded || c->end - c->p < 2))
        return false;
    const uint8_t *p = c->p;
    uint8_t tag = p[0];
    uint64_t dt;
    uint32_t fn = c->prev_fn;
    /* A loop's events: a short tag or a two-byte event of the same function. Which of the two
     * comes next is random where the steps straddle 63 ticks, so the choice is made without a
     * branch. */
    {
        uint8_t b1 = p[1];
        uint8_t want_short = (uint8_t)(TT_TAG_SHORT | (kind == TT_EV_EXIT ? TT_TAG_SHORT_EXIT : 0));
        uint64_t is_short = (tag & (TT_TAG_SHORT | TT_TAG_SHORT_EXIT)) == want_short;
        uint64_t is_two = (tag == (kind | TT_TAG_FSAME)) & (b1 < 0x80);
        if (TT_LIKELY((is_short | is_two) && fn == function)) {
            dt = b1 ^ ((b1 ^ (uint64_t)(tag & TT_TAG_SHORT_STEP)) & (0 - is_short));
            if (TT_UNLIKELY(dt > UINT64_MAX - c->prev_time))
                return false;
            *seq = c->seq;
            *time = c->prev_time + dt;
            c->p = p + 2 - is_short;
            c->left--;
            c->prev_time += dt;
            c->seq++;
            return true;
        }
    }
    if (tag & TT_TAG_SHORT) {
        tag = tt_tag_full(tag, &dt);
        if (tag != (kind | TT_TAG_FSAME))
            return false;
        p++;
    } else if ((tag & (TT_TAG_KIND | TT_TAG_OUT)) != kind) {
        return false;
    } else if (TT_LIKELY(p[1] < 0x80)) {
        dt = p[1];
        p += 2;
    } else {
        p++;
        if (tt_get_varint(&p, c->end, &dt) != 0)
            return false;
    }
    if (!(tag & TT_TAG_FSAME)) {
        uint64_t v;
        if (tt_get_varint(&p, c->end, &v) != 0 || v > UINT32_MAX)
            return false;
        fn = (uint32_t)v;
    }
    if (fn != function || p > c->end || dt > UINT64_MAX - c->prev_time)
        return false;
    *seq = c->seq;
    *time = c->prev_time + dt;
    c->p = p;
    c->left--;
    c->prev_time += dt;
    c->prev_fn = fn;
    c->seq++;
    return true;
}

/* Replay's fast path for a sync event of the common forms: a "sync again" (kind 16) or a kind
 * 14 without a payload, not the last of its chunk (whose end and CONT_OUT decode() checks), in
 * a file without restores (whose epochs decode() works out). Parsed straight from the bytes,
 * with decode()'s bounds; anything else, or another site or object, is left to the general
 * path, which reports what differs. */
bool tt_reader_match_sync_(tt_reader *r, uint32_t cursor, uint32_t site, uint64_t id,
                           uint64_t *ord, uint8_t *dir, uint64_t *seq, uint64_t *time)
{
    struct tt_cursor *c = &r->cursors[cursor];
    if (TT_UNLIKELY(c->peeked || c->left <= 1 || !c->loaded || c->p >= c->end || r->nrest))
        return false;
    const uint8_t *p = c->p, *end = c->end;
    uint8_t tag = *p++;
    unsigned kind = tag & TT_TAG_KIND;
    if ((tag & TT_TAG_SHORT) || (kind != TT_TAG_SYNC_AGAIN && kind != TT_EV_SYNC) ||
        (kind == TT_TAG_SYNC_AGAIN && r->m.version < 5))
        return false;
    uint64_t dt, v, fs, obj, o;
    uint32_t fn = c->prev_fn;
    if (tt_get_varint(&p, end, &dt) != 0 || dt > UINT64_MAX - c->prev_time)
        return false;
    if (!(tag & TT_TAG_FSAME)) {
        if (tt_get_varint(&p, end, &v) != 0 || v > UINT32_MAX)
            return false;
        fn = (uint32_t)v;
    }
    if (tt_get_varint(&p, end, &fs) != 0 || fs != site)
        return false;
    if (kind == TT_TAG_SYNC_AGAIN) {
        if (tt_get_varint(&p, end, &v) != 0)
            return false;
        obj = c->prev_obj;
        o = c->prev_ord + tt_unzigzag(v);
    } else {
        uint64_t len;
        if (tt_get_varint(&p, end, &obj) != 0 || tt_get_varint(&p, end, &o) != 0 ||
            tt_get_varint(&p, end, &len) != 0 || len != 0)
            return false;
    }
    if (obj != id || p > end)
        return false;
    *ord = o;
    *dir = (tag & TT_TAG_OUT) ? TT_IO_OUT : TT_IO_IN;
    *seq = c->seq;
    *time = c->prev_time + dt;
    c->p = p;
    c->left--;
    c->prev_time += dt;
    c->prev_fn = fn;
    c->prev_obj = obj;
    c->prev_ord = o;
    c->seq++;
    return true;
}

/* Counting replay's re-alignment: the index (0 = the next event) of the first of the next @max
 * events of @cursor, within its current chunk, for which @match says yes; -1 if none. Nothing
 * moves. Payloads split over chunks end the search (following them would move buffers). */
int tt_reader_find_ahead_(tt_reader *r, uint32_t cursor, int max,
                          bool (*match)(const tt_event *ev, void *ctx), void *ctx)
{
    struct tt_cursor c = r->cursors[cursor];
    tt_error_info err;
    if (c.peeked) {
        /* start from the peeked event itself */
        c.peeked = false;
    }
    if (!c.loaded || c.left == 0)
        return -1;
    for (int i = 0; i < max && c.left > 0; i++) {
        if (c.left == 1 && (c.h.flags & TT_CF_CONT_OUT))
            return -1;
        tt_event ev;
        if (tt_cursor_decode_(r, &c, &ev, &err) != TT_OK)
            return -1;
        if (match(&ev, ctx))
            return i;
        c.p = c.pp;
        c.left = c.pleft;
        c.prev_time = c.ptime;
        c.prev_fn = c.pfn;
        c.prev_obj = c.pobj;
        c.prev_ord = c.pord;
    }
    return -1;
}
