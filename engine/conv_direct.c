/* conv_direct.c — the direct convolution (model.conv_algo = direct, stride 1): forward,
 * dW and dx by vectorised loops on flat zero-padded planes, no GEMM, built for layers with
 * few channels (the Fashion CNN's 1 and 6), where im2col's matrix costs as much as its
 * GEMM. The kernels (conv_direct.inc) are compiled per instruction-set path; this file
 * packs, pads, dispatches and reduces. docs/convolution.md, "Direct". */
#if defined(__GNUC__) && !defined(__clang__)
/* the row copies below stay loops: a memcpy / memset call per row of 8-28 floats cost 12%
 * of the Fashion CNN's conv1 */
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif
#define _POSIX_C_SOURCE 200809L

#include "conv_internal.h"

#include <string.h>
#if ENG_ISA_X86
#include <immintrin.h>
#endif

#define DK_NF 6   /* filters per register block: the Fashion CNN's first layer has 6 */
#define DK_QA 64  /* flat output lengths are rounded to this: every path's strip divides it */
#define DK_TMAX 3 /* the most taps a path's dW block holds (avx512) */
#define DK_WMAX 16
#define DK_ALIGN 16 /* floats of a cache line: every workspace section starts on one */
#define DK_L1 (48 * 1024) /* bytes of x and dy per dW sample block: an L1 of Zen 4/5, recent Intel */

/* One flat pass: C input planes of Hp x Wp whose data rows are [top, top + rows) (zeros
 * above and below), K x K taps, outputs q in [0, Qn) (Qn = OH·Wp, the rows that are kept),
 * flat output planes Qp apart (Qn rounded up to DK_QA); narrow: strips of at most 2
 * vectors (dx, whose K-1-P rows of zeros above and below are then skipped more often). */
typedef struct { int C, Hp, Wp, K; size_t Qn, Qp; int top, rows, narrow; } dk_geo;

#define ISA_PATHS_INC "conv_direct.inc"
#include "isa_paths.h"

typedef void (*dk_fwd_fn)(const float *restrict, const float *restrict, const dk_geo *, float *restrict);
typedef void (*dk_dw_fn)(const float *restrict, size_t, const float *restrict, size_t, int, const dk_geo *, int,
                         float *restrict);
typedef void (*dk_fvfwd_fn)(const float *restrict, const float *restrict, const dk_geo *, int, int, int, float *restrict);
typedef void (*dk_fvdw_fn)(const float *restrict, size_t, const float *restrict, size_t, size_t, int, const dk_geo *, int,
                           int, int, float *restrict);
typedef struct { dk_fwd_fn fwd; dk_dw_fn dw; dk_fvfwd_fn fvfwd; dk_fvdw_fn fvdw; int lanes, taps; } dk_path;
#define DK_PATH(sfx, lanes) { dk_fwd_##sfx, dk_dw_##sfx, dk_fvfwd_##sfx, dk_fvdw_##sfx, lanes, dk_taps_##sfx }

/* The kernels of the current path; avx2's need FMA too (every AVX2 CPU known has it; one
 * without runs the generic kernels). */
static dk_path dk_current(void)
{
#if ENG_ISA_X86
    eng_isa isa = eng_isa_current();
    if (isa == ENG_ISA_AVX512) return (dk_path)DK_PATH(avx512, 16);
    if (isa == ENG_ISA_AVX2 && __builtin_cpu_supports("fma")) return (dk_path)DK_PATH(avx2, 8);
#endif
    return (dk_path)DK_PATH(generic, 4);
}

static size_t round_up(size_t a, size_t m) { return (a + m - 1) / m * m; }

/* Channels in lanes rather than flat rows, for nout output channels of rows of OW kept in
 * rows of Wp: when that fills more of the lanes (nout / nout rounded to the vector, against
 * OW / Wp times nout / nout rounded to DK_NF): the Fashion CNN's conv2 (16 filters, 8 of 12)
 * yes, its conv1 (6 filters, 24 of 28) no. */
