#!/bin/sh
# znorm_study.sh — issue 24's ZNorm study: Adam with each gradient transform (none, znorm,
# centralize, clip_norm) on the ResNet-14 of samples/plain-vs-residual.ini and on the same
# 13 convolutions without the shortcuts, over several seeds. Prints one Markdown table
# (steps and wall time to the target train loss, final test accuracy) and the per-layer
# gradient scale across depth: grad_norm of each conv layer's W, the raw gradient before any
# transform, from the telemetry the workbench's Layers heat map shows, as the mean of its
# logged points, relative to the last conv layer's.
#
# usage: sh tests/bench/znorm_study.sh [BUILD]
#   env: SEEDS="1 2 3"  STEPS=100  TARGET=0.8  DB=path (default: a temporary file, removed)
#        NETS="residual plain"  METHODS="none znorm centralize clip_norm"
# Figures depend on the machine's load for the wall times only; say so when quoting them.
set -u
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
nn="$top/$BUILD/nnbench"
case "$BUILD" in /*) nn="$BUILD/nnbench" ;; esac
[ -x "$nn" ] || { echo "znorm_study: no $nn (make first)" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "znorm_study: needs the sqlite3 command" >&2; exit 2; }
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-100}
TARGET=${TARGET:-0.8}
NETS=${NETS:-residual plain}
METHODS=${METHODS:-none znorm centralize clip_norm}
tmp=$(mktemp -d /tmp/nnbench-znorm.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
db=${DB:-$tmp/study.db}
exp="$top/samples/plain-vs-residual.ini"
start=$(date +%s)

: >"$tmp/runs"   # net method seed run_id
for seed in $SEEDS; do
    for net in $NETS; do
        for m in $METHODS; do
            echo "znorm_study: $net adam+$m seed $seed" >&2
            extra=""
            [ "$m" = clip_norm ] && extra="--set train.clip_norm=1"
            # shellcheck disable=SC2086
            "$nn" run "$exp" --variant "$net" --db "$db" --seed "$seed" --set train.gradient="$m" $extra \
                --set train.max_steps="$STEPS" --set experiment.target_loss="$TARGET" --set profile.enabled=false \
                --set train.eval_every=0 >"$tmp/out" 2>&1 || { tail -n 5 "$tmp/out" >&2; exit 1; }
            id=$(sed -n 's/.*stored as run \([0-9]*\) .*/\1/p' "$tmp/out" | head -n 1)
            [ -n "$id" ] || { echo "znorm_study: no run id in the output" >&2; cat "$tmp/out" >&2; exit 1; }
            echo "$net $m $seed $id" >>"$tmp/runs"
        done
    done
done

q() { sqlite3 -separator '	' "$db" "$1"; }
# median of the numbers on stdin ("-" when none)
med() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "-"; exit } print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "ZNorm study — $(date -u '+%Y-%m-%d %H:%M UTC'); seeds: $SEEDS; $STEPS steps of batch 64, Adam lr 0.001; target train loss $TARGET"
echo "command: SEEDS=\"$SEEDS\" STEPS=$STEPS TARGET=$TARGET sh tests/bench/znorm_study.sh $BUILD"
echo
echo "| net | Adam + | reached target | steps to target (median) | wall to target, s (median) | final test acc (mean ± sd) | final train loss (median) |"
echo "|---|---|---|---|---|---|---|"
for net in $NETS; do
    for m in $METHODS; do
        ids=$(awk -v n="$net" -v m="$m" '$1 == n && $2 == m { printf "%s%s", s, $4; s = "," }' "$tmp/runs")
        total=$(echo "$ids" | tr ',' '\n' | grep -c .)
        reached=$(q "SELECT count(*) FROM runs WHERE id IN ($ids) AND steps_to_target IS NOT NULL")
        st=$(q "SELECT steps_to_target FROM runs WHERE id IN ($ids) AND steps_to_target IS NOT NULL" | med)
        wt=$(q "SELECT printf('%.1f', wall_to_target) FROM runs WHERE id IN ($ids) AND wall_to_target IS NOT NULL" | med)
        acc=$(q "SELECT final_test_acc FROM runs WHERE id IN ($ids)" |
            awk '{ s += $1; ss += $1 * $1; n++ } END { m = s / n; v = n > 1 ? (ss - n * m * m) / (n - 1) : 0; printf "%.4f ± %.4f", m, sqrt(v > 0 ? v : 0) }')
        fl=$(q "SELECT printf('%.4f', final_train_loss) FROM runs WHERE id IN ($ids)" | med)
        echo "| $net | $m | $reached/$total | $st | $wt | $acc | $fl |"
    done
done

# Gradient scale across depth: mean over seeds and logged steps of grad_norm/convK.W,
# divided by the last conv layer's (1.00 = the same scale as at the top of the net).
echo
echo "Per-layer gradient scale, grad_norm(convK.W) / grad_norm(last conv .W), raw gradients (before the transform), mean of the logged points over the seeds:"
echo
convs=$(q "SELECT DISTINCT key FROM metrics WHERE key GLOB 'grad_norm/conv*.W'" | sed 's|grad_norm/conv||; s|\.W||' | sort -n)
last=$(echo "$convs" | tail -n 1)
hdr="| net | Adam + |"; sep="|---|---|"
for k in $convs; do hdr="$hdr conv$k |"; sep="$sep---|"; done
echo "$hdr first/last |"
echo "$sep---|"
for net in $NETS; do
    for m in $METHODS; do
        ids=$(awk -v n="$net" -v m="$m" '$1 == n && $2 == m { printf "%s%s", s, $4; s = "," }' "$tmp/runs")
        top_n=$(q "SELECT avg(value) FROM metrics WHERE run IN ($ids) AND key = 'grad_norm/conv$last.W'")
        line="| $net | $m |"
        for k in $convs; do
            v=$(q "SELECT avg(value) FROM metrics WHERE run IN ($ids) AND key = 'grad_norm/conv$k.W'")
            line="$line $(awk -v a="$v" -v b="$top_n" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }') |"
        done
        first=$(q "SELECT avg(value) FROM metrics WHERE run IN ($ids) AND key = 'grad_norm/conv1.W'")
        echo "$line $(awk -v a="$first" -v b="$top_n" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }') |"
    done
done
echo
echo "znorm_study: $(( $(date +%s) - start )) s; runs in $db$([ -z "${DB:-}" ] && echo ' (temporary: set DB=path to keep them)')"
