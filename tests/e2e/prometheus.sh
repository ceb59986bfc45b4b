#!/bin/sh
# prometheus.sh — the live /metrics endpoint against the real server: a 2-rank run
# (mpirun, --metrics 127.0.0.1:P, so rank 1 serves on P+1) with a hostile run name is
# scraped every 200 ms by Debian's prometheus, started on 127.0.0.1 with samples/prometheus.yml
# (its ports and interval replaced); through Prometheus' HTTP API: both targets are up (the
# exposition parses), train loss, step, all-reduce and op series exist for rank 0 and rank 1
# with the run label as written, counters never reset and steps never go back, the load
# imbalance query answers. Then a second run on rank 0's port while the first trains fails
# before training (exit 1, the reason, no run row). Both servers are stopped by the test
# (the run ends stored as failed, not 'running'); every wait is bounded; ports are free ones.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-prom.XXXXXX)
mp= pp=
cleanup() {
    [ -n "$mp" ] && kill "$mp" 2>/dev/null
    [ -n "$pp" ] && kill "$pp" 2>/dev/null
    sleep 0.5
    [ -n "$mp" ] && kill -9 "$mp" 2>/dev/null
    [ -n "$pp" ] && kill -9 "$pp" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$T/out" "$T/prom.log"; do [ -f "$f" ] && tail -n 15 "$f" >&2; done; exit 1; }
ok() { echo "ok: $*"; }
. "$NNBENCH_TOP/tests/e2e/lib/mpi.sh"
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
[ -x "$PROMETHEUS" ] || fail "$PROMETHEUS not found (make deps installs prometheus)"
PY=python3

# Free ports: N consecutive ones (P, P+1, ...) that can be bound on 127.0.0.1 now.
free_ports() {
    $PY - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    p = random.randint(20000, 60000 - n)
    socks = []
    try:
        for k in range(n):
            s = socket.socket(); s.bind(("127.0.0.1", p + k)); socks.append(s)
        print(p); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
else:
    sys.exit(1)
EOF
}
P=$(free_ports 2) || fail "no two free ports"
PP=$(free_ports 1) || fail "no free port for prometheus"

blobs_ini "$T/e.ini"
NAME='prom "e2e" \ run'
sed -i "s/^max_steps = 40/max_steps = 100000000/; s/^log_every = 1/log_every = 20/" "$T/e.ini"
printf '[experiment]\nname = %s\n' "$NAME" >>"$T/e.ini"
sed -e "s/127.0.0.1:9100/127.0.0.1:$P/; s/127.0.0.1:9101/127.0.0.1:$((P + 1))/; s/scrape_interval: 1s/scrape_interval: 200ms/" \
    "$NNBENCH_TOP/samples/prometheus.yml" >"$T/prometheus.yml"
grep -q "127.0.0.1:$((P + 1))" "$T/prometheus.yml" || fail "samples/prometheus.yml: the targets were not found to replace"

"$PROMETHEUS" --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
    --web.listen-address="127.0.0.1:$PP" >"$T/prom.log" 2>&1 &
pp=$!
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/db" --profile --metrics "127.0.0.1:$P" >"$T/out" 2>&1 &
mp=$!

# Every check through Prometheus' HTTP API, in one python (each start costs a second here).
$PY - "$PP" "$NAME" "$mp" <<'EOF' || fail "through Prometheus' API (above)"
import json, os, sys, time, urllib.parse, urllib.request
port, name, mp = sys.argv[1], sys.argv[2], int(sys.argv[3])
def q(expr):
    u = "http://127.0.0.1:%s/api/v1/query?query=%s" % (port, urllib.parse.quote(expr))
    return [(r["metric"], float(r["value"][1])) for r in json.load(urllib.request.urlopen(u, timeout=5))["data"]["result"]]
def fail(msg):
    sys.exit("FAIL: " + msg)
# Until both ranks have been scraped a dozen times with op counters (60 s at most).
t0 = time.time()
while True:
    try:
        r = q('count(count_over_time(nnbench_op_calls_total{op="allreduce"}[1m]) >= 12)')
        if r and r[0][1] == 2: break
    except OSError:
        pass
    try:
        os.kill(mp, 0)
    except OSError:
        fail("the 2-rank run ended early")
    if time.time() - t0 > 60: fail("prometheus did not get 12 scrapes of both ranks in 60 s")
    time.sleep(0.2)
up = q('up{job="nnbench"}')
if sorted(v for _, v in up) != [1, 1]: fail("both targets up: %s" % up)
print("ok: prometheus scrapes both ranks: the exposition parses")
for m in ["nnbench_train_loss", "nnbench_step", "nnbench_learning_rate", "nnbench_samples_per_second",
          "nnbench_allreduce_seconds_total", "nnbench_allreduce_bytes_total", "nnbench_compute_seconds_total",
          "nnbench_data_wait_share", "nnbench_memory_live_bytes", "nnbench_memory_peak_bytes",
          "nnbench_hybrid_clock_seconds", "nnbench_epoch", "nnbench_world_size"]:
    r = q(m)
    ranks = sorted(l["rank"] for l, _ in r)
    if ranks != ["0", "1"]: fail("%s: series of ranks %s, want 0 and 1" % (m, ranks))
    runs = set(l["run"] for l, _ in r)
    if runs != {name}: fail("%s: run label %s, want %r as written" % (m, runs, name))
if not q('nnbench_op_calls_total{rank="1",op="dense.fwd",layer="dense1"}'): fail("no op/layer series of rank 1")
if not all(v > 0 for _, v in q("nnbench_allreduce_bytes_total")): fail("no all-reduce bytes")
print("ok: loss, step, lr, samples/s, all-reduce, compute, data.wait, memory, hybrid clock, op series for both ranks; hostile run label intact")
# Counters never reset and steps never go back, over everything scraped so far.
for m in ["nnbench_op_calls_total", "nnbench_op_seconds_total", "nnbench_allreduce_bytes_total",
          "nnbench_compute_seconds_total", "nnbench_step"]:
    bad = q("resets(%s[5m]) > 0" % m)
    if bad: fail("%s went back: %s" % (m, bad))
n = min(v for _, v in q("count_over_time(nnbench_step[5m])"))
if n < 12: fail("too few samples to judge: %s" % n)
imb = q("max(rate(nnbench_compute_seconds_total[10s])) / avg(rate(nnbench_compute_seconds_total[10s]))")
if not imb or not imb[0][1] >= 1: fail("the imbalance query: %s" % imb)
print("ok: counters monotone over %d scrapes per rank; imbalance max/avg compute %.2f" % (n, imb[0][1]))
EOF

# The port of rank 0 is taken now: another run fails before training, with the reason.
"$NNBENCH" run "$T/e.ini" --db "$T/db2" --metrics "127.0.0.1:$P" >"$T/out2" 2>&1
rc=$?
[ $rc = 1 ] || fail "a taken port: exit $rc, want 1"
grep -q "cannot serve on 127.0.0.1:$P: Address already in use" "$T/out2" || fail "no reason given: $(cat "$T/out2")"
n=$(sqlite3 "$T/db2" "SELECT count(*) FROM runs" 2>/dev/null || echo 0)
[ "$n" = 0 ] || fail "a run row was left behind ($n)"
ok "a port in use fails before training (exit 1, the reason, no run row)"

kill "$mp"
i=0
while kill -0 "$mp" 2>/dev/null; do i=$((i+1)); [ $i -ge 100 ] && fail "mpirun did not stop in 10 s"; sleep 0.1; done
mp=
kill "$pp"
i=0
while kill -0 "$pp" 2>/dev/null; do i=$((i+1)); [ $i -ge 100 ] && fail "prometheus did not stop in 10 s"; sleep 0.1; done
pp=
st=$(sqlite3 "$T/db" 'SELECT status FROM runs')
[ "$st" != running ] || fail "the stopped run is still 'running'"
ok "both servers stopped; the run stored as $st"
