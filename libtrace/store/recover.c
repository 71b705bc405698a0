/* SPDX-License-Identifier: MIT */
/* Recovery: a valid trace from the temporary file of a run that died.
 *
 * A recording's "<file>.<pid>.partial" holds a provisional manifest and, after it, the chunks the
 * swapper wrote before the process died, the last one possibly cut. Recovery walks the chunks
 * from offset 512 and keeps each one that is whole: header sane, body inside the file, checksum
 * right, and continuing its thread's stream (sequence numbers, split payloads). It stops at the
 * first chunk that is not, which is where the damage began. A thread whose last kept event is a
 * payload split over chunks that did not all arrive loses that chunk and its continuations (a
 * reader could not give the event whole). The kept chunks are copied unchanged into a new file
 * with a thread table rebuilt from them, an empty object table (names are written only at close,
 * so a dead run's names are lost), and a final manifest flagged RECOVERED.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"

#define MAX_THREADS 65536u
#define MAX_BODY (1u << 30)

struct kept {
    uint64_t off;          /* in the source */
    uint32_t body_len;
    uint32_t thread;
    uint32_t count;
    uint64_t checksum;
    uint64_t payload;      /* payload bytes of the events that start here */
    uint64_t largest;
    uint64_t largest_split;
    uint64_t first_time, last_time;
    bool split_out;        /* its last event goes on in the next chunk of the thread */
};

struct rthread {
    uint64_t seq, pending;
    uint64_t last_time;    /* of the thread's last kept event */
    int64_t split_chunk;   /* index in kept[] of the chunk whose last event is still pending */
};

/* Walks the events of one chunk body; fills the per-chunk figures. Returns NULL or what is
 * wrong. @pending: continuation bytes the thread still owes before this chunk's events. */
static const char *walk(const uint8_t *body, const struct tt_chunk_header *h, struct kept *k,
                        uint64_t *pending)
{
    struct tt_walk w;
    struct tt_walk_event e;
    /* every kind of the version recovery writes */
    const char *why = tt_walk_begin(&w, body, h, tt_tag_kind_max(TT_FORMAT_VERSION), pending);
    if (why)
        return why;
    if (*pending && (h->count || !(h->flags & TT_CF_CONT_OUT)))
        return "it ends a split payload too early";
    /* the reader's rules (reader.c load_next, decode), so that every chunk kept is one it reads */
    if (!*pending && !h->count && !h->cont_len && !(h->flags & TT_CF_CONT_OUT))
        return "it is empty";
    k->first_time = h->base_time;
    while (w.i < h->count) {
        if ((why = tt_walk_next(&w, &e, pending)) != NULL)
            return why;
        if (w.i == 1)
            k->first_time = e.time;
        k->payload += e.len;
        if (e.len > k->largest)
            k->largest = e.len;
        if (e.split) {
            k->split_out = true;
            if (e.len > k->largest_split)
                k->largest_split = e.len;
        }
    }
    if ((why = tt_walk_end(&w)) != NULL)
        return why;
    if (!k->split_out && (h->flags & TT_CF_CONT_OUT) && !*pending)
        return "it says its last payload continues, but it does not";
    k->last_time = w.time;
    return NULL;
}


/* What pass 1 found: the chunks to keep, and each thread's state after the last of them. */
struct scan {
    struct kept *kept;
    size_t nkept, capk;
    struct rthread *th;
    uint32_t nthreads;
    uint8_t *body;         /* one chunk's body, or the whole chunk in pass 2 */
    size_t body_cap;
    tt_error_info why;     /* where and why pass 1 stopped */
};

static bool body_room(struct scan *sc, size_t n)
{
    if (n <= sc->body_cap && sc->body)
        return true;
    /* never NULL, even for an empty body: walk() does pointer arithmetic on it */
    uint8_t *nb = realloc(sc->body, n ? n : 1);
    if (!nb)
        return false;
    sc->body = nb;
    sc->body_cap = n;
    return true;
}

static void scan_free(struct scan *sc)
{
    free(sc->body);
    free(sc->kept);
    free(sc->th);
}

