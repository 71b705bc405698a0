/* SPDX-License-Identifier: MIT */
/* tinytrace gc — removes the temporary files of recordings whose process is gone.
 *
 * A recording is written as "<file>.<pid>.partial" and renamed on close; a process killed by
 * SIGKILL (or one that called _exit from a child) leaves the partial file behind. gc removes
 * such a file only when all of these hold (tt_partial_probe): its name ends in ".<pid>.partial",
 * it is a regular file (not followed through a symlink) that starts with the tinytrace magic,
 * and no recording holds its lock. The writer holds an open-file-description lock on the file
 * for the whole recording, so a live recording's file is never touched, in this PID namespace or
 * another one (a container), whatever pid its name carries. What cannot be removed is reported,
 * and gc still exits 0: it is a cleanup, not a check.
 */
#include "opts.h"
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "Usage: tinytrace gc [--dry-run] [DIR]\n"
    "\n"
    "Removes the temporary files (NAME.PID.partial) that recordings of dead processes left in\n"
    "DIR (default: the current directory). A file of a living process, a file that is not a\n"
    "tinytrace trace, and a symlink are never removed. Use `tinytrace recover` first to save\n"
    "what such a file holds.\n"
    "\n"
    "Options:\n"
    "  -n, --dry-run       only say what would be removed\n"
    "  -h, --help          print this help\n"
    "\n"
    "Prints one line per file it removed, kept or could not remove. Exits 0 even when some file\n"
    "could not be removed; 2 for a usage error, 6 when DIR cannot be read.\n";

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    (void)arg;
    if (c != 'n')
        return tool_usage_hint(prog);
    *(int *)ctx = 1; /* --dry-run */
    return TOOL_EXIT_OK;
}

/* "WHAT DIR/NAME", escaped: a file name is whatever bytes someone put in the directory. */
static void print_file(const char *what, const char *dir, const char *name)
{
    fputs(what, stdout);
    fputc(' ', stdout);
    tool_print_text(stdout, dir, strlen(dir));
    fputc('/', stdout);
    tool_print_text(stdout, name, strlen(name));
}

int cmd_gc(int argc, char **argv)
{
    static const struct option options[] = {
        {"dry-run", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .options = options,
                                   .take = take_option,
                                   .operands = TOOL_OPERANDS_ANY};
    tool_opts o;
    int rc, dry = 0;

    if ((rc = tool_opts_parse(&o, &verb, &dry, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (argc - o.first > 1)
        return tool_usage_error(argv[0], "takes at most one DIR, not %d", argc - o.first);
    const char *dir = o.first < argc ? argv[o.first] : ".";
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        fputs("tinytrace gc: cannot read ", stderr);
        tool_print_text(stderr, dir, strlen(dir));
        fprintf(stderr, ": %s\n", strerror(e));
        return TOOL_EXIT_SYSTEM;
    }
    int dfd = dirfd(d);
    unsigned removed = 0, kept = 0, failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = 0;
        tt_partial_state st = tt_partial_probe(dfd, e->d_name, &pid);
        if (st == TT_PARTIAL_NONE)
            continue;
        if (st == TT_PARTIAL_LIVE) {
            print_file("kept", dir, e->d_name);
            fputs(": its recording is alive (it holds the file's lock)\n", stdout);
            kept++;
            continue;
        }
        if (dry) {
            print_file("would remove", dir, e->d_name);
            printf(" (process %ld is gone)\n", pid);
            continue;
        }
        if (unlinkat(dfd, e->d_name, 0) != 0) {
            int err = errno;
            print_file("could not remove", dir, e->d_name);
            printf(": %s\n", strerror(err));
            failed++;
            continue;
        }
        print_file("removed", dir, e->d_name);
        printf(" (process %ld is gone)\n", pid);
        removed++;
    }
    closedir(d);
    fflush(stdout);
    fprintf(stderr, "tinytrace gc: %u removed, %u kept (live), %u could not be removed\n", removed,
            kept, failed);
    return tool_finish_stdout(TOOL_EXIT_OK);
}
