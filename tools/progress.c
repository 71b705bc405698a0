/* SPDX-License-Identifier: MIT */
/* tinytrace — the progress line (see progress.h). */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CHECK_EVERY 65536u           /* events between two looks at the clock */
#define DEFAULT_INTERVAL_NS 250000000u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void progress_begin(progress *p, const char *label, uint64_t total)
{
    const char *env = getenv("TINYTRACE_PROGRESS_MS");
    p->on = isatty(STDERR_FILENO);
    p->shown = 0;
    p->label = label;
    p->total = total;
    p->width = 0;
    p->interval_ns = DEFAULT_INTERVAL_NS;
    if (env != NULL && *env != '\0') {
        char *end;
        unsigned long long ms = strtoull(env, &end, 10);
        if (*end == '\0' && ms <= 3600000u)
            p->interval_ns = (uint64_t)ms * 1000000u;
    }
    /* off: next_check never comes, progress_update is one compare that fails */
    p->next_check = p->on ? CHECK_EVERY : UINT64_MAX;
    p->start_ns = p->last_ns = p->on ? now_ns() : 0;
}

void progress_draw_(progress *p, uint64_t done)
{
    uint64_t t = now_ns();
    char line[160];
    int n;

    p->next_check = done + CHECK_EVERY;
    if (t - p->last_ns < p->interval_ns)
        return;
    p->last_ns = t;
    if (p->total != 0 && done <= p->total)
        n = snprintf(line, sizeof line, "%s: %3u%% (%" PRIu64 " of %" PRIu64 " events)",
                     p->label, (unsigned)(done * 100 / p->total), done, p->total);
    else
        n = snprintf(line, sizeof line, "%s: %" PRIu64 " events", p->label, done);
    if (n < 0)
        return;
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    /* what the verb printed so far goes first: stdout may be the same terminal */
    fflush(stdout);
    /* pad over a longer previous line rather than rely on an erase sequence */
    fprintf(stderr, "\r%s%*s", line, p->width > n ? p->width - n : 0, "");
    fflush(stderr);
    if (n > p->width)
        p->width = n;
    p->shown = 1;
}

void progress_clear(progress *p)
{
    if (p->shown) {
        fprintf(stderr, "\r%*s\r", p->width, "");
        fflush(stderr);
    }
    p->shown = 0;
}

void progress_end(progress *p)
{
    progress_clear(p);
    p->next_check = UINT64_MAX;
}
