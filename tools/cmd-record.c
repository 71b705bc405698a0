/* SPDX-License-Identifier: MIT */
/* tinytrace record — run a program under the runtime and keep its trace.
 *
 * The tool itself records nothing: it finds the runtime library, sets LD_PRELOAD and the
 * TINYTRACE_* variables, runs the program and waits. The runtime, loaded into the program,
 * opens the session from those variables, stores the command line, the working directory and the
 * build-id, and writes the trace file (under a temporary name, renamed when it closes).
 *
 * Everything that can be checked is checked before the program runs (lesson 7 of the design):
 * option values, the output directory, the runtime library, the program itself, and the whole
 * TINYTRACE_* environment through tt_config_from_env, exactly as the runtime will read it.
 *
 * The exit code is the program's own (128 + N for a signal), so that a shell loop can record
 * until the program fails. The tool's own codes are used only when there is no usable trace:
 * a new file must exist after the program ended — a file of the same name from an earlier run
 * does not count — and its manifest must read.
 *
 * The manifest's caller string records the options that change what is recorded
 * ("tinytrace record --alloc --check-output"): replay must interpose the same calls to meet the
 * same events, and reads them back from there.
 */
#include "opts.h"
#include "procs.h"
#include "protocol.h"
#include "tool.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "Usage: tinytrace record [-o FILE] [--alloc] [--chaos[=SEED]] [--buffer-kb N]\n"
    "                        [--memory-mb N] [--filter GLOB] [--notrace GLOB] [--depth N]\n"
    "                        [--index | --no-index] [--quiet] [--force] [--] PROG [ARGS...]\n"
    "\n"
    "Runs PROG with ARGS under the tinytrace runtime (LD_PRELOAD) and writes its trace. The\n"
    "calls through which PROG reads its environment (clocks, random bytes, reads from pipes,\n"
    "sockets and terminals, pid, host name) are recorded, with what PROG writes to stdout and\n"
    "stderr, the command line, the working directory and PROG's build-id, so that\n"
    "`tinytrace replay FILE` can run it again and compare. The trace is signed with this user's\n"
    "key, so that replay runs its command line without asking (docs/REPLAY.md).\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE   the trace file (default: PROG's base name + \".tt\", here); an\n"
    "                      existing FILE is refused without --force, and never replaced\n"
    "                      when it is not a regular file or is PROG itself\n"
    "  -f, --force         replace FILE when it exists\n"
    "  -a, --alloc         also record allocations (malloc, free, ...); replay compares sizes\n"
    "  -c, --check-output  accepted for older scripts: the output is always recorded\n"
    "  --aslr              keep address-space randomization (by default it is off, in the\n"
    "                      recording and in its replay, so that addresses replay too)\n"
    "  --chaos[=SEED]      perturb the schedule at synchronization points and at function\n"
    "                      events, one in about 32768 (PCT-style thread priorities, short\n"
    "                      delays), so that rare interleavings come up often; SEED (a\n"
    "                      number) makes the perturbation repeatable, default random. The\n"
    "                      seed and the scheme's parameters are in the trace (tinytrace info)\n"
    "  --filter GLOB       record only the calls of functions whose name matches GLOB (as\n"
    "                      recorded: a C++ name mangled; fnmatch syntax) and the calls they\n"
    "                      make; may be given again (any of them matches)\n"
    "  --notrace GLOB      do not record the calls of matching functions, nor the calls they\n"
    "                      make; may be given again\n"
    "  --depth N           record N levels of calls (from the first recorded one)\n"
    "                      These three filter the function hooks only; replay applies the\n"
    "                      same filters, which the trace holds\n"
    "  --index             build the index tables while recording (TINYTRACE_INDEX=1), as\n"
    "                      `tinytrace index FILE` builds them afterwards. By default the trace\n"
    "                      has none: they cost the program a quarter to a third of its\n"
    "                      recording on deep call trees and half the file; stats, tree and\n"
    "                      report build them when they need them (about 15 ns an event)\n"
    "  --no-index          write no index tables (TINYTRACE_INDEX=0): the default, unless\n"
    "                      TINYTRACE_INDEX is set\n"
    "  -q, --quiet         print nothing of the tool's own when all went well (errors and\n"
    "                      warnings still go to stderr)\n"
    "  --buffer-kb N       one thread's buffer, KiB (4 to 65536, a multiple of 4)\n"
    "  --memory-mb N       all buffers together, MiB (1 to 65536; at least two buffers)\n"
    "  -h, --help          print this help\n"
    "\n"
    "Environment: TINYTRACE_PRELOAD names the runtime library (default: found next to the\n"
    "tool); other TINYTRACE_* settings (TINYTRACE_BLOCK_KB, TINYTRACE_MAX_THREADS, ...) pass\n"
    "through and are checked before PROG runs.\n"
    "\n"
    "Prints one line on stderr when PROG has ended: the file, its events and bytes, and how\n"
    "PROG ended. Exits with PROG's own exit status (128+N when signal N killed it), so that\n"
    "  while tinytrace record -o run.tt -- ./prog; do :; done\n"
    "keeps the first failing run. Its own errors: 2 for a bad command line (nothing runs);\n"
    "6 when PROG or the runtime cannot be found or run, or no trace was written (PROG was\n"
    "killed before the runtime could finish the file, or did not load the runtime); 3 or 7\n"
    "when the trace written cannot be read or is marked incomplete.\n";

