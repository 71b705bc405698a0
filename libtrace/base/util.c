/* SPDX-License-Identifier: MIT */
/* Clocks, the build identity of the running executable, the tracer's per-thread flag, and a
 * whole positioned write. */
#include <elf.h>
#include <errno.h>
#include <unistd.h>
#include <stdatomic.h>
#include <link.h>
#include <string.h>
#include <time.h>

#include "base.h"

__thread int tt_in_tracer;

uint64_t tt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tt_pwrite_all(int fd, uint64_t off, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : ENOSPC;
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

bool tt_ticks_are_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return true;
#else
    return false;
#endif
}

/* The TSC rate is measured against CLOCK_BOOTTIME between two points, and stored in every
 * manifest so readers can turn ticks into time. A recording takes the first point at open and
 * the second at close, so the rate is measured over the whole run (the longer, the closer);
 * at least @min_ns apart, so a very short run waits out the rest. Invariant TSCs (every x86-64
 * CPU of the last decade) tick at a constant rate whatever the frequency scaling, and on
 * through s2idle, which CLOCK_BOOTTIME counts and CLOCK_MONOTONIC does not.
 *
 * Each point is a tick read between two clock reads, taken again (up to 8 times) while an
 * interrupt stretched the two apart by more than 2 us: one 10 us interruption of a 0.2 ms
 * interval would skew the rate by 5%. */
static uint64_t boot_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void calib_point(uint64_t *ns, uint64_t *ticks)
{
    for (int i = 0; i < 8; i++) {
        uint64_t a = boot_ns();
        *ticks = tt_ticks();
        uint64_t b = boot_ns();
        *ns = a + (b - a) / 2;
        if (b - a <= 2000)
            return;
    }
}

void tt_clock_point(uint64_t *ns, uint64_t *ticks)
{
    calib_point(ns, ticks);
}

/* The anchor: set once (the runtime's start, a process's first session open, or a fork child's
 * copy); ticks are stored first and ns published after them, so a reader that sees ns sees
 * its ticks */
static _Atomic uint64_t anchor_ns, anchor_ticks;

void tt_calib_anchor_set(uint64_t ns, uint64_t ticks)
{
    atomic_store_explicit(&anchor_ticks, ticks, memory_order_relaxed);
    atomic_store_explicit(&anchor_ns, ns, memory_order_release);
}

bool tt_calib_anchor_get(uint64_t *ns, uint64_t *ticks)
{
    *ns = atomic_load_explicit(&anchor_ns, memory_order_acquire);
    *ticks = atomic_load_explicit(&anchor_ticks, memory_order_relaxed);
    return *ns != 0 && *ticks != 0;
}

void tt_calib_begin(struct tt_calib *c)
{
    if (tt_calib_anchor_get(&c->ns0, &c->t0))
        return;
    calib_point(&c->ns0, &c->t0);
    tt_calib_anchor_set(c->ns0, c->t0);
}

/* The rate between @c's point and one taken now (at least @min_ns later); 0 when it makes no
 * sense: fewer ticks than before (the ticks of another core behind this one's, a TSC reset by
 * a deep suspend), a rate outside 1 .. 2^64, or one more than 5% off @expect (when not 0). */
static uint64_t calib_rate(const struct tt_calib *c, uint64_t min_ns, uint64_t expect)
{
    uint64_t n1, t1;
    do {
        calib_point(&n1, &t1);
    } while (n1 - c->ns0 < min_ns);
    if (t1 <= c->t0)
        return 0;
    double r = (double)(t1 - c->t0) * 1e9 / (double)(n1 - c->ns0);
    if (!(r >= 1.0 && r < 18446744073709549568.0))
        return 0;
    uint64_t v = (uint64_t)r;
    return expect && (v > expect + expect / 20 || v < expect - expect / 20) ? 0 : v;
}

uint64_t tt_calib_end(const struct tt_calib *c, uint64_t min_ns, uint64_t expect)
{
    if (!tt_ticks_are_tsc())
        return 1000000000u;
    uint64_t v = calib_rate(c, min_ns, expect);
    if (v == 0) { /* measure here and now instead, on this thread alone, whatever it gives
                   * (from a point of its own, not the anchor) */
        struct tt_calib here;
        calib_point(&here.ns0, &here.t0);
        v = calib_rate(&here, min_ns, 0);
    }
    return v ? v : 1000000000u; /* a clock that never moves forward: ticks taken as ns */
}

struct bid_search {
    uint8_t *out;
    size_t cap;
    size_t len;
    uintptr_t addr; /* tt_build_id_of: the object that maps it; 0: the first (the program) */
};

/* The GNU build-id note among @info's PT_NOTE segments into @b; 1 when found. */
static int bid_notes(struct dl_phdr_info *info, struct bid_search *b)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            size_t namesz = (nh->n_namesz + 3u) & ~3u, descsz = (nh->n_descsz + 3u) & ~3u;
            const uint8_t *name = p + sizeof *nh, *desc = name + namesz;
            if (desc + descsz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                b->len = nh->n_descsz < b->cap ? nh->n_descsz : b->cap;
                memcpy(b->out, desc, b->len);
                return 1;
            }
            p = desc + descsz;
        }
    }
    return 0;
}

static int bid_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct bid_search *b = data;
    (void)size;
    if (b->addr == 0) { /* the first object dl_iterate_phdr reports is the main executable */
        bid_notes(info, b);
        return 1;
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && b->addr >= lo && b->addr - lo < ph->p_memsz) {
            bid_notes(info, b);
            return 1;
        }
    }
    return 0;
}

size_t tt_build_id_of(uintptr_t addr, uint8_t *out, size_t cap)
{
    struct bid_search b = { out, cap, 0, addr ? addr : 1 };
    dl_iterate_phdr(bid_cb, &b);
    return b.len;
}

size_t tt_build_id_self(uint8_t *out, size_t cap)
{
    struct bid_search b = { out, cap, 0, 0 };
    dl_iterate_phdr(bid_cb, &b);
    return b.len;
}
