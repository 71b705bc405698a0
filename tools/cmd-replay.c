/* SPDX-License-Identifier: MIT */
/* tinytrace replay — run a recorded program again against its recording.
 *
 * Before anything runs, the tool makes sure the run can mean something:
 *   1. the trace reads and verifies whole (every chunk and checksum: a replay must not stop half
 *      way through a program because of a damaged file);
 *   2. the command line and the working directory come from the META objects the runtime
 *      stored while recording ("cwd=…", "argc=…", "argv[i]=…"), unless `-- PROG ARGS` is given;
 *   3. the program file that will run — found like execvp finds it, following a "#!" line to its
 *      interpreter, which is what the runtime saw as the main executable — carries the GNU
 *      build-id of the manifest; another build is refused (exit 4) naming both ids, unless
 *      --allow-build-mismatch;
 *   4. the TINYTRACE_* environment passes tt_config_from_env, as the runtime will read it.
 *
 * The runtime in the program does the replay itself and leaves its verdict in a JSON report
 * (TINYTRACE_REPORT, a file in a private temporary directory; protocol.h holds every name and
 * value the two sides share). The tool learns the outcome only from that report, never from the
 * program's exit status, which belongs to the program: a program that fails in the same way as
 * when it was recorded still *matched*.
 *
 * The manifest's caller string, written by `tinytrace record`, says which optional calls were
 * recorded (--alloc, --check-output): the replay must interpose the same calls to meet the same
 * events, so those settings follow the recording, not the replay's command line.
 */
#include "merge.h"
#include "meta.h"
#include "opts.h"
#include "procs.h"
#include "protocol.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPORT_MAX (16u << 20)

/* The help up to the debugger's options; debugger_help prints the rest as the same text (one
 * string would be longer than the 4095 characters C promises). */
static const char usage[] =
    "Usage: tinytrace replay FILE [--report OUT.json [--force]] [--keep-going] [--ordered]\n"
    "                        [--no-check-output] [--trust] [--aslr] [--real-sleep]\n"
    "                        [--allow-build-mismatch] [--gdb [--gdb-arg ARG]...]\n"
    "                        [--stop-at [THREAD:]SEQ|FUNCTION[@N]] [-- PROG [ARGS...]]\n"
    "\n"
    "Runs the program recorded in trace FILE again, under the tinytrace runtime: the calls\n"
    "through which it reads its environment return the recorded results, and every call, and\n"
    "what it writes to stdout and stderr, is compared with the recording. Without\n"
    "`-- PROG ARGS` the recorded command line runs, in the recorded working directory if it\n"
    "still exists (else in the current one), and is printed first; with it, PROG runs here\n"
    "instead. A recorded command line runs only from a trace this user recorded on this\n"
    "machine (its signature is this user's key's): any other needs --trust or `-- PROG`.\n"
    "\n"
    "Before PROG runs, FILE is verified whole, and PROG's GNU build-id is compared with the\n"
    "recorded one: another build is refused, naming both ids.\n"
    "\n"
    "Options:\n"
    "  -r, --report OUT.json      also write the runtime's report as JSON to OUT.json:\n"
    "                             {\"status\": \"" TT_REPORT_STATUS_MATCHED "\"|\""
    TT_REPORT_STATUS_DIVERGED "\"|\"" TT_REPORT_STATUS_UNCONSUMED "\"|\"" TT_REPORT_STATUS_ERROR
    "\",\n"
    "                             \"divergences\", \"message\", \"error\", \"thread\", \"seq\",\n"
    "                             \"reason\", \"expected\", \"actual\", \"history\",\n"
    "                             \"backtrace\", ...}; only \"status\" is always there.\n"
    "                             Written on every exit but a usage error (\"error\" when\n"
    "                             PROG never ran); OUT.json may not be FILE itself\n"
    "  -k, --keep-going           count divergences instead of stopping at the first\n"
    "  --ordered                  also enforce the recorded interleaving of threads\n"
    "  --no-check-output          do not compare what PROG writes to stdout and stderr (by\n"
    "                             default it is compared when FILE recorded it)\n"
    "  -c, --check-output         compare it (the default; refused when FILE was recorded\n"
    "                             without it)\n"
    "  --trust                    run the command line FILE names although FILE was not\n"
    "                             recorded by this user on this machine\n"
    "  --aslr                     keep address-space randomization (off by default, as when\n"
    "                             recording, unless FILE was recorded with --aslr)\n"
    "  --allow-build-mismatch     run PROG even if its build-id differs from the recorded one\n"
    "  --real-sleep               the sleeps sleep for real (by default a recorded sleep\n"
    "                             returns at once, with its recorded result)\n"
    "  --process P                replay one process of the recorded tree alone (\"root/2@1\",\n"
    "                             its recorded pid, or its program's name; tinytrace info\n"
    "                             lists them): every input from the recording, its children\n"
    "                             not started, the other processes not run\n"
    "  -f, --force                replace OUT.json if it exists (a regular file only)\n";

/* The rest of the help, from the debugger's options on: printed after usage[] as one text. */
static void debugger_help(FILE *f)
{
    fputs("  --gdb                      run the replay under gdb (from PATH), with the recorded\n"
          "                             inputs fed in as without it: it stops at the first\n"
          "                             divergence, before the diverging call returns, prints the\n"
          "                             report and selects the program's frame that made the\n"
          "                             call (a breakpoint on tt_divergence_break, and\n"
          "                             tinytrace-gdb.py, installed with the tool)\n"
          "  --gdb-arg ARG              pass ARG to gdb (before --args), e.g. --gdb-arg=-batch\n"
          "                             --gdb-arg=-x --gdb-arg=CMDS; may repeat; needs --gdb\n"
          "  --stop-at WHERE            stop the replay where the call that matches a recorded\n"
          "                             event is made, before it returns: [THREAD:]SEQ (a\n"
          "                             thread's sequence number, as dump shows it; THREAD 0 when\n"
          "                             not given), or FUNCTION[@N], the N-th call of FUNCTION in\n"
          "                             the recorded order (1 when not given). Under --gdb a stop\n"
          "                             like a divergence's; without it, a SIGTRAP there for any\n"
          "                             debugger attached (none: the replay goes on)\n"
          "  --no-demangle              name C++ functions in the verdict as recorded (mangled)\n",
          f);
    fputs("  -h, --help                 print this help\n"
          "\n"
          "Environment: TINYTRACE_PRELOAD names the runtime library (default: found next to the\n"
          "tool); other TINYTRACE_* settings pass through and are checked before PROG runs.\n"
          "\n"
          "Prints how PROG ended (\"the program exited with status N\") and the verdict on stderr;\n"
          "a divergence is reported by the runtime with the expected and the actual call, the last\n"
          "matched events and a backtrace. Exits 0 when the replay matched the recording (whatever\n"
          "PROG's own status), 8 when everything it compared matched but processes ran live that\n"
          "it could not compare (children the runtime does not follow: the verdict names the\n"
          "first), or synchronization it could not order (the recorder's registry was full), 1\n"
          "when it diverged (the output included), 5 when PROG ended before the\n"
          "recording did, 4 when PROG is another build, 3 when FILE is corrupt or truncated, 7 when\n"
          "it is marked incomplete, 2 for a bad command line or a command refused as untrusted,\n"
          "6 for a system error or when PROG ended without leaving a report (killed by a signal\n"
          "before the runtime could write it, or by gdb before the end).\n", f);
}

enum { OPT_ORDERED = 256, OPT_ALLOW_MISMATCH, OPT_TRUST, OPT_NO_OUTPUT, OPT_ASLR,
       OPT_REAL_SLEEP, OPT_GDB, OPT_GDB_ARG, OPT_STOP_AT, OPT_PROCESS };

#define GDB_ARGS_MAX 32

static const struct option options[] = {
    {"report", required_argument, NULL, 'r'},
    {"keep-going", no_argument, NULL, 'k'},
    {"ordered", no_argument, NULL, OPT_ORDERED},
    {"check-output", no_argument, NULL, 'c'},
    {"allow-build-mismatch", no_argument, NULL, OPT_ALLOW_MISMATCH},
    {"trust", no_argument, NULL, OPT_TRUST},
    {"no-check-output", no_argument, NULL, OPT_NO_OUTPUT},
    {"aslr", no_argument, NULL, OPT_ASLR},
    {"real-sleep", no_argument, NULL, OPT_REAL_SLEEP},
    {"process", required_argument, NULL, OPT_PROCESS},
    {"force", no_argument, NULL, 'f'},
    {"gdb", no_argument, NULL, OPT_GDB},
    {"gdb-arg", required_argument, NULL, OPT_GDB_ARG},
    {"stop-at", required_argument, NULL, OPT_STOP_AT},
    {NULL, 0, NULL, 0},
};

/* Where "--" ends the tool's own arguments. getopt would move FILE behind it while permuting,
 * so we find it first, skipping the value of an option that takes one ("--report --"). The
 * common --help takes none, so the verb's own tables are all this needs to know. */
