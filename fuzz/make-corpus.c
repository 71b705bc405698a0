/* SPDX-License-Identifier: MIT */
/* Seed corpus of the fuzz targets: small valid traces recorded with the library, written in the
 * input format of each target (docs/FUZZING.md).
 *
 *   make-corpus OUTDIR    writes OUTDIR/{manifest,chunk,tables,verify,replay,recover,index-build}/
 *                         <trace>[-<part>]
 *
 * The traces: every event kind on one thread with interned names, a checkpoint provider and
 * restores (the checkpoint table);
 * several threads with payloads of many sizes; payloads split over several chunks; a trace
 * finalized after a crash event; a trace cut short by a write error (ENOSPC, marked incomplete);
 * the partial file of a run that never closed, and the trace tt_recover makes from it; an empty
 * session; every event kind again, recorded without the index tables (TT_PARAM_INDEX 0: the
 * checkpoint table and no index, what tt_index_build is for); synchronization operations on a
 * few objects (sync events in both of their encodings, FORMAT.md §5.2). Every finalized trace is checked with tt_verify before it is written, so a seed that is
 * not a valid trace fails the build of the corpus.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "session-int.h"

static const char *outdir;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "make-corpus: %s: %s\n", what, msg);
    exit(1);
}

static void check(int rc, const char *what, const tt_error_info *err)
{
    if (rc != TT_OK)
        die(what, err->message);
}

/* ---------------------------------------------------------------- writing seeds */

static void write_seed(const char *target, const char *name, const void *head, size_t head_len,
                       const void *body, size_t body_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", outdir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path, strerror(errno));
    snprintf(path, sizeof path, "%s/%s/%s", outdir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(head, 1, head_len, f) != head_len ||
        (body_len && fwrite(body, 1, body_len, f) != body_len) || fclose(f) != 0)
        die(path, strerror(errno));
}

/* A growing byte buffer. */
struct bytes {
    uint8_t *p;
    size_t len, cap;
};

