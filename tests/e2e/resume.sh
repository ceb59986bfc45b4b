#!/bin/sh
# resume.sh — checkpoints and resume: a run killed with SIGKILL mid-epoch, resumed with
# `nnbench resume`, ends with the same curve and final loss as an uninterrupted run of the
# same seed (bit-identical at 1 thread); `show` lists the checkpoints; `eval` reproduces
# the stored test loss; a Ctrl-C'd run resumes too; bad requests are refused.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-resume.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && cat "$T/out" >&2; exit 1; }

# Many short epochs with checkpoints every 100 steps (epochs are 50 steps: 1600/32), so
# the kill lands between checkpoints and inside an epoch.
cat >"$T/exp.ini" <<'INI'
[experiment]
name = resume-test
seed = 11
[data]
source = spirals
n = 2000
[model]
layers = dense:64:tanh, dense:64:tanh, dense:2
[train]
optimizer = adam
lr = 0.005
batch = 32
epochs = 400
log_every = 7
eval_every = 0
threads = 1
checkpoint_every = 130
INI
"$NNBENCH" run "$T/exp.ini" --db "$T/clean.db" >"$T/out" 2>&1 || fail "clean run"

"$NNBENCH" run "$T/exp.ini" --db "$T/killed.db" >"$T/run.out" 2>&1 &
pid=$!
i=0
while :; do
    n=$(sqlite3 "$T/killed.db" "SELECT count(*) FROM checkpoints" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge 1 ] && break
    i=$((i+1)); [ $i -ge 600 ] && fail "no checkpoint appeared in 60 s"
    sleep 0.1
done
sleep 0.2
kill -9 "$pid" 2>/dev/null || fail "the run ended before it could be killed: make it longer"
wait "$pid" 2>/dev/null
pid=
steps=$(sqlite3 "$T/killed.db" "SELECT max(step) FROM metrics")
ck=$(sqlite3 "$T/killed.db" "SELECT max(step) FROM checkpoints")
echo "killed at about step $steps, last checkpoint at step $ck"
"$NNBENCH" resume 1 --db "$T/killed.db" >"$T/out" 2>&1 || fail "resume after kill -9"
[ "$(sqlite3 "$T/killed.db" "SELECT status FROM runs WHERE id=1")" = finished ] || fail "resumed run not finished"
[ "$(sqlite3 "$T/killed.db" "SELECT count(*) FROM runs")" = 1 ] || fail "resume added a run instead of continuing run 1"

# Every logged value but throughput (timing) is equal, bit for bit (printed as %.17g).
q="SELECT key, step, epoch, printf('%.17g', value) FROM metrics WHERE run=1 AND key != 'samples_per_s' ORDER BY key, step"
sqlite3 "$T/clean.db" "$q" >"$T/clean.txt"
sqlite3 "$T/killed.db" "$q" >"$T/resumed.txt"
[ -s "$T/clean.txt" ] || fail "no metrics in the clean run"
cmp -s "$T/clean.txt" "$T/resumed.txt" || { diff "$T/clean.txt" "$T/resumed.txt" | head -20; fail "resumed curve differs from the clean run"; }
s="SELECT printf('%.17g|%.17g|%.17g|%d|%d', final_train_loss, final_test_loss, final_test_acc, steps, epochs) FROM runs WHERE id=1"
[ "$(sqlite3 "$T/clean.db" "$s")" = "$(sqlite3 "$T/killed.db" "$s")" ] || fail "final loss differs: $(sqlite3 "$T/clean.db" "$s") vs $(sqlite3 "$T/killed.db" "$s")"

# show lists the checkpoints with their size; eval gives the stored test loss again.
"$NNBENCH" show 1 --db "$T/killed.db" >"$T/out" 2>&1 || fail "show"
grep -q "checkpoints" "$T/out" || fail "show has no checkpoints line"
"$NNBENCH" eval 1 --db "$T/clean.db" --json >"$T/out" 2>&1 || fail "eval"
want=$(sqlite3 "$T/clean.db" "SELECT printf('%.6g', final_test_loss) FROM runs WHERE id=1")
got=$(python3 -c "import json,sys; print(repr(json.load(open(sys.argv[1]))['loss']))" "$T/out")
[ "$(printf '%.6g' "$got")" = "$want" ] || fail "eval loss $got, stored test loss $want"

# Refusals: a finished run, a run without checkpoints, an unknown run.
"$NNBENCH" resume 1 --db "$T/clean.db" >"$T/out" 2>&1 && fail "resume of a finished run accepted"
grep -q "finished" "$T/out" || fail "no reason given for refusing a finished run"
"$NNBENCH" resume 99 --db "$T/clean.db" >"$T/out" 2>&1 && fail "resume of a missing run accepted"

# A corrupt checkpoint is refused by its checksum, and nothing is written.
cp "$T/killed.db" "$T/bad.db"
sqlite3 "$T/bad.db" "UPDATE runs SET status='crashed' WHERE id=1;
  UPDATE checkpoints SET data = substr(data, 1, 100) || zeroblob(1) || substr(data, 102) WHERE run=1"
"$NNBENCH" resume 1 --db "$T/bad.db" >"$T/out" 2>&1 && fail "corrupt checkpoint accepted"
grep -q "checksum" "$T/out" || fail "corrupt checkpoint: no checksum message"
[ "$(sqlite3 "$T/bad.db" "SELECT status FROM runs WHERE id=1")" = crashed ] || fail "a refused resume changed the run"
echo "resume: ok"
