/* Replay: each recording call is compared with the next recorded event of the same thread.
 *
 * The session opens a bounded reader with one cursor per recorded thread. A live thread is bound
 * to a recorded thread at its first call: by name if it named itself first, otherwise to the
 * lowest recorded thread not yet bound, which is the order in which threads first recorded.
 * Structural events (session and thread start and end) are stepped over; they are not calls.
 *
 * Compare first, move second: a call that diverges leaves the cursor, the sequence and the
 * retained checkpoint untouched, so the corrected call succeeds on retry.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tt_replay_thread {
    uint32_t rec;                        /* recorded thread id, or UINT32_MAX before binding */
    _Atomic uint64_t matched;            /* written by its thread only; read by progress */
    uint32_t hist_len, hist_pos;
    tt_report_event hist[TT_REPORT_HISTORY];
};

struct tt_replayer {
    /* ordered replay: per recorded thread, the time of its next non-structural event
     * (UINT64_MAX when it has none); written by that thread only */
    _Atomic uint64_t *next_time;
    uint32_t nthreads;
    bool ordered;
    tt_source own_src;
    const tt_source *src;
    void *storage;
    tt_reader *r;
    uint8_t *bound;                      /* per recorded thread */
    pthread_mutex_t lock;                /* bound, last */
    tt_divergence last;
    bool has_last;
};

static bool structural(uint8_t kind)
{
    return kind == TT_EV_SESSION_START || kind == TT_EV_SESSION_END ||
           kind == TT_EV_THREAD_START || kind == TT_EV_THREAD_END;
}

/* Ordered replay: steps @rec's cursor over structural events and publishes the time of its
 * next real event. Called by the thread bound to @rec (or at open, before any thread runs). */
static int publish_next(struct tt_replayer *rp, uint32_t rec, tt_error_info *err)
{
    tt_event ev;
    int rc;
    while ((rc = tt_reader_peek(rp->r, rec, &ev, err)) == TT_OK && structural(ev.kind))
        tt_reader_advance(rp->r, rec);
    uint64_t t = rc == TT_OK ? ev.time : UINT64_MAX;
    /* release: a thread that sees this time sees that @rec is done with everything before it */
    atomic_store_explicit(&rp->next_time[rec], t, memory_order_release);
    return rc == TT_E_END ? TT_OK : rc;
}

/* Ordered replay: waits until @rec's next event at @t is the globally next one, that is until no
 * other thread has an earlier unconsumed event (ties go to the lower thread id). */
static bool wait_turn(tt_session *s, uint32_t rec, uint64_t t)
{
    struct tt_replayer *rp = s->rp;
    uint64_t deadline = 0;
    for (unsigned spins = 0;; spins++) {
        bool mine = true;
        for (uint32_t u = 0; u < rp->nthreads && mine; u++) {
            if (u == rec)
                continue;
            uint64_t tu = atomic_load_explicit(&rp->next_time[u], memory_order_acquire);
            if (tu < t || (tu == t && u < rec))
                mine = false;
        }
        if (mine)
            return true;
        if (spins < 64)
            continue;
        uint64_t now = tt_mono_ns();
        if (!deadline)
            deadline = now + s->cfg.order_timeout_ms * 1000000u;
        else if (now > deadline)
            return false;
        sched_yield();
    }
}

