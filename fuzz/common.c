/* SPDX-License-Identifier: MIT */
/* Shared parts of the libFuzzer targets; see fuzz.h. */
#include "fuzz.h"

#include <tinytrace/index.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: property failed: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void fz_limits(tt_reader_limits *lim)
{
    lim->max_chunk = 1u << 20;
    lim->max_event = 1u << 20;
    lim->max_threads = 64;
    lim->max_objects = 1u << 16;
    lim->max_table = 1u << 20;
    lim->max_total = 16u << 20;
}

/* ---------------------------------------------------------------- input helpers */

uint8_t fz_u8(struct fz_in *in)
{
    if (!in->left)
        return 0;
    in->left--;
    return *in->p++;
}

uint32_t fz_u32(struct fz_in *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fz_u8(in) << (8 * i);
    return v;
}

uint64_t fz_u64(struct fz_in *in)
{
    uint64_t lo = fz_u32(in);
    return lo | (uint64_t)fz_u32(in) << 32;
}

const uint8_t *fz_bytes(struct fz_in *in, size_t want, size_t *got)
{
    const uint8_t *p = in->p;
    *got = want < in->left ? want : in->left;
    in->p += *got;
    in->left -= *got;
    return p;
}

/* ---------------------------------------------------------------- images */

void fz_img_init(struct fz_image *img)
{
    memset(img, 0, sizeof *img);
    img->cap = 4096;
    img->buf = calloc(1, img->cap);
    if (!img->buf)
        abort();
    img->len = TT_MANIFEST_SIZE;
    tt_manifest *m = &img->m;
    m->version = TT_FORMAT_VERSION;
    m->flags = TT_MF_FINALIZED;
    m->lib_version = 0x000100;
    m->block_size = 4096;
    m->ticks_per_sec = 1000000000u;
    m->data_offset = TT_MANIFEST_SIZE;
    m->data_end = TT_MANIFEST_SIZE;
}

void fz_img_append(struct fz_image *img, const void *data, size_t len)
{
    if (img->len + len > img->cap) {
        size_t cap = img->cap;
        while (cap < img->len + len)
            cap *= 2;
        uint8_t *b = realloc(img->buf, cap);
        if (!b)
            abort();
        img->buf = b;
        img->cap = cap;
    }
    if (len)
        memcpy(img->buf + img->len, data, len);
    img->len += len;
}

uint64_t fz_img_chunk(struct fz_image *img, const struct tt_chunk_header *h, const void *body,
                      bool bad_sum)
{
    uint8_t raw[TT_CHUNK_HEADER];
    tt_chunk_header_encode(raw, h, body);
    if (bad_sum)
        raw[40] ^= 1;
    uint64_t off = img->len;
    fz_img_append(img, raw, sizeof raw);
    fz_img_append(img, body, h->body_len);
    if (h->type == TT_CHUNK_EVENTS) {
        uint8_t le[8];
        memcpy(le, raw + 40, 8);
        img->m.events_checksum = tt_hash64(le, 8, img->m.events_checksum);
        img->m.data_end = img->len;
    }
    if (h->body_len > img->m.largest_chunk)
        img->m.largest_chunk = h->body_len;
    return off;
}

void fz_img_finish(struct fz_image *img)
{
    tt_manifest *m = &img->m;
    m->file_size = img->len;
    m->block_count = (m->file_size - m->data_offset + m->block_size - 1) / m->block_size;
    tt_manifest_encode(img->buf, m);
}

void fz_img_free(struct fz_image *img)
{
    free(img->buf);
    img->buf = NULL;
}

/* ---------------------------------------------------------------- fix-ups */

