#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-fuzz.sh FUZZER SEEDS DICT [MAX_LEN]: one bounded libFuzzer run, as `meson test --suite fuzz` does it.
#
# Runs FUZZER for TT_FUZZ_SECONDS (default 25) from the seed corpus SEEDS, in a temporary corpus
# directory that is removed afterwards. Prints libFuzzer's final figures. A finding (crash, leak,
# timeout, out-of-memory, failed property) fails the test; the log and every crashing input
# (hex and base64) are printed, and the inputs are kept in findings/ beside FUZZER.
set -uo pipefail
fuzzer=$1 seeds=$2 dict=$3 max_len=${4:-65536}
secs=${TT_FUZZ_SECONDS:-25}
work=$(mktemp -d "${TMPDIR:-/tmp}/tinytrace-fuzz-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
name=$(basename "$fuzzer")
[ -d "$seeds" ] || { echo "$name: no seed corpus at $seeds"; exit 1; }

"$fuzzer" "$work/corpus" "$seeds" -dict="$dict" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1
rc=$?
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/log" | tail -1)
runs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$work/log")
echo "$name: ${secs}s, ${runs:-?} executions, exit $rc"
echo "${done_line:-$(grep -E '^#[0-9]+' "$work/log" | tail -1)}"
shopt -s nullglob
artifacts=("$work"/artifacts/*)
if [ $rc -ne 0 ] || [ ${#artifacts[@]} -ne 0 ]; then
    echo "=== $name: FINDING; the log:"
    tail -n 150 "$work/log"
    keep="$(dirname "$fuzzer")/findings"
    mkdir -p "$keep"
    for a in "${artifacts[@]}"; do
        echo "=== input $(basename "$a") ($(stat -c %s "$a") bytes), kept as $keep/$name-$(basename "$a")"
        cp "$a" "$keep/$name-$(basename "$a")"
        echo "--- hex:"
        od -An -tx1 -v "$a" | head -n 400
        echo "--- base64:"
        base64 "$a" | head -n 400
    done
    exit 1
fi
exit 0
