#!/bin/sh
# profile.sh — `nnbench run --profile --trace` end to end: the key_averages table (header,
# op rows, footer) and a Chrome trace that parses, nests, stays in its step window, and has
# counter tracks (live bytes, step time, samples/s, prefetch queue depth; each track's times
# increasing) and one named process. Needs $NNBENCH and $NNBENCH_TOP (set by tests/run.sh) and python3.
set -eu
: "${NNBENCH:?set NNBENCH to the nnbench binary}"
top=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "profile.sh: $*" >&2; exit 1; }

# One variant, shortened (under ASan the full 100 epochs would be slow for nothing). Sorted
# by calls, which are deterministic, so the rows checked below are in the 6 shown whatever
# the machine's load does to the times.
"$NNBENCH" run "$top/samples/spirals-mlp.ini" --no-db --variant adam --set train.epochs=5 --set data.prefetch=true \
    --profile --profile-sort calls --profile-rows 6 --trace "$tmp/t.json" --trace-steps 2:4 >"$tmp/out" 2>"$tmp/err" \
    || { cat "$tmp/err" >&2; fail "run failed"; }
out="$tmp/out"
cat "$tmp/out" "$tmp/err" > "$tmp/all"

grep -q '^name  *self %  *self  *total  *avg  *calls  *GFLOP/s.*bytes  *GB/s  *self mem  *peak mem' "$tmp/all" \
    || fail "table header missing"
grep -q '^dense\.fwd ' "$tmp/all" || fail "no dense.fwd row"
grep -q '^dense\.bwd ' "$tmp/all" || fail "no dense.bwd row"
rows=$(sed -n '/^name /,/^Self time total/p' "$tmp/all" | grep -cv '^\(name \|---\|Self time\|(\)') || true
[ "$rows" -eq 6 ] || fail "--profile-rows 6 printed $rows rows"
grep -q '^Self time total: .*profiler overhead: ' "$tmp/all" || fail "footer missing"
grep -q '^Counters: ' "$tmp/all" || fail "counter note missing"

python3 - "$tmp/t.json" <<'PY' || fail "trace check failed"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
X = [e for e in ev if e["ph"] == "X"]
C = [e for e in ev if e["ph"] == "C"]
assert X, "no complete (X) events"
assert C, "no counter (C) events"
assert all(2 <= e["args"]["step"] <= 4 for e in X), "X event outside steps 2:4"
assert {e["args"]["step"] for e in X} == {2, 3, 4}, "steps 2..4 not all traced"
assert any(e["name"] == "dense.fwd" and e["args"].get("layer") for e in X), "no dense.fwd with a layer"
# counter tracks: each name has its one series, a sample per traced step at least
series = {"memory": "live_bytes", "step_time": "ms", "throughput": "samples_per_s", "prefetch_queue": "batches"}
assert {e["name"] for e in C} == set(series), sorted({e["name"] for e in C})
for name, key in series.items():
    track = [e for e in C if e["name"] == name]
    assert all(list(e["args"]) == [key] and e["args"][key] >= 0 for e in track), (name, track[:3])
    assert len(track) >= 3, (name, len(track))
    assert all(a["ts"] < b["ts"] for a, b in zip(track, track[1:])), ("times not increasing", name)
assert all(0 < e["args"]["ms"] < 60000 for e in C if e["name"] == "step_time")
assert all(e["args"]["batches"] == int(e["args"]["batches"]) for e in C if e["name"] == "prefetch_queue")
procs = [e for e in ev if e["ph"] == "M" and e["name"] == "process_name"]
assert len(procs) == 1 and procs[0]["args"]["name"] == "nnbench", procs
assert list(d)[:2] == ["displayTimeUnit", "otherData"] and d["otherData"]["generator"] == "nnbench profiler"
eps = 0.002
X.sort(key=lambda e: (e["ts"], -e["dur"]))
stack, depth = [], 0
for e in X:
    while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - eps:
        stack.pop()
    if stack:
        assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + eps, ("overlap", e, stack[-1])
    stack.append(e)
    depth = max(depth, len(stack))
assert depth >= 3, "events do not nest (depth %d)" % depth
print("trace ok: %d X events nested %d deep, %d C events" % (len(X), depth, len(C)))
PY
echo "profile.sh: ok"