static void fix_chunk(uint8_t *f, size_t n, uint64_t off, unsigned keep, uint64_t *evsum,
                      uint64_t *next)
{
    *next = UINT64_MAX;
    if (off > n || n - off < TT_CHUNK_HEADER)
        return;
    uint32_t body_len = tt_get32(f + off + 8);
    if (body_len > n - off - TT_CHUNK_HEADER)
        return;
    if (!(keep & FZ_KEEP_CHUNK_SUMS))
        tt_put64(f + off + 40, tt_chunk_checksum(f + off, f + off + TT_CHUNK_HEADER, body_len));
    if (evsum) {
        *evsum = tt_hash64(f + off + 40, 8, *evsum);
    }
    *next = off + TT_CHUNK_HEADER + body_len;
}

void fz_fixup(uint8_t *f, size_t n, unsigned keep)
{
    if (n < TT_MANIFEST_SIZE)
        return;
    if (!(keep & FZ_KEEP_SIZE)) {
        tt_put64(f + TT_M_FSIZE, n);
        uint32_t bs = tt_get32(f + TT_M_BLOCK);
        if (bs >= 4096 && !(bs & (bs - 1)))
            tt_put64(f + TT_M_BLOCKS, (n - TT_MANIFEST_SIZE + bs - 1) / bs);
    }
    uint64_t data_end = tt_get64(f + TT_M_DATAEND), evsum = 0, off = TT_MANIFEST_SIZE, next;
    /* the chunks of a file that was never closed run to its end (its manifest says 512) */
    if (data_end > n || !(tt_get32(f + TT_M_FLAGS) & TT_MF_FINALIZED))
        data_end = n;
    while (off < data_end && data_end - off >= TT_CHUNK_HEADER) {
        bool events = tt_get16(f + off + 4) == TT_CHUNK_EVENTS;
        if (events && (keep & FZ_SMALL_THREADS))
            tt_put32(f + off + 12, tt_get32(f + off + 12) % 8);
        fix_chunk(f, data_end, off, keep, events ? &evsum : NULL, &next);
        if (next == UINT64_MAX)
            break;
        off = next;
    }
    fix_chunk(f, n, tt_get64(f + TT_M_THR_OFF), keep, NULL, &next);
    fix_chunk(f, n, tt_get64(f + TT_M_OBJ_OFF), keep, NULL, &next);
    if (!(keep & FZ_KEEP_EVSUM))
        tt_put64(f + TT_M_EVSUM, evsum);
    if (!(keep & FZ_KEEP_MANIFEST_SUM))
        tt_put64(f + TT_M_CHECKSUM, tt_hash64(f, TT_M_CHECKSUM, 0));
}

void fz_dump(const uint8_t *f, size_t n)
{
    const char *path = getenv("TT_FUZZ_DUMP");
    if (!path || !path[0])
        return;
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(f, 1, n, fp) != n || fclose(fp) != 0)
        fprintf(stderr, "TT_FUZZ_DUMP: cannot write %s\n", path);
}

/* ---------------------------------------------------------------- reading every way */

#define FZ_THREADS 64 /* = fz_limits().max_threads */

struct pass {
    int rc;                 /* TT_OK: the whole stream read (TT_E_END reached) */
    int index_rc;           /* then the index tables, opened and checked (TT_OK if none) */
    tt_error_info err;
    uint64_t events;
    uint64_t count[FZ_THREADS];
    uint64_t hash[FZ_THREADS];
};

static uint64_t event_hash(const tt_event *ev, uint64_t h)
{
    uint64_t f[9] = { ev->kind, ev->dir, ev->tp.thread, ev->tp.seq, ev->time, ev->sp.function,
                      ev->sp.site, ev->arg, ev->addr };
    h = tt_hash64(f, sizeof f, h);
    FZ_ASSERT(ev->payload_len == 0 || ev->payload != NULL, "payload of %llu bytes without bytes",
              (unsigned long long)ev->payload_len);
    /* reading every payload byte lets ASan check that the payload lies where it says */
    return tt_hash64(ev->payload, ev->payload_len, h ^ ev->payload_len);
}

