/* SPDX-License-Identifier: MIT */
/* The index tables: the frame table reproduces a known call tree exactly, the summary agrees
 * with a brute recomputation from the events, the seek index lands on the right events, the
 * outcomes of crashed and still-open frames, and damaged tables are refused with file, offset
 * and reason. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a known call tree ---- */

#define MAX_NODES 4096

struct node {
    uint32_t fn;
    int parent;           /* node number, -1 for a top-level call */
    int depth;
    int first_child, next_sibling, last_child;
    uint64_t post;        /* expected post-order number in its thread */
};

struct model {
    struct node n[MAX_NODES];
    int count;
    int roots[8], nroots;
    uint64_t next_post;
};

static int add(struct model *m, int parent, uint32_t fn)
{
    cr_assert_lt(m->count, MAX_NODES);
    int k = m->count++;
    struct node *x = &m->n[k];
    x->fn = fn;
    x->parent = parent;
    x->depth = parent < 0 ? 0 : m->n[parent].depth + 1;
    x->first_child = x->next_sibling = x->last_child = -1;
    if (parent < 0) {
        m->roots[m->nroots++] = k;
    } else {
        struct node *p = &m->n[parent];
        if (p->last_child < 0)
            p->first_child = k;
        else
            m->n[p->last_child].next_sibling = k;
        p->last_child = k;
    }
    return k;
}

static void number(struct model *m, int k)
{
    for (int c = m->n[k].first_child; c >= 0; c = m->n[c].next_sibling)
        number(m, c);
    m->n[k].post = m->next_post++;
}

struct run {
    tt_session *s;
    struct model *m;
};

/* Each call carries its own value: a user event whose tag is the node number. */
static void play(tt_session *s, struct model *m, int k)
{
    cr_assert_eq(tt_enter(s, m->n[k].fn), TT_OK);
    cr_assert_eq(tt_user(s, (uint64_t)k, NULL, 0), TT_OK);
    for (int c = m->n[k].first_child; c >= 0; c = m->n[c].next_sibling)
        play(s, m, c);
    cr_assert_eq(tt_exit(s, m->n[k].fn), TT_OK);
}

static void *play_thread(void *arg)
{
    struct run *r = arg;
    for (int i = 0; i < r->m->nroots; i++)
        play(r->s, r->m, r->m->roots[i]);
    tt_session_thread_end(r->s);
    return NULL;
}

static uint32_t fn_named(tt_session *s, const char *fmt, int k)
{
    char name[64];
    uint32_t id;
    snprintf(name, sizeof name, fmt, k);
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, name, &id), TT_OK);
    return id;
}

/* Thread A: a root with a function of 1500 children (more than a frame block), then a
 * recursion 12 deep, then a leaf. Thread B: two top-level calls, a binary tree of depth 6 and a
 * chain. Every node but the recursive ones calls a function of its own. */
static void build(tt_session *s, struct model *a, struct model *b)
{
    memset(a, 0, sizeof *a);
    memset(b, 0, sizeof *b);
    int ra = add(a, -1, fn_named(s, "a_root", 0));
    int wide = add(a, ra, fn_named(s, "wide", 0));
    for (int i = 0; i < 1500; i++)
        add(a, wide, fn_named(s, "leaf%d", i));
    uint32_t rec = fn_named(s, "rec", 0);
    int at = ra;
    for (int i = 0; i < 12; i++)
        at = add(a, at, rec);
    add(a, ra, fn_named(s, "a_tail", 0));

    int rb = add(b, -1, fn_named(s, "b_root", 0));
    int level[64], nl = 1, next[128];
    level[0] = rb;
    for (int d = 0; d < 5; d++) {
        int nn = 0;
        for (int i = 0; i < nl; i++) {
            next[nn] = add(b, level[i], fn_named(s, "bt%d", b->count));
            nn++;
            next[nn] = add(b, level[i], fn_named(s, "bt%d", b->count));
            nn++;
        }
        memcpy(level, next, (size_t)nn * sizeof *next);
        nl = nn;
    }
    int chain = add(b, -1, fn_named(s, "chain", 0));
    for (int i = 0; i < 20; i++)
        chain = add(b, chain, fn_named(s, "c%d", i));
    for (int i = 0; i < a->nroots; i++)
        number(a, a->roots[i]);
    for (int i = 0; i < b->nroots; i++)
        number(b, b->roots[i]);
}

static int open_small(tt_memory_sink *sink, tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    tt_config_init(&cfg);
    tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, err);
    /* small buffers: many chunks, frame blocks and seek batches interleave with them */
    tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, err);
    tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 64 * 4096, err);
    tt_config_set_memory_sink(&cfg, sink);
    return tt_session_open(&cfg, s, err);
}

struct thread_view {
    uint32_t id;          /* recorded thread id */
    struct model *m;
    int *node_of_post;    /* post-order number -> node */
    uint64_t *enter, *exit;
};

/* The enter and exit time of every node, from the events alone: the user event right after an
 * enter names the node. */
static void times_from_events(tt_test_reader *tr, struct thread_view *v)
{
    tt_test_events evs = {0};
    tt_test_read_cursor(tr, v->id, &evs);
    cr_assert_eq(evs.end_code, TT_E_END, "%s", evs.err.message);
    int stack[256], depth = 0;
    uint64_t pending_enter = 0;
    int have = 0;
    for (size_t i = 0; i < evs.n; i++) {
        const tt_event *e = &evs.v[i].ev;
        if (e->kind == TT_EV_ENTER) {
            pending_enter = e->time;
            have = 1;
        } else if (e->kind == TT_EV_USER) {
            cr_assert(have, "a user event without its enter");
            int k = (int)e->arg;
            cr_assert_lt(k, v->m->count);
            v->enter[k] = pending_enter;
            stack[depth++] = k;
            have = 0;
        } else if (e->kind == TT_EV_EXIT) {
            cr_assert_gt(depth, 0);
            int k = stack[--depth];
            cr_assert_eq(e->sp.function, v->m->n[k].fn);
            v->exit[k] = e->time;
        }
    }
    cr_assert_eq(depth, 0);
    tt_test_events_free(&evs);
}

