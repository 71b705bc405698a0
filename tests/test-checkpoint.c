/* SPDX-License-Identifier: MIT */
/* Checkpoint restores and epochs: every provider stages and all commit, and the epoch goes up;
 * one stage that fails makes the others cancel, changes nothing, and the same call then
 * succeeds; a restore in replay must be the recording's; the events after a restore carry its
 * epoch, and sorting by (epoch, time, thread, seq) is the recorded order. Also the checkpoint
 * table of the file (docs/FORMAT.md §15), and a replay that starts at a checkpoint. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(checkpoint);

/* ---- providers over a few bytes of state each ---- */

#define NPROV 3
#define STATE 24u

struct prov {
    uint32_t id;
    uint8_t live[STATE], staged[STATE];
    int fail_stage;                 /* the next stage returns this (then 0 again) */
    unsigned stages, commits, cancels;
};

static struct prov provs[NPROV];

static size_t p_size(void *ctx)
{
    (void)ctx;
    return STATE;
}

static int p_save(void *ctx, void *dst, size_t len)
{
    struct prov *p = ctx;
    cr_assert_eq(len, STATE);
    memcpy(dst, p->live, len);
    return 0;
}

static int p_stage(void *ctx, const void *src, size_t len)
{
    struct prov *p = ctx;
    p->stages++;
    cr_assert_eq(len, STATE, "provider %u staged %zu bytes", p->id, len);
    if (p->fail_stage) {
        int rc = p->fail_stage;
        p->fail_stage = 0;
        return rc;
    }
    memcpy(p->staged, src, len);
    return 0;
}

static void p_commit(void *ctx)
{
    struct prov *p = ctx;
    p->commits++;
    memcpy(p->live, p->staged, STATE);
}

static void p_cancel(void *ctx)
{
    struct prov *p = ctx;
    p->cancels++;
    memset(p->staged, 0, STATE);
}

/* Registers the three providers on @s, each with its own state from @seed. */
static void providers_on(tt_session *s, uint64_t seed)
{
    for (uint32_t i = 0; i < NPROV; i++) {
        provs[i] = (struct prov){ .id = 100 + i };
        tt_test_fill(provs[i].live, STATE, seed + i);
        tt_checkpoint_provider p = { .struct_size = sizeof p, .id = provs[i].id,
                                     .ctx = &provs[i], .size = p_size, .save = p_save,
                                     .stage = p_stage, .commit = p_commit, .cancel = p_cancel };
        cr_assert_eq(tt_checkpoint_register(s, &p), TT_OK);
    }
}

/* Every provider's live state is tt_test_fill(@seed + i). */
static void states_are(uint64_t seed, const char *what)
{
    for (uint32_t i = 0; i < NPROV; i++)
        cr_assert_eq(tt_test_check_fill(provs[i].live, STATE, seed + i), STATE,
                     "%s: provider %u does not hold the state of seed %llu", what, provs[i].id,
                     (unsigned long long)seed);
}

static void change_states(uint64_t seed)
{
    for (uint32_t i = 0; i < NPROV; i++)
        tt_test_fill(provs[i].live, STATE, seed + i);
}

static uint32_t fn_of(tt_session *s, const char *name)
{
    uint32_t id;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, name, &id), TT_OK);
    return id;
}

/* A few events of their own (an enter, a user payload, an exit). */
static void some_calls(tt_session *s, uint32_t fn, uint32_t tag)
{
    uint8_t b[8];
    tt_test_fill(b, sizeof b, tag);
    cr_assert_eq(tt_enter(s, fn), TT_OK);
    cr_assert_eq(tt_user(s, tag, b, sizeof b), TT_OK);
    cr_assert_eq(tt_exit(s, fn), TT_OK);
}

/* Thread 0's events of the trace in @img. */
static void thread_events(const void *img, size_t len, uint32_t thread, tt_test_events *ev)
{
    tt_test_reader tr;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_reader_open_mem(&tr, img, len, TT_CURSORS_PER_THREAD, &err), TT_OK,
                 "%s", err.message);
    tt_test_read_cursor(&tr, thread, ev);
    cr_assert_eq(ev->end_code, TT_E_END, "%s", ev->err.message);
    tt_test_reader_close(&tr);
}

static size_t count_kind(const tt_test_events *ev, unsigned kind)
{
    size_t n = 0;
    for (size_t i = 0; i < ev->n; i++)
        n += ev->v[i].ev.kind == kind;
    return n;
}

/* ---- restore in record mode ---- */

