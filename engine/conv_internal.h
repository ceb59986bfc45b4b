/* conv_internal.h — what the conv2d algorithm files (conv.c, conv_direct.c, conv_winograd.c, conv_fft.c)
 * share: the layer's dimensions, the batched per-point GEMM, the profiled stages. */
#ifndef NNBENCH_CONV_INTERNAL_H
#define NNBENCH_CONV_INTERNAL_H

#include "internal.h"

typedef struct { int C, H, W, F, K, OH, OW, pad, st; size_t P, CKK; } conv_dims;

static inline conv_dims conv_get(const eng_node *n)
{
    conv_dims d = { n->in_shape[0], n->in_shape[1], n->in_shape[2], n->out_shape[0],
                    n->kernel, n->out_shape[1], n->out_shape[2], n->pad, n->stride > 0 ? n->stride : 1, 0, 0 };
    d.P = (size_t)d.OH * d.OW;
    d.CKK = (size_t)d.C * d.K * d.K;
    return d;
}

static inline size_t conv_round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* For each of npts points p: C_p = op(A_p)·op(B_p) + beta·C_p through eng_sgemm, the
 * matrices of point p at A + p·sa, B + p·sb, C + p·sc (Winograd's alpha² tile positions,
 * the FFT's frequency bins). In conv_point.c. */
void eng_conv_point_gemms(int npts, int ta, int tb, int M, int N, int K, const float *A, int lda, size_t sa,
                          const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc);

/* The profiled stages of a fast algorithm, inside the op's conv2d.fwd/.bwd scope (so the
 * op keeps only the time no stage took as its self time). Winograd: input, filter and
 * output transforms and the per-point GEMMs; FFT: forward transforms, the per-bin
 * products, inverse transforms (its 4th stage is unused); oneDNN: the reorders, the forward
 * or backward-data primitive, the backward-weights primitive. */
enum { CONV_ST_INPUT, CONV_ST_FILTER, CONV_ST_GEMM, CONV_ST_OUTPUT, CONV_STAGES };
enum { CONV_ST_FFT = 0, CONV_ST_PRODUCT = 1, CONV_ST_IFFT = 2 };
enum { CONV_ST_REORDER = 0, CONV_ST_PRIM = 1, CONV_ST_WEIGHTS = 2 };
#define CONV_STAGE_BEGIN(n, dir, st) PROF_BEGIN((n)->prof, (n)->prof_stage[dir][st])
#define CONV_STAGE_END(n, dir, st) PROF_END((n)->prof, (n)->prof_stage[dir][st], 0, 0)

/* Winograd F(m x m, 3x3), m = 2 or 4 (conv_winograd.c): 3x3 stride 1, any padding. */
size_t eng_wino_ws_floats(const eng_node *n, int m, int chunk);
void eng_wino_fwd(eng_node *n, int rows, int m);
void eng_wino_bwd(eng_node *n, int rows, int m);
uint64_t eng_wino_bytes(const eng_node *n, int m, int rows, eng_dir dir);
int eng_wino_gemms(const eng_node *n, int m, int rows, eng_gemm_shape *g);
/* Element-wise multiplications of one row's forward (per channel pair, times C·F): tiles
 * times alpha²; the direct count is OH·OW·9 (their ratio is the bench's multiplication ratio). */
uint64_t eng_wino_mults(const eng_node *n, int m);

/* FFT through FFTW (conv_fft.c): stride 1, any kernel and padding. eng_fft_prepare makes
 * (once per plane shape, under a lock: FFTW's planner is not thread-safe) the plans the
 * node will execute; ENG_EINVAL when FFTW cannot plan it. */
int eng_fft_prepare(const eng_node *n);
size_t eng_fft_ws_floats(const eng_node *n, int chunk);
void eng_fft_fwd(eng_node *n, int rows);
void eng_fft_bwd(eng_node *n, int rows);
uint64_t eng_fft_bytes(const eng_node *n, int rows, eng_dir dir);
int eng_fft_gemms(const eng_node *n, int rows, eng_gemm_shape *g);

/* The direct convolution (conv_direct.c): stride 1, any padding; its stages are oneDNN's
 * (CONV_ST_REORDER: the padding copies, CONV_ST_PRIM: forward or dx, CONV_ST_WEIGHTS: dW). */
size_t eng_direct_ws_floats(const eng_node *n, int chunk);
void eng_direct_fwd(eng_node *n, int rows);
void eng_direct_bwd(eng_node *n, int rows);
uint64_t eng_direct_bytes(const eng_node *n, int rows, eng_dir dir);

/* oneDNN's convolution primitives (conv_onednn.c): any stride and padding. unusable: ""
 * or why oneDNN cannot run the node's shape (or NNBENCH_ONEDNN_CONV_FAIL, for tests, is
 * set); prepare picks the layout (plain NCHW, or oneDNN's blocked formats with reorders)
 * by measuring both, cached in conv-choices; force_layout sets it (tests, bench). */
const char *eng_dnconv_unusable(const eng_node *n);
size_t eng_dnconv_ws_floats(const eng_node *n, int chunk);
int eng_dnconv_prepare(eng_node *n, int rows, int reps);
void eng_dnconv_fwd(eng_node *n, int rows);
void eng_dnconv_bwd(eng_node *n, int rows);
uint64_t eng_dnconv_bytes(const eng_node *n, int rows, eng_dir dir);
void eng_dnconv_force_layout(const eng_node *n, int blocked);
/* "plain" or "blocked"; the reorders (of the three primitives' arguments) it runs */
const char *eng_dnconv_layout_name(const eng_node *n);
int eng_dnconv_reorders(const eng_node *n, int rows);
/* The conv-choices key of what (an algorithm, "onednn-layout") for n's shape with rows
 * rows on this machine, kernel path and BLAS thread count (conv.c). */
void eng_conv_choice_key(const eng_node *n, int rows, const char *what, char *key, size_t cap);

#endif
