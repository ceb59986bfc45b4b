/* quant.c — tests of int8 quantization: every int8 GEMM path equals the scalar reference
 * exactly (forced one by one, so an AVX2-only machine tests what it has), weight and
 * activation codes stay within half a step of the float values, integer inference stays
 * within the quantization error of the float model (dense with tanh/relu, conv + pool), and
 * the result does not depend on the path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/quant/quant_internal.h"
#include "../../engine/rng.h"
#include "isa_paths.h"

static void test_gemm_paths_exact(void **state)
{
    (void)state;
    static const int Ms[] = { 1, 2, 3, 5, 130 }, Ns[] = { 1, 3, 4, 7, 10 }, Ks[] = { 32, 64, 800 };
    eng_rng r;
    eng_rng_seed(&r, 1, 2);
    int vnni = eng_qgemm_path_available(ENG_QGEMM_VNNI);
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 5; b++)
            for (size_t c = 0; c < 3; c++) {
                int M = Ms[a], N = Ns[b], Kp = Ks[c];
                uint8_t *A = malloc((size_t)M * Kp);
                int8_t *B = malloc((size_t)N * Kp);
                int16_t *B16 = malloc((size_t)N * Kp * 2), *A16 = malloc((size_t)M * Kp * 2);
                int32_t *bias = malloc((size_t)N * 4), *want = malloc((size_t)M * N * 4), *got = malloc((size_t)M * N * 4);
                /* extremes included: 255 x -127 sums that would saturate an int16 pair */
                for (int i = 0; i < M * Kp; i++) A[i] = (uint8_t)(i % 5 == 0 ? 255 : eng_rng_below(&r, 256));
                for (int i = 0; i < N * Kp; i++) { B[i] = (int8_t)(i % 3 == 0 ? -127 : (int)eng_rng_below(&r, 255) - 127); B16[i] = B[i]; }
                for (int i = 0; i < N; i++) bias[i] = (int32_t)eng_rng_below(&r, 100000) - 50000;
                eng_qgemm(ENG_QGEMM_SCALAR, M, N, Kp, A, B, B16, bias, want, A16);
                for (eng_qgemm_path p = ENG_QGEMM_AVX2; p <= ENG_QGEMM_ONEDNN; p++) {
                    if (!eng_qgemm_path_available(p)) continue;
                    /* oneDNN may saturate pairs at int16 without VNNI: exact only with it */
                    if (p == ENG_QGEMM_ONEDNN && !vnni) continue;
                    memset(got, 0xa5, (size_t)M * N * 4);
                    if (p == ENG_QGEMM_ONEDNN) {
                        eng_dnnl_gemm *g = NULL;
                        assert_int_equal(eng_dnnl_gemm_run(&g, M, N, Kp, A, B, bias, got), ENG_OK);
                        eng_dnnl_gemm_free(g);
                    } else {
                        eng_qgemm(p, M, N, Kp, A, B, B16, bias, got, A16);
                    }
                    if (memcmp(want, got, (size_t)M * N * 4))
                        fail_msg("path %s differs from scalar at M=%d N=%d Kp=%d", eng_qgemm_path_name(p), M, N, Kp);
                }
                free(A); free(B); free(B16); free(A16); free(bias); free(want); free(got);
            }
    assert_int_equal(eng_qgemm_path_available(ENG_QGEMM_SCALAR), 1);
}

