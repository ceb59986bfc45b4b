#!/bin/sh
# data_trust.sh — issue 22: no wrong data used silently. `resume` refuses a run whose data
# changed since it was stored (other values, permuted labels, same row count) and warns for
# a run stored before data fingerprints; a damaged data cache (overwritten bytes, a FIFO
# in its place) is named in a note, rebuilt, and the run trains on the right data; a stratified run does not reuse the unstratified
# cache (engine/data/pipeline.c tests every [data] key, skip_rows among them).
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-data-trust.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && cat "$T/out" >&2; exit 1; }
export NNBENCH_CACHE_DIR="$T/cache"
loss() { python3 -c "import json,sys; print(repr(json.load(open(sys.argv[1]))['variants'][0]['final_train_loss']))" "$1" ||
    fail "no final_train_loss in $1"; }

# 300 rows of 4 features and a class 0..2; seed k changes every value.
csv() {
    awk -v k="$2" 'BEGIN { srand(k); print "a,b,c,d,label";
        for (i = 0; i < 300; i++) printf "%.4f,%.4f,%.4f,%.4f,%d\n", rand(), rand(), rand(), rand(), (i * 7 + k) % 3 }' >"$1"
}
csv "$T/d.csv" 1
cat >"$T/exp.ini" <<'INI'
[experiment]
name = data-trust
seed = 5
[data]
source = csv
path = d.csv
[model]
layers = dense:8:tanh, dense:3
[train]
optimizer = adam
lr = 0.01
batch = 32
epochs = 4
threads = 1
INI

# ---- resume checks the data ---------------------------------------------------------
"$NNBENCH" run "$T/exp.ini" --db "$T/r.db" >"$T/out" 2>&1 || fail "first run"
fp=$(sqlite3 "$T/r.db" "SELECT data_fingerprint FROM runs WHERE id=1")
case "$fp" in nnbd1*) ;; *) fail "no data fingerprint stored with the run: '$fp'" ;; esac
sqlite3 "$T/r.db" "UPDATE runs SET status='crashed' WHERE id=1"
cp "$T/d.csv" "$T/d.orig"
csv "$T/d.csv" 2                                  # same rows, other values and labels
"$NNBENCH" resume 1 --db "$T/r.db" >"$T/out" 2>&1 && fail "resume on rewritten data accepted"
grep -q "d.csv" "$T/out" || fail "the refusal does not name the file"
grep -q "training inputs differ" "$T/out" || fail "the refusal does not say what changed"
grep -q "training labels differ" "$T/out" || fail "the refusal does not say the labels changed"
grep -q "nnbench run" "$T/out" || fail "the refusal offers no way out"
[ "$(sqlite3 "$T/r.db" "SELECT status FROM runs WHERE id=1")" = crashed ] || fail "a refused resume changed the run"
cp "$T/d.orig" "$T/d.csv"                         # the run's own data again: resumed
"$NNBENCH" resume 1 --db "$T/r.db" >"$T/out" 2>&1 || fail "resume on the run's own data"
[ "$(sqlite3 "$T/r.db" "SELECT status FROM runs WHERE id=1")" = finished ] || fail "resumed run not finished"
grep -q "warning" "$T/out" && fail "a warning on a run with a fingerprint"
# A run stored before fingerprints (NULL): resumed, with one warning line.
sqlite3 "$T/r.db" "UPDATE runs SET status='crashed', data_fingerprint=NULL WHERE id=1"
"$NNBENCH" resume 1 --db "$T/r.db" >"$T/out" 2>&1 || fail "resume of a run without a fingerprint"
[ "$(grep -c "warning: .*cannot be checked" "$T/out")" = 1 ] || fail "no (or more than one) warning that the data cannot be checked"

# ---- a damaged cache is named, rebuilt, never trained on --------------------------------
"$NNBENCH" run "$T/exp.ini" --no-db --set data.cache=true --json >"$T/ref.json" 2>"$T/out" || fail "cached run"
cache=$(ls "$T"/cache/*.nnbc) || fail "no cache file written"
size=$(wc -c <"$cache")
printf '\377\377\377\377\377\377\377\377' | dd of="$cache" bs=1 seek=$((size - 2000)) conv=notrunc 2>/dev/null
"$NNBENCH" run "$T/exp.ini" --no-db --set data.cache=true --json >"$T/got.json" 2>"$T/out" || fail "run on a damaged cache"
grep -q "note: data.cache: .*$(basename "$cache") was damaged" "$T/out" || fail "no note naming the damaged cache"
[ "$(loss "$T/ref.json")" = "$(loss "$T/got.json")" ] || fail "trained on other data: loss $(loss "$T/got.json"), not $(loss "$T/ref.json")"
"$NNBENCH" run "$T/exp.ini" --no-db --set data.cache=true >"$T/out" 2>&1 || fail "run after the rebuild"
grep -q "damaged" "$T/out" && fail "the rebuilt cache is still called damaged"

# A FIFO at the cache path is refused without blocking, named, and replaced.
rm -f "$cache" && mkfifo "$cache"
timeout 60 "$NNBENCH" run "$T/exp.ini" --no-db --set data.cache=true >"$T/out" 2>&1 || fail "run with a FIFO at the cache path (exit $?)"
grep -q "note: data.cache: .*not a regular file" "$T/out" || fail "no note on the FIFO at the cache path"
[ -f "$cache" ] || fail "the FIFO was not replaced by a cache file"

# ---- stratify has its own cache file ---------------------------------------------------
"$NNBENCH" run "$T/exp.ini" --no-db --json >"$T/plain.json" 2>"$T/out" || fail "plain run"
"$NNBENCH" run "$T/exp.ini" --no-db --set data.stratify=true --json >"$T/ref.json" 2>"$T/out" || fail "stratified run"
[ "$(loss "$T/ref.json")" != "$(loss "$T/plain.json")" ] || fail "stratify changes nothing here: the check below proves nothing"
"$NNBENCH" run "$T/exp.ini" --no-db --set data.stratify=true --set data.cache=true --json >"$T/got.json" 2>"$T/out" || fail "stratified cached run"
[ "$(loss "$T/ref.json")" = "$(loss "$T/got.json")" ] || fail "stratified run reused the unstratified cache"
[ "$(ls "$T"/cache/*.nnbc | wc -l)" = 2 ] || fail "stratify did not get its own cache file"
echo "data_trust: ok"
