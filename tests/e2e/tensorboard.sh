#!/bin/sh
# tensorboard.sh — TensorBoard event files checked by two independent readers: a run with
# layer telemetry writes them live ([monitor] tensorboard / --tensorboard) and `nnbench export
# RUN --tensorboard DIR` writes them from the store. Reader 1: a .proto written here from
# TensorFlow's public field numbers (Event, Summary.Value, HistogramProto), compiled with
# protoc in the test and read with Debian's python3-protobuf, after a CRC32C (implemented
# here, bit by bit) check of every frame. Reader 2: a protobuf-free wire-format walk that
# must decode the same records. Values are compared with the database: every stored metric
# point (float32), the wall times of the export, and per telemetry step a histogram of each
# kind over the layers (count, sum, min, max). A directory that cannot be written fails the
# run before training (exit 1, the reason, no run row); export never changes the database;
# a stopped run resumed from its checkpoint writes a second event file up to its last step;
# the live and the exported file hold the same records (but for wall times and order).
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-tb.XXXXXX)
rp=
trap '[ -n "$rp" ] && kill -9 "$rp" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && tail -n 15 "$T/out" >&2; exit 1; }
ok() { echo "ok: $*"; }
PY=/usr/bin/python3
command -v protoc >/dev/null || fail "protoc not found (make deps installs protobuf-compiler)"
$PY -c 'import google.protobuf' 2>/dev/null || fail "$PY has no google.protobuf (make deps installs python3-protobuf)"

