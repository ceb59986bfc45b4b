#!/bin/sh
# graphs.sh — end-to-end test of graph runs and MaxK (issue 16): samples/graphsage-sbm.ini
# trains every variant to >= 0.9 test accuracy; the two-pass and fused samplers give the
# same run (same blocks); the profile has rows for sample, gather, aggregate and maxk; the
# partition figures are stored as metrics and METIS cuts fewer edges than random; a MaxK
# MLP stores maxk and cbsr_dense rows; a malformed edge file fails naming FILE:LINE.
. "$(dirname "$0")/lib/check.sh"
# sql_is QUERY EXPECTED DESCRIPTION
sql_is() {
    c=$(sqlite3 "$db" "$1" 2>&1)
    if [ "$c" = "$2" ]; then ok "$3"; else bad "$3 (got '$c', want '$2')"; fi
}
cd "$TOP" || exit 1
db="$tmp/g.db"
epochs=10
[ "${NNBENCH_SANITIZED:-0}" = 1 ] && epochs=4
if ! "$NNBENCH" run samples/graphsage-sbm.ini --db "$db" --set train.epochs=$epochs >"$tmp/out" 2>&1; then
    bad "graphsage-sbm.ini runs"; tail -n 20 "$tmp/out" | sed 's/^/  | /'
fi
sql_is "select count(*) from runs where status = 'finished'" 5 "five graph runs finished"
sql_is "select count(*) from runs where final_test_acc < 0.9 or final_test_acc is null" 0 \
    "every variant reaches test accuracy >= 0.9 on the SBM at the default knob"
sql_is "select count(distinct final_test_acc || '/' || final_train_loss) from runs where variant in ('twopass', 'fused')" 1 \
    "two-pass and fused samplers give the same run (identical blocks)"
sql_is "select count(distinct o.name) from op_stats o join runs r on r.id = o.run where r.variant = 'fused-maxk' and
        o.name in ('sample.fused', 'gather', 'aggregate.fwd', 'aggregate.bwd', 'maxk.fwd', 'maxk.bwd')" 6 \
    "profile rows: sample, gather, aggregate, maxk"
sql_is "select count(*) from op_stats o join runs r on r.id = o.run where r.variant = 'twopass' and o.name = 'sample.twopass'" 1 \
    "the two-pass sampler is its own profile row"
sql_is "select count(*) from metrics m join runs r on r.id = m.run where r.variant = 'fused' and
        m.key in ('partition_edge_cut', 'partition_cross_nodes_per_batch', 'partition_cross_bytes_per_batch_modelled', 'sampler_batches_per_s')
        and m.step = 0" 3 "partition figures stored as metrics"
sql_is "select (select value from metrics m join runs r on r.id = m.run where r.variant = 'fused' and key = 'partition_edge_cut')
        < (select value from metrics m join runs r on r.id = m.run where r.variant = 'random-part' and key = 'partition_edge_cut')" 1 \
    "METIS cuts fewer edges than random parts"

# MaxK on an MLP: the sparse ops show in the profile
"$NNBENCH" run samples/spirals-mlp.ini --db "$db" --set model.layers="dense:32:maxk8, dense:16:relu, dense:2" \
    --set profile.enabled=true --set train.epochs=20 >"$tmp/out2" 2>&1 || { bad "maxk MLP runs"; tail -n 5 "$tmp/out2"; }
sql_is "select count(distinct name) from op_stats where name in ('maxk.fwd', 'cbsr_dense.fwd', 'cbsr_dense.bwd')" 3 \
    "maxk and cbsr_dense profile rows"

# a malformed edge list names its file and line
printf 'src,dst\n0,1\n1;2\n' >"$tmp/edges.csv"
printf '1,2\n3,4\n5,6\n' >"$tmp/feat.csv"
printf '0\n1\n0\n' >"$tmp/lab.csv"
if "$NNBENCH" run samples/graphsage-sbm.ini --db "$db" --set graph.source=file --set graph.edges="$tmp/edges.csv" \
    --set graph.node_features="$tmp/feat.csv" --set graph.labels="$tmp/lab.csv" >"$tmp/out3" 2>&1; then
    bad "a malformed edge file is refused"
elif grep -q "edges.csv:3: expected two node ids" "$tmp/out3"; then
    ok "a malformed edge file fails naming FILE:LINE"
else
    bad "the error names FILE:LINE"; sed 's/^/  | /' "$tmp/out3"
fi
[ $fails = 0 ]
