/* SPDX-License-Identifier: MIT */
/* bench-record — what recording, replaying and off mode cost on a tight loop of calls.
 *
 * The workload is the reference one of docs/PERFORMANCE.md: a loop that calls a non-inlined leaf
 * function N times. Every variant runs the same loop in the same process:
 *
 *   baseline  the leaf without tracing
 *   record    tt_enter/tt_exit around the leaf body, in a record session writing a real file
 *   replay    the same calls in a replay session of that file (every call must be TT_OK)
 *   off       the same calls in a session opened in TT_MODE_OFF
 *
 * and the variants alternate (base, record, replay, off, verify; base, record, …) for several
 * rounds. Figures are medians over the rounds of per-round differences against that round's
 * baseline, divided by the 2N enter/exit events (= 2N tt_* calls). Wall time is
 * CLOCK_MONOTONIC; CPU time is CLOCK_PROCESS_CPUTIME_ID, so it includes the swapper thread, and
 * CLOCK_THREAD_CPUTIME_ID splits the recording thread's share from the swapper's. On a machine
 * with no free core for the swapper, record wall time grows towards the sum of the two.
 *
 * It also prints what one clock read costs on this machine (the library's: rdtsc on x86), the
 * floor of every recorded event: 17-21 ns on an Intel VM, while on an AMD one the whole ideal
 * recorder (a read and a store) cost 8.3 ns beyond the instrumentation call. It moves every
 * "record" figure (docs/PERFORMANCE.md, "Two machines").
 *
 * Targets are printed with PASS/MISS but never change the exit status: this is a benchmark.
 * The exit status is non-zero only when something failed: a call returned an error, replay
 * diverged or did not close cleanly, verify refused the file, or the manifest's event count is
 * not 2N + 3 (session start, thread start, session end).
 *
 * Usage: bench-record [--events N] [--rounds R] [--dir DIR] [--buffer-kb K] [--memory-mb M]
 *                     [--json]
 */
#include <tinytrace/tinytrace.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#ifndef TT_BENCH_BUILDTYPE
#define TT_BENCH_BUILDTYPE "unknown"
#endif
#ifndef TT_BENCH_OPTIMIZATION
#define TT_BENCH_OPTIMIZATION "?"
#endif

/* Keep the leaf and the loops exactly as written: not inlined, not cloned or specialized, no
 * argument dropped. GCC has noipa for all of that; clang has no cloning, and external linkage
 * (with prototypes below) keeps it from dropping arguments. */
#if defined(__GNUC__) && !defined(__clang__)
#define BENCH_NOINLINE __attribute__((noipa))
#else
#define BENCH_NOINLINE __attribute__((noinline))
#endif
#define BENCH_COLD __attribute__((noinline, cold))
/* A compiler barrier that also pins @v: the leaf's work on it happens after this point. */
#define BARRIER_ON(v) __asm__ __volatile__("" : "+r"(v) : : "memory")
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define TARGET_RECORD_NS 25.0
#define TARGET_BYTES 4.0
#define TARGET_REPLAY_NS 30.0
#define TARGET_OFF_NS 1.0
#define STRUCTURAL_EVENTS 3u /* session start, thread start, session end */
#define MAX_ROUNDS 1000u

/* ---- the workload ---- */

uint64_t bench_leaf_base(tt_session *s, uint32_t fn, uint64_t i);
uint64_t bench_leaf_traced(tt_session *s, uint32_t fn, uint64_t i);
uint64_t bench_loop_base(tt_session *s, uint32_t fn, uint64_t calls);
uint64_t bench_loop_traced(tt_session *s, uint32_t fn, uint64_t calls);

/* First failing call of a traced loop. Written only on failure (cold path). */
static struct {
    uint64_t count;
    uint64_t first_call;
    int first_rc;
    int first_is_exit;
} g_fail;

static BENCH_COLD void note_fail(uint64_t i, int rc, int is_exit)
{
    if (g_fail.count++ == 0) {
        g_fail.first_call = i;
        g_fail.first_rc = rc;
        g_fail.first_is_exit = is_exit;
    }
}

static inline uint64_t mix(uint64_t i)
{
    return (i * 0x9E3779B97F4A7C15ull) ^ (i >> 29);
}

/* The same signature for both leaves, so the only difference is the tracing. */
BENCH_NOINLINE uint64_t bench_leaf_base(tt_session *s, uint32_t fn, uint64_t i)
{
    (void)s;
    (void)fn;
    BARRIER_ON(i);
    return mix(i);
}

