#!/bin/sh
# tui_compare.sh — Compare's text is neither cut nor overwritten (issue 27, item 4), in a
# private tmux server, six runs: at 120x40 the scroll position has a row of its own (the
# last run's cell stays whole), the `*` marking a differing key survives with all keys
# shown (at 120 and 80 columns), and at 80x24 the chart keeps a plot at least 8 rows tall.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_compare.sh: tmux is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server compare
db="$tmp/c.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_compare.sh: $1"; }

step "six short spirals runs (sgd and adam, three learning rates)"
for lr in 0.1 0.2 0.3; do
    for v in sgd adam; do
        cli_run "run $v lr=$lr" "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant $v --set train.epochs=2 --set train.lr=$lr
    done
done

start() { # start COLS ROWS: the workbench comparing all six runs
    tui_start "$1" "$2" "$db"
    wait_for "6/6 runs"
    keys Home Space Space Space Space Space Space c
    wait_for "6 runs   metric: train_loss"
}
# The position must stand alone on its row, never after a cell.
pos_alone() {
    cap | grep -qE '^ +[0-9]+-[0-9]+/[0-9]+ *$' || fail "$1: no row holds the scroll position alone"
    cap | grep -qE '[^ ] +[0-9]+-[0-9]+/[0-9]+ *$' && fail "$1: the scroll position is drawn after text"
    return 0
}

step "120x40: the scroll position on its own row, the last cell whole"
start 120 40
pos_alone "120x40 top"
keys End
wait_re "train.optimizer +adam +sgd +adam +sgd +adam +sgd *$"
pos_alone "120x40 end"

step "120x40, all keys: the differing keys keep their *"
keys a
wait_for "Config (all keys)"
keys End
wait_re "train.lr +0.3 +0.3 +0.2 +0.2 +0.1 +0.1 +\\*$"
wait_re "train.optimizer +adam +sgd +adam +sgd +adam +sgd +\\*$"
cap | grep -qE '^ train.momentum .*\*$' && fail "a key all runs share is marked"
pos_alone "120x40 all keys"

step "80x24: the chart's plot is at least 8 rows tall; the * survives at 80 columns"
keys a Home
$T resize-window -t w -x 80 -y 24
wait_re "[0-9]+-[0-9]+/[0-9]+ *$"
sleep 0.3
rows=$(cap | awk '/└/ { exit } /^ *[-0-9.e+]*[┤│]/ { n++ } END { print n + 0 }')
[ "$rows" -ge 8 ] || fail "the chart plots on $rows rows at 80x24 with 6 runs"
pos_alone "80x24"
keys a End k k k k k k k k k k
wait_re "train.lr +0.3 .*0.1  \\*$"

keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_compare.sh: ok"