int tt_replayer_open(tt_session *s, tt_error_info *err)
{
    struct tt_replayer *rp = calloc(1, sizeof *rp);
    if (!rp)
        return tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
    s->rp = rp;
    pthread_mutex_init(&rp->lock, NULL);
    rp->own_src.fd = -1;
    int rc;
    if (s->cfg.source) {
        rp->src = s->cfg.source;
    } else {
        if (!s->cfg.file[0]) {
            rc = tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "replay mode needs a file (TT_PARAM_FILE)");
            goto fail;
        }
        if ((rc = tt_source_file(&rp->own_src, s->cfg.file, err)) != TT_OK)
            goto fail;
        rp->src = &rp->own_src;
    }
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    lim.max_event = s->cfg.max_event;
    lim.max_threads = (uint32_t)s->cfg.max_threads;
    tt_manifest m;
    tt_reader_capacity cap;
    if ((rc = tt_reader_probe(rp->src, &lim, TT_CURSORS_PER_THREAD, &m, &cap, err)) != TT_OK)
        goto fail;
    rp->storage = aligned_alloc(16, (cap.total + 15) & ~(uint64_t)15);
    rp->bound = calloc(m.thread_count ? m.thread_count : 1, 1);
    if (!rp->storage || !rp->bound) {
        rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory for the replay reader");
        goto fail;
    }
    if ((rc = tt_reader_open(rp->src, &lim, TT_CURSORS_PER_THREAD, rp->storage, cap.total, &rp->r,
                             err)) != TT_OK)
        goto fail;
    /* the recording's names get the recording's ids */
    for (uint32_t id = 1; id <= m.object_count; id++) {
        tt_object_entry e;
        uint32_t got;
        tt_reader_object(rp->r, id, &e);
        rc = tt_names_intern(&s->names, e.kind, e.name, e.name_len, UINT64_MAX, &got);
        s->names.base_functions += e.kind == TT_OBJ_FUNCTION;
        if (rc != TT_OK || got != id) {
            rc = tt_fail(err, TT_E_CORRUPT, 0, m.objects_offset,
                         "%s: object %u is a duplicate in the object table", rp->src->name, id);
            goto fail;
        }
    }
    s->names.base_count = m.object_count;
    rp->nthreads = m.thread_count;
    rp->ordered = s->cfg.ordered != 0;
    if (rp->ordered) {
        rp->next_time = calloc(m.thread_count ? m.thread_count : 1, sizeof *rp->next_time);
        if (!rp->next_time) {
            rc = tt_fail(err, TT_E_NOMEM, 0, UINT64_MAX, "out of memory");
            goto fail;
        }
        for (uint32_t i = 0; i < m.thread_count; i++) {
            if ((rc = publish_next(rp, i, err)) != TT_OK)
                goto fail;
        }
    }
    return TT_OK;
fail:
    tt_replayer_free(s);
    return rc;
}

void tt_replayer_free(tt_session *s)
{
    struct tt_replayer *rp = s->rp;
    if (!rp)
        return;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        free(s->threads[i]->rp);
        s->threads[i]->rp = NULL;
    }
    tt_source_close(&rp->own_src);
    free(rp->storage);
    free(rp->bound);
    free((void *)rp->next_time);
    pthread_mutex_destroy(&rp->lock);
    free(rp);
    s->rp = NULL;
}

int tt_replay_thread_init(tt_session *s, struct tt_thread *t)
{
    (void)s;
    t->rp = calloc(1, sizeof *t->rp);
    if (!t->rp)
        return TT_E_NOMEM;
    t->rp->rec = UINT32_MAX;
    /* release: tt_replay_progress_get, from another thread, sees it whole */
    atomic_store_explicit(&t->rp_pub, t->rp, memory_order_release);
    return TT_OK;
}

int tt_replay_bind_name(tt_session *s, uint32_t name_id)
{
    int rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    if (!t)
        return rc;
    t->name_id = name_id;
    if (t->rp->rec != UINT32_MAX)
        return TT_OK;
    struct tt_replayer *rp = s->rp;
    const tt_manifest *m = tt_reader_manifest(rp->r);
    pthread_mutex_lock(&rp->lock);
    for (uint32_t i = 0; i < m->thread_count; i++) {
        if (!rp->bound[i] && tt_reader_thread(rp->r, i)->name == name_id) {
            rp->bound[i] = 1;
            t->rp->rec = i;
            break;
        }
    }
    pthread_mutex_unlock(&rp->lock);
    return TT_OK;
}

