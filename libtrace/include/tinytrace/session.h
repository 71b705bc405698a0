/* SPDX-License-Identifier: MIT */
/* tinytrace — sessions (the `session` namespace).
 *
 * A session is the recorder or the replayer. It is opened from a tt_config in one mode — off,
 * record or replay — and keeps that mode for its whole life. Several sessions may live in one
 * process; each has its own swapper thread, file and thread buffers.
 *
 * Off mode costs nothing: tt_session_open allocates nothing, starts no thread and opens no file,
 * and every recording call is one load and one branch.
 *
 * Record mode: every thread appends to its own buffer; a full buffer is handed to the session's
 * swapper thread, which encodes, checksums and writes it. The file is written as
 * "<file>.<pid>.partial", created 0600 with O_EXCL|O_NOFOLLOW, and renamed to <file> by
 * tt_session_close. When the memory budget is spent the recording thread waits: nothing is
 * dropped, and the waits are counted (tt_session_stats). Without caller storage the buffers'
 * share of the budget (TT_PARAM_MEMORY_BYTES, default 8 MiB) is mapped by tt_session_open,
 * which faults in the first buffer; the swapper faults in the rest, a buffer at a time, while
 * it is idle, ahead of their first use. The footprint is fixed by the budget and does not grow
 * with the run, and buffers are reused, never freed, until close.
 *
 * Write errors (a full disk: ENOSPC, EIO, EFBIG past RLIMIT_FSIZE, or an error returned by a
 * callback sink): the program is never stopped or signalled by tinytrace. The swapper writes
 * nothing more to the file after the first failed write (what was written before stays
 * untouched), and keeps the buffers it is handed in memory instead of reusing them, so recording
 * goes on until the memory budget is spent; from then on every recording call that needs a new
 * buffer returns TT_E_STOPPED at once (never waits) and is counted in tt_session_stats.refused.
 * A thread waiting for the budget when the error happens gets TT_E_STOPPED too. The swapper
 * blocks asynchronous signals and close holds SIGXFSZ off the closing thread, so a file-size
 * limit gives EFBIG and never kills the program with SIGXFSZ. tt_session_close then rewrites the
 * 512-byte manifest in place (no new space needed) with TT_MF_INCOMPLETE and the errno, renames
 * the file to its final name as usual, and returns TT_E_IO with @err->sys_errno = the errno,
 * @err->offset = the file offset of the failed write, and a message naming the file, the offset
 * and the error. Readers, verify and replay refuse such a file with TT_E_INCOMPLETE; `tinytrace
 * recover` salvages the chunks written before the error.
 *
 * Replay mode: see replay.h.
 *
 * Example (each "…" stands for the caller's handling of the error that err describes; the
 * test header-examples compiles and runs it):
 *     tt_config cfg; tt_error_info err; tt_session *s;
 *     tt_config_init(&cfg);
 *     if (tt_config_from_env(&cfg, &err) != TT_OK) …  // TINYTRACE_MODE=record, TINYTRACE_FILE
 *     if (tt_session_open(&cfg, &s, &err) != TT_OK) …
 *     uint32_t fn; tt_intern(s, TT_OBJ_FUNCTION, "work", &fn);
 *     tt_enter(s, fn);
 *     // the function's work: its tt_io, tt_user, ... calls
 *     tt_exit(s, fn);
 *     if (tt_session_close(s, &err) != TT_OK) …
 * examples/record-replay.c is a whole program that records its io and replays it.
 */
#ifndef TINYTRACE_SESSION_H
#define TINYTRACE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/error.h>
#include <tinytrace/event.h>
#include <tinytrace/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mode. */
typedef enum tt_mode { TT_MODE_OFF = 0, TT_MODE_RECORD = 1, TT_MODE_REPLAY = 2 } tt_mode;

