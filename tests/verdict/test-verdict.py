#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A verdict you can trust, and traces from strangers (issue 14): integration tests through the
tinytrace binary.

Usage: test-verdict.py TINYTRACE PRELOAD TAMPER SETUID_PROG FORGE
Each check prints ok or FAIL; a check that cannot run here (not root, no unshare) says SKIP and
why. Every case runs in its own temporary directory, with its own key directory
(XDG_DATA_HOME), removed at the end.
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

TT, PRELOAD, TAMPER, SETUID, FORGE = map(os.path.abspath, sys.argv[1:6])
TIMEOUT = 60
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        if detail:
            print("     " + str(detail).replace("\n", "\n     ")[:3000])
        failures.append(what)
    return cond


def skip(what, why):
    print("SKIP %s: %s" % (what, why))


class Case:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.d = tempfile.mkdtemp(prefix="tt-verdict-")
        os.chmod(self.d, 0o755)
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

    def tt(self, *args, env=None, timeout=TIMEOUT, stdin=None):
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run([TT] + [str(a) for a in args], capture_output=True, text=True,
                              env=e, cwd=self.d, timeout=timeout, stdin=stdin)


def output_from_an_unrecorded_source_is_a_divergence_of_output():
    """cat reads a regular file, which tinytrace leaves live: changed between record and replay,
    the output differs, and the verdict says so (exit 1, reason output), never 'matched'."""
    with Case("output") as c:
        data = c.path("data.txt")
        with open(data, "w") as f:
            f.write("first line\nsecond line\n")
        r = c.tt("record", "-o", "cat.tt", "--", "cat", data)
        check(r.returncode == 0, "record cat FILE", r.stderr)
        rep = c.tt("replay", "cat.tt")
        check(rep.returncode == 0, "replay of the unchanged file matches", rep.stderr)
        with open(data, "w") as f:
            f.write("first line\nchanged line\n")
        report = c.path("report.json")
        rep = c.tt("replay", "--report", report, "cat.tt")
        check(rep.returncode == 1, "replay of a changed file: exit 1, not 0",
              "%d %s" % (rep.returncode, rep.stderr))
        doc = json.load(open(report)) if os.path.exists(report) else {}
        check(doc.get("reason") == "output", "... the reason is output", doc)
        check("second line" in rep.stderr and "changed line" in rep.stderr,
              "... the message shows the expected and the actual line", rep.stderr)
        check("matched" not in rep.stderr.split("\n")[-2], "... and never says matched",
              rep.stderr)
        # the output is left out on request: the calls alone match
        rep = c.tt("replay", "--no-check-output", "cat.tt")
        check(rep.returncode == 0, "replay --no-check-output of the changed file matches",
              rep.stderr)
        # a program that writes less than it did: the output ended early
        with open(data, "w") as f:
            f.write("first line\n")
        rep = c.tt("replay", "--force", "--report", report, "cat.tt")
        doc = json.load(open(report)) if os.path.exists(report) else {}
        check(rep.returncode == 1 and doc.get("reason") == "output",
              "replay of a shorter file: exit 1, reason output", "%d %s %s" % (
                  rep.returncode, rep.stderr, doc))


def live_children_give_the_not_all_compared_code():
    """sh -c 'date +%N; date +%N': the two dates are traced and replayed with the shell (exit
    0); a child whose environment drops the runtime (env -i) runs live: record warns, replay
    exits 8 and names it."""
    with Case("children") as c:
        r = c.tt("record", "-o", "sh.tt", "--", "sh", "-c", "date +%N; date +%N")
        check(r.returncode == 0 and "untraced" not in r.stderr,
              "record sh -c 'date +%N; date +%N': the children are traced", r.stderr)
        rep = c.tt("replay", "sh.tt")
        check(rep.returncode == 0 and r.stdout == rep.stdout,
              "... and replay with the shell, exit 0", "%d %s" % (rep.returncode, rep.stderr))
        r = c.tt("record", "-o", "env.tt", "--", "sh", "-c", "env -i /bin/true; date +%N")
        check(r.returncode == 0, "record sh -c 'env -i /bin/true; date +%N'", r.stderr)
        report = c.path("report.json")
        rep = c.tt("replay", "--report", report, "env.tt")
        check(rep.returncode == 8, "replay exits 8: matched, but not all compared",
              "%d %s" % (rep.returncode, rep.stderr))
        check("ran live" in rep.stderr and "/bin/true" in rep.stderr,
              "... the verdict names the live child", rep.stderr)
        # a program that starts no process still matches with 0
        r = c.tt("record", "-o", "date.tt", "--", "date")
        rep = c.tt("replay", "date.tt")
        check(rep.returncode == 0 and "live" not in rep.stderr,
              "date alone replays with exit 0", rep.stderr)


