#!/bin/sh
# conv_layers.sh — tests/bench/conv_layers.py (the per-conv-layer time of each convolution
# algorithm, docs/convolution.md) on samples/resnet-fashion.ini, briefly: a row per conv
# layer with a time per algorithm, the strided layers marked as run by im2col under
# winograd, the totals row; a value that is not a model.conv_algo is refused with exit 2.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
PY=${NNBENCH_PYTHON:-python3}
T=$(mktemp -d /tmp/nnbench-e2e-convlayers.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && cat "$T/out" "$T/err" >&2; exit 1; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ] ||
    { echo "conv_layers: skipped (no Fashion-MNIST under /usr/share/datasets)"; exit 0; }
S="$NNBENCH_TOP/tests/bench/conv_layers.py"

"$PY" "$S" --nnbench "$NNBENCH" --ini "$NNBENCH_TOP/samples/resnet-fashion.ini" --steps 2 --n 128 \
    --algos im2col,winograd --set train.threads=1 >"$T/out" 2>"$T/err" || fail "conv_layers.py exited $?"
grep -q '^| layer | shape | im2col | winograd |$' "$T/out" || fail "no header with the two algorithms"
n=$(grep -c '^| conv[0-9] | [0-9]*x[0-9]*x[0-9]*->' "$T/out")
[ "$n" = 7 ] || fail "$n conv layer rows, want 7"
# every cell a positive time; the stride-2 layers (conv4, conv6) ran im2col under winograd
awk -F'|' '/^\| conv[0-9] /{ for (i = 4; i <= 5; i++) { split($i, w, " "); if (w[1] + 0 <= 0) bad = bad " " $2 } }
           END { if (bad != "") { print "non-positive cells in" bad; exit 1 } }' "$T/out" || fail "a cell is not a time"
for l in conv4 conv6; do
    grep "^| $l " "$T/out" | awk -F'|' '{ exit !($5 ~ /\(im2col\)/) }' || fail "$l's winograd cell does not say im2col ran"
done
grep "^| conv2 " "$T/out" | awk -F'|' '{ exit ($5 ~ /\(/) }' || fail "conv2 ran winograd, its cell names another algorithm"
grep -q '^| all conv layers |' "$T/out" || fail "no totals row"

"$PY" "$S" --nnbench "$NNBENCH" --algos im2col,bogus >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 2 ] || fail "--algos bogus exited $rc, want 2"
grep -q "'bogus' is not a value of model.conv_algo (auto, im2col" "$T/err" || fail "the refusal does not list the algorithms"
echo "conv_layers: ok"
