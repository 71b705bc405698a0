/* Private declarations shared by the library's modules. Never installed. */
#ifndef TT_INTERNAL_H
#define TT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

#include "store/format.h"

#define TT_LIKELY(x) __builtin_expect(!!(x), 1)
#define TT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TT_HIDDEN __attribute__((visibility("hidden")))

/* Maps a hook's function address (TT_RAW_ADDR records) to its id, on the swapper
 * (instrument/hooks.c). */
typedef uint32_t (*tt_fn_resolver)(tt_session *s, uint64_t address);

/* ---- errors ---- */
int tt_fail(tt_error_info *err, int code, int sys_errno, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- time ---- */
static inline uint64_t tt_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}
/* Ticks per second of tt_ticks(), measured between tt_calib_begin and tt_calib_end (which
 * waits until the two are @min_ns apart); 10^9 when the ticks are nanoseconds already. A rate
 * that makes no sense (fewer ticks at the end, or more than 5% off @expect when that is not 0)
 * is measured again over @min_ns on the calling thread. */
struct tt_calib {
    uint64_t ns0, t0;
};
void tt_calib_begin(struct tt_calib *c);
uint64_t tt_calib_end(const struct tt_calib *c, uint64_t min_ns, uint64_t expect);
uint64_t tt_mono_ns(void);
bool tt_ticks_are_tsc(void);

/* ---- hashing (hash.c is the only user of xxhash) ---- */
uint64_t tt_hash64(const void *data, size_t len, uint64_t seed);

/* ---- build identity ---- */
/* Copies the GNU build-id of the main executable; returns its length or 0. */
size_t tt_build_id_self(uint8_t *out, size_t cap);

/* ---- config (session/config.c) ---- */
struct tt_config_impl {
    uint32_t magic;
    uint32_t mode;
    uint64_t buffer_bytes;
    uint64_t memory_bytes;
    uint64_t block_bytes;
    uint64_t max_event;
    uint64_t max_threads;
    uint64_t object_bytes;
    uint64_t divergence;
    uint64_t ordered;
    uint64_t order_timeout_ms;
    tt_memory_sink *memory_sink;
    tt_sink_write_fn cb_fn;
    void *cb_ctx;
    const tt_source *source;
    void *storage;
    size_t storage_len;
    char caller[TT_CALLER_MAX];
    char file[4096];
};
_Static_assert(sizeof(struct tt_config_impl) <= sizeof(tt_config), "tt_config too small");

static inline const struct tt_config_impl *tt_cfg(const tt_config *c)
{
    return (const struct tt_config_impl *)(const void *)c;
}

/* The mode a config asks for. */
tt_mode tt_session_mode_of_(const tt_config *cfg);

/* ---- the intern table (session/session.c) ---- */
struct tt_intern_table {
    uint8_t *arena;          /* [u8 kind][u32 len][name bytes] per object, in id order */
    uint64_t arena_len, arena_cap;
    uint32_t *offsets;       /* id - 1 -> arena offset */
    uint32_t count, offsets_cap;
    uint32_t *slots;         /* open addressing: id or 0 */
    uint32_t slots_cap;
    uint32_t base_count;     /* replay: objects that came from the recording */
    uint32_t base_functions; /* replay: of those, the functions (TT_OBJ_FUNCTION) */
};

/* ---- thread buffers and threads ---- */
struct tt_buf {
    struct tt_buf *next;
    uint8_t *data;
    uint32_t used;
    uint32_t thread;
    uint32_t last;           /* the thread's final buffer */
};

struct tt_replay_thread;

struct tt_thread {
    /* hot: written by the owning thread only */
    uint8_t *pos;
    uint8_t *end;
    _Atomic uint32_t busy;   /* inside a recording call; see session close */
    _Atomic uint32_t steal;  /* a thread waiting for the budget took, or is taking, the buffer:
                              * see tt_writer_refill (written under the writer's qlock) */
    uint32_t id;
    struct tt_buf *buf;
    tt_session *s;
    uint32_t os_tid;
    uint32_t name_id;
    uint32_t ended;
    uint64_t serial;         /* unique per OS thread for the life of the process */
    uint32_t carved;         /* lives in caller storage: not freed */
    /* swapper side: touched only by the swapper thread, on a cache line of its own: the
     * swapper updates these per event, and sharing a line with pos and busy cost the recording
     * thread a cache miss per event (see tt_thread_new) */
    _Alignas(64) uint64_t seq;
    uint64_t pending;        /* raw payload bytes of an event that goes on in the next buffer */
    uint64_t chunks;
    uint64_t first_time;
    uint64_t last_time;
    bool has_time;
    /* replay side */
    struct tt_replay_thread *rp;
    struct tt_replay_thread *_Atomic rp_pub; /* rp, published for other threads */
};

