#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration tests of issue 3 through `tinytrace record` and `tinytrace replay`:
function hooks and a rebuilt program, a crash while recording, fork, and the flaky example.

Usage: test-instrument.py TINYTRACE PRELOAD PROG_CALLS PROG_CALLS_EXTRA PROG_CRASH PROG_FORK FLAKY
       PROG_CALLS_LINKED PROG_CALLS_LINKED_EXTRA PROG_MANY PROG_THREADS PROG_API PROG_API_INSTR
Each test runs in its own temporary directory, removed afterwards.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

(TT, PRELOAD, CALLS, CALLS_EXTRA, CRASH, FORK, FLAKY, LINKED, LINKED_EXTRA, MANY, THREADS, API,
 API_INSTR) = map(os.path.abspath, sys.argv[1:14])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
failures = []
passed = 0


def run(args, stdin=None, cwd=None, timeout=120):
    return subprocess.run(args, input=stdin, capture_output=True, text=True, env=ENV, cwd=cwd,
                          timeout=timeout)


def events(path):
    out = run([TT, "dump", "--json", path])
    assert out.returncode == 0, f"dump {path}: {out.returncode} {out.stderr}"
    return [json.loads(line) for line in out.stdout.splitlines()]


def check(name, fn):
    global passed
    d = tempfile.mkdtemp(prefix="tt-instr-")
    try:
        fn(d)
        passed += 1
        print(f"ok   {name}")
    except (AssertionError, subprocess.TimeoutExpired) as e:
        failures.append(name)
        print(f"FAIL {name}: {e}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rebuilt_program_diverges_naming_both_functions_and_the_caller(d):
    trace = os.path.join(d, "calls.tt")
    r = run([TT, "record", "-o", trace, "--", CALLS])
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    ev = events(trace)
    enters = [e["function"] for e in ev if e["kind"] == "enter"]
    assert enters[:2] == ["main", "leaf"], enters[:6]
    assert enters.count("fib") == 67, f"fib(8) makes 67 calls, saw {enters.count('fib')}"
    ok = run([TT, "replay", trace, "--", CALLS])
    assert ok.returncode == 0, f"clean replay: {ok.returncode} {ok.stderr}"
    report = os.path.join(d, "report.json")
    bad = run([TT, "replay", trace, "--allow-build-mismatch", "--report", report, "--",
               CALLS_EXTRA])
    assert bad.returncode == 1, f"replay of the rebuilt program: {bad.returncode} {bad.stderr}"
    rep = json.load(open(report))
    assert rep["status"] == "diverged", rep
    assert rep["expected"]["function"] == "fib", rep["expected"]
    assert rep["actual"]["function"] == "extra_step", rep["actual"]
    bt = "\n".join(rep.get("backtrace", []))
    assert "caller_of_new_code" in bt, bt
    assert "extra_step" in bad.stderr and "fib" in bad.stderr, bad.stderr


def crash_keeps_every_event_and_dies_by_sigsegv(d):
    trace = os.path.join(d, "crash.tt")
    r = run([TT, "record", "-o", trace, "--", CRASH])
    assert r.returncode == 128 + signal.SIGSEGV, f"record exit {r.returncode}: {r.stderr}"
    v = run([TT, "verify", trace])
    assert v.returncode == 0, v.stdout + v.stderr
    info = run([TT, "info", "--json", trace])
    assert "crashed" in info.stdout, info.stdout
    ev = events(trace)
    # workers are main/1, main/2, main/3 and make 5000, 5001, 5002 calls of work()
    by_thread = {}
    for e in ev:
        if e["kind"] == "enter" and e["function"] == "work":
            by_thread[e["thread"]] = by_thread.get(e["thread"], 0) + 1
    assert sorted(by_thread.values()) == [5000, 5001, 5002], by_thread
    crash = [e for e in ev if e["kind"] == "crash"]
    assert len(crash) == 1 and crash[0]["arg"] == signal.SIGSEGV, crash
    assert crash[0]["len"] > 0 and bytes.fromhex(crash[0]["payload"]).startswith(b"#0 "), crash
    last = [e for e in ev if e["thread"] == crash[0]["thread"]][-2:]
    assert last[0]["kind"] == "crash", last
    enters = [e["function"] for e in ev if e["thread"] == crash[0]["thread"] and e["kind"] == "enter"]
    assert enters[-1] == "crash_here", enters[-3:]
    # the crash replays: same signal at the same point is a match, and the program dies again
    rep = run([TT, "replay", trace])
    assert rep.returncode == 0, f"replay of the crash: {rep.returncode} {rep.stderr}"
    assert "signal 11" in rep.stderr, rep.stderr


def other_crashes_are_finalized_too(d):
    """A worker crashes while main returns from main; two workers crash at once; a worker
    overflows its stack. Each run dies by SIGSEGV and leaves a trace that verifies, with one
    crash event, in a worker; when main's exit closes the session before the worker's crash
    reaches the handler (a race the test leaves to the scheduler), the trace has no crash event,
    and the program still dies by SIGSEGV."""
    # the worker's race is run 8 times: main's exit used to find the session already taken by
    # the crash being finalized, and end the process with status 0 and a .partial (1 run in 4)
    for k, mode in enumerate(["worker"] * 8 + ["two", "overflow"]):
        trace = os.path.join(d, "crash-%s-%d.tt" % (mode, k))
        r = run([TT, "record", "-o", trace, "--", CRASH, mode])
        assert r.returncode == 128 + signal.SIGSEGV, \
            f"{mode}: record exit {r.returncode}: {r.stderr}"
        v = run([TT, "verify", trace])
        assert v.returncode == 0, f"{mode}: " + v.stdout + v.stderr
        ev = events(trace)
        crash = [e for e in ev if e["kind"] == "crash"]
        if mode == "worker" and not crash:
            continue
        assert len(crash) == 1 and crash[0]["arg"] == signal.SIGSEGV, f"{mode}: {crash}"
        assert crash[0]["thread"] != 0, f"{mode}: the crash is main's: {crash}"
        work = sum(1 for e in ev if e["kind"] == "enter" and e["function"] == "work")
        assert work >= 5000, f"{mode}: {work} calls of work recorded"


def fork_child_leaves_the_parent_trace_intact(d):
    trace = os.path.join(d, "fork.tt")
    r = run([TT, "record", "-o", trace, "--", FORK])
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    assert "child-status 0" in r.stdout, r.stdout
    v = run([TT, "verify", trace])
    assert v.returncode == 0, v.stdout + v.stderr
    ev = events(trace)
    names = [e["function"] for e in ev if e["kind"] == "enter"]
    assert names.count("parent_step") == 200, names.count("parent_step")
    assert "child_step" not in names, "the child's events are in its own trace"
    leftovers = [f for f in os.listdir(d) if f.endswith(".partial")]
    assert not leftovers, leftovers
    # the child is traced into a file of its own (docs/FORMAT.md §16), and replayed with it
    child = os.path.join(d, "fork.tt.procs", "root.1.tt")
    assert os.path.exists(child), os.listdir(d)
    assert run([TT, "verify", child]).returncode == 0
    cnames = [e["function"] for e in events(child) if e["kind"] == "enter"]
    assert cnames.count("child_step") > 0, cnames[:20]
    ok = run([TT, "replay", trace])
    assert ok.returncode == 0, f"replay: {ok.returncode} {ok.stderr}"


def flaky_failing_and_passing_recordings_replay_20_of_20(d):
    got = {}
    for attempt in range(200):
        want = 1 if 1 not in got else 0
        if want in got:
            break
        trace = os.path.join(d, f"flaky-{attempt}.tt")
        r = run([TT, "record", "-o", trace, "--", FLAKY], stdin="7\n")
        assert r.returncode in (0, 1), f"record: {r.returncode} {r.stderr}"
        if r.returncode not in got:
            got[r.returncode] = (trace, r.stdout)
        if 0 in got and 1 in got:
            break
    assert 0 in got and 1 in got, f"no failing and passing run in 200 tries: {list(got)}"
    for status, (trace, line) in got.items():
        for i in range(20):
            rep = run([TT, "replay", trace], stdin="3\n")
            assert rep.returncode == 0, f"replay {i} of the {status} run: {rep.returncode} {rep.stderr}"
            assert rep.stdout == line, f"replay {i}: {rep.stdout!r} != {line!r}"
            assert f"program exited with status {status}" in rep.stderr, rep.stderr


def date_and_python_replay_their_recorded_line(d):
    # the acceptance commands of issue 3, through the tool
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    cases = [["date", "+%s.%N"],
             [py, "-c", "import random, time, os; "
                        "print(random.random(), time.time(), os.urandom(8).hex())"]]
    for i, argv in enumerate(cases):
        trace = os.path.join(d, f"t{i}.tt")
        r = run([TT, "record", "-o", trace, "--"] + argv, cwd=d)
        assert r.returncode == 0, f"record {argv}: {r.returncode} {r.stderr}"
        live = run(argv)
        assert live.stdout != r.stdout, f"a live run printed the recorded line: {live.stdout!r}"
        rep = run([TT, "replay", trace], cwd=d)
        assert rep.returncode == 0, f"replay {argv}: {rep.returncode} {rep.stderr}"
        assert rep.stdout == r.stdout, f"{argv}: replay printed {rep.stdout!r}, recorded {r.stdout!r}"


def linked_program_records_into_the_session_tinytrace_configures(d):
    trace = os.path.join(d, "linked.tt")
    env = dict(os.environ, TINYTRACE_MODE="record", TINYTRACE_FILE=trace)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([LINKED], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    ev = events(trace)
    enters = [e["function"] for e in ev if e["kind"] == "enter"]
    assert enters[:2] == ["main", "leaf"] and enters.count("fib") == 67, enters[:6]
    env["TINYTRACE_MODE"] = "replay"
    ok = subprocess.run([LINKED], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, f"replay: {ok.returncode} {ok.stderr}"
    bad = subprocess.run([LINKED_EXTRA], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 86, f"replay of the rebuilt program: {bad.returncode} {bad.stderr}"
    assert "expected: enter function=fib" in bad.stderr, bad.stderr
    assert "actual:   enter function=extra_step" in bad.stderr, bad.stderr
    assert "caller_of_new_code" in bad.stderr, bad.stderr
    # without TINYTRACE_MODE the linked program runs untraced and writes nothing
    os.remove(trace)
    env.pop("TINYTRACE_MODE")
    plain = subprocess.run([LINKED], capture_output=True, text=True, env=env, timeout=60)
    assert plain.returncode == 0 and not os.listdir(d), os.listdir(d)


def api_user_tags(trace):
    return [e["arg"] for e in events(trace) if e["kind"] == "user"]


def a_program_with_its_own_session_records_under_tinytrace_record(d):
    """The program opens a session from the environment while the runtime has one: both are the
    process's one session, the file holds the program's events, and it replays."""
    trace = os.path.join(d, "api.tt")
    r = run([TT, "record", "-o", trace, "--", API])
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    assert "File exists" not in r.stderr, r.stderr
    assert api_user_tags(trace) == [1000, 1001, 1002], api_user_tags(trace)
    first = r.stdout
    for _ in range(2):
        again = run([TT, "replay", trace, "--", API])
        assert again.returncode == 0, f"replay: {again.returncode} {again.stderr}"
        assert again.stdout == first, f"replayed {again.stdout!r}, recorded {first!r}"


def a_linked_instrumented_program_with_its_own_session_records_once(d):
    """Linked with libtinytrace and built with -finstrument-functions: the runtime starts at
    main's hook, the program's own open gets its session, and function and API events are in
    the one file."""
    trace = os.path.join(d, "api-instr.tt")
    env = dict(os.environ, TINYTRACE_MODE="record", TINYTRACE_FILE=trace)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([API_INSTR], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    ev = events(trace)
    enters = [e["function"] for e in ev if e["kind"] == "enter"]
    assert enters.count("work") == 3 and enters[0] == "main", enters
    assert api_user_tags(trace) == [1000, 1001, 1002], api_user_tags(trace)
    assert not [n for n in os.listdir(d) if n.endswith(".partial")], os.listdir(d)
    env["TINYTRACE_MODE"] = "replay"
    ok = subprocess.run([API_INSTR], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, f"replay: {ok.returncode} {ok.stderr}"
    assert ok.stdout == r.stdout, f"replayed {ok.stdout!r}, recorded {r.stdout!r}"


def past_the_function_cap_replay_replays_what_the_recording_named(d):
    """prog-many (gen-many.py): 33 000 functions on thread A, then g on thread B, which the
    recording names last (past the cap of 32 768) and the replay meets first."""
    trace = os.path.join(d, "many.tt")
    r = run([TT, "record", "-o", trace, "--", MANY])
    assert r.returncode == 0, f"record: {r.returncode} {r.stderr}"
    info = json.loads(run([TT, "info", "--json", trace]).stdout)
    ev = events(trace)
    named = {e["function"] for e in ev if e["kind"] in ("enter", "exit")}
    assert "g" not in named, "g was recorded, so the test does not reach the cap"
    fs = {f for f in named if f and f[0] == "f" and f[1:].isdigit()}
    assert 32000 < len(fs) < 33000, f"{len(fs)} of the f* functions recorded"
    assert info["manifest"]["event_count"] == len(ev), "verify the count"
    ok = run([TT, "replay", trace, "--", MANY])
    assert ok.returncode == 0, f"replay: {ok.returncode} {ok.stderr[-2000:]}"


def run_by(deadline, args):
    """run(), but a hang is a failure with its own message once @deadline seconds have passed,
    and the traced program (in the tool's process group) is killed with the tool."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=ENV, start_new_session=True)
    try:
        out, err = p.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError(f"{' '.join(args[:2])} hung: not done within {deadline} s")
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def per_thread(trace):
    counts = {}
    for e in events(trace):
        counts[e["thread"]] = counts.get(e["thread"], 0) + 1
    return counts


def more_threads_than_buffers_are_all_recorded_and_replay(d):
    """prog-threads: 64 threads at once against a budget of 32 buffers (the defaults), each
    holding its buffer at a barrier until all have started; then 1000 short-lived threads, 8 at
    a time, each of which must give its buffer back when it exits. Every event of every thread
    is in the file, and the recordings replay."""
    # per thread: start, end, enter and exit of worker and of `calls` steps, one clock io, and
    # the sync events of its thread start and exit (and, wide, of the barrier)
    for name, args, nthreads, per in (("wide", ["wide", "64", "300"], 64, 608),
                                      ("churn", ["churn", "1000", "8"], 1000, 27)):
        trace = os.path.join(d, name + ".tt")
        r = run_by(60, [TT, "record", "-o", trace, "--", THREADS] + args)
        assert r.returncode == 0, f"record {name}: {r.returncode} {r.stderr[-2000:]}"
        info = json.loads(run([TT, "info", "--json", trace]).stdout)["manifest"]
        assert info["thread_count"] == nthreads + 1, f"{name}: {info['thread_count']} threads"
        assert info["flags"] & 0x2 == 0, f"{name}: marked incomplete"
        counts = per_thread(trace)
        short = {t: n for t, n in counts.items() if t != 0 and n != per}
        assert not short and len(counts) == nthreads + 1, \
            f"{name}: threads without all {per} events: {dict(list(short.items())[:5])}"
        ok = run_by(60, [TT, "replay", trace, "--", THREADS] + args)
        assert ok.returncode == 0, f"replay {name}: {ok.returncode} {ok.stderr[-2000:]}"
        assert ok.stdout == r.stdout, f"replay {name} printed {ok.stdout!r}, not {r.stdout!r}"


def a_recording_with_buffer_waits_replays_and_matches(d):
    """prog-threads under a tiny budget (4 KiB buffers, 1 MiB): some runs wait for the budget,
    and each wait is recorded as a call of the tracer's own (tinytrace:buffer-wait, two events).
    The replay steps over them, and the tool's check of the runtime's counts must not take them
    for missing calls (it did: exit 6, "the verdict cannot be trusted"). Up to 20 recordings,
    until one has waited; the replay of each must match."""
    env = dict(ENV, TINYTRACE_BUFFER_KB="4", TINYTRACE_MEMORY_MB="1")
    args = [THREADS, "wide", "64", "3000"]
    trace = os.path.join(d, "waits.tt")
    for attempt in range(20):
        r = subprocess.run([TT, "record", "-q", "-f", "-o", trace, "--"] + args, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, f"record: {r.returncode} {r.stderr[-1500:]}"
        stalls = json.loads(run([TT, "info", "--json", trace]).stdout)["manifest"]["stall_count"]
        ok = run_by(60, [TT, "replay", trace, "--"] + args)
        assert ok.returncode == 0 and "replay matched the recording" in ok.stderr, \
            f"replay of a recording with {stalls} waits: {ok.returncode} {ok.stderr[-1500:]}"
        if stalls:
            print(f"     (recording {attempt + 1} waited {stalls} times; its replay matched)")
            return
    print("     (no recording of 20 waited for the budget: the replays matched, the waits "
          "were not exercised)")


check("a recording with buffer waits replays and matches",
      a_recording_with_buffer_waits_replays_and_matches)
check("date and python replay their recorded line", date_and_python_replay_their_recorded_line)
check("past the function cap, replay replays what the recording named",
      past_the_function_cap_replay_replays_what_the_recording_named)
check("linked program records into the session TINYTRACE_* configures",
      linked_program_records_into_the_session_tinytrace_configures)
check("a program with its own session records under tinytrace record",
      a_program_with_its_own_session_records_under_tinytrace_record)
check("a linked instrumented program with its own session records once",
      a_linked_instrumented_program_with_its_own_session_records_once)
check("rebuilt program diverges naming both functions and the caller",
      rebuilt_program_diverges_naming_both_functions_and_the_caller)
check("crash keeps every event and dies by SIGSEGV", crash_keeps_every_event_and_dies_by_sigsegv)
check("other crashes are finalized too", other_crashes_are_finalized_too)
check("fork child leaves the parent trace intact", fork_child_leaves_the_parent_trace_intact)
check("more threads than buffers are all recorded and replay",
      more_threads_than_buffers_are_all_recorded_and_replay)
check("flaky failing and passing recordings replay 20 of 20",
      flaky_failing_and_passing_recordings_replay_20_of_20)
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
