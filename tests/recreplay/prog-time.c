/* SPDX-License-Identifier: MIT */
/* A program whose output depends on its environment: the clocks, random bytes and its pid. Run
 * twice it prints two different lines; replayed, the recorded one.
 *
 *   prog-time [--exit N] [--extra] [--fewer] [--crash] [--kill] [--touch FILE]
 *
 * --exit N    exit with status N (after printing)
 * --extra     read the clock once more at the end than the plain run does
 * --fewer     stop after the first clock read: a prefix of the plain run's calls
 * --crash     die by SIGSEGV after printing (the output is flushed first)
 * --kill      die by SIGKILL after printing: no handler, no exit code runs
 * --touch F   create file F first, to show that the program ran
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int status = 0, extra = 0, fewer = 0, crash = 0, killme = 0;
    struct timespec rt, mono;
    struct timeval tv;
    unsigned char rnd[8] = {0};
    time_t now;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--exit") == 0 && i + 1 < argc)
            status = atoi(argv[++i]);
        else if (strcmp(argv[i], "--extra") == 0)
            extra = 1;
        else if (strcmp(argv[i], "--fewer") == 0)
            fewer = 1;
        else if (strcmp(argv[i], "--crash") == 0)
            crash = 1;
        else if (strcmp(argv[i], "--kill") == 0)
            killme = 1;
        else if (strcmp(argv[i], "--touch") == 0 && i + 1 < argc) {
            int fd = open(argv[++i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0)
                close(fd);
        } else {
            fprintf(stderr, "prog-time: unknown argument '%s'\n", argv[i]);
            return 64;
        }
    }

    clock_gettime(CLOCK_REALTIME, &rt);
    if (fewer) {
        printf("realtime=%lld.%09ld\n", (long long)rt.tv_sec, rt.tv_nsec);
        return status;
    }
    clock_gettime(CLOCK_MONOTONIC, &mono);
    gettimeofday(&tv, NULL);
    now = time(NULL);
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return 65;
    printf("realtime=%lld.%09ld monotonic=%lld.%09ld tod=%lld.%06ld time=%lld random=",
           (long long)rt.tv_sec, rt.tv_nsec, (long long)mono.tv_sec, mono.tv_nsec,
           (long long)tv.tv_sec, (long)tv.tv_usec, (long long)now);
    for (size_t i = 0; i < sizeof rnd; i++)
        printf("%02x", rnd[i]);
    printf(" pid=%ld\n", (long)getpid());
    if (extra) {
        clock_gettime(CLOCK_MONOTONIC, &mono);
        printf("extra=%lld.%09ld\n", (long long)mono.tv_sec, mono.tv_nsec);
    }
    fflush(stdout);
    if (crash)
        raise(SIGSEGV);
    if (killme)
        raise(SIGKILL);
    return status;
}
