/* SPDX-License-Identifier: MIT */
/* The recording's file: the sinks, blocks, open and close.
 *
 * The swapper appends each encoded chunk to a block buffer that is written in block-size units
 * (TT_PARAM_BLOCK_BYTES) to the sink: the trace file, a caller's memory sink or a callback.
 * The file is created as "<file>.<pid>.partial" (partial.c: O_EXCL | O_NOFOLLOW, mode 0600)
 * with a provisional manifest, so a dead run's file can be recognised and salvaged. Close stops
 * the recording threads, lets the swapper drain, writes the thread and object tables and the
 * index, rewrites the manifest at offset 0, syncs and renames.
 *
 * The file's descriptor lives in the program's fd table, and programs close what they did not
 * open (close_range(3, ~0U, 0), a loop over 0..1023) or dup2 their own files over every number.
 * So the descriptor is moved high up, close-on-exec, and reserved in the fd registry
 * (base/fds.c) as soon as the file exists; the preload library then answers the program's
 * close, close_range, closefrom, dup2, dup3 and fcntl on it as if it were not open
 * (instrument/preload/fdguard.c). When the program puts a file on its number, the registry asks
 * fd_move to take the descriptor elsewhere first. Every use of the descriptor (a block write, a
 * sync, the move) holds fd_lock, so no write ever goes to a number that is being replaced;
 * recording threads never take it, only the swapper once per block and the closing thread.
 *
 * The descriptor can still be lost: a raw system call, a program linked with the library and
 * not preloaded. A write or sync that fails on a descriptor that is no longer the file (fstat:
 * its st_dev and st_ino, kept from the creation), and a check every TT_WRITEBACK_STEP and at
 * close, notice it; the file is then opened again by name (tt_partial_reopen: never created,
 * never through a symlink, only the same file, its lock taken again), moved high, and the write
 * retried. What was written through a number that had become another file of the program's is
 * not in the trace: the file is marked incomplete from the last check. When the file cannot be
 * opened again, the recording is marked incomplete, and close's message says that the program
 * closed the trace file's descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record_api.h"

#define TT_CALIB_OPEN_NS 200000u  /* the provisional tick rate's interval */
#define TT_CALIB_MIN_NS 2000000u  /* the final one's, at least */

int tt_writer_capacity_of(const tt_writer_limits *lim, tt_writer_capacity *cap, tt_error_info *err)
{
    if (!lim || !cap)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "NULL argument");
    if (lim->buffer_bytes < 4096 || lim->buffer_bytes % 4096)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX,
                       "buffer_bytes %llu is not a positive multiple of 4096",
                       (unsigned long long)lim->buffer_bytes);
    if (lim->memory_bytes < 2 * lim->buffer_bytes)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX,
                       "memory_bytes %llu holds fewer than two buffers of %llu",
                       (unsigned long long)lim->memory_bytes, (unsigned long long)lim->buffer_bytes);
    if (lim->block_bytes < 4096 || (lim->block_bytes & (lim->block_bytes - 1)))
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX, "block_bytes %u is not a power of two >= 4096",
                       lim->block_bytes);
    if (lim->max_threads == 0)
        return tt_fail(err, TT_E_CAPACITY, 0, UINT64_MAX, "max_threads is 0");
    uint64_t n = lim->memory_bytes / lim->buffer_bytes;
    cap->buffers = n * (lim->buffer_bytes + 128); /* a buffer, its header, alignment */
    cap->swapper = (tt_chunk_body_max(lim->buffer_bytes) + TT_CHUNK_HEADER + 63) / 64 * 64 +
                   lim->block_bytes;
    cap->threads = (uint64_t)lim->max_threads * (sizeof(struct tt_thread) + 64);
    cap->objects = lim->object_bytes;
    cap->total = cap->buffers + cap->swapper + cap->threads + cap->objects;
    return TT_OK;
}

/* ---------------------------------------------------------------- the file's descriptor */

/* Whether w->fd is still the trace file. Under fd_lock. */
static bool fd_ours(struct tt_writer *w)
{
    struct stat st;
    return w->fd >= 0 && fstat(w->fd, &st) == 0 && (uint64_t)st.st_dev == w->file_dev &&
           (uint64_t)st.st_ino == w->file_ino;
}

/* The program took the descriptor (closed it, or put another file on its number): the number is
 * the program's now, never written or closed again. Opens the file again by name and moves it
 * high. Under fd_lock. Returns 0, or the errno that stopped it (also in w->reopen_errno). */
