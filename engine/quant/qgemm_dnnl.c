/* qgemm_dnnl.c — oneDNN's int8 matmul as a path of the int8 GEMM (the one file that calls
 * oneDNN): uint8 src [M x Kp] · int8 weights (our [N x Kp] rows, given to oneDNN as a
 * [Kp x N] matrix with strides {1, Kp}) + int32 bias -> int32 dst, no scales, so the result
 * is the same integer sum as the own kernels' (where oneDNN does not saturate: on CPUs
 * without VNNI its kernels may use vpmaddubsw, which saturates pairs at int16). One engine
 * and stream per process; one primitive per (M, N, Kp), rebuilt when M changes. */
#include "quant_internal.h"

#include <dnnl.h>
#include <omp.h>
#include <stdlib.h>

struct eng_dnnl_gemm {
    int M, N, Kp;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst;
};

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static int init_state;           /* 0 not tried, 1 ok, -1 failed */

static int init(void)
{
    if (init_state) return init_state > 0;
    init_state = -1;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) return 0;
    if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) return 0;
    init_state = 1;
    return 1;
}

int eng_qgemm_dnnl_available(void) { return init(); }

void eng_qgemm_dnnl_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }

void eng_dnnl_gemm_free(eng_dnnl_gemm *g)
{
    if (!g) return;
    if (g->prim) dnnl_primitive_destroy(g->prim);
    if (g->src) dnnl_memory_destroy(g->src);
    if (g->wei) dnnl_memory_destroy(g->wei);
    if (g->bias) dnnl_memory_destroy(g->bias);
    if (g->dst) dnnl_memory_destroy(g->dst);
    free(g);
}

static eng_dnnl_gemm *build(int M, int N, int Kp)
{
    eng_dnnl_gemm *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->M = M; g->N = N; g->Kp = Kp;
    dnnl_memory_desc_t src_md, wei_md, bias_md, dst_md;
    dnnl_dims_t sd = { M, Kp }, ss = { Kp, 1 }, wd = { Kp, N }, ws = { 1, Kp };
    dnnl_dims_t bd = { 1, N }, bs = { N, 1 }, dd = { M, N }, ds = { N, 1 };
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_memory_desc_init_by_strides(&src_md, 2, sd, dnnl_u8, ss) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&wei_md, 2, wd, dnnl_s8, ws) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&bias_md, 2, bd, dnnl_s32, bs) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&dst_md, 2, dd, dnnl_s32, ds) == dnnl_success &&
             dnnl_matmul_desc_init(&desc, &src_md, &wei_md, &bias_md, &dst_md) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&g->prim, pd) == dnnl_success &&
             dnnl_memory_create(&g->src, &src_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&g->wei, &wei_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&g->bias, &bias_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&g->dst, &dst_md, engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (!ok) { eng_dnnl_gemm_free(g); return NULL; }
    return g;
}

int eng_dnnl_gemm_run(eng_dnnl_gemm **gp, int M, int N, int Kp, const uint8_t *A, const int8_t *B,
                      const int32_t *bias, int32_t *C)
{
    if (!init()) return eng_fail(ENG_EINVAL, "oneDNN: no CPU engine");
    eng_dnnl_gemm *g = *gp;
    if (!g || g->M != M || g->N != N || g->Kp != Kp) {
        eng_dnnl_gemm_free(g);
        *gp = g = build(M, N, Kp);
        if (!g) return eng_fail(ENG_EINVAL, "oneDNN: no int8 matmul for %dx%dx%d", M, N, Kp);
    }
    dnnl_memory_set_data_handle(g->src, (void *)A);
    dnnl_memory_set_data_handle(g->wei, (void *)B);
    dnnl_memory_set_data_handle(g->bias, (void *)bias);
    dnnl_memory_set_data_handle(g->dst, C);
    dnnl_exec_arg_t args[4] = { { DNNL_ARG_SRC, g->src }, { DNNL_ARG_WEIGHTS, g->wei },
                                { DNNL_ARG_BIAS, g->bias }, { DNNL_ARG_DST, g->dst } };
    if (dnnl_primitive_execute(g->prim, stream, 4, args) != dnnl_success || dnnl_stream_wait(stream) != dnnl_success)
        return eng_fail(ENG_EINVAL, "oneDNN: the int8 matmul failed");
    return ENG_OK;
}