BENCH_NOINLINE uint64_t bench_leaf_traced(tt_session *s, uint32_t fn, uint64_t i)
{
    int rc = tt_enter(s, fn);
    if (UNLIKELY(rc != TT_OK))
        note_fail(i, rc, 0);
    BARRIER_ON(i);
    uint64_t v = mix(i);
    BARRIER_ON(v);
    rc = tt_exit(s, fn);
    if (UNLIKELY(rc != TT_OK))
        note_fail(i, rc, 1);
    return v;
}

BENCH_NOINLINE uint64_t bench_loop_base(tt_session *s, uint32_t fn, uint64_t calls)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < calls; i++)
        acc += bench_leaf_base(s, fn, i);
    return acc;
}

BENCH_NOINLINE uint64_t bench_loop_traced(tt_session *s, uint32_t fn, uint64_t calls)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < calls; i++)
        acc += bench_leaf_traced(s, fn, i);
    return acc;
}

/* ---- time ---- */

typedef struct tstamp {
    uint64_t wall, cpu, thread;
} tstamp;

typedef struct sample {
    double wall, cpu, thread; /* ns: monotonic, process CPU, calling thread's CPU */
} sample;

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) {
        perror("bench-record: clock_gettime");
        exit(1);
    }
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What one clock read costs here, the library's own (tt_ticks in libtrace/base/base.h: rdtsc on
 * x86, CLOCK_MONOTONIC elsewhere): every recorded event takes one, so it is the floor of
 * "record" on this machine. The fastest of 5 runs of 10^7 reads, in ns per read. */
#if defined(__x86_64__) || defined(__i386__)
#define CLOCK_NAME "rdtsc"
#else
#define CLOCK_NAME "clock_gettime(CLOCK_MONOTONIC)"
#endif

static double clock_read_ns(void)
{
    double best = 0;
    for (int r = 0; r < 5; r++) {
        uint64_t sum = 0, t0 = clock_ns(CLOCK_MONOTONIC);
        for (int i = 0; i < 10000000; i++) {
#if defined(__x86_64__) || defined(__i386__)
            sum += __builtin_ia32_rdtsc();
#else
            sum += clock_ns(CLOCK_MONOTONIC);
#endif
        }
        double ns = (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e7;
        volatile uint64_t sink = sum; /* the reads must happen */
        (void)sink;
        if (r == 0 || ns < best)
            best = ns;
    }
    return best;
}

static tstamp now(void)
{
    tstamp t;
    t.wall = clock_ns(CLOCK_MONOTONIC);
    t.cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    t.thread = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    return t;
}

static sample since(tstamp a)
{
    tstamp b = now();
    sample r = {(double)(b.wall - a.wall), (double)(b.cpu - a.cpu), (double)(b.thread - a.thread)};
    return r;
}

static sample sum2(sample a, sample b)
{
    sample r = {a.wall + b.wall, a.cpu + b.cpu, a.thread + b.thread};
    return r;
}

/* ---- options, temp dir, failures ---- */

typedef struct opts {
    uint64_t events;
    unsigned rounds;
    const char *dir;
    uint64_t buffer_kb; /* 0 = library default */
    uint64_t memory_mb; /* 0 = library default */
    int json;
} opts;

static char g_tmpdir[PATH_MAX];

static void cleanup_tmpdir(void)
{
    if (g_tmpdir[0] == '\0')
        return;
    DIR *d = opendir(g_tmpdir);
    if (d != NULL) {
        struct dirent *e;
        char p[PATH_MAX + 256];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", g_tmpdir, e->d_name);
            if (unlink(p) != 0)
                fprintf(stderr, "bench-record: cannot remove %s: %s\n", p, strerror(errno));
        }
        closedir(d);
    }
    if (rmdir(g_tmpdir) != 0)
        fprintf(stderr, "bench-record: cannot remove %s: %s\n", g_tmpdir, strerror(errno));
    g_tmpdir[0] = '\0';
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench-record [--events N] [--rounds R] [--dir DIR] [--buffer-kb K]\n"
            "                    [--memory-mb M] [--json]\n"
            "  --events N      enter/exit events per variant (N/2 calls; default 20000000)\n"
            "  --rounds R      rounds of base/record/replay/off, medians reported (default 5)\n"
            "  --dir DIR       where the temporary directory is made (default $TMPDIR or /tmp)\n"
            "  --buffer-kb K   record: one thread buffer in KiB (default: library default)\n"
            "  --memory-mb M   record: memory budget in MiB (default: library default)\n"
            "  --json          print the results as one JSON object instead of a table\n"
            "Exit status: 0 unless something failed (an error, a divergence, a refused file,\n"
            "lost events); missing a performance target is reported, not failed.\n");
}

