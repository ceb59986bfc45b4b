/* attention.c — the sequence layers: embedding, positional encoding, layer normalization,
 * the transformer encoder block (multi-head self-attention, full or Linformer, and a GELU
 * MLP, each with its residual connection) and mean pooling; their ops and how model.c
 * builds them (ENG_LAYER_SEQ).
 *
 * A row is [n positions x d features], position-major. B = rows of a call, M = B·n
 * positions, H heads, dh = d/H, m = key rows (n, or Linformer's k), I/O = in/out features.
 * Software counters (one call; bytes / 4 count each tensor read or written once):
 *
 *  op                dir  FLOPs                         bytes / 4
 *  embed, attn_qkv,  fwd  2·M·I·O + M·O                 M·I + I·O + O + M·O
 *  attn_out, ffn     bwd  2·M·I·O + M·O (+2·M·I·O dx)   M·I + M·O + I·O + O (+ M·O + I·O + M·I dx)
 *  posenc            fwd  M·d                           2·M·d + n·d
 *                    bwd  M·d learned | 0 fixed         2·M·d (+ n·d learned)
 *  layernorm         fwd  8·M·d                         2·M·d + 2·d + 2·M
 *                    bwd  12·M·d (+M·d accumulated)     3·M·d + 4·d + 2·M (+M·d accumulated)
 *  attn_scores       fwd  2·B·n·m·d + B·H·n·m           B·n·d + B·m·d + B·H·n·m
 *                    bwd  4·B·n·m·d                     B·H·n·m + 2·(B·n·d + B·m·d)
 *  attn_softmax      fwd  5·B·H·n·m                     2·B·H·n·m
 *                    bwd  4·B·H·n·m                     3·B·H·n·m
 *  attn_wsum         fwd  2·B·n·m·d                     B·H·n·m + B·m·d + B·n·d
 *                    bwd  4·B·n·m·d                     2·B·H·n·m + 2·B·m·d + B·n·d
 *  linformer_proj    fwd  4·B·n·k·d                     2·B·n·d + 2·n·k + 2·B·k·d
 *                    bwd  8·B·n·k·d                     4·B·n·d + 4·n·k + 2·B·k·d
 *  resadd            fwd  M·d                           3·M·d
 *                    bwd  0                             3·M·d (two copies of dy)
 *  meanpool          fwd  B·n·d                         B·n·d + B·d
 *                    bwd  B·n·d                         B·n·d + B·d
 *
 * The encoder block is pre-norm (as in most current transformers):
 *     h = x + Out(Attention(LN1(x)));   y = h + W2·GELU(W1·LN2(h) + b1) + b2
 * compiled to the nodes layernorm, attn_qkv, [linformer_proj], attn_scores, attn_softmax,
 * attn_wsum, attn_out, resadd, layernorm, ffn, gelu, ffn, resadd. A residual's backward
 * writes dy into the block input's gradient, and the layernorm that reads that input adds
 * its own part on top (node->accum), so the chain of nodes stays a list.
 * Its parameters, one block in this order: LN1 gain, shift [d, d]; Wqkv [d x 3d], bqkv [3d];
 * Linformer E, F [n x k] each (shared by the heads of the layer); Wo [d x d], bo [d]; LN2
 * gain, shift; W1 [d x ff], b1 [ff]; W2 [ff x d], b2 [d].
 */
/* The elementwise loops vectorize only at -O3 by default (as in ops.c); no float sum is
 * reassociated without -ffast-math, so the bits stay the same. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include "internal.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U64(x) ((uint64_t)(x))
#define LN_EPS 1e-5f

/* ---- per-position linear: y[M x O] = x[M x I] · W[I x O] + b ------------------------- */

static void lin_dims(const eng_node *n, int rows, int *M, int *I, int *O)
{
    *M = rows * n->in_shape[1];
    *I = n->in_shape[2];
    *O = n->out_shape[2];
}

void eng_seqlin_fwd(eng_node *n, int rows)
{
    int M, I, O;
    lin_dims(n, rows, &M, &I, &O);
    eng_sgemm(0, 0, M, O, I, 1.0f, n->x, I, n->w, O, 0.0f, n->y, O);
    for (int r = 0; r < M; r++) {
        float *restrict y = n->y + (size_t)r * O;
        for (int c = 0; c < O; c++) y[c] += n->b[c];
    }
}

/* dW = x^T dy, db = column sums of dy, dx = dy W^T */
void eng_seqlin_bwd(eng_node *n, int rows)
{
    int M, I, O;
    lin_dims(n, rows, &M, &I, &O);
    eng_sgemm(1, 0, I, O, M, 1.0f, n->x, I, n->dy, O, 0.0f, n->dw, O);
    memset(n->db, 0, (size_t)O * sizeof(float));
    for (int r = 0; r < M; r++) {
        const float *restrict dy = n->dy + (size_t)r * O;
        for (int c = 0; c < O; c++) n->db[c] += dy[c];
    }
    if (n->dx) eng_sgemm(0, 1, M, I, O, 1.0f, n->dy, O, n->w, O, 0.0f, n->dx, I);
}

uint64_t eng_seqlin_flops(const eng_node *n, int rows, eng_dir dir)
{
    int M, I, O;
    lin_dims(n, rows, &M, &I, &O);
    uint64_t mm = 2 * U64(M) * I * O;
    return U64(M) * O + (dir == ENG_BWD && n->dx ? 2 * mm : mm);
}

uint64_t eng_seqlin_bytes(const eng_node *n, int rows, eng_dir dir)
{
    int M, I, O;
    lin_dims(n, rows, &M, &I, &O);
    uint64_t e = U64(M) * I + U64(I) * O + O + U64(M) * O;
    if (dir == ENG_BWD && n->dx) e += U64(M) * O + U64(I) * O + U64(M) * I;
    return 4 * e;
}

int eng_seqlin_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    int M, I, O;
    lin_dims(n, rows, &M, &I, &O);
    g[0] = (eng_gemm_shape){ 0, 0, M, O, I, 1 };
    g[1] = (eng_gemm_shape){ 1, 0, I, O, M, 1 };
    g[2] = (eng_gemm_shape){ 0, 1, M, I, O, 1 };
    return n->dx ? 3 : 2;
}

/* ---- positional encoding: y = x + P[n x d] ------------------------------------------- */

