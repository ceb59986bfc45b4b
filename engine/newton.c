/* newton.c — Newton's method for dense models: curvature blocks (exact Hessian, empirical
 * Fisher, Gauss-Newton) built in float64, each linear solve routed by quantum/'s scheduler.
 *
 * The curvature is recomputed in float64 from the float32 parameters and the input of the
 * first dense layer, so it is the exact curvature of the model the engine runs (up to the
 * float32 rounding of its activations). Per-sample loss ell_n, batch loss L = mean ell_n.
 * Dense layer l: z = x W + b (W [in x out]), a = s(z). Notation per sample:
 *   DA_l = d ell_n / d a_l,  DZ_l = s'(z_l) . DA_l,  DA_{l-1} = DZ_l W_l^T.
 * Layer blocks, exact per-sample second-order backprop (H_L: loss Hessian wrt logits):
 *   HZ_l = diag(s') HA_l diag(s') + diag(s'' . DA_l),  HA_{l-1} = W_l HZ_l W_l^T,
 *   block(W_l) = mean_n (x_n x_n^T) (x) HZ_l,n,  block(b_l) = mean_n HZ_l,n.
 * Gauss-Newton drops the s'' term; Fisher is mean_n g_n g_n^T of per-sample gradients.
 * The full block (cross-layer terms included) is built column by column from exact
 * Hessian-vector products (Pearlmutter's R-operator), or Gauss-Newton-vector products.
 */
#include "newton.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../quantum/quantum.h"
#include "internal.h"

/* The engine's quantum settings are handed to the scheduler by a cast, and the policy and
 * readout are stored (by name) with every run: the two lists must stay equal, number for
 * number, like the run statuses (tui/runner_store.c). */
_Static_assert(ENG_QPOLICY_CLASSICAL == (int)QM_POLICY_CLASSICAL && ENG_QPOLICY_QUANTUM == (int)QM_POLICY_QUANTUM &&
                   ENG_QPOLICY_THRESHOLD == (int)QM_POLICY_THRESHOLD && ENG_QPOLICY_HYBRID == (int)QM_POLICY_HYBRID,
               "eng_qpolicy must equal qm_policy number for number");
_Static_assert(ENG_READOUT_NONE == (int)QM_READOUT_NONE && ENG_READOUT_TOMOGRAPHY == (int)QM_READOUT_TOMOGRAPHY,
               "eng_readout must equal qm_readout number for number");

#define CHUNK 64 /* samples per GEMM when accumulating (x x^T) (x) HZ */

typedef struct {
    int layer;        /* index in m->layers */
    int in, out;
    eng_act act;
    size_t w_off, b_off;
    double *W;        /* float64 copy of the weights [in x out] */
    double *b;
    /* per batch, [B x out] (X is the previous layer's A, or X0 for the first) */
    double *Z, *A, *S1, *S2, *DA, *DZ;
    double *HZ;       /* [B x out*out]: layer blocks, hessian / gauss-newton */
    double *RZ, *RA, *RDA, *RDZ; /* full blocks: R-operator buffers */
} nlayer;

typedef struct {
    size_t off;
    int n;
    int dl;           /* dense layer index; -1 for the full block */
    int is_bias;
    char name[40];
} nblock;

struct eng_newton {
    eng_model *m;
    prof_t *prof;
    int ph_hessian, ph_solve;
    eng_newton_config nc;
    int psd;                 /* the curvature is positive semi-definite */
    int nl;
    nlayer L[ENG_MAX_LAYERS];
    int first;               /* m->layers index of the first dense layer */
    double *X0;              /* [B x in of the first dense layer] */
    double *P;               /* softmax probabilities [B x k] */
    double *HA;              /* [B x max out^2] scratch for HA_{l-1} */
    double *tmp;             /* [max(out*in, B*maxw)] scratch */
    int nb;
    nblock *blocks;
    int maxn;
    double *H, *M, *X2, *G, *g, *d, *v, *hv;
    qm_sched *sched;
    long solves, quantum_solves;
    int B;
};

/* ---- float64 forward / backward --------------------------------------------------- */

static double act_f(eng_act a, double z)
{
    switch (a) {
    case ENG_ACT_RELU: return z > 0 ? z : 0;
    case ENG_ACT_TANH: return tanh(z);
    case ENG_ACT_SIGMOID: return 1 / (1 + exp(-z));
    case ENG_ACT_GELU: {
        const double c = 0.7978845608028654, k = 0.044715;
        return 0.5 * z * (1 + tanh(c * (z + k * z * z * z)));
    }
    default: return z;
    }
}