static void check_thread(tt_index *ix, tt_test_reader *tr, struct thread_view *v)
{
    tt_error_info err = {0};
    const struct model *m = v->m;
    const tt_index_thread *ti = tt_index_thread_info(ix, v->id);
    cr_assert_not_null(ti);
    cr_assert_eq(ti->frames, (uint64_t)m->count, "thread %u: %llu frames, the program made %d calls",
                 v->id, (unsigned long long)ti->frames, m->count);
    cr_assert_eq(ti->kinds[TT_EV_ENTER], (uint64_t)m->count);
    cr_assert_eq(ti->kinds[TT_EV_USER], (uint64_t)m->count);
    v->enter = calloc((size_t)m->count, sizeof *v->enter);
    v->exit = calloc((size_t)m->count, sizeof *v->exit);
    times_from_events(tr, v);
    uint64_t children = 0;
    for (int k = 0; k < m->count; k++) {
        const struct node *x = &m->n[k];
        tt_frame f;
        cr_assert_eq(tt_index_frame(ix, v->id, x->post, &f, &err), TT_OK, "%s", err.message);
        cr_assert_eq(f.function, x->fn, "thread %u node %d: function %u, expected %u", v->id, k,
                     f.function, x->fn);
        cr_assert_eq(f.depth, (uint32_t)x->depth, "node %d: depth %u, expected %d", k, f.depth,
                     x->depth);
        cr_assert_eq(f.outcome, TT_FRAME_RETURNED);
        cr_assert_eq(f.start, v->enter[k], "node %d: start %llu, its enter is at %llu", k,
                     (unsigned long long)f.start, (unsigned long long)v->enter[k]);
        cr_assert_eq(f.start + f.duration, v->exit[k], "node %d: end %llu, its exit is at %llu", k,
                     (unsigned long long)(f.start + f.duration), (unsigned long long)v->exit[k]);
        uint64_t parent;
        cr_assert_eq(tt_index_parent(ix, v->id, x->post, &parent, &err), TT_OK, "%s", err.message);
        cr_assert_eq(parent, x->parent < 0 ? TT_FRAME_NONE : m->n[x->parent].post,
                     "node %d: parent %llu", k, (unsigned long long)parent);
        /* the children, walked last to first through the rows (tt_frame_prev_child), against
         * the program's own list in call order */
        uint64_t i = 0;
        for (int c = x->first_child; c >= 0; c = m->n[c].next_sibling)
            i++;
        cr_assert_eq(i, f.child_count, "node %d: %llu children, its frame has %llu", k,
                     (unsigned long long)i, (unsigned long long)f.child_count);
        uint64_t left = i, ci = tt_frame_last_child(&f);
        while (left > 0) {
            int c = x->first_child;
            for (uint64_t j = 1; j < left; j++)
                c = m->n[c].next_sibling;
            cr_assert_neq(ci, TT_FRAME_NONE, "node %d: the rows list %llu children fewer", k,
                          (unsigned long long)left);
            cr_assert_eq(ci, m->n[c].post, "node %d child %llu: frame %llu, expected %llu", k,
                         (unsigned long long)(left - 1), (unsigned long long)ci,
                         (unsigned long long)m->n[c].post);
            tt_frame cf;
            cr_assert_eq(tt_index_frame(ix, v->id, ci, &cf, &err), TT_OK, "%s", err.message);
            ci = tt_frame_prev_child(&f, &cf);
            left--;
        }
        cr_assert_eq(ci, TT_FRAME_NONE, "node %d: the rows list more children than it made", k);
        children += i;
        /* its enter lies in the chunk the frame names: seek there and find it */
        tt_timepoint_entry e;
        cr_assert_eq(tt_index_seek_time(ix, v->id, f.start, &e, NULL), TT_OK);
    }
    cr_assert_eq(ti->children, children);
    free(v->enter);
    free(v->exit);
}

Test(index, frame_table_reproduces_a_known_call_tree, .init = tt_test_dir_setup,
     .fini = tt_test_dir_teardown)
{
    static struct model a, b;
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(&sink, &s, &err), TT_OK, "%s", err.message);
    build(s, &a, &b);
    /* the two branches run in parallel, each in its own thread; the main thread records
     * nothing before them, so thread ids follow whichever starts first */
    struct run ra = { s, &a }, rb = { s, &b };
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, play_thread, &ra), 0);
    cr_assert_eq(pthread_create(&tb, NULL, play_thread, &rb), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_verify_result vr;
    cr_assert_eq(tt_verify_ex(&src, NULL, TT_VERIFY_FRAMES, &vr), TT_OK, "%s", vr.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tr.m.thread_count, 3u, "threads: the closing main thread and the two branches");
    /* which recorded thread ran which branch: the one whose first frame is a leaf of "wide" */
    struct thread_view va = { .m = &a }, vb = { .m = &b };
    int found = 0;
    for (uint32_t t = 0; t < tr.m.thread_count; t++) {
        const tt_index_thread *ti = tt_index_thread_info(ix, t);
        if (ti->frames == (uint64_t)a.count) {
            va.id = t;
            found |= 1;
        } else if (ti->frames == (uint64_t)b.count) {
            vb.id = t;
            found |= 2;
        } else {
            cr_assert_eq(ti->frames, 0u, "thread %u has %llu frames", t,
                         (unsigned long long)ti->frames);
        }
    }
    cr_assert_eq(found, 3);
    tt_test_reader_close(&tr);
    tt_index_close(ix);

    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    check_thread(ix, &tr, &va);
    tt_test_reader_close(&tr);
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    tt_index_close(ix);
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    check_thread(ix, &tr, &vb);
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- the summary against a brute recomputation from the events ---- */

struct walker {
    tt_session *s;
    uint32_t fns[24];
    uint64_t seed;
    int calls;
};

/* A pseudo-random call tree: up to 6 levels, 0-4 children, recursion through fns[0]. */
static void walk(struct walker *w, int depth)
{
    w->seed = tt_test_mix(w->seed, (uint64_t)depth, 7);
    uint32_t fn = w->fns[w->seed % 24];
    cr_assert_eq(tt_enter(w->s, fn), TT_OK);
    w->calls++;
    cr_assert_eq(tt_safepoint(w->s, fn, (uint32_t)w->calls), TT_OK);
    int kids = depth >= 6 ? 0 : (int)((w->seed >> 8) % 5);
    for (int i = 0; i < kids; i++)
        walk(w, depth + 1);
    cr_assert_eq(tt_exit(w->s, fn), TT_OK);
}

static void *walk_thread(void *arg)
{
    struct walker *w = arg;
    for (int i = 0; i < 40; i++)
        walk(w, 0);
    tt_session_thread_end(w->s);
    return NULL;
}

/* @n threads, each walking its own pseudo-random call tree (seed @seed0 + thread) over 24
 * functions named @prefix0 .. @prefix23, run to their end. Returns the calls they made. */
static uint64_t walk_threads(tt_session *s, int n, uint64_t seed0, const char *prefix)
{
    struct walker w[4];
    pthread_t th[4];
    cr_assert_leq(n, 4);
    for (int t = 0; t < n; t++) {
        w[t] = (struct walker){ .s = s, .seed = seed0 + (uint64_t)t };
        for (int i = 0; i < 24; i++)
            w[t].fns[i] = fn_named(s, prefix, i);
        cr_assert_eq(pthread_create(&th[t], NULL, walk_thread, &w[t]), 0);
    }
    uint64_t calls = 0;
    for (int t = 0; t < n; t++) {
        pthread_join(th[t], NULL);
        calls += (uint64_t)w[t].calls;
    }
    return calls;
}

struct brute {
    uint64_t calls, total, self, longest;
    uint32_t max_depth;
};

Test(index, summary_equals_a_recomputation_from_the_events)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(&sink, &s, &err), TT_OK, "%s", err.message);
    uint64_t calls = walk_threads(s, 3, 11, "f%d");
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    static struct brute want[64];
    memset(want, 0, sizeof want);
    uint64_t frames = 0, tracer = 0;
    for (uint32_t t = 0; t < tr.m.thread_count; t++) {
        tt_test_events evs = {0};
        tt_test_read_cursor(&tr, t, &evs);
        cr_assert_eq(evs.end_code, TT_E_END, "%s", evs.err.message);
        struct { uint32_t fn; uint64_t start, kids; } st[64];
        int d = 0;
        for (size_t i = 0; i < evs.n; i++) {
            const tt_event *e = &evs.v[i].ev;
            if (e->kind == TT_EV_ENTER) {
                cr_assert_lt(d, 64);
                st[d].fn = e->sp.function;
                st[d].start = e->time;
                st[d].kids = 0;
                d++;
            } else if (e->kind == TT_EV_EXIT) {
                cr_assert_gt(d, 0);
                d--;
                cr_assert_eq(st[d].fn, e->sp.function);
                uint64_t dur = e->time - st[d].start;
                struct brute *b = &want[e->sp.function];
                cr_assert_lt(e->sp.function, 64u);
                b->calls++;
                b->total += dur;
                b->self += dur - st[d].kids;
                if (dur > b->longest)
                    b->longest = dur;
                if ((uint32_t)d > b->max_depth)
                    b->max_depth = (uint32_t)d;
                if (d)
                    st[d - 1].kids += dur;
                frames++;
                /* a wait for the budget (small buffers here) is a frame of the tracer's */
                tracer += tt_test_is_tracer(tr.r, e) != 0;
            }
        }
        tt_test_events_free(&evs);
    }
    tt_test_reader_close(&tr);
    cr_assert_eq(frames - tracer, calls);

    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < tt_index_summary_count(ix); i++) {
        const tt_summary_entry *e = tt_index_summary(ix, i);
        cr_assert_lt(e->function, 64u);
        const struct brute *b = &want[e->function];
        cr_assert_eq(e->calls, b->calls, "function %u: %llu calls, the events say %llu",
                     e->function, (unsigned long long)e->calls, (unsigned long long)b->calls);
        cr_assert_eq(e->total, b->total, "function %u: total", e->function);
        cr_assert_eq(e->self, b->self, "function %u: self", e->function);
        cr_assert_eq(e->longest, b->longest, "function %u: longest", e->function);
        cr_assert_eq(e->max_depth, b->max_depth, "function %u: depth", e->function);
        /* the longest call's frame is a call of this function that took that long */
        tt_frame f;
        cr_assert_eq(tt_index_frame(ix, e->longest_thread, e->longest_frame, &f, &err), TT_OK);
        cr_assert_eq(f.function, e->function);
        cr_assert_eq(f.duration, e->longest);
        seen += e->calls;
    }
    cr_assert_eq(seen, frames);
    cr_assert_eq(tt_index_check(ix, &err), TT_OK, "%s", err.message);
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- the seek index ---- */