/* The sinusoidal table of Vaswani et al.: P[p, 2i] = sin(p / 10000^(2i/d)), P[p, 2i+1] = cos. */
static void posenc_table(float *P, int n, int d)
{
    for (int p = 0; p < n; p++)
        for (int c = 0; c < d; c++) {
            double ang = p / pow(10000.0, (double)(c & ~1) / d);
            P[(size_t)p * d + c] = (float)(c & 1 ? cos(ang) : sin(ang));
        }
}

static const float *posenc_p(const eng_node *n) { return n->w ? n->w : n->ws; }

void eng_posenc_fwd(eng_node *n, int rows)
{
    size_t nd = n->out_size;
    const float *restrict P = posenc_p(n);
    for (int r = 0; r < rows; r++) {
        const float *restrict x = n->x + (size_t)r * nd;
        float *restrict y = n->y + (size_t)r * nd;
        for (size_t k = 0; k < nd; k++) y[k] = x[k] + P[k];
    }
}

void eng_posenc_bwd(eng_node *n, int rows)
{
    size_t nd = n->out_size;
    if (n->dx) memcpy(n->dx, n->dy, (size_t)rows * nd * sizeof(float));
    if (!n->dw) return;
    memset(n->dw, 0, nd * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float *restrict dy = n->dy + (size_t)r * nd;
        for (size_t k = 0; k < nd; k++) n->dw[k] += dy[k];
    }
}

uint64_t eng_posenc_flops(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_FWD || n->w ? U64(rows) * n->out_size : 0;
}

uint64_t eng_posenc_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = 2 * U64(rows) * n->out_size;
    return 4 * (e + (dir == ENG_FWD || n->w ? n->out_size : 0));
}

/* ---- layer normalization over the d features of each position ------------------------
 * y = (x - mean) / sqrt(var + eps) · gain + shift; ws keeps mean and 1/std per position. */

void eng_layernorm_fwd(eng_node *n, int rows)
{
    int d = n->in_shape[2];
    size_t M = (size_t)rows * n->in_shape[1];
    for (size_t r = 0; r < M; r++) {
        const float *restrict x = n->x + r * d;
        float *restrict y = n->y + r * d;
        float mean = 0.0f, var = 0.0f;
        for (int c = 0; c < d; c++) mean += x[c];
        mean /= (float)d;
        for (int c = 0; c < d; c++) var += (x[c] - mean) * (x[c] - mean);
        float rstd = 1.0f / sqrtf(var / (float)d + LN_EPS);
        for (int c = 0; c < d; c++) y[c] = (x[c] - mean) * rstd * n->w[c] + n->b[c];
        n->ws[2 * r] = mean;
        n->ws[2 * r + 1] = rstd;
    }
}

/* xhat = (x - mean)·rstd, g = dy·gain: dx = rstd·(g - mean(g) - xhat·mean(g·xhat)) */
void eng_layernorm_bwd(eng_node *n, int rows)
{
    int d = n->in_shape[2];
    size_t M = (size_t)rows * n->in_shape[1];
    memset(n->dw, 0, (size_t)d * sizeof(float));
    memset(n->db, 0, (size_t)d * sizeof(float));
    for (size_t r = 0; r < M; r++) {
        const float *restrict x = n->x + r * d, *restrict dy = n->dy + r * d;
        float mean = n->ws[2 * r], rstd = n->ws[2 * r + 1], sg = 0.0f, sgx = 0.0f;
        for (int c = 0; c < d; c++) {
            float xh = (x[c] - mean) * rstd, g = dy[c] * n->w[c];
            n->dw[c] += dy[c] * xh;
            n->db[c] += dy[c];
            sg += g;
            sgx += g * xh;
        }
        if (!n->dx) continue;
        sg /= (float)d;
        sgx /= (float)d;
        float *restrict dx = n->dx + r * d;
        for (int c = 0; c < d; c++) {
            float v = rstd * (dy[c] * n->w[c] - sg - (x[c] - mean) * rstd * sgx);
            dx[c] = n->accum ? dx[c] + v : v;
        }
    }
}

uint64_t eng_layernorm_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->out_size;
    return dir == ENG_FWD ? 8 * e : 12 * e + (n->accum ? e : 0);
}

uint64_t eng_layernorm_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->out_size, d = U64(n->in_shape[2]), M = U64(rows) * n->in_shape[1];
    if (dir == ENG_FWD) return 4 * (2 * e + 2 * d + 2 * M);
    return 4 * (3 * e + 4 * d + 2 * M + (n->accum ? e : 0));
}

/* ---- residual: y = x + block input; both get dy back ----------------------------------- */

void eng_resadd_fwd(eng_node *n, int rows)
{
    size_t e = (size_t)rows * n->out_size;
    const float *restrict x = n->x, *restrict s = n->skip->x;
    float *restrict y = n->y;
    for (size_t i = 0; i < e; i++) y[i] = x[i] + s[i];
}

/* The block input's gradient is written here first; the layernorm reading that input runs
 * later in the backward and adds its part (accum). */
void eng_resadd_bwd(eng_node *n, int rows)
{
    size_t bytes = (size_t)rows * n->out_size * sizeof(float);
    memcpy(n->dx, n->dy, bytes);
    if (n->skip->dx) memcpy(n->skip->dx, n->dy, bytes);
}

uint64_t eng_resadd_flops(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_FWD ? U64(rows) * n->out_size : 0;
}

uint64_t eng_resadd_bytes(const eng_node *n, int rows, eng_dir dir)
{
    (void)dir;
    return 12 * U64(rows) * n->out_size;
}

/* ---- mean over the positions: [n x d] -> [d] --------------------------------------------- */

void eng_meanpool_fwd(eng_node *n, int rows)
{
    int np = n->in_shape[1], d = n->in_shape[2];
    float inv = 1.0f / (float)np;
    for (int r = 0; r < rows; r++) {
        float *restrict y = n->y + (size_t)r * d;
        memset(y, 0, (size_t)d * sizeof(float));
        for (int p = 0; p < np; p++) {
            const float *restrict x = n->x + ((size_t)r * np + p) * d;
            for (int c = 0; c < d; c++) y[c] += x[c];
        }
        for (int c = 0; c < d; c++) y[c] *= inv;
    }
}

void eng_meanpool_bwd(eng_node *n, int rows)
{
    if (!n->dx) return;
    int np = n->in_shape[1], d = n->in_shape[2];
    float inv = 1.0f / (float)np;
    for (int r = 0; r < rows; r++)
        for (int p = 0; p < np; p++) {
            float *restrict dx = n->dx + ((size_t)r * np + p) * d;
            const float *restrict dy = n->dy + (size_t)r * d;
            for (int c = 0; c < d; c++) dx[c] = dy[c] * inv;
        }
}

