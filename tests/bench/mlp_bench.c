/* mlp_bench.c — rows 1 and 3 of `make bench`: the Fashion-MNIST MLP (784-256-128-10, batch
 * 128, SGD+momentum, one epoch) as a bare loop over the same GEMM calls (through the engine's
 * entry point, on the kernels the engine chose), as the GEMM-only bound of each backend
 * (OpenBLAS, oneDNN, and the per-class choice), and through nnbench's engine with profiling
 * off and on; contenders interleaved, ratios per rep.
 *
 * Output: "ENV key value" lines, then "ROW<TAB>section<TAB>label<TAB>median<TAB>min<TAB>max<TAB>absolute
 * <TAB>goal<TAB>verdict" lines that tests/bench/run.sh turns into the one table.
 * `--single bare|engine` trains one epoch and prints "RESULT name threads samples/s acc"
 * (run.sh interleaves it with the PyTorch peer, which lives in another process).
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "../../engine/gemm_internal.h"
#include "bench.h"
#include "../../profiler/profiler.h"

#define IN 784
#define H1 256
#define H2 128
#define OUT 10
#define BATCH 128
#define LR 0.05f
#define MOMENTUM 0.9f
#define MAX_REPS 32

static const char *data_dir = "/usr/share/datasets/fashion-mnist";

/* ---- timing, random numbers, statistics -------------------------------------------- */

/* splitmix64: enough for init and shuffling; the bench needs no stream compatibility. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }
static double rng_normal(uint64_t *s)
{
    double u1 = rng_uniform(s), u2 = rng_uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- Fashion-MNIST from the gz IDX files (not timed) ------------------------------- */

typedef struct {
    int n;
    float *x;      /* n * IN, scaled to [0,1] */
    int32_t *y;
} dataset;

static int read_idx(const char *name, int want_dims, int max_n, uint8_t **out, int *n_out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", data_dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "mlp_bench: cannot open %s: %s (install dataset-fashion-mnist)\n",
                path, strerror(errno));
        return -1;
    }
    uint8_t hdr[16];
    int hlen = 4 + 4 * want_dims;
    if (gzread(f, hdr, (unsigned)hlen) != hlen || hdr[2] != 0x08 || hdr[3] != want_dims) {
        fprintf(stderr, "mlp_bench: %s: not an IDX file of %d dimension(s) of bytes\n", path, want_dims);
        gzclose(f);
        return -1;
    }
    size_t per = 1;
    int n = (int)((uint32_t)hdr[4] << 24 | (uint32_t)hdr[5] << 16 | (uint32_t)hdr[6] << 8 | hdr[7]);
    for (int d = 1; d < want_dims; d++) {
        const uint8_t *p = hdr + 4 + 4 * d;
        per *= (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
    if (max_n > 0 && max_n < n) n = max_n;
    size_t bytes = (size_t)n * per;
    uint8_t *buf = malloc(bytes);
    if (!buf || gzread(f, buf, (unsigned)bytes) != (int)bytes) {
        fprintf(stderr, "mlp_bench: %s: truncated (wanted %zu bytes of data)\n", path, bytes);
        free(buf);
        gzclose(f);
        return -1;
    }
    gzclose(f);
    *out = buf;
    *n_out = n;
    return 0;
}

static int load_set(const char *images, const char *labels, int max_n, dataset *ds)
{
    uint8_t *img = NULL, *lab = NULL;
    int ni, nl;
    if (read_idx(images, 3, max_n, &img, &ni) || read_idx(labels, 1, max_n, &lab, &nl)) {
        free(img);
        return -1;
    }
    if (ni != nl) {
        fprintf(stderr, "mlp_bench: %s has %d images but %s has %d labels\n", images, ni, labels, nl);
        free(img); free(lab);
        return -1;
    }
    ds->n = ni;
    ds->x = malloc((size_t)ni * IN * sizeof *ds->x);
    ds->y = malloc((size_t)ni * sizeof *ds->y);
    if (!ds->x || !ds->y) { free(img); free(lab); return -1; }
    for (size_t i = 0; i < (size_t)ni * IN; i++) ds->x[i] = (float)img[i] / 255.0f;
    for (int i = 0; i < ni; i++) ds->y[i] = lab[i];
    free(img);
    free(lab);
    return 0;
}

static void free_set(dataset *ds) { free(ds->x); free(ds->y); }

/* ---- the bare reference loop ------------------------------------------------------- */

/* All parameters in one buffer (w1 b1 w2 b2 w3 b3, weights as [in x out]), gradients and
 * velocity alike, activations preallocated: the step allocates nothing. */
enum { N_W1 = IN * H1, N_W2 = H1 * H2, N_W3 = H2 * OUT,
       N_PARAMS = N_W1 + H1 + N_W2 + H2 + N_W3 + OUT };

typedef struct {
    float *p, *g, *v;
    float *w1, *b1, *w2, *b2, *w3, *b3;
    float *gw1, *gb1, *gw2, *gb2, *gw3, *gb3;
    float *x, *h1, *h2, *z, *dz, *dh2, *dh1; /* batch buffers */
    int32_t *y;
    int *perm;
} bare_net;

static void slice(float *base, float **w1, float **b1, float **w2, float **b2, float **w3, float **b3)
{
    *w1 = base; *b1 = *w1 + N_W1; *w2 = *b1 + H1; *b2 = *w2 + N_W2; *w3 = *b2 + H2; *b3 = *w3 + N_W3;
}

static int bare_create(bare_net *m, int n_train, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->p = calloc(N_PARAMS, sizeof(float));
    m->g = calloc(N_PARAMS, sizeof(float));
    m->v = calloc(N_PARAMS, sizeof(float));
    m->x = malloc(sizeof(float) * BATCH * IN);
    m->h1 = malloc(sizeof(float) * BATCH * H1);
    m->h2 = malloc(sizeof(float) * BATCH * H2);
    m->z = malloc(sizeof(float) * BATCH * OUT);
    m->dz = malloc(sizeof(float) * BATCH * OUT);
    m->dh2 = malloc(sizeof(float) * BATCH * H2);
    m->dh1 = malloc(sizeof(float) * BATCH * H1);
    m->y = malloc(sizeof(int32_t) * BATCH);
    m->perm = malloc(sizeof(int) * (size_t)n_train);
    if (!m->p || !m->g || !m->v || !m->x || !m->h1 || !m->h2 || !m->z || !m->dz || !m->dh2 ||
        !m->dh1 || !m->y || !m->perm)
        return -1;
    slice(m->p, &m->w1, &m->b1, &m->w2, &m->b2, &m->w3, &m->b3);
    slice(m->g, &m->gw1, &m->gb1, &m->gw2, &m->gb2, &m->gw3, &m->gb3);
    /* He-normal weights (std sqrt(2/fan_in)), zero biases: the scale every contender uses. */
    uint64_t s = seed * 2654435761u + 1;
    for (int i = 0; i < N_W1; i++) m->w1[i] = (float)(rng_normal(&s) * sqrt(2.0 / IN));
    for (int i = 0; i < N_W2; i++) m->w2[i] = (float)(rng_normal(&s) * sqrt(2.0 / H1));
    for (int i = 0; i < N_W3; i++) m->w3[i] = (float)(rng_normal(&s) * sqrt(2.0 / H2));
    for (int i = 0; i < n_train; i++) m->perm[i] = i;
    return 0;
}

static void bare_free(bare_net *m)
{
    free(m->p); free(m->g); free(m->v); free(m->x); free(m->h1); free(m->h2); free(m->z);
    free(m->dz); free(m->dh2); free(m->dh1); free(m->y); free(m->perm);
}

/* v where x > 0, else +0, without a branch: relu's sign pattern is random, and a branch per
 * element (what `t > 0 ? t : 0` compiles to here) made this loop 30x slower than the
 * sgemm beside it. The engine's relu does the same (engine/ops.c). */
static inline float pass_if_positive(float v, float x)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u &= -(uint32_t)(x > 0.0f);
    memcpy(&v, &u, sizeof v);
    return v;
}