static int fd_regain(struct tt_writer *w)
{
    if (w->fd_lost < 0)
        w->fd_lost = w->fd;
    w->fd = -1;
    tt_fd_swap(w->fd_slot, -1);
    int fd = tt_partial_reopen(w->temp_path, w->file_dev, w->file_ino);
    int e = fd < 0 ? errno : tt_partial_lock(fd);
    /* EAGAIN: another open file description of the file holds the lock, and only ours take
     * it (gc and recover leave a locked file alone): the old one lives on elsewhere (a fork
     * child's table, a thread's table after CLOSE_RANGE_UNSHARE, a dup the program made). The
     * file stays locked while it lives; fd_check takes the lock once it is gone. */
    w->fd_relock = e == EAGAIN;
    if (e == EAGAIN)
        e = 0;
    if (e) {
        if (fd >= 0)
            close(fd);
        w->reopen_errno = e;
        return e;
    }
    int hi = tt_fd_high(fd);
    if (hi >= 0) {
        close(fd);
        fd = hi; /* else the number open gave (no number free above stdio): reserved too */
    }
    w->fd = fd;
    w->reopen_errno = 0;
    tt_fd_swap(w->fd_slot, fd);
    return 0;
}

/* Whether everything written since the last check is in the file, up to @upto. A descriptor
 * that is another file now took what was written since, if anything was: the recording is
 * incomplete from the last check (EBADF). The file is opened again in any case, so that the
 * rest, or the manifest that says it is incomplete, goes there. Under fd_lock. */
static void fd_check(struct tt_writer *w, uint64_t upto)
{
    struct stat st;
    if (w->fd >= 0 && fstat(w->fd, &st) == 0) {
        if ((uint64_t)st.st_dev == w->file_dev && (uint64_t)st.st_ino == w->file_ino) {
            w->checked_off = upto;
            if (w->fd_relock && tt_partial_lock(w->fd) != EAGAIN)
                w->fd_relock = false;
            return;
        }
        if (upto > w->checked_off && !w->write_errno) {
            w->write_errno = EBADF;
            w->write_errno_off = w->checked_off;
            w->fd_replaced = true;
        }
    }
    (void)fd_regain(w); /* failing, the next write reports it */
}

/* The registry's move (base/fds.c): the program puts a file on @fd, w->fd's number (dup2,
 * dup3). Called with the registry's lock held; fd_lock waits for a block write in flight. */
static int fd_move(void *ctx, int fd)
{
    struct tt_writer *w = ctx;
    int e = 0;
    pthread_mutex_lock(&w->fd_lock);
    if (w->fd == fd) {
        w->fd = tt_fd_relocate(w->fd_slot, fd);
        if (w->fd < 0) { /* no number free: the next write tries to reopen */
            e = errno;
            w->fd_lost = fd;
            w->reopen_errno = e;
        }
    }
    pthread_mutex_unlock(&w->fd_lock);
    return e;
}

/* Writes @len bytes at *@off to the file, advancing *@off by what was taken; once, a
 * descriptor that is not the file any more is regained and the write retried. Under fd_lock. */
static int file_write(struct tt_writer *w, const uint8_t *p, size_t len, uint64_t *off)
{
    bool regained = false;
    while (len) {
        ssize_t k = w->fd >= 0 ? pwrite(w->fd, p, len, (off_t)*off) : -1;
        if (k < 0) {
            int e = w->fd >= 0 ? errno : EBADF;
            if (e == EINTR)
                continue;
            if (regained || fd_ours(w))
                return e; /* an error of the file itself */
            regained = true;
            if (fd_regain(w) != 0)
                return EBADF;
            continue;
        }
        if (k == 0)
            return ENOSPC;
        p += k;
        *off += (uint64_t)k;
        len -= (size_t)k;
    }
    return 0;
}

/* fdatasync, on the file again if the descriptor was lost since the last write. */
static int file_sync(struct tt_writer *w)
{
    pthread_mutex_lock(&w->fd_lock);
    fd_check(w, w->file_off);
    int e = w->write_errno;
    if (!e)
        e = w->fd < 0 ? EBADF : fdatasync(w->fd) != 0 ? errno : 0;
    pthread_mutex_unlock(&w->fd_lock);
    return e;
}

/* Ends the reservation first: after tt_fd_release no move runs, so w->fd is final. A number
 * that is not the file any more is the program's: not closed. */
