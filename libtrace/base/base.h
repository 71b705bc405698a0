/* SPDX-License-Identifier: MIT */
/* The base layer: what every other layer of the library may use, and nothing that knows of a
 * session, a trace file or a thread buffer.
 *
 * What belongs here: error values (tt_fail fills a tt_error_info), the clock (tt_ticks, the tick
 * rate's calibration, CLOCK_MONOTONIC), the one hash (XXH3, hash.c is the only file that
 * includes xxhash), the running executable's build-id, backtraces and symbol names (unwind.c is
 * the only file that includes the compiler's unwinder), the per-thread "inside tinytrace" flag, the compiler
 * hints, the runtime's own address space (region.c) and the registry of the tracer's own file
 * descriptors (fds.c). A function goes here when two layers need it and it needs nothing above
 * the public headers. Never installed; see docs/ARCHITECTURE.md for the layers.
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
/* A large zero-initialised table that is touched sparsely (a hash map, a reserve): in .lbss,
 * which the linker puts after .bss, so that the small variables a process touches at its start
 * share a few pages instead of each sitting on its own page between two megabyte tables (a
 * page fault each: some 20 of a short traced process's; docs/PERFORMANCE.md, issue 17). Only
 * where .lbss is what it should be: GCC on x86-64 makes it NOBITS, clang makes it PROGBITS (5
 * MB more in the file, and .bss with it), and GCC's AddressSanitizer puts no redzones around
 * a variable in a section of its own. Elsewhere the tables stay in .bss. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define TT_BIG_BSS __attribute__((section(".lbss")))
#else
#define TT_BIG_BSS
#endif

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
/* The process's anchor: the first point any tt_calib_begin took, or one handed down by the
 * process that started this one (the runtime's TT_ENV_RT: a tree's processes share the
 * root's, and the root's is the tool's), which every later tt_calib_begin starts from, so that the rate of a short-lived
 * process is measured over the tree's life and close need not wait out @min_ns. Its ticks
 * are the same TSC's (an anchor whose ticks are ahead of now, a TSC reset, is caught by
 * tt_calib_end, which measures afresh). get: false when there is none (*ns, *ticks 0). */
void tt_calib_anchor_set(uint64_t ns, uint64_t ticks);
bool tt_calib_anchor_get(uint64_t *ns, uint64_t *ticks);
uint64_t tt_calib_end(const struct tt_calib *c, uint64_t min_ns, uint64_t expect);
uint64_t tt_mono_ns(void);
bool tt_ticks_are_tsc(void);
/* Writes all @len bytes of @data at @off of @fd (pwrite, again after EINTR and short writes).
 * Returns 0, or the errno that stopped it (ENOSPC for a write of 0 bytes). */
int tt_pwrite_all(int fd, uint64_t off, const void *data, size_t len);

/* ---- hashing (hash.c, the only user of xxhash) ---- */
uint64_t tt_hash64(const void *data, size_t len, uint64_t seed);

/* ---- build identity (util.c) ----
 * Copies the GNU build-id of the main executable; returns its length or 0. */
size_t tt_build_id_self(uint8_t *out, size_t cap);
/* The GNU build-id of the loaded object that maps address @addr (the program or a library),
 * at most @cap bytes into @out; 0 when it has none or no object maps @addr. */
size_t tt_build_id_of(uintptr_t addr, uint8_t *out, size_t cap);

/* ---- backtraces and symbols (unwind.c, the only user of the compiler's unwinder) ----
 * A backtrace as text, one frame a line; returns bytes written. */
size_t tt_backtrace(char *buf, size_t cap, int skip);
/* The ASLR-proof name of the function at @addr: "symbol" in the main executable,
 * "libname.so!symbol" elsewhere, "module+0xoffset@BUILDID" without a symbol (the module's GNU
 * build-id in hex, where it has one, so that the tool can find its debug file). */
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

/* ---- the tracer's own file descriptors (fds.c) ----
 * A few descriptors that tinytrace holds for a whole run (the writer's trace file), kept out of
 * the program's way: the preload library's fd family (instrument/preload/fdguard.c) answers the
 * program's close, close_range, closefrom, dup2, dup3, dup and fcntl on a reserved number as if
 * the number were not open. A reservation belongs to the process that made it: a fork child's
 * copy of a reserved descriptor is its own.
 *
 * The owner's move function, called by tt_fd_move when the program puts a file on number @fd
 * (dup2, dup3): it moves its descriptor elsewhere (tt_fd_high), switches to the new number and
 * tells the registry (tt_fd_swap), and closes @fd; or, when it cannot, lets @fd go (closes it,
 * tt_fd_swap to -1) and returns the errno. It is called with the registry's lock held: it may
 * take the owner's own locks, and the owner never calls tt_fd_reserve or tt_fd_release while
 * holding one of those. */
#define TT_FD_SLOTS 8
typedef int (*tt_fd_move_fn)(void *ctx, int fd);
/* Reserves @fd for this process; returns the slot (the handle for tt_fd_swap and tt_fd_release),
 * or -1 when every slot is taken (the descriptor is then not protected). @ctx stays the caller's:
 * it must stay valid until tt_fd_release. Thread-safe; not async-signal-safe. */
