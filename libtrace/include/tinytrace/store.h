/* SPDX-License-Identifier: MIT */
/* tinytrace — the store: trace files, sinks, sources, the bounded reader and the verifier.
 *
 * A trace file opens with a fixed 512-byte Manifest, followed by framed chunks of events and, at
 * the end, the thread and object tables (docs/FORMAT.md is the normative description). Version 2
 * files also carry index tables (frames, summary, seek index), read through tinytrace/index.h.
 *
 * The reader never sizes a buffer from the file alone. tt_reader_probe() reads the manifest and,
 * from it and the caller's tt_reader_limits, computes a tt_reader_capacity: the exact byte count
 * the reader needs. The caller passes that much storage to tt_reader_open(); the reader lives
 * inside it and allocates nothing else. A file that needs more than the limits allow is refused
 * by the probe (TT_E_CAPACITY) before any chunk is read; a chunk that claims more than the
 * capacity is TT_E_EXHAUSTED or TT_E_CORRUPT, never an overflow.
 *
 * Example (each "…" stands for the caller's handling of the error that err describes; the
 * test header-examples compiles and runs it):
 *     tt_source src; tt_error_info err;
 *     if (tt_source_file(&src, "run.tt", &err) != TT_OK) …
 *     tt_reader_limits lim; tt_reader_limits_default(&lim);
 *     tt_manifest m; tt_reader_capacity cap;
 *     if (tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, &m, &cap, &err) != TT_OK) …
 *     void *mem = malloc(cap.total);          // malloc's alignment is enough (16 bytes)
 *     tt_reader *r;
 *     if (tt_reader_open(&src, &lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &err) != TT_OK) …
 *     tt_event ev; int rc;
 *     while ((rc = tt_reader_next(r, 0, &ev, &err)) == TT_OK)
 *         printf("%s\n", tt_event_kind_name(ev.kind));
 *     if (rc != TT_E_END) …
 *     tt_reader_close(r); free(mem); tt_source_close(&src);
 * examples/read-trace.c is a whole program that walks a trace, tables and index included.
 */
#ifndef TINYTRACE_STORE_H
#define TINYTRACE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/error.h>
#include <tinytrace/event.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this library writes. Readers accept TT_FORMAT_VERSION_MIN..TT_FORMAT_VERSION:
 * version 2 is version 1 plus the index tables (docs/FORMAT.md §14), which a version-1 file
 * simply does not have; version 3 is version 2 plus the sync event kind (14), whose count the
 * index directory lists after the other 13; version 4 is version 3 plus the parent row of the
 * frame blocks (docs/FORMAT.md §14.3), with runs of repeated leaves of at most 63 rows, and the
 * restore kind (15) and the checkpoint table (§15), which lists every checkpoint and restore
 * and gives each event its epoch; version 5 is version 4 plus the tag kind 16 (docs/FORMAT.md
 * §5.2), a short form of a sync event on the same object as the one before it, which readers
 * decode as kind 14. */
#define TT_FORMAT_VERSION 5u
#define TT_FORMAT_VERSION_MIN 1u
#define TT_MANIFEST_SIZE 512u
#define TT_BUILD_ID_MAX 32u
#define TT_CALLER_MAX 128u

/* Manifest flags. */
#define TT_MF_FINALIZED 0x1u  /* closed cleanly: tables and counts are final */
#define TT_MF_INCOMPLETE 0x2u /* a write error stopped the recording; replay refuses the file */
#define TT_MF_RECOVERED 0x4u  /* rebuilt from a partial file */
#define TT_MF_CRASHED 0x8u    /* finalized by the crash handler */
#define TT_MF_TSC 0x10u       /* time is in TSC ticks (else in nanoseconds) */

/* Manifest: decoded form of the file's first 512 bytes. */
#define TT_AUTH_LEN 32

