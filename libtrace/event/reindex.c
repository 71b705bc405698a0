/* SPDX-License-Identifier: MIT */
/* The index tables of a finished trace, built after the recording (tt_index_build, index.h).
 *
 * A recording without the tables (TT_PARAM_INDEX 0, `record --no-index`) or a recovered one has
 * its event chunks but no frame blocks, seek entries, summary or directory. This builds them from
 * the file, as the swapper would have built them while it encoded: each event chunk is copied
 * unchanged, and its events are decoded and fed, in file order, to the same per-event step
 * (tables.h, tt_tables_event) between the same chunk_begin and chunk_end. The file it writes is
 * the file a recording with the tables would have written from the same events: byte for byte,
 * when the source already had its tables (tests/test-index.c, test-index.py, test-checkpoints.py
 * check that).
 *
 * The source is untrusted. It is checked whole as a reader checks it (tt_verify) before anything
 * is written, and every chunk and event again as it is fed. What the tables hold is bounded: the
 * open frames of all threads together, the functions of the summary, the checkpoint marks
 * (at most the rows of the source's checkpoint table), and the frames an exit that is not the
 * innermost call's passes over (TT_REINDEX_*), so a hostile file gets an error that names the
 * offset, never unbounded memory or time. The checkpoint table is not rebuilt from
 * the session's notes (there is no session): its rows are carried over, each with the chunk
 * offset its event has in the new file, and checked against that event.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record.h"
#include "tables.h"
#include <tinytrace/index.h>

/* What a hostile file can make the tables hold and do: 2^21 open frames of all threads together
 * (56 bytes each: 112 MiB of stacks, which grow by doubling: at most 224 MiB), 2^19 functions in
 * the summary (64-byte rows, grown at half full: at most 2^21 rows, 128 MiB), and passes over
 * open frames by exits that are not the innermost call's (an exit without its enter passes over
 * the whole stack) of at most 64 a event plus 2^26 */
#define TT_REINDEX_MAX_OPEN (1u << 21)
#define TT_REINDEX_MAX_FUNCTIONS (1u << 19)
#define TT_REINDEX_SCAN_SLACK (UINT64_C(1) << 26)
#define TT_REINDEX_MAX_TABLE (1u << 30) /* thread, object or checkpoint table body */

struct rx {
    const tt_source *src;
    tt_error_info *err;
    int fd;
    struct tt_writer w;
    struct tt_tables *tb;
    uint8_t *chunk;           /* one whole chunk, header and body */
    size_t chunk_cap;
    uint64_t open;            /* open frames of all threads */
    uint64_t scanned;         /* open frames passed over by exits not of the innermost call */
    uint64_t fed;             /* events fed */
    uint64_t max_marks;       /* checkpoint and restore events the source's table has rows for */
    uint64_t cp_off;          /* the source's checkpoint table, 0: none */
};

static int out_cb(void *ctx, uint64_t off, const void *data, size_t len)
{
    return tt_pwrite_all(((struct rx *)ctx)->fd, off, data, len);
}

static bool room(struct rx *x, uint64_t n)
{
    if (n <= x->chunk_cap && x->chunk)
        return true;
    uint8_t *c = realloc(x->chunk, n ? n : 1);
    if (!c)
        return false;
    x->chunk = c;
    x->chunk_cap = n;
    return true;
}

/* Reads the whole chunk at @off (checked: header, checksum) into x->chunk. */
static int read_chunk(struct rx *x, uint64_t off, uint64_t area_end, uint16_t type,
                      const char *what, struct tt_chunk_header *h)
{
    uint8_t hb[TT_CHUNK_HEADER];
    int rc = tt_chunk_read_header(x->src, off, area_end, type, what, h, hb, x->err);
    if (rc != TT_OK)
        return rc;
    if (h->body_len > TT_REINDEX_MAX_TABLE)
        return tt_fail(x->err, TT_E_LIMIT, 0, off + 8, "%s: %s at offset %llu: a body of %u "
                       "bytes, more than this build reads", x->src->name, what,
                       (unsigned long long)off, h->body_len);
    if (!room(x, TT_CHUNK_HEADER + (uint64_t)h->body_len))
        return tt_fail(x->err, TT_E_NOMEM, ENOMEM, off, "out of memory");
    memcpy(x->chunk, hb, sizeof hb);
    return tt_chunk_read_body(x->src, off, h, hb, x->chunk + TT_CHUNK_HEADER, what, x->err);
}

