/* SPDX-License-Identifier: MIT */
/* More recording threads than the memory budget has buffers (8 MiB / 256 KiB = 32 by default).
 *
 *   prog-threads wide N K     N threads at once; each makes one call, then all wait on a barrier
 *                             (so every one holds a buffer while the others start), then each
 *                             makes K calls of its own value and reads the clock
 *   prog-threads churn T P    T short-lived threads, P at a time, K = 10 calls each
 *
 * Prints the sum of what the threads computed, which a replay must print again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_barrier_t barrier;
static int use_barrier, calls;

__attribute__((noinline)) static long step(long x, long i)
{
    return x * 31 + i;
}

static void *worker(void *arg)
{
    long id = (long)arg, v = step(id, 0);
    if (use_barrier)
        pthread_barrier_wait(&barrier);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    for (long i = 1; i < calls; i++)
        v = step(v, i) % 1000003;
    return (void *)v;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "wide") && strcmp(argv[1], "churn"))) {
        fprintf(stderr, "usage: prog-threads wide N K | churn TOTAL PARALLEL\n");
        return 2;
    }
    int wide = !strcmp(argv[1], "wide");
    int total = atoi(argv[2]), par = wide ? total : atoi(argv[3]);
    calls = wide ? atoi(argv[3]) : 10;
    if (total < 1 || par < 1 || calls < 1 || par > 4096)
        return 2;
    pthread_t *th = calloc((size_t)par, sizeof *th);
    use_barrier = wide;
    if (wide)
        pthread_barrier_init(&barrier, NULL, (unsigned)total);
    long sum = 0;
    for (int done = 0; done < total; done += par) {
        int n = total - done < par ? total - done : par;
        for (int i = 0; i < n; i++)
            if (pthread_create(&th[i], NULL, worker, (void *)(long)(done + i)) != 0)
                return 3;
        for (int i = 0; i < n; i++) {
            void *r;
            pthread_join(th[i], &r);
            sum += (long)r;
        }
    }
    printf("%ld\n", sum);
    free(th);
    return 0;
}
