/* The interposed environment of libtinytrace-preload.so.
 *
 * An unmodified program run under `tinytrace record` reads its environment through a handful
 * of libc calls: clocks, random bytes, bytes from pipes, sockets and terminals, its pid and host
 * name. Each of those calls is interposed here (the real function is found with
 * dlsym(RTLD_NEXT)) and becomes an io event in the *in* direction; under `tinytrace replay` the
 * call does not reach the real clock, random source, fd or peer at all, and returns what the
 * recording holds. The program's writes to stdout and stderr become *out* events when
 * TINYTRACE_CHECK_OUTPUT is set; allocations become alloc/free events when TINYTRACE_ALLOC is.
 *
 * What an event holds. Every input call records one io IN event on its channel (TT_CH_*), with
 * the call's name interned as the event's *site*, so a replay that reaches clock_gettime where
 * the recording had read stops there, naming both. The payload is a fixed head (struct in_head:
 * return value, errno, data length, flags, address length), then for recvfrom/recvmsg a fixed
 * NAME_CAP-byte address area, then the data. Data beyond PIECE bytes continues in further
 * events of the same channel and site, so no event outgrows the smallest max_event
 * (TINYTRACE_MAX_EVENT_MB is at least 1 MiB). Because the layout is fixed, the replay asks for
 * exactly head + area + the caller's buffer size, and a recording that returned more than the
 * replayed call can take is a divergence of length, found by the replayer.
 *
 * Which reads are inputs. read/readv/recv* are recorded when fstat says the fd is a socket, a
 * FIFO or a character device (terminals, /dev/null, /dev/urandom …); reads of regular files are
 * the program's input files and pass through untouched. Fds opened on /dev/urandom or
 * /dev/random are remembered, so their reads go to TT_CH_RANDOM instead of TT_CH_READ.
 *
 * stdio. glibc's stdio calls its internal read and write, which no interposer sees. So stdin,
 * when it is a pipe, socket or terminal, is replaced at start by a fopencookie stream whose read
 * function is the interposed read (its buffer size and line mode are chosen as glibc would
 * have: st_blksize, line-buffered on a terminal; its fileno is kept); stdout and stderr are
 * replaced the same way when output is checked; and fopen of /dev/urandom and /dev/random
 * returns such a stream too. libstdc++'s std::cin/cout/cerr hold glibc's original FILEs, so the
 * handful of stdio functions libstdc++ calls on them (fread, getc, ungetc, fwrite, putc, fputc,
 * fputs, fflush) redirect the original streams to their replacements. glibc makes such
 * streams byte-only, so the wide-character functions are rebuilt over bytes on them (below).
 *
 * Output. What reaches fds 1 and 2 (through write, writev or the stdio streams) is cut into
 * segments by content alone — a segment ends after a newline or at SEG_MAX bytes — and each
 * segment is one io OUT event. So a recording made on a terminal (line-buffered stdout) replays
 * against a pipe (block-buffered) without a false divergence. A last segment without newline is
 * emitted by the destructor below.
 *
 * Allocations. realloc is recorded as a free of the old block (when there was one) followed by
 * an alloc of the new size, both at site "realloc"; free(NULL) records nothing; a failed
 * allocation records its size with address 0. Replay compares sizes and sites. When
 * TINYTRACE_ALLOC is not set, the malloc family is one branch and a tail call to the real one.
 * dlsym may itself allocate before the real calloc is known: such requests are served from a
 * small static arena, whose blocks are never freed.
 *
 * Every interposer takes the per-thread nesting guard first and only forwards when it is held
 * (tinytrace itself, its swapper thread, a signal handler inside tinytrace), or when there is no
 * session (not traced, a forked child, after exit began).
 */
/* Both symbols of each pair (open and open64, fopen and fopen64, …) are defined here, so the
 * headers must not redirect one name to the other. */
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "runtime.h"

#define TT_EXPORT __attribute__((visibility("default")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* glibc's fortified entry points: called instead of read & co. by programs built with
 * _FORTIFY_SOURCE, and reaching the kernel through glibc's internal aliases. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *addrlen);
int __gethostname_chk(char *name, size_t len, size_t buflen);
_Noreturn void __chk_fail(void);

/* ---------------------------------------------------------------- the real functions */

typedef void (*fnptr)(void);

#define REAL_FUNCS(X)                                                                          \
    X(malloc) X(calloc) X(realloc) X(free) X(posix_memalign) X(aligned_alloc) X(memalign)      \
    X(valloc) X(pvalloc) X(reallocarray)                                                       \
    X(clock_gettime) X(gettimeofday) X(time) X(timespec_get) X(clock)                          \
    X(getrandom) X(getentropy) X(arc4random) X(arc4random_buf) X(arc4random_uniform)           \
    X(open) X(open64) X(openat) X(openat64) X(close) X(fopen) X(fopen64)                       \
    X(read) X(readv) X(recv) X(recvfrom) X(recvmsg) X(write) X(writev)                         \
    X(getpid) X(gethostname) X(uname) X(kill) X(syscall)                                       \
    X(fwrite) X(fputc) X(putc) X(fputs) X(fflush) X(fread) X(getc) X(ungetc)                  \
    X(fgetwc) X(getwc) X(getwchar) X(fgetwc_unlocked) X(getwc_unlocked) X(getwchar_unlocked)   \
    X(fgetws) X(fgetws_unlocked) X(__fgetws_chk) X(__fgetws_unlocked_chk) X(ungetwc)           \
    X(fputwc) X(putwc) X(putwchar) X(fputwc_unlocked) X(putwc_unlocked) X(putwchar_unlocked)   \
    X(fputws) X(fputws_unlocked) X(vfwprintf) X(__vfwprintf_chk) X(vfwscanf)                   \
    X(__isoc99_vfwscanf) X(fwide)

enum real_fn {
#define X(n) RF_##n,
    REAL_FUNCS(X)
#undef X
    RF_COUNT_
};

static const char *const real_names[RF_COUNT_] = {
#define X(n) #n,
    REAL_FUNCS(X)
#undef X
};

/* Written once per function (by whichever thread gets there first, all with the same value);
 * relaxed is enough: the pointer leads to code, not to data another thread published. */
static _Atomic(fnptr) real_tab[RF_COUNT_];

/* Set while this thread is inside dlsym: its allocations come from the bootstrap arena. */
static __thread int in_dlsym;

static fnptr lookup(enum real_fn id)
{
    in_dlsym++;
    void *p = dlsym(RTLD_NEXT, real_names[id]);
    in_dlsym--;
    fnptr f = NULL;
    if (p) {
        memcpy(&f, &p, sizeof f); /* ISO C has no cast from object to function pointer */
        atomic_store_explicit(&real_tab[id], f, memory_order_relaxed);
    }
    return f;
}

static fnptr resolve(enum real_fn id)
{
    fnptr f = lookup(id);
    if (!f) {
        /* the program called a function that no library after us defines: nothing sane to do */
        dprintf(2, "tinytrace: preload: no real %s after this library\n", real_names[id]);
        abort();
    }
    return f;
}

static inline fnptr real_fn(enum real_fn id)
{
    fnptr f = atomic_load_explicit(&real_tab[id], memory_order_relaxed);
    return f ? f : resolve(id);
}

#define REAL(name, type) ((type)real_fn(RF_##name))

/* ---------------------------------------------------------------- sites */

#define SITES(X)                                                                               \
    X(clock_gettime) X(gettimeofday) X(time) X(timespec_get) X(clock)                          \
    X(getrandom) X(getentropy) X(arc4random) X(arc4random_buf) X(arc4random_uniform)           \
    X(read) X(readv) X(recv) X(recvfrom) X(recvmsg)                                            \
    X(getpid) X(gethostname) X(uname) X(write)                                                 \
    X(malloc) X(calloc) X(realloc) X(free) X(posix_memalign) X(aligned_alloc) X(memalign)      \
    X(valloc) X(pvalloc) X(reallocarray)

/* clock_gettime on a clock other than CLOCK_REALTIME: the clock is part of the site, so a
 * replay that reads another clock than the recording did diverges (dynamic CPU-time clocks,
 * whose ids differ from run to run, share one site) */
#define CLOCK_SITES(Y)                                                                         \
    Y(clock_monotonic, "clock_gettime(CLOCK_MONOTONIC)")                                       \
    Y(clock_process_cputime, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)")                       \
    Y(clock_thread_cputime, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)")                         \
    Y(clock_monotonic_raw, "clock_gettime(CLOCK_MONOTONIC_RAW)")                               \
    Y(clock_realtime_coarse, "clock_gettime(CLOCK_REALTIME_COARSE)")                           \
    Y(clock_monotonic_coarse, "clock_gettime(CLOCK_MONOTONIC_COARSE)")                         \
    Y(clock_boottime, "clock_gettime(CLOCK_BOOTTIME)")                                         \
    Y(clock_realtime_alarm, "clock_gettime(CLOCK_REALTIME_ALARM)")                             \
    Y(clock_boottime_alarm, "clock_gettime(CLOCK_BOOTTIME_ALARM)")                             \
    Y(clock_tai, "clock_gettime(CLOCK_TAI)")                                                   \
    Y(clock_other, "clock_gettime(another clock)")

