/* SPDX-License-Identifier: MIT */
/* The tinytrace file format, version 5 (normative text: docs/FORMAT.md).
 *
 * A trace file is a 512-byte manifest followed by a data area of framed chunks. All integers are
 * little-endian. Varints are unsigned LEB128 of at most 10 bytes.
 *
 *   offset 0      manifest (512 bytes; its last 8 bytes are XXH3-64 of the first 504)
 *   data_offset   event chunks, in the order the swapper wrote them (one thread's chunks are in
 *                 that thread's order; threads interleave); in version 2 also frame blocks and
 *                 seek batches of the index, each right after the event chunk whose encoding
 *                 completed it
 *   data_end      table chunks: the thread table, then the object table
 *                 (version 2, indexed) the summary, then the index directory at index_offset
 *   file_size     end of file; nothing may follow
 *
 * Version 2 = version 1 + the index tables (FORMAT.md §14; tables.c writes, index.c reads):
 * per thread a frame table, one row per call in post-order (completion order): a flag byte
 * (same function / same depth / leaf / same enter chunk as the previous row, outcome, gap), then
 * only the varints that differ (function, depth, descendants and children count, enter-chunk
 * delta) and always the time (end delta or gap) and duration; a loop's repeated leaves go in
 * runs of gap and duration only; blocks of 256 rows; a seek entry for every 4096th
 * event of each thread (seq, time, chunk offset, index in chunk); per-function summary rows;
 * a directory with per-thread counts, kind counts and the offsets of every block and batch.
 * The manifest's bytes 368-383 (reserved in version 1) point to the directory; 0 = no index.
 * Version 3 adds the sync event kind (14). Version 4 adds the restore kind (15) and the
 * checkpoint table (FORMAT.md §15: one chunk of type 9 in the data area, written at close, that
 * lists every checkpoint and restore; manifest bytes 432-455 say where it is and how many rows
 * it has), from which a reader knows each event's epoch. Version 5 adds the tag kind 16, "sync
 * again": a payload-less sync event on the same object as the chunk's previous sync event, with
 * its sequence number as a signed step from that event's (FORMAT.md §5.2); it decodes as kind
 * 14. Readers accept versions 1 to 5.
 *
 * Every chunk is self-describing: a 48-byte header, then body_len bytes of body.
 *
 *    0 u32 magic "TTCK"      4 u16 type     6 u16 flags     8 u32 body_len   12 u32 thread
 *   16 u64 first_seq        24 u32 count   28 u32 cont_len 32 u64 base_time 40 u64 checksum
 *
 * checksum = XXH3_64bits_withSeed(body, body_len, seed = XXH3_64bits(header bytes 0..39)), so a
 * change to any header field or body byte is caught. A chunk can be read with one seek and one
 * read and without prior knowledge, which is what lets the intact chunks of a dead run be saved.
 *
 * An event chunk holds `count` events of one thread, starting with sequence number first_seq.
 * Its body opens with cont_len bytes that continue the payload of the thread's previous event
 * (flag CONT_IN); if its last event's payload goes on in the thread's next chunk, flag CONT_OUT.
 * Only payloads larger than a quarter of a buffer are ever split.
 *
 * An event is a tag byte (kind in bits 0-4, bit 5 "same function as the previous event in this
 * chunk" — for a chunk's first event, "function 0" — bit 6 "direction out", bit 7 zero), a
 * varint time delta from the previous event (the first from base_time), the function id as
 * varint unless bit 5 is set, and for every kind but enter and exit: varints site, arg, addr,
 * payload length, then the payload bytes. A short tag (bit 7 set) is a whole enter or exit of
 * the same function with a time delta of 0-63 in one byte.
 *
 * The recording thread never encodes: it stores fixed raw records (record/record.h) and the
 * swapper turns them into this form, so a tight enter/exit loop costs one or two bytes per event
 * on disk.
 *
 * What belongs in this header (the format layer, libtrace/format/): the byte layout and its
 * codecs, the one chunk read-and-check primitive (chunk.c), the manifest (manifest.c) and the
 * temporary-file protocol (partial.c). It knows of sources (store.h's tt_source, a public type)
 * but of no reader, writer or session.
 */
