/* SPDX-License-Identifier: MIT */
/* A setuid program linked with libtinytrace that opens its session from the environment, as
 * any program may: run by another user with TINYTRACE_MODE=record and TINYTRACE_FILE naming a
 * file only root may write, it must not replace that file (issue 14). Prints what the session
 * became. */
#include <stdio.h>

#include <tinytrace/tinytrace.h>

int main(void)
{
    tt_config cfg;
    tt_error_info err = { 0 };
    tt_session *s = NULL;
    tt_config_init(&cfg);
    int rc = tt_config_from_env(&cfg, &err);
    if (rc == TT_OK)
        rc = tt_session_open(&cfg, &s, &err);
    printf("open %s mode %d%s%s\n", tt_error_name(rc), s ? (int)tt_session_mode(s) : -1,
           err.message[0] ? ": " : "", err.message);
    if (s) {
        uint32_t v = 7;
        tt_user(s, 1, &v, sizeof v);
        tt_session_close(s, NULL);
    }
    return 0;
}