/* Binds @t to the first recorded thread nobody has, in recording order. */
static bool bind_by_order(struct tt_replayer *rp, struct tt_thread *t)
{
    const tt_manifest *m = tt_reader_manifest(rp->r);
    pthread_mutex_lock(&rp->lock);
    for (uint32_t i = 0; i < m->thread_count; i++) {
        if (!rp->bound[i]) {
            rp->bound[i] = 1;
            t->rp->rec = i;
            break;
        }
    }
    pthread_mutex_unlock(&rp->lock);
    return t->rp->rec != UINT32_MAX;
}

static void report_event(tt_report_event *re, const tt_event *ev)
{
    re->ev = *ev;
    re->ev.payload = NULL;
    re->preview_len = ev->payload_len < TT_REPORT_PREVIEW ? (uint32_t)ev->payload_len
                                                          : TT_REPORT_PREVIEW;
    if (ev->payload && re->preview_len)
        memcpy(re->preview, ev->payload, re->preview_len);
    else
        re->preview_len = 0;
}

/* For a checkpoint, turns a payload offset into (provider id, offset in its state). */
static void checkpoint_locate(const uint8_t *p, uint64_t len, uint64_t at, uint32_t *prov,
                              uint64_t *off)
{
    uint64_t o = 0;
    *prov = 0;
    *off = at;
    while (o + 12 <= len) {
        uint32_t id = tt_get32(p + o);
        uint64_t n = tt_get64(p + o + 4);
        if (n > len - o - 12)
            return;
        if (at < o + 12 + n) {
            *prov = id;
            *off = at >= o + 12 ? at - o - 12 : 0;
            return;
        }
        o += 12 + n;
    }
}

static bool same_call(const tt_event *ev, void *ctx)
{
    const tt_event *act = ctx;
    if (ev->kind != act->kind || ev->sp.site != act->sp.site)
        return false;
    switch (ev->kind) {
    case TT_EV_ENTER:
    case TT_EV_EXIT:
    case TT_EV_SAFEPOINT:
        return ev->sp.function == act->sp.function;
    case TT_EV_ALLOC:
    case TT_EV_USER:
    case TT_EV_CRASH:
        return ev->arg == act->arg;
    case TT_EV_IO:
        return ev->arg == act->arg && ev->dir == act->dir;
    default:
        return true;
    }
}

/* Counting policy: after a divergence, find where the replay goes on. If the actual call is
 * among the next events of the recording, the ones before it were missed: they are consumed and
 * so is the call's own event. If it is not, the call was an extra one: nothing is consumed. */
static void realign(tt_session *s, struct tt_thread *t, const tt_event *act)
{
    struct tt_replayer *rp = s->rp;
    uint32_t rec = t->rp->rec;
    int k = tt_reader_find_ahead_(rp->r, rec, 64, same_call, (void *)(uintptr_t)act);
    tt_error_info e2;
    tt_event ev;
    for (int i = 0; i <= k; i++) {
        if (tt_reader_peek(rp->r, rec, &ev, &e2) != TT_OK)
            break;
        tt_reader_advance(rp->r, rec);
    }
    if (k >= 0 && rp->ordered)
        publish_next(rp, rec, &e2);
}

