/* SPDX-License-Identifier: MIT */
// Build-only test: tinytrace.h compiles on its own as C++11 (-pedantic -Werror).
#include <tinytrace/tinytrace.h>

int main()
{
    tt_session *s = nullptr;
    tt_event ev = tt_event();
    (void)ev;
    return tt_enter(s, 1) == TT_OK && TT_E_DIVERGED == -7 ? 0 : 1;
}
