/* SPDX-License-Identifier: MIT */
/* Recording from signal handlers (event.h, "Signals"). A handler that interrupts a recording or
 * replay call on its own thread is refused with TT_E_MODE and leaves the buffer, the replay
 * cursor and the interrupted event alone; a handler that interrupts plain program code records
 * as any other code does, and a synchronous signal (raise) replays.
 *
 * To land a handler inside a recording call deterministically, the tests hand tt_io a payload
 * on a page that faults: record copies the payload into the thread's buffer while the call is
 * busy, so the SIGSEGV handler runs in the middle of that copy, records, unprotects the page and
 * returns, and the copy starts again. Replay of an io-in event copies the recorded bytes into
 * the caller's buffer the same way, so a write-protected buffer lands the handler inside the
 * comparison. */
#include "common.h"

#include "harness.h"
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

TestSuite(signal, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

#define PAGE 4096u
#define IO_SEED 0x5eedu
#define NESTED_TAG 777u
#define NESTED_FN 778u

/* what the fault handler saw and did */
static tt_session *volatile h_session;
static uint8_t *volatile h_page;
static volatile int h_prot;           /* protection that lets the faulting copy go on */
static volatile int h_faults;
static volatile int h_user_rc = 1, h_enter_rc = 1;

static void on_fault(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    uint8_t *a = si->si_addr;
    if (!h_page || a < h_page || a >= h_page + PAGE) {
        signal(sig, SIG_DFL); /* a real crash: die by it */
        return;
    }
    h_faults++;
    uint8_t b[24];
    tt_test_fill(b, sizeof b, NESTED_TAG);
    h_user_rc = tt_user(h_session, NESTED_TAG, b, sizeof b);
    h_enter_rc = tt_enter(h_session, NESTED_FN); /* the inline fast path */
    mprotect(h_page, PAGE, h_prot);
}

static void install(int sig, void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(sig, &sa, NULL), 0, "sigaction: %s", strerror(errno));
}

static uint8_t *map_page(void)
{
    void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
    return p;
}

static void user_ok(tt_session *s, uint32_t tag)
{
    uint8_t b[16];
    tt_test_fill(b, sizeof b, tag);
    int rc = tt_user(s, tag, b, sizeof b);
    cr_assert_eq(rc, TT_OK, "tt_user %u: %s", tag, tt_error_name(rc));
}

static void expect_user(const tt_test_events *e, size_t call, uint32_t tag, size_t len)
{
    size_t i = tt_test_events_nth_call(e, call);
    cr_assert_neq(i, SIZE_MAX, "call %zu missing", call);
    const tt_test_event *x = &e->v[i];
    cr_assert_eq(x->ev.kind, TT_EV_USER, "call %zu: kind %s", call, tt_event_kind_name(x->ev.kind));
    cr_assert_eq(x->ev.arg, tag, "call %zu: tag %llu, expected %u", call,
                 (unsigned long long)x->ev.arg, tag);
    cr_assert_eq(x->ev.payload_len, len);
    cr_assert_eq(tt_test_check_fill(x->payload, len, tag), len, "call %zu: payload differs", call);
}

/* tt_verify over the file: intact, and @events events. */
static void verify_file(const char *path, uint64_t events)
{
    tt_error_info err;
    tt_source src;
    int rc = tt_source_file(&src, path, &err);
    cr_assert_eq(rc, TT_OK, "%s", err.message);
    tt_verify_result res;
    memset(&res, 0, sizeof res);
    rc = tt_verify(&src, NULL, &res);
    cr_assert_eq(rc, TT_OK, "tt_verify: %s (%s) at %llu: %s", tt_error_name(rc),
                 tt_verify_status_name(res.status), (unsigned long long)res.offset, res.message);
    cr_assert_eq(res.status, TT_VERIFY_OK);
    cr_assert_eq(res.events, events, "verify checked %llu events, the reader read %llu",
                 (unsigned long long)res.events, (unsigned long long)events);
    tt_source_close(&src);
}

static void read_file(const char *path, tt_test_reader *tr, tt_test_events *e)
{
    tt_error_info err;
    int rc = tt_test_reader_open_file(tr, path, TT_CURSORS_PER_THREAD, &err);
    cr_assert_eq(rc, TT_OK, "open %s: %s", path, err.message);
    cr_assert_eq(tr->m.thread_count, 1);
    memset(e, 0, sizeof *e);
    tt_test_read_cursor(tr, 0, e);
    cr_assert_eq(e->end_code, TT_E_END, "read: %s: %s", tt_error_name(e->end_code),
                 e->err.message);
}