/* The identity of a file, to tell a new trace from an old one of the same name. */
struct file_id {
    int exists;
    dev_t dev;
    ino_t ino;
    struct timespec mtime, ctime;
};

static void file_id_get(const char *path, struct file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) != 0)
        return;
    id->exists = 1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->mtime = st.st_mtim;
    id->ctime = st.st_ctim;
}

static int file_id_same(const struct file_id *a, const struct file_id *b)
{
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* The default trace name: the program's base name + ".tt". */
static int default_output(const char *prog, char *out, size_t cap)
{
    size_t len = strlen(prog);
    const char *base;
    size_t n;
    while (len > 1 && prog[len - 1] == '/')
        len--;
    base = prog + len;
    while (base > prog && base[-1] != '/')
        base--;
    n = (size_t)(prog + len - base);
    if (n == 0 || (n == 1 && base[0] == '/') || (n == 1 && base[0] == '.') ||
        (n == 2 && base[0] == '.' && base[1] == '.'))
        return snprintf(out, cap, "trace.tt") >= (int)cap ? ENAMETOOLONG : 0;
    if (n + 4 > cap)
        return ENAMETOOLONG;
    memcpy(out, base, n);
    memcpy(out + n, ".tt", 4);
    return 0;
}

/* The program must be found, and be something LD_PRELOAD applies to. */
static int check_program(const char *name, char *path, size_t cap)
{
    tool_elf_info info;
    int e = tool_find_program(name, NULL, path, cap);
    if (e != 0) {
        tool_error("cannot run '%s': %s", name, strerror(e));
        return TOOL_EXIT_SYSTEM;
    }
    if (tool_elf_read(path, &info) == 0 && info.is_elf64 && !info.has_interp) {
        tool_error("cannot record '%s': it is statically linked, and the runtime can only be "
                   "loaded (LD_PRELOAD) into a dynamically linked program", path);
        return TOOL_EXIT_SYSTEM;
    }
    return TOOL_EXIT_OK;
}

/* The META object of @t that starts with @prefix, without the prefix, into @out ("" if none). */
static void meta_value(tool_trace *t, const char *prefix, char *out, size_t cap)
{
    size_t pl = strlen(prefix);
    out[0] = '\0';
    for (uint32_t id = 1; id <= t->m.object_count; id++) {
        tt_object_entry o;
        if (tt_reader_object(t->r, id, &o) != TT_OK || o.kind != TT_OBJ_META ||
            o.name_len < pl || memcmp(o.name, prefix, pl) != 0)
            continue;
        size_t n = o.name_len - pl < cap - 1 ? o.name_len - pl : cap - 1;
        memcpy(out, o.name + pl, n);
        out[n] = '\0';
        return;
    }
}

/* Says once what ran unrecorded: replay will run it live and cannot compare it. */
static void warn_untraced(tool_trace *t)
{
    uint32_t n = t->m.children_untraced, u = t->m.execs_untraceable;
    char first[512];
    if (!n && !u)
        return;
    meta_value(t, "untraced=", first, sizeof first);
    fflush(stdout);
    fprintf(stderr, "tinytrace: warning: ");
    if (n)
        fprintf(stderr, "%" PRIu32 " child process%s ran untraced", n, n == 1 ? "" : "es");
    if (n && u)
        fputs(" and ", stderr);
    if (u)
        fprintf(stderr, "%" PRIu32 " exec%s of a program the runtime cannot follow (static, "
                "setuid, or given an environment without the runtime) ran unrecorded", u,
                u == 1 ? "" : "s");
    if (first[0]) {
        fputs(" (the first: ", stderr);
        tool_print_text(stderr, first, strlen(first));
        fputc(')', stderr);
    }
    fputs("; replay runs them live and does not compare them\n", stderr);
}

/* Says once what ran unrecorded below the root (an exec the runtime could not follow in a
 * descendant, which only that descendant's manifest counts) and which processes died before
 * their trace was finished: the tree's manifest names them. The root's own are said above. */
static void warn_tree(const char *file)
{
    char dir[PATH_MAX];
    struct stat st;
    if (tool_procs_dir(file, dir, sizeof dir) != 0 || stat(dir, &st) != 0)
        return; /* the program started no process */
    tool_proc *v;
    size_t n;
    if (tool_procs_read(file, &v, &n) != 0)
        return;
    size_t unrecorded = 0, died = 0;
    const tool_proc *first_u = NULL, *first_d = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].path, "root") != 0 && strncmp(v[i].note, "ran unrecorded", 14) == 0) {
            unrecorded++;
            first_u = first_u ? first_u : &v[i];
        }
        if (v[i].partial) {
            died++;
            first_d = first_d ? first_d : &v[i];
        }
    }
    fflush(stdout);
    if (unrecorded)
        fprintf(stderr, "tinytrace: warning: %zu process%s of the tree exec'd a program the "
                "runtime cannot follow, which ran unrecorded (the first: %s, %.200s); replay "
                "runs them live and does not compare them\n", unrecorded,
                unrecorded == 1 ? "" : "es", first_u->name, first_u->note);
    if (died)
        fprintf(stderr, "tinytrace: warning: %zu process%s of the tree died before %s trace was "
                "finished (the first: %s%s%.200s); `tinytrace recover` saves what %s wrote\n",
                died, died == 1 ? "" : "es", died == 1 ? "its" : "their", first_d->name,
                first_d->cmd[0] ? ", " : "", first_d->cmd, died == 1 ? "it" : "they");
    free(v);
}

