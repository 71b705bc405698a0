#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The recorded world (issue 15): a program sees the same address space, environment, argv and
auxv in record and replay, and a live run differs.

Usage: test-world.py TINYTRACE PRELOAD PROBE_ADDR
"""
import os
import shutil
import subprocess
import sys
import tempfile

TT, PRELOAD, PROBE = map(os.path.abspath, sys.argv[1:4])
TIMEOUT = 60
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        if detail:
            print("     " + str(detail).replace("\n", "\n     ")[:3000])
        failures.append(what)
    return cond


class Case:
    def __enter__(self):
        self.d = tempfile.mkdtemp(prefix="tt-world-")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TINYTRACE_")}
        self.env.update(TINYTRACE_PRELOAD=PRELOAD, XDG_DATA_HOME=os.path.join(self.d, "keys"))
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.d, ignore_errors=True)
        return False

    def tt(self, *args, env=None):
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run([TT] + list(args), capture_output=True, text=True, env=e,
                              cwd=self.d, timeout=TIMEOUT)


def replays_ten_times(c, trace, recorded, what):
    same = 0
    for _ in range(10):
        r = c.tt("replay", trace)
        same += r.returncode == 0 and r.stdout == recorded
    check(same == 10, "%s: 10 of 10 replays print the recorded lines (%d did)" % (what, same))


def the_address_space_and_the_environment_replay():
    with Case() as c:
        r = c.tt("record", "-o", "addr.tt", "--", PROBE, "an argument")
        check(r.returncode == 0, "record the address probe", r.stderr)
        rec = r.stdout
        check("stack 0x" in rec and "at_random" in rec, "the probe printed its world", rec)
        check("TINYTRACE" not in rec, "the program sees no TINYTRACE_* variable", rec)
        replays_ten_times(c, "addr.tt", rec, "stack, heap and mmap addresses, AT_RANDOM, env")
        # a live run under ASLR: other addresses, other AT_RANDOM bytes
        live = subprocess.run([PROBE, "an argument"], capture_output=True, text=True,
                              env=c.env, cwd=c.d).stdout
        check(live != rec, "a live run differs from the recording", live)
        # the environment the program saw is the recorded one, even when the replay's differs
        r = c.tt("replay", "addr.tt", env={"SOME_NEW_VARIABLE": "x" * 40})
        check(r.returncode == 0 and r.stdout == rec,
              "a replay from an environment with one more variable still sees the recorded "
              "one", r.stdout + r.stderr)
        # --aslr: randomization kept, and the replay then sees other addresses
        r = c.tt("record", "--aslr", "-o", "aslr.tt", "--", PROBE)
        rr = c.tt("replay", "aslr.tt")
        check(rr.returncode == 1 and "output differs" in rr.stderr,
              "with --aslr the addresses differ, and the output check says so",
              rr.stdout + rr.stderr)


def openssl_takes_its_random_bytes_from_the_os():
    """OpenSSL is told to take no random bytes from the CPU (OPENSSL_ia32cap, set by record in
    the program's environment, and replayed with it): `openssl rand` replays."""
    openssl = shutil.which("openssl")
    if not openssl:
        print("SKIP openssl: not installed")
        return
    with Case() as c:
        r = c.tt("record", "-o", "rand.tt", "--", openssl, "rand", "-hex", "16")
        check(r.returncode == 0 and len(r.stdout.strip()) == 32, "record openssl rand",
              r.stderr)
        env = c.tt("record", "-o", "env.tt", "--", "sh", "-c", "echo $OPENSSL_ia32cap")
        check(env.stdout.strip() == "~0x4000000000000000:~0x40000",
              "record masks RDRAND and RDSEED for OpenSSL", env.stdout)
        replays_ten_times(c, "rand.tt", r.stdout, "openssl rand -hex 16")
        live = subprocess.run([openssl, "rand", "-hex", "16"], capture_output=True,
                              text=True).stdout
        check(live != r.stdout, "a live openssl rand differs", live)


the_address_space_and_the_environment_replay()
openssl_takes_its_random_bytes_from_the_os()
print("%d failure(s)" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