static int find_dashes(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return i;
        if (a[0] == '-' && a[1] == '-') {
            size_t n = strlen(a + 2);
            if (strchr(a, '=') != NULL)
                continue;
            for (const struct option *o = options; o->name != NULL; o++)
                if (o->has_arg == required_argument && strncmp(o->name, a + 2, n) == 0) {
                    i++;
                    break;
                }
        } else if (a[0] == '-' && a[1] != '\0') {
            for (const char *c = a + 1; *c != '\0'; c++) {
                const struct option *o = options;
                while (o->name != NULL && o->val != *c)
                    o++;
                if (o->name != NULL && o->has_arg == required_argument) {
                    if (c[1] == '\0')
                        i++; /* the value is the next argument ("-r OUT", "-kr OUT") */
                    break;   /* or the rest of this one ("-rOUT") */
                }
            }
        }
    }
    return argc;
}

/* ---- the recorded command line ---- */

/* The options `tinytrace record` noted in the caller string; 0 when the trace was not made by
 * it (then the replay's own options are all we know). */
static int recorded_options(const tt_manifest *m, int *alloc, int *check_output, int *aslr)
{
    char caller[TT_CALLER_MAX + 1];
    char *save = NULL, *tok;
    size_t n = strlen(TT_CALLER_RECORD);
    memcpy(caller, m->caller, TT_CALLER_MAX);
    caller[TT_CALLER_MAX] = '\0';
    *alloc = *check_output = *aslr = 0;
    if (strncmp(caller, TT_CALLER_RECORD, n) != 0 || (caller[n] != '\0' && caller[n] != ' '))
        return 0;
    for (tok = strtok_r(caller + n, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
        if (strcmp(tok, TT_CALLER_OPT_ALLOC) == 0)
            *alloc = 1;
        else if (strcmp(tok, TT_CALLER_OPT_CHECK_OUTPUT) == 0)
            *check_output = 1;
        else if (strcmp(tok, TT_CALLER_OPT_ASLR) == 0)
            *aslr = 1;
    }
    return 1;
}

/* ---- the build ---- */

static void format_id(char *out, size_t cap, const uint8_t *id, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    size_t n = 0;
    if (len == 0) {
        snprintf(out, cap, "none");
        return;
    }
    for (size_t i = 0; i < len && n + 3 <= cap; i++) {
        out[n++] = digits[id[i] >> 4];
        out[n++] = digits[id[i] & 15];
    }
    out[n] = '\0';
}

/* Reads the build-id of the file that will be the main executable when @path runs: @path
 * itself, or for a "#!" script its interpreter (through `env` to the program it names). The
 * file read is named in @which. Returns 0 or an errno. */
static int program_build(const char *path, const char *dir, tool_elf_info *info, char *which,
                         size_t cap)
{
    char cur[PATH_MAX], next[PATH_MAX];
    int e;

    snprintf(cur, sizeof cur, "%s", path);
    for (int depth = 0;; depth++) {
        const char *base, *word = NULL;
        char args[256], *save = NULL, *tok;

        snprintf(which, cap, "%s", cur);
        if ((e = tool_elf_read(cur, info)) != 0)
            return e;
        if (!info->is_script || info->interp[0] == '\0' || depth == 4)
            return 0;
        base = strrchr(info->interp, '/');
        base = base != NULL ? base + 1 : info->interp;
        if (strcmp(base, "env") == 0) {
            /* "#!/usr/bin/env [-S] [NAME=VALUE...] prog ..." */
            snprintf(args, sizeof args, "%s", info->interp_arg);
            for (tok = strtok_r(args, " \t", &save); tok != NULL;
                 tok = strtok_r(NULL, " \t", &save))
                if (tok[0] != '-' && strchr(tok, '=') == NULL) {
                    word = tok;
                    break;
                }
            if (word == NULL || tool_find_program(word, dir, next, sizeof next) != 0)
                return 0; /* what env would run is unknown: keep the script's verdict */
        } else if (tool_find_program(info->interp, dir, next, sizeof next) != 0) {
            return 0;
        }
        snprintf(cur, sizeof cur, "%s", next);
    }
}

/* Compares the build of @path with the manifest's. Returns TOOL_EXIT_OK to go on. */
static int check_build(const char *path, const char *dir, const tt_manifest *m, int allow)
{
    tool_elf_info info;
    char which[PATH_MAX], want[2 * TT_BUILD_ID_MAX + 1], have[2 * TOOL_BUILD_ID_MAX + 1];
    size_t want_len = m->build_id_len <= TT_BUILD_ID_MAX ? m->build_id_len : TT_BUILD_ID_MAX;
    size_t cmp_len;
    int e = program_build(path, dir, &info, which, sizeof which);

    if (e != 0) {
        tool_error("cannot read the program %s: %s", which, strerror(e));
        return TOOL_EXIT_SYSTEM;
    }
    if (info.is_elf64 && !info.has_interp) {
        tool_error("cannot replay %s: it is statically linked, and the runtime can only be "
                   "loaded (LD_PRELOAD) into a dynamically linked program", which);
        return TOOL_EXIT_SYSTEM;
    }
    /* the manifest keeps the first TT_BUILD_ID_MAX bytes of a longer id */
    cmp_len = info.build_id_len < TT_BUILD_ID_MAX ? info.build_id_len : TT_BUILD_ID_MAX;
    format_id(want, sizeof want, m->build_id, want_len);
    format_id(have, sizeof have, info.build_id,
              info.build_id_len < TOOL_BUILD_ID_MAX ? info.build_id_len : TOOL_BUILD_ID_MAX);
    if (cmp_len == want_len && memcmp(info.build_id, m->build_id, cmp_len) == 0) {
        if (want_len == 0)
            tool_error("note: neither the recording nor %s has a GNU build-id; cannot check "
                       "that this is the recorded build", which);
        return TOOL_EXIT_OK;
    }
    tool_error("%s has build-id %s, but the recording was made by build-id %s%s%s%s", which,
               have, want, info.build_id_len == 0 ? " (" : "",
               info.build_id_len == 0 ? info.problem : "", info.build_id_len == 0 ? ")" : "");
    if (allow) {
        tool_error("note: --allow-build-mismatch: replaying with another build");
        return TOOL_EXIT_OK;
    }
    tool_error("refusing to replay another build; rebuild the recorded version, or pass "
               "--allow-build-mismatch");
    return TOOL_EXIT_BUILD;
}

/* ---- the report ---- */

/* ---- the report channel ----
 * The runtime hands its verdict to the tool over a socket pair the tool made before the program
 * started: one end is the tool's, the other the program inherits, under a number the runtime
 * learns from TT_ENV_REPORT_FD. The runtime reads a nonce the tool wrote into it, moves the
 * socket out of the program's way (a high descriptor, close-on-exec, guarded against the
 * program's close and dup2) and removes the variable from the environment, then writes each
 * report as one line of JSON carrying the nonce. A line without it did not come from the
 * runtime. No path is opened, so a FIFO or a file the program puts anywhere changes nothing, and
 * the tool reads with deadlines: a child that keeps the socket open cannot hold it. */
struct channel {
    int tool_fd, prog_fd;
    char nonce[33];
    pthread_t reader;
    int reader_started;
    char *buf;
    size_t len, cap;
    int overflow;               /* more than REPORT_MAX bytes came: the rest was dropped */
    _Atomic int stop;           /* the reader gives up at its next look */
};

static void *channel_read(void *arg)
{
    struct channel *c = arg;
    char tmp[8192];
    for (;;) {
        struct pollfd pf = {.fd = c->tool_fd, .events = POLLIN};
        int r = poll(&pf, 1, 50);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            if (atomic_load(&c->stop))
                break;
            continue;
        }
        ssize_t n = read(c->tool_fd, tmp, sizeof tmp);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break; /* every writer is gone */
        if (c->len + (size_t)n > REPORT_MAX) {
            c->overflow = 1;
            continue;
        }
        if (c->len + (size_t)n + 1 > c->cap) {
            size_t nc = c->cap ? c->cap * 2 : 65536;
            while (nc < c->len + (size_t)n + 1)
                nc *= 2;
            char *nb = realloc(c->buf, nc);
            if (nb == NULL) {
                c->overflow = 1;
                continue;
            }
            c->buf = nb;
            c->cap = nc;
        }
        memcpy(c->buf + c->len, tmp, (size_t)n);
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
    }
    return NULL;
}

