/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the index tables built after the recording (tt_index_build, index.h) from a
 * whole, untrusted trace file.
 *
 * Input: as fuzz-verify's, a control byte, then a trace file whose checksums are recomputed
 * (fz_fixup; the low four bits of the control byte keep one of them as it is). The file is
 * handed to tt_index_build as a memory source, and the trace it writes goes to a temporary
 * directory.
 *
 * Properties:
 *  - on success, the file written passes tt_verify, and tt_verify_ex with TT_VERIFY_FRAMES (its
 *    frame rows checked against the events); it has an index (index_offset ≠ 0), and the event
 *    count and events checksum of the source's manifest (the event chunks are copied, not
 *    changed); tt_index_build says how many events and bytes it wrote;
 *  - building the tables again from that file gives the same file, byte for byte;
 *  - on a refusal there is a message naming the source, and the directory holds no file: neither
 *    the output nor its "<out>.<pid>.partial"; and tt_verify refuses the source too, unless the
 *    refusal is a checkpoint row that names another event than its own (which tt_verify leaves
 *    to the row's use, FORMAT.md §15.3) or a bound of the build (TT_E_LIMIT).
 * Then every reader path reads the file written and agrees on it (fz_read_all).
 *
 * Memory: a file of at most -max_len bytes can open at most that many frames and name at most
 * that many functions, far below tt_index_build's own bounds (2^20 frames, 2^22 functions).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tinytrace/index.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *dir; /* fz_tmpdir's */

/* The whole file at @path, malloc'd, of exactly its size (ASan sees a read past the end). */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    FZ_ASSERT(fp != NULL, "the built file %s cannot be opened: %s", path, strerror(errno));
    struct stat st;
    FZ_ASSERT(fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode), "%s is no regular file", path);
    *n = (size_t)st.st_size;
    uint8_t *img = malloc(*n ? *n : 1);
    if (!img)
        abort();
    FZ_ASSERT(fread(img, 1, *n, fp) == *n && fgetc(fp) == EOF, "%s: a short read", path);
    fclose(fp);
    return img;
}

/* The names in the directory (none expected), for a refusal's message. */
static int leftovers(char *names, size_t cap)
{
    DIR *d = opendir(dir);
    FZ_ASSERT(d != NULL, "opendir %s: %s", dir, strerror(errno));
    int n = 0;
    size_t len = 0;
    names[0] = '\0';
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        int k = snprintf(names + len, cap - len, "%s ", e->d_name);
        if (k > 0 && (size_t)k < cap - len)
            len += (size_t)k;
    }
    closedir(d);
    return n;
}

static void clear_dir(void)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[4400];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* tt_index_build of @f (@n bytes, the source @name) into @path; on a refusal, checks the message,
 * that nothing was left, and that tt_verify refuses the source too. */
