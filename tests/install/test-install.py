#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test-install.py CASE BUILDDIR SRCDIR [ARGS]: `meson install --destdir` of the build into a
temporary directory of this test's own, then one of:

    layout        the installed files, listed and held to the list below: the library and its
                  links, the headers, both pkg-config files, the tool, the preload runtime, the
                  man pages (one per verb of the installed tool's --help), the completions,
                  the license and the documents, the examples, and nothing else; the shared
                  libraries need nothing but libc; pkg-config answers
                  for tinytrace and libtinytrace; the installed tool records and replays `date`
                  with the installed runtime, and man shows the installed pages
    makefile      the installed examples record-replay.c and read-trace.c built with make and
                  pkg-config (tests/install/Makefile), linked to the installed library, run
    meson         the installed checkpoint.c built by a meson project with
                  dependency('tinytrace') through pkg-config (tests/install/meson-project), run
    cxx           the installed raii.cpp and tinytrace.hpp (the C++ RAII wrapper) built with
                  c++ -std=c++11 and pkg-config, run
    subproject    (no install) tinytrace as a meson subproject of a project that reads a trace
                  with dependency('tinytrace') (tests/install/subproject), run on a trace that
                  RECORD_REPLAY (the build's examples/record-replay) writes
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

checks = failed = 0


def check(ok, what, detail=""):
    global checks, failed
    checks += 1
    if not ok:
        failed += 1
        print("FAIL: %s%s" % (what, ("\n" + detail) if detail else ""))
    return ok


def run(cmd, cwd=None, env=None, timeout=300):
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    p.out = p.stdout.decode("utf-8", errors="replace")
    p.err = p.stderr.decode("utf-8", errors="replace")
    p.text = "$ %s\nexit %d\n--- stdout\n%s--- stderr\n%s" % (" ".join(cmd), p.returncode,
                                                                p.out[-4000:], p.err[-4000:])
    return p


def meson_info(build, what):
    p = run(["meson", "introspect", "--" + what, build])
    return json.loads(p.out)


class Install:
    """The build installed under a DESTDIR of its own."""

    def __init__(self, work, build):
        self.destdir = os.path.join(work, "destdir")
        opts = {o["name"]: o["value"] for o in meson_info(build, "buildoptions")}
        self.prefix = opts["prefix"]
        self.libdir = opts["libdir"]
        self.root = self.destdir + self.prefix
        p = run(["meson", "install", "-C", build, "--destdir", self.destdir, "--no-rebuild",
                 "--quiet"])
        self.ok = check(p.returncode == 0, "meson install --destdir", p.text)
        libdir = self.libdir if os.path.isabs(self.libdir) else os.path.join(self.prefix,
                                                                             self.libdir)
        self.lib = self.destdir + libdir
        self.env = dict(os.environ,
                        PKG_CONFIG_PATH=os.path.join(self.lib, "pkgconfig"),
                        PKG_CONFIG_SYSROOT_DIR=self.destdir,
                        LD_LIBRARY_PATH=self.lib)
        for k in ("TINYTRACE_PRELOAD",):
            self.env.pop(k, None)

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def files(self):
        out = set()
        for dirpath, dirnames, filenames in os.walk(self.destdir):
            for n in filenames:
                out.add(os.path.relpath(os.path.join(dirpath, n), self.root))
        return out


def needed(path):
    p = run(["readelf", "-d", path])
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.out))


