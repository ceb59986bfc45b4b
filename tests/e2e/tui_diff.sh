#!/bin/sh
# tui_diff.sh — the workbench's Compare screen of two marked runs ends with their op diff
# (the rows of `nnbench diff`), in a private tmux server.
set -u
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
: "${NNBENCH_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v tmux >/dev/null 2>&1 || { echo "tui_diff.sh: tmux is not installed"; exit 1; }
tmp=$(mktemp -d)
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
tmux_server diff
db="$tmp/t.db"
limit=${TUI_TIMEOUT:-20}
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=60
for v in sgd adam; do
    "$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant $v --set train.epochs=5 \
        --set profile.enabled=true --db "$db" >/dev/null 2>&1 || { echo "FAIL: run $v"; exit 1; }
done
# a scope only run #2 has: the screen must name it
sqlite3 "$db" "INSERT INTO op_stats(run,name,layer,kind,calls,total_ns,self_ns,flops,bytes,self_mem,peak_mem)
    VALUES (2,'extra.op','dense9',0,100,900000000,900000000,0,0,0,0)"
$T new-session -d -s t -n w -x 160 -y 50 \
    "NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'; echo NNBENCH-EXIT=\$?; sleep 60" || fail "cannot start tmux"
$T set -g escape-time 0 >/dev/null
wait_for "2/2 runs"
keys Home Space Space
wait_for "2 marked"
keys c
wait_for "spirals-mlp: 2 runs"
# the diff is the last section: go to the end, then page up to its heading
keys End
sleep 0.3
for i in 1 2 3 4 5 6; do cap | grep -qF "Op diff (B - A)" && break; keys PPage; sleep 0.3; done
wait_for "Op diff (B - A)"
# A is the run marked first: the list shows the newest (#2) on top
wait_for "A = #2 spirals-mlp/adam"
wait_for "B = #1 spirals-mlp/sgd"
wait_for "B-A /step"
wait_re "extra\.op +dense9 +[0-9.]+% +-[0-9.]+ ms"
wait_re "extra\.op .* only A"
echo "tui_diff.sh: Compare of two runs shows the op diff"
keys q
wait_for "NNBENCH-EXIT=0"
echo "tui_diff.sh: ok"
