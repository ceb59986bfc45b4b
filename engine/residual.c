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

/* The shortcut row s at the strided positions into one row's block of the channel-major
 * matrix m (channel c of it at m + c·ld, OH·OW long), add = 0; or the reverse, s += that
 * block at the strided positions (add = 1; s zeroed first by the caller). */
static void proj_gather(const proj_dims *d, float *s, float *m, size_t ld, int add)
{
    for (int c = 0; c < d->C; c++)
        for (int oh = 0; oh < d->OH; oh++) {
            float *src = s + ((size_t)c * d->H + (size_t)oh * d->S) * d->W;
            float *dst = m + (size_t)c * ld + (size_t)oh * d->OW;
            for (int ow = 0; ow < d->OW; ow++) {
                if (add) src[(size_t)ow * d->S] += dst[ow];
                else dst[ow] = src[(size_t)ow * d->S];
            }
        }
}

size_t eng_res_proj_dcol_floats(const eng_node *n, size_t rows)
{
    proj_dims d = proj_get(n);
    return ((size_t)d.F * d.P * rows + 15) / 16 * 16 + d.cp * rows;
}

/* Identity: y = x + s. Projection, one GEMM for all rows: the strided shortcut gathered
 * channel-major, sub [C x rows·P] (col), T = W·sub [F x rows·P] (dcol), then per row and
 * filter y = x + T + b. (One sgemm per row before: rows small GEMMs of F x P x C.) */
void eng_res_add_fwd(eng_node *n, int rows)
{
    const float *s = n->peer->x;
    size_t e = (size_t)rows * n->out_size;
    if (!n->w) {
        lanes_add(n->x, s, n->y, e);
        return;
    }
    proj_dims d = proj_get(n);
    size_t ld = (size_t)rows * d.P;
    for (int r = 0; r < rows; r++) /* only read when add = 0 */
        proj_gather(&d, (float *)(s + (size_t)r * n->peer->in_size), n->col + (size_t)r * d.P, ld, 0);
    eng_sgemm(0, 0, d.F, (int)ld, d.C, 1.0f, n->w, d.C, n->col, (int)ld, 0.0f, n->dcol, (int)ld);
    for (int r = 0; r < rows; r++)
        for (int f = 0; f < d.F; f++) {
            size_t o = (size_t)r * n->out_size + (size_t)f * d.P;
            lanes_add(n->x + o, n->dcol + (size_t)f * ld + (size_t)r * d.P, n->y + o, (size_t)d.P);
            lanes_add_scalar(n->y + o, (size_t)d.P, n->b[f]);
        }
}

/* dx = dy. Identity: dL/ds is dy itself (the fork reads it there). Projection, one GEMM per
 * product: dy gathered filter-major, D [F x rows·P] (dcol); db = D's row sums; dW = D·subᵀ;
 * and dsub = Wᵀ·D [C x rows·P] (after D in dcol), scattered to the strided positions of
 * each row's dskip. */
void eng_res_add_bwd(eng_node *n, int rows)
{
    size_t e = (size_t)rows * n->out_size;
    if (n->dx) memcpy(n->dx, n->dy, e * sizeof(float));
    if (!n->w) return;
    proj_dims d = proj_get(n);
    size_t ld = (size_t)rows * d.P;
    float *D = n->dcol, *dsub = n->dcol + ((size_t)d.F * ld + 15) / 16 * 16;
    for (int r = 0; r < rows; r++)
        for (int f = 0; f < d.F; f++)
            memcpy(D + (size_t)f * ld + (size_t)r * d.P, n->dy + (size_t)r * n->out_size + (size_t)f * d.P,
                   (size_t)d.P * sizeof(float));
    for (int f = 0; f < d.F; f++) n->db[f] = lanes_sum(D + (size_t)f * ld, ld);
    eng_sgemm(0, 1, d.F, d.C, (int)ld, 1.0f, D, (int)ld, n->col, (int)ld, 0.0f, n->dw, d.C);
    if (!needs_ds(n)) return;
    eng_sgemm(1, 0, d.C, (int)ld, d.F, 1.0f, n->w, d.C, D, (int)ld, 0.0f, dsub, (int)ld);
    for (int r = 0; r < rows; r++) {
        float *ds = n->dskip + (size_t)r * n->peer->in_size;
        memset(ds, 0, n->peer->in_size * sizeof(float));
        proj_gather(&d, ds, dsub + (size_t)r * d.P, ld, 1);
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

/* Identity: forward reads x and s and writes y; backward copies dy to dx. Projection,
 * forward: the gather (cp read, cp written), the GEMM (W and sub read, T written), y = x +
 * T + b (x, T read, y written); backward: dy gathered (read, written), dW (D and sub read),
 * and with the shortcut's gradient Wᵀ·D (W, D read, dsub written), each dskip row zeroed
 * and dsub added at the strided positions (read, read and written). */
uint64_t eng_res_add_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->out_size, cp;
    if (!n->w) return dir == ENG_FWD ? 12 * e : (n->dx ? 8 * e : 0);
    proj_dims d = proj_get(n);
    cp = U64(rows) * d.cp;
    if (dir == ENG_FWD) return 4 * (4 * e + 3 * cp + n->n_w + n->n_b);
    uint64_t ds = needs_ds(n) ? n->n_w + e + 4 * cp + U64(rows) * n->peer->in_size : 0;
    return 4 * ((n->dx ? 2 * e : 0) + 3 * e + cp + n->n_w + ds);
}

int eng_res_add_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    if (!n->w) return 0;
    proj_dims d = proj_get(n);
    int N = rows * d.P; /* one GEMM per product for all rows */
    g[0] = (eng_gemm_shape){ 0, 0, d.F, N, d.C, 1 };
    g[1] = (eng_gemm_shape){ 0, 1, d.F, d.C, N, 1 };
    g[2] = (eng_gemm_shape){ 1, 0, d.C, N, d.F, 1 };
    return needs_ds(n) ? 3 : 2;
}
