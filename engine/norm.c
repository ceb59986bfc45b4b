/* norm.c — batch normalization (the batchnorm op): per channel of a C x H x W activation
 * (statistics over the rows and the H x W positions) or per feature of a flat one, with a
 * learned scale gamma (the layer's W) and shift beta (its b). Training normalises with
 * the batch's statistics and updates running ones; evaluation uses the running ones. */
#include "internal.h"
#include "lanes.h"

#include <math.h>

#define U64(x) ((uint64_t)(x))

int eng_bn_channels(const eng_node *n)
{
    /* a flat activation (after dense or flatten) is 1 x 1 x N: one channel per feature */
    return n->in_shape[0] == 1 && n->in_shape[1] == 1 ? n->in_shape[2] : n->in_shape[0];
}

/* Channel c of row r starts at x + r·in_size + c·hw; with hw == 1 that is feature c. */
typedef struct { int C; size_t hw, cnt; } bn_dims;

static bn_dims bn_get(const eng_node *n, int rows)
{
    bn_dims d = { eng_bn_channels(n), 0, 0 };
    d.hw = n->in_size / (size_t)d.C;
    d.cnt = (size_t)rows * d.hw;
    return d;
}

/* Channel c's plane in row r (x or y/dy alike: in_size == out_size); with hw == 1 the
 * planes are single features. */
static const float *bn_plane(const float *base, const eng_node *n, bn_dims d, int r, int c)
{
    return base + (size_t)r * n->in_size + (size_t)c * d.hw;
}

/* Over one plane, with the data shifted by K: *ms = mean of x - K and *m2 = sum of
 * ((x - K) - *ms)^2, in float lanes (the plane is in L1 for the second pass). */
static void bn_plane_moments(const float *restrict x, size_t hw, float K, float *ms, float *m2)
{
    eng_v4 vk = v4_splat(K), a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0, e;
    float t[ENG_LANES];
    size_t k = 0;
#define BN_SUM_Q(q, o) a##q += v4_load(x + (o)) - vk;
    for (; k + ENG_LANES <= hw; k += ENG_LANES) { LANES_BLOCK(BN_SUM_Q, k) }
    for (size_t j = 0; k + j < hw; j++) t[j] = x[k + j] - K;
    float m = lanes_fold(a0, a1, a2, a3, t, hw - k) / (float)hw;
    eng_v4 vm = v4_splat(m);
    a0 = a1 = a2 = a3 = (eng_v4){ 0 };
#define BN_SQ_Q(q, o) e = (v4_load(x + (o)) - vk) - vm; a##q += e * e;
    for (k = 0; k + ENG_LANES <= hw; k += ENG_LANES) { LANES_BLOCK(BN_SQ_Q, k) }
    for (size_t j = 0; k + j < hw; j++) t[j] = ((x[k + j] - K) - m) * ((x[k + j] - K) - m);
    *ms = m;
    *m2 = lanes_fold(a0, a1, a2, a3, t, hw - k);
#undef BN_SUM_Q
#undef BN_SQ_Q
}

/* Mean and population variance of channel c over the rows. Planes of at least ENG_LANES
 * floats: one pass over memory; each plane (L1-resident) gives its own mean and squared
 * deviations in float lanes, merged into the channel's in double (Chan et al.'s pairwise
 * update), so no sum of squares cancels. The data are shifted by the channel's first value
 * first, so that a mean large against the spread does not cost the float sums their
 * precision. Smaller planes (flat features): a pass for the mean and one for the
 * deviations around it, in double. */
static void bn_moments(const eng_node *n, bn_dims d, int rows, int c, double *mean, double *var)
{
    double mu = 0.0, m2 = 0.0;
    if (d.hw >= ENG_LANES) {
        float K = bn_plane(n->x, n, d, 0, c)[0];
        for (int r = 0; r < rows; r++) {
            float mp, q;
            bn_plane_moments(bn_plane(n->x, n, d, r, c), d.hw, K, &mp, &q);
            double delta = (double)mp - mu;
            /* merging r planes with one: the new plane's share of the count is 1/(r+1) */
            mu += delta / (double)(r + 1);
            m2 += (double)q + delta * delta * (double)d.hw * (double)r / (double)(r + 1);
        }
        mu += K;
    } else {
        for (int r = 0; r < rows; r++) mu += lanes_sum(bn_plane(n->x, n, d, r, c), d.hw);
        mu /= (double)d.cnt;
        for (int r = 0; r < rows; r++) {
            const float *x = bn_plane(n->x, n, d, r, c);
            for (size_t k = 0; k < d.hw; k++) { double e = x[k] - mu; m2 += e * e; }
        }
    }
    *mean = mu;
    *var = m2 / (double)d.cnt;
}

