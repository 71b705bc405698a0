#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-readme.py SRCDIR TOOL MANDIR: the README's tables agree with the code and the pages.

- The settings tables (README "## Settings") list exactly the TINYTRACE_* names the library
  knows (known_vars in libtrace/session/config.c: any other name is refused), and tinytrace(7)
  shows every one of them.
- The synopsis under "## The tool" names every verb of `tinytrace --help`, and every option it
  shows for a verb is an option of that verb's --help.

check-readme.py --self-test SRCDIR TOOL MANDIR: the check must fail on a README with a setting
left out, with a setting the library does not know, with a verb left out and with an option the
verb does not have.
"""
import os
import re
import shutil
import subprocess
import sys

OPTION = re.compile(r"(?:(?<=^)|(?<=[\s\[(,]))(--?[A-Za-z][A-Za-z0-9-]*)")


def run(*cmd):
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        sys.exit("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode()))
    return p.stdout.decode("utf-8", errors="replace")


def section(text, title):
    m = re.search(r"^## %s\n(.*?)(?=^## |\Z)" % re.escape(title), text, re.M | re.S)
    return m.group(1) if m else ""


def known_vars(srcdir):
    with open(os.path.join(srcdir, "libtrace", "session", "config.c"), encoding="utf-8") as f:
        src = f.read()
    m = re.search(r"known_vars\[\]\s*=\s*\{(.*?)\};", src, re.S)
    if not m:
        sys.exit("config.c: no known_vars table")
    return {"TINYTRACE_" + n for n in re.findall(r'"([A-Z_]+)"', m.group(1))}


def man_text(page):
    env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8")
    if shutil.which("man"):
        p = subprocess.run(["man", "-l", page], stdout=subprocess.PIPE, env=env, timeout=60)
        if p.returncode == 0:
            return p.stdout.decode("utf-8", errors="replace")
    with open(page, encoding="utf-8") as f:
        return f.read().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")


def check(readme, srcdir, tool, mandir):
    problems = []
    settings = section(readme, "Settings")
    in_readme = set(re.findall(r"^\| `(TINYTRACE_[A-Z_]+)`", settings, re.M))
    known = known_vars(srcdir)
    for v in sorted(known - in_readme):
        problems.append("%s is a setting of the library, not in the README's tables" % v)
    for v in sorted(in_readme - known):
        problems.append("%s is in the README's tables, the library does not know it" % v)
    page = man_text(os.path.join(mandir, "tinytrace.7"))
    for v in sorted(in_readme | known):
        if not re.search(r"^\s+%s$" % v, page, re.M):
            problems.append("%s is not an item of tinytrace(7)" % v)

    helps = {}
    top = run(tool, "--help")
    verbs = [l.split()[0] for l in
             re.search(r"^Verbs:\n((?:  .*\n)+)", top, re.M).group(1).splitlines()]
    tool_sec = section(readme, "The tool")
    by_verb, cur = {}, None
    for line in tool_sec.splitlines():
        m = re.match(r"^    tinytrace (\w+)(.*)$", line)
        if m:
            cur = m.group(1)
            by_verb.setdefault(cur, []).append(m.group(2))
        elif line.startswith("    ") and cur:
            by_verb[cur].append(line)
        elif line.strip():
            cur = None
    for v in verbs:
        if v != "help" and v not in by_verb:
            problems.append("the README's synopsis does not show tinytrace %s" % v)
    for v, lines in sorted(by_verb.items()):
        if v not in verbs:
            problems.append("the README shows tinytrace %s, which is not a verb" % v)
            continue
        helps[v] = run(tool, v, "--help")
        has = set(OPTION.findall(helps[v]))
        for opt in OPTION.findall(" ".join(lines)):
            if opt not in has:
                problems.append("the README shows %s for tinytrace %s, its --help does not"
                                % (opt, v))
    return problems


def self_test(srcdir, tool, mandir, readme):
    failures = []
    if check(readme, srcdir, tool, mandir):
        failures.append("the real README does not pass")
    cases = [
        ("a setting left out", readme.replace("| `TINYTRACE_BLOCK_KB` |", "| `BLOCK_KB` |"),
         "TINYTRACE_BLOCK_KB is a setting of the library"),
        ("an unknown setting", readme.replace("| `TINYTRACE_CALLER` |",
                                              "| `TINYTRACE_CALLERS` |"),
         "TINYTRACE_CALLERS is in the README's tables"),
        ("a verb left out", re.sub(r"^    tinytrace gc .*\n(?:     .*\n)*", "", readme,
                                   flags=re.M),
         "does not show tinytrace gc"),
        ("an option the verb lacks", readme.replace("tinytrace info FILE",
                                                    "tinytrace info --frobnicate FILE"),
         "shows --frobnicate for tinytrace info"),
    ]
    for what, text, expect in cases:
        if text == readme:
            failures.append("%s: the doctoring did not change the README" % what)
            continue
        p = check(text, srcdir, tool, mandir)
        if not any(expect in x for x in p):
            failures.append("%s: passed (%s)" % (what, p))
    return failures


def main():
    args = sys.argv[1:]
    test = bool(args) and args[0] == "--self-test"
    if test:
        args = args[1:]
    if len(args) != 3:
        sys.exit(__doc__)
    srcdir, tool, mandir = args
    with open(os.path.join(srcdir, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    if test:
        failures = self_test(srcdir, tool, mandir, readme)
        for f in failures:
            print("FAIL:", f)
        print("self-test: %d of 5 checks failed" % len(failures))
        sys.exit(1 if failures else 0)
    problems = check(readme, srcdir, tool, mandir)
    for p in problems:
        print("FAIL:", p)
    print("%d settings, %d problems" % (len(known_vars(srcdir)), len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
