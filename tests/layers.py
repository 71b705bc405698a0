#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering rule of docs/ARCHITECTURE.md, checked on the sources.

Every `#include "..."` of a file under libtrace/<layer>/ must name a header of its own layer or
of a layer it may use; the tool (tools/) may include its own headers and the runtime-tool
contract (libtrace/instrument/protocol.h) only. The build enforces the same thing through each
layer's include directories; this test also catches a path written to get round them
("../record/record.h") and names the line.

Usage: layers.py SOURCE_ROOT [FILE...]   (FILEs: check only these)
       layers.py --self-test                (the check fails where it must)
Exits 0 when every include keeps the rule, 1 with one line per include that does not.
"""
import os
import re
import sys

# layer -> the layers whose headers it may include (itself included); keep in step with
# libtrace/meson.build's layer_dirs
ALLOWED = {
    "base": ["base"],
    "format": ["base", "format"],
    "store": ["base", "format", "store"],
    "session": ["base", "session"],
    "checkpoint": ["base", "format", "session", "checkpoint"],
    "record": ["base", "format", "session", "checkpoint", "record"],
    "replay": ["base", "format", "store", "session", "checkpoint", "replay"],
    "event": ["base", "format", "store", "session", "checkpoint", "record", "replay", "event"],
    "instrument": ["base", "format", "session", "record", "event", "instrument"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def headers_of(root):
    """header name -> the layers that hold a header of that name"""
    found = {}
    for layer in ALLOWED:
        top = os.path.join(root, "libtrace", layer)
        for dirpath, _, names in os.walk(top):
            for n in names:
                if n.endswith(".h"):
                    found.setdefault(n, set()).add(layer)
    return found


def layer_of(root, path):
    rel = os.path.relpath(os.path.abspath(path), os.path.join(root, "libtrace"))
    first = rel.split(os.sep)[0]
    return first if first in ALLOWED else None


def check_file(root, path, headers, problems):
    rel = os.path.relpath(path, root)
    in_tools = rel.split(os.sep)[0] == "tools"
    layer = layer_of(root, path)
    if not in_tools and layer is None:
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1)
            here = os.path.join(os.path.dirname(path), name)
            if in_tools:
                if name == "protocol.h" or ("/" not in name and os.path.exists(here)):
                    continue
                problems.append(f"{rel}:{no}: the tool includes \"{name}\": only tools/ headers "
                                "and protocol.h (docs/ARCHITECTURE.md)")
                continue
            if "/" in name or name.startswith("."):
                target = os.path.normpath(here)
                tl = layer_of(root, target)
                if tl is None or tl not in ALLOWED[layer]:
                    problems.append(f"{rel}:{no}: layer {layer} includes \"{name}\" by a path "
                                    f"into {tl or 'outside the layers'}")
                elif tl != layer or os.path.dirname(target) != os.path.dirname(path):
                    problems.append(f"{rel}:{no}: \"{name}\": include a header by its name, "
                                    "through the layer's include directories")
                continue
            if os.path.exists(here):
                continue  # a header beside the file: its own layer
            owners = headers.get(name)
            if not owners:
                problems.append(f"{rel}:{no}: \"{name}\" is no header of any layer")
                continue
            if not owners & set(ALLOWED[layer]):
                problems.append(f"{rel}:{no}: layer {layer} includes \"{name}\" of layer "
                                f"{'/'.join(sorted(owners))}, which it may not use")


def self_test():
    """The check must fail on a wrong include: a fake tree where base/ includes record.h, a
    store file reaches into replay/ by a path, and the tool includes a library header."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        def put(rel, text):
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        put("libtrace/record/record.h", "")
        put("libtrace/replay/replay-int.h", "")
        put("libtrace/base/base.h", "")
        put("libtrace/base/ok.c", '#include "base.h"\n')
        put("libtrace/base/bad.c", '#include "record.h"\n')
        put("libtrace/store/bad.c", '#include "../replay/replay-int.h"\n')
        put("tools/cmd-x.c", '#include "record.h"\n')
        problems = []
        headers = headers_of(d)
        for rel in ("libtrace/base/ok.c", "libtrace/base/bad.c", "libtrace/store/bad.c",
                    "tools/cmd-x.c"):
            check_file(d, os.path.join(d, rel), headers, problems)
        want = ["libtrace/base/bad.c:1", "libtrace/store/bad.c:1", "tools/cmd-x.c:1"]
        got = [p.split(": ")[0] for p in problems]
        if got != want:
            print("self-test: expected problems at", want, "got", problems)
            return 1
    print("self-test: the three wrong includes are caught, the right one passes")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1])
    headers = headers_of(root)
    files = sys.argv[2:]
    if not files:
        for top in ("libtrace", "tools"):
            for dirpath, _, names in os.walk(os.path.join(root, top)):
                for n in names:
                    if n.endswith((".c", ".h")):
                        files.append(os.path.join(dirpath, n))
    problems = []
    for path in sorted(files):
        check_file(root, path, headers, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the layering of docs/ARCHITECTURE.md")
        return 1
    print(f"{len(files)} files: every include keeps the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
