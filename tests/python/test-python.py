#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test-python.py reader SRCDIR TINYTRACE MKRECORD MKKINDS MKDIFF MKPARTIAL RECORD_REPLAY
                  CHECKPOINT [--checkpoints MKCHECKPOINTS] [--flaky FLAKY]
test-python.py install SRCDIR TINYTRACE RECORD_REPLAY

reader: the Python reader (python/tinytrace, from the source tree) on the suite's traces, each
made in a temporary directory by the suite's own programs: mkrecord (two threads, 4 KiB
buffers, a payload split over chunks, names to escape), mkkinds (every event kind, a crash,
calls left open and abandoned), mkdiff (four threads), the examples record-replay and checkpoint,
mkcheckpoints (checkpoints and restores of two threads: the checkpoint table and epochs), flaky under `tinytrace record` (--flaky), and a trace recovered from a recording killed halfway
(no index tables). For each: the manifest and threads against `tinytrace info --json`, every
event against `tinytrace dump --json`, the arrays against the events, stats() against `tinytrace
stats --json`, the frames against the summary, the checkpoint table and each event's epoch
against `tinytrace info --json` and `dump --json`. Then what must be refused: an incomplete
trace, a flipped byte (a checksum), a cut file, another format version. All of it with numpy
and without (the pure columns), and the checksums with this package's own XXH3 as well as with
the xxhash module where there is one.

