#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of `tinytrace export --format chrome`.

    test-export.py TINYTRACE MKKINDS MKDIFF MAXRSS [--flaky FLAKY PRELOAD]

Exports traces and checks the output against the published Trace Event Format (the JSON Object
Format: {"traceEvents": [...], "displayTimeUnit": ...}):
  - valid JSON (the json module), displayTimeUnit "ms" or "ns";
  - every event has name, ph, pid, tid; X has ts and dur >= 0; i has ts and a scope s in g/p/t;
    M is process_name / thread_name (args.name a string) or thread_sort_index (args.sort_index);
    no other phase;
  - a thread_name for every tid used, a process_name for the pid;
  - per thread, the end of each event (ts for i, ts + dur for X) never decreases in the order
    of the file (X events come out when the call returns);
  - per thread, the X events are well nested: each lies within its parent's [ts, ts + dur];
  - the X events are exactly the calls that `tinytrace dump --json` (the reference reader) shows:
    the same thread, name, start and end to the nanosecond, calls still open ending at their
    thread's last event (with export's two documented time rules: a thread's clock never goes
    back, and no two calls of a thread start at the same nanosecond);
  - per thread, no two X events start at the same ts (viewers mis-nest those);
  - the frame count printed on stderr ("N frames") equals the X events and otherData.frames.
Traces: mkkinds (every event kind, names that need escaping, a crash, calls left open; its
expected counts come from the program), the flaky example recorded under `tinytrace record`
(not in sanitizer builds: it preloads the runtime), and a 10^6-event mkdiff trace for memory
(peak RSS within 4 MiB of a 100-times smaller one) and the progress line.

