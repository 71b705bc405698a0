#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No output file is clobbered (issue 14, point 5): `tinytrace export -o`, `tinytrace recover
[-o]`, `tinytrace record -o` and `tinytrace replay --report` refuse, with exit 2, a message naming the file and the file left as it was (its bytes, its
inode, its kind):
  - a device node (made with mknod in the test's own directory, never the real /dev/null; the
    case is skipped, saying so, only where mknod fails with EPERM),
  - a FIFO, a directory, a Unix socket,
  - the input itself (the same path, and a hard link to it),
  - an existing file or symbolic link without --force;
and with --force they replace a regular file, and a symbolic link itself, never its target.
A file that appears at the destination while an export is being written is not replaced either
(the check is made again before the rename, and the rename does not replace).

Usage: test-clobber.py TINYTRACE MKRECORD MKPARTIAL MKSHAPE"""

import errno
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import testwrap  # TT_TEST_WRAPPER, TT_TEST_REDUCED: tests/all.sh's valgrind step
import ttproc
from ttproc import check

TT, MKRECORD, MKPARTIAL, MKSHAPE = map(os.path.abspath, sys.argv[1:5])
T = testwrap.timeout(60)


def run(args, timeout=T):
    p = subprocess.run([str(a) for a in args], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def state(path):
    """What a file is, as far as clobbering goes: kind, inode, and the bytes of a regular file
    (or the target of a link)."""
    st = os.lstat(path)
    data = None
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            data = f.read()
    elif stat.S_ISLNK(st.st_mode):
        data = os.readlink(path)
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_rdev, data)


def leftovers(d, before):
    return sorted(set(os.listdir(d)) - before)


def make_partial(d, name):
    """A recording's temporary file, left by kill -9 (mkpartial); its path."""
    sub = os.path.join(d, name)
    os.mkdir(sub)
    p = subprocess.Popen([MKPARTIAL, os.path.join(sub, "run.tt")], stdout=subprocess.PIPE,
                         text=True)
    for _ in range(2):
        line = p.stdout.readline()
        assert line.startswith("flushed "), line
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=T)
    partial = [f for f in os.listdir(sub) if f.endswith(".partial")]
    assert len(partial) == 1, os.listdir(sub)
    return os.path.join(sub, partial[0])


def refused(name, args, dest, d, word):
    """@args must exit 2, name @dest and say @word, and leave @dest and the directory as they
    were."""
    before_files = set(os.listdir(d))
    before = state(dest)
    rc, out, err = run(args)
    check(rc == 2 and os.path.basename(dest) in err and word in err and
          state(dest) == before and not leftovers(d, before_files),
          name, (rc, err, leftovers(d, before_files)))


def main(d):
    trace = os.path.join(d, "k.tt")
    r = subprocess.run([MKRECORD, trace, "20"], stdout=subprocess.DEVNULL)
    assert r.returncode == 0
    partial = make_partial(d, "rec")
    pdir = os.path.dirname(partial)

    # the destinations that are not regular files
    dests = []
    dev = os.path.join(d, "null-device")
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        dests.append(("a character device made with mknod", dev, "character device"))
    except OSError as e:
        if e.errno != errno.EPERM:
            raise
        print("skip the device node case: mknod fails with EPERM (not root, or no CAP_MKNOD)")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    dests.append(("a FIFO", fifo, "FIFO"))
    sub = os.path.join(d, "subdir")
    os.mkdir(sub)
    dests.append(("a directory", sub, "directory"))
    sock_path = os.path.join(d, "sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(sock_path)
    dests.append(("a socket", sock_path, "socket"))

    for what, dest, word in dests:
        for force in ([], ["--force"]):
            f = " with --force" if force else ""
            refused("export -o %s%s: refused" % (what, f),
                    [TT, "export", "-o", dest] + force + [trace], dest, d, word)
            refused("recover -o %s%s: refused" % (what, f),
                    [TT, "recover", "-o", dest] + force + [partial], dest, d, word)
            refused("record -o %s%s: refused" % (what, f),
                    [TT, "record", "-o", dest] + force + ["--", "true"], dest, d, word)
            refused("replay --report %s%s: refused" % (what, f),
                    [TT, "replay", "--report", dest] + force + [trace], dest, d, word)
    sock.close()

    # record: never the program it records, an existing file only with --force; replay: the
    # report never the trace, an existing report only with --force
    prog = os.path.join(d, "prog")
    with open(prog, "wb") as f:
        f.write(b"#!/bin/sh\nexit 0\n")
    os.chmod(prog, 0o755)
    for force in ([], ["--force"]):
        f = " with --force" if force else ""
        refused("record -o PROG -- PROG%s: refused" % f,
                [TT, "record", "-o", prog] + force + ["--", prog], prog, d, "the input")
        refused("replay --report FILE FILE%s: refused" % f,
                [TT, "replay", "--report", trace] + force + [trace], trace, d, "the input")
    kept = os.path.join(d, "kept.tt")
    with open(kept, "wb") as f:
        f.write(b"an earlier trace\n")
    refused("record -o an existing file: refused without --force",
            [TT, "record", "-o", kept, "--", "true"], kept, d, "--force")
    refused("replay --report an existing file: refused without --force",
            [TT, "replay", "--report", kept, trace], kept, d, "--force")

    # the input itself, by its own name and through a hard link
    hard = os.path.join(d, "hard-link.tt")
    os.link(trace, hard)
    for force in ([], ["--force"]):
        f = " with --force" if force else ""
        refused("export -o INPUT%s: refused" % f, [TT, "export", "-o", trace] + force + [trace],
                trace, d, "the input")
        refused("export -o a hard link to INPUT%s: refused" % f,
                [TT, "export", "-o", hard] + force + [trace], hard, d, "the input")
        refused("recover -o INPUT%s: refused" % f,
                [TT, "recover", "-o", partial] + force + [partial], partial, pdir, "the input")

    # an existing file: refused without --force, replaced with it
    old = os.path.join(d, "old.json")
    with open(old, "wb") as f:
        f.write(b"precious\n")
    refused("export -o an existing file: refused without --force",
            [TT, "export", "-o", old, trace], old, d, "--force")
    rc, out, err = run([TT, "export", "--force", "-o", old, trace])
    with open(old, "rb") as f:
        data = f.read()
    check(rc == 0 and data.startswith(b'{"traceEvents":['),
          "export --force -o an existing file: replaced", (rc, err))

    # the main case of recover: the trace of the same name is already there
    final = os.path.join(pdir, "run.tt")
    with open(final, "wb") as f:
        f.write(b"an earlier, valid trace\n")
    refused("recover FILE.PID.partial: an existing FILE is refused without --force",
            [TT, "recover", partial], final, pdir, "--force")
    rc, out, err = run([TT, "recover", "-f", partial])
    v = subprocess.run([TT, "verify", "-q", final])
    check(rc == 0 and v.returncode == 0 and "recovered" in out,
          "recover -f FILE.PID.partial: replaces FILE with the recovered trace", (rc, out, err))

    # a symbolic link: existing; with --force the link is replaced, never its target
    target = os.path.join(d, "target.txt")
    with open(target, "wb") as f:
        f.write(b"the target\n")
    link = os.path.join(d, "link.json")
    os.symlink(target, link)
    refused("export -o a symbolic link: refused without --force",
            [TT, "export", "-o", link, trace], link, d, "symbolic link")
    dangling = os.path.join(d, "dangling.tt")
    os.symlink(os.path.join(d, "nowhere"), dangling)
    refused("recover -o a dangling symbolic link: refused without --force",
            [TT, "recover", "-o", dangling, partial], dangling, d, "symbolic link")
    before = state(target)
    rc, out, err = run([TT, "export", "--force", "-o", link, trace])
    check(rc == 0 and not os.path.islink(link) and os.path.isfile(link) and
          state(target) == before,
          "export --force -o a symbolic link: the link is replaced, its target untouched",
          (rc, err))
    tlink = os.path.join(d, "to-input.json")
    os.symlink(trace, tlink)
    before = state(trace)
    rc, out, err = run([TT, "export", "--force", "-o", tlink, trace])
    check(rc == 0 and not os.path.islink(tlink) and state(trace) == before,
          "export --force -o a link to the input: the link is replaced, the input untouched",
          (rc, err))

    # a destination that appears while the output is being written is not replaced: the file
    # is made once the temporary file exists (so before the rename), with O_EXCL (so after no
    # rename either)
    big = os.path.join(d, "big.tt")
    r = subprocess.run([MKSHAPE, "deep", big, "1000000"])
    assert r.returncode == 0
    late = os.path.join(d, "late.json")
    p = subprocess.Popen([TT, "export", "-o", late, big], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    deadline = time.monotonic() + T
    made = False
    while time.monotonic() < deadline and p.poll() is None:
        if [n for n in os.listdir(d) if n.startswith("late.json.")]:
            try:
                fd = os.open(late, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, b"made while the export ran\n")
                os.close(fd)
                made = True
            except FileExistsError:
                pass
            break
        time.sleep(0.001)
    err = p.communicate(timeout=T)[1].decode(errors="replace")
    if made:
        with open(late, "rb") as f:
            data = f.read()
        check(p.returncode == 2 and data == b"made while the export ran\n" and
              "late.json" in err and not [n for n in os.listdir(d)
                                          if n.startswith("late.json.")],
              "export -o: a file that appears before the rename is not replaced",
              (p.returncode, err))
    else:
        print("skip the late file case: the export ended before the file could be made")


if __name__ == "__main__":
    ttproc.run_main(main, "tt-clobber-")
