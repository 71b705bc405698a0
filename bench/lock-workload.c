/* SPDX-License-Identifier: MIT */
/* lock-workload THREADS PAIRS MUTEXES: THREADS threads doing PAIRS lock/unlock pairs in all
 * (PAIRS / THREADS each) over MUTEXES mutexes (thread t takes mutex (t + i) % MUTEXES at its
 * i-th pair), a counter per mutex incremented inside; prints the counters' sum, which must be
 * PAIRS. Not instrumented: under `tinytrace record` the preload library sees every lock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_MUTEXES 64

static pthread_mutex_t mu[MAX_MUTEXES];
static unsigned long count[MAX_MUTEXES];
static long per_thread;
static int nmutex;

static void *work(void *arg)
{
    long t = (long)arg;
    for (long i = 0; i < per_thread; i++) {
        int k = (int)((t + i) % nmutex);
        pthread_mutex_lock(&mu[k]);
        count[k]++;
        pthread_mutex_unlock(&mu[k]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int nthreads = atoi(argv[1]);
    long pairs = atol(argv[2]);
    nmutex = atoi(argv[3]);
    if (nthreads < 1 || nthreads > 64 || pairs < 1 || nmutex < 1 || nmutex > MAX_MUTEXES)
        return 2;
    per_thread = pairs / nthreads;
    for (int i = 0; i < nmutex; i++)
        pthread_mutex_init(&mu[i], NULL);
    pthread_t th[64];
    for (long t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, work, (void *)t);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    unsigned long sum = 0;
    for (int i = 0; i < nmutex; i++)
        sum += count[i];
    printf("%lu\n", sum);
    return sum == (unsigned long)(per_thread * nthreads) ? 0 : 1;
}
