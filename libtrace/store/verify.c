/* SPDX-License-Identifier: MIT */
/* tt_verify: one sequential pass of a bounded reader over the whole file.
 *
 * The pass is the reader's own (every check tt_reader_next makes, and the end-of-stream checks),
 * but its loop over the events of a chunk is a skim that builds no tt_event: the window decoder
 * below takes a loop's enters and exits eight bytes at a time, and only what it cannot take goes
 * to the reader's general decoder. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cursor.h"

/* ---- verify's window decoder ----
 * A loop's enters and exits are one-byte short tags (step 0-63) and two-byte events (tag
 * ENTER|FSAME 0x25 or EXIT|FSAME 0x26, step 0-127). Where the steps straddle 63 the two forms
 * alternate at random, and a decoder that branches per event on which one it has mispredicts
 * every other event (verify ran at 400-500 MB/s on such a file). So skim_chunk takes eight
 * bytes at a time: bit 7 of each byte (set: a short tag) indexes a table that says how the
 * window parses, given whether its first byte is the step of a two-byte event whose tag ended
 * the window before. The windows follow each other 8 bytes apart, so only that one bit of
 * state links them. */
struct skim_window {
    uint64_t tagb;    /* 0xFF on each two-byte event's tag byte (checked to be 0x25 or 0x26) */
    uint64_t sumb;    /* 0x3F on short tags, 0x7F on steps: the bytes whose sum is the time */
    int8_t resume;    /* offset of the first event not completed: 8, 7 (dangling), or where the
                       * window stops parsing (-1 when its first byte should be a step and is
                       * not: the event began at the window before's last byte); every byte
                       * parsed when resume + dangling is 8 */
    uint8_t events;   /* events completed in the window (the one whose step is byte 0 included) */
    uint8_t dangling; /* byte 7 is a tag; its step is the next window's byte 0 */
};

static struct skim_window skim_table[2][256] TT_BIG_BSS; /* [first: a step][bit 7 of each byte] */
static pthread_once_t skim_once = PTHREAD_ONCE_INIT;

static void skim_table_init(void)
{
    for (int st = 0; st < 2; st++) {
        for (int m = 0; m < 256; m++) {
            struct skim_window w = {0};
            int i = 0;
            if (st) {
                if (m & 1) { /* the step has bit 7 set: no two-byte event after all */
                    w.resume = -1;
                    skim_table[st][m] = w;
                    continue;
                }
                w.sumb |= 0x7Full;
                w.events++;
                i = 1;
            }
            while (i < 8) {
                if (m & (1 << i)) {
                    w.sumb |= 0x3Full << (8 * i);
                    w.events++;
                    i++;
                } else if (i == 7) {
                    w.tagb |= 0xFFull << 56;
                    w.dangling = 1;
                    break;
                } else if (m & (1 << (i + 1))) {
                    break; /* a tag whose next byte is no one-byte step */
                } else {
                    w.tagb |= 0xFFull << (8 * i);
                    w.sumb |= 0x7Full << (8 * (i + 1));
                    w.events++;
                    i += 2;
                }
            }
            w.resume = (int8_t)(i > 8 ? 8 : i);
            skim_table[st][m] = w;
        }
    }
}

/* Bit 7 of each of the 8 bytes of @w (byte k to bit k). */
static inline unsigned high_bits(uint64_t w)
{
    return (unsigned)((((w >> 7) & 0x0101010101010101ull) * 0x0102040810204080ull) >> 56);
}

/* Skims whole windows from *@pp while more than 9 events are left, with the counts, and
 * stops before the first event a window cannot take (the caller's general path decides it).
 * Returns the events taken. */
