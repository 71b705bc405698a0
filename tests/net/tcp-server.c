/* SPDX-License-Identifier: MIT */
/* A TCP server for tests/net: serves N clients (3 by default) one after the other on a port of
 * 127.0.0.1 the kernel picks, and logs each with the time. It waits for a client with select,
 * names the peer with getnameinfo, reads one line, logs it, answers and closes.
 *
 * Usage: tcp-server LOGFILE [N]. Prints "port P" once it listens, then a line per client.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tcp-server LOGFILE [N]\n");
        return 2;
    }
    int clients = argc > 2 ? atoi(argv[2]) : 3;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 8) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        perror("tcp-server: listen");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (int n = 1; n <= clients; n++) {
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(ls, &rs);
        struct timeval tv = { 10, 0 };
        int r = select(ls + 1, &rs, NULL, NULL, &tv);
        if (r <= 0) {
            fprintf(stderr, "tcp-server: select: %s\n", r ? strerror(errno) : "no client");
            return 1;
        }
        struct sockaddr_storage peer;
        socklen_t pl = sizeof peer;
        int c = accept(ls, (struct sockaddr *)&peer, &pl);
        if (c < 0) {
            perror("tcp-server: accept");
            return 1;
        }
        char host[NI_MAXHOST], serv[NI_MAXSERV];
        if (getnameinfo((struct sockaddr *)&peer, pl, host, sizeof host, serv, sizeof serv,
                        NI_NUMERICHOST | NI_NUMERICSERV) != 0)
            strcpy(host, "?"), strcpy(serv, "?");
        char line[512];
        size_t len = 0;
        while (len < sizeof line - 1) {
            ssize_t k = recv(c, line + len, 1, 0);
            if (k <= 0 || line[len] == '\n')
                break;
            len++;
        }
        line[len] = '\0';
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        FILE *log = fopen(argv[1], "a");
        if (!log) {
            perror("tcp-server: log");
            return 1;
        }
        fprintf(log, "%lld.%09ld client %d from %s:%s said \"%s\"\n", (long long)now.tv_sec,
                now.tv_nsec, n, host, serv, line);
        fclose(log);
        char answer[700];
        int al2 = snprintf(answer, sizeof answer, "hello %d, you said \"%s\" at %lld.%09ld\n", n,
                           line, (long long)now.tv_sec, now.tv_nsec);
        if (write(c, answer, (size_t)al2) != al2)
            perror("tcp-server: write");
        close(c);
        printf("client %d from port %s: %s\n", n, serv, line);
    }
    close(ls);
    printf("served %d clients\n", clients);
    return 0;
}
