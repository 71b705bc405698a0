#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of `tinytrace report`, `stats --sort/--limit` and `tree --json` (issue 20).

    test-report.py TINYTRACE MKKINDS MKDIFF

On mkdiff (five threads, recursion) and mkkinds (calls left open, unwound, abandoned) traces:
  - report's nodes, summed by function, give stats' calls, total and self time to the tick;
  - the call paths are the distinct paths of tree --json's calls, and each node's calls are
    the calls of that path;
  - --thread N counts that thread's frames only; --limit N leaves at most N callees a node, the
    rest in one "more" entry that sums them; --threshold P% leaves out nodes below P% of the
    run; --sort calls orders siblings by calls;
  - stats --sort KEY --limit N prints the first N functions in that order;
  - tree --json has one object per call, as many as the frame table has rows.
Everything happens in a fresh temporary directory, removed at the end.
"""

import functools
import json
import os
import sys
from collections import Counter, defaultdict

import testwrap
import ttproc

TT, MKKINDS, MKDIFF = map(os.path.abspath, sys.argv[1:4])
TIMEOUT = testwrap.timeout(240)
check = ttproc.check
run = functools.partial(ttproc.run_text, timeout=TIMEOUT)


def jrun(args):
    rc, out, err = run(args)
    if rc != 0:
        raise RuntimeError("%s: %d %s" % (args, rc, err))
    return json.loads(out) if out.lstrip().startswith("{") and "\n{" not in out.strip() else \
        [json.loads(line) for line in out.splitlines()]


def paths_of_tree(trace):
    """Counter of call paths (tuples of names) from tree --json, and the frame count."""
    calls, stack, n = Counter(), [], 0
    for o in jrun([TT, "tree", "--json", trace]):
        if "level" not in o:
            stack = []
            continue
        del stack[o["level"]:]
        stack.append(o["function"])
        calls[tuple(stack)] += 1
        n += 1
    return calls, n


def nodes_by_path(graph):
    by_id, out = {}, {}
    for nd in graph:
        if "more" in nd:
            continue
        path = (by_id[nd["parent"]] if nd["parent"] is not None else ()) + (nd["function"],)
        by_id[nd["id"]] = path
        out[path] = nd
    return out


def check_trace(label, trace):
    rep = jrun([TT, "report", "--json", trace])
    stats = jrun([TT, "stats", "--json", trace])
    sums = defaultdict(lambda: [0, 0, 0])
    for nd in rep["graph"]:
        s = sums[nd["function"]]
        s[0] += nd["calls"]
        s[1] += nd["total"]
        s[2] += nd["self"]
    want = {f["function"]: [f["calls"], f["total"], f["self"]] for f in stats["functions"]}
    check(dict(sums) == want and rep["frames"] == stats["frames"],
          label + ": report's totals by function are stats' (calls, total, self, ticks)",
          (dict(sums), want))
    paths, n = paths_of_tree(trace)
    got = {p: nd["calls"] for p, nd in nodes_by_path(rep["graph"]).items()}
    check(got == dict(paths) and n == stats["frames"],
          label + ": one node per call path of tree --json, with its calls (%d paths)" %
          len(paths), (sorted(set(got) ^ set(paths))[:5], n, stats["frames"]))
    return rep, stats


def main(d):
    k = os.path.join(d, "kinds.tt")
    rc, out, err = run([MKKINDS, k])
    check(rc == 0, "mkkinds records", err)
    check_trace("kinds", k)
    m = os.path.join(d, "mkdiff.tt")
    rc, out, err = run([MKDIFF, m, 4, 400])
    check(rc == 0, "mkdiff records", err)
    rep, stats = check_trace("mkdiff", m)

    one = jrun([TT, "report", "--json", "--thread", "1", m])
    frames1 = [t for t in stats["threads"] if t["id"] == 1][0]["frames"]
    check(sum(nd["calls"] for nd in one["graph"]) == frames1 == one["frames"],
          "--thread 1: the calls of thread 1 only (%d)" % frames1, one["frames"])

    lim = jrun([TT, "report", "--json", "--limit", "1", m])
    kids = Counter(nd["parent"] for nd in lim["graph"] if "more" not in nd)
    mores = [nd for nd in lim["graph"] if "more" in nd]
    full = {nd["id"]: nd for nd in rep["graph"]}
    ok = all(v <= 1 for v in kids.values()) and mores
    for mo in mores:  # what "more" sums is the rest of its parent's callees
        sib = [nd for nd in rep["graph"] if nd["parent"] == mo["parent"]]
        shown = [nd for nd in lim["graph"] if "more" not in nd and nd["parent"] == mo["parent"]]
        ok = ok and mo["more"] == len(sib) - len(shown) and \
            mo["calls"] == sum(s["calls"] for s in sib) - sum(s["calls"] for s in shown)
    check(ok, "--limit 1: one callee a node, the rest summed in \"more\"", (kids, mores[:3]))

    thr = jrun([TT, "report", "--json", "--threshold", "10%", m])
    grand = sum(nd["total"] for nd in rep["graph"] if nd["parent"] is None)
    shown = [nd for nd in thr["graph"] if "more" not in nd]
    check(shown and all(nd["total"] * 100 >= 10 * grand for nd in shown) and
          len(shown) < len([nd for nd in rep["graph"]]) and
          any("more" in nd for nd in thr["graph"]),
          "--threshold 10%: only the nodes of at least a tenth of the run",
          [(nd["function"], nd["total"]) for nd in shown])

    srt = jrun([TT, "report", "--json", "--sort", "calls", m])
    by_parent = defaultdict(list)
    for nd in srt["graph"]:
        if "more" not in nd:
            by_parent[nd["parent"]].append(nd["calls"])
    check(all(v == sorted(v, reverse=True) for v in by_parent.values()) and
          any(len(v) > 1 for v in by_parent.values()),
          "--sort calls: siblings by calls, most first", dict(by_parent))
    rc, out, err = run([TT, "report", m])
    check(rc == 0 and "call paths" in out and "TOTAL_NS" in out and
          len(out.splitlines()) == 3 + len(rep["graph"]),
          "report prints a line per node", out[:500])
    rc, out, err = run([TT, "report", "--sort", "size", m])
    check(rc == 2, "report --sort of an unknown key: usage error", (rc, err))

    st = jrun([TT, "stats", "--json", "--sort", "calls", "--limit", "2", m])
    calls = sorted((f["calls"] for f in stats["functions"]), reverse=True)
    check([f["calls"] for f in st["functions"]] == calls[:2] and
          st["functions_called"] == len(stats["functions"]),
          "stats --sort calls --limit 2: the two most called functions", st["functions"])
    rc, out, err = run([TT, "stats", "--sort", "name", m])
    names = [line.split()[-1] for line in out.split("\n\n")[1].splitlines()[2:]]
    check(rc == 0 and names == sorted(names) and len(names) == len(stats["functions"]),
          "stats --sort name: functions by name", names)

    tj = jrun([TT, "tree", "--json", "--thread", "2", m])
    heads = [o for o in tj if "level" not in o]
    body = [o for o in tj if "level" in o]
    f2 = [t for t in stats["threads"] if t["id"] == 2][0]["frames"]
    check(len(heads) == 1 and heads[0]["calls"] == f2 == len(body) and
          all(o["thread"] == 2 for o in body),
          "tree --json: a head and one object per call of the thread (%d)" % f2,
          (heads, len(body)))


if __name__ == "__main__":
    ttproc.run_main(main, "tt-report-")
