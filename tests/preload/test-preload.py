#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of the preload library: real programs recorded and replayed.

    test-preload.py PRELOAD_SO TINYTRACE PROBE READ_STDIN ALLOC SWAPPER DLCLOSE DLLEAF OWN_ALLOC
                    SIG_FIRST ARGSTRIP

Each program runs as `tinytrace record|replay` runs it: with LD_PRELOAD=PRELOAD_SO and
TINYTRACE_MODE=record, then replay, and TINYTRACE_FILE naming the trace. A replay must print
what the recording printed, although the clock, the random source and the input it is given have
changed, and `tinytrace verify` must accept every recording. The programs: `date +%s.%N`, python3
printing random.random(), time.time() and os.urandom(), three readers of stdin fed different
input on replay (a C program using stdio, cat, python3), preload-probe (every interposed call,
sockets and pipes included), the output check (TINYTRACE_CHECK_OUTPUT) and the allocation events
(TINYTRACE_ALLOC) with a replay that must match and one that must diverge, and preload-swapper
(the swapper thread starts at the first buffer handed over or signal handler, not before),
preload-dlclose (a library opened before the runtime's constructor and closed by the program
leaves the real functions found after it working, and is really unloaded), preload-own-alloc (an
allocator in the executable serves libc and the runtime: no block goes back to an allocator that
did not make it), preload-sig-first (a handler's first calls find functions looked up before:
no dlsym inside it), a traced shell naming its first untraced child, and a library whose
constructor rewrites argv before the runtime's (the command line recorded is the one started).

Every check runs, failures are collected and listed at the end; the exit status is 1 if any
failed. Each case works in its own temporary directory, removed afterwards whatever happens.
"""

import json
import os
import re
import shutil
import socket
import signal
import subprocess
import sys
import tempfile

TIMEOUT = 120           # seconds for one command: a hang is a failure, not a stuck test run
EXIT_DIVERGED = 86      # TT_RT_EXIT_DIVERGED (libtrace/instrument/runtime.h)

failures = []


def check(cond, what, detail=""):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what + (("\n     " + str(detail).replace("\n", "\n     ")) if detail else ""))
        failures.append(what)
    return cond


class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    def __str__(self):
        return "$ %s\nexit %s\nstdout: %r\nstderr: %s" % (
            " ".join(self.args), self.rc, self.out[:2000],
            self.err[:3000].decode(errors="replace"))


def base_env():
    # nothing of an outer tinytrace run may leak into ours
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TINYTRACE_") and k != "LD_PRELOAD"}
    env["LC_ALL"] = "C"
    return env


def run(args, stdin=b"", env=None, cwd=None, pass_fds=()):
    args = [str(a) for a in args]
    try:
        p = subprocess.run(args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, cwd=cwd, timeout=TIMEOUT, pass_fds=pass_fds)
        return Result(args, p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        return Result(args, "timeout", e.stdout or b"", e.stderr or b"")


class Channel:
    """The report channel as `tinytrace replay` makes it (protocol.h): a socket pair, the nonce
    written into the program's end, TINYTRACE_REPORT_FD naming it; the last line that carries
    the nonce is the report, saved to @path."""
    NONCE = b"0123456789abcdef" * 2

    def __init__(self, env, path):
        self.path = path
        self.tool, self.prog = socket.socketpair()
        self.tool.sendall(self.NONCE)
        self.prog.set_inheritable(True)
        env["TINYTRACE_REPORT_FD"] = str(self.prog.fileno())
        self.fds = (self.prog.fileno(),)

    def collect(self):
        self.prog.close()
        self.tool.settimeout(TIMEOUT)
        data = b""
        try:
            while True:
                b = self.tool.recv(65536)
                if not b:
                    break
                data += b
        except OSError:
            pass
        self.tool.close()
        key = b'"nonce": "' + self.NONCE + b'"'
        lines = [ln for ln in data.split(b"\n") if key in ln]
        if lines:
            with open(self.path, "wb") as f:
                f.write(lines[-1] + b"\n")


class Case:
    """One test case: its own directory (removed at the end), a trace file in it, and a work
    directory the program runs in, which the trace file never appears in."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="tt-preload-")
        self.work = os.path.join(self.dir, "work")
        os.mkdir(self.work)
        self.trace = os.path.join(self.dir, "d.tt")
        self.report = os.path.join(self.dir, "report.json")
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def traced(self, mode, args, stdin=b"", extra=None):
        env = base_env()
        env.update({"LD_PRELOAD": PRELOAD, "TINYTRACE_MODE": mode, "TINYTRACE_FILE": self.trace})
        env.update(extra or {})
        if mode != "replay":
            return run(args, stdin, env, self.work)
        if os.path.exists(self.report):
            os.unlink(self.report)
        ch = Channel(env, self.report)
        r = run(args, stdin, env, self.work, pass_fds=ch.fds)
        ch.collect()
        return r

    def record(self, args, stdin=b"", extra=None):
        r = self.traced("record", args, stdin, extra)
        check(r.rc == 0, "%s: recording exits 0" % self.name, r)
        check(b"tinytrace" not in r.err, "%s: recording says nothing on stderr" % self.name, r)
        v = run([TINYTRACE, "verify", self.trace])
        check(v.rc == 0, "%s: tinytrace verify accepts the recording" % self.name, v)
        return r

    def replay(self, args, stdin=b"", extra=None):
        return self.traced("replay", args, stdin, extra)

    def report_status(self):
        try:
            with open(self.report) as f:
                return json.load(f).get("status")
        except (OSError, ValueError) as e:
            return "no report (%s)" % e

    def replay_matches(self, rec, args, stdin=b"", extra=None, what="prints the recorded output"):
        r = self.replay(args, stdin, extra)
        check(r.rc == 0, "%s: replay exits 0" % self.name, r)
        check(r.out == rec.out, "%s: replay %s" % (self.name, what),
              "recorded: %r\n%s" % (rec.out, r))
        check(b"tinytrace" not in r.err, "%s: replay says nothing on stderr" % self.name, r)
        status = self.report_status()
        check(status == "matched", "%s: the replay report says matched" % self.name,
              "status: %s\n%s" % (status, r))
        return r


