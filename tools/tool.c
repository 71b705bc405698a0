/* SPDX-License-Identifier: MIT */
/* tinytrace — helpers the verbs of the tool share: messages, exit codes, option values, opening a
 * trace through the bounded reader, and text and JSON output of untrusted bytes.
 *
 * Everything printed from a trace file is treated as hostile: names are escaped for the terminal
 * and for JSON, and no size is taken from the file except through the library's probe.
 */
#include "tool.h"
#include "progress.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char tool_exit_codes_help[] =
    "Exit codes:\n"
    "  0  success; replay: the program matched the recording\n"
    "  1  replay: the program diverged from the recording; diff: the traces differ\n"
    "  2  usage error: bad option, operand or TINYTRACE_* setting (nothing was run)\n"
    "  3  trace corrupt, truncated or beyond the reader limits (verify failed, read error\n"
    "     in the middle of a dump; replay checks the whole trace before it runs anything)\n"
    "  4  replay: the program is not the build that was recorded (nothing was run)\n"
    "  5  replay: the program ended before the recording did\n"
    "  6  I/O or system error (file not found, out of memory, the program or the runtime\n"
    "     cannot be run; record: no trace was written; replay: the program left no report)\n"
    "  7  the trace is marked incomplete (a write error stopped the recording)\n"
    "  8  replay: everything compared matched, but processes ran live that were not compared\n"
    "     (children the runtime does not follow, execs it cannot; the verdict names the first)\n"
    "record exits with the program's own status (128+N when signal N killed it), and with\n"
    "2, 3, 6 or 7 only for its own errors.\n";

/* ---- messages ---- */

/* Formats @fmt and prints it escaped (tool_print_text): a message names paths, names and
 * arguments from traces and from the file system, which must not reach the terminal raw. A
 * message longer than the buffer is formatted again in memory of its size. */
static void vput_escaped(FILE *f, const char *fmt, va_list ap)
{
    char buf[1024], *p = buf;
    va_list again;
    int n;

    va_copy(again, ap);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n >= (int)sizeof buf && (p = malloc((size_t)n + 1)) != NULL)
        n = vsnprintf(p, (size_t)n + 1, fmt, again);
    else if (p == NULL)
        p = buf, n = (int)sizeof buf - 1; /* out of memory: what fitted */
    va_end(again);
    if (n > 0)
        tool_print_text(f, p, (size_t)n);
    if (p != buf)
        free(p);
}

_Thread_local bool tool_quiet;

