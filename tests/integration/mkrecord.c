/* SPDX-License-Identifier: MIT */
/* mkrecord [--fail-after BYTES] FILE [ITERATIONS] — records a small two-thread trace for the
 * tool's integration test.
 *
 * Thread 0 ("main") records, per iteration, enter, safepoint, alloc, io in, io out, user, free and
 * exit; thread 1 ("worker ...", a name the tool must escape: quotes, a tab, a backslash, UTF-8
 * and one invalid byte) records enter, user, safepoint and exit, concurrently, so the two threads
 * interleave in time. Every event carries its own value (sizes, tags, payload bytes and
 * addresses differ from one iteration to the next): a reader that hands back the wrong record
 * cannot pass the test by luck. Once, main records a user payload larger than a thread buffer.
 *
 * The buffers are small (4 KiB) so the file has many chunks of both threads.
 *
 * On stdout, one JSON object per event the program asked for, in each thread's program order
 * ({"thread", "kind", and the fields that kind carries}); the test compares them with `tinytrace
 * dump --json`. The library's own structural events (session and thread start/end) are not
 * listed. Exit status 0 on success, 1 on any failure (with a message on stderr).
 *
 * --fail-after BYTES records through a callback sink that writes FILE itself and fails every
 * write past BYTES with ENOSPC (the manifest at offset 0 always succeeds): a recording stopped by
 * a write error, whose file the manifest must mark incomplete. Then nothing is printed, calls
 * refused with TT_E_STOPPED are expected, and the exit status is 0 when tt_session_close
 * reported the write error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tinytrace/tinytrace.h>

#define PREVIEW 16
#define BIG_PAYLOAD 1200000 /* more than 1 MiB: `--max-memory 1` cannot read the trace */
#define MAX_LINES 16384

static tt_session *session;
static unsigned iterations = 500;

/* --fail-after: the file the callback sink writes, and where its disk is "full" */
static int fail_fd = -1;
static uint64_t fail_after;

static uint32_t fn_main, fn_compute, fn_step;
static uint32_t site_loop, site_alloc, site_step;

/* Expected events of one thread, formatted when recorded, printed after the join so the two
 * threads' lines do not mix. */
struct expect {
    char *lines[MAX_LINES];
    unsigned n;
};
static struct expect expect_main, expect_worker;

static void die(const char *what, int rc, const tt_error_info *err)
{
    fprintf(stderr, "mkrecord: %s: %s (%s)%s%s\n", what, tt_strerror(rc), tt_error_name(rc),
            err && err->message[0] ? ": " : "", err ? err->message : "");
    exit(1);
}

static void check(const char *what, int rc)
{
    if (rc != TT_OK && !(fail_fd >= 0 && rc == TT_E_STOPPED))
        die(what, rc, NULL);
}

/* The callback sink of --fail-after (called from the swapper thread). */
static int full_disk_write(void *ctx, uint64_t offset, const void *data, size_t len)
{
    const unsigned char *p = data;
    (void)ctx;
    if (offset != 0 && offset + len > fail_after)
        return ENOSPC;
    while (len > 0) {
        ssize_t k = pwrite(fail_fd, p, len, (off_t)offset);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        p += k;
        offset += (uint64_t)k;
        len -= (size_t)k;
    }
    return 0;
}

static void hex(char *dst, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t n = len < PREVIEW ? len : PREVIEW;
    for (size_t i = 0; i < n; i++)
        sprintf(dst + 2 * i, "%02x", p[i]);
    dst[2 * n] = '\0';
}

/* Names of three lengths, for the three ways a text dump copies a name into its line: up to 32
 * bytes in one fixed-size copy, longer in a copy of its length, and longer than the line's room
 * (1024 bytes) field by field through stdio. */
static const char site_alloc_name[] = "site.alloc.a.name.longer.than.32.bytes";
static char site_step_name[1300]; /* "site.step.10.13.16...", 1200 bytes and more */

/* Function names of 820 to 880 bytes, each recorded once in a safepoint at the 1200-byte site:
 * a dump line of one of them fills its room (1024 bytes, of which the fields around the names
 * take up to 160) to the last byte or so with the function name, so the site name must take
 * the slow path. Which length does depends on the widths of the numbers before it. */
#define BAND 61
static uint32_t band_ids[BAND];
static char band_names[BAND][900];

static const char *name_of(uint32_t id)
{
    for (int i = 0; i < BAND; i++)
        if (band_ids[i] == id && id != 0)
            return band_names[i];
    if (id == fn_main)
        return "main_loop";
    if (id == fn_compute)
        return "compute";
    if (id == fn_step)
        return "worker_step";
    if (id == site_loop)
        return "site.loop";
    if (id == site_alloc)
        return site_alloc_name;
    if (id == site_step)
        return site_step_name;
    return NULL;
}

/* Appends one expected event. Only the fields that event.h documents for @kind are given; the
 * others are -1 / NULL and left out of the line. */
