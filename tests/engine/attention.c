/* attention.c (tests) — the sequence layers: finite-difference gradients of every sequence
 * op inside small models (full and Linformer attention, sinusoidal and learned positions),
 * the attention output against a naive reference, Linformer with E = F = I equal to full
 * attention, the memory charged to attn_scores, and the layer and key parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/data/data_internal.h"
#include "../../engine/internal.h"
#include "../../engine/rng.h"

/* Differences of a float forward carry noise of about 1e-5 in absolute terms here (the
 * loss's rounding / 2 eps), so a gradient is compared relative to its size, but never to
 * less than 1% of the largest gradient of the model: a wrong backward is off by far more. */
#define GRAD_TOL 5e-3
#define GRAD_FLOOR_SHARE 1e-2

static eng_layer_spec seq(eng_seq_kind k, int units, int heads, int ff)
{
    return (eng_layer_spec){ .kind = ENG_LAYER_SEQ, .seq = k, .units = units, .heads = heads, .ff = ff };
}

/* embed:8, posenc, layernorm, encoder:heads=2:ff=12, meanpool, dense:3 */
static eng_model_config small_cfg(eng_attn_kind attn, int k, int learned)
{
    eng_model_config mc = { 0 };
    mc.loss = ENG_LOSS_SOFTMAX_XENT;
    mc.attn = attn;
    mc.attn_k = k;
    mc.layers[0] = seq(ENG_SEQ_EMBED, 8, 0, 0);
    mc.layers[1] = seq(ENG_SEQ_POSENC, 0, 0, 0);
    mc.layers[1].learned = learned;
    mc.layers[2] = seq(ENG_SEQ_LAYERNORM, 0, 0, 0);
    mc.layers[3] = seq(ENG_SEQ_ENCODER, 0, 2, 12);
    mc.layers[4] = seq(ENG_SEQ_ENCODER, 0, 2, 12);
    mc.layers[5] = seq(ENG_SEQ_MEANPOOL, 0, 0, 0);
    mc.layers[6] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3 };
    mc.n_layers = 7;
    return mc;
}

static void fill(float *v, size_t n, eng_rng *r, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * eng_rng_normal(r));
}

/* A hash of every LSH key list of the last forward: a central difference that moved a
 * query to another bucket crossed a step of the (piecewise constant) hash, where the loss
 * jumps; such values are skipped, as ops.c skips relu kinks. 0 without LSH. */
static uint64_t lsh_signature(const eng_model *m, int rows)
{
    uint64_t h = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const eng_attn *a = &m->attn[l];
        if (m->layers[l].kind != ENG_LAYER_SEQ || !a->idx) continue;
        for (size_t k = 0; k < (size_t)rows * a->heads * a->n * a->m; k++)
            h = (h ^ (uint64_t)(uint32_t)a->idx[k]) * 1099511628211ull;
    }
    return h;
}

/* worst relative difference of backward's gradients (parameters, then input) against
 * central differences of the model's loss */
