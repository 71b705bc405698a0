/* SPDX-License-Identifier: MIT */
/* The encoder: one raw buffer of one thread into one event chunk (FORMAT.md §5).
 *
 * It runs on the swapper. Each raw record becomes a tag byte, a time step and the fields its
 * kind has; an enter or exit of the function before it, within 63 ticks, is one byte. Each
 * event also feeds the index tables' step (tables.h, inline), and a loop's leaf calls go in bulk
 * (leaf_run). The encoding never grows a buffer by more than 1/16 (tt_chunk_body_max), so a
 * chunk always fits the swapper's chunk buffer.
 */
#include <stdatomic.h>
#include <string.h>

#include "record.h"
#include "tables.h"

/* One pair of a loop's leaf calls at @raw: its enter and exit are @enter_word and @exit_word
 * (kind and function as recorded) and each comes within TT_TAG_SHORT_STEP ticks of the event
 * before it, the encoder's time rules applied (time from @origin, never before *@last). Then it
 * writes the pair's two short tags at @o; *@step is the enter's step, *@dur the exit's, *@last
 * the exit's time, and it returns true; false, having changed nothing, for any other pair. */
static inline bool leaf_pair(const uint8_t *raw, uint64_t enter_word, uint64_t exit_word,
                             uint64_t origin, uint64_t *last, uint8_t *o, uint64_t *step,
                             uint64_t *dur)
{
    struct tt_raw_short e, x;
    memcpy(&e, raw, sizeof e);
    memcpy(&x, raw + sizeof e, sizeof x);
    uint64_t ew, xw;
    memcpy(&ew, &e, sizeof ew);
    memcpy(&xw, &x, sizeof xw);
    if (ew != enter_word || xw != exit_word)
        return false;
    uint64_t t1 = e.time > origin ? e.time - origin : 0;
    if (t1 < *last)
        t1 = *last;
    uint64_t t2 = x.time > origin ? x.time - origin : 0;
    if (t2 < t1)
        t2 = t1;
    if (((t1 - *last) | (t2 - t1)) > TT_TAG_SHORT_STEP)
        return false;
    *step = t1 - *last;
    *dur = t2 - t1;
    *last = t2;
    o[0] = (uint8_t)(TT_TAG_SHORT | *step);
    o[1] = (uint8_t)(TT_TAG_SHORT | TT_TAG_SHORT_EXIT | *dur);
    return true;
}

/* A loop's leaf calls, in bulk. Called after an exit whose frame row went into a run of
 * repeated leaves (tables.h, leaf_again); while the next two raw records are an enter and an
 * exit of the same function, at the same depth, each close enough to the one before for a
 * short tag, this encodes both and adds the leaf to the run, with the state in registers
 * instead of a push and a pop of the open-frame stack per call. It stops before the first pair
 * that needs anything more (another function, a long step, a full run or block, a seek entry)
 * and leaves that pair to the general path: the bytes written, event and table alike, are
 * exactly the general path's. @fn is the function of the exit just encoded, @exit_word its raw
 * record's first 8 bytes (kind and function as recorded), @last_time its time
 * (the encoder's last and previous time alike). Returns the raw bytes consumed. */
