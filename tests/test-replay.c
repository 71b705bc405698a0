/* SPDX-License-Identifier: MIT */
/* Replay: a recorded run replays clean; each kind of changed call diverges with a report that
 * holds the expected and the actual event, changes nothing, and the same call with the recorded
 * values then succeeds; io IN hands back the recorded bytes; an early close says how much was
 * left; checkpoints compare the providers' state. */
#include "common.h"

#include "harness.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

TestSuite(replay);

/* ---- the recorded script ---- */

#define FN_NAME "replay_main"
#define SP_SITE 7u
#define ALLOC_SITE 3u
#define ALLOC_SIZE 100u
#define FREE_SITE 4u
#define IN_CH 5u
#define OUT_CH 6u
#define USER_TAG 9u
#define USER_LEN 20u
static const char in_bytes[] = "hello input";   /* 11 bytes recorded as received */
static const char out_bytes[] = "world output!"; /* 13 bytes recorded as produced */

enum { C_ENTER, C_SAFEPOINT, C_ALLOC, C_IO_IN, C_IO_OUT, C_USER, C_FREE, C_EXIT, C_COUNT };

static const void *alloc_addr(void) { return (const void *)(uintptr_t)0x7f0000001000ull; }

static void user_payload(uint8_t *p) { tt_test_fill(p, USER_LEN, 0x5eed); }

static tt_memory_sink recording;
static tt_session *s;
static uint32_t fn;

/* Makes call @c with the recorded values (record mode: records it; replay: must match). */
static int call(int c)
{
    uint8_t buf[64];
    size_t got = 0;
    switch (c) {
    case C_ENTER:
        return tt_enter(s, fn);
    case C_SAFEPOINT:
        return tt_safepoint(s, fn, SP_SITE);
    case C_ALLOC:
        return tt_alloc(s, ALLOC_SITE, ALLOC_SIZE, alloc_addr());
    case C_IO_IN:
        if (tt_session_mode(s) == TT_MODE_RECORD) {
            memcpy(buf, in_bytes, sizeof in_bytes - 1);
            return tt_io(s, TT_IO_IN, IN_CH, buf, sizeof in_bytes - 1, &got);
        }
        return tt_io(s, TT_IO_IN, IN_CH, buf, sizeof buf, &got);
    case C_IO_OUT:
        memcpy(buf, out_bytes, sizeof out_bytes - 1);
        return tt_io(s, TT_IO_OUT, OUT_CH, buf, sizeof out_bytes - 1, NULL);
    case C_USER:
        user_payload(buf);
        return tt_user(s, USER_TAG, buf, USER_LEN);
    case C_FREE:
        return tt_free(s, FREE_SITE, alloc_addr());
    case C_EXIT:
        return tt_exit(s, fn);
    }
    return TT_E_INVAL;
}

static const unsigned kind_of[C_COUNT] = {
    TT_EV_ENTER, TT_EV_SAFEPOINT, TT_EV_ALLOC, TT_EV_IO, TT_EV_IO, TT_EV_USER, TT_EV_FREE,
    TT_EV_EXIT,
};

static void record_script(void)
{
    tt_error_info err = {0};
    int rc = tt_test_open_record_mem(&recording, &s, &err);
    cr_assert_eq(rc, TT_OK, "record open: %s: %s", tt_error_name(rc), err.message);
    rc = tt_intern(s, TT_OBJ_FUNCTION, FN_NAME, &fn);
    cr_assert_eq(rc, TT_OK);
    cr_assert_geq(fn, 1u);
    for (int c = 0; c < C_COUNT; c++) {
        rc = call(c);
        cr_assert_eq(rc, TT_OK, "recording call %d: %s", c, tt_error_name(rc));
    }
    rc = tt_session_close(s, &err);
    s = NULL;
    cr_assert_eq(rc, TT_OK, "record close: %s: %s", tt_error_name(rc), err.message);
    cr_assert_not_null(recording.data);
    cr_assert_gt(recording.len, TT_MANIFEST_SIZE);
}

static tt_source replay_src;

static void open_replay(void)
{
    tt_error_info err = {0};
    int rc = tt_test_open_replay_mem(&replay_src, recording.data, recording.len, &s, &err);
    cr_assert_eq(rc, TT_OK, "replay open: %s: %s", tt_error_name(rc), err.message);
    cr_assert_eq(tt_session_mode(s), TT_MODE_REPLAY);
    uint32_t id = 0;
    rc = tt_intern(s, TT_OBJ_FUNCTION, FN_NAME, &id);
    cr_assert_eq(rc, TT_OK, "tt_intern in replay: %s", tt_error_name(rc));
    cr_assert_eq(id, fn, "replay interned %s as %u, the recording as %u", FN_NAME, id, fn);
}

