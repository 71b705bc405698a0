/* SPDX-License-Identifier: MIT */
/* maxrss PROGRAM [ARGS...] — runs PROGRAM and prints its peak resident set size in KiB on
 * stderr as "maxrss KIB", then exits with its exit status (128 + N when signal N killed it).
 *
 * A test written in Python cannot measure this itself: a child's ru_maxrss includes the memory
 * of the process it was forked from, so every child of a Python interpreter "uses" at least the
 * interpreter's RSS. This wrapper is small, so what it reports is the program's own peak. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct rusage ru;
    int status;
    pid_t pid;

    if (argc < 2) {
        fprintf(stderr, "usage: maxrss PROGRAM [ARGS...]\n");
        return 2;
    }
    pid = fork();
    if (pid < 0) {
        perror("maxrss: fork");
        return 127;
    }
    if (pid == 0) {
        execvp(argv[1], argv + 1);
        perror("maxrss: exec");
        _exit(127);
    }
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("maxrss: wait4");
        return 127;
    }
    fprintf(stderr, "maxrss %ld\n", ru.ru_maxrss);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
