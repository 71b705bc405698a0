/* SPDX-License-Identifier: MIT */
/* tinytrace — running a program under the runtime: what `record` and `replay` share.
 *
 * Both verbs find the runtime library (libtinytrace-preload.so), put it in LD_PRELOAD with the
 * TINYTRACE_* settings in the environment, find the program like execvp does, run it and wait
 * for it. The settings go into the tool's own environment (the tool runs nothing else), which
 * lets the tool check them with the library's own tt_config_from_env before anything runs: the
 * runtime in the program reads the very same variables and would otherwise refuse them only
 * after the program started.
 *
 * While the program runs the tool behaves like a shell waiting for a foreground job: SIGINT and
 * SIGQUIT from the terminal reach the program (same process group) and are ignored by the tool,
 * which then reports how the program ended; SIGTERM and SIGHUP sent to the tool alone (a CI
 * timeout, a closed terminal) are passed on to the program, so it is never left running behind
 * a tool that has gone.
 */
#include "protocol.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TT_PRELOAD_INSTALL_PATH
#define TT_PRELOAD_INSTALL_PATH "/usr/local/lib/tinytrace/libtinytrace-preload.so"
#endif
#ifndef TT_PRELOAD_LIBDIR
#define TT_PRELOAD_LIBDIR "lib"
#endif
#define PRELOAD_NAME "libtinytrace-preload.so"

/* ---- paths ---- */

/* @a "/" @b into @out; returns 0 or ENAMETOOLONG. */
static int join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s%s%s", a, (a[0] != '\0' && a[strlen(a) - 1] != '/') ? "/" : "",
                     b);
    return n < 0 || (size_t)n >= cap ? ENAMETOOLONG : 0;
}

int tool_absolute_path(const char *path, char *out, size_t cap)
{
    char cwd[PATH_MAX];
    if (path[0] == '/') {
        if (strlen(path) >= cap)
            return ENAMETOOLONG;
        memcpy(out, path, strlen(path) + 1);
        return 0;
    }
    if (getcwd(cwd, sizeof cwd) == NULL)
        return errno;
    return join(out, cap, cwd, path);
}

static int is_regular(const char *path, int *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        *err = errno;
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        *err = S_ISDIR(st.st_mode) ? EISDIR : EACCES;
        return 0;
    }
    return 1;
}

int tool_find_program(const char *name, const char *dir, char *out, size_t cap)
{
    const char *path, *p;
    char cand[PATH_MAX], full[PATH_MAX];
    int err = 0, saw_eacces = 0;

    if (name[0] == '\0')
        return ENOENT;
    if (strchr(name, '/') != NULL) {
        /* as given, like execvp: exec itself reports a file that cannot be executed, after the
         * build check has looked at it */
        if (name[0] != '/' && dir != NULL)
            err = join(out, cap, dir, name);
        else if (strlen(name) >= cap)
            err = ENAMETOOLONG;
        else
            memcpy(out, name, strlen(name) + 1);
        if (err == 0)
            (void)is_regular(out, &err);
        return err;
    }
    path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* glibc's execvp default */
    for (p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        char entry[PATH_MAX];
        if (n < sizeof entry) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            if (n == 0)
                strcpy(entry, "."); /* an empty entry is the current directory */
            if (join(cand, sizeof cand, entry, name) == 0 &&
                (cand[0] == '/' || dir == NULL || join(full, sizeof full, dir, cand) == 0)) {
                const char *c = cand[0] == '/' || dir == NULL ? cand : full;
                if (is_regular(c, &err)) {
                    if (access(c, X_OK) == 0) {
                        if (strlen(c) >= cap)
                            return ENAMETOOLONG;
                        memcpy(out, c, strlen(c) + 1);
                        return 0;
                    }
                    saw_eacces = 1;
                }
            }
        }
        if (end == NULL)
            break;
        p = end;
    }
    return saw_eacces ? EACCES : ENOENT;
}

/* An output file must be creatable: its directory exists and is writable, and it is not itself
 * a directory. */