static void replay_calls(int from, int to)
{
    for (int c = from; c < to; c++) {
        int rc = call(c);
        if (rc == TT_E_DIVERGED) {
            tt_divergence d;
            tt_replay_divergence(s, &d);
            cr_assert_fail("replaying call %d diverged: reason %d: %s", c, (int)d.reason,
                           d.message);
        }
        cr_assert_eq(rc, TT_OK, "replaying call %d: %s", c, tt_error_name(rc));
    }
}

static void close_clean(void)
{
    tt_error_info err = {0};
    int rc = tt_session_close(s, &err);
    s = NULL;
    cr_assert_eq(rc, TT_OK, "replay close: %s: %s", tt_error_name(rc), err.message);
}

/* Runs after the suite's .init (which made the test's directory). */
static void setup(void)
{
    memset(&recording, 0, sizeof recording);
    s = NULL;
    record_script();
}

static void teardown(void)
{
    free(recording.data);
    recording.data = NULL;
}

static tt_divergence get_divergence(void)
{
    tt_divergence d;
    memset(&d, 0xA5, sizeof d);
    int rc = tt_replay_divergence(s, &d);
    cr_assert_eq(rc, TT_OK, "tt_replay_divergence: %s", tt_error_name(rc));
    return d;
}

/* Checks the parts common to every report of a diverging call at script position @c. */
static void check_report(const tt_divergence *d, int c, tt_diverge_reason reason,
                         unsigned actual_kind)
{
    cr_assert_eq(d->reason, reason, "reason %d, expected %d (%s)", (int)d->reason, (int)reason,
                 d->message);
    cr_assert(d->has_expected, "the report has no expected event");
    cr_assert_eq(d->expected.ev.kind, kind_of[c], "expected.kind %u, recorded %u",
                 d->expected.ev.kind, kind_of[c]);
    cr_assert_eq(d->actual.ev.kind, actual_kind, "actual.kind %u, called %u", d->actual.ev.kind,
                 actual_kind);
    cr_assert_eq(d->tp.thread, 0u);
    cr_assert_eq(d->tp.thread, d->expected.ev.tp.thread);
    cr_assert_eq(d->tp.seq, d->expected.ev.tp.seq, "report tp.seq %llu, expected event's %llu",
                 (unsigned long long)d->tp.seq, (unsigned long long)d->expected.ev.tp.seq);
    cr_assert_null(d->expected.ev.payload);
    cr_assert_null(d->actual.ev.payload);
    cr_assert_neq(d->message[0], '\0', "empty report message");
    cr_assert_neq(memchr(d->message, '\0', sizeof d->message), NULL, "message not terminated");
    if (c > 0) {
        cr_assert_geq(d->history_len, 1u, "no matched events in the history");
        cr_assert_leq(d->history_len, TT_REPORT_HISTORY);
        const tt_report_event *last = &d->history[d->history_len - 1];
        cr_assert_eq(last->ev.kind, kind_of[c - 1], "last matched event kind %u, expected %u",
                     last->ev.kind, kind_of[c - 1]);
        cr_assert_eq(last->ev.tp.seq + 1, d->expected.ev.tp.seq,
                     "last matched seq %llu is not just before the expected seq %llu",
                     (unsigned long long)last->ev.tp.seq,
                     (unsigned long long)d->expected.ev.tp.seq);
    }
    /* The text form names the expected and the actual kind. */
    char text[2048];
    size_t n = tt_divergence_format(s, d, text, sizeof text);
    cr_assert_gt(n, 0u);
    cr_assert_lt(n, sizeof text);
    cr_assert_not_null(strstr(text, tt_event_kind_name(kind_of[c])), "format lacks '%s': %s",
                       tt_event_kind_name(kind_of[c]), text);
}

/* A divergence changes nothing: the progress stays where it was except for the count of
 * divergences. Returns the progress before. */
static tt_replay_progress progress(void)
{
    tt_replay_progress p;
    int rc = tt_replay_progress_get(s, &p);
    cr_assert_eq(rc, TT_OK);
    return p;
}

