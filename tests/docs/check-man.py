#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-man.py TOOL MANDIR: every option that `tinytrace VERB --help` shows is in the man page
tinytrace-VERB(1), and each option of its "Options:" list is an item of the page's OPTIONS
section. check-man.py --self-test TOOL MANDIR: the same check must fail on a page with an option
taken out and on a help text with an option added.

The pages are made from --help by docs/gen-docs.py; this check reads both its own way (a regular
expression over the help, the page as man(1) renders it), so a fault of the generator's parser
is not repeated here.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# an option: a dash after a space, a bracket, a comma, a parenthesis or a quote
OPTION = re.compile(r"(?:(?<=^)|(?<=[\s\[(,'\"`]))(--?[A-Za-z][A-Za-z0-9-]*)")


def help_text(tool, *args):
    p = subprocess.run([tool] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if p.returncode != 0:
        sys.exit("%s %s exited %d" % (tool, " ".join(args), p.returncode))
    return p.stdout.decode("utf-8", errors="replace")


def verbs_of(tool):
    text = help_text(tool, "--help")
    m = re.search(r"^Verbs:\n((?:  .*\n)+)", text, re.M)
    if not m:
        sys.exit("tinytrace --help lists no verbs")
    return [line.split()[0] for line in m.group(1).splitlines()]


def render(page):
    """The page as man(1) shows it, as plain text (roff stripped by hand where man is
    missing)."""
    man = shutil.which("man")
    if man:
        env = dict(os.environ, MANWIDTH="200", MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
        p = subprocess.run([man, "-l", page], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=60)
        if p.returncode == 0 and p.stdout.strip():
            text = p.stdout.decode("utf-8", errors="replace")
            return re.sub(r".\x08", "", text)  # overstrike, should a pager format it
    with open(page, encoding="utf-8") as f:
        src = f.read()
    src = re.sub(r"^\.(?:SH|SS) (.*)$", r"\1", src, flags=re.M)
    src = re.sub(r"^\.[A-Za-z].*\n", "", src, flags=re.M)
    src = src.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
    return re.sub(r"\\f[BIRP]", "", src)


def leading_options(line):
    """The options at the start of an option line: option names and argument names up to the
    first word of the description."""
    out = []
    for tok in line.split():
        t = re.sub(r"\[?=[A-Z][A-Z0-9_]*\]?$", "", tok.rstrip(","))  # --chaos[=SEED]
        if re.fullmatch(r"--?[A-Za-z0-9][A-Za-z0-9-]*", t):
            out.append(t)
        elif not re.fullmatch(r"[A-Z][A-Z0-9_|,.\[\]]*(?:\.[a-z]+)?", t):
            break
    return out


def options_listed(help):
    """The options on the option lines of the "Options:" block."""
    out, on = [], False
    for line in help.splitlines():
        if line == "Options:":
            on = True
            continue
        if on and line.strip() == "":
            break
        if on and re.match(r"^ {2,8}-", line):
            out += leading_options(line)
    return out


def section(text, name):
    m = re.search(r"^%s\n(.*?)(?=^\S|\Z)" % re.escape(name), text, re.M | re.S)
    return m.group(1) if m else ""


def check(help, page):
    """The problems of @page against @help, as sentences; [] when there is none."""
    text = render(page)
    problems = []
    in_page = set(OPTION.findall(text))
    for opt in sorted(set(OPTION.findall(help))):
        if opt not in in_page:
            problems.append("%s: %s is in --help, not in the page" % (page, opt))
    listed = options_listed(help)
    if not listed:
        problems.append("%s: the help has no Options block" % page)
    opts = section(text, "OPTIONS")
    heads = set()
    for line in opts.splitlines():
        if re.match(r"^ {5,9}-", line):
            heads.update(leading_options(line))
    for opt in listed:
        if opt not in heads:
            problems.append("%s: %s is an option of --help, not an item of OPTIONS"
                            % (page, opt))
    return problems


def check_all(tool, mandir):
    problems, n = [], 0
    verbs = verbs_of(tool)
    for v in verbs:
        page = os.path.join(mandir, "tinytrace-%s.1" % v)
        if not os.path.exists(page):
            problems.append("no page %s for the verb %s" % (page, v))
            continue
        help = help_text(tool, v, "--help")
        if v == "help":
            continue  # `tinytrace help --help` has no Options block
        n += len(options_listed(help))
        problems += check(help, page)
    top = render(os.path.join(mandir, "tinytrace.1"))
    for v in verbs:
        if "tinytrace-%s(1)" % v not in top:
            problems.append("tinytrace(1) does not name tinytrace-%s(1)" % v)
    return verbs, n, problems


def self_test(tool, mandir):
    """The check must fail where it should: each doctored input must give a problem."""
    failures = []
    help = help_text(tool, "replay", "--help")
    page = os.path.join(mandir, "tinytrace-replay.1")
    with open(page, encoding="utf-8") as f:
        src = f.read()
    if check(help, page):
        failures.append("the real replay page does not pass: %s" % check(help, page))
    d = tempfile.mkdtemp(prefix="tt-check-man-")
    try:
        # 1. the item of --trust taken out of OPTIONS (the description still names it)
        lines = src.split("\n")
        i = next(n for n, l in enumerate(lines) if l.startswith(".TP") and
                 "\\-\\-trust" in lines[n + 1])
        doctored = os.path.join(d, "no-item.1")
        with open(doctored, "w", encoding="utf-8") as f:
            f.write("\n".join(lines[:i] + lines[i + 3:]))
        p = check(help, doctored)
        if not any("--trust" in x and "OPTIONS" in x for x in p):
            failures.append("a page without the --trust item passed: %s" % p)
        # 2. --aslr taken out of the page everywhere
        doctored = os.path.join(d, "no-aslr.1")
        with open(doctored, "w", encoding="utf-8") as f:
            f.write(src.replace("\\-\\-aslr", "aslr"))
        p = check(help, doctored)
        if not any("--aslr is in --help" in x for x in p):
            failures.append("a page without --aslr passed: %s" % p)
        # 3. an option added to --help and not to the page
        more = help.replace("Options:\n", "Options:\n  -Z, --frobnicate     frob the trace\n")
        p = check(more, page)
        if not (any("--frobnicate is in --help" in x for x in p) and
                any("-Z is an option" in x for x in p)):
            failures.append("a help with --frobnicate passed against the page: %s" % p)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return failures


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        failures = self_test(*args[1:])
        for f in failures:
            print("FAIL:", f)
        print("self-test: %d of 4 checks failed" % len(failures))
        sys.exit(1 if failures else 0)
    if len(args) != 2:
        sys.exit(__doc__)
    verbs, n, problems = check_all(*args)
    for p in problems:
        print("FAIL:", p)
    print("%d verbs, %d options in their Options lists, %d problems"
          % (len(verbs), n, len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
