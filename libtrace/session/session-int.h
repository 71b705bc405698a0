/* SPDX-License-Identifier: MIT */
/* The session layer: a session, its configuration, its threads and its interned names, and the
 * backend (record or replay) it was opened with.
 *
 * What belongs here: what every mode shares. struct tt_session and struct tt_thread hold only
 * the fields that the session itself, or more than one backend, touch; the recorder's part of a
 * thread (buffer, swapper state) is record/record.h's struct tt_rec_thread and the replayer's
 * is replay/replay-int.h's struct tt_rp_thread, each beginning with a struct tt_thread. The mode
 * is chosen once, at open, by the backend the session is given; nothing below the event layer
 * asks which mode it is in, except the inline fast path (record/record_api.h), which reads the
 * head's mode because an indirect call would cost more than the event. Never installed; see
 * docs/ARCHITECTURE.md.
 */
#ifndef TT_SESSION_INT_H
#define TT_SESSION_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <tinytrace/tinytrace.h>

#include "base.h"

/* ---- config (config.c) ---- */
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
    uint64_t chaos, chaos_seed, chaos_depth, chaos_delay_us;
    uint64_t real_sleep;
    uint64_t sync;                /* TT_PARAM_SYNC: fdatasync at close */
    uint64_t spares;              /* TT_PARAM_SPARES: the partial file is a spare, renamed */
    uint64_t index;               /* TT_PARAM_INDEX: the swapper builds the index tables */
    uint64_t replay_from;         /* TT_PARAM_REPLAY_FROM: checkpoint N + 1, 0: not set */
    tt_memory_sink *memory_sink;
    tt_sink_write_fn cb_fn;
    void *cb_ctx;
    const tt_source *source;
    void *storage;
    size_t storage_len;
    uint32_t from_env;           /* made by tt_config_from_env: see tt_session_create_ */
    uint32_t lazy_swapper;       /* the runtime's: the swapper starts when first needed */
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
/* Settings handed to the runtime as text ("NAME=VALUE" lines, NAME without the TINYTRACE_
 * prefix) in the file open at @fd, read from its start (at most 16 KiB): tt_setting_ finds them
 * where the environment has no such variable. Called once, before any session opens; TT_E_IO
 * when the read fails. */
int tt_settings_read_(int fd);
/* The value of TINYTRACE_* setting @name (the whole name), from the environment or the loaded
 * settings; NULL when it has none, and always in a setuid or setgid process. */
const char *tt_setting_(const char *name);
/* A setuid or setgid process (AT_SECURE): TINYTRACE_* is not read there. */
bool tt_env_secure_(void);
/* Some TINYTRACE_* variable is set (whether or not it is read). */
bool tt_env_has_settings_(void);

/* ---- the intern table (names.c) ---- */
struct tt_intern_table {
    uint8_t *arena;          /* [u8 kind][u32 len][name bytes][NUL] per object, in id order */
    uint64_t arena_len, arena_cap;
    uint32_t *offsets;       /* id - 1 -> arena offset */
    uint32_t count, offsets_cap;
    uint32_t *slots;         /* open addressing: id or 0 */
    uint32_t slots_cap;
    uint32_t base_count;     /* replay: objects that came from the recording */
    uint32_t base_functions; /* replay: of those, the functions (TT_OBJ_FUNCTION) */
};

/* Interns @name (@len bytes) as @kind; the arena may not grow past @limit bytes. Not
 * thread-safe: the session's callers hold s->lock. */
int tt_names_intern(struct tt_intern_table *t, uint8_t kind, const char *name, size_t len,
                    uint64_t limit, uint32_t *id);
/* Object @id: its kind, name (NUL-terminated, valid until the table grows) and length. */
int tt_names_get(const struct tt_intern_table *t, uint32_t id, uint8_t *kind, const char **name,
                 uint32_t *len);
void tt_names_free(struct tt_intern_table *t);
/* Copies object @id's name (at most @cap - 1 bytes, NUL-terminated) under @s's lock, so a caller
 * on another thread never reads an arena that tt_intern is moving. Returns its full length, or
 * -1 when there is no such object. */
struct tt_session;
int tt_names_copy(struct tt_session *s, uint32_t id, char *buf, size_t cap);

/* ---- threads (threads.c) ----
 * What every backend's thread starts with. A thread is registered at its first call in a
 * session: it gets the next dense id under the session lock, the backend's state
 * (thread_new, under the lock; thread_start, outside it) and a way in the thread-local cache. */
