#!/bin/sh
# Runs every test: the CMocka executables under BUILD/tests, then tests/e2e/*.sh (each
# gets the nnbench binary in $NNBENCH). Ends with the line "N passed, N failed".
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
export NNBENCH="$top/$BUILD/nnbench"
export NNBENCH_TOP="$top"
pass=0; fail=0; failed=""
for t in "$top/$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    echo "== $(basename "$t")"
    if (cd "$top" && "$t"); then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $(basename "$t")"; fi
done
for t in "$top"/tests/e2e/*.sh; do
    [ -f "$t" ] || continue
    echo "== e2e/$(basename "$t")"
    if (cd "$top" && sh "$t"); then pass=$((pass+1)); echo "ok: $(basename "$t")";
    else fail=$((fail+1)); failed="$failed e2e/$(basename "$t")"; fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