static int diverge(tt_session *s, struct tt_thread *t, tt_diverge_reason why, const tt_event *exp,
                   const tt_event *act, uint64_t first_diff)
{
    struct tt_replayer *rp = s->rp;
    tt_divergence d;
    memset(&d, 0, sizeof d);
    d.reason = why;
    d.first_diff = first_diff;
    if (exp) {
        d.has_expected = 1;
        d.tp = exp->tp;
        report_event(&d.expected, exp);
    } else {
        /* no recorded event: place the call just after the last one this thread matched */
        const struct tt_replay_thread *r0 = t->rp;
        d.tp.thread = r0->rec;
        if (r0->hist_len)
            d.tp.seq = r0->hist[(r0->hist_pos + TT_REPORT_HISTORY - 1) % TT_REPORT_HISTORY]
                           .ev.tp.seq + 1;
    }
    report_event(&d.actual, act);
    /* the actual call of an input is replayed into its buffer: before that, the buffer holds
     * whatever the program left there (valgrind: uninitialised), not data worth showing */
    if (act->kind == TT_EV_IO && act->dir == TT_IO_IN)
        d.actual.preview_len = 0;
    d.actual.ev.tp = d.tp;
    struct tt_replay_thread *rt = t->rp;
    for (uint32_t i = 0; i < rt->hist_len; i++)
        d.history[i] = rt->hist[(rt->hist_pos + TT_REPORT_HISTORY - rt->hist_len + i) %
                                TT_REPORT_HISTORY];
    d.history_len = rt->hist_len;
    static const char *const why_text[] = {
        [TT_DIV_NONE] = "no divergence", [TT_DIV_KIND] = "another kind of event was recorded",
        [TT_DIV_FUNCTION] = "another function was recorded", [TT_DIV_SITE] = "another site was recorded",
        [TT_DIV_ARG] = "another channel or tag was recorded", [TT_DIV_SIZE] = "another allocation size was recorded",
        [TT_DIV_LENGTH] = "another payload length was recorded", [TT_DIV_PAYLOAD] = "the payload bytes differ",
        [TT_DIV_DIRECTION] = "the io direction differs", [TT_DIV_END] = "the recording of this thread ended",
        [TT_DIV_THREAD] = "the recording has no thread left for this one",
        [TT_DIV_ORDER] = "this thread's turn did not come in time",
    };
    if (why == TT_DIV_PAYLOAD && exp && exp->kind == TT_EV_CHECKPOINT) {
        uint32_t prov;
        uint64_t off;
        checkpoint_locate(exp->payload, exp->payload_len, first_diff, &prov, &off);
        d.first_diff = off;
        snprintf(d.message, sizeof d.message,
                 "thread %u seq %" PRIu64 ": checkpoint state of provider %u differs at byte %" PRIu64,
                 d.tp.thread, d.tp.seq, prov, off);
    } else if (why == TT_DIV_PAYLOAD) {
        snprintf(d.message, sizeof d.message, "thread %u seq %" PRIu64 ": %s at byte %" PRIu64,
                 d.tp.thread, d.tp.seq, why_text[why], first_diff);
    } else {
        snprintf(d.message, sizeof d.message, "thread %u seq %" PRIu64 ": %s", d.tp.thread,
                 d.tp.seq, why_text[why]);
    }
    pthread_mutex_lock(&rp->lock);
    rp->last = d;
    rp->has_last = true;
    pthread_mutex_unlock(&rp->lock);
    atomic_fetch_add_explicit(&s->divergences, 1, memory_order_relaxed);
    if (s->cfg.divergence == TT_DIVERGE_COUNT && exp && why != TT_DIV_ORDER)
        realign(s, t, act);
    return TT_E_DIVERGED;
}

