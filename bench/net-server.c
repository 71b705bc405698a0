/* SPDX-License-Identifier: MIT */
/* bench/net-server: the HTTP server of bench/net-loop. One thread; for each connection it reads
 * the request up to its blank line, answers with the current time in nanoseconds and closes.
 * It listens on 127.0.0.1 at a port the kernel picks, prints "port P" and serves until killed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 128) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        perror("net-server");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0)
            continue;
        char req[2048];
        size_t len = 0;
        while (len < sizeof req - 1) {
            ssize_t n = recv(c, req + len, sizeof req - 1 - len, 0);
            if (n <= 0)
                break;
            len += (size_t)n;
            req[len] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        char body[64], resp[256];
        int bl = snprintf(body, sizeof body, "time %lld%09ld\n", (long long)now.tv_sec,
                          now.tv_nsec);
        int rl = snprintf(resp, sizeof resp,
                          "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
                          "Content-Length: %d\r\n\r\n%s", bl, body);
        if (send(c, resp, (size_t)rl, 0) != rl)
            perror("net-server: send");
        close(c);
    }
}
