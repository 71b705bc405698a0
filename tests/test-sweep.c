/* SPDX-License-Identifier: MIT */
/* Sweeps over a trace that holds every chunk type (events, thread table, object table, frame
 * blocks, seek batches, summary, index directory, block lists, checkpoint table): truncations at the edges and the
 * middle of every chunk's header and body, and bit flips in every header field and across every
 * body, with the checksum left stale (refused as a checksum mismatch) and resealed (the decoders
 * and the table parsers see hostile content: refused with the file and an offset, or accepted
 * with a full read that agrees on the event count), flips in the manifest, and extreme values
 * (0, 1, all ones, ±1; bytes 0x00, 0x80, 0xFF) in header fields and table bodies under a valid
 * checksum. Nothing may crash: the suite also runs under ASan and UBSan. Everything is in memory;
 * positions and bits come from fixed seeds (the recorded times, and with them a few chunk
 * sizes, differ from run to run). SWEEP_DEBUG=1 prints every damaged file that was accepted. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* the header alone, as libtrace/base/hash.c */
#include <xxhash.h>

TestSuite(sweep, .timeout = 240);

/* docs/FORMAT.md §3, §4 */
#define HDR 48u
#define M_EVENTS 192u
#define M_DATA_END 264u
#define M_FILE_SIZE 304u
#define M_EVENTS_CHECKSUM 336u
#define M_INDEX_OFFSET 368u
#define M_CHECKSUM 504u
#define NTYPES 9
#define SRC_MEMORY "<memory>"
#define SRC_CALLBACK "<callback>"

static const char *const type_name[NTYPES + 1] = {
    "?", "events", "thread table", "object table", "frame block", "seek batch", "summary",
    "index directory", "block list", "checkpoint table",
};

/* ---- little-endian fields ---- */

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned le16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- the trace: every chunk type ---- */

struct chunk {
    uint64_t off;
    uint32_t body_len;
    unsigned type;
};

struct trace {
    uint8_t *img;
    size_t len;
    struct chunk *c;
    size_t n;
    uint64_t events;
    unsigned per_type[NTYPES + 1];
};

struct worker {
    tt_session *s;
    uint32_t fns[16];
    uint64_t seed;
    int id;
};

/* A pseudo-random call tree with payloads along the way (recursion through fns[0]). */
static void walk(struct worker *w, int depth)
{
    w->seed = tt_test_mix(w->seed, (uint64_t)depth, 17);
    uint32_t fn = w->fns[w->seed % 16];
    cr_assert_eq(tt_enter(w->s, fn), TT_OK);
    uint8_t buf[96];
    size_t len = (size_t)(w->seed >> 20) % sizeof buf, got;
    tt_test_fill(buf, len, w->seed);
    switch ((w->seed >> 12) % 6) {
    case 0: cr_assert_eq(tt_user(w->s, (uint32_t)w->seed, buf, len), TT_OK); break;
    case 1: cr_assert_eq(tt_io(w->s, TT_IO_IN, 3, buf, len, &got), TT_OK); break;
    case 2: cr_assert_eq(tt_io(w->s, TT_IO_OUT, 4, buf, len, &got), TT_OK); break;
    case 3: cr_assert_eq(tt_safepoint(w->s, fn, (uint32_t)depth + 1), TT_OK); break;
    default: break;
    }
    int kids = depth >= 4 ? 0 : (int)((w->seed >> 8) % 4);
    for (int i = 0; i < kids; i++)
        walk(w, depth + 1);
    cr_assert_eq(tt_exit(w->s, fn), TT_OK);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[32];
    snprintf(name, sizeof name, "sweep-worker-%d", w->id);
    cr_assert_eq(tt_thread_name(w->s, name), TT_OK);
    for (int i = 0; i < 25; i++)
        walk(w, 0);
    cr_assert_eq(tt_session_thread_end(w->s), TT_OK);
    return NULL;
}

static uint32_t fn_id(tt_session *s, const char *fmt, int k)
{
    char name[64];
    uint32_t id;
    snprintf(name, sizeof name, fmt, k);
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, name, &id), TT_OK);
    return id;
}

static void recurse(tt_session *s, uint32_t fn, int n)
{
    cr_assert_eq(tt_enter(s, fn), TT_OK);
    if (n > 0)
        recurse(s, fn, n - 1);
    cr_assert_eq(tt_exit(s, fn), TT_OK);
}

/* The main thread: a loop of 1800 calls of one leaf (runs of repeated rows), a function with
 * 300 children, a recursion 30 deep, io in and out, a payload split over chunks (larger than a
 * buffer), user events, an allocation, a checkpoint: more than 4096 events, so its seek index
 * has two entries; several frame blocks; two more threads that walk random trees. */
