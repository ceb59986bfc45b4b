#!/bin/sh
# list_width.sh — `nnbench list` fits the terminal in cells, not characters or bytes: at
# COLUMNS=80 and at COLUMNS=50, with names and an optimizer holding East Asian wide and
# fullwidth characters and an emoji (two cells each), names cut in the middle, and the
# newton-vs-sgd sample's names, no line is wider than the terminal.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-listw.XXXXXX)
trap 'rm -rf "$T"' EXIT
DB="$T/l.db"
fail() { echo "FAIL: $*" >&2; [ -f "$T/list" ] && cat "$T/list" >&2; exit 1; }
export LANG=C.UTF-8
# Widest line of a file in terminal cells (East Asian wide and fullwidth: two).
cells() {
    python3 -c 'import sys, unicodedata as u
print(max((sum(2 if u.east_asian_width(c) in "WF" else 1 for c in l.rstrip("\n"))
           for l in open(sys.argv[1], encoding="utf-8")), default=0))' "$1"
}

"$NNBENCH" run "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --set train.max_steps=5 --db "$DB" >"$T/out" 2>&1 ||
    { cat "$T/out"; fail "newton-vs-sgd exited $?"; }
python3 - "$DB" <<'PY' || fail "writing wide names"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE runs SET name=? WHERE id=1", ("日本語のテスト名前です",))
db.execute("UPDATE runs SET name=?, optimizer=? WHERE id=2", ("学習率の比較実験🚀ロケット長い名前", "ＡＤＡＭ"))
db.execute("UPDATE runs SET dataset=? WHERE id=3", ("データ集合ファッション",))
db.commit()
PY
for cols in 80 50; do
    COLUMNS=$cols "$NNBENCH" list --db "$DB" >"$T/list" 2>&1 || fail "list exited $?"
    w=$(cells "$T/list")
    [ "$w" -le "$cols" ] || fail "list is $w cells wide at COLUMNS=$cols"
    grep -q "^ *2  学習率" "$T/list" || fail "COLUMNS=$cols: the wide name lost its start"
    echo "list at COLUMNS=$cols: $w cells"
done
echo "list_width: ok"
