/* SPDX-License-Identifier: MIT */
/* tinytrace — events (the `event` namespace).
 *
 * An event is one recorded step of a run: its kind, its timepoint (thread, epoch, sequence), its
 * time, its safepoint (function and site ids) and the payload of its kind. Names never travel
 * with events: functions, sites and threads are interned once with tt_intern() and events carry
 * the returned ids.
 *
 * The recording calls below are the whole hot path. In record mode an event is appended to the
 * calling thread's own buffer with no lock and no system call; in replay mode it is compared with
 * the next recorded event of the calling thread; in off mode every TT_* macro (and tt_enter,
 * tt_exit) is one load and one branch, with no call (the tt_* functions other than tt_enter and
 * tt_exit are out of line: called directly, they cost a call in off mode too). Build with
 * -DTINYTRACE_DISABLE and the TT_* macros compile to nothing, arguments included.
 *
 * Thread safety: every recording call is thread-safe; each thread records into its own buffer.
 *
 * Signals. tt_enter, tt_exit, tt_safepoint, tt_alloc, tt_free, tt_io and tt_user may be called
 * from a signal handler, in record and in replay mode, under these rules:
 *  - A call from a handler that interrupted a recording call of the same thread (one of those
 *    seven, or tt_checkpoint while it appends its event) is refused with TT_E_MODE. It touches
 *    nothing: not the thread's buffer, not the replay cursor, no divergence is counted, and the
 *    interrupted call completes as if the handler had not run. The -finstrument-functions hooks
 *    and the preload wrappers drop (neither record nor compare) the calls of a handler that
 *    interrupted one of them. The check costs the hot path no extra branch.
 *  - A call from a handler that interrupted anything else (the program's own code, or another
 *    thread's recording call) is an ordinary event: it is appended to the interrupted thread's
 *    events where the handler ran, and replay compares it there. So a synchronous signal
 *    (raise, pthread_kill to self, a fault the program provokes) replays; the events of an
 *    asynchronous one (a timer, a kill from elsewhere) diverge unless it happens to arrive at
 *    the same place in the thread's events. Refused calls are not in the recording.
 *  - The thread must have made a recording call in this session before any handler does
 *    (registering a thread takes the session lock and allocates), and a thread that records
 *    from handlers must record into one session only (with several, the per-thread lookup
 *    reorders a cache that a handler must not see half reordered).
 *  - A call whose event does not fit the thread's buffer hands the buffer over and takes the
 *    next: that takes a mutex that only recording calls hold, so never the interrupted code,
 *    may wait for the swapper when the memory budget is spent, and allocates a buffer while
 *    the budget is not yet used up. A handler that may interrupt malloc must run on a session
 *    with caller storage (tt_config_set_writer_storage), which never allocates there. Replay
 *    reads chunks from the source and may allocate: from a handler, the same caveat holds.
 *  - errno may be changed by a call that hands a buffer over; a handler saves it as usual.
 * tt_intern, tt_thread_name, tt_checkpoint, tt_session_* and the reader calls take locks and
 * allocate: never from a handler.
 */
#ifndef TINYTRACE_EVENT_H
#define TINYTRACE_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include <tinytrace/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tt_session tt_session;

/* EventKind. The numbers are part of the file format (docs/FORMAT.md). */
typedef enum tt_event_kind {
    TT_EV_SESSION_START = 1, /* arg = process id; first event of the first thread */
    TT_EV_SESSION_END = 2,   /* last event of the thread that closed the session */
    TT_EV_THREAD_START = 3,  /* arg = OS thread id; first event of every thread */
    TT_EV_THREAD_END = 4,    /* arg = OS thread id; last event of a thread that ended early */
    TT_EV_ENTER = 5,         /* function entry: sp.function */
    TT_EV_EXIT = 6,          /* function exit: sp.function */
    TT_EV_SAFEPOINT = 7,     /* sp.function + sp.site */
    TT_EV_ALLOC = 8,         /* arg = size, addr = address (not compared on replay) */
    TT_EV_FREE = 9,          /* addr = address */
    TT_EV_IO = 10,           /* dir, arg = channel, payload = the bytes */
    TT_EV_CHECKPOINT = 11,   /* payload = the providers' saved state; arg = its number in the
                              * session, from 0 (checkpoint.h) */
    TT_EV_USER = 12,         /* arg = caller's tag, payload = caller's bytes */
    TT_EV_CRASH = 13,        /* arg = signal number, payload = backtrace text */
    TT_EV_SYNC = 14,         /* a synchronization operation (sync.h): sp.site = the operation,
                              * arg = object id, addr = the object's sequence number, dir = 1
                              * when it took the object's turn, payload = its result */
    TT_EV_RESTORE = 15,      /* a checkpoint restored (checkpoint.h): sp.site = the caller's,
                              * arg = the epoch it began, addr = the checkpoint's number */
} tt_event_kind;
#define TT_EV_KIND_MAX 15

