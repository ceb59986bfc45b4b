/* quant.c — int8 post-training quantization of a trained model (weights symmetric per
 * output channel, activations uint8 per tensor calibrated on training samples by min-max or
 * percentiles, biases int32) and its integer inference: uint8 x int8 -> int32 GEMMs with
 * requantization between layers, each step its own profiler scope. Conventions in
 * quant_internal.h. */
#include "quant_internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static size_t pad32(size_t n) { return (n + ENG_QK_ALIGN - 1) / ENG_QK_ALIGN * ENG_QK_ALIGN; }

/* Bytes past the end of every uint8 buffer, so that im2col's 8-byte moves may read and
 * write a little beyond a row. */
#define ENG_QSLACK 32

/* ---- calibration ------------------------------------------------------------------------ */

#define CAL_SAMPLES 200000   /* values kept per tensor for the percentile scheme */
#define PERCENTILE 99.99

typedef struct {
    double lo, hi;
    float *keep;
    size_t n_keep, cap, seen, stride;
} cal;

static void cal_init(cal *c, size_t total)
{
    memset(c, 0, sizeof *c);
    c->lo = INFINITY;
    c->hi = -INFINITY;
    c->stride = total > CAL_SAMPLES ? total / CAL_SAMPLES + 1 : 1;
    c->cap = total / c->stride + 1;
}

static int cal_add(cal *c, const float *v, size_t n, int percentile)
{
    if (percentile && !c->keep && !(c->keep = malloc(c->cap * sizeof(float)))) return -1;
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        if (x < c->lo) c->lo = x;
        if (x > c->hi) c->hi = x;
        if (percentile && (c->seen++ % c->stride) == 0 && c->n_keep < c->cap) c->keep[c->n_keep++] = v[i];
    }
    return 0;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The tensor's uint8 parameters: its range (always holding 0, so that 0 and relu's floor
 * are exact codes) over 255 steps. */
static void cal_params(cal *c, int percentile, float *scale, int *zp)
{
    double lo = c->lo, hi = c->hi;
    if (percentile && c->n_keep > 1) {
        qsort(c->keep, c->n_keep, sizeof(float), cmp_float);
        size_t n = c->n_keep;
        size_t i_lo = (size_t)floor((100.0 - PERCENTILE) / 100.0 * (double)(n - 1));
        size_t i_hi = (size_t)ceil(PERCENTILE / 100.0 * (double)(n - 1));
        lo = c->keep[i_lo];
        hi = c->keep[i_hi];
    }
    if (!isfinite(lo) || lo > 0) lo = 0;
    if (!isfinite(hi) || hi < 0) hi = 0;
    double s = (hi - lo) / 255.0;
    if (!(s > 1e-12)) s = 1e-12;
    int z = (int)lround(-lo / s);
    *scale = (float)s;
    *zp = z < 0 ? 0 : z > 255 ? 255 : z;
    free(c->keep);
    c->keep = NULL;
}

/* ---- building --------------------------------------------------------------------------- */

/* mult · 2^-shift = real, mult in [2^30, 2^31). */
static void fixed_point(double real, int32_t *mult, int32_t *shift)
{
    if (!(real > 0)) { *mult = 0; *shift = 1; return; }
    int e;
    double f = frexp(real, &e);             /* real = f 2^e, f in [0.5, 1) */
    long long m = llround(f * 2147483648.0);
    if (m == 2147483648LL) { m /= 2; e++; }
    int s = 31 - e;
    if (s < 1) { m = 2147483647LL; s = 1; }  /* a multiplier >= 2^30: saturates, never in practice */
    if (s > 62) { m = 0; s = 62; }
    *mult = (int32_t)m;
    *shift = s;
}

static float act_apply(eng_act a, float z)
{
    switch (a) {
    case ENG_ACT_TANH: return tanhf(z);
    case ENG_ACT_SIGMOID: return 1.0f / (1.0f + expf(-z));
    case ENG_ACT_GELU: return 0.5f * z * (1.0f + tanhf(0.7978845608f * (z + 0.044715f * z * z * z)));
    case ENG_ACT_RELU: return z > 0 ? z : 0;
    case ENG_ACT_NONE: return z;
    case ENG_ACT_MAXK: return z;   /* refused by eng_quantize */
    }
    return z;
}

static int lut_act(eng_act a) { return a == ENG_ACT_TANH || a == ENG_ACT_SIGMOID || a == ENG_ACT_GELU; }

