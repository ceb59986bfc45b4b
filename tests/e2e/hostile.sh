#!/bin/sh
# hostile.sh — hostile text and files stay inert: names holding escape sequences, bidi
# controls, Latin-1 bytes, HTML and spreadsheet formulas (written into the database as
# another SQLite client could, also in a quantization's scheme and kernel) are shown
# visibly by list/show/compare, escaped in the Markdown/HTML reports, valid in JSON and
# guarded in CSV; `run` refuses such names, a Latin-1 file, /dev/zero and a FIFO, each at
# once and with a clear message.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-hostile.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
DB="$T/h.db"
fail() { echo "FAIL: $*" >&2; exit 1; }
ESC=$(printf '\033')
BEL=$(printf '\007')
RLO=$(printf '\342\200\256')
# no_raw FILE WHAT: FILE holds no ESC, BEL or U+202E byte sequence
no_raw() {
    if grep -q "$ESC\|$BEL\|$RLO" "$1"; then
        od -c "$1" | head -20; fail "$2 lets raw control/bidi characters through"
    fi
}

"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --db "$DB" --set train.epochs=3 \
    >"$T/run.out" 2>&1 || { cat "$T/run.out"; fail "run exited $?"; }
"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant adam --db "$DB" --set train.epochs=3 \
    >"$T/run.out" 2>&1 || { cat "$T/run.out"; fail "run exited $?"; }
# What an old database or another client may hold: retitle the window, clear the screen,
# reverse text, a Latin-1 byte, HTML, and cells a spreadsheet would run.
python3 - "$DB" <<'PY' || fail "writing hostile names"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE runs SET name=?, error=? WHERE id=1",
           ("x\x1b]0;pwned\x07\x1b[2Jabc\u202efed<script>alert(1)</script>", "bad \x1b[31mred"))
db.execute("UPDATE runs SET name=CAST(? AS TEXT) WHERE id=2", (b"caf\xe9 <img src=x onerror=alert(1)>",))
db.execute("UPDATE runs SET variant=? WHERE id=2", ("=HYPERLINK(\"http://x\")",))
db.execute("UPDATE params SET value=? WHERE run=1 AND key='train.optimizer'", ("s\x1b[1mgd [x](javascript:1)",))
db.commit()
PY

"$NNBENCH" list --db "$DB" >"$T/list" 2>&1 || fail "list exited $?"
no_raw "$T/list" list
grep -q 'x\\x1b\]0;pwned\\x07' "$T/list" || { cat "$T/list"; fail "list does not show the escape visibly"; }
"$NNBENCH" show 1 --db "$DB" >"$T/show" 2>&1 || fail "show exited $?"
no_raw "$T/show" show
grep -q 'abc\\u202efed' "$T/show" || { cat "$T/show"; fail "show does not show U+202E visibly"; }
grep -q 'bad \\x1b\[31mred' "$T/show" || fail "show does not show the error visibly"
# A quantization record's scheme and kernel, as another client may have written them.
sqlite3 "$DB" "INSERT INTO quantizations(run, step, scheme, calibrate, kernel, fp32_bytes, int8_bytes)
  VALUES(1, 3, 'mi' || char(27) || ']0;t' || char(7) || 'n', 10, 'av' || char(27) || '[2Jx2', 100, 30)" ||
    fail "writing a hostile quantization"
"$NNBENCH" show 1 --db "$DB" >"$T/show" 2>&1 || fail "show of a hostile quantization exited $?"
no_raw "$T/show" "show's quantizations"
grep -q 'mi\\x1b\]0;t\\x07n, calibrate 10, av\\x1b\[2Jx2' "$T/show" ||
    { grep '#' "$T/show"; fail "show does not show the quantization's scheme and kernel visibly"; }
"$NNBENCH" compare 1 2 --db "$DB" >"$T/cmp" 2>&1 || fail "compare exited $?"
no_raw "$T/cmp" compare
# compare cuts names to its columns: whatever the cut, the output is valid UTF-8
python3 -c "import sys; open(sys.argv[1], 'rb').read().decode('utf-8')" "$T/cmp" || fail "compare cut a UTF-8 character"
python3 -c "import sys; open(sys.argv[1], 'rb').read().decode('utf-8')" "$T/list" || fail "list cut a UTF-8 character"

for ext in md html; do
    "$NNBENCH" report 1 2 --db "$DB" -o "$T/r.$ext" >/dev/null 2>&1 || fail "report .$ext exited $?"
    no_raw "$T/r.$ext" "report .$ext"
    grep -q '<script>\|<img' "$T/r.$ext" && fail "report .$ext passes HTML through"
    grep -q '&lt;script&gt;' "$T/r.$ext" || fail "report .$ext lost the name"
