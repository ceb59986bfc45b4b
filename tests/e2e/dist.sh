#!/bin/sh
# dist.sh — data-parallel training under mpirun (oversubscribed, as root too): 2 ranks x a
# global batch of 128 give the loss curve of one process with batch 128 (max difference
# < 1e-4 over 40 steps: only the order of float sums differs), 3 ranks (batches that do not
# divide, a last batch of 1 row) train the same way; rank 0 alone stores, with the world
# size and every rank's profile; fp16/int8 compression send fewer bytes and still train;
# a killed rank stops the others within seconds, the run stored as failed, db intact.
# Ranks with different resolved configs (lr, seed, optimizer, balance, batch) stop before
# the first step, the stored run failed with the first differing key and both values, and
# mpirun exits non-zero; a rank that cannot load its data has its message on the console
# and in the stored run at once; the agreement waits dist.timeout_s, not 30 s; a killed
# rank 0 leaves its run recorded as crashed (by a surviving rank), not 'running'.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-dist.XXXXXX)
mp=
trap '[ -n "$mp" ] && kill -9 "$mp" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && tail -n 20 "$T/out" >&2; exit 1; }
ok() { echo "ok: $*"; }
. "$NNBENCH_TOP/tests/e2e/lib/mpi.sh"

blobs_ini "$T/e.ini"
losses() { sqlite3 "$1" "SELECT step, printf('%.9f', value) FROM metrics WHERE key='train_loss' ORDER BY step"; }

"$NNBENCH" run "$T/e.ini" --db "$T/one.db" >"$T/out" 2>&1 || fail "one process"
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/two.db" >"$T/out" 2>&1 || fail "mpirun -np 2"
[ "$(sqlite3 "$T/two.db" 'SELECT count(*) FROM runs')" = 1 ] || fail "2 ranks stored more than one run"
[ "$(sqlite3 "$T/two.db" "SELECT value FROM params WHERE key='dist.world_size'")" = 2 ] || fail "world size not stored"
[ "$(sqlite3 "$T/two.db" 'SELECT status FROM runs')" = finished ] || fail "2-rank run not finished"
losses "$T/one.db" >"$T/l1"; losses "$T/two.db" >"$T/l2"
[ "$(wc -l <"$T/l1")" = 40 ] || fail "one process: $(wc -l <"$T/l1") loss points, want 40"
d=$(paste -d'|' "$T/l1" "$T/l2" | awk -F'|' '$1 != $3 { print "steps differ"; exit } { x = $2 - $4; if (x < 0) x = -x; if (x > m) m = x } END { printf "%.3g\n", m }')
awk -v d="$d" 'BEGIN { exit !(d + 0 < 1e-4) }' || fail "2 ranks vs 1 process: max |loss difference| = $d (want < 1e-4)"
ok "2 ranks x batch 128 = 1 process x 128 (max |loss difference| $d over 40 steps)"
grep -q "stored as run 1" "$T/out" || fail "rank 0 did not report"
[ "$(grep -c 'stored as run' "$T/out")" = 1 ] || fail "more than one rank talked to the console"

# 3 ranks: 128 rows split 42/43/43; blobs 321 -> 257 training rows: batches 128, 128, 1
# (two ranks get no row of the last batch).
$MPIRUN -np 3 "$NNBENCH" run "$T/e.ini" --db "$T/three.db" --profile >"$T/out" 2>&1 || fail "mpirun -np 3"
losses "$T/three.db" >"$T/l3"
d=$(paste -d'|' "$T/l1" "$T/l3" | awk -F'|' '{ x = $2 - $4; if (x < 0) x = -x; if (x > m) m = x } END { printf "%.3g\n", m }')
awk -v d="$d" 'BEGIN { exit !(d + 0 < 1e-4) }' || fail "3 ranks vs 1 process: max |loss difference| = $d"
for r in rank1 rank2; do
    [ "$(sqlite3 "$T/three.db" "SELECT count(*) FROM op_stats WHERE name='$r:allreduce'")" = 1 ] || fail "no $r profile stored"