enum site {
#define X(n) S_##n,
#define Y(n, name) S_##n,
    SITES(X) CLOCK_SITES(Y)
#undef X
#undef Y
    S_COUNT_
};

static const char *const site_names[S_COUNT_] = {
#define X(n) #n,
#define Y(n, name) name,
    SITES(X) CLOCK_SITES(Y)
#undef X
#undef Y
};

static enum site clock_site(clockid_t clk)
{
    switch (clk) {
    case CLOCK_REALTIME: return S_clock_gettime;
    case CLOCK_MONOTONIC: return S_clock_monotonic;
    case CLOCK_PROCESS_CPUTIME_ID: return S_clock_process_cputime;
    case CLOCK_THREAD_CPUTIME_ID: return S_clock_thread_cputime;
    case CLOCK_MONOTONIC_RAW: return S_clock_monotonic_raw;
    case CLOCK_REALTIME_COARSE: return S_clock_realtime_coarse;
    case CLOCK_MONOTONIC_COARSE: return S_clock_monotonic_coarse;
    case CLOCK_BOOTTIME: return S_clock_boottime;
    case CLOCK_REALTIME_ALARM: return S_clock_realtime_alarm;
    case CLOCK_BOOTTIME_ALARM: return S_clock_boottime_alarm;
    case CLOCK_TAI: return S_clock_tai;
    default: return S_clock_other;
    }
}

/* Interned once per site and session (there is one session per process); relaxed: every
 * thread that interns computes the same id. */
static _Atomic uint32_t site_ids[S_COUNT_];

static uint32_t site_id(tt_session *s, enum site k)
{
    uint32_t id = atomic_load_explicit(&site_ids[k], memory_order_relaxed);
    if (UNLIKELY(!id)) {
        if (tt_intern(s, TT_OBJ_SITE, site_names[k], &id) != TT_OK)
            return 0;
        atomic_store_explicit(&site_ids[k], id, memory_order_relaxed);
    }
    return id;
}

/* ---------------------------------------------------------------- common parts */

/* The session with the guard taken, or NULL (guard not taken): then only forward. A session in
 * off mode counts as none: its calls record nothing and replay nothing. */
static inline tt_session *enter(void)
{
    if (!tt_rt_guard_enter())
        return NULL;
    tt_session *s = tt_rt_session();
    if (!tt_active_(s)) {
        tt_rt_guard_leave();
        return NULL;
    }
    return s;
}

static inline bool recording(tt_session *s)
{
    return tt_session_mode(s) == TT_MODE_RECORD;
}

static int io_event(tt_session *s, tt_io_dir dir, uint32_t channel, enum site k, void *buf,
                    size_t len, size_t *out_len)
{
    /* tt_io with a site: replay then names the call that was expected */
    tt_event ev = { .kind = TT_EV_IO, .dir = (uint8_t)dir, .arg = channel,
                    .sp = { 0, site_id(s, k) }, .payload_len = len, .payload = buf };
    return tt_event_full_(s, &ev, buf, len, out_len);
}

#define NAME_CAP 128u               /* sizeof(struct sockaddr_storage) */
#define PIECE (512u * 1024)         /* data bytes per event */

struct in_head {
    int64_t ret;        /* the call's return value */
    uint64_t len;       /* data bytes, over this event and its continuations */
    int32_t err;        /* errno when the call failed, else 0 */
    uint32_t flags;     /* recvmsg: msg_flags */
    uint32_t namelen;   /* recvfrom/recvmsg: the address length the kernel returned */
    uint32_t namebytes; /* bytes of the address area that hold the address */
};

/* A walk over an iovec, for gathering (record) and scattering (replay). */
struct cursor {
    const struct iovec *iov;
    int cnt, i;
    size_t off;
};

static size_t iov_total(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    return n;
}

/* Copies @n bytes between the cursor's buffers and @p; @to_iov says which way. */
static void cursor_copy(struct cursor *c, char *p, size_t n, bool to_iov)
{
    while (n && c->i < c->cnt) {
        size_t room = c->iov[c->i].iov_len - c->off;
        size_t k = n < room ? n : room;
        char *q = (char *)c->iov[c->i].iov_base + c->off;
        if (k) {
            if (to_iov)
                memcpy(q, p, k);
            else
                memcpy(p, q, k);
        }
        p += k;
        n -= k;
        c->off += k;
        if (c->off == c->iov[c->i].iov_len) {
            c->i++;
            c->off = 0;
        }
    }
}

/* A scratch buffer: on the stack when small, else from the real malloc (the guard is held). */
struct scratch {
    char *p;
    char small[1024];
};

static char *scratch_get(struct scratch *b, size_t n)
{
    b->p = n <= sizeof b->small ? b->small : malloc(n);
    return b->p;
}

static void scratch_put(struct scratch *b)
{
    if (b->p && b->p != b->small)
        free(b->p);
}

/* Record: head, address area (when @name_area), then the data gathered from @iov. */
static int in_record(tt_session *s, uint32_t ch, enum site k, const struct in_head *h,
                     bool name_area, const void *name, const struct iovec *iov, int cnt)
{
    size_t area = name_area ? NAME_CAP : 0;
    size_t first = h->len < PIECE ? (size_t)h->len : PIECE;
    size_t need = sizeof *h + area + first;
    struct scratch sb;
    char *buf = scratch_get(&sb, need);
    if (!buf)
        return TT_E_NOMEM;
    memcpy(buf, h, sizeof *h);
    if (area) {
        memset(buf + sizeof *h, 0, area);
        if (h->namebytes)
            memcpy(buf + sizeof *h, name, h->namebytes);
    }
    struct cursor c = { iov, cnt, 0, 0 };
    cursor_copy(&c, buf + sizeof *h + area, first, false);
    int rc = io_event(s, TT_IO_IN, ch, k, buf, need, NULL);
    for (uint64_t done = first; rc == TT_OK && done < h->len;) {
        size_t n = h->len - done < PIECE ? (size_t)(h->len - done) : PIECE;
        cursor_copy(&c, buf, n, false);
        rc = io_event(s, TT_IO_IN, ch, k, buf, n, NULL);
        done += n;
    }
    scratch_put(&sb);
    return rc;
}

/* Replay: fills *@h and the address area (NAME_CAP bytes at @name, when @name_area), and
 * scatters the recorded data into @iov. A recording that holds more than @iov can take is a
 * length divergence, found by the replayer. */
static int in_replay(tt_session *s, uint32_t ch, enum site k, struct in_head *h, bool name_area,
                     void *name, const struct iovec *iov, int cnt)
{
    size_t area = name_area ? NAME_CAP : 0;
    size_t room = iov_total(iov, cnt);
    size_t first_cap = room < PIECE ? room : PIECE;
    size_t cap = sizeof *h + area + first_cap;
    struct scratch sb;
    char *buf = scratch_get(&sb, cap);
    if (!buf)
        return TT_E_NOMEM;
    size_t got = 0;
    int rc = io_event(s, TT_IO_IN, ch, k, buf, cap, &got);
    if (rc != TT_OK)
        goto out;
    if (got < sizeof *h) {
        rc = TT_E_CORRUPT;
        goto out;
    }
    memcpy(h, buf, sizeof *h);
    size_t first = h->len < PIECE ? (size_t)h->len : PIECE;
    if (h->namebytes > area || got != sizeof *h + area + first) {
        rc = TT_E_CORRUPT;
        goto out;
    }
    if (area)
        memcpy(name, buf + sizeof *h, area);
    struct cursor c = { iov, cnt, 0, 0 };
    cursor_copy(&c, buf + sizeof *h + area, first, true);
    for (uint64_t done = first; done < h->len;) {
        size_t want = h->len - done < PIECE ? (size_t)(h->len - done) : PIECE;
        size_t left = done < room ? room - (size_t)done : 0;
        size_t ask = want < left ? want : left;
        rc = io_event(s, TT_IO_IN, ch, k, buf, ask, &got);
        if (rc != TT_OK)
            goto out;
        if (got != want) {
            rc = TT_E_CORRUPT;
            goto out;
        }
        cursor_copy(&c, buf, want, true);
        done += want;
    }
out:
    scratch_put(&sb);
    return rc;
}

/* The common shape of an input call whose data is an iovec and that has no address.
 * Returns true when *@h holds a result (recorded now, or replayed); false when the replay failed
 * and the runtime let the program go on: then the caller makes the real call. */