static double grad_check(const char *label, const eng_model_config *mc, const int in[3], int rows)
{
    eng_model *m;
    assert_int_equal(eng_model_build(mc, in, 3, rows, 7, NULL, &m), ENG_OK);
    assert_int_equal(eng_model_enable_input_grad(m), ENG_OK);
    size_t np = eng_model_n_params(m), nx = (size_t)rows * in[0] * in[1] * in[2], nt = np + nx;
    float *x = malloc(nx * sizeof(float)), *ana = malloc(nt * sizeof(float));
    int32_t lab[8];
    eng_rng r;
    eng_rng_seed(&r, 3, 3);
    fill(x, nx, &r, 1.0);
    for (int i = 0; i < rows; i++) lab[i] = (int32_t)eng_rng_below(&r, 3);
    float *p = eng_model_params(m);
    /* biases and shifts start at 0 and gains at 1: move them so every term is exercised */
    for (size_t i = 0; i < np; i++) p[i] += (float)(0.1 * eng_rng_normal(&r));
    eng_model_forward(m, x, rows, lab, NULL, NULL);
    eng_model_backward(m);
    memcpy(ana, eng_model_grads(m), np * sizeof(float));
    memcpy(ana + np, m->dinput, nx * sizeof(float));
    uint64_t base = lsh_signature(m, rows);
    size_t skipped = 0;
    double worst = 0.0, wn = 0.0, floor = 0.0;
    size_t wi = 0;
    for (size_t i = 0; i < nt; i++) floor = fmax(floor, GRAD_FLOOR_SHARE * fabs(ana[i]));
    const float eps = 1e-2f;
    for (size_t i = 0; i < nt; i++) {
        float *v = i < np ? &p[i] : &x[i - np], keep = *v;
        *v = keep + eps;
        double fp = eng_model_forward(m, x, rows, lab, NULL, NULL);
        *v = keep - eps;
        double fm = eng_model_forward(m, x, rows, lab, NULL, NULL);
        int jump = lsh_signature(m, rows) != base;
        *v = keep + eps;
        eng_model_forward(m, x, rows, lab, NULL, NULL);
        jump |= lsh_signature(m, rows) != base;
        *v = keep;
        if (jump) { skipped++; continue; }
        double num = (fp - fm) / (2.0 * eps), den = fabs(num) + fabs(ana[i]);
        double d = fabs(num - ana[i]) / (den > floor ? den : floor);
        if (d > worst) { worst = d; wi = i; wn = num; }
    }
    printf("  worst at %zu (%s): analytic %.6g numeric %.6g\n", wi, wi < np ? "param" : "input", ana[wi], wn);
    printf("  %-22s %s: max rel diff %.2e over %zu values (%zu skipped: a bucket changed)\n", label,
           eng_model_summary(m), worst, nt, skipped);
    assert_true(skipped * 10 < nt);
    free(x);
    free(ana);
    eng_model_free(m);
    return worst;
}

/* eng_seq_summary names a layer by its first op without reading the op table (that read
 * made attention.c <-> ops.c a file circle): its names must stay the op table's. */
static void test_summary_names(void **state)
{
    (void)state;
    int in[3] = { 1, 5, 4 };
    eng_model_config mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    eng_model *m = NULL;
    assert_int_equal(eng_model_build(&mc, in, 3, 2, 7, NULL, &m), ENG_OK);
    int named = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const eng_layer *L = &m->layers[i];
        if (L->kind != ENG_LAYER_SEQ) continue;
        const eng_node *first = &m->nodes[L->node_first];
        char s[256], want[64];
        assert_true(eng_seq_summary(m, L, s, sizeof s) > 0);
        if (first->op == ENG_OP_POSENC || (first->op == ENG_OP_LAYERNORM && L->n_nodes > 1)) continue;
        snprintf(want, sizeof want, "%s(", eng_ops[first->op].name);
        assert_memory_equal(s, want, strlen(want));
        named++;
    }
    assert_int_equal(named, 3); /* embed, layernorm, meanpool */
    eng_model_free(m);
}

static void test_grad_full(void **state)
{
    (void)state;
    int in[3] = { 1, 5, 4 };
    eng_model_config mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    assert_true(grad_check("full, sinusoidal", &mc, in, 2) < GRAD_TOL);
    mc = small_cfg(ENG_ATTN_FULL, 0, 1);
    assert_true(grad_check("full, learned", &mc, in, 3) < GRAD_TOL);
}

static void test_grad_linformer(void **state)
{
    (void)state;
    int in[3] = { 1, 6, 3 };
    eng_model_config mc = small_cfg(ENG_ATTN_LINFORMER, 3, 0);
    assert_true(grad_check("linformer k=3", &mc, in, 2) < GRAD_TOL);
}

static void test_grad_lsh(void **state)
{
    (void)state;
    int in[3] = { 1, 8, 3 };
    eng_model_config mc = small_cfg(ENG_ATTN_LSH, 0, 0);
    mc.attn_buckets = 4;
    mc.attn_rounds = 2;
    assert_true(grad_check("lsh b4 r2", &mc, in, 2) < GRAD_TOL);
}

static const eng_node *find_op(const eng_model *m, eng_op_id op)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == op) return &m->nodes[i];
    return NULL;
}

/* Builds mc on in, runs one forward of `rows` (<= 4) random rows (seeded), returns the
 * model. The input and labels stay in static storage: a backward after it reads them. */
static eng_model *forward_random(const eng_model_config *mc, const int in[3], int rows, uint64_t seed)
{
    static float x[4 * 64];
    static const int32_t lab[4] = { 0, 2, 1, 0 };
    eng_model *m;
    size_t nx = (size_t)rows * in[1] * in[2];
    assert_true(rows <= 4 && nx <= sizeof x / sizeof *x);
    assert_int_equal(eng_model_build(mc, in, 3, rows, seed, NULL, &m), ENG_OK);
    eng_rng r;
    eng_rng_seed(&r, seed, seed);
    fill(x, nx, &r, 1.0);
    eng_model_forward(m, x, rows, lab, NULL, NULL);
    return m;
}