static void build(struct trace *t)
{
    memset(t, 0, sizeof *t);
    tt_config cfg;
    tt_error_info err = {0};
    tt_memory_sink sink = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 64 * 4096, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BLOCK_BYTES, 4096, &err), TT_OK, "%s", err.message);
    tt_config_set_memory_sink(&cfg, &sink);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_thread_name(s, "sweep-main"), TT_OK);
    uint32_t f_main = fn_id(s, "main", 0), f_leaf = fn_id(s, "leaf", 0),
             f_wide = fn_id(s, "wide", 0), f_rec = fn_id(s, "rec", 0), kid[40];
    for (int i = 0; i < 40; i++)
        kid[i] = fn_id(s, "kid%d", i);
    static uint8_t big[5000];
    uint8_t small[40];
    size_t got;
    tt_test_fill(big, sizeof big, 4242);
    tt_test_fill(small, sizeof small, 77);

    cr_assert_eq(tt_enter(s, f_main), TT_OK);
    cr_assert_eq(tt_user(s, 1, small, 12), TT_OK);
    for (int i = 0; i < 1800; i++) {
        cr_assert_eq(tt_enter(s, f_leaf), TT_OK);
        cr_assert_eq(tt_exit(s, f_leaf), TT_OK);
    }
    cr_assert_eq(tt_enter(s, f_wide), TT_OK);
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(tt_enter(s, kid[i % 40]), TT_OK);
        cr_assert_eq(tt_safepoint(s, kid[i % 40], (uint32_t)i), TT_OK);
        cr_assert_eq(tt_exit(s, kid[i % 40]), TT_OK);
    }
    cr_assert_eq(tt_exit(s, f_wide), TT_OK);
    recurse(s, f_rec, 29);
    cr_assert_eq(tt_io(s, TT_IO_IN, 7, small, sizeof small, &got), TT_OK);
    cr_assert_eq(tt_io(s, TT_IO_OUT, 8, big, sizeof big, &got), TT_OK);
    cr_assert_eq(tt_alloc(s, 9, 1234, small), TT_OK);
    cr_assert_eq(tt_free(s, 9, small), TT_OK);
    cr_assert_eq(tt_checkpoint(s, 10), TT_OK);
    cr_assert_eq(tt_checkpoint_restore(s, NULL, 11, NULL), TT_OK); /* a restore row */
    cr_assert_eq(tt_user(s, 2, big, 1500), TT_OK);
    cr_assert_eq(tt_exit(s, f_main), TT_OK);

    struct worker w[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct worker){ .s = s, .seed = 1000u + (uint64_t)i, .id = i };
        for (int k = 0; k < 16; k++)
            w[i].fns[k] = fn_id(s, "w%d", k);
        cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
        /* one after the other: the thread ids and the file are the same in every run */
        pthread_join(th[i], NULL);
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    t->img = sink.data;
    t->len = sink.len;
    t->events = le64(t->img + M_EVENTS);

    /* every chunk, from the data area to the end of the file */
    size_t cap = 256;
    t->c = malloc(cap * sizeof *t->c);
    uint64_t off = TT_MANIFEST_SIZE;
    while (off < t->len) {
        cr_assert_leq(off + HDR, t->len);
        cr_assert_eq(le32(t->img + off), 0x4B435454u, "no chunk magic at %llu",
                     (unsigned long long)off);
        if (t->n == cap) {
            cap *= 2;
            t->c = realloc(t->c, cap * sizeof *t->c);
        }
        struct chunk *c = &t->c[t->n++];
        c->off = off;
        c->type = le16(t->img + off + 4);
        c->body_len = le32(t->img + off + 8);
        cr_assert(c->type >= 1 && c->type <= NTYPES, "type %u at %llu", c->type,
                  (unsigned long long)off);
        t->per_type[c->type]++;
        off += HDR + c->body_len;
    }
    cr_assert_eq(off, t->len, "the chunks do not tile the file");
    for (unsigned ty = 1; ty <= NTYPES; ty++)
        cr_assert_gt(t->per_type[ty], 0u, "the trace has no chunk of type %u (%s)", ty,
                     type_name[ty]);
    cr_assert_geq(t->per_type[4], 4u, "several frame blocks");
    cr_assert_gt(le64(t->img + 240), 0u, "a split payload (largest_split)");
    tt_source src;
    tt_source_memory(&src, t->img, t->len);
    tt_verify_result vr;
    cr_assert_eq(tt_verify_ex(&src, NULL, TT_VERIFY_FRAMES, &vr), TT_OK, "the intact trace: %s",
                 vr.message);
}

static void release(struct trace *t)
{
    free(t->img);
    free(t->c);
}

/* ---- one damaged image through everything that reads it ---- */

static tt_reader_limits limits(void)
{
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    lim.max_total = 64u << 20; /* a hostile manifest must not make the test allocate much */
    return lim;
}

struct outcome {
    int verify_rc;
    tt_verify_result res;
    int opened;            /* the sequential reader opened */
    int read_rc;           /* what ended its read: TT_E_END when all went well */
    uint64_t read_events;
    uint64_t manifest_events;
    int deep;
    int thr_opened, thr_rc; /* the same through per-thread cursors */
    uint64_t thr_events;
    int index_rc;          /* tt_index_open then tt_index_check, -999 when not tried */
};

struct failures {
    size_t n;
    char first[40][320];
};

