/* quant_internal.h — what the int8 files share (quant.c, qgemm.c, qgemm_dnnl.c,
 * quant_export.c) and the engine tests: the quantized model's layers and the GEMM paths.
 * Private to engine/.
 *
 * Conventions of the integer path (the exported C file follows them too):
 *   activations  uint8, per tensor: real = scale * (q - zp), zp in [0, 255]
 *   weights      int8, symmetric per output channel: real = wscale[c] * q, q in [-127, 127]
 *   biases       int32 in the accumulator's scale (in_scale * wscale[c]); the input's zero
 *                point is folded in: bias[c] = round(b[c] / (in_scale wscale[c])) - in_zp Σ_k w[c][k]
 *   accumulate   int32 = bias + Σ_k a[k] w[k]  (uint8 x int8 -> int32, exact)
 *   requantize   q = clamp(zp_out + ((acc * mult[c] + 2^(shift[c]-1)) >> shift[c]), lo, 255)
 *                with mult in [2^30, 2^31) and lo = the zero point of 0 after relu, else 0;
 *                tanh/sigmoid/gelu go through a 256-entry table from the pre-activation's
 *                uint8 to the activation's
 *   logits       the last layer's accumulator times in_scale * wscale[c], as float
 */
#ifndef NNBENCH_ENGINE_QUANT_INTERNAL_H
#define NNBENCH_ENGINE_QUANT_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "../internal.h"

#define ENG_QK_ALIGN 32   /* reduction length padding (a ymm of uint8) */
#define ENG_QGEMM_SMALL_M 16  /* GEMMs of fewer rows use the model's path_small */

typedef enum { ENG_QGEMM_AUTO, ENG_QGEMM_SCALAR, ENG_QGEMM_AVX2, ENG_QGEMM_VNNI, ENG_QGEMM_ONEDNN } eng_qgemm_path;

int eng_qgemm_path_available(eng_qgemm_path p);
const char *eng_qgemm_path_name(eng_qgemm_path p);
int eng_qgemm_path_parse(const char *s, eng_qgemm_path *out);
eng_qgemm_path eng_qgemm_best_own(void);
/* C[M x N] = A[M x Kp] · B[N x Kp]^T + bias (NULL = 0). B16: B widened (avx2 path); A16:
 * scratch of M x Kp int16 (avx2 path). Not for ENG_QGEMM_ONEDNN (see qgemm_dnnl.c). */
void eng_qgemm(eng_qgemm_path p, int M, int N, int Kp, const uint8_t *A, const int8_t *B, const int16_t *B16,
               const int32_t *bias, int32_t *C, int16_t *A16);

/* The input's codes, d[i] = eng_qcode(x[i], scale, zp) (below), on the widest path isa.c
 * allows, the same codes on each (qgemm.c). */
void eng_qcodes_row(const float *x, size_t n, float scale, int zp, uint8_t *d);
/* A dense row's requantization, y[f] = eng_requant(a[f], mult[f], shift[f], zp, lo) for
 * f < n (below), on the widest path isa.c allows (AVX-512F: 8 lanes, AVX2: 4, else
 * scalar), the same integers on each (qgemm.c). */
void eng_qrequant_row(const int32_t *a, int n, const int32_t *mult, const int32_t *shift, int zp, int lo, uint8_t *y);

/* oneDNN's int8 matmul (qgemm_dnnl.c): one primitive per shape, created on first use. */
typedef struct eng_dnnl_gemm eng_dnnl_gemm;
int eng_qgemm_dnnl_available(void);
int eng_dnnl_gemm_run(eng_dnnl_gemm **g, int M, int N, int Kp, const uint8_t *A, const int8_t *B,
                      const int32_t *bias, int32_t *C);
void eng_dnnl_gemm_free(eng_dnnl_gemm *g);
void eng_qgemm_dnnl_threads(int n);   /* oneDNN's OpenMP threads */