void eng_qmodel_free(eng_qmodel *q)
{
    if (!q) return;
    for (int i = 0; i < q->n_layers; i++) {
        eng_qlayer *L = &q->layers[i];
        prof_free(L->w); prof_free(L->w16); prof_free(L->bias); prof_free(L->wscale);
        prof_free(L->mult); prof_free(L->shift); prof_free(L->deq);
        if (L->kind != ENG_LAYER_FLATTEN) prof_free(L->y);
        eng_dnnl_gemm_free(L->dnnl);
    }
    prof_free(q->xq); prof_free(q->col); prof_free(q->acc); prof_free(q->a16);
    prof_free(q);
}

/* Weights, biases and requantization of one dense or conv layer. W is [N x K] with
 * element (c, k) at w[c * cs + k * ks]. */
static int quantize_weights(eng_qlayer *Q, const float *w, size_t cs, size_t ks, const float *b)
{
    int N = Q->N, K = Q->K, Kp = Q->Kp;
    Q->w = prof_calloc((size_t)N * Kp, 1);
    Q->w16 = prof_calloc((size_t)N * Kp, sizeof(int16_t));
    Q->bias = prof_malloc((size_t)N * sizeof(int32_t));
    Q->wscale = prof_malloc((size_t)N * sizeof(float));
    Q->mult = prof_malloc((size_t)N * sizeof(int32_t));
    Q->shift = prof_malloc((size_t)N * sizeof(int32_t));
    Q->deq = prof_malloc((size_t)N * sizeof(float));
    if (!Q->w || !Q->w16 || !Q->bias || !Q->wscale || !Q->mult || !Q->shift || !Q->deq)
        return eng_fail(ENG_ENOMEM, "quantize: out of memory for layer %s", Q->name);
    /* the scale the requantization maps to: the pre-activation's for table activations */
    float out_s = Q->has_lut ? Q->pre_scale : Q->out_scale;
    for (int c = 0; c < N; c++) {
        float mx = 0;
        for (int k = 0; k < K; k++) {
            float a = fabsf(w[c * cs + k * ks]);
            if (a > mx) mx = a;
        }
        float s = mx > 0 ? mx / 127.0f : 1.0f;
        Q->wscale[c] = s;
        int64_t sum = 0;
        for (int k = 0; k < K; k++) {
            long v = lroundf(w[c * cs + k * ks] / s);
            if (v > 127) v = 127;
            if (v < -127) v = -127;
            Q->w[(size_t)c * Kp + k] = (int8_t)v;
            Q->w16[(size_t)c * Kp + k] = (int16_t)v;
            sum += v;
        }
        double acc_scale = (double)Q->in_scale * s;
        double bq = llround((double)b[c] / acc_scale) - (double)Q->in_zp * (double)sum;
        if (bq > 2147483647.0) bq = 2147483647.0;
        if (bq < -2147483648.0) bq = -2147483648.0;
        Q->bias[c] = (int32_t)bq;
        Q->deq[c] = (float)acc_scale;
        fixed_point(acc_scale / out_s, &Q->mult[c], &Q->shift[c]);
    }
    return ENG_OK;
}

static int register_scopes(eng_qmodel *q)
{
    if (!q->prof) {
        q->scope_quantize = -1;
        for (int i = 0; i < q->n_layers; i++)
            for (int k = 0; k < 4; k++) q->layers[i].scope[k] = -1;
        return ENG_OK;
    }
    q->scope_quantize = prof_register(q->prof, "quantize", "input", PROF_OP);
    if (q->scope_quantize < 0) return eng_fail(ENG_EINVAL, "quantize: profiler: %s", prof_error());
    static const char *const names[4] = { "gemm_s8", "requantize", NULL, "dequantize" };
    for (int i = 0; i < q->n_layers; i++) {
        eng_qlayer *L = &q->layers[i];
        for (int k = 0; k < 4; k++) {
            const char *nm = names[k];
            if (k == 2) nm = L->kind == ENG_LAYER_CONV ? "im2col_u8" : L->kind == ENG_LAYER_POOL ? "maxpool_u8" : NULL;
            int needed = nm && (L->kind == ENG_LAYER_DENSE || L->kind == ENG_LAYER_CONV || k == 2) && (k != 3 || L->last);
            L->scope[k] = needed ? prof_register(q->prof, nm, L->name, PROF_OP) : -1;
            if (needed && L->scope[k] < 0) return eng_fail(ENG_EINVAL, "quantize: profiler: %s", prof_error());
        }
    }
    return ENG_OK;
}

