/* SPDX-License-Identifier: MIT */
/* Records calls, forks a child that makes calls of its own, and goes on in the parent. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static int parent_step(int x)
{
    return x + 1;
}

__attribute__((noinline)) static int child_step(int x)
{
    return x * 2;
}

int main(void)
{
    int v = 0;
    for (int i = 0; i < 100; i++)
        v = parent_step(v);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int c = 0;
        for (int i = 0; i < 1000; i++)
            c = child_step(c + i);
        _exit(c == 0 ? 3 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 100; i++)
        v = parent_step(v);
    printf("parent %d child-status %d\n", v, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
