/* SPDX-License-Identifier: MIT */
/* tinytrace — the process tree of a recording (docs/FORMAT.md §16).
 *
 * A recording made by `tinytrace record` is its root's trace, FILE, and when the program started
 * other processes, one trace per process image in FILE.procs/ (protocol.h names them), with the
 * tree's manifest FILE.procs/tree, which record writes when the last process has ended. Each
 * trace names its own process in META objects ("proc.path=", "proc.gen=", "proc.pid=", ...), so
 * the tree can be rebuilt from the traces alone (tool_procs_scan) when the manifest is missing.
 *
 * A verb that reads one trace takes `--process P` and calls tool_process_file first: P is a
 * process as the tree names it ("root/2@1", or "root.2@1" as in the file name), its recorded
 * pid, or its program's name when only one image runs it ("shuf").
 */
#ifndef TINYTRACE_TOOL_PROCS_H
#define TINYTRACE_TOOL_PROCS_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

typedef struct tool_proc {
    char name[224];      /* the image: "root/2@1" */
    char path[208];      /* its process's creation path: "root/2" */
    unsigned gen;        /* its exec generation */
    long pid, ppid;      /* 0: not known */
    int status;          /* its wait status; -1: not known */
    char file[PATH_MAX]; /* its trace; "" when it recorded nothing (a fork that only exec'd) */
    int partial;         /* file is the .partial of a process that died (tinytrace recover) */
    char build_id[65];   /* hex; "" when none */
    char cmd[512];       /* its command line, arguments separated by spaces */
    char note[160];      /* what else: "untraceable: static or setuid: PROG", ... */
} tool_proc;

/* FILE.procs, into @out. Returns 0, or ENAMETOOLONG. */
int tool_procs_dir(const char *file, char *out, size_t cap);

/* The tree of recording @file: from its manifest when there is one, else from the traces.
 * *@out is malloc'd (the caller frees it), *@n rows in tree order (by path, then generation).
 * A recording of one process is a tree of one. Returns 0, or an errno (reported). */
int tool_procs_read(const char *file, tool_proc **out, size_t *n);

/* Record, while the program runs: the traces the tree's processes have finished so far, read
 * and signed ahead of tool_procs_finish, which then reads and signs only the rest. tool_scan_new
 * reads the signing key (making it on a first use) before the program starts, and gives NULL
 * when out of memory; tool_scan_step reads what is new (quietly: what fails here is done again,
 * and said, at the end) and returns how many; one thread at a time. */
typedef struct tool_scan tool_scan;
tool_scan *tool_scan_new(const char *file);
size_t tool_scan_step(tool_scan *e);
void tool_scan_free(tool_scan *e);

/* Record: writes FILE.procs/tree from the traces, with the statuses the tool itself reaped
 * (@pids, @statuses: the root and the orphans it adopted), and signs every trace of the tree
 * but the root, which the caller signs (those @early read are signed already; NULL: none);
 * removes FILE.procs when the program started no process. Returns 0 or an errno (reported).
 * The caller frees @early after. */
int tool_procs_finish(const char *file, const long *pids, const int *statuses, size_t nreaped,
                      tool_scan *early);

/* Record: makes FILE and every file of FILE.procs durable, once the program has ended (the
 * processes do not, TINYTRACE_SYNC=0: a fork's child would wait for the disk at its exit,
 * in the tree's critical path). Up to 32 traces: writeback starts on every file first, then
 * each is waited for, so the files go to the disk together; then the folder. More: one syncfs
 * of their file system (one flush of the disk, not one per file). Returns 0 or the first errno
 * (reported). */
int tool_procs_sync(const char *file);

/* Record: empties FILE.procs of an earlier recording of the same name (its traces, partial
 * files and manifest), or makes it. Returns 0 or an errno (reported). */
int tool_procs_prepare(const char *file);

/* Record: keeps FILE.procs/.spares filled with empty files made ahead, on a thread of the
 * tool, for the tree's processes to take as their traces (TINYTRACE_SPARES=1, spares.c says
 * why); the same thread steps @early (not NULL) every TOOL_SCAN_EVERY_MS while it runs. NULL
 * when it cannot (the processes then create their files, as without it). Stop it once the
 * program and its orphans have ended: it removes what is left, and the folder, and no longer
 * touches @early. */
typedef struct tool_spares tool_spares;
tool_spares *tool_spares_start(const char *file, tool_scan *early);
void tool_spares_stop(tool_spares *s);
/* Removes a FILE.procs/.spares that a tool which died left (@procs_dir: FILE.procs). */
void tool_spares_clear(const char *procs_dir);

/* Removes the tree's FILE.procs (what tool_procs_prepare would empty, then the folder), or
 * renames it to go with FILE renamed @to (hunt keeps a try this way). */
void tool_procs_remove(const char *file);
int tool_procs_rename(const char *file, const char *to);

/* Waits for every process left that the tool adopted as their subreaper (orphans of the tree)
 * once its own child has ended, and keeps their statuses: up to @cap into @pids and
 * @statuses. Returns how many. */
size_t tool_reap_orphans(long *pids, int *statuses, size_t cap);

/* The trace of process @want (NULL: @file itself) of recording @file, into @out. Returns
 * TOOL_EXIT_OK, or TOOL_EXIT_USAGE after saying why (no such process, more than one). */
int tool_process_file(const char *prog, const char *file, const char *want, char *out,
                      size_t cap);

/* Prints the tree as `tinytrace info` shows it: nothing for a tree of one. */
void tool_procs_print(FILE *f, const char *file);

/* The status as a word: "exit 0", "signal 9", "?". */
void tool_status_word(int status, char *out, size_t cap);

#endif