/* y = a·((x - mhi) - mlo) + b over one plane. The mean is split into its float value mhi and
 * the rest mlo: x - mhi is exact near the mean, and with a = gamma/std large (a channel
 * whose spread is tiny against its mean) a mean rounded to float alone would be off by
 * a·ulp(mean)/2. Folding the mean into the shift instead (a·x + b') cancels there too. */
static void bn_plane_y(const float *restrict x, float *restrict y, size_t hw, float mhi, float mlo, float a, float b)
{
    eng_v4 vh = v4_splat(mhi), vl = v4_splat(mlo), va = v4_splat(a), vb = v4_splat(b);
    size_t k = 0;
    for (; k + 4 <= hw; k += 4) v4_store(y + k, va * ((v4_load(x + k) - vh) - vl) + vb);
    for (; k < hw; k++) y[k] = a * ((x[k] - mhi) - mlo) + b;
}

/* y = gamma (x - mean) / sqrt(var + eps) + beta, per channel. save gets the mean and
 * 1/sqrt(var + eps) used (the batch's in training, the running ones in evaluation). */
static void bn_fwd_channels(eng_node *n, int rows, int c0, int c1)
{
    bn_dims d = bn_get(n, rows);
    float *rmean = n->stats, *rvar = n->stats + d.C;
    for (int c = c0; c < c1; c++) {
        double mean, var;
        if (n->training) {
            bn_moments(n, d, rows, c, &mean, &var);
            /* the running variance is the unbiased estimate (PyTorch's choice) */
            double unb = d.cnt > 1 ? var * (double)d.cnt / (double)(d.cnt - 1) : var;
            rmean[c] = (1.0f - ENG_BN_MOMENTUM) * rmean[c] + ENG_BN_MOMENTUM * (float)mean;
            rvar[c] = (1.0f - ENG_BN_MOMENTUM) * rvar[c] + ENG_BN_MOMENTUM * (float)unb;
        } else {
            mean = rmean[c];
            var = rvar[c];
        }
        float inv = (float)(1.0 / sqrt(var + (double)ENG_BN_EPS));
        n->save[c] = (float)mean;
        n->save[d.C + c] = inv;
        float mhi = (float)mean, mlo = (float)(mean - (double)mhi);
        for (int r = 0; r < rows; r++)
            bn_plane_y(bn_plane(n->x, n, d, r, c), n->y + (size_t)r * n->out_size + (size_t)c * d.hw, d.hw, mhi, mlo,
                       n->w[c] * inv, n->b[c]);
    }
}

/* Over one plane: *sdy += sum dy, *sdxm += sum dy·(x - mean), float lanes within the
 * plane and double across planes. */
static void bn_plane_sums(const float *restrict x, const float *restrict dy, size_t hw, float mean, double *sdy,
                          double *sdxm)
{
    eng_v4 vm = v4_splat(mean), a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0, g;
    float ta[ENG_LANES], tb[ENG_LANES];
    size_t k = 0;
#define BN_DY_Q(q, o) g = v4_load(dy + (o)); a##q += g; b##q += g * (v4_load(x + (o)) - vm);
    for (; k + ENG_LANES <= hw; k += ENG_LANES) { LANES_BLOCK(BN_DY_Q, k) }
    for (size_t j = 0; k + j < hw; j++) { ta[j] = dy[k + j]; tb[j] = dy[k + j] * (x[k + j] - mean); }
    *sdy += lanes_fold(a0, a1, a2, a3, ta, hw - k);
    *sdxm += lanes_fold(b0, b1, b2, b3, tb, hw - k);
#undef BN_DY_Q
}

/* dx = k1·(dy - mdy - (x - mean)·g) over one plane */
static void bn_plane_dx(const float *restrict x, const float *restrict dy, float *restrict dx, size_t hw, float k1,
                        float mdy, float mean, float g)
{
    eng_v4 v1 = v4_splat(k1), vd = v4_splat(mdy), vm = v4_splat(mean), vg = v4_splat(g);
    size_t k = 0;
    for (; k + 4 <= hw; k += 4) v4_store(dx + k, v1 * (v4_load(dy + k) - vd - (v4_load(x + k) - vm) * vg));
    for (; k < hw; k++) dx[k] = k1 * (dy[k] - mdy - (x[k] - mean) * g);
}