static void check_nothing_moved(const tt_replay_progress *before, int c)
{
    tt_replay_progress after = progress();
    cr_assert_eq(after.matched, before->matched, "matched moved from %llu to %llu",
                 (unsigned long long)before->matched, (unsigned long long)after.matched);
    cr_assert_eq(after.divergences, before->divergences + 1, "divergences %llu, expected %llu",
                 (unsigned long long)after.divergences,
                 (unsigned long long)before->divergences + 1);
    cr_assert(after.has_next, "no next event after a divergence");
    cr_assert_eq(after.next.kind, kind_of[c], "next event kind %u, expected %u", after.next.kind,
                 kind_of[c]);
    cr_assert_eq(after.next.tp.seq, before->next.tp.seq, "the cursor moved");
}

/* Retries call @c with the recorded values, replays the rest and closes cleanly. */
static void retry_and_finish(int c)
{
    int rc = call(c);
    cr_assert_eq(rc, TT_OK, "the retried call %d with recorded values: %s", c, tt_error_name(rc));
    replay_calls(c + 1, C_COUNT);
    close_clean();
}

/* A function name with control bytes (a terminal escape, a newline) reaches the text report
 * escaped, never raw. */
Test(replay, names_in_the_text_report_are_escaped)
{
    static const char evil[] = "evil\x1b[2J\nname\\";
    tt_memory_sink sink;
    tt_error_info err = {0};
    uint32_t a = 0, b = 0;
    memset(&sink, 0, sizeof sink);
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, evil, &a), TT_OK);
    cr_assert_eq(tt_enter(s, a), TT_OK);
    cr_assert_eq(tt_exit(s, a), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "other", &b), TT_OK);
    cr_assert_eq(tt_enter(s, b), TT_E_DIVERGED);
    tt_divergence d = get_divergence();
    char text[2048];
    tt_divergence_format(s, &d, text, sizeof text);
    cr_assert_null(strchr(text, '\x1b'), "a raw escape in: %s", text);
    cr_assert_not_null(strstr(text, "function=evil\\x1b[2J\\x0aname\\\\(#"),
                       "the name is not escaped as expected: %s", text);
    tt_session_close(s, NULL);
    s = NULL;
    free(sink.data);
}

Test(replay, a_recorded_run_replays_clean, .init = setup, .fini = teardown)
{
    open_replay();
    tt_replay_progress p0 = progress();
    cr_assert(p0.has_next);
    cr_assert_eq(p0.next.kind, TT_EV_ENTER, "first expected event kind %u", p0.next.kind);
    replay_calls(0, C_COUNT);
    tt_replay_progress p = progress();
    cr_assert_eq(p.divergences, 0u);
    cr_assert_geq(p.matched, (uint64_t)C_COUNT, "matched %llu", (unsigned long long)p.matched);
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_E_INVAL, "a report without a divergence");
    close_clean();
}

Test(replay, a_call_of_another_kind_diverges_and_the_recorded_call_then_succeeds, .init = setup,
     .fini = teardown)
{
    open_replay();
    replay_calls(0, C_SAFEPOINT);
    tt_replay_progress before = progress();
    uint8_t p[4] = {1, 2, 3, 4};
    int rc = tt_user(s, USER_TAG, p, sizeof p);
    cr_assert_eq(rc, TT_E_DIVERGED, "a user event where a safepoint was recorded: %s",
                 tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_SAFEPOINT, TT_DIV_KIND, TT_EV_USER);
    cr_assert_eq(d.expected.ev.sp.function, fn);
    cr_assert_eq(d.expected.ev.sp.site, SP_SITE);
    cr_assert_eq(d.actual.ev.arg, USER_TAG);
    check_nothing_moved(&before, C_SAFEPOINT);
    retry_and_finish(C_SAFEPOINT);
}

Test(replay, a_safepoint_at_another_site_diverges_and_the_recorded_site_then_succeeds,
     .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_SAFEPOINT);
    tt_replay_progress before = progress();
    int rc = tt_safepoint(s, fn, SP_SITE + 1);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_SAFEPOINT, TT_DIV_SITE, TT_EV_SAFEPOINT);
    cr_assert_eq(d.expected.ev.sp.site, SP_SITE, "expected site %u", d.expected.ev.sp.site);
    cr_assert_eq(d.actual.ev.sp.site, SP_SITE + 1, "actual site %u", d.actual.ev.sp.site);
    cr_assert_eq(d.expected.ev.sp.function, fn);
    cr_assert_eq(d.actual.ev.sp.function, fn);
    check_nothing_moved(&before, C_SAFEPOINT);
    retry_and_finish(C_SAFEPOINT);
}