/* Makes the socket pair and the nonce, and starts reading. */
static int channel_open(struct channel *c)
{
    static const char hex[] = "0123456789abcdef";
    int sv[2];
    uint8_t raw[16];
    char num[16];
    memset(c, 0, sizeof *c);
    c->tool_fd = c->prog_fd = -1;
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        tool_error("cannot make the report channel: %s", strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        c->nonce[2 * i] = hex[raw[i] >> 4];
        c->nonce[2 * i + 1] = hex[raw[i] & 15];
    }
    c->nonce[32] = '\0';
    c->tool_fd = sv[0];
    c->prog_fd = sv[1];
    /* the program's end is inherited (not close-on-exec), out of the program's way, by every
     * process of the tree; the nonce is in the settings every one of them reads */
    int hi = fcntl(c->prog_fd, F_DUPFD, 900);
    if (hi < 0 || write(c->tool_fd, c->nonce, 32) != 32) {
        tool_error("cannot set up the report channel: %s", strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }
    close(c->prog_fd);
    c->prog_fd = hi;
    snprintf(num, sizeof num, "%d", c->prog_fd);
    if (tool_setenv(TT_ENV_REPORT_FD, num) != TOOL_EXIT_OK ||
        tool_setenv(TT_ENV_REPORT_NONCE, c->nonce) != TOOL_EXIT_OK)
        return TOOL_EXIT_SYSTEM;
    if (pthread_create(&c->reader, NULL, channel_read, c) != 0) {
        tool_error("cannot start reading the report channel");
        return TOOL_EXIT_SYSTEM;
    }
    c->reader_started = 1;
    return TOOL_EXIT_OK;
}

/* After the program ended: the tool's copy of its end goes, the reader gets up to @ms to see
 * the end of what the runtime wrote, then stops. */
static void channel_close(struct channel *c, int ms)
{
    if (c->prog_fd >= 0)
        close(c->prog_fd);
    c->prog_fd = -1;
    if (c->reader_started) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += ms / 1000;
        dl.tv_nsec += (long)(ms % 1000) * 1000000;
        if (dl.tv_nsec >= 1000000000) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000;
        }
        if (pthread_timedjoin_np(c->reader, NULL, &dl) != 0) {
            atomic_store(&c->stop, 1); /* a descendant still holds the program's end */
            pthread_join(c->reader, NULL);
        }
        c->reader_started = 0;
    }
    if (c->tool_fd >= 0)
        close(c->tool_fd);
    c->tool_fd = -1;
}

/* The last report line that carries the nonce: its bytes (in @c's buffer) and length; NULL if
 * none. *@forged counts the lines that did not. */
/* The process a report line names ("root" when none: a runtime of before the tree). */
static void report_process(const char *line, char *out, size_t cap)
{
    const char *p = strstr(line, "\"process\": \"");
    size_t n = 0;
    if (p) {
        p += 12;
        while (p[n] && p[n] != '"' && n + 1 < cap)
            n++;
        memcpy(out, p, n);
    }
    out[n] = '\0';
    if (!n)
        snprintf(out, cap, "root");
}

/* The length of the line at @at (ended by a newline, or by the NUL a look before put there). */
static size_t line_len(const struct channel *c, size_t at)
{
    size_t n = 0;
    while (at + n < c->len && c->buf[at + n] != '\n' && c->buf[at + n] != '\0')
        n++;
    return n;
}

/* A process that reported with the nonce: its name, where its first report is in the channel
 * (the order they are said in), and its last report. */
struct proc_report {
    char name[224];
    size_t first;
    const char *text;
    size_t len;
};

static int cmp_report_name(const void *a, const void *b)
{
    const struct proc_report *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->first > y->first) - (x->first < y->first);
}

static int cmp_report_same(const void *a, const void *b)
{
    return strcmp(((const struct proc_report *)a)->name, ((const struct proc_report *)b)->name);
}

static int cmp_report_first(const void *a, const void *b)
{
    const struct proc_report *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

/* Every process that reported with the nonce, once, in the order of its first report, with
 * its last one: one pass over the channel and two sorts (a tree of thousands of processes
 * writes thousands of lines; looking each process up in all of them was quadratic). Returns
 * them malloc'd, *@n of them; NULL (and 0) when there are none or no memory. */
static struct proc_report *channel_reports(struct channel *c, size_t *n)
{
    char key[48];
    size_t k = 0, cap = 0;
    struct proc_report *v = NULL;
    snprintf(key, sizeof key, "\"nonce\": \"%s\"", c->nonce);
    *n = 0;
    for (size_t at = 0; c->buf != NULL && at < c->len;) {
        size_t len = line_len(c, at);
        if (len) {
            c->buf[at + len] = '\0';
            if (strstr(c->buf + at, key) != NULL) {
                if (k == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    struct proc_report *nv = realloc(v, nc * sizeof *nv);
                    if (!nv) {
                        free(v);
                        return NULL;
                    }
                    v = nv;
                    cap = nc;
                }
                report_process(c->buf + at, v[k].name, sizeof v[k].name);
                v[k].first = at;
                v[k].text = c->buf + at;
                v[k++].len = len;
            }
        }
        at += len + 1;
    }
    if (!v)
        return NULL;
    qsort(v, k, sizeof *v, cmp_report_name);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && !strcmp(v[m - 1].name, v[i].name)) {
            v[m - 1].text = v[i].text; /* a later report of the same process */
            v[m - 1].len = v[i].len;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof *v, cmp_report_first);
    *n = m;
    return v;
}

/* The last line of process @proc (NULL: any) that carries the nonce. */
static const char *channel_report(struct channel *c, const char *proc, size_t *len,
                                  unsigned *forged)
{
    char key[48];
    const char *best = NULL;
    snprintf(key, sizeof key, "\"nonce\": \"%s\"", c->nonce);
    *forged = 0;
    for (size_t at = 0; c->buf != NULL && at < c->len;) {
        size_t n = line_len(c, at);
        if (n) {
            c->buf[at + n] = '\0';
            char name[224];
            report_process(c->buf + at, name, sizeof name);
            if (strstr(c->buf + at, key) != NULL && proc && strcmp(name, proc) != 0) {
                /* another process's */
            } else if (strstr(c->buf + at, key) != NULL) {
                best = c->buf + at;
                *len = n;
            } else {
                (*forged)++;
            }
        }
        at += n + 1;
    }
    return best;
}

static int write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "w");
    int e;
    if (f == NULL)
        return errno;
    if (fwrite(data, 1, len, f) != len || fputc('\n', f) == EOF) {
        e = errno;
        fclose(f);
        return e ? e : EIO;
    }
    if (fclose(f) != 0)
        return errno;
    return 0;
}

/* The report of a replay that left none, so that --report always holds one. */
static int write_error_report(const char *path, const char *message)
{
    FILE *f = fopen(path, "w");
    tool_json j;
    if (f == NULL)
        return errno;
    tj_init(&j, f);
    tj_object_begin(&j, NULL);
    tj_str(&j, "status", TT_REPORT_STATUS_ERROR);
    tj_str(&j, "message", message);
    tj_object_end(&j);
    tj_newline(&j);
    if (ferror(f)) {
        fclose(f);
        return EIO;
    }
    return fclose(f) != 0 ? errno : 0;
}

/* The tt_error code named @name ("TT_E_DIVERGED"), or 1 when it names none. */
static int error_code(const char *name)
{
    for (int c = 0; c >= -128; c--) {
        const char *n = tt_error_name(c);
        if (n != NULL && strcmp(n, name) == 0)
            return c;
    }
    return 1;
}

static void print_field(const char *label, const char *s, size_t n)
{
    if (s == NULL || n == 0)
        return;
    fputs(label, stderr);
    tool_print_names(stderr, s, n); /* the runtime's message names functions as recorded */
}

/* "tinytrace:   expected: exit FUNCTION" for the report's event @key: its function as the tool
 * names functions (demangled), which the runtime's own text cannot. */
static void print_report_event(const tool_jdoc *d, const char *key, const char *label)
{
    const tool_jvalue *ev = tool_json_member(d, tool_json_root(d), key);
    size_t kind_len = 0, fn_len = 0;
    const char *kind = tool_json_str(d, ev, "kind", &kind_len);
    const char *fn = tool_json_str(d, ev, "function", &fn_len);
    char at[512];
    if (kind == NULL)
        return;
    fprintf(stderr, "tinytrace:   %s ", label);
    tool_print_text(stderr, kind, kind_len);
    print_field(" ", fn, fn_len);
    if (fn != NULL && tool_names_program_location(fn, fn_len, at, sizeof at) == 0)
        print_field(" at ", at, strlen(at));
    fputc('\n', stderr);
}

struct plan;
struct recorded;
static void program_names(const struct plan *pl, const struct recorded *rec);

struct replay {
    const char *file;
    const char *report_out;
    int keep_going, ordered, check_output, no_check_output, allow_mismatch, trust, aslr;
    int force, real_sleep;
    char **prog_argv; /* after "--", or NULL */
    int gdb;
    const char *gdb_args[GDB_ARGS_MAX];
    int ngdb_args;
    const char *stop_at;      /* --stop-at as given */
    char stop_tp[48];         /* ... resolved: "THREAD:SEQ" for the runtime */
    const char *process;    /* --process P, or NULL: the whole tree */
    const char *trace;      /* the trace that runs first: FILE, or P's */
    char trace_buf[PATH_MAX];
    char image[224];        /* P's image ("root/2@1"), "root" for the tree */
};

/* What the recording says of itself, beyond its manifest. */
struct recorded {
    tt_manifest m;
    int trusted;            /* its signature is this user's key's */
    char why[320];          /* why not */
    int64_t calls;          /* events a matched replay meets (not structural); -1: unknown */
    const char *untraced;   /* the first process that ran unrecorded, or NULL */
    uint64_t other_live;    /* processes the other processes of the tree ran live */
    char other_first[512];  /* ... the first of them */
    uint64_t sync_unordered; /* sync operations the recording could not give an object */
    int tree_failed;        /* another process of the tree did not match (said already) */
    int64_t crashes;        /* crash events the recording holds; -1: unknown (no index) */
    int count_later;        /* no index tables: calls and crashes are counted from the events
                             * while the program runs (run, count_thread) */
};

/* A report of a match holds the runtime's counts: they must agree with the recording. A
 * program's forged line would have to agree too, and carry the nonce. Returns 0, or prints
 * why not and returns -1. @calls -1: the recording's count is not known (no index tables). */