/* Numeric settings, set with tt_config_set(). Each is checked when it is set. */
typedef enum tt_param {
    TT_PARAM_MODE = 1,            /* tt_mode */
    TT_PARAM_BUFFER_BYTES,        /* one thread buffer: 4 KiB … 64 MiB, multiple of 4 KiB */
    TT_PARAM_MEMORY_BYTES,        /* memory budget: at least two buffers … 64 GiB */
    TT_PARAM_BLOCK_BYTES,         /* write unit: 4 KiB … 16 MiB, power of two */
    TT_PARAM_MAX_EVENT_BYTES,     /* largest payload: 1 KiB … 4 GiB; default 64 MiB */
    TT_PARAM_MAX_THREADS,         /* 1 … 65536 */
    TT_PARAM_OBJECT_BYTES,        /* interned names: 64 KiB … 1 GiB */
    TT_PARAM_DIVERGENCE,          /* tt_divergence_policy (replay.h), for instrumentation */
    TT_PARAM_ORDERED,             /* replay: 1 = enforce the recorded thread interleaving */
    TT_PARAM_ORDER_TIMEOUT_MS,    /* replay: how long a thread waits for its turn (ordered
                                   * replay, and a sync object's turn: sync.h) */
    TT_PARAM_CHAOS,               /* record: 1 = perturb the schedule (schedule chaos, below) */
    TT_PARAM_CHAOS_SEED,          /* record: the chaos scheme's seed (any value) */
    TT_PARAM_CHAOS_DEPTH,         /* record: priority change points + 1: 1 … 16, default 3 */
    TT_PARAM_CHAOS_DELAY_US,      /* record: longest delay at a sync point: 1 … 10^6 µs,
                                   * default 1000 */
    TT_PARAM_REAL_SLEEP,          /* replay: 1 = the sleeps sleep for real (default: they
                                   * return at once with the recorded result) */
    TT_PARAM_SYNC,                /* record: 1 (default) = close makes the file durable
                                   * (fdatasync) before it renames it to its name; 0 = not: the
                                   * caller does (`tinytrace record` does, once for each file of
                                   * the tree, when the program has ended) */
    TT_PARAM_SPARES,              /* record: 1 = the file is one of the empty files made
                                   * ahead in the folder ".spares" beside it, renamed, when
                                   * there is one left (`tinytrace record` keeps one filled
                                   * for the tree's processes: a rename costs less than a
                                   * create on some file systems); 0 (default) = created */
    TT_PARAM_INDEX,               /* record: 1 (default) = the swapper builds the index tables
                                   * (docs/FORMAT.md §14) while it writes, for stats, tree,
                                   * report and dump --from; 0 = none (index_offset 0; the
                                   * checkpoint table is still written): a recording that only
                                   * replay, verify, dump, diff and export will read costs its
                                   * program less, 0.66-0.74x the wall time on deep call trees
                                   * (docs/PERFORMANCE.md) */
    TT_PARAM_PARAM_MAX_
} tt_param;

/* String settings, set with tt_config_set_str(). */
typedef enum tt_param_str {
    TT_PARAM_FILE = 1,            /* trace file path */
    TT_PARAM_CALLER,              /* caller string stored in the manifest (< 128 bytes) */
    TT_PARAM_REPLAY_FROM,         /* replay: "checkpoint:N", start at checkpoint N (replay.h,
                                   * tt_replay_resume); "" = from the beginning (the default) */
    TT_PARAM_STR_MAX_
} tt_param_str;

/* A config lives in caller storage (no allocation); its layout is private. */
typedef struct tt_config {
    uint64_t opaque_[600];
} tt_config;

/* Where a recording goes. The default is the file of TT_PARAM_FILE. */
typedef int (*tt_sink_write_fn)(void *ctx, uint64_t offset, const void *data, size_t len);

/* A memory sink: the session writes the whole trace into a buffer it allocates. After
 * tt_session_close, @data/@len hold the file image; the caller frees @data with free(). */
typedef struct tt_memory_sink {
    void *data;
    size_t len;
    size_t cap_;
} tt_memory_sink;

/* Initializes @cfg with the defaults: off mode, 256 KiB buffers, 8 MiB budget, 32 KiB blocks,
 * 64 MiB largest event, 1024 threads. */
TT_API void tt_config_init(tt_config *cfg);

/* Sets a numeric parameter. TT_E_CONFIG, with the parameter named in @err, for a bad value. */
TT_API int tt_config_set(tt_config *cfg, tt_param p, uint64_t value, tt_error_info *err);
TT_API int tt_config_get(const tt_config *cfg, tt_param p, uint64_t *value);

/* Sets a string parameter; the string is copied (at most 4095 bytes). */
TT_API int tt_config_set_str(tt_config *cfg, tt_param_str p, const char *value,
                             tt_error_info *err);

/* Record into memory (tests, embedding). @sink must outlive the session. */
TT_API void tt_config_set_memory_sink(tt_config *cfg, tt_memory_sink *sink);
/* Record through a callback: @fn is called from the swapper thread with positional writes; the
 * manifest is rewritten at offset 0 on close. Return 0 on success or a positive errno. */