static bool in_simple(tt_session *s, uint32_t ch, enum site k, struct in_head *h,
                      const struct iovec *iov, int cnt)
{
    int rc = recording(s) ? in_record(s, ch, k, h, false, NULL, iov, cnt)
                          : in_replay(s, ch, k, h, false, NULL, iov, cnt);
    if (rc == TT_OK)
        return true;
    tt_rt_failed(rc, site_names[k]);
    return recording(s);
}

/* Ends an interposed call: guard released, errno as the call left it. */
static inline int64_t finish(const struct in_head *h, int saved_errno)
{
    tt_rt_guard_leave();
    errno = h->ret < 0 ? h->err : saved_errno;
    return h->ret;
}

/* ---------------------------------------------------------------- clocks */

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *restrict, void *restrict);
typedef time_t (*time_fn)(time_t *);
typedef int (*timespec_get_fn)(struct timespec *, int);
typedef clock_t (*clock_fn)(void);

TT_EXPORT int clock_gettime(clockid_t clk, struct timespec *ts)
{
    clock_gettime_fn f = REAL(clock_gettime, clock_gettime_fn);
    tt_session *s = enter();
    if (!s)
        return f(clk, ts);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { ts, sizeof *ts }; /* glibc declares ts nonnull */
    if (recording(s)) {
        h.ret = f(clk, ts);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? v.iov_len : 0;
    }
    if (!in_simple(s, TT_CH_CLOCK, clock_site(clk), &h, &v, 1)) {
        h.ret = f(clk, ts);
        h.err = errno;
    }
    return (int)finish(&h, e0);
}

TT_EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    gettimeofday_fn f = REAL(gettimeofday, gettimeofday_fn);
    tt_session *s = enter();
    if (!s)
        return f(tv, tz);
    int e0 = errno;
    struct in_head h = { 0 };
    /* tv may be NULL (gettimeofday(NULL, &tz) asks for the zone only; the kernel and the vDSO
     * accept it), but glibc declares it nonnull: hide it from the optimizer before testing */
    struct timeval *tvp = tv;
    __asm__("" : "+r"(tvp));
    struct iovec v[2] = { { tvp, tvp ? sizeof *tv : 0 },
                          { tz, tz ? sizeof(struct timezone) : 0 } };
    if (recording(s)) {
        h.ret = f(tv, tz);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? iov_total(v, 2) : 0;
    }
    if (!in_simple(s, TT_CH_CLOCK, S_gettimeofday, &h, v, 2)) {
        h.ret = f(tv, tz);
        h.err = errno;
    }
    return (int)finish(&h, e0);
}

TT_EXPORT time_t time(time_t *t)
{
    time_fn f = REAL(time, time_fn);
    tt_session *s = enter();
    if (!s)
        return f(t);
    int e0 = errno;
    struct in_head h = { 0 };
    if (recording(s)) {
        h.ret = f(NULL);
        h.err = h.ret == -1 ? errno : 0;
    }
    if (!in_simple(s, TT_CH_CLOCK, S_time, &h, NULL, 0)) {
        h.ret = f(NULL);
        h.err = errno;
    }
    if (t)
        *t = (time_t)h.ret;
    return (time_t)finish(&h, e0);
}

TT_EXPORT int timespec_get(struct timespec *ts, int base)
{
    timespec_get_fn f = REAL(timespec_get, timespec_get_fn);
    tt_session *s = enter();
    if (!s)
        return f(ts, base);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { ts, sizeof *ts };
    if (recording(s)) {
        h.ret = f(ts, base);
        h.len = h.ret != 0 ? sizeof *ts : 0;
    }
    if (!in_simple(s, TT_CH_CLOCK, S_timespec_get, &h, &v, 1))
        h.ret = f(ts, base);
    return (int)finish(&h, e0);
}

TT_EXPORT clock_t clock(void)
{
    clock_fn f = REAL(clock, clock_fn);
    tt_session *s = enter();
    if (!s)
        return f();
    int e0 = errno;
    struct in_head h = { 0 };
    if (recording(s))
        h.ret = f();
    if (!in_simple(s, TT_CH_CLOCK, S_clock, &h, NULL, 0))
        h.ret = f();
    /* clock() reports failure as (clock_t)-1 without errno: keep the caller's */
    tt_rt_guard_leave();
    errno = e0;
    return (clock_t)h.ret;
}

/* ---------------------------------------------------------------- random bytes */

typedef ssize_t (*getrandom_fn)(void *, size_t, unsigned);
typedef int (*getentropy_fn)(void *, size_t);
typedef uint32_t (*arc4random_fn)(void);
typedef void (*arc4random_buf_fn)(void *, size_t);
typedef uint32_t (*arc4random_uniform_fn)(uint32_t);

TT_EXPORT ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    getrandom_fn f = REAL(getrandom, getrandom_fn);
    tt_session *s = enter();
    if (!s)
        return f(buf, n, flags);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { buf, n };
    if (recording(s)) {
        h.ret = f(buf, n, flags);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret > 0 ? (uint64_t)h.ret : 0;
    }
    if (!in_simple(s, TT_CH_RANDOM, S_getrandom, &h, &v, 1)) {
        h.ret = f(buf, n, flags);
        h.err = errno;
    }
    return (ssize_t)finish(&h, e0);
}

TT_EXPORT int getentropy(void *buf, size_t n)
{
    getentropy_fn f = REAL(getentropy, getentropy_fn);
    tt_session *s = enter();
    if (!s)
        return f(buf, n);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { buf, n };
    if (recording(s)) {
        h.ret = f(buf, n);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? n : 0;
    }
    if (!in_simple(s, TT_CH_RANDOM, S_getentropy, &h, &v, 1)) {
        h.ret = f(buf, n);
        h.err = errno;
    }
    return (int)finish(&h, e0);
}

TT_EXPORT uint32_t arc4random(void)
{
    arc4random_fn f = REAL(arc4random, arc4random_fn);
    tt_session *s = enter();
    if (!s)
        return f();
    uint32_t r = 0;
    struct in_head h = { .len = sizeof r };
    struct iovec v = { &r, sizeof r };
    if (recording(s))
        r = f();
    if (!in_simple(s, TT_CH_RANDOM, S_arc4random, &h, &v, 1))
        r = f();
    tt_rt_guard_leave();
    return r;
}

TT_EXPORT void arc4random_buf(void *buf, size_t n)
{
    arc4random_buf_fn f = REAL(arc4random_buf, arc4random_buf_fn);
    tt_session *s = enter();
    if (!s) {
        f(buf, n);
        return;
    }
    struct in_head h = { .len = n };
    struct iovec v = { buf, n };
    if (recording(s))
        f(buf, n);
    if (!in_simple(s, TT_CH_RANDOM, S_arc4random_buf, &h, &v, 1))
        f(buf, n);
    tt_rt_guard_leave();
}

TT_EXPORT uint32_t arc4random_uniform(uint32_t bound)
{
    arc4random_uniform_fn f = REAL(arc4random_uniform, arc4random_uniform_fn);
    tt_session *s = enter();
    if (!s)
        return f(bound);
    uint32_t r = 0;
    struct in_head h = { .len = sizeof r };
    struct iovec v = { &r, sizeof r };
    if (recording(s))
        r = f(bound);
    if (!in_simple(s, TT_CH_RANDOM, S_arc4random_uniform, &h, &v, 1))
        r = f(bound);
    tt_rt_guard_leave();
    return r;
}

/* ---------------------------------------------------------------- which fds are inputs */

/* Fds opened on /dev/urandom or /dev/random. Only the channel depends on it (a character
 * device is recorded anyway), so an fd beyond the map is still recorded, as TT_CH_READ. */
#define RANDFD_MAX 4096
static _Atomic uint64_t randfd[RANDFD_MAX / 64];

static bool is_random_path(const char *path)
{
    return path && (!strcmp(path, "/dev/urandom") || !strcmp(path, "/dev/random"));
}

static void fd_mark(int fd, bool random)
{
    if (fd < 0 || fd >= RANDFD_MAX)
        return;
    uint64_t bit = 1ull << (fd % 64);
    /* relaxed: the map is a hint for the channel; an fd is opened and read by the program's
     * own ordering, which already orders these */
    if (random)
        atomic_fetch_or_explicit(&randfd[fd / 64], bit, memory_order_relaxed);
    else if (atomic_load_explicit(&randfd[fd / 64], memory_order_relaxed) & bit)
        atomic_fetch_and_explicit(&randfd[fd / 64], ~bit, memory_order_relaxed);
}

