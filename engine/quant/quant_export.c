/* quant_export.c — writes a quantized model as one self-contained C file for small devices:
 * int8 weights, int32 biases, requantization multipliers, scales as exact hex floats and a
 * reference integer inference for one sample that computes what eng_qmodel_forward does,
 * bit for bit (integer sums are exact in any order; the float steps are the same single
 * operations on the same values). */
#include "quant_internal.h"

#include <math.h>
#include <stdio.h>

/* Before element i of an initializer list, n to a line. */
static const char *sep(int i, int n) { return i == 0 ? "\n    " : i % n ? "," : ",\n    "; }

/* Arrays are named PREFIX_LAYER_WHAT, written straight to f: any prefix length a user
 * gives is the name the code refers to. */
static void arr_i8(FILE *f, const char *px, const char *layer, const int8_t *w, int N, int K, int Kp)
{
    fprintf(f, "static const int8_t %s_%s_w[%d] = {", px, layer, N * K);
    for (int c = 0, i = 0; c < N; c++)
        for (int k = 0; k < K; k++, i++) fprintf(f, "%s%d", sep(i, 24), w[(size_t)c * Kp + k]);
    fprintf(f, "\n};\n");
}

/* v[n] as an array of C type `type` (int32_t, or uint8_t for values known to fit). */
static void arr_int(FILE *f, const char *type, const char *px, const char *layer, const char *what, const int32_t *v,
                    int n)
{
    fprintf(f, "static const %s %s_%s_%s[%d] = {", type, px, layer, what, n);
    for (int i = 0; i < n; i++) fprintf(f, "%s%ld", sep(i, 12), (long)v[i]);
    fprintf(f, "\n};\n");
}

static void arr_f32(FILE *f, const char *px, const char *layer, const char *what, const float *v, int n)
{
    fprintf(f, "static const float %s_%s_%s[%d] = {", px, layer, what, n);
    for (int i = 0; i < n; i++) fprintf(f, "%s%af", sep(i, 6), (double)v[i]);
    fprintf(f, "\n};\n");
}

/* Every float the file holds must be a C literal: a diverged model's inf or NaN scale would
 * be printed as "inff" or "nanf" and the file would not compile. */
static int check_finite(const eng_qmodel *q)
{
    const char *where = NULL;
    if (!isfinite(q->in_scale)) where = "input";
    for (int i = 0; i < q->n_layers && !where; i++) {
        const eng_qlayer *L = &q->layers[i];
        if (L->last && !isfinite(L->out_scale)) where = L->name;
        for (int c = 0; L->deq && L->last && L->act == ENG_ACT_NONE && c < L->N && !where; c++)
            if (!isfinite(L->deq[c])) where = L->name;
    }
    if (!where) return ENG_OK;
    return eng_fail(ENG_EINVAL, "export: the int8 model's scale at %s is not finite: the model's values overflow "
                    "float (a diverged run?); nothing was written", where);
}

static const char helpers[] =
    "static inline int q_code(float x, float scale, int zp)\n"
    "{\n"
    "    float v = floorf(x / scale + 0.5f) + (float)zp;\n"
    "    return v >= 0.0f ? (v > 255.0f ? 255 : (int)v) : 0;\n"
    "}\n\n"
    "static inline int q_requant(int32_t acc, int32_t mult, int32_t shift, int zp, int lo)\n"
    "{\n"
    "    int64_t v = ((int64_t)acc * mult + ((int64_t)1 << (shift - 1))) >> shift;\n"
    "    v += zp;\n"
    "    if (v < lo) v = lo;\n"
    "    if (v > 255) v = 255;\n"
    "    return (int)v;\n"
    "}\n\n"
    "/* acc[n] = bias[n] + sum_k x[k] w[n][k] for P positions of a KxK window (dense: P = 1, K = 1). */\n"
    "static inline void q_layer(const uint8_t *x, int C, int H, int W, int KK, int OH, int OW, int N, const int8_t *w,\n"
    "                           const int32_t *bias, int32_t *acc)\n"
    "{\n"
    "    for (int oy = 0; oy < OH; oy++)\n"
    "        for (int ox = 0; ox < OW; ox++)\n"
    "            for (int n = 0; n < N; n++) {\n"
    "                const int8_t *wn = w + (long)n * C * KK * KK;\n"
    "                int32_t s = bias[n];\n"
    "                for (int c = 0; c < C; c++)\n"
    "                    for (int ky = 0; ky < KK; ky++)\n"
    "                        for (int kx = 0; kx < KK; kx++)\n"
    "                            s += (int32_t)x[((long)c * H + oy + ky) * W + ox + kx] * (int32_t)*wn++;\n"
    "                acc[(long)n * OH * OW + (long)oy * OW + ox] = s;\n"
    "            }\n"
    "}\n\n"
    "static inline void q_maxpool(const uint8_t *x, int C, int H, int W, uint8_t *y)\n"
    "{\n"
    "    int OH = H / 2, OW = W / 2;\n"
    "    for (int c = 0; c < C; c++)\n"
    "        for (int oy = 0; oy < OH; oy++)\n"
    "            for (int ox = 0; ox < OW; ox++) {\n"
    "                const uint8_t *p = x + ((long)c * H + 2 * oy) * W + 2 * ox;\n"
    "                uint8_t v = p[0];\n"
    "                if (p[1] > v) v = p[1];\n"
    "                if (p[W] > v) v = p[W];\n"
    "                if (p[W + 1] > v) v = p[W + 1];\n"
    "                y[((long)c * OH + oy) * OW + ox] = v;\n"
    "            }\n"
    "}\n\n";

