#!/bin/sh
# resnet.sh — samples/resnet-fashion.ini briefly: the stored op table has a row per layer
# for the conv2d, batchnorm, res_fork and res_add ops (with FLOPs and bytes), the model
# summary shows the blocks and the projection shortcuts; a run killed with SIGKILL and
# resumed ends with the same test loss as an uninterrupted one (batch norm's running
# statistics come back with the checkpoint), and `eval` of the stored model reproduces it.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-resnet.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && cat "$T/out" >&2; exit 1; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ] ||
    { echo "resnet: skipped (no Fashion-MNIST under /usr/share/datasets)"; exit 0; }

# One thread and im2col everywhere: the resumed run must repeat the clean one bit for bit.
SETS="--set data.n=512 --set data.n_test=256 --set train.batch=32 --set train.max_steps=40
      --set train.eval_every=10 --set train.checkpoint_every=4 --set train.threads=1"
# shellcheck disable=SC2086
"$NNBENCH" run "$NNBENCH_TOP/samples/resnet-fashion.ini" --variant im2col $SETS --db "$T/clean.db" >"$T/out" 2>&1 ||
    fail "clean run"
q() { sqlite3 "$1" "$2"; }

# The op table: every layer's rows, with FLOPs and bytes.
for row in conv2d.fwd:conv1 conv2d.bwd:conv7 batchnorm.fwd:bn1 batchnorm.bwd:bn7 \
           res_fork.bwd:res1.in res_fork.bwd:res3.in res_add.fwd:res1 res_add.fwd:res2 res_add.bwd:res3 \
           relu.fwd:res2 gap.fwd:gap1; do
    name=${row%%:*} layer=${row#*:}
    got=$(q "$T/clean.db" "SELECT calls > 0, flops > 0, bytes > 0 FROM op_stats WHERE run=1 AND kind=0 AND name='$name' AND layer='$layer'")
    [ "$got" = "1|1|1" ] || fail "op row $name $layer: '$got' (want calls, flops and bytes > 0)"
done
# the identity block's backward is a copy: bytes, no FLOPs
got=$(q "$T/clean.db" "SELECT calls > 0, flops, bytes > 0 FROM op_stats WHERE run=1 AND name='res_add.bwd' AND layer='res1'")
[ "$got" = "1|0|1" ] || fail "op row res_add.bwd res1: '$got' (want calls > 0, 0 FLOPs, bytes > 0)"
n=$(q "$T/clean.db" "SELECT count(DISTINCT layer) FROM op_stats WHERE run=1 AND name='batchnorm.fwd'")
[ "$n" = 7 ] || fail "batchnorm rows for $n layers, want 7"
n=$(q "$T/clean.db" "SELECT count(DISTINCT layer) FROM op_stats WHERE run=1 AND name='conv2d.fwd'")
[ "$n" = 7 ] || fail "conv2d rows for $n layers, want 7"
# the identity block's add: one add per output element and call (32 rows of 16x28x28)
f=$(q "$T/clean.db" "SELECT flops / calls FROM op_stats WHERE run=1 AND name='res_add.fwd' AND layer='res1'")
[ "$f" -ge $((16 * 28 * 28)) ] || fail "res_add.fwd res1 flops per call $f"
# the projection block's add has the 1x1 GEMM: more than 2·F·C·P per row
f2=$(q "$T/clean.db" "SELECT flops / calls FROM op_stats WHERE run=1 AND name='res_add.fwd' AND layer='res2'")
[ "$f2" -gt "$f" ] || fail "res_add.fwd res2 (projection) flops per call $f2 not above the identity's $f"
model=$(q "$T/clean.db" "SELECT model FROM runs WHERE id=1")
case "$model" in
*"bn(16) relu, res(conv(16x28x28->16x28x28 k3 p1), bn(16) relu"*"bn(32) + proj 1x1 s2) relu"*"bn(64) + proj 1x1 s2) relu, gap(64x7x7->64), dense(64->10)"*) ;;
*) fail "model summary: $model" ;;
esac

# Kill after the first checkpoint, resume, compare with the clean run.
# shellcheck disable=SC2086
"$NNBENCH" run "$NNBENCH_TOP/samples/resnet-fashion.ini" --variant im2col $SETS --db "$T/killed.db" >"$T/run.out" 2>&1 &
pid=$!
i=0
while :; do
    n=$(sqlite3 "$T/killed.db" "SELECT count(*) FROM checkpoints" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge 1 ] && break
    i=$((i+1)); [ $i -ge 1200 ] && fail "no checkpoint appeared in 120 s"
    sleep 0.1
done
kill -9 "$pid" 2>/dev/null || fail "the run ended before it could be killed: make it longer"
wait "$pid" 2>/dev/null
pid=
ck=$(q "$T/killed.db" "SELECT max(step) FROM checkpoints")
[ "$ck" -lt 40 ] || fail "the last checkpoint is the end (step $ck): nothing to resume"
echo "killed after the checkpoint at step $ck"
"$NNBENCH" resume 1 --db "$T/killed.db" >"$T/out" 2>&1 || fail "resume"
s="SELECT printf('%.17g|%.17g|%.17g|%d', final_train_loss, final_test_loss, final_test_acc, steps) FROM runs WHERE id=1"
[ "$(q "$T/clean.db" "$s")" = "$(q "$T/killed.db" "$s")" ] ||
    fail "resumed run differs: $(q "$T/clean.db" "$s") (clean) vs $(q "$T/killed.db" "$s") (resumed)"
m="SELECT step, printf('%.17g', value) FROM metrics WHERE run=1 AND key='test_loss' ORDER BY step"
[ "$(q "$T/clean.db" "$m")" = "$(q "$T/killed.db" "$m")" ] || fail "test loss curve differs after resume"

# eval loads the stored parameters and running statistics: the stored test loss again.
"$NNBENCH" eval 1 --db "$T/killed.db" --json >"$T/out" 2>&1 || fail "eval"
want=$(q "$T/killed.db" "SELECT printf('%.6g', final_test_loss) FROM runs WHERE id=1")
got=$(sed -n 's/.*"loss": *\([-0-9.eE+]*\).*/\1/p' "$T/out" | head -1)
[ "$(printf '%.6g' "$got")" = "$want" ] || fail "eval loss $got, stored test loss $want"
echo "resnet: ok"