static int dk_use_fv(const dk_path *k, int nout, int OW, int Wp)
{
    return (size_t)Wp * round_up((size_t)nout, DK_NF) > (size_t)OW * round_up((size_t)nout, (size_t)k->lanes);
}

/* dW by channels in lanes: as the forward decides, on the kernel sizes compiled for. */
static int dk_dw_fv(const dk_path *k, const conv_dims *d, int Wp)
{
    return dk_use_fv(k, d->F, d->OW, Wp) && (d->K == 3 || d->K == 5 || d->K == 7);
}

/* The passes of a layer and its workspace layout, in floats:
 * [packed weights | xp: padded inputs | dyf: flat or transposed dy (room for S rows; a dW
 *  block of rows that fits L1 uses the first ones) | out: one flat output | dq: dy
 *  padded for dx | acc: dW lane accumulators]. fx: forward (x padded by pad), bx: dx (dy
 * padded by q = K-1-pad, the filters rotated by 180 degrees, C and F swapped).
 *
 * bx's rows are OW + q floats, not OW + 2q: a row's right border is the next row's left
 * one. An output in column w < W reads columns up to w + K - 1 <= W + K - 2 of its rows;
 * past the row's end (W + pad = OW + q) that lands in the next row's first K - 2 - pad < q
 * columns, its left border: zeros, as the right border would have been (the last row's
 * overrun reads the next plane's top border, or the zeroed tail). On the Fashion CNN's
 * conv2 (8 x 8 dy, q = 4) a dx row is 12 floats, all of them kept, where it was 16 with 4
 * computed and dropped. */
typedef struct { dk_geo fx, bx; size_t xs, ds, dsf, wpk, xp, dyf, out, dq, acc; } dk_plan;

/* Floats one padded sample of g needs: its planes and the tail its last strip reads. */
static size_t dk_sample(const dk_geo *g)
{
    return round_up((size_t)g->C * g->Hp * g->Wp + DK_QA + (size_t)g->K, DK_ALIGN);
}

static dk_plan dk_plan_of(const conv_dims *d, int S)
{
    dk_plan p;
    int K = d->K, q = K - 1 - d->pad;
    p.fx = (dk_geo){ d->C, d->H + 2 * d->pad, d->W + 2 * d->pad, K, 0, 0, d->pad, d->H, 0 };
    p.fx.Qn = (size_t)d->OH * p.fx.Wp;
    p.fx.Qp = round_up(p.fx.Qn, DK_QA);
    p.bx = (dk_geo){ d->F, d->OH + 2 * q, d->OW + q, K, 0, 0, q, d->OH, q > 0 };
    p.bx.Qn = (size_t)d->H * p.bx.Wp;
    p.bx.Qp = round_up(p.bx.Qn, DK_QA);
    size_t F6 = round_up((size_t)d->F, DK_NF), C6 = round_up((size_t)d->C, DK_NF), KK = (size_t)K * K;
    /* blocks of DK_NF filters (flat) or of up to DK_WMAX lanes (channels in lanes) */
    size_t F16 = round_up((size_t)d->F, DK_WMAX), C16 = round_up((size_t)d->C, DK_WMAX);
    size_t wf = (F6 > F16 ? F6 : F16) * d->CKK, wb = (C6 > C16 ? C6 : C16) * d->F * KK;
    p.wpk = round_up(wf > wb ? wf : wb, DK_ALIGN);
    p.xs = dk_sample(&p.fx);
    p.xp = (size_t)S * p.xs;
    p.ds = F6 * p.fx.Qp > (size_t)d->P * F16 ? F6 * p.fx.Qp : round_up((size_t)d->P * F16, DK_ALIGN);
    /* the flat dy's own stride (ds is the larger of the two layouts): the more rows fit a
     * dW block, 2 where ds gave 1 on the Fashion CNN's conv1 */
    p.dsf = F6 * p.fx.Qp; /* <= ds, whole cache lines (Qp: a multiple of DK_QA) */
    p.dyf = (size_t)S * p.ds;
    p.out = F6 * p.fx.Qp > C6 * p.bx.Qp ? F6 * p.fx.Qp : C6 * p.bx.Qp;
    p.dq = dk_sample(&p.bx);
    p.acc = F6 * (d->CKK + DK_TMAX - 1) * DK_WMAX; /* >= CKK x F16, the channels-in-lanes dW */
    return p;
}