uint64_t eng_meanpool_flops(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_BWD && !n->dx ? 0 : U64(rows) * n->in_size;
}

uint64_t eng_meanpool_bytes(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_BWD && !n->dx ? 0 : 4 * U64(rows) * (n->in_size + n->out_size);
}

/* ---- attention: scores, softmax, weighted sum ------------------------------------------ */

static const float *attn_q(const eng_attn *a, int b, int h)
{
    return a->qkv + (size_t)b * a->n * 3 * a->d + (size_t)h * (a->d / a->heads);
}

/* S[b,h] [n x m] = Q_h K_h^T / sqrt(dh) */
static void lsh_scores_fwd(eng_node *n, int rows);
static void lsh_scores_bwd(eng_node *n, int rows);
static void lsh_wsum_fwd(eng_node *n, int rows);
static void lsh_wsum_bwd(eng_node *n, int rows);

void eng_attn_scores_fwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    if (a->idx) { lsh_scores_fwd(n, rows); return; }
    int dh = a->d / a->heads;
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            const float *k = a->k + b * a->kv_row + (size_t)h * dh;
            float *s = n->y + ((size_t)b * a->heads + h) * a->n * a->m;
            eng_sgemm(0, 1, a->n, a->m, dh, scale, attn_q(a, b, h), 3 * a->d, k, a->ldkv, 0.0f, s, a->m);
        }
}

/* dQ_h = dS K_h / sqrt(dh) into dqkv's Q columns; dK_h = dS^T Q_h / sqrt(dh) */
void eng_attn_scores_bwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    if (a->idx) { lsh_scores_bwd(n, rows); return; }
    int dh = a->d / a->heads, ld = 3 * a->d;
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t kv = b * a->kv_row + (size_t)h * dh;
            const float *ds = n->dy + ((size_t)b * a->heads + h) * a->n * a->m;
            float *dq = a->dqkv + (size_t)b * a->n * ld + (size_t)h * dh;
            eng_sgemm(0, 0, a->n, dh, a->m, scale, ds, a->m, a->k + kv, a->ldkv, 0.0f, dq, ld);
            eng_sgemm(1, 0, a->m, dh, a->n, scale, ds, a->m, attn_q(a, b, h), ld, 0.0f, a->dk + kv, a->ldkv);
        }
}

static uint64_t attn_nm(const eng_node *n, int rows) { return U64(rows) * n->attn->n * n->attn->m; }

uint64_t eng_attn_scores_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t nmd = attn_nm(n, rows) * n->attn->d;
    return dir == ENG_FWD ? 2 * nmd + attn_nm(n, rows) * n->attn->heads : 4 * nmd;
}

uint64_t eng_attn_scores_bytes(const eng_node *n, int rows, eng_dir dir)
{
    const eng_attn *a = n->attn;
    uint64_t s = attn_nm(n, rows) * a->heads, q = U64(rows) * a->n * a->d, k = U64(rows) * a->m * a->d;
    return 4 * (dir == ENG_FWD ? q + k + s : s + 2 * (q + k));
}

int eng_attn_scores_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    const eng_attn *a = n->attn;
    if (a->kind == ENG_ATTN_LSH) return 0; /* gathers, no GEMM */
    int dh = a->d / a->heads;
    double calls = (double)rows * a->heads;
    g[0] = (eng_gemm_shape){ 0, 1, a->n, a->m, dh, calls };
    g[1] = (eng_gemm_shape){ 0, 0, a->n, dh, a->m, calls };
    g[2] = (eng_gemm_shape){ 1, 0, a->m, dh, a->n, calls };
    return 3;
}

/* In place (y == x, dx == dy): P = softmax of each score row; dS = P·(dP - sum(dP·P)).
 * exp by ops.c's branch-free exp_nonpos (x - max <= 0; a masked -inf gives 0), compiled per
 * instruction-set path: libm's expf kept the loop scalar. */
ENG_ISA_BODY softmax_rows_body(size_t R, size_t m, float *restrict y)
{
    for (size_t r = 0; r < R; r++) {
        float *restrict p = y + r * m;
        float mx = p[0], s = 0.0f;
        for (size_t j = 1; j < m; j++) mx = p[j] > mx ? p[j] : mx;
        for (size_t j = 0; j < m; j++) p[j] = exp_nonpos(p[j] - mx);
        for (size_t j = 0; j < m; j++) s += p[j];
        float inv = 1.0f / s;
        for (size_t j = 0; j < m; j++) p[j] *= inv;
    }
}
ENG_ISA_KERNEL_AVX2(softmax_rows, (size_t R, size_t m, float *restrict y), (R, m, y))

void eng_attn_softmax_fwd(eng_node *n, int rows)
{
    softmax_rows_isa[eng_isa_current()]((size_t)rows * n->attn->heads * n->attn->n, (size_t)n->attn->m, n->y);
}

void eng_attn_softmax_bwd(eng_node *n, int rows)
{
    size_t m = (size_t)n->attn->m, R = (size_t)rows * n->attn->heads * n->attn->n;
    for (size_t r = 0; r < R; r++) {
        const float *restrict p = n->y + r * m;
        float *restrict d = n->dy + r * m;
        float dot = 0.0f;
        for (size_t j = 0; j < m; j++) dot += d[j] * p[j];
        for (size_t j = 0; j < m; j++) d[j] = p[j] * (d[j] - dot);
    }
}

uint64_t eng_attn_softmax_flops(const eng_node *n, int rows, eng_dir dir)
{
    return attn_nm(n, rows) * n->attn->heads * (dir == ENG_FWD ? 5 : 4);
}

uint64_t eng_attn_softmax_bytes(const eng_node *n, int rows, eng_dir dir)
{
    return 4 * attn_nm(n, rows) * n->attn->heads * (dir == ENG_FWD ? 2 : 3);
}

/* ctx[b] columns of head h [n x dh] = P[b,h] V_h */
void eng_attn_wsum_fwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    if (a->idx) { lsh_wsum_fwd(n, rows); return; }
    int dh = a->d / a->heads;
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            const float *p = n->x + ((size_t)b * a->heads + h) * a->n * a->m;
            float *ctx = n->y + (size_t)b * a->n * a->d + (size_t)h * dh;
            eng_sgemm(0, 0, a->n, dh, a->m, 1.0f, p, a->m, a->v + b * a->kv_row + (size_t)h * dh, a->ldkv, 0.0f,
                      ctx, a->d);
        }
}

