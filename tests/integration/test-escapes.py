#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Nothing a trace or the file system says reaches a terminal raw (issue 14, point 10): terminal
escapes ("\\x1b]0;" sets the window title, "\\x1b[2J" clears the screen, and the C1 CSI, U+009B)
in a recorded argv and cwd, a thread name, a function name, a file name and a directory entry
come out of every verb of the tool (but record and replay) escaped: no byte 0x1b, no C1 control,
in stdout or stderr, whatever the verb prints them in (text, JSON, error messages, getopt's
messages).

`tinytrace info` shows the recorded command line, working directory and environment (what
replay would run), escaped in its text and exact in its JSON; a damaged command line is said to
be one. With
--record PRELOAD (builds without sanitizers: it preloads the runtime) the same holds for a trace
that `tinytrace record` made of a program run with hostile arguments in a hostile directory.

Usage: test-escapes.py TINYTRACE MKSHAPE MKPARTIAL [--record PRELOAD]"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step
import ttproc
from ttproc import check

TT, MKSHAPE, MKPARTIAL = map(os.path.abspath, sys.argv[1:4])
RECORD = "--record" in sys.argv[4:]
T = testwrap.timeout(60)

ESC_NAME = "\x1b]0;title\x07\x1b[2J"  # in file names
C1 = "\u009b".encode()                # the C1 CSI in UTF-8: a terminal acts on it too


def raw_bytes(b):
    """The terminal controls @b holds: ESC, BEL and the C1 controls (in UTF-8)."""
    bad = [c for c in b if c in (0x1b, 0x07, 0x9b)]
    return bad or (C1 in b)


def run(args, env=None):
    # str arguments (the escapes are valid Unicode), so that testwrap knows the programs
    p = subprocess.run([str(a) for a in args], capture_output=True, timeout=T, env=env)
    return p.returncode, p.stdout, p.stderr


def clean(name, args, want_rc=None, also=None):
    """Runs @args; checks that neither stream holds a terminal control (and the exit status,
    and @also(stdout, stderr), when given). Returns (rc, stdout, stderr)."""
    rc, out, err = run(args)
    ok = not raw_bytes(out) and not raw_bytes(err)
    if want_rc is not None:
        ok = ok and rc == want_rc
    if also is not None:
        try:
            ok = ok and also(out, err)
        except (ValueError, KeyError, TypeError):  # not the output it should be
            ok = False
    check(ok, name, (rc, out[:600], err[:600]))
    return rc, out, err


def make_partial(d):
    p = subprocess.Popen([MKPARTIAL, os.path.join(d, "run.tt")], stdout=subprocess.PIPE,
                         text=True)
    for _ in range(2):
        assert p.stdout.readline().startswith("flushed ")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=T)
    partial = [f for f in os.listdir(d) if f.endswith(".partial")]
    assert len(partial) == 1, os.listdir(d)
    return os.path.join(d, partial[0])


# the command line and the directory mkshape's hostile trace holds (mkshape.c)
ARGV = ["/bin/\x1b]0;owned\x07prog", "--title=\x1b]0;pwned\x1b\\",
        "\x1b[2J\x1b[Hcleared \u009b31m"]
CWD = "/tmp/\x1b[2J\x1b]0;cwd\x07dir"
ENV = ["PATH=/bin", "LD_PRELOAD=/tmp/\x1b]0;evil\x07.so", "\x1b[2JTERM=xterm"]
EXECFN, UNTRACED = "/bin/\x1b]0;x\x07prog", "/bin/sh -c \x1b[2J"
ANY = object()  # a recording's environment: whatever the runtime recorded, or none


def esc(s):
    """@s as the tool prints it (tools/tool.c, tool_print_text), for the ASCII and the C1
    control characters these tests use: controls and a backslash as \\xNN and \\\\."""
    out = []
    for b in s.encode():
        if b == 0x5c:
            out.append("\\\\")
        elif 0x20 <= b < 0x7f:
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


def shell_word(a):
    """An argument as info shows it: bare when plain, else single-quoted; escaped."""
    if a and re.fullmatch(r"[A-Za-z0-9_./=:,+@%-]+", a):
        return a
    return "'" + esc(a).replace("'", "'\\''") + "'"