Test(replay, a_safepoint_in_another_function_diverges, .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_SAFEPOINT);
    int rc = tt_safepoint(s, fn + 1, SP_SITE);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_SAFEPOINT, TT_DIV_FUNCTION, TT_EV_SAFEPOINT);
    cr_assert_eq(d.expected.ev.sp.function, fn);
    cr_assert_eq(d.actual.ev.sp.function, fn + 1);
    retry_and_finish(C_SAFEPOINT);
}

Test(replay, user_bytes_that_differ_diverge_at_the_first_differing_byte, .init = setup,
     .fini = teardown)
{
    open_replay();
    replay_calls(0, C_USER);
    tt_replay_progress before = progress();
    uint8_t p[USER_LEN], rec[USER_LEN];
    user_payload(rec);
    user_payload(p);
    p[13] ^= 0x40;
    p[17] ^= 0x01;
    int rc = tt_user(s, USER_TAG, p, USER_LEN);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_USER, TT_DIV_PAYLOAD, TT_EV_USER);
    cr_assert_eq(d.first_diff, 13u, "first_diff %llu, expected 13",
                 (unsigned long long)d.first_diff);
    cr_assert_eq(d.expected.ev.payload_len, USER_LEN);
    cr_assert_eq(d.actual.ev.payload_len, USER_LEN);
    cr_assert_eq(d.expected.preview_len, USER_LEN, "expected preview_len %u",
                 d.expected.preview_len);
    cr_assert_eq(d.actual.preview_len, USER_LEN, "actual preview_len %u", d.actual.preview_len);
    cr_assert_arr_eq(d.expected.preview, rec, USER_LEN, "expected preview is not the recording");
    cr_assert_arr_eq(d.actual.preview, p, USER_LEN, "actual preview is not the live bytes");
    cr_assert_eq(d.expected.ev.arg, USER_TAG);
    check_nothing_moved(&before, C_USER);
    retry_and_finish(C_USER);
}

Test(replay, a_user_tag_that_differs_diverges, .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_USER);
    uint8_t p[USER_LEN];
    user_payload(p);
    int rc = tt_user(s, USER_TAG + 100, p, USER_LEN);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_USER, TT_DIV_ARG, TT_EV_USER);
    cr_assert_eq(d.expected.ev.arg, USER_TAG);
    cr_assert_eq(d.actual.ev.arg, USER_TAG + 100);
    retry_and_finish(C_USER);
}

Test(replay, an_allocation_of_another_size_diverges_and_the_recorded_size_then_succeeds,
     .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_ALLOC);
    tt_replay_progress before = progress();
    int rc = tt_alloc(s, ALLOC_SITE, ALLOC_SIZE + 1, alloc_addr());
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_ALLOC, TT_DIV_SIZE, TT_EV_ALLOC);
    cr_assert_eq(d.expected.ev.arg, ALLOC_SIZE, "expected size %llu",
                 (unsigned long long)d.expected.ev.arg);
    cr_assert_eq(d.actual.ev.arg, ALLOC_SIZE + 1, "actual size %llu",
                 (unsigned long long)d.actual.ev.arg);
    check_nothing_moved(&before, C_ALLOC);
    retry_and_finish(C_ALLOC);
}

Test(replay, an_allocation_at_another_address_matches, .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_ALLOC);
    int rc = tt_alloc(s, ALLOC_SITE, ALLOC_SIZE, (const void *)(uintptr_t)0x55550000beef0ull);
    cr_assert_eq(rc, TT_OK, "the address must not be compared: %s", tt_error_name(rc));
    replay_calls(C_ALLOC + 1, C_COUNT);
    close_clean();
}

Test(replay, io_out_of_another_length_diverges_and_the_recorded_bytes_then_succeed,
     .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_IO_OUT);
    tt_replay_progress before = progress();
    char buf[64];
    memcpy(buf, out_bytes, sizeof out_bytes);
    int rc = tt_io(s, TT_IO_OUT, OUT_CH, buf, sizeof out_bytes - 2, NULL);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_IO_OUT, TT_DIV_LENGTH, TT_EV_IO);
    cr_assert_eq(d.expected.ev.payload_len, sizeof out_bytes - 1, "expected length %llu",
                 (unsigned long long)d.expected.ev.payload_len);
    cr_assert_eq(d.actual.ev.payload_len, sizeof out_bytes - 2, "actual length %llu",
                 (unsigned long long)d.actual.ev.payload_len);
    cr_assert_eq(d.expected.ev.dir, TT_IO_OUT);
    cr_assert_eq(d.expected.ev.arg, OUT_CH);
    check_nothing_moved(&before, C_IO_OUT);
    retry_and_finish(C_IO_OUT);
}