/* What the command line asks for. */
struct record {
    const char *output;
    int alloc, check_output, aslr, chaos, quiet, force;
    int index; /* --index 1, --no-index 0; -1: TINYTRACE_INDEX if set, else 0 */
    uint64_t chaos_seed;
    uint64_t buffer_kb, memory_mb; /* 0: the library's default */
    char filter[4096], notrace[4096]; /* --filter, --notrace: comma-separated globs */
    uint64_t depth;                   /* --depth; 0: all */
};

/* After the program: the trace, or why there is none. Returns the tool's code for a missing or
 * unusable trace, or -1 when the trace is fine (then the program's status decides). */
static int summarize(const struct record *o, const char *shown, const char *abs,
                     const struct file_id *before, pid_t pid, int status)
{
    struct file_id after;
    char how[128], partial[PATH_MAX + 32];
    tool_trace t;
    int rc;

    tool_describe_status(status, how, sizeof how);
    file_id_get(abs, &after);
    if (!after.exists || file_id_same(before, &after)) {
        tool_error("no trace was written to %s; the program %s", shown, how);
        snprintf(partial, sizeof partial, "%s.%ld.partial", abs, (long)pid);
        if (access(partial, F_OK) == 0)
            tool_error("the runtime did not finish the recording; what it wrote is in %s",
                       partial);
        else
            tool_error("did the program load the runtime? (a setuid program ignores "
                       "LD_PRELOAD; one that exec()s another program leaves that one's trace)");
        return TOOL_EXIT_SYSTEM;
    }
    rc = tool_trace_start(&t, shown, NULL, TT_CURSORS_SEQUENTIAL, TOOL_TRACE_OPEN);
    if (rc != TOOL_EXIT_OK) {
        tool_trace_close(&t);
        tool_error("the program %s", how);
        return rc;
    }
    if (!o->quiet) {
        char chaos[64] = "";
        if (o->chaos)
            snprintf(chaos, sizeof chaos, ", schedule chaos seed %" PRIu64, o->chaos_seed);
        fprintf(stderr,
                "tinytrace: recorded %s: %" PRIu64 " events, %" PRIu64 " bytes, %" PRIu32
                " thread%s%s%s; the program %s\n",
                shown, t.m.event_count, t.m.file_size, t.m.thread_count,
                t.m.thread_count == 1 ? "" : "s",
                (t.m.flags & TT_MF_CRASHED) ? ", ends with its crash" : "", chaos, how);
    }
    if (t.m.threads_refused)
        tool_error("warning: %" PRIu32 " more thread%s than the limit of recording threads "
                   "(TINYTRACE_MAX_THREADS) ran unrecorded", t.m.threads_refused,
                   t.m.threads_refused == 1 ? "" : "s");
    if (t.m.build_id_len == 0 && !o->quiet)
        tool_error("note: the program has no GNU build-id; replay cannot check that it runs "
                   "the same build");
    warn_untraced(&t);
    tool_trace_close(&t);
    return -1;
}