def plain(args, stdin=b""):
    return run(args, stdin, base_env())


# ---------------------------------------------------------------- the cases

def case_date():
    args = ["date", "+%s.%N"]
    with Case("date") as c:
        rec = c.record(args)
        check(re.fullmatch(rb"\d+\.\d{9}\n", rec.out) is not None,
              "date: prints seconds.nanoseconds", rec)
        c.replay_matches(rec, args, what="prints the recorded time, not the current one")
        now = plain(args)
        check(now.rc == 0 and now.out != rec.out, "date: a plain run prints another time",
              "recorded %r, plain %r" % (rec.out, now.out))


def case_python():
    code = "import random, time, os; print(random.random(), time.time(), os.urandom(8).hex())"
    args = [sys.executable, "-c", code]
    with Case("python") as c:
        rec = c.record(args)
        check(len(rec.out.split()) == 3, "python: prints three values", rec)
        c.replay_matches(rec, args)
        now = plain(args)
        check(now.rc == 0 and now.out != rec.out, "python: a plain run prints other values",
              "recorded %r, plain %r" % (rec.out, now.out))


def case_stdin():
    readers = [("stdin stdio", [READ_STDIN]),
               ("stdin python", [sys.executable, "-c",
                                 "import sys; d = sys.stdin.read(); print(len(d), repr(d))"])]
    cat = shutil.which("cat")
    if cat:
        readers.append(("stdin cat", [cat]))
    for name, args in readers:
        with Case(name) as c:
            rec = c.record(args, stdin=b"abc\n")
            check(b"abc" in rec.out, "%s: the recording read its input" % name, rec)
            c.replay_matches(rec, args, stdin=b"xyz\n",
                             what="fed xyz prints what abc made it print")
            # a replay with nothing at all on stdin gets the same
            c.replay_matches(rec, args, stdin=b"",
                             what="fed nothing prints what abc made it print")
    # recorded from a pipe, replayed at a terminal (whose st_blksize is smaller than a pipe's):
    # stdio's replayed reads must still ask for what the recorded ones did
    with Case("stdin pipe then terminal") as c:
        text = b"".join(b"line %d of the input\n" % i for i in range(600))
        rec = c.record([READ_STDIN], stdin=text)
        check(b"600 lines" in rec.out, "stdin pipe then terminal: the recording read it", rec)
        master, slave = os.openpty()
        try:
            env = base_env()
            env.update({"LD_PRELOAD": PRELOAD, "TINYTRACE_MODE": "replay",
                        "TINYTRACE_FILE": c.trace})
            ch = Channel(env, c.report)
            p = subprocess.run([READ_STDIN], stdin=slave, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, cwd=c.work, timeout=TIMEOUT,
                               pass_fds=ch.fds)
            ch.collect()
            r = Result([READ_STDIN], p.returncode, p.stdout, p.stderr)
        finally:
            os.close(master)
            os.close(slave)
        check(r.rc == 0 and r.out == rec.out and c.report_status() == "matched",
              "stdin pipe then terminal: the replay at a terminal matches", r)


