#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""C++ names as the tool shows them (issue 20).

    test-names.py TINYTRACE PRELOAD PROG_CXX PROG_CXX_EXTRA

Records tests/names/prog-cxx.cpp (built with -finstrument-functions) under `tinytrace record`
and checks that every verb shows its functions demangled, the way the recorded names
(mangled, from the symbol table) never read:
  - stats, tree, dump, diff, export (chrome and perfetto), report and the replay verdict show
    "shop::Cart::add(int)" and none of them "_ZN4shop4Cart3addEi";
  - `tree --function 'shop::Cart::add(int)'` finds its calls (and so does the name without its
    parameters, and the mangled name as recorded);
  - --no-demangle shows the names as recorded.
The replay verdict comes from replaying the plain build's recording with the -DEXTRA_CALL build,
which calls Cart::audit first: it diverges at a C++ function.
"""

import json
import os
import subprocess
import sys
import tempfile

TT, PRELOAD, PROG, PROG_EXTRA = map(os.path.abspath, sys.argv[1:5])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)
ADD = "shop::Cart::add(int)"
ADD_MANGLED = "_ZN4shop4Cart3addEi"
failures = []


def run(args):
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=ENV, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:3000].replace("\n", "\n     "))


def shows(label, args, text_of=lambda rc, out, err: out):
    rc, out, err = run(args)
    text = text_of(rc, out, err)
    check(ADD in text and ADD_MANGLED not in text,
          "%s shows %s, demangled" % (label, ADD), (rc, text[:1500], err[:500]))
    return rc, out, err


def main(d):
    a, b = os.path.join(d, "a.tt"), os.path.join(d, "b.tt")
    rc, out, err = run([TT, "record", "-o", a, "--", PROG, "3"])
    check(rc == 0, "record prog-cxx 3", err)
    rc, out, err = run([TT, "record", "-o", b, "--", PROG, "4"])
    check(rc == 0, "record prog-cxx 4", err)
    rc, out, err = run([TT, "stats", "--no-demangle", a])
    check(ADD_MANGLED in out and ADD not in out,
          "the recording holds the names mangled (stats --no-demangle)", out[:1500])

    shows("stats", [TT, "stats", a])
    shows("stats --json", [TT, "stats", "--json", a])
    shows("tree", [TT, "tree", a])
    shows("dump", [TT, "dump", a])
    shows("dump --json", [TT, "dump", "--json", a])
    shows("diff", [TT, "diff", a, b])
    shows("diff --json", [TT, "diff", "--json", a, b])
    shows("export --format chrome", [TT, "export", a])
    pf = os.path.join(d, "a.pftrace")
    rc, out, err = run([TT, "export", "--format", "perfetto", "-o", pf, a])
    data = open(pf, "rb").read() if rc == 0 else b""
    check(ADD.encode() in data and ADD_MANGLED.encode() not in data,
          "export --format perfetto interns the demangled name", (rc, err))
    shows("report", [TT, "report", a])
    shows("report --json", [TT, "report", "--json", a])
    shows("tree --json", [TT, "tree", "--json", a])

    for name in (ADD, "shop::Cart::add", ADD_MANGLED):
        rc, out, err = run([TT, "tree", "--function", name, a])
        check(rc == 0 and ADD in out and out.count("\n") > 3,
              "tree --function '%s' finds the calls" % name, (rc, out[:800], err))
    rc, out, err = run([TT, "tree", "--function", "shop::Cart::nothing(int)", a])
    check(rc == 2, "tree --function of a name the trace lacks is refused", (rc, out, err))
    rc, out, err = run([TT, "tree", "--no-demangle", "--function", ADD_MANGLED, a])
    check(rc == 0 and ADD_MANGLED in out and ADD not in out,
          "tree --no-demangle shows the names as recorded", (rc, out[:800], err))

    report = os.path.join(d, "report.json")
    rc, out, err = run([TT, "replay", "--allow-build-mismatch", "--report", report, a, "--",
                        PROG_EXTRA, "3"])
    # the runtime's own text (in the program's stderr) names them as recorded: it has no
    # demangler; the tool's verdict after it does
    verdict = "\n".join(l for l in err.splitlines() if l.startswith("tinytrace:   "))
    check(rc == 1 and "actual:   enter shop::Cart::audit()" in verdict and
          "expected: exit " + ADD in verdict and "_ZN" not in verdict,
          "the replay verdict names the C++ functions it diverged at, demangled", (rc, err))
    rc, out, err = run([TT, "replay", "--no-demangle", "--allow-build-mismatch", a, "--",
                        PROG_EXTRA, "3"])
    check(rc == 1 and "_ZN4shop4Cart5auditEv" in err,
          "replay --no-demangle names it as recorded", (rc, err))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="tt-names-") as d:
        main(d)
    print("%d failure(s)" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)