static void fail_note(struct failures *f, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail_note(struct failures *f, const char *where, const char *fmt, ...)
{
    if (f->n < 40) {
        char why[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        snprintf(f->first[f->n], sizeof f->first[0], "%s: %s", where, why);
    }
    f->n++;
}

static void fail_report(const struct failures *f, const char *what, size_t tried)
{
    if (f->n == 0)
        return;
    char all[14000] = "";
    for (size_t i = 0; i < f->n && i < 40; i++) {
        strncat(all, "\n  ", sizeof all - strlen(all) - 1);
        strncat(all, f->first[i], sizeof all - strlen(all) - 1);
    }
    cr_assert_fail("%zu of %zu %s went wrong; first ones:%s", f->n, tried, what, all);
}

/* An error that a caller gets must name the source and an offset within the file (or
 * UINT64_MAX when @allow_none). A refusal over the caller's memory limits (TT_E_CAPACITY; or
 * TT_E_NOMEM, "out of memory or over max_total") is policy about a sum of sizes, not a place in
 * the file, and may name none. */
static void check_error(struct failures *f, const char *where, const char *step, int rc,
                        const tt_error_info *err, const char *name, uint64_t len, int allow_none)
{
    if (rc == TT_E_CAPACITY || rc == TT_E_NOMEM)
        allow_none = 1;
    if (!strstr(err->message, name))
        fail_note(f, where, "%s: %s without the source name: '%s'", step, tt_error_name(rc),
                  err->message);
    if (err->offset == UINT64_MAX ? !allow_none : err->offset > len)
        fail_note(f, where, "%s: %s at offset %lld (file %llu bytes): '%s'", step,
                  tt_error_name(rc), (long long)err->offset, (unsigned long long)len,
                  err->message);
}

/* Everything the index offers, on a damaged file: nothing may crash, every error names the
 * source. Returns the first error of tt_index_open / tt_index_check. */
static int exercise_index(struct failures *f, const char *where, tt_reader *r,
                          const tt_reader_limits *lim, const char *name, uint64_t len)
{
    tt_index *ix;
    tt_error_info err = {0};
    int rc = tt_index_open(r, lim, &ix, &err);
    if (rc != TT_OK) {
        if (rc != TT_E_INVAL)
            check_error(f, where, "tt_index_open", rc, &err, name, len, 0);
        return rc;
    }
    const tt_manifest *m = tt_reader_manifest(r);
    for (uint32_t t = 0; t < m->thread_count && t < 8; t++) {
        const tt_index_thread *ti = tt_index_thread_info(ix, t);
        if (!ti)
            continue;
        uint64_t probe[3] = { 0, ti->frames / 2, ti->frames - 1 };
        for (int k = 0; k < 3 && ti->frames > 0; k++) {
            tt_frame fr;
            int frc = tt_index_frame(ix, t, probe[k], &fr, &err);
            if (frc != TT_OK && frc != TT_E_INVAL)
                check_error(f, where, "tt_index_frame", frc, &err, name, len, 0);
            uint64_t parent;
            frc = tt_index_parent(ix, t, probe[k], &parent, &err);
            if (frc != TT_OK && frc != TT_E_INVAL)
                check_error(f, where, "tt_index_parent", frc, &err, name, len, 0);
        }
        tt_timepoint_entry e;
        int src = tt_index_seek_seq(ix, t, 5000, &e, &err);
        if (src != TT_OK && src != TT_E_INVAL)
            check_error(f, where, "tt_index_seek_seq", src, &err, name, len, 0);
        src = tt_index_seek_time(ix, t, 1000, &e, &err);
        if (src != TT_OK && src != TT_E_INVAL)
            check_error(f, where, "tt_index_seek_time", src, &err, name, len, 0);
    }
    for (uint32_t i = 0; i < tt_index_summary_count(ix); i++)
        cr_assert_not_null(tt_index_summary(ix, i));
    rc = tt_index_check(ix, &err);
    if (rc != TT_OK)
        check_error(f, where, "tt_index_check", rc, &err, name, len, 0);
    tt_index_close(ix);
    return rc;
}

/* A reader over @src in @mode, every cursor read to its end (every payload byte touched), and
 * for the sequential one the index when the file has one. Returns 0 when the reader did not
 * open; *@events counts what was read, *@end_rc is the first code that ended a cursor other
 * than TT_E_END (TT_E_END when all ended well). */
static int read_mode(struct failures *f, const char *where, const tt_source *src, uint64_t len,
                     tt_cursor_mode mode, int index, struct outcome *o, uint64_t *events,
                     int *end_rc)
{
    tt_reader_limits lim = limits();
    tt_reader_capacity cap;
    tt_manifest m;
    tt_error_info err = {0};
    const char *step = mode == TT_CURSORS_SEQUENTIAL ? "sequential" : "per-thread";
    int rc = tt_reader_probe(src, &lim, mode, &m, &cap, &err);
    if (rc != TT_OK) {
        check_error(f, where, step, rc, &err, src->name, len, 1);
        return 0;
    }
    cr_assert_leq(cap.total, lim.max_total);
    void *mem = aligned_alloc(64, (cap.total + 63) / 64 * 64);
    cr_assert_not_null(mem);
    tt_reader *r;
    rc = tt_reader_open(src, &lim, mode, mem, cap.total, &r, &err);
    if (rc != TT_OK) {
        check_error(f, where, step, rc, &err, src->name, len, 1);
        free(mem);
        return 0;
    }
    o->manifest_events = m.event_count;
    *events = 0;
    *end_rc = TT_E_END;
    /* the checkpoint table, which the reader checked at open: every row decodes */
    for (uint64_t n = 0; n < tt_reader_checkpoint_count(r); n++) {
        tt_checkpoint_entry ce;
        cr_assert_eq(tt_reader_checkpoint(r, n, &ce), TT_OK);
        for (uint32_t k = 0; k < ce.providers; k++)
            cr_assert_eq(tt_reader_checkpoint_provider(r, n, k, NULL, NULL), TT_OK);
    }
    for (uint32_t ep = 1; ep <= tt_reader_restore_count(r); ep++) {
        tt_restore_entry re;
        cr_assert_eq(tt_reader_restore(r, ep, &re), TT_OK);
        cr_assert_lt(re.checkpoint, tt_reader_checkpoint_count(r));
    }
    for (uint32_t cur = 0; cur < cap.cursors; cur++) {
        for (;;) {
            tt_event ev;
            rc = tt_reader_next(r, cur, &ev, &err);
            if (rc != TT_OK)
                break;
            if (ev.kind > TT_EV_KIND_MAX)
                fail_note(f, where, "%s: the reader returned kind %u", step, ev.kind);
            if (ev.payload_len > 0) {
                /* every byte, so that ASan sees a pointer out of bounds */
                volatile uint8_t sum = 0;
                for (uint64_t i = 0; i < ev.payload_len; i++)
                    sum = (uint8_t)(sum + ((const uint8_t *)ev.payload)[i]);
                (void)sum;
            }
            ++*events;
        }
        if (rc != TT_E_END) {
            check_error(f, where, step, rc, &err, src->name, len, 0);
            if (*end_rc == TT_E_END)
                *end_rc = rc;
        }
    }
    if (index && mode == TT_CURSORS_SEQUENTIAL && m.index_offset != 0)
        o->index_rc = exercise_index(f, where, r, &lim, src->name, len);
    tt_reader_close(r);
    free(mem);
    return 1;
}

/* What run_all does after tt_verify. */
#define DEEP_SEQ 1    /* a sequential reader */
#define DEEP_INDEX 2  /* and after its read, everything the index offers */
#define DEEP_THR 4    /* per-thread cursors */
#define DEEP_ALL (DEEP_SEQ | DEEP_INDEX | DEEP_THR)

/* tt_verify with every frame row checked (TT_VERIFY_FRAMES), then what @deep asks for. */
static void run_all(struct failures *f, const char *where, const tt_source *src, uint64_t len,
                    int deep, struct outcome *o)
{
    tt_reader_limits lim = limits();
    memset(o, 0, sizeof *o);
    o->index_rc = -999;
    o->res.offset = 0xdeadbeef;
    o->verify_rc = tt_verify_ex(src, &lim, TT_VERIFY_FRAMES, &o->res);
    if (o->verify_rc != TT_OK) {
        if (o->res.status == TT_VERIFY_OK || o->res.code != o->verify_rc)
            fail_note(f, where, "verify returned %s with status %s, code %d",
                      tt_error_name(o->verify_rc), tt_verify_status_name(o->res.status),
                      o->res.code);
        tt_error_info e = { .offset = o->res.offset };
        snprintf(e.message, sizeof e.message, "%s", o->res.message);
        check_error(f, where, "tt_verify", o->verify_rc, &e, src->name, len, 0);
    }
    o->deep = deep;
    if (deep & DEEP_SEQ)
        o->opened = read_mode(f, where, src, len, TT_CURSORS_SEQUENTIAL, deep & DEEP_INDEX, o,
                              &o->read_events, &o->read_rc);
    if (deep & DEEP_THR)
        o->thr_opened = read_mode(f, where, src, len, TT_CURSORS_PER_THREAD, 0, o,
                                  &o->thr_events, &o->thr_rc);
}

/* After a resealed change: refused with the source and an offset in the file, or accepted and
 * then read in full with the manifest's event count, the index opening and checking. */
static void expect_consistent(struct failures *f, const char *where, const struct outcome *o,
                              uint64_t events)
{
    if (o->verify_rc != TT_OK)
        return;
    if (!(o->deep & DEEP_SEQ))
        return;
    if (!o->opened)
        fail_note(f, where, "verify accepted, the reader does not open");
    else if (o->read_rc != TT_E_END)
        fail_note(f, where, "verify accepted, the read ends with %s after %llu events",
                  tt_error_name(o->read_rc), (unsigned long long)o->read_events);
    else if (o->read_events != o->manifest_events || o->read_events != events)
        fail_note(f, where, "verify accepted, read %llu events, manifest %llu, recorded %llu",
                  (unsigned long long)o->read_events, (unsigned long long)o->manifest_events,
                  (unsigned long long)events);
    else if ((o->deep & DEEP_THR) &&
             (!o->thr_opened || o->thr_rc != TT_E_END || o->thr_events != events))
        fail_note(f, where, "verify accepted, the per-thread cursors read %llu events (%s)",
                  (unsigned long long)o->thr_events, tt_error_name(o->thr_rc));
    else if (o->index_rc != TT_OK && o->index_rc != -999)
        fail_note(f, where, "verify accepted, the index is refused: %s",
                  tt_error_name(o->index_rc));
}

/* ---- resealing ---- */

/* The chunk checksum of the chunk at @off (FORMAT §4.2); 0 when its body_len runs past the
 * image (a flipped length: nothing to seal). */
static int reseal_chunk(uint8_t *img, size_t len, uint64_t off)
{
    uint32_t body = le32(img + off + 8);
    if (off + HDR + body > len)
        return 0;
    uint64_t seed = XXH3_64bits(img + off, 40);
    put64(img + off + 40, XXH3_64bits_withSeed(img + off + HDR, body, seed));
    return 1;
}

static void reseal_manifest(uint8_t *img)
{
    put64(img + M_CHECKSUM, XXH3_64bits(img, M_CHECKSUM));
}

/* After an event chunk changed: the events checksum chain (§9) over the chunks at the intact
 * file's offsets, and the manifest, so that verify goes on past step 46 to the index. */
static void reseal_chain(uint8_t *img, const struct trace *t)
{
    uint64_t S = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->c[i].type != 1)
            continue;
        uint8_t le[8];
        memcpy(le, img + t->c[i].off + 40, 8);
        S = XXH3_64bits_withSeed(le, 8, S);
    }
    put64(img + M_EVENTS_CHECKSUM, S);
    reseal_manifest(img);
}

