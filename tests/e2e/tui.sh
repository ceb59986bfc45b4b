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
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server test
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
# Fields: File, Variant, train.epochs, train.max_steps, train.lr, train.batch, data.n,
# profile.enabled, Start.
wait_for "train.max_steps"
keys Up Up Up Up Up Up Enter
wait_for "train.epochs = "
keys C-u 5 Enter
wait_for "(edited)"
keys Down Down Down Down Down Enter
wait_for "profile.enabled = "
keys C-u true Enter
keys Down Enter
wait_for "run #1 spirals-mlp/sgd finished"
wait_for "[ Open run #1 ]"
# the live profile panel lists the ops (which come first follows their times: under the
# sanitizers the instrumented tanh loops outweigh the GEMMs)
wait_for "profile so far (ops by self time)"
wait_re "^ *(dense|tanh|bias)\.(fwd|bwd) +dense[12] +[0-9.]+%"

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
keys End                          # long values wrap: the checkpoints line is further down
# the run's checkpoints (docs/quantization.md): 2 kept, or 1 when the store's writer reached
# none before the last (a newer checkpoint replaces a waiting one; seen 2 in 15 CLI runs of
# this config on a loaded machine, before and after the checkpoint buffer pool)
wait_re "Checkpoints: [12] kept"
keys BTab
wait_for "Resolved configuration"
keys Escape
wait_for "1/1 runs"

step "a second run (variant adam) from New run"
keys n
wait_for "[ Start ]"
keys Home Down
keys Right Right
wait_for "adam"
keys Down Down Down Down Down Down Down Enter
wait_for "run #2 spirals-mlp/adam finished"
keys Escape
wait_for "2/2 runs"

step "mark two runs and compare"
keys Home Space Space
wait_for "2 marked"
keys c
wait_for "spirals-mlp: 2 runs   metric: train_loss"
wait_for "#2 adam"
wait_for "#1 sgd"
wait_for "Results"
wait_for "best test acc"
keys v
wait_for "metric: test_loss"
keys NPage
wait_for "Config (keys that differ)"
wait_for "train.optimizer"
keys NPage
wait_for "Top ops by self time"
keys PPage
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

step "delete asks first (declined), in a framed box"
keys d
wait_for "This cannot be undone"
wait_for "┌"
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

step "batch: all variants of newton-vs-sgd (30 steps each), then compare this batch"
keys u
wait_for "0 marked"
keys n
wait_for "[ Start ]"
keys Home Enter
wait_for "experiment file: "
keys C-u "samples/newton-vs-sgd.ini" Enter
wait_for "newton-vs-sgd.ini"
# Variant: Left from the first variant wraps to "all".
keys Down Left
wait_for "all 6 variants"
keys Down Down Enter
wait_for "train.max_steps = "
keys C-u 30 Enter
wait_for "(edited)"
keys Down Down Down Down Down Enter
wait_for "batch: 6 runs finished" $((limit * 4))
wait_for "[ Compare this batch: 6 runs ]"
keys c
wait_for "newton-vs-sgd: 6 runs   metric: train_loss"
wait_for "#4 momentum"
wait_for "kernels "
keys NPage
wait_for "Time ((sim): simulated clock"
wait_for "(sim) hybrid time"
wait_for "(sim) quantum time"
wait_for "(sim) hybrid to target"
keys Home
step "log x and normalised x"
# (x is still wall time from the Run screen: the chart toggles are shared)
keys X
wait_for "x: wall time (s) (log)"
keys X
wait_for "x: wall time (s) (normalised per run)"
keys X
wait_for "x: wall time (s)  y:"
keys Escape
wait_for "[ Start ]"

step "a run that diverges mid-batch; the batch goes on"
cat >"$tmp/div.ini" <<'INI'
[experiment]
name = divbatch
seed = 1
[data]
source = spirals
n = 400
[model]
layers = dense:16:relu, dense:2
loss = softmax_xent
[train]
optimizer = sgd
batch = 0
max_steps = 60
log_every = 1
[variant calm]
train.lr = 0.1
[variant boom]
train.lr = 1e30
[variant steady]
train.optimizer = adam
train.lr = 0.01
INI
keys Home Enter
wait_for "experiment file: "
keys C-u "$tmp/div.ini" Enter
wait_for "div.ini"
keys Down Left
wait_for "all 3 variants"
keys Down Down Down Down Down Down Down Enter
wait_for "batch: 2 finished, 1 not" $((limit * 2))
wait_for "boom diverged"
keys c
wait_for "divbatch: 3 runs"
wait_for "diverged"
keys Escape Escape
wait_for "11/11 runs"
# (the store's writer thread commits the end record; the list picks it up at its next poll)
wait_re "divbatch/steady +finished"

step "Solver tab: G reaches the last event; Left/Right and 1-7 switch tabs"
keys /
wait_for "filter (words"
keys C-u "variant:qnewton-hybrid" Enter
wait_for "1/11 runs"
keys Enter
wait_for "Curves   Profile   Solver   Config   System"
keys 3
wait_for "linear solves"
keys G
# 30 steps x 6 blocks: the last event is step 30, block 5.
n=$(( limit * 10 ))
until cap | grep -qE '^ +30 +5 +[0-9]+ '; do
    n=$((n - 1)); [ "$n" -gt 0 ] || fail "G on the Solver tab did not reach step 30, block 5"; sleep 0.1