static BENCH_COLD void fail_tt(const char *what, int rc, const tt_error_info *err)
{
    fprintf(stderr, "bench-record: %s: %s (%s)", what, tt_strerror(rc), tt_error_name(rc));
    if (err != NULL && err->message[0] != '\0')
        fprintf(stderr, ": %s", err->message);
    if (err != NULL && err->sys_errno != 0)
        fprintf(stderr, " [errno %d: %s]", err->sys_errno, strerror(err->sys_errno));
    fputc('\n', stderr);
    exit(1);
}

#define CHECK_TT(what, call)                                                                       \
    do {                                                                                           \
        tt_error_info err_;                                                                        \
        memset(&err_, 0, sizeof err_);                                                             \
        int rc_ = (call);                                                                          \
        if (rc_ != TT_OK)                                                                          \
            fail_tt((what), rc_, &err_);                                                           \
    } while (0)
/* CHECK_TT's call refers to the error info as err_. */

static uint64_t parse_u64(const char *opt, const char *v, uint64_t min, uint64_t max)
{
    char *end = NULL;
    errno = 0;
    if (v == NULL || *v == '\0' || *v == '-') {
        fprintf(stderr, "bench-record: %s needs a number\n", opt);
        exit(2);
    }
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < min || x > max) {
        fprintf(stderr, "bench-record: %s: '%s' is not a number in %" PRIu64 "..%" PRIu64 "\n",
                opt, v, min, max);
        exit(2);
    }
    return (uint64_t)x;
}

static void parse_args(int argc, char **argv, opts *o)
{
    o->events = 20000000ull;
    o->rounds = 5;
    o->dir = NULL;
    o->buffer_kb = 0;
    o->memory_mb = 0;
    o->json = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        const char *val = NULL;
        char name[32];
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq != NULL && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }
        int takes_value = strcmp(name, "--events") == 0 || strcmp(name, "--rounds") == 0 ||
                          strcmp(name, "--dir") == 0 || strcmp(name, "--buffer-kb") == 0 ||
                          strcmp(name, "--memory-mb") == 0;
        if (takes_value && val == NULL) {
            if (a + 1 >= argc) {
                fprintf(stderr, "bench-record: %s needs a value\n", name);
                exit(2);
            }
            val = argv[++a];
        }
        if (strcmp(name, "--events") == 0)
            o->events = parse_u64(name, val, 2, UINT64_MAX / 2);
        else if (strcmp(name, "--rounds") == 0)
            o->rounds = (unsigned)parse_u64(name, val, 1, MAX_ROUNDS);
        else if (strcmp(name, "--dir") == 0)
            o->dir = val;
        else if (strcmp(name, "--buffer-kb") == 0)
            o->buffer_kb = parse_u64(name, val, 1, UINT64_MAX / 1024);
        else if (strcmp(name, "--memory-mb") == 0)
            o->memory_mb = parse_u64(name, val, 1, UINT64_MAX / (1024 * 1024));
        else if (strcmp(name, "--json") == 0 && val == NULL)
            o->json = 1;
        else if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "bench-record: unknown option '%s'\n", arg);
            usage(stderr);
            exit(2);
        }
    }
}

static void make_config(const opts *o, tt_mode mode, const char *path, tt_config *cfg)
{
    tt_config_init(cfg);
    CHECK_TT("config mode", tt_config_set(cfg, TT_PARAM_MODE, (uint64_t)mode, &err_));
    if (mode == TT_MODE_OFF)
        return;
    CHECK_TT("config file", tt_config_set_str(cfg, TT_PARAM_FILE, path, &err_));
    if (mode != TT_MODE_RECORD)
        return;
    CHECK_TT("config caller", tt_config_set_str(cfg, TT_PARAM_CALLER, "bench-record", &err_));
    if (o->buffer_kb != 0)
        CHECK_TT("--buffer-kb",
                 tt_config_set(cfg, TT_PARAM_BUFFER_BYTES, o->buffer_kb * 1024u, &err_));
    if (o->memory_mb != 0)
        CHECK_TT("--memory-mb",
                 tt_config_set(cfg, TT_PARAM_MEMORY_BYTES, o->memory_mb * 1024u * 1024u, &err_));
}