static int check_counts(const tool_jdoc *d, const struct recorded *rec, int check_output,
                        int keep_going)
{
    const tool_jvalue *root = tool_json_root(d);
    uint64_t matched = 0, threads = 0;
    if (tool_json_u64(tool_json_member(d, root, "matched"), &matched) != 0 ||
        tool_json_u64(tool_json_member(d, root, "threads"), &threads) != 0) {
        tool_error("the replay report of a match has no counts: it did not come from the runtime");
        return -1;
    }
    if (threads > rec->m.thread_count + (uint64_t)rec->m.threads_refused) {
        tool_error("the replay report counts %" PRIu64 " threads, the recording has %u",
                   threads, rec->m.thread_count);
        return -1;
    }
    /* every recorded call met once; a thread still leaving its last call may not have counted
     * it yet, so up to one a thread may be missing, never one too many */
    if (rec->calls >= 0 && check_output && !keep_going &&
        (matched > (uint64_t)rec->calls || matched + threads < (uint64_t)rec->calls)) {
        tool_error("the replay report says %" PRIu64 " calls matched; the recording has %" PRId64
                   ": the verdict cannot be trusted", matched, rec->calls);
        return -1;
    }
    return 0;
}

/* Prints the verdict of report @d and returns the exit code for it. */
static int verdict(const tool_jdoc *d, const struct replay *o, const struct recorded *rec,
                   int check_output)
{
    const char *file = o->file;
    const tt_manifest *m = &rec->m;
    const tool_jvalue *root = tool_json_root(d);
    size_t status_len = 0, msg_len = 0, err_len = 0, reason_len = 0;
    const char *status = tool_json_str(d, root, "status", &status_len);
    const char *msg = tool_json_str(d, root, "message", &msg_len);
    const char *err = tool_json_str(d, root, "error", &err_len);
    const char *reason = tool_json_str(d, root, "reason", &reason_len);
    uint64_t ndiv = 0, thread = 0, seq = 0, left = 0;
    int has_div = tool_json_u64(tool_json_member(d, root, "divergences"), &ndiv) == 0;
    int has_tp = tool_json_u64(tool_json_member(d, root, "thread"), &thread) == 0 &&
                 tool_json_u64(tool_json_member(d, root, "seq"), &seq) == 0;
    int has_left = tool_json_u64(tool_json_member(d, root, "events_left"), &left) == 0;
    int rc;

    if (status == NULL) {
        tool_error("the replay report has no \"status\"");
        return TOOL_EXIT_SYSTEM;
    }
    fflush(stdout);
    if (strcmp(status, TT_REPORT_STATUS_MATCHED) == 0) {
        if (check_counts(d, rec, check_output, o->keep_going) != 0)
            return TOOL_EXIT_SYSTEM;
        uint64_t live = 0, untraceable = 0;
        size_t first_len = 0;
        tool_json_u64(tool_json_member(d, root, "live_children"), &live);
        tool_json_u64(tool_json_member(d, root, "untraceable_execs"), &untraceable);
        const char *first = tool_json_str(d, root, "first_live", &first_len);
        uint64_t unrec = m->children_untraced + m->execs_untraceable;
        if (live + untraceable > unrec)
            unrec = live + untraceable;
        if (first == NULL || first_len == 0) {
            first = rec->untraced;
            first_len = first ? strlen(first) : 0;
        }
        unrec += rec->other_live;
        if ((first == NULL || first_len == 0) && rec->other_first[0]) {
            first = rec->other_first;
            first_len = strlen(first);
        }
        if (rec->tree_failed) {
            /* the root's own verdict only: the tree's is said after it, never "matched" */
            fprintf(stderr, "tinytrace: process %s matched its recording (", o->image);
            tool_print_text(stderr, file, strlen(file));
            fprintf(stderr, ": %" PRIu64 " events)\n", m->event_count);
            return TOOL_EXIT_OK;
        }
        if (rec->sync_unordered) {
            fputs("tinytrace: replay matched what it compared (", stderr);
            tool_print_text(stderr, file, strlen(file));
            fprintf(stderr, ": %" PRIu64 " events), but %" PRIu64 " synchronization "
                    "operation%s had no object (more objects at once than the recorder's "
                    "registry holds): their order was not enforced\n", m->event_count,
                    rec->sync_unordered, rec->sync_unordered == 1 ? "" : "s");
            return TOOL_EXIT_PARTIAL;
        }
        if (unrec) {
            fputs("tinytrace: replay matched what it compared (", stderr);
            tool_print_text(stderr, file, strlen(file));
            fprintf(stderr, ": %" PRIu64 " events), but %" PRIu64 " process%s ran live, not "
                    "compared", m->event_count, unrec, unrec == 1 ? "" : "es");
            print_field(" (the first: ", first, first_len);
            fputs(first_len ? ")\n" : "\n", stderr);
            return TOOL_EXIT_PARTIAL;
        }
        fputs("tinytrace: replay matched the recording (", stderr);
        tool_print_text(stderr, file, strlen(file));
        fprintf(stderr, ": %" PRIu64 " events)\n", m->event_count);
        return TOOL_EXIT_OK;
    }
    if (strcmp(status, TT_REPORT_STATUS_DIVERGED) == 0) {
        fputs("tinytrace: replay diverged from the recording", stderr);
        if (has_div && ndiv > 1)
            fprintf(stderr, " (%" PRIu64 " divergences)", ndiv);
        if (has_tp)
            fprintf(stderr, " at thread %" PRIu64 ", sequence %" PRIu64, thread, seq);
        if (reason != NULL) {
            fputs(" (", stderr);
            tool_print_text(stderr, reason, reason_len);
            fputc(')', stderr);
        }
        print_field(": ", msg, msg_len);
        fputc('\n', stderr);
        print_report_event(d, "expected", "expected:");
        print_report_event(d, "actual", "actual:  ");
        return TOOL_EXIT_DIVERGED;
    }
    if (strcmp(status, TT_REPORT_STATUS_UNCONSUMED) == 0) {
        fputs("tinytrace: the program ended before the recording did", stderr);
        if (has_left)
            fprintf(stderr, " (%" PRIu64 " events left)", left);
        print_field(": ", msg, msg_len);
        fputc('\n', stderr);
        /* --keep-going: a counted divergence is the verdict (exit 1), the early end a detail */
        if (has_div && ndiv > 0) {
            fprintf(stderr, "tinytrace: replay diverged from the recording (%" PRIu64
                    " divergence%s)\n", ndiv, ndiv > 1 ? "s" : "");
            return TOOL_EXIT_DIVERGED;
        }
        return TOOL_EXIT_EARLY_END;
    }
    if (strcmp(status, TT_REPORT_STATUS_ERROR) == 0) {
        int code = err != NULL ? error_code(err) : 1;
        if (code == TT_E_DIVERGED || code == TT_E_END)
            rc = TOOL_EXIT_DIVERGED;
        else if (code == TT_E_UNCONSUMED)
            rc = TOOL_EXIT_EARLY_END;
        else if (code == 1 || code == TT_OK)
            rc = TOOL_EXIT_SYSTEM;
        else
            rc = tool_exit_for_error(code);
        fputs("tinytrace: replay failed", stderr);
        print_field(": ", msg, msg_len);
        if (err != NULL) {
            fputs(" [", stderr);
            tool_print_text(stderr, err, err_len);
            fputc(']', stderr);
        }
        fputc('\n', stderr);
        return rc;
    }
    fputs("tinytrace: the replay report has an unknown status '", stderr);
    tool_print_text(stderr, status, status_len);
    fputs("'\n", stderr);
    return TOOL_EXIT_SYSTEM;
}

/* ---- --stop-at ---- */

/* --stop-at WHERE into the recorded event the runtime stops at (o->stop_tp, "THREAD:SEQ"):
 * [THREAD:]SEQ as given, checked against the thread table; FUNCTION[@N] by counting the calls
 * of FUNCTION in the recorded order (a merge of every thread, as dump reads them). Reports a
 * mistake and returns its exit code. */