/* ---- truncation ---- */

struct cut_ctx {
    const uint8_t *img;
    uint64_t avail;
};

/* A file that shrank under the reader: the size it claims stays, reads stop at @avail. */
static int cut_read(void *ctx, uint64_t offset, void *dst, size_t len, size_t *got)
{
    const struct cut_ctx *c = ctx;
    size_t n = 0;
    if (offset < c->avail)
        n = (size_t)(c->avail - offset < len ? c->avail - offset : len);
    if (n)
        memcpy(dst, c->img + offset, n);
    *got = n;
    return TT_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

Test(sweep, every_truncation_inside_every_chunk_is_refused)
{
    struct trace t;
    build(&t);
    /* lengths: inside the manifest, then for every chunk its boundary, the first, middle and
     * last byte of its header, and the first, middle and last byte of its body */
    size_t cap = 16 + 8 * t.n, n = 0;
    uint64_t *cuts = malloc(cap * sizeof *cuts);
    static const uint64_t in_manifest[] = { 0, 1, 8, 11, 12, 200, 503, 511 };
    for (size_t i = 0; i < sizeof in_manifest / sizeof *in_manifest; i++)
        cuts[n++] = in_manifest[i];
    unsigned per_type[NTYPES + 1] = {0};
    for (size_t i = 0; i < t.n; i++) {
        const struct chunk *c = &t.c[i];
        uint64_t o = c->off, b = o + HDR;
        uint64_t k[] = { o, o + 1, o + HDR / 2, o + HDR - 1, b, b + c->body_len / 2,
                         b + c->body_len - 1 };
        for (size_t j = 0; j < sizeof k / sizeof *k; j++)
            if (k[j] >= o && k[j] < b + c->body_len) {
                cuts[n++] = k[j];
                per_type[c->type]++;
            }
    }
    qsort(cuts, n, sizeof *cuts, cmp_u64);
    struct failures f = {0};
    size_t tried = 0;
    uint64_t last = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (cuts[i] == last)
            continue;
        last = cuts[i];
        char where[64];
        struct outcome o;
        /* the file is shorter than its manifest says */
        snprintf(where, sizeof where, "cut at %llu", (unsigned long long)cuts[i]);
        tt_source src;
        tt_source_memory(&src, t.img, (size_t)cuts[i]);
        run_all(&f, where, &src, cuts[i], DEEP_ALL, &o);
        if (o.verify_rc == TT_OK)
            fail_note(&f, where, "a file cut short verified OK");
        tried++;
        /* the file shrank after the size was taken: every read past the cut comes up short */
        snprintf(where, sizeof where, "shrunk to %llu", (unsigned long long)cuts[i]);
        struct cut_ctx cc = { t.img, cuts[i] };
        tt_source_callback(&src, cut_read, &cc, t.len);
        run_all(&f, where, &src, t.len, DEEP_ALL, &o);
        if (o.verify_rc == TT_OK)
            fail_note(&f, where, "a file whose reads stop early verified OK");
        tried++;
    }
    char counts[256] = "";
    for (unsigned ty = 1; ty <= NTYPES; ty++) {
        char one[48];
        snprintf(one, sizeof one, " %s %u/%u", type_name[ty], per_type[ty], t.per_type[ty]);
        strncat(counts, one, sizeof counts - strlen(counts) - 1);
    }
    cr_log_info("truncation sweep: %zu bytes, %zu chunks, %zu cuts tried (two ways each); "
                "cuts/chunks per type:%s", t.len, t.n, tried / 2, counts);
    free(cuts);
    fail_report(&f, "truncations", tried);
    release(&t);
}