Every check runs; failures are listed at the end and make the exit status 1. Everything happens
in a fresh temporary directory, removed at the end.
"""

import functools
import json
import os
import re
import stat
import sys
from collections import Counter, defaultdict
from decimal import Decimal

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step
import ttproc

TT, MKKINDS, MKDIFF, MAXRSS = map(os.path.abspath, sys.argv[1:5])
FLAKY = PRELOAD = None
if len(sys.argv) > 5 and sys.argv[5] == "--flaky":
    FLAKY, PRELOAD = map(os.path.abspath, sys.argv[6:8])
TIMEOUT = testwrap.timeout(240)
check = ttproc.check
run = functools.partial(ttproc.run_text, timeout=TIMEOUT)


def format_errors(doc):
    """Checks doc against the Trace Event Format; returns a list of problems."""
    errs = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a traceEvents array"]
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        errs.append("displayTimeUnit %r" % doc.get("displayTimeUnit"))
    num = (int, Decimal)
    names, pnames, used = {}, set(), set()
    last_end = {}
    for k, e in enumerate(doc["traceEvents"]):
        if len(errs) > 20:
            break
        where = "event %d %r" % (k, e)
        if not isinstance(e, dict):
            errs.append(where + ": not an object")
            continue
        for f, t in (("name", str), ("ph", str), ("pid", int), ("tid", int)):
            if not isinstance(e.get(f), t):
                errs.append(where + ": no %s" % f)
        ph = e.get("ph")
        key = (e.get("pid"), e.get("tid"))
        if ph == "M":
            a = e.get("args")
            if e["name"] in ("process_name", "thread_name"):
                if not isinstance(a, dict) or not isinstance(a.get("name"), str):
                    errs.append(where + ": metadata without args.name")
                elif e["name"] == "thread_name":
                    names[key] = a["name"]
                else:
                    pnames.add(e["pid"])
            elif e["name"] == "thread_sort_index":
                if not isinstance(a, dict) or not isinstance(a.get("sort_index"), int):
                    errs.append(where + ": thread_sort_index without args.sort_index")
            else:
                errs.append(where + ": unknown metadata")
            continue
        used.add(key)
        if not isinstance(e.get("ts"), num) or e["ts"] < 0:
            errs.append(where + ": no ts")
            continue
        if ph == "X":
            if not isinstance(e.get("dur"), num) or e["dur"] < 0:
                errs.append(where + ": X without dur")
                continue
            end = e["ts"] + e["dur"]
        elif ph in ("i", "I"):
            if e.get("s", "t") not in ("g", "p", "t"):
                errs.append(where + ": bad scope")
            end = e["ts"]
        else:
            errs.append(where + ": phase %r" % ph)
            continue
        if "args" in e and not isinstance(e["args"], dict):
            errs.append(where + ": args not an object")
        if end < last_end.get(key, 0):
            errs.append(where + ": ends at %s, before the previous event of its thread (%s)" %
                        (end, last_end[key]))
        last_end[key] = max(end, last_end.get(key, 0))
    for key in sorted(used - set(names)):
        errs.append("thread %r has no thread_name" % (key,))
    for pid in sorted({k[0] for k in used} - pnames):
        errs.append("process %r has no process_name" % pid)
    # nesting: sorted by start, longest first, every event inside the one below it on a stack
    per = defaultdict(list)
    for e in doc["traceEvents"]:
        if (isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("ts"), num) and
                isinstance(e.get("dur"), num)):  # the malformed ones are reported above
            per[(e.get("pid"), e.get("tid"))].append((e["ts"], e["ts"] + e["dur"],
                                                      e.get("name")))
    for key, xs in per.items():
        starts = Counter(x[0] for x in xs)
        same = [ts for ts, n in starts.items() if n > 1]
        if same:
            errs.append("thread %r: %d X events start at ts %s" % (key, starts[same[0]], same[0]))
        xs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for x in xs:
            while stack and not (stack[-1][0] <= x[0] and x[1] <= stack[-1][1]):
                if stack[-1][1] > x[0]:
                    errs.append("thread %r: %r overlaps %r without nesting" % (key, x,
                                                                               stack[-1]))
                    break
                stack.pop()
            stack.append(x)
    return errs


def load(path):
    with open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"), parse_float=Decimal)


def frames_from_dump(trace):
    """The calls of trace as the reference reader shows them: Counter of (tid, name, start_ns,
    end_ns, outcome), open calls ending at their thread's last event."""
    rc, out, err = run([TT, "dump", "--json", trace])
    if rc != 0:
        raise RuntimeError("dump: %s" % err)
    stacks, last, crashed, prev_start = defaultdict(list), {}, set(), {}
    calls = Counter()
    for line in out.splitlines():
        e = json.loads(line)
        t = e["thread"]
        last[t] = max(last.get(t, 0), e["time_ns"])
        if e["kind"] == "enter":
            if t in prev_start and last[t] <= prev_start[t]:
                last[t] = prev_start[t] + 1
            prev_start[t] = last[t]
        now = last[t]
        if e["kind"] == "enter":
            stacks[t].append((e["function"], now))
        elif e["kind"] == "exit":
            # export's rule: the innermost open call of that function within 256 levels
            # returns, the calls above it were left without an exit; none: the exit is skipped
            st = stacks[t]
            for k in range(len(st) - 1, max(len(st) - 256, 0) - 1, -1):
                if st[k][0] == e["function"]:
                    while len(st) > k + 1:
                        name, start = st.pop()
                        calls[(t, name, start, now, "left without an exit")] += 1
                    name, start = st.pop()
                    calls[(t, name, start, now, None)] += 1
                    break
        elif e["kind"] == "crash":
            crashed.add(t)
    for t, st in stacks.items():
        for name, start in st:
            calls[(t, name, start, last[t], "unwound by a crash" if t in crashed
                   else "still open at the end of the trace")] += 1
    return calls


TID_REUSED = 0x40000000


def tid_map(trace):
    """The export's tid of each thread -> its dense id: the OS tid from the thread table, or
    TID_REUSED + id for a thread whose OS tid an earlier thread had (or that has none)."""
    rc, out, err = run([TT, "info", "--json", trace])
    if rc != 0:
        raise RuntimeError("info: %s" % err)
    seen, m = set(), {}
    for t in json.loads(out)["threads"]:
        tid = t["os_tid"]
        if tid == 0 or tid in seen:
            tid = TID_REUSED + t["id"]
        seen.add(tid)
        m[tid] = t["id"]
    return m


