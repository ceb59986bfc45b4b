/* sparse_bench.c — MaxK and the CBSR x dense kernel against their dense baselines, one
 * BLAS thread, contenders interleaved A B A B within each repetition.
 *   row 7a: CBSR x dense (B x d, k per row) · W [d x o]  vs  the dense sgemm (eng_sgemm: the backend nnbench chose)
 *   row 7b: the MaxK pair — maxk fwd + CBSR multiply fwd + its bwd (dW, dvalues) + maxk bwd —
 *           vs relu fwd + sgemm fwd + sgemm bwd (dW, dx) + relu bwd: the activation and the
 *           next layer's multiply, which is what MaxK changes (the layer's own multiply
 *           before the activation is the same in both and left out).
 *   info:   where the MaxK pair's time goes: the selection, the CBSR forward, the backward's
 *           dvalues and dW kernels (each alone), maxk's backward.
 * Output: "ENV ..." and "ROW<TAB>7<TAB>label<TAB>median<TAB>min<TAB>max<TAB>absolute<TAB>goal
 * <TAB>verdict" lines for tests/bench/run.sh. */
#include <cblas.h>
#include <stdio.h>

#include "../../engine/internal.h"
#include "../../engine/rng.h"
#include "bench.h"

#define B 1024
#define D 256
#define O 256
#define K 32

static void row(const char *label, const double *r, int n, const char *absolute, const char *goal, double need)
{
    stats s = stats_of(r, n);
    printf("ROW\t7\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\n", label, s.med, s.min, s.max, absolute, goal,
           s.med >= need ? "met" : "MISSED");
}

static eng_node node_of(eng_op_id op, size_t in, size_t out)
{
    eng_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.in_size = in;
    n.out_size = out;
    n.prof_fwd = n.prof_bwd = -1;
    return n;
}

