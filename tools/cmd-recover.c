/* tinytrace recover — a valid trace from the temporary file of a run that died (tt_recover). */
#include "opts.h"
#include "tool.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "Usage: tinytrace recover FILE.PID.partial [-o OUT]\n"
    "\n"
    "Turns the temporary file that a recording leaves when its process dies (even by SIGKILL)\n"
    "into a valid trace: every whole chunk up to the first damaged one, a thread table rebuilt\n"
    "from them, and a manifest marked recovered. Function and thread names are written only when\n"
    "a recording closes, so a recovered trace has ids without names. OUT defaults to FILE (the\n"
    "name without .PID.partial). Prints how many events and chunks were saved and where the\n"
    "damage began.\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT    where to write the recovered trace\n"
    "  -h, --help          print this help\n"
    "\n"
    "Exits 0 when a trace was written, 2 for a usage error, 3 when FILE is not a recording's\n"
    "temporary file (or was closed), 6 when a file cannot be read or written.\n";

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

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    if (c != 'o')
        return tool_usage_hint(prog);
    *(const char **)ctx = arg; /* --output */
    return TOOL_EXIT_OK;
}

int cmd_recover(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .options = options,
                                   .take = take_option};
    const char *output = NULL;
    tool_opts o;
    int c;

    if ((c = tool_opts_parse(&o, &verb, &output, argc, argv)) != TOOL_GO_ON)
        return c;
    const char *in = o.file;
    char def[4096];
    if (!output) {
        if (default_output(in, def, sizeof def) != 0)
            return tool_usage_error(argv[0], "%s does not end in .PID.partial: give -o OUT", in);
        output = def;
    }
    /* a recording that still runs holds the file's lock (partial.c): its file is not ours yet */
    if (tt_partial_probe(AT_FDCWD, in, NULL) == TT_PARTIAL_LIVE)
        return tool_usage_error(argv[0], "the recording that writes %s is still running (it "
                                "holds the file's lock): recover it once it has ended", in);
    tt_error_info err;
    tool_error_info_init(&err);
    tt_source src;
    if (tt_source_file(&src, in, &err) != TT_OK) {
        tool_error("%s", err.message);
        return TOOL_EXIT_SYSTEM;
    }
    tt_recover_result res;
    int rc = tt_recover(&src, output, &res, &err);
    tt_source_close(&src);
    if (rc != TT_OK) {
        tool_error("%s", err.message);
        return rc == TT_E_IO || rc == TT_E_NOMEM ? TOOL_EXIT_SYSTEM : TOOL_EXIT_CORRUPT;
    }
    printf("%s: recovered %" PRIu64 " events in %" PRIu64 " chunks of %u threads into %s\n", in,
           res.events, res.chunks, res.threads, output);
    printf("damage began at offset %" PRIu64 ": %s\n", res.damage_offset, res.message);
    if (res.dropped_events)
        printf("dropped %" PRIu64 " events with a split payload that did not arrive whole\n",
               res.dropped_events);
    return tool_finish_stdout(TOOL_EXIT_OK);
}
