/* conv.c — the conv2d op: zero padding and stride, NCHW per row, by the algorithm
 * n->conv_algo names (model.conv_algo; docs/engine.md, "How conv2d is computed"):
 *  - im2col + one sgemm per row (any stride);
 *  - direct (stride 1 only): conv_direct.c, vectorised loops over the padded input, no GEMM;
 *  - winograd / winograd4 (3x3, stride 1): conv_winograd.c; fft (stride 1): conv_fft.c.
 * Here: im2col, the dispatch, the choice (auto) and the fallbacks. All compute the
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
    case ENG_CONV_DIRECT: bwd ? eng_direct_bwd(n, rows) : eng_direct_fwd(n, rows); break;
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
    col = max_sz(col, eng_direct_ws_floats(n, chunk));
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

uint64_t eng_conv_bytes(const eng_node *n, int rows, eng_dir dir)
{
    switch (algo_of(n)) {
    case ENG_CONV_DIRECT: return eng_direct_bytes(n, rows, dir);
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

int eng_conv_prepare_gemms(eng_node *n, int rows)
{
    static const eng_conv_algo gemm_algos[] = { ENG_CONV_IM2COL, ENG_CONV_WINOGRAD, ENG_CONV_WINOGRAD4, ENG_CONV_FFT };
    enum { CAP = 2 * (int)(sizeof gemm_algos / sizeof gemm_algos[0]) * ENG_OP_MAX_GEMMS };
    eng_gemm_shape g[CAP];
    eng_conv_algo was = n->conv_algo;
    int ng = 0;
    for (size_t i = 0; i < sizeof gemm_algos / sizeof gemm_algos[0]; i++) {
        if (*eng_conv_fallback(n, gemm_algos[i])) continue;
        n->conv_algo = gemm_algos[i];
        ng += eng_node_gemm_shapes(n, rows, g + ng, CAP - ng);
    }
    n->conv_algo = was;
    return eng_gemm_prepare_add(g, ng);
}

/* The candidates of auto, fastest kept: im2col and onednn always; with stride 1 direct,
 * Winograd F(2x2) and F(4x4) on 3x3 kernels and FFT on kernels of 5 and more (below that
 * it never wins: the transforms cost more than the products save). The pick is cached per
 * machine, kernel path, GEMM threads, layer shape and rows (conv-choices in the cache
 * directory; the threads are BLAS's, set before the model is built), as the GEMM choice
 * is: the same model on the same machine runs the same algorithm, so its runs repeat bit
 * for bit and a resumed or data-parallel run computes as the first one did. */
static int conv_choose(eng_node *n, int rows, int reps)
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
                return ENG_OK;
            }
    /* the GEMM classes of every candidate prepared first, so that each is timed on the
     * backends a run would give it (an unprepared class runs on OpenBLAS, unchosen) */
    int rc = eng_conv_prepare_gemms(n, rows);
    if (rc) return rc;
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
    return ENG_OK;
}

int eng_conv_select(eng_node *n, eng_conv_algo want, int rows, int reps)
{
    if (want == ENG_CONV_AUTO) {
        int rc = conv_choose(n, rows, reps);
        if (rc) return rc;
    } else n->conv_algo = *eng_conv_fallback(n, want) ? ENG_CONV_IM2COL : want;
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
    /* oneDNN: per direction, the reorders and each primitive (conv_onednn.c); direct has
     * the same stages (its padding copies, its forward or dx pass, its dW pass) */
    static const char *const dnn[2][CONV_STAGES] = { { "reorder", "forward", NULL, NULL },
                                                     { "reorder", "backward_data", "backward_weights", NULL } };
    eng_conv_algo a = algo_of(n);
    const char *const *names = a == ENG_CONV_FFT ? fft : a == ENG_CONV_WINOGRAD || a == ENG_CONV_WINOGRAD4 ? wino : NULL;
    n->prof = NULL;
    for (int dir = 0; dir < 2; dir++)
        for (int st = 0; st < CONV_STAGES; st++) {
            n->prof_stage[dir][st] = -1;
            if (a == ENG_CONV_ONEDNN || a == ENG_CONV_DIRECT) names = dnn[dir];
            if (!names || !names[st]) continue;
            char name[48];
            snprintf(name, sizeof name, "%s.%s.%s", eng_conv_algo_name(a), names[st], dir ? "bwd" : "fwd");
            n->prof_stage[dir][st] = prof_register(prof, name, layer, PROF_OP);
            if (n->prof_stage[dir][st] < 0) return -1;
        }
    if (names) n->prof = prof;
    return 0;
}