static int resolve_stop(struct replay *o, const char *prog)
{
    const char *w = o->stop_at, *colon = strchr(w, ':');
    uint64_t th = 0, seq = 0, nth = 1;
    int is_tp = 1;
    for (const char *c = w; *c && is_tp; c++)
        is_tp = (*c >= '0' && *c <= '9') || (c == colon && c != w);
    tool_trace t;
    int rc = tool_trace_start(&t, o->file, NULL, TT_CURSORS_PER_THREAD, TOOL_TRACE_OPEN);
    if (rc != TOOL_EXIT_OK) {
        tool_trace_close(&t);
        return rc;
    }
    if (is_tp && *w) {
        if ((colon && (tool_parse_dec(w, (size_t)(colon - w), &th) != 0 ||
                       tool_parse_dec(colon + 1, strlen(colon + 1), &seq) != 0)) ||
            (!colon && tool_parse_dec(w, strlen(w), &seq) != 0)) {
            tool_trace_close(&t);
            return tool_usage_error(prog, "--stop-at %s: not [THREAD:]SEQ", w);
        }
        const tt_thread_entry *e = th < t.m.thread_count ? tt_reader_thread(t.r, (uint32_t)th)
                                                         : NULL;
        if (!e || seq >= e->event_count) {
            tool_trace_close(&t);
            return tool_usage_error(prog, "--stop-at %s: the recording has no thread %" PRIu64
                                    " event %" PRIu64, w, th, seq);
        }
    } else {
        const char *at = strrchr(w, '@');
        size_t n = at ? (size_t)(at - w) : strlen(w);
        char name[1024];
        if (n == 0 || n >= sizeof name ||
            (at && (tool_parse_dec(at + 1, strlen(at + 1), &nth) != 0 || nth == 0))) {
            tool_trace_close(&t);
            return tool_usage_error(prog, "--stop-at %s: not FUNCTION[@N] (N from 1)", w);
        }
        memcpy(name, w, n);
        name[n] = '\0';
        uint32_t fn = tt_reader_find_object(t.r, TT_OBJ_FUNCTION, name);
        if (fn == 0) {
            tool_trace_close(&t);
            return tool_usage_error(prog, "--stop-at %s: the recording has no function %s", w,
                                    name);
        }
        tool_merge mg;
        tt_error_info err;
        const tt_event *ev;
        uint64_t calls = 0;
        int mrc = tool_merge_init(&mg, t.r, t.cap.cursors);
        tool_error_info_init(&err);
        for (uint32_t c = 0; mrc == TT_OK && c < t.cap.cursors; c++)
            mrc = tool_merge_add(&mg, c, &err);
        while (mrc == TT_OK && (ev = tool_merge_head(&mg)) != NULL) {
            if (ev->kind == TT_EV_ENTER && ev->sp.function == fn && ++calls == nth) {
                th = ev->tp.thread;
                seq = ev->tp.seq;
                break;
            }
            mrc = tool_merge_next(&mg, &err);
        }
        tool_merge_free(&mg);
        if (mrc != TT_OK) {
            rc = tool_report(t.path, "looking for --stop-at", mrc, &err);
            tool_trace_close(&t);
            return rc;
        }
        if (calls < nth) {
            tool_trace_close(&t);
            return tool_usage_error(prog, "--stop-at %s: %s has %" PRIu64 " call%s in the "
                                    "recording", w, name, calls, calls == 1 ? "" : "s");
        }
    }
    tool_trace_close(&t);
    snprintf(o->stop_tp, sizeof o->stop_tp, "%" PRIu64 ":%" PRIu64, th, seq);
    return TOOL_EXIT_OK;
}

/* ---- the verb ---- */

/* What will run: the command line, its directory, the program file, and the settings that
 * follow the recording. */
struct plan {
    char **argv;
    const char *dir;       /* NULL: the current one */
    char path[PATH_MAX];   /* argv[0] found like execvp, or the recorded execve path */
    int known;             /* the caller string says how the trace was recorded */
    int alloc, check_output, aslr;
    char **env;            /* the recorded environment, or NULL: the tool's own */
};

/* ---- --gdb ----
 * gdb runs the program as it would run without it: in the same directory, with the same
 * environment and arguments, and the runtime's settings fed in the same way. gdb itself must
 * not get the runtime: its own environment is the program's without LD_PRELOAD and the
 * settings' variable, and it hands those two to the program (`set environment`, appended last
 * as they are without gdb); it starts the program without a shell and, unless --aslr, without
 * address-space randomization, as the tool does. It breaks at tt_divergence_break, which the
 * runtime calls at a divergence and at --stop-at; tinytrace-gdb.py, found next to the tool or
 * where it is installed, prints the report there and selects the program's frame. */

/* tinytrace-gdb.py next to the tool (the build tree), under ../share, or installed; NULL. */
static const char *gdb_script(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *rel[] = { "tinytrace-gdb.py", "../share/tinytrace/tinytrace-gdb.py" };
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            int len = snprintf(out, cap, "%s/%s", exe, rel[i]);
            if (len > 0 && (size_t)len < cap && access(out, R_OK) == 0)
                return out;
        }
    }
    snprintf(out, cap, "%s", TT_GDB_SCRIPT_INSTALL_PATH);
    return access(out, R_OK) == 0 ? out : NULL;
}

/* The value of @name in @envp, or NULL. */
static const char *env_value(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
            return envp[i] + n + 1;
    return NULL;
}

/* gdb's command line and environment for the program @path @argv with @envp; malloc'd arrays
 * of pointers into static or caller storage, freed by the caller (the strings of *@gargv at
 * [0, *@owned) are the caller's to free too). */
static int gdb_command(const struct replay *o, const struct plan *p, char *const *envp,
                       char *gdb, char ***gargv, char ***genv, size_t *owned)
{
    size_t n = 0, ne = 0, k = 0;
    while (envp[n])
        n++;
    while (p->argv[ne])
        ne++;
    char **env = calloc(n + 1, sizeof *env);
    char **av = calloc(24 + (size_t)o->ngdb_args + ne + 1, sizeof *av);
    char **own = NULL;
    if (!env || !av)
        goto nomem;
    for (size_t i = 0, j = 0; i < n; i++)
        if (strncmp(envp[i], "LD_PRELOAD=", 11) != 0 &&
            strncmp(envp[i], TT_ENV_RT "=", sizeof TT_ENV_RT) != 0)
            env[j++] = envp[i];
    own = av; /* the -ex strings made here come first */
    const char *pre = env_value(envp, "LD_PRELOAD"), *rt = env_value(envp, TT_ENV_RT);
    char script[PATH_MAX];
    const char *py = gdb_script(script, sizeof script);
    const char *ex[] = {
        "set startup-with-shell off",
        p->aslr ? "set disable-randomization off" : "set disable-randomization on",
        "set breakpoint pending on",
        "break tt_divergence_break",
    };
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        if (!(av[k++] = strdup("-ex")) || !(av[k++] = strdup(ex[i])))
            goto nomem;
    const char *names[] = { "LD_PRELOAD", TT_ENV_RT };
    const char *vals[] = { pre, rt };
    for (size_t i = 0; i < 2; i++) {
        if (!vals[i])
            continue;
        size_t len = strlen(names[i]) + strlen(vals[i]) + 24;
        char *c = malloc(len);
        if (!c)
            goto nomem;
        if (!(av[k++] = strdup("-ex"))) {
            free(c);
            goto nomem;
        }
        snprintf(c, len, "set environment %s=%s", names[i], vals[i]);
        av[k++] = c;
    }
    if (py) {
        if (!(av[k++] = strdup("-x")) || !(av[k++] = strdup(py)))
            goto nomem;
    } else {
        tool_error("note: tinytrace-gdb.py not found: gdb stops at tt_divergence_break; `up` to "
                   "the program's frame");
    }
    *owned = k;
    /* gdb itself first: the strings above are shifted in behind it */
    memmove(av + 2, av, k * sizeof *av);
    av[0] = gdb;
    av[1] = "-q";
    k += 2;
    for (int i = 0; i < o->ngdb_args; i++)
        av[k++] = (char *)o->gdb_args[i];
    av[k++] = "--args";
    av[k++] = (char *)p->path;
    for (size_t i = 1; i < ne; i++)
        av[k++] = p->argv[i];
    av[k] = NULL;
    *gargv = av;
    *genv = env;
    return TOOL_EXIT_OK;
nomem:
    if (own)
        for (size_t i = 0; i < k; i++)
            free(own[i]);
    free(av);
    free(env);
    tool_error("out of memory");
    return TOOL_EXIT_SYSTEM;
}

/* The verdicts of the tree's other processes (not @o->image): each one that did not match is
 * said, naming it, and so is each recorded process that never ran; what they ran live is
 * added to @rec. Returns TOOL_EXIT_OK, or the code of the first that did not match. */
static int other_processes(const struct replay *o, struct channel *ch, struct recorded *rec)
{
    size_t n = 0;
    struct proc_report *r = channel_reports(ch, &n);
    int rc = TOOL_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        const char *name = r[i].name;
        if (!strcmp(name, o->image))
            continue;
        size_t len = r[i].len;
        const char *text = r[i].text;
        tool_jdoc d;
        char why[160];
        if (!text || tool_json_parse(&d, text, len, why, sizeof why) != 0)
            continue;
        const tool_jvalue *root = tool_json_root(&d);
        size_t sl = 0, ml = 0, fl = 0;
        const char *st = tool_json_str(&d, root, "status", &sl);
        const char *msg = tool_json_str(&d, root, "message", &ml);
        const char *first = tool_json_str(&d, root, "first_live", &fl);
        uint64_t live = 0, untraceable = 0;
        tool_json_u64(tool_json_member(&d, root, "live_children"), &live);
        tool_json_u64(tool_json_member(&d, root, "untraceable_execs"), &untraceable);
        int code = TOOL_EXIT_OK;
        if (st && !strcmp(st, TT_REPORT_STATUS_MATCHED)) {
            rec->other_live += live + untraceable;
            if (live + untraceable && first && fl && !rec->other_first[0])
                snprintf(rec->other_first, sizeof rec->other_first, "%.*s (in %s)", (int)fl,
                         first, name);
        } else if (st && !strcmp(st, TT_REPORT_STATUS_UNCONSUMED)) {
            code = TOOL_EXIT_EARLY_END;
            fprintf(stderr, "tinytrace: process %s ended before its recording did", name);
        } else {
            code = st && !strcmp(st, TT_REPORT_STATUS_DIVERGED) ? TOOL_EXIT_DIVERGED
                                                                : TOOL_EXIT_SYSTEM;
            fprintf(stderr, "tinytrace: process %s %s", name,
                    code == TOOL_EXIT_DIVERGED ? "diverged from its recording"
                                               : "could not be replayed");
        }
        if (code != TOOL_EXIT_OK) {
            print_field(": ", msg, ml);
            fputc('\n', stderr);
            if (rc == TOOL_EXIT_OK)
                rc = code;
        }
        tool_json_free(&d);
    }
    /* every recorded image (a trace of its own, finished) must have run */
    tool_proc *v = NULL;
    size_t np = 0;
    if (r)
        qsort(r, n, sizeof *r, cmp_report_name); /* by name now, for the look-ups */
    if (!o->process && tool_procs_read(o->file, &v, &np) == 0) {
        for (size_t i = 1; i < np; i++) {
            struct proc_report key;
            snprintf(key.name, sizeof key.name, "%s", v[i].name);
            bool ran = r && bsearch(&key, r, n, sizeof *r, cmp_report_same) != NULL;
            if (!ran && v[i].file[0] && !v[i].partial) {
                fprintf(stderr, "tinytrace: process %s was recorded but did not run in the "
                        "replay\n", v[i].name);
                if (rc == TOOL_EXIT_OK)
                    rc = TOOL_EXIT_DIVERGED;
            }
        }
    }
    free(v);
    free(r);
    return rc;
}