static void bias_relu(float *restrict h, const float *restrict b, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *restrict row = h + (size_t)r * cols;
        for (int c = 0; c < cols; c++) { float t = row[c] + b[c]; row[c] = pass_if_positive(t, t); }
    }
}

/* x[rows x IN] -> z[rows x OUT] logits (3 sgemm). */
static void bare_forward(bare_net *m, const float *x, int rows)
{
    eng_sgemm(0, 0, rows, H1, IN, 1.0f, x, IN, m->w1, H1, 0.0f, m->h1, H1);
    bias_relu(m->h1, m->b1, rows, H1);
    eng_sgemm(0, 0, rows, H2, H1, 1.0f, m->h1, H1, m->w2, H2, 0.0f, m->h2, H2);
    bias_relu(m->h2, m->b2, rows, H2);
    eng_sgemm(0, 0, rows, OUT, H2, 1.0f, m->h2, H2, m->w3, OUT, 0.0f, m->z, OUT);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < OUT; c++) m->z[r * OUT + c] += m->b3[c];
}

/* Softmax cross-entropy: mean loss; dz = (softmax - onehot) / rows. */
static double bare_loss(bare_net *m, const int32_t *y, int rows, int *correct)
{
    double loss = 0.0;
    int ok = 0;
    for (int r = 0; r < rows; r++) {
        const float *z = m->z + r * OUT;
        float *d = m->dz + r * OUT;
        int arg = 0;
        float mx = z[0];
        for (int c = 1; c < OUT; c++) if (z[c] > mx) { mx = z[c]; arg = c; }
        float sum = 0.0f;
        for (int c = 0; c < OUT; c++) { d[c] = expf(z[c] - mx); sum += d[c]; }
        float inv = 1.0f / sum;
        loss += -log((double)(d[y[r]] * inv) + 1e-30);
        for (int c = 0; c < OUT; c++) d[c] = d[c] * inv / (float)rows;
        d[y[r]] -= 1.0f / (float)rows;
        ok += arg == y[r];
    }
    if (correct) *correct = ok;
    return loss / rows;
}

