/* SPDX-License-Identifier: MIT */
/* Life: what the preload library does before the program's main and after its exit, around the
 * runtime's own constructor and destructor (runtime.c).
 */
#include "preload.h"

#include <sys/stat.h>

/* Before the runtime's constructor (102): the real functions' tables, and what only dlsym can
 * find, so that no dlsym runs later inside a signal handler (real.c), and the session's open
 * finds its functions in the tables rather than one dlsym each. */
__attribute__((constructor(101))) static void preload_real(void)
{
    tt_pl_real_load_all();
}

/* After the runtime's constructor (102): the session exists when the process is traced. */
__attribute__((constructor(103))) static void preload_init(void)
{
    tt_session *s = tt_pl_enter();
    if (!s)
        return;
    struct stat st;
    if (fstat(0, &st) == 0 &&
        (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)))
        tt_pl_std_replace(0);
    if (tt_rt_check_output()) {
        tt_pl_std_replace(1);
        tt_pl_std_replace(2);
    }
    tt_rt_guard_leave();
}

/* Before the runtime's destructor (101), which closes the session: the program's buffered
 * output and the last segment without newline are still part of the run. */
__attribute__((destructor(102))) static void preload_fini(void)
{
    if (!tt_rt_session() || !tt_rt_check_output())
        return;
    fflush(NULL);
    tt_session *s = tt_pl_enter();
    if (!s)
        return;
    tt_pl_seg_flush(s, 1);
    tt_pl_seg_flush(s, 2);
    tt_rt_guard_leave();
}