/* dP = dctx_h V_h^T; dV_h = P^T dctx_h */
void eng_attn_wsum_bwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    if (a->idx) { lsh_wsum_bwd(n, rows); return; }
    int dh = a->d / a->heads;
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t ps = ((size_t)b * a->heads + h) * a->n * a->m, kv = b * a->kv_row + (size_t)h * dh;
            const float *dctx = n->dy + (size_t)b * a->n * a->d + (size_t)h * dh;
            eng_sgemm(0, 1, a->n, a->m, dh, 1.0f, dctx, a->d, a->v + kv, a->ldkv, 0.0f, n->dx + ps, a->m);
            eng_sgemm(1, 0, a->m, dh, a->n, 1.0f, n->x + ps, a->m, dctx, a->d, 0.0f, a->dv + kv, a->ldkv);
        }
}

uint64_t eng_attn_wsum_flops(const eng_node *n, int rows, eng_dir dir)
{
    return attn_nm(n, rows) * n->attn->d * (dir == ENG_FWD ? 2 : 4);
}

uint64_t eng_attn_wsum_bytes(const eng_node *n, int rows, eng_dir dir)
{
    const eng_attn *a = n->attn;
    uint64_t s = attn_nm(n, rows) * a->heads, q = U64(rows) * a->n * a->d, k = U64(rows) * a->m * a->d;
    return 4 * (dir == ENG_FWD ? s + k + q : 2 * s + 2 * k + q);
}

int eng_attn_wsum_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    const eng_attn *a = n->attn;
    if (a->kind == ENG_ATTN_LSH) return 0;
    int dh = a->d / a->heads;
    double calls = (double)rows * a->heads;
    g[0] = (eng_gemm_shape){ 0, 0, a->n, dh, a->m, calls };
    g[1] = (eng_gemm_shape){ 0, 1, a->n, a->m, dh, calls };
    g[2] = (eng_gemm_shape){ 1, 0, a->m, dh, a->n, calls };
    return 3;
}

/* ---- Reformer LSH attention (Kitaev et al. 2020) -------------------------------------
 * Shared QK: the keys are the queries (the K columns of attn_qkv go unused, their gradient
 * is 0). Each round hashes every query by a fixed random rotation R [dh x buckets/2]:
 * bucket = argmax [qR, -qR]; positions are sorted by (bucket, position) and cut into chunks
 * of `chunk` = ceil(n / buckets); a query's keys are the positions of its own chunk and the
 * previous one, itself masked (unless it would have no key at all). The rounds' key lists
 * are concatenated into one softmax (duplicates across rounds are not corrected), so
 * attn_scores, attn_softmax and attn_wsum run on m = rounds x 2 x chunk gathered keys per
 * query: O(n·m) time and memory. The hash is piecewise constant: no gradient flows through
 * it (lsh_hash.bwd does nothing). The rotations are drawn once at build from the layer. */

/* the rotations do not depend on the run seed: the same model hashes the same way */
#define LSH_SEED 0x4c534831ull /* "LSH1" */

static float *lsh_rot(const eng_node *n) { return n->ws; }

static void lsh_round(const eng_attn *a, const float *rot, int b, int h, int r, int32_t *bucket, int32_t *perm,
                      int32_t *count, int32_t *list)
{
    int N = a->n, dh = a->d / a->heads, half = a->buckets / 2, c = a->chunk, W = a->m;
    const float *R = rot + (size_t)r * dh * half;
    for (int i = 0; i < N; i++) {
        const float *q = attn_q(a, b, h) + (size_t)i * 3 * a->d;
        float best = -INFINITY;
        int arg = 0;
        for (int j = 0; j < half; j++) {
            float v = 0.0f;
            for (int t = 0; t < dh; t++) v += q[t] * R[(size_t)t * half + j];
            if (v > best) { best = v; arg = j; }
            if (-v > best) { best = -v; arg = j + half; }
        }
        bucket[i] = arg;
    }
    /* counting sort: stable, so positions stay ascending inside a bucket */
    memset(count, 0, (size_t)(a->buckets + 1) * sizeof(int32_t));
    for (int i = 0; i < N; i++) count[bucket[i] + 1]++;
    for (int k = 0; k < a->buckets; k++) count[k + 1] += count[k];
    for (int i = 0; i < N; i++) perm[count[bucket[i]]++] = i;
    for (int s = 0; s < N; s++) {
        int i = perm[s], ch = s / c, lo = (ch - 1) * c;
        int32_t *row = list + (size_t)i * W + (size_t)r * 2 * c;
        for (int t = lo > 0 ? lo : 0; t < (ch + 1) * c && t < N; t++) row[t - lo] = perm[t] == i ? -1 : perm[t];
    }
}

void eng_lsh_hash_fwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int N = a->n, W = a->m;
    int32_t *bucket = a->idx + (size_t)n->attn->heads * rows * N * W, *perm = bucket + N, *count = perm + N;
    (void)rows;
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            int32_t *list = a->idx + ((size_t)b * a->heads + h) * N * W;
            for (size_t k = 0; k < (size_t)N * W; k++) list[k] = -1;
            for (int r = 0; r < a->rounds; r++) lsh_round(a, lsh_rot(n), b, h, r, bucket, perm, count, list);
            for (int i = 0; i < N; i++) {
                int32_t *row = list + (size_t)i * W, any = 0;
                for (int w = 0; w < W; w++) any |= row[w] >= 0;
                if (!any) row[0] = i;
            }
        }
}

void eng_lsh_hash_bwd(eng_node *n, int rows) { (void)n; (void)rows; }

/* per query and round: dh·(buckets/2) multiply-adds and buckets compares; then the sort */
uint64_t eng_lsh_hash_flops(const eng_node *n, int rows, eng_dir dir)
{
    const eng_attn *a = n->attn;
    if (dir == ENG_BWD) return 0;
    uint64_t per = U64(a->d / a->heads) * a->buckets + a->buckets + 4;
    return U64(rows) * a->heads * a->n * a->rounds * per;
}