static void col_sum(const float *d, int rows, int cols, float *out)
{
    memset(out, 0, sizeof(float) * (size_t)cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) out[c] += d[(size_t)r * cols + c];
}

static void relu_mask(float *restrict d, const float *restrict h, size_t n)
{
    for (size_t i = 0; i < n; i++) d[i] = pass_if_positive(d[i], h[i]);
}

/* Backward from dz (5 sgemm: 3 weight gradients, 2 input gradients; none for the data). */
static void bare_backward(bare_net *m, const float *x, int rows)
{
    eng_sgemm(1, 0, H2, OUT, rows, 1.0f, m->h2, H2, m->dz, OUT, 0.0f, m->gw3, OUT);
    col_sum(m->dz, rows, OUT, m->gb3);
    eng_sgemm(0, 1, rows, H2, OUT, 1.0f, m->dz, OUT, m->w3, OUT, 0.0f, m->dh2, H2);
    relu_mask(m->dh2, m->h2, (size_t)rows * H2);
    eng_sgemm(1, 0, H1, H2, rows, 1.0f, m->h1, H1, m->dh2, H2, 0.0f, m->gw2, H2);
    col_sum(m->dh2, rows, H2, m->gb2);
    eng_sgemm(0, 1, rows, H1, H2, 1.0f, m->dh2, H2, m->w2, H2, 0.0f, m->dh1, H1);
    relu_mask(m->dh1, m->h1, (size_t)rows * H1);
    eng_sgemm(1, 0, IN, H1, rows, 1.0f, x, IN, m->dh1, H1, 0.0f, m->gw1, H1);
    col_sum(m->dh1, rows, H1, m->gb1);
}

/* PyTorch's SGD momentum: v = mu v + g; p -= lr v. */
static void bare_sgd(bare_net *m)
{
    float *p = m->p, *v = m->v;
    const float *g = m->g;
    for (size_t i = 0; i < N_PARAMS; i++) { v[i] = MOMENTUM * v[i] + g[i]; p[i] -= LR * v[i]; }
}

static double bare_accuracy(bare_net *m, const dataset *te)
{
    int ok = 0;
    for (int i = 0; i < te->n; i += BATCH) {
        int rows = te->n - i < BATCH ? te->n - i : BATCH;
        int c;
        bare_forward(m, te->x + (size_t)i * IN, rows);
        bare_loss(m, te->y + i, rows, &c);
        ok += c;
    }
    return te->n ? (double)ok / te->n : 0.0;
}

/* split: the profiled run's step time (us a step) and its parts (step_split) */
typedef struct { double step_us, gemm_us, update_us, gather_us; } step_split;
typedef struct {
    double samples_per_s, test_acc, final_loss;
    step_split split;
    double joins, wait_us, pool_step_us; /* per step, the engine's (eng_run_result.pool) */
} epoch_result;

/* One epoch: shuffle, gather each batch into the preallocated buffer, step. Timed whole. */
static epoch_result bare_epoch(const dataset *tr, const dataset *te, uint64_t seed)
{
    epoch_result res = { 0, NAN, NAN, { 0, 0, 0, 0 }, 0, 0, 0 };
    bare_net m;
    if (bare_create(&m, tr->n, seed)) { bare_free(&m); fprintf(stderr, "mlp_bench: out of memory\n"); return res; }
    uint64_t s = seed ^ 0x5eedull;
    double t0 = now_s(), loss = 0.0;
    for (int i = tr->n - 1; i > 0; i--) {
        int j = (int)(rng_uniform(&s) * (i + 1));
        int t = m.perm[i]; m.perm[i] = m.perm[j]; m.perm[j] = t;
    }
    for (int i = 0; i < tr->n; i += BATCH) {
        int rows = tr->n - i < BATCH ? tr->n - i : BATCH;
        for (int r = 0; r < rows; r++) {
            int k = m.perm[i + r];
            memcpy(m.x + (size_t)r * IN, tr->x + (size_t)k * IN, IN * sizeof(float));
            m.y[r] = tr->y[k];
        }
        bare_forward(&m, m.x, rows);
        loss = bare_loss(&m, m.y, rows, NULL);
        bare_backward(&m, m.x, rows);
        bare_sgd(&m);
    }
    double dt = now_s() - t0;
    res.samples_per_s = tr->n / dt;
    res.final_loss = loss;
    res.test_acc = bare_accuracy(&m, te);
    bare_free(&m);
    return res;
}

