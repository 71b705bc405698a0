/* SPDX-License-Identifier: MIT */
/* A minimal stand-in for the part of Criterion the tinytrace suites use, for builds where
 * Criterion cannot run (ThreadSanitizer). Each test runs in its own forked process, with its
 * suite's or its own .init/.fini and .timeout; a failed assertion prints its message, runs .fini
 * and ends that process. Only what the suites in tests/ use is here. */
#ifndef TT_TESTS_MINI_CRITERION_H
#define TT_TESTS_MINI_CRITERION_H

/* Like Criterion's own header, this one is a system header so that its variadic macros may be
 * called without a message under -pedantic. */
#pragma GCC system_header

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct mcr_opts {
    int unused_;
    void (*init)(void);
    void (*fini)(void);
    double timeout;
};

struct mcr_test {
    const char *suite, *name;
    void (*fn)(void);
    struct mcr_opts opts;
};

void mcr_register_test(const struct mcr_test *t);
void mcr_register_suite(const char *suite, const struct mcr_opts *o);
_Noreturn void mcr_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
_Noreturn void mcr_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mcr_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define Test(suite, name, ...)                                                                     \
    static void mcr_fn_##suite##_##name(void);                                                     \
    __attribute__((constructor)) static void mcr_reg_##suite##_##name(void)                        \
    {                                                                                              \
        static const struct mcr_test t = {#suite, #name, mcr_fn_##suite##_##name,                  \
                                          {.unused_ = 0, __VA_ARGS__}};                            \
        mcr_register_test(&t);                                                                     \
    }                                                                                              \
    static void mcr_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                                      \
    __attribute__((constructor)) static void mcr_suite_##suite(void)                               \
    {                                                                                              \
        static const struct mcr_opts o = {.unused_ = 0, __VA_ARGS__};                              \
        mcr_register_suite(#suite, &o);                                                            \
    }                                                                                              \
    struct mcr_suite_semicolon_##suite /* takes the ';' after TestSuite(...) */

#define cr_assert(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            mcr_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                                   \
    } while (0)
#define cr_assert_fail(...) mcr_fail(__FILE__, __LINE__, "fail", "" __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(strcmp((a), (b)) != 0, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...) cr_assert(memcmp((a), (b), (n)) == 0, __VA_ARGS__)
#define cr_skip_test(...) mcr_skip("" __VA_ARGS__)
#define cr_log_info(...) mcr_log(__VA_ARGS__)

#endif