/* What load_trace takes from the index tables, for a trace that has none (`record` writes
 * none unless --index): the calls a matched replay meets and the crash events, counted from
 * the events themselves, one pass of the reader (about 10 ns an event). */
static int count_calls(tool_trace *t, struct recorded *rec)
{
    uint32_t stall = tt_reader_find_object(t->r, TT_OBJ_FUNCTION, TT_STALL_FUNCTION);
    uint64_t calls = 0, crashes = 0, stalls = 0;
    const tt_event *ev;
    tt_error_info err;
    int rc;
    tool_error_info_init(&err);
    while ((rc = tt_reader_peek_ref(t->r, 0, &ev, &err)) == TT_OK) {
        unsigned k = ev->kind;
        crashes += k == TT_EV_CRASH;
        stalls += stall != 0 && k == TT_EV_ENTER && ev->sp.function == stall;
        calls += k != TT_EV_SESSION_START && k != TT_EV_SESSION_END &&
                 k != TT_EV_THREAD_START && k != TT_EV_THREAD_END;
        tt_reader_advance(t->r, 0);
    }
    if (rc != TT_E_END)
        return tool_report(t->path, NULL, rc, &err);
    /* the tracer's own waits for the budget (an enter and an exit each), which replay steps
     * over, as load_trace takes them off with the tables */
    if (2 * stalls <= calls)
        calls -= 2 * stalls;
    rec->calls = (int64_t)calls;
    rec->crashes = (int64_t)crashes;
    return TOOL_EXIT_OK;
}

/* count_calls on a thread of its own, while the program runs: the tool only waits then, and
 * the counts are needed at the verdict (a pass before the program started was a third of a
 * replay's time on a 2x10^7-event trace). */
struct counter {
    const char *trace;
    struct recorded rec;    /* its calls and crashes are the thread's result */
    int rc;
    pthread_t th;
    int started;
};

static void *count_thread(void *p)
{
    struct counter *c = p;
    tool_trace t;
    c->rc = tool_trace_start(&t, c->trace, NULL, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_OPEN);
    if (c->rc == TOOL_EXIT_OK)
        c->rc = count_calls(&t, &c->rec);
    tool_trace_close(&t);
    return NULL;
}

/* Runs the replay once everything was checked; returns the exit code. */
static int run(const struct replay *o, const struct recorded *rec, const struct plan *p)
{
    int check_output = p->check_output;
    const char *path = p->path, *dir = p->dir;
    char **argv = p->argv, **envp;
    int settings_fd;
    struct channel ch;
    char how[128];
    int rc, e, status = 0;
    pid_t pid = 0;
    tool_jdoc d;
    char why[160];

    struct counter cnt = { .trace = o->trace, .rec = *rec };
    if (rec->count_later) {
        /* the thread takes no signal: the tool's handlers (program.c, forwarding to the
         * program) run on the thread that waits, as for the spares' keeper */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        cnt.started = pthread_create(&cnt.th, NULL, count_thread, &cnt) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!cnt.started) {
            count_thread(&cnt); /* no thread: before the program, then */
            if (cnt.rc != TOOL_EXIT_OK)
                return cnt.rc;
        }
    }
    if ((rc = channel_open(&ch)) != TOOL_EXIT_OK ||
        (rc = tool_child_env(p->env, &envp, &settings_fd)) != TOOL_EXIT_OK) {
        if (cnt.started)
            pthread_join(cnt.th, NULL);
        channel_close(&ch, 0);
        free(ch.buf);
        return rc;
    }
    /* every process of the tree reports; the orphans among them become the tool's, and the
     * verdict waits for all of them */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (o->gdb) {
        char gdb[PATH_MAX], **gargv = NULL, **genv = NULL;
        size_t owned = 0;
        if (tool_find_program("gdb", NULL, gdb, sizeof gdb) != 0) {
            tool_error("--gdb: there is no gdb in PATH (Debian: apt-get install gdb)");
            rc = TOOL_EXIT_SYSTEM;
        } else if ((rc = gdb_command(o, p, envp, gdb, &gargv, &genv, &owned)) == TOOL_EXIT_OK) {
            rc = tool_run_program("gdb", gdb, gargv, genv, dir, p->aslr, &pid, &status);
            for (size_t i = 2; i < owned + 2; i++)
                free(gargv[i]);
        }
        free(gargv);
        free(genv);
    } else {
        rc = tool_run_program(argv[0], path, argv, envp, dir, p->aslr, &pid, &status);
    }
    close(settings_fd);
    free(envp);
    long opids[64];
    int osts[64];
    tool_reap_orphans(opids, osts, 64);
    channel_close(&ch, 2000);
    if (cnt.started) {
        pthread_join(cnt.th, NULL);
        if (rc == TOOL_EXIT_OK && cnt.rc != TOOL_EXIT_OK)
            rc = cnt.rc; /* said by the thread: without the counts no verdict is made */
    }
    if (rc != TOOL_EXIT_OK) {
        free(ch.buf);
        return rc;
    }
    tool_describe_status(status, how, sizeof how);
    size_t len = 0;
    unsigned forged = 0;
    const char *text = channel_report(&ch, o->image, &len, &forged);
    struct recorded rec_all = *rec;
    if (rec->count_later) {
        rec_all.calls = cnt.rec.calls;
        rec_all.crashes = cnt.rec.crashes;
    }
    int others = other_processes(o, &ch, &rec_all);
    rec_all.tree_failed = others != TOOL_EXIT_OK;
    rec = &rec_all;

    fflush(stdout);
    /* the runtime's exit status only words the message (a program may exit with it on its
     * own): the outcome comes from the report */
    if (text != NULL && WIFEXITED(status) && WEXITSTATUS(status) == TT_RT_EXIT_DIVERGED &&
        strstr(text, "\"status\": \"" TT_REPORT_STATUS_MATCHED "\"") == NULL)
        fprintf(stderr, "tinytrace: the program %s (the runtime stopped it)\n", how);
    else if (o->gdb)
        fprintf(stderr, "tinytrace: gdb %s\n", how);
    else
        fprintf(stderr, "tinytrace: the program %s\n", how);
    if (forged)
        tool_error("warning: %u line%s on the report channel did not come from the runtime "
                   "(ignored)", forged, forged == 1 ? "" : "s");

    if (text == NULL) {
        char msg[256];
        snprintf(msg, sizeof msg, "the program %s without leaving a replay report%s", how,
                 ch.overflow ? " (the channel overflowed)" : "");
        tool_error("%s", msg);
        if (o->report_out != NULL && (e = write_error_report(o->report_out, msg)) != 0)
            tool_error("cannot write %s: %s", o->report_out, strerror(e));
        free(ch.buf);
        return TOOL_EXIT_SYSTEM;
    }
    if (tool_json_parse(&d, text, len, why, sizeof why) != 0 ||
        tool_json_root(&d)->type != TOOL_J_OBJECT) {
        char msg[256];
        snprintf(msg, sizeof msg, "the replay report is not a JSON object: %s",
                 why[0] ? why : "another value");
        tool_error("%s", msg);
        if (o->report_out != NULL && (e = write_error_report(o->report_out, msg)) != 0)
            tool_error("cannot write %s: %s", o->report_out, strerror(e));
        tool_json_free(&d);
        free(ch.buf);
        return TOOL_EXIT_SYSTEM;
    }
    size_t st_len = 0;
    const char *st = tool_json_str(&d, tool_json_root(&d), "status", &st_len);
    if (st && !strcmp(st, TT_REPORT_STATUS_MATCHED) && !o->gdb && WIFSIGNALED(status) &&
        rec->crashes == 0) {
        /* the runtime reported a match, then the program died of a signal (in something that
         * ran after the runtime's close): the recorded run ended without one */
        fprintf(stderr, "tinytrace: replay diverged from the recording at its end: the program "
                "%s after the runtime reported a match, and the recorded run ended without a "
                "signal\n", how);
        rc = TOOL_EXIT_DIVERGED;
    } else {
        rc = verdict(&d, o, rec, check_output);
    }
    tool_json_free(&d);
    if (others != TOOL_EXIT_OK && (rc == TOOL_EXIT_OK || rc == TOOL_EXIT_PARTIAL)) {
        fputs("tinytrace: replay diverged from the recording in another process of the tree "
              "(above)\n", stderr);
        rc = others;
    }
    if (o->report_out != NULL && (e = write_file(o->report_out, text, len)) != 0) {
        tool_error("cannot write %s: %s", o->report_out, strerror(e));
        if (rc == TOOL_EXIT_OK)
            rc = TOOL_EXIT_SYSTEM;
    }
    free(ch.buf);
    return rc;
}

