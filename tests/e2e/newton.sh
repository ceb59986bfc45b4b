#!/bin/sh
# newton.sh — end-to-end test of Newton / Q-Newton on samples/newton-vs-sgd.ini: Newton
# reaches the target loss in fewer steps than SGD (from `run --json`); quantum-routed solves
# (all of them, a kappa-threshold subset, and hybrid routing) do not wreck training; every
# solve is stored in solver_events, and each stored routing decision follows its rule.
# Which solves hybrid routes depends on this machine's measured Cholesky time, so the test
# pins the routing it counts on policy quantum / threshold (deterministic: kappa is a
# function of the weights), and for hybrid only checks the rule against the recorded
# predictions plus the training outcome (which must hold for any routing).
# Under NNBENCH_SANITIZED=1 the runs are cut to 100 steps (Newton needs ~60 here).
. "$(dirname "$0")/lib/check.sh"
# json_check PYTHON-EXPR DESCRIPTION: the expression over v (label -> summary) holds
json_check() {
    if python3 -c "import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$tmp/all.json"; then
        ok "$2"
    else
        bad "$2"; head -c 3000 "$tmp/all.json" | sed 's/^/  | /'; echo
    fi
}
# sql_zero QUERY DESCRIPTION: the count query returns 0
sql_zero() {
    c=$(sqlite3 "$db" "$1" 2>&1)
    if [ "$c" = 0 ]; then ok "$2"; else bad "$2 (got '$c')"; fi
}
cd "$TOP" || exit 1
# The scheduler's Cholesky cost model is calibrated into the cache: keep it in $tmp.
export XDG_CACHE_HOME="$tmp/cache"
steps=150
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && steps=100
db="$tmp/n.db"
# kappa_max 25 routes ~10 early solves quantum. Before the shift fix (the scheduler took any
# shift that let Cholesky through) exactly this run diverged: the perturbed trajectory met
# an indefinite block at step 21 whose shift left it near-singular (kappa 5e6), and the
# clipped step took the loss from 0.48 to 5.9 (19.8 at step 150).
kmax=25
# label variant [--set ...]
run() {
    label=$1 v=$2
    shift 2
    if "$NNBENCH" run samples/newton-vs-sgd.ini --variant "$v" --set train.max_steps=$steps "$@" \
        --db "$db" --json >"$tmp/$label.json" 2>"$tmp/$label.err"; then
        ok "run $label"
    else
        bad "run $label: exit $?"; sed 's/^/  stderr: /' "$tmp/$label.err" | head -5
    fi
    sed -n 's/.*stored as run \([0-9]*\) .*/\1/p' "$tmp/$label.err" >"$tmp/$label.id"
}
run sgd sgd
run newton newton
run quantum qnewton-quantum
run threshold qnewton-hybrid --set quantum.policy=threshold --set quantum.kappa_max=$kmax
run hybrid qnewton-hybrid
labels="sgd newton quantum threshold hybrid"
python3 - "$tmp" $labels <<'PY' >"$tmp/all.json" || bad "merging the JSON summaries"
import json, sys, os
out = {}
for l in sys.argv[2:]:
    try:
        out[l] = json.load(open(os.path.join(sys.argv[1], l + ".json")))["variants"][0]
        out[l]["run_id"] = int(open(os.path.join(sys.argv[1], l + ".id")).read())
    except Exception as e: print(l, e, file=sys.stderr)
json.dump(out, sys.stdout)
PY
json_check "v['newton']['steps_to_target'] is not None" "newton reaches the target loss"
json_check "v['sgd']['steps_to_target'] is None or v['newton']['steps_to_target'] < v['sgd']['steps_to_target']" \
    "newton needs fewer steps to the target than sgd"
json_check "v['newton']['solves'] == $steps * 6 and v['newton']['quantum_solves'] == 0" \
    "classical newton: 6 solves per step, none quantum"
json_check "abs(v['newton']['hybrid_s'] - v['newton']['wall_s']) < 1e-9" "classical newton: hybrid clock == wall clock"
json_check "v['quantum']['quantum_solves'] == v['quantum']['solves'] > 0" "policy quantum routes every solve"
json_check "v['quantum']['hybrid_s'] != v['quantum']['wall_s']" "the quantum route moves the hybrid clock"
# A QLSA output is the exact solution plus relative error eps = 1e-2: it must train like
# classical Newton, whichever solves take it.
json_check "v['quantum']['final_train_loss'] < 0.1 and v['quantum']['steps_to_target'] is not None" \
    "qnewton-quantum (every solve on the QLSA) trains"
json_check "0 < v['threshold']['quantum_solves'] < v['threshold']['solves']" \
    "policy threshold (kappa_max $kmax) routes some solves quantum, not all"
json_check "v['threshold']['final_train_loss'] < 0.1" "policy threshold trains"
json_check "v['hybrid']['final_train_loss'] < 0.1" "qnewton-hybrid trains (whatever this machine's timing routed)"

n=$(sqlite3 "$db" "select count(*) from solver_events" 2>&1)
want=$(python3 -c "import json; print(sum(x['solves'] for x in json.load(open('$tmp/all.json')).values()))")
if [ "$n" = "$want" ] && [ "$n" -gt 0 ]; then ok "solver events stored ($n rows)"
else bad "solver_events has '$n' rows, expected $want"; fi
q=$(sqlite3 "$db" "select count(*) from solver_events where route = 1" 2>&1)
wq=$(python3 -c "import json; print(sum(x['quantum_solves'] for x in json.load(open('$tmp/all.json')).values()))")
if [ "$q" = "$wq" ]; then ok "quantum-routed events stored ($q rows)"; else bad "route = 1 rows '$q', expected $wq"; fi
sql_zero "select count(*) from solver_events where residual > 1e-6 and route = 0" "classical solves have residual <= 1e-6"
# ||H e|| <= ||H|| ||e|| = kappa eps ||g|| for the QLSA's error e (and >= eps ||g|| / kappa)
sql_zero "select count(*) from solver_events where route = 1 and kappa_exact is not null and
          (residual > 0.01 * kappa_exact * 1.001 or residual < 0.01 / kappa_exact * 0.999)" \
    "quantum-routed residuals within [eps/kappa, eps*kappa] (blocks with exact kappa)"
thr=$(cat "$tmp/threshold.id") hyb=$(cat "$tmp/hybrid.id")
sql_zero "select count(*) from solver_events where run = ${thr:-0} and route != (kappa_used <= $kmax)" \
    "threshold: route = (kappa_used <= kappa_max) for every solve"
sql_zero "select count(*) from solver_events where run = ${hyb:-0} and
          route != (kappa_used <= 10000 and pred_quantum_ns < pred_classical_ns)" \
    "hybrid: route = (kappa_used <= kappa_max and predicted quantum < classical) for every solve"
h=$(python3 -c "import json; v=json.load(open('$tmp/all.json')); print(v['hybrid']['quantum_solves'], 'of', v['hybrid']['solves'])")
echo "note: hybrid routed $h solves quantum on this machine"

echo "newton.sh: $fails failed"
[ "$fails" -eq 0 ]
