/* conv.c — the conv2d op: zero padding and stride, NCHW per row, by the algorithm
 * n->conv_algo names (model.conv_algo; docs/engine.md, "How conv2d is computed"):
 *  - im2col + one sgemm per row (any stride);
 *  - direct (stride 1 only): vectorised loops over the padded input, no GEMM;
 *  - winograd / winograd4 (3x3, stride 1): conv_winograd.c; fft (stride 1): conv_fft.c.
 * Here: the first two, the dispatch, the choice (auto) and the fallbacks. All compute the
 * same convolution; they agree to rounding (Winograd and FFT within the bounds of
 * docs/convolution.md), not bits. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#define _POSIX_C_SOURCE 200809L

#include "conv_internal.h"

#include <cblas.h>

#include <string.h>

#define U64(x) ((uint64_t)(x))

/* ---- conv2d: zero padding and stride, NCHW per row; im2col + sgemm -----------------------
 * Output size per axis: (H + 2·pad - K) / stride + 1 (positions past the last whole window
 * are dropped, as PyTorch does). For a chunk of S rows, col is [C*K*K, S*P] (column s*P + p
 * is the receptive field of output position p of row s, zeros where it overhangs the
 * padded border). Row s's output is y_s[F, P] = W[F, CKK] · col[:, s*P..], one sgemm per
 * row written straight into y (no transpose pass). Backward: dW += dy_s · col_s^T and
 * dcol_s = W^T · dy_s per row, then col2im adds dcol into dx. Backward reuses the
 * forward's col when the node keeps its own (col_kept), else rebuilds it. */

/* The outputs o in [*lo, *hi) whose input index o·st - pad + k lies in [0, n); the rest
 * of the out outputs read the zero border. */
static void conv_span(int out, int n, int k, int st, int pad, int *lo, int *hi)
{
    int a = pad - k, b = n + pad - k;   /* o·st >= a and o·st < b */
    *lo = a <= 0 ? 0 : (a + st - 1) / st;
    *hi = b <= 0 ? 0 : (b + st - 1) / st;
    if (*hi > out) *hi = out;
    if (*lo > *hi) *lo = *hi;
}

/* One (c, ki, kj) row of im2col for one sample, dst[OH x OW] from the channel plane xs
 * (add = 0), or the reverse, xs += dst at the same places (add = 1: col2im). Without
 * padding and with stride 1 every row is a plain shifted copy: that case gets loops with
 * no bounds (the general ones made the Fashion CNN's im2col 1.7x and col2im 1.9x slower). */
static inline __attribute__((always_inline)) void conv_row(const conv_dims *d, int ki, int kj, float *restrict xs,
                                                           float *restrict dst, int add)
{
    int OW = d->OW, st = d->st, off = kj - d->pad;
    if (d->pad == 0 && st == 1) {
        for (int oh = 0; oh < d->OH; oh++) {
            float *restrict o = dst + (size_t)oh * OW, *restrict xr = xs + (size_t)(oh + ki) * d->W + kj;
            /* rows are short (OW floats): a plain loop beats a memcpy call each */
            if (add) for (int ow = 0; ow < OW; ow++) xr[ow] += o[ow];
            else for (int ow = 0; ow < OW; ow++) o[ow] = xr[ow];
        }
        return;
    }
    int lo, hi;
    conv_span(OW, d->W, kj, st, d->pad, &lo, &hi);
    for (int oh = 0; oh < d->OH; oh++) {
        float *restrict o = dst + (size_t)oh * OW;
        int ih = oh * st - d->pad + ki;
        if (ih < 0 || ih >= d->H) {
            if (!add) memset(o, 0, (size_t)OW * sizeof(float));
            continue;
        }
        float *restrict xr = xs + (size_t)ih * d->W;
        if (add) {
            for (int ow = lo; ow < hi; ow++) xr[ow * st + off] += o[ow];
            continue;
        }
        for (int ow = 0; ow < lo; ow++) o[ow] = 0.0f;
        for (int ow = lo; ow < hi; ow++) o[ow] = xr[ow * st + off];
        for (int ow = hi; ow < OW; ow++) o[ow] = 0.0f;
    }
}

/* im2col (add = 0: col from x) or col2im (add = 1: x += col) over S rows; inlined into
 * the two callers so that add is a constant. */
static inline __attribute__((always_inline)) void conv_cols(const conv_dims *d, float *x, size_t in_size, int S,
                                                            float *col, int add)
{
    size_t ld = (size_t)S * d->P;
    for (int c = 0; c < d->C; c++)
        for (int ki = 0; ki < d->K; ki++)
            for (int kj = 0; kj < d->K; kj++) {
                float *crow = col + ((size_t)(c * d->K + ki) * d->K + kj) * ld;
                for (int s = 0; s < S; s++)
                    conv_row(d, ki, kj, x + (size_t)s * in_size + (size_t)c * d->H * d->W, crow + (size_t)s * d->P, add);
            }
}

