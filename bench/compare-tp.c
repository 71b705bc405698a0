/* SPDX-License-Identifier: MIT */
/* Instantiates the LTTng-UST tracepoint provider of compare-tp.h in the LTTng variant of the
 * bench/compare workload (linked in statically; build with -I bench -llttng-ust -ldl). */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "compare-tp.h"