/* The step's 8 GEMM calls at a full batch (what the bare loop and the engine issue). */
static const eng_gemm_shape step_shapes[8] = {
    { 0, 0, BATCH, H1, IN, 1 }, { 0, 0, BATCH, H2, H1, 1 }, { 0, 0, BATCH, OUT, H2, 1 }, { 1, 0, H2, OUT, BATCH, 1 },
    { 0, 1, BATCH, H2, OUT, 1 }, { 1, 0, H1, H2, BATCH, 1 }, { 0, 1, BATCH, H1, H2, 1 }, { 1, 0, IN, H1, BATCH, 1 },
};

/* Chooses the kernels of the bare loop's calls as the engine chooses them for its own. */
static int prepare_bare(int threads, int n_train)
{
    eng_gemm_shape sh[16];
    memcpy(sh, step_shapes, sizeof step_shapes);
    int n = 8, last = n_train % BATCH;
    for (int i = 0; i < 8; i++) sh[i].calls = n_train / BATCH; /* the full batches of an epoch */
    for (int i = 0; last && i < 8; i++) {
        sh[n] = step_shapes[i]; /* the rows are M of the NN/NT calls, K of the TN ones; once */
        if (sh[n].ta) sh[n].K = last;
        else sh[n].M = last;
        n++;
    }
    if (eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, threads, sh, n)) {
        fprintf(stderr, "mlp_bench: %s\n", eng_error());
        return -1;
    }
    return 0;
}

/* The GEMM-only bound: the step's 8 GEMM calls (full batches) timed alone, as many steps
 * as an epoch has, on one backend (be >= 0) or on the per-class choice (be < 0). No
 * elementwise work, no gather: the best any loop over these kernels can do. */
static double gemm_bound(int n_train, uint64_t seed, int be)
{
    bare_net m;
    double sps = 0.0;
    if (bare_create(&m, 1, seed) == 0) {
        uint64_t s = seed;
        for (int i = 0; i < BATCH * IN; i++) m.x[i] = (float)rng_uniform(&s);
        for (int i = 0; i < BATCH * OUT; i++) m.dz[i] = (float)(rng_uniform(&s) - 0.5) / BATCH;
        memset(m.h1, 0, sizeof(float) * BATCH * H1);
        memset(m.h2, 0, sizeof(float) * BATCH * H2);
        const float *A[8] = { m.x, m.h1, m.h2, m.h2, m.dz, m.h1, m.dh2, m.x };
        const float *B[8] = { m.w1, m.w2, m.w3, m.dz, m.w3, m.dh2, m.w2, m.dh1 };
        float *C[8] = { m.h1, m.h2, m.z, m.gw3, m.dh2, m.gw2, m.dh1, m.gw1 };
        gemm_call calls[8];
        for (int j = 0; j < 8; j++) {
            const eng_gemm_shape *g = &step_shapes[j];
            calls[j] = (gemm_call){ g->ta, g->tb, g->M, g->N, g->K, 1.0f, A[j], g->ta ? g->M : g->K, B[j],
                                    g->tb ? g->K : g->N, 0.0f, C[j], g->N, ENG_SPLIT_AUTO, NULL };
        }
        int steps = (n_train + BATCH - 1) / BATCH;
        double t0 = now_s();
        for (int k = 0; k < steps; k++)
            for (int j = 0; j < 8; j++) {
                const gemm_call *c = &calls[j];
                if (be >= 0) eng_gemm_run((eng_gemm_backend)be, c);
                else eng_sgemm(c->ta, c->tb, c->M, c->N, c->K, 1.0f, c->A, c->lda, c->B, c->ldb, 0.0f, c->C, c->ldc);
            }
        sps = (double)steps * BATCH / (now_s() - t0);
    }
    bare_free(&m);
    return sps;
}

/* ---- nnbench: the same model through the public engine API --------------------------- */

/* The experiment a user would write for this model (see samples/); written to a temp file
 * so the engine goes through its ordinary config path. */
static int engine_config(int n_train, int n_test, int threads, uint64_t seed, int profile,
                         eng_experiment **ex)
{
    char path[] = "/tmp/nnbench-mlp-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { fprintf(stderr, "mlp_bench: mkstemp: %s\n", strerror(errno)); return -1; }
    FILE *f = fdopen(fd, "w");
    if (!f) { close(fd); unlink(path); return -1; }
    fprintf(f,
            "[experiment]\nname = bench-mlp\nseed = %llu\n"
            "[data]\nsource = idx\npath = %s\nn = %d\nn_test = %d\nnormalize = scale\nshuffle = true\n"
            "[model]\nlayers = dense:%d:relu, dense:%d:relu, dense:%d\nloss = softmax_xent\ninit = he\n"
            "[train]\noptimizer = momentum\nlr = %g\nmomentum = %g\nbatch = %d\nepochs = 1\nthreads = %d\n"
            "[profile]\nenabled = %s\n",
            (unsigned long long)seed, data_dir, n_train, n_test, H1, H2, OUT, (double)LR,
            (double)MOMENTUM, BATCH, threads, profile ? "true" : "false");
    fclose(f);
    int rc = eng_experiment_load(path, NULL, 0, ex);
    unlink(path);
    if (rc) fprintf(stderr, "mlp_bench: engine config: %s\n", eng_error());
    return rc;
}