static int file_close(struct tt_writer *w)
{
    tt_fd_release(w->fd_slot);
    w->fd_slot = -1;
    pthread_mutex_lock(&w->fd_lock);
    int fd = fd_ours(w) ? w->fd : -1, e = 0;
    w->fd = -1;
    pthread_mutex_unlock(&w->fd_lock);
    if (fd >= 0 && close(fd) != 0)
        e = errno;
    return e;
}

/* ---------------------------------------------------------------- sinks */

static int sink_write(struct tt_writer *w, uint64_t off, const void *data, size_t len)
{
    if (w->write_errno)
        return w->write_errno;
    int e = 0;
    if (w->cb) {
        e = w->cb(w->cb_ctx, off, data, len);
    } else if (w->msink) {
        tt_memory_sink *ms = w->msink;
        if (off + len > ms->cap_) {
            size_t ncap = ms->cap_ ? ms->cap_ : 65536;
            while (ncap < off + len)
                ncap *= 2;
            void *nd = realloc(ms->data, ncap);
            if (!nd) {
                e = ENOMEM;
                goto out;
            }
            ms->data = nd;
            ms->cap_ = ncap;
        }
        memcpy((uint8_t *)ms->data + off, data, len);
        if (off + len > ms->len)
            ms->len = off + len;
    } else {
        pthread_mutex_lock(&w->fd_lock);
        e = file_write(w, data, len, &off);
        pthread_mutex_unlock(&w->fd_lock);
    }
out:
    if (e) {
        w->write_errno = e;
        w->write_errno_off = off; /* for a file: after the bytes a short write did take */
        return e;
    }
    w->bytes_written += len;
    return 0;
}

/* Written file bytes are handed to the kernel's writeback every TT_WRITEBACK_STEP, without
 * waiting, so the fdatasync at close finds little left to write (it took 60 ms, a tenth of the
 * recording's cost, for an 88 MB trace when all of it was still dirty then). */
#define TT_WRITEBACK_STEP (8u << 20)

void tt_writer_block_flush(struct tt_writer *w)
{
    if (w->block_len) {
        sink_write(w, w->file_off, w->block, w->block_len);
        w->file_off += w->block_len;
        w->block_len = 0;
        if (w->file && w->file_off - w->wb_off >= TT_WRITEBACK_STEP && !w->write_errno) {
            pthread_mutex_lock(&w->fd_lock);
            fd_check(w, w->file_off);
            /* advisory: an error here shows again, and is reported, at fdatasync */
            if (w->fd >= 0)
                (void)sync_file_range(w->fd, (off_t)w->wb_off,
                                      (off_t)(w->file_off - w->wb_off), SYNC_FILE_RANGE_WRITE);
            pthread_mutex_unlock(&w->fd_lock);
            w->wb_off = w->file_off;
        }
    }
}

static void block_append(struct tt_writer *w, const uint8_t *p, size_t len)
{
    while (len) {
        size_t n = w->block_size - w->block_len;
        if (n > len)
            n = len;
        memcpy(w->block + w->block_len, p, n);
        w->block_len += (uint32_t)n;
        p += n;
        len -= n;
        if (w->block_len == w->block_size)
            tt_writer_block_flush(w);
    }
}

/* Frames the body already in w->chunk + TT_CHUNK_HEADER and appends it. */
uint64_t tt_writer_chunk_emit(struct tt_writer *w, struct tt_chunk_header *h)
{
    uint8_t *body = w->chunk + TT_CHUNK_HEADER;
    tt_chunk_header_encode(w->chunk, h, body);
    block_append(w, w->chunk, TT_CHUNK_HEADER + (size_t)h->body_len);
    if (h->body_len > w->m.largest_chunk)
        w->m.largest_chunk = h->body_len;
    return tt_get64(w->chunk + 40);
}

/* For tables.c: where the next appended byte lands, and appending through the block buffer. */
uint64_t tt_writer_tail_(struct tt_writer *w)
{
    return w->file_off + w->block_len;
}

void tt_writer_put_raw_(struct tt_writer *w, const uint8_t *p, size_t len)
{
    /* framed chunks from tables.c: keep the largest body for the manifest */
    for (size_t off = 0; off + TT_CHUNK_HEADER <= len;) {
        uint32_t body = tt_get32(p + off + 8);
        if (body > w->m.largest_chunk)
            w->m.largest_chunk = body;
        off += TT_CHUNK_HEADER + (size_t)body;
    }
    block_append(w, p, len);
}

void tt_writer_put_chunk_(struct tt_writer *w, struct tt_chunk_header *h, const uint8_t *body)
{
    uint8_t hdr[TT_CHUNK_HEADER];
    tt_chunk_header_encode(hdr, h, body);
    block_append(w, hdr, sizeof hdr);
    if (h->body_len)
        block_append(w, body, h->body_len);
    /* the summary and the directory are not counted in largest_chunk: max_table bounds them */
}