Test(checkpoint, restore_commits_every_provider_and_the_epoch_goes_up)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    providers_on(s, 0xa0);
    uint32_t fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint_epoch(s), 0u);
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    some_calls(s, fn, 1);
    change_states(0xb0);
    cr_assert_eq(tt_checkpoint_restore(s, NULL, 2, &err), TT_OK, "%s", err.message);
    states_are(0xa0, "after the first restore");
    for (uint32_t i = 0; i < NPROV; i++) {
        cr_assert_eq(provs[i].stages, 1u);
        cr_assert_eq(provs[i].commits, 1u, "provider %u committed %u times", provs[i].id,
                     provs[i].commits);
        cr_assert_eq(provs[i].cancels, 0u);
    }
    cr_assert_eq(tt_checkpoint_epoch(s), 1u, "one restore: epoch 1");
    some_calls(s, fn, 2);
    change_states(0xc0);
    tt_checkpoint_sel sel = { .which = TT_CHECKPOINT_NUMBER, .number = 0 };
    cr_assert_eq(tt_checkpoint_restore(s, &sel, 3, &err), TT_OK, "%s", err.message);
    states_are(0xa0, "after the second restore");
    cr_assert_eq(tt_checkpoint_epoch(s), 2u, "two restores: epoch 2");
    sel.number = 1;
    cr_assert_eq(tt_checkpoint_restore(s, &sel, 3, &err), TT_E_INVAL,
                 "checkpoint 1 was never taken");
    cr_assert_eq(tt_checkpoint_epoch(s), 2u);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    /* the file: two restore events, each with its epoch and the checkpoint's number */
    tt_test_events ev;
    thread_events(sink.data, sink.len, 0, &ev);
    cr_assert_eq(count_kind(&ev, TT_EV_RESTORE), 2u);
    uint32_t seen = 0;
    for (size_t i = 0; i < ev.n; i++) {
        const tt_event *e = &ev.v[i].ev;
        if (e->kind == TT_EV_RESTORE) {
            seen++;
            cr_assert_eq(e->arg, seen, "restore %u carries epoch %llu", seen,
                         (unsigned long long)e->arg);
            cr_assert_eq(e->addr, 0u, "the checkpoint restored");
            cr_assert_eq(e->sp.site, seen + 1);
        }
        cr_assert_eq(e->tp.epoch, seen, "event %llu (%s) after %u restores has epoch %u",
                     (unsigned long long)e->tp.seq, tt_event_kind_name(e->kind), seen,
                     e->tp.epoch);
    }
    tt_test_events_free(&ev);

    /* the checkpoint table lists them */
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tt_reader_checkpoint_count(tr.r), 1u);
    cr_assert_eq(tt_reader_restore_count(tr.r), 2u);
    tt_checkpoint_entry ce;
    cr_assert_eq(tt_reader_checkpoint(tr.r, 0, &ce), TT_OK);
    cr_assert_eq(ce.site, 1u);
    cr_assert_eq(ce.providers, (uint32_t)NPROV);
    cr_assert_eq(ce.length, NPROV * (12 + STATE));
    for (uint32_t i = 0; i < NPROV; i++) {
        uint32_t id;
        uint64_t sl;
        cr_assert_eq(tt_reader_checkpoint_provider(tr.r, 0, i, &id, &sl), TT_OK);
        cr_assert_eq(id, provs[i].id);
        cr_assert_eq(sl, STATE);
    }
    tt_restore_entry re;
    cr_assert_eq(tt_reader_restore(tr.r, 2, &re), TT_OK);
    cr_assert_eq(re.checkpoint, 0u);
    cr_assert_eq(re.site, 3u);
    cr_assert_eq(tt_reader_restore(tr.r, 3, &re), TT_E_INVAL);
    tt_test_reader_close(&tr);
    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_verify_result vr;
    cr_assert_eq(tt_verify(&src, NULL, &vr), TT_OK, "%s", vr.message);
    free(sink.data);
}

/* TT_PARAM_INDEX 0 leaves the index tables out (index_offset 0, tt_index_open says why) but not
 * the checkpoint table: a replay from a checkpoint needs it, stats does not */