Test(index, seek_lands_on_the_event_a_full_read_finds)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(&sink, &s, &err), TT_OK, "%s", err.message);
    cr_assert_gt(walk_threads(s, 2, 3, "g%d"), 0u);
    /* a payload split over chunks, so some seeks land in a chunk that continues one */
    static uint8_t big[9000];
    tt_test_fill(big, sizeof big, 99);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tt_user(s, (uint32_t)i, big, sizeof big), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    tt_test_events all[4] = {{0}};
    cr_assert_leq(tr.m.thread_count, 4u);
    for (uint32_t t = 0; t < tr.m.thread_count; t++) {
        tt_test_read_cursor(&tr, t, &all[t]);
        cr_assert_eq(all[t].end_code, TT_E_END, "%s", all[t].err.message);
    }
    tt_test_reader_close(&tr);

    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    uint64_t k = tt_index_seek_every(ix), tried = 0;
    for (uint32_t t = 0; t < tr.m.thread_count; t++) {
        uint64_t n = all[t].n;
        for (uint64_t seq = 0; seq < n; seq += 1 + seq / 3) {
            tt_timepoint_entry e;
            cr_assert_eq(tt_index_seek_seq(ix, t, seq, &e, NULL), TT_OK);
            cr_assert_leq(e.seq, seq);
            cr_assert_eq(e.seq % k, 0u);
            cr_assert_eq(e.time, all[t].v[e.seq].ev.time, "entry for seq %llu has the wrong time",
                         (unsigned long long)e.seq);
            cr_assert_eq(tt_reader_seek(tr.r, t, &e, &err), TT_OK, "%s", err.message);
            /* read on to seq: every event equals the full read's */
            for (uint64_t q = e.seq; q <= seq; q++) {
                tt_event ev;
                cr_assert_eq(tt_reader_next(tr.r, t, &ev, &err), TT_OK, "%s", err.message);
                cr_assert_eq(ev.tp.seq, q);
                cr_assert_eq(ev.time, all[t].v[q].ev.time);
                cr_assert_eq(ev.kind, all[t].v[q].ev.kind);
                cr_assert_eq(ev.sp.function, all[t].v[q].ev.sp.function);
                cr_assert_eq(ev.payload_len, all[t].v[q].ev.payload_len);
                if (ev.payload_len)
                    cr_assert_eq(memcmp(ev.payload, all[t].v[q].payload, ev.payload_len), 0);
            }
            tried++;
            /* by time: the entry is before the event, and reading on reaches it */
            uint64_t when = all[t].v[seq].ev.time;
            cr_assert_eq(tt_index_seek_time(ix, t, when, &e, NULL), TT_OK);
            cr_assert(e.time < when || e.seq == 0);
            cr_assert_leq(e.seq, seq);
        }
    }
    cr_assert_gt(tried, 20u);
    /* a hostile entry: the right chunk, the wrong index */
    tt_timepoint_entry bad;
    cr_assert_eq(tt_index_seek_seq(ix, 0, 0, &bad, NULL), TT_OK);
    bad.index = 3;
    cr_assert_eq(tt_reader_seek(tr.r, 0, &bad, &err), TT_E_CORRUPT);
    cr_assert_not_null(strstr(err.message, "does not match"), "%s", err.message);
    bad.index = 0;
    bad.chunk_offset = tr.m.data_end + 100;
    cr_assert_eq(tt_reader_seek(tr.r, 0, &bad, &err), TT_E_CORRUPT);
    cr_assert_not_null(strstr(err.message, "outside the data area"), "%s", err.message);
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    for (uint32_t t = 0; t < 4; t++)
        tt_test_events_free(&all[t]);
    free(sink.data);
}

/* ---- loops of leaf calls ---- */

/* Busy for long enough that the next event is more than 63 ticks later (a step that needs more
 * than a one-byte event tag). */
static void spin(void)
{
    for (volatile int i = 0; i < 400; i++) {
    }
}

/* What the events say a frame is, in post-order. */
struct want_frame {
    uint32_t fn, depth;
    uint64_t start, end, desc, kids;
};

/* Loops of leaf calls, which the swapper takes in bulk (writer.c, leaf_run), crossing every
 * boundary the bulk path must stop at and hand back: a run of 127 rows, a 256-row frame block,
 * a seek entry every 4 096 events, the end of a buffer (4 KiB here: 256 raw records), a step
 * over 63 ticks, another function, an event between an enter and its exit, a loop one level
 * deeper. Every frame row must be the one the events imply. */