def edited_command_lines_do_not_run():
    """The attack: a trace whose recorded argv was edited and re-checksummed verifies clean, but
    its signature is no longer this user's: replay refuses it, showing the command; --trust runs
    it and prints it first; this user's own trace replays without a word."""
    with Case("trust") as c:
        r = c.tt("record", "-o", "sh.tt", "--", "sh", "-c", "exec true #touch tampered")
        check(r.returncode == 0, "record sh -c 'exec true #touch tampered'", r.stderr)
        key = os.path.join(c.d, "keys", "tinytrace", "key")
        check(os.path.exists(key) and stat.S_IMODE(os.stat(key).st_mode) == 0o600,
              "record made this user's key, mode 0600", os.path.exists(key))
        rep = c.tt("replay", "sh.tt")
        check(rep.returncode == 0, "this user's own trace replays, no --trust needed", rep.stderr)
        check("replaying sh -c 'exec true #touch tampered'" in rep.stderr,
              "... and the command is printed before it runs", rep.stderr)
        t = subprocess.run([TAMPER, c.path("sh.tt"), "argv[2]=", "true #", "touch "],
                           capture_output=True, text=True)
        check(t.returncode == 0, "tamper: argv[2] edited, checksums made right", t.stderr)
        v = c.tt("verify", "sh.tt")
        check(v.returncode == 0, "the edited trace verifies clean", v.stdout + v.stderr)
        rep = c.tt("replay", "sh.tt")
        check(rep.returncode == 2, "replay of the edited trace is refused (exit 2)",
              "%d %s" % (rep.returncode, rep.stderr))
        check("exec touch touch tampered" in rep.stderr and "--trust" in rep.stderr,
              "... the refusal shows the command and the way round", rep.stderr)
        check(not os.path.exists(c.path("tampered")), "... and nothing ran")
        rep = c.tt("replay", "--trust", "sh.tt")
        check("replaying sh -c 'exec touch touch tampered'" in rep.stderr,
              "replay --trust prints the command first", rep.stderr)
        check(os.path.exists(c.path("tampered")), "... and runs it")
        # a trace of another user's (another key) is refused the same way
        other = dict(XDG_DATA_HOME=os.path.join(c.d, "other-keys"))
        rep = c.tt("replay", "sh.tt", env=other)
        check(rep.returncode == 2 and "no key" in rep.stderr,
              "with another user's key directory the trace is refused", rep.stderr)
        # -- PROG: the user names the program; no signature is needed
        rep = c.tt("replay", "sh.tt", "--", "sh", "-c", "exec true #touch tampered", env=other)
        check(rep.returncode == 0, "replay -- PROG runs without a signature", rep.stderr)


def setuid_programs_ignore_the_environment():
    """A setuid-root program linked with libtinytrace, run by another user with TINYTRACE_FILE
    naming a root-owned file, leaves the file as it was."""
    if os.geteuid() != 0:
        skip("setuid", "needs root to make a setuid-root program and another user")
        return
    user = "tt-setuid-test"
    if subprocess.run(["id", "-u", user], capture_output=True).returncode != 0:
        u = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", user], capture_output=True, text=True)
        if u.returncode != 0:
            skip("setuid", "cannot add a user: " + u.stderr.strip())
            return
    uid = int(subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout)
    gid = int(subprocess.run(["id", "-g", user], capture_output=True, text=True).stdout)
    with Case("setuid") as c:
        prog = c.path("setuid-prog")
        shutil.copy(SETUID, prog)
        # the library the program needs, readable by the user
        for d in {os.path.dirname(PRELOAD), os.path.dirname(os.path.dirname(PRELOAD))}:
            pass
        os.chown(prog, 0, 0)
        os.chmod(prog, 0o4755)
        protected = c.path("root-only")
        os.mkdir(protected, 0o755)
        target = os.path.join(protected, "precious")
        with open(target, "w") as f:
            f.write("precious contents\n")
        os.chmod(target, 0o644)
        before = os.stat(target)
        env = {"PATH": "/usr/bin:/bin", "TINYTRACE_MODE": "record", "TINYTRACE_FILE": target,
               "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", "")}
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
                            prog], capture_output=True, text=True, env=env, timeout=TIMEOUT)
        if r.returncode != 0 and "error while loading shared libraries" in r.stderr:
            skip("setuid", "the user cannot load libtinytrace from the build tree: " + r.stderr)
            return
        after = os.stat(target)
        check(r.returncode == 0, "the setuid program runs for the other user", r.stderr)
        check("mode 0" in r.stdout, "... its session from the environment is off", r.stdout)
        check(open(target).read() == "precious contents\n" and after.st_ino == before.st_ino,
              "... and the root-owned file is unchanged", r.stdout + r.stderr)
        check(not [n for n in os.listdir(protected) if n != "precious"],
              "... and nothing else was written beside it", os.listdir(protected))


