#!/bin/sh
# diff.sh — `nnbench diff A B` end to end: text, --json, --csv of two profiled runs (the
# shares add up to 1, a scope of one run only is named so), hostile op names made inert in
# every format, bad run ids and options (message, exit 2 or 1), a report of two runs with
# its diff section; a diff never changes the database and never waits for its writer.
. "$(dirname "$0")/lib/check.sh"
INI="$TOP/samples/spirals-mlp.ini"
DB="$tmp/d.db"
EPOCHS=20
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && EPOCHS=4

for v in sgd adam; do
    "$NNBENCH" run "$INI" --variant $v --set train.epochs=$EPOCHS --set profile.enabled=true --db "$DB" \
        >/dev/null 2>"$tmp/run.err" || { cat "$tmp/run.err"; bad "run $v"; exit 1; }
done
# A hostile scope in B only (any SQLite client can write the file): an escape sequence, a
# bidi override, a comma, a quote and a leading '=' (a spreadsheet formula).
sqlite3 "$DB" "INSERT INTO op_stats(run,name,layer,kind,calls,total_ns,self_ns,min_ns,max_ns,flops,bytes,self_mem,peak_mem)
    VALUES (2, '=evil' || char(27) || '[31m,\"x' || char(8238), 'lay' || char(27) || ']0;t' || char(7), 0, 1000, 5000000000, 5000000000, 1, 9, 0, 0, 0, 0)"

"$NNBENCH" diff 1 2 --db "$DB" >"$tmp/t.txt" 2>"$tmp/t.err" && ok "text exits 0" || { cat "$tmp/t.err"; bad "text exit"; }
grep -q "^A = #1 spirals-mlp/sgd" "$tmp/t.txt" && grep -q "^B = #2 spirals-mlp/adam" "$tmp/t.txt" && ok "text names A and B" || bad "text A/B lines"
grep -q "self time per step: A .* -> B .*: B-A" "$tmp/t.txt" && ok "text summary line" || bad "text summary"
grep -q "share" "$tmp/t.txt" && grep -q "B-A /step" "$tmp/t.txt" && grep -q "dense.fwd" "$tmp/t.txt" && ok "text table" || bad "text table"
grep -q "only B" "$tmp/t.txt" && ok "text: a scope of B only is marked 'only B'" || bad "only B in text"
if LC_ALL=C grep -q "$(printf '\033')" "$tmp/t.txt" || grep -q "$(printf '\342\200\256')" "$tmp/t.txt"; then
    bad "text: a raw escape or bidi character reached the terminal"
else
    grep -qF '\x1b' "$tmp/t.txt" && ok "text: hostile characters shown inert (\\x1b)" || bad "hostile name not shown"
fi
# The largest contribution first: the hostile scope (5 ms per step) dominates B-A.
sed -n 5p "$tmp/t.txt" | grep -q "=evil" && ok "text: rows sorted by contribution" || { sed -n 1,6p "$tmp/t.txt"; bad "sort order"; }

"$NNBENCH" diff 1 2 --json --db "$DB" >"$tmp/d.json" || bad "json exit"
"$NNBENCH" diff 1 2 --csv --db "$DB" >"$tmp/d.csv" || bad "csv exit"
/usr/bin/python3 - "$tmp/d.json" "$tmp/d.csv" <<'EOF' >"$tmp/py.out" 2>&1 && ok "json and csv: valid, shares sum to 1, only-in row, hostile text escaped" || { cat "$tmp/py.out"; bad "json/csv checks"; }
import csv, json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert d["a"]["id"] == 1 and d["b"]["id"] == 2, d["a"]
s = sum(r["share"] for r in rows)
assert abs(s - 1) < 1e-9, s
assert abs(sum(r["delta_s"] for r in rows) - d["delta_s"]) < 1e-12
only = [r for r in rows if r["only_in"]]
assert len(only) == 1 and only[0]["only_in"] == "B" and only[0]["name"].startswith("=evil\x1b"), only
assert only[0]["self_per_step_a_s"] is None and only[0]["calls_per_step"][0] is None
assert all(abs(r["delta_s"]) >= abs(n["delta_s"]) for r, n in zip(rows, rows[1:])), "not sorted"
raw = open(sys.argv[1], encoding="utf-8").read()
assert "\x1b" not in raw and "\u202e" not in raw, "raw control character in JSON"
c = list(csv.DictReader(open(sys.argv[2], newline="")))
assert len(c) == len(rows), (len(c), len(rows))
assert abs(sum(float(r["share"]) for r in c) - 1) < 1e-6
ev = [r for r in c if r["only_in"] == "B"]
assert len(ev) == 1 and ev[0]["name"].startswith("'=evil"), ev   # formula guard
assert ev[0]["self_per_step_a_s"] == "" and ev[0]["calls_per_step_b"] != ""
assert "\x1b" not in open(sys.argv[2]).read()
print("ok")
EOF

