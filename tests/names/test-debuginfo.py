#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Functions of a stripped program, named from its debug file (issue 20, point 7).

    test-debuginfo.py TINYTRACE PRELOAD PROG_DEBUG PROG_DEBUG_C

Copies prog-debug (built with -g), moves its debug information into a file of its own
(objcopy --only-keep-debug), strips it and links the two (.gnu_debuglink), then records it:
  - the runtime, finding no symbol, records each function as its offset and build-id
    ("prog+0x1139@5f0c..."), in the trace;
  - stats names them by function and file:line, from the debug file (beside the program, or in
    its .debug/ directory); the lines are those of the functions in prog-debug.c;
  - the unchanged run replays: the tool looks the names up after it started the program, whose
    descriptors would otherwise be shifted by the files libdwfl keeps open;
  - a replay that diverges (the count file changed: prog-debug reads it live) names the expected
    and the actual function, with file:line, in its verdict;
  - the debug file is found beside the program, in its .debug/ directory, and by build-id
    under a root of TINYTRACE_DEBUGINFO_PATH (as /usr/lib/debug/.build-id/xx/yyyy.debug);
  - without the debug file, stats shows the offsets and no line: the lookup is what names them.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

TT, PRELOAD, PROG, SRC = map(os.path.abspath, sys.argv[1:5])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
failures = []


def run(args, env=None, **kw):
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env or ENV, timeout=60, **kw)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:3000].replace("\n", "\n     "))


def line_of(fn):
    for i, line in enumerate(open(SRC), 1):
        if re.match(r"(void|int) %s\(.*\)$" % fn, line):
            return i
    raise RuntimeError(fn)


def main(d):
    if shutil.which("objcopy") is None or shutil.which("strip") is None:
        print("skip: objcopy and strip (binutils) are needed")
        sys.exit(77)
    prog = os.path.join(d, "prog-debug")
    shutil.copy(PROG, prog)
    debug = prog + ".debug"
    for cmd in (["objcopy", "--only-keep-debug", prog, debug], ["strip", "--strip-all", prog],
                ["objcopy", "--add-gnu-debuglink=" + debug, prog]):
        rc, out, err = run(cmd)
        check(rc == 0, " ".join(os.path.basename(c) for c in cmd), err)
    rc, out, err = run(["nm", prog])
    check("no symbols" in err or out.strip() == "", "the copy has no symbol table", out[:300])

    count = os.path.join(d, "count")
    with open(count, "w") as f:
        f.write("3\n")
    trace = os.path.join(d, "t.tt")
    rc, out, err = run([TT, "record", "-o", trace, "--", prog, count])
    check(rc == 0, "record the stripped program", err)
    raw = open(trace, "rb").read()
    m = re.search(rb"prog-debug\+0x[0-9a-f]+@([0-9a-f]{40})", raw)
    check(m is not None, "the runtime recorded offsets with the build-id")
    build_id = m.group(1).decode() if m else "0" * 40

    rc, out, err = run([TT, "stats", trace])
    want = {fn: "%s (prog-debug.c:%d)" % (fn, line_of(fn)) for fn in ("main", "work", "leaf")}
    check(rc == 0 and all(w in out for w in want.values()) and "+0x" not in out,
          "stats names the functions by name and file:line", (want, out))
    rc, out, err = run([TT, "tree", trace])
    check(rc == 0 and "  leaf " in out and "+0x" not in out, "tree names them too", out[:500])

    rc, out, err = run([TT, "replay", trace])
    check(rc == 0, "an unchanged run replays (the tool opens the debug file after starting the "
          "program: a descriptor it inherited would shift the program's own)", err)

    with open(count, "w") as f:
        f.write("5\n")
    rc, out, err = run([TT, "replay", trace])
    verdict = "\n".join(l for l in err.splitlines() if l.startswith("tinytrace:   "))
    check(rc == 1 and "actual:   enter leaf at prog-debug.c:%d" % line_of("leaf") in verdict and
          "expected: exit work at prog-debug.c:%d" % line_of("work") in verdict,
          "the replay verdict names the diverging functions by name and file:line", err)

    os.makedirs(os.path.join(d, ".debug"))
    os.rename(debug, os.path.join(d, ".debug", os.path.basename(debug)))
    rc, out, err = run([TT, "stats", trace])
    check(rc == 0 and want["leaf"] in out, "the debug file is found in .debug/ too", out)
    root = os.path.join(d, "root")
    by_id = os.path.join(root, ".build-id", build_id[:2], build_id[2:] + ".debug")
    os.makedirs(os.path.dirname(by_id))
    os.rename(os.path.join(d, ".debug", os.path.basename(debug)), by_id)
    rc, out, err = run([TT, "stats", trace])
    check(rc == 0 and "prog-debug+0x" in out, "not found where the path does not look", out)
    rc, out, err = run([TT, "stats", trace], env=dict(ENV, TINYTRACE_DEBUGINFO_PATH=root))
    check(rc == 0 and all(w in out for w in want.values()),
          "the debug file is found by build-id (ROOT/.build-id/xx/yyyy.debug)", out)
    os.unlink(by_id)
    rc, out, err = run([TT, "stats", trace], env=dict(ENV, TINYTRACE_DEBUGINFO_PATH=root))
    check(rc == 0 and "prog-debug+0x" in out and "prog-debug.c" not in out,
          "without the debug file: the offsets, no line (the lookup is what names them)", out)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="tt-debuginfo-") as d:
        main(d)
    print("%d failure(s)" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)
