#!/bin/sh
# export_model.sh — `nnbench export-model` never harms what it does not write and never
# writes what does not compile: the database (or a symlink to it) as -o or --vectors is
# refused with the database untouched; a failed write (file size limit) leaves the previous
# output as it was; a checkpoint whose model overflows float (a crafted or diverged run) is
# refused as eval and quantize refuse it, and one with a NaN weight is refused at load by
# every command that reads checkpoints; a 100-character --prefix gives C that compiles.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-export.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && cat "$T/out" >&2; exit 1; }
DB="$T/x.db"
edit() { python3 "$NNBENCH_TOP/tests/e2e/lib/ckpt_edit.py" "$@" || fail "ckpt_edit.py $*"; }

"$NNBENCH" run "$NNBENCH_TOP/samples/spirals-mlp.ini" --variant adam --set train.epochs=2 \
    --set "model.layers=dense:16:relu, dense:2" --db "$DB" >"$T/out" 2>&1 || fail "training"
sum() { sqlite3 "$DB" "PRAGMA integrity_check; SELECT count(*), sum(length(data)) FROM checkpoints; SELECT count(*) FROM metrics"; }
before=$(sum)

# The database itself, a symlink to it, and either as the --vectors file: refused, untouched.
ln -s x.db "$T/link.db"
for args in "-o $DB" "-o $T/link.db" "-o $T/ok.c --vectors 5 $DB" "-o $T/ok.c --vectors 5 $T/link.db"; do
    # shellcheck disable=SC2086
    "$NNBENCH" export-model 1 --int8 $args --db "$DB" >"$T/out" 2>&1 && fail "export-model $args accepted"
    grep -q "it is the database" "$T/out" || fail "export-model $args: no reason given"
    [ "$(sum)" = "$before" ] || fail "export-model $args changed the database"
done
[ -e "$T/ok.c" ] && fail "a refused export-model wrote its other output"

# A write that fails half-way (the file size limit) leaves the old file as it was.
echo "previous output" >"$T/keep.c"
sh -c "trap '' XFSZ; ulimit -f 2; exec \"\$0\" export-model 1 --int8 -o \"\$1\" --db \"\$2\"" \
    "$NNBENCH" "$T/keep.c" "$DB" >"$T/out" 2>&1 && fail "export-model past the file size limit exited 0"
grep -q "write error" "$T/out" || fail "a failed write: no reason given"
[ "$(cat "$T/keep.c")" = "previous output" ] || fail "a failed export-model truncated the previous output"
ls -a "$T" | grep -q nnbench- && fail "a failed export-model left its temporary file"

# A 100-character prefix (a valid identifier) names every array in full, and compiles.
px=$(python3 -c 'print("p" * 100)')
"$NNBENCH" export-model 1 --int8 -o "$T/long.c" --prefix "$px" --db "$DB" >"$T/out" 2>&1 || fail "--prefix of 100 characters"
${CC:-cc} -c -std=c99 -Wall -Wextra -Werror -o "$T/long.o" "$T/long.c" 2>"$T/out" || fail "the --prefix file does not compile"
grep -q "^int ${px}_predict(const float \*x)" "$T/long.c" || fail "--prefix: ${px}_predict missing"

# Weights that make the model overflow float: refused by eval, quantize and export-model
# alike, and the previous output kept (the scale used to be written as "inff").
cp "$DB" "$T/big.db"
edit "$T/big.db" 1 set 1e30
for cmd in eval "quantize --no-store" "export-model --int8 -o $T/keep.c"; do
    # shellcheck disable=SC2086
    "$NNBENCH" $cmd 1 --db "$T/big.db" >"$T/out" 2>&1 && fail "$cmd of an overflowing model exited 0"
    grep -q "not finite" "$T/out" || fail "$cmd: no reason given for an overflowing model"
done
[ "$(cat "$T/keep.c")" = "previous output" ] || fail "a refused export-model wrote its output"

# A NaN weight with a valid checksum: refused at load by every command that reads it.
cp "$DB" "$T/nan.db"
edit "$T/nan.db" 1 nan
sqlite3 "$T/nan.db" "UPDATE runs SET status='crashed' WHERE id=1"
for cmd in eval "quantize --no-store" "export-model --int8 -o $T/nan.c" resume; do
    # shellcheck disable=SC2086
    "$NNBENCH" $cmd 1 --db "$T/nan.db" >"$T/out" 2>&1 && fail "$cmd of a NaN checkpoint exited 0"
    grep -q "parameter 0 of [0-9]* is nan" "$T/out" || fail "$cmd: the NaN weight is not named"
done
[ -e "$T/nan.c" ] && fail "export-model wrote a NaN model"
[ "$(sqlite3 "$T/nan.db" "SELECT status FROM runs WHERE id=1")" = crashed ] || fail "a refused resume changed the run"
echo "export_model: ok"
