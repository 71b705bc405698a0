/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the chunk decoder — event chunks decoded by every reader path.
 *
 * Input: a control byte, then what the manifest and thread table need to know and cannot learn
 * from the chunks, then the event chunks themselves, each a 48-byte header and its body:
 *
 *   u8 ctl   u8 threads-1 (mod 8)   u32 largest_event   u32 largest_split   u64 payload_bytes
 *   u64 last_time × threads         { header[48] body[body_len] } …
 *
 * The target builds a finalized trace around the chunks: each chunk gets the magic, type 1, a
 * thread id below the thread count and a correct checksum (or a wrong one, for the chunk the
 * control byte names); the thread table counts each thread's chunks and the events its headers
 * claim; the manifest holds the hints above (clamped to the reader limits), the events checksum
 * and the right sizes. So the bytes of each event — tags, varints, split payloads, continuation
 * flags, sequence numbers — reach the decoder with nothing in front of them. fz_read_all then
 * reads the trace every way and checks the ways agree.
 *
 * Control byte: bit 0 gives chunk number ctl >> 4 a wrong checksum.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define MAX_THREADS 8
#define MAX_CHUNKS 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_in in = { data, size };
    tt_reader_limits lim;
    fz_limits(&lim);
    unsigned ctl = fz_u8(&in);
    uint32_t nthreads = 1 + fz_u8(&in) % MAX_THREADS;
    uint64_t largest_event = fz_u32(&in) % (lim.max_event + 1);
    uint64_t largest_split = fz_u32(&in) % (largest_event + 1);
    uint64_t payload_bytes = fz_u64(&in);
    if (payload_bytes < largest_event)
        payload_bytes = largest_event;
    tt_thread_entry rows[MAX_THREADS];
    memset(rows, 0, sizeof rows);
    for (uint32_t t = 0; t < nthreads; t++) {
        rows[t].id = t;
        rows[t].last_time = fz_u64(&in);
    }

    struct fz_image img;
    fz_img_init(&img);
    for (unsigned i = 0; in.left >= TT_CHUNK_HEADER && i < MAX_CHUNKS; i++) {
        size_t got;
        const uint8_t *raw = fz_bytes(&in, TT_CHUNK_HEADER, &got);
        struct tt_chunk_header h;
        h.type = TT_CHUNK_EVENTS;
        h.flags = tt_get16(raw + 6);
        h.body_len = tt_get32(raw + 8);
        h.thread = tt_get32(raw + 12) % nthreads;
        h.first_seq = tt_get64(raw + 16);
        h.count = tt_get32(raw + 24);
        h.cont_len = tt_get32(raw + 28);
        h.base_time = tt_get64(raw + 32);
        const uint8_t *body = fz_bytes(&in, h.body_len, &got);
        h.body_len = (uint32_t)got;
        fz_img_chunk(&img, &h, body, (ctl & 1) && (ctl >> 4) == i);
        rows[h.thread].event_count += h.count;
        rows[h.thread].chunk_count++;
        img.m.event_count += h.count;
        img.m.chunk_count++;
    }

    tt_manifest *m = &img.m;
    m->thread_count = nthreads;
    m->largest_event = largest_event;
    m->largest_split = largest_split;
    m->payload_bytes = payload_bytes;
    uint8_t table[MAX_THREADS * TT_THREAD_ROW];
    for (uint32_t t = 0; t < nthreads; t++)
        tt_thread_row_encode(table + t * TT_THREAD_ROW, &rows[t]);
    struct tt_chunk_header th = { .type = TT_CHUNK_THREADS, .thread = TT_NO_THREAD,
                                  .count = nthreads, .body_len = nthreads * TT_THREAD_ROW };
    m->threads_offset = fz_img_chunk(&img, &th, table, false);
    m->threads_length = TT_CHUNK_HEADER + th.body_len;
    struct tt_chunk_header oh = { .type = TT_CHUNK_OBJECTS, .thread = TT_NO_THREAD };
    m->objects_offset = fz_img_chunk(&img, &oh, "", false);
    m->objects_length = TT_CHUNK_HEADER;
    fz_img_finish(&img);
    fz_dump(img.buf, img.len);
    fz_read_all(img.buf, img.len);
    fz_img_free(&img);
    return 0;
}