int main(int argc, char **argv)
{
    eng_openblas_core_select(argv);
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    int reps = quick ? 3 : 7, inner = quick ? 5 : 20;
    openblas_set_num_threads(1);
    printf("ENV\tsparse_threads\t1\n");
    if (eng_isa_init()) { fprintf(stderr, "sparse_bench: %s\n", eng_error()); return 1; }
    printf("ENV\tsparse_isa\t%s\n", eng_isa_name(eng_isa_current())); /* the MaxK / CBSR kernels' path */
    float *x = malloc(sizeof(float) * B * D), *w = malloc(sizeof(float) * D * O);
    float *y = malloc(sizeof(float) * B * O), *dy = malloc(sizeof(float) * B * O);
    float *dw = malloc(sizeof(float) * D * O), *dx = malloc(sizeof(float) * B * D);
    float *a = malloc(sizeof(float) * B * D), *val = malloc(sizeof(float) * B * K);
    float *dval = malloc(sizeof(float) * B * K);
    int32_t *idx = malloc(sizeof(int32_t) * B * K);
    float *pack = aligned_alloc(64, sizeof(float) * ENG_CBSR_PACK_FLOATS(D));   /* as a model carves it */
    eng_rng r;
    eng_rng_seed(&r, 7, 7);
    for (size_t i = 0; i < (size_t)B * D; i++) x[i] = (float)eng_rng_normal(&r);
    for (size_t i = 0; i < (size_t)D * O; i++) w[i] = (float)(0.05 * eng_rng_normal(&r));
    for (size_t i = 0; i < (size_t)B * O; i++) dy[i] = (float)eng_rng_normal(&r);
    eng_maxk_select(x, B, D, K, val, idx);

    /* the op-table nodes, wired as model.c wires them */
    eng_node relu = node_of(ENG_OP_RELU, D, D), dense = node_of(ENG_OP_DENSE, D, O);
    relu.x = x; relu.y = a; relu.dy = dx; relu.dx = dx;
    dense.x = a; dense.y = y; dense.w = w; dense.dw = dw; dense.dy = dy; dense.dx = dx;
    eng_node mk = node_of(ENG_OP_MAXK, D, D), cb = node_of(ENG_OP_CBSR_DENSE, D, O);
    mk.k = cb.k = K;
    mk.x = x; mk.y = val; mk.idx = idx; mk.dy = dval; mk.dx = dx;
    cb.x = val; cb.idx = idx; cb.y = y; cb.w = w; cb.dw = dw; cb.dy = dy; cb.dx = dval; cb.ws = pack;

    /* the dense baseline on the backends nnbench chooses for these shapes (as a run would) */
    eng_gemm_shape sh[ENG_OP_MAX_GEMMS];
    int nsh = eng_ops[ENG_OP_DENSE].gemms(&dense, B, sh);
    if (eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 1, sh, nsh)) {
        fprintf(stderr, "sparse_bench: %s\n", eng_error());
        return 1;
    }
    char gd[256];
    eng_gemm_describe(gd, sizeof gd);
    printf("ENV\tsparse_gemm\t%s\n", gd);
    double r1[16], r2[16], share[16], t_sg = 0, t_cb = 0, t_dn = 0, t_mk = 0, part_sum[5] = { 0 };
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_s();
        for (int i = 0; i < inner; i++)
            eng_sgemm(0, 0, B, O, D, 1.0f, a, D, w, O, 0.0f, y, O);
        double t1 = now_s();
        for (int i = 0; i < inner; i++) eng_cbsr_mm(val, idx, B, K, w, D, O, y, pack);
        double t2 = now_s();
        for (int i = 0; i < inner; i++) {
            eng_ops[ENG_OP_RELU].forward(&relu, B);
            eng_ops[ENG_OP_DENSE].forward(&dense, B);
            eng_ops[ENG_OP_DENSE].backward(&dense, B);
            eng_ops[ENG_OP_RELU].backward(&relu, B);
        }
        double t3 = now_s();
        for (int i = 0; i < inner; i++) {
            eng_ops[ENG_OP_MAXK].forward(&mk, B);
            eng_ops[ENG_OP_CBSR_DENSE].forward(&cb, B);
            eng_ops[ENG_OP_CBSR_DENSE].backward(&cb, B);
            eng_ops[ENG_OP_MAXK].backward(&mk, B);
        }
        double t4 = now_s();
        /* the pair's parts, each alone: selection, forward, dvalues, dW, maxk backward */
        double part[5], tp = now_s();
        for (int q = 0; q < 5; q++) {
            for (int i = 0; i < inner; i++) {
                if (q == 0) eng_ops[ENG_OP_MAXK].forward(&mk, B);
                else if (q == 1) eng_ops[ENG_OP_CBSR_DENSE].forward(&cb, B);
                else if (q == 2) eng_cbsr_mm_bwd(val, idx, B, K, w, D, O, dy, dval, NULL, pack);
                else if (q == 3) eng_cbsr_mm_bwd(val, idx, B, K, w, D, O, dy, NULL, dw, pack);
                else eng_ops[ENG_OP_MAXK].backward(&mk, B);
            }
            double tq = now_s();
            part[q] = (tq - tp) / inner;
            part_sum[q] += part[q];
            tp = tq;
        }
        share[rep] = part[0] / (part[0] + part[1] + part[2] + part[3] + part[4]);
        r1[rep] = (t1 - t0) / (t2 - t1);
        r2[rep] = (t3 - t2) / (t4 - t3);
        t_sg += (t1 - t0) / inner; t_cb += (t2 - t1) / inner;
        t_dn += (t3 - t2) / inner; t_mk += (t4 - t3) / inner;
        fprintf(stderr, "sparse_bench: rep %d: sgemm %.3f ms, cbsr %.3f ms, relu+dense %.3f ms, maxk+cbsr %.3f ms\n",
                rep + 1, 1e3 * (t1 - t0) / inner, 1e3 * (t2 - t1) / inner, 1e3 * (t3 - t2) / inner, 1e3 * (t4 - t3) / inner);
    }
    char abs1[160], abs2[160];
    snprintf(abs1, sizeof abs1, "sgemm %.3f ms vs cbsr %.3f ms (mean), B=%d d=%d o=%d k=%d", 1e3 * t_sg / reps,
             1e3 * t_cb / reps, B, D, O, K);
    snprintf(abs2, sizeof abs2, "relu+dense %.3f ms vs maxk+cbsr %.3f ms fwd+bwd (mean)", 1e3 * t_dn / reps,
             1e3 * t_mk / reps);
    row("CBSR x dense / sgemm speed-up, d=256 k=32, 1T", r1, reps, abs1, ">= 3.00", 3.0);
    row("maxk+CBSR / relu+dense fwd+bwd speed-up, 1T", r2, reps, abs2, ">= 2.00", 2.0);
    char abs3[200];
    snprintf(abs3, sizeof abs3, "maxk fwd %.3f, cbsr fwd %.3f, dvalues %.3f, dW %.3f, maxk bwd %.3f ms (means, each alone)",
             1e3 * part_sum[0] / reps, 1e3 * part_sum[1] / reps, 1e3 * part_sum[2] / reps, 1e3 * part_sum[3] / reps,
             1e3 * part_sum[4] / reps);
    stats sel = stats_of(share, reps);
    printf("ROW\t7\tmaxk+CBSR parts: the selection's share, 1T\t%.3f\t%.3f\t%.3f\t%s\t-\tinfo\n", sel.med, sel.min, sel.max,
           abs3);
    free(x); free(w); free(y); free(dy); free(dw); free(dx); free(a); free(val); free(dval); free(idx); free(pack);
    return 0;
}
