/* conv_point.c — what the algorithm files share: the batched per-point GEMM of Winograd
 * (conv_winograd.c) and the FFT (conv_fft.c), and the key of a cached choice (conv.c's
 * auto and conv_onednn.c's layout). It sits apart from conv.c so that those files depend
 * only on this one and conv.c can dispatch to them without a file circle. */
#include "conv_internal.h"

#include <cblas.h>
#include <stdio.h>

void eng_conv_point_gemms(int npts, int ta, int tb, int M, int N, int K, const float *A, int lda, size_t sa,
                          const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc)
{
    for (int p = 0; p < npts; p++)
        eng_sgemm(ta, tb, M, N, K, 1.0f, A + p * sa, lda, B + p * sb, ldb, beta, C + p * sc, ldc);
}

/* v3: onednn joined the candidates, and strided layers have a choice (so S is in the key);
 * a v2 entry, chosen without them, is ignored. v4, every entry: onednn's 2-thread passes
 * moved from OpenMP threads to the engine's pool, and direct got new kernels
 * (conv_direct.c, several times faster on few-channel layers), so a v3 pick or layout was
 * timed on code that no longer runs. v5: auto times the GEMM-based candidates on the
 * backends eng_gemm_prepare chooses for their shapes; a v4 pick timed them on OpenBLAS
 * wherever no run had prepared those shapes yet (most of Winograd's, FFT's and the last
 * chunk's). */
void eng_conv_choice_key(const eng_node *n, int rows, const char *what, char *key, size_t cap)
{
    char cpu[160];
    if (prof_cpu_model(cpu, sizeof cpu)) snprintf(cpu, sizeof cpu, "unknown");
    snprintf(key, cap, "v5 %s%s%s|%s|%dT|C%d H%d W%d F%d K%d P%d S%d|rows %d", what, *what ? " " : "", cpu, eng_isa_name(eng_isa_current()),
             openblas_get_num_threads(), n->in_shape[0], n->in_shape[1], n->in_shape[2], n->out_shape[0], n->kernel, n->pad,
             n->stride > 1 ? n->stride : 1, rows);
    for (char *p = key; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
}