done
keys Right
wait_for "Resolved configuration"
keys Left
wait_for "linear solves"
keys 6
wait_for "No layer telemetry in this run"
keys 7
wait_for "No int8 quantization of this run yet"
keys 1
wait_for "smoothing:"
keys Escape
keys / C-u Enter
wait_for "11/11 runs"

step "delete acts on what is visible: a filter hides a mark, that run stays"
keys Home Space
wait_for "1 marked"
keys /
keys C-u "variant:momentum" Enter
wait_for "1/11 runs"
keys Space
wait_for "2 marked"
keys d
wait_for "(1 marked, hidden by the filter, stay)"
keys y
wait_for "deleted #4"
keys / C-u Enter
wait_for "10/10 runs"
wait_for "1 marked"
cap | grep -q "spirals-mlp/sgd" || fail "the hidden marked run was deleted"
cap | grep -q "newton-vs-sgd/momentum" && fail "the visible marked run was not deleted"
keys u
wait_for "0 marked"

step "80x24: names cut with an ellipsis, ? help always in the status bar"
$T resize-window -t w -x 80 -y 24
wait_for "10/10 runs"
wait_for "? help"
# The status bar (last row) keeps "? help" at its end on every screen.
help_last() {
    n=$(( limit * 10 ))
    until cap | tail -1 | grep -q '? help *$'; do
        n=$((n - 1)); [ "$n" -gt 0 ] || fail "$1: '? help' is not at the end of the status bar"; sleep 0.1
    done
}
help_last "Runs at 80x24"
# Text entry (filter, New run's keys) in a framed box above the footer: the status bar keeps
# "? help", the footer and the runs the filter keeps stay in view.
keys /
wait_for "filter (words"
wait_for "Enter = ok   Esc = cancel"
keys a d a m
wait_for "> adam"
cap | grep -q "┌─" && cap | grep -q "└─" || fail "filter prompt at 80x24: no box"
cap | awk '/filter \(words/ { p = NR } /> adam/ { i = NR } /└─/ { b = NR } /runs  filter: adam/ { f = NR }
           END { exit !(p && i == p + 1 && b > i && f == b + 1) }' ||
    fail "filter prompt at 80x24: the box is not the question, the input, then the footer below it"
cap | grep -q "newton-vs-sgd/adam" || fail "filter prompt at 80x24: the runs it keeps are hidden"
help_last "filter prompt at 80x24"
keys Escape
wait_gone "Enter = ok"
wait_for "10/10 runs"
# Names are cut in the middle: the variants stay told apart.
cap | grep -q "on-hybrid" || fail "Runs at 80x24: the names lost what tells them apart"
cap | grep -q "on-quantum" || fail "Runs at 80x24: the names lost what tells them apart"
# (a whole loss and accuracy after a cut name: the figures themselves follow the solver's numerics)
cap | grep -Eq "on-quantum +finished +newton +spirals +0\.[0-9]{3,4} +0\.[0-9]{3}" || fail "Runs at 80x24: a loss was cut"
keys Enter
wait_for "Curves"
help_last "Run at 80x24"
keys Escape
keys n
wait_for "[ Start ]"
help_last "New run at 80x24"
keys Home Enter
wait_for "experiment file: "
wait_for "Enter = ok   Esc = cancel"
cap | grep -q "└─" || fail "New run prompt at 80x24: no box"
help_last "New run prompt at 80x24"
keys Escape
wait_gone "Enter = ok"
keys c
wait_for "divbatch: 3 runs"
help_last "Compare at 80x24"
keys Escape Escape
$T resize-window -t w -x 120 -y 40
wait_for "10/10 runs"

step "NO_COLOR: chart series told apart by marker glyphs, in the plot and the legend"
$T new-window -d -t t -n nc \
    "cd '$NNBENCH_TOP' && NNBENCH_DB= NO_COLOR=1 TERM=screen '$NNBENCH' tui --db '$db'; sleep 120" ||
    fail "cannot start a second window"
capnc() { $T capture-pane -p -t nc 2>/dev/null; }
n=$(( limit * 10 ))
until capnc | grep -q "10/10 runs"; do n=$((n - 1)); [ "$n" -gt 0 ] || fail "NO_COLOR workbench did not start"; sleep 0.1; done
$T send-keys -t nc Home Space Space c
n=$(( limit * 10 ))
until capnc | grep -qE '^ *\*\* #[0-9]+ [a-z]' && capnc | grep -qE '\+\+ #[0-9]+ [a-z]'; do
    n=$((n - 1))
    [ "$n" -gt 0 ] || { capnc; fail "NO_COLOR: the legend does not show the series' markers"; }
    sleep 0.1
done
$T send-keys -t nc q

step "quit"
keys q
wait_for "NNBENCH-EXIT=0"
echo "tui.sh: ok"
exit 0