static void put(struct bytes *b, const void *data, size_t len)
{
    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            die("realloc", strerror(errno));
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

static void put_u8(struct bytes *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(struct bytes *b, uint32_t v) { uint8_t x[4]; tt_put32(x, v); put(b, x, 4); }
static void put_u64(struct bytes *b, uint64_t v) { uint8_t x[8]; tt_put64(x, v); put(b, x, 8); }

/* Writes @img (a trace file) as a seed of every target. */
static void emit(const char *name, const uint8_t *img, size_t n)
{
    const uint8_t ctl = 0;
    write_seed("verify", name, &ctl, 1, img, n);
    write_seed("replay", name, &ctl, 1, img, n);
    write_seed("index-build", name, &ctl, 1, img, n);
    if (n >= TT_MANIFEST_SIZE && tt_get32(img + TT_M_THREADS) > 1) {
        /* replay target: drive recorded thread k, bound by its name (control bit 4, k in 5-7) */
        for (uint8_t k = 1; k < 4 && k < tt_get32(img + TT_M_THREADS); k++) {
            uint8_t c = (uint8_t)(0x10 | k << 5);
            char tname[256];
            snprintf(tname, sizeof tname, "%s-thread%u", name, k);
            write_seed("replay", tname, &c, 1, img, n);
        }
    }
    write_seed("manifest", name, &ctl, 1, img, n < TT_MANIFEST_SIZE ? n : TT_MANIFEST_SIZE);
    tt_manifest m;
    tt_error_info err;
    if (n < TT_MANIFEST_SIZE || tt_manifest_decode(img, n, &m, &err) != TT_OK)
        return;
    if (!(m.flags & TT_MF_FINALIZED)) {
        write_seed("recover", name, &ctl, 1, img, n);
        return;
    }
    if (m.flags & TT_MF_INCOMPLETE)
        return; /* the chunk and table seeds need the final manifest */

    /* recover target: the file as it was before close — a provisional manifest and the event
     * chunks — whole, and cut inside its last chunk */
    tt_manifest pm;
    memset(&pm, 0, sizeof pm);
    pm.version = m.version;
    pm.flags = m.flags & TT_MF_TSC;
    pm.lib_version = m.lib_version;
    pm.block_size = m.block_size;
    memcpy(pm.build_id, m.build_id, sizeof pm.build_id);
    pm.build_id_len = m.build_id_len;
    memcpy(pm.caller, m.caller, sizeof pm.caller);
    pm.ticks_per_sec = m.ticks_per_sec;
    pm.tick_origin = m.tick_origin;
    pm.realtime_origin_ns = m.realtime_origin_ns;
    pm.pid = m.pid;
    pm.data_offset = pm.data_end = pm.file_size = TT_MANIFEST_SIZE;
    uint8_t pman[1 + TT_MANIFEST_SIZE];
    pman[0] = ctl;
    tt_manifest_encode(pman + 1, &pm);
    size_t data = m.data_end - m.data_offset;
    write_seed("recover", name, pman, sizeof pman, img + m.data_offset, data);
    char cname[256];
    snprintf(cname, sizeof cname, "%s-cut", name);
    write_seed("recover", cname, pman, sizeof pman, img + m.data_offset, data > 20 ? data - 20 : 0);

    /* chunk target: hints, last times, then the event chunks as they are in the file */
    if (m.thread_count >= 1 && m.thread_count <= 8) {
        struct bytes b = { 0 };
        put_u8(&b, 0);
        put_u8(&b, (uint8_t)(m.thread_count - 1));
        put_u32(&b, (uint32_t)m.largest_event);
        put_u32(&b, (uint32_t)m.largest_split);
        put_u64(&b, m.payload_bytes);
        for (uint32_t t = 0; t < m.thread_count; t++) {
            tt_thread_entry e;
            tt_thread_row_decode(img + m.threads_offset + TT_CHUNK_HEADER + t * TT_THREAD_ROW, &e);
            put_u64(&b, e.last_time);
        }
        put(&b, img + m.data_offset, m.data_end - m.data_offset);
        write_seed("chunk", name, b.p, b.len, NULL, 0);
        free(b.p);
    }

    /* tables target: selector, control, count, body */
    char tname[256];
    struct bytes b = { 0 };
    put_u8(&b, 0);
    put_u8(&b, 0);
    put_u32(&b, m.thread_count);
    put(&b, img + m.threads_offset + TT_CHUNK_HEADER, m.threads_length - TT_CHUNK_HEADER);
    snprintf(tname, sizeof tname, "%s-threads", name);
    write_seed("tables", tname, b.p, b.len, NULL, 0);
    b.len = 0;
    put_u8(&b, 1);
    put_u8(&b, 0);
    put_u32(&b, m.object_count);
    put(&b, img + m.objects_offset + TT_CHUNK_HEADER, m.objects_length - TT_CHUNK_HEADER);
    snprintf(tname, sizeof tname, "%s-objects", name);
    write_seed("tables", tname, b.p, b.len, NULL, 0);
    free(b.p);
}

/* Checks a finalized trace with tt_verify and writes it as seeds. */
static void emit_valid(const char *name, const uint8_t *img, size_t n)
{
    tt_source src;
    tt_verify_result res;
    tt_source_memory(&src, img, n);
    if (tt_verify_ex(&src, NULL, TT_VERIFY_FRAMES, &res) != TT_OK)
        die(name, res.message);
    emit(name, img, n);
}

/* ---------------------------------------------------------------- recording */

/* A callback sink into memory that can fail: the partial-file and write-error traces. */
struct cb_sink {
    pthread_mutex_t lock;
    struct bytes b;
    int fail_after;      /* writes that succeed before the data area fails with ENOSPC; -1: never */
    int writes;
};

static int cb_write(void *ctx, uint64_t off, const void *data, size_t len)
{
    struct cb_sink *s = ctx;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->fail_after >= 0 && s->writes >= s->fail_after && off != 0) {
        rc = ENOSPC;
    } else {
        s->writes++;
        uint8_t zero = 0;
        while (s->b.len < off + len)
            put(&s->b, &zero, 1);
        memcpy(s->b.p + off, data, len);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static tt_session *open_session_index(tt_memory_sink *mem, struct cb_sink *cb, uint64_t buffer,
                                      int index)
{
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    tt_config_init(&cfg);
    check(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), "mode", &err);
    check(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, buffer, &err), "buffer", &err);
    check(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 8 * buffer, &err), "memory", &err);
    check(tt_config_set(&cfg, TT_PARAM_BLOCK_BYTES, 4096, &err), "block", &err);
    check(tt_config_set_str(&cfg, TT_PARAM_CALLER, "fuzz/make-corpus", &err), "caller", &err);
    check(tt_config_set(&cfg, TT_PARAM_INDEX, (uint64_t)index, &err), "index", &err);
    if (mem)
        tt_config_set_memory_sink(&cfg, mem);
    else
        tt_config_set_callback_sink(&cfg, cb_write, cb);
    check(tt_session_open(&cfg, &s, &err), "open", &err);
    return s;
}