/* s'(z), s''(z) in float64 (the engine's eng_act_derivs is float32). */
static void act_d(eng_act a, double z, double y, double *d1, double *d2)
{
    switch (a) {
    case ENG_ACT_RELU: *d1 = z > 0; *d2 = 0; break;
    case ENG_ACT_TANH: *d1 = 1 - y * y; *d2 = -2 * y * *d1; break;
    case ENG_ACT_SIGMOID: *d1 = y * (1 - y); *d2 = *d1 * (1 - 2 * y); break;
    case ENG_ACT_GELU: {
        const double c = 0.7978845608028654, k = 0.044715;
        double x2 = z * z, t = tanh(c * z * (1 + k * x2)), s = 1 - t * t;
        double du = c * (1 + 3 * k * x2), ddu = c * 6 * k * z;
        *d1 = 0.5 * (1 + t) + 0.5 * z * s * du;
        *d2 = s * du + 0.5 * z * (-2 * t * s * du * du + s * ddu);
        break;
    }
    default: *d1 = 1; *d2 = 0; break;
    }
}

static const double *layer_x(const eng_newton *nt, int l) { return l == 0 ? nt->X0 : nt->L[l - 1].A; }

/* Forward in float64 and per-sample loss derivatives DA/DZ of every layer. */
static void forward_backward(eng_newton *nt, const eng_batch *b)
{
    eng_model *m = nt->m;
    int B = b->rows, k = m->n_out;
    const eng_layer *F = &m->layers[nt->first];
    for (size_t i = 0; i < (size_t)B * F->in_size; i++) nt->X0[i] = F->x[i];
    for (int l = 0; l < nt->nl; l++) {
        nlayer *y = &nt->L[l];
        const float *w = m->params + y->w_off, *bb = m->params + y->b_off;
        for (size_t i = 0; i < (size_t)y->in * y->out; i++) y->W[i] = w[i];
        for (int i = 0; i < y->out; i++) y->b[i] = bb[i];
        for (int r = 0; r < B; r++) memcpy(y->Z + (size_t)r * y->out, y->b, y->out * sizeof(double));
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, y->out, y->in, 1.0, layer_x(nt, l), y->in,
                    y->W, y->out, 1.0, y->Z, y->out);
        for (size_t i = 0; i < (size_t)B * y->out; i++) {
            y->A[i] = act_f(y->act, y->Z[i]);
            act_d(y->act, y->Z[i], y->A[i], &y->S1[i], &y->S2[i]);
        }
    }
    nlayer *top = &nt->L[nt->nl - 1];
    if (m->cfg.loss == ENG_LOSS_SOFTMAX_XENT) {
        for (int r = 0; r < B; r++) {
            const double *a = top->A + (size_t)r * k;
            double *p = nt->P + (size_t)r * k, mx = a[0], s = 0;
            for (int j = 1; j < k; j++) mx = fmax(mx, a[j]);
            for (int j = 0; j < k; j++) s += p[j] = exp(a[j] - mx);
            for (int j = 0; j < k; j++) {
                p[j] /= s;
                top->DA[(size_t)r * k + j] = p[j] - (j == b->y[r]);
            }
        }
    } else {
        for (size_t i = 0; i < (size_t)B * k; i++) top->DA[i] = 2 * (top->A[i] - b->t[i]) / k;
    }
    for (int l = nt->nl - 1; l >= 0; l--) {
        nlayer *y = &nt->L[l];
        for (size_t i = 0; i < (size_t)B * y->out; i++) y->DZ[i] = y->S1[i] * y->DA[i];
        if (l > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, y->in, y->out, 1.0, y->DZ, y->out, y->W,
                        y->out, 0.0, nt->L[l - 1].DA, y->in);
    }
}

/* u = H_ell r per sample (loss Hessian wrt the logits), rows r of [B x k]. */
static void loss_hvp(const eng_newton *nt, int B, const double *r, double *u)
{
    int k = nt->m->n_out;
    if (nt->m->cfg.loss == ENG_LOSS_SOFTMAX_XENT) {
        for (int n = 0; n < B; n++) {
            const double *p = nt->P + (size_t)n * k, *rr = r + (size_t)n * k;
            double pr = 0;
            for (int j = 0; j < k; j++) pr += p[j] * rr[j];
            for (int j = 0; j < k; j++) u[(size_t)n * k + j] = p[j] * rr[j] - p[j] * pr;
        }
    } else {
        for (size_t i = 0; i < (size_t)B * k; i++) u[i] = 2.0 / k * r[i];
    }
}

