/* SPDX-License-Identifier: MIT */
/* tinytrace index — the index tables of a trace that has none, built after the recording
 * (tt_index_build). */
#include "opts.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "Usage: tinytrace index [-o OUT] [--force] FILE\n"
    "\n"
    "Builds the index tables (frames, per-function summary, seek entries) of a trace that has\n"
    "none: one recorded by `tinytrace record` (without --index), or recovered. stats, tree and\n"
    "report read them; on a trace without them they build them in a temporary copy each time\n"
    "they run.\n"
    "The trace written is the one a recording with the tables would have written: the same\n"
    "events, chunks and tables, byte for byte. Every chunk's checksum and every event is\n"
    "checked on the way; a damaged trace is refused and left as it was.\n"
    "\n"
    "Without -o, FILE itself gets the tables: the new trace is written beside it under a\n"
    "temporary name and renamed over it when whole, with FILE's permissions. A FILE that has\n"
    "its tables already is left alone, unless --force builds them again. With -o, the trace\n"
    "with the tables goes to OUT, and FILE is not changed.\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT    write the indexed trace to OUT instead of replacing FILE. Refused\n"
    "                      (exit 2): an OUT that exists unless --force is given, one that is\n"
    "                      FILE itself, and one that is not a regular file or a link\n"
    "  -f, --force         build the tables of a FILE that has them; replace an existing OUT\n"
    "  -h, --help          print this help\n"
    "\n"
    "A trace signed with your key (tinytrace record signs what it records) is signed again, so\n"
    "that replay still runs its recorded command; any other keeps its old signature, which no\n"
    "longer matches.\n"
    "\n"
    "Exits 0 when the tables were written (or FILE had them), 2 for a usage error, a refused OUT\n"
    "or a trace past this build's limits, 3 when FILE is damaged or was not closed whole\n"
    "(`tinytrace recover` first), 6 when a file cannot be read or written.\n";

struct index_options {
    const char *output; /* -o */
    int force;          /* -f */
};

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct index_options *io = ctx;
    if (c == 'o')
        io->output = arg;
    else if (c == 'f')
        io->force = 1;
    else
        return tool_usage_hint(prog);
    return TOOL_EXIT_OK;
}

/* tt_index_build from @src into the temporary file of @out (it writes "<tmp>.<pid>.partial" and
 * renames that to <tmp>, which tool_output_open made ours). The manifest is new, so a trace
 * signed with this user's key (@signed) is signed again: a trace that replay trusted before
 * stays trusted, and one it did not trust gains nothing. Then the file is made durable. */
static int build_into(const tt_source *src, tool_output *out, int trusted,
                      tt_index_build_result *res)
{
    tt_error_info err;
    close(out->fd);
    out->fd = -1;
    tool_error_info_init(&err);
    int rc = tt_index_build(src, out->tmp, TT_INDEX_BUILD_NO_SYNC, res, &err);
    if (rc != TT_OK) {
        tool_output_discard(out);
        tool_error("%s", err.message[0] ? err.message : tt_strerror(rc));
        return rc == TT_E_IO || rc == TT_E_NOMEM ? TOOL_EXIT_SYSTEM
               : rc == TT_E_LIMIT                ? TOOL_EXIT_USAGE
                                                 : TOOL_EXIT_CORRUPT;
    }
    if (trusted && tool_auth_sign(out->tmp) != TOOL_EXIT_OK) {
        tool_output_discard(out);
        return TOOL_EXIT_SYSTEM;
    }
    int fd = open(out->tmp, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    int e = fd < 0 ? errno : fdatasync(fd) != 0 ? errno : 0;
    if (fd >= 0)
        close(fd);
    if (e) {
        tool_error("cannot make %s durable: %s", out->tmp, strerror(e));
        tool_output_discard(out);
        return TOOL_EXIT_SYSTEM;
    }
    return TOOL_EXIT_OK;
}

int cmd_index(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage, .options = options, .take = take_option};
    struct index_options io = {0};
    tool_opts o;
    tool_output out;
    tt_index_build_result res;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, &io, argc, argv)) != TOOL_GO_ON)
        return rc;
    const char *in = o.file;
    const char *const inputs[] = {in, NULL};
    struct stat st;
    if (io.output) {
        if ((rc = tool_output_check(argv[0], io.output, inputs, io.force)) != TOOL_EXIT_OK)
            return rc;
    } else if (lstat(in, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* renaming over a link would replace the link, not the trace it names */
        return tool_usage_error(argv[0], "%s is not a regular file: give -o OUT", in);
    }
    tt_error_info err;
    tt_source src;
    tool_error_info_init(&err);
    if ((rc = tt_source_file(&src, in, &err)) != TT_OK)
        return tool_report(in, "cannot open", rc, &err);
    tt_reader_limits lim;
    tt_manifest m;
    tt_reader_capacity cap;
    tool_limits(&lim, 0);
    tool_error_info_init(&err);
    rc = tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, &m, &cap, &err);
    if (rc != TT_OK) {
        tt_source_close(&src);
        return tool_report(in, NULL, rc, &err);
    }
    if (!io.output && m.index_offset && !io.force) {
        tt_source_close(&src);
        tool_print_text(stdout, in, strlen(in));
        printf(": has its index tables already (--force builds them again)\n");
        return tool_finish_stdout(TOOL_EXIT_OK);
    }
    char why[512];
    int trusted = tool_auth_check(&src, &m, why, sizeof why);
    if (!io.output && fstat(src.fd, &st) != 0) {
        int e = errno;
        tt_source_close(&src);
        tool_error("%s: %s", in, strerror(e));
        return TOOL_EXIT_SYSTEM;
    }
    uint64_t t0 = tool_now_ns();
    /* 0600 like a recording's own file; in place, FILE's own permissions once it is whole */
    rc = tool_output_open(&out, io.output ? io.output : in, 0600);
    if (rc == TOOL_EXIT_OK)
        rc = build_into(&src, &out, trusted, &res);
    tt_source_close(&src);
    if (rc == TOOL_EXIT_OK && io.output) {
        rc = tool_output_commit(argv[0], &out, inputs, io.force);
    } else if (rc == TOOL_EXIT_OK) {
        /* FILE is the input: tool_output_commit refuses it, rightly for every other verb */
        /* the permissions, not the set-id bits: the file is ours now, not its owner's */
        if (chmod(out.tmp, st.st_mode & 0777) != 0 || rename(out.tmp, in) != 0) {
            int e = errno;
            tool_error("cannot replace %s with %s: %s", in, out.tmp, strerror(e));
            tool_output_discard(&out);
            return TOOL_EXIT_SYSTEM;
        }
        free(out.tmp); /* committed by the rename */
        out.tmp = NULL;
    }
    if (rc != TOOL_EXIT_OK)
        return rc;
    const char *dst = io.output ? io.output : in;
    tool_print_text(stdout, dst, strlen(dst));
    printf(": index tables of %" PRIu64 " events, %" PRIu64 " frames, built in %.2f s (%"
           PRIu64 " bytes, %" PRIu64 " before)\n", res.events, res.frames, (double)(tool_now_ns() - t0) / 1e9,
           res.bytes_out, res.bytes_in);
    return tool_finish_stdout(TOOL_EXIT_OK);
}