static uint32_t skim_windows(const uint8_t **pp, const uint8_t *end, uint32_t left,
                             uint64_t *time)
{
    const uint64_t ones = 0x0101010101010101ull;
    const uint8_t *p = *pp;
    uint64_t t = *time;
    uint32_t n = 0, st = 0;
    while (left - n > 9 && end - p >= 8 && t <= UINT64_MAX - 8 * 0x7F) {
        uint64_t w = tt_get64(p);
        const struct skim_window *e = &skim_table[st][high_bits(w)];
        /* every two-byte tag is 0x25 or 0x26: bits 2-7 are 0x24, and bits 0 and 1 differ */
        if ((w & e->tagb & (0xFC * ones)) != (e->tagb & (0x24 * ones)) ||
            ((w ^ (w >> 1)) & e->tagb & ones) != (e->tagb & ones)) {
            p -= st; /* back to the dangling tag, if any: its event is not taken */
            st = 0;
            break;
        }
        uint64_t v = w & e->sumb;
        v = (v & (0xFF * 0x0001000100010001ull)) + ((v >> 8) & (0xFF * 0x0001000100010001ull));
        t += (v * 0x0001000100010001ull) >> 48;
        n += e->events;
        if (e->resume + e->dangling != 8) { /* parsing stopped inside the window */
            p += e->resume; /* -1: back to the previous window's last byte */
            st = 0;
            break;
        }
        p += 8;
        st = e->dangling;
    }
    *pp = p - st; /* a dangling tag starts the next event */
    *time = t;
    return n;
}

/* The events of the current chunk that lie wholly inside it, checked as decode() checks them
 * (its "malformed event" cases), with the per-thread counts kept once per chunk. Stops before
 * a last event whose payload continues in the next chunk. */
_Static_assert((TT_EV_ENTER | TT_TAG_FSAME) == 0x25 && (TT_EV_EXIT | TT_TAG_FSAME) == 0x26,
               "skim_chunk's four-event test assumes these tags");

static int skim_chunk(tt_reader *r, struct tt_cursor *c, uint64_t *events, tt_error_info *err)
{
    pthread_once(&skim_once, skim_table_init);
    const uint8_t *p = c->p, *end = c->end;
    uint32_t left = c->left, fn = c->prev_fn;
    uint64_t sobj = c->prev_obj, sord = c->prev_ord;
    uint64_t time = c->prev_time, payload = 0, largest = r->largest_event, n = 0;
    const uint64_t max_event = r->m.largest_event;
    const bool cont_out = (c->h.flags & TT_CF_CONT_OUT) != 0;
    unsigned cooldown = 0, backoff = 1;
    while (left > 1 || (left == 1 && !cont_out)) {
        /* a loop's enters and exits, eight bytes at a time (see "verify's window decoder").
         * Where a window cannot start, the events after it wait before the next try, 1, 2, 4
         * ... up to 64 events: a rare longer event in a loop costs one event on the slower
         * paths, a tree of calls to changing functions (no runs at all) few tries. */
        if (left > 9 && !cooldown) {
            uint32_t k = skim_windows(&p, end, left, &time);
            left -= k;
            n += k;
            if (k) {
                backoff = 1;
                continue;
            }
            cooldown = backoff;
            backoff = backoff < 64 ? 2 * backoff : 64;
        } else if (cooldown) {
            cooldown--;
        }
        if (left > 1 && p < end && (*p & TT_TAG_SHORT) && time <= UINT64_MAX - 0x3F) {
            time += *p & TT_TAG_SHORT_STEP;
            p++;
            left--;
            n++;
            continue;
        }
        /* the common case, two bytes: enter or exit of the same function, a short time step
         * (not the last event, whose end decode() checks) */
        if (left > 1 && end - p >= 2 && p[1] < 0x80 &&
            (p[0] == (TT_EV_ENTER | TT_TAG_FSAME) || p[0] == (TT_EV_EXIT | TT_TAG_FSAME)) &&
            time + p[1] >= time) {
            time += p[1];
            p += 2;
            left--;
            n++;
            continue;
        }
        /* one event from @q; it is committed to p, fn, time only when it is whole */
        const uint8_t *q = p;
        uint64_t dt = 0, v, len = 0; /* dt is set on every path below; gcc cannot tell */
        uint32_t efn = fn;
        uint64_t eobj = sobj, eord = sord;
        if (q >= end)
            goto bad;
        uint8_t tag = *q++;
        bool short_tag = (tag & TT_TAG_SHORT) != 0;
        tag = tt_tag_full(tag, &dt);
        uint8_t kind = tag & TT_TAG_KIND;
        if (kind == 0 || kind > tt_tag_kind_max(r->m.version))
            goto bad;
        if (short_tag)
            ; /* the step came with the tag */
        else if (TT_LIKELY(q < end && *q < 0x80))
            dt = *q++;
        else if (tt_get_varint(&q, end, &dt) != 0)
            goto bad;
        if (dt > UINT64_MAX - time)
            goto bad;
        if (!(tag & TT_TAG_FSAME)) {
            if (tt_get_varint(&q, end, &v) != 0 || v > UINT32_MAX)
                goto bad;
            efn = (uint32_t)v;
        }
        if (kind == TT_EV_ENTER || kind == TT_EV_EXIT) {
            if (tag & TT_TAG_OUT)
                goto bad;
        } else if (kind == TT_TAG_SYNC_AGAIN) {
            uint64_t site, step;
            if (tt_get_varint(&q, end, &site) != 0 || site > UINT32_MAX ||
                tt_get_varint(&q, end, &step) != 0)
                goto bad;
            eord += tt_unzigzag(step);
        } else {
            uint64_t site, arg, addr;
            if (tt_get_varint(&q, end, &site) != 0 || site > UINT32_MAX ||
                tt_get_varint(&q, end, &arg) != 0 || tt_get_varint(&q, end, &addr) != 0 ||
                tt_get_varint(&q, end, &len) != 0)
                goto bad;
            if ((tag & TT_TAG_OUT) && !tt_out_allowed(kind))
                goto bad;
            if (len > max_event || len > (uint64_t)(end - q))
                break; /* decode() reports it in its own words */
            q += len;
            if (kind == TT_EV_SYNC) {
                eobj = arg;
                eord = addr;
            }
        }
        if (left == 1 && q != end)
            break; /* bytes after the last event: decode() reports it */
        p = q;
        fn = efn;
        sobj = eobj;
        sord = eord;
        time += dt;
        payload += len;
        if (len > largest)
            largest = len;
        left--;
        n++;
        continue;
    bad:
        return tt_fail(err, TT_E_CORRUPT, 0, c->chunk_off + TT_CHUNK_HEADER + (uint64_t)(p - c->chunk),
                       "%s: malformed event at offset %" PRIu64, r->src.name,
                       c->chunk_off + TT_CHUNK_HEADER + (uint64_t)(p - c->chunk));
    }
    c->p = p;
    c->left = left;
    c->prev_time = time;
    c->prev_fn = fn;
    c->prev_obj = sobj;
    c->prev_ord = sord;
    if (n) {
        struct thread_state *t = &r->ts[c->h.thread];
        t->seq += n;
        t->last_time = time;
        r->events += n;
        r->payload += payload;
        r->largest_event = largest;
        *events += n;
    }
    return TT_OK;
}

