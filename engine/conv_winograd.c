/* conv_winograd.c — conv2d by Winograd's minimal filtering algorithm F(m x m, 3x3) (Lavin &
 * Gray 2016), m = 2 (model.conv_algo = winograd) or 4 (winograd4): 3x3 kernels, stride 1,
 * any padding. Forward and backward; the channel sums are alpha² GEMMs through eng_sgemm.
 *
 * With alpha = m + 2, the padded input is cut into alpha x alpha tiles at steps of m (tiles
 * overlap by 2); per tile d and channel c, V = Bᵀ d B; per filter g, U = G g Gᵀ; then at each
 * of the alpha² positions xi, M[xi] = U[xi] (F x C) · V[xi] (C x S·T) — one GEMM, the
 * channel sum included — and per output tile Y = Aᵀ M A (m x m outputs). The transforms
 * are exact in real arithmetic, so the backward is the adjoint of the same linear steps:
 * dM = A dY Aᵀ, dU[xi] = dM[xi] · V[xi]ᵀ, dV[xi] = U[xi]ᵀ · dM[xi], dx tile += B dV Bᵀ
 * (overlapping tiles add), dw = Gᵀ dU G. F(4x4) does 4x fewer multiplications than direct
 * convolution against F(2x2)'s 2.25x, but its matrices hold 4, 5 and 1/6: its float error
 * is ~10x larger (bounds in docs/convolution.md, tested in tests/engine/conv.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#include "conv_internal.h"

#include <string.h>

/* Bᵀ (alpha x alpha), G (alpha x 3), Aᵀ (m x alpha), row-major (Lavin & Gray, section 4). */
static const float BT2[16] = { 1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1 };
static const float G2[12] = { 1, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f, 0.5f, 0, 0, 1 };
static const float AT2[8] = { 1, 1, 1, 0, 0, 1, -1, -1 };
static const float BT4[36] = { 4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                               0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1 };
static const float G4[18] = { 1.0f / 4, 0, 0, -1.0f / 6, -1.0f / 6, -1.0f / 6, -1.0f / 6, 1.0f / 6, -1.0f / 6,
                              1.0f / 24, 1.0f / 12, 1.0f / 6, 1.0f / 24, -1.0f / 12, 1.0f / 6, 0, 0, 1 };
static const float AT4[24] = { 1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1 };

#define WA_MAX 6 /* the largest alpha */
/* Tiles (or filter pairs) transformed together: every transform step is a vector operation
 * over WL lanes, one tile per lane, and the transformed tiles of a channel are stored
 * contiguously, as the GEMMs read them. */
#define WL 64

/* o[i·os + l] = sum over j of E(i, j) v[j·vs + l] for every lane l, i < R, j < Q, with E
 * the R x Q matrix t (tr = 0) or the transpose of the Q x R matrix t (tr = 1). Always
 * inlined with constant tables and sizes: the i and j loops unroll, so the zero and unit
 * coefficients fold away and each output is its few vector adds, as hand-written
 * transforms would be. */
static inline __attribute__((always_inline)) void wl_1d(const float *t, int tr, int R, int Q, const float *v, int vs,
                                                        float *o, int os)
{
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        float *restrict oi = o + i * os;
        int first = 1;
#pragma GCC unroll 6
        for (int j = 0; j < Q; j++) {
            float e = tr ? t[j * R + i] : t[i * Q + j];
            if (e == 0.0f) continue;
            const float *restrict vj = v + j * vs;
            if (first && e == 1.0f) for (int l = 0; l < WL; l++) oi[l] = vj[l];
            else if (first && e == -1.0f) for (int l = 0; l < WL; l++) oi[l] = -vj[l];
            else if (first) for (int l = 0; l < WL; l++) oi[l] = e * vj[l];
            else if (e == 1.0f) for (int l = 0; l < WL; l++) oi[l] += vj[l];
            else if (e == -1.0f) for (int l = 0; l < WL; l++) oi[l] -= vj[l];
            else for (int l = 0; l < WL; l++) oi[l] += e * vj[l];
            first = 0;
        }
    }
}

/* out = E · in · Eᵀ lane by lane: in is Q x Q, out R x R, element (r, c) at (r·n + c)·WL. */
static inline __attribute__((always_inline)) void wl_2d(const float *t, int tr, int R, int Q, const float *in, float *out)
{
    float tmp[WA_MAX * WA_MAX * WL];
    for (int k = 0; k < Q; k++) wl_1d(t, tr, R, Q, in + k * WL, Q * WL, tmp + k * WL, Q * WL);
    for (int i = 0; i < R; i++) wl_1d(t, tr, R, Q, tmp + i * Q * WL, WL, out + i * R * WL, WL);
}