static bool fd_is_random(int fd)
{
    return fd >= 0 && fd < RANDFD_MAX &&
           (atomic_load_explicit(&randfd[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

/* The channel of a read from @fd, or 0 when the read is not an input (a regular file, a
 * directory, an anonymous inode such as an eventfd, a bad fd). */
static uint32_t fd_channel(int fd, bool recv_call)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return 0;
    if (S_ISCHR(st.st_mode) && fd_is_random(fd))
        return TT_CH_RANDOM;
    if (S_ISSOCK(st.st_mode))
        return recv_call ? TT_CH_RECV : TT_CH_READ;
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))
        return recv_call ? 0 : TT_CH_READ;
    return 0;
}

/* ---------------------------------------------------------------- reads */

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*readv_fn)(int, const struct iovec *, int);
typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*recvfrom_fn)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t (*recvmsg_fn)(int, struct msghdr *, int);

enum in_kind { IN_READ, IN_READV, IN_RECV, IN_RECVFROM, IN_RECVMSG };

struct in_args {
    enum in_kind kind;
    int fd, flags;
    void *buf;                  /* read, recv, recvfrom */
    size_t len;
    const struct iovec *iov;    /* readv */
    int iovcnt;
    struct sockaddr *addr;      /* recvfrom */
    socklen_t *addrlen;
    struct msghdr *msg;         /* recvmsg */
};

static const enum site in_sites[] = { S_read, S_readv, S_recv, S_recvfrom, S_recvmsg };

static ssize_t in_real(const struct in_args *a)
{
    switch (a->kind) {
    case IN_READ:
        return REAL(read, read_fn)(a->fd, a->buf, a->len);
    case IN_READV:
        return REAL(readv, readv_fn)(a->fd, a->iov, a->iovcnt);
    case IN_RECV:
        return REAL(recv, recv_fn)(a->fd, a->buf, a->len, a->flags);
    case IN_RECVFROM:
        return REAL(recvfrom, recvfrom_fn)(a->fd, a->buf, a->len, a->flags, a->addr, a->addrlen);
    case IN_RECVMSG:
        return REAL(recvmsg, recvmsg_fn)(a->fd, a->msg, a->flags);
    }
    errno = EINVAL;
    return -1;
}

/* recv* with MSG_TRUNC on a stream socket discards the bytes: nothing reaches the buffer
 * (which may be NULL), so there is nothing to record or to hand back. */
static bool discards(const struct in_args *a)
{
    int type;
    socklen_t l = sizeof type;
    return (a->flags & MSG_TRUNC) && a->kind != IN_READ && a->kind != IN_READV &&
           getsockopt(a->fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_STREAM;
}

static ssize_t in_call(const struct in_args *a)
{
    tt_session *s = enter();
    if (!s)
        return in_real(a);
    bool is_recv = a->kind == IN_RECV || a->kind == IN_RECVFROM || a->kind == IN_RECVMSG;
    uint32_t ch = fd_channel(a->fd, is_recv);
    if (!ch) {
        tt_rt_guard_leave();
        return in_real(a);
    }
    enum site k = in_sites[a->kind];
    int e0 = errno;

    struct iovec one = { a->buf, a->len };
    const struct iovec *iov = &one;
    int cnt = 1;
    void *name = NULL;
    socklen_t *namelen = NULL;
    if (a->kind == IN_READV) {
        iov = a->iov;
        cnt = a->iovcnt;
    } else if (a->kind == IN_RECVFROM) {
        name = a->addr;
        namelen = a->addrlen;
    } else if (a->kind == IN_RECVMSG) {
        iov = a->msg->msg_iov;
        cnt = (int)a->msg->msg_iovlen;
        name = a->msg->msg_name;
        namelen = &a->msg->msg_namelen;
    }
    bool area = a->kind == IN_RECVFROM || a->kind == IN_RECVMSG;
    socklen_t name_room = name && namelen ? *namelen : 0;
    if (cnt < 0 || (cnt > 0 && !iov)) {
        tt_rt_guard_leave();
        return in_real(a); /* let the real call report the bad argument; nothing is read */
    }

    struct in_head h = { 0 };
    int rc;
    if (recording(s)) {
        /* The real call may block: not under the guard, or a handler that siglongjmps out of
         * it (alarm timeouts) leaves the guard held and the rest of the thread unrecorded. */
        tt_rt_guard_leave();
        ssize_t r = in_real(a);
        int real_errno = errno;
        if (!(s = enter())) {
            errno = real_errno;
            return r;
        }
        errno = real_errno;
        h.ret = r;
        h.err = r < 0 ? errno : 0;
        /* recv with MSG_TRUNC returns a datagram's full length, more than was copied */
        size_t room = iov_total(iov, cnt);
        h.len = r > 0 && !discards(a) ? ((size_t)r < room ? (uint64_t)r : room) : 0;
        if (area && r >= 0 && namelen) {
            h.namelen = *namelen;
            size_t nb = h.namelen < name_room ? h.namelen : name_room;
            h.namebytes = (uint32_t)(nb < NAME_CAP ? nb : NAME_CAP);
        }
        if (a->kind == IN_RECVMSG && r >= 0)
            h.flags = (uint32_t)a->msg->msg_flags;
        rc = in_record(s, ch, k, &h, area, name, iov, cnt);
        if (rc != TT_OK)
            tt_rt_failed(rc, site_names[k]);
    } else {
        char addr[NAME_CAP];
        rc = in_replay(s, ch, k, &h, area, addr, iov, cnt);
        if (rc != TT_OK) {
            tt_rt_failed(rc, site_names[k]);
            tt_rt_guard_leave();
            return in_real(a);
        }
        if (area && h.ret >= 0 && namelen) {
            if (name) {
                size_t nb = h.namebytes < name_room ? h.namebytes : name_room;
                memcpy(name, addr, nb);
            }
            *namelen = h.namelen;
        }
        if (a->kind == IN_RECVMSG && h.ret >= 0) {
            a->msg->msg_flags = (int)h.flags;
            a->msg->msg_controllen = 0; /* control data (fds, credentials) is not replayed */
        }
    }
    return (ssize_t)finish(&h, e0);
}

static ssize_t in_read_fd(int fd, void *buf, size_t n)
{
    struct in_args a = { .kind = IN_READ, .fd = fd, .buf = buf, .len = n };
    return in_call(&a);
}

TT_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    return in_read_fd(fd, buf, n);
}

TT_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    if (n > buflen)
        __chk_fail();
    return in_read_fd(fd, buf, n);
}

TT_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    struct in_args a = { .kind = IN_READV, .fd = fd, .iov = iov, .iovcnt = iovcnt };
    return in_call(&a);
}

TT_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    struct in_args a = { .kind = IN_RECV, .fd = fd, .buf = buf, .len = n, .flags = flags };
    return in_call(&a);
}

TT_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
    if (n > buflen)
        __chk_fail();
    return recv(fd, buf, n, flags);
}

/* With _GNU_SOURCE, glibc declares the address argument as a transparent union. */
#ifdef __SOCKADDR_ARG
#define SOCKADDR_PTR(a) (a)
#else
#define SOCKADDR_PTR(a) ((a).__sockaddr__)
#endif

static ssize_t recvfrom_impl(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
                             socklen_t *addrlen)
{
    struct in_args a = { .kind = IN_RECVFROM, .fd = fd, .buf = buf, .len = n, .flags = flags,
                         .addr = addr, .addrlen = addrlen };
    return in_call(&a);
}

TT_EXPORT ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags, __SOCKADDR_ARG addr,
                           socklen_t *restrict addrlen)
{
    return recvfrom_impl(fd, buf, n, flags, SOCKADDR_PTR(addr), addrlen);
}

TT_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                                 struct sockaddr *addr, socklen_t *addrlen)
{
    if (n > buflen)
        __chk_fail();
    return recvfrom_impl(fd, buf, n, flags, addr, addrlen);
}

TT_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (!msg)
        return REAL(recvmsg, recvmsg_fn)(fd, msg, flags);
    struct in_args a = { .kind = IN_RECVMSG, .fd = fd, .msg = msg, .flags = flags };
    return in_call(&a);
}

/* ---------------------------------------------------------------- opening and closing */

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*close_fn)(int);
typedef FILE *(*fopen_fn)(const char *restrict, const char *restrict);

static inline bool needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

TT_EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(open, open_fn)(path, flags, mode);
    fd_mark(fd, is_random_path(path));
    return fd;
}

TT_EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(open64, open_fn)(path, flags, mode);
    fd_mark(fd, is_random_path(path));
    return fd;
}

TT_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(openat, openat_fn)(dirfd, path, flags, mode);
    fd_mark(fd, is_random_path(path));
    return fd;
}

TT_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = REAL(openat64, openat_fn)(dirfd, path, flags, mode);
    fd_mark(fd, is_random_path(path));
    return fd;
}

TT_EXPORT int close(int fd)
{
    fd_mark(fd, false);
    return REAL(close, close_fn)(fd);
}

/* ---------------------------------------------------------------- stdio streams */

/* A stream whose reads and writes go through the interposed calls. */
struct cookie {
    int fd;
    int std; /* 0, 1, 2 for the replaced standard streams, -1 for a random device */
};

