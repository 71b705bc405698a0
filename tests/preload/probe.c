/* SPDX-License-Identifier: MIT */
/* preload-probe: reads its environment through every call the preload library interposes, and
 * prints one line per call with what it got.
 *
 * Recorded and then replayed under libtinytrace-preload.so, it must print the same lines. The
 * bytes it sends to itself over sockets and pipes come from PROBE_WORD, which the test changes
 * between record and replay: a replayed receive returns the recorded word, not the one sent.
 * Everything else (clocks, random bytes, ports, pid) differs from one plain run to the next.
 *
 * preload-probe --longjmp jumps out of a blocked read from a timer's signal handler, then reads
 * its pid and the clock and ends with _exit (see longjmp_mode).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void hex(const char *what, const unsigned char *p, size_t n)
{
    printf("%s: ", what);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

/* TCP over loopback: recv with MSG_TRUNC discards bytes of a stream (tcp(7)) and takes no
 * buffer; the next recv gets what follows. */
static void tcp_trunc(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0), c = -1, s = -1;
    if (l >= 0 && bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 1) == 0 &&
        getsockname(l, (struct sockaddr *)&a, &al) == 0 &&
        (c = socket(AF_INET, SOCK_STREAM, 0)) >= 0 &&
        connect(c, (struct sockaddr *)&a, sizeof a) == 0 && (s = accept(l, NULL, NULL)) >= 0 &&
        send(c, "HELLOWORLD", 10, 0) == 10) {
        char b[8] = { 0 };
        ssize_t d = recv(s, NULL, 5, MSG_TRUNC | MSG_WAITALL);
        ssize_t n = recv(s, b, 5, MSG_WAITALL);
        printf("tcp MSG_TRUNC: discarded %zd, then %zd '%s'\n", d, n, b);
    } else {
        printf("tcp: unavailable\n");
    }
    if (s >= 0)
        close(s);
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
}

/* --longjmp: a timer's handler jumps out of a read that blocks (the alarm-timeout idiom), then
 * the program reads its pid and the clock and ends with _exit. */
static sigjmp_buf jump;

static void on_timer(int sig)
{
    (void)sig;
    siglongjmp(jump, 1);
}

static int longjmp_mode(void)
{
    int p[2];
    char c;
    if (pipe(p) != 0)
        return 1;
    signal(SIGALRM, on_timer);
    struct itimerval it = { .it_value = { .tv_usec = 50000 } };
    if (sigsetjmp(jump, 1) == 0) {
        setitimer(ITIMER_REAL, &it, NULL);
        ssize_t n = read(p[0], &c, 1); /* nothing ever comes */
        printf("read returned %zd\n", n);
    }
    printf("after the jump: pid %ld time %lld\n", (long)getpid(), (long long)time(NULL));
    fflush(stdout);
    _exit(0);
}