#ifndef TT_FORMAT_H
#define TT_FORMAT_H

#include <stdint.h>
#include <string.h>

#include <tinytrace/store.h>

#include "base.h"

#define TT_MAGIC "TINYTRCE"
#define TT_CHUNK_MAGIC 0x4B435454u /* "TTCK" little-endian */
#define TT_CHUNK_HEADER 48u

enum tt_chunk_type {
    TT_CHUNK_EVENTS = 1,
    TT_CHUNK_THREADS = 2,
    TT_CHUNK_OBJECTS = 3,
    /* version 2: index tables (tables.c writes them, index.c reads them) */
    TT_CHUNK_FRAMES = 4,   /* a block of one thread's frame rows, in the data area */
    TT_CHUNK_SEEK = 5,     /* a batch of seek-index entries, in the data area */
    TT_CHUNK_SUMMARY = 6,  /* per-function totals, after the object table */
    TT_CHUNK_INDEX = 7,    /* the table directory, the file's last chunk */
    TT_CHUNK_BLOCKS = 8,   /* a list of one thread's frame block offsets, in the data area */
    /* version 4 */
    TT_CHUNK_CHECKPOINTS = 9, /* the checkpoint table: every checkpoint and restore, in the
                               * data area (tables.c writes it, reader.c reads it at open) */
};
#define TT_CHUNK_TYPE_MAX 9u

#define TT_CF_CONT_IN 0x1u
#define TT_CF_CONT_OUT 0x2u
#define TT_CF_MASK 0x3u

#define TT_TAG_KIND 0x1Fu
#define TT_TAG_FSAME 0x20u
#define TT_TAG_OUT 0x40u
#define TT_TAG_RESERVED 0x80u /* in a full tag; set, the byte is a short tag instead: */
/* A short tag is a whole event in one byte: enter (bit 6 clear) or exit (bit 6 set) of the same
 * function as the previous event, with its time step (0-63) in bits 0-5. */
#define TT_TAG_SHORT 0x80u
#define TT_TAG_SHORT_EXIT 0x40u
#define TT_TAG_SHORT_STEP 0x3Fu

/* A byte's tag in its full form: kind, FSAME, OUT (never SHORT). @step gets a short tag's step;
 * for a full tag it is left alone. */
static inline uint8_t tt_tag_full(uint8_t tag, uint64_t *step)
{
    if (!(tag & TT_TAG_SHORT))
        return tag;
    *step = tag & TT_TAG_SHORT_STEP;
    return (uint8_t)(((tag & TT_TAG_SHORT_EXIT) ? TT_EV_EXIT : TT_EV_ENTER) | TT_TAG_FSAME);
}

/* The kinds a file of @version may hold: 1-13, from version 3 also 14 (sync), from version 4
 * also 15 (restore). */
static inline unsigned tt_kind_max(uint32_t version)
{
    return version >= 4 ? 15u : version >= 3 ? 14u : 13u;
}

/* Version 5's tag kind 16, "sync again" (FORMAT.md §5.2): an event of kind 14 whose object is
 * the one of the chunk's previous sync event and whose payload is empty. After the tag, dt and
 * function come site and zigzag(addr - the previous sync event's addr); nothing else. */
#define TT_TAG_SYNC_AGAIN 16u

/* The kinds a tag byte of @version may carry: the event kinds, and from version 5 also 16. */
static inline unsigned tt_tag_kind_max(uint32_t version)
{
    return version >= 5 ? TT_TAG_SYNC_AGAIN : tt_kind_max(version);
}

/* The OUT bit of a full tag: io (TT_IO_OUT) and sync (the operation took its object's turn);
 * on any other kind it is corrupt. */
static inline int tt_out_allowed(unsigned kind)
{
    return kind == 10 /* TT_EV_IO */ || kind == 14 /* TT_EV_SYNC */ || kind == TT_TAG_SYNC_AGAIN;
}

/* Zigzag: a signed step as an unsigned varint value (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...). */
static inline uint64_t tt_zigzag(uint64_t delta)
{
    return (delta << 1) ^ (0 - (delta >> 63));
}