/* The largest difference between the attn_wsum output of encoder layer `l` and, in double,
 * softmax over each query's keys of q·k / sqrt(dh) times v, from the attn_qkv output: all
 * positions (full), or the LSH key lists (whose keys are the queries: shared QK). Also
 * checks each list: keys in range, at least one, the query itself only when alone. */
static double reference_diff(const eng_model *m, int l, int rows)
{
    const eng_attn *a = &m->attn[l];
    const eng_node *qkv = find_op(m, ENG_OP_ATTN_QKV), *ws = find_op(m, ENG_OP_ATTN_WSUM);
    int n = a->n, d = a->d, H = a->heads, dh = d / H, W = a->idx ? a->m : n, kcol = a->idx ? 0 : d;
    double worst = 0.0, *s = malloc((size_t)W * sizeof(double));
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++) {
                const int32_t *keys = a->idx ? a->idx + (((size_t)b * H + h) * n + i) * W : NULL;
                const float *q = qkv->y + ((size_t)b * n + i) * 3 * d + h * dh;
                double mx = -INFINITY, sum = 0.0;
                int valid = 0, self = 0;
                for (int w = 0; w < W; w++) {
                    int j = keys ? keys[w] : w;
                    assert_true(j >= -1 && j < n);
                    s[w] = 0.0;
                    if (j < 0) continue;
                    valid++;
                    self += j == i;
                    const float *k = qkv->y + ((size_t)b * n + j) * 3 * d + kcol + h * dh;
                    for (int c = 0; c < dh; c++) s[w] += (double)q[c] * k[c];
                    s[w] /= sqrt((double)dh);
                    if (s[w] > mx) mx = s[w];
                }
                assert_true(valid >= 1);
                assert_true(!keys || !self || valid == 1);
                for (int w = 0; w < W; w++) sum += (s[w] = keys && keys[w] < 0 ? 0.0 : exp(s[w] - mx));
                for (int c = 0; c < dh; c++) {
                    double o = 0.0;
                    for (int w = 0; w < W; w++) {
                        int j = keys ? keys[w] : w;
                        if (j >= 0) o += s[w] / sum * qkv->y[((size_t)b * n + j) * 3 * d + 2 * d + h * dh + c];
                    }
                    worst = fmax(worst, fabs(o - ws->y[((size_t)b * n + i) * d + h * dh + c]));
                }
            }
    free(s);
    return worst;
}

static void test_attention_reference(void **state)
{
    (void)state;
    int in[3] = { 1, 7, 5 };
    eng_model_config mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    eng_model *m = forward_random(&mc, in, 2, 11);
    double worst = reference_diff(m, 3, 2);
    printf("  attention vs double reference: max abs diff %.2e\n", worst);
    assert_true(worst < 1e-5);
    eng_model_free(m);
}

/* Linformer with k = n and E = F = identity attends exactly as full attention: the same
 * parameters otherwise (copied around E, F) give the same logits. */
static void test_linformer_identity(void **state)
{
    (void)state;
    int in[3] = { 1, 6, 4 }, rows = 2, n = 6;
    eng_model_config fc = small_cfg(ENG_ATTN_FULL, 0, 0), lc = small_cfg(ENG_ATTN_LINFORMER, n, 0);
    eng_model *fm, *lm;
    assert_int_equal(eng_model_build(&fc, in, 3, rows, 5, NULL, &fm), ENG_OK);
    assert_int_equal(eng_model_build(&lc, in, 3, rows, 5, NULL, &lm), ENG_OK);
    assert_int_equal(lm->n_params, fm->n_params + 2 * 2 * (size_t)n * n);
    /* walk both models' nodes: parameters match node by node, E and F set to I */
    int j = 0;
    for (int i = 0; i < lm->n_nodes; i++) {
        eng_node *ln = &lm->nodes[i];
        if (ln->op == ENG_OP_LINFORMER_PROJ) {
            memset(ln->w, 0, ln->n_w * sizeof(float));
            for (int t = 0; t < 2 * n; t++) ln->w[(size_t)t * n + t % n] = 1.0f;
            continue;
        }
        eng_node *fn = &fm->nodes[j++];
        assert_int_equal(fn->op, ln->op);
        if (fn->n_w) memcpy(ln->w, fn->w, fn->n_w * sizeof(float));
        if (fn->n_b) memcpy(ln->b, fn->b, fn->n_b * sizeof(float));
    }
    float x[2 * 6 * 4];
    int32_t lab[2] = { 1, 0 };
    eng_rng r;
    eng_rng_seed(&r, 2, 2);
    fill(x, sizeof x / sizeof *x, &r, 1.0);
    double a = eng_model_forward(fm, x, rows, lab, NULL, NULL), b = eng_model_forward(lm, x, rows, lab, NULL, NULL);
    double worst = 0.0;
    for (int i = 0; i < rows * 3; i++) worst = fmax(worst, fabs(fm->logits[i] - lm->logits[i]));
    printf("  linformer(E=F=I) vs full: loss %.6f vs %.6f, max logit diff %.2e\n", b, a, worst);
    assert_true(worst < 1e-5);
    eng_model_free(fm);
    eng_model_free(lm);
}