/* ---- the verb: the command line, then steps 1 to 4 of the top of the file ---- */

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct replay *o = ctx;
    switch (c) {
    case 'r':
        o->report_out = arg;
        break;
    case 'k':
        o->keep_going = 1;
        break;
    case OPT_ORDERED:
        o->ordered = 1;
        break;
    case 'c':
        o->check_output = 1;
        break;
    case OPT_ALLOW_MISMATCH:
        o->allow_mismatch = 1;
        break;
    case OPT_TRUST:
        o->trust = 1;
        break;
    case OPT_NO_OUTPUT:
        o->no_check_output = 1;
        break;
    case OPT_ASLR:
        o->aslr = 1;
        break;
    case OPT_REAL_SLEEP:
        o->real_sleep = 1;
        break;
    case OPT_PROCESS:
        o->process = arg;
        break;
    case 'f':
        o->force = 1;
        break;
    case OPT_GDB:
        o->gdb = 1;
        break;
    case OPT_GDB_ARG:
        if (o->ngdb_args == GDB_ARGS_MAX)
            return tool_usage_error(prog, "--gdb-arg: at most %d", GDB_ARGS_MAX);
        o->gdb_args[o->ngdb_args++] = arg;
        break;
    case OPT_STOP_AT:
        o->stop_at = arg;
        break;
    default:
        return tool_usage_hint(prog);
    }
    return TOOL_EXIT_OK;
}

/* The options before "--", FILE, and PROG ARGS after "--"; a report that can be written and is
 * not FILE. Returns TOOL_GO_ON, or the exit code of --help or of a mistake (reported). */
static int parse_command_line(struct replay *o, int argc, char **argv)
{
    static const tool_verb verb = {.usage = usage,
                                   .common = TOOL_OPT_NO_DEMANGLE,
                                   .options = options,
                                   .take = take_option,
                                   .operands = TOOL_OPERANDS_ANY,
                                   .more_help = debugger_help};
    int dashes = find_dashes(argc, argv), rc;
    tool_opts opts;

    if ((rc = tool_opts_parse(&opts, &verb, o, dashes, argv)) != TOOL_GO_ON)
        return rc;
    if (opts.first >= dashes)
        return tool_usage_error(argv[0], "missing FILE");
    if (dashes - opts.first > 1)
        return tool_usage_error(argv[0], "takes one FILE, not %d; a program to run goes after "
                                         "'--'", dashes - opts.first);
    o->file = argv[opts.first];
    if (dashes < argc) {
        if (dashes + 1 >= argc)
            return tool_usage_error(argv[0], "missing PROG after '--'");
        o->prog_argv = argv + dashes + 1;
    }
    if (o->report_out != NULL) {
        /* never the trace, never a device, a FIFO or a directory; an existing file only with
         * --force */
        const char *inputs[] = { o->file, NULL };
        if ((rc = tool_check_output_path(argv[0], o->report_out, "the report")) != TOOL_EXIT_OK ||
            (rc = tool_output_check(argv[0], o->report_out, inputs, o->force)) != TOOL_EXIT_OK)
            return rc;
    }
    return TOOL_GO_ON;
}

/* tt_verify over the whole of @t: a replay must not stop half way through a program because of
 * a damaged file. Reports a problem ("refusing to replay") and returns its exit code. */
static int verify_whole(tool_trace *t)
{
    tt_verify_result vr;
    int e, code;
    const char *msg;

    memset(&vr, 0, sizeof vr);
    e = tt_verify(&t->src, &t->lim, &vr);
    if (e == TT_OK && vr.status == TT_VERIFY_OK)
        return TOOL_EXIT_OK;
    code = e != TT_OK ? e : vr.code != TT_OK ? vr.code : TT_E_CORRUPT;
    msg = tool_strip_path(vr.message, t->path);
    fflush(stdout);
    fputs("tinytrace: ", stderr);
    tool_print_text(stderr, t->path, strlen(t->path));
    fprintf(stderr, ": refusing to replay: %s", tt_verify_status_name(vr.status));
    if (vr.offset != UINT64_MAX)
        fprintf(stderr, " at offset %" PRIu64, vr.offset);
    fputs(": ", stderr);
    if (msg[0] != '\0')
        tool_print_text(stderr, msg, strnlen(msg, sizeof vr.message));
    else
        fputs(tt_strerror(code), stderr);
    fputc('\n', stderr);
    return vr.status == TT_VERIFY_INCOMPLETE ? TOOL_EXIT_INCOMPLETE
           : vr.status == TT_VERIFY_IO       ? TOOL_EXIT_SYSTEM
           : vr.status == TT_VERIFY_OK       ? tool_exit_for_error(code)
                                             : TOOL_EXIT_CORRUPT;
}

/* 1. the trace: manifest, every chunk, the tables; its manifest into @m and its recorded
 * command line into @mt. */
static int load_trace(const struct replay *o, struct recorded *rec, tool_meta *mt)
{
    tool_trace t;
    int rc = tool_trace_start(&t, o->trace, NULL, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_PROBE);
    if (rc == TOOL_EXIT_OK)
        rc = verify_whole(&t);
    if (rc == TOOL_EXIT_OK)
        rc = tool_trace_open(&t);
    if (rc == TOOL_EXIT_OK)
        rc = tool_meta_read(&t, mt);
    rec->m = t.m;
    rec->calls = -1;
    rec->untraced = mt->untraced;
    rec->sync_unordered = mt->sync_untracked;
    if (rc == TOOL_EXIT_OK)
        rec->trusted = tool_auth_check(&t.src, &t.m, rec->why, sizeof rec->why);
    /* what a matched replay meets: every event but the structural ones (the index's counts) */
    tt_index *ix = NULL;
    tt_error_info err;
    tool_error_info_init(&err);
    rec->crashes = -1;
    if (rc == TOOL_EXIT_OK && t.m.index_offset != 0 &&
        tt_index_open(t.r, &t.lim, &ix, &err) == TT_OK) {
        uint64_t calls = 0;
        rec->crashes = 0;
        for (uint32_t i = 0; i < t.m.thread_count; i++) {
            const tt_index_thread *ti = tt_index_thread_info(ix, i);
            rec->crashes += (int64_t)ti->kinds[TT_EV_CRASH];
            for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++)
                if (k != TT_EV_SESSION_START && k != TT_EV_SESSION_END &&
                    k != TT_EV_THREAD_START && k != TT_EV_THREAD_END)
                    calls += ti->kinds[k];
        }
        /* nor the tracer's own waits for the budget (an enter and an exit each), which the
         * replay steps over */
        uint32_t stall = tt_reader_find_object(t.r, TT_OBJ_FUNCTION, TT_STALL_FUNCTION);
        for (uint32_t i = 0; stall != 0 && i < tt_index_summary_count(ix); i++) {
            const tt_summary_entry *se = tt_index_summary(ix, i);
            if (se != NULL && se->function == stall && 2 * se->calls <= calls)
                calls -= 2 * se->calls;
        }
        rec->calls = (int64_t)calls;
        tt_index_close(ix);
    } else if (rc == TOOL_EXIT_OK && t.m.index_offset == 0) {
        rec->count_later = 1;
    }
    tool_trace_close(&t);
    return rc;
}

/* A command line to show: each argument escaped, quoted when it holds a space or is empty. */
static void print_command(FILE *f, char *const argv[])
{
    for (size_t i = 0; argv[i] != NULL; i++) {
        const char *a = argv[i];
        int quote = a[0] == '\0' || strpbrk(a, " \t'\"") != NULL;
        if (i)
            fputc(' ', f);
        if (quote)
            fputc('\'', f);
        tool_print_text(f, a, strlen(a));
        if (quote)
            fputc('\'', f);
    }
}


/* 2. what runs, and where; the options that decide which calls are interposed follow the
 * recording. 3. the program and its build. */
