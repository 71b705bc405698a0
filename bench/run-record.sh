#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds a release tree (build-bench/) and runs bench-record at its default size
# (2x10^7 enter/exit events, 5 rounds), printing what machine the figures come from first.
# Extra arguments go to bench-record, e.g.:  bench/run-record.sh --rounds 9 --dir /var/tmp
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${BENCH_BUILD_DIR:-$src/build-bench}"

if [ ! -f "$build/build.ninja" ]; then
    log=$(mktemp)
    meson setup "$build" "$src" --buildtype=release >"$log" 2>&1 || {
        cat "$log" >&2
        rm -f "$log"
        exit 1
    }
    rm -f "$log"
fi
ninja -C "$build" bench/bench-record >"$build/bench-build.log" 2>&1 || {
    cat "$build/bench-build.log" >&2
    exit 1
}

cpu=$(grep -m1 -E '^(model name|Model|cpu model)[[:space:]]*:' /proc/cpuinfo 2>/dev/null \
      | sed 's/^[^:]*:[[:space:]]*//' || true)
cmd=("$build/bench/bench-record" "$@")

echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "uname:   $(uname -a)"
echo "cpu:     ${cpu:-unknown} ($(nproc) online)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; the swapper needs a free core)"
echo "command: ${cmd[*]}"
echo
exec "${cmd[@]}"