/* After a traced loop: any failing call is a failure of the benchmark. */
static void check_loop(const char *variant, tt_session *s, uint64_t calls)
{
    if (g_fail.count == 0)
        return;
    fprintf(stderr,
            "bench-record: %s: %" PRIu64 " of %" PRIu64 " calls failed; first: call %" PRIu64
            " (%s) returned %s: %s\n",
            variant, g_fail.count, 2 * calls, g_fail.first_call,
            g_fail.first_is_exit ? "tt_exit" : "tt_enter", tt_error_name(g_fail.first_rc),
            tt_strerror(g_fail.first_rc));
    if (s != NULL && tt_session_mode(s) == TT_MODE_REPLAY) {
        tt_divergence d;
        if (tt_replay_divergence(s, &d) == TT_OK) {
            static char text[8192];
            size_t n = tt_divergence_format(s, &d, text, sizeof text);
            fprintf(stderr, "%.*s\n", (int)(n < sizeof text ? n : sizeof text - 1), text);
        }
    }
    exit(1);
}

/* ---- one round ---- */

typedef struct round_res {
    sample base;
    sample rec_open, rec_loop, rec_close;
    sample rep_open, rep_loop, rep_close;
    sample off_loop;
    sample verify;
    uint64_t file_size;      /* stat */
    tt_manifest m;
    uint64_t stats_stalls;   /* tt_session_stats before close */
    uint64_t stats_stall_ns;
    uint64_t stats_bytes;
    tt_verify_result vr;
} round_res;

static volatile uint64_t g_sink;

static void run_base(uint64_t calls, round_res *r, uint64_t expect_acc)
{
    tstamp t = now();
    uint64_t acc = bench_loop_base(NULL, 0, calls);
    r->base = since(t);
    if (acc != expect_acc) {
        fprintf(stderr, "bench-record: baseline loop result changed between rounds\n");
        exit(1);
    }
    g_sink = acc;
}

static void check_acc(const char *variant, uint64_t acc, uint64_t expect_acc)
{
    if (acc != expect_acc) {
        fprintf(stderr,
                "bench-record: %s: loop result %#" PRIx64 " differs from the baseline's %#" PRIx64
                "\n",
                variant, acc, expect_acc);
        exit(1);
    }
    g_sink = acc;
}

static void run_record(const opts *o, const char *path, uint64_t calls, round_res *r,
                       uint64_t expect_acc)
{
    tt_config cfg;
    make_config(o, TT_MODE_RECORD, path, &cfg);
    tt_session *s = NULL;
    uint32_t fn = 0;

    tstamp t = now();
    CHECK_TT("record: tt_session_open", tt_session_open(&cfg, &s, &err_));
    CHECK_TT("record: tt_intern", tt_intern(s, TT_OBJ_FUNCTION, "bench_leaf", &fn));
    r->rec_open = since(t);

    memset(&g_fail, 0, sizeof g_fail);
    t = now();
    uint64_t acc = bench_loop_traced(s, fn, calls);
    r->rec_loop = since(t);
    check_loop("record", s, calls);
    check_acc("record", acc, expect_acc);

    tt_session_stats st;
    memset(&st, 0, sizeof st);
    tt_session_stats_get(s, &st);
    r->stats_stalls = st.stalls;
    r->stats_stall_ns = st.stall_ns;
    r->stats_bytes = st.bytes_written;

    t = now();
    CHECK_TT("record: tt_session_close", tt_session_close(s, &err_));
    r->rec_close = since(t);
}

static void run_replay(const opts *o, const char *path, uint64_t calls, round_res *r,
                       uint64_t expect_acc)
{
    tt_config cfg;
    make_config(o, TT_MODE_REPLAY, path, &cfg);
    tt_session *s = NULL;
    uint32_t fn = 0;

    tstamp t = now();
    CHECK_TT("replay: tt_session_open", tt_session_open(&cfg, &s, &err_));
    CHECK_TT("replay: tt_intern", tt_intern(s, TT_OBJ_FUNCTION, "bench_leaf", &fn));
    r->rep_open = since(t);

    memset(&g_fail, 0, sizeof g_fail);
    t = now();
    uint64_t acc = bench_loop_traced(s, fn, calls);
    r->rep_loop = since(t);
    check_loop("replay", s, calls);
    check_acc("replay", acc, expect_acc);

    t = now();
    CHECK_TT("replay: tt_session_close", tt_session_close(s, &err_));
    r->rep_close = since(t);
}

static void run_off(uint64_t calls, round_res *r, uint64_t expect_acc)
{
    tt_config cfg;
    make_config(NULL, TT_MODE_OFF, NULL, &cfg);
    tt_session *s = NULL;
    uint32_t fn = 0;
    CHECK_TT("off: tt_session_open", tt_session_open(&cfg, &s, &err_));
    CHECK_TT("off: tt_intern", tt_intern(s, TT_OBJ_FUNCTION, "bench_leaf", &fn));

    memset(&g_fail, 0, sizeof g_fail);
    tstamp t = now();
    uint64_t acc = bench_loop_traced(s, fn, calls);
    r->off_loop = since(t);
    check_loop("off", s, calls);
    check_acc("off", acc, expect_acc);
    CHECK_TT("off: tt_session_close", tt_session_close(s, &err_));
}

