#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Thread schedules under `tinytrace record` and `tinytrace replay` (issue 16).

test-sync.py TT PRELOAD PROG-SYNC RACE PROG-FNCHAOS

- prog-sync (not instrumented) prints the order in which its threads took a mutex, got an item
  from a producer through a condition variable, held a semaphore's slot, read a rwlock's
  value, were the serial thread of a barrier, took a spinlock, ran pthread_once, and failed a
  trylock. Run natively, each order varies; each recording replays its order 100 of 100 times
  (mutex, cond, sem, rwlock) or 20 of 20 (the others), on 2 cores, without --ordered.
- python3 with 4 threads appending to a shared list: 20 of 20 replays print the recorded list.
- a timed wait that timed out replays as timed out, one that was signalled as signalled.
- five 1 s sleeps replay in well under the recording's 5 s, with the recorded times.
- `tinytrace hunt --chaos` finds the race example's failure, and the trace it keeps replays
  failing the same way 20 of 20.
- chaos at function events: prog-fnchaos (instrumented, no sync operation in its threads'
  loops) gets about one chaos point per 2^15 function events, and loses none of them.
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import ttproc  # noqa: E402
from ttproc import check  # noqa: E402

TT, PRELOAD, PROG, RACE, FNCHAOS = (os.path.abspath(p) for p in sys.argv[1:6])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
ENV.pop("LD_PRELOAD", None)


