#!/bin/sh
# tui.sh — end-to-end test of the ncurses workbench in a private tmux server: empty
# database hint, a run started from New run, every tab of the Run screen, Compare,
# filter and sort, help, delete (declined), resizes below and above 80x24, quit; and that
# docs/workbench.md holds the key list `nnbench tui --keys-markdown` prints.
# Polls the screen text with a timeout instead of sleeping fixed times.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui.sh: tmux is not installed"; exit 1; }

tmp=$(mktemp -d)
sock="nnbench-test-$$"
T="tmux -L $sock -f /dev/null"
cleanup() { $T kill-server 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
db="$tmp/t.db"
# Sanitized builds train ~10x slower: allow more time, same steps.
limit=${TUI_TIMEOUT:-20}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=60

# docs/workbench.md's workbench key list is `nnbench tui --keys-markdown`: it must not drift from
# the key table that drives the help screen and the status bar.
"$NNBENCH" tui --keys-markdown >"$tmp/keys.md" || { echo "FAIL: tui --keys-markdown exited $?"; exit 1; }
grep -qF '| `q` |' "$tmp/keys.md" || { echo "FAIL: tui --keys-markdown printed no key table"; exit 1; }
if python3 -c "import sys; d=open(sys.argv[2]).read(); sys.exit(0 if open(sys.argv[1]).read() in d else 1)" \
        "$tmp/keys.md" "$NNBENCH_TOP/docs/workbench.md"; then
    echo "tui.sh: docs/workbench.md holds the current workbench key list"
else
    echo "FAIL: docs/workbench.md: the workbench key list ('Keys' under 'Workbench') differs from nnbench tui --keys-markdown (paste its output there)"
    exit 1
fi

. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
step() { echo "tui.sh: $1"; }

$T new-session -d -s t -n w -x 120 -y 40 \
    "cd '$NNBENCH_TOP' && NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'; echo NNBENCH-EXIT=\$?; sleep 120" ||
    fail "cannot start tmux"
# tmux would otherwise hold an Escape for 500 ms to see whether a sequence follows.
$T set -g escape-time 0 >/dev/null

step "empty database shows the hint"
wait_for "No runs in this database yet"
wait_for "Press n to start a sample run"
wait_for "n new"

step "help screen"
keys '?'
wait_for "Keys on the Runs screen"
wait_for "mark / unmark a run for Compare"
keys Escape
wait_for "Press n to start a sample run"

step "New run: spirals-mlp.ini, variant sgd, 5 epochs, profiled"
keys n
wait_for "spirals-mlp.ini"
wait_for "[ Start ]"
# Fields: File, Variant, train.epochs, train.lr, train.batch, data.n, profile.enabled, Start.
keys Up Up Up Up Up Enter
wait_for "train.epochs = "
keys C-u 5 Enter
wait_for "(edited)"
keys Down Down Down Down Enter
wait_for "profile.enabled = "
keys C-u true Enter
keys Down Enter
wait_for "run #1 spirals-mlp/sgd finished"
wait_for "[ Open run #1 ]"
wait_for "tanh.fwd"

step "the run is listed"
keys Escape
wait_for "id"
wait_for "spirals-mlp/sgd"
wait_for "finished"
wait_for "1/1 runs"

step "Run screen: every tab"
keys Enter
wait_for "Curves   Profile   Solver   Config   System"
wait_for "train loss"
wait_for "accuracy"
keys L
wait_for "y: log"
keys x
wait_for "x: wall time"
keys m
wait_for "smoothing: 0.6"
keys Tab
wait_for "sorted by self"
wait_for "tanh.fwd"
keys s
wait_for "sorted by total"
keys Tab
wait_for "No Newton solves in this run"
keys Tab
wait_for "Resolved configuration"
wait_for "data.source                  = spirals"
keys End
wait_for "[variant adam]"
wait_re "[ -]([0-9]+)/\\1( |$)"   # scrolled to the last line (the count grows with the keys)
keys PPage
wait_for "Experiment file:"
keys Tab
wait_for "System:"
wait_for "blas"
wait_for "Checkpoints: 2 kept"   # the run's checkpoints (docs/quantization.md)
keys BTab
wait_for "Resolved configuration"
keys Escape
wait_for "1/1 runs"

step "a second run (variant adam) from New run"
keys n
wait_for "[ Start ]"
keys Up Up Up Up Up Up
keys Right Right
wait_for "adam"
keys Down Down Down Down Down Down Enter
wait_for "run #2 spirals-mlp/adam finished"
keys Escape
wait_for "2/2 runs"

step "mark two runs and compare"
keys Home Space Space
wait_for "2 marked"
keys c
wait_for "2 runs   metric: train_loss"
wait_for "#2 spirals-mlp/adam"
wait_for "#1 spirals-mlp/sgd"
wait_for "Metrics"
wait_for "best test acc"
keys v
wait_for "metric: test_loss"
keys NPage
wait_for "Config (only keys that differ"
wait_for "train.optimizer"
wait_for "Top ops by self time"
keys a
wait_for "Config (all keys"
wait_for "data.classes"
keys Escape
wait_for "2/2 runs"

step "filter and sort"
keys /
wait_for "filter (words"
keys a d a m
wait_for "1/2 runs"
keys Enter
wait_for "filter: adam"
cap | grep -q "spirals-mlp/sgd" && fail "filter 'adam' still shows the sgd run"
keys / C-u Enter
wait_for "2/2 runs"
keys s
wait_for "sorted by name"
wait_for "name▲"
cap | awk '/spirals-mlp\/sgd/ { s = NR } /spirals-mlp\/adam/ { a = NR } END { exit !(s && a && a < s) }' ||
    fail "s (name, ascending) did not put adam above sgd"
keys S
wait_for "name▼"
# name descending: sgd above adam
cap | awk '/spirals-mlp\/sgd/ { s = NR } /spirals-mlp\/adam/ { a = NR } END { exit !(s && a && s < a) }' ||
    fail "S did not reverse the order"

step "delete asks first (declined)"
keys d
wait_for "This cannot be undone"
keys n
wait_gone "This cannot be undone"
wait_for "2/2 runs"

step "resize 100x30, 60x20 and back"
$T resize-window -t w -x 100 -y 30
wait_for "2/2 runs"
$T resize-window -t w -x 60 -y 20
wait_for "Terminal too small: 60x20"
wait_for "at least 80x24"
$T resize-window -t w -x 120 -y 40
wait_for "2/2 runs"
wait_gone "Terminal too small"

step "quit"
keys q
wait_for "NNBENCH-EXIT=0"
echo "tui.sh: ok"
exit 0