Test(replay, io_in_the_other_direction_diverges, .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_IO_OUT);
    char buf[64];
    memcpy(buf, out_bytes, sizeof out_bytes);
    size_t got = 0;
    int rc = tt_io(s, TT_IO_IN, OUT_CH, buf, sizeof buf, &got);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    check_report(&d, C_IO_OUT, TT_DIV_DIRECTION, TT_EV_IO);
    cr_assert_eq(d.expected.ev.dir, TT_IO_OUT);
    cr_assert_eq(d.actual.ev.dir, TT_IO_IN);
    cr_assert_arr_eq(buf, out_bytes, sizeof out_bytes, "a diverging io IN wrote into the buffer");
    retry_and_finish(C_IO_OUT);
}

Test(replay, io_in_receives_the_recorded_bytes, .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_IO_IN);
    char buf[64];
    memset(buf, 'Z', sizeof buf);
    size_t got = 12345;
    int rc = tt_io(s, TT_IO_IN, IN_CH, buf, sizeof buf, &got);
    cr_assert_eq(rc, TT_OK, "%s", tt_error_name(rc));
    cr_assert_eq(got, sizeof in_bytes - 1, "got %zu bytes, recorded %zu", got,
                 sizeof in_bytes - 1);
    cr_assert_arr_eq(buf, in_bytes, sizeof in_bytes - 1, "buffer holds '%.*s'", (int)got, buf);
    replay_calls(C_IO_IN + 1, C_COUNT);
    close_clean();
}

Test(replay, io_in_with_a_buffer_smaller_than_the_recording_diverges_and_writes_nothing,
     .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_IO_IN);
    tt_replay_progress before = progress();
    char buf[64];
    memset(buf, 'Z', sizeof buf);
    size_t got = 777;
    int rc = tt_io(s, TT_IO_IN, IN_CH, buf, sizeof in_bytes - 2, &got);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 'Z', "byte %zu of the buffer was written by a failed call", i);
    tt_divergence d = get_divergence();
    cr_assert(d.has_expected);
    cr_assert_eq(d.expected.ev.kind, TT_EV_IO);
    cr_assert_eq(d.expected.ev.payload_len, sizeof in_bytes - 1);
    check_nothing_moved(&before, C_IO_IN);
    retry_and_finish(C_IO_IN);
}

Test(replay, a_call_after_the_thread_recording_ended_diverges_without_an_expected_event,
     .init = setup, .fini = teardown)
{
    open_replay();
    replay_calls(0, C_COUNT);
    int rc = tt_enter(s, fn);
    cr_assert_eq(rc, TT_E_DIVERGED, "a call past the recording: %s", tt_error_name(rc));
    tt_divergence d = get_divergence();
    cr_assert_eq(d.reason, TT_DIV_END, "reason %d (%s)", (int)d.reason, d.message);
    cr_assert_eq(d.has_expected, 0);
    cr_assert_eq(d.actual.ev.kind, TT_EV_ENTER);
    cr_assert_eq(d.actual.ev.sp.function, fn);
    close_clean();
}

/* ---- early close ---- */

#define EARLY_USERS 37u
#define EARLY_REPLAYED 12u