/* ---- layer blocks ----------------------------------------------------------------- */

/* HZ_l,n for every layer and sample, top-down (gn: without the s'' terms). */
static void build_hz(eng_newton *nt, int B, int gn)
{
    int k = nt->m->n_out;
    for (int n = 0; n < B; n++) {
        /* HA of the top layer = H_ell */
        double *ha = nt->HA;
        if (nt->m->cfg.loss == ENG_LOSS_SOFTMAX_XENT) {
            const double *p = nt->P + (size_t)n * k;
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++) ha[i * k + j] = (i == j ? p[i] : 0) - p[i] * p[j];
        } else {
            for (int i = 0; i < k * k; i++) ha[i] = i % (k + 1) == 0 ? 2.0 / k : 0;
        }
        for (int l = nt->nl - 1; l >= 0; l--) {
            nlayer *y = &nt->L[l];
            int o = y->out;
            double *hz = y->HZ + (size_t)n * o * o;
            const double *s1 = y->S1 + (size_t)n * o, *s2 = y->S2 + (size_t)n * o, *da = y->DA + (size_t)n * o;
            for (int i = 0; i < o; i++)
                for (int j = 0; j < o; j++) hz[i * o + j] = s1[i] * ha[i * o + j] * s1[j];
            if (!gn)
                for (int i = 0; i < o; i++) hz[i * o + i] += s2[i] * da[i];
            if (l > 0) {
                /* HA_{l-1} = W HZ W^T: [in x out][out x out][out x in] */
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, y->in, o, o, 1.0, y->W, o, hz, o, 0.0,
                            nt->tmp, o);
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, y->in, y->in, o, 1.0, nt->tmp, o, y->W, o,
                            0.0, ha, y->in);
            }
        }
    }
}

/* block(W_l)[(i,j),(p,q)] = mean_n x_ni x_np HZ_n[j][q]: one GEMM per chunk on
 * X2[n][(i,p)] = x_ni x_np (packed, i <= p: x x^T is symmetric, which halves the GEMM) and
 * HZ[n][(j,q)], then a permutation that fills (i,p) and (p,i). */
static void block_w_second_order(eng_newton *nt, int l, int B, double *H)
{
    nlayer *y = &nt->L[l];
    int in = y->in, o = y->out;
    size_t i2 = (size_t)in * (in + 1) / 2, o2 = (size_t)o * o;
    const double *X = layer_x(nt, l);
    for (int c0 = 0; c0 < B; c0 += CHUNK) {
        int c = B - c0 < CHUNK ? B - c0 : CHUNK;
        for (int n = 0; n < c; n++) {
            const double *x = X + (size_t)(c0 + n) * in;
            double *row = nt->X2 + (size_t)n * i2;
            size_t t = 0;
            for (int i = 0; i < in; i++)
                for (int p = i; p < in; p++) row[t++] = x[i] * x[p];
        }
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)i2, (int)o2, c, 1.0 / B, nt->X2, (int)i2,
                    y->HZ + (size_t)c0 * o2, (int)o2, c0 ? 1.0 : 0.0, nt->M, (int)o2);
    }
    size_t nw = (size_t)in * o, t = 0;
    for (int i = 0; i < in; i++)
        for (int p = i; p < in; p++, t++) {
            const double *mr = nt->M + t * o2;
            for (int j = 0; j < o; j++)
                for (int q = 0; q < o; q++) {
                    double v = mr[j * o + q];
                    H[((size_t)i * o + j) * nw + (size_t)p * o + q] = v;
                    H[((size_t)p * o + j) * nw + (size_t)i * o + q] = v;
                }
        }
}

static void block_b_second_order(eng_newton *nt, int l, int B, double *H)
{
    nlayer *y = &nt->L[l];
    size_t o2 = (size_t)y->out * y->out;
    memset(H, 0, o2 * sizeof *H);
    for (int n = 0; n < B; n++)
        for (size_t i = 0; i < o2; i++) H[i] += y->HZ[(size_t)n * o2 + i] / B;
}

