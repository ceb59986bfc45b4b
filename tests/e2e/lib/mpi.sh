# mpi.sh — how the e2e tests start ranks (sourced by dist.sh and dist_profile.sh): sets
# MPIRUN (oversubscribed; as root with --allow-run-as-root, as CI runs) or fails when
# mpirun is missing. The caller defines fail().
command -v mpirun >/dev/null || fail "mpirun not found (make deps installs openmpi-bin)"
MPIRUN="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
if [ -n "${NNBENCH_SANITIZED:-}" ]; then
    # Open MPI never frees its start-up allocations, and MPI_Finalize unloads the plugins
    # that made them, so LeakSanitizer sees them as "<unknown module>" and no suppression
    # file can name them. Under mpirun leak checking is off (ASan's memory errors and UBSan
    # still abort); nnbench's own code is leak-checked by every single-process test.
    MPIRUN="env ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 $MPIRUN"
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers: no CMA between ranks

# blobs_ini FILE: the blobs MLP the dist tests train (rank counts, faults); 40 steps.
blobs_ini() {
    cat >"$1" <<'EOF'
[experiment]
seed = 5
[data]
source = blobs
n = 3000
classes = 4
features = 8
[model]
layers = dense:32:tanh, dense:4
[train]
optimizer = momentum
lr = 0.05
batch = 128
max_steps = 40
log_every = 1
threads = 1
EOF
}
# wait_metrics DB N: until a run in DB has stored N metric points (fails after 60 s).
wait_metrics() {
    _i=0
    while :; do
        _n=$(sqlite3 "$1" "SELECT count(*) FROM metrics" 2>/dev/null || echo 0)
        [ "${_n:-0}" -ge "$2" ] && return 0
        _i=$((_i+1)); [ $_i -ge 600 ] && fail "the run did not start in 60 s"
        sleep 0.1
    done
}