typedef struct tt_manifest {
    uint32_t version;
    uint32_t flags;
    uint32_t lib_version;          /* TT_VERSION_NUMBER of the writer */
    uint32_t block_size;           /* write unit of the data area */
    uint8_t build_id[TT_BUILD_ID_MAX];
    uint32_t build_id_len;         /* 0 when the executable has none */
    char caller[TT_CALLER_MAX];    /* optional caller string, NUL-terminated */
    uint64_t event_count;
    uint64_t payload_bytes;
    uint64_t chunk_count;          /* event chunks */
    uint64_t block_count;
    uint64_t largest_chunk;        /* largest chunk body, any type, bytes */
    uint64_t largest_event;        /* largest payload of one event, bytes */
    uint64_t largest_split;        /* largest payload split over several chunks, bytes */
    uint32_t thread_count;
    uint32_t object_count;
    uint64_t data_offset;          /* first chunk */
    uint64_t data_end;             /* end of the event chunks */
    uint64_t threads_offset, threads_length; /* thread table chunk */
    uint64_t objects_offset, objects_length; /* object table chunk */
    uint64_t file_size;
    uint64_t ticks_per_sec;
    uint64_t tick_origin;          /* tick value of session open; event times are relative to it */
    int64_t realtime_origin_ns;    /* CLOCK_REALTIME at session open */
    uint64_t events_checksum;      /* XXH3-64 over the checksums of all event chunks, in order */
    uint64_t stall_count;          /* times a recording thread waited for memory */
    uint32_t threads_refused;      /* threads past max_threads: none of their events is here */
    uint64_t stall_ns;
    int32_t write_errno;           /* errno of the write error when TT_MF_INCOMPLETE */
    uint32_t pid;
    /* version 2: the index directory chunk (tinytrace/index.h); both 0 when the file has no
     * index tables (version 1, recovered, or recorded into caller storage) */
    uint64_t index_offset, index_length;
    /* processes that ran without being recorded: children started by fork, vfork, posix_spawn,
     * system or popen, which the runtime does not follow (replay runs them live), and execs of
     * programs the runtime cannot be loaded into (static, setuid): their part of the run is
     * not in the file. The first such child's command line is the META object "untraced=…". */
    uint32_t children_untraced;
    uint32_t execs_untraceable;
    /* a MAC over the manifest (this field zero) and the object table, made by the tool that
     * recorded the file with its user's key (HMAC-SHA256): all zero when there is none. The
     * library only carries it; `tinytrace replay` checks it (docs/REPLAY.md, "Traces from
     * elsewhere"). */
    uint8_t auth[TT_AUTH_LEN];
    /* version 4: the checkpoint table chunk (tinytrace/index.h, tt_reader_checkpoint), in the
     * data area; all 0 when the file has none (no checkpoint was taken, an earlier version, a
     * recovered file, or a recording into caller storage) */
    uint64_t checkpoints_offset, checkpoints_length;
    uint32_t checkpoint_count;     /* checkpoints taken */
    uint32_t restore_count;        /* restores committed: the last epoch */
} tt_manifest;

/* ThreadEntry: one row of the thread table. */
typedef struct tt_thread_entry {
    tt_thread_id id;
    uint32_t os_tid;
    uint32_t name;          /* object id of the thread's name, 0 if unnamed */
    uint32_t flags;
    uint64_t event_count;
    uint64_t chunk_count;
    uint64_t first_time;
    uint64_t last_time;
} tt_thread_entry;

/* ObjectEntry: an interned object. @name is not NUL-terminated; valid while the reader is. */
typedef struct tt_object_entry {
    uint32_t id;
    uint8_t kind;
    uint32_t name_len;
    const char *name;
} tt_object_entry;

/* ---- sources: where a reader gets bytes from ---- */
typedef int (*tt_read_fn)(void *ctx, uint64_t offset, void *dst, size_t len, size_t *got);
typedef struct tt_source {
    tt_read_fn read;   /* positional read; *got < len only at end of data */
    void *ctx;
    uint64_t size;     /* total bytes available */
    int fd;            /* file sources: owned, closed by tt_source_close; else -1. The
                        * descriptor it was opened on: the source may move it (a program that
                        * dup2s onto its number), so read through @read, not this */
    char name[256];    /* for messages */
    const void *mem;   /* memory sources */
} tt_source;

/* Opens @path for reading. Thread-safe source: positional reads, small ones served from one
 * read-ahead window of 256 KiB, or of the file's size in pages plus one when it is smaller
 * (allocated here, freed by tt_source_close; a lock makes it safe to share). */
