#!/bin/sh
# transformer.sh — samples/transformer-fashion.ini trains briefly (full and Linformer k=32
# variants, 1 thread, so the outcome is the same on any machine): it learns (test accuracy
# well above chance), the store holds one row per attention scope and encoder layer
# (attn_qkv, attn_scores, attn_softmax, attn_wsum, attn_out; linformer_proj only for
# Linformer, lsh_hash for LSH), attn_scores' memory column is exactly its
# [batch x heads x n x m] probabilities and their gradient, and the run's peak memory holds
# them; samples/attention-scaling.ini at n = 1024 stores full attention's n^2 memory against
# Linformer's. Also: data.sequence = rows and the markers source run end to end; a bad
# attention value is refused with its key.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-attn.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && tail -20 "$T/out" >&2; exit 1; }
DB="$T/t.db"
FM=/usr/share/datasets/fashion-mnist
[ -d "$FM" ] || { echo "transformer.sh: skipped ($FM missing: make deps installs dataset-fashion-mnist)"; exit 0; }
S="$NNBENCH_TOP/samples/transformer-fashion.ini"
q() { sqlite3 "$DB" "$1"; }

for v in full linformer-k32; do
    "$NNBENCH" run "$S" --variant "$v" --db "$DB" --set data.n=3000 --set data.n_test=1000 --set train.epochs=0 \
        --set train.max_steps=120 --set train.threads=1 >"$T/out" 2>&1 || fail "training variant $v"
done
[ "$(q "SELECT count(*) FROM runs WHERE status = 'finished'")" = 2 ] || fail "two finished runs expected"

for run in 1 2; do
    acc=$(q "SELECT final_test_acc FROM runs WHERE id = $run")
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.45 else 1)" "$acc" ||
        fail "run $run: test accuracy $acc after 120 steps (chance is 0.1)"
    for op in attn_qkv attn_scores attn_softmax attn_wsum attn_out layernorm ffn resadd; do
        for dir in fwd bwd; do
            n=$(q "SELECT count(*) FROM op_stats WHERE run = $run AND name = '$op.$dir' AND layer IN ('encoder1','encoder2') AND calls > 0")
            [ "$n" -ge 2 ] || fail "run $run: no $op.$dir rows for both encoder layers (got $n)"
        done
    done
done
[ "$(q "SELECT count(*) FROM op_stats WHERE run = 1 AND name LIKE 'linformer_proj%'")" = 0 ] || fail "full attention has linformer_proj rows"
[ "$(q "SELECT count(*) FROM op_stats WHERE run = 2 AND name = 'linformer_proj.fwd'")" = 2 ] || fail "linformer run lacks linformer_proj rows"

# batch 64 x 4 heads x 49 queries x m keys (49 full, 32 linformer), probabilities and gradient, 4 bytes
for pair in "1 49" "2 32"; do
    set -- $pair
    want=$((2 * 64 * 4 * 49 * $2 * 4))
    got=$(q "SELECT group_concat(self_mem) FROM op_stats WHERE run = $1 AND name = 'attn_scores.fwd'")
    [ "$got" = "$want,$want" ] || fail "run $1: attn_scores memory $got, expected $want per layer"
    peak=$(q "SELECT peak_bytes FROM runs WHERE id = $1")
    [ "$peak" -gt $((2 * want)) ] || fail "run $1: peak memory $peak does not hold the attention matrices ($((2 * want)))"
done

# LSH: its hash scope per encoder, and 2 x 2 x 7 = 28 keys per query (buckets 8 over 49)
"$NNBENCH" run "$S" --variant lsh --db "$DB" --set data.n=500 --set data.n_test=200 --set train.epochs=0 \
    --set train.max_steps=5 --set train.threads=1 >"$T/out" 2>&1 || fail "training variant lsh"
run=$(q "SELECT max(id) FROM runs")
[ "$(q "SELECT count(*) FROM op_stats WHERE run = $run AND name = 'lsh_hash.fwd' AND calls > 0")" = 2 ] ||
    fail "lsh run lacks lsh_hash rows for both encoders"
want=$((2 * 64 * 4 * 49 * 28 * 4))
got=$(q "SELECT group_concat(self_mem) FROM op_stats WHERE run = $run AND name = 'attn_scores.fwd'")
[ "$got" = "$want,$want" ] || fail "lsh: attn_scores memory $got, expected $want per layer"

# rows of 28 pixels, and the long-sequence task: both run and store
"$NNBENCH" run "$S" --variant full --db "$DB" --set data.sequence=rows --set data.n=500 --set data.n_test=200 \
    --set train.epochs=0 --set train.max_steps=5 >"$T/out" 2>&1 || fail "sequence = rows"
"$NNBENCH" show 4 --db "$DB" >"$T/out" 2>&1
grep -q "embed(28x28->28x64)" "$T/out" || fail "rows: the model summary does not show 28 positions of 28"
cat >"$T/m.ini" <<INI
[data]
source = markers
n = 200
seq_len = 256
[model]
layers = embed:16, posenc, encoder:heads=2:ff=32, meanpool, dense:2
attention = linformer:k=16
[train]
optimizer = adam
lr = 0.003
batch = 16
epochs = 1
INI
"$NNBENCH" run "$T/m.ini" --db "$DB" >"$T/out" 2>&1 || fail "markers run"
"$NNBENCH" show 5 --db "$DB" >"$T/out" 2>&1
grep -q "encoder(256x16 h2 ff32 linformer k16)" "$T/out" || fail "markers: no linformer encoder over 256 positions in the summary"

# the scaling sample at n = 1024: full attention's n^2 against Linformer's n x 64, in the
# memory column (1 x 2 heads x 1024 x m floats, twice) and in the stored peak memory
SC="$NNBENCH_TOP/samples/attention-scaling.ini"
for v in full-n1024 linformer-n1024; do
    "$NNBENCH" run "$SC" --variant $v --db "$DB" >"$T/out" 2>&1 || fail "attention-scaling variant $v"
done
mem() { q "SELECT o.self_mem FROM op_stats o JOIN runs r ON r.id = o.run WHERE r.variant = '$1' AND o.name = 'attn_scores.fwd'"; }
peak() { q "SELECT peak_bytes FROM runs WHERE variant = '$1'"; }
[ "$(mem full-n1024)" = $((2 * 2 * 1024 * 1024 * 4)) ] || fail "full n=1024: attn_scores memory $(mem full-n1024)"
[ "$(mem linformer-n1024)" = $((2 * 2 * 1024 * 64 * 4)) ] || fail "linformer n=1024: attn_scores memory $(mem linformer-n1024)"
# (Linformer's E, F and their optimizer state take back part of the 15 MiB difference)
[ "$(peak full-n1024)" -gt $(($(peak linformer-n1024) + 8 * 1048576)) ] ||
    fail "full attention's peak memory $(peak full-n1024) is not 8 MiB above Linformer's $(peak linformer-n1024)"

"$NNBENCH" run "$T/m.ini" --db "$DB" --set model.attention=linformer:k=-3 >"$T/out" 2>&1
[ $? -ne 0 ] && grep -q "key 'attention'" "$T/out" || fail "a bad model.attention was not refused at its key"
echo "transformer.sh: ok"