def case_layout(work, build, src):
    inst = Install(work, build)
    if not inst.ok:
        return
    libdir = inst.rel(inst.lib)
    tool = os.path.join(inst.root, "bin", "tinytrace")
    p = run([tool, "--help"], env=inst.env)
    verbs = [l.split()[0] for l in
             re.search(r"^Verbs:\n((?:  .*\n)+)", p.out, re.M).group(1).splitlines()]
    version = re.search(r"version : '([^']+)'", open(os.path.join(src, "meson.build")).read())
    version = version.group(1)
    major = version.split(".")[0]
    expected = {
        "bin/tinytrace",
        "%s/libtinytrace.so" % libdir,
        "%s/libtinytrace.so.%s" % (libdir, major),
        "%s/libtinytrace.so.%s" % (libdir, version),
        "%s/tinytrace/libtinytrace-preload.so" % libdir,
        "%s/pkgconfig/tinytrace.pc" % libdir,
        "%s/pkgconfig/libtinytrace.pc" % libdir,
        "share/man/man1/tinytrace.1",
        "share/man/man7/tinytrace.7",
        "share/bash-completion/completions/tinytrace",
        "share/zsh/site-functions/_tinytrace",
        "share/tinytrace/tinytrace-gdb.py",  # replay --gdb
    }
    # every public header of the source, and the generated version.h
    headers = [f for f in os.listdir(os.path.join(src, "libtrace", "include", "tinytrace"))
               if f.endswith(".h")]
    expected |= {"include/tinytrace/%s" % h for h in headers + ["version.h"]}
    expected |= {"share/man/man1/tinytrace-%s.1" % v for v in verbs}
    # the top-level documents, and every document of docs/
    expected |= {"share/doc/tinytrace/%s" % d for d in
                 ["README.md", "CHANGELOG.md", "CONTRIBUTING.md", "LICENSE"] +
                 [f for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md")]}
    expected |= {"share/doc/tinytrace/examples/%s" % e for e in
                 ("record-replay.c", "checkpoint.c", "read-trace.c", "raii.cpp",
                  "tinytrace.hpp")}
    got = inst.files()
    print("installed under %s (DESTDIR %s):" % (inst.prefix, inst.destdir))
    for f in sorted(got):
        print("    " + f)
    check(not (expected - got), "everything is installed", "missing: %s" % sorted(expected - got))
    check(not (got - expected), "nothing else is installed", "extra: %s" % sorted(got - expected))
    check(os.path.islink(os.path.join(inst.lib, "libtinytrace.so")) and
          os.readlink(os.path.join(inst.lib, "libtinytrace.so")) == "libtinytrace.so.%s" % major,
          "libtinytrace.so links to the soname")
    # the runtime libraries take no dependency but libc (the tool may take more): xxhash is
    # compiled in (libtrace/base/hash.c), and so is the compiler's unwinder (-static-libgcc)
    allowed = {"libc.so.6"}
    for lib in ("libtinytrace.so.%s" % version, "tinytrace/libtinytrace-preload.so"):
        n = needed(os.path.join(inst.lib, lib))
        check("libc.so.6" in n and n <= allowed, "%s needs only %s" % (lib, sorted(allowed)),
              "NEEDED: %s" % sorted(n))
    p = run(["readelf", "-d", os.path.join(inst.lib, "libtinytrace.so.%s" % version)])
    check("Library soname: [libtinytrace.so.%s]" % major in p.out, "the soname is "
          "libtinytrace.so.%s" % major, p.out)
    # pkg-config, both names
    for mod in ("tinytrace", "libtinytrace"):
        p = run(["pkg-config", "--modversion", mod], env=inst.env)
        check(p.returncode == 0 and p.out.strip() == version,
              "pkg-config --modversion %s is %s" % (mod, version), p.text)
        p = run(["pkg-config", "--cflags", "--libs", mod], env=inst.env)
        check(p.returncode == 0 and "-I%s/include" % inst.root in p.out and
              "-L%s" % inst.lib in p.out and "-ltinytrace" in p.out.split(),
              "pkg-config --cflags --libs %s points into the DESTDIR" % mod, p.text)
    p = run(["pkg-config", "--static", "--libs", "tinytrace"], env=inst.env)
    words = p.out.split()
    check(p.returncode == 0 and all(w in words for w in ("-ltinytrace", "-pthread", "-ldl",
                                                           "-lrt")) and
          not any(w in words for w in ("-lxxhash", "-lunwind")),
          "pkg-config --static --libs tinytrace adds what libtinytrace links", p.text)
    p = run(["pkg-config", "--print-requires-private", "tinytrace"], env=inst.env)
    check(p.returncode == 0 and p.out.split() == [],
          "Requires.private is empty: libtinytrace links only libc", p.text)
    # the installed tool, with the installed runtime found next to it
    d = os.path.join(work, "run")
    os.mkdir(d)
    p = run([tool, "record", "-o", "date.tt", "--", "date"], cwd=d, env=inst.env)
    check(p.returncode == 0 and "recorded date.tt" in p.err,
          "the installed tool records date with the installed runtime", p.text)
    p = run([tool, "replay", "date.tt"], cwd=d, env=inst.env)
    check(p.returncode == 0 and "replay matched" in p.err, "and replays it", p.text)
    # the installed pages, as man shows them
    if shutil.which("man"):
        env = dict(inst.env, MANPATH=os.path.join(inst.root, "share", "man"), MANWIDTH="100")
        p = run(["man", "tinytrace-replay"], env=env)
        check(p.returncode == 0 and "--keep-going" in p.out, "man tinytrace-replay shows the "
              "installed page", p.text)
        p = run(["man", "7", "tinytrace"], env=env)
        check(p.returncode == 0 and "TINYTRACE_MEMORY_MB" in p.out, "man 7 tinytrace shows the "
              "settings", p.text)


def copy_examples(inst, d, names):
    ex = os.path.join(inst.root, "share", "doc", "tinytrace", "examples")
    for n in names:
        shutil.copy(os.path.join(ex, n), d)


def uses_installed_library(inst, exe):
    p = run(["ldd", exe], env=inst.env)
    m = re.search(r"libtinytrace\.so\.\d+ => (\S+)", p.out)
    return check(m is not None and os.path.realpath(m.group(1)).startswith(inst.lib),
                 "%s is linked to the installed libtinytrace" % os.path.basename(exe), p.text)


def case_makefile(work, build, src):
    inst = Install(work, build)
    if not inst.ok:
        return
    d = os.path.join(work, "outside")
    os.mkdir(d)
    shutil.copy(os.path.join(src, "tests", "install", "Makefile"), d)
    copy_examples(inst, d, ["record-replay.c", "read-trace.c"])
    p = run(["make", "-C", d], env=inst.env)
    if not check(p.returncode == 0, "make builds the examples with pkg-config", p.text):
        return
    uses_installed_library(inst, os.path.join(d, "record-replay"))
    p = run([os.path.join(d, "record-replay"), "t.tt"], cwd=d, env=inst.env)
    check(p.returncode == 0 and "replay matched the recording" in p.out,
          "record-replay built with make runs", p.text)
    p = run([os.path.join(d, "read-trace"), "t.tt"], cwd=d, env=inst.env)
    check(p.returncode == 0 and "kind io 3" in p.out and "function 1 1 roll" in p.out,
          "read-trace built with make reads its trace", p.text)


def case_meson(work, build, src):
    inst = Install(work, build)
    if not inst.ok:
        return
    d = os.path.join(work, "outside")
    shutil.copytree(os.path.join(src, "tests", "install", "meson-project"), d)
    copy_examples(inst, d, ["checkpoint.c"])
    b = os.path.join(d, "build")
    p = run(["meson", "setup", b, d], env=inst.env)
    if not check(p.returncode == 0 and "Run-time dependency tinytrace found: YES" in p.out,
                 "meson setup finds dependency('tinytrace') through pkg-config", p.text):
        return
    p = run(["ninja", "-C", b], env=inst.env)
    if not check(p.returncode == 0, "ninja builds the meson project", p.text):
        return
    uses_installed_library(inst, os.path.join(b, "checkpoint"))
    p = run([os.path.join(b, "checkpoint"), "c.tt"], cwd=d, env=inst.env)
    check(p.returncode == 0 and "account 1" in p.out, "checkpoint built by meson runs", p.text)


def case_cxx(work, build, src):
    inst = Install(work, build)
    if not inst.ok:
        return
    d = os.path.join(work, "outside")
    os.mkdir(d)
    copy_examples(inst, d, ["raii.cpp", "tinytrace.hpp"])
    flags = run(["pkg-config", "--cflags", "--libs", "tinytrace"], env=inst.env)
    if not check(flags.returncode == 0, "pkg-config for the C++ build", flags.text):
        return
    cxx = os.environ.get("CXX", "c++").split()
    exe = os.path.join(d, "raii")
    p = run(cxx + ["-std=c++11", "-Wall", "-Wextra", "-pedantic", "-Werror",
                   os.path.join(d, "raii.cpp"), "-o", exe] + flags.out.split(), env=inst.env)
    if not check(p.returncode == 0, "c++ -std=c++11 builds raii.cpp with the RAII wrapper",
                 p.text):
        return
    uses_installed_library(inst, exe)
    p = run([exe, "r.tt"], cwd=d, env=inst.env)
    check(p.returncode == 0 and "replayed: Hello, Ada!" in p.out and
          "diverged, as it should" in p.out, "the C++ program runs", p.text)


def case_subproject(work, build, src, record_replay):
    d = os.path.join(work, "consumer")
    shutil.copytree(os.path.join(src, "tests", "install", "subproject"), d)
    shutil.copy(os.path.join(src, "examples", "read-trace.c"), d)
    os.mkdir(os.path.join(d, "subprojects"))
    os.symlink(os.path.abspath(src), os.path.join(d, "subprojects", "tinytrace"))
    b = os.path.join(d, "build")
    env = dict(os.environ)
    for k in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH"):  # meson test points the latter at the build
        env.pop(k, None)
    p = run(["meson", "setup", "--wrap-mode=nodownload", b, d], env=env)
    if not check(p.returncode == 0, "meson setup with tinytrace as a subproject", p.text):
        return
    # only the consumer and what it needs: the library, not the subproject's tool or tests
    p = run(["ninja", "-C", b, "read-trace"], env=env, timeout=600)
    if not check(p.returncode == 0, "ninja builds the consumer and the subproject's library",
                 p.text):
        return
    p = run([record_replay, "t.tt"], cwd=d)
    check(p.returncode == 0, "a trace to read", p.text)
    p = run(["ldd", os.path.join(b, "read-trace")], env=env)
    check(re.search(r"libtinytrace\.so\.\d+ => %s/" % re.escape(b), p.out) is not None,
          "the consumer is linked to the subproject's libtinytrace", p.text)
    p = run([os.path.join(b, "read-trace"), "t.tt"], cwd=d, env=env)
    check(p.returncode == 0 and "events 8" in p.out and "function 1 1 roll" in p.out,
          "the consumer linked to the subproject's library reads it", p.text)


CASES = {"layout": case_layout, "makefile": case_makefile, "meson": case_meson,
         "cxx": case_cxx, "subproject": case_subproject}


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in CASES:
        sys.exit(__doc__)
    work = tempfile.mkdtemp(prefix="tt-install-%s-" % sys.argv[1])
    try:
        CASES[sys.argv[1]](work, *[os.path.abspath(a) for a in sys.argv[2:]])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%s: %d checks, %d failed" % (sys.argv[1], checks, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