/* The int8 path covers the model's layers and the data fits it. */
static int check_quantizable(const eng_model *m, const eng_dataset *ds)
{
    if ((size_t)ds->in_size != m->in_size)
        return eng_fail(ENG_EINVAL, "quantize: the data has %zu inputs per sample, the model %zu", ds->in_size, m->in_size);
    for (int i = 0; i < m->n_layers; i++) {
        const eng_layer *l = &m->layers[i];
        if (l->kind == ENG_LAYER_SEQ)
            return eng_fail(ENG_EINVAL, "quantize: layer %s is a sequence layer; the int8 path covers dense, conv, "
                            "pool and flatten layers", l->name);
        if (l->kind == ENG_LAYER_SAGE || l->kind == ENG_LAYER_AVGPOOL || l->kind == ENG_LAYER_GAP)
            return eng_fail(ENG_EINVAL, "quantize: layer %s is a %s layer; the int8 path covers dense, conv, pool "
                            "and flatten layers", l->name, l->kind == ENG_LAYER_SAGE ? "GraphSAGE" : "average-pooling");
        if (l->kind == ENG_LAYER_BN || l->kind == ENG_LAYER_RES_BEGIN || l->kind == ENG_LAYER_RES)
            return eng_fail(ENG_EINVAL, "quantize: layer %s is a %s layer; the int8 path covers dense, conv, pool "
                            "and flatten layers", l->name, l->kind == ENG_LAYER_BN ? "batch-norm" : "residual-block");
        if (l->act == ENG_ACT_MAXK)
            return eng_fail(ENG_EINVAL, "quantize: layer %s has a maxk activation; the int8 path covers relu, tanh, "
                            "sigmoid, gelu and none", l->name);
        if (l->kind == ENG_LAYER_CONV && (l->pad || l->stride > 1))
            return eng_fail(ENG_EINVAL, "quantize: layer %s has pad=%d stride=%d; the int8 im2col covers convolutions "
                            "without padding and with stride 1", l->name, l->pad, l->stride);
    }
    return ENG_OK;
}

static void cals_free(cal *cals, int nt)
{
    for (int i = 0; i < nt; i++) free(cals[i].keep);
    free(cals);
}

/* Calibration: one range per tensor (input, each layer's pre-activation and output) from
 * the forward of the first n_calib training samples. *out: 1 + 2 * layers ranges. */
static int calibrate(eng_model *m, const eng_dataset *ds, int n_calib, int percentile, cal **out)
{
    int nt = 1 + 2 * m->n_layers;
    cal *cals = calloc((size_t)nt, sizeof *cals);
    if (!cals) return eng_fail(ENG_ENOMEM, "quantize: out of memory");
    cal_init(&cals[0], (size_t)n_calib * m->in_size);
    for (int i = 0; i < m->n_layers; i++) {
        cal_init(&cals[1 + 2 * i], (size_t)n_calib * m->layers[i].out_size);
        cal_init(&cals[2 + 2 * i], (size_t)n_calib * m->layers[i].out_size);
    }
    int rc = ENG_OK;
    int nto = ds->n_targets > 0 ? ds->n_targets : 1;
    for (int r0 = 0; r0 < n_calib && !rc; r0 += m->max_batch) {
        int rows = n_calib - r0 < m->max_batch ? n_calib - r0 : m->max_batch;
        const float *x = ds->x_train + (size_t)r0 * ds->in_size;
        eng_model_forward(m, x, rows, ds->y_train ? ds->y_train + r0 : NULL,
                          ds->t_train ? ds->t_train + (size_t)r0 * nto : NULL, NULL);
        if (cal_add(&cals[0], x, (size_t)rows * m->in_size, percentile)) rc = ENG_ENOMEM;
        for (int i = 0; i < m->n_layers && !rc; i++) {
            const eng_layer *L = &m->layers[i];
            size_t n = (size_t)rows * L->out_size;
            if (lut_act(L->act) && cal_add(&cals[1 + 2 * i], L->z, n, percentile)) rc = ENG_ENOMEM;
            if (!rc && cal_add(&cals[2 + 2 * i], L->a, n, percentile)) rc = ENG_ENOMEM;
        }
    }
    if (rc) {
        cals_free(cals, nt);
        return eng_fail(ENG_ENOMEM, "quantize: out of memory for calibration samples");
    }
    *out = cals;
    return ENG_OK;
}

