/* SPDX-License-Identifier: MIT */
/* Recovery of partial files whose threads split payloads over several chunks (found by the
 * fuzz-recover target, docs/FUZZING.md): whatever tt_recover writes must verify, whichever chunk
 * the run died in. */
#include "common.h"

#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

TestSuite(recover, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

/* One thread, 4 KiB buffers: a 9000-byte io payload over two chunks, then a 20000-byte user
 * payload whose first bytes are in the chunk that ends the io payload (CONT_IN and CONT_OUT on
 * one chunk), then continuation-only chunks. */
static void record_splits(uint8_t **img, size_t *len)
{
    tt_config cfg;
    tt_error_info err = { 0 };
    tt_config_init(&cfg);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err), TT_OK);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BLOCK_BYTES, 4096, &err), TT_OK, "%s", err.message);
    cr_assert_eq(tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, &err), TT_OK, "%s", err.message);
    tt_memory_sink sink = { 0 };
    tt_config_set_memory_sink(&cfg, &sink);
    tt_session *s;
    cr_assert_eq(tt_session_open(&cfg, &s, &err), TT_OK, "%s", err.message);
    static uint8_t buf[20000];
    cr_assert_eq(tt_enter(s, 11), TT_OK);
    tt_test_fill(buf, 9000, 1);
    cr_assert_eq(tt_io(s, TT_IO_IN, 12, buf, 9000, NULL), TT_OK);
    cr_assert_eq(tt_exit(s, 11), TT_OK);
    tt_test_fill(buf, 20000, 2);
    cr_assert_eq(tt_user(s, 13, buf, 20000), TT_OK);
    cr_assert_eq(tt_enter(s, 14), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    *img = sink.data;
    *len = sink.len;
}

Test(recover, keeps_a_valid_trace_when_a_chunk_ends_one_split_payload_and_starts_another)
{
    uint8_t *img;
    size_t len;
    record_splits(&img, &len);
    tt_manifest m;
    tt_error_info err;
    cr_assert_eq(tt_manifest_decode(img, len, &m, &err), TT_OK, "%s", err.message);

    /* the file as it was before close: a provisional manifest, then the event chunks */
    tt_manifest pm = m;
    pm.flags = m.flags & TT_MF_TSC;
    pm.event_count = pm.payload_bytes = pm.chunk_count = pm.block_count = 0;
    pm.largest_chunk = pm.largest_event = pm.largest_split = 0;
    pm.thread_count = pm.object_count = 0;
    pm.threads_offset = pm.threads_length = pm.objects_offset = pm.objects_length = 0;
    pm.events_checksum = pm.stall_count = pm.stall_ns = 0;
    pm.data_end = pm.file_size = TT_MANIFEST_SIZE;
    uint8_t *partial = malloc(m.data_end);
    cr_assert_not_null(partial);
    tt_manifest_encode(partial, &pm);
    memcpy(partial + TT_MANIFEST_SIZE, img + TT_MANIFEST_SIZE, m.data_end - TT_MANIFEST_SIZE);

    /* the run dies in the middle of each chunk in turn, and after the last one */
    unsigned cuts = 0, shared = 0;
    for (uint64_t off = TT_MANIFEST_SIZE; off < m.data_end;) {
        uint32_t body_len = tt_get32(partial + off + 8);
        uint16_t flags = tt_get16(partial + off + 6);
        uint32_t count = tt_get32(partial + off + 24);
        if ((flags & TT_CF_CONT_IN) && (flags & TT_CF_CONT_OUT) && count)
            shared++;
        uint64_t next = off + TT_CHUNK_HEADER + body_len;
        uint64_t cut = next == m.data_end ? next : off + TT_CHUNK_HEADER + body_len / 2;
        tt_source src;
        tt_recover_result res;
        tt_source_memory(&src, partial, cut);
        char name[64];
        snprintf(name, sizeof name, "recovered-%u.tt", cuts);
        const char *path = tt_test_path(name);
        int rc = tt_recover(&src, path, &res, &err);
        cr_assert_eq(rc, TT_OK, "cut at %llu: %s", (unsigned long long)cut, err.message);

        tt_source out;
        tt_verify_result vr;
        cr_assert_eq(tt_source_file(&out, path, &err), TT_OK, "%s", err.message);
        rc = tt_verify(&out, NULL, &vr);
        tt_source_close(&out);
        cr_assert_eq(rc, TT_OK, "cut at %llu: the recovered file fails verify: %s",
                     (unsigned long long)cut, vr.message);
        cr_assert_eq(vr.events, res.events, "cut at %llu", (unsigned long long)cut);

        /* every payload that survived is whole */
        tt_test_reader tr;
        tt_test_events evs = { 0 };
        cr_assert_eq(tt_test_reader_open_file(&tr, path, TT_CURSORS_SEQUENTIAL, &err), TT_OK,
                     "%s", err.message);
        tt_test_read_cursor(&tr, 0, &evs);
        cr_assert_eq(evs.end_code, TT_E_END, "%s", evs.err.message);
        for (size_t i = 0; i < evs.n; i++) {
            const tt_event *ev = &evs.v[i].ev;
            if (ev->kind == TT_EV_IO)
                cr_assert(ev->payload_len == 9000 &&
                          tt_test_check_fill(evs.v[i].payload, 9000, 1) == 9000);
            if (ev->kind == TT_EV_USER)
                cr_assert(ev->payload_len == 20000 &&
                          tt_test_check_fill(evs.v[i].payload, 20000, 2) == 20000);
        }
        tt_test_events_free(&evs);
        tt_test_reader_close(&tr);
        cuts++;
        off = next;
    }
    cr_assert_geq(cuts, 6, "only %u chunks", cuts);
    cr_assert_eq(shared, 1, "the recording no longer has a chunk that ends one split payload "
                 "and starts another");
    free(partial);
    free(img);
}

