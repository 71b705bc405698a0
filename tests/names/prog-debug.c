/* SPDX-License-Identifier: MIT */
/* A program for tests/names/test-debuginfo.py: built with -g and -finstrument-functions, then
 * stripped by the test, its debug information in a separate file named by .gnu_debuglink. It
 * reads how many times to call leaf from the file argv[1] (a regular file: replay reads it live),
 * so that a replay after the file changed diverges at a function of the stripped program. It
 * prints the descriptor it got, which replay compares: one that the tool left open when it
 * started the program would shift it. */
#include <stdio.h>
#include <stdlib.h>

void leaf(int i);
void work(int n);

static volatile int sink;

void leaf(int i)
{
    sink += i;
}

void work(int n)
{
    for (int i = 0; i < n; i++)
        leaf(i);
}

int main(int argc, char **argv)
{
    int n = 3;
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (f != NULL) {
        printf("fd %d\n", fileno(f)); /* compared on replay: a descriptor the tool leaked shifts it */
        if (fscanf(f, "%d", &n) != 1)
            n = 3;
        fclose(f);
    }
    work(n);
    return 0;
}
