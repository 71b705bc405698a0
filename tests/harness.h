/* SPDX-License-Identifier: MIT */
/* The test harness: Criterion, or under ThreadSanitizer the small Criterion-compatible runner in
 * mini-criterion.h (Criterion's inheritable arena maps memory at fixed random addresses, which
 * TSan refuses: "Could not initialize inheritable arena", Criterion issue #274). */
#ifndef TT_TESTS_HARNESS_H
#define TT_TESTS_HARNESS_H

#ifdef TT_MINI_CRITERION
#include "mini-criterion.h"
#else
#include <criterion/criterion.h>
#endif

#endif
