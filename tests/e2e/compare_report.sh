#!/bin/sh
# compare_report.sh — the comparison users come for, end to end: Newton vs SGD (the
# newton-vs-sgd sample, shortened) plus two qnewton-crossover runs; `compare --last-batch`
# shows the batch with both clocks; list, compare, the run summary and `help run` fit 80
# columns; an 8-run HTML report shows both clocks and time to target, loss charts first, a
# loss-vs-hybrid-time chart on a log x, and legend boxes that do not overlap.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-cmp.XXXXXX)
trap 'rm -rf "$T"' EXIT
DB="$T/runs.db"
fail() { echo "FAIL: $*" >&2; exit 1; }
# Widest line of a file in characters (not bytes: "…" is one cell).
widest() { python3 -c 'import sys; print(max((len(l.rstrip("\n")) for l in open(sys.argv[1], encoding="utf-8")), default=0))' "$1"; }
# A file's lines wider than 80 characters, with their widths (for the failure message).
wide() { python3 -c 'import sys; [print(len(l), l) for l in (x.rstrip("\n") for x in open(sys.argv[1], encoding="utf-8")) if len(l) > 80]' "$1" >&2; }
export COLUMNS=80 LANG=C.UTF-8

for v in n64-q0.01 n64-q1; do
    "$NNBENCH" run "$NNBENCH_TOP/samples/qnewton-crossover.ini" --variant "$v" --db "$DB" >"$T/q.out" 2>&1 ||
        { cat "$T/q.out"; fail "qnewton-crossover $v exited $?"; }
done
"$NNBENCH" run "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --set train.max_steps=40 --db "$DB" >"$T/run.out" 2>&1 ||
    { cat "$T/run.out"; fail "newton-vs-sgd exited $?"; }
[ "$(widest "$T/run.out")" -le 80 ] || { cat "$T/run.out"; fail "the run summary is wider than 80 columns"; }
grep -q "(sim) hybrid" "$T/run.out" || fail "the run summary lacks the hybrid clock"

"$NNBENCH" compare --last-batch --db "$DB" >"$T/cmp" 2>&1 || { cat "$T/cmp"; fail "compare --last-batch exited $?"; }
grep -q "^newton-vs-sgd: 6 runs" "$T/cmp" || fail "compare --last-batch is not the 6 runs of the last batch"
for row in "wall time" "(sim) quantum time" "(sim) hybrid time" "steps to target" "wall to target" \
           "(sim) hybrid to"; do  # cut at 80 columns, the (sim) mark first
    grep -qF "$row" "$T/cmp" || fail "compare lacks the row '$row'"
done
grep -q "qnew…brid" "$T/cmp" || fail "compare: the names lost what tells them apart"
[ "$(widest "$T/cmp")" -le 80 ] || { wide "$T/cmp"; fail "compare is wider than 80 columns"; }
"$NNBENCH" compare --last-batch --x hybrid_time --x-scale log --db "$DB" >"$T/cmp2" || fail "compare --x-scale log"
grep -q "hybrid time (s, simulated), log x" "$T/cmp2" || fail "compare --x-scale log: no log x title"
"$NNBENCH" list --db "$DB" >"$T/list" || fail "list exited $?"
[ "$(widest "$T/list")" -le 80 ] || { wide "$T/list"; fail "list is wider than 80 columns"; }
grep -q "n-quantum" "$T/list" && grep -q "on-hybrid" "$T/list" || fail "list: the names lost what tells them apart"
"$NNBENCH" help run >"$T/help" || fail "help run"
[ "$(widest "$T/help")" -le 80 ] || { wide "$T/help"; fail "help run is wider than 80 columns"; }

"$NNBENCH" report 1 2 3 4 5 6 7 8 -o "$T/r.html" --db "$DB" 2>/dev/null || fail "report .html"
"$NNBENCH" report 1 2 3 4 5 6 7 8 -o "$T/r.md" --db "$DB" 2>/dev/null || fail "report .md"
for row in "(sim) quantum time" "(sim) hybrid time" "wall to target" "(sim) hybrid to target"; do
    grep -qF "| $row |" "$T/r.md" || fail "the Markdown report lacks the row '$row'"
done
python3 - "$T/r.html" <<'PY' || fail "report charts and legends"
import html.parser, sys
class P(html.parser.HTMLParser):
    def __init__(s):
        super().__init__(); s.svgs = []; s.cur = None
    def handle_starttag(s, tag, a):
        a = dict(a)
        if tag == "svg":
            s.cur = {"attrs": a, "boxes": []}; s.svgs.append(s.cur)
        if tag == "rect" and a.get("class") == "legend-box" and s.cur is not None:
            s.cur["boxes"].append(tuple(float(a[k]) for k in ("x", "y", "width", "height")))
    def handle_startendtag(s, tag, a):
        s.handle_starttag(tag, a)
    def handle_endtag(s, tag):
        if tag == "svg": s.cur = None
p = P(); p.feed(open(sys.argv[1], encoding="utf-8").read())
assert p.svgs, "no charts"
for svg in p.svgs:
    a, b = svg["attrs"], svg["boxes"]
    W, H = float(a["width"]), float(a["height"])
    assert len(b) == 8, (a.get("data-metric"), len(b))
    for i, (x, y, w, h) in enumerate(b):
        assert 0 <= x and x + w <= W and 0 <= y and y + h <= H, ("legend box outside the chart", a, b[i])
        for (x2, y2, w2, h2) in b[i + 1:]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y, ("legend boxes overlap", a, b[i])
order = [s["attrs"]["data-metric"] for s in p.svgs]
assert order[0] == "train_loss", order  # loss charts first
losses = [i for i, m in enumerate(order) if "loss" in m]
assert losses == list(range(len(losses))), order
hy = [s["attrs"] for s in p.svgs if s["attrs"]["data-metric"] == "train_loss" and s["attrs"]["data-x"] == "hybrid"]
assert hy and hy[0]["data-log-x"] == "1", hy  # 40 ms to hours: log x
PY
grep -q "(sim) hybrid to target" "$T/r.html" || fail "the HTML report lacks hybrid time to target"
echo "compare_report: ok"