cat >"$T/e.ini" <<'EOF'
[experiment]
name = tb "x" \ run
seed = 3
[data]
source = spirals
n = 400
[model]
layers = dense:16:tanh, dense:16:relu, dense:2
[train]
optimizer = adam
lr = 0.01
batch = 32
epochs = 4
log_every = 5
telemetry = true
EOF
"$NNBENCH" run "$T/e.ini" --db "$T/db" --tensorboard "$T/live" >"$T/out" 2>&1 || fail "the run with --tensorboard"
sum_before=$(sqlite3 "$T/db" .dump | md5sum)
"$NNBENCH" export 1 --db "$T/db" --tensorboard "$T/export" >"$T/out" 2>&1 || fail "export --tensorboard"
[ "$(sqlite3 "$T/db" .dump | md5sum)" = "$sum_before" ] || fail "export changed the database"
live=$(ls "$T"/live/*/events.out.tfevents.* 2>/dev/null)
exp=$(ls "$T"/export/*/events.out.tfevents.* 2>/dev/null)
[ -f "$live" ] || fail "no live event file under $T/live: $(ls -R "$T/live")"
[ -f "$exp" ] || fail "no exported event file under $T/export: $(ls -R "$T/export")"
case "$exp" in */export/run1-tb__x____run/*) ;; *) fail "export directory name: $exp" ;; esac

cat >"$T/tb.proto" <<'EOF'
// The fields TensorBoard reads, with TensorFlow's numbers (tensorflow/core/util/event.proto,
// tensorflow/core/framework/summary.proto).
syntax = "proto3";
package tbcheck;
message HistogramProto {
  double min = 1; double max = 2; double num = 3; double sum = 4; double sum_squares = 5;
  repeated double bucket_limit = 6 [packed = true];
  repeated double bucket = 7 [packed = true];
}
message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    oneof value { float simple_value = 2; bytes obsolete_old_style_histogram = 3; bytes image = 4; HistogramProto histo = 5; }
  }
  repeated Value value = 1;
}
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what { string file_version = 3; bytes graph_def = 4; Summary summary = 5; }
}
EOF
(cd "$T" && protoc --python_out=. tb.proto) || fail "protoc"

cat >"$T/check.py" <<'EOF'
import math, sqlite3, struct, sys
sys.path.insert(0, sys.argv[1])
import tb_pb2
db, live, exp = sys.argv[2], sys.argv[3], sys.argv[4]

def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF

def masked(b):
    c = crc32c(b)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

def frames(path):
    d = open(path, "rb").read()
    at, out = 0, []
    while at < len(d):
        if at + 12 > len(d): sys.exit("%s: a cut frame header at %d" % (path, at))
        (n,) = struct.unpack_from("<Q", d, at)
        if struct.unpack_from("<I", d, at + 8)[0] != masked(d[at:at + 8]): sys.exit("%s: bad length CRC at %d" % (path, at))
        data = d[at + 12:at + 12 + n]
        if len(data) != n or struct.unpack_from("<I", d, at + 12 + n)[0] != masked(data):
            sys.exit("%s: bad data CRC at %d" % (path, at))
        out.append(data)
        at += 16 + n
    return out

# Reader 2: the protobuf wire format walked by hand (varint, fixed64, length, fixed32).
def fields(b):
    at = 0
    while at < len(b):
        key, at = varint(b, at)
        f, wt = key >> 3, key & 7
        if wt == 0: v, at = varint(b, at)
        elif wt == 1: v, at = b[at:at + 8], at + 8
        elif wt == 5: v, at = b[at:at + 4], at + 4
        elif wt == 2:
            n, at = varint(b, at)
            v, at = b[at:at + n], at + n
        else: sys.exit("wire type %d" % wt)
        yield f, v

def varint(b, at):
    v = s = 0
    while True:
        x = b[at]; at += 1
        v |= (x & 0x7F) << s; s += 7
        if not x & 0x80: return v, at

def raw_decode(rec):
    wall, step, out = None, 0, []
    for f, v in fields(rec):
        if f == 1: wall = struct.unpack("<d", v)[0]
        elif f == 2: step = v
        elif f == 5:
            for g, val in fields(v):
                tag, sv, h = None, None, None
                for k, x in fields(val):
                    if k == 1: tag = x.decode("utf-8")
                    elif k == 2: sv = struct.unpack("<f", x)[0]
                    elif k == 5: h = dict((hk, struct.unpack("<d", hx)[0]) for hk, hx in fields(x) if hk <= 5)
                out.append((tag, step, wall, sv, h))
    return out

def pb_decode(recs, path):
    first = tb_pb2.Event.FromString(recs[0])
    if first.file_version != "brain.Event:2": sys.exit("%s: first record is not file_version" % path)
    out = []
    for rec in recs[1:]:
        e = tb_pb2.Event.FromString(rec)
        for v in e.summary.value:
            kind = v.WhichOneof("value")
            h = {1: v.histo.min, 2: v.histo.max, 3: v.histo.num, 4: v.histo.sum, 5: v.histo.sum_squares} if kind == "histo" else None
            if h and (sum(v.histo.bucket) != v.histo.num or len(v.histo.bucket) != len(v.histo.bucket_limit)):
                sys.exit("%s: histogram %s: buckets do not add up" % (path, v.tag))
            out.append((v.tag, e.step, e.wall_time, v.simple_value if kind == "simple_value" else None, h))
    return out

def same(a, b):
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))

con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
started = con.execute("SELECT started FROM runs WHERE id = 1").fetchone()[0]
points = con.execute("SELECT key, step, wall, value FROM metrics WHERE run = 1").fetchall()
for path, check_wall in ((live, False), (exp, True)):
    recs = frames(path)
    a, b = pb_decode(recs, path), []
    for r in recs[1:]: b += raw_decode(r)
    if len(a) != len(b) or any(x[:2] != y[:2] or not same(x[3], y[3]) or x[4] != y[4] for x, y in zip(a, b)):
        sys.exit("%s: the two readers disagree" % path)
    scal = {(t, s): (w, v) for t, s, w, v, h in a if v is not None}
    for key, step, wall, value in points:
        if (key, step) not in scal: sys.exit("%s: stored point %s@%d missing" % (path, key, step))
        w, v = scal[(key, step)]
        want = struct.unpack("<f", struct.pack("<f", value if value is not None else float("nan")))[0]
        if not same(v, want): sys.exit("%s: %s@%d = %r, stored %r" % (path, key, step, v, value))
        if check_wall and abs(w - (started + wall)) > 1e-3: sys.exit("%s: wall time of %s@%d" % (path, key, step))
    hist = {(t, s): h for t, s, w, v, h in a if h is not None}
    kinds = 0
    for kind in ("grad_norm", "update_ratio", "zero_frac"):
        for (step,) in con.execute("SELECT DISTINCT step FROM metrics WHERE run = 1 AND key LIKE ?", (kind + "/%",)):
            vals = [v for (v,) in con.execute("SELECT value FROM metrics WHERE run = 1 AND step = ? AND key LIKE ?", (step, kind + "/%"))]
            h = hist.get((kind, step))
            if h is None: sys.exit("%s: no %s histogram at step %d" % (path, kind, step))
            if h[3] != len(vals) or abs(h[4] - sum(vals)) > 1e-9 * max(1, abs(sum(vals))) or h[1] != min(vals) or h[2] != max(vals):
                sys.exit("%s: %s histogram at step %d: %s vs %s" % (path, kind, step, h, vals))
            kinds += 1
    if kinds < 3: sys.exit("%s: too few telemetry histograms (%d)" % (path, kinds))
    print("%s: %d records, %d stored points and %d histograms match" % (path.rsplit("/", 2)[-2], len(recs), len(points), kinds))

# The live path (the writer thread fed by the run) and the export path (fed by the store)
# give the same records: each (tag, step) with the same float32 value, each histogram with
# the same count, min, max, bucket limits and counts, its sums within rounding (the export
# adds the values in another order); only wall times and the order differ.
def records(path):
    out = []
    for rec in frames(path)[1:]:
        ev = dict(fields(rec))
        for _, val in fields(ev[5]):
            v = dict(fields(val))
            if 2 in v: out.append((v[1], ev.get(2, 0), v[2], ()))
            else:
                h = dict(fields(v[5]))
                sums = (struct.unpack("<d", h[4])[0], struct.unpack("<d", h[5])[0])
                out.append((v[1], ev.get(2, 0), h[1] + h[2] + h[3] + h[6] + h[7], sums))
    return sorted(out, key=lambda r: r[:3])
ra, rb = records(live), records(exp)
if len(ra) != len(rb): sys.exit("live %d records, export %d" % (len(ra), len(rb)))
for x, y in zip(ra, rb):
    if x[:3] != y[:3] or any(abs(p - q) > 1e-9 * max(1, abs(p)) for p, q in zip(x[3], y[3])):
        sys.exit("live %r@%d vs export %r@%d differ" % (x[0], x[1], y[0], y[1]))
print("live and export: the same %d records" % len(ra))
EOF
$PY "$T/check.py" "$T" "$T/db" "$live" "$exp" >"$T/out" 2>&1 || fail "event files: $(cat "$T/out")"
ok "live and exported event files: CRC32C frames, two readers agree, every stored point and telemetry histogram matches, the same records in both ($(tr '\n' ';' <"$T/out"))"

# A directory that cannot be written: before training, with the reason, no run row.
: >"$T/afile"
"$NNBENCH" run "$T/e.ini" --db "$T/db2" --tensorboard "$T/afile/tb" >"$T/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "an unwritable directory: exit $rc, want 1"
grep -q "cannot write event files under '$T/afile/tb/" "$T/out" || fail "no reason given"
n=$(sqlite3 "$T/db2" "SELECT count(*) FROM runs" 2>/dev/null || echo 0)
[ "$n" = 0 ] || fail "a run row was left behind"
"$NNBENCH" export 1 --db "$T/db" --tensorboard "$T/afile/x" >"$T/out" 2>&1 && fail "export into a file's subdirectory succeeded"
grep -q "cannot write event files" "$T/out" || fail "export: no reason given"
ok "an unwritable directory fails the run before training (exit 1, no run row) and the export"

# A stopped run resumed from its checkpoint writes on into the same directory: the stored
# config's [monitor] serves the resume as it served the run (a second event file).
sed 's/^epochs = 4$/epochs = 4000\ncheckpoint_every = 50\nthreads = 1/' "$T/e.ini" >"$T/r.ini"
"$NNBENCH" run "$T/r.ini" --db "$T/r.db" --tensorboard "$T/res" >"$T/out" 2>&1 &
rp=$!
i=0
while [ "$(sqlite3 "$T/r.db" "SELECT count(*) FROM checkpoints" 2>/dev/null || echo 0)" -lt 1 ]; do
    i=$((i+1)); [ $i -ge 600 ] && { kill -9 $rp; fail "no checkpoint in 60 s"; }
    sleep 0.1
done
# Export of the run while it is being written: it answers, and the run goes on.
"$NNBENCH" export 1 --db "$T/r.db" --tensorboard "$T/mid" >"$T/out" 2>&1 || fail "export of a running run"
[ -s "$(ls "$T"/mid/*/events.out.tfevents.* | head -n 1)" ] || fail "export of a running run wrote nothing"
kill -TERM $rp 2>/dev/null || fail "the run ended before it could be stopped: make it longer"
wait $rp
rp=
"$NNBENCH" resume 1 --db "$T/r.db" >"$T/out" 2>&1 || fail "resume"
n=$(ls "$T"/res/*/events.out.tfevents.* | wc -l)
[ "$n" = 2 ] || fail "resume: $n event files, want 2 (the run's and the resume's)"
last=$(sqlite3 "$T/r.db" "SELECT max(step) FROM metrics WHERE key='train_loss'")
$PY - "$T" "$last" "$(ls -t "$T"/res/*/events.out.tfevents.* | head -n 1)" <<'PYEOF' || fail "the resume's event file lacks the last train_loss"
import struct, sys
sys.path.insert(0, sys.argv[1])
import tb_pb2
d, at, steps = open(sys.argv[3], "rb").read(), 0, []
while at < len(d):
    (n,) = struct.unpack_from("<Q", d, at)
    e = tb_pb2.Event.FromString(d[at + 12:at + 12 + n])
    steps += [e.step for v in e.summary.value if v.tag == "train_loss"]
    at += 16 + n
sys.exit(0 if steps and max(steps) == int(sys.argv[2]) else "train_loss steps %s, last stored %s" % (steps[-3:], sys.argv[2]))
PYEOF
ok "a resumed run writes its own event file beside the run's"
