#!/bin/sh
# placement.sh — where a run's two threads ran, end to end, on any machine: a run of 2
# threads stores the core round trip it measured (a figure, or "not measured" when its
# threads are pinned to one CPU, forced here with taskset), a 1-thread run stores none,
# the header says it on a terminal, sysinfo measures it; compare shows the row and notes
# runs whose figures lie on both sides of 250 ns and 2x apart (figures set in the database
# here, so that every case is checked whatever this machine's placement is); a run of the
# Fashion MLP at 2 threads reports its jobs split over the pool and the waits at their ends,
# stores them, and compare shows them.
. "$(dirname "$0")/lib/check.sh"
db="$tmp/p.db"
sys() { sqlite3 "$db" "SELECT value FROM system_info WHERE run = $1 AND key = '$2'"; }
set_trip() { sqlite3 "$db" "UPDATE system_info SET value = '$2' WHERE run = $1 AND key = 'core_round_trip_ns'"; }
run() { "$NNBENCH" run "$TOP/samples/spirals-mlp.ini" --db "$db" --variant adam --set train.epochs=2 "$@"; }

run --set train.threads=2 >/dev/null 2>"$tmp/e1" || bad "2-thread run failed: $(cat "$tmp/e1")"
run --set train.threads=1 >/dev/null 2>"$tmp/e2" || bad "1-thread run failed: $(cat "$tmp/e2")"
taskset -c 0 "$NNBENCH" run "$TOP/samples/spirals-mlp.ini" --db "$db" --variant adam --set train.epochs=2 \
    --set train.threads=2 >/dev/null 2>"$tmp/e3" || bad "pinned run failed: $(cat "$tmp/e3")"

case "$(sys 1 core_round_trip_ns)" in
    [1-9]*) ok "a 2-thread run stores its core round trip ($(sys 1 core_round_trip_ns) ns)" ;;
    "") case "$(sys 1 placement)" in "not measured"*) ok "a 2-thread run stores 'not measured' (a loaded machine)" ;;
            *) bad "run 1: no round trip, placement '$(sys 1 placement)'" ;; esac ;;
    *) bad "run 1: core_round_trip_ns '$(sys 1 core_round_trip_ns)'" ;;
esac
case "$(sys 1 placement)" in "CPUs sharing a last-level cache"*|"CPUs not sharing a last-level cache"*|"not measured"*)
    ok "and its placement in words" ;; *) bad "run 1 placement: '$(sys 1 placement)'" ;; esac
[ -z "$(sys 2 placement)$(sys 2 core_round_trip_ns)" ] && ok "a 1-thread run stores no placement" \
    || bad "run 2 has a placement: '$(sys 2 placement)'"
case "$(sys 3 placement)" in "not measured: the two threads did not get two CPUs"*) ok "pinned to one CPU: not measured" ;;
    *) bad "run 3 (one CPU) placement: '$(sys 3 placement)'" ;; esac
[ -z "$(sys 3 core_round_trip_ns)" ] && ok "and no figure" || bad "run 3 has a figure: $(sys 3 core_round_trip_ns)"

# The header, on a terminal (script gives the run one).
script -qec "\"$NNBENCH\" run \"$TOP/samples/spirals-mlp.ini\" --no-db --variant adam --set train.epochs=1 --set train.threads=2" \
    /dev/null >"$tmp/tty" 2>&1 || bad "the run under script failed"
grep -aq '^adam: 2 threads, placement: \(CPUs sharing\|CPUs not sharing\|not measured\)' "$tmp/tty" \
    && ok "the header says where the threads ran" || bad "no placement header: $(grep -a placement "$tmp/tty")"

# Compare: the row, and the note only across placements (figures set here); the note is the
# block docs/store.md shows at 80 columns (the report has it as one line).
awk '/^note: these runs. threads ran on CPUs placed differently/ { on = 1 } on && /^```/ { exit } on' \
    "$TOP/docs/store.md" >"$tmp/note"
note=$(tr '\n' ' ' <"$tmp/note" | sed 's/  */ /g; s/ $//')
[ -n "$note" ] || bad "docs/store.md does not show the placement note"
sqlite3 "$db" "INSERT OR REPLACE INTO system_info (run, key, value) VALUES (3, 'core_round_trip_ns', '0')"
set_trip 1 100; set_trip 3 700
COLUMNS=80 "$NNBENCH" compare 1 2 3 --db "$db" >"$tmp/c1" 2>&1 || bad "compare failed: $(cat "$tmp/c1")"
grep -q '^core round trip  *100 ns  *-  *700 ns *$' "$tmp/c1" && ok "compare has the core round trip row" \
    || bad "row: $(grep 'round trip' "$tmp/c1")"