void tool_error(const char *fmt, ...)
{
    va_list ap;
    if (tool_quiet)
        return;
    fflush(stdout); /* keep the order of stdout and stderr when both go to one place */
    fputs("tinytrace: ", stderr);
    va_start(ap, fmt);
    vput_escaped(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int tool_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vput_escaped(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    return TOOL_EXIT_USAGE;
}

int tool_usage_hint(const char *prog)
{
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return TOOL_EXIT_USAGE;
}

int tool_exit_for_error(int code)
{
    switch (code) {
    case TT_OK:
        return TOOL_EXIT_OK;
    case TT_E_FORMAT:
    case TT_E_VERSION:
    case TT_E_TRUNCATED:
    case TT_E_CHECKSUM:
    case TT_E_COUNTS:
    case TT_E_CORRUPT:
    case TT_E_EXHAUSTED:
    case TT_E_CAPACITY: /* the file asks for more than the limits: unreadable as it stands */
        return TOOL_EXIT_CORRUPT;
    case TT_E_INCOMPLETE:
        return TOOL_EXIT_INCOMPLETE;
    default: /* TT_E_IO, TT_E_NOMEM, and anything that is the tool's or the system's fault */
        return TOOL_EXIT_SYSTEM;
    }
}

/* Codes for which the offset in the file is what the reader of the message needs. Capacity and
 * incomplete are not: their offset is that of a manifest field, and the message names the limit
 * or the write error. */
static int is_format_error(int code)
{
    return code != TT_E_CAPACITY && tool_exit_for_error(code) == TOOL_EXIT_CORRUPT;
}

void tool_error_info_init(tt_error_info *err)
{
    memset(err, 0, sizeof *err);
    err->offset = UINT64_MAX;
}

const char *tool_strip_path(const char *msg, const char *path)
{
    /* The library names its source in front of a message: the full path, or the first 255
     * bytes of it that fit in tt_source.name. */
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    n = strnlen(path, sizeof ((tt_source *)0)->name - 1);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

int tool_report(const char *path, const char *what, int code, const tt_error_info *err)
{
    const char *msg = tt_strerror(code);
    size_t msg_len;
    int has_message = err != NULL && err->message[0] != '\0';

    if (tool_quiet)
        return tool_exit_for_error(code);
    if (has_message)
        msg = tool_strip_path(err->message, path);
    msg_len = strnlen(msg, sizeof err->message);
    fflush(stdout);
    fputs("tinytrace: ", stderr);
    tool_print_text(stderr, path, strlen(path));
    fputs(": ", stderr);
    if (what != NULL)
        fprintf(stderr, "%s: ", what);
    tool_print_text(stderr, msg, msg_len);
    if (err != NULL && err->offset != UINT64_MAX && is_format_error(code) &&
        strstr(msg, "offset") == NULL)
        fprintf(stderr, " (offset %" PRIu64 ")", err->offset);
    if (err != NULL && err->sys_errno != 0 && code == TT_E_IO && !has_message)
        fprintf(stderr, " (%s)", strerror(err->sys_errno));
    fprintf(stderr, " [%s]\n", tt_error_name(code));
    if (code == TT_E_CAPACITY && strstr(msg, "max_total") != NULL)
        fputs("tinytrace: a larger limit can be given with --max-memory MB\n", stderr);
    return tool_exit_for_error(code);
}

int tool_finish_stdout(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        fprintf(stderr, "tinytrace: writing the output failed: %s\n", strerror(e));
        return TOOL_EXIT_SYSTEM;
    }
    return rc;
}

/* ---- output files ---- */

/* What a file that is not a regular one is, for a message. */
static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

int tool_output_check(const char *prog, const char *path, const char *const *inputs, int force)
{
    struct stat out, in;
    size_t n = strlen(path);

    if (n == 0)
        return tool_usage_error(prog, "an output file needs a name");
    if (path[n - 1] == '/')
        return tool_usage_error(prog, "cannot write to '%s': it names a directory, not a file",
                                path);
    if (lstat(path, &out) != 0) {
        if (errno == ENOENT)
            return TOOL_EXIT_OK; /* to be created */
        return tool_usage_error(prog, "cannot write to '%s': %s", path, strerror(errno));
    }
    if (!S_ISREG(out.st_mode) && !S_ISLNK(out.st_mode))
        return tool_usage_error(prog, "cannot write to '%s': it is %s, not a regular file",
                                path, file_kind(out.st_mode));
    for (size_t i = 0; inputs != NULL && inputs[i] != NULL; i++)
        if (stat(inputs[i], &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            return tool_usage_error(prog, "cannot write to '%s': it is the input '%s' (the same "
                                    "file)", path, inputs[i]);
    if (!force && S_ISLNK(out.st_mode))
        return tool_usage_error(prog, "'%s' exists (a symbolic link): give --force to replace "
                                "the link (never the file it points to)", path);
    if (!force)
        return tool_usage_error(prog, "'%s' exists: give --force to replace it", path);
    return TOOL_EXIT_OK;
}

int tool_output_open(tool_output *o, const char *path, mode_t mode)
{
    size_t n = strlen(path) + 32;

    o->path = path;
    o->fd = -1;
    o->tmp = malloc(n);
    if (o->tmp == NULL) {
        tool_error("%s: out of memory", path);
        return TOOL_EXIT_SYSTEM;
    }
    snprintf(o->tmp, n, "%s.%ld.tmp", path, (long)getpid());
    /* O_EXCL: a file, a symbolic link or anything else already there is refused, not reused */
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (o->fd < 0) {
        tool_error("%s: cannot create: %s", o->tmp, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        return TOOL_EXIT_SYSTEM;
    }
    return TOOL_EXIT_OK;
}

/* Renames o->tmp to o->path unless something is at o->path. 0, or the errno (EEXIST: there
 * is). */
static int rename_noreplace(const tool_output *o)
{
    if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return errno;
    /* a file system without RENAME_NOREPLACE: a hard link fails on an existing name too */
    if (link(o->tmp, o->path) == 0) {
        unlink(o->tmp);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP)
        return errno;
    /* nor hard links (FAT, some FUSE ones): o->path was checked just before */
    return rename(o->tmp, o->path) == 0 ? 0 : errno;
}

int tool_output_commit(const char *prog, tool_output *o, const char *const *inputs, int force)
{
    int rc, e;

    if (o->fd >= 0 && close(o->fd) != 0) {
        e = errno;
        o->fd = -1;
        tool_error("%s: write error: %s", o->tmp, strerror(e));
        tool_output_discard(o);
        return TOOL_EXIT_SYSTEM;
    }
    o->fd = -1;
    /* what is at o->path may have changed while the output was written */
    if ((rc = tool_output_check(prog, o->path, inputs, force)) != TOOL_EXIT_OK) {
        tool_output_discard(o);
        return rc;
    }
    e = force ? (rename(o->tmp, o->path) == 0 ? 0 : errno) : rename_noreplace(o);
    if (e == EEXIST) {
        tool_output_discard(o);
        return tool_usage_error(prog, "'%s' exists: give --force to replace it", o->path);
    }
    if (e != 0) {
        tool_error("%s: cannot rename to %s: %s", o->tmp, o->path, strerror(e));
        tool_output_discard(o);
        return TOOL_EXIT_SYSTEM;
    }
    free(o->tmp);
    o->tmp = NULL;
    return TOOL_EXIT_OK;
}

void tool_output_discard(tool_output *o)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp != NULL)
        unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
}

/* ---- option values ---- */

int tool_parse_u64(const char *prog, const char *option, const char *s, uint64_t min,
                   uint64_t max, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;
    if (s[0] < '0' || s[0] > '9')
        return tool_usage_error(prog, "%s expects a number, not '%s'", option, s);
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return tool_usage_error(prog, "%s expects a number, not '%s'", option, s);
    if (v < min || v > max)
        return tool_usage_error(prog, "%s must be between %" PRIu64 " and %" PRIu64 ", not '%s'",
                                option, min, max, s);
    *out = (uint64_t)v;
    return TOOL_EXIT_OK;
}

void tool_limits(tt_reader_limits *lim, uint64_t max_memory_mb)
{
    tt_reader_limits_default(lim);
    if (max_memory_mb != 0)
        lim->max_total = max_memory_mb << 20; /* the parser bounds MB to UINT64_MAX >> 20 */
}

/* ---- opening a trace ---- */

/* Reader storage from this size on is mapped (tool_trace_open). */
#define MAPPED_STORAGE ((size_t)64 << 20)

static int map_files;

void tool_trace_map_files(int on)
{
    map_files = on;
}

void tool_trace_drop_pages(tool_trace *t)
{
    if (t->file_map != NULL)
        (void)madvise(t->file_map, t->file_map_len, MADV_DONTNEED);
}

/* The file at @path, mapped read-only, as @t's source: 1 when it is, 0 when it is to be read
 * the ordinary way (not a regular file, empty, cannot be opened: tt_source_file says why). */
static int map_source(tool_trace *t, const char *path)
{
    struct stat st;
    void *p = MAP_FAILED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return 0;
    t->file_map = p;
    t->file_map_len = (size_t)st.st_size;
    tt_source_memory(&t->src, p, (size_t)st.st_size);
    return 1;
}

int tool_trace_probe(tool_trace *t, const char *path, const tt_reader_limits *lim,
                     tt_cursor_mode mode)
{
    tt_error_info err;
    int rc;

    memset(t, 0, sizeof *t);
    t->path = path;
    t->lim = *lim;
    t->mode = mode;
    t->src.fd = -1;

    tool_error_info_init(&err);
    rc = map_files && map_source(t, path) ? TT_OK : tt_source_file(&t->src, path, &err);
    if (rc != TT_OK)
        return tool_report(path, "cannot open", rc, &err);
    t->src_open = 1;

    tool_error_info_init(&err);
    rc = tt_reader_probe(&t->src, &t->lim, mode, &t->m, &t->cap, &err);
    if (rc != TT_OK)
        return tool_report(path, NULL, rc, &err);
    return TOOL_EXIT_OK;
}

int tool_trace_open(tool_trace *t)
{
    tt_error_info err;
    size_t len;
    int rc;

    /* The capacity is the probe's: computed from the manifest and bounded by our limits. The
     * reader wants 16-byte aligned storage; aligned_alloc wants a multiple of the alignment. */
    if (t->cap.total == 0 || t->cap.total > SIZE_MAX - 15) {
        tool_error("%s: the reader asks for %" PRIu64 " bytes of storage", t->path, t->cap.total);
        return TOOL_EXIT_SYSTEM;
    }
    len = ((size_t)t->cap.total + 15) & ~(size_t)15;
    if (len >= MAPPED_STORAGE) {
        /* Room the reader may never touch: per-thread cursors get the largest chunk of the
         * file each (the thread table, 48 bytes a thread, is one), and a cursor touches only
         * what its own chunks take. Mapped, not reserved: the memory used is what is touched
         * (20 000 threads: 19 GB asked for, under 100 MB used), and a system that overcommits
         * nothing refuses it here. */
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        t->mem = p != MAP_FAILED ? p : NULL;
        t->mapped = t->mem != NULL ? len : 0;
    } else {
        t->mem = aligned_alloc(16, len);
    }
    if (t->mem == NULL) {
        tool_error("%s: cannot allocate %" PRIu64 " bytes for the reader: %s", t->path,
                   t->cap.total, strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }

    tool_error_info_init(&err);
    rc = tt_reader_open(&t->src, &t->lim, t->mode, t->mem, len, &t->r, &err);
    if (rc != TT_OK) {
        t->r = NULL;
        return tool_report(t->path, NULL, rc, &err);
    }
    return TOOL_EXIT_OK;
}

void tool_trace_close(tool_trace *t)
{
    tt_index_close(t->ix); /* before the reader it reads from */
    t->ix = NULL;
    if (t->r != NULL) {
        tool_names_forget(t->r);
        tt_reader_close(t->r);
    }
    t->r = NULL;
    if (t->mapped)
        munmap(t->mem, t->mapped);
    else
        free(t->mem);
    t->mem = NULL;
    t->mapped = 0;
    if (t->src_open)
        tt_source_close(&t->src);
    t->src_open = 0;
    if (t->file_map != NULL)
        munmap(t->file_map, t->file_map_len);
    t->file_map = NULL;
}

/* ---- formatting ---- */

/* GCC and clang have a 128-bit integer; __extension__ keeps -Wpedantic quiet about it. */
__extension__ typedef unsigned __int128 tool_u128;

uint64_t tool_ticks_to_ns(uint64_t ticks, uint64_t ticks_per_sec)
{
    tool_u128 ns;
    if (ticks_per_sec == 0 || ticks_per_sec == 1000000000u)
        return ticks;
    ns = (tool_u128)ticks * 1000000000u / ticks_per_sec;
    return ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

void tool_ns_conv_init(tool_ns_conv *c, uint64_t ticks_per_sec)
{
    /* a rate of 1 GHz is the identity, and one above UINT64_MAX / 10^9 (18 GHz) would overflow
     * the remainder's product: both go the slow way (inv 0), as do 0 and 1 */
    c->tps = ticks_per_sec;
    c->inv = ticks_per_sec <= 1 || ticks_per_sec == 1000000000u ||
                     ticks_per_sec > UINT64_MAX / 1000000000u
                 ? 0
                 : UINT64_MAX / ticks_per_sec;
}

void tool_format_time(int64_t ns, char *buf, size_t cap)
{
    int64_t sec = ns / 1000000000;
    int64_t frac = ns % 1000000000;
    time_t tt;
    struct tm tm;

    if (frac < 0) { /* floor division: 1969 is before the epoch, not after it */
        frac += 1000000000;
        sec -= 1;
    }
    tt = (time_t)sec;
    if ((int64_t)tt != sec || gmtime_r(&tt, &tm) == NULL || tm.tm_year > 9999 - 1900 ||
        tm.tm_year < -1900) {
        snprintf(buf, cap, "%" PRId64 " ns since the epoch", ns);
        return;
    }
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
}

void tool_format_flags(uint32_t flags, const char *sep, char *buf, size_t cap)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {TT_MF_FINALIZED, "finalized"}, {TT_MF_INCOMPLETE, "incomplete"},
        {TT_MF_RECOVERED, "recovered"}, {TT_MF_CRASHED, "crashed"},
        {TT_MF_TSC, "tsc"},
    };
    size_t used = 0;
    uint32_t rest = flags;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if ((flags & names[i].bit) == 0)
            continue;
        rest &= ~names[i].bit;
        if (used < cap)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? sep : "",
                                     names[i].name);
    }
    if (rest != 0 && used < cap)
        used += (size_t)snprintf(buf + used, cap - used, "%s0x%" PRIx32, used ? sep : "", rest);
    if (used == 0)
        snprintf(buf, cap, "-");
}

void tool_print_hex(FILE *f, const void *data, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = data;
    char buf[128];
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        buf[n++] = digits[p[i] >> 4];
        buf[n++] = digits[p[i] & 15];
        if (n == sizeof buf) {
            fwrite(buf, 1, n, f);
            n = 0;
        }
    }
    fwrite(buf, 1, n, f);
}

