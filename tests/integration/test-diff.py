#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of `tinytrace diff`.

    test-diff.py TINYTRACE MKDIFF MAXRSS

Records pairs of traces with mkdiff (a main thread and four workers, about 10^6 events, every
event its own value) and diffs them:
  - a recording and one of the same program whose workers started in the reverse order (so the
    same names have other thread ids): no difference, exit 0, every thread paired by name;
  - against one with a flipped payload byte at worker-2's iteration 15003: exit 1, exactly that
    thread, the sequence number mkdiff counted (and `tinytrace dump` shows the changed event at
    that seq in B and the original in A), the field, the byte, the context and both call paths;
  - against one with an extra call before worker-1's iteration 777: the kind differs, and B's
    call path ends in the extra call;
  - a thread that ends early, a thread only in B;
  - bad command lines, a missing file, a truncated file;
  - the progress line: on stderr when it is a terminal (a pty), erased at the end; never on a
    pipe;
  - memory: the peak RSS of the diff of the 10^6-event pair (7 MB files) is within 4 MiB of
    that of a 100-times smaller pair (the tool streams; it does not load a trace).

Every check runs; failures are listed at the end and make the exit status 1. Everything happens
in a fresh temporary directory, removed at the end.
"""

import functools
import json
import os
import re
import subprocess
import sys

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step
import ttproc

TT, MKDIFF, MAXRSS = map(os.path.abspath, sys.argv[1:4])
TIMEOUT = testwrap.timeout(240)
THREADS, ITER = 4, 21000  # 4 * 21000 * 12 = 1 008 000 worker events
check = ttproc.check
run = functools.partial(ttproc.run_text, timeout=TIMEOUT)


def record(path, *opts, iterations=ITER, threads=THREADS):
    rc, out, err = run([MKDIFF, path, threads, iterations] + list(opts))
    if rc != 0:
        raise RuntimeError("mkdiff %s failed: %s" % (opts, err))
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def diff_json(a, b, *opts):
    rc, out, err = run([TT, "diff", "--json"] + list(opts) + [a, b])
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, "stdout: %s\nstderr: %s" % (out[:2000], err)


def thread_id(trace, name):
    rc, out, err = run([TT, "info", "--json", trace])
    for t in json.loads(out)["threads"]:
        if t["name"] == name:
            return t["id"]
    raise RuntimeError("%s has no thread %s" % (trace, name))


def dump_event(trace, thread, seq):
    """The event at seq of a thread, from `tinytrace dump --json` (the reference reader)."""
    p = subprocess.Popen([TT, "dump", "--json", "--thread", str(thread), trace],
                         stdout=subprocess.PIPE)
    found = None
    key = '"seq":%d,' % seq
    for line in p.stdout:
        if line.startswith(b"{" + key.encode()):
            found = json.loads(line)
            break
    p.kill()
    p.wait()
    return found


def main(d):
    a = os.path.join(d, "a.tt")
    a2 = os.path.join(d, "a2.tt")
    b = os.path.join(d, "b.tt")
    c = os.path.join(d, "c.tt")
    record(a)
    record(a2, "--reverse")
    inj_b = record(b, "--reverse", "--inject-payload", "2:15003")
    inj_c = record(c, "--inject-call", "1:777")
    check(len(inj_b) == 1 and len(inj_c) == 1, "mkdiff reports one injection per recording",
          (inj_b, inj_c))
    inj_b, inj_c = inj_b[0], inj_c[0]

    # 1. the same program, the workers started in the other order
    rc, j, err = diff_json(a, a2)
    if check(rc == 0 and j is not None, "identical recordings: exit 0", (rc, err)):
        check(j["same"] is True and j["differing_threads"] == 0 and j["earliest"] is None,
              "identical recordings: same, no differing thread", j)
        threads = j["threads"]
        check(len(threads) == THREADS + 1 and all(t["same"] for t in threads),
              "identical recordings: every thread the same", threads)
        check(all(t["matched_by"] == "name" for t in threads),
              "identical recordings: every thread paired by name", threads)
        w0 = [t for t in threads if t["name"] == "worker-0"]
        check(w0 and w0[0]["thread_a"] == 1 and w0[0]["thread_b"] == THREADS,
              "identical recordings: worker-0 is thread 1 in A and the last thread in B", w0)
        check(sum(t["events"] for t in threads) == j["a"]["events"] >= 10 ** 6,
              "identical recordings: every one of the 10^6 events compared", j)
    rc, out, err = run([TT, "diff", a, a2])
    check(rc == 0 and "same: no difference in %d threads" % (THREADS + 1) in out,
          "identical recordings: the text says so", out + err)

    # 2. a flipped payload byte
    rc, j, err = diff_json(a, b)
    if check(rc == 1 and j is not None, "injected payload: exit 1", (rc, err)):
        bad = [t for t in j["threads"] if not t["same"]]
        if check(len(bad) == 1 and bad[0]["name"] == inj_b["thread"],
                 "injected payload: exactly the thread " + inj_b["thread"] + " differs", bad):
            t = bad[0]
            df = t["difference"]
            seq = inj_b["seq"]
            check(df["seq"] == seq and df["a"]["seq"] == seq and df["b"]["seq"] == seq,
                  "injected payload: at the seq mkdiff counted (%d)" % seq, df)
            check(df["fields"] == ["payload"] and df["payload_offset"] == 5,
                  "injected payload: the payload differs, from byte 5", df)
            check(df["a"]["kind"] == "user" and df["b"]["kind"] == "user" and
                  df["a"]["arg"] == df["b"]["arg"] == 2 * 1000000 + 15003,
                  "injected payload: both events are the user event of iteration 15003", df)
            pa, pb = bytes.fromhex(df["a"]["payload"]), bytes.fromhex(df["b"]["payload"])
            check(len(pa) == len(pb) == 8 and pa[:5] == pb[:5] and pa[5] ^ pb[5] == 0xff
                  and pa[6:] == pb[6:], "injected payload: byte 5 flipped, the rest equal",
                  (pa.hex(), pb.hex()))
            check(df["call_path_a"] == inj_b["path"] and df["call_path_b"] == inj_b["path"],
                  "injected payload: both call paths are " + " > ".join(inj_b["path"]), df)
            ctx = df["context"]
            check(len(ctx) == 5 and [e["seq"] for e in ctx] == list(range(seq - 5, seq)),
                  "injected payload: the 5 events before it as context", ctx)
            check(ctx[-1]["kind"] == "enter" and ctx[-1]["function"] == inj_b["path"][-1],
                  "injected payload: the last context event enters the innermost call", ctx)
            check(t["thread_a"] == thread_id(a, inj_b["thread"]) and
                  t["thread_b"] == thread_id(b, inj_b["thread"]) and
                  t["thread_a"] != t["thread_b"],
                  "injected payload: the thread ids of both files, paired by name", t)
            # the reference reader agrees: B's event at that seq is the changed one
            ea = dump_event(a, t["thread_a"], seq)
            eb = dump_event(b, t["thread_b"], seq)
            check(ea is not None and eb is not None and ea["kind"] == eb["kind"] == "user" and
                  ea["payload"] == df["a"]["payload"] and eb["payload"] == df["b"]["payload"],
                  "injected payload: dump shows these two events at that seq", (ea, eb))
        ear = j["earliest"]
        check(ear is not None and ear["seq"] == inj_b["seq"],
              "injected payload: it is the earliest difference", ear)
    rc, out, err = run([TT, "diff", a, b])
    path = " > ".join(inj_b["path"])
    check(rc == 1 and re.search(r'"%s".*differs at seq %d\b' % (inj_b["thread"], inj_b["seq"]),
                                out) and
          "A call path: " + path + "\n" in out and "B call path: " + path + "\n" in out and
          "differs in: payload from byte 5" in out,
          "injected payload: the text names the thread, the seq and both call paths", out + err)

    # 3. an extra call
    rc, j, err = diff_json(a, c, "--context", "3")
    if check(rc == 1 and j is not None, "injected call: exit 1", (rc, err)):
        bad = [t for t in j["threads"] if not t["same"]]
        if check(len(bad) == 1 and bad[0]["name"] == inj_c["thread"],
                 "injected call: exactly the thread " + inj_c["thread"] + " differs", bad):
            df = bad[0]["difference"]
            check(df["seq"] == inj_c["seq"] and df["fields"] == ["kind"],
                  "injected call: the kind differs at seq %d" % inj_c["seq"], df)
            check(df["a"]["kind"] == "user" and df["b"]["kind"] == "enter" and
                  df["b"]["function"] == "injected_call",
                  "injected call: A records the user event, B enters injected_call", df)
            check(df["call_path_a"] == inj_c["path"] and
                  df["call_path_b"] == inj_c["path"] + ["injected_call"],
                  "injected call: B's call path ends in injected_call", df)
            check(len(df["context"]) == 3, "injected call: --context 3 gives 3 events", df)

    # 4. smaller recordings: a thread ending early, a thread only in one file
    s = os.path.join(d, "s.tt")
    s_end = os.path.join(d, "s-end.tt")
    s_more = os.path.join(d, "s-more.tt")
    record(s, iterations=ITER // 100, threads=3)
    inj_e = record(s_end, "--end-thread", "0:50", iterations=ITER // 100, threads=3)[0]
    record(s_more, iterations=ITER // 100, threads=4)
    rc, j, err = diff_json(s, s_end)
    if check(rc == 1 and j is not None, "thread ending early: exit 1", (rc, err)):
        bad = [t for t in j["threads"] if not t["same"]]
        check(len(bad) == 1 and bad[0]["name"] == "worker-0" and
              bad[0]["difference"]["fields"] == ["end"] and
              bad[0]["difference"]["ended"] == "b" and
              bad[0]["difference"]["b"]["kind"] == "thread-end" and
              bad[0]["difference"]["a"]["kind"] == "enter" and
              bad[0]["difference"]["seq"] == inj_e["seq"],
              "thread ending early: worker-0's difference is B's end, at seq %d" % inj_e["seq"],
              bad)
    rc, out, err = run([TT, "diff", s, s_end])
    check(rc == 1 and re.search(r"B seq \d+  thread-end", out) and
          "differs in: end: B's thread ends here, A's goes on" in out,
          "thread ending early: the text says B's thread ends", out + err)
    rc, j, err = diff_json(s, s_more)
    if check(rc == 1 and j is not None, "thread only in B: exit 1", (rc, err)):
        only = [t for t in j["threads"] if t.get("only_in")]
        check(len(only) == 1 and only[0]["only_in"] == "b" and only[0]["name"] == "worker-3" and
              only[0]["thread_a"] is None and only[0]["events"] > 0,
              "thread only in B: worker-3, with its event count", only)
        check(all(t["same"] for t in j["threads"] if not t.get("only_in")),
              "thread only in B: the other threads are the same", j["threads"])
    rc, out, err = run([TT, "diff", s, s_more])
    check(rc == 1 and "the thread counts differ: 4 in A, 5 in B" in out and
          re.search(r'B thread \d+ "worker-3": only in B \(\d+ events\)', out),
          "thread only in B: the text says so", out + err)
    rc, out, err = run([TT, "diff", s_more, s])
    check(rc == 1 and re.search(r'A thread \d+ "worker-3": only in A', out),
          "thread only in A: the text says so", out + err)

    # 5. unnamed threads: paired in the order in which they first recorded
    u = os.path.join(d, "u.tt")
    u2 = os.path.join(d, "u2.tt")
    ur = os.path.join(d, "u-rev.tt")
    record(u, "--no-names", iterations=ITER // 100)
    record(u2, "--no-names", iterations=ITER // 100)
    record(ur, "--no-names", "--reverse", iterations=ITER // 100)
    rc, j, err = diff_json(u, u2)
    check(rc == 0 and j and j["same"] and
          [t["matched_by"] for t in j["threads"]] == ["name"] + ["order"] * THREADS and
          all(t["thread_a"] == t["thread_b"] for t in j["threads"]),
          "unnamed threads: paired by order, the same", (rc, j, err))
    rc, j, err = diff_json(u, ur)
    # thread 1 is worker-0 in A and worker-3 in B: their first user event has another tag and
    # other bytes
    bad = [t for t in j["threads"] if not t["same"]] if j else []
    check(rc == 1 and len(bad) == THREADS and
          all(t["difference"]["fields"] == ["arg", "payload"] for t in bad) and
          bad[0]["difference"]["a"]["arg"] == 0 and
          bad[0]["difference"]["b"]["arg"] == (THREADS - 1) * 1000000,
          "unnamed threads in another order: every worker pair differs in tag and bytes",
          (rc, bad[:1], err))

    # 6. command lines and damaged files
    rc, out, err = run([TT, "diff", a])
    check(rc == 2 and "two files" in err, "one operand: usage error", (rc, err))
    rc, out, err = run([TT, "diff", "--context", "1001", a, b])
    check(rc == 2, "--context 1001: usage error", (rc, err))
    rc, out, err = run([TT, "diff", a, os.path.join(d, "missing.tt")])
    check(rc == 6 and "missing.tt" in err, "a missing file: exit 6, named", (rc, err))
    cut = os.path.join(d, "cut.tt")
    with open(b, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    rc, out, err = run([TT, "diff", a, cut])
    check(rc == 3 and "cut.tt" in err, "a truncated file: exit 3, named", (rc, err))
    rc, out, err = run([TT, "diff", "--help"])
    check(rc == 0 and "Usage: tinytrace diff" in out, "--help", (rc, out, err))

    # 7. the progress line
    env = dict(os.environ, TINYTRACE_PROGRESS_MS="0")
    rc, data = ttproc.run_pty_stderr([TT, "diff", a, a2], env, TIMEOUT)
    text = data.decode("utf-8", "replace")
    check(rc == 0 and re.search(r"tinytrace diff: +\d+% \(\d+ of \d+ events\)", text),
          "progress: shown on a terminal", repr(text[:400]))
    last = text.rfind("events)")
    check(last >= 0 and re.fullmatch(r"\s*\r", text[last + len("events)"):]) is not None,
          "progress: erased at the end (spaces, then a carriage return)", repr(text[-200:]))
    rc, out, err = run([TT, "diff", a, a2], env=env)
    check(rc == 0 and err == "", "progress: nothing on stderr when it is a pipe", repr(err[:400]))

    # 8. memory: streaming, so the 10^6 pair needs about what a 10^4 pair needs. Not under
    # valgrind (TT_TEST_REDUCED): the peak RSS measured would be valgrind's.
    if testwrap.reduced():
        print("skip memory: TT_TEST_REDUCED (peak RSS under valgrind is valgrind's)")
        return
    rc_big, rss_big = ttproc.peak_rss_kib(MAXRSS, [TT, "diff", a, b], TIMEOUT)
    small_b = os.path.join(d, "s-b.tt")
    record(small_b, "--inject-payload", "2:150", iterations=ITER // 100)
    s4 = os.path.join(d, "s4.tt")
    record(s4, iterations=ITER // 100)
    rc_small, rss_small = ttproc.peak_rss_kib(MAXRSS, [TT, "diff", s4, small_b], TIMEOUT)
    print("     peak RSS: %d KiB for the 10^6-event pair, %d KiB for the 10^4-event pair" %
          (rss_big, rss_small))
    check(rc_big == 1 and rc_small == 1 and rss_small > 0 and rss_big - rss_small < 4 * 1024,
          "memory: the 10^6 pair within 4 MiB of the 10^4 pair",
          (rc_big, rss_big, rc_small, rss_small))


if __name__ == "__main__":
    ttproc.run_main(main, "tt-diff-")
