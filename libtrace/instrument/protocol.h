/* SPDX-License-Identifier: MIT */
/* The contract between the in-process runtime (instrument/runtime.c, loaded into the traced
 * program) and the tinytrace tool (tools/cmd-record.c, tools/cmd-replay.c), written once.
 *
 * What belongs here: every name, number and string that one side writes and the other reads:
 * the environment variables the tool sets for the runtime, the exit status the runtime ends a
 * diverged program with, the caller string `record` stores in the manifest, and the keys and
 * values of the replay report. Nothing with code: both sides include this header, and the tool
 * includes no other private header of the library.
 *
 * The report is one JSON object on one line, written by the runtime at the first divergence and
 * at exit (docs/REPLAY.md shows one), by every process of the tree: "process" (the image that
 * wrote it, "root/2@1"), "status" (below), "nonce", "divergences", "error",
 * "message", "matched" (calls matched), "threads" (threads seen), "live_children",
 * "untraceable_execs", "first_live", plus "thread", "seq", "reason", "first_diff", "expected",
 * "actual", "history" (events as {"kind", "seq", "function", "site", "arg", "len", "dir"}) for
 * a divergence and "backtrace" (an array of lines) where there is one. The last line that
 * carries the tool's nonce is the verdict.
 */
#ifndef TT_INSTRUMENT_PROTOCOL_H
#define TT_INSTRUMENT_PROTOCOL_H

/* ---- the runtime's settings, from the tool ----
 * `tinytrace record|replay` does not put its settings in the program's environment: it writes
 * them, "NAME=VALUE" lines with the names below and the library's (MODE, FILE, CALLER,
 * BUFFER_KB, ...) without their TINYTRACE_ prefix, into a memfd the program inherits, and sets
 * one variable of fixed length, the last of the environment: TT_ENV_RT=<the descriptor, ten
 * digits>:root:0:0:<ns>:<ticks>, the root's identity and the tool's clock point
 * (tt_clock_point, twenty digits each; zeros in a replay); a process of the tree hands its
 * children the same form with their own identity and the root's point. The runtime reads the
 * settings and removes the variable before main, so the program sees the same environment in
 * record and replay. A program run with TINYTRACE_MODE set by hand still reads the
 * environment. */
#define TT_ENV_RT "TINYTRACE_RT"

/* ---- environment, set by the tool, read by the runtime at start ----
 * The session settings themselves (TINYTRACE_MODE, TINYTRACE_FILE, TINYTRACE_BUFFER_KB, ...)
 * are the library's (tt_config_from_env, session.h); these are the runtime's own. */
/* replay: the descriptor of the report channel, a socket the tool made; the runtime reads a
 * 32-character nonce from it, then writes each report as one line of JSON carrying the nonce
 * (cmd-replay.c says why), and removes the variable from the environment */
#define TT_ENV_REPORT_FD "TINYTRACE_REPORT_FD"
#define TT_REPORT_NONCE_LEN 32
#define TT_ENV_ALLOC "TINYTRACE_ALLOC"               /* 1: record and compare allocations */
#define TT_ENV_CHECK_OUTPUT "TINYTRACE_CHECK_OUTPUT" /* 1: writes to fds 1 and 2 are events */
#define TT_ENV_KEEP_GOING "TINYTRACE_KEEP_GOING"     /* 1: count divergences, do not stop */
/* replay: "THREAD:SEQ", the recorded event where the runtime stops the replay (replay --stop-at):
 * when a call matches it, before the call returns, the runtime calls tt_divergence_break with
 * a report of it (replay.h) under a debugger (TT_ENV_GDB), and else raises SIGTRAP, which it
 * ignores itself: a debugger attached to the process sees it, and without one the replay goes
 * on */
#define TT_ENV_STOP_AT "TINYTRACE_STOP_AT"
/* replay: 1 when the replay runs under gdb (replay --gdb): a --stop-at is a call of
 * tt_divergence_break, where the breakpoint is, not a SIGTRAP */
#define TT_ENV_GDB "TINYTRACE_GDB"
/* Set by the runtime itself to its process id: a program the traced one execs (or a child that
 * inherits the environment) sees another pid and stays untraced. The tool clears it. */
#define TT_ENV_PID "TINYTRACE_PID"

/* ---- the process tree (docs/FORMAT.md §16) ----
 * 1: every process the program starts is traced too (record and replay alike). The root's
 * first image writes TINYTRACE_FILE; every other image FILE + TT_PROCS_SUFFIX + "/" + its name
 * (the creation path with '.' for '/', "@gen" after an exec) + ".tt". The tool writes the tree's
 * manifest there at the end, TT_TREE_NAME. */
#define TT_ENV_TREE "TINYTRACE_TREE"
#define TT_PROCS_SUFFIX ".procs"
#define TT_TREE_NAME "tree"
/* replay: the one process ("root/2@1") that runs alone (`replay --process`): its children are
 * not started, its waits do not wait */
#define TT_ENV_PROCESS "TINYTRACE_PROCESS"
/* replay: the nonce of the report channel, for every process of the tree (the root reads it
 * from the channel otherwise) */
#define TT_ENV_REPORT_NONCE "TINYTRACE_REPORT_NONCE"
/* replay: "dev:ino" of the tool's own stdin when it is a pipe: written outside the tree, so a
 * replayed read takes from it only what is there, never waits for more (preload/read.c) */
#define TT_ENV_OUTSIDE_FIFO "TINYTRACE_OUTSIDE_FIFO"

/* ---- exit status ----
 * A replayed program that the runtime stopped at a divergence (or at an error that ends the
 * replay) exits with this status. The tool learns why from the report, never from the number,
 * since the program may exit 86 on its own. */
#define TT_RT_EXIT_DIVERGED 86

/* ---- the manifest's caller string ----
 * `tinytrace record` stores "tinytrace record" followed by the options that change what is
 * recorded, each as " --option"; replay reads them back to set the same options. */
#define TT_CALLER_RECORD "tinytrace record"
#define TT_CALLER_OPT_ALLOC "--alloc"
#define TT_CALLER_OPT_CHECK_OUTPUT "--check-output"
#define TT_CALLER_OPT_ASLR "--aslr"

/* ---- the report ---- */
#define TT_REPORT_STATUS_MATCHED "matched"
#define TT_REPORT_STATUS_DIVERGED "diverged"
#define TT_REPORT_STATUS_UNCONSUMED "unconsumed"
#define TT_REPORT_STATUS_ERROR "error"

/* "reason" of a divergence: tt_diverge_reason's names, in its order (replay.h). */
#define TT_REPORT_REASONS                                                                          \
    { "none", "kind", "function", "site", "arg", "size", "length", "payload", "direction", "end", \
      "thread", "order", "output", "schedule", "restore" }

#endif