/* The workspace from its first 64-byte boundary (+ DK_ALIGN floats in its size): the
 * kernels' dy and output vectors are then whole cache lines (a split load costs two). */
static float *dk_ws(const eng_node *n)
{
    uintptr_t a = (uintptr_t)n->col;
    return n->col + ((64 - a % 64) % 64) / sizeof(float);
}

size_t eng_direct_ws_floats(const eng_node *n, int chunk)
{
    conv_dims d = conv_get(n);
    dk_plan p = dk_plan_of(&d, chunk);
    return p.wpk + p.xp + p.dyf + p.out + p.dq + p.acc + DK_ALIGN;
}

/* Packs W [F x C·K·K] in blocks of nb output filters (DK_NF, or the lanes for channels in
 * lanes), wpk[(blk·nin + i)·KK + t][o mod nb]: forward (rot = 0) filter f, channel c, tap
 * t = w[f][c][t]; dx (rot = 1) filter c, channel f, tap t = w[f][c][KK-1-t]. Filters past
 * the last are zero. */
static void dk_pack(const float *w, int F, int C, int K, int rot, int nb, float *wpk)
{
    int nout = rot ? C : F, nin = rot ? F : C, KK = K * K;
    for (int o = 0; o < (int)round_up((size_t)nout, (size_t)nb); o++)
        for (int i = 0; i < nin; i++)
            for (int t = 0; t < KK; t++) {
                float v = 0.0f;
                if (o < nout) v = rot ? w[((size_t)i * C + o) * KK + (KK - 1 - t)] : w[((size_t)o * C + i) * KK + t];
                wpk[(((size_t)(o / nb) * nin + i) * KK + t) * nb + o % nb] = v;
            }
}

/* Writes C planes H x W from src into dst's planes (plane floats apart, rows of Wp) at row
 * and column offset pad, and zeros in every other float of the planes (border, the columns
 * past each row, the rest of the plane): each float written once, no memset first. */
/* Short copies and fills in 4-float moves (GCC's -O2 does not vectorise a loop of unknown
 * length, and a library call per row costs more than the row). */
static inline void dk_copy(float *restrict d, const float *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) memcpy(d + i, s + i, 4 * sizeof(float));
    for (; i < n; i++) d[i] = s[i];
}

static inline void dk_zero(float *d, size_t n)
{
    static const float z[4];
    size_t i = 0;
    for (; i + 4 <= n; i += 4) memcpy(d + i, z, sizeof z);
    for (; i < n; i++) d[i] = 0.0f;
}

static void dk_pad(const float *src, int C, int H, int W_, int pad, float *dst, size_t plane, int Wp)
{
    size_t top = (size_t)pad * Wp, right = (size_t)(Wp - W_ - pad);
    for (int c = 0; c < C; c++) {
        float *o = dst + c * plane;
        dk_zero(o, top + (size_t)pad);
        o += top + (size_t)pad;
        for (int h = 0; h < H; h++, o += Wp) {
            dk_copy(o, src + ((size_t)c * H + h) * W_, (size_t)W_);
            dk_zero(o + W_, right + (h + 1 < H ? (size_t)pad : 0));
        }
        o -= pad; /* the last row's left border was not written: the rest starts there */
        dk_zero(o, (size_t)(dst + (c + 1) * plane - o));
    }
}

static size_t dk_plane(const dk_geo *g) { return (size_t)g->Hp * g->Wp; }

