#!/bin/sh
# store_files.sh — databases that are not what they should be: a non-SQLite file and a
# corrupt one (clear error, file untouched: same checksum), a read-only file and a
# read-only directory (list/show/compare/report work, `run` refuses before training).
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-files.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"

# -- not a database ------------------------------------------------------------------
seq 1 5000 >"$T/notes.db"
sum0=$(sha256sum <"$T/notes.db")
for c in "list" "show 1" "compare 1 2" "report 1 -o $T/x.md"; do
    $NNBENCH $c --db "$T/notes.db" >"$T/out" 2>"$T/err"; rc=$?
    [ $rc = 1 ] || fail "$c on a text file exited $rc"
    grep -q "not an SQLite database" "$T/err" || { cat "$T/err"; fail "$c: unclear error"; }
done
$NNBENCH run "$INI" --variant sgd --db "$T/notes.db" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] || fail "run on a text file exited $rc"
grep -q "not an SQLite database" "$T/err" || fail "run: unclear error"
grep -q "finished" "$T/out" && fail "run trained anyway"
[ "$(sha256sum <"$T/notes.db")" = "$sum0" ] || fail "the text file was modified"
ls "$T"/notes.db-* >/dev/null 2>&1 && fail "journal files were created next to it"

# -- corrupt database (valid header, scribbled pages) ---------------------------------
$NNBENCH run "$INI" --variant sgd --set train.epochs=20 --db "$T/c.db" >/dev/null 2>&1 || fail "making c.db"
size=$(stat -c %s "$T/c.db")
python3 - "$T/c.db" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
for i in range(4096, len(b)):
    b[i] = (i * 7919) & 0xff
open(p, "wb").write(bytes(b))
PY
sum0=$(sha256sum <"$T/c.db")
for c in "list" "show 1" "report 1 -o $T/y.json"; do
    $NNBENCH $c --db "$T/c.db" >"$T/out" 2>"$T/err"; rc=$?
    [ $rc = 1 ] || fail "$c on a corrupt db exited $rc"
    grep -qE "not a usable nnbench database|not an SQLite database" "$T/err" || { cat "$T/err"; fail "$c: unclear error"; }
done
$NNBENCH run "$INI" --variant sgd --db "$T/c.db" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] || fail "run on a corrupt db exited $rc"
[ "$(sha256sum <"$T/c.db")" = "$sum0" ] || fail "the corrupt file was modified"

# -- read-only file, then read-only directory -----------------------------------------
mkdir "$T/ro"
DB="$T/ro/runs.db"
$NNBENCH run "$INI" --set train.epochs=5 --db "$DB" >/dev/null 2>&1 || fail "making the read-only db"
check_readonly() {
    what=$1
    sum0=$(sha256sum <"$DB")
    $NNBENCH list --db "$DB" >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "$what: list"; }
    [ "$(grep -c finished "$T/out")" = 3 ] || fail "$what: list shows 3 runs"
    $NNBENCH show 1 --db "$DB" >/dev/null 2>"$T/err" || { cat "$T/err"; fail "$what: show"; }
    $NNBENCH compare 1 2 3 --db "$DB" >/dev/null 2>"$T/err" || { cat "$T/err"; fail "$what: compare"; }
    $NNBENCH report 1 2 -o "$T/ro-report.html" --db "$DB" 2>"$T/err" || { cat "$T/err"; fail "$what: report"; }
    $NNBENCH run "$INI" --variant sgd --db "$DB" >"$T/out" 2>"$T/err"; rc=$?
    [ $rc = 1 ] || fail "$what: run exited $rc"
    grep -q "read-only" "$T/err" || { cat "$T/err"; fail "$what: run's message"; }
    grep -q "finished" "$T/out" && fail "$what: run trained before refusing"
    $NNBENCH delete 1 --yes --db "$DB" >/dev/null 2>"$T/err"; rc=$?
    [ $rc = 1 ] || fail "$what: delete exited $rc"
    [ "$(sha256sum <"$DB")" = "$sum0" ] || fail "$what: the database changed"
}
chmod 444 "$DB"
check_readonly "read-only file"
chmod 644 "$DB"; chmod 555 "$T/ro"
check_readonly "read-only directory"
# Root ignores permission bits; as an unprivileged user they are enforced by the kernel.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chmod 755 "$T" "$T/ro"; chmod 444 "$DB"
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$NNBENCH" list --db "$DB" >"$T/out" 2>"$T/err" ||
        { cat "$T/err"; fail "list as nobody"; }
    [ "$(grep -c finished "$T/out")" = 3 ] || fail "list as nobody shows 3 runs"
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$NNBENCH" run "$INI" --variant sgd --db "$DB" \
        >/dev/null 2>"$T/err" && fail "run as nobody on a read-only db succeeded"
    grep -q "read-only" "$T/err" || { cat "$T/err"; fail "run as nobody: message"; }
fi
echo "store_files: ok"
