/* SPDX-License-Identifier: MIT */
/* A parent that reaps in a SIGCHLD handler, as bash does, while it blocks in a read.
 *
 * It starts two children: the first works for a while (real CPU time, which a replay does
 * not shorten) and exits with status 3; the second waits for a byte that the parent's handler
 * writes once it has reaped the first, then writes "data" to the parent's pipe. So in the
 * recording the handler always runs while the parent is blocked in its read, between its
 * start of the children and the read's result: the handler's waitpid and writes come before
 * the read in the parent's events. A replay whose read returns the recorded bytes at once
 * would meet the live SIGCHLD tens of milliseconds later, after other calls. With "suspend"
 * the handler reaps the second too, while main waits for it in sigsuspend(), where it makes no
 * call (SIGCHLD blocked around the check, so that it cannot land between the check and the
 * wait: pause() would leave that window, and wait for ever when it is hit).
 *
 * With "spin" it starts SPIN children one after another, each exiting at once with its own
 * status, and after each start calls getpid() until the handler has reaped that child: the
 * parent is inside the runtime (recording a getpid) most of the time, so most SIGCHLDs come
 * while the runtime works. The handler notes each child's status and writes a byte to a pipe,
 * and the loop ends when its read of that pipe (an input the replay gives back) returns the
 * byte, so what the loop does never hangs on when the handler ran in its own code between two
 * calls (a replay runs such a one at the next call, docs/REPLAY.md). It prints how many calls
 * each child took and the status the handler noted: a replay that did not run the handler
 * where its calls were recorded prints another status, or none. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPIN 40

static pid_t first, second;
static volatile sig_atomic_t second_done;
static int pausing;
static int go[2];
static volatile sig_atomic_t reaped, reaped_status;
static int note[2];

static void put(const char *s)
{
    ssize_t n = write(1, s, strlen(s));
    (void)n;
}

/* "spin": reaps every child that ended, as bash's handler does */
static void on_chld_spin(int sig)
{
    (void)sig;
    int st;
    int e = errno;
    while (waitpid(-1, &st, WNOHANG) > 0) {
        reaped_status = WIFEXITED(st) ? WEXITSTATUS(st) : 100;
        reaped++;
        ssize_t n = write(note[1], "x", 1);
        (void)n;
    }
    errno = e;
}

static int spin(void)
{
    if (pipe2(note, O_NONBLOCK) != 0)
        return 2;
    for (int i = 0; i < SPIN; i++) {
        reaped_status = -1;
        pid_t p = fork();
        if (p == 0)
            _exit(10 + i);
        if (p < 0)
            return 2;
        unsigned long calls = 0;
        char c;
        while (read(note[0], &c, 1) != 1) {
            (void)getpid();
            if (++calls > 100000000ul)
                return put("main: the handler never ran\n"), 2;
        }
        printf("child %d: status %d after %lu calls (%d reaped)\n", i, (int)reaped_status, calls,
               (int)reaped);
    }
    return 0;
}

static void on_chld(int sig)
{
    (void)sig;
    int st;
    pid_t r = waitpid(first, &st, WNOHANG);
    if (r == first) {
        put(WIFEXITED(st) && WEXITSTATUS(st) == 3 ? "handler: reaped the first, status 3\n"
                                                  : "handler: reaped the first, other status\n");
        ssize_t n = write(go[1], "g", 1);
        (void)n;
    } else if (pausing && waitpid(second, &st, WNOHANG) == second) {
        put("handler: reaped the second\n");
        second_done = 1;
    }
}

int main(int argc, char **argv)
{
    /* "suspend": the second is reaped by the handler too, while main waits in sigsuspend() */
    pausing = argc > 1 && strcmp(argv[1], "suspend") == 0;
    bool spinning = argc > 1 && strcmp(argv[1], "spin") == 0;
    int data[2];
    if (pipe(data) != 0 || pipe(go) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = spinning ? on_chld_spin : on_chld;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        return 2;
    struct sigaction back;
    if (sigaction(SIGCHLD, NULL, &back) != 0 || back.sa_handler != sa.sa_handler)
        return put("sigaction does not give the handler back\n"), 2;
    if (spinning)
        return spin();
    fflush(stdout);
    first = fork();
    if (first == 0) {
        volatile unsigned long x = 0;
        for (unsigned long i = 0; i < 30000000ul; i++)
            x += i;
        _exit(3);
    }
    second = fork();
    if (second == 0) {
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(4);
        ssize_t n = write(data[1], "data", 4);
        _exit(n == 4 ? 0 : 5);
    }
    close(data[1]);
    char buf[16] = { 0 };
    ssize_t n = read(data[0], buf, sizeof buf - 1);
    printf("main: read %zd bytes: %s\n", n, n > 0 ? buf : "");
    fflush(stdout);
    if (pausing) {
        sigset_t chld, open;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, &open);
        sigdelset(&open, SIGCHLD);
        while (!second_done)
            sigsuspend(&open);
        sigprocmask(SIG_UNBLOCK, &chld, NULL);
        printf("main: the handler reaped the second\n");
        return 0;
    }
    int st;
    while (waitpid(second, &st, 0) < 0)
        if (errno != EINTR)
            return put("main: the second was not there to wait for\n"), 2;
    printf("main: the second exited %d\n", WEXITSTATUS(st));
    return 0;
}
