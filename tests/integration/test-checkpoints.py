#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`tinytrace info` and `tinytrace dump --checkpoints` over a trace with checkpoints and restores
(mkcheckpoints), and the epoch that `dump` shows for every event (docs/FORMAT.md §15).

Usage: test-checkpoints.py TINYTRACE MKCHECKPOINTS MKRECORD
Each check runs in its own temporary directory, removed afterwards.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

TT, MKCP, MKREC = map(os.path.abspath, sys.argv[1:4])
failures = []
passed = 0


def run(args, timeout=60):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def check(name, fn):
    global passed
    d = tempfile.mkdtemp(prefix="tt-cp-")
    try:
        fn(d)
        passed += 1
        print(f"ok   {name}")
    except (AssertionError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        failures.append(name)
        print(f"FAIL {name}: {e}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make(d):
    trace = os.path.join(d, "cp.tt")
    r = run([MKCP, trace])
    assert r.returncode == 0, f"mkcheckpoints: {r.returncode} {r.stderr}"
    return trace, json.loads(r.stdout)


def info_lists_the_checkpoints_and_the_restores(d):
    trace, want = make(d)
    r = run([TT, "info", "--json", trace])
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    m = info["manifest"]
    assert m["version"] == 5, m["version"]
    assert m["checkpoint_count"] == len(want["checkpoints"]), m
    assert m["restore_count"] == len(want["restores"]), m
    got = [{"number": c["number"], "thread": c["thread"], "epoch": c["epoch"],
            "providers": [[p["id"], p["len"]] for p in c["providers"]]}
           for c in info["checkpoints"]]
    assert got == want["checkpoints"], f"{got}\n!= {want['checkpoints']}"
    got = [{"epoch": r["epoch"], "checkpoint": r["checkpoint"]} for r in info["restores"]]
    assert got == want["restores"], f"{got} != {want['restores']}"
    assert all(c["site"] in ("step", "worker") for c in info["checkpoints"]), info
    assert all(r["site"] == "undo" for r in info["restores"]), info
    text = run([TT, "info", trace])
    assert text.returncode == 0, text.stderr
    assert f"checkpoints:      {len(want['checkpoints'])}, restores {len(want['restores'])}" \
        in text.stdout, text.stdout
    assert "7:8 8:16" in text.stdout, text.stdout


def dump_checkpoints_is_the_table_in_recorded_order(d):
    trace, want = make(d)
    r = run([TT, "dump", "--checkpoints", "--json", trace])
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    cps = [x for x in rows if "checkpoint" in x and "restore" not in x]
    rss = [x for x in rows if "restore" in x]
    assert [c["checkpoint"] for c in cps] == list(range(len(want["checkpoints"]))), cps
    assert [x["restore"] for x in rss] == [w["epoch"] for w in want["restores"]], rss
    keys = [(x["time"], x["thread"], x["seq"]) for x in rows]
    assert keys == sorted(keys), "not in the recorded order"
    # a restore is the first event of its epoch; the checkpoint it names came before it
    for x in rss:
        c = cps[x["checkpoint"]]
        assert (c["time"], c["thread"], c["seq"]) < (x["time"], x["thread"], x["seq"]), x
    text = run([TT, "dump", "--checkpoints", trace])
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(rows), lines
    first = lines[0].split()
    assert first[0] == "checkpoint" and first[1] == "0" and first[-1] == "7:8,8:16", lines[0]
    assert any(l.startswith("restore 1 0 ") and l.endswith(" undo 2") for l in lines), lines
    bad = run([TT, "dump", "--checkpoints", "--thread", "0", trace])
    assert bad.returncode == 2, f"--checkpoints --thread: {bad.returncode}"


def dump_shows_every_events_epoch(d):
    trace, want = make(d)
    js = run([TT, "dump", "--json", trace])
    assert js.returncode == 0, js.stderr
    events = [json.loads(line) for line in js.stdout.splitlines()]
    text = run([TT, "dump", trace])
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(events)
    epoch = 0
    for ev, line in zip(events, lines):
        if ev["kind"] == "restore":
            epoch = ev["arg"]
        assert ev["epoch"] == epoch, f"{ev} after {epoch} restores"
        f = line.split()
        assert int(f[0]) == epoch and int(f[1]) == ev["seq"] and int(f[2]) == ev["thread"], line
    assert epoch == len(want["restores"])


def a_trace_without_checkpoints_says_so(d):
    trace = os.path.join(d, "plain.tt")
    r = run([MKREC, trace])
    assert r.returncode == 0, r.stderr
    c = run([TT, "dump", "--checkpoints", trace])
    assert c.returncode == 0 and c.stdout == "", (c.returncode, c.stdout)
    assert "no checkpoint table" in c.stderr, c.stderr
    text = run([TT, "dump", trace])
    assert text.returncode == 0
    # no restores: no epoch column, the line begins with the sequence number
    assert text.stdout.splitlines()[0].split()[0] == "0", text.stdout.splitlines()[0]
    i = run([TT, "info", trace])
    assert "checkpoints:      none" in i.stdout, i.stdout



def an_index_built_afterwards_carries_the_checkpoint_table(d):
    """tinytrace index of a recording without the index tables: the checkpoint table is
    carried over, each row pointing at its event's chunk in the new file (verify checks it),
    and every checkpoint, restore and epoch reads as before; rebuilding the index of a trace
    that has it gives the same file, byte for byte"""
    bare = os.path.join(d, "bare.tt")
    r = run([MKCP, bare, "--no-index"])
    assert r.returncode == 0, f"mkcheckpoints --no-index: {r.returncode} {r.stderr}"
    assert "none (recorded without them)" in run([TT, "info", bare]).stdout
    before = run([TT, "dump", "--checkpoints", "--json", bare])
    epochs = run([TT, "dump", "--json", bare])
    assert before.returncode == 0 and before.stdout, before.stderr
    r = run([TT, "index", bare])
    assert r.returncode == 0 and "index tables of" in r.stdout, (r.returncode, r.stdout, r.stderr)
    v = run([TT, "verify", "--frames", bare])
    assert v.returncode == 0, v.stdout + v.stderr
    assert run([TT, "dump", "--checkpoints", "--json", bare]).stdout == before.stdout
    assert run([TT, "dump", "--json", bare]).stdout == epochs.stdout
    i = run([TT, "info", bare]).stdout
    assert "index tables:     offset" in i and "checkpoints:      7, restores 2" in i, i
    trace, _ = make(d)
    again = os.path.join(d, "again.tt")
    r = run([TT, "index", "-o", again, trace])
    assert r.returncode == 0, r.stderr
    with open(trace, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read(), "the index built again differs from the recording's"

for name, fn in list(globals().items()):
    if callable(fn) and fn.__module__ == "__main__" and name not in ("run", "check", "make") \
            and fn.__code__.co_argcount == 1:
        check(name, fn)
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
