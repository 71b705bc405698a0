#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The whole process identity (issue 15): a program's pid, ppid and tids, its resource use, the
CPU it runs on and the pseudo-files of /proc and /sys it reads replay byte for byte, 10 times of
10, while a live run prints something else; and the ids it learned still reach the live
process and its files.

Usage: test-identity.py TINYTRACE PRELOAD PROBE_IDENTITY
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ttproc  # noqa: E402  (what the integration tests share: check() and its failures)

TT, PRELOAD, PROBE = map(os.path.abspath, sys.argv[1:4])
TIMEOUT = 60
check, failures = ttproc.check, ttproc.failures


class Case:
    def __enter__(self):
        self.d = tempfile.mkdtemp(prefix="tt-identity-")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TINYTRACE_")}
        self.env.update(TINYTRACE_PRELOAD=PRELOAD, XDG_DATA_HOME=os.path.join(self.d, "keys"))
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.d, ignore_errors=True)
        return False

    def tt(self, *args):
        return subprocess.run([TT] + list(args), capture_output=True, text=True, env=self.env,
                              cwd=self.d, timeout=TIMEOUT)

    def live(self, argv):
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=self.d,
                              timeout=TIMEOUT).stdout


# the channels of runtime.h, as `tinytrace dump` prints them
CH_CLOCK, CH_PID, CH_USAGE, CH_CPU, CH_PSEUDO = 1, 5, 9, 10, 11


def record_and_replay(argv, what, expect=(), sites=(), before_replay=None):
    """Records @argv, checks the recorded output holds each string of @expect and the trace an
    input event at each (site, channel) of @sites (so a value that happens to be the same in
    every run is still seen to come from the recording), replays it 10 times (exit 0 and the
    recorded stdout each time) and runs it live once (other output); @before_replay runs between
    the recording and the replays. Returns the recorded output."""
    with Case() as c:
        r = c.tt("record", "-o", "t.tt", "--", *argv)
        if not check(r.returncode == 0, "%s: recorded" % what, r.stdout + r.stderr):
            return ""
        rec = r.stdout
        for e in expect:
            check(e in rec, "%s: the recording prints %r" % (what, e), rec)
        dump = c.tt("dump", "--kind", "io", "t.tt").stdout
        for site, ch in sites:
            check(" io:in - %s %d " % (site, ch) in dump,
                  "%s: %s is recorded on channel %d" % (what, site, ch), dump[:2000])
        if before_replay:
            before_replay()
        same, last = 0, None
        for _ in range(10):
            rr = c.tt("replay", "t.tt")
            ok = rr.returncode == 0 and rr.stdout == rec
            same += ok
            if not ok:
                last = rr
        check(same == 10, "%s: 10 of 10 replays print the recorded output (%d did)" % (what, same),
              last and "exit %d\n%s%s" % (last.returncode, last.stdout, last.stderr))
        live = c.live(argv)
        check(live != rec, "%s: a live run prints something else" % what, live)
        return rec


def the_ids_replay_and_reach_the_live_process():
    rec = record_and_replay([PROBE, "ids"], "pid, ppid, tids, CPU",
                            ["main thread's tid is the pid", "kill(pid, 0) 0\n",
                             "kill(ppid, 0) 0\n", "tgkill(pid, tid, 0) 0\n",
                             "syscall(SYS_tkill, tid, 0) 0\n", "delivered 1\n",
                             "worker tid", "is not the pid", "syscall(SYS_tkill, worker, 0) 0\n",
                             "the worker got SIGUSR1: 1\n"],
                            [("getpid", CH_PID), ("getppid", CH_PID), ("gettid", CH_PID),
                             ("sched_getcpu", CH_CPU), ("getcpu", CH_CPU)])
    pid = rec.split()[1] if rec.startswith("pid ") else "?"
    check("syscall: pid %s ppid " % pid in rec, "syscall() gives the same ids as libc", rec)