/* Decimal, for the dump's millions of lines (about 25 digits each): two digits per step from a
 * table, in 32-bit parts of 8 digits. An 8-digit part is one multiplication by a fixed-point
 * reciprocal of 10^6, which leaves the first pair in the top 32 bits and the rest as a fraction;
 * each further pair is that fraction times 100 (J. E. Anhalt III's method: the constants are
 * exact for every value below 10^8, which tests/test-tool.c checks exhaustively). */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324252627282930"
                                     "31323334353637383940414243444546474849505152535455565758596061"
                                     "62636465666768697071727374757677787980818283848586878889909192"
                                     "93949596979899";

static inline void put_pair(char *o, uint32_t v) /* v < 100 */
{
    memcpy(o, digit_pairs + 2 * v, 2);
}

static inline uint64_t pair_bits(uint32_t v) /* v < 100: its two characters, in memory order */
{
    uint16_t p;
    memcpy(&p, digit_pairs + 2 * v, 2);
    return p;
}

/* The 8 digits of @v < 10^8 as the 8 bytes they take in memory (a little-endian load of them):
 * built in a register and stored once, since a load of bytes just stored one pair at a time
 * would wait for the stores. */
static inline uint64_t digits_8(uint32_t v)
{
    uint64_t t = ((uint64_t)v * 2251799815u >> 19) + 4; /* v / 10^6, 32.32 fixed point */
    uint64_t d = pair_bits((uint32_t)(t >> 32));
    t = (t & 0xffffffffu) * 100;
    d |= pair_bits((uint32_t)(t >> 32)) << 16;
    t = (t & 0xffffffffu) * 100;
    d |= pair_bits((uint32_t)(t >> 32)) << 32;
    t = (t & 0xffffffffu) * 100;
    d |= pair_bits((uint32_t)(t >> 32)) << 48;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    d = __builtin_bswap64(d);
#endif
    return d;
}

