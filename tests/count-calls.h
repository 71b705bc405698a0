/* SPDX-License-Identifier: MIT */
/* Counting interposers for the test executables that prove "costs nothing": malloc and its
 * family, pthread_create, the open family and mmap are replaced in the executable and count the
 * calls made by the counting thread while counting is on. They forward to glibc. */
#ifndef TT_TESTS_COUNT_CALLS_H
#define TT_TESTS_COUNT_CALLS_H

#include <stddef.h>

typedef struct call_counts {
    unsigned long mallocs;       /* malloc, calloc, realloc, posix_memalign, aligned_alloc, ... */
    unsigned long frees;
    unsigned long long bytes;    /* bytes requested by the allocations */
    unsigned long threads;       /* pthread_create */
    unsigned long opens;         /* open, openat, creat, fopen and their 64-bit forms */
    unsigned long mmaps;
} call_counts;

/* Starts counting the calls of the calling thread, from zero. */
void count_start(void);
/* Stops counting and returns what was counted. */
call_counts count_stop(void);

#endif