static tt_session *open_session(tt_memory_sink *mem, struct cb_sink *cb, uint64_t buffer)
{
    return open_session_index(mem, cb, buffer, 1);
}

static void close_session(tt_session *s, int want)
{
    tt_error_info err = { 0 };
    int rc = tt_session_close(s, &err);
    if (rc != want)
        die("close", err.message);
}

struct ckpt {
    uint8_t state[24];
};

static size_t ckpt_size(void *ctx) { return sizeof ((struct ckpt *)ctx)->state; }
static int ckpt_save(void *ctx, void *dst, size_t len)
{
    memcpy(dst, ((struct ckpt *)ctx)->state, len);
    return 0;
}
static int ckpt_stage(void *ctx, const void *src, size_t len) { (void)ctx; (void)src; (void)len; return 0; }
static void ckpt_nop(void *ctx) { (void)ctx; }

/* Every event kind, each with its own values. */
static void record_kinds(tt_session *s, int rounds)
{
    uint32_t fn[3], site, mod, tag, meta;
    tt_intern(s, TT_OBJ_FUNCTION, "main", &fn[0]);
    tt_intern(s, TT_OBJ_FUNCTION, "parse", &fn[1]);
    tt_intern(s, TT_OBJ_FUNCTION, "emit", &fn[2]);
    tt_intern(s, TT_OBJ_SITE, "make-corpus.c:1", &site);
    tt_intern(s, TT_OBJ_MODULE, "make-corpus", &mod);
    tt_intern(s, TT_OBJ_TAG, "tag", &tag);
    tt_intern(s, TT_OBJ_META, "meta=1", &meta);
    tt_thread_name(s, "main-thread");
    uint8_t buf[200];
    for (int i = 0; i < rounds; i++) {
        tt_enter(s, fn[0]);
        tt_enter(s, fn[1 + i % 2]);
        tt_safepoint(s, fn[1], site + (uint32_t)i);
        tt_alloc(s, site, 16u + (uint64_t)i, (void *)(uintptr_t)(0x1000u + 16u * (unsigned)i));
        tt_free(s, site, (void *)(uintptr_t)(0x1000u + 16u * (unsigned)i));
        for (size_t k = 0; k < sizeof buf; k++)
            buf[k] = (uint8_t)(i * 7 + (int)k);
        size_t n = (size_t)(i * 13) % sizeof buf;
        tt_io(s, TT_IO_IN, 3, buf, n, NULL);
        tt_io(s, TT_IO_OUT, 4, buf, (n + 5) % sizeof buf, NULL);
        tt_user(s, tag, buf, (size_t)i % 9);
        tt_checkpoint(s, site);
        if (i % 3 == 2)
            tt_checkpoint_restore(s, NULL, site, NULL); /* a restore row, an epoch */
        tt_exit(s, fn[1 + i % 2]);
        tt_exit(s, fn[0]);
    }
}

static void trace_kinds(void)
{
    tt_memory_sink mem = { 0 };
    tt_session *s = open_session(&mem, NULL, 4096);
    struct ckpt st;
    for (size_t i = 0; i < sizeof st.state; i++)
        st.state[i] = (uint8_t)(0xA0 + i);
    tt_checkpoint_provider p = { .struct_size = sizeof p, .id = 7, .ctx = &st, .size = ckpt_size,
                                 .save = ckpt_save, .stage = ckpt_stage, .commit = ckpt_nop,
                                 .cancel = ckpt_nop };
    if (tt_checkpoint_register(s, &p) != TT_OK)
        die("kinds", "checkpoint provider refused");
    record_kinds(s, 40);
    close_session(s, TT_OK);
    emit_valid("kinds", mem.data, mem.len);
    free(mem.data);

    /* the same without the index tables (TT_PARAM_INDEX 0): the checkpoint table is still
     * written; what tt_index_build is for */
    memset(&mem, 0, sizeof mem);
    s = open_session_index(&mem, NULL, 4096, 0);
    for (size_t i = 0; i < sizeof st.state; i++)
        st.state[i] = (uint8_t)(0xB0 + i);
    if (tt_checkpoint_register(s, &p) != TT_OK)
        die("kinds-noindex", "checkpoint provider refused");
    record_kinds(s, 25);
    close_session(s, TT_OK);
    emit_valid("kinds-noindex", mem.data, mem.len);
    free(mem.data);

    /* one short chunk: the smallest interesting trace */
    memset(&mem, 0, sizeof mem);
    s = open_session(&mem, NULL, 4096);
    record_kinds(s, 1);
    close_session(s, TT_OK);
    emit_valid("small", mem.data, mem.len);
    free(mem.data);
}