tt_manifest *tt_writer_manifest_(struct tt_writer *w)
{
    return &w->m;
}

/* ---------------------------------------------------------------- open */

static int open_file(tt_session *s, struct tt_writer *w, tt_error_info *err)
{
    const char *path = s->cfg.file;
    if (!path[0])
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "record mode needs a file (TT_PARAM_FILE)");
    /* a relative path is made absolute now: the rename at close must name the same file after
     * the program changed its working directory */
    char abs[sizeof w->final_path];
    if (path[0] != '/' && getcwd(abs, sizeof abs) != NULL) {
        size_t n = strlen(abs);
        if (n + 1 + strlen(path) < sizeof abs) {
            snprintf(abs + n, sizeof abs - n, "/%s", path);
            path = abs;
        }
    }
    /* the rename at close replaces whatever has the final name: never a device, a FIFO, a
     * socket or a directory (`record -o /dev/null` as root replaced the device node) */
    struct stat fst;
    if (lstat(path, &fst) == 0 && !S_ISREG(fst.st_mode) && !S_ISLNK(fst.st_mode))
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "%s: not a regular file: a trace does not "
                       "replace it", path);
    snprintf(w->final_path, sizeof w->final_path, "%s", path);
    if (tt_partial_name(path, (long)getpid(), w->temp_path, sizeof w->temp_path) != TT_OK)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "%s: path too long", path);
    int fd = s->cfg.spares ? tt_partial_take(w->temp_path) : -1;
    if (fd < 0)
        fd = tt_partial_create(w->temp_path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(w->temp_path);
        }
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "cannot create %s: %s", w->temp_path,
                       strerror(e));
    }
    w->file_dev = (uint64_t)st.st_dev;
    w->file_ino = (uint64_t)st.st_ino;
    /* out of the program's way: high up, close-on-exec, reserved (the essay above); a dup
     * shares the open file description, so the lock stays held */
    int hi = tt_fd_high(fd);
    if (hi >= 0) {
        close(fd);
        fd = hi;
    }
    w->fd = fd;
    w->file = true;
    w->fd_slot = tt_fd_reserve(fd, fd_move, w);
    return TT_OK;
}

/* Returns the error of this write (0: the manifest is in the file); w->write_errno and its
 * offset keep the first error of the run. */
static int manifest_write(struct tt_writer *w)
{
    uint8_t buf[TT_MANIFEST_SIZE];
    tt_manifest_encode(buf, &w->m);
    int saved = w->write_errno;
    uint64_t saved_off = w->write_errno_off;
    w->write_errno = 0; /* the manifest is always attempted: it records the error */
    int e = sink_write(w, 0, buf, sizeof buf);
    if (saved) {
        w->write_errno = saved;
        w->write_errno_off = saved_off;
    }
    return e;
}

/* Maps the whole memory budget for the buffers at open, so the recording's footprint is fixed:
 * it does not grow with the length of the run. Only the first TT_POOL_FIRST bytes of the first
 * buffer are faulted in here (a short process writes less: a whole buffer cost it 64 faults);
 * once a buffer was handed over, the swapper faults in the rest and the next ones a buffer at a
 * time while it has nothing else to do, a few ahead of those handed out (swapper.c,
 * TT_POOL_AHEAD), in the order buf_new hands them out. A first touch of a page costs several microseconds on
 * virtual machines (7 us measured on ours: 450 us per 256 KiB buffer), so this keeps it off the
 * recording threads, and opening a session does not wait for the whole budget (8 MiB took about
 * 5 ms) nor does a short run pay for buffers it never uses. Buffers are carved from the pool as
 * they are first needed and reused from the free list, so no page is faulted twice. */
