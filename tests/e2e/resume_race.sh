#!/bin/sh
# resume_race.sh — two `nnbench resume` of one interrupted run: B passes its status check
# and is held there (the NNBENCH_TEST_HOLD_RESUME hook, tui/runner_resume.c) while A resumes
# the run to the end; let go, B finds the run finished when it comes to reopen it, says so,
# exits 1 and changes nothing: not the status, not one of A's points.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-race.XXXXXX)
pid=; bpid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; [ -n "$bpid" ] && kill -9 "$bpid" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$T/out" "$T/b.out"; do [ -f "$f" ] && cat "$f" >&2; done; exit 1; }
DB="$T/r.db"
# wait_for FILE-TEST WHAT: up to 60 s
wait_for() { i=0; until eval "$1"; do i=$((i+1)); [ $i -ge 600 ] && fail "waited 60 s for $2"; sleep 0.1; done; }

cat >"$T/exp.ini" <<'INI'
[experiment]
name = resume-race
seed = 5
[data]
source = spirals
n = 2000
[model]
layers = dense:32:tanh, dense:32:tanh, dense:2
[train]
optimizer = adam
lr = 0.005
batch = 32
epochs = 1500
log_every = 10
eval_every = 0
threads = 1
checkpoint_every = 500
INI
"$NNBENCH" run "$T/exp.ini" --db "$DB" >"$T/out" 2>&1 &
pid=$!
wait_for '[ "$(sqlite3 "$DB" "SELECT count(*) FROM checkpoints" 2>/dev/null || echo 0)" -ge 1 ]' "a checkpoint"
kill -INT "$pid"
wait "$pid"; rc=$?; pid=
[ $rc = 130 ] || fail "the run stopped by SIGINT exited $rc"
[ "$(sqlite3 "$DB" "SELECT status FROM runs WHERE id=1")" = interrupted ] || fail "the run is not interrupted"

# B: checked, loaded, held before it reopens the run.
NNBENCH_TEST_HOLD_RESUME="$T/go" "$NNBENCH" resume 1 --db "$DB" >"$T/b.out" 2>&1 &
bpid=$!
wait_for '[ -e "$T/go.held" ]' "resume B to pass its status check"
# A: resumes the same run to the end meanwhile.
"$NNBENCH" resume 1 --db "$DB" >"$T/out" 2>&1 || fail "resume A"
[ "$(sqlite3 "$DB" "SELECT status FROM runs WHERE id=1")" = finished ] || fail "resume A did not finish the run"
q="SELECT status, steps, (SELECT count(*) || ':' || max(step) || ':' || printf('%.17g', sum(value)) FROM metrics
   WHERE run=1) FROM runs WHERE id=1"
after_a=$(sqlite3 "$DB" "$q")
touch "$T/go"
wait "$bpid"; rc=$?; bpid=
[ $rc = 1 ] || fail "resume B exited $rc, not 1"
grep -q "run 1 is already finished.*nothing resumed" "$T/b.out" || fail "resume B did not say why it resumed nothing"
[ "$(sqlite3 "$DB" "$q")" = "$after_a" ] || fail "resume B changed the finished run: $(sqlite3 "$DB" "$q") (was $after_a)"
echo "resume_race: ok"
