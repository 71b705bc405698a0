/* SPDX-License-Identifier: MIT */
/* The private header of the preload library's interposer families (libtinytrace-preload.so).
 *
 * What belongs here: only what two or more family files share — the table of real functions
 * and its lookup (real.c), the interned sites (common.c), the common record and replay of an
 * input call (struct in_head and the tt_pl_in_* helpers, common.c), the fd classification that
 * several families need (fds.c), the entry helpers that take the guard and the session, and the
 * few hooks one family lends another (a read for stdio's streams, a write for stdout's, the
 * replaced standard streams for the wide-character functions, what the constructor and the
 * destructor call). Everything else stays static in its family's file. Names with linkage
 * start with tt_pl_ and are hidden (the pragma below); the interposed libc symbols are marked
 * TT_EXPORT where they are defined. A new family (sync, process, net, …) is a new file in this
 * folder, listed in meson.build; it adds here only what another family uses.
 *
 * The interposed environment. An unmodified program run under `tinytrace record` reads its
 * environment through a handful of libc calls: clocks, random bytes, bytes from pipes, sockets
 * and terminals, its pid and host name. Each of those calls is interposed here (the real
 * function is found with dlsym(RTLD_NEXT)) and becomes an io event in the *in* direction; under
 * `tinytrace replay` the call does not reach the real clock, random source, fd or peer at all,
 * and returns what the recording holds. The program's writes to stdout and stderr become *out*
 * events when TINYTRACE_CHECK_OUTPUT is set (output.c); allocations become alloc/free events
 * when TINYTRACE_ALLOC is (alloc.c). Which reads count as inputs: fds.c. How stdio's streams
 * and the wide-character functions are made to reach the interposers: stdio.c, wchar.c.
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
 * Every interposer takes the per-thread nesting guard first and only forwards when it is held
 * (tinytrace itself, its swapper thread, a signal handler inside tinytrace), or when there is no
 * session (not traced, a forked child, after exit began).
 *
 * The families, one file each: real.c (the real functions), common.c (sites, the input record
 * and replay), clock.c, random.c, fds.c (which fds are inputs), read.c, open.c (opening),
 * fdguard.c (close, close_range, closefrom, dup*, fcntl: the tracer's own descriptors kept out
 * of the program's way), stdio.c (the replaced streams), wchar.c (wide characters), output.c,
 * identity.c (pids and tids, host name), syscall.c (syscall()), alloc.c, life.c (constructor
 * and destructor), process.c (children and execs), usage.c (resource use, the CPU), pseudo.c
 * (/proc and /sys files), net.c (sockets: virtual in replay), poll.c (readiness), resolve.c
 * (name resolution), dir.c (directory listings), sync.c, thread.c and sleep.c (the order of
 * synchronization, threads, sleeps: sync.h).
 */
#ifndef TT_INSTRUMENT_PRELOAD_H
#define TT_INSTRUMENT_PRELOAD_H

/* Both symbols of each pair (open and open64, fopen and fopen64, …) are defined by the
 * families, so the headers must not redirect one name to the other: every family file includes
 * this header before any other. */
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "runtime.h"

#define TT_EXPORT __attribute__((visibility("default")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* glibc's: ends the process when a fortified entry point finds its buffer too small. */
_Noreturn void __chk_fail(void);

/* -fvisibility=hidden hides what is defined, but not what is only declared: without the pragma
 * a family would reach another's variables through the GOT. */
#pragma GCC visibility push(hidden)

/* ---------------------------------------------------------------- the real functions (real.c) */

typedef void (*fnptr)(void);

