/* tt_verify: one sequential pass of a bounded reader over the whole file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static tt_verify_status status_of(int code)
{
    switch (code) {
    case TT_OK: return TT_VERIFY_OK;
    case TT_E_TRUNCATED: return TT_VERIFY_TRUNCATED;
    case TT_E_CHECKSUM: return TT_VERIFY_CHECKSUM;
    case TT_E_COUNTS: return TT_VERIFY_COUNTS;
    case TT_E_FORMAT: return TT_VERIFY_BAD_MAGIC;
    case TT_E_VERSION: return TT_VERIFY_BAD_VERSION;
    case TT_E_CAPACITY:
    case TT_E_EXHAUSTED:
    case TT_E_STORAGE: return TT_VERIFY_LIMIT;
    case TT_E_INCOMPLETE: return TT_VERIFY_INCOMPLETE;
    case TT_E_IO:
    case TT_E_NOMEM: return TT_VERIFY_IO;
    default: return TT_VERIFY_CORRUPT;
    }
}

const char *tt_verify_status_name(tt_verify_status st)
{
    switch (st) {
    case TT_VERIFY_OK: return "ok";
    case TT_VERIFY_TRUNCATED: return "truncated";
    case TT_VERIFY_CHECKSUM: return "checksum";
    case TT_VERIFY_COUNTS: return "counts";
    case TT_VERIFY_BAD_MAGIC: return "bad-magic";
    case TT_VERIFY_BAD_VERSION: return "bad-version";
    case TT_VERIFY_LIMIT: return "limit";
    case TT_VERIFY_CORRUPT: return "corrupt";
    case TT_VERIFY_INCOMPLETE: return "incomplete";
    case TT_VERIFY_IO: return "io";
    }
    return "unknown";
}

static int finish(tt_verify_result *res, int code, const tt_error_info *err)
{
    res->code = code;
    res->status = status_of(code);
    if (code != TT_OK) {
        res->offset = err->offset;
        snprintf(res->message, sizeof res->message, "%s", err->message);
    } else {
        res->offset = UINT64_MAX;
        res->message[0] = '\0';
    }
    return code;
}

int tt_verify(const tt_source *src, const tt_reader_limits *lim, tt_verify_result *res)
{
    return tt_verify_ex(src, lim, 0, res);
}

int tt_verify_ex(const tt_source *src, const tt_reader_limits *lim, unsigned flags,
                 tt_verify_result *res)
{
    tt_verify_result dummy;
    tt_error_info err = { 0 };
    tt_reader_capacity cap;
    tt_manifest m;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    res->chunk = UINT64_MAX;
    err.offset = UINT64_MAX;
    int rc = tt_reader_probe(src, lim, TT_CURSORS_SEQUENTIAL, &m, &cap, &err);
    if (rc != TT_OK)
        return finish(res, rc, &err);
    void *mem = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    if (!mem) {
        tt_fail(&err, TT_E_NOMEM, 0, UINT64_MAX, "%s: cannot allocate %llu bytes for the reader",
                src->name, (unsigned long long)cap.total);
        return finish(res, TT_E_NOMEM, &err);
    }
    tt_reader *r;
    rc = tt_reader_open(src, lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &err);
    if (rc == TT_OK) {
        rc = tt_reader_skim_(r, &res->events, &err);
        if (rc == TT_E_END)
            rc = TT_OK;
        res->chunks = tt_reader_chunks_read_(r);
        if (rc != TT_OK)
            res->chunk = res->chunks;
        if (rc == TT_OK && m.index_offset) {
            /* version 2: the index tables (their chunks' frames and checksums were checked by
             * the pass over the data area; the directory, block lists, seek batches and summary
             * by tt_index_open; every frame row with TT_VERIFY_FRAMES), and no index chunk in
             * the data area that the directory does not list */
            tt_index *ix;
            rc = tt_index_open(r, lim, &ix, &err);
            if (rc == TT_OK) {
                if (flags & TT_VERIFY_FRAMES)
                    rc = tt_index_check(ix, &err);
                if (rc == TT_OK && tt_index_chunks_(ix) != tt_reader_index_chunks_(r))
                    rc = tt_fail(&err, TT_E_COUNTS, 0, m.index_offset,
                                 "%s: the data area holds %llu index chunks, the directory lists "
                                 "%llu", src->name,
                                 (unsigned long long)tt_reader_index_chunks_(r),
                                 (unsigned long long)tt_index_chunks_(ix));
                tt_index_close(ix);
            }
        }
        tt_reader_close(r);
    }
    res->bytes = rc == TT_OK ? m.file_size : 0;
    free(mem);
    return finish(res, rc, &err);
}
