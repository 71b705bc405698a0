/* SPDX-License-Identifier: MIT */
/* A -finstrument-functions program with a known call sequence. Built twice: as is, and with
 * -DEXTRA_CALL, which adds one call to a function the first build does not have. */
#include <stdio.h>

__attribute__((noinline)) static int leaf(int x)
{
    return x * 3 + 1;
}

__attribute__((noinline)) static int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

#ifdef EXTRA_CALL
__attribute__((noinline)) static int extra_step(int x)
{
    volatile int seven = 7; /* a local, for `info locals` in the debugger's test */
    return x + seven;
}
#endif

__attribute__((noinline)) static int caller_of_new_code(int x)
{
    int v = leaf(x);
#ifdef EXTRA_CALL
    v = extra_step(v);
#endif
    return fib(8) + v;
}

int main(void)
{
    int total = 0;
    for (int i = 0; i < 5; i++)
        total += leaf(i);
    total += caller_of_new_code(3);
    printf("total=%d\n", total);
    return 0;
}
