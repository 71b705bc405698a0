/* SPDX-License-Identifier: MIT */
/* tinytrace — the command-line tool: what the verbs share.
 *
 * The tool is one file per verb (tools/cmd-<verb>.c); tools/tinytrace.c holds the verb table and
 * dispatches; tools/tool.c holds the helpers below; tools/opts.c the prologue every verb shares
 * (opts.h: options, operands, opening the trace) and tools/merge.c the recorded-order merge of
 * per-thread cursors (merge.h). Every verb uses the public API only (the tt_* functions of
 * <tinytrace/tinytrace.h>). The one private header of the library the tool may include is
 * libtrace/instrument/protocol.h, the contract between the runtime and record/replay (names of
 * environment variables, the runtime's exit status, the caller string, the report's strings):
 * it holds names and numbers, no code, and both sides must agree on them.
 *
 * A verb is `int cmd_<verb>(int argc, char **argv)`: argv[0] is "tinytrace <verb>" (so getopt's
 * own messages name the verb), the options and operands follow. It returns one of the exit codes
 * below and has printed every message itself.
 *
 * Reading a trace follows the bounded-reader protocol of store.h: probe the manifest, allocate
 * exactly the probed capacity, open the reader inside it. Every size comes from the library's
 * probe, so a hostile file can make the tool refuse, never overflow.
 */
#ifndef TINYTRACE_TOOL_H
#define TINYTRACE_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <tinytrace/tinytrace.h>

/* Exit codes. Scripts and CI jobs depend on these numbers: never renumber one, only add.
 * The same table is printed by `tinytrace help` (tools/tinytrace.c).
 *
 *   code  name                    meaning
 *   0     TOOL_EXIT_OK            success; replay: the program matched the recording
 *   1     TOOL_EXIT_DIVERGED      replay: the program diverged from the recording (the first
 *                                 divergence, or with --keep-going at least one); diff: the
 *                                 traces differ
 *   2     TOOL_EXIT_USAGE         bad command line (unknown verb or option, missing operand, a
 *                                 bad option value or TINYTRACE_* setting); nothing was run
 *   3     TOOL_EXIT_CORRUPT       trace corrupt, truncated or unreadable within the limits
 *                                 (verify failed, a read error in the middle of a dump; replay
 *                                 checks the whole trace before it runs anything)
 *   4     TOOL_EXIT_BUILD         replay: the program is not the build that was recorded (its
 *                                 GNU build-id differs); nothing was run
 *   5     TOOL_EXIT_EARLY_END     replay: the program ended before the recording did
 *   6     TOOL_EXIT_SYSTEM        I/O or system error (file not found, out of memory, EPIPE, the
 *                                 program or the runtime library cannot be found or run, record:
 *                                 no trace was written, replay: no report was written)
 *   7     TOOL_EXIT_INCOMPLETE    the manifest marks the trace incomplete (TT_MF_INCOMPLETE)
 *   8     TOOL_EXIT_PARTIAL       replay: everything compared matched, but processes ran live
 *                                 that were not compared (children the runtime does not
 *                                 follow, execs it cannot): the verdict names the first
 *
 * `record` exits with the recorded program's own status (128 + N when signal N killed it, as a
 * shell does), so that it can be run until the program fails; only its own failures use the
 * codes above (2 before the program ran; 3, 6 or 7 when no usable trace came out).
 */
enum tool_exit {
    TOOL_EXIT_OK = 0,
    TOOL_EXIT_DIVERGED = 1,
    TOOL_EXIT_USAGE = 2,
    TOOL_EXIT_CORRUPT = 3,
    TOOL_EXIT_BUILD = 4,
    TOOL_EXIT_EARLY_END = 5,
    TOOL_EXIT_SYSTEM = 6,
    TOOL_EXIT_INCOMPLETE = 7,
    TOOL_EXIT_PARTIAL = 8,
};

/* The text of the table above, for `tinytrace help` and the verbs' --help. */
extern const char tool_exit_codes_help[];