Test(index, leaf_loops_give_the_rows_the_events_imply, .timeout = 60)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(&sink, &s, &err), TT_OK, "%s", err.message);
    uint32_t root = fn_named(s, "root%d", 0), mid = fn_named(s, "mid%d", 0), leaf[3];
    for (int i = 0; i < 3; i++)
        leaf[i] = fn_named(s, "leaf%d", i);
    static const int lengths[] = { 1, 2, 126, 127, 128, 129, 254, 255, 256, 257, 600, 4095, 4097 };
    const int nlen = (int)(sizeof lengths / sizeof lengths[0]);
    cr_assert_eq(tt_enter(s, root), TT_OK);
    uint32_t tag = 0;
    for (int r = 0; r < 3 * nlen; r++) {
        int n = lengths[r % nlen];
        uint32_t f = leaf[r % 3];
        int deeper = r % 4 == 1;
        if (deeper)
            cr_assert_eq(tt_enter(s, mid), TT_OK);
        for (int i = 0; i < n; i++) {
            uint32_t g = i % 333 == 300 ? leaf[(r + 1) % 3] : f; /* another function, once */
            cr_assert_eq(tt_enter(s, g), TT_OK);
            if (i % 97 == 50) { /* an event inside the call: not a bare enter/exit pair */
                tag++;
                cr_assert_eq(tt_user(s, tag, &tag, sizeof tag), TT_OK);
            }
            if (i % 211 == 7)
                spin();
            cr_assert_eq(tt_exit(s, g), TT_OK);
        }
        if (deeper)
            cr_assert_eq(tt_exit(s, mid), TT_OK);
    }
    cr_assert_eq(tt_exit(s, root), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_verify_result vr;
    cr_assert_eq(tt_verify_ex(&src, NULL, TT_VERIFY_FRAMES, &vr), TT_OK, "%s", vr.message);

    /* the frames from the events alone */
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tr.m.thread_count, 1u);
    tt_test_events evs = {0};
    tt_test_read_cursor(&tr, 0, &evs);
    cr_assert_eq(evs.end_code, TT_E_END, "%s", evs.err.message);
    size_t cap = evs.n / 2 + 1, nf = 0;
    struct want_frame *want = calloc(cap, sizeof *want);
    cr_assert_not_null(want);
    struct { uint32_t fn; uint64_t start, first, kids; } st[8];
    int d = 0;
    uint64_t long_steps = 0, prev_time = 0;
    for (size_t i = 0; i < evs.n; i++) {
        const tt_event *e = &evs.v[i].ev;
        if (i && e->time - prev_time > 63)
            long_steps++;
        prev_time = e->time;
        if (e->kind == TT_EV_ENTER) {
            cr_assert_lt(d, 8);
            st[d].fn = e->sp.function;
            st[d].start = e->time;
            st[d].first = nf;
            st[d].kids = 0;
            d++;
        } else if (e->kind == TT_EV_EXIT) {
            cr_assert_gt(d, 0);
            d--;
            cr_assert_eq(st[d].fn, e->sp.function);
            cr_assert_lt(nf, cap);
            want[nf] = (struct want_frame){ st[d].fn, (uint32_t)d, st[d].start, e->time,
                                            nf - st[d].first, st[d].kids };
            nf++;
            if (d)
                st[d - 1].kids++;
        }
    }
    cr_assert_eq(d, 0);
    cr_assert_gt(long_steps, 100u, "the test needs steps over 63 ticks (%llu)",
                 (unsigned long long)long_steps);

    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_index_thread_info(ix, 0)->frames, (uint64_t)nf);
    for (size_t i = 0; i < nf; i++) {
        tt_frame f;
        cr_assert_eq(tt_index_frame(ix, 0, i, &f, &err), TT_OK, "%s", err.message);
        const struct want_frame *w = &want[i];
        cr_assert(f.function == w->fn && f.depth == w->depth && f.start == w->start &&
                  f.start + f.duration == w->end && f.desc == w->desc && f.child_count == w->kids &&
                  f.outcome == TT_FRAME_RETURNED,
                  "frame %zu: fn %u depth %u start %llu end %llu desc %llu kids %llu; the events "
                  "say fn %u depth %u start %llu end %llu desc %llu kids %llu", i, f.function,
                  f.depth, (unsigned long long)f.start, (unsigned long long)(f.start + f.duration),
                  (unsigned long long)f.desc, (unsigned long long)f.child_count, w->fn, w->depth,
                  (unsigned long long)w->start, (unsigned long long)w->end,
                  (unsigned long long)w->desc, (unsigned long long)w->kids);
    }
    /* every seek entry has its event's time */
    uint64_t k = tt_index_seek_every(ix);
    for (uint64_t q = 0; q < evs.n; q += k) {
        tt_timepoint_entry e;
        cr_assert_eq(tt_index_seek_seq(ix, 0, q, &e, &err), TT_OK, "%s", err.message);
        cr_assert_eq(e.seq, q);
        cr_assert_eq(e.time, evs.v[q].ev.time, "seek entry for seq %llu", (unsigned long long)q);
    }
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    tt_test_events_free(&evs);
    free(want);
    free(sink.data);
}

/* A session recording into @sink without the index tables, in small buffers (256 raw records
 * each), so that the encoder meets many buffer ends. */
static tt_session *open_without_index(tt_memory_sink *sink)
{
    tt_session *s;
    tt_error_info err = {0};
    tt_config cfg;
    tt_config_init(&cfg);
    tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err);
    tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, &err);
    tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 64 * 4096, &err);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_INDEX, 0, &err), TT_OK, "%s", err.message);
    tt_config_set_memory_sink(&cfg, sink);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    return s;
}

/* What open_without_index recorded into @sink: verified, then thread 0's events read into
 * @evs through @tr (closed by the caller), the file without index tables. */