/* ---- chunks recover must not keep, because a reader refuses them (fuzz-recover findings) ---- */

/* A provisional manifest, then a good chunk of thread 0 (enter and exit of function 5 at times
 * 100 and 110), then @bad: the partial file of a run that died after writing @bad. */
static size_t partial_with(uint8_t *out, uint64_t ticks_per_sec, const struct tt_chunk_header *bad,
                           const uint8_t *bad_body, uint64_t *bad_off)
{
    tt_manifest pm;
    memset(&pm, 0, sizeof pm);
    pm.version = TT_FORMAT_VERSION;
    pm.block_size = 4096;
    pm.ticks_per_sec = ticks_per_sec;
    pm.data_offset = pm.data_end = pm.file_size = TT_MANIFEST_SIZE;
    tt_manifest_encode(out, &pm);
    size_t n = TT_MANIFEST_SIZE;
    static const uint8_t good[] = { TT_EV_ENTER, 0, 5, TT_EV_EXIT | TT_TAG_FSAME, 10 };
    struct tt_chunk_header h = { .type = TT_CHUNK_EVENTS, .body_len = sizeof good, .count = 2,
                                 .base_time = 100 };
    tt_chunk_header_encode(out + n, &h, good);
    memcpy(out + n + TT_CHUNK_HEADER, good, sizeof good);
    n += TT_CHUNK_HEADER + sizeof good;
    *bad_off = n;
    tt_chunk_header_encode(out + n, bad, bad_body);
    if (bad->body_len)
        memcpy(out + n + TT_CHUNK_HEADER, bad_body, bad->body_len);
    return n + TT_CHUNK_HEADER + bad->body_len;
}

