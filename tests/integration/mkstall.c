/* SPDX-License-Identifier: MIT */
/* mkstall record|replay FILE — a recording whose thread waits for the memory budget, for
 * test-stall.py: the wait must show as the tracer's time in the tools, and replay must step
 * over it.
 *
 *   record FILE  a session with the smallest budget (two 4 KiB buffers) and a slow sink: its
 *                first write of the data area waits (with a deadline) until the recording
 *                thread has stalled, then takes SLOW_MS more. The thread meanwhile calls
 *                `work`, and inside it `leaf` CALLS times, so it runs out of buffers while the
 *                sink is slow. Prints "stalls N stall_ns NS" from tt_session_stats_get.
 *   replay FILE  the same calls against the recording, in replay mode: they must all match and
 *                the close must find nothing left (the stall's frame is stepped over).
 *
 * Exit status 0 on success, 1 on a failure (with a message on stderr), 2 on a bad command line.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tinytrace/tinytrace.h>

#define CALLS 4000
#define SLOW_MS 40
#define DEADLINE_S 20

static tt_session *session;
static int out_fd = -1;
static int slowed;

static void die(const char *what, int rc, const tt_error_info *err)
{
    fprintf(stderr, "mkstall: %s: %s (%s)%s%s\n", what, tt_strerror(rc), tt_error_name(rc),
            err != NULL && err->message[0] ? ": " : "", err != NULL ? err->message : "");
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The slow sink: the swapper's first data write waits until the recording thread stalled
 * (the session's stall count, not a guess at how long that takes), then SLOW_MS more. */
static int slow_write(void *ctx, uint64_t offset, const void *data, size_t len)
{
    (void)ctx;
    if (offset >= 512 && !slowed && session) {
        slowed = 1;
        double deadline = now_s() + DEADLINE_S;
        tt_session_stats st;
        do {
            tt_session_stats_get(session, &st);
            if (st.stalls == 0) {
                struct timespec ts = { 0, 100000 };
                nanosleep(&ts, NULL);
            }
        } while (st.stalls == 0 && now_s() < deadline);
        if (st.stalls == 0) {
            fprintf(stderr, "mkstall: the recording thread did not stall within %d s\n",
                    DEADLINE_S);
            exit(1);
        }
        for (double until = now_s() + SLOW_MS / 1e3; now_s() < until;) {
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
    }
    return pwrite(out_fd, data, len, (off_t)offset) == (ssize_t)len ? 0 : -1;
}

static void calls(uint32_t work, uint32_t leaf)
{
    int rc;
    if ((rc = tt_enter(session, work)) != TT_OK)
        die("enter work", rc, NULL);
    for (int i = 0; i < CALLS; i++)
        if ((rc = tt_enter(session, leaf)) != TT_OK || (rc = tt_exit(session, leaf)) != TT_OK)
            die("leaf", rc, NULL);
    if ((rc = tt_exit(session, work)) != TT_OK)
        die("exit work", rc, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "record") != 0 && strcmp(argv[1], "replay") != 0)) {
        fprintf(stderr, "usage: mkstall record|replay FILE\n");
        return 2;
    }
    int record = argv[1][2] == 'c';
    tt_config cfg;
    tt_error_info err;
    int rc;
    tt_config_init(&cfg);
    if (record) {
        if ((out_fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
            perror(argv[2]);
            return 1;
        }
        if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err)) != TT_OK ||
            (rc = tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, &err)) != TT_OK ||
            (rc = tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 8192, &err)) != TT_OK)
            die("config", rc, &err);
        tt_config_set_callback_sink(&cfg, slow_write, NULL);
    } else if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_REPLAY, &err)) != TT_OK ||
               (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, argv[2], &err)) != TT_OK) {
        die("config", rc, &err);
    }
    if ((rc = tt_session_open(&cfg, &session, &err)) != TT_OK)
        die("open", rc, &err);
    uint32_t work, leaf;
    if ((rc = tt_intern(session, TT_OBJ_FUNCTION, "work", &work)) != TT_OK ||
        (rc = tt_intern(session, TT_OBJ_FUNCTION, "leaf", &leaf)) != TT_OK)
        die("intern", rc, NULL);
    calls(work, leaf);
    tt_session_stats st;
    tt_session_stats_get(session, &st);
    if ((rc = tt_session_close(session, &err)) != TT_OK)
        die("close", rc, &err);
    if (record) {
        printf("stalls %llu stall_ns %llu\n", (unsigned long long)st.stalls,
               (unsigned long long)st.stall_ns);
        if (close(out_fd) != 0) {
            perror(argv[2]);
            return 1;
        }
    }
    return 0;
}