Test(signal, a_handler_inside_a_recording_call_is_refused_and_the_interrupted_event_is_intact)
{
    const char *path = tt_test_path("nested.tt");
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(tt_test_open_record_file(path, &s, &err), TT_OK, "%s", err.message);
    user_ok(s, 1);
    user_ok(s, 2);

    uint8_t *page = map_page();
    tt_test_fill(page, PAGE, IO_SEED);
    mprotect(page, PAGE, PROT_NONE);
    h_session = s;
    h_page = page;
    h_prot = PROT_READ;
    install(SIGSEGV, on_fault);

    int rc = tt_io(s, TT_IO_OUT, 5, page, PAGE, NULL);
    cr_assert_eq(rc, TT_OK, "tt_io: %s", tt_error_name(rc));
    cr_assert_eq(h_faults, 1, "the handler ran %d times inside tt_io", h_faults);
    cr_assert_eq(h_user_rc, TT_E_MODE, "nested tt_user: %s", tt_error_name(h_user_rc));
    cr_assert_eq(h_enter_rc, TT_E_MODE, "nested tt_enter: %s", tt_error_name(h_enter_rc));

    /* the interrupted call gave busy back: the thread records on */
    user_ok(s, 3);
    rc = tt_enter(s, 40);
    cr_assert_eq(rc, TT_OK, "tt_enter: %s", tt_error_name(rc));
    rc = tt_exit(s, 40);
    cr_assert_eq(rc, TT_OK, "tt_exit: %s", tt_error_name(rc));
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    signal(SIGSEGV, SIG_DFL);

    tt_test_reader tr;
    tt_test_events e;
    read_file(path, &tr, &e);
    cr_assert_eq(tt_test_events_count_calls(&e), 6, "%zu calls recorded, expected 6",
                 tt_test_events_count_calls(&e));
    expect_user(&e, 0, 1, 16);
    expect_user(&e, 1, 2, 16);
    const tt_test_event *io = &e.v[tt_test_events_nth_call(&e, 2)];
    cr_assert_eq(io->ev.kind, TT_EV_IO, "call 2: %s", tt_event_kind_name(io->ev.kind));
    cr_assert_eq(io->ev.dir, TT_IO_OUT);
    cr_assert_eq(io->ev.arg, 5);
    cr_assert_eq(io->ev.payload_len, PAGE);
    cr_assert_eq(tt_test_check_fill(io->payload, PAGE, IO_SEED), PAGE, "io payload differs");
    expect_user(&e, 3, 3, 16);
    const tt_test_event *en = &e.v[tt_test_events_nth_call(&e, 4)];
    const tt_test_event *ex = &e.v[tt_test_events_nth_call(&e, 5)];
    cr_assert(en->ev.kind == TT_EV_ENTER && en->ev.sp.function == 40, "call 4: %s %u",
              tt_event_kind_name(en->ev.kind), en->ev.sp.function);
    cr_assert(ex->ev.kind == TT_EV_EXIT && ex->ev.sp.function == 40, "call 5: %s %u",
              tt_event_kind_name(ex->ev.kind), ex->ev.sp.function);
    uint64_t n = e.n;
    tt_test_events_free(&e);
    tt_test_reader_close(&tr);
    verify_file(path, n);
    munmap(page, PAGE);
}

Test(signal, a_handler_inside_a_replay_call_is_refused_and_the_cursor_does_not_move)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    user_ok(s, 1);
    uint8_t *page = map_page();
    tt_test_fill(page, PAGE, IO_SEED);
    cr_assert_eq(tt_io(s, TT_IO_IN, 5, page, PAGE, NULL), TT_OK);
    /* the event the handler's call would match if it were let in */
    uint8_t b[24];
    tt_test_fill(b, sizeof b, NESTED_TAG);
    cr_assert_eq(tt_user(s, NESTED_TAG, b, sizeof b), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    user_ok(s, 1);
    memset(page, 0, PAGE);
    mprotect(page, PAGE, PROT_READ); /* the copy of the recorded bytes faults */
    h_session = s;
    h_page = page;
    h_prot = PROT_READ | PROT_WRITE;
    install(SIGSEGV, on_fault);
    size_t got = 0;
    int rc = tt_io(s, TT_IO_IN, 5, page, PAGE, &got);
    cr_assert_eq(rc, TT_OK, "replayed tt_io: %s", tt_error_name(rc));
    cr_assert_eq(h_faults, 1, "the handler ran %d times inside tt_io", h_faults);
    cr_assert_eq(h_user_rc, TT_E_MODE, "nested tt_user: %s", tt_error_name(h_user_rc));
    cr_assert_eq(h_enter_rc, TT_E_MODE, "nested tt_enter: %s", tt_error_name(h_enter_rc));
    cr_assert_eq(got, PAGE);
    cr_assert_eq(tt_test_check_fill(page, PAGE, IO_SEED), PAGE, "replayed bytes differ");
    signal(SIGSEGV, SIG_DFL);

    /* the refused call consumed nothing and counted no divergence: the next event is still the
     * one it would have matched */
    rc = tt_user(s, NESTED_TAG, b, sizeof b);
    cr_assert_eq(rc, TT_OK, "tt_user after the handler: %s", tt_error_name(rc));
    rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "replay close: %s: %s", tt_error_name(rc), err.message);
    free(sink.data);
    munmap(page, PAGE);
}