struct tt_thread {
    /* the nesting guard: inside a recording (or replay) call. Written by the owning thread (and
     * a signal handler on it); read by close and, while recording, by a thread taking an idle
     * buffer. First, on the line the recorder's hot fields share (record_api.h). */
    _Atomic uint32_t busy;
    uint32_t id;             /* the thread's dense id in its session */
    struct tt_session *s;
    uint32_t os_tid;
    uint32_t name_id;        /* TT_OBJ_THREAD id, 0: unnamed */
    uint32_t ended;          /* records nothing more (thread_end, close, a failed start) */
    uint32_t carved;         /* lives in caller storage: not freed */
    uint32_t sync_objects;   /* record: objects this thread gave an id (the k of sync.h) */
    uint64_t serial;         /* unique per OS thread for the life of the process */
};

/* The thread-local cache that maps a session to the calling thread's state in it. Keyed by the
 * session's address and unique id, since a new session may get a freed one's address. */
#define TLS_WAYS 8
struct tls_way {
    struct tt_session *s;
    uint64_t uid;
    struct tt_thread *t;
};
extern __thread struct tls_way tt_tls_cache[TLS_WAYS] TT_HIDDEN;

/* A zeroed block of @size bytes, 64-byte aligned (a thread's cache-line layout needs it);
 * free() releases it. */
void *tt_thread_alloc_aligned(size_t size);
/* The calling thread's state in @s, registering it on first use; NULL if refused (*rc says
 * why: TT_E_THREADS past max_threads, TT_E_CLOSED after close began, TT_E_NOMEM). */
struct tt_thread *tt_thread_lookup_slow(struct tt_session *s, int *rc);
/* The calling thread's state in @s if its cache holds it, else NULL: no lock, no registration
 * (async-signal-safe). */
static inline struct tt_thread *tt_thread_cached_(const struct tt_session *s, uint64_t uid)
{
    for (int i = 0; i < TLS_WAYS; i++)
        if (tt_tls_cache[i].s == s && tt_tls_cache[i].uid == uid)
            return tt_tls_cache[i].t;
    return NULL;
}

/* Clears the calling thread's cache ways that name @s (session close). */
void tt_threads_forget_(struct tt_session *s);

/* ---- synchronization objects (sync.c) ----
 * The registry that maps an object's address (a mutex, a semaphore, a pthread_t) to its id
 * and its count of ordered operations (sync.h). Open addressing over a fixed table, mapped at
 * the first sync operation: a lookup is lock-free, a first touch one compare-and-swap. A full
 * table (more than TT_SYNC_SLOTS objects alive at once, or a probe run past TT_SYNC_PROBE)
 * gives NULL: the operation is then recorded on no object, unordered, and counted. */
#define TT_SYNC_SLOTS (1u << 20)
#define TT_SYNC_PROBE 64u
struct tt_sync_obj {
    _Atomic uintptr_t key;       /* the object's address; 0: a free slot */
    _Atomic uint64_t id;         /* 0: not given yet (fresh, or forgotten) */
    /* record: the next operation's sequence number; replay: the operations done, that is the
     * turn. Written by the holder only for an exclusive object, atomically otherwise. */
    _Atomic uint64_t seq;
    _Atomic uint32_t gen;        /* replay: bumped at every turn passed on (a futex word) */
    _Atomic uint32_t sleepers;   /* replay: the bits of the threads asleep on gen (sync.c) */
};
struct tt_sync_table {
    struct tt_sync_obj *_Atomic slots;  /* TT_SYNC_SLOTS entries, or NULL before first use */
    bool in_region;
    _Atomic uint64_t untracked;  /* operations on objects the table had no room for */
    _Atomic uint64_t shared;     /* operations on process-shared objects (ordered per process) */
};
struct tt_session;
/* The entry of @addr (not NULL), made at its first touch; NULL when the table is full or could
 * not be mapped (then counted in untracked). tt_sync_obj_get_ (below, inline) looks at the
 * address's home slot first and calls this for anything else. */
struct tt_sync_obj *tt_sync_obj_make_(struct tt_session *s, const void *addr);
/* The entry of @addr if it has one, else NULL; never makes one. */
struct tt_sync_obj *tt_sync_obj_find_(struct tt_session *s, const void *addr);
/* Record: @e's id, given now (thread @tid's next object id) when it has none.
 * tt_sync_obj_id_ (below, inline) reads an id already given and calls this for the rest. */
uint64_t tt_sync_obj_name_(struct tt_session *s, struct tt_sync_obj *e, uint32_t tid,
                           uint32_t *next_k);
/* The slot an address is looked for first: Fibonacci hashing of the address without its low
 * bits (objects are at least 4-aligned), the top 20 bits */
