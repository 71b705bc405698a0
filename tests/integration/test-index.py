#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of the commands that answer from the index tables.

    test-index.py TINYTRACE MKRECORD [MKPARTIAL [MKDIFF]] [--no-preload]

Records mkrecord's two-thread trace, reads all its events once with `tinytrace dump --json`
and recomputes from them what `stats`, `tree` and `dump --from` must print: per-function calls,
total and self time, the call tree with durations, folded stacks, and the events from any
sequence number or time. A trace of mkdiff, whose calls nest up to 300 deep, checks the call
path `tree --function` prints for every call, and `tinytrace index` must build both traces'
tables again byte for byte. Then a recovered copy (which has no index tables) is read from the
start by dump --from; stats and tree build its tables in a temporary copy and say so; `tinytrace
index` writes them into it (verify --frames checks every row, the permissions stay) and refuses
a damaged copy with its offset, leaving it as it was. One recorded with `record --no-index` is
read by replay, verify and dump as usual, and by stats, tree and report as the copy `index -o`
makes (not with --no-preload: a sanitizer build's runtime cannot be preloaded into date). No
progress line may appear: stderr is not a terminal here.

Every check runs; failures are listed at the end; exit status 1 if any failed. Everything
happens in a fresh temporary directory, removed at the end.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step

TIMEOUT = testwrap.timeout(120)
failures = []


def check(cond, what, detail=""):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what + (("\n     " + detail.replace("\n", "\n     ")) if detail else ""))
        failures.append(what)
    return cond


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, timeout=TIMEOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_unwrapped(*args):
    """run(), never under the valgrind step's wrapper: for what records or replays a program
    (under valgrind --trace-children=yes, its launcher's exec would end the recording)"""
    p = testwrap.Unwrapped([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=TIMEOUT)
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def ns(ticks, tps):
    return ticks * 1000000000 // tps


PRELOAD = "--no-preload" not in sys.argv[1:]


def main():
    sys.argv = [a for a in sys.argv if a != "--no-preload"]
    tt, mkrecord = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="tinytrace-index-")
    try:
        test(tt, mkrecord, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed:\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("all checks passed")
    return 0


def frames_from_events(events):
    """Per thread, the frames in post-order: (fn, depth, start, end, parent-less children)."""
    out = {}
    for t in sorted({e["thread"] for e in events}):
        stack, frames = [], []
        for e in (e for e in events if e["thread"] == t):
            if e["kind"] == "enter":
                stack.append({"fn": e["function"], "start": e["time"], "kids": [],
                              "depth": len(stack), "parent": stack[-1] if stack else None})
            elif e["kind"] == "exit":
                f = stack.pop()
                f["end"] = e["time"]
                f["index"] = len(frames)
                frames.append(f)
                if stack:
                    stack[-1]["kids"].append(f["index"])
        assert not stack, "mkrecord leaves no call open"
        out[t] = frames
    return out


def test(tt, mkrecord, tmp):
    trace = os.path.join(tmp, "run.tt")
    p = subprocess.run([mkrecord, trace, "600"], capture_output=True, timeout=TIMEOUT)
    if not check(p.returncode == 0, "mkrecord records a trace", p.stderr.decode()):
        return
    rc, out, err = run(tt, "info", "--json", trace)
    info = json.loads(out)
    tps = info["ticks_per_sec"] if "ticks_per_sec" in info else info["manifest"]["ticks_per_sec"]
    rc, out, err = run(tt, "dump", "--json", trace)
    check(rc == 0, "dump --json reads the whole trace", err)
    events = [json.loads(line) for line in out.splitlines()]
    full_text = run(tt, "dump", trace)[1].splitlines()
    check(len(full_text) == len(events), "text and JSON dumps have the same events")
    frames = frames_from_events(events)
    names = {0: "main", 1: 'worker "q"\\x09\\\\\u00e9\\xff'}

    # ---- stats ----
    rc, out, err = run(tt, "verify", "--frames", trace)
    check(rc == 0 and out.startswith(trace + ": ok"), "verify --frames: every frame row checked",
          (rc, out, err))
    again = os.path.join(tmp, "again.tt")
    rc, out, err = run(tt, "index", "-o", again, trace)
    with open(trace, "rb") as a, open(again, "rb") as b:
        check(rc == 0 and a.read() == b.read(), "index builds the recording's own tables "
              "again, byte for byte", out + err)
    rc, out, err = run(tt, "stats", "--json", trace)
    check(rc == 0 and err == "", "stats --json exits 0, nothing on stderr", err)
    st = json.loads(out)
    want = {}
    for t, fr in frames.items():
        for f in fr:
            w = want.setdefault(f["fn"], {"calls": 0, "total": 0, "self": 0, "longest": 0})
            dur = f["end"] - f["start"]
            kids = sum(fr[k]["end"] - fr[k]["start"] for k in f["kids"])
            w["calls"] += 1
            w["total"] += dur
            w["self"] += dur - kids
            w["longest"] = max(w["longest"], dur)
    got = {f["function"]: f for f in st["functions"]}
    check(set(got) == set(want), "stats lists every called function once",
          "%s vs %s" % (sorted(got), sorted(want)))
    for fn, w in want.items():
        g = got.get(fn, {})
        check(all(g.get(k) == w[k] for k in ("calls", "total", "self", "longest")),
              "stats: %s's calls, total, self and longest match the events" % fn,
              "%s vs %s" % (g, w))
    selfs = [f["self"] for f in st["functions"]]
    check(selfs == sorted(selfs, reverse=True), "stats sorts functions by self time")
    kinds = {}
    for e in events:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    check(all(st["kinds"].get(k, 0) == v for k, v in kinds.items()) and
          sum(st["kinds"].values()) == len(events), "stats: per-kind counts match the events")
    for th in st["threads"]:
        n = sum(1 for e in events if e["thread"] == th["id"])
        check(th["events"] == n and th["frames"] == len(frames.get(th["id"], [])),
              "stats: thread %d's events and frames" % th["id"])
    rc, out, err = run(tt, "stats", trace)
    check(rc == 0 and "functions (by self time)" in out and "compute" in out,
          "stats prints a text table", out[:500])

    # ---- tree ----
    def expected_tree(t, depth=None, min_ticks=0):
        fr = frames[t]
        lines = []
        roots, i = [], len(fr) - 1
        # top-level calls: the frames of depth 0, in order
        roots = [f for f in fr if f["depth"] == 0]

        def walk(f, level):
            if f["end"] - f["start"] < min_ticks:
                return
            lines.append("  " * (level + 1) + f["fn"] + " %d ns" % ns(f["end"] - f["start"], tps))
            if depth is not None and level + 1 >= depth:
                return
            for k in f["kids"]:
                walk(fr[k], level + 1)
        for r in roots:
            walk(r, 0)
        return lines

    rc, out, err = run(tt, "tree", "--thread", "0", trace)
    got_lines = out.splitlines()
    check(rc == 0 and got_lines[0].startswith("thread 0 main: %d calls" % len(frames[0])),
          "tree --thread 0 starts with the thread line", out[:300])
    check(got_lines[1:] == expected_tree(0), "tree --thread 0 is the call tree of the events",
          "\n".join(got_lines[1:6]) + "\n---\n" + "\n".join(expected_tree(0)[:5]))
    rc, out, err = run(tt, "tree", "--depth", "1", trace)
    exp = []
    for t in sorted(frames):
        exp.append(None)
        exp += expected_tree(t, depth=1)
    got_lines = [None if l.startswith("thread ") else l for l in out.splitlines()]
    check(rc == 0 and got_lines == exp, "tree --depth 1 shows only the top-level calls", out[:400])
    durs = sorted(f["end"] - f["start"] for f in frames[0])
    cut = durs[len(durs) // 2]
    cut_ns = ns(cut, tps) + 1
    cut_ticks = -(-cut_ns * tps // 1000000000)
    rc, out, err = run(tt, "tree", "--thread", "0", "--min-duration", "%dns" % cut_ns, trace)
    check(rc == 0 and out.splitlines()[1:] == expected_tree(0, min_ticks=cut_ticks),
          "tree --min-duration drops the shorter calls and their subtrees")
    rc, out, err = run(tt, "tree", "--function", "compute", "--depth", "1", trace)
    n_compute = sum(1 for f in frames[0] if f["fn"] == "compute")
    heads = [l for l in out.splitlines() if l.startswith("thread 0 frame")]
    check(rc == 0 and len(heads) == n_compute and all(h.endswith(": main_loop > compute")
                                                       for h in heads),
          "tree --function lists every call with its call path", out[:300])
    rc, out, err = run(tt, "tree", "--folded", trace)
    folded = {}
    for line in out.splitlines():
        stack, _, val = line.rpartition(" ")
        folded[stack] = int(val)
    exp = {}
    for t, fr in frames.items():
        def path(f):
            chain, cur = [], f
            return chain
        # recompute stacks top-down
        def walk(f, prefix):
            p = prefix + ";" + f["fn"]
            kids = sum(fr[k]["end"] - fr[k]["start"] for k in f["kids"])
            exp[p] = exp.get(p, 0) + (f["end"] - f["start"] - kids)
            for k in f["kids"]:
                walk(fr[k], p)
        for f in fr:
            if f["depth"] == 0:
                walk(f, names[t])
    exp_ns = {k: ns(v, tps) for k, v in exp.items() if v}
    check(rc == 0 and folded == exp_ns, "tree --folded: self time per call path",
          "%s\n---\n%s" % (sorted(folded.items())[:4], sorted(exp_ns.items())[:4]))
    rc, out, err = run(tt, "tree", "--function", "no_such_function", trace)
    check(rc == 2 and "no_such_function" in err, "tree --function of an unknown name: exit 2", err)

    # ---- dump --from ----
    n = len(full_text)
    for seq in (0, 1, 4095, 4096, 4097, n // 3, n // 2 + 17, n - 5):
        rc, out, err = run(tt, "dump", "--from", seq, "--count", 40, trace)
        check(rc == 0 and out.splitlines() == full_text[seq:seq + 40],
              "dump --from %d --count 40 equals lines %d.. of the full dump" % (seq, seq), err)
    for seq in (0, 999, 5000):
        for t in (0, 1):
            rc, out, err = run(tt, "dump", "--thread", t, "--from", seq, "--count", 25, trace)
            exp = [l for l in full_text if l.split()[1] == str(t) and int(l.split()[0]) >= seq][:25]
            check(rc == 0 and out.splitlines() == exp,
                  "dump --thread %d --from %d equals that thread's events from seq %d" % (t, seq, seq))
    for k in (0, n // 4, n // 2, n - 2):
        when = events[k]["time_ns"]
        ticks = -(-when * tps // 1000000000)
        rc, out, err = run(tt, "dump", "--json", "--from", "%dns" % when, "--count", 30, trace)
        exp = [e for e in events if e["time"] >= ticks][:30]
        got = [json.loads(l) for l in out.splitlines()]
        check(rc == 0 and got == exp, "dump --from %dns equals the events at or after it" % when,
              err)
    rc, out, err = run(tt, "dump", "--from", "12 parsecs", trace)
    check(rc == 2, "dump --from with a bad value: usage error", err)

    # ---- tree --function: the call path of every call ----
    if len(sys.argv) > 4:
        deep = os.path.join(tmp, "deep.tt")
        p = subprocess.run([sys.argv[4], deep, "2", "30", "--deep", "300"], capture_output=True,
                           timeout=TIMEOUT)
        if check(p.returncode == 0, "mkdiff records a trace with deep calls", p.stderr.decode()):
            again = os.path.join(tmp, "deep-again.tt")
            rc, out, err = run(tt, "index", "-o", again, deep)
            with open(deep, "rb") as a, open(again, "rb") as b:
                check(rc == 0 and a.read() == b.read(), "index builds the deep trace's tables "
                      "again, byte for byte", out + err)
            dev = [json.loads(l) for l in run(tt, "dump", "--json", deep)[1].splitlines()]
            dframes = frames_from_events(dev)
            for fn in ("rec", "alpha", "iter", "main_run"):
                exp = []
                for t, fr in sorted(dframes.items()):
                    for f in fr:
                        if f["fn"] != fn:
                            continue
                        path, a = [], f["parent"]
                        while a is not None:
                            path.append(a["fn"])
                            a = a["parent"]
                        head = "thread %d frame %d:" % (t, f["index"])
                        if len(path) > 256:
                            head += " ..."
                        exp.append(head + "".join(" %s >" % n for n in reversed(path[:256])) +
                                   " " + fn)
                rc, out, err = run(tt, "tree", "--function", fn, "--depth", "1", deep)
                heads = [l for l in out.splitlines() if l.startswith("thread ")]
                check(rc == 0 and heads == exp and len(exp) > 0,
                      "tree --function %s: the call path of each of its %d calls" % (fn, len(exp)),
                      "\n".join(a + "\n  vs " + b for a, b in zip(heads, exp) if a != b)[:600]
                      + (err if rc else ""))

    # ---- a recovered trace has no index tables ----
    if len(sys.argv) > 3:
        dead = os.path.join(tmp, "dead.tt")
        p = subprocess.Popen([sys.argv[3], dead], stdout=subprocess.PIPE, text=True)
        for _ in range(3):  # three batches written, then SIGKILL
            line = p.stdout.readline()
            check(line.startswith("flushed "), "mkpartial writes a batch", line)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        partial = [f for f in os.listdir(tmp) if f.endswith(".partial")]
        rec = os.path.join(tmp, "recovered.tt")
        rc, out, err = run(tt, "recover", "-o", rec, os.path.join(tmp, partial[0]))
        if check(rc == 0, "recover saves the chunks of a dead run", out + err):
            rc, out, err = run(tt, "verify", rec)
            check(rc == 0, "the recovered trace verifies", out + err)
            rc, out, err = run(tt, "dump", "--from", "10", "--count", "5", rec)
            full = run(tt, "dump", rec)[1].splitlines()
            check(rc == 0 and out.splitlines() == full[10:15] and "reading from the start" in err,
                  "dump --from on a trace without index reads from the start", err)
            rc, out1, err1 = run(tt, "stats", rec)
            check(rc == 0 and "has no index tables; built them for this command" in err1
                  and rec in err1, "stats on a recovered trace builds its tables in a copy, "
                  "and says so", err1)
            rc, tree1, err = run(tt, "tree", rec)
            check(rc == 0 and tree1, "tree on a recovered trace", err)
            check(not [f for f in os.listdir(tmp) if ("partial" in f and not f.startswith("dead.tt"))
                     or f.endswith(".tmp")]
                  and not os.path.exists(os.path.join(tmp, "recovered.tt.index")),
                  "the copy leaves nothing beside the trace", str(os.listdir(tmp)))
            with open(rec, "rb") as f:
                before = f.read()
            os.chmod(rec, 0o640)
            rc, out, err = run(tt, "index", rec)
            check(rc == 0 and "index tables of" in out, "index writes the tables into the "
                  "recovered trace", out + err)
            rc, out, err = run(tt, "verify", "--frames", rec)
            check(rc == 0, "the recovered trace with its tables verifies, every frame row "
                  "checked against the events", out + err)
            check(os.stat(rec).st_mode & 0o777 == 0o640, "index in place keeps the file's "
                  "permissions", oct(os.stat(rec).st_mode))
            rc, out2, err2 = run(tt, "stats", rec)
            check(rc == 0 and out2 == out1 and err2 == "", "stats of the indexed trace: what "
                  "the copy gave, no note", err2)
            check(run(tt, "tree", rec)[1] == tree1, "tree of the indexed trace: what the copy "
                  "gave")
            rc, out, err = run(tt, "index", rec)
            check(rc == 0 and "has its index tables already" in out, "index leaves an indexed "
                  "trace alone", out + err)
            # a damaged event chunk: refused with its offset, and the trace is left as it was
            bad = os.path.join(tmp, "bad.tt")
            with open(bad, "wb") as f:
                f.write(before[:600] + bytes([before[600] ^ 0x40]) + before[601:])
            rc, out, err = run(tt, "index", bad)
            with open(bad, "rb") as f:
                after = f.read()
            check(rc == 3 and "bad.tt" in err and "offset" in err and after[600] != before[600]
                  and len(after) == len(before),
                  "index of a damaged trace: exit 3, names the file and the offset, leaves it",
                  "%d %s" % (rc, err))
            rc, out, err = run(tt, "stats", bad)
            check(rc == 3 and "building them failed" in err and "offset" in err,
                  "stats of a damaged trace without tables: exit 3, says where", err)
            check(not [f for f in os.listdir(tmp) if ("partial" in f and not f.startswith("dead.tt"))
                     or f.endswith(".tmp")],
                  "a refused index leaves no temporary file", str(os.listdir(tmp)))

    # ---- a trace recorded with --no-index has none either (the readers run under the
    # valgrind step's wrapper, record and replay do not) ----
    prog = shutil.which("date")
    if not PRELOAD:
        print("skip record --no-index of date: the runtime of a sanitizer build is not "
              "preloaded")
    elif check(prog is not None, "date is on PATH"):
        plain, bare = os.path.join(tmp, "plain.tt"), os.path.join(tmp, "bare.tt")
        rc1, _, err1 = run_unwrapped(tt, "record", "-q", "--index", "-o", plain, "--", prog, "+%N")
        rc2, out2, err2 = run_unwrapped(tt, "record", "-q", "-o", bare, "--", prog, "+%N")
        if check(rc1 == 0 and rc2 == 0, "record with --index and without", err1 + err2):
            info = {}
            for name, path in (("plain", plain), ("bare", bare)):
                rc, out, err = run(tt, "info", "--json", path)
                info[name] = json.loads(out)["manifest"] if rc == 0 else {}
            check(info["plain"].get("index_offset", 0) != 0
                  and info["bare"].get("index_offset", 1) == 0,
                  "by default index_offset 0, --index writes the tables",
                  "%s / %s" % (info["plain"].get("index_offset"), info["bare"].get("index_offset")))
            rc, out, err = run(tt, "info", bare)
            check(rc == 0 and "index tables:     none (recorded without them)" in out,
                  "info says the --no-index trace has no index tables", out + err)
            copy = os.path.join(tmp, "bare-indexed.tt")
            rc, out, err = run(tt, "index", "-o", copy, bare)
            check(rc == 0, "index -o writes an indexed copy", out + err)
            rc, out, err = run(tt, "index", "-o", copy, bare)
            check(rc == 2 and "exists" in err, "index -o refuses an existing OUT", err)
            for verb in ("stats", "tree", "report"):
                rc, out, err = run(tt, verb, bare)
                check(rc == 0 and "bare.tt has no index tables; built them" in err
                      and "<memory>" not in err and "/trace" not in err,
                      "%s on a --no-index trace builds the tables, says so, names the file"
                      % verb, err)
                rc3, out3, err3 = run(tt, verb, copy)
                check(rc3 == 0 and err3 == "" and out3.replace(copy, bare) == out,
                      "%s of the indexed copy: the same as from the temporary one" % verb,
                      err3 + out3[:300] + "\n vs \n" + out[:300])
                rc, out, err = run(tt, verb, plain)
                check(rc == 0, "%s on the same program recorded with the tables" % verb, err)
            rc, out, err = run(tt, "verify", bare)
            check(rc == 0, "the --no-index trace verifies", out + err)
            rc, out, err = run_unwrapped(tt, "replay", bare)
            check(rc == 0 and out == out2, "the --no-index trace replays, the same output",
                  "%r vs %r\n%s" % (out, out2, err))
            rc, out, err = run(tt, "dump", bare)
            check(rc == 0 and len(out.splitlines()) == info["bare"].get("event_count", -1),
                  "dump prints every event of the --no-index trace",
                  "%d lines, %s events\n%s" % (len(out.splitlines()),
                                                 info["bare"].get("event_count"), err))
            # the tables written into a signed trace: it is signed again, and replay still
            # trusts it (the manifest is new; an unsigned copy would be refused)
            rc, out, err = run(tt, "index", bare)
            check(rc == 0, "index of record's own trace, in place", out + err)
            rc, out, err = run_unwrapped(tt, "replay", bare)
            check(rc == 0 and out == out2, "the indexed trace is still trusted: it replays its "
                  "recorded command", "%r vs %r\n%s" % (out, out2, err))


if __name__ == "__main__":
    sys.exit(main())