def case_probe():
    with Case("probe") as c:
        rec = c.record([PROBE], extra={"PROBE_WORD": "alpha"})
        lines = rec.out.decode(errors="replace").splitlines()
        for key in ("getrandom", "getentropy", "read /dev/urandom", "fread /dev/urandom",
                    "readv", "recv", "recvmsg", "thread getrandom", "hostname", "getpid",
                    "hostname cut", "gettimeofday(NULL, tz)", "tcp MSG_TRUNC"):
            check(any(l.startswith(key + ":") for l in lines), "probe: prints %s" % key, rec)
        check(b"'alpha'" in rec.out, "probe: received what it sent", rec)
        # a pipe and a socket pair are written for real and read from the recording; what is
        # sent on an internet socket is compared (libtrace/instrument/preload/net.c)
        rep = c.replay([PROBE], extra={"PROBE_WORD": "omega"})
        check(rep.rc != 0 and b"in sendto: replay diverged" in rep.err,
              "probe: a replay that sends omega diverges where it sends it on UDP", rep)
        check(b"recv: 5 'alpha'" in rep.out and b"omega" not in rep.out,
              "probe: until then the replay sent omega and received the recorded alpha", rep)
        c.replay_matches(rec, [PROBE], extra={"PROBE_WORD": "alpha"})
        now = plain([PROBE], b"")
        differ = [l for l in now.out.decode(errors="replace").splitlines()
                  if l not in lines]
        check(len(differ) >= 8, "probe: a plain run differs in clocks, random bytes and pid",
              "plain run:\n" + now.out.decode(errors="replace"))


def case_longjmp():
    # a signal handler jumps out of a blocked read: the calls after it are still recorded, and
    # the _exit at the end finishes the file (the replay is not compared: the signal comes at
    # another point of another run)
    with Case("longjmp") as c:
        rec = c.record([PROBE, "--longjmp"])
        check(b"after the jump" in rec.out, "longjmp: the program jumped out of the read", rec)
        d = run([TINYTRACE, "dump", "--kind", "io", c.trace])
        sites = d.out.decode(errors="replace")
        check(d.rc == 0 and " getpid " in sites and " time " in sites,
              "longjmp: the calls after the jump are in the trace", d)


def case_other_clock():
    # the clock is part of what is compared: reading CLOCK_MONOTONIC where the recording read
    # CLOCK_REALTIME is a divergence that names both, not the recorded value of another clock
    prog = [sys.executable, "-c",
            "import sys, time; print(time.clock_gettime(int(sys.argv[1])))"]
    with Case("other clock") as c:
        rec = c.record(prog + ["0"])
        c.replay_matches(rec, prog + ["0"], what="of the same clock prints the recorded time")
        r = c.replay(prog + ["1"])
        err = r.err.decode(errors="replace")
        check(r.rc != 0 and c.report_status() == "diverged" and
              "clock_gettime(CLOCK_MONOTONIC)" in err and "site=clock_gettime(#" in err,
              "other clock: a replay that reads CLOCK_MONOTONIC diverges, naming both", r)


def case_relative_file():
    # TINYTRACE_FILE relative to where the program started, which then changes directory: the
    # file is still finished there
    args = [sys.executable, "-c", "import os, time; time.time(); os.chdir('/'); time.time()"]
    with Case("relative file") as c:
        env = base_env()
        env.update({"LD_PRELOAD": PRELOAD, "TINYTRACE_MODE": "record", "TINYTRACE_FILE": "rel.tt"})
        r = run(args, b"", env, c.work)
        left = sorted(os.listdir(c.work))
        check(r.rc == 0 and left == ["rel.tt"],
              "relative file: finished where the program started", "%s\nleft: %s" % (r, left))


def case_ignored_signal():
    # a signal the parent left ignored stays ignored: the runtime's crash handler does not take
    # it over (SIGTRAP kills by default)
    args = [sys.executable, "-c",
            "import os, signal; os.kill(os.getpid(), signal.SIGTRAP); print('survived')"]
    with Case("ignored signal") as c:
        env = base_env()
        env.update({"LD_PRELOAD": PRELOAD, "TINYTRACE_MODE": "record", "TINYTRACE_FILE": c.trace})
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           cwd=c.work, timeout=TIMEOUT,
                           preexec_fn=lambda: signal.signal(signal.SIGTRAP, signal.SIG_IGN))
        r = Result(args, p.returncode, p.stdout, p.stderr)
        check(r.rc == 0 and r.out == b"survived\n", "ignored signal: the program survives it", r)


