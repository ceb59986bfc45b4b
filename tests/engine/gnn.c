/* gnn.c (tests) — GraphSAGE: the aggregate op's gradients by finite differences (dense and
 * CBSR input), whole sage models' parameter gradients (full graph and sampled blocks, tanh
 * and maxk), config errors of graph runs, training to the SBM's accuracy, partitioning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/graph/graph.h"
#include "../../engine/internal.h"
#include "../../engine/rng.h"

#define EPS 1e-3
#define TOL 1e-2

static void fill(float *v, size_t n, eng_rng *r, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * eng_rng_normal(r));
}

static double rel(double a, double b)
{
    double den = fabs(a) + fabs(b);
    return fabs(a - b) / (den < 1e-2 ? 1e-2 : den);
}

/* sum(rw * y) of the aggregate node over the block, as a function of its input x0 */
static double agg_obj(eng_node *n, const eng_block *b, const float *x0, float *xb, size_t nx, const float *rw)
{
    memcpy(xb, x0, nx * sizeof(float));
    eng_ops[ENG_OP_AGGREGATE].forward(n, b->n_dst);
    double s = 0;
    for (size_t i = 0; i < (size_t)b->n_dst * n->out_size; i++) s += (double)rw[i] * n->y[i];
    return s;
}

static void test_grad_aggregate(void **state)
{
    (void)state;
    eng_graph *g;
    assert_int_equal(eng_graph_sbm(40, 2, 4, 0.7, 2, 1.0, 3, &g), ENG_OK);
    int fan[1] = { 3 };
    eng_sampler *s;
    assert_int_equal(eng_sampler_create(g, ENG_SAMPLER_FUSED, fan, 1, 6, NULL, &s), ENG_OK);
    int32_t seeds[6] = { 0, 5, 9, 17, 22, 31 };
    eng_block *bl;
    assert_int_equal(eng_sampler_sample(s, seeds, 6, 1, &bl), ENG_OK);
    const eng_block *b = &bl[0];
    enum { IN = 5, K = 2 };
    eng_rng r;
    eng_rng_seed(&r, 9, 9);
    for (int cbsr = 0; cbsr < 2; cbsr++) {
        size_t w = cbsr ? K : IN, nx = (size_t)b->n_src * w;
        float *x0 = malloc(nx * sizeof(float)), *xb = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
        float *y = malloc((size_t)b->n_dst * 2 * IN * sizeof(float)), *rw = malloc((size_t)b->n_dst * 2 * IN * sizeof(float));
        int32_t *idx = malloc((size_t)b->n_src * K * sizeof(int32_t));
        fill(x0, nx, &r, 1.0);
        fill(rw, (size_t)b->n_dst * 2 * IN, &r, 1.0);
        for (int32_t i = 0; i < b->n_src; i++) { idx[i * K] = i % 3; idx[i * K + 1] = 3 + i % 2; }
        eng_node n;
        memset(&n, 0, sizeof n);
        n.op = ENG_OP_AGGREGATE; n.in_size = IN; n.out_size = 2 * IN; n.blk = b;
        n.x = xb; n.y = y; n.dy = rw; n.dx = dx;
        if (cbsr) { n.k = K; n.idx = idx; }
        agg_obj(&n, b, x0, xb, nx, rw);
        eng_ops[ENG_OP_AGGREGATE].backward(&n, b->n_dst);
        double worst = 0;
        for (size_t i = 0; i < nx; i++) {
            float keep = x0[i];
            x0[i] = keep + (float)EPS; double p = agg_obj(&n, b, x0, xb, nx, rw);
            x0[i] = keep - (float)EPS; double m = agg_obj(&n, b, x0, xb, nx, rw);
            x0[i] = keep;
            double e = rel((p - m) / (2 * EPS), dx[i]);
            if (e > worst) worst = e;
        }
        printf("  aggregate (%s input) d/dx: max rel diff %.2e over %zu values (block %d dst, %d src, %lld edges)\n",
               cbsr ? "CBSR" : "dense", worst, nx, b->n_dst, b->n_src, (long long)b->n_edges);
        assert_true(worst < TOL);
        /* self half: the destination's own row; neighbour half: the mean (a hand check of row 0) */
        if (!cbsr) {
            agg_obj(&n, b, x0, xb, nx, rw);
            int64_t d = b->indptr[1] - b->indptr[0];
            for (int c = 0; c < IN; c++) {
                double mean = 0;
                for (int64_t e = 0; e < d; e++) mean += x0[(size_t)b->indices[e] * IN + c];
                assert_true(fabs(y[c] - x0[c]) < 1e-6);
                assert_true(fabs(y[IN + c] - (d ? mean / d : 0)) < 1e-5);
            }
        }
        free(x0); free(xb); free(dx); free(y); free(rw); free(idx);
    }
    eng_sampler_free(s);
    eng_graph_free(g);
}

