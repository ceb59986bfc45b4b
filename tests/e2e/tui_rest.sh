#!/bin/sh
# tui_rest.sh — issue 27, item 10 (workbench parts), in a private tmux server: New run's
# "training started" leaves the status bar when the training ends; an all-zero zero_frac
# heat map (tanh layers) is drawn at the lowest level on a 0..1 scale, not as '+'; the
# System tab shows the whole counters note at 80x24 (wrapped, not cut); c compares the
# marked runs the filter shows, as d deletes them, and says how many marks it hides; the
# Profile tab's b groups the rows by op and layer / op / layer / phase (item 7); / finds
# text on the Config tab; mouse clicks select and open rows and pick tabs.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_rest.sh: tmux is not installed"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "tui_rest.sh: sqlite3 is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server rest
db="$tmp/r.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_rest.sh: $1"; }
q() { sqlite3 -cmd ".timeout 10000" "$db" "$1"; }
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"

step "run 1: spirals with layer telemetry (tanh: no exact zeros); run 2: profiled"
cli_run "run 1" "$INI" --variant sgd --set train.epochs=3 --set train.telemetry=true
cli_run "run 2" "$INI" --variant sgd --set train.epochs=2 --set profile.enabled=true
[ "$(q "SELECT count(*) FROM metrics WHERE run=1 AND key LIKE 'zero_frac/%' AND value <> 0")" = 0 ] ||
    fail "run 1 has a non-zero zero_frac: this check needs an all-zero map"

tui_start 80 24 "$db"
wait_for "2/2 runs"

step "Layers tab of run 1: the all-zero zero_frac map at the lowest level, scale 0..1"
keys End Enter
wait_re "#1 spirals-mlp/sgd"
keys 6 v v v v v
wait_for "Layers: zero_frac"
wait_for "scale: 0 "
cap | grep -E '^ +dense[0-9]+ ' | grep -q '[^ .a-z0-9]' && fail "an all-zero zero_frac map is drawn above its lowest level"
cap | grep -qE '^ +dense1 +\.+ *$' || fail "the zero_frac map of dense1 is not drawn at the lowest level"
keys Escape
wait_for "2/2 runs"

step "System tab of run 2 at 80x24: the whole counters note"
note=$(q "SELECT counters_note FROM run_profile WHERE run=2")
if [ -n "$note" ]; then
    keys Home Enter
    wait_re "#2 spirals-mlp/sgd"
    keys 5 End
    wait_for "hardware counters"
    shown=$(cap | sed -n '/hardware counters/,/^ *$/p' | sed 's/^ *hardware counters *[0-9]* *//; s/^ *//' | tr -s ' \n' '  ')
    want=$(printf '%s' "$note" | tr -s ' \n' '  ')
    case "$shown" in
    *"$want"*) ;;
    *) fail "the counters note is not shown whole: '$shown' lacks '$want'" ;;
    esac
    keys Escape
    wait_for "2/2 runs"
else
    echo "tui_rest.sh: run 2 has no counters note (every counter counted): nothing to wrap"
fi

step "Profile tab of run 2: b groups the rows by op, layer, phase (issue 27 item 7)"
keys Home Enter
wait_re "#2 spirals-mlp/sgd"
keys 2
wait_for "by op and layer, sorted by self"
wait_for "b by"
keys b
wait_for "by op, sorted by self"
[ "$(cap | grep -cE '^ dense\.bwd ')" = 1 ] || fail "by op: dense.bwd is not one row"
cap | grep -qE '^ name +layer ' && fail "by op: the layer column is still shown"
keys b
wait_for "by layer, sorted by self"
wait_re "^ dense1 +[0-9.]+%"
keys b
wait_for "by phase, sorted by self"
wait_re "^ backward +[0-9.]+%"
wait_re "^ forward +[0-9.]+%"
keys b
wait_for "by op and layer, sorted by self"
step "Config tab: / finds a key, Enter again the next match"
keys 4 /
wait_for "find (case-insensitive"
keys C-u train.batch Enter
wait_re "'train.batch': line [0-9]+ of"
cap | sed -n 4p | grep -qi "train.batch" || fail "/ did not scroll the match to the top"
keys / Enter
wait_re "'train.batch': line [0-9]+ of"
keys / C-u no-such-key-anywhere Enter
wait_for "'no-such-key-anywhere' is not on this tab"
keys Escape
wait_for "2/2 runs"

step "New run: 'training started' leaves with the training"
keys n
wait_for "[ Start ]"
keys Home Down Down Enter
wait_for "train.epochs = "
keys C-u 2 Enter
wait_for "(edited)"
keys End Enter
wait_for "run #3 spirals-mlp"
wait_re "finished|diverged"
sleep 0.3
cap | tail -1 | grep -qF "training started" && fail "'training started' is still on the status bar after the run ended"
keys Escape
wait_for "3/3 runs"

step "mouse: a click selects a run's row, a second one opens it; a click on a tab picks it"
# X10 mouse reports as TERM=screen's kmous spells them: ESC [ M, then 32 + button (0
# press, 3 release), 32 + 1 + column, 32 + 1 + row.
keys Home
click 3 10      # the second row of the list: run #2
esc=$(printf '\033')
n=0
until $T capture-pane -p -e -t w | grep -q "${esc}\[7m *2  spirals"; do
    n=$((n + 1)); [ $n -gt $((limit * 10)) ] && fail "a click did not select run #2's row"
    sleep 0.1
done
cap | grep -qF "Curves   Profile" && fail "one click opened the run"
click 3 10
wait_for "Curves   Profile"
wait_re "#2 spirals-mlp/sgd"
click 1 12      # " Profile " spans columns 10-18 of the tab row
wait_for "by op and layer, sorted by self"
click 1 30      # " Config " spans 29-36
wait_for "Resolved configuration"
keys Escape
wait_for "3/3 runs"

step "c compares the marked runs the filter shows, as d deletes them"
keys Home Space Space Space
wait_for "3 marked"
keys / C-u "id:1" Enter
wait_for "1/3 runs"
keys c
wait_for "1 marked run shown, 2 hidden by the filter"
keys / C-u '!id:1' Enter
wait_for "2/3 runs"
keys c
wait_for "comparing the 2 marked runs shown; 1 more marked"
wait_re "2 runs +metric"

keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_rest.sh: ok"
