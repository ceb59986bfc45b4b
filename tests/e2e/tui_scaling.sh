#!/bin/sh
# tui_scaling.sh — the workbench's scaling view (issue 25) in a private tmux server: the
# scaling sample at tiny sizes (n/16), six runs marked (full, Linformer and LSH at two
# sizes) and compared: the v cycle goes train_loss ... test_acc, then each scaling measure
# as a log-log chart against n whose legend carries every variant's exponent, then back to
# train_loss; the scaling tables with their exponent rows follow the comparison's table.
# Then New run starts all 15 variants and Compare takes the whole batch (up to 16 runs).
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_scaling.sh: tmux is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server scaling
db="$tmp/s.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_scaling.sh: $1"; }

step "the scaling sample at n/16"
awk '/^data\.seq_len = / { $3 = $3 / 16 } { print }' "$NNBENCH_TOP/samples/attention-scaling.ini" >"$tmp/tiny.ini"
cli_run "the tiny scaling sample" "$tmp/tiny.ini"

step "compare the newest six runs: three variants at n = 128 and 256"
tui_start 120 45 "$db"
wait_for "15/15 runs"
keys Home Space Space Space Space Space Space c
wait_for "6 runs   metric: train_loss (v, then scaling against n)"

step "v past the four metrics: the scaling charts, log-log, exponents in the legend"
keys v v v v
wait_for "scaling: step time"
wait_for "step time against n, log-log"
for v in full linformer lsh; do wait_re "(^| )$v n\\^-?[0-9]+\\.[0-9][0-9]( |$)"; done
cap | grep -qi "nan" && fail "the scaling chart shows nan"
for m in "attention time" "attention memory" "peak memory"; do
    keys v
    wait_for "scaling: $m"
    wait_for "$m against n, log-log"
done
keys v
wait_for "metric: train_loss"

step "the tables follow the comparison: an exponent row per measure"
keys End
wait_re "^ +exponent +-?[0-9]+\\.[0-9][0-9] +-?[0-9]+\\.[0-9][0-9] +-?[0-9]+\\.[0-9][0-9] *$"

step "New run, all 15 variants of the tiny sample: Compare takes the whole batch"
keys Escape
wait_for "15/15 runs"
keys n
wait_for "[ Start ]"
keys Home Enter
wait_for "experiment file: "
keys C-u "$tmp/tiny.ini" Enter
keys Down Left
wait_for "all 15 variants"
keys Down Down Down Down Down Down Down Enter
wait_for "[ Compare this batch: 15 runs ]" 120
keys c
wait_for "15 runs   metric: train_loss (v, then scaling against n)"
keys v v v v v
wait_for "scaling: attention time"
for v in full linformer lsh; do wait_re "(^| )$v n\\^-?[0-9]+\\.[0-9][0-9]( |$)"; done

keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_scaling.sh: ok"