static bool same_event(const tt_event *a, const tt_event *b)
{
    return a->kind == b->kind && a->dir == b->dir && a->tp.thread == b->tp.thread &&
           a->tp.seq == b->tp.seq && a->tp.epoch == b->tp.epoch && a->time == b->time &&
           a->sp.function == b->sp.function && a->sp.site == b->sp.site && a->arg == b->arg &&
           a->addr == b->addr && a->payload_len == b->payload_len &&
           (a->payload_len == 0 || memcmp(a->payload, b->payload, a->payload_len) == 0);
}

static void *storage(uint64_t len)
{
    void *p = NULL;
    /* the exact size, so ASan sees a read past the capacity */
    if (posix_memalign(&p, 16, len ? len : 1) != 0)
        abort();
    return p;
}

/* Every accessor of the tables, over every id and one past them. */
static void check_tables(tt_reader *r)
{
    const tt_manifest *m = tt_reader_manifest(r);
    /* the checkpoint table (checked at open): every row decodes, within the file */
    uint64_t ncp = tt_reader_checkpoint_count(r);
    FZ_ASSERT(ncp == m->checkpoint_count && tt_reader_restore_count(r) == m->restore_count,
              "checkpoint table rows %llu/%u, the manifest says %u/%u", (unsigned long long)ncp,
              tt_reader_restore_count(r), m->checkpoint_count, m->restore_count);
    for (uint64_t n = 0; n <= ncp; n++) {
        tt_checkpoint_entry ce;
        int rc = tt_reader_checkpoint(r, n, &ce);
        FZ_ASSERT((rc == TT_OK) == (n < ncp), "checkpoint %llu of %llu: %d",
                  (unsigned long long)n, (unsigned long long)ncp, rc);
        if (rc != TT_OK)
            continue;
        FZ_ASSERT(ce.tp.thread < m->thread_count && ce.chunk_offset < m->data_end &&
                      ce.tp.epoch <= m->restore_count,
                  "checkpoint %llu: thread %u chunk %llu", (unsigned long long)n, ce.tp.thread,
                  (unsigned long long)ce.chunk_offset);
        uint64_t sum = 0;
        for (uint32_t k = 0; k < ce.providers; k++) {
            uint64_t sl = 0;
            FZ_ASSERT(tt_reader_checkpoint_provider(r, n, k, NULL, &sl) == TT_OK,
                      "provider %u of checkpoint %llu", k, (unsigned long long)n);
            sum += 12 + sl;
        }
        FZ_ASSERT(sum == ce.length, "checkpoint %llu: providers of %llu bytes in %llu",
                  (unsigned long long)n, (unsigned long long)sum, (unsigned long long)ce.length);
    }
    for (uint32_t ep = 0; ep <= m->restore_count + 1 && ep < 100000; ep++) {
        tt_restore_entry re;
        int rc = tt_reader_restore(r, ep, &re);
        FZ_ASSERT((rc == TT_OK) == (ep >= 1 && ep <= m->restore_count), "restore %u: %d", ep, rc);
        if (rc == TT_OK)
            FZ_ASSERT(re.checkpoint < ncp && re.tp.thread < m->thread_count,
                      "restore %u: checkpoint %llu", ep, (unsigned long long)re.checkpoint);
    }
    for (uint32_t t = 0; t <= m->thread_count; t++) {
        const tt_thread_entry *e = tt_reader_thread(r, t);
        FZ_ASSERT((e != NULL) == (t < m->thread_count), "thread %u of %u", t, m->thread_count);
        if (e)
            FZ_ASSERT(e->id == t, "thread row %u has id %u", t, e->id);
    }
    tt_object_entry o;
    FZ_ASSERT(tt_reader_object(r, 0, &o) == TT_E_INVAL, "object 0 exists");
    FZ_ASSERT(tt_reader_object(r, m->object_count + 1, &o) == TT_E_INVAL, "object past the end");
    for (uint32_t id = 1; id <= m->object_count; id++) {
        FZ_ASSERT(tt_reader_object(r, id, &o) == TT_OK, "object %u missing", id);
        FZ_ASSERT(o.id == id && o.kind >= 1 && o.kind <= TT_OBJ_KIND_MAX && o.name_len <= 65535,
                  "object %u: id %u kind %u", id, o.id, o.kind);
        volatile uint64_t sum = tt_hash64(o.name, o.name_len, 0); /* ASan: the name is inside */
        (void)sum;
        /* lookup by name is linear: check the first objects only */
        if (id > 32 || memchr(o.name, 0, o.name_len))
            continue;
        char name[65536];
        memcpy(name, o.name, o.name_len);
        name[o.name_len] = '\0';
        uint32_t found = tt_reader_find_object(r, o.kind, name);
        tt_object_entry f;
        FZ_ASSERT(found >= 1 && found <= id && tt_reader_object(r, found, &f) == TT_OK &&
                      f.kind == o.kind && f.name_len == o.name_len &&
                      memcmp(f.name, o.name, o.name_len) == 0,
                  "find_object(%u, \"%s\") gave %u for object %u", o.kind, name, found, id);
    }
}