static int build(const uint8_t *f, size_t n, const char *name, const char *path,
                 tt_index_build_result *res, tt_error_info *err)
{
    tt_source src;
    tt_source_memory(&src, f, n);
    snprintf(src.name, sizeof src.name, "%s", name);
    memset(err, 0, sizeof *err);
    int rc = tt_index_build(&src, path, 0, res, err);
    if (rc != TT_OK) {
        char names[1024];
        FZ_ASSERT(err->message[0] != '\0', "index build failed (%d) without a message", rc);
        FZ_ASSERT(strstr(err->message, name) != NULL || rc == TT_E_IO || rc == TT_E_NOMEM,
                  "a refusal (%d) without the file's name: \"%s\"", rc, err->message);
        int left = leftovers(names, sizeof names);
        FZ_ASSERT(left == 0, "index build failed (%d: %s) and left %s", rc, err->message, names);
        /* what a reader accepts is built, but for what tt_verify leaves to the checkpoint
         * table's use (a row naming another event than its own, more checkpoint and restore
         * events than rows: FORMAT.md §15.3, §14.10) and the bounds of the build (TT_E_LIMIT) */
        tt_verify_result vr;
        tt_reader_limits lim;
        tt_reader_limits_default(&lim);
        if (tt_verify(&src, &lim, &vr) == TT_OK)
            FZ_ASSERT(rc == TT_E_LIMIT || rc == TT_E_NOMEM ||
                          (rc == TT_E_CORRUPT && strstr(err->message, "checkpoint table at")),
                      "tt_verify accepts what the index build refuses (%d): %s", rc,
                      err->message);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    dir = fz_tmpdir("index");
    unsigned ctl = data[0];
    data++;
    size--;
    uint8_t *f = fz_copy(data, size);
    fz_fixup(f, size, ctl & 0x0Fu);
    fz_dump(f, size);

    char out1[4200], out2[4200];
    snprintf(out1, sizeof out1, "%s/indexed.tt", dir);
    snprintf(out2, sizeof out2, "%s/again.tt", dir);
    tt_index_build_result res, res2;
    tt_error_info err;
    int rc = build(f, size, "source.tt", out1, &res, &err);
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("TT_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "index-build: %s (%llu events, %llu frames) %s\n", tt_error_name(rc),
                (unsigned long long)res.events, (unsigned long long)res.frames,
                rc == TT_OK ? "" : err.message);
    if (rc == TT_OK) {
        size_t n1;
        uint8_t *img = slurp(out1, &n1);
        tt_manifest in;
        tt_error_info merr;
        FZ_ASSERT(tt_manifest_decode(f, size, &in, &merr) == TT_OK,
                  "built from a source whose manifest does not decode: %s", merr.message);
        FZ_ASSERT(res.bytes_in == size && res.bytes_out == n1,
                  "the build says %llu bytes in, %llu out; they were %zu, %zu",
                  (unsigned long long)res.bytes_in, (unsigned long long)res.bytes_out, size, n1);

        tt_source src;
        tt_reader_limits lim;
        tt_verify_result vr;
        tt_reader_limits_default(&lim);
        tt_source_memory(&src, img, n1);
        FZ_ASSERT(tt_verify(&src, &lim, &vr) == TT_OK, "the built file fails verify (%s): %s",
                  tt_verify_status_name(vr.status), vr.message);
        FZ_ASSERT(tt_verify_ex(&src, &lim, TT_VERIFY_FRAMES, &vr) == TT_OK,
                  "the built file's frames fail verify (%s): %s",
                  tt_verify_status_name(vr.status), vr.message);
        tt_manifest out;
        FZ_ASSERT(tt_manifest_decode(img, n1, &out, &merr) == TT_OK, "%s", merr.message);
        FZ_ASSERT(out.index_offset != 0, "the built file has no index");
        FZ_ASSERT(out.event_count == in.event_count && res.events == in.event_count &&
                      vr.events == in.event_count,
                  "%llu events in the source's manifest, %llu in the built one's, the build "
                  "says %llu, verify counts %llu", (unsigned long long)in.event_count,
                  (unsigned long long)out.event_count, (unsigned long long)res.events,
                  (unsigned long long)vr.events);
        FZ_ASSERT(out.events_checksum == in.events_checksum && out.chunk_count == in.chunk_count,
                  "events checksum %016llx of %llu chunks, the source's %016llx of %llu",
                  (unsigned long long)out.events_checksum, (unsigned long long)out.chunk_count,
                  (unsigned long long)in.events_checksum, (unsigned long long)in.chunk_count);

        /* the tables of a file that has them, built again: the same file */
        rc = build(img, n1, "indexed.tt", out2, &res2, &err);
        FZ_ASSERT(rc == TT_OK, "building the built file's tables again fails (%d): %s", rc,
                  err.message);
        size_t n2;
        uint8_t *again = slurp(out2, &n2);
        size_t at = 0;
        while (at < n1 && at < n2 && img[at] == again[at])
            at++;
        FZ_ASSERT(n1 == n2 && at == n1, "built again: %zu bytes, not %zu; the first difference "
                  "at offset %zu", n2, n1, at);
        free(again);
        unlink(out2);
        unlink(out1);

        fz_read_all(img, n1);
        free(img);
    }
    clear_dir(); /* a finding above aborts; anything left here was checked */
    free(f);
    return 0;
}
