/* The base layer: what every other layer of the library may use, and nothing that knows of a
 * session, a trace file or a thread buffer.
 *
 * What belongs here: error values (tt_fail fills a tt_error_info), the clock (tt_ticks, the tick
 * rate's calibration, CLOCK_MONOTONIC), the one hash (XXH3, hash.c is the only file that
 * includes xxhash), the running executable's build-id, backtraces and symbol names (unwind.c is
 * the only file that includes libunwind), the per-thread "inside tinytrace" flag, and the
 * compiler hints. A function goes here when two layers need it and it needs nothing above the
 * public headers. Never installed; see docs/ARCHITECTURE.md for the layers.
 */
#ifndef TT_BASE_H
#define TT_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <tinytrace/tinytrace.h>

#define TT_LIKELY(x) __builtin_expect(!!(x), 1)
#define TT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TT_HIDDEN __attribute__((visibility("hidden")))

/* ---- errors (error.c) ----
 * Fills @err (when not NULL) with @code, @sys_errno, @offset (UINT64_MAX: none) and the formatted
 * message, and returns @code. The library never prints: messages travel in tt_error_info. */
int tt_fail(tt_error_info *err, int code, int sys_errno, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- time (util.c) ---- */
static inline uint64_t tt_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}
/* Ticks per second of tt_ticks(), measured between tt_calib_begin and tt_calib_end (which
 * waits until the two are @min_ns apart); 10^9 when the ticks are nanoseconds already. A rate
 * that makes no sense (fewer ticks at the end, or more than 5% off @expect when that is not 0)
 * is measured again over @min_ns on the calling thread. */
struct tt_calib {
    uint64_t ns0, t0;
};
void tt_calib_begin(struct tt_calib *c);
uint64_t tt_calib_end(const struct tt_calib *c, uint64_t min_ns, uint64_t expect);
uint64_t tt_mono_ns(void);
bool tt_ticks_are_tsc(void);

/* ---- hashing (hash.c, the only user of xxhash) ---- */
uint64_t tt_hash64(const void *data, size_t len, uint64_t seed);

/* ---- build identity (util.c) ----
 * Copies the GNU build-id of the main executable; returns its length or 0. */
size_t tt_build_id_self(uint8_t *out, size_t cap);

/* ---- backtraces and symbols (unwind.c, the only user of libunwind) ----
 * A backtrace as text, one frame a line; returns bytes written. */
size_t tt_backtrace(char *buf, size_t cap, int skip);
/* The ASLR-proof name of the function at @addr: "symbol" in the main executable,
 * "libname.so!symbol" elsewhere, "module+0xoffset" without a symbol. */
void tt_symbolize(uintptr_t addr, char *buf, size_t cap);

/* ---- the region (region.c): tinytrace's own address space ----
 * Reserved once by the runtime (tt_region_init, the same size in record and replay); from then
 * on tinytrace maps and allocates there, so the program's heap and mappings are the same in both
 * modes. Before tt_region_init (a program linked with the library, a test), tt_region_map
 * returns NULL and callers mmap as before. Thread-safe, not async-signal-safe. */
bool tt_region_init(size_t size);
bool tt_region_active(void);
bool tt_region_contains(const void *p);
void *tt_region_map(size_t len);             /* zeroed pages, read-write; NULL: none left */
void tt_region_unmap(void *p, size_t len);
void *tt_region_malloc(size_t n);
void *tt_region_calloc(size_t n, size_t k);
void *tt_region_realloc(void *p, size_t n);
void *tt_region_memalign(size_t align, size_t n);
void tt_region_free(void *p);
size_t tt_region_usable(const void *p);

/* ---- the tracer's own threads and calls (util.c) ----
 * Nonzero while tinytrace itself runs on this thread: the swapper holds it for its whole life,
 * the runtime and the interposers while they work. Anything that would record (an interposed
 * malloc, a hook) only forwards when it is set, so the tracer never traces itself. Initial-exec
 * TLS: one %fs-relative load. */
extern __thread int tt_in_tracer TT_HIDDEN;

#endif