def frames_from_export(doc, tids):
    calls = Counter()
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            start = int(e["ts"] * 1000)
            end = int((e["ts"] + e["dur"]) * 1000)
            calls[(tids.get(e["tid"]), e["name"], start, end,
                   e.get("args", {}).get("outcome"))] += 1
    return calls


def export(trace, out, *opts, env=None):
    rc, o, err = run([TT, "export", "--format", "chrome", "-o", out] + list(opts) + [trace],
                     env=env)
    m = re.search(r"(\d+) frames", err)
    return rc, o, err, int(m.group(1)) if m else None


def check_trace(label, trace, d):
    out = os.path.join(d, label + ".json")
    rc, o, err, nframes = export(trace, out)
    if not check(rc == 0 and os.path.exists(out), label + ": export exits 0", (rc, err)):
        return None
    try:
        doc = load(out)
    except ValueError as e:
        check(False, label + ": valid JSON", e)
        return None
    errs = format_errors(doc)
    check(not errs, label + ": follows the trace-event format", "\n".join(errs[:20]))
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    check(nframes == len(xs) == doc["otherData"]["frames"] and nframes > 0,
          label + ": \"%s frames\" on stderr = X events = otherData.frames" % nframes,
          (nframes, len(xs), doc["otherData"], err))
    tids = tid_map(trace)
    check(all(not e.get("args") or set(e["args"]) == {"outcome"}
              for e in doc["traceEvents"] if e["ph"] == "X"),
          label + ": without --args a call has no args (but its outcome, if it did not return)")
    want, got = frames_from_dump(trace), frames_from_export(doc, tids)
    check(want == got, label + ": the X events are the calls dump shows (%d)" % sum(want.values()),
          "missing: %r\nextra: %r" % (list((want - got).items())[:5],
                                      list((got - want).items())[:5]))
    return doc, err, tids


def calls_with_depth(trace):
    """(thread, name, start_ns, end_ns, depth) of every returned call, as dump shows them."""
    rc, out, err = run([TT, "dump", "--json", trace])
    stacks, last, calls, prev = defaultdict(list), {}, [], {}
    for line in out.splitlines():
        e = json.loads(line)
        t = e["thread"]
        last[t] = max(last.get(t, 0), e["time_ns"])
        if e["kind"] == "enter":
            if t in prev and last[t] <= prev[t]:
                last[t] = prev[t] + 1
            prev[t] = last[t]
            stacks[t].append((e["function"], last[t]))
        elif e["kind"] == "exit" and stacks[t] and stacks[t][-1][0] == e["function"]:
            name, start = stacks[t].pop()
            calls.append((t, name, start, last[t], len(stacks[t])))
    return calls


