/* conv_point.c — the batched per-point GEMM that Winograd (conv_winograd.c) and the FFT
 * (conv_fft.c) share. It sits apart from conv.c so that those two files depend only on
 * this one and conv.c can dispatch to them without a file circle. */
#include "conv_internal.h"

void eng_conv_point_gemms(int npts, int ta, int tb, int M, int N, int K, const float *A, int lda, size_t sa,
                          const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc)
{
    for (int p = 0; p < npts; p++)
        eng_sgemm(ta, tb, M, N, K, 1.0f, A + p * sa, lda, B + p * sb, ldb, beta, C + p * sc, ldc);
}
