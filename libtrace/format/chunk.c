/* SPDX-License-Identifier: MIT */
/* Chunks: the header codec, and the one primitive that reads a chunk and checks it.
 *
 * Every reader of the format (the bounded reader, the index, recovery, verify) reads a chunk
 * the same way: the 48-byte header from the source, decoded and checked for what needs no
 * context (magic, type, flags, continuation fields: tt_chunk_header_decode), then for where it
 * sits (its body must end inside the area the caller names, and be of the type it expects),
 * then the body, whose checksum covers the header too. The checks that need a reader's context
 * (thread count, capacity, sequence numbers) stay with the caller. Messages name the source,
 * the offset and what was wrong; the offsets in tt_error_info point at the field at fault.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

uint64_t tt_chunk_checksum(const uint8_t header[TT_CHUNK_HEADER], const void *body, size_t len)
{
    return tt_hash64(body, len, tt_hash64(header, 40, 0));
}

void tt_chunk_header_encode(uint8_t out[TT_CHUNK_HEADER], const struct tt_chunk_header *h,
                            const void *body)
{
    tt_put32(out, TT_CHUNK_MAGIC);
    tt_put16(out + 4, h->type);
    tt_put16(out + 6, h->flags);
    tt_put32(out + 8, h->body_len);
    tt_put32(out + 12, h->thread);
    tt_put64(out + 16, h->first_seq);
    tt_put32(out + 24, h->count);
    tt_put32(out + 28, h->cont_len);
    tt_put64(out + 32, h->base_time);
    tt_put64(out + 40, tt_chunk_checksum(out, body, h->body_len));
}

const char *tt_chunk_header_decode(const uint8_t in[TT_CHUNK_HEADER], struct tt_chunk_header *h)
{
    if (tt_get32(in) != TT_CHUNK_MAGIC)
        return "bad chunk magic";
    h->type = tt_get16(in + 4);
    h->flags = tt_get16(in + 6);
    h->body_len = tt_get32(in + 8);
    h->thread = tt_get32(in + 12);
    h->first_seq = tt_get64(in + 16);
    h->count = tt_get32(in + 24);
    h->cont_len = tt_get32(in + 28);
    h->base_time = tt_get64(in + 32);
    h->checksum = tt_get64(in + 40);
    if (h->type < TT_CHUNK_EVENTS || h->type > TT_CHUNK_TYPE_MAX)
        return "unknown chunk type";
    if (h->flags & ~TT_CF_MASK)
        return "unknown chunk flags";
    if (h->cont_len > h->body_len)
        return "continuation longer than the chunk body";
    if (!!(h->flags & TT_CF_CONT_IN) != (h->cont_len != 0))
        return "continuation flag and length disagree";
    if (h->type == TT_CHUNK_FRAMES || h->type == TT_CHUNK_BLOCKS) {
        /* thread, first_seq (first frame) and base_time (first row's end) are used; a block
         * list has no time, so its base_time is 0 like a table's (FORMAT §14.9) */
        if (h->flags || h->cont_len)
            return "frame block with event flags set";
        if (h->type == TT_CHUNK_BLOCKS && h->base_time)
            return "block list with a base time";
    } else if (h->type != TT_CHUNK_EVENTS &&
               (h->flags || h->thread != TT_NO_THREAD || h->cont_len || h->base_time ||
                (h->first_seq && h->type != TT_CHUNK_SEEK)))
        return "table chunk with event fields set";
    return NULL;
}

int tt_src_read(const tt_source *src, uint64_t off, void *dst, size_t len, const char *what,
                tt_error_info *err)
{
    size_t got = 0;
    if (off > src->size || len > src->size - off)
        return tt_fail(err, TT_E_TRUNCATED, 0, off > src->size ? src->size : off,
                       "%s: %s at offset %" PRIu64 " (%zu bytes) runs past the end of the file "
                       "(%" PRIu64 " bytes)", src->name, what, off, len, src->size);
    int rc = src->read(src->ctx, off, dst, len, &got);
    if (rc != TT_OK)
        return tt_fail(err, TT_E_IO, errno, off, "%s: cannot read %s at offset %" PRIu64,
                       src->name, what, off);
    if (got < len)
        return tt_fail(err, TT_E_TRUNCATED, 0, off + got, "%s: %s at offset %" PRIu64
                       " is truncated", src->name, what, off);
    return TT_OK;
}

int tt_chunk_header_check(const tt_source *src, const uint8_t raw[TT_CHUNK_HEADER], uint64_t off,
                          uint64_t area_end, uint16_t type, const char *what,
                          struct tt_chunk_header *h, tt_error_info *err)
{
    const char *nm = src->name;
    if (off > area_end || area_end - off < TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off,
                       "%s: %s at offset %" PRIu64 " runs past the end of its area (%" PRIu64 ")",
                       nm, what, off, area_end);
    const char *why = tt_chunk_header_decode(raw, h);
    if (why)
        return tt_fail(err, TT_E_CORRUPT, 0, off, "%s: %s at offset %" PRIu64 ": %s", nm, what,
                       off, why);
    if (type != 0 && h->type != type)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 4,
                       "%s: %s at offset %" PRIu64 " has chunk type %u where type %u belongs", nm,
                       what, off, h->type, type);
    if ((uint64_t)h->body_len > area_end - off - TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off + 8,
                       "%s: %s at offset %" PRIu64 " claims %u bytes, past the end of its area "
                       "(%" PRIu64 ")", nm, what, off, h->body_len, area_end);
    return TT_OK;
}

