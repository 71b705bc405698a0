/* SPDX-License-Identifier: MIT */
/* Wide characters. glibc makes fopencookie streams (stdio.c) byte-only: a wide call on one
 * crashes, by design. On a replaced stream the wide functions therefore decode and encode the
 * bytes themselves, with mbrtowc/wcrtomb in the program's locale, so that wide input is recorded
 * like byte input. The wscanf family is not rebuilt: on the replaced stdin it hands the unread
 * bytes back to glibc's own stdin and makes it the program's stdin again, and the rest of stdin
 * goes unrecorded.
 */
#include "preload.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static inline bool is_repl(FILE *fp)
{
    for (int i = 0; i < 3; i++)
        if (fp && fp == atomic_load_explicit(&tt_pl_std_repl[i], memory_order_relaxed))
            return true;
    return false;
}

static wint_t ck_getwc(FILE *fp)
{
    int (*get)(FILE *) = REAL(getc, int (*)(FILE *));
    mbstate_t st;
    memset(&st, 0, sizeof st);
    bool partial = false;
    for (;;) {
        int c = get(fp);
        if (c == EOF) {
            if (partial)
                errno = EILSEQ;
            return WEOF;
        }
        char ch = (char)c;
        wchar_t wc;
        size_t r = mbrtowc(&wc, &ch, 1, &st);
        if (r == (size_t)-2) {
            partial = true;
            continue;
        }
        if (r == (size_t)-1) {
            errno = EILSEQ;
            return WEOF;
        }
        return (wint_t)wc;
    }
}

static wint_t ck_ungetwc(wint_t wc, FILE *fp)
{
    char mb[MB_LEN_MAX];
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t n = wc == WEOF ? (size_t)-1 : wcrtomb(mb, (wchar_t)wc, &st);
    if (n == (size_t)-1)
        return WEOF;
    while (n--)
        if (REAL(ungetc, int (*)(int, FILE *))((unsigned char)mb[n], fp) == EOF)
            return WEOF;
    return wc;
}

static wchar_t *ck_getws(wchar_t *ws, int n, FILE *fp)
{
    if (n <= 0)
        return NULL;
    int i = 0;
    while (i < n - 1) {
        wint_t c = ck_getwc(fp);
        if (c == WEOF)
            break;
        ws[i++] = (wchar_t)c;
        if (c == L'\n')
            break;
    }
    if (i == 0)
        return NULL;
    ws[i] = L'\0';
    return ws;
}

/* Writes @n wide characters as multibyte bytes; returns 0 or -1. */
static int ck_putws(const wchar_t *ws, size_t n, FILE *fp)
{
    size_t (*put)(const void *, size_t, size_t, FILE *) =
        REAL(fwrite, size_t (*)(const void *, size_t, size_t, FILE *));
    char buf[256 + MB_LEN_MAX];
    size_t len = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        size_t k = wcrtomb(buf + len, ws[i], &st);
        if (k == (size_t)-1) {
            errno = EILSEQ;
            return -1;
        }
        len += k;
        if (len >= 256) {
            if (put(buf, 1, len, fp) != len)
                return -1;
            len = 0;
        }
    }
    return len && put(buf, 1, len, fp) != len ? -1 : 0;
}

static wint_t ck_putwc(wchar_t wc, FILE *fp)
{
    return ck_putws(&wc, 1, fp) == 0 ? (wint_t)wc : WEOF;
}

static int ck_vwprintf(FILE *fp, const wchar_t *fmt, va_list ap)
{
    wchar_t small[256];
    wchar_t *buf = small;
    size_t cap = sizeof small / sizeof small[0];
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        int n = vswprintf(buf, cap, fmt, aq);
        va_end(aq);
        if (n >= 0) {
            int rc = ck_putws(buf, (size_t)n, fp);
            if (buf != small)
                free(buf);
            return rc == 0 ? n : -1;
        }
        /* too small, or an encoding error: grow up to a bound, then give up */
        if (buf != small)
            free(buf);
        if (cap >= (1u << 22) / sizeof(wchar_t))
            return -1;
        cap *= 8;
        buf = malloc(cap * sizeof(wchar_t));
        if (!buf)
            return -1;
    }
}