def gc_leaves_a_recording_in_another_pid_namespace_alone():
    """A recording runs in its own PID namespace, so the pid in its .partial name means nothing
    outside: gc looks at the writer's lock and leaves the file; the recording completes."""
    if shutil.which("unshare") is None:
        skip("gc namespace", "no unshare")
        return
    with Case("gc") as c:
        go = c.path("go")
        script = "while [ ! -e %s ]; do sleep 0.05; done; date" % go
        # in the new namespace the pids start near 4 000 000, which no process outside has:
        # a test of liveness by pid would call the recording dead
        inner = "echo 3999990 > /proc/sys/kernel/ns_last_pid 2>/dev/null; exec \"$@\""
        p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", inner,
                              "sh", TT, "record", "-o", c.path("ns.tt"), "--", "sh", "-c",
                              script], env=c.env, cwd=c.d,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        partial = None
        end = time.monotonic() + 20
        while time.monotonic() < end and partial is None:
            for n in os.listdir(c.d):
                if n.startswith("ns.tt.") and n.endswith(".partial") and \
                        os.path.getsize(c.path(n)) >= 512:
                    partial = n
            if p.poll() is not None:
                break
            time.sleep(0.02)
        if partial is None:
            out, err = p.communicate(timeout=TIMEOUT)
            if "unshare" in err and ("Operation not permitted" in err or "failed" in err):
                skip("gc namespace", err.strip())
                return
            check(False, "the recording in a PID namespace started", err)
            return
        pid_in_name = int(partial.split(".")[-2])
        outside = os.path.exists("/proc/%d" % pid_in_name)
        g = c.tt("gc")
        check(os.path.exists(c.path(partial)), "gc leaves the live recording's file (its name "
              "says pid %d, of the other namespace)" % pid_in_name, g.stdout + g.stderr)
        check("kept" in g.stdout and "lock" in g.stdout, "... and says why", g.stdout)
        if outside:
            skip("gc namespace, pid check", "pid %d exists outside too" % pid_in_name)
        open(go, "w").close()
        out, err = p.communicate(timeout=TIMEOUT)
        check(p.returncode == 0, "the recording completes", err)
        v = c.tt("verify", "ns.tt")
        check(v.returncode == 0, "... and its trace verifies", v.stdout + v.stderr)


def a_forged_report_does_not_change_the_verdict():
    """The program writes a 'matched' report to every descriptor, the report channel among them,
    and diverges: the tool ignores the lines without its nonce and gives the true verdict; with
    a FIFO put over every descriptor, the tool still ends within its deadline."""
    with Case("forge") as c:
        r = c.tt("record", "-o", "f.tt", "--", FORGE)
        check(r.returncode == 0, "record the forging program", r.stderr)
        start = time.monotonic()
        rep = c.tt("replay", "f.tt", "--", FORGE, "--diverge")
        check(rep.returncode == 1, "its forged 'matched' does not hide the divergence (exit 1)",
              "%d %s" % (rep.returncode, rep.stderr))
        check("did not come from the runtime" in rep.stderr,
              "... the forged lines are counted and ignored", rep.stderr)
        rep = c.tt("replay", "f.tt", "--", FORGE)
        check(rep.returncode == 0, "without the divergence the replay matches", rep.stderr)
        rep = c.tt("replay", "f.tt", "--", FORGE, "--diverge", "--fifo", c.d, timeout=30)
        check(rep.returncode != 0 and time.monotonic() - start < 30,
              "a FIFO over every descriptor: no false match, and no hang",
              "%d %s" % (rep.returncode, rep.stderr))


for case in (output_from_an_unrecorded_source_is_a_divergence_of_output,
             live_children_give_the_not_all_compared_code,
             edited_command_lines_do_not_run,
             setuid_programs_ignore_the_environment,
             gc_leaves_a_recording_in_another_pid_namespace_alone,
             a_forged_report_does_not_change_the_verdict):
    try:
        case()
    except subprocess.TimeoutExpired as e:
        check(False, case.__name__ + ": timed out", e)
print("%d failure(s)" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
