/* SPDX-License-Identifier: MIT */
/* Processes: the children a traced process starts, its execs, and the waits for its children.
 *
 * The process tree (under `tinytrace record|replay`, tt_rt_tree): every child is traced too.
 * A fork (or clone without CLONE_VM) child takes its creation path from its parent's count
 * of children (tt_rt_fork_child) and opens its own recording at its first call; a
 * posix_spawn, system or popen child, and every exec, gets its identity in TT_ENV_RT
 * (tt_rt_spawn_env, tt_rt_exec_env), and the image that execs finishes its own file first
 * (tt_rt_exec_begin). The parent records what it was told on channel TT_CH_PROC: the child's
 * pid (fork, posix_spawn), system's status, and each wait's result. Replay hands them back:
 * fork returns the recorded pid (mapped to the live child, identity.c), a wait returns the
 * recorded child and status after it has waited for that very child for real, so zombies are
 * reaped and the recorded order holds; under `replay --process` (tt_rt_alone) no child is
 * started and no wait waits. The parent's side of a fork costs one event: no I/O.
 *
 * Without the tree (a program run with TINYTRACE_MODE set by hand) the runtime records one
 * process. A child it starts (fork, vfork, clone without CLONE_THREAD,
 * posix_spawn, system, popen) runs untraced, in the recording and again live in the replay, so
 * its part of the run is not compared. Each such start is counted (tt_rt_child_untraced), and
 * the first child's command line is named: the one posix_spawn, system or popen runs, or, for a
 * fork, the program the child execs (the child reports it through the runtime's shared page,
 * tt_rt_child_exec). An exec of a program the runtime cannot be loaded into (a static program,
 * or a setuid or setgid one whose owner is not ours, which ignores LD_PRELOAD) ends the
 * recording there: the runtime finishes the file first and counts the exec
 * (tt_rt_exec_untraceable). An exec of an ordinary program starts that program's own recording.
 *
 * In the tree, vfork is a real vfork whose child records nothing and execs the way a
 * posix_spawn child does (below, "vfork"); elsewhere it runs as fork.
 */
#include "preload.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef pid_t (*fork_fn)(void);
typedef pid_t (*waitpid_fn)(pid_t, int *, int);
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
    /* the program headers too, for most files (they follow the 64-byte ELF header): one read
     * where one per header took 13 system calls for /bin/true */
    unsigned char head[1024];
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
            uint64_t at = eh.e_phoff + (uint64_t)i * eh.e_phentsize;
            if (at <= (uint64_t)n && (uint64_t)n - at >= sizeof ph)
                memcpy(&ph, head + at, sizeof ph);
            else if (pread(fd, &ph, sizeof ph, (off_t)at) != (ssize_t)sizeof ph)
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

/* Whether @envp loads the runtime (LD_PRELOAD names it): a child whose environment was made
 * anew (env -i) runs untraced. */
static bool env_loads_runtime(char *const envp[])
{
    for (size_t i = 0; envp && envp[i]; i++)
        if (!strncmp(envp[i], "LD_PRELOAD=", 11))
            return strstr(envp[i], "libtinytrace-preload") != NULL;
    return false;
}

