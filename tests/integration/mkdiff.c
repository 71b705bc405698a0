/* SPDX-License-Identifier: MIT */
/* mkdiff FILE THREADS ITERATIONS [OPTIONS] — records a multi-threaded trace for `tinytrace diff`.
 *
 * The main thread ("main") enters main_run, starts THREADS workers "worker-0" … "worker-N-1" and
 * waits for them. Worker t records ITERATIONS iterations; iteration i is
 *     enter iter > enter alpha|beta|gamma (by i % 3) > enter rec × (i % 4)
 *       user (tag t * 1000000 + i, 8 bytes of a hash of (t, i))
 *       io out (channel 10 + t, the text "w<t> i<i>")
 *       alloc (size 16 + (7t + i) % 500) and its free
 *       safepoint (the alpha|beta|gamma function, site "site.sp")
 *     the exits, innermost first
 * so every event carries its own value. 9 + 2 * (i % 4) events per iteration: four workers of
 * 21000 iterations record 1 008 000 of them.
 *
 * The workers record their first event in turn, worker 0 first (thread 1), unless --reverse
 * makes the last one first: then the same names get other thread ids, which diff has to see
 * through. With --no-names the workers stay unnamed, and diff can only pair them by order.
 *
 * Options that make a recording differ from the plain one, at worker T's iteration K:
 *   --inject-payload T:K   the user event's payload has byte 5 flipped
 *   --inject-call T:K      a call of "injected_call" (enter, exit) comes before the user event
 *   --end-thread T:K       the worker stops before iteration K (its thread ends early)
 * and one that changes the shape: --deep N nests N more rec calls in every iteration i with
 * i % 5 == 4 (call paths deeper than a tool prints whole).
 * For each injection the program prints one JSON line on stdout: {"thread": "worker-T",
 * "iteration": K, "seq": the sequence number of the first differing event in that thread,
 * counted from the events the program recorded (thread-start is seq 0), "path": the names of the
 * functions open at that point, outermost first}.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinytrace/tinytrace.h>

#define MAX_THREADS 64
#define MAX_DEPTH 16

static tt_session *session;
static unsigned nthreads, iterations;
static int reverse, no_names;
static unsigned deep;
static long inject_payload_t = -1, inject_call_t = -1, end_t = -1;
static unsigned long inject_payload_k, inject_call_k, end_k;

static uint32_t fn_main, fn_iter, fn_kind[3], fn_rec, fn_injected, site_sp, site_mem;
static const char *const kind_names[3] = {"alpha", "beta", "gamma"};

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;
static unsigned turn;

static void check(const char *what, int rc)
{
    if (rc != TT_OK) {
        fprintf(stderr, "mkdiff: %s: %s (%s)\n", what, tt_strerror(rc), tt_error_name(rc));
        exit(1);
    }
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdu;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53u;
    return x ^ (x >> 33);
}

struct worker {
    unsigned t;
    uint64_t seq;                 /* the thread's events so far (thread-start is seq 0) */
    const char *path[MAX_DEPTH];
    unsigned depth;
};

static void enter(struct worker *w, uint32_t fn, const char *name)
{
    check("enter", tt_enter(session, fn));
    w->seq++;
    if (w->depth < MAX_DEPTH)
        w->path[w->depth] = name;
    w->depth++;
}

static void leave(struct worker *w, uint32_t fn)
{
    check("exit", tt_exit(session, fn));
    w->seq++;
    w->depth--;
}

static void report(const struct worker *w, unsigned long k)
{
    flockfile(stdout);
    printf("{\"thread\": \"worker-%u\", \"iteration\": %lu, \"seq\": %" PRIu64 ", \"path\": [",
           w->t, k, w->seq);
    for (unsigned i = 0; i < w->depth && i < MAX_DEPTH; i++)
        printf("%s\"%s\"", i ? ", " : "", w->path[i]);
    printf("]}\n");
    fflush(stdout);
    funlockfile(stdout);
}

