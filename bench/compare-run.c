/* SPDX-License-Identifier: MIT */
/* compare-run — runs one command of bench/compare and measures it.
 *
 * Usage: compare-run OUT CMD [ARGS...]
 *
 * Runs CMD, waits for it, and writes one line to the file OUT:
 *     wall_ns cpu_ns maxrss_kib status
 * wall_ns is CLOCK_MONOTONIC from fork to the end of the wait; cpu_ns is user + system time of
 * CMD and of every descendant it waited for, all their threads included (getrusage
 * RUSAGE_CHILDREN); maxrss_kib is the largest peak resident set among them (for
 * `tinytrace record` and `uftrace record`, the traced program is the largest); status is CMD's
 * exit status, or 128 + N when signal N killed it. compare-run exits with that status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "Usage: compare-run OUT CMD [ARGS...]\n");
        return 2;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        fprintf(stderr, "compare-run: %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    uint64_t t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("compare-run: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        fprintf(stderr, "compare-run: %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            perror("compare-run: waitpid");
            return 2;
        }
    uint64_t t1 = now_ns();
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    fprintf(out, "%llu %llu %ld %d\n", (unsigned long long)(t1 - t0),
            (unsigned long long)(tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime)), ru.ru_maxrss, status);
    if (fclose(out) != 0) {
        perror("compare-run: OUT");
        return 2;
    }
    return status;
}
