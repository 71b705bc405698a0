/* The index tables: the frame table reproduces a known call tree exactly, the summary agrees
 * with a brute recomputation from the events, the seek index lands on the right events, the
 * outcomes of crashed and still-open frames, and damaged tables are refused with file, offset
 * and reason. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
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
        /* the children, in call order */
        uint64_t i = 0;
        for (int c = x->first_child; c >= 0; c = m->n[c].next_sibling, i++) {
            uint64_t ci;
            cr_assert_lt(i, f.child_count, "node %d has more children than its frame", k);
            cr_assert_eq(tt_index_child(ix, &f, i, &ci, &err), TT_OK, "%s", err.message);
            cr_assert_eq(ci, m->n[c].post, "node %d child %llu: frame %llu, expected %llu", k,
                         (unsigned long long)i, (unsigned long long)ci,
                         (unsigned long long)m->n[c].post);
        }
        cr_assert_eq(i, f.child_count, "node %d: %llu children, its frame has %llu", k,
                     (unsigned long long)i, (unsigned long long)f.child_count);
        children += i;
        /* its enter lies in the chunk the frame names: seek there and find it */
        tt_timepoint_entry e;
        cr_assert_eq(tt_index_seek_time(ix, v->id, f.start, &e), TT_OK);
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
    cr_assert_eq(tt_verify(&src, NULL, &vr), TT_OK, "%s", vr.message);

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
