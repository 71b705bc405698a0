/* SPDX-License-Identifier: MIT */
/* LTTng-UST tracepoint provider of bench/compare: one event at the entry and one at the exit of
 * the workload's leaf/rec, each carrying the function's number (1 = leaf, 2 = rec), so that the
 * event is the same information as a tinytrace enter/exit event. compare-tp.c instantiates it. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER tt_compare

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "compare-tp.h"

#if !defined(COMPARE_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define COMPARE_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(tt_compare, enter,
    LTTNG_UST_TP_ARGS(unsigned int, fn),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(unsigned int, fn, fn)))

LTTNG_UST_TRACEPOINT_EVENT(tt_compare, exit,
    LTTNG_UST_TP_ARGS(unsigned int, fn),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(unsigned int, fn, fn)))

#endif

#include <lttng/tracepoint-event.h>
