#!/bin/sh
# tui_model.sh — the workbench's Resume and Quantize on the Run screen (issue 14), in a
# private tmux server: a CLI run stopped with SIGINT (interrupted, with its stop checkpoint)
# is resumed with R into the same run id and the database shows it finished; a finished
# spirals run is quantized with Q (200 calibration samples, percentile) and the Int8 tab
# shows fp32 against int8 with the int8 op profile while a quantizations row appears; a
# finished run and a run without a checkpoint say why Resume is not offered.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_model.sh: tmux is not installed"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "tui_model.sh: sqlite3 is not installed"; exit 1; }

tmp=$(mktemp -d)
sock="nnbench-test-model-$$"
T="tmux -L $sock -f /dev/null"
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; $T kill-server 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
db="$tmp/m.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
step() { echo "tui_model.sh: $1"; }
q() { sqlite3 -cmd ".timeout 10000" "$db" "$1"; }

step "run 1: a long CLI run stopped with SIGINT (interrupted, with a checkpoint)"
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=4000 --set train.checkpoint_every=500 --db "$db" \
    >"$tmp/r1.out" 2>"$tmp/r1.err" &
pid=$!
n=0
while [ "$(q "SELECT count(*) FROM checkpoints WHERE run=1" 2>/dev/null || echo 0)" -lt 1 ]; do
    n=$((n + 1)); [ $n -gt $((limit * 10)) ] && fail "run 1 took no checkpoint"
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/r1.err"; fail "run 1 ended before it was stopped"; }
    sleep 0.1
done
kill -INT "$pid"
wait "$pid"
pid=
[ "$(q "SELECT status FROM runs WHERE id=1")" = interrupted ] || fail "run 1 is not interrupted: $(q "SELECT status, error FROM runs")"
stopped_at=$(q "SELECT steps FROM runs WHERE id=1")
step "run 2: a finished spirals run (5 epochs); run 3: newton (no checkpoints), marked interrupted"
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=5 --db "$db" >"$tmp/r2.out" 2>&1 || fail "run 2"
"$NNBENCH" run "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --variant newton --set train.max_steps=3 --db "$db" \
    >"$tmp/r3.out" 2>&1 || fail "run 3"
[ "$(q "SELECT count(*) FROM checkpoints WHERE run=3")" = 0 ] || fail "the newton run has checkpoints"
q "UPDATE runs SET status='interrupted' WHERE id=3"

$T new-session -d -s t -n w -x 120 -y 40 \
    "cd '$NNBENCH_TOP' && NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'; echo NNBENCH-EXIT=\$?; sleep 120" ||
    fail "cannot start tmux"
$T set -g escape-time 0 >/dev/null
wait_for "3/3 runs"

open_run() { # open_run ID: filter the list to it and open it
    keys / C-u "id:$1" Enter
    wait_for "1/3 runs"
    keys Home Enter
    wait_for "Curves   Profile"
    wait_re "#$1 "
}
back() { keys Escape; wait_for "runs"; keys / C-u Enter; wait_for "3/3 runs"; }

step "the help screen lists R and Q"
keys '?'
wait_for "Keys on the Runs screen"
keys End
wait_for "resume this crashed, interrupted or failed run"
wait_for "int8-quantize this finished run"
keys Escape
wait_for "3/3 runs"

step "run 3 (no checkpoint): Resume is not offered, and says why"
open_run 3
keys R
wait_for "Resume not offered: run #3 has no checkpoint"
back

step "run 2 (finished): Resume is not offered, and says why"
open_run 2
keys R
wait_for "Resume not offered: run 2 is finished"

step "run 2: Q quantizes it (200 samples, percentile) on the worker thread"
keys Q
wait_for "calibration samples"
keys C-u 200 Enter
wait_for "scheme, minmax or percentile"
keys Enter
wait_for "Quantization #1: percentile, 200 calibration samples"
wait_for "int8/fp32"
wait_for "samples/s, batch 128"
wait_for "int8 path profile"
wait_for "gemm_s8"
wait_for "requantize"
[ "$(q "SELECT count(*) FROM quantizations WHERE run=2 AND calibrate=200 AND scheme='percentile'")" = 1 ] ||
    fail "no quantizations row for run 2"
[ "$(q "SELECT count(*) FROM quant_ops o JOIN quantizations z ON z.id=o.quant WHERE z.run=2 AND o.name='gemm_s8'")" -ge 1 ] ||
    fail "no gemm_s8 op row for the quantization"
back

step "run 1 (interrupted at step $stopped_at): R resumes it into the same run id"
open_run 1
wait_for "interrupted"
keys R
wait_for "Resume run #1 (interrupted) from its checkpoint at step"
keys y
n=0
while [ "$(q "SELECT status FROM runs WHERE id=1")" != finished ]; do
    n=$((n + 1)); [ $n -gt $((limit * 10)) ] && fail "run 1 did not finish after Resume ($(q "SELECT status, error FROM runs WHERE id=1"))"
    sleep 0.1
done
wait_for "finished"
[ "$(q "SELECT count(*) FROM runs")" = 3 ] || fail "Resume made a new run instead of continuing run 1"
total=$(q "SELECT total_steps FROM runs WHERE id=1")
[ "$(q "SELECT steps FROM runs WHERE id=1")" = "$total" ] || fail "run 1 did not run to its last step ($total)"
[ "$(q "SELECT max(step) FROM checkpoints WHERE run=1")" = "$total" ] || fail "run 1's final checkpoint is missing"
[ "$(q "SELECT count(*) FROM metrics WHERE run=1 AND key='train_loss'")" = $((total / 10)) ] ||
    fail "run 1's curve is not whole after Resume: $(q "SELECT count(*) FROM metrics WHERE run=1 AND key='train_loss'") train_loss points"
wait_for "resumed from step"

step "quit"
keys q
wait_for "NNBENCH-EXIT=0"
[ "$(q 'PRAGMA integrity_check')" = ok ] || fail "integrity"
echo "tui_model.sh: ok"