static void read_back_without_index(tt_memory_sink *sink, tt_test_reader *tr,
                                    tt_test_events *evs)
{
    tt_source src;
    tt_error_info err = {0};
    tt_source_memory(&src, sink->data, sink->len);
    tt_verify_result vr;
    cr_assert_eq(tt_verify_ex(&src, NULL, 0, &vr), TT_OK, "%s", vr.message);
    cr_assert_eq(tt_test_reader_open_mem(tr, sink->data, sink->len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tr->m.index_offset, 0u, "recorded without the index tables");
    tt_test_read_cursor(tr, 0, evs);
    cr_assert_eq(evs->end_code, TT_E_END, "%s", evs->err.message);
}

/* The same loops without the index tables (TT_PARAM_INDEX 0), where the swapper takes a loop's
 * leaf calls in bulk with nothing to keep but the event bytes (encoder.c, leaf_run_bare): read
 * back, the events are the calls made, one for one, in order, with their tags, and their times
 * keep every step over 63 ticks that the loops made. */
Test(index, leaf_loops_without_the_index_read_back_call_for_call, .timeout = 60)
{
    tt_memory_sink sink;
    tt_error_info err = {0};
    tt_session *s = open_without_index(&sink);
    uint32_t root = fn_named(s, "root%d", 0), mid = fn_named(s, "mid%d", 0), leaf[3];
    for (int i = 0; i < 3; i++)
        leaf[i] = fn_named(s, "leaf%d", i);
    static const int lengths[] = { 1, 2, 127, 128, 255, 256, 257, 600, 4097 };
    const int nlen = (int)(sizeof lengths / sizeof lengths[0]);
    /* what was called: kind, function (the tag, for a user event) */
    size_t cap = 64, nw = 0, spins = 0;
    struct { uint32_t kind, what; } *want = malloc(cap * sizeof *want);
    cr_assert_not_null(want);
#define WANT(k, w)                                                                             \
    do {                                                                                       \
        if (nw == cap) {                                                                       \
            cap *= 2;                                                                          \
            want = realloc(want, cap * sizeof *want);                                          \
            cr_assert_not_null(want);                                                          \
        }                                                                                      \
        want[nw].kind = (k);                                                                   \
        want[nw++].what = (w);                                                                 \
    } while (0)
    cr_assert_eq(tt_enter(s, root), TT_OK);
    WANT(TT_EV_ENTER, root);
    uint32_t tag = 0;
    for (int r = 0; r < 3 * nlen; r++) {
        int n = lengths[r % nlen];
        uint32_t f = leaf[r % 3];
        int deeper = r % 4 == 1;
        if (deeper) {
            cr_assert_eq(tt_enter(s, mid), TT_OK);
            WANT(TT_EV_ENTER, mid);
        }
        for (int i = 0; i < n; i++) {
            uint32_t g = i % 333 == 300 ? leaf[(r + 1) % 3] : f; /* another function, once */
            cr_assert_eq(tt_enter(s, g), TT_OK);
            WANT(TT_EV_ENTER, g);
            if (i % 97 == 50) { /* an event inside the call: not a bare enter/exit pair */
                tag++;
                cr_assert_eq(tt_user(s, tag, &tag, sizeof tag), TT_OK);
                WANT(TT_EV_USER, tag);
            }
            if (i % 211 == 7) {
                spin();
                spins++;
            }
            cr_assert_eq(tt_exit(s, g), TT_OK);
            WANT(TT_EV_EXIT, g);
        }
        if (deeper) {
            cr_assert_eq(tt_exit(s, mid), TT_OK);
            WANT(TT_EV_EXIT, mid);
        }
    }
    cr_assert_eq(tt_exit(s, root), TT_OK);
    WANT(TT_EV_EXIT, root);
#undef WANT
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    tt_test_events evs = {0};
    read_back_without_index(&sink, &tr, &evs);
    size_t k = 0, long_steps = 0;
    uint64_t prev_time = 0;
    for (size_t i = 0; i < evs.n; i++) {
        const tt_event *e = &evs.v[i].ev;
        if (e->kind != TT_EV_ENTER && e->kind != TT_EV_EXIT && e->kind != TT_EV_USER)
            continue; /* the session's and the thread's own events */
        cr_assert_lt(k, nw, "more events than calls");
        uint32_t what = e->kind == TT_EV_USER ? (uint32_t)e->arg : e->sp.function;
        cr_assert(e->kind == want[k].kind && what == want[k].what,
                  "event %zu: kind %u (%u), the program made kind %u (%u)", k, e->kind, what,
                  want[k].kind, want[k].what);
        cr_assert_geq(e->time, prev_time, "event %zu goes back in time", k);
        if (k && e->time - prev_time > 63)
            long_steps++;
        prev_time = e->time;
        k++;
    }
    cr_assert_eq(k, nw, "%zu events read back, %zu calls made", k, nw);
    cr_assert_geq(long_steps, spins, "each spin is a step over 63 ticks (%zu spins, %zu steps)",
                  spins, long_steps);
    tt_test_reader_close(&tr);
    tt_test_events_free(&evs);
    free(want);
    free(sink.data);
}

/* Recursions of one function without the index tables, where the swapper takes the enters and
 * exits that follow one of the same function one short tag each (encoder.c, same_fn_run): read
 * back, the events are the calls made, one for one, in order, and their times keep every step
 * over 63 ticks that the recursions made (a spin), at any depth and on the way back up. */
Test(index, recursions_without_the_index_read_back_call_for_call, .timeout = 60)
{
    tt_memory_sink sink;
    tt_error_info err = {0};
    tt_session *s = open_without_index(&sink);
    const uint32_t f = fn_named(s, "rec%d", 0), g = fn_named(s, "other%d", 1);
    static const int depths[] = { 1, 2, 63, 64, 255, 256, 257, 1000 };
    const size_t nd = sizeof depths / sizeof depths[0];
    size_t cap = 8192, nw = 0, spins = 0;
    struct { uint32_t kind, fn; } *want = malloc(cap * sizeof *want);
    cr_assert_not_null(want);
    for (size_t r = 0; r < 2 * nd; r++) {
        const int d = depths[r % nd];
        for (int i = 0; i < 2 * d; i++) {
            const bool down = i < d;
            const int level = down ? i : 2 * d - 1 - i;
            /* another function's call at some levels, a spin at others: the run stops there */
            if (down && level % 37 == 5) {
                cr_assert_eq(tt_enter(s, g), TT_OK);
                cr_assert_eq(tt_exit(s, g), TT_OK);
                cr_assert_leq(nw + 2, cap);
                want[nw].kind = TT_EV_ENTER, want[nw++].fn = g;
                want[nw].kind = TT_EV_EXIT, want[nw++].fn = g;
            }
            if (level % 53 == (r % 2 ? 7 : 40)) {
                spin();
                spins++;
            }
            cr_assert_eq(down ? tt_enter(s, f) : tt_exit(s, f), TT_OK);
            if (nw == cap) {
                cap *= 2;
                want = realloc(want, cap * sizeof *want);
                cr_assert_not_null(want);
            }
            want[nw].kind = down ? TT_EV_ENTER : TT_EV_EXIT;
            want[nw++].fn = f;
        }
    }
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    tt_test_events evs = {0};
    read_back_without_index(&sink, &tr, &evs);
    size_t k = 0, long_steps = 0, shorts = 0;
    uint64_t prev_time = 0;
    for (size_t i = 0; i < evs.n; i++) {
        const tt_event *e = &evs.v[i].ev;
        if (e->kind != TT_EV_ENTER && e->kind != TT_EV_EXIT)
            continue; /* the session's and the thread's own events */
        cr_assert_lt(k, nw, "more events than calls");
        cr_assert(e->kind == want[k].kind && e->sp.function == want[k].fn,
                  "event %zu: kind %u (%u), the program made kind %u (%u)", k, e->kind,
                  e->sp.function, want[k].kind, want[k].fn);
        cr_assert_geq(e->time, prev_time, "event %zu goes back in time", k);
        if (k && e->time - prev_time > 63)
            long_steps++;
        else if (k)
            shorts++;
        prev_time = e->time;
        k++;
    }
    cr_assert_eq(k, nw, "%zu events read back, %zu calls made", k, nw);
    cr_assert_geq(long_steps, spins, "each spin is a step over 63 ticks (%zu spins, %zu steps)",
                  spins, long_steps);
    /* how many steps were short depends on the build's speed (a sanitizer's slows the calls
     * past 63 ticks): printed, not asserted */
    printf("recursions: %zu of %zu steps short\n", shorts, nw);
    tt_test_reader_close(&tr);
    tt_test_events_free(&evs);
    free(want);
    free(sink.data);
}

/* ---- the reader's memory ---- */

/* A loop of @calls leaf calls under one root frame, recorded into @sink. */
static void record_loop(tt_memory_sink *sink, uint64_t calls)
{
    tt_config cfg;
    tt_session *s;
    tt_error_info err = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    /* as in parents_are_found_across_block_lists: a budget that holds the whole recording, so
     * no wait for a buffer adds a frame of the tracer's */
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 64u << 20, &err), TT_OK, "%s",
                 err.message);
    tt_config_set_memory_sink(&cfg, sink);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    uint32_t root = fn_named(s, "root%d", 0), leaf = fn_named(s, "leaf%d", 1);
    cr_assert_eq(tt_enter(s, root), TT_OK);
    for (uint64_t i = 0; i < calls; i++) {
        cr_assert_eq(tt_enter(s, leaf), TT_OK);
        cr_assert_eq(tt_exit(s, leaf), TT_OK);
    }
    cr_assert_eq(tt_exit(s, root), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
}

/* Opens the index of @sink, looks up the first, a middle and the last frame and the parent of
 * the first (the root, the last frame: the search crosses every block list), and returns the
 * index's peak memory after the open in *@at_open and after the lookups. */
static uint64_t index_memory_of(tt_memory_sink *sink, uint64_t calls, uint64_t *at_open)
{
    tt_error_info err = {0};
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink->data, sink->len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    *at_open = tt_index_memory(ix);
    const tt_index_thread *ti = tt_index_thread_info(ix, 0);
    cr_assert_not_null(ti);
    cr_assert_eq(ti->frames, calls + 1);
    uint64_t probe[3] = { 0, calls / 2 + 1, calls };
    for (int k = 0; k < 3; k++) {
        tt_frame f;
        cr_assert_eq(tt_index_frame(ix, 0, probe[k], &f, &err), TT_OK, "%s", err.message);
        cr_assert_eq(f.index, probe[k]);
        cr_assert_eq(f.depth, probe[k] == calls ? 0u : 1u, "frame %llu",
                     (unsigned long long)probe[k]);
        cr_assert_eq(f.desc, probe[k] == calls ? calls : 0u);
    }
    uint64_t parent;
    cr_assert_eq(tt_index_parent(ix, 0, 0, &parent, &err), TT_OK, "%s", err.message);
    cr_assert_eq(parent, calls);
    cr_assert_eq(tt_index_parent(ix, 0, calls / 2, &parent, &err), TT_OK, "%s", err.message);
    cr_assert_eq(parent, calls);
    uint64_t peak = tt_index_memory(ix);
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    return peak;
}

