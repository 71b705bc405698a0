/* SPDX-License-Identifier: MIT */
/* stdio. glibc's stdio calls its internal read and write, which no interposer sees. So stdin,
 * when it is a pipe, socket or terminal, is replaced at start by a fopencookie stream whose read
 * function is the interposed read (its buffer size and line mode are chosen as glibc would
 * have: st_blksize, line-buffered on a terminal; its fileno is kept); stdout and stderr are
 * replaced the same way when output is checked; and fopen of /dev/urandom and /dev/random, or
 * of a pseudo-file in /proc or /sys (pseudo.c), returns such a stream too. libstdc++'s
 * std::cin/cout/cerr hold glibc's original FILEs, so the handful of stdio functions libstdc++
 * calls on them (fread, getc, ungetc, fwrite, putc, fputc, fputs, fflush) redirect the original
 * streams to their replacements (tt_pl_redirect). glibc makes such streams byte-only, so the
 * wide-character functions are rebuilt over bytes on them (wchar.c).
 */
#include "preload.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*open_fn)(const char *, int, ...);
typedef int (*close_fn)(int);
typedef FILE *(*fopen_fn)(const char *restrict, const char *restrict);

/* A stream whose reads and writes go through the interposed calls. */
struct cookie {
    int fd;
    int std; /* 0, 1, 2 for the replaced standard streams, -1 for a random device */
};

static struct cookie std_cookies[3] = { { 0, 0 }, { 1, 1 }, { 2, 2 } };
/* glibc's own standard streams and their replacements (NULL: not replaced). Set by the
 * constructor before the program runs; cleared when the program closes a replacement.
 * Relaxed: the constructor runs before the program has another thread, and a program that
 * closes a standard stream while another thread still uses it has a race of its own. */
FILE *_Atomic tt_pl_std_orig[3];
FILE *_Atomic tt_pl_std_repl[3];
static char std_buf[3][BUFSIZ] TT_BIG_BSS;

static ssize_t ck_read(void *c, char *buf, size_t n)
{
    return tt_pl_read_fd(((struct cookie *)c)->fd, buf, n);
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
    /* as glibc's file streams: write until done or an error (a short count marks the error) */
    int fd = ((struct cookie *)c)->fd;
    size_t done = 0;
    while (done < n) {
        ssize_t r = fd == 1 || fd == 2 ? tt_pl_out_write(fd, buf + done, n - done)
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
    FILE *orig = atomic_exchange_explicit(&tt_pl_std_orig[k->std], NULL, memory_order_relaxed);
    atomic_store_explicit(&tt_pl_std_repl[k->std], NULL, memory_order_relaxed);
    if (!orig)
        return close(k->fd);
    if (k->std == 0)
        stdin = orig;
    else if (k->std == 1)
        stdout = orig;
    else
        stderr = orig;
    /* glibc's fclose closes through its own close, which the interposer does not see: what
     * the replayed reads of a pipe owe it is paid first (read.c) */
    if (k->std == 0 && tt_rt_guard_enter()) {
        tt_pl_pipes_settle(k->fd);
        tt_rt_guard_leave();
    }
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

void tt_pl_std_replace(int i)
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
    atomic_store_explicit(&tt_pl_std_orig[i], orig, memory_order_relaxed);
    atomic_store_explicit(&tt_pl_std_repl[i], fp, memory_order_relaxed);
    if (i == 0)
        stdin = fp;
    else if (i == 1)
        stdout = fp;
    else
        stderr = fp;
}

FILE *tt_pl_fd_stream(int fd)
{
    struct cookie *c = malloc(sizeof *c);
    FILE *fp = NULL;
    if (c) {
        c->fd = fd;
        c->std = -1;
        fp = ck_open(c, "r");
    }
    if (!fp) {
        int err = errno;
        free(c);
        errno = err;
    }
    return fp;
}

static FILE *fopen_common(enum real_fn id, const char *restrict path, const char *restrict mode)
{
    fopen_fn f = REAL(fopen, fopen_fn);
    if (id == RF_fopen64)
        f = REAL(fopen64, fopen_fn);
    FILE *fp = NULL;
    if (tt_pl_pseudo_fopen(path, mode, &fp))
        return fp;
    if (!tt_pl_is_random_path(path) || !mode || mode[0] != 'r' || strchr(mode, '+'))
        return f(path, mode);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(path, mode);
    /* a stream on a random device: its reads must reach the interposed read */
    int fd = REAL(open, open_fn)(path, O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0), 0);
    int err = errno;
    if (fd >= 0) {
        tt_pl_fd_mark(fd, true);
        fp = tt_pl_fd_stream(fd);
        err = errno;
        if (!fp) {
            tt_pl_fd_mark(fd, false);
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
                                                                          tt_pl_redirect(fp));
}

TT_EXPORT int fputc(int c, FILE *fp)
{
    return REAL(fputc, int (*)(int, FILE *))(c, tt_pl_redirect(fp));
}

TT_EXPORT int putc(int c, FILE *fp)
{
    return REAL(putc, int (*)(int, FILE *))(c, tt_pl_redirect(fp));
}

TT_EXPORT int fputs(const char *restrict str, FILE *restrict fp)
{
    return REAL(fputs, int (*)(const char *, FILE *))(str, tt_pl_redirect(fp));
}

TT_EXPORT int fflush(FILE *fp)
{
    return REAL(fflush, int (*)(FILE *))(tt_pl_redirect(fp));
}

TT_EXPORT size_t fread(void *restrict p, size_t size, size_t n, FILE *restrict fp)
{
    return REAL(fread, size_t (*)(void *, size_t, size_t, FILE *))(p, size, n,
                                                                   tt_pl_redirect(fp));
}

TT_EXPORT int getc(FILE *fp)
{
    return REAL(getc, int (*)(FILE *))(tt_pl_redirect(fp));
}

TT_EXPORT int ungetc(int c, FILE *fp)
{
    return REAL(ungetc, int (*)(int, FILE *))(c, tt_pl_redirect(fp));
}
