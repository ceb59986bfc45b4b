/* conv_fft.c — conv2d by FFT (model.conv_algo = fft; Mathieu et al. 2013, Vasilache et al.
 * 2014) through FFTW's single-precision real transforms: stride 1, any kernel and padding;
 * it pays off for kernels of 5 and more.
 *
 * Every plane is taken at the padded size Hp x Wp = (H + 2·pad) x (W + 2·pad): a circular
 * correlation of that size equals the linear one at every kept output (o + k < Hp), and
 * the circular convolution of dy (OH x OW) with a K x K filter has no wrap either
 * (OH + K - 1 = Hp). Per frequency bin b (Hp·(Wp/2 + 1) of them, the half spectrum of a
 * real plane):
 *   forward  Y[b]  = conj(W[b]) · X[b]          (F x C complex matrix times C x S)
 *   dx       DX[b] = W[b]ᵀ · DY[b]
 *   dW       DW[b] = sum over the rows of conj(DY[b]) · X[b]ᵀ
 * each as one real GEMM on stacked real and imaginary parts: with X as [Xr; Xi] (2C x S),
 * Ŵ = [[Wr, Wi], [-Wi, Wr]] (2F x 2C) gives [Yr; Yi] = Ŵ·X, dx is Ŵᵀ·[DYr; DYi], and
 * G = [DYr; DYi]·[Xr; Xi]ᵀ gives DWr = G11 + G22, DWi = G12 - G21. FFTW computes
 * unnormalised transforms: inverse results are scaled by 1/(Hp·Wp).
 *
 * Plans: one r2c and one c2r plan per plane shape, made with FFTW_ESTIMATE (the same plan,
 * so the same bits, on every run; FFTW_MEASURE would time candidates and could pick
 * another) the first time a shape is prepared, under a mutex (FFTW's planner is not
 * thread-safe; executing a plan on new arrays is), and kept for the process. They are
 * executed on 64-byte aligned scratch planes, as aligned as the arrays they were made on. */
#include "conv_internal.h"

#include <fftw3.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define FFT_MAX_SHAPES 64

typedef struct { int h, w; fftwf_plan r2c, c2r; } fft_plans;

static fft_plans plans[FFT_MAX_SHAPES];
static int n_plans;
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

/* The plans of h x w planes, made on first use; NULL when FFTW could not plan them or the
 * table is full. */
static const fft_plans *plans_get(int h, int w)
{
    const fft_plans *found = NULL;
    pthread_mutex_lock(&plans_lock);
    for (int i = 0; i < n_plans && !found; i++)
        if (plans[i].h == h && plans[i].w == w) found = &plans[i];
    if (!found && n_plans < FFT_MAX_SHAPES) {
        float *r = fftwf_malloc(sizeof(float) * (size_t)h * w);
        fftwf_complex *c = fftwf_malloc(sizeof(fftwf_complex) * (size_t)h * (w / 2 + 1));
        fft_plans *p = &plans[n_plans];
        p->h = h;
        p->w = w;
        p->r2c = r && c ? fftwf_plan_dft_r2c_2d(h, w, r, c, FFTW_ESTIMATE) : NULL;
        p->c2r = r && c ? fftwf_plan_dft_c2r_2d(h, w, c, r, FFTW_ESTIMATE) : NULL;
        if (p->r2c && p->c2r) {
            found = p;
            n_plans++;
        } else {
            if (p->r2c) fftwf_destroy_plan(p->r2c);
            if (p->c2r) fftwf_destroy_plan(p->c2r);
        }
        fftwf_free(r);
        fftwf_free(c);
    }
    pthread_mutex_unlock(&plans_lock);
    return found;
}

/* The geometry of S rows: planes Hp x Wp, nb bins; workspace parts in floats (per bin, a
 * little more than): Ŵ nb·4FC, X nb·2C·S, Y nb·2F·S and two scratch planes (real, complex; +16 floats each to align
 * them). col = [Ŵ | X | Y | planes]; dcol = [G | DY | DX | planes]. */
typedef struct { conv_dims d; int Hp, Wp, Wc, S; size_t nb, W, X, Y, R, Z; } fft_geo;

/* Floats from one bin's rows x cols matrix to the next: 64 bytes more than its size, so
 * that the bins a spectrum is scattered over do not all fall into one L1 cache set (their
 * sizes are often multiples of 4 KB). */
