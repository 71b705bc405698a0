/* SPDX-License-Identifier: MIT */
/* tinytrace verify — checks a whole trace with tt_verify.
 *
 * The verdict is the library's (tt_verify_result); this verb only prints it and turns it into an
 * exit code: 0 only for a valid file, 7 for a file marked incomplete, 6 when the file cannot be
 * read at all, 3 for every other problem.
 */
#include "opts.h"
#include "tool.h"

#include <inttypes.h>
#include <string.h>

static const char usage[] =
    "Usage: tinytrace verify [--frames] [--json] [--quiet] [--max-memory MB] FILE\n"
    "\n"
    "Checks trace FILE: the manifest, every chunk's frame and checksum, every event, each\n"
    "thread's sequence numbers, the tables, and all counts and the events checksum against\n"
    "the manifest. Prints\n"
    "  FILE: ok (N events, M chunks, B bytes)                      on stdout, or\n"
    "  FILE: STATUS at offset O (chunk C): message                 on stderr.\n"
    "\n"
    "Options:\n"
    "  -f, --frames        also decode every frame row of the index and check the call tree\n"
    "                      and the per-function summary against them (slower; the rows'\n"
    "                      checksums are checked without it)\n"
    "  -j, --json          print one JSON object on stdout instead, valid or not:\n"
    "                      {\"file\", \"status\", \"error\", \"offset\", \"chunk\", \"events\",\n"
    "                      \"chunks\", \"bytes\", \"message\"} (offset and chunk may be null)\n"
    "  -q, --quiet         print nothing; only the exit code tells\n" TOOL_MAX_MEMORY_HELP
    "  -h, --help          print this help\n"
    "\n"
    "Exits 0 only for a valid trace; 3 when it is corrupt, truncated or beyond the reader\n"
    "limits; 7 when it is marked incomplete; 6 when it cannot be opened or read.\n";

static int exit_for_status(tt_verify_status st, int code)
{
    switch (st) {
    case TT_VERIFY_OK:
        /* A verdict of ok with an error code is contradictory: trust the error. */
        return code == TT_OK ? TOOL_EXIT_OK : tool_exit_for_error(code);
    case TT_VERIFY_INCOMPLETE:
        return TOOL_EXIT_INCOMPLETE;
    case TT_VERIFY_IO:
        return TOOL_EXIT_SYSTEM;
    default:
        return TOOL_EXIT_CORRUPT;
    }
}

static void print_json(const char *path, const char *status, int code, const tt_verify_result *res)
{
    const char *msg;
    tool_json j;
    tj_init(&j, stdout);
    tj_object_begin(&j, NULL);
    tj_str(&j, "file", path);
    tj_str(&j, "status", status);
    tj_str(&j, "error", tt_error_name(code));
    if (res->offset == UINT64_MAX)
        tj_null(&j, "offset");
    else
        tj_u64(&j, "offset", res->offset);
    if (res->chunk == UINT64_MAX)
        tj_null(&j, "chunk");
    else
        tj_u64(&j, "chunk", res->chunk);
    tj_u64(&j, "events", res->events);
    tj_u64(&j, "chunks", res->chunks);
    tj_u64(&j, "bytes", res->bytes);
    msg = tool_strip_path(res->message, path);
    tj_strn(&j, "message", msg, strnlen(msg, sizeof res->message));
    tj_object_end(&j);
    tj_newline(&j);
}

/* The verdict on stderr: "FILE: STATUS at offset O (chunk C): message". */
static void print_problem(const char *path, int ret, const tt_verify_result *res)
{
    fflush(stdout);
    tool_print_text(stderr, path, strlen(path));
    fprintf(stderr, ": %s", tt_verify_status_name(res->status));
    if (res->offset != UINT64_MAX)
        fprintf(stderr, " at offset %" PRIu64, res->offset);
    if (res->chunk != UINT64_MAX)
        fprintf(stderr, " (chunk %" PRIu64 ")", res->chunk);
    fputs(": ", stderr);
    if (res->message[0] != '\0') {
        const char *msg = tool_strip_path(res->message, path);
        tool_print_text(stderr, msg, strnlen(msg, sizeof res->message));
    }
    else
        fputs(tt_strerror(ret == TT_OK ? res->code : ret), stderr);
    fputc('\n', stderr);
    if (res->status == TT_VERIFY_LIMIT && strstr(res->message, "max_total") != NULL)
        fputs("tinytrace: a larger limit can be given with --max-memory MB\n", stderr);
}

struct verify_options {
    unsigned flags; /* TT_VERIFY_* */
    int quiet;
};

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct verify_options *vo = ctx;
    (void)arg;
    if (c == 'f')
        vo->flags |= TT_VERIFY_FRAMES;
    else if (c == 'q')
        vo->quiet = 1;
    else
        return tool_usage_hint(prog);
    return TOOL_EXIT_OK;
}

int cmd_verify(int argc, char **argv)
{
    static const struct option options[] = {
        {"frames", no_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_JSON | TOOL_OPT_MAX_MEMORY,
                                   .options = options,
                                   .take = take_option};
    struct verify_options vo = {0};
    int rc, ret;
    const char *path;
    tool_opts o;
    tt_reader_limits lim;
    tt_verify_result res;
    tt_error_info err;
    tt_source src;

    if ((rc = tool_opts_parse(&o, &verb, &vo, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (o.json && vo.quiet)
        return tool_usage_error(argv[0], "--json and --quiet exclude each other");
    path = o.file;
    tool_limits(&lim, o.max_memory_mb);

    memset(&res, 0, sizeof res);
    res.offset = UINT64_MAX;
    res.chunk = UINT64_MAX;

    tool_error_info_init(&err);
    memset(&src, 0, sizeof src);
    ret = tt_source_file(&src, path, &err);
    if (ret != TT_OK) {
        if (o.json) {
            snprintf(res.message, sizeof res.message, "cannot open: %.480s",
                     err.message[0] ? tool_strip_path(err.message, path) : tt_strerror(ret));
            print_json(path, tt_verify_status_name(TT_VERIFY_IO), ret, &res);
            (void)tool_finish_stdout(TOOL_EXIT_OK);
            return tool_exit_for_error(ret);
        }
        rc = tool_exit_for_error(ret);
        if (!vo.quiet)
            tool_report(path, "cannot open", ret, &err);
        return rc;
    }

    ret = tt_verify_ex(&src, &lim, vo.flags, &res);
    tt_source_close(&src);
    rc = exit_for_status(res.status, ret == TT_OK ? res.code : ret);

    if (o.json) {
        print_json(path, tt_verify_status_name(res.status), ret == TT_OK ? res.code : ret, &res);
        /* stdout failing turns any verdict into 6; else the verdict decides */
        return tool_finish_stdout(rc) == TOOL_EXIT_SYSTEM ? TOOL_EXIT_SYSTEM : rc;
    }
    if (vo.quiet)
        return rc;
    if (rc == TOOL_EXIT_OK) {
        tool_print_text(stdout, path, strlen(path));
        printf(": ok (%" PRIu64 " events, %" PRIu64 " chunks, %" PRIu64 " bytes)\n", res.events,
               res.chunks, res.bytes);
        return tool_finish_stdout(rc);
    }
    print_problem(path, ret, &res);
    return rc;
}
