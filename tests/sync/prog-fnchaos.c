/* SPDX-License-Identifier: MIT */
/* Built with -finstrument-functions: two threads make a million calls each and no
 * synchronization operation between their start and their join. Under `record --chaos` their
 * only chaos points are at function events (libtrace/record/sync.c). Each thread adds 1 to a
 * shared counter per call, load then store (relaxed atomics: a race of values, not of C), so a
 * perturbed schedule loses updates; it prints the calls it made and the counter.
 *
 * Usage: prog-fnchaos [CALLS] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static _Atomic long counter;
static long calls = 1000000;

__attribute__((noinline)) static long add_one(long v)
{
    return v + 1;
}

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < calls; i++) {
        long v = atomic_load_explicit(&counter, memory_order_relaxed);
        atomic_store_explicit(&counter, add_one(v), memory_order_relaxed);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        calls = atol(argv[1]);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, worker, NULL) != 0)
            return 2;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    printf("calls %ld counter %ld\n", 2 * calls, atomic_load(&counter));
    return 0;
}