static inline uint64_t tt_sync_slot_of_(uintptr_t key)
{
    return ((uint64_t)(key >> 2) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - 20);
}
_Static_assert(TT_SYNC_SLOTS == 1u << 20, "tt_sync_slot_of_ takes the top 20 bits");
void tt_sync_table_free_(struct tt_session *s);

/* ---- checkpoints (checkpoint/) ---- */
/* One restore (checkpoint.c, the backends): the checkpoint's number, the caller's site, the
 * epoch the restore begins. */
struct tt_restore_op {
    uint64_t number;
    uint32_t site;
    uint32_t epoch;
};

/* Record: one checkpoint or restore as the recording thread saw it, for the checkpoint table
 * written at close (record/tables.c joins it with where the swapper put the event). */
struct tt_cp_note {
    uint32_t kind;           /* TT_EV_CHECKPOINT or TT_EV_RESTORE */
    uint32_t thread;
    uint32_t site;
    uint32_t nprov;          /* checkpoint: providers, their (id, length) at cp_prov[prov_at] */
    uint64_t seq;
    uint64_t number;         /* the checkpoint's number (a restore: the one restored) */
    uint64_t length;         /* checkpoint: payload bytes */
    uint64_t prov_at;
};

/* ---- the backend ----
 * What a mode does, chosen once at open. Every function gets a session opened with this
 * backend; the thread functions get a thread that thread_new made. */
struct tt_backend {
    const char *name;
    /* after the session's common part is built; a failure frees what it made */
    int (*open)(struct tt_session *s, tt_error_info *err);
    /* record: every buffer to the file, the tables, the manifest, the rename; replay: the rest
     * of the recording checked. Frees nothing. */
    int (*finish)(struct tt_session *s, tt_error_info *err);
    /* frees the backend's state (after finish, or after a failed open) */
    void (*destroy)(struct tt_session *s);
    /* a zeroed thread, aligned, with the backend's part set up; under s->lock */
    struct tt_thread *(*thread_new)(struct tt_session *s);
    /* the first events of a thread (record) or nothing (replay); outside s->lock */
    int (*thread_start)(struct tt_session *s, struct tt_thread *t);
    /* tt_session_thread_end and tt_session_flush_thread */
    int (*thread_end)(struct tt_session *s, struct tt_thread *t);
    int (*thread_flush)(struct tt_session *s, struct tt_thread *t);
    /* tt_thread_name, after the name was interned as @name_id */
    int (*thread_name)(struct tt_session *s, struct tt_thread *t, uint32_t name_id);
    /* an enter or exit (@now: its tt_ticks(), record only), and every other event */
    int (*fn_event)(struct tt_session *s, struct tt_thread *t, uint32_t kind, uint32_t function,
                    uint64_t now);
    int (*event)(struct tt_session *s, struct tt_thread *t, const tt_event *ev, void *in_buf,
                 size_t in_cap, size_t *in_len);
    void (*stats)(struct tt_session *s, tt_session_stats *st);
    /* the crash handler finalizes this session (record: flag the manifest) */
    void (*mark_crashed)(struct tt_session *s);
    /* a synchronization operation (sync.h), before and after the real one; @e is its
     * object's entry, or NULL */
    int (*sync_begin)(struct tt_session *s, struct tt_thread *t, tt_sync *op,
                      struct tt_sync_obj *e);
    int (*sync_end)(struct tt_session *s, struct tt_thread *t, tt_sync *op, int result,
                    int took);
    /* a checkpoint restore (checkpoint.c runs it, under cp_lock): the saved state of the
     * checkpoint @sel names when it is not the retained one (record: TT_E_INVAL, only the last
     * is kept; replay: read from the recording; *@state malloc'd), then restore_check before
     * any provider stages (replay: the recorded restore must be the same; it sets op->epoch)
     * and restore_apply after they all staged (record: the restore event; replay: its
     * consumption). A failure of either leaves nothing changed. */
    int (*checkpoint_state)(struct tt_session *s, const tt_checkpoint_sel *sel,
                            uint64_t *number, tt_timepoint *tp, uint8_t **state, size_t *len,
                            tt_error_info *err);
    int (*restore_check)(struct tt_session *s, struct tt_thread *t, struct tt_restore_op *op,
                         tt_error_info *err);
    int (*restore_apply)(struct tt_session *s, struct tt_thread *t, struct tt_restore_op *op,
                         tt_error_info *err);
};


/* Maps a hook's function address (TT_RAW_ADDR records) to its id, on the swapper
 * (instrument/hooks.c). */
typedef uint32_t (*tt_fn_resolver)(struct tt_session *s, uint64_t address);