def run(args, cwd, timeout=120, stdin=subprocess.DEVNULL):
    return subprocess.run(args, cwd=cwd, env=ENV, stdin=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def replays(cwd, trace, n, want_out, want_rc=0):
    """How many of @n replays of @trace exit @want_rc and print @want_out; the first bad one."""
    ok, bad = 0, None
    for _ in range(n):
        r = run([TT, "replay", trace], cwd)
        if r.returncode == want_rc and r.stdout == want_out:
            ok += 1
        elif bad is None:
            bad = "exit %d, stdout %r\n%s" % (r.returncode, r.stdout[:300], r.stderr[-2500:])
    return ok, bad


def native_varies(cwd, args, tries=12):
    """Whether @args prints at least two different outputs in @tries native runs."""
    seen = set()
    for _ in range(tries):
        seen.add(run(args, cwd).stdout)
        if len(seen) > 1:
            return True
    return False


def modes(d):
    for mode, n in (("mutex", 100), ("cond", 100), ("sem", 100), ("rwlock", 100),
                    ("barrier", 20), ("spin", 20), ("once", 20), ("trylock", 20),
                    ("kinds", 100)):
        work = os.path.join(d, mode)
        os.mkdir(work)
        # the order varies natively (once: which thread ran the routine may not, on an idle
        # machine, so it is not asked there)
        if mode not in ("once",):
            check(native_varies(work, [PROG, mode]), "%s: the order varies between native runs"
                  % mode)
        r = run([TT, "record", "-o", "t.tt", "--", PROG, mode], work)
        check(r.returncode == 0, "%s: record" % mode, r.stderr)
        ok, bad = replays(work, "t.tt", n, r.stdout)
        check(ok == n, "%s: %d of %d replays print the recorded order" % (mode, ok, n), bad)


def a_tampered_order_is_a_schedule_divergence(d):
    """A replay whose program takes the locks in another order than recorded: the mutex mode
    run as `-- PROG spin` diverges at the first call that differs (not a hang)."""
    work = os.path.join(d, "other")
    os.mkdir(work)
    r = run([TT, "record", "-o", "t.tt", "--", PROG, "mutex"], work)
    rep = run([TT, "replay", "t.tt", "--", PROG, "spin"], work, timeout=60)
    check(rep.returncode == 1 and "diverged" in rep.stderr,
          "a program that takes other locks diverges (exit 1)",
          "%d %s" % (rep.returncode, rep.stderr[-1500:]))


PY = """import threading, time, random
out = []
def work(name):
    for i in range(5):
        time.sleep(random.random() * 0.003)
        out.append(name)
ts = [threading.Thread(target=work, args=(c,)) for c in "ABCD"]
for t in ts: t.start()
for t in ts: t.join()
print("".join(out))
"""


def python_threads(d):
    work = os.path.join(d, "py")
    os.mkdir(work)
    with open(os.path.join(work, "threads.py"), "w") as f:
        f.write(PY)
    check(native_varies(work, ["python3", "threads.py"]),
          "python: the list's order varies between native runs")
    # the trace goes elsewhere: the script's directory is what Python lists to import
    trace = os.path.join(d, "py.tt")
    r = run([TT, "record", "-o", trace, "--", "python3", "threads.py"], work)
    check(r.returncode == 0, "python: record", r.stderr)
    ok, bad = replays(work, trace, 20, r.stdout)
    check(ok == 20, "python: %d of 20 replays print the recorded list %s" % (ok, r.stdout.strip()),
          bad)


def timed_waits(d):
    work = os.path.join(d, "timed")
    os.mkdir(work)
    r = run([TT, "record", "-o", "t.tt", "--", PROG, "timedwait"], work)
    check(r.stdout == "first timed out, second signalled\n",
          "timedwait: recorded a wait that timed out and one that was signalled", r.stdout)
    dump = run([TT, "dump", "--json", "t.tt"], work).stdout.splitlines()
    waits = [json.loads(x) for x in dump if '"pthread_cond_timedwait"' in x]
    results = [w.get("len", 0) for w in waits]
    check(len(waits) >= 2 and results[0] == 4,
          "timedwait: the first wait's event holds its ETIMEDOUT", waits[:3])
    ok, bad = replays(work, "t.tt", 10, r.stdout)
    check(ok == 10, "timedwait: %d of 10 replays time out the first and are signalled the "
          "second" % ok, bad)


def sleeps(d):
    work = os.path.join(d, "sleep")
    os.mkdir(work)
    t0 = time.monotonic()
    r = run([TT, "record", "-o", "t.tt", "--", PROG, "sleep"], work)
    recorded = time.monotonic() - t0
    check(r.returncode == 0 and len(r.stdout.splitlines()) == 5 and recorded >= 5,
          "sleep: five 1 s sleeps recorded (%.2f s)" % recorded, r.stderr)
    t0 = time.monotonic()
    rep = run([TT, "replay", "t.tt"], work)
    replayed = time.monotonic() - t0
    check(rep.returncode == 0 and rep.stdout == r.stdout,
          "sleep: the replay prints the recorded times", rep.stdout + rep.stderr[-500:])
    # not a performance bound: a replay that slept would take the recording's 5 s
    check(replayed < 2.5, "sleep: the replay does not sleep (%.2f s for a %.2f s run)"
          % (replayed, recorded))
    t0 = time.monotonic()
    rep = run([TT, "replay", "--real-sleep", "t.tt"], work)
    check(rep.returncode == 0 and time.monotonic() - t0 >= 5,
          "sleep: --real-sleep sleeps for real", rep.stderr[-500:])


def hunt(d):
    work = os.path.join(d, "hunt")
    os.mkdir(work)
    r = run([TT, "hunt", "--chaos", "-n", "200", "-o", "fail.tt", "--", RACE], work, timeout=300)
    m = re.search(r"try (\d+) failed", r.stderr)
    check(r.returncode == 0 and m and os.path.exists(os.path.join(work, "fail.tt")),
          "hunt --chaos finds the race (try %s of 200)" % (m.group(1) if m else "?"),
          "%d %s" % (r.returncode, r.stderr[-1500:]))
    check("FAIL: the account is overdrawn" in r.stdout and "replay fail.tt" in r.stderr,
          "... shows what the failing run printed and how to replay it", r.stdout + r.stderr)
    left = [f for f in os.listdir(work) if f != "fail.tt"]
    check(not left, "... and keeps nothing else", left)
    ok = 0
    bad = None
    for _ in range(20):
        rep = run([TT, "replay", "fail.tt"], work)
        if (rep.returncode == 0 and rep.stdout.startswith("FAIL: the account is overdrawn") and
                "the program exited with status 1" in rep.stderr):
            ok += 1
        elif bad is None:
            bad = "%d %s %s" % (rep.returncode, rep.stdout, rep.stderr[-1500:])
    check(ok == 20, "the kept trace replays failing the same way %d of 20" % ok, bad)
    # a hunt that finds nothing says so, exit 1
    r = run([TT, "hunt", "-n", "3", "-o", "none.tt", "--", "true"], work)
    check(r.returncode == 1 and "none of 3 tries failed" in r.stderr and
          not os.path.exists(os.path.join(work, "none.tt")),
          "a hunt over a program that never fails: exit 1, nothing kept", r.stderr)
    # --fail-if: output that matches fails the run
    r = run([TT, "hunt", "-n", "3", "--fail-if", "^h.llo$", "-o", "echo.tt", "--", "echo",
             "hello"], work)
    check(r.returncode == 0 and "try 1 failed" in r.stderr, "--fail-if REGEX: a matching "
          "line is a failure", r.stderr)
    r = run([TT, "hunt", "-n", "3", "-o", "echo.tt", "--", "echo", "hello"], work)
    check(r.returncode == 2 and "exists" in r.stderr, "hunt never replaces FAIL.tt without "
          "--force", r.stderr)


def fn_chaos(d):
    work = os.path.join(d, "fnchaos")
    os.mkdir(work)
    calls = 1000000  # per thread: 4 * 10^6 function events
    for seed in (1, 2, 3):
        r = run([TT, "record", "-q", "--chaos=%d" % seed, "-o", "c%d.tt" % seed, "--", FNCHAOS,
                 str(calls)], work)
        check(r.returncode == 0 and r.stdout.startswith("calls %d " % (2 * calls)),
              "fn chaos, seed %d: recorded" % seed, r.stdout + r.stderr[-800:])
        info = json.loads(run([TT, "info", "--json", "c%d.tt" % seed], work).stdout)
        chaos = (info.get("command") or {}).get("chaos") or ""
        m = re.search(r"\bseed=(\d+) .*\bfn_points=(\d+)", chaos)
        # one point per 4 + U[0, 65536) records: 4 * 10^6 / 32771 = 122 on average
        check(m and int(m.group(1)) == seed and 60 <= int(m.group(2)) <= 250,
              "fn chaos, seed %d: %s chaos points at function events (60 to 250 expected)"
              % (seed, m.group(2) if m else "no"), chaos)
        st = json.loads(run([TT, "stats", "--json", "c%d.tt" % seed], work).stdout)
        add_one = [f for f in st["functions"] if f["function"].startswith("add_one")]
        check(add_one and add_one[0]["calls"] == 2 * calls,
              "fn chaos, seed %d: every call recorded (%s of %d)"
              % (seed, add_one[0]["calls"] if add_one else "none", 2 * calls))
        v = run([TT, "verify", "c%d.tt" % seed], work)
        check(v.returncode == 0, "fn chaos, seed %d: the trace verifies" % seed, v.stderr)
    r = run([TT, "record", "-q", "-o", "plain.tt", "--", FNCHAOS, "1000"], work)
    info = json.loads(run([TT, "info", "--json", "plain.tt"], work).stdout)
    check(r.returncode == 0 and info["command"]["chaos"] is None,
          "without --chaos, info says no chaos", info.get("command"))


def main(d):
    fn_chaos(d)
    modes(d)
    a_tampered_order_is_a_schedule_divergence(d)
    python_threads(d)
    timed_waits(d)
    sleeps(d)
    hunt(d)


ttproc.run_main(main, "tt-sync-")
