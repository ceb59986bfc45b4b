#!/bin/sh
# tui_status.sh — the status bar offers what the screen can do (issue 27, item 6), in a
# private tmux server: a Newton run's Curves tab offers the chart keys but neither s, v, R
# nor Q; its Profile tab offers s and no chart keys (80x24 too); a finished spirals run
# offers Q; K on a finished run says why nothing stops; K on a run another nnbench process
# of this host runs (a CLI run started outside the workbench) asks, sends it SIGINT, and the
# database shows it interrupted; at 80x24 `s` on Runs cycles only the columns shown and
# the header's arrow is never cut away; that outside run's progress (issue 27, live
# progress of any run) shows from the store: "running N%" in the list, step/total, ETA and
# a samples/s sparkline on its Run screen.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_status.sh: tmux is not installed"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "tui_status.sh: sqlite3 is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server status
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; $T kill-server 2>/dev/null; rm -f "$tmux_sock"; rm -rf "$tmp"' EXIT INT TERM
db="$tmp/s.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_status.sh: $1"; }
q() { sqlite3 -cmd ".timeout 10000" "$db" "$1"; }
bar() { cap | tail -1; }
offers() { bar | grep -qF -- "$1" || fail "the status bar does not offer '$1'"; }
hides() { bar | grep -qF -- "$1" && fail "the status bar offers '$1', which does nothing here"; return 0; }

step "run 1: newton (3 steps, no checkpoint); run 2: spirals sgd (5 epochs)"
cli_run "run 1" "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --variant newton --set train.max_steps=3
cli_run "run 2" "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --set train.epochs=5

tui_start 120 40 "$db"
wait_for "2/2 runs"
hides "K stop"

step "the newton run: Curves offers chart keys, not s, v, R or Q"
keys / C-u "id:1" Enter
wait_for "1/2 runs"
keys Home Enter
wait_for "Curves   Profile"
wait_for "L log-y"
hides "s sort"; hides "v metric"; hides "R resume"; hides "Q quantize"; hides "K stop"
step "its Profile tab offers s, not the chart keys"
keys 2
wait_for "s sort"
hides "L log-y"; hides "x x-axis"; hides "m smooth"
step "K on a finished run says why nothing stops"
keys K
wait_for "nothing stopped: run #1 is finished"
keys Escape
wait_for "1/2 runs"
keys / C-u Enter
wait_for "2/2 runs"

step "the finished spirals run offers Q"
keys / C-u "id:2" Enter
wait_for "1/2 runs"
keys Home Enter
wait_for "Curves   Profile"
wait_for "Q quantize"
hides "R resume"
step "at 80x24 its Profile tab still shows no chart keys"
$T resize-window -t w -x 80 -y 24
keys 2
wait_for "s sort"
hides "L log-y"; hides "m smooth"
$T resize-window -t w -x 120 -y 40
keys Escape
wait_for "1/2 runs"
keys / C-u Enter
wait_for "2/2 runs"

step "run 3, started by another process: K stops it by pid (SIGINT)"
"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --set train.epochs=100000 \
    --set train.checkpoint_every=500 --db "$db" >"$tmp/r3.out" 2>&1 &
pid=$!
n=0
while [ "$(q "SELECT count(*) FROM runs WHERE id=3 AND status='running'" 2>/dev/null || echo 0)" != 1 ]; do
    n=$((n + 1)); [ $n -gt $((limit * 10)) ] && fail "run 3 never ran"
    sleep 0.1
done
keys r
wait_for "3/3 runs"
step "its progress, read from the store: running N% in the list, step/total, ETA and a samples/s sparkline"
wait_re "running [0-9]+%"
keys / C-u "id:3" Enter
wait_for "1/3 runs"
keys Home Enter
wait_for "Curves   Profile"
wait_re "running  step [0-9]+/[0-9]+ [0-9]+%  ETA [0-9]"
wait_re "[0-9] samples/s [▁▂▃▄▅▆▇█]{3}"
wait_for "K stop"
keys K
wait_for "Stop run #3 (pid $pid on this host"
keys y
n=0
while kill -0 "$pid" 2>/dev/null; do
    n=$((n + 1)); [ $n -gt $((limit * 10)) ] && fail "run 3's process did not stop"
    sleep 0.1
done
wait "$pid"
pid=
[ "$(q "SELECT status FROM runs WHERE id=3")" = interrupted ] || fail "run 3 is not interrupted: $(q "SELECT status, error FROM runs WHERE id=3")"

step "80x24 Runs: s cycles the columns shown; the sort arrow is always on screen"
keys Escape
wait_for "1/3 runs"
keys / C-u Enter
wait_for "3/3 runs"
$T resize-window -t w -x 80 -y 24
wait_for "sorted by id"
i=0
while [ $i -lt 10 ]; do
    keys s
    sleep 0.3
    cap | sed -n 2p | grep -qE '▲|▼' || fail "s sorted by a column the header does not show (no arrow)"
    cap | grep -qE 'sorted by [a-z]+[▲▼]' || fail "the sort state is not in the footer"
    i=$((i + 1))
done

keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_status.sh: ok"