TT_API int tt_source_file(tt_source *src, const char *path, tt_error_info *err);
/* A source over caller memory; the caller keeps @data alive while the source is used. */
TT_API void tt_source_memory(tt_source *src, const void *data, size_t len);
/* A source over a caller's read callback. */
TT_API void tt_source_callback(tt_source *src, tt_read_fn read, void *ctx, uint64_t size);
TT_API void tt_source_close(tt_source *src);

/* ---- the reader ---- */

/* TraceReaderLimits: the caller's caps. */
typedef struct tt_reader_limits {
    uint64_t max_chunk;      /* largest chunk body accepted */
    uint64_t max_event;      /* largest event payload accepted */
    uint32_t max_threads;
    uint32_t max_objects;
    uint64_t max_table;      /* largest table chunk accepted */
    uint64_t max_total;      /* total reader storage accepted */
} tt_reader_limits;

TT_API void tt_reader_limits_default(tt_reader_limits *lim);

/* How the reader's cursors are laid out:
 * SEQUENTIAL: one cursor (index 0) that reads every event chunk in file order.
 * PER_THREAD: one cursor per recorded thread (index = thread id); each follows only its own
 * thread's chunks, so replay can follow one thread without buffering the others. */
typedef enum tt_cursor_mode { TT_CURSORS_SEQUENTIAL = 0, TT_CURSORS_PER_THREAD = 1 } tt_cursor_mode;

/* TraceReaderCapacity: exact storage sizes, computed from the manifest and the limits. */
typedef struct tt_reader_capacity {
    uint64_t fixed;        /* reader state, thread and object tables */
    uint64_t per_cursor;   /* one chunk buffer plus one split-payload buffer */
    uint32_t cursors;
    uint64_t total;        /* fixed + per_cursor * cursors: pass this much to tt_reader_open */
} tt_reader_capacity;

typedef struct tt_reader tt_reader;

/* Reads and checks the manifest and computes the capacity. Returns TT_E_CAPACITY
 * (TraceReaderCapacityError) when the file needs more than @lim allows, naming the limit.
 * @m and @cap may be NULL. No chunk is read. Once the manifest has decoded (magic, version and
 * checksum hold), *@m is filled even if the file is then refused (incomplete, never closed,
 * truncated, over the limits). */
TT_API int tt_reader_probe(const tt_source *src, const tt_reader_limits *lim, tt_cursor_mode mode,
                           tt_manifest *m, tt_reader_capacity *cap, tt_error_info *err);

/* Opens a reader inside @storage (at least the probed capacity, 16-byte aligned). Reads the
 * thread and object tables. Ownership: the reader lives in @storage; the caller frees @storage
 * after tt_reader_close. TT_E_STORAGE if @storage_len is smaller than the capacity. */
TT_API int tt_reader_open(const tt_source *src, const tt_reader_limits *lim, tt_cursor_mode mode,
                          void *storage, size_t storage_len, tt_reader **out, tt_error_info *err);

TT_API const tt_manifest *tt_reader_manifest(const tt_reader *r);
/* Thread table row @id, or NULL. Valid while the reader is open. */
TT_API const tt_thread_entry *tt_reader_thread(const tt_reader *r, tt_thread_id id);
/* Object @id; returns TT_E_INVAL for an unknown id. */
TT_API int tt_reader_object(const tt_reader *r, uint32_t id, tt_object_entry *out);
/* Looks up (kind, name); returns the id or 0. */
TT_API uint32_t tt_reader_find_object(const tt_reader *r, uint8_t kind, const char *name);

/* Next event of @cursor. TT_E_END at the end of its stream. The event's payload is valid until
 * the next read on this cursor. A cursor is used by one thread at a time; different cursors of
 * one reader may be used from different threads. */
TT_API int tt_reader_next(tt_reader *r, uint32_t cursor, tt_event *ev, tt_error_info *err);
/* The same event tt_reader_next would return, without consuming it. */
TT_API int tt_reader_peek(tt_reader *r, uint32_t cursor, tt_event *ev, tt_error_info *err);
/* The same, without the copy: *@ev points to the event inside the reader, owned by it and valid
 * (payload included) until the next tt_reader_next, tt_reader_advance or tt_reader_close on
 * this cursor. For loops over millions of events, such as a dump's merge. */