Test(checkpoint, without_the_index_tables_the_checkpoint_table_is_still_written)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_INDEX, 0, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_INDEX, 2, &err), TT_E_CONFIG,
                 "TT_PARAM_INDEX takes 0 or 1");
    memset(&sink, 0, sizeof sink);
    tt_config_set_memory_sink(&cfg, &sink);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    providers_on(s, 0x51);
    uint32_t fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint(s, 7), TT_OK);
    some_calls(s, fn, 11);
    change_states(0x52);
    cr_assert_eq(tt_checkpoint_restore(s, NULL, 8, &err), TT_OK, "%s", err.message);
    some_calls(s, fn, 12);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tr.m.index_offset, 0u, "an index was written: offset %llu",
                 (unsigned long long)tr.m.index_offset);
    tt_index *ix;
    cr_assert_eq(tt_index_open(tr.r, NULL, &ix, &err), TT_E_INVAL);
    cr_assert_not_null(strstr(err.message, "recorded without"), "%s", err.message);
    cr_assert_eq(tt_reader_checkpoint_count(tr.r), 1u);
    cr_assert_eq(tt_reader_restore_count(tr.r), 1u);
    tt_checkpoint_entry ce;
    cr_assert_eq(tt_reader_checkpoint(tr.r, 0, &ce), TT_OK);
    cr_assert_eq(ce.site, 7u);
    cr_assert_eq(ce.providers, (uint32_t)NPROV);
    tt_restore_entry re;
    cr_assert_eq(tt_reader_restore(tr.r, 1, &re), TT_OK);
    cr_assert_eq(re.checkpoint, 0u);
    cr_assert_eq(re.site, 8u);
    tt_test_reader_close(&tr);

    /* the events are all there, and the file verifies */
    tt_test_events ev;
    thread_events(sink.data, sink.len, 0, &ev);
    cr_assert_eq(count_kind(&ev, TT_EV_USER), 2u);
    cr_assert_eq(count_kind(&ev, TT_EV_RESTORE), 1u);
    tt_test_events_free(&ev);
    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_verify_result vr;
    cr_assert_eq(tt_verify(&src, NULL, &vr), TT_OK, "%s", vr.message);
    free(sink.data);
}

Test(checkpoint, a_stage_that_fails_cancels_the_others_changes_nothing_and_a_retry_succeeds)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    providers_on(s, 0x10);
    uint32_t fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    const void *data0;
    size_t len0;
    tt_timepoint tp0;
    cr_assert_eq(tt_checkpoint_last(s, &data0, &len0, &tp0), TT_OK);
    uint8_t *copy0 = malloc(len0);
    memcpy(copy0, data0, len0);
    change_states(0x20);
    provs[1].fail_stage = -5;
    int rc = tt_checkpoint_restore(s, NULL, 2, &err);
    cr_assert_eq(rc, TT_E_RESTORE, "%s", tt_error_name(rc));
    cr_assert(strstr(err.message, "provider 101") != NULL, "the message names provider 101: %s",
              err.message);
    cr_assert_eq(provs[0].cancels, 1u, "the provider that staged before cancelled");
    cr_assert_eq(provs[1].cancels, 0u, "the one that refused has nothing to cancel");
    cr_assert_eq(provs[2].stages, 0u, "nothing stages after the refusal");
    for (uint32_t i = 0; i < NPROV; i++)
        cr_assert_eq(provs[i].commits, 0u, "provider %u committed a half restore", provs[i].id);
    states_are(0x20, "after the refused restore");
    cr_assert_eq(tt_checkpoint_epoch(s), 0u, "a refused restore changed the epoch");
    const void *data1;
    size_t len1;
    tt_timepoint tp1;
    cr_assert_eq(tt_checkpoint_last(s, &data1, &len1, &tp1), TT_OK);
    cr_assert_eq(len1, len0);
    cr_assert_arr_eq(data1, copy0, len0, "the retained checkpoint changed");
    cr_assert_eq(tp1.seq, tp0.seq);
    /* the sequence did not move: the next event follows the checkpoint directly */
    some_calls(s, fn, 7);
    rc = tt_checkpoint_restore(s, NULL, 2, &err);
    cr_assert_eq(rc, TT_OK, "the retry: %s", err.message);
    states_are(0x10, "after the retry");
    cr_assert_eq(tt_checkpoint_epoch(s), 1u);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_test_events ev;
    thread_events(sink.data, sink.len, 0, &ev);
    size_t cp = SIZE_MAX;
    for (size_t i = 0; i < ev.n; i++)
        if (ev.v[i].ev.kind == TT_EV_CHECKPOINT)
            cp = i;
    cr_assert_neq(cp, SIZE_MAX);
    cr_assert_eq(ev.v[cp].ev.tp.seq, tp0.seq);
    cr_assert_eq(ev.v[cp + 1].ev.kind, TT_EV_ENTER, "the refused restore left an event");
    cr_assert_eq(ev.v[cp + 4].ev.kind, TT_EV_RESTORE, "the retry's restore event");
    cr_assert_eq(count_kind(&ev, TT_EV_RESTORE), 1u);
    tt_test_events_free(&ev);

    /* replay: the same refusal leaves the cursor where it was, and the retry matches */
    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    providers_on(s, 0x10);
    fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    change_states(0x20);
    some_calls(s, fn, 7);
    provs[2].fail_stage = 9;
    rc = tt_checkpoint_restore(s, NULL, 2, &err);
    cr_assert_eq(rc, TT_E_RESTORE, "replay, a refused stage: %s", tt_error_name(rc));
    cr_assert(strstr(err.message, "provider 102") != NULL, "%s", err.message);
    cr_assert_eq(provs[0].cancels + provs[1].cancels, 2u);
    states_are(0x20, "replay, after the refused restore");
    cr_assert_eq(tt_checkpoint_epoch(s), 0u);
    rc = tt_checkpoint_restore(s, NULL, 2, &err);
    cr_assert_eq(rc, TT_OK, "replay, the retry: %s", err.message);
    states_are(0x10, "replay, after the retry");
    cr_assert_eq(tt_checkpoint_epoch(s), 1u);
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    free(copy0);
    free(sink.data);
}