uint64_t eng_lsh_hash_bytes(const eng_node *n, int rows, eng_dir dir)
{
    const eng_attn *a = n->attn;
    if (dir == ENG_BWD) return 0;
    return 4 * (U64(rows) * a->n * a->d * a->rounds + U64(rows) * a->heads * a->n * a->m);
}

/* S[i, w] = q_i · q_idx[w] / sqrt(dh), -inf where masked */
static void lsh_scores_fwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int dh = a->d / a->heads, ld = 3 * a->d, W = a->m;
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t base = ((size_t)b * a->heads + h) * a->n * W;
            const float *q0 = attn_q(a, b, h);
            for (int i = 0; i < a->n; i++)
                for (int w = 0; w < W; w++) {
                    int32_t j = a->idx[base + (size_t)i * W + w];
                    float v = 0.0f;
                    for (int t = 0; t < dh && j >= 0; t++) v += q0[(size_t)i * ld + t] * q0[(size_t)j * ld + t];
                    n->y[base + (size_t)i * W + w] = j >= 0 ? v * scale : -INFINITY;
                }
        }
}

/* dq_i += dS[i,w] q_j / sqrt(dh) and dq_j += dS[i,w] q_i / sqrt(dh); K's gradient is 0 */
static void lsh_scores_bwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int dh = a->d / a->heads, ld = 3 * a->d, W = a->m;
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < rows; b++)
        for (size_t i = 0; i < (size_t)a->n; i++)
            memset(a->dqkv + ((size_t)b * a->n + i) * ld, 0, 2 * (size_t)a->d * sizeof(float));
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t base = ((size_t)b * a->heads + h) * a->n * W, off = (size_t)b * a->n * ld + (size_t)h * dh;
            const float *q0 = a->qkv + off;
            float *dq0 = a->dqkv + off;
            for (int i = 0; i < a->n; i++)
                for (int w = 0; w < W; w++) {
                    int32_t j = a->idx[base + (size_t)i * W + w];
                    if (j < 0) continue;
                    float g = n->dy[base + (size_t)i * W + w] * scale;
                    for (int t = 0; t < dh; t++) {
                        dq0[(size_t)i * ld + t] += g * q0[(size_t)j * ld + t];
                        dq0[(size_t)j * ld + t] += g * q0[(size_t)i * ld + t];
                    }
                }
        }
}

/* ctx_i = sum_w P[i,w] v_idx[w] */
static void lsh_wsum_fwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int dh = a->d / a->heads, ld = 3 * a->d, W = a->m;
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t base = ((size_t)b * a->heads + h) * a->n * W;
            const float *v0 = a->v + b * a->kv_row + (size_t)h * dh;
            for (int i = 0; i < a->n; i++) {
                float *ctx = n->y + ((size_t)b * a->n + i) * a->d + (size_t)h * dh;
                memset(ctx, 0, (size_t)dh * sizeof(float));
                for (int w = 0; w < W; w++) {
                    int32_t j = a->idx[base + (size_t)i * W + w];
                    float p = n->x[base + (size_t)i * W + w];
                    for (int t = 0; t < dh && j >= 0; t++) ctx[t] += p * v0[(size_t)j * ld + t];
                }
            }
        }
}

/* dP[i,w] = dctx_i · v_idx[w]; dv_idx[w] += P[i,w] dctx_i */
static void lsh_wsum_bwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int dh = a->d / a->heads, ld = 3 * a->d, W = a->m;
    for (int b = 0; b < rows; b++)
        for (size_t i = 0; i < (size_t)a->n; i++)
            memset(a->dv + b * a->kv_row + i * ld, 0, (size_t)a->d * sizeof(float));
    for (int b = 0; b < rows; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t base = ((size_t)b * a->heads + h) * a->n * W, kv = b * a->kv_row + (size_t)h * dh;
            for (int i = 0; i < a->n; i++) {
                const float *dctx = n->dy + ((size_t)b * a->n + i) * a->d + (size_t)h * dh;
                for (int w = 0; w < W; w++) {
                    size_t e = base + (size_t)i * W + w;
                    int32_t j = a->idx[e];
                    float acc = 0.0f, p = n->x[e];
                    for (int t = 0; t < dh && j >= 0; t++) {
                        acc += dctx[t] * a->v[kv + (size_t)j * ld + t];
                        a->dv[kv + (size_t)j * ld + t] += p * dctx[t];
                    }
                    n->dx[e] = acc;
                }
            }
        }
}

/* ---- Linformer: K' = E^T K, V' = F^T V along the sequence (n -> k rows) ---------------
 * y per sample: K' [k x d] then V' [k x d]; w = E then F, [n x k] each. */

void eng_linformer_fwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int d = a->d, N = a->n, k = a->m, ld = 3 * d;
    const float *E = n->w, *F = n->w + (size_t)N * k;
    for (int b = 0; b < rows; b++) {
        const float *kin = a->qkv + (size_t)b * N * ld + d;
        float *y = n->y + (size_t)b * 2 * k * d;
        eng_sgemm(1, 0, k, d, N, 1.0f, E, k, kin, ld, 0.0f, y, d);
        eng_sgemm(1, 0, k, d, N, 1.0f, F, k, kin + d, ld, 0.0f, y + (size_t)k * d, d);
    }
}

/* dE += K dK'^T, dK = E dK' (and F, V alike) */
void eng_linformer_bwd(eng_node *n, int rows)
{
    const eng_attn *a = n->attn;
    int d = a->d, N = a->n, k = a->m, ld = 3 * d;
    const float *E = n->w, *F = n->w + (size_t)N * k;
    float *dE = n->dw, *dF = n->dw + (size_t)N * k;
    for (int b = 0; b < rows; b++) {
        const float *kin = a->qkv + (size_t)b * N * ld + d, *dy = n->dy + (size_t)b * 2 * k * d;
        float *dkin = a->dqkv + (size_t)b * N * ld + d, beta = b ? 1.0f : 0.0f;
        eng_sgemm(0, 1, N, k, d, 1.0f, kin, ld, dy, d, beta, dE, k);
        eng_sgemm(0, 1, N, k, d, 1.0f, kin + d, ld, dy + (size_t)k * d, d, beta, dF, k);
        eng_sgemm(0, 0, N, d, k, 1.0f, E, k, dy, d, 0.0f, dkin, ld);
        eng_sgemm(0, 0, N, d, k, 1.0f, F, k, dy + (size_t)k * d, d, 0.0f, dkin + d, ld);
    }
}