int tool_check_output_path(const char *prog, const char *path, const char *what)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    struct stat st;

    if (path[0] == '\0')
        return tool_usage_error(prog, "%s needs a file name", what);
    if (slash == NULL) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        if ((size_t)(slash - path) >= sizeof dir)
            return tool_usage_error(prog, "output path too long");
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    if (slash != NULL && slash[1] == '\0')
        return tool_usage_error(prog, "%s: '%s' names a directory, not a file", what, path);
    if (stat(dir, &st) != 0)
        return tool_usage_error(prog, "cannot write %s to '%s': directory '%s': %s", what, path,
                                dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tool_usage_error(prog, "cannot write %s to '%s': '%s' is not a directory",
                                what, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return tool_usage_error(prog, "cannot write %s to '%s': directory '%s': %s", what, path,
                                dir, strerror(errno));
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return tool_usage_error(prog, "%s: '%s' is a directory", what, path);
    return TOOL_EXIT_OK;
}

/* ---- the runtime library ---- */

static int usable_preload(const char *cand, char *out, size_t cap, int *err)
{
    char real[PATH_MAX];
    if (!is_regular(cand, err))
        return 0;
    if (access(cand, R_OK) != 0) {
        *err = errno;
        return 0;
    }
    if (realpath(cand, real) == NULL) {
        *err = errno;
        return 0;
    }
    if (strlen(real) >= cap) {
        *err = ENAMETOOLONG;
        return 0;
    }
    memcpy(out, real, strlen(real) + 1);
    return 1;
}

int tool_find_preload(char *out, size_t cap)
{
    const char *env = getenv("TINYTRACE_PRELOAD");
    char exe[PATH_MAX], cand[PATH_MAX], tried[4][PATH_MAX];
    size_t ntried = 0;
    ssize_t n;
    int err = 0;

    if (env != NULL && env[0] != '\0') {
        if (!usable_preload(env, out, cap, &err)) {
            tool_error("TINYTRACE_PRELOAD=%s: %s", env, strerror(err));
            return TOOL_EXIT_SYSTEM;
        }
    } else {
        /* next to the tool: the build tree, then an installation under the same prefix */
        const char *rel[] = {
            "../libtrace/instrument/" PRELOAD_NAME,
            TT_PRELOAD_LIBDIR[0] != '/' ? "../" TT_PRELOAD_LIBDIR "/tinytrace/" PRELOAD_NAME : NULL,
            "../lib/tinytrace/" PRELOAD_NAME,
        };
        int found = 0;
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            char *slash;
            exe[n] = '\0';
            slash = strrchr(exe, '/');
            if (slash != NULL)
                *slash = '\0';
            for (size_t i = 0; !found && i < sizeof rel / sizeof rel[0]; i++) {
                if (rel[i] == NULL || join(cand, sizeof cand, exe, rel[i]) != 0)
                    continue;
                snprintf(tried[ntried++], sizeof tried[0], "%s", cand);
                found = usable_preload(cand, out, cap, &err);
            }
        }
        if (!found) {
            snprintf(tried[ntried++], sizeof tried[0], "%s", TT_PRELOAD_INSTALL_PATH);
            found = usable_preload(TT_PRELOAD_INSTALL_PATH, out, cap, &err);
        }
        if (!found) {
            tool_error("cannot find the runtime library %s; looked at:", PRELOAD_NAME);
            for (size_t i = 0; i < ntried; i++)
                fprintf(stderr, "  %s\n", tried[i]);
            fprintf(stderr, "tinytrace: set TINYTRACE_PRELOAD to its path\n");
            return TOOL_EXIT_SYSTEM;
        }
    }
    /* LD_PRELOAD splits at spaces and colons: such a path would load something else */
    if (strpbrk(out, " :\t\n") != NULL) {
        tool_error("the runtime library's path '%s' holds a space or a colon, which LD_PRELOAD "
                   "cannot carry; set TINYTRACE_PRELOAD to a path without them", out);
        return TOOL_EXIT_SYSTEM;
    }
    return TOOL_EXIT_OK;
}

/* ---- the environment ---- */