/* The workspaces' sizes, the largest any layer needs. */
typedef struct {
    size_t col, acc, a16, bytes;
} ws_sizes;

/* A dense or conv layer: its scales from the ranges pre (pre-activation) and post (output),
 * its int8 weights and activation table; input rows are in_stride bytes apart. */
static int quantize_layer(const eng_layer *L, eng_qlayer *Q, cal *pre, cal *post, int percentile,
                          size_t in_stride, int max_batch, ws_sizes *ws)
{
    int rc;
    Q->has_lut = lut_act(L->act);
    float ps; int pz;
    cal_params(pre, percentile, &ps, &pz);
    cal_params(post, percentile, &Q->out_scale, &Q->out_zp);
    if (Q->has_lut) { Q->pre_scale = ps; Q->pre_zp = pz; }
    Q->lo = L->act == ENG_ACT_RELU ? Q->out_zp : 0;
    if (L->kind == ENG_LAYER_DENSE) {
        Q->N = (int)L->out_size;
        Q->K = (int)L->in_size;
        Q->Kp = (int)in_stride;
        rc = quantize_weights(Q, L->w, 1, (size_t)Q->N, L->b);
    } else {
        Q->N = L->out_shape[0];
        Q->K = L->in_shape[0] * L->kernel * L->kernel;
        Q->Kp = (int)pad32((size_t)Q->K);
        Q->P = L->out_shape[1] * L->out_shape[2];
        rc = quantize_weights(Q, L->w, (size_t)Q->K, 1, L->b);
        size_t c = (size_t)max_batch * Q->P * Q->Kp;
        if (c > ws->col) ws->col = c;
        if (c > ws->a16) ws->a16 = c;
    }
    size_t a = (size_t)max_batch * Q->P * Q->N;
    if (a > ws->acc) ws->acc = a;
    if (Q->has_lut)
        for (int c = 0; c < 256; c++)
            Q->lut[c] = (uint8_t)eng_qcode(act_apply(L->act, ps * (float)(c - pz)), Q->out_scale, Q->out_zp);
    ws->bytes += eng_qlayer_bytes(Q);
    return rc;
}

int eng_quantize(eng_model *m, const eng_dataset *ds, int n_calib, eng_qscheme scheme, int max_batch,
                 prof_t *prof, eng_qmodel **out)
{
    *out = NULL;
    if (n_calib < 1) return eng_fail(ENG_EINVAL, "quantize: --calibrate must be at least 1 sample, got %d", n_calib);
    if (n_calib > ds->n_train) n_calib = ds->n_train;
    if (max_batch < 1) return eng_fail(ENG_EINVAL, "quantize: max_batch must be at least 1");
    int rc = check_quantizable(m, ds);
    if (rc) return rc;
    int percentile = scheme == ENG_QSCHEME_PERCENTILE, nt = 1 + 2 * m->n_layers;
    cal *cals = NULL;
    if ((rc = calibrate(m, ds, n_calib, percentile, &cals))) return rc;

    eng_qmodel *q = prof_calloc(1, sizeof *q);
    if (!q) { cals_free(cals, nt); return eng_fail(ENG_ENOMEM, "quantize: out of memory"); }
    q->n_layers = m->n_layers;
    memcpy(q->in_shape, m->in_shape, sizeof q->in_shape);
    q->in_size = m->in_size;
    q->in_stride = pad32(m->in_size);
    q->n_out = m->n_out;
    q->max_batch = max_batch;
    q->loss = m->cfg.loss;
    q->scheme = scheme;
    q->path = q->path_small = eng_qgemm_best_own();
    q->prof = prof;
    cal_params(&cals[0], percentile, &q->in_scale, &q->in_zp);
    float cur_s = q->in_scale;
    int cur_z = q->in_zp;
    size_t cur_stride = q->in_stride;
    ws_sizes ws = { .a16 = (size_t)max_batch * q->in_stride };
    for (int i = 0; i < m->n_layers && !rc; i++) {
        const eng_layer *L = &m->layers[i];
        eng_qlayer *Q = &q->layers[i];
        Q->kind = L->kind;
        Q->act = L->act;
        memcpy(Q->name, L->name, sizeof Q->name);
        memcpy(Q->in_shape, L->in_shape, sizeof Q->in_shape);
        memcpy(Q->out_shape, L->out_shape, sizeof Q->out_shape);
        Q->in_size = L->in_size;
        Q->out_size = L->out_size;
        Q->kernel = L->kernel;
        Q->in_scale = cur_s;
        Q->in_zp = cur_z;
        Q->last = i == m->n_layers - 1;
        Q->P = 1;
        if (L->kind == ENG_LAYER_POOL || L->kind == ENG_LAYER_FLATTEN) {
            Q->out_scale = cur_s;                   /* max and reshape keep the codes */
            Q->out_zp = cur_z;
        } else {
            rc = quantize_layer(L, Q, &cals[1 + 2 * i], &cals[2 + 2 * i], percentile, cur_stride, max_batch, &ws);
        }
        if (rc) break;
        cur_s = Q->out_scale;
        cur_z = Q->out_zp;
        if (L->kind == ENG_LAYER_FLATTEN) {
            Q->y_stride = cur_stride;               /* a view of its input */
        } else {
            Q->y_stride = pad32(L->out_size);
            Q->y = prof_calloc((size_t)max_batch * Q->y_stride + ENG_QSLACK, 1);
            if (!Q->y) rc = eng_fail(ENG_ENOMEM, "quantize: out of memory for activations");
        }
        cur_stride = Q->y_stride;
    }
    cals_free(cals, nt);
    q->bytes = ws.bytes;
    if (!rc) {
        q->xq = prof_calloc((size_t)max_batch * q->in_stride + ENG_QSLACK, 1);
        q->col = prof_calloc(ws.col + ENG_QSLACK, 1);
        q->acc = prof_calloc(ws.acc ? ws.acc : 1, sizeof(int32_t));
        q->a16 = prof_calloc(ws.a16 ? ws.a16 : 1, sizeof(int16_t));
        if (!q->xq || !q->col || !q->acc || !q->a16) rc = eng_fail(ENG_ENOMEM, "quantize: out of memory for workspaces");
    }
    if (!rc) rc = register_scopes(q);
    if (rc) { eng_qmodel_free(q); return rc; }
    *out = q;
    return ENG_OK;
}