Test(index, reader_memory_does_not_grow_with_the_run, .timeout = 60)
{
    /* 1.1 * 10^6 calls: 4297 frame blocks, in two block lists (TT_BLOCK_LIST = 4096 blocks a
     * list); 2.2 * 10^6: 8594 blocks in three. Whole, the block offsets would take 16 bytes a
     * block, 67 KiB more for the larger run; read a list at a time, they take the same. */
    const uint64_t small_calls = 1100000, big_calls = 2200000;
    tt_memory_sink a = {0}, b = {0};
    record_loop(&a, small_calls);
    record_loop(&b, big_calls);
    uint64_t open_a, open_b;
    uint64_t peak_a = index_memory_of(&a, small_calls, &open_a);
    uint64_t peak_b = index_memory_of(&b, big_calls, &open_b);
    /* open keeps 40 bytes per block list and 16 per seek batch */
    cr_assert_leq(open_b, open_a + 256, "open: %llu bytes at 2.2e6 calls, %llu at 1.1e6",
                  (unsigned long long)open_b, (unsigned long long)open_a);
    cr_assert_leq(peak_b, peak_a + 256, "lookups: %llu bytes at 2.2e6 calls, %llu at 1.1e6",
                  (unsigned long long)peak_b, (unsigned long long)peak_a);
    free(a.data);
    free(b.data);
}

/* Parents found across block lists: root { a { 10 leaves }, b { 2.2 * 10^6 leaves }, c { 5
 * leaves } }, 8594 frame blocks in three lists. The middle list holds nothing but b's leaves, so
 * the search for a's parent skips it whole; b's leaves find b in the last list. */
Test(index, parents_are_found_across_block_lists, .timeout = 60)
{
    tt_config cfg;
    tt_session *s;
    tt_error_info err = {0};
    tt_memory_sink sink = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    /* a budget that holds the whole recording (some 5 MB): no thread ever waits for a buffer,
     * so no frame of the tracer's (a wait, record/pool.c) shifts the frame numbers below. With
     * the default one a slow swapper (a sanitizer build under load) made the test fail */
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 64u << 20, &err), TT_OK, "%s",
                 err.message);
    tt_config_set_memory_sink(&cfg, &sink);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    const uint64_t nleaf[3] = { 10, 2200000, 5 };
    uint32_t root = fn_named(s, "root%d", 0), leaf = fn_named(s, "leaf%d", 1);
    cr_assert_eq(tt_enter(s, root), TT_OK);
    for (int k = 0; k < 3; k++) {
        uint32_t mid = fn_named(s, "mid%d", k);
        cr_assert_eq(tt_enter(s, mid), TT_OK);
        for (uint64_t i = 0; i < nleaf[k]; i++) {
            cr_assert_eq(tt_enter(s, leaf), TT_OK);
            cr_assert_eq(tt_exit(s, leaf), TT_OK);
        }
        cr_assert_eq(tt_exit(s, mid), TT_OK);
    }
    cr_assert_eq(tt_exit(s, root), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    /* post order: each mid's leaves, then the mid; the root last */
    const uint64_t a = nleaf[0], b = a + 1 + nleaf[1], c = b + 1 + nleaf[2], top = c + 1;
    cr_assert_eq(tt_index_thread_info(ix, 0)->frames, top + 1);
    cr_assert_gt(b / 256, 2 * 4096u, "b's row is not in the third block list");
    const struct { uint64_t frame, parent; } want[] = {
        { 0, a }, { a - 1, a }, { a, top }, { a + 1, b }, { a + 1 + 1048576, b },
        { b - 1, b }, { b, top }, { b + 1, c }, { c - 1, c }, { c, top }, { top, TT_FRAME_NONE },
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        uint64_t parent;
        cr_assert_eq(tt_index_parent(ix, 0, want[k].frame, &parent, &err), TT_OK, "%s",
                     err.message);
        cr_assert_eq(parent, want[k].parent, "frame %llu: parent %llu, expected %llu",
                     (unsigned long long)want[k].frame, (unsigned long long)parent,
                     (unsigned long long)want[k].parent);
    }
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- outcomes ---- */

Test(index, crashed_open_and_abandoned_frames_get_their_outcome)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(&sink, &s, &err), TT_OK, "%s", err.message);
    uint32_t outer = fn_named(s, "outer", 0), inner = fn_named(s, "inner", 0),
             lost = fn_named(s, "lost", 0), done = fn_named(s, "done", 0);
    /* done returns; lost is abandoned when outer exits around it */
    cr_assert_eq(tt_enter(s, done), TT_OK);
    cr_assert_eq(tt_exit(s, done), TT_OK);
    cr_assert_eq(tt_enter(s, outer), TT_OK);
    cr_assert_eq(tt_enter(s, lost), TT_OK);
    cr_assert_eq(tt_exit(s, outer), TT_OK);
    /* outer and inner stay open: the session closes around them */
    cr_assert_eq(tt_enter(s, outer), TT_OK);
    cr_assert_eq(tt_enter(s, inner), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_index_check(ix, &err), TT_OK, "%s", err.message);
    const tt_index_thread *ti = tt_index_thread_info(ix, 0);
    cr_assert_eq(ti->frames, 5u);
    cr_assert_eq(ti->crashed, 0u);
    struct { uint32_t fn, depth, outcome; } want[5] = {
        { done, 0, TT_FRAME_RETURNED }, { lost, 1, TT_FRAME_ABANDONED },
        { outer, 0, TT_FRAME_RETURNED }, { inner, 1, TT_FRAME_OPEN }, { outer, 0, TT_FRAME_OPEN },
    };
    const tt_thread_entry *te = tt_reader_thread(tr.r, 0);
    for (uint64_t i = 0; i < 5; i++) {
        tt_frame f;
        cr_assert_eq(tt_index_frame(ix, 0, i, &f, &err), TT_OK, "%s", err.message);
        cr_assert_eq(f.function, want[i].fn, "frame %llu", (unsigned long long)i);
        cr_assert_eq(f.depth, want[i].depth, "frame %llu", (unsigned long long)i);
        cr_assert_eq(f.outcome, want[i].outcome, "frame %llu: outcome %u", (unsigned long long)i,
                     f.outcome);
        if (f.outcome == TT_FRAME_OPEN)
            cr_assert_eq(f.start + f.duration, te->last_time, "an open frame ends with its thread");
    }
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    free(sink.data);
}

Test(index, frames_open_at_a_crash_are_unwound_by_it)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(&sink, &s, &err), TT_OK, "%s", err.message);
    uint32_t a = fn_named(s, "crash_a", 0), b = fn_named(s, "crash_b", 0);
    cr_assert_eq(tt_enter(s, a), TT_OK);
    cr_assert_eq(tt_enter(s, b), TT_OK);
    tt_event ev = { .kind = TT_EV_CRASH, .arg = 11, .payload = "bt", .payload_len = 2 };
    cr_assert_eq(tt_event_full_(s, &ev, NULL, 0, NULL), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_SEQUENTIAL, &err),
                 TT_OK, "%s", err.message);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_index_thread_info(ix, 0)->crashed, 1u);
    cr_assert_eq(tt_index_thread_info(ix, 0)->kinds[TT_EV_CRASH], 1u);
    tt_frame f;
    cr_assert_eq(tt_index_frame(ix, 0, 0, &f, &err), TT_OK);
    cr_assert_eq(f.function, b);
    cr_assert_eq(f.outcome, TT_FRAME_CRASHED);
    cr_assert_eq(tt_index_frame(ix, 0, 1, &f, &err), TT_OK);
    cr_assert_eq(f.function, a);
    cr_assert_eq(f.outcome, TT_FRAME_CRASHED);
    cr_assert_eq(f.child_count, 1u);
    tt_index_close(ix);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- hostile tables ---- */