struct tt_sink;

/* ---- the session ---- */
struct tt_session {
    struct tt_session_head_ head;   /* must be first: read by the inline fast path */
    uint64_t uid;
    struct tt_config_impl cfg;

    pthread_mutex_t lock;           /* threads, intern table, checkpoint */
    struct tt_thread **threads;
    uint32_t nthreads;
    _Atomic uint32_t closing;
    _Atomic uint64_t divergences;
    /* threads refused past max_threads (each counted once): their events are not recorded */
    _Atomic uint32_t threads_refused;

    struct tt_intern_table names;

    /* checkpoint */
    tt_checkpoint_provider providers[64];
    uint32_t nproviders;
    uint8_t *last_cp;
    size_t last_cp_len, last_cp_cap;
    tt_timepoint last_cp_tp;
    bool has_cp;

    /* record */
    struct tt_writer *w;

    /* replay */
    struct tt_replayer *rp;

    /* tt_session_finish ran: its result, returned again by a later finish or close */
    bool finished;
    int finish_rc;
    tt_error_info finish_err;

    /* instrumentation: maps the hooks' function addresses to ids on the swapper */
    _Atomic(tt_fn_resolver) fn_resolver;
    /* instrumentation: told of each thread that registered (runtime.c ends it at its exit) */
    _Atomic(void (*)(tt_session *)) on_thread;
};

/* session.c: the thread-local cache that maps a session to the calling thread's state */
#define TLS_WAYS 8
struct tls_way {
    tt_session *s;
    uint64_t uid;
    struct tt_thread *t;
};
extern __thread struct tls_way tt_tls_cache[TLS_WAYS] TT_HIDDEN;

/* session.c */
int tt_names_intern(struct tt_intern_table *t, uint8_t kind, const char *name, size_t len,
                    uint64_t limit, uint32_t *id);
int tt_names_get(const struct tt_intern_table *t, uint32_t id, uint8_t *kind, const char **name,
                 uint32_t *len);
void tt_names_free(struct tt_intern_table *t);
/* A zeroed struct tt_thread, aligned as its cache-line layout needs; free() releases it. */
struct tt_thread *tt_thread_new(void);
/* The calling thread's state in @s, registering it on first use; NULL if refused. */
struct tt_thread *tt_thread_lookup_slow(tt_session *s, int *rc);

/* writer.c */
int tt_writer_open(tt_session *s, tt_error_info *err);
int tt_writer_close(tt_session *s, tt_error_info *err);
void tt_writer_free(tt_session *s);
/* Gives the thread a buffer that can take @need contiguous bytes; may wait for the budget. */
int tt_writer_refill(tt_session *s, struct tt_thread *t, bool last);
void tt_writer_stats(tt_session *s, tt_session_stats *st);
int tt_writer_thread_init(tt_session *s, struct tt_thread *t);
/* Zeroed per-thread state: from caller storage when the session has some, else calloc. */
struct tt_thread *tt_writer_thread_alloc(tt_session *s);
/* Appends a long record with payload (splits only payloads > buffer/4). */
int tt_writer_append_long(tt_session *s, struct tt_thread *t, const struct tt_raw_long *rec,
                          const void *payload);

/* writer.c, for tables.c: the offset the next appended byte gets; appending framed bytes or a
 * chunk (framed here) through the block buffer; the manifest being built */
uint64_t tt_writer_tail_(struct tt_writer *w);
void tt_writer_put_raw_(struct tt_writer *w, const uint8_t *p, size_t len);
void tt_writer_put_chunk_(struct tt_writer *w, struct tt_chunk_header *h, const uint8_t *body);
tt_manifest *tt_writer_manifest_(struct tt_writer *w);