static void expect_event(struct expect *e, unsigned thread, const char *kind, uint32_t function,
                   uint32_t site, int64_t arg, const void *addr, const char *dir,
                   const void *payload, int64_t len)
{
    char buf[4096], pv[2 * PREVIEW + 1];
    int n = snprintf(buf, sizeof buf, "{\"thread\":%u,\"kind\":\"%s\"", thread, kind);
    if (function != 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n,
                      ",\"function\":\"%s\",\"function_id\":%" PRIu32, name_of(function),
                      function);
    if (site != 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"site\":\"%s\",\"site_id\":%" PRIu32,
                      name_of(site), site);
    if (arg >= 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"arg\":%" PRId64, arg);
    if (addr != NULL)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"addr\":\"0x%" PRIxPTR "\"",
                      (uintptr_t)addr);
    if (dir != NULL)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"dir\":\"%s\"", dir);
    if (len >= 0) {
        hex(pv, payload, (size_t)len);
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"len\":%" PRId64 ",\"payload\":\"%s\"",
                      len, pv);
    }
    snprintf(buf + n, sizeof buf - (size_t)n, "}");
    if (e->n == MAX_LINES) {
        fprintf(stderr, "mkrecord: too many events for the expectation list\n");
        exit(1);
    }
    e->lines[e->n] = strdup(buf);
    if (e->lines[e->n] == NULL) {
        fprintf(stderr, "mkrecord: out of memory\n");
        exit(1);
    }
    e->n++;
}

static pthread_barrier_t start;

static void *worker(void *arg)
{
    struct expect *e = &expect_worker;
    (void)arg;

    /* a name that needs escaping: quotes, a tab, a backslash, UTF-8 and an invalid byte */
    check("tt_thread_name(worker)", tt_thread_name(session, "worker \"q\"\t\\\xc3\xa9\xff"));
    pthread_barrier_wait(&start);
    for (unsigned j = 0; j < iterations; j++) {
        unsigned char data[8];
        uint64_t v = (uint64_t)(j + 1) * 0x9e3779b97f4a7c15u;
        memcpy(data, &v, sizeof data);

        check("enter", TT_ENTER(session, fn_step));
        expect_event(e, 1, "enter", fn_step, 0, -1, NULL, NULL, NULL, -1);
        check("user", TT_USER(session, 5000 + j, data, sizeof data));
        expect_event(e, 1, "user", 0, 0, 5000 + j, NULL, NULL, data, sizeof data);
        check("safepoint", TT_SAFEPOINT(session, fn_step, site_step));
        expect_event(e, 1, "safepoint", fn_step, site_step, -1, NULL, NULL, NULL, -1);
        check("exit", TT_EXIT(session, fn_step));
        expect_event(e, 1, "exit", fn_step, 0, -1, NULL, NULL, NULL, -1);
    }
    check("tt_session_thread_end", tt_session_thread_end(session));
    return NULL;
}

static void record_main(void)
{
    struct expect *e = &expect_main;
    for (unsigned i = 0; i < iterations; i++) {
        char in[32], out[32];
        unsigned char user[24];
        size_t in_len = (size_t)snprintf(in, sizeof in, "in:%u", i * 7);
        size_t out_len = (size_t)snprintf(out, sizeof out, "out:%u", i * 11);
        size_t user_len = 4 + i % 13, got = 0;
        uint64_t size = 16 + i;
        void *p = malloc(size);
        if (p == NULL)
            exit(1);
        for (size_t k = 0; k < user_len; k++)
            user[k] = (unsigned char)(i * 31 + k * 7);

        check("enter", TT_ENTER(session, fn_compute));
        expect_event(e, 0, "enter", fn_compute, 0, -1, NULL, NULL, NULL, -1);
        check("safepoint", TT_SAFEPOINT(session, fn_compute, site_loop));
        expect_event(e, 0, "safepoint", fn_compute, site_loop, -1, NULL, NULL, NULL, -1);
        check("alloc", TT_ALLOC(session, site_alloc, size, p));
        expect_event(e, 0, "alloc", 0, site_alloc, (int64_t)size, p, NULL, NULL, -1);
        check("io in", TT_IO(session, TT_IO_IN, 3, in, in_len, &got));
        expect_event(e, 0, "io", 0, 0, 3, NULL, "in", in, (int64_t)in_len);
        check("io out", TT_IO(session, TT_IO_OUT, 4, out, out_len, NULL));
        expect_event(e, 0, "io", 0, 0, 4, NULL, "out", out, (int64_t)out_len);
        check("user", TT_USER(session, 100 + i, user, user_len));
        expect_event(e, 0, "user", 0, 0, 100 + i, NULL, NULL, user, (int64_t)user_len);
        if (i == iterations / 2) {
            /* larger than a thread buffer: the writer has to split it */
            unsigned char *big = malloc(BIG_PAYLOAD);
            if (big == NULL)
                exit(1);
            for (size_t k = 0; k < BIG_PAYLOAD; k++)
                big[k] = (unsigned char)(k * 13 + 5 + k / 251);
            check("big user", TT_USER(session, 9999, big, BIG_PAYLOAD));
            expect_event(e, 0, "user", 0, 0, 9999, NULL, NULL, big, BIG_PAYLOAD);
            free(big);
        }
        check("free", TT_FREE(session, site_alloc, p));
        expect_event(e, 0, "free", 0, site_alloc, -1, p, NULL, NULL, -1);
        free(p);
        check("exit", TT_EXIT(session, fn_compute));
        expect_event(e, 0, "exit", fn_compute, 0, -1, NULL, NULL, NULL, -1);
    }
}

