/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the table readers (thread table, object table, and any table added later).
 *
 * Input: u8 table selector, u8 control, u32 count, then the body of the selected table. The
 * target builds a finalized trace with an empty data area and every table of the format in file
 * order: the selected one from the input, the others from a small valid default. Each table gets a
 * correct chunk header and checksum, and its manifest fields (offset, length, count, and for the
 * thread table the event and chunk totals its rows claim), so the rows and entries themselves
 * reach the reader. fz_read_all then opens the trace every way and calls every accessor.
 *
 * A new table (frames, summaries, the seek index) plugs in as one more entry of `tables`: its
 * chunk type and a place() that appends its chunk and fills its manifest fields.
 *
 * Control byte: bit 0 a wrong checksum on the selected table; bit 1 leave the manifest's event
 * and chunk totals at 0 instead of the thread rows' sums. The checkpoint table's rows name events
 * of threads that have none here: its row parser's refusals are what this reaches, its rows that
 * hold come from the recorded seeds of the other targets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Default tables: one idle, unnamed thread; 64 objects of every kind, so the names of hostile
 * thread rows (object ids) resolve. */
#define DEFAULT_OBJECTS 64
static uint8_t default_objects[DEFAULT_OBJECTS * 16];
static size_t default_objects_len;

static void make_default_objects(void)
{
    size_t n = 0;
    for (unsigned i = 0; i < DEFAULT_OBJECTS; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "object-%u", i + 1);
        default_objects[n++] = (uint8_t)(1 + i % TT_OBJ_KIND_MAX);
        default_objects[n++] = (uint8_t)len;
        memcpy(default_objects + n, name, (size_t)len);
        n += (size_t)len;
    }
    default_objects_len = n;
}

struct table_input {
    const uint8_t *body;   /* NULL: the default table */
    size_t len;
    uint32_t count;
    unsigned ctl;
};

static void place_threads(struct fz_image *img, const struct table_input *in)
{
    uint8_t row[TT_THREAD_ROW];
    const uint8_t *body = in->body;
    size_t rows = in->len / TT_THREAD_ROW;
    if (!body) {
        tt_thread_entry e = { .id = 0, .os_tid = 42 };
        tt_thread_row_encode(row, &e);
        body = row;
        rows = 1;
    }
    tt_manifest *m = &img->m;
    m->thread_count = (uint32_t)rows;
    if (!(in->ctl & 2)) {
        for (size_t i = 0; i < rows; i++) {
            tt_thread_entry e;
            tt_thread_row_decode(body + i * TT_THREAD_ROW, &e);
            m->event_count += e.event_count;
            m->chunk_count += e.chunk_count;
        }
    }
    struct tt_chunk_header h = { .type = TT_CHUNK_THREADS, .thread = TT_NO_THREAD,
                                 .count = (uint32_t)rows,
                                 .body_len = (uint32_t)(rows * TT_THREAD_ROW) };
    m->threads_offset = fz_img_chunk(img, &h, body, in->body && (in->ctl & 1));
    m->threads_length = TT_CHUNK_HEADER + h.body_len;
}

static void place_objects(struct fz_image *img, const struct table_input *in)
{
    struct tt_chunk_header h = { .type = TT_CHUNK_OBJECTS, .thread = TT_NO_THREAD };
    const void *body = in->body;
    if (body) {
        h.count = in->count;
        h.body_len = (uint32_t)in->len;
    } else {
        body = default_objects;
        h.count = DEFAULT_OBJECTS;
        h.body_len = (uint32_t)default_objects_len;
    }
    img->m.object_count = h.count;
    img->m.objects_offset = fz_img_chunk(img, &h, body, in->body && (in->ctl & 1));
    img->m.objects_length = TT_CHUNK_HEADER + h.body_len;
}

/* The checkpoint table (version 4, FORMAT.md §15): in the data area, so before the others; the
 * count says how many rows are checkpoints (low 16 bits) and restores (the rest). Not selected,
 * there is none. */
static void place_checkpoints(struct fz_image *img, const struct table_input *in)
{
    if (!in->body)
        return;
    struct tt_chunk_header h = { .type = TT_CHUNK_CHECKPOINTS, .thread = TT_NO_THREAD,
                                 .body_len = (uint32_t)in->len };
    tt_manifest *m = &img->m;
    m->checkpoint_count = in->count & 0xFFFFu;
    m->restore_count = in->count >> 16;
    h.count = m->checkpoint_count + m->restore_count;
    m->checkpoints_offset = fz_img_chunk(img, &h, in->body, in->ctl & 1);
    m->checkpoints_length = TT_CHUNK_HEADER + h.body_len;
    m->data_end = img->len;
}

/* The tables, in file order. */
static const struct table_kind {
    const char *name;
    void (*place)(struct fz_image *img, const struct table_input *in);
} tables[] = {
    { "checkpoints", place_checkpoints },
    { "threads", place_threads },
    { "objects", place_objects },
};
#define NTABLES (sizeof tables / sizeof tables[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!default_objects_len)
        make_default_objects();
    struct fz_in in = { data, size };
    unsigned sel = fz_u8(&in) % NTABLES;
    unsigned ctl = fz_u8(&in);
    /* counts a little past the reader's limit of 65536 objects */
    uint32_t count = fz_u32(&in) % 70000u;
    size_t len;
    const uint8_t *body = fz_bytes(&in, 1u << 20, &len);

    struct fz_image img;
    fz_img_init(&img);
    for (unsigned i = 0; i < NTABLES; i++) {
        struct table_input ti = { NULL, 0, 0, ctl };
        if (i == sel) {
            ti.body = body;
            ti.len = len;
            ti.count = count;
        }
        tables[i].place(&img, &ti);
    }
    fz_img_finish(&img);
    fz_dump(img.buf, img.len);
    fz_read_all(img.buf, img.len);
    fz_img_free(&img);
    return 0;
}
