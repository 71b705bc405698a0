#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py TRACE [--iterate] [--no-verify]: how long the reader takes over TRACE.

Prints, each on a line: the open (manifest, chunk walk, checksums, tables, index), the arrays
of every event (Trace.arrays(), thread order), and with --iterate one pass of Trace.events() in
recorded order, each in seconds and events per second, with the XXH3 and array implementations
used. For a trace of 10^7 events:
    build/bench/bench-index --events 10000000 /tmp/big.tt
    PYTHONPATH=python /usr/bin/python3 python/bench.py /tmp/big.tt
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinytrace  # noqa: E402
from tinytrace import _bulk  # noqa: E402


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    t0 = time.perf_counter()
    t = tinytrace.open(args[0], verify="--no-verify" not in sys.argv)
    t1 = time.perf_counter()
    n = t.manifest.event_count
    print("open    %.2f s  (%s checksums%s)" % (t1 - t0, tinytrace.hash_implementation(),
                                               "" if t.verify else ": skipped"))
    a = t.arrays()
    t2 = time.perf_counter()
    print("arrays  %.2f s  %d events, %.1f M events/s (%s)" % (
        t2 - t1, len(a), len(a) / (t2 - t1) / 1e6,
        "numpy" if _bulk.np is not None else "array.array"))
    print("total   %.2f s" % (t2 - t0))
    if "--iterate" in sys.argv:
        k = 0
        for _ in t.events():
            k += 1
        t3 = time.perf_counter()
        print("events  %.2f s  %d events, %.2f M events/s" % (t3 - t2, k, k / (t3 - t2) / 1e6))
    assert len(a) == n


if __name__ == "__main__":
    main()