enum { OPT_BUFFER = 256, OPT_MEMORY, OPT_ASLR, OPT_CHAOS, OPT_FILTER, OPT_NOTRACE, OPT_DEPTH,
       OPT_NO_INDEX, OPT_INDEX };

/* --filter and --notrace add a glob to their list (filter.h in the runtime reads it). */
static int add_glob(const char *prog, const char *option, char *list, size_t cap,
                    const char *glob)
{
    size_t n = strlen(list), g = strlen(glob);
    if (g == 0 || strchr(glob, ',') != NULL)
        return tool_usage_error(prog, "%s: '%s' is not a glob (empty, or with a comma)", option,
                                glob);
    if (n + g + 2 > cap)
        return tool_usage_error(prog, "%s: more than %zu bytes of globs", option, cap - 1);
    if (n > 0)
        list[n++] = ',';
    memcpy(list + n, glob, g + 1);
    return TOOL_EXIT_OK;
}

static int take_option(void *ctx, const char *prog, int c, const char *arg)
{
    struct record *o = ctx;
    switch (c) {
    case 'o':
        o->output = arg;
        return TOOL_EXIT_OK;
    case 'a':
        o->alloc = 1;
        return TOOL_EXIT_OK;
    case 'c':
        return TOOL_EXIT_OK; /* always: the output is part of the verdict */
    case OPT_BUFFER:
        if (tool_parse_u64(prog, "--buffer-kb", arg, 4, 65536, &o->buffer_kb))
            return TOOL_EXIT_USAGE;
        if (o->buffer_kb % 4 != 0)
            return tool_usage_error(prog, "--buffer-kb must be a multiple of 4, not '%s'", arg);
        return TOOL_EXIT_OK;
    case OPT_MEMORY:
        return tool_parse_u64(prog, "--memory-mb", arg, 1, 65536, &o->memory_mb);
    case OPT_ASLR:
        o->aslr = 1;
        return TOOL_EXIT_OK;
    case OPT_CHAOS:
        o->chaos = 1;
        if (arg)
            return tool_parse_u64(prog, "--chaos", arg, 0, UINT64_MAX, &o->chaos_seed);
        if (getrandom(&o->chaos_seed, sizeof o->chaos_seed, 0) != sizeof o->chaos_seed)
            o->chaos_seed = (uint64_t)getpid() * 0x9E3779B97F4A7C15u ^ (uint64_t)time(NULL);
        return TOOL_EXIT_OK;
    case OPT_FILTER:
        return add_glob(prog, "--filter", o->filter, sizeof o->filter, arg);
    case OPT_NOTRACE:
        return add_glob(prog, "--notrace", o->notrace, sizeof o->notrace, arg);
    case OPT_DEPTH:
        return tool_parse_u64(prog, "--depth", arg, 1, UINT32_MAX, &o->depth);
    case OPT_NO_INDEX:
        o->index = 0;
        return TOOL_EXIT_OK;
    case OPT_INDEX:
        o->index = 1;
        return TOOL_EXIT_OK;
    case 'q':
        o->quiet = 1;
        return TOOL_EXIT_OK;
    case 'f':
        o->force = 1;
        return TOOL_EXIT_OK;
    default:
        return tool_usage_hint(prog);
    }
}

