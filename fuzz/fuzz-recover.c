/* SPDX-License-Identifier: MIT */
/* libFuzzer target: recovery (tt_recover) of the partial file of a run that died.
 *
 * Input: a control byte, then a partial trace file: a provisional manifest and the chunks after
 * it, the last one possibly cut. The chunk checksums of the chunks walked from offset 512 to the
 * end of the file, and the manifest checksum, are recomputed first (control bits as in fuzz.h:
 * bit 0 keeps the chunk checksums, bit 2 the manifest checksum; unless bit 3 is set, thread ids
 * are taken modulo 8, as a large one makes recover write a thread table of that many rows and
 * the run crawl), so the walk, the stream checks
 * and the rebuilt tables of recover.c see hostile but well-checksummed chunks.
 *
 * Property: whatever recover writes is a valid trace — tt_verify accepts it and finds the events
 * recover says it saved — and every reader path agrees on it (fz_read_all).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *dir; /* fz_tmpdir's */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    dir = fz_tmpdir("recover");
    unsigned ctl = data[0];
    data++;
    size--;
    uint8_t *f = fz_copy(data, size);
    unsigned keep = (ctl & 0x05u) | FZ_KEEP_SIZE | FZ_KEEP_EVSUM;
    if (!(ctl & 0x08u))
        keep |= FZ_SMALL_THREADS;
    fz_fixup(f, size, keep);
    fz_dump(f, size);

    char path[4200];
    snprintf(path, sizeof path, "%s/recovered.tt", dir);
    tt_source src;
    tt_recover_result res;
    tt_error_info err;
    memset(&err, 0, sizeof err);
    tt_source_memory(&src, f, size);
    int rc = tt_recover(&src, path, &res, &err);
    if (rc != TT_OK) {
        FZ_ASSERT(err.message[0] != '\0', "recover failed (%d) without a message", rc);
        FZ_ASSERT(access(path, F_OK) != 0, "recover failed (%d) and left %s", rc, path);
    } else {
        FILE *fp = fopen(path, "rb");
        FZ_ASSERT(fp != NULL, "recover succeeded without a file: %s", strerror(errno));
        uint8_t *img = malloc(res.bytes_out ? res.bytes_out : 1);
        if (!img)
            abort();
        size_t got = fread(img, 1, res.bytes_out, fp);
        FZ_ASSERT(got == res.bytes_out && fgetc(fp) == EOF, "recover wrote %zu bytes, says %llu",
                  got, (unsigned long long)res.bytes_out);
        fclose(fp);
        unlink(path);
        tt_source rs;
        tt_verify_result vr;
        tt_reader_limits lim;
        tt_reader_limits_default(&lim);
        tt_source_memory(&rs, img, got);
        FZ_ASSERT(tt_verify(&rs, &lim, &vr) == TT_OK, "the recovered file fails verify: %s",
                  vr.message);
        FZ_ASSERT(vr.events == res.events && vr.chunks == res.chunks,
                  "recover saved %llu events in %llu chunks, verify finds %llu in %llu",
                  (unsigned long long)res.events, (unsigned long long)res.chunks,
                  (unsigned long long)vr.events, (unsigned long long)vr.chunks);
        fz_read_all(img, got);
        free(img);
    }
    free(f);
    return 0;
}
