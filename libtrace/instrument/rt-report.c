/* SPDX-License-Identifier: MIT */
/* The runtime's report (protocol.h): the verdict of a replay, as JSON lines on the channel the
 * tool opened, and the program's output as the verdict quotes it. Split from runtime.c, whose
 * state it reads (rt-int.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event-int.h"
#include "rt-int.h"
#include "runtime.h"

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
void write_report(tt_session *s, const char *status, int code, const char *message,
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
    char pname[sizeof g_path + 16];
    proc_name(pname, sizeof pname);
    fprintf(f, "{\"process\": \"%s\", \"status\": \"%s\", \"nonce\": \"%s\", \"divergences\": %" PRIu64
            ", \"error\": \"%s\", \"matched\": %" PRIu64 ", \"threads\": %u, "
            "\"live_children\": %u, \"untraceable_execs\": %u, \"first_live\": ",
            pname, status, report_nonce, divergences, tt_error_name(code), prog.matched,
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
int report_fd_move(void *ctx, int fd)
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
void report_channel_open(void)
{
    const char *v = tt_setting_(TT_ENV_REPORT_FD);
    if (!v)
        return;
    char *end;
    long fd = strtol(v, &end, 10);
    struct stat st;
    if (*end || fd < 0 || fd > INT32_MAX || fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return;
    const char *nonce = tt_setting_(TT_ENV_REPORT_NONCE);
    if (nonce && strlen(nonce) == TT_REPORT_NONCE_LEN && fd >= RT_FD_LOW) {
        /* the tool's process tree: every process of it reports on the one channel, which the
         * tool put out of the way and which stays inherited across exec */
        memcpy(report_nonce, nonce, TT_REPORT_NONCE_LEN + 1);
        report_fd = (int)fd;
        report_slot = tt_fd_reserve((int)fd, report_fd_move, NULL);
        return;
    }
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

bool output_event(const tt_report_event *re)
{
    return re->ev.kind == TT_EV_IO && re->ev.dir == TT_IO_OUT &&
           (re->ev.arg == TT_CH_STDOUT || re->ev.arg == TT_CH_STDERR);
}

/* A line of output as a report shows it: in quotes, control bytes and quotes escaped, "..."
 * where the event holds more than its preview. */
void quote_line(char *buf, size_t cap, const tt_report_event *re)
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
void output_reason(tt_divergence *d)
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

void tt_rt_sync_shared(tt_session *s)
{
    tt_sync_note_shared_(s);
}

void tt_rt_failed(int rc, const char *what)
{
    tt_session *s = cur();
    if (!s || rc == TT_OK)
        return;
    if (rc == TT_E_DIVERGED) {
        tt_divergence d;
        char text[8192], bt[4096], shown[8192 + 4096 + 256];
        tt_backtrace(bt, sizeof bt, 1);
        if (tt_replay_divergence(s, &d) != TT_OK)
            memset(&d, 0, sizeof d);
        output_reason(&d);
        size_t n = tt_divergence_format(s, &d, text, sizeof text);
        snprintf(shown, sizeof shown, "tinytrace: in %s: %.*s  backtrace of the diverging call:\n%s",
                 what, (int)n, text, bt);
        fputs(shown, stderr);
        tt_replay_progress p;
        tt_replay_progress_get(s, &p);
        write_report(s, TT_REPORT_STATUS_DIVERGED, rc, d.message, &d, bt, p.divergences);
        /* the debugger's place: the report is out, the diverging call has not returned */
        fflush(stderr);
        tt_divergence_break(shown);
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