/* ---- restore in replay ---- */

/* Records: checkpoint 0, calls, checkpoint 1, calls, a restore of 1 (named by its number: a
 * recording keeps the last checkpoint only), calls. */
static void record_two_and_a_restore(tt_memory_sink *sink)
{
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(sink, &s, &err), TT_OK, "%s", err.message);
    providers_on(s, 0x30);
    uint32_t fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    some_calls(s, fn, 1);
    change_states(0x40);
    cr_assert_eq(tt_checkpoint(s, 2), TT_OK);
    some_calls(s, fn, 2);
    change_states(0x50);
    tt_checkpoint_sel sel = { .which = TT_CHECKPOINT_NUMBER, .number = 0 };
    cr_assert_eq(tt_checkpoint_restore(s, &sel, 5, &err), TT_E_INVAL,
                 "record mode keeps the last checkpoint only");
    sel.number = 1;
    cr_assert_eq(tt_checkpoint_restore(s, &sel, 5, &err), TT_OK, "%s", err.message);
    states_are(0x40, "record");
    some_calls(s, fn, 3);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
}

Test(checkpoint, a_restore_in_replay_matches_the_recordings)
{
    tt_memory_sink sink;
    record_two_and_a_restore(&sink);
    tt_session *s;
    tt_source src;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    providers_on(s, 0x30);
    uint32_t fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    some_calls(s, fn, 1);
    change_states(0x40);
    cr_assert_eq(tt_checkpoint(s, 2), TT_OK);
    some_calls(s, fn, 2);
    change_states(0x50);
    /* checkpoint 0 (read back from the recording) is not what the recording restored here */
    unsigned stages = provs[0].stages;
    tt_checkpoint_sel sel = { .which = TT_CHECKPOINT_NUMBER, .number = 0 };
    int rc = tt_checkpoint_restore(s, &sel, 5, &err);
    cr_assert_eq(rc, TT_E_DIVERGED, "restoring checkpoint 0: %s", tt_error_name(rc));
    cr_assert(strstr(err.message, "checkpoint 1") != NULL, "%s", err.message);
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_RESTORE, "reason %d: %s", (int)d.reason, d.message);
    cr_assert_eq(d.expected.ev.kind, TT_EV_RESTORE);
    cr_assert_eq(d.expected.ev.addr, 1u, "the recording restored checkpoint 1");
    cr_assert_eq(provs[0].stages, stages, "a diverging restore staged");
    states_are(0x50, "after the diverging restore");
    /* at another site */
    rc = tt_checkpoint_restore(s, NULL, 6, &err);
    cr_assert_eq(rc, TT_E_DIVERGED, "at site 6: %s", tt_error_name(rc));
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_SITE);
    cr_assert_eq(tt_checkpoint_epoch(s), 0u);
    /* the recording's restore */
    rc = tt_checkpoint_restore(s, NULL, 5, &err);
    cr_assert_eq(rc, TT_OK, "the recorded restore: %s", err.message);
    states_are(0x40, "replay, after the restore");
    cr_assert_eq(tt_checkpoint_epoch(s), 1u);
    some_calls(s, fn, 3);
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);

    /* a restore where the recording has a call: another kind, nothing staged */
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    providers_on(s, 0x30);
    fn = fn_of(s, "work");
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    rc = tt_checkpoint_restore(s, NULL, 5, &err);
    cr_assert_eq(rc, TT_E_DIVERGED);
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_KIND);
    cr_assert_eq(provs[0].stages, 0u);
    cr_assert_eq(tt_session_finish(s, &err), TT_E_UNCONSUMED);
    tt_session_close(s, NULL);
    free(sink.data);
}

