# tmux.sh — helpers of the tmux-driven workbench tests (sourced by tests/e2e/tui.sh,
# tui_hangup.sh, tui_model.sh, gradlab.sh, dist_profile.sh, store_tui_concurrent.sh and the
# issue 27 scripts tui_newrun.sh, tui_compare.sh, tui_status.sh, tui_solver.sh, tui_rest.sh, tui_sort.sh):
# the caller sets T (tmux_server does, or the tmux command with its -L socket) and limit
# (seconds a wait_* may take) and names its window w.
# tmux_server NAME: T drives a tmux server of the test's own (socket nnbench-NAME-PID, no
# user configuration), killed at exit, its socket file and the caller's temporary
# directory $tmp removed.
tmux_server() {
    T="tmux -L nnbench-$1-$$ -f /dev/null"
    tmux_sock="${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/nnbench-$1-$$"
    trap '$T kill-server 2>/dev/null; rm -f "$tmux_sock"; rm -rf "$tmp"' EXIT INT TERM
}
cap() { $T capture-pane -p -t w 2>/dev/null; }
fail() {
    echo "FAIL: $1"
    echo "---- last screen ----"
    cap
    echo "---------------------"
    exit 1
}
# wait_for TEXT [seconds]: polls every 0.1 s until TEXT is on screen.
wait_for() {
    n=$(( ${2:-$limit} * 10 ))
    while [ "$n" -gt 0 ]; do
        cap | grep -qF -- "$1" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    fail "timed out waiting for '$1'"
}
# wait_re REGEX: as wait_for, for an extended regular expression.
wait_re() {
    n=$(( ${2:-$limit} * 10 ))
    while [ "$n" -gt 0 ]; do
        cap | grep -qE -- "$1" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    fail "timed out waiting for /$1/"
}
# wait_gone TEXT: polls until TEXT has left the screen.
wait_gone() {
    n=$(( ${2:-$limit} * 10 ))
    while [ "$n" -gt 0 ]; do
        cap | grep -qF -- "$1" || return 0
        sleep 0.1
        n=$((n - 1))
    done
    fail "'$1' is still on screen"
}
keys() { $T send-keys -t w "$@"; }
# click ROW COL: a left click (press, release) at screen row ROW, column COL, as xterm's
# mouse protocol sends it (one byte per coordinate; ncurses decodes columns 0-93 only).
click() {
    click_x=$(printf '%x' $((33 + $2)))
    click_y=$(printf '%x' $((33 + $1)))
    $T send-keys -t w -H 1b 5b 4d 20 "$click_x" "$click_y" 1b 5b 4d 23 "$click_x" "$click_y"
}
# tui_start COLS ROWS DB: the workbench on DB in window w of $T (from $NNBENCH_TOP, no
# default database), "NNBENCH-EXIT=N" shown when it ends.
tui_start() {
    $T new-session -d -s t -n w -x "$1" -y "$2" \
        "cd '$NNBENCH_TOP' && NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$3'; echo NNBENCH-EXIT=\$?; sleep 120" ||
        fail "cannot start tmux"
    $T set -g escape-time 0 >/dev/null
}
# cli_run LABEL ARGS...: nnbench run ARGS into $db, its output shown and the test failed
# when it fails.
cli_run() {
    label=$1
    shift
    "$NNBENCH" run "$@" --db "$db" >"$tmp/cli_run.out" 2>&1 || { cat "$tmp/cli_run.out"; fail "$label"; }
}