#define REAL_FUNCS(X)                                                                          \
    X(malloc) X(calloc) X(realloc) X(free) X(posix_memalign) X(aligned_alloc) X(memalign)      \
    X(valloc) X(pvalloc) X(reallocarray)                                                       \
    X(clock_gettime) X(gettimeofday) X(time) X(timespec_get) X(clock)                          \
    X(getrandom) X(getentropy) X(arc4random) X(arc4random_buf) X(arc4random_uniform)           \
    X(open) X(open64) X(openat) X(openat64) X(close) X(fopen) X(fopen64)                       \
    X(close_range) X(closefrom) X(dup) X(dup2) X(dup3) X(fcntl) X(fcntl64)                     \
    X(read) X(readv) X(recv) X(recvfrom) X(recvmsg) X(write) X(writev)                         \
    X(getpid) X(gethostname) X(uname) X(kill) X(syscall)                                       \
    X(fwrite) X(fputc) X(putc) X(fputs) X(fflush) X(fread) X(getc) X(ungetc)                  \
    X(fgetwc) X(getwc) X(getwchar) X(fgetwc_unlocked) X(getwc_unlocked) X(getwchar_unlocked)   \
    X(fgetws) X(fgetws_unlocked) X(__fgetws_chk) X(__fgetws_unlocked_chk) X(ungetwc)           \
    X(fputwc) X(putwc) X(putwchar) X(fputwc_unlocked) X(putwc_unlocked) X(putwchar_unlocked)   \
    X(fputws) X(fputws_unlocked) X(vfwprintf) X(__vfwprintf_chk) X(vfwscanf)                   \
    X(__isoc99_vfwscanf) X(fwide)                                                              \
    X(fork) X(execve) X(execvpe) X(posix_spawn) X(posix_spawnp) X(system) X(popen) X(clone)    \
    X(getppid) X(gettid) X(tgkill) X(sigqueue) X(raise) X(killpg) X(pthread_kill) X(getrusage) X(times) X(sysinfo)                \
    X(sigaction) X(signal) X(sysv_signal) X(__sysv_signal) X(ssignal) X(bsd_signal) X(sigset) \
    X(pause) X(sigsuspend)                                                                     \
    X(getloadavg) X(sched_getcpu) X(getcpu) X(clock_getres) X(fdopen) X(pread) X(pread64)      \
    X(lseek) X(lseek64) X(readlink) X(readlinkat)                                              \
    X(socket) X(connect) X(bind) X(listen) X(shutdown) X(setsockopt) X(getsockopt)             \
    X(getsockname) X(getpeername) X(accept) X(accept4) X(send) X(sendto) X(sendmsg)            \
    X(poll) X(ppoll) X(select) X(pselect) X(epoll_wait) X(epoll_pwait) X(epoll_pwait2)         \
    X(getaddrinfo) X(getnameinfo) X(gethostbyname) X(gethostbyname2) X(gethostbyaddr)          \
    X(gethostbyname_r) X(gethostbyname2_r) X(gethostbyaddr_r)                                  \
    X(eventfd) X(timerfd_create) X(signalfd) X(inotify_init) X(inotify_init1)                  \
    X(readdir) X(readdir64) X(closedir)                                                        \
    X(waitpid) X(wait) X(wait3) X(wait4) X(waitid)                                             \
    SYNC_FUNCS(X)

/* sync.c, thread.c, sleep.c */
#define SYNC_FUNCS(X)                                                                          \
    X(pthread_mutex_lock) X(pthread_mutex_trylock) X(pthread_mutex_timedlock)                  \
    X(pthread_mutex_clocklock) X(pthread_mutex_unlock) X(pthread_mutex_init)                   \
    X(pthread_mutex_destroy)                                                                   \
    X(pthread_rwlock_rdlock) X(pthread_rwlock_wrlock) X(pthread_rwlock_tryrdlock)              \
    X(pthread_rwlock_trywrlock) X(pthread_rwlock_timedrdlock) X(pthread_rwlock_timedwrlock)    \
    X(pthread_rwlock_clockrdlock) X(pthread_rwlock_clockwrlock) X(pthread_rwlock_unlock)       \
    X(pthread_rwlock_init) X(pthread_rwlock_destroy)                                           \
    X(pthread_cond_wait) X(pthread_cond_timedwait) X(pthread_cond_clockwait)                   \
    X(pthread_cond_signal) X(pthread_cond_broadcast) X(pthread_cond_init)                      \
    X(pthread_cond_destroy)                                                                    \
    X(sem_wait) X(sem_trywait) X(sem_timedwait) X(sem_clockwait) X(sem_post) X(sem_init)       \
    X(sem_destroy)                                                                             \
    X(pthread_barrier_wait) X(pthread_barrier_init) X(pthread_barrier_destroy)                 \
    X(pthread_spin_lock) X(pthread_spin_trylock) X(pthread_spin_unlock) X(pthread_spin_init)   \
    X(pthread_spin_destroy) X(pthread_once)                                                    \
    X(pthread_create) X(pthread_join) X(pthread_tryjoin_np) X(pthread_timedjoin_np)            \
    X(pthread_clockjoin_np) X(pthread_detach) X(pthread_exit)                                  \
    X(sched_yield) X(nanosleep) X(clock_nanosleep) X(usleep) X(sleep)

