/* Sessions: open and close, the per-thread registry and the intern table.
 *
 * A thread finds its state in a session through a small thread-local cache keyed by the session
 * pointer and the session's unique id (a new session may reuse a freed one's address). On a miss
 * the thread registers under the session lock: it gets the next dense thread id, a buffer, and its
 * THREAD_START event. A thread is identified by a per-thread serial number, never by its OS tid,
 * which the kernel reuses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Off sessions are all this one object: opening one allocates nothing. */
static struct tt_session off_session = { .head = { 0, TT_MODE_OFF } };

static _Atomic uint64_t next_uid = 1;
static _Atomic uint64_t next_serial = 1;


/* initial-exec TLS (see meson.build): a plain %fs-relative load on the hot path */
__thread struct tls_way tt_tls_cache[TLS_WAYS];
__thread int tt_in_tracer;
static __thread uint64_t tls_serial;
/* the uid of the session that refused this thread (past max_threads): refused again at once */
static __thread uint64_t tls_refused_uid;

/* ---------------------------------------------------------------- intern table */

static uint64_t name_hash(uint8_t kind, const char *name, size_t len)
{
    return tt_hash64(name, len, kind);
}

static int grow_slots(struct tt_intern_table *t)
{
    uint32_t ncap = t->slots_cap ? t->slots_cap * 2 : 256;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return TT_E_NOMEM;
    for (uint32_t id = 1; id <= t->count; id++) {
        uint8_t kind = 0;
        const char *nm = NULL;
        uint32_t len = 0;
        tt_names_get(t, id, &kind, &nm, &len);
        uint64_t h = name_hash(kind, nm, len);
        for (uint32_t i = (uint32_t)h & (ncap - 1);; i = (i + 1) & (ncap - 1)) {
            if (!ns[i]) {
                ns[i] = id;
                break;
            }
        }
    }
    free(t->slots);
    t->slots = ns;
    t->slots_cap = ncap;
    return TT_OK;
}

int tt_names_get(const struct tt_intern_table *t, uint32_t id, uint8_t *kind, const char **name,
                 uint32_t *len)
{
    if (id == 0 || id > t->count)
        return TT_E_INVAL;
    const uint8_t *p = t->arena + t->offsets[id - 1];
    *kind = p[0];
    memcpy(len, p + 1, 4);
    *name = (const char *)p + 5;
    return TT_OK;
}

int tt_names_intern(struct tt_intern_table *t, uint8_t kind, const char *name, size_t len,
                    uint64_t limit, uint32_t *id)
{
    if (len > 65535)
        return TT_E_LIMIT;
    if ((uint64_t)(t->count + 1) * 2 > t->slots_cap && grow_slots(t) != TT_OK)
        return TT_E_NOMEM;
    uint64_t h = name_hash(kind, name, len);
    uint32_t i = (uint32_t)h & (t->slots_cap - 1);
    for (;; i = (i + 1) & (t->slots_cap - 1)) {
        uint32_t cand = t->slots[i];
        if (!cand)
            break;
        uint8_t k = 0;
        const char *nm = NULL;
        uint32_t l = 0;
        tt_names_get(t, cand, &k, &nm, &l);
        if (k == kind && l == len && memcmp(nm, name, len) == 0) {
            *id = cand;
            return TT_OK;
        }
    }
    uint64_t need = 5 + len + 1; /* names stay NUL-terminated in the arena */
    if (t->arena_len + need > limit)
        return TT_E_LIMIT;
    if (t->arena_len + need > t->arena_cap) {
        uint64_t ncap = t->arena_cap ? t->arena_cap * 2 : 4096;
        while (ncap < t->arena_len + need)
            ncap *= 2;
        if (ncap > limit)
            ncap = limit;
        uint8_t *na = realloc(t->arena, ncap);
        if (!na)
            return TT_E_NOMEM;
        t->arena = na;
        t->arena_cap = ncap;
    }
    if (t->count == t->offsets_cap) {
        uint32_t ncap = t->offsets_cap ? t->offsets_cap * 2 : 256;
        uint32_t *no = realloc(t->offsets, ncap * sizeof *no);
        if (!no)
            return TT_E_NOMEM;
        t->offsets = no;
        t->offsets_cap = ncap;
    }
    uint8_t *p = t->arena + t->arena_len;
    uint32_t l32 = (uint32_t)len;
    p[0] = kind;
    memcpy(p + 1, &l32, 4);
    memcpy(p + 5, name, len);
    p[5 + len] = 0;
    t->offsets[t->count] = (uint32_t)t->arena_len;
    t->arena_len += need;
    t->count++;
    t->slots[i] = t->count;
    *id = t->count;
    return TT_OK;
}

