#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Perfetto field numbers, three times written, agree.

    check-schema.py SOURCE_ROOT            check
    check-schema.py SOURCE_ROOT --self-test  and show that a wrong number is found

The exporter's numbers are in tools/perfetto.h (enum pf_field, each with a comment naming
Message.field), the schema that protoc decodes with is tests/perfetto/trace-subset.proto, and the
table of docs/DIFF-AND-EXPORT.md says where each number comes from in Perfetto's own .proto files.
Every field of the schema must be in the table with the same number, every row of the table in
the schema, and every enum entry of the header in the table with its number.
"""

import os
import re
import sys


def doc_fields(text):
    """(Message, field) -> number, from the rows "| `Message` | `field` | N | ... |"."""
    out = {}
    for m in re.finditer(r"^\| `([\w.]+)` \| `(\w+)` \| (\d+) \|", text, re.M):
        out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


def proto_fields(text):
    out, stack = {}, []
    for line in text.splitlines():
        line = line.split("//")[0].strip()
        m = re.match(r"message (\w+) \{", line)
        if m:
            stack.append(m.group(1))
            continue
        if line.startswith("enum "):
            stack.append(None)
            continue
        if line == "}":
            stack.pop()
            continue
        m = re.match(r"(?:optional|repeated|required) [\w.]+ (\w+) = (\d+);", line)
        if m and stack and None not in stack:
            out[(".".join(stack), m.group(1))] = int(m.group(2))
    return out


def header_fields(text):
    out = {}
    for m in re.finditer(r"PF_\w+ = (\d+),\s*/\* ([\w.]+)\.(\w+) \*/", text):
        out[(m.group(2), m.group(3))] = int(m.group(1))
    return out


def problems(doc, proto, header):
    errs = []
    for k, v in proto.items():
        if doc.get(k) != v:
            errs.append("schema %s.%s = %d, docs say %s" % (k[0], k[1], v, doc.get(k)))
    for k, v in doc.items():
        if proto.get(k) != v:
            errs.append("docs %s.%s = %d, schema says %s" % (k[0], k[1], v, proto.get(k)))
    for k, v in header.items():
        if doc.get(k) != v:
            errs.append("tools/perfetto.h %s.%s = %d, docs say %s" % (k[0], k[1], v, doc.get(k)))
    if not header or not doc or not proto:
        errs.append("nothing found: header %d, docs %d, schema %d fields" %
                    (len(header), len(doc), len(proto)))
    return errs


def main():
    root = sys.argv[1]
    read = lambda p: open(os.path.join(root, p), encoding="utf-8").read()
    doc = doc_fields(read("docs/DIFF-AND-EXPORT.md"))
    proto = proto_fields(read("tests/perfetto/trace-subset.proto"))
    header = header_fields(read("tools/perfetto.h"))
    errs = problems(doc, proto, header)
    for e in errs:
        print("FAIL " + e)
    if "--self-test" in sys.argv:
        k = next(iter(proto))
        wrong = dict(proto)
        wrong[k] += 1
        found = problems(doc, wrong, header)
        print(("ok   " if found else "FAIL ") + "a wrong number in the schema is found: %s" %
              (found[:1],))
        errs += [] if found else ["self-test"]
    if not errs:
        print("ok   %d fields agree in the docs, the schema and tools/perfetto.h (%d of them)" %
              (len(proto), len(header)))
    sys.exit(1 if errs else 0)


if __name__ == "__main__":
    main()