static int bad(struct rx *x, uint64_t off, const char *why)
{
    return tt_fail(x->err, TT_E_CORRUPT, 0, off, "%s: event chunk at offset %llu: %s",
                   x->src->name, (unsigned long long)off, why);
}

/* The events of the event chunk in x->chunk (at @off in the source), fed to the tables as the
 * encoder feeds them (encoder.c): kind (a "sync again" is a sync event), function, time, seq,
 * index in the chunk. @pending: the payload bytes its thread still owes from the chunk before,
 * updated. The decoding rules are the reader's (FORMAT.md §5.2, §6). */
static int feed(struct rx *x, uint64_t off, const struct tt_chunk_header *h, uint32_t version,
                uint64_t *pending)
{
    struct tt_walk w;
    struct tt_walk_event e;
    const char *why = tt_walk_begin(&w, x->chunk + TT_CHUNK_HEADER, h,
                                    tt_tag_kind_max(version), pending);
    if (why)
        return bad(x, off, why);
    struct tt_tables *tb = x->tb;
    struct tb_thread *t = tt_tables_of(tb, h->thread);
    if (!t)
        return tt_fail(x->err, TT_E_NOMEM, ENOMEM, off, "out of memory");
    uint64_t seq = h->first_seq;
    while (w.i < h->count) {
        const uint32_t i = w.i;
        if ((why = tt_walk_next(&w, &e, pending)) != NULL)
            return bad(x, off, why);
        const uint32_t kind = e.kind, fn = e.fn;
        /* the bounds, checked before the step that could pass them */
        const uint32_t d0 = t->depth;
        if (kind == TT_EV_EXIT && d0 && t->stack[d0 - 1].fn != fn)
            x->scanned += d0; /* tables.h: the exit looks down the stack for its call */
        if (TT_UNLIKELY(x->scanned > 64 * x->fed + TT_REINDEX_SCAN_SLACK))
            return tt_fail(x->err, TT_E_LIMIT, 0, off, "%s: event chunk at offset %llu: more "
                           "exits that are not of the innermost open call than this build "
                           "passes over", x->src->name, (unsigned long long)off);
        if (TT_UNLIKELY(kind == TT_EV_ENTER && x->open >= TT_REINDEX_MAX_OPEN))
            return tt_fail(x->err, TT_E_LIMIT, 0, off, "%s: event chunk at offset %llu: more "
                           "than %u calls open at once in all threads", x->src->name,
                           (unsigned long long)off, TT_REINDEX_MAX_OPEN);
        if (TT_UNLIKELY(tb->sum_used >= TT_REINDEX_MAX_FUNCTIONS))
            return tt_fail(x->err, TT_E_LIMIT, 0, off, "%s: event chunk at offset %llu: more "
                           "than %u functions", x->src->name, (unsigned long long)off,
                           TT_REINDEX_MAX_FUNCTIONS);
        if (TT_UNLIKELY((kind == TT_EV_CHECKPOINT || kind == TT_EV_RESTORE) && x->max_marks &&
                        tb->nmarks >= x->max_marks))
            return tt_fail(x->err, TT_E_CORRUPT, 0, x->cp_off, "%s: checkpoint table at offset "
                           "%llu: fewer rows than the file's checkpoint and restore events (one "
                           "more in the event chunk at offset %llu)", x->src->name,
                           (unsigned long long)x->cp_off, (unsigned long long)off);
        tt_tables_event(tb, &x->w, t, h->thread, kind, fn, e.time, seq++, i);
        if (!x->max_marks)
            tb->nmarks = 0; /* no checkpoint table to carry over: no marks kept */
        x->open = x->open + t->depth - d0;
        x->fed++;
    }
    if ((why = tt_walk_end(&w)) != NULL)
        return bad(x, off, why);
    if (tb->failed)
        return tt_fail(x->err, TT_E_NOMEM, ENOMEM, off, "out of memory for the index tables");
    return TT_OK;
}

