#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The tools stay bounded on hostile shapes (issue 14, point 9):

  - a call tree 10^6 levels deep (mkshape deep), a trace that verifies: `tinytrace tree` and
    `tree --folded` finish in under 10 s, without a crash (the ASan build runs this too), in
    memory that grows by at most a few bytes per level (peak RSS compared with the same run at
    depth 10^4); `tree` prints one line per call, indented at most 64 levels, the level as a
    number beyond that; `--folded` cuts each path at 512 frames, the time below the cut in one
    frame "...", and its self times still add up to the whole run;
  - 20 000 threads of a few events each (mkshape threads): `tinytrace dump` (text and JSON)
    and `tinytrace diff` finish in under 10 s, and within 30 times their time on 2 000 threads:
    ten times the events cost ten times as much when the cost is linear in the events (the
    heap's log(threads) adds little), a hundred times when it is events x threads.

Usage: test-shapes.py TINYTRACE MKSHAPE MAXRSS"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step
import ttproc
from ttproc import check

TT, MKSHAPE, MAXRSS = map(os.path.abspath, sys.argv[1:4])
DEPTH = 10 ** 6
SMALL_DEPTH = 10 ** 4
THREADS, FEW_THREADS = 20000, 2000
LIMIT = testwrap.timeout(10)  # seconds: the acceptance's bound (x10 under valgrind)
INDENT_MAX, FOLD_MAX = 64, 512
# the per-cursor room the reader asks for grows with the thread table (48 bytes a thread), so
# 20 000 threads need more than the default 8 GiB limit; the tool maps it, and uses what it
# touches
MAX_MEMORY = ["--max-memory", "65536"]


def record(*args):
    r = subprocess.run([MKSHAPE] + [str(a) for a in args], capture_output=True,
                       timeout=testwrap.timeout(120))
    assert r.returncode == 0, r.stderr


def timed(args, keep_tail=3, keep_head=0):
    """Runs args under maxrss, reading stdout as it comes (a 10^6-line tree is 150 MB): returns
    (exit code, seconds, peak RSS in KiB, lines, the first keep_head and last keep_tail lines,
    stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen([MAXRSS] + [str(a) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    # far past the bound there is no need to wait more (the tools before the fix took hours):
    # maxrss and the tool under it
    watchdog = threading.Timer(3 * LIMIT, os.killpg, (p.pid, signal.SIGKILL))
    watchdog.start()
    head, tail, lines, rest = [], [], 0, b""
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        lines += len(parts)
        if len(head) < keep_head:
            head += parts[:keep_head - len(head)]
        tail = (tail + parts)[-keep_tail:]
    err = p.stderr.read().decode(errors="replace")
    rc = p.wait()
    watchdog.cancel()
    secs = time.monotonic() - t0
    m = re.search(r"^maxrss (\d+)$", err, re.M)
    return rc, secs, int(m.group(1)) if m else -1, lines, head, tail, err


def deep(d):
    big, small = os.path.join(d, "deep.tt"), os.path.join(d, "deep-small.tt")
    record("deep", big, DEPTH)
    record("deep", small, SMALL_DEPTH)
    r = subprocess.run([TT, "verify", big], capture_output=True, timeout=LIMIT * 6)
    check(r.returncode == 0, "a trace %d calls deep verifies" % DEPTH, r.stderr)

    rc, secs, rss, lines, head, tail, err = timed([TT, "tree", big], keep_head=80)
    print("     tree at depth %d: %.2f s, peak RSS %d KiB, %d lines" % (DEPTH, secs, rss, lines))
    check(rc == 0 and secs < LIMIT, "tree: depth %d in under %d s, exit 0" % (DEPTH, LIMIT),
          (rc, secs, err[-2000:]))
    check(lines == DEPTH + 1, "tree: one line per call and the thread's", lines)

    def want(level):
        shown = min(level, INDENT_MAX)
        mark = "[%d] " % level if level >= INDENT_MAX else ""
        return re.compile(r"^ {%d}%sf%d \d+ ns$" % (2 * (shown + 1), re.escape(mark),
                                                    level % 16))
    body = [l.decode() for l in head[1:]] + [l.decode() for l in tail[-2:]]
    levels = list(range(len(head) - 1)) + [DEPTH - 2, DEPTH - 1]
    bad = [(lv, l[:200]) for lv, l in zip(levels, body) if not want(lv).match(l)]
    check(head and head[0].startswith(b"thread 0 main: %d calls" % DEPTH) and not bad,
          "tree: indented up to %d levels, the level in brackets beyond" % INDENT_MAX, bad[:3])
    longest = max(len(l) for l in body)
    check(longest < 2 * (INDENT_MAX + 1) + 40, "tree: no line grows with the depth", longest)

    rc, secs_s, rss_s, *_ = timed([TT, "tree", small])
    grow = rss - rss_s
    # the walk keeps one frame index (8 bytes) per level of the chain it climbed, in an array
    # that doubles: 24 bytes a level is the bound, with its copies while it grows
    bound = 24 * (DEPTH - SMALL_DEPTH) // 1024
    if testwrap.reduced():
        print("skip tree's memory: TT_TEST_REDUCED (peak RSS under valgrind is valgrind's)")
    else:
        check(rc == 0 and rss > 0 and rss_s > 0 and grow < bound,
              "tree: memory grows by at most 24 bytes a level (%d KiB at depth %d, %d KiB at "
              "%d)" % (rss, DEPTH, rss_s, SMALL_DEPTH), (grow, bound))

    rc, secs, rss, lines, head, tail, err = timed([TT, "tree", "--folded", big], keep_head=10 ** 4)
    print("     tree --folded at depth %d: %.2f s, peak RSS %d KiB, %d lines" %
          (DEPTH, secs, rss, lines))
    check(rc == 0 and secs < LIMIT, "tree --folded: depth %d in under %d s, exit 0, no crash" %
          (DEPTH, LIMIT), (rc, secs, err[-2000:]))
    rows = [l.decode().rsplit(" ", 1) for l in head]
    paths = [r[0].split(";") for r in rows]
    check(lines == FOLD_MAX + 1 and len(paths[-1]) == FOLD_MAX + 2 and
          paths[-1][-1] == "..." and all(len(p) <= FOLD_MAX + 2 for p in paths),
          "tree --folded: paths cut at %d frames, below the cut one frame '...'" % FOLD_MAX,
          (lines, [len(p) for p in paths[-3:]]))
    # the self times add up to the run's one top-level call (each rounded to ns on its own)
    total = sum(int(r[1]) for r in rows)
    tr = subprocess.run([TT, "tree", "--depth", "1", big], capture_output=True, text=True,
                        timeout=LIMIT * 6)
    top = int(re.search(r"^  f0 (\d+) ns$", tr.stdout, re.M).group(1))
    check(abs(total - top) <= FOLD_MAX + 1, "tree --folded: the cut keeps the time (%d ns of "
          "self time, the top call took %d ns)" % (total, top))
    rc, _, rss_s, *_ = timed([TT, "tree", "--folded", small])
    if not testwrap.reduced():
        check(rc == 0 and rss > 0 and rss_s > 0 and rss - rss_s < 4096,
              "tree --folded: memory does not grow with the depth (%d KiB at depth %d, %d KiB "
              "at %d)" % (rss, DEPTH, rss_s, SMALL_DEPTH))


def threads(d):
    files = {}
    for n in (THREADS, FEW_THREADS):
        files[n, "a"] = os.path.join(d, "threads-%d-a.tt" % n)
        files[n, "b"] = os.path.join(d, "threads-%d-b.tt" % n)
        record("threads", files[n, "a"], n)
        shutil.copy(files[n, "a"], files[n, "b"])  # the same recording: diff reads it all
    info = json.loads(subprocess.run([TT, "info", "--json", files[THREADS, "a"]],
                                     capture_output=True, text=True).stdout)
    events = info["manifest"]["event_count"]
    check(info["manifest"]["thread_count"] == THREADS, "a trace of %d threads" % THREADS)

    for name, args in (("dump", ["dump"] + MAX_MEMORY + ["{a}"]),
                       ("dump --json", ["dump", "--json"] + MAX_MEMORY + ["{a}"]),
                       ("diff", ["diff"] + MAX_MEMORY + ["{a}", "{b}"]),
                       ("diff --json", ["diff", "--json"] + MAX_MEMORY + ["{a}", "{b}"])):
        secs = {}
        for n in (THREADS, FEW_THREADS):
            cmd = [TT] + [a.format(a=files[n, "a"], b=files[n, "b"]) for a in args]
            rc, secs[n], rss, lines, head, tail, err = timed(cmd)
            if n == THREADS:
                ok = rc == 0
                if name.startswith("dump"):
                    ok = ok and lines == events
                elif name == "diff":
                    ok = ok and tail[-1].startswith(b"same: no difference in %d threads" % n)
                else:
                    ok = ok and json.loads(tail[-1]).get("same") is True
                check(ok, "%s: %d threads read whole" % (name, n), (rc, lines, err[-2000:]))
        print("     %s: %.2f s at %d threads, %.2f s at %d" %
              (name, secs[THREADS], THREADS, secs[FEW_THREADS], FEW_THREADS))
        check(secs[THREADS] < LIMIT and secs[THREADS] <= 30 * secs[FEW_THREADS] + 1.0,
              "%s: %d threads in under %d s, within 30x the time of %d threads (+1 s)" %
              (name, THREADS, LIMIT, FEW_THREADS), secs)


def main(d):
    deep(d)
    threads(d)


if __name__ == "__main__":
    ttproc.run_main(main, "tt-shapes-")