done
grep -q '\\\[x\\\](javascript:1)' "$T/r.md" || { grep -n javascript "$T/r.md"; fail "the Markdown report keeps a link"; }
"$NNBENCH" report 1 2 --db "$DB" -o "$T/r.json" >/dev/null 2>&1 || fail "report .json exited $?"
no_raw "$T/r.json" "report .json"
python3 - "$T/r.json" <<'PY' || fail "report .json is not valid JSON with the names kept"
import json, sys
raw = open(sys.argv[1], 'rb').read()
raw.decode('utf-8')                      # strict: no invalid UTF-8
d = json.loads(raw)
n = {r['id']: r['name'] for r in d['runs']}
assert n[1].startswith('x\x1b]0;pwned\x07') and '\u202e' in n[1], n[1]
assert n[2] == 'caf\ufffd <img src=x onerror=alert(1)>', n[2]
PY
"$NNBENCH" export 1 2 --db "$DB" -o "$T/e.csv" >/dev/null 2>&1 || fail "export exited $?"
no_raw "$T/e.csv" export
grep -qF "2,caf\\xe9 <img src=x onerror=alert(1)>,\"'=HYPERLINK(\"\"http://x\"\")\",train_loss," "$T/e.csv" \
    || { grep '^2,' "$T/e.csv" | head -3; fail "export does not guard a formula cell"; }
"$NNBENCH" report 2 --db "$DB" -o "$T/r.csv" >/dev/null 2>&1 || fail "report .csv exited $?"
grep -q "'=HYPERLINK" "$T/r.csv" || fail "report .csv does not guard a formula cell"

# -- run refuses what would become such a name ------------------------------------------
INI="$NNBENCH_TOP/samples/spirals-mlp.ini"
"$NNBENCH" run "$INI" --no-db --set "experiment.name=two
lines" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "a newline in --set experiment.name= exited $rc"
grep -q "a name may not hold control" "$T/err" || { cat "$T/err"; fail "newline name: unclear"; }
printf '[experiment]\nname = caf\351\n[model]\nlayers = dense:2\n' >"$T/latin1.ini"
"$NNBENCH" run "$T/latin1.ini" --no-db >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "a Latin-1 file exited $rc"
grep -q "latin1.ini:2: byte 0xe9 at column 11 is not UTF-8" "$T/err" || { cat "$T/err"; fail "Latin-1: no FILE:LINE"; }
printf '[experiment]\nname = x%s[2J\n[model]\nlayers = dense:2\n' "$ESC" >"$T/esc.ini"
"$NNBENCH" run "$T/esc.ini" --no-db >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "an escape in experiment.name exited $rc"
no_raw "$T/err" "the config error message"
grep -q "esc.ini:2: key 'name'.*'\\\\x1b' at byte 2" "$T/err" || { cat "$T/err"; fail "escape name: unclear"; }

# -- a database with a negative schema version (found by fuzzing: it indexed the migrations)
cp "$NNBENCH_TOP/tests/fuzz/corpus/store/crash-3a408d09bb33" "$T/neg.db"
sum0=$(sha256sum <"$T/neg.db")
"$NNBENCH" list --db "$T/neg.db" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] || fail "list of a database with schema version -1 exited $rc"
grep -q "has schema version -1" "$T/err" || { cat "$T/err"; fail "version -1: unclear"; }
[ "$(sha256sum <"$T/neg.db")" = "$sum0" ] || fail "the version -1 file was modified"

# -- input files that are not files -----------------------------------------------------
timeout 20 "$NNBENCH" run /dev/zero --no-db >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "run /dev/zero exited $rc"
grep -q "/dev/zero: is a character device, not a regular file" "$T/err" || { cat "$T/err"; fail "/dev/zero: unclear"; }
mkfifo "$T/fifo.ini"
timeout 20 "$NNBENCH" run "$T/fifo.ini" --no-db >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "run FIFO exited $rc (124 = it blocked)"
grep -q "is a FIFO (named pipe), not a regular file" "$T/err" || { cat "$T/err"; fail "FIFO: unclear"; }
head -c 1048577 /dev/zero | tr '\0' ' ' >"$T/big.ini"
"$NNBENCH" run "$T/big.ini" --no-db >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "a 1 MiB + 1 file exited $rc"
grep -q "1048577 bytes is over the 1 MiB cap for experiment files" "$T/err" || { cat "$T/err"; fail "cap: unclear"; }
# a BOM is fine
printf '\357\273\277[experiment]\nname = bom\n[data]\nsource = xor\n[model]\nlayers = dense:4:tanh, dense:2\n[train]\nepochs = 2\n' >"$T/bom.ini"
"$NNBENCH" run "$T/bom.ini" --no-db --json >"$T/bom.json" 2>"$T/err" || { cat "$T/err"; fail "a BOM file did not run"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['experiment']=='bom'" "$T/bom.json" \
    || fail "run --json of the BOM file"
echo "hostile text and files: inert"
