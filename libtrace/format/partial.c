/* SPDX-License-Identifier: MIT */
/* The temporary-file protocol: a trace is written under "<file>.<pid>.partial" and renamed to
 * <file> when it is finished (docs/FORMAT.md §2).
 *
 * The writer creates the partial file exclusively and never through a symlink, so it cannot be
 * made to write over another file, and holds an open-file-description lock (F_OFD_SETLK, a
 * write lock on the whole file) on it for the life of the recording. A partial file belongs to
 * a live recording exactly when that lock is held: the lock goes with the last descriptor of
 * the writer's open file, whatever killed it, and it is seen from any PID namespace or
 * container that sees the file, where a pid in the name means nothing. Tools (gc, recover)
 * leave a locked file alone. Naming, parsing, the lock and the liveness test are here, in one
 * place, for the writer, recovery and the tool.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format.h"

static const char suffix[] = ".partial";

int tt_partial_name(const char *final_path, long pid, char *out, size_t cap)
{
    int k = snprintf(out, cap, "%s.%ld%s", final_path, pid, suffix);
    return k < 0 || (size_t)k >= cap ? TT_E_LIMIT : TT_OK;
}

size_t tt_partial_parse(const char *name, long *pid)
{
    size_t n = strlen(name), sl = sizeof suffix - 1;
    if (n <= sl || strcmp(name + n - sl, suffix) != 0)
        return 0;
    size_t end = n - sl, start = end;
    while (start > 0 && name[start - 1] >= '0' && name[start - 1] <= '9')
        start--;
    if (start == end || start < 2 || name[start - 1] != '.' || end - start > 9)
        return 0;
    long v = 0;
    for (size_t i = start; i < end; i++)
        v = v * 10 + (name[i] - '0');
    if (v <= 0)
        return 0;
    if (pid)
        *pid = v;
    return start - 1;
}

static struct flock whole(short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET; /* l_start = l_len = 0: the whole file, however long it grows */
    return fl;
}

int tt_partial_lock(int fd)
{
    struct flock fl = whole(F_WRLCK);
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
        return 0;
    /* a file system without locks: the recording goes on, and looks dead to gc */
    return errno == ENOLCK || errno == EINVAL || errno == EOPNOTSUPP ? 0 : errno;
}

int tt_partial_create(const char *temp)
{
    /* O_EXCL refuses an existing file or symlink; O_NOFOLLOW refuses a symlink in the last
     * component even where O_EXCL would not be honoured */
    int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    /* nobody else can have it locked yet: the file did not exist a moment ago */
    int e = tt_partial_lock(fd);
    if (e) {
        close(fd);
        unlink(temp);
        errno = e;
        return -1;
    }
    return fd;
}

/* One spare of folder @d, @name, made @temp: opened (never through a symlink, never blocking
 * on a FIFO), checked to be an empty regular file of ours, locked, then renamed, never over an
 * existing file (RENAME_NOREPLACE keeps O_EXCL's promise). The lock is the claim: of two
 * processes that opened the same spare, the second cannot lock it; without locks, the second
 * rename finds the name gone. Returns the fd, or -1. */
static int take_one(int d, const char *name, const char *temp)
{
    int fd = openat(d, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
        (st.st_mode & 077) == 0 && st.st_uid == geteuid() && tt_partial_lock(fd) == 0 &&
        syscall(SYS_renameat2, d, name, AT_FDCWD, temp, 1 /* RENAME_NOREPLACE */) == 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        return fd;
    }
    close(fd);
    return -1;
}

int tt_partial_take(const char *temp)
{
    const char *slash = strrchr(temp, '/');
    if (!slash || slash - temp > 4096)
        return -1;
    /* as long as the name (a 4 KiB array here was one more page of stack a process touched) */
    char dir[(size_t)(slash - temp) + sizeof "/" TT_SPARES_DIR];
    snprintf(dir, sizeof dir, "%.*s/%s", (int)(slash - temp), temp, TT_SPARES_DIR);
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return -1;
    /* a handful of names, read once: a spare taken meanwhile by another process is passed */
    _Alignas(8) char buf[2048];
    long n = syscall(SYS_getdents64, d, buf, sizeof buf);
    int fd = -1;
    for (long off = 0; n > 0 && off < n && fd < 0;) {
        const struct dirent64 *de = (const struct dirent64 *)(const void *)(buf + off);
        if (de->d_reclen == 0)
            break;
        off += de->d_reclen;
        if (de->d_name[0] != '.')
            fd = take_one(d, de->d_name, temp);
    }
    close(d);
    return fd;
}

int tt_partial_reopen(const char *temp, uint64_t dev, uint64_t ino)
{
    /* no O_CREAT: a file removed meanwhile (gc, once our lock was gone with the descriptor) is
     * not made again, empty, under the name */
    int fd = open(temp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) != 0)
        e = errno;
    else if ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino)
        e = ESTALE; /* another file under the name: never write into it */
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

bool tt_partial_locked(int fd)
{
    struct flock fl = whole(F_WRLCK);
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return false;
    return fl.l_type != F_UNLCK;
}

tt_partial_state tt_partial_probe(int dirfd, const char *name, long *pid)
{
    long p = 0;
    if (!tt_partial_parse(name, &p))
        return TT_PARTIAL_NONE;
    if (pid)
        *pid = p;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return TT_PARTIAL_NONE;
    struct stat st;
    char magic[8];
    bool trace = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                 pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
                 memcmp(magic, TT_MAGIC, sizeof magic) == 0;
    bool live = trace && tt_partial_locked(fd);
    close(fd);
    if (!trace)
        return TT_PARTIAL_NONE;
    return live ? TT_PARTIAL_LIVE : TT_PARTIAL_DEAD;
}