/* n <= WL floats from src to dst: a whole vector of lanes as a fixed-size copy (vector
 * moves; a variable-length memcpy was inlined as rep movsq, 20% of the output transform). */
static inline __attribute__((always_inline)) void lanes_copy(float *restrict dst, const float *restrict src, int n)
{
    if (n == WL) memcpy(dst, src, WL * sizeof(float));
    else memcpy(dst, src, (size_t)n * sizeof(float));
}

/* The geometry of S rows: th x tw tiles per image (T), the padded input planes HT x WT
 * (the image at row and column pad, zeros around it, room for every tile), and the
 * workspace parts in floats: U alpha²·F·C, V alpha²·C·S·T, M alpha²·F·S·T, the S rows'
 * padded planes. col = [U | V | M | xp]; dcol = [dU | dM | dV | dxp]. */
typedef struct { conv_dims d; int m, a, th, tw, T, HT, WT, S; size_t N, vp, mp, U, V, M, X; } wino_geo;

static wino_geo wino_geo_of(const eng_node *n, int m, int S)
{
    wino_geo g;
    g.d = conv_get(n);
    g.m = m;
    g.a = m + 2;
    g.th = (g.d.OH + m - 1) / m;
    g.tw = (g.d.OW + m - 1) / m;
    g.T = g.th * g.tw;
    g.HT = g.th * m + 2;
    g.WT = g.tw * m + 2;
    g.S = S;
    g.N = (size_t)S * g.T;
    size_t a2 = (size_t)g.a * g.a;
    g.U = conv_round16(a2 * g.d.F * g.d.C);
    /* one point's matrix after another, 64 bytes apart more than their size: strides that
     * are multiples of 4 KB would put the alpha² rows a transform reads or writes at once
     * into the same L1 cache set (3x slower transforms on a 28x28 layer) */
    g.vp = conv_round16((size_t)g.d.C * g.N) + 16;
    g.mp = conv_round16((size_t)g.d.F * g.N) + 16;
    g.V = a2 * g.vp;
    g.M = a2 * g.mp;
    g.X = conv_round16((size_t)S * g.d.C * g.HT * g.WT);
    return g;
}

size_t eng_wino_ws_floats(const eng_node *n, int m, int chunk)
{
    wino_geo g = wino_geo_of(n, m, chunk);
    return g.U + g.V + g.M + g.X;
}

/* U[xi][f·C + c] = (G w[f][c] Gᵀ)[xi] (dir 0), or dw[f][c] = Gᵀ dU[.][f·C + c] G (dir 1);
 * the F·C filter pairs are the lanes. */
static inline __attribute__((always_inline)) void wino_filter(const wino_geo *g, float *w, float *U, int dir, int m)
{
    const float *G = m == 2 ? G2 : G4;
    int a = m + 2, FC = g->d.F * g->d.C;
    float D[WA_MAX * WA_MAX * WL] = { 0 }, O[WA_MAX * WA_MAX * WL];
    for (int p0 = 0; p0 < FC; p0 += WL) {
        int L = FC - p0 < WL ? FC - p0 : WL;
        if (dir == 0) {
            for (int l = 0; l < L; l++)
                for (int k = 0; k < 9; k++) D[k * WL + l] = w[(size_t)(p0 + l) * 9 + k];
            wl_2d(G, 0, a, 3, D, O);
            for (int xi = 0; xi < a * a; xi++) lanes_copy(U + (size_t)xi * FC + p0, O + xi * WL, L);
        } else {
            for (int xi = 0; xi < a * a; xi++) lanes_copy(D + xi * WL, U + (size_t)xi * FC + p0, L);
            wl_2d(G, 1, 3, a, D, O);
            for (int l = 0; l < L; l++)
                for (int k = 0; k < 9; k++) w[(size_t)(p0 + l) * 9 + k] = O[k * WL + l];
        }
    }
}


/* The S rows of images (C x H x W each, row stride in_size) into the padded planes xp
 * (to_planes = 1; S·C planes, the rest of them zero), or the image part of xp back into
 * the rows (0). */
static void planes_copy(const wino_geo *g, float *img, size_t in_size, float *xp, int to_planes)
{
    size_t plane = (size_t)g->HT * g->WT, nb = (size_t)g->d.W * sizeof(float);
    if (to_planes) memset(xp, 0, (size_t)g->S * g->d.C * plane * sizeof(float));
    for (int s = 0; s < g->S; s++)
        for (int c = 0; c < g->d.C; c++)
            for (int h = 0; h < g->d.H; h++) {
                float *p = xp + ((size_t)s * g->d.C + c) * plane + (size_t)(h + g->d.pad) * g->WT + g->d.pad;
                float *q = img + (size_t)s * in_size + ((size_t)c * g->d.H + h) * g->d.W;
                if (to_planes) memcpy(p, q, nb);
                else memcpy(q, p, nb);
            }
}

