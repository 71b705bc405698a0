/* SPDX-License-Identifier: MIT */
/* Shared parts of the libFuzzer targets (docs/FUZZING.md).
 *
 * Every checksum of the format gates the bytes behind it, so a target that fed raw bytes to the
 * reader would die at the manifest checksum. The targets instead read their input as (part of) a
 * trace, recompute the checksums the format defines — chunk checksums, the events checksum, the
 * manifest checksum — and only then hand the bytes to the library. A control byte at the start of
 * each input can turn a fix-up off, so the checksum checks themselves are fuzzed too.
 *
 * Readers run with small limits (fz_limits), so a hostile file can never make a target use more
 * than a few tens of MiB.
 */
#ifndef TT_FUZZ_H
#define TT_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cursor.h"

/* Aborts (a finding) when @cond is false: a property the library promises did not hold. */
#define FZ_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                       \
    } while (0)
_Noreturn void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Small reader limits: 1 MiB chunks, events and tables, 64 threads, 16 MiB of storage. */
void fz_limits(tt_reader_limits *lim);

/* A trace image under construction: the manifest is kept decoded and encoded by fz_img_finish. */
struct fz_image {
    uint8_t *buf;
    size_t len, cap;
    tt_manifest m;
};

/* An empty finalized trace: manifest space, data area empty, no tables yet. */
void fz_img_init(struct fz_image *img);
void fz_img_append(struct fz_image *img, const void *data, size_t len);
/* Appends a chunk with a correct checksum (@bad_sum: a wrong one); returns its offset. Event
 * chunks extend data_end and the events checksum, every chunk largest_chunk. */
uint64_t fz_img_chunk(struct fz_image *img, const struct tt_chunk_header *h, const void *body,
                      bool bad_sum);
/* Sets file_size and block_count and writes the manifest with its checksum. */
void fz_img_finish(struct fz_image *img);
void fz_img_free(struct fz_image *img);

/* Fix-ups of a whole file image in place (the verify and recover targets). The event chunks are
 * walked from data_offset to data_end, or to the end of the file when the manifest is not
 * finalized. */
#define FZ_KEEP_CHUNK_SUMS 0x01u  /* leave every chunk checksum as it is */
#define FZ_KEEP_EVSUM 0x02u       /* leave the manifest's events checksum */
#define FZ_KEEP_MANIFEST_SUM 0x04u
#define FZ_KEEP_SIZE 0x08u        /* leave file_size and block_count */
#define FZ_SMALL_THREADS 0x10u    /* event chunks' thread ids modulo 8 (recover: a large id makes
                                   * a table of that many rows, and the run crawls) */
void fz_fixup(uint8_t *f, size_t n, unsigned keep);

/* A malloc'd copy of @n bytes of @data of exactly that size, so that ASan sees any read past
 * the end; aborts when out of memory. */
uint8_t *fz_copy(const uint8_t *data, size_t n);

/* A folder of the process's own in $TMPDIR (or /tmp), "tinytrace-fuzz-@tag-XXXXXX", made at
 * the first call and removed at exit (it must be empty then); aborts when it cannot be made.
 * For targets that write files. */
const char *fz_tmpdir(const char *tag);

/* With TT_FUZZ_DUMP=PATH in the environment, writes the trace a target built (after its
 * fix-ups) to PATH, for `tinytrace dump` and friends when a finding is studied. */
void fz_dump(const uint8_t *f, size_t n);

/* Reads the image every way the library offers and checks that the ways agree:
 *  - tt_verify (the skimming pass) against a sequential tt_reader_next/peek pass: the same
 *    verdict, the same error code, the same event count;
 *  - a per-thread pass (every cursor, round robin) against the sequential one: the same events,
 *    thread by thread, whenever the sequential pass accepted the file;
 *  - replay's enter/exit fast path (tt_reader_match_fn_) on a second per-thread reader in lockstep
 *    with the first: it must agree with tt_reader_next whenever it claims a match;
 *  - the table accessors over every id.
 * Aborts on a disagreement or a crash; returns 0. */
int fz_read_all(const uint8_t *img, size_t n);

/* Little-endian helpers over a possibly short input. */
struct fz_in {
    const uint8_t *p;
    size_t left;
};
uint8_t fz_u8(struct fz_in *in);
uint32_t fz_u32(struct fz_in *in);
uint64_t fz_u64(struct fz_in *in);
/* Up to @want bytes; *@got says how many there were. */
const uint8_t *fz_bytes(struct fz_in *in, size_t want, size_t *got);

#endif