/* @v < 10^8 as exactly 8 digits. */
static inline void fmt_8(char *dst, uint32_t v)
{
    uint64_t d = digits_8(v);
    memcpy(dst, &d, 8);
}

/* @v < 10^8, without leading zeros; writes 8 bytes at @dst (the digits, then scratch). */
static inline char *fmt_small(char *dst, uint32_t v)
{
    if (v < 10) {
        *dst = (char)('0' + v);
        return dst + 1;
    }
    if (v < 100) {
        put_pair(dst, v);
        return dst + 2;
    }
    unsigned n = v < 1000 ? 3 : v < 10000 ? 4 : v < 100000 ? 5 : v < 1000000 ? 6
               : v < 10000000 ? 7 : 8;
    uint64_t d = digits_8(v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    d <<= 8 * (8 - n); /* the first 8 - n characters are the leading zeros */
#else
    d >>= 8 * (8 - n);
#endif
    memcpy(dst, &d, 8);
    return dst + n;
}

char *tool_fmt_u64(char *dst, uint64_t v)
{
    if (v < 100000000u)
        return fmt_small(dst, (uint32_t)v);
    if (v < 10000000000000000u) {
        dst = fmt_small(dst, (uint32_t)(v / 100000000u));
        fmt_8(dst, (uint32_t)(v % 100000000u));
        return dst + 8;
    }
    uint64_t rest = v % 10000000000000000u;
    dst = fmt_small(dst, (uint32_t)(v / 10000000000000000u));
    fmt_8(dst, (uint32_t)(rest / 100000000u));
    fmt_8(dst + 8, (uint32_t)(rest % 100000000u));
    return dst + 16;
}

void tool_print_u64(FILE *f, uint64_t v)
{
    char buf[20];
    fwrite(buf, 1, (size_t)(tool_fmt_u64(buf, v) - buf), f);
}

/* Length of the valid UTF-8 sequence at @s (1 to 4), or 0 when the byte at @s does not start one.
 * Overlong forms, surrogates and code points above U+10FFFF are invalid (RFC 3629). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4;
    else
        return 0;
    if (len > n)
        return 0;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* The escaped form of the character at @p (@len bytes left) into @out (at most ESC_UNIT bytes);
 * returns how many bytes of @p it takes and sets *@n to the length of @out. Printable ASCII and
 * valid UTF-8 stay as they are; C0 and C1 controls, DEL, a backslash and invalid UTF-8 become
 * \xNN (a backslash \\), so that the output names every byte and drives no terminal. */
#define ESC_UNIT 16
static size_t esc_unit(const unsigned char *p, size_t len, char *out, size_t *n)
{
    static const char digits[] = "0123456789abcdef";
    size_t k = utf8_len(p, len);
    /* C1 controls (U+0080..U+009F, C2 80..C2 9F) act on terminals like C0 ones. */
    int c1 = k == 2 && p[0] == 0xc2 && p[1] < 0xa0;
    if (k == 1 && p[0] >= 0x20 && p[0] != 0x7f && p[0] != '\\') {
        out[0] = (char)p[0];
        *n = 1;
    } else if (k == 1 && p[0] == '\\') {
        out[0] = out[1] = '\\';
        *n = 2;
    } else if (k > 1 && !c1) {
        memcpy(out, p, k);
        *n = k;
    } else {
        if (k == 0)
            k = 1;
        for (size_t j = 0; j < k; j++) {
            out[4 * j] = '\\';
            out[4 * j + 1] = 'x';
            out[4 * j + 2] = digits[p[j] >> 4];
            out[4 * j + 3] = digits[p[j] & 15];
        }
        *n = 4 * k;
    }
    return k;
}

void tool_print_text(FILE *f, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        char u[ESC_UNIT];
        size_t run = i, n;
        /* the common case, printable ASCII, goes out in one piece */
        while (run < len && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '\\')
            run++;
        if (run > i) {
            fwrite(p + i, 1, run - i, f);
            i = run;
            continue;
        }
        i += esc_unit(p + i, len - i, u, &n);
        fwrite(u, 1, n, f);
    }
}