Test(replay, an_early_close_reports_unconsumed_with_the_count_and_the_next_event)
{
    tt_memory_sink sink;
    tt_error_info err = {0};
    int rc = tt_test_open_record_mem(&sink, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    uint32_t f;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "early", &f), TT_OK);
    cr_assert_eq(tt_enter(s, f), TT_OK);
    for (uint32_t i = 0; i < EARLY_USERS; i++) {
        uint8_t b[8];
        tt_test_fill(b, sizeof b, i);
        cr_assert_eq(tt_user(s, 1000 + i, b, sizeof b), TT_OK);
    }
    cr_assert_eq(tt_exit(s, f), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    rc = tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    uint32_t f2;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "early", &f2), TT_OK);
    cr_assert_eq(f2, f);
    cr_assert_eq(tt_enter(s, f), TT_OK);
    for (uint32_t i = 0; i < EARLY_REPLAYED; i++) {
        uint8_t b[8];
        tt_test_fill(b, sizeof b, i);
        cr_assert_eq(tt_user(s, 1000 + i, b, sizeof b), TT_OK, "replaying user %u", i);
    }
    memset(&err, 0, sizeof err);
    rc = tt_session_close(s, &err);
    s = NULL;
    cr_assert_eq(rc, TT_E_UNCONSUMED, "early close: %s", tt_error_name(rc));
    cr_assert_eq(err.code, TT_E_UNCONSUMED, "err.code %d", err.code);
    /* Left: 25 user events and the exit (26 calls), plus the structural session end (27). */
    uint64_t calls_left = EARLY_USERS - EARLY_REPLAYED + 1;
    cr_assert(tt_test_has_number(err.message, calls_left) ||
                  tt_test_has_number(err.message, calls_left + 1),
              "the message does not say that %llu (or %llu with the session end) events were "
              "left: %s",
              (unsigned long long)calls_left, (unsigned long long)calls_left + 1, err.message);
    cr_assert_not_null(strstr(err.message, tt_event_kind_name(TT_EV_USER)),
                       "the message does not name the next event (%s): %s",
                       tt_event_kind_name(TT_EV_USER), err.message);
    free(sink.data);
}

/* ---- checkpoints ---- */

#define CP_LEN 64u
#define CP_DIFF 37u

static uint8_t cp_live[CP_LEN];

static size_t cp_size(void *ctx)
{
    (void)ctx;
    return CP_LEN;
}

static int cp_save(void *ctx, void *dst, size_t len)
{
    (void)ctx;
    if (len != CP_LEN)
        return -1;
    memcpy(dst, cp_live, len);
    return 0;
}

static int cp_stage(void *ctx, const void *src, size_t len)
{
    (void)ctx, (void)src, (void)len;
    return 0;
}

static void cp_nop(void *ctx) { (void)ctx; }

static void cp_register(void)
{
    tt_checkpoint_provider p = {
        .struct_size = sizeof p, .id = 42, .ctx = NULL, .size = cp_size, .save = cp_save,
        .stage = cp_stage, .commit = cp_nop, .cancel = cp_nop,
    };
    int rc = tt_checkpoint_register(s, &p);
    cr_assert_eq(rc, TT_OK, "tt_checkpoint_register: %s", tt_error_name(rc));
}

/* The retained checkpoint is the event's payload: u32 provider id, u64 length, the state
 * (docs/FORMAT.md section 8). */
static tt_timepoint check_last(const uint8_t *state, const char *what)
{
    const void *data = NULL;
    size_t len = 0;
    tt_timepoint tp;
    int rc = tt_checkpoint_last(s, &data, &len, &tp);
    cr_assert_eq(rc, TT_OK, "%s: tt_checkpoint_last: %s", what, tt_error_name(rc));
    cr_assert_not_null(data);
    cr_assert_eq(len, 12 + CP_LEN, "%s: retained checkpoint of %zu bytes", what, len);
    uint8_t head[12] = {42, 0, 0, 0, CP_LEN, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_arr_eq(data, head, 12, "%s: the provider id and length are not framed as in "
                     "docs/FORMAT.md", what);
    cr_assert_arr_eq((const uint8_t *)data + 12, state, CP_LEN,
                     "%s: the retained checkpoint does not hold the state", what);
    cr_assert_eq(tp.thread, 0u);
    return tp;
}

/* The sequence number of the checkpoint event at @site in thread 0 of the trace @img. */
static uint64_t checkpoint_seq_in(const void *img, size_t len, uint32_t site)
{
    tt_test_reader tr;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_reader_open_mem(&tr, img, len, TT_CURSORS_PER_THREAD, &err), TT_OK,
                 "%s", err.message);
    tt_test_events ev = {0};
    tt_test_read_cursor(&tr, 0, &ev);
    uint64_t seq = UINT64_MAX;
    for (size_t i = 0; i < ev.n; i++)
        if (ev.v[i].ev.kind == TT_EV_CHECKPOINT && ev.v[i].ev.sp.site == site)
            seq = ev.v[i].ev.tp.seq;
    tt_test_events_free(&ev);
    tt_test_reader_close(&tr);
    cr_assert_neq(seq, UINT64_MAX, "no checkpoint at site %u in the trace", site);
    return seq;
}