void tt_names_free(struct tt_intern_table *t)
{
    free(t->arena);
    free(t->offsets);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

int tt_intern(tt_session *s, tt_object_kind kind, const char *name, uint32_t *id)
{
    if (!id)
        return TT_E_INVAL;
    *id = 0;
    if (!s || !name || kind < 1 || kind > TT_OBJ_KIND_MAX)
        return TT_E_INVAL;
    if (!s->head.active)
        return TT_OK;
    pthread_mutex_lock(&s->lock);
    int rc = tt_names_intern(&s->names, (uint8_t)kind, name, strlen(name), s->cfg.object_bytes, id);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---------------------------------------------------------------- threads */

static void tls_insert(tt_session *s, struct tt_thread *t)
{
    memmove(&tt_tls_cache[1], &tt_tls_cache[0], sizeof tt_tls_cache[0] * (TLS_WAYS - 1));
    tt_tls_cache[0] = (struct tls_way){ s, s->uid, t };
}

struct tt_thread *tt_thread_new(void)
{
    size_t size = (sizeof(struct tt_thread) + 63) & ~(size_t)63;
    struct tt_thread *t = aligned_alloc(64, size);
    if (t)
        memset(t, 0, size);
    return t;
}

struct tt_thread *tt_thread_lookup_slow(tt_session *s, int *rc)
{
    *rc = TT_OK;
    for (int i = 1; i < TLS_WAYS; i++) {
        if (tt_tls_cache[i].s == s && tt_tls_cache[i].uid == s->uid) {
            struct tt_thread *t = tt_tls_cache[i].t;
            tls_insert(s, t);
            return t;
        }
    }
    if (tls_refused_uid == s->uid) {
        *rc = TT_E_THREADS;
        return NULL;
    }
    if (!tls_serial)
        tls_serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->lock);
    struct tt_thread *t = NULL;
    bool fresh = false;
    /* registered before, then pushed out of the cache by other sessions */
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i]->serial == tls_serial)
            t = s->threads[i];
    if (!t) {
        /* acquire: pairs with the release store in tt_session_close, so a thread that registers
         * after close began sees it and is refused */
        if (atomic_load_explicit(&s->closing, memory_order_acquire)) {
            *rc = TT_E_CLOSED;
        } else if (s->nthreads >= s->cfg.max_threads) {
            *rc = TT_E_THREADS;
            tls_refused_uid = s->uid;
            atomic_fetch_add_explicit(&s->threads_refused, 1, memory_order_relaxed);
        } else if (!(t = s->head.mode == TT_MODE_RECORD ? tt_writer_thread_alloc(s)
                                                         : tt_thread_new())) {
            *rc = TT_E_NOMEM;
        } else {
            t->s = s;
            t->id = s->nthreads;
            t->serial = tls_serial;
            t->os_tid = (uint32_t)syscall(SYS_gettid);
            /* busy until its start events are in: a close that begins meanwhile waits for it
             * (tt_writer_close) instead of handing over a buffer being written */
            atomic_store_explicit(&t->busy, 1, memory_order_relaxed);
            s->threads[s->nthreads++] = t;
            fresh = true;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (!t)
        return NULL;
    if (fresh) {
        /* outside the session lock: taking a buffer may wait for the swapper, and the swapper
         * takes the session lock to intern function names */
        *rc = s->head.mode == TT_MODE_RECORD ? tt_writer_thread_init(s, t)
                                             : tt_replay_thread_init(s, t);
        if (*rc != TT_OK)
            t->ended = 1; /* registered, but records nothing */
        /* release: the closer's acquire load of busy == 0 sees the start events */
        atomic_store_explicit(&t->busy, 0, memory_order_release);
        if (*rc != TT_OK)
            return NULL;
    }
    tls_insert(s, t);
    void (*hook)(tt_session *) = atomic_load_explicit(&s->on_thread, memory_order_acquire);
    if (fresh && hook)
        hook(s);
    return t;
}

int tt_thread_name(tt_session *s, const char *name)
{
    if (!s || !name)
        return TT_E_INVAL;
    if (!s->head.active)
        return TT_OK;
    uint32_t id;
    int rc = tt_intern(s, TT_OBJ_THREAD, name, &id);
    if (rc != TT_OK)
        return rc;
    if (s->head.mode == TT_MODE_REPLAY)
        return tt_replay_bind_name(s, id);
    int lrc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &lrc);
    if (!t)
        return lrc;
    t->name_id = id;
    return TT_OK;
}

