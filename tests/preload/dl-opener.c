/* SPDX-License-Identifier: MIT */
/* libpreload-dlopener.so: a library of the program whose constructor opens another library
 * (PRELOAD_DLLEAF, RTLD_LOCAL). It is loaded after the preload library, so its constructor runs
 * first: the preload library's constructor finds the opened library among the objects after
 * it, and must not read its tables once the program has closed it, nor keep it from being
 * closed (preload/real.c). */
#include <dlfcn.h>
#include <stdlib.h>

int dlopener_had_leaf(void);
int dlopener_close(void);
int dlopener_leaf_loaded(void);

static void *leaf;

__attribute__((constructor)) static void open_leaf(void)
{
    const char *path = getenv("PRELOAD_DLLEAF");
    if (path)
        leaf = dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

int dlopener_had_leaf(void)
{
    return leaf != NULL;
}

int dlopener_close(void)
{
    int rc = leaf ? dlclose(leaf) : -1;
    leaf = NULL;
    return rc;
}

/* Whether the library is still mapped after the program closed it. */
int dlopener_leaf_loaded(void)
{
    const char *path = getenv("PRELOAD_DLLEAF");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (h)
        dlclose(h);
    return h != NULL;
}
