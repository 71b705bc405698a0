/* The in-process runtime: one session per process, opened from the environment.
 *
 * Life: a constructor opens the session when TINYTRACE_MODE is set and records the command line
 * and working directory as META objects; a destructor flushes stdio (so the program's last
 * output is still seen) and closes it, and in replay writes the report. A fork child is not
 * traced: its copy of the session is dropped, so it never writes into the parent's file.
 *
 * Crashes while recording: a fatal signal appends a crash event (signal number, backtrace) on
 * the crashing thread, closes the session — every thread's buffer is flushed, the tables and the
 * manifest are written, the file is renamed — and re-raises the signal with its default action,
 * so the program dies exactly as it would have. Closing from a signal handler takes locks that
 * the crashing thread might hold; a crash inside tinytrace itself is therefore not finalized
 * (the guard tells), and its partial file is left for `tinytrace recover`.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event-int.h"
#include "filter.h"
#include "runtime.h"

tt_session *_Atomic tt_rt_live;
static tt_mode g_mode;
static pid_t g_pid;
static bool opt_alloc, opt_check_output, opt_keep_going;
/* the report channel (protocol.h): a socket, and the nonce every report line carries */
static _Atomic int report_fd = -1;
static int report_slot = -1;
static char report_nonce[TT_REPORT_NONCE_LEN + 1];
/* 0: open; 1: closing at exit (g_closed once done); 2: a crash is being finalized, by the
 * thread g_crash_tid, which ends the process */
static _Atomic int g_closing, g_closed;
static _Atomic long g_crash_tid;
static int g_crash_sig;

/* The runtime's own descriptors go at or above this number, out of the way of the program's,
 * which the kernel numbers from the lowest free one. */
#define RT_FD_LOW 900

/* The runtime's own address space (base/region.c): reserved, not committed. */
#define RT_REGION (UINT64_C(64) << 30)

/* the guard is the library's own per-thread flag, which the swapper holds for its whole life */
#define guard tt_in_tracer

/* The calling thread's kernel tid. The guard is held around the call so that the preload
 * library's syscall(), which replays SYS_gettid for the program, passes it through: the crash
 * and exit paths ask without holding the guard. */
static long os_tid(void)
{
    int was = guard;
    guard = 1;
    long t = syscall(SYS_gettid);
    guard = was;
    return t;
}


/* The session as it stands, never starting the runtime (for the runtime's own use). */
static inline tt_session *cur(void)
{
    return atomic_load_explicit(&tt_rt_live, memory_order_acquire);
}

#ifndef TT_RT_PRELOAD
static void rt_init(void);
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static _Atomic int rt_started;
#endif

tt_session *tt_rt_session(void)
{
#ifndef TT_RT_PRELOAD
    /* Linked into the program (libtinytrace.so): the runtime starts at the first hook call, so
     * a program that never runs instrumented code gets no session from it. */
    if (TT_UNLIKELY(!atomic_load_explicit(&rt_started, memory_order_acquire))) {
        pthread_once(&rt_once, rt_init);
        atomic_store_explicit(&rt_started, 1, memory_order_release);
    }
#endif
    /* acquire: pairs with the release store in rt_init, so the session is fully built */
    return atomic_load_explicit(&tt_rt_live, memory_order_acquire);
}

bool tt_rt_record_allocs(void)
{
    return opt_alloc;
}

bool tt_rt_check_output(void)
{
    return opt_check_output;
}

bool tt_rt_real_sleep(void)
{
    tt_session *s = cur();
    return s && s->cfg.real_sleep != 0;
}

/* Ends the process at once, past the interposed _exit below. */
static _Noreturn void exit_now(int status)
{
    for (;;)
        syscall(SYS_exit_group, status);
}

static bool env_flag(const char *name)
{
    const char *v = tt_setting_(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* ---------------------------------------------------------------- the report */

static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* a valid UTF-8 sequence goes as it is: its length from the lead byte, then the
         * continuation bytes, no overlong form, no surrogate, nothing above U+10FFFF */
        size_t k = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool ok = k && i + k <= n;
        for (size_t j = 1; ok && j < k; j++)
            ok = ((unsigned char)s[i + j] & 0xc0) == 0x80;
        const unsigned char c1 = ok ? (unsigned char)s[i + 1] : 0;
        if (ok && ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) ||
                   (c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90)))
            ok = false;
        if (ok) {
            fwrite(s + i, 1, k, f);
            i += k - 1;
        } else if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_event(FILE *f, tt_session *s, const tt_report_event *re)
{
    const tt_event *ev = &re->ev;
    /* copies, under the session lock: another thread may be interning (and moving) names */
    char fnb[1024], siteb[1024];
    const char *fn = ev->sp.function && tt_names_copy(s, ev->sp.function, fnb, sizeof fnb) >= 0
                         ? fnb : NULL;
    const char *site = ev->sp.site && tt_names_copy(s, ev->sp.site, siteb, sizeof siteb) >= 0
                           ? siteb : NULL;
    fprintf(f, "{\"kind\": \"%s\", \"seq\": %" PRIu64 ", \"function\": ",
            tt_event_kind_name(ev->kind), ev->tp.seq);
    if (fn)
        json_str(f, fn, strlen(fn));
    else
        fprintf(f, "%u", ev->sp.function);
    fputs(", \"site\": ", f);
    if (site)
        json_str(f, site, strlen(site));
    else
        fprintf(f, "%u", ev->sp.site);
    fprintf(f, ", \"arg\": %" PRIu64 ", \"len\": %" PRIu64 ", \"dir\": \"%s\"}", ev->arg,
            ev->payload_len, ev->dir == TT_IO_OUT ? "out" : "in");
}

