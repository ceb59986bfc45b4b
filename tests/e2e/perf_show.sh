#!/bin/sh
# perf_show.sh — issue 27: the calibration in force when a run starts (sgemm peak, memory
# bandwidth) and the CPU's ISA are stored with the run, so that `show`, the Markdown and
# JSON reports print "% bw", "bound", the ridge point and the warnings of `run --profile`
# from stored data; a run stored without them (older runs, no calibration) keeps the
# columns with "-" and says why. The calibration file is the test's own (XDG_CACHE_HOME);
# the warning is forced by editing the stored facts, whatever this machine is.
set -eu
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
top=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v sqlite3 >/dev/null 2>&1 || { echo "perf_show.sh: sqlite3 is not installed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "perf_show.sh: $*" >&2; exit 1; }
db="$tmp/p.db"
q() { sqlite3 "$db" "$1"; }

mkdir -p "$tmp/xdg/nnbench"
printf 'peak_gflops = 100.000\nmean_gflops = 90.000\nm = 256\nn = 256\nk = 256\nreps = 3\nthreads = 1\ncore = Haswell\nwhen = 2026-12-01T00:00:00Z\nbw_gbs = 10.000\nbw_mib = 64\n' \
    >"$tmp/xdg/nnbench/calibration"
XDG_CACHE_HOME="$tmp/xdg" "$NNBENCH" run "$top/samples/spirals-mlp.ini" --variant sgd --set train.epochs=2 \
    --set profile.enabled=true --db "$db" >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; fail "run failed"; }

echo "perf_show.sh: the calibration and the ISA are stored when the run starts"
[ "$(q "SELECT value FROM system_info WHERE run=1 AND key='calib_bw_gbs'")" = 10 ] || fail "no calib_bw_gbs = 10 stored"
[ "$(q "SELECT value FROM system_info WHERE run=1 AND key='calib_peak_gflops'")" = 100 ] || fail "no calib_peak_gflops = 100 stored"
q "SELECT value FROM system_info WHERE run=1 AND key='cpu_isa'" | grep -Eq '^(generic|avx2|avx512)$' || fail "no cpu_isa stored"

echo "perf_show.sh: show has % bw, bound and the ridge point from them"
"$NNBENCH" show 1 --db "$db" --ops 30 >"$tmp/show" || fail "show failed"
grep -q '^  name .*FLOP/B  *% bw  *bound' "$tmp/show" || { cat "$tmp/show"; fail "show's op table has no % bw / bound"; }
grep -Eq '^  dense\.fwd .* (compute|memory) *$' "$tmp/show" || fail "no dense.fwd row classed compute or memory"
grep -q 'bound: compute above the ridge point 10 FLOP/B = 100.0 GFLOP/s peak / 10.0 GB/s' "$tmp/show" || fail "no ridge line"

echo "perf_show.sh: a BLAS core weaker than the stored ISA warns in show and the reports"
q "UPDATE system_info SET value='Prescott' WHERE run=1 AND key='blas_core'"
q "UPDATE system_info SET value='avx2' WHERE run=1 AND key='cpu_isa'"
w='the BLAS core Prescott is weaker than this CPU (avx2)'
"$NNBENCH" show 1 --db "$db" >"$tmp/show" || fail "show failed"
grep -qF "  Warning: $w" "$tmp/show" || fail "show has no core warning"
"$NNBENCH" report 1 -o "$tmp/r.md" --db "$db" >/dev/null 2>&1 || fail "report .md failed"
grep -qF "Warning: $w" "$tmp/r.md" || fail "the Markdown report has no core warning"
grep -qF "| % bw | bound |" "$tmp/r.md" || fail "the Markdown report's op table has no % bw / bound"
"$NNBENCH" report 1 -o "$tmp/r.json" --db "$db" >/dev/null 2>&1 || fail "report .json failed"
/usr/bin/python3 - "$tmp/r.json" "$w" <<'PY' || fail "the JSON report has no warnings list with the core warning"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
assert any(sys.argv[2] in w for w in runs[0]["warnings"]), runs[0].get("warnings")
PY
q "UPDATE system_info SET value='SkylakeX' WHERE run=1 AND key='blas_core'"
"$NNBENCH" show 1 --db "$db" >"$tmp/show" || fail "show failed"
grep -q "Warning: the BLAS core" "$tmp/show" && { grep Warning "$tmp/show"; fail "a core at least as strong as the ISA warned"; }

echo "perf_show.sh: a run stored without a bandwidth keeps the columns, with -"
q "DELETE FROM system_info WHERE run=1 AND key IN ('calib_bw_gbs', 'calib_peak_gflops')"
"$NNBENCH" show 1 --db "$db" --ops 30 >"$tmp/show" || fail "show of the older run failed"
grep -q '^  name .*FLOP/B  *% bw  *bound' "$tmp/show" || fail "the older run lost its % bw / bound columns"
grep -Eq '^  dense\.fwd .* - +- *$' "$tmp/show" || { cat "$tmp/show"; fail "the older run's dense.fwd has no '-' in % bw and bound"; }
grep -q '% bw, bound: - (no memory bandwidth stored with this run' "$tmp/show" || fail "show does not say why they are -"
echo "perf_show.sh: ok"