/* tt_reader_next/peek/advance over the sequential cursor. */
static void seq_pass(const tt_source *src, const tt_reader_limits *lim, struct pass *ps)
{
    tt_reader_capacity cap;
    memset(ps, 0, sizeof *ps);
    ps->rc = tt_reader_probe(src, lim, TT_CURSORS_SEQUENTIAL, NULL, &cap, &ps->err);
    if (ps->rc != TT_OK)
        return;
    void *mem = storage(cap.total);
    tt_reader *r;
    ps->rc = tt_reader_open(src, lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &ps->err);
    if (ps->rc == TT_OK) {
        const tt_manifest *m = tt_reader_manifest(r);
        FZ_ASSERT(m->thread_count <= FZ_THREADS, "%u threads passed the limit", m->thread_count);
        check_tables(r);
        for (uint64_t i = 0;; i++) {
            tt_event ev, ev2;
            int rc;
            if (i % 3 == 0) {
                /* peek twice, then consume what was peeked */
                rc = tt_reader_peek(r, 0, &ev, &ps->err);
                if (rc == TT_OK) {
                    FZ_ASSERT(tt_reader_peek(r, 0, &ev2, &ps->err) == TT_OK && same_event(&ev, &ev2),
                              "a second peek differs at event %llu", (unsigned long long)i);
                    tt_reader_advance(r, 0);
                }
            } else {
                rc = tt_reader_next(r, 0, &ev, &ps->err);
            }
            if (rc != TT_OK) {
                ps->rc = rc == TT_E_END ? TT_OK : rc;
                break;
            }
            uint32_t t = ev.tp.thread;
            FZ_ASSERT(t < m->thread_count && ev.tp.seq == ps->count[t],
                      "event %llu: thread %u seq %llu, expected %llu", (unsigned long long)i, t,
                      (unsigned long long)ev.tp.seq, (unsigned long long)ps->count[t]);
            FZ_ASSERT(ev.payload_len <= m->largest_event, "payload over the largest event");
            ps->hash[t] = event_hash(&ev, ps->hash[t]);
            ps->count[t]++;
            ps->events++;
        }
        if (ps->rc == TT_OK)
            FZ_ASSERT(ps->events == m->event_count, "read %llu events, the manifest says %llu",
                      (unsigned long long)ps->events, (unsigned long long)m->event_count);
        /* the index tables are verify's last step; the event stream does not need them */
        if (ps->rc == TT_OK && m->index_offset) {
            tt_index *ix;
            tt_error_info ierr;
            ps->index_rc = tt_index_open(r, lim, &ix, &ierr);
            if (ps->index_rc == TT_OK) {
                ps->index_rc = tt_index_check(ix, &ierr);
                tt_index_close(ix);
            }
            if (ps->index_rc != TT_OK)
                FZ_ASSERT(strstr(ierr.message, src->name) != NULL,
                          "an index refusal without the file name: \"%s\"", ierr.message);
        }
        tt_reader_close(r);
    }
    free(mem);
}

