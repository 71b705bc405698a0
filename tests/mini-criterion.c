/* SPDX-License-Identifier: MIT */
/* The runner behind mini-criterion.h: runs every registered test in a forked child, one after
 * the other, and exits nonzero if any failed. */
#include "mini-criterion.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 256
#define MAX_SUITES 32

static struct mcr_test tests[MAX_TESTS];
static int n_tests;
static struct {
    const char *name;
    struct mcr_opts opts;
} suites[MAX_SUITES];
static int n_suites;
static const struct mcr_test *current;
static struct mcr_opts current_opts, current_suite;

void mcr_register_test(const struct mcr_test *t)
{
    if (n_tests == MAX_TESTS)
        abort();
    tests[n_tests++] = *t;
}

void mcr_register_suite(const char *suite, const struct mcr_opts *o)
{
    if (n_suites == MAX_SUITES)
        abort();
    suites[n_suites].name = suite;
    suites[n_suites].opts = *o;
    n_suites++;
}

/* As Criterion: the test's .fini, then the suite's. */
static _Noreturn void finish(int code)
{
    if (current_opts.fini != NULL)
        current_opts.fini();
    if (current_suite.fini != NULL)
        current_suite.fini();
    fflush(stdout);
    fflush(stderr);
    exit(code); /* not _exit: a sanitizer reports at exit */
}

void mcr_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    fprintf(stderr, "[----] %s:%d: Assertion Failed (%s)\n[----]   ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    finish(1);
}

void mcr_skip(const char *fmt, ...)
{
    fprintf(stderr, "[SKIP] %s::%s: ", current->suite, current->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    finish(77);
}

void mcr_log(const char *fmt, ...)
{
    fprintf(stderr, "[----] ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

/* The suite's options of @t, or all zero. */
static struct mcr_opts suite_opts(const struct mcr_test *t)
{
    for (int i = 0; i < n_suites; i++)
        if (strcmp(suites[i].name, t->suite) == 0)
            return suites[i].opts;
    return (struct mcr_opts){0};
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int failed = 0, ran = 0, skipped = 0;
    for (int i = 0; i < n_tests; i++) {
        const struct mcr_test *t = &tests[i];
        if (filter != NULL && strstr(t->name, filter) == NULL)
            continue;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            current = t;
            current_opts = t->opts;
            current_suite = suite_opts(t);
            double timeout = current_opts.timeout > 0 ? current_opts.timeout : current_suite.timeout;
            if (timeout > 0)
                alarm((unsigned)timeout + 1);
            /* As Criterion: the suite's .init, then the test's. */
            if (current_suite.init != NULL)
                current_suite.init();
            if (current_opts.init != NULL)
                current_opts.init();
            t->fn();
            finish(0);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0)
            ;
        ran++;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
            skipped++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            fprintf(stderr, "[PASS] %s::%s\n", t->suite, t->name);
        } else {
            failed++;
            if (WIFSIGNALED(status))
                fprintf(stderr, "[FAIL] %s::%s: killed by signal %d\n", t->suite, t->name,
                        WTERMSIG(status));
            else
                fprintf(stderr, "[FAIL] %s::%s: exit status %d\n", t->suite, t->name,
                        WEXITSTATUS(status));
        }
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d\n",
            ran, ran - failed - skipped, failed, skipped);
    return failed ? 1 : 0;
}
