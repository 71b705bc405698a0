/* SPDX-License-Identifier: MIT */
/* preload-dlclose: closes the library its own library opened before the preload library's
 * constructor ran (dl-opener.c), then makes the first calls of functions the preload library
 * looks up at their first call (a mutex, stdio, sem_wait): they must find libc's, and must not
 * read the closed library's unmapped tables. The library must really be gone once closed: the
 * runtime keeps none of the program's loaded. Prints one line and exits 0 when all went well. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>

int dlopener_had_leaf(void);
int dlopener_close(void);
int dlopener_leaf_loaded(void);

int main(void)
{
    if (!dlopener_had_leaf()) {
        fprintf(stderr, "preload-dlclose: the library was not opened (PRELOAD_DLLEAF?)\n");
        return 2;
    }
    if (dlopener_close() != 0) {
        fprintf(stderr, "preload-dlclose: dlclose failed\n");
        return 3;
    }
    if (dlopener_leaf_loaded()) {
        /* the runtime must not pin the program's libraries (RTLD_NODELETE) */
        fprintf(stderr, "preload-dlclose: the library is still loaded after dlclose\n");
        return 5;
    }
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    sem_t sem;
    sem_init(&sem, 0, 1);
    sem_wait(&sem);
    sem_destroy(&sem);
    FILE *f = fopen("/dev/null", "w");
    if (!f || fputs("x", f) < 0 || fclose(f) != 0)
        return 4;
    printf("closed, then called on\n");
    return 0;
}
