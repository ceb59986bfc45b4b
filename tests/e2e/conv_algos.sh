#!/bin/sh
# conv_algos.sh — model.conv_algo end to end on Fashion-MNIST: a forced Winograd, F(4x4) or
# FFT run finishes, stores each fast layer's stage rows (winograd.gemm.fwd, fft.product.bwd,
# ...; onednn's per primitive) beside its conv2d rows, and its model summary names what each
# conv layer ran; a 5x5
# layer under winograd runs im2col and the stored summary says why; a layer's :algo=X wins
# over the model key (docs/convolution.md).
. "$(dirname "$0")/lib/check.sh"
export NNBENCH_CACHE_DIR="$tmp/cache"
db="$tmp/c.db"
layers='model.layers=conv:8:3:relu:pad=1, pool, conv:8:5:relu:pad=2, pool, flatten, dense:10'
run() {
    "$NNBENCH" run "$TOP/samples/fashion-mnist-cnn.ini" --db "$db" --profile --set data.n=256 --set data.n_test=64 \
        --set train.max_steps=4 --set "$layers" --set "model.conv_algo=$1" >"$tmp/o" 2>"$tmp/e"
}
model() { sqlite3 "$db" "SELECT model FROM runs WHERE id = $1"; }
rows() { sqlite3 "$db" "SELECT count(*) FROM op_stats WHERE run = $1 AND layer = '$2' AND name = '$3' AND calls > 0"; }

id=0
for algo in winograd winograd4 fft; do
    id=$((id + 1))
    if run $algo; then ok "a run with model.conv_algo = $algo finishes"; else bad "$algo run failed: $(cat "$tmp/e")"; continue; fi
    [ "$(sqlite3 "$db" "SELECT status FROM runs WHERE id = $id")" = finished ] || bad "run $id ($algo) not finished"
    case $algo in
        fft) stages="fft.fft fft.product fft.ifft"; l2=fft ;;
        *) stages="$algo.input $algo.filter $algo.gemm $algo.output"; l2="im2col ($algo needs a 3x3 kernel and stride 1)" ;;
    esac
    for s in $stages; do
        for d in fwd bwd; do
            [ "$(rows $id conv1 "$s.$d")" = 1 ] || bad "run $id ($algo): no stored $s.$d row for conv1"
        done
    done
    [ "$(rows $id conv1 conv2d.fwd)" = 1 ] || bad "run $id: no conv2d.fwd row"
    if [ $algo = fft ]; then
        [ "$(rows $id conv2 fft.product.fwd)" = 1 ] && ok "fft: the 5x5 layer's stages are stored too" || bad "fft: no conv2 stage rows"
    else
        [ "$(sqlite3 "$db" "SELECT count(*) FROM op_stats WHERE run = $id AND layer = 'conv2' AND name LIKE 'winograd%'")" = 0 ] \
            && ok "$algo: the 5x5 layer has no Winograd stage rows" || bad "$algo: Winograd rows for the 5x5 layer"
    fi
    case "$(model $id)" in
        *"k3 p1 $algo) relu"*"k5 p2 $l2) relu"*) ok "$algo: the stored model summary names each layer's algorithm ($(model $id | cut -c1-90)...)" ;;
        *) bad "$algo: model summary '$(model $id)'" ;;
    esac
done

# onednn: a stored row per primitive (conv1, the first layer, passes no gradient on: no
# backward_data), and the summary names it on both layers.
id=$((id + 1))
if run onednn; then
    for r in conv1:onednn.forward.fwd conv1:onednn.backward_weights.bwd conv2:onednn.forward.fwd \
             conv2:onednn.backward_data.bwd conv2:onednn.backward_weights.bwd; do
        [ "$(rows $id "${r%%:*}" "${r#*:}")" = 1 ] || bad "onednn: no stored ${r#*:} row for ${r%%:*}"
    done
    case "$(model $id)" in
        *"k3 p1 onednn) relu"*"k5 p2 onednn) relu"*) ok "onednn: each primitive's rows stored, the summary names it" ;;
        *) bad "onednn: model summary '$(model $id)'" ;;
    esac
else bad "onednn run failed: $(cat "$tmp/e")"; fi

# A layer's own :algo=X wins over model.conv_algo.
id=$((id + 1))
layers='model.layers=conv:8:3:relu:pad=1:algo=winograd4, pool, conv:8:5:relu:pad=2:algo=fft, pool, flatten, dense:10'
if run im2col; then
    case "$(model $id)" in
        *"k3 p1 winograd4) relu"*"k5 p2 fft) relu"*) ok "per-layer algo=: winograd4 and fft in one model" ;;
        *) bad "per-layer algo: model summary '$(model $id)'" ;;
    esac
    [ "$(rows $id conv2 fft.product.bwd)" = 1 ] && [ "$(rows $id conv1 winograd4.gemm.fwd)" = 1 ] \
        && ok "per-layer algo=: each layer's stage rows stored" || bad "per-layer algo: stage rows missing"
else bad "per-layer algo run failed: $(cat "$tmp/e")"; fi

[ "$fails" -eq 0 ]