#define TT_POOL_FIRST (16u << 10)
static int pool_map(struct tt_writer *w)
{
    w->pool_len = w->nbufs_max * w->buffer_bytes;
    /* the growth beyond the budget is reserved now too (address space, no memory until a
     * buffer is used), so growing maps nothing in the middle of a run */
    w->pool_map_len = w->nbufs_cap * w->buffer_bytes;
    /* in the runtime's region when there is one: the program's mappings stay where they are */
    void *p = tt_region_map(w->pool_map_len);
    w->pool_in_region = p != NULL;
    if (!p)
        p = mmap(NULL, w->pool_map_len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    w->pool = p;
    w->pool_ready = w->buffer_bytes < TT_POOL_FIRST ? w->buffer_bytes : TT_POOL_FIRST;
    if (!tt_pool_populate(w, 0, w->pool_ready)) {
        /* an older kernel: touch every page now, before any thread writes there */
        long page = sysconf(_SC_PAGESIZE);
        for (uint64_t at = 0; at < w->pool_len; at += (uint64_t)(page > 0 ? page : 4096))
            ((volatile uint8_t *)p)[at] = 0;
        w->pool_ready = w->pool_len;
    }
    return 0;
}

/* The manifest as it stands at open: the file's identity, the clock, and no data yet. */
static void manifest_begin(tt_session *s, struct tt_writer *w)
{
    const struct tt_config_impl *c = &s->cfg;
    tt_manifest *m = &w->m;
    m->version = TT_FORMAT_VERSION;
    m->lib_version = TT_VERSION_NUMBER;
    m->block_size = w->block_size;
    m->build_id_len = (uint32_t)tt_build_id_self(m->build_id, sizeof m->build_id);
    snprintf(m->caller, sizeof m->caller, "%s", c->caller);
    /* provisional, over 0.2 ms, for a file whose run dies before close (recover); close
     * measures the rate over the whole run */
    tt_calib_begin(&w->calib);
    m->ticks_per_sec = tt_calib_end(&w->calib, TT_CALIB_OPEN_NS, 0);
    m->flags = tt_ticks_are_tsc() ? TT_MF_TSC : 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    m->tick_origin = tt_ticks();
    m->realtime_origin_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
    m->pid = (uint32_t)getpid();
    m->data_offset = TT_MANIFEST_SIZE;
    m->data_end = TT_MANIFEST_SIZE;
    m->file_size = TT_MANIFEST_SIZE;
    w->file_off = TT_MANIFEST_SIZE;
    w->checked_off = TT_MANIFEST_SIZE;
}

int tt_writer_open(tt_session *s, tt_error_info *err)
{
    struct tt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    s->w = w;
    w->fd = -1;
    w->fd_slot = -1;
    w->fd_lost = -1;
    const struct tt_config_impl *c = &s->cfg;
    w->buffer_bytes = c->buffer_bytes;
    w->nbufs_max = c->memory_bytes / c->buffer_bytes;
    /* Before a thread waits for the budget, the budget grows (pool.c, grow_budget): by as much
     * again three times over, at most 56 MiB more (the default 8 MiB grows to 32). A swapper
     * that was descheduled for a few milliseconds, or that fell behind for a while, then costs
     * the recording threads nothing; only a swapper slower than them for longer stalls them.
     * Caller storage never grows. */
    uint64_t more = 3 * w->nbufs_max, more_max = (UINT64_C(56) << 20) / c->buffer_bytes;
    w->nbufs_cap = c->storage ? w->nbufs_max : w->nbufs_max + (more < more_max ? more : more_max);
    w->block_size = (uint32_t)c->block_bytes;
    w->chunk_cap = tt_chunk_body_max(c->buffer_bytes);
    if (c->storage) {
        tt_writer_limits lim = { c->buffer_bytes, c->memory_bytes, (uint32_t)c->block_bytes,
                                 (uint32_t)c->max_threads, c->max_event, c->object_bytes };
        tt_writer_capacity cap;
        int rc = tt_writer_capacity_of(&lim, &cap, err);
        if (rc == TT_OK && c->storage_len < cap.total)
            rc = tt_fail(err, TT_E_STORAGE, 0, UINT64_MAX,
                         "writer storage of %zu bytes is smaller than the capacity %llu",
                         c->storage_len, (unsigned long long)cap.total);
        if (rc != TT_OK) {
            free(w);
            s->w = NULL;
            return rc;
        }
        /* [buffers][chunk buffer ... block buffer][per-thread state][objects] */
        w->storage = c->storage;
        w->storage_len = cap.buffers;
        w->chunk = w->storage + cap.buffers;
        w->block = w->chunk + (cap.swapper - c->block_bytes);
        w->threads_area = w->chunk + cap.swapper;
        w->threads_len = cap.threads;
    } else {
        w->chunk = malloc(TT_CHUNK_HEADER + w->chunk_cap);
        w->block = malloc(w->block_size);
        if (!w->chunk || !w->block || pool_map(w) != 0) {
            tt_writer_free(s);
            return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
        }
    }
    pthread_mutex_init(&w->qlock, NULL);
    pthread_mutex_init(&w->encode_lock, NULL);
    pthread_mutex_init(&w->fd_lock, NULL);
    pthread_cond_init(&w->qcond, NULL);
    pthread_cond_init(&w->fcond, NULL);
    pthread_cond_init(&w->scond, NULL);

    w->msink = c->memory_sink;
    w->cb = c->cb_fn;
    w->cb_ctx = c->cb_ctx;
    if (!w->msink && !w->cb) {
        int rc = open_file(s, w, err);
        if (rc != TT_OK) {
            tt_writer_free(s);
            return rc;
        }
    }
    if (w->msink) {
        w->msink->data = NULL;
        w->msink->len = 0;
        w->msink->cap_ = 0;
    }

    manifest_begin(s, w);
    manifest_write(w);
    if (w->write_errno) {
        int e = w->write_errno;
        int rc = tt_fail(err, TT_E_IO, e, 0, "cannot write the manifest of %s: %s",
                         w->file ? w->temp_path : "the sink", strerror(e));
        if (w->file)
            unlink(w->temp_path);
        tt_writer_free(s);
        return rc;
    }

    /* close uses an asymmetric barrier, so the hot path needs no fence (see tt_writer_close) */
    if (tt_tables_open(s, &w->tables) != TT_OK || tt_chaos_open(s) != TT_OK) {
        if (w->file)
            unlink(w->temp_path);
        tt_writer_free(s);
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    }

    w->membarrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;

    int prc = 0;
    if (s->cfg.lazy_swapper)
        w->swapper_lazy = true; /* tt_swapper_ensure, at the first buffer handed over */
    else
        prc = tt_swapper_start(s, w);
    if (prc != 0) {
        if (w->file)
            unlink(w->temp_path);
        tt_writer_free(s);
        return tt_fail(err, TT_E_NOMEM, prc, UINT64_MAX, "cannot start the swapper thread");
    }
    return TT_OK;
}

/* ---------------------------------------------------------------- close */

static void write_tables(tt_session *s, struct tt_writer *w)
{
    tt_manifest *m = &w->m;
    /* the tables are chunks too; they reuse the chunk buffer, growing it if needed */
    uint64_t need_thr = (uint64_t)s->nthreads * TT_THREAD_ROW;
    uint64_t need_obj = 0;
    for (uint32_t id = 1; id <= s->names.count; id++) {
        uint8_t k = 0;
        const char *nm = NULL;
        uint32_t len = 0;
        tt_names_get(&s->names, id, &k, &nm, &len);
        need_obj += 1 + 5 + len;
    }
    uint64_t need = need_thr > need_obj ? need_thr : need_obj;
    uint8_t *buf = w->chunk;
    bool own = false;
    if (need > w->chunk_cap) {
        buf = malloc(TT_CHUNK_HEADER + need);
        own = true;
        if (!buf) {
            w->write_errno = ENOMEM;
            return;
        }
    }
    uint8_t *saved = w->chunk;
    w->chunk = buf;

    m->threads_offset = w->file_off + w->block_len;
    uint8_t *o = buf + TT_CHUNK_HEADER;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        struct tt_rec_thread *t = tt_rec_of(s->threads[i]);
        tt_thread_entry e = { t->base.id, t->base.os_tid, t->base.name_id, 0, t->seq, t->chunks,
                              t->first_time, t->last_time };
        tt_thread_row_encode(o, &e);
        o += TT_THREAD_ROW;
    }
    struct tt_chunk_header h = { .type = TT_CHUNK_THREADS, .thread = TT_NO_THREAD,
                                 .count = s->nthreads, .body_len = (uint32_t)need_thr };
    tt_writer_chunk_emit(w, &h);
    m->threads_length = TT_CHUNK_HEADER + need_thr;
    m->thread_count = s->nthreads;

    m->objects_offset = w->file_off + w->block_len;
    o = buf + TT_CHUNK_HEADER;
    for (uint32_t id = 1; id <= s->names.count; id++) {
        uint8_t k = 0;
        const char *nm = NULL;
        uint32_t len = 0;
        tt_names_get(&s->names, id, &k, &nm, &len);
        *o++ = k;
        o = tt_put_varint(o, len);
        memcpy(o, nm, len);
        o += len;
    }
    h = (struct tt_chunk_header){ .type = TT_CHUNK_OBJECTS, .thread = TT_NO_THREAD,
                                  .count = s->names.count, .body_len = (uint32_t)(o - buf - TT_CHUNK_HEADER) };
    tt_writer_chunk_emit(w, &h);
    m->objects_length = TT_CHUNK_HEADER + h.body_len;
    m->object_count = s->names.count;
    w->chunk = saved;
    if (own)
        free(buf);
}

