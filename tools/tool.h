/* tinytrace — the command-line tool: what the verbs share.
 *
 * The tool is one file per verb (tools/cmd-<verb>.c); tools/tinytrace.c holds the verb table and
 * dispatches; tools/tool.c holds the helpers below. Every verb uses the public API only (the tt_*
 * functions of <tinytrace/tinytrace.h>), never a private header of the library.
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

#include <stdint.h>
#include <stdio.h>

#include <tinytrace/tinytrace.h>

/* Exit codes. Scripts and CI jobs depend on these numbers: never renumber one, only add.
 * The same table is printed by `tinytrace help` (tools/tinytrace.c).
 *
 *   code  name                    meaning
 *   0     TOOL_EXIT_OK            success; replay matched the recording
 *   1     TOOL_EXIT_DIVERGED      replay diverged from the recording; diff: the traces differ
 *   2     TOOL_EXIT_USAGE         bad command line (unknown verb or option, missing operand)
 *   3     TOOL_EXIT_CORRUPT       trace corrupt, truncated or unreadable within the limits
 *                                 (verify failed, a read error in the middle of a dump)
 *   4     TOOL_EXIT_BUILD         the program is not the build that was recorded
 *   5     TOOL_EXIT_EARLY_END     the program ended before the recording did
 *   6     TOOL_EXIT_SYSTEM        I/O or system error (file not found, out of memory, EPIPE…)
 *   7     TOOL_EXIT_INCOMPLETE    the manifest marks the trace incomplete (TT_MF_INCOMPLETE)
 *
 * 1, 4 and 5 are reserved for `replay` and `diff`; no verb of this version returns them.
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
};

/* The text of the table above, for `tinytrace help` and the verbs' --help. */
extern const char tool_exit_codes_help[];

/* ---- verbs ---- */
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_dump(int argc, char **argv);

/* ---- messages ---- */

/* Prints "tinytrace: " and the formatted message to stderr, with a newline. */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "tinytrace VERB: <msg>" and "Try 'tinytrace VERB --help'." to stderr and returns
 * TOOL_EXIT_USAGE. @prog is the verb's argv[0] ("tinytrace VERB"). */
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

/* ---- option values ---- */

/* Parses an unsigned decimal @s into [@min, @max]. On failure prints a usage error naming
 * @option and returns TOOL_EXIT_USAGE; returns TOOL_EXIT_OK on success. */
int tool_parse_u64(const char *prog, const char *option, const char *s, uint64_t min,
                   uint64_t max, uint64_t *out);

/* The reader limits of the tool: tt_reader_limits_default(), with max_total replaced by
 * @max_memory_mb MiB when it is nonzero (--max-memory). */
void tool_limits(tt_reader_limits *lim, uint64_t max_memory_mb);

/* The usage line shared by every verb that reads a trace. */
#define TOOL_MAX_MEMORY_HELP                                                                       \
    "  --max-memory MB     let the reader use up to MB MiB of memory (default: the library's\n"    \
    "                      limit, see `tinytrace help`)\n"

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
    tt_reader *r;
} tool_trace;

/* Opens @path as a source and probes its manifest with @lim and @mode (t->m, t->cap). Reports
 * every failure itself and returns its exit code; TOOL_EXIT_OK on success. Call tool_trace_close
 * in every case. */
int tool_trace_probe(tool_trace *t, const char *path, const tt_reader_limits *lim,
                     tt_cursor_mode mode);

/* After a successful probe: allocates t->cap.total bytes and opens the reader in them (reads the
 * thread and object tables). Reports failures and returns their exit code. */
int tool_trace_open(tool_trace *t);

/* Closes the reader, frees its storage, closes the source. Safe on a partly opened trace. */
void tool_trace_close(tool_trace *t);

/* ---- formatting ---- */

/* @ticks of a trace with @ticks_per_sec in nanoseconds, without overflow in between; saturates at
 * UINT64_MAX. A zero rate (no clock recorded) is taken as nanoseconds. */
uint64_t tool_ticks_to_ns(uint64_t ticks, uint64_t ticks_per_sec);

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

/* Text output of untrusted bytes: printable text and valid UTF-8 as is; control characters,
 * backslash and invalid UTF-8 as \xNN, so a hostile name cannot drive the terminal. */
void tool_print_text(FILE *f, const char *s, size_t len);

/* The name of object @id in @r (not NUL-terminated, *len set), or NULL when the table has no such
 * object. */
const char *tool_object_name(const tt_reader *r, uint32_t id, size_t *len);

/* Prints object @id of @r for text output: its name, "-" for 0, "#id" when unknown. */
void tool_print_object(FILE *f, const tt_reader *r, uint32_t id);

/* ---- JSON output ----
 * A small writer for one-line JSON values: it places the commas, escapes strings (control
 * characters as \uXXXX, invalid UTF-8 as U+FFFD, so the output is always valid JSON). Every key
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
/* Object @id of @r: its name, null for 0, "#id" when unknown. */
void tj_object_name(tool_json *j, const char *key, const tt_reader *r, uint32_t id);
/* Ends a top-level value with a newline. */
void tj_newline(tool_json *j);

#endif
