/* SPDX-License-Identifier: MIT */
/* tinytrace hunt — record a program run after run until one fails, and keep that one.
 *
 * Each try is a `tinytrace record --quiet` of its own (this binary, run again), with schedule
 * chaos and a seed of its own when --chaos is given, its stdin /dev/null (or --input FILE) and
 * its stdout and stderr caught in a file of the hunt's. A try fails when the program exits
 * non-zero, dies by a signal, or (--fail-if) prints a line that matches the pattern. The first
 * failing try's trace becomes FAIL.tt; the others are deleted as soon as they are judged. The
 * hunt then says which try it was, shows what the run printed, and prints the command that
 * replays it. On a terminal, stderr shows the tries as they go; piped, only the result.
 *
 * A try whose recording did not come out (the tool's own error, not the program's) ends the
 * hunt with that error: a hunt over runs that are not recorded finds nothing worth keeping.
 */
#include "opts.h"
#include "procs.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "Usage: tinytrace hunt [-n MAX] [--chaos] [--fail-if REGEX] [--seed N] [--input FILE]\n"
    "                      [--force] -o FAIL.tt [--] PROG [ARGS...]\n"
    "\n"
    "Records PROG with ARGS under `tinytrace record`, run after run, until one fails: it exits\n"
    "with a non-zero status, is killed by a signal, or (with --fail-if) prints a line on\n"
    "stdout or stderr that matches REGEX (POSIX extended). The failing run's trace is kept as\n"
    "FAIL.tt and the others are deleted; the hunt says which try failed, shows what that run\n"
    "printed and prints the command that replays it. Each run's stdin is /dev/null (or FILE).\n"
    "On a terminal, stderr shows the tries, the failures and the time per try as they go.\n"
    "\n"
    "Options:\n"
    "  -o, --output FAIL.tt  where the failing run's trace goes (required)\n"
    "  -n, --max-tries MAX   give up after MAX runs (1 to 1000000; default 100)\n"
    "  --chaos               record every run with schedule chaos (see tinytrace record\n"
    "                        --chaos), each with a seed of its own\n"
    "  --seed N              the first run's chaos seed (the next runs take N+1, N+2, ...);\n"
    "                        default random\n"
    "  --fail-if REGEX       a run that prints a line matching REGEX fails too\n"
    "  --input FILE          each run reads FILE on its stdin\n"
    "  -f, --force           replace FAIL.tt if it exists (a regular file only)\n"
    "  -h, --help            print this help\n"
    "\n"
    "Exit status: 0 when a failing run was found and kept, 1 when none of MAX runs failed,\n"
    "2 for a bad command line, 6 when a run could not be recorded.\n";

struct hunt {
    const char *output, *input, *fail_if;
    uint64_t max_tries, seed;
    int chaos, have_seed, force;
};

enum { OPT_CHAOS = 256, OPT_SEED, OPT_FAIL_IF, OPT_INPUT };

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct hunt *h = ctx;
    switch (c) {
    case 'o':
        h->output = arg;
        return TOOL_EXIT_OK;
    case 'n':
        return tool_parse_u64(prog, "--max-tries", arg, 1, 1000000, &h->max_tries);
    case OPT_CHAOS:
        h->chaos = 1;
        return TOOL_EXIT_OK;
    case OPT_SEED:
        h->have_seed = 1;
        return tool_parse_u64(prog, "--seed", arg, 0, UINT64_MAX, &h->seed);
    case OPT_FAIL_IF:
        h->fail_if = arg;
        return TOOL_EXIT_OK;
    case OPT_INPUT:
        h->input = arg;
        return TOOL_EXIT_OK;
    case 'f':
        h->force = 1;
        return TOOL_EXIT_OK;
    default:
        return tool_usage_hint(prog);
    }
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

/* One try: `tinytrace record --quiet [--chaos=SEED] -o @trace -- PROG ARGS`, its stdin @in_fd,
 * its stdout and stderr into @out_fd. Returns 0 with its wait status in *@status, or an errno. */
