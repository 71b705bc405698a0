/* SPDX-License-Identifier: MIT */
/* tinytrace — the command-line tool: the table of verbs and the dispatch.
 *
 * Each verb lives in its own file, tools/cmd-<verb>.c, as `int cmd_<verb>(int argc, char **argv)`
 * (see tool.h). This file only finds the verb, hands it its arguments with argv[0] set to
 * "tinytrace <verb>", and handles what belongs to no verb: `help`, `--help`, `--version`.
 */
#include "tool.h"

#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>

struct verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static int cmd_help(int argc, char **argv);

static const struct verb verbs[] = {
    {"record", cmd_record, "run a program under tinytrace and write its trace"},
    {"replay", cmd_replay, "run a recorded program again against its trace"},
    {"hunt", cmd_hunt, "record a program run after run until one fails, and keep that one"},
    {"info", cmd_info, "print the manifest and the thread table of a trace"},
    {"verify", cmd_verify, "check a whole trace: frames, checksums, counts"},
    {"recover", cmd_recover, "turn the temporary file of a run that died into a valid trace"},
    {"index", cmd_index, "build the index tables of a trace recorded without them, or recovered"},
    {"gc", cmd_gc, "remove the temporary files of recordings whose process is gone"},
    {"dump", cmd_dump, "print the events in recorded order, or from a point (--from)"},
    {"diff", cmd_diff, "show where two recordings first differ, thread by thread"},
    {"export", cmd_export, "write a trace as Chrome trace-event JSON (Perfetto, chrome://tracing)"},
    {"stats", cmd_stats, "per-function totals, per-thread and per-kind counts (index tables)"},
    {"tree", cmd_tree, "the call tree, or folded stacks for flame graphs (index tables)"},
    {"report", cmd_report, "the call graph merged by call path: calls, total, self, avg, max"},
    {"help", cmd_help, "print this help, or the help of one verb"},
};

static const struct verb *find_verb(const char *name)
{
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(verbs[i].name, name) == 0)
            return &verbs[i];
    return NULL;
}

static void print_usage(FILE *f)
{
    tt_reader_limits lim;
    tt_reader_limits_default(&lim);

    fputs("Usage: tinytrace VERB [OPTIONS] [ARGS]\n"
          "       tinytrace VERB --help\n"
          "       tinytrace --version\n"
          "\n"
          "Record and replay programs; look at and check tinytrace recordings.\n"
          "\n"
          "Verbs:\n",
          f);
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(f,
            "\n"
            "info, verify, dump, stats, tree, diff and export accept --max-memory MB: the memory the\n"
            "bounded reader may use (default %llu MiB). A trace that needs more is refused before it\n"
            "is read.\n"
            "\n",
            (unsigned long long)(lim.max_total >> 20));
    fputs(tool_exit_codes_help, f);
}

static int print_version(void)
{
    unsigned v = tt_version();
    printf("tinytrace %s (library %u.%u.%u, trace format %u)\n", TT_VERSION_STRING,
           (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff, TT_FORMAT_VERSION);
    if (v != (unsigned)TT_VERSION_NUMBER)
        printf("note: built against library %s, running with %u.%u.%u\n", TT_VERSION_STRING,
               (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
    return tool_finish_stdout(TOOL_EXIT_OK);
}

/* Runs @v with argv[0] replaced by "tinytrace <verb>", so getopt and our own messages name it. */
static int run_verb(const struct verb *v, int argc, char **argv)
{
    char prog[64];
    snprintf(prog, sizeof prog, "tinytrace %s", v->name);
    argv[0] = prog;
    return v->run(argc, argv);
}

/* `tinytrace help [VERB]` */
static int cmd_help(int argc, char **argv)
{
    const struct verb *v;
    char help_arg[] = "--help";
    char *sub_argv[3];

    if (argc > 2)
        return tool_usage_error(argv[0], "takes at most one verb");
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("Usage: tinytrace help [VERB]\n"
               "Prints the list of verbs and the exit codes, or the help of VERB.\n");
        return tool_finish_stdout(TOOL_EXIT_OK);
    }
    if (argc < 2) {
        print_usage(stdout);
        return tool_finish_stdout(TOOL_EXIT_OK);
    }
    v = find_verb(argv[1]);
    if (v == NULL)
        return tool_usage_error(argv[0], "unknown verb '%s'", argv[1]);
    if (v->run == cmd_help)
        return cmd_help(1, argv);
    sub_argv[0] = argv[1];
    sub_argv[1] = help_arg;
    sub_argv[2] = NULL;
    return run_verb(v, 2, sub_argv);
}

int main(int argc, char **argv)
{
    const struct verb *v;

    tool_clock_start();

    /* The tool is single-threaded: stdio need not lock the stream for every character of a
     * dump of millions of events. */
    __fsetlocking(stdout, FSETLOCKING_BYCALLER);

    if (argc < 2) {
        print_usage(stderr);
        return TOOL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
        return argc == 2 ? print_version()
                         : tool_usage_error("tinytrace", "--version takes no arguments");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_usage(stdout);
        return tool_finish_stdout(TOOL_EXIT_OK);
    }
    v = find_verb(argv[1]);
    if (v == NULL) {
        if (argv[1][0] == '-')
            return tool_usage_error("tinytrace", "unknown option '%s'; a verb comes first",
                                    argv[1]);
        return tool_usage_error("tinytrace", "unknown verb '%s'", argv[1]);
    }
    return run_verb(v, argc - 1, argv + 1);
}
