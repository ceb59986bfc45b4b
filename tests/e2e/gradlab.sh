#!/bin/sh
# gradlab.sh — samples/gradient-lab.ini briefly, end to end: every variant stores the layer
# telemetry (one grad_norm/grad_mean/grad_std/grad_max/update_ratio series per parameter
# tensor, zero_frac per activation layer, a point at every log step), reports carry the
# per-layer gradient-norm chart, and the workbench's Layers tab draws it (tmux).
# Needs $NNBENCH and $NNBENCH_TOP (set by tests/run.sh), sqlite3 and tmux.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
top=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
. "$top/tests/e2e/lib/tmux.sh"
tmux_server gradlab
# (instead of lib/tmux.sh's fail: the last command's errors, then the screen if there is one)
fail() { echo "gradlab.sh: FAIL: $*" >&2; [ -f "$tmp/err" ] && cat "$tmp/err" >&2; echo "---- last screen ----" >&2; cap >&2; exit 1; }
db="$tmp/g.db"
q() { sqlite3 "$db" "$1"; }

# 30 steps on 600 images, a log step every 10: steps 10, 20, 30.
"$NNBENCH" run "$top/samples/gradient-lab.ini" --db "$db" --set data.n=600 --set data.n_test=200 \
    --set train.max_steps=30 --set train.log_every=10 >"$tmp/out" 2>"$tmp/err" || fail "run failed"
runs=$(q "select count(*) from runs where status='finished'")
[ "$runs" -eq 6 ] || fail "expected 6 finished runs (one per variant), got $runs"

for run in $(q "select id from runs order by id"); do
    v=$(q "select variant from runs where id=$run")
    for stat in grad_norm grad_mean grad_std grad_max update_ratio; do
        n=$(q "select count(distinct key) from metrics where run=$run and key like '$stat/%'")
        [ "$n" -eq 16 ] || fail "run $run ($v): $n $stat series, expected 16 (8 dense layers x W, b)"
    done
    for l in 1 2 3 4 5 6 7 8; do
        for t in W b; do
            n=$(q "select count(*) from metrics where run=$run and key='grad_norm/dense$l.$t'")
            [ "$n" -eq 3 ] || fail "run $run ($v): grad_norm/dense$l.$t has $n points, expected 3 (steps 10, 20, 30)"
        done
    done
    z=$(q "select count(distinct key) from metrics where run=$run and key like 'zero_frac/%'")
    [ "$z" -eq 7 ] || fail "run $run ($v): $z zero_frac series, expected 7 (the tanh layers)"
    bad=$(q "select count(*) from metrics where run=$run and key like 'grad_norm/%' and not (value > 0)")
    [ "$bad" -eq 0 ] || fail "run $run ($v): $bad grad_norm points are not positive"
done
# clip_norm (threshold 1) bounds the update Adam sees only through its moments; the raw
# gradient stored is the same kind of number in every variant: telemetry is pre-transform.
n=$(q "select count(*) from metrics m join runs r on r.id=m.run where r.variant='adam-clip' and m.key='grad_norm/dense1.W' and m.step=10")
[ "$n" -eq 1 ] || fail "adam-clip: no grad_norm/dense1.W at step 10"
echo "gradlab.sh: telemetry stored: 6 runs x 16 tensors x 5 statistics + 7 zero_frac"

"$NNBENCH" report 1 2 -o "$tmp/r.html" --db "$db" >/dev/null 2>"$tmp/err" || fail "report failed"
grep -q 'Gradient norm per layer' "$tmp/r.html" || fail "report has no per-layer gradient-norm chart"
grep -q 'dense8.W' "$tmp/r.html" || fail "report's layer chart has no dense8.W row"
echo "gradlab.sh: report has the per-layer gradient-norm chart"

# ---- the workbench: Layers tab of the newest run, then a telemetry key as Compare's metric
command -v tmux >/dev/null 2>&1 || fail "tmux is not installed"
limit=20
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=60
$T new-session -d -s t -n w -x 120 -y 45 \
    "cd '$top' && NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'; sleep 60" || fail "cannot start tmux"
$T set -g escape-time 0 >/dev/null
wait_for "sgd-znorm"
keys Enter
wait_for "Curves   Profile   Solver   Config   System   Layers"
keys Tab Tab Tab Tab Tab
wait_for "Layers: log10 grad_norm per tensor against step"
wait_for "scale: log10"
wait_for "dense8.W"
wait_for "update_ratio"
keys End
wait_for "dense8.b"
keys v
wait_for "Layers: grad_mean per tensor"
keys v v v v
wait_for "Layers: zero_frac per activation layer"
echo "gradlab.sh: the Layers tab draws the heat map, its legend and the table; v cycles the statistic"
keys Escape
wait_for "Enter open"
keys Space Down Space c
wait_for "metric: train_loss"
keys v v v v
wait_for "metric: grad_max/dense1.W"
echo "gradlab.sh: Compare charts a layer telemetry key"
keys q
echo "gradlab.sh: ok"