/* ---- running ---------------------------------------------------------------------------- */

static void gemm(eng_qmodel *q, eng_qlayer *L, int M, const uint8_t *A)
{
    eng_qgemm_path p = M < ENG_QGEMM_SMALL_M ? q->path_small : q->path;
    if (p == ENG_QGEMM_ONEDNN) {
        if (!eng_dnnl_gemm_run(&L->dnnl, M, L->N, L->Kp, A, L->w, L->bias, q->acc)) return;
        /* oneDNN failed to build a primitive for this shape: the own kernel, same result */
        p = eng_qgemm_best_own();
    }
    eng_qgemm(p, M, L->N, L->Kp, A, L->w, L->w16, L->bias, q->acc, q->a16);
}

/* acc [rows*P x N] -> y codes [rows x stride] laid out C-major (f*P + p), or float logits.
 * A dense row (P = 1) goes through eng_qrequant_row (vectorized), then its table in place;
 * a conv layer channel by channel, so each channel's multiplier, shift and table are loaded
 * once (its sums lie N apart: gathering them into vectors measured no faster on Zen 5). */
static void requantize(eng_qlayer *L, const int32_t *acc, int rows, float *logits)
{
    int N = L->N, P = L->P;
    int deq = eng_qlayer_dequantizes(L);
    int zp = L->has_lut ? L->pre_zp : L->out_zp, lo = L->lo;
    for (int r = 0; r < rows; r++) {
        const int32_t *a = acc + (size_t)r * P * N;
        uint8_t *y = L->y + (size_t)r * L->y_stride;
        float *lg = deq ? logits + (size_t)r * L->out_size : NULL;
        if (P == 1 && !deq) {
            eng_qrequant_row(a, N, L->mult, L->shift, zp, lo, y);
            if (L->has_lut)
                for (int f = 0; f < N; f++) y[f] = L->lut[y[f]];
            continue;
        }
        for (int f = 0; f < N; f++) {
            const int32_t m = L->mult[f], sh = L->shift[f];
            if (deq) {
                for (int p = 0; p < P; p++) lg[(size_t)f * P + p] = (float)a[(size_t)p * N + f] * L->deq[f];
            } else if (L->has_lut) {
                for (int p = 0; p < P; p++) y[(size_t)f * P + p] = L->lut[eng_requant(a[(size_t)p * N + f], m, sh, zp, lo)];
            } else {
                for (int p = 0; p < P; p++) y[(size_t)f * P + p] = (uint8_t)eng_requant(a[(size_t)p * N + f], m, sh, zp, lo);
            }
        }
    }
}