static inline size_t leaf_run(struct tt_tables *restrict tb, struct tb_thread *restrict t,
                              const uint8_t *raw, const uint8_t *end, uint8_t **op,
                              uint64_t origin, uint64_t *last_time, uint32_t fn,
                              uint64_t exit_word, uint64_t *seq)
{
    /* the next raw record first: most exits are not followed by the same leaf again (a call
     * tree's), and this one load and compare is all they pay */
    const uint64_t enter_word = exit_word - (TT_EV_EXIT - TT_EV_ENTER);
    uint64_t next_word;
    if ((size_t)(end - raw) < 2 * sizeof(struct tt_raw_short))
        return 0;
    memcpy(&next_word, raw, sizeof next_word);
    if (next_word != enter_word)
        return 0;
    const uint32_t depth = t->depth;
    if (!(t->run_at && fn == t->prev_fn && depth == t->prev_depth &&
          t->prev_chunk == tb->chunk_off && depth < t->max_depth && t->rows_cap >= 40 &&
          !tb->failed && summary_last_is(tb, fn)))
        return 0;
    uint8_t *o = *op, *const rows = t->rows;
    const uint64_t last0 = *last_time, sq = *seq;
    if (t->prev_end != last0)
        return 0; /* the last exit's row ends the run: its end is the encoder's last time */
    /* how many pairs may be taken before a limit where the general path must take over: the
     * raw records left, the run's count byte (at most TT_ROW_RUN_MAX rows), the block (a block
     * of TT_FRAME_BLOCK_ROWS rows is flushed by the general path), the room in the rows
     * buffer (a pair adds two bytes there: gap and duration, each under 64, one varint byte),
     * and the next seek entry (neither event of a pair may have a seq that is a multiple of
     * TT_SEEK_EVERY) */
    const unsigned runb0 = t->rows[t->run_at - 1];
    uint64_t nmax = (uint64_t)(end - raw) / (2 * sizeof(struct tt_raw_short));
    uint64_t lim = runb0 < (TT_ROW_RUN | TT_ROW_RUN_MAX) ? (TT_ROW_RUN | TT_ROW_RUN_MAX) - runb0 : 0;
    nmax = lim < nmax ? lim : nmax;
    lim = t->nrows + 1 < TT_FRAME_BLOCK_ROWS ? TT_FRAME_BLOCK_ROWS - 1 - t->nrows : 0;
    nmax = lim < nmax ? lim : nmax;
    lim = t->rows_len + 20 <= t->rows_cap ? (t->rows_cap - 20 - t->rows_len) / 2 + 1 : 0;
    nmax = lim < nmax ? lim : nmax;
    const uint64_t m = sq & (TT_SEEK_EVERY - 1);
    lim = m ? (TT_SEEK_EVERY - m) / 2 : 0;
    nmax = lim < nmax ? lim : nmax;
    uint8_t *rp = rows + t->rows_len;
    uint64_t last = last0, n = 0, total = 0;
    struct summary_row *const r = &tb->sum[tb->sum_last];
    uint64_t longest = r->longest, longest_at = 0;
    /* the pair's raw records are the last exit's words (enter_word above), but for the kind
     * byte: the function as an id or as an address (TT_RAW_ADDR) compares either way */
    for (; n < nmax; n++, raw += 2 * sizeof(struct tt_raw_short)) {
        uint64_t s1, dur;
        if (!leaf_pair(raw, enter_word, exit_word, origin, &last, o + 2 * n, &s1, &dur))
            break;
        rp[2 * n] = (uint8_t)s1; /* the gap from the previous row's end, which is `last` */
        rp[2 * n + 1] = (uint8_t)dur;
        if (dur > longest) {
            longest = dur;
            longest_at = n + 1; /* + 1: 0 is "no longer call" */
        }
        total += dur;
    }
    if (n == 0)
        return 0;
    const uint64_t frame0 = t->frames;
    o += 2 * n;
    rp += 2 * n;
    const uint64_t frame = frame0 + n, longest_frame = longest_at ? frame0 + longest_at : 0;
    const uint32_t nrows = t->nrows + (uint32_t)n;
    rows[t->run_at - 1] = (uint8_t)(runb0 + n);
    t->rows_len = (size_t)(rp - rows);
    t->nrows = nrows;
    t->frames = frame;
    t->prev_end = last; /* the last leaf's end */
    t->last_time = last;
    t->kinds[TT_EV_ENTER] += n;
    t->kinds[TT_EV_EXIT] += n;
    r->calls += n;
    r->total += total;
    r->self += total;
    if (longest_frame) {
        r->longest = longest;
        r->longest_thread = (uint32_t)(t - tb->threads);
        r->longest_frame = longest_frame - 1;
    }
    if (depth) {
        t->stack[depth - 1].kid_time += total;
        t->stack[depth - 1].nkids += n;
    }
    *op = o;
    *last_time = last;
    *seq = sq + 2 * n;
    return (size_t)n * 2 * sizeof(struct tt_raw_short);
}

/* leaf_run without the index tables (TT_PARAM_INDEX 0): the same pairs, two short tags each,
 * and nothing else to keep. Returns the raw bytes consumed. */
static inline size_t leaf_run_bare(const uint8_t *raw, const uint8_t *end, uint8_t **op,
                                   uint64_t origin, uint64_t *last_time, uint64_t exit_word,
                                   uint64_t *seq)
{
    const uint64_t enter_word = exit_word - (TT_EV_EXIT - TT_EV_ENTER);
    const uint64_t nmax = (uint64_t)(end - raw) / (2 * sizeof(struct tt_raw_short));
    uint8_t *o = *op;
    uint64_t last = *last_time, n = 0;
    for (; n < nmax; n++, raw += 2 * sizeof(struct tt_raw_short)) {
        uint64_t s1, dur;
        if (!leaf_pair(raw, enter_word, exit_word, origin, &last, o + 2 * n, &s1, &dur))
            break;
    }
    *op = o + 2 * n;
    *last_time = last;
    *seq += 2 * n;
    return (size_t)n * 2 * sizeof(struct tt_raw_short);
}