/* ---- bit flips ---- */

struct field {
    const char *name;
    unsigned off, size;
};

static const struct field fields[] = {
    { "magic", 0, 4 }, { "type", 4, 2 }, { "flags", 6, 2 }, { "body_len", 8, 4 },
    { "thread", 12, 4 }, { "first_seq", 16, 8 }, { "count", 24, 4 }, { "cont_len", 28, 4 },
    { "base_time", 32, 8 }, { "checksum", 40, 8 },
};

/* Bits flipped in a field: its lowest two, one in the middle of the first byte, its highest. */
static unsigned field_bit(const struct field *fd, unsigned k)
{
    static const unsigned pick[] = { 0, 1, 5 };
    return k < 3 ? pick[k] : fd->size * 8 - 1;
}
#define BITS_PER_FIELD 4u

/* How many body positions of a chunk are flipped: every byte of the tables at the end of the
 * file (one of each, a few hundred bytes), 48 over the index chunks of the data area, 20 over
 * each event chunk. */
static unsigned body_flips(const struct chunk *c)
{
    unsigned n = c->type == 1 ? 20 : 48;
    if (c->type == 2 || c->type == 3 || c->type == 6 || c->type == 7 || c->type == 9)
        n = c->body_len <= 1024 ? c->body_len : 256;
    return n < c->body_len ? n : c->body_len;
}

