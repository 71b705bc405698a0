/* SPDX-License-Identifier: MIT */
/* Shared helpers of the tinytrace test suites; see common.h. */
#include "common.h"

#include "harness.h"
#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char tt_test_dir[4096];

void tt_test_dir_setup(void)
{
    if (tt_test_dir[0] != '\0')
        return; /* made already: by the suite's .init before a test's own */
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    int n = snprintf(tt_test_dir, sizeof tt_test_dir, "%s/tinytrace-test-XXXXXX", base);
    cr_assert(n > 0 && (size_t)n < sizeof tt_test_dir, "TMPDIR too long");
    cr_assert_not_null(mkdtemp(tt_test_dir), "mkdtemp(%s): %s", tt_test_dir, strerror(errno));
}

static int make_writable_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_D || type == FTW_DNR)
        (void)chmod(path, (st->st_mode & 07777) | S_IRWXU);
    return 0;
}

static int remove_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP || type == FTW_D || type == FTW_DNR)
        (void)rmdir(path);
    else
        (void)unlink(path);
    return 0;
}

void tt_test_remove_tree(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return;
    /* Pre-order pass first: a test may leave a directory without write or search bits. */
    (void)nftw(path, make_writable_cb, 16, FTW_PHYS);
    (void)nftw(path, remove_cb, 16, FTW_PHYS | FTW_DEPTH);
}

void tt_test_dir_teardown(void)
{
    if (tt_test_dir[0] != '\0')
        tt_test_remove_tree(tt_test_dir);
    tt_test_dir[0] = '\0';
}

const char *tt_test_path(const char *name)
{
    static char ring[8][4200];
    static unsigned next;
    char *p = ring[next++ % 8];
    snprintf(p, sizeof ring[0], "%s/%s", tt_test_dir, name);
    return p;
}

uint64_t tt_test_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tt_test_mix(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^
                 (c + 0x8CB92BA72F3D8DD7ull) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    return x;
}

static inline uint64_t fill_word(uint64_t seed, uint64_t i)
{
    /* splitmix64 of (seed, word index): cheap enough for megabytes of payload. */
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void tt_test_fill(void *dst, size_t len, uint64_t seed)
{
    uint8_t *p = dst;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = fill_word(seed, i / 8);
        memcpy(p + i, &w, 8);
    }
    if (i < len) {
        uint64_t w = fill_word(seed, i / 8);
        memcpy(p + i, &w, len - i);
    }
}

size_t tt_test_check_fill(const void *p, size_t len, uint64_t seed)
{
    const uint8_t *b = p;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = fill_word(seed, i / 8);
        if (memcmp(b + i, &w, 8) != 0)
            break;
    }
    for (; i < len; i++) {
        uint64_t w = fill_word(seed, i / 8);
        if (b[i] != (uint8_t)(w >> (8 * (i % 8))))
            return i;
    }
    return len;
}

int tt_test_is_structural(unsigned kind)
{
    return kind == TT_EV_SESSION_START || kind == TT_EV_SESSION_END ||
           kind == TT_EV_THREAD_START || kind == TT_EV_THREAD_END;
}

int tt_test_is_tracer(const tt_reader *r, const tt_event *ev)
{
    uint32_t stall = tt_reader_find_object(r, TT_OBJ_FUNCTION, TT_STALL_FUNCTION);
    return stall && (ev->kind == TT_EV_ENTER || ev->kind == TT_EV_EXIT) &&
           ev->sp.function == stall;
}

static int reader_open(tt_test_reader *tr, tt_cursor_mode mode, tt_error_info *err)
{
    tt_reader_limits_default(&tr->lim);
    int rc = tt_reader_probe(&tr->src, &tr->lim, mode, &tr->m, &tr->cap, err);
    if (rc != TT_OK)
        return rc;
    tr->storage = aligned_alloc(64, (tr->cap.total + 63) / 64 * 64 + 64);
    if (tr->storage == NULL)
        return TT_E_NOMEM;
    return tt_reader_open(&tr->src, &tr->lim, mode, tr->storage, tr->cap.total, &tr->r, err);
}

int tt_test_reader_open_mem(tt_test_reader *tr, const void *data, size_t len, tt_cursor_mode mode,
                            tt_error_info *err)
{
    memset(tr, 0, sizeof *tr);
    tt_source_memory(&tr->src, data, len);
    return reader_open(tr, mode, err);
}