# Bad input: usage errors exit 2, a run that does not exist 1; each says what is wrong.
chk() {   # chk WANT_RC PATTERN ARGS...
    want=$1 pat=$2; shift 2
    "$NNBENCH" diff "$@" --db "$DB" >/dev/null 2>"$tmp/e.err"
    rc=$?
    [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/e.err" && ok "diff $* -> exit $want, '$pat'" ||
        { cat "$tmp/e.err"; bad "diff $*: exit $rc, wanted $want and '$pat'"; }
}
chk 2 "which runs" 1
chk 2 "is not a run id" 1 x
chk 2 "is not a run id" 1 "$(printf 'a\033[2J')"
grep -qF '\x1b' "$tmp/e.err" && ok "a hostile run id is shown inert" || bad "hostile run id echoed raw"
chk 1 "no run 99" 1 99
chk 2 "is a third" 1 2 3
chk 2 "unknown option" 1 2 --bogus
chk 2 "give one of them" 1 2 --json --csv
chk 2 "wants a number" 1 2 --rows x
"$NNBENCH" diff 1 2 --db "$tmp/missing.db" >/dev/null 2>&1; [ $? = 1 ] && [ ! -e "$tmp/missing.db" ] &&
    ok "a missing database: exit 1, no file created" || bad "missing database"

# A run without a profile: a note, not an error.
"$NNBENCH" run "$INI" --variant sgd --set train.epochs=2 --set profile.enabled=false --db "$DB" >/dev/null 2>&1
"$NNBENCH" diff 1 3 --db "$DB" >"$tmp/np.txt" 2>&1 && grep -q "was not profiled" "$tmp/np.txt" &&
    ok "an unprofiled run is named, exit 0" || { cat "$tmp/np.txt"; bad "unprofiled run"; }

# Reports of two runs carry the diff.
"$NNBENCH" report 1 2 -o "$tmp/r.md" --db "$DB" 2>/dev/null && grep -q "^## Op diff (B - A)" "$tmp/r.md" &&
    grep -q "only B" "$tmp/r.md" && ok "Markdown report of two runs has the op diff" || bad "md report diff"
"$NNBENCH" report 1 2 -o "$tmp/r.html" --db "$DB" 2>/dev/null && grep -q "<h2>Op diff (B - A)</h2>" "$tmp/r.html" &&
    ok "HTML report has the op diff" || bad "html report diff"
"$NNBENCH" report 1 2 -o "$tmp/r.json" --db "$DB" 2>/dev/null &&
    /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['diff']['b']['id']==2 and d['diff']['rows']" "$tmp/r.json" &&
    ok "JSON report of two runs has 'diff'" || bad "json report diff"

# Never changes the database: the files are byte for byte the same after every format.
sum_db() { cat "$DB" "$DB-wal" 2>/dev/null | md5sum; }
before=$(sum_db)
for f in "" --json --csv; do "$NNBENCH" diff 1 2 $f --db "$DB" >/dev/null 2>&1; done
[ "$(sum_db)" = "$before" ] && ok "diff leaves the database untouched" || bad "the database changed"

# Never waits for a writer: another connection holds the write lock (BEGIN IMMEDIATE,
# uncommitted) while diff runs; diff must finish well inside the 5 s busy timeout.
mkfifo "$tmp/sql"
sqlite3 "$DB" <"$tmp/sql" >/dev/null 2>&1 &
holder=$!
exec 3>"$tmp/sql"
printf "BEGIN IMMEDIATE;\nINSERT INTO op_stats(run,name,kind) VALUES (1,'held',0);\n" >&3
sleep 0.5
t0=$(date +%s%N)
"$NNBENCH" diff 1 2 --db "$DB" >"$tmp/h.txt" 2>&1; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 0 ] && [ $ms -lt 3000 ] && ! grep -q "held" "$tmp/h.txt" &&
    ok "diff while a writer holds the lock: exit 0 in $ms ms, uncommitted rows unseen" || { cat "$tmp/h.txt"; bad "diff under a held write lock (rc $rc, $ms ms)"; }
printf "ROLLBACK;\n.quit\n" >&3
exec 3>&-
wait $holder

# A run being written: diffs in a loop never fail and the writer finishes cleanly.
"$NNBENCH" run "$INI" --variant adam --set train.epochs=$((EPOCHS * 10)) --set profile.enabled=true --db "$DB" \
    >/dev/null 2>"$tmp/w.err" &
w=$!
loops=0 errs=0
while kill -0 $w 2>/dev/null && [ $loops -lt 200 ]; do
    "$NNBENCH" diff 1 last --db "$DB" >/dev/null 2>>"$tmp/l.err" || errs=$((errs + 1))
    loops=$((loops + 1))
done
wait $w; wrc=$?
[ $wrc = 0 ] && [ $errs = 0 ] && ! grep -qiE "locked|busy|database" "$tmp/w.err" &&
    ok "$loops diffs during a run: none failed, the writer finished" || { cat "$tmp/l.err" "$tmp/w.err"; bad "diff during a run (writer $wrc, $errs failed)"; }

[ $fails = 0 ] && echo "diff: all ok" || echo "diff: $fails failed"
exit $((fails > 0))
