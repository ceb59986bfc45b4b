# check.sh — the frame of the e2e scripts that count their checks (sourced by run.sh,
# newton.sh, graphs.sh): the binary, the repository, a temp dir removed on exit, and
# ok/bad that print one line each and count the failures in $fails.
set -u
NNBENCH=${NNBENCH:?set NNBENCH to the nnbench binary}
TOP=${NNBENCH_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