/* a handler that interrupted plain program code */
static tt_session *volatile u_session;
static volatile uint32_t u_next_tag;
static volatile int u_rc[3] = { 1, 1, 1 };

static void on_usr1(int sig, siginfo_t *si, void *uctx)
{
    (void)sig;
    (void)si;
    (void)uctx;
    uint32_t tag = u_next_tag;
    uint8_t b[16];
    tt_test_fill(b, sizeof b, tag);
    u_rc[0] = tt_enter(u_session, tag);
    u_rc[1] = tt_user(u_session, tag, b, sizeof b);
    u_rc[2] = tt_exit(u_session, tag);
}

/* The program: user events 0..ROUNDS-1, a raise(SIGUSR1) after every third, whose handler
 * records enter, user, exit with tag 1000 + i. The same in record and replay. */
#define ROUNDS 30u
static void run_program(tt_session *s)
{
    u_session = s;
    install(SIGUSR1, on_usr1);
    for (uint32_t i = 0; i < ROUNDS; i++) {
        user_ok(s, i);
        if (i % 3 == 2) {
            u_next_tag = 1000 + i;
            u_rc[0] = u_rc[1] = u_rc[2] = 1;
            cr_assert_eq(raise(SIGUSR1), 0);
            for (int k = 0; k < 3; k++)
                cr_assert_eq(u_rc[k], TT_OK, "handler call %d after %u: %s", k, i,
                             tt_error_name(u_rc[k]));
        }
    }
    signal(SIGUSR1, SIG_DFL);
}

Test(signal, a_handler_that_interrupted_plain_code_records_normally_and_replays)
{
    const char *path = tt_test_path("plain.tt");
    tt_session *s;
    tt_error_info err;
    cr_assert_eq(tt_test_open_record_file(path, &s, &err), TT_OK, "%s", err.message);
    run_program(s);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    tt_test_events e;
    read_file(path, &tr, &e);
    size_t call = 0;
    for (uint32_t i = 0; i < ROUNDS; i++) {
        expect_user(&e, call++, i, 16);
        if (i % 3 == 2) {
            uint32_t tag = 1000 + i;
            const tt_test_event *en = &e.v[tt_test_events_nth_call(&e, call++)];
            cr_assert(en->ev.kind == TT_EV_ENTER && en->ev.sp.function == tag,
                      "after %u: %s %u", i, tt_event_kind_name(en->ev.kind), en->ev.sp.function);
            expect_user(&e, call++, tag, 16);
            const tt_test_event *ex = &e.v[tt_test_events_nth_call(&e, call++)];
            cr_assert(ex->ev.kind == TT_EV_EXIT && ex->ev.sp.function == tag,
                      "after %u: %s %u", i, tt_event_kind_name(ex->ev.kind), ex->ev.sp.function);
        }
    }
    cr_assert_eq(tt_test_events_count_calls(&e), call, "%zu calls recorded, expected %zu",
                 tt_test_events_count_calls(&e), call);
    uint64_t n = e.n;
    tt_test_events_free(&e);
    tt_test_reader_close(&tr);
    verify_file(path, n);

    /* a synchronous signal comes at the same place in the thread's events: it replays */
    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err), TT_OK);
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    run_program(s);
    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "replay close: %s: %s", tt_error_name(rc), err.message);
}

/* An interval timer firing into a loop of enter/exit calls: wherever the handler lands, every
 * event it was allowed to record is in the file once, every event of the loop is in the file
 * with its own value, in order, and the file verifies. */
#define TIMER_MAX_HITS 4096
/* The loop's first function id: far above the ids the session interns (the tracer's frame of a
 * wait for the budget, TT_STALL_FUNCTION, takes one), so that the two never meet. */
#define TIMER_FN0 0x40000000u
static tt_session *volatile a_session;
static volatile uint32_t a_hits, a_ok, a_refused, a_other;
static uint32_t a_ok_tags[TIMER_MAX_HITS];

static void on_alarm(int sig)
{
    (void)sig;
    int saved_errno = errno; /* a refill may take a lock and wake the swapper */
    uint32_t hit = a_hits++;
    if (hit >= TIMER_MAX_HITS)
        return;
    uint32_t tag = 0x10000000u + hit;
    uint64_t v = tt_test_mix(tag, 1, 2);
    int rc = tt_user(a_session, tag, &v, sizeof v);
    if (rc == TT_OK)
        a_ok_tags[a_ok++] = tag;
    else if (rc == TT_E_MODE)
        a_refused++;
    else
        a_other++;
    errno = saved_errno;
}

