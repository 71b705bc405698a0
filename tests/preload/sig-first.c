/* SPDX-License-Identifier: MIT */
/* preload-sig-first: a signal handler makes the process's first calls of functions a handler
 * may make (clock_getres, sem_post: POSIX lets a handler call them), after "main" is written
 * to stderr. The preload library must have found them before: a dlsym inside a handler may
 * meet the loader's lock or the allocator's held (preload/real.c). test-preload.py runs this
 * with LD_DEBUG=bindings and fails on a look-up of either name after the "main" line. */
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sem_t sem;
static volatile sig_atomic_t ran;

static void on_alarm(int sig)
{
    (void)sig;
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC, &res) == 0 && sem_post(&sem) == 0)
        ran = 1;
}

int main(void)
{
    if (sem_init(&sem, 0, 0) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return 3;
    static const char mark[] = "main\n";
    if (write(2, mark, sizeof mark - 1) != (ssize_t)sizeof mark - 1)
        return 4;
    raise(SIGALRM);
    if (!ran)
        return 5;
    printf("handled\n");
    return 0;
}