static eng_experiment *load(const char **sets, int n)
{
    eng_experiment *ex;
    int rc = eng_experiment_load("samples/graphsage-sbm.ini", sets, n, &ex);
    if (rc) printf("  load: %s\n", eng_error());
    assert_int_equal(rc, ENG_OK);
    return ex;
}

/* Finite differences of the model's loss w.r.t. every parameter; returns the share of
 * parameters off by more than TOL (maxk: a step may change a selection, a kink). */
static double model_grad_share(const char *layers, const char *mode)
{
    char l[128], md[64];
    snprintf(l, sizeof l, "model.layers=%s", layers);
    snprintf(md, sizeof md, "graph.mode=%s", mode);
    const char *sets[] = { "graph.nodes=60", "graph.features=3", "graph.classes=3", l, md, "graph.fanouts=4,3",
                           "train.batch=8", "graph.partition=none", "profile.enabled=false" };
    eng_experiment *ex = load(sets, 9);
    eng_gnn *m;
    assert_int_equal(eng_gnn_create(&ex->variants[0], NULL, &m), ENG_OK);
    int sampled = !strcmp(mode, "sampled");
    int32_t seeds[8] = { 1, 4, 7, 10, 13, 20, 33, 41 };
    float *p = eng_gnn_params(m);
    size_t np = eng_gnn_n_params(m);
    eng_rng r;
    eng_rng_seed(&r, 4, 4);
    fill(p, np, &r, 0.4);
    eng_gnn_loss_grad(m, sampled ? seeds : NULL, 8, 77, 1);
    float *ag = malloc(np * sizeof(float));
    memcpy(ag, eng_gnn_grads(m), np * sizeof(float));
    size_t off = 0;
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
        float keep = p[i];
        p[i] = keep + (float)EPS; double lp = eng_gnn_loss_grad(m, sampled ? seeds : NULL, 8, 77, 0);
        p[i] = keep - (float)EPS; double lm = eng_gnn_loss_grad(m, sampled ? seeds : NULL, 8, 77, 0);
        p[i] = keep;
        double e = rel((lp - lm) / (2 * EPS), ag[i]);
        off += e > TOL;
        if (e > worst) worst = e;
    }
    printf("  %s (%s): %s: %zu of %zu parameters off by > %.0e (worst %.2e)\n", layers, mode,
           eng_gnn_summary(m), off, np, TOL, worst);
    free(ag);
    eng_gnn_free(m);
    eng_experiment_free(ex);
    return (double)off / (double)np;
}

static void test_grad_sage_models(void **state)
{
    (void)state;
    assert_true(model_grad_share("sage:6:tanh, sage:3", "full") == 0);
    assert_true(model_grad_share("sage:6:tanh, sage:3", "sampled") == 0);
    assert_true(model_grad_share("sage:8:maxk3, sage:3", "full") < 0.03);
    assert_true(model_grad_share("sage:8:maxk3, sage:3", "sampled") < 0.03);
}