int tool_text_is_plain(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        char u[ESC_UNIT];
        size_t n, k = esc_unit(p + i, len - i, u, &n);
        if (p[i] != '\\' && (n != k || memcmp(u, p + i, k) != 0))
            return 0;
        i += k;
    }
    return 1;
}

char *tool_esc_n(char *buf, size_t cap, const char *s, size_t len)
{
    static const char cut[] = "...";
    const unsigned char *p = (const unsigned char *)s;
    size_t i, used = 0, whole = 0, room;
    char u[ESC_UNIT];

    if (cap == 0)
        return buf;
    for (i = 0; i < len;) { /* the escaped length: does it all fit? */
        size_t n;
        i += esc_unit(p + i, len - i, u, &n);
        whole += n;
    }
    /* if not, as many whole characters as leave room for the mark of the cut */
    room = whole <= cap - 1 ? cap - 1 : cap - 1 > sizeof cut - 1 ? cap - sizeof cut : 0;
    for (i = 0; i < len;) {
        size_t n, k = esc_unit(p + i, len - i, u, &n);
        if (used + n > room)
            break;
        memcpy(buf + used, u, n);
        used += n;
        i += k;
    }
    if (i < len) {
        size_t m = cap - 1 - used < sizeof cut - 1 ? cap - 1 - used : sizeof cut - 1;
        memcpy(buf + used, cut, m);
        used += m;
    }
    buf[used] = '\0';
    return buf;
}

