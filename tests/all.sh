#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite, in four builds:
#   build/        the normal build: every suite, plus the benchmark smoke run
#   build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer: every suite but the benchmark
#   build-tsan/   ThreadSanitizer: the concurrency suites
#   build-fuzz/   clang, ASan+UBSan, libFuzzer: each fuzz target for a bounded time (fuzz/)
#   build-vg/     -O2 -g (so the optimizer's warnings, errors under -Werror, are seen too): the
#                 tests in tests/integration/ with every program under valgrind memcheck
# then the Debian packages (tests/debian.sh): built in a copy of the tree, lintian, installed
# (as root), record and replay of date from /usr.
# Ends with one line "N passed, N failed" over all of them, and exits non-zero if anything
# failed.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=${TT_TEST_JOBS:-2}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
passed=0
failed=0
status=0

failures=$(mktemp)
trap 'rm -f "$failures"' EXIT

count() { # count BUILDDIR NAME: add the results of the last meson test run
    # meson names the log after the wrapper (testlog-setarch.json): take the newest. Each test
    # that did not pass goes into $failures with the end of its output, printed again at the
    # end, where a CI log that keeps only its tail still shows it
    python3 - "$1/meson-logs" "$2" "$failures" <<'PY'
import glob, json, os, sys
p = f = 0
logs = sorted(glob.glob(os.path.join(sys.argv[1], "testlog*.json")), key=os.path.getmtime)
out = open(sys.argv[3], "a")
try:
    for line in open(logs[-1]):
        t = json.loads(line)
        r = t.get("result")
        if r in ("OK", "EXPECTEDFAIL"): p += 1
        elif r != "SKIP":
            f += 1
            text = ((t.get("stdout") or "") + (t.get("stderr") or "")).splitlines()
            out.write("--- %s: %s %s after %.1f s; its output's last lines:\n"
                      % (sys.argv[2], t.get("name"), r, t.get("duration") or 0))
            out.write("".join("  " + x[:300] + "\n" for x in text[-25:]))
except (FileNotFoundError, IndexError):
    f = 1
    out.write("--- %s: no test log in %s\n" % (sys.argv[2], sys.argv[1]))
print(p, f)
PY
}

run() { # run NAME BUILDDIR SETUP-ARGS -- TEST-ARGS
    local name=$1 dir=$2
    shift 2
    local setup=()
    while [ "$1" != "--" ]; do setup+=("$1"); shift; done
    shift
    echo "=== $name: meson setup $dir ${setup[*]}"
    # (a directory without build.ninja is not a build: the valgrind step makes its log
    # directory inside build-vg/ before the first setup)
    if ! { [ -f "$dir/build.ninja" ] || meson setup "$dir" "${setup[@]}" >/dev/null; } ||
       ! meson configure "$dir" "${setup[@]}" >/dev/null ||
       ! ninja -C "$dir" >/dev/null; then
        echo "=== $name: build FAILED" | tee -a "$failures"
        ninja -C "$dir" 2>&1 | tail -40
        failed=$((failed + 1)); status=1
        return
    fi
    meson test -C "$dir" --num-processes "$jobs" --print-errorlogs "$@"
    local rc=$?
    read -r p f < <(count "$dir" "$name")
    passed=$((passed + p)); failed=$((failed + f))
    [ $rc -eq 0 ] || status=1
}

run plain build -- --no-suite fuzz
run asan build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fno-sanitize-recover=all -Dbench=disabled -- \
    --no-suite bench-smoke --no-suite fuzz --timeout-multiplier 4
# TSan needs a fixed address layout on kernels with many ASLR bits: setarch -R turns it off
run tsan build-tsan -Db_sanitize=thread -Db_lundef=false -Dbench=disabled -- \
    --suite concurrency --timeout-multiplier 6 --wrapper 'setarch -R'
# issue 5, acceptance 5: the stress suite 50 times in a row under TSan (each run counts)
run tsan-stress-50x build-tsan -Db_sanitize=thread -Db_lundef=false -Dbench=disabled -- \
    --suite stress --repeat 50 --timeout-multiplier 6 --wrapper 'setarch -R'