uint64_t eng_linformer_flops(const eng_node *n, int rows, eng_dir dir)
{
    return attn_nm(n, rows) * n->attn->d * (dir == ENG_FWD ? 4 : 8);
}

uint64_t eng_linformer_bytes(const eng_node *n, int rows, eng_dir dir)
{
    const eng_attn *a = n->attn;
    uint64_t x = U64(rows) * a->n * a->d, e = U64(a->n) * a->m, y = U64(rows) * a->m * a->d;
    return 4 * (dir == ENG_FWD ? 2 * x + 2 * e + 2 * y : 4 * x + 4 * e + 2 * y);
}

int eng_linformer_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    const eng_attn *a = n->attn;
    double calls = 2.0 * rows;
    g[0] = (eng_gemm_shape){ 1, 0, a->m, a->d, a->n, calls };
    g[1] = (eng_gemm_shape){ 0, 1, a->n, a->m, a->d, calls };
    g[2] = (eng_gemm_shape){ 0, 0, a->n, a->d, a->m, calls };
    return 3;
}

/* ---- building: model.c's ENG_LAYER_SEQ ---------------------------------------------- */

static const char *const SEQ_NAMES[] = { "embed", "posenc", "layernorm", "encoder", "meanpool" };

static eng_node *seq_node(eng_model *m, eng_op_id op, int layer, const int in[3], const int out[3], size_t nw,
                          size_t nb)
{
    eng_node *n = eng_model_add_node(m, op, layer, in, out);
    n->n_w = nw;
    n->n_b = nb;
    return n;
}

/* Appends a node reading the previous one's output shape (*cur) and moves *cur to its own. */
static eng_node *chain(eng_model *m, eng_op_id op, int layer, int cur[3], int c, int h, int w, size_t nw, size_t nb)
{
    int out[3] = { c, h, w };
    eng_node *n = seq_node(m, op, layer, cur, out, nw, nb);
    memcpy(cur, out, sizeof out);
    return n;
}

#define ENCODER_NODES 13 /* with the Linformer projection */

static int plan_encoder(eng_model *m, const eng_layer_spec *sp, int i, eng_layer *L, const int shape[3])
{
    const eng_model_config *mc = &m->cfg;
    int n = shape[1], d = shape[2], H = sp->heads ? sp->heads : 1, ff = sp->ff ? sp->ff : 4 * d;
    if (d % H)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): %d heads do not divide the width %d; use a head count "
                        "that divides it, or an embed width that the heads divide", i + 1, L->name, H, d);
    int lin = mc->attn == ENG_ATTN_LINFORMER, lsh = mc->attn == ENG_ATTN_LSH, k = lin ? mc->attn_k : n;
    int nb = mc->attn_buckets, rounds = mc->attn_rounds, chunk = lsh && nb > 0 ? (n + nb - 1) / nb : 0;
    if (mc->attn != ENG_ATTN_FULL && !lin && !lsh)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): unknown attention kind %d", i + 1, L->name, (int)mc->attn);
    if (k < 1)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): linformer needs k >= 1, got %d", i + 1, L->name, k);
    if (lsh && (nb < 2 || nb % 2 || rounds < 1))
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): lsh needs an even number of buckets >= 2 and rounds >= 1, "
                        "got buckets=%d rounds=%d", i + 1, L->name, nb, rounds);
    if (lsh) k = rounds * 2 * chunk;
    size_t D = (size_t)d, F = (size_t)ff;
    int cur[3] = { 1, n, d };
    chain(m, ENG_OP_LAYERNORM, i, cur, 1, n, d, D, D)->accum = 1;
    chain(m, ENG_OP_ATTN_QKV, i, cur, 1, n, 3 * d, 3 * D * D, 3 * D);
    if (lin) chain(m, ENG_OP_LINFORMER_PROJ, i, cur, 2, k, d, 2 * (size_t)n * k, 0);
    if (lsh) {
        /* its output is the key lists, kept in its workspace; y is a placeholder */
        eng_node *hn = seq_node(m, ENG_OP_LSH_HASH, i, cur, (int[3]){ 1, 1, 1 }, 0, 0);
        hn->kernel = nb;
        hn->stride = rounds;
        hn->k = k;
        hn->pad = H;
    }
    chain(m, ENG_OP_ATTN_SCORES, i, cur, H, n, k, 0, 0);
    chain(m, ENG_OP_ATTN_SOFTMAX, i, cur, H, n, k, 0, 0);
    chain(m, ENG_OP_ATTN_WSUM, i, cur, 1, n, d, 0, 0);
    chain(m, ENG_OP_ATTN_OUT, i, cur, 1, n, d, D * D, D);
    chain(m, ENG_OP_RESADD, i, cur, 1, n, d, 0, 0);
    chain(m, ENG_OP_LAYERNORM, i, cur, 1, n, d, D, D)->accum = 1;
    chain(m, ENG_OP_FFN, i, cur, 1, n, ff, D * F, F);
    chain(m, ENG_OP_GELU, i, cur, 1, n, ff, 0, 0);
    chain(m, ENG_OP_FFN, i, cur, 1, n, d, F * D, D);
    chain(m, ENG_OP_RESADD, i, cur, 1, n, d, 0, 0);
    eng_attn *a = &m->attn[i];
    memset(a, 0, sizeof *a);
    a->kind = mc->attn;
    a->n = n;
    a->m = k;
    a->d = d;
    a->heads = H;
    a->buckets = nb;
    a->rounds = rounds;
    a->chunk = chunk;
    return ENG_OK;
}