install: `pip install --no-build-isolation --no-index` of a copy of python/ into a virtual
environment (with the system's setuptools and wheel), then the installed package, imported from
outside the source tree, reads a trace.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

checks = failed = 0


def check(ok, what, detail=""):
    global checks, failed
    checks += 1
    if not ok:
        failed += 1
        print("FAIL: %s%s" % (what, ("\n    " + str(detail)[:3000]) if detail else ""))
    return ok


def run(cmd, cwd=None, stdin=None, env=None, timeout=300):
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, input=stdin, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    p.out = p.stdout.decode("utf-8", errors="replace")
    p.err = p.stderr.decode("utf-8", errors="replace")
    return p


def tool_json(tt, *args):
    p = run([tt] + list(args))
    if not check(p.returncode == 0, "tinytrace %s" % " ".join(map(str, args)), p.err):
        return None
    return json.loads(p.out)


def make_traces(d, tt, mkrecord, mkkinds, mkdiff, mkpartial, rr, cp, flaky, mkcps):
    out = []

    def made(name, cmd, stdin=None):
        p = run(cmd, cwd=d, stdin=stdin)
        path = os.path.join(d, name)
        if check(os.path.exists(path), "%s makes %s" % (os.path.basename(str(cmd[0])), name),
                 p.out[-500:] + p.err[-500:]):
            out.append(path)

    made("record.tt", [mkrecord, "record.tt", 300])
    made("kinds.tt", [mkkinds, "kinds.tt"])
    made("diff.tt", [mkdiff, "diff.tt", 4, 1500])
    made("rr.tt", [rr, "rr.tt"])
    made("cp.tt", [cp, "cp.tt"])
    if mkcps:
        made("restores.tt", [mkcps, "restores.tt"])
    if flaky:
        made("flaky.tt", [tt, "record", "-o", "flaky.tt", "--", flaky], stdin=b"5\n")
    # a recording killed halfway, recovered: no index tables
    p = subprocess.Popen([str(mkpartial), os.path.join(d, "dead.tt")], stdout=subprocess.PIPE,
                         text=True)
    for _ in range(4):
        line = p.stdout.readline()
        if not line.startswith("flushed "):
            break
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    partial = [f for f in os.listdir(d) if f.startswith("dead.tt.") and f.endswith(".partial")]
    if check(len(partial) == 1, "mkpartial leaves a partial file", os.listdir(d)):
        r = run([tt, "recover", partial[0], "-o", "recovered.tt"], cwd=d)
        if check(r.returncode == 0, "tinytrace recover", r.out + r.err):
            out.append(os.path.join(d, "recovered.tt"))
    return out


def compare_trace(tinytrace, tt, path, numpy_on):
    name = os.path.basename(path)
    info = tool_json(tt, "info", "--json", path)
    if info is None:
        return
    t = tinytrace.open(path)
    m, im = t.manifest, info["manifest"]
    for k in ("version", "flags", "block_size", "event_count", "payload_bytes", "chunk_count",
              "block_count", "largest_chunk", "largest_event", "largest_split", "thread_count",
              "object_count", "data_offset", "data_end", "file_size", "ticks_per_sec",
              "tick_origin", "realtime_origin_ns", "stall_count", "pid", "caller",
              "build_id", "threads_refused", "write_errno"):
        check(m[k] == im[k], "%s: manifest %s" % (name, k), "%r != %r" % (m[k], im[k]))
    check(m.flag_names == im["flag_names"], "%s: flag names" % name)
    check(m.lib_version_string == im["lib_version"], "%s: library version" % name)
    check("%016x" % m.events_checksum == im["events_checksum"], "%s: events checksum" % name)
    threads = [(th.id, th.os_tid, th.name_id, th.event_count, th.chunk_count, th.first_time,
                th.last_time) for th in t.threads]
    want = [(x["id"], x["os_tid"], x["name_id"], x["events"], x["chunks"], x["first_time"],
             x["last_time"]) for x in info["threads"]]
    check(threads == want, "%s: the thread table" % name, "%s\n    %s" % (threads, want))
    # names keep bytes that are not UTF-8 (surrogateescape); the tool's JSON shows U+FFFD
    names = [None if th.name is None else
             th.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
             for th in t.threads]
    check(names == [x["name"] for x in info["threads"]], "%s: thread names" % name,
          "%s / %s" % (names, [x["name"] for x in info["threads"]]))

    # every event, in recorded order, against the dump
    p = run([tt, "dump", "--json", path])
    if not check(p.returncode == 0, "%s: tinytrace dump --json" % name, p.err):
        return
    dump = [json.loads(l) for l in p.out.splitlines()]
    events = list(t.events())
    check(len(events) == len(dump) == m.event_count, "%s: %d events" % (name, len(dump)),
          "python %d, dump %d" % (len(events), len(dump)))
    bad = []
    for e, j in zip(events, dump):
        got = (e.seq, e.thread, e.time, e.kind_name, e.function, e.site, e.arg, e.addr,
               len(e.payload), e.payload[:16].hex(), e.epoch)
        exp = (j["seq"], j["thread"], j["time"], j["kind"], j["function_id"], j["site_id"],
               j["arg"], int(j["addr"], 16), j["len"], j["payload"] or "", j["epoch"])
        if got != exp or (e.kind == 10 and ("out" if e.dir else "in") != j["dir"]):
            bad.append("%s\n    %s" % (got, exp))
        if t.ns(e.time) != j["time_ns"]:
            bad.append("time_ns %d != %d" % (t.ns(e.time), j["time_ns"]))
    check(not bad, "%s: every event as the dump has it" % name, "\n    ".join(bad[:5]))
    # thread by thread, the same events
    per = sorted(events, key=lambda e: (e.thread, e.seq))
    check(list(t.events(order="thread")) == per, "%s: events in thread order" % name)
    check(list(t.events(thread=0)) == [e for e in per if e.thread == 0],
          "%s: one thread's events" % name)

    # the arrays hold the same
    for order, ref in (("recorded", events), ("thread", per)):
        a = t.arrays(order=order)
        cols = list(zip(*(list(map(int, getattr(a, c))) for c in
                          ("seq", "thread", "time", "kind", "dir", "function", "site", "arg",
                           "addr", "payload_len"))))
        exp = [(e.seq, e.thread, e.time, e.kind, e.dir, e.function, e.site, e.arg, e.addr,
                len(e.payload)) for e in ref]
        check(cols == exp, "%s: arrays (%s order, %s) equal the events"
              % (name, order, "numpy" if numpy_on else "array.array"),
              next(("%s != %s" % (x, y) for x, y in zip(cols, exp) if x != y), ""))
        pl = [a.payload(i) for i in range(len(a))]
        check(pl == [e.payload for e in ref], "%s: arrays' payloads (%s order)" % (name, order))
        ns = list(map(int, a.time_ns()))
        check(ns == [t.ns(e.time) for e in ref], "%s: arrays' times in ns" % name)
        check(list(map(int, a.epoch)) == [e.epoch for e in ref],
              "%s: arrays' epochs (%s order)" % (name, order))

    # the checkpoint table (version 4), as info has it
    got = [(c.number, c.thread, c.seq, c.epoch, t.ns(c.time), c.site, c.length,
            [list(p) for p in c.providers]) for c in t.checkpoints]
    exp = [(c["number"], c["thread"], c["seq"], c["epoch"], c["time_ns"], c["site_id"],
            c["len"], [[p["id"], p["len"]] for p in c["providers"]])
           for c in info.get("checkpoints") or []]
    check(got == exp, "%s: the checkpoint table's checkpoints" % name, "%s\n    %s" % (got, exp))
    got = [(r.epoch, r.thread, r.seq, t.ns(r.time), r.site, r.checkpoint) for r in t.restores]
    exp = [(r["epoch"], r["thread"], r["seq"], r["time_ns"], r["site_id"], r["checkpoint"])
           for r in info.get("restores") or []]
    check(got == exp, "%s: the checkpoint table's restores" % name, "%s\n    %s" % (got, exp))
    check(m.checkpoint_count == len(t.checkpoints) and m.restore_count == len(t.restores),
          "%s: the manifest's checkpoint and restore counts" % name)
    if name == "restores.tt":
        check(t.restores and max(e.epoch for e in events) == len(t.restores),
              "%s: the events reach the last epoch" % name)

    # stats against the tool's
    s = t.stats()
    if not t.has_index:
        check(s["frames"] is None and list(t.frames()) == [], "%s: no index, no frames" % name)
        kinds = {}
        for e in events:
            kinds[e.kind_name] = kinds.get(e.kind_name, 0) + 1
        check({k: v for k, v in s["kinds"].items() if v} == kinds,
              "%s: kind counts from the events" % name)
        p = run([tt, "stats", "--json", path])
        tk = json.loads(p.out).get("kinds", {}) if p.returncode == 0 else {}
        check(p.returncode == 0 and "has no index tables; built them" in p.err
              and {k: v for k, v in tk.items() if v} == kinds,
              "%s: tinytrace stats builds the tables of a trace without them, the same kind "
              "counts" % name, p.err)
        t.close()
        return
    ts = tool_json(tt, "stats", "--json", path)
    if ts is None:
        return
    check(s["events"] == ts["events"] and s["frames"] == ts["frames"],
          "%s: events and frames as stats" % name,
          "%s %s / %s %s" % (s["events"], s["frames"], ts["events"], ts["frames"]))
    check(s["kinds"] == ts["kinds"], "%s: kinds as stats" % name, "%s\n    %s"
          % (s["kinds"], ts["kinds"]))
    keys = ("id", "events", "frames", "max_depth", "crashed", "kinds", "first_ns", "last_ns")
    check([{k: x[k] for k in keys} for x in s["threads"]] ==
          [{k: x[k] for k in keys} for x in ts["threads"]], "%s: threads as stats" % name,
          "%s\n    %s" % (s["threads"], ts["threads"]))
    for f in s["functions"]:
        if f["function"] is not None:
            f["function"] = f["function"].encode("utf-8", "surrogateescape").decode("utf-8",
                                                                                 "replace")
    fkeys = ("function_id", "function", "calls", "self", "total", "longest", "longest_thread",
             "longest_frame", "max_depth", "self_ns", "total_ns", "longest_ns")
    mine = {f["function_id"]: tuple(f[k] for k in fkeys) for f in s["functions"]}
    theirs = {f["function_id"]: tuple(f[k] for k in fkeys) for f in ts["functions"]}
    check(mine == theirs, "%s: functions as stats" % name,
          next(("%s: %s / %s" % (k, mine.get(k), theirs.get(k)) for k in set(mine) | set(theirs)
                if mine.get(k) != theirs.get(k)), ""))
    # the frames, summed per function, are the summary
    frames = list(t.frames())
    by = {}
    for th in range(len(t.threads)):
        fr = [f for f in frames if f.thread == th]
        check([f.index for f in fr] == list(range(len(fr))), "%s: thread %d's frames are "
              "numbered in order" % (name, th))
        check(len(fr) == s["threads"][th]["frames"], "%s: thread %d has its frames" % (name, th))
        for f in fr:
            # direct children: the last is f.index - 1, each before the next's subtree
            child_time, c, n = 0, f.index - 1, 0
            while f.desc and c >= f.index - f.desc:
                child_time += fr[c].duration
                n += 1
                c -= fr[c].desc + 1
            check(n == f.kids, "%s: frame %d of thread %d has %d children" %
                  (name, f.index, th, f.kids))
            e = by.setdefault(f.function, [0, 0, 0, 0, 0])
            e[0] += 1
            e[1] += f.duration
            e[2] += f.duration - child_time
            e[3] = max(e[3], f.depth)
            e[4] = max(e[4], f.duration)
    summary = {f["function_id"]: [f["calls"], f["total"], f["self"], f["max_depth"],
                                  f["longest"]] for f in s["functions"]}
    check(by == summary, "%s: calls, total, self, depth and longest from the frames" % name,
          "%s\n    %s" % (by, summary))
    t.close()


def refusals(tinytrace, d, good, mkrecord):
    """What the reader must refuse, each with its own error."""
    with open(good, "rb") as f:
        data = f.read()

    def refused(name, content, cls, verify=True):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(content)
        try:
            t = tinytrace.open(path, verify=verify)
            list(t.events())
            a = t.arrays()
            len(a)
        except cls as e:
            check(path in str(e), "%s: the error names the file" % name, str(e))
            return
        except Exception as e:  # noqa: BLE001 - the wrong kind of error is a failure
            check(False, "%s: refused with %s" % (name, cls.__name__), repr(e))
            return
        check(False, "%s: refused with %s" % (name, cls.__name__), "accepted")

    # a byte of the first event chunk's body flipped
    m = bytearray(data)
    m[512 + 48 + 3] ^= 0x20
    refused("flipped.tt", bytes(m), tinytrace.ChecksumError)
    refused("cut.tt", data[:len(data) - 7], tinytrace.TruncatedError)
    refused("short.tt", data[:300], tinytrace.TruncatedError)
    m = bytearray(data)
    m[8] = 6
    refused("v6.tt", bytes(m), tinytrace.VersionError)
    refused("text.tt", b"not a trace at all " * 40, tinytrace.FormatError)
    p = run([mkrecord, "--fail-after", 65536, os.path.join(d, "incomplete.tt")], cwd=d)
    if check(p.returncode == 0, "mkrecord --fail-after", p.err):
        with open(os.path.join(d, "incomplete.tt"), "rb") as f:
            refused("incomplete2.tt", f.read(), tinytrace.IncompleteError)


def case_reader(src, tt, mkrecord, mkkinds, mkdiff, mkpartial, rr, cp, *rest):
    opts = dict(zip(rest[::2], rest[1::2]))
    flaky, mkcps = opts.get("--flaky"), opts.get("--checkpoints")
    sys.path.insert(0, os.path.join(src, "python"))
    import tinytrace
    from tinytrace import _bulk, _xxh3
    print("python %s, numpy %s, checksums by %s" % (
        sys.version.split()[0], "yes" if _bulk.np is not None else "no",
        tinytrace.hash_implementation()))
    d = tempfile.mkdtemp(prefix="tt-python-")
    try:
        traces = make_traces(d, tt, mkrecord, mkkinds, mkdiff, mkpartial, rr, cp, flaky, mkcps)
        modes = [True] if _bulk.np is None else [True, False]
        for numpy_on in modes:
            saved = _bulk.np
            if not numpy_on:
                _bulk.np = None
            try:
                for path in traces:
                    compare_trace(tinytrace, tt, path, _bulk.np is not None)
            finally:
                _bulk.np = saved
        # the package's own XXH3 on every checksum of the traces, and against xxhash
        saved = _xxh3._fast
        _xxh3._fast = None
        try:
            for path in traces:
                t = tinytrace.open(path)
                check(len(list(t.events())) == t.manifest.event_count,
                      "%s: checksums by the package's own XXH3 (%s)" % (
                          os.path.basename(path), tinytrace.hash_implementation()))
                t.close()
        finally:
            _xxh3._fast = saved
        if saved is not None:
            import random
            rng = random.Random(21)
            bad = [n for n in list(range(0, 300)) + [1023, 1024, 1025, 4097, 70000]
                   for seed in (0, rng.getrandbits(64))
                   for blob in [bytes(rng.getrandbits(8) for _ in range(n))]
                   if _xxh3.xxh3_64(blob, seed) != saved(blob, seed)]
            check(not bad, "the package's XXH3 equals the xxhash module's", bad[:5])
        if traces:
            refusals(tinytrace, d, traces[0], mkrecord)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_install(src, tt, rr):
    d = tempfile.mkdtemp(prefix="tt-python-install-")
    try:
        pkg = os.path.join(d, "python")
        shutil.copytree(os.path.join(src, "python"), pkg,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        venv = os.path.join(d, "venv")
        p = run([sys.executable, "-m", "venv", "--system-site-packages", venv])
        if not check(p.returncode == 0, "python3 -m venv", p.out + p.err):
            return
        py = os.path.join(venv, "bin", "python")
        p = run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                 "--no-cache-dir", pkg], cwd=d)
        if not check(p.returncode == 0 and "Successfully installed tinytrace" in p.out,
                     "pip install --no-build-isolation --no-index ./python", p.out + p.err):
            return
        p = run([rr, "t.tt"], cwd=d)
        check(p.returncode == 0, "a trace to read", p.err)
        code = ("import tinytrace, sys; t = tinytrace.open('t.tt'); "
                "print(tinytrace.__file__); print(t.manifest.event_count, len(list(t.events())),"
                " len(t.arrays()), t.stats()['kinds']['io'])")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        p = run([py, "-c", code], cwd=d, env=env)
        lines = p.out.splitlines()
        check(p.returncode == 0 and len(lines) == 2 and lines[0].startswith(venv) and
              lines[1] == "8 8 8 3", "the installed package reads the trace", p.out + p.err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("reader", "install"):
        sys.exit(__doc__)
    args = [os.path.abspath(a) if os.path.exists(a) else a for a in sys.argv[2:]]
    (case_reader if sys.argv[1] == "reader" else case_install)(*args)
    print("python %s: %d checks, %d failed" % (sys.argv[1], checks, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
