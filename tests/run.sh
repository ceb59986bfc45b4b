#!/bin/sh
# Runs every test: the CMocka executables under BUILD/tests, then tests/e2e/*.sh (each
# gets the nnbench binary in $NNBENCH). Ends with the line "N passed, N failed".
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
export NNBENCH="$top/$BUILD/nnbench"
export NNBENCH_TOP="$top"
# A test that hangs fails by name after NNBENCH_TEST_TIMEOUT seconds (default 1200, or
# 3600 under the sanitizers) instead of holding the whole run until CI gives up.
limit=${NNBENCH_TEST_TIMEOUT:-$([ -n "${NNBENCH_SANITIZED:-}" ] && echo 3600 || echo 1200)}
pass=0; fail=0; failed=""
# bounded NAME CMD...: runs CMD in the top folder under the time limit.
bounded() {
    name=$1; shift
    (cd "$top" && timeout -k 10 "$limit" "$@")
    rc=$?
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "TIMEOUT: $name still running after $limit s, stopped"
    return "$rc"
}
for t in "$top/$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    echo "== $(basename "$t")"
    if bounded "$(basename "$t")" "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $(basename "$t")"; fi
done
for t in "$top"/tests/e2e/*.sh; do
    [ -f "$t" ] || continue
    echo "== e2e/$(basename "$t")"
    if bounded "e2e/$(basename "$t")" sh "$t"; then pass=$((pass+1)); echo "ok: $(basename "$t")";
    else fail=$((fail+1)); failed="$failed e2e/$(basename "$t")"; fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
