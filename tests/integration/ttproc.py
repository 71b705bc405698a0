"""Running a program the way two integration tests need it (test-diff.py, test-export.py):
with its stderr on a pseudo-terminal, to see a progress line, and under maxrss, for its peak
resident set."""

import os
import pty
import re
import select
import subprocess
import time


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
