#!/bin/sh
# dist_trust.sh — data-parallel ranks that disagree or fail (issue 22 #7, #14, #15): ranks
# with different resolved configs (lr, seed, optimizer, balance, batch) stop before the
# first step, the stored run is failed with the first differing key and both values, and
# mpirun exits non-zero; a rank that cannot load its data has its message on the console
# and in the stored run at once; the agreement waits dist.timeout_s, not 30 s; a killed
# rank 0 leaves its run recorded as crashed (by a surviving rank), not 'running'.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-dist-trust.XXXXXX)
mp=
trap '[ -n "$mp" ] && kill -9 "$mp" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && tail -n 20 "$T/out" >&2; exit 1; }
ok() { echo "ok: $*"; }
. "$NNBENCH_TOP/tests/e2e/lib/mpi.sh"

cat >"$T/e.ini" <<'EOF2'
[experiment]
seed = 5
[data]
source = blobs
n = 3000
classes = 4
features = 8
[model]
layers = dense:32:tanh, dense:4
[train]
optimizer = momentum
lr = 0.05
batch = 128
max_steps = 40
threads = 1
EOF2
error_of() { sqlite3 "$1" "SELECT status || ': ' || error FROM runs WHERE id=1"; }

# #7: rank 1 with another value of one key; rank 0 names it with both values
for kv in "train.lr=0.1:'0.05' on rank 0 but '0.1' on rank 1" "experiment.seed=6:'5' on rank 0 but '6' on rank 1" \
          "train.optimizer=adam:'momentum' on rank 0 but 'adam' on rank 1" \
          "dist.balance=measured:'even' on rank 0 but 'measured' on rank 1" "train.batch=64:'128' on rank 0 but '64' on rank 1"; do
    set_=${kv%%:*}; want=${kv#*:}; key=${set_%%=*}
    db="$T/d-$key.db"
    t0=$(date +%s)
    $MPIRUN -np 1 "$NNBENCH" run "$T/e.ini" --db "$db" : -np 1 "$NNBENCH" run "$T/e.ini" --db "$db" --set "$set_" \
        >"$T/out" 2>&1 && fail "$key differs between the ranks: mpirun exited 0"
    dt=$(( $(date +%s) - t0 ))
    e=$(error_of "$db")
    case "$e" in
    "failed: before the first step: mpi: the ranks' configurations differ: $key is $want"*) ;;
    *) fail "$key differs: stored '$e'" ;;
    esac
    grep -q "the ranks' configurations differ: $key is $want" "$T/out" || fail "$key differs: not on the console"
    [ "$(sqlite3 "$db" 'SELECT count(*) FROM metrics')" = 0 ] || fail "$key differs: a step was trained"
    ok "$key differs between the ranks: refused before the first step in $dt s, stored failed, mpirun non-zero"
done

# #14: rank 1 cannot load its data (data.path relative to each rank's directory): its
# message is on the console and in the stored run, without waiting out a timeout
mkdir -p "$T/a" "$T/b"
awk 'BEGIN { srand(1); print "x1,x2,y"; for (i = 0; i < 300; i++) printf "%f,%f,%d\n", rand(), rand(), i % 2 }' >"$T/a/d.csv"
printf '[data]\nsource = csv\n[model]\nlayers = dense:8:tanh, dense:2\n[train]\nmax_steps = 20\n' >"$T/c.ini"
t0=$(date +%s)
$MPIRUN -np 1 -wdir "$T/a" "$NNBENCH" run "$T/c.ini" --db "$T/c.db" --set data.path=d.csv : \
        -np 1 -wdir "$T/b" "$NNBENCH" run "$T/c.ini" --db "$T/c.db" --set data.path=d.csv >"$T/out" 2>&1 &&
    fail "rank 1 without data: mpirun exited 0"
dt=$(( $(date +%s) - t0 ))
grep -q "mpi: rank 1 could not start: d.csv: cannot open: No such file or directory" "$T/out" || fail "rank 1's error not on the console"
e=$(error_of "$T/c.db")
[ "$e" = "failed: before the first step: mpi: rank 1 could not start: d.csv: cannot open: No such file or directory" ] ||
    fail "rank 1's error not stored: '$e'"
[ $dt -lt 20 ] || fail "rank 1's error took $dt s to arrive"
ok "rank 1 without data: its message on the console and stored ($dt s)"
# rank 1 whose experiment does not load at all
$MPIRUN -np 1 "$NNBENCH" run "$T/e.ini" --db "$T/m.db" : -np 1 "$NNBENCH" run "$T/missing.ini" --db "$T/m.db" >"$T/out" 2>&1 &&
    fail "rank 1 without an experiment: mpirun exited 0"
e=$(error_of "$T/m.db")
case "$e" in "failed: before the first step: mpi: rank 1 could not start: $T/missing.ini: cannot open"*) ;;
*) fail "rank 1 without an experiment: stored '$e'" ;; esac
ok "rank 1 without an experiment: rank 0 stores its message"

# #14: a rank that never arrives (still building a graph of 2*10^7 nodes, many seconds):
# the agreement gives up after dist.timeout_s = 2, not the 30 s it waited before
t0=$(date +%s)
$MPIRUN -np 1 "$NNBENCH" run "$T/e.ini" --db "$T/t.db" --set dist.timeout_s=2 : -np 1 "$NNBENCH" run \
    "$NNBENCH_TOP/samples/graphsage-sbm.ini" --variant fused --no-db --set graph.nodes=20000000 --set graph.degree=2 \
    --set graph.features=1 --set graph.classes=2 --set model.layers=sage:2 --set graph.fanouts=2 \
    --set graph.partition=none >"$T/out" 2>&1 && fail "a rank that never arrived: mpirun exited 0"
dt=$(( $(date +%s) - t0 ))
e=$(error_of "$T/t.db")
case "$e" in *"the agreement before the first step on rank 0: the other ranks did not answer in 2 s"*) ;;
*) fail "timeout: stored '$e'" ;; esac
[ $dt -lt 15 ] || fail "the agreement took $dt s with dist.timeout_s = 2"
ok "a rank that does not arrive: failed after dist.timeout_s ($dt s)"

# #15: rank 0 killed mid-run: a surviving rank records its run as crashed
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/k.db" --set train.max_steps=100000000 --set train.log_every=50 >"$T/out" 2>&1 &
mp=$!
i=0
while :; do
    n=$(sqlite3 "$T/k.db" "SELECT count(*) FROM metrics" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge 20 ] && break
    i=$((i+1)); [ $i -ge 600 ] && fail "the 2-rank run did not start in 60 s"
    sleep 0.1
done
kill -9 "$(sqlite3 "$T/k.db" "SELECT pid FROM runs WHERE id=1")"
wait "$mp" && fail "mpirun exited 0 after rank 0 was killed"
mp=
# the raw row, not `nnbench list` (which infers crashed from a dead pid by itself)
st=$(sqlite3 "$T/k.db" "SELECT status FROM runs WHERE id=1")
[ "$st" = crashed ] || fail "rank 0 killed: the run is stored '$st', want crashed"
[ "$(sqlite3 "$T/k.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after rank 0 was killed"
ok "rank 0 killed: its run is recorded crashed ($(sqlite3 "$T/k.db" "SELECT error FROM runs WHERE id=1"))"
echo "dist_trust: ok"
