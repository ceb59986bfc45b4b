#!/bin/sh
# tui_hangup.sh — a workbench whose terminal goes away exits, whatever it was showing: its
# tmux server is killed while the main screen, a confirmation box and a text prompt are up
# (a modal loop used to spin on getch's ERR at full CPU, an orphan, when SIGHUP did not
# reach it).
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
command -v tmux >/dev/null 2>&1 || { echo "tui_hangup.sh: tmux is not installed"; exit 1; }
tmp=$(mktemp -d)
. "${NNBENCH_TOP:-.}/tests/e2e/lib/tmux.sh"
tmux_server hup
db="$tmp/h.db"
"$NNBENCH" run "${NNBENCH_TOP:-.}/samples/spirals-mlp.ini" --variant sgd --set train.epochs=1 --db "$db" >/dev/null 2>&1 \
    || { echo "FAIL: could not store a run"; exit 1; }
limit=10
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=30
for k in "" "d" "/"; do
    $T new-session -d -s t -n w -x 120 -y 40 "NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'" || fail "tmux"
    wait_for "spirals-mlp/sgd"             # the workbench is up (fails the test if it never is)
    case "$k" in
        d) keys d; wait_for "This cannot be undone" ;; # the confirmation box
        /) keys /; wait_for "filter (words" ;; # the text prompt
    esac
    pid=$($T list-panes -t w -F '#{pane_pid}')
    # the pane's shell may have exec'd nnbench or run it as a child: watch the nnbench process
    wb=$(pgrep -P "$pid" -f "tui --db $db" || echo "$pid")
    $T kill-server
    n=50; while [ $n -gt 0 ] && kill -0 "$wb" 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
    if kill -0 "$wb" 2>/dev/null; then
        kill -9 "$wb" 2>/dev/null
        echo "FAIL: the workbench (${k:-main screen}) still runs 5 s after its terminal went away"
        exit 1
    fi
    echo "tui_hangup.sh: exits with its terminal (${k:-main screen})"
done
echo "tui_hangup.sh: ok"
