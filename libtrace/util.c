/* Clocks and the build identity of the running executable. */
#include <elf.h>
#include <link.h>
#include <string.h>
#include <time.h>

#include "internal.h"

uint64_t tt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool tt_ticks_are_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return true;
#else
    return false;
#endif
}

/* The TSC rate is measured against CLOCK_MONOTONIC between two points, and stored in every
 * manifest so readers can turn ticks into time. A recording takes the first point at open and
 * the second at close, so the rate is measured over the whole run (the longer, the closer);
 * at least @min_ns apart, so a very short run waits out the rest. Invariant TSCs (every x86-64
 * CPU of the last decade) tick at a constant rate whatever the frequency scaling. */
void tt_calib_begin(struct tt_calib *c)
{
    c->ns0 = tt_mono_ns();
    c->t0 = tt_ticks();
}

uint64_t tt_calib_end(const struct tt_calib *c, uint64_t min_ns)
{
    if (!tt_ticks_are_tsc())
        return 1000000000u;
    uint64_t n1, t1;
    do {
        n1 = tt_mono_ns();
        t1 = tt_ticks();
    } while (n1 - c->ns0 < min_ns);
    uint64_t v = (uint64_t)((double)(t1 - c->t0) * 1e9 / (double)(n1 - c->ns0));
    return v ? v : 1;
}

struct bid_search {
    uint8_t *out;
    size_t cap;
    size_t len;
};

static int bid_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct bid_search *b = data;
    (void)size;
    /* the first object dl_iterate_phdr reports is the main executable */
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
    return 1;
}

size_t tt_build_id_self(uint8_t *out, size_t cap)
{
    struct bid_search b = { out, cap, 0 };
    dl_iterate_phdr(bid_cb, &b);
    return b.len;
}