/* With xhat = (x - mean)·inv: dbeta = sum dy, dgamma = sum dy·xhat, and in training (the
 * statistics depend on x) dx = gamma·inv·(dy - dbeta/N - xhat·dgamma/N); in evaluation
 * (constants) dx = gamma·inv·dy. N = rows·H·W. Two passes per channel: the sums, then dx. */
static void bn_bwd_channels(eng_node *n, int rows, int c0, int c1)
{
    bn_dims d = bn_get(n, rows);
    for (int c = c0; c < c1; c++) {
        float mean = n->save[c], inv = n->save[d.C + c];
        double sdy = 0.0, sdxm = 0.0;
        for (int r = 0; r < rows; r++)
            bn_plane_sums(bn_plane(n->x, n, d, r, c), bn_plane(n->dy, n, d, r, c), d.hw, mean, &sdy, &sdxm);
        double sdyx = sdxm * inv;
        n->db[c] = (float)sdy;
        n->dw[c] = (float)sdyx;
        if (!n->dx) continue;
        float k1 = n->w[c] * inv;
        float mdy = n->training ? (float)(sdy / (double)d.cnt) : 0.0f;
        float g = n->training ? (float)(sdyx / (double)d.cnt) * inv : 0.0f;
        for (int r = 0; r < rows; r++)
            bn_plane_dx(bn_plane(n->x, n, d, r, c), bn_plane(n->dy, n, d, r, c),
                        n->dx + (size_t)r * n->in_size + (size_t)c * d.hw, d.hw, k1, mdy, mean, g);
    }
}

/* Channels are independent (each its own statistics, running values, gradients): at T
 * pool threads a pass splits them into T slabs of whole channels, so every split gives the
 * same bits; fewer slabs where one would hold under ENG_POOL_GRAIN floats of the batch. */
typedef struct {
    eng_node *n;
    int rows, bwd;
} bn_job;

static void bn_slab(void *p, int s, int nslab)
{
    const bn_job *j = p;
    int C = eng_bn_channels(j->n), c0 = (int)((long)C * s / nslab), c1 = (int)((long)C * (s + 1) / nslab);
    (j->bwd ? bn_bwd_channels : bn_fwd_channels)(j->n, j->rows, c0, c1);
}

static void bn_pass(eng_node *n, int rows, int bwd)
{
    bn_job j = { n, rows, bwd };
    int k = eng_pool_threads(), C = eng_bn_channels(n);
    size_t e = (size_t)rows * n->in_size;
    if (k > C) k = C;
    while (k > 1 && e / (size_t)k < ENG_POOL_GRAIN) k--;
    if (k < 2 || !eng_pool_run(k, bn_slab, &j)) bn_slab(&j, 0, 1);
}

void eng_bn_fwd(eng_node *n, int rows) { bn_pass(n, rows, 0); }
void eng_bn_bwd(eng_node *n, int rows) { bn_pass(n, rows, 1); }

/* Per element: training forward 10 (shift, sum; shift, subtract, square, add; subtract
 * twice, scale, shift), evaluation 4; backward 4 for dgamma and dbeta (sum of dy; subtract, multiply, add) and 5
 * more for dx (evaluation runs the same loop with zero corrections). Per-channel terms are
 * left out. */
uint64_t eng_bn_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->in_size;
    if (dir == ENG_FWD) return e * (n->training ? 10 : 4);
    return e * (4 + (n->dx ? 5 : 0));
}

/* Passes over rows x size floats: forward in training reads x for the statistics (once
 * when the planes take the one-pass merge, twice for planes under ENG_LANES floats) and
 * once more to write y; backward reads x and dy for the sums and again (with dx written)
 * for dx. */
uint64_t eng_bn_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = 4 * U64(rows) * n->in_size;
    size_t hw = n->in_size / (size_t)eng_bn_channels(n);
    if (dir == ENG_FWD) return e * (n->training ? (hw >= ENG_LANES ? 3 : 4) : 2);
    return e * (2 + (n->dx ? 3 : 0));
}
