/* SPDX-License-Identifier: MIT */
/* Build-only test: tinytrace.h compiles on its own as strict C11 (-std=c11 -pedantic -Werror),
 * before any other header. Built twice: plain, and with -DTINYTRACE_DISABLE, where the TT_*
 * macros must not evaluate their arguments. */
#include <tinytrace/tinytrace.h>

static int evaluated;

static uint32_t side_effect(void)
{
    evaluated++;
    return 1;
}

int main(void)
{
    tt_session *s = NULL;
    (void)s;
    (void)side_effect;
#ifdef TINYTRACE_DISABLE
    TT_ENTER(s, side_effect());
    TT_EXIT(s, side_effect());
    TT_SAFEPOINT(s, side_effect(), side_effect());
    TT_ALLOC(s, side_effect(), side_effect(), NULL);
    TT_FREE(s, side_effect(), NULL);
    TT_IO(s, TT_IO_OUT, side_effect(), NULL, 0, NULL);
    TT_USER(s, side_effect(), NULL, 0);
    TT_CHECKPOINT(s, side_effect());
    return evaluated == 0 ? 0 : 1;
#else
    /* The inline fast path with no session is a no-op that returns TT_OK. */
    int rc = TT_ENTER(s, side_effect());
    rc |= TT_EXIT(s, side_effect());
    return evaluated == 2 && rc == TT_OK ? 0 : 1;
#endif
}