/* The lanes are the tiles n = s·T + t of all S rows, WL at a time (a small image fills
 * them from several rows). Tile n's top-left in the padded plane of channel c. */
static inline float *tile_of(const wino_geo *g, float *xp, int c, size_t n)
{
    size_t s = n / (size_t)g->T;
    int t = (int)(n % (size_t)g->T);
    return xp + (s * g->d.C + c) * (size_t)g->HT * g->WT + (size_t)(t / g->tw) * g->m * g->WT + (size_t)(t % g->tw) * g->m;
}

/* V[xi][c][n] from the S rows at x, through the padded planes xp. */
static inline __attribute__((always_inline)) void wino_input(const wino_geo *g, const float *x, size_t in_size,
                                                             float *xp, float *V, int m)
{
    const float *BT = m == 2 ? BT2 : BT4;
    int a = m + 2;
    float D[WA_MAX * WA_MAX * WL] = { 0 }, O[WA_MAX * WA_MAX * WL];
    planes_copy(g, (float *)x, in_size, xp, 1); /* x is only read */
    for (int c = 0; c < g->d.C; c++)
        for (size_t n0 = 0; n0 < g->N; n0 += WL) {
            int L = g->N - n0 < WL ? (int)(g->N - n0) : WL;
            for (int l = 0; l < L; l++) {
                const float *b = tile_of(g, xp, c, n0 + l);
                for (int u = 0; u < a; u++)
                    for (int v = 0; v < a; v++) D[(u * a + v) * WL + l] = b[(size_t)u * g->WT + v];
            }
            wl_2d(BT, 0, a, a, D, O);
            for (int xi = 0; xi < a * a; xi++) lanes_copy(V + xi * g->vp + (size_t)c * g->N + n0, O + xi * WL, L);
        }
}

/* Forward (dir 0): y tiles = Aᵀ M A, the outputs inside OH x OW kept. Backward (dir 1):
 * M = A dY Aᵀ per tile of dy (zeros past OH x OW). y and dy are S rows of F x OH x OW. */
static inline __attribute__((always_inline)) void wino_output(const wino_geo *g, float *y, size_t out_size, float *M,
                                                              int dir, int m)
{
    const float *AT = m == 2 ? AT2 : AT4;
    int a = m + 2, OH = g->d.OH, OW = g->d.OW;
    float D[WA_MAX * WA_MAX * WL] = { 0 }, O[WA_MAX * WA_MAX * WL];
    for (int f = 0; f < g->d.F; f++)
        for (size_t n0 = 0; n0 < g->N; n0 += WL) {
            int L = g->N - n0 < WL ? (int)(g->N - n0) : WL;
            float *mp = M + (size_t)f * g->N + n0;
            if (dir == 0) {
                for (int xi = 0; xi < a * a; xi++) lanes_copy(D + xi * WL, mp + xi * g->mp, L);
                wl_2d(AT, 0, m, a, D, O);
            }
            for (int l = 0; l < L; l++) {
                size_t s = (n0 + l) / (size_t)g->T;
                int t = (int)((n0 + l) % (size_t)g->T), i = t / g->tw * m, j = t % g->tw * m;
                int hi = OH - i < m ? OH - i : m, wi = OW - j < m ? OW - j : m;
                float *yt = y + s * out_size + ((size_t)f * OH + i) * OW + j;
                if (dir == 0) {
                    for (int u = 0; u < hi; u++)
                        for (int v = 0; v < wi; v++) yt[(size_t)u * OW + v] = O[(u * m + v) * WL + l];
                    continue;
                }
                for (int u = 0; u < m; u++)
                    for (int v = 0; v < m; v++) D[(u * m + v) * WL + l] = u < hi && v < wi ? yt[(size_t)u * OW + v] : 0.0f;
            }
            if (dir == 0) continue;
            wl_2d(AT, 1, a, m, D, O);
            for (int xi = 0; xi < a * a; xi++) lanes_copy(mp + xi * g->mp, O + xi * WL, L);
        }
}

/* dx rows (S of C x H x W) from dV: per tile B dV Bᵀ added into the padded planes dxp, the
 * image part then copied out. */