/* wscanf on the replaced stdin: give glibc's stdin back, with the unread bytes. */
static FILE *ck_unreplace_stdin(FILE *fp)
{
    FILE *orig = atomic_load_explicit(&tt_pl_std_orig[0], memory_order_relaxed);
    if (!orig || fp != atomic_load_explicit(&tt_pl_std_repl[0], memory_order_relaxed))
        return fp;
    atomic_store_explicit(&tt_pl_std_repl[0], NULL, memory_order_relaxed);
    atomic_store_explicit(&tt_pl_std_orig[0], NULL, memory_order_relaxed);
#ifdef __GLIBC__
    /* The bytes the replacement read ahead go back as wide characters through ungetwc: glibc's
     * wide reads take its wide pushback area first, and only then allocate their buffers. (A
     * program that mixes byte and wide reads on one stream gets nothing from glibc anyway.) */
    REAL(fwide, int (*)(FILE *, int))(orig, 1);
    wchar_t ws[BUFSIZ];
    size_t nw = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    const char *p = fp->_IO_read_ptr, *e = fp->_IO_read_end;
    while (p < e && nw < BUFSIZ) {
        size_t r = mbrtowc(&ws[nw], p, (size_t)(e - p), &st);
        if (r == (size_t)-1 || r == (size_t)-2)
            break; /* an invalid or cut sequence ends what can be handed back */
        p += r ? r : 1;
        nw++;
    }
    while (nw--)
        REAL(ungetwc, wint_t (*)(wint_t, FILE *))((wint_t)ws[nw], orig);
    fp->_IO_read_ptr = fp->_IO_read_end;
#endif
    stdin = orig;
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
        fprintf(stderr, "tinytrace: wide-character scanf on stdin: the rest of stdin is not "
                        "recorded\n");
    return orig;
}

#define WIDE_GET(name)                                                                         \
    TT_EXPORT wint_t name(FILE *fp)                                                            \
    {                                                                                          \
        fp = tt_pl_redirect(fp);                                                               \
        return is_repl(fp) ? ck_getwc(fp) : REAL(name, wint_t (*)(FILE *))(fp);               \
    }
WIDE_GET(fgetwc)
WIDE_GET(getwc)
WIDE_GET(fgetwc_unlocked)
WIDE_GET(getwc_unlocked)

TT_EXPORT wint_t getwchar(void)
{
    return is_repl(stdin) ? ck_getwc(stdin) : REAL(getwchar, wint_t (*)(void))();
}

TT_EXPORT wint_t getwchar_unlocked(void)
{
    return is_repl(stdin) ? ck_getwc(stdin) : REAL(getwchar_unlocked, wint_t (*)(void))();
}

TT_EXPORT wchar_t *fgetws(wchar_t *restrict ws, int n, FILE *restrict fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_getws(ws, n, fp)
                       : REAL(fgetws, wchar_t *(*)(wchar_t *, int, FILE *))(ws, n, fp);
}

TT_EXPORT wchar_t *fgetws_unlocked(wchar_t *restrict ws, int n, FILE *restrict fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_getws(ws, n, fp)
                       : REAL(fgetws_unlocked, wchar_t *(*)(wchar_t *, int, FILE *))(ws, n, fp);
}

wchar_t *__fgetws_chk(wchar_t *ws, size_t size, int n, FILE *fp);
wchar_t *__fgetws_unlocked_chk(wchar_t *ws, size_t size, int n, FILE *fp);

typedef wchar_t *(*fgetws_chk_fn)(wchar_t *, size_t, int, FILE *);

/* The fortified fgetws on a replaced stream: glibc's check of the buffer, then ck_getws. */
static wchar_t *ck_getws_chk(wchar_t *ws, size_t size, int n, FILE *fp)
{
    if (n > 0 && (size_t)n > size)
        __chk_fail();
    return ck_getws(ws, n, fp);
}

TT_EXPORT wchar_t *__fgetws_chk(wchar_t *ws, size_t size, int n, FILE *fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_getws_chk(ws, size, n, fp)
                       : REAL(__fgetws_chk, fgetws_chk_fn)(ws, size, n, fp);
}

TT_EXPORT wchar_t *__fgetws_unlocked_chk(wchar_t *ws, size_t size, int n, FILE *fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_getws_chk(ws, size, n, fp)
                       : REAL(__fgetws_unlocked_chk, fgetws_chk_fn)(ws, size, n, fp);
}

TT_EXPORT wint_t ungetwc(wint_t wc, FILE *fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_ungetwc(wc, fp) : REAL(ungetwc, wint_t (*)(wint_t, FILE *))(wc, fp);
}

#define WIDE_PUT(name)                                                                         \
    TT_EXPORT wint_t name(wchar_t wc, FILE *fp)                                                \
    {                                                                                          \
        fp = tt_pl_redirect(fp);                                                               \
        return is_repl(fp) ? ck_putwc(wc, fp) : REAL(name, wint_t (*)(wchar_t, FILE *))(wc, fp); \
    }
WIDE_PUT(fputwc)
WIDE_PUT(putwc)
WIDE_PUT(fputwc_unlocked)
WIDE_PUT(putwc_unlocked)

TT_EXPORT wint_t putwchar(wchar_t wc)
{
    return is_repl(stdout) ? ck_putwc(wc, stdout) : REAL(putwchar, wint_t (*)(wchar_t))(wc);
}

TT_EXPORT wint_t putwchar_unlocked(wchar_t wc)
{
    return is_repl(stdout) ? ck_putwc(wc, stdout)
                           : REAL(putwchar_unlocked, wint_t (*)(wchar_t))(wc);
}

TT_EXPORT int fputws(const wchar_t *restrict ws, FILE *restrict fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_putws(ws, wcslen(ws), fp)
                       : REAL(fputws, int (*)(const wchar_t *, FILE *))(ws, fp);
}