/* LSH: chunks of ceil(20/4) = 5, 3 rounds of own + previous chunk = 30 key slots; the
 * output over those lists against the double reference. */
static void test_lsh_lists(void **state)
{
    (void)state;
    int in[3] = { 1, 20, 5 };
    eng_model_config mc = small_cfg(ENG_ATTN_LSH, 0, 0);
    mc.attn_buckets = 4;
    mc.attn_rounds = 3;
    eng_model *m = forward_random(&mc, in, 2, 4);
    assert_int_equal(m->attn[3].chunk, 5);
    assert_int_equal(m->attn[3].m, 3 * 2 * 5);
    double worst = reference_diff(m, 3, 2);
    printf("  lsh attention vs double reference over its key lists: max abs diff %.2e\n", worst);
    assert_true(worst < 1e-5);
    eng_model_free(m);
}

/* The op table's memory column holds the probabilities and their gradient on attn_scores
 * (B x heads x n x m floats, twice), and its FLOPs follow the documented formula. */
static void test_scores_memory_and_flops(void **state)
{
    (void)state;
    prof_t *p = prof_create(&(prof_options){ .quiet = 1 });
    assert_non_null(p);
    int in[3] = { 1, 16, 4 }, rows = 3;
    eng_model_config mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 3, rows, 5, p, &m), ENG_OK);
    float x[3 * 16 * 4] = { 0 };
    int32_t lab[3] = { 0, 1, 2 };
    eng_model_forward(m, x, rows, lab, NULL, NULL);
    prof_row *pr;
    size_t nr;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &pr, &nr), 0);
    int seen = 0;
    for (size_t i = 0; i < nr; i++) {
        if (strcmp(pr[i].name, "attn_scores.fwd") || strcmp(pr[i].layer, "encoder1")) continue;
        seen = 1;
        assert_int_equal(pr[i].self_mem, 2 * 4 * rows * 2 * 16 * 16);
        assert_int_equal(pr[i].flops, 2ull * rows * 16 * 16 * 8 + (uint64_t)rows * 2 * 16 * 16);
    }
    assert_true(seen);
    free(pr);
    eng_model_free(m);
    prof_destroy(p);
}

/* Regression: the per-layer gradient transforms and telemetry read L->w / L->dw, NULL for
 * sequence layers before they pointed at the layer's block (znorm crashed); centralize,
 * which needs a matrix per layer, refuses them by name. */
static void test_gradient_transforms(void **state)
{
    (void)state;
    int in[3] = { 1, 5, 4 };
    eng_model_config mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    eng_model *m = forward_random(&mc, in, 2, 3);
    eng_model_backward(m);
    eng_train_config tc = { .n_gradient = 1, .gradient = { ENG_GRAD_ZNORM }, .znorm_eps = 1e-8 };
    eng_grad *g;
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    eng_grad_apply(g, NULL);
    const eng_layer *L = &m->layers[3];
    double mean, var;
    eng_grad_stats(L->dw, L->n_w, &mean, &var, NULL, NULL);
    assert_true(fabs(mean) < 1e-4 && fabs(var - 1.0) < 1e-3); /* the encoder's block, z-scored */
    eng_grad_free(g);
    eng_telem *t;
    assert_int_equal(eng_telem_create(m, NULL, &t), ENG_OK);
    eng_telem_before(t);
    eng_telem_free(t);
    tc.gradient[0] = ENG_GRAD_CENTRALIZE;
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "layer embed1 is a sequence layer"));
    eng_model_free(m);
}

