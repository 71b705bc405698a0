/* SPDX-License-Identifier: MIT */
/* tinytrace recover — a valid trace from the temporary file of a run that died (tt_recover). */
#include "opts.h"
#include "tool.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "Usage: tinytrace recover [-o OUT] [--force] FILE.PID.partial\n"
    "\n"
    "Turns the temporary file that a recording leaves when its process dies (even by SIGKILL)\n"
    "into a valid trace: every whole chunk up to the first damaged one, a thread table rebuilt\n"
    "from them, and a manifest marked recovered. Function and thread names are written only when\n"
    "a recording closes, so a recovered trace has ids without names. OUT defaults to FILE (the\n"
    "name without .PID.partial). Prints how many events and chunks were saved and where the\n"
    "damage began.\n"
    "\n"
    "OUT is written under a temporary name beside it and renamed when complete. Refused (exit\n"
    "2): an OUT that exists (a finished trace of the same name, say) unless --force is given,\n"
    "an OUT that is FILE itself, and one that is a directory, a device, a FIFO or a socket.\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT    where to write the recovered trace\n"
    "  -f, --force         replace an existing regular file OUT (or a symbolic link: the link\n"
    "                      is replaced, never the file it points to)\n"
    "  -h, --help          print this help\n"
    "\n"
    "Exits 0 when a trace was written, 2 for a usage error or a refused OUT, 3 when FILE is not\n"
    "a recording's temporary file (or was closed), 6 when a file cannot be read or written.\n";

/* "x.tt.1234.partial" -> "x.tt"; -1 when the name has no ".PID.partial" ending. */
static int default_output(const char *in, char *out, size_t cap)
{
    size_t n = tt_partial_parse(in, NULL);
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, in, n);
    out[n] = '\0';
    return 0;
}

struct recover_options {
    const char *output; /* -o */
    int force;          /* -f */
};

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct recover_options *ro = ctx;
    if (c == 'o')
        ro->output = arg;
    else if (c == 'f')
        ro->force = 1;
    else
        return tool_usage_hint(prog);
    return TOOL_EXIT_OK;
}

/* tt_recover from @src into the temporary file of @out (it writes "<tmp>.<pid>.partial" and
 * renames that to <tmp>, which tool_output_open made ours), then the rename to OUT after the
 * last check. */
static int recover_into(const char *prog, const tt_source *src, tool_output *out,
                        const char *const *inputs, int force, tt_recover_result *res)
{
    tt_error_info err;
    int rc;

    close(out->fd);
    out->fd = -1;
    tool_error_info_init(&err);
    rc = tt_recover(src, out->tmp, res, &err);
    if (rc != TT_OK) {
        tool_output_discard(out);
        tool_error("%s", err.message[0] ? err.message : tt_strerror(rc));
        return rc == TT_E_IO || rc == TT_E_NOMEM ? TOOL_EXIT_SYSTEM : TOOL_EXIT_CORRUPT;
    }
    return tool_output_commit(prog, out, inputs, force);
}

int cmd_recover(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .options = options,
                                   .take = take_option};
    struct recover_options ro = {0};
    tool_opts o;
    tool_output out;
    tt_recover_result res;
    int rc;

    if ((rc = tool_opts_parse(&o, &verb, &ro, argc, argv)) != TOOL_GO_ON)
        return rc;
    const char *in = o.file;
    char def[4096];
    if (!ro.output) {
        if (default_output(in, def, sizeof def) != 0)
            return tool_usage_error(argv[0], "%s does not end in .PID.partial: give -o OUT", in);
        ro.output = def;
    }
    const char *const inputs[] = {in, NULL};
    if ((rc = tool_output_check(argv[0], ro.output, inputs, ro.force)) != TOOL_EXIT_OK)
        return rc;
    /* a recording that still runs holds the file's lock (partial.c): its file is not ours yet */
    if (tt_partial_probe(AT_FDCWD, in, NULL) == TT_PARTIAL_LIVE)
        return tool_usage_error(argv[0], "the recording that writes %s is still running (it "
                                "holds the file's lock): recover it once it has ended", in);
    tt_error_info err;
    tt_source src;
    tool_error_info_init(&err);
    if ((rc = tt_source_file(&src, in, &err)) != TT_OK)
        return tool_report(in, "cannot open", rc, &err);
    /* 0600 like a recording's own file: a trace holds what the program read and wrote */
    rc = tool_output_open(&out, ro.output, 0600);
    if (rc == TOOL_EXIT_OK)
        rc = recover_into(argv[0], &src, &out, inputs, ro.force, &res);
    tt_source_close(&src);
    if (rc != TOOL_EXIT_OK)
        return rc;
    tool_print_text(stdout, in, strlen(in));
    printf(": recovered %" PRIu64 " events in %" PRIu64 " chunks of %u threads into ", res.events,
           res.chunks, res.threads);
    tool_print_text(stdout, ro.output, strlen(ro.output));
    printf("\ndamage began at offset %" PRIu64 ": ", res.damage_offset);
    tool_print_text(stdout, res.message, strnlen(res.message, sizeof res.message));
    fputc('\n', stdout);
    if (res.dropped_events)
        printf("dropped %" PRIu64 " events with a split payload that did not arrive whole\n",
               res.dropped_events);
    return tool_finish_stdout(TOOL_EXIT_OK);
}
