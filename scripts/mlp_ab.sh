#!/bin/sh
# A/B of the Fashion MLP's training speed between builds: each build's
# `build/bench/mlp_bench --single engine` (one epoch, samples/s by step time), run in
# interleaved rounds so that a VM's slow and fast spells hit every build alike; prints
# each build's median, min and max. Single runs on two shared cores vary by 20-40%: take
# 7 rounds or more, on an idle machine.
#
#   sh scripts/mlp_ab.sh [-r ROUNDS] [-t THREADS] DIR [DIR...]    (DIR: a checkout with build/)
set -eu
rounds=7 threads=2
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: sh scripts/mlp_ab.sh [-r ROUNDS] [-t THREADS] DIR [DIR...]" >&2; exit 2; }
for d in "$@"; do
    [ -x "$d/build/bench/mlp_bench" ] || { echo "mlp_ab: $d/build/bench/mlp_bench is missing: run make tests there" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
    n=0
    for d in "$@"; do
        n=$((n + 1))
        out=$("$d/build/bench/mlp_bench" --single engine --threads "$threads" --seed "$i" 2>"$tmp/err") ||
            { echo "mlp_ab: $d: mlp_bench failed:" >&2; cat "$tmp/err" >&2; exit 1; }
        printf '%s\n' "$out" | awk -F'\t' '$1 == "RESULT" { print $4 }' >>"$tmp/$n"
    done
    i=$((i + 1))
done
echo "samples/s at $threads thread(s), $rounds interleaved rounds"
n=0
for d in "$@"; do
    n=$((n + 1))
    sort -n "$tmp/$n" | awk -v d="$d" '{ v[NR] = $1 } END {
        if (NR == 0) { printf "%-40s no result\n", d; exit }
        printf "%-40s median %8.0f   min %8.0f   max %8.0f\n", d, v[int((NR + 1) / 2)], v[1], v[NR] }'
done