/* The environment of the program, checked as the runtime will read it. The file is given
 * absolute (@abs): the program may change its directory before the runtime renames the file.
 * TT_ENV_PID is the runtime's mark of the process it traces (programs that one execs are not
 * traced): one inherited from a traced parent of the tool would leave ours untraced. */
static int set_environment(const struct record *o, const char *abs, const char *prog)
{
    char caller[TT_CALLER_MAX], num[32];

    /* the options that change what is recorded, for replay to read back (protocol.h) */
    snprintf(caller, sizeof caller, TT_CALLER_RECORD "%s%s%s",
             o->alloc ? " " TT_CALLER_OPT_ALLOC : "",
             o->check_output ? " " TT_CALLER_OPT_CHECK_OUTPUT : "",
             o->aslr ? " " TT_CALLER_OPT_ASLR : "");
    if (tool_setenv("TINYTRACE_MODE", "record") || tool_setenv("TINYTRACE_FILE", abs) ||
        tool_setenv(TT_ENV_ALLOC, o->alloc ? "1" : NULL) ||
        tool_setenv(TT_ENV_CHECK_OUTPUT, o->check_output ? "1" : NULL) ||
        tool_setenv("TINYTRACE_CALLER", caller) ||
        tool_setenv(TT_ENV_REPORT_FD, NULL) || tool_setenv(TT_ENV_KEEP_GOING, NULL) ||
        tool_setenv(TT_ENV_PID, NULL) || tool_setenv(TT_ENV_TREE, "1") ||
        tool_setenv(TT_ENV_PROCESS, NULL) || tool_setenv(TT_ENV_REPORT_NONCE, NULL) ||
        tool_setenv(TT_ENV_OUTSIDE_FIFO, NULL) ||
        /* no process of the tree waits for the disk at its exit: the tool makes every trace
         * durable once the program has ended (tool_procs_sync) */
        tool_setenv("TINYTRACE_SYNC", "0") ||
        /* ... nor creates its file: it takes one the tool made ahead (spares.c) */
        tool_setenv("TINYTRACE_SPARES", "1"))
        return TOOL_EXIT_SYSTEM;
    snprintf(num, sizeof num, "%" PRIu64, o->depth);
    if (tool_setenv("TINYTRACE_FILTER", o->filter[0] ? o->filter : NULL) ||
        tool_setenv("TINYTRACE_NOTRACE", o->notrace[0] ? o->notrace : NULL) ||
        tool_setenv("TINYTRACE_DEPTH", o->depth ? num : NULL))
        return TOOL_EXIT_SYSTEM;
    if (o->chaos) {
        snprintf(num, sizeof num, "%" PRIu64, o->chaos_seed);
        if (tool_setenv("TINYTRACE_CHAOS", num))
            return TOOL_EXIT_SYSTEM;
    }
    /* no index tables unless asked for: the tools build them when they need them */
    if ((o->index == 1 || o->index == 0 || getenv("TINYTRACE_INDEX") == NULL) &&
        tool_setenv("TINYTRACE_INDEX", o->index == 1 ? "1" : "0"))
        return TOOL_EXIT_SYSTEM;
    if (o->buffer_kb != 0) {
        snprintf(num, sizeof num, "%" PRIu64, o->buffer_kb);
        if (tool_setenv("TINYTRACE_BUFFER_KB", num))
            return TOOL_EXIT_SYSTEM;
    }
    if (o->memory_mb != 0) {
        snprintf(num, sizeof num, "%" PRIu64, o->memory_mb);
        if (tool_setenv("TINYTRACE_MEMORY_MB", num))
            return TOOL_EXIT_SYSTEM;
    }
    return tool_check_env(prog);
}

