/* SPDX-License-Identifier: MIT */
/* The ideal recorder of bench/compare: the floor of what recording a function entry or exit can
 * cost on this machine. Preloaded (LD_PRELOAD) into the -finstrument-functions build of the
 * workload in place of glibc's empty hooks, exactly as tinytrace's preload library is, so that
 * the two differ only in the recorder.
 *
 * Each event is one 16-byte record: the time stamp counter (__rdtsc, 8 bytes) and the function's
 * address shifted left by one with the kind (0 enter, 1 exit) in the low bit (8 bytes). Records
 * go to a per-thread buffer of BUF_RECORDS records; a full buffer is written to /dev/null with
 * one write(2). No nesting guard, no id mapping, no encoding, no file: nothing but the store.
 *
 * At exit it prints "compare-ideal: N records" on stderr (every thread's buffer flushed), which
 * bench/compare checks against the events expected.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <x86intrin.h>

#define NOINSTR __attribute__((no_instrument_function))
#define BUF_RECORDS 4096 /* 64 KiB per thread */

struct record {
    uint64_t tsc;
    uint64_t fn_kind;
};

static __thread struct record buf[BUF_RECORDS] __attribute__((tls_model("initial-exec")));
static __thread unsigned used __attribute__((tls_model("initial-exec")));
static __thread int registered __attribute__((tls_model("initial-exec")));
static int null_fd = -1;
static pthread_key_t key;
static uint64_t written;

NOINSTR static void flush(void)
{
    if (used && write(null_fd, buf, used * sizeof buf[0]) < 0)
        perror("compare-ideal: write");
    __atomic_fetch_add(&written, used, __ATOMIC_RELAXED);
    used = 0;
}

NOINSTR static void thread_done(void *p)
{
    (void)p;
    flush();
}

/* Reached with an empty buffer (a thread's first event) or a full one. */
NOINSTR __attribute__((noinline, cold)) static void empty_or_full(void)
{
    if (!registered) { /* first event of this thread: flush its rest when it ends */
        registered = 1;
        pthread_setspecific(key, &registered);
    }
    if (used == BUF_RECORDS)
        flush();
}

NOINSTR static inline void put(void *fn, uint64_t kind)
{
    if (__builtin_expect(used - 1u >= BUF_RECORDS - 1u, 0)) /* used == 0 or BUF_RECORDS */
        empty_or_full();
    struct record *r = &buf[used++];
    r->tsc = __rdtsc();
    r->fn_kind = (uint64_t)(uintptr_t)fn << 1 | kind;
}

NOINSTR void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    put(fn, 0);
}

NOINSTR void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    put(fn, 1);
}

NOINSTR __attribute__((constructor)) static void start(void)
{
    null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    pthread_key_create(&key, thread_done);
}

NOINSTR __attribute__((destructor)) static void stop(void)
{
    flush();
    fprintf(stderr, "compare-ideal: %llu records\n", (unsigned long long)written);
}