/* A dataset of n rows shaped c x h x w with labels from a fixed rule, for models built by hand. */
static eng_dataset *make_data(int c, int h, int w, int n, int classes)
{
    eng_dataset *ds = calloc(1, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "test");
    ds->classification = 1;
    ds->n_classes = classes;
    ds->in_shape[0] = c; ds->in_shape[1] = h; ds->in_shape[2] = w;
    ds->in_size = (size_t)c * h * w;
    ds->n_train = ds->n_test = n;
    ds->x_train = malloc((size_t)n * ds->in_size * sizeof(float));
    ds->y_train = malloc((size_t)n * sizeof(int32_t));
    eng_rng r;
    eng_rng_seed(&r, 7, 3);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (size_t k = 0; k < ds->in_size; k++) {
            float v = (float)eng_rng_normal(&r);
            ds->x_train[(size_t)i * ds->in_size + k] = v;
            s += v * (double)(k % 3);
        }
        ds->y_train[i] = (int32_t)((s > 0 ? 1 : 0) + (classes > 2 ? (i % 2) * 2 : 0)) % classes;
    }
    ds->x_test = ds->x_train;
    ds->y_test = ds->y_train;
    return ds;
}

static void free_data(eng_dataset *ds)
{
    free(ds->x_train);
    free(ds->y_train);
    free(ds);
}

static eng_model *build(eng_layer_spec *specs, int n, const eng_dataset *ds, int batch)
{
    eng_model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.n_layers = n;
    memcpy(mc.layers, specs, (size_t)n * sizeof *specs);
    mc.loss = ENG_LOSS_SOFTMAX_XENT;
    eng_model *m = NULL;
    if (eng_model_build(&mc, ds->in_shape, ds->n_classes, batch, 5, NULL, &m)) fail_msg("%s", eng_error());
    /* non-zero biases, so that their int32 path is exercised */
    for (int i = 0; i < m->n_layers; i++)
        for (size_t k = 0; k < m->layers[i].n_b; k++) m->layers[i].b[k] = 0.05f * (float)((int)(k % 5) - 2);
    return m;
}

/* int8 logits against the float model's on the test rows: mean |difference| relative to the
 * mean |logit|, and the share of rows whose class agrees. */
static void compare(eng_model *m, eng_qmodel *q, const eng_dataset *ds, double max_rel, double min_agree)
{
    int n = ds->n_test, no = ds->n_classes;
    float *lg = malloc((size_t)q->max_batch * no * sizeof(float));
    double diff = 0, mag = 0;
    int agree = 0;
    for (int r0 = 0; r0 < n; r0 += m->max_batch) {
        int rows = n - r0 < m->max_batch ? n - r0 : m->max_batch;
        eng_model_forward(m, ds->x_test + (size_t)r0 * ds->in_size, rows, ds->y_test + r0, NULL, NULL);
        assert_int_equal(eng_qmodel_forward(q, ds->x_test + (size_t)r0 * ds->in_size, rows, lg), ENG_OK);
        for (int r = 0; r < rows; r++) {
            int bf = 0, bq = 0;
            for (int c = 0; c < no; c++) {
                float f = m->logits[r * no + c], g = lg[r * no + c];
                diff += fabs(f - g);
                mag += fabs(f);
                if (f > m->logits[r * no + bf]) bf = c;
                if (g > lg[r * no + bq]) bq = c;
            }
            agree += bf == bq;
        }
    }
    double rel = diff / mag, ag = (double)agree / n;
    printf("  int8 vs fp32 logits: mean |diff| / mean |logit| = %.4f, classes agree on %.1f%%\n", rel, 100 * ag);
    assert_true(rel <= max_rel);
    assert_true(ag >= min_agree);
    free(lg);
}

/* Logits of every path this machine has are the same bits. */
static void paths_agree(eng_qmodel *q, const eng_dataset *ds)
{
    int rows = ds->n_test < q->max_batch ? ds->n_test : q->max_batch, no = q->n_out;
    float *a = malloc((size_t)rows * no * sizeof(float)), *b = malloc((size_t)rows * no * sizeof(float));
    assert_int_equal(eng_qmodel_set_kernel(q, "scalar"), ENG_OK);
    eng_qmodel_forward(q, ds->x_test, rows, a);
    static const char *const paths[] = { "avx2", "vnni", "auto" };
    for (int p = 0; p < 3; p++) {
        if (eng_qmodel_set_kernel(q, paths[p])) continue;
        eng_qmodel_forward(q, ds->x_test, rows, b);
        if (memcmp(a, b, (size_t)rows * no * sizeof(float))) fail_msg("kernel %s gives other logits than scalar", paths[p]);
    }
    free(a); free(b);
}