static void run_verify(const char *path, uint64_t calls, round_res *r)
{
    tt_source src;
    CHECK_TT("tt_source_file", tt_source_file(&src, path, &err_));

    tt_reader_limits lim;
    tt_reader_limits_default(&lim);
    CHECK_TT("tt_reader_probe",
             tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, &r->m, NULL, &err_));

    memset(&r->vr, 0, sizeof r->vr);
    tstamp t = now();
    int rc = tt_verify(&src, NULL, &r->vr);
    r->verify = since(t);
    tt_source_close(&src);
    if (rc != TT_OK || r->vr.status != TT_VERIFY_OK) {
        fprintf(stderr,
                "bench-record: tt_verify: %s (%s), status %s at offset %" PRIu64
                ", chunk %" PRIu64 ": %s\n",
                tt_strerror(rc), tt_error_name(rc), tt_verify_status_name(r->vr.status),
                r->vr.offset, r->vr.chunk, r->vr.message);
        exit(1);
    }

    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "bench-record: stat %s: %s\n", path, strerror(errno));
        exit(1);
    }
    r->file_size = (uint64_t)sb.st_size;

    uint64_t expected = 2 * calls + STRUCTURAL_EVENTS;
    int bad = 0;
    if (r->m.event_count != expected) {
        fprintf(stderr,
                "bench-record: events lost or added: manifest event_count %" PRIu64
                ", expected %" PRIu64 " (2 x %" PRIu64 " calls + %u structural)\n",
                r->m.event_count, expected, calls, STRUCTURAL_EVENTS);
        bad = 1;
    }
    if (r->vr.events != r->m.event_count) {
        fprintf(stderr,
                "bench-record: tt_verify checked %" PRIu64 " events, the manifest says %" PRIu64
                "\n",
                r->vr.events, r->m.event_count);
        bad = 1;
    }
    if (!(r->m.flags & TT_MF_FINALIZED) || (r->m.flags & TT_MF_INCOMPLETE)) {
        fprintf(stderr, "bench-record: manifest flags %#x: not finalized or incomplete\n",
                r->m.flags);
        bad = 1;
    }
    if (r->m.file_size != r->file_size) {
        fprintf(stderr,
                "bench-record: manifest file_size %" PRIu64 " but the file has %" PRIu64
                " bytes\n",
                r->m.file_size, r->file_size);
        bad = 1;
    }
    if (bad)
        exit(1);
}

/* ---- statistics and output ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stat3 {
    double med, min, max;
} stat3;

static stat3 stats_of(const double *v, unsigned n)
{
    double tmp[MAX_ROUNDS];
    memcpy(tmp, v, n * sizeof *v);
    qsort(tmp, n, sizeof *tmp, cmp_double);
    stat3 s;
    s.min = tmp[0];
    s.max = tmp[n - 1];
    s.med = (n % 2) ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2.0;
    return s;
}

/* A variant's figures: raw wall time, and per-event differences against the baseline. */
typedef struct figure {
    const char *key;     /* JSON name */
    const char *label;   /* table row */
    stat3 ms;            /* wall ms of the variant */
    stat3 ns_wall;       /* (variant - base) / events, wall */
    stat3 ns_cpu;        /* same, process CPU */
    stat3 ns_thread;     /* same, CPU of the calling (recording) thread only */
    double target;       /* ns per event, 0 = none */
    double per_round[MAX_ROUNDS];
} figure;

enum { F_BASE, F_REC_LOOP, F_REC_CLOSE, F_REP_LOOP, F_REP_CLOSE, F_OFF, F_COUNT };

