/* SPDX-License-Identifier: MIT */
/* prog-pipes: readers of pipes that run ahead of their writers in a replay (test-proctree.py;
 * preload/read.c: a replayed read takes what the pipe holds, and the rest is paid before the
 * process leaves its writer behind).
 *
 *   prog-pipes two     a parent reads 163840 bytes from pipe b, then 1 byte from pipe a,
 *                      closes a, then b, and waits for its child, which fills b, spins, writes
 *                      the rest of b (blocked until b is drained), then writes the byte to a:
 *                      paying a's byte must drain b meanwhile, or the child never writes it
 *   prog-pipes threads a parent reads 1000 bytes from pipe b and 1 from pipe a, which its
 *                      child writes after spinning, b first; then one thread closes a while
 *                      another closes b: each close pays its own pipe, whatever the other's
 *                      does meanwhile
 *   prog-pipes fclose  reads a line from stdin with stdio and closes stdin with fclose, whose
 *                      close is glibc's own, unseen by the interposer; stdin is a pipe whose
 *                      writer spins before it writes
 *
 * Each prints what it read; the writer reports whether its write went through. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIRST 65536
#define REST 98304

static void spin_n(unsigned long n)
{
    for (volatile unsigned long i = 0; i < n; i++)
        ;
}

static void spin(void)
{
    spin_n(30000000UL);
}

static int put(int fd, size_t len)
{
    static char z[8192];
    while (len) {
        ssize_t w = write(fd, z, len < sizeof z ? len : sizeof z);
        if (w <= 0)
            return -1;
        len -= (size_t)w;
    }
    return 0;
}

/* Two pipes and a child: the child's pid in the parent, which keeps the read ends, 0 in the
 * child, which keeps the write ends and ignores SIGPIPE (a write to a closed pipe then fails
 * and says so), -1 on failure. */
static pid_t pipes_and_child(int a[2], int b[2])
{
    if (pipe(a) != 0 || pipe(b) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0)
        signal(SIGPIPE, SIG_IGN);
    close(pid == 0 ? a[0] : a[1]);
    close(pid == 0 ? b[0] : b[1]);
    return pid;
}

/* Reads @fd into @buf until it is full or ends; returns how much. */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    return n;
}

static int status_of(pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int two(void)
{
    int a[2], b[2];
    pid_t pid = pipes_and_child(a, b);
    if (pid < 0)
        return 2;
    if (pid == 0) {
        int ok = put(b[1], FIRST) == 0;
        spin();
        ok = ok && put(b[1], REST) == 0;
        ok = ok && write(a[1], "x", 1) == 1;
        printf("child: wrote all: %s\n", ok ? "yes" : "no");
        fflush(stdout);
        _exit(ok ? 0 : 4);
    }
    static char buf[FIRST + REST];
    size_t n = read_all(b[0], buf, sizeof buf);
    char x = 0;
    ssize_t ra = read(a[0], &x, 1);
    close(a[0]);
    close(b[0]);
    printf("parent: read %zu and %zd (%c); the child's status %d\n", n, ra, x ? x : '-',
           status_of(pid));
    return 0;
}

static int pa[2], pb[2];

static void *close_b(void *arg)
{
    (void)arg;
    close(pb[0]);
    return NULL;
}

static int threads(void)
{
    pid_t pid = pipes_and_child(pa, pb);
    if (pid < 0)
        return 2;
    if (pid == 0) {
        static char z[1000];
        spin_n(300000000UL); /* long enough for both closes to come first in a replay */
        ssize_t wb = write(pb[1], z, sizeof z);
        spin();
        ssize_t wa = write(pa[1], "x", 1);
        printf("child: wrote b %zd, a %zd\n", wb, wa);
        fflush(stdout);
        _exit(wb == (ssize_t)sizeof z && wa == 1 ? 0 : 4);
    }
    static char buf[1000];
    size_t n = read_all(pb[0], buf, sizeof buf);
    char x = 0;
    ssize_t ra = read(pa[0], &x, 1);
    pthread_t t;
    if (pthread_create(&t, NULL, close_b, NULL) != 0)
        return 2;
    close(pa[0]);
    pthread_join(t, NULL);
    printf("parent: read %zu and %zd; the child's status %d\n", n, ra, status_of(pid));
    return 0;
}

static int fclose_stdin(void)
{
    char line[64] = "";
    if (!fgets(line, sizeof line, stdin))
        return 2;
    if (fclose(stdin) != 0)
        return 3;
    spin();
    printf("read %s", line);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "two") == 0)
        return two();
    if (argc == 2 && strcmp(argv[1], "threads") == 0)
        return threads();
    if (argc == 2 && strcmp(argv[1], "fclose") == 0)
        return fclose_stdin();
    fprintf(stderr, "usage: prog-pipes two|threads|fclose\n");
    return 2;
}