/* Fisher: mean_n g_n g_n^T with g_n = vec(x_n (x) DZ_n) (weights) or DZ_n (bias). */
static void block_fisher_layer(eng_newton *nt, int l, int is_bias, int B, double *H)
{
    nlayer *y = &nt->L[l];
    int in = y->in, o = y->out, n = is_bias ? o : in * o;
    const double *X = layer_x(nt, l);
    memset(H, 0, (size_t)n * n * sizeof *H);
    if (is_bias) {
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, B, 1.0 / B, y->DZ, o, 0.0, H, n);
    } else {
        for (int c0 = 0; c0 < B; c0 += CHUNK) {
            int c = B - c0 < CHUNK ? B - c0 : CHUNK;
            for (int s = 0; s < c; s++) {
                const double *x = X + (size_t)(c0 + s) * in, *dz = y->DZ + (size_t)(c0 + s) * o;
                double *row = nt->G + (size_t)s * n;
                for (int i = 0; i < in; i++)
                    for (int j = 0; j < o; j++) row[i * o + j] = x[i] * dz[j];
            }
            cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, c, 1.0 / B, nt->G, n, 1.0, H, n);
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) H[(size_t)i * n + j] = H[(size_t)j * n + i];
}

/* ---- the full block ---------------------------------------------------------------- */

/* hv = H v (gn: G v) for the batch loss, v and hv over all parameters in model order. */
static void full_hvp(eng_newton *nt, int B, int gn, const double *v, double *hv)
{
    for (int l = 0; l < nt->nl; l++) {
        nlayer *y = &nt->L[l];
        const double *vw = v + y->w_off, *vb = v + y->b_off;
        for (int r = 0; r < B; r++) memcpy(y->RZ + (size_t)r * y->out, vb, y->out * sizeof(double));
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, y->out, y->in, 1.0, layer_x(nt, l), y->in, vw,
                    y->out, 1.0, y->RZ, y->out);
        if (l > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, y->out, y->in, 1.0, nt->L[l - 1].RA, y->in,
                        y->W, y->out, 1.0, y->RZ, y->out);
        for (size_t i = 0; i < (size_t)B * y->out; i++) y->RA[i] = y->S1[i] * y->RZ[i];
    }
    nlayer *top = &nt->L[nt->nl - 1];
    loss_hvp(nt, B, top->RA, top->RDA);
    for (int l = nt->nl - 1; l >= 0; l--) {
        nlayer *y = &nt->L[l];
        for (size_t i = 0; i < (size_t)B * y->out; i++)
            y->RDZ[i] = y->S1[i] * y->RDA[i] + (gn ? 0 : y->S2[i] * y->RZ[i] * y->DA[i]);
        double *hw = hv + y->w_off, *hb = hv + y->b_off;
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, y->in, y->out, B, 1.0 / B, layer_x(nt, l), y->in,
                    y->RDZ, y->out, 0.0, hw, y->out);
        if (!gn && l > 0)
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, y->in, y->out, B, 1.0 / B, nt->L[l - 1].RA,
                        y->in, y->DZ, y->out, 1.0, hw, y->out);
        for (int j = 0; j < y->out; j++) {
            double s = 0;
            for (int r = 0; r < B; r++) s += y->RDZ[(size_t)r * y->out + j];
            hb[j] = s / B;
        }
        if (l > 0) {
            double *rda = nt->L[l - 1].RDA;
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, y->in, y->out, 1.0, y->RDZ, y->out, y->W,
                        y->out, 0.0, rda, y->in);
            if (!gn)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, y->in, y->out, 1.0, y->DZ, y->out,
                            v + y->w_off, y->out, 1.0, rda, y->in);
        }
    }
}

