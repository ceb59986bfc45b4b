#!/bin/sh
# resume_trust.sh — SIGTERM and SIGHUP stop a resume as they stop `run` (exit 143/129, a
# new checkpoint, stored as interrupted, resumable again). Two `nnbench resume` of one
# interrupted run: B passes its status check and is held there (the
# NNBENCH_TEST_HOLD_RESUME hook, tui/runner_resume.c) while A resumes the run to the end;
# let go, B finds the run finished when it comes to reopen it, says so, exits 1 and
# changes nothing: not the status, not one of A's points.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-resume2.XXXXXX)
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
checkpoint_every = 100000
INI
"$NNBENCH" run "$T/exp.ini" --db "$DB" >"$T/out" 2>&1 &
pid=$!
# Checkpoints only at the end and when stopped: each one below is a stop's.
wait_for '[ "$(sqlite3 "$DB" "SELECT count(*) FROM metrics" 2>/dev/null || echo 0)" -ge 3 ]' "the run to log"
kill -INT "$pid"
wait "$pid"; rc=$?; pid=
[ $rc = 130 ] || fail "the run stopped by SIGINT exited $rc"
[ "$(sqlite3 "$DB" "SELECT status FROM runs WHERE id=1")" = interrupted ] || fail "the run is not interrupted"

# A resume stopped by SIGTERM, then by SIGHUP: each takes a checkpoint past the last one
# and leaves the run interrupted, as `run` does.
for sig in TERM:143 HUP:129; do
    ck=$(sqlite3 "$DB" "SELECT max(step) FROM checkpoints WHERE run=1")
    "$NNBENCH" resume 1 --db "$DB" >"$T/out" 2>&1 &
    pid=$!
    wait_for '[ "$(sqlite3 "$DB" "SELECT count(*) FROM metrics WHERE run=1 AND step > $ck" 2>/dev/null || echo 0)" -ge 3 ]' \
        "the resume to log past step $ck"
    kill -"${sig%:*}" "$pid"
    wait "$pid"; rc=$?; pid=
    [ $rc = "${sig#*:}" ] || fail "resume stopped by SIG${sig%:*} exited $rc, not ${sig#*:}"
    [ "$(sqlite3 "$DB" "SELECT status FROM runs WHERE id=1")" = interrupted ] || fail "SIG${sig%:*}: the run is not interrupted"
    now=$(sqlite3 "$DB" "SELECT max(step) FROM checkpoints WHERE run=1")
    [ "$now" -gt "$ck" ] || fail "SIG${sig%:*}: no checkpoint after step $ck (newest: $now)"
    echo "resume stopped by SIG${sig%:*}: exit $rc, interrupted, checkpoint at step $now (was $ck)"
done

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
echo "resume_trust: ok"