static inline __attribute__((always_inline)) void wino_input_adj(const wino_geo *g, const float *dV, float *dxp,
                                                                 float *dx, size_t in_size, int m)
{
    const float *BT = m == 2 ? BT2 : BT4;
    int a = m + 2;
    float D[WA_MAX * WA_MAX * WL] = { 0 }, O[WA_MAX * WA_MAX * WL];
    memset(dxp, 0, (size_t)g->S * g->d.C * g->HT * g->WT * sizeof(float));
    for (int c = 0; c < g->d.C; c++)
        for (size_t n0 = 0; n0 < g->N; n0 += WL) {
            int L = g->N - n0 < WL ? (int)(g->N - n0) : WL;
            for (int xi = 0; xi < a * a; xi++) lanes_copy(D + xi * WL, dV + xi * g->vp + (size_t)c * g->N + n0, L);
            wl_2d(BT, 1, a, a, D, O);
            for (int l = 0; l < L; l++) {
                float *d = tile_of(g, dxp, c, n0 + l);
                for (int u = 0; u < a; u++)
                    for (int v = 0; v < a; v++) d[(size_t)u * g->WT + v] += O[(u * a + v) * WL + l];
            }
        }
    planes_copy(g, dx, in_size, dxp, 0);
}

/* The four stages with m a constant (F(2x2) and F(4x4)), each compiled per instruction-set
 * path (engine/isa.c; the transforms are lane-wise, so every path rounds alike). */
ENG_ISA_BODY wino_filter_k_body(const wino_geo *g, float *w, float *U, int dir)
{
    if (g->m == 2) wino_filter(g, w, U, dir, 2);
    else wino_filter(g, w, U, dir, 4);
}
ENG_ISA_KERNEL(wino_filter_k, (const wino_geo *g, float *w, float *U, int dir), (g, w, U, dir))

ENG_ISA_BODY wino_input_k_body(const wino_geo *g, const float *x, size_t in_size, float *xp, float *V)
{
    if (g->m == 2) wino_input(g, x, in_size, xp, V, 2);
    else wino_input(g, x, in_size, xp, V, 4);
}
ENG_ISA_KERNEL(wino_input_k, (const wino_geo *g, const float *x, size_t in_size, float *xp, float *V),
               (g, x, in_size, xp, V))

ENG_ISA_BODY wino_output_k_body(const wino_geo *g, float *y, size_t out_size, float *M, int dir)
{
    if (g->m == 2) wino_output(g, y, out_size, M, dir, 2);
    else wino_output(g, y, out_size, M, dir, 4);
}
ENG_ISA_KERNEL(wino_output_k, (const wino_geo *g, float *y, size_t out_size, float *M, int dir),
               (g, y, out_size, M, dir))

ENG_ISA_BODY wino_input_adj_k_body(const wino_geo *g, const float *dV, float *dxp, float *dx, size_t in_size)
{
    if (g->m == 2) wino_input_adj(g, dV, dxp, dx, in_size, 2);
    else wino_input_adj(g, dV, dxp, dx, in_size, 4);
}
ENG_ISA_KERNEL(wino_input_adj_k, (const wino_geo *g, const float *dV, float *dxp, float *dx, size_t in_size),
               (g, dV, dxp, dx, in_size))

static void stage_filter(const wino_geo *g, float *w, float *U, int dir)
{
    wino_filter_k_isa[eng_isa_current()](g, w, U, dir);
}

static void stage_input(const wino_geo *g, const float *x, size_t in_size, float *xp, float *V)
{
    wino_input_k_isa[eng_isa_current()](g, x, in_size, xp, V);
}

static void stage_output(const wino_geo *g, float *y, size_t out_size, float *M, int dir)
{
    wino_output_k_isa[eng_isa_current()](g, y, out_size, M, dir);
}

static void stage_input_adj(const wino_geo *g, const float *dV, float *dxp, float *dx, size_t in_size)
{
    wino_input_adj_k_isa[eng_isa_current()](g, dV, dxp, dx, in_size);
}

void eng_wino_fwd(eng_node *n, int rows, int m)
{
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        wino_geo g = wino_geo_of(n, m, S);
        float *U = n->col, *V = U + g.U, *M = V + g.V, *xp = M + g.M;
        int a2 = g.a * g.a, F = g.d.F, C = g.d.C, N = (int)g.N;
        if (r0 == 0) {
            CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_FILTER);
            stage_filter(&g, n->w, U, 0);
            CONV_STAGE_END(n, ENG_FWD, CONV_ST_FILTER);
        }
        CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_INPUT);
        stage_input(&g, n->x + (size_t)r0 * n->in_size, n->in_size, xp, V);
        CONV_STAGE_END(n, ENG_FWD, CONV_ST_INPUT);
        CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_GEMM);
        eng_conv_point_gemms(a2, 0, 0, F, N, C, U, C, (size_t)F * C, V, N, g.vp, 0.0f, M, N, g.mp);
        CONV_STAGE_END(n, ENG_FWD, CONV_ST_GEMM);
        CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_OUTPUT);
        stage_output(&g, n->y + (size_t)r0 * n->out_size, n->out_size, M, 0);
        CONV_STAGE_END(n, ENG_FWD, CONV_ST_OUTPUT);
    }
}

