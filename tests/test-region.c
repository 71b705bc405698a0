/* SPDX-License-Identifier: MIT */
/* The runtime's memory region (base/region.c): across fork, a child forked while another thread
 * of its parent is inside the region's allocator must still be able to allocate. Without the
 * fork handlers the child inherits the lock held by a thread it does not have, and its first
 * allocation waits forever (a shell's child under `tinytrace record` did, before an exec).
 * And an aligned block: aligned, usable, and on its header's page when it is small. */
#include "harness.h"

#include "base.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(region);

#define FORKS 300
#define DEADLINE_NS (10ull * 1000000000ull)

static atomic_int stop;

/* Allocates and frees blocks of many sizes as fast as it can: the region's lock is held most of
 * the time, so a fork meets it held. */
static void *churn(void *arg)
{
    (void)arg;
    void *keep[64] = {0};
    for (uint32_t i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        uint32_t k = i % 64;
        tt_region_free(keep[k]);
        keep[k] = tt_region_malloc(16u + (i * 2654435761u) % 40000u);
    }
    for (uint32_t k = 0; k < 64; k++)
        tt_region_free(keep[k]);
    return NULL;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits for @pid until the deadline; its status, or -1 (then it is killed). */
static int wait_with_deadline(pid_t pid)
{
    uint64_t end = now_ns() + DEADLINE_NS;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec step = {0, 200000};
        nanosleep(&step, NULL);
    }
}

Test(region, a_child_forked_while_another_thread_allocates_can_allocate)
{
    cr_assert(tt_region_init(256u << 20), "the region is reserved");
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, churn, NULL), 0);
    int stuck = -1, bad = -1;
    for (int i = 0; i < FORKS && stuck < 0 && bad < 0; i++) {
        pid_t pid = fork();
        cr_assert(pid >= 0, "fork %d: %s", i, strerror(errno));
        if (pid == 0) {
            void *p = tt_region_malloc(100 + (size_t)i);
            _exit(p != NULL ? 0 : 3);
        }
        int st = wait_with_deadline(pid);
        if (st == -1)
            stuck = i;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = i;
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    cr_assert(stuck < 0, "the child of fork %d did not allocate within 10 s: it inherited the "
                         "region's lock held by the other thread", stuck);
    cr_assert(bad < 0, "the child of fork %d could not allocate", bad);
}

Test(region, an_aligned_block_is_aligned_usable_and_shares_its_header_s_page)
{
    cr_assert(tt_region_init(256u << 20), "the region is reserved");
    static const size_t aligns[] = { 32, 64, 256, 4096, 8192, 65536 };
    static const size_t sizes[] = { 1, 256, 4000, 70000 };
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t al = aligns[a], n = sizes[k];
            uint8_t *p = tt_region_memalign(al, n);
            cr_assert(p, "memalign(%zu, %zu)", al, n);
            cr_assert_eq((uintptr_t)p % al, 0, "memalign(%zu, %zu) gave %p", al, n, (void *)p);
            cr_assert_geq(tt_region_usable(p), n, "memalign(%zu, %zu): usable %zu", al, n,
                          tt_region_usable(p));
            memset(p, (int)(a * 16 + k + 1), n); /* every byte writable */
            /* a thread's slot (256 bytes at 64): block and header on one page, one fault */
            if (al < 4096 && n <= 256)
                cr_assert_eq(((uintptr_t)p - 16) / 4096, ((uintptr_t)p + n - 1) / 4096,
                             "memalign(%zu, %zu) at %p: its header is on another page", al, n,
                             (void *)p);
            tt_region_free(p);
        }
    /* freed runs are given back and found again */
    for (int i = 0; i < 64; i++) {
        void *p = tt_region_memalign(64, 256);
        cr_assert(p && (uintptr_t)p % 64 == 0);
        tt_region_free(p);
    }
}