/* ---- epochs and the total order ---- */

struct worker {
    tt_session *s;
    uint32_t fn;
    int restore;          /* restore the last checkpoint in the middle */
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    cr_assert_eq(tt_thread_name(w->s, "worker"), TT_OK);
    for (uint32_t i = 0; i < 20; i++) {
        some_calls(w->s, w->fn, 1000 + i);
        if (w->restore && i == 9) {
            tt_error_info err;
            cr_assert_eq(tt_checkpoint_restore(w->s, NULL, 9, &err), TT_OK, "%s", err.message);
        }
    }
    return NULL;
}

struct ordered {
    tt_event ev;
};

static int cmp_epoch_order(const void *a, const void *b)
{
    const tt_event *x = &((const struct ordered *)a)->ev, *y = &((const struct ordered *)b)->ev;
    if (x->tp.epoch != y->tp.epoch)
        return x->tp.epoch < y->tp.epoch ? -1 : 1;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    if (x->tp.thread != y->tp.thread)
        return x->tp.thread < y->tp.thread ? -1 : 1;
    return x->tp.seq < y->tp.seq ? -1 : x->tp.seq > y->tp.seq;
}

Test(checkpoint, events_after_a_restore_carry_its_epoch_and_the_total_order_holds)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    providers_on(s, 0x50);
    uint32_t fn = fn_of(s, "work");
    cr_assert_eq(tt_thread_name(s, "main"), TT_OK);
    some_calls(s, fn, 1);
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    some_calls(s, fn, 2);
    cr_assert_eq(tt_checkpoint_restore(s, NULL, 2, &err), TT_OK, "%s", err.message);
    /* a thread started after the restore: everything it records is in epoch 1 */
    struct worker w1 = { s, fn, 0 };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, worker_main, &w1), 0);
    pthread_join(th, NULL);
    some_calls(s, fn, 3);
    /* a second thread restores while main records too: epoch 2 begins on that thread */
    struct worker w2 = { s, fn, 1 };
    cr_assert_eq(pthread_create(&th, NULL, worker_main, &w2), 0);
    for (uint32_t i = 0; i < 50; i++)
        some_calls(s, fn, 4 + i);
    pthread_join(th, NULL);
    some_calls(s, fn, 99);
    cr_assert_eq(tt_checkpoint_epoch(s), 2u);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, sink.data, sink.len, TT_CURSORS_PER_THREAD, &err),
                 TT_OK, "%s", err.message);
    cr_assert_eq(tt_reader_restore_count(tr.r), 2u);
    tt_restore_entry r1, r2;
    cr_assert_eq(tt_reader_restore(tr.r, 1, &r1), TT_OK);
    cr_assert_eq(tt_reader_restore(tr.r, 2, &r2), TT_OK);
    cr_assert_eq(r1.tp.thread, 0u);
    cr_assert_neq(r2.tp.thread, 0u, "the second restore was the second worker's");
    size_t n = 0, cap = 0;
    struct ordered *all = NULL;
    for (uint32_t t = 0; t < tr.m.thread_count; t++) {
        tt_test_events ev;
        tt_test_read_cursor(&tr, t, &ev);
        cr_assert_eq(ev.end_code, TT_E_END, "%s", ev.err.message);
        uint32_t prev = 0, restores = 0;
        for (size_t i = 0; i < ev.n; i++) {
            const tt_event *e = &ev.v[i].ev;
            /* within a thread, program order: the epoch never goes back */
            cr_assert_geq(e->tp.epoch, prev, "thread %u seq %llu: epoch %u after %u", t,
                          (unsigned long long)e->tp.seq, e->tp.epoch, prev);
            prev = e->tp.epoch;
            if (e->kind == TT_EV_RESTORE) {
                restores++;
                cr_assert_eq(e->tp.epoch, (uint32_t)e->arg, "a restore begins its epoch");
            }
            /* what came after a restore in real time carries its epoch */
            if (t == 0 && i + 1 == ev.n)
                cr_assert_eq(e->tp.epoch, 2u, "main's last event came after both restores");
            if (t == r1.tp.thread && e->tp.seq > r1.tp.seq)
                cr_assert_geq(e->tp.epoch, 1u, "main after the first restore");
            if (t == r1.tp.thread && e->tp.seq < r1.tp.seq)
                cr_assert_eq(e->tp.epoch, 0u, "main before the first restore");
            if (t == r2.tp.thread && e->tp.seq >= r2.tp.seq)
                cr_assert_eq(e->tp.epoch, 2u);
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                all = realloc(all, cap * sizeof *all);
            }
            all[n++].ev = *e;
        }
        if (t != 1) /* the first worker started after the first restore */
            ;
        else
            for (size_t i = 0; i < ev.n; i++)
                cr_assert_eq(ev.v[i].ev.tp.epoch, 1u, "the first worker ran in epoch 1");
        (void)restores;
        tt_test_events_free(&ev);
    }
    /* sorted by (epoch, time, thread, seq): each thread's events stay in program order, and
     * the order is the recorded one (time, thread, seq) */
    qsort(all, n, sizeof *all, cmp_epoch_order);
    uint64_t *last_seq = calloc(tr.m.thread_count, sizeof *last_seq);
    for (size_t i = 0; i < n; i++) {
        const tt_event *e = &all[i].ev;
        if (i) {
            const tt_event *p = &all[i - 1].ev;
            cr_assert(p->time < e->time || (p->time == e->time && (p->tp.thread < e->tp.thread ||
                      (p->tp.thread == e->tp.thread && p->tp.seq < e->tp.seq))),
                      "position %zu: (epoch, time, thread, seq) is not the recorded order", i);
        }
        cr_assert(last_seq[e->tp.thread] == 0 || e->tp.seq > last_seq[e->tp.thread] - 1,
                  "thread %u out of program order", e->tp.thread);
        last_seq[e->tp.thread] = e->tp.seq + 1;
        cr_assert_eq(e->tp.epoch, tt_reader_epoch_at(tr.r, e->time, e->tp.thread, e->tp.seq));
    }
    free(last_seq);
    free(all);
    tt_test_reader_close(&tr);
    free(sink.data);
}

