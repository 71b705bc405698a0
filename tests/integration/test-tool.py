#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of the tinytrace command.

    test-tool.py TINYTRACE MKRECORD [--incomplete]

Records a two-thread trace with mkrecord (which also prints, as JSON Lines, every event it
asked the library to record), then drives `tinytrace` over it: verify, info, dump in its text and
JSON forms and with filters, checked against what mkrecord recorded; then over damaged copies
(a flipped byte, truncations, garbage, an empty file, a missing file), where the exit codes and
the messages must say what is wrong and where; then bad command lines.

With --incomplete, only the trace of a recording stopped by a write error (mkrecord
--fail-after: a full disk after 64 KiB) is checked: info, verify and dump exit 7 and name the
write error.

Every check runs, failures are collected and listed at the end; the exit status is 1 if any
failed. Everything happens in a fresh temporary directory, removed at the end whatever happens.
"""

import errno
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step

TIMEOUT = testwrap.timeout(120)  # seconds for one command: a hang is a failure, not a stuck test run

EXIT_OK, EXIT_USAGE, EXIT_CORRUPT, EXIT_SYSTEM, EXIT_INCOMPLETE = 0, 2, 3, 6, 7
# mkrecord's worker thread name: bytes 'worker "q"<TAB>\\<e-acute in UTF-8><0xff>'
WORKER_JSON = 'worker "q"\t\\\u00e9\ufffd'    # JSON: escaped, the invalid byte as U+FFFD
WORKER_TEXT = 'worker "q"\\x09\\\\\u00e9\\xff'  # text: control and invalid bytes as \xNN
STRUCTURAL = {"session-start", "session-end", "thread-start", "thread-end"}

failures = []


def check(cond, what, detail=""):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what + (("\n     " + detail.replace("\n", "\n     ")) if detail else ""))
        failures.append(what)
    return cond


class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    def __str__(self):
        return "$ %s\nexit %s\nstdout: %s\nstderr: %s" % (
            " ".join(self.args), self.rc, self.out[:2000], self.err[:2000])


def run(*args):
    args = [str(a) for a in args]
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return Result(args, "timeout", "", "")
    return Result(args, p.returncode, p.stdout.decode("utf-8", "replace"),
                  p.stderr.decode("utf-8", "replace"))


def expect_rc(r, rc, what):
    """The command ended by itself (no signal) with exit code rc."""
    return check(r.rc == rc, "%s: exit %d" % (what, rc), str(r))


def valid_json_tool(text):
    """True when `python3 -m json.tool` accepts text."""
    p = subprocess.run([sys.executable, "-m", "json.tool"], input=text.encode(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return p.returncode == 0


def parse_json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


def copy_with(src, dst, mutate):
    with open(src, "rb") as f:
        data = bytearray(f.read())
    data = mutate(data)
    with open(dst, "wb") as f:
        f.write(data)
    return dst


def test_good_trace(tt, trace, expected):
    """The intact trace: every verb succeeds and agrees with what mkrecord recorded."""
    # verify, text
    r = run(tt, "verify", trace)
    expect_rc(r, EXIT_OK, "verify on a good trace")
    m = re.fullmatch(r"(.*): ok \((\d+) events, (\d+) chunks, (\d+) bytes\)\n", r.out)
    check(m is not None and m.group(1) == str(trace),
          "verify prints 'FILE: ok (N events, M chunks, B bytes)'", str(r))

    # verify, JSON
    r = run(tt, "verify", "--json", trace)
    expect_rc(r, EXIT_OK, "verify --json on a good trace")
    check(valid_json_tool(r.out), "verify --json output passes python3 -m json.tool", str(r))
    v = json.loads(r.out) if r.rc == 0 else {}

    # verify, quiet
    r = run(tt, "verify", "--quiet", trace)
    expect_rc(r, EXIT_OK, "verify --quiet on a good trace")
    check(r.out == "" and r.err == "", "verify --quiet prints nothing", str(r))

    # info, JSON: the manifest and the thread table
    r = run(tt, "info", "--json", trace)
    expect_rc(r, EXIT_OK, "info --json")
    check(valid_json_tool(r.out), "info --json output passes python3 -m json.tool", str(r))
    info = json.loads(r.out)
    man, threads = info["manifest"], info["threads"]
    nevents = man["event_count"]
    check(v.get("events") == nevents, "verify --json counts the manifest's events",
          "verify: %s, manifest: %s" % (v.get("events"), nevents))
    check(isinstance(v.get("status"), str) and v.get("error") == "TT_OK",
          "verify --json on a good trace: a status, error TT_OK", json.dumps(v))
    check(man["caller"] == "mkrecord integration test", "info: caller string", man["caller"])
    check(man["thread_count"] == 2 and len(threads) == 2, "info: two threads", r.out)
    check("finalized" in man["flag_names"], "info: flags include finalized", str(man["flags"]))
    check(re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", man["time_origin"]) is not None,
          "info: time origin in ISO-8601", man["time_origin"])
    check(re.fullmatch(r"\d+\.\d+\.\d+", man["lib_version"]) is not None,
          "info: library version x.y.z", man["lib_version"])
    check(man["pid"] > 0 and man["ticks_per_sec"] > 0, "info: pid and clock rate set", r.out)
    check([t.get("name") for t in threads] == ["main", WORKER_JSON],
          "info --json: thread names, escaped", json.dumps(threads))
    check(sum(t["events"] for t in threads) == nevents,
          "info: the threads' events add up to the manifest's", json.dumps(threads))
    check(all(t["first_ns"] <= t["last_ns"] for t in threads),
          "info: first time <= last time per thread", json.dumps(threads))
    check(man["chunk_count"] > 4, "mkrecord's small buffers gave several chunks",
          str(man["chunk_count"]))

    # info, text
    r = run(tt, "info", trace)
    expect_rc(r, EXIT_OK, "info")
    for needle in ("mkrecord integration test", "  main\n", "  " + WORKER_TEXT + "\n", "finalized",
                   "events:           %d" % nevents, man["time_origin"]):
        check(needle in r.out, "info text shows %r" % needle, str(r))

    # dump, text
    r = run(tt, "dump", trace)
    expect_rc(r, EXIT_OK, "dump")
    text_lines = r.out.splitlines()
    check(len(text_lines) == nevents, "dump prints one line per event of the manifest",
          "%d lines, manifest says %d" % (len(text_lines), nevents))

    # dump, JSON
    r = run(tt, "dump", "--json", trace)
    expect_rc(r, EXIT_OK, "dump --json")
    try:
        events = parse_json_lines(r.out)
        check(True, "dump --json: every line is JSON")
    except ValueError as e:
        check(False, "dump --json: every line is JSON", str(e))
        events = []
    check(len(events) == nevents, "dump --json: one object per event",
          "%d objects, manifest says %d" % (len(events), nevents))

    # recorded order: (time, thread, seq) nondecreasing; each thread's seq is 0, 1, 2, ...
    keys = [(e["time"], e["thread"], e["seq"]) for e in events]
    bad = next((i for i in range(1, len(keys)) if keys[i] <= keys[i - 1]), None)
    check(bad is None, "dump is in recorded order (time, thread, seq)",
          "" if bad is None else "line %d %s after %s" % (bad, keys[bad], keys[bad - 1]))
    for t in (0, 1):
        seqs = [e["seq"] for e in events if e["thread"] == t]
        check(seqs == list(range(len(seqs))), "thread %d: sequence numbers 0..n-1 in order" % t)
        check(len(seqs) == threads[t]["events"], "thread %d: as many events as its table row" % t,
              "%d vs %d" % (len(seqs), threads[t]["events"]))
    times = [e["thread"] for e in events]
    switches = sum(1 for i in range(1, len(times)) if times[i] != times[i - 1])
    print("     (the merged dump switches threads %d times)" % switches)

    # text and JSON dump say the same, field by field
    same = len(text_lines) == len(events)
    for line, e in zip(text_lines, events):
        f = line.split(" ")
        kind = e["kind"] + (":" + e["dir"] if e["kind"] == "io" else "")
        want = [str(e["seq"]), str(e["thread"]), str(e["time_ns"]), kind,
                e["function"] or "-", e["site"] or "-", str(e["arg"]), e["addr"], str(e["len"])]
        if f[:9] != want:
            same = False
            print("     text: %s\n     json: %s" % (line, json.dumps(e)))
            break
    check(same, "dump text and dump --json agree on every event")

    # what mkrecord recorded is what dump shows, per thread, in program order (but the tracer's
    # own frames: with mkrecord's small budget a thread may wait for a buffer, docs/FORMAT.md §5.7)
    for t in (0, 1):
        want = [x for x in expected if x["thread"] == t]
        got = [e for e in events if e["thread"] == t and e["kind"] not in STRUCTURAL and
               e["function"] != "tinytrace:buffer-wait"]
        ok = len(want) == len(got)
        detail = "%d recorded, %d dumped" % (len(want), len(got))
        for i, (w, g) in enumerate(zip(want, got)):
            diff = {k: (w[k], g.get(k)) for k in w if g.get(k) != w[k]}
            if diff:
                ok = False
                detail = "event %d of thread %d: (recorded, dumped) %s\nrecorded %s\ndumped %s" % (
                    i, t, diff, json.dumps(w), json.dumps(g))
                break
        check(ok, "thread %d: dump shows exactly the events mkrecord recorded" % t, detail)

    # filters
    r = run(tt, "dump", "--thread", "1", "--kind", "enter", trace)
    expect_rc(r, EXIT_OK, "dump --thread 1 --kind enter")
    lines = [l.split(" ") for l in r.out.splitlines()]
    lines = [l for l in lines if l[4:5] != ["tinytrace:buffer-wait"]]
    want = sum(1 for x in expected if x["thread"] == 1 and x["kind"] == "enter")
    check(len(lines) == want, "dump --thread 1 --kind enter: one line per enter of thread 1",
          "%d lines, %d recorded" % (len(lines), want))
    check(all(l[1] == "1" and l[3] == "enter" and l[4] == "worker_step" for l in lines),
          "dump --thread 1 --kind enter: only thread 1's enters of worker_step",
          "\n".join(" ".join(l) for l in lines[:5]))

    r = run(tt, "dump", "--json", "-k", "user,io", "--kind", "alloc", trace)
    expect_rc(r, EXIT_OK, "dump --kind user,io --kind alloc")
    got = parse_json_lines(r.out) if r.rc == 0 else []
    want = sum(1 for x in expected if x["kind"] in ("user", "io", "alloc"))
    check(len(got) == want and all(e["kind"] in ("user", "io", "alloc") for e in got),
          "dump --kind user,io --kind alloc: exactly those events", "%d vs %d" % (len(got), want))

    # the reader's memory limit: the 1.2 MB split payload needs more than 1 MiB per cursor
    r = run(tt, "dump", "--max-memory", "1", trace)
    expect_rc(r, EXIT_CORRUPT, "dump --max-memory 1 refuses a trace that needs more")
    check("max_total" in r.err and "--max-memory" in r.err and r.out == "",
          "dump --max-memory 1 names the limit and the option, prints no event", str(r))
    r = run(tt, "verify", "--max-memory", "1", trace)
    expect_rc(r, EXIT_CORRUPT, "verify --max-memory 1 refuses a trace that needs more")
    r = run(tt, "dump", "--max-memory", "16", "--kind", "user", trace)
    expect_rc(r, EXIT_OK, "dump --max-memory 16 reads it")

    r = run(tt, "dump", "--thread", "7", trace)
    check(r.rc != 0 and r.rc is not None and "thread 7" in r.err,
          "dump --thread 7 of a two-thread trace is refused, naming the thread", str(r))

    return man


def test_damaged(tt, trace, man, tmp):
    """Damaged copies: verify, info and dump fail with the right code and say where."""
    size = os.path.getsize(trace)

    # one byte flipped in the middle of the event data
    mid = (man["data_offset"] + man["data_end"]) // 2
    flipped = copy_with(trace, os.path.join(tmp, "flipped.tt"),
                        lambda d: d[:mid] + bytes([d[mid] ^ 0x40]) + d[mid + 1:])
    r = run(tt, "verify", flipped)
    expect_rc(r, EXIT_CORRUPT, "verify on a flipped byte at offset %d" % mid)
    check(re.search(r"at offset \d+", r.err) is not None and str(flipped) in r.err,
          "verify on a flipped byte names the file and an offset", str(r))
    r = run(tt, "verify", "--json", flipped)
    expect_rc(r, EXIT_CORRUPT, "verify --json on a flipped byte")
    check(valid_json_tool(r.out), "verify --json on a flipped byte: valid JSON", str(r))
    if r.out:
        v = json.loads(r.out)
        check(isinstance(v.get("offset"), int) and v.get("status") not in (None, "ok"),
              "verify --json on a flipped byte: a status and an offset", r.out)
    r = run(tt, "verify", "--quiet", flipped)
    check(r.rc == EXIT_CORRUPT and r.out == "" and r.err == "",
          "verify --quiet on a flipped byte: exit 3, silent", str(r))
    r = run(tt, "dump", flipped)
    expect_rc(r, EXIT_CORRUPT, "dump on a flipped byte (a read error in the middle)")
    check(str(flipped) in r.err, "dump on a flipped byte names the file", str(r))

    # truncated to half: the end (tables) and half of the chunks are gone
    half = copy_with(trace, os.path.join(tmp, "half.tt"), lambda d: d[:size // 2])
    for verb in ("verify", "info", "dump"):
        r = run(tt, verb, half)
        expect_rc(r, EXIT_CORRUPT, "%s on a file truncated to half" % verb)
        check(str(half) in r.err, "%s on a truncated file names the file" % verb, str(r))

    # the last byte missing
    short = copy_with(trace, os.path.join(tmp, "short.tt"), lambda d: d[:-1])
    r = run(tt, "verify", short)
    expect_rc(r, EXIT_CORRUPT, "verify on a file one byte short")

    # shorter than a manifest, empty, garbage
    tiny = copy_with(trace, os.path.join(tmp, "tiny.tt"), lambda d: d[:100])
    empty = copy_with(trace, os.path.join(tmp, "empty.tt"), lambda d: b"")
    rnd = random.Random(1234)
    garbage = copy_with(trace, os.path.join(tmp, "garbage.tt"),
                        lambda d: bytes(rnd.randrange(256) for _ in range(8192)))
    for path, what in ((tiny, "a 100-byte file"), (empty, "an empty file"),
                       (garbage, "8 KiB of random bytes")):
        for verb in ("verify", "info", "dump"):
            r = run(tt, verb, path)
            expect_rc(r, EXIT_CORRUPT, "%s on %s" % (verb, what))

    # missing file
    missing = os.path.join(tmp, "no-such-file.tt")
    for verb in ("verify", "info", "dump"):
        r = run(tt, verb, missing)
        expect_rc(r, EXIT_SYSTEM, "%s on a missing file" % verb)
        check(missing in r.err, "%s on a missing file names it" % verb, str(r))
    r = run(tt, "verify", "--json", missing)
    expect_rc(r, EXIT_SYSTEM, "verify --json on a missing file")
    check(valid_json_tool(r.out), "verify --json on a missing file: valid JSON", str(r))

    # random single-byte flips anywhere: never a crash or a hang, never a wrong kind of exit
    rnd = random.Random(42)
    undetected = []
    for n in range(40):
        off = rnd.randrange(size)
        bit = 1 << rnd.randrange(8)
        path = copy_with(trace, os.path.join(tmp, "fuzz.tt"),
                         lambda d: d[:off] + bytes([d[off] ^ bit]) + d[off + 1:])
        for verb in ("verify", "info", "dump"):
            r = run(tt, verb, path)
            what = "%s with bit %#x of byte %d flipped ends with 0, 3 or 7" % (verb, bit, off)
            if not check(r.rc in (EXIT_OK, EXIT_CORRUPT, EXIT_INCOMPLETE), what, str(r)):
                continue
            if verb == "verify" and r.rc == EXIT_OK:
                undetected.append(off)
    print("     note: verify accepted %d of 40 random flips%s" % (
        len(undetected), (" (offsets %s)" % undetected) if undetected else ""))


def test_command_line(tt, trace):
    r = run(tt)
    expect_rc(r, EXIT_USAGE, "no verb")
    check("Usage" in r.err, "no verb: usage on stderr", str(r))
    r = run(tt, "help")
    expect_rc(r, EXIT_OK, "help")
    for needle in ("info", "verify", "dump", "Exit codes"):
        check(needle in r.out, "help lists %r" % needle, str(r))
    for code in range(8):
        check(re.search(r"^\s*%d\s" % code, r.out, re.M) is not None,
              "help documents exit code %d" % code, r.out)
    r = run(tt, "--help")
    expect_rc(r, EXIT_OK, "--help")
    r = run(tt, "--version")
    expect_rc(r, EXIT_OK, "--version")
    check(re.match(r"tinytrace \d+\.\d+\.\d+", r.out) is not None, "--version prints the version",
          str(r))
    for verb in ("info", "verify", "dump", "help"):
        r = run(tt, verb, "--help")
        expect_rc(r, EXIT_OK, "%s --help" % verb)
        check(r.out.startswith("Usage: tinytrace " + verb), "%s --help prints its usage" % verb,
              str(r))
    r = run(tt, "help", "dump")
    check(r.rc == 0 and r.out.startswith("Usage: tinytrace dump"), "help dump", str(r))

    bad = [
        ["bogus"],
        ["--bogus"],
        ["help", "bogus"],
        ["info"],
        ["verify"],
        ["dump"],
        ["verify", trace, trace],
        ["info", "--nope", trace],
        ["dump", "--kind", "nosuchkind", trace],
        ["dump", "--kind", "enter,", trace],
        ["dump", "--thread", "x", trace],
        ["dump", "--thread", "-1", trace],
        ["dump", "--thread", trace],
        ["dump", "--max-memory", "0", trace],
        ["verify", "--max-memory", "lots", trace],
        ["verify", "--json", "--quiet", trace],
        ["--version", "x"],
    ]
    for args in bad:
        r = run(tt, *args)
        expect_rc(r, EXIT_USAGE, "usage error: tinytrace %s" % " ".join(map(str, args)))
        check(r.out == "", "usage error prints nothing on stdout: %s" % " ".join(map(str, args)),
              str(r))


def test_damaged_program(tt, tmp):
    """`record` reads the program's ELF headers and notes before it runs it (a static program is
    refused): damaged copies of an ELF file (this tool's own) are read without a crash, then
    not run, since they are not executable (6). In the ASan build a read past a buffer fails."""
    with open(tt, "rb") as f:
        data = f.read()
    cases = [("truncated to %d" % n, data[:n]) for n in (0, 4, 63, 64, 200, 1000, 5000)]
    m = bytearray(data)
    phoff = int.from_bytes(m[0x20:0x28], "little")
    phentsize = int.from_bytes(m[0x36:0x38], "little")
    for k in range(int.from_bytes(m[0x38:0x3a], "little")):
        ph = phoff + k * phentsize
        if int.from_bytes(m[ph:ph + 4], "little") == 4:  # PT_NOTE
            off = int.from_bytes(m[ph + 8:ph + 16], "little")
            # the first note's descriptor runs past the end of its segment
            m[ph + 32:ph + 40] = (29).to_bytes(8, "little")  # p_filesz
            m[off + 4:off + 8] = (13).to_bytes(4, "little")  # descsz
            cases.append(("a note past the end of its segment", bytes(m)))
            break
    check(len(cases) == 8, "the tool has a PT_NOTE segment to damage")
    rng = random.Random(20261201)
    # under valgrind (reduced) each record takes seconds: the targeted cases and 8 mutations
    for i in range(8 if testwrap.reduced() else 60):
        m = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            m[rng.randrange(0, 64 + 56 * 16)] = rng.randrange(256)
        cases.append(("mutation %d" % i, bytes(m)))
    path = os.path.join(tmp, "damaged")
    bad = []
    for what, content in cases:
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, 0o644)
        r = run(tt, "record", "-o", os.path.join(tmp, "damaged.tt"), "--", path)
        if r.rc not in (EXIT_USAGE, EXIT_SYSTEM) or "Sanitizer" in r.err:
            bad.append("%s: %s" % (what, r))
    check(not bad, "record reads damaged program files without a crash, runs none of them",
          "\n".join(bad[:3]))


def test_incomplete(tt, mkrecord, tmp):
    """A recording stopped by a write error: the file says so, and the tool exits 7."""
    trace = os.path.join(tmp, "stopped.tt")
    r = run(mkrecord, "--fail-after", 65536, trace)
    if not expect_rc(r, 0, "mkrecord records through a sink that fails after 64 KiB"):
        return
    # The reader refuses an incomplete file as soon as it has read the manifest (FORMAT.md
    # 11.3): its tables were never written. info can only say why.
    r = run(tt, "info", trace)
    expect_rc(r, EXIT_INCOMPLETE, "info on an incomplete trace")
    check(os.strerror(errno.ENOSPC) in r.err and str(trace) in r.err,
          "info on an incomplete trace names the file and the write error", str(r))
    r = run(tt, "verify", trace)
    expect_rc(r, EXIT_INCOMPLETE, "verify on an incomplete trace")
    check("incomplete" in r.err and str(trace) in r.err,
          "verify on an incomplete trace says so, naming the file", str(r))
    r = run(tt, "verify", "--json", trace)
    expect_rc(r, EXIT_INCOMPLETE, "verify --json on an incomplete trace")
    check(valid_json_tool(r.out) and json.loads(r.out).get("status") == "incomplete",
          "verify --json on an incomplete trace: status incomplete", str(r))
    r = run(tt, "dump", trace)
    expect_rc(r, EXIT_INCOMPLETE, "dump on an incomplete trace")


def main():
    args = sys.argv[1:]
    incomplete = "--incomplete" in args
    if incomplete:
        args.remove("--incomplete")
    if len(args) != 2:
        print("usage: test-tool.py TINYTRACE MKRECORD [--incomplete]", file=sys.stderr)
        return 2
    tt, mkrecord = os.path.abspath(args[0]), os.path.abspath(args[1])
    tmp = tempfile.mkdtemp(prefix="tinytrace-it-")
    try:
        if incomplete:
            test_incomplete(tt, mkrecord, tmp)
            return report()
        trace = os.path.join(tmp, "run.tt")
        r = run(mkrecord, trace)
        if not expect_rc(r, 0, "mkrecord records a trace"):
            return 1
        expected = parse_json_lines(r.out)
        check(os.path.exists(trace) and not any(n.endswith(".partial") for n in os.listdir(tmp)),
              "mkrecord left the final file and no partial one", str(os.listdir(tmp)))
        man = test_good_trace(tt, trace, expected)
        test_damaged(tt, trace, man, tmp)
        test_command_line(tt, trace)
        test_damaged_program(tt, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report()


def report():
    if failures:
        print("\n%d check(s) failed:\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