int tt_chunk_read_header(const tt_source *src, uint64_t off, uint64_t area_end, uint16_t type,
                         const char *what, struct tt_chunk_header *h,
                         uint8_t raw[TT_CHUNK_HEADER], tt_error_info *err)
{
    if (off > area_end || area_end - off < TT_CHUNK_HEADER)
        return tt_fail(err, TT_E_CORRUPT, 0, off,
                       "%s: %s at offset %" PRIu64 " runs past the end of its area (%" PRIu64 ")",
                       src->name, what, off, area_end);
    int rc = tt_src_read(src, off, raw, TT_CHUNK_HEADER, what, err);
    if (rc != TT_OK)
        return rc;
    return tt_chunk_header_check(src, raw, off, area_end, type, what, h, err);
}

int tt_chunk_body_check(const tt_source *src, const uint8_t raw[TT_CHUNK_HEADER], uint64_t off,
                        const struct tt_chunk_header *h, const void *body, const char *what,
                        tt_error_info *err)
{
    uint64_t sum = tt_chunk_checksum(raw, body, h->body_len);
    if (sum != h->checksum)
        return tt_fail(err, TT_E_CHECKSUM, 0, off,
                       "%s: %s at offset %" PRIu64 " fails its checksum (stored %016" PRIx64
                       ", computed %016" PRIx64 ")", src->name, what, off, h->checksum, sum);
    return TT_OK;
}

int tt_chunk_read_body(const tt_source *src, uint64_t off, const struct tt_chunk_header *h,
                       const uint8_t raw[TT_CHUNK_HEADER], void *dst, const char *what,
                       tt_error_info *err)
{
    int rc = tt_src_read(src, off + TT_CHUNK_HEADER, dst, h->body_len, what, err);
    if (rc != TT_OK)
        return rc;
    return tt_chunk_body_check(src, raw, off, h, dst, what, err);
}

uint64_t tt_chunk_body_max(uint64_t buffer_bytes)
{
    /* a raw long record of 48 + p bytes encodes to at most 51 + p, a short one of 16 to 16 */
    return buffer_bytes + buffer_bytes / 8 + 64;
}

/* ---------------------------------------------------------------- walking events */

const char *tt_walk_begin(struct tt_walk *w, const uint8_t *body, const struct tt_chunk_header *h,
                          unsigned kind_max, uint64_t *pending)
{
    *w = (struct tt_walk){ .p = body, .end = body + h->body_len, .h = h, .kind_max = kind_max,
                           .time = h->base_time };
    if (h->cont_len != (*pending < h->body_len ? *pending : h->body_len))
        return "its continuation does not match the thread's split payload";
    w->p += h->cont_len;
    *pending -= h->cont_len;
    return NULL;
}

const char *tt_walk_next(struct tt_walk *w, struct tt_walk_event *e, uint64_t *pending)
{
    const uint8_t *end = w->end;
    uint64_t dt, v;
    if (w->p >= end)
        return "its events run past its body";
    uint8_t raw = *w->p++, tag = tt_tag_full(raw, &dt);
    unsigned kind = tag & TT_TAG_KIND;
    if (kind == 0 || kind > w->kind_max ||
        (!(raw & TT_TAG_SHORT) && tt_get_varint(&w->p, end, &dt) != 0) || dt > UINT64_MAX - w->time)
        return "an event is malformed";
    if (!(tag & TT_TAG_FSAME)) {
        if (tt_get_varint(&w->p, end, &v) != 0 || v > UINT32_MAX)
            return "an event is malformed";
        w->fn = (uint32_t)v;
    }
    w->time += dt;
    w->i++;
    *e = (struct tt_walk_event){ .kind = kind, .fn = w->fn, .time = w->time };
    if (kind == TT_EV_ENTER || kind == TT_EV_EXIT)
        return (tag & TT_TAG_OUT) ? "an event is malformed" : NULL;
    if (kind == TT_TAG_SYNC_AGAIN) { /* site and a step, no payload (FORMAT.md §5.2) */
        uint64_t site, step;
        if (tt_get_varint(&w->p, end, &site) != 0 || site > UINT32_MAX ||
            tt_get_varint(&w->p, end, &step) != 0)
            return "an event is malformed";
        e->kind = TT_EV_SYNC;
        return NULL;
    }
    uint64_t site, arg, addr, len;
    if (tt_get_varint(&w->p, end, &site) != 0 || site > UINT32_MAX ||
        tt_get_varint(&w->p, end, &arg) != 0 || tt_get_varint(&w->p, end, &addr) != 0 ||
        tt_get_varint(&w->p, end, &len) != 0 || ((tag & TT_TAG_OUT) && !tt_out_allowed(kind)))
        return "an event is malformed";
    e->len = len;
    uint64_t avail = (uint64_t)(end - w->p);
    if (len <= avail) {
        w->p += len;
        return NULL;
    }
    if (w->i != w->h->count || !(w->h->flags & TT_CF_CONT_OUT))
        return "an event runs past its chunk";
    *pending = len - avail;
    e->split = true;
    w->p = end;
    return NULL;
}

const char *tt_walk_end(const struct tt_walk *w)
{
    return w->p != w->end ? "bytes follow its last event" : NULL;
}