def case_off():
    # preloaded without TINYTRACE_MODE: the program runs untraced and nothing is written
    with Case("off") as c:
        env = base_env()
        env.update({"LD_PRELOAD": PRELOAD, "TINYTRACE_FILE": c.trace})
        r = run([PROBE], b"", env, c.work)
        check(r.rc == 0 and b"getrandom:" in r.out, "off: the probe runs preloaded", r)
        check(os.listdir(c.dir) == ["work"] and not os.listdir(c.work),
              "off: no trace file is written", os.listdir(c.dir))


def case_untraced_child_named():
    # traced by hand (no tree): a shell's children run untraced, and the trace names the first
    # by what it exec'd, which the fork child reports through the page it shares with its
    # parent (rt-procs.c); two children, so the first is told from the last
    args = ["sh", "-c", "/bin/echo one-$$ >/dev/null; /bin/true"]
    with Case("untraced child") as c:
        c.record(args)
        r = run([TINYTRACE, "info", "--json", c.trace])
        doc = json.loads(r.out) if r.rc == 0 else {}
        named = (doc.get("command") or {}).get("untraced") or ""
        check(named.startswith("/bin/echo one-"),
              "untraced child: the trace names the first child by its exec", r)


def case_check_output():
    out = {"TINYTRACE_CHECK_OUTPUT": "1"}
    with Case("check-output date") as c:
        args = ["date", "+%s.%N"]
        rec = c.record(args, extra=out)
        c.replay_matches(rec, args, extra=out)
    code = ("import os, sys; print('word', os.environ['W']); "
            "print('to stderr', file=sys.stderr); sys.stdout.write('no newline')")
    args = [sys.executable, "-c", code]
    with Case("check-output python") as c:
        rec = c.record(args, extra=dict(out, W="one"))
        c.replay_matches(rec, args, extra=dict(out, W="one"))
        r = c.replay(args, extra=dict(out, W="two"))
        check(r.rc == EXIT_DIVERGED, "check-output python: other output diverges (exit %d)"
              % EXIT_DIVERGED, r)
        check(b"diverged" in r.err and b"stdout" in r.err,
              "check-output python: the report names the write to stdout", r)
        check(c.report_status() == "diverged", "check-output python: the JSON report says "
              "diverged", c.report_status())
        # only the last line, without newline, differs: the destructor's segment
        r = c.replay([sys.executable, "-c", code.replace("'no newline'", "'no newlinX'")],
                     extra=dict(out, W="one"))
        check(r.rc == EXIT_DIVERGED, "check-output python: a last line without newline is "
              "compared too", r)
    with Case("check-output stdio") as c:
        rec = c.record([READ_STDIN], stdin=b"abc\n", extra=out)
        c.replay_matches(rec, [READ_STDIN], stdin=b"xyz\n", extra=out)


def case_alloc():
    al = {"TINYTRACE_ALLOC": "1"}
    with Case("alloc") as c:
        rec = c.record([ALLOC, "100"], extra=al)
        dump = run([TINYTRACE, "dump", c.trace])
        for site in ("malloc", "realloc", "calloc", "posix_memalign", "aligned_alloc",
                     "memalign", "valloc", "free"):
            check(re.search(r"\balloc\b.*\b%s\b|\bfree\b.*\b%s\b" % (site, site),
                            dump.out.decode()) is not None,
                  "alloc: the recording holds %s" % site, dump.out.decode()[:3000])
        c.replay_matches(rec, [ALLOC, "100"], extra=al)
        r = c.replay([ALLOC, "101"], extra=al)
        check(r.rc == EXIT_DIVERGED, "alloc: other sizes diverge (exit %d)" % EXIT_DIVERGED, r)
        check(b"size" in r.err, "alloc: the report says the size differs", r)


def case_swapper():
    # the swapper thread starts when it is needed: a full buffer, or a signal handler the
    # program installs (a buffer could then fill inside it, where no thread may be started)
    want = {"idle": b"threads 1\n", "ignore": b"threads 1\n", "sigaction": b"threads 2\n",
            "signal": b"threads 2\n", "fill": b"pid ok\nthreads 2\n"}
    for mode, out in want.items():
        with Case("swapper " + mode) as c:
            env = base_env()
            env.update({"LD_PRELOAD": PRELOAD, "TINYTRACE_MODE": "record",
                        "TINYTRACE_FILE": c.trace})
            r = run([SWAPPER, mode], b"", env, c.work)
            check(r.rc == 0 and r.out == out, "swapper %s: prints %r" % (mode, out), r)
            v = run([TINYTRACE, "verify", c.trace], b"", base_env())
            check(v.rc == 0, "swapper %s: the trace verifies" % mode, v)
            if mode == "fill":
                i = run([TINYTRACE, "info", c.trace], b"", base_env())
                ev = re.search(rb"^events:\s+(\d+)", i.out, re.M)
                ch = re.search(rb"^chunks:\s+(\d+)", i.out, re.M)
                check(ev is not None and int(ev.group(1)) > 300000 and ch is not None and
                      int(ch.group(1)) > 1, "swapper fill: every getpid is in the trace, "
                      "in more than one chunk", i)