/* ---- the session (session.c) ---- */
struct tt_writer;
struct tt_replayer;

struct tt_session {
    struct tt_session_head_ head;   /* must be first: read by the inline fast path */
    uint64_t uid;                   /* unique for the life of the process */
    const struct tt_backend *be;
    struct tt_config_impl cfg;

    pthread_mutex_t lock;           /* threads, intern table, checkpoint */
    struct tt_thread **threads;
    uint32_t nthreads;
    _Atomic uint32_t closing;
    _Atomic uint64_t divergences;
    /* threads refused past max_threads (each counted once): their events are not recorded */
    _Atomic uint32_t threads_refused;
    /* processes that ran unrecorded, as the runtime counted them (tt_session_note_processes_) */
    _Atomic uint32_t children_untraced, execs_untraceable;

    struct tt_intern_table names;

    /* checkpoint (checkpoint/) */
    tt_checkpoint_provider providers[64];
    uint32_t nproviders;
    uint8_t *last_cp;
    size_t last_cp_len, last_cp_cap;
    tt_timepoint last_cp_tp;
    uint64_t last_cp_number;
    bool has_cp;
    /* one checkpoint or restore at a time, so that their numbers and epochs follow the order
     * of their events (taken before s->lock, never while holding it) */
    pthread_mutex_t cp_lock;
    uint64_t cp_count;              /* checkpoints taken (record) or met (replay): the next one's
                                     * number; under cp_lock */
    /* restores committed (record) or replayed: the epoch of what the session records now.
     * Written under cp_lock (release), read anywhere (acquire) */
    _Atomic uint32_t epoch;
    /* record: every checkpoint and restore, for the checkpoint table (under cp_lock); a note
     * that found no memory makes the file go without the table (cp_notes_lost) */
    struct tt_cp_note *cp_notes;
    uint64_t cp_nnotes, cp_notes_cap;
    uint64_t *cp_prov;              /* (id, length) pairs */
    uint64_t cp_nprov, cp_prov_cap;
    bool cp_notes_lost;

    /* synchronization objects (sync.c) */
    struct tt_sync_table sync;

    /* the backend's state: one of the two, opaque here */
    struct tt_writer *w;
    struct tt_replayer *rp;

    /* tt_session_finish ran: its result, returned again by a later finish or close */
    bool finished;
    int finish_rc;
    tt_error_info finish_err;
    /* the process's session from the environment: how many opens hold it (tt_session_create_) */
    uint32_t env_refs;

    /* instrumentation: maps the hooks' function addresses to ids on the swapper */
    _Atomic(tt_fn_resolver) fn_resolver;
    /* instrumentation: told of each thread that registered (runtime.c ends it at its exit) */
    _Atomic(void (*)(struct tt_session *)) on_thread;
};

/* The calling thread's state in @s: a hit in the first way of the cache, or the slow path. */
static inline struct tt_thread *tt_thread_of(struct tt_session *s, int *rc)
{
    if (TT_LIKELY(tt_tls_cache[0].s == s && tt_tls_cache[0].uid == s->uid))
        return tt_tls_cache[0].t;
    return tt_thread_lookup_slow(s, rc);
}

/* The registry's lookup inline, for the cost of a recorded lock: an object found in its home
 * slot (nearly all of them: the table is sparse) costs two loads and a multiply, not a call;
 * the probe, a first touch and a full table are tt_sync_obj_make_'s. The acquire loads pair
 * with the CASes that publish the table and the slot, as in the probe. */
static inline struct tt_sync_obj *tt_sync_obj_get_(struct tt_session *s, const void *addr)
{
    struct tt_sync_obj *t = atomic_load_explicit(&s->sync.slots, memory_order_acquire);
    uintptr_t key = (uintptr_t)addr;
    if (TT_LIKELY(t != NULL && key != 0)) {
        struct tt_sync_obj *e = &t[tt_sync_slot_of_(key)];
        if (TT_LIKELY(atomic_load_explicit(&e->key, memory_order_acquire) == key))
            return e;
    }
    return tt_sync_obj_make_(s, addr);
}

static inline uint64_t tt_sync_obj_id_(struct tt_session *s, struct tt_sync_obj *e, uint32_t tid,
                                       uint32_t *next_k)
{
    /* acquire: as in tt_sync_obj_name_, which gives the id */
    uint64_t id = atomic_load_explicit(&e->id, memory_order_acquire);
    return TT_LIKELY(id != 0) ? id : tt_sync_obj_name_(s, e, tid, next_k);
}

/* The off session: every off-mode open returns it; it allocates nothing. */
extern struct tt_session tt_off_session TT_HIDDEN;

