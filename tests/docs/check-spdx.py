#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-spdx.py SRCDIR: every source file of the tree carries the line
`SPDX-License-Identifier: MIT` in its first lines (issue 21; LICENSE is the text).

Source files: C and C++ (.c .h .cpp .hpp .in .sym .proto .js), Python, shell, meson.build,
Makefiles, the fuzz dictionary, and every file that starts with `#!`. Not: documents (.md),
data, debian/ (its copyright file says the license), build directories and .git.
--self-test: a file without the line is found, one with it is not.
"""
import os
import sys
import tempfile

EXTS = (".c", ".h", ".cpp", ".hpp", ".in", ".sym", ".proto", ".js", ".py", ".sh", ".dict")
NAMES = ("meson.build", "Makefile", "meson_options.txt")
SKIP_DIRS = {".git", "debian", "subprojects", "node_modules", "__pycache__"}


def is_source(path):
    base = os.path.basename(path)
    if base.endswith(EXTS) or base in NAMES:
        return True
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def missing(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build"))
        for name in sorted(files):
            p = os.path.join(d, name)
            if os.path.islink(p) or not is_source(p):
                continue
            with open(p, "rb") as f:
                head = f.read(400)
            if b"SPDX-License-Identifier: MIT" not in head:
                out.append(os.path.relpath(p, root))
    return out


def self_test():
    with tempfile.TemporaryDirectory(prefix="tt-spdx-") as d:
        with open(os.path.join(d, "a.c"), "w") as f:
            f.write("/* SPDX-License-Identifier: MIT */\nint a;\n")
        with open(os.path.join(d, "b.c"), "w") as f:
            f.write("int b;\n")
        with open(os.path.join(d, "notes.md"), "w") as f:
            f.write("no line, not a source\n")
        got = missing(d)
    if got != ["b.c"]:
        print("FAIL: self-test: expected ['b.c'], got %s" % got)
        return 1
    print("ok   self-test: the file without the line is found, and only it")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bad = missing(sys.argv[1])
    for p in bad:
        print("FAIL: %s has no SPDX-License-Identifier: MIT line in its first 400 bytes" % p)
    if not bad:
        print("ok   every source file carries SPDX-License-Identifier: MIT")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