static void im2col(const conv_dims *d, const float *x, size_t in_size, int S, float *col)
{
    conv_cols(d, (float *)x, in_size, S, col, 0); /* x is only read when add = 0 */
}

static void col2im_add(const conv_dims *d, const float *dcol, int S, float *dx, size_t in_size)
{
    conv_cols(d, dx, in_size, S, (float *)dcol, 1); /* col is only read when add = 1 */
}

static void im2col_fwd(eng_node *n, int rows)
{
    conv_dims d = conv_get(n);
    int P = (int)d.P, CKK = (int)d.CKK;
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        int ld = S * P;
        im2col(&d, n->x + (size_t)r0 * n->in_size, n->in_size, S, n->col);
        for (int s = 0; s < S; s++)
            eng_sgemm(0, 0, d.F, P, CKK, 1.0f, n->w, CKK, n->col + (size_t)s * P, ld, 0.0f,
                      n->y + (size_t)(r0 + s) * n->out_size, P);
    }
}

static void im2col_bwd(eng_node *n, int rows)
{
    conv_dims d = conv_get(n);
    int P = (int)d.P, CKK = (int)d.CKK;
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        int ld = S * P;
        if (!(n->col_kept && r0 == 0 && S == rows))
            im2col(&d, n->x + (size_t)r0 * n->in_size, n->in_size, S, n->col);
        for (int s = 0; s < S; s++) {
            const float *dy = n->dy + (size_t)(r0 + s) * n->out_size;
            eng_sgemm(0, 1, d.F, CKK, P, 1.0f, dy, P, n->col + (size_t)s * P, ld,
                      r0 == 0 && s == 0 ? 0.0f : 1.0f, n->dw, CKK);
            if (n->dx) eng_sgemm(1, 0, CKK, P, d.F, 1.0f, n->w, CKK, dy, P, 0.0f, n->dcol + (size_t)s * P, ld);
        }
        if (n->dx) {
            float *dx = n->dx + (size_t)r0 * n->in_size;
            memset(dx, 0, (size_t)S * n->in_size * sizeof(float));
            col2im_add(&d, n->dcol, S, dx, n->in_size);
        }
    }
}


/* ---- direct convolution (stride 1) ----------------------------------------------------
 * y[f][oh][ow] = sum over c, ki, kj (in that order) of w[f][c][ki][kj] · xp[c][oh+ki][ow+kj],
 * xp being the input with its zero border, copied once per row (sample) into planes whose
 * rows are wide enough that every DCONV_V-float load of the inner loop stays inside: no
 * edge cases there, and the lanes past OW are computed and dropped. DCONV_NF filters share
 * each loaded input vector (their accumulators stay in registers). Backward: dW by the same
 * loops with dy (zero past OW) in place of w, each weight's vector reduced at the end; dx is
 * the forward kernel run on dy padded by K-1-pad with the kernel rotated by 180 degrees and
 * the roles of C and F swapped (the "full" correlation). The vector type is GCC's generic
 * one: every ISA path lowers the same lane-wise multiply and add, never fused
 * (-ffp-contract=off), and sums in the same order, so all paths give the same bits. */
#define DCONV_V 16
#define DCONV_NF 4
typedef float dconv_v __attribute__((vector_size(DCONV_V * sizeof(float))));

static int round_up(int a, int m) { return (a + m - 1) / m * m; }

/* One direct pass: C input planes of Hp x Wp (zero border included), OH x OW outputs, KxK.
 * half: OW <= DCONV_V/2, so each vector holds two output rows (oh in the low half, oh+1 in
 * the high half) instead of one row and unused lanes (the Fashion CNN's conv2 has OW = 8). */
typedef struct { int C, Hp, Wp, K, OH, OW, half; } dconv_geo;
#define DCONV_H (DCONV_V / 2)
typedef float dconv_h __attribute__((vector_size(DCONV_H * sizeof(float))));

