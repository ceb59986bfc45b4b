#!/bin/sh
# tui_solver.sh — issue 27, item 9 (workbench part), in a private tmux server: the Solver
# tab's kappa chart draws one series per block (a Newton step solves six systems; drawn as
# one line it zigzags into a solid ⣿⣿⣿ band), and Compare says it keeps the chart toggles
# (x = hybrid time, log y) set on the Run screen instead of inheriting them silently.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_solver.sh: tmux is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server solver
db="$tmp/n.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_solver.sh: $1"; }

step "run 1: newton, 300 steps (six blocks per step); run 2: newton, 3 steps"
cli_run "run 1" "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --variant newton --set train.max_steps=300
cli_run "run 2" "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --variant newton --set train.max_steps=3

tui_start 120 40 "$db"
wait_for "2/2 runs"

step "the Solver tab of run 1: one series per block, no solid band"
keys End Enter
wait_re "#1 newton-vs-sgd/newton"
keys 3
wait_for "kappa used (log)"
wait_for "block 0"
wait_for "block 5"
cap | grep -qF "kappa LAPACK" && fail "the chart still draws the blocks as one series"
cap | grep -qF "⣿⣿⣿⣿" && fail "the kappa chart fills a solid band"

step "x x L on Curves, then Compare says it keeps them"
keys 1 x x L
wait_for "hybrid time (s)"
keys Escape
wait_for "2/2 runs"
keys Home Space Space c
wait_for "charts as set before: x: hybrid time (s)  y: log"

keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_solver.sh: ok"