# ---- fuzz: begin (docs/FUZZING.md) ----
# The library, the tools and the libFuzzer targets built with clang (warnings are errors, as in
# every build); the seed corpus is recorded at build time; each target then runs for
# TT_FUZZ_SECONDS (default 25) and counts as one test. A finding fails its test and prints the
# crashing input (hex and base64); it is also kept in build-fuzz/fuzz/findings/.
if command -v clang >/dev/null; then
    CC=clang run fuzz build-fuzz -Dfuzz=enabled -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fno-sanitize-recover=all -Dtests=disabled -Dbench=disabled -- --suite fuzz
else
    echo "=== fuzz: clang not found (.ci/packages lists it)"
    failed=$((failed + 1)); status=1
fi
# ---- fuzz: end ----

# ---- valgrind: begin ----
# The tests in tests/integration/ in an -O2 -g build, every program they start under memcheck:
# the tinytrace tool, the test programs, and (--trace-children=yes) what `tinytrace record` and
# `replay` run with the preload library. tests/integration/testwrap.py puts TT_TEST_WRAPPER in
# front of the programs meson passes a test, not in front of python. TT_TEST_REDUCED=1: timeouts
# x10, and the peak-RSS checks of diff and export are skipped (under valgrind the RSS is
# valgrind's); every other check runs at full size. Not here: tests/recreplay, tests/preload and
# tests/instrument, whose replays cannot match under valgrind (it replaces malloc, so there are
# no allocation events, and its own startup makes interposed calls that differ from run to run).
# A leak counts when it is definite; tests/valgrind.supp holds what is not ours. Each meson test
# counts, and the logs count as one more test: -q leaves a clean process's log empty. Not here
# either: shapes, whose bounds are times (a 10^6-deep tree, 20 000 threads) that mean nothing
# under valgrind.
if command -v valgrind >/dev/null; then
    vglogs=$PWD/build-vg/valgrind-logs
    rm -rf "$vglogs" && mkdir -p "$vglogs"
    export TT_TEST_REDUCED=1
    export TT_TEST_WRAPPER="valgrind -q --tool=memcheck --trace-children=yes --leak-check=full \
--show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=99 \
--suppressions=$PWD/tests/valgrind.supp --log-file=$vglogs/%p.%n.log"
    run valgrind build-vg --buildtype=debugoptimized -Dbench=disabled -- --suite integration --timeout-multiplier 10 \
        tool-integration tool-incomplete-trace gc recover diff export diskfull index-tools \
        clobber escapes
    unset TT_TEST_REDUCED TT_TEST_WRAPPER
    dirty=$(find "$vglogs" -type f -size +0 | sort)
    if [ "$(find "$vglogs" -type f | wc -l)" -eq 0 ]; then
        echo "=== valgrind: no log at all: nothing ran under valgrind" | tee -a "$failures"
        failed=$((failed + 1)); status=1
    elif [ -z "$dirty" ]; then
        echo "=== valgrind: $(find "$vglogs" -type f | wc -l) logs, all empty"
        passed=$((passed + 1))
    else
        echo "=== valgrind: $(echo "$dirty" | wc -l) logs with errors or definite leaks:" |
            tee -a "$failures"
        for f in $dirty; do echo "--- $f"; head -60 "$f"; done
        failed=$((failed + 1)); status=1
    fi
else
    echo "=== valgrind: not found (.ci/packages lists it)"
    failed=$((failed + 1)); status=1
fi
# ---- valgrind: end ----

# ---- debian: begin ----
# The packages of debian/ built with dpkg-buildpackage -us -uc -b in a copy of the tree outside
# it (nocheck: the builds above ran the tests), lintian (an error fails), then, as root (CI
# is), dpkg -i of the three, `tinytrace record -- date` and `tinytrace replay` from /usr, and
# dpkg --purge. Counts as one test. tests/debian.sh prints `dpkg -c` of each package.
echo "=== debian: tests/debian.sh"
if tests/debian.sh; then
    passed=$((passed + 1))
else
    echo "--- debian: tests/debian.sh failed (its output is above)" >> "$failures"
    failed=$((failed + 1)); status=1
fi
# ---- debian: end ----

if [ -s "$failures" ]; then
    echo "=== what failed"
    cat "$failures"
fi
echo "$passed passed, $failed failed"
exit $status