/* Whether an exec of @path will find a program to run (a shell tries every PATH entry). */
static bool will_exec(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Before this process execs @path with @argv and @envp: in a child, name the program; in the
 * traced process, end the recording when the program cannot be traced, or else hand the
 * runtime's settings on to it. Returns the environment to exec with. */
static char *const *before_exec(const char *path, char *const argv[], char *const envp[])
{
    if (!tt_rt_guard_enter())
        return envp;
    tt_pl_pipes_settle(-1); /* read.c: the image's replayed reads owe their pipes nothing */
    char cmd[512];
    join_argv(argv, cmd, sizeof cmd);
    if (tt_rt_tree()) {
        if (!will_exec(path)) {
            /* the exec fails, and says why: nothing ends */
        } else if (!traceable(path, 0) || !env_loads_runtime(envp)) {
            tt_rt_exec_untraceable(cmd[0] ? cmd : path);
        } else {
            tt_rt_exec_begin();
            if (tt_rt_alone())
                syscall(SYS_exit_group, 0); /* replay --process: this image was the one */
            envp = tt_rt_exec_env(envp);
        }
    } else if (tt_rt_is_traced_process()) {
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

static int vfork_exec(const char *file, const char *path, char *const argv[],
                      char *const envp[], bool search);
static bool in_vfork_child(void);

TT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    if (UNLIKELY(in_vfork_child()))
        return vfork_exec(path, path, argv, envp, false);
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
    if (UNLIKELY(in_vfork_child()))
        return vfork_exec(file, path, argv, envp, true);
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

/* What a child's start hands back, on TT_CH_PROC at site @k: *@h (ret: the pid or -1, err) and
 * @data. Record: @h and @data as the real call left them. Replay: the recorded ones. False when
 * the replay failed and the program goes on (then the caller acts live). */
static bool proc_event(tt_session *s, enum site k, struct in_head *h, void *data, size_t len)
{
    struct iovec v = { data, len };
    if (tt_pl_recording(s))
        h->len = data ? len : 0;
    return tt_pl_in_simple(s, TT_CH_PROC, k, h, data ? &v : NULL, data ? 1 : 0);
}

/* A real vfork in progress on this thread ("vfork" below says how it goes). */
struct vfork_state {
    tt_session *s;
    unsigned n;          /* the child's number */
    int e0;              /* errno before the call */
    bool rec;            /* the start is recorded */
    bool untraceable;    /* the child execs a program the runtime cannot enter */
    bool untraced;       /* ... or one it could, which cannot find the runtime's settings */
    unsigned starts;     /* children the child itself started: untraced */
    pid_t parent;        /* the parent's pid: a child's child is not the vfork child */
    sigset_t mask;       /* the thread's signal mask before the call */
    char cmd[512];       /* what the child execs */
};
static __thread struct vfork_state vf;
/* between the system call and its return in the parent: only the child runs then */
__thread bool tt_pl_vforked;

/* The parent's side of a fork-like start, once the child exists (@pid, -1 with @real_errno):
 * recorded on TT_CH_PROC at site @k, or met in the recording, and child @n noted as started by
 * @how. The guard is held; it is released here, with errno as the call leaves it (@e0 when it
 * succeeded). @rec: the start is live and recorded (a recording, or a replay that failed and
 * goes on). */
static pid_t fork_parent(tt_session *s, enum site k, unsigned n, bool rec, pid_t pid,
                         int real_errno, int e0, const char *how)
{
    struct in_head h = { 0 };
    if (rec && tt_pl_recording(s)) {
        h.ret = pid;
        h.err = pid < 0 ? real_errno : 0;
        proc_event(s, k, &h, NULL, 0);
        if (pid > 0)
            tt_rt_note_child(n, pid, how);
    } else if (!rec && proc_event(s, k, &h, NULL, 0)) {
        /* replay: the recorded start is met after the real one, where it was recorded: the
         * fork's own handlers (pthread_atfork: perl's take mutexes) make their calls inside
         * it, before it returns */
        if (h.ret > 0 && pid > 0) {
            tt_pl_id_remember((pid_t)h.ret, pid);
        } else if (pid > 0) {
            /* it failed when recorded: so it does now, and the live child goes */
            REAL(kill, int (*)(pid_t, int))(pid, SIGKILL);
            while (REAL(waitpid, waitpid_fn)(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        } else {
            h.ret = -1; /* it failed now, not when recorded: as the live call says */
            h.err = real_errno;
        }
    } else if (pid > 0) {
        h.ret = pid; /* the replay failed and goes on: a live fork */
    } else {
        h.ret = -1;
        h.err = real_errno;
    }
    return (pid_t)tt_pl_finish(&h, e0);
}

/* A fork-like start: @start makes the child (fork, or clone with the caller's arguments) and
 * returns its pid, 0 in the child, -1. */
static pid_t fork_like(enum site k, pid_t (*start)(void *), void *ctx)
{
    tt_session *s = tt_rt_tree() ? tt_pl_enter() : NULL;
    if (!s) {
        pid_t pid = start(ctx);
        if (pid > 0 && UNLIKELY(tt_pl_vforked))
            vf.starts++; /* a vfork child's child: untraced, its parent counts it */
        else if (pid > 0 && !tt_rt_tree() && tt_rt_guard_enter()) {
            tt_rt_child_untraced(NULL);
            tt_rt_guard_leave();
        }
        return pid;
    }
    int e0 = errno;
    unsigned n = tt_rt_child_next();
    struct in_head h = { 0 };
    bool rec = tt_pl_recording(s);
    if (!rec && tt_rt_alone()) {
        /* replay --process: no child runs */
        if (proc_event(s, k, &h, NULL, 0))
            return (pid_t)tt_pl_finish(&h, e0);
        rec = true; /* the replay failed and goes on: a live fork */
    }
    /* no guard across the call: the child begins without it */
    tt_rt_guard_leave();
    pid_t pid = start(ctx);
    if (pid == 0) {
        tt_pl_signal_fork_child_();
        tt_pl_sites_forget_();
        tt_rt_fork_child(s, n);
        return 0;
    }
    int real_errno = errno;
    if (!tt_rt_guard_enter()) {
        errno = real_errno;
        return pid;
    }
    return fork_parent(s, k, n, rec, pid, real_errno, e0, tt_pl_site_names[k]);
}

static pid_t start_fork(void *ctx)
{
    (void)ctx;
    return REAL(fork, fork_fn)();
}

TT_EXPORT pid_t fork(void)
{
    return fork_like(S_fork, start_fork, NULL);
}

/* ---------------------------------------------------------------- vfork
 *
 * In the tree, vfork is a real vfork (x86-64): the child runs on the parent's memory, and the
 * calling thread of the parent waits until the child has exec'd or ended. A shell (dash) starts
 * every command this way and gcc every pass; as a fork, each child got a copy of the parent's
 * memory that its exec then tore down, 0.3 ms a process here (PERFORMANCE.md, issue 17).
 *
 * The child records nothing and allocates nothing: it holds the nesting guard from its first
 * instruction in C, so every call it makes forwards. Its exec (vfork_exec) hands the program it
 * becomes the identity of child N as posix_spawn does (path root/N, first image gen 0), built
 * on the child's stack, and leaves in the thread's state (vf, thread-local: the child runs on
 * the calling thread's TLS) what the parent must say: the command line, and whether the runtime
 * cannot follow it (a static or setuid program, an environment without the runtime, a closed
 * settings descriptor). When vfork returns in the parent, the parent records the start as a
 * fork's (the pid, TT_CH_PROC) and notes the child as "vfork CMD"; a replay does the same
 * vfork, so the images pair. An interposer written in C cannot return twice from one frame, so
 * vfork itself is a few instructions of assembly: tt_pl_vfork_begin decides and prepares, the
 * system call is made with the return address kept in a register (as glibc's vfork does), and
 * tt_pl_vfork_end, tail-called, returns in the child and in the parent. Everywhere else (no
 * tree, no live session, replay --process, other architectures) vfork runs as fork. */

static bool in_vfork_child(void)
{
    return tt_pl_vforked && (pid_t)syscall(SYS_getppid) == vf.parent;
}

size_t tt_pl_vfork_kept(int out[2])
{
    if (!in_vfork_child())
        return 0;
    return tt_rt_inherited_fds(out);
}

/* 1: a real vfork follows, prepared; 0: vfork runs as fork (tt_pl_vfork_as_fork). */
int tt_pl_vfork_begin(void);
__attribute__((used)) int tt_pl_vfork_begin(void)
{
    if (!tt_rt_tree())
        return 0;
    tt_session *s = tt_pl_enter();
    if (!s)
        return 0;
    bool rec = tt_pl_recording(s);
    /* a user shadow stack (CET) would fault: the child's returns and calls rewrite the entry
     * the parent returns through, which glibc's own vfork avoids by never returning in the
     * child; such a process runs vfork as fork (ARCH_SHSTK_STATUS, 0x5005; EINVAL: none) */
    unsigned long shstk = 0;
    bool shadow = syscall(SYS_arch_prctl, 0x5005, &shstk) == 0 && (shstk & 1);
    /* replay --process: the fork path answers from the recording */
    if ((!rec && tt_rt_alone()) || shadow) {
        tt_rt_guard_leave();
        return 0;
    }
    vf.s = s;
    vf.e0 = errno;
    vf.rec = rec;
    vf.n = tt_rt_child_next();
    vf.untraceable = vf.untraced = false;
    vf.starts = 0;
    vf.cmd[0] = '\0';
    vf.parent = (pid_t)syscall(SYS_getpid);
    /* Every signal waits until the child has the guard, and the parent its own state back
     * (as glibc's posix_spawn blocks them around its vfork): a handler in between would run
     * in the child on the parent's session, or in the parent with the child's guard. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &vf.mask);
    tt_pl_vforked = true;
    tt_rt_guard_leave();
    return 1;
}

pid_t tt_pl_vfork_as_fork(void);
__attribute__((used)) pid_t tt_pl_vfork_as_fork(void)
{
    return fork();
}

/* Called with the system call's result: 0 in the child, the pid or -errno in the parent. */
pid_t tt_pl_vfork_end(long r);
__attribute__((used)) pid_t tt_pl_vfork_end(long r)
{
    if (r == 0) {
        (void)tt_rt_guard_enter(); /* the child: every call it makes forwards */
        pthread_sigmask(SIG_SETMASK, &vf.mask, NULL);
        return 0;
    }
    /* the parent, once the child has exec'd or ended: the guard the child took is in this
     * thread's state, which the child shared; it is the parent's now, and so are signals,
     * which a delivery waiting since the call meets recorded as anywhere else */
    tt_rt_guard_leave();
    tt_pl_vforked = false;
    pthread_sigmask(SIG_SETMASK, &vf.mask, NULL);
    if (!tt_rt_guard_enter())
        return r < 0 ? (errno = (int)-r, -1) : (pid_t)r;
    pid_t pid = r < 0 ? -1 : (pid_t)r;
    int real_errno = r < 0 ? (int)-r : 0;
    if (vf.untraceable && pid > 0)
        tt_rt_vfork_untraceable(vf.cmd);
    if (vf.untraced && pid > 0)
        tt_rt_child_untraced(vf.cmd);
    for (unsigned i = 0; i < vf.starts && pid > 0; i++)
        tt_rt_child_untraced(NULL);
    char how[sizeof vf.cmd + 8];
    snprintf(how, sizeof how, "vfork%s%s", vf.cmd[0] ? " " : "", vf.cmd);
    return fork_parent(vf.s, S_fork, vf.n, vf.rec, pid, real_errno, vf.e0, how);
}

#if defined(__x86_64__)
__asm__(".pushsection .text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        ".p2align 4\n"
        "vfork:\n"
        ".cfi_startproc\n"
        "subq $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "call tt_pl_vfork_begin\n"
        "addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "testl %eax, %eax\n"
        "jz tt_pl_vfork_as_fork\n"
        "popq %rdi\n" /* the return address, in a register the system call keeps */
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_register %rip, %rdi\n"
        "movl $58, %eax\n" /* SYS_vfork */
        "syscall\n"
        "pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rip, 0\n"
        "movq %rax, %rdi\n"
        "jmp tt_pl_vfork_end\n"
        ".cfi_endproc\n"
        ".size vfork, .-vfork\n"
        ".popsection\n");
#else
TT_EXPORT pid_t vfork(void)
{
    return fork();
}
#endif

/* An exec in the child of a real vfork, with the guard held: @path to check (@file for
 * execvpe's own search, @search). The program gets child vf.n's identity in TT_ENV_RT, in an
 * environment built on this stack; nothing is allocated, nothing recorded. */
static int vfork_exec(const char *file, const char *path, char *const argv[],
                      char *const envp[], bool search)
{
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char *e[n + 2];
    char var[sizeof TT_ENV_RT + 400], value[380];
    int fd = -1, fl;
    char *const *use = envp;
    join_argv(argv, vf.cmd, sizeof vf.cmd);
    if (!vf.cmd[0])
        snprintf(vf.cmd, sizeof vf.cmd, "%s", path);
    if (will_exec(path)) {
        if (!traceable(path, 0)) {
            vf.untraceable = true; /* static, setuid */
        } else if (!env_loads_runtime(envp) ||
                   tt_rt_spawn_rt_value(vf.n, value, sizeof value, &fd) != 0 ||
                   (fl = REAL(fcntl, int (*)(int, int, ...))(fd, F_GETFD)) < 0 ||
                   (fl & FD_CLOEXEC)) {
            /* env -i, or the settings descriptor gone (the fd guard keeps it from the
             * program's closes; libc's fcntl here, which the guard would refuse) */
            vf.untraced = true;
        } else {
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (strncmp(envp[i], TT_ENV_RT "=", sizeof TT_ENV_RT) != 0)
                    e[k++] = envp[i];
            snprintf(var, sizeof var, TT_ENV_RT "=%s", value);
            e[k++] = var;
            e[k] = NULL;
            use = e;
        }
    }
    int rc = search ? REAL(execvpe, int (*)(const char *, char *const[], char *const[]))(
                          file, argv, use)
                    : REAL(execve, execve_fn)(path, argv, use);
    vf.untraceable = vf.untraced = false; /* the exec failed: nothing ran */
    return rc;
}

/* Whether a child running @path with @envp will be traced; when not, it is counted and named
 * (an untraceable program: static, setuid; or an environment without the runtime). */
static bool child_traceable(const char *path, char *const argv[], char *const envp[])
{
    if (traceable(path, 0) && env_loads_runtime(envp))
        return true;
    char cmd[512];
    join_argv(argv, cmd, sizeof cmd);
    tt_rt_child_untraced(cmd[0] ? cmd : path);
    return false;
}

static int spawn(spawn_fn real, bool search, pid_t *pid, const char *path,
                 const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                 char *const argv[], char *const envp[])
{
    tt_session *s = tt_rt_tree() ? tt_pl_enter() : NULL;
    if (!s) {
        int rc = real(pid, path, fa, attr, argv, envp);
        if (rc == 0 && UNLIKELY(tt_pl_vforked))
            vf.starts++; /* a vfork child's child: untraced, its parent counts it */
        else if (rc == 0 && tt_rt_guard_enter()) {
            char cmd[512];
            join_argv(argv, cmd, sizeof cmd);
            tt_rt_child_untraced(cmd[0] ? cmd : path);
            tt_rt_guard_leave();
        }
        return rc;
    }
    int e0 = errno;
    unsigned n = tt_rt_child_next();
    char buf[PATH_MAX];
    const char *file = search ? search_path(path, buf, sizeof buf) : path;
    char *const *env = child_traceable(file, argv, envp) ? tt_rt_spawn_env(envp, n) : envp;
    struct in_head h = { 0 };
    int32_t child = 0;
    bool live = tt_pl_recording(s) || !proc_event(s, S_posix_spawn, &h, &child, sizeof child);
    int rc;
    if (!live) {
        rc = (int)h.ret;
        if (rc == 0 && !tt_rt_alone()) {
            pid_t lp = 0;
            int held = tt_rt_guard_leave_live();
            int r = real(&lp, path, fa, attr, argv, env);
            tt_rt_guard_enter_live(held);
            if (r == 0)
                tt_pl_id_remember(child, lp);
        }
        if (rc == 0 && pid)
            *pid = child;
    } else {
        pid_t lp = 0;
        tt_rt_guard_leave();
        rc = real(&lp, path, fa, attr, argv, env);
        tt_rt_guard_enter();
        if (pid && rc == 0)
            *pid = lp;
        if (tt_pl_recording(s)) {
            h.ret = rc;
            child = rc == 0 ? lp : 0;
            proc_event(s, S_posix_spawn, &h, &child, sizeof child);
            if (rc == 0) {
                char how[600];
                snprintf(how, sizeof how, "spawn %.500s", argv && argv[0] ? argv[0] : path);
                tt_rt_note_child(n, lp, how);
            }
        }
    }
    if (env != envp)
        free((void *)env); /* its strings but the last are the caller's: a leak of one */
    tt_rt_guard_leave();
    errno = e0;
    return rc;
}

TT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(REAL(posix_spawn, spawn_fn), false, pid, path, fa, attr, argv, envp);
}

TT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(REAL(posix_spawnp, spawn_fn), true, pid, file, fa, attr, argv, envp);
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

/* system(3) as glibc makes it (SIGINT and SIGQUIT ignored and SIGCHLD blocked while the shell
 * runs; the shell starts with them as the caller had them), through the interposed
 * posix_spawn, so that the shell is child n of the tree with its identity. One event: the
 * status, then the shell's pid. */
static int tree_system(tt_session *s, const char *command)
{
    int e0 = errno;
    unsigned n = tt_rt_child_next();
    struct sigaction ign = { .sa_handler = SIG_IGN }, oint, oquit;
    sigset_t chld, omask;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &oint);
    sigaction(SIGQUIT, &ign, &oquit);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &omask);
    struct in_head h = { 0 };
    int32_t child = 0;
    bool live = tt_pl_recording(s) || !proc_event(s, S_system, &h, &child, sizeof child);
    if (live || (h.ret != -1 && !tt_rt_alone())) {
        char *argv[] = { (char *)"sh", (char *)"-c", (char *)command, NULL };
        char *const *env = child_traceable("/bin/sh", argv, environ)
                               ? tt_rt_spawn_env(environ, n) : environ;
        posix_spawnattr_t attr;
        sigset_t def;
        sigemptyset(&def);
        if (oint.sa_handler != SIG_IGN)
            sigaddset(&def, SIGINT);
        if (oquit.sa_handler != SIG_IGN)
            sigaddset(&def, SIGQUIT);
        posix_spawnattr_init(&attr);
        posix_spawnattr_setsigmask(&attr, &omask);
        posix_spawnattr_setsigdefault(&attr, &def);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        pid_t pid = 0;
        int status = -1;
        int held = tt_rt_guard_leave_live();
        int rc = REAL(posix_spawn, spawn_fn)(&pid, "/bin/sh", NULL, &attr, argv, env);
        if (rc == 0) {
            while (REAL(waitpid, waitpid_fn)(pid, &status, 0) < 0 && errno == EINTR)
                ;
        } else {
            status = 127 << 8;
        }
        tt_rt_guard_enter_live(held);
        posix_spawnattr_destroy(&attr);
        if (env != environ)
            free((void *)env);
        if (live && tt_pl_recording(s)) {
            h.ret = status;
            child = rc == 0 ? pid : 0;
            proc_event(s, S_system, &h, &child, sizeof child);
            if (rc == 0) {
                char how[600];
                snprintf(how, sizeof how, "system sh -c %.480s", command);
                tt_rt_note_child(n, pid, how);
            }
        } else if (live) {
            h.ret = status;
        }
    }
    sigaction(SIGINT, &oint, NULL);
    sigaction(SIGQUIT, &oquit, NULL);
    sigprocmask(SIG_SETMASK, &omask, NULL);
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int system(const char *command)
{
    tt_session *s = command && tt_rt_tree() ? tt_pl_enter() : NULL;
    if (s)
        return tree_system(s, command);
    int rc = REAL(system, system_fn)(command);
    if (command && rc != -1)
        shell_child(command);
    return rc;
}

/* popen's shell is started by glibc from the environment (no interposed call sees it): the
 * environment carries its identity for the time of the call. */
TT_EXPORT FILE *popen(const char *command, const char *type)
{
    if (command && tt_rt_tree() && tt_rt_guard_enter()) {
        unsigned n = tt_rt_child_next();
        char *argv[] = { (char *)"sh", (char *)"-c", (char *)command, NULL };
        char **old = environ;
        char *const *env = child_traceable("/bin/sh", argv, old) ? tt_rt_spawn_env(old, n) : old;
        environ = (char **)env;
        tt_rt_guard_leave();
        FILE *f = REAL(popen, popen_fn)(command, type);
        tt_rt_guard_enter();
        environ = old;
        if (env != old)
            free((void *)env);
        tt_rt_guard_leave();
        return f;
    }
    FILE *f = REAL(popen, popen_fn)(command, type);
    if (f)
        shell_child(command);
    return f;
}

struct clone_args {
    int (*fn)(void *);
    void *arg;
    int flags;
    void *stack;
    pid_t *ptid;
    void *tls;
    pid_t *ctid;
    unsigned n;
    tt_session *parent;
};

static int clone_child(void *p)
{
    struct clone_args *a = p;
    tt_pl_sites_forget_();
    tt_rt_fork_child(a->parent, a->n);
    return a->fn(a->arg);
}

static pid_t start_clone(void *ctx)
{
    struct clone_args *a = ctx;
    return (pid_t)REAL(clone, clone_fn)(clone_child, a->stack, a->flags, a, a->ptid, a->tls,
                                        a->ctid);
}

TT_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    pid_t *ptid = va_arg(ap, pid_t *);
    void *tls = va_arg(ap, void *);
    pid_t *ctid = va_arg(ap, pid_t *);
    va_end(ap);
    if (!(flags & (CLONE_THREAD | CLONE_VM)) && tt_rt_tree()) {
        /* a process of its own memory: a fork, named as one (the child's start routine
         * learns its identity first; the parent's count of children, as fork's, is taken in
         * fork_like before the call) */
        struct clone_args a = { fn, arg, flags, stack, ptid, tls, ctid, 0, tt_rt_session() };
        a.n = 0;
        return (int)fork_like(S_clone, start_clone, &a);
    }
    int rc = REAL(clone, clone_fn)(fn, stack, flags, arg, ptid, tls, ctid);
    if (rc > 0 && !(flags & CLONE_THREAD) && tt_rt_guard_enter()) {
        tt_rt_child_untraced(NULL);
        tt_rt_guard_leave();
    }
    return rc;
}

/* ---------------------------------------------------------------- waiting for children */

/* What a wait returns besides its pid: one fixed record, the same for every form. */
struct wait_out {
    int32_t status;
    int32_t pad;
    struct rusage ru;
    siginfo_t si;
};

enum wait_form { W_WAITPID, W_WAIT, W_WAIT3, W_WAIT4, W_WAITID };

struct wait_args {
    enum wait_form form;
    pid_t pid;
    idtype_t idtype;
    id_t id;
    int options;
    int *status;
    struct rusage *ru;
    siginfo_t *si;
};

typedef pid_t (*wait4_fn)(pid_t, int *, int, struct rusage *);
typedef int (*waitid_fn)(idtype_t, id_t, siginfo_t *, int);

/* The real call, into @o. */
static pid_t wait_real(const struct wait_args *a, struct wait_out *o)
{
    memset(o, 0, sizeof *o);
    int st = 0;
    pid_t r;
    switch (a->form) {
    case W_WAITID:
        r = REAL(waitid, waitid_fn)(a->idtype, a->id, &o->si, a->options);
        return r == 0 ? o->si.si_pid : -1; /* 0 and si_pid 0: WNOHANG, nobody */
    case W_WAIT3:
    case W_WAIT4:
        r = REAL(wait4, wait4_fn)(a->form == W_WAIT3 ? -1 : a->pid, &st, a->options, &o->ru);
        break;
    default:
        r = REAL(waitpid, waitpid_fn)(a->form == W_WAIT ? -1 : a->pid, &st, a->options);
        break;
    }
    o->status = st;
    return r;
}

/* Replay: waits for real for the child the recording names (@rec, live @live), so that it is
 * reaped when the program thinks it is and the next wait finds the recorded one next. */
static void wait_for(const struct wait_args *a, pid_t live)
{
    int opts = a->options & ~WNOHANG;
    if (a->form == W_WAITID) {
        siginfo_t si;
        while (REAL(waitid, waitid_fn)(P_PID, (id_t)live, &si, opts ? opts : WEXITED) < 0 &&
               errno == EINTR)
            ;
        return;
    }
    int st;
    while (REAL(waitpid, waitpid_fn)(live, &st, opts) < 0 && errno == EINTR)
        ;
}

static pid_t wait_any(struct wait_args *a)
{
    enum site k = a->form == W_WAITID ? S_waitid : a->form == W_WAIT4 ? S_wait4
                : a->form == W_WAIT3 ? S_wait3 : a->form == W_WAIT ? S_wait : S_waitpid;
    struct wait_out o;
    tt_session *s = tt_rt_tree() ? tt_pl_enter() : NULL;
    pid_t r;
    if (!s) {
        r = wait_real(a, &o);
    } else {
        int e0 = errno;
        struct in_head h = { 0 };
        if (tt_pl_recording(s)) {
            /* the real call may block: not under the guard (read.c says why) */
            tt_rt_guard_leave();
            r = wait_real(a, &o);
            int real_errno = errno;
            if (!(s = tt_pl_enter())) {
                errno = real_errno;
                goto out;
            }
            h.ret = r;
            h.err = r < 0 ? real_errno : 0;
            proc_event(s, k, &h, &o, sizeof o);
            if (r > 0) {
                char meta[96];
                int st = a->form == W_WAITID
                             ? (o.si.si_code == CLD_EXITED ? (o.si.si_status & 0xff) << 8
                                                           : o.si.si_status & 0x7f)
                             : o.status;
                snprintf(meta, sizeof meta, "proc.reaped=%ld status=%d", (long)r, st);
                tt_rt_note(meta);
            }
        } else if (proc_event(s, k, &h, &o, sizeof o)) {
            if (h.ret > 0 && !tt_rt_alone()) {
                tt_pl_pipes_settle(-1); /* read.c: the child may be writing what is owed */
                int held = tt_rt_guard_leave_live();
                wait_for(a, tt_pl_id_live((pid_t)h.ret));
                tt_rt_guard_enter_live(held);
            }
        } else {
            tt_rt_guard_leave();
            r = wait_real(a, &o);
            goto out;
        }
        r = (pid_t)tt_pl_finish(&h, e0);
    }
    if (r >= 0) {
        if (a->status)
            *a->status = o.status;
        if (a->ru)
            *a->ru = o.ru;
        if (a->si)
            *a->si = o.si;
    }
out:
    if (a->form == W_WAITID)
        return r < 0 ? -1 : 0;
    return r;
}

TT_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
    struct wait_args a = { .form = W_WAITPID, .pid = tt_pl_id_live(pid), .options = options,
                           .status = status };
    if (tt_rt_tree() && !tt_rt_guard_enter())
        return REAL(waitpid, waitpid_fn)(pid, status, options);
    if (tt_rt_tree())
        tt_rt_guard_leave();
    return wait_any(&a);
}

TT_EXPORT pid_t wait(int *status)
{
    struct wait_args a = { .form = W_WAIT, .pid = -1, .status = status };
    return wait_any(&a);
}

TT_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
    struct wait_args a = { .form = W_WAIT3, .pid = -1, .options = options, .status = status,
                           .ru = ru };
    return wait_any(&a);
}

TT_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
    struct wait_args a = { .form = W_WAIT4, .pid = tt_pl_id_live(pid), .options = options,
                           .status = status, .ru = ru };
    return wait_any(&a);
}

TT_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *si, int options)
{
    struct wait_args a = { .form = W_WAITID, .idtype = idtype,
                           .id = idtype == P_PID ? (id_t)tt_pl_id_live((pid_t)id) : id,
                           .options = options, .si = si };
    return (int)wait_any(&a);
}