typedef struct {
    eng_layer_kind kind;
    eng_act act;
    char name[24];
    int in_shape[3], out_shape[3];
    size_t in_size, out_size;     /* per row */
    int kernel;                   /* conv */
    int N, K, Kp;                 /* dense/conv: outputs (filters), reduction (in or C*K*K), padded */
    int P;                        /* conv: output positions per filter (dense: 1) */
    int8_t *w;                    /* [N x Kp], padding 0 */
    int16_t *w16;                 /* the same widened, for the avx2 path */
    int32_t *bias;                /* [N], input zero point folded in */
    float *wscale;                /* [N] */
    int32_t *mult;                /* [N] requantization multipliers */
    int32_t *shift;               /* [N] */
    float *deq;                   /* last layer: [N] in_scale * wscale[c] */
    float in_scale; int in_zp;    /* the input tensor */
    float out_scale; int out_zp;  /* the output (after the activation) */
    float pre_scale; int pre_zp;  /* the pre-activation (table activations only) */
    int lo;                       /* lowest output code (relu: the zero point) */
    int has_lut;
    uint8_t lut[256];
    int last;                     /* gives the logits */
    size_t y_stride;              /* output row stride in bytes (padded for a following dense) */
    uint8_t *y;                   /* [max_batch x y_stride] */
    int scope[4];                 /* profiler ids: gemm_s8, requantize, im2col_u8 / maxpool_u8, dequantize */
    eng_dnnl_gemm *dnnl;
} eng_qlayer;

struct eng_qmodel {
    int n_layers;
    eng_qlayer layers[ENG_MAX_LAYERS];
    int in_shape[3];
    size_t in_size, in_stride;    /* input row: in_size codes, padded to in_stride */
    float in_scale; int in_zp;
    int n_out, max_batch;
    eng_loss_kind loss;
    eng_qscheme scheme;
    eng_qgemm_path path;          /* GEMMs of at least ENG_QGEMM_SMALL_M rows */
    eng_qgemm_path path_small;    /* GEMMs of fewer rows (batch 1: where call overheads rule) */
    uint8_t *xq;                  /* quantized input [max_batch x in_stride] */
    uint8_t *col;                 /* conv im2col [max_batch * P x Kp] (largest conv) */
    int32_t *acc;                 /* accumulators [max_batch * P x N] (largest) */
    int16_t *a16;                 /* avx2 scratch, the size of col or of the widest input */
    prof_t *prof;
    int scope_quantize;
    size_t bytes;
};

/* The last layer without an activation gives float logits: its sums are multiplied by
 * deq[c]; every other dense/conv layer requantizes with mult[c] and shift[c]. */
static inline int eng_qlayer_dequantizes(const eng_qlayer *L) { return L->last && L->act == ENG_ACT_NONE; }

/* Bytes of the arrays model.c (eng_qmodel_export_c) holds for a dense/conv layer, which
 * are what a device stores: int8 weights [N x K], int32 biases [N], then float deq [N]
 * (the logits layer) or int32 mult and uint8 shift [N] (a shift is 0..62), and the uint8
 * activation table [256]. */
static inline size_t eng_qlayer_bytes(const eng_qlayer *L)
{
    size_t n = (size_t)L->N;
    return n * (size_t)L->K + n * sizeof(int32_t) +
           (eng_qlayer_dequantizes(L) ? n * sizeof(float) : n * (sizeof(int32_t) + 1)) + (L->has_lut ? 256 : 0);
}

/* x -> its uint8 code; the exported model.c has the same expression (q_code). Float all
 * the way: a huge or NaN x clamps instead of overflowing an integer conversion. */
static inline int eng_qcode(float x, float scale, int zp)
{
    float v = floorf(x / scale + 0.5f) + (float)zp;
    return v >= 0.0f ? (v > 255.0f ? 255 : (int)v) : 0;
}

/* Requantizes one accumulator (the formula above), exported verbatim to model.c. */
static inline int eng_requant(int32_t acc, int32_t mult, int32_t shift, int zp, int lo)
{
    int64_t v = ((int64_t)acc * mult + ((int64_t)1 << (shift - 1))) >> shift;
    v += zp;
    if (v < lo) v = lo;
    if (v > 255) v = 255;
    return (int)v;
}

#endif
