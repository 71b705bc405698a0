/* SPDX-License-Identifier: MIT */
/* preload-swapper MODE: prints "threads N", how many threads the process has once MODE is done.
 *
 * Recorded under libtinytrace-preload.so, the runtime's swapper thread starts only when it is
 * needed (record/swapper.c): at the first buffer handed over, or when the program installs a
 * signal handler (preload/signal.c). MODE is one of:
 *   idle       nothing: a process that never fills a buffer has no swapper (threads 1);
 *   sigaction  a SIGUSR1 handler installed with sigaction (threads 2);
 *   signal     the same with signal (threads 2);
 *   ignore     SIGUSR1 set to SIG_IGN with signal: no handler (threads 1);
 *   fill       getpid called 300000 times, each an event: many full buffers (threads 2), and
 *              then "pid ok" when every call returned the same pid.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_usr1(int sig)
{
    (void)sig;
}

static int threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "idle";
    if (!strcmp(mode, "sigaction")) {
        struct sigaction sa = { .sa_handler = on_usr1 };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
    } else if (!strcmp(mode, "signal")) {
        signal(SIGUSR1, on_usr1);
    } else if (!strcmp(mode, "ignore")) {
        signal(SIGUSR1, SIG_IGN);
    } else if (!strcmp(mode, "fill")) {
        pid_t first = getpid();
        int same = 1;
        for (int i = 0; i < 300000; i++)
            same &= getpid() == first;
        printf("pid %s\n", same ? "ok" : "changed");
    } else if (strcmp(mode, "idle") != 0) {
        fprintf(stderr, "preload-swapper: no mode %s\n", mode);
        return 2;
    }
    printf("threads %d\n", threads());
    return 0;
}