def env_text(env):
    """info's lines for the environment @env (a list, or None: not recorded)."""
    if env is None:
        return "environment:      not recorded\n"
    names = [esc(v.split("=", 1)[0]) for v in env]
    text = "environment:      %d variable%s%s\n" % (len(env), "" if len(env) == 1 else "s",
                                                   ": " + " ".join(names) if env else "")
    return text + "".join(" " * 18 + esc(v) + "\n" for v in env if v.startswith("LD_"))


def info_command(t, argv, cwd, name, env=None, execfn=None, untraced=None):
    """info shows @argv, @cwd and @env: escaped in the text, exact in the JSON."""
    rc, out, err = clean("info --json %s: the command line stays escaped" % name,
                         [TT, "info", "--json", t], want_rc=0)
    cmd = json.loads(out).get("command") if rc == 0 else None
    if env is ANY and cmd is not None:
        env, execfn = cmd.get("environment"), cmd.get("execfn")
    check(cmd is not None and cmd.get("argv") == argv and cmd.get("cwd") == cwd and
          cmd.get("environment") == env and cmd.get("execfn") == execfn and
          cmd.get("untraced") == untraced and cmd.get("damaged") is None,
          "info --json %s: argv, cwd, environment, execfn and untraced exactly as recorded" %
          name, cmd)
    rc, out, err = clean("info %s: the recorded command line is shown escaped" % name,
                         [TT, "info", t], want_rc=0)
    text = out.decode("utf-8", errors="replace")
    want = ("command:          " + " ".join(shell_word(a) for a in argv) + "\n" +
            "cwd:              " + esc(cwd) + "\n" + env_text(env) +
            ("untraced child:   " + esc(untraced) + "\n" if untraced is not None else ""))
    check(want in text, "info %s: command, cwd and environment in the text" % name,
          (text[:1500], want))


def recorded(d):
    """A trace made by `tinytrace record` of a program run with hostile arguments, in a
    directory with a hostile name."""
    wd = os.path.join(d, "rec-" + ESC_NAME)
    os.mkdir(wd)
    t = os.path.join(d, "recorded.tt")
    argv = ["/bin/echo", "\x1b]0;arg\x07", "\x1b[2J"]
    r = subprocess.run([TT, "record", "-o", t, "--"] + argv, cwd=wd, capture_output=True,
                       timeout=T)
    assert r.returncode == 0, r.stderr
    info_command(t, argv, os.path.realpath(wd), "of a recorded run", ANY)
    for verb in (["dump"], ["dump", "--json"], ["stats"], ["tree"], ["export"]):
        clean(" ".join(verb) + " of a recorded run: escapes stay escaped", [TT] + verb + [t],
              want_rc=0)


