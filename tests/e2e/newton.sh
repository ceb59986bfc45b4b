#!/bin/sh
# newton.sh — end-to-end test of Newton / Q-Newton: on samples/newton-vs-sgd.ini Newton
# reaches the target loss in fewer steps than SGD (from `run --json`), the hybrid and
# quantum policies run and route as configured, and every solve is stored in solver_events.
# Under NNBENCH_SANITIZED=1 the runs are cut to 100 steps (Newton needs ~70 here).
set -u
NNBENCH=${NNBENCH:?set NNBENCH to the nnbench binary}
TOP=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
# json_check FILE PYTHON-EXPR DESCRIPTION: the expression over v (variant -> summary) holds
json_check() {
    if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); v={x['variant']: x for x in j['variants']}; sys.exit(0 if ($2) else 1)" "$1"; then
        ok "$3"
    else
        bad "$3"; head -c 2000 "$1" | sed 's/^/  | /'
    fi
}
cd "$TOP" || exit 1
# The scheduler's Cholesky cost model is calibrated into the cache: keep it in $tmp.
export XDG_CACHE_HOME="$tmp/cache"
steps=150
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && steps=100
db="$tmp/n.db"
for v in sgd newton qnewton-hybrid qnewton-quantum; do
    if "$NNBENCH" run samples/newton-vs-sgd.ini --variant "$v" --set train.max_steps=$steps \
        --db "$db" --json >"$tmp/$v.json" 2>"$tmp/$v.err"; then
        ok "run --variant $v"
    else
        bad "run --variant $v: exit $?"; sed 's/^/  stderr: /' "$tmp/$v.err" | head -5
    fi
done
python3 - "$tmp" <<'PY' >"$tmp/all.json" || bad "merging the JSON summaries"
import json, sys, os
out = {"variants": []}
for v in ["sgd", "newton", "qnewton-hybrid", "qnewton-quantum"]:
    try: out["variants"] += json.load(open(os.path.join(sys.argv[1], v + ".json")))["variants"]
    except Exception as e: print(e, file=sys.stderr)
json.dump(out, sys.stdout)
PY
json_check "$tmp/all.json" "v['newton']['steps_to_target'] is not None" "newton reaches the target loss"
json_check "$tmp/all.json" \
    "v['sgd']['steps_to_target'] is None or v['newton']['steps_to_target'] < v['sgd']['steps_to_target']" \
    "newton needs fewer steps to the target than sgd"
json_check "$tmp/all.json" "v['newton']['solves'] == $steps * 6 and v['newton']['quantum_solves'] == 0" \
    "classical newton: 6 solves per step, none quantum"
json_check "$tmp/all.json" "v['qnewton-quantum']['quantum_solves'] == v['qnewton-quantum']['solves'] > 0" \
    "policy quantum routes every solve"
json_check "$tmp/all.json" "v['qnewton-quantum']['hybrid_s'] != v['qnewton-quantum']['wall_s']" \
    "the quantum route moves the hybrid clock"
json_check "$tmp/all.json" "abs(v['newton']['hybrid_s'] - v['newton']['wall_s']) < 1e-9" \
    "classical newton: hybrid clock == wall clock"
json_check "$tmp/all.json" "v['qnewton-hybrid']['final_train_loss'] < 0.1" "qnewton-hybrid trains"

n=$(sqlite3 "$db" "select count(*) from solver_events" 2>&1)
want=$(python3 -c "import json; print(sum(x['solves'] for x in json.load(open('$tmp/all.json'))['variants']))")
if [ "$n" = "$want" ] && [ "$n" -gt 0 ]; then ok "solver events stored ($n rows)"
else bad "solver_events has '$n' rows, expected $want"; fi
q=$(sqlite3 "$db" "select count(*) from solver_events where route = 1" 2>&1)
wq=$(python3 -c "import json; print(sum(x['quantum_solves'] for x in json.load(open('$tmp/all.json'))['variants']))")
if [ "$q" = "$wq" ]; then ok "quantum-routed events stored ($q rows)"; else bad "route = 1 rows '$q', expected $wq"; fi
r=$(sqlite3 "$db" "select count(*) from solver_events where residual > 1e-6 and route = 0" 2>&1)
if [ "$r" = 0 ]; then ok "classical solves have residual <= 1e-6"; else bad "$r classical solves with residual > 1e-6"; fi

echo "newton.sh: $fails failed"
[ "$fails" -eq 0 ]