/* tables.c: the index tables, built on the swapper (see its essay) */
struct tt_tables;
int tt_tables_open(tt_session *s, struct tt_tables **out);
void tt_tables_free(struct tt_tables *tb);
void tt_tables_chunk_begin(struct tt_tables *tb, struct tt_writer *w);
/* tt_tables_event: inline, store/tables.h */
void tt_tables_chunk_end(struct tt_tables *tb, struct tt_writer *w);
void tt_tables_finish(struct tt_tables *tb, struct tt_writer *w);
void tt_tables_write_tail(struct tt_tables *tb, struct tt_writer *w, uint32_t nthreads);

/* index.c: frame blocks and seek batches the directory lists */
uint64_t tt_index_chunks_(const tt_index *ix);

/* reader.c: event chunks a sequential cursor has taken */
uint64_t tt_reader_chunks_read_(const tt_reader *r);
/* index chunks (frame blocks, seek batches) a sequential cursor passed in the data area */
uint64_t tt_reader_index_chunks_(const tt_reader *r);
const tt_source *tt_reader_source_(const tt_reader *r);
int tt_reader_find_ahead_(tt_reader *r, uint32_t cursor, int max,
                          bool (*match)(const tt_event *ev, void *ctx), void *ctx);
int tt_reader_skim_(tt_reader *r, uint64_t *events, tt_error_info *err);
bool tt_reader_match_fn_(tt_reader *r, uint32_t cursor, uint8_t kind, uint32_t function,
                         uint64_t *seq, uint64_t *time);

/* replay.c */
int tt_replayer_open(tt_session *s, tt_error_info *err);
int tt_replayer_close(tt_session *s, tt_error_info *err);
void tt_replayer_free(tt_session *s);
int tt_replay_thread_init(tt_session *s, struct tt_thread *t);
int tt_replay_event(tt_session *s, struct tt_thread *t, const tt_event *ev, void *in_buf,
                    size_t in_cap, size_t *in_len);
int tt_replay_fn(tt_session *s, struct tt_thread *t, uint8_t kind, uint32_t function);

/* ---- the enter/exit fast path (event.c, and the -finstrument-functions hooks) ----
 * One inline copy for both callers, so a hook does not pay two calls through the PLT. The fast
 * path covers a recording thread that is in the first TLS way and has room in its buffer;
 * everything else (registration, a full buffer, replay) is the slow path, which starts over.
 * @now is the event's tt_ticks(). */
int tt_event_fn_slow_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now) TT_HIDDEN;
/* The owner's side of a steal (writer.c): with busy set, waits out a thief that is looking at
 * @t's buffer and takes its writes (t->buf, pos, end) in, then clears the flag. */
void tt_writer_steal_ack_(tt_session *s, struct tt_thread *t) TT_HIDDEN;

/* Begins a recording call on @t: TT_OK, TT_E_MODE if @t is already inside a recording call (a
 * signal handler interrupted it: the call must not touch the buffer, and busy stays set for the
 * call it interrupted), or TT_E_CLOSED if the session is closing.
 *
 * The nesting check costs a load and an OR, not a branch: `busy` and `closing` are tested by the
 * one branch that was already here. A handler sees its own thread's writes in program order,
 * so no hardware fence is needed against it, only a compiler one: the signal fence keeps the
 * buffer accesses below the busy store, where an interrupting handler can see that they are
 * about to happen. A handler that runs between the load and the store of busy finds 0, appends
 * its whole event and leaves busy 0 again; this call then reads t->pos afresh. */