TT_EXPORT int fputws_unlocked(const wchar_t *restrict ws, FILE *restrict fp)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_putws(ws, wcslen(ws), fp)
                       : REAL(fputws_unlocked, int (*)(const wchar_t *, FILE *))(ws, fp);
}

/* The variadic form of a wide printf or scanf: its v-function with the same arguments. */
#define WIDE_VARARGS(name, params, vcall)                                                      \
    TT_EXPORT int name params                                                                  \
    {                                                                                          \
        va_list ap;                                                                            \
        va_start(ap, fmt);                                                                     \
        int n = vcall;                                                                         \
        va_end(ap);                                                                            \
        return n;                                                                              \
    }

typedef int (*vfwprintf_fn)(FILE *, const wchar_t *, va_list);
typedef int (*vfwprintf_chk_fn)(FILE *, int, const wchar_t *, va_list);

TT_EXPORT int vfwprintf(FILE *restrict fp, const wchar_t *restrict fmt, va_list ap)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_vwprintf(fp, fmt, ap) : REAL(vfwprintf, vfwprintf_fn)(fp, fmt, ap);
}

TT_EXPORT int vwprintf(const wchar_t *restrict fmt, va_list ap)
{
    return vfwprintf(stdout, fmt, ap);
}

WIDE_VARARGS(fwprintf, (FILE *restrict fp, const wchar_t *restrict fmt, ...),
             vfwprintf(fp, fmt, ap))
WIDE_VARARGS(wprintf, (const wchar_t *restrict fmt, ...), vfwprintf(stdout, fmt, ap))

int __vfwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, va_list ap);
int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap);
int __fwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, ...);
int __wprintf_chk(int flag, const wchar_t *fmt, ...);

TT_EXPORT int __vfwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, va_list ap)
{
    fp = tt_pl_redirect(fp);
    return is_repl(fp) ? ck_vwprintf(fp, fmt, ap)
                       : REAL(__vfwprintf_chk, vfwprintf_chk_fn)(fp, flag, fmt, ap);
}

TT_EXPORT int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap)
{
    return __vfwprintf_chk(stdout, flag, fmt, ap);
}

WIDE_VARARGS(__fwprintf_chk, (FILE *fp, int flag, const wchar_t *fmt, ...),
             __vfwprintf_chk(fp, flag, fmt, ap))
WIDE_VARARGS(__wprintf_chk, (int flag, const wchar_t *fmt, ...),
             __vfwprintf_chk(stdout, flag, fmt, ap))

typedef int (*vfwscanf_fn)(FILE *, const wchar_t *, va_list);

/* With -std=c11 the headers give these the C99 symbols (__isoc99_vfwscanf, …), which are the
 * ones programs call today. */
TT_EXPORT int vfwscanf(FILE *restrict fp, const wchar_t *restrict fmt, va_list ap)
{
    return REAL(__isoc99_vfwscanf, vfwscanf_fn)(ck_unreplace_stdin(tt_pl_redirect(fp)), fmt, ap);
}

TT_EXPORT int vwscanf(const wchar_t *restrict fmt, va_list ap)
{
    return vfwscanf(stdin, fmt, ap);
}

WIDE_VARARGS(fwscanf, (FILE *restrict fp, const wchar_t *restrict fmt, ...), vfwscanf(fp, fmt, ap))
WIDE_VARARGS(wscanf, (const wchar_t *restrict fmt, ...), vfwscanf(stdin, fmt, ap))

/* The GNU versions (%a as an allocation flag), called by programs built as C89. */
int gnu_vfwscanf(FILE *fp, const wchar_t *fmt, va_list ap) __asm__("vfwscanf");
int gnu_vwscanf(const wchar_t *fmt, va_list ap) __asm__("vwscanf");
int gnu_fwscanf(FILE *fp, const wchar_t *fmt, ...) __asm__("fwscanf");
int gnu_wscanf(const wchar_t *fmt, ...) __asm__("wscanf");

TT_EXPORT int gnu_vfwscanf(FILE *fp, const wchar_t *fmt, va_list ap)
{
    return REAL(vfwscanf, vfwscanf_fn)(ck_unreplace_stdin(tt_pl_redirect(fp)), fmt, ap);
}

TT_EXPORT int gnu_vwscanf(const wchar_t *fmt, va_list ap)
{
    return gnu_vfwscanf(stdin, fmt, ap);
}

WIDE_VARARGS(gnu_fwscanf, (FILE *fp, const wchar_t *fmt, ...), gnu_vfwscanf(fp, fmt, ap))
WIDE_VARARGS(gnu_wscanf, (const wchar_t *fmt, ...), gnu_vfwscanf(stdin, fmt, ap))

TT_EXPORT int fwide(FILE *fp, int mode)
{
    fp = tt_pl_redirect(fp);
    if (is_repl(fp))
        return mode > 0 ? 1 : mode < 0 ? -1 : 0; /* either orientation works on a replaced stream */
    return REAL(fwide, int (*)(FILE *, int))(fp, mode);
}