int tool_setenv(const char *name, const char *value)
{
    int rc = value != NULL ? setenv(name, value, 1) : unsetenv(name);
    if (rc != 0) {
        tool_error("cannot set %s: %s", name, strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }
    return TOOL_EXIT_OK;
}

int tool_set_preload_env(const char *preload)
{
    const char *old = getenv("LD_PRELOAD");
    char *v;
    int rc;

    if (old == NULL || old[0] == '\0')
        return tool_setenv("LD_PRELOAD", preload);
    /* first, so that the runtime's functions come before any other preloaded ones */
    v = malloc(strlen(preload) + strlen(old) + 2);
    if (v == NULL) {
        tool_error("out of memory");
        return TOOL_EXIT_SYSTEM;
    }
    sprintf(v, "%s:%s", preload, old);
    rc = tool_setenv("LD_PRELOAD", v);
    free(v);
    return rc;
}

int tool_check_env(const char *prog)
{
    tt_config cfg;
    tt_error_info err;
    tool_error_info_init(&err);
    tt_config_init(&cfg);
    if (tt_config_from_env(&cfg, &err) != TT_OK)
        return tool_usage_error(prog, "%s", err.message[0] ? err.message : "bad TINYTRACE_* setting");
    return TOOL_EXIT_OK;
}

/* ---- running ---- */

static volatile sig_atomic_t g_child;

static void forward_signal(int sig)
{
    int saved = errno;
    if (g_child > 0)
        kill((pid_t)g_child, sig);
    errno = saved;
}

struct exec_failure {
    int stage; /* 0: chdir, 1: exec */
    int err;
};

/* ---- the program's environment ----
 * The runtime's settings go to a memfd the program inherits, not into its environment (see
 * TT_ENV_RT in protocol.h): the environment the program sees is the tool's own without any
 * TINYTRACE_* variable, with LD_PRELOAD naming the runtime, or in a replay the recorded one, and
 * then one variable of fixed length, last, that the runtime removes before main. */

/* TT_ENV_RT=<fd, 10 digits>:root:0:0:<ns, 20 digits>:<ticks, 20 digits> and its NUL */
#define RT_VAR 96

/* The tool's clock point, taken when it started (tool_clock_start): a recorded program's rate
 * of ticks is measured from it (tt_clock_point), so a short program does not wait 2 ms at
 * its close to measure the rate itself. */
static uint64_t start_ns, start_ticks;

void tool_clock_start(void)
{
    tt_clock_point(&start_ns, &start_ticks);
}

int tool_child_env(char *const *recorded, char ***envp_out, int *fd_out)
{
    extern char **environ;
    size_t n = 0, text_len = 0, cap = 4096;
    char *text = malloc(cap);
    *envp_out = NULL;
    *fd_out = -1;
    if (text == NULL)
        goto nomem;
    /* the settings: every TINYTRACE_* of the tool's environment but the tool's own */
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "TINYTRACE_", 10) != 0 || strncmp(*e, "TINYTRACE_PRELOAD=", 18) == 0 ||
            strncmp(*e, "TINYTRACE_PROGRESS_MS=", 22) == 0)
            continue;
        size_t l = strlen(*e + 10);
        if (text_len + l + 2 > cap) {
            while (text_len + l + 2 > cap)
                cap *= 2;
            char *nt = realloc(text, cap);
            if (nt == NULL)
                goto nomem;
            text = nt;
        }
        memcpy(text + text_len, *e + 10, l);
        text_len += l;
        text[text_len++] = '\n';
    }
    int fd = memfd_create("tinytrace-settings", 0); /* inherited: no MFD_CLOEXEC */
    if (fd < 0 || write(fd, text, text_len) != (ssize_t)text_len) {
        tool_error("cannot hand the runtime its settings: %s", strerror(errno));
        free(text);
        if (fd >= 0)
            close(fd);
        return TOOL_EXIT_SYSTEM;
    }
    free(text);
    text = NULL;
    char *const *base = recorded != NULL ? recorded : environ;
    const char *preload = getenv("LD_PRELOAD");
    while (base[n] != NULL)
        n++;
    /* one block: the array, then the two strings it adds (the caller frees it with free) */
    size_t pre_len = preload != NULL ? strlen(preload) + 12 : 0;
    char **env = calloc(1, (n + 4) * sizeof *env + RT_VAR + pre_len);
    if (env == NULL)
        goto nomem_fd;
    char *rt = (char *)(env + n + 4);
    if (preload != NULL)
        snprintf(rt + RT_VAR, pre_len, "LD_PRELOAD=%s", preload);
    size_t k = 0;
    int have_preload = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(base[i], "TINYTRACE_", 10) == 0)
            continue;
        if (strncmp(base[i], "LD_PRELOAD=", 11) == 0) {
            /* in place: the recorded position, with today's runtime library */
            env[k++] = preload != NULL ? rt + RT_VAR : base[i];
            have_preload = 1;
            continue;
        }
        env[k++] = base[i];
    }
    if (!have_preload && preload != NULL)
        env[k++] = rt + RT_VAR;
    /* Recording: OpenSSL is told to take no random bytes from the CPU (RDRAND, RDSEED), which
     * nothing can replay, but from the OS, which is replayed (docs/REPLAY.md, "Randomness from
     * the CPU"). Unless the user set it: then theirs. The replay gets it back with the rest of
     * the recorded environment. */
    if (recorded == NULL && getenv("OPENSSL_ia32cap") == NULL)
        env[k++] = (char *)"OPENSSL_ia32cap=~0x4000000000000000:~0x40000";
    /* the root's identity and, recording, the tool's clock point (zeros in a replay: the
     * variable is as long in both, so the program's stack is where it was) */
    uint64_t ns = recorded == NULL ? start_ns : 0, ticks = recorded == NULL ? start_ticks : 0;
    if (!ns || !ticks)
        ns = ticks = 0;
    snprintf(rt, RT_VAR, "%s=%010d:root:0:0:%020" PRIu64 ":%020" PRIu64, TT_ENV_RT, fd, ns,
             ticks);
    env[k++] = rt;
    env[k] = NULL;
    *envp_out = env;
    *fd_out = fd;
    return TOOL_EXIT_OK;
