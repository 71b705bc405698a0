/* SPDX-License-Identifier: MIT */
/* The registry of the tracer's own descriptors (base/fds.c) and the writer's use of it
 * (record/writer.c), through the C API: no preload library here, so the test itself plays the
 * program that closes the trace's descriptor behind the writer's back, or puts its own file on
 * the number, as a raw system call would. */
#include "common.h"

#include "harness.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "format.h"

TestSuite(fdregistry);
TestSuite(fdwriter, .init = tt_test_dir_setup, .fini = tt_test_dir_teardown);

static int devnull(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "/dev/null: %s", strerror(errno));
    return fd;
}

Test(fdregistry, reserves_a_number_for_this_process_and_not_for_a_fork_child)
{
    int fd = devnull();
    int slot = tt_fd_reserve(fd, NULL, NULL);
    cr_assert_geq(slot, 0);
    cr_assert(tt_fd_is_reserved(fd));
    cr_assert(!tt_fd_is_reserved(fd + 1));
    cr_assert(!tt_fd_is_reserved(-1));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* the child's copy is its own; and it may reserve numbers of its own */
        int ok = !tt_fd_is_reserved(fd) && close(fd) == 0;
        int mine = devnull();
        int s2 = tt_fd_reserve(mine, NULL, NULL);
        ok = ok && s2 >= 0 && tt_fd_is_reserved(mine);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child saw the parent's reservation");
    cr_assert(tt_fd_is_reserved(fd), "the child's reservation took the parent's");
    tt_fd_release(slot);
    cr_assert(!tt_fd_is_reserved(fd));
    close(fd);
}

Test(fdregistry, lists_the_reserved_numbers_of_a_range_in_ascending_order)
{
    int a = devnull(), b = devnull(), c = devnull();
    int lo = a < b ? (a < c ? a : c) : (b < c ? b : c);
    int hi = a > b ? (a > c ? a : c) : (b > c ? b : c);
    int sc = tt_fd_reserve(c, NULL, NULL), sa = tt_fd_reserve(a, NULL, NULL),
        sb = tt_fd_reserve(b, NULL, NULL);
    int r[TT_FD_SLOTS];
    size_t n = tt_fd_reserved_in(0, ~0U, r, TT_FD_SLOTS);
    cr_assert_eq(n, 3u);
    cr_assert(r[0] == lo && r[0] < r[1] && r[1] < r[2] && r[2] == hi);
    cr_assert_eq(tt_fd_reserved_in((unsigned)lo + 1, (unsigned)hi - 1, r, TT_FD_SLOTS), 1u);
    cr_assert_eq(tt_fd_reserved_in((unsigned)hi + 1, ~0U, r, TT_FD_SLOTS), 0u);
    cr_assert_eq(tt_fd_reserved_in(0, ~0U, r, 2), 2u, "more than @cap numbers");
    /* a swap moves the reservation; a swap to -1 keeps the slot, with no number */
    int d = devnull();
    tt_fd_swap(sa, d);
    cr_assert(!tt_fd_is_reserved(a) && tt_fd_is_reserved(d));
    tt_fd_swap(sa, -1);
    cr_assert(!tt_fd_is_reserved(d));
    cr_assert_eq(tt_fd_reserved_in(0, ~0U, r, TT_FD_SLOTS), 2u);
    tt_fd_release(sa);
    tt_fd_release(sb);
    tt_fd_release(sc);
    cr_assert_eq(tt_fd_reserved_in(0, ~0U, r, TT_FD_SLOTS), 0u);
}

Test(fdregistry, has_a_few_slots_and_refuses_a_reservation_when_they_are_full)
{
    int slot[TT_FD_SLOTS];
    for (int i = 0; i < TT_FD_SLOTS; i++) {
        slot[i] = tt_fd_reserve(devnull(), NULL, NULL);
        cr_assert_geq(slot[i], 0, "reservation %d of %d", i + 1, TT_FD_SLOTS);
    }
    int extra = devnull();
    cr_assert_eq(tt_fd_reserve(extra, NULL, NULL), -1);
    cr_assert(!tt_fd_is_reserved(extra));
    tt_fd_release(slot[3]);
    cr_assert_geq(tt_fd_reserve(extra, NULL, NULL), 0);
    cr_assert(tt_fd_is_reserved(extra));
}