struct kind_match {
    uint8_t kind;
};

static bool match_kind(const tt_event *ev, void *ctx)
{
    return ev->kind == ((struct kind_match *)ctx)->kind;
}

/* Every per-thread cursor, round robin. Reader A uses tt_reader_next; reader B, in lockstep,
 * tries replay's fast paths first and must agree with A. */
static void thread_pass(const tt_source *src, const tt_reader_limits *lim, const struct pass *seq)
{
    tt_reader_capacity cap;
    tt_error_info err;
    if (tt_reader_probe(src, lim, TT_CURSORS_PER_THREAD, NULL, &cap, &err) != TT_OK)
        return;
    void *mem_a = storage(cap.total), *mem_b = storage(cap.total);
    tt_reader *a, *b;
    int rca = tt_reader_open(src, lim, TT_CURSORS_PER_THREAD, mem_a, cap.total, &a, &err);
    int rcb = tt_reader_open(src, lim, TT_CURSORS_PER_THREAD, mem_b, cap.total, &b, &err);
    FZ_ASSERT(rca == rcb, "two opens of one source gave %d and %d", rca, rcb);
    if (rca == TT_OK) {
        uint32_t n = tt_reader_manifest(a)->thread_count;
        uint64_t count[FZ_THREADS] = { 0 }, hash[FZ_THREADS] = { 0 };
        uint32_t last_fn[FZ_THREADS] = { 0 }; /* function of each cursor's last event */
        int end[FZ_THREADS];
        int expect_kind[FZ_THREADS];
        uint32_t live = n;
        for (uint32_t t = 0; t < n; t++) {
            end[t] = TT_OK;
            expect_kind[t] = -1;
        }
        for (uint64_t step = 0; live; step++) {
            for (uint32_t t = 0; t < n; t++) {
                if (end[t] != TT_OK)
                    continue;
                tt_event ev, evb;
                tt_error_info ea, eb;
                int rc = tt_reader_next(a, t, &ev, &ea);
                if (rc == TT_OK && expect_kind[t] >= 0)
                    FZ_ASSERT(ev.kind == expect_kind[t], "find_ahead said kind %d comes next on "
                              "cursor %u, it is %u", expect_kind[t], t, ev.kind);
                expect_kind[t] = -1;
                uint64_t seqno, time;
                if (rc != TT_OK && rc != TT_E_END) {
                    /* what the decoder refuses, the matcher must not take: an enter or exit
                     * of the function before (the only kind a short tag can be) */
                    FZ_ASSERT(!tt_reader_match_fn_(b, t, TT_EV_ENTER, last_fn[t], &seqno, &time) &&
                                  !tt_reader_match_fn_(b, t, TT_EV_EXIT, last_fn[t], &seqno, &time),
                              "match_fn on cursor %u takes an event next refuses (%d)", t, rc);
                }
                if (rc == TT_OK)
                    last_fn[t] = ev.sp.function;
                if (rc == TT_OK && (ev.kind == TT_EV_ENTER || ev.kind == TT_EV_EXIT) &&
                    tt_reader_match_fn_(b, t, ev.kind, ev.sp.function, &seqno, &time)) {
                    FZ_ASSERT(seqno == ev.tp.seq && time == ev.time,
                              "match_fn on cursor %u: seq %llu time %llu, next gave %llu %llu", t,
                              (unsigned long long)seqno, (unsigned long long)time,
                              (unsigned long long)ev.tp.seq, (unsigned long long)ev.time);
                } else {
                    int rc2 = tt_reader_next(b, t, &evb, &eb);
                    FZ_ASSERT(rc2 == rc, "cursor %u: next gave %d and %d", t, rc, rc2);
                    if (rc == TT_OK)
                        FZ_ASSERT(same_event(&ev, &evb), "cursor %u: two readers differ at seq %llu",
                                  t, (unsigned long long)ev.tp.seq);
                }
                if (rc != TT_OK) {
                    end[t] = rc;
                    live--;
                    continue;
                }
                FZ_ASSERT(ev.tp.thread == t && ev.tp.seq == count[t],
                          "cursor %u gave thread %u seq %llu", t, ev.tp.thread,
                          (unsigned long long)ev.tp.seq);
                hash[t] = event_hash(&ev, hash[t]);
                count[t]++;
                if ((step + t) % 5 == 0) {
                    /* counting replay's look-ahead: read-only, and right about the next event */
                    struct kind_match km = { (uint8_t)(1 + (step + t) % TT_EV_KIND_MAX) };
                    int at = tt_reader_find_ahead_(b, t, 4, match_kind, &km);
                    FZ_ASSERT(at >= -1 && at < 4, "find_ahead gave %d", at);
                    if (at == 0)
                        expect_kind[t] = km.kind;
                }
            }
        }
        if (seq->rc == TT_OK) {
            for (uint32_t t = 0; t < n; t++)
                FZ_ASSERT(end[t] == TT_E_END && count[t] == seq->count[t] &&
                              hash[t] == seq->hash[t],
                          "thread %u: the sequential pass read %llu events, its cursor %llu "
                          "(end %d)", t, (unsigned long long)seq->count[t],
                          (unsigned long long)count[t], end[t]);
        }
    }
    free(mem_a);
    free(mem_b);
}