/* Stops the scan at @off: @msg says why (a static string, or the primitive's message). */
static void stop(struct scan *sc, uint64_t off, const char *msg)
{
    if (msg != sc->why.message)
        snprintf(sc->why.message, sizeof sc->why.message, "%s", msg);
    sc->why.offset = off;
}

/* Pass 1: every whole chunk, in order, until the first that is not. Returns the offset where the
 * damage begins (or the file ends); TT_E_NOMEM when a body does not fit in memory. */
static int scan_chunks(const tt_source *src, struct scan *sc, uint64_t *end_off)
{
    uint64_t off = TT_MANIFEST_SIZE;
    for (;;) {
        uint8_t hb[TT_CHUNK_HEADER];
        struct tt_chunk_header h;
        if (off == src->size) {
            stop(sc, off, "the file ends cleanly after a chunk");
            break;
        }
        if (tt_chunk_read_header(src, off, src->size, 0, "chunk", &h, hb, &sc->why) != TT_OK) {
            stop(sc, off, sc->why.message);
            break;
        }
        if (h.type == TT_CHUNK_FRAMES || h.type == TT_CHUNK_SEEK || h.type == TT_CHUNK_BLOCKS ||
            h.type == TT_CHUNK_CHECKPOINTS) {
            /* index chunks between the event chunks: the recovered file has no index tables
             * (docs/FORMAT.md §14.7) and no checkpoint table (§15), so they are passed over,
             * not copied */
            off += TT_CHUNK_HEADER + h.body_len;
            continue;
        }
        if (h.type != TT_CHUNK_EVENTS) {
            stop(sc, off, "a table chunk: the recording was being closed");
            break;
        }
        if (h.thread >= MAX_THREADS || h.body_len > MAX_BODY || h.count > h.body_len) {
            stop(sc, off, "the chunk header is not sane");
            break;
        }
        if (!body_room(sc, h.body_len)) {
            *end_off = off;
            return TT_E_NOMEM;
        }
        if (tt_chunk_read_body(src, off, &h, hb, sc->body, "chunk", &sc->why) != TT_OK) {
            stop(sc, off, sc->why.message);
            break;
        }
        struct rthread *t = &sc->th[h.thread];
        if (h.first_seq != t->seq) {
            stop(sc, off, "the chunk does not continue its thread's sequence");
            break;
        }
        if (h.count && h.base_time < t->last_time) {
            stop(sc, off, "the chunk goes back in time");
            break;
        }
        struct kept k = { .off = off, .body_len = h.body_len, .thread = h.thread,
                          .count = h.count, .checksum = h.checksum };
        uint64_t pending = t->pending;
        const char *why = walk(sc->body, &h, &k, &pending);
        if (why) {
            stop(sc, off, why);
            break;
        }
        if (sc->nkept == sc->capk) {
            size_t nc = sc->capk ? sc->capk * 2 : 256;
            struct kept *nk = realloc(sc->kept, nc * sizeof *nk);
            if (!nk) {
                stop(sc, off, "out of memory");
                break;
            }
            sc->kept = nk;
            sc->capk = nc;
        }
        /* A chain of chunks linked by split payloads is kept or dropped as a whole: a chunk
         * that finishes the previous chunk's payload and starts another split one cannot be
         * dropped alone, so the chain keeps the index where it began. */
        if (k.split_out && (t->pending == 0 || t->split_chunk < 0))
            t->split_chunk = (int64_t)sc->nkept;
        else if (!pending)
            t->split_chunk = -1;
        sc->kept[sc->nkept++] = k;
        if (h.count)
            t->last_time = k.last_time;
        t->seq += h.count;
        t->pending = pending;
        if (h.thread + 1 > sc->nthreads)
            sc->nthreads = h.thread + 1;
        off += TT_CHUNK_HEADER + h.body_len;
    }
    *end_off = off;
    return TT_OK;
}

/* A payload still owed: drops the chunk where it began and its continuations. */
static uint64_t drop_unfinished(struct scan *sc)
{
    uint64_t dropped = 0;
    for (uint32_t i = 0; i < sc->nthreads; i++) {
        if (!sc->th[i].pending || sc->th[i].split_chunk < 0)
            continue;
        for (size_t j = (size_t)sc->th[i].split_chunk; j < sc->nkept; j++) {
            if (sc->kept[j].thread == i) {
                dropped += sc->kept[j].count;
                sc->kept[j].count = UINT32_MAX; /* dropped */
            }
        }
    }
    return dropped;
}

