#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A full disk (issue 5, acceptance 2). Usage: test-diskfull.py TINYTRACE MKFULL PROG-BIGRAND

Two ways to run out of room: RLIMIT_FSIZE (1 MiB: writes past it fail with EFBIG, and SIGXFSZ
must not kill the program), and, when running as root where a tmpfs can be mounted, a 4 MiB tmpfs
(ENOSPC; skipped with a note otherwise). Into each, two recordings that write far more:
  - mkfull, through the C API: the calls are accepted, then refused with TT_E_STOPPED; close
    reports TT_E_IO with the errno, naming the file;
  - prog-bigrand under `tinytrace record`: the program runs to its end and exits with its own
    status (3), the runtime reports the write error, the tool exits 7 (incomplete trace).
For every file: it keeps its final name and is marked incomplete, `tinytrace verify` and
`tinytrace replay` refuse it (exit 7, saying why), and `tinytrace recover` salvages what was
written before the error into a file that verifies, with mkfull's events in order, each with its
own tag and payload length."""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step

TT, MKFULL, BIGRAND = map(os.path.abspath, sys.argv[1:4])
EXIT_INCOMPLETE = 7
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + ("\n     " + detail.replace("\n", "\n     ") if detail else ""))
    return ok


def run(args, fsize=None, timeout=testwrap.timeout(120)):
    def limit():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                       preexec_fn=limit, timeout=timeout)
    r.what = " ".join(map(str, args))
    return r


def show(r):
    return "$ %s\nrc=%d\nstdout: %s\nstderr: %s" % (r.what, r.returncode, r.stdout[-2000:],
                                                     r.stderr[-2000:])


def check_refused_and_salvage(name, trace, errtext, work, user_events=None):
    """The file is incomplete, refused by verify and replay; recover saves a verifying prefix."""
    check(os.path.exists(trace) and not any(f.endswith(".partial")
                                            for f in os.listdir(os.path.dirname(trace))),
          name + ": the file keeps its final name, no partial file is left",
          str(os.listdir(os.path.dirname(trace))))
    check(oct(os.stat(trace).st_mode & 0o7777) == oct(0o600), name + ": the file is 0600")
    r = run([TT, "info", trace])
    check(r.returncode == EXIT_INCOMPLETE and "stopped after a write error" in r.stderr
          and errtext in r.stderr, name + ": the manifest says incomplete, with the error",
          show(r))
    r = run([TT, "verify", trace])
    check(r.returncode == EXIT_INCOMPLETE and "incomplete" in r.stderr and trace in r.stderr
          and errtext in r.stderr, name + ": verify refuses it naming the file and the error",
          show(r))
    r = run([TT, "replay", trace])
    check(r.returncode == EXIT_INCOMPLETE and "stopped after a write error" in r.stderr
          and errtext in r.stderr and r.stdout == "", name + ": replay refuses it, saying why "
          "and running nothing", show(r))
    out = os.path.join(work, name + "-recovered.tt")
    r = run([TT, "recover", trace, "-o", out])
    if not check(r.returncode == 0, name + ": recover salvages the chunks written before the "
                 "error", show(r)):
        return
    r = run([TT, "verify", "--json", out])
    events = json.loads(r.stdout).get("events", 0) if r.returncode == 0 else 0
    check(r.returncode == 0 and events > 0, name + ": the salvaged file verifies, %d events"
          % events, show(r))
    if user_events is not None:
        r = run([TT, "dump", "--json", "--kind", "user", out])
        rows = [json.loads(l) for l in r.stdout.splitlines()]
        tags = [row["arg"] for row in rows]
        lens = [row.get("len", row.get("payload_len")) for row in rows]
        want = [1000 + (i * 7919) % 3000 for i in range(len(tags))]
        check(r.returncode == 0 and 0 < len(tags) <= user_events
              and tags == list(range(len(tags))) and lens == want,
              name + ": %d salvaged user events in order, each with its own tag and length "
              "(%d accepted)" % (len(tags), user_events),
              show(r) if r.returncode else "tags %s... lens %s..." % (tags[:5], lens[:5]))


def scenario(name, where, fsize, errno_name, errtext, work):
    trace = os.path.join(where, "api.tt")
    r = run([MKFULL, trace, 6000], fsize=fsize)
    ok = check(r.returncode == 0, name + ": mkfull: calls accepted then refused, close "
               "reports the write error", show(r))
    words = r.stdout.split()
    if ok and len(words) == 8:
        accepted, refused, err = int(words[1]), int(words[3]), int(words[5])
        import errno
        check(accepted > 0 and refused > 0 and err == getattr(errno, errno_name),
              name + ": C API: %d accepted, %d refused, errno %d (%s)"
              % (accepted, refused, err, errno_name), r.stdout)
        check(errtext in r.stderr and trace in r.stderr and "offset" in r.stderr,
              name + ": close's message names the file, the offset and the error", r.stderr)
        check_refused_and_salvage(name + "-api", trace, errtext, work, accepted)
        os.unlink(trace)

    trace = os.path.join(where, "tool.tt")
    r = run([TT, "record", "-o", trace, "--", BIGRAND, 4000, 3], fsize=fsize)
    check(r.returncode == EXIT_INCOMPLETE and "reads=4000 " in r.stdout
          and "exited with status 3" in r.stderr,
          name + ": tinytrace record: the program ran to its end and exited with its own "
          "status 3, the tool exits 7", show(r))
    check(errtext in r.stderr and "offset" in r.stderr and trace in r.stderr,
          name + ": the runtime reports the write error, the file and the offset", show(r))
    if os.path.exists(trace):
        check_refused_and_salvage(name + "-tool", trace, errtext, work)


def main():
    work = tempfile.mkdtemp(prefix="tt-diskfull-")
    try:
        d = os.path.join(work, "fsize")
        os.mkdir(d)
        scenario("fsize", d, 1 << 20, "EFBIG", os.strerror(27), work)
        mnt = os.path.join(work, "tmpfs")
        os.mkdir(mnt)
        mounted = False
        if os.geteuid() == 0:
            m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", mnt],
                               capture_output=True, text=True)
            mounted = m.returncode == 0
        if mounted:
            try:
                scenario("tmpfs", mnt, None, "ENOSPC", os.strerror(28), work)
            finally:
                subprocess.run(["umount", mnt])
        else:
            print("skip tmpfs: needs root and a tmpfs mount (the RLIMIT_FSIZE part ran)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
