/* SPDX-License-Identifier: MIT */
/* tinytrace — the progress line of the verbs that read a whole (possibly large) trace.
 *
 * A verb that reads millions of events calls progress_update() once per event (it costs one
 * compare), and progress_end() when it is done. The line is shown on stderr only when stderr is a
 * terminal: a CI log, a pipe or a file never receives it, so scripts and tests see the same
 * output whether or not the run took long. On a terminal the line is redrawn at most every
 * 250 ms, first after 250 ms (a quick run shows nothing), and erased by progress_end(), so
 * the verb's own messages start on a clean line.
 *
 * TINYTRACE_PROGRESS_MS=N sets the redraw interval (0: at every check, which is every 65536
 * events); the tests use it to see the line without a run that is slow on purpose. It never
 * turns the line on where stderr is not a terminal.
 *
 * Not thread-safe: one progress line per process, used by the thread that reads.
 */
#ifndef TINYTRACE_PROGRESS_H
#define TINYTRACE_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    int on;               /* stderr is a terminal */
    int shown;            /* a line is on the terminal now */
    const char *label;    /* "tinytrace diff" */
    uint64_t total;       /* events expected (0: unknown) */
    uint64_t next_check;  /* progress_update looks at the clock when done reaches this */
    uint64_t start_ns;
    uint64_t last_ns;     /* when the line was last drawn (start_ns before the first) */
    uint64_t interval_ns;
    int width;            /* characters of the line on the terminal, for erasing it */
} progress;

/* Starts a progress line labeled @label (kept, not copied) for @total events. */
void progress_begin(progress *p, const char *label, uint64_t total);

/* Reports that @done events are read. Cheap between checks: inline compare. */
void progress_draw_(progress *p, uint64_t done);
static inline void progress_update(progress *p, uint64_t done)
{
    if (done >= p->next_check)
        progress_draw_(p, done);
}

/* Erases the line if one is shown, and goes on: the next update draws it again. Call before
 * printing anything else to stdout or stderr (on a terminal they share the screen). */
void progress_clear(progress *p);

/* Erases the line and stops: later updates draw nothing. Safe to call more than once. */
void progress_end(progress *p);

#endif
