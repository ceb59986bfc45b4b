#!/bin/sh
# run.sh BUILD SECONDS TARGET... — `make fuzz`: runs each libFuzzer target for SECONDS from
# its seed corpus tests/fuzz/corpus/TARGET (new inputs go to BUILD/corpus/TARGET, not into
# git). A crash is minimised and copied into the seed corpus as crash-<sha1> (so every
# replay checks it from then on) and the target fails. Each run appends one line to
# tests/fuzz/HISTORY: date, target, seconds, executions, crashes.
BUILD=$1; S=$2; shift 2
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
failed=""
for t in "$@"; do
    bin="$BUILD/fuzzer/$t"
    work="$BUILD/corpus/$t"
    seeds="tests/fuzz/corpus/$t"
    mkdir -p "$work" "$BUILD/crashes"
    echo "== fuzz $t for ${S}s"
    # store inputs are whole databases: allow them to be larger than libFuzzer's default
    maxlen=4096; [ "$t" = store ] && maxlen=262144
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$bin" -max_total_time="$S" -max_len=$maxlen -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$BUILD/crashes/$t-" "$work" "$seeds" >"$BUILD/fuzz-$t.log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/fuzz-$t.log" | tail -1)
    crashes=0
    for c in "$BUILD"/crashes/"$t"-*; do
        [ -f "$c" ] || continue
        crashes=$((crashes + 1))
        min="$c.min"
        "$bin" -minimize_crash=1 -runs=20000 -exact_artifact_path="$min" "$c" >/dev/null 2>&1
        [ -s "$min" ] || cp "$c" "$min"
        sum=$(sha1sum <"$min" | cut -c1-12)
        cp "$min" "$seeds/crash-$sum"
        echo "   crash: $c -> minimised into $seeds/crash-$sum (fix it, then the replay checks it)"
        rm -f "$c" "$min"
    done
    echo "$(date -u +%Y-%m-%dT%H:%MZ) $t ${S}s ${execs:-?} execs, $crashes crash(es)" >>tests/fuzz/HISTORY
    tail -1 tests/fuzz/HISTORY
    if [ $rc -ne 0 ] || [ $crashes -ne 0 ]; then failed="$failed $t"; tail -30 "$BUILD/fuzz-$t.log"; fi
done
[ -z "$failed" ] || { echo "fuzzing found problems in:$failed"; exit 1; }
echo "fuzzing: no crash in $*"