static uint64_t first_difference(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* Enter and exit: matched straight from the encoded bytes when they agree (the common case), so
 * the call builds no event and copies nothing; anything else takes the general path. */
int tt_replay_fn(tt_session *s, struct tt_thread *t, uint8_t k, uint32_t function)
{
    struct tt_replay_thread *rt = t->rp;
    uint64_t seq, time;
    if (TT_LIKELY(rt->rec != UINT32_MAX && !t->ended && !s->rp->ordered) &&
        tt_reader_match_fn_(s->rp->r, rt->rec, k, function, &seq, &time)) {
        /* only the fields a history line shows; the slot's payload preview is cleared */
        tt_report_event *h = &rt->hist[rt->hist_pos];
        h->ev.kind = k;
        h->ev.dir = 0;
        h->ev.tp.thread = rt->rec;
        h->ev.tp.seq = seq;
        h->ev.time = time;
        h->ev.sp.function = function;
        h->ev.sp.site = 0;
        h->ev.arg = h->ev.addr = h->ev.payload_len = 0;
        h->preview_len = 0;
        rt->hist_pos = (rt->hist_pos + 1) % TT_REPORT_HISTORY;
        if (rt->hist_len < TT_REPORT_HISTORY)
            rt->hist_len++;
        atomic_store_explicit(&rt->matched, rt->matched + 1, memory_order_relaxed);
        return TT_OK;
    }
    tt_event ev = { .kind = k, .sp = { function, 0 } };
    return tt_replay_event(s, t, &ev, NULL, 0, NULL);
}

int tt_replay_event(tt_session *s, struct tt_thread *t, const tt_event *act, void *in_buf,
                    size_t in_cap, size_t *in_len)
{
    struct tt_replayer *rp = s->rp;
    struct tt_replay_thread *rt = t->rp;
    tt_error_info err;
    tt_event ev;
    int rc;
    if (t->ended)
        return TT_E_CLOSED;
    if (rt->rec == UINT32_MAX && !bind_by_order(rp, t))
        return diverge(s, t, TT_DIV_THREAD, NULL, act, 0);
    uint8_t k = act->kind;
    for (;;) {
        rc = tt_reader_peek(rp->r, rt->rec, &ev, &err);
        if (rc == TT_E_END)
            return diverge(s, t, TT_DIV_END, NULL, act, 0);
        if (rc != TT_OK)
            return rc;
        if (!structural(ev.kind))
            break;
        tt_reader_advance(rp->r, rt->rec);
    }
    if (rp->ordered && !wait_turn(s, rt->rec, ev.time))
        return diverge(s, t, TT_DIV_ORDER, &ev, act, 0);
    tt_diverge_reason why = TT_DIV_NONE;
    uint64_t diff = 0;
    if (ev.kind != k)
        why = TT_DIV_KIND;
    else if ((k == TT_EV_ENTER || k == TT_EV_EXIT || k == TT_EV_SAFEPOINT) &&
             ev.sp.function != act->sp.function)
        why = TT_DIV_FUNCTION;
    else if (k != TT_EV_ENTER && k != TT_EV_EXIT && ev.sp.site != act->sp.site)
        why = TT_DIV_SITE;
    else if (k == TT_EV_ALLOC && ev.arg != act->arg)
        why = TT_DIV_SIZE;
    else if ((k == TT_EV_IO || k == TT_EV_USER) && ev.arg != act->arg)
        why = TT_DIV_ARG;
    else if (k == TT_EV_IO && ev.dir != act->dir)
        why = TT_DIV_DIRECTION;
    else if (k == TT_EV_IO && act->dir == TT_IO_IN) {
        if (ev.payload_len > in_cap)
            why = TT_DIV_LENGTH;
    } else if (k == TT_EV_CRASH) {
        /* the same signal at the same point; the backtrace text holds addresses, not compared */
        if (ev.arg != act->arg)
            why = TT_DIV_ARG;
    } else if (ev.payload_len != act->payload_len) {
        why = TT_DIV_LENGTH;
    } else if (ev.payload_len) {
        diff = first_difference(ev.payload, act->payload, ev.payload_len);
        if (diff < ev.payload_len)
            why = TT_DIV_PAYLOAD;
    }
    if (why != TT_DIV_NONE)
        return diverge(s, t, why, &ev, act, diff);

    if (k == TT_EV_IO && act->dir == TT_IO_IN) {
        if (ev.payload_len)
            memcpy(in_buf, ev.payload, ev.payload_len);
        if (in_len)
            *in_len = ev.payload_len;
    }
    if (k == TT_EV_CHECKPOINT)
        tt_checkpoint_retain(s, ev.payload, ev.payload_len, ev.tp);
    report_event(&rt->hist[rt->hist_pos], &ev);
    rt->hist_pos = (rt->hist_pos + 1) % TT_REPORT_HISTORY;
    if (rt->hist_len < TT_REPORT_HISTORY)
        rt->hist_len++;
    tt_reader_advance(rp->r, rt->rec);
    atomic_store_explicit(&rt->matched, rt->matched + 1, memory_order_relaxed);
    if (rp->ordered) {
        tt_error_info e2;
        int rc2 = publish_next(rp, rt->rec, &e2);
        if (rc2 != TT_OK)
            return rc2;
    }
    return TT_OK;
}

int tt_replayer_close(tt_session *s, tt_error_info *err)
{
    struct tt_replayer *rp = s->rp;
    const tt_manifest *m = tt_reader_manifest(rp->r);
    uint64_t left = 0;
    tt_event first;
    bool have_first = false;
    tt_error_info e2;
    atomic_store_explicit(&s->closing, 1, memory_order_release);
    for (uint32_t i = 0; i < m->thread_count; i++) {
        tt_event ev;
        int rc;
        while ((rc = tt_reader_next(rp->r, i, &ev, &e2)) == TT_OK) {
            if (structural(ev.kind))
                continue;
            if (!have_first) {
                first = ev;
                have_first = true;
            }
            left++;
        }
        if (rc != TT_E_END) {
            if (err)
                *err = e2;
            return rc;
        }
    }
    if (left)
        return tt_fail(err, TT_E_UNCONSUMED, 0, UINT64_MAX,
                       "replay closed with %" PRIu64 " recorded events left; the next was %s "
                       "(thread %u, seq %" PRIu64 ", function %u, site %u)",
                       left, tt_event_kind_name(first.kind), first.tp.thread, first.tp.seq,
                       first.sp.function, first.sp.site);
    return TT_OK;
}

int tt_replay_divergence(tt_session *s, tt_divergence *out)
{
    if (!s || !s->rp)
        return TT_E_INVAL;
    pthread_mutex_lock(&s->rp->lock);
    bool has = s->rp->has_last;
    if (has)
        *out = s->rp->last;
    pthread_mutex_unlock(&s->rp->lock);
    return has ? TT_OK : TT_E_INVAL;
}

int tt_replay_progress_get(tt_session *s, tt_replay_progress *out)
{
    memset(out, 0, sizeof *out);
    if (!s || !s->rp)
        return TT_E_MODE;
    struct tt_replayer *rp = s->rp;
    out->total = tt_reader_manifest(rp->r)->event_count;
    out->divergences = atomic_load_explicit(&s->divergences, memory_order_relaxed);
    pthread_mutex_lock(&s->lock);
    out->threads_seen = s->nthreads;
    /* each thread counts its own matches; call this from the replaying threads' quiet points
     * (or after joining them) for an exact figure */
    for (uint32_t i = 0; i < s->nthreads; i++) {
        /* a thread still registering has no replay state yet (it is set up outside the lock) */
        struct tt_replay_thread *rt = atomic_load_explicit(&s->threads[i]->rp_pub, memory_order_acquire);
        if (rt)
            out->matched += atomic_load_explicit(&rt->matched, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->lock);
    int rc;
    struct tt_thread *t = tt_thread_lookup_slow(s, &rc);
    if (t && (t->rp->rec != UINT32_MAX || bind_by_order(rp, t))) {
        tt_error_info e;
        tt_event ev;
        while (tt_reader_peek(rp->r, t->rp->rec, &ev, &e) == TT_OK) {
            if (!structural(ev.kind)) {
                out->has_next = 1;
                out->next = ev;
                out->next.payload = NULL;
                break;
            }
            tt_reader_advance(rp->r, t->rp->rec);
        }
    }
    return TT_OK;
}

const char *tt_replay_name(tt_session *s, uint32_t id)
{
    uint8_t kind;
    const char *nm;
    uint32_t len;
    if (tt_names_get(&s->names, id, &kind, &nm, &len) != TT_OK)
        return NULL;
    return nm;
}

/* Appends name @nm (@n bytes) at *@o in @buf: a name comes from the program (or a hostile
 * file) and the text goes to a terminal, so control bytes and backslashes are escaped (\xNN,
 * \\); UTF-8 passes as it is. */
static void put_name(char *buf, size_t cap, size_t *o, const char *nm, uint32_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (uint32_t i = 0; i < n && *o + 5 < cap; i++) {
        unsigned char c = (unsigned char)nm[i];
        if (c < 0x20 || c == 0x7f || c == '\\') {
            buf[(*o)++] = '\\';
            if (c == '\\') {
                buf[(*o)++] = '\\';
                continue;
            }
            buf[(*o)++] = 'x';
            buf[(*o)++] = hex[c >> 4];
            buf[(*o)++] = hex[c & 15];
        } else {
            buf[(*o)++] = (char)c;
        }
    }
    if (*o < cap)
        buf[*o] = '\0';
}

static size_t fmt_event(tt_session *s, const tt_report_event *re, char *buf, size_t cap)
{
    const tt_event *ev = &re->ev;
    uint8_t kind;
    const char *fn = NULL, *site = NULL;
    uint32_t fl = 0, sl = 0;
    if (ev->sp.function && tt_names_get(&s->names, ev->sp.function, &kind, &fn, &fl) != TT_OK)
        fn = NULL;
    if (ev->sp.site && tt_names_get(&s->names, ev->sp.site, &kind, &site, &sl) != TT_OK)
        site = NULL;
    int n = snprintf(buf, cap, "%s", tt_event_kind_name(ev->kind));
    size_t o = n > 0 ? (size_t)n : 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (o < cap) {                                                                             \
            int k_ = snprintf(buf + o, cap - o, __VA_ARGS__);                                      \
            if (k_ > 0)                                                                            \
                o += (size_t)k_;                                                                   \
        }                                                                                          \
    } while (0)
    if (ev->sp.function) {
        APPEND(" function=");
        put_name(buf, cap, &o, fn ? fn : "?", fn ? fl : 1);
        APPEND("(#%u)", ev->sp.function);
    }
    if (ev->sp.site) {
        APPEND(" site=");
        put_name(buf, cap, &o, site ? site : "?", site ? sl : 1);
        APPEND("(#%u)", ev->sp.site);
    }
    if (ev->kind == TT_EV_ALLOC)
        APPEND(" size=%" PRIu64, ev->arg);
    if (ev->kind == TT_EV_IO)
        APPEND(" %s channel=%" PRIu64, ev->dir == TT_IO_OUT ? "out" : "in", ev->arg);
    if (ev->kind == TT_EV_USER)
        APPEND(" tag=%" PRIu64, ev->arg);
    if (ev->payload_len || re->preview_len) {
        APPEND(" len=%" PRIu64 " bytes=", ev->payload_len);
        for (uint32_t i = 0; i < re->preview_len; i++)
            APPEND("%02x", re->preview[i]);
    }
#undef APPEND
    return o < cap ? o : cap ? cap - 1 : 0;
}

size_t tt_divergence_format(tt_session *s, const tt_divergence *d, char *buf, size_t cap)
{
    char e[512], a[512];
    size_t o = 0;
    if (!cap)
        return 0;
    buf[0] = '\0';
    fmt_event(s, &d->actual, a, sizeof a);
    if (d->has_expected)
        fmt_event(s, &d->expected, e, sizeof e);
    else
        snprintf(e, sizeof e, "(end of the recording)");
    int n = snprintf(buf, cap,
                     "replay diverged: %s\n  thread %u, sequence %" PRIu64 "\n  expected: %s\n"
                     "  actual:   %s\n",
                     d->message, d->tp.thread, d->tp.seq, e, a);
    o = n > 0 ? ((size_t)n < cap ? (size_t)n : cap - 1) : 0;
    if (d->history_len && o < cap) {
        n = snprintf(buf + o, cap - o, "  last %u matched events of this thread:\n", d->history_len);
        o += n > 0 ? (size_t)n : 0;
        for (uint32_t i = 0; i < d->history_len && o < cap; i++) {
            char h[512];
            fmt_event(s, &d->history[i], h, sizeof h);
            n = snprintf(buf + o, cap - o, "    seq %" PRIu64 ": %s\n", d->history[i].ev.tp.seq, h);
            o += n > 0 ? (size_t)n : 0;
        }
    }
    return o < cap ? o : cap - 1;
}
