/* SPDX-License-Identifier: MIT */
/* tinytrace — the prologue every verb shares (opts.h): the command line, then the trace. */
#include "opts.h"
#include "procs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* getopt's value for --max-memory: above every letter and every number a verb gives its own
 * options (256 to 0xffff, opts.h), so that a verb may use -m for something else (tree does). */
#define OPT_MAX_MEMORY 0x10000
#define OPT_PROCESS 0x10001
#define OPT_NO_DEMANGLE 0x10002

/* After the verb's own options, in this order (opts.h: the order shows in getopt's messages). */
static const struct option common_options[] = {
    {"json", no_argument, NULL, 'j'},
    {"thread", required_argument, NULL, 't'},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"process", required_argument, NULL, OPT_PROCESS},
    {"no-demangle", no_argument, NULL, OPT_NO_DEMANGLE},
    {"help", no_argument, NULL, 'h'},
};
#define N_COMMON (sizeof common_options / sizeof common_options[0])

/* Room for the tables getopt_long is given: the verb's options, the common ones, the end. */
#define MAX_OPTIONS 32
#define MAX_SHORTS (1 + 2 * MAX_OPTIONS + 1) /* '+', a letter and ':' an option, NUL */

static int has_common(const tool_verb *v, const struct option *c)
{
    switch (c->val) {
    case 'j':
        return (v->common & TOOL_OPT_JSON) != 0;
    case 't':
        return (v->common & TOOL_OPT_THREAD) != 0;
    case OPT_MAX_MEMORY:
        return (v->common & TOOL_OPT_MAX_MEMORY) != 0;
    case OPT_PROCESS:
        return (v->common & TOOL_OPT_PROCESS) != 0;
    case OPT_NO_DEMANGLE:
        return (v->common & TOOL_OPT_NO_DEMANGLE) != 0;
    default:
        return 1; /* --help */
    }
}

/* Appends @p to @all at *@n and, when its val is a letter, that letter (and ':' when it takes
 * a value) to @shorts at *@k: the short options come from the table, so the two cannot
 * disagree. */
static void add_option(const struct option *p, struct option *all, size_t *n, char *shorts,
                       size_t *k)
{
    all[(*n)++] = *p;
    if (p->flag != NULL || p->val <= 0 || p->val > 255)
        return; /* long only */
    shorts[(*k)++] = (char)p->val;
    if (p->has_arg == required_argument)
        shorts[(*k)++] = ':';
}

/* Fills @all (MAX_OPTIONS entries) and @shorts (MAX_SHORTS bytes) for getopt_long. Returns -1
 * when the verb lists more options than fit: a mistake in the tool, not in the command. */
static int build_tables(const tool_verb *v, struct option *all, char *shorts)
{
    size_t n = 0, k = 0;

    if (v->stop_at_operand)
        shorts[k++] = '+';
    for (const struct option *p = v->options; p != NULL && p->name != NULL; p++) {
        if (n + N_COMMON + 2 > MAX_OPTIONS) /* this one, the common ones and the end */
            return -1;
        add_option(p, all, &n, shorts, &k);
    }
    for (size_t i = 0; i < N_COMMON; i++)
        if (has_common(v, &common_options[i]))
            add_option(&common_options[i], all, &n, shorts, &k);
    memset(&all[n], 0, sizeof all[n]);
    shorts[k] = '\0';
    return 0;
}

/* The operands from o->first on, as v->operands says. */
static int check_operands(tool_opts *o, const tool_verb *v, int argc, char **argv)
{
    if (v->operands == TOOL_OPERANDS_FILE) {
        if (o->first >= argc)
            return tool_usage_error(argv[0], "missing FILE");
        if (argc - o->first > 1)
            return tool_usage_error(argv[0], "takes one FILE, not %d", argc - o->first);
        o->file = o->tree = argv[o->first];
        if (o->process != NULL) {
            int rc = tool_process_file(argv[0], o->file, o->process, o->process_file,
                                       sizeof o->process_file);
            if (rc != TOOL_EXIT_OK)
                return rc;
            o->file = o->process_file;
        }
    }
    return TOOL_GO_ON;
}

/* getopt's own message for a bad option, when the command line holds something that must not
 * reach the terminal raw (getopt would echo it): the same facts, escaped. */
static int bad_option(const char *prog, int argc, char **argv)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    fflush(stdout);
    fprintf(stderr, "%s: ", prog);
    if (optopt != 0 && optopt <= 255 && strncmp(arg, "--", 2) != 0) { /* -x */
        char c = (char)optopt;
        fputs("invalid option, or an option without its value -- '", stderr);
        tool_print_text(stderr, &c, 1);
    } else { /* --name: unknown, ambiguous, or without its value */
        fputs("unrecognized option, or an option without its value '", stderr);
        tool_print_text(stderr, arg, strlen(arg));
    }
    fputs("'\n", stderr);
    return tool_usage_hint(prog);
}