/* *v from p (half: DCONV_H floats from p and DCONV_H from p + step, the next row). */
static inline __attribute__((always_inline)) void dconv_load(dconv_v *v, const float *p, size_t step, int half)
{
    if (!half) {
        memcpy(v, p, sizeof *v);
        return;
    }
    dconv_h lo, hi;
    memcpy(&lo, p, sizeof lo);
    memcpy(&hi, p + step, sizeof hi);
    /* a register concatenation: two stores and one wide load through memory would stall */
    *v = __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* Stores nb bytes of *v at y (half: and of its high half at y + OW, when second). */
static inline __attribute__((always_inline)) void dconv_store(float *y, const dconv_v *v, size_t nb, int OW, int second)
{
    memcpy(y, v, nb);
    if (second) memcpy(y + OW, (const float *)v + DCONV_H, nb);
}

/* y[f][OH x OW] for the DCONV_NF filters packed in wpk (wpk[(c·K + ki)·K + kj][f]); the
 * first nf of them are stored. half is g.half, a constant at each call. */
static inline __attribute__((always_inline)) void dconv_fwd_rows(const float *restrict xp, const float *restrict wpk,
                                                                 dconv_geo g, float *restrict y, int nf, int half)
{
    size_t plane = (size_t)g.Hp * g.Wp, yplane = (size_t)g.OH * g.OW;
    for (int oh = 0; oh < g.OH; oh += 1 + half)
        for (int ow0 = 0; ow0 < g.OW; ow0 += DCONV_V) {
            dconv_v a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
            const float *wp = wpk;
            for (int c = 0; c < g.C; c++)
                for (int ki = 0; ki < g.K; ki++) {
                    const float *xr = xp + c * plane + (size_t)(oh + ki) * g.Wp + ow0;
                    for (int kj = 0; kj < g.K; kj++, wp += DCONV_NF) {
                        dconv_v xv;
                        dconv_load(&xv, xr + kj, (size_t)g.Wp, half);
                        a0 += xv * wp[0];
                        a1 += xv * wp[1];
                        a2 += xv * wp[2];
                        a3 += xv * wp[3];
                    }
                }
            size_t nb = (size_t)(g.OW - ow0 < DCONV_V ? g.OW - ow0 : DCONV_V) * sizeof(float);
            int second = half && oh + 1 < g.OH;
            float *yo = y + (size_t)oh * g.OW + ow0;
            dconv_store(yo, &a0, nb, g.OW, second);
            if (nf > 1) dconv_store(yo + yplane, &a1, nb, g.OW, second);
            if (nf > 2) dconv_store(yo + 2 * yplane, &a2, nb, g.OW, second);
            if (nf > 3) dconv_store(yo + 3 * yplane, &a3, nb, g.OW, second);
        }
}

ENG_ISA_BODY dconv_fwd_block_body(const float *restrict xp, const float *restrict wpk, dconv_geo g,
                                  float *restrict y, int nf)
{
    if (g.half) dconv_fwd_rows(xp, wpk, g, y, nf, 1);
    else dconv_fwd_rows(xp, wpk, g, y, nf, 0);
}
ENG_ISA_KERNEL(dconv_fwd_block, (const float *restrict xp, const float *restrict wpk, dconv_geo g, float *restrict y, int nf),
               (xp, wpk, g, y, nf))

/* The dW lane accumulators of tap (ki, kj) (and of (ki, kj+1) when two, a constant at
 * each call) at ap, for the DCONV_NF filters at dyp: += dyp[f][oh][ow0..] · xr[oh·Wp + ow0
 * (+1)..] over every oh and vector ow0. Two taps share each dy load and keep 8 independent
 * sums in flight (4 wait on the add latency). */
static inline __attribute__((always_inline)) void dconv_dw_taps(const float *restrict xr, const float *restrict dyp,
                                                                dconv_geo g, float *restrict ap, int two, int half)
{
    size_t dplane = (size_t)g.OH * g.OW;
    const size_t vb = sizeof(dconv_v);
    dconv_v a0, a1, a2, a3, b0 = { 0 }, b1 = { 0 }, b2 = { 0 }, b3 = { 0 };
    memcpy(&a0, ap, vb); memcpy(&a1, ap + DCONV_V, vb); memcpy(&a2, ap + 2 * DCONV_V, vb); memcpy(&a3, ap + 3 * DCONV_V, vb);
    float *bp = ap + DCONV_NF * DCONV_V;
    if (two) { memcpy(&b0, bp, vb); memcpy(&b1, bp + DCONV_V, vb); memcpy(&b2, bp + 2 * DCONV_V, vb); memcpy(&b3, bp + 3 * DCONV_V, vb); }
    for (int oh = 0; oh < g.OH; oh += 1 + half) {
        const float *xrow = xr + (size_t)oh * g.Wp, *d = dyp + (size_t)oh * g.OW;
        for (int ow0 = 0; ow0 < g.OW; ow0 += DCONV_V) {
            dconv_v x0, x1 = { 0 }, d0, d1, d2, d3;
            dconv_load(&x0, xrow + ow0, (size_t)g.Wp, half);
            if (two) dconv_load(&x1, xrow + ow0 + 1, (size_t)g.Wp, half);
            memcpy(&d0, d + ow0, vb);
            memcpy(&d1, d + dplane + ow0, vb);
            memcpy(&d2, d + 2 * dplane + ow0, vb);
            memcpy(&d3, d + 3 * dplane + ow0, vb);
            a0 += d0 * x0; a1 += d1 * x0; a2 += d2 * x0; a3 += d3 * x0;
            if (two) { b0 += d0 * x1; b1 += d1 * x1; b2 += d2 * x1; b3 += d3 * x1; }
        }
    }
    memcpy(ap, &a0, vb); memcpy(ap + DCONV_V, &a1, vb); memcpy(ap + 2 * DCONV_V, &a2, vb); memcpy(ap + 3 * DCONV_V, &a3, vb);
    if (two) { memcpy(bp, &b0, vb); memcpy(bp + DCONV_V, &b1, vb); memcpy(bp + 2 * DCONV_V, &b2, vb); memcpy(bp + 3 * DCONV_V, &b3, vb); }
}

/* acc[(k·NF + f)·V ..] += the lanes of sum over oh, ow of dyp[f][oh][ow] · xp[c][oh+ki][ow+kj],
 * k = (c·K + ki)·K + kj, for the DCONV_NF filters at dyp (planes OH x OWp, zero past OW, so
 * the lanes past OW add zeros); g.OW is OWp and g.OH the rows of a dyp plane here (half:
 * OWp = DCONV_V/2 and an even number of rows, so two rows are one contiguous vector). The lanes are summed once after the last
 * row (dconv_dw_reduce): reducing per row cost more than the products on small planes. */
ENG_ISA_BODY dconv_dw_block_body(const float *restrict xp, const float *restrict dyp, dconv_geo g, float *restrict acc)
{
    size_t plane = (size_t)g.Hp * g.Wp;
    float *ap = acc;
    for (int c = 0; c < g.C; c++)
        for (int ki = 0; ki < g.K; ki++) {
            const float *xr = xp + c * plane + (size_t)ki * g.Wp;
            int kj = 0;
            for (; kj + 1 < g.K; kj += 2, ap += 2 * DCONV_NF * DCONV_V) {
                if (g.half) dconv_dw_taps(xr + kj, dyp, g, ap, 1, 1);
                else dconv_dw_taps(xr + kj, dyp, g, ap, 1, 0);
            }
            if (kj < g.K) {
                if (g.half) dconv_dw_taps(xr + kj, dyp, g, ap, 0, 1);
                else dconv_dw_taps(xr + kj, dyp, g, ap, 0, 0);
                ap += DCONV_NF * DCONV_V;
            }
        }
}
ENG_ISA_KERNEL(dconv_dw_block, (const float *restrict xp, const float *restrict dyp, dconv_geo g, float *restrict acc),
               (xp, dyp, g, acc))

/* dw [F x CKK] from the lane accumulators of dconv_dw_block (blocks of DCONV_NF filters),
 * each weight's lanes summed in lane order (the same on every path). */
static void dconv_dw_reduce(const float *acc, int F, size_t CKK, float *dw)
{
    for (int f = 0; f < F; f++)
        for (size_t k = 0; k < CKK; k++) {
            const float *a = acc + (((size_t)(f / DCONV_NF) * CKK + k) * DCONV_NF + f % DCONV_NF) * DCONV_V;
            float s = 0.0f;
            for (int i = 0; i < DCONV_V; i++) s += a[i];
            dw[(size_t)f * CKK + k] = s;
        }
}

/* Packs W [F x C·K·K] for dconv_fwd_block in blocks of DCONV_NF output filters: forward
 * (rot = 0) filter f, channel c, tap (ki, kj) = w[f][c][ki][kj]; dx (rot = 1) filter c,
 * channel f, tap (ki, kj) = w[f][c][K-1-ki][K-1-kj]. Filters past the last are zero. */
static void dconv_pack(const float *w, int F, int C, int K, int rot, float *wpk)
{
    int nout = rot ? C : F, nin = rot ? F : C, KK = K * K;
    for (int o = 0; o < round_up(nout, DCONV_NF); o++)
        for (int i = 0; i < nin; i++)
            for (int t = 0; t < KK; t++) {
                float v = 0.0f;
                if (o < nout) v = rot ? w[((size_t)i * C + o) * KK + (KK - 1 - t)] : w[((size_t)o * C + i) * KK + t];
                wpk[(((size_t)(o / DCONV_NF) * nin + i) * KK + t) * DCONV_NF + o % DCONV_NF] = v;
            }
}

/* Copies C planes H x W from src to dst's planes (Hp x Wp) at row and column offset pad;
 * the rest of dst (the zero border) is left as the caller zeroed it. */
static void dconv_pad(const float *src, int C, int H, int W, int pad, float *dst, int Hp, int Wp)
{
    for (int c = 0; c < C; c++)
        for (int h = 0; h < H; h++)
            memcpy(dst + ((size_t)c * Hp + h + pad) * Wp + pad, src + ((size_t)c * H + h) * W, (size_t)W * sizeof(float));
}

/* y [F planes of g.OH x g.OW] from the padded input xp and the packed filters wpk. */
static void dconv_run(const float *xp, const float *wpk, dconv_geo g, int F, float *y)
{
    size_t wblock = (size_t)g.C * g.K * g.K * DCONV_NF, yplane = (size_t)g.OH * g.OW;
    for (int f0 = 0; f0 < F; f0 += DCONV_NF)
        dconv_fwd_block_isa[eng_isa_current()](xp, wpk + (size_t)(f0 / DCONV_NF) * wblock, g, y + f0 * yplane,
                                               F - f0 < DCONV_NF ? F - f0 : DCONV_NF);
}

/* The direct pass geometries of a node: forward over x padded by pad, and dx over dy padded
 * by K-1-pad; with the workspace layout [packed weights | xp | dyp | dq | dW lanes]. */
typedef struct { dconv_geo fx, bx, gw; size_t wpk, xp, dyp, dq, acc; } dconv_plan;

static dconv_plan dconv_plan_of(const conv_dims *d)
{
    dconv_plan p;
    int K = d->K, q = K - 1 - d->pad;
    p.fx = (dconv_geo){ d->C, d->H + 2 * d->pad, round_up(d->OW, DCONV_V) + K - 1, K, d->OH, d->OW, d->OW <= DCONV_H };
    p.bx = (dconv_geo){ d->F, d->OH + 2 * q, round_up(d->W, DCONV_V) + K - 1, K, d->H, d->W, d->W <= DCONV_H };
    /* dW: dy planes of OHr x OWp, zero past OH and OW */
    p.gw = p.fx;
    p.gw.OW = p.fx.half ? DCONV_H : round_up(d->OW, DCONV_V);
    p.gw.OH = p.fx.half ? round_up(d->OH, 2) : d->OH;
    size_t fwd_w = (size_t)round_up(d->F, DCONV_NF) * d->CKK, bwd_w = (size_t)round_up(d->C, DCONV_NF) * d->F * K * K;
    p.wpk = fwd_w > bwd_w ? fwd_w : bwd_w;
    /* + one row: with half, an odd OH reads the row past the last plane (results dropped) */
    p.xp = (size_t)d->C * p.fx.Hp * p.fx.Wp + (size_t)p.fx.Wp;
    p.dyp = (size_t)round_up(d->F, DCONV_NF) * p.gw.OH * p.gw.OW;
    p.dq = (size_t)d->F * p.bx.Hp * p.bx.Wp + (size_t)p.bx.Wp;
    p.acc = (size_t)round_up(d->F, DCONV_NF) * d->CKK * DCONV_V;
    return p;
}

static void direct_fwd(eng_node *n, int rows)
{
    conv_dims d = conv_get(n);
    dconv_plan p = dconv_plan_of(&d);
    float *wpk = n->col, *xp = wpk + p.wpk;
    dconv_pack(n->w, d.F, d.C, d.K, 0, wpk);
    memset(xp, 0, p.xp * sizeof(float));
    for (int r = 0; r < rows; r++) {
        dconv_pad(n->x + (size_t)r * n->in_size, d.C, d.H, d.W, d.pad, xp, p.fx.Hp, p.fx.Wp);
        dconv_run(xp, wpk, p.fx, d.F, n->y + (size_t)r * n->out_size);
    }
}

static void direct_bwd(eng_node *n, int rows)
{
    conv_dims d = conv_get(n);
    dconv_plan p = dconv_plan_of(&d);
    float *wpk = n->col, *xp = wpk + p.wpk, *dyp = xp + p.xp, *dq = dyp + p.dyp, *acc = dq + p.dq;
    int q = d.K - 1 - d.pad;
    if (n->dx) dconv_pack(n->w, d.F, d.C, d.K, 1, wpk);
    memset(xp, 0, (p.xp + p.dyp + p.dq + p.acc) * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float *dy = n->dy + (size_t)r * n->out_size;
        dconv_pad(n->x + (size_t)r * n->in_size, d.C, d.H, d.W, d.pad, xp, p.fx.Hp, p.fx.Wp);
        dconv_pad(dy, d.F, d.OH, d.OW, 0, dyp, p.gw.OH, p.gw.OW);
        for (int f0 = 0; f0 < d.F; f0 += DCONV_NF)
            dconv_dw_block_isa[eng_isa_current()](xp, dyp + (size_t)f0 * p.gw.OH * p.gw.OW, p.gw,
                                                  acc + (size_t)f0 * d.CKK * DCONV_V);
        if (!n->dx) continue;
        dconv_pad(dy, d.F, d.OH, d.OW, q, dq, p.bx.Hp, p.bx.Wp);
        dconv_run(dq, wpk, p.bx, d.C, n->dx + (size_t)r * n->in_size);
    }
    dconv_dw_reduce(acc, d.F, d.CKK, n->dw);
}

/* ---- the op: dispatch, counters, workspace, choice ------------------------------------ */

const char *eng_conv_algo_name(eng_conv_algo a)
{
    switch (a) {
    case ENG_CONV_IM2COL: return "im2col";
    case ENG_CONV_DIRECT: return "direct";
    case ENG_CONV_AUTO: return "auto";
    case ENG_CONV_WINOGRAD: return "winograd";
    case ENG_CONV_WINOGRAD4: return "winograd4";
    case ENG_CONV_FFT: return "fft";
    case ENG_CONV_ONEDNN: return "onednn";
    }
    return "?";
}

const char *eng_conv_fallback(const eng_node *n, eng_conv_algo algo)
{
    int st1 = n->stride <= 1;
    switch (algo) {
    case ENG_CONV_DIRECT:
    case ENG_CONV_FFT: return st1 ? "" : "needs stride 1";
    case ENG_CONV_WINOGRAD:
    case ENG_CONV_WINOGRAD4: return st1 && n->kernel == 3 ? "" : "needs a 3x3 kernel and stride 1";
    case ENG_CONV_ONEDNN: return eng_dnconv_unusable(n);
    default: return "";
    }
}

/* What runs: n->conv_algo, or im2col where the layer cannot run that (eng_conv_select
 * never leaves such a node; one set up by hand may be). */
static eng_conv_algo algo_of(const eng_node *n)
{
    eng_conv_algo a = n->conv_algo;
    return a == ENG_CONV_AUTO || *eng_conv_fallback(n, a) ? ENG_CONV_IM2COL : a;
}

/* One pass of the algorithm that runs (void conditionals: one switch for both directions). */
static void conv_run(eng_node *n, int rows, int bwd)
{
    switch (algo_of(n)) {
    case ENG_CONV_DIRECT: bwd ? direct_bwd(n, rows) : direct_fwd(n, rows); break;
    case ENG_CONV_WINOGRAD: bwd ? eng_wino_bwd(n, rows, 2) : eng_wino_fwd(n, rows, 2); break;
    case ENG_CONV_WINOGRAD4: bwd ? eng_wino_bwd(n, rows, 4) : eng_wino_fwd(n, rows, 4); break;
    case ENG_CONV_FFT: bwd ? eng_fft_bwd(n, rows) : eng_fft_fwd(n, rows); break;
    case ENG_CONV_ONEDNN: bwd ? eng_dnconv_bwd(n, rows) : eng_dnconv_fwd(n, rows); break;
    default: bwd ? im2col_bwd(n, rows) : im2col_fwd(n, rows); break;
    }
}

void eng_conv_fwd(eng_node *n, int rows) { conv_run(n, rows, 0); }

void eng_conv_bwd(eng_node *n, int rows) { conv_run(n, rows, 1); }

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Room for every algorithm the node can run: auto may time them all on this workspace. */
size_t eng_conv_ws_floats(const eng_node *n, int chunk)
{
    conv_dims d = conv_get(n);
    size_t col = max_sz(d.CKK * d.P * (size_t)chunk, eng_dnconv_ws_floats(n, chunk));
    if (d.st != 1) return col;
    dconv_plan p = dconv_plan_of(&d);
    col = max_sz(col, p.wpk + p.xp + p.dyp + p.dq + p.acc);
    col = max_sz(col, eng_fft_ws_floats(n, chunk));
    if (d.K == 3) col = max_sz(col, max_sz(eng_wino_ws_floats(n, 2, chunk), eng_wino_ws_floats(n, 4, chunk)));
    return col;
}

int eng_conv_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    switch (algo_of(n)) {
    case ENG_CONV_DIRECT:
    case ENG_CONV_ONEDNN: return 0; /* no eng_sgemm call at all */
    case ENG_CONV_WINOGRAD: return eng_wino_gemms(n, 2, rows, g);
    case ENG_CONV_WINOGRAD4: return eng_wino_gemms(n, 4, rows, g);
    case ENG_CONV_FFT: return eng_fft_gemms(n, rows, g);
    default: break;
    }
    conv_dims d = conv_get(n);
    int P = (int)d.P, CKK = (int)d.CKK;
    g[0] = (eng_gemm_shape){ 0, 0, d.F, P, CKK, rows }; /* one call per sample */
    g[1] = (eng_gemm_shape){ 0, 1, d.F, CKK, P, rows };
    g[2] = (eng_gemm_shape){ 1, 0, CKK, P, d.F, rows };
    return n->dx ? 3 : 2;
}

