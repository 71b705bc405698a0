/* SPDX-License-Identifier: MIT */
/* Directory listings: readdir and readdir64 are inputs (TT_CH_DIR).
 *
 * What a directory holds is part of the world a program reads: Python lists each directory of
 * its path to find a module, a build tool lists its sources, a test runner its tests. A listing
 * that changed between the recording and the replay (the trace itself, or a file a replay
 * wrote, now sits in the directory) sends such a program another way, and since Python
 * releases its lock around each readdir, one entry more is already another schedule. So every
 * entry readdir returns, and the end of the listing, is recorded; in replay the directory is
 * still opened for real (the stream, its fd and closedir stay the program's), but readdir
 * returns the recorded entries, from a buffer of the stream's own, as readdir would.
 *
 * Not covered: readdir_r, and what glibc reads by itself (scandir, glob, ftw and nftw call its
 * internal readdir); opendir itself stays live, so a directory that is gone fails to open.
 */
#include "preload.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct dirent *(*readdir_fn)(DIR *);

/* replay: the buffer readdir returns for each open stream, by its address */
#define STREAMS 256
static struct {
    DIR *d;
    struct dirent *buf;
} streams[STREAMS] TT_BIG_BSS;
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;

/* The buffer of @d (the guard is held: the allocation is tinytrace's), or NULL. */
static struct dirent *stream_buffer(DIR *d)
{
    struct dirent *b = NULL;
    pthread_mutex_lock(&streams_lock);
    int free_slot = -1;
    for (int i = 0; i < STREAMS && !b; i++) {
        if (streams[i].d == d)
            b = streams[i].buf;
        else if (!streams[i].d && free_slot < 0)
            free_slot = i;
    }
    if (!b && free_slot >= 0 && (b = malloc(sizeof *b)) != NULL) {
        streams[free_slot].d = d;
        streams[free_slot].buf = b;
    }
    pthread_mutex_unlock(&streams_lock);
    return b;
}

static void stream_forget(DIR *d)
{
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < STREAMS; i++) {
        if (streams[i].d == d) {
            free(streams[i].buf);
            streams[i].d = NULL;
            streams[i].buf = NULL;
        }
    }
    pthread_mutex_unlock(&streams_lock);
}

static struct dirent *readdir_any(enum real_fn real, DIR *d)
{
    readdir_fn f = (readdir_fn)tt_pl_real(real);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(d);
    int e0 = errno;
    struct in_head h = { 0 };
    struct dirent rec;
    struct iovec v = { &rec, sizeof rec };
    struct dirent *live = NULL;
    if (tt_pl_recording(s)) {
        errno = 0;
        live = f(d);
        h.ret = live != NULL;
        h.err = live ? 0 : errno;
        if (live) {
            /* the entry up to its name's end; the rest of the record is padding */
            size_t n = offsetof(struct dirent, d_name) + strnlen(live->d_name, sizeof rec.d_name);
            n = n < sizeof rec ? n + 1 : sizeof rec;
            memcpy(&rec, live, n);
            h.len = n;
        }
    }
    if (!tt_pl_in_simple(s, TT_CH_DIR, S_readdir, &h, &v, 1)) {
        /* the replay failed and the program goes on: live */
        tt_rt_guard_leave();
        return f(d);
    }
    struct dirent *out = live;
    if (!tt_pl_recording(s)) {
        out = NULL;
        if (h.ret) {
            struct dirent *b = stream_buffer(d);
            if (b) {
                memset(b, 0, sizeof *b);
                memcpy(b, &rec, h.len < sizeof rec ? (size_t)h.len : sizeof rec);
                b->d_name[sizeof b->d_name - 1] = '\0';
                out = b;
            }
        }
    }
    tt_rt_guard_leave();
    errno = out || !h.err ? e0 : h.err;
    return out;
}

TT_EXPORT struct dirent *readdir(DIR *d)
{
    return readdir_any(RF_readdir, d);
}

TT_EXPORT struct dirent64 *readdir64(DIR *d)
{
    _Static_assert(sizeof(struct dirent) == sizeof(struct dirent64), "one layout on LP64");
    return (struct dirent64 *)(void *)readdir_any(RF_readdir64, d);
}

typedef int (*closedir_fn)(DIR *);

TT_EXPORT int closedir(DIR *d)
{
    closedir_fn f = REAL(closedir, closedir_fn);
    if (tt_rt_guard_enter()) {
        stream_forget(d);
        tt_rt_guard_leave();
    }
    return f(d);
}