static inline uint64_t tt_unzigzag(uint64_t v)
{
    return (v >> 1) ^ (0 - (v & 1));
}

#define TT_THREAD_ROW 48u

/* Index tables (version 2, tables.c / index.c, docs/FORMAT.md §14). */
#define TT_FRAME_BLOCK_ROWS 256u /* rows in a full frame block */
#define TT_SEEK_EVERY 4096u       /* seek entry for every seq that is a multiple of this */
#define TT_SEEK_BATCH 4096u       /* entries in a full seek chunk */
#define TT_BLOCK_LIST 4096u       /* frame blocks in a full block list chunk */
/* A frame row's flag byte (FORMAT.md §14.3): what it shares with the previous row. */
#define TT_ROW_SAME_FN 0x01u
#define TT_ROW_SAME_DEPTH 0x02u
#define TT_ROW_LEAF 0x04u
#define TT_ROW_SAME_CHUNK 0x08u
#define TT_ROW_OUTCOME_SHIFT 4
#define TT_ROW_GAP 0x40u /* the time varint is start - previous end, not end - previous end */
/* A byte with bit 7 set opens a run of n rows that repeat the previous row's function, depth and
 * enter chunk as returned leaves, each only its gap and duration varints: n = bits 0-6 (1-127)
 * up to version 3, bits 0-5 (1-63) from version 4, where bits 7 and 6 set begin a parent row. */
#define TT_ROW_RUN 0x80u
#define TT_ROW_RUN_MAX 0x3Fu    /* as written (version 4) */
#define TT_ROW_RUN_MAX_V3 0x7Fu /* as read in versions 1-3 (a full flag byte has bit 7 clear) */
/* Version 4: a parent row, 0xC0 | SAME_FN (0x20) | kids (1-31): a returned call whose kids
 * direct children are the rows just before it in its block, at its depth + 1, with the previous
 * row's enter chunk; then the function unless SAME_FN, the end delta, and the lead (its first
 * child's start - its start). Its depth, descendants and start follow from those rows. */
#define TT_ROW_PARENT 0xC0u
#define TT_ROW_PARENT_SAME_FN 0x20u
#define TT_ROW_PARENT_KIDS 0x1Fu
#define TT_NO_THREAD 0xFFFFFFFFu

/* Manifest field offsets. */
enum {
    TT_M_MAGIC = 0, TT_M_VERSION = 8, TT_M_SIZE = 12, TT_M_FLAGS = 16, TT_M_LIBVER = 20,
    TT_M_BLOCK = 24, TT_M_BIDLEN = 28, TT_M_BID = 32, TT_M_CALLER = 64,
    TT_M_EVENTS = 192, TT_M_PAYLOAD = 200, TT_M_CHUNKS = 208, TT_M_BLOCKS = 216,
    TT_M_LCHUNK = 224, TT_M_LEVENT = 232, TT_M_LSPLIT = 240, TT_M_THREADS = 248,
    TT_M_OBJECTS = 252, TT_M_DATA = 256, TT_M_DATAEND = 264, TT_M_THR_OFF = 272,
    TT_M_THR_LEN = 280, TT_M_OBJ_OFF = 288, TT_M_OBJ_LEN = 296, TT_M_FSIZE = 304,
    TT_M_TPS = 312, TT_M_TORIGIN = 320, TT_M_RTORIGIN = 328, TT_M_EVSUM = 336,
    TT_M_STALLS = 344, TT_M_STALLNS = 352, TT_M_ERRNO = 360, TT_M_PID = 364,
    TT_M_INDEX_OFF = 368, TT_M_INDEX_LEN = 376, /* version 2 */
    TT_M_REFUSED = 384, /* version 2, from 0.1.0: */ TT_M_UNTRACED = 388, TT_M_UNTRACEABLE = 392,
    TT_M_AUTH = 400, TT_M_RESERVED = 432, TT_M_CHECKSUM = 504,
    /* version 4: the checkpoint table (bytes 432-455, reserved before) */
    TT_M_CP_OFF = 432, TT_M_CP_LEN = 440, TT_M_CP_COUNT = 448, TT_M_CP_RESTORES = 452,
    TT_M_RESERVED_V4 = 456,
};

