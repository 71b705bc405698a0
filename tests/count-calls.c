/* SPDX-License-Identifier: MIT */
/* Counting interposers; see count-calls.h. Built without _FILE_OFFSET_BITS so that open, mmap
 * and fopen are the plain symbols and their 64-bit forms can be defined beside them. The
 * allocation functions forward to glibc's __libc_* entry points, so that dlsym, which may
 * allocate, never recurses into them. */
#undef _FILE_OFFSET_BITS
#include "count-calls.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <string.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

/* Only the thread that called count_start counts: Criterion's own threads may allocate. */
static _Thread_local int counting;
static call_counts counts;

void count_start(void)
{
    counts = (call_counts){0};
    counting = 1;
}

call_counts count_stop(void)
{
    counting = 0;
    return counts;
}

#define COUNT(field) (counting ? (void)(counts.field++) : (void)0)
#define COUNT_BYTES(n) (counting ? (void)(counts.bytes += (n)) : (void)0)

void *malloc(size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    COUNT(mallocs);
    COUNT_BYTES((unsigned long long)a * b);
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p != NULL)
        COUNT(frees);
    __libc_free(p);
}

void *memalign(size_t al, size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    return __libc_memalign(al, n);
}

void *aligned_alloc(size_t al, size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    if (al < sizeof(void *) || (al & (al - 1)) != 0)
        return EINVAL;
    void *p = __libc_memalign(al, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    return __libc_valloc(n);
}

void *pvalloc(size_t n)
{
    COUNT(mallocs);
    COUNT_BYTES(n);
    return __libc_pvalloc(n);
}

/* The next definition of @name; dlsym's object pointer is copied into a function pointer. */
#define NEXT(name, type)                                                                           \
    static type next_;                                                                             \
    if (next_ == NULL) {                                                                           \
        void *p_ = dlsym(RTLD_NEXT, name);                                                         \
        memcpy(&next_, &p_, sizeof next_);                                                         \
    }

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    COUNT(threads);
    NEXT("pthread_create", pthread_create_fn);
    return next_(t, a, fn, arg);
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
typedef int (*creat_fn)(const char *, mode_t);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

#define DEFINE_OPEN(sym)                                                                           \
    int sym(const char *path, int flags, ...)                                                      \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode_t m = mode_arg(flags, ap);                                                            \
        va_end(ap);                                                                                \
        COUNT(opens);                                                                              \
        NEXT(#sym, open_fn);                                                                       \
        return next_(path, flags, m);                                                              \
    }
#define DEFINE_OPENAT(sym)                                                                         \
    int sym(int dfd, const char *path, int flags, ...)                                             \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode_t m = mode_arg(flags, ap);                                                            \
        va_end(ap);                                                                                \
        COUNT(opens);                                                                              \
        NEXT(#sym, openat_fn);                                                                     \
        return next_(dfd, path, flags, m);                                                         \
    }

DEFINE_OPEN(open)
DEFINE_OPEN(open64)
DEFINE_OPENAT(openat)
DEFINE_OPENAT(openat64)

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dfd, const char *path, int flags);
int __openat64_2(int dfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
    COUNT(opens);
    NEXT("__open_2", open2_fn);
    return next_(path, flags);
}

int __open64_2(const char *path, int flags)
{
    COUNT(opens);
    NEXT("__open64_2", open2_fn);
    return next_(path, flags);
}

int __openat_2(int dfd, const char *path, int flags)
{
    COUNT(opens);
    NEXT("__openat_2", openat2_fn);
    return next_(dfd, path, flags);
}

int __openat64_2(int dfd, const char *path, int flags)
{
    COUNT(opens);
    NEXT("__openat64_2", openat2_fn);
    return next_(dfd, path, flags);
}

int creat(const char *path, mode_t m)
{
    COUNT(opens);
    NEXT("creat", creat_fn);
    return next_(path, m);
}

int creat64(const char *path, mode_t m)
{
    COUNT(opens);
    NEXT("creat64", creat_fn);
    return next_(path, m);
}

FILE *fopen(const char *path, const char *mode)
{
    COUNT(opens);
    NEXT("fopen", fopen_fn);
    return next_(path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
    COUNT(opens);
    NEXT("fopen64", fopen_fn);
    return next_(path, mode);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    COUNT(mmaps);
    NEXT("mmap", mmap_fn);
    return next_(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    COUNT(mmaps);
    NEXT("mmap64", mmap_fn);
    return next_(addr, len, prot, flags, fd, off);
}