/* Every algorithm counts the convolution's own multiply-adds, so GFLOP/s compare them as
 * the time of the same work (Winograd and FFT do fewer multiplications, uncounted; the
 * direct one also computes the lanes past OW and the filters past F up to its blocks,
 * uncounted; im2col's dx adds the col2im sums). */
uint64_t eng_conv_flops(const eng_node *n, int rows, eng_dir dir)
{
    conv_dims d = conv_get(n);
    uint64_t g = 2 * U64(rows) * U64(d.F) * d.CKK * d.P;
    if (dir == ENG_FWD || !n->dx) return g;
    return 2 * g + (algo_of(n) == ENG_CONV_IM2COL ? U64(rows) * d.CKK * d.P : 0);
}

/* direct: fwd reads x and writes + reads xp per row, reads W, writes y; bwd also copies dy
 * into dyp (and dq for dx), reads and writes the dW lane accumulators per row, writes dW
 * and dx. */
static uint64_t direct_bytes(const eng_node *n, int rows, eng_dir dir)
{
    conv_dims d = conv_get(n);
    dconv_plan p = dconv_plan_of(&d);
    uint64_t B = U64(rows), x = B * n->in_size, w = U64(d.F) * d.CKK, yo = B * d.F * d.P;
    if (dir == ENG_FWD) return 4 * (x + 2 * B * p.xp + w + yo);
    uint64_t e = x + 2 * B * p.xp + yo + 2 * B * p.dyp + 2 * B * p.acc + p.acc + w;
    if (n->dx) e += w + yo + 2 * B * p.dq + x;
    return 4 * e;
}

