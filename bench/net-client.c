/* SPDX-License-Identifier: MIT */
/* bench/net-client: the client of bench/net-loop. Makes N HTTP/1.0 requests to 127.0.0.1:PORT,
 * one connection each (socket, connect, send, recv to the end, close), and prints the number
 * of requests, the bytes received and an FNV-1a hash of all the bodies.
 *
 * Usage: net-client PORT N
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: net-client PORT N\n");
        return 2;
    }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    long n = atol(argv[2]);
    static const char req[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    uint64_t hash = 14695981039346656037ull, bytes = 0;
    for (long i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            perror("net-client: connect");
            return 1;
        }
        if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
            perror("net-client: send");
            return 1;
        }
        char resp[1024];
        size_t len = 0;
        for (;;) {
            ssize_t k = recv(fd, resp + len, sizeof resp - 1 - len, 0);
            if (k <= 0)
                break;
            len += (size_t)k;
        }
        close(fd);
        resp[len] = '\0';
        const char *body = strstr(resp, "\r\n\r\n");
        if (!body) {
            fprintf(stderr, "net-client: request %ld: no response\n", i);
            return 1;
        }
        for (const char *p = body + 4; *p; p++)
            hash = (hash ^ (unsigned char)*p) * 1099511628211ull;
        bytes += len;
    }
    printf("requests %ld bytes %llu hash %016llx\n", n, (unsigned long long)bytes,
           (unsigned long long)hash);
    return 0;
}
