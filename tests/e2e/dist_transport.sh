#!/bin/sh
# dist_transport.sh — the ranks' shared-memory transport (engine/dist_transport.c): with a
# fresh cache, `--ranks 2` measures every candidate once (each in its own mpirun job that
# checks its sums), caches the fastest and the run records it; a second run measures
# nothing; a candidate made to fail its check is skipped with a note and never chosen; a
# transport forced by NNBENCH_MPI_TRANSPORT or set through Open MPI's own variable is
# respected (nothing measured, the record says so), under --ranks and a user's mpirun, and
# each record shows the values Open MPI read back (MPI_T) match what was chosen; a
# bad NNBENCH_MPI_TRANSPORT and an unreadable cache entry get their messages; diff notes
# two runs on different transports.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-transport.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && tail -n 20 "$T/out" >&2; exit 1; }
ok() { echo "ok: $*"; }
. "$NNBENCH_TOP/tests/e2e/lib/mpi.sh"
unset OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_btl_vader_max_send_size NNBENCH_MPI_TRANSPORT
LAUNCH=${MPIRUN%%mpirun*}   # "" or the sanitizer's env prefix: --ranks starts mpirun itself

blobs_ini "$T/e.ini"
transport() { sqlite3 "$1" "SELECT value FROM system_info WHERE key='mpi_transport'"; }
if ! "$NNBENCH" sysinfo | grep -q "Open MPI v4\."; then
    echo "ok: not Open MPI 4 here: its transports are not measured (sysinfo says so)"
    exit 0
fi
# readback DB CANDIDATE: the record shows Open MPI running with that candidate's values
readback() {
    case $2 in
    library) want="Open MPI runs with btl_vader_single_copy_mechanism=" ;;
    copy) want="Open MPI runs with btl_vader_single_copy_mechanism=none btl_vader_max_send_size=" ;;
    copy-256k) want="Open MPI runs with btl_vader_single_copy_mechanism=none btl_vader_max_send_size=262144" ;;
    esac
    transport "$1" | grep -q "; $want" || fail "$2: Open MPI does not run with it: $(transport "$1")"
}
entries() { if [ -f "$1/mpi-transport" ]; then awk '/\|ranks=2\t/ { n++ } END { print n + 0 }' "$1/mpi-transport"; else echo 0; fi; }

# 1. fresh cache: measured once, each candidate timed or skipped, the fastest cached and recorded
export NNBENCH_CACHE_DIR="$T/c1"
$LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --db "$T/a.db" >"$T/out" 2>&1 || fail "--ranks 2 with a fresh cache"
grep -q "measuring Open MPI's shared-memory transports for 2 ranks" "$T/out" || fail "no measuring message"
for c in library copy copy-256k; do
    grep -Eq "^nnbench:   $c +[0-9.]+ us a 1 MiB all-reduce|the MPI transport $c .* was skipped" "$T/out" ||
        fail "candidate $c neither timed nor skipped"
done
[ "$(entries "$T/c1")" = 1 ] || fail "want one cached entry for 2 ranks, got $(entries "$T/c1")"
chosen=$(awk -F'\t' '/\|ranks=2\t/ { split($2, v, " "); print v[1] }' "$T/c1/mpi-transport")
best=$(sed -n 's/^nnbench:   \([a-z0-9-]*\) *\([0-9.]*\) us a 1 MiB all-reduce$/\2 \1/p' "$T/out" | sort -n | head -n 1 | cut -d' ' -f2)
[ "$chosen" = "$best" ] || fail "cached $chosen, but the fastest timed was $best"
transport "$T/a.db" | grep -q "^$chosen (.*the fastest checked" || fail "run record: $(transport "$T/a.db")"
readback "$T/a.db" "$chosen"
"$NNBENCH" sysinfo | grep -q "2 ranks: $chosen (" || fail "sysinfo does not show the cached choice"
ok "fresh cache: measured, $chosen cached (fastest of those timed) and recorded; sysinfo shows it"

# 2. cached: nothing measured; a user's own mpirun applies the cached choice as well
$LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --db "$T/b.db" >"$T/out" 2>&1 || fail "--ranks 2, cached"
! grep -q "measuring Open MPI" "$T/out" || fail "measured again with a cached choice"
$MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/c.db" >"$T/out" 2>&1 || fail "mpirun -np 2, cached"
transport "$T/c.db" | grep -q "^$chosen (" || fail "a user's mpirun: $(transport "$T/c.db")"
readback "$T/c.db" "$chosen"
[ "$(entries "$T/c1")" = 1 ] || fail "the cache grew"
ok "cached: not measured again; a user's mpirun runs on it too"