enum real_fn {
#define X(n) RF_##n,
    REAL_FUNCS(X)
#undef X
    RF_COUNT_
};

/* The real functions found so far (NULL: not yet); real.c says why relaxed loads are enough. */
extern _Atomic(fnptr) tt_pl_real_tab[RF_COUNT_];

/* Nonzero while this thread is inside dlsym: alloc.c then serves from its bootstrap arena. */
extern __thread int tt_pl_in_dlsym;

/* Looks @id up and stores it in the table; aborts when no library after this one defines it. */
fnptr tt_pl_real_resolve(enum real_fn id);

/* The constructor's part: pins libc's symbol table for the look-ups at a first call, and looks
 * up now every function a signal handler may call (no dlsym later in a handler; real.c). */
void tt_pl_real_load_all(void);

static inline fnptr tt_pl_real(enum real_fn id)
{
    fnptr f = atomic_load_explicit(&tt_pl_real_tab[id], memory_order_relaxed);
    return f ? f : tt_pl_real_resolve(id);
}

#define REAL(name, type) ((type)tt_pl_real(RF_##name))

/* ---------------------------------------------------------------- sites (common.c) */

#define SITES(X)                                                                               \
    X(clock_gettime) X(gettimeofday) X(time) X(timespec_get) X(clock)                          \
    X(getrandom) X(getentropy) X(arc4random) X(arc4random_buf) X(arc4random_uniform)           \
    X(read) X(readv) X(recv) X(recvfrom) X(recvmsg)                                            \
    X(getpid) X(gethostname) X(uname) X(write)                                                 \
    X(malloc) X(calloc) X(realloc) X(free) X(posix_memalign) X(aligned_alloc) X(memalign)      \
    X(valloc) X(pvalloc) X(reallocarray)                                                       \
    X(getppid) X(gettid) X(getrusage) X(times) X(sysinfo) X(getloadavg) X(sched_getcpu)        \
    X(getcpu) X(open) X(openat) X(fopen) X(pread) X(lseek)                                     \
    X(socket) X(connect) X(bind) X(listen) X(shutdown) X(setsockopt) X(getsockopt)             \
    X(getsockname) X(getpeername) X(accept) X(accept4) X(send) X(sendto) X(sendmsg) X(writev)  \
    X(poll) X(ppoll) X(select) X(pselect) X(epoll_wait) X(epoll_pwait) X(epoll_pwait2)         \
    X(getaddrinfo) X(getnameinfo) X(gethostbyname) X(gethostbyname2) X(gethostbyaddr)          \
    X(gethostbyname_r) X(gethostbyname2_r) X(gethostbyaddr_r) X(readdir)                       \
    X(fork) X(clone) X(posix_spawn) X(system) X(waitpid) X(wait) X(wait3) X(wait4) X(waitid)   \
    SYNC_SITES(X)