static void make_figure(figure *f, const round_res *rr, unsigned n, uint64_t events, int which)
{
    double ms[MAX_ROUNDS], w[MAX_ROUNDS], c[MAX_ROUNDS], th[MAX_ROUNDS];
    for (unsigned k = 0; k < n; k++) {
        const round_res *r = &rr[k];
        sample v;
        switch (which) {
        case F_BASE: v = r->base; break;
        case F_REC_LOOP: v = r->rec_loop; break;
        case F_REC_CLOSE: v = sum2(r->rec_loop, r->rec_close); break;
        case F_REP_LOOP: v = r->rep_loop; break;
        case F_REP_CLOSE: v = sum2(r->rep_loop, r->rep_close); break;
        default: v = r->off_loop; break;
        }
        ms[k] = v.wall / 1e6;
        if (which == F_BASE) {
            /* the baseline's own cost per call */
            w[k] = v.wall / (double)(events / 2);
            c[k] = v.cpu / (double)(events / 2);
            th[k] = v.thread / (double)(events / 2);
        } else {
            w[k] = (v.wall - r->base.wall) / (double)events;
            c[k] = (v.cpu - r->base.cpu) / (double)events;
            th[k] = (v.thread - r->base.thread) / (double)events;
        }
        f->per_round[k] = w[k];
    }
    f->ms = stats_of(ms, n);
    f->ns_wall = stats_of(w, n);
    f->ns_cpu = stats_of(c, n);
    f->ns_thread = stats_of(th, n);
}

static const char *fs_name(const char *path)
{
    struct statfs sf;
    if (statfs(path, &sf) != 0)
        return "?";
    switch ((unsigned long)sf.f_type) {
    case 0xEF53ul: return "ext2/3/4";
    case 0x01021994ul: return "tmpfs";
    case 0x9123683Eul: return "btrfs";
    case 0x58465342ul: return "xfs";
    case 0x794c7630ul: return "overlayfs";
    case 0x6969ul: return "nfs";
    case 0x65735546ul: return "fuse";
    case 0x2fc12fc1ul: return "zfs";
    case 0xf2f52010ul: return "f2fs";
    default: return "other";
    }
}

