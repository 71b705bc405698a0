/* SPDX-License-Identifier: MIT */
/* The divergence report: the events a report shows, the history of a thread's last matches,
 * and the report as text (tt_divergence_format).
 *
 * Names come from the session's intern table, which another thread may grow (and move) at any
 * time by interning a new name: they are copied under the session lock (tt_names_copy), never
 * read in place, so the report can be formatted on any thread while others record.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "replay-int.h"

void tt_report_event_set(tt_report_event *re, const tt_event *ev)
{
    re->ev = *ev;
    re->ev.payload = NULL;
    re->preview_len = ev->payload_len < TT_REPORT_PREVIEW ? (uint32_t)ev->payload_len
                                                          : TT_REPORT_PREVIEW;
    if (ev->payload && re->preview_len)
        memcpy(re->preview, ev->payload, re->preview_len);
    else
        re->preview_len = 0;
}

void tt_report_history_push(struct tt_rp_thread *t, const tt_event *ev)
{
    tt_report_event_set(&t->hist[t->hist_pos], ev);
    t->hist_pos = (t->hist_pos + 1) % TT_REPORT_HISTORY;
    if (t->hist_len < TT_REPORT_HISTORY)
        t->hist_len++;
}

/* Appends name @nm (@n bytes) at *@o in @buf: a name comes from the program (or a hostile
 * file) and the text goes to a terminal, so control bytes and backslashes are escaped (\xNN,
 * \\); UTF-8 passes as it is. */
static void put_name(char *buf, size_t cap, size_t *o, const char *nm, uint32_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (uint32_t i = 0; i < n && *o + 5 < cap; i++) {
        unsigned char c = (unsigned char)nm[i];
        if (c < 0x20 || c == 0x7f || c == '\\') {
            buf[(*o)++] = '\\';
            if (c == '\\') {
                buf[(*o)++] = '\\';
                continue;
            }
            buf[(*o)++] = 'x';
            buf[(*o)++] = hex[c >> 4];
            buf[(*o)++] = hex[c & 15];
        } else {
            buf[(*o)++] = (char)c;
        }
    }
    if (*o < cap)
        buf[*o] = '\0';
}

static size_t fmt_event(tt_session *s, const tt_report_event *re, char *buf, size_t cap)
{
    const tt_event *ev = &re->ev;
    /* copies: another thread may move the intern table meanwhile (see the essay) */
    char fnb[256], siteb[256];
    const char *fn = NULL, *site = NULL;
    uint32_t fl = 0, sl = 0;
    int n_;
    if (ev->sp.function && (n_ = tt_names_copy(s, ev->sp.function, fnb, sizeof fnb)) >= 0) {
        fn = fnb;
        fl = (uint32_t)n_ < sizeof fnb ? (uint32_t)n_ : (uint32_t)sizeof fnb - 1;
    }
    if (ev->sp.site && (n_ = tt_names_copy(s, ev->sp.site, siteb, sizeof siteb)) >= 0) {
        site = siteb;
        sl = (uint32_t)n_ < sizeof siteb ? (uint32_t)n_ : (uint32_t)sizeof siteb - 1;
    }
    int n = snprintf(buf, cap, "%s", tt_event_kind_name(ev->kind));
    size_t o = n > 0 ? (size_t)n : 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (o < cap) {                                                                             \
            int k_ = snprintf(buf + o, cap - o, __VA_ARGS__);                                      \
            if (k_ > 0)                                                                            \
                o += (size_t)k_;                                                                   \
        }                                                                                          \
    } while (0)
    if (ev->sp.function) {
        APPEND(" function=");
        put_name(buf, cap, &o, fn ? fn : "?", fn ? fl : 1);
        APPEND("(#%u)", ev->sp.function);
    }
    if (ev->sp.site) {
        APPEND(" site=");
        put_name(buf, cap, &o, site ? site : "?", site ? sl : 1);
        APPEND("(#%u)", ev->sp.site);
    }
    if (ev->kind == TT_EV_ALLOC)
        APPEND(" size=%" PRIu64, ev->arg);
    if (ev->kind == TT_EV_IO)
        APPEND(" %s channel=%" PRIu64, ev->dir == TT_IO_OUT ? "out" : "in", ev->arg);
    if (ev->kind == TT_EV_USER)
        APPEND(" tag=%" PRIu64, ev->arg);
    if (ev->payload_len || re->preview_len) {
        APPEND(" len=%" PRIu64 " bytes=", ev->payload_len);
        for (uint32_t i = 0; i < re->preview_len; i++)
            APPEND("%02x", re->preview[i]);
    }
#undef APPEND
    return o < cap ? o : cap ? cap - 1 : 0;
}

/* Out of line and with a side effect the compiler must keep, so that a call to it stays a call
 * (a breakpoint's place) however the caller is optimized. */
__attribute__((noinline)) void tt_divergence_break(const char *report)
{
    __asm__ volatile("" : : "r"(report) : "memory");
}

size_t tt_divergence_format(tt_session *s, const tt_divergence *d, char *buf, size_t cap)
{
    char e[512], a[512];
    size_t o = 0;
    if (!cap)
        return 0;
    buf[0] = '\0';
    fmt_event(s, &d->actual, a, sizeof a);
    if (d->has_expected)
        fmt_event(s, &d->expected, e, sizeof e);
    else
        snprintf(e, sizeof e, "(end of the recording)");
    int n = snprintf(buf, cap,
                     "replay diverged: %s\n  thread %u, sequence %" PRIu64 "\n  expected: %s\n"
                     "  actual:   %s\n",
                     d->message, d->tp.thread, d->tp.seq, e, a);
    o = n > 0 ? ((size_t)n < cap ? (size_t)n : cap - 1) : 0;
    if (d->history_len && o < cap) {
        n = snprintf(buf + o, cap - o, "  last %u matched events of this thread:\n", d->history_len);
        o += n > 0 ? (size_t)n : 0;
        for (uint32_t i = 0; i < d->history_len && o < cap; i++) {
            char h[512];
            fmt_event(s, &d->history[i], h, sizeof h);
            n = snprintf(buf + o, cap - o, "    seq %" PRIu64 ": %s\n", d->history[i].ev.tp.seq, h);
            o += n > 0 ? (size_t)n : 0;
        }
    }
    return o < cap ? o : cap - 1;
}
