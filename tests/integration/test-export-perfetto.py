#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of `tinytrace export --format perfetto`.

    test-export-perfetto.py TINYTRACE MKKINDS MKDIFF SCHEMA [--flaky FLAKY PRELOAD]

Exports traces and decodes them with protoc against the committed schema subset
(tests/perfetto/trace-subset.proto, whose field numbers check-schema.py holds against the docs):
  - `protoc --decode=perfetto.protos.Trace` accepts the whole file;
  - a process track, and one thread track per thread, with the OS tid and the thread's name;
  - every sequence opens with a packet that clears its incremental state, sets its defaults
    (the thread's track, clock 64) and the clock snapshot; every later packet of it has a
    timestamp (a delta) and no track of its own;
  - every name_iid was interned on its sequence before (or in) the packet that uses it, each
    iid once, and the interned names are the trace's function names (stats --json);
  - begins and ends pair up, slices nest, times never go back: the slices are the calls the
    reference reader (`tinytrace dump --json`) shows, thread, name, start and end to the ns;
  - the slice count equals the frames of `tinytrace stats`;
  - one instant per instant event of the trace, with its category and annotations (sizes,
    sites; a sync event's object and object sequence number).
Skipped (exit 77) when protoc is not installed. Everything happens in a fresh temporary
directory, removed at the end.
"""

import functools
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict

import testwrap
import ttproc

TT, MKKINDS, MKDIFF, SCHEMA = map(os.path.abspath, sys.argv[1:5])
FLAKY = PRELOAD = None
if len(sys.argv) > 5 and sys.argv[5] == "--flaky":
    FLAKY, PRELOAD = map(os.path.abspath, sys.argv[6:8])
TIMEOUT = testwrap.timeout(240)
check = ttproc.check
run = functools.partial(ttproc.run_text, timeout=TIMEOUT)


def parse_text(text):
    """protoc's text format -> nested lists of (key, value); a message is a list."""
    toks, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "{}":
            toks.append(c)
            i += 1
        elif c == '"':
            j, buf = i + 1, bytearray()
            while text[j] != '"':
                if text[j] == "\\":
                    nxt = text[j + 1]
                    if nxt in "01234567":
                        buf.append(int(text[j + 1:j + 4], 8))
                        j += 4
                        continue
                    buf += {"n": b"\n", "t": b"\t", "r": b"\r", '"': b'"', "'": b"'",
                            "\\": b"\\"}.get(nxt, nxt.encode())
                    j += 2
                else:
                    buf += text[j].encode("utf-8")
                    j += 1
            toks.append(("str", buf.decode("utf-8", "replace")))
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in "{}":
                j += 1
            toks.append(text[i:j])
            i = j
    pos = 0

    def message():
        nonlocal pos
        out = []
        while pos < len(toks) and toks[pos] != "}":
            key = toks[pos].rstrip(":")
            pos += 1
            if toks[pos] == "{":
                pos += 1
                out.append((key, message()))
                pos += 1
            else:
                v = toks[pos]
                pos += 1
                out.append((key, v[1] if isinstance(v, tuple) else
                            (int(v) if v.lstrip("-").isdigit() else v)))
        return out
    return message()


def get(msg, key, default=None):
    for k, v in msg:
        if k == key:
            return v
    return default


def getall(msg, key):
    return [v for k, v in msg if k == key]


def decode(path):
    with open(path, "rb") as f:
        p = subprocess.run(["protoc", "--decode=perfetto.protos.Trace",
                            "-I" + os.path.dirname(SCHEMA), SCHEMA],
                           stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode()


def reference_calls(trace):
    """Counter of (thread, name, start_ns, end_ns) as export's rules make them of dump --json."""
    rc, out, err = run([TT, "dump", "--json", trace])
    stacks, last, prev, calls = defaultdict(list), {}, {}, Counter()
    for line in out.splitlines():
        e = json.loads(line)
        t = e["thread"]
        last[t] = max(last.get(t, 0), e["time_ns"])
        if e["kind"] == "enter":
            if t in prev and last[t] <= prev[t]:
                last[t] = prev[t] + 1
            prev[t] = last[t]
            stacks[t].append((e["function"], last[t]))
        elif e["kind"] == "exit":
            st = stacks[t]
            for k in range(len(st) - 1, max(len(st) - 256, 0) - 1, -1):
                if st[k][0] == e["function"]:
                    while len(st) > k:
                        name, start = st.pop()
                        calls[(t, name, start, last[t])] += 1
                    break
    for t, st in stacks.items():
        for name, start in st:
            calls[(t, name, start, last[t])] += 1
    return calls


def check_export(label, trace, d):
    out = os.path.join(d, label + ".pftrace")
    rc, o, err = run([TT, "export", "--format", "perfetto", "-o", out, "--json", trace])
    if not check(rc == 0, label + ": export exits 0", (rc, err)):
        return None
    summary = json.loads(o)
    rc, text, err = decode(out)
    if not check(rc == 0 and text, label + ": protoc --decode=perfetto.protos.Trace reads it",
                 err[:2000]):
        return None
    packets = getall(parse_text(text), "packet")
    rc, o, err = run([TT, "info", "--json", trace])
    info = json.loads(o)
    rc, o, err = run([TT, "stats", "--json", trace])
    stats = json.loads(o)

    # tracks
    tracks = [get(p, "track_descriptor") for p in packets if get(p, "track_descriptor")]
    proc = [t for t in tracks if get(t, "process")]
    threads = {get(t, "uuid"): get(t, "thread") for t in tracks if get(t, "thread")}
    check(len(proc) == 1 and get(get(proc[0], "process"), "pid") == info["manifest"]["pid"],
          label + ": one process track with the recorded pid", proc)
    os_tids, seen = {}, set()
    for t in info["threads"]:  # export's rule: a reused or missing OS tid is 0x40000000 + id
        tid = t["os_tid"] if t["os_tid"] and t["os_tid"] not in seen else 0x40000000 + t["id"]
        seen.add(tid)
        os_tids[2 + t["id"]] = tid
    check({u: get(t, "tid") for u, t in threads.items()} ==
          {u: tid for u, tid in os_tids.items() if u in threads} and len(threads) > 0,
          label + ": a thread track per thread, with its OS tid", threads)

    # sequences
    seqs = defaultdict(list)
    for p in packets:
        s = get(p, "trusted_packet_sequence_id")
        if s is not None:
            seqs[s].append(p)
    errs = []
    slices, stack, names_of_seq = Counter(), defaultdict(list), {}
    instants = []
    for s, ps in seqs.items():
        first = ps[0]
        defaults = get(first, "trace_packet_defaults")
        clocks = getall(get(first, "clock_snapshot", []), "clocks")
        inc = [c for c in clocks if get(c, "clock_id") == 64]
        if not (get(first, "sequence_flags") == 1 and defaults and
                get(defaults, "timestamp_clock_id") == 64 and inc and
                get(inc[0], "is_incremental") == "true"):
            errs.append("sequence %d does not open with its state and clock" % s)
            continue
        track = get(get(defaults, "track_event_defaults"), "track_uuid")
        thread = track - 2
        now = get(inc[0], "timestamp")
        interned = {}
        for p in ps[1:]:
            if get(p, "timestamp") is None:
                errs.append("sequence %d: a packet without a timestamp" % s)
                continue
            now += get(p, "timestamp")
            for en in getall(get(p, "interned_data", []), "event_names"):
                iid = get(en, "iid")
                if iid in interned:
                    errs.append("sequence %d: iid %d interned twice" % (s, iid))
                interned[iid] = get(en, "name")
            te = get(p, "track_event")
            if te is None:
                continue
            kind = get(te, "type")
            if kind == "TYPE_SLICE_BEGIN":
                iid = get(te, "name_iid")
                if iid not in interned:
                    errs.append("sequence %d: name_iid %s used before it is interned" % (s, iid))
                stack[s].append((interned.get(iid), now))
            elif kind == "TYPE_SLICE_END":
                if not stack[s]:
                    errs.append("sequence %d: an end without a begin" % s)
                    continue
                name, start = stack[s].pop()
                slices[(thread, name, start, now)] += 1
            elif kind == "TYPE_INSTANT":
                instants.append((thread, get(te, "categories"), te))
        names_of_seq[s] = interned
        if stack[s]:
            errs.append("sequence %d: %d slices never end" % (s, len(stack[s])))
    check(not errs, label + ": sequences open right, iids interned before use, times add up",
          "\n".join(errs[:20]))

    want = reference_calls(trace)
    check(slices == want, label + ": the slices are the calls dump shows (%d)" %
          sum(want.values()),
          "missing %r\nextra %r" % (list((want - slices).items())[:5],
                                    list((slices - want).items())[:5]))
    check(sum(slices.values()) == stats["frames"] == summary["frames"],
          label + ": slice count = frames in stats (%d)" % stats["frames"],
          (sum(slices.values()), stats["frames"], summary["frames"]))
    fnames = {f["function"] for f in stats["functions"]}
    iname = set()
    for m in names_of_seq.values():
        iname |= set(m.values())
    check(iname == fnames, label + ": the interned names are the function names",
          (sorted(iname ^ fnames)[:10]))
    kinds = {k: v for k, v in stats["kinds"].items()
             if k not in ("session-start", "session-end", "thread-start", "thread-end",
                          "enter", "exit") and v}
    got = Counter(c for t, c, te in instants)
    check(dict(got) == kinds, label + ": an instant per instant event, by kind", (got, kinds))
    return instants


def annotations(te):
    out = {}
    for a in getall(te, "debug_annotations"):
        for k in ("uint_value", "string_value", "pointer_value"):
            if get(a, k) is not None:
                out[get(a, "name")] = get(a, k)
    return out


def main(d):
    if shutil.which("protoc") is None:
        print("skip: protoc is not installed (Debian: protobuf-compiler)")
        sys.exit(77)
    k = os.path.join(d, "kinds.tt")
    rc, out, err = run([MKKINDS, k])
    if check(rc == 0, "mkkinds records", err):
        inst = check_export("kinds", k, d)
        if inst is not None:
            allocs = [annotations(te) for t, c, te in inst if c == "alloc"]
            check(allocs and all("size" in a and "addr" in a for a in allocs),
                  "kinds: an alloc carries its size and address", allocs[:3])
            io = [annotations(te) for t, c, te in inst if c == "io"]
            check(io and all("channel" in a and "dir" in a and "payload" in a for a in io),
                  "kinds: an io event carries its channel, direction and bytes", io[:3])
    m = os.path.join(d, "mkdiff.tt")
    rc, out, err = run([MKDIFF, m, 4, 300])
    if check(rc == 0, "mkdiff records", err):
        check_export("mkdiff", m, d)
    if FLAKY:
        env = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
        f = os.path.join(d, "flaky.tt")
        rc, out, err = run([TT, "record", "-o", f, "--", FLAKY], env=env, stdin=b"7\n")
        if check(rc in (0, 1) and os.path.exists(f), "flaky: recorded", (rc, err)):
            inst = check_export("flaky", f, d)
            syncs = [annotations(te) for t, c, te in inst or [] if c == "sync"]
            check(syncs and all("object" in a and "object_seq" in a and "site" in a
                                for a in syncs),
                  "flaky: sync events carry operation (site), object and object sequence",
                  syncs[:3])
    # the schema subset must be able to refuse: a file that is not a trace
    bad = os.path.join(d, "bad.pftrace")
    with open(bad, "wb") as fh:
        fh.write(b"\x0a\x05\x5a\x03\x48")
    rc, text, err = decode(bad)
    check(rc != 0, "protoc refuses a cut packet (the decode check can fail)", text)


if __name__ == "__main__":
    ttproc.run_main(main, "tt-export-perfetto-")
