/* residual.c — the two ops of a residual block res(LAYERS):ACT, which model.c compiles to
 *     [res_fork] LAYERS' nodes [res_add] [ACT]
 * res_fork marks where the shortcut leaves the chain: its forward does nothing (its output
 * is its input, a view) and its backward adds the shortcut's gradient to the gradient the
 * block's first layer wrote, which is why it sits before them (backward runs in reverse).
 * res_add reads the shortcut as its peer's (the fork's) input and adds it to the block's
 * output: as it is (identity) when the shapes agree, else through a 1x1 convolution with
 * stride S and a bias (the projection shortcut, He et al. 2016, option B). */
#include "internal.h"
#include "lanes.h"

#include <string.h>

#define U64(x) ((uint64_t)(x))

void eng_res_dims(const int shape[3], int *C, int *P)
{
    int flat = shape[0] == 1 && shape[1] == 1;
    *C = flat ? shape[2] : shape[0];
    *P = flat ? 1 : shape[1] * shape[2];
}

/* H and W of a residual shape (1 x 1 for a flat one). */
static void res_hw(const int s[3], int *H, int *W)
{
    int flat = s[0] == 1 && s[1] == 1;
    *H = flat ? 1 : s[1];
    *W = flat ? 1 : s[2];
}

int eng_res_proj_stride(const int in[3], const int out[3])
{
    int H, W, OH, OW;
    res_hw(in, &H, &W);
    res_hw(out, &OH, &OW);
    for (int s = 1; s <= H || s <= W; s++)
        if ((H - 1) / s + 1 == OH && (W - 1) / s + 1 == OW) return s;
    return 0;
}

/* ---- res_fork: y = x (a view); backward dx += dskip -------------------------------------- */

void eng_res_fork_fwd(eng_node *n, int rows) { (void)n; (void)rows; }

void eng_res_fork_bwd(eng_node *n, int rows)
{
    if (!n->dx) return; /* the block starts the model: nothing below needs a gradient */
    lanes_add(n->dx, n->dskip, n->dx, (size_t)rows * n->in_size);
}

uint64_t eng_res_fork_flops(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_BWD && n->dx ? U64(rows) * n->in_size : 0;
}

uint64_t eng_res_fork_bytes(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_BWD && n->dx ? 12 * U64(rows) * n->in_size : 0;
}

/* ---- res_add ------------------------------------------------------------------------------ */

typedef struct { int C, H, W, F, OH, OW, S, P; size_t cp; } proj_dims;

static proj_dims proj_get(const eng_node *n)
{
    proj_dims d;
    int P;
    eng_res_dims(n->peer->in_shape, &d.C, &P);
    res_hw(n->peer->in_shape, &d.H, &d.W);
    eng_res_dims(n->out_shape, &d.F, &d.P);
    res_hw(n->out_shape, &d.OH, &d.OW);
    d.S = n->stride > 0 ? n->stride : 1;
    d.cp = (size_t)d.C * d.P;
    return d;
}

/* Whether backward computes dL/dshortcut: only when something below the fork needs it. */
static int needs_ds(const eng_node *n) { return n->dskip && n->peer->dx; }

/* sub [C x OH·OW] = the shortcut row s at the strided positions (add = 0), or the reverse,
 * s += sub there (add = 1; s zeroed first by the caller). */
static void proj_gather(const proj_dims *d, float *s, float *sub, int add)
{
    for (int c = 0; c < d->C; c++)
        for (int oh = 0; oh < d->OH; oh++) {
            float *src = s + ((size_t)c * d->H + (size_t)oh * d->S) * d->W;
            float *dst = sub + ((size_t)c * d->OH + oh) * d->OW;
            for (int ow = 0; ow < d->OW; ow++) {
                if (add) src[(size_t)ow * d->S] += dst[ow];
                else dst[ow] = src[(size_t)ow * d->S];
            }
        }
}

