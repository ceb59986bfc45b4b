/* graph_bench.c — neighbour sampling: the fused one-pass sampler against the two-pass
 * baseline (sample_neighbors + to_block), blocks/s on an R-MAT graph, fanouts 10,5,
 * batches of 1024 seeds; contenders interleaved A B A B on the same seed batches.
 * Full: R-MAT scale 20 (2^20 nodes), edge factor 16 — at least 16M undirected edges after
 * duplicates and self-loops are dropped (checked; the row fails otherwise).
 * --quick: scale 16. Then METIS against random partitions: cross-partition input nodes per
 * sampled minibatch (random / METIS, modelled traffic) for 4 and 8 parts on an SBM (20k
 * nodes, homophily 0.8) and an R-MAT graph (scale 16; --quick: smaller graphs).
 * Output: ENV and ROW lines for tests/bench/run.sh (section 7). */
#include <stdio.h>

#include "../../engine/graph/graph.h"
#include "../../engine/rng.h"
#include "bench.h"

#define BATCH 1024

/* One row per (graph, parts): random's cross-partition nodes per batch over METIS's. */
static int partition_rows(int quick)
{
    eng_graph *gs[2];
    const char *names[2] = { "SBM", "R-MAT" };
    if (eng_graph_sbm(quick ? 4000 : 20000, 8, 10, 0.8, 16, 1.0, 1, &gs[0]) || eng_graph_rmat(quick ? 13 : 16, 16, 1, &gs[1])) {
        fprintf(stderr, "graph_bench: %s\n", eng_error());
        return 1;
    }
    gs[1]->f = 16; /* feature bytes modelled as 16 floats per node, as the SBM's */
    int fan[2] = { 10, 5 };
    for (int k = 0; k < 2; k++)
        for (int parts = 4; parts <= 8; parts += 4) {
            eng_graph *g = gs[k];
            int32_t *pm = malloc(sizeof(int32_t) * (size_t)g->n), *pr = malloc(sizeof(int32_t) * (size_t)g->n);
            eng_part_stats sm = { 0 }, sr = { 0 };
            double t0 = now_s();
            if (eng_graph_partition(g, ENG_PART_METIS, parts, 1, pm) || eng_graph_partition(g, ENG_PART_RANDOM, parts, 1, pr)) {
                fprintf(stderr, "graph_bench: %s\n", eng_error());
                return 1;
            }
            double tm = now_s() - t0;
            eng_part_edge_cut(g, pm, parts, &sm);
            eng_part_edge_cut(g, pr, parts, &sr);
            int batch = g->n / parts / 4 < 256 ? g->n / parts / 4 : 256;
            if (eng_part_traffic(g, pm, fan, 2, batch, 4, 1, &sm) || eng_part_traffic(g, pr, fan, 2, batch, 4, 1, &sr)) {
                fprintf(stderr, "graph_bench: %s\n", eng_error());
                return 1;
            }
            double ratio = sm.batch_cross_nodes > 0 ? sr.batch_cross_nodes / sm.batch_cross_nodes : INFINITY;
            char label[128], abs1[240];
            snprintf(label, sizeof label, "random / METIS cross-partition nodes per batch, %s %d parts", names[k], parts);
            snprintf(abs1, sizeof abs1, "%d nodes; per batch of %d: METIS %.0f vs random %.0f of %.0f input nodes (%.0f vs %.0f KB modelled); edge cut %.3f vs %.3f; METIS %.1f s",
                     g->n, batch, sm.batch_cross_nodes, sr.batch_cross_nodes, sr.batch_input_nodes,
                     sm.batch_cross_bytes / 1024, sr.batch_cross_bytes / 1024, sm.cut_fraction, sr.cut_fraction, tm);
            printf("ROW\t7\t%s\t%.3f\t%.3f\t%.3f\t%s\t> 1 (reduced)\t%s\n", label, ratio, ratio, ratio, abs1,
                   ratio > 1 ? "met" : "MISSED");
            free(pm);
            free(pr);
        }
    eng_graph_free(gs[0]);
    eng_graph_free(gs[1]);
    return 0;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    int scale = quick ? 16 : 20, ef = quick ? 16 : 18, reps = quick ? 3 : 5, batches = quick ? 20 : 60;
    double t0 = now_s();
    eng_graph *g;
    if (eng_graph_rmat(scale, ef, 1, &g)) { fprintf(stderr, "graph_bench: %s\n", eng_error()); return 1; }
    double tg = now_s() - t0;
    long long und = (long long)(g->m / 2);
    fprintf(stderr, "graph_bench: R-MAT scale %d: %d nodes, %lld undirected edges (%lld duplicates, %lld self-loops dropped) in %.1f s\n",
            scale, g->n, und, (long long)g->duplicates, (long long)g->self_loops, tg);
    int fan[2] = { 10, 5 };
    eng_sampler *s2, *s1;
    if (eng_sampler_create(g, ENG_SAMPLER_TWOPASS, fan, 2, BATCH, NULL, &s2) ||
        eng_sampler_create(g, ENG_SAMPLER_FUSED, fan, 2, BATCH, NULL, &s1)) {
        fprintf(stderr, "graph_bench: %s\n", eng_error());
        return 1;
    }
    /* seed batches: a seeded permutation of the nodes, 1024 at a time */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)g->n);
    eng_rng r;
    eng_rng_seed(&r, 2, 2);
    for (int32_t i = 0; i < g->n; i++) perm[i] = i;
    for (int32_t i = g->n - 1; i > 0; i--) {
        int32_t j = (int32_t)eng_rng_below(&r, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j]; perm[j] = t;
    }
    double ratio[16], bs1 = 0, bs2 = 0;
    long long edges = 0;
    for (int rep = 0; rep < reps; rep++) {
        eng_block *b;
        double a0 = now_s();
        for (int i = 0; i < batches; i++)
            eng_sampler_sample(s2, perm + (size_t)((rep * batches + i) * BATCH % (g->n - BATCH)), BATCH, (uint64_t)i, &b);
        double a1 = now_s();
        for (int i = 0; i < batches; i++) {
            eng_sampler_sample(s1, perm + (size_t)((rep * batches + i) * BATCH % (g->n - BATCH)), BATCH, (uint64_t)i, &b);
            edges += b[0].n_edges + b[1].n_edges;
        }
        double a2 = now_s();
        ratio[rep] = (a1 - a0) / (a2 - a1);
        bs2 += batches / (a1 - a0);
        bs1 += batches / (a2 - a1);
        fprintf(stderr, "graph_bench: rep %d: twopass %.0f blocks/s, fused %.0f blocks/s\n", rep + 1,
                batches / (a1 - a0), batches / (a2 - a1));
    }
    stats st = stats_of(ratio, reps);
    int big = g->n >= (1 << 20) && und >= 16000000;
    char abs1[200];
    snprintf(abs1, sizeof abs1, "twopass %.0f vs fused %.0f batches/s (mean; 2 blocks each), R-MAT 2^%d nodes %.1fM edges, %.0f sampled edges/batch",
             bs2 / reps, bs1 / reps, scale, und / 1e6, (double)edges / (reps * batches));
    printf("ENV\tgraph_rmat\tscale %d, %lld edges\n", scale, und);
    printf("ROW\t7\tfused / two-pass sampler blocks/s, fanouts 10,5, batch 1024%s\t%.3f\t%.3f\t%.3f\t%s\t>= 2.00\t%s\n",
           big ? "" : " (quick: small graph)", st.med, st.min, st.max, abs1,
           !big ? "info" : st.med >= 2.0 ? "met" : "MISSED");
    free(perm);
    eng_sampler_free(s1);
    eng_sampler_free(s2);
    eng_graph_free(g);
    return partition_rows(quick);
}