/* Without the index tables: the enters and exits that follow one of the same function (a
 * recursion's, as in fib; a loop's leaf), each within TT_TAG_SHORT_STEP ticks of the event
 * before it, one short tag each, with nothing else to keep. @word is the raw word (kind and
 * function as recorded) of the enter or exit just encoded: a record whose word differs from it
 * but in the kind byte names the same function in the same form. Stops before the first record
 * that needs more (another function or kind, a long step) and leaves it to the general path,
 * whose bytes these are. Returns the raw bytes consumed. */
static inline size_t same_fn_run(const uint8_t *raw, const uint8_t *end, uint8_t **op,
                                 uint64_t origin, uint64_t *last_time, uint64_t word,
                                 uint64_t *seq)
{
    const uint64_t fn_bits = word & ~(uint64_t)0xFF;
    const uint8_t *p = raw;
    uint8_t *o = *op;
    uint64_t last = *last_time;
    while ((size_t)(end - p) >= sizeof(struct tt_raw_short)) {
        struct tt_raw_short r;
        uint64_t w;
        memcpy(&r, p, sizeof r);
        memcpy(&w, p, sizeof w);
        const uint32_t k = (uint32_t)w & 0xFF;
        if ((w & ~(uint64_t)0xFF) != fn_bits || (k != TT_EV_ENTER && k != TT_EV_EXIT))
            break;
        uint64_t t = r.time > origin ? r.time - origin : 0;
        if (t < last)
            t = last;
        if (t - last > TT_TAG_SHORT_STEP)
            break;
        *o++ = (uint8_t)(TT_TAG_SHORT | (k == TT_EV_EXIT ? TT_TAG_SHORT_EXIT : 0) | (t - last));
        last = t;
        p += sizeof r;
    }
    *op = o;
    *last_time = last;
    *seq += (uint64_t)(p - raw) / sizeof(struct tt_raw_short);
    return (size_t)(p - raw);
}

/* The id of the function at address @a (below TT_RAW_ADDR_END: 48 bits), through the
 * writer's small direct-mapped cache in front of the session's resolver: the resolver's table
 * has room for every function a program may have, so with thousands of them nearly every look-up
 * was a cache miss (59% of its samples on the load of its slot, in a `many` recording); the
 * functions a buffer calls fit in 4 KiB. Ids above 16 bits, and 0 (no id), are not cached. */
static inline uint32_t fn_cached(tt_session *s, struct tt_writer *w, uint64_t a)
{
    uint64_t *slot = &w->fn_cache[(a >> 4) & (TT_FN_CACHE - 1)];
    const uint64_t e = *slot;
    if (TT_LIKELY(e >> 16 == a && e != 0))
        return (uint32_t)(e & 0xFFFF);
    tt_fn_resolver res = atomic_load_explicit(&s->fn_resolver, memory_order_acquire);
    const uint32_t id = res ? res(s, a) : 0;
    if (id != 0 && id <= 0xFFFF)
        *slot = a << 16 | id;
    return id;
}

/* The bytes of a payload that the thread's previous buffer began: copied as they are to the
 * front of the body (CONT_IN). Advances *@raw and *@o past them. */
static void encode_continuation(struct tt_rec_thread *t, struct tt_buf *b, const uint8_t **raw,
                                const uint8_t *end, uint8_t **o, struct tt_chunk_header *h)
{
    uint64_t n = t->pending < (uint64_t)(end - *raw) ? t->pending : (uint64_t)(end - *raw);
    memcpy(*o, *raw, n);
    *o += n;
    *raw += n;
    t->pending -= n;
    h->flags |= TT_CF_CONT_IN;
    h->cont_len = (uint32_t)n;
    if (t->pending == 0)
        *raw = b->data + tt_align8((uint64_t)(*raw - b->data));
}

/* The encoded body is whole: frames it, writes it, chains its checksum. */
static void encode_finish(struct tt_writer *w, struct tt_rec_thread *t, struct tt_chunk_header *h)
{
    if (h->body_len) {
        uint64_t sum = tt_writer_chunk_emit(w, h);
        uint8_t le[8];
        tt_put64(le, sum);
        w->m.events_checksum = tt_hash64(le, 8, w->m.events_checksum);
        w->m.chunk_count++;
        t->chunks++;
    }
    if (w->tables)
        tt_tables_chunk_end(w->tables, w); /* frame blocks and seek batches finished here */
}