def windows(trace, d):
    """--from/--to, --thread, --max-depth, --min-duration: the calls written are those of the
    reference reader that the window asks for, and only those."""
    calls = calls_with_depth(trace)
    tids = tid_map(trace)
    starts = sorted(c[2] for c in calls if c[0] == 2)  # thread 2's, which the window is on
    lo, hi = starts[len(starts) // 3], starts[len(starts) // 2]
    out = os.path.join(d, "win.json")

    def xs(*opts):
        if os.path.exists(out):
            os.unlink(out)
        rc, o, err, n = export(trace, out, *opts)
        if rc != 0:
            return None, err
        doc = load(out)
        got = [(tids.get(e["tid"]), e["name"], int(e["ts"] * 1000),
                int((e["ts"] + e["dur"]) * 1000), e.get("args", {}).get("outcome"))
               for e in doc["traceEvents"] if e["ph"] == "X"]
        return got, err

    got, err = xs("--from", "%dns" % lo, "--to", "%dns" % hi, "--thread", "2")
    want = {(t, n, s) for t, n, s, e, dep in calls if t == 2 and e >= lo and s <= hi}
    inside = {(t, n, s, e) for t, n, s, e, dep in calls if t == 2 and s >= lo and e <= hi}
    check(got is not None and {g[:3] for g in got} == want and len(want) > 100 and
          inside <= {g[:4] for g in got if g[4] is None},
          "window: --from/--to/--thread write the calls that overlap it, on that thread only, "
          "the ones inside it exactly (%d)" % len(want),
          (err, got and len(got), len(want), got and list({g[:3] for g in got} ^ want)[:5]))
    check(got is not None and all(g[3] <= hi + 1 or g[4] == "open at the end of the window"
                                  for g in got),
          "window: calls open at its end end there", got and got[:3])
    got, err = xs("--max-depth", "1", "--thread", "1")
    want = {(t, n, s, e) for t, n, s, e, dep in calls if t == 1 and dep == 0}
    check(got is not None and {g[:4] for g in got} == want and len(want) > 0,
          "window: --max-depth 1 writes the top-level calls only (%d)" % len(want), err)
    durs = sorted(e - s for t, n, s, e, dep in calls if t == 1)
    t_ns = durs[len(durs) * 9 // 10]
    got, err = xs("--min-duration", "%dns" % t_ns, "--thread", "1")
    want = {(t, n, s, e) for t, n, s, e, dep in calls if t == 1 and e - s >= t_ns}
    check(got is not None and {g[:4] for g in got} == want and 0 < len(want) < len(durs),
          "window: --min-duration writes the calls that took that long, and only those (%d of "
          "%d)" % (len(want), len(durs)), err)
    got, err = xs("--from", "100", "--to", "199", "--thread", "3")
    rc, o, e2 = run([TT, "dump", "--json", "--thread", "3", trace])
    seqs = [json.loads(line) for line in o.splitlines()]
    enters = {(ev["function"], ev["seq"]) for ev in seqs if ev["kind"] == "enter"
              and 100 <= ev["seq"] <= 199}
    check(got is not None and len([g for g in got]) >= len(enters) > 0,
          "window: --from/--to by sequence numbers (%d calls entered in it)" % len(enters), err)
    # chrome-profile takes the same windows: its samples give back the X events' calls
    pout = os.path.join(d, "win-profile.json")
    for opts in (("--from", "%dns" % lo, "--to", "%dns" % hi, "--thread", "2"),
                 ("--max-depth", "1", "--thread", "1"),
                 ("--min-duration", "%dns" % t_ns, "--thread", "1")):
        want, err = xs(*opts)
        rc, o, err = run([TT, "export", "--format", "chrome-profile", "--force", "-o", pout] +
                         list(opts) + [trace])
        got = calls_from_profile(load(pout), tids) if rc == 0 else None
        check(want and got == Counter(g[:4] for g in want) and not profile_errors(load(pout)),
              "window: chrome-profile %s gives the X events' calls (%d)" %
              (" ".join(opts[::2]), len(want or [])),
              (rc, err, got and list((got - Counter(g[:4] for g in want)).items())[:5]))
    got_all, err = xs("--args", "--thread", "3")
    check(got_all is not None and all(isinstance(e.get("args", {}).get("seq"), int)
                                      for e in load(out)["traceEvents"] if e["ph"] == "X"),
          "--args: every call carries its seq", err)


def profile_errors(doc):
    """What in a --format chrome-profile document is not a Chrome CPU profile as speedscope
    and Chrome read it: the first event without "cat" (speedscope then takes the file for plain
    trace events), an event without a numeric ts (speedscope sorts by it), a phase other than
    M, i and P, a chunk before its Profile, a sample or parent of a node not yet defined, a
    negative delta, samples and deltas of different lengths, a profile without endTime."""
    errs, begun, nodes, ended = [], set(), defaultdict(set), set()
    evs = doc.get("traceEvents") or []
    if not evs or "cat" not in evs[0]:
        errs.append("the first event has no cat")
    for i, e in enumerate(evs):
        where = "event %d" % i
        if not isinstance(e.get("ts"), (int, Decimal)):
            errs.append(where + ": no numeric ts")
        if e.get("ph") not in ("M", "i", "P"):
            errs.append(where + ": phase %r" % e.get("ph"))
        if e.get("ph") != "P":
            continue
        key = (e.get("pid"), e.get("tid"), e.get("id"))
        data = e.get("args", {}).get("data", {})
        if e["name"] == "Profile":
            begun.add(key)
            continue
        if e["name"] != "ProfileChunk" or key not in begun:
            errs.append(where + ": %s before its Profile" % e["name"])
            continue
        cp = data.get("cpuProfile", {})
        for n in cp.get("nodes", []):
            if "parent" in n and n["parent"] not in nodes[key]:
                errs.append(where + ": node %r before its parent" % n["id"])
            nodes[key].add(n["id"])
        samples, deltas = cp.get("samples", []), data.get("timeDeltas", [])
        if len(samples) != len(deltas):
            errs.append(where + ": %d samples, %d deltas" % (len(samples), len(deltas)))
        if any(s not in nodes[key] for s in samples):
            errs.append(where + ": a sample of an undefined node")
        if any(dt < 0 for dt in deltas):
            errs.append(where + ": a negative delta")
        if "endTime" in data:
            ended.add(key)
    if begun - ended:
        errs.append("profiles without endTime: %r" % sorted(begun - ended))
    return errs


def calls_from_profile(doc, tids):
    """The calls the profiles of a chrome-profile export stand for, as speedscope rebuilds them:
    at each sample the stack becomes the sample's node's path. Counter of (thread, name,
    start_ns, end_ns)."""
    parent, name, state, calls = {}, {}, {}, Counter()
    for e in doc["traceEvents"]:
        if e.get("ph") != "P" or e["name"] != "ProfileChunk":
            continue
        key = (e["pid"], e["tid"], e["id"])
        data = e["args"]["data"]
        for n in data["cpuProfile"].get("nodes", []):
            parent[n["id"]] = n.get("parent")
            name[n["id"]] = n["callFrame"]["functionName"]
        t, stack = state.get(key, (Decimal(0), []))
        for node, dt in zip(data["cpuProfile"]["samples"], data["timeDeltas"]):
            t += dt
            ns = int(t * 1000)
            path = []
            while node is not None and parent.get(node) is not None:
                path.append(node)
                node = parent[node]
            path.reverse()
            k = 0
            while k < len(stack) and k < len(path) and stack[k][0] == path[k]:
                k += 1
            while len(stack) > k:
                n, start = stack.pop()
                calls[(tids.get(e["tid"]), name[n], start, ns)] += 1
            stack.extend((n, ns) for n in path[k:])
        state[key] = (t, stack)
    return calls


def profiles(label, trace, d, tids):
    """--format chrome-profile of @trace: a Chrome CPU profile per thread whose samples give
    back exactly the calls that dump shows (the outcome aside), in a few bytes an event."""
    out = os.path.join(d, label + "-profile.json")
    rc, o, err = run([TT, "export", "--format", "chrome-profile", "--json", "-o", out, trace])
    if not check(rc == 0, label + ": export --format chrome-profile exits 0", (rc, err)):
        return
    summary = json.loads(o)
    doc = load(out)
    errs = profile_errors(doc)
    check(not errs, label + ": a Chrome CPU profile as speedscope reads it", errs[:10])
    want = Counter()
    for (t, n, start, end, outcome), c in frames_from_dump(trace).items():
        want[(t, n, start, end)] += c
    got = calls_from_profile(doc, tids)
    check(want == got and sum(want.values()) == summary["frames"] > 0,
          label + ": the profiles' samples are the calls dump shows (%d)" % sum(want.values()),
          "missing: %r\nextra: %r" % (list((want - got).items())[:5],
                                      list((got - want).items())[:5]))
    check(summary["samples"] == 2 * summary["frames"],
          label + ": a sample at each enter and each exit", summary)
    return os.path.getsize(out), summary


def validator_finds_broken_documents():
    """The format check can fail: each of these documents breaks one rule."""
    base = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "t"}}]
    good = base + [{"ph": "X", "name": "child", "pid": 1, "tid": 0, "ts": 2, "dur": 1},
                   {"ph": "X", "name": "parent", "pid": 1, "tid": 0, "ts": 1, "dur": 5}]
    bad = {
        "overlap": base + [{"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 1, "dur": 5},
                           {"ph": "X", "name": "b", "pid": 1, "tid": 0, "ts": 3, "dur": 5}],
        "no thread name": [base[0], {"ph": "i", "name": "x", "pid": 1, "tid": 0, "ts": 1,
                                     "s": "t"}],
        "end goes back": base + [{"ph": "i", "name": "x", "pid": 1, "tid": 0, "ts": 5, "s": "t"},
                                 {"ph": "i", "name": "y", "pid": 1, "tid": 0, "ts": 4,
                                  "s": "t"}],
        "no dur": base + [{"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 1}],
        "same ts": base + [{"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 1, "dur": 0},
                           {"ph": "X", "name": "b", "pid": 1, "tid": 0, "ts": 1, "dur": 2}],
        "no name": base + [{"ph": "X", "pid": 1, "tid": 0, "ts": 1, "dur": 1}],
    }
    check(format_errors({"traceEvents": good, "displayTimeUnit": "ns"}) == [],
          "validator: accepts a well-formed document")
    for what, evs in bad.items():
        check(format_errors({"traceEvents": evs, "displayTimeUnit": "ns"}) != [],
              "validator: finds " + what)


def main(d):
    validator_finds_broken_documents()
    # 1. every event kind
    k = os.path.join(d, "kinds.tt")
    rc, out, err = run([MKKINDS, k])
    if not check(rc == 0, "mkkinds records", err):
        return
    want = json.loads(out)
    res = check_trace("kinds", k, d)
    if res:
        doc, err, tids = res
        evs = doc["traceEvents"]
        xs = [e for e in evs if e["ph"] == "X"]
        outcomes = Counter(e.get("args", {}).get("outcome") for e in xs)
        check(len(xs) == want["frames"] and outcomes[None] == want["returned"] and
              outcomes["still open at the end of the trace"] == want["open_at_end"] and
              outcomes["unwound by a crash"] == want["unwound_by_crash"] and
              outcomes["left without an exit"] == want["left_without_exit"],
              "kinds: frames returned / still open / unwound / left as mkkinds recorded them",
              (outcomes, want))
        inst = Counter(e["cat"] for e in evs if e["ph"] == "i")
        check(dict(inst) == want["instants"], "kinds: one instant event per recorded event",
              (inst, want["instants"]))
        tnames = {tids.get(e["tid"]): e["args"]["name"] for e in evs
                  if e["ph"] == "M" and e["name"] == "thread_name"}
        check(tnames == {0: "main", 1: 't"q\\\n\x01\u00e9\ufffd', 2: "open", 3: "jumper"},
              "kinds: threads named, escaped (the invalid byte as U+FFFD)", tnames)
        check(any(e["name"] == 'fn<"\\\t\x7f>' for e in xs),
              "kinds: a function name with quote, backslash, tab and DEL survives", None)
        crash = [e for e in evs if e["ph"] == "i" and e["cat"] == "crash"]
        check(len(crash) == 1 and crash[0]["args"]["signal"] == 11 and
              crash[0]["args"]["backtrace"].startswith("#0 0x1234 in doomed\n"),
              "kinds: the crash event with its signal and backtrace", crash)
        users = sorted(e["args"]["tag"] for e in evs if e["ph"] == "i" and e["cat"] == "user")
        check(users == sorted(list(range(100, 140)) + [777]),
              "kinds: every user event with its own tag", users)
        io = [e for e in evs if e["ph"] == "i" and e["cat"] == "io"]
        check(sorted(bytes.fromhex(e["args"]["payload"]).decode() for e in io) ==
              sorted(["in%d" % i for i in range(40)] + ["out%d" % (3 * i) for i in range(40)]),
              "kinds: every io event with its own bytes", io[:3])
        check("%d frames" % want["frames"] in err and "2 still open at the end" in err and
              "2 unwound by a crash" in err and "2 left without an exit" in err and
              "1 exits without a matching call skipped" in err,
              "kinds: the summary on stderr", err)
        profiles("kinds", k, d, tids)
    rc, out, err = run([TT, "export", "-o", os.path.join(d, "k2.json"), "--json", k])
    try:
        s = json.loads(out)
    except ValueError:
        s = None
    check(rc == 0 and s is not None and s["frames"] == want["frames"] and
          s["frames_open_at_end"] == want["open_at_end"] and
          s["frames_unwound_by_crash"] == want["unwound_by_crash"] and
          s["frames_left_without_exit"] == want["left_without_exit"] and
          s["unmatched_exits"] == want["unmatched_exits"] and err == "",
          "kinds: --json prints the summary on stdout", (rc, out, err))
    rc, out, err = run([TT, "export", k])
    try:
        ok = not format_errors(json.loads(out, parse_float=Decimal))
    except ValueError:
        ok = False
    check(rc == 0 and ok, "kinds: without -o the JSON goes to stdout", (rc, err))

    # 2. the flaky example, recorded by the tool
    if FLAKY:
        env = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
        f = os.path.join(d, "flaky.tt")
        rc, out, err = run([TT, "record", "-o", f, "--", FLAKY], env=env, stdin=b"7\n")
        if check(rc in (0, 1) and os.path.exists(f), "flaky: recorded", (rc, err)):
            res = check_trace("flaky", f, d)
            if res:
                doc = res[0]
                rc, out, err = run([TT, "dump", "--kind", "enter", f])
                nx = len(doc and [e for e in doc["traceEvents"] if e["ph"] == "X"])
                check(nx == len(out.splitlines()) > 0,
                      "flaky: one frame per enter event", (rc, err))
                # issue 6, acceptance 4: the frame count equals the frame table's
                rc, out, err = run([TT, "stats", "--json", f])
                check(rc == 0 and json.loads(out)["frames"] == nx,
                      "flaky: as many X events as the frame table has rows (tinytrace stats)",
                      (nx, out[:200], err))
                tn = sorted(e["args"]["name"] for e in doc["traceEvents"]
                            if e["ph"] == "M" and e["name"] == "thread_name")
                check(tn == ["main", "main/1", "main/2", "main/3"],
                      "flaky: the four threads by their recorded names", tn)
                pn = [e["args"]["name"] for e in doc["traceEvents"]
                      if e["ph"] == "M" and e["name"] == "process_name"]
                check(pn == ["flaky"], "flaky: the process is named after the program", pn)

    # 3. a 10^6-event trace: memory and the progress line
    big = os.path.join(d, "big.tt")
    small = os.path.join(d, "small.tt")
    for path, it in ((big, 21000), (small, 210)):
        rc, out, err = run([MKDIFF, path, 4, it])
        check(rc == 0, "mkdiff records %d iterations" % it, err)
    # not under valgrind (TT_TEST_REDUCED): the peak RSS measured would be valgrind's
    if testwrap.reduced():
        print("skip memory: TT_TEST_REDUCED (peak RSS under valgrind is valgrind's)")
    else:
        rc_b, rss_b = ttproc.peak_rss_kib(
            MAXRSS, [TT, "export", "-o", os.path.join(d, "big.json"), big], TIMEOUT)
        rc_s, rss_s = ttproc.peak_rss_kib(
            MAXRSS, [TT, "export", "-o", os.path.join(d, "small.json"), small], TIMEOUT)
        print("     peak RSS: %d KiB exporting 10^6 events, %d KiB exporting 10^4" %
              (rss_b, rss_s))
        check(rc_b == 0 and rc_s == 0 and rss_s > 0 and rss_b - rss_s < 4 * 1024,
              "memory: exporting 10^6 events within 4 MiB of 10^4", (rc_b, rss_b, rc_s, rss_s))
    rc, out, err = run([TT, "dump", "--kind", "enter", big])
    enters = len(out.splitlines())
    rc, out, err = run([TT, "export", "--json", "-o", os.path.join(d, "big2.json"), big])
    check(rc == 0 and json.loads(out)["frames"] == enters > 10 ** 5,
          "big: one frame per enter event (%d)" % enters, (out, err))
    rc, sout, err = run([TT, "stats", "--json", big])
    check(rc == 0 and json.loads(sout)["frames"] == json.loads(out)["frames"],
          "big: the export's frames = the frame table's rows (tinytrace stats)", (sout[:200], err))
    env = dict(os.environ, TINYTRACE_PROGRESS_MS="0")
    rc, data = ttproc.run_pty_stderr([TT, "export", "-o", os.path.join(d, "big3.json"), big],
                                     env, TIMEOUT)
    text = data.decode("utf-8", "replace")
    check(rc == 0 and re.search(r"tinytrace export: +\d+% \(\d+ of \d+ events\)", text),
          "progress: shown on a terminal", repr(text[:300]))
    m = re.search(r"\r *\r(tinytrace export: \d+ frames[^\r]*)$", text.rstrip("\r\n"))
    check(m is not None, "progress: erased before the summary line", repr(text[-300:]))
    rc, out, err = run([TT, "export", "-o", os.path.join(d, "big4.json"), big], env=env)
    check(rc == 0 and re.fullmatch(r"tinytrace export: \d+ frames[^\n]*\n", err),
          "progress: only the summary on stderr when it is a pipe", repr(err[:300]))

    windows(big, d)
    res = profiles("big", big, d, tid_map(big))
    if res:
        # the calls' part of each file (one event a line): the profile's "P" events against
        # the "X" events; the instants are the same in both
        def call_bytes(path, ph):
            with open(path, "rb") as f:
                return sum(len(l) for l in f if b'"ph":"%s"' % ph in l)
        size = call_bytes(os.path.join(d, "big-profile.json"), b"P")
        xsize = call_bytes(os.path.join(d, "big2.json"), b"X")
        frames = res[1]["frames"]
        print("     calls as profiles: %d bytes (%.1f a call); as X events: %d (%.1f)" %
              (size, size / frames, xsize, xsize / frames))
        check(0 < size * 3 <= xsize,
              "big: the calls as profiles take at most a third of their X events", (size, xsize))

    # 4. command lines, failures leave no output behind
    rc, out, err = run([TT, "export", "--format", "ctf", k])
    check(rc == 2 and "chrome, chrome-profile, perfetto" in err, "an unknown format: usage error",
          (rc, err))
    for fmt in ("perfetto", "chrome-profile"):
        rc, out, err = run([TT, "export", "--format", fmt, "--args", k])
        check(rc == 2, "--args with %s: usage error" % fmt, (rc, err))
    rc, out, err = run([TT, "export", "--process", "1", k])
    check(rc == 2 and "has no process '1'" in err, "--process of a process the recording does "
          "not have: usage error", (rc, err))
    rc, out, err = run([TT, "export", "--json", k])
    check(rc == 2, "--json without -o: usage error", (rc, err))
    rc, out, err = run([TT, "export", "-o", os.path.join(d, "no", "such", "dir.json"), k])
    check(rc == 6 and "no/such" in err, "an unwritable output: exit 6, named", (rc, err))
    cut = os.path.join(d, "cut.tt")
    with open(big, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    before = set(os.listdir(d))
    rc, out, err = run([TT, "export", "-o", os.path.join(d, "cut.json"), cut])
    check(rc == 3 and "cut.tt" in err and set(os.listdir(d)) == before,
          "a truncated trace: exit 3, named, no output file left", (rc, err,
                                                                    set(os.listdir(d)) - before))
    rc, out, err = run([TT, "export", "--max-open-calls", "3", "-o",
                        os.path.join(d, "deep.json"), k])
    check(rc == 3 and "more than 3 calls open" in err and
          not os.path.exists(os.path.join(d, "deep.json")),
          "--max-open-calls: a trace that needs more is refused", (rc, err))
    # a FIFO (as a stand-in for /dev/null or a pipe) is refused, and neither opened nor
    # replaced (test-clobber.py has the other kinds of file)
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    rc, out, err = run([TT, "export", "-o", fifo, k])
    check(rc == 2 and "fifo" in err and "FIFO" in err and stat.S_ISFIFO(os.stat(fifo).st_mode)
          and not [n for n in os.listdir(d) if n.startswith("fifo.")],
          "-o FIFO: refused (exit 2, named), still a FIFO, no temporary file", (rc, err))
    rc, out, err = run([TT, "export", "--help"])
    check(rc == 0 and "Usage: tinytrace export" in out, "--help", (rc, err))


if __name__ == "__main__":
    ttproc.run_main(main, "tt-export-")