struct worker {
    tt_session *s;
    int id;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[32];
    uint8_t buf[3000];
    snprintf(name, sizeof name, "worker-%d", w->id);
    tt_thread_name(w->s, name);
    uint32_t fn;
    tt_intern(w->s, TT_OBJ_FUNCTION, name, &fn);
    unsigned seed = 17u * (unsigned)w->id + 1;
    for (int i = 0; i < 60; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 8) % (i % 10 == 9 ? sizeof buf : 64);
        memset(buf, w->id * 16 + i, n);
        tt_enter(w->s, fn);
        tt_io(w->s, (i & 1) ? TT_IO_OUT : TT_IO_IN, (uint32_t)w->id, buf, n, NULL);
        tt_exit(w->s, fn);
    }
    if (w->id == 2)
        tt_session_thread_end(w->s); /* one thread ends itself: a thread-end event */
    return NULL;
}

static void trace_threads(void)
{
    tt_memory_sink mem = { 0 };
    tt_session *s = open_session(&mem, NULL, 4096);
    uint32_t fn;
    tt_intern(s, TT_OBJ_FUNCTION, "main", &fn);
    tt_enter(s, fn);
    pthread_t th[3];
    struct worker w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct worker){ s, i + 1 };
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0)
            die("threads", "pthread_create");
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    tt_exit(s, fn);
    close_session(s, TT_OK);
    emit_valid("threads", mem.data, mem.len);
    free(mem.data);
}

static void trace_split(void)
{
    tt_memory_sink mem = { 0 };
    tt_session *s = open_session(&mem, NULL, 4096);
    static uint8_t big[20000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 31 + 3);
    tt_enter(s, 1);
    tt_io(s, TT_IO_IN, 1, big, 9000, NULL);    /* over two chunks */
    tt_exit(s, 1);
    tt_user(s, 2, big, 20000);                 /* over several continuation-only chunks */
    tt_io(s, TT_IO_OUT, 1, big, 1500, NULL);   /* a quarter of a buffer: moves whole */
    close_session(s, TT_OK);
    emit_valid("split", mem.data, mem.len);
    free(mem.data);
}

static void trace_crash(void)
{
    tt_memory_sink mem = { 0 };
    tt_session *s = open_session(&mem, NULL, 4096);
    record_kinds(s, 3);
    static const char bt[] = "crash_here\nmain\n__libc_start_main\n";
    tt_event ev = { .kind = TT_EV_CRASH, .arg = 11, .payload = bt, .payload_len = sizeof bt - 1 };
    if (tt_event_full_(s, &ev, NULL, 0, NULL) != TT_OK)
        die("crash", "crash event refused");
    tt_session_mark_crashed_(s);
    close_session(s, TT_OK);
    emit_valid("crash", mem.data, mem.len);
    free(mem.data);
}

/* Locks and unlocks on three objects, a failed trylock (a payload) and an operation that takes
 * no turn (a step back): kind 14 and kind 16 ("sync again") events, steps up and down. */