/* One function, over 120 lines, on purpose: stopping the recording threads, draining the queue,
 * the tables, the manifest, the sync and the rename are one sequence whose order is the point,
 * and each step says why it comes where it does. */
int tt_writer_close(tt_session *s, tt_error_info *err)
{
    struct tt_writer *w = s->w;
    int rc = TT_OK, lrc;

    tt_chaos_note(s);
    /* under qlock: a thread still recording (a finish under it) grows the budget there */
    pthread_mutex_lock(&w->qlock);
    uint64_t grown = w->grown;
    pthread_mutex_unlock(&w->qlock);
    if (grown) {
        /* the growth of the budget, reported where `tinytrace info` shows the run's notes */
        char meta[96];
        uint32_t id;
        snprintf(meta, sizeof meta, "budget-grown=%" PRIu64 " of %" PRIu64 " bytes",
                 grown * w->buffer_bytes, w->pool_len);
        tt_intern(s, TT_OBJ_META, meta, &id);
    }
    /* the closing thread's last event */
    struct tt_rec_thread *self = tt_rec_of(tt_thread_lookup_slow(s, &lrc));
    if (self && !self->base.ended) {
        atomic_store_explicit(&self->base.busy, 1, memory_order_seq_cst);
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&self->steal, memory_order_seq_cst))
            tt_writer_steal_ack_(s, self);
        tt_writer_append_structural(s, self, TT_EV_SESSION_END, 0);
        atomic_store_explicit(&self->base.busy, 0, memory_order_release);
    }

    /* Stop the recording threads. A thread marks itself busy (relaxed store), then reads
     * `closing` (relaxed load). We store `closing`, then run a process-wide barrier: after it,
     * every thread either has its busy store visible to us or will see closing = 1 in its next
     * call. Then we wait for each busy flag to drop (acquire: its appends are visible). */
    atomic_store_explicit(&s->closing, 1, memory_order_seq_cst);
    if (!w->membarrier_ok || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        atomic_thread_fence(memory_order_seq_cst);
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->nthreads;
    pthread_mutex_unlock(&s->lock);
    for (uint32_t i = 0; i < n; i++) {
        struct tt_rec_thread *t = tt_rec_of(s->threads[i]);
        while (atomic_load_explicit(&t->base.busy, memory_order_acquire))
            sched_yield();
        /* under qlock: a thread waiting for the budget may be taking the buffer (steal_one) */
        pthread_mutex_lock(&w->qlock);
        if (!t->base.ended && t->buf) {
            t->base.ended = 1;
            tt_writer_hand_over_locked(w, t, true);
        }
        pthread_mutex_unlock(&w->qlock);
    }

    /* a process that never needed its swapper: the queue is encoded here, and its events are
     * in the file before any table is built (a process killed meanwhile keeps them for
     * recover) */
    pthread_mutex_lock(&w->qlock);
    tt_swapper_encode_here_locked(s, w);
    pthread_mutex_unlock(&w->qlock);
    tt_swapper_stop(w);

    /* The rest is written by the closing thread: hold SIGXFSZ off it, as on the swapper, so a
     * file-size limit is an EFBIG here too; the signal our own write raised is taken back below
     * (sigtimedwait), never delivered to the program. */
    sigset_t xfsz, old_mask;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old_mask);
    bool failed_before = w->write_errno != 0;

    tt_manifest *m = &w->m;
    if (w->file) { /* the tables and the final manifest never go into another file */
        pthread_mutex_lock(&w->fd_lock);
        fd_check(w, w->file_off);
        pthread_mutex_unlock(&w->fd_lock);
    }
    /* the tables, from here to the tail, go to the file in one write where they fit the block
     * (a short process's: one pwrite where there were two) */
    if (w->tables)
        tt_tables_finish(w->tables, w); /* the frames still open, the last partial blocks */
    m->data_end = tt_writer_tail_(w);
    write_tables(s, w);
    if (w->tables)
        tt_tables_write_tail(w->tables, w, s->nthreads);
    tt_writer_block_flush(w);
    m->file_size = w->file_off;
    m->block_count = (m->file_size - m->data_offset + w->block_size - 1) / w->block_size;
    /* The whole run's rate, checked against the estimate made at open: more than 5% off, a
     * deep suspend stopped the TSC or close runs on a core whose TSC disagrees with the opening
     * one's, and tt_calib_end measures afresh on this thread. */
    m->ticks_per_sec = tt_calib_end(&w->calib, TT_CALIB_MIN_NS, m->ticks_per_sec);
    m->stall_count = atomic_load(&w->stalls);
    m->threads_refused = atomic_load(&s->threads_refused);
    m->children_untraced = atomic_load(&s->children_untraced);
    m->execs_untraceable = atomic_load(&s->execs_untraceable);
    m->stall_ns = atomic_load(&w->stall_ns);
    m->flags |= TT_MF_FINALIZED;
    if (w->write_errno) {
        m->flags |= TT_MF_INCOMPLETE;
        m->write_errno = w->write_errno;
    }
    int werr = w->write_errno;
    int merr = manifest_write(w);
    if (!werr && w->write_errno)
        werr = w->write_errno;
    if (!failed_before && werr == EFBIG && !sigismember(&old_mask, SIGXFSZ)) {
        struct timespec zero = { 0, 0 };
        sigtimedwait(&xfsz, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);

    if (w->file) {
        /* durable before it has its name, unless the caller said it makes it so itself */
        if (!werr && s->cfg.sync)
            werr = file_sync(w);
        int cerr = file_close(w);
        if (!werr)
            werr = cerr;
        if (rename(w->temp_path, w->final_path) != 0) {
            int e = errno;
            return tt_fail(err, TT_E_IO, e, UINT64_MAX, "cannot rename %s to %s: %s",
                           w->temp_path, w->final_path, strerror(e));
        }
    }
    if (!werr)
        return rc; /* no message to make (strerror's locale look-up, at every close) */
    char why[4096 + 256];
    if (werr == EBADF && w->fd_lost >= 0 && w->reopen_errno)
        snprintf(why, sizeof why, "the program closed the trace file's descriptor (fd %d), "
                 "and opening %s again failed: %s (errno %d)", w->fd_lost, w->temp_path,
                 strerror(w->reopen_errno), w->reopen_errno);
    else if (werr == EBADF && w->fd_replaced)
        snprintf(why, sizeof why, "the program put a file of its own on the trace file's "
                 "descriptor (fd %d); what was written after that is not in the trace",
                 w->fd_lost);
    else
        snprintf(why, sizeof why, "%s (errno %d)", strerror(werr), werr);
    if (m->flags & TT_MF_INCOMPLETE) {
        pthread_mutex_lock(&w->qlock);
        uint64_t refused = w->refused;
        pthread_mutex_unlock(&w->qlock);
        rc = tt_fail(err, TT_E_IO, werr, w->write_errno_off,
                     "writing %s failed at offset %llu: %s; %s (%llu recording calls refused "
                     "with TT_E_STOPPED)", w->final_path[0] ? w->final_path : "the sink",
                     (unsigned long long)w->write_errno_off, why,
                     merr ? "the final manifest could not be written either, so the file is "
                            "unfinished (`tinytrace recover` can save its intact chunks)"
                          : "the file is marked incomplete",
                     (unsigned long long)refused);
    } else {
        rc = tt_fail(err, TT_E_IO, werr, UINT64_MAX, "finishing %s failed: %s",
                     w->final_path[0] ? w->final_path : "the sink", why);
    }
    return rc;
}