/* Where a profiled run's step time went, us a step: the dense layers' GEMM calls (their
 * scopes summed over the layers), the backward phase's own time (the optimizer update
 * fused into it, and the loop's calls between ops), data.gather. The test-set evaluation
 * runs dense.fwd too: only the training steps' share of its time counts, by FLOPs
 * (n_samples training rows, each 2 (IN·H1 + H1·H2 + H2·OUT) FLOPs forward; dense.bwd
 * runs only in training). */
static step_split step_split_of(prof_t *p, long n_samples)
{
    step_split sp = { 0, 0, 0, 0 };
    prof_row *rows = NULL;
    size_t n = 0;
    if (prof_rows(p, PROF_BY_SCOPE, &rows, &n)) return sp;
    double steps = 0, fwd_ns = 0, fwd_flops = 0, bwd_ns = 0, upd_ns = 0, gather_ns = 0, step_ns = 0;
    for (size_t i = 0; i < n; i++) {
        const prof_row *r = &rows[i];
        if (!strcmp(r->name, "step")) { step_ns = (double)r->total_ns; steps = (double)r->calls; }
        else if (!strcmp(r->name, "dense.fwd")) { fwd_ns += (double)r->self_ns; fwd_flops += (double)r->flops; }
        else if (!strcmp(r->name, "dense.bwd")) bwd_ns += (double)r->self_ns;
        else if (!strcmp(r->name, "backward")) upd_ns = (double)r->self_ns;
        else if (!strcmp(r->name, "data.gather")) gather_ns = (double)r->self_ns;
    }
    free(rows);
    double train_fwd_flops = 2.0 * (double)n_samples * (IN * H1 + H1 * H2 + H2 * OUT);
    if (steps > 0 && fwd_flops > 0) {
        double share = train_fwd_flops < fwd_flops ? train_fwd_flops / fwd_flops : 1.0;
        sp.step_us = step_ns / steps * 1e-3;
        sp.gemm_us = (fwd_ns * share + bwd_ns) / steps * 1e-3;
        sp.update_us = upd_ns / steps * 1e-3;
        sp.gather_us = gather_ns / steps * 1e-3;
    }
    return sp;
}

/* One epoch through eng_run_create + eng_run_train, as `nnbench run` does (no sink: the
 * store's cost is the store row's business). samples/s is the engine's own figure: the
 * sum of its step times (data, forward, backward, optimizer), evaluation excluded, like
 * the bare loop's. prof != NULL = profiling on. */
static epoch_result engine_epoch(int n_train, int n_test, int threads, uint64_t seed, int profile)
{
    epoch_result res = { 0, NAN, NAN, { 0, 0, 0, 0 }, 0, 0, 0 };
    eng_experiment *ex = NULL;
    if (engine_config(n_train, n_test, threads, seed, profile, &ex)) return res;
    prof_t *p = NULL;
    if (profile && !(p = prof_create(&(prof_options){ .counters = "", .quiet = 1 }))) {
        fprintf(stderr, "mlp_bench: prof_create: %s\n", prof_error());
        eng_experiment_free(ex);
        return res;
    }
    eng_run *r = NULL;
    if (eng_run_create(&ex->variants[0], ex->text, p, &r)) {
        fprintf(stderr, "mlp_bench: eng_run_create: %s\n", eng_error());
    } else {
        double t0 = now_s();
        int rc = eng_run_train(r, NULL);
        double wall = now_s() - t0;
        const eng_run_result *rr = eng_run_result_get(r);
        if (rc) fprintf(stderr, "mlp_bench: eng_run_train: %s\n", eng_error());
        else {
            res.samples_per_s = rr->samples_per_s;
            res.test_acc = rr->final_test_acc;
            res.final_loss = rr->final_train_loss;
            if (rr->pool.steps > 0) {
                double n = (double)rr->pool.steps;
                res.joins = (double)rr->pool.joins / n;
                res.wait_us = rr->pool.wait_s / n * 1e6;
                res.pool_step_us = rr->pool.step_s / n * 1e6;
            }
            if (p) res.split = step_split_of(p, n_train ? n_train : rr->steps * BATCH);
            if (getenv("MLP_BENCH_VERBOSE"))
                fprintf(stderr, "mlp_bench: engine %s: %.0f/s by step time, %.0f/s by wall incl. eval\n",
                        profile ? "prof" : "plain", rr->samples_per_s, rr->steps ? (double)n_train / wall : 0.0);
        }
        eng_run_destroy(r);
    }
    prof_destroy(p);
    eng_experiment_free(ex);
    return res;
}

/* ---- driver -------------------------------------------------------------------------- */

static void row(int section, const char *label, stats r, const char *absolute, const char *goal, const char *verdict)
{
    printf("ROW\t%d\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\n", section, label, r.med, r.min, r.max, absolute, goal, verdict);
}

