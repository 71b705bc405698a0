/* SPDX-License-Identifier: MIT */
/* Pseudo-files: what a program reads from /proc and /sys is an input, as what it reads from a
 * pipe is. Their content changes from run to run (/proc/self/stat, /proc/uptime,
 * /proc/loadavg, /proc/meminfo, a thermal sensor), so it is recorded, and a replay hands the
 * recorded bytes back without reading.
 *
 * Which files. An open (open, open64, openat, openat64, fopen, fopen64) for reading of a path
 * under /proc/ or /sys/ (absolute, or relative to a directory fd on one of those file
 * systems), other than the few files of live_files below, is an input event on TT_CH_PSEUDO,
 * at the call's site. Its head says what the open became: ret -1 and errno (it failed), 1 (a
 * pseudo-file: a regular file on procfs, sysfs, cgroupfs, debugfs or tracefs, as fstatfs says)
 * or 0 (a path that only passes through /proc, such as /proc/self/fd/3 or /proc/self/exe,
 * which opens a file elsewhere: read live, as any regular file is). Because a replay decides
 * from the recording, the same open becomes the same thing in both runs, whatever the live
 * file system says now.
 *
 * The fd of a pseudo-file is remembered (fds.c): its read and readv (read.c), pread and lseek
 * (here) are inputs on TT_CH_PSEUDO, and fopen, or fdopen of it, returns a stream whose reads
 * reach the interposed read (stdio.c), since glibc's own streams read through an internal read
 * no interposer sees. So fgets, getline, fread and fscanf replay too. In a replay the open
 * still opens the file, so that the program holds an fd of the number it had; when the file
 * is gone (/proc/<pid> of a process that has ended, a sensor of another machine) a /dev/null
 * stand-in takes its place. A recorded failure fails again without opening anything.
 *
 * Ids. A replay hands out recorded pids and tids (identity.c); a /proc/<id>/ or
 * /proc/<pid>/task/<id>/ path that names one of them is opened (or readlink'd) as the live
 * process's or thread's, whatever the access mode.
 */
#include "preload.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* glibc's fortified entry points, called by programs built with _FORTIFY_SOURCE. */
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen);

typedef int (*openat_fn)(int, const char *, int, ...);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef FILE *(*fdopen_fn)(int, const char *);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef off_t (*lseek_fn)(int, off_t, int);
typedef ssize_t (*readlink_fn)(const char *, char *, size_t);
typedef ssize_t (*readlinkat_fn)(int, const char *, char *, size_t);

/* The longest path looked at here. Kept small (these buffers are on the caller's stack, which
 * may be a thread's small one): a longer /proc/<id> path is not mapped, and a longer path
 * relative to a directory fd is read live. */
#define PS_PATH_MAX 1024

/* ---------------------------------------------------------------- which files */

/* Files of /proc and /sys that stay live: fixed for the machine's boot, and read by libraries
 * as programs start, so that recording them would make every trace bigger for nothing. (The
 * "cpu MHz" lines of /proc/cpuinfo do change; a program that prints them is caught by the
 * output check.) */
static const char *const live_files[] = {
    "/proc/cpuinfo",
    "/proc/version",
    "/proc/cmdline",
    "/proc/filesystems",
    "/proc/crypto",
    "/proc/devices",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
    "/sys/devices/system/cpu/present",
    "/sys/devices/system/cpu/kernel_max",
    "/sys/devices/system/node/online",
    "/sys/devices/system/node/possible",
};

/* @path is @dir's folder or something in it (@dir without its trailing slash). */
static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

static bool in_pseudo_tree(const char *path)
{
    return under(path, "/proc") || under(path, "/sys");
}

static bool recorded_path(const char *path)
{
    if (!in_pseudo_tree(path))
        return false;
    for (size_t i = 0; i < sizeof live_files / sizeof live_files[0]; i++)
        if (!strcmp(path, live_files[i]))
            return false;
    return true;
}

static bool pseudo_fs(long type)
{
    switch (type) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
        return true;
    default:
        return false;
    }
}

