/* SPDX-License-Identifier: MIT */
/* tinytrace — the recorded command line of a trace (meta.h: what the runtime records, and the
 * rules a trace from anyone is held to). */
#include "meta.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tool_meta_free(tool_meta *mt)
{
    if (mt->argv != NULL)
        for (uint64_t i = 0; i < mt->argc; i++)
            free(mt->argv[i]);
    free(mt->argv);
    free(mt->cwd);
    free(mt->untraced);
    free(mt->execfn);
    free(mt->chaos);
    free(mt->filter);
    free(mt->notrace);
    free(mt->depth);
    if (mt->env != NULL)
        for (uint64_t i = 0; i < mt->envc; i++)
            free(mt->env[i]);
    free(mt->env);
    memset(mt, 0, sizeof *mt);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Parses decimal digits of s[0..n) into *v; 0 on success. */
int tool_parse_dec(const char *s, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return 0;
}

__attribute__((format(printf, 3, 4))) static int damaged(char *why, size_t cap,
                                                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return TT_E_CORRUPT;
}

int tool_meta_parse(const tt_reader *r, tool_meta *mt, char *why, size_t cap)
{
    uint32_t count = tt_reader_manifest(r)->object_count;
    int have_argc = 0;

    memset(mt, 0, sizeof *mt);
    if (cap > 0)
        why[0] = '\0';
    /* two passes: argc sizes the array, then the arguments fill it */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t id = 1; id <= count; id++) {
            tt_object_entry o;
            const char *name, *eq, *close;
            size_t len;
            uint64_t idx;

            if (tt_reader_object(r, id, &o) != TT_OK || o.kind != TT_OBJ_META)
                continue;
            mt->found = 1;
            name = o.name;
            len = o.name_len;
            if (name == NULL || memchr(name, '\0', len) != NULL)
                return damaged(why, cap, "object %" PRIu32 " holds a NUL byte", id);
            if (pass == 0 && len >= 5 && memcmp(name, "argc=", 5) == 0) {
                if (have_argc || tool_parse_dec(name + 5, len - 5, &mt->argc) != 0 ||
                    mt->argc > count)
                    return damaged(why, cap, "a bad or second argc (object %" PRIu32 ")", id);
                have_argc = 1;
            } else if (pass == 0 && len >= 4 && memcmp(name, "cwd=", 4) == 0) {
                if (mt->cwd != NULL)
                    return damaged(why, cap, "a second cwd (object %" PRIu32 ")", id);
                if ((mt->cwd = dup_n(name + 4, len - 4)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 7 && memcmp(name, "execfn=", 7) == 0) {
                if (mt->execfn == NULL && (mt->execfn = dup_n(name + 7, len - 7)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 5 && memcmp(name, "envc=", 5) == 0) {
                if (tool_parse_dec(name + 5, len - 5, &mt->envc) != 0 || mt->envc > count)
                    return damaged(why, cap, "a bad envc (object %" PRIu32 ")", id);
            } else if (pass == 1 && len >= 4 && memcmp(name, "env[", 4) == 0 && mt->env) {
                close = memchr(name, ']', len);
                eq = close != NULL && (size_t)(close - name) + 1 < len ? close + 1 : NULL;
                if (eq == NULL || *eq != '=' ||
                    tool_parse_dec(name + 4, (size_t)(close - name) - 4, &idx) != 0 ||
                    idx >= mt->envc || mt->env[idx] != NULL)
                    return damaged(why, cap, "a bad env entry (object %" PRIu32 ")", id);
                if ((mt->env[idx] = dup_n(eq + 1, len - (size_t)(eq + 1 - name))) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 6 && memcmp(name, "chaos=", 6) == 0) {
                if (mt->chaos == NULL && (mt->chaos = dup_n(name + 6, len - 6)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 15 && memcmp(name, "sync_untracked=", 15) == 0) {
                if (tool_parse_dec(name + 15, len - 15, &mt->sync_untracked) != 0)
                    return damaged(why, cap, "a bad sync_untracked (object %" PRIu32 ")", id);
            } else if (pass == 0 && len >= 12 && memcmp(name, "sync_shared=", 12) == 0) {
                if (tool_parse_dec(name + 12, len - 12, &mt->sync_shared) != 0)
                    return damaged(why, cap, "a bad sync_shared (object %" PRIu32 ")", id);
            } else if (pass == 0 && len >= 7 && memcmp(name, "filter=", 7) == 0) {
                if (mt->filter == NULL && (mt->filter = dup_n(name + 7, len - 7)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 8 && memcmp(name, "notrace=", 8) == 0) {
                if (mt->notrace == NULL && (mt->notrace = dup_n(name + 8, len - 8)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 6 && memcmp(name, "depth=", 6) == 0) {
                if (mt->depth == NULL && (mt->depth = dup_n(name + 6, len - 6)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 0 && len >= 9 && memcmp(name, "untraced=", 9) == 0) {
                if (mt->untraced == NULL && (mt->untraced = dup_n(name + 9, len - 9)) == NULL)
                    return TT_E_NOMEM;
            } else if (pass == 1 && len >= 5 && memcmp(name, "argv[", 5) == 0) {
                close = memchr(name, ']', len);
                eq = close != NULL && (size_t)(close - name) + 1 < len ? close + 1 : NULL;
                if (eq == NULL || *eq != '=' ||
                    tool_parse_dec(name + 5, (size_t)(close - name) - 5, &idx) != 0)
                    return damaged(why, cap, "a bad argv entry (object %" PRIu32 ")", id);
                if (!have_argc || idx >= mt->argc)
                    return damaged(why, cap, "argv[%" PRIu64 "] beyond argc", idx);
                if (mt->argv[idx] != NULL)
                    return damaged(why, cap, "argv[%" PRIu64 "] twice", idx);
                if ((mt->argv[idx] = dup_n(eq + 1, len - (size_t)(eq + 1 - name))) == NULL)
                    return TT_E_NOMEM;
            }
        }
        if (pass == 0) {
            if (!have_argc || mt->argc == 0) {
                mt->argc = 0; /* no command line: the caller decides */
                return TT_OK;
            }
            if ((mt->argv = calloc((size_t)mt->argc + 1, sizeof *mt->argv)) == NULL) {
                mt->argc = 0;
                return TT_E_NOMEM;
            }
            if (mt->envc && (mt->env = calloc((size_t)mt->envc + 1, sizeof *mt->env)) == NULL)
                return TT_E_NOMEM;
        }
    }
    for (uint64_t i = 0; i < mt->argc; i++)
        if (mt->argv[i] == NULL)
            return damaged(why, cap, "argv[%" PRIu64 "] is missing", i);
    for (uint64_t i = 0; mt->env != NULL && i < mt->envc; i++)
        if (mt->env[i] == NULL)
            return damaged(why, cap, "env[%" PRIu64 "] is missing", i);
    return TT_OK;
}

int tool_meta_read(const tool_trace *t, tool_meta *mt)
{
    char why[128];
    int rc = tool_meta_parse(t->r, mt, why, sizeof why);
    if (rc == TT_E_NOMEM) {
        tool_error("out of memory");
        return TOOL_EXIT_SYSTEM;
    }
    if (rc != TT_OK) {
        tool_error("%s: the recorded command line is damaged: %s", t->path, why);
        return TOOL_EXIT_CORRUPT;
    }
    return TOOL_EXIT_OK;
}