/* The bytes of every array eng_qmodel_export_c writes, counted from the C it wrote: each
 * "static const TYPE NAME[COUNT] = {" declaration, TYPE's size times COUNT. */
static size_t exported_array_bytes(const eng_qmodel *q)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(eng_qmodel_export_c(q, f, "m"), ENG_OK);
    rewind(f);
    static const struct { const char *type; size_t size; } types[] = {
        { "int8_t", 1 }, { "uint8_t", 1 }, { "int32_t", 4 }, { "float", 4 },
    };
    char line[4096], type[16], name[128];
    size_t total = 0;
    int arrays = 0;
    while (fgets(line, sizeof line, f)) {
        long count;
        if (sscanf(line, "static const %15s %127[^[][%ld] = {", type, name, &count) != 3) continue;
        size_t t = 0;
        while (t < sizeof types / sizeof types[0] && strcmp(types[t].type, type)) t++;
        if (t == sizeof types / sizeof types[0]) fail_msg("exported array %s has type %s, not counted here", name, type);
        total += types[t].size * (size_t)count;
        arrays++;
    }
    fclose(f);
    assert_true(arrays > 0);
    return total;
}

static void test_dense_error_bounds(void **state)
{
    (void)state;
    eng_dataset *ds = make_data(1, 1, 20, 300, 3);
    eng_layer_spec sp[] = { { .kind = ENG_LAYER_DENSE, .units = 24, .kernel = 0, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 16, .kernel = 0, .act = ENG_ACT_RELU },
                            { .kind = ENG_LAYER_DENSE, .units = 3, .kernel = 0, .act = ENG_ACT_NONE } };
    eng_model *m = build(sp, 3, ds, 64);
    eng_qmodel *q = NULL;
    assert_int_equal(eng_quantize(m, ds, 300, ENG_QSCHEME_MINMAX, 64, NULL, &q), ENG_OK);
    /* weights: within half a step of their channel's scale */
    for (int i = 0; i < 3; i++) {
        const eng_qlayer *Q = &q->layers[i];
        const eng_layer *L = &m->layers[i];
        for (int c = 0; c < Q->N; c++)
            for (int k = 0; k < Q->K; k++) {
                float w = L->w[(size_t)k * Q->N + c], back = Q->wscale[c] * Q->w[(size_t)c * Q->Kp + k];
                assert_true(fabsf(w - back) <= 0.5f * Q->wscale[c] * 1.0001f);
            }
        for (int k = Q->K; k < Q->Kp; k++) assert_int_equal(Q->w[k], 0);    /* padding */
    }
    /* inputs (min-max: all in range): within half a step */
    for (size_t k = 0; k < 300 * ds->in_size; k++) {
        float x = ds->x_train[k];
        float v = floorf(x / q->in_scale + 0.5f) + (float)q->in_zp;
        int code = v < 0 ? 0 : v > 255 ? 255 : (int)v;
        assert_true(fabsf(x - q->in_scale * (float)(code - q->in_zp)) <= 0.5f * q->in_scale * 1.001f);
    }
    compare(m, q, ds, 0.05, 0.95);
    paths_agree(q, ds);
    /* the reported bytes are those of the arrays model.c holds (issue 22, defect 18: a float
     * scale per channel was counted where int32 mult and shift are stored), here: weights,
     * int32 bias + mult and uint8 shift for 24 and 16 channels, bias + deq for 3, one tanh table */
    size_t want = 20 * 24 + 24 * 16 + 16 * 3 + 9 * (24 + 16) + 8 * 3 + 256;
    assert_int_equal(eng_qmodel_bytes(q), want);
    assert_int_equal(exported_array_bytes(q), want);
    /* the percentile scheme clips outliers: a narrower or equal input range */
    eng_qmodel *qp = NULL;
    assert_int_equal(eng_quantize(m, ds, 300, ENG_QSCHEME_PERCENTILE, 64, NULL, &qp), ENG_OK);
    assert_true(qp->in_scale <= q->in_scale);
    compare(m, qp, ds, 0.05, 0.95);
    eng_qmodel_free(qp);
    eng_qmodel_free(q);
    eng_model_free(m);
    free_data(ds);
}