static inline int tt_rec_begin_(tt_session *s, struct tt_thread *t)
{
    /* relaxed: busy is written by this thread only (and by a handler running on it) */
    uint32_t nested = atomic_load_explicit(&t->busy, memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
    /* TSan does not model membarrier; give it the orderings it can see */
    atomic_store_explicit(&t->busy, 1, memory_order_seq_cst);
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t closing = atomic_load_explicit(&s->closing, memory_order_seq_cst);
    uint32_t steal = atomic_load_explicit(&t->steal, memory_order_seq_cst);
#else
    /* relaxed: tt_writer_close's (and a thief's) membarrier orders this store before its load
     * of busy */
    atomic_store_explicit(&t->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t closing = atomic_load_explicit(&s->closing, memory_order_relaxed);
    uint32_t steal = atomic_load_explicit(&t->steal, memory_order_relaxed);
#endif
    if (TT_UNLIKELY(nested | closing | steal)) {
        if (nested)
            return TT_E_MODE; /* busy belongs to the interrupted call: leave it set */
        if (closing) {
            atomic_store_explicit(&t->busy, 0, memory_order_release);
            return TT_E_CLOSED;
        }
        /* another thread took (or looked at) the buffer while this one was idle: pos and end
         * are read only after its writes are in */
        tt_writer_steal_ack_(s, t);
    }
    return TT_OK;
}

static inline void tt_rec_end_(struct tt_thread *t)
{
    /* release: the closer's acquire load of busy == 0 sees every byte this call appended (and,
     * as a compiler barrier, keeps the appends above the store a handler looks at) */
    atomic_store_explicit(&t->busy, 0, memory_order_release);
}

static inline int tt_record_fn_(tt_session *s, uint32_t kind, uint32_t function, uint64_t now)
{
    const struct tls_way *w = &tt_tls_cache[0];
    if (TT_LIKELY(w->s == s && w->uid == s->uid)) {
        struct tt_thread *t = w->t;
        int rc = tt_rec_begin_(s, t);
        if (TT_UNLIKELY(rc != TT_OK))
            return rc;
        if (TT_LIKELY((size_t)(t->end - t->pos) >= sizeof(struct tt_raw_short))) {
            struct tt_raw_short r = { kind, function, now };
            memcpy(t->pos, &r, sizeof r);
            t->pos += sizeof r;
            tt_rec_end_(t);
            return TT_OK;
        }
        tt_rec_end_(t);
    }
    return tt_event_fn_slow_(s, kind, function, now);
}

/* An enter or exit in either mode; replay does not read the clock (rdtsc is most of an
 * event's cost). */
static inline int tt_fn_event_(tt_session *s, uint32_t kind, uint32_t function)
{
    if (TT_LIKELY(s->head.mode == TT_MODE_RECORD))
        return tt_record_fn_(s, kind, function, tt_ticks());
    return tt_event_fn_slow_(s, kind, function, 0);
}
const char *tt_replay_name(tt_session *s, uint32_t id);
int tt_replay_bind_name(tt_session *s, uint32_t name_id);


/* checkpoint.c */
int tt_checkpoint_collect(tt_session *s, uint8_t **out, size_t *len);
void tt_checkpoint_retain(tt_session *s, const void *data, size_t len, tt_timepoint tp);
void tt_checkpoint_free(tt_session *s);

/* unwind.c: a backtrace as text, one frame a line; returns bytes written. */
size_t tt_backtrace(char *buf, size_t cap, int skip);
/* The ASLR-proof name of the function at @addr: "symbol" in the main executable,
 * "libname.so!symbol" elsewhere, "module+0xoffset" without a symbol. */
void tt_symbolize(uintptr_t addr, char *buf, size_t cap);

/* ---- instrumentation support ---- */
/* The encoder's map from a function's address (raw records in TT_RAW_ADDR form, from the
 * hooks) to its interned id (hooks.c sets it; NULL: such events get id 0). */
void tt_session_set_fn_resolver_(tt_session *s, tt_fn_resolver fn);
/* Calls @fn on each thread that registers in @s from now on, once it is registered. */
void tt_session_set_thread_hook_(tt_session *s, void (*fn)(tt_session *));
/* The first half of tt_session_close: the file is finished (record) or the rest of the
 * recording checked (replay), but nothing is freed, so other threads that still hold @s do not
 * touch freed memory. For the crash handler, which never frees. */
int tt_session_finish_(tt_session *s, tt_error_info *err);
/* Marks a recording as finalized by the crash handler. */
void tt_session_mark_crashed_(tt_session *s);
/* Held by any thread while tinytrace itself runs (the swapper for its whole life). */
extern __thread int tt_in_tracer TT_HIDDEN;

#endif