int cmd_record(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"alloc", no_argument, NULL, 'a'},
        {"check-output", no_argument, NULL, 'c'},
        {"buffer-kb", required_argument, NULL, OPT_BUFFER},
        {"memory-mb", required_argument, NULL, OPT_MEMORY},
        {"aslr", no_argument, NULL, OPT_ASLR},
        {"chaos", optional_argument, NULL, OPT_CHAOS},
        {"filter", required_argument, NULL, OPT_FILTER},
        {"notrace", required_argument, NULL, OPT_NOTRACE},
        {"depth", required_argument, NULL, OPT_DEPTH},
        {"no-index", no_argument, NULL, OPT_NO_INDEX},
        {"index", no_argument, NULL, OPT_INDEX},
        {"quiet", no_argument, NULL, 'q'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    static const tool_verb verb = {.usage = usage,
                                   .options = options,
                                   .stop_at_operand = 1, /* PROG's options are its own */
                                   .take = take_option,
                                   .operands = TOOL_OPERANDS_ANY};
    struct record o = {.check_output = 1, .index = -1};
    int rc, status = 0, first;
    char def_out[PATH_MAX], abs[PATH_MAX], preload[PATH_MAX], prog_path[PATH_MAX];
    struct file_id before;
    tool_opts opts;
    pid_t pid;

    if ((rc = tool_opts_parse(&opts, &verb, &o, argc, argv)) != TOOL_GO_ON)
        return rc;
    first = opts.first;
    if (first >= argc)
        return tool_usage_error(argv[0], "missing PROG: tinytrace record [OPTIONS] -- PROG "
                                         "[ARGS...]");
    if (o.buffer_kb != 0 && o.memory_mb != 0 && o.memory_mb * 1024 < 2 * o.buffer_kb)
        return tool_usage_error(argv[0],
                                "--memory-mb %" PRIu64 " cannot hold two buffers of "
                                "--buffer-kb %" PRIu64,
                                o.memory_mb, o.buffer_kb);
    if (o.output == NULL) {
        if (default_output(argv[first], def_out, sizeof def_out) != 0)
            return tool_usage_error(argv[0], "program name too long");
        o.output = def_out;
    }
    if ((rc = tool_check_output_path(argv[0], o.output, "the trace")) != TOOL_EXIT_OK)
        return rc;
    if (tool_absolute_path(o.output, abs, sizeof abs) != 0)
        return tool_usage_error(argv[0], "cannot make '%s' an absolute path", o.output);

    if ((rc = check_program(argv[first], prog_path, sizeof prog_path)) != TOOL_EXIT_OK)
        return rc;
    {
        /* never the program, a device, a FIFO or a directory; an existing file with --force */
        const char *inputs[] = { prog_path, NULL };
        if ((rc = tool_output_check(argv[0], o.output, inputs, o.force)) != TOOL_EXIT_OK)
            return rc;
    }
    if ((rc = set_environment(&o, abs, argv[0])) != TOOL_EXIT_OK)
        return rc;
    if ((rc = tool_find_preload(preload, sizeof preload)) != TOOL_EXIT_OK)
        return rc;
    if ((rc = tool_set_preload_env(preload)) != TOOL_EXIT_OK)
        return rc;

    char **envp;
    int settings_fd;
    if ((rc = tool_child_env(NULL, &envp, &settings_fd)) != TOOL_EXIT_OK)
        return rc;
    file_id_get(abs, &before);
    /* the tree's traces beside FILE; an earlier recording's of the same name go */
    if (tool_procs_prepare(abs) != 0)
        return TOOL_EXIT_SYSTEM;
    /* orphans of the tree (a daemon, a background job) become the tool's: it waits for them,
     * so that the tree is whole when its manifest is written */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    tool_scan *early = tool_scan_new(abs); /* NULL: every trace is read at the end */
    tool_spares *spares = tool_spares_start(abs, early);
    rc = tool_run_program(argv[first], prog_path, argv + first, envp, NULL, o.aslr, &pid,
                          &status);
    close(settings_fd);
    free(envp);
    long pids[1024];
    int statuses[1024];
    pids[0] = pid;
    statuses[0] = status;
    size_t nreaped = 1 + tool_reap_orphans(pids + 1, statuses + 1, 1023);
    tool_spares_stop(spares);
    if (rc != TOOL_EXIT_OK) {
        tool_scan_free(early);
        tool_procs_remove(abs);
        return rc;
    }
    rc = summarize(&o, o.output, abs, &before, pid, status);
    if (rc < 0) {
        tool_auth_sign(abs); /* a trace without it still is one: replay asks for --trust */
        if (tool_procs_finish(abs, pids, statuses, nreaped, early) == 0)
            warn_tree(abs);
    }
    tool_scan_free(early);
    /* after the MACs and the tree's manifest went in: each file waits for the disk once */
    tool_procs_sync(abs); /* reported; the traces are there all the same */
    return rc >= 0 ? rc : tool_shell_status(status);
}