static void block_full(eng_newton *nt, int B, double *H)
{
    int n = (int)nt->m->n_params;
    eng_curvature cv = nt->nc.curvature;
    if (cv == ENG_CURV_FISHER) {
        memset(H, 0, (size_t)n * n * sizeof *H);
        for (int c0 = 0; c0 < B; c0 += CHUNK) {
            int c = B - c0 < CHUNK ? B - c0 : CHUNK;
            memset(nt->G, 0, (size_t)c * n * sizeof *nt->G);
            for (int s = 0; s < c; s++) {
                double *row = nt->G + (size_t)s * n;
                for (int l = 0; l < nt->nl; l++) {
                    nlayer *y = &nt->L[l];
                    const double *x = layer_x(nt, l) + (size_t)(c0 + s) * y->in, *dz = y->DZ + (size_t)(c0 + s) * y->out;
                    for (int i = 0; i < y->in; i++)
                        for (int j = 0; j < y->out; j++) row[y->w_off + (size_t)i * y->out + j] = x[i] * dz[j];
                    for (int j = 0; j < y->out; j++) row[y->b_off + j] = dz[j];
                }
            }
            cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, c, 1.0 / B, nt->G, n, 1.0, H, n);
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) H[(size_t)i * n + j] = H[(size_t)j * n + i];
        return;
    }
    int gn = cv == ENG_CURV_GAUSS_NEWTON;
    memset(nt->v, 0, (size_t)n * sizeof *nt->v);
    for (int p = 0; p < n; p++) {
        nt->v[p] = 1;
        full_hvp(nt, B, gn, nt->v, nt->hv);
        nt->v[p] = 0;
        for (int i = 0; i < n; i++) H[(size_t)i * n + p] = nt->hv[i];
    }
    /* Exact in exact arithmetic; symmetrise the rounding. */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double s = 0.5 * (H[(size_t)i * n + j] + H[(size_t)j * n + i]);
            H[(size_t)i * n + j] = H[(size_t)j * n + i] = s;
        }
}

/* The curvature of block bi from the last forward_backward (unshifted, n x n). */
static void build_block(eng_newton *nt, int bi, int B, double *H)
{
    const nblock *bk = &nt->blocks[bi];
    if (bk->dl < 0) { block_full(nt, B, H); return; }
    if (nt->nc.curvature == ENG_CURV_FISHER) block_fisher_layer(nt, bk->dl, bk->is_bias, B, H);
    else if (bk->is_bias) block_b_second_order(nt, bk->dl, B, H);
    else block_w_second_order(nt, bk->dl, B, H);
}

/* ---- public ------------------------------------------------------------------------ */

void eng_newton_free(eng_newton *nt)
{
    if (!nt) return;
    for (int l = 0; l < nt->nl; l++) {
        nlayer *y = &nt->L[l];
        double *bufs[] = { y->W, y->b, y->Z, y->A, y->S1, y->S2, y->DA, y->DZ, y->HZ, y->RZ, y->RA, y->RDA, y->RDZ };
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) prof_free(bufs[i]);
    }
    double *bufs[] = { nt->X0, nt->P, nt->HA, nt->tmp, nt->H, nt->M, nt->X2, nt->G, nt->g, nt->d, nt->v, nt->hv };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) prof_free(bufs[i]);
    prof_free(nt->blocks);
    qm_sched_free(nt->sched);
    prof_free(nt);
}

static double *dalloc(size_t n, int *bad)
{
    if (n == 0) n = 1;
    double *p = prof_malloc(n * sizeof(double));
    if (!p) *bad = 1;
    return p;
}

/* eng_newton_create's stages: check the model and the keys, lay out the curvature blocks
 * (with the size guard before anything big is allocated), allocate the per-layer and
 * shared buffers, create the solve scheduler. Each returns 0 or an eng_fail code; the
 * caller frees the half-built nt. idx: the model's dense layers, nl of them. */

static int check_model(const eng_newton_config *nc, const eng_model *m, int idx[ENG_MAX_LAYERS], int *n_layers)
{
    /* Which layers: dense ones; parameter-free layers only before the first dense one
     * (they are part of the data then) or flatten anywhere. */
    int nl = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const eng_layer *L = &m->layers[i];
        if (L->act == ENG_ACT_MAXK)
            return eng_fail(ENG_EINVAL, "newton: layer %s uses maxk, whose output is sparse (CBSR); Newton curvature "
                            "is implemented for dense activations only (use relu, or a first-order optimizer)", L->name);
        if (L->kind == ENG_LAYER_BN || L->kind == ENG_LAYER_RES_BEGIN || L->kind == ENG_LAYER_RES)
            return eng_fail(ENG_EINVAL, "newton: layer %s is a %s layer; Newton curvature is implemented for a chain "
                            "of dense layers only (use a first-order optimizer: sgd, momentum, adam, adamw)", L->name,
                            L->kind == ENG_LAYER_BN ? "batch-norm" : "residual-block");
        if (L->kind == ENG_LAYER_DENSE) idx[nl++] = i;
        else if (L->kind == ENG_LAYER_CONV)
            return eng_fail(ENG_EINVAL, "newton: layer %s is a convolution; Newton curvature is implemented for "
                            "dense layers only (pool/flatten may come before the first dense layer)", L->name);
        else if (L->kind == ENG_LAYER_SEQ)
            return eng_fail(ENG_EINVAL, "newton: layer %s is a sequence layer; Newton curvature is implemented for "
                            "dense layers only (use a first-order optimizer)", L->name);
        else if ((L->kind == ENG_LAYER_POOL || L->kind == ENG_LAYER_AVGPOOL || L->kind == ENG_LAYER_GAP) && nl > 0)
            return eng_fail(ENG_EINVAL, "newton: layer %s (pooling) comes after a dense layer; Newton curvature is "
                            "implemented for dense layers only", L->name);
    }
    if (nl == 0) return eng_fail(ENG_EINVAL, "newton: the model has no dense layer");
    if (m->layers[idx[nl - 1]].out_size != (size_t)m->n_out)
        return eng_fail(ENG_EINVAL, "newton: the last dense layer must produce the logits");
    if (!(nc->normalization_epsilon >= 0) || !(nc->damping >= 0) || !(nc->clip > 0) ||
        !(nc->prune_ratio > 0 && nc->prune_ratio <= 1))
        return eng_fail(ENG_EINVAL, "newton: normalization_epsilon %g, damping %g, clip %g, prune_ratio %g: "
                        "expected >= 0, >= 0, > 0 and in (0, 1]", nc->normalization_epsilon, nc->damping,
                        nc->clip, nc->prune_ratio);
    *n_layers = nl;
    return 0;
}