/* Body position @k of @n: the first bytes (where the tables and varints begin), then a spread
 * over the body, then its last byte; the bit comes from a fixed-seed mix. */
static uint64_t body_pos(uint32_t body_len, unsigned k, unsigned n, unsigned *bit, uint64_t salt)
{
    uint64_t pos;
    if (n >= body_len)
        pos = k;
    else if (k < 4)
        pos = k;
    else if (k == n - 1)
        pos = body_len - 1;
    else
        pos = (uint64_t)body_len * (k - 3) / (n - 3);
    *bit = (unsigned)(tt_test_mix(salt, k, 31) % 8);
    return pos < body_len ? pos : body_len - 1;
}

struct tally {
    unsigned trials[NTYPES + 1];
    unsigned accepted[NTYPES + 1];
    unsigned status[TT_VERIFY_IO + 1];
};

static void tally_line(const struct tally *ta, const char *what, size_t tried)
{
    char line[900] = "";
    for (unsigned ty = 1; ty <= NTYPES; ty++) {
        char one[64];
        snprintf(one, sizeof one, " %s %u (accepted %u)", type_name[ty], ta->trials[ty],
                 ta->accepted[ty]);
        strncat(line, one, sizeof line - strlen(line) - 1);
    }
    strncat(line, "; verdicts:", sizeof line - strlen(line) - 1);
    for (unsigned st = 0; st <= TT_VERIFY_IO; st++) {
        if (!ta->status[st])
            continue;
        char one[48];
        snprintf(one, sizeof one, " %s %u", tt_verify_status_name((tt_verify_status)st),
                 ta->status[st]);
        strncat(line, one, sizeof line - strlen(line) - 1);
    }
    cr_log_info("%s: %zu flips; per chunk type:%s", what, tried, line);
}

/* One edit of chunk @ci at @pos, already described in @desc: @size bytes set to the
 * little-endian @value (@set) or xored with it; then the checksum stale (@reseal 0) or
 * resealed. */
static void edit_one(struct failures *f, struct tally *ta, const struct trace *t, uint8_t *cp,
                     size_t ci, uint64_t pos, unsigned size, int set, uint64_t value,
                     const char *desc, int reseal)
{
    const struct chunk *c = &t->c[ci];
    char where[160];
    snprintf(where, sizeof where, "%s chunk at %llu, %s (byte %llu), %s", type_name[c->type],
             (unsigned long long)c->off, desc, (unsigned long long)pos,
             reseal ? "resealed" : "stale");
    for (unsigned i = 0; i < size; i++) {
        uint8_t b = (uint8_t)(value >> (8 * i));
        cp[pos + i] = set ? b : (uint8_t)(cp[pos + i] ^ b);
    }
    int body = pos >= c->off + HDR;
    int ok = 1;
    if (reseal) {
        ok = reseal_chunk(cp, t->len, c->off);
        if (ok && c->type == 1)
            reseal_chain(cp, t);
    }
    if (ok) {
        tt_source src;
        tt_source_memory(&src, cp, t->len);
        struct outcome o;
        /* an event chunk through both kinds of cursor (verify opens the index when the
         * events pass); an index or table chunk through the sequential reader and the index */
        int deep = !reseal ? 0 : c->type == 1 ? DEEP_SEQ | DEEP_THR : DEEP_SEQ | DEEP_INDEX;
        run_all(f, where, &src, t->len, deep, &o);
        ta->trials[c->type]++;
        ta->status[o.res.status <= TT_VERIFY_IO ? o.res.status : 0]++;
        if (o.verify_rc == TT_OK)
            ta->accepted[c->type]++;
        if (o.verify_rc == TT_OK && getenv("SWEEP_DEBUG"))
            fprintf(stderr, "ACCEPTED %s\n", where);
        if (!reseal) {
            if (o.verify_rc == TT_OK)
                fail_note(f, where, "a stale checksum was accepted");
            else if ((body || pos >= c->off + 40) && o.res.status != TT_VERIFY_CHECKSUM)
                fail_note(f, where, "refused as %s, not as a checksum mismatch: %s",
                          tt_verify_status_name(o.res.status), o.res.message);
        } else {
            expect_consistent(f, where, &o, t->events);
        }
    }
    /* undo: the flip, the chunk checksum, the chain and the manifest */
    memcpy(cp + c->off, t->img + c->off, HDR + (size_t)c->body_len);
    memcpy(cp, t->img, TT_MANIFEST_SIZE);
}