char *tool_esc(char *buf, size_t cap, const char *s)
{
    return tool_esc_n(buf, cap, s, strlen(s));
}

const char *tool_object_name(const tt_reader *r, uint32_t id, size_t *len)
{
    tt_object_entry o;
    if (id == 0 || tt_reader_object(r, id, &o) != TT_OK || (o.name == NULL && o.name_len != 0))
        return NULL;
    if (o.kind == TT_OBJ_FUNCTION && o.name != NULL) {
        const char *shown = tool_function_display(r, id, o.name, o.name_len, len);
        if (shown != NULL)
            return shown;
    }
    *len = o.name_len;
    return o.name != NULL ? o.name : "";
}

void tool_print_object(FILE *f, const tt_reader *r, uint32_t id)
{
    size_t len = 0;
    const char *name;
    if (id == 0) {
        fputc('-', f);
        return;
    }
    name = tool_object_name(r, id, &len);
    if (name == NULL || len == 0)
        fprintf(f, "#%" PRIu32, id);
    else
        tool_print_text(f, name, len);
}

/* ---- JSON ----
 * The writer formats into its own buffer and hands stdio one piece per line (or per 8 KiB): a
 * JSON dump is millions of short fields, and a stdio call per field costs more than the read. */

static void jflush(tool_json *j)
{
    if (j->len > 0)
        fwrite(j->buf, 1, j->len, j->f);
    j->len = 0;
}

