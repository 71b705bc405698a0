#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test-completion.py bash|zsh COMPLETION TOOL: the generated completion offers what the tool
takes.

bash: the completion file is sourced into a bash without startup files and _tinytrace is called
with COMP_WORDS and COMP_CWORD set as bash sets them; COMPREPLY is the answer.
zsh: an interactive zsh without startup files runs in a pseudo-terminal (zsh/zpty) with the
completion in its fpath and compinit loaded; each line is typed with a TAB after it, and a
compadd wrapper writes every match the completion system was given to a file.

In both, every verb of `tinytrace --help` is offered first, every option of each verb's
"Options:" list is offered for a "-", and arguments complete as they should (files, kinds,
formats, the command after `--`).
"""
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
        print("FAIL: %s%s" % (what, (": " + detail) if detail else ""))
    return ok


def help_text(tool, *args):
    return subprocess.run([tool] + list(args), stdout=subprocess.PIPE, check=True,
                          timeout=60).stdout.decode("utf-8", errors="replace")


def verbs_of(tool):
    top = help_text(tool, "--help")
    m = re.search(r"^Verbs:\n((?:  .*\n)+)", top, re.M)
    return [l.split()[0] for l in m.group(1).splitlines()]


def options_of(tool, verb):
    """The option names on the option lines of VERB's "Options:" block."""
    out, on = set(), False
    for line in help_text(tool, verb, "--help").splitlines():
        if line == "Options:":
            on = True
        elif on and not line.strip():
            break
        elif on and re.match(r"^ {2,8}-", line):
            for tok in line.split():
                t = re.sub(r"\[?=[A-Z][A-Z0-9_]*\]?$", "", tok.rstrip(","))  # --chaos[=SEED]
                if re.fullmatch(r"--?[A-Za-z0-9][A-Za-z0-9-]*", t):
                    out.add(t)
                elif not re.fullmatch(r"[A-Z][A-Z0-9_|,.\[\]]*(?:\.[a-z]+)?", t):
                    break
    return out


def cases(tool, verbs):
    """(words, expected, exact): the line as words (the last is the one being completed), the
    candidates expected, and whether they must be exactly those (else: at least those)."""
    out = [(["tinytrace", ""], set(verbs), False),
           (["tinytrace", "--"], {"--help", "--version"}, True),
           (["tinytrace", "rep"], {"replay", "report"}, True),
           (["tinytrace", "replay", "--k"], {"--keep-going"}, True),
           (["tinytrace", "dump", "--kind", "ent"], {"enter"}, True),
           (["tinytrace", "export", "--format", ""], {"chrome", "chrome-profile", "perfetto"}, True),
           (["tinytrace", "help", "re"], {"record", "recover", "replay", "report"}, True),
           (["tinytrace", "info", "tr"], {"trace-a.tt", "trace-b.tt"}, True),
           (["tinytrace", "record", "-o", "trace-a"], {"trace-a.tt"}, True),
           (["tinytrace", "record", "--", "dat"], {"date"}, False),
           (["tinytrace", "replay", "x.tt", "--", "dat"], {"date"}, False)]
    for v in verbs:
        if v != "help":
            out.append((["tinytrace", v, "-"], options_of(tool, v), False))
    return out


def run_bash(comp, work, words):
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; _tinytrace; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", comp] + words,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=work, timeout=60)
    if p.returncode != 0:
        return None, p.stderr.decode()
    return {l for l in p.stdout.decode().split("\n") if l}, p.stderr.decode()


# The zsh side: one interactive zsh for all the lines; after each line and its TAB, once its
# first match is written, ^U clears it and a command marks the case as done (its matches moved
# to hits.N). Waits have deadlines.
ZSH_DRIVER = r'''
zmodload zsh/zpty
dir=$1 work=$2 n=$3
waitfor() { # FILE [TRIES]: 25 ms each, 800 (20 s) unless told
    local i
    for i in {1..${2:-800}}; do
        [[ -e $1 ]] && return 0
        zpty -r -t z junk
        sleep 0.025
    done
    return 1
}
zpty z zsh -f -i
zpty -w z "fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; cd $work"
zpty -w z 'compadd() { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi; local -a __h; builtin compadd -A __h "$@"; print -rl -- "${__h[@]}" >>'$work'/hits; builtin compadd "$@"; }'
zpty -w z ": >$work/ready"
waitfor $work/ready || { print "zsh gave no prompt in 20 s"; exit 2; }
for ((i = 1; i <= n; i++)); do
    zpty -w -n z "$(<$work/line.$i)"$'\t'
    # every case expects matches: ^U goes only once the completion has begun (zsh may drop a
    # completion that finds keys typed ahead of it); one that offers nothing fails its check
    waitfor $work/hits 200
    zpty -w -n z $'\x15'"mv -f $work/hits $work/hits.$i 2>/dev/null; : >$work/done.$i"$'\n'
    waitfor $work/done.$i || { print "no completion of line $i in 20 s"; exit 2; }
done
zpty -d z
'''


def run_zsh(comp, work, all_words):
    fdir = os.path.join(work, "fpath")
    os.mkdir(fdir)
    shutil.copy(comp, os.path.join(fdir, "_tinytrace"))
    for i, words in enumerate(all_words, 1):
        with open(os.path.join(work, "line.%d" % i), "w") as f:
            f.write(" ".join(words))
    driver = os.path.join(work, "driver.zsh")
    with open(driver, "w") as f:
        f.write(ZSH_DRIVER)
    p = subprocess.run(["zsh", "-f", driver, fdir, work, str(len(all_words))],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    if p.returncode != 0:
        return None, p.stdout.decode(errors="replace")
    out = []
    for i in range(1, len(all_words) + 1):
        hits = os.path.join(work, "hits.%d" % i)
        got = set()
        if os.path.exists(hits):
            with open(hits, errors="replace") as f:
                got = {l.rstrip("\n") for l in f if l.strip()}
        out.append(got)
    return out, ""


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("bash", "zsh"):
        sys.exit(__doc__)
    shell, comp, tool = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    verbs = verbs_of(tool)
    work = tempfile.mkdtemp(prefix="tt-completion-")
    try:
        for name in ("trace-a.tt", "trace-b.tt", "other.txt"):
            open(os.path.join(work, name), "w").close()
        all_cases = cases(tool, verbs)
        if shell == "bash":
            results = []
            for words, _, _ in all_cases:
                got, err = run_bash(comp, work, words)
                if got is None:
                    check(False, "bash: _tinytrace on %r" % words, err)
                results.append(got or set())
        else:
            results, err = run_zsh(comp, work, [w for w, _, _ in all_cases])
            if results is None:
                check(False, "zsh: the completion ran", err)
                results = [set()] * len(all_cases)
        for (words, expected, exact), got in zip(all_cases, results):
            line = " ".join(words)
            if exact:
                check(got == expected, "%s: '%s' offers %s" % (shell, line, sorted(expected)),
                      "got %s" % sorted(got))
            else:
                check(expected <= got, "%s: '%s' offers at least %s" % (shell, line,
                                                                          sorted(expected)),
                      "missing %s" % sorted(expected - got))
        # a verb with no options listed would make the option cases empty: they must not be
        check(all(e for w, e, x in all_cases if w[-1] == "-"), "every verb has options to offer")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%s completion: %d checks, %d failed" % (shell, checks, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
