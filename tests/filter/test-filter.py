#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Record-time filters: `tinytrace record --filter GLOB --notrace GLOB --depth N` (issue 20).

    test-filter.py TINYTRACE PRELOAD PROG_FILTER

prog-filter.c: main > work(N) > leaf > inner, N times, then main > other > inner. Checks:
  - --filter leaf: the trace holds the calls of leaf and of what leaf calls (inner, N each),
    nothing else, and replays (exit 0);
  - --notrace leaf: everything but those: with --filter leaf's calls it makes the unfiltered
    trace's calls, call for call; it replays;
  - --depth 2: main, work and other only; --filter work --depth 2: work and leaf;
  - globs: --filter 'le*' is --filter leaf; two --filter options match either;
  - the filters are in the trace (META objects, shown by info) and replay reads them there:
    the replay of --filter leaf compares leaf's calls and matches (a replay that did not apply
    the filter would meet main's enter where the recording has leaf's, and diverge);
  - a bad --depth or an empty glob is a usage error; nothing runs.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

TT, PRELOAD, PROG = map(os.path.abspath, sys.argv[1:4])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
N = 25
failures = []


def run(args):
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=ENV, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:3000].replace("\n", "\n     "))


def calls(trace):
    """Counter of function names entered, and of exits, from dump --json."""
    rc, out, err = run([TT, "dump", "--json", trace])
    enters, exits = Counter(), Counter()
    for line in out.splitlines():
        e = json.loads(line)
        if e["kind"] == "enter":
            enters[e["function"]] += 1
        elif e["kind"] == "exit":
            exits[e["function"]] += 1
    return enters, exits


def record(d, name, *opts):
    t = os.path.join(d, name + ".tt")
    rc, out, err = run([TT, "record", "-o", t] + list(opts) + ["--", PROG, N])
    check(rc == 0, "record %s" % " ".join(opts), err)
    return t


def replays(label, t):
    rc, out, err = run([TT, "replay", t])
    check(rc == 0 and "replay matched" in err, label + ": replays", (rc, err))


def main(d):
    full = record(d, "full")
    fe, fx = calls(full)
    check(fe["leaf"] == N and fe["inner"] == N + 1 and fe["work"] == 1,
          "unfiltered: the program's calls", fe)

    lf = record(d, "leaf", "--filter", "leaf")
    le, lx = calls(lf)
    check(le == Counter({"leaf": N, "inner": N}) and lx == le,
          "--filter leaf: only leaf's calls and the calls leaf makes", (le, lx))
    replays("--filter leaf", lf)

    nt = record(d, "notrace", "--notrace", "leaf")
    ne, nx = calls(nt)
    check("leaf" not in ne and ne + le == fe and nx + lx == fx,
          "--notrace leaf: the complement of --filter leaf, call for call", (ne, le, fe))
    replays("--notrace leaf", nt)

    dp = record(d, "depth", "--depth", "2")
    de, dx = calls(dp)
    check(de == Counter({"main": 1, "work": 1, "other": 1}) and dx == de,
          "--depth 2: two levels", de)
    replays("--depth 2", dp)

    wd = record(d, "workdepth", "--filter", "work", "--depth", "2")
    we, wx = calls(wd)
    check(we == Counter({"work": 1, "leaf": N}), "--filter work --depth 2: work and leaf", we)

    gl = record(d, "glob", "--filter", "le*")
    check(calls(gl)[0] == le, "--filter 'le*' is --filter leaf", calls(gl)[0])
    two = record(d, "two", "--filter", "leaf", "--filter", "other")
    te = calls(two)[0]
    check(te == Counter({"leaf": N, "inner": N + 1, "other": 1}),
          "two --filter options: either matches", te)
    replays("two --filter options", two)

    rc, out, err = run([TT, "info", "--json", wd])
    cmd = json.loads(out)["command"] if rc == 0 else {}
    check(cmd.get("filter") == "work" and cmd.get("depth") == "2" and cmd.get("notrace") is None,
          "the trace holds its filters (info --json)", cmd)
    # replay reads the filter from the trace: the same program replayed against the
    # unfiltered recording matches, against the filtered one too, and each is compared with
    # what it holds. A filter the replay did not apply would see main's enter first:
    rc, out, err = run([TT, "replay", "--report", os.path.join(d, "r.json"), lf])
    rep = json.load(open(os.path.join(d, "r.json")))
    check(rc == 0 and rep["status"] == "matched" and rep["matched"] > 0,
          "the replay of --filter leaf compared %s calls" % rep.get("matched"), rep)

    for bad in (["--depth", "0"], ["--filter", ""], ["--notrace", "a,b"]):
        rc, out, err = run([TT, "record", "-o", os.path.join(d, "bad.tt")] + bad +
                           ["--", PROG, N])
        check(rc == 2 and not os.path.exists(os.path.join(d, "bad.tt")),
              "record %s: usage error, nothing recorded" % " ".join(bad), (rc, err))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="tt-filter-") as d:
        main(d)
    print("%d failure(s)" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)