nomem_fd:
    close(fd);
nomem:
    free(text);
    tool_error("out of memory");
    return TOOL_EXIT_SYSTEM;
}

int tool_run_program(const char *shown, const char *path, char *const argv[],
                     char *const envp[], const char *dir, int aslr, pid_t *pid_out, int *status)
{
    static const int ignored[] = {SIGINT, SIGQUIT};
    static const int forwarded[] = {SIGTERM, SIGHUP};
    struct sigaction old_ign[2], old_fwd[2], sa;
    sigset_t block, old_mask;
    struct exec_failure ef;
    int pfd[2], rc = TOOL_EXIT_OK;
    ssize_t got;
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) != 0) {
        tool_error("cannot create a pipe: %s", strerror(errno));
        return TOOL_EXIT_SYSTEM;
    }
    sigemptyset(&block);
    for (size_t i = 0; i < 2; i++) {
        sigaddset(&block, ignored[i]);
        sigaddset(&block, forwarded[i]);
    }
    /* blocked across fork: a signal arriving before g_child is set waits instead of being lost */
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;
    for (size_t i = 0; i < 2; i++)
        sigaction(ignored[i], &sa, &old_ign[i]);
    sa.sa_handler = forward_signal;
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < 2; i++)
        sigaction(forwarded[i], &sa, &old_fwd[i]);

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        /* the child: the dispositions and the mask the tool was started with */
        for (size_t i = 0; i < 2; i++) {
            sigaction(ignored[i], &old_ign[i], NULL);
            sigaction(forwarded[i], &old_fwd[i], NULL);
        }
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        close(pfd[0]);
        ef.stage = 0;
        /* the same address space in record and replay: no randomization (kept across exec) */
        if (!aslr)
            personality((unsigned long)personality(0xffffffff) | ADDR_NO_RANDOMIZE);
        if (dir == NULL || chdir(dir) == 0) {
            ef.stage = 1;
            if (envp != NULL)
                execve(path, argv, envp);
            else
                execv(path, argv);
        }
        ef.err = errno;
        if (write(pfd[1], &ef, sizeof ef) < 0) {
            /* nothing left to tell it with; the exit status says it */
        }
        _exit(127);
    }
    if (pid < 0) {
        int e = errno;
        tool_error("cannot start %s: %s", shown, strerror(e));
        rc = TOOL_EXIT_SYSTEM;
    } else {
        g_child = (sig_atomic_t)pid;
        *pid_out = pid;
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    close(pfd[1]);

    if (pid > 0) {
        do
            got = read(pfd[0], &ef, sizeof ef);
        while (got < 0 && errno == EINTR);
        while (waitpid(pid, status, 0) < 0) {
            if (errno != EINTR) {
                tool_error("waiting for %s: %s", shown, strerror(errno));
                rc = TOOL_EXIT_SYSTEM;
                break;
            }
        }
        g_child = 0;
        if (got == (ssize_t)sizeof ef) {
            if (ef.stage == 0)
                tool_error("cannot change to directory %s: %s", dir, strerror(ef.err));
            else
                tool_error("cannot run %s: %s", path, strerror(ef.err));
            rc = TOOL_EXIT_SYSTEM;
        }
    }
    close(pfd[0]);
    for (size_t i = 0; i < 2; i++) {
        sigaction(ignored[i], &old_ign[i], NULL);
        sigaction(forwarded[i], &old_fwd[i], NULL);
    }
    return rc;
}

int tool_shell_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return TOOL_EXIT_SYSTEM;
}

void tool_describe_status(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by signal %d (%s)%s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(buf, cap, "ended with wait status 0x%x", (unsigned)status);
}