static void trace_sync(void)
{
    tt_memory_sink mem = { 0 };
    tt_session *s = open_session(&mem, NULL, 4096);
    uint32_t lock, unlock, note;
    tt_intern(s, TT_OBJ_SITE, "pthread_mutex_lock", &lock);
    tt_intern(s, TT_OBJ_SITE, "pthread_mutex_unlock", &unlock);
    tt_intern(s, TT_OBJ_SITE, "sched_yield", &note);
    static int obj[3];
    for (int i = 0; i < 200; i++) {
        const void *o = &obj[i % 7 == 0 ? 2 : i % 2];
        tt_sync op;
        tt_sync_begin(s, &op, TT_SYNC_LOCK, lock, o);
        tt_sync_end(s, &op, 0, 1);
        tt_sync_begin(s, &op, TT_SYNC_UNLOCK, unlock, o);
        tt_sync_end(s, &op, 0, 1);
        if (i % 5 == 0) {
            tt_sync_begin(s, &op, TT_SYNC_LOCK, lock, &obj[0]);
            tt_sync_end(s, &op, EBUSY, 0); /* a failed trylock: its result is a payload */
        }
        if (i % 3 == 0) {
            tt_sync_begin(s, &op, TT_SYNC_NOTE, note, o);
            tt_sync_end(s, &op, 0, 0); /* no turn: addr 0, a step back */
        }
    }
    close_session(s, TT_OK);
    emit_valid("sync", mem.data, mem.len);
    free(mem.data);
}

static void trace_empty(void)
{
    tt_memory_sink mem = { 0 };
    tt_session *s = open_session(&mem, NULL, 4096);
    close_session(s, TT_OK);
    emit_valid("empty", mem.data, mem.len);
    free(mem.data);
}

/* A write error after a few blocks (the manifest at offset 0 still writes): the file is
 * finalized as incomplete. */
static void trace_incomplete(void)
{
    struct cb_sink cb = { .lock = PTHREAD_MUTEX_INITIALIZER, .fail_after = 3 };
    tt_session *s = open_session(NULL, &cb, 4096);
    record_kinds(s, 60);
    close_session(s, TT_E_IO);
    emit("incomplete", cb.b.p, cb.b.len);
    free(cb.b.p);
}

/* The file of a run that never closed, and what tt_recover makes of it. */
static void trace_partial(void)
{
    struct cb_sink cb = { .lock = PTHREAD_MUTEX_INITIALIZER, .fail_after = -1 };
    tt_session *s = open_session(NULL, &cb, 4096);
    record_kinds(s, 30);
    tt_session_flush_thread(s);
    /* wait, with a deadline, until the swapper has written what the thread handed over */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        tt_session_stats st;
        tt_session_stats_get(s, &st);
        pthread_mutex_lock(&cb.lock);
        size_t have = cb.b.len;
        pthread_mutex_unlock(&cb.lock);
        if (st.events > 0 && have > TT_MANIFEST_SIZE)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 10)
            die("partial", "the swapper wrote nothing in 10 s");
        struct timespec d = { 0, 1000000 };
        nanosleep(&d, NULL);
    }
    pthread_mutex_lock(&cb.lock);
    size_t n = cb.b.len;
    uint8_t *partial = malloc(n);
    memcpy(partial, cb.b.p, n);
    pthread_mutex_unlock(&cb.lock);
    close_session(s, TT_OK);
    free(cb.b.p);
    emit("partial", partial, n);

    char dir[] = "/tmp/tinytrace-corpus-XXXXXX", path[64];
    if (!mkdtemp(dir))
        die("mkdtemp", strerror(errno));
    snprintf(path, sizeof path, "%s/recovered.tt", dir);
    tt_source src;
    tt_recover_result res;
    tt_error_info err;
    tt_source_memory(&src, partial, n);
    check(tt_recover(&src, path, &res, &err), "recover", &err);
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, strerror(errno));
    uint8_t *img = malloc(res.bytes_out);
    size_t got = fread(img, 1, res.bytes_out, f);
    fclose(f);
    unlink(path);
    rmdir(dir);
    if (got != res.bytes_out)
        die(path, "short read");
    emit_valid("recovered", img, got);
    free(img);
    free(partial);
}

/* A chunk seed for the chunk target: one thread, one chunk of a loop's enters and exits whose
 * time steps straddle 63 ticks, so one-byte short tags and two-byte events alternate at random
 * (as on a machine whose clock read takes about 60 ticks). Among them, rarer forms that the
 * readers' fast paths must hand to the general decoder: a step above 127 (a two-byte varint),
 * and a full tag naming its function. The thread's last time is the sum of the steps, so the
 * seed is a valid trace. */