int eng_seq_plan(eng_model *m, const eng_layer_spec *sp, int i, eng_layer *L, const int shape[3], int out[3])
{
    if ((unsigned)sp->seq > ENG_SEQ_MEANPOOL)
        return eng_fail(ENG_EINVAL, "model: layer %d has an unknown sequence layer kind %d", i + 1, (int)sp->seq);
    int count = 0;
    for (int j = 0; j <= i; j++) count += m->cfg.layers[j].kind == ENG_LAYER_SEQ && m->cfg.layers[j].seq == sp->seq;
    snprintf(L->name, sizeof L->name, "%s%d", SEQ_NAMES[sp->seq], count);
    if (shape[0] != 1)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s) needs a sequence input [1 x n x d] (n positions of d "
                        "features), got %dx%dx%d; put it after an embed layer on sequence or image data, not after "
                        "a convolution", i + 1, L->name, shape[0], shape[1], shape[2]);
    /* the layers after this one take at most 3 nodes each, and the loss one */
    int room = ENG_MAX_NODES - m->n_nodes - 3 * (m->n_layers - i - 1) - 1;
    if (room < ENCODER_NODES)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): the model has room for %d nodes and the layers use more; "
                        "use fewer encoder layers (each takes 12 nodes, 13 with linformer)", i + 1, L->name,
                        ENG_MAX_NODES);
    int n = shape[1], d = shape[2];
    memcpy(out, shape, 3 * sizeof(int));
    switch (sp->seq) {
    case ENG_SEQ_EMBED:
        if (sp->units < 1)
            return eng_fail(ENG_EINVAL, "model: layer %d (%s): the width must be positive, got embed:%d", i + 1,
                            L->name, sp->units);
        out[2] = sp->units;
        seq_node(m, ENG_OP_EMBED, i, shape, out, (size_t)d * sp->units, (size_t)sp->units);
        break;
    case ENG_SEQ_POSENC: seq_node(m, ENG_OP_POSENC, i, shape, out, sp->learned ? (size_t)n * d : 0, 0); break;
    case ENG_SEQ_LAYERNORM: seq_node(m, ENG_OP_LAYERNORM, i, shape, out, (size_t)d, (size_t)d); break;
    case ENG_SEQ_MEANPOOL:
        out[1] = 1;
        seq_node(m, ENG_OP_MEANPOOL, i, shape, out, 0, 0);
        break;
    case ENG_SEQ_ENCODER: {
        int rc = plan_encoder(m, sp, i, L, shape);
        if (rc) return rc;
        break;
    }
    }
    for (int j = L->node_first; j < m->n_nodes; j++) L->n_w += m->nodes[j].n_w + m->nodes[j].n_b;
    return ENG_OK;
}

size_t eng_seq_ws_floats(const eng_node *n, int max_batch)
{
    if (n->op == ENG_OP_LAYERNORM) return 2 * (size_t)max_batch * n->in_shape[1];
    if (n->op == ENG_OP_POSENC && !n->n_w) return n->out_size;
    if (n->op == ENG_OP_LSH_HASH) {
        /* rotations, key lists, then one round's buckets, order and counts */
        size_t N = (size_t)n->in_shape[1], dh = (size_t)n->in_shape[2] / 3 / n->pad;
        return (size_t)n->stride * dh * (n->kernel / 2) + (size_t)max_batch * n->pad * N * n->k + 2 * N + n->kernel + 1;
    }
    return 0;
}

void eng_seq_wire(eng_model *m, eng_layer *L)
{
    float *p = m->params + L->w_off, *g = m->grads + L->w_off;
    eng_node *first = &m->nodes[L->node_first], *last = first + L->n_nodes - 1;
    eng_attn *a = &m->attn[first->layer];
    const eng_node *block_in = first;
    for (eng_node *n = first; n <= last; n++) {
        if (n->n_w) { n->w = p; n->dw = g; p += n->n_w; g += n->n_w; }
        if (n->n_b) { n->b = p; n->db = g; p += n->n_b; g += n->n_b; }
        if (n->op == ENG_OP_POSENC && !n->n_w) posenc_table(n->ws, n->out_shape[1], n->out_shape[2]);
        if (L->n_nodes == 1) continue;
        n->attn = a;
        /* each residual adds the input of the layernorm that opened its half of the block */
        if (n->op == ENG_OP_RESADD) { n->skip = block_in; block_in = n + 1; }
        if (n->op == ENG_OP_ATTN_QKV) {
            a->qkv = n->y; a->dqkv = n->dy;
            a->k = n->y + a->d; a->v = n->y + 2 * a->d; a->dk = n->dy + a->d; a->dv = n->dy + 2 * a->d;
            a->ldkv = 3 * a->d;
            a->kv_row = (size_t)a->n * 3 * a->d;
        }
        if (n->op == ENG_OP_LSH_HASH) {
            size_t nrot = (size_t)n->stride * (a->d / a->heads) * (n->kernel / 2);
            eng_rng r;
            eng_rng_seed(&r, LSH_SEED, (uint64_t)first->layer);
            for (size_t k = 0; k < nrot; k++) n->ws[k] = (float)eng_rng_normal(&r);
            a->idx = (int32_t *)(n->ws + nrot);
        }
        if (n->op == ENG_OP_LINFORMER_PROJ) {
            size_t kd = (size_t)a->m * a->d;
            a->k = n->y; a->v = n->y + kd; a->dk = n->dy; a->dv = n->dy + kd;
            a->ldkv = a->d;
            a->kv_row = 2 * kd;
        }
    }
    /* the whole block is the layer's one weight tensor for the per-layer gradient
     * transforms (znorm) and telemetry ("encoder1.W") */
    L->w = m->params + L->w_off;
    L->dw = m->grads + L->w_off;
    L->z = last->y;
    L->dz = last->dy;
}

/* Layernorm gains 1, shifts 0; projections Xavier-uniform with zero biases; a learned
 * positional table N(0, 0.02^2) (as BERT); Linformer's E, F Xavier over [n x k]. */
void eng_seq_init(eng_model *m, eng_layer *L, uint64_t seed, int i)
{
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_INIT + (uint64_t)i);
    for (eng_node *n = &m->nodes[L->node_first]; n < &m->nodes[L->node_first + L->n_nodes]; n++) {
        if (!n->n_w) continue;
        if (n->op == ENG_OP_LAYERNORM) {
            for (size_t k = 0; k < n->n_w; k++) n->w[k] = 1.0f;
        } else if (n->op == ENG_OP_POSENC) {
            for (size_t k = 0; k < n->n_w; k++) n->w[k] = (float)(0.02 * eng_rng_normal(&r));
        } else {
            double fi = n->op == ENG_OP_LINFORMER_PROJ ? n->attn->n : n->in_shape[2];
            double fo = n->op == ENG_OP_LINFORMER_PROJ ? n->attn->m : n->out_shape[2];
            double lim = sqrt(6.0 / (fi + fo));
            for (size_t k = 0; k < n->n_w; k++) n->w[k] = (float)(lim * (2.0 * eng_rng_uniform(&r) - 1.0));
        }
        if (n->n_b) memset(n->b, 0, n->n_b * sizeof(float));
    }
}

/* The name of a sequence layer's first op as ops.c spells it, without reading the op
 * table (attention.c -> ops.c would close a file circle: ops.c calls this file's ops). */
