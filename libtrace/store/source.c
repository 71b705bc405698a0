/* SPDX-License-Identifier: MIT */
/* Sources: where a reader's bytes come from (a file, memory, a caller's callback).
 *
 * A source is a read function and a size; every reader of the store layer reads through one, so
 * a trace in memory or behind a network callback reads exactly as a file does. A file source
 * keeps one read-ahead window (below). Sources are thread-safe, as store.h promises.
 *
 * A replay reads its trace from inside the replayed program, which may close every descriptor
 * it did not open, or dup2 its own files over them, while the replay still reads. So a file
 * source's descriptor is put high up, close-on-exec, and reserved in the fd registry
 * (base/fds.c), as the writer's is: the preload library then keeps the program's close,
 * close_range, dup2 and fcntl off it, and a dup2 onto its number first moves it (fd_move),
 * under the lock that every read of the descriptor takes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cursor.h"


static int pread_all(int fd, uint64_t off, void *dst, size_t len, size_t *got)
{
    size_t n = 0;
    while (n < len) {
        ssize_t k = pread(fd, (uint8_t *)dst + n, len - n, (off_t)(off + n));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            *got = n;
            return TT_E_IO;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    *got = n;
    return TT_OK;
}

/* A file source reads through one window of READ_AHEAD bytes: a pass over a file is mostly
 * 48-byte headers and small chunks (frame blocks of a few hundred bytes, 32 KiB event chunks),
 * and a system call for each was most of what verify cost. A read that is not inside the window
 * refills it from its own offset; reads of half a window or more go straight to the file. The
 * lock keeps the source thread-safe, as its contract says. A file smaller than READ_AHEAD gets
 * a window of its size in pages: the traces of a process tree are a few KiB each, and a tool
 * that opens a thousand of them (`record`'s tree scan, `info`, `tree`) allocated, faulted in
 * and gave back 256 KiB for each. */
#define READ_AHEAD (256u * 1024u)

struct file_ctx {
    int fd;   /* under lock: fd_move may change it */
    int slot; /* in the fd registry, -1: none */
    pthread_mutex_t lock;
    uint64_t win_off;
    size_t win_len;
    size_t win_cap; /* READ_AHEAD, or a smaller file's size in pages, plus one */
    uint8_t win[];
};

/* The window for a file of @size bytes (as it was opened: one that grows later is still read
 * whole, a window at a time). */
static size_t window_for(uint64_t size)
{
    return size >= READ_AHEAD ? READ_AHEAD : ((size_t)size + 4095u) / 4096u * 4096u + 4096u;
}

static int fd_read(void *ctx, uint64_t off, void *dst, size_t len, size_t *got)
{
    struct file_ctx *fc = ctx;
    pthread_mutex_lock(&fc->lock);
    if (len >= fc->win_cap / 2) {
        int rc = pread_all(fc->fd, off, dst, len, got);
        pthread_mutex_unlock(&fc->lock);
        return rc;
    }
    if (off < fc->win_off || off - fc->win_off > fc->win_len ||
        len > fc->win_len - (off - fc->win_off)) {
        size_t n = 0;
        int rc = pread_all(fc->fd, off, fc->win, fc->win_cap, &n);
        fc->win_off = off;
        fc->win_len = rc == TT_OK ? n : 0;
        if (rc != TT_OK) {
            pthread_mutex_unlock(&fc->lock);
            return pread_all(fc->fd, off, dst, len, got); /* say what a plain read says */
        }
    }
    size_t at = (size_t)(off - fc->win_off), n = fc->win_len - at < len ? fc->win_len - at : len;
    if (n)
        memcpy(dst, fc->win + at, n);
    pthread_mutex_unlock(&fc->lock);
    *got = n;
    return TT_OK;
}

int tt_source_mem_read_(void *ctx, uint64_t off, void *dst, size_t len, size_t *got)
{
    tt_source *src = ctx;
    if (off >= src->size) {
        *got = 0;
        return TT_OK;
    }
    size_t n = src->size - off < len ? (size_t)(src->size - off) : len;
    if (n) /* a read of nothing may pass a NULL buffer (recover, for an empty chunk body) */
        memcpy(dst, (const uint8_t *)src->mem + off, n);
    *got = n;
    return TT_OK;
}

/* The fd registry's move: the program puts a file on @fd, the source's number (dup2). Called
 * with the registry's lock held; the source's lock waits for a read in flight. */
static int fd_move(void *ctx, int fd)
{
    struct file_ctx *fc = ctx;
    int e = 0;
    pthread_mutex_lock(&fc->lock);
    if (fc->fd == fd) {
        fc->fd = tt_fd_relocate(fc->slot, fd);
        if (fc->fd < 0) /* no number free: reads fail from now on (EBADF), and say so */
            e = errno;
    }
    pthread_mutex_unlock(&fc->lock);
    return e;
}

int tt_source_file(tt_source *src, const char *path, tt_error_info *err)
{
    memset(src, 0, sizeof *src);
    src->fd = -1;
    snprintf(src->name, sizeof src->name, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "%s: not a regular file", path);
    }
    const size_t cap = window_for((uint64_t)st.st_size);
    struct file_ctx *fc = malloc(sizeof *fc + cap);
    if (!fc) {
        close(fd);
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "%s: out of memory", path);
    }
    int hi = tt_fd_high(fd); /* out of the program's way (the essay above) */
    if (hi >= 0) {
        close(fd);
        fd = hi;
    }
    fc->fd = fd;
    pthread_mutex_init(&fc->lock, NULL);
    fc->win_off = 0;
    fc->win_len = 0;
    fc->win_cap = cap;
    fc->slot = tt_fd_reserve(fd, fd_move, fc);
    src->fd = fd;
    src->read = fd_read;
    src->ctx = fc;
    src->size = (uint64_t)st.st_size;
    return TT_OK;
}

void tt_source_memory(tt_source *src, const void *data, size_t len)
{
    memset(src, 0, sizeof *src);
    src->fd = -1;
    src->mem = data;
    src->size = len;
    src->read = tt_source_mem_read_;
    src->ctx = src;
    snprintf(src->name, sizeof src->name, "<memory>");
}

void tt_source_callback(tt_source *src, tt_read_fn read, void *ctx, uint64_t size)
{
    memset(src, 0, sizeof *src);
    src->fd = -1;
    src->read = read;
    src->ctx = ctx;
    src->size = size;
    snprintf(src->name, sizeof src->name, "<callback>");
}

void tt_source_close(tt_source *src)
{
    if (src && src->fd >= 0) {
        if (src->read == fd_read && src->ctx) {
            struct file_ctx *fc = src->ctx;
            tt_fd_release(fc->slot); /* after it no move runs: fc->fd is final */
            if (fc->fd >= 0)
                close(fc->fd);
            pthread_mutex_destroy(&fc->lock);
            free(fc);
            src->ctx = NULL;
        } else {
            close(src->fd);
        }
        src->fd = -1;
    }
}