uint8_t *fz_copy(const uint8_t *data, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        abort();
    memcpy(p, data, n);
    return p;
}

int fz_read_all(const uint8_t *image, size_t n)
{
    tt_source src;
    tt_reader_limits lim;
    fz_limits(&lim);
    uint8_t *img = fz_copy(image, n); /* exact size: ASan sees a read past the end */
    tt_source_memory(&src, img, n);

    tt_verify_result vr;
    int vrc = tt_verify_ex(&src, &lim, TT_VERIFY_FRAMES, &vr);
    FZ_ASSERT((vrc == TT_OK) == (vr.status == TT_VERIFY_OK) && vr.code == vrc,
              "verify returned %d with status %d code %d", vrc, vr.status, vr.code);
    /* a refusal names the file and an offset inside it (or none) */
    if (vrc != TT_OK)
        FZ_ASSERT(strstr(vr.message, src.name) != NULL && (vr.offset <= n || vr.offset == UINT64_MAX),
                  "verify failed (%d) at offset %llu of %zu: \"%s\"", vrc,
                  (unsigned long long)vr.offset, n, vr.message);

    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("TT_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "verify: %s (%llu events) %s\n", tt_verify_status_name(vr.status),
                (unsigned long long)vr.events, vr.message);

    static struct pass seq; /* large: not on the stack */
    seq_pass(&src, &lim, &seq);
    if (seq.rc == TT_OK && seq.index_rc != TT_OK)
        FZ_ASSERT(vrc != TT_OK, "tt_verify accepts a file whose index tables are refused (%d)",
                  seq.index_rc);
    else
        FZ_ASSERT(vrc == seq.rc, "tt_verify says %d (%s), the sequential reader %d (%s)", vrc,
                  vr.message, seq.rc, seq.err.message);
    if (vrc == TT_OK)
        FZ_ASSERT(vr.events == seq.events, "verify counted %llu events, the reader %llu",
                  (unsigned long long)vr.events, (unsigned long long)seq.events);

    thread_pass(&src, &lim, &seq);
    free(img);
    return 0;
}

static char tmp_dir[4096];

static void tmp_dir_remove(void)
{
    rmdir(tmp_dir);
}

const char *fz_tmpdir(const char *tag)
{
    if (!tmp_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_dir, sizeof tmp_dir, "%s/tinytrace-fuzz-%s-XXXXXX",
                 base && base[0] ? base : "/tmp", tag);
        if (!mkdtemp(tmp_dir))
            fz_fail(__FILE__, __LINE__, "mkdtemp", "%s: %s", tmp_dir, strerror(errno));
        atexit(tmp_dir_remove);
    }
    return tmp_dir;
}
