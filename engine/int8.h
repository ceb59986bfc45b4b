/* int8.h — int8 post-training quantization of a trained model (engine/quant/): integer
 * inference, its kernels and the C export. Its own header; engine.h includes it for the
 * layers above, and the quantization files include it through quant_internal.h. */
#ifndef NNBENCH_ENGINE_INT8_H
#define NNBENCH_ENGINE_INT8_H

#include "engine.h"

/* ---- int8 post-training quantization (quant.c) -------------------------------------- */

typedef enum { ENG_QSCHEME_MINMAX, ENG_QSCHEME_PERCENTILE } eng_qscheme;
typedef struct eng_qmodel eng_qmodel;
/* Quantizes a trained model: activation ranges from its forward on the first n_calib
 * training samples of ds (min-max, or the 0.01/99.99 percentiles), weights per output
 * channel; buffers for batches of up to max_batch rows; prof (may be NULL) gets the int8
 * path's scopes (quantize, im2col_u8, gemm_s8, requantize, maxpool_u8, dequantize). The GEMM
 * is the fastest own kernel of this CPU (eng_qmodel_set_kernel changes it). Free with
 * eng_qmodel_free. */
int eng_quantize(eng_model *m, const eng_dataset *ds, int n_calib, eng_qscheme scheme, int max_batch,
                 prof_t *prof, eng_qmodel **out);
void eng_qmodel_free(eng_qmodel *q);
/* Integer inference of rows [1, max_batch] of x (float inputs, as the fp32 model takes them);
 * logits [rows x n_out] as float (the last accumulators times their scales). */
int eng_qmodel_forward(eng_qmodel *q, const float *x, int rows, float *logits);
/* Mean loss (the model's loss) and accuracy (NAN without labels) over n rows. */
int eng_qmodel_evaluate(eng_qmodel *q, const float *x, const int32_t *labels, const float *targets, int n,
                        double *loss, double *acc);
/* Bytes a device stores: the arrays eng_qmodel_export_c writes (int8 weights; per output
 * channel an int32 bias and either int32 requantization multiplier and shift or, for the
 * logits layer, a float dequantization scale; 256-byte activation tables). The per-tensor
 * scales and zero points are constants in its code, not counted. */
size_t eng_qmodel_bytes(const eng_qmodel *q);
/* The int8 GEMM: "auto" (the own kernel for this CPU), "scalar", "avx2", "vnni" or
 * "onednn"; ENG_EINVAL if this machine lacks it. set_kernels: `large` for GEMMs of 16 rows
 * or more, `small` (NULL = the same) for fewer (batch-1 inference). The name of what is set
 * ("vnni", or "onednn (batch < 16: vnni)") stays valid until the next call on this thread. */
int eng_qmodel_set_kernel(eng_qmodel *q, const char *name);
int eng_qmodel_set_kernels(eng_qmodel *q, const char *large, const char *small);
const char *eng_qmodel_kernel(const eng_qmodel *q);
/* The kernel choice nnbench makes without --kernel: the own kernel of this CPU against
 * oneDNN's int8 matmul, each timed on the test set of ds (eng_qmodel_inference_sps, secs
 * each) at batch `big` and at batch 1, and each batch size given the faster. own[0], own[1]
 * and dnnl[0], dnnl[1] get the samples/s at batch big and 1 (dnnl NAN without oneDNN);
 * own_name (16 bytes) the own kernel's name. copy_kernels gives `to` the choice of `from`. */
void eng_qmodel_choose_kernels(eng_qmodel *q, const eng_dataset *ds, int big, double secs, char own_name[16],
                               double own[2], double dnnl[2]);
void eng_qmodel_copy_kernels(eng_qmodel *to, const eng_qmodel *from);
/* The same model (config, parameters) for batches of up to max_batch rows, unprofiled. */
int eng_model_clone(const eng_model *m, int max_batch, eng_model **out);
/* Inference samples/s over the test set of ds in batches of `batch` (at most the test set
 * and the model's max_batch; NAN otherwise), measured for at least secs seconds. */
double eng_model_inference_sps(eng_model *m, const eng_dataset *ds, int batch, double secs);
double eng_qmodel_inference_sps(eng_qmodel *q, const eng_dataset *ds, int batch, double secs);
/* Threads of the int8 and fp32 inference (OpenBLAS and oneDNN), for measurements. */
void eng_inference_threads(int n);
/* Writes a self-contained C file to f (no includes beyond <stdint.h>, <math.h>): the int8
 * arrays, scales and `int PREFIX_predict(const float *x)` / `void PREFIX_logits(const float
 * *x, float *out)` doing the same integer inference as eng_qmodel_forward, bit for bit.
 * prefix is a C identifier of any length. ENG_EINVAL, before writing anything, when a scale
 * is not finite (a diverged model); ENG_EIO when f reports a write error. The caller opens
 * and closes f (through a temporary file: a failed export leaves no half file). */
int eng_qmodel_export_c(const eng_qmodel *q, FILE *f, const char *prefix);

#endif
