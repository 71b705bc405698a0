/* SPDX-License-Identifier: MIT */
/* tinytrace — the recorded command line of a trace: its META objects.
 *
 * The runtime (libtrace/instrument/runtime.c, record_meta) interns, when a recording starts,
 * one META object per fact it knows about the process: "cwd=DIR" (getcwd), "argv[I]=ARG" for
 * each argument of /proc/self/cmdline and "argc=N" after them. It records the whole command line
 * or none of it (an argument too long for a name leaves no argc). A runtime that records the
 * program's world adds "env[I]=NAME=VALUE" for each variable of its environment and "envc=N",
 * "execfn=PATH" (the path execve was given) and, at the end, "untraced=CMD" (the first child
 * process that ran unrecorded); an older one records none of these, and each is optional here.
 * `tinytrace replay` runs that command line in that directory; `tinytrace info` shows it.
 *
 * A trace can come from anyone, so the objects are parsed as hostile: one argc, one cwd, every
 * argv[I] with I < argc exactly once (and every env[I] with I < envc), no NUL byte inside a
 * name, argc and envc no larger than the number of objects (so the arrays they size are bounded
 * by the file's own tables). Anything else is a damaged command line, with the reason. The
 * environment is read only with a command line (argc).
 *
 *     tool_meta mt;
 *     int rc = tool_meta_read(&t, &mt);     // t opened (tool_trace_open); reports damage
 *     if (rc == TOOL_EXIT_OK && mt.argv != NULL) ...mt.argv[0 .. mt.argc), mt.cwd...
 *     tool_meta_free(&mt);                  // in every case
 *
 * Not thread-safe with itself on one tool_meta; the reader is only read.
 */
#ifndef TINYTRACE_TOOL_META_H
#define TINYTRACE_TOOL_META_H

#include <stddef.h>
#include <stdint.h>

#include "tool.h"

typedef struct tool_meta {
    char *cwd;      /* "cwd=" without the prefix, or NULL when none was recorded */
    char **argv;    /* argc + 1 entries, NULL-terminated; NULL when no command line was recorded */
    uint64_t argc;
    int found;      /* any META object at all */
    char *untraced; /* the first process that ran unrecorded ("untraced="), or NULL */
    char *execfn;   /* the path execve was given ("execfn="), or NULL */
    char **env;     /* the environment the program saw ("env[i]="), envc + 1 entries, or NULL */
    uint64_t envc;  /* "envc=": may be set while env is NULL (no command line: not read) */
    char *chaos;    /* schedule chaos's seed and parameters ("chaos="), or NULL when it was off */
    uint64_t sync_untracked; /* sync operations the registry had no room for ("sync_untracked=") */
    uint64_t sync_shared;    /* sync operations on process-shared objects ("sync_shared=") */
    char *filter;   /* record --filter, --notrace, --depth ("filter=", "notrace=", "depth="), */
    char *notrace;  /* as the runtime recorded them (libtrace/instrument/filter.h), or NULL */
    char *depth;
} tool_meta;

/* Parses the decimal digits s[0..@n) (1 to 19 of them, nothing else) into *@v; 0 on success. */
int tool_parse_dec(const char *s, size_t n, uint64_t *v);

/* Parses the META objects of @r into @mt (all of it the caller's to free with tool_meta_free,
 * whatever the result). Returns TT_OK (also when there is no command line: mt->argv NULL),
 * TT_E_CORRUPT with the reason in @why (@cap bytes, NUL-terminated; the object named by id),
 * or TT_E_NOMEM. */
int tool_meta_parse(const tt_reader *r, tool_meta *mt, char *why, size_t cap);

/* tool_meta_parse on @t's reader, reporting a failure: a damaged command line as "tinytrace:
 * PATH: the recorded command line is damaged: WHY" (TOOL_EXIT_CORRUPT), no memory as
 * TOOL_EXIT_SYSTEM. TOOL_EXIT_OK otherwise. */
int tool_meta_read(const tool_trace *t, tool_meta *mt);

/* Frees what tool_meta_parse filled in and zeroes @mt. Safe on a zeroed or freed one. */
void tool_meta_free(tool_meta *mt);

#endif
