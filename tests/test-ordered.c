/* SPDX-License-Identifier: MIT */
/* Ordered replay (TT_PARAM_ORDERED): threads are held to the recorded interleaving. */
#include "common.h"
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 200

TestSuite(ordered);

/* Recording: two threads strictly alternate (ping-pong), so the recorded order is
 * A0 B0 A1 B1 ...; each event carries its own tag = 2 * round + thread. */
struct pingpong {
    tt_session *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int turn;
    int id;
    /* replay: the order in which the calls returned */
    _Atomic unsigned pos;
    uint32_t log[2 * ROUNDS];
    int failures;
};

struct side {
    struct pingpong *pp;
    int id;
    int strict;
};

static void *pingpong_thread(void *arg)
{
    struct side *sd = arg;
    struct pingpong *pp = sd->pp;
    char name[16];
    snprintf(name, sizeof name, "side-%d", sd->id);
    tt_thread_name(pp->s, name);
    for (int r = 0; r < ROUNDS; r++) {
        uint32_t tag = (uint32_t)(2 * r + sd->id);
        if (sd->strict) {
            pthread_mutex_lock(&pp->mu);
            while (pp->turn != sd->id)
                pthread_cond_wait(&pp->cv, &pp->mu);
        }
        int rc = tt_user(pp->s, tag, &tag, sizeof tag);
        if (rc != TT_OK)
            pp->failures++;
        else
            pp->log[atomic_fetch_add(&pp->pos, 1)] = tag;
        if (sd->strict) {
            pp->turn = 1 - sd->id;
            pthread_cond_broadcast(&pp->cv);
            pthread_mutex_unlock(&pp->mu);
        }
    }
    tt_session_thread_end(pp->s);
    return NULL;
}

static void run_pair(struct pingpong *pp, int strict)
{
    pthread_t th[2];
    struct side sd[2] = { { pp, 0, strict }, { pp, 1, strict } };
    pthread_mutex_init(&pp->mu, NULL);
    pthread_cond_init(&pp->cv, NULL);
    pp->turn = 0;
    atomic_store(&pp->pos, 0);
    pp->failures = 0;
    /* replay without ping-pong: start B first, so that without ordering it would run ahead */
    for (int i = 1; i >= 0; i--)
        cr_assert_eq(pthread_create(&th[i], NULL, pingpong_thread, &sd[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&pp->mu);
    pthread_cond_destroy(&pp->cv);
}

static void open_replay(tt_session **s, tt_source *src, tt_memory_sink *ms, uint64_t timeout_ms)
{
    tt_config cfg;
    tt_error_info err;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_ORDERED, 1, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_ORDER_TIMEOUT_MS, timeout_ms, &err), TT_OK);
    tt_source_memory(src, ms->data, ms->len);
    tt_config_set_source(&cfg, src);
    int rc = tt_session_open(&cfg, s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
}

Test(ordered, threads_replay_in_the_recorded_interleaving_without_their_own_synchronisation)
{
    static struct pingpong pp;
    tt_memory_sink ms;
    tt_error_info err;
    memset(&pp, 0, sizeof pp);
    cr_assert_eq(tt_test_open_record_mem(&ms, &pp.s, &err), TT_OK, "%s", err.message);
    run_pair(&pp, 1);
    cr_assert_eq(pp.failures, 0);
    cr_assert_eq(tt_session_close(pp.s, &err), TT_OK, "%s", err.message);

    tt_source src;
    open_replay(&pp.s, &src, &ms, 10000);
    run_pair(&pp, 0);
    cr_assert_eq(pp.failures, 0, "%d calls failed", pp.failures);
    cr_assert_eq(atomic_load(&pp.pos), 2 * ROUNDS);
    /* Ordering holds for when each recorded event is consumed. The log entry is written after
     * the call returns, so two neighbours may swap in the log, but no call can get further
     * ahead: a thread's next call waits for the other thread's. Without ordering, side-1
     * (started first) would run its 200 calls ahead of side-0: hundreds of places off. */
    static unsigned pos_of[2 * ROUNDS];
    for (unsigned i = 0; i < 2 * ROUNDS; i++) {
        cr_assert_lt(pp.log[i], 2 * ROUNDS);
        pos_of[pp.log[i]] = i;
    }
    for (unsigned tag = 0; tag < 2 * ROUNDS; tag++) {
        int off = (int)pos_of[tag] - (int)tag;
        cr_assert(off >= -1 && off <= 1, "call with tag %u returned at position %u: out of the "
                  "recorded interleaving", tag, pos_of[tag]);
    }
    cr_assert_eq(tt_session_close(pp.s, &err), TT_OK, "%s", err.message);
    free(ms.data);
}

/* A thread whose turn never comes (the other thread does not make its recorded call) diverges
 * with TT_DIV_ORDER once the deadline passes. */
static void *lone_b(void *arg)
{
    struct pingpong *pp = arg;
    tt_thread_name(pp->s, "side-1");
    uint32_t tag = 1;
    pp->failures = tt_user(pp->s, tag, &tag, sizeof tag);
    return NULL;
}

Test(ordered, a_thread_waiting_past_the_deadline_diverges_with_an_order_report)
{
    static struct pingpong pp;
    tt_memory_sink ms;
    tt_error_info err;
    memset(&pp, 0, sizeof pp);
    cr_assert_eq(tt_test_open_record_mem(&ms, &pp.s, &err), TT_OK, "%s", err.message);
    run_pair(&pp, 1);
    cr_assert_eq(tt_session_close(pp.s, &err), TT_OK, "%s", err.message);

    tt_source src;
    open_replay(&pp.s, &src, &ms, 100);
    /* side-0 registers but never makes its first call */
    cr_assert_eq(tt_thread_name(pp.s, "side-0"), TT_OK);
    pthread_t th;
    uint64_t t0 = tt_test_now_ns();
    cr_assert_eq(pthread_create(&th, NULL, lone_b, &pp), 0);
    pthread_join(th, NULL);
    uint64_t waited = tt_test_now_ns() - t0;
    cr_assert_eq(pp.failures, TT_E_DIVERGED, "got %s", tt_error_name(pp.failures));
    cr_assert_geq(waited, 100000000u, "gave up after %llu ns, before the deadline",
                  (unsigned long long)waited);
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(pp.s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_ORDER);
    cr_assert_eq(d.expected.ev.arg, 1, "side-1's first recorded tag");
    tt_session_close(pp.s, &err);
    free(ms.data);
}
