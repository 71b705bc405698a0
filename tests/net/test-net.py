#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Network peers come from the recording (issue 15): clients replay without their server, a
server without its clients, each 10 of 10 times byte-identically, and a live run differs.

Usage: test-net.py CASE TINYTRACE PRELOAD BUILDDIR [--live]

CASE is one of curl, urllib, epoll, server, resolve, anon. BUILDDIR holds the test programs
(epoll-client, tcp-server, resolve-probe, anon-probe). With --live the programs run without
tinytrace only, against the same peers (the sanitizer builds, where the preload library cannot
be put in front of an instrumented program).
"""
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import ttproc  # noqa: E402 (check() and the failures it keeps)

CASE = sys.argv[1]
TT, PRELOAD, BUILD = map(os.path.abspath, sys.argv[2:5])
LIVE_ONLY = "--live" in sys.argv[5:]
PYTHON = os.path.realpath(sys.executable)
TIMEOUT = 60
check = ttproc.check
failures = ttproc.failures


def prog(name):
    return os.path.join(BUILD, name)


class Case:
    """A temporary directory, and tinytrace run in it with a key of its own."""

    def __enter__(self):
        self.d = tempfile.mkdtemp(prefix="tt-net-")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TINYTRACE_")}
        self.env.update(TINYTRACE_PRELOAD=PRELOAD, XDG_DATA_HOME=os.path.join(self.d, "keys"))
        self.servers = []
        return self

    def __exit__(self, *exc):
        for s in reversed(self.servers):
            s.stop()
        shutil.rmtree(self.d, ignore_errors=True)
        return False

    def path(self, name):
        return os.path.join(self.d, name)

    def run(self, argv, **kw):
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=self.d,
                              timeout=TIMEOUT, **kw)

    def tt(self, *args):
        return self.run([TT] + list(args))


def deadline_loop(seconds, step=0.02):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield
        time.sleep(step)


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def read_line(proc, seconds):
    """The first line @proc prints, within @seconds; None when it prints none in time."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    line = b""
    end = time.monotonic() + seconds
    while not line.endswith(b"\n") and time.monotonic() < end:
        if sel.select(timeout=max(0, end - time.monotonic())):
            b = os.read(proc.stdout.fileno(), 1)
            if not b:
                break
            line += b
    sel.close()
    return line.decode() if line.endswith(b"\n") else None


class TimeServer:
    """tests/net/time-server.py: the current time in nanoseconds, or a fixed body."""

    def __init__(self, case, port=0, body=None, count=None):
        argv = [PYTHON, os.path.join(HERE, "time-server.py"), "--port", str(port)]
        if body is not None:
            argv += ["--body", body]
        if count:
            argv += ["--count", count]
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, env=case.env, cwd=case.d)
        case.servers.append(self)
        line = read_line(self.p, 20)
        if line is None:
            raise RuntimeError("the time server did not start")
        self.port = int(line)
        for _ in deadline_loop(20):
            if port_open(self.port):
                return
        raise RuntimeError("the time server does not answer on port %d" % self.port)

    def stop(self):
        if self.p.poll() is not None:
            return
        self.p.terminate()
        self.p.wait(timeout=20)
        self.p.stdout.close()
        for _ in deadline_loop(20):
            if not port_open(self.port):
                return


def replays_ten_times(c, trace, recorded, what, before=None, after=None):
    same = 0
    detail = ""
    for _ in range(10):
        if before:
            before()
        r = c.tt("replay", trace)
        ok = r.returncode == 0 and r.stdout == recorded and (not after or after())
        same += ok
        if not ok and not detail:
            detail = "exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr)
    check(same == 10, "%s: 10 of 10 replays match and print the recorded bytes (%d did)"
          % (what, same), detail)


# ---------------------------------------------------------------- HTTP clients

def http_client(name, argv_for):
    """Records the client @argv_for(port[, path]) against a time server, then replays it with
    the server stopped, and with a server on the same port that serves other data."""
    with Case() as c:
        srv = TimeServer(c)
        port = srv.port
        r = c.tt("record", "-o", "client.tt", "--", *argv_for(port))
        check(r.returncode == 0, "%s: record against the time server" % name, r.stderr)
        rec = r.stdout
        check(re.fullmatch(r"time \d+\n", rec) is not None,
              "%s: the client printed the server's time" % name, rec)
        if LIVE_ONLY:
            return
        live = c.run(argv_for(port)).stdout
        check(live != rec and live.startswith("time "), "%s: a live run differs" % name, live)
        srv.stop()
        check(not port_open(port), "%s: the server is stopped" % name)
        live = c.run(argv_for(port))
        check(live.stdout == "", "%s: a live run without the server gets nothing" % name,
              live.stdout)
        replays_ten_times(c, "client.tt", rec, "%s without its server" % name)

        # a server on the same port, serving other data: the replay does not reach it
        count = c.path("served")
        TimeServer(c, port=port, body="other data\n", count=count)
        live = c.run(argv_for(port)).stdout
        check(live == "other data\n", "%s: the other server serves other data" % name, live)
        os.unlink(count)
        r = c.tt("replay", "client.tt")
        check(r.returncode == 0 and r.stdout == rec,
              "%s: a replay with the other server running gets the recorded data" % name,
              r.stdout + r.stderr)
        check(not os.path.exists(count), "%s: the other server saw no request" % name)

        # the address connected to is compared: a client sent elsewhere diverges
        r = c.tt("replay", "client.tt", "--", *argv_for(port + 1))
        check(r.returncode == 1 and re.search(r"in (connect|getaddrinfo): replay diverged",
                                               r.stderr),
              "%s: a replay that asks for another port diverges (connect, getaddrinfo)" % name,
              r.stdout + r.stderr)
        # and so are the bytes sent: another request diverges where it is sent
        r = c.tt("replay", "client.tt", "--", *argv_for(port, "/other"))
        check(r.returncode == 1 and re.search(r"in (send|sendto|sendmsg|write|writev): replay "
                                               r"diverged", r.stderr),
              "%s: a replay that sends another request diverges at the send" % name,
              r.stdout + r.stderr)


