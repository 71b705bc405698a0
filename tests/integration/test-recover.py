#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kill -9 a recording halfway; tinytrace recover makes a trace that tinytrace verify accepts and
that holds every event the program reported as written. Usage: test-recover.py TINYTRACE MKPARTIAL"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step

TT, MK = map(os.path.abspath, sys.argv[1:3])


def main():
    d = tempfile.mkdtemp(prefix="tt-recover-")
    try:
        trace = os.path.join(d, "run.tt")
        p = subprocess.Popen([MK, trace], stdout=subprocess.PIPE, text=True)
        flushed = 0
        for _ in range(6):  # six batches written, then SIGKILL in the middle of the seventh
            line = p.stdout.readline()
            assert line.startswith("flushed "), line
            flushed = int(line.split()[1])
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        partial = [f for f in os.listdir(d) if f.endswith(".partial")]
        assert len(partial) == 1, os.listdir(d)
        src = os.path.join(d, partial[0])
        assert subprocess.run([TT, "verify", "-q", src]).returncode != 0, "a partial file verified"

        r = subprocess.run([TT, "recover", src], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "damage began at offset" in r.stdout, r.stdout
        v = subprocess.run([TT, "verify", "--json", trace], capture_output=True, text=True)
        assert v.returncode == 0, v.stdout + v.stderr
        events = json.loads(v.stdout)["events"]
        assert events >= flushed, f"recovered {events} events, the program had written {flushed}"
        info = subprocess.run([TT, "info", "--json", trace], capture_output=True, text=True)
        assert "recovered" in info.stdout, info.stdout
        # every recovered user event carries its own value, in order
        dump = subprocess.run([TT, "dump", "--json", "--kind", "user", trace],
                              capture_output=True, text=True)
        assert dump.returncode == 0, dump.stderr
        tags = [json.loads(l)["arg"] for l in dump.stdout.splitlines()]
        assert tags == list(range(len(tags))), "user values out of order or missing"
        assert len(tags) >= (flushed - 2) // 3, (len(tags), flushed)
        # recovering a closed trace is refused
        again = subprocess.run([TT, "recover", trace, "-o", os.path.join(d, "x.tt")],
                               capture_output=True)
        assert again.returncode == 3, again
        print(f"ok   recover keeps all {flushed} written events ({events} recovered)")
        print("1 passed, 0 failed")
        return 0
    except AssertionError as e:
        print(f"FAIL recover: {e}")
        print("0 passed, 1 failed")
        return 1
    finally:
        shutil.rmtree(d, ignore_errors=True)


sys.exit(main())
