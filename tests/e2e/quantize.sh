#!/bin/sh
# quantize.sh — int8 post-training quantization end to end: `nnbench quantize` on a small
# Fashion-MNIST MLP and CNN stores a record with fp32 and int8 side by side (4x smaller,
# accuracy kept, an op profile with quantize/gemm_s8/requantize), every int8 GEMM path the
# CPU has gives the same integers, `show` lists it, and `nnbench export-model --int8`
# writes C that compiles with `cc -c` and predicts exactly what nnbench's int8 path does on
# 1000 test images. Bad requests are refused.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-quant.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && cat "$T/out" >&2; exit 1; }
DB="$T/q.db"
FM=/usr/share/datasets/fashion-mnist
[ -d "$FM" ] || { echo "quantize.sh: skipped ($FM missing: make deps installs dataset-fashion-mnist)"; exit 0; }

cat >"$T/mlp.ini" <<INI
[experiment]
name = qmlp
seed = 3
[data]
source = idx
path = $FM
n = 6000
n_test = 1000
[model]
layers = dense:64:relu, dense:10
[train]
optimizer = momentum
lr = 0.05
batch = 64
epochs = 2
threads = 1
INI
sed -e 's/name = qmlp/name = qcnn/' -e 's/dense:64:relu, dense:10/conv:4:5:relu, pool, flatten, dense:10/' \
    -e 's/epochs = 2/epochs = 1/' "$T/mlp.ini" >"$T/cnn.ini"
"$NNBENCH" run "$T/mlp.ini" --db "$DB" >"$T/out" 2>&1 || fail "training the MLP"
"$NNBENCH" run "$T/cnn.ini" --db "$DB" >"$T/out" 2>&1 || fail "training the CNN"

# jget FILE EXPR: EXPR (python, over the parsed JSON as j) printed; JSON parsed, not grepped
jget() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
jnum() { jget "$2" "j['$1']"; }
for run in 1 2; do
    "$NNBENCH" quantize $run --db "$DB" --json >"$T/q$run.json" 2>"$T/out" || fail "quantize $run"
    cp "$T/q$run.json" "$T/out"
    ratio=$(jnum bytes_ratio "$T/q$run.json")
    awk -v r="$ratio" 'BEGIN { exit !(r > 0.2 && r <= 0.27) }' || fail "run $run: int8/fp32 bytes $ratio"
    f=$(jget "$T/q$run.json" "j['fp32']['accuracy']")
    i=$(jget "$T/q$run.json" "j['int8']['accuracy']")
    awk -v f="$f" -v i="$i" 'BEGIN { exit !(f > 0.6 && i > f - 0.02) }' || fail "run $run: accuracy fp32 $f, int8 $i"
    for op in quantize gemm_s8 requantize dequantize; do
        grep -q "\"name\": \"$op\"" "$T/q$run.json" || fail "run $run: no $op scope in the int8 profile"
    done
done
grep -q '"name": "im2col_u8"' "$T/q2.json" || fail "CNN: no im2col_u8 scope"
grep -q '"name": "maxpool_u8"' "$T/q2.json" || fail "CNN: no maxpool_u8 scope"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM quantizations")" = 2 ] || fail "quantizations not stored"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM quant_ops WHERE name='gemm_s8'")" -ge 3 ] || fail "quant_ops not stored"
"$NNBENCH" show 2 --db "$DB" >"$T/out" 2>&1 || fail "show"
grep -q "int8 quantizations" "$T/out" || fail "show lists no quantization"
"$NNBENCH" report 1 2 --db "$DB" -o "$T/r.md" >"$T/out" 2>&1 || fail "report"
grep -q "^## int8 quantizations" "$T/r.md" || fail "the report has no int8 section"
"$NNBENCH" report 2 --db "$DB" -o "$T/r.json" >"$T/out" 2>&1 || fail "json report"
grep -q '"quantizations":\[{"id":2,' "$T/r.json" || fail "the JSON report has no quantization"

# eval: the stored test loss again, and another file (the full training images) by --data.
"$NNBENCH" eval 1 --db "$DB" --json >"$T/out" 2>&1 || fail "eval"
want=$(sqlite3 "$DB" "SELECT printf('%.6g', final_test_loss) FROM runs WHERE id=1")
[ "$(printf '%.6g' "$(jget "$T/out" "repr(j['loss'])")")" = "$want" ] || fail "eval loss differs from the run's ($want)"
"$NNBENCH" eval 1 --db "$DB" --data "$FM/train-images-idx3-ubyte.gz" --labels "$FM/train-labels-idx1-ubyte.gz" \
    >"$T/out" 2>&1 || fail "eval --data"