/* y [nout planes of OH x OW] from one padded sample xp through the packed filters wpk:
 * channels in lanes (fv: blocks of the path's lanes, written straight into y), or per block
 * of DK_NF filters the flat outputs, then their kept columns. */
static void dk_conv(const dk_path *k, int fv, const float *xp, const float *wpk, const dk_geo *g, int nout, int OH,
                    int OW, float *out, float *y)
{
    size_t taps = (size_t)g->C * g->K * g->K, yplane = (size_t)OH * OW;
    if (fv) {
        for (int o0 = 0; o0 < nout; o0 += k->lanes)
            k->fvfwd(xp, wpk + (size_t)o0 * taps, g, OH, OW, nout - o0 < k->lanes ? nout - o0 : k->lanes,
                     y + (size_t)o0 * yplane);
        return;
    }
    for (int o0 = 0; o0 < nout; o0 += DK_NF) {
        k->fwd(xp, wpk + (size_t)o0 * taps, g, out);
        for (int o = o0; o < nout && o < o0 + DK_NF; o++)
            for (int h = 0; h < OH; h++)
                dk_copy(y + (size_t)o * yplane + (size_t)h * OW, out + (size_t)(o - o0) * g->Qp + (size_t)h * g->Wp,
                        (size_t)OW);
    }
}

void eng_direct_fwd(eng_node *n, int rows)
{
    conv_dims d = conv_get(n);
    dk_plan p = dk_plan_of(&d, 1);
    dk_path k = dk_current();
    float *wpk = dk_ws(n), *xp = wpk + p.wpk, *out = xp + p.xp + p.dyf;
    int fv = dk_use_fv(&k, d.F, d.OW, p.fx.Wp);
    CONV_STAGE_BEGIN(n, 0, CONV_ST_REORDER);
    dk_pack(n->w, d.F, d.C, d.K, 0, fv ? k.lanes : DK_NF, wpk);
    memset(xp, 0, p.xs * sizeof(float));
    CONV_STAGE_END(n, 0, CONV_ST_REORDER);
    CONV_STAGE_BEGIN(n, 0, CONV_ST_PRIM);
    for (int r = 0; r < rows; r++) {
        dk_pad(n->x + (size_t)r * n->in_size, d.C, d.H, d.W, d.pad, xp, dk_plane(&p.fx), p.fx.Wp);
        dk_conv(&k, fv, xp, wpk, &p.fx, d.F, d.OH, d.OW, out, n->y + (size_t)r * n->out_size);
    }
    CONV_STAGE_END(n, 0, CONV_ST_PRIM);
}

/* The sum of a's n lanes (n a power of 2, at most DK_WMAX), halving: the same order on
 * every call, and 4 dependent adds for 16 lanes instead of 15. */
static float dk_lane_sum(const float *a, int n)
{
    float b[DK_WMAX];
    memcpy(b, a, (size_t)n * sizeof(float));
    for (int h = n / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) b[i] += b[i + h];
    return b[0];
}

/* dw [F x CKK] from the lane accumulators (blocks of DK_NF filters, groups of taps of the
 * path). */
static void dk_reduce(const dk_path *k, const float *acc, int F, size_t CKK, float *dw)
{
    size_t T = (size_t)k->taps, groups = (CKK + T - 1) / T, gsz = DK_NF * T * (size_t)k->lanes;
    for (int f = 0; f < F; f++)
        for (size_t t = 0; t < CKK; t++)
            dw[(size_t)f * CKK + t] = dk_lane_sum(acc + ((size_t)(f / DK_NF) * groups + t / T) * gsz +
                                                      ((size_t)(f % DK_NF) * T + t % T) * k->lanes,
                                                  k->lanes);
}

/* dW lane accumulators (flat) of S rows whose x is padded at xp: their dy flat with zero
 * columns (dyf), then blocks of DK_NF filters x the path's taps, each block's sums in
 * registers across the S rows. */