grep -A2 "^note: these runs' threads" "$tmp/c1" | cmp -s - "$tmp/note" \
    && ok "compare notes runs placed differently (the lines docs/store.md shows)" \
    || bad "no placement note: $(tail -3 "$tmp/c1")"
"$NNBENCH" report 1 3 -o "$tmp/r.md" --db "$db" 2>/dev/null || bad "report failed"
grep -q '| core round trip | 100 ns | 700 ns |' "$tmp/r.md" && grep -qF "$note" "$tmp/r.md" \
    && ok "the report has the row and the note" || bad "report: $(grep -i 'round trip\|placed' "$tmp/r.md")"
set_trip 3 180
"$NNBENCH" compare 1 3 --db "$db" >"$tmp/c2" 2>&1
grep -q 'placed differently' "$tmp/c2" && bad "two shared-cache runs flagged" || ok "both sharing a cache: no note"
set_trip 1 240; set_trip 3 300
"$NNBENCH" compare 1 3 --db "$db" >"$tmp/c3" 2>&1
grep -q 'placed differently' "$tmp/c3" && bad "240 vs 300 ns flagged" || ok "across 250 ns by less than 2x: no note"
"$NNBENCH" compare 1 2 --db "$db" >"$tmp/c4" 2>&1
grep -q 'placed differently' "$tmp/c4" && bad "a 1-thread run flagged" || ok "a 1-thread run has nothing to compare"

# sysinfo measures it when it runs; pinned to one CPU it says so.
"$NNBENCH" sysinfo >"$tmp/si" 2>&1 || bad "sysinfo failed"
grep -q '^Placement:   \(CPUs sharing\|CPUs not sharing\|not measured\)' "$tmp/si" && ok "sysinfo has the placement" \
    || bad "sysinfo: $(grep -i placement "$tmp/si")"
"$NNBENCH" sysinfo --json >"$tmp/sj" 2>&1 || bad "sysinfo --json failed"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["placement"]; assert p["class"] in ("shared cache","apart","unmeasured"), p; assert p["cpus"] >= 1' \
    "$tmp/sj" && ok "sysinfo --json has placement.class" || bad "sysinfo --json placement"
taskset -c 0 "$NNBENCH" sysinfo >"$tmp/si1" 2>&1
grep -q '^Placement:   not measured' "$tmp/si1" && ok "sysinfo on one CPU: not measured" \
    || bad "pinned sysinfo: $(grep -i placement "$tmp/si1")"

# What the training thread waited at the ends of the jobs split over the pool
# (eng_run_result.pool): counted at 2 threads over the training steps alone, nothing at 1.
if [ -d /usr/share/datasets/fashion-mnist ]; then
    fm() { "$NNBENCH" run "$TOP/samples/fashion-mnist-mlp.ini" --no-db --set data.n=2560 --set data.n_test=256 \
        --set train.max_steps=20 "$@"; }
    fm --set train.threads=2 >"$tmp/p2" 2>&1 || bad "fashion MLP at 2 threads failed: $(cat "$tmp/p2")"
    fm --set train.threads=2 --json >"$tmp/p2j" 2>/dev/null || bad "fashion MLP at 2 threads --json failed"
    fm --set train.threads=1 >"$tmp/p1" 2>&1 || bad "fashion MLP at 1 thread failed: $(cat "$tmp/p1")"
    fm --set train.threads=1 --json >"$tmp/p1j" 2>/dev/null || bad "fashion MLP at 1 thread --json failed"
    python3 - "$tmp/p2j" "$tmp/p1j" <<'PY' && ok "--json: pool_steps 20, jobs and waits at 2 threads, none at 1" || bad "--json pool figures"
