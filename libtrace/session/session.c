/* SPDX-License-Identifier: MIT */
/* Sessions: the common part of open and close, statistics, and the process's one session from
 * the environment.
 *
 * A session is opened with a backend (record or replay, struct tt_backend) that the event layer
 * chooses from the config's mode; everything that differs between the modes is the backend's.
 * Off mode is the static tt_off_session: opening one allocates nothing.
 *
 * The process's session from the environment. A program run under `tinytrace record` gets a
 * session that the runtime opened from TINYTRACE_* before main; a program linked with tinytrace
 * and built with -finstrument-functions gets one at its first instrumented call. If the program
 * also opens a session from the environment itself (tt_config_from_env, then tt_session_open),
 * both would write TINYTRACE_FILE: so the first session opened from the environment is
 * remembered, and a later open of the same mode and file gets it, counted in env_refs. A close
 * lets go of it; only the last one closes it. A fork child forgets it (its copy belongs to the
 * parent's file).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "session-int.h"

/* off mode's only: away from the small variables a recording touches at its start */
struct tt_session tt_off_session TT_BIG_BSS = { .head = { 0, TT_MODE_OFF } };

static _Atomic uint64_t next_uid = 1;

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static tt_session *env_session;      /* under env_lock */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void env_forget_in_child(void)
{
    /* the child has one thread and its own copy of the lock, maybe taken at the fork */
    pthread_mutex_init(&env_lock, NULL);
    env_session = NULL;
}

static void env_once_init(void)
{
    pthread_atfork(NULL, NULL, env_forget_in_child);
}

/* The open environment session that @c may share, with one more reference; NULL if none. */
static tt_session *env_share(const struct tt_config_impl *c)
{
    if (!c->from_env)
        return NULL;
    pthread_once(&env_once, env_once_init);
    pthread_mutex_lock(&env_lock);
    tt_session *s = env_session;
    if (s && (s->head.mode != c->mode || strcmp(s->cfg.file, c->file) != 0 || s->finished))
        s = NULL;
    if (s)
        s->env_refs++;
    pthread_mutex_unlock(&env_lock);
    return s;
}

static void env_remember(tt_session *s)
{
    if (!s->cfg.from_env)
        return;
    pthread_mutex_lock(&env_lock);
    if (!env_session) {
        env_session = s;
        s->env_refs = 1;
    }
    pthread_mutex_unlock(&env_lock);
}

/* Lets go of @s; true when other opens still hold it (then it is not closed). */
static bool env_release(tt_session *s)
{
    if (!s->cfg.from_env)
        return false;
    pthread_mutex_lock(&env_lock);
    bool held = false;
    if (env_session == s) {
        held = --s->env_refs > 0;
        if (!held)
            env_session = NULL;
    }
    pthread_mutex_unlock(&env_lock);
    return held;
}

int tt_session_create_(const tt_config *cfg, const struct tt_backend *be, tt_session **out,
                       tt_error_info *err)
{
    const struct tt_config_impl *c = tt_cfg(cfg);
    if (c->memory_bytes < 2 * c->buffer_bytes)
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX,
                       "TT_PARAM_MEMORY_BYTES: the budget (%llu bytes) must hold at least two "
                       "buffers of TT_PARAM_BUFFER_BYTES (%llu bytes)",
                       (unsigned long long)c->memory_bytes, (unsigned long long)c->buffer_bytes);
    tt_session *s = env_share(c);
    if (s) {
        *out = s;
        return TT_OK;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory opening a session");
    s->cfg = *c;
    s->be = be;
    s->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
    s->head.mode = c->mode;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->cp_lock, NULL);
    s->threads = calloc(c->max_threads, sizeof *s->threads);
    int rc = s->threads ? TT_OK : tt_fail(err, TT_E_NOMEM, ENOMEM, UINT64_MAX, "out of memory");
    if (rc == TT_OK)
        rc = be->open(s, err);
    if (rc != TT_OK) {
        tt_names_free(&s->names); /* replay interns the recording's names before it can fail */
        free(s->threads);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->cp_lock);
        free(s);
        return rc;
    }
    /* release: the fields above are visible to any thread that sees active != 0 */
    atomic_thread_fence(memory_order_release);
    s->head.active = 1;
    env_remember(s);
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
    if (s == &tt_off_session)
        return TT_OK;
    if (env_release(s))
        return TT_OK; /* another open holds it: its close ends it */
    int rc = tt_session_finish_(s, err);
    /* close frees: a thread that is still inside a call now would read freed memory. The
     * contract (session.h) leaves that to the caller: tt_session_finish, join, close. */
    s->be->destroy(s);
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (!s->threads[i]->carved)
            free(s->threads[i]);
    tt_threads_forget_(s);
    free(s->threads);
    tt_names_free(&s->names);
    tt_sync_table_free_(s);
    free(s->last_cp);
    free(s->cp_notes);
    free(s->cp_prov);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->cp_lock);
    free(s);
    return rc;
}

void tt_session_stats_get(tt_session *s, tt_session_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!s || s == &tt_off_session)
        return;
    s->be->stats(s, st);
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

void tt_session_note_processes_(tt_session *s, uint32_t children, uint32_t untraceable)
{
    /* relaxed: read by finish, on this thread or after the handshake of close */
    atomic_store_explicit(&s->children_untraced, children, memory_order_relaxed);
    atomic_store_explicit(&s->execs_untraceable, untraceable, memory_order_relaxed);
}

void tt_session_mark_crashed_(tt_session *s)
{
    s->be->mark_crashed(s);
}

int tt_session_finish_(tt_session *s, tt_error_info *err)
{
    if (!s->finished) {
        memset(&s->finish_err, 0, sizeof s->finish_err);
        s->finish_rc = s->be->finish(s, &s->finish_err);
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
    if (s == &tt_off_session)
        return TT_OK;
    pthread_mutex_lock(&env_lock);
    bool shared = env_session == s && s->env_refs > 1;
    pthread_mutex_unlock(&env_lock);
    if (shared)
        return TT_OK; /* the session is the process's: its owner finishes it */
    return tt_session_finish_(s, err);
}