static struct cookie std_cookies[3] = { { 0, 0 }, { 1, 1 }, { 2, 2 } };
/* glibc's own standard streams and their replacements (NULL: not replaced). Set by the
 * constructor before the program runs; cleared when the program closes a replacement. */
static FILE *_Atomic std_orig[3];
static FILE *_Atomic std_repl[3];
static char std_buf[3][BUFSIZ];

static ssize_t out_write(int fd, const void *buf, size_t n);

static ssize_t ck_read(void *c, char *buf, size_t n)
{
    return in_read_fd(((struct cookie *)c)->fd, buf, n);
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
    /* as glibc's file streams: write until done or an error (a short count marks the error) */
    int fd = ((struct cookie *)c)->fd;
    size_t done = 0;
    while (done < n) {
        ssize_t r = fd == 1 || fd == 2 ? out_write(fd, buf + done, n - done)
                                       : REAL(write, ssize_t (*)(int, const void *, size_t))(
                                             fd, buf + done, n - done);
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

static int ck_seek(void *c, off64_t *off, int whence)
{
    off64_t r = lseek64(((struct cookie *)c)->fd, *off, whence);
    if (r < 0)
        return -1;
    *off = r;
    return 0;
}

static int ck_close(void *c)
{
    struct cookie *k = c;
    if (k->std < 0) {
        int rc = close(k->fd);
        free(k);
        return rc;
    }
    /* The program closed a replaced standard stream: leave glibc's own one behind, closed, as
     * the program would have left it, so later uses of stdout & co. fail as they would have. */
    FILE *orig = atomic_exchange_explicit(&std_orig[k->std], NULL, memory_order_relaxed);
    atomic_store_explicit(&std_repl[k->std], NULL, memory_order_relaxed);
    if (!orig)
        return close(k->fd);
    if (k->std == 0)
        stdin = orig;
    else if (k->std == 1)
        stdout = orig;
    else
        stderr = orig;
    return fclose(orig);
}

/* Gives @fp the fd number glibc would report (fopencookie streams say -2, so fileno() fails;
 * glibc uses the field only for fileno() and to know the stream is open). */
static void ck_set_fileno(FILE *fp, int fd)
{
#ifdef __GLIBC__
    fp->_fileno = fd;
#else
    (void)fp;
    (void)fd;
#endif
}

static FILE *ck_open(struct cookie *c, const char *mode)
{
    cookie_io_functions_t io = { ck_read, ck_write, ck_seek, ck_close };
    FILE *fp = fopencookie(c, mode, io);
    if (fp)
        ck_set_fileno(fp, c->fd);
    return fp;
}

/* Replaces standard stream @i with a cookie stream buffered as glibc would buffer it. */
static void std_replace(int i)
{
    FILE *orig = i == 0 ? stdin : i == 1 ? stdout : stderr;
    FILE *fp = ck_open(&std_cookies[i], i == 0 ? "r" : "w");
    if (!fp)
        return;
    struct stat st;
    int mode = _IOFBF;
    size_t size = BUFSIZ;
    /* stdin's reads are replayed, and a replayed read must ask for at least what was
     * recorded: its size cannot follow what stdin is now (a terminal's st_blksize is 1024, a
     * pipe's 4096), so stdin always reads BUFSIZ. */
    if (i != 0 && fstat(i, &st) == 0 && st.st_blksize > 0 && st.st_blksize < BUFSIZ)
        size = (size_t)st.st_blksize;
    if (i == 2)
        mode = _IONBF;
    else if (isatty(i))
        mode = _IOLBF;
    setvbuf(fp, mode == _IONBF ? NULL : std_buf[i], mode, mode == _IONBF ? 0 : size);
    atomic_store_explicit(&std_orig[i], orig, memory_order_relaxed);
    atomic_store_explicit(&std_repl[i], fp, memory_order_relaxed);
    if (i == 0)
        stdin = fp;
    else if (i == 1)
        stdout = fp;
    else
        stderr = fp;
}

/* glibc's original standard stream -> its replacement (for libstdc++'s std::cin/cout/cerr). */
static inline FILE *redirect(FILE *fp)
{
    for (int i = 0; i < 3; i++)
        if (UNLIKELY(fp == atomic_load_explicit(&std_orig[i], memory_order_relaxed) && fp)) {
            FILE *r = atomic_load_explicit(&std_repl[i], memory_order_relaxed);
            return r ? r : fp;
        }
    return fp;
}

static FILE *fopen_common(enum real_fn id, const char *restrict path, const char *restrict mode)
{
    fopen_fn f = REAL(fopen, fopen_fn);
    if (id == RF_fopen64)
        f = REAL(fopen64, fopen_fn);
    if (!is_random_path(path) || !mode || mode[0] != 'r' || strchr(mode, '+'))
        return f(path, mode);
    tt_session *s = enter();
    if (!s)
        return f(path, mode);
    /* a stream on a random device: its reads must reach the interposed read */
    FILE *fp = NULL;
    int fd = REAL(open, open_fn)(path, O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0), 0);
    int err = errno;
    if (fd >= 0) {
        fd_mark(fd, true);
        struct cookie *c = malloc(sizeof *c);
        if (c) {
            c->fd = fd;
            c->std = -1;
            fp = ck_open(c, "r");
        }
        err = errno;
        if (!fp) {
            free(c);
            fd_mark(fd, false);
            REAL(close, close_fn)(fd);
        }
    }
    tt_rt_guard_leave();
    if (!fp)
        errno = err;
    return fp;
}

TT_EXPORT FILE *fopen(const char *restrict path, const char *restrict mode)
{
    return fopen_common(RF_fopen, path, mode);
}

TT_EXPORT FILE *fopen64(const char *restrict path, const char *restrict mode)
{
    return fopen_common(RF_fopen64, path, mode);
}

TT_EXPORT size_t fwrite(const void *restrict p, size_t size, size_t n, FILE *restrict fp)
{
    return REAL(fwrite, size_t (*)(const void *, size_t, size_t, FILE *))(p, size, n,
                                                                          redirect(fp));
}

TT_EXPORT int fputc(int c, FILE *fp)
{
    return REAL(fputc, int (*)(int, FILE *))(c, redirect(fp));
}

TT_EXPORT int putc(int c, FILE *fp)
{
    return REAL(putc, int (*)(int, FILE *))(c, redirect(fp));
}

TT_EXPORT int fputs(const char *restrict str, FILE *restrict fp)
{
    return REAL(fputs, int (*)(const char *, FILE *))(str, redirect(fp));
}

TT_EXPORT int fflush(FILE *fp)
{
    return REAL(fflush, int (*)(FILE *))(redirect(fp));
}

TT_EXPORT size_t fread(void *restrict p, size_t size, size_t n, FILE *restrict fp)
{
    return REAL(fread, size_t (*)(void *, size_t, size_t, FILE *))(p, size, n, redirect(fp));
}

TT_EXPORT int getc(FILE *fp)
{
    return REAL(getc, int (*)(FILE *))(redirect(fp));
}

TT_EXPORT int ungetc(int c, FILE *fp)
{
    return REAL(ungetc, int (*)(int, FILE *))(c, redirect(fp));
}

/* ---------------------------------------------------------------- wide characters */

/* glibc makes fopencookie streams byte-only: a wide call on one crashes, by design. On a
 * replaced stream the wide functions therefore decode and encode the bytes themselves, with
 * mbrtowc/wcrtomb in the program's locale, so that wide input is recorded like byte input. The
 * wscanf family is not rebuilt: on the replaced stdin it hands the unread bytes back to glibc's
 * own stdin and makes it the program's stdin again, and the rest of stdin goes unrecorded. */

static inline bool is_repl(FILE *fp)
{
    for (int i = 0; i < 3; i++)
        if (fp && fp == atomic_load_explicit(&std_repl[i], memory_order_relaxed))
            return true;
    return false;
}

static wint_t ck_getwc(FILE *fp)
{
    int (*get)(FILE *) = REAL(getc, int (*)(FILE *));
    mbstate_t st;
    memset(&st, 0, sizeof st);
    bool partial = false;
    for (;;) {
        int c = get(fp);
        if (c == EOF) {
            if (partial)
                errno = EILSEQ;
            return WEOF;
        }
        char ch = (char)c;
        wchar_t wc;
        size_t r = mbrtowc(&wc, &ch, 1, &st);
        if (r == (size_t)-2) {
            partial = true;
            continue;
        }
        if (r == (size_t)-1) {
            errno = EILSEQ;
            return WEOF;
        }
        return (wint_t)wc;
    }
}

static wint_t ck_ungetwc(wint_t wc, FILE *fp)
{
    char mb[MB_LEN_MAX];
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t n = wc == WEOF ? (size_t)-1 : wcrtomb(mb, (wchar_t)wc, &st);
    if (n == (size_t)-1)
        return WEOF;
    while (n--)
        if (REAL(ungetc, int (*)(int, FILE *))((unsigned char)mb[n], fp) == EOF)
            return WEOF;
    return wc;
}

static wchar_t *ck_getws(wchar_t *ws, int n, FILE *fp)
{
    if (n <= 0)
        return NULL;
    int i = 0;
    while (i < n - 1) {
        wint_t c = ck_getwc(fp);
        if (c == WEOF)
            break;
        ws[i++] = (wchar_t)c;
        if (c == L'\n')
            break;
    }
    if (i == 0)
        return NULL;
    ws[i] = L'\0';
    return ws;
}

/* Writes @n wide characters as multibyte bytes; returns 0 or -1. */
static int ck_putws(const wchar_t *ws, size_t n, FILE *fp)
{
    size_t (*put)(const void *, size_t, size_t, FILE *) =
        REAL(fwrite, size_t (*)(const void *, size_t, size_t, FILE *));
    char buf[256 + MB_LEN_MAX];
    size_t len = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        size_t k = wcrtomb(buf + len, ws[i], &st);
        if (k == (size_t)-1) {
            errno = EILSEQ;
            return -1;
        }
        len += k;
        if (len >= 256) {
            if (put(buf, 1, len, fp) != len)
                return -1;
            len = 0;
        }
    }
    return len && put(buf, 1, len, fp) != len ? -1 : 0;
}

