/* norm.c — batch normalization (the batchnorm op): per channel of a C x H x W activation
 * (statistics over the rows and the H x W positions) or per feature of a flat one, with a
 * learned scale gamma (the layer's W) and shift beta (its b). Training normalises with
 * the batch's statistics and updates running ones; evaluation uses the running ones. */
#include "internal.h"

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

/* Mean and (population) variance of channel c over the rows, in double, two passes. */
static void bn_moments(const eng_node *n, bn_dims d, int rows, int c, double *mean, double *var)
{
    double s = 0.0, q = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *x = n->x + (size_t)r * n->in_size + (size_t)c * d.hw;
        for (size_t k = 0; k < d.hw; k++) s += x[k];
    }
    double mu = s / (double)d.cnt;
    for (int r = 0; r < rows; r++) {
        const float *x = n->x + (size_t)r * n->in_size + (size_t)c * d.hw;
        for (size_t k = 0; k < d.hw; k++) { double e = x[k] - mu; q += e * e; }
    }
    *mean = mu;
    *var = q / (double)d.cnt;
}

/* y = gamma (x - mean) / sqrt(var + eps) + beta, per channel. save gets the mean and
 * 1/sqrt(var + eps) used (the batch's in training, the running ones in evaluation). */
void eng_bn_fwd(eng_node *n, int rows)
{
    bn_dims d = bn_get(n, rows);
    float *rmean = n->stats, *rvar = n->stats + d.C;
    for (int c = 0; c < d.C; c++) {
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
        float a = n->w[c] * inv, b = n->b[c] - (float)mean * a;
        for (int r = 0; r < rows; r++) {
            const float *restrict x = n->x + (size_t)r * n->in_size + (size_t)c * d.hw;
            float *restrict y = n->y + (size_t)r * n->out_size + (size_t)c * d.hw;
            for (size_t k = 0; k < d.hw; k++) y[k] = a * x[k] + b;
        }
    }
}

/* With xhat = (x - mean)·inv: dbeta = sum dy, dgamma = sum dy·xhat, and in training (the
 * statistics depend on x) dx = gamma·inv·(dy - dbeta/N - xhat·dgamma/N); in evaluation
 * (constants) dx = gamma·inv·dy. N = rows·H·W. */
void eng_bn_bwd(eng_node *n, int rows)
{
    bn_dims d = bn_get(n, rows);
    for (int c = 0; c < d.C; c++) {
        float mean = n->save[c], inv = n->save[d.C + c];
        double sdy = 0.0, sdyx = 0.0;
        for (int r = 0; r < rows; r++) {
            const float *x = n->x + (size_t)r * n->in_size + (size_t)c * d.hw;
            const float *dy = n->dy + (size_t)r * n->out_size + (size_t)c * d.hw;
            for (size_t k = 0; k < d.hw; k++) {
                sdy += dy[k];
                sdyx += (double)dy[k] * ((x[k] - mean) * inv);
            }
        }
        n->db[c] = (float)sdy;
        n->dw[c] = (float)sdyx;
        if (!n->dx) continue;
        float k1 = n->w[c] * inv;
        float mdy = n->training ? (float)(sdy / (double)d.cnt) : 0.0f;
        float mdyx = n->training ? (float)(sdyx / (double)d.cnt) : 0.0f;
        for (int r = 0; r < rows; r++) {
            const float *restrict x = n->x + (size_t)r * n->in_size + (size_t)c * d.hw;
            const float *restrict dy = n->dy + (size_t)r * n->out_size + (size_t)c * d.hw;
            float *restrict dx = n->dx + (size_t)r * n->in_size + (size_t)c * d.hw;
            for (size_t k = 0; k < d.hw; k++) dx[k] = k1 * (dy[k] - mdy - (x[k] - mean) * inv * mdyx);
        }
    }
}

/* Per element: training forward 6 (sum; subtract, square, add; scale and shift), evaluation
 * 2; backward 5 for dgamma and dbeta (xhat 2, sums 3) and 5 more for dx in training (2 in
 * evaluation). Per-channel terms are left out. */
uint64_t eng_bn_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->in_size;
    if (dir == ENG_FWD) return e * (n->training ? 6 : 2);
    return e * (5 + (n->dx ? (n->training ? 5 : 2) : 0));
}

/* Passes over rows x size floats: forward reads x twice for the statistics in training and
 * once more to write y; backward reads x and dy for the sums and again (with dx written)
 * for dx. */
uint64_t eng_bn_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = 4 * U64(rows) * n->in_size;
    if (dir == ENG_FWD) return e * (n->training ? 4 : 2);
    return e * (2 + (n->dx ? 3 : 0));
}
