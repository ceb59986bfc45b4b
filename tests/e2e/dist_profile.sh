#!/bin/sh
# dist_profile.sh — the profile of a real 2-rank data-parallel run (30 steps): `show` prints
# the per-rank rows (a rank column) and the load imbalance, whose figure equals max/mean
# over ranks of (step - allreduce*) per step recomputed here from the stored rows; the
# Markdown report carries the same line; the workbench's Profile tab shows both ranks'
# rows grouped under the imbalance, and v shows one rank at a time.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
command -v tmux >/dev/null 2>&1 || { echo "dist_profile.sh: tmux is not installed"; exit 1; }
D=$(mktemp -d /tmp/nnbench-e2e-distprof.XXXXXX)
T="tmux -L nnbench-distprof-$$ -f /dev/null"   # tests/e2e/lib/tmux.sh drives $T
trap '$T kill-server 2>/dev/null; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$D/out" ] && tail -n 20 "$D/out" >&2; exit 1; }
. "$NNBENCH_TOP/tests/e2e/lib/mpi.sh"

db="$D/p.db"
# samples/spirals-mlp.ini's sgd variant, 30 steps of batch 32 (16 rows per rank)
$MPIRUN -np 2 "$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant sgd --db "$db" --profile \
    --set train.max_steps=30 --set train.threads=1 >"$D/out" 2>&1 || fail "mpirun -np 2 --profile"
"$NNBENCH" show 1 --db "$db" --ops 100 >"$D/show" 2>&1 || fail "show"
"$NNBENCH" report 1 --db "$db" -o "$D/r.md" >"$D/out" 2>&1 || fail "report"
"$NNBENCH" compare 1 1 --db "$db" --no-color >"$D/cmp" 2>&1 || fail "compare"
python3 - "$db" "$D/show" "$D/r.md" "$D/cmp" <<'PY' || fail "show / report / compare of the 2-rank run"
import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
show, md, cmp = open(sys.argv[2]).read(), open(sys.argv[3]).read(), open(sys.argv[4]).read()
# compare's top ops say whose op each is: rank K's rows as "name rank K"
top = db.execute("SELECT name FROM op_stats WHERE run=1 AND kind=0 ORDER BY self_ns DESC, name LIMIT 3").fetchall()
for k, (name,) in enumerate(top):
    line = [l for l in cmp.splitlines() if l.startswith(f"top op {k + 1} ")][0]
    m = re.match(r"rank(\d+):(.*)", name)
    want = f"{m.group(2)} rank {m.group(1)} " if m else f"{name} "
    assert want in line and "rank1:" not in line, (line, name)
comp = []
for prefix in ("", "rank1:"):
    calls, step = db.execute("SELECT calls, total_ns FROM op_stats WHERE name=? AND kind=2", (prefix + "step",)).fetchone()
    comm = db.execute("SELECT coalesce(sum(total_ns), 0) FROM op_stats WHERE name LIKE ?", (prefix + "allreduce%",)).fetchone()[0]
    assert calls == 30, (prefix, calls)
    comp.append((step - comm) / calls)
want = max(comp) / (sum(comp) / 2)
m = re.search(r"^  load imbalance (\d+\.\d\d) \(max/mean compute per step over 2 ranks: slowest rank (\d)", show, re.M)
assert m, show
assert abs(float(m.group(1)) - want) <= 0.006, (m.group(1), want)
assert int(m.group(2)) == comp.index(max(comp)), (m.group(2), comp)
head = [l for l in show.splitlines() if l.startswith("  name ")][0]
assert " rank " in head, head
ranks = {l.split()[2] for l in show.splitlines() if l.startswith("  dense.fwd ")}
assert ranks == {"0", "1"}, ranks    # rank 1's rows as rank 1, without the rankK: prefix
assert "rank1:" not in show.split("top ops")[1], "rank prefix shown"
assert f"load imbalance {m.group(1)} (max/mean" in md, "report: no imbalance line"
assert "| name | layer | rank | self % |" in md, "report: no rank column"
print(f"dist_profile.sh: show and report: load imbalance {m.group(1)} (recomputed {want:.4f})")
PY

limit=20
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && limit=60
. "$NNBENCH_TOP/tests/e2e/lib/tmux.sh"
$T new-session -d -s t -n w -x 120 -y 60 "NNBENCH_DB= TERM=screen '$NNBENCH' tui --db '$db'; sleep 60" || fail "cannot start tmux"
$T set -g escape-time 0 >/dev/null
wait_for "1/1 runs"
keys Enter
wait_for "Curves   Profile"
keys 2
wait_for "ranks: all 2, grouped (v)"
wait_re "load imbalance [0-9]+\.[0-9]{2} \(max/mean"
wait_re "^ dense\.fwd +dense1 +0 "
wait_re "^ dense\.fwd +dense1 +1 "
cap | awk '/^ [a-z_.]+ +[-a-z0-9]+ +[01] / { r = $3; if (r < last) bad = 1; last = r } END { exit bad }' ||
    fail "Profile tab: rank rows are not grouped (rank 0, then rank 1)"
keys v
wait_for "ranks: 0 of 2 (v)"
keys v
wait_for "ranks: 1 of 2 (v)"
wait_re "^ dense\.fwd +dense1 +1 "
cap | grep -qE '^ dense\.fwd +dense1 +0 ' && fail "Profile tab, rank 1: a rank 0 row is shown"
keys v
wait_for "ranks: all 2, grouped (v)"
keys q q
echo "dist_profile.sh: ok"