static int plan_blocks(eng_newton *nt, const eng_newton_config *nc, const eng_model *m, const int *idx, int nl)
{
    /* blocks, and the size guard before anything big is allocated */
    nt->nb = nc->blocks == ENG_BLOCKS_FULL ? 1 : 2 * nl;
    nt->blocks = prof_calloc((size_t)nt->nb, sizeof *nt->blocks);
    if (!nt->blocks) return eng_fail(ENG_ENOMEM, "newton: out of memory");
    if (nc->blocks == ENG_BLOCKS_FULL) {
        nt->blocks[0] = (nblock){ .off = 0, .n = (int)m->n_params, .dl = -1 };
        snprintf(nt->blocks[0].name, sizeof nt->blocks[0].name, "all");
    } else {
        for (int l = 0; l < nl; l++) {
            const eng_layer *L = &m->layers[idx[l]];
            nt->blocks[2 * l] = (nblock){ .off = L->w_off, .n = (int)L->n_w, .dl = l, .is_bias = 0 };
            snprintf(nt->blocks[2 * l].name, sizeof nt->blocks[0].name, "%s.W", L->name);
            nt->blocks[2 * l + 1] = (nblock){ .off = L->b_off, .n = (int)L->n_b, .dl = l, .is_bias = 1 };
            snprintf(nt->blocks[2 * l + 1].name, sizeof nt->blocks[0].name, "%s.b", L->name);
        }
    }
    for (int i = 0; i < nt->nb; i++) {
        int n = nt->blocks[i].n;
        if (n > nc->max_block) {
            return eng_fail(ENG_EINVAL, "newton.max_block = %d: curvature block %s has %d parameters "
                            "(a %dx%d float64 matrix, %.0f MB); raise newton.max_block, use blocks = layer "
                            "or a smaller model", nc->max_block, nt->blocks[i].name, n, n, n,
                            (double)n * n * 8 / 1e6);
        }
        if (n > nt->maxn) nt->maxn = n;
    }
    return 0;
}