Test(replay, a_checkpoint_matches_the_same_state_and_diverges_at_the_changed_byte)
{
    uint8_t s1[CP_LEN], s2[CP_LEN];
    tt_test_fill(s1, CP_LEN, 0xc1);
    tt_test_fill(s2, CP_LEN, 0xc2);

    tt_memory_sink sink;
    tt_error_info err = {0};
    int rc = tt_test_open_record_mem(&sink, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    cp_register();
    const void *none;
    size_t none_len;
    cr_assert_eq(tt_checkpoint_last(s, &none, &none_len, NULL), TT_E_INVAL,
                 "a retained checkpoint before any was taken");
    memcpy(cp_live, s1, CP_LEN);
    cr_assert_eq(tt_checkpoint(s, 11), TT_OK);
    tt_timepoint rec1 = check_last(s1, "record, first");
    uint32_t between;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "between", &between), TT_OK);
    for (int i = 0; i < 3; i++) { /* events between the two: their seqs must differ by 7 */
        cr_assert_eq(tt_enter(s, between), TT_OK);
        cr_assert_eq(tt_exit(s, between), TT_OK);
    }
    cr_assert_eq(tt_safepoint(s, between, 0), TT_OK);
    memcpy(cp_live, s2, CP_LEN);
    cr_assert_eq(tt_checkpoint(s, 12), TT_OK);
    tt_timepoint rec2 = check_last(s2, "record, second");
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    /* the timepoint a recording retains is the checkpoint event's own */
    uint64_t seq1 = checkpoint_seq_in(sink.data, sink.len, 11);
    uint64_t seq2 = checkpoint_seq_in(sink.data, sink.len, 12);
    cr_assert_eq(rec1.seq, seq1, "record: first checkpoint retained at seq %llu, the file has "
                 "it at %llu", (unsigned long long)rec1.seq, (unsigned long long)seq1);
    cr_assert_eq(rec2.seq, seq2, "record: second checkpoint retained at seq %llu, the file has "
                 "it at %llu", (unsigned long long)rec2.seq, (unsigned long long)seq2);
    cr_assert_eq(seq2, seq1 + 8, "7 events lie between the checkpoints");

    tt_source src;
    rc = tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    cp_register();
    memcpy(cp_live, s1, CP_LEN);
    rc = tt_checkpoint(s, 11);
    cr_assert_eq(rc, TT_OK, "replaying the same state: %s", tt_error_name(rc));
    cr_assert_eq(check_last(s1, "replay, first").seq, seq1);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tt_enter(s, between), TT_OK);
        cr_assert_eq(tt_exit(s, between), TT_OK);
    }
    cr_assert_eq(tt_safepoint(s, between, 0), TT_OK);

    memcpy(cp_live, s2, CP_LEN);
    cp_live[CP_DIFF] ^= 0x80;
    rc = tt_checkpoint(s, 12);
    cr_assert_eq(rc, TT_E_DIVERGED, "a state with byte %u changed: %s", CP_DIFF,
                 tt_error_name(rc));
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_PAYLOAD, "reason %d (%s)", (int)d.reason, d.message);
    cr_assert(d.has_expected);
    cr_assert_eq(d.expected.ev.kind, TT_EV_CHECKPOINT);
    cr_assert_eq(d.actual.ev.kind, TT_EV_CHECKPOINT);
    cr_assert_eq(d.expected.ev.sp.site, 12u);
    /* Interpretation: first_diff is the offset within the provider's state, not within the
     * framed payload (where it would be 12 + 37). */
    cr_assert_eq(d.first_diff, CP_DIFF, "first_diff %llu, expected %u (offset in the state)",
                 (unsigned long long)d.first_diff, CP_DIFF);
    check_last(s1, "replay, after the divergence"); /* nothing changed */

    memcpy(cp_live, s2, CP_LEN);
    rc = tt_checkpoint(s, 12);
    cr_assert_eq(rc, TT_OK, "retry with the recorded state: %s", tt_error_name(rc));
    cr_assert_eq(check_last(s2, "replay, second").seq, seq2);
    rc = tt_session_close(s, &err);
    s = NULL;
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    free(sink.data);
}