static inline void tt_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void tt_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void tt_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t tt_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t tt_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t tt_get64(const uint8_t *p)
{
    return (uint64_t)tt_get32(p) | ((uint64_t)tt_get32(p + 4) << 32);
}

static inline uint8_t *tt_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Decodes a varint from [*pp, end). Returns 0 on success, -1 if it runs past @end, is longer
 * than 10 bytes or overflows 64 bits. */
static inline int tt_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return -1;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* A decoded chunk header. */
struct tt_chunk_header {
    uint16_t type;
    uint16_t flags;
    uint32_t body_len;
    uint32_t thread;
    uint64_t first_seq;
    uint32_t count;
    uint32_t cont_len;
    uint64_t base_time;
    uint64_t checksum;
};

/* ---- a walk over an event chunk's events (chunk.c) ----
 * For passes that need each event's kind, function, time and payload length but not its
 * fields or payload (recovery, the index built after a recording): the reader's decoding rules
 * (FORMAT.md §5.2, §6), each failure a static string saying what is wrong.
 *     struct tt_walk w;  struct tt_walk_event e;
 *     why = tt_walk_begin(&w, body, h, kind_max, &pending);
 *     while (!why && w.i < h->count)  why = tt_walk_next(&w, &e, &pending);
 *     if (!why)  why = tt_walk_end(&w);
 */
struct tt_walk {
    const uint8_t *p, *end;
    const struct tt_chunk_header *h;
    unsigned kind_max;        /* the last tag kind allowed (tt_tag_kind_max) */
    uint32_t i;               /* events walked */
    uint32_t fn;              /* the previous event's function */
    uint64_t time;            /* the previous event's time */
};
struct tt_walk_event {
    unsigned kind;            /* a "sync again" (tag kind 16) is a sync event (14) */
    uint32_t fn;
    uint64_t time;
    uint64_t len;             /* payload bytes, all of them; 0 for enter, exit, sync again */
    bool split;               /* its payload goes on in the thread's next chunk */
};
/* Checks @h's continuation against the thread's @pending payload bytes and passes over it
 * (*@pending less what it held). NULL, or what is wrong. */
const char *tt_walk_begin(struct tt_walk *w, const uint8_t *body, const struct tt_chunk_header *h,
                          unsigned kind_max, uint64_t *pending);
/* The next event; for the chunk's last, split (@e->split), *@pending is what its thread's next
 * chunk owes. NULL, or what is wrong. */
const char *tt_walk_next(struct tt_walk *w, struct tt_walk_event *e, uint64_t *pending);
/* After the last event: NULL, or what is wrong (bytes after it). */
const char *tt_walk_end(const struct tt_walk *w);

/* ---- chunks (chunk.c) ---- */

/* The encoded header of a chunk with @body (h->body_len bytes), its checksum included: the one
 * emit primitive, used by the writer, the table builder and recovery. */
void tt_chunk_header_encode(uint8_t out[TT_CHUNK_HEADER], const struct tt_chunk_header *h,
                            const void *body);
/* Decodes and checks the magic and the fields that need no context. Returns 0 or a message. */
const char *tt_chunk_header_decode(const uint8_t in[TT_CHUNK_HEADER], struct tt_chunk_header *h);
uint64_t tt_chunk_checksum(const uint8_t header[TT_CHUNK_HEADER], const void *body, size_t len);

/* Reads @len bytes of @src at @off. TT_E_TRUNCATED when they are not all in the file, TT_E_IO
 * when the read fails; the message names the source, @what and the offset. */
int tt_src_read(const tt_source *src, uint64_t off, void *dst, size_t len, const char *what,
                tt_error_info *err);