uint64_t eng_conv_bytes(const eng_node *n, int rows, eng_dir dir)
{
    switch (algo_of(n)) {
    case ENG_CONV_DIRECT: return direct_bytes(n, rows, dir);
    case ENG_CONV_WINOGRAD: return eng_wino_bytes(n, 2, rows, dir);
    case ENG_CONV_WINOGRAD4: return eng_wino_bytes(n, 4, rows, dir);
    case ENG_CONV_FFT: return eng_fft_bytes(n, rows, dir);
    case ENG_CONV_ONEDNN: return eng_dnconv_bytes(n, rows, dir);
    default: break;
    }
    conv_dims d = conv_get(n);
    uint64_t B = U64(rows), x = B * n->in_size, col = B * d.CKK * d.P, w = U64(d.F) * d.CKK;
    uint64_t yo = B * d.F * d.P;
    if (dir == ENG_FWD) return 4 * (x + 2 * col + w + yo); /* im2col; sgemm reads W, col, writes y */
    /* dW sgemm: read dy, col; write dW (+ rebuilding col: read x, write col) */
    uint64_t e = yo + col + w;
    if (!(n->col_kept && rows <= n->chunk)) e += x + col;
    if (n->dx)
        e += w + yo + col /* sgemm: read W, dy; write dcol */ + x /* zero dx */ + 2 * col /* col2im */;
    return 4 * e;
}

