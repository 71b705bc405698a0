/* The anchor loop workload: a tight loop calling a non-inlined leaf N times (2N enter/exit
 * events when built with -finstrument-functions). N is the first argument. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static unsigned long leaf(unsigned long i)
{
    __asm__ volatile("" ::: "memory");
    return i * 2654435761u >> 7;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    unsigned long acc = 0;
    for (long i = 0; i < n; i++)
        acc += leaf((unsigned long)i);
    printf("%lu\n", acc);
    return 0;
}