#define XXH_INLINE_ALL /* the header alone, as libtrace/base/hash.c */
#include <xxhash.h>

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Re-checksums the chunk at @off after an edit (docs/FORMAT.md §4.2). */
static void reseal(uint8_t *img, uint64_t off)
{
    uint32_t len = le32(img + off + 8);
    uint64_t seed = XXH3_64bits(img + off, 40);
    put64(img + off + 40, XXH3_64bits_withSeed(img + off + 48, len, seed));
}

/* The first chunk of @type in the data area. */
static uint64_t find_type(const uint8_t *img, uint16_t type)
{
    uint64_t off = 512, end = le64(img + 264);
    while (off < end) {
        if ((img[off + 4] | img[off + 5] << 8) == type)
            return off;
        off += 48 + le32(img + off + 8);
    }
    cr_assert_fail("no chunk of type %u", type);
    return 0;
}

static void record_walk(tt_memory_sink *sink)
{
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(open_small(sink, &s, &err), TT_OK, "%s", err.message);
    struct walker w = { .s = s, .seed = 5 };
    for (int i = 0; i < 24; i++)
        w.fns[i] = fn_named(s, "h%d", i);
    for (int i = 0; i < 200; i++)
        walk(&w, 0);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
}

/* tt_verify on the edited copy fails with @status, naming the source and an offset in
 * [@lo, @hi), and a message that contains @what. */
static void expect_refused(const uint8_t *img, size_t len, tt_verify_status status, uint64_t lo,
                           uint64_t hi, const char *what)
{
    tt_source src;
    tt_source_memory(&src, img, len);
    tt_verify_result res;
    int rc = tt_verify_ex(&src, NULL, TT_VERIFY_FRAMES, &res);
    cr_assert_neq(rc, TT_OK, "an edited table was accepted (%s)", what);
    cr_assert_eq(res.status, status, "status %s, expected %s: %s", tt_verify_status_name(res.status),
                 tt_verify_status_name(status), res.message);
    cr_assert(res.offset >= lo && res.offset < hi, "offset %llu not in [%llu, %llu): %s",
              (unsigned long long)res.offset, (unsigned long long)lo, (unsigned long long)hi,
              res.message);
    cr_assert_not_null(strstr(res.message, "<memory>"), "no file name: %s", res.message);
    cr_assert_not_null(strstr(res.message, what), "'%s' not in: %s", what, res.message);
}

Test(index, damaged_tables_are_refused_with_file_offset_and_reason)
{
    tt_memory_sink sink;
    record_walk(&sink);
    uint8_t *img = sink.data, *cp = malloc(sink.len);
    size_t len = sink.len;
    tt_source src;
    tt_source_memory(&src, img, len);
    tt_verify_result res;
    cr_assert_eq(tt_verify_ex(&src, NULL, TT_VERIFY_FRAMES, &res), TT_OK, "%s", res.message);
    uint64_t fb = find_type(img, 4), sb = find_type(img, 5), dir = le64(img + 368);
    uint32_t fb_len = le32(img + fb + 8);

    /* a frame block byte changed, checksum left: the checksum catches it */
    memcpy(cp, img, len);
    cp[fb + 48 + 3] ^= 0x01;
    expect_refused(cp, len, TT_VERIFY_CHECKSUM, fb, fb + 1, "checksum");
    {
        /* without TT_VERIFY_FRAMES too: the pass over the data area checks index chunks' sums */
        tt_source dsrc;
        tt_verify_result dres;
        tt_source_memory(&dsrc, cp, len);
        cr_assert_neq(tt_verify(&dsrc, NULL, &dres), TT_OK, "a damaged frame block was accepted");
        cr_assert_eq(dres.status, TT_VERIFY_CHECKSUM, "%s", dres.message);
    }

    /* the first row's flag byte (the body opens with it) made a run of repeats, resealed: a
     * block's first row has nothing to repeat */
    memcpy(cp, img, len);
    cr_assert_eq(cp[fb + 48] & 0xC0u, 0u, "the first row of a block is a full row");
    cp[fb + 48] |= 0x80;
    reseal(cp, fb);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, fb + 48, fb + 48 + fb_len, "run of");

    /* the first row made "not a leaf" with the same bytes after it: its fields shift, resealed */
    memcpy(cp, img, len);
    cr_assert_neq(cp[fb + 48] & 0x04u, 0u, "the first row of a block is a leaf");
    cp[fb + 48] &= (uint8_t)~0x04u;
    reseal(cp, fb);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, fb + 48, fb + 48 + fb_len, "frame");

    /* the first row of a block given GAP: it has no previous row to start after */
    memcpy(cp, img, len);
    cp[fb + 48] |= 0x40;
    reseal(cp, fb);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, fb + 48, fb + 48 + fb_len, "is invalid");

    /* a seek entry naming thread 127 */
    memcpy(cp, img, len);
    cp[sb + 48] = 0x7f;
    reseal(cp, sb);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, sb + 48, sb + 48 + le32(img + sb + 8),
                   "seek entry");

    /* the directory's block size changed from 256 to 257: every block is the wrong one */
    memcpy(cp, img, len);
    cr_assert_eq(cp[dir + 48], 0x80u);
    cr_assert_eq(cp[dir + 49], 0x02u);
    cp[dir + 48] = 0x81;
    reseal(cp, dir);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, 0, len, "frame block");

    /* the summary's first row says one call more than its frames */
    uint64_t sum = le64(img + 288) + le64(img + 296); /* right after the object table */
    memcpy(cp, img, len);
    cr_assert_lt(cp[sum + 48 + 1] & 0x7fu, 0x7fu);
    cp[sum + 48 + 1]++; /* the low 7 bits of the calls varint's first byte: one more */
    reseal(cp, sum);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, sum, sum + 1, "differs from its frames");

    /* the summary's first row naming as its longest call a frame of another function,
     * resealed: it was accepted, only the range of (thread, frame) was checked (found by
     * tests/test-sweep.c) */
    {
        const uint8_t *p = img + sum + 48;
        uint64_t v[8];
        const uint8_t *at = NULL;
        for (int k = 0; k < 8; k++) {
            if (k == 7)
                at = p;
            v[k] = 0;
            for (unsigned sh = 0;; sh += 7) {
                v[k] |= (uint64_t)(*p & 0x7f) << sh;
                if (!(*p++ & 0x80))
                    break;
            }
        }
        tt_test_reader tr;
        tt_error_info err = {0};
        cr_assert_eq(tt_test_reader_open_mem(&tr, img, len, TT_CURSORS_SEQUENTIAL, &err), TT_OK);
        tt_index *ix;
        cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_OK, "%s", err.message);
        uint8_t other = 0;
        for (uint8_t c = 0; c < 0x80 && !other; c++) {
            tt_frame fr;
            if (tt_index_frame(ix, 0, c, &fr, &err) == TT_OK && fr.function != v[0])
                other = c;
        }
        tt_index_close(ix);
        tt_test_reader_close(&tr);
        cr_assert_neq(other, 0, "no frame of another function among the first 128");
        /* the same number of bytes: an over-long varint (readers accept those, §1) */
        memcpy(cp, img, len);
        size_t n = (size_t)(p - at), o = (size_t)(at - img);
        for (size_t k = 0; k < n; k++)
            cp[o + k] = (uint8_t)((k == 0 ? other : 0) | (k + 1 < n ? 0x80 : 0));
        reseal(cp, sum);
        expect_refused(cp, len, TT_VERIFY_CORRUPT, sum, sum + 1, "longest call");
    }

    /* thread 0's max_depth one higher, then its crash flag set, in the directory, resealed:
     * both were accepted, only bounded (found by tests/test-sweep.c) */
    {
        const uint8_t *p = img + dir + 48;
        for (int k = 0; k < 7; k++) { /* B, K, summary offset and length, threads; frames, kids */
            while (*p & 0x80)
                p++;
            p++;
        }
        size_t depth_at = (size_t)(p - img);
        cr_assert_lt(img[depth_at], 0x7fu, "a one-byte max_depth");
        cr_assert_eq(img[depth_at + 1], 0u, "thread 0 did not crash");
        memcpy(cp, img, len);
        cp[depth_at]++;
        reseal(cp, dir);
        expect_refused(cp, len, TT_VERIFY_CORRUPT, dir, dir + 1, "nest");
        memcpy(cp, img, len);
        cp[depth_at + 1] = 1;
        reseal(cp, dir);
        expect_refused(cp, len, TT_VERIFY_CORRUPT, dir, len, "crash");
    }

    /* the manifest's directory pointer off by one */
    memcpy(cp, img, len);
    put64(cp + 368, dir + 1);
    put64(cp + 504, XXH3_64bits(cp, 504));
    expect_refused(cp, len, TT_VERIFY_CORRUPT, 368, 369, "index directory");

    /* a block list given a base time (it has none: written as 0, §14.9), resealed; it was
     * accepted (found by tests/test-sweep.c) */
    uint64_t bl = find_type(img, 8);
    memcpy(cp, img, len);
    cr_assert_eq(le64(cp + bl + 32), 0u);
    cp[bl + 32] = 1;
    reseal(cp, bl);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, bl, bl + 48, "block list with a base time");

    /* a block's reach-back one lower in its block list, resealed: tt_index_parent would skip
     * a block that holds a parent; it was accepted (found by tests/test-sweep.c) */
    {
        const uint8_t *p = img + bl + 48, *e = p + le32(img + bl + 8);
        uint64_t at = 0;
        while (p < e && !at) {
            while (*p & 0x80)
                p++;
            p++; /* the offset delta */
            if (!(*p & 0x80) && *p > 0)
                at = (uint64_t)(p - img);
            while (*p & 0x80)
                p++;
            p++; /* the reach-back */
        }
        cr_assert_neq(at, 0u, "no block list entry with a one-byte reach-back above 0");
        memcpy(cp, img, len);
        cp[at]--;
        reseal(cp, bl);
        expect_refused(cp, len, TT_VERIFY_CORRUPT, 512, le64(img + 264), "reach back");
    }

    /* a frame block's thread changed: the directory's block is another thread's */
    memcpy(cp, img, len);
    cp[fb + 12] = 1;
    reseal(cp, fb);
    expect_refused(cp, len, TT_VERIFY_CORRUPT, fb, fb + 1, "frame block");
    free(cp);
    free(sink.data);
}