/* The fastest of reps forward + backward passes under algo, after one warm-up pass. The
 * minimum, not the mean: on a shared machine the other loads only ever add time. */
static double conv_time(eng_node *n, eng_conv_algo algo, int rows, int reps)
{
    n->conv_algo = algo;
    double best = 1e300;
    for (int r = -1; r < reps; r++) {
        uint64_t t0 = prof_now_ns();
        eng_conv_fwd(n, rows);
        eng_conv_bwd(n, rows);
        double t = (double)(prof_now_ns() - t0);
        if (r >= 0 && t < best) best = t;
    }
    return best;
}

/* The candidates of auto, fastest kept: im2col and onednn always; with stride 1 direct,
 * Winograd F(2x2) and F(4x4) on 3x3 kernels and FFT on kernels of 5 and more (below that
 * it never wins: the transforms cost more than the products save). The pick is cached per
 * machine, kernel path, GEMM threads, layer shape and rows (conv-choices in the cache
 * directory; the threads are BLAS's, set before the model is built), as the GEMM choice
 * is: the same model on the same machine runs the same algorithm, so its runs repeat bit
 * for bit and a resumed or data-parallel run computes as the first one did. */
static void conv_choose(eng_node *n, int rows, int reps)
{
    static const eng_conv_algo cand[] = { ENG_CONV_IM2COL, ENG_CONV_DIRECT, ENG_CONV_WINOGRAD, ENG_CONV_WINOGRAD4,
                                          ENG_CONV_FFT, ENG_CONV_ONEDNN };
    n->conv_algo = ENG_CONV_IM2COL;
    char key[400], val[32];
    eng_conv_choice_key(n, rows, "", key, sizeof key);
    if (eng_choice_get("conv-choices", key, val, sizeof val))
        for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
            if (!strcmp(val, eng_conv_algo_name(cand[i])) && !*eng_conv_fallback(n, cand[i]) &&
                (cand[i] != ENG_CONV_ONEDNN || !eng_dnconv_prepare(n, rows, reps))) {
                n->conv_algo = cand[i];
                return;
            }
    eng_conv_algo best = ENG_CONV_IM2COL;
    double tbest = 1e300;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        if (*eng_conv_fallback(n, cand[i])) continue;
        if (cand[i] == ENG_CONV_FFT && (n->kernel < 5 || eng_fft_prepare(n))) continue;
        if (cand[i] == ENG_CONV_ONEDNN && eng_dnconv_prepare(n, rows, reps)) continue;
        double t = conv_time(n, cand[i], rows, reps);
        if (t < tbest) { tbest = t; best = cand[i]; }
    }
    n->conv_algo = best;
    eng_choice_put("conv-choices", key, eng_conv_algo_name(best));
}