static void test_build_errors(void **state)
{
    (void)state;
    eng_model *m;
    int in[3] = { 1, 5, 4 };
    eng_model_config mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    mc.layers[3].heads = 3; /* 3 does not divide 8 */
    assert_int_equal(eng_model_build(&mc, in, 3, 2, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "do not divide the width 8"));
    int img[3] = { 2, 5, 4 };
    mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    assert_int_equal(eng_model_build(&mc, img, 3, 2, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "needs a sequence input"));
    mc = small_cfg(ENG_ATTN_FULL, 0, 0);
    /* more encoders than the node table holds, within the layer limit */
    int n_enc = ENG_MAX_LAYERS - 5;
    assert_true(n_enc * 13 > ENG_MAX_NODES);
    for (int i = 0; i < n_enc; i++) mc.layers[3 + i] = seq(ENG_SEQ_ENCODER, 0, 2, 8);
    mc.layers[3 + n_enc] = seq(ENG_SEQ_MEANPOOL, 0, 0, 0);
    mc.layers[4 + n_enc] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3 };
    mc.n_layers = 5 + n_enc;
    assert_int_equal(eng_model_build(&mc, in, 3, 2, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "fewer encoder layers"));
}

/* The layer syntax (with "* N" repetition) and model.attention, through the real loader. */
static void test_parsing(void **state)
{
    (void)state;
    const char *ok[] = { "model.layers=embed:16, posenc:learned, encoder:heads=2:ff=32 * 3, layernorm, meanpool, dense:2",
                         "model.attention=linformer:k=7" };
    eng_experiment *ex;
    assert_int_equal(eng_experiment_load("samples/spirals-mlp.ini", ok, 2, &ex), ENG_OK);
    const eng_model_config *mc = &ex->variants[0].model;
    assert_int_equal(mc->n_layers, 8);
    assert_int_equal(mc->layers[2].seq, ENG_SEQ_ENCODER);
    assert_int_equal(mc->layers[5].seq, ENG_SEQ_LAYERNORM);
    assert_int_equal(mc->layers[4].heads, 2);
    assert_int_equal(mc->layers[4].ff, 32);
    assert_int_equal(mc->layers[1].learned, 1);
    assert_int_equal(mc->attn, ENG_ATTN_LINFORMER);
    assert_int_equal(mc->attn_k, 7);
    eng_experiment_free(ex);
    const char *bad[][2] = {
        { "model.layers=embed, dense:2", "embed:WIDTH" },
        { "model.layers=encoder:heads=0, dense:2", "encoder[:heads=H][:ff=F]" },
        { "model.layers=posenc:sine, dense:2", "posenc:learned" },
        { "model.layers=dense:4 * 0, dense:2", "LAYER * N" },
        { "model.attention=linformer:k=0", "linformer:k=K" },
        { "model.attention=sparse", "expected full" },
        { "model.attention=lsh:buckets=3:rounds=1", "B even" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_not_equal(eng_experiment_load("samples/spirals-mlp.ini", &bad[i][0], 1, &ex), ENG_OK);
        if (!strstr(eng_error(), bad[i][1])) printf("  unexpected message: %s\n", eng_error());
        assert_non_null(strstr(eng_error(), bad[i][1]));
    }
}

/* The attention samples load: the Fashion transformer's four variants, the scaling
 * sample's 15 (n and attention per variant). */
static void test_samples(void **state)
{
    (void)state;
    eng_experiment *ex;
    assert_int_equal(eng_experiment_load("samples/transformer-fashion.ini", NULL, 0, &ex), ENG_OK);
    assert_int_equal(ex->n_variants, 4);
    assert_int_equal(ex->variants[0].model.n_layers, 7);
    assert_int_equal(ex->variants[0].data.sequence, ENG_SEQ_VIEW_PATCHES);
    assert_int_equal(ex->variants[3].model.attn, ENG_ATTN_LSH);
    eng_experiment_free(ex);
    assert_int_equal(eng_experiment_load("samples/attention-scaling.ini", NULL, 0, &ex), ENG_OK);
    assert_int_equal(ex->n_variants, 15);
    assert_int_equal(ex->variants[14].data.seq_len, 4096);
    assert_int_equal(ex->variants[14].model.attn_buckets, 128);
    eng_experiment_free(ex);
}

/* data.sequence = patches: position p of a row is the p-th 4x4 block of the image, row-major
 * (an 8x13 image: 2x3 patches, the 13th column dropped); pixels and rows only reshape. */
static void test_sequence_views(void **state)
{
    (void)state;
    enum { H = 8, W = 13, N = 3 };
    float img[N * H * W], x[N * H * W];
    for (int i = 0; i < N * H * W; i++) img[i] = (float)i;
    eng_dataset ds = { .in_shape = { 1, H, W }, .in_size = H * W, .n_train = 2, .n_test = 1 };
    memcpy(x, img, sizeof x);
    ds.x_train = x;
    ds.x_test = x + 2 * H * W;
    eng_data_config dc = { .sequence = ENG_SEQ_VIEW_PATCHES };
    assert_int_equal(eng_data_seq_view(&dc, &ds), ENG_OK);
    assert_int_equal(ds.in_shape[1], 6);
    assert_int_equal(ds.in_shape[2], 16);
    assert_int_equal(ds.in_size, 96);
    for (int r = 0; r < N; r++) {
        const float *row = r < 2 ? ds.x_train + (size_t)r * ds.in_size : ds.x_test;
        for (int p = 0; p < 6; p++)
            for (int k = 0; k < 16; k++) {
                int y = (p / 3) * 4 + k / 4, c = (p % 3) * 4 + k % 4;
                assert_true(row[p * 16 + k] == img[r * H * W + y * W + c]);
            }
    }
    eng_dataset px = { .in_shape = { 1, H, W }, .in_size = H * W, .n_train = 1, .x_train = x };
    dc.sequence = ENG_SEQ_VIEW_PIXELS;
    assert_int_equal(eng_data_seq_view(&dc, &px), ENG_OK);
    assert_int_equal(px.in_shape[1], H * W);
    assert_int_equal(px.in_shape[2], 1);
    eng_dataset flat = { .in_shape = { 1, 1, 5 }, .in_size = 5, .n_train = 1, .x_train = x };
    dc.sequence = ENG_SEQ_VIEW_ROWS;
    assert_int_equal(eng_data_seq_view(&dc, &flat), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "data.sequence: needs single-channel images"));
}

