/* SPDX-License-Identifier: MIT */
/* libpreload-dlleaf.so: a library that libpreload-dlopener.so's constructor opens with dlopen
 * (RTLD_LOCAL) before the preload library's constructor runs, and that dlclose.c then closes. */
int dlleaf_answer(void);

int dlleaf_answer(void)
{
    return 42;
}