/* ---- replay from a checkpoint ---- */

#define STEPS 2000u
#define EVERY 100u

/* A program whose state is all in one provider: a step counter and a running sum. */
struct ledger {
    uint64_t step, sum;
    uint64_t staged[2];
};
static struct ledger led;

static size_t l_size(void *ctx)
{
    (void)ctx;
    return 16;
}

static int l_save(void *ctx, void *dst, size_t len)
{
    (void)ctx;
    (void)len;
    memcpy(dst, &led.step, 8);
    memcpy((uint8_t *)dst + 8, &led.sum, 8);
    return 0;
}

static int l_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx;
    if (len != 16)
        return -1;
    memcpy(led.staged, src, 16);
    return 0;
}

static void l_commit(void *ctx)
{
    (void)ctx;
    led.step = led.staged[0];
    led.sum = led.staged[1];
}

static void l_cancel(void *ctx)
{
    (void)ctx;
}

static void ledger_on(tt_session *s)
{
    tt_checkpoint_provider p = { .struct_size = sizeof p, .id = 1, .size = l_size,
                                 .save = l_save, .stage = l_stage, .commit = l_commit,
                                 .cancel = l_cancel };
    cr_assert_eq(tt_checkpoint_register(s, &p), TT_OK);
}

/* The steps from the ledger's state to STEPS; @change: the step whose amount differs. Returns
 * the first result that is not TT_OK, with the step it came at. */
static int ledger_run(tt_session *s, uint64_t change, uint64_t *at)
{
    uint32_t fn = fn_of(s, "apply");
    while (led.step < STEPS) {
        uint64_t amount = tt_test_mix(led.step, 7, 1) % 1000 + (led.step == change);
        uint8_t rec[16];
        memcpy(rec, &led.step, 8);
        memcpy(rec + 8, &amount, 8);
        int rc = tt_enter(s, fn);
        if (rc == TT_OK)
            rc = tt_user(s, 1, rec, sizeof rec);
        if (rc == TT_OK)
            rc = tt_exit(s, fn);
        led.sum += amount;
        led.step++;
        if (rc == TT_OK && led.step % EVERY == 0)
            rc = tt_checkpoint(s, 1);
        if (rc != TT_OK) {
            *at = led.step - 1;
            return rc;
        }
    }
    return TT_OK;
}

