#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The index tables at scale (issue 6, acceptance 2). Builds a release tree (build-bench/, or
# $BENCH_BUILD_DIR), records bench-index runs of 10^6 and 10^8 events, and measures:
#   - the recording's peak RSS at both sizes (it must not grow with the run);
#   - the frame table's bytes per frame on disk (FRAMES chunks, headers included, plus the
#     directory's 16 bytes per block);
#   - `tinytrace stats` and `tinytrace tree --depth 3` on the 10^8 run: wall time and peak RSS
#     (/usr/bin/time), targets < 1 s and < 64 MiB;
#   - `tinytrace dump --from` the last million events: seeking there and printing 1000 events
#     (target < 50 ms), and printing the whole last million, to /dev/null and to a file.
# Each query runs 3 times; all three figures are printed, wall and CPU time (the machine may be
# shared: CPU time is what the command itself cost). CPU heavy: run it once.
# Usage: bench/run-index.sh [--events N] [--dir DIR]   (defaults 100000000, a fresh /var/tmp dir)
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${BENCH_BUILD_DIR:-$src/build-bench}"
events=100000000
base=/var/tmp
while [ $# -gt 0 ]; do
    case "$1" in
    --events) events=$2; shift 2 ;;
    --dir) base=$2; shift 2 ;;
    *) echo "usage: $0 [--events N] [--dir DIR]" >&2; exit 2 ;;
    esac
done

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$src" --buildtype=release >/dev/null
fi
ninja -j2 -C "$build" bench/bench-index tools/tinytrace >"$build/bench-index-build.log" 2>&1 || {
    cat "$build/bench-index-build.log" >&2
    exit 1
}
tt="$build/tools/tinytrace"
dir=$(mktemp -d "$base/tt-bench-index.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "uname:   $(uname -srm)"
echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | sed 's/^[^:]*: //') ($(nproc) online)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build:   $(meson introspect --buildoptions "$build" 2>/dev/null | python3 -c \
    'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="buildtype"][0])')"
echo

# wall milliseconds and peak RSS (KiB, from /usr/bin/time: the command's own, not a parent's
# carried over an exec) of one command; its stdout goes to $1. A sync first, untimed: the 500 MB
# the 10^8 recording just wrote is otherwise written back during the first queries, by kernel
# threads that take the second core (a text dump prints on a second thread).
measure() {
    sync
    python3 - "$@" <<'PY'
import subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
with open(out, "wb") as f:
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd, stdout=f, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t0) * 1000
if p.returncode != 0:
    sys.exit("failed: %s: %s" % (" ".join(cmd), p.stderr.decode()))
rss, user, sys_ = p.stderr.decode().strip().splitlines()[-1].split()
print("wall_ms=%.1f cpu_ms=%.0f rss_kib=%s" % (ms, (float(user) + float(sys_)) * 1000, rss))
PY
}

for n in 1000000 "$events"; do
    echo "record $n events: $("$build/bench/bench-index" --events "$n" "$dir/run-$n.tt")"
done
big="$dir/run-$events.tt"
echo
echo "verify (10^8 file, tables included): $(measure /dev/null "$tt" verify "$big")"

python3 - "$big" "$tt" <<'PY'
import json, subprocess, sys
path, tt = sys.argv[1], sys.argv[2]
st = json.loads(subprocess.run([tt, "stats", "--json", path], capture_output=True, check=True).stdout)
frames = st["frames"]
fb = blocks = 0
with open(path, "rb") as f:
    m = f.read(512)
    off, end = 512, int.from_bytes(m[264:272], "little")
    while off < end:
        f.seek(off)
        h = f.read(48)
        body = int.from_bytes(h[8:12], "little")
        if int.from_bytes(h[4:6], "little") == 4:
            fb += 48 + body
            blocks += 1
        off += 48 + body
print("frame table: %d frames, %d blocks, %d bytes on disk = %.2f bytes/frame "
      "(+ 16 B/block in the directory: %.2f)" % (frames, blocks, fb, fb / frames,
                                                  (fb + 16 * blocks) / frames))
print("events: %d, file %d bytes" % (st["events"], int.from_bytes(m[304:312], "little")))
PY
echo
total=$("$tt" info --json "$big" | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifest"]["event_count"])')
from=$((total - 1000000))
for i in 1 2 3; do
    echo "stats:                         $(measure /dev/null "$tt" stats "$big")"
done
for i in 1 2 3; do
    echo "tree --depth 3:                $(measure "$dir/tree.txt" "$tt" tree --depth 3 "$big") lines=$(wc -l <"$dir/tree.txt")"
done
for i in 1 2 3; do
    echo "dump --from $from --count 1000: $(measure /dev/null "$tt" dump --from "$from" --count 1000 "$big")"
done
for i in 1 2 3; do
    echo "dump --from $from (1e6 events) > /dev/null: $(measure /dev/null "$tt" dump --from "$from" "$big")"
done
for i in 1 2 3; do
    echo "dump --from $from (1e6 events) > file: $(measure "$dir/last.txt" "$tt" dump --from "$from" "$big") lines=$(wc -l <"$dir/last.txt")"
done
