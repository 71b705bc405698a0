#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Source coverage of the store by a fuzz corpus (docs/FUZZING.md, the long run's figures).
#
#   fuzz/coverage.sh BUILD-COV CORPUS-ROOT
#
# BUILD-COV is a clang build with -Dfuzz=enabled and
#   -Dc_args='-fprofile-instr-generate -fcoverage-mapping' -Dc_link_args=-fprofile-instr-generate
# CORPUS-ROOT holds one corpus directory per target: CORPUS-ROOT/<target>/corpus (a long run's
# output) or CORPUS-ROOT/<target> (a seed corpus). Every input is run once through its target;
# the region, function, line and branch coverage of the store's parsers, of replay.c and of the
# index built after the recording (event/reindex.c, record/tables.c) is printed
# (llvm-profdata, llvm-cov report).
set -euo pipefail
build=$1 root=$2
prof=$(mktemp -d "${TMPDIR:-/tmp}/tinytrace-cov-XXXXXX")
trap 'rm -rf "$prof"' EXIT
objs=()
for t in manifest chunk tables verify replay recover index-build; do
    dir=$root/$t/corpus
    [ -d "$dir" ] || dir=$root/$t
    [ -d "$dir" ] || continue
    LLVM_PROFILE_FILE="$prof/$t-%p.profraw" "$build/fuzz/fuzz-$t" -runs=0 "$dir" >/dev/null 2>&1
    objs+=(-object "$build/fuzz/fuzz-$t")
done
llvm-profdata merge -sparse -o "$prof/all.profdata" "$prof"/*.profraw
llvm-cov report "${objs[@]:1}" -instr-profile="$prof/all.profdata" >"$prof/report"
# the header, the store's files (the parsers), reindex and tables, and the total over everything
# linked
sed -n '1,2p' "$prof/report"
grep -E '^[^ ]*(store/(manifest|reader|verify|recover)|replay/replay|event/reindex|record/tables)\.c ' \
    "$prof/report"
grep -E '^TOTAL ' "$prof/report"
