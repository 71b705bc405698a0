/* SPDX-License-Identifier: MIT */
/* Records batches of events into the file named by argv[1], each event its own value; after each
 * batch it hands its buffer to the swapper, waits (with a deadline) until the session counts
 * those events as written, and prints "flushed N". It never closes: the test kills it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    tt_config_init(&cfg);
    tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err);
    tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 16u << 10, &err);
    tt_config_set_str(&cfg, TT_PARAM_FILE, argv[1], &err);
    if (tt_session_open(&cfg, &s, &err) != TT_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    uint32_t fn;
    tt_intern(s, TT_OBJ_FUNCTION, "batch", &fn);
    for (uint32_t batch = 0;; batch++) {
        for (uint32_t i = 0; i < 1000; i++) {
            uint32_t v = batch * 1000 + i;
            tt_enter(s, fn + (v % 7));
            tt_user(s, v, &v, sizeof v);
            tt_exit(s, fn + (v % 7));
        }
        tt_session_flush_thread(s);
        tt_session_stats st;
        uint64_t deadline = now_ns() + 10000000000ull;
        /* 2 start events, then 3 per value */
        uint64_t want = 2 + 3000ull * (batch + 1);
        do
            tt_session_stats_get(s, &st);
        while (st.events < want && now_ns() < deadline);
        printf("flushed %llu\n", (unsigned long long)st.events);
        fflush(stdout);
    }
}