/* ---- verbs ---- */
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_hunt(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_tree(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* ---- messages ---- */

/* Set on a thread that works in the background or on what need not be said (the tree's scan,
 * which lists an unreadable trace as such): tool_error and tool_report print nothing there,
 * and tool_report still returns its exit code. Other threads print as ever. */
extern _Thread_local bool tool_quiet;

/* Prints "tinytrace: " and the formatted message to stderr, with a newline. The whole formatted
 * message is escaped as tool_print_text escapes (a path, a name or an argument in it cannot
 * drive the terminal), so @fmt holds no newline and its arguments are never escaped before. */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "tinytrace VERB: <msg>" and "Try 'tinytrace VERB --help'." to stderr and returns
 * TOOL_EXIT_USAGE. @prog is the verb's argv[0] ("tinytrace VERB"). <msg> is escaped as
 * tool_error's is. */
int tool_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "Try 'tinytrace VERB --help'." after getopt's own message; returns TOOL_EXIT_USAGE. */
int tool_usage_hint(const char *prog);

/* The exit code for a tt_error returned while reading a trace. */
int tool_exit_for_error(int code);

/* Reports a failed library call on @path: "tinytrace: PATH: WHAT: message (offset O)" on stderr,
 * with the offset for format problems, and returns tool_exit_for_error(code). @what may be NULL. */
int tool_report(const char *path, const char *what, int code, const tt_error_info *err);

/* @msg without the "PATH: " the library puts in front of messages about a source. */
const char *tool_strip_path(const char *msg, const char *path);

/* Prepares @err before a library call: no message, no offset. */
void tool_error_info_init(tt_error_info *err);

/* Flushes stdout; on a write error reports it and returns TOOL_EXIT_SYSTEM, else @rc. */
int tool_finish_stdout(int rc);

/* ---- output files ----
 * A verb that writes a file never clobbers one: it checks the destination before it starts,
 * writes the whole output under a temporary name beside it, and checks again just before the
 * rename. export -o and recover do; the check is the one for record -o (with the program among
 * the inputs) and replay --report too, which write through the library and the runtime:
 *
 *     const char *const inputs[] = {trace_path, NULL};
 *     tool_output out;
 *     if ((rc = tool_output_check(prog, path, inputs, force)) != TOOL_EXIT_OK)
 *         return rc;                                  // refused, reported
 *     if ((rc = tool_output_open(&out, path, 0644)) != TOOL_EXIT_OK)
 *         return rc;
 *     ...write out.fd...; on a failure: tool_output_discard(&out);
 *     rc = tool_output_commit(prog, &out, inputs, force);
 */

/* Whether @path may become an output file of @prog (the verb's argv[0]). Returns TOOL_EXIT_OK,
 * or TOOL_EXIT_USAGE after printing a usage error that names @path. @path is looked at with
 * lstat, so a symbolic link there is never followed. Refused:
 *   - an empty @path, or one ending in '/';
 *   - a @path that is neither a regular file nor a symbolic link (a directory, a FIFO, a
 *     character or block device, a socket), even with @force: writing into it is not writing a
 *     file, and renaming over it would replace the device node or the pipe;
 *   - a @path that is one of @inputs (a NULL-terminated list; NULL: none), that is, whose
 *     st_dev and st_ino are those of stat(input) (which follows links, as opening the input
 *     does), even with @force; the message names both; an input that does not exist is
 *     skipped;
 *   - a @path that exists (a regular file, or a symbolic link to anything or nothing) while
 *     @force is 0: "exists: give --force to replace it";
 *   - a @path lstat cannot look at for another reason than ENOENT (EACCES, ENOTDIR, ELOOP,
 *     ENAMETOOLONG), with that reason.
 * A @path that does not exist passes. Not checked here: its directory (a missing or read-only
 * one shows when tool_output_open creates the temporary file, as an I/O error). */
int tool_output_check(const char *prog, const char *path, const char *const *inputs, int force);

/* A whole output file, written under a temporary name in the same directory. */
typedef struct tool_output {
    const char *path; /* the final name (the caller's string) */
    char *tmp;        /* "<path>.<pid>.tmp" (allocated); NULL once committed or discarded */
    int fd;           /* open for writing on tmp; -1 once closed */
} tool_output;

/* Creates the temporary file of @path with O_CREAT | O_EXCL | O_NOFOLLOW and @mode (less the
 * umask): nothing that is already there is reused. Returns TOOL_EXIT_OK, or TOOL_EXIT_SYSTEM
 * after reporting the failure (a missing or unwritable directory). */
int tool_output_open(tool_output *o, const char *path, mode_t mode);

/* Makes the complete temporary file the output: closes o->fd if it is still open (a failed
 * close is a write error), runs tool_output_check again (what is at @path may have changed
 * while the output was written), then renames. Without @force the rename never replaces
 * anything (renameat2 RENAME_NOREPLACE; link and unlink where the file system lacks it), so a
 * file that appears after the check is not clobbered either. With @force a regular file or a
 * symbolic link at @path is replaced: the link itself, never its target. On any failure the
 * temporary file is removed; returns TOOL_EXIT_OK, TOOL_EXIT_USAGE (refused, reported) or
 * TOOL_EXIT_SYSTEM (reported). */
int tool_output_commit(const char *prog, tool_output *o, const char *const *inputs, int force);

/* Closes and removes the temporary file: the output is abandoned. Safe after a commit, after
 * a failed open, and twice. */
void tool_output_discard(tool_output *o);

/* ---- option values ---- */

/* Parses an unsigned decimal @s into [@min, @max]. On failure prints a usage error naming
 * @option and returns TOOL_EXIT_USAGE; returns TOOL_EXIT_OK on success. */
int tool_parse_u64(const char *prog, const char *option, const char *s, uint64_t min,
                   uint64_t max, uint64_t *out);

/* The reader limits of the tool: tt_reader_limits_default(), with max_total replaced by
 * @max_memory_mb MiB when it is nonzero (--max-memory). */
void tool_limits(tt_reader_limits *lim, uint64_t max_memory_mb);

/* ---- opening a trace ---- */

typedef struct tool_trace {
    const char *path;
    tt_source src;
    int src_open;
    tt_reader_limits lim;
    tt_cursor_mode mode;
    tt_manifest m;
    tt_reader_capacity cap;
    void *mem;
    size_t mapped;  /* mem is an anonymous mapping of this many bytes; 0: from malloc */
    tt_reader *r;
    tt_index *ix; /* the index tables once opened (tool_trace_start, or the verb); closed here */
    void *file_map;  /* tool_trace_map_files: the whole file, mapped read-only; else NULL */
    size_t file_map_len;
} tool_trace;

/* From now on tool_trace_probe maps the trace file and reads it as memory
 * (tt_source_memory): a verb that reads a large part of it in small pieces from all over
 * (report's frame blocks, last to first) takes page faults instead of a system call per piece.
 * A file that shrinks while it is mapped ends the tool with SIGBUS, so only verbs that need
 * the speed use it. */
void tool_trace_map_files(int on);
/* Lets the kernel take back the pages of @t's mapped file read so far (they stay in the page
 * cache; the next touch maps them again), so that a verb that reads it all keeps a bounded
 * resident size. Nothing when the file is not mapped. */
void tool_trace_drop_pages(tool_trace *t);

/* Opens @path as a source and probes its manifest with @lim and @mode (t->m, t->cap). Reports
 * every failure itself and returns its exit code; TOOL_EXIT_OK on success. Call tool_trace_close
 * in every case. */
int tool_trace_probe(tool_trace *t, const char *path, const tt_reader_limits *lim,
                     tt_cursor_mode mode);

/* After a successful probe: allocates t->cap.total bytes and opens the reader in them (reads the
 * thread and object tables). Storage of 64 MiB or more is an anonymous mapping without swap
 * reservation: the reader asks for the largest chunk per cursor, and with many threads most of
 * it is never touched. Reports failures and returns their exit code. */
int tool_trace_open(tool_trace *t);

/* Closes the index tables and the reader, frees the reader's storage, closes the source. Safe on
 * a partly opened trace. */
void tool_trace_close(tool_trace *t);

/* ---- progress ----
 * One process-wide progress line (progress.h: drawn only when stderr is a terminal, at most
 * every 250 ms or TINYTRACE_PROGRESS_MS), for verbs that need no more than one:
 *     tool_progress_begin("reading events", total);  ... tool_progress_update(done); ...
 *     tool_progress_end();   // erases the line
 * @total 0 = unknown (no percentage). Cheap enough to call once per event. */
void tool_progress_begin(const char *what, uint64_t total);
void tool_progress_update(uint64_t done);
void tool_progress_end(void);

/* Parses a time since session open: a number with a unit, "ns", "us", "ms" or "s"
 * ("1.5ms", "250us", "20s"), into nanoseconds. Returns 0, or -1 when @s is not one. */
int tool_parse_time_ns(const char *s, uint64_t *ns);
/* Nanoseconds since session open in ticks of a trace with @ticks_per_sec (rounded up, so the
 * first tick at or after @ns), saturating. */
uint64_t tool_ns_to_ticks(uint64_t ns, uint64_t ticks_per_sec);
/* CLOCK_MONOTONIC, nanoseconds: for how long something took. */
uint64_t tool_now_ns(void);

/* ---- formatting ---- */

/* @ticks of a trace with @ticks_per_sec in nanoseconds, without overflow in between; saturates at
 * UINT64_MAX. A zero rate (no clock recorded) is taken as nanoseconds. */
uint64_t tool_ticks_to_ns(uint64_t ticks, uint64_t ticks_per_sec);

/* The same conversion, exact to the nanosecond, for a loop over many events: no 128-bit division
 * per call (one cost a dump line 5% of its time), but two multiplications by a reciprocal of the
 * rate that tool_ns_conv_init computes once. */
typedef struct {
    uint64_t tps; /* ticks per second, as given */
    uint64_t inv; /* floor((2^64 - 1) / tps); 0: tool_ticks_to_ns does the work */
} tool_ns_conv;
void tool_ns_conv_init(tool_ns_conv *c, uint64_t ticks_per_sec);

/* floor(@n / @c->tps) into *@q and the remainder returned: the reciprocal's quotient is at most
 * two below the true one, never above it. */
static inline uint64_t tool_ns_conv_divmod_(const tool_ns_conv *c, uint64_t n, uint64_t *q)
{
    __extension__ unsigned __int128 p = (unsigned __int128)n * c->inv;
    uint64_t qq = (uint64_t)(p >> 64), r = n - qq * c->tps;
    while (r >= c->tps) {
        qq++;
        r -= c->tps;
    }
    *q = qq;
    return r;
}

static inline uint64_t tool_ns_conv_ns(const tool_ns_conv *c, uint64_t ticks)
{
    uint64_t sec, frac, r;
    if (c->inv == 0)
        return tool_ticks_to_ns(ticks, c->tps);
    r = tool_ns_conv_divmod_(c, ticks, &sec);
    if (sec > UINT64_MAX / 1000000000u - 1)
        return tool_ticks_to_ns(ticks, c->tps); /* near saturation: the exact slow path */
    /* r < tps <= UINT64_MAX / 10^9 (tool_ns_conv_init): r * 10^9 does not overflow */
    tool_ns_conv_divmod_(c, r * 1000000000u, &frac);
    return sec * 1000000000u + frac;
}

/* Writes @ns since the Unix epoch as ISO-8601 UTC with nanoseconds ("2026-11-30T21:57:03.
 * 123456789Z") into @buf; falls back to the number when the date is out of range. */
void tool_format_time(int64_t ns, char *buf, size_t cap);

/* Writes the names of the TT_MF_* bits of @flags, separated by @sep, into @buf ("-" for none);
 * unknown bits as one hex number. */
void tool_format_flags(uint32_t flags, const char *sep, char *buf, size_t cap);

/* Lower-case hex of @len bytes. */
void tool_print_hex(FILE *f, const void *data, size_t len);

/* @v in decimal; the dump prints millions of numbers, and printf is the slow way. */
void tool_print_u64(FILE *f, uint64_t v);
/* @v in decimal at @dst (at most 20 digits, no NUL); returns the end. @dst must have room for
 * 20 bytes whatever @v is: the bytes after the end may be overwritten. */
char *tool_fmt_u64(char *dst, uint64_t v);

/* Text output of untrusted bytes: printable text and valid UTF-8 as is; control characters
 * (C0, DEL and C1), backslash and invalid UTF-8 as \xNN (a backslash as \\), so a hostile name
 * cannot drive the terminal. Every name, path, argument and message from a trace or from the
 * file system reaches the terminal through this, tool_esc or tool_error. */
void tool_print_text(FILE *f, const char *s, size_t len);

/* The same escaping into @buf (@cap bytes, NUL-terminated), for a message built with printf:
 * tool_esc(buf, sizeof buf, path). A text whose escaped form does not fit ends in "..." (never
 * inside an escape or a UTF-8 sequence). Returns @buf. Thread-safe. */
char *tool_esc(char *buf, size_t cap, const char *s);
char *tool_esc_n(char *buf, size_t cap, const char *s, size_t len);
/* 1 when tool_print_text prints @s as it is, a backslash aside (no control character, no
 * invalid UTF-8), else 0. */
int tool_text_is_plain(const char *s, size_t len);
/* Room for an escaped path of PATH_MAX bytes that is cut only when it is hostile. */
#define TOOL_ESC_PATH 4608

/* The name of object @id in @r (not NUL-terminated, *len set), or NULL when the table has no such
 * object. */
const char *tool_object_name(const tt_reader *r, uint32_t id, size_t *len);

/* Prints object @id of @r for text output: its name, "-" for 0, "#id" when unknown. */
void tool_print_object(FILE *f, const tt_reader *r, uint32_t id);

/* ---- names as shown (names.c) ----
 * A function's name as the tool shows it: demangled (C++), unless tool_names_demangle(0)
 * (--no-demangle). tool_object_name gives it for every function object, so every verb shows
 * it; the text stays valid until tool_names_forget(@r) (tool_trace_close). */
void tool_names_demangle(int on);
int tool_names_demangling(void);
/* The shown name of function @id of @r whose recorded name is @name (@len bytes), or NULL when
 * it is shown as recorded. */
const char *tool_function_display(const tt_reader *r, uint32_t id, const char *name, size_t len,
                                  size_t *out_len);
/* @name (@len bytes; "lib.so!" kept in front) demangled, malloc'ed, or NULL when it is not a
 * mangled C++ name. */
char *tool_demangle(const char *name, size_t len);
/* The id of the function named @name: as recorded, else as shown, else as shown without its
 * parameter list; 0 when none. */
uint32_t tool_find_function(const tt_reader *r, const char *name);
/* Prints @n bytes of text @s as tool_print_text does, with every mangled C++ name in it (a
 * word starting "_Z") demangled, unless --no-demangle: a message of the runtime (the replay
 * report) names functions as they were recorded. */
void tool_print_names(FILE *f, const char *s, size_t n);
/* "file:line" of function @id of @r, from the recorded program's debug information (found as
 * debuginfo.c says), or NULL; valid as tool_object_name's names. */
const char *tool_function_location(const tt_reader *r, uint32_t id);
/* replay: the program at @path (build-id @build_id, @len bytes) is the one the runtime's report
 * names functions of: tool_print_names names its offsets ("prog+0x119c@...") by their symbols,
 * and tool_names_program_location gives "file:line" of a name as recorded (0, or -1). */
void tool_names_set_program(const char *path, const uint8_t *build_id, size_t len);
int tool_names_program_location(const char *name, size_t len, char *buf, size_t cap);
/* Frees what names.c keeps for @r. */
void tool_names_forget(const tt_reader *r);

/* ---- JSON output ----
 * A small writer for one-line JSON values: it places the commas, escapes strings (C0 and C1
 * control characters and DEL as \uXXXX, so that none reaches a terminal raw; invalid UTF-8 as
 * U+FFFD, so the output is always valid JSON). Every key
 * argument is NULL inside an array and a key string inside an object. Output is buffered in the
 * writer and reaches @f at the latest at tj_newline, which ends every value. */
typedef struct tool_json {
    FILE *f;
    unsigned depth;
    unsigned char first[32];  /* per nesting level: nothing written yet at this level */
    size_t len;               /* bytes in buf */
    char buf[8192];
} tool_json;

void tj_init(tool_json *j, FILE *f);
void tj_object_begin(tool_json *j, const char *key);
void tj_object_end(tool_json *j);
void tj_array_begin(tool_json *j, const char *key);
void tj_array_end(tool_json *j);
void tj_u64(tool_json *j, const char *key, uint64_t v);
void tj_i64(tool_json *j, const char *key, int64_t v);
void tj_bool(tool_json *j, const char *key, int v);
void tj_null(tool_json *j, const char *key);
void tj_str(tool_json *j, const char *key, const char *s);
void tj_strn(tool_json *j, const char *key, const char *s, size_t len);
void tj_hex(tool_json *j, const char *key, const void *data, size_t len);
/* A number the caller formatted (@text, @len bytes: digits, a point, a sign; not checked). */
void tj_number(tool_json *j, const char *key, const char *text, size_t len);
/* Object @id of @r: its name, null for 0, "#id" when unknown. */
void tj_object_name(tool_json *j, const char *key, const tt_reader *r, uint32_t id);
/* Ends a top-level value with a newline. */
void tj_newline(tool_json *j);

/* ---- JSON input (json-read.c) ----
 * A strict reader for small documents (the replay report): the whole text is parsed into a tree
 * of values in one array; strings are decoded and NUL-terminated. Pointers stay valid until
 * tool_json_free. */
typedef enum tool_jtype {
    TOOL_J_NULL,
    TOOL_J_BOOL,
    TOOL_J_NUMBER,
    TOOL_J_STRING,
    TOOL_J_ARRAY,
    TOOL_J_OBJECT,
} tool_jtype;

typedef struct tool_jvalue {
    tool_jtype type;
    int boolean;
    const char *key;      /* a member of an object: its key (decoded), else NULL */
    size_t key_len;
    const char *str;      /* string: decoded bytes; number: its text; both NUL-terminated */
    size_t len;
    uint32_t child, next; /* indexes of the first child and the next sibling; 0: none */
} tool_jvalue;

typedef struct tool_jdoc {
    tool_jvalue *v;
    uint32_t n, cap;
    char *text;
} tool_jdoc;

/* Parses @len bytes of @src. Returns 0, or -1 with the reason (and byte offset) in @why. Call
 * tool_json_free in both cases. */
int tool_json_parse(tool_jdoc *d, const char *src, size_t len, char *why, size_t why_cap);
const tool_jvalue *tool_json_root(const tool_jdoc *d);
/* Member @key of object @obj, or NULL (also when @obj is NULL or not an object). */
const tool_jvalue *tool_json_member(const tool_jdoc *d, const tool_jvalue *obj, const char *key);
/* The first element (or member) of @v, and the one after @v; NULL at the end. */
const tool_jvalue *tool_json_first(const tool_jdoc *d, const tool_jvalue *v);
const tool_jvalue *tool_json_next(const tool_jdoc *d, const tool_jvalue *v);
/* A non-negative integer; -1 when @v is not one (or NULL). */
int tool_json_u64(const tool_jvalue *v, uint64_t *out);
/* The string member @key of @obj, or NULL; *@len (may be NULL) its length. */
const char *tool_json_str(const tool_jdoc *d, const tool_jvalue *obj, const char *key,
                          size_t *len);
void tool_json_free(tool_jdoc *d);

/* ---- programs (elf-buildid.c, program.c) ---- */

#define TOOL_BUILD_ID_MAX 64

/* What the program file at a path is, as far as record and replay need to know. */
typedef struct tool_elf_info {
    int is_elf;             /* starts with the ELF magic */
    int is_elf64;           /* and is a 64-bit ELF file we read the headers of */
    int has_interp;         /* has PT_INTERP: dynamically linked, LD_PRELOAD applies */
    int is_script;          /* starts with "#!"; interp and interp_arg are its first line */
    char interp[256];
    char interp_arg[256];
    size_t build_id_len;    /* the note's length; 0 when none was found */
    uint8_t build_id[TOOL_BUILD_ID_MAX]; /* its first TOOL_BUILD_ID_MAX bytes */
    char problem[96];       /* why no build-id was found ("not an ELF file", ...) */
} tool_elf_info;

/* Reads the GNU build-id note (NT_GNU_BUILD_ID) of the ELF64 file @path, the first one in its
 * PT_NOTE segments (else in its SHT_NOTE sections) — the same note the runtime finds in the
 * running program. Every read is bounded by the file size. Returns 0 when the file could be
 * read, whatever it holds (see @info), or an errno when it could not be opened or read. */
int tool_elf_read(const char *path, tool_elf_info *info);

/* Finds program @name like execvp: a name with a slash as it is, else the first executable
 * regular file in $PATH (default /bin:/usr/bin). Relative results are taken relative to @dir
 * when @dir is not NULL. Writes the path into @out. Returns 0 or an errno (ENOENT, EACCES,
 * ENAMETOOLONG). */
int tool_find_program(const char *name, const char *dir, char *out, size_t cap);

/* @path made absolute against the current directory (symbolic links are kept). 0 or errno. */
int tool_absolute_path(const char *path, char *out, size_t cap);

/* Checks that @path (@what: "the trace", "the report") can be created: its directory exists and
 * is writable and it is not a directory. A usage error of @prog otherwise. */
int tool_check_output_path(const char *prog, const char *path, const char *what);

/* Finds the runtime library: $TINYTRACE_PRELOAD; else, relative to the tool's executable,
 * ../libtrace/instrument/ (build tree), ../LIBDIR/tinytrace/, ../lib/tinytrace/; else the
 * installed path. Writes its canonical absolute path into @out. Reports a failure (naming every
 * place it looked) and returns TOOL_EXIT_SYSTEM; TOOL_EXIT_OK on success. */
int tool_find_preload(char *out, size_t cap);

/* Sets (@value not NULL) or removes an environment variable; reports failures. */
int tool_setenv(const char *name, const char *value);
/* Puts @preload first in LD_PRELOAD, keeping what was there. */
int tool_set_preload_env(const char *preload);
/* Checks the TINYTRACE_* environment with tt_config_from_env, as the runtime will read it;
 * a refused setting is a usage error of @prog (its message names the variable). */
int tool_check_env(const char *prog);

/* Runs @path with @argv (argv[0] as the program should see it) in directory @dir (NULL: the
 * current one) with @envp (NULL: the tool's environment), with ASLR off unless @aslr, and waits
 * for it like a shell waits for a foreground job (see program.c). *@pid receives its process id, *@status its wait status. A program that could not be started
 * (chdir or exec failed) is reported, naming @shown or @path, and gives TOOL_EXIT_SYSTEM. */
int tool_run_program(const char *shown, const char *path, char *const argv[],
                     char *const envp[], const char *dir, int aslr, pid_t *pid, int *status);
/* The environment of a program run under the runtime, and the runtime's settings: every
 * TINYTRACE_* variable of the tool's environment goes into a memfd the program inherits (*@fd),
 * none into the program's environment, which is @recorded (a replay: the recorded one) or the
 * tool's own, LD_PRELOAD in place with today's runtime, and TT_ENV_RT last (protocol.h). The
 * caller closes *@fd after the program ran, and frees *@envp (one block) with free. */
int tool_child_env(char *const *recorded, char ***envp, int *fd);
/* Takes the tool's clock point, which tool_child_env hands a recorded program: first thing in
 * main. */
void tool_clock_start(void);

/* ---- trust (auth.c) ---- */

/* Signs the finished trace at @path with this user's key (made at first use): its MAC goes into
 * the manifest, not synced (the caller makes the file durable: tool_procs_sync). Reports a
 * failure (a warning: the trace itself is fine) and returns its code. */
int tool_auth_sign(const char *path);
/* The key, read once for many traces (a process tree's, as they are finished): open it, sign
 * each trace (a failure is reported, and its code returned), close it (the key is wiped). A
 * signer that could not read the key signs nothing; tool_signer_warn says so for @n traces,
 * with the reason. One thread at a time per signer. */
#define TOOL_KEY_LEN 32
typedef struct tool_signer {
    uint8_t key[TOOL_KEY_LEN];
    bool ok;
    char why[4096 + 128];
} tool_signer;
int tool_signer_open(tool_signer *sg);
int tool_signer_sign(tool_signer *sg, const char *path);
void tool_signer_close(tool_signer *sg);
void tool_signer_warn(const tool_signer *sg, size_t n);
/* 1 when the trace in @src (manifest @m) carries a MAC made with this user's key; else 0, with
 * the reason in @why. */
int tool_auth_check(const tt_source *src, const tt_manifest *m, char *why, size_t cap);

/* The exit code a shell would give for wait status @status: the exit status, or 128 + signal. */
int tool_shell_status(int status);
/* "exited with status N" / "was killed by signal N (Segmentation fault)". */
void tool_describe_status(int status, char *buf, size_t cap);

#endif
