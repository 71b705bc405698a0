#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: record examples/flaky under `tinytrace record` until a run fails, keep that
# recording, then replay it: the clock, the random bytes and the input come back from the file,
# and it fails the same way every time. Then the same for a schedule: `tinytrace hunt --chaos`
# records examples/race until its atomicity violation shows, and the replay takes the locks in
# the recorded order, failing every time.
set -uo pipefail
build=${1:-build}
tt="$build/tools/tinytrace"
flaky="$build/examples/flaky"
out=${TT_OUT:-flaky-failing.tt}
race_out=${TT_RACE_OUT:-race-failing.tt}
found=0
for i in $(seq 1 40); do
    if echo 7 | "$tt" record --force -o "$out" -- "$flaky"; then
        continue
    fi
    echo "== run $i failed; its recording is $out"
    for j in 1 2 3; do
        echo "== replay $j (stdin says 0 this time; the recorded 7 comes back):"
        echo 0 | "$tt" replay "$out"
        echo "   tinytrace replay exit status $? (0: the replay matched the recording)"
    done
    found=1
    break
done
if [ "$found" = 0 ]; then
    echo "no failing run of flaky in 40 tries"
    exit 1
fi
echo "== hunting examples/race with schedule chaos"
rm -f "$race_out"
if ! "$tt" hunt --chaos -n 200 -o "$race_out" -- "$build/examples/race"; then
    echo "no failing run of race in 200 tries"
    exit 1
fi
for j in 1 2 3; do
    echo "== replay $j of $race_out (the locks are taken in the recorded order):"
    "$tt" replay "$race_out"
    echo "   tinytrace replay exit status $? (0: the replay matched the recording)"
done
exit 0