static size_t bin_stride(int rows, int cols) { return conv_round16((size_t)rows * cols) + 16; }

static fft_geo fft_geo_of(const eng_node *n, int S)
{
    fft_geo g;
    g.d = conv_get(n);
    g.Hp = g.d.H + 2 * g.d.pad;
    g.Wp = g.d.W + 2 * g.d.pad;
    g.Wc = g.Wp / 2 + 1;
    g.S = S;
    g.nb = (size_t)g.Hp * g.Wc;
    g.W = g.nb * bin_stride(2 * g.d.F, 2 * g.d.C);
    g.X = g.nb * bin_stride(2 * g.d.C, S);
    g.Y = g.nb * bin_stride(2 * g.d.F, S);
    g.R = conv_round16((size_t)g.Hp * g.Wp) + 16;
    g.Z = conv_round16(2 * g.nb) + 16;
    return g;
}

size_t eng_fft_ws_floats(const eng_node *n, int chunk)
{
    fft_geo g = fft_geo_of(n, chunk);
    return g.W + g.X + g.Y + g.R + g.Z;
}

int eng_fft_prepare(const eng_node *n)
{
    fft_geo g = fft_geo_of(n, 1);
    if (plans_get(g.Hp, g.Wp)) return ENG_OK;
    return eng_fail(ENG_EINVAL, "conv: FFTW could not plan %dx%d transforms (or more than %d plane shapes); "
                    "use model.conv_algo = im2col", g.Hp, g.Wp, FFT_MAX_SHAPES);
}