done
[ "$(sqlite3 "$T/three.db" "SELECT calls FROM op_stats WHERE name='allreduce'")" = 40 ] || fail "allreduce not profiled per step"
ok "3 ranks train the same curve (max |difference| $d); rank1/rank2 profiles stored"
$MPIRUN -np 3 "$NNBENCH" run "$T/e.ini" --db "$T/tiny.db" --set data.n=321 --set train.max_steps=0 --set train.epochs=3 >"$T/out" 2>&1 ||
    fail "3 ranks with an empty shard"
"$NNBENCH" run "$T/e.ini" --db "$T/tiny1.db" --set data.n=321 --set train.max_steps=0 --set train.epochs=3 >"$T/out" 2>&1 || fail "tiny, 1 process"
[ "$(sqlite3 "$T/tiny.db" 'SELECT steps FROM runs')" = 9 ] || fail "3 epochs of 3 batches"
a=$(sqlite3 "$T/tiny.db" "SELECT final_train_loss FROM runs"); b=$(sqlite3 "$T/tiny1.db" "SELECT final_train_loss FROM runs")
awk -v a="$a" -v b="$b" 'BEGIN { x = a - b; if (x < 0) x = -x; exit !(x < 1e-4) }' || fail "empty shard: loss $a vs $b"
ok "a last batch of 1 row on 3 ranks (two empty shards): same loss as 1 process"

