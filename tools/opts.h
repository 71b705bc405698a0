/* SPDX-License-Identifier: MIT */
/* tinytrace — the prologue every verb shares: its command line and the trace it reads.
 *
 * A verb describes its command line once, in a tool_verb: the usage text, which of the common
 * options it takes (-j/--json, -t/--thread N, --max-memory MB; -h/--help is every verb's), its
 * own options and a function that takes each of them, and what follows the options.
 * tool_opts_parse runs getopt_long over the common and the verb's options together and reports
 * every mistake in the tool's words (tool_usage_error, tool_usage_hint), so a verb's own code
 * starts with a valid command line. A verb's checks of one option against another come after
 * it and before tool_trace_start, which then opens the trace as far as the verb needs it:
 *
 *     static int take(void *ctx, const char *prog, int c, const char *arg)
 *     {
 *         struct my_options *my = ctx;           // c is always one of the verb's own
 *         return tool_parse_u64(prog, "--count", arg, 0, UINT64_MAX, &my->count);
 *     }
 *     static const struct option own[] = {{"count", required_argument, NULL, 'n'}, {0}};
 *     static const tool_verb verb = {.usage = usage,
 *                                    .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY,
 *                                    .options = own, .take = take}; // operands: FILE
 *     ...
 *     struct my_options my = {0};
 *     tool_opts o;
 *     tool_trace t;
 *     if ((rc = tool_opts_parse(&o, &verb, &my, argc, argv)) != TOOL_GO_ON)
 *         return rc;                          // --help, or a usage error: already printed
 *     rc = tool_trace_start(&t, o.file, &o, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_INDEX);
 *     if (rc == TOOL_EXIT_OK)
 *         rc = ...the verb's own work...;
 *     tool_trace_close(&t);                   // in every case
 *
 * The options are given to getopt_long in the verb's order, then --json, --thread, --max-memory
 * and --help: getopt names the options an abbreviation could mean in table order ("--m" is
 * ambiguous; possibilities: '--min-duration' '--max-memory'), and that order is part of the
 * tool's output.
 *
 * Not thread-safe (getopt's state is global); a verb runs once per process.
 */
#ifndef TINYTRACE_TOOL_OPTS_H
#define TINYTRACE_TOOL_OPTS_H

#include <getopt.h>
#include <limits.h>

#include "tool.h"

/* The common options a verb may take, besides -h/--help. */
enum tool_common_option {
    TOOL_OPT_JSON = 1u << 0,       /* -j, --json: tool_opts.json */
    TOOL_OPT_MAX_MEMORY = 1u << 1, /* --max-memory MB: tool_opts.max_memory_mb */
    TOOL_OPT_THREAD = 1u << 2,     /* -t, --thread N: tool_opts.one_thread and .thread */
    TOOL_OPT_PROCESS = 1u << 3,    /* --process P: tool_opts.file is process P's trace */
    TOOL_OPT_NO_DEMANGLE = 1u << 4, /* --no-demangle: C++ names as recorded (names.c) */
};

/* The usage line of --no-demangle. */
#define TOOL_NO_DEMANGLE_HELP                                                                      \
    "      --no-demangle   C++ function names as recorded (mangled), not demangled\n"


/* The usage line of --max-memory, for every verb that reads a trace. */
#define TOOL_MAX_MEMORY_HELP                                                                       \
    "  --max-memory MB     let the reader use up to MB MiB of memory (default: the library's\n"    \
    "                      limit, see `tinytrace help`)\n"

/* The usage line of --process, for every verb that reads one trace of a process tree. */
#define TOOL_PROCESS_HELP                                                                          \
    "  --process P         read process P of the recorded tree, not its root (\"root/2@1\",\n"  \
    "                      its recorded pid, or its program's name; info lists them)\n"

/* What follows the options. */
enum tool_operands {
    TOOL_OPERANDS_FILE, /* exactly one, FILE: "missing FILE", "takes one FILE, not N" */
    TOOL_OPERANDS_ANY,  /* the verb checks them (from tool_opts.first on) */
};

typedef struct tool_verb {
    const char *usage;            /* printed by --help */
    unsigned common;              /* TOOL_OPT_* */
    /* The verb's own options, ending with a zero entry; NULL: none. An option whose val is a
     * letter is also that short option (-n N for --count N); a val from 256 to 0xffff makes it
     * long only. 'j', 't' and 'h' are the common options'. */
    const struct option *options;
    int stop_at_operand;          /* options end at the first operand (record: PROG's own) */
    /* Takes the verb's own option @c (its val) with @arg (NULL when it has none) into @ctx.
     * Returns TOOL_EXIT_OK, or the exit code of a bad value, which it reported (prog is the
     * verb's argv[0]). NULL when the verb has no options of its own. */
    int (*take)(void *ctx, const char *prog, int c, const char *arg);
    /* Printed after the usage text by --help (dump: the event kinds); NULL: nothing. */
    void (*more_help)(FILE *f);
    enum tool_operands operands;  /* 0: TOOL_OPERANDS_FILE */
} tool_verb;

/* What the common options and the operands said. */
typedef struct tool_opts {
    int json;               /* -j, --json */
    uint64_t max_memory_mb; /* --max-memory MB; 0: the library's default */
    int one_thread;         /* --thread N given: only thread N */
    uint32_t thread;
    int first;              /* argv index of the first operand */
    const char *file;       /* TOOL_OPERANDS_FILE: the operand, argv[first]; else NULL. With
                             * --process, that process's trace (in process_file) */
    const char *tree;       /* the operand itself, the recording --process looked P up in */
    const char *process;    /* --process P, or NULL */
    char process_file[PATH_MAX];
} tool_opts;

/* tool_opts_parse's "the verb goes on": not an exit code (they are 0 and up). */
#define TOOL_GO_ON (-1)

/* Parses the options of argv[1 .. argc) (argv[0] is "tinytrace VERB") into @o and, through
 * v->take, into @ctx, then checks the operands as v->operands says. Returns TOOL_GO_ON when the
 * verb has its command line and goes on; else the verb returns what this returns, at once:
 * TOOL_EXIT_OK or TOOL_EXIT_SYSTEM after --help (written, or stdout failed), TOOL_EXIT_USAGE
 * or the code of v->take after a mistake, already reported. @argc may end before the real end
 * of argv: replay stops at its "--". */
int tool_opts_parse(tool_opts *o, const tool_verb *v, void *ctx, int argc, char **argv);

/* How far tool_trace_start goes; each step includes the ones before. */
enum tool_trace_step {
    TOOL_TRACE_PROBE, /* open the file, read the manifest, size the reader (t->m, t->cap) */
    TOOL_TRACE_OPEN,  /* and open the reader: the thread and object tables (t->r) */
    TOOL_TRACE_INDEX, /* and the index tables (t->ix); a trace without them is corrupt here */
};

/* Opens trace @path as far as @upto, with the reader limits of @o (--max-memory; NULL: the
 * defaults) and cursors @mode, then checks that the thread of --thread is one of the trace's.
 * Reports every failure itself ("tinytrace: PATH: ...") and returns its exit code (a thread
 * the trace does not have is a usage error); TOOL_EXIT_OK when every step was done. Call
 * tool_trace_close in every case; a verb that stops at TOOL_TRACE_PROBE may take the next step
 * with tool_trace_open. */
int tool_trace_start(tool_trace *t, const char *path, const tool_opts *o, tt_cursor_mode mode,
                     enum tool_trace_step upto);

#endif