/* The function of the tracer's own frames (docs/FORMAT.md §5.7): a recording thread that
 * waited for the memory budget records the wait as an enter and an exit of this function, so a
 * reader shows it as a call of its own (the tracer's time), not as time in the function it
 * interrupted. Replay and `tinytrace diff` step over it. No C function has this name. Its id is
 * the one tt_intern gives it at the first wait: a program that passes function ids of its own
 * instead of interned ones must keep them clear of the session's object ids, or replay steps
 * over its calls of that id too (readers tell the frame by its id alone). */
#define TT_STALL_FUNCTION "tinytrace:buffer-wait"

/* Direction of an io event. IN: bytes the program received (replay hands them back). OUT: bytes
 * the program produced (replay compares them). */
typedef enum tt_io_dir { TT_IO_IN = 0, TT_IO_OUT = 1 } tt_io_dir;

/* ThreadId: dense index of a recording thread within its session, 0 for the first thread. */
typedef uint32_t tt_thread_id;

/* Timepoint: places an event in the recorded order. @seq counts the events of @thread from 0.
 * @epoch counts the checkpoint restores before it (0 until a restore happened; checkpoint.h).
 * The total order of a recording is (epoch, time, thread, seq): within one thread it is program
 * order. An event's epoch is the number of restores at or before it in (time, thread, seq)
 * order, so sorting by epoch first keeps that order (docs/FORMAT.md §15). */
typedef struct tt_timepoint {
    tt_thread_id thread;
    uint32_t epoch;
    uint64_t seq;
} tt_timepoint;

/* Safepoint: where in the program an event was taken (function and site ids). 0 means "none".
 * The type is tt_safepoint_ref because tt_safepoint() is the recording call. */
typedef struct tt_safepoint_ref {
    uint32_t function;
    uint32_t site;
} tt_safepoint_ref;

/* One decoded event, as the reader and the replay report give it.
 * @payload stays valid until the next read on the same cursor; the caller never frees it. */
typedef struct tt_event {
    uint8_t kind;       /* tt_event_kind */
    uint8_t dir;        /* tt_io_dir, for TT_EV_IO */
    uint16_t reserved;
    tt_timepoint tp;
    uint64_t time;      /* clock ticks; see tt_manifest.ticks_per_sec */
    tt_safepoint_ref sp;
    uint64_t arg;
    uint64_t addr;
    uint64_t payload_len;
    const void *payload;
} tt_event;

/* A reading of CLOCK_BOOTTIME (*@ns) and of the clock of event times (*@ticks: the TSC where
 * there is one, else nanoseconds) taken together, within 2 microseconds where the machine
 * allows: the point a recording's tick rate is measured from. A process that starts a
 * recorded one hands it down (`tinytrace record` does), so that a short run need not wait to
 * measure the rate itself. Thread-safe, async-signal-safe. */
TT_API void tt_clock_point(uint64_t *ns, uint64_t *ticks);

/* Object kinds of the interned object table (ObjectEntry). */
typedef enum tt_object_kind {
    TT_OBJ_FUNCTION = 1,
    TT_OBJ_SITE = 2,
    TT_OBJ_THREAD = 3,
    TT_OBJ_MODULE = 4,
    TT_OBJ_TAG = 5,
    TT_OBJ_META = 6,
} tt_object_kind;
#define TT_OBJ_KIND_MAX 6

/* Interns @name (NUL-terminated, at most 65535 bytes) as an object of @kind and returns its id
 * (>= 1) in *@id. The same (kind, name) always gives the same id within one session. In replay
 * mode the id is the one the recording gave, so recorded and live ids compare equal; a name the
 * recording never saw gets a fresh id above the recorded ones. In off mode *@id = 0.
 * Thread-safe (takes a lock: intern once, not per event). Not async-signal-safe. */
TT_API int tt_intern(tt_session *s, tt_object_kind kind, const char *name, uint32_t *id);

/* Names the calling thread (interned as TT_OBJ_THREAD). In replay mode, a thread that names
 * itself before its first event is matched with the recorded thread of that name. */
TT_API int tt_thread_name(tt_session *s, const char *name);

/* ---- the ABI-stable head of every session, read by the inline fast path ----
 * Private: do not touch. `active` is nonzero in record and replay mode only. */
struct tt_session_head_ {
    uint32_t active;
    uint32_t mode;
};

/* Out-of-line parts of the recording calls. Use the tt_* wrappers below. */
TT_API int tt_event_fn_(tt_session *s, uint32_t kind, uint32_t function);
TT_API int tt_event_full_(tt_session *s, const tt_event *ev, void *in_buf, size_t in_cap,
                          size_t *in_len);

static inline int tt_active_(const tt_session *s)
{
    return s != NULL && ((const struct tt_session_head_ *)(const void *)s)->active != 0;
}

/* Function entry and exit. @function is an interned TT_OBJ_FUNCTION id (or any stable id the
 * caller keeps, such as a module offset: see the instrument hooks). */
static inline int tt_enter(tt_session *s, uint32_t function)
{
    return tt_active_(s) ? tt_event_fn_(s, TT_EV_ENTER, function) : TT_OK;
}

