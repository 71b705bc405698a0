/* SPDX-License-Identifier: MIT */
/* Errors are values: every code of TT_ERRORS has a distinct name and message, the numbers are
 * the pinned ones, and unknown codes still give a string. Also the small name tables. */
#include "common.h"

#include "harness.h"
#include <string.h>

TestSuite(errors);

static const struct {
    int code;
    const char *name;
    const char *msg;
} all[] = {
#define ROW_(name, num, msg) {num, "TT_" #name, msg},
    TT_ERRORS(ROW_)
#undef ROW_
};
#define N_ALL (sizeof all / sizeof all[0])

Test(errors, every_code_has_its_own_name_and_message)
{
    cr_assert_gt(N_ALL, 20u);
    for (size_t i = 0; i < N_ALL; i++) {
        const char *name = tt_error_name(all[i].code);
        const char *msg = tt_strerror(all[i].code);
        cr_assert_not_null(name, "no name for %d", all[i].code);
        cr_assert_not_null(msg, "no message for %d", all[i].code);
        cr_assert_str_eq(name, all[i].name, "code %d", all[i].code);
        cr_assert_str_eq(msg, all[i].msg, "code %d", all[i].code);
        for (size_t j = 0; j < i; j++) {
            cr_assert_neq(all[i].code, all[j].code, "%s and %s share a number", all[i].name,
                          all[j].name);
            cr_assert_str_neq(name, tt_error_name(all[j].code), "two codes named %s", name);
            cr_assert_str_neq(msg, tt_strerror(all[j].code), "two codes say '%s'", msg);
        }
    }
}

Test(errors, ok_is_zero_and_every_error_is_negative)
{
    cr_assert_eq(TT_OK, 0);
    for (size_t i = 1; i < N_ALL; i++)
        cr_assert_lt(all[i].code, 0, "%s is %d", all[i].name, all[i].code);
}

Test(errors, numbers_are_pinned)
{
    cr_assert_eq(TT_E_INVAL, -1);
    cr_assert_eq(TT_E_DIVERGED, -7);
    cr_assert_eq(TT_E_END, -8);
    cr_assert_eq(TT_E_UNCONSUMED, -9);
    cr_assert_eq(TT_E_CAPACITY, -16);
    cr_assert_eq(TT_E_STORAGE, -17);
    cr_assert_eq(TT_E_CLOSED, -22);
    cr_assert_eq(TT_E_RESTORE, -23);
}

Test(errors, unknown_codes_still_give_a_string)
{
    static const int unknown[] = {1, 5, -24, -1000, 123456, -2147483647 - 1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *name = tt_error_name(unknown[i]);
        const char *msg = tt_strerror(unknown[i]);
        cr_assert_not_null(name);
        cr_assert_not_null(msg);
        cr_assert_neq(name[0], '\0');
        cr_assert_neq(msg[0], '\0');
        for (size_t j = 0; j < N_ALL; j++)
            cr_assert_str_neq(name, all[j].name, "unknown code %d named %s", unknown[i], name);
    }
}

Test(errors, every_event_kind_and_verify_status_has_a_distinct_name)
{
    for (unsigned k = 1; k <= TT_EV_KIND_MAX; k++) {
        const char *a = tt_event_kind_name(k);
        cr_assert_not_null(a);
        cr_assert_neq(a[0], '\0');
        for (unsigned j = 1; j < k; j++)
            cr_assert_str_neq(a, tt_event_kind_name(j), "kinds %u and %u share a name", j, k);
    }
    cr_assert_not_null(tt_event_kind_name(0));
    cr_assert_not_null(tt_event_kind_name(200));
    for (int st = TT_VERIFY_OK; st <= TT_VERIFY_IO; st++) {
        const char *a = tt_verify_status_name((tt_verify_status)st);
        cr_assert_not_null(a);
        cr_assert_neq(a[0], '\0');
        for (int j = TT_VERIFY_OK; j < st; j++)
            cr_assert_str_neq(a, tt_verify_status_name((tt_verify_status)j));
    }
}

Test(errors, the_runtime_version_is_the_compiled_one)
{
    cr_assert_eq(tt_version(), (unsigned)TT_VERSION_NUMBER, "runtime %#x, compiled %#x",
                 tt_version(), (unsigned)TT_VERSION_NUMBER);
}
