#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test-examples.py CASE ARGS...: runs one program of examples/ in a temporary directory of its
own and checks what it did against the tinytrace tool.

    record-replay TOOL EXAMPLE          its trace verifies and holds what the program says
    checkpoint TOOL EXAMPLE             eight checkpoints; the bug is found in account 1
    raii TOOL EXAMPLE                   the C++ wrapper's three runs
    read-trace TOOL EXAMPLE MAKER...    its counts equal `tinytrace stats --json` on the traces
                                        the MAKER programs (examples taking FILE) write, and on
                                        flaky's under `tinytrace record` when FLAKY is given
                                        (--flaky FLAKY)
    main-job TOOL SCRIPT BUILDDIR       examples/main-job.sh finds a failing run and replays it
    header-examples CC SRCDIR BUILDDIR  the examples in the public headers' comments, extracted,
                                        compiled as programs with -Werror and run in turn
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


def run(cmd, cwd, env=None, stdin=None, timeout=120):
    p = subprocess.run(cmd, cwd=cwd, env=env, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    p.out = p.stdout.decode("utf-8", errors="replace")
    p.err = p.stderr.decode("utf-8", errors="replace")
    p.text = "$ %s\nexit %d\n--- stdout\n%s--- stderr\n%s" % (" ".join(cmd), p.returncode,
                                                                p.out[-3000:], p.err[-3000:])
    return p


def stats(tool, d, trace):
    p = run([tool, "stats", "--json", trace], d)
    if not check(p.returncode == 0, "tinytrace stats --json %s" % trace, p.text):
        return None
    return json.loads(p.out)


def verify(tool, d, trace):
    p = run([tool, "verify", trace], d)
    return check(p.returncode == 0 and ": ok (" in p.out, "tinytrace verify %s" % trace, p.text)


def case_record_replay(d, tool, example):
    p = run([example, "rr.tt"], d)
    check(p.returncode == 0, "record-replay exits 0", p.text)
    check("replay matched the recording" in p.out, "it says the replay matched", p.text)
    check("a changed output diverged" in p.out and "payload bytes differ" in p.out,
          "it shows the divergence of the changed output", p.text)
    dice = re.findall(r"^dice: .*$", p.out, re.M)
    check(len(dice) == 3 and dice[0] == dice[1] and dice[2] != dice[0],
          "the replay rolled the recorded dice, the cheat other ones", p.text)
    if not verify(tool, d, "rr.tt"):
        return
    p = run([tool, "dump", "--json", "rr.tt"], d)
    ev = [json.loads(l) for l in p.out.splitlines()]
    io = [(e["dir"], e["arg"], e["len"]) for e in ev if e["kind"] == "io"]
    check(io == [("in", 1, 16), ("in", 2, 16), ("out", 3, len(dice[0]) + 1)],
          "the trace holds the clock and the random bytes in, the dice line out", str(io))
    check([e["function"] for e in ev if e["kind"] in ("enter", "exit")] == ["roll", "roll"],
          "and one call of roll", str(ev))


def case_checkpoint(d, tool, example):
    p = run([example, "cp.tt"], d)
    check(p.returncode == 0, "checkpoint exits 0", p.text)
    check("the eight checkpoints matched" in p.out, "the replay matched", p.text)
    check(re.search(r"after transfer 5 diverged .*provider 1 differs at byte 8.*account 1$",
                    p.out, re.M) is not None,
          "the bug of transfer 5 is found at once, in account 1", p.text)
    if verify(tool, d, "cp.tt"):
        s = stats(tool, d, "cp.tt")
        check(s is not None and s["kinds"]["checkpoint"] == 8, "the trace has 8 checkpoints",
              str(s))


def case_raii(d, tool, example):
    p = run([example, "raii.tt"], d)
    check(p.returncode == 0, "raii exits 0", p.text)
    check("recorded: Hello, Ada!" in p.out and "replayed: Hello, Ada!" in p.out,
          "the replay hands back the recorded name", p.text)
    check("read back: 9 events, 2 calls, 2 io" in p.out, "the reader counts the events", p.text)
    check("diverged, as it should: TT_E_DIVERGED" in p.out, "the changed greeting diverges",
          p.text)
    verify(tool, d, "raii.tt")


def compare_read_trace(d, tool, example, trace):
    p = run([example, trace], d)
    if not check(p.returncode == 0, "read-trace %s exits 0" % trace, p.text):
        return
    s = stats(tool, d, trace)
    if s is None:
        return
    got = {}
    kinds, funcs, threads = {}, {}, {}
    for line in p.out.splitlines():
        w = line.split(" ")
        if w[0] in ("events", "threads", "payload_bytes"):
            got[w[0]] = int(w[1])
        elif w[0] == "kind":
            kinds[w[1]] = int(w[2])
        elif w[0] == "function":
            funcs[int(w[1])] = int(w[2])
        elif w[0] == "thread":
            threads[int(w[1])] = int(w[2])
    check(got.get("events") == s["events"], "%s: events %s = stats %s"
          % (trace, got.get("events"), s["events"]))
    check(kinds == {k: v for k, v in s["kinds"].items() if v},
          "%s: the per-kind counts equal stats'" % trace, "%s\n%s" % (kinds, s["kinds"]))
    check(threads == {t["id"]: t["events"] for t in s["threads"]},
          "%s: the per-thread counts equal stats'" % trace, "%s\n%s" % (threads, s["threads"]))
    check(funcs == {f["function_id"]: f["calls"] for f in s["functions"]},
          "%s: the calls per function equal stats'" % trace,
          "%s\n%s" % (funcs, s["functions"]))


def case_read_trace(d, tool, example, *rest):
    args = list(rest)
    flaky = None
    if "--flaky" in args:
        i = args.index("--flaky")
        flaky = args[i + 1]
        del args[i:i + 2]
    for n, maker in enumerate(args):
        trace = "made-%d.tt" % n
        p = run([maker, trace], d)
        if check(p.returncode == 0, "%s writes a trace" % maker, p.text):
            compare_read_trace(d, tool, example, trace)
    if flaky:
        # --index: read-trace lists the functions from the index summary
        p = run([tool, "record", "--index", "-o", "flaky.tt", "--", flaky], d, stdin=b"3\n")
        if check(os.path.exists(os.path.join(d, "flaky.tt")), "tinytrace record of flaky",
                 p.text):
            compare_read_trace(d, tool, example, "flaky.tt")
    p = run([example, "missing.tt"], d)
    check(p.returncode == 1 and "missing.tt" in p.err, "read-trace names a file it cannot open",
          p.text)


def case_main_job(d, tool, script, build):
    env = dict(os.environ, TT_OUT=os.path.join(d, "failing.tt"))
    p = run(["bash", script, build], d, env=env, timeout=300)
    check(p.returncode == 0, "main-job.sh finds a failing run", p.text)
    status = re.findall(r"tinytrace replay exit status (\d+) ", p.out)
    check(len(status) >= 3 and set(status) == {"0"},
          "and every replay it makes matches the recording", p.text)


# ---- the examples in the headers' comments ---------------------------------------------------

# What each example needs from outside itself: its parameters, and how the driver calls it
CONTEXT = {
    "session.h": ("void", "example_session()"),
    "store.h": ("void", "example_store()"),
    "index.h": ("tt_reader *r", "with_reader(example_index)"),
}
ERROR = '{ fprintf(stderr, "%s:%d: %s\\n", __FILE__, __LINE__, err.message); return 1; }'


def extract(header):
    """The lines of the comment block after " * Example", indented by four more spaces."""
    with open(header, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith(" * Example"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(" *     "):
                j += 1
            body = []
            while j < len(lines) and lines[j].startswith(" *     "):
                body.append(lines[j][len(" *     "):])
                j += 1
            return body
    return None


def program(name, body):
    params, call = CONTEXT[name]
    fn = "example_" + name.split(".")[0]
    code = "\n".join("    " + l.replace("…", ERROR) for l in body)
    return """#include <stdio.h>
#include <stdlib.h>
#include <tinytrace/tinytrace.h>

static int %s(%s)
{
%s
    return 0;
}

/* a reader over run.tt, as store.h's example opens one */
static int with_reader(int (*fn)(tt_reader *r))
{
    tt_source src; tt_error_info err; tt_reader_limits lim; tt_reader_capacity cap;
    tt_reader *r; void *mem; int rc;
    if (tt_source_file(&src, "run.tt", &err) != TT_OK) return 1;
    tt_reader_limits_default(&lim);
    if (tt_reader_probe(&src, &lim, TT_CURSORS_SEQUENTIAL, NULL, &cap, &err) != TT_OK) return 1;
    mem = malloc(cap.total);
    if (tt_reader_open(&src, &lim, TT_CURSORS_SEQUENTIAL, mem, cap.total, &r, &err) != TT_OK)
        return 1;
    rc = fn(r);
    tt_reader_close(r); free(mem); tt_source_close(&src);
    return rc;
}

int main(void)
{
    (void)with_reader;
    return %s;
}
""" % (fn, params, code, call)


def case_header_examples(d, cc, srcdir, builddir):
    inc = ["-I" + os.path.join(srcdir, "libtrace", "include"),
           "-I" + os.path.join(builddir, "libtrace", "include")]
    libdir = os.path.join(builddir, "libtrace")
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, TINYTRACE_MODE="record",
               TINYTRACE_FILE="run.tt")
    for name in ("session.h", "store.h", "index.h"):
        body = extract(os.path.join(srcdir, "libtrace", "include", "tinytrace", name))
        if not check(body, "%s has an example" % name):
            continue
        src = os.path.join(d, name.replace(".h", "-example.c"))
        with open(src, "w") as f:
            f.write(program(name, body))
        exe = src[:-2]
        p = run(cc.split() + ["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror",
                              "-Wno-unused-variable", "-Wno-unused-but-set-variable"] + inc +
                [src, "-L" + libdir, "-ltinytrace", "-o", exe], d)
        if not check(p.returncode == 0, "the example of %s compiles" % name,
                     p.text + "\n" + open(src).read()):
            continue
        p = run([exe], d, env=env)
        check(p.returncode == 0, "the example of %s runs" % name, p.text)
        if name == "session.h":
            check(os.path.exists(os.path.join(d, "run.tt")),
                  "session.h's example recorded run.tt (TINYTRACE_MODE=record)", p.text)
        if name == "store.h":
            kinds = p.out.split()
            check(kinds[:2] == ["session-start", "thread-start"] and "enter" in kinds and
                  kinds[-1] == "session-end", "store.h's example prints the events of run.tt",
                  p.text)
        env.pop("TINYTRACE_MODE", None)
        env.pop("TINYTRACE_FILE", None)


CASES = {
    "record-replay": case_record_replay,
    "checkpoint": case_checkpoint,
    "raii": case_raii,
    "read-trace": case_read_trace,
    "main-job": case_main_job,
    "header-examples": case_header_examples,
}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in CASES:
        sys.exit(__doc__)
    args = [os.path.abspath(a) if os.path.exists(a) else a for a in sys.argv[2:]]
    d = tempfile.mkdtemp(prefix="tt-example-")
    try:
        CASES[sys.argv[1]](d, *args)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%s: %d checks, %d failed" % (sys.argv[1], checks, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
