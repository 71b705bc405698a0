/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the manifest parser (tt_manifest_decode) and the probe (tt_reader_probe).
 *
 * Input: a control byte, then the manifest's 512 bytes (an input shorter than that is a short
 * file, which the probe must refuse by name). Unless the control byte says otherwise, the
 * manifest checksum is recomputed and the source is as long as the manifest's file_size says, so
 * every rule behind the checksum is reached. Properties checked:
 *  - a manifest that decodes re-encodes to the same fields (encode and decode are inverses);
 *  - the probe agrees with the decoder, refuses what it must (never closed, incomplete), and its
 *    capacity is the sum it documents and within the caller's limits;
 *  - every refusal carries a message that names the source.
 *
 * Control byte: bit 0 keep the stored checksum; bit 1 the source is as long as the input, not
 * file_size.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct man_src {
    const uint8_t *man;
};

/* The manifest at offset 0, zero bytes after it: the probe reads nothing past the manifest. */
static int man_read(void *ctx, uint64_t off, void *dst, size_t len, size_t *got)
{
    const struct man_src *ms = ctx;
    memset(dst, 0, len);
    if (off < TT_MANIFEST_SIZE) {
        size_t n = TT_MANIFEST_SIZE - off < len ? (size_t)(TT_MANIFEST_SIZE - off) : len;
        memcpy(dst, ms->man + off, n);
    }
    *got = len;
    return TT_OK;
}

static void probe(const tt_source *src, const tt_reader_limits *lim, tt_cursor_mode mode,
                  int decoded, const tt_manifest *dm)
{
    tt_manifest m;
    tt_reader_capacity cap;
    tt_error_info err;
    memset(&err, 0, sizeof err);
    int rc = tt_reader_probe(src, lim, mode, &m, &cap, &err);
    if (rc != TT_OK) {
        FZ_ASSERT(err.code == rc && err.message[0] != '\0', "probe failed (%d) without a message",
                  rc);
        FZ_ASSERT(strstr(err.message, src->name) != NULL, "probe message does not name %s: %s",
                  src->name, err.message);
        return;
    }
    FZ_ASSERT(decoded == TT_OK, "the probe accepted a manifest the decoder refused (%d)", decoded);
    FZ_ASSERT(memcmp(&m, dm, sizeof m) == 0, "probe and decoder disagree on the manifest");
    FZ_ASSERT((m.flags & TT_MF_FINALIZED) && !(m.flags & TT_MF_INCOMPLETE),
              "the probe accepted a file with flags 0x%x", m.flags);
    uint32_t want = mode == TT_CURSORS_PER_THREAD ? m.thread_count : 1;
    FZ_ASSERT(cap.cursors == want, "%u cursors, expected %u", cap.cursors, want);
    FZ_ASSERT(cap.total == cap.fixed + cap.per_cursor * cap.cursors && cap.total <= lim->max_total &&
                  cap.per_cursor >= m.largest_chunk + m.largest_split &&
                  cap.fixed >= m.objects_length,
              "capacity %llu = %llu + %llu * %u does not hold the manifest",
              (unsigned long long)cap.total, (unsigned long long)cap.fixed,
              (unsigned long long)cap.per_cursor, cap.cursors);
    FZ_ASSERT(m.largest_chunk <= lim->max_chunk && m.largest_event <= lim->max_event &&
                  m.thread_count <= lim->max_threads && m.object_count <= lim->max_objects,
              "the probe let a manifest past the limits");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned ctl = data[0];
    data++;
    size--;
    tt_reader_limits lim;
    fz_limits(&lim);
    if (size < TT_MANIFEST_SIZE) {
        /* a short file: refused as truncated or as another format, never read past its end */
        uint8_t *copy = fz_copy(data, size);
        tt_source src;
        tt_source_memory(&src, copy, size);
        probe(&src, &lim, TT_CURSORS_SEQUENTIAL, -1, NULL);
        free(copy);
        return 0;
    }
    uint8_t man[TT_MANIFEST_SIZE];
    memcpy(man, data, sizeof man);
    if (!(ctl & 1))
        tt_put64(man + TT_M_CHECKSUM, tt_hash64(man, TT_M_CHECKSUM, 0));
    uint64_t srcsize = (ctl & 2) ? size : tt_get64(man + TT_M_FSIZE);
    if (srcsize < TT_MANIFEST_SIZE)
        srcsize = TT_MANIFEST_SIZE;

    tt_manifest m;
    tt_error_info err;
    memset(&m, 0, sizeof m);
    int rc = tt_manifest_decode(man, srcsize, &m, &err);
    if (rc == TT_OK) {
        /* encode(decode(x)) decodes to the same manifest; the caller string's last byte is the
         * one field encode normalizes (always 0) */
        uint8_t out[TT_MANIFEST_SIZE];
        tt_manifest m2;
        tt_manifest_encode(out, &m);
        FZ_ASSERT(tt_manifest_decode(out, srcsize, &m2, &err) == TT_OK, "re-encoded manifest "
                  "refused: %s", err.message);
        tt_manifest m1 = m;
        m1.caller[TT_CALLER_MAX - 1] = 0;
        FZ_ASSERT(memcmp(&m1, &m2, sizeof m1) == 0, "a manifest changed on re-encoding");
        if (man[TT_M_CALLER + TT_CALLER_MAX - 1] == 0)
            FZ_ASSERT(memcmp(out, man, TT_MANIFEST_SIZE) == 0, "re-encoding changed the bytes");
    } else {
        FZ_ASSERT(err.code == rc && err.message[0] != '\0', "decode failed (%d) without a message",
                  rc);
    }

    struct man_src ms = { man };
    tt_source src;
    tt_source_callback(&src, man_read, &ms, srcsize);
    probe(&src, &lim, TT_CURSORS_SEQUENTIAL, rc, &m);
    probe(&src, &lim, TT_CURSORS_PER_THREAD, rc, &m);
    tt_reader_limits dl;
    tt_reader_limits_default(&dl);
    probe(&src, &dl, TT_CURSORS_PER_THREAD, rc, &m);
    return 0;
}