import json, sys
two = json.load(open(sys.argv[1]))["variants"][0]
one = json.load(open(sys.argv[2]))["variants"][0]
assert two["pool_steps"] == 20 and one["pool_steps"] == 20, (two["pool_steps"], one["pool_steps"])
assert two["pool_joins"] >= 20 and 0 <= two["pool_wait_s"] < two["pool_step_s"], two
assert one["pool_joins"] == 0 and one["pool_wait_s"] == 0 and one["pool_step_s"] > 0, one
PY
    grep -A3 "^variant  *threads  pool jobs/step  waited/step  of step$" "$tmp/p2" |
        grep -Eq "^fash[^ ]*  +2  +[0-9]+\.[0-9]  +[0-9]+\.[0-9] us  +[0-9]+\.[0-9]%$" \
        && grep -q "^(waited: at the ends of the split jobs, for the other threads' slabs)$" "$tmp/p2" \
        && ok "the run's output says what the training thread waited at 2 threads" || bad "no pool table: $(cat "$tmp/p2")"
    grep -q "pool jobs/step" "$tmp/p1" && bad "a 1-thread run prints a pool table" || ok "and nothing at 1 thread"
    # stored: the same four figures in the run's system record (run 4), none at 1 thread
    # (run 2), and compare's "pool waits/step" row from them
    "$NNBENCH" run "$TOP/samples/fashion-mnist-mlp.ini" --db "$db" --set data.n=2560 --set data.n_test=256 \
        --set train.max_steps=20 --set train.threads=2 >/dev/null 2>"$tmp/e4" || bad "stored 2-thread run failed: $(cat "$tmp/e4")"
    r4=$(sqlite3 "$db" "SELECT max(id) FROM runs")
    awk -v s="$(sys "$r4" pool_steps)" -v t="$(sys "$r4" pool_step_s)" -v j="$(sys "$r4" pool_joins)" -v w="$(sys "$r4" pool_wait_s)" \
        'BEGIN { exit !(s == 20 && j >= 20 && t > 0 && w >= 0 && w < t) }' \
        && ok "the run's system record keeps its pool figures (20 steps, $(sys "$r4" pool_joins) jobs)" \
        || bad "stored pool figures: steps '$(sys "$r4" pool_steps)' joins '$(sys "$r4" pool_joins)'"
    [ -z "$(sys 2 pool_steps)" ] && ok "a 1-thread run stores none" || bad "run 2 has pool figures"
    COLUMNS=80 "$NNBENCH" compare "$r4" 2 --db "$db" >"$tmp/c5" 2>&1 || bad "compare failed: $(cat "$tmp/c5")"
    grep -Eq '^pool waits/step +[0-9]+ us [0-9]+\.[0-9]% +- *$' "$tmp/c5" && ok "compare has the pool waits row" \
        || bad "pool row: $(grep 'pool' "$tmp/c5")"
    sqlite3 "$db" "UPDATE system_info SET value = CASE key WHEN 'pool_steps' THEN '100' WHEN 'pool_step_s' THEN '0.05'
        WHEN 'pool_joins' THEN '900' WHEN 'pool_wait_s' THEN '0.0021' ELSE value END WHERE run = $r4"
    COLUMNS=80 "$NNBENCH" compare "$r4" 2 --db "$db" >"$tmp/c6" 2>&1
    grep -Eq '^pool waits/step +21 us 4\.2% +- *$' "$tmp/c6" && ok "its cell: the waits a step and their share of the step" \
        || bad "pool cell: $(grep 'pool' "$tmp/c6")"
    # A resumed run's figures cover the whole run, as its samples/s do: its checkpoint
    # carries them (format 3). Stopped (SIGTERM) after its first checkpoint, it stores the
    # part before the stop; resumed, every step.
    rdb="$tmp/resume.db"
    "$NNBENCH" run "$TOP/samples/fashion-mnist-mlp.ini" --db "$rdb" --set data.n=2560 --set data.n_test=256 \
        --set train.epochs=300 --set train.eval_every=0 --set train.checkpoint_every=100 --set train.threads=2 \
        >/dev/null 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 600 ]; do
        n=$(sqlite3 "$rdb" 'SELECT count(*) FROM checkpoints' 2>/dev/null || echo 0)
        [ "${n:-0}" -ge 1 ] && break
        i=$((i + 1)); sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"; rc=$?
    rs() { sqlite3 "$rdb" "SELECT value FROM system_info WHERE run = 1 AND key = '$1'"; }
    st() { sqlite3 "$rdb" "SELECT $1 FROM runs WHERE id = 1"; }
    if [ "$rc" -eq 143 ] && [ "$(st status)" = interrupted ]; then
        stop=$(st steps)
        [ "$(rs pool_steps)" = "$stop" ] && ok "a stopped run stores the pool figures of its $stop steps" \
            || bad "stopped at step $stop, pool_steps '$(rs pool_steps)'"
        "$NNBENCH" resume 1 --db "$rdb" >"$tmp/res" 2>&1 || bad "resume failed: $(cat "$tmp/res")"
        [ "$(st status)" = finished ] && [ "$(st steps)" = 6000 ] && [ "$(rs pool_steps)" = 6000 ] \
            && [ "$(rs pool_joins)" -gt 6000 ] \
            && ok "resumed, its pool figures cover all 6000 steps ($(rs pool_joins) jobs)" \
            || bad "resumed: status $(st status), steps $(st steps), pool_steps '$(rs pool_steps)' joins '$(rs pool_joins)'"
    else
        bad "the run was not stopped mid-way (exit $rc, status $(st status)): make it longer"
    fi
else
    echo "skip: no Fashion-MNIST (make deps installs dataset-fashion-mnist): the pool's joins unchecked"
fi

[ "$fails" -eq 0 ]