static int make_plan(const struct replay *o, const tool_meta *mt, const struct recorded *rec,
                     const char *prog, struct plan *p)
{
    const tt_manifest *m = &rec->m;
    struct stat st;
    int e;

    p->dir = NULL;
    p->env = NULL; /* set below only from a recorded command line */
    if (o->prog_argv != NULL) {
        p->argv = o->prog_argv;
    } else if (mt->argv != NULL) {
        /* a trace is data from elsewhere until its signature says it is this user's */
        if (!rec->trusted && !o->trust) {
            fflush(stdout);
            fputs("tinytrace replay: refusing to run the command line recorded in ", stderr);
            tool_print_text(stderr, o->file, strlen(o->file));
            fputs(": ", stderr);
            tool_print_text(stderr, rec->why, strlen(rec->why));
            fputs(".\nThe command is: ", stderr);
            print_command(stderr, mt->argv);
            if (mt->cwd != NULL) {
                fputs("\n    in: ", stderr);
                tool_print_text(stderr, mt->cwd, strlen(mt->cwd));
            }
            fputs("\nRun it with --trust if you mean to, or give the program after '--'.\n",
                  stderr);
            return TOOL_EXIT_USAGE;
        }
        p->argv = mt->argv;
        if (mt->cwd != NULL && stat(mt->cwd, &st) == 0 && S_ISDIR(st.st_mode))
            p->dir = mt->cwd;
        else if (mt->cwd != NULL)
            tool_error("note: the recorded directory %s is gone; running in the current one",
                       mt->cwd);
    } else {
        return tool_usage_error(prog, "%s holds no command line (it was not made by "
                                "`tinytrace record`): give the program after '--'", o->file);
    }

    p->known = recorded_options(m, &p->alloc, &p->check_output, &p->aslr);
    p->aslr |= o->aslr;
    if (p->known && o->check_output && !p->check_output)
        return tool_usage_error(prog, "%s was recorded without --check-output: there is no "
                                "output to compare", o->file);
    if (!p->known)
        p->check_output = o->check_output;
    if (o->no_check_output)
        p->check_output = 0;

    e = tool_find_program(p->argv[0], p->dir, p->path, sizeof p->path);
    if (e != 0) {
        tool_error("cannot run '%s'%s%s: %s", p->argv[0], p->dir ? " in " : "",
                   p->dir ? p->dir : "", strerror(e));
        return TOOL_EXIT_SYSTEM;
    }
    /* the recorded command line runs as it ran: the same execve path (it lies on the stack),
     * the same environment (names, values, order), when it still names the program found */
    if (o->prog_argv == NULL && mt->argv != NULL) {
        struct stat a, b;
        if (mt->execfn != NULL && stat(mt->execfn, &a) == 0 && stat(p->path, &b) == 0 &&
            a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
            strlen(mt->execfn) < sizeof p->path)
            strcpy(p->path, mt->execfn);
        p->env = mt->env;
    }
    return check_build(p->path, p->dir, m, o->allow_mismatch);
}

/* 4. the environment of the program, checked as the runtime will read it. */
static int set_environment(const struct replay *o, const struct plan *p, const char *prog)
{
    char abs[PATH_MAX], preload[PATH_MAX];
    int rc;

    if ((rc = tool_find_preload(preload, sizeof preload)) != TOOL_EXIT_OK)
        return rc;
    if (tool_absolute_path(o->file, abs, sizeof abs) != 0)
        return tool_usage_error(prog, "cannot make '%s' an absolute path", o->file);
    if (tool_setenv("TINYTRACE_MODE", "replay") || tool_setenv("TINYTRACE_FILE", abs) ||
        tool_setenv(TT_ENV_KEEP_GOING, o->keep_going ? "1" : NULL) ||
        tool_setenv("TINYTRACE_ORDERED", o->ordered ? "1" : NULL) ||
        tool_setenv("TINYTRACE_REAL_SLEEP", o->real_sleep ? "1" : NULL) ||
        tool_setenv(TT_ENV_GDB, o->gdb ? "1" : NULL) ||
        tool_setenv(TT_ENV_STOP_AT, o->stop_at ? o->stop_tp : NULL) ||
        tool_setenv(TT_ENV_CHECK_OUTPUT, p->check_output ? "1" : "0") ||
        (p->known && tool_setenv(TT_ENV_ALLOC, p->alloc ? "1" : NULL)) ||
        tool_setenv(TT_ENV_PID, NULL) /* see cmd-record.c */ ||
        tool_setenv(TT_ENV_TREE, "1") ||
        tool_setenv(TT_ENV_PROCESS, o->process ? o->image : NULL))
        return TOOL_EXIT_SYSTEM;
    /* a pipe on the tool's own stdin is written by someone outside the tree: a replayed read
     * takes from it what is there, and never waits for more (preload/read.c) */
    struct stat in;
    char fifo[64];
    int is_fifo = fstat(0, &in) == 0 && S_ISFIFO(in.st_mode);
    snprintf(fifo, sizeof fifo, "%llu:%llu", is_fifo ? (unsigned long long)in.st_dev : 0ull,
             is_fifo ? (unsigned long long)in.st_ino : 0ull);
    if (tool_setenv(TT_ENV_OUTSIDE_FIFO, is_fifo ? fifo : NULL))
        return TOOL_EXIT_SYSTEM;
    if ((rc = tool_check_env(prog)) != TOOL_EXIT_OK)
        return rc;
    return tool_set_preload_env(preload);
}

/* The recorded build of the program that runs names the functions of the runtime's report
 * (tool_names_set_program: its debug information, for a stripped program's). */
static void program_names(const struct plan *pl, const struct recorded *rec)
{
    char path[PATH_MAX + 256];
    int n = pl->path[0] == '/' || pl->dir == NULL
                ? snprintf(path, sizeof path, "%s", pl->path)
                : snprintf(path, sizeof path, "%s/%s", pl->dir, pl->path);
    if (n > 0 && (size_t)n < sizeof path)
        tool_names_set_program(path, rec->m.build_id,
                               rec->m.build_id_len <= TT_BUILD_ID_MAX ? rec->m.build_id_len : 0);
}

int cmd_replay(int argc, char **argv)
{
    struct replay o;
    tool_meta mt;
    struct plan plan;
    struct recorded rec;
    int rc, e, ran = 0;

    memset(&o, 0, sizeof o);
    memset(&plan, 0, sizeof plan);
    memset(&mt, 0, sizeof mt);
    memset(&rec, 0, sizeof rec);
    if ((rc = parse_command_line(&o, argc, argv)) != TOOL_GO_ON)
        return rc;
    if (o.check_output && o.no_check_output)
        return tool_usage_error(argv[0], "--check-output and --no-check-output: choose one");
    if (o.ngdb_args && !o.gdb)
        return tool_usage_error(argv[0], "--gdb-arg needs --gdb");
    o.trace = o.file;
    snprintf(o.image, sizeof o.image, "root");
    if (o.process != NULL) {
        if (o.prog_argv != NULL)
            return tool_usage_error(argv[0], "--process runs the process's recorded command "
                                    "line: no '-- PROG' with it");
        if ((rc = tool_process_file(argv[0], o.file, o.process, o.trace_buf,
                                    sizeof o.trace_buf)) != TOOL_EXIT_OK)
            return rc;
        o.trace = o.trace_buf;
        const char *base = strrchr(o.trace, '/');
        base = base ? base + 1 : o.trace;
        if (o.trace == o.file || !strcmp(o.trace, o.file)) {
            o.process = NULL; /* the root: the whole tree */
        } else {
            size_t k = 0;
            for (; base[k] && strncmp(base + k, ".tt", 3) && k + 1 < sizeof o.image; k++)
                o.image[k] = base[k] == '.' ? '/' : base[k];
            o.image[k] = '\0';
            if (!strchr(o.image, '@') && strncmp(o.image, "root/", 5) == 0) {
                /* a fork's first image runs its parent's memory: nothing can start it alone */
                tool_proc *v = NULL;
                size_t np = 0;
                bool forked = false;
                if (tool_procs_read(o.file, &v, &np) == 0)
                    for (size_t i = 0; i < np; i++)
                        if (!strcmp(v[i].name, o.image) && (strstr(v[i].note, "fork") ||
                                                            strstr(v[i].note, "clone")))
                            forked = true;
                free(v);
                if (forked)
                    return tool_usage_error(argv[0], "process %s of %s began as a fork of its "
                                            "parent, in its parent's memory: it replays only "
                                            "with the tree (tinytrace replay %s)", o.image,
                                            o.file, o.file);
            }
        }
    }
    rc = load_trace(&o, &rec, &mt);
    if (rc == TOOL_EXIT_OK && o.stop_at)
        rc = resolve_stop(&o, argv[0]);
    if (rc == TOOL_EXIT_OK)
        rc = make_plan(&o, &mt, &rec, argv[0], &plan);
    if (rc == TOOL_EXIT_OK)
        rc = set_environment(&o, &plan, argv[0]);
    if (rc == TOOL_EXIT_OK) {
        /* what runs is said before it runs */
        fflush(stdout);
        fputs("tinytrace: replaying ", stderr);
        print_command(stderr, plan.argv);
        if (plan.dir != NULL) {
            fputs(" (in ", stderr);
            tool_print_text(stderr, plan.dir, strlen(plan.dir));
            fputc(')', stderr);
        }
        fputc('\n', stderr);
        program_names(&plan, &rec);
        rc = run(&o, &rec, &plan);
        ran = 1;
    }
    /* never leave an earlier run's report behind: --report always holds this run's verdict */
    if (!ran && rc != TOOL_EXIT_OK && o.report_out != NULL &&
        (e = write_error_report(o.report_out, "the replay did not run (see the tool's exit "
                                "status and messages)")) != 0)
        tool_error("cannot write %s: %s", o.report_out, strerror(e));
    tool_meta_free(&mt);
    return rc;
}