static void chunk_mixed_steps(void)
{
    struct bytes body = { 0 }, b = { 0 };
    uint64_t time = 0, x = 0x2545F4914F6CDD1Du;
    uint32_t count = 0;
    for (int i = 0; i < 3000; i++, count++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned exit = i & 1, r = (unsigned)(x % 1000), step = 40 + (unsigned)(x >> 32) % 50;
        if (i == 0 || r < 5) {
            put_u8(&body, (uint8_t)(exit ? TT_EV_EXIT : TT_EV_ENTER)); /* full tag, function 1 */
            put_u8(&body, (uint8_t)step);
            put_u8(&body, 1);
        } else if (r < 10) {
            step = 128 + step; /* a varint step of two bytes */
            put_u8(&body, (uint8_t)((exit ? TT_EV_EXIT : TT_EV_ENTER) | TT_TAG_FSAME));
            put_u8(&body, (uint8_t)(0x80 | (step & 0x7F)));
            put_u8(&body, (uint8_t)(step >> 7));
        } else if (step <= TT_TAG_SHORT_STEP) {
            put_u8(&body, (uint8_t)(TT_TAG_SHORT | (exit ? TT_TAG_SHORT_EXIT : 0) | step));
        } else {
            put_u8(&body, (uint8_t)((exit ? TT_EV_EXIT : TT_EV_ENTER) | TT_TAG_FSAME));
            put_u8(&body, (uint8_t)step);
        }
        time += step;
    }
    put_u8(&b, 0);          /* ctl */
    put_u8(&b, 0);          /* one thread */
    put_u32(&b, 0);         /* largest event */
    put_u32(&b, 0);         /* largest split */
    put_u64(&b, 0);         /* payload bytes */
    put_u64(&b, time);      /* thread 0's last time */
    uint8_t h[TT_CHUNK_HEADER] = { 0 };
    tt_put32(h + 8, (uint32_t)body.len); /* body length */
    tt_put32(h + 12, 0);                 /* thread */
    tt_put64(h + 16, 0);                 /* first sequence number */
    tt_put32(h + 24, count);             /* events */
    put(&b, h, sizeof h);
    put(&b, body.p, body.len);
    write_seed("chunk", "mixed-steps", b.p, b.len, NULL, 0);
    free(body.p);
    free(b.p);
}

/* A chunk whose header claims more events than its bytes hold, ending in the one-byte tag of a
 * two-byte enter: its step would be the first byte after the chunk. The decoder refuses it;
 * replay's matcher must too, without reading that byte. A longer chunk of the same thread comes
 * first, so the byte after the short one in the cursor's buffer is a leftover below 0x80, a
 * step the matcher would take. */
static void chunk_count_past_bytes(void)
{
    static const uint8_t first[] = {
        TT_EV_ENTER, 1, 1, /* enter of function 1, step 1; then five of the same, step 1 */
        TT_EV_ENTER | TT_TAG_FSAME, 1, TT_EV_ENTER | TT_TAG_FSAME, 1, TT_EV_ENTER | TT_TAG_FSAME, 1,
        TT_EV_ENTER | TT_TAG_FSAME, 1, TT_EV_ENTER | TT_TAG_FSAME, 1,
    };
    static const uint8_t second[] = {
        TT_EV_ENTER, 1, 1,          /* enter of function 1, step 1 */
        TT_EV_ENTER | TT_TAG_FSAME, /* enter of the same function: its step is missing */
    };
    struct bytes b = { 0 };
    put_u8(&b, 0);     /* ctl */
    put_u8(&b, 0);     /* one thread */
    put_u32(&b, 0);    /* largest event */
    put_u32(&b, 0);    /* largest split */
    put_u64(&b, 0);    /* payload bytes */
    put_u64(&b, 8);    /* thread 0's last time, had the second chunk been whole */
    uint8_t h[TT_CHUNK_HEADER] = { 0 };
    tt_put32(h + 8, sizeof first);
    tt_put32(h + 24, 6);
    put(&b, h, sizeof h);
    put(&b, first, sizeof first);
    tt_put32(h + 8, sizeof second);
    tt_put64(h + 16, 6); /* first sequence number */
    tt_put32(h + 24, 3); /* events: one more than the bytes hold */
    put(&b, h, sizeof h);
    put(&b, second, sizeof second);
    write_seed("chunk", "count-past-bytes", b.p, b.len, NULL, 0);
    free(b.p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make-corpus OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
        die(outdir, strerror(errno));
    trace_kinds();
    trace_threads();
    trace_split();
    trace_crash();
    trace_sync();
    trace_empty();
    trace_incomplete();
    trace_partial();
    chunk_mixed_steps();
    chunk_count_past_bytes();
    return 0;
}
