#!/bin/sh
# attention_scaling.sh — samples/attention-scaling.ini at tiny sizes (its n divided by 16:
# 16..256, a few seconds) and the scaling view of its batch (issue 25): `compare` prints a
# table per measure (n x variant) with an exponent row of three numbers and log-log charts
# whose legend carries each variant's exponent; `report` writes the same section in
# Markdown, a log-log SVG chart per measure in HTML and a "scaling" member in JSON; the
# attention memory, which does not depend on the machine or its load, grows faster with
# full attention than with Linformer; runs of one size get no scaling view; no "nan"
# anywhere; scripts/linformer_table.py prints its ratio table beside the paper's figures.
# Times are never asserted (the machine may be loaded).
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-scaling.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && tail -40 "$T/out" >&2; exit 1; }
DB="$T/s.db"

# The sample itself, its sizes n/16: the same variants, layers and keys.
awk '/^data\.seq_len = / { $3 = $3 / 16 } { print }' "$NNBENCH_TOP/samples/attention-scaling.ini" >"$T/tiny.ini"
grep -q '^data.seq_len = 256$' "$T/tiny.ini" || fail "the sample's sizes were not found (data.seq_len = 4096)"
"$NNBENCH" run "$T/tiny.ini" --db "$DB" >"$T/out" 2>&1 || fail "the tiny scaling sample did not run"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE status = 'finished'")" = 15 ] || fail "15 finished runs expected"

"$NNBENCH" compare --last-batch --db "$DB" --no-color >"$T/out" 2>&1 || fail "compare --last-batch"
grep -q '^Scaling against n (data.seq_len)' "$T/out" || fail "compare: no scaling view"
for m in "step time" "attention time" "attention memory" "peak memory"; do
    grep -q "^$m: " "$T/out" || fail "compare: no table of $m"
done
[ "$(grep -cE '^  n +full +linformer +lsh *$' "$T/out")" = 4 ] || fail "compare: a header n | full | linformer | lsh per table expected"
[ "$(grep -cE '^  exponent +-?[0-9]+\.[0-9][0-9] +-?[0-9]+\.[0-9][0-9] +-?[0-9]+\.[0-9][0-9] *$' "$T/out")" = 4 ] ||
    fail "compare: an exponent row of three fitted numbers per table expected"
for n in 16 32 64 128 256; do
    [ "$(grep -cE "^  $n +[0-9]" "$T/out")" = 4 ] || fail "compare: a row n=$n per table expected"
done
grep -q 'attention time against n, log-log' "$T/out" || fail "compare: no log-log chart of attention time"
grep -qE 'full n\^-?[0-9]+\.[0-9][0-9] .*linformer n\^-?[0-9]+\.[0-9][0-9] .*lsh n\^' "$T/out" ||
    fail "compare: the chart's legend does not carry the exponents"
grep -qi 'nan' "$T/out" && fail "compare printed nan"
# memory is exact: full attention's scores grow as n^2, Linformer's as n*k
mem=$(awk '/^attention memory: / { m = 1 } m && /^  exponent/ { print $2, $3; exit }' "$T/out")
python3 -c "import sys; f, l = map(float, sys.argv[1:3]); sys.exit(0 if f > 1.5 and l < 1.2 and f > l + 0.5 else 1)" $mem ||
    fail "attention memory exponents full/linformer: $mem (full > 1.5, linformer < 1.2 expected)"

# two runs of one size: the comparison has no scaling view
"$NNBENCH" compare 1 2 --db "$DB" --no-color >"$T/out" 2>&1 || fail "compare 1 2"
grep -q 'Scaling against n' "$T/out" && fail "compare of one size shows a scaling view"

"$NNBENCH" report --last-batch --db "$DB" -o "$T/r.md" >"$T/out" 2>&1 || fail "report .md"
grep -q '^## Scaling against n' "$T/r.md" || fail "report.md: no scaling section"
[ "$(grep -cE '^\| exponent \| -?[0-9]+\.[0-9][0-9] \| -?[0-9]+\.[0-9][0-9] \| -?[0-9]+\.[0-9][0-9] \|$' "$T/r.md")" = 4 ] ||
    fail "report.md: an exponent row per measure expected"
grep -qi 'nan' "$T/r.md" && fail "report.md holds nan"
"$NNBENCH" report --last-batch --db "$DB" -o "$T/r.html" >"$T/out" 2>&1 || fail "report .html"
[ "$(grep -c 'data-scaling="' "$T/r.html")" = 4 ] || fail "report.html: a log-log chart per measure expected"
grep -qE '>full n\^-?[0-9]+\.[0-9][0-9]</text>' "$T/r.html" || fail "report.html: the legend lacks full's exponent"
"$NNBENCH" report --last-batch --db "$DB" -o "$T/r.json" >"$T/out" 2>&1 || fail "report .json"
python3 - "$T/r.json" <<'EOF' || fail "report.json: the scaling member is wrong"
import json, sys
s = json.load(open(sys.argv[1]))["scaling"]
assert s["x_key"] == "data.seq_len", s["x_key"]
assert [x["label"] for x in s["series"]] == ["full", "linformer", "lsh"], s["series"]
for x in s["series"]:
    assert [p["x"] for p in x["points"]] == [16, 32, 64, 128, 256], x["points"]
    assert all(isinstance(v, float) for v in x["exponents"].values()), x["exponents"]
EOF
"$NNBENCH" compare --last-batch --db "$DB" --json >"$T/c.json" 2>"$T/out" || fail "compare --json"
python3 -c "import json, sys; assert len(json.load(open(sys.argv[1]))['scaling']['series']) == 3" "$T/c.json" ||
    fail "compare --json: no scaling member"
# scripts/linformer_table.py: from the stored batch (k read from its runs), and running its
# own full/Linformer experiment at a given k
python3 "$NNBENCH_TOP/scripts/linformer_table.py" --nnbench "$NNBENCH" --db "$DB" --no-run >"$T/out" 2>&1 ||
    fail "linformer_table.py --no-run"
grep -q '^Measured .* load average ' "$T/out" || fail "linformer_table.py: when/where/load line missing"
grep -q '^Linformer k = 64,' "$T/out" || fail "linformer_table.py: k of the stored runs not read"
[ "$(grep -cE '^\| (16|32|64|128|256) \| [0-9.]+x \| [0-9.]+x \| [0-9.]+x \| [0-9.]+x \| - \| - \|$' "$T/out")" = 5 ] ||
    fail "linformer_table.py: a row of four ratios per n expected (no paper figure below n = 512)"
python3 "$NNBENCH_TOP/scripts/linformer_table.py" --nnbench "$NNBENCH" --k 128 --sizes 256,512 >"$T/out" 2>&1 ||
    fail "linformer_table.py --k 128 --sizes 256,512"
grep -qE '^\| 512 \| [0-9.]+x \| [0-9.]+x \| [0-9.]+x \| [0-9.]+x \| 1\.5x \| 1\.7x \|$' "$T/out" ||
    fail "linformer_table.py: n = 512 at k = 128 lacks the paper's 1.5x / 1.7x"
grep -qi 'nan' "$T/out" && fail "linformer_table.py printed nan"
echo "attention_scaling.sh: ok"
