#!/bin/sh
# loss_identity.sh — behaviour unchanged: every sample's stored curves (losses, accuracies,
# lr, the graph figures) at 1 thread are bit-identical between a baseline binary built from
# a git ref and the current one. Refactors of the loop and the engine's layout must pass it.
#
#   sh tests/loss_identity.sh [REF]      (REF: default the merge-base of HEAD with main)
#
# The baseline is built from `git archive REF` in a cache dir ($NNBENCH_BASE_DIR, default
# ${TMPDIR:-/tmp}/nnbench-base-COMMIT) and reused while it exists; NNBENCH_BASE=BINARY skips
# the build. The current binary is $NNBENCH (default build/nnbench). Each variant runs
# LOSS_ID_STEPS steps (default 40) with train.threads = 1 and train.log_every = 1. A sample
# whose curves differ is run on the baseline a second time: a variant whose baseline differs
# from itself is not deterministic and is reported as skipped, else it FAILS.
# Wall-clock keys (samples_per_s, sampler_batches_per_s, batch_share/*) are not compared.
# LOSS_ID_SAMPLES="a.ini b.ini" runs only those samples. Takes tens of minutes at 1 thread
# (the Q-Newton samples dominate): not part of tests/run.sh.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
NNBENCH=${NNBENCH:-$TOP/build/nnbench}
STEPS=${LOSS_ID_STEPS:-40}
ref=${1:-$(git -C "$TOP" merge-base HEAD main)} || exit 2
commit=$(git -C "$TOP" rev-parse --verify "$ref^{commit}") || { echo "loss_identity: no commit '$ref'" >&2; exit 2; }
[ -x "$NNBENCH" ] || { echo "loss_identity: no binary at $NNBENCH (make first)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

base=${NNBENCH_BASE:-}
if [ -z "$base" ]; then
    dir=${NNBENCH_BASE_DIR:-${TMPDIR:-/tmp}/nnbench-base-$commit}
    base=$dir/build/nnbench
    if [ ! -x "$base" ]; then
        echo "building the baseline $commit in $dir"
        mkdir -p "$dir" && git -C "$TOP" archive "$commit" | tar -x -C "$dir" || exit 2
        make -C "$dir" -j2 nnbench >"$dir/make.log" 2>&1 || { echo "loss_identity: baseline build failed ($dir/make.log)" >&2; exit 2; }
    fi
fi

# curves BINARY INI OUT: the run's stored curves, one "variant step key value" a line, the
# value printed with 17 significant digits (a double's exact round trip).
curves() {
    rm -f "$tmp/c.db"
    (cd "$TOP" && "$1" run "$2" --db "$tmp/c.db" --set train.threads=1 --set train.max_steps="$STEPS" \
        --set train.log_every=1) >"$3.log" 2>&1
    echo "exit $?" >"$3"
    sqlite3 "$tmp/c.db" "select r.variant, m.step, m.key, printf('%.17g', m.value) from metrics m
        join runs r on r.id = m.run where m.key not in ('samples_per_s', 'sampler_batches_per_s')
        and m.key not like 'batch_share/%' order by r.id, m.key, m.step" >>"$3" 2>&1
}

# variant FILE V: the lines of variant V (the first field; the exit line has none)
variant() { awk -F'|' -v v="$2" '$1 == v' "$1"; }

fails=0 same=0 skipped=0
for ini in "$TOP"/samples/*.ini; do
    name=$(basename "$ini")
    case " ${LOSS_ID_SAMPLES:-$name} " in *" $name "*) ;; *) continue ;; esac
    curves "$base" "$ini" "$tmp/a"
    curves "$NNBENCH" "$ini" "$tmp/b"
    rows=$(($(wc -l <"$tmp/a") - 1))
    if cmp -s "$tmp/a" "$tmp/b"; then
        echo "ok: $name: $rows curve points bit-identical ($(head -1 "$tmp/a"))"; same=$((same + 1))
        continue
    fi
    if [ "$(head -1 "$tmp/a")" != "$(head -1 "$tmp/b")" ]; then
        echo "FAIL: $name: $(head -1 "$tmp/a") before, $(head -1 "$tmp/b") now"; fails=$((fails + 1)); continue
    fi
    # Some variant differs: run the baseline again; a variant whose baseline differs from
    # itself is not deterministic (e.g. quantum.policy = hybrid routes by measured times).
    curves "$base" "$ini" "$tmp/a2"
    for v in $(sed 1d "$tmp/a" | cut -d'|' -f1 | sort -u); do
        variant "$tmp/a" "$v" >"$tmp/va"; variant "$tmp/b" "$v" >"$tmp/vb"; variant "$tmp/a2" "$v" >"$tmp/va2"
        if cmp -s "$tmp/va" "$tmp/vb"; then
            echo "ok: $name [$v]: $(wc -l <"$tmp/va") curve points bit-identical"; same=$((same + 1))
        elif ! cmp -s "$tmp/va" "$tmp/va2"; then
            echo "skip: $name [$v]: the baseline differs from itself (not deterministic)"; skipped=$((skipped + 1))
        else
            echo "FAIL: $name [$v]: curves differ from the baseline's:"; fails=$((fails + 1))
            diff "$tmp/va" "$tmp/vb" | head -8 | sed 's/^/  | /'
        fi
    done
done
echo "loss identity against $commit: $same identical, $skipped not deterministic, $fails differ"
[ "$fails" -eq 0 ]
