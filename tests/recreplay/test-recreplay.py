#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of `tinytrace record` and `tinytrace replay`.

    test-recreplay.py TINYTRACE PRELOAD PROG_TIME PROG_TIME_NOBID MKMETA

PROG_TIME prints what it reads from the clocks, getrandom and getpid (see prog-time.c);
PROG_TIME_NOBID is the same program linked without a GNU build-id note; MKMETA writes traces
with chosen META objects (the recorded command line) with the library, and an incomplete one.

Covers: record then replay prints the recorded output and exits 0, from another directory
too; record passes the program's exit status through (128+N for a signal); a run that leaves
no trace; the replay report (--report); divergence (1) and a program that ends early (5);
build mismatch (4) against a copy whose build-id note was patched, a program without a
build-id and "#!" scripts, and --allow-build-mismatch; usage errors (2) that run nothing;
a missing trace (6); corrupt and truncated traces (3) and an incomplete one (7) that run
nothing; damaged recorded command lines; damaged program files that the build-id reader must
survive.

Every test runs in its own temporary directory, removed at the end whatever happens. Every
check runs; failures are collected and listed at the end, and the exit status is 1 if any
failed.
"""

import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile

TIMEOUT = 60  # seconds for one command: a hang is a failure, not a stuck test run

EXIT_OK, EXIT_DIVERGED, EXIT_USAGE, EXIT_CORRUPT = 0, 1, 2, 3
EXIT_BUILD, EXIT_EARLY_END, EXIT_SYSTEM, EXIT_INCOMPLETE = 4, 5, 6, 7
SIGSEGV, SIGKILL = 11, 9

failures = []
TT = PRELOAD = PROG = PROG_NOBID = MKMETA = None


def check(cond, what, detail=""):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what + (("\n     " + detail.replace("\n", "\n     ")) if detail else ""))
        failures.append(what)
    return cond


class Result:
    def __init__(self, args, rc, out, err, cwd):
        self.args, self.rc, self.out, self.err, self.cwd = args, rc, out, err, cwd

    def __str__(self):
        return "$ (cd %s; %s)\nexit %s\nstdout: %s\nstderr: %s" % (
            self.cwd, " ".join(self.args), self.rc, self.out[:3000], self.err[:3000])


def clean_env(extra=None):
    """The environment of the tool: nothing tinytrace-related inherited from the caller."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TINYTRACE_") and k != "LD_PRELOAD"}
    # In a sanitizer build, preloading a library that pulls in the sanitizer runtime would
    # otherwise be refused by the program's own sanitizer runtime; and a SIGSEGV must kill the
    # program as in a plain build, not be turned into exit status 1 by ASan's handler.
    env.setdefault("ASAN_OPTIONS", "verify_asan_link_order=0:handle_segv=0")
    if extra:
        env.update(extra)
    return env


def run(args, cwd, env=None):
    args = [str(a) for a in args]
    try:
        p = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT, env=clean_env(env))
    except subprocess.TimeoutExpired:
        return Result(args, "timeout", "", "", cwd)
    return Result(args, p.returncode, p.stdout.decode("utf-8", "replace"),
                  p.stderr.decode("utf-8", "replace"), cwd)


def tt(cwd, *args, env=None):
    return run([TT] + list(args), cwd, env)


def expect_rc(r, rc, what):
    return check(r.rc == rc, "%s: exit %d" % (what, rc), str(r))