int eng_conv_select(eng_node *n, eng_conv_algo want, int rows, int reps)
{
    if (want == ENG_CONV_AUTO) conv_choose(n, rows, reps);
    else n->conv_algo = *eng_conv_fallback(n, want) ? ENG_CONV_IM2COL : want;
    if (n->conv_algo == ENG_CONV_ONEDNN) return eng_dnconv_prepare(n, rows, reps);
    return n->conv_algo == ENG_CONV_FFT ? eng_fft_prepare(n) : ENG_OK;
}

/* " winograd", or " im2col (winograd needs a 3x3 kernel and stride 1)" when a forced
 * algorithm fell back; nothing for an im2col model that asked for it (or predates
 * model.conv_algo), so the summaries stored with earlier runs stay as they were. */
int eng_conv_tag(const eng_node *n, eng_conv_algo want, char *s, size_t cap)
{
    if (want != ENG_CONV_AUTO && *eng_conv_fallback(n, want))
        return snprintf(s, cap, " %s (%s %s)", eng_conv_algo_name(n->conv_algo), eng_conv_algo_name(want),
                        eng_conv_fallback(n, want));
    if (want == ENG_CONV_IM2COL) return 0;
    return snprintf(s, cap, " %s", eng_conv_algo_name(n->conv_algo));
}