static int alloc_buffers(eng_newton *nt, const eng_newton_config *nc, const eng_model *m, const int *idx, int nl)
{
    int B = nt->B;
    int bad = 0, maxo = 0, maxin = 0;
    size_t maxw = 0;
    for (int l = 0; l < nl; l++) {
        const eng_layer *Ls = &m->layers[idx[l]];
        nlayer *y = &nt->L[l];
        y->layer = idx[l];
        y->in = (int)Ls->in_size;
        y->out = (int)Ls->out_size;
        y->act = Ls->act;
        y->w_off = Ls->w_off;
        y->b_off = Ls->b_off;
        if (l > 0 && (size_t)y->in != (size_t)nt->L[l - 1].out)
            return eng_fail(ENG_EINVAL, "newton: layer %s reads %d values but the previous dense layer makes %d",
                            Ls->name, y->in, nt->L[l - 1].out);
        size_t bo = (size_t)B * y->out;
        y->W = dalloc((size_t)y->in * y->out, &bad);
        y->b = dalloc(y->out, &bad);
        y->Z = dalloc(bo, &bad); y->A = dalloc(bo, &bad); y->S1 = dalloc(bo, &bad);
        y->S2 = dalloc(bo, &bad); y->DA = dalloc(bo, &bad); y->DZ = dalloc(bo, &bad);
        if (nc->curvature != ENG_CURV_FISHER) {
            if (nc->blocks == ENG_BLOCKS_LAYER) y->HZ = dalloc(bo * y->out, &bad);
            else { y->RZ = dalloc(bo, &bad); y->RA = dalloc(bo, &bad); y->RDA = dalloc(bo, &bad); y->RDZ = dalloc(bo, &bad); }
        }
        if (y->out > maxo) maxo = y->out;
        if (y->in > maxin) maxin = y->in;
        if ((size_t)y->in * y->out > maxw) maxw = (size_t)y->in * y->out;
    }
    int maxa = maxo > maxin ? maxo : maxin;
    size_t nn = (size_t)nt->maxn * nt->maxn;
    nt->X0 = dalloc((size_t)B * nt->L[0].in, &bad);
    nt->P = dalloc((size_t)B * m->n_out, &bad);
    nt->HA = dalloc((size_t)maxa * maxa, &bad);
    nt->tmp = dalloc((size_t)maxa * maxa, &bad);
    nt->H = dalloc(nn, &bad);
    nt->g = dalloc(nt->maxn, &bad);
    nt->d = dalloc(nt->maxn, &bad);
    if (nc->curvature == ENG_CURV_FISHER) nt->G = dalloc((size_t)CHUNK * nt->maxn, &bad);
    else if (nc->blocks == ENG_BLOCKS_LAYER) {
        nt->M = dalloc(maxw * maxw, &bad);
        nt->X2 = dalloc((size_t)CHUNK * maxin * maxin, &bad);
    } else {
        nt->v = dalloc(m->n_params, &bad);
        nt->hv = dalloc(m->n_params, &bad);
    }
    if (bad) return eng_fail(ENG_ENOMEM, "newton: out of memory for curvature buffers (largest block %d)", nt->maxn);
    return 0;
}

static int create_sched(eng_newton *nt, const eng_config *cfg)
{
    const eng_newton_config *nc = &cfg->newton;
    const eng_quantum_config *qc = &cfg->quantum;
    qm_sched_opts o = qm_sched_defaults();
    o.policy = (qm_policy)qc->policy;
    o.kappa_max = qc->kappa_max;
    o.precision = qc->precision;
    o.query_time_ns = qc->query_time_ns;
    o.readout = (qm_readout)qc->readout;
    o.exact_kappa_max_n = qc->exact_kappa_max_n;
    o.prune_ratio = nc->prune_ratio;
    o.seed = cfg->seed;
    if (qm_sched_create(&o, &nt->sched)) return eng_fail(ENG_EINVAL, "newton: %s", qm_error());
    return 0;
}

int eng_newton_create(const eng_config *cfg, eng_model *m, prof_t *prof, eng_newton **out)
{
    *out = NULL;
    const eng_newton_config *nc = &cfg->newton;
    if (m->n_out < 1) return eng_fail(ENG_EINVAL, "newton: the model has no outputs");
    int idx[ENG_MAX_LAYERS], nl = 0;
    int rc = check_model(nc, m, idx, &nl);
    if (rc) return rc;

    eng_newton *nt = prof_calloc(1, sizeof *nt);
    if (!nt) return eng_fail(ENG_ENOMEM, "newton: out of memory");
    nt->m = m;
    nt->prof = prof;
    nt->nc = *nc;
    nt->psd = nc->curvature != ENG_CURV_HESSIAN;
    nt->nl = nl;
    nt->first = idx[0];
    nt->B = m->max_batch;
    rc = plan_blocks(nt, nc, m, idx, nl);
    if (!rc) rc = alloc_buffers(nt, nc, m, idx, nl);
    if (!rc) rc = create_sched(nt, cfg);
    if (rc) {
        eng_newton_free(nt);
        return rc;
    }
    nt->ph_hessian = nt->ph_solve = -1;
    if (prof) {
        nt->ph_hessian = prof_register(prof, "hessian", NULL, PROF_PHASE);
        nt->ph_solve = prof_register(prof, "solve", NULL, PROF_PHASE);
    }
    *out = nt;
    return ENG_OK;
}