static void flip_one(struct failures *f, struct tally *ta, const struct trace *t, uint8_t *cp,
                     size_t ci, uint64_t pos, unsigned bit, const char *what, int reseal)
{
    char desc[64];
    snprintf(desc, sizeof desc, "%s bit %u", what, bit);
    edit_one(f, ta, t, cp, ci, pos, 1, 0, 1u << bit, desc, reseal);
}

/* One sweep: the trace, the copy it edits (every edit undone after its check), what failed, and
 * the tally by chunk type and verdict. */
struct sweep {
    struct trace t;
    uint8_t *cp;
    struct failures f;
    struct tally ta;
    size_t tried;
    uint64_t t0;
};

static void sweep_begin(struct sweep *sw)
{
    build(&sw->t);
    sw->cp = malloc(sw->t.len);
    cr_assert_not_null(sw->cp);
    memcpy(sw->cp, sw->t.img, sw->t.len);
    sw->f = (struct failures){0};
    sw->ta = (struct tally){0};
    sw->tried = 0;
    sw->t0 = tt_test_now_ns();
}

/* Checks that every edit was undone, prints the tally and fails the test if any case failed. */
static void sweep_end(struct sweep *sw, const char *what)
{
    cr_assert_eq(memcmp(sw->cp, sw->t.img, sw->t.len), 0, "the sweep did not undo its edits");
    tally_line(&sw->ta, what, sw->tried);
    cr_log_info("%s: %.2f s", what, (double)(tt_test_now_ns() - sw->t0) / 1e9);
    free(sw->cp);
    fail_report(&sw->f, what, sw->tried);
    release(&sw->t);
}

/* Flips in the header fields and the body of every chunk whose type is in @types. */
static void flip_sweep(unsigned types, int reseal, const char *what)
{
    struct sweep sw;
    sweep_begin(&sw);
    for (size_t ci = 0; ci < sw.t.n; ci++) {
        const struct chunk *c = &sw.t.c[ci];
        if (!(types & 1u << c->type))
            continue;
        for (size_t fi = 0; fi < sizeof fields / sizeof *fields; fi++) {
            const struct field *fd = &fields[fi];
            /* a resealed checksum flip is no flip at all */
            if (reseal && fd->off == 40)
                continue;
            for (unsigned k = 0; k < BITS_PER_FIELD; k++) {
                unsigned b = field_bit(fd, k);
                flip_one(&sw.f, &sw.ta, &sw.t, sw.cp, ci, c->off + fd->off + b / 8, b % 8,
                         fd->name, reseal);
                sw.tried++;
            }
        }
        unsigned nb = body_flips(c);
        for (unsigned k = 0; k < nb && c->body_len > 0; k++) {
            unsigned bit;
            uint64_t pos = body_pos(c->body_len, k, nb, &bit, c->off);
            flip_one(&sw.f, &sw.ta, &sw.t, sw.cp, ci, c->off + HDR + pos, bit, "body", reseal);
            sw.tried++;
        }
        cr_assert_eq(memcmp(sw.cp, sw.t.img, sw.t.len), 0, "the sweep did not undo its flips");
    }
    sweep_end(&sw, what);
}

#define T_EVENTS (1u << 1)
#define T_DATA_INDEX (1u << 4 | 1u << 5 | 1u << 8)
#define T_TABLES (1u << 2 | 1u << 3 | 1u << 6 | 1u << 7 | 1u << 9)

Test(sweep, a_flip_under_a_stale_checksum_is_refused_as_a_checksum_mismatch)
{
    flip_sweep(T_EVENTS | T_DATA_INDEX | T_TABLES, 0, "stale flips");
}

Test(sweep, resealed_flips_in_event_chunks_never_crash_the_decoder)
{
    flip_sweep(T_EVENTS, 1, "resealed flips, event chunks");
}

Test(sweep, resealed_flips_in_frame_blocks_seek_batches_and_block_lists_never_crash_the_index)
{
    flip_sweep(T_DATA_INDEX, 1, "resealed flips, index chunks of the data area");
}

Test(sweep, resealed_flips_in_the_tables_never_crash_their_parsers)
{
    flip_sweep(T_TABLES, 1, "resealed flips, tables");
}

/* ---- hostile values, resealed ---- */