int eng_conv_register_stages(prof_t *prof, eng_node *n, const char *layer)
{
    static const char *const wino[CONV_STAGES] = { "input", "filter", "gemm", "output" };
    static const char *const fft[CONV_STAGES] = { "fft", "product", "ifft", NULL };
    /* oneDNN: per direction, the reorders and each primitive (conv_onednn.c) */
    static const char *const dnn[2][CONV_STAGES] = { { "reorder", "forward", NULL, NULL },
                                                     { "reorder", "backward_data", "backward_weights", NULL } };
    eng_conv_algo a = algo_of(n);
    const char *const *names = a == ENG_CONV_FFT ? fft : a == ENG_CONV_WINOGRAD || a == ENG_CONV_WINOGRAD4 ? wino : NULL;
    n->prof = NULL;
    for (int dir = 0; dir < 2; dir++)
        for (int st = 0; st < CONV_STAGES; st++) {
            n->prof_stage[dir][st] = -1;
            if (a == ENG_CONV_ONEDNN) names = dnn[dir];
            if (!names || !names[st]) continue;
            char name[48];
            snprintf(name, sizeof name, "%s.%s.%s", eng_conv_algo_name(a), names[st], dir ? "bwd" : "fwd");
            n->prof_stage[dir][st] = prof_register(prof, name, layer, PROF_OP);
            if (n->prof_stage[dir][st] < 0) return -1;
        }
    if (names) n->prof = prof;
    return 0;
}