/* Opens a session of @cfg with backend @be (the event layer's tt_session_open chooses it).
 *
 * One process, one session from the environment: a config made by tt_config_from_env, opened
 * while another such session of the same mode and file is open in the process (the runtime's,
 * under `tinytrace record`, or the program's own), gets that session, not a second one over
 * the same file. Its close then only lets go of it; the first opener's close ends it. */
int tt_session_create_(const tt_config *cfg, const struct tt_backend *be, tt_session **out,
                       tt_error_info *err);

/* The first half of tt_session_close: the file is finished (record) or the rest of the
 * recording checked (replay), but nothing is freed, so other threads that still hold @s do not
 * touch freed memory. For the crash handler, which never frees. */
int tt_session_finish_(tt_session *s, tt_error_info *err);

/* ---- instrumentation support (session.c) ---- */
/* The encoder's map from a function's address (raw records in TT_RAW_ADDR form, from the
 * hooks) to its interned id (hooks.c sets it; NULL: such events get id 0). */
void tt_session_set_fn_resolver_(tt_session *s, tt_fn_resolver fn);
/* Calls @fn on each thread that registers in @s from now on, once it is registered. */
void tt_session_set_thread_hook_(tt_session *s, void (*fn)(tt_session *));
/* Record: writes every thread buffer that can be taken now into the file, and returns once it is
 * there (the .partial keeps it), for a process about to die by SIGKILL (record/pool.c,
 * tt_writer_flush_all). Nothing in replay or off mode. */
void tt_session_flush_all_(tt_session *s);
/* Record: one more operation on a process-shared object (the count goes into the META object
 * "sync_shared=N" at close). */
void tt_sync_note_shared_(tt_session *s);
/* Record, a session opened with lazy_swapper: the swapper starts now (@now: the program
 * installed a signal handler, and a buffer that fills inside one must not start a thread
 * there), or never (a crash is being finalized: the closing thread encodes the queue).
 * Nothing otherwise. Not under the writer's locks. */
void tt_session_swapper_(tt_session *s, bool now);
/* Marks a recording as finalized by the crash handler. */
void tt_session_mark_crashed_(tt_session *s);
/* The runtime's count of children that ran untraced and of execs it could not follow, for the
 * manifest (before finish). */
void tt_session_note_processes_(tt_session *s, uint32_t children, uint32_t untraceable);
/* Replay (replay/replayer.c): recorded io OUT events on @channel are stepped over, not compared
 * (the runtime's output when the replay does not check it). Before any thread replays. */
int tt_replay_skip_out_channel_(tt_session *s, uint64_t channel);
/* Replay of a whole process (the runtime's): a thread whose recording ends without its end
 * (the process exited while it ran) stops there instead of diverging; how many did. */
int tt_replay_stop_at_exit_(tt_session *s);
uint32_t tt_replay_cut_off_(tt_session *s);
/* Replay of a whole process, at its exit: waits (up to the order timeout) for the other threads
 * to make the calls they made before the recording's close. */
void tt_replay_drain_(tt_session *s);
/* Replay, after finish: the first recorded event that no call consumed. */
int tt_replay_first_left_(tt_session *s, tt_report_event *out);
/* Replay (the runtime's --stop-at): @fn is called with the event when a call matches recorded
 * thread @thread's event @seq, on that call's thread, before the call returns. Before any
 * thread replays. */
int tt_replay_stop_at_(tt_session *s, uint32_t thread, uint64_t seq,
                       void (*fn)(tt_session *s, const tt_event *ev));
/* Replay (the runtime's signal deliveries): a recorded io event at the site named @site or
 * @site_at_return is a delivery, not a call: where a call of its thread meets it, it is
 * consumed and @fn called with it (its payload a copy), on that thread, outside the replay's
 * busy flag, before the call is compared with what follows. When a call's event is consumed
 * and the thread's next is one at @site_at_return, @held is called on that thread (the busy
 * flag set), so the runtime can make it as the call returns (tt_replay_deliver_left_). At the
 * close one left over is not counted as unmatched. Before any thread replays. */
int tt_replay_signals_(tt_session *s, const char *site, const char *site_at_return,
                       void (*fn)(tt_session *s, const tt_event *ev), void (*held)(tt_session *s));
/* ... and the deliveries the calling thread's recording has next are made now, the same way:
 * at the process's exit (after its last call, before its end), and from the live signal's
 * handler (@in_handler: then only for a thread already known, found without a lock), for a
 * thread that waits outside the runtime (pause, sigsuspend) and would meet no call. */
int tt_replay_deliver_left_(tt_session *s, bool in_handler); /* how many were made */

#endif