#define SYNC_SITES(X)                                                                          \
    X(pthread_mutex_lock) X(pthread_mutex_trylock) X(pthread_mutex_timedlock)                  \
    X(pthread_mutex_clocklock) X(pthread_mutex_unlock)                                         \
    X(pthread_rwlock_rdlock) X(pthread_rwlock_wrlock) X(pthread_rwlock_tryrdlock)              \
    X(pthread_rwlock_trywrlock) X(pthread_rwlock_timedrdlock) X(pthread_rwlock_timedwrlock)    \
    X(pthread_rwlock_clockrdlock) X(pthread_rwlock_clockwrlock) X(pthread_rwlock_unlock)       \
    X(pthread_cond_wait) X(pthread_cond_timedwait) X(pthread_cond_clockwait)                   \
    X(pthread_cond_signal) X(pthread_cond_broadcast)                                           \
    X(sem_wait) X(sem_trywait) X(sem_timedwait) X(sem_clockwait) X(sem_post)                   \
    X(pthread_barrier_wait) X(pthread_spin_lock) X(pthread_spin_trylock) X(pthread_spin_unlock) \
    X(pthread_once) X(pthread_create) X(pthread_join) X(pthread_tryjoin_np)                    \
    X(pthread_timedjoin_np) X(pthread_clockjoin_np) X(pthread_detach) X(pthread_exit)          \
    X(sched_yield) X(nanosleep) X(clock_nanosleep) X(usleep) X(sleep)

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
    Y(clock_other, "clock_gettime(another clock)")                                             \
    Y(cond_release, "condition wait: release")                                                 \
    Y(cond_reacquire, "condition wait: reacquire")                                             \
    Y(thread_start, "thread start")                                                            \
    Y(thread_end, "thread exit")                                                               \
    Y(signal_delivery, TT_RT_SIGNAL_SITE)                                                     \
    Y(signal_return, TT_RT_SIGNAL_RETURN_SITE)

/* clock_getres, one site per clock as for clock_gettime, the clocks in CLOCK_SITES' order with
 * CLOCK_REALTIME first (clock.c counts on it) */
#define CLOCK_RES_SITES(Y)                                                                     \
    Y(res_realtime, "clock_getres")                                                            \
    Y(res_monotonic, "clock_getres(CLOCK_MONOTONIC)")                                          \
    Y(res_process_cputime, "clock_getres(CLOCK_PROCESS_CPUTIME_ID)")                          \
    Y(res_thread_cputime, "clock_getres(CLOCK_THREAD_CPUTIME_ID)")                            \
    Y(res_monotonic_raw, "clock_getres(CLOCK_MONOTONIC_RAW)")                                  \
    Y(res_realtime_coarse, "clock_getres(CLOCK_REALTIME_COARSE)")                              \
    Y(res_monotonic_coarse, "clock_getres(CLOCK_MONOTONIC_COARSE)")                            \
    Y(res_boottime, "clock_getres(CLOCK_BOOTTIME)")                                            \
    Y(res_realtime_alarm, "clock_getres(CLOCK_REALTIME_ALARM)")                                \
    Y(res_boottime_alarm, "clock_getres(CLOCK_BOOTTIME_ALARM)")                                \
    Y(res_tai, "clock_getres(CLOCK_TAI)")                                                      \
    Y(res_other, "clock_getres(another clock)")

enum site {
#define X(n) S_##n,
#define Y(n, name) S_##n,
    SITES(X) CLOCK_SITES(Y) CLOCK_RES_SITES(Y)
#undef X
#undef Y
    S_COUNT_
};

extern const char *const tt_pl_site_names[S_COUNT_];

/* The id of site @k in session @s, interned at its first use; 0 when interning failed. */
uint32_t tt_pl_site_intern_(tt_session *s, enum site k);
/* Interned once per site and session (there is one session per process); relaxed: every
 * thread that interns computes the same id. */
extern _Atomic uint32_t tt_pl_site_ids[S_COUNT_];
/* A fork child's first step: its session's names are its own recording's in a replay, where
 * the parent may have interned a site before the fork that the recording interned after it
 * (a fork's own: replay asks for the result first), so every site is looked up again. */
void tt_pl_sites_forget_(void);

/* @k's site id: inline, since every sync operation asks (interned at its first use) */
static inline uint32_t tt_pl_site_id(tt_session *s, enum site k)
{
    uint32_t id = atomic_load_explicit(&tt_pl_site_ids[k], memory_order_relaxed);
    return __builtin_expect(id != 0, 1) ? id : tt_pl_site_intern_(s, k);
}

/* The event layer's tt_sync_begin and tt_sync_end under their hidden names (event/sync.c): a
 * direct call, not one through the PLT. */
int tt_sync_begin_(tt_session *s, tt_sync *op, tt_sync_kind kind, uint32_t site,
                   const void *object);
int tt_sync_end_(tt_session *s, tt_sync *op, int result, int took);

/* A fork child's first step: the SIGCHLDs its parent's thread held are not its own
 * (signal.c). */
void tt_pl_signal_fork_child_(void);