static uint64_t get_le(const uint8_t *p, unsigned size)
{
    uint64_t v = 0;
    for (unsigned i = size; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* Every header field but magic and checksum of every chunk set to 0, 1, its largest value, one
 * more and one less than it was, and 2^32 (u64 fields): the extremes a bit flip rarely makes. */
Test(sweep, hostile_header_values_under_a_valid_checksum_never_crash)
{
    struct sweep sw;
    sweep_begin(&sw);
    for (size_t ci = 0; ci < sw.t.n; ci++) {
        const struct chunk *c = &sw.t.c[ci];
        for (size_t fi = 1; fi + 1 < sizeof fields / sizeof *fields; fi++) {
            const struct field *fd = &fields[fi];
            uint64_t was = get_le(sw.t.img + c->off + fd->off, fd->size);
            uint64_t top = fd->size == 8 ? UINT64_MAX : (1ull << (8 * fd->size)) - 1;
            uint64_t vals[] = { 0, 1, top, (was + 1) & top, (was - 1) & top, 1ull << 32 };
            size_t nv = fd->size == 8 ? 6 : 5;
            for (size_t k = 0; k < nv; k++) {
                if (vals[k] == was)
                    continue;
                char desc[64];
                snprintf(desc, sizeof desc, "%s = %llu", fd->name, (unsigned long long)vals[k]);
                edit_one(&sw.f, &sw.ta, &sw.t, sw.cp, ci, c->off + fd->off, fd->size, 1, vals[k],
                         desc, 1);
                sw.tried++;
            }
        }
    }
    sweep_end(&sw, "hostile header values");
}

/* Body bytes of the tables and the index chunks set to 0x00, 0x80 (a varint that goes on) and
 * 0xFF: every byte of the tables at the end of the file, 64 spread over each index chunk of the
 * data area. */
Test(sweep, hostile_body_bytes_of_the_tables_and_index_never_crash)
{
    struct sweep sw;
    sweep_begin(&sw);
    static const uint8_t vals[] = { 0x00, 0x80, 0xFF };
    for (size_t ci = 0; ci < sw.t.n; ci++) {
        const struct chunk *c = &sw.t.c[ci];
        if (!((T_TABLES | T_DATA_INDEX) & 1u << c->type) || c->body_len == 0)
            continue;
        unsigned n = (T_TABLES & 1u << c->type) ? 1024 : 64;
        if (n > c->body_len)
            n = c->body_len;
        for (unsigned k = 0; k < n; k++) {
            unsigned bit;
            uint64_t pos = c->off + HDR + body_pos(c->body_len, k, n, &bit, c->off);
            for (size_t v = 0; v < sizeof vals; v++) {
                if (sw.t.img[pos] == vals[v])
                    continue;
                char desc[64];
                snprintf(desc, sizeof desc, "body byte = %#x", vals[v]);
                edit_one(&sw.f, &sw.ta, &sw.t, sw.cp, ci, pos, 1, 1, vals[v], desc, 1);
                sw.tried++;
            }
        }
    }
    sweep_end(&sw, "hostile body bytes");
}

Test(sweep, resealed_flips_in_the_manifest_are_refused_or_read_consistently)
{
    struct trace t;
    build(&t);
    uint8_t *cp = malloc(t.len);
    memcpy(cp, t.img, t.len);
    struct failures f = {0};
    size_t tried = 0, accepted = 0;
    unsigned status[TT_VERIFY_IO + 1] = {0};
    /* one bit of every byte but the checksum, plus the top bit of every u64 field */
    for (unsigned pos = 0; pos < M_CHECKSUM + 64; pos++) {
        unsigned byte, bit;
        if (pos < M_CHECKSUM) {
            byte = pos;
            bit = (unsigned)(tt_test_mix(pos, 5, 9) % 8);
        } else {
            byte = 192 + (pos - M_CHECKSUM) * 8 + 7;
            bit = 7;
            if (byte >= M_CHECKSUM)
                continue;
        }
        for (int reseal = 0; reseal < 2; reseal++) {
            char where[96];
            snprintf(where, sizeof where, "manifest byte %u bit %u, %s", byte, bit,
                     reseal ? "resealed" : "stale");
            cp[byte] ^= (uint8_t)(1u << bit);
            if (reseal)
                reseal_manifest(cp);
            tt_source src;
            tt_source_memory(&src, cp, t.len);
            struct outcome o;
            run_all(&f, where, &src, t.len, reseal ? DEEP_ALL : 0, &o);
            tried++;
            status[o.res.status <= TT_VERIFY_IO ? o.res.status : 0]++;
            if (!reseal) {
                if (o.verify_rc == TT_OK)
                    fail_note(&f, where, "a stale manifest checksum was accepted");
                else if (byte >= 16 && o.res.status != TT_VERIFY_CHECKSUM)
                    fail_note(&f, where, "refused as %s, not as a checksum mismatch: %s",
                              tt_verify_status_name(o.res.status), o.res.message);
            } else {
                accepted += o.verify_rc == TT_OK;
                expect_consistent(&f, where, &o, t.events);
            }
            memcpy(cp, t.img, TT_MANIFEST_SIZE);
        }
    }
    char line[400] = "";
    for (unsigned st = 0; st <= TT_VERIFY_IO; st++) {
        if (!status[st])
            continue;
        char one[48];
        snprintf(one, sizeof one, " %s %u", tt_verify_status_name((tt_verify_status)st),
                 status[st]);
        strncat(line, one, sizeof line - strlen(line) - 1);
    }
    cr_log_info("manifest flips: %zu (half resealed, %zu of those accepted); verdicts:%s", tried,
                accepted, line);
    free(cp);
    fail_report(&f, "manifest flips", tried);
    release(&t);
}