static inline int tt_exit(tt_session *s, uint32_t function)
{
    return tt_active_(s) ? tt_event_fn_(s, TT_EV_EXIT, function) : TT_OK;
}

/* A point in the program that replay must pass in the same order. */
TT_API int tt_safepoint(tt_session *s, uint32_t function, uint32_t site);

/* An allocation of @size bytes at @addr. Replay compares the size, never the address. */
TT_API int tt_alloc(tt_session *s, uint32_t site, uint64_t size, const void *addr);

/* A free of @addr. Replay checks only that a free happens here. */
TT_API int tt_free(tt_session *s, uint32_t site, const void *addr);

/* Bytes crossing the program's boundary on @channel (an interned id or a caller's number).
 *
 * TT_IO_IN, record: @buf holds the @len bytes the program received; they are stored.
 * TT_IO_IN, replay: the recorded bytes are copied into @buf (capacity @len) and their count is
 *   stored in *@out_len; the recorded count must not exceed @len (TT_E_DIVERGED otherwise).
 * TT_IO_OUT: @buf holds @len bytes the program produced; replay compares them.
 * @out_len may be NULL for TT_IO_OUT. Payloads may be larger than a thread buffer, up to the
 * configured TT_PARAM_MAX_EVENT_BYTES. */
TT_API int tt_io(tt_session *s, tt_io_dir dir, uint32_t channel, void *buf, size_t len,
                 size_t *out_len);

/* A caller's own payload with a caller's @tag. Replay compares tag and bytes. */
TT_API int tt_user(tt_session *s, uint32_t tag, const void *data, size_t len);

/* Records every registered checkpoint provider's state (see checkpoint.h). In replay mode the
 * live state is compared with the recorded one. */
TT_API int tt_checkpoint(tt_session *s, uint32_t site);

/* Name of an event kind ("enter", "io", …); never NULL. Thread-safe, async-signal-safe. */
TT_API const char *tt_event_kind_name(unsigned kind);

/* ---- gates: the out-of-line calls behind one inline test ----
 * The TT_* macros below call these, so that in off mode (or with a NULL session) every one of
 * them is one load and one branch, like tt_enter and tt_exit, and no call is made. In off mode
 * TT_IO leaves @buf and *@out_len as they were. */
static inline int tt_safepoint_g_(tt_session *s, uint32_t function, uint32_t site)
{
    return tt_active_(s) ? tt_safepoint(s, function, site) : TT_OK;
}
static inline int tt_alloc_g_(tt_session *s, uint32_t site, uint64_t size, const void *addr)
{
    return tt_active_(s) ? tt_alloc(s, site, size, addr) : TT_OK;
}
static inline int tt_free_g_(tt_session *s, uint32_t site, const void *addr)
{
    return tt_active_(s) ? tt_free(s, site, addr) : TT_OK;
}
static inline int tt_io_g_(tt_session *s, tt_io_dir dir, uint32_t channel, void *buf, size_t len,
                           size_t *out_len)
{
    return tt_active_(s) ? tt_io(s, dir, channel, buf, len, out_len) : TT_OK;
}
static inline int tt_user_g_(tt_session *s, uint32_t tag, const void *data, size_t len)
{
    return tt_active_(s) ? tt_user(s, tag, data, len) : TT_OK;
}
static inline int tt_checkpoint_g_(tt_session *s, uint32_t site)
{
    return tt_active_(s) ? tt_checkpoint(s, site) : TT_OK;
}

/* ---- macros: nothing at all under -DTINYTRACE_DISABLE ---- */
#ifdef TINYTRACE_DISABLE
#define TT_ENTER(s, fn) ((void)0)
#define TT_EXIT(s, fn) ((void)0)
#define TT_SAFEPOINT(s, fn, site) ((void)0)
#define TT_ALLOC(s, site, size, addr) ((void)0)
#define TT_FREE(s, site, addr) ((void)0)
#define TT_IO(s, dir, ch, buf, len, out) ((void)0)
#define TT_USER(s, tag, data, len) ((void)0)
#define TT_CHECKPOINT(s, site) ((void)0)
#else
#define TT_ENTER(s, fn) tt_enter((s), (fn))
#define TT_EXIT(s, fn) tt_exit((s), (fn))
#define TT_SAFEPOINT(s, fn, site) tt_safepoint_g_((s), (fn), (site))
#define TT_ALLOC(s, site, size, addr) tt_alloc_g_((s), (site), (size), (addr))
#define TT_FREE(s, site, addr) tt_free_g_((s), (site), (addr))
#define TT_IO(s, dir, ch, buf, len, out) tt_io_g_((s), (dir), (ch), (buf), (len), (out))
#define TT_USER(s, tag, data, len) tt_user_g_((s), (tag), (data), (len))
#define TT_CHECKPOINT(s, site) tt_checkpoint_g_((s), (site))
#endif

#ifdef __cplusplus
}
#endif
#endif