static void kilo(char *buf, size_t n, double v) { snprintf(buf, n, "%.1fk", v / 1000.0); }

static int usage(void)
{
    fprintf(stderr,
            "usage: mlp_bench [--quick] [--reps N] [--threads T[,T]] [--n-train N] [--data DIR]\n"
            "       mlp_bench --single bare|engine --threads T [--seed S] [--n-train N]\n");
    return 2;
}

/* Why nnbench / the bound is what it is: that ratio is about (alone / the GEMM calls in the
 * step) x (1 - the share of the step outside them), both read from the profiled run. */
static void step_split_rows(int t, int reps, const double *r_gemm, const double *r_out, const double *step,
                            const double *gemm, const double *upd, const double *gather, const double *alone)
{
    if (!(stats_of(step, reps).med > 0)) return; /* the profile had no step rows */
    char label[96], abs_[400];
    double st = stats_of(step, reps).med, ge = stats_of(gemm, reps).med, al = stats_of(alone, reps).med;
    double up = stats_of(upd, reps).med, ga = stats_of(gather, reps).med;
    snprintf(label, sizeof label, "GEMM calls: in the step / alone (time), %dT", t);
    snprintf(abs_, sizeof abs_, "%.0f us a step in the profiled run (the dense ops; the test set's share removed) "
             "vs %.0f us alone (the chosen kernels' bound)", ge, al);
    row(1, label, stats_of(r_gemm, reps), abs_, "-", "info");
    snprintf(label, sizeof label, "time outside the GEMM calls / step time, %dT", t);
    snprintf(abs_, sizeof abs_, "step %.0f us: outside the GEMM calls %.0f us, of which backward's own (the fused "
             "update) %.0f, data.gather %.0f, the rest %.0f (bias, activations, the loss, the loop)", st, st - ge, up,
             ga, st - ge - up - ga);
    row(1, label, stats_of(r_out, reps), abs_, "-", "info");
}

/* One thread count: reps of bare loop, engine, engine profiled and the GEMM-only bounds
 * (each backend, and the choice), interleaved; the rows. eng gets the engine's samples/s
 * per rep. 1 when a contender failed. */
