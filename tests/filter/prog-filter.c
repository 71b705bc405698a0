/* SPDX-License-Identifier: MIT */
/* A program of known call shape for tests/filter/test-filter.py, built with
 * -finstrument-functions: main calls work(N) and other(); work calls leaf N times, and every
 * leaf calls inner once; other calls inner too. So --filter leaf records leaf and inner (N calls
 * each), --notrace leaf records main, work, other and other's one inner, and --depth 2 records
 * main, work and other. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

void inner(unsigned long v);
void leaf(unsigned long v);
void work(int n);
void other(void);

static volatile unsigned long sink;

NOINLINE void inner(unsigned long v)
{
    sink += v * 2654435761u;
}

NOINLINE void leaf(unsigned long v)
{
    inner(v + 1);
}

NOINLINE void work(int n)
{
    for (int i = 0; i < n; i++)
        leaf((unsigned long)i);
}

NOINLINE void other(void)
{
    inner(7);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10;
    work(n);
    other();
    printf("%lu\n", sink);
    return 0;
}