struct mover {
    int fd, slot, calls, seen_fd;
};

static int move_fn(void *ctx, int fd)
{
    struct mover *m = ctx;
    m->calls++;
    m->seen_fd = fd;
    m->fd = tt_fd_relocate(m->slot, fd);
    return m->fd < 0 ? errno : 0;
}

Test(fdregistry, moves_through_the_owner_and_never_after_a_release)
{
    struct mover m = { devnull(), -1, 0, -1 };
    int first = m.fd;
    m.slot = tt_fd_reserve(m.fd, move_fn, &m);
    cr_assert_geq(m.slot, 0);
    cr_assert_eq(tt_fd_move(first + 1000), 0, "a number nobody reserved");
    cr_assert_eq(m.calls, 0);
    cr_assert_eq(tt_fd_move(first), 0);
    cr_assert_eq(m.calls, 1);
    cr_assert_eq(m.seen_fd, first);
    cr_assert_neq(m.fd, first);
    cr_assert(!tt_fd_is_reserved(first) && tt_fd_is_reserved(m.fd));
    cr_assert_eq(fcntl(first, F_GETFD), -1, "the old number is closed");
    tt_fd_release(m.slot);
    cr_assert_eq(tt_fd_move(m.fd), 0);
    cr_assert_eq(m.calls, 1, "moved after its release");
}

Test(fdregistry, places_a_descriptor_high_with_close_on_exec_below_the_soft_limit)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t top = rl.rlim_cur < 1024 ? rl.rlim_cur : 1024;
    int fd = devnull();
    int hi = tt_fd_high(fd);
    cr_assert_geq(hi, (int)top - 16, "placed at %d, the limit is %llu", hi,
                  (unsigned long long)rl.rlim_cur);
    cr_assert_lt(hi, (int)top);
    cr_assert(fcntl(hi, F_GETFD) & FD_CLOEXEC);
    cr_assert(fcntl(fd, F_GETFD) != -1, "the original stays open");
    close(hi);

    struct rlimit small = { 64, rl.rlim_max };
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &small), 0);
    hi = tt_fd_high(fd);
    cr_assert(hi >= 48 && hi < 64, "placed at %d under a limit of 64", hi);
    close(hi);
    /* every number taken: the lowest free one, then none */
    int taken[64], nt = 0;
    for (int k; (k = dup(fd)) >= 0;)
        taken[nt++] = k;
    close(taken[0]);
    hi = tt_fd_high(fd);
    cr_assert_eq(hi, taken[0], "not the only free number: %d", hi);
    errno = 0;
    cr_assert_eq(tt_fd_high(fd), -1);
    cr_assert_eq(errno, EMFILE);
}

/* Readers on other threads while the owner reserves, swaps and releases: a reader sees a number
 * reserved only while one of the owner's reservations has it (TSan checks the rest). */
static atomic_int stop_readers;
static int churn_fds[4];

static void *reader_main(void *arg)
{
    (void)arg;
    uint64_t hits = 0;
    int r[TT_FD_SLOTS];
    while (!atomic_load(&stop_readers)) {
        for (int fd = 0; fd < 64; fd++) {
            bool known = false;
            for (int i = 0; i < 4; i++)
                known = known || fd == churn_fds[i];
            if (tt_fd_is_reserved(fd)) {
                if (!known)
                    return (void *)1;
                hits++;
            }
        }
        size_t n = tt_fd_reserved_in(0, ~0U, r, TT_FD_SLOTS);
        for (size_t i = 1; i < n; i++)
            if (r[i - 1] >= r[i])
                return (void *)2;
    }
    return hits ? NULL : (void *)3;
}

