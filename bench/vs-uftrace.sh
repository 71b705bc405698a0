#!/usr/bin/env bash
# tinytrace record against uftrace record on the same -finstrument-functions binary (issue 3).
# Usage: bench/vs-uftrace.sh [BUILD_DIR] [CALLS] [ROUNDS]
# Runs plain / tinytrace / uftrace in alternation, ROUNDS times, and prints the medians:
# wall ns per event over the plain run of the same binary, and bytes per event on disk.
set -euo pipefail
build=${1:-build}
calls=${2:-10000000}
rounds=${3:-3}
tt="$build/tools/tinytrace"
prog="$build/bench/loop-instrumented"
command -v uftrace >/dev/null || { echo "uftrace is not installed (apt-get install uftrace)"; exit 2; }
[ -x "$tt" ] && [ -x "$prog" ] || { echo "build first: ninja -C $build"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
events=$((2 * calls))

now() { date +%s.%N; }
declare -a plain tiny uft tbytes ubytes
for r in $(seq 1 "$rounds"); do
    t0=$(now); "$prog" "$calls" >/dev/null; t1=$(now)
    plain+=("$(echo "$t1 - $t0" | bc -l)")

    rm -f "$work/t.tt"
    t0=$(now); "$tt" record -o "$work/t.tt" -- "$prog" "$calls" >/dev/null 2>&1; t1=$(now)
    tiny+=("$(echo "$t1 - $t0" | bc -l)")
    got=$("$tt" info --json "$work/t.tt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifest"]["event_count"])')
    # enter/exit of main and leaf, plus the structural events: every one must be there
    [ "$got" -ge "$events" ] || { echo "tinytrace lost events: $got < $events"; exit 1; }
    tbytes+=("$(stat -c %s "$work/t.tt")")

    rm -rf "$work/u.data"
    t0=$(now); uftrace record -d "$work/u.data" "$prog" "$calls" >/dev/null 2>&1; t1=$(now)
    uft+=("$(echo "$t1 - $t0" | bc -l)")
    ubytes+=("$(du -sb "$work/u.data" | cut -f1)")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
p=$(median "${plain[@]}"); t=$(median "${tiny[@]}"); u=$(median "${uft[@]}")
tb=$(median "${tbytes[@]}"); ub=$(median "${ubytes[@]}")
tns=$(echo "($t - $p) * 1000000000 / $events" | bc -l)
uns=$(echo "($u - $p) * 1000000000 / $events" | bc -l)
tbe=$(echo "$tb / $events" | bc -l); ube=$(echo "$ub / $events" | bc -l)
echo "date: $(date -u +%FT%TZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "command: $0 $build $calls $rounds   ($events events, $rounds rounds, medians)"
printf '%-22s %12s %14s %12s\n' "" "wall s" "ns/event" "bytes/event"
printf '%-22s %12.3f %14s %12s\n' "plain (same binary)" "$p" "-" "-"
printf '%-22s %12.3f %14.1f %12.2f\n' "tinytrace record" "$t" "$tns" "$tbe"
printf '%-22s %12.3f %14.1f %12.2f\n' "uftrace record" "$u" "$uns" "$ube"
printf 'ratios: uftrace/tinytrace time per event %.1fx (target >= 5), bytes per event %.1fx (target >= 4)\n' \
    "$(echo "$uns / $tns" | bc -l)" "$(echo "$ube / $tbe" | bc -l)"
