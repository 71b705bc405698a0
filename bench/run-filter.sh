#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a call that `record --notrace` or `--filter` leaves out costs the recording thread
# (issue 20, point 6). Builds a release tree (build-bench/, or $BENCH_BUILD_DIR) and
# bench/compare-workload.c's loop (a non-inlined leaf called CALLS times) with
# -finstrument-functions, and times, each RUNS times (the minimum is printed, wall and CPU):
#   hooks-empty   the instrumented binary alone: glibc's empty __cyg_profile_func_* hooks
#   record        `tinytrace record`: every call recorded
#   notrace-leaf  `tinytrace record --notrace leaf`: every leaf call filtered out
#   filter-main   `tinytrace record --filter main`: nothing filtered (the filter costs a
#                 counter per call)
# and prints ns per call of each over hooks-empty: notrace-leaf's is what a filtered call costs
# beyond the hook itself (the guard, the filter flag, a probe of the verdict map, a counter).
# Usage: bench/run-filter.sh [--calls N] [--runs R]   (defaults 20000000, 5)
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${BENCH_BUILD_DIR:-$src/build-bench}"
calls=20000000
runs=5
while [ $# -gt 0 ]; do
    case "$1" in
    --calls) calls=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--calls N] [--runs R]" >&2; exit 2 ;;
    esac
done

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$src" --buildtype=release >/dev/null
fi
ninja -j2 -C "$build" tools/tinytrace libtrace/instrument/libtinytrace-preload.so \
    >"$build/bench-filter-build.log" 2>&1 || { cat "$build/bench-filter-build.log" >&2; exit 1; }
tt="$build/tools/tinytrace"
dir=$(mktemp -d /tmp/tt-bench-filter.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cc -O2 -finstrument-functions -o "$dir/wl" "$src/bench/compare-workload.c" -lpthread

echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | sed 's/^[^:]*: //') ($(nproc) online)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "calls:   $calls, best of $runs runs"
echo

python3 - "$tt" "$dir" "$calls" "$runs" <<'PY'
import os, resource, subprocess, sys, time
tt, d, calls, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
wl = os.path.join(d, "wl")
trace = os.path.join(d, "t.tt")
variants = [
    ("hooks-empty", [wl, "loop", str(calls)]),
    ("record", [tt, "record", "-q", "-f", "-o", trace, "--", wl, "loop", str(calls)]),
    ("notrace-leaf", [tt, "record", "-q", "-f", "-o", trace, "--notrace", "leaf", "--", wl,
                      "loop", str(calls)]),
    ("filter-main", [tt, "record", "-q", "-f", "-o", trace, "--filter", "main", "--", wl,
                     "loop", str(calls)]),
]
best = {}
for name, cmd in variants:
    walls, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    best[name] = (min(walls), min(cpus))
    ev = ""
    if name != "hooks-empty":
        out = subprocess.run([tt, "info", "--json", trace], stdout=subprocess.PIPE,
                             check=True).stdout
        import json
        ev = "  %d events recorded" % json.loads(out)["manifest"]["event_count"]
    print("%-13s wall %7.3f s  cpu %7.3f s%s" % (name, best[name][0], best[name][1], ev))
print()
base = best["hooks-empty"]
for name in ("record", "notrace-leaf", "filter-main"):
    w, c = best[name]
    print("%-13s over hooks-empty: wall %6.2f ns/call, cpu %6.2f ns/call" %
          (name, (w - base[0]) * 1e9 / calls, (c - base[1]) * 1e9 / calls))
PY
