/* Processes: what a traced process starts, so that the verdict says what ran unrecorded.
 *
 * The runtime records one process. A child it starts (fork, vfork, clone without CLONE_THREAD,
 * posix_spawn, system, popen) runs untraced, in the recording and again live in the replay, so
 * its part of the run is not compared. Each such start is counted (tt_rt_child_untraced), and
 * the first child's command line is named: the one posix_spawn, system or popen runs, or, for a
 * fork, the program the child execs (the child reports it through the runtime's shared page,
 * tt_rt_child_exec). An exec of a program the runtime cannot be loaded into (a static program,
 * or a setuid or setgid one whose owner is not ours, which ignores LD_PRELOAD) ends the
 * recording there: the runtime finishes the file first and counts the exec
 * (tt_rt_exec_untraceable). An exec of an ordinary program starts that program's own recording.
 *
 * vfork runs as fork: an interposer cannot return twice on one stack. A program that uses vfork
 * as it may (the child only execs or _exits) sees no difference.
 */
#include "preload.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef pid_t (*fork_fn)(void);
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);
typedef int (*system_fn)(const char *);
typedef FILE *(*popen_fn)(const char *, const char *);
typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);

extern char **environ;

/* ---------------------------------------------------------------- what a program is */

/* Whether the runtime can be loaded into @path when this process execs it: a dynamically
 * linked ELF file (or a script whose interpreter is one) that does not change its owner. */
static bool traceable(const char *path, int depth)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return true; /* the exec will fail and say so */
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid()))
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true;
    unsigned char head[256];
    ssize_t n = pread(fd, head, sizeof head, 0);
    bool ok = true;
    if (n >= 2 && head[0] == '#' && head[1] == '!' && depth < 2) {
        char interp[200];
        size_t i = 2, k = 0;
        while (i < (size_t)n && (head[i] == ' ' || head[i] == '\t'))
            i++;
        while (i < (size_t)n && head[i] != ' ' && head[i] != '\t' && head[i] != '\n' &&
               k + 1 < sizeof interp)
            interp[k++] = (char)head[i++];
        interp[k] = '\0';
        ok = k == 0 || traceable(interp, depth + 1);
    } else if (n >= (ssize_t)sizeof(Elf64_Ehdr) && memcmp(head, ELFMAG, SELFMAG) == 0 &&
               head[EI_CLASS] == ELFCLASS64) {
        Elf64_Ehdr eh;
        memcpy(&eh, head, sizeof eh);
        bool interp = false;
        for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
                (ssize_t)sizeof ph)
                break;
            interp |= ph.p_type == PT_INTERP;
        }
        ok = interp;
    }
    close(fd);
    return ok;
}

/* @file found the way execvp finds it, into @out (@file itself when it has a slash). */
static const char *search_path(const char *file, char *out, size_t cap)
{
    if (strchr(file, '/'))
        return file;
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin";
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len + 1 + strlen(file) < cap) {
            memcpy(out, len ? p : ".", len ? len : 1);
            size_t o = len ? len : 1;
            out[o++] = '/';
            strcpy(out + o, file);
            if (access(out, X_OK) == 0)
                return out;
        }
        if (!end)
            break;
        p = end;
    }
    return file;
}

/* argv as one line, arguments separated by spaces, into @out. */
static void join_argv(char *const argv[], char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; argv && argv[i] && o + 1 < cap; i++) {
        size_t n = strlen(argv[i]);
        if (i && o + 1 < cap)
            out[o++] = ' ';
        if (n > cap - 1 - o)
            n = cap - 1 - o;
        memcpy(out + o, argv[i], n);
        o += n;
    }
    out[o] = '\0';
}

/* ---------------------------------------------------------------- exec */

/* Before this process execs @path with @argv and @envp: in a child, name the program; in the
 * traced process, end the recording when the program cannot be traced, or else hand the
 * runtime's settings on to it. Returns the environment to exec with. */