/* In the child of a real vfork (process.c): the descriptors its exec must still hand on (the
 * runtime's settings, a replay's report channel), ascending, into @out, and how many; 0 in any
 * other process. The fd guard (fdguard.c) spares them there, as it spares a reserved one in
 * the traced process: the child's closes all forward, and a program that closes every
 * descriptor before its exec (Python's subprocess) would leave the program untraced. */
size_t tt_pl_vfork_kept(int out[2]);
/* True in the child of a real vfork (and in a fork that child makes before its exec): the
 * interposers that keep the process's state outside the guard (the fd map, the program's
 * SIGCHLD handler) leave it alone there, for it is the parent's memory. */
extern __thread bool tt_pl_vforked;

/* ---------------------------------------------------------------- entering an interposer */

/* The session with the guard taken, or NULL (guard not taken): then only forward. A session in
 * off mode counts as none: its calls record nothing and replay nothing. */
static inline tt_session *tt_pl_enter(void)
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

static inline bool tt_pl_recording(tt_session *s)
{
    return tt_session_mode(s) == TT_MODE_RECORD;
}

/* ---------------------------------------------------------------- inputs (common.c) */

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

/* One io event of @len bytes at @buf on @channel, at site @k; tt_event_full_ says the rest.
 * This and tt_pl_iov_total are inline: they are on the path of every input and output call. */
static inline int tt_pl_io_event(tt_session *s, tt_io_dir dir, uint32_t channel, enum site k,
                                 void *buf, size_t len, size_t *out_len)
{
    /* tt_io with a site: replay then names the call that was expected */
    tt_event ev = { .kind = TT_EV_IO, .dir = (uint8_t)dir, .arg = channel,
                    .sp = { 0, tt_pl_site_id(s, k) }, .payload_len = len, .payload = buf };
    tt_rt_io_count++; /* the span recorded (or met) a call's event: runtime.h */
    return tt_event_full_(s, &ev, buf, len, out_len);
}

static inline size_t tt_pl_iov_total(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    return n;
}

/* Record: head, address area (when @name_area), then the data gathered from @iov. */
int tt_pl_in_record(tt_session *s, uint32_t ch, enum site k, const struct in_head *h,
                    bool name_area, const void *name, const struct iovec *iov, int cnt);

/* Replay: fills *@h and the address area (NAME_CAP bytes at @name, when @name_area), and
 * scatters the recorded data into @iov. A recording that holds more than @iov can take is a
 * length divergence, found by the replayer. */
int tt_pl_in_replay(tt_session *s, uint32_t ch, enum site k, struct in_head *h, bool name_area,
                    void *name, const struct iovec *iov, int cnt);

/* The common shape of an input call whose data is an iovec and that has no address.
 * Returns true when *@h holds a result (recorded now, or replayed); false when the replay failed
 * and the runtime let the program go on: then the caller makes the real call. */
bool tt_pl_in_simple(tt_session *s, uint32_t ch, enum site k, struct in_head *h,
                     const struct iovec *iov, int cnt);

/* Ends an interposed call: guard released, errno as the call left it. */
static inline int64_t tt_pl_finish(const struct in_head *h, int saved_errno)
{
    tt_rt_guard_leave();
    errno = h->ret < 0 ? h->err : saved_errno;
    return h->ret;
}

/* ---------------------------------------------------------------- which fds are inputs (fds.c) */

bool tt_pl_is_random_path(const char *path);

/* Remembers whether @fd is open on a random device (open, fopen), or no longer is (close);
 * either way it is no longer on a pseudo-file. */
void tt_pl_fd_mark(int fd, bool random);

/* Remembers that @fd is open on a pseudo-file (pseudo.c); tt_pl_fd_mark forgets it. */
void tt_pl_fd_mark_pseudo(int fd);
bool tt_pl_fd_is_pseudo(int fd);

/* The channel of a read from @fd, or 0 when the read is not an input (a regular file, a
 * directory, an anonymous inode such as an eventfd, a bad fd). */
uint32_t tt_pl_fd_channel(int fd, bool recv_call);

/* ---------------------------------------------------------------- what families lend each other */

/* read.c: the interposed read, for the streams of stdio.c. */
ssize_t tt_pl_read_fd(int fd, void *buf, size_t n);

