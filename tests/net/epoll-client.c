/* SPDX-License-Identifier: MIT */
/* An HTTP client for tests/net: a non-blocking connect (EINPROGRESS, then SO_ERROR) and epoll
 * for every wait; prints the response's body.
 *
 * Usage: epoll-client PORT [PATH]
 */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int wait_for(int ep, int fd, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.fd = fd };
    if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0) {
        perror("epoll_ctl");
        return -1;
    }
    struct epoll_event got[4];
    for (;;) {
        int n = epoll_wait(ep, got, 4, 5000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "epoll_wait: %s\n", n ? strerror(errno) : "timeout");
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (got[i].data.fd == fd)
                return (int)got[i].events;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: epoll-client PORT [PATH]\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0 || ep < 0) {
        perror("socket");
        return 1;
    }
    struct epoll_event ev = { .events = EPOLLOUT, .data.fd = fd };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        perror("connect");
        return 1;
    }
    if (wait_for(ep, fd, EPOLLOUT) < 0)
        return 1;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
        fprintf(stderr, "connect: %s\n", strerror(err));
        return 1;
    }
    char req[256];
    int rl = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
                      argc > 2 ? argv[2] : "/");
    for (int off = 0; off < rl;) {
        ssize_t n = send(fd, req + off, (size_t)(rl - off), MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN) {
            if (wait_for(ep, fd, EPOLLOUT) < 0)
                return 1;
            continue;
        }
        if (n < 0) {
            perror("send");
            return 1;
        }
        off += (int)n;
    }
    static char resp[1 << 16];
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, resp + len, sizeof resp - 1 - len, 0);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        if (n == 0)
            break;
        if (errno != EAGAIN && errno != EINTR) {
            perror("recv");
            return 1;
        }
        if (wait_for(ep, fd, EPOLLIN) < 0)
            return 1;
    }
    resp[len] = '\0';
    char *body = strstr(resp, "\r\n\r\n");
    if (!body) {
        fprintf(stderr, "no response\n");
        return 1;
    }
    fputs(body + 4, stdout);
    close(fd);
    close(ep);
    return 0;
}
