#!/bin/sh
# bench_quick.sh — runs `tests/bench/run.sh BUILD --quick` (what `make bench-quick` does) and
# checks the SHAPE of its table, never its numbers: the header names the date, CPU, OpenBLAS
# core and the environment as set; the rows of sections 1, 3, 5, 6 (4 when store_bench is
# built, 7 graphs and MaxK, 8 the input pipeline, 9 MPI when mpirun is there, 10 int8 when
# quant_bench is, 11 the gradient lab when grad_bench is, 12 the monitor when monitor_bench
# is, 13 diff when diff_bench is, 14 the conv algorithms when conv_bench is) are present;
# every median and min..max is numeric with min <= median <= max; goals carry a verdict;
# and mlp_bench at 2 threads prints the core-to-core round trip.
set -u
if [ "${NNBENCH_SANITIZED:-0}" = 1 ]; then
    echo "bench_quick: skipped under sanitizers (timings under ASan say nothing, and the"
    echo "bench_quick: full-size MLP epochs would take minutes there)"
    exit 0
fi
top=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
bindir=$(dirname "${NNBENCH:-$top/build/nnbench}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "bench_quick: FAIL: $*" >&2; echo "---- output:" >&2; cat "$tmp/out" >&2; exit 1; }

for b in mlp_bench newton_bench scaling_bench; do
    [ -x "$bindir/bench/$b" ] || fail "$bindir/bench/$b is not built (make tests builds it)"
done
t0=$(date +%s)
sh "$top/tests/bench/run.sh" "$bindir" --quick >"$tmp/out" 2>"$tmp/err" || {
    cat "$tmp/err" >&2; fail "run.sh --quick exited non-zero"; }
echo "bench_quick: run.sh --quick took $(( $(date +%s) - t0 )) s"

grep -q '^nnbench bench (quick) — [0-9]\{4\}-[0-9][0-9]-[0-9][0-9] ' "$tmp/out" || fail "no dated title line"
grep -q '^CPU: .*, [0-9]* cores; OpenBLAS core in use: [A-Za-z0-9]' "$tmp/out" || fail "no CPU / OpenBLAS core line"
want="OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
grep -q "^Environment: .*$want" "$tmp/out" || fail "environment line does not show $want as set"
for v in OPENBLAS_NUM_THREADS OMP_NUM_THREADS OPENBLAS_L2_SIZE; do
    grep -q "^Environment: .*$v=" "$tmp/out" || fail "environment line lacks $v"
done
grep -q '^| # | row | median | min..max | absolute (medians) | goal | verdict |$' "$tmp/out" || fail "no table header"
grep -q '^GEMM-only bound of the MLP step, 1T: openblas .*, onednn .*, chosen .* samples/s; the engine: ' "$tmp/out" \
    || fail "the header does not print each backend's GEMM-only bound"
grep -q '^OpenBLAS core choice: .' "$tmp/out" || fail "the header does not print the core choice"

# Rows: | sec | label | median | min..max | absolute | goal | verdict |
grep '^| [0-9][0-9]* |' "$tmp/out" >"$tmp/rows"
for label in "nnbench / bare loop, 1T" "nnbench / GEMM-only bound of the fastest backend, 1T" \
             "bare loop / GEMM-only bound of the fastest backend, 1T" \
             "nnbench profiler on / off (time), 1T" "GEMM calls: in the step / alone (time), 1T" \
             "time outside the GEMM calls / step time, 1T" "Newton step / gradient step, block n=256" \
             "solve time vs n, fitted exponent" "step time vs parameters, fitted exponent" \
             "peak memory vs parameters, fitted exponent"; do
    grep -qF "| $label |" "$tmp/rows" || fail "row '$label' missing"
done
if [ -x "$bindir/bench/store_bench" ]; then
    for label in "store: metric points/s (batched) / 500k goal" "store: compare read of" "store: list of"; do
        grep -qF "| $label" "$tmp/rows" || fail "store row '$label' missing (store_bench is built)"
    done
fi
if [ -x "$bindir/bench/pipeline_bench" ]; then
    for label in "data: gz IDX decode / cache load (Fashion-MNIST)" "data.wait / step time, prefetch depth 2, source at ~compute rate"; do
        grep -qF "| $label |" "$tmp/rows" || fail "pipeline row '$label' missing"
    done
fi
if command -v mpirun >/dev/null; then
    for label in "all-reduce of 940584 bytes, 2 ranks: measured / alpha-beta model" \
                 "Fashion MLP samples/s: 2 ranks x 1T (dist.balance = measured) / 1 process x 1T" \
                 "Fashion MLP samples/s: 2 ranks x 1T (dist.balance = even, the default) / 1 process x 1T" \
                 "Fashion MLP samples/s: 2 ranks x 1T (measured) / 1 process x 2T" \
                 "the ceiling plus the all-reduce alone (no waits) / 1 process x 1T"; do
        grep -qF "| $label |" "$tmp/rows" || fail "MPI row '$label' missing"
    done
fi
if [ -x "$bindir/bench/quant_bench" ]; then
    for label in "checkpoint write / training time, Fashion MLP" "model bytes int8 / fp32, Fashion MLP" \
                 "model bytes int8 / fp32, Fashion CNN" "test accuracy drop fp32 - int8, points, spirals-mlp/adam" \
                 "int8 / fp32 inference samples/s, Fashion MLP, batch 128, 1T" \
                 "int8 / fp32 inference samples/s, Fashion MLP, batch 1, 1T"; do
        grep -qF "| $label" "$tmp/rows" || fail "int8 row '$label' missing (quant_bench is built)"
    done
fi
if [ -x "$bindir/bench/grad_bench" ]; then
    for t in znorm centralize clip_norm clip_value "telemetry (log_every 50)"; do
        grep -qF "| gradient $t: step on / off" "$tmp/rows" || fail "gradient row '$t' missing (grad_bench is built)"
    done
fi
if [ -x "$bindir/bench/monitor_bench" ]; then
    for label in "Prometheus /metrics scraped every 100 ms: training time on / off" \
                 "live TensorBoard event files: training time on / off"; do
        grep -qF "| $label |" "$tmp/rows" || fail "monitor row '$label' missing (monitor_bench is built)"
    done
fi
if [ -x "$bindir/bench/diff_bench" ]; then
    grep -qF "| nnbench diff A B, two runs of 10k steps" "$tmp/rows" || fail "diff row missing (diff_bench is built)"
fi
if [ -x "$bindir/bench/conv_bench" ]; then
    for label in "conv 16x28x28->16 k3 p1, batch 32: multiplications direct / F(2x2,3x3)" \
                 "conv 32x14x14->32 k3 p1, batch 32: time im2col / winograd (fwd + bwd)" \
                 "conv 16x28x28->16 k3 p1, batch 32: time im2col / winograd4 (fwd + bwd)" \
                 "conv 16x28x28->16 k5 p2, batch 32: time im2col / fft (fwd + bwd)" \
                 "conv 16x28x28->16 k7 p3, batch 32: time im2col / fft (fwd + bwd)" \
                 "conv 6x12x12->16 k5 p0, batch 32: time im2col / onednn blocked (fwd + bwd)" \
                 "conv 1x28x28->6 k5 p0, batch 32: onednn plain GFLOP/s / GEMM rate" \
                 "conv 1x28x28->6 k5 p0, batch 32 (first layer: no dx): fastest algorithm GFLOP/s / GEMM rate" \
                 "conv 6x12x12->16 k5 p0, batch 32: fastest algorithm GFLOP/s / GEMM rate"; do
        grep -qF "| $label |" "$tmp/rows" || fail "conv row '$label' missing (conv_bench is built)"
    done
fi
bad=$(awk -F' [|] ' '
    function num(x) { return x ~ /^-?[0-9]+(\.[0-9]+)?$/ }
    { sec = $1; sub(/^[|] /, "", sec); split($4, mm, /\.\./)
      if (!num($3) || !num(mm[1]) || !num(mm[2]) || mm[1] + 0 > $3 + 0 || $3 + 0 > mm[2] + 0) print "numbers: " $0
      else if (sec !~ /^([1-9]|1[0-4])$/) print "section: " $0
      else if ($6 != "-" && $7 !~ /^(met|MISSED|off|info|peer)/) print "verdict: " $0 }' "$tmp/rows")
[ -z "$bad" ] || fail "malformed rows:
$bad"
n=$(wc -l <"$tmp/rows")
[ "$n" -ge 8 ] || fail "only $n rows"
echo "bench_quick: table shape ok ($n rows)"

# The full bench's 2-thread reps print the core-to-core round trip they started on (the
# quick one runs 1 thread only): a short 2-thread run must too, as a positive number, or,
# when a loaded machine never gave the two threads two CPUs at once, say it was not measured
# (never a NaN figure).
"$bindir/bench/mlp_bench" --quick --threads 2 --reps 1 --n-train 1280 >"$tmp/out" 2>"$tmp/err" || {
    cat "$tmp/err" >&2; fail "mlp_bench --threads 2 exited non-zero"; }
grep -Eq "^ENV	core_round_trip_2T	(median [1-9][0-9]* ns \([0-9]+\.\.[0-9]+\) at the start of 1 of 1 reps|not measured in any rep: )" "$tmp/out" ||
    fail "mlp_bench at 2 threads does not print the core-to-core round trip: $(grep core_round_trip "$tmp/out")"
echo "bench_quick: 2-thread round trip line ok ($(grep core_round_trip "$tmp/out" | cut -f3 | cut -c1-40))"
# ... and what the training thread waited at the pool's joins: a positive number of jobs a
# step and a wait of 0 or more (eng_run_result.pool).
grep -E "^ROW	1	the training thread's waits at the pool's joins / step time, 2T	[0-9.]+	" "$tmp/out" |
    grep -Eq "	[1-9][0-9]*\.[0-9] jobs a step split over the threads; at their ends the training thread waited [0-9]+\.[0-9] us of a [1-9][0-9]* us step" ||
    fail "mlp_bench at 2 threads: no row of the pool's joins: $(grep "pool's joins" "$tmp/out")"
echo "bench_quick: 2-thread row of the pool's joins ok"
# Forced: both threads on one CPU never run at once.
taskset -c 0 "$bindir/bench/mlp_bench" --quick --threads 2 --reps 1 --n-train 1280 >"$tmp/out" 2>"$tmp/err" || {
    cat "$tmp/err" >&2; fail "mlp_bench --threads 2 on one CPU exited non-zero"; }
grep -q "^ENV	core_round_trip_2T	not measured in any rep: the two threads did not get two CPUs at once" "$tmp/out" ||
    fail "mlp_bench on one CPU: $(grep core_round_trip "$tmp/out")"
echo "bench_quick: on one CPU, 'not measured' ok"
