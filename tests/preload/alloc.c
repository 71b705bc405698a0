/* SPDX-License-Identifier: MIT */
/* preload-alloc N: allocates with every function of the malloc family, with sizes derived from
 * N, and frees it all. Recorded with TINYTRACE_ALLOC=1, a replay with the same N matches and a
 * replay with another N diverges on the first allocation size. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* touches a block, so the compiler keeps the allocation */
static unsigned touch(void *p, size_t n)
{
    if (!p)
        return 0;
    memset(p, (int)(n & 0x7f), n);
    return ((unsigned char *)p)[n - 1];
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 100;
    char *p = malloc(n);
    char *q = realloc(p, n * 2);
    if (q)
        p = q;
    void *c = calloc(3, n);
    void *a = NULL;
    if (posix_memalign(&a, 64, n + 1) != 0)
        a = NULL;
    void *b = aligned_alloc(64, 64 * (n / 64 + 1));
    void *m = memalign(32, n + 3);
    void *v = valloc(n + 4);
    unsigned sum = touch(p, n * 2) + touch(c, 3 * n) + touch(a, n + 1) +
                   touch(b, 64 * (n / 64 + 1)) + touch(m, n + 3) + touch(v, n + 4);
    free(p);
    free(c);
    free(a);
    free(b);
    free(m);
    free(v);
    printf("allocated around %zu bytes (%u)\n", n, sum);
    return 0;
}