/* Verify's pass: every remaining event of the sequential cursor, decoded and checked exactly as
 * tt_reader_next does, without the peek cache and the copies it makes for callers. Returns
 * TT_E_END, with the end-of-stream checks made, or the first error. */
int tt_reader_skim_(tt_reader *r, uint64_t *events, tt_error_info *err)
{
    struct tt_cursor *c = &r->cursors[0];
    tt_event ev;
    if (c->peeked) {
        c->peeked = false;
        tt_cursor_consume_(r, c, &c->pev);
        (*events)++;
    }
    for (;;) {
        if (TT_UNLIKELY(!c->loaded || c->left == 0)) {
            if (c->done)
                return TT_E_END;
            int rc = tt_cursor_load_(r, c, err);
            if (rc != TT_OK)
                return rc;
        }
        int rc = skim_chunk(r, c, events, err);
        if (TT_UNLIKELY(rc != TT_OK))
            return rc;
        if (c->left == 0)
            continue;
        /* the last event continues in the next chunk: the general path assembles it */
        rc = tt_cursor_decode_(r, c, &ev, err);
        if (TT_UNLIKELY(rc != TT_OK))
            return rc;
        tt_cursor_consume_(r, c, &ev);
        (*events)++;
    }
}

static tt_verify_status status_of(int code)
{
    switch (code) {
    case TT_OK: return TT_VERIFY_OK;
    case TT_E_TRUNCATED: return TT_VERIFY_TRUNCATED;
    case TT_E_CHECKSUM: return TT_VERIFY_CHECKSUM;
    case TT_E_COUNTS: return TT_VERIFY_COUNTS;
    case TT_E_FORMAT: return TT_VERIFY_BAD_MAGIC;
    case TT_E_VERSION: return TT_VERIFY_BAD_VERSION;
    case TT_E_CAPACITY:
    case TT_E_EXHAUSTED:
    case TT_E_STORAGE: return TT_VERIFY_LIMIT;
    case TT_E_INCOMPLETE: return TT_VERIFY_INCOMPLETE;
    case TT_E_IO:
    case TT_E_NOMEM: return TT_VERIFY_IO;
    default: return TT_VERIFY_CORRUPT;
    }
}