/* Pass 2, the data area: the kept chunks copied unchanged from @src to @fd after the manifest,
 * with the counts of @o and the thread rows @rows made from them. Returns 0 or an errno; *@w is
 * the offset after the last chunk. */
static int copy_chunks(const tt_source *src, struct scan *sc, int fd, tt_manifest *o,
                       tt_thread_entry *rows, uint64_t *w)
{
    size_t got = 0;
    for (size_t j = 0; j < sc->nkept; j++) {
        struct kept *k = &sc->kept[j];
        if (k->count == UINT32_MAX)
            continue;
        size_t n = TT_CHUNK_HEADER + k->body_len;
        if (!body_room(sc, n))
            return ENOMEM;
        if (src->read(src->ctx, k->off, sc->body, n, &got) != TT_OK || got != n)
            return EIO;
        int e = tt_pwrite_all(fd, *w, sc->body, n);
        if (e)
            return e;
        *w += n;
        uint8_t le[8];
        tt_put64(le, k->checksum);
        o->events_checksum = tt_hash64(le, 8, o->events_checksum);
        o->chunk_count++;
        o->event_count += k->count;
        o->payload_bytes += k->payload;
        if (k->body_len > o->largest_chunk)
            o->largest_chunk = k->body_len;
        if (k->largest > o->largest_event)
            o->largest_event = k->largest;
        if (k->largest_split > o->largest_split)
            o->largest_split = k->largest_split;
        tt_thread_entry *r = &rows[k->thread];
        if (k->count) {
            if (!r->event_count)
                r->first_time = k->first_time;
            r->last_time = k->last_time;
        }
        r->event_count += k->count;
        r->chunk_count++;
    }
    return 0;
}

/* Pass 2, the end: the thread table rebuilt from the chunks, an empty object table (no names),
 * and the final manifest. Returns 0 or an errno. */
static int write_tail(int fd, tt_manifest *o, const tt_thread_entry *rows, uint32_t nthreads,
                      uint64_t *w)
{
    o->data_end = *w;
    o->threads_offset = *w;
    uint64_t tl = (uint64_t)nthreads * TT_THREAD_ROW;
    uint8_t *tb = calloc(1, TT_CHUNK_HEADER + tl);
    if (!tb)
        return ENOMEM;
    for (uint32_t i = 0; i < nthreads; i++) {
        tt_thread_entry r = rows[i];
        r.id = i;
        tt_thread_row_encode(tb + TT_CHUNK_HEADER + (uint64_t)i * TT_THREAD_ROW, &r);
    }
    struct tt_chunk_header h = { .type = TT_CHUNK_THREADS, .thread = TT_NO_THREAD,
                                 .count = nthreads, .body_len = (uint32_t)tl };
    tt_chunk_header_encode(tb, &h, tb + TT_CHUNK_HEADER);
    int e = tt_pwrite_all(fd, *w, tb, TT_CHUNK_HEADER + tl);
    free(tb);
    *w += TT_CHUNK_HEADER + tl;
    o->threads_length = TT_CHUNK_HEADER + tl;
    o->thread_count = nthreads;
    if (tl > o->largest_chunk)
        o->largest_chunk = tl;
    uint8_t ob[TT_CHUNK_HEADER];
    struct tt_chunk_header oh = { .type = TT_CHUNK_OBJECTS, .thread = TT_NO_THREAD };
    tt_chunk_header_encode(ob, &oh, ob);
    o->objects_offset = *w;
    o->objects_length = TT_CHUNK_HEADER;
    o->object_count = 0;
    if (!e)
        e = tt_pwrite_all(fd, *w, ob, sizeof ob);
    *w += TT_CHUNK_HEADER;
    o->file_size = *w;
    o->data_offset = TT_MANIFEST_SIZE;
    o->block_count = (o->file_size - o->data_offset + o->block_size - 1) / o->block_size;
    uint8_t mb[TT_MANIFEST_SIZE];
    tt_manifest_encode(mb, o);
    if (!e)
        e = tt_pwrite_all(fd, 0, mb, sizeof mb);
    if (!e && fdatasync(fd) != 0)
        e = errno;
    return e;
}

