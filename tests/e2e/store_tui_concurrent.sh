#!/bin/sh
# store_tui_concurrent.sh — the workbench holds the database open and writes a run from New
# run while, from other processes, two headless runs write the same file, `nnbench list`
# and `sqlite3` read it. Afterwards the workbench still lists every run (after r), starts
# another run, and the file passes integrity_check with every point of every run present
# (issue 10, case 1: nothing outside SQLite may open the file in a process that holds a
# connection, or the process's POSIX locks are dropped and the WAL is lost).
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "store_tui_concurrent.sh: tmux is not installed"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "store_tui_concurrent.sh: sqlite3 is not installed"; exit 1; }

tmp=$(mktemp -d /tmp/nnbench-e2e-tuic.XXXXXX)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server tuic
db="$tmp/shared.db"
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"
EPOCHS=300      # the CLI runs
WB_EPOCHS=4000  # the workbench run: long enough (seconds) to overlap the CLI runs
limit=${TUI_TIMEOUT:-60}
if [ "${NNBENCH_SANITIZED:-0}" = 1 ]; then EPOCHS=40; WB_EPOCHS=600; limit=180; fi
step() { echo "store_tui_concurrent.sh: $1"; }

# The reference: the same run alone, for the number of points each run must have.
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=$EPOCHS --db "$tmp/ref.db" >/dev/null 2>&1 ||
    fail "reference run"
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=$WB_EPOCHS --db "$tmp/ref.db" >/dev/null 2>&1 ||
    fail "reference run (workbench length)"
ref_points=$(sqlite3 "$tmp/ref.db" "SELECT count(*) FROM metrics WHERE run=1")
ref_wb_points=$(sqlite3 "$tmp/ref.db" "SELECT count(*) FROM metrics WHERE run=2")

$T new-session -d -s t -n w -x 120 -y 40 \
    "cd '$NNBENCH_TOP' && NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'; echo NNBENCH-EXIT=\$?; sleep 120" ||
    fail "cannot start tmux"
$T set -g escape-time 0 >/dev/null
wait_for "No runs in this database yet"

# new_run EPOCHS: New run, spirals-mlp.ini variant sgd, train.epochs = EPOCHS, Start.
new_run() {
    keys n
    wait_for "[ Start ]"
    # Fields: File, Variant, train.epochs, train.max_steps, train.lr, train.batch, data.n,
    # profile.enabled, Start, then Open (the cursor waits there after a run).
    keys Home Down Down Enter
    wait_for "train.epochs = "
    keys C-u "$1" Enter
    wait_for "(edited)"
    keys Down Down Down Down Down Down Enter
}

step "New run in the workbench (run #1)"
new_run $WB_EPOCHS
wait_for "ETA "

step "while it runs: two CLI writers, nnbench list and sqlite3 on the same file"
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=$EPOCHS --db "$db" >"$tmp/a.out" 2>"$tmp/a.err" &
a=$!
"$NNBENCH" list --db "$db" >"$tmp/l1.out" 2>&1 || { cat "$tmp/l1.out"; fail "list during the runs"; }
sqlite3 "$db" "SELECT count(*) FROM runs" >/dev/null || fail "sqlite3 during the runs"
wait $a || { cat "$tmp/a.err"; fail "first CLI writer exited non-zero"; }
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=$EPOCHS --db "$db" >"$tmp/b.out" 2>"$tmp/b.err" ||
    { cat "$tmp/b.err"; fail "second CLI writer exited non-zero"; }
"$NNBENCH" list --db "$db" >"$tmp/l2.out" 2>&1 || { cat "$tmp/l2.out"; fail "list after the CLI runs"; }
sqlite3 "$db" "SELECT count(*) FROM metrics" >/dev/null || fail "sqlite3 after the CLI runs"

step "the workbench run finishes and every run is listed after r"
wait_for "run #1 spirals-mlp/sgd finished"
keys Escape
keys r
wait_for "3/3 runs"

step "the workbench starts another run"
new_run 5
wait_for "run #4 spirals-mlp/sgd finished"
keys Escape
keys r
wait_for "4/4 runs"
keys q
wait_for "NNBENCH-EXIT=0"

[ "$(sqlite3 "$db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check"
[ "$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE status='finished'")" = 4 ] ||
    { sqlite3 "$db" "SELECT id, status, error FROM runs"; fail "4 finished runs"; }
for id in 1 2 3; do
    want=$ref_points; [ $id = 1 ] && want=$ref_wb_points
    n=$(sqlite3 "$db" "SELECT count(*) FROM metrics WHERE run=$id")
    [ "$n" = "$want" ] || fail "run $id has $n metric rows, the same run alone $want"
done
echo "store_tui_concurrent.sh: ok (workbench run of $ref_wb_points points, 2 CLI runs of $ref_points, one more)"