/* ---------------------------------------------------------------- open and close */

int tt_session_open(const tt_config *cfg, tt_session **out, tt_error_info *err)
{
    if (!cfg || !out)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_session_open: NULL argument");
    const struct tt_config_impl *c = tt_cfg(cfg);
    *out = NULL;
    if (c->mode == TT_MODE_OFF) {
        *out = &off_session;
        return TT_OK;
    }
    if (c->mode != TT_MODE_RECORD && c->mode != TT_MODE_REPLAY)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "invalid mode %u", c->mode);
    if (c->memory_bytes < 2 * c->buffer_bytes)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                       "TT_PARAM_MEMORY_BYTES: the budget (%llu bytes) must hold at least two "
                       "buffers of TT_PARAM_BUFFER_BYTES (%llu bytes)",
                       (unsigned long long)c->memory_bytes, (unsigned long long)c->buffer_bytes);
    tt_session *s = calloc(1, sizeof *s);
    if (!s)
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory opening a session");
    s->cfg = *c;
    s->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
    s->head.mode = c->mode;
    pthread_mutex_init(&s->lock, NULL);
    s->threads = calloc(c->max_threads, sizeof *s->threads);
    int rc = s->threads ? TT_OK : tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    if (rc == TT_OK)
        rc = c->mode == TT_MODE_RECORD ? tt_writer_open(s, err) : tt_replayer_open(s, err);
    if (rc != TT_OK) {
        tt_names_free(&s->names); /* replay interns the recording's names before it can fail */
        free(s->threads);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return rc;
    }
    /* release: the fields above are visible to any thread that sees active != 0 */
    atomic_thread_fence(memory_order_release);
    s->head.active = 1;
    *out = s;
    return TT_OK;
}

tt_mode tt_session_mode(const tt_session *s)
{
    return s ? (tt_mode)s->head.mode : TT_MODE_OFF;
}

int tt_session_close(tt_session *s, tt_error_info *err)
{
    if (!s)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_session_close: NULL session");
    if (s == &off_session)
        return TT_OK;
    int rc = tt_session_finish_(s, err);
    /* close frees: a thread that is still inside a call now would read freed memory. The
     * contract (session.h) leaves that to the caller: tt_session_finish, join, close. */
    if (s->head.mode == TT_MODE_RECORD)
        tt_writer_free(s);
    else
        tt_replayer_free(s);
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (!s->threads[i]->carved)
            free(s->threads[i]);
    /* a later session may get this address: the uid in the cache tells them apart */
    for (int i = 0; i < TLS_WAYS; i++)
        if (tt_tls_cache[i].s == s)
            tt_tls_cache[i].s = NULL;
    free(s->threads);
    tt_names_free(&s->names);
    tt_checkpoint_free(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return rc;
}

void tt_session_stats_get(tt_session *s, tt_session_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!s || s == &off_session)
        return;
    if (s->head.mode == TT_MODE_RECORD)
        tt_writer_stats(s, st);
    pthread_mutex_lock(&s->lock);
    st->threads = s->nthreads;
    pthread_mutex_unlock(&s->lock);
}

void tt_session_set_fn_resolver_(tt_session *s, tt_fn_resolver fn)
{
    atomic_store_explicit(&s->fn_resolver, fn, memory_order_release);
}

void tt_session_set_thread_hook_(tt_session *s, void (*fn)(tt_session *))
{
    atomic_store_explicit(&s->on_thread, fn, memory_order_release);
}

int tt_session_finish_(tt_session *s, tt_error_info *err)
{
    if (!s->finished) {
        memset(&s->finish_err, 0, sizeof s->finish_err);
        s->finish_rc = s->head.mode == TT_MODE_RECORD ? tt_writer_close(s, &s->finish_err)
                                                      : tt_replayer_close(s, &s->finish_err);
        s->finished = true;
    }
    if (s->finish_rc != TT_OK && err)
        *err = s->finish_err;
    return s->finish_rc;
}

int tt_session_finish(tt_session *s, tt_error_info *err)
{
    if (!s)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_session_finish: NULL session");
    if (s == &off_session)
        return TT_OK;
    return tt_session_finish_(s, err);
}
