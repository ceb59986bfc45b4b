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
