/* SPDX-License-Identifier: MIT */
/* libpreload-argstrip.so: a library whose constructor moves its own options (--lib-*) to the
 * end of argv, as getopt permutes. Preloaded after the preload library, its constructor runs
 * before the runtime's: the command line recorded must still be the one the program was
 * started with (runtime.c, argv_as_exec), which a replay runs again. */
#include <string.h>

__attribute__((constructor)) static void move_options(int argc, char **argv)
{
    char *mine[64];
    int j = 0, k = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--lib-", 6) == 0 && k < 64)
            mine[k++] = argv[i];
        else
            argv[j++] = argv[i];
    }
    for (int i = 0; i < k; i++)
        argv[j++] = mine[i];
}