/* A regular file of a pseudo file system (not a directory, nor a file elsewhere that a /proc
 * link led to). */
static bool fd_is_pseudo_file(int fd)
{
    struct statfs sf;
    struct stat st;
    return fstatfs(fd, &sf) == 0 && pseudo_fs((long)sf.f_type) && fstat(fd, &st) == 0 &&
           S_ISREG(st.st_mode);
}

/* The absolute path of @path, relative to @dirfd, when that is a directory of a pseudo file
 * system (into @buf); @path itself when it is absolute; NULL otherwise (a path relative to the
 * working directory is not looked at: a program that works in /proc reads it live). */
static const char *at_path(int dirfd, const char *path, char *buf, size_t cap)
{
    if (path[0] == '/')
        return path;
    struct statfs sf;
    if (dirfd == AT_FDCWD || fstatfs(dirfd, &sf) != 0 || !pseudo_fs((long)sf.f_type))
        return NULL;
    char link[32];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = REAL(readlink, readlink_fn)(link, buf, cap);
    if (n <= 0 || (size_t)n + 1 + strlen(path) + 1 > cap)
        return NULL;
    buf[n] = '/';
    strcpy(buf + n + 1, path);
    return buf;
}

/* ---------------------------------------------------------------- /proc/<recorded id> */

/* Appends the path component at *@q to @out, the id it names turned into the live one when it
 * is a number; false when @out is too small. */
static bool put_component(const char **q, char *out, size_t cap, size_t *o, bool *changed)
{
    const char *c = *q;
    size_t n = strcspn(c, "/");
    long id = 0;
    bool num = n > 0 && n <= 10;
    for (size_t i = 0; num && i < n; i++) {
        if (c[i] < '0' || c[i] > '9')
            num = false;
        else
            id = id * 10 + (c[i] - '0');
    }
    pid_t live = num && id <= INT_MAX ? tt_pl_id_live((pid_t)id) : 0;
    int w = num && live != (pid_t)id ? snprintf(out + *o, cap - *o, "%d", (int)live)
                                     : snprintf(out + *o, cap - *o, "%.*s", (int)n, c);
    if (w < 0 || (size_t)w >= cap - *o)
        return false;
    *changed |= num && live != (pid_t)id;
    *o += (size_t)w;
    *q = c + n;
    return true;
}

/* @path with the ids of /proc/<id>/ and /proc/<id>/task/<id>/ that a replay handed out turned
 * into the live ones (into @buf); @path itself when there are none. */
static const char *live_path(const char *path, char *buf, size_t cap)
{
    if (!path || strncmp(path, "/proc/", 6) != 0)
        return path;
    const char *q = path + 6;
    size_t o = 6;
    bool changed = false;
    memcpy(buf, path, 6);
    if (!put_component(&q, buf, cap, &o, &changed))
        return path;
    if (!strncmp(q, "/task/", 6) && o + 6 < cap) {
        memcpy(buf + o, q, 6);
        o += 6;
        q += 6;
        if (!put_component(&q, buf, cap, &o, &changed))
            return path;
    }
    size_t rest = strlen(q);
    if (!changed || rest + 1 > cap - o)
        return path;
    memcpy(buf + o, q, rest + 1);
    return buf;
}

/* ---------------------------------------------------------------- opening */

enum ps_open {
    PS_PASS,   /* none of this file's business: nothing was opened */
    PS_LIVE,   /* opened, read live */
    PS_PSEUDO, /* opened on a pseudo-file: its reads are inputs */
    PS_FAILED, /* the open failed: -1, errno */
};

/* The recorded or replayed open at site @k; see the top of the file. Called without the guard.
 * *@fd is the result unless PS_PASS. */
