# SPDX-License-Identifier: MIT
# tinytrace's help for gdb, loaded by `tinytrace replay --gdb` (docs/REPLAY.md, "A debugger at
# the divergence"); installed with the tool, under share/tinytrace/.
#
# The runtime of a replay calls tt_divergence_break(report) at a divergence, once its report is
# out and before the diverging call returns to the program, and where `replay --stop-at` asks;
# `replay --gdb` breaks there. When gdb stops in tt_divergence_break, this prints the report and
# selects the program's frame that made the call: the innermost one that is not in the runtime
# library (libtinytrace-preload.so, or libtinytrace.so for a linked program). `bt` still shows
# every frame; `info locals`, `print` and `up` start from the selected one. Without this file
# (a gdb without Python), the breakpoint alone stops there: `up` to the program's frame.
import gdb


def _in_runtime(frame):
    name = gdb.solib_name(frame.pc())
    return name is not None and "libtinytrace" in name


def _report(frame):
    for expr in ("report", "(const char *) $rdi"):
        try:
            value = frame.read_var(expr) if expr == "report" else gdb.parse_and_eval(expr)
            return value.string()
        except (gdb.error, ValueError):
            continue
    return None


def _on_stop(event):
    if not isinstance(event, gdb.BreakpointEvent):
        return
    try:
        frame = gdb.newest_frame()
    except gdb.error:
        return
    if frame.name() != "tt_divergence_break":
        return
    text = _report(frame)
    if text:
        gdb.write(text if text.endswith("\n") else text + "\n")
    level, f = 0, frame
    while f is not None and _in_runtime(f):
        f = f.older()
        level += 1
    if f is None:
        return
    f.select()
    gdb.write("tinytrace: the program's frame that made the call is #%d (selected; `bt` shows "
              "them all):\n" % level)
    gdb.execute("frame")


gdb.events.stop.connect(_on_stop)