static void ledger_record(tt_memory_sink *sink)
{
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(sink, &s, &err), TT_OK, "%s", err.message);
    ledger_on(s);
    led = (struct ledger){0};
    uint64_t at;
    cr_assert_eq(ledger_run(s, UINT64_MAX, &at), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
}

static int open_replay_from(tt_source *src, const tt_memory_sink *sink, const char *from,
                            tt_session **s, tt_error_info *err)
{
    tt_config cfg;
    tt_config_init(&cfg);
    int rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, err);
    if (rc == TT_OK && from)
        rc = tt_config_set_str(&cfg, TT_PARAM_REPLAY_FROM, from, err);
    if (rc != TT_OK)
        return rc;
    tt_source_memory(src, sink->data, sink->len);
    tt_config_set_source(&cfg, src);
    return tt_session_open(&cfg, s, err);
}

Test(checkpoint, a_replay_from_a_checkpoint_restores_its_state_and_compares_the_rest)
{
    tt_memory_sink sink;
    ledger_record(&sink);
    tt_session *s;
    tt_source src;
    tt_error_info err = {0};
    cr_assert_eq(open_replay_from(&src, &sink, "checkpoint:14", &s, &err), TT_OK, "%s",
                 err.message);
    ledger_on(s);
    led = (struct ledger){0};
    uint64_t from = 0, at = 0;
    cr_assert_eq(tt_replay_resume(s, &from, &err), TT_OK, "%s", err.message);
    cr_assert_eq(from, 14u);
    cr_assert_eq(led.step, 15 * EVERY, "checkpoint 14 was taken after step %u", 15 * EVERY);
    const void *data;
    size_t len;
    tt_timepoint tp;
    cr_assert_eq(tt_checkpoint_last(s, &data, &len, &tp), TT_OK, "the start is retained");
    cr_assert_eq(tt_replay_resume(s, &from, &err), TT_OK, "once: again, nothing");
    int rc = ledger_run(s, UINT64_MAX, &at);
    cr_assert_eq(rc, TT_OK, "%s at step %llu", tt_error_name(rc), (unsigned long long)at);
    tt_replay_progress pr;
    cr_assert_eq(tt_replay_progress_get(s, &pr), TT_OK);
    cr_assert_lt(pr.matched, 3u * (STEPS - 15 * EVERY) + STEPS / EVERY,
                 "only the rest was compared: %llu", (unsigned long long)pr.matched);
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);

    /* a change after the start is found there */
    cr_assert_eq(open_replay_from(&src, &sink, "checkpoint:14", &s, &err), TT_OK, "%s",
                 err.message);
    ledger_on(s);
    led = (struct ledger){0};
    cr_assert_eq(tt_replay_resume(s, &from, &err), TT_OK, "%s", err.message);
    rc = ledger_run(s, 1777, &at);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    cr_assert_eq(at, 1777u, "diverged at step %llu", (unsigned long long)at);
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_PAYLOAD, "%s", d.message);
    uint64_t step;
    memcpy(&step, d.expected.preview, 8);
    cr_assert_eq(step, 1777u, "the recorded event is step %llu's", (unsigned long long)step);
    tt_session_close(s, NULL);

    /* the same through the API, and a number the recording does not have */
    cr_assert_eq(open_replay_from(&src, &sink, NULL, &s, &err), TT_OK, "%s", err.message);
    ledger_on(s);
    led = (struct ledger){0};
    cr_assert_eq(tt_replay_from_checkpoint(s, STEPS / EVERY, &err), TT_E_INVAL);
    cr_assert(strstr(err.message, "no checkpoint") != NULL, "%s", err.message);
    cr_assert_eq(tt_replay_from_checkpoint(s, STEPS / EVERY - 1, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(led.step, STEPS);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "the last checkpoint ends the run: %s",
                 err.message);
    free(sink.data);
}

