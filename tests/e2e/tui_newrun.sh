#!/bin/sh
# tui_newrun.sh — New run after a Quantize (issue 27, item 2), in a private tmux server: the
# form draws [ Open run #N ] for the quantized run, the cursor waits on it (not on Start, so
# Enter opens the run and trains nothing), and j from Start reaches it.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_newrun.sh: tmux is not installed"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "tui_newrun.sh: sqlite3 is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server newrun
db="$tmp/n.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_newrun.sh: $1"; }
q() { sqlite3 -cmd ".timeout 10000" "$db" "$1"; }

step "a finished spirals run (5 epochs)"
cli_run "run 1" "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --set train.epochs=5

tui_start 120 40 "$db"
wait_for "1/1 runs"

step "Q quantizes run 1"
keys Home Enter
wait_for "Curves   Profile"
keys Q
wait_for "calibration samples"
keys C-u 200 Enter
wait_for "scheme, minmax or percentile"
keys Enter
wait_for "Quantization #1"
keys Escape
wait_for "1/1 runs"

step "New run: the cursor is on [ Open run #1 ]; Enter opens it and trains nothing"
keys n
wait_for "[ Open run #1 ]"
keys Enter
wait_for "Curves   Profile"
wait_re "#1 "
[ "$(q "SELECT count(*) FROM runs")" = 1 ] || fail "Enter on New run after Q trained a run"

step "k to Start, j back to Open: the button is reachable"
keys Escape
wait_for "[ Open run #1 ]"
keys k j Enter
wait_for "Curves   Profile"
sleep 0.5
[ "$(q "SELECT count(*) FROM runs")" = 1 ] || fail "j did not reach [ Open run #1 ]: a run was started"

keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_newrun.sh: ok"
