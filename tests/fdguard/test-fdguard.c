/* The registry of the tracer's own descriptors (base/fds.c), through the C API. */
#include "common.h"

#include "harness.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"

TestSuite(fdregistry);

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
    int hi = tt_fd_high(fd);
    if (hi < 0)
        return errno;
    m->fd = hi;
    tt_fd_swap(m->slot, hi);
    close(fd);
    return 0;
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