Test(fdregistry, reads_lock_free_while_reservations_change, .timeout = 60)
{
    for (int i = 0; i < 4; i++) {
        churn_fds[i] = devnull();
        cr_assert_lt(churn_fds[i], 64);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, reader_main, NULL), 0);
    uint64_t t0 = tt_test_now_ns();
    for (int round = 0; tt_test_now_ns() - t0 < 300000000ull || round < 1000; round++) {
        int s = tt_fd_reserve(churn_fds[round % 4], NULL, NULL);
        cr_assert_geq(s, 0);
        tt_fd_swap(s, churn_fds[(round + 1) % 4]);
        tt_fd_release(s);
    }
    int keep = tt_fd_reserve(churn_fds[0], NULL, NULL); /* the readers must see one */
    uint64_t t1 = tt_test_now_ns();
    while (tt_test_now_ns() - t1 < 20000000ull)
        ;
    atomic_store(&stop_readers, 1);
    for (int i = 0; i < 2; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        cr_assert_null(rv, "reader %d: %s", i,
                       rv == (void *)1 ? "saw a number nobody reserved"
                       : rv == (void *)2 ? "a list out of order" : "never saw a reservation");
    }
    tt_fd_release(keep);
}

/* ---------------------------------------------------------------- the writer */

#define PAYLOAD 1000u

static int open_record(const char *path, tt_session **s)
{
    tt_error_info err;
    int rc = tt_test_open_record_file(path, s, &err);
    cr_assert_eq(rc, TT_OK, "open: %s", err.message);
    return rc;
}

/* User events @from..@to-1, each with its own bytes. */
static void record_range(tt_session *s, uint32_t from, uint32_t to)
{
    static _Thread_local uint8_t buf[PAYLOAD];
    for (uint32_t i = from; i < to; i++) {
        tt_test_fill(buf, PAYLOAD, i);
        int rc = tt_user(s, i, buf, PAYLOAD);
        cr_assert_eq(rc, TT_OK, "event %u: %s", i, tt_error_name(rc));
    }
}

/* Hands this thread's buffer over and waits until the swapper wrote all @n user events (and
 * the session's and the thread's start): the next write goes through the descriptor the test
 * is about to take. The swapper counts a buffer's events after the write that empties its
 * queue (swapper.c). */
static void written(tt_session *s, uint64_t n)
{
    tt_session_stats st;
    cr_assert_eq(tt_session_flush_thread(s), TT_OK);
    uint64_t t0 = tt_test_now_ns();
    for (tt_session_stats_get(s, &st); st.events < n + 2; tt_session_stats_get(s, &st)) {
        cr_assert_lt(tt_test_now_ns() - t0, 10000000000ull, "the swapper wrote %llu events",
                     (unsigned long long)st.events);
        usleep(1000);
    }
}

/* A recording into @path with user events 0..@n-1 already written to the file. */
static tt_session *recording(const char *path, uint32_t n)
{
    tt_session *s;
    open_record(path, &s);
    record_range(s, 0, n);
    written(s, n);
    return s;
}

/* The trace's one descriptor, as a program finds it: the one open on a .partial file. */
static int trace_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int found = -1, n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char link[300], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len > 8 && memcmp(target + len - 8, ".partial", 8) == 0) {
            found = atoi(e->d_name);
            n++;
        }
    }
    closedir(d);
    cr_assert_eq(n, 1, "%d descriptors on a .partial file", n);
    return found;
}

/* The file at @path verifies, and holds user events 0..@n-1 of every thread, each with its own
 * bytes (tag i, payload tt_test_fill(i)), @threads times over. */
static void check_all_events(const char *path, uint32_t n, uint32_t threads)
{
    tt_source src;
    tt_error_info err;
    cr_assert_eq(tt_source_file(&src, path, &err), TT_OK, "%s", err.message);
    tt_verify_result vr;
    int rc = tt_verify(&src, NULL, &vr);
    tt_source_close(&src);
    cr_assert_eq(rc, TT_OK, "verify: %s at %llu", vr.message, (unsigned long long)vr.offset);

    tt_test_reader tr;
    cr_assert_eq(tt_test_reader_open_file(&tr, path, TT_CURSORS_SEQUENTIAL, &err), TT_OK, "%s",
                 err.message);
    uint32_t *seen = calloc(n, sizeof *seen);
    uint64_t users = 0;
    tt_test_events ev; /* the sequential cursor: every thread's events */
    tt_test_read_cursor(&tr, 0, &ev);
    cr_assert_eq(ev.end_code, TT_E_END, "%s", ev.err.message);
    for (size_t i = 0; i < ev.n; i++) {
        const tt_event *e = &ev.v[i].ev;
        if (e->kind != TT_EV_USER)
            continue;
        cr_assert_lt(e->arg, (uint64_t)n);
        cr_assert_eq(e->payload_len, PAYLOAD);
        cr_assert_eq(tt_test_check_fill(ev.v[i].payload, PAYLOAD, e->arg), PAYLOAD,
                     "event %llu has other bytes", (unsigned long long)e->arg);
        seen[e->arg]++;
        users++;
    }
    tt_test_events_free(&ev);
    tt_test_reader_close(&tr);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(seen[i], threads, "event %u is in the file %u times, not %u", i, seen[i],
                     threads);
    cr_assert_eq(users, (uint64_t)n * threads);
    free(seen);
}