static int run_try(const char *self, const struct hunt *h, uint64_t seed, const char *trace,
                   char **prog_argv, int in_fd, int out_fd, int *status)
{
    char chaos[64];
    snprintf(chaos, sizeof chaos, "--chaos=%" PRIu64, seed);
    size_t n = 0;
    while (prog_argv[n])
        n++;
    char **argv = calloc(n + 8, sizeof *argv);
    if (!argv)
        return ENOMEM;
    size_t k = 0;
    argv[k++] = (char *)self;
    argv[k++] = "record";
    argv[k++] = "--quiet";
    if (h->chaos)
        argv[k++] = chaos;
    argv[k++] = "-o";
    argv[k++] = (char *)trace;
    argv[k++] = "--";
    for (size_t i = 0; i < n; i++)
        argv[k++] = prog_argv[i];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        free(argv);
        return e;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
            _exit(127);
        execv(self, argv);
        _exit(127);
    }
    free(argv);
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR)
            return errno;
    }
    return 0;
}

/* Whether a line of @fd's content (from its start) matches @re. */
static bool output_matches(int fd, const regex_t *re)
{
    FILE *f = fdopen(dup(fd), "r");
    if (!f)
        return false;
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool hit = false;
    while (!hit && (n = getline(&line, &cap, f)) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            line[n - 1] = '\0';
        hit = regexec(re, line, 0, NULL, 0) == 0;
    }
    free(line);
    fclose(f);
    return hit;
}

/* Copies what the failing run printed to stdout (at most the last 64 KiB). */
static void show_output(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0)
        return;
    off_t from = st.st_size > 65536 ? st.st_size - 65536 : 0;
    char buf[8192];
    ssize_t n;
    if (from)
        printf("[... %lld bytes before]\n", (long long)from);
    while ((n = pread(fd, buf, sizeof buf, from)) > 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        from += n;
    }
    fflush(stdout);
}