static void dk_dw_flat(eng_node *n, const conv_dims *d, const dk_plan *p, const dk_path *k, int r0, int S, const float *xp,
                       float *dyf, float *acc)
{
    /* dk_pad writes the planes; zeros in the planes of the last block past the last filter
     * (the kernels read no further) */
    size_t dplanes = (size_t)d->F * p->fx.Qp, blocks = round_up((size_t)d->F, DK_NF) * p->fx.Qp;
    for (int s = 0; s < S; s++) {
        memset(dyf + s * p->dsf + dplanes, 0, (blocks - dplanes) * sizeof(float));
        dk_pad(n->dy + (size_t)(r0 + s) * n->out_size, d->F, d->OH, d->OW, 0, dyf + s * p->dsf, p->fx.Qp, p->fx.Wp);
    }
    size_t groups = (d->CKK + (size_t)k->taps - 1) / (size_t)k->taps, gsz = (size_t)DK_NF * k->taps * k->lanes;
    for (int f0 = 0; f0 < d->F; f0 += DK_NF)
        for (size_t gi = 0; gi < groups; gi++)
            k->dw(xp, p->xs, dyf + (size_t)f0 * p->fx.Qp, p->dsf, S, &p->fx, (int)(gi * (size_t)k->taps),
                  acc + ((size_t)(f0 / DK_NF) * groups + gi) * gsz);
}

/* dW by channels in lanes of S rows whose x is padded at xp: their dy transposed to
 * [position][F rounded to the lanes] (dyT, zeros past F), then per block of filters and
 * channel every tap, into dwT [CKK x Fl]. */
static void dk_dw_lanes(eng_node *n, const conv_dims *d, const dk_plan *p, const dk_path *k, int r0, int S,
                        const float *xp, float *dyT, float *dwT)
{
    size_t Fl = round_up((size_t)d->F, (size_t)k->lanes);
    for (int s = 0; s < S; s++) {
        const float *dy = n->dy + (size_t)(r0 + s) * n->out_size;
        float *o = dyT + s * p->ds;
        for (size_t q = 0; q < d->P; q++, o += Fl) {
            for (int f = 0; f < d->F; f++) o[f] = dy[(size_t)f * d->P + q];
            for (size_t f = (size_t)d->F; f < Fl; f++) o[f] = 0.0f;
        }
    }
    for (size_t f0 = 0; f0 < Fl; f0 += (size_t)k->lanes)
        for (int c = 0; c < d->C; c++)
            k->fvdw(xp, p->xs, dyT + f0, p->ds, Fl, S, &p->fx, d->OH, d->OW, c, dwT + f0);
}

/* The rows of a chunk: dW over blocks of rows whose padded x and dy fit L1 (each block
 * written at the start of its buffers, so they stay there: the whole chunk's copies, 0.6 MB
 * on the Fashion CNN's conv1, came back from L2 for every block of taps), then dx per row
 * (the forward's passes on dy padded by K-1-pad, filters rotated: wpk). */