def resource_use_and_clock_resolution_replay():
    record_and_replay([PROBE, "usage"], "getrusage, times, sysinfo, getloadavg, clock_getres",
                      ["getrusage 0:", "sysinfo 0:", "getloadavg 3:",
                       "clock_getres(MONOTONIC) 0:", "clock_getres(REALTIME, NULL) 0\n"],
                      [("getrusage", CH_USAGE), ("times", CH_USAGE), ("sysinfo", CH_USAGE),
                       ("getloadavg", CH_USAGE), ("clock_getres", CH_CLOCK),
                       ("clock_getres(CLOCK_MONOTONIC)", CH_CLOCK),
                       ("clock_getres(CLOCK_PROCESS_CPUTIME_ID)", CH_CLOCK),
                       ("clock_getres(CLOCK_MONOTONIC_COARSE)", CH_CLOCK)])


PSEUDO_SITES = [("open", CH_PSEUDO), ("openat", CH_PSEUDO), ("fopen", CH_PSEUDO),
                ("read", CH_PSEUDO), ("pread", CH_PSEUDO), ("lseek", CH_PSEUDO)]


def pseudo_files_replay_and_proc_paths_reach_the_live_process():
    # a process that is gone when the replays run: its /proc/<pid>/stat is opened on a stand-in
    helper = subprocess.Popen(["sleep", "120"])
    try:
        def end_helper():
            helper.kill()
            helper.wait()

        rec = record_and_replay(
            [PROBE, "ids", "proc", "gone", str(helper.pid)], "pseudo-files, /proc/<id>",
            ["/proc/self/stat by fgets: ", "(probe-identity) R", "/proc/self/status by read: PPid:",
             "/proc/uptime by fscanf: 2 ", "/proc/loadavg by pread: ",
             "/proc/meminfo by getline: MemTotal:", "/proc/stat by fread: 64 [cpu ",
             "/proc/self/stat by fdopen and fgets: ", ", SEEK_SET 0, read again ",
             "openat(/proc/self, stat): ", "readlink(/proc/<pid>/exe): probe-identity\n",
             "/proc/<ppid>/status: Name:\ttinytrace\n",
             "written through /proc/<tid>: 7, its name now renamed\n",
             "/proc/<gone pid>/stat: %d (sleep)" % helper.pid],
            PSEUDO_SITES, before_replay=end_helper)
        pid = rec.split()[1] if rec.startswith("pid ") else "?"
        check("/proc/self/stat by fgets: %s (probe-identity)" % pid in rec,
              "/proc/self/stat names the recorded pid", rec)
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()


def python_ppid_and_uptime_replay():
    code = 'import os; print(os.getppid(), open("/proc/uptime").read())'
    record_and_replay([sys.executable, "-c", code], "python3 getppid and /proc/uptime",
                      sites=[("getppid", CH_PID), ("open", CH_PSEUDO), ("read", CH_PSEUDO)])


def cat_of_proc_files_replays():
    cat = shutil.which("cat")
    if cat:
        record_and_replay([cat, "/proc/uptime", "/proc/loadavg", "/proc/self/stat"],
                          "cat /proc/uptime /proc/loadavg /proc/self/stat",
                          sites=[("open", CH_PSEUDO), ("read", CH_PSEUDO)])


def bash_random_replays():
    # bash seeds $RANDOM from gettimeofday, getpid, getppid and an address
    bash = shutil.which("bash")
    if not bash:
        print("SKIP bash $RANDOM: no bash")
        return
    record_and_replay([bash, "-c", "echo $RANDOM $RANDOM"], "bash $RANDOM")


def uuidgen_replays():
    # util-linux mixes getpid and getppid into the bytes it takes from getrandom
    uuidgen = shutil.which("uuidgen")
    if not uuidgen:
        print("SKIP uuidgen: not installed (Debian package uuid-runtime, in .ci/packages)")
        return
    record_and_replay([uuidgen], "uuidgen", sites=[("getppid", CH_PID)])
    record_and_replay([uuidgen, "-r"], "uuidgen -r", sites=[("getppid", CH_PID)])


def main():
    the_ids_replay_and_reach_the_live_process()
    resource_use_and_clock_resolution_replay()
    pseudo_files_replay_and_proc_paths_reach_the_live_process()
    python_ppid_and_uptime_replay()
    cat_of_proc_files_replays()
    bash_random_replays()
    uuidgen_replays()
    print("%d failure(s)" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


sys.exit(main())