static wint_t ck_putwc(wchar_t wc, FILE *fp)
{
    return ck_putws(&wc, 1, fp) == 0 ? (wint_t)wc : WEOF;
}

static int ck_vwprintf(FILE *fp, const wchar_t *fmt, va_list ap)
{
    wchar_t small[256];
    wchar_t *buf = small;
    size_t cap = sizeof small / sizeof small[0];
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        int n = vswprintf(buf, cap, fmt, aq);
        va_end(aq);
        if (n >= 0) {
            int rc = ck_putws(buf, (size_t)n, fp);
            if (buf != small)
                free(buf);
            return rc == 0 ? n : -1;
        }
        /* too small, or an encoding error: grow up to a bound, then give up */
        if (buf != small)
            free(buf);
        if (cap >= (1u << 22) / sizeof(wchar_t))
            return -1;
        cap *= 8;
        buf = malloc(cap * sizeof(wchar_t));
        if (!buf)
            return -1;
    }
}

/* wscanf on the replaced stdin: give glibc's stdin back, with the unread bytes. */
static FILE *ck_unreplace_stdin(FILE *fp)
{
    FILE *orig = atomic_load_explicit(&std_orig[0], memory_order_relaxed);
    if (!orig || fp != atomic_load_explicit(&std_repl[0], memory_order_relaxed))
        return fp;
    atomic_store_explicit(&std_repl[0], NULL, memory_order_relaxed);
    atomic_store_explicit(&std_orig[0], NULL, memory_order_relaxed);
#ifdef __GLIBC__
    /* The bytes the replacement read ahead go back as wide characters through ungetwc: glibc's
     * wide reads take its wide pushback area first, and only then allocate their buffers. (A
     * program that mixes byte and wide reads on one stream gets nothing from glibc anyway.) */
    REAL(fwide, int (*)(FILE *, int))(orig, 1);
    wchar_t ws[BUFSIZ];
    size_t nw = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    const char *p = fp->_IO_read_ptr, *e = fp->_IO_read_end;
    while (p < e && nw < BUFSIZ) {
        size_t r = mbrtowc(&ws[nw], p, (size_t)(e - p), &st);
        if (r == (size_t)-1 || r == (size_t)-2)
            break; /* an invalid or cut sequence ends what can be handed back */
        p += r ? r : 1;
        nw++;
    }
    while (nw--)
        REAL(ungetwc, wint_t (*)(wint_t, FILE *))((wint_t)ws[nw], orig);
    fp->_IO_read_ptr = fp->_IO_read_end;
#endif
    stdin = orig;
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
        fprintf(stderr, "tinytrace: wide-character scanf on stdin: the rest of stdin is not "
                        "recorded\n");
    return orig;
}

#define WIDE_GET(name)                                                                         \
    TT_EXPORT wint_t name(FILE *fp)                                                            \
    {                                                                                          \
        fp = redirect(fp);                                                                     \
        return is_repl(fp) ? ck_getwc(fp) : REAL(name, wint_t (*)(FILE *))(fp);               \
    }
WIDE_GET(fgetwc)
WIDE_GET(getwc)
WIDE_GET(fgetwc_unlocked)
WIDE_GET(getwc_unlocked)

TT_EXPORT wint_t getwchar(void)
{
    return is_repl(stdin) ? ck_getwc(stdin) : REAL(getwchar, wint_t (*)(void))();
}

TT_EXPORT wint_t getwchar_unlocked(void)
{
    return is_repl(stdin) ? ck_getwc(stdin) : REAL(getwchar_unlocked, wint_t (*)(void))();
}

TT_EXPORT wchar_t *fgetws(wchar_t *restrict ws, int n, FILE *restrict fp)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_getws(ws, n, fp)
                       : REAL(fgetws, wchar_t *(*)(wchar_t *, int, FILE *))(ws, n, fp);
}

TT_EXPORT wchar_t *fgetws_unlocked(wchar_t *restrict ws, int n, FILE *restrict fp)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_getws(ws, n, fp)
                       : REAL(fgetws_unlocked, wchar_t *(*)(wchar_t *, int, FILE *))(ws, n, fp);
}

wchar_t *__fgetws_chk(wchar_t *ws, size_t size, int n, FILE *fp);
wchar_t *__fgetws_unlocked_chk(wchar_t *ws, size_t size, int n, FILE *fp);

TT_EXPORT wchar_t *__fgetws_chk(wchar_t *ws, size_t size, int n, FILE *fp)
{
    fp = redirect(fp);
    if (!is_repl(fp))
        return REAL(__fgetws_chk, wchar_t *(*)(wchar_t *, size_t, int, FILE *))(ws, size, n, fp);
    if (n > 0 && (size_t)n > size)
        __chk_fail();
    return ck_getws(ws, n, fp);
}

TT_EXPORT wchar_t *__fgetws_unlocked_chk(wchar_t *ws, size_t size, int n, FILE *fp)
{
    fp = redirect(fp);
    if (!is_repl(fp))
        return REAL(__fgetws_unlocked_chk, wchar_t *(*)(wchar_t *, size_t, int, FILE *))(
            ws, size, n, fp);
    if (n > 0 && (size_t)n > size)
        __chk_fail();
    return ck_getws(ws, n, fp);
}

TT_EXPORT wint_t ungetwc(wint_t wc, FILE *fp)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_ungetwc(wc, fp) : REAL(ungetwc, wint_t (*)(wint_t, FILE *))(wc, fp);
}

#define WIDE_PUT(name)                                                                         \
    TT_EXPORT wint_t name(wchar_t wc, FILE *fp)                                                \
    {                                                                                          \
        fp = redirect(fp);                                                                     \
        return is_repl(fp) ? ck_putwc(wc, fp) : REAL(name, wint_t (*)(wchar_t, FILE *))(wc, fp); \
    }
WIDE_PUT(fputwc)
WIDE_PUT(putwc)
WIDE_PUT(fputwc_unlocked)
WIDE_PUT(putwc_unlocked)

TT_EXPORT wint_t putwchar(wchar_t wc)
{
    return is_repl(stdout) ? ck_putwc(wc, stdout) : REAL(putwchar, wint_t (*)(wchar_t))(wc);
}

TT_EXPORT wint_t putwchar_unlocked(wchar_t wc)
{
    return is_repl(stdout) ? ck_putwc(wc, stdout)
                           : REAL(putwchar_unlocked, wint_t (*)(wchar_t))(wc);
}

TT_EXPORT int fputws(const wchar_t *restrict ws, FILE *restrict fp)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_putws(ws, wcslen(ws), fp)
                       : REAL(fputws, int (*)(const wchar_t *, FILE *))(ws, fp);
}

TT_EXPORT int fputws_unlocked(const wchar_t *restrict ws, FILE *restrict fp)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_putws(ws, wcslen(ws), fp)
                       : REAL(fputws_unlocked, int (*)(const wchar_t *, FILE *))(ws, fp);
}

typedef int (*vfwprintf_fn)(FILE *, const wchar_t *, va_list);
typedef int (*vfwprintf_chk_fn)(FILE *, int, const wchar_t *, va_list);

TT_EXPORT int vfwprintf(FILE *restrict fp, const wchar_t *restrict fmt, va_list ap)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_vwprintf(fp, fmt, ap) : REAL(vfwprintf, vfwprintf_fn)(fp, fmt, ap);
}