static void test_graph_config_errors(void **state)
{
    (void)state;
    struct { const char *set, *want; } cases[] = {
        { "graph.fanouts=10,x", "graph.fanouts" },
        { "graph.fanouts=10", "one fanout per sage layer" },
        { "model.layers=dense:8:relu, dense:4", "needs sage layers only" },
        { "graph.source=file", "file needs graph.edges" },
        { "graph.train_fraction=0.9", "must be below 1" },
        /* issue 22 #21: keys a graph run ignores are refused, not ignored (issue 23: train.gradient,
         * telemetry and checkpoint_every are loop slots, honoured: tests/engine/checkpoint.c) */
        { "data.augment=flip", "graph runs (data.source = graph) do not use data.augment" },
        { "data.prefetch=true", "do not use data.prefetch" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eng_experiment *ex;
        const char *s[] = { cases[i].set };
        assert_int_not_equal(eng_experiment_load("samples/graphsage-sbm.ini", s, 1, &ex), ENG_OK);
        if (!strstr(eng_error(), cases[i].want)) printf("  got: %s\n", eng_error());
        assert_non_null(strstr(eng_error(), cases[i].want));
    }
    /* sage layers on non-graph data */
    eng_experiment *ex;
    const char *s[] = { "model.layers=sage:8, dense:2" };
    assert_int_not_equal(eng_experiment_load("samples/spirals-mlp.ini", s, 1, &ex), ENG_OK);
    assert_non_null(strstr(eng_error(), "sage layers need data.source = graph"));
    /* the last layer must give the classes */
    const char *s2[] = { "model.layers=sage:8:relu, sage:5", "graph.partition=none" };
    ex = load(s2, 2);
    eng_gnn *m;
    assert_int_equal(eng_gnn_create(&ex->variants[0], NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "end the layers with sage:4"));
    eng_experiment_free(ex);
}

/* Issue 22 #10: the memory a graph run will take is estimated before anything is built; an
 * SBM of 10^6 nodes with the sample's model (sage:64:relu, sage:4, 16 features, degree 10)
 * took 2.8 GB when measured: the estimate must be of that size, and a limit below it refuses
 * with the parts and what to change. The limit is given, so no machine's memory matters. */
static void test_memory_estimate(void **state)
{
    (void)state;
    const char *sets[] = { "graph.nodes=1000000", "graph.partition=none" };
    eng_experiment *ex = load(sets, 2);
    const eng_config *c = &ex->variants[0];
    assert_int_equal(eng_gnn_check_memory(c, 1000000, 10000000, 5000000, 16, 4, 3.5e9), ENG_OK);
    assert_int_equal(eng_gnn_check_memory(c, 1000000, 10000000, 5000000, 16, 4, 2.0e9), ENG_ENOMEM);
    assert_non_null(strstr(eng_error(), "graph: out of memory: the graph is too big: 1000000 nodes"));
    assert_non_null(strstr(eng_error(), "use fewer graph.nodes"));
    /* the run refuses before building: 10^8 nodes of 10^5 features (40 PB) fit no machine */
    eng_experiment_free(ex);
    const char *huge[] = { "graph.nodes=100000000", "graph.features=100000", "graph.partition=metis" };
    ex = load(huge, 3);
    eng_gnn *m = NULL;
    size_t before = prof_mem_peak();
    assert_int_equal(eng_gnn_create(&ex->variants[0], NULL, &m), ENG_ENOMEM);
    assert_non_null(strstr(eng_error(), "the graph is too big: 100000000 nodes"));
    assert_non_null(strstr(eng_error(), "METIS about"));
    assert_true(prof_mem_peak() - before < (1u << 20));
    eng_experiment_free(ex);
}

static void test_partition(void **state)
{
    (void)state;
    eng_graph *g;
    assert_int_equal(eng_graph_sbm(800, 4, 8, 0.9, 4, 1.0, 2, &g), ENG_OK);
    int32_t *pm = malloc(sizeof(int32_t) * 800), *pr = malloc(sizeof(int32_t) * 800);
    assert_int_equal(eng_graph_partition(g, ENG_PART_METIS, 4, 1, pm), ENG_OK);
    assert_int_equal(eng_graph_partition(g, ENG_PART_RANDOM, 4, 1, pr), ENG_OK);
    int cnt[4] = { 0 };
    for (int v = 0; v < 800; v++) { assert_true(pm[v] >= 0 && pm[v] < 4); cnt[pm[v]]++; }
    for (int p = 0; p < 4; p++) assert_true(cnt[p] > 100); /* balanced-ish */
    eng_part_stats sm = { 0 }, sr = { 0 };
    eng_part_edge_cut(g, pm, 4, &sm);
    eng_part_edge_cut(g, pr, 4, &sr);
    int fan[2] = { 5, 3 };
    assert_int_equal(eng_part_traffic(g, pm, fan, 2, 32, 3, 1, &sm), ENG_OK);
    assert_int_equal(eng_part_traffic(g, pr, fan, 2, 32, 3, 1, &sr), ENG_OK);
    printf("  sbm 800/4: edge cut metis %.3f random %.3f; cross nodes per batch metis %.1f random %.1f (of %.1f)\n",
           sm.cut_fraction, sr.cut_fraction, sm.batch_cross_nodes, sr.batch_cross_nodes, sr.batch_input_nodes);
    /* random cuts ~3/4 of the edges; METIS on a 90%-homophilous SBM far fewer */
    assert_true(sr.cut_fraction > 0.65 && sr.cut_fraction < 0.85);
    assert_true(sm.cut_fraction < 0.5 * sr.cut_fraction);
    assert_true(sm.batch_cross_nodes < sr.batch_cross_nodes);
    assert_true(sr.batch_cross_bytes == sr.batch_cross_nodes * 4 * 4);
    assert_int_equal(eng_graph_partition(g, ENG_PART_METIS, 1, 1, pm), ENG_EINVAL);
    free(pm); free(pr);
    eng_graph_free(g);
    /* a directed graph is refused by METIS with a way out */
    int32_t src[3] = { 0, 1, 2 }, dst[3] = { 1, 2, 0 };
    eng_graph *d = prof_calloc(1, sizeof *d); /* eng_graph_free releases it through the profiler's allocator */
    d->n = 3;
    assert_int_equal(eng_graph_build_csr(d, src, dst, 3, 0), ENG_OK);
    int32_t p3[3];
    assert_int_equal(eng_graph_partition(d, ENG_PART_METIS, 2, 1, p3), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "needs an undirected graph"));
    eng_graph_free(d);
}

int test_engine_gnn(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_aggregate),
        cmocka_unit_test(test_grad_sage_models),
        cmocka_unit_test(test_graph_config_errors),
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_memory_estimate),
    };
    return cmocka_run_group_tests_name("engine_gnn", tests, NULL, NULL);
}
