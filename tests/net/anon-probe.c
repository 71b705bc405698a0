/* SPDX-License-Identifier: MIT */
/* Reads of anonymous-inode fds for tests/net: a timerfd's expirations after a sleep, an
 * eventfd's counter, a signalfd's signal, and epoll's view of them; prints each.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec its = { { 0, 200000 }, { 0, 200000 } };
    timerfd_settime(tfd, 0, &its, NULL);
    int efd = eventfd(0, EFD_CLOEXEC);
    eventfd_write(efd, 3);
    uint64_t four = 4;
    if (write(efd, &four, sizeof four) != sizeof four)
        perror("write");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    raise(SIGUSR1);

    struct timespec nap = { 0, 3000000 };
    nanosleep(&nap, NULL);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int fds[] = { tfd, efd, sfd };
    for (int i = 0; i < 3; i++) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
    }
    struct epoll_event got[3];
    int n = epoll_wait(ep, got, 3, 1000);
    printf("epoll: %d ready:", n);
    for (int i = 0; i < n; i++)
        printf(" %u", got[i].data.u32);
    printf("\n");

    uint64_t v = 0;
    if (read(tfd, &v, sizeof v) == sizeof v)
        printf("timerfd: %llu expirations\n", (unsigned long long)v);
    eventfd_t e = 0;
    if (eventfd_read(efd, &e) == 0)
        printf("eventfd: %llu\n", (unsigned long long)e);
    struct signalfd_siginfo si;
    if (read(sfd, &si, sizeof si) == sizeof si)
        printf("signalfd: signal %u code %d\n", si.ssi_signo, si.ssi_code);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("monotonic %lld.%09ld\n", (long long)now.tv_sec, now.tv_nsec);
    return 0;
}
