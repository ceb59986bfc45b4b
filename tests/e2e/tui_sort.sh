#!/bin/sh
# tui_sort.sh — issue 27 in the workbench, in a private tmux server (200x50: the op table's
# roofline columns fit): o opens a sort picker (the sortable columns, the current one
# marked) on the runs list and the Profile tab's op table, and a click on a column title
# sorts by it (again: reversed); the Profile tab has "% bw" and "bound" from the
# calibration stored with the run and the warnings `run --profile` printed (a weaker BLAS
# core forced in the stored facts); c on one marked run compares it alone, its keys not at
# their default shown first and marked (as `compare ID`).
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_sort.sh: tmux is not installed"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "tui_sort.sh: sqlite3 is not installed"; exit 1; }

tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server sort
db="$tmp/s.db"
limit=${TUI_TIMEOUT:-30}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=120
step() { echo "tui_sort.sh: $1"; }
q() { sqlite3 -cmd ".timeout 10000" "$db" "$1"; }
# col TEXT: the 0-based screen column where TEXT first starts on row 1 (the table header)
col() { cap | sed -n 2p | awk -v t="$1" '{ print index($0, t) - 1 }'; }
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"

step "two profiled runs with a calibration of the test's own; run 1's BLAS core made weaker than its CPU"
mkdir -p "$tmp/xdg/nnbench"
printf 'peak_gflops = 100.000\nmean_gflops = 90.000\nm = 256\nn = 256\nk = 256\nreps = 3\nthreads = 1\ncore = Haswell\nwhen = 2026-12-01T00:00:00Z\nbw_gbs = 10.000\nbw_mib = 64\n' \
    >"$tmp/xdg/nnbench/calibration"
XDG_CACHE_HOME="$tmp/xdg" cli_run "run 1" "$INI" --variant sgd --set train.epochs=2 --set profile.enabled=true
XDG_CACHE_HOME="$tmp/xdg" cli_run "run 2" "$INI" --variant momentum --set train.epochs=2 --set profile.enabled=true
q "UPDATE system_info SET value='Prescott' WHERE run=1 AND key='blas_core'"
q "UPDATE system_info SET value='avx2' WHERE run=1 AND key='cpu_isa'"

tui_start 200 50 "$db"
wait_for "2/2 runs"

step "runs list: o lists the columns, the current one marked and under the cursor"
keys o
wait_for "sort the runs by"
wait_re "> (●|\*) id"
keys j
wait_re "^ *[│|] +(●|\*) id"
wait_re "> +name"
keys Enter
wait_gone "sort the runs by"
wait_re "sorted by name(▲|\^)"

step "runs list: a click on a column title sorts by it, again reverses"
c=$(col id)
[ "$c" -ge 0 ] && [ "$c" -lt 94 ] || fail "the id title is at column $c (the X10 click this test sends reaches 0-93 only)"
click 1 "$c"
wait_re "sorted by id(▲|\^)"
click 1 "$c"
wait_re "sorted by id(▼|v)"
click 1 "$(col name)"
wait_re "sorted by name(▲|\^)"

step "Profile tab of run 1: % bw and bound from the stored calibration, and the stored profile's warnings"
keys / C-u "id:1" Enter
wait_for "1/2 runs"
keys Enter
wait_re "#1 spirals-mlp/sgd"
keys 2
wait_for "by op and layer, sorted by self"
wait_for "Warning: the BLAS core Prescott is weaker than this CPU (avx2)"
cap | grep -qE '^ name .*FLOP/B +% bw +bound *$' || fail "the op table has no % bw / bound"
cap | grep -qE '^ dense\.fwd .* (compute|memory) *$' || fail "no dense.fwd row classed compute or memory"

step "Profile tab: o lists the sort keys, the current one marked; a click on a title sorts, again reverses"
keys o
wait_for "sort the ops by"
wait_re "> (●|\*) self"
keys j j Enter
wait_for "by op and layer, sorted by calls"
y=$(cap | grep -nE '^ name .*FLOP/B' | cut -d: -f1)
# "self %" (sorts by self): left of the bar, which takes the width left over, so its column
# does not follow the times
x=$(cap | sed -n "${y}p" | awk '{ print index($0, "self %") - 1 }')
[ "$x" -ge 0 ] && [ "$x" -lt 94 ] || fail "the self % title is at column $x (the X10 click this test sends reaches 0-93 only)"
click $((y - 1)) "$x"
wait_for "by op and layer, sorted by self   "
click $((y - 1)) "$x"
wait_for "by op and layer, sorted by self (reversed)"
keys o
wait_re "> (●|\*) self"
keys Escape
wait_gone "sort the ops by"

step "c on one marked run: Compare of it alone, its keys not at their default first and marked"
keys Escape
wait_for "1/2 runs"
# under HEADER TEXT: the line under the first line containing TEXT (empty when off screen)
under() { cap | awk -v t="$1" 'f { print; exit } index($0, t) { f = 1 }'; }
# see HEADER: scrolls down a line at a time (bounded) until a config row is under HEADER
see() {
    n=0
    until under "$1" | grep -qE '^ [a-z_]+\.[a-z_]+ ' || [ "$n" -ge 80 ]; do keys j; sleep 0.1; n=$((n + 1)); done
}
keys Space c
wait_for "spirals-mlp: 1 run   metric"
see "Config (keys not at their default)"
# the first row: the first key not at its default (data.classes), not the first key
# (data.augment, at its default)
under "Config (keys not at their default)" | grep -qE '^ data\.classes +2 *$' ||
    fail "the first config row is not data.classes = 2: '$(under "Config (keys not")'"
keys a
wait_for "Config (all keys; * not at their default, first)"
see "Config (all keys"
under "Config (all keys" | grep -qE '^ data\.classes +2 +\*$' ||
    fail "the first key with all keys is not the marked key not at its default: '$(under "Config (all keys")'"
keys End
wait_re '^ train\.epochs +2 +\*$|^ top op'
cap | grep -qE '^ [a-z_]+\.[a-z_]+ .*[^*]$' || fail "no key at its default after the marked ones with all keys"
keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_sort.sh: ok"