const char *tt_verify_status_name(tt_verify_status st)
{
    switch (st) {
    case TT_VERIFY_OK: return "ok";
    case TT_VERIFY_TRUNCATED: return "truncated";
    case TT_VERIFY_CHECKSUM: return "checksum";
    case TT_VERIFY_COUNTS: return "counts";
    case TT_VERIFY_BAD_MAGIC: return "bad-magic";
    case TT_VERIFY_BAD_VERSION: return "bad-version";
    case TT_VERIFY_LIMIT: return "limit";
    case TT_VERIFY_CORRUPT: return "corrupt";
    case TT_VERIFY_INCOMPLETE: return "incomplete";
    case TT_VERIFY_IO: return "io";
    }
    return "unknown";
}

static int finish(tt_verify_result *res, int code, const tt_error_info *err)
{
    res->code = code;
    res->status = status_of(code);
    if (code != TT_OK) {
        res->offset = err->offset;
        snprintf(res->message, sizeof res->message, "%s", err->message);
    } else {
        res->offset = UINT64_MAX;
        res->message[0] = '\0';
    }
    return code;
}

int tt_verify(const tt_source *src, const tt_reader_limits *lim, tt_verify_result *res)
{
    return tt_verify_ex(src, lim, 0, res);
}

int tt_verify_ex(const tt_source *src, const tt_reader_limits *lim, unsigned flags,
                 tt_verify_result *res)
{
    tt_verify_result dummy;
    tt_error_info err = { 0 };
    tt_reader_capacity cap;
    tt_manifest m;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    res->chunk = UINT64_MAX;
    err.offset = UINT64_MAX;
    int rc = tt_reader_probe(src, lim, TT_CURSORS_SEQUENTIAL, &m, &cap, &err);
    if (rc != TT_OK)
        return finish(res, rc, &err);
    void *mem = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    if (!mem) {
        tt_fail(&err, TT_E_NOMEM, 0, UINT64_MAX, "%s: cannot allocate %llu bytes for the reader",
                src->name, (unsigned long long)cap.total);
        return finish(res, TT_E_NOMEM, &err);
    }
    tt_reader *r;
    rc = tt_reader_open(src, lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &err);
    if (rc == TT_OK) {
        rc = tt_reader_skim_(r, &res->events, &err);
        if (rc == TT_E_END)
            rc = TT_OK;
        res->chunks = tt_reader_chunks_read_(r);
        if (rc != TT_OK)
            res->chunk = res->chunks;
        /* version 4: the one checkpoint table the manifest names (tt_reader_open read and
         * checked it) and no other */
        if (rc == TT_OK && tt_reader_cp_chunks_(r) != (m.checkpoints_offset != 0))
            rc = tt_fail(&err, TT_E_COUNTS, 0, TT_M_CP_OFF,
                         "%s: the data area holds %llu checkpoint tables, the manifest names %d",
                         src->name, (unsigned long long)tt_reader_cp_chunks_(r),
                         m.checkpoints_offset != 0);
        if (rc == TT_OK && m.index_offset) {
            /* version 2: the index tables (their chunks' frames and checksums were checked by
             * the pass over the data area; the directory, block lists, seek batches and summary
             * by tt_index_open; every frame row with TT_VERIFY_FRAMES), and no index chunk in
             * the data area that the directory does not list */
            tt_index *ix;
            rc = tt_index_open(r, lim, &ix, &err);
            if (rc == TT_OK) {
                if (flags & TT_VERIFY_FRAMES)
                    rc = tt_index_check(ix, &err);
                if (rc == TT_OK && tt_index_chunks_(ix) != tt_reader_index_chunks_(r))
                    rc = tt_fail(&err, TT_E_COUNTS, 0, m.index_offset,
                                 "%s: the data area holds %llu index chunks, the directory lists "
                                 "%llu", src->name,
                                 (unsigned long long)tt_reader_index_chunks_(r),
                                 (unsigned long long)tt_index_chunks_(ix));
                tt_index_close(ix);
            }
        }
        tt_reader_close(r);
    }
    res->bytes = rc == TT_OK ? m.file_size : 0;
    free(mem);
    return finish(res, rc, &err);
}