def main(d):
    # a trace whose name, recorded argv and cwd, thread and function names hold escapes
    t = os.path.join(d, ESC_NAME + ".tt")
    r = subprocess.run([MKSHAPE, "hostile", t])
    assert r.returncode == 0
    fn = "fn\x1b[2J\x1b]0;fn\x07\u009b1m"

    info_command(t, ARGV, CWD, "of a trace with hostile META objects", ENV, EXECFN, UNTRACED)
    damaged = os.path.join(d, ESC_NAME + "damaged.tt")
    r = subprocess.run([MKSHAPE, "damaged", damaged])
    assert r.returncode == 0
    clean("info: a damaged command line is said to be one", [TT, "info", damaged], want_rc=0,
          also=lambda o, e: re.search(rb"^command: +damaged \(argv\[3\] beyond argc\)", o,
                                      re.M) is not None)
    clean("info --json: a damaged command line is said to be one",
          [TT, "info", "--json", damaged], want_rc=0,
          also=lambda o, e: json.loads(o)["command"]["damaged"] == "argv[3] beyond argc")
    for verb in (["info"], ["info", "--json"], ["verify"], ["verify", "--json"],
                 ["dump"], ["dump", "--json"], ["stats"], ["stats", "--json"], ["tree"],
                 ["tree", "--folded"], ["tree", "--function", fn]):
        clean(" ".join(verb) + ": escapes from the trace and its name stay escaped",
              [TT] + verb + [t], want_rc=0)
    clean("diff: escapes stay escaped", [TT, "diff", t, t], want_rc=0)
    clean("diff --json: escapes stay escaped", [TT, "diff", "--json", t, t], want_rc=0)
    out = os.path.join(d, ESC_NAME + ".json")
    clean("export -o: escapes stay escaped (the summary, the JSON)",
          [TT, "export", "--json", "-o", out, t], want_rc=0)
    with open(out, "rb") as f:
        check(not raw_bytes(f.read()), "export: the JSON file holds no raw terminal control")
    clean("export to stdout: escapes stay escaped", [TT, "export", t], want_rc=0)

    # error messages that name a hostile path, name or argument
    missing = os.path.join(d, ESC_NAME + "missing.tt")
    for verb in ("info", "verify", "dump", "stats", "tree", "export"):
        clean(verb + " on a missing file: the error names it escaped", [TT, verb, missing],
              want_rc=6)
    clean("diff on a missing file: the error names it escaped", [TT, "diff", t, missing],
          want_rc=6)
    notrace = os.path.join(d, ESC_NAME + "not-a-trace.tt")
    with open(notrace, "wb") as f:
        f.write(b"\x1b]0;not a trace\x07" * 100)
    for verb in ("info", "verify", "dump", "stats", "tree"):
        clean(verb + " on a file that is not a trace: escaped", [TT, verb, notrace], want_rc=3)
    clean("export -o an existing hostile name: the refusal names it escaped",
          [TT, "export", "-o", out, t], want_rc=2)
    clean("tree --function with a hostile name the trace lacks: escaped",
          [TT, "tree", "--function", "\x1b[2Jnone", t], want_rc=2)
    clean("dump --kind with a hostile kind: escaped", [TT, "dump", "--kind", "\x1b[2J", t],
          want_rc=2)
    clean("a hostile unknown option: escaped (not getopt's raw echo)",
          [TT, "info", "--\x1b[2J", t], want_rc=2)
    clean("a hostile unknown short option: escaped", [TT, "info", "-\x1b", t], want_rc=2)
    clean("a hostile option value: escaped", [TT, "dump", "--count", "\x1b[2J", t], want_rc=2)
    clean("a hostile verb: escaped", [TT, "\x1b]0;verb\x07"], want_rc=2)
    clean("help of a hostile verb: escaped", [TT, "help", "\x1b]0;verb\x07"], want_rc=2)

    # gc: a directory entry with escapes in its name (a dead recording's file)
    g = os.path.join(d, "gc")
    os.mkdir(g)
    dead = os.path.join(g, ESC_NAME + ".tt.99999.partial")
    shutil.copy(t, dead)
    clean("gc --dry-run: the file name is escaped", [TT, "gc", "--dry-run", g], want_rc=0,
          also=lambda o, e: b"would remove" in o)
    clean("gc: the file name is escaped", [TT, "gc", g], want_rc=0,
          also=lambda o, e: b"removed" in o and not os.path.exists(dead))
    clean("gc on a missing hostile directory: escaped",
          [TT, "gc", os.path.join(d, ESC_NAME + "nodir")], want_rc=6)

    # recover: the partial file's name and the default output's
    rdir = os.path.join(d, "rec")
    os.mkdir(rdir)
    partial = make_partial(rdir)
    hostile = os.path.join(rdir, ESC_NAME + os.path.basename(partial))
    os.rename(partial, hostile)
    clean("recover: the input and the output names are escaped", [TT, "recover", hostile],
          want_rc=0, also=lambda o, e: b"recovered" in o)
    clean("recover again: the refusal of the existing output is escaped",
          [TT, "recover", hostile], want_rc=2)
    closed = os.path.join(rdir, ESC_NAME + "closed.tt.123.partial")
    shutil.copy(t, closed)
    clean("recover of a closed trace: the library's message is escaped",
          [TT, "recover", closed], want_rc=3)
    clean("recover of a missing file: escaped",
          [TT, "recover", os.path.join(rdir, ESC_NAME + "x.tt.1.partial")], want_rc=6)

    if RECORD:
        recorded(d)
    else:
        print("skip a trace made by tinytrace record: a sanitizer build (no --record)")


if __name__ == "__main__":
    ttproc.run_main(main, "tt-escapes-")