static enum ps_open ps_open(enum site k, int dirfd, const char *path, int flags, mode_t mode,
                            int *fd)
{
    if (!path || (path[0] == '/' && !in_pseudo_tree(path)) ||
        (path[0] != '/' && dirfd == AT_FDCWD))
        return PS_PASS;
    openat_fn f = REAL(openat, openat_fn);
    char live[PS_PATH_MAX], abs[PS_PATH_MAX];
    const char *real_path = live_path(path, live, sizeof live);
    bool reads = (flags & O_ACCMODE) != O_WRONLY && !(flags & (O_PATH | O_DIRECTORY));
    tt_session *s = reads ? tt_pl_enter() : NULL;
    const char *name = s ? at_path(dirfd, path, abs, sizeof abs) : NULL;
    if (!name || !recorded_path(name)) {
        if (s)
            tt_rt_guard_leave();
        if (real_path == path)
            return PS_PASS;
        *fd = f(dirfd, real_path, flags, mode);
        tt_pl_fd_mark(*fd, false);
        return *fd < 0 ? PS_FAILED : PS_LIVE;
    }
    int e0 = errno;
    struct in_head h = { 0 };
    int got = -1;
    if (tt_pl_recording(s)) {
        /* not under the guard: a /proc/self/fd/N link may lead to a FIFO, whose open blocks */
        tt_rt_guard_leave();
        got = f(dirfd, real_path, flags, mode);
        int err = errno;
        if (!(s = tt_pl_enter())) {
            tt_pl_fd_mark(got, false);
            *fd = got;
            errno = err;
            return got < 0 ? PS_FAILED : PS_LIVE;
        }
        h.ret = got < 0 ? -1 : fd_is_pseudo_file(got);
        h.err = got < 0 ? err : 0;
        tt_pl_in_simple(s, TT_CH_PSEUDO, k, &h, NULL, 0);
    } else {
        if (!tt_pl_in_simple(s, TT_CH_PSEUDO, k, &h, NULL, 0))
            h.ret = 0; /* the runtime let the program go on: live */
        got = -2;      /* opened below, as the recording says */
    }
    if (got == -2 && h.ret >= 0) {
        got = f(dirfd, real_path, flags, mode);
        if (got < 0 && h.ret == 1) /* gone since the recording: a stand-in */
            got = f(AT_FDCWD, "/dev/null", O_RDONLY | (flags & O_CLOEXEC));
        h.err = got < 0 ? errno : 0;
        if (got < 0)
            h.ret = -1;
    }
    tt_pl_fd_mark(got, false);
    if (got >= 0 && h.ret == 1)
        tt_pl_fd_mark_pseudo(got);
    *fd = h.ret < 0 ? -1 : got;
    tt_pl_finish(&h, e0);
    return h.ret < 0 ? PS_FAILED : h.ret == 1 ? PS_PSEUDO : PS_LIVE;
}

bool tt_pl_pseudo_open(enum site k, int dirfd, const char *path, int flags, mode_t mode,
                       int *fd)
{
    return ps_open(k, dirfd, path, flags, mode, fd) != PS_PASS;
}

/* fopen's result from @fp made on @fd: when there is none, @fd is closed and errno kept. */
static FILE *stream_or_close(FILE *fp, int fd)
{
    if (!fp) {
        int err = errno;
        close(fd);
        errno = err;
    }
    return fp;
}

/* A read-only stream on pseudo-file @fd (NULL, and the fd closed, when none could be made). */
static FILE *pseudo_stream(int fd)
{
    FILE *fp = NULL;
    if (tt_rt_guard_enter()) {
        fp = tt_pl_fd_stream(fd);
        tt_rt_guard_leave();
    }
    return stream_or_close(fp, fd);
}

bool tt_pl_pseudo_fopen(const char *path, const char *mode, FILE **out)
{
    if (!path || !mode || !in_pseudo_tree(path))
        return false;
    if (mode[0] != 'r' || strchr(mode, '+')) {
        char live[PS_PATH_MAX];
        const char *real_path = live_path(path, live, sizeof live);
        if (real_path == path)
            return false;
        *out = REAL(fopen, fopen_fn)(real_path, mode);
        return true;
    }
    int fd;
    switch (ps_open(S_fopen, AT_FDCWD, path, O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0), 0,
                    &fd)) {
    case PS_PASS:
        return false;
    case PS_FAILED:
        *out = NULL;
        return true;
    case PS_LIVE:
        *out = stream_or_close(REAL(fdopen, fdopen_fn)(fd, mode), fd);
        return true;
    case PS_PSEUDO:
        *out = pseudo_stream(fd);
        return true;
    }
    return false;
}