/* One function for the whole loop, on purpose (it is over 120 lines): the per-event state lives
 * in locals the compiler keeps in registers, and a call per event, or state passed through a
 * struct, costs the swapper a load and a store per field per event (every store through @o may
 * alias the structs). The parts that run once per buffer are the helpers above. */
void tt_encode_buffer(tt_session *s, struct tt_writer *w, struct tt_buf *b)
{
    struct tt_rec_thread *t = tt_rec_of(s->threads[b->thread]);
    uint8_t *body = w->chunk + TT_CHUNK_HEADER, *o = body;
    const uint8_t *raw = b->data, *end = b->data + b->used;
    struct tt_chunk_header h = { .type = TT_CHUNK_EVENTS, .thread = t->base.id, .first_seq = t->seq };
    uint64_t origin = w->m.tick_origin;
    struct tt_tables *tb = w->tables;
    if (tb)
        tt_tables_chunk_begin(tb, w);
    if (t->pending)
        encode_continuation(t, b, &raw, end, &o, &h);
    uint64_t prev_time = 0;
    uint32_t prev_fn = 0;
    bool first = true;
    /* per-event state in locals: every store through o may alias the structs, so fields would
     * be reloaded and stored again for each event */
    uint64_t seq = t->seq, last_time = t->last_time, count = 0;
    const uint32_t tid = t->base.id; /* on the recording thread's line: read once, not per event */
    /* NULL without tables, without an index (TT_PARAM_INDEX 0: the checkpoint marks only), or
     * when there was no memory for this thread's (the index is then marked failed) */
    struct tb_thread *tbt = tb && !tb->marks_only ? tt_tables_of(tb, tid) : NULL;
    bool has_time = t->has_time, split = t->pending != 0;
    uint64_t last_addr = 0; /* the last address-form function and its id */
    uint32_t last_id = 0;
    uint64_t prev_obj = 0, prev_ord = 0; /* the chunk's previous sync event: object, addr */
    while (!split && raw + sizeof(struct tt_raw_short) <= end) {
        struct tt_raw_short sr;
        uint64_t raw_word; /* kind and function as recorded, for leaf_run */
        memcpy(&sr, raw, sizeof sr);
        memcpy(&raw_word, raw, sizeof raw_word);
        if (sr.kind & TT_RAW_ADDR) {
            /* the hooks left the function's id to us: one lookup per change of function */
            uint64_t a = (uint64_t)(sr.kind >> 16) << 32 | sr.function;
            if (a != last_addr) {
                last_id = fn_cached(s, w, a);
                last_addr = a;
            }
            if (TT_UNLIKELY(last_id == 0)) {
                /* no id (more functions than the hooks name): not recorded, as replay's hooks
                 * do not replay it */
                raw += sizeof sr;
                continue;
            }
            sr.function = last_id;
        }
        uint32_t site = 0;
        uint64_t sync_id = 0, sync_seq = 0;
        if (sr.kind & TT_RAW_SYNC) {
            if (sr.kind & TT_RAW_SYNC16) {
                /* the 16-byte form: site in the kind word, seq for the function, id for the
                 * time, which is 0 (the previous event's) */
                site = sr.kind >> TT_RAW_SYNC16_SHIFT;
                sync_seq = sr.function;
                sync_id = sr.time;
                sr.time = 0;
            } else {
                site = sr.function; /* the compact sync form: no function, its site in that word */
            }
            sr.function = 0;
        }
        uint32_t kind = sr.kind & 0xFF, dir = (sr.kind >> 8) & 1;
        uint64_t rel = sr.time > origin ? sr.time - origin : 0;
        if (has_time && rel < last_time)
            rel = last_time; /* keep each thread's time non-decreasing across cores */
        if (TT_UNLIKELY(!has_time)) {
            t->first_time = rel;
            has_time = true;
        }
        last_time = rel;
        if (first) {
            h.base_time = rel;
            prev_time = rel;
            first = false;
        }
        uint8_t tag = (uint8_t)kind | (dir ? TT_TAG_OUT : 0), *tagp = o;
        bool same = sr.function == prev_fn;
        uint64_t step = rel - prev_time;
        prev_time = rel;
        if (same && step <= TT_TAG_SHORT_STEP && (kind == TT_EV_ENTER || kind == TT_EV_EXIT)) {
            /* a loop's enter or exit: one byte */
            *o++ = (uint8_t)(TT_TAG_SHORT | (kind == TT_EV_EXIT ? TT_TAG_SHORT_EXIT : 0) | step);
        } else {
            if (same)
                tag |= TT_TAG_FSAME;
            *o++ = tag;
            o = tt_put_varint(o, step);
            if (!same)
                o = tt_put_varint(o, sr.function);
        }
        prev_fn = sr.function;
        if (tbt)
            tt_tables_event(tb, w, tbt, tid, kind, sr.function, rel, seq, (uint32_t)count);
        else if (TT_UNLIKELY(tb && (kind == TT_EV_CHECKPOINT || kind == TT_EV_RESTORE)))
            tt_tables_mark_(tb, tid, seq, rel, (uint32_t)count, kind); /* no index */
        seq++;
        count++;
        if (kind == TT_EV_ENTER || kind == TT_EV_EXIT) {
            raw += sizeof sr;
            /* without this thread's tables (TT_PARAM_INDEX 0, caller storage, no memory for
             * them) every exit may start a run */
            if (kind == TT_EV_EXIT && (!tbt || tbt->run_at)) {
                uint64_t s0 = seq;
                raw += tbt ? leaf_run(tb, tbt, raw, end, &o, origin, &last_time, sr.function,
                                      raw_word, &seq)
                           : leaf_run_bare(raw, end, &o, origin, &last_time, raw_word, &seq);
                count += seq - s0;
                prev_time = last_time;
            }
            uint64_t next = 0;
            if (kind == TT_EV_ENTER && (size_t)(end - raw) >= sizeof next)
                memcpy(&next, raw, sizeof next);
            /* a recursion's enters and exits of one function (fib, rec), one byte each; a
             * loop's leaf (its exit next) is left to leaf_run_bare, which takes pairs faster */
            if (!tbt && next != raw_word + (TT_EV_EXIT - TT_EV_ENTER)) {
                uint64_t s0 = seq;
                raw += same_fn_run(raw, end, &o, origin, &last_time, raw_word, &seq);
                count += seq - s0;
                prev_time = last_time;
            }
            continue;
        }
        if (sr.kind & TT_RAW_SYNC) {
            if (sr.kind & TT_RAW_SYNC16) {
                raw += sizeof sr;
            } else {
                struct tt_raw_sync ys;
                memcpy(&ys, raw, sizeof ys);
                raw += sizeof ys;
                sync_id = ys.arg;
                sync_seq = ys.addr;
            }
            o = tt_put_varint(o, site);
            if (sync_id == prev_obj) {
                /* the object of the sync event before: "sync again", its seq as a step */
                *tagp = (uint8_t)((*tagp & ~TT_TAG_KIND) | TT_TAG_SYNC_AGAIN);
                o = tt_put_varint(o, tt_zigzag(sync_seq - prev_ord));
            } else {
                o = tt_put_varint(o, sync_id);
                o = tt_put_varint(o, sync_seq);
                *o++ = 0; /* no payload */
                prev_obj = sync_id;
            }
            prev_ord = sync_seq;
            continue;
        }
        struct tt_raw_long lr;
        memcpy(&lr, raw, sizeof lr);
        raw += sizeof lr;
        if (kind == TT_EV_SYNC) {
            prev_obj = lr.arg; /* a sync event with a payload: the next may be "sync again" */
            prev_ord = lr.addr;
        }
        o = tt_put_varint(o, lr.site);
        o = tt_put_varint(o, lr.arg);
        o = tt_put_varint(o, lr.addr);
        o = tt_put_varint(o, lr.len);
        uint64_t have = (uint64_t)(end - raw);
        uint64_t n = lr.len < have ? lr.len : have;
        memcpy(o, raw, n);
        o += n;
        raw += n;
        w->m.payload_bytes += lr.len;
        if (lr.len > w->m.largest_event)
            w->m.largest_event = lr.len;
        if (n < lr.len) {
            t->pending = lr.len - n;
            split = true;
            h.flags |= TT_CF_CONT_OUT;
            if (lr.len > w->m.largest_split)
                w->m.largest_split = lr.len;
        } else {
            raw = b->data + tt_align8((uint64_t)(raw - b->data));
        }
    }
    t->seq = seq;
    t->last_time = last_time;
    t->has_time = has_time;
    h.count = (uint32_t)count;
    w->m.event_count += count;
    if (t->pending)
        h.flags |= TT_CF_CONT_OUT;
    h.body_len = (uint32_t)(o - body);
    encode_finish(w, t, &h);
}

