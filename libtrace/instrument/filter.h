/* SPDX-License-Identifier: MIT */
/* Record-time filters of the -finstrument-functions hooks: which calls become events.
 *
 * What belongs here: the one check the hooks make per call (tt_filter_skip) and the start of the
 * filters (tt_filter_start); filter.c holds the rest. The filters, set with `tinytrace record
 * --filter GLOB --notrace GLOB --depth N` (TINYTRACE_FILTER, TINYTRACE_NOTRACE, TINYTRACE_DEPTH:
 * comma-separated globs, a number), in the manner of uftrace's -F, -N and -D:
 *   --filter   only calls of a matching function and the calls they make are recorded;
 *   --notrace  calls of a matching function and the calls they make are not recorded;
 *   --depth N  only N levels of calls are recorded (counted from the first recorded one).
 * A glob matches a function's name as recorded (the symbol: a C++ name mangled), or the part
 * after "lib.so!" for a library's.
 *
 * Cost: without a filter, tt_filter_skip is one load of a flag that never changes after start,
 * a branch that predicts itself. With one, a call that is filtered out costs the flag, a probe
 * of the decision map (one cache line, lock-free) and a thread-local counter: no clock read, no
 * store into the trace buffer, no call into the session. bench/run-filter.sh measures it.
 *
 * Replay applies the filters the recording was made with: the runtime records them as META
 * objects ("filter=...", "notrace=...", "depth=N") and reads them back from the recording, so
 * the program replays the calls that were recorded and no others.
 */
#ifndef TT_INSTRUMENT_FILTER_H
#define TT_INSTRUMENT_FILTER_H

#include <stdbool.h>
#include <stdint.h>

#include "event-int.h"

/* 1 once a filter is set: written before the session is published, read-only after. */
extern int tt_filter_on __attribute__((visibility("hidden")));

/* Whether the enter or exit (@kind: TT_EV_ENTER or TT_EV_EXIT) of function @fn on the calling
 * thread is filtered out. Called with the nesting guard held, only when tt_filter_on. */
bool tt_filter_skip_(uint32_t kind, void *fn);

static inline bool tt_filter_skip(uint32_t kind, void *fn)
{
    return TT_UNLIKELY(tt_filter_on) && tt_filter_skip_(kind, fn);
}

/* Reads the filters of session @s: from the settings when it records (and records them as
 * META objects), from the recording's META objects when it replays. A bad setting is said on
 * stderr and the process runs unfiltered: tracing must not break the program (the tool checks
 * the options before it runs anything). Call once, before the session is published. */
void tt_filter_start(tt_session *s);

#endif
