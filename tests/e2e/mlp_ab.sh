#!/bin/sh
# mlp_ab.sh — scripts/mlp_ab.sh (the interleaved A/B of builds that docs/engine.md's 2-thread
# figures come from): one round of this build against itself prints a median line per
# directory with a positive samples/s; a directory without build/bench/mlp_bench and a call
# without a directory are refused with exit 2. The figures themselves are never checked.
set -u
if [ "${NNBENCH_SANITIZED:-0}" = 1 ]; then
    echo "mlp_ab: skipped under sanitizers (a full-size MLP epoch would take minutes there)"
    exit 0
fi
top=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "mlp_ab: FAIL: $*" >&2; cat "$tmp/out" "$tmp/err" >&2 2>/dev/null; exit 1; }

[ -x "$top/build/bench/mlp_bench" ] || fail "$top/build/bench/mlp_bench is not built (make tests builds it)"
sh "$top/scripts/mlp_ab.sh" -r 1 -t 1 "$top" "$top" >"$tmp/out" 2>"$tmp/err" || fail "one round exited non-zero"
grep -q '^samples/s at 1 thread(s), 1 interleaved rounds$' "$tmp/out" || fail "no title line"
n=$(awk -v d="$top" '$1 == d && $2 == "median" && $3 > 0 && $5 == $3 && $7 == $3 { n++ } END { print n + 0 }' "$tmp/out")
[ "$n" = 2 ] || fail "expected 2 median lines (one round: median = min = max > 0), got $n"

sh "$top/scripts/mlp_ab.sh" -r 1 "$tmp" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] || fail "a directory without build/bench/mlp_bench was not refused with exit 2"
grep -q "mlp_bench is missing" "$tmp/err" || fail "the refusal does not say what is missing"
sh "$top/scripts/mlp_ab.sh" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] || fail "a call without a directory was not refused with exit 2"
echo "mlp_ab: ok"
