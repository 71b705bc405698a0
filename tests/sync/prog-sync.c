/* SPDX-License-Identifier: MIT */
/* prog-sync MODE: a program that prints the order in which its threads did something, an order
 * that varies from run to run (random short sleeps, seeded from the clock). Built without
 * instrumentation: only the preload library sees it.
 *
 *   mutex     4 threads take a mutex 10 times each
 *   cond      a producer hands 40 items to 3 consumers through a condition variable; which
 *             consumer got which item
 *   sem       4 threads share a pool of 2 slots (a semaphore); who held a slot when
 *   rwlock    2 readers and 2 writers; the values the readers saw
 *   barrier   4 threads, 5 rounds of a barrier; which one was the serial thread
 *   spin      4 threads take a spinlock 10 times each
 *   once      4 threads race to pthread_once; which one ran the routine
 *   trylock   4 threads trylock a mutex in a loop; how many tries failed for each
 *   kinds     4 threads take a recursive mutex twice, an error-checking one (twice: the second
 *             fails with EDEADLK) and a robust one, whose first holder, a fifth thread, ended
 *             holding it; who took them in which order, and who found the robust one's owner
 *             dead (EOWNERDEAD: "!")
 *   timedwait a timed wait that times out, then one that is signalled: prints both results
 *   sleep     sleeps 5 x 1 s and prints the time after each
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 4
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char out[4096];
static int pos;
static const char *mode;

static void put(const char *fmt, int a, int b)
{
    pos += snprintf(out + pos, sizeof out - (size_t)pos, fmt, a, b);
}

static void nap(unsigned *seed, int max_us)
{
    struct timespec ts = { 0, (long)(rand_r(seed) % (unsigned)max_us) * 1000 };
    nanosleep(&ts, NULL);
}

static unsigned seed_of(int id)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned)ts.tv_nsec ^ (unsigned)(id * 2654435761u);
}

/* cond */
static int items[64], head, tail, done;
/* sem */
static sem_t pool;
/* rwlock */
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int shared_value;
/* barrier */
static pthread_barrier_t bar;
/* spin */
static pthread_spinlock_t spin;
/* once */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread int me;
/* kinds */
static pthread_mutex_t rec, chk, rob;
static int once_runner = -1;
static void once_routine(void)
{
    once_runner = me;
}