static void im2col_u8(const eng_qlayer *L, const uint8_t *x, size_t x_stride, int rows, uint8_t *col)
{
    int C = L->in_shape[0], H = L->in_shape[1], W = L->in_shape[2], K = L->kernel;
    int OH = L->out_shape[1], OW = L->out_shape[2];
    for (int r = 0; r < rows; r++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                uint8_t *dst = col + ((size_t)r * L->P + (size_t)oy * OW + ox) * L->Kp;
                const uint8_t *src = x + (size_t)r * x_stride;
                for (int c = 0; c < C; c++)
                    for (int ky = 0; ky < K; ky++) {
                        const uint8_t *s = src + (size_t)c * H * W + (size_t)(oy + ky) * W + ox;
                        if (K <= 8) {
                            /* one 8-byte move: the bytes past K land where the next move (or
                             * the next position) writes, or in the padding; buffers have
                             * ENG_QSLACK bytes of slack for the last one */
                            uint64_t v;
                            memcpy(&v, s, 8);
                            memcpy(dst, &v, 8);
                            dst += K;
                        } else {
                            memcpy(dst, s, (size_t)K);
                            dst += K;
                        }
                    }
            }
}

static void maxpool_u8(const eng_qlayer *L, const uint8_t *x, size_t x_stride, int rows)
{
    int C = L->in_shape[0], H = L->in_shape[1], W = L->in_shape[2], OH = L->out_shape[1], OW = L->out_shape[2];
    for (int r = 0; r < rows; r++) {
        const uint8_t *in = x + (size_t)r * x_stride;
        uint8_t *o = L->y + (size_t)r * L->y_stride;
        for (int c = 0; c < C; c++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    const uint8_t *p = in + (size_t)c * H * W + (size_t)(2 * oy) * W + 2 * ox;
                    uint8_t v = p[0];
                    if (p[1] > v) v = p[1];
                    if (p[W] > v) v = p[W];
                    if (p[W + 1] > v) v = p[W + 1];
                    o[((size_t)c * OH + oy) * OW + ox] = v;
                }
    }
}

int eng_qmodel_forward(eng_qmodel *q, const float *x, int rows, float *logits)
{
    if (rows < 1 || rows > q->max_batch)
        return eng_fail(ENG_EINVAL, "int8 forward of %d rows, but the model was built for 1 to %d", rows, q->max_batch);
    prof_t *p = q->prof;
    PROF_BEGIN(p, q->scope_quantize);
    for (int r = 0; r < rows; r++)
        eng_qcodes_row(x + (size_t)r * q->in_size, q->in_size, q->in_scale, q->in_zp, q->xq + (size_t)r * q->in_stride);
    PROF_END(p, q->scope_quantize, 0, (uint64_t)rows * q->in_size * 5);
    const uint8_t *cur = q->xq;
    size_t stride = q->in_stride;
    for (int i = 0; i < q->n_layers; i++) {
        eng_qlayer *L = &q->layers[i];
        switch (L->kind) {
        case ENG_LAYER_DENSE:
            PROF_BEGIN(p, L->scope[0]);
            gemm(q, L, rows, cur);
            PROF_END(p, L->scope[0], 2ull * rows * L->N * L->K, (uint64_t)rows * L->Kp + (uint64_t)L->N * L->Kp + 4ull * rows * L->N);
            break;
        case ENG_LAYER_CONV:
            PROF_BEGIN(p, L->scope[2]);
            im2col_u8(L, cur, stride, rows, q->col);
            PROF_END(p, L->scope[2], 0, (uint64_t)rows * (L->in_size + (size_t)L->P * L->Kp));
            PROF_BEGIN(p, L->scope[0]);
            gemm(q, L, rows * L->P, q->col);
            PROF_END(p, L->scope[0], 2ull * rows * L->P * L->N * L->K,
                     (uint64_t)rows * L->P * L->Kp + (uint64_t)L->N * L->Kp + 4ull * rows * L->P * L->N);
            break;
        case ENG_LAYER_POOL:
            PROF_BEGIN(p, L->scope[2]);
            maxpool_u8(L, cur, stride, rows);
            PROF_END(p, L->scope[2], 3ull * rows * L->out_size, (uint64_t)rows * (L->in_size + L->out_size));
            break;
        case ENG_LAYER_FLATTEN:
            L->y = (uint8_t *)cur;
            break;
        case ENG_LAYER_SAGE:   /* refused by eng_quantize */
        case ENG_LAYER_SEQ:
        case ENG_LAYER_AVGPOOL:
        case ENG_LAYER_GAP:
        case ENG_LAYER_BN: case ENG_LAYER_RES_BEGIN: case ENG_LAYER_RES:
            break;
        }
        if (L->kind == ENG_LAYER_DENSE || L->kind == ENG_LAYER_CONV) {
            int deq = L->last && L->act == ENG_ACT_NONE;
            int sc = deq ? L->scope[3] : L->scope[1];
            PROF_BEGIN(p, sc);
            requantize(L, q->acc, rows, logits);
            PROF_END(p, sc, 0, (uint64_t)rows * L->out_size * (deq ? 8 : 5));
        }
        cur = L->y;
        stride = L->y_stride;
    }
    const eng_qlayer *last = &q->layers[q->n_layers - 1];
    if (!(last->kind != ENG_LAYER_POOL && last->kind != ENG_LAYER_FLATTEN && last->act == ENG_ACT_NONE))
        for (int r = 0; r < rows; r++)          /* logits that went through codes */
            for (size_t j = 0; j < last->out_size; j++)
                logits[(size_t)r * last->out_size + j] =
                    last->out_scale * (float)((int)last->y[(size_t)r * last->y_stride + j] - last->out_zp);
    return ENG_OK;
}