/* The C writer's guarantee: every float it prints is a C literal. A non-finite scale (a
 * diverged model: "inff" once made a file that did not compile) is refused before anything
 * is written; names use the whole prefix, however long. */
static void test_export_refuses_non_finite(void **state)
{
    (void)state;
    eng_dataset *ds = make_data(1, 1, 8, 100, 3);
    eng_layer_spec sp[] = { { .kind = ENG_LAYER_DENSE, .units = 6, .kernel = 0, .act = ENG_ACT_RELU }, { .kind = ENG_LAYER_DENSE, .units = 3, .kernel = 0, .act = ENG_ACT_NONE } };
    eng_model *m = build(sp, 2, ds, 16);
    eng_qmodel *q = NULL;
    assert_int_equal(eng_quantize(m, ds, 100, ENG_QSCHEME_MINMAX, 16, NULL, &q), ENG_OK);
    char px[101];
    memset(px, 'p', 100);
    px[100] = 0;
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(eng_qmodel_export_c(q, f, px), ENG_OK);
    long len = ftell(f);
    char *text = malloc((size_t)len + 1);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = 0;
    char decl[160];
    snprintf(decl, sizeof decl, "static const int8_t %s_dense1_w[", px);   /* the whole prefix */
    assert_non_null(strstr(text, decl));
    free(text);
    fclose(f);
    float *scales[3] = { &q->in_scale, &q->layers[1].deq[2], &q->layers[1].deq[0] };
    const float bad[3] = { INFINITY, NAN, -INFINITY };
    for (int k = 0; k < 3; k++) {
        float keep = *scales[k];
        *scales[k] = bad[k];
        f = tmpfile();
        assert_int_equal(eng_qmodel_export_c(q, f, "nnb"), ENG_EINVAL);
        assert_non_null(strstr(eng_error(), "not finite"));
        assert_int_equal(ftell(f), 0);   /* nothing written */
        fclose(f);
        *scales[k] = keep;
    }
    eng_qmodel_free(q);
    eng_model_free(m);
    free_data(ds);
}