Test(replay, a_checkpoint_at_another_site_diverges)
{
    tt_memory_sink sink;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    cp_register();
    tt_test_fill(cp_live, CP_LEN, 0xc3);
    cr_assert_eq(tt_checkpoint(s, 21), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    cp_register();
    int rc = tt_checkpoint(s, 22);
    cr_assert_eq(rc, TT_E_DIVERGED, "%s", tt_error_name(rc));
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    cr_assert_eq(d.reason, TT_DIV_SITE, "reason %d (%s)", (int)d.reason, d.message);
    cr_assert_eq(d.expected.ev.sp.site, 21u);
    cr_assert_eq(d.actual.ev.sp.site, 22u);
    cr_assert_eq(tt_checkpoint(s, 21), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    s = NULL;
    free(sink.data);
}

/* ---- threads, big inputs, files ---- */

typedef struct named {
    tt_session *s;
    const char *name;
    uint32_t tag_base;
    int rc;
    uint32_t at;
} named;

static void *named_thread(void *arg)
{
    named *n = arg;
    n->rc = tt_thread_name(n->s, n->name);
    for (uint32_t i = 0; n->rc == TT_OK && i < 5; i++) {
        uint8_t b[12];
        tt_test_fill(b, sizeof b, n->tag_base + i);
        n->at = i;
        n->rc = tt_user(n->s, n->tag_base + i, b, sizeof b);
    }
    return NULL;
}

static void run_named(tt_session *sess, const char *name, uint32_t tag_base)
{
    named n = {sess, name, tag_base, TT_OK, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, named_thread, &n), 0);
    pthread_join(th, NULL);
    if (n.rc == TT_E_DIVERGED) {
        tt_divergence d;
        tt_replay_divergence(sess, &d);
        cr_assert_fail("thread %s diverged at its event %u: %s", name, n.at, d.message);
    }
    cr_assert_eq(n.rc, TT_OK, "thread %s, event %u: %s", name, n.at, tt_error_name(n.rc));
}

Test(replay, threads_that_name_themselves_are_matched_by_name_not_by_order)
{
    tt_memory_sink sink;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    run_named(s, "alpha", 100);
    run_named(s, "beta", 200);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    run_named(s, "beta", 200); /* first to call in replay, second in the recording */
    run_named(s, "alpha", 100);
    int rc = tt_session_close(s, &err);
    s = NULL;
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    free(sink.data);
}

#define BIG_IN 300000u /* larger than a 256 KiB thread buffer */

Test(replay, io_in_hands_back_a_payload_larger_than_a_thread_buffer_from_a_file)
{
    const char *path = tt_test_path("big.tt");
    uint8_t *rec = malloc(BIG_IN), *live = malloc(BIG_IN + 100);
    cr_assert(rec != NULL && live != NULL);
    tt_test_fill(rec, BIG_IN, 0xb16);
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_file(path, &s, &err), TT_OK, "%s", err.message);
    size_t got = 0;
    cr_assert_eq(tt_user(s, 1, "before", 6), TT_OK);
    cr_assert_eq(tt_io(s, TT_IO_IN, 3, rec, BIG_IN, &got), TT_OK);
    cr_assert_eq(tt_user(s, 2, "after", 5), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err), TT_OK);
    int rc = tt_session_open(&cfg, &s, &err);
    cr_assert_eq(rc, TT_OK, "replay from %s: %s: %s", path, tt_error_name(rc), err.message);
    cr_assert_eq(tt_user(s, 1, "before", 6), TT_OK);
    memset(live, 0, BIG_IN + 100);
    got = 0;
    rc = tt_io(s, TT_IO_IN, 3, live, BIG_IN + 100, &got);
    cr_assert_eq(rc, TT_OK, "%s", tt_error_name(rc));
    cr_assert_eq(got, BIG_IN, "got %zu bytes", got);
    cr_assert_eq(memcmp(live, rec, BIG_IN), 0, "the recorded input came back changed");
    for (size_t i = BIG_IN; i < BIG_IN + 100; i++)
        cr_assert_eq(live[i], 0, "byte %zu past the recorded length was written", i);
    cr_assert_eq(tt_user(s, 2, "after", 5), TT_OK);
    rc = tt_session_close(s, &err);
    s = NULL;
    cr_assert_eq(rc, TT_OK, "%s: %s", tt_error_name(rc), err.message);
    free(rec);
    free(live);
}

Test(replay, a_session_in_replay_mode_refuses_a_missing_file_naming_it)
{
    tt_config cfg;
    tt_error_info err = {0};
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    const char *path = tt_test_path("absent.tt");
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err), TT_OK);
    tt_session *r = NULL;
    int rc = tt_session_open(&cfg, &r, &err);
    cr_assert_neq(rc, TT_OK, "replay of a missing file opened");
    cr_assert_not_null(strstr(err.message, path), "the message does not name %s: %s", path,
                       err.message);
}
