/* Three threads make a known number of calls each, then the main thread dereferences NULL. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(void)
{
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    printf("threads done\n");
    fflush(stdout);
    crash_here(NULL);
    return 0;
}
