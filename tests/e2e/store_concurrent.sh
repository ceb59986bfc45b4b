#!/bin/sh
# store_concurrent.sh — two headless runs writing one database while a reader lists it in
# a loop: no error reaches the user and no row is lost (compared with the same runs made
# one at a time in another database; runs are deterministic for a seed).
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-conc.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"
EPOCHS=150
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && EPOCHS=8   # ASan: same checks, shorter runs

"$NNBENCH" run "$INI" --variant sgd --set train.epochs=$EPOCHS --db "$T/ref.db" >/dev/null 2>&1 || fail "reference sgd"
"$NNBENCH" run "$INI" --variant adam --set train.epochs=$EPOCHS --db "$T/ref.db" >/dev/null 2>&1 || fail "reference adam"

DB="$T/shared.db"
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=$EPOCHS --db "$DB" >"$T/a.out" 2>"$T/a.err" &
a=$!
"$NNBENCH" run "$INI" --variant adam --set train.epochs=$EPOCHS --db "$DB" >"$T/b.out" 2>"$T/b.err" &
b=$!
lists=0
while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do
    "$NNBENCH" list --db "$DB" >"$T/l.out" 2>"$T/l.err" || { cat "$T/l.err"; fail "list failed during the runs"; }
    [ -s "$T/l.err" ] && { cat "$T/l.err"; fail "list printed an error"; }
    lists=$((lists+1))
done
wait $a || { cat "$T/a.err"; fail "writer sgd exited non-zero"; }
wait $b || { cat "$T/b.err"; fail "writer adam exited non-zero"; }
for f in a b; do
    if grep -qiE "error|locked|busy|warning" "$T/$f.err" "$T/$f.out"; then cat "$T/$f.err"; fail "writer $f printed an error"; fi
done
q="SELECT r.variant, m.key, count(*), printf('%.6g', sum(m.value)) FROM metrics m JOIN runs r ON r.id=m.run
   WHERE m.key NOT IN ('samples_per_s') GROUP BY r.variant, m.key ORDER BY 1, 2"
sqlite3 "$T/ref.db" "$q" >"$T/ref.txt"
sqlite3 "$DB" "$q" >"$T/shared.txt"
[ -s "$T/ref.txt" ] || fail "reference has no metrics"
cmp -s "$T/ref.txt" "$T/shared.txt" || { diff "$T/ref.txt" "$T/shared.txt"; fail "rows differ from the reference"; }
[ "$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE status='finished'")" = 2 ] || fail "both runs finished"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity"
echo "store_concurrent: ok ($lists lists during the runs, $(sqlite3 "$DB" 'SELECT count(*) FROM metrics') rows)"
