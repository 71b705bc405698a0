# SPDX-License-Identifier: MIT
"""What the tool's integration tests share (test-diff.py, test-export.py, test-export-perfetto.py,
test-report.py): running a program for its exit code and text output (run_text), with its
stderr on a pseudo-terminal, to see a progress line, and under maxrss, for its peak resident
set; and the checks themselves: check() prints and records each one, run_main() runs the
test in a temporary directory and exits 1 if any failed."""

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        if detail:
            print("     " + str(detail).replace("\n", "\n     ")[:4000])
        failures.append(what)
    return cond


def run_main(main, prefix):
    """main(tmp) in a fresh temporary directory, removed afterwards; exits with 1 if any
    check failed or main raised (a crash of the test itself is a failure, not a pass)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        main(tmp)
    except Exception as e:
        traceback.print_exc()
        failures.append("exception: %r" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)


def run_text(args, timeout, env=None, stdin=None):
    """(exit code, stdout, stderr) of @args (any objects, as strings), the output decoded as
    UTF-8 with invalid bytes replaced; @stdin: bytes for its standard input."""
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       input=stdin, env=env, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_pty_stderr(args, env, timeout):
    """Runs args with stderr on a pseudo-terminal; returns (exit code, stderr bytes)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL, stderr=slave,
                         env=env)
    os.close(slave)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1.0)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the slave side is closed
                break
            if not chunk:
                break
            data += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=timeout), data


def peak_rss_kib(maxrss, args, timeout):
    """Runs args under the maxrss program with stdout discarded; returns (exit code, peak RSS
    in KiB, -1 when maxrss printed none)."""
    p = subprocess.run([maxrss] + [str(a) for a in args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=timeout)
    m = re.search(rb"^maxrss (\d+)$", p.stderr, re.M)
    return p.returncode, int(m.group(1)) if m else -1