static void test_conv_pool(void **state)
{
    (void)state;
    eng_dataset *ds = make_data(2, 9, 9, 200, 2);
    eng_layer_spec sp[] = { { .kind = ENG_LAYER_CONV, .units = 5, .kernel = 3, .act = ENG_ACT_RELU }, { .kind = ENG_LAYER_POOL, .units = 0, .kernel = 2, .act = ENG_ACT_NONE },
                            { .kind = ENG_LAYER_CONV, .units = 4, .kernel = 2, .act = ENG_ACT_SIGMOID }, { .kind = ENG_LAYER_FLATTEN, .units = 0, .kernel = 0, .act = ENG_ACT_NONE },
                            { .kind = ENG_LAYER_DENSE, .units = 2, .kernel = 0, .act = ENG_ACT_NONE } };
    eng_model *m = build(sp, 5, ds, 50);
    eng_qmodel *q = NULL;
    assert_int_equal(eng_quantize(m, ds, 200, ENG_QSCHEME_MINMAX, 70, NULL, &q), ENG_OK);
    assert_int_equal(q->layers[0].P, 49);
    assert_int_equal(q->layers[0].K, 18);
    assert_int_equal(q->layers[0].Kp, 32);
    compare(m, q, ds, 0.06, 0.93);
    paths_agree(q, ds);
    /* bytes: what the export writes (conv channels requantize, the sigmoid's table) */
    assert_int_equal(eng_qmodel_bytes(q), exported_array_bytes(q));
    assert_int_equal(eng_qmodel_bytes(q), 5 * 18 + 4 * 20 + 2 * 16 + 9 * (5 + 4) + 8 * 2 + 256);
    /* refusals */
    assert_int_equal(eng_qmodel_forward(q, ds->x_test, 71, NULL), ENG_EINVAL);
    assert_int_equal(eng_qmodel_set_kernel(q, "turbo"), ENG_EINVAL);
    eng_qmodel_free(q);
    assert_int_equal(eng_quantize(m, ds, 0, ENG_QSCHEME_MINMAX, 70, NULL, &q), ENG_EINVAL);
    eng_model_free(m);
    /* the int8 im2col has no padding or stride: such a model is refused, not run wrong */
    sp[0].pad = 1;
    m = build(sp, 5, ds, 50);
    assert_int_equal(eng_quantize(m, ds, 200, ENG_QSCHEME_MINMAX, 70, NULL, &q), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "conv1 has pad=1 stride=1"));
    eng_model_free(m);
    /* batch norm and residual blocks have no int8 kernels: refused by name */
    sp[0].pad = 0;
    eng_layer_spec bn[] = { sp[0], { .kind = ENG_LAYER_BN, .act = ENG_ACT_RELU }, sp[3], sp[4] };
    m = build(bn, 4, ds, 50);
    assert_int_equal(eng_quantize(m, ds, 200, ENG_QSCHEME_MINMAX, 70, NULL, &q), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "quantize: layer bn1 is a batch-norm layer"));
    eng_model_free(m);
    eng_layer_spec res[] = { { .kind = ENG_LAYER_RES_BEGIN }, { .kind = ENG_LAYER_CONV, .units = 5, .kernel = 3, .act = ENG_ACT_RELU, .pad = 1 },
                             { .kind = ENG_LAYER_RES, .act = ENG_ACT_RELU }, sp[3], sp[4] };
    m = build(res, 5, ds, 50);
    assert_int_equal(eng_quantize(m, ds, 200, ENG_QSCHEME_MINMAX, 70, NULL, &q), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "quantize: layer res1.in is a residual-block layer"));
    eng_model_free(m);
    free_data(ds);
}

/* The input codes (quant.c's quantize_row, compiled once per instruction-set path) equal
 * the scalar formula exactly on every path: inputs in range, far out of it, +-inf, -0, NaN
 * (which clamps to 0); and the own int8 GEMM chosen without --kernel is no wider than the
 * forced path. */
