#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The documented long run of every fuzz target (docs/FUZZING.md).
#
#   fuzz/long-run.sh start BUILDDIR OUTDIR [SECONDS [TARGET…]]
#                                          start every target (or the ones named) at once, in
#                                          the background, under nice -n 19
#   fuzz/long-run.sh report OUTDIR                     the figures, as a Markdown table
#
# start copies the targets and the seed corpus of BUILDDIR/fuzz into OUTDIR (so a rebuild does
# not change a running binary), then runs each target for SECONDS (default 1800) of wall time
# with its own corpus directory OUTDIR/<target>/corpus, crashing inputs in OUTDIR/<target>/, and
# its log in OUTDIR/<target>.log. Process ids go to OUTDIR/pids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
all_targets="manifest chunk tables verify replay recover index-build"
targets=$all_targets

max_len() { [ "$1" = manifest ] && echo 1024 || echo 65536; }

case "${1:-}" in
start)
    build=$2 out=$3 secs=${4:-1800}
    shift 3; [ $# -gt 0 ] && shift
    [ $# -gt 0 ] && targets="$*"
    mkdir -p "$out/bin"
    : >"$out/pids"
    date -u +%Y-%m-%dT%H:%M:%SZ >"$out/started"
    for t in $targets; do
        cp "$build/fuzz/fuzz-$t" "$out/bin/"
        mkdir -p "$out/$t/corpus"
        cp -r "$build/fuzz/corpus/$t/." "$out/$t/corpus/"
        (cd "$out/$t" && exec setsid nice -n 19 "$out/bin/fuzz-$t" corpus -dict="$here/tinytrace.dict" \
            -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
            -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$out/$t/" \
            >"$out/$t.log" 2>&1) &
        echo "$t $!" >>"$out/pids"
    done
    echo "started: $(tr '\n' ' ' <"$out/pids")"
    ;;
report)
    out=$2
    echo "| target | wall s | executions | exec/s | cov | ft | corpus | crashes |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for t in $targets; do
        log=$out/$t.log
        [ -f "$log" ] || continue
        last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1)
        execs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$log")
        secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
        [ -n "$execs" ] || execs=$(echo "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
        cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
        ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
        corp=$(echo "$last" | sed -n 's/.*corp: \([^ ]*\).*/\1/p')
        crashes=$(find "$out/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
            -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
        rate=
        [ -n "$secs" ] && [ "$secs" -gt 0 ] && rate=$((execs / secs))
        echo "| $t | ${secs:-running} | $execs | ${rate:-} | $cov | $ft | $corp | $crashes |"
    done
    ;;
*)
    sed -n '2,13p' "$0"
    exit 2
    ;;
esac