/* markers: exactly two flagged positions, one in each outer quarter, label = tokens equal;
 * both labels occur about equally often */
static void test_markers(void **state)
{
    (void)state;
    eng_data_config dc = { .source = ENG_DATA_MARKERS, .n = 400, .seq_len = 64, .test_fraction = 0.25 };
    eng_dataset *ds;
    assert_int_equal(eng_data_load(&dc, 3, &ds), ENG_OK);
    assert_int_equal(ds->in_shape[1], 64);
    assert_int_equal(ds->in_shape[2], 5);
    int ones = 0;
    for (int r = 0; r < ds->n_train; r++) {
        const float *x = ds->x_train + (size_t)r * ds->in_size;
        int at[2], nf = 0, tok[2];
        for (int p = 0; p < 64; p++) {
            const float *v = x + p * 5;
            float sum = v[0] + v[1] + v[2] + v[3];
            assert_true(sum == 1.0f);
            if (v[4] == 1.0f) {
                assert_true(nf < 2);
                at[nf] = p;
                tok[nf++] = v[0] ? 0 : v[1] ? 1 : v[2] ? 2 : 3;
            }
        }
        assert_int_equal(nf, 2);
        assert_true(at[0] < 16 && at[1] >= 48);
        assert_int_equal(ds->y_train[r], tok[0] == tok[1]);
        ones += ds->y_train[r];
    }
    assert_true(ones > ds->n_train / 3 && ones < 2 * ds->n_train / 3);
    eng_data_free(ds);
    dc.seq_len = 4;
    assert_int_equal(eng_data_load(&dc, 3, &ds), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "seq_len >= 8"));
}

int test_engine_attention(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_full),
        cmocka_unit_test(test_grad_linformer),
        cmocka_unit_test(test_grad_lsh),
        cmocka_unit_test(test_attention_reference),
        cmocka_unit_test(test_lsh_lists),
        cmocka_unit_test(test_linformer_identity),
        cmocka_unit_test(test_scores_memory_and_flops),
        cmocka_unit_test(test_gradient_transforms),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_parsing),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_sequence_views),
        cmocka_unit_test(test_markers),
        cmocka_unit_test(test_summary_names),
    };
    return cmocka_run_group_tests_name("engine_attention", tests, NULL, NULL);
}
