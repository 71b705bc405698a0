/* SPDX-License-Identifier: MIT */
/* The session layer: the process's one session from the environment, and names read while
 * another thread interns. */
#include "common.h"
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(sessions, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

static void env_set(const char *mode, const char *file)
{
    cr_assert_eq(setenv("TINYTRACE_MODE", mode, 1), 0);
    cr_assert_eq(setenv("TINYTRACE_FILE", file, 1), 0);
}

static void env_clear(void)
{
    unsetenv("TINYTRACE_MODE");
    unsetenv("TINYTRACE_FILE");
}

static tt_session *open_from_env(void)
{
    tt_config cfg;
    tt_error_info err = {0};
    tt_session *s = NULL;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_from_env(&cfg, &err), TT_OK, "%s", err.message);
    int rc = tt_session_open(&cfg, &s, &err);
    cr_assert_eq(rc, TT_OK, "tt_session_open: %s: %s", tt_error_name(rc), err.message);
    return s;
}

/* Two opens from the environment (the runtime's and the program's, under `tinytrace record`)
 * record into one file: they share the session, and the file holds both openers' events. */
Test(sessions, two_opens_from_the_environment_share_one_session_and_one_file)
{
    const char *path = tt_test_path("shared.tt");
    env_set("record", path);
    tt_session *a = open_from_env();
    tt_session *b = open_from_env();
    cr_assert_eq(a, b, "the second open from the environment made a second session");
    uint32_t fa, fb;
    cr_assert_eq(tt_intern(a, TT_OBJ_FUNCTION, "from-a", &fa), TT_OK);
    cr_assert_eq(tt_intern(b, TT_OBJ_FUNCTION, "from-b", &fb), TT_OK);
    cr_assert_eq(tt_enter(a, fa), TT_OK);
    cr_assert_eq(tt_enter(b, fb), TT_OK);
    cr_assert_eq(tt_exit(b, fb), TT_OK);
    cr_assert_eq(tt_exit(a, fa), TT_OK);
    tt_error_info err = {0};
    /* the second holder's finish and close only let go */
    cr_assert_eq(tt_session_finish(b, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_session_close(b, &err), TT_OK, "%s", err.message);
    cr_assert(access(path, F_OK) != 0, "the file was finished by the second holder's close");
    cr_assert_eq(tt_enter(a, fa), TT_OK, "the first holder's session was closed under it");
    cr_assert_eq(tt_exit(a, fa), TT_OK);
    cr_assert_eq(tt_session_close(a, &err), TT_OK, "%s", err.message);
    env_clear();

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_file(&tr, path, TT_CURSORS_PER_THREAD, &err), TT_OK, "%s",
                 err.message);
    tt_test_events ev = {0};
    tt_test_read_cursor(&tr, 0, &ev);
    cr_assert_eq(tt_test_events_count_calls(&ev), 6u, "both openers' 6 calls in one file");
    tt_test_events_free(&ev);
    tt_test_reader_close(&tr);

    /* and a replay from the environment is one session too: both halves match */
    env_set("replay", path);
    a = open_from_env();
    b = open_from_env();
    cr_assert_eq(a, b);
    uint32_t ra, rb;
    cr_assert_eq(tt_intern(a, TT_OBJ_FUNCTION, "from-a", &ra), TT_OK);
    cr_assert_eq(tt_intern(b, TT_OBJ_FUNCTION, "from-b", &rb), TT_OK);
    cr_assert_eq(tt_enter(a, ra), TT_OK);
    cr_assert_eq(tt_enter(b, rb), TT_OK);
    cr_assert_eq(tt_exit(b, rb), TT_OK);
    cr_assert_eq(tt_exit(a, ra), TT_OK);
    cr_assert_eq(tt_session_close(b, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_enter(a, ra), TT_OK);
    cr_assert_eq(tt_exit(a, ra), TT_OK);
    cr_assert_eq(tt_session_close(a, &err), TT_OK, "%s", err.message);
    env_clear();
}

/* A config of its own (not from the environment), or another file, is its own session. */
Test(sessions, a_config_not_from_the_environment_is_a_session_of_its_own)
{
    const char *path = tt_test_path("env.tt");
    env_set("record", path);
    tt_session *a = open_from_env();
    tt_config cfg;
    tt_error_info err = {0};
    tt_session *b = NULL;
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set_str(&cfg, TT_PARAM_FILE, tt_test_path("own.tt"), &err), TT_OK);
    cr_assert_eq(tt_session_open(&cfg, &b, &err), TT_OK, "%s", err.message);
    cr_assert_neq(a, b);
    cr_assert_eq(tt_session_close(b, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_session_close(a, &err), TT_OK, "%s", err.message);
    env_clear();
    cr_assert_eq(access(tt_test_path("own.tt"), F_OK), 0);
    cr_assert_eq(access(path, F_OK), 0);
}

/* tt_divergence_format names functions from the intern table while another thread interns
 * new names, which grows (and moves) the table. Under ASan or TSan a read of the table in
 * place is a use after free or a race; the names must come out whole every time. */
struct interner {
    tt_session *s;
    _Atomic int stop;
};

static void *intern_many(void *arg)
{
    struct interner *in = arg;
    char name[64];
    for (unsigned i = 0; i < 20000 && !atomic_load(&in->stop); i++) {
        snprintf(name, sizeof name, "fresh-name-%u-with-some-length-to-grow-the-arena", i);
        uint32_t id;
        if (tt_intern(in->s, TT_OBJ_FUNCTION, name, &id) != TT_OK)
            break;
    }
    return NULL;
}

Test(sessions, divergence_format_reads_names_safely_while_another_thread_interns)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = {0};
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    uint32_t rec;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "recorded-function", &rec), TT_OK);
    cr_assert_eq(tt_enter(s, rec), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);

    tt_source src;
    cr_assert_eq(tt_test_open_replay_mem(&src, sink.data, sink.len, &s, &err), TT_OK, "%s",
                 err.message);
    uint32_t other;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "live-function", &other), TT_OK);
    cr_assert_eq(tt_enter(s, other), TT_E_DIVERGED);
    tt_divergence d;
    cr_assert_eq(tt_replay_divergence(s, &d), TT_OK);
    struct interner in = { .s = s };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, intern_many, &in), 0);
    char text[8192];
    unsigned whole = 0;
    for (int i = 0; i < 3000; i++) {
        size_t n = tt_divergence_format(s, &d, text, sizeof text);
        whole += n > 0 && strstr(text, "recorded-function") && strstr(text, "live-function");
    }
    atomic_store(&in.stop, 1);
    pthread_join(th, NULL);
    cr_assert_eq(whole, 3000u, "%u of 3000 reports named both functions", whole);
    tt_session_close(s, NULL);
    free(sink.data);
}