static int bench_threads(int t, int reps, uint64_t seed, const dataset *tr, const dataset *te, int n_train,
                         int n_test, double *eng)
{
    double bare[MAX_REPS], engp[MAX_REPS], acc_b[MAX_REPS], acc_e[MAX_REPS], bound[3][MAX_REPS];
    double off2[MAX_REPS], on2[MAX_REPS]; /* samples/s of each pair of off and of on runs */
    double r_eb[MAX_REPS], r_eg[MAX_REPS], r_bg[MAX_REPS], r_prof[MAX_REPS], best[MAX_REPS], trip[MAX_REPS];
    double r_gemm[MAX_REPS], r_out[MAX_REPS], sp_step[MAX_REPS], sp_gemm[MAX_REPS], sp_upd[MAX_REPS],
        sp_gather[MAX_REPS], alone[MAX_REPS], r_wait[MAX_REPS], joins[MAX_REPS], wait_us[MAX_REPS], st_us[MAX_REPS];
    static const char *const bname[3] = { "openblas", "onednn", "chosen" };
    for (int k = 0; k < reps; k++) {
        uint64_t sd = seed + (uint64_t)k;
        if (t > 1) trip[k] = prof_core_round_trip_ns(20000); /* the placement this rep starts on */
        openblas_set_num_threads(t);
        if (prepare_bare(t, tr->n)) return 1;
        epoch_result b = bare_epoch(tr, te, sd);
        epoch_result e = engine_epoch(n_train, n_test, t, sd, 0);
        epoch_result ep = engine_epoch(n_train, n_test, t, sd, 1);
        /* the profiler's cost from off, on, on, off: a drift of the machine's speed across
         * the four runs weighs on both sides alike (one pair read 0.93..1.12 over five reps) */
        epoch_result ep2 = engine_epoch(n_train, n_test, t, sd, 1);
        epoch_result e2 = engine_epoch(n_train, n_test, t, sd, 0);
        openblas_set_num_threads(t);
        if (prepare_bare(t, tr->n)) return 1;
        best[k] = 0;
        /* OpenBLAS's bound last: its worker spins (sched_yield) for ~0.1 s after its last
         * call, and the oneDNN bound run right after it lost that time to it at 2 threads */
        for (int i = 0; i < 3; i++) {
            int be = (i + 1) % 3; /* onednn, chosen, openblas */
            bound[be][k] = gemm_bound(tr->n, sd, be < 2 ? be : -1);
            if (bound[be][k] > best[k]) best[k] = bound[be][k];
        }
        bare[k] = b.samples_per_s, eng[k] = e.samples_per_s, engp[k] = ep.samples_per_s;
        acc_b[k] = b.test_acc, acc_e[k] = e.test_acc;
        if (!(bare[k] > 0 && eng[k] > 0 && engp[k] > 0 && best[k] > 0 && ep2.samples_per_s > 0 && e2.samples_per_s > 0)) {
            fprintf(stderr, "mlp_bench: %dT rep %d: a contender failed (see above)\n", t, k + 1);
            return 1;
        }
        r_eb[k] = eng[k] / bare[k];
        r_eg[k] = eng[k] / best[k];
        r_bg[k] = bare[k] / best[k];
        on2[k] = 2.0 / (1.0 / engp[k] + 1.0 / ep2.samples_per_s);
        off2[k] = 2.0 / (1.0 / eng[k] + 1.0 / e2.samples_per_s);
        r_prof[k] = off2[k] / on2[k]; /* time on / time off */
        /* the profiled run's step against the same GEMM calls alone, on the chosen kernels */
        alone[k] = BATCH / bound[2][k] * 1e6;
        sp_step[k] = ep.split.step_us, sp_gemm[k] = ep.split.gemm_us;
        sp_upd[k] = ep.split.update_us, sp_gather[k] = ep.split.gather_us;
        r_gemm[k] = sp_step[k] > 0 ? sp_gemm[k] / alone[k] : NAN;
        r_out[k] = sp_step[k] > 0 ? (sp_step[k] - sp_gemm[k]) / sp_step[k] : NAN;
        joins[k] = e.joins, wait_us[k] = e.wait_us, st_us[k] = e.pool_step_us;
        r_wait[k] = e.pool_step_us > 0 ? e.wait_us / e.pool_step_us : NAN;
        fprintf(stderr, "mlp_bench: %dT rep %d: bare %.0f/s (acc %.4f), nnbench %.0f/s (acc %.4f), profiled %.0f/s, "
                "GEMM-only openblas %.0f/s, onednn %.0f/s, chosen %.0f/s\n", t, k + 1, bare[k], acc_b[k], eng[k],
                acc_e[k], engp[k], bound[0][k], bound[1][k], bound[2][k]);
    }
    char label[96], abs_[400], a[32], b[32], c[32], env[200];
    size_t el = 0;
    for (int be = 0; be < 3; be++) {
        kilo(c, sizeof c, stats_of(bound[be], reps).med);
        el += (size_t)snprintf(env + el, sizeof env - el, "%s%s %s", be ? ", " : "", bname[be], c);
    }
    char gd[512];
    eng_gemm_describe(gd, sizeof gd);
    printf("ENV\tgemm_bound_%dT\t%s samples/s; the engine: %s\n", t, env, gd);
    if (t > 1) {
        /* NAN where the two threads did not get two CPUs at once (a loaded machine) */
        double got[MAX_REPS];
        int k = 0;
        for (int i = 0; i < reps; i++)
            if (!isnan(trip[i])) got[k++] = trip[i];
        if (k) {
            stats st = stats_of(got, k);
            printf("ENV\tcore_round_trip_%dT\tmedian %.0f ns (%.0f..%.0f) at the start of %d of %d reps: ~100 ns when "
                   "the cores share a last-level cache, several hundred when not\n", t, st.med, st.min, st.max, k, reps);
        } else
            printf("ENV\tcore_round_trip_%dT\tnot measured in any rep: the two threads did not get two CPUs at once "
                   "(a loaded machine)\n", t);
    }
    stats se = stats_of(eng, reps), sb = stats_of(bare, reps), sg = stats_of(best, reps);
    kilo(a, sizeof a, se.med); kilo(b, sizeof b, sb.med); kilo(c, sizeof c, sg.med);
    stats r = stats_of(r_eg, reps);
    snprintf(label, sizeof label, "nnbench / GEMM-only bound of the fastest backend, %dT", t);
    snprintf(abs_, sizeof abs_, "nnbench %s vs GEMM-only %s samples/s (8 GEMMs per step; bounds: %s)", a, c, env);
    row(1, label, r, abs_, ">= 0.90", r.med >= 0.9 ? "met" : "MISSED");
    r = stats_of(r_eb, reps);
    snprintf(label, sizeof label, "nnbench / bare loop, %dT", t);
    snprintf(abs_, sizeof abs_, "nnbench %s vs bare %s samples/s; test acc %.3f vs %.3f", a, b, stats_of(acc_e, reps).med,
             stats_of(acc_b, reps).med);
    row(1, label, r, abs_, ">= 0.90", r.med >= 0.9 ? "met" : "MISSED");
    snprintf(label, sizeof label, "bare loop / GEMM-only bound of the fastest backend, %dT", t);
    snprintf(abs_, sizeof abs_, "bare %s vs GEMM-only %s samples/s", b, c);
    row(1, label, stats_of(r_bg, reps), abs_, "-", "info");
    step_split_rows(t, reps, r_gemm, r_out, sp_step, sp_gemm, sp_upd, sp_gather, alone);
    if (t > 1) {
        snprintf(label, sizeof label, "the training thread's waits at the pool's joins / step time, %dT", t);
        snprintf(abs_, sizeof abs_, "%.1f jobs a step split over the threads; at their ends the training thread waited "
                 "%.1f us of a %.0f us step for the other thread's slabs (the hand-over and the slabs' imbalance)",
                 stats_of(joins, reps).med, stats_of(wait_us, reps).med, stats_of(st_us, reps).med);
        row(1, label, stats_of(r_wait, reps), abs_, "-", "info");
    }
    kilo(a, sizeof a, stats_of(off2, reps).med);
    kilo(c, sizeof c, stats_of(on2, reps).med);
    r = stats_of(r_prof, reps);
    snprintf(label, sizeof label, "nnbench profiler on / off (time), %dT", t);
    snprintf(abs_, sizeof abs_, "off %s vs on %s samples/s (runs off, on, on, off in each rep)", a, c);
    row(3, label, r, abs_, "<= 1.03", r.med <= 1.03 ? "met" : "MISSED");
    return 0;
}