void tt_writer_free(tt_session *s)
{
    struct tt_writer *w = s->w;
    if (!w)
        return;
    tt_swapper_stop(w);
    tt_chaos_free(s);
    if (w->file)
        file_close(w);
    if (!w->storage) {
        struct tt_buf *b = w->free_list;
        while (b) {
            struct tt_buf *next = b->next;
            free(b);
            b = next;
        }
        for (struct tt_buf *q = w->held; q;) { /* data is in the pool */
            struct tt_buf *next = q->next;
            free(q);
            q = next;
        }
        for (struct tt_buf *q = w->qhead; q;) {
            struct tt_buf *next = q->next;
            free(q);
            q = next;
        }
        for (uint32_t i = 0; i < s->nthreads; i++)
            free(tt_rec_of(s->threads[i])->buf);
        free(w->chunk);
        free(w->block);
        if (w->pool)
            w->pool_in_region ? tt_region_unmap(w->pool, w->pool_map_len)
                              : (void)munmap(w->pool, w->pool_map_len);
    }
    tt_tables_free(w->tables);
    pthread_mutex_destroy(&w->qlock);
    pthread_mutex_destroy(&w->encode_lock);
    pthread_mutex_destroy(&w->fd_lock);
    pthread_cond_destroy(&w->qcond);
    pthread_cond_destroy(&w->fcond);
    pthread_cond_destroy(&w->scond);
    free(w);
    s->w = NULL;
}

