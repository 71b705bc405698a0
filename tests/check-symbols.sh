#!/bin/sh
# SPDX-License-Identifier: MIT
# Symbol test: the shared library exports nothing but tt_* (plus the version node of its linker
# version script, and the two -finstrument-functions hooks a linked program gets from it).
# Usage: check-symbols.sh path/to/libtinytrace.so
set -eu
lib=$1
nm=${NM:-nm}
syms=$("$nm" -D --defined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//' | sort -u)
if [ -z "$syms" ]; then
    echo "no exported symbols in $lib" >&2
    exit 1
fi
bad=$(printf '%s\n' "$syms" | grep -v '^tt_' | grep -v '^TINYTRACE_[0-9.]*$' |
      grep -v -x -e '__cyg_profile_func_enter' -e '__cyg_profile_func_exit' || true)
if [ -n "$bad" ]; then
    echo "exported symbols without the tt_ prefix in $lib:" >&2
    printf '  %s\n' $bad >&2
    exit 1
fi
for required in tt_session_open tt_session_close tt_reader_next tt_verify tt_strerror tt_version \
    __cyg_profile_func_enter __cyg_profile_func_exit; do
    if ! printf '%s\n' "$syms" | grep -qx "$required"; then
        echo "$required is not exported from $lib" >&2
        exit 1
    fi
done
echo "$(printf '%s\n' "$syms" | grep -c '^tt_') tt_ symbols, nothing else"