Test(checkpoint, a_replay_from_a_checkpoint_that_a_provider_refuses_changes_nothing)
{
    tt_memory_sink sink;
    ledger_record(&sink);
    tt_session *s;
    tt_source src;
    tt_error_info err = {0};
    cr_assert_eq(open_replay_from(&src, &sink, NULL, &s, &err), TT_OK, "%s", err.message);
    /* a provider that stages nothing of 16 bytes */
    tt_checkpoint_provider p = { .struct_size = sizeof p, .id = 1, .size = l_size,
                                 .save = l_save, .stage = l_stage, .commit = l_commit,
                                 .cancel = l_cancel };
    cr_assert_eq(tt_checkpoint_register(s, &p), TT_OK);
    tt_checkpoint_provider q = p;
    q.id = 2; /* no state of its own in the recording */
    cr_assert_eq(tt_checkpoint_register(s, &q), TT_OK);
    led = (struct ledger){0};
    int rc = tt_replay_from_checkpoint(s, 3, &err);
    cr_assert_eq(rc, TT_E_RESTORE, "%s", tt_error_name(rc));
    cr_assert(strstr(err.message, "provider 2") != NULL, "%s", err.message);
    cr_assert_eq(led.step, 0u, "a half restore");
    cr_assert_eq(tt_checkpoint_epoch(s), 0u);
    const void *data;
    size_t len;
    cr_assert_eq(tt_checkpoint_last(s, &data, &len, NULL), TT_E_INVAL, "nothing retained");
    tt_session_close(s, NULL);
    free(sink.data);
}

/* Two threads take turns on one object (sync.h) around their steps; the replay from a
 * checkpoint in the middle must start the object's turn where the recording was, or the
 * first operation after the checkpoint waits for turns that never come. */
struct syncer {
    tt_session *s;
    char phase;
    int id;
    pthread_mutex_t *m;
    int rc;
};

static void *syncer_main(void *arg)
{
    struct syncer *y = arg;
    char name[16];
    snprintf(name, sizeof name, "%c%d", y->phase, y->id);
    tt_thread_name(y->s, name);
    uint32_t site;
    tt_intern(y->s, TT_OBJ_SITE, "lock", &site);
    for (int i = 0; i < 200 && y->rc == TT_OK; i++) {
        tt_sync op;
        y->rc = tt_sync_begin(y->s, &op, TT_SYNC_LOCK, site, y->m);
        if (y->rc != TT_OK)
            break;
        if (!tt_sync_replaying(&op) || op.ordered)
            pthread_mutex_lock(y->m);
        y->rc = tt_sync_end(y->s, &op, 0, 1);
        int rc = tt_sync_begin(y->s, &op, TT_SYNC_UNLOCK, site, y->m);
        pthread_mutex_unlock(y->m);
        if (y->rc == TT_OK)
            y->rc = rc;
        if (y->rc == TT_OK)
            y->rc = tt_sync_end(y->s, &op, 0, 1);
    }
    return NULL;
}

static void run_syncers(tt_session *s, char phase, pthread_mutex_t *m, int *rc)
{
    struct syncer y[2] = { { s, phase, 1, m, TT_OK }, { s, phase, 2, m, TT_OK } };
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, syncer_main, &y[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    *rc = y[0].rc != TT_OK ? y[0].rc : y[1].rc;
}

Test(checkpoint, a_replay_from_a_checkpoint_starts_each_objects_turn_where_the_recording_was)
{
    pthread_mutex_t object = PTHREAD_MUTEX_INITIALIZER;
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    ledger_on(s);
    led = (struct ledger){0};
    cr_assert_eq(tt_thread_name(s, "main"), TT_OK);
    int rc;
    run_syncers(s, 'a', &object, &rc); /* 800 turns before the checkpoint */
    cr_assert_eq(rc, TT_OK);
    led.step = 42;
    cr_assert_eq(tt_checkpoint(s, 1), TT_OK);
    run_syncers(s, 'b', &object, &rc); /* and 800 after */
    cr_assert_eq(rc, TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_ORDER_TIMEOUT_MS, 2000, &err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_REPLAY_FROM, "checkpoint:0", &err), TT_OK);
    tt_source src;
    tt_source_memory(&src, sink.data, sink.len);
    tt_config_set_source(&cfg, &src);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    ledger_on(s);
    led = (struct ledger){0};
    cr_assert_eq(tt_thread_name(s, "main"), TT_OK);
    cr_assert_eq(tt_replay_resume(s, NULL, &err), TT_OK, "%s", err.message);
    cr_assert_eq(led.step, 42u);
    /* another address: the object is named by its recorded id */
    pthread_mutex_t object2 = PTHREAD_MUTEX_INITIALIZER;
    run_syncers(s, 'b', &object2, &rc);
    if (rc == TT_E_DIVERGED) {
        tt_divergence d;
        tt_replay_divergence(s, &d);
        cr_assert_fail("the replay from the checkpoint diverged: %s", d.message);
    }
    cr_assert_eq(rc, TT_OK, "%s", tt_error_name(rc));
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    free(sink.data);
}