static char *const *before_exec(const char *path, char *const argv[], char *const envp[])
{
    if (!tt_rt_guard_enter())
        return envp;
    char cmd[512];
    join_argv(argv, cmd, sizeof cmd);
    if (tt_rt_is_traced_process()) {
        if (!traceable(path, 0))
            tt_rt_exec_untraceable(cmd[0] ? cmd : path);
        else
            envp = tt_rt_exec_env(envp);
    } else {
        tt_rt_child_exec(cmd[0] ? cmd : path);
    }
    tt_rt_guard_leave();
    return envp;
}

TT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    char *const *e = before_exec(path, argv, envp);
    return REAL(execve, execve_fn)(path, argv, e);
}

TT_EXPORT int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

TT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    char buf[PATH_MAX];
    const char *path = search_path(file, buf, sizeof buf);
    char *const *e = before_exec(path, argv, envp);
    return REAL(execvpe, int (*)(const char *, char *const[], char *const[]))(file, argv, e);
}

TT_EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* The execl family: the arguments into an array, then the v form. */
#define ARGS_MAX 4096
#define COLLECT(first, args, envp_out)                                                         \
    char *args[ARGS_MAX + 1];                                                                  \
    size_t n_ = 0;                                                                             \
    va_list ap_;                                                                               \
    va_start(ap_, first);                                                                      \
    args[n_++] = (char *)(first);                                                              \
    while (n_ < ARGS_MAX && (args[n_] = va_arg(ap_, char *)) != NULL)                          \
        n_++;                                                                                  \
    args[n_] = NULL;                                                                           \
    envp_out;                                                                                  \
    va_end(ap_)

TT_EXPORT int execl(const char *path, const char *arg, ...)
{
    COLLECT(arg, args, (void)0);
    return execve(path, args, environ);
}

TT_EXPORT int execlp(const char *file, const char *arg, ...)
{
    COLLECT(arg, args, (void)0);
    return execvpe(file, args, environ);
}

TT_EXPORT int execle(const char *path, const char *arg, ...)
{
    char **envp;
    COLLECT(arg, args, envp = va_arg(ap_, char **));
    return execve(path, args, envp);
}

/* ---------------------------------------------------------------- children */

TT_EXPORT pid_t fork(void)
{
    /* no guard across the call: the child inherits this thread's guard, and must still report
     * the program it execs */
    pid_t pid = REAL(fork, fork_fn)();
    if (pid > 0 && tt_rt_guard_enter()) {
        tt_rt_child_untraced(NULL);
        tt_rt_guard_leave();
    }
    return pid;
}

TT_EXPORT pid_t vfork(void)
{
    return fork();
}

static int spawn(spawn_fn real, pid_t *pid, const char *path,
                 const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                 char *const argv[], char *const envp[])
{
    int rc = real(pid, path, fa, attr, argv, envp);
    if (rc == 0 && tt_rt_guard_enter()) {
        char cmd[512];
        join_argv(argv, cmd, sizeof cmd);
        tt_rt_child_untraced(cmd[0] ? cmd : path);
        tt_rt_guard_leave();
    }
    return rc;
}

TT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(REAL(posix_spawn, spawn_fn), pid, path, fa, attr, argv, envp);
}

TT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(REAL(posix_spawnp, spawn_fn), pid, file, fa, attr, argv, envp);
}

/* A shell command's line, as the child runs it. */
static void shell_child(const char *command)
{
    if (!command || !tt_rt_guard_enter())
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh -c %s", command);
    tt_rt_child_untraced(cmd);
    tt_rt_guard_leave();
}

TT_EXPORT int system(const char *command)
{
    int rc = REAL(system, system_fn)(command);
    if (command && rc != -1)
        shell_child(command);
    return rc;
}

TT_EXPORT FILE *popen(const char *command, const char *type)
{
    FILE *f = REAL(popen, popen_fn)(command, type);
    if (f)
        shell_child(command);
    return f;
}

TT_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    pid_t *ptid = va_arg(ap, pid_t *);
    void *tls = va_arg(ap, void *);
    pid_t *ctid = va_arg(ap, pid_t *);
    va_end(ap);
    int rc = REAL(clone, clone_fn)(fn, stack, flags, arg, ptid, tls, ctid);
    if (rc > 0 && !(flags & CLONE_THREAD) && tt_rt_guard_enter()) {
        tt_rt_child_untraced(NULL);
        tt_rt_guard_leave();
    }
    return rc;
}
