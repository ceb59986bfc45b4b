#!/bin/sh
# store_truth.sh — what the database guarantees, from the command line (issue 10): outputs
# never overwrite the database; a run whose end is not committed exits 1 and is not called
# stored; a live run is not deleted unless --force, then its writer stops cleanly and ids
# are not reused; a negative user_version and another program's database are refused
# untouched; SIGTERM/SIGHUP stop a run as Ctrl-C does; /dev/null, a missing directory and
# an unwritable --trace are refused before training.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
command -v sqlite3 >/dev/null 2>&1 || { echo "store_truth.sh: sqlite3 is not installed"; exit 1; }
T=$(mktemp -d /tmp/nnbench-e2e-truth.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$T"/*.err; do [ -s "$f" ] && { echo "-- $f"; cat "$f"; }; done >&2; exit 1; }
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"
run5() { "$NNBENCH" run "$INI" --variant sgd --set train.epochs=5 "$@"; }
DB="$T/runs.db"
run5 --db "$DB" >/dev/null 2>&1 || fail "first run"
digest() { cksum <"$1"; }

echo "store_truth.sh: export/report onto the database are refused (case 2)"
before=$(sqlite3 "$DB" "SELECT count(*) FROM metrics")
"$NNBENCH" export 1 -o "$DB" --db "$DB" 2>"$T/x.err" && fail "export onto the database succeeded"
grep -q "it is the database" "$T/x.err" || fail "export onto the database: no reason given"
ln -s "$DB" "$T/link.csv"
"$NNBENCH" export 1 -o "$T/link.csv" --db "$DB" 2>"$T/x.err" && fail "export through a symlink to the database succeeded"
cp "$DB" "$T/r.json"
"$NNBENCH" report 1 -o "$T/r.json" --db "$T/r.json" 2>"$T/x.err" && fail "report onto its own database exited 0"
[ "$(sqlite3 "$T/r.json" "SELECT count(*) FROM runs")" = 1 ] || fail "report replaced its database"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity after the refused outputs"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM metrics")" = "$before" ] || fail "metrics lost after the refused outputs"
# A file nnbench did not create (here one named like the old temporary file) is left alone.
echo "mine" >"$T/rep.md.tmp"
"$NNBENCH" report 1 -o "$T/rep.md" --db "$DB" 2>"$T/x.err" || fail "report to a new file"
[ "$(cat "$T/rep.md.tmp")" = mine ] || fail "report replaced or removed rep.md.tmp, a file it did not create"
ls "$T" | grep -q nnbench- && fail "a temporary file was left behind"
rm -f "$T/x.err"

echo "store_truth.sh: a final write that fails is exit 1, not 'stored' (case 3)"
size=$(wc -c <"$DB")
# The database may not grow by more than ~64 KiB: the run's points cannot all be written.
python3 -c 'import resource,os,signal,sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); n=int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE,(n,n)); os.execvp(sys.argv[2], sys.argv[2:])' \
    $((size + 65536)) "$NNBENCH" run "$INI" --variant sgd --set train.epochs=300 --db "$DB" >"$T/full.out" 2>"$T/full.err"
rc=$?
[ $rc = 1 ] || fail "run onto a full disk exited $rc, not 1"
grep -q "stored as run" "$T/full.out" && fail "run onto a full disk said 'stored as run'"
grep -q "not stored" "$T/full.err" || fail "run onto a full disk gave no reason"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity after the full disk"
rm -f "$T/full.err"

echo "store_truth.sh: a live run is not deleted without --force; ids are never reused (case 4)"
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=100000 --db "$DB" >"$T/live.out" 2>"$T/live.err" &
pid=$!
i=0
until [ "$(sqlite3 "$DB" "SELECT count(*) FROM metrics m JOIN runs r ON r.id=m.run WHERE r.status='running' AND r.pid=$pid" 2>/dev/null)" -gt 0 ] 2>/dev/null; do
    i=$((i+1)); [ $i -ge 300 ] && fail "the live run stored nothing in 30 s"
    sleep 0.1
done
live=$(sqlite3 "$DB" "SELECT id FROM runs WHERE pid=$pid")
"$NNBENCH" delete "$live" --yes --db "$DB" >/dev/null 2>"$T/del.err" && fail "delete of a live run succeeded without --force"
grep -q -- "--force" "$T/del.err" || fail "refused delete does not mention --force"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE id=$live")" = 1 ] || fail "refused delete deleted the run"
"$NNBENCH" delete "$live" --yes --force --db "$DB" >/dev/null 2>"$T/del.err" || fail "delete --force"
wait $pid
rc=$?
pid=
[ $rc = 1 ] || fail "the writer of a deleted run exited $rc, not 1"
grep -q "deleted" "$T/live.err" || fail "the writer of a deleted run did not say why it stopped"
for t in metrics params op_stats run_profile solver_events system_info; do
    [ "$(sqlite3 "$DB" "SELECT count(*) FROM $t WHERE run NOT IN (SELECT id FROM runs)")" = 0 ] || fail "orphan rows in $t"