void eng_inference_threads(int n)
{
    openblas_set_num_threads(n);
    if (eng_qgemm_dnnl_available()) eng_qgemm_dnnl_threads(n);
}

size_t eng_qmodel_bytes(const eng_qmodel *q) { return q->bytes; }

const char *eng_qmodel_kernel(const eng_qmodel *q)
{
    static _Thread_local char both[48];
    if (q->path == q->path_small) return eng_qgemm_path_name(q->path);
    snprintf(both, sizeof both, "%s (batch < %d: %s)", eng_qgemm_path_name(q->path), ENG_QGEMM_SMALL_M,
             eng_qgemm_path_name(q->path_small));
    return both;
}

static int path_of(const char *name, eng_qgemm_path *p)
{
    int rc = eng_qgemm_path_parse(name, p);
    if (rc) return rc;
    if (*p == ENG_QGEMM_AUTO) *p = eng_qgemm_best_own();
    if (!eng_qgemm_path_available(*p))
        return eng_fail(ENG_EINVAL, "int8 kernel '%s' is not available on this machine (%s)", name,
                        *p == ENG_QGEMM_ONEDNN ? "oneDNN has no CPU engine here" : "the CPU lacks its instructions");
    return ENG_OK;
}

int eng_qmodel_set_kernels(eng_qmodel *q, const char *large, const char *small)
{
    eng_qgemm_path pl, ps;
    int rc = path_of(large, &pl);
    if (!rc) rc = path_of(small ? small : large, &ps);
    if (rc) return rc;
    q->path = pl;
    q->path_small = ps;
    return ENG_OK;
}

int eng_qmodel_set_kernel(eng_qmodel *q, const char *name) { return eng_qmodel_set_kernels(q, name, NULL); }

void eng_qmodel_choose_kernels(eng_qmodel *q, const eng_dataset *ds, int big, double secs, char own_name[16],
                               double own[2], double dnnl[2])
{
    eng_qgemm_path mine = eng_qgemm_best_own(), pick[2];
    snprintf(own_name, 16, "%s", eng_qgemm_path_name(mine));
    q->path = q->path_small = mine;
    for (int b = 0; b < 2; b++) own[b] = eng_qmodel_inference_sps(q, ds, b ? 1 : big, secs);
    dnnl[0] = dnnl[1] = NAN;
    if (eng_qgemm_path_available(ENG_QGEMM_ONEDNN)) {
        q->path = q->path_small = ENG_QGEMM_ONEDNN;
        for (int b = 0; b < 2; b++) dnnl[b] = eng_qmodel_inference_sps(q, ds, b ? 1 : big, secs);
    }
    for (int b = 0; b < 2; b++) pick[b] = dnnl[b] > own[b] ? ENG_QGEMM_ONEDNN : mine;
    q->path = pick[0];
    q->path_small = pick[1];
}

void eng_qmodel_copy_kernels(eng_qmodel *to, const eng_qmodel *from)
{
    to->path = from->path;
    to->path_small = from->path_small;
}

/* ---- evaluation -------------------------------------------------------------------------- */