def case_dlclose():
    with Case("dlclose") as c:
        env = dict(base_env(), PRELOAD_DLLEAF=DLLEAF, LD_PRELOAD=PRELOAD)
        idle = run([DLCLOSE], env=env, cwd=c.work)
        check(idle.rc == 0 and idle.out == b"closed, then called on\n",
              "dlclose: the preloaded runtime, no session: the program runs to its end", idle)
        rec = c.record([DLCLOSE], extra={"PRELOAD_DLLEAF": DLLEAF})
        check(rec.out == b"closed, then called on\n", "dlclose: recorded, it runs to its end",
              rec)


def case_no_lookup_in_a_handler():
    # a handler's first call of clock_getres or sem_post (libc answers both only through
    # dlsym: an IFUNC, two versions) finds the function the constructor looked up: the
    # loader's trace of look-ups shows none of them after the program's "main"
    with Case("handler's first call") as c:
        r = c.traced("record", [SIG_FIRST], extra={"LD_DEBUG": "bindings"})
        err = r.err.decode(errors="replace")
        after = err.split("main\n", 1)[1] if "main\n" in err else ""
        # the program's own lazy binding of its call to the interposer is the loader's, and
        # allowed; a look-up the runtime asks for names the preload library as the asker. The
        # loader writes "binding file A [n] to B [n]: normal symbol `name'" in one write and
        # the version and newline in another, so another thread's record may sit between
        # them on the same line: the match is on that one record, not on the line
        late = re.findall(r"binding file %s \[\d+\] to [^\n`:]+ \[\d+\]: "
                          r"normal symbol `(?:clock_getres|sem_post)'" % re.escape(PRELOAD),
                          after)
        check(r.rc == 0 and r.out == b"handled\n" and "main\n" in err,
              "handler's first call: the program runs its handler", r)
        check(not late, "handler's first call: no look-up inside the handler", "\n".join(late))


def case_argv_rewritten_before_the_runtime():
    # a later preload's constructor moves --lib-x to argv's end before the runtime's runs: the
    # trace records the command line the program was started with, which a replay runs again
    args = ["/bin/echo", "a", "--lib-x", "b"]
    with Case("argv rewritten") as c:
        r = c.traced("record", args, extra={"LD_PRELOAD": PRELOAD + ":" + ARGSTRIP})
        check(r.rc == 0 and r.out == b"a b --lib-x\n",
              "argv rewritten: the library's constructor ran", r)
        i = run([TINYTRACE, "info", "--json", c.trace])
        doc = json.loads(i.out) if i.rc == 0 else {}
        check((doc.get("command") or {}).get("argv") == args,
              "argv rewritten: the trace holds the command line as started", i)


def case_own_allocator():
    # the executable's malloc family serves libc and the runtime alike: a block libc made
    # (open_memstream's, which the replay's report uses) must go back to that allocator
    with Case("own allocator") as c:
        rec = c.record([OWN_ALLOC])
        check(rec.rc == 0 and rec.out.startswith(b"own allocator"),
              "own allocator: recorded, it runs to its end", rec)
        c.replay_matches(rec, [OWN_ALLOC])


CASES = [case_date, case_python, case_stdin, case_probe, case_longjmp, case_other_clock,
         case_relative_file, case_ignored_signal, case_off, case_untraced_child_named,
         case_check_output, case_alloc, case_swapper, case_dlclose, case_own_allocator,
         case_no_lookup_in_a_handler, case_argv_rewritten_before_the_runtime]


def main():
    global PRELOAD, TINYTRACE, PROBE, READ_STDIN, ALLOC, SWAPPER, DLCLOSE, DLLEAF, OWN_ALLOC
    global SIG_FIRST, ARGSTRIP
    if len(sys.argv) != 12:
        print(__doc__)
        return 2
    (PRELOAD, TINYTRACE, PROBE, READ_STDIN, ALLOC, SWAPPER, DLCLOSE,
     DLLEAF, OWN_ALLOC, SIG_FIRST, ARGSTRIP) = [os.path.abspath(a) for a in sys.argv[1:]]
    if not shutil.which("date"):
        print("SKIP: no date command")
        return 77
    for case in CASES:
        case()
    if failures:
        print("\n%d check(s) failed:\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