static int cmp_mark(const void *a, const void *b)
{
    const struct cp_mark *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool put(uint8_t **b, size_t *len, size_t *cap, uint64_t v)
{
    if (*len + 10 > *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        uint8_t *nb = realloc(*b, nc);
        if (!nb)
            return false;
        *b = nb;
        *cap = nc;
    }
    *len = (size_t)(tt_put_varint(*b + *len, v) - *b);
    return true;
}

/* The source's checkpoint table (in x->chunk, @h, at @off), its rows carried over with the
 * chunk offset each event has now (the marks the tables took), each checked against its event:
 * thread, seq, time and index in the chunk. Rows as tables.c writes them (FORMAT.md §15.2). */
static int carry_checkpoints(struct rx *x, uint64_t off, const struct tt_chunk_header *h,
                             const tt_manifest *m, tt_manifest *o)
{
    struct tt_tables *tb = x->tb;
    if (tb->nmarks)
        qsort(tb->marks, tb->nmarks, sizeof *tb->marks, cmp_mark);
    const uint8_t *p = x->chunk + TT_CHUNK_HEADER, *end = p + h->body_len;
    uint8_t *b = NULL;
    size_t len = 0, cap = 0;
    const char *why = NULL;
    uint64_t rows = (uint64_t)m->checkpoint_count + m->restore_count;
    bool *used = calloc(tb->nmarks ? tb->nmarks : 1, sizeof *used);
    if (!used)
        return tt_fail(x->err, TT_E_NOMEM, ENOMEM, off, "out of memory");
    if (h->count != rows || rows != tb->nmarks)
        why = "its rows are not the file's checkpoint and restore events";
    for (uint64_t r = 0; !why && r < rows; r++) {
        uint64_t f[8];
        unsigned nf = r < m->checkpoint_count ? 8 : 7;
        for (unsigned k = 0; k < nf && !why; k++)
            if (tt_get_varint(&p, end, &f[k]) != 0)
                why = "a row is malformed";
        if (why)
            break;
        struct cp_mark key = { .thread = f[0] > UINT32_MAX ? UINT32_MAX : (uint32_t)f[0],
                               .seq = f[1] };
        const struct cp_mark *mk = tb->nmarks ? bsearch(&key, tb->marks, tb->nmarks,
                                                        sizeof key, cmp_mark) : NULL;
        const uint32_t want = r < m->checkpoint_count ? TT_EV_CHECKPOINT : TT_EV_RESTORE;
        if (!mk || mk->time != f[2] || mk->index != f[4] || mk->kind != want ||
            used[mk - tb->marks]) {
            why = "a row does not match its event";
            break;
        }
        used[mk - tb->marks] = true;
        if (nf == 8 && f[7] > (uint64_t)(end - p)) { /* a provider is 2 varints, 1 byte each */
            why = "a row is malformed";
            break;
        }
        f[3] = mk->chunk_off;
        bool ok = true;
        for (unsigned k = 0; k < nf && ok; k++)
            ok = put(&b, &len, &cap, f[k]);
        /* a checkpoint's providers: (id, size) pairs */
        for (uint64_t k = 0; ok && nf == 8 && k < 2 * f[7] && !why; k++) {
            uint64_t v;
            if (tt_get_varint(&p, end, &v) != 0)
                why = "a row is malformed";
            else
                ok = put(&b, &len, &cap, v);
        }
        if (!ok) {
            free(b);
            free(used);
            return tt_fail(x->err, TT_E_NOMEM, ENOMEM, off, "out of memory");
        }
    }
    free(used);
    if (!why && p != end)
        why = "bytes follow its last row";
    if (why) {
        free(b);
        return tt_fail(x->err, TT_E_CORRUPT, 0, off, "%s: checkpoint table at offset %llu: %s",
                       x->src->name, (unsigned long long)off, why);
    }
    struct tt_chunk_header ch = { .type = TT_CHUNK_CHECKPOINTS, .thread = TT_NO_THREAD,
                                  .count = (uint32_t)rows, .body_len = (uint32_t)len };
    o->checkpoints_offset = tt_writer_tail_(&x->w);
    tt_writer_put_chunk_(&x->w, &ch, b);
    if (len > o->largest_chunk)
        o->largest_chunk = len;
    o->checkpoints_length = TT_CHUNK_HEADER + len;
    o->checkpoint_count = m->checkpoint_count;
    o->restore_count = m->restore_count;
    free(b);
    return TT_OK;
}

static int read_manifest(const tt_source *src, tt_manifest *m, tt_error_info *err)
{
    uint8_t mb[TT_MANIFEST_SIZE];
    size_t got = 0;
    if (src->size < TT_MANIFEST_SIZE)
        return tt_fail(err, TT_E_TRUNCATED, 0, 0, "%s: shorter than a manifest (%llu bytes)",
                       src->name, (unsigned long long)src->size);
    if (src->read(src->ctx, 0, mb, sizeof mb, &got) != TT_OK || got != sizeof mb)
        return tt_fail(err, TT_E_IO, 0, 0, "%s: the manifest cannot be read", src->name);
    int rc = tt_manifest_decode(mb, src->size, m, err);
    if (rc != TT_OK) {
        /* the decoder does not know the file's name; the reader adds it too (reader.c) */
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return tt_fail(err, rc, err->sys_errno, err->offset, "%s: %s", src->name, why);
    }
    if (!(m->flags & TT_MF_FINALIZED) || (m->flags & TT_MF_INCOMPLETE))
        return tt_fail(err, TT_E_INVAL, 0, TT_M_FLAGS, "%s: the recording was not closed "
                       "whole; `tinytrace recover` makes a trace of what it holds first",
                       src->name);
    if (m->thread_count > (1u << 16))
        return tt_fail(err, TT_E_LIMIT, 0, TT_M_THREADS, "%s: %u threads, more than this build "
                       "indexes", src->name, m->thread_count);
    return TT_OK;
}

/* The data area: event chunks copied and fed, the old index chunks passed over, the checkpoint
 * table carried over after the tables' last blocks, as a recording places it. */
static int data_area(struct rx *x, const tt_manifest *m, tt_manifest *o, uint64_t *pending,
                     uint64_t *next_seq, tt_index_build_result *res)
{
    uint64_t cp_off = 0, off = m->data_offset;
    while (off < m->data_end) {
        struct tt_chunk_header h;
        int rc = read_chunk(x, off, m->data_end, 0, "chunk", &h);
        if (rc != TT_OK)
            return rc;
        uint64_t n = TT_CHUNK_HEADER + (uint64_t)h.body_len;
        if (h.type == TT_CHUNK_CHECKPOINTS) {
            cp_off = off;
        } else if (h.type == TT_CHUNK_EVENTS) {
            if (h.thread >= m->thread_count)
                return bad(x, off, "its thread is not in the thread table");
            if (h.first_seq != next_seq[h.thread])
                return bad(x, off, "it does not continue its thread's sequence");
            tt_tables_chunk_begin(x->tb, &x->w);
            rc = feed(x, off, &h, m->version, &pending[h.thread]);
            if (rc != TT_OK)
                return rc;
            next_seq[h.thread] = h.first_seq + h.count;
            uint8_t le[8];
            tt_put64(le, h.checksum);
            o->events_checksum = tt_hash64(le, 8, o->events_checksum);
            o->chunk_count++;
            tt_writer_put_raw_(&x->w, x->chunk, n);
            tt_tables_chunk_end(x->tb, &x->w);
            res->events += h.count;
        } else if (h.type != TT_CHUNK_FRAMES && h.type != TT_CHUNK_SEEK &&
                   h.type != TT_CHUNK_BLOCKS) {
            return tt_fail(x->err, TT_E_CORRUPT, 0, off, "%s: chunk at offset %llu: type %u has "
                           "no place in the data area", x->src->name, (unsigned long long)off,
                           h.type);
        }
        off += n;
        if (x->w.write_errno)
            return TT_OK;
    }
    if (o->chunk_count != m->chunk_count || res->events != m->event_count ||
        o->events_checksum != m->events_checksum)
        return tt_fail(x->err, TT_E_CORRUPT, 0, TT_M_EVSUM, "%s: the event chunks are "
                       "not the ones the manifest counts (chunks, events or events checksum)",
                       x->src->name);
    for (uint32_t i = 0; i < m->thread_count; i++)
        if (pending[i])
            return tt_fail(x->err, TT_E_CORRUPT, 0, m->data_end, "%s: thread %u's last payload "
                           "is not whole", x->src->name, i);
    tt_tables_finish(x->tb, &x->w); /* tb->s is NULL: no checkpoint table of its own */
    if (cp_off) {
        struct tt_chunk_header h;
        int rc = read_chunk(x, cp_off, m->data_end, TT_CHUNK_CHECKPOINTS, "checkpoint table", &h);
        if (rc == TT_OK)
            rc = carry_checkpoints(x, cp_off, &h, m, o);
        if (rc != TT_OK)
            return rc;
    } else {
        /* the recording had no table (its notes were lost): neither has this file */
        o->checkpoint_count = o->restore_count = 0;
    }
    return TT_OK;
}

/* The thread and object tables, copied as they are. */
static int copy_table(struct rx *x, uint64_t off, uint64_t len, uint16_t type, const char *what,
                      uint64_t *new_off)
{
    struct tt_chunk_header h;
    int rc = read_chunk(x, off, off + len, type, what, &h);
    if (rc != TT_OK)
        return rc;
    *new_off = tt_writer_tail_(&x->w);
    tt_writer_put_raw_(&x->w, x->chunk, TT_CHUNK_HEADER + (uint64_t)h.body_len);
    return TT_OK;
}

int tt_index_build(const tt_source *src, const char *out_path, unsigned flags,
                   tt_index_build_result *res, tt_error_info *err)
{
    tt_index_build_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    tt_manifest m;
    int rc = read_manifest(src, &m, err);
    if (rc != TT_OK)
        return rc;
    /* The whole source as a reader checks it (tt_verify) before anything is written: the event
     * chunks and the thread, object and checkpoint tables go into the new file as they are, so
     * whatever a reader refuses in them (a thread row, the manifest's payload counts, a chunk
     * going back in time, a checkpoint row) is refused here, at the source's offset, not
     * found later in the file this wrote. The pass below checks again what it feeds to the
     * tables, and the checksums what it copies. */
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    tt_verify_result vr;
    rc = tt_verify(src, &lim, &vr);
    if (rc != TT_OK)
        return tt_fail(err, rc, 0, vr.offset, "%s", vr.message);
    char tmp[4200];
    if (tt_partial_name(out_path, (long)getpid(), tmp, sizeof tmp) != TT_OK)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the output path is too long for its "
                       "temporary name (%zu bytes): %s", strlen(out_path), out_path);
    struct rx x = { .src = src, .err = err, .fd = -1,
                    .max_marks = m.checkpoints_offset ? (uint64_t)m.checkpoint_count +
                                                        m.restore_count : 0,
                    .cp_off = m.checkpoints_offset };
    /* per thread: the payload bytes owed to its next chunk, and that chunk's first seq */
    uint64_t *pending = calloc(2 * (size_t)(m.thread_count ? m.thread_count : 1), sizeof *pending);
    uint64_t *next_seq = pending ? pending + (m.thread_count ? m.thread_count : 1) : NULL;
    x.tb = calloc(1, sizeof *x.tb);
    x.w.block_size = m.block_size >= 4096 && m.block_size <= (1u << 24) ? m.block_size : 32768;
    x.w.block = malloc(x.w.block_size);
    if (!pending || !x.tb || !x.w.block) {
        rc = tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
        goto out;
    }
    x.fd = tt_partial_create(tmp);
    if (x.fd < 0) {
        int e = errno;
        rc = tt_fail(err, TT_E_IO, e, UINT64_MAX, "cannot create %s: %s", tmp, strerror(e));
        goto out;
    }
    x.w.cb = out_cb;
    x.w.cb_ctx = &x;
    x.w.file_off = TT_MANIFEST_SIZE;
    tt_manifest o = m;
    o.version = TT_FORMAT_VERSION;
    o.data_offset = TT_MANIFEST_SIZE;
    o.largest_chunk = 0;
    o.chunk_count = 0;
    o.events_checksum = 0;
    o.index_offset = o.index_length = 0;
    o.checkpoints_offset = o.checkpoints_length = 0;
    x.w.m = o; /* the tables set the index's and the checkpoint table's fields here */
    rc = data_area(&x, &m, &x.w.m, pending, next_seq, res);
    if (rc == TT_OK && !x.w.write_errno) {
        x.w.m.data_end = tt_writer_tail_(&x.w);
        rc = copy_table(&x, m.threads_offset, m.threads_length, TT_CHUNK_THREADS, "thread table",
                        &x.w.m.threads_offset);
    }
    if (rc == TT_OK && !x.w.write_errno)
        rc = copy_table(&x, m.objects_offset, m.objects_length, TT_CHUNK_OBJECTS, "object table",
                        &x.w.m.objects_offset);
    if (rc == TT_OK && !x.w.write_errno) {
        tt_tables_write_tail(x.tb, &x.w, m.thread_count);
        if (x.tb->failed)
            rc = tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory for the index tables");
    }
    if (rc == TT_OK && !x.w.write_errno) {
        tt_writer_block_flush(&x.w);
        tt_manifest *f = &x.w.m;
        f->file_size = x.w.file_off;
        /* in the manifest's unit, which may be larger than the writer's (capped) buffer */
        f->block_count = (f->file_size - f->data_offset + f->block_size - 1) / f->block_size;
        uint8_t mb[TT_MANIFEST_SIZE];
        tt_manifest_encode(mb, f);
        int e = out_cb(&x, 0, mb, sizeof mb);
        if (!e && !(flags & TT_INDEX_BUILD_NO_SYNC) && fdatasync(x.fd) != 0)
            e = errno;
        if (e && !x.w.write_errno)
            x.w.write_errno = e;
    }
    if (rc == TT_OK && x.w.write_errno)
        rc = tt_fail(err, TT_E_IO, x.w.write_errno, UINT64_MAX, "writing %s: %s", tmp,
                     strerror(x.w.write_errno));
    res->frames = 0;
    for (uint32_t i = 0; i < x.tb->nthreads; i++)
        res->frames += x.tb->threads[i].frames;
    res->bytes_in = src->size;
    res->bytes_out = x.w.file_off;
out:
    if (x.fd >= 0) {
        if (close(x.fd) != 0 && rc == TT_OK)
            rc = tt_fail(err, TT_E_IO, errno, UINT64_MAX, "closing %s: %s", tmp, strerror(errno));
        if (rc == TT_OK && rename(tmp, out_path) != 0)
            rc = tt_fail(err, TT_E_IO, errno, UINT64_MAX, "cannot rename %s to %s: %s", tmp,
                         out_path, strerror(errno));
        if (rc != TT_OK)
            unlink(tmp);
    }
    tt_tables_free(x.tb);
    free(x.w.block);
    free(x.chunk);
    free(pending);
    return rc;
}
