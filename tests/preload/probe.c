/* preload-probe: reads its environment through every call the preload library interposes, and
 * prints one line per call with what it got.
 *
 * Recorded and then replayed under libtinytrace-preload.so, it must print the same lines. The
 * bytes it sends to itself over sockets and pipes come from PROBE_WORD, which the test changes
 * between record and replay: a replayed receive returns the recorded word, not the one sent.
 * Everything else (clocks, random bytes, ports, pid) differs from one plain run to the next.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
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

int main(void)
{
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

    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL) == 0)
        pthread_join(th, NULL);
    return 0;
}