static const char *seq_op_name(eng_op_id op)
{
    switch (op) {
    case ENG_OP_EMBED: return "embed";
    case ENG_OP_POSENC: return "posenc";
    case ENG_OP_LAYERNORM: return "layernorm";
    case ENG_OP_MEANPOOL: return "meanpool";
    default: return "?"; /* eng_seq_plan builds no other first node */
    }
}

int eng_seq_summary(const eng_model *m, const eng_layer *L, char *s, size_t cap)
{
    const int *a = L->in_shape, *b = L->out_shape;
    const eng_node *first = &m->nodes[L->node_first];
    const char *name = seq_op_name(first->op);
    switch (first->op) {
    case ENG_OP_POSENC: return snprintf(s, cap, "posenc(%s)", first->n_w ? "learned" : "sinusoidal");
    case ENG_OP_LAYERNORM:
        if (L->n_nodes == 1) break;
        {
            const eng_attn *at = &m->attn[first->layer];
            int ff = first[L->n_nodes - 4].out_shape[2];
            if (at->kind == ENG_ATTN_LSH)
                return snprintf(s, cap, "encoder(%dx%d h%d ff%d lsh b%d r%d c%d)", a[1], a[2], at->heads, ff, at->buckets,
                                at->rounds, at->chunk);
            if (at->kind == ENG_ATTN_LINFORMER)
                return snprintf(s, cap, "encoder(%dx%d h%d ff%d linformer k%d)", a[1], a[2], at->heads, ff, at->m);
            return snprintf(s, cap, "encoder(%dx%d h%d ff%d full)", a[1], a[2], at->heads, ff);
        }
    default: break;
    }
    return snprintf(s, cap, "%s(%dx%d->%dx%d)", name, a[1], a[2], b[1], b[2]);
}

/* What every node of a sequence layer holds (its output and gradient buffers and its
 * workspace) is charged to its forward scope, so the memory column shows the attention's
 * [heads x n x m] probabilities and their gradient on attn_scores. */
void eng_seq_charge(eng_model *m)
{
    if (!m->prof) return;
    size_t B = (size_t)m->max_batch;
    for (int i = 0; i < m->n_nodes - 1; i++) {
        const eng_node *n = &m->nodes[i];
        if (n->layer < 0 || m->layers[n->layer].kind != ENG_LAYER_SEQ) continue;
        size_t floats = eng_seq_ws_floats(n, m->max_batch);
        if (n->op != ENG_OP_ATTN_SOFTMAX) floats += 2 * B * n->out_size;
        prof_charge(m->prof, n->prof_fwd, floats * sizeof(float));
    }
}

/* ---- parsing: layer specs and model.attention --------------------------------------- */

static int parse_pos(const char *s, const char *key, int *out)
{
    size_t kl = strlen(key);
    if (strncmp(s, key, kl) || s[kl] != '=') return 1;
    char *end;
    long v = strtol(s + kl + 1, &end, 10);
    if (end == s + kl + 1 || *end || v < 1 || v > 1000000) return -1;
    *out = (int)v;
    return 0;
}

static int parse_encoder(char *const *parts, int np, eng_layer_spec *L)
{
    for (int i = 1; i < np; i++) {
        int rh = parse_pos(parts[i], "heads", &L->heads), rf = rh ? parse_pos(parts[i], "ff", &L->ff) : 1;
        if (rh < 0 || (rh && rf)) return -1;
    }
    return 0;
}

int eng_seq_layer_parse(char *const *parts, int np, eng_layer_spec *L, char *why, size_t cap)
{
    int k = -1;
    for (int i = 0; i <= ENG_SEQ_MEANPOOL; i++)
        if (!strcmp(parts[0], SEQ_NAMES[i])) k = i;
    if (k < 0) return 1;
    L->kind = ENG_LAYER_SEQ;
    L->seq = (eng_seq_kind)k;
    int bad = 0;
    char *end = NULL;
    switch (L->seq) {
    case ENG_SEQ_EMBED:
        L->units = np == 2 ? (int)strtol(parts[1], &end, 10) : 0;
        bad = np != 2 || *end || L->units < 1 || L->units > 100000;
        if (bad) snprintf(why, cap, "expected embed:WIDTH with WIDTH in 1..100000 (features per position)");
        break;
    case ENG_SEQ_POSENC:
        L->learned = np == 2 && !strcmp(parts[1], "learned");
        bad = np > 2 || (np == 2 && !L->learned && strcmp(parts[1], "sinusoidal"));
        if (bad) snprintf(why, cap, "expected posenc, posenc:sinusoidal (fixed, the default) or posenc:learned");
        break;
    case ENG_SEQ_ENCODER:
        L->heads = 4;
        bad = parse_encoder(parts, np, L);
        if (bad) snprintf(why, cap, "expected encoder[:heads=H][:ff=F] with H, F >= 1 (defaults: 4 heads, ff = 4 x width)");
        break;
    case ENG_SEQ_LAYERNORM:
    case ENG_SEQ_MEANPOOL:
        bad = np != 1;
        if (bad) snprintf(why, cap, "expected %s without options", SEQ_NAMES[k]);
        break;
    }
    return bad ? -1 : 0;
}

int eng_attn_parse(const char *s, eng_model_config *mc, char *why, size_t cap)
{
    char buf[48];
    snprintf(buf, sizeof buf, "%s", s);
    mc->attn = ENG_ATTN_FULL;
    mc->attn_k = mc->attn_buckets = mc->attn_rounds = 0;
    if (!buf[0] || !strcmp(buf, "full")) return 0;
    if (!strncmp(buf, "linformer:", 10) && !parse_pos(buf + 10, "k", &mc->attn_k)) {
        mc->attn = ENG_ATTN_LINFORMER;
        return 0;
    }
    if (!strncmp(buf, "lsh:", 4)) {
        char *b = buf + 4, *colon = strchr(b, ':');
        if (colon) *colon = '\0';
        if (colon && !parse_pos(b, "buckets", &mc->attn_buckets) && !parse_pos(colon + 1, "rounds", &mc->attn_rounds) &&
            mc->attn_buckets % 2 == 0) {
            mc->attn = ENG_ATTN_LSH;
            return 0;
        }
    }
    snprintf(why, cap, "expected full, linformer:k=K (K >= 1: the rows keys and values are projected to) or "
             "lsh:buckets=B:rounds=R (B even, R >= 1), got '%s'", s);
    return -1;
}