static float *align64(float *p) { return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* The two scratch planes at ws (the end of col or dcol). */
typedef struct { const fft_plans *p; float *r; fftwf_complex *z; } fft_scratch;

static fft_scratch scratch_of(const fft_geo *g, float *planes)
{
    fft_scratch s = { plans_get(g->Hp, g->Wp), align64(planes), (fftwf_complex *)align64(planes + g->R) };
    return s;
}

/* The spectrum of an h x w block at src (row stride lds; may be NULL: zeros) placed at
 * (off, off) of a zero Hp x Wp plane, into the stacked layout: Z[b·ldb + i·stride] = real
 * part, Z[b·ldb + (i + half)·stride] = imaginary part. */
static void spectrum(const fft_geo *g, fft_scratch *s, const float *src, int h, int w, int lds, int off, float *Z,
                     size_t ldb, size_t half)
{
    memset(s->r, 0, (size_t)g->Hp * g->Wp * sizeof(float));
    for (int i = 0; i < h; i++) memcpy(s->r + (size_t)(i + off) * g->Wp + off, src + (size_t)i * lds, (size_t)w * sizeof(float));
    fftwf_execute_dft_r2c(s->p->r2c, s->r, s->z);
    for (size_t b = 0; b < g->nb; b++) {
        Z[b * ldb] = s->z[b][0];
        Z[b * ldb + half] = s->z[b][1];
    }
}

/* The inverse of a stacked spectrum (re at Z[b·ldb], im at Z[b·ldb + half]); the h x w
 * block at (off, off) of the plane, scaled by 1/(Hp·Wp), into dst (row stride ldd). */
static void inverse(const fft_geo *g, fft_scratch *s, const float *Z, size_t ldb, size_t half, int h, int w, int off,
                    float *dst, int ldd)
{
    for (size_t b = 0; b < g->nb; b++) {
        s->z[b][0] = Z[b * ldb];
        s->z[b][1] = Z[b * ldb + half];
    }
    fftwf_execute_dft_c2r(s->p->c2r, s->z, s->r);
    float scale = 1.0f / (float)((size_t)g->Hp * g->Wp);
    for (int i = 0; i < h; i++)
        for (int j = 0; j < w; j++) dst[(size_t)i * ldd + j] = s->r[(size_t)(i + off) * g->Wp + off + j] * scale;
}

/* Ŵ[b] (2F x 2C) from the filters: [[Wr, Wi], [-Wi, Wr]]. */
static void filter_spectra(const fft_geo *g, fft_scratch *s, const float *w, float *Wh)
{
    int F = g->d.F, C = g->d.C, K = g->d.K;
    size_t ldb = bin_stride(2 * F, 2 * C), row = (size_t)2 * C;
    for (int f = 0; f < F; f++)
        for (int c = 0; c < C; c++) {
            float *o = Wh + (size_t)f * row + c;
            spectrum(g, s, w + ((size_t)f * C + c) * K * K, K, K, K, 0, o, ldb, (size_t)C);
            for (size_t b = 0; b < g->nb; b++) {
                float *q = o + b * ldb;
                q[F * row + C] = q[0];      /* Wr */
                q[F * row] = -q[C];         /* -Wi */
            }
        }
}

/* Stacked spectra of S rows of P planes (h x w at src, placed at (off, off)): Z[b] is
 * 2P x S, plane p's real parts in row p, imaginary in row P + p. */
static void plane_spectra(const fft_geo *g, fft_scratch *s, const float *src, size_t row_size, int P, int h, int w,
                          int off, float *Z)
{
    size_t ldb = bin_stride(2 * P, g->S);
    for (int r = 0; r < g->S; r++)
        for (int p = 0; p < P; p++)
            spectrum(g, s, src + r * row_size + (size_t)p * h * w, h, w, w, off, Z + (size_t)p * g->S + r, ldb,
                     (size_t)P * g->S);
}

/* The inverse of stacked spectra Z[b] (2P x S): the h x w block at (off, off) of each
 * plane into S rows of P planes at dst. */
static void plane_inverses(const fft_geo *g, fft_scratch *s, const float *Z, int P, int h, int w, int off, float *dst,
                           size_t row_size)
{
    size_t ldb = bin_stride(2 * P, g->S);
    for (int r = 0; r < g->S; r++)
        for (int p = 0; p < P; p++)
            inverse(g, s, Z + (size_t)p * g->S + r, ldb, (size_t)P * g->S, h, w, off, dst + r * row_size + (size_t)p * h * w, w);
}

void eng_fft_fwd(eng_node *n, int rows)
{
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        fft_geo g = fft_geo_of(n, S);
        float *Wh = n->col, *X = Wh + g.W, *Y = X + g.X;
        fft_scratch s = scratch_of(&g, Y + g.Y);
        int F = g.d.F, C = g.d.C;
        CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_FFT);
        if (r0 == 0) filter_spectra(&g, &s, n->w, Wh);
        plane_spectra(&g, &s, n->x + (size_t)r0 * n->in_size, n->in_size, C, g.d.H, g.d.W, g.d.pad, X);
        CONV_STAGE_END(n, ENG_FWD, CONV_ST_FFT);
        CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_PRODUCT);
        eng_conv_point_gemms((int)g.nb, 0, 0, 2 * F, S, 2 * C, Wh, 2 * C, bin_stride(2 * F, 2 * C), X, S,
                             bin_stride(2 * C, S), 0.0f, Y, S, bin_stride(2 * F, S));
        CONV_STAGE_END(n, ENG_FWD, CONV_ST_PRODUCT);
        CONV_STAGE_BEGIN(n, ENG_FWD, CONV_ST_IFFT);
        plane_inverses(&g, &s, Y, F, g.d.OH, g.d.OW, 0, n->y + (size_t)r0 * n->out_size, n->out_size);
        CONV_STAGE_END(n, ENG_FWD, CONV_ST_IFFT);
    }
}

/* dW's spectra from G (2F x 2C per bin, summed over every chunk), then its inverse: the
 * K x K block at the origin of each plane. */
static void dw_inverse(const fft_geo *g, fft_scratch *s, float *G, float *dw)
{
    int F = g->d.F, C = g->d.C, K = g->d.K;
    size_t ldb = bin_stride(2 * F, 2 * C), row = (size_t)2 * C;
    for (int f = 0; f < F; f++)
        for (int c = 0; c < C; c++) {
            float *q = G + (size_t)f * row + c;
            for (size_t b = 0; b < g->nb; b++) {
                float *e = q + b * ldb, g11 = e[0], g12 = e[C], g21 = e[F * row], g22 = e[F * row + C];
                e[0] = g11 + g22;
                e[C] = g12 - g21;
            }
            inverse(g, s, q, ldb, (size_t)C, K, K, 0, dw + ((size_t)f * C + c) * K * K, K);
        }
}

/* X is the forward's when the node keeps its workspace and the batch was one chunk (as
 * im2col's col); Ŵ is recomputed. */
