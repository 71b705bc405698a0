/* SPDX-License-Identifier: MIT */
/* A program that uses the C API from the environment (tt_config_from_env, tt_session_open) and
 * is also traced from outside: run under `tinytrace record`, or linked with libtinytrace and
 * built with -finstrument-functions. Its session must be the process's, not a second one over
 * the same TINYTRACE_FILE. It feeds a clock reading through tt_io (replayed: the same output) and
 * marks its steps with tt_user, so the trace shows whose events it holds. */
#include <stdio.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

static long long work(tt_session *s, int step)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long v = (long long)ts.tv_nsec + step;
    size_t got = 0;
    if (tt_io(s, TT_IO_IN, 77, &v, sizeof v, &got) != TT_OK || got != sizeof v)
        fprintf(stderr, "prog-api: tt_io failed\n");
    tt_user(s, 1000u + (unsigned)step, &step, sizeof step);
    return v;
}

int main(void)
{
    tt_config cfg;
    tt_error_info err;
    tt_session *s = NULL;
    tt_config_init(&cfg);
    if (tt_config_from_env(&cfg, &err) != TT_OK || tt_session_open(&cfg, &s, &err) != TT_OK) {
        fprintf(stderr, "prog-api: %s\n", err.message);
        return 2;
    }
    long long sum = 0;
    for (int i = 0; i < 3; i++)
        sum += work(s, i);
    printf("value %lld\n", sum);
    fflush(stdout);
    if (tt_session_close(s, &err) != TT_OK) {
        fprintf(stderr, "prog-api: close: %s\n", err.message);
        return 3;
    }
    return 0;
}
