#!/bin/sh
# fuzz_replay.sh — every input in tests/fuzz/corpus/ (seeds and every crash ever found)
# through its fuzz harness, built without libFuzzer (BUILD/fuzz/NAME, replay.c): under
# `make check` with ASan+UBSan, so each old crash is re-checked without fuzzing time.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
B=$(dirname "$NNBENCH")
fail() { echo "FAIL: $*" >&2; exit 1; }
for t in $(ls "$NNBENCH_TOP/tests/fuzz/corpus"); do
    [ -x "$B/fuzz/$t" ] || fail "$B/fuzz/$t is not built (make tests)"
    n=$(ls "$NNBENCH_TOP/tests/fuzz/corpus/$t" | wc -l)
    [ "$n" -gt 0 ] || fail "no seed corpus for $t"
    out=$("$B/fuzz/$t" "$NNBENCH_TOP/tests/fuzz/corpus/$t" 2>&1) || { echo "$out" | tail -30; fail "$t: replay failed"; }
    echo "$out" | grep -q "^replayed $n inputs\?$" || { echo "$out" | tail -5; fail "$t: not every input replayed"; }
    echo "fuzz corpus $t: $n inputs replayed"
done