int main(int argc, char **argv)
{
    tt_config cfg;
    tt_error_info err;
    pthread_t th;
    int rc;

    if (argc >= 3 && strcmp(argv[1], "--fail-after") == 0) {
        fail_after = strtoull(argv[2], NULL, 10);
        if (fail_after < TT_MANIFEST_SIZE) {
            fprintf(stderr, "mkrecord: --fail-after needs at least %u bytes\n", TT_MANIFEST_SIZE);
            return 2;
        }
        argv += 2; /* argv[0] stands in for the program name from here on */
        argc -= 2;
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: mkrecord [--fail-after BYTES] FILE [ITERATIONS]\n");
        return 2;
    }
    if (argc == 3) {
        iterations = (unsigned)strtoul(argv[2], NULL, 10);
        if (iterations == 0 || iterations > 1500) {
            fprintf(stderr, "mkrecord: ITERATIONS must be 1..1500\n");
            return 2;
        }
    }

    tt_config_init(&cfg);
    memset(&err, 0, sizeof err);
    if ((rc = tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err)) != TT_OK ||
        (rc = tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, 4096, &err)) != TT_OK ||
        (rc = tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, 64 * 1024, &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_FILE, argv[1], &err)) != TT_OK ||
        (rc = tt_config_set_str(&cfg, TT_PARAM_CALLER, "mkrecord integration test", &err)) != TT_OK)
        die("config", rc, &err);
    if (fail_after != 0) {
        fail_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fail_fd < 0) {
            fprintf(stderr, "mkrecord: %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
        tt_config_set_callback_sink(&cfg, full_disk_write, NULL);
    }
    if ((rc = tt_session_open(&cfg, &session, &err)) != TT_OK)
        die("tt_session_open", rc, &err);

    /* Main names itself and records before the worker exists: it is thread 0. */
    check("tt_thread_name(main)", tt_thread_name(session, "main"));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "main_loop", &fn_main));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "compute", &fn_compute));
    check("intern", tt_intern(session, TT_OBJ_FUNCTION, "worker_step", &fn_step));
    check("intern", tt_intern(session, TT_OBJ_SITE, "site.loop", &site_loop));
    check("intern", tt_intern(session, TT_OBJ_SITE, site_alloc_name, &site_alloc));
    int len = snprintf(site_step_name, sizeof site_step_name, "site.step.");
    while (len < 1200)
        len += snprintf(site_step_name + len, sizeof site_step_name - (size_t)len, "%d.", len);
    check("intern", tt_intern(session, TT_OBJ_SITE, site_step_name, &site_step));
    check("enter main_loop", TT_ENTER(session, fn_main));
    expect_event(&expect_main, 0, "enter", fn_main, 0, -1, NULL, NULL, NULL, -1);

    if (pthread_barrier_init(&start, NULL, 2) != 0 ||
        pthread_create(&th, NULL, worker, NULL) != 0) {
        fprintf(stderr, "mkrecord: cannot start the worker thread\n");
        return 1;
    }
    pthread_barrier_wait(&start);
    record_main();
    pthread_join(th, NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < BAND; i++) {
        size_t nlen = 820 + (size_t)i;
        memset(band_names[i], 'a' + i % 26, nlen);
        snprintf(band_names[i], 16, "band%d_", i); /* distinct names; the NUL is overwritten */
        band_names[i][strlen(band_names[i])] = 'x';
        band_names[i][nlen] = '\0';
        check("intern", tt_intern(session, TT_OBJ_FUNCTION, band_names[i], &band_ids[i]));
        check("safepoint", TT_SAFEPOINT(session, band_ids[i], site_step));
        expect_event(&expect_main, 0, "safepoint", band_ids[i], site_step, -1, NULL, NULL, NULL,
                     -1);
    }

    check("exit main_loop", TT_EXIT(session, fn_main));
    expect_event(&expect_main, 0, "exit", fn_main, 0, -1, NULL, NULL, NULL, -1);
    rc = tt_session_close(session, &err);
    if (fail_fd >= 0) {
        close(fail_fd);
        if (rc == TT_OK) {
            fprintf(stderr, "mkrecord: tt_session_close did not report the write error\n");
            return 1;
        }
        return 0;
    }
    if (rc != TT_OK)
        die("tt_session_close", rc, &err);

    for (unsigned i = 0; i < expect_main.n; i++) {
        puts(expect_main.lines[i]);
        free(expect_main.lines[i]);
    }
    for (unsigned i = 0; i < expect_worker.n; i++) {
        puts(expect_worker.lines[i]);
        free(expect_worker.lines[i]);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
