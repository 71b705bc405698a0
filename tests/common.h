/* SPDX-License-Identifier: MIT */
/* Shared helpers of the tinytrace test suites: a temporary directory per test, deadlines,
 * value generators that give every event its own bytes, and a reader opened the documented way
 * (probe, allocate exactly the capacity, open). */
#ifndef TT_TESTS_COMMON_H
#define TT_TESTS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/tinytrace.h>

/* The test's own directory, made by tt_test_dir_setup (Criterion .init) and removed with all
 * its content by tt_test_dir_teardown (.fini). */
extern char tt_test_dir[4096];
void tt_test_dir_setup(void);
void tt_test_dir_teardown(void);
/* "<tt_test_dir>/<name>" into a static ring of buffers (valid for the next 7 calls). */
const char *tt_test_path(const char *name);
/* Removes @path and everything under it; tolerates read-only directories. */
void tt_test_remove_tree(const char *path);

/* Monotonic clock in nanoseconds (for measuring; no test waits on a fixed sleep). */
uint64_t tt_test_now_ns(void);

/* A 64-bit mix of (a, b, c): distinct inputs give distinct-looking values. */
uint64_t tt_test_mix(uint64_t a, uint64_t b, uint64_t c);
/* Fills @dst with @len bytes that depend on @seed and on the position. */
void tt_test_fill(void *dst, size_t len, uint64_t seed);
/* Index of the first byte of @p that differs from tt_test_fill(@seed), or @len if none. */
size_t tt_test_check_fill(const void *p, size_t len, uint64_t seed);

/* 1 for the structural kinds (session/thread start/end) that replay skips. */
int tt_test_is_structural(unsigned kind);

/* 1 for an event of the tracer's own (an enter or exit of TT_STALL_FUNCTION, a wait for the
 * memory budget) in a trace read by @r: it stands for no call of the program. */
int tt_test_is_tracer(const tt_reader *r, const tt_event *ev);

/* A reader over a source, sized the documented way. */
typedef struct tt_test_reader {
    tt_source src;
    int own_src;           /* tt_source_close on close */
    tt_reader_limits lim;
    tt_manifest m;
    tt_reader_capacity cap;
    void *storage;
    tt_reader *r;
} tt_test_reader;

/* Opens a reader over memory (@path NULL) or a file. Returns the tt_error; fills @err. */
int tt_test_reader_open_mem(tt_test_reader *tr, const void *data, size_t len, tt_cursor_mode mode,
                            tt_error_info *err);
int tt_test_reader_open_file(tt_test_reader *tr, const char *path, tt_cursor_mode mode,
                             tt_error_info *err);
void tt_test_reader_close(tt_test_reader *tr);

/* One event read back, with its own copy of the payload. */
typedef struct tt_test_event {
    tt_event ev;
    uint8_t *payload;      /* malloc'd copy, NULL when payload_len == 0 */
} tt_test_event;

typedef struct tt_test_events {
    tt_test_event *v;
    size_t n, cap;
    int end_code;          /* the code that ended the read: TT_E_END when all went well */
    tt_error_info err;
} tt_test_events;

/* Reads @cursor to its end into @out (structural events included). */
void tt_test_read_cursor(tt_test_reader *tr, uint32_t cursor, tt_test_events *out);
void tt_test_events_free(tt_test_events *e);
/* Index of the i-th non-structural event, or SIZE_MAX. */
size_t tt_test_events_nth_call(const tt_test_events *e, size_t i);
size_t tt_test_events_count_calls(const tt_test_events *e);

/* Opens a record session into a memory sink. */
int tt_test_open_record_mem(tt_memory_sink *sink, tt_session **s, tt_error_info *err);
/* Opens a replay session over memory. @src must outlive the session. */
int tt_test_open_replay_mem(tt_source *src, const void *data, size_t len, tt_session **s,
                            tt_error_info *err);
/* Opens a record session into a file. */
int tt_test_open_record_file(const char *path, tt_session **s, tt_error_info *err);

/* The thread id whose table row is named @name, or UINT32_MAX. */
uint32_t tt_test_thread_by_name(tt_test_reader *tr, const char *name);

/* 1 when @hay contains @needle (@nlen bytes). */
int tt_test_contains(const void *hay, size_t hlen, const void *needle, size_t nlen);
/* 1 when @text contains the decimal number @n as a whole token (not part of a longer number). */
int tt_test_has_number(const char *text, uint64_t n);

#endif