static void jput(tool_json *j, const void *data, size_t n)
{
    if (n > sizeof j->buf - j->len) {
        jflush(j);
        if (n > sizeof j->buf) {
            fwrite(data, 1, n, j->f);
            return;
        }
    }
    memcpy(j->buf + j->len, data, n);
    j->len += n;
}

static void jputc(tool_json *j, char c)
{
    if (j->len == sizeof j->buf)
        jflush(j);
    j->buf[j->len++] = c;
}

static void jputs(tool_json *j, const char *s)
{
    jput(j, s, strlen(s));
}

void tj_init(tool_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->len = 0;
    memset(j->first, 0, sizeof j->first);
    j->first[0] = 1;
}

/* Writes the comma and the key in front of a value. */
static void tj_key(tool_json *j, const char *key)
{
    if (!j->first[j->depth])
        jputc(j, ',');
    j->first[j->depth] = 0;
    if (key != NULL) { /* keys are the tool's own ASCII words: nothing to escape */
        jputc(j, '"');
        jputs(j, key);
        jput(j, "\":", 2);
    }
}

static void tj_open(tool_json *j, const char *key, char c)
{
    tj_key(j, key);
    jputc(j, c);
    /* Deeper levels than the writer tracks never happen in the tool; stay correct anyway by
     * not going past the last slot (commas would then be the only damage). */
    if (j->depth + 1 < sizeof j->first)
        j->depth++;
    j->first[j->depth] = 1;
}

static void tj_close(tool_json *j, char c)
{
    if (j->depth > 0)
        j->depth--;
    jputc(j, c);
}

void tj_object_begin(tool_json *j, const char *key) { tj_open(j, key, '{'); }
void tj_object_end(tool_json *j) { tj_close(j, '}'); }
void tj_array_begin(tool_json *j, const char *key) { tj_open(j, key, '['); }
void tj_array_end(tool_json *j) { tj_close(j, ']'); }

static void jput_u64(tool_json *j, uint64_t v)
{
    char buf[20];
    jput(j, buf, (size_t)(tool_fmt_u64(buf, v) - buf));
}

void tj_u64(tool_json *j, const char *key, uint64_t v)
{
    tj_key(j, key);
    jput_u64(j, v);
}

void tj_number(tool_json *j, const char *key, const char *text, size_t len)
{
    tj_key(j, key);
    jput(j, text, len);
}

void tj_i64(tool_json *j, const char *key, int64_t v)
{
    tj_key(j, key);
    if (v < 0) {
        jputc(j, '-');
        jput_u64(j, (uint64_t)0 - (uint64_t)v); /* INT64_MIN too: the negation is unsigned */
    } else {
        jput_u64(j, (uint64_t)v);
    }
}

