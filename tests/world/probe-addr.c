/* SPDX-License-Identifier: MIT */
/* Prints where the program's memory is: a stack variable of main, a malloc'd block, a mapping
 * made with mmap(NULL, ...), a hash of the three (what Lua and bash mix into their seeds), the
 * 16 bytes at AT_RANDOM, the environment's size and argv. A replay under the same address space
 * prints the same lines as its recording. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

extern char **environ;

int main(int argc, char **argv)
{
    int on_stack = argc;
    void *heap = malloc(100);
    void *map = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t h = 1469598103934665603ull;
    uintptr_t v[3] = { (uintptr_t)&on_stack, (uintptr_t)heap, (uintptr_t)map };
    for (int i = 0; i < 3; i++)
        h = (h ^ v[i]) * 1099511628211ull;
    printf("stack %p heap %p mmap %p hash %016llx\n", (void *)&on_stack, heap, map,
           (unsigned long long)h);
    const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
    printf("at_random ");
    for (int i = 0; r && i < 16; i++)
        printf("%02x", r[i]);
    size_t n = 0, bytes = 0;
    for (char **e = environ; *e; e++, n++)
        bytes += strlen(*e) + 1;
    printf("\nenv %zu variables, %zu bytes\n", n, bytes);
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "TINYTRACE", 9) == 0)
            printf("env %s\n", *e);
    for (int i = 0; i < argc; i++)
        printf("argv[%d] %s\n", i, argv[i]);
    free(heap);
    return 0;
}
