/* SPDX-License-Identifier: MIT */
/* The counting divergence policy (TT_DIVERGE_COUNT, `tinytrace replay --keep-going`): each
 * divergence is counted and the replay re-aligns, so one missing or one extra call costs a
 * divergence per event, not one per event that follows. */
#include "common.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

TestSuite(keepgoing);

enum { FN_A = 11, FN_X = 12, FN_Y = 13 };

static void record(tt_memory_sink *ms, int with_x)
{
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(tt_test_open_record_mem(ms, &s, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_enter(s, FN_A), TT_OK);
    if (with_x) {
        cr_assert_eq(tt_enter(s, FN_X), TT_OK);
        cr_assert_eq(tt_exit(s, FN_X), TT_OK);
    }
    cr_assert_eq(tt_exit(s, FN_A), TT_OK);
    for (uint32_t tag = 1; tag <= 3; tag++)
        cr_assert_eq(tt_user(s, tag, &tag, sizeof tag), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
}

static tt_session *open_counting(tt_source *src, tt_memory_sink *ms)
{
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_DIVERGENCE, TT_DIVERGE_COUNT, &err), TT_OK);
    tt_source_memory(src, ms->data, ms->len);
    tt_config_set_source(&cfg, src);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    return s;
}

static void replay_tail(tt_session *s)
{
    for (uint32_t tag = 1; tag <= 3; tag++)
        cr_assert_eq(tt_user(s, tag, &tag, sizeof tag), TT_OK, "user %u after re-aligning", tag);
}

Test(keepgoing, a_missing_call_costs_one_divergence_and_the_rest_matches)
{
    tt_memory_sink ms;
    record(&ms, 1);
    tt_source src;
    tt_session *s = open_counting(&src, &ms);
    cr_assert_eq(tt_enter(s, FN_A), TT_OK);
    /* the recording has enter X, exit X here: exit A is found two events further on */
    cr_assert_eq(tt_exit(s, FN_A), TT_E_DIVERGED);
    replay_tail(s);
    tt_replay_progress p;
    tt_replay_progress_get(s, &p);
    cr_assert_eq(p.divergences, 1, "%llu divergences", (unsigned long long)p.divergences);
    tt_error_info err;
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "nothing is left: %s", err.message);
    free(ms.data);
}

Test(keepgoing, an_extra_call_costs_a_divergence_per_event_and_consumes_nothing)
{
    tt_memory_sink ms;
    record(&ms, 0);
    tt_source src;
    tt_session *s = open_counting(&src, &ms);
    cr_assert_eq(tt_enter(s, FN_A), TT_OK);
    cr_assert_eq(tt_enter(s, FN_Y), TT_E_DIVERGED);
    cr_assert_eq(tt_exit(s, FN_Y), TT_E_DIVERGED);
    cr_assert_eq(tt_exit(s, FN_A), TT_OK, "the recorded exit A was not consumed by the extra calls");
    replay_tail(s);
    tt_replay_progress p;
    tt_replay_progress_get(s, &p);
    cr_assert_eq(p.divergences, 2);
    tt_error_info err;
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    free(ms.data);
}