grep -q "60000 samples, loss [0-9.]*, accuracy 0\.[5-9]" "$T/out" || fail "eval --data: not the 60000 training images"

# The integer result does not depend on the GEMM path: every path this CPU has, forced.
il() { jget "$1" "repr(j['int8']['loss'])"; }
for run in 1 2; do
    "$NNBENCH" quantize $run --db "$DB" --json --no-store --kernel scalar >"$T/s.json" 2>"$T/out" || fail "--kernel scalar"
    want=$(il "$T/s.json")
    for k in avx2 vnni onednn; do
        if "$NNBENCH" quantize $run --db "$DB" --json --no-store --kernel $k >"$T/k.json" 2>"$T/out"; then
            [ "$(il "$T/k.json")" = "$want" ] || fail "run $run: kernel $k gives int8 loss $(il "$T/k.json"), scalar $want"
            echo "quantize.sh: run $run, kernel $k = scalar"
        else
            grep -q "not available" "$T/out" || fail "--kernel $k failed for another reason"
            echo "quantize.sh: kernel $k not available on this machine"
        fi
    done
done

# Export: compiles alone with cc -c, and predicts exactly what nnbench's int8 path does.
for run in 1 2; do
    "$NNBENCH" export-model $run --int8 -o "$T/model$run.c" --vectors 1000 "$T/vec$run.bin" --db "$DB" >"$T/out" 2>&1 ||
        fail "export-model $run"
    ${CC:-cc} -c -std=c99 -Wall -Wextra -Werror -O2 -o "$T/model$run.o" "$T/model$run.c" 2>"$T/out" || fail "model$run.c does not compile"
    ${CC:-cc} -O2 -o "$T/drv$run" "$NNBENCH_TOP/tests/e2e/export_driver.c" "$T/model$run.o" -lm 2>"$T/out" || fail "driver"
    "$T/drv$run" "$T/vec$run.bin" >"$T/out" 2>&1 || fail "run $run: the exported model differs from nnbench's int8 path"
    grep -q "^1000 samples: 0 predictions" "$T/out" || fail "run $run: not 1000 vectors checked"
    echo "quantize.sh: run $run: $(cat "$T/out")"
done

# A tanh net (activation tables) exports exactly too.
"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant adam --set train.epochs=5 --db "$DB" >"$T/out" 2>&1 ||
    fail "training the spirals net"
"$NNBENCH" export-model 3 --int8 -o "$T/model3.c" --vectors 400 "$T/vec3.bin" --db "$DB" >"$T/out" 2>&1 || fail "export-model 3"
grep -q "_lut\[256\]" "$T/model3.c" || fail "no activation table in the tanh net's C file"
${CC:-cc} -c -std=c99 -Wall -Wextra -Werror -O2 -o "$T/model3.o" "$T/model3.c" 2>"$T/out" || fail "model3.c does not compile"
${CC:-cc} -O2 -o "$T/drv3" "$NNBENCH_TOP/tests/e2e/export_driver.c" "$T/model3.o" -lm 2>"$T/out" || fail "driver 3"
"$T/drv3" "$T/vec3.bin" >"$T/out" 2>&1 || fail "the exported tanh net differs from nnbench's int8 path"
echo "quantize.sh: run 3 (tanh): $(cat "$T/out")"

# Refusals.
"$NNBENCH" quantize 1 --db "$DB" --scheme median >"$T/out" 2>&1; [ $? = 2 ] || fail "--scheme median accepted"
"$NNBENCH" quantize 1 --db "$DB" --kernel turbo >"$T/out" 2>&1; [ $? = 2 ] || fail "--kernel turbo accepted"
"$NNBENCH" export-model 1 -o "$T/x.c" --db "$DB" >"$T/out" 2>&1 && fail "export without --int8 accepted"
sqlite3 "$DB" "DELETE FROM checkpoints WHERE run=1"
"$NNBENCH" quantize 1 --db "$DB" >"$T/out" 2>&1 && fail "quantize without a checkpoint accepted"
grep -q "no checkpoint" "$T/out" || fail "no reason given for a run without checkpoints"
echo "quantize: ok"