# 3. a candidate that fails its check is skipped and never chosen
export NNBENCH_CACHE_DIR="$T/c2"
NNBENCH_MPI_TRANSPORT_FAIL=$chosen $LAUNCH "$NNBENCH" allreduce --ranks 2 --reps 2 >"$T/out" 2>&1 ||
    fail "allreduce --ranks 2 with $chosen failing"
grep -q "the MPI transport $chosen failed its check: mpi: the all-reduce of 1048576 bytes returned a wrong sum" "$T/out" ||
    fail "no note for the failing candidate"
other=$(awk -F'\t' '/\|ranks=2\t/ { split($2, v, " "); print v[1] }' "$T/c2/mpi-transport")
[ -n "$other" ] && [ "$other" != "$chosen" ] || fail "chose '$other' with $chosen failing"
ok "$chosen made to fail its check: skipped with a note, $other chosen"

# 4. respected: NNBENCH_MPI_TRANSPORT and Open MPI's own variable; nothing measured
export NNBENCH_CACHE_DIR="$T/c3"
NNBENCH_MPI_TRANSPORT=copy $LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --db "$T/d.db" >"$T/out" 2>&1 || fail "forced copy"
transport "$T/d.db" | grep -q "^copy (OMPI_MCA_btl_vader_single_copy_mechanism=none), as set by NNBENCH_MPI_TRANSPORT" ||
    fail "forced: $(transport "$T/d.db")"
readback "$T/d.db" copy
OMPI_MCA_btl_vader_single_copy_mechanism=none $MPIRUN -np 2 "$NNBENCH" run "$T/e.ini" --db "$T/e.db" >"$T/out" 2>&1 ||
    fail "user-set variable"
transport "$T/e.db" | grep -q "^as set by OMPI_MCA_btl_vader_single_copy_mechanism=none (respected)" ||
    fail "user-set: $(transport "$T/e.db")"
readback "$T/e.db" copy
[ ! -e "$T/c3/mpi-transport" ] || fail "measured although the transport was set"
ok "NNBENCH_MPI_TRANSPORT and OMPI_MCA_btl_vader_single_copy_mechanism respected, nothing measured"

# 5. compare says when two data-parallel runs moved their gradients differently
export NNBENCH_CACHE_DIR="$T/c1"   # the first run's cache: its GEMM and transport choices
other=library; [ "$chosen" = library ] && other=copy
NNBENCH_MPI_TRANSPORT=$other $LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --db "$T/a.db" >"$T/out" 2>&1 || fail "forced $other"
"$NNBENCH" diff 1 2 --db "$T/a.db" >"$T/out" 2>&1 || fail "diff"
grep -q "note: these runs' MPI ranks moved their gradients by different transports" "$T/out" || fail "diff: no transport note"
$LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --db "$T/a.db" >/dev/null 2>&1 || fail "third run"
"$NNBENCH" diff 1 3 --db "$T/a.db" >"$T/out" 2>&1 || fail "diff 1 3"
! grep -q "different transports" "$T/out" || fail "diff: a transport note for runs on the same one"
ok "diff notes runs on different transports ($chosen vs $other), not runs on the same"

# 6. bad input: a transport that does not exist; an unreadable cache entry
NNBENCH_MPI_TRANSPORT=fast $LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --no-db >"$T/out" 2>&1 && fail "bad transport accepted"
grep -q "NNBENCH_MPI_TRANSPORT=fast: not a transport (auto, library, copy or copy-256k" "$T/out" || fail "bad transport message"
mkdir -p "$T/c4"
sed 's/	.*/	warp 1 2/' "$T/c1/mpi-transport" >"$T/c4/mpi-transport"
NNBENCH_CACHE_DIR="$T/c4" $LAUNCH "$NNBENCH" run "$T/e.ini" --ranks 2 --no-db >"$T/out" 2>&1 || fail "unreadable cache entry"
grep -q "mpi-transport: the entry for 2 ranks is unreadable ('warp 1 2'): measured again" "$T/out" || fail "no unreadable-entry message"
[ "$(entries "$T/c4")" = 2 ] || fail "unreadable entry: not measured again"
ok "bad NNBENCH_MPI_TRANSPORT and an unreadable cache entry: their messages"