int tt_test_reader_open_file(tt_test_reader *tr, const char *path, tt_cursor_mode mode,
                             tt_error_info *err)
{
    memset(tr, 0, sizeof *tr);
    int rc = tt_source_file(&tr->src, path, err);
    if (rc != TT_OK)
        return rc;
    tr->own_src = 1;
    return reader_open(tr, mode, err);
}

void tt_test_reader_close(tt_test_reader *tr)
{
    if (tr->r != NULL)
        tt_reader_close(tr->r);
    tr->r = NULL;
    free(tr->storage);
    tr->storage = NULL;
    if (tr->own_src)
        tt_source_close(&tr->src);
    tr->own_src = 0;
}

void tt_test_read_cursor(tt_test_reader *tr, uint32_t cursor, tt_test_events *out)
{
    memset(out, 0, sizeof *out);
    for (;;) {
        tt_event ev;
        int rc = tt_reader_next(tr->r, cursor, &ev, &out->err);
        if (rc != TT_OK) {
            out->end_code = rc;
            return;
        }
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 64;
            out->v = realloc(out->v, out->cap * sizeof *out->v);
            cr_assert_not_null(out->v);
        }
        tt_test_event *te = &out->v[out->n++];
        te->ev = ev;
        te->payload = NULL;
        if (ev.payload_len > 0) {
            cr_assert_not_null(ev.payload, "event with payload_len %llu has a NULL payload",
                               (unsigned long long)ev.payload_len);
            te->payload = malloc(ev.payload_len);
            cr_assert_not_null(te->payload);
            memcpy(te->payload, ev.payload, ev.payload_len);
        }
        te->ev.payload = te->payload;
    }
}

void tt_test_events_free(tt_test_events *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].payload);
    free(e->v);
    memset(e, 0, sizeof *e);
}

size_t tt_test_events_nth_call(const tt_test_events *e, size_t i)
{
    for (size_t k = 0; k < e->n; k++) {
        if (tt_test_is_structural(e->v[k].ev.kind))
            continue;
        if (i == 0)
            return k;
        i--;
    }
    return SIZE_MAX;
}

size_t tt_test_events_count_calls(const tt_test_events *e)
{
    size_t c = 0;
    for (size_t k = 0; k < e->n; k++)
        c += !tt_test_is_structural(e->v[k].ev.kind);
    return c;
}

int tt_test_open_record_mem(tt_memory_sink *sink, tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    tt_config_init(&cfg);
    int rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, err);
    if (rc != TT_OK)
        return rc;
    memset(sink, 0, sizeof *sink);
    tt_config_set_memory_sink(&cfg, sink);
    return tt_session_open(&cfg, s, err);
}

int tt_test_open_replay_mem(tt_source *src, const void *data, size_t len, tt_session **s,
                            tt_error_info *err)
{
    tt_config cfg;
    tt_config_init(&cfg);
    int rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, err);
    if (rc != TT_OK)
        return rc;
    tt_source_memory(src, data, len);
    tt_config_set_source(&cfg, src);
    return tt_session_open(&cfg, s, err);
}

int tt_test_open_record_file(const char *path, tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    tt_config_init(&cfg);
    int rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, err);
    if (rc == TT_OK)
        rc = tt_config_set_str(&cfg, TT_PARAM_FILE, path, err);
    if (rc != TT_OK)
        return rc;
    return tt_session_open(&cfg, s, err);
}

uint32_t tt_test_thread_by_name(tt_test_reader *tr, const char *name)
{
    size_t len = strlen(name);
    for (uint32_t t = 0; t < tr->m.thread_count; t++) {
        const tt_thread_entry *te = tt_reader_thread(tr->r, t);
        if (te == NULL || te->name == 0)
            continue;
        tt_object_entry o;
        if (tt_reader_object(tr->r, te->name, &o) != TT_OK)
            continue;
        if (o.kind == TT_OBJ_THREAD && o.name_len == len && memcmp(o.name, name, len) == 0)
            return t;
    }
    return UINT32_MAX;
}

int tt_test_contains(const void *hay, size_t hlen, const void *needle, size_t nlen)
{
    if (nlen == 0)
        return 1;
    return memmem(hay, hlen, needle, nlen) != NULL;
}

int tt_test_has_number(const char *text, uint64_t n)
{
    const char *p = text;
    while (*p) {
        if (isdigit((unsigned char)*p)) {
            char *end;
            unsigned long long v = strtoull(p, &end, 10);
            if (v == n)
                return 1;
            p = end;
        } else {
            p++;
        }
    }
    return 0;
}
