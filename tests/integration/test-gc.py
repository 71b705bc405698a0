#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tinytrace gc: removes a dead recording's partial file, and never a live one's, a file that is
not a trace, or a symlink. Usage: test-gc.py TINYTRACE PRELOAD"""
import os
import signal
import subprocess
import sys
import tempfile
import shutil
import time

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step

TT, PRELOAD = map(os.path.abspath, sys.argv[1:3])
ENV = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD)


MANIFEST_SIZE = 512  # TT_MANIFEST_SIZE: a partial file is a trace once its manifest is written


def wait_for_partial(d, prefix, deadline=20.0):
    """The name of the partial file once it holds its manifest: the file exists before the
    runtime has written a byte, and a recording killed then leaves an empty file, which is not
    a trace and which gc rightly leaves alone."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for f in os.listdir(d):
            if f.startswith(prefix) and f.endswith(".partial"):
                try:
                    if os.path.getsize(os.path.join(d, f)) >= MANIFEST_SIZE:
                        return f
                except FileNotFoundError:
                    pass
        time.sleep(0.01)
    raise AssertionError(f"no {prefix}*.partial with a manifest within {deadline} s: "
                         f"{os.listdir(d)}")


def main():
    d = tempfile.mkdtemp(prefix="tt-gc-")
    live = None
    try:
        # a recording killed by SIGKILL leaves its partial file; its process is gone (the two
        # recordings are set-up, never under the valgrind step's wrapper: testwrap.Unwrapped)
        dead = testwrap.Unwrapped([TT, "record", "-o", os.path.join(d, "dead.tt"), "--",
                                   "sleep", "30"], env=ENV, stderr=subprocess.PIPE)
        dead_file = wait_for_partial(d, "dead.tt.")
        dead_pid = int(dead_file.split(".")[-2])
        os.kill(dead_pid, signal.SIGKILL)
        dead.wait(timeout=30)
        assert os.path.exists(os.path.join(d, dead_file)), "SIGKILL left no partial file"

        # a live recording
        live = testwrap.Unwrapped([TT, "record", "-o", os.path.join(d, "live.tt"), "--",
                                   "sleep", "30"], env=ENV, stderr=subprocess.PIPE)
        live_file = wait_for_partial(d, "live.tt.")

        # not a trace, with a dead pid in its name; and a symlink to the dead trace
        with open(os.path.join(d, f"other.{dead_pid}.partial"), "wb") as f:
            f.write(b"not a trace at all")
        os.symlink(os.path.join(d, dead_file), os.path.join(d, f"link.{dead_pid}.partial"))

        dry = subprocess.run([TT, "gc", "--dry-run", d], capture_output=True, text=True)
        assert dry.returncode == 0 and "would remove" in dry.stdout, dry.stdout + dry.stderr
        assert os.path.exists(os.path.join(d, dead_file)), "--dry-run removed a file"

        r = subprocess.run([TT, "gc", d], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        left = set(os.listdir(d))
        assert dead_file not in left, f"dead partial kept: {r.stdout}"
        assert live_file in left, f"live partial removed: {r.stdout}"
        assert f"other.{dead_pid}.partial" in left, "removed a file that is not a trace"
        assert f"link.{dead_pid}.partial" in left, "removed a symlink"
        assert "kept" in r.stdout and "alive" in r.stdout and "lock" in r.stdout, r.stdout
        assert "1 removed" in r.stderr, r.stderr

        bad = subprocess.run([TT, "gc", os.path.join(d, "missing")], capture_output=True)
        assert bad.returncode == 6, bad
        usage = subprocess.run([TT, "gc", d, d], capture_output=True)
        assert usage.returncode == 2, usage
    except AssertionError as e:
        print(f"FAIL gc: {e}")
        print("0 passed, 1 failed")
        return 1
    finally:
        if live and live.poll() is None:
            for f in os.listdir(d):
                if f.startswith("live.tt.") and f.endswith(".partial"):
                    try:
                        os.kill(int(f.split(".")[-2]), signal.SIGKILL)
                    except (ValueError, ProcessLookupError):
                        pass
            live.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)
    print("ok   gc removes only a dead recording's partial file")
    print("1 passed, 0 failed")
    return 0


sys.exit(main())
