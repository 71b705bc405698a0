#!/usr/bin/env bash
# The main job: record examples/flaky under `tinytrace record` until a run fails, keep that
# recording, then replay it: the clock, the random bytes and the input come back from the file,
# and it fails the same way every time.
set -uo pipefail
build=${1:-build}
tt="$build/tools/tinytrace"
flaky="$build/examples/flaky"
out=${TT_OUT:-flaky-failing.tt}
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
    exit 0
done
echo "no failing run in 40 tries"
exit 1