TT_API int tt_reader_peek_ref(tt_reader *r, uint32_t cursor, const tt_event **ev,
                              tt_error_info *err);
/* Consumes the event returned by the last successful peek. */
TT_API void tt_reader_advance(tt_reader *r, uint32_t cursor);

TT_API void tt_reader_close(tt_reader *r);

/* ---- the verifier ---- */

typedef enum tt_verify_status {
    TT_VERIFY_OK = 0,
    TT_VERIFY_TRUNCATED,
    TT_VERIFY_CHECKSUM,
    TT_VERIFY_COUNTS,
    TT_VERIFY_BAD_MAGIC,
    TT_VERIFY_BAD_VERSION,
    TT_VERIFY_LIMIT,
    TT_VERIFY_CORRUPT,
    TT_VERIFY_INCOMPLETE,
    TT_VERIFY_IO,
} tt_verify_status;

/* VerifyResult. @offset is the file offset where the problem was found; @chunk the index of the
 * chunk involved (UINT64_MAX if none). @message says what was wrong in one sentence. */
typedef struct tt_verify_result {
    tt_verify_status status;
    int code;                /* the tt_error behind the status */
    uint64_t offset;
    uint64_t chunk;
    uint64_t events;         /* events checked */
    uint64_t chunks;         /* event chunks checked */
    uint64_t bytes;          /* bytes read */
    char message[512];
} tt_verify_result;

/* Checks a whole file: manifest, every chunk's frame and checksum (index chunks included), every
 * event's encoding, each thread's sequence numbers, the tables, the index directory, block
 * lists, seek batches and summary (docs/FORMAT.md §14.7 I1-I4), and at the end every count and
 * the events checksum against the manifest. Uses a bounded reader with @lim (NULL = defaults);
 * allocates only the probed capacity. Returns TT_OK only for a valid file. Thread-safe. */
TT_API int tt_verify(const tt_source *src, const tt_reader_limits *lim, tt_verify_result *res);

/* tt_verify_ex flags. TT_VERIFY_FRAMES: also decode every frame row and check the call tree
 * and the summary against them (§14.7 I5-I8; tt_index_check). The frame rows are already
 * covered by their chunks' checksums, so this finds what a faulty or hostile writer put in
 * them, not damage; it costs about 20 ns a frame, several times the rest of the check. */
#define TT_VERIFY_FRAMES 0x1u
/* tt_verify with @flags (0 = tt_verify). */
TT_API int tt_verify_ex(const tt_source *src, const tt_reader_limits *lim, unsigned flags,
                        tt_verify_result *res);
TT_API const char *tt_verify_status_name(tt_verify_status st);

/* ---- recovery ---- */

/* What tt_recover saved. */
typedef struct tt_recover_result {
    uint64_t events;          /* events in the recovered file */
    uint64_t chunks;          /* event chunks in it */
    uint32_t threads;
    uint64_t dropped_events;  /* whole events dropped with a split payload that did not arrive */
    uint64_t damage_offset;   /* first byte of the source that could not be used */
    uint64_t bytes_out;
    char message[256];        /* what was at damage_offset */
} tt_recover_result;

/* Turns the temporary file of a run that died (even by SIGKILL) into a valid trace at
 * @out_path: every whole chunk up to the first damaged one, a thread table rebuilt from them, no
 * names (they are written only at close), a final manifest flagged TT_MF_RECOVERED. The file is
 * written as "<out_path>.<pid>.partial" and renamed. TT_E_INVAL for a file that was closed.
 * Thread-safe; allocates memory bounded by the largest chunk. */
TT_API int tt_recover(const tt_source *src, const char *out_path, tt_recover_result *res,
                      tt_error_info *err);

/* ---- temporary files ----
 * A recording (and tt_recover) writes its trace as "<file>.<pid>.partial" and renames it to
 * <file> when it is finished; a run that died leaves the partial file (docs/FORMAT.md §2). */

/* The folder of empty files made ahead beside a trace, for recordings with TT_PARAM_SPARES
 * (session.h): one is renamed to the partial name rather than a file created. */