/* Reads and checks the source's manifest: it must be one of a recording that was not closed. */
static int read_manifest(const tt_source *src, tt_manifest *m, tt_error_info *err)
{
    uint8_t mbuf[TT_MANIFEST_SIZE];
    size_t got = 0;
    if (src->size < TT_MANIFEST_SIZE || src->read(src->ctx, 0, mbuf, sizeof mbuf, &got) != TT_OK ||
        got != sizeof mbuf)
        return tt_fail(err, TT_E_TRUNCATED, 0, 0, "%s: shorter than a manifest: nothing to recover",
                       src->name);
    int rc = tt_manifest_decode(mbuf, src->size, m, err);
    if (rc != TT_OK)
        return rc;
    if ((m->flags & TT_MF_FINALIZED) && !(m->flags & TT_MF_INCOMPLETE))
        return tt_fail(err, TT_E_INVAL, 0, TT_M_FLAGS,
                       "%s: the recording was closed; it needs no recovery (tinytrace verify)",
                       src->name);
    if (m->block_size < 4096 || (m->block_size & (m->block_size - 1)))
        m->block_size = 32768;
    if (m->ticks_per_sec == 0) /* the writer stores it at open: the manifest is damaged */
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_TPS,
                       "%s: ticks per second is zero: no time in the file can be read", src->name);
    return TT_OK;
}

int tt_recover(const tt_source *src, const char *out_path, tt_recover_result *res,
               tt_error_info *err)
{
    tt_recover_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    tt_manifest m;
    int rc = read_manifest(src, &m, err);
    if (rc != TT_OK)
        return rc;
    char tmp[4200];
    if (tt_partial_name(out_path, (long)getpid(), tmp, sizeof tmp) != TT_OK)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the output path is too long for its "
                       "temporary name (%zu bytes): %s", strlen(out_path), out_path);

    struct scan sc = { .th = calloc(MAX_THREADS, sizeof *sc.th) };
    if (!sc.th)
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    for (uint32_t i = 0; i < MAX_THREADS; i++)
        sc.th[i].split_chunk = -1;
    uint64_t off;
    if (scan_chunks(src, &sc, &off) != TT_OK) {
        scan_free(&sc);
        return tt_fail(err, TT_E_NOMEM, ENOMEM, off, "out of memory");
    }
    res->damage_offset = off;
    snprintf(res->message, sizeof res->message, "%.*s", (int)sizeof res->message - 1, sc.why.message);
    res->dropped_events = drop_unfinished(&sc);

    int fd = tt_partial_create(tmp);
    if (fd < 0) {
        int e = errno;
        scan_free(&sc);
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "cannot create %s: %s", tmp, strerror(e));
    }
    tt_manifest o = m;
    o.version = TT_FORMAT_VERSION;
    o.index_offset = o.index_length = 0; /* no index tables: §14.7 */
    o.checkpoints_offset = o.checkpoints_length = 0; /* nor a checkpoint table: §15 */
    o.checkpoint_count = o.restore_count = 0;
    o.flags = (m.flags & TT_MF_TSC) | TT_MF_FINALIZED | TT_MF_RECOVERED;
    o.write_errno = 0;
    o.event_count = o.payload_bytes = o.chunk_count = 0;
    o.largest_chunk = o.largest_event = o.largest_split = o.events_checksum = 0;
    tt_thread_entry *rows = calloc(sc.nthreads ? sc.nthreads : 1, sizeof *rows);
    uint64_t w = TT_MANIFEST_SIZE;
    int e = rows ? copy_chunks(src, &sc, fd, &o, rows, &w) : ENOMEM;
    if (!e)
        e = write_tail(fd, &o, rows, sc.nthreads, &w);
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, out_path) != 0)
        e = errno;
    if (e)
        unlink(tmp);
    res->events = o.event_count;
    res->chunks = o.chunk_count;
    res->threads = sc.nthreads;
    res->bytes_out = w;
    free(rows);
    scan_free(&sc);
    if (e)
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "writing %s: %s", out_path, strerror(e));
    return TT_OK;
}