int eng_qmodel_export_c(const eng_qmodel *q, FILE *f, const char *px)
{
    int rc = check_finite(q);
    if (rc) return rc;
    size_t maxbuf = q->in_size, maxacc = 1;
    for (int i = 0; i < q->n_layers; i++) {
        const eng_qlayer *L = &q->layers[i];
        if (L->out_size > maxbuf) maxbuf = L->out_size;
        if (L->N && (size_t)L->N * L->P > maxacc) maxacc = (size_t)L->N * L->P;
    }
    fprintf(f, "/* %s model.c — an int8 model exported by nnbench %s (nnbench export-model --int8).\n"
               " * Self-contained: no dependencies beyond <stdint.h> and <math.h> (floorf).\n"
               " * Activations uint8 per tensor, weights int8 per output channel, biases int32;\n"
               " * int8 x uint8 -> int32 sums, integer requantization between layers; the logits\n"
               " * are the last sums times their scales. %s_logits() and %s_predict() give, bit for\n"
               " * bit, what nnbench's int8 path gives for the same float input. %zu bytes of model. */\n"
               "#include <math.h>\n#include <stdint.h>\n\n",
            px, NNBENCH_VERSION, px, px, q->bytes);
    fprintf(f, "#define %s_IN %zu\n#define %s_OUT %d\n\n", px, q->in_size, px, q->n_out);
    for (int i = 0; i < q->n_layers; i++) {
        const eng_qlayer *L = &q->layers[i];
        if (L->kind != ENG_LAYER_DENSE && L->kind != ENG_LAYER_CONV) continue;
        fprintf(f, "/* %s: %d outputs x %d inputs */\n", L->name, L->N, L->K);
        arr_i8(f, px, L->name, L->w, L->N, L->K, L->Kp);
        arr_int(f, "int32_t", px, L->name, "bias", L->bias, L->N);
        if (eng_qlayer_dequantizes(L)) { /* the arrays eng_qlayer_bytes counts */
            arr_f32(f, px, L->name, "deq", L->deq, L->N);
        } else {
            arr_int(f, "int32_t", px, L->name, "mult", L->mult, L->N);
            arr_int(f, "uint8_t", px, L->name, "shift", L->shift, L->N);
        }
        if (L->has_lut) {
            fprintf(f, "static const uint8_t %s_%s_lut[256] = {", px, L->name);
            for (int c = 0; c < 256; c++) fprintf(f, "%s%d", sep(c, 24), L->lut[c]);
            fprintf(f, "\n};\n");
        }
        fprintf(f, "\n");
    }
    fputs(helpers, f);
    fprintf(f, "void %s_logits(const float *x, float *out)\n{\n"
               "    static uint8_t a[%zu], b[%zu];\n    static int32_t acc[%zu];\n"
               "    uint8_t *cur = a, *nxt = b, *t;\n"
               "    for (int i = 0; i < %zu; i++) cur[i] = (uint8_t)q_code(x[i], %af, %d);\n",
            px, maxbuf, maxbuf, maxacc, q->in_size, (double)q->in_scale, q->in_zp);
    for (int i = 0; i < q->n_layers; i++) {
        const eng_qlayer *L = &q->layers[i];
        const int *is = L->in_shape, *os = L->out_shape;
        fprintf(f, "    /* %s */\n", L->name);
        if (L->kind == ENG_LAYER_POOL) {
            fprintf(f, "    q_maxpool(cur, %d, %d, %d, nxt);\n    t = cur; cur = nxt; nxt = t;\n", is[0], is[1], is[2]);
        } else if (L->kind == ENG_LAYER_DENSE || L->kind == ENG_LAYER_CONV) {
            int conv = L->kind == ENG_LAYER_CONV;
            fprintf(f, "    q_layer(cur, %d, %d, %d, %d, %d, %d, %d, %s_%s_w, %s_%s_bias, acc);\n",
                    conv ? is[0] : (int)L->in_size, conv ? is[1] : 1, conv ? is[2] : 1, conv ? L->kernel : 1,
                    conv ? os[1] : 1, conv ? os[2] : 1, L->N, px, L->name, px, L->name);
            if (L->last && L->act == ENG_ACT_NONE) {
                fprintf(f, "    for (int i = 0; i < %zu; i++) out[i] = (float)acc[i] * %s_%s_deq[i / %d];\n    return;\n",
                        L->out_size, px, L->name, L->P);
                continue;
            }
            fprintf(f, "    for (int i = 0; i < %zu; i++) {\n"
                       "        int v = q_requant(acc[i], %s_%s_mult[i / %d], %s_%s_shift[i / %d], %d, %d);\n"
                       "        nxt[i] = (uint8_t)%s%s%s%s;\n    }\n    t = cur; cur = nxt; nxt = t;\n",
                    L->out_size, px, L->name, L->P, px, L->name, L->P, L->has_lut ? L->pre_zp : L->out_zp, L->lo,
                    L->has_lut ? px : "", L->has_lut ? "_" : "", L->has_lut ? L->name : "", L->has_lut ? "_lut[v]" : "v");
        }
        if (L->last)
            fprintf(f, "    for (int i = 0; i < %zu; i++) out[i] = %af * (float)((int)cur[i] - %d);\n",
                    L->out_size, (double)L->out_scale, L->out_zp);
    }
    fprintf(f, "}\n\nint %s_predict(const float *x)\n{\n    float out[%d];\n    %s_logits(x, out);\n"
               "    int best = 0;\n    for (int i = 1; i < %d; i++)\n        if (out[i] > out[best]) best = i;\n"
               "    return best;\n}\n", px, q->n_out, px, q->n_out);
    return ferror(f) ? eng_fail(ENG_EIO, "write error (disk full?)") : ENG_OK;
}
