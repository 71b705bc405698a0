/* Identity: getpid (TT_CH_PID), gethostname and uname (TT_CH_HOSTNAME) are inputs. kill keeps
 * a replayed pid pointing at this process.
 */
#include "preload.h"

#include <signal.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* glibc's fortified gethostname, called by programs built with _FORTIFY_SOURCE. */
int __gethostname_chk(char *name, size_t len, size_t buflen);

typedef pid_t (*getpid_fn)(void);
typedef int (*gethostname_fn)(char *, size_t);
typedef int (*uname_fn)(struct utsname *);
typedef int (*kill_fn)(pid_t, int);

/* The last pid a replayed getpid handed out: kill() sent to it reaches this process, not the
 * process that may now own the recorded number. Relaxed: a kill() of that number comes after
 * the getpid that produced it, on the same thread or in an order the program made. */
static _Atomic pid_t replayed_pid;

TT_EXPORT pid_t getpid(void)
{
    getpid_fn f = REAL(getpid, getpid_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f();
    struct in_head h = { 0 };
    if (tt_pl_recording(s))
        h.ret = f();
    if (!tt_pl_in_simple(s, TT_CH_PID, S_getpid, &h, NULL, 0))
        h.ret = f();
    else if (!tt_pl_recording(s))
        atomic_store_explicit(&replayed_pid, (pid_t)h.ret, memory_order_relaxed);
    tt_rt_guard_leave();
    return (pid_t)h.ret;
}

TT_EXPORT int kill(pid_t pid, int sig)
{
    kill_fn f = REAL(kill, kill_fn);
    pid_t rp = atomic_load_explicit(&replayed_pid, memory_order_relaxed);
    if (UNLIKELY(rp > 0 && pid == rp))
        pid = REAL(getpid, getpid_fn)();
    return f(pid, sig);
}

static int gethostname_impl(char *name, size_t len)
{
    gethostname_fn f = REAL(gethostname, gethostname_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(name, len);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { name, len };
    if (tt_pl_recording(s)) {
        h.ret = f(name, len);
        h.err = h.ret < 0 ? errno : 0;
        /* glibc fills the buffer with the cut name too when it fails with ENAMETOOLONG */
        if (h.ret == 0 || h.err == ENAMETOOLONG) {
            size_t n = strnlen(name, len);
            h.len = n < len ? n + 1 : len;
        }
    }
    if (!tt_pl_in_simple(s, TT_CH_HOSTNAME, S_gethostname, &h, &v, 1)) {
        h.ret = f(name, len);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}

TT_EXPORT int gethostname(char *name, size_t len)
{
    return gethostname_impl(name, len);
}

TT_EXPORT int __gethostname_chk(char *name, size_t len, size_t buflen)
{
    if (len > buflen)
        __chk_fail();
    return gethostname_impl(name, len);
}

TT_EXPORT int uname(struct utsname *u)
{
    uname_fn f = REAL(uname, uname_fn);
    tt_session *s = tt_pl_enter();
    if (!s)
        return f(u);
    int e0 = errno;
    struct in_head h = { 0 };
    struct iovec v = { u, sizeof *u };
    if (tt_pl_recording(s)) {
        h.ret = f(u);
        h.err = h.ret < 0 ? errno : 0;
        h.len = h.ret == 0 ? sizeof *u : 0;
    }
    if (!tt_pl_in_simple(s, TT_CH_HOSTNAME, S_uname, &h, &v, 1)) {
        h.ret = f(u);
        h.err = errno;
    }
    return (int)tt_pl_finish(&h, e0);
}