Test(fdwriter, puts_its_descriptor_high_with_close_on_exec_and_reserved)
{
    const char *path = tt_test_path("high.tt");
    tt_session *s;
    open_record(path, &s);
    int fd = trace_fd();
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t top = rl.rlim_cur < 1024 ? rl.rlim_cur : 1024;
    cr_assert(fd >= (int)top - 16 && fd < (int)top, "the trace is on fd %d", fd);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    int r[TT_FD_SLOTS];
    cr_assert_eq(tt_fd_reserved_in(0, ~0U, r, TT_FD_SLOTS), 1u);
    cr_assert_eq(r[0], fd, "fd %d is reserved, the trace is on %d", r[0], fd);
    tt_error_info err;
    cr_assert_eq(tt_session_close(s, &err), TT_OK, "%s", err.message);
    cr_assert(!tt_fd_is_reserved(fd), "still reserved after close");
    cr_assert_eq(fcntl(fd, F_GETFD), -1, "still open after close");
}

Test(fdwriter, reopens_its_file_when_the_program_closes_the_descriptor)
{
    const char *path = tt_test_path("closed.tt");
    tt_session *s = recording(path, 3000);
    int fd = trace_fd();
    cr_assert_eq(close(fd), 0); /* behind the writer's back, as a raw system call would */
    record_range(s, 3000, 6000);
    written(s, 6000);
    cr_assert_eq(close(trace_fd()), 0); /* and again, with the last events still to write */
    record_range(s, 6000, 9000);
    tt_error_info err;
    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "close: %s (%s)", tt_error_name(rc), err.message);
    check_all_events(path, 9000, 1);
    DIR *d = opendir(tt_test_dir);
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        cr_assert_null(strstr(e->d_name, ".partial"), "left behind: %s", e->d_name);
    closedir(d);
}

Test(fdwriter, reopens_its_file_while_a_fork_child_holds_the_old_descriptor)
{
    const char *path = tt_test_path("forked.tt");
    tt_session *s = recording(path, 2000);
    int gate[2];
    cr_assert_eq(pipe(gate), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* holds its copy of the descriptor, and with it the lock, until told */
        char c;
        close(gate[1]);
        _exit(read(gate[0], &c, 1) < 0);
    }
    close(gate[0]);
    cr_assert_eq(close(trace_fd()), 0);
    record_range(s, 2000, 4000);
    written(s, 4000); /* reopened while the child's description holds the lock */
    cr_assert(tt_partial_locked(trace_fd()), "the file looks dead to gc");
    close(gate[1]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    record_range(s, 4000, 5000);
    tt_error_info err;
    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "close: %s (%s)", tt_error_name(rc), err.message);
    check_all_events(path, 5000, 1);
}

/* The preload library's dup2 over the trace's number, from another thread, over and over:
 * tt_fd_move, then the program's own file on the old number. A write that went to the old number
 * after the move would land in /dev/null, and the file would lack it. */
struct dup2_arg {
    atomic_int stop;
    int moves;
};

static void *dup2_main(void *p)
{
    struct dup2_arg *a = p;
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    while (!atomic_load(&a->stop)) {
        int r[TT_FD_SLOTS];
        if (tt_fd_reserved_in(0, ~0U, r, TT_FD_SLOTS) != 1)
            return (void *)1;
        if (tt_fd_move(r[0]) != 0 || tt_fd_is_reserved(r[0]))
            return (void *)2;
        if (dup2(null, r[0]) != r[0])
            return (void *)3;
        close(r[0]); /* free again: the writer's next move may come back to it */
        a->moves++;
    }
    close(null);
    return NULL;
}