static void *worker(void *arg)
{
    unsigned char b[8];
    ssize_t n = getrandom(b, sizeof b, 0);
    hex("thread getrandom", b, n > 0 ? (size_t)n : 0);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("thread monotonic: %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
    return arg;
}

static void udp(const char *word)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        printf("udp: unavailable\n");
        if (s >= 0)
            close(s);
        return;
    }
    /* a second socket sends, so the source port is a fresh ephemeral one every run */
    int t = socket(AF_INET, SOCK_DGRAM, 0);
    sendto(t, word, strlen(word), 0, (struct sockaddr *)&a, sizeof a);
    char buf[64] = { 0 };
    struct sockaddr_in from;
    socklen_t flen = sizeof from;
    ssize_t n = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &flen);
    printf("recvfrom: %zd '%s' from port %u (len %u)\n", n, n > 0 ? buf : "",
           (unsigned)ntohs(from.sin_port), (unsigned)flen);
    close(t);
    close(s);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--longjmp") == 0)
        return longjmp_mode();
    const char *word = getenv("PROBE_WORD");
    if (!word)
        word = "none";
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    printf("clock_gettime: %d %lld.%09ld\n", rc, (long long)ts.tv_sec, ts.tv_nsec);
    errno = 0;
    rc = clock_gettime((clockid_t)12345, &ts);
    printf("clock_gettime(bad clock): %d errno %d\n", rc, errno);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    printf("gettimeofday: %lld.%06ld\n", (long long)tv.tv_sec, (long)tv.tv_usec);
    time_t t0;
    time_t t1 = time(&t0);
    printf("time: %lld %lld\n", (long long)t1, (long long)t0);
    timespec_get(&ts, TIME_UTC);
    printf("timespec_get: %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);

    unsigned char b[16];
    ssize_t n = getrandom(b, sizeof b, 0);
    hex("getrandom", b, n > 0 ? (size_t)n : 0);
    getentropy(b, sizeof b);
    hex("getentropy", b, sizeof b);
    n = syscall(SYS_getrandom, b, sizeof b, 0);
    hex("syscall getrandom", b, n > 0 ? (size_t)n : 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 36)
    printf("arc4random: %08x %u\n", arc4random(), arc4random_uniform(1000000));
#endif
    int fd = open("/dev/urandom", O_RDONLY);
    n = read(fd, b, sizeof b);
    hex("read /dev/urandom", b, n > 0 ? (size_t)n : 0);
    close(fd);
    FILE *f = fopen("/dev/urandom", "r");
    size_t k = f ? fread(b, 1, sizeof b, f) : 0;
    hex("fread /dev/urandom", b, k);
    if (f)
        fclose(f);

    printf("getpid: %ld\n", (long)getpid());
    char host[256] = "";
    gethostname(host, sizeof host);
    struct utsname u;
    uname(&u);
    printf("hostname: %s %s\n", host, u.nodename);
    /* too small: glibc copies what fits and fails with ENAMETOOLONG */
    char cut[4] = "XXX";
    int hr = gethostname(cut, 2);
    printf("hostname cut: %d errno %d '%.2s'\n", hr, hr ? errno : 0, cut);
    /* the zone alone: glibc declares tv nonnull, the kernel and the vDSO accept NULL */
    struct timeval *volatile no_tv = NULL;
    struct timezone tz = { -7, -7 };
    int gr = gettimeofday(no_tv, &tz);
    printf("gettimeofday(NULL, tz): %d %d\n", gr, tz.tz_minuteswest);

    /* a pipe to itself, read with readv into two pieces */
    int p[2];
    if (pipe(p) == 0) {
        n = write(p[1], word, strlen(word));
        char x[3] = { 0 }, y[64] = { 0 };
        struct iovec iov[2] = { { x, 2 }, { y, sizeof y - 1 } };
        n = readv(p[0], iov, 2);
        printf("readv: %zd '%s' '%s'\n", n, x, y);
        close(p[0]);
        close(p[1]);
    }

    /* a socket pair: recv, then recvmsg into two pieces */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
        send(sv[0], word, strlen(word), 0);
        char buf[64] = { 0 };
        n = recv(sv[1], buf, sizeof buf - 1, 0);
        printf("recv: %zd '%s'\n", n, buf);
        send(sv[0], word, strlen(word), 0);
        char x[3] = { 0 }, y[64] = { 0 };
        struct iovec iov[2] = { { x, 2 }, { y, sizeof y - 1 } };
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
        n = recvmsg(sv[1], &m, 0);
        printf("recvmsg: %zd '%s' '%s' flags %d\n", n, x, y, m.msg_flags);
        close(sv[0]);
        /* the peer is gone: end of stream */
        n = recv(sv[1], buf, sizeof buf, 0);
        printf("recv after close: %zd\n", n);
        close(sv[1]);
    }
    udp(word);
    tcp_trunc();

    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL) == 0)
        pthread_join(th, NULL);
    return 0;
}
