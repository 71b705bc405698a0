/* SPDX-License-Identifier: MIT */
/* preload-own-alloc: a program with an allocator of its own in the executable, as one linked
 * statically with jemalloc, mimalloc or tcmalloc is. The executable comes first in the loader's
 * search order, so its malloc family serves libc and every library too, the runtime's calls
 * included. A block this allocator did not make, handed to its free or realloc, ends the
 * program with status 99: the runtime must give each block back to whoever made it (a libc
 * function's result, open_memstream's buffer for one, goes to this free). */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA_BYTES (64u << 20)

static unsigned char *arena;
static size_t arena_used;

static _Noreturn void refuse(const char *what)
{
    static const char msg[] = "own-alloc: a block this allocator did not make: ";
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, what, strlen(what));
    (void)!write(2, "\n", 1);
    _exit(99);
}

static int ours(const void *p)
{
    return arena && (const unsigned char *)p >= arena &&
           (const unsigned char *)p < arena + ARENA_BYTES;
}

/* 16 bytes of header before each block: its size, and a word glibc's free would misread */
void *malloc(size_t n)
{
    if (!arena) {
        void *m = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        arena = m;
    }
    size_t need = ((n + 15) & ~(size_t)15) + 16;
    size_t at = __atomic_fetch_add(&arena_used, need, __ATOMIC_RELAXED);
    if (at + need > ARENA_BYTES) {
        errno = ENOMEM;
        return NULL;
    }
    uint64_t *h = (uint64_t *)(void *)(arena + at);
    h[0] = n;
    h[1] = UINT64_C(0x5a5a5a5a5a5a5a5a);
    return h + 2;
}

void free(void *p)
{
    if (p && !ours(p))
        refuse("free");
}

void *calloc(size_t a, size_t b)
{
    if (b && a > SIZE_MAX / b)
        return NULL;
    void *p = malloc(a * b);
    if (p)
        memset(p, 0, a * b);
    return p;
}

void *realloc(void *old, size_t n)
{
    if (old && !ours(old))
        refuse("realloc");
    void *p = malloc(n);
    if (p && old) {
        size_t was = (size_t)((uint64_t *)old)[-2];
        memcpy(p, old, was < n ? was : n);
    }
    return p;
}

void *reallocarray(void *old, size_t a, size_t b)
{
    return b && a > SIZE_MAX / b ? NULL : realloc(old, a * b);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    unsigned char *p = malloc(n + align);
    if (!p)
        return ENOMEM;
    uintptr_t u = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    *out = (void *)u; /* never handed to free here: the program does not */
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    void *p;
    return posix_memalign(&p, align, n) ? NULL : p;
}

void *memalign(size_t align, size_t n)
{
    return aligned_alloc(align, n);
}

size_t malloc_usable_size(void *p)
{
    return p ? (size_t)((uint64_t *)p)[-2] : 0;
}

int main(void)
{
    char *s = malloc(64);
    if (!s)
        return 1;
    snprintf(s, 64, "own allocator, pid parity %d\n", (int)(getpid() & 1));
    fputs(s, stdout);
    free(s);
    return 0;
}