# dist.balance = measured: the shares follow each rank's time per row (with tens of
# microseconds per step here they move at every descheduling); whatever the split, the
# ranks train the one-process curve. Each rank's share is stored as batch_share/rankR
# (every log step; the shares of a step add up to 1, each at least a quarter of an even one).
# No rank meets a GEMM shape class that was not measured before the run (the run warns if
# one does: measured shares once moved a rank into such a class, served by OpenBLAS at half
# speed, and it then got ever fewer rows).
for np in 2 3; do
    $MPIRUN -np $np "$NNBENCH" run "$T/e.ini" --db "$T/bal$np.db" --set dist.balance=measured >"$T/out" 2>&1 ||
        fail "dist.balance = measured, $np ranks"
    losses "$T/bal$np.db" >"$T/lb"
    d=$(paste -d'|' "$T/l1" "$T/lb" | awk -F'|' '$1 != $3 { print "steps differ"; exit } { x = $2 - $4; if (x < 0) x = -x; if (x > m) m = x } END { printf "%.3g\n", m }')
    awk -v d="$d" 'BEGIN { exit !(d + 0 < 1e-4) }' || fail "balance = measured, $np ranks vs 1 process: max |loss difference| = $d"
    [ "$(sqlite3 "$T/bal$np.db" "SELECT count(DISTINCT key) FROM metrics WHERE key LIKE 'batch_share/rank%'")" = $np ] ||
        fail "balance = measured: want batch_share/rank0..$((np - 1))"
    bad=$(sqlite3 "$T/bal$np.db" "SELECT step FROM metrics WHERE key LIKE 'batch_share/%' GROUP BY step
        HAVING abs(sum(value) - 1) > 1e-9 OR count(*) != $np OR min(value) < 0.25 / $np - 1e-9 LIMIT 1")
    [ -z "$bad" ] || fail "balance = measured: the shares of step $bad are not a partition"
    ! grep -q "no calibration measured" "$T/out" || fail "balance = measured, $np ranks: a rank's rows met an unprepared GEMM class"
    range=$(sqlite3 "$T/bal$np.db" "SELECT printf('%.3f..%.3f', min(value), max(value)) FROM metrics WHERE key LIKE 'batch_share/%'")
    ok "balance = measured, $np ranks: the one-process curve (max |difference| $d), shares $range"
done

# dist.bucket_kb: all-reduces started during backward, one per KB of finished gradients
# (a 3-layer model: 3 buckets per step), give the one-process curve on 3 ranks, also with
# ranks that have no rows of a last batch (they must start the same buckets).
L="dense:64:tanh, dense:64:tanh, dense:4"
"$NNBENCH" run "$T/e.ini" --db "$T/b1.db" --set model.layers="$L" >"$T/out" 2>&1 || fail "3 layers, 1 process"
$MPIRUN -np 3 "$NNBENCH" run "$T/e.ini" --db "$T/b3.db" --profile --set model.layers="$L" --set dist.bucket_kb=1 >"$T/out" 2>&1 ||
    fail "dist.bucket_kb = 1, 3 ranks"
losses "$T/b1.db" >"$T/lb1"; losses "$T/b3.db" >"$T/lb3"
d=$(paste -d'|' "$T/lb1" "$T/lb3" | awk -F'|' '$1 != $3 { print "steps differ"; exit } { x = $2 - $4; if (x < 0) x = -x; if (x > m) m = x } END { printf "%.3g\n", m }')
awk -v d="$d" 'BEGIN { exit !(d + 0 < 1e-4) }' || fail "buckets, 3 ranks vs 1 process: max |loss difference| = $d"
[ "$(sqlite3 "$T/b3.db" "SELECT bytes / calls FROM op_stats WHERE name='allreduce'")" = \
  $(( 4 * ($(sqlite3 "$T/b3.db" 'SELECT n_params FROM runs') + 7) )) ] || fail "buckets: bytes per step"
$MPIRUN -np 3 "$NNBENCH" run "$T/e.ini" --db "$T/b3t.db" --set model.layers="$L" --set dist.bucket_kb=1 --set data.n=321 \
    --set train.max_steps=0 --set train.epochs=3 >"$T/out" 2>&1 || fail "buckets with empty shards"
[ "$(sqlite3 "$T/b3t.db" 'SELECT status || steps FROM runs')" = finished9 ] || fail "buckets with empty shards: not 9 steps"
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --no-db --set dist.bucket_kb=1 --set dist.compress=fp16 >"$T/out" 2>&1 &&
    fail "buckets with compression accepted"
grep -q "dist.bucket_kb = 1 needs dist.compress = none" "$T/out" || fail "buckets + compression: no clear message"
ok "dist.bucket_kb = 1: 3 ranks train the one-process curve (max |difference| $d), empty shards too; with compression refused"

# Compression: fewer bytes per all-reduce, still trains.
for c in fp16 int8; do
    $MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/$c.db" --profile --set dist.compress=$c --set train.max_steps=120 >"$T/out" 2>&1 ||
        fail "compress = $c"
    bytes=$(sqlite3 "$T/$c.db" "SELECT bytes / calls FROM op_stats WHERE name='allreduce'")
    loss=$(sqlite3 "$T/$c.db" "SELECT final_train_loss FROM runs")
    echo "$c: $bytes bytes per all-reduce, final loss $loss"
    awk -v l="$loss" 'BEGIN { exit !(l < 0.5) }' || fail "compress = $c: final loss $loss (does not train)"
done
# fp32: the P gradients and the step's 4 + 3 scalars (loss hi/lo, correct, stop, each
# rank's time per row) in one buffer
n=$(sqlite3 "$T/three.db" "SELECT bytes / calls FROM op_stats WHERE name='allreduce'")
P=$((n / 4 - 7))
[ "$P" = "$(sqlite3 "$T/three.db" 'SELECT n_params FROM runs')" ] || fail "fp32 all-reduce carries $n bytes, not 4 x (parameters + 7 scalars)"
[ "$(sqlite3 "$T/fp16.db" "SELECT bytes / calls FROM op_stats WHERE name='allreduce'")" -eq $((P * 2)) ] || fail "fp16 does not halve the bytes ($n fp32)"
[ "$(sqlite3 "$T/int8.db" "SELECT bytes / calls FROM op_stats WHERE name='allreduce'")" -eq $((P + 8)) ] || fail "int8 does not send a quarter (+ scale)"
ok "fp16 sends half, int8 a quarter of the fp32 bytes, both train"

# --ranks N starts mpirun itself.
${MPIRUN%%mpirun*} "$NNBENCH" run "$T/e.ini" --ranks 2 --db "$T/ranks.db" >"$T/out" 2>&1 || fail "--ranks 2"
[ "$(sqlite3 "$T/ranks.db" "SELECT value FROM params WHERE key='dist.world_size'")" = 2 ] || fail "--ranks 2: world size"
ok "--ranks 2"

# samples/data-parallel.ini under 2 ranks: its four variants, each with its settings.
if [ -d /usr/share/datasets/fashion-mnist ]; then
    NNBENCH_CACHE_DIR="$T/cache" ${MPIRUN%%mpirun*} "$NNBENCH" run "$NNBENCH_TOP/samples/data-parallel.ini" --ranks 2 \
        --db "$T/dp.db" --profile --set train.max_steps=30 >"$T/out" 2>&1 || fail "samples/data-parallel.ini"
    got=$(sqlite3 "$T/dp.db" "SELECT group_concat(v, ' ') FROM (SELECT r.variant || ':' || b.value || ':' || c.value ||
        ':' || (SELECT count(*) > 0 FROM metrics WHERE run=r.id AND key='batch_share/rank1') || ':' || r.status AS v
        FROM runs r JOIN params b ON b.run=r.id AND b.key='dist.balance' JOIN params c ON c.run=r.id AND c.key='dist.compress'
        ORDER BY r.id)")
    [ "$got" = "even:even:none:0:finished measured:measured:none:1:finished fp16:measured:fp16:1:finished int8:measured:int8:1:finished" ] ||
        fail "samples/data-parallel.ini: $got"
    ok "samples/data-parallel.ini: 4 variants under 2 ranks ($got)"
else
    echo "dist.sh: samples/data-parallel.ini skipped (no /usr/share/datasets/fashion-mnist: make deps installs it)"
fi

# --trace under 2 ranks: one Chrome trace, one process row per rank, no rank files left.
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --no-db --trace "$T/t.json" --trace-steps 2:4 >"$T/out" 2>&1 || fail "--trace under mpirun"
[ ! -e "$T/t.json.rank1" ] || fail "rank 1's trace file left behind"
python3 - "$T/t.json" <<'PY' || fail "merged trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = sorted(e["args"]["name"] for e in ev if e["name"] == "process_name")
assert names == ["nnbench rank 0", "nnbench rank 1"], names
X = [e for e in ev if e["ph"] == "X"]
pids = {e["pid"] for e in X if e["name"] == "allreduce"}
assert len(pids) == 2 and sum(e["name"] == "allreduce" for e in X) == 6, pids
# one process per rank (pids 1, 2 whatever the hosts' pids), each named
assert {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"} == {1: "nnbench rank 0", 2: "nnbench rank 1"}
# counter tracks per rank: step time and samples/s in each rank's process, times increasing
for pid in (1, 2):
    for name, key in (("step_time", "ms"), ("throughput", "samples_per_s"), ("memory", "live_bytes")):
        tr = [e for e in ev if e["ph"] == "C" and e["name"] == name and e["pid"] == pid]
        assert len(tr) >= 3 and all(e["args"][key] >= 0 for e in tr), (pid, name, tr)
        assert all(a["ts"] < b["ts"] for a, b in zip(tr, tr[1:])), (pid, name, "times not increasing")
# flow arrows: each all-reduce links the rank whose slice came first ("s") to the other
# ("f", bp e), each flow event inside its own rank's allreduce slice of the same step
# (Perfetto binds a flow event to the slice open at its time on its thread)
F = [e for e in ev if e["ph"] in "sf"]
d0 = json.load(open(sys.argv[1]))["otherData"]
assert d0["allreduce_flows"] == 3 and d0["allreduce_flows_skipped"] == 0, d0
assert len(F) == 2 * d0["allreduce_flows"], F
for fid in {e["id"] for e in F}:
    s, f = sorted((e for e in F if e["id"] == fid), key=lambda e: e["ts"])
    assert (s["ph"], f["ph"], f.get("bp"), {s["pid"], f["pid"]}) == ("s", "f", "e", {1, 2}), (s, f)
    assert s["ts"] < f["ts"] and s["cat"] == f["cat"] and s["name"] == f["name"], (s, f)
    for e in (s, f):
        sl = [x for x in X if x["pid"] == e["pid"] and x["tid"] == e["tid"] and x["ts"] < e["ts"] < x["ts"] + x["dur"]]
        deepest = max(sl, key=lambda x: x["ts"])
        assert deepest["name"].startswith("allreduce") and deepest["args"]["step"] == e["args"]["step"], (e, sl)
d = json.load(open(sys.argv[1]))
assert "aligned" in d["otherData"]["note"], d["otherData"]
# a collective ends on every rank at about the same instant: aligned rows show it
ends = {}
for e in X:
    if e["name"] == "allreduce": ends.setdefault(e["args"]["step"], []).append(e["ts"] + e["dur"])
assert all(len(v) == 2 and abs(v[0] - v[1]) < 50000 for v in ends.values()), ends
PY
ok "--trace: one file, a named process per rank, aligned on a common barrier, counter tracks and all-reduce flows per rank"

# The alpha-beta fit and the projection (every figure labelled modelled).
XDG_CACHE_HOME="$T/xdg" ${MPIRUN%%mpirun*} "$NNBENCH" allreduce --ranks 2 --reps 3 >"$T/out" 2>&1 || fail "allreduce --ranks 2"
grep -q "^FIT	" "$T/out" && grep -q "^CHECK	940584	" "$T/out" || fail "allreduce: no fit/check lines"
[ -s "$T/xdg/nnbench/allreduce-fit" ] || fail "allreduce: fit not saved"
XDG_CACHE_HOME="$T/xdg" "$NNBENCH" project 1 --db "$T/three.db" --nodes 2,8,64,256 >"$T/out" 2>&1 || fail "project"
grep -q "^MODELLED" "$T/out" || fail "project: figures not labelled modelled"
[ "$(grep -c '^| [0-9]* |' "$T/out")" = 4 ] || fail "project: want 4 node rows"
grep -q "all-reduce per step, 3 ranks: modelled" "$T/out" || fail "project: no model check against the 3-rank run"
"$NNBENCH" project 1 --db "$T/three.db" --nodes 2,8 --link-gbps 25 --latency-us 5 >"$T/out" 2>&1 || fail "project --link-gbps"
grep -q "beta 3.125 GB/s (--link-gbps" "$T/out" || fail "project: 25 Gb/s is 3.125 GB/s"
"$NNBENCH" project 1 --db "$T/two.db" --nodes 2 --link-gbps 25 --latency-us 5 >"$T/out" 2>&1 && fail "project of an unprofiled run"
grep -q "has no profile" "$T/out" || fail "project: unprofiled run not explained"
ok "allreduce fit + project (modelled table, model check)"

# Newton does not run data-parallel: refused with the reason.
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --no-db --set train.optimizer=newton >"$T/out" 2>&1 && fail "newton under mpirun accepted"
grep -q "does not run data-parallel" "$T/out" || fail "newton refusal not explained"
ok "newton under mpirun refused"

# A killed rank: the others stop within seconds, the run is failed with the reason.
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/kill.db" --set train.max_steps=100000000 --set train.log_every=50 >"$T/out" 2>&1 &
mp=$!
wait_metrics "$T/kill.db" 20
r0=$(sqlite3 "$T/kill.db" "SELECT pid FROM runs WHERE id=1")
r1=$(pgrep -f "kill.db" | while read -r p; do
    [ "$p" != "$r0" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^$NNBENCH run" && echo "$p"; done | head -n 1)
[ -n "$r1" ] || fail "rank 1 not found"
kill -9 "$r1"
t0=$(date +%s)
wait "$mp"; code=$?
mp=
dt=$(( $(date +%s) - t0 ))
[ $code -ne 0 ] || fail "mpirun exited 0 after a rank was killed"
[ $dt -le 15 ] || fail "the job took $dt s to stop after a rank was killed"
[ "$(sqlite3 "$T/kill.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after a killed rank"
st=$(sqlite3 "$T/kill.db" "SELECT status FROM runs WHERE id=1")
[ "$st" = failed ] || fail "run stored as '$st', want failed"
sqlite3 "$T/kill.db" "SELECT error FROM runs WHERE id=1" | grep -q "mpi:" || fail "no reason stored: $(sqlite3 "$T/kill.db" 'SELECT error FROM runs')"
ok "killed rank: stopped in $dt s, run failed ($(sqlite3 "$T/kill.db" 'SELECT error FROM runs WHERE id=1'))"

# ---- ranks that disagree or fail (issue 22 #7, #14, #15) ----
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
wait_metrics "$T/k.db" 20
kill -9 "$(sqlite3 "$T/k.db" "SELECT pid FROM runs WHERE id=1")"
wait "$mp" && fail "mpirun exited 0 after rank 0 was killed"
mp=
# the raw row, not `nnbench list` (which infers crashed from a dead pid by itself)
st=$(sqlite3 "$T/k.db" "SELECT status FROM runs WHERE id=1")
[ "$st" = crashed ] || fail "rank 0 killed: the run is stored '$st', want crashed"
[ "$(sqlite3 "$T/k.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after rank 0 was killed"
ok "rank 0 killed: its run is recorded crashed ($(sqlite3 "$T/k.db" "SELECT error FROM runs WHERE id=1"))"
echo "dist: ok"
