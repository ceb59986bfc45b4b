#!/bin/sh
# store_cli.sh — end to end: `nnbench run` into a temp database, then list, show, compare,
# report (.md .html .json .csv, each parsed), export and delete, with their exit codes.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-store.XXXXXX)
trap 'rm -rf "$T"' EXIT
DB="$T/runs.db"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --db "$DB" --set train.epochs=10 \
    --report "$T/run-report.html" >"$T/run.out" 2>&1 || { cat "$T/run.out"; fail "run exited $?"; }
grep -q "stored as run 3" "$T/run.out" || fail "run did not store 3 runs"
[ -s "$T/run-report.html" ] || fail "run --report wrote nothing"

"$NNBENCH" list --db "$DB" >"$T/list" || fail "list exited $?"
for v in sgd momentum adam; do grep -q "spirals-mlp/$v *finished" "$T/list" || fail "list lacks $v"; done
NNBENCH_DB="$DB" "$NNBENCH" list --status finished --sort loss --limit 2 >"$T/list2" || fail "list filtered"
[ "$(grep -c finished "$T/list2")" = 2 ] || fail "list --limit 2"
"$NNBENCH" list --db "$DB" --sort nope >/dev/null 2>&1; [ $? = 2 ] || fail "bad sort is not a usage error"

"$NNBENCH" show 2 --db "$DB" >"$T/show" || fail "show exited $?"
grep -q "train.optimizer *momentum" "$T/show" || fail "show lacks config"
grep -q "blas_core" "$T/show" || fail "show lacks system"
grep -q "train_loss" "$T/show" || fail "show lacks metrics"
"$NNBENCH" show 99 --db "$DB" >/dev/null 2>"$T/err"; [ $? = 1 ] || fail "show of a missing run"
grep -q "no run 99" "$T/err" || fail "missing-run message"

"$NNBENCH" compare 1 2 3 --db "$DB" --target 0.3 >"$T/cmp" || fail "compare exited $?"
grep -q "train.lr" "$T/cmp" || fail "compare lacks differing keys"
grep -q "target train_loss *<= 0.3" "$T/cmp" || fail "compare lacks the target row"
grep -q "steps to target" "$T/cmp" || fail "compare lacks steps to target"
grep -q "(sim) hybrid to target" "$T/cmp" || fail "compare lacks hybrid time to target"
grep -q "#3 adam" "$T/cmp" || fail "compare lacks the legend"
"$NNBENCH" compare 1 3 --db "$DB" --metric test_acc --x time >/dev/null || fail "compare test_acc/time"
"$NNBENCH" compare 1 3 --db "$DB" --x hybrid_time >/dev/null || fail "compare hybrid_time"

for ext in md html json csv; do
    "$NNBENCH" report 1 2 3 -o "$T/r.$ext" --db "$DB" 2>/dev/null || fail "report .$ext"
    [ -s "$T/r.$ext" ] || fail "report .$ext empty"
done
python3 - "$T" <<'PY' || fail "report contents"
import csv, html.parser, json, sys
t = sys.argv[1]
class P(html.parser.HTMLParser):
    VOID = {"meta", "br", "img", "hr", "input", "link"}
    def __init__(s):
        super().__init__(); s.stack = []; s.svgs = []
    def handle_starttag(s, tag, a):
        if tag == "svg": s.svgs.append(dict(a))
        if tag not in s.VOID: s.stack.append(tag)
    def handle_startendtag(s, tag, a):
        pass
    def handle_endtag(s, tag):
        assert s.stack and s.stack[-1] == tag, (tag, s.stack[-5:])
        s.stack.pop()
p = P(); p.feed(open(t + "/r.html").read()); p.close()
assert not p.stack, p.stack
j = json.load(open(t + "/r.json"))
keys = set()
for r in j["runs"]:
    keys |= set(r["metrics"])
for k in keys:  # one chart per metric against step, one against time; losses also against hybrid time
    got = sorted(s["data-x"] for s in p.svgs if s.get("data-metric") == k)
    assert got == (["hybrid", "step", "time"] if "loss" in k else ["step", "time"]), (k, got)
order = [s["data-metric"] for s in p.svgs]
assert order.index("train_loss") < order.index("test_loss") < order.index("lr"), order  # loss charts first
assert {"train_loss", "test_acc"} <= keys, keys
assert [r["status"] for r in j["runs"]] == ["finished"] * 3
assert j["runs"][0]["params"]["train.optimizer"] == "sgd"
rows = list(csv.DictReader(open(t + "/r.csv")))
n_json = sum(len(m["step"]) for r in j["runs"] for m in r["metrics"].values())
assert len(rows) == n_json, (len(rows), n_json)
assert open(t + "/r.md").read().startswith("# nnbench report")
PY
"$NNBENCH" report 1 -o "$T/r.pdf" --db "$DB" 2>/dev/null; [ $? = 2 ] || fail "report .pdf not a usage error"

"$NNBENCH" export 1 -o "$T/e.csv" --db "$DB" 2>/dev/null || fail "export"
head -1 "$T/e.csv" | grep -q "^run,name,variant,key,step,epoch,wall_s,hybrid_s,value$" || fail "export header"

"$NNBENCH" delete 2 --db "$DB" </dev/null >/dev/null 2>&1; [ $? = 2 ] || fail "delete without --yes on a pipe"
"$NNBENCH" delete 2 --yes --db "$DB" >/dev/null || fail "delete --yes"
"$NNBENCH" list --db "$DB" | grep -q momentum && fail "run 2 still listed"
[ "$(sqlite3 "$DB" 'SELECT count(*) FROM metrics WHERE run=2')" = 0 ] || fail "metrics of run 2 left"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity"
for c in list show compare report export delete; do
    "$NNBENCH" $c --help | grep -q "usage: nnbench $c" || fail "$c --help"
done
echo "store_cli: ok"
