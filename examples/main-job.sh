#!/usr/bin/env bash
# The main job: record examples/flaky until a run fails, keep that recording, then replay it and
# watch it fail the same way every time.
set -uo pipefail
build=${1:-build}
flaky="$build/examples/flaky"
out=${TT_OUT:-flaky-failing.tt}
for i in $(seq 1 40); do
    if echo 7 | TINYTRACE_MODE=record TINYTRACE_FILE="$out" "$flaky"; then
        continue
    fi
    echo "run $i failed; recorded in $out"
    "$build/tools/tinytrace" verify "$out" || exit 1
    for j in 1 2 3; do
        echo "replay $j:"
        echo 0 | TINYTRACE_MODE=replay TINYTRACE_FILE="$out" "$flaky"
        echo "  exit status $?"
    done
    exit 0
done
echo "no failing run in 40 tries"
exit 1