struct rec_arg {
    tt_session *s;
    uint32_t n;
};

static void *rec_main(void *p)
{
    struct rec_arg *a = p;
    record_range(a->s, 0, a->n);
    tt_session_thread_end(a->s);
    return NULL;
}

Test(fdwriter, keeps_every_event_while_the_program_dup2s_over_its_descriptor, .timeout = 120)
{
    const char *path = tt_test_path("moved.tt");
    tt_session *s;
    open_record(path, &s);
    struct dup2_arg d = { 0, 0 };
    pthread_t mover, rec[3];
    struct rec_arg ra = { s, 6000 };
    cr_assert_eq(pthread_create(&mover, NULL, dup2_main, &d), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&rec[i], NULL, rec_main, &ra), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(rec[i], NULL);
    atomic_store(&d.stop, 1);
    void *rv;
    pthread_join(mover, &rv);
    cr_assert_null(rv, "the mover failed (%p)", rv);
    cr_assert_gt(d.moves, 0);
    tt_error_info err;
    int rc = tt_session_close(s, &err);
    cr_assert_eq(rc, TT_OK, "close: %s (%s)", tt_error_name(rc), err.message);
    cr_log_info("%d moves", d.moves);
    check_all_events(path, 6000, 3);
}

/* Closes @s, which lost the trace's descriptor @fd: TT_E_IO, EBADF, the offset of the first
 * failed write (past the manifest), a message that says @what with the number, and @also. */
static void check_lost(tt_session *s, int fd, const char *what, const char *also,
                       tt_error_info *err)
{
    int rc = tt_session_close(s, err);
    cr_assert_eq(rc, TT_E_IO, "close: %s (%s)", tt_error_name(rc), err->message);
    cr_assert_eq(err->sys_errno, EBADF);
    char num[32];
    snprintf(num, sizeof num, "(fd %d)", fd);
    cr_assert(strstr(err->message, what) && strstr(err->message, num) &&
                  strstr(err->message, also), "close message: %s", err->message);
    cr_assert_geq(err->offset, 512u, "the offset of the first failed write");
}

Test(fdwriter, never_writes_its_manifest_into_a_file_the_program_put_on_its_number)
{
    const char *path = tt_test_path("replaced.tt");
    const char *other = tt_test_path("program-file");
    static const char mine[] = "the program's own file: its first bytes stay its own";
    int ofd = open(other, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(ofd, 0);
    cr_assert_eq(write(ofd, mine, sizeof mine), (ssize_t)sizeof mine);
    tt_session *s = recording(path, 3000);
    int fd = trace_fd();
    cr_assert_eq(dup2(ofd, fd), fd); /* past the guard, as a raw system call would */
    record_range(s, 3000, 4000);
    tt_error_info err;
    check_lost(s, fd, "put a file of its own on the trace file's descriptor",
               "the file is marked incomplete", &err);

    char head[sizeof mine];
    cr_assert_eq(pread(ofd, head, sizeof head, 0), (ssize_t)sizeof head);
    cr_assert_arr_eq(head, mine, sizeof mine, "the program's file was overwritten at 0");
    close(ofd);
    tt_test_reader tr;
    int rc = tt_test_reader_open_file(&tr, path, TT_CURSORS_SEQUENTIAL, &err);
    cr_assert_eq(rc, TT_E_INCOMPLETE, "the trace: %s (%s)", tt_error_name(rc), err.message);
}

Test(fdwriter, says_the_program_closed_its_descriptor_when_no_number_is_left)
{
    const char *path = tt_test_path("full.tt");
    tt_session *s = recording(path, 2000);
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = 1024;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    int fd = trace_fd();
    cr_assert_eq(close(fd), 0);
    int null = devnull();
    while (dup(null) >= 0) /* the program takes every number left */
        ;
    record_range(s, 2000, 2200);
    tt_error_info err;
    check_lost(s, fd, "the program closed the trace file's descriptor", strerror(EMFILE), &err);
    cr_assert(strstr(err.message, "the final manifest could not be written either") &&
                  !strstr(err.message, "is marked"), "close message: %s", err.message);
}
