#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`tinytrace replay --gdb` in gdb's batch mode (issue 18, acceptance 3), and --stop-at.

The -finstrument-functions program recorded as it is (prog-calls), then replayed rebuilt with
one extra call (prog-calls-extra, which calls extra_step from caller_of_new_code): gdb, run with
-batch and a command file, must stop at the divergence in extra_step (the frame it selects), its
`bt` must name the caller, and `info locals` must list extra_step's local; the report is printed
in gdb and the verdict is a divergence. --stop-at FUNCTION@N stops gdb in the N-th call and the
replay then matches; --stop-at without --gdb goes on past its SIGTRAP. Exits 77 (skipped) when
gdb is not installed, and only then.

Usage: test-gdb.py TINYTRACE PRELOAD PROG_CALLS PROG_CALLS_EXTRA
Each check runs in its own temporary directory, removed afterwards.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

TT, PRELOAD, CALLS, CALLS_EXTRA = map(os.path.abspath, sys.argv[1:5])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
failures = []
passed = 0


def run(args, cwd, timeout=120):
    return subprocess.run(args, capture_output=True, text=True, env=ENV, cwd=cwd,
                          timeout=timeout)


def check(name, fn):
    global passed
    d = tempfile.mkdtemp(prefix="tt-gdb-")
    try:
        fn(d)
        passed += 1
        print(f"ok   {name}")
    except (AssertionError, subprocess.TimeoutExpired) as e:
        failures.append(name)
        print(f"FAIL {name}: {e}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def record(d):
    r = run([TT, "record", "-o", "calls.tt", "--", CALLS], d)
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    return "calls.tt"


def gdb_batch(d, trace, prog, commands, *extra):
    with open(os.path.join(d, "cmds.gdb"), "w") as f:
        f.write("\n".join(commands) + "\n")
    return run([TT, "replay", "--gdb", "--gdb-arg=-batch", "--gdb-arg=-x",
                "--gdb-arg=cmds.gdb", *extra, trace, "--", prog], d)


def gdb_stops_in_the_extra_function_at_the_divergence(d):
    trace = record(d)
    r = gdb_batch(d, trace, CALLS_EXTRA, ["run", "echo ==bt==\\n", "bt",
                                          "echo ==locals==\\n", "info locals",
                                          "echo ==end==\\n"], "--allow-build-mismatch")
    out = r.stdout + r.stderr
    assert r.returncode == 1, f"exit {r.returncode}, not 1 (diverged): {out}"
    assert "replay diverged from the recording" in r.stderr, r.stderr
    # the report, printed in gdb at the stop (in a release build, without the library's debug
    # information, gdb names the breakpoint's address first: "Breakpoint 1, 0x... in tt_...")
    assert re.search(r"Breakpoint 1, (0x[0-9a-f]+ in )?tt_divergence_break", r.stdout), r.stdout
    assert "actual:   enter function=extra_step" in r.stdout, r.stdout
    # the frame gdb is in: the program's function that made the diverging call
    sel = r.stdout.split("the program's frame that made the call is #", 1)
    assert len(sel) == 2, r.stdout
    frame_line = sel[1].splitlines()[1]
    assert " in extra_step (" in frame_line, frame_line
    # bt names its caller, just above it
    bt = r.stdout.split("==bt==", 1)[1].split("==locals==", 1)[0]
    frames = [l for l in bt.splitlines() if l.startswith("#")]
    at = next(i for i, l in enumerate(frames) if " extra_step (" in l)
    assert " caller_of_new_code (" in frames[at + 1], bt
    # info locals works in the selected frame
    locals_ = r.stdout.split("==locals==", 1)[1].split("==end==", 1)[0]
    assert "seven = " in locals_, locals_


def gdb_stops_at_the_nth_call_of_a_function_and_the_replay_then_matches(d):
    trace = record(d)
    r = gdb_batch(d, trace, CALLS, ["run", "echo ==bt==\\n", "bt", "continue"],
                  "--stop-at", "fib@3")
    assert r.returncode == 0, f"exit {r.returncode}: {r.stdout} {r.stderr}"
    assert "stopped at thread 0 seq" in r.stdout, r.stdout
    sel = r.stdout.split("the program's frame that made the call is #", 1)[1]
    assert " in fib (n=n@entry=6)" in sel.splitlines()[1] or " in fib (n=6)" in \
        sel.splitlines()[1], sel
    assert "replay matched the recording" in r.stderr, r.stderr


def stop_at_without_gdb_raises_its_trap_and_goes_on(d):
    trace = record(d)
    r = run([TT, "replay", "--stop-at", "0:20", trace, "--", CALLS], d)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
    assert "stopped at thread 0 seq 20 (replay --stop-at): enter function=fib" in r.stderr, \
        r.stderr
    assert "replay matched the recording" in r.stderr, r.stderr


def stop_at_names_only_what_the_recording_has(d):
    trace = record(d)
    for bad in ("nosuch", "fib@68", "0:100000", "3:1", "fib@0", "1:"):
        r = run([TT, "replay", "--stop-at", bad, trace, "--", CALLS], d)
        assert r.returncode == 2, f"--stop-at {bad}: exit {r.returncode} {r.stderr}"
    r = run([TT, "replay", "--gdb-arg=-batch", trace, "--", CALLS], d)
    assert r.returncode == 2 and "--gdb-arg needs --gdb" in r.stderr, r.stderr


def a_process_killed_while_it_closes_keeps_its_events_for_recover(d):
    """The close writes the events of a process that never started its swapper before it
    builds the index tables: killed there (gdb stops it in tt_tables_finish and sends SIGKILL),
    its .partial still holds them, and recover saves them all (602cc2c had kept them in the
    block buffer until the tables were written: recover found 0 events)."""
    g = run(["gdb", "-q", "-batch", "-ex", "set breakpoint pending on",
             "-ex", "break tt_tables_finish", "-ex", "run", "-ex", "signal SIGKILL",
             "--args", "env", "LD_PRELOAD=" + PRELOAD, "TINYTRACE_MODE=record",
             "TINYTRACE_FILE=" + os.path.join(d, "k.tt"), CALLS], d)
    assert "Program terminated with signal SIGKILL" in g.stdout + g.stderr, g.stdout + g.stderr
    partial = [f for f in os.listdir(d) if f.startswith("k.tt.") and f.endswith(".partial")]
    assert len(partial) == 1, os.listdir(d)
    r = run([TT, "recover", partial[0]], d)
    m = re.search(r"recovered (\d+) events", r.stdout + r.stderr)
    assert r.returncode == 0 and m, f"recover: {r.returncode} {r.stdout} {r.stderr}"
    # the same program recorded to its end, the same way (no tool: its output is no event)
    subprocess.run([CALLS], cwd=d, capture_output=True, timeout=60,
                   env=dict(ENV, LD_PRELOAD=PRELOAD, TINYTRACE_MODE="record",
                            TINYTRACE_FILE=os.path.join(d, "n.tt")))
    whole = run([TT, "verify", "n.tt"], d)
    n = re.search(r"ok \((\d+) events", whole.stdout)
    assert n, whole.stdout + whole.stderr
    assert int(m.group(1)) == int(n.group(1)) > 100, \
        f"recovered {m.group(1)} of the {n.group(1)} events the whole recording has"


if shutil.which("gdb") is None:
    print("gdb is not installed (.ci/packages lists it): skipped")
    sys.exit(77)
for fn in (gdb_stops_in_the_extra_function_at_the_divergence,
           gdb_stops_at_the_nth_call_of_a_function_and_the_replay_then_matches,
           stop_at_without_gdb_raises_its_trap_and_goes_on,
           stop_at_names_only_what_the_recording_has,
           a_process_killed_while_it_closes_keeps_its_events_for_recover):
    check(fn.__name__, fn)
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