static void *worker(void *arg)
{
    struct worker w = {.t = (unsigned)(uintptr_t)arg, .seq = 1};
    unsigned rank = reverse ? nthreads - 1 - w.t : w.t;
    char name[32];

    snprintf(name, sizeof name, "worker-%u", w.t);
    /* wait for this worker's turn to record its first event: the thread ids follow the turns */
    pthread_mutex_lock(&turn_lock);
    while (turn != rank)
        pthread_cond_wait(&turn_cond, &turn_lock);
    if (!no_names)
        check("tt_thread_name", tt_thread_name(session, name));
    enter(&w, fn_iter, "iter"); /* the first event: the thread gets its id here */
    leave(&w, fn_iter);
    turn++;
    pthread_cond_broadcast(&turn_cond);
    pthread_mutex_unlock(&turn_lock);

    for (unsigned long i = 0; i < iterations; i++) {
        unsigned d = (unsigned)(i % 4) + (i % 5 == 4 ? deep : 0), kind = (unsigned)(i % 3);
        uint64_t h = mix((uint64_t)w.t << 32 | i);
        unsigned char payload[8];
        char text[48];
        size_t size = 16 + (7 * w.t + i) % 500;
        void *p;

        if ((long)w.t == end_t && i == end_k) {
            report(&w, i);
            break;
        }
        enter(&w, fn_iter, "iter");
        enter(&w, fn_kind[kind], kind_names[kind]);
        for (unsigned r = 0; r < d; r++)
            enter(&w, fn_rec, "rec");
        if ((long)w.t == inject_call_t && i == inject_call_k) {
            report(&w, i);
            enter(&w, fn_injected, "injected_call");
            leave(&w, fn_injected);
        }
        memcpy(payload, &h, sizeof payload);
        if ((long)w.t == inject_payload_t && i == inject_payload_k) {
            report(&w, i);
            payload[5] ^= 0xff;
        }
        check("user", tt_user(session, (uint32_t)(w.t * 1000000u + i), payload, sizeof payload));
        w.seq++;
        snprintf(text, sizeof text, "w%u i%lu", w.t, i);
        check("io", tt_io(session, TT_IO_OUT, 10 + w.t, text, strlen(text), NULL));
        w.seq++;
        p = malloc(size);
        if (p == NULL)
            exit(1);
        check("alloc", tt_alloc(session, site_mem, size, p));
        check("free", tt_free(session, site_mem, p));
        free(p);
        check("safepoint", tt_safepoint(session, fn_kind[kind], site_sp));
        w.seq += 3;
        for (unsigned r = 0; r < d; r++)
            leave(&w, fn_rec);
        leave(&w, fn_kind[kind]);
        leave(&w, fn_iter);
    }
    check("tt_session_thread_end", tt_session_thread_end(session));
    return NULL;
}

static void parse_tk(const char *s, long *t, unsigned long *k)
{
    unsigned long a, b;
    char c;
    if (sscanf(s, "%lu:%lu%c", &a, &b, &c) != 2) {
        fprintf(stderr, "mkdiff: expected T:K, got '%s'\n", s);
        exit(2);
    }
    *t = (long)a;
    *k = b;
}

int main(int argc, char **argv)
{
    pthread_t th[MAX_THREADS];
    tt_config cfg;
    tt_error_info err;
    int rc;

    if (argc < 4) {
        fprintf(stderr, "usage: mkdiff FILE THREADS ITERATIONS [--reverse] [--no-names]"
                        " [--inject-payload T:K]"
                        " [--inject-call T:K] [--end-thread T:K]\n");
        return 2;
    }
    nthreads = (unsigned)strtoul(argv[2], NULL, 10);
    iterations = (unsigned)strtoul(argv[3], NULL, 10);
    if (nthreads == 0 || nthreads > MAX_THREADS || iterations == 0) {
        fprintf(stderr, "mkdiff: THREADS must be 1..%d, ITERATIONS at least 1\n", MAX_THREADS);
        return 2;
    }
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--reverse") == 0)
            reverse = 1;
        else if (strcmp(argv[i], "--no-names") == 0)
            no_names = 1;
        else if (strcmp(argv[i], "--inject-payload") == 0 && i + 1 < argc)
            parse_tk(argv[++i], &inject_payload_t, &inject_payload_k);
        else if (strcmp(argv[i], "--inject-call") == 0 && i + 1 < argc)
            parse_tk(argv[++i], &inject_call_t, &inject_call_k);
        else if (strcmp(argv[i], "--end-thread") == 0 && i + 1 < argc)
            parse_tk(argv[++i], &end_t, &end_k);
        else if (strcmp(argv[i], "--deep") == 0 && i + 1 < argc)
            deep = (unsigned)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "mkdiff: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }

    tt_config_init(&cfg);
    memset(&err, 0, sizeof err);
    if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, argv[1], &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_CALLER, "mkdiff", &err)) != TT_OK) {
        fprintf(stderr, "mkdiff: config: %s\n", err.message);
        return 1;
    }
    if ((rc = tt_session_open(&cfg, &session, &err)) != TT_OK) {
        fprintf(stderr, "mkdiff: tt_session_open: %s\n", err.message);
        return 1;
    }
    check("name", tt_thread_name(session, "main"));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "main_run", &fn_main));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "iter", &fn_iter));
    for (int k = 0; k < 3; k++)
        check("intern", tt_intern(session, TT_OBJ_FUNCTION, kind_names[k], &fn_kind[k]));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "rec", &fn_rec));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "injected_call", &fn_injected));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.sp", &site_sp));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.mem", &site_mem));
    check("enter", tt_enter(session, fn_main));
    for (unsigned t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
            fprintf(stderr, "mkdiff: cannot start thread %u\n", t);
            return 1;
        }
    for (unsigned t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    check("exit", tt_exit(session, fn_main));
    if ((rc = tt_session_close(session, &err)) != TT_OK) {
        fprintf(stderr, "mkdiff: tt_session_close: %s\n", err.message);
        return 1;
    }
    return 0;
}
