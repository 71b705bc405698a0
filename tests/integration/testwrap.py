# SPDX-License-Identifier: MIT
"""The programs under test under a wrapper (tests/all.sh's valgrind step). Imported first by
every test-*.py; without these variables it does nothing.

TT_TEST_WRAPPER="valgrind ..."
    Every command a test starts whose program is one of the test's own arguments (the
    tinytrace tool and the test programs meson passes in) runs as WRAPPER + command. Other
    programs a test runs directly (python3 -m json.tool, date, cat, mount) are not wrapped. A program that
    `tinytrace record` or `replay` runs is reached through the wrapper's own handling of exec
    (valgrind --trace-children=yes), not here. This patches subprocess.Popen, which
    subprocess.run also goes through, so the tests' own calls stay as they are.

TT_TEST_REDUCED=1
    The programs run tens of times slower: timeouts are multiplied by 10 (timeout()), and the
    checks that measure the process itself -- peak RSS, which under valgrind is valgrind's --
    are left out (reduced() says so; each test names what it leaves out).
"""

import os
import shlex
import subprocess
import sys

WRAPPER = shlex.split(os.environ.get("TT_TEST_WRAPPER", ""))
REDUCED = os.environ.get("TT_TEST_REDUCED", "") not in ("", "0")


def reduced():
    return REDUCED


def timeout(seconds):
    return seconds * 10 if REDUCED else seconds


# the programs meson passed in, by their real path: a test may name them relative to the build
# directory, or through os.path.abspath
PROGRAMS = {os.path.realpath(a) for a in sys.argv[1:]
            if os.path.isfile(a) and os.access(a, os.X_OK)}


def _wrapped(args):
    if not WRAPPER or not isinstance(args, (list, tuple)) or not args:
        return args
    if os.path.realpath(os.fspath(args[0])) not in PROGRAMS:
        return args
    return WRAPPER + [os.fspath(a) if isinstance(a, os.PathLike) else a for a in args]


class _Popen(subprocess.Popen):
    def __init__(self, args, *rest, **kw):
        super().__init__(_wrapped(args), *rest, **kw)


# subprocess.Popen as it was: for what a test sets up rather than tests. Under valgrind
# --trace-children=yes a recorded program's first exec is valgrind's own launcher, whose exec of
# the (static) tool ends the recording at once: a test that needs a recording to stay live
# makes it with this.
Unwrapped = subprocess.Popen


if WRAPPER:
    subprocess.Popen = _Popen