int tool_opts_parse(tool_opts *o, const tool_verb *v, void *ctx, int argc, char **argv)
{
    struct option all[MAX_OPTIONS];
    char shorts[MAX_SHORTS];
    uint64_t thread;
    int c, rc, plain = 1;

    memset(o, 0, sizeof *o);
    if (build_tables(v, all, shorts) != 0) {
        fprintf(stderr, "%s: more options than the option table holds\n", argv[0]);
        return TOOL_EXIT_SYSTEM;
    }
    /* getopt names a bad option as it was given: it may speak only when that is plain text */
    for (int i = 1; i < argc && plain; i++)
        plain = argv[i][0] != '-' || tool_text_is_plain(argv[i], strlen(argv[i]));
    opterr = plain;
    while ((c = getopt_long(argc, argv, shorts, all, NULL)) != -1) {
        switch (c) {
        case 'j':
            o->json = 1;
            break;
        case 't':
            if (tool_parse_u64(argv[0], "--thread", optarg, 0, UINT32_MAX, &thread))
                return TOOL_EXIT_USAGE;
            o->one_thread = 1;
            o->thread = (uint32_t)thread;
            break;
        case OPT_NO_DEMANGLE:
            tool_names_demangle(0);
            break;
        case OPT_MAX_MEMORY:
            if (tool_parse_u64(argv[0], "--max-memory", optarg, 1, UINT64_MAX >> 20,
                               &o->max_memory_mb))
                return TOOL_EXIT_USAGE;
            break;
        case OPT_PROCESS:
            o->process = optarg;
            break;
        case 'h':
            fputs(v->usage, stdout);
            if (v->more_help != NULL)
                v->more_help(stdout);
            return tool_finish_stdout(TOOL_EXIT_OK);
        case '?':
            if (!plain)
                return bad_option(argv[0], argc, argv);
            return tool_usage_hint(argv[0]); /* getopt named the option */
        default: /* one of the verb's own */
            if ((rc = v->take(ctx, argv[0], c, optarg)) != TOOL_EXIT_OK)
                return rc;
            break;
        }
    }
    o->first = optind;
    return check_operands(o, v, argc, argv);
}

/* A trace without index tables (record's default, recovered, version 1): they are built with
 * the trace into a temporary copy (tt_index_build), which @t then reads in its place. The copy
 * is unlinked as soon as it is open, so a verb killed after that leaves nothing behind; one
 * killed while the copy is built leaves its folder in $TMPDIR. Messages keep naming the trace
 * the user gave. */
static int index_in_copy(tool_trace *t, tt_cursor_mode mode)
{
    const char *path = t->path, *tmpdir = getenv("TMPDIR");
    char dir[4096], copy[4200];
    tt_error_info err;
    tt_index_build_result res;
    if (!tmpdir || !*tmpdir)
        tmpdir = "/tmp";
    if ((size_t)snprintf(dir, sizeof dir, "%s/tinytrace-index.XXXXXX", tmpdir) >= sizeof dir ||
        !mkdtemp(dir)) {
        tool_error("%s: has no index tables, and no folder for a copy with them could be made "
                   "in %s: %s", path, tmpdir, strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }
    snprintf(copy, sizeof copy, "%s/trace", dir);
    uint64_t t0 = tool_now_ns();
    tool_error_info_init(&err);
    int rc = tt_index_build(&t->src, copy, TT_INDEX_BUILD_NO_SYNC, &res, &err);
    if (rc != TT_OK) {
        rmdir(dir);
        tool_error("%s: has no index tables, and building them failed: %s", path,
                   tool_strip_path(err.message, t->src.name));
        return rc == TT_E_IO || rc == TT_E_NOMEM ? TOOL_EXIT_SYSTEM : TOOL_EXIT_CORRUPT;
    }
    tt_reader_limits lim = t->lim;
    tool_trace_close(t);
    rc = tool_trace_probe(t, copy, &lim, mode);
    if (rc == TOOL_EXIT_OK)
        rc = tool_trace_open(t);
    if (rc == TOOL_EXIT_OK) {
        tool_error_info_init(&err);
        int irc = tt_index_open(t->r, &t->lim, &t->ix, &err);
        if (irc != TT_OK)
            rc = tool_report(path, "index tables", irc, &err);
    }
    unlink(copy);
    rmdir(dir);
    t->path = path;
    if (rc == TOOL_EXIT_OK)
        fprintf(stderr, "tinytrace: note: %s has no index tables; built them for this command "
                "in a temporary copy (%" PRIu64 " events, %.2f s); `tinytrace index %s` keeps "
                "them in the file\n", path, res.events, (double)(tool_now_ns() - t0) / 1e9, path);
    return rc;
}

int tool_trace_start(tool_trace *t, const char *path, const tool_opts *o, tt_cursor_mode mode,
                     enum tool_trace_step upto)
{
    tt_reader_limits lim;
    tt_error_info err;
    int rc;

    tool_limits(&lim, o != NULL ? o->max_memory_mb : 0);
    rc = tool_trace_probe(t, path, &lim, mode);
    if (rc == TOOL_EXIT_OK && upto >= TOOL_TRACE_OPEN)
        rc = tool_trace_open(t);
    if (rc == TOOL_EXIT_OK && upto >= TOOL_TRACE_INDEX) {
        /* no index tables (TT_E_INVAL: a recovered, version-1 or --no-index trace) is exit 3
         * to a verb that cannot work without them, but not called damaged: the message says
         * why the file has none */
        tool_error_info_init(&err);
        rc = tt_index_open(t->r, &t->lim, &t->ix, &err);
        if (rc == TT_E_INVAL && t->m.index_offset == 0) {
            rc = index_in_copy(t, mode);
        } else if (rc == TT_E_INVAL) {
            tool_error("%s: this command needs the index tables, and %s", t->path,
                       tool_strip_path(tool_strip_path(err.message, t->path), t->src.name));
            rc = TOOL_EXIT_CORRUPT;
        } else if (rc != TT_OK) {
            rc = tool_report(t->path, "index tables", rc, &err);
        }
    }
    if (rc == TOOL_EXIT_OK && o != NULL && o->one_thread && o->thread >= t->m.thread_count) {
        tool_error("%s: the trace has no thread %" PRIu32 " (it has %" PRIu32 ")", t->path,
                   o->thread, t->m.thread_count);
        rc = TOOL_EXIT_USAGE;
    }
    return rc;
}