/* V is the forward's when the node keeps its workspace and the batch was one chunk (as
 * im2col's col); U is recomputed (F·C tiles: cheap next to the rest). */
void eng_wino_bwd(eng_node *n, int rows, int m)
{
    wino_geo g0 = wino_geo_of(n, m, n->chunk);
    float *U = n->col, *dU = n->dcol;
    CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_FILTER);
    if (n->dx) stage_filter(&g0, n->w, U, 0);
    CONV_STAGE_END(n, ENG_BWD, CONV_ST_FILTER);
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        wino_geo g = wino_geo_of(n, m, S);
        float *V = U + g.U, *xp = V + g.V + g.M, *dM = dU + g.U, *dV = dM + g.M, *dxp = dV + g.V;
        int a2 = g.a * g.a, F = g.d.F, C = g.d.C, N = (int)g.N;
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_INPUT);
        if (!(n->col_kept && r0 == 0 && S == rows)) stage_input(&g, n->x + (size_t)r0 * n->in_size, n->in_size, xp, V);
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_INPUT);
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_OUTPUT);
        stage_output(&g, n->dy + (size_t)r0 * n->out_size, n->out_size, dM, 1);
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_OUTPUT);
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_GEMM);
        eng_conv_point_gemms(a2, 0, 1, F, C, N, dM, N, g.mp, V, N, g.vp, r0 == 0 ? 0.0f : 1.0f, dU,
                             C, (size_t)F * C);
        if (n->dx)
            eng_conv_point_gemms(a2, 1, 0, C, N, F, U, C, (size_t)F * C, dM, N, g.mp, 0.0f, dV, N, g.vp);
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_GEMM);
        if (!n->dx) continue;
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_INPUT);
        stage_input_adj(&g, dV, dxp, n->dx + (size_t)r0 * n->in_size, n->in_size);
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_INPUT);
    }
    CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_FILTER);
    stage_filter(&g0, n->dw, dU, 1);
    CONV_STAGE_END(n, ENG_BWD, CONV_ST_FILTER);
}

/* Counts per call (B rows, floats x4): forward reads x, writes + reads the padded planes
 * and V, reads w and writes + reads U, writes + reads M, writes y; backward the same passes
 * for V (when rebuilt) and U, reads dy and writes + reads dM, writes + reads dU, dw, and
 * for dx dV, the padded planes and dx. */
uint64_t eng_wino_bytes(const eng_node *n, int m, int rows, eng_dir dir)
{
    wino_geo g = wino_geo_of(n, m, rows);
    uint64_t B = (uint64_t)rows, x = B * n->in_size, yo = B * n->out_size, w = (uint64_t)g.d.F * g.d.CKK;
    uint64_t xp = B * g.d.C * (uint64_t)g.HT * g.WT, U = 2 * (uint64_t)g.U, V = 2 * (uint64_t)g.V, M = 2 * (uint64_t)g.M;
    if (dir == ENG_FWD) return 4 * (x + 2 * xp + V + w + U + M + yo);
    uint64_t e = yo + M + V + w + U;
    if (!(n->col_kept && rows <= n->chunk)) e += x + 2 * xp + V;
    if (n->dx) e += w + U + V + 2 * xp + x;
    return 4 * e;
}

int eng_wino_gemms(const eng_node *n, int m, int rows, eng_gemm_shape *g)
{
    wino_geo w = wino_geo_of(n, m, n->chunk < rows ? n->chunk : rows);
    int F = w.d.F, C = w.d.C, N = (int)w.N;
    double calls = (double)w.a * w.a * ((rows + n->chunk - 1) / n->chunk);
    g[0] = (eng_gemm_shape){ 0, 0, F, N, C, calls };
    g[1] = (eng_gemm_shape){ 0, 1, F, C, N, calls };
    g[2] = (eng_gemm_shape){ 1, 0, C, N, F, calls };
    return n->dx ? 3 : 2;
}

uint64_t eng_wino_mults(const eng_node *n, int m)
{
    wino_geo g = wino_geo_of(n, m, 1);
    return (uint64_t)g.T * g.a * g.a * g.d.C * g.d.F;
}
