/* SPDX-License-Identifier: MIT */
/* Three threads make a known number of calls each, then the main thread dereferences NULL.
 *
 *   prog-crash            as above
 *   prog-crash worker     a worker crashes after its calls while main returns from main
 *   prog-crash two        two workers crash at the same time
 *   prog-crash overflow   a worker overflows its stack
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 3
#define CALLS 5000

__attribute__((noinline)) static int work(int x)
{
    return x ^ 0x5a;
}

static void *worker(void *arg)
{
    long id = (long)arg, acc = 0;
    for (int i = 0; i < CALLS + (int)id; i++) /* each thread its own count */
        acc += work(i + (int)id);
    return (void *)acc;
}

__attribute__((noinline)) static void crash_here(volatile int *p)
{
    *p = 42;
}

static pthread_barrier_t both;
static atomic_int worker_done;

static void *crash_worker(void *arg)
{
    worker(arg);
    atomic_store(&worker_done, 1);
    crash_here(NULL);
    return NULL;
}

static void *crash_together(void *arg)
{
    worker(arg);
    pthread_barrier_wait(&both);
    crash_here(NULL);
    return NULL;
}

static volatile long depth_left = 1L << 40; /* never reached: the stack ends first */

__attribute__((noinline)) static int recurse(volatile char *up)
{
    volatile char here[256];
    here[0] = up ? up[0] : 1;
    if (depth_left-- == 0)
        return here[0];
    return recurse(here) + here[0];
}

static void *overflow(void *arg)
{
    worker(arg);
    return (void *)(long)recurse(NULL);
}

int main(int argc, char **argv)
{
    pthread_t th[THREADS];
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "worker") == 0) {
        pthread_create(&th[0], NULL, crash_worker, (void *)0L);
        while (!atomic_load(&worker_done))
            ;
        usleep(100);
        return 0;
    }
    if (strcmp(mode, "two") == 0) {
        pthread_barrier_init(&both, NULL, 2);
        pthread_create(&th[0], NULL, crash_together, (void *)0L);
        pthread_create(&th[1], NULL, crash_together, (void *)1L);
        pthread_join(th[0], NULL);
        pthread_join(th[1], NULL);
        return 0;
    }
    if (strcmp(mode, "overflow") == 0) {
        pthread_create(&th[0], NULL, overflow, (void *)0L);
        pthread_join(th[0], NULL);
        return 0;
    }
    for (long i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    printf("threads done\n");
    fflush(stdout);
    crash_here(NULL);
    return 0;
}