def case_curl():
    curl = shutil.which("curl")
    if not curl:
        print("SKIP: curl is not installed (Debian package curl, listed in .ci/packages)")
        sys.exit(77)
    http_client("curl",
                lambda port, path="/": [curl, "-s", "http://127.0.0.1:%d%s" % (port, path)])


def case_urllib():
    code = ("import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:%d%s').read().decode())")
    http_client("python urllib", lambda port, path="/": [PYTHON, "-c", code % (port, path)])


def case_epoll():
    http_client("non-blocking connect + epoll",
                lambda port, path="/": [prog("epoll-client"), str(port), path])


# ---------------------------------------------------------------- a server

LINES = ["line alpha from the first client", "line beta, the second", "line gamma: third"]


def clients(port):
    """The three scripted clients, one after the other; their answers."""
    answers = []
    for line in LINES:
        for _ in deadline_loop(20):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                pass
        else:
            raise RuntimeError("the server does not listen on port %d" % port)
        with s:
            s.sendall(line.encode() + b"\n")
            got = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                got += b
        answers.append(got.decode())
    return answers


def serve(c, argv, log):
    """Runs the server @argv with the three clients; its output and the answers."""
    if os.path.exists(log):
        os.unlink(log)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=c.env,
                         cwd=c.d)
    first = read_line(p, 20)
    if first is None or not first.startswith("port "):
        p.kill()
        raise RuntimeError("the server did not say its port: %r %r" % (first, p.stderr.read()))
    answers = clients(int(first.split()[1]))
    out, err = p.communicate(timeout=TIMEOUT)
    return p.returncode, first + out.decode(), err.decode(), answers


def case_server():
    with Case() as c:
        log = c.path("server.log")
        argv = [prog("tcp-server"), log]
        rc, rec, err, answers = serve(c, argv if LIVE_ONLY else
                                      [TT, "record", "-o", "server.tt", "--"] + argv, log)
        check(rc == 0, "server: record with three clients", err)
        check(all(a.startswith("hello %d, you said \"%s\"" % (i + 1, l))
                  for i, (a, l) in enumerate(zip(answers, LINES))),
              "server: each client got its answer", answers)
        rec_log = open(log).read()
        check(len(rec_log.splitlines()) == 3 and all(l in rec_log for l in LINES),
              "server: the log has the three clients", rec_log)
        if LIVE_ONLY:
            return
        rc, live, err, _ = serve(c, [prog("tcp-server"), log], log)
        check(rc == 0 and live != rec and open(log).read() != rec_log,
              "server: a live run differs (other ports, other times)", live)

        # no clients, and the recorded port taken by another socket: the replay does not
        # listen, so it neither fails to bind nor waits for anybody
        port = int(rec.split()[1])
        hold = socket.socket()
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind(("127.0.0.1", port))
        hold.listen(1)
        with hold:
            replays_ten_times(c, "server.tt", rec, "server without clients, its port taken",
                              before=lambda: os.path.exists(log) and os.unlink(log),
                              after=lambda: open(log).read() == rec_log)
            check(open(log).read() == rec_log, "server: the replay wrote the recorded log")


# ---------------------------------------------------------------- resolution, anonymous fds

def case_resolve():
    with Case() as c:
        r = c.tt("record", "-o", "resolve.tt", "--", prog("resolve-probe"))
        check(r.returncode == 0 and "getaddrinfo: family 2" in r.stdout
              and "gethostbyname: name localhost" in r.stdout,
              "resolve: record getaddrinfo, gethostbyname*, getnameinfo", r.stdout + r.stderr)
        if LIVE_ONLY:
            return
        replays_ten_times(c, "resolve.tt", r.stdout, "resolve")
        r = c.tt("replay", "resolve.tt", "--", prog("resolve-probe"), "127.0.0.1")
        check(r.returncode == 1 and "getaddrinfo" in r.stderr,
              "resolve: a replay that asks another name diverges at getaddrinfo",
              r.stdout + r.stderr)


def case_anon():
    with Case() as c:
        r = c.tt("record", "-o", "anon.tt", "--", prog("anon-probe"))
        check(r.returncode == 0 and "eventfd: 7" in r.stdout and "signal 10" in r.stdout,
              "anon: record timerfd, eventfd and signalfd reads", r.stdout + r.stderr)
        if LIVE_ONLY:
            return
        live = c.run([prog("anon-probe")]).stdout
        check(live != r.stdout, "anon: a live run differs", live)
        replays_ten_times(c, "anon.tt", r.stdout, "anon")


CASES = {"curl": case_curl, "urllib": case_urllib, "epoll": case_epoll, "server": case_server,
         "resolve": case_resolve, "anon": case_anon}

if LIVE_ONLY:
    # the programs alone, without tinytrace: what the sanitizer build checks
    def tt_live(self, *args):
        assert args[0] == "record"
        return self.run(list(args[args.index("--") + 1:]))
    Case.tt = tt_live
    TT = None

CASES[CASE]()
print("%d failure(s)" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
