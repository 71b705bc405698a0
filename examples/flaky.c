/* flaky: a small multi-threaded program that fails about one run in three.
 *
 * Three workers settle "transfers" between accounts. What each worker does depends on the clock,
 * on random bytes and on the input line, and one combination of the three loses a transfer and
 * makes the run fail. That makes it the kind of bug that never shows when you look for it.
 *
 * Every input crosses tinytrace as an io event: in record mode the real value is stored, in replay
 * mode the recorded value is handed back. So a failing run, once recorded, fails the same way on
 * every replay. Configure with TINYTRACE_MODE=record|replay and TINYTRACE_FILE=path.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

enum { CH_CLOCK = 1, CH_RANDOM = 2, CH_STDIN = 3, CH_STDOUT = 4 };
#define WORKERS 3

static tt_session *S;
static uint32_t fn_settle, fn_worker;
static long input_amount;
static _Atomic long lost;

/* The real value is read first; in replay tt_io replaces it with the recorded one. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tt_io(S, TT_IO_IN, CH_CLOCK, &ts, sizeof ts, NULL);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t random_u32(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, 0) != sizeof v)
        v = (uint32_t)rand();
    tt_io(S, TT_IO_IN, CH_RANDOM, &v, sizeof v, NULL);
    return v;
}

static void say(const char *line)
{
    /* output is compared on replay */
    tt_io(S, TT_IO_OUT, CH_STDOUT, (void *)line, strlen(line), NULL);
    fputs(line, stdout);
}

static long settle(int worker, uint32_t r, uint64_t t)
{
    tt_enter(S, fn_settle);
    long amount = input_amount + (long)(r % 100);
    /* the bug: one worker, one clock phase and one random residue drop the transfer */
    if (worker == (int)(t / 1000 % WORKERS) && r % 3 == (uint32_t)(input_amount % 3))
        amount = 0;
    tt_exit(S, fn_settle);
    return amount;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "worker-%d", id);
    tt_thread_name(S, name); /* replay matches threads by name, whatever order they start in */
    tt_enter(S, fn_worker);
    uint32_t r = random_u32();
    uint64_t t = now_ns();
    long got = settle(id, r, t);
    if (got == 0)
        lost++;
    tt_exit(S, fn_worker);
    tt_session_thread_end(S);
    return NULL;
}

int main(void)
{
    tt_config cfg;
    tt_error_info err;
    tt_config_init(&cfg);
    if (tt_config_from_env(&cfg, &err) != TT_OK || tt_session_open(&cfg, &S, &err) != TT_OK) {
        fprintf(stderr, "flaky: %s\n", err.message);
        return 2;
    }
    tt_intern(S, TT_OBJ_FUNCTION, "settle", &fn_settle);
    tt_intern(S, TT_OBJ_FUNCTION, "worker", &fn_worker);

    char line[64] = "0";
    if (!fgets(line, sizeof line, stdin))
        strcpy(line, "0\n");
    tt_io(S, TT_IO_IN, CH_STDIN, line, sizeof line, NULL);
    input_amount = strtol(line, NULL, 10);

    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);

    int failed = lost != 0;
    say(failed ? "FAIL: a transfer was lost\n" : "ok: every transfer settled\n");
    int rc = tt_session_close(S, &err);
    if (rc != TT_OK) {
        fprintf(stderr, "flaky: %s\n", err.message);
        if (rc == TT_E_DIVERGED || rc == TT_E_UNCONSUMED)
            return 3;
    }
    return failed;
}