static const char *verdict(double value, double target)
{
    return value <= target ? "PASS" : "MISS";
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(argc, argv, &o);

    uint64_t calls = o.events / 2;
    uint64_t events = 2 * calls;
    unsigned n = o.rounds;

    const char *parent = o.dir;
    if (parent == NULL) {
        parent = getenv("TMPDIR");
        if (parent == NULL || *parent == '\0')
            parent = "/tmp";
    }
    if ((size_t)snprintf(g_tmpdir, sizeof g_tmpdir, "%s/tt-bench-record.XXXXXX", parent) >=
        sizeof g_tmpdir) {
        fprintf(stderr, "bench-record: --dir path too long\n");
        return 2;
    }
    if (mkdtemp(g_tmpdir) == NULL) {
        fprintf(stderr, "bench-record: mkdtemp %s: %s\n", g_tmpdir, strerror(errno));
        g_tmpdir[0] = '\0';
        return 1;
    }
    atexit(cleanup_tmpdir);
    char tmpdir_shown[PATH_MAX];
    snprintf(tmpdir_shown, sizeof tmpdir_shown, "%s", g_tmpdir);

    round_res *rr = calloc(n, sizeof *rr);
    if (rr == NULL) {
        fprintf(stderr, "bench-record: out of memory\n");
        return 1;
    }

    /* The value every variant's loop must compute, and a warm-up of the code and the clocks. */
    uint64_t expect_acc = bench_loop_base(NULL, 0, calls);
    g_sink = expect_acc;

    char path[PATH_MAX + 64];
    for (unsigned k = 0; k < n; k++) {
        round_res *r = &rr[k];
        snprintf(path, sizeof path, "%s/round-%u.tt", g_tmpdir, k);
        run_base(calls, r, expect_acc);
        run_record(&o, path, calls, r, expect_acc);
        run_replay(&o, path, calls, r, expect_acc);
        run_off(calls, r, expect_acc);
        run_verify(path, calls, r);
        if (unlink(path) != 0) {
            fprintf(stderr, "bench-record: unlink %s: %s\n", path, strerror(errno));
            return 1;
        }
        if (!o.json)
            fprintf(stderr, "bench-record: round %u/%u done\n", k + 1, n);
    }

    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    getrusage(RUSAGE_SELF, &ru);

    static figure fig[F_COUNT];
    static const struct {
        const char *key, *label;
        double target;
    } rows[F_COUNT] = {
        {"baseline", "baseline loop (per call)", 0},
        {"record_loop", "record, hot loop", TARGET_RECORD_NS},
        {"record_with_close", "record, incl. close", TARGET_RECORD_NS},
        {"replay_loop", "replay, hot loop", TARGET_REPLAY_NS},
        {"replay_with_close", "replay, incl. close", TARGET_REPLAY_NS},
        {"off", "off mode (per call)", TARGET_OFF_NS},
    };
    for (int i = 0; i < F_COUNT; i++) {
        fig[i].key = rows[i].key;
        fig[i].label = rows[i].label;
        fig[i].target = rows[i].target;
        make_figure(&fig[i], rr, n, events, i);
    }

    double bpe[MAX_ROUNDS], vmbs[MAX_ROUNDS], ropen[MAX_ROUNDS], popen[MAX_ROUNDS],
        stalls[MAX_ROUNDS], stall_ms[MAX_ROUNDS], fsize[MAX_ROUNDS];
    uint64_t stalls_max = 0, stats_stalls_max = 0;
    for (unsigned k = 0; k < n; k++) {
        const round_res *r = &rr[k];
        bpe[k] = (double)r->file_size / (double)r->m.event_count;
        vmbs[k] = r->verify.wall > 0 ? (double)r->file_size / (r->verify.wall / 1e9) / 1e6 : 0;
        ropen[k] = r->rec_open.wall / 1e6;
        popen[k] = r->rep_open.wall / 1e6;
        stalls[k] = (double)r->m.stall_count;
        stall_ms[k] = (double)r->m.stall_ns / 1e6;
        fsize[k] = (double)r->file_size;
        if (r->m.stall_count > stalls_max)
            stalls_max = r->m.stall_count;
        if (r->stats_stalls > stats_stalls_max)
            stats_stalls_max = r->stats_stalls;
    }
    stat3 s_bpe = stats_of(bpe, n), s_vmbs = stats_of(vmbs, n), s_ropen = stats_of(ropen, n),
          s_popen = stats_of(popen, n), s_stalls = stats_of(stalls, n),
          s_stall_ms = stats_of(stall_ms, n), s_fsize = stats_of(fsize, n);
    const tt_manifest *m0 = &rr[n - 1].m;
    uint64_t expected = events + STRUCTURAL_EVENTS;
    unsigned lib = tt_version();
    double clock_ns_read = clock_read_ns();

    if (o.json) {
        printf("{\n  \"events\": %" PRIu64 ",\n  \"calls\": %" PRIu64 ",\n  \"rounds\": %u,\n",
               events, calls, n);
        printf("  \"buildtype\": \"%s\",\n  \"library_version\": \"%u.%u.%u\",\n",
               TT_BENCH_BUILDTYPE, lib >> 16, (lib >> 8) & 0xff, lib & 0xff);
        printf("  \"dir_fs\": \"%s\",\n", fs_name(parent));
        printf("  \"buffer_kb\": %" PRIu64 ",\n  \"memory_mb\": %" PRIu64 ",\n", o.buffer_kb,
               o.memory_mb);
        for (int i = 0; i < F_COUNT; i++) {
            const figure *f = &fig[i];
            printf("  \"%s\": {\"wall_ms\": %.3f, \"ns_wall\": %.3f, \"ns_wall_min\": %.3f, "
                   "\"ns_wall_max\": %.3f, \"ns_cpu\": %.3f, \"ns_cpu_thread\": %.3f, "
                   "\"target_ns\": %.1f, \"per_round_ns_wall\": [",
                   f->key, f->ms.med, f->ns_wall.med, f->ns_wall.min, f->ns_wall.max,
                   f->ns_cpu.med, f->ns_thread.med, f->target);
            for (unsigned k = 0; k < n; k++)
                printf("%s%.3f", k ? ", " : "", f->per_round[k]);
            printf("]");
            if (f->target > 0)
                printf(", \"pass\": %s", f->ns_wall.med <= f->target ? "true" : "false");
            printf("},\n");
        }
        printf("  \"bytes_per_event\": %.4f,\n  \"bytes_target\": %.1f,\n  \"bytes_pass\": %s,\n",
               s_bpe.med, TARGET_BYTES, s_bpe.med <= TARGET_BYTES ? "true" : "false");
        printf("  \"clock_read_ns\": %.3f,\n", clock_ns_read);
        printf("  \"file_bytes\": %.0f,\n", s_fsize.med);
        printf("  \"manifest_event_count\": %" PRIu64 ",\n  \"expected_event_count\": %" PRIu64
               ",\n",
               m0->event_count, expected);
        printf("  \"chunks\": %" PRIu64 ",\n  \"blocks\": %" PRIu64 ",\n", m0->chunk_count,
               m0->block_count);
        printf("  \"verify_mb_per_s\": %.1f,\n", s_vmbs.med);
        printf("  \"record_open_ms\": %.3f,\n  \"replay_open_ms\": %.3f,\n", s_ropen.med,
               s_popen.med);
        printf("  \"stalls_median\": %.0f,\n  \"stalls_max\": %" PRIu64
               ",\n  \"stall_ms_median\": %.3f,\n",
               s_stalls.med, stalls_max, s_stall_ms.med);
        printf("  \"peak_rss_kb\": %ld\n}\n", ru.ru_maxrss);
        return 0;
    }

    printf("tinytrace bench-record: %" PRIu64 " enter/exit events (%" PRIu64
           " calls) per variant, %u rounds, medians\n",
           events, calls, n);
    printf("build %s (optimization %s), library %u.%u.%u, file in %s (%s)\n", TT_BENCH_BUILDTYPE,
           TT_BENCH_OPTIMIZATION, lib >> 16, (lib >> 8) & 0xff, lib & 0xff, tmpdir_shown,
           fs_name(parent));
    {
        uint64_t bb = 0, mb = 0;
        tt_config cfg;
        tt_config_init(&cfg);
        tt_error_info e;
        if (o.buffer_kb)
            (void)tt_config_set(&cfg, TT_PARAM_BUFFER_BYTES, o.buffer_kb * 1024u, &e);
        if (o.memory_mb)
            (void)tt_config_set(&cfg, TT_PARAM_MEMORY_BYTES, o.memory_mb * 1024u * 1024u, &e);
        (void)tt_config_get(&cfg, TT_PARAM_BUFFER_BYTES, &bb);
        (void)tt_config_get(&cfg, TT_PARAM_MEMORY_BYTES, &mb);
        printf("record: thread buffer %" PRIu64 " KiB, memory budget %" PRIu64 " MiB%s\n",
               bb / 1024, mb / (1024 * 1024),
               (o.buffer_kb || o.memory_mb) ? "" : " (library defaults)");
    }
    printf("ns/event = (variant - baseline of the same round) / %" PRIu64
           " events; cpu = process CPU, swapper included\n\n",
           events);

    printf("%-26s %10s %12s %21s %11s  %-14s %s\n", "", "wall ms", "ns/event", "[min .. max]",
           "cpu ns/ev", "target", "");
    for (int i = 0; i < F_COUNT; i++) {
        const figure *f = &fig[i];
        char range[64], tgt[32];
        snprintf(range, sizeof range, "[%.2f .. %.2f]", f->ns_wall.min, f->ns_wall.max);
        if (i == F_BASE)
            snprintf(tgt, sizeof tgt, "(ns per call)");
        else if (i == F_OFF)
            snprintf(tgt, sizeof tgt, "<= %.0f ns/call", f->target);
        else
            snprintf(tgt, sizeof tgt, "<= %.0f ns/ev", f->target);
        printf("%-26s %10.1f %12.2f %21s %11.2f  %-14s %s\n", f->label, f->ms.med,
               f->ns_wall.med, range, f->ns_cpu.med, tgt,
               f->target > 0 ? verdict(f->ns_wall.med, f->target) : "");
    }
    /* Wall well above the recording thread's CPU means it waited: stalls, or no free core. */
    printf("%-26s recording thread %.2f + other threads (swapper) %.2f ns/ev\n",
           "record hot loop, CPU", fig[F_REC_LOOP].ns_thread.med,
           fig[F_REC_LOOP].ns_cpu.med - fig[F_REC_LOOP].ns_thread.med);
    printf("\n");
    printf("%-26s %10.3f %12s %21s %11s  %-14s %s\n", "bytes/event on disk", s_bpe.med, "", "", "",
           "<= 4 B/ev", verdict(s_bpe.med, TARGET_BYTES));
    printf("  file %.0f bytes, %" PRIu64 " chunks, %" PRIu64 " blocks of %u B, %u thread(s)\n",
           s_fsize.med, m0->chunk_count, m0->block_count, m0->block_size, m0->thread_count);
    printf("  events: manifest %" PRIu64 ", expected %" PRIu64
           " = 2N + %u (session start, thread start, session end): OK in every round\n",
           m0->event_count, expected, STRUCTURAL_EVENTS);
    printf("%-26s %10.0f MB/s (10^6 B/s), file in page cache; range [%.0f .. %.0f]\n",
           "verify", s_vmbs.med, s_vmbs.min, s_vmbs.max);
    printf("%-26s record %.2f ms, replay %.2f ms (median, incl. tt_intern)\n", "session open",
           s_ropen.med, s_popen.med);
    printf("%-26s %.0f per round median, %" PRIu64 " max (manifest); %.2f ms stalled median%s\n",
           "stalls", s_stalls.med, stalls_max, s_stall_ms.med,
           stats_stalls_max > stalls_max ? "  ** stats saw more stalls than the manifest **" : "");
    printf("%-26s %ld KiB\n", "peak RSS (ru_maxrss)", ru.ru_maxrss);
    printf("%-26s %.2f ns per read (%s): the floor of a recorded event here\n", "clock read",
           clock_ns_read, CLOCK_NAME);
    free(rr);
    return 0;
}