/* Identity: y = x + s. Projection: y = x + W·sub(s) + b, one sgemm per row. */
void eng_res_add_fwd(eng_node *n, int rows)
{
    const float *s = n->peer->x;
    size_t e = (size_t)rows * n->out_size;
    if (!n->w) {
        lanes_add(n->x, s, n->y, e);
        return;
    }
    proj_dims d = proj_get(n);
    memcpy(n->y, n->x, e * sizeof(float));
    for (int r = 0; r < rows; r++) {
        float *sub = n->col + (size_t)r * d.cp, *y = n->y + (size_t)r * n->out_size;
        proj_gather(&d, (float *)(s + (size_t)r * n->peer->in_size), sub, 0); /* only read when add = 0 */
        eng_sgemm(0, 0, d.F, d.P, d.C, 1.0f, n->w, d.C, sub, d.P, 1.0f, y, d.P);
        for (int f = 0; f < d.F; f++) lanes_add_scalar(y + (size_t)f * d.P, (size_t)d.P, n->b[f]);
    }
}

/* dx = dy. Identity: dL/ds is dy itself (the fork reads it there). Projection: dW = sum_r
 * dy_r·sub_r^T, db = sum dy, and dskip_r = the strided scatter of W^T·dy_r. */
void eng_res_add_bwd(eng_node *n, int rows)
{
    size_t e = (size_t)rows * n->out_size;
    if (n->dx) memcpy(n->dx, n->dy, e * sizeof(float));
    if (!n->w) return;
    proj_dims d = proj_get(n);
    memset(n->db, 0, (size_t)d.F * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float *dy = n->dy + (size_t)r * n->out_size;
        eng_sgemm(0, 1, d.F, d.C, d.P, 1.0f, dy, d.P, n->col + (size_t)r * d.cp, d.P, r ? 1.0f : 0.0f, n->dw, d.C);
        for (int f = 0; f < d.F; f++) n->db[f] += lanes_sum(dy + (size_t)f * d.P, (size_t)d.P);
        if (!needs_ds(n)) continue;
        float *ds = n->dskip + (size_t)r * n->peer->in_size;
        eng_sgemm(1, 0, d.C, d.P, d.F, 1.0f, n->w, d.C, dy, d.P, 0.0f, n->dcol, d.P);
        memset(ds, 0, n->peer->in_size * sizeof(float));
        proj_gather(&d, ds, n->dcol, 1);
    }
}

/* Identity: forward 1 add per output, backward a copy. Projection, per row: forward the
 * GEMM (2·F·C·P) plus the bias and shortcut adds (2·F·P); backward dW (2·F·C·P), db (F·P)
 * and, when the shortcut needs a gradient, W^T·dy (2·F·C·P). */
uint64_t eng_res_add_flops(const eng_node *n, int rows, eng_dir dir)
{
    if (!n->w) return dir == ENG_FWD ? U64(rows) * n->out_size : 0;
    proj_dims d = proj_get(n);
    uint64_t fcp = 2 * U64(d.F) * d.cp, fp = U64(d.F) * d.P;
    if (dir == ENG_FWD) return U64(rows) * (fcp + 2 * fp);
    return U64(rows) * (fcp + fp + (needs_ds(n) ? fcp : 0));
}

/* Identity: forward reads x and s and writes y; backward copies dy to dx. Projection adds
 * W, the strided shortcut (gathered: read and written) and in backward the scattered
 * shortcut gradient (one row of the shortcut written per row). */
uint64_t eng_res_add_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->out_size, cp;
    if (!n->w) return dir == ENG_FWD ? 12 * e : (n->dx ? 8 * e : 0);
    proj_dims d = proj_get(n);
    cp = U64(rows) * d.cp;
    if (dir == ENG_FWD) return 4 * (3 * e + 2 * cp + n->n_w + n->n_b);
    return 4 * ((n->dx ? 2 * e : e) + cp + n->n_w + (needs_ds(n) ? U64(rows) * n->peer->in_size : 0));
}

int eng_res_add_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    if (!n->w) return 0;
    proj_dims d = proj_get(n);
    g[0] = (eng_gemm_shape){ 0, 0, d.F, d.P, d.C, rows };
    g[1] = (eng_gemm_shape){ 0, 1, d.F, d.C, d.P, rows };
    g[2] = (eng_gemm_shape){ 1, 0, d.C, d.P, d.F, rows };
    return needs_ds(n) ? 3 : 2;
}