done
run5 --db "$DB" >"$T/next.out" 2>"$T/x.err" || fail "run after the delete"
next=$(sqlite3 "$DB" "SELECT max(id) FROM runs")
[ "$next" -gt "$live" ] || fail "run id $next reused (deleted run was $live)"
rm -f "$T/del.err" "$T/live.err" "$T/x.err"

echo "store_truth.sh: a negative user_version is refused untouched (case 5)"
cp "$DB" "$T/neg.db"
sqlite3 "$T/neg.db" "PRAGMA user_version=-1000000"
d0=$(digest "$T/neg.db")
"$NNBENCH" list --db "$T/neg.db" >/dev/null 2>"$T/neg.err"
rc=$?
[ $rc = 1 ] || fail "list of a negative user_version exited $rc"
grep -q "negative" "$T/neg.err" || fail "negative user_version: no reason"
run5 --db "$T/neg.db" >/dev/null 2>&1 && fail "run onto a negative user_version succeeded"
[ "$(digest "$T/neg.db")" = "$d0" ] || fail "the negative-version database was changed"
rm -f "$T/neg.err"

echo "store_truth.sh: another program's database is never modified (case 6)"
sqlite3 "$T/theirs.db" "CREATE TABLE runs(who TEXT, km REAL); INSERT INTO runs VALUES('ann', 5.2);"
sqlite3 "$T/empty.db" "VACUUM"
for f in theirs empty; do
    d0=$(digest "$T/$f.db")
    "$NNBENCH" list --db "$T/$f.db" >"$T/o.out" 2>"$T/o.err"
    "$NNBENCH" show 1 --db "$T/$f.db" >/dev/null 2>&1
    "$NNBENCH" export 1 -o "$T/o.csv" --db "$T/$f.db" >/dev/null 2>&1
    [ "$(digest "$T/$f.db")" = "$d0" ] || fail "read commands changed $f.db"
    [ -e "$T/$f.db-wal" ] && fail "read commands left $f.db-wal"
    [ "$(sqlite3 "$T/$f.db" 'PRAGMA user_version')" = 0 ] || fail "$f.db got a user_version"
done
run5 --db "$T/theirs.db" >/dev/null 2>"$T/o.err" && fail "run into another program's database succeeded"
grep -q "not an nnbench" "$T/o.err" || fail "another program's database: no reason"
[ "$(sqlite3 "$T/theirs.db" 'PRAGMA journal_mode')" = delete ] || fail "theirs.db was switched to WAL"
rm -f "$T/o.err"

echo "store_truth.sh: SIGTERM and SIGHUP stop a run as Ctrl-C does (case 7)"
for sig in TERM:15 HUP:1; do
    num=${sig#*:}
    sig=${sig%:*}
    db="$T/sig-$sig.db"
    "$NNBENCH" run "$INI" --variant sgd --set train.epochs=100000 --db "$db" >"$T/sig.out" 2>"$T/sig.err" &
    pid=$!
    i=0
    until [ "$(sqlite3 "$db" "SELECT count(*) FROM metrics" 2>/dev/null)" -gt 0 ] 2>/dev/null; do
        i=$((i+1)); [ $i -ge 300 ] && fail "SIG$sig: the run stored nothing in 30 s"
        sleep 0.1
    done
    kill -$sig $pid
    wait $pid
    rc=$?
    pid=
    want=$((128 + num))
    [ $rc = $want ] || fail "SIG$sig: exit $rc, not $want"
    [ "$(sqlite3 "$db" "SELECT status FROM runs")" = interrupted ] || fail "SIG$sig: status not interrupted"
    steps=$(sqlite3 "$db" "SELECT steps FROM runs")
    last=$(sqlite3 "$db" "SELECT max(step) FROM metrics WHERE key='train_loss'")
    [ "$steps" = "$last" ] || fail "SIG$sig: run says $steps steps, last stored point at step $last (tail lost)"
done
rm -f "$T/sig.err"

echo "store_truth.sh: /dev/null, a missing directory, an unwritable --trace (case 9)"
run5 --db /dev/null >/dev/null 2>"$T/n.err" && fail "--db /dev/null succeeded"
grep -q "not a regular file" "$T/n.err" || fail "--db /dev/null: no reason"
[ -e /dev/null-journal ] && fail "/dev/null-journal was created"
run5 --db "$T/no/such/dir/x.db" >/dev/null 2>"$T/n.err" && fail "--db in a missing directory succeeded"
grep -q "does not exist" "$T/n.err" || fail "missing directory not named as missing"
n0=$(sqlite3 "$DB" "SELECT count(*) FROM runs")
run5 --db "$DB" --trace "$T/no/such/dir/t.json" >"$T/n.out" 2>"$T/n.err"
rc=$?
[ $rc = 2 ] || fail "--trace to a missing directory exited $rc, not 2"
grep -q "nothing was trained" "$T/n.err" || fail "--trace checked only after training"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM runs")" = "$n0" ] || fail "a run was stored despite the bad --trace"
run5 --db "$DB" --trace "$DB" >/dev/null 2>"$T/n.err" && fail "--trace onto the database succeeded"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity at the end"
rm -f "$T/n.err"
echo "store_truth.sh: ok"
