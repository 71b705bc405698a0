/* SPDX-License-Identifier: MIT */
/* flaky: a small multi-threaded program that fails about one run in three.
 *
 * Three workers settle "transfers". What each worker does depends on the clock, on random bytes
 * and on the amount read from standard input, and one combination of the three loses a transfer
 * and makes the run fail — the kind of bug that never shows when you look for it.
 *
 * The program knows nothing of tinytrace. Run it under `tinytrace record` until it fails, then
 * `tinytrace replay` the failing file: the clock, the random bytes and the input come back from
 * the recording, so it fails the same way every time (see README.md). Built with
 * -finstrument-functions, so the recording also holds every function's entry and exit.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3

static long input_amount;
static int lost[WORKERS];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t random_u32(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = (uint32_t)rand();
    return v;
}

static long settle(int worker, uint32_t r, uint64_t t)
{
    long amount = input_amount + (long)(r % 100);
    /* the bug: one worker, one clock phase and one random residue drop the transfer */
    if (worker == (int)(t / 1000 % WORKERS) && r % 3 == (uint32_t)(input_amount % 3))
        amount = 0;
    return amount;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint32_t r = random_u32();
    uint64_t t = now_ns();
    lost[id] = settle(id, r, t) == 0;
    return NULL;
}

int main(void)
{
    char line[64] = { 0 };
    ssize_t n = read(0, line, sizeof line - 1);
    input_amount = n > 0 ? strtol(line, NULL, 10) : 0;

    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);

    for (int i = 0; i < WORKERS; i++) {
        if (lost[i]) {
            printf("FAIL: worker %d lost a transfer of amount %ld\n", i, input_amount);
            return 1;
        }
    }
    printf("ok: every transfer settled\n");
    return 0;
}