Test(recover, stops_at_the_first_chunk_a_reader_would_refuse)
{
    static const uint8_t later_enter[] = { TT_EV_ENTER | TT_TAG_FSAME, 0 };
    static const uint8_t user_out[] = { TT_EV_USER | TT_TAG_FSAME | TT_TAG_OUT, 0, 0, 0, 0, 0 };
    static const uint8_t enter_out[] = { TT_EV_ENTER | TT_TAG_FSAME | TT_TAG_OUT, 0 };
    static const uint8_t wide_site[] = { TT_EV_USER | TT_TAG_FSAME, 0, 0x80, 0x80, 0x80, 0x80, 0x10,
                                         0, 0, 0 };
    const struct {
        const char *what;
        struct tt_chunk_header h;
        const uint8_t *body;
    } cases[] = {
        { "goes back in time", { .type = TT_CHUNK_EVENTS, .first_seq = 2, .count = 1,
                                 .body_len = sizeof later_enter, .base_time = 50 }, later_enter },
        { "OUT on a user event", { .type = TT_CHUNK_EVENTS, .first_seq = 2, .count = 1,
                                   .body_len = sizeof user_out, .base_time = 200 }, user_out },
        { "OUT on an enter event", { .type = TT_CHUNK_EVENTS, .first_seq = 2, .count = 1,
                                     .body_len = sizeof enter_out, .base_time = 200 }, enter_out },
        { "a site id over 32 bits", { .type = TT_CHUNK_EVENTS, .first_seq = 2, .count = 1,
                                      .body_len = sizeof wide_site, .base_time = 200 }, wide_site },
        { "an empty chunk", { .type = TT_CHUNK_EVENTS, .first_seq = 2 }, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t file[1024];
        uint64_t bad_off;
        size_t n = partial_with(file, 1000000000u, &cases[i].h, cases[i].body, &bad_off);
        tt_source src;
        tt_recover_result res;
        tt_error_info err;
        tt_source_memory(&src, file, n);
        const char *path = tt_test_path("refused.tt");
        cr_assert_eq(tt_recover(&src, path, &res, &err), TT_OK, "%s: %s", cases[i].what,
                     err.message);
        cr_assert_eq(res.events, 2, "%s: kept %llu events", cases[i].what,
                     (unsigned long long)res.events);
        cr_assert_eq(res.damage_offset, bad_off, "%s: damage at %llu, not %llu (%s)",
                     cases[i].what, (unsigned long long)res.damage_offset,
                     (unsigned long long)bad_off, res.message);
        tt_source out;
        tt_verify_result vr;
        cr_assert_eq(tt_source_file(&out, path, &err), TT_OK, "%s", err.message);
        int rc = tt_verify(&out, NULL, &vr);
        tt_source_close(&out);
        cr_assert_eq(rc, TT_OK, "%s: the recovered file fails verify: %s", cases[i].what,
                     vr.message);
        cr_assert_eq(vr.events, 2, "%s", cases[i].what);
        cr_assert_eq(remove(path), 0);
    }
}

Test(recover, refuses_a_manifest_without_a_time_base)
{
    static const uint8_t later_enter[] = { TT_EV_ENTER | TT_TAG_FSAME, 0 };
    struct tt_chunk_header h = { .type = TT_CHUNK_EVENTS, .first_seq = 2, .count = 1,
                                 .body_len = sizeof later_enter, .base_time = 200 };
    uint8_t file[1024];
    uint64_t bad_off;
    size_t n = partial_with(file, 0, &h, later_enter, &bad_off);
    tt_source src;
    tt_recover_result res;
    tt_error_info err;
    tt_source_memory(&src, file, n);
    const char *path = tt_test_path("no-time-base.tt");
    cr_assert_eq(tt_recover(&src, path, &res, &err), TT_E_CORRUPT, "%s", err.message);
    cr_assert_eq(err.offset, TT_M_TPS);
    cr_assert(strstr(err.message, "<memory>") != NULL, "%s", err.message);
}

/* An empty body as the very first chunk: no buffer exists yet (UBSan caught the arithmetic on a
 * NULL one). */
Test(recover, survives_an_empty_first_chunk)
{
    uint8_t file[TT_MANIFEST_SIZE + TT_CHUNK_HEADER];
    tt_manifest pm;
    memset(&pm, 0, sizeof pm);
    pm.version = TT_FORMAT_VERSION;
    pm.block_size = 4096;
    pm.ticks_per_sec = 1000000000u;
    pm.data_offset = pm.data_end = pm.file_size = TT_MANIFEST_SIZE;
    tt_manifest_encode(file, &pm);
    struct tt_chunk_header h = { .type = TT_CHUNK_EVENTS };
    tt_chunk_header_encode(file + TT_MANIFEST_SIZE, &h, "");
    tt_source src;
    tt_recover_result res;
    tt_error_info err;
    tt_source_memory(&src, file, sizeof file);
    const char *path = tt_test_path("empty-first.tt");
    cr_assert_eq(tt_recover(&src, path, &res, &err), TT_OK, "%s", err.message);
    cr_assert_eq(res.events, 0);
    cr_assert_eq(res.damage_offset, TT_MANIFEST_SIZE, "%s", res.message);
    tt_source out;
    tt_verify_result vr;
    cr_assert_eq(tt_source_file(&out, path, &err), TT_OK, "%s", err.message);
    int rc = tt_verify(&out, NULL, &vr);
    tt_source_close(&out);
    cr_assert_eq(rc, TT_OK, "%s", vr.message);
}

/* An output path whose temporary name ("<out>.<pid>.partial") does not fit is refused with the
 * reason, not written under a name cut short. */
Test(recover, refuses_an_output_path_too_long_for_its_temporary_name)
{
    uint8_t *img;
    size_t len;
    record_splits(&img, &len);
    tt_manifest m;
    tt_error_info err;
    cr_assert_eq(tt_manifest_decode(img, len, &m, &err), TT_OK, "%s", err.message);
    tt_manifest pm = m;
    pm.flags = m.flags & TT_MF_TSC; /* not finalized: a partial file */
    tt_manifest_encode(img, &pm);
    static char out[4300];
    size_t n = (size_t)snprintf(out, sizeof out, "%s/", tt_test_dir);
    memset(out + n, 'x', 4190 - n);
    out[4190] = '\0';
    tt_source src;
    tt_recover_result res;
    tt_source_memory(&src, img, len);
    int rc = tt_recover(&src, out, &res, &err);
    cr_assert_eq(rc, TT_E_INVAL, "tt_recover: %s: %s", tt_error_name(rc), err.message);
    cr_assert(strstr(err.message, "too long"), "%s", err.message);
    free(img);
}