int eng_newton_step(eng_newton *nt, const eng_batch *b, double lr, long step,
                    const eng_sink *sink, double *hybrid_delta_s, double *kappa_mean)
{
    *hybrid_delta_s = 0;
    *kappa_mean = NAN;
    eng_model *m = nt->m;
    int B = b->rows;
    if (B != m->rows || B > nt->B)
        return eng_fail(ENG_EINVAL, "newton step %ld: batch of %d rows, but the last forward had %d", step, B, m->rows);
    if (m->cfg.loss == ENG_LOSS_SOFTMAX_XENT ? !b->y : !b->t)
        return eng_fail(ENG_EINVAL, "newton step %ld: the batch lacks the %s the loss needs", step,
                        m->cfg.loss == ENG_LOSS_SOFTMAX_XENT ? "labels" : "targets");
    prof_t *p = nt->prof;
    int hs = nt->ph_hessian, ss = nt->ph_solve;
    if (p && hs >= 0) prof_begin(p, hs);
    forward_backward(nt, b);
    int gn = nt->nc.curvature == ENG_CURV_GAUSS_NEWTON;
    if (nt->nc.curvature != ENG_CURV_FISHER && nt->nc.blocks == ENG_BLOCKS_LAYER) build_hz(nt, B, gn);
    if (p && hs >= 0) prof_end(p, hs, 0, 0);

    float *w = m->params;
    const float *gr = m->grads;
    double ksum = 0;
    int kcount = 0;
    for (int bi = 0; bi < nt->nb; bi++) {
        const nblock *bk = &nt->blocks[bi];
        int n = bk->n;
        if (p && hs >= 0) prof_begin(p, hs);
        build_block(nt, bi, B, nt->H);
        if (p && hs >= 0) prof_end(p, hs, 0, (uint64_t)n * n * sizeof(double));
        double hmax = 0;
        for (size_t i = 0; i < (size_t)n * n; i++) hmax = fmax(hmax, fabs(nt->H[i]));
        double shift = (hmax + nt->nc.damping) * nt->nc.normalization_epsilon;
        for (int i = 0; i < n; i++) nt->g[i] = gr[bk->off + i];

        qm_solve_event ev;
        if (p && ss >= 0) prof_begin(p, ss);
        int rc = qm_sched_solve(nt->sched, step, bi, n, nt->H, nt->psd, shift, nt->g, nt->d, &ev);
        if (p && ss >= 0) prof_end(p, ss, (uint64_t)n * n * (uint64_t)n / 3, (uint64_t)n * n * sizeof(double));
        if (rc) return eng_fail(ENG_ESOLVER, "newton step %ld, block %s (%dx%d): %s", step, bk->name, n, n, qm_error());
        nt->solves++;
        if (ev.route == QM_ROUTE_QUANTUM) nt->quantum_solves++;
        *hybrid_delta_s += ev.hybrid_delta_ns * 1e-9;
        if (isfinite(ev.kappa_used)) { ksum += ev.kappa_used; kcount++; }
        if (sink && sink->solver && sink->solver(sink->ud, &ev)) return ENG_ESINK;

        double clip = nt->nc.clip;
        for (int i = 0; i < n; i++) {
            double di = nt->d[i];
            if (isnan(di)) return eng_fail(ENG_ESOLVER, "newton step %ld, block %s: the direction is NaN", step, bk->name);
            if (di > clip) di = clip;
            if (di < -clip) di = -clip;
            w[bk->off + i] -= (float)(lr * di);
        }
    }
    *kappa_mean = kcount ? ksum / kcount : INFINITY;
    return ENG_OK;
}

void eng_newton_counts(const eng_newton *nt, long *solves, long *quantum_solves)
{
    if (solves) *solves = nt->solves;
    if (quantum_solves) *quantum_solves = nt->quantum_solves;
}

int eng_newton_curvature(eng_newton *nt, const eng_batch *b, int bi, double *H, int *n, size_t *off)
{
    if (bi < 0 || bi >= nt->nb) return eng_fail(ENG_EINVAL, "newton: block %d of %d", bi, nt->nb);
    forward_backward(nt, b);
    if (nt->nc.curvature != ENG_CURV_FISHER && nt->nc.blocks == ENG_BLOCKS_LAYER)
        build_hz(nt, b->rows, nt->nc.curvature == ENG_CURV_GAUSS_NEWTON);
    build_block(nt, bi, b->rows, H);
    *n = nt->blocks[bi].n;
    *off = nt->blocks[bi].off;
    return ENG_OK;
}