/* The read-and-check primitive. A chunk (@what in messages: "a chunk", "a frame block", ...)
 * sits at @off, and the whole of it, header and body, must lie before @area_end.
 *  - tt_chunk_read_header reads the header into @raw and checks it (tt_chunk_header_check).
 *  - tt_chunk_header_check checks header bytes the caller read itself: decoded without error,
 *    of type @type (0: any; the caller decides), and a body that ends inside the area.
 *  - tt_chunk_read_body reads the body into @dst (h->body_len bytes of room) and checks the
 *    checksum (tt_chunk_body_check, for a body the caller read itself).
 * TT_E_CORRUPT, TT_E_CHECKSUM, TT_E_TRUNCATED or TT_E_IO, with the offset of the field at fault. */
int tt_chunk_read_header(const tt_source *src, uint64_t off, uint64_t area_end, uint16_t type,
                         const char *what, struct tt_chunk_header *h,
                         uint8_t raw[TT_CHUNK_HEADER], tt_error_info *err);
int tt_chunk_header_check(const tt_source *src, const uint8_t raw[TT_CHUNK_HEADER], uint64_t off,
                          uint64_t area_end, uint16_t type, const char *what,
                          struct tt_chunk_header *h, tt_error_info *err);
int tt_chunk_read_body(const tt_source *src, uint64_t off, const struct tt_chunk_header *h,
                       const uint8_t raw[TT_CHUNK_HEADER], void *dst, const char *what,
                       tt_error_info *err);
int tt_chunk_body_check(const tt_source *src, const uint8_t raw[TT_CHUNK_HEADER], uint64_t off,
                        const struct tt_chunk_header *h, const void *body, const char *what,
                        tt_error_info *err);

/* ---- the manifest and the thread table (manifest.c) ---- */

void tt_manifest_encode(uint8_t out[TT_MANIFEST_SIZE], const tt_manifest *m);
/* Decodes and checks magic, version, size, checksum and internal consistency. */
int tt_manifest_decode(const uint8_t in[TT_MANIFEST_SIZE], uint64_t source_size, tt_manifest *m,
                       tt_error_info *err);

/* Thread table rows. */
void tt_thread_row_encode(uint8_t out[TT_THREAD_ROW], const tt_thread_entry *e);
void tt_thread_row_decode(const uint8_t in[TT_THREAD_ROW], tt_thread_entry *e);

/* ---- the temporary file (partial.c) ----
 * A trace is written as "<file>.<pid>.partial" and renamed to <file> when it is finished, so a
 * reader never sees half a file under the final name, and the file of a run that died keeps a
 * name that says whose it was. The public half (tt_partial_*: naming, parsing, liveness) is in
 * store.h; this half creates one. */

/* Creates @temp exclusively (O_EXCL | O_NOFOLLOW: never an existing file or a symlink), mode
 * 0600, for writing, and takes the recording's lock on it (held until the last descriptor of
 * the open file description is closed). Returns the fd, or -1 with errno set. */
int tt_partial_create(const char *temp);
/* Makes one of the empty files in the folder TT_SPARES_DIR (store.h) beside @temp into @temp,
 * as tt_partial_create would make it: empty, 0600, ours, opened for writing and locked. Returns
 * the fd, or -1 (no folder, no spare left: the caller creates the file). `tinytrace record`
 * keeps such a folder in FILE.procs for the tree's processes: on some file systems creating a
 * file costs more than the rest of a short process's session (ext4 without a journal: 0.4-0.5
 * ms, a scan past the inodes deleted lately), and renaming one does not. */
int tt_partial_take(const char *temp);
/* Takes the recording's lock on the file of @fd, for @fd's open file description. Returns 0
 * (taken, or the file system has no locks), or the errno: EAGAIN when another open file
 * description of the file holds it. */
int tt_partial_lock(int fd);
/* Opens @temp again for writing (never creating it, never through a symlink) after the writer
 * lost its descriptor, when it is still the file created (@dev, @ino: its st_dev and st_ino).
 * Returns the fd, or -1 with errno set (ESTALE: the name is another file now). The caller takes
 * the lock (tt_partial_lock). */
int tt_partial_reopen(const char *temp, uint64_t dev, uint64_t ino);
/* Whether some open file holds the recording's lock on the file of @fd (any open mode). */
bool tt_partial_locked(int fd);

#endif
