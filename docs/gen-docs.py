#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Man pages and shell completion for the tinytrace tool, made from the tool's own --help.

The tool's help is the one source of its options: `tinytrace --help` lists the verbs and the
exit codes, `tinytrace VERB --help` a verb's usage, description and options. This script runs
the built tool, parses that text and writes

    man      tinytrace.1, tinytrace-VERB.1 for every verb, tinytrace.7 (the settings, from the
             README's settings tables, and the exit codes)
    bash     the bash completion (file name: tinytrace)
    zsh      the zsh completion (file name: _tinytrace)

so an option added to a verb's --help is in its man page and its completion at the next build.
tests/docs/check-man.py checks the pages against --help independently of this parser.

The help text follows a few rules that the parser relies on (tools/cmd-*.c): blocks are
separated by blank lines; the first is "Usage: tinytrace VERB ..." with indented continuation
lines; the options follow a line "Options:", one option per line indented by 2 to 8 spaces and
starting with "-", its description after two spaces (or one, after an upper-case argument
name), continued on lines indented further; a line indented by two or more spaces inside a
paragraph is shown as it is. A help text the parser does not understand stops the build.
"""
import argparse
import os
import re
import subprocess
import sys
import time

# ---- reading the tool's help ----------------------------------------------------------------


def run_help(tool, wrapper, *args):
    cmd = (wrapper.split() if wrapper else []) + [tool] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        sys.exit("gen-docs: %s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                   p.stderr.decode(errors="replace")))
    return p.stdout.decode("utf-8", errors="replace")


def blocks_of(text):
    """Splits help text into blocks of lines at blank lines."""
    out, cur = [], []
    for line in text.rstrip("\n").split("\n"):
        if line.strip() == "":
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(line.rstrip())
    if cur:
        out.append(cur)
    return out


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


# an option, with an optional argument of its own written as --name[=ARG] (or --name=ARG)
OPT_NAME = r"--?[A-Za-z0-9][A-Za-z0-9-]*(?:\[=[A-Z][A-Z0-9_]*\]|=[A-Z][A-Z0-9_]*)?"
# an argument name: upper case, with the punctuation the help uses (SEQ|TIME, NAME[,NAME...],
# OUT.json)
OPT_ARG = r"[A-Z][A-Z0-9_|,.\[\]]*(?:\.[a-z]+)?"
OPT_LINE = re.compile(r"^(?P<names>%s(?:, %s)*)(?: (?P<arg>%s))?(?:(?P<sep> +)(?P<desc>.*))?$"
                      % (OPT_NAME, OPT_NAME, OPT_ARG))


class Option:
    def __init__(self, names, arg, desc):
        self.shown = names  # as the help writes them: --chaos[=SEED]
        self.names = [re.sub(r"[\[=].*$", "", n) for n in names]
        self.arg, self.desc = arg, desc

    def long(self):
        for n in self.names:
            if n.startswith("--"):
                return n
        return self.names[0]


def parse_options(lines, where):
    """The lines after "Options:" up to the end of the block."""
    opts = []
    for line in lines:
        ind, text = indent_of(line), line.strip()
        if text.startswith("-") and 2 <= ind <= 8:
            m = OPT_LINE.match(text)
            if not m:
                sys.exit("gen-docs: %s: cannot read the option line %r" % (where, line))
            desc = m.group("desc") or ""
            if desc and m.group("arg") is None and len(m.group("sep")) < 2:
                sys.exit("gen-docs: %s: option and description need two spaces: %r"
                         % (where, line))
            opts.append(Option(m.group("names").split(", "), m.group("arg"), desc))
        elif opts and ind > 8:
            opts[-1].desc = (opts[-1].desc + " " + text).strip()
        else:
            sys.exit("gen-docs: %s: a line in Options that is not an option: %r" % (where, line))
    return opts


def parse_list(lines, where):
    """A "Title:" block of "  TERM  description" items; a line at indent 0 ends the list and
    the rest of the block is a paragraph. Returns (items, rest)."""
    items, rest = [], []
    for i, line in enumerate(lines):
        ind = indent_of(line)
        if ind == 0:
            rest = lines[i:]
            break
        text = line.strip()
        if ind == 2:
            m = re.match(r"^(\S+) +(.*)$", text)
            if not m:
                sys.exit("gen-docs: %s: cannot read the list item %r" % (where, line))
            items.append([m.group(1), m.group(2)])
        elif items:
            items[-1][1] += " " + text
        else:
            sys.exit("gen-docs: %s: a list continues before its first item: %r" % (where, line))
    return items, rest


class Help:
    """One help text: usage lines, then blocks: ("para", lines), ("options", [Option]),
    ("list", title, items)."""

    def __init__(self, text, where):
        self.text = text
        bl = blocks_of(text)
        if not bl or not bl[0][0].startswith("Usage: "):
            sys.exit("gen-docs: %s: the help does not start with 'Usage: '" % where)
        self.usage, first_rest = [], []
        for i, line in enumerate(bl[0]):
            if i == 0:
                self.usage.append(line[len("Usage: "):].strip())
            elif indent_of(line) > 0:
                self.usage.append(line.strip())
            else:
                first_rest = bl[0][i:]
                break
        self.blocks = []
        if first_rest:
            self.blocks.append(("para", first_rest))
        for b in bl[1:]:
            if b[0] == "Options:":
                self.blocks.append(("options", parse_options(b[1:], where)))
            elif re.match(r"^[A-Z][A-Za-z ]*:$", b[0]):
                items, rest = parse_list(b[1:], where)
                self.blocks.append(("list", b[0][:-1], items))
                if rest:
                    self.blocks.append(("para", rest))
            else:
                self.blocks.append(("para", b))

    def options(self):
        for b in self.blocks:
            if b[0] == "options":
                return b[1]
        return []

    def lists(self, title):
        for b in self.blocks:
            if b[0] == "list" and b[1] == title:
                return b[2]
        return []


def read_tool(tool, wrapper, verbs_expected):
    top = Help(run_help(tool, wrapper, "--help"), "tinytrace --help")
    verbs = top.lists("Verbs")
    if not verbs:
        sys.exit("gen-docs: tinytrace --help lists no verbs")
    names = [v[0] for v in verbs]
    if verbs_expected is not None and sorted(names) != sorted(verbs_expected):
        sys.exit("gen-docs: tinytrace --help lists the verbs %s, the build expects %s "
                 "(docs/meson.build reads them from tools/tinytrace.c)"
                 % (" ".join(names), " ".join(verbs_expected)))
    helps = {}
    for v in names:
        helps[v] = Help(run_help(tool, wrapper, v, "--help"), "tinytrace %s --help" % v)
    return top, verbs, helps


# ---- the settings, from the README ----------------------------------------------------------


def read_settings(readme):
    """The section "## Settings" of the README in order: ("row", variable, meaning, default)
    for each row of its tables, ("para", text) for each paragraph between them."""
    items, on, cur = [], False, []

    def end_para():
        if cur:
            items.append(("para", " ".join(cur)))
        del cur[:]

    with open(readme, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                if on:
                    break
                on = line.strip() == "## Settings"
                continue
            if not on:
                continue
            line = line.strip()
            if line.startswith("|"):
                end_para()
                if not line.startswith("| `TINYTRACE_"):
                    continue  # a table's head or rule
                cells = [c.strip() for c in line.strip("|").split("|")]
                if len(cells) != 3:
                    sys.exit("gen-docs: %s: a settings row without three cells: %r"
                             % (readme, line))
                items.append(("row", cells[0].strip("`"), cells[1], cells[2]))
            elif line == "":
                end_para()
            else:
                cur.append(line)
    end_para()
    if not any(i[0] == "row" for i in items):
        sys.exit("gen-docs: %s has no settings table under '## Settings'" % readme)
    return items


# ---- roff ------------------------------------------------------------------------------------


def esc(s):
    """Text for roff: backslashes and dashes escaped (a man page's "-" is a hyphen; options
    want the ASCII minus that "\\-" gives), `code` in bold."""
    s = s.replace("\\", "\\e").replace("-", "\\-")
    s = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", s)
    return s


def line_out(s):
    s = esc(s)
    if s.startswith(".") or s.startswith("'"):
        s = "\\&" + s
    return s


def para_roff(lines):
    """A paragraph: indented lines are shown as they are, the others filled."""
    out, pre = [".PP"], False
    for i, line in enumerate(lines):
        if indent_of(line) >= 2:
            if not pre:
                out += [".RS 4", ".nf"]
                pre = True
                base = indent_of(line)
                for later in lines[i:]:
                    if indent_of(later) < 2:
                        break
                    base = min(base, indent_of(later))
            out.append(line_out(line[base:].rstrip()))
        else:
            if pre:
                out += [".fi", ".RE"]
                pre = False
            out.append(line_out(line.strip()))
    if pre:
        out += [".fi", ".RE"]
    return out


def synopsis_roff(usage, verb):
    out = [".SH SYNOPSIS", ".nf"]
    for i, u in enumerate(usage):
        u = esc(u)
        head = "tinytrace" + (" " + verb if verb else "")
        if u.startswith(esc(head)):
            u = "\\fB" + esc(head) + "\\fR" + u[len(esc(head)):]
        elif i > 0:
            u = "    " + u
        out.append(u)
    out.append(".fi")
    return out


def option_roff(o):
    # the name in bold, an optional argument of its own ("[=SEED]") as it is
    head = ", ".join("\\fB%s\\fR%s" % (esc(name), esc(shown[len(name):]))
                     for shown, name in zip(o.shown, o.names))
    if o.arg:
        head += " \\fI%s\\fR" % esc(o.arg)
    return [".TP", head, line_out(o.desc) if o.desc else "\\&"]


def th(name, section, version):
    date = ""
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    if sde and sde.isdigit():
        date = time.strftime("%Y-%m-%d", time.gmtime(int(sde)))
    return ['.\\" SPDX-License-Identifier: MIT',
            '.\\" Generated by docs/gen-docs.py from the output of tinytrace --help: do not edit.',
            '.TH "%s" "%s" "%s" "tinytrace %s" "tinytrace manual"'
            % (name.upper(), section, date, version),
            ".nh"]


def exit_codes_roff(items):
    out = []
    for code, desc in items:
        out += [".TP", "\\fB%s\\fR" % esc(code), line_out(desc)]
    return out


def verb_page(verb, summary, h, top, version):
    out = th("tinytrace-" + verb, 1, version)
    out += [".SH NAME", "tinytrace\\-%s \\- %s" % (esc(verb), esc(summary))]
    out += synopsis_roff(h.usage, verb)
    sections = {"DESCRIPTION": [], "OPTIONS": [], "ENVIRONMENT": [], "EXIT STATUS": [],
                "NOTES": []}
    seen_options = False
    for b in h.blocks:
        if b[0] == "options":
            seen_options = True
            for o in b[1]:
                sections["OPTIONS"] += option_roff(o)
        elif b[0] == "list":
            sections["NOTES" if seen_options else "DESCRIPTION"] += [
                ".PP", line_out(b[1] + ":")] + exit_codes_roff(b[2])
        else:
            lines = b[1]
            first = lines[0]
            if first.startswith("Environment: "):
                lines = [first[len("Environment: "):]] + lines[1:]
                sections["ENVIRONMENT"] += para_roff(lines)
            elif not seen_options:
                sections["DESCRIPTION"] += para_roff(lines)
            elif re.search(r"\bExits?\b", " ".join(lines)):
                sections["EXIT STATUS"] += para_roff(lines)
            else:
                sections["NOTES"] += para_roff(lines)
    for name in ("DESCRIPTION", "OPTIONS", "ENVIRONMENT", "EXIT STATUS", "NOTES"):
        if sections[name]:
            out += [".SH " + name] + sections[name]
    if verb != "help" and not sections["EXIT STATUS"]:
        out += [".SH EXIT STATUS", ".PP", "As listed in \\fBtinytrace\\fR(7)."]
    out += [".SH SEE ALSO", "\\fBtinytrace\\fR(1), \\fBtinytrace\\fR(7)"]
    return out


def main_page(top, verbs, version):
    out = th("tinytrace", 1, version)
    desc_paras = [b for b in top.blocks if b[0] == "para"]
    first = " ".join(desc_paras[0][1]) if desc_paras else ""
    out += [".SH NAME", "tinytrace \\- " + esc(first[0].lower() + first[1:].rstrip("."))]
    out += synopsis_roff(top.usage, None)
    out += [".SH DESCRIPTION"]
    out += para_roff(desc_paras[0][1]) if desc_paras else []
    out += [".SH VERBS"]
    for v, summary in verbs:
        out += [".TP 10", "\\fB%s\\fR" % esc(v),
                line_out(summary) + (" (\\fBtinytrace\\-%s\\fR(1))" % esc(v))]
    rest = []
    for b in top.blocks:
        if b[0] == "para" and b is not desc_paras[0]:
            rest.append(b)
    for b in rest:
        if not re.search(r"\bexits\b", " ".join(b[1])):
            out += para_roff(b[1])
    out += [".SH EXIT STATUS"] + exit_codes_roff(top.lists("Exit codes"))
    for b in rest:
        if re.search(r"\bexits\b", " ".join(b[1])):
            out += para_roff(b[1])
    out += [".SH ENVIRONMENT", ".PP",
            "The \\fBTINYTRACE_*\\fR settings are listed in \\fBtinytrace\\fR(7)."]
    out += [".SH SEE ALSO",
            ",\n".join("\\fBtinytrace\\-%s\\fR(1)" % esc(v) for v, _ in verbs) + ",",
            "\\fBtinytrace\\fR(7)"]
    return out


def settings_page(top, settings, version):
    out = th("tinytrace", 7, version)
    out += [".SH NAME", "tinytrace \\- the settings and exit codes of tinytrace"]
    out += [".SH DESCRIPTION", ".PP",
            "A program that links \\fBlibtinytrace\\fR, and the runtime that "
            "\\fBtinytrace record\\fR and \\fBtinytrace replay\\fR load into a program, read "
            "their settings from the \\fBTINYTRACE_*\\fR environment variables below. None is "
            "read in a setuid or setgid process."]
    out += [".SH ENVIRONMENT"]
    for item in settings:
        if item[0] == "para":
            if "man 7" not in item[1]:  # the README's word about this page
                out += [".PP", line_out(item[1])]
            continue
        var, meaning, default = item[1:]
        d = "" if default in ("\u2014", "-", "") else " Default: %s." % default.strip("`")
        text = meaning + ("" if meaning.endswith(".") else ".") + d
        out += [".TP", "\\fB%s\\fR" % esc(var), line_out(text[0].upper() + text[1:])]
    out += [".SH EXIT STATUS", ".PP", "The exit codes of \\fBtinytrace\\fR:"]
    out += exit_codes_roff(top.lists("Exit codes"))
    for b in top.blocks:
        if b[0] == "para" and re.search(r"\bexits\b", " ".join(b[1])):
            out += para_roff(b[1])
    out += [".SH SEE ALSO", "\\fBtinytrace\\fR(1)"]
    return out


# ---- completion -----------------------------------------------------------------------------

# what an option's argument is, by its name in the help
FILE_ARGS = {"FILE", "OUT", "OUT.json", "A", "B", "DIR"}


def option_words(h):
    words = []
    for o in h.options():
        words += o.names
    return words


def arg_options(h):
    """Options that take an argument: (names, argument name)."""
    return [(o.names, o.arg) for o in h.options() if o.arg]


def event_kinds(helps):
    """The kinds `dump --kind` takes, from its help ("Event kinds: ...")."""
    for b in helps.get("dump", Help("Usage: x", "dump")).blocks:
        if b[0] == "para":
            text = " ".join(b[1])
            m = re.match(r"^Event kinds: (.*)$", text)
            if m:
                return m.group(1).split()
    return []


def bash_completion(verbs, helps):
    verb_names = [v for v, _ in verbs]
    kinds = event_kinds(helps)
    out = ["# SPDX-License-Identifier: MIT",
           "# bash completion for tinytrace. Generated by docs/gen-docs.py from the output of",
           "# tinytrace --help: do not edit.",
           "",
           "_tinytrace_verbs='%s'" % " ".join(verb_names),
           "",
           "_tinytrace_options() { # VERB: the options of VERB",
           "    case $1 in"]
    for v in verb_names:
        out.append("    %s) echo '%s' ;;" % (v, " ".join(option_words(helps[v]))))
    out += ["    esac", "}", "",
            "_tinytrace_argument() { # VERB OPTION: what OPTION's argument is, or nothing",
            "    case $1:$2 in"]
    for v in verb_names:
        for names, arg in arg_options(helps[v]):
            what = "file" if arg in FILE_ARGS else ("kind" if "NAME" in arg and v == "dump"
                                                    else ("format" if names[-1] == "--format"
                                                          else "value"))
            out.append("    %s) echo %s ;;" % ("|".join("%s:%s" % (v, n) for n in names), what))
    out += ["    esac", "}", "",
            "_tinytrace() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev= verb=${COMP_WORDS[1]} i",
            "    [ \"$COMP_CWORD\" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}",
            "    COMPREPLY=()",
            "    if [ \"$COMP_CWORD\" -eq 1 ]; then",
            "        COMPREPLY=($(compgen -W \"$_tinytrace_verbs --help --version\" -- \"$cur\"))",
            "        return 0",
            "    fi",
            "    # after `--`, record and replay run a program: a command, then its arguments",
            "    for ((i = 2; i < COMP_CWORD; i++)); do",
            "        if [ \"${COMP_WORDS[i]}\" = -- ]; then",
            "            if [ $((i + 1)) -eq \"$COMP_CWORD\" ]; then",
            "                COMPREPLY=($(compgen -c -- \"$cur\"))",
            "            else",
            "                COMPREPLY=($(compgen -f -- \"$cur\"))",
            "            fi",
            "            return 0",
            "        fi",
            "    done",
            "    if [ \"$verb\" = help ]; then",
            "        [ \"$COMP_CWORD\" -eq 2 ] && COMPREPLY=($(compgen -W \"$_tinytrace_verbs\" -- \"$cur\"))",
            "        return 0",
            "    fi",
            "    case $(_tinytrace_argument \"$verb\" \"$prev\") in",
            "    file) COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;",
            "    kind) COMPREPLY=($(compgen -W '%s' -- \"${cur##*,}\")); return 0 ;;" % " ".join(kinds),
            "    format) COMPREPLY=($(compgen -W 'chrome chrome-profile perfetto' -- \"$cur\")); return 0 ;;",
            "    value) return 0 ;;",
            "    esac",
            "    case $cur in",
            "    -*) COMPREPLY=($(compgen -W \"$(_tinytrace_options \"$verb\")\" -- \"$cur\")) ;;",
            "    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;",
            "    esac",
            "    return 0",
            "}",
            "complete -o filenames -F _tinytrace tinytrace"]
    return out


def zsh_quote(s):
    """Text for a single-quoted word of an _arguments spec: quotes escaped, no brackets."""
    s = s.replace("\\", "").replace("[", "(").replace("]", ")")
    return s.replace("'", "'\\''")


def short_desc(desc):
    """The first clause of an option's description, for a completion menu."""
    d = re.split(r"; |: | \(|\. ", desc)[0].strip()
    if len(d) > 60:
        d = d[:60].rsplit(" ", 1)[0] + " ..."
    return d


def zsh_completion(verbs, helps):
    kinds = event_kinds(helps)
    out = ["#compdef tinytrace",
           "# SPDX-License-Identifier: MIT",
           "# zsh completion for tinytrace. Generated by docs/gen-docs.py from the output of",
           "# tinytrace --help: do not edit.",
           "",
           "_tinytrace_verb() {",
           "    local -a verbs",
           "    verbs=("]
    for v, summary in verbs:
        out.append("        '%s:%s'" % (v, zsh_quote(summary)))
    out += ["    )",
            "    _describe -t verbs 'tinytrace verb' verbs",
            "}",
            "",
            "_tinytrace() {",
            "    local curcontext=$curcontext state line ret=1",
            "    if (( CURRENT == 2 )); then",
            "        _alternative 'verbs:verb:_tinytrace_verb' \\",
            "            'options:option:((--help\\:\"print the help\" --version\\:\"print the version\"))'",
            "        return",
            "    fi",
            "    local verb=${words[2]} dd",
            "    shift 1 words",
            "    (( CURRENT-- ))",
            "    # after `--`, record and replay run a program: complete it as its own command line",
            "    dd=${words[(I)--]}",
            "    if [[ $verb == (record|replay) ]] && (( dd > 1 && dd < CURRENT )); then",
            "        shift $dd words",
            "        (( CURRENT -= dd ))",
            "        _normal",
            "        return",
            "    fi",
            "    case $verb in"]
    for v, _ in verbs:
        h = helps[v]
        specs = []
        for o in h.options():
            names = o.names
            excl = "(%s)" % " ".join(names) if len(names) > 1 else ""
            desc = zsh_quote(short_desc(o.desc))
            if o.arg:
                if o.arg in FILE_ARGS:
                    action = "_files"
                elif v == "dump" and "NAME" in o.arg:
                    action = "_values -s , kind %s" % " ".join(kinds)
                elif names[-1] == "--format":
                    action = "(chrome chrome-profile perfetto)"
                else:
                    action = " "
                argspec = ":%s:%s" % (zsh_quote(o.arg).lower(), action)
            else:
                argspec = ""
            if len(names) > 1:
                specs.append("'%s'{%s}'[%s]%s'" % (excl, ",".join(names), desc, argspec))
            else:
                specs.append("'%s[%s]%s'" % (names[0], desc, argspec))
        if v == "help":
            specs.append("'1:verb:_tinytrace_verb'")
        elif v == "record":
            specs.append("'*::program and arguments:_normal'")
        elif v == "replay":
            specs.append("'1:trace:_files'")
        else:
            specs.append("'*:trace:_files'")
        out.append("    %s)" % v)
        out.append("        _arguments -s -S \\")
        out += ["            %s \\" % s for s in specs[:-1]]
        out.append("            %s && ret=0" % specs[-1])
        out.append("        ;;")
    out += ["    *) _files && ret=0 ;;",
            "    esac",
            "    return ret",
            "}",
            "",
            "_tinytrace \"$@\""]
    return out


# ---- main ------------------------------------------------------------------------------------


def write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["man", "bash", "zsh"])
    ap.add_argument("--tool", required=True, help="the built tinytrace")
    ap.add_argument("--wrapper", default="", help="a command to run the tool under")
    ap.add_argument("--verbs", default=None, help="the verbs the build expects, comma-separated")
    ap.add_argument("--readme", help="README.md (man: the settings tables)")
    ap.add_argument("--version", default="")
    ap.add_argument("--out", required=True, help="man: the directory; else the file")
    a = ap.parse_args()
    expected = a.verbs.split(",") if a.verbs else None
    top, verbs, helps = read_tool(a.tool, a.wrapper, expected)
    if a.what == "man":
        if not a.readme:
            sys.exit("gen-docs: man needs --readme")
        write(os.path.join(a.out, "tinytrace.1"), main_page(top, verbs, a.version))
        for v, summary in verbs:
            write(os.path.join(a.out, "tinytrace-%s.1" % v),
                  verb_page(v, summary, helps[v], top, a.version))
        write(os.path.join(a.out, "tinytrace.7"),
              settings_page(top, read_settings(a.readme), a.version))
    elif a.what == "bash":
        write(a.out, bash_completion(verbs, helps))
    else:
        write(a.out, zsh_completion(verbs, helps))


if __name__ == "__main__":
    main()
