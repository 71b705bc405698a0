#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test: a recording thread's wait for the memory budget is the tracer's time.

    test-stall.py TINYTRACE MKSTALL

mkstall records with a two-buffer budget and a sink that is slow (40 ms) once the thread has
stalled, inside a call of `work`. Checks:
  - the stall is counted (mkstall's session stats, the manifest) and the trace verifies;
  - `tinytrace stats --json`: the function "tinytrace:buffer-wait" has calls under
    work (or leaf) whose total is the time the session measured the thread waiting
    (mkstall's stall_ns, within 5 % + 0.2 ms), and work's self time excludes them (self <=
    total - the stalls' total);
  - `tinytrace export`: X events of that name, as long in all, inside work's X event;
  - `mkstall replay`: the same calls replay against the recording and its close finds nothing
    left (replay steps over the tracer's frame).
Everything happens in a fresh temporary directory, removed at the end.
"""
import json
import os
import subprocess
import sys
import tempfile

STALL = "tinytrace:buffer-wait"
failures = []
passed = [0]


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed[0] += 1
    else:
        failures.append(what)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        failures.append("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
        print("FAIL %s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r


def main():
    tt, mkstall = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="tt-stall-") as d:
        trace = os.path.join(d, "stall.tt")
        r = run([mkstall, "record", trace])
        stalls = int(r.stdout.split()[1]) if r.returncode == 0 else 0
        stall_ns = int(r.stdout.split()[3]) if r.returncode == 0 else 0
        check(stalls >= 1, "the recording thread stalled (%d)" % stalls)
        run([tt, "verify", trace])
        info = json.loads(run([tt, "info", "--json", trace]).stdout or "{}")
        check(info.get("manifest", {}).get("stall_count", 0) >= 1, "the manifest counts the stall")

        st = json.loads(run([tt, "stats", "--json", trace]).stdout or "{}")
        fns = {f["function"]: f for f in st.get("functions", [])}
        s, w = fns.get(STALL), fns.get("work")
        check(s is not None, "stats lists %r" % STALL)
        check(w is not None, "stats lists work")
        if s and w:
            # the frames hold the time the session measured its threads waiting (stall_ns),
            # which the slow sink made long: the time is where it landed, and all of it (the
            # injected 40 ms need not fall in one wait: the swapper may free a buffer midway)
            check(abs(s["total_ns"] - stall_ns) <= stall_ns * 0.05 + 200000,
                  "the stalls' total (%d ns) is the time the thread waited (%d ns)"
                  % (s["total_ns"], stall_ns))
            check(s["max_depth"] >= 1, "the stall is a call under work or leaf (depth %d)"
                  % s["max_depth"])
            check(w["self"] + s["total"] <= w["total"],
                  "work's self time (%d) excludes the stall (%d of %d)" % (w["self"], s["total"],
                                                                         w["total"]))

        out = os.path.join(d, "stall.json")
        run([tt, "export", "-o", out, trace])
        try:
            ev = json.load(open(out))["traceEvents"]
        except (OSError, ValueError, KeyError):
            ev = []
        xs = [e for e in ev if e.get("ph") == "X" and e.get("name") == STALL]
        ws = [e for e in ev if e.get("ph") == "X" and e.get("name") == "work"]
        # the injected wait may be split over more than one stall (a buffer the swapper freed
        # midway): their sum holds it, as stats' total does
        check(len(xs) >= 1 and abs(sum(e["dur"] for e in xs) * 1e3 - stall_ns) <=
              stall_ns * 0.05 + 200000,
              "export shows the stalls as calls of their own, the time waited in all (%s µs "
              "of %d ns)" % ([e["dur"] for e in xs], stall_ns))
        if xs and ws:
            x, wk = max(xs, key=lambda e: e["dur"]), ws[0]
            check(wk["ts"] <= x["ts"] and x["ts"] + x["dur"] <= wk["ts"] + wk["dur"],
                  "export puts the stall inside work")

        r = run([mkstall, "replay", trace])
        check(r.returncode == 0, "the calls replay (the stall stepped over)")

    print("%d passed, %d failed" % (passed[0], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
