#!/bin/sh
# store_kill.sh — a run killed with SIGKILL: the database passes integrity_check, keeps
# every metric that was flushed before the kill, and the run shows as crashed next time
# (stored so by the next writer).
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-kill.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$T"' EXIT
DB="$T/runs.db"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --set train.epochs=100000 \
    --db "$DB" >"$T/run.out" 2>&1 &
pid=$!
# Wait (up to 30 s) until a few flushes have landed.
i=0
while :; do
    n=$(sqlite3 "$DB" "SELECT count(*) FROM metrics" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge 200 ] && break
    i=$((i+1)); [ $i -ge 300 ] && fail "no metrics appeared in 30 s"
    sleep 0.1
done
sleep 0.3
before=$(sqlite3 "$DB" "SELECT count(*) FROM metrics")
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after kill -9"
after=$(sqlite3 "$DB" "SELECT count(*) FROM metrics")
[ "$after" -ge "$before" ] || fail "lost metrics: $before flushed before the kill, $after after"
"$NNBENCH" list --db "$DB" >"$T/list" || fail "list after kill"
grep -q "spirals-mlp/sgd *crashed" "$T/list" || { cat "$T/list"; fail "run not shown as crashed"; }
# list only reads (it never writes a database); the next writer stores the status.
[ "$(sqlite3 "$DB" "SELECT status FROM runs WHERE id=1")" = running ] || fail "list wrote to the database"
"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --set train.epochs=1 --db "$DB" >/dev/null 2>&1 ||
    fail "a run after the kill"
[ "$(sqlite3 "$DB" "SELECT status FROM runs WHERE id=1")" = crashed ] || fail "status not stored as crashed"
sqlite3 "$DB" "SELECT error FROM runs WHERE id=1" | grep -q "ended without finishing" || fail "crash reason"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after marking"
"$NNBENCH" show 1 --db "$DB" >/dev/null || fail "show of the crashed run"
echo "store_kill: ok ($before metric rows flushed before the kill, $after kept)"