int tt_fd_reserve(int fd, tt_fd_move_fn move, void *ctx);
/* The owner's descriptor of @slot is @fd now (-1: it has none). Lock-free: the owner may call it
 * under its own locks, from its move function or not. Only the slot's owner calls it. */
void tt_fd_swap(int slot, int fd);
/* Ends the reservation of @slot; waits for a move of it in progress, so after it no move function
 * of the slot runs and the owner may close the descriptor and free @ctx. Thread-safe. */
void tt_fd_release(int slot);
/* Whether this process has @fd reserved. Lock-free and async-signal-safe. */
bool tt_fd_is_reserved(int fd);
/* The numbers in [@first, @last] this process has reserved, ascending, into @out (at most @cap);
 * returns how many. Lock-free and async-signal-safe. */
size_t tt_fd_reserved_in(unsigned first, unsigned last, int *out, size_t cap);
/* In a fork child that traces on its own (the process tree): closes this process's copies of
 * the descriptors its parent reserved (the parent's trace file, whose lock must end with the
 * parent), all but @keep (@nkeep of them, the inherited settings and report channel), and frees
 * their slots. One thread, no lock held: called before the child runs anything else. */
void tt_fd_drop_inherited(const int *keep, int nkeep);
/* Asks the owner of reserved @fd to move its descriptor off that number (the move function
 * above); returns 0 (moved, or @fd was not reserved), or the errno of a move that failed (the
 * owner let the number go). Thread-safe; not async-signal-safe. */
int tt_fd_move(int fd);
/* What a move function does with its descriptor @fd of @slot, under its owner's lock: a
 * duplicate on a high number (tt_fd_high) takes its place in the registry, and @fd is closed.
 * Returns the new number, or -1 with errno when none was free: then @fd is closed all the
 * same (the number goes, so that the program's dup2 finds what it would have found) and the
 * slot holds no number. */
int tt_fd_relocate(int slot, int fd);
/* A duplicate of @fd with FD_CLOEXEC on a high number: the lowest free one from a little below
 * min(soft RLIMIT_NOFILE, 1024), else the lowest above 2. Returns it, or -1 with errno (EMFILE:
 * no number free); @fd stays open. */
int tt_fd_high(int fd);

/* ---- the next definition of a name, as dlsym(RTLD_NEXT) finds it (dso.c) ----
 * The objects loaded after one object, with their dynamic symbol tables, for many look-ups at
 * the cost of one each. Meant for startup (a constructor), when they are the global scope
 * after it. Building the scope is not async-signal-safe (dl_iterate_phdr); a look-up is, as
 * long as the objects it reads stay loaded. */
#define TT_DSO_MAX 64
struct tt_dso {
    uintptr_t base;
    const void *sym;         /* DT_SYMTAB */
    const char *str;         /* DT_STRTAB */
    const uint16_t *versym;  /* DT_VERSYM, or NULL */
    const uint32_t *gnu;     /* DT_GNU_HASH */
    const char *name;
    bool newest;             /* dlsym(RTLD_NEXT) takes a name's default version (glibc 2.36+) */
};
struct tt_dso_scope {
    uint32_t n;
    struct tt_dso obj[TT_DSO_MAX];
};
enum { TT_DSO_FOUND, TT_DSO_NONE, TT_DSO_ASK };
/* The objects after the one that holds @self. False when one of them cannot be searched
 * (no GNU hash table) or there are too many: then only dlsym can answer. */
bool tt_dso_scope_after(struct tt_dso_scope *sc, const void *self);
/* TT_DSO_FOUND with *@out the function dlsym(RTLD_NEXT, @name) would return (and *@which, if
 * not NULL, the index of its object in @sc); TT_DSO_NONE when no object of @sc defines @name;
 * TT_DSO_ASK when the answer is the loader's to give (a name defined in more than one object,
 * with several versions before glibc 2.36, an IFUNC but on x86-64, anything but a visible
 * function). An IFUNC's answer is its resolver's, which this calls, as dlsym does. */
int tt_dso_find(const struct tt_dso_scope *sc, const char *name, void **out, uint32_t *which);
/* The same in one object alone: what it defines, not what the scope's order would pick. */
int tt_dso_find_in(const struct tt_dso *d, const char *name, void **out);
/* How many objects of @sc may define @name, by their bloom filters alone (one that says no does
 * not; one that says yes may); *@which is the last of them. For tests: what the tables add. */
uint32_t tt_dso_maybe(const struct tt_dso_scope *sc, const char *name, uint32_t *which);
/* Whether object @k of @sc is the only one that may define @name: its bloom filter lets it, and
 * every other object rules the name out, by its bloom filter or else by its table (a bloom
 * filter's false positive is checked, not taken for a definition). When it is and @out is not
 * NULL, *@out is tt_dso_find_in's answer in object @k when that is TT_DSO_FOUND, else NULL. */
bool tt_dso_only(const struct tt_dso_scope *sc, const char *name, uint32_t k, void **out);

/* ---- the tracer's own threads and calls (util.c) ----
 * Nonzero while tinytrace itself runs on this thread: the swapper holds it for its whole life,
 * the runtime and the interposers while they work. Anything that would record (an interposed
 * malloc, a hook) only forwards when it is set, so the tracer never traces itself. Initial-exec
 * TLS: one %fs-relative load. */
extern __thread int tt_in_tracer TT_HIDDEN;

#endif
