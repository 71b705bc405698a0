/* SPDX-License-Identifier: MIT */
/* A replay session refused at open frees what it took (found by the fuzz-replay target,
 * docs/FUZZING.md): the recording's names are interned before the duplicate among them is found. */
#include "common.h"

#include "harness.h"
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

TestSuite(replay_open);

/* A recording with two function names of the same length, then the second renamed to the first:
 * a duplicate (kind, name) in the object table, with every checksum right. */
static void record_duplicate_names(uint8_t **img, size_t *len)
{
    tt_memory_sink sink;
    tt_session *s;
    tt_error_info err = { 0 };
    cr_assert_eq(tt_test_open_record_mem(&sink, &s, &err), TT_OK, "%s", err.message);
    uint32_t a, b;
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "alpha-1", &a), TT_OK);
    cr_assert_eq(tt_intern(s, TT_OBJ_FUNCTION, "alpha-2", &b), TT_OK);
    cr_assert_eq(tt_enter(s, a), TT_OK);
    cr_assert_eq(tt_exit(s, a), TT_OK);
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    uint8_t *f = sink.data;
    tt_manifest m;
    cr_assert_eq(tt_manifest_decode(f, sink.len, &m, &err), TT_OK, "%s", err.message);
    uint8_t *body = f + m.objects_offset + TT_CHUNK_HEADER;
    size_t body_len = m.objects_length - TT_CHUNK_HEADER;
    uint8_t *second = memmem(body, body_len, "alpha-2", 7);
    cr_assert_not_null(second);
    second[6] = '1';
    tt_put64(f + m.objects_offset + 40, tt_chunk_checksum(f + m.objects_offset, body, body_len));
    *img = f;
    *len = sink.len;
}

Test(replay_open, refuses_a_duplicate_name_and_frees_what_it_interned)
{
    uint8_t *img;
    size_t len;
    record_duplicate_names(&img, &len);
    tt_source src;
    tt_session *s = NULL;
    tt_error_info err = { 0 };
    /* warm up: the first opens allocate what stays for the process (a stdio buffer, thread
     * keys); afterwards every refused open must give back all it took */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(tt_test_open_replay_mem(&src, img, len, &s, &err), TT_E_CORRUPT, "%s",
                     err.message);
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < 64; i++) {
        int rc = tt_test_open_replay_mem(&src, img, len, &s, &err);
        cr_assert_eq(rc, TT_E_CORRUPT, "%s: %s", tt_error_name(rc), err.message);
        cr_assert(strstr(err.message, "duplicate") != NULL, "%s", err.message);
    }
    struct mallinfo2 after = mallinfo2();
    /* 64 leaked intern tables would be some 400 KiB; under a sanitizer mallinfo2 says nothing
     * and LeakSanitizer checks instead */
    cr_assert_eq(after.uordblks, before.uordblks, "%zu bytes still allocated after 64 refused "
                 "opens", after.uordblks - before.uordblks);
    free(img);
}