/* Mean loss and accuracy of rows [0, n) of x with the loss of the model (the engine's own
 * loss op, so fp32 and int8 figures are computed alike). */
int eng_qmodel_evaluate(eng_qmodel *q, const float *x, const int32_t *labels, const float *targets, int n,
                        double *loss, double *acc)
{
    size_t no = (size_t)q->n_out;
    float *lg = malloc((size_t)q->max_batch * no * sizeof(float));
    float *pr = malloc((size_t)q->max_batch * no * sizeof(float));
    float *dx = malloc((size_t)q->max_batch * no * sizeof(float));
    if (!lg || !pr || !dx) { free(lg); free(pr); free(dx); return eng_fail(ENG_ENOMEM, "int8 evaluate: out of memory"); }
    double sum = 0;
    long correct = 0;
    int rc = ENG_OK;
    for (int r0 = 0; r0 < n && !rc; r0 += q->max_batch) {
        int rows = n - r0 < q->max_batch ? n - r0 : q->max_batch;
        if ((rc = eng_qmodel_forward(q, x + (size_t)r0 * q->in_size, rows, lg))) break;
        eng_node node;
        memset(&node, 0, sizeof node);
        node.op = q->loss == ENG_LOSS_MSE ? ENG_OP_MSE : ENG_OP_SOFTMAX_XENT;
        node.in_size = node.out_size = no;
        node.x = lg;
        node.y = pr;
        node.dx = dx;
        node.labels = labels ? labels + r0 : NULL;
        node.targets = targets ? targets + (size_t)r0 * no : NULL;
        eng_ops[node.op].forward(&node, rows);
        sum += node.loss * rows;
        correct += node.correct;
    }
    free(lg); free(pr); free(dx);
    if (rc) return rc;
    *loss = sum / n;
    *acc = labels ? (double)correct / n : NAN;
    return ENG_OK;
}

/* ---- throughput ------------------------------------------------------------------------ */

int eng_model_clone(const eng_model *m, int max_batch, eng_model **out)
{
    int rc = eng_model_build(&m->cfg, m->in_shape, m->n_out, max_batch, 1, NULL, out);
    if (!rc) memcpy((*out)->params, m->params, m->n_params * sizeof(float));
    return rc;
}

/* Test rows served round-robin in batches of `batch` (at most the test set) for at least
 * secs seconds: samples per second. fp32 = the engine's forward (with its loss); int8 =
 * eng_qmodel_forward. */
static double sps_loop(eng_model *m, eng_qmodel *q, const eng_dataset *ds, int batch, double secs)
{
    int n = ds->n_test, nt = ds->n_targets > 0 ? ds->n_targets : 1;
    if (batch > n) batch = n;
    if (batch < 1) return NAN;
    float *lg = q ? malloc((size_t)batch * (size_t)q->n_out * sizeof(float)) : NULL;
    if (q && !lg) return NAN;
    long rows = 0;
    int r0 = 0;
    double t0 = prof_now_s(), t;
    do {
        for (int k = 0; k < 8; k++) {
            if (r0 + batch > n) r0 = 0;
            const float *x = ds->x_test + (size_t)r0 * ds->in_size;
            if (q) eng_qmodel_forward(q, x, batch, lg);
            else eng_model_forward(m, x, batch, ds->y_test ? ds->y_test + r0 : NULL,
                                   ds->t_test ? ds->t_test + (size_t)r0 * nt : NULL, NULL);
            r0 += batch;
            rows += batch;
        }
    } while ((t = prof_now_s() - t0) < secs);
    free(lg);
    return rows / t;
}

/* The fp32 side runs on the GEMM backends chosen for its shapes, as training does: the
 * int8 ratio is formed against the fastest verified fp32 baseline. */
double eng_model_inference_sps(eng_model *m, const eng_dataset *ds, int batch, double secs)
{
    if (batch > m->max_batch) return NAN;
    eng_gemm_shape sh[ENG_MAX_NODES * ENG_OP_MAX_GEMMS];
    int n = eng_model_gemm_shapes(m, batch < ds->n_test ? batch : ds->n_test, sh, (int)(sizeof sh / sizeof sh[0]));
    if (eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, openblas_get_num_threads(), sh, n)) return NAN;
    return sps_loop(m, NULL, ds, batch, secs);
}

double eng_qmodel_inference_sps(eng_qmodel *q, const eng_dataset *ds, int batch, double secs)
{
    return batch <= q->max_batch ? sps_loop(NULL, q, ds, batch, secs) : NAN;
}
