/* SPDX-License-Identifier: MIT */
/* A parent that starts its children with vfork, as dash and gcc do.
 *
 * Child 1 execs a program that does not exist, then _exits with 127. Child 2 puts the write
 * end of a pipe on its stdout (dup2, close: calls a vfork child may make) and execs `date +%N`,
 * whose output the parent reads from the pipe: a replay that did not trace date would read
 * another time. Child 3 execs /sbin/ldconfig (static on Debian: a program the runtime cannot
 * follow). Then "close-all": child 4 closes every descriptor from 3 up before it execs
 * `date +%N` too, as Python's subprocess does; the runtime's settings descriptor must survive
 * that, or this date would run untraced. The parent prints what it read and each child's
 * status, in the order it reaped them. With "sigchld", only the case above sigchld_case. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t reaped; /* the SIGCHLD handler of the case has run */

static void on_chld(int sig)
{
    (void)sig;
    reaped = 1;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "sigchld: the parent's handler never ran\n";
    ssize_t n = write(1, msg, sizeof msg - 1);
    (void)n;
    _exit(3);
}

/* SIGCHLD blocked: the mask before, for await_handler. */
static sigset_t block_chld(void)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    return old;
}

/* Waits in sigsuspend, with mask @old, until the case's handler has run; 10 s at most
 * (on_alarm), then the mask is @old again. */
static void await_handler(const sigset_t *old)
{
    alarm(10);
    while (!reaped)
        sigsuspend(old);
    alarm(0);
    sigprocmask(SIG_SETMASK, old, NULL);
}

static pid_t start(const char *what, int out)
{
    pid_t pid = vfork();
    if (pid != 0)
        return pid;
    if (!strcmp(what, "sigchld")) {
        /* the child's disposition is its own: the parent's handler must stay the parent's */
        signal(SIGCHLD, SIG_DFL);
        char *argv[] = {"/bin/true", NULL};
        execv(argv[0], argv);
        _exit(124);
    }
    if (!strcmp(what, "missing")) {
        char *argv[] = {"/nonexistent/tinytrace-test-program", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    if (!strcmp(what, "static")) {
        char *argv[] = {"/sbin/ldconfig", "-p", NULL};
        dup2(out, 1); /* into the pipe, which the parent drains */
        execv(argv[0], argv);
        _exit(126);
    }
    dup2(out, 1);
    close(out);
    if (!strcmp(what, "close-all"))
        syscall(SYS_close_range, 3, ~0U, 0);
    char *argv[] = {"date", "+%N", NULL};
    execvp(argv[0], argv);
    _exit(125);
}

static void reap(pid_t pid, const char *name)
{
    int st;
    if (waitpid(pid, &st, 0) != pid) {
        printf("%s: waitpid failed\n", name);
        return;
    }
    printf("%s: exit %d\n", name, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void read_all(int fd, const char *name)
{
    char buf[256];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof buf && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    printf("%s read: %s", name, n && buf[n - 1] == '\n' ? buf : "(nothing)\n");
}

/* "sigchld": the parent reaps in a SIGCHLD handler; its vfork child resets SIGCHLD to the
 * default before it execs. The parent waits for its handler in sigsuspend, 10 s at most. */
static int sigchld_case(void)
{
    signal(SIGALRM, on_alarm);
    signal(SIGCHLD, on_chld);
    sigset_t old = block_chld();
    pid_t pid = start("sigchld", 1);
    await_handler(&old);
    printf("sigchld: the parent's handler ran\n");
    reap(pid, "sigchld");
    return 0;
}

/* "late": a background child (a fork) ends while the parent waits in a vfork whose child
 * sleeps 300 ms before its exec, so its SIGCHLD is delivered as the vfork returns; the handler
 * reaps it there. The delivery is the parent's like any other: recorded, and replayed where it
 * was. */
static pid_t late_bg;

static void on_late_chld(int sig)
{
    (void)sig;
    int st;
    if (late_bg > 0 && waitpid(late_bg, &st, WNOHANG) == late_bg)
        reaped = 1;
}

static int late_case(void)
{
    signal(SIGALRM, on_alarm);
    signal(SIGCHLD, on_late_chld);
    late_bg = fork();
    if (late_bg == 0) {
        usleep(50 * 1000);
        _exit(7);
    }
    pid_t pid = vfork();
    if (pid == 0) {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        char *argv[] = {"/bin/true", NULL};
        execv(argv[0], argv);
        _exit(124);
    }
    sigset_t old = block_chld();
    await_handler(&old);
    printf("late: the background child was reaped by the handler\n");
    reap(pid, "late vfork child");
    return 0;
}

int main(int argc, char **argv)
{
    int p[2];
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && !strcmp(argv[1], "sigchld"))
        return sigchld_case();
    if (argc > 1 && !strcmp(argv[1], "late"))
        return late_case();
    pid_t a = start("missing", 1);
    reap(a, "missing");
    if (pipe(p) != 0)
        return 1;
    pid_t b = start("date", p[1]);
    close(p[1]);
    read_all(p[0], "date");
    close(p[0]);
    reap(b, "date");
    if (pipe(p) != 0)
        return 1;
    pid_t c = start("static", p[1]);
    close(p[1]);
    char sink[4096];
    while (read(p[0], sink, sizeof sink) > 0)
        ;
    close(p[0]);
    reap(c, "static");
    if (argc > 1 && !strcmp(argv[1], "close-all")) {
        if (pipe(p) != 0)
            return 1;
        pid_t d = start("close-all", p[1]);
        close(p[1]);
        read_all(p[0], "close-all");
        close(p[0]);
        reap(d, "close-all");
    }
    return 0;
}
