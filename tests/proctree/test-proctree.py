#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Process trees (issue 17): every process a program starts is recorded, the tree is listed,
and a replay re-runs it with every child paired with its recorded one by creation path.

Usage: test-proctree.py TINYTRACE PRELOAD PROG_SIGCHLD PROG_VFORK PROG_PIPES
Each check prints ok or FAIL. Every case runs in its own temporary directory, with its own key
directory (XDG_DATA_HOME), removed at the end. Every program run has a deadline (TIMEOUT); no
check waits a fixed time.
"""
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

TT, PRELOAD, SIGCHLD_PROG, VFORK_PROG, PIPES_PROG = map(os.path.abspath, sys.argv[1:6])
TIMEOUT = 60
failures = []

PIPELINE = 'seq 1 50 | shuf | head -n 5 | tr "\\n" " "'


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        if detail:
            print("     " + str(detail).replace("\n", "\n     ")[:3000])
        failures.append(what)
    return cond


class Case:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.d = tempfile.mkdtemp(prefix="tt-proctree-%s-" % self.name)
        self.env = dict(os.environ, TINYTRACE_PRELOAD=PRELOAD,
                        XDG_DATA_HOME=os.path.join(self.d, "keys"))
        for k in list(self.env):
            if k.startswith("TINYTRACE_") and k != "TINYTRACE_PRELOAD":
                del self.env[k]
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.d, ignore_errors=True)
        return False

    def path(self, name):
        return os.path.join(self.d, name)

    def tt(self, *args, timeout=TIMEOUT):
        return subprocess.run([TT] + [str(a) for a in args], capture_output=True, text=True,
                              env=self.env, cwd=self.d, timeout=timeout,
                              stdin=subprocess.DEVNULL)


def matched(r):
    return r.returncode == 0 and "replay matched the recording" in r.stderr


def waits_for(cond, ok, fail):
    """A shell fragment that waits until the test @cond holds, then prints @ok; past a deadline
    of 30 seconds it prints @fail and exits 1."""
    return ('end=$(($(date +%%s) + 30)); while ! %s; do '
            '[ "$(date +%%s)" -gt "$end" ] && { echo %s; exit 1; }; done; echo %s'
            % (cond, fail, ok))


def pipeline_replays_byte_identically():
    """sh -c 'seq | shuf | head | tr': five processes, each traced into its own file; the tree
    is listed by info; ten replays print the recorded shuffle; two recordings differ (so the
    comparison can fail)."""
    with Case("pipe") as c:
        r = c.tt("record", "-o", "p.tt", "--", "sh", "-c", PIPELINE)
        check(r.returncode == 0 and len(r.stdout.split()) == 5,
              "record sh -c '%s'" % PIPELINE, r.stdout + r.stderr)
        r2 = c.tt("record", "-o", "q.tt", "--", "sh", "-c", PIPELINE)
        check(r2.returncode == 0 and r2.stdout != r.stdout,
              "... a second recording shuffles otherwise", r.stdout + " / " + r2.stdout)
        procs = sorted(os.listdir(c.path("p.tt.procs")))
        check(procs == ["root.1@1.tt", "root.2@1.tt", "root.3@1.tt", "root.4@1.tt", "tree"],
              "... one trace per process in p.tt.procs/, and the tree's manifest", procs)
        info = c.tt("info", "--json", "p.tt")
        doc = json.loads(info.stdout) if info.returncode == 0 else {}
        rows = {p["process"]: p for p in doc.get("processes") or []}
        check(set(rows) >= {"root", "root/1@1", "root/2@1", "root/3@1", "root/4@1"},
              "info --json lists the tree by creation path", sorted(rows))
        root_pid = rows.get("root", {}).get("pid")
        progs = sorted(rows[n]["command"].split()[0] for n in rows if n.endswith("@1"))
        check(progs == ["head", "seq", "shuf", "tr"], "... with each process's command", progs)
        check(all(rows[n]["ppid"] == root_pid and rows[n]["status"] == "exit 0"
                  for n in rows if n.endswith("@1")) and root_pid,
              "... its parent (the shell's pid) and its exit status", rows)
        # every process's tick rate is measured from the root's calibration point (handed down
        # in TT_ENV_RT), so even a process of a few hundred microseconds agrees with the root's
        rates = {}
        for f in ["p.tt"] + ["p.tt.procs/" + x for x in procs if x.endswith(".tt")]:
            j = c.tt("info", "--json", f)
            rates[f] = json.loads(j.stdout)["manifest"]["ticks_per_sec"] if j.returncode == 0 else 0
        root_rate = rates["p.tt"]
        check(root_rate > 0 and all(abs(v - root_rate) <= root_rate / 1000 for v in rates.values()),
              "... each process's tick rate is within 0.1% of the root's", rates)
        text = c.tt("info", "p.tt").stdout
        check("processes:" in text and "root/2@1" in text and "shuf" in text,
              "info lists the tree as text", text[-800:])
        same = 0
        for i in range(10):
            rep = c.tt("replay", "p.tt")
            same += matched(rep) and rep.stdout == r.stdout
            if not (matched(rep) and rep.stdout == r.stdout):
                check(False, "replay %d of the pipeline" % (i + 1),
                      "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr))
        check(same == 10, "the pipeline replays byte-identically and matched, %d of 10" % same)

        # --process shuf: the recorded shuffle (all 50 lines), nothing else runs
        r = c.tt("record", "-o", "m.tt", "--", "sh", "-c",
                 "touch ran; seq 1 50 | shuf | head -n 5")
        check(r.returncode == 0, "record sh -c 'touch ran; seq 1 50 | shuf | head -n 5'",
              r.stderr)
        os.unlink(c.path("ran"))
        dump = c.tt("dump", "--process", "shuf", "m.tt")
        check(dump.returncode == 0 and "read" in dump.stdout,
              "dump --process shuf reads shuf's trace", dump.stderr)
        alone = c.tt("replay", "--process", "shuf", "m.tt")
        lines = alone.stdout.split()
        check(matched(alone) and sorted(map(int, lines)) == list(range(1, 51)),
              "replay --process shuf matches and prints the recorded shuffle of 1..50",
              "%d %r %s" % (alone.returncode, alone.stdout[:200], alone.stderr))
        check(lines[:5] == r.stdout.split(), "... whose first five lines head printed",
              "%r %r" % (lines[:5], r.stdout))
        check(not os.path.exists(c.path("ran")), "... and the other processes did not run")
        bad = c.tt("replay", "--process", "nosuch", "m.tt")
        check(bad.returncode == 2 and "no process 'nosuch'" in bad.stderr,
              "replay --process of a process not in the tree is a usage error",
              "%d %s" % (bad.returncode, bad.stderr))


def make_recipe_replays_byte_identically():
    """make with a recipe 'date +%N' (and one through a nested sh): both dates come from the
    recording."""
    with Case("make") as c:
        with open(c.path("Makefile"), "w") as f:
            f.write("all:\n\tdate +%N\n\tsh -c 'echo nested; date +%N'\n")
        r = c.tt("record", "-o", "m.tt", "--", "make", "-s")
        check(r.returncode == 0 and len(r.stdout.split()) == 3, "record make -s",
              r.stdout + r.stderr)
        live = subprocess.run(["make", "-s"], capture_output=True, text=True, cwd=c.d,
                              timeout=TIMEOUT)
        check(live.stdout != r.stdout, "... a live run prints other dates",
              live.stdout + " / " + r.stdout)
        same = 0
        for i in range(10):
            rep = c.tt("replay", "m.tt")
            ok = matched(rep) and rep.stdout == r.stdout
            same += ok
            if not ok:
                check(False, "replay %d of make" % (i + 1),
                      "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr))
        check(same == 10, "make's dates replay byte-identically and matched, %d of 10" % same)
        amb = c.tt("info", "--process", "date", "m.tt")
        check(amb.returncode == 2 and "more than one process" in amb.stderr,
              "info --process date: two images run date, the tool asks for a path",
              "%d %s" % (amb.returncode, amb.stderr))
        one = c.tt("info", "--json", "--process", "root/1", "m.tt")
        doc = json.loads(one.stdout) if one.returncode == 0 else {}
        check((doc.get("command") or {}).get("argv") == ["date", "+%N"],
              "info --process root/1 reads the recipe's date", one.stdout[:400] + one.stderr)


WAITS = r'''
import os, random, time
kids = {}
for i in range(3):
    d = random.random() * 0.05
    pid = os.fork()
    if pid == 0:
        time.sleep(d)
        os._exit(10 + i)
    kids[pid] = i
order = []
for _ in range(3):
    pid, st = os.wait()
    order.append("%d:%d" % (kids[pid], os.WEXITSTATUS(st)))
print(" ".join(order))
'''


def waits_replay_the_recorded_order():
    """A parent forks three children that exit after a random delay and waits for each: the
    replay hands back which child ended first, with its status, as recorded."""
    with Case("wait") as c:
        with open(c.path("w.py"), "w") as f:
            f.write(WAITS)
        r = c.tt("record", "-o", "w.tt", "--", "/usr/bin/python3", "w.py")
        check(r.returncode == 0 and len(r.stdout.split()) == 3, "record python3 w.py",
              r.stdout + r.stderr)
        same = 0
        for i in range(5):
            rep = c.tt("replay", "w.tt")
            ok = matched(rep) and rep.stdout == r.stdout
            same += ok
            if not ok:
                check(False, "replay %d of the waits" % (i + 1),
                      "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr[-1500:]))
        check(same == 5, "the order and statuses of the waits replay, %d of 5 (%s)"
              % (same, r.stdout.strip()))


def replays_like(c, trace, stdout, n, what, verdict=matched):
    """How many of @n replays of @trace print @stdout and have the @verdict (a test of the
    replay's result: matched by default); the first that does not is shown."""
    same = 0
    for i in range(n):
        rep = c.tt("replay", trace)
        ok = verdict(rep) and rep.stdout == stdout
        same += ok
        if not ok and same == i:
            check(False, "replay %d of %s" % (i + 1, what),
                  "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr[-1500:]))
    return same


def sigchld_handlers_run_where_the_recording_ran_them():
    """A parent reaps in a SIGCHLD handler while it blocks in a read (prog-sigchld.c): the
    recording has the delivery before the read's result, and each replay runs the handler
    there, not when the re-run child's live SIGCHLD comes (after the replayed read); and one
    that main awaits in sigsuspend(), where it makes no call, runs when the wait begins. A bash
    loop of command substitutions, whose SIGCHLD handler reaps each one, replays too."""
    with Case("sigchld") as c:
        r = c.tt("record", "-o", "s.tt", "--", SIGCHLD_PROG)
        want = ("handler: reaped the first, status 3\nmain: read 4 bytes: data\n"
                "main: the second exited 0\n")
        check(r.returncode == 0 and r.stdout == want, "record prog-sigchld",
              "%d %r %s" % (r.returncode, r.stdout, r.stderr[-800:]))
        dump = c.tt("dump", "s.tt")
        check(dump.returncode == 0 and " tinytrace:signal " in dump.stdout,
              "the recording holds the delivery", dump.stdout[-1500:])
        same = replays_like(c, "s.tt", r.stdout, 10, "prog-sigchld")
        check(same == 10, "the handler runs where it ran, %d of 10 replays" % same)
        r = c.tt("record", "-o", "p.tt", "--", SIGCHLD_PROG, "suspend")
        check(r.returncode == 0 and r.stdout.endswith("main: the handler reaped the second\n"),
              "record prog-sigchld suspend", "%d %r %s" % (r.returncode, r.stdout, r.stderr[-800:]))
        same = replays_like(c, "p.tt", r.stdout, 5, "prog-sigchld suspend")
        check(same == 5, "a handler awaited in sigsuspend() runs, %d of 5 replays" % same)

        # SIGCHLDs that come while the runtime records a call (prog-sigchld spin: 40 children,
        # the parent recording getpid calls until its handler reaped each): held until the
        # call returns and recorded there, so the handler's waits are in the recording and
        # each replay runs it after the same call: it prints the statuses the handler noted
        r = c.tt("record", "-o", "h.tt", "--", SIGCHLD_PROG, "spin")
        check(r.returncode == 0 and r.stdout.count(" calls (") == 40 and
              "child 39: status 49 after " in r.stdout, "record prog-sigchld spin",
              "%d %r %s" % (r.returncode, r.stdout[-400:], r.stderr[-800:]))
        dump = c.tt("dump", "h.tt")
        check(dump.returncode == 0 and " tinytrace:signal-at-return " in dump.stdout,
              "the recording holds deliveries held to a call's return",
              dump.stdout[-1500:])
        same = replays_like(c, "h.tt", r.stdout, 5, "prog-sigchld spin")
        check(same == 5, "a handler held to a call's return runs there, %d of 5 replays" % same)

        with open(c.path("subst.sh"), "w") as f:
            f.write('for i in 1 2 3 4 5 6 7 8; do x=$(echo v$i); printf "%s " "$x"; done\n'
                    'y=$(date +%N); echo ${#y}\n')
        r = c.tt("record", "-o", "b.tt", "--", "bash", "subst.sh")
        check(r.returncode == 0 and r.stdout.startswith("v1 v2 v3"), "record bash subst.sh",
              r.stdout + r.stderr[-800:])
        same = replays_like(c, "b.tt", r.stdout, 5, "bash subst.sh")
        check(same == 5, "bash's command substitutions replay, %d of 5" % same)


def a_fork_whose_atfork_handlers_lock_replays():
    """perl (Debian's, threaded) locks mutexes in its pthread_atfork handlers, inside fork:
    recorded before the fork's own event. The replay meets the fork's event after the real
    fork, where it was recorded, so system() and backticks replay."""
    with Case("atfork") as c:
        r = c.tt("record", "-o", "p.tt", "--", "perl", "-e",
                 'system("true"); my $x = `date +%N`; print length($x) > 1 ? "ok\\n" : "no\\n"')
        check(r.returncode == 0 and r.stdout == "ok\n", "record perl system() and backticks",
              "%d %r %s" % (r.returncode, r.stdout, r.stderr[-800:]))
        same = replays_like(c, "p.tt", r.stdout, 5, "perl system()")
        check(same == 5, "perl's forks replay, %d of 5" % same)


SPAWNS = r'''
import os, subprocess
r = subprocess.run(["date", "+%N"], capture_output=True)
print("run", r.stdout.decode().strip(), flush=True)
os.system("date +%N")
print("popen", os.popen("date +%N").read().strip())
'''


def python_subprocess_system_and_popen_replay():
    """python3: subprocess.run (fork+exec), os.system (system: posix_spawn of sh) and os.popen
    each start a date that is traced and replayed; the tree names each by creation path."""
    with Case("spawn") as c:
        with open(c.path("s.py"), "w") as f:
            f.write(SPAWNS)
        r = c.tt("record", "-o", "s.tt", "--", "/usr/bin/python3", "s.py")
        check(r.returncode == 0 and len(r.stdout.split()) == 5, "record python3 s.py",
              r.stdout + r.stderr)
        info = c.tt("info", "--json", "s.tt")
        doc = json.loads(info.stdout) if info.returncode == 0 else {}
        dates = [p["process"] for p in doc.get("processes") or []
                 if p["command"] == "date +%N" and p["file"]]
        check(len(dates) == 3, "... three traced dates in the tree", dates)
        same = 0
        for i in range(5):
            rep = c.tt("replay", "s.tt")
            ok = matched(rep) and rep.stdout == r.stdout
            same += ok
            if not ok:
                check(False, "replay %d of python3 s.py" % (i + 1),
                      "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr[-1500:]))
        check(same == 5, "subprocess.run, os.system and os.popen replay, %d of 5" % same)


POOL = r'''
import multiprocessing, random
def f(x):
    return random.random() * x
if __name__ == "__main__":
    %s
'''
POOL_JOINED = "p = multiprocessing.Pool(4); print(p.map(f, range(8))); p.close(); p.join()"
POOL_WITH = "with multiprocessing.Pool(4) as p: print(p.map(f, range(8)))"


def a_multiprocessing_pool_never_replays_a_lie():
    """multiprocessing.Pool(4).map of random numbers: its queues' locks are process-shared
    semaphores, ordered within each process only and counted (info: sync_shared); each replay, under a
    deadline, either matches and prints the recorded numbers or is named as diverged, never
    'matched' with other output. How many match is printed (docs/REPLAY.md gives the measure:
    the order between processes is not replayed). `with Pool(4) as p:` ends its workers with
    SIGTERM unless they have exited first: each worker's trace is .partial or finished, and a
    replay ends (never hangs) and says 'matched' only when it did."""
    with Case("pool") as c:
        # every worker reads the one task pipe, and a replayed read that waited there for its
        # recorded bytes, which another worker had taken, stalled until the order timeout
        # before the replay matched (read.c): no replay of the joined pool may match after
        # waiting that long (10 s; it takes a fraction of a second). A replay that diverges
        # may wait for a turn that long, honestly. Each replay runs in its own session, so
        # that a replay past the test's deadline is ended with all its processes
        for name, body, runs, order_ms in (("joined", POOL_JOINED, 10, 10000),
                                           ("with", POOL_WITH, 2, 3000)):
            renv = dict(c.env, TINYTRACE_ORDER_TIMEOUT_MS=str(order_ms))
            with open(c.path(name + ".py"), "w") as f:
                f.write(POOL % body)
            r = c.tt("record", "-o", name + ".tt", "--", "/usr/bin/python3", name + ".py")
            check(r.returncode == 0 and r.stdout.startswith("[0.0, "),
                  "record the pool (%s)" % name, r.stdout + r.stderr[-800:])
            info = c.tt("info", "--json", name + ".tt")
            doc = json.loads(info.stdout) if info.returncode == 0 else {}
            check(((doc.get("command") or {}).get("sync_shared") or 0) > 0,
                  "... info counts its operations on process-shared objects",
                  info.stdout[:600] + info.stderr)
            same = lies = stalled = 0
            for i in range(runs):
                t0 = time.monotonic()
                p = subprocess.Popen([TT, "replay", name + ".tt"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=renv, cwd=c.d,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
                try:
                    out, err = p.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.communicate()
                    check(False, "replay %d of the pool (%s) ended within 120 s" % (i + 1, name))
                    continue
                rep = subprocess.CompletedProcess(p.args, p.returncode, out, err)
                stalled += matched(rep) and time.monotonic() - t0 >= order_ms / 1000
                ok = matched(rep) and rep.stdout == r.stdout
                same += ok
                lie = ("replay matched" in rep.stderr or rep.returncode == 0) and not ok
                lies += lie
                if lie:
                    check(False, "replay %d of the pool (%s) says matched wrongly" % (i + 1, name),
                          "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr[-1500:]))
            print("     the pool (%s) replayed identically %d of %d" % (name, same, runs))
            check(lies == 0, "no replay of the pool (%s) says matched when it did not" % name)
            if name == "joined":
                check(stalled == 0, "no replay of the pool (joined) matched only after waiting "
                      "the order timeout (%d ms)" % order_ms, "%d of %d did" % (stalled, runs))
        # Pool.terminate sends the workers their sentinel and then SIGTERM: a worker that the
        # signal ended leaves a .partial trace, one that had exited already a finished one
        # (which of the two is a race, natively too); every worker leaves one or the other
        files = sorted(os.listdir(c.path("with.tt.procs")))
        workers = [f for f in files if f != "tree"]
        finished = [f for f in workers if f.endswith(".tt")]
        verified = [f for f in finished
                    if c.tt("verify", "with.tt.procs/" + f).returncode == 0]
        check(len(workers) == 4 and
              all(f.endswith(".tt") or ".tt." in f and f.endswith(".partial") for f in workers)
              and verified == finished,
              "... each of the 4 workers left a trace: finished and verifying, or .partial "
              "(ended by Pool.terminate's SIGTERM)", files)


BUSY = 'i=0; while [ $i -lt %d ]; do i=$((i+1)); done'


def a_replayed_reader_ahead_of_its_writer_leaves_it_whole():
    """A replayed read of a pipe returns the recorded bytes at once, and takes from the live
    pipe only what is there (read.c); the rest is owed, and paid before the reader ends or
    closes the pipe, so that its writer, replayed too and still busy, neither meets a closed
    pipe (SIGPIPE, a status the recording does not have) nor is left behind. The writer spins
    before it writes; the reader (dash's read, a byte a call) either exits at once or closes the
    pipe and then spins too. Ten replays of each match: each fails with its payment left out."""
    writer = "{ %s; echo hello; echo wrote >&2; }" % (BUSY % 30000)
    with Case("ahead") as c:
        for name, reader in (("exit", '{ read -r l; echo "$l"; }'),
                             ("close", '{ read -r l; exec 0<&-; %s; echo "$l done"; }'
                              % (BUSY % 60000))):
            r = c.tt("record", "-o", name + ".tt", "--", "sh", "-c", writer + " | " + reader)
            check(r.returncode == 0 and r.stdout.startswith("hello") and "wrote" in r.stderr,
                  "record a reader that %ss ahead of its writer" % name, r.stdout + r.stderr)
            same = replays_like(c, name + ".tt", r.stdout, 10, "the reader that %ss" % name)
            check(same == 10, "... the writer stays whole: %d of 10 replays match" % same)
        # a reader paying one pipe while its writer waits on another the reader owes; two
        # threads closing the two pipes they owe at once; and a standard input closed by
        # fclose, through glibc's own close (prog-pipes.c)
        for name, argv in (("two", [PIPES_PROG, "two"]), ("threads", [PIPES_PROG, "threads"]),
                           ("fclose", ["sh", "-c", writer + " | " + PIPES_PROG + " fclose"])):
            r = c.tt("record", "-o", name + ".tt", "--", *argv)
            check(r.returncode == 0 and ("child: wrote all: yes" in r.stdout or
                                         "child: wrote b 1000, a 1" in r.stdout or
                                         r.stdout == "read hello\n"),
                  "record prog-pipes %s" % name, r.stdout + r.stderr[-1000:])
            same = replays_like(c, name + ".tt", r.stdout, 5, "prog-pipes " + name)
            check(same == 5, "... prog-pipes %s: %d of 5 replays match" % (name, same))


LOOP = ('for p in a b c; do if [ "$(shuf -i 1-3 -n 1)" = 1 ]; then echo "$p failed"; exit 1; '
        'fi; echo "$p ok $(date +%N)"; done')


def hunt_catches_a_failing_shell_loop_and_its_replay_says_which():
    """A shell loop runs three steps, any of which fails at random (shuf): hunt records until a
    run fails, keeps that tree and removes the others'; its replay reproduces which one failed,
    10 of 10."""
    with Case("hunt") as c:
        h = c.tt("hunt", "-n", "200", "-o", "fail.tt", "--", "sh", "-c", LOOP, timeout=300)
        check(h.returncode == 0 and os.path.exists(c.path("fail.tt")),
              "hunt finds a failing run of the loop", "%d %s" % (h.returncode, h.stderr[-800:]))
        left = [f for f in os.listdir(c.d) if f.endswith(".procs") and f != "fail.tt.procs"]
        check(not left and os.path.isdir(c.path("fail.tt.procs")),
              "... keeps the failing run's tree, removes the others'", os.listdir(c.d))
        want = re.findall(r"\b([abc] failed)", h.stdout + h.stderr)
        same = 0
        for i in range(10):
            rep = c.tt("replay", "fail.tt")
            got = re.findall(r"\b([abc] failed)", rep.stdout)
            ok = matched(rep) and got == want[-1:] and len(want) > 0
            same += ok
            if not ok:
                check(False, "replay %d of the failing loop" % (i + 1),
                      "%d %r %r %s" % (rep.returncode, want, rep.stdout, rep.stderr[-800:]))
        check(same == 10, "the replay says the same step failed (%s), %d of 10"
              % (want[-1:] and want[-1], same))


def a_child_that_cannot_be_paired_is_said():
    """The shell starts a child in the replay that it did not start when recorded: the verdict
    says where it diverged, and never 'matched'."""
    with Case("unpaired") as c:
        r = c.tt("record", "-o", "f.tt", "--", "sh", "-c",
                 "if [ -e flag ]; then date +%N; fi; echo done")
        check(r.returncode == 0 and r.stdout == "done\n", "record sh -c 'if [ -e flag ]...'",
              r.stderr)
        open(c.path("flag"), "w").close()
        rep = c.tt("replay", "f.tt")
        check(rep.returncode == 1 and "diverged" in rep.stderr and "fork" in rep.stderr and
              "replay matched" not in rep.stderr,
              "replay with a child the recording has not: diverged (exit 1), never 'matched'",
              "%d %s" % (rep.returncode, rep.stderr[-1500:]))
        # a recorded child the replay does not start is named too
        os.unlink(c.path("flag"))
        r = c.tt("record", "-o", "g.tt", "--", "sh", "-c",
                 "if [ ! -e flag ]; then date +%N; fi; echo done")
        open(c.path("flag"), "w").close()
        rep = c.tt("replay", "g.tt")
        check(rep.returncode != 0 and "replay matched" not in rep.stderr,
              "replay without a recorded child: not 'matched'",
              "%d %s" % (rep.returncode, rep.stderr[-1500:]))


def a_process_killed_in_the_tree_leaves_the_rest_verifying():
    """A shell in the middle of the tree kills itself with SIGKILL: the root's and the other
    processes' traces verify, the tree names the dead one (signal 9, its .partial), recover
    turns the .partial into a trace, and the replay never says 'matched'."""
    with Case("kill") as c:
        r = c.tt("record", "-o", "k.tt", "--", "sh", "-c",
                 'date +%N; sh -c "date +%N; kill -9 \\$\\$"; echo after $?')
        check(r.returncode == 0 and "after 137" in r.stdout, "record a tree with a SIGKILL",
              r.stdout + r.stderr)
        check("warning: 1 process of the tree died before its trace was finished" in r.stderr
              and "tinytrace recover" in r.stderr, "record warns of the dead process", r.stderr)
        d = c.path("k.tt.procs")
        files = sorted(os.listdir(d)) if os.path.isdir(d) else []
        partial = [f for f in files if f.endswith(".partial")]
        done = [f for f in files if f.endswith(".tt")]
        check(len(partial) == 1 and len(done) == 2, "... one .partial, two finished traces",
              files)
        ok = c.tt("verify", "k.tt").returncode == 0 and all(
            c.tt("verify", os.path.join(d, f)).returncode == 0 for f in done)
        check(ok, "... the root's and the other processes' traces verify")
        info = c.tt("info", "--json", "k.tt")
        doc = json.loads(info.stdout) if info.returncode == 0 else {}
        dead = [p for p in doc.get("processes") or [] if p["status"] == "signal 9"]
        check(len(dead) == 1 and dead[0]["file"] and dead[0]["file"].endswith(".partial"),
              "... the tree names the dead process, signal 9, with its .partial", dead)
        if partial:
            rec = c.tt("recover", os.path.join(d, partial[0]))
            saved = os.path.join(d, partial[0][:-len(".partial")].rsplit(".", 1)[0])
            check(rec.returncode == 0 and os.path.exists(saved),
                  "recover turns the dead process's .partial into a trace", rec.stderr)
            # the shell's events before its kill -9 were still in its thread buffer: the kill
            # wrote them first, so the trace has the fork of its date and the wait for it
            # (io on channel 17, TT_CH_PROC), not only the session's start
            dump = c.tt("dump", saved)
            rows = [l.split() for l in dump.stdout.splitlines()]
            proc = [r for r in rows if len(r) > 6 and r[3] == "io:in" and r[6] == "17"]
            check(dump.returncode == 0 and len(proc) >= 2,
                  "... which holds the dead shell's events: the fork of its date and the wait",
                  "%d %s %s" % (dump.returncode, dump.stdout[-1500:], rec.stderr))
        rep = c.tt("replay", "k.tt")
        check(rep.returncode != 0 and "replay matched" not in rep.stderr,
              "the replay of the tree is not 'matched'", "%d %s" % (rep.returncode,
                                                                  rep.stderr[-800:]))


def an_untraceable_child_is_named_and_runs_live():
    """A child that execs a static program (Debian's /sbin/ldconfig) cannot be traced: the tree
    names it, it runs live, and the replay exits 8 naming it (matched what it compared)."""
    with Case("static") as c:
        r = c.tt("record", "-o", "u.tt", "--", "sh", "-c", "/sbin/ldconfig -p >/dev/null; date +%N")
        check(r.returncode == 0, "record sh -c '/sbin/ldconfig -p; date +%N'", r.stderr)
        info = c.tt("info", "--json", "u.tt")
        doc = json.loads(info.stdout) if info.returncode == 0 else {}
        named = [p for p in doc.get("processes") or [] if "/sbin/ldconfig" in p["note"]]
        check(len(named) == 1 and "unrecorded" in named[0]["note"],
              "the tree names the untraceable child", doc.get("processes"))
        # in a child of the tree: only the tree's manifest names it, and record says so
        r2 = c.tt("record", "-o", "e.tt", "--", "sh", "-c", "env -i /bin/true; echo done")
        check(r2.returncode == 0 and "warning: 1 process of the tree exec'd a program the "
              "runtime cannot follow" in r2.stderr and "/bin/true" in r2.stderr,
              "record warns of an unrecorded exec in a child", r2.stderr)
        rep = c.tt("replay", "u.tt")
        check(rep.returncode == 8 and "/sbin/ldconfig" in rep.stderr and
              "replay matched the recording" not in rep.stderr and rep.stdout == r.stdout,
              "replay exits 8, naming it; the date still replays",
              "%d %r %s" % (rep.returncode, rep.stdout, rep.stderr[-800:]))


def a_shells_children_do_not_carry_their_siblings_notes():
    """bash forks a child for every command, and each child makes calls before it execs, so
    each has a trace that begins with a copy of the shell's names. The shell's notes of the
    children it started and reaped are not among them: the 30th child's trace holds as many
    objects as the 2nd's (it held 56 more), every child is listed with its pid and status, and
    the loop replays."""
    with Case("siblings") as c:
        # (a counted loop, so that every child is a /bin/true: the command substitution case
        # is sigchld_handlers_run_where_the_recording_ran_them's)
        r = c.tt("record", "-o", "b.tt", "--", "bash", "-c",
                 "for ((i = 0; i < 30; i++)); do /bin/true; done; echo done")
        check(r.returncode == 0 and r.stdout == "done\n", "record a bash loop of 30 children",
              r.stdout + r.stderr)
        procs = c.path("b.tt.procs")
        objects = {}
        for n in (2, 30):
            info = c.tt("info", os.path.join(procs, "root.%d.tt" % n))
            m = re.search(r"^objects:\s+(\d+)", info.stdout, re.M)
            objects[n] = int(m.group(1)) if m else -1
        check(objects[2] > 0 and objects[30] == objects[2],
              "the 30th fork child's trace has as many objects as the 2nd's", objects)
        info = c.tt("info", "b.tt")
        rows = [l.split() for l in info.stdout.splitlines() if re.match(r"root/\d+@1 ", l)]
        check(len(rows) == 30 and all(int(x[1]) > 0 and x[3:5] == ["exit", "0"] for x in rows),
              "info lists the 30 programs with their pids and exit 0", info.stdout[-1500:])
        rep = c.tt("replay", "b.tt")
        check(matched(rep) and rep.stdout == r.stdout, "the loop replays", rep.stderr[-1500:])


def single_process_recordings_have_no_tree():
    """A program that starts nothing leaves no FILE.procs, and info lists no tree."""
    with Case("single") as c:
        r = c.tt("record", "-o", "d.tt", "--", "date", "+%N")
        check(r.returncode == 0 and not os.path.exists(c.path("d.tt.procs")),
              "record date: no d.tt.procs", os.listdir(c.d))
        info = c.tt("info", "d.tt")
        check(info.returncode == 0 and "processes:" not in info.stdout,
              "info of a single process lists no tree", info.stdout[-400:])
        rep = c.tt("replay", "d.tt")
        check(matched(rep) and rep.stdout == r.stdout, "replay date matches", rep.stderr)


def the_tool_keeps_spare_files_for_the_tree_and_removes_them():
    """record keeps FILE.procs/.spares filled while the program runs (each process of the tree
    takes one for its trace, and the tool makes another): after 20 processes took theirs there
    are spares again, which there would not be if nobody made more. When the program has ended
    the folder is gone, and one a dead tool left is removed by the next recording."""
    with Case("spares") as c:
        d = c.path("s.tt.procs/.spares")
        script = ('for i in $(seq 1 20); do /bin/true; done; ' +
                  waits_for('[ "$(ls %s | wc -l)" -ge 1 ]' % d, "kept", "none left"))
        r = c.tt("record", "-o", "s.tt", "--", "sh", "-c", script)
        check(r.returncode == 0 and r.stdout.strip() == "kept",
              "record: the tree finds spares after 20 processes took theirs",
              r.stdout + r.stderr[-1500:])
        left = sorted(os.listdir(c.path("s.tt.procs")))
        check(".spares" not in left and "tree" in left and
              all(n == "tree" or n.endswith(".tt") for n in left),
              "... and the folder is gone afterwards: only traces and the tree", left)
        bad = [n for n in left if n.endswith(".tt") and
               c.tt("verify", os.path.join("s.tt.procs", n)).returncode != 0]
        check(not bad, "... every trace of the tree verifies", bad)
        # the tool makes a spare unnamed and links it in through /proc/self/fd; without /proc
        # (a mount namespace with an empty one, as root) it creates them by name instead
        probe = (os.geteuid() == 0 and shutil.which("unshare") and
                 subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /proc"],
                                capture_output=True, timeout=TIMEOUT).returncode == 0)
        if probe:
            d = c.path("p.tt.procs/.spares")
            script = ('for i in $(seq 1 20); do /bin/true; done; ' +
                      waits_for('[ "$(ls %s | wc -l)" -ge 1 ]' % d, "kept", "none left"))
            inner = 'mount -t tmpfs none /proc && exec "$@"'
            r = subprocess.run(["unshare", "-m", "sh", "-c", inner, "sh", TT, "record", "-o",
                                "p.tt", "--", "sh", "-c", script], capture_output=True,
                               text=True, env=c.env, cwd=c.d, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL)
            check(r.returncode == 0 and r.stdout.strip() == "kept",
                  "without /proc, the tool still keeps spares (made by name)",
                  r.stdout + r.stderr[-1500:])
        else:
            print("SKIP without /proc, the tool still keeps spares: no mount namespace here")
        os.makedirs(c.path("x.tt.procs/.spares"))
        with open(c.path("x.tt.procs/.spares/7"), "w") as f:
            f.write("left by a tool that died")
        r = c.tt("record", "-o", "x.tt", "--", "sh", "-c", "/bin/true; /bin/true")
        left = sorted(os.listdir(c.path("x.tt.procs"))) if r.returncode == 0 else []
        check(left == ["root.1.tt", "root.2.tt", "tree"],
              "a .spares a dead tool left goes with the next recording", left or r.stderr)


def reading_a_tree_never_makes_a_key():
    """info of a tree whose manifest is missing (an interrupted recording) reads every trace
    of the folder; only record reads or makes the signing key, never a command that reads."""
    with Case("nokey") as c:
        r = c.tt("record", "-o", "k.tt", "--", "sh", "-c", "/bin/true; /bin/true")
        check(r.returncode == 0, "record sh -c '/bin/true; /bin/true'", r.stderr[-1500:])
        os.unlink(c.path("k.tt.procs/tree"))
        env = dict(c.env, XDG_DATA_HOME=c.path("fresh"))
        i = subprocess.run([TT, "info", "k.tt"], capture_output=True, text=True, env=env,
                           cwd=c.d, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        check(i.returncode == 0 and "root/2" in i.stdout,
              "info reads the tree from its traces", i.stdout + i.stderr[-1500:])
        check(not os.path.exists(c.path("fresh")),
              "... and makes no key", sorted(os.listdir(c.path("fresh")))
              if os.path.exists(c.path("fresh")) else "")


def mac_ok(c, path):
    """Whether the trace at @path carries this case's key's MAC (docs/FORMAT.md, manifest byte
    400: HMAC-SHA256 over the manifest with the MAC and its checksum zeroed, then the object
    table chunk)."""
    with open(os.path.join(c.d, "keys", "tinytrace", "key"), "rb") as f:
        key = f.read()
    with open(path, "rb") as f:
        data = f.read()
    m = bytearray(data[:512])
    stored = bytes(m[400:432])
    m[400:432] = bytes(32)
    m[504:512] = bytes(8)
    off, length = struct.unpack_from("<QQ", data, 288)
    want = hmac.new(key, bytes(m) + data[off:off + length], hashlib.sha256).digest()
    return stored == want


def traces_finished_while_the_program_runs_are_signed_and_listed():
    """The tool reads and signs each trace of the tree as soon as its process has finished it,
    while the program still runs (spares.c, every 16 ms), not all of them after the program:
    the program waits, with a deadline, until the first child's trace carries a MAC. Every
    trace, read early or at the end, then carries this user's key's MAC, and the tree lists
    every process with its command line. The key is made before the program starts: made by
    the first signing, its folder would change under the running program (in this case, its
    working directory), which a replay does not reproduce."""
    with Case("early") as c:
        first = c.path("e.tt.procs/root.1.tt")
        script = ('[ -s keys/tinytrace/key ] && echo key || echo nokey; /bin/echo one; '
                  '/bin/echo two; ' +
                  waits_for('[ -n "$(od -v -An -tx1 -j400 -N32 %s | tr -d " 0\n")" ]' % first,
                            "signed", "unsigned"))
        r = c.tt("record", "-o", "e.tt", "--", "sh", "-c", script)
        check(r.returncode == 0 and r.stdout.splitlines()[-1:] == ["signed"],
              "record: a child's trace is signed while the program still runs",
              r.stdout + r.stderr[-1500:])
        check(r.stdout.splitlines()[:1] == ["key"],
              "... and the key was there when the program started", r.stdout)
        names = sorted(n for n in os.listdir(c.path("e.tt.procs")) if n.endswith(".tt"))
        bad = [n for n in names if not mac_ok(c, c.path("e.tt.procs/" + n))]
        check(len(names) >= 4 and not bad and mac_ok(c, c.path("e.tt")),
              "... and every trace of the tree, the root's too, carries the key's MAC",
              "%d traces, %s without a good MAC" % (len(names), bad))
        with open(c.path("keys/tinytrace/key"), "rb") as f:
            key = f.read()
        with open(c.path("keys/tinytrace/key"), "wb") as f:
            f.write(bytes(b ^ 1 for b in key))
        check(not mac_ok(c, c.path("e.tt.procs/" + names[0])),
              "... (a MAC checked with another key does not hold)")
        with open(c.path("keys/tinytrace/key"), "wb") as f:
            f.write(key)
        with open(c.path("e.tt.procs/tree")) as f:
            rows = [l.split("\t") for l in f.read().splitlines() if not l.startswith("#")]
        listed = {row[5]: row[6] for row in rows if len(row) > 6}
        check(all(n in listed for n in names) and listed.get("root.1.tt") == "/bin/echo one"
              and listed.get("root.2.tt") == "/bin/echo two",
              "... the tree lists every trace with its command line", listed)
        # (no replay here: od reads the recording's own file, live, and it is signed now)


def vfork_children_are_traced_as_the_programs_they_exec():
    """A vfork child runs on its parent's memory and records nothing; the program it execs is
    its first image (root.N.tt, as a posix_spawn child's), and a replay makes the same vfork.
    prog-vfork's children: an exec that fails, `date +%N` through a pipe, a static program, and
    a date whose child closes every descriptor before its exec (the runtime's settings must
    survive it, or that date would run untraced); dash's commands too."""
    with Case("vfork") as c:
        r = c.tt("record", "-o", "v.tt", "--", VFORK_PROG, "close-all")
        check(r.returncode == 0 and "date read: " in r.stdout and "missing: exit 127" in r.stdout,
              "record prog-vfork", r.stdout + r.stderr[-800:])
        procs = sorted(os.listdir(c.path("v.tt.procs"))) if r.returncode == 0 else []
        check(procs == ["root.2.tt", "root.4.tt", "tree"],
              "... the dates' traces are root.2.tt and root.4.tt (its child closed every "
              "descriptor: the settings stay); the failed exec and the static program have none",
              procs)
        info = c.tt("info", "--json", "v.tt")
        doc = json.loads(info.stdout) if info.returncode == 0 else {}
        rows = {p["path"]: p for p in doc.get("processes") or []}
        check(all(k in rows and "date" in rows[k].get("command", "") and
                  not rows[k].get("note") for k in ("root/2", "root/4")),
              "... info: root/2 and root/4 run date", doc.get("processes"))
        check("/sbin/ldconfig" in json.dumps(rows.get("root", {})),
              "... the root names the static program as run unrecorded", rows.get("root"))
        notraces = [(k, rows.get(k, {}).get("command"), rows.get(k, {}).get("note", ""))
                    for k in ("root/1", "root/3")]
        check(all("vfork child with no trace" in n for _, _, n in notraces) and
              "/sbin/ldconfig -p" in (notraces[1][1] or "") and
              "tinytrace-test-program" in (notraces[0][1] or ""),
              "... the two children without a trace are listed, with what they exec'd",
              notraces)
        same = replays_like(c, "v.tt", r.stdout, 10, "prog-vfork",
                            verdict=lambda rep: rep.returncode == 8)
        check(same == 10, "... replays print the recorded date and statuses, 10 of 10, and "
              "exit 8 for what ran live", same)
        r = c.tt("record", "-o", "h.tt", "--", VFORK_PROG, "sigchld")
        check(r.returncode == 0 and "the parent's handler ran" in r.stdout,
              "a vfork child that resets SIGCHLD leaves the parent's handler alone",
              r.stdout + r.stderr[-800:])
        rep = c.tt("replay", "h.tt")
        check(matched(rep) and rep.stdout == r.stdout, "... and the replay matches",
              "%r %r %s" % (r.stdout, rep.stdout, rep.stderr[-800:]))
        r = c.tt("record", "-o", "l.tt", "--", VFORK_PROG, "late")
        check(r.returncode == 0 and "reaped by the handler" in r.stdout,
              "a SIGCHLD that waited for a vfork to return is handled",
              r.stdout + r.stderr[-800:])
        same = replays_like(c, "l.tt", r.stdout, 3, "prog-vfork late")
        check(same == 3, "... recorded, and replayed where it was, 3 of 3", same)
        r = c.tt("record", "-o", "d.tt", "--", "sh", "-c", "/bin/echo a; date +%N; /bin/echo b")
        procs = sorted(os.listdir(c.path("d.tt.procs"))) if r.returncode == 0 else []
        check(procs == ["root.1.tt", "root.2.tt", "root.3.tt", "tree"],
              "dash's commands: one trace each, generation 0", procs or r.stderr)
        rep = c.tt("replay", "d.tt")
        check(matched(rep) and rep.stdout == r.stdout, "... and the replay matches",
              "%r %r %s" % (r.stdout, rep.stdout, rep.stderr[-800:]))


for case in (pipeline_replays_byte_identically, make_recipe_replays_byte_identically,
             waits_replay_the_recorded_order, sigchld_handlers_run_where_the_recording_ran_them,
             a_fork_whose_atfork_handlers_lock_replays,
             python_subprocess_system_and_popen_replay,
             hunt_catches_a_failing_shell_loop_and_its_replay_says_which, a_child_that_cannot_be_paired_is_said,
             a_process_killed_in_the_tree_leaves_the_rest_verifying,
             a_multiprocessing_pool_never_replays_a_lie,
             a_replayed_reader_ahead_of_its_writer_leaves_it_whole,
             an_untraceable_child_is_named_and_runs_live,
             a_shells_children_do_not_carry_their_siblings_notes,
             single_process_recordings_have_no_tree,
             the_tool_keeps_spare_files_for_the_tree_and_removes_them,
             traces_finished_while_the_program_runs_are_signed_and_listed,
             reading_a_tree_never_makes_a_key,
             vfork_children_are_traced_as_the_programs_they_exec):
    print("# " + case.__name__)
    try:
        case()
    except subprocess.TimeoutExpired as e:
        check(False, "%s: a program ran past its deadline" % case.__name__, e)
print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