#define TT_SPARES_DIR ".spares"

/* Writes "<final_path>.<pid>.partial" into @out. TT_E_LIMIT when it does not fit @cap.
 * Thread-safe, async-signal-safe. */
TT_API int tt_partial_name(const char *final_path, long pid, char *out, size_t cap);

/* For a @name that ends in ".<pid>.partial" (1 to 9 digits, after at least one byte of final
 * name): the length of the final name, and the pid in *@pid. 0 for any other name. Thread-safe,
 * async-signal-safe. */
TT_API size_t tt_partial_parse(const char *name, long *pid);

/* What a file in a directory is to the partial-file protocol. */
typedef enum tt_partial_state {
    TT_PARTIAL_NONE = 0,  /* not a partial trace: another name, not a regular file (symlinks are
                           * not followed), or not starting with the tinytrace magic */
    TT_PARTIAL_LIVE = 1,  /* the recording that writes it still holds its lock (an OFD lock,
                           * seen from any PID namespace): never touch it */
    TT_PARTIAL_DEAD = 2,  /* its recording is gone: recover it or remove it */
} tt_partial_state;

/* Looks at @name in directory @dirfd (AT_FDCWD: the current one); *@pid (may be NULL) gets the
 * pid of its name, which says nothing of liveness (the lock does). Thread-safe. */
TT_API tt_partial_state tt_partial_probe(int dirfd, const char *name, long *pid);

/* ---- the MAC of a trace ----
 * A trace can carry a MAC (tt_manifest.auth) that its recorder made with a key of its own; the
 * library does not compute it (no cryptography in the library): it says which bytes count and
 * stores the result. docs/FORMAT.md §3 lists the bytes. */

/* Called with the covered bytes in order, in pieces; returns 0 to go on. */
typedef int (*tt_auth_visit_fn)(void *ctx, const void *data, size_t len);

/* Feeds @fn the bytes the MAC of the trace in @src covers: the manifest with its MAC and its
 * checksum taken as zero, then the object table chunk. The manifest is decoded and checked
 * first. Thread-safe; reads through @src only. */
TT_API int tt_trace_auth_input(const tt_source *src, tt_auth_visit_fn fn, void *ctx,
                               tt_error_info *err);

/* Stores @mac in the manifest of the finalized trace at @path (a version 2 file), with the
 * manifest checksum made anew, and syncs it. */
TT_API int tt_trace_auth_set(const char *path, const uint8_t mac[TT_AUTH_LEN],
                             tt_error_info *err);
/* The same, syncing only when @sync is not 0: a caller that makes many files durable together
 * afterwards (`tinytrace record` with a tree's traces) waits for the disk once per file. */
TT_API int tt_trace_auth_store(const char *path, const uint8_t mac[TT_AUTH_LEN], int sync,
                               tt_error_info *err);

/* ---- writer limits, capacity and storage ---- */

/* TraceWriterLimits: what a recording session may use. */
typedef struct tt_writer_limits {
    uint64_t buffer_bytes;   /* one thread buffer */
    uint64_t memory_bytes;   /* all thread buffers together: the memory budget */
    uint32_t block_bytes;    /* write unit */
    uint32_t max_threads;
    uint64_t max_event;      /* largest event payload */
    uint64_t object_bytes;   /* interned names, all together */
} tt_writer_limits;

/* TraceWriterCapacity: the bytes a recorder needs for @lim. */
typedef struct tt_writer_capacity {
    uint64_t buffers;        /* thread buffers (memory_bytes rounded to whole buffers) */
    uint64_t swapper;        /* chunk encoding buffer and block buffer */
    uint64_t threads;        /* per-thread state */
    uint64_t objects;        /* intern table */
    uint64_t total;
} tt_writer_capacity;

/* TraceWriterCapacityError: TT_E_CAPACITY with a message when @lim is inconsistent. */
TT_API int tt_writer_capacity_of(const tt_writer_limits *lim, tt_writer_capacity *cap,
                                 tt_error_info *err);

/* Largest encoded chunk body a writer with @buffer_bytes produces. */
TT_API uint64_t tt_chunk_body_max(uint64_t buffer_bytes);

#ifdef __cplusplus
}
#endif
#endif