int main(int argc, char **argv)
{
    eng_openblas_core_select(argv); /* the core nnbench itself runs on */
    int quick = 0, reps = 0, n_train = 0, n_threads = 0, threads[4];
    const char *single = NULL;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--reps") && v) { reps = atoi(v); i++; }
        else if (!strcmp(a, "--n-train") && v) { n_train = atoi(v); i++; }
        else if (!strcmp(a, "--seed") && v) { seed = strtoull(v, NULL, 10); i++; }
        else if (!strcmp(a, "--data") && v) { data_dir = v; i++; }
        else if (!strcmp(a, "--single") && v) { single = v; i++; }
        else if (!strcmp(a, "--threads") && v) {
            for (char *p = argv[++i]; *p && n_threads < 4;) {
                char *end;
                long t = strtol(p, &end, 10);
                if (end == p || t < 1 || t > 64) return usage();
                threads[n_threads++] = (int)t;
                p = *end == ',' ? end + 1 : end;
            }
        } else return usage();
    }
    if (reps <= 0) reps = quick ? 2 : 5;
    if (reps > MAX_REPS) reps = MAX_REPS;
    if (n_train <= 0) n_train = quick ? 10000 : 0;
    if (!n_threads) { threads[0] = 1; threads[1] = 2; n_threads = quick ? 1 : 2; }

    int n_test = quick ? 2000 : 0;
    if (single && !strcmp(single, "engine")) {
        epoch_result r = engine_epoch(n_train, n_test, threads[0], seed, 0);
        printf("RESULT\tnnbench\t%d\t%.1f\t%.4f\n", threads[0], r.samples_per_s, r.test_acc);
        return r.samples_per_s > 0 ? 0 : 1;
    }
    dataset tr, te;
    if (load_set("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", n_train, &tr)) return 1;
    if (load_set("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", n_test, &te)) {
        free_set(&tr);
        return 1;
    }

    if (single) {
        if (strcmp(single, "bare")) { free_set(&tr); free_set(&te); return usage(); }
        openblas_set_num_threads(threads[0]);
        if (prepare_bare(threads[0], tr.n)) { free_set(&tr); free_set(&te); return 1; }
        epoch_result r = bare_epoch(&tr, &te, seed);
        printf("RESULT\tbare\t%d\t%.1f\t%.4f\n", threads[0], r.samples_per_s, r.test_acc);
        free_set(&tr); free_set(&te);
        return r.samples_per_s > 0 ? 0 : 1;
    }

    printf("ENV\topenblas_core\t%s\n", openblas_get_corename());
    printf("ENV\topenblas_config\t%s\n", openblas_get_config());
    printf("ENV\topenblas_core_choice\t%s\n", eng_openblas_core_note());
    printf("ENV\topenblas_threads\t%d\n", openblas_get_num_threads()); /* as the environment left it */
    printf("ENV\ttrain_samples\t%d\n", tr.n);
    printf("ENV\treps\t%d\n", reps);
    int failed = 0;
    double eng_by_t[4][MAX_REPS];
    for (int ti = 0; ti < n_threads && !failed; ti++)
        failed = bench_threads(threads[ti], reps, seed, &tr, &te, n_train, n_test, eng_by_t[ti]);
    if (!failed && n_threads > 1 && threads[0] == 1) {
        double r[MAX_REPS];
        for (int k = 0; k < reps; k++) r[k] = eng_by_t[1][k] / eng_by_t[0][k];
        stats sr = stats_of(r, reps);
        char label[96], abs_[160], a[32], b[32];
        kilo(a, sizeof a, stats_of(eng_by_t[1], reps).med);
        kilo(b, sizeof b, stats_of(eng_by_t[0], reps).med);
        snprintf(label, sizeof label, "nnbench %dT / 1T (two threads pay)", threads[1]);
        snprintf(abs_, sizeof abs_, "%dT %s vs 1T %s samples/s (rep k against rep k)", threads[1], a, b);
        row(1, label, sr, abs_, ">= 1.35", sr.med >= 1.35 ? "met" : "MISSED");
    }
    free_set(&tr);
    free_set(&te);
    return failed;
}