/* Writes the JSON report; @d may be NULL. */
static void first_child_cmd(char *out, size_t cap);
static _Atomic uint32_t g_children, g_untraceable;

/* Sends @len bytes of @p whole on the report channel; a tool that has gone is no reason to die
 * of SIGPIPE (MSG_NOSIGNAL). */
static void report_send(const char *p, size_t len)
{
    while (len) {
        ssize_t n = send(report_fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

/* Writes one report line on the channel; @d may be NULL. */
static void write_report(tt_session *s, const char *status, int code, const char *message,
                         const tt_divergence *d, const char *bt, uint64_t divergences)
{
    if (report_fd < 0)
        return;
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    if (!f)
        return;
    tt_replay_progress prog;
    memset(&prog, 0, sizeof prog);
    if (s)
        tt_replay_progress_get(s, &prog);
    char live[512];
    first_child_cmd(live, sizeof live);
    fprintf(f, "{\"status\": \"%s\", \"nonce\": \"%s\", \"divergences\": %" PRIu64
            ", \"error\": \"%s\", \"matched\": %" PRIu64 ", \"threads\": %u, "
            "\"live_children\": %u, \"untraceable_execs\": %u, \"first_live\": ",
            status, report_nonce, divergences, tt_error_name(code), prog.matched,
            prog.threads_seen,
            atomic_load_explicit(&g_children, memory_order_relaxed),
            atomic_load_explicit(&g_untraceable, memory_order_relaxed));
    json_str(f, live, strlen(live));
    fputs(", ", f);
    fputs("\"message\": ", f);
    json_str(f, message, strlen(message));
    if (d) {
        static const char *const reason[] = TT_REPORT_REASONS;
        fprintf(f, ", \"thread\": %u, \"seq\": %" PRIu64 ", \"reason\": \"%s\", \"first_diff\": %" PRIu64,
                d->tp.thread, d->tp.seq,
                (unsigned)d->reason < sizeof reason / sizeof reason[0] ? reason[d->reason] : "?",
                d->first_diff);
        fputs(", \"expected\": ", f);
        if (d->has_expected)
            json_event(f, s, &d->expected);
        else
            fputs("null", f);
        fputs(", \"actual\": ", f);
        json_event(f, s, &d->actual);
        fputs(", \"history\": [", f);
        for (uint32_t i = 0; i < d->history_len; i++) {
            if (i)
                fputs(", ", f);
            json_event(f, s, &d->history[i]);
        }
        fputs("]", f);
    }
    if (bt) {
        fputs(", \"backtrace\": [", f);
        const char *p = bt;
        bool first = true;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            if (!first)
                fputs(", ", f);
            json_str(f, p, n);
            first = false;
            p += n + (nl ? 1 : 0);
        }
        fputs("]", f);
    }
    fputs("}\n", f);
    if (fclose(f) == 0)
        report_send(text, text_len);
    free(text);
}

/* The fd registry's move (base/fds.c): the program dup2s onto the channel's number. */
static int report_fd_move(void *ctx, int fd)
{
    (void)ctx;
    if (report_fd != fd)
        return 0;
    int hi = tt_fd_relocate(report_slot, fd);
    report_fd = hi;
    return hi < 0 ? errno : 0;
}

/* The tool's end of the report channel, from TT_ENV_REPORT_FD: a socket that holds the nonce.
 * It is moved out of the program's way (a high descriptor, close-on-exec) and the variable is
 * removed, so the program does not meet either. */
static void report_channel_open(void)
{
    const char *v = tt_setting_(TT_ENV_REPORT_FD);
    if (!v)
        return;
    char *end;
    long fd = strtol(v, &end, 10);
    struct stat st;
    if (*end || fd < 0 || fd > INT32_MAX || fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return;
    size_t got = 0;
    while (got < TT_REPORT_NONCE_LEN) {
        ssize_t n = read((int)fd, report_nonce + got, TT_REPORT_NONCE_LEN - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        got += (size_t)n;
    }
    report_nonce[TT_REPORT_NONCE_LEN] = '\0';
    int hi = fcntl((int)fd, F_DUPFD_CLOEXEC, RT_FD_LOW);
    if (hi < 0)
        hi = fcntl((int)fd, F_DUPFD_CLOEXEC, 3);
    if (hi < 0)
        return;
    close((int)fd);
    report_fd = hi;
    /* reserved: a program that closes every descriptor (close_range, closefrom) spares it */
    report_slot = tt_fd_reserve(hi, report_fd_move, NULL);
    unsetenv(TT_ENV_REPORT_FD); /* when it came through the environment */
}

/* ---------------------------------------------------------------- output in the verdict */

static bool output_event(const tt_report_event *re)
{
    return re->ev.kind == TT_EV_IO && re->ev.dir == TT_IO_OUT &&
           (re->ev.arg == TT_CH_STDOUT || re->ev.arg == TT_CH_STDERR);
}

/* A line of output as a report shows it: in quotes, control bytes and quotes escaped, "..."
 * where the event holds more than its preview. */
static void quote_line(char *buf, size_t cap, const tt_report_event *re)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap < 8)
        return;
    buf[o++] = '"';
    for (uint32_t i = 0; i < re->preview_len && o + 6 < cap; i++) {
        unsigned char c = re->preview[i];
        if (c == '\n' && i + 1 == re->preview_len && re->ev.payload_len == re->preview_len)
            break; /* the line's own newline */
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
            buf[o++] = '\\';
            if (c == '"' || c == '\\') {
                buf[o++] = (char)c;
                continue;
            }
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o++] = '"';
    if (re->ev.payload_len > re->preview_len && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

/* A divergence of the program's output is said as such: which stream, and the first differing
 * line, expected against actual. That is when both are output (the line differs), when the
 * program writes past the end of the recording, or (close_report) when the recording has output
 * left that the program did not write. A call where output was recorded, or output where a call
 * was, is a divergence of calls and keeps its reason. */
static void output_reason(tt_divergence *d)
{
    bool exp_out = d->has_expected && output_event(&d->expected);
    bool act_out = output_event(&d->actual);
    bool ended = d->actual.ev.kind == TT_EV_SESSION_END; /* close_report: the program ended */
    if (!(exp_out && act_out) && !(act_out && !d->has_expected) && !(exp_out && ended))
        return;
    const tt_report_event *which = act_out ? &d->actual : &d->expected;
    const char *stream = which->ev.arg == TT_CH_STDOUT ? "stdout" : "stderr";
    char e[TT_REPORT_PREVIEW * 4 + 16], a[TT_REPORT_PREVIEW * 4 + 16];
    if (exp_out)
        quote_line(e, sizeof e, &d->expected);
    else if (d->has_expected)
        snprintf(e, sizeof e, "no output here (a %s call)", tt_event_kind_name(d->expected.ev.kind));
    else
        snprintf(e, sizeof e, "no more output");
    if (act_out)
        quote_line(a, sizeof a, &d->actual);
    else
        snprintf(a, sizeof a, "no output here (a %s call)", tt_event_kind_name(d->actual.ev.kind));
    d->reason = TT_DIV_OUTPUT;
    char m[sizeof e + sizeof a + 64];
    snprintf(m, sizeof m, "the program's output differs on %s: expected %s, actual %s", stream,
             e, a);
    snprintf(d->message, sizeof d->message, "%.*s", (int)sizeof d->message - 1, m);
}

void tt_rt_failed(int rc, const char *what)
{
    tt_session *s = cur();
    if (!s || rc == TT_OK)
        return;
    if (rc == TT_E_DIVERGED) {
        tt_divergence d;
        char text[8192], bt[4096];
        tt_backtrace(bt, sizeof bt, 1);
        if (tt_replay_divergence(s, &d) != TT_OK)
            memset(&d, 0, sizeof d);
        output_reason(&d);
        size_t n = tt_divergence_format(s, &d, text, sizeof text);
        fprintf(stderr, "tinytrace: in %s: %.*s  backtrace of the diverging call:\n%s", what,
                (int)n, text, bt);
        tt_replay_progress p;
        tt_replay_progress_get(s, &p);
        write_report(s, TT_REPORT_STATUS_DIVERGED, rc, d.message, &d, bt, p.divergences);
        if (opt_keep_going)
            return;
        fflush(stderr);
        exit_now(TT_RT_EXIT_DIVERGED);
    }
    /* another error: say it once, stop tracing, let the program go on */
    static _Atomic int said;
    if (!atomic_exchange(&said, 1)) {
        fprintf(stderr, "tinytrace: %s failed: %s (%s); the event is not in the recording\n",
                what, tt_strerror(rc), tt_error_name(rc));
        if (g_mode == TT_MODE_REPLAY) {
            write_report(s, TT_REPORT_STATUS_ERROR, rc, tt_strerror(rc), NULL, NULL, 0);
            fflush(stderr);
            exit_now(TT_RT_EXIT_DIVERGED);
        }
    }
}

static void note_processes(tt_session *s);

/* ---------------------------------------------------------------- crash handling */

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };
#define NFATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction old_actions[NFATAL];

static _Noreturn void wait_forever(void)
{
    for (;;)
        pause();
}

/* Dies by @sig with its default action, from a handler where @sig may be blocked. */
static void die_by(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
}

/* Finalizing can still block (a lock the crashed code held): after a few seconds, give up and
 * die by the crash's signal, leaving the .partial file, rather than hang the program. */
static void watchdog(int unused)
{
    (void)unused;
    die_by(g_crash_sig);
}

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static void arm_watchdog(int sig)
{
    g_crash_sig = sig;
    struct sigaction wa;
    memset(&wa, 0, sizeof wa);
    wa.sa_handler = watchdog;
    wa.sa_flags = SA_ONSTACK;
    sigaction(SIGALRM, &wa, NULL);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev.sigev_notify_thread_id = (pid_t)os_tid();
    timer_t tm;
    if (timer_create(CLOCK_MONOTONIC, &sev, &tm) == 0) {
        struct itimerspec its = { .it_value = { 5, 0 } };
        timer_settime(tm, 0, &its, NULL);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void crash_handler(int sig, siginfo_t *info, void *uctx)
{
    /* a handler the program had before us decides: it may recover (siglongjmp), or die */
    for (size_t i = 0; i < NFATAL; i++) {
        const struct sigaction *old = &old_actions[i];
        if (fatal_signals[i] != sig || old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN)
            continue;
        if (old->sa_flags & SA_SIGINFO)
            old->sa_sigaction(sig, info, uctx);
        else
            old->sa_handler(sig);
        return;
    }
    long me = os_tid();
    tt_session *s = cur();
    /* One thread finalizes: the first to move g_closing from 0 (exit's close takes it to 1, a
     * crash to 2). Whoever lost looks at what the winner does, whenever it lost. */
    int zero = 0;
    bool mine = s && !guard && atomic_compare_exchange_strong(&g_closing, &zero, 2);
    if (!mine) {
        int state = atomic_load(&g_closing);
        if (state == 2 && atomic_load(&g_crash_tid) != me)
            wait_forever(); /* another thread's crash is being finalized; it ends the process */
        if (state == 1 && !guard) {
            /* exit is closing the session: let it finish (bounded), then die by this signal */
            for (int i = 0; i < 2000 && !atomic_load(&g_closed); i++)
                usleep(1000);
        }
        die_by(sig);
        return;
    }
    if (g_mode == TT_MODE_REPLAY) {
        atomic_store(&g_crash_tid, me);
        arm_watchdog(sig);
        /* Replay: did the recording crash here too, by the same signal? */
        guard = 1;
        char bt[4096];
        tt_backtrace(bt, sizeof bt, 1);
        tt_event ev = { .kind = TT_EV_CRASH, .arg = (uint64_t)sig };
        int rc = tt_event_full_(s, &ev, NULL, 0, NULL);
        char msg[160];
        if (rc == TT_OK) {
            snprintf(msg, sizeof msg, "the program died by signal %d where the recording did", sig);
            write_report(s, TT_REPORT_STATUS_MATCHED, TT_OK, msg, NULL, NULL, 0);
        } else if (rc == TT_E_DIVERGED) {
            tt_divergence d;
            if (tt_replay_divergence(s, &d) != TT_OK)
                memset(&d, 0, sizeof d);
            fprintf(stderr, "tinytrace: the program died by signal %d where the recording did "
                    "not\n%s", sig, bt);
            write_report(s, TT_REPORT_STATUS_DIVERGED, rc, d.message, &d, bt, 1);
        }
    } else {
        /* record; inside tinytrace (the guard is held) the locks may be ours: not finalized,
         * the guard test above left it to die */
        atomic_store(&g_crash_tid, me);
        arm_watchdog(sig);
        guard = 1;
        char bt[4096];
        size_t n = tt_backtrace(bt, sizeof bt, 1);
        tt_event ev = { .kind = TT_EV_CRASH, .arg = (uint64_t)sig, .payload = bt,
                        .payload_len = n };
        tt_event_full_(s, &ev, NULL, 0, NULL);
        tt_error_info err;
        atomic_store_explicit(&tt_rt_live, NULL, memory_order_release);
        tt_session_mark_crashed_(s);
        note_processes(s);
        tt_session_finish_(s, &err); /* not freed: other threads may still hold it */
    }
    /* die as the program would have: default action, signal unblocked, raised again */
    die_by(sig);
}

static void install_crash_handlers(void)
{
    static char stack[64 * 1024];
    stack_t ss = { .ss_sp = stack, .ss_size = sizeof stack };
    sigaltstack(&ss, NULL); /* a stack overflow still gets its crash event (main thread) */
    for (size_t i = 0; i < NFATAL; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = crash_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        /* an ignored signal stays ignored (SIGTRAP, SIGSYS: the program goes on) */
        if (sigaction(fatal_signals[i], NULL, &old_actions[i]) == 0 &&
            old_actions[i].sa_handler == SIG_IGN)
            continue;
        sigaction(fatal_signals[i], &sa, &old_actions[i]);
    }
}

/* ---------------------------------------------------------------- threads
 *
 * Replay must pair each live thread with the recorded thread that did the same work. The order
 * in which threads reach their first event is a race; the order in which one thread creates
 * others is program order. So every thread is named by its creation path — "main", "main/1"
 * for the first thread main created, "main/1/2" for the second thread that one created — and
 * replay binds threads by those names. */

static __thread char thread_path[96];
static __thread unsigned thread_children;

static void name_thread(const char *path)
{
    snprintf(thread_path, sizeof thread_path, "%s", path);
    thread_children = 0;
    tt_session *s = cur();
    if (s) {
        int rc = tt_thread_name(s, path);
        if (rc != TT_OK)
            tt_rt_failed(rc, "thread start");
    }
}

#ifdef TT_RT_PRELOAD
#define ALTSTACK_BYTES (64 * 1024)
static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;

static void altstack_free(void *p)
{
    stack_t ss = { .ss_flags = SS_DISABLE };
    sigaltstack(&ss, NULL);
    munmap(p, ALTSTACK_BYTES);
}

static void altstack_key_make(void)
{
    pthread_key_create(&altstack_key, altstack_free);
}

/* Each thread its own alternate stack, so a stack overflow on it reaches the crash handler. */
static void altstack_thread(void)
{
    pthread_once(&altstack_once, altstack_key_make);
    void *st = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    if (st == MAP_FAILED)
        return;
    stack_t ss = { .ss_sp = st, .ss_size = ALTSTACK_BYTES };
    if (sigaltstack(&ss, NULL) != 0 || pthread_setspecific(altstack_key, st) != 0)
        munmap(st, ALTSTACK_BYTES);
}

void tt_rt_thread_child_path(char *out, size_t cap)
{
    snprintf(out, cap, "%.80s/%u", thread_path[0] ? thread_path : "main", ++thread_children);
}

void tt_rt_thread_begin(const char *path)
{
    altstack_thread();
    name_thread(path);
}

#endif /* TT_RT_PRELOAD */

/* ---------------------------------------------------------------- thread exit */

/* A recording thread holds a buffer of the budget until it hands it over. One that exits ends
 * its recording here (THREAD_END, its last buffer to the swapper), so the buffer serves later
 * threads at once; without this a program that runs more threads than the budget has buffers
 * leaves the later ones to take the buffers of idle threads, one at a time (tt_writer_refill). */
static pthread_key_t exit_key;
static bool exit_key_ok;

static void thread_exit(void *p)
{
    tt_session *s = cur();
    if (!s || s != p || !tt_rt_guard_enter())
        return;
    tt_session_thread_end(s); /* TT_E_CLOSED once close began: nothing left to hand over */
    tt_rt_guard_leave();
}

/* A thread registered in the session (the guard is held): end it when it exits. */
static void on_thread(tt_session *s)
{
    if (exit_key_ok)
        pthread_setspecific(exit_key, s);
}

/* ---------------------------------------------------------------- life */

/* ---------------------------------------------------------------- processes
 *
 * What ran unrecorded (preload/process.c): children are counted by the traced process itself;
 * the first child's command line comes from posix_spawn, system or popen, or, for a fork, from
 * the child when it execs. The child writes it into a page shared with the parent (mapped at
 * start, inherited by fork), once: the first to move `named` from 0 to 1 copies its line and
 * then publishes 2. */
struct child_page {
    _Atomic uint32_t named;    /* 0 empty, 1 being written, 2 cmd holds the first child's line */
    char cmd[512];
};
static struct child_page *g_child_page;
static pthread_mutex_t g_child_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_first_cmd[512];     /* the first child's or untraceable exec's line (child_lock) */
static bool g_first_is_fork;      /* ... to be read from the page (child_lock) */

static void child_page_map(void)
{
    void *p = mmap(NULL, sizeof *g_child_page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    g_child_page = p == MAP_FAILED ? NULL : p;
}

bool tt_rt_is_traced_process(void)
{
    return cur() != NULL && syscall(SYS_getpid) == g_pid;
}

static void first_child(const char *cmd, bool fork)
{
    pthread_mutex_lock(&g_child_lock);
    if (!g_first_cmd[0] && !g_first_is_fork) {
        if (cmd)
            snprintf(g_first_cmd, sizeof g_first_cmd, "%s", cmd);
        else
            g_first_is_fork = fork;
    }
    pthread_mutex_unlock(&g_child_lock);
}

void tt_rt_child_untraced(const char *cmd)
{
    if (!tt_rt_is_traced_process())
        return;
    /* relaxed: a count, read at close after every thread that made a child has finished its
     * call (close waits for them through the session) */
    atomic_fetch_add_explicit(&g_children, 1, memory_order_relaxed);
    first_child(cmd, cmd == NULL);
}

void tt_rt_child_exec(const char *cmd)
{
    struct child_page *pg = g_child_page;
    uint32_t empty = 0;
    if (!pg || g_pid == 0 || syscall(SYS_getpid) == g_pid)
        return;
    /* the page is shared with other processes: the CAS makes one writer, the release store of
     * 2 publishes its bytes to the parent's acquire load at close */
    if (atomic_compare_exchange_strong_explicit(&pg->named, &empty, 1, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        snprintf(pg->cmd, sizeof pg->cmd, "%s", cmd);
        atomic_store_explicit(&pg->named, 2, memory_order_release);
    }
}

/* The first child's line, for the manifest and the report ("" when there was no child). */
static void first_child_cmd(char *out, size_t cap)
{
    pthread_mutex_lock(&g_child_lock);
    if (g_first_cmd[0])
        snprintf(out, cap, "%s", g_first_cmd);
    else if (g_first_is_fork && g_child_page &&
             atomic_load_explicit(&g_child_page->named, memory_order_acquire) == 2)
        snprintf(out, cap, "%s", g_child_page->cmd);
    else if (g_first_is_fork)
        snprintf(out, cap, "a fork of this program, which execed nothing");
    else
        out[0] = '\0';
    pthread_mutex_unlock(&g_child_lock);
}

/* Record: the counts into the manifest and the first line as a META object, before close. */
static void note_processes(tt_session *s)
{
    uint32_t n = atomic_load_explicit(&g_children, memory_order_relaxed);
    uint32_t u = atomic_load_explicit(&g_untraceable, memory_order_relaxed);
    if (!n && !u)
        return;
    char cmd[512], meta[600];
    first_child_cmd(cmd, sizeof cmd);
    snprintf(meta, sizeof meta, "untraced=%s", cmd);
    uint32_t id;
    tt_intern(s, TT_OBJ_META, meta, &id);
    tt_session_note_processes_(s, n, u);
}

static void rt_close(bool flush_stdio);

void tt_rt_exec_untraceable(const char *cmd)
{
    atomic_fetch_add_explicit(&g_untraceable, 1, memory_order_relaxed);
    first_child(cmd, false);
    /* the exec leaves nothing of this image: the file is finished now, under the guard the
     * caller holds (the close must not record its own calls) */
    int was = guard;
    guard = 0;
    rt_close(false);
    guard = was;
}

static void fork_child(void)
{
    /* The child is not traced: its copy of the session shares the parent's file descriptor and
     * would write into the parent's trace. Drop it without closing anything. */
    atomic_store_explicit(&tt_rt_live, NULL, memory_order_relaxed);
}

/* The longest command line recorded (Linux's own limit on arguments is a quarter of the stack
 * limit, 2 MiB by default), and the longest argument: a name holds at most 65535 bytes. */
#define CMDLINE_MAX (16u << 20)
#define ARG_META_MAX 65500u

static void record_meta(tt_session *s)
{
    char buf[4096 + 8];
    uint32_t id;
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) {
        snprintf(buf, sizeof buf, "cwd=%s", cwd);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
    /* the command line, whole or not at all: replay runs what is recorded here */
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t cap = 65536, n = 0;
    char *cmd = malloc(cap);
    for (ssize_t r = 1; cmd && r > 0;) {
        if (n + 1 == cap) {
            char *more = cap < CMDLINE_MAX ? realloc(cmd, cap * 2) : NULL;
            if (!more) {
                free(cmd);
                cmd = NULL;
                break;
            }
            cmd = more;
            cap *= 2;
        }
        while ((r = read(fd, cmd + n, cap - 1 - n)) < 0 && errno == EINTR)
            ;
        if (r > 0)
            n += (size_t)r;
    }
    close(fd);
    if (!cmd || n == 0) {
        free(cmd);
        return;
    }
    cmd[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1)
        if (strlen(cmd + i) > ARG_META_MAX) { /* too long for a name: record no command line */
            free(cmd);
            return;
        }
    int argc = 0;
    char *a = malloc(ARG_META_MAX + 32);
    for (size_t i = 0; a && i < n; i += strlen(cmd + i) + 1, argc++) {
        snprintf(a, ARG_META_MAX + 32, "argv[%d]=%s", argc, cmd + i);
        tt_intern(s, TT_OBJ_META, a, &id);
    }
    if (a) {
        snprintf(buf, sizeof buf, "argc=%d", argc);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
    free(a);
    free(cmd);
}

/* ---------------------------------------------------------------- the program's world
 *
 * `tinytrace record|replay` hands the runtime its settings through a descriptor, not the
 * environment: TT_ENV_RT, one variable of fixed length (the descriptor's number in ten digits),
 * the last of the environment, removed before main. So the program sees the same environment,
 * argv and auxv in both modes, and with ASLR off (the tool's default) its stack, heap and
 * mappings are at the same addresses. The descriptor stays open, out of the way and inherited,
 * so that an exec in the traced process (a shell running its last command, a wrapper script)
 * hands the settings on. */
static _Atomic int g_rt_fd = -1;
static int g_rt_slot = -1;

/* The fd registry's move: the settings descriptor stays inherited (tt_rt_exec_env). */
static int rt_fd_move(void *ctx, int fd)
{
    (void)ctx;
    if (g_rt_fd != fd)
        return 0;
    int hi = tt_fd_relocate(g_rt_slot, fd);
    if (hi >= 0)
        fcntl(hi, F_SETFD, 0);
    g_rt_fd = hi;
    return hi < 0 ? errno : 0;
}

/* Reads the settings of TT_ENV_RT; false when there is none (then the environment is read, as
 * a program run with TINYTRACE_MODE set by hand has it). */
static bool rt_settings_load(void)
{
    const char *v = secure_getenv(TT_ENV_RT);
    if (!v)
        return false;
    char *end;
    long fd = strtol(v, &end, 10);
    if (*end || fd < 0 || fd > INT32_MAX)
        return false;
    char text[16384];
    ssize_t n = pread((int)fd, text, sizeof text - 1, 0);
    if (n < 0)
        return false;
    tt_settings_load_(text, (size_t)n);
    /* out of the program's way, so that its own descriptors are numbered as in the other mode;
     * still inherited, for an exec of this process (tt_rt_exec_env) */
    int hi = fcntl((int)fd, F_DUPFD, RT_FD_LOW);
    if (hi >= 0) {
        close((int)fd);
        fd = hi;
    }
    g_rt_fd = (int)fd;
    g_rt_slot = tt_fd_reserve((int)fd, rt_fd_move, NULL);
    unsetenv(TT_ENV_RT);
    return true;
}

/* The environment for an exec of the traced process: @envp with TT_ENV_RT again at its end, so
 * that the program the process becomes is traced too; @envp itself when there is no descriptor.
 * The array is malloc'd and never freed (the process is about to become another). */
char *const *tt_rt_exec_env(char *const envp[])
{
    if (g_rt_fd < 0 || !tt_rt_is_traced_process())
        return envp;
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char **e = malloc((n + 2) * sizeof *e);
    char *var = malloc(64);
    if (!e || !var)
        return envp;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], TT_ENV_RT "=", sizeof TT_ENV_RT) != 0)
            e[k++] = envp[i];
    snprintf(var, 64, TT_ENV_RT "=%010d", g_rt_fd);
    e[k++] = var;
    e[k] = NULL;
    return e;
}

/* Record: what the program sees of its world besides its arguments, as META objects: its
 * environment (in order), the execve path and the 16 random bytes of the auxiliary vector. */
static void record_world(tt_session *s)
{
    extern char **environ;
    char buf[ARG_META_MAX + 32];
    uint32_t id, n = 0;
    for (char **e = environ; e && *e; e++) {
        if (strlen(*e) > ARG_META_MAX)
            continue;
        snprintf(buf, sizeof buf, "env[%u]=%s", n++, *e);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
    snprintf(buf, sizeof buf, "envc=%u", n);
    tt_intern(s, TT_OBJ_META, buf, &id);
    const char *fn = (const char *)getauxval(AT_EXECFN);
    if (fn && strlen(fn) < 4096) {
        snprintf(buf, sizeof buf, "execfn=%s", fn);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
    const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
    if (r) {
        static const char hex[] = "0123456789abcdef";
        char h[33];
        for (int i = 0; i < 16; i++) {
            h[2 * i] = hex[r[i] >> 4];
            h[2 * i + 1] = hex[r[i] & 15];
        }
        h[32] = '\0';
        snprintf(buf, sizeof buf, "auxv.random=%s", h);
        tt_intern(s, TT_OBJ_META, buf, &id);
    }
}

/* Replay: the recorded AT_RANDOM bytes where the program will read them. glibc took its stack
 * guard and pointer guard from the live ones before this ran; what the program reads is the
 * recording's. */
static void replay_world(tt_session *s)
{
    unsigned char *r = (unsigned char *)getauxval(AT_RANDOM);
    char name[64];
    const char prefix[] = "auxv.random=";
    for (uint32_t id = 1; r; id++) {
        int len = tt_names_copy(s, id, name, sizeof name);
        if (len < 0)
            break;
        if (len != (int)sizeof prefix - 1 + 32 || strncmp(name, prefix, sizeof prefix - 1) != 0)
            continue;
        for (int i = 0; i < 16; i++) {
            unsigned hi, lo;
            char c1 = name[sizeof prefix - 1 + 2 * i], c2 = name[sizeof prefix + 2 * i];
            hi = c1 <= '9' ? (unsigned)(c1 - '0') : (unsigned)(c1 - 'a' + 10);
            lo = c2 <= '9' ? (unsigned)(c2 - '0') : (unsigned)(c2 - 'a' + 10);
            r[i] = (unsigned char)(hi << 4 | lo);
        }
        break;
    }
}

#ifdef TT_RT_PRELOAD
__attribute__((constructor(101)))
#endif
static void rt_init(void)
{
    /* setuid and setgid programs read no TINYTRACE_* (config.c): said once, here */
    if (tt_env_secure_() && tt_env_has_settings_()) {
        static const char msg[] = "tinytrace: TINYTRACE_* ignored in a setuid or setgid "
                                  "process\n";
        (void)!write(2, msg, sizeof msg - 1);
        return;
    }
    bool from_tool = rt_settings_load();
    const char *mode = tt_setting_("TINYTRACE_MODE");
    if (!mode || !*mode || !strcmp(mode, "off"))
        return;
    /* before anything of ours is allocated or mapped, in record and replay alike: the same
     * reservation, so the program's heap and mappings are at the same addresses in both */
    tt_region_init(RT_REGION);
    /* Only the process that was started for tracing traces: a program it execs inherits the
     * environment, and would otherwise finish its own file under the same final name. */
    char me[32];
    snprintf(me, sizeof me, "%ld", (long)getpid());
    const char *owner = from_tool ? NULL : secure_getenv(TT_ENV_PID);
    if (owner && strcmp(owner, me) != 0)
        return;
    guard = 1;
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    tt_config_init(&cfg);
    int rc = tt_config_from_env(&cfg, &err);
    if (rc == TT_OK && env_flag(TT_ENV_KEEP_GOING))
        rc = tt_config_set(&cfg, TT_PARAM_DIVERGENCE, TT_DIVERGE_COUNT, &err);
    if (rc == TT_OK)
        rc = tt_session_open(&cfg, &s, &err);
    if (rc == TT_E_IO && err.sys_errno == EEXIST && (owner || from_tool) &&
        tt_session_mode_of_(&cfg) == TT_MODE_RECORD) {
        /* This process was traced before an exec (a shell running its last command, a wrapper
         * script): the earlier image's file is ours and unfinished. The recording is of the
         * program the process became, so drop it and start again. */
        char partial[4200];
        snprintf(partial, sizeof partial, "%s.%s.partial", tt_setting_("TINYTRACE_FILE"), me);
        if (unlink(partial) == 0)
            rc = tt_session_open(&cfg, &s, &err);
    }
    if (rc != TT_OK && tt_session_mode_of_(&cfg) == TT_MODE_REPLAY)
        report_channel_open();
    if (rc == TT_E_CONFIG || (rc != TT_OK && report_fd >= 0)) {
        /* a bad setting, or a replay that cannot start, is refused before the program runs */
        fprintf(stderr, "tinytrace: %s\n", err.message);
        write_report(NULL, TT_REPORT_STATUS_ERROR, rc, err.message, NULL, NULL, 0);
        fflush(stderr);
        exit_now(2);
    }
    if (rc != TT_OK) {
        /* tracing must not break the program: say why and run it untraced */
        fprintf(stderr, "tinytrace: not tracing this process: %s\n", err.message);
        guard = 0;
        return;
    }
    g_mode = tt_session_mode(s);
    g_pid = getpid();
    opt_alloc = env_flag(TT_ENV_ALLOC);
    opt_check_output = env_flag(TT_ENV_CHECK_OUTPUT);
    if (g_mode == TT_MODE_REPLAY && !opt_check_output) {
        /* `replay --no-check-output`: the recorded output is stepped over, not compared */
        tt_replay_skip_out_channel_(s, TT_CH_STDOUT);
        tt_replay_skip_out_channel_(s, TT_CH_STDERR);
    }
    opt_keep_going = env_flag(TT_ENV_KEEP_GOING);
    if (g_mode == TT_MODE_REPLAY) {
        tt_replay_stop_at_exit_(s);
        report_channel_open();
    }
    /* after every getenv: a program with its own environment code (bash) may not find
     * variables set before it has loaded the environment. Settings from the tool need no mark
     * (no child inherits them), and the environment stays as the program would have it. */
    if (!from_tool)
        setenv(TT_ENV_PID, me, 1);
    if (g_mode == TT_MODE_RECORD) {
        record_meta(s);
        record_world(s);
    } else {
        replay_world(s);
    }
    child_page_map();
    install_crash_handlers();
    pthread_atfork(NULL, NULL, fork_child);
    tt_filter_start(s);
    tt_hooks_attach(s);
    if (g_mode == TT_MODE_RECORD && pthread_key_create(&exit_key, thread_exit) == 0) {
        exit_key_ok = true;
        tt_session_set_thread_hook_(s, on_thread);
    }
    atomic_store_explicit(&tt_rt_live, s, memory_order_release);
    name_thread("main");
    guard = 0;
}


/* The verdict at the end of a replay. A recording with output left over that the program never
 * wrote is a divergence of its output, not an early end: the program ran to its end and said
 * less (or else) than it did when recorded. */
static void close_report(tt_session *s, int rc, const tt_error_info *err,
                         const tt_divergence *last, uint64_t divergences)
{
    tt_divergence left;
    memset(&left, 0, sizeof left);
    if (rc == TT_E_UNCONSUMED && divergences == 0 && tt_replay_first_left_(s, &left.expected) == TT_OK &&
        output_event(&left.expected)) {
        left.has_expected = 1;
        left.tp = left.expected.ev.tp;
        left.actual.ev.kind = TT_EV_SESSION_END;
        output_reason(&left);
        snprintf(left.message, sizeof left.message, "the program's output ended before the "
                 "recorded one: %.*s", 180, err->message);
        char e[TT_REPORT_PREVIEW * 4 + 16];
        quote_line(e, sizeof e, &left.expected);
        fprintf(stderr, "tinytrace: the program's output differs on %s: it ended where the "
                "recording goes on with %s\n",
                left.expected.ev.arg == TT_CH_STDOUT ? "stdout" : "stderr", e);
        write_report(s, TT_REPORT_STATUS_DIVERGED, TT_E_DIVERGED, left.message, &left, NULL, 1);
        return;
    }
    if (rc == TT_OK && divergences == 0)
        write_report(s, TT_REPORT_STATUS_MATCHED, rc, "replay matched the recording", NULL, NULL, 0);
    else if (rc == TT_OK)
        write_report(s, TT_REPORT_STATUS_DIVERGED, TT_E_DIVERGED,
                     "divergences were counted; the last one is shown", last, NULL, divergences);
    else if (rc == TT_E_UNCONSUMED)
        write_report(s, TT_REPORT_STATUS_UNCONSUMED, rc, err->message, last, NULL, divergences);
    else
        write_report(s, TT_REPORT_STATUS_ERROR, rc, err->message, last, NULL, divergences);
}

__attribute__((destructor(101))) static void rt_fini(void)
{
    rt_close(true);
}

static void rt_close(bool flush_stdio)
{
    /* A crash on another thread may be finalizing the session: it has taken it out of
     * tt_rt_live already, so that is looked at first. This thread waits for that crash to end
     * the process; were it to go on and exit, the process would end with status 0 and the
     * recording half written. */
    if (atomic_load(&g_closing) == 2 && atomic_load(&g_crash_tid) != os_tid())
        wait_forever();
    tt_session *s = cur();
    if (!s)
        return;
    /* the real pid: with the guard held, getpid is not recorded or replayed */
    int was = guard;
    guard = 1;
    pid_t me = getpid();
    guard = was;
    int zero = 0;
    if (me != g_pid)
        return;
    if (!atomic_compare_exchange_strong(&g_closing, &zero, 1)) {
        if (zero == 2 && atomic_load(&g_crash_tid) != os_tid())
            wait_forever(); /* another thread's crash is being finalized; it ends the process */
        return;
    }
    /* the program's buffered output is still part of the run (not after _exit, which
     * discards it) */
    if (flush_stdio)
        fflush(NULL);
    guard = 1;
    /* in the recording, every thread's events came before the close: let the others make
     * theirs before they stop being replayed */
    if (g_mode == TT_MODE_REPLAY)
        tt_replay_drain_(s);
    atomic_store_explicit(&tt_rt_live, NULL, memory_order_release);
    tt_error_info err;
    tt_replay_progress p = { 0 };
    tt_divergence d;
    const tt_divergence *last = NULL;
    if (g_mode == TT_MODE_REPLAY) {
        tt_replay_progress_get(s, &p);
        /* --keep-going: the report shows the last divergence counted */
        if (p.divergences && tt_replay_divergence(s, &d) == TT_OK) {
            output_reason(&d);
            last = &d;
        }
    }
    if (g_mode == TT_MODE_RECORD)
        note_processes(s);
    /* finish first, close (free) after the report: its events name the session's objects.
     * The runtime finishes the process's session even when the program holds it too. */
    int rc = tt_session_finish_(s, &err);
    if (g_mode == TT_MODE_REPLAY)
        close_report(s, rc, &err, last, p.divergences);
    tt_session_close(s, NULL);
    if (rc != TT_OK)
        fprintf(stderr, "tinytrace: %s\n", err.message);
    atomic_store(&g_closed, 1);
}

#ifdef TT_RT_PRELOAD
/* Programs that end with _exit (shells do) skip destructors: close the session first. exit()
 * reaches the kernel through glibc's internal alias, not through here. */
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    if (!guard)
        rt_close(false);
    exit_now(status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    if (!guard)
        rt_close(false);
    exit_now(status);
}
#endif /* TT_RT_PRELOAD */