static void dk_bwd_chunk(eng_node *n, const conv_dims *d, const dk_plan *p, const dk_path *k, int r0, int S, float *ws)
{
    float *wpk = ws, *xp = wpk + p->wpk, *dyf = xp + p->xp, *out = dyf + p->dyf, *dq = out + p->out, *acc = dq + p->dq;
    int lanes = dk_dw_fv(k, d, p->fx.Wp);
    size_t xplanes = (size_t)d->C * dk_plane(&p->fx), per = p->xs + (lanes ? d->P * round_up((size_t)d->F, (size_t)k->lanes) : p->dsf);
    int sb = per * sizeof(float) >= DK_L1 ? 1 : (int)(DK_L1 / (per * sizeof(float)));
    CONV_STAGE_BEGIN(n, 1, CONV_ST_WEIGHTS);
    for (int s0 = 0; s0 < S; s0 += sb) {
        int nb = S - s0 < sb ? S - s0 : sb;
        for (int s = 0; s < nb; s++) {
            memset(xp + s * p->xs + xplanes, 0, (p->xs - xplanes) * sizeof(float));
            dk_pad(n->x + (size_t)(r0 + s0 + s) * n->in_size, d->C, d->H, d->W, d->pad, xp + s * p->xs, dk_plane(&p->fx),
                   p->fx.Wp);
        }
        if (lanes) dk_dw_lanes(n, d, p, k, r0 + s0, nb, xp, dyf, acc);
        else dk_dw_flat(n, d, p, k, r0 + s0, nb, xp, dyf, acc);
    }
    CONV_STAGE_END(n, 1, CONV_ST_WEIGHTS);
    if (!n->dx) return;
    CONV_STAGE_BEGIN(n, 1, CONV_ST_PRIM);
    int q = d->K - 1 - d->pad, fv = dk_use_fv(k, d->C, d->W, p->bx.Wp);
    for (int s = 0; s < S; s++) {
        dk_pad(n->dy + (size_t)(r0 + s) * n->out_size, d->F, d->OH, d->OW, q, dq, dk_plane(&p->bx), p->bx.Wp);
        dk_conv(k, fv, dq, wpk, &p->bx, d->C, d->H, d->W, out, n->dx + (size_t)(r0 + s) * n->in_size);
    }
    CONV_STAGE_END(n, 1, CONV_ST_PRIM);
}

void eng_direct_bwd(eng_node *n, int rows)
{
    conv_dims d = conv_get(n);
    int chunk = n->chunk > 0 ? n->chunk : rows;
    dk_plan p = dk_plan_of(&d, chunk < rows ? chunk : rows);
    dk_path k = dk_current();
    float *ws = dk_ws(n), *dq = ws + p.wpk + p.xp + p.dyf + p.out, *acc = dq + p.dq;
    CONV_STAGE_BEGIN(n, 1, CONV_ST_REORDER);
    if (n->dx) dk_pack(n->w, d.F, d.C, d.K, 1, dk_use_fv(&k, d.C, d.W, p.bx.Wp) ? k.lanes : DK_NF, ws);
    memset(dq, 0, (p.dq + p.acc) * sizeof(float));
    CONV_STAGE_END(n, 1, CONV_ST_REORDER);
    for (int r0 = 0; r0 < rows; r0 += chunk)
        dk_bwd_chunk(n, &d, &p, &k, r0, rows - r0 < chunk ? rows - r0 : chunk, ws);
    if (!dk_dw_fv(&k, &d, p.fx.Wp)) {
        dk_reduce(&k, acc, d.F, d.CKK, n->dw);
        return;
    }
    size_t Fl = round_up((size_t)d.F, (size_t)k.lanes);
    for (int f = 0; f < d.F; f++)
        for (size_t t = 0; t < d.CKK; t++) n->dw[(size_t)f * d.CKK + t] = acc[t * Fl + (size_t)f];
}

/* An estimate of the bytes moved (the op table's): fwd reads x, writes + reads xp per row,
 * reads W, writes + reads the flat output, writes y; bwd also writes + reads the copies of x
 * and dy and the accumulators, writes dW, and for dx pads dy again, runs the forward's
 * passes and writes dx. */
uint64_t eng_direct_bytes(const eng_node *n, int rows, eng_dir dir)
{
    conv_dims d = conv_get(n);
    dk_plan p = dk_plan_of(&d, 1);
    uint64_t B = (uint64_t)rows, x = B * n->in_size, w = (uint64_t)d.F * d.CKK, yo = B * d.F * d.P;
    uint64_t fo = B * round_up((size_t)d.F, DK_NF) * p.fx.Qp;
    if (dir == ENG_FWD) return 4 * (x + 2 * B * p.xs + w + 2 * fo + yo);
    uint64_t e = x + 2 * B * p.xs + yo + 2 * B * p.ds + 2 * p.acc + w;
    if (n->dx) e += w + yo + 2 * B * p.dq + 2 * B * round_up((size_t)d.C, DK_NF) * p.bx.Qp + x;
    return 4 * e;
}