static void test_input_codes_path(void **state)
{
    eng_isa before = isa_force_or_skip(state), p = eng_isa_current();
    eng_dataset *ds = make_data(1, 1, 37, 64, 3);
    eng_layer_spec sp[] = { { .kind = ENG_LAYER_DENSE, .units = 8, .kernel = 0, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 3, .kernel = 0, .act = ENG_ACT_NONE } };
    eng_model *m = build(sp, 2, ds, 64);
    eng_qmodel *q = NULL;
    assert_int_equal(eng_quantize(m, ds, 64, ENG_QSCHEME_MINMAX, 64, NULL, &q), ENG_OK);
    eng_qgemm_path own = eng_qgemm_best_own();
    assert_true(p == ENG_ISA_AVX512 || own != ENG_QGEMM_VNNI);
    assert_true(p != ENG_ISA_GENERIC || own == ENG_QGEMM_SCALAR);
    size_t n = 64 * ds->in_size;
    float *x = malloc(n * sizeof(float)), *lg = malloc(64 * (size_t)q->n_out * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = ds->x_train[i] * (i % 3 ? 1.0f : 4.0f);
    static const float sp_vals[] = { INFINITY, -INFINITY, NAN, -0.0f, 1e30f, -1e30f, 1e-40f };
    for (size_t k = 0; k < sizeof sp_vals / sizeof sp_vals[0]; k++) x[k * 101 % n] = sp_vals[k];
    /* x / scale + 0.5 on ties and either side of the kernel's +-512 hold, and -0 / tiny
     * negatives that floor to -1 */
    static const float steps[] = { -512.5f, -511.5f, -300.0f, -1.5f, -0.5f, -0.49999997f, -1e-7f, 0.5f, 1.5f,
                                   127.5f, 254.5f, 255.5f, 256.0f, 511.4f, 511.5f, 512.6f, 513.0f, 1e6f };
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) x[(k * 37 + 11) % n] = steps[k] * q->in_scale;
    assert_int_equal(eng_qmodel_forward(q, x, 64, lg), ENG_OK);
    for (size_t r = 0; r < 64; r++)
        for (size_t k = 0; k < ds->in_size; k++) {
            float v = floorf(x[r * ds->in_size + k] / q->in_scale + 0.5f) + (float)q->in_zp;
            int want = v >= 0.0f ? (v > 255.0f ? 255 : (int)v) : 0;
            if (q->xq[r * q->in_stride + k] != want)
                fail_msg("path %s: x=%.9g gives code %d, the formula %d", eng_isa_name(p),
                         (double)x[r * ds->in_size + k], q->xq[r * q->in_stride + k], want);
        }
    free(x); free(lg);
    eng_qmodel_free(q);
    eng_model_free(m);
    free_data(ds);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* A dense row's requantization (eng_qrequant_row, one body per instruction-set path)
 * gives eng_requant's integers on every path: accumulators at the int32 extremes,
 * multipliers over [2^30, 2^31) and 0, every shift 1..62, zero points and floors over their
 * range, and lengths that leave each vector width a tail. */
static void test_requant_row_path(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    enum { N = 77 };
    int32_t a[N], mult[N], shift[N];
    uint8_t got[N + 1];
    eng_rng r;
    eng_rng_seed(&r, 5, 6);
    long checked = 0;
    for (int round = 0; round < 400; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t bits = (uint32_t)eng_rng_below(&r, 65536) << 16 | (uint32_t)eng_rng_below(&r, 65536);
            a[i] = i % 11 == 0 ? INT32_MIN : i % 13 == 0 ? INT32_MAX : (int32_t)(bits >> (eng_rng_below(&r, 32)));
            if (i % 2) a[i] = ~a[i];   /* -a - 1: negative, and INT32_MIN <-> INT32_MAX */
            mult[i] = i % 17 == 5 ? 0 : (int32_t)((1u << 30) + (uint32_t)eng_rng_below(&r, 1u << 30));
            shift[i] = mult[i] ? 1 + (int32_t)((round + i) % 62) : 1;
        }
        int zp = (int)eng_rng_below(&r, 256), lo = round % 2 ? (int)eng_rng_below(&r, (uint32_t)zp + 1) : 0;
        int n = 1 + round % N;
        got[n] = 0xa5;
        eng_qrequant_row(a, n, mult, shift, zp, lo, got);
        assert_int_equal(got[n], 0xa5);   /* nothing written past n */
        for (int i = 0; i < n; i++, checked++)
            if (got[i] != eng_requant(a[i], mult[i], shift[i], zp, lo))
                fail_msg("path %s: acc %d mult %d shift %d zp %d lo %d gives %d, the formula %d",
                         eng_isa_name(eng_isa_current()), a[i], mult[i], shift[i], zp, lo, got[i],
                         eng_requant(a[i], mult[i], shift[i], zp, lo));
    }
    printf("  requantization %s: %ld codes match the formula\n", eng_isa_name(eng_isa_current()), checked);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

int test_engine_quant(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_paths_exact),
        cmocka_unit_test(test_dense_error_bounds),
        cmocka_unit_test(test_export_refuses_non_finite),
        cmocka_unit_test(test_conv_pool),
        ISA_PATH_TESTS(test_input_codes_path),
        ISA_PATH_TESTS(test_requant_row_path),
    };
    return cmocka_run_group_tests_name("engine_quant", tests, NULL, NULL);
}