class TempDir:
    """A fresh directory for one test, removed at the end whatever happens."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="tt-recreplay-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": str(e)}


def copy_prog(d, name="prog-time", src=None):
    """A copy of the test program in d, to be run as ./name."""
    dst = os.path.join(d, name)
    shutil.copy2(src or PROG, dst)
    return dst


def manifest(d, trace):
    r = tt(d, "info", "--json", trace)
    if r.rc != 0:
        return None
    return json.loads(r.out)["manifest"]


def record(d, *args, env=None):
    return tt(d, "record", *args, env=env)


SUMMARY = re.compile(r"tinytrace: recorded (\S+): (\d+) events, (\d+) bytes, (\d+) threads?")


# ------------------------------------------------------------------------------------------
def test_record_then_replay():
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "--", "./prog-time")
        expect_rc(r, EXIT_OK, "record ./prog-time")
        trace = os.path.join(d, "prog-time.tt")
        check(os.path.isfile(trace), "record writes PROG.tt in the current directory", str(r))
        m = SUMMARY.search(r.err)
        check(m is not None and m.group(1) == "prog-time.tt",
              "record prints 'recorded FILE: N events, B bytes, T thread'", str(r))
        if m is not None:
            check(int(m.group(3)) == os.path.getsize(trace),
                  "the summary's bytes are the file's size", str(r))
        check("the program exited with status 0" in r.err, "record says how the program ended",
              str(r))
        check(not any(f.endswith(".partial") for f in os.listdir(d)),
              "record leaves no partial file", str(os.listdir(d)))
        recorded = r.out
        check(re.match(r"realtime=\d+\.\d+ monotonic=\d+\.\d+ .* random=[0-9a-f]{16} pid=\d+\n$",
                       recorded) is not None, "prog-time printed its line", str(r))
        v = tt(d, "verify", trace)
        expect_rc(v, EXIT_OK, "the recorded trace verifies")
        man = manifest(d, trace)
        check(man is not None and len(man["build_id"]) == 40,
              "the manifest holds a 20-byte build-id", str(man))
        check(man is not None and man["caller"] == "tinytrace record --check-output",
              "record notes itself as the caller, with the output always recorded", str(man))

        # a plain second run prints something else: the replay below is not a coincidence
        plain = run([os.path.join(d, "prog-time")], d)
        check(plain.out != recorded, "two plain runs print different lines",
              "%r vs %r" % (plain.out, recorded))

        # replay from another directory: the recorded command line (./prog-time) runs in the
        # recorded directory
        with TempDir() as elsewhere:
            r = tt(elsewhere, "replay", trace)
            expect_rc(r, EXIT_OK, "replay of the recorded command line")
            check(r.out == recorded, "replay prints the recorded output",
                  "recorded: %r\nreplayed: %r\n%s" % (recorded, r.out, r))
            check("the program exited with status 0" in r.err, "replay says how the program ended",
                  str(r))
            check("replay matched the recording" in r.err, "replay says it matched", str(r))

            # the same, with the report written out
            rep = os.path.join(elsewhere, "report.json")
            r = tt(elsewhere, "replay", "--report", rep, trace)
            expect_rc(r, EXIT_OK, "replay --report")
            try:
                with open(rep) as f:
                    doc = json.load(f)
            except (OSError, ValueError) as e:
                doc = {"error": str(e)}
            check(doc.get("status") == "matched", "--report holds {\"status\": \"matched\"}",
                  str(doc))

            # an explicit program: the same file, named after --
            r = tt(elsewhere, "replay", trace, "--", os.path.join(d, "prog-time"))
            expect_rc(r, EXIT_OK, "replay FILE -- PROG")
            check(r.out == recorded, "replay FILE -- PROG prints the recorded output",
                  "recorded: %r\nreplayed: %r" % (recorded, r.out))

        # replay with options before the file, and with TINYTRACE_PRELOAD given
        r = tt(d, "replay", "--ordered", "prog-time.tt",
               env={"TINYTRACE_PRELOAD": PRELOAD})
        expect_rc(r, EXIT_OK, "replay --ordered FILE with TINYTRACE_PRELOAD set")
        check(r.out == recorded, "replay --ordered prints the recorded output",
              "recorded: %r\nreplayed: %r" % (recorded, r.out))


def test_exit_status():
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "-o", "three.tt", "--", "./prog-time", "--exit", "3")
        expect_rc(r, 3, "record exits with the program's status")
        check(os.path.isfile(os.path.join(d, "three.tt")), "record -o FILE writes FILE", str(r))
        check("the program exited with status 3" in r.err, "record reports status 3", str(r))
        r = tt(d, "replay", "three.tt")
        expect_rc(r, EXIT_OK, "replay of a run that exited 3 matched")
        check("the program exited with status 3" in r.err,
              "replay prints the program's own status", str(r))

        # a TINYTRACE_PID inherited from a traced parent does not stop the program being traced
        r = record(d, "-o", "pid.tt", "--", "./prog-time", env={"TINYTRACE_PID": "1"})
        expect_rc(r, EXIT_OK, "record with a stray TINYTRACE_PID in the environment")
        check(os.path.isfile(os.path.join(d, "pid.tt")), "... still writes the trace", str(r))

        # the same file again: refused, unless --force; then a new trace replaces the old one
        before = os.stat(os.path.join(d, "three.tt")).st_ino
        r = record(d, "-o", "three.tt", "--", "./prog-time", "--exit", "4")
        expect_rc(r, EXIT_USAGE, "record over an existing trace without --force")
        check(os.stat(os.path.join(d, "three.tt")).st_ino == before,
              "... leaves the old file", str(r))
        r = record(d, "-o", "three.tt", "--force", "--", "./prog-time", "--exit", "4")
        expect_rc(r, 4, "record --force over an existing trace")
        check(os.stat(os.path.join(d, "three.tt")).st_ino != before,
              "the new trace replaced the old file", str(r))

        # a crash: 128 + SIGSEGV, and the trace is kept and verifies
        r = record(d, "-o", "crash.tt", "--", "./prog-time", "--crash")
        expect_rc(r, 128 + SIGSEGV, "record of a crashing program exits 128+SIGSEGV")
        check("signal %d" % SIGSEGV in r.err, "record names the signal", str(r))
        if check(os.path.isfile(os.path.join(d, "crash.tt")), "a crashing run leaves its trace",
                 str(r)):
            expect_rc(tt(d, "verify", "crash.tt"), EXIT_OK, "the crash trace verifies")
            # no report can be written by a program that dies by a signal (the runtime's
            # destructor does not run): the contract says exit 6, naming the signal
            r = tt(d, "replay", "crash.tt")
            check(r.rc in (EXIT_OK, EXIT_SYSTEM), "replay of a crash: 0 or 6", str(r))
            check("signal %d" % SIGSEGV in r.err, "replay of a crash names the signal", str(r))

        # SIGKILL: nothing in the program can finish the file
        r = record(d, "-o", "killed.tt", "--", "./prog-time", "--kill")
        expect_rc(r, EXIT_SYSTEM, "record of a program killed by SIGKILL")
        check("no trace was written" in r.err and "partial" in r.err,
              "record says no trace was written and names the partial file", str(r))
        for f in os.listdir(d):
            if f.endswith(".partial"):
                os.unlink(os.path.join(d, f))


def test_replay_outcomes():
    """Divergence and early end; these need the runtime to interpose the clock."""
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "-o", "t.tt", "--", "./prog-time")
        if not expect_rc(r, EXIT_OK, "record for the outcome tests"):
            return
        # the calls themselves: the output (compared by default) is left out here, so that the
        # extra read meets the end of the recording rather than its buffered output
        r = tt(d, "replay", "--no-check-output", "t.tt", "--", "./prog-time", "--extra")
        expect_rc(r, EXIT_DIVERGED, "a program that makes a call more diverges")
        check("diverged" in r.err, "replay says it diverged", str(r))
        rep = os.path.join(d, "div.json")
        r = tt(d, "replay", "--no-check-output", "--keep-going", "--report", rep, "t.tt", "--",
               "./prog-time", "--extra")
        expect_rc(r, EXIT_DIVERGED, "replay --keep-going of a diverging program")
        try:
            with open(rep) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            doc = {"error": str(e)}
        check(doc.get("status") == "diverged", "the report says diverged", str(doc))

        # the place of an "end" divergence: just after the last matched event
        r = tt(d, "replay", "--no-check-output", "--force", "--report", rep, "t.tt", "--", "./prog-time",
               "--extra")
        expect_rc(r, EXIT_DIVERGED, "replay --report of a program that makes a call more")
        doc = load_json(rep)
        hist = doc.get("history") or [{}]
        check(doc.get("reason") == "end" and doc.get("seq") is not None and
              doc.get("seq") == hist[-1].get("seq", -2) + 1,
              "an end divergence is placed after the last matched event", str(doc)[:600])

        r = tt(d, "replay", "--no-check-output", "t.tt", "--", "./prog-time", "--fewer")
        expect_rc(r, EXIT_EARLY_END, "a program that skips calls ends before the recording")

        # --keep-going: divergences counted, then the program ends early: diverged (1), not 5
        # (the output of the extra read is missing: a divergence, and the read is left)
        r = record(d, "-o", "co.tt", "--check-output", "--", "./prog-time", "--extra")
        expect_rc(r, EXIT_OK, "record --check-output for the keep-going test")
        r = tt(d, "replay", "--keep-going", "--force", "--report", rep, "co.tt", "--", "./prog-time")
        expect_rc(r, EXIT_DIVERGED, "replay --keep-going that diverges, then ends early")
        doc = load_json(rep)
        check(doc.get("divergences", 0) > 0 and doc.get("reason") == "site" and
              (doc.get("expected") or {}).get("site") == "clock_gettime(CLOCK_MONOTONIC)" and
              (doc.get("actual") or {}).get("site") == "write",
              "... its report counts the divergences and shows the last one", str(doc)[:600])

        # the report never names the trace itself, and never keeps an earlier run's verdict
        with open(os.path.join(d, "t.tt"), "rb") as f:
            before = f.read()
        r = tt(d, "replay", "--report", "t.tt", "t.tt")
        expect_rc(r, EXIT_USAGE, "replay --report naming the trace itself")
        with open(os.path.join(d, "t.tt"), "rb") as f:
            check(f.read() == before, "... leaves the trace as it was", str(r))
        r = tt(d, "replay", "--force", "--report", rep, "t.tt")
        expect_rc(r, EXIT_OK, "replay --report of a matching run")
        check(load_json(rep).get("status") == "matched", "the report says matched")
        with open(os.path.join(d, "cut.tt"), "wb") as f:
            f.write(before[:len(before) // 2])
        r = tt(d, "replay", "--report", rep, "cut.tt")
        expect_rc(r, EXIT_USAGE, "replay --report onto an earlier report, without --force")
        r = tt(d, "replay", "--force", "--report", rep, "cut.tt")
        expect_rc(r, EXIT_CORRUPT, "replay --force --report of a truncated trace")
        check(load_json(rep).get("status") == "error",
              "... replaces the earlier report with an error", str(load_json(rep))[:300])

        # a relative TMPDIR, while the program runs in the recorded directory
        sub = os.path.join(d, "sub")
        os.mkdir(sub)
        os.mkdir(os.path.join(d, "tdir"))
        r = record(sub, "-o", os.path.join(d, "s.tt"), "--", os.path.join(d, "prog-time"))
        expect_rc(r, EXIT_OK, "record in a subdirectory")
        r = tt(d, "replay", "s.tt", env={"TMPDIR": "tdir"})
        expect_rc(r, EXIT_OK, "replay with a relative TMPDIR from another directory")

        # recorded through the environment with allocations: the tool leaves TINYTRACE_ALLOC
        env = {"LD_PRELOAD": PRELOAD, "TINYTRACE_MODE": "record", "TINYTRACE_ALLOC": "1",
               "TINYTRACE_FILE": os.path.join(d, "env.tt")}
        r = run(["./prog-time"], d, env=env)
        if expect_rc(r, EXIT_OK, "record through the environment, with TINYTRACE_ALLOC=1"):
            r = tt(d, "replay", "--trust", "env.tt", env={"TINYTRACE_ALLOC": "1"})
            expect_rc(r, EXIT_OK, "... replays with TINYTRACE_ALLOC=1 through the tool")

        # --check-output: recorded with it, replay compares; recorded without, refused
        r = record(d, "-o", "out.tt", "--check-output", "--", "./prog-time")
        expect_rc(r, EXIT_OK, "record --check-output")
        recorded = r.out
        r = tt(d, "replay", "out.tt")
        expect_rc(r, EXIT_OK, "replay of a --check-output recording")
        check(r.out == recorded, "replay of a --check-output recording prints the same",
              "recorded: %r\nreplayed: %r" % (recorded, r.out))
        # a recording made through the environment without TINYTRACE_CHECK_OUTPUT says nothing
        # of how it was made; `tinytrace record` always records the output now (issue 14)

        # --alloc: the replay interposes allocations too, because the recording did
        r = record(d, "-o", "alloc.tt", "--alloc", "--", "./prog-time")
        expect_rc(r, EXIT_OK, "record --alloc")
        recorded = r.out
        man = manifest(d, "alloc.tt")
        check(man is not None and man["caller"] == "tinytrace record --alloc --check-output",
              "the caller string notes --alloc", str(man))
        r = tt(d, "replay", "alloc.tt")
        expect_rc(r, EXIT_OK, "replay of an --alloc recording")
        check(r.out == recorded, "replay of an --alloc recording prints the same",
              "recorded: %r\nreplayed: %r" % (recorded, r.out))


def test_recorded_directory_gone():
    with TempDir() as d:
        sub = os.path.join(d, "sub")
        os.mkdir(sub)
        r = record(sub, "-o", os.path.join(d, "t.tt"), "--", PROG)
        if not expect_rc(r, EXIT_OK, "record in a directory that goes away"):
            return
        os.rmdir(sub)
        r = tt(d, "replay", "t.tt")
        expect_rc(r, EXIT_OK, "replay when the recorded directory is gone")
        check("is gone" in r.err, "replay notes the directory is gone", str(r))


def patched_copy(d, trace, name):
    """A copy of the program whose build-id note differs in its last byte."""
    man = manifest(d, trace)
    bid = bytes.fromhex(man["build_id"])
    with open(PROG, "rb") as f:
        data = bytearray(f.read())
    check(data.count(bid) == 1, "the build-id occurs once in the program file",
          "%d times" % data.count(bid))
    at = data.find(bid) + len(bid) - 1
    data[at] ^= 0xff
    dst = os.path.join(d, name)
    with open(dst, "wb") as f:
        f.write(data)
    os.chmod(dst, 0o755)
    bid2 = bytes(data[at - len(bid) + 1:at + 1])
    return dst, bid.hex(), bid2.hex()


def test_build_mismatch():
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "-o", "t.tt", "--", "./prog-time", "--touch", "ran")
        if not expect_rc(r, EXIT_OK, "record for the build tests"):
            return
        recorded = r.out
        os.unlink(os.path.join(d, "ran"))

        patched, want, have = patched_copy(d, "t.tt", "patched")
        r = tt(d, "replay", "t.tt", "--", "./patched", "--touch", "ran")
        expect_rc(r, EXIT_BUILD, "replay with a patched build-id is refused")
        check(want in r.err and have in r.err, "the refusal names both build-ids",
              "recorded %s, patched %s\n%s" % (want, have, r))
        check(not os.path.exists(os.path.join(d, "ran")) and r.out == "",
              "a refused replay runs nothing", str(r))

        r = tt(d, "replay", "--allow-build-mismatch", "t.tt", "--", "./patched", "--touch", "ran")
        check(os.path.exists(os.path.join(d, "ran")), "--allow-build-mismatch runs the program",
              str(r))
        check(want in r.err and have in r.err, "--allow-build-mismatch still names both ids",
              str(r))
        expect_rc(r, EXIT_OK, "replay --allow-build-mismatch of the same code matched")
        check(r.out == recorded, "replay --allow-build-mismatch prints the recorded output",
              "recorded: %r\nreplayed: %r" % (recorded, r.out))

        # a program without a build-id
        copy_prog(d, "nobid", PROG_NOBID)
        r = tt(d, "replay", "t.tt", "--", "./nobid")
        expect_rc(r, EXIT_BUILD, "replay with a program without build-id is refused")
        check(want in r.err and "none" in r.err, "the refusal names the id and 'none'", str(r))

        # a recording without a build-id replays with the same program, with a note
        r = record(d, "-o", "nobid.tt", "--", "./nobid")
        expect_rc(r, EXIT_OK, "record a program without build-id")
        check("no GNU build-id" in r.err, "record notes the missing build-id", str(r))
        man = manifest(d, "nobid.tt")
        check(man is not None and man["build_id"] == "", "its manifest has no build-id", str(man))
        r = tt(d, "replay", "nobid.tt")
        expect_rc(r, EXIT_OK, "replay of a program without build-id")
        r = tt(d, "replay", "nobid.tt", "--", "./prog-time")
        expect_rc(r, EXIT_BUILD, "a build-id where the recording had none is a mismatch")

        # scripts: the build that runs is the interpreter's
        script = os.path.join(d, "script.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o755)
        r = tt(d, "replay", "t.tt", "--", "./script.sh")
        expect_rc(r, EXIT_BUILD, "replay with a #!/bin/sh script is another build")
        check("/bin/sh" in r.err, "the refusal names the interpreter", str(r))
        envscript = os.path.join(d, "envscript")
        with open(envscript, "w") as f:
            f.write("#!/usr/bin/env -S nobid --flag\n")
        os.chmod(envscript, 0o755)
        r = tt(d, "replay", "t.tt", "--", "./envscript", env={"PATH": d + ":/usr/bin:/bin"})
        expect_rc(r, EXIT_BUILD, "replay with a #!/usr/bin/env script")
        check(os.path.join(d, "nobid") in r.err,
              "env is followed to the program it runs, through PATH", str(r))


def test_damaged_programs():
    """The build-id reader on truncated and mutated ELF files: a verdict, never a crash. The
    copies are not executable, so a copy that passes the check is not run (exec fails: 6)."""
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "-o", "t.tt", "--", "./prog-time")
        if not expect_rc(r, EXIT_OK, "record for the damaged-program tests"):
            return
        with open(PROG, "rb") as f:
            data = f.read()
        sizes = [0, 1, 3, 4, 16, 63, 64, 65, 100, 200, 500, 1000, 4000, len(data) // 2,
                 len(data) - 1]
        rng = random.Random(20261130)
        cases = [("truncated to %d" % n, data[:n]) for n in sizes]
        for i in range(150):
            m = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                # mostly the ELF header and the program headers, sometimes anywhere
                at = rng.randrange(0, 64 + 56 * 16) if rng.random() < 0.8 else rng.randrange(
                    len(m))
                m[at] = rng.randrange(256)
            cases.append(("mutation %d" % i, bytes(m)))
        bad = []
        path = os.path.join(d, "damaged")
        for what, content in cases:
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, 0o644)
            r = tt(d, "replay", "t.tt", "--", "./damaged")
            if r.rc not in (EXIT_BUILD, EXIT_SYSTEM) or r.out != "":
                bad.append("%s: %s" % (what, r))
        check(not bad, "damaged program files are refused (4) or not run (6), never a crash",
              "\n".join(bad[:5]))


def test_usage_errors():
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "-o", "t.tt", "--", "./prog-time")
        if not expect_rc(r, EXIT_OK, "record for the usage tests"):
            return
        os.mkdir(os.path.join(d, "adir"))
        marker = ["./prog-time", "--touch", "ran"]
        record_cases = [
            ([], "record without a program"),
            (["--"], "record -- without a program"),
            (["--bogus", "--"] + marker, "record with an unknown option"),
            (["--buffer-kb", "abc", "--"] + marker, "--buffer-kb abc"),
            (["--buffer-kb", "2", "--"] + marker, "--buffer-kb below 4"),
            (["--buffer-kb", "6", "--"] + marker, "--buffer-kb not a multiple of 4"),
            (["--buffer-kb", "131072", "--"] + marker, "--buffer-kb above 64 MiB"),
            (["--memory-mb", "0", "--"] + marker, "--memory-mb 0"),
            (["--memory-mb", "-1", "--"] + marker, "--memory-mb -1"),
            (["--buffer-kb", "4096", "--memory-mb", "4", "--"] + marker,
             "--memory-mb smaller than two buffers"),
            (["-o", "nodir/x.tt", "--"] + marker, "record -o into a missing directory"),
            (["-o", "adir", "--"] + marker, "record -o naming a directory"),
            (["-o", "adir/", "--"] + marker, "record -o ending in a slash"),
        ]
        for args, what in record_cases:
            r = record(d, *args)
            expect_rc(r, EXIT_USAGE, what)
            check(not os.path.exists(os.path.join(d, "ran")), what + ": runs nothing", str(r))
            if os.path.exists(os.path.join(d, "ran")):
                os.unlink(os.path.join(d, "ran"))
        r = record(d, "--", *marker, env={"TINYTRACE_BLOCK_KB": "3"})
        expect_rc(r, EXIT_USAGE, "record with a bad TINYTRACE_BLOCK_KB in the environment")
        check("TINYTRACE_BLOCK_KB" in r.err, "the refusal names the variable", str(r))
        check(not os.path.exists(os.path.join(d, "ran")), "... and runs nothing", str(r))

        replay_cases = [
            ([], "replay without a file"),
            (["t.tt", "t.tt"], "replay with two files"),
            (["t.tt", "--"], "replay FILE -- without a program"),
            (["--bogus", "t.tt"], "replay with an unknown option"),
            (["--report", "nodir/r.json", "t.tt"], "replay --report into a missing directory"),
            (["--report", "adir", "t.tt"], "replay --report naming a directory"),
        ]
        for args, what in replay_cases:
            r = tt(d, "replay", *args)
            expect_rc(r, EXIT_USAGE, what)
            check(r.out == "", what + ": runs nothing", str(r))
        r = record(d, "--", *marker, env={"TINYTRACE_BUFER_KB": "64"})
        expect_rc(r, EXIT_USAGE, "record with a misspelt TINYTRACE_ variable in the environment")
        check("TINYTRACE_BUFER_KB" in r.err, "the refusal names it", str(r))
        check(not os.path.exists(os.path.join(d, "ran")), "... and runs nothing", str(r))
        r = tt(d, "replay", "t.tt", env={"TINYTRACE_ORDER_TIMEOUT_MS": "x"})
        expect_rc(r, EXIT_USAGE, "replay with a bad TINYTRACE_ORDER_TIMEOUT_MS")
        check(r.out == "", "... runs nothing", str(r))

        for verb in ("record", "replay"):
            r = tt(d, verb, "--help")
            expect_rc(r, EXIT_OK, verb + " --help")
            check(r.out.startswith("Usage: tinytrace " + verb), verb + " --help prints its usage",
                  str(r))
        r = tt(d, "help")
        check("record" in r.out and "replay" in r.out, "help lists record and replay", str(r))


def test_missing_things():
    with TempDir() as d:
        copy_prog(d)
        r = tt(d, "replay", "nonexistent.tt")
        expect_rc(r, EXIT_SYSTEM, "replay of a missing trace")
        check("nonexistent.tt" in r.err, "the message names the file", str(r))

        r = record(d, "--", "./no-such-program")
        expect_rc(r, EXIT_SYSTEM, "record of a missing program")
        check("no-such-program" in r.err, "the message names the program", str(r))
        r = record(d, "--", "no-such-program-in-path-either")
        expect_rc(r, EXIT_SYSTEM, "record of a program not in PATH")

        r = record(d, "--", "./prog-time", "--touch", "ran",
                   env={"TINYTRACE_PRELOAD": os.path.join(d, "nonexistent.so")})
        expect_rc(r, EXIT_SYSTEM, "record with a missing runtime library")
        check("nonexistent.so" in r.err, "the message names the library", str(r))
        check(not os.path.exists(os.path.join(d, "ran")), "... and runs nothing", str(r))

        # a program that does not load the runtime leaves no trace: exit 6
        notelf = os.path.join(d, "fake.so")
        with open(notelf, "w") as f:
            f.write("not a library\n")
        r = record(d, "-o", "fake.tt", "--", "./prog-time", env={"TINYTRACE_PRELOAD": notelf})
        expect_rc(r, EXIT_SYSTEM, "record when the runtime does not load")
        check("no trace was written" in r.err, "record says no trace was written", str(r))


def test_corrupt_traces():
    with TempDir() as d:
        copy_prog(d)
        r = record(d, "-o", "t.tt", "--", "./prog-time")
        if not expect_rc(r, EXIT_OK, "record for the corruption tests"):
            return
        man = manifest(d, "t.tt")
        with open(os.path.join(d, "t.tt"), "rb") as f:
            good = f.read()

        def damaged(name, data):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(data)
            return p

        mid = (man["data_offset"] + man["data_end"]) // 2
        cases = []
        for name, at in (("flip-data.tt", mid), ("flip-data-start.tt", man["data_offset"] + 8),
                         ("flip-manifest.tt", 40), ("flip-tables.tt", man["objects_offset"] + 20)):
            data = bytearray(good)
            data[at] ^= 0x40
            cases.append((damaged(name, bytes(data)), "a flipped byte (%s)" % name))
        cases.append((damaged("trunc.tt", good[:len(good) - 100]), "a truncated trace"))
        cases.append((damaged("trunc-manifest.tt", good[:300]), "a trace cut in its manifest"))
        cases.append((damaged("garbage.tt", bytes(random.Random(7).randrange(256)
                                                 for _ in range(4096))), "garbage"))
        for path, what in cases:
            r = tt(d, "replay", path)
            expect_rc(r, EXIT_CORRUPT, "replay of " + what)
            check(r.out == "", "replay of %s runs nothing" % what, str(r))

        empty = damaged("empty.tt", b"")
        r = tt(d, "replay", empty)
        check(r.rc in (EXIT_CORRUPT, EXIT_SYSTEM) and r.out == "",
              "replay of an empty file: 3 or 6, runs nothing", str(r))


def test_recorded_command_line():
    """How replay reads the META objects, on traces made with the library (no runtime)."""
    with TempDir() as d:
        copy_prog(d)

        def mk(name, *meta, incomplete=False):
            args = [MKMETA] + (["--incomplete"] if incomplete else []) + [name] + list(meta)
            r = run(args, d)
            check(r.rc == 0, "mkmeta %s" % name, str(r))
            return name

        # no command line: replay needs a program
        mk("none.tt")
        r = tt(d, "replay", "none.tt")
        expect_rc(r, EXIT_USAGE, "replay of a trace without a command line")
        check("no command line" in r.err, "... says so", str(r))

        # the recorded command line and directory are used: ./prog-time in d, which is not
        # mkmeta's build, so the refusal names the program found there
        with TempDir() as elsewhere:
            mk(os.path.join(elsewhere, "cmd.tt"), "cwd=" + d, "argc=3", "argv[0]=./prog-time",
               "argv[2]=ran-here", "argv[1]=--touch")
            # (mkmeta's traces carry no signature: --trust, or the command is refused)
            r = tt(elsewhere, "replay", "--trust", "cmd.tt")
            expect_rc(r, EXIT_BUILD, "replay of a recorded command line (another build)")
            check(os.path.join(d, "./prog-time") in r.err,
                  "argv[0] is found in the recorded directory", str(r))
            check(not os.path.exists(os.path.join(d, "ran-here")), "... and nothing ran", str(r))
            # prog-time creates its --touch file before any call the runtime replays, so it
            # shows the arguments' order and the directory whatever the replay then says
            r = tt(elsewhere, "replay", "--trust", "--allow-build-mismatch", "cmd.tt")
            check(os.path.exists(os.path.join(d, "ran-here")),
                  "the recorded arguments are passed in order, in the recorded directory",
                  str(r))

        damaged = [
            (("argc=2", "argv[0]=./prog-time"), "argv[1] is missing"),
            (("argc=1", "argv[0]=./prog-time", "argv[3]=x"), "argv[3] beyond argc"),
            (("argc=1", "argv[0=./prog-time"), "a bad argv entry"),
            (("argc=1", "argv[0]./prog-time"), "a bad argv entry"),
            (("argc=x", "argv[0]=./prog-time"), "a bad or second argc"),
            (("argc=1", "argc=2", "argv[0]=./prog-time"), "a bad or second argc"),
            (("argc=99999999999999999999", "argv[0]=./prog-time"), "a bad or second argc"),
        ]
        for i, (meta, what) in enumerate(damaged):
            name = mk("damaged%d.tt" % i, *meta)
            r = tt(d, "replay", name)
            expect_rc(r, EXIT_CORRUPT, "a damaged command line: " + " ".join(meta))
            check(what in r.err, "... the message says '%s'" % what, str(r))
            check(r.out == "", "... and nothing ran", str(r))

        # an argument longer than 4 KiB is recorded whole: prog-time's atoi skips the blanks,
        # and a cut argument would leave no status in it
        status = " " * 6000 + "7"
        r = record(d, "-o", "long.tt", "--", "./prog-time", "--exit", status)
        if expect_rc(r, 7, "record with a %d-byte argument" % len(status)):
            r = tt(d, "replay", "long.tt")
            expect_rc(r, EXIT_OK, "replay of the %d-byte argument" % len(status))
            check("the program exited with status 7" in r.err, "... passes it whole",
                  r.err[-500:])

        # an incomplete trace: 7
        mk("incomplete.tt", "argc=1", "argv[0]=./prog-time", incomplete=True)
        r = tt(d, "replay", "incomplete.tt")
        expect_rc(r, EXIT_INCOMPLETE, "replay of an incomplete trace")
        check(r.out == "", "... runs nothing", str(r))


def main():
    global TT, PRELOAD, PROG, PROG_NOBID, MKMETA
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    TT, PRELOAD, PROG, PROG_NOBID, MKMETA = (os.path.abspath(a) for a in sys.argv[1:])
    for p in (TT, PRELOAD, PROG, PROG_NOBID, MKMETA):
        if not os.path.exists(p):
            print("missing: " + p)
            return 1
    tests = [test_record_then_replay, test_exit_status, test_replay_outcomes,
             test_recorded_directory_gone, test_build_mismatch, test_damaged_programs,
             test_usage_errors, test_missing_things, test_corrupt_traces,
             test_recorded_command_line]
    for t in tests:
        print("# " + t.__name__)
        try:
            t()
        except Exception as e:  # a test that raises is a failure, and the others still run
            import traceback
            traceback.print_exc()
            failures.append("%s raised %r" % (t.__name__, e))
    if failures:
        print("\n%d check(s) failed:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
