/* SPDX-License-Identifier: MIT */
/* A recorder inside caller storage sized up front (TraceWriterLimits / Capacity / Storage). */
#include "common.h"
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(writer_storage);

#define THREADS 3
#define PER_THREAD 5000
#define GUARD 4096
#define PATTERN 0xA5

static const tt_writer_limits LIMITS = {
    .buffer_bytes = 64u << 10,
    .memory_bytes = 256u << 10,
    .block_bytes = 32u << 10,
    .max_threads = 8,
    .max_event = 1u << 20,
    .object_bytes = 64u << 10,
};

static void config_for(tt_config *cfg, tt_memory_sink *ms)
{
    tt_error_info err;
    tt_config_init(cfg);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_BUFFER_BYTES, LIMITS.buffer_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_MEMORY_BYTES, LIMITS.memory_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_BLOCK_BYTES, LIMITS.block_bytes, &err), TT_OK);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_MAX_THREADS, LIMITS.max_threads, &err), TT_OK);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_MAX_EVENT_BYTES, LIMITS.max_event, &err), TT_OK);
    cr_assert_eq(tt_config_set(cfg, TT_PARAM_OBJECT_BYTES, LIMITS.object_bytes, &err), TT_OK);
    tt_config_set_memory_sink(cfg, ms);
}

struct worker {
    tt_session *s;
    uint32_t id;
    int failures;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    uint8_t buf[4000];
    char name[16];
    snprintf(name, sizeof name, "w%u", w->id);
    tt_thread_name(w->s, name);
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        size_t len = (size_t)(tt_test_mix(w->id, i, 7) % sizeof buf);
        tt_test_fill(buf, len, tt_test_mix(w->id, i, 1));
        if (tt_user(w->s, w->id * 1000000u + i, buf, len) != TT_OK)
            w->failures++;
    }
    tt_session_thread_end(w->s);
    return NULL;
}

Test(writer_storage, records_inside_caller_storage_and_touches_nothing_around_it)
{
    tt_writer_capacity cap;
    tt_error_info err;
    cr_assert_eq(tt_writer_capacity_of(&LIMITS, &cap, &err), TT_OK, "%s", err.message);
    cr_assert_gt(cap.buffers, 0);
    cr_assert_eq(cap.total, cap.buffers + cap.swapper + cap.threads + cap.objects);
    uint8_t *mem = aligned_alloc(64, cap.total + 2 * GUARD);
    cr_assert_not_null(mem);
    memset(mem, PATTERN, cap.total + 2 * GUARD);
    uint8_t *storage = mem + GUARD;

    tt_config cfg;
    tt_memory_sink ms;
    config_for(&cfg, &ms);
    cr_assert_eq(tt_config_set_writer_storage(&cfg, storage, cap.total, &err), TT_OK);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    pthread_t th[THREADS];
    struct worker w[THREADS];
    for (uint32_t t = 0; t < THREADS; t++) {
        w[t] = (struct worker){ s, t, 0 };
        cr_assert_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
    }
    for (uint32_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    for (uint32_t t = 0; t < THREADS; t++)
        cr_assert_eq(w[t].failures, 0);
    /* the buffers were in the storage: most of it was written over */
    size_t written = 0;
    for (size_t i = 0; i < cap.buffers; i++)
        written += storage[i] != PATTERN;
    cr_assert_gt(written, cap.buffers / 2, "only %zu of %llu buffer bytes were used", written,
                 (unsigned long long)cap.buffers);
    for (size_t i = 0; i < GUARD; i++) {
        cr_assert_eq(mem[i], PATTERN, "guard byte %zu before the storage was written", i);
        cr_assert_eq(mem[GUARD + cap.total + i], PATTERN, "guard byte %zu after it was written", i);
    }

    /* every event back, with its own value */
    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_mem(&tr, ms.data, ms.len, TT_CURSORS_PER_THREAD, &err), TT_OK,
                 "%s", err.message);
    uint8_t want[4000];
    for (uint32_t t = 0; t < THREADS; t++) {
        char name[16];
        snprintf(name, sizeof name, "w%u", t);
        uint32_t id = tt_test_thread_by_name(&tr, name);
        cr_assert_neq(id, UINT32_MAX);
        tt_event ev;
        uint32_t i = 0;
        while (tt_reader_next(tr.r, id, &ev, &err) == TT_OK) {
            if (ev.kind != TT_EV_USER)
                continue;
            size_t len = (size_t)(tt_test_mix(t, i, 7) % sizeof want);
            cr_assert_eq(ev.arg, t * 1000000u + i);
            cr_assert_eq(ev.payload_len, len);
            tt_test_fill(want, len, tt_test_mix(t, i, 1));
            cr_assert(len == 0 || memcmp(ev.payload, want, len) == 0, "payload of %u/%u", t, i);
            i++;
        }
        cr_assert_eq(i, PER_THREAD, "thread %u: %u events", t, i);
    }
    tt_test_reader_close(&tr);
    free(ms.data);
    free(mem);
}

Test(writer_storage, storage_smaller_than_the_capacity_is_refused_at_open)
{
    tt_writer_capacity cap;
    tt_error_info err;
    cr_assert_eq(tt_writer_capacity_of(&LIMITS, &cap, &err), TT_OK);
    uint8_t *mem = aligned_alloc(64, cap.total);
    cr_assert_not_null(mem);
    tt_config cfg;
    tt_memory_sink ms;
    config_for(&cfg, &ms);
    cr_assert_eq(tt_config_set_writer_storage(&cfg, mem, cap.total - 1, &err), TT_OK);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_E_STORAGE);
    cr_assert(strstr(err.message, "capacity") != NULL, "%s", err.message);
    cr_assert_eq(tt_config_set_writer_storage(&cfg, mem + 8, cap.total, &err), TT_E_CONFIG,
                 "misaligned storage is refused when it is given");
    free(mem);
}