Test(signal, a_timer_landing_anywhere_loses_nothing_and_corrupts_nothing)
{
    /* What event.h asks of a program that records from asynchronous handlers: caller storage,
     * so that a handler whose event takes a new buffer allocates nothing (it may have
     * interrupted malloc), and a first event on the thread before any handler can record. */
    const char *path = tt_test_path("timer.tt");
    const tt_writer_limits lim = { .buffer_bytes = 64u << 10, .memory_bytes = 1u << 20,
                                   .block_bytes = 32u << 10, .max_threads = 4,
                                   .max_event = 64u << 10, .object_bytes = 64u << 10 };
    tt_writer_capacity cap;
    tt_error_info err;
    cr_assert_eq(tt_writer_capacity_of(&lim, &cap, &err), TT_OK, "%s", err.message);
    void *storage = aligned_alloc(64, (cap.total + 63) & ~(uint64_t)63);
    cr_assert_not_null(storage);
    tt_config cfg;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, path, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, lim.buffer_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, lim.memory_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BLOCK_BYTES, lim.block_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MAX_THREADS, lim.max_threads, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MAX_EVENT_BYTES, lim.max_event, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_OBJECT_BYTES, lim.object_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set_writer_storage(&cfg, storage, cap.total, &err), TT_OK, "%s",
                 err.message);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    a_session = s;
    uint64_t first = tt_test_mix(0, 1, 2);
    cr_assert_eq(tt_user(s, 0, &first, sizeof first), TT_OK); /* registers the thread */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
    struct itimerval it = { { 0, 50 }, { 0, 50 } };
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0, "setitimer: %s", strerror(errno));

    uint64_t deadline = tt_test_now_ns() + 2000000000ull;
    uint32_t calls = 0;
    while (calls < 4000000u && (a_hits < 400 || calls < 200000u)) {
        for (int k = 0; k < 1000; k++, calls++) {
            uint32_t fn = TIMER_FN0 + calls;
            int rc = tt_enter(s, fn);
            if (rc == TT_OK)
                rc = tt_exit(s, fn);
            cr_assert_eq(rc, TT_OK, "call %u: %s", calls, tt_error_name(rc));
        }
        if (tt_test_now_ns() > deadline)
            break;
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    cr_assert_gt(a_hits, 0, "the timer never fired");
    cr_assert_eq(a_other, 0, "%u handler calls failed otherwise", a_other);
    cr_assert_eq(a_ok + a_refused, a_hits < TIMER_MAX_HITS ? a_hits : TIMER_MAX_HITS);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_test_reader tr;
    tt_test_events e;
    read_file(path, &tr, &e);
    uint32_t next_fn = TIMER_FN0, users = 0;
    bool in_call = false;
    size_t first_call = tt_test_events_nth_call(&e, 0);
    cr_assert_neq(first_call, SIZE_MAX);
    cr_assert(e.v[first_call].ev.kind == TT_EV_USER && e.v[first_call].ev.arg == 0);
    for (size_t i = first_call + 1; i < e.n; i++) {
        const tt_event *ev = &e.v[i].ev;
        /* a wait for the small budget is the tracer's frame, no call of the loop */
        if (tt_test_is_structural(ev->kind) || tt_test_is_tracer(tr.r, ev))
            continue;
        if (ev->kind == TT_EV_USER) {
            cr_assert_lt(users, a_ok, "more handler events than the handler recorded");
            cr_assert_eq(ev->arg, a_ok_tags[users], "handler event %u: tag %llu, expected %u",
                         users, (unsigned long long)ev->arg, a_ok_tags[users]);
            uint64_t v = tt_test_mix(a_ok_tags[users], 1, 2);
            cr_assert(ev->payload_len == sizeof v && memcmp(e.v[i].payload, &v, sizeof v) == 0,
                      "handler event %u: payload differs", users);
            users++;
            continue;
        }
        cr_assert_eq(ev->kind, in_call ? TT_EV_EXIT : TT_EV_ENTER, "event %zu: %s", i,
                     tt_event_kind_name(ev->kind));
        cr_assert_eq(ev->sp.function, next_fn, "event %zu: function %u, expected %u", i,
                     ev->sp.function, next_fn);
        if (in_call)
            next_fn++;
        in_call = !in_call;
    }
    cr_assert_eq(users, a_ok, "%u handler events in the file, %u recorded", users, a_ok);
    cr_assert_eq(next_fn, TIMER_FN0 + calls, "%u calls in the file, %u made", next_fn - TIMER_FN0,
                 calls);
    uint64_t n = e.n;
    tt_test_events_free(&e);
    tt_test_reader_close(&tr);
    verify_file(path, n);
    free(storage);
}