TT_EXPORT int vwprintf(const wchar_t *restrict fmt, va_list ap)
{
    return vfwprintf(stdout, fmt, ap);
}

TT_EXPORT int fwprintf(FILE *restrict fp, const wchar_t *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfwprintf(fp, fmt, ap);
    va_end(ap);
    return n;
}

TT_EXPORT int wprintf(const wchar_t *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfwprintf(stdout, fmt, ap);
    va_end(ap);
    return n;
}

int __vfwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, va_list ap);
int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap);
int __fwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, ...);
int __wprintf_chk(int flag, const wchar_t *fmt, ...);

TT_EXPORT int __vfwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, va_list ap)
{
    fp = redirect(fp);
    return is_repl(fp) ? ck_vwprintf(fp, fmt, ap)
                       : REAL(__vfwprintf_chk, vfwprintf_chk_fn)(fp, flag, fmt, ap);
}

TT_EXPORT int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap)
{
    return __vfwprintf_chk(stdout, flag, fmt, ap);
}

TT_EXPORT int __fwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __vfwprintf_chk(fp, flag, fmt, ap);
    va_end(ap);
    return n;
}

TT_EXPORT int __wprintf_chk(int flag, const wchar_t *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __vfwprintf_chk(stdout, flag, fmt, ap);
    va_end(ap);
    return n;
}

typedef int (*vfwscanf_fn)(FILE *, const wchar_t *, va_list);

/* With -std=c11 the headers give these the C99 symbols (__isoc99_vfwscanf, …), which are the
 * ones programs call today. */
TT_EXPORT int vfwscanf(FILE *restrict fp, const wchar_t *restrict fmt, va_list ap)
{
    return REAL(__isoc99_vfwscanf, vfwscanf_fn)(ck_unreplace_stdin(redirect(fp)), fmt, ap);
}

TT_EXPORT int vwscanf(const wchar_t *restrict fmt, va_list ap)
{
    return vfwscanf(stdin, fmt, ap);
}

TT_EXPORT int fwscanf(FILE *restrict fp, const wchar_t *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfwscanf(fp, fmt, ap);
    va_end(ap);
    return n;
}

TT_EXPORT int wscanf(const wchar_t *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfwscanf(stdin, fmt, ap);
    va_end(ap);
    return n;
}

/* The GNU versions (%a as an allocation flag), called by programs built as C89. */
int gnu_vfwscanf(FILE *fp, const wchar_t *fmt, va_list ap) __asm__("vfwscanf");
int gnu_vwscanf(const wchar_t *fmt, va_list ap) __asm__("vwscanf");
int gnu_fwscanf(FILE *fp, const wchar_t *fmt, ...) __asm__("fwscanf");
int gnu_wscanf(const wchar_t *fmt, ...) __asm__("wscanf");

TT_EXPORT int gnu_vfwscanf(FILE *fp, const wchar_t *fmt, va_list ap)
{
    return REAL(vfwscanf, vfwscanf_fn)(ck_unreplace_stdin(redirect(fp)), fmt, ap);
}

TT_EXPORT int gnu_vwscanf(const wchar_t *fmt, va_list ap)
{
    return gnu_vfwscanf(stdin, fmt, ap);
}

TT_EXPORT int gnu_fwscanf(FILE *fp, const wchar_t *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = gnu_vfwscanf(fp, fmt, ap);
    va_end(ap);
    return n;
}

TT_EXPORT int gnu_wscanf(const wchar_t *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = gnu_vfwscanf(stdin, fmt, ap);
    va_end(ap);
    return n;
}

TT_EXPORT int fwide(FILE *fp, int mode)
{
    fp = redirect(fp);
    if (is_repl(fp))
        return mode > 0 ? 1 : mode < 0 ? -1 : 0; /* either orientation works on a replaced stream */
    return REAL(fwide, int (*)(FILE *, int))(fp, mode);
}

/* ---------------------------------------------------------------- output */

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

/* Segments of what reached fd 1 and fd 2; see the top of the file. */
#define SEG_MAX 4096

struct seg {
    pthread_mutex_t mu;
    size_t len;
    char buf[SEG_MAX];
};

static struct seg segs[2] = { { PTHREAD_MUTEX_INITIALIZER, 0, { 0 } },
                              { PTHREAD_MUTEX_INITIALIZER, 0, { 0 } } };

/* Called with the guard and g->mu held; returns with g->mu held. The event itself is made
 * without the mutex: in an ordered replay it waits for this thread's turn, and the thread whose
 * turn it is may need the mutex to write its own segment. */
static void seg_emit(tt_session *s, int fd, struct seg *g)
{
    if (!g->len)
        return;
    char out[SEG_MAX];
    size_t n = g->len;
    memcpy(out, g->buf, n);
    g->len = 0;
    pthread_mutex_unlock(&g->mu);
    int rc = io_event(s, TT_IO_OUT, fd == 1 ? TT_CH_STDOUT : TT_CH_STDERR, S_write, out, n,
                      NULL);
    if (rc != TT_OK)
        tt_rt_failed(rc, fd == 1 ? "write to stdout" : "write to stderr");
    pthread_mutex_lock(&g->mu);
}

static void seg_push(tt_session *s, int fd, const char *p, size_t n)
{
    struct seg *g = &segs[fd - 1];
    pthread_mutex_lock(&g->mu);
    while (n) {
        size_t room = SEG_MAX - g->len;
        size_t take = n < room ? n : room;
        const char *nl = memchr(p, '\n', take);
        if (nl)
            take = (size_t)(nl - p) + 1;
        memcpy(g->buf + g->len, p, take);
        g->len += take;
        p += take;
        n -= take;
        if (nl || g->len == SEG_MAX)
            seg_emit(s, fd, g);
    }
    pthread_mutex_unlock(&g->mu);
}

static void seg_flush(tt_session *s, int fd)
{
    struct seg *g = &segs[fd - 1];
    pthread_mutex_lock(&g->mu);
    seg_emit(s, fd, g);
    pthread_mutex_unlock(&g->mu);
}

/* A write to fd 1 or 2 while output is checked: written for real (in replay too), then the
 * bytes that were written are compared (replay) or recorded. */
static ssize_t out_write(int fd, const void *buf, size_t n)
{
    write_fn f = REAL(write, write_fn);
    tt_session *s = enter();
    if (!s)
        return f(fd, buf, n);
    ssize_t r = f(fd, buf, n);
    int err = errno;
    if (r > 0)
        seg_push(s, fd, buf, (size_t)r);
    tt_rt_guard_leave();
    errno = err;
    return r;
}

TT_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    if ((fd == 1 || fd == 2) && tt_rt_check_output())
        return out_write(fd, buf, n);
    return REAL(write, write_fn)(fd, buf, n);
}

TT_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    writev_fn f = REAL(writev, writev_fn);
    if ((fd != 1 && fd != 2) || !tt_rt_check_output())
        return f(fd, iov, cnt);
    tt_session *s = enter();
    if (!s)
        return f(fd, iov, cnt);
    ssize_t r = f(fd, iov, cnt);
    int err = errno;
    size_t left = r > 0 ? (size_t)r : 0;
    for (int i = 0; i < cnt && left; i++) {
        size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
        seg_push(s, fd, iov[i].iov_base, k);
        left -= k;
    }
    tt_rt_guard_leave();
    errno = err;
    return r;
}

/* ---------------------------------------------------------------- identity */

typedef pid_t (*getpid_fn)(void);
typedef int (*gethostname_fn)(char *, size_t);
typedef int (*uname_fn)(struct utsname *);
typedef int (*kill_fn)(pid_t, int);

/* The last pid a replayed getpid handed out: kill() sent to it reaches this process, not the
 * process that may now own the recorded number. */
static _Atomic pid_t replayed_pid;

TT_EXPORT pid_t getpid(void)
{
    getpid_fn f = REAL(getpid, getpid_fn);
    tt_session *s = enter();
    if (!s)
        return f();
    struct in_head h = { 0 };
    if (recording(s))
        h.ret = f();
    if (!in_simple(s, TT_CH_PID, S_getpid, &h, NULL, 0))
        h.ret = f();
    else if (!recording(s))
        atomic_store_explicit(&replayed_pid, (pid_t)h.ret, memory_order_relaxed);
    tt_rt_guard_leave();
    return (pid_t)h.ret;
}

TT_EXPORT int kill(pid_t pid, int sig)
{
    kill_fn f = REAL(kill, kill_fn);
    pid_t rp = atomic_load_explicit(&replayed_pid, memory_order_relaxed);
    if (UNLIKELY(rp > 0 && pid == rp))
        pid = REAL(getpid, getpid_fn)();
    return f(pid, sig);
}