/* output.c: a write to fd 1 or 2 while output is checked, for the streams of stdio.c. */
ssize_t tt_pl_out_write(int fd, const void *buf, size_t n);

/* output.c: emits what is left of fd @fd's last segment (the destructor). */
void tt_pl_seg_flush(tt_session *s, int fd);

/* stdio.c: glibc's own standard streams and their replacements (NULL: not replaced); stdio.c
 * says when they change. wchar.c gives stdin back when wscanf reads it. */
extern FILE *_Atomic tt_pl_std_orig[3];
extern FILE *_Atomic tt_pl_std_repl[3];

/* stdio.c: replaces standard stream @i with a cookie stream buffered as glibc would buffer it. */
void tt_pl_std_replace(int i);

/* glibc's original standard stream -> its replacement (for libstdc++'s std::cin/cout/cerr). */
static inline FILE *tt_pl_redirect(FILE *fp)
{
    for (int i = 0; i < 3; i++)
        if (UNLIKELY(fp == atomic_load_explicit(&tt_pl_std_orig[i], memory_order_relaxed) &&
                     fp)) {
            FILE *r = atomic_load_explicit(&tt_pl_std_repl[i], memory_order_relaxed);
            return r ? r : fp;
        }
    return fp;
}

/* pseudo.c: an open (site @k: open, openat or fopen's) of @path relative to @dirfd, when it is
 * pseudo.c's to make (a path in /proc or /sys): then *@fd and errno are its result. False:
 * the caller opens. Called without the guard. */
bool tt_pl_pseudo_open(enum site k, int dirfd, const char *path, int flags, mode_t mode,
                       int *fd);

/* pseudo.c: fopen of @path in @mode, when it is pseudo.c's to make; *@out its result. */
bool tt_pl_pseudo_fopen(const char *path, const char *mode, FILE **out);

/* stdio.c: a read-only stream on @fd whose reads reach the interposed read; fclose closes @fd.
 * NULL with errno when none could be made (@fd stays open). Called with the guard held. */
FILE *tt_pl_fd_stream(int fd);

/* output.c: in a fork child, the parent's unfinished line is not the child's output. */
void tt_pl_child_reset(void);

/* read.c, replay of a tree: the bytes replayed reads of pipe descriptor @fd (-1: of every
 * pipe) owed their pipe, taken from it now, waiting for them as an ordered thread waits for
 * its turn (TINYTRACE_ORDER_TIMEOUT_MS; then forgiven), and meanwhile what the other owed
 * pipes hold: before a close, a wait for a child, an exec or the exit, where the writer would
 * otherwise meet a full pipe or none. The guard is held; a process with no debt pays one
 * atomic load. tt_pl_pipes_forget: a fork child owes nothing. */
void tt_pl_pipes_settle(int fd);
void tt_pl_pipes_forget(void);

/* identity.c: remembers that recorded id @rec is live id @live (a child's pid, fork). */
void tt_pl_id_remember(pid_t rec, pid_t live);

/* identity.c: the live id of an id a replay handed out (a pid, a ppid, a tid); any other id
 * as it is. Async-signal-safe. */
pid_t tt_pl_id_live(pid_t id);

/* identity.c: syscall(SYS_tkill, @tid, @sig) is about to be made (@tid live): a SIGKILL to one
 * of this process's threads writes the recording's buffers first. */
void tt_pl_before_tkill(pid_t tid, int sig);

/* ---------------------------------------------------------------- network peers (net.c, poll.c) */

/* net.c: whether @fd may be a virtual socket (no system call: a hint for output.c's write). */
bool tt_pl_net_maybe(int fd);

/* net.c: write and writev on a virtual socket, recorded and replayed as sends (an fd that is no
 * longer one is written for real). */
ssize_t tt_pl_net_write(int fd, const void *buf, size_t n);
ssize_t tt_pl_net_writev(int fd, const struct iovec *iov, int cnt);

/* net.c: @to is now a duplicate of @from (for dup, dup2, dup3, fcntl(F_DUPFD)). */
void tt_pl_net_dup(int from, int to);

/* poll.c: whether the anonymous-inode fd @fd came from eventfd, timerfd_create, signalfd or
 * inotify_init: then its reads are inputs. */
bool tt_pl_anon_input(int fd);

#pragma GCC visibility pop

#endif
