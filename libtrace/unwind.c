/* The only file that includes libunwind: backtraces for divergence reports and crash events. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#ifdef TT_HAVE_UNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>

size_t tt_backtrace(char *buf, size_t cap, int skip)
{
    unw_context_t uc;
    unw_cursor_t cur;
    size_t n = 0;
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cur, &uc) != 0)
        return 0;
    int depth = 0;
    while (unw_step(&cur) > 0 && n + 1 < cap && depth < 64) {
        unw_word_t ip = 0, off = 0;
        char sym[256];
        unw_get_reg(&cur, UNW_REG_IP, &ip);
        if (skip > 0) {
            skip--;
            continue;
        }
        if (unw_get_proc_name(&cur, sym, sizeof sym, &off) != 0)
            strcpy(sym, "??");
        int k = snprintf(buf + n, cap - n, "#%d 0x%016lx %s+0x%lx\n", depth, (unsigned long)ip, sym,
                         (unsigned long)off);
        if (k < 0)
            break;
        n += (size_t)k < cap - n ? (size_t)k : cap - n - 1;
        depth++;
    }
    return n;
}
#else
size_t tt_backtrace(char *buf, size_t cap, int skip)
{
    (void)skip;
    if (cap)
        buf[0] = '\0';
    return 0;
}
#endif