static void *worker(void *p)
{
    int id = (int)(long)p;
    me = id;
    unsigned seed = seed_of(id);
    if (!strcmp(mode, "mutex")) {
        for (int i = 0; i < 10; i++) {
            nap(&seed, 300);
            pthread_mutex_lock(&m);
            put("%c", 'A' + id, 0);
            pthread_mutex_unlock(&m);
        }
    } else if (!strcmp(mode, "cond")) {
        for (;;) {
            pthread_mutex_lock(&m);
            while (head == tail && !done)
                pthread_cond_wait(&cv, &m);
            if (head == tail && done) {
                pthread_mutex_unlock(&m);
                break;
            }
            int item = items[head++ % 64];
            put("%d:%c ", item, 'A' + id);
            pthread_mutex_unlock(&m);
            nap(&seed, 300);
        }
    } else if (!strcmp(mode, "sem")) {
        for (int i = 0; i < 6; i++) {
            sem_wait(&pool);
            pthread_mutex_lock(&m);
            put("%c", 'A' + id, 0);
            pthread_mutex_unlock(&m);
            nap(&seed, 200);
            sem_post(&pool);
            nap(&seed, 100);
        }
    } else if (!strcmp(mode, "rwlock")) {
        for (int i = 0; i < 8; i++) {
            nap(&seed, 300);
            if (id < 2) {
                pthread_rwlock_rdlock(&rw);
                int v = shared_value;
                pthread_rwlock_unlock(&rw);
                pthread_mutex_lock(&m);
                put("%c%d ", 'A' + id, v);
                pthread_mutex_unlock(&m);
            } else {
                pthread_rwlock_wrlock(&rw);
                shared_value = shared_value * 3 + id;
                shared_value %= 1000;
                pthread_rwlock_unlock(&rw);
            }
        }
    } else if (!strcmp(mode, "barrier")) {
        for (int i = 0; i < 5; i++) {
            nap(&seed, 300);
            if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD) {
                pthread_mutex_lock(&m);
                put("%c", 'A' + id, 0);
                pthread_mutex_unlock(&m);
            }
        }
    } else if (!strcmp(mode, "spin")) {
        for (int i = 0; i < 10; i++) {
            nap(&seed, 300);
            pthread_spin_lock(&spin);
            put("%c", 'A' + id, 0);
            pthread_spin_unlock(&spin);
        }
    } else if (!strcmp(mode, "once")) {
        nap(&seed, 300);
        pthread_once(&once, once_routine);
    } else if (!strcmp(mode, "kinds")) {
        for (int i = 0; i < 5; i++) {
            nap(&seed, 300);
            pthread_mutex_lock(&rec);
            pthread_mutex_lock(&rec);
            int dl = pthread_mutex_lock(&chk) == 0 && pthread_mutex_lock(&chk) == EDEADLK;
            int r = pthread_mutex_lock(&rob);
            if (r == EOWNERDEAD)
                pthread_mutex_consistent(&rob);
            put("%c%c", 'A' + id, r == EOWNERDEAD ? '!' : r == 0 && dl ? '.' : '?');
            pthread_mutex_unlock(&rob);
            pthread_mutex_unlock(&chk);
            pthread_mutex_unlock(&rec);
            pthread_mutex_unlock(&rec);
        }
    } else if (!strcmp(mode, "trylock")) {
        int fails = 0;
        for (int got = 0; got < 5;) {
            if (pthread_mutex_trylock(&m) == 0) {
                got++;
                nap(&seed, 50);
                pthread_mutex_unlock(&m);
            } else {
                fails++;
                sched_yield();
            }
            nap(&seed, 50);
        }
        pthread_mutex_lock(&m);
        put("%c%d ", 'A' + id, fails);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

/* kinds: takes the robust mutex at a random time and ends holding it */
static void *dier(void *p)
{
    unsigned seed = seed_of((int)(long)p);
    nap(&seed, 1500);
    pthread_mutex_lock(&rob);
    return NULL;
}

static void kinds_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&rec, &a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&chk, &a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&rob, &a);
    pthread_mutexattr_destroy(&a);
}

static void *signaller(void *p)
{
    (void)p;
    struct timespec ts = { 0, 30 * 1000000 };
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&m);
    done = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    mode = argv[1];
    pthread_t t[N];
    if (!strcmp(mode, "timedwait")) {
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_nsec += 20 * 1000000;
        if (at.tv_nsec >= 1000000000) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&m);
        int r1 = pthread_cond_timedwait(&cv, &m, &at);
        pthread_mutex_unlock(&m);
        pthread_t s;
        pthread_create(&s, NULL, signaller, NULL);
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_sec += 10;
        pthread_mutex_lock(&m);
        int r2 = 0;
        while (!done && r2 == 0)
            r2 = pthread_cond_timedwait(&cv, &m, &at);
        pthread_mutex_unlock(&m);
        pthread_join(s, NULL);
        printf("first %s, second %s\n", r1 == ETIMEDOUT ? "timed out" : "signalled",
               r2 == ETIMEDOUT ? "timed out" : "signalled");
        return 0;
    }
    if (!strcmp(mode, "sleep")) {
        for (int i = 0; i < 5; i++) {
            sleep(1);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            printf("%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
        }
        return 0;
    }
    sem_init(&pool, 0, 2);
    pthread_barrier_init(&bar, NULL, N);
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    int nt = !strcmp(mode, "cond") ? 3 : N;
    pthread_t d;
    if (!strcmp(mode, "kinds")) {
        kinds_init();
        pthread_create(&d, NULL, dier, (void *)(long)N);
    }
    for (long i = 0; i < nt; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    if (!strcmp(mode, "cond")) {
        unsigned seed = seed_of(99);
        for (int i = 0; i < 40; i++) {
            nap(&seed, 150);
            pthread_mutex_lock(&m);
            items[tail++ % 64] = i;
            pthread_cond_signal(&cv);
            pthread_mutex_unlock(&m);
        }
        pthread_mutex_lock(&m);
        done = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&m);
    }
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    if (!strcmp(mode, "kinds"))
        pthread_join(d, NULL);
    if (!strcmp(mode, "once"))
        put("ran by %c", 'A' + once_runner, 0);
    printf("%s\n", out);
    return 0;
}
