#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of the fd guard: programs that clear their fd table at start keep their trace.

    test-fdguard.py TINYTRACE PRELOAD PROG

PROG is prog-fdguard.c: it clears its fd table one way or another (close_range, closefrom, a
close loop over 0..1023, dup2 over 3..1023, fcntl on every fd, the same through syscall()),
checks that it sees no descriptor it did not open, makes a known number of recorded calls and
exits 42. Each mode is recorded with `tinytrace record` and must keep the program's status, give
a trace that `tinytrace verify` accepts and that holds every call (counted by site in
`tinytrace dump --json`), and replay with `tinytrace replay` (exit 0). One run makes a trace
larger than the replay's read-ahead, so the replayed program's clearing happens while the
replay still reads the trace. Last, a program that takes every descriptor below a soft
RLIMIT_NOFILE of 1024 leaves no number for the trace: the recording is then lost, and the
message must say that the program closed the trace file's descriptor.

Every check runs (tests/integration/ttproc.py); the exit status is 1 if any failed. Each case
works in its own temporary directory, removed afterwards.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ttproc  # noqa: E402  (check() and the list of failures)

check = ttproc.check

TIMEOUT = 120   # seconds for one command: a hang is a failure, not a stuck test run
STATUS = 42     # prog-fdguard's own exit status
RANDOM = 10     # its getrandom calls

MODES = ["none", "close-range", "close-range-unshare", "close-range-cloexec", "closefrom",
         "close-loop", "dup2-all", "fcntl-all", "syscall-close-range", "syscall-close-loop",
         "syscall-dup2-all"]


class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    def __str__(self):
        return "$ %s\nexit %s\nstdout: %s\nstderr: %s" % (
            " ".join(self.args), self.rc, self.out[:2000], self.err[:3000])


def run(args, cwd, nofile=None):
    args = [str(a) for a in args]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TINYTRACE_") and k != "LD_PRELOAD"}
    env["TINYTRACE_PRELOAD"] = PRELOAD

    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(
                resource.RLIMIT_NOFILE)[1]))
    try:
        p = subprocess.run(args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env, timeout=TIMEOUT, preexec_fn=limit)
        return Result(args, p.returncode, p.stdout.decode(errors="replace"),
                      p.stderr.decode(errors="replace"))
    except subprocess.TimeoutExpired as e:
        return Result(args, "timeout", "", str(e))


def sites(trace, cwd):
    """{site: count} of the io events of @trace, from `tinytrace dump --json`."""
    d = run([TT, "dump", "--json", trace], cwd)
    counts = {}
    if d.rc != 0:
        return None, d
    for line in d.out.splitlines():
        ev = json.loads(line)
        if ev.get("kind") == "io":
            counts[ev.get("site")] = counts.get(ev.get("site"), 0) + 1
    return counts, d


def case(mode, calls=100):
    name = "%s (%d calls)" % (mode, calls)
    work = tempfile.mkdtemp(prefix="tt-fdguard-")
    try:
        trace = os.path.join(work, "p.tt")
        r = run([TT, "record", "-o", trace, "--", PROG, mode, calls], work)
        check(r.rc == STATUS, "%s: record exits with the program's status %d" % (name, STATUS), r)
        check("the program exited with status %d" % STATUS in r.err and
              r.err.count("tinytrace:") == 1,
              "%s: record says only that the program exited with %d" % (name, STATUS), r)
        v = run([TT, "verify", trace], work)
        check(v.rc == 0, "%s: tinytrace verify accepts the trace" % name, v)
        counts, d = sites(trace, work)
        want = {"clock_gettime(CLOCK_MONOTONIC)": calls, "getrandom": RANDOM}
        check(counts is not None and all(counts.get(k) == n for k, n in want.items()),
              "%s: the trace holds every call (%s)" % (name, want), "%s\n%s" % (counts, d))
        p = run([TT, "replay", trace], work)
        check(p.rc == 0 and "matched" in p.err, "%s: tinytrace replay exits 0, matched" % name, p)
        leftovers = [f for f in os.listdir(work) if f.endswith(".partial")]
        check(not leftovers, "%s: no .partial file is left" % name, leftovers)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def no_room():
    """dup2 over 3..1023 with a soft limit of 1024: no number is left for the trace."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        print("skip no-room: the hard RLIMIT_NOFILE is %d" % hard)
        return
    work = tempfile.mkdtemp(prefix="tt-fdguard-")
    try:
        trace = os.path.join(work, "p.tt")
        r = run([TT, "record", "-o", trace, "--", PROG, "dup2-all"], work, nofile=1024)
        check("the program closed the trace file's descriptor" in r.err,
              "no-room: the message says the program closed the trace file's descriptor", r)
        check("marked incomplete" not in r.err or "could not be written" in r.err,
              "no-room: the message does not claim a manifest it could not write", r)
        check("the program exited with status %d" % STATUS in r.err,
              "no-room: the program ran to its own end (status %d)" % STATUS, r)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(tmp):
    global TT, PRELOAD, PROG
    TT, PRELOAD, PROG = (os.path.abspath(a) for a in sys.argv[1:4])
    for mode in MODES:
        case(mode)
    # past the replay's 256 KiB read-ahead: the replay reads the trace after the program
    # cleared its fd table
    case("close-range", 20000)
    case("dup2-all", 20000)
    no_room()


if __name__ == "__main__":
    ttproc.run_main(main, "tt-fdguard-")