/* fdopen of a pseudo-file's fd: the same stream fopen makes (not the fd's owner's to close). */
TT_EXPORT FILE *fdopen(int fd, const char *mode)
{
    fdopen_fn f = REAL(fdopen, fdopen_fn);
    if (!tt_pl_fd_is_pseudo(fd) || !mode || mode[0] != 'r' || strchr(mode, '+') ||
        !tt_rt_guard_enter())
        return f(fd, mode);
    FILE *fp = tt_pl_fd_stream(fd);
    tt_rt_guard_leave();
    return fp;
}

/* ---------------------------------------------------------------- pread, lseek */

static ssize_t pread_impl(enum real_fn id, int fd, void *buf, size_t n, off_t off)
{
    pread_fn f = (pread_fn)tt_pl_real(id);
    tt_session *s;
    if (!tt_pl_fd_is_pseudo(fd) || !(s = tt_pl_enter()))
        return f(fd, buf, n, off);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { buf, n };
    if (tt_pl_recording(s)) {
        /* not under the guard: some pseudo-files block (trace_pipe, /proc/kmsg) */
        tt_rt_guard_leave();
        ssize_t r = f(fd, buf, n, off);
        int err = errno;
        if (!(s = tt_pl_enter())) {
            errno = err;
            return r;
        }
        h.ret = r;
        h.err = r < 0 ? err : 0;
        h.len = r > 0 ? (uint64_t)r : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_PSEUDO, S_pread, &h, &v, 1)) {
        h.ret = f(fd, buf, n, off);
        h.err = errno;
    }
    return (ssize_t)tt_pl_finish(&h, e0);
}

TT_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    return pread_impl(RF_pread, fd, buf, n, off);
}

TT_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    return pread_impl(RF_pread64, fd, buf, n, (off_t)off);
}

TT_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
    if (n > buflen)
        __chk_fail();
    return pread_impl(RF_pread, fd, buf, n, off);
}

TT_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
    if (n > buflen)
        __chk_fail();
    return pread_impl(RF_pread64, fd, buf, n, (off_t)off);
}

/* A seek on a pseudo-file: in a replay the fd was never read, so its live offset says
 * nothing; the recorded one is handed back (ftell and SEEK_CUR see what they saw). */
static off_t lseek_impl(enum real_fn id, int fd, off_t off, int whence)
{
    lseek_fn f = (lseek_fn)tt_pl_real(id);
    tt_session *s;
    if (!tt_pl_fd_is_pseudo(fd) || !(s = tt_pl_enter()))
        return f(fd, off, whence);
    int e0 = errno;
    struct in_head h = { 0 };
    if (tt_pl_recording(s)) {
        h.ret = f(fd, off, whence);
        h.err = h.ret < 0 ? errno : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_PSEUDO, S_lseek, &h, NULL, 0)) {
        h.ret = f(fd, off, whence);
        h.err = errno;
    }
    return (off_t)tt_pl_finish(&h, e0);
}

TT_EXPORT off_t lseek(int fd, off_t off, int whence)
{
    return lseek_impl(RF_lseek, fd, off, whence);
}

TT_EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
    return lseek_impl(RF_lseek64, fd, (off_t)off, whence);
}

/* ---------------------------------------------------------------- readlink */

TT_EXPORT ssize_t readlink(const char *restrict path, char *restrict buf, size_t n)
{
    char live[PS_PATH_MAX];
    return REAL(readlink, readlink_fn)(live_path(path, live, sizeof live), buf, n);
}

TT_EXPORT ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen)
{
    if (n > buflen)
        __chk_fail();
    return readlink(path, buf, n);
}

TT_EXPORT ssize_t readlinkat(int dirfd, const char *restrict path, char *restrict buf, size_t n)
{
    char live[PS_PATH_MAX];
    return REAL(readlinkat, readlinkat_fn)(dirfd, live_path(path, live, sizeof live), buf, n);
}