void eng_fft_bwd(eng_node *n, int rows)
{
    fft_geo g0 = fft_geo_of(n, n->chunk);
    float *Wh = n->col, *G = n->dcol;
    int F = g0.d.F, C = g0.d.C;
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        fft_geo g = fft_geo_of(n, S);
        float *X = Wh + g.W, *DY = G + g.W, *DX = DY + g.Y;
        fft_scratch s = scratch_of(&g, DX + g.X);
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_FFT);
        if (r0 == 0 && n->dx) filter_spectra(&g, &s, n->w, Wh);
        if (!(n->col_kept && r0 == 0 && S == rows))
            plane_spectra(&g, &s, n->x + (size_t)r0 * n->in_size, n->in_size, C, g.d.H, g.d.W, g.d.pad, X);
        plane_spectra(&g, &s, n->dy + (size_t)r0 * n->out_size, n->out_size, F, g.d.OH, g.d.OW, 0, DY);
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_FFT);
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_PRODUCT);
        eng_conv_point_gemms((int)g.nb, 0, 1, 2 * F, 2 * C, S, DY, S, bin_stride(2 * F, S), X, S, bin_stride(2 * C, S),
                             r0 == 0 ? 0.0f : 1.0f, G, 2 * C, bin_stride(2 * F, 2 * C));
        if (n->dx)
            eng_conv_point_gemms((int)g.nb, 1, 0, 2 * C, S, 2 * F, Wh, 2 * C, bin_stride(2 * F, 2 * C), DY, S,
                                 bin_stride(2 * F, S), 0.0f, DX, S, bin_stride(2 * C, S));
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_PRODUCT);
        if (!n->dx) continue;
        CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_IFFT);
        plane_inverses(&g, &s, DX, C, g.d.H, g.d.W, g.d.pad, n->dx + (size_t)r0 * n->in_size, n->in_size);
        CONV_STAGE_END(n, ENG_BWD, CONV_ST_IFFT);
    }
    CONV_STAGE_BEGIN(n, ENG_BWD, CONV_ST_IFFT);
    fft_scratch s = scratch_of(&g0, G + g0.W + g0.Y + g0.X);
    dw_inverse(&g0, &s, G, n->dw);
    CONV_STAGE_END(n, ENG_BWD, CONV_ST_IFFT);
}

/* Counts per call (B rows, floats x4): each plane transform reads its block and writes +
 * reads the scratch planes and its spectrum; the products read Ŵ (or G) and the spectra
 * and write theirs; the inverses read the spectra and write their block. */
uint64_t eng_fft_bytes(const eng_node *n, int rows, eng_dir dir)
{
    fft_geo g = fft_geo_of(n, rows);
    uint64_t B = (uint64_t)rows, plane = (uint64_t)g.Hp * g.Wp + 4 * g.nb, F = (uint64_t)g.d.F, C = (uint64_t)g.d.C;
    uint64_t x = B * n->in_size, yo = B * n->out_size, w = F * g.d.CKK;
    uint64_t wspec = w + F * C * plane + g.W, xspec = x + B * C * plane, yspec = yo + B * F * plane;
    if (dir == ENG_FWD) return 4 * (wspec + xspec + g.W + g.X + g.Y + yspec);
    uint64_t e = yspec + 2 * g.W + g.X + g.Y + F * C * plane + w;   /* dy spectra, dW product, dW inverse */
    if (!(n->col_kept && rows <= n->chunk)) e += xspec;
    if (n->dx) e += wspec + g.W + g.Y + g.X + xspec;                 /* Ŵ, dx product, dx inverses */
    return 4 * e;
}

int eng_fft_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    int S = n->chunk < rows ? n->chunk : rows;
    fft_geo f = fft_geo_of(n, S);
    int F = f.d.F, C = f.d.C;
    double calls = (double)f.nb * ((rows + n->chunk - 1) / n->chunk);
    g[0] = (eng_gemm_shape){ 0, 0, 2 * F, S, 2 * C, calls };
    g[1] = (eng_gemm_shape){ 0, 1, 2 * F, 2 * C, S, calls };
    g[2] = (eng_gemm_shape){ 1, 0, 2 * C, S, 2 * F, calls };
    return n->dx ? 3 : 2;
}