TT_API void tt_config_set_callback_sink(tt_config *cfg, tt_sink_write_fn fn, void *ctx);
/* Replay from a caller source instead of TT_PARAM_FILE. @src must outlive the session. */
TT_API void tt_config_set_source(tt_config *cfg, const tt_source *src);
/* Run the recorder inside caller storage of tt_writer_capacity_of().total bytes, 64-byte
 * aligned: thread buffers, the swapper's chunk and block buffers and per-thread state then come
 * from it, and recording allocates nothing per buffer or per thread. The session object and the
 * intern table (bounded by TT_PARAM_OBJECT_BYTES) are still allocated at open and tt_intern. */
TT_API int tt_config_set_writer_storage(tt_config *cfg, void *storage, size_t len,
                                        tt_error_info *err);

/* Reads TINYTRACE_MODE (off|record|replay), TINYTRACE_FILE, TINYTRACE_BUFFER_KB,
 * TINYTRACE_MEMORY_MB, TINYTRACE_BLOCK_KB, TINYTRACE_MAX_EVENT_MB, TINYTRACE_MAX_THREADS,
 * TINYTRACE_CALLER, TINYTRACE_DIVERGENCE (abort|count), TINYTRACE_ORDERED (0|1) on top of the
 * defaults. A bad value is refused with TT_E_CONFIG and a message naming the variable. */
TT_API int tt_config_from_env(tt_config *cfg, tt_error_info *err);

/* Opens a session. In record mode the directory of the file is checked and the temporary file
 * is created here: an unwritable or missing directory fails now, naming the path. In replay
 * mode the file is probed and its manifest checked. Off mode allocates nothing.
 * Thread-safe. Not async-signal-safe. */
TT_API int tt_session_open(const tt_config *cfg, tt_session **out, tt_error_info *err);

/* Closes a session and frees it; @s is invalid afterwards, whatever the result. It first does
 * what tt_session_finish does (unless that already ran; then it returns the same result and
 * @err), then frees. Not thread-safe with itself or tt_session_finish on the same @s.
 * Replay: TT_E_UNCONSUMED if events are left, with the count and the next event in @err. */
TT_API int tt_session_close(tt_session *s, tt_error_info *err);

/* Finishes a session without freeing it: the way to close a session while other threads are
 * still recording into it.
 * Record: every thread buffer is flushed, the tables and the manifest are written, the file is
 * renamed to its final name. A recording call that is in progress on another thread when finish
 * begins completes first, and its event is in the file; every call that begins after that, from
 * any thread (registered or new), returns TT_E_CLOSED at once and records nothing. So a call that
 * returned TT_OK is in the file and one that returned TT_E_CLOSED is not: events in the file +
 * calls refused = calls made. @s stays valid (calls keep returning TT_E_CLOSED) until
 * tt_session_close, which the caller makes once no other thread can start a call on @s any more
 * (e.g. after joining them): close frees @s, and a call that starts on a freed session is
 * undefined.
 * Replay: the rest of the recording is checked as by tt_session_close; later calls get
 * TT_E_CLOSED. Returns what close would; calling it again returns the same result.
 * Thread-safe with recording calls; not with itself or tt_session_close on the same @s. */
TT_API int tt_session_finish(tt_session *s, tt_error_info *err);

TT_API tt_mode tt_session_mode(const tt_session *s);

/* Session statistics, any mode. Thread-safe. */
/* Record mode: events, payload_bytes, chunks and bytes_written count what the swapper has
 * encoded and written so far, not what threads still hold in their buffers; after every buffer
 * was handed over (tt_session_flush_thread, tt_session_thread_end) they are exact. */
typedef struct tt_session_stats {
    uint64_t events;
    uint64_t payload_bytes;
    uint64_t chunks;
    uint64_t bytes_written;
    uint64_t stalls;        /* times a recording thread waited for the memory budget */
    uint64_t stall_ns;
    uint32_t threads;
    int write_errno;        /* first write error, 0 if none */
    uint64_t refused;       /* recording calls refused with TT_E_STOPPED (see write errors) */
} tt_session_stats;

TT_API void tt_session_stats_get(tt_session *s, tt_session_stats *st);

/* Hands the calling thread's partly filled buffer to the swapper (for tests and at thread end).
 * Once tt_session_stats_get counts its events, they are written to the file (so a run killed
 * after that point keeps them for tinytrace recover). Thread-safe for the calling thread's own
 * buffer. */
TT_API int tt_session_flush_thread(tt_session *s);

/* Called by a thread that will record no more in @s: writes its THREAD_END event and hands its
 * buffer over. Optional: a thread that ends without it is finished by tt_session_close. */
TT_API int tt_session_thread_end(tt_session *s);

#ifdef __cplusplus
}
#endif
#endif