static int gethostname_impl(char *name, size_t len)
{
    gethostname_fn f = REAL(gethostname, gethostname_fn);
    tt_session *s = enter();
    if (!s)
        return f(name, len);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { name, len };
    if (recording(s)) {
        h.ret = f(name, len);
        h.err = h.ret < 0 ? errno : 0;
        /* glibc fills the buffer with the cut name too when it fails with ENAMETOOLONG */
        if (h.ret == 0 || h.err == ENAMETOOLONG) {
            size_t n = strnlen(name, len);
            h.len = n < len ? n + 1 : len;
        }
    }
    if (!in_simple(s, TT_CH_HOSTNAME, S_gethostname, &h, &v, 1)) {
        h.ret = f(name, len);
        h.err = errno;
    }
    return (int)finish(&h, e0);
}

TT_EXPORT int gethostname(char *name, size_t len)
{
    return gethostname_impl(name, len);
}

TT_EXPORT int __gethostname_chk(char *name, size_t len, size_t buflen)
{
    if (len > buflen)
        __chk_fail();
    return gethostname_impl(name, len);
}

TT_EXPORT int uname(struct utsname *u)
{
    uname_fn f = REAL(uname, uname_fn);
    tt_session *s = enter();
    if (!s)
        return f(u);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { u, sizeof *u };
    if (recording(s)) {
        h.ret = f(u);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? sizeof *u : 0;
    }
    if (!in_simple(s, TT_CH_HOSTNAME, S_uname, &h, &v, 1)) {
        h.ret = f(u);
        h.err = errno;
    }
    return (int)finish(&h, e0);
}

/* ---------------------------------------------------------------- syscall() */

typedef long (*syscall_fn)(long, ...);

/* Programs that skip the libc wrapper (older Rust, Go's cgo helpers, Python builds without
 * getrandom()) reach the same interposers; everything else goes straight through. Reading six
 * arguments whatever the call takes is what glibc's own syscall() does. */
TT_EXPORT long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    switch (nr) {
#ifdef SYS_getrandom
    case SYS_getrandom:
        return getrandom((void *)a[0], (size_t)a[1], (unsigned)a[2]);
#endif
    case SYS_clock_gettime:
        return clock_gettime((clockid_t)a[0], (struct timespec *)a[1]);
    case SYS_gettimeofday:
        return gettimeofday((struct timeval *)a[0], (void *)a[1]);
#ifdef SYS_time
    case SYS_time:
        return (long)time((time_t *)a[0]);
#endif
    case SYS_getpid:
        return getpid();
    default:
        return REAL(syscall, syscall_fn)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
}

/* ---------------------------------------------------------------- allocations */

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_alloc_fn)(size_t, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);

/* dlsym's own allocations, made before the real allocator is known. */
#define BOOT_BYTES 65536
static _Alignas(max_align_t) unsigned char boot_arena[BOOT_BYTES];
static _Atomic size_t boot_used;

static void *boot_alloc(size_t n)
{
    /* 16-byte header holding the size, so realloc can copy out of the arena */
    size_t need = ((n + 15) & ~(size_t)15) + 16;
    size_t at = atomic_fetch_add_explicit(&boot_used, need, memory_order_relaxed);
    if (at + need > BOOT_BYTES)
        return NULL;
    memcpy(boot_arena + at, &n, sizeof n);
    return boot_arena + at + 16;
}

static inline bool is_boot(const void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)boot_arena;
    return a >= b && a < b + BOOT_BYTES;
}

static inline fnptr real_alloc(enum real_fn id)
{
    fnptr f = atomic_load_explicit(&real_tab[id], memory_order_relaxed);
    if (UNLIKELY(!f) && !in_dlsym)
        f = resolve(id);
    return f; /* NULL only inside dlsym */
}

static void note_alloc(enum site k, uint64_t size, const void *p)
{
    tt_session *s = enter();
    if (!s)
        return;
    int e = errno;
    int rc = tt_alloc(s, site_id(s, k), size, p);
    if (rc != TT_OK)
        tt_rt_failed(rc, site_names[k]);
    tt_rt_guard_leave();
    errno = e;
}

static void note_free(enum site k, const void *p)
{
    tt_session *s = enter();
    if (!s)
        return;
    int e = errno;
    int rc = tt_free(s, site_id(s, k), p);
    if (rc != TT_OK)
        tt_rt_failed(rc, site_names[k]);
    tt_rt_guard_leave();
    errno = e;
}

TT_EXPORT void *malloc(size_t n)
{
    malloc_fn f = (malloc_fn)real_alloc(RF_malloc);
    if (UNLIKELY(!f))
        return boot_alloc(n);
    void *p = f(n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_malloc, n, p);
    return p;
}

TT_EXPORT void *calloc(size_t n, size_t size)
{
    calloc_fn f = (calloc_fn)real_alloc(RF_calloc);
    if (UNLIKELY(!f)) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total))
            return NULL;
        return boot_alloc(total); /* static, hence zeroed */
    }
    void *p = f(n, size);
    if (UNLIKELY(tt_rt_record_allocs())) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total))
            total = SIZE_MAX;
        note_alloc(S_calloc, total, p);
    }
    return p;
}

static void *realloc_common(enum site k, void *old, size_t n, bool rec)
{
    if (UNLIKELY(is_boot(old))) {
        size_t was;
        memcpy(&was, (unsigned char *)old - 16, sizeof was);
        void *p = malloc(n);
        if (p)
            memcpy(p, old, was < n ? was : n);
        return p;
    }
    realloc_fn f = (realloc_fn)real_alloc(RF_realloc);
    if (UNLIKELY(!f))
        return boot_alloc(n);
    void *p = f(old, n);
    if (UNLIKELY(rec)) {
        if (old && (p || n == 0))
            note_free(k, old);
        if (!old || n != 0)
            note_alloc(k, n, p);
    }
    return p;
}

TT_EXPORT void *realloc(void *old, size_t n)
{
    return realloc_common(S_realloc, old, n, tt_rt_record_allocs());
}

TT_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_common(S_reallocarray, old, total, tt_rt_record_allocs());
}

TT_EXPORT void free(void *p)
{
    if (UNLIKELY(!p || is_boot(p)))
        return;
    free_fn f = (free_fn)real_alloc(RF_free);
    if (UNLIKELY(!f))
        return; /* inside dlsym, before free is known: leak rather than guess */
    if (UNLIKELY(tt_rt_record_allocs()))
        note_free(S_free, p);
    f(p);
}

TT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    posix_memalign_fn f = (posix_memalign_fn)real_alloc(RF_posix_memalign);
    if (UNLIKELY(!f))
        return ENOMEM;
    int rc = f(out, align, n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_posix_memalign, n, rc == 0 ? *out : NULL);
    return rc;
}

TT_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    aligned_alloc_fn f = (aligned_alloc_fn)real_alloc(RF_aligned_alloc);
    if (UNLIKELY(!f))
        return NULL;
    void *p = f(align, n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_aligned_alloc, n, p);
    return p;
}

TT_EXPORT void *memalign(size_t align, size_t n)
{
    aligned_alloc_fn f = (aligned_alloc_fn)real_alloc(RF_memalign);
    if (UNLIKELY(!f))
        return NULL;
    void *p = f(align, n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_memalign, n, p);
    return p;
}

TT_EXPORT void *valloc(size_t n)
{
    malloc_fn f = (malloc_fn)real_alloc(RF_valloc);
    if (UNLIKELY(!f))
        return NULL;
    void *p = f(n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_valloc, n, p);
    return p;
}

TT_EXPORT void *pvalloc(size_t n)
{
    malloc_fn f = (malloc_fn)real_alloc(RF_pvalloc);
    if (UNLIKELY(!f))
        return NULL;
    void *p = f(n);
    if (UNLIKELY(tt_rt_record_allocs()))
        note_alloc(S_pvalloc, n, p);
    return p;
}

/* ---------------------------------------------------------------- life */

/* After the runtime's constructor (101): the session exists when the process is traced. */
__attribute__((constructor(102))) static void preload_init(void)
{
    /* resolve everything now, so that no dlsym runs later inside a signal handler */
    for (int i = 0; i < RF_COUNT_; i++)
        if (!atomic_load_explicit(&real_tab[i], memory_order_relaxed))
            lookup((enum real_fn)i);
    tt_session *s = enter();
    if (!s)
        return;
    struct stat st;
    if (fstat(0, &st) == 0 &&
        (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)))
        std_replace(0);
    if (tt_rt_check_output()) {
        std_replace(1);
        std_replace(2);
    }
    tt_rt_guard_leave();
}

/* Before the runtime's destructor (101), which closes the session: the program's buffered
 * output and the last segment without newline are still part of the run. */
__attribute__((destructor(102))) static void preload_fini(void)
{
    if (!tt_rt_session() || !tt_rt_check_output())
        return;
    fflush(NULL);
    tt_session *s = enter();
    if (!s)
        return;
    seg_flush(s, 1);
    seg_flush(s, 2);
    tt_rt_guard_leave();
}