int cmd_hunt(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"max-tries", required_argument, NULL, 'n'},
        {"chaos", no_argument, NULL, OPT_CHAOS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"fail-if", required_argument, NULL, OPT_FAIL_IF},
        {"input", required_argument, NULL, OPT_INPUT},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .options = options,
                                   .stop_at_operand = 1,
                                   .take = take_option,
                                   .operands = TOOL_OPERANDS_ANY};
    struct hunt h = {.max_tries = 100};
    tool_opts opts;
    int rc;
    if ((rc = tool_opts_parse(&opts, &verb, &h, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (opts.first >= argc)
        return tool_usage_error(argv[0], "missing PROG: tinytrace hunt -o FAIL.tt -- PROG "
                                         "[ARGS...]");
    if (!h.output)
        return tool_usage_error(argv[0], "missing -o FAIL.tt: where the failing run's trace "
                                         "goes");
    regex_t re;
    if (h.fail_if) {
        int e = regcomp(&re, h.fail_if, REG_EXTENDED | REG_NOSUB);
        if (e != 0) {
            char msg[256];
            regerror(e, &re, msg, sizeof msg);
            return tool_usage_error(argv[0], "--fail-if '%s': %s", h.fail_if, msg);
        }
    }
    struct stat st;
    if (lstat(h.output, &st) == 0 && (!h.force || !S_ISREG(st.st_mode)))
        return tool_usage_error(argv[0], "%s exists%s", h.output,
                                S_ISREG(st.st_mode) ? " (--force replaces it)"
                                                    : " and is not a regular file");
    if ((rc = tool_check_output_path(argv[0], h.output, "the trace")) != TOOL_EXIT_OK)
        return rc;
    int in_fd = open(h.input ? h.input : "/dev/null", O_RDONLY | O_CLOEXEC);
    if (in_fd < 0) {
        tool_error("cannot open %s: %s", h.input ? h.input : "/dev/null", strerror(errno));
        return h.input ? TOOL_EXIT_USAGE : TOOL_EXIT_SYSTEM;
    }
    if (!h.have_seed && getrandom(&h.seed, sizeof h.seed, 0) != sizeof h.seed)
        h.seed = (uint64_t)getpid() * 0x9E3779B97F4A7C15u ^ tool_now_ns();
    h.seed %= UINT64_C(1000000000000); /* short enough to type again */

    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        tool_error("cannot find this program (/proc/self/exe): %s", strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }
    self[sl] = '\0';
    /* the tries' traces and output, beside FAIL.tt so that the kept one is renamed in place */
    char trace[PATH_MAX + 64], out[PATH_MAX + 64];
    snprintf(trace, sizeof trace, "%s.hunt-%ld.tt", h.output, (long)getpid());
    snprintf(out, sizeof out, "%s.hunt-%ld.out", h.output, (long)getpid());
    int out_fd = open(out, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out_fd < 0) {
        tool_error("cannot create %s: %s", out, strerror(errno));
        close(in_fd);
        return TOOL_EXIT_SYSTEM;
    }
    unlink(out); /* only the descriptor is needed */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    bool tty = isatty(2);
    uint64_t start = tool_now_ns(), found = 0;
    int status = 0;
    rc = TOOL_EXIT_DIVERGED;
    for (uint64_t i = 1; i <= h.max_tries && !interrupted; i++) {
        uint64_t seed = h.seed + i - 1;
        if (ftruncate(out_fd, 0) != 0 || lseek(out_fd, 0, SEEK_SET) != 0)
            break;
        unlink(trace);
        int e = run_try(self, &h, seed, trace, argv + opts.first, in_fd, out_fd, &status);
        if (e != 0) {
            tool_error("cannot run try %" PRIu64 ": %s", i, strerror(e));
            rc = TOOL_EXIT_SYSTEM;
            break;
        }
        if (interrupted)
            break;
        bool recorded = access(trace, F_OK) == 0;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (!recorded) {
            tool_error("try %" PRIu64 " was not recorded (tinytrace record exited with %d); "
                       "what it printed:", i, code);
            fflush(stderr);
            show_output(out_fd);
            rc = TOOL_EXIT_SYSTEM;
            break;
        }
        bool failed = code != 0 || (h.fail_if && output_matches(out_fd, &re));
        if (tty) {
            uint64_t per = (tool_now_ns() - start) / i;
            fprintf(stderr, "\rtinytrace: hunt: %" PRIu64 " of %" PRIu64 " tries, %d failed, "
                    "%" PRIu64 ".%03" PRIu64 " s per try ",
                    i, h.max_tries, failed ? 1 : 0, per / 1000000000u, per / 1000000u % 1000u);
        }
        if (!failed) {
            unlink(trace);
            tool_procs_remove(trace);
            continue;
        }
        if (tty)
            fputc('\n', stderr);
        if (rename(trace, h.output) != 0 || tool_procs_rename(trace, h.output) != 0) {
            tool_error("cannot rename %s to %s: %s", trace, h.output, strerror(errno));
            rc = TOOL_EXIT_SYSTEM;
            break;
        }
        found = i;
        char how[128];
        if (code != 0)
            snprintf(how, sizeof how, "%s %d", code > 128 ? "was killed by signal"
                                                          : "exited with status",
                     code > 128 ? code - 128 : code);
        else
            snprintf(how, sizeof how, "printed a line matching --fail-if");
        if (h.chaos)
            fprintf(stderr, "tinytrace: hunt: try %" PRIu64 " failed (the program %s), with "
                    "chaos seed %" PRIu64 "; its recording is %s. It printed:\n",
                    i, how, seed, h.output);
        else
            fprintf(stderr, "tinytrace: hunt: try %" PRIu64 " failed (the program %s); its "
                    "recording is %s. It printed:\n", i, how, h.output);
        fflush(stderr);
        show_output(out_fd);
        /* the command as it can be typed: "tinytrace" when that is this program */
        char found_path[PATH_MAX];
        const char *cmd = tool_find_program("tinytrace", NULL, found_path, sizeof found_path) == 0
                                  && strcmp(found_path, self) == 0
                              ? "tinytrace"
                              : self;
        fputs("tinytrace: replay it with: ", stderr);
        tool_print_text(stderr, cmd, strlen(cmd));
        fputs(" replay ", stderr);
        tool_print_text(stderr, h.output, strlen(h.output));
        fputc('\n', stderr);
        rc = TOOL_EXIT_OK;
        break;
    }
    unlink(trace);
    tool_procs_remove(trace);
    close(out_fd);
    close(in_fd);
    if (h.fail_if)
        regfree(&re);
    if (interrupted) {
        if (tty)
            fputc('\n', stderr);
        tool_error("interrupted; nothing kept");
        return 128 + interrupted;
    }
    if (!found && rc == TOOL_EXIT_DIVERGED) {
        if (tty)
            fputc('\n', stderr);
        fprintf(stderr, "tinytrace: hunt: none of %" PRIu64 " tries failed%s\n", h.max_tries,
                h.chaos ? "" : " (try --chaos: it perturbs the schedule)");
    }
    return rc;
}