/* recover passes over the index chunks of a dead run's data area; its file has no index */
Test(index, recover_keeps_the_events_and_leaves_the_index_out, .init = tt_test_dir_setup,
     .fini = tt_test_dir_teardown)
{
    tt_memory_sink sink;
    record_walk(&sink);
    uint8_t *img = sink.data;
    (void)find_type(img, 4); /* the data area holds frame blocks */
    uint64_t events = le64(img + 192);
    /* the file as a dead run leaves it: provisional manifest, the data area, nothing after */
    uint64_t data_end = le64(img + 264);
    uint32_t flags = le32(img + 16) & ~1u;
    for (int i = 0; i < 4; i++)
        img[16 + i] = (uint8_t)(flags >> (8 * i));
    put64(img + 504, XXH3_64bits(img, 504));
    tt_source src;
    tt_source_memory(&src, img, data_end);
    tt_recover_result res;
    tt_error_info err = {0};
    const char *out = tt_test_path("recovered.tt");
    cr_assert_eq(tt_recover(&src, out, &res, &err), TT_OK, "%s", err.message);
    cr_assert_eq(res.events, events, "recovered %llu of %llu events",
                 (unsigned long long)res.events, (unsigned long long)events);
    tt_source rs;
    cr_assert_eq(tt_source_file(&rs, out, &err), TT_OK, "%s", err.message);
    tt_verify_result vr;
    cr_assert_eq(tt_verify_ex(&rs, NULL, TT_VERIFY_FRAMES, &vr), TT_OK, "%s", vr.message);
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_file(&tr, out, TT_CURSORS_SEQUENTIAL, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(tr.m.index_offset, 0u);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_E_INVAL);
    cr_assert_not_null(strstr(err.message, "recovered"), "%s", err.message);
    tt_test_reader_close(&tr);
    tt_source_close(&rs);
    free(sink.data);
}

/* tt_index_build of @img into @out: @want, a message naming the source and no file left when
 * it refuses; a file tt_verify accepts, with its frames, when it builds. */
static void expect_built(const uint8_t *img, size_t len, const char *out, int want,
                         const char *what)
{
    tt_source src;
    tt_index_build_result res;
    tt_error_info err = {0};
    tt_source_memory(&src, img, len);
    int rc = tt_index_build(&src, out, 0, &res, &err);
    cr_assert_eq(rc, want, "%s: index build gave %d, expected %d: %s", what, rc, want,
                 err.message);
    if (rc != TT_OK) {
        cr_assert_not_null(strstr(err.message, "<memory>"), "%s: no file name: %s", what,
                           err.message);
        cr_assert_null(fopen(out, "rb"), "%s: refused, and %s is there", what, out);
        return;
    }
    tt_source os;
    tt_verify_result vr;
    cr_assert_eq(tt_source_file(&os, out, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_verify_ex(&os, NULL, TT_VERIFY_FRAMES, &vr), TT_OK, "%s: the built file: %s",
                 what, vr.message);
    tt_source_close(&os);
    remove(out);
}

/* The index built after the recording copies the event chunks and the tables as they are, so it
 * refuses what a reader refuses in them rather than write a file that fails verify (found by
 * fuzz/fuzz-index-build.c); a manifest it refuses is named; a block size larger than its write
 * buffer (16 MiB) still gives the manifest's own block count. */
Test(index, building_afterwards_refuses_what_a_reader_refuses, .init = tt_test_dir_setup,
     .fini = tt_test_dir_teardown)
{
    tt_memory_sink sink;
    record_walk(&sink);
    const uint8_t *img = sink.data;
    size_t len = sink.len;
    uint8_t *cp = malloc(len);
    const char *out = tt_test_path("indexed.tt");
    expect_built(img, len, out, TT_OK, "the trace as recorded");

    /* thread 0's last time one tick later, its table resealed */
    memcpy(cp, img, len);
    uint64_t th = le64(cp + 272), row0 = th + 48;
    put64(cp + row0 + 40, le64(cp + row0 + 40) + 1);
    reseal(cp, th);
    expect_built(cp, len, out, TT_E_COUNTS, "a thread row's last time");

    /* the manifest's payload bytes one more */
    memcpy(cp, img, len);
    put64(cp + 200, le64(cp + 200) + 1);
    put64(cp + 504, XXH3_64bits(cp, 504));
    expect_built(cp, len, out, TT_E_COUNTS, "the payload bytes");

    /* a reserved manifest byte set: the decoder's refusal, with the file's name */
    memcpy(cp, img, len);
    cp[396] = 1;
    put64(cp + 504, XXH3_64bits(cp, 504));
    expect_built(cp, len, out, TT_E_CORRUPT, "a reserved byte");

    /* block size 32 MiB, block count to match: a valid file the writer writes in 32 KiB units */
    cr_assert_gt(len, 512u + 2 * 32768u, "the trace is too short to tell the block counts apart");
    memcpy(cp, img, len);
    uint32_t bs = 1u << 25;
    for (int i = 0; i < 4; i++)
        cp[24 + i] = (uint8_t)(bs >> (8 * i));
    put64(cp + 216, (len - 512 + bs - 1) / bs);
    put64(cp + 504, XXH3_64bits(cp, 504));
    expect_built(cp, len, out, TT_OK, "a block size of 32 MiB");
    free(cp);
    free(sink.data);
}