void tj_bool(tool_json *j, const char *key, int v)
{
    tj_key(j, key);
    jputs(j, v ? "true" : "false");
}

void tj_null(tool_json *j, const char *key)
{
    tj_key(j, key);
    jputs(j, "null");
}

void tj_str(tool_json *j, const char *key, const char *s)
{
    tj_strn(j, key, s, strlen(s));
}

void tj_strn(tool_json *j, const char *key, const char *s, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    tj_key(j, key);
    jputc(j, '"');
    while (i < len) {
        size_t n, run = i;
        unsigned char c;
        /* the common case, plain printable ASCII, goes out in one piece */
        while (run < len && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            jput(j, p + i, run - i);
            i = run;
            continue;
        }
        n = utf8_len(p + i, len - i);
        c = p[i];
        if (n == 0) {
            jputs(j, "\\ufffd");
            n = 1;
        } else if (n == 2 && c == 0xc2 && p[i + 1] < 0xa0) {
            /* a C1 control (U+0080..U+009F) acts on a terminal as a C0 one does: as \u00XX */
            char u[6] = {'\\', 'u', '0', '0', digits[p[i + 1] >> 4], digits[p[i + 1] & 15]};
            jput(j, u, sizeof u);
        } else if (n > 1) {
            jput(j, p + i, n);
        } else if (c == '"' || c == '\\') {
            jputc(j, '\\');
            jputc(j, (char)c);
        } else if (c == '\n') {
            jputs(j, "\\n");
        } else if (c == '\t') {
            jputs(j, "\\t");
        } else if (c == '\r') {
            jputs(j, "\\r");
        } else { /* the other control characters and DEL */
            char u[6] = {'\\', 'u', '0', '0', digits[c >> 4], digits[c & 15]};
            jput(j, u, sizeof u);
        }
        i += n;
    }
    jputc(j, '"');
}

void tj_hex(tool_json *j, const char *key, const void *data, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = data;
    tj_key(j, key);
    jputc(j, '"');
    for (size_t i = 0; i < len; i++) {
        jputc(j, digits[p[i] >> 4]);
        jputc(j, digits[p[i] & 15]);
    }
    jputc(j, '"');
}

void tj_object_name(tool_json *j, const char *key, const tt_reader *r, uint32_t id)
{
    size_t len = 0;
    const char *name;
    char buf[16];
    if (id == 0) {
        tj_null(j, key);
        return;
    }
    name = tool_object_name(r, id, &len);
    if (name == NULL || len == 0) {
        snprintf(buf, sizeof buf, "#%" PRIu32, id);
        tj_str(j, key, buf);
    } else {
        tj_strn(j, key, name, len);
    }
}

void tj_newline(tool_json *j)
{
    jputc(j, '\n');
    jflush(j);
    j->depth = 0;
    memset(j->first, 0, sizeof j->first);
    j->first[0] = 1;
}

/* ---------------------------------------------------------------- progress */

/* The verbs without a progress object of their own share this one (progress.h draws it). */
static progress shared_progress;

void tool_progress_begin(const char *what, uint64_t total)
{
    progress_begin(&shared_progress, what, total);
}

void tool_progress_update(uint64_t done)
{
    progress_update(&shared_progress, done);
}

void tool_progress_end(void)
{
    progress_end(&shared_progress);
}

int tool_parse_time_ns(const char *s, uint64_t *ns)
{
    static const struct { const char *unit; uint64_t mul; } units[] = {
        {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000},
    };
    uint64_t whole = 0, frac = 0, fdiv = 1;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return -1;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (fdiv < 1000000000) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                fdiv *= 10;
            }
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].unit) != 0)
            continue;
        uint64_t mul = units[i].mul;
        if (whole > UINT64_MAX / mul)
            return -1;
        *ns = whole * mul + frac * mul / fdiv;
        return 0;
    }
    return -1;
}

uint64_t tool_ns_to_ticks(uint64_t ns, uint64_t ticks_per_sec)
{
    tool_u128 t = ((tool_u128)ns * ticks_per_sec + 999999999u) / 1000000000u;
    return t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
}

uint64_t tool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
