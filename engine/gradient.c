/* gradient.c — the gradient lab: transforms applied per parameter tensor between backward
 * and the optimizer step (znorm, centralize, clip_norm, clip_value), and the per-layer
 * telemetry (gradient norm/mean/std/max, update-to-weight ratio, zero fraction of
 * activations) taken every log_every steps. Everything is allocated at create; a step
 * allocates nothing. */
#include "internal.h"

/* eng_telem_after's and count_zeros's plain loops rely on GCC's vectoriser. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

/* eng_telem_after's reduction keeps LANES float partial sums so that GCC vectorises it
 * without -ffast-math (a single float accumulator is a serial dependency it must not
 * reorder). */
#define LANES 16
/* Float partial sums are folded into doubles every BLOCK elements: with 32 terms per lane
 * the float rounding stays near 1e-6 relative however long the tensor is. */
#define BLOCK 1024

const char *eng_grad_kind_name(eng_grad_kind k)
{
    static const char *const names[] = { "znorm", "centralize", "clip_norm", "clip_value" };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* ---- kernels -------------------------------------------------------------------------- */

/* Each kernel is one pass over its floats, written once (gradient_kernels.inc) and
 * compiled per instruction-set path on that path's native vectors (isa.c): 4, 8 or 16
 * floats. The sums are taken about c = g[0] (znorm, telemetry) so that a tensor whose mean
 * is large next to its spread keeps its variance (sum x^2 / n - mean^2 would cancel to
 * noise in float). */
#define GK_BLOCK BLOCK
#define ISA_PATHS_INC "gradient_kernels.inc"
#include "isa_paths.h"
#if ENG_ISA_X86
#define GK_TABLE(name) { name##_generic, name##_avx2, name##_avx512 }
#else
#define GK_TABLE(name) { name##_generic, name##_generic, name##_generic }
#endif
static void (*const grad_sums_isa[ENG_ISA_N])(const float *restrict, size_t, float, double *) = GK_TABLE(grad_sums);
static void (*const grad_stats_isa[ENG_ISA_N])(const float *restrict, size_t, float, double *) = GK_TABLE(grad_stats);
static void (*const grad_affine_isa[ENG_ISA_N])(float *restrict, size_t, float, float) = GK_TABLE(grad_affine);
static void (*const grad_clamp_isa[ENG_ISA_N])(float *restrict, size_t, float) = GK_TABLE(grad_clamp);
static void (*const grad_colsum_isa[ENG_ISA_N])(const float *restrict, size_t, size_t, float *restrict, int) =
    GK_TABLE(grad_colsum);
static void (*const grad_colcentre_isa[ENG_ISA_N])(float *restrict, size_t, size_t, const float *restrict) =
    GK_TABLE(grad_colcentre);

/* mean, variance and sum of squares from the sums about c (see sums_core) */
static void moments(float c, size_t n, double s1, double s2, double *mean, double *var, double *sumsq)
{
    double nn = n ? (double)n : 1.0, md = s1 / nn, v = s2 / nn - md * md;
    if (mean) *mean = c + md;
    if (var) *var = v > 0 ? v : 0;
    /* sum x^2 = sum (d + c)^2 */
    if (sumsq) { double q = s2 + 2.0 * c * s1 + nn * (double)c * c; *sumsq = n && q > 0 ? q : 0; }
}

/* ---- statistics in fixed pieces --------------------------------------------------------- */

/* A tensor's sums are taken in chunks of SUM_CHUNK floats and folded in chunk order (in
 * double), a dense W's column sums in blocks of ENG_SPLIT_UNIT rows folded in block order
 * (in float): the same bits whether one thread takes the pieces in turn or the pool's
 * slabs take them at once, each slab the pieces eng_split_range gives it — for a dense W
 * about the rows its GEMM slabs computed, still in that core's cache (at 2 threads one
 * thread's pass over the whole gradient read half of it from the other core; profiled
 * 2-thread runs in docs/gradient-lab.md, "At 2 threads"). */
#define SUM_CHUNK 4096

static size_t pieces(size_t n, size_t per) { return (n + per - 1) / per; }

/* Chunk k of g[0, n): its sums about c into o (3 doubles: sum d, sum d^2, max |g|). */
static void chunk_sums(eng_isa isa, const float *g, size_t n, float c, int want_max, size_t k, double *o)
{
    size_t a = k * SUM_CHUNK, len = n - a < SUM_CHUNK ? n - a : SUM_CHUNK;
    if (want_max) grad_stats_isa[isa](g + a, len, c, o);
    else grad_sums_isa[isa](g + a, len, c, o);
}

static void fold_sums(double *acc, const double *o)
{
    acc[0] += o[0];
    acc[1] += o[1];
    acc[2] = o[2] > acc[2] ? o[2] : acc[2];
}

static float row_mean(const float *restrict g, size_t n);

/* Pieces of one pass, and where they go until the fold. */
enum { P_SUMS, P_COLSUMS, P_ROWMEANS };
typedef struct {
    int kind, want_max;
    eng_isa isa;
    const float *g;
    size_t n, rows, cols;
    float c;
    double *sums;           /* P_SUMS: 3 per chunk */
    float *out;             /* P_COLSUMS: cols per block; P_ROWMEANS: one per row */
} piece_job;

static void piece_slab(void *ctx, int s, int nslab)
{
    const piece_job *j = ctx;
    const size_t u = ENG_SPLIT_UNIT;
    size_t lo, hi;
    switch (j->kind) {
    case P_SUMS:
        eng_split_range(pieces(j->n, SUM_CHUNK), 1, s, nslab, &lo, &hi);
        for (size_t k = lo; k < hi; k++) chunk_sums(j->isa, j->g, j->n, j->c, j->want_max, k, j->sums + 3 * k);
        break;
    case P_COLSUMS:
        eng_split_range(pieces(j->rows, u), 1, s, nslab, &lo, &hi);
        for (size_t b = lo; b < hi; b++) {
            size_t r0 = b * u, nr = j->rows - r0 < u ? j->rows - r0 : u;
            grad_colsum_isa[j->isa](j->g + r0 * j->cols, nr, j->cols, j->out + b * j->cols, 0);
        }
        break;
    case P_ROWMEANS:
        eng_split_range(j->rows, u, s, nslab, &lo, &hi);
        for (size_t r = lo; r < hi; r++) j->out[r] = row_mean(j->g + r * j->cols, j->cols);
        break;
    }
}

/* A pass over fewer floats runs on the calling thread: a hand-over to the pool costs ~2 us
 * here, what a pass over 32k floats saves at 2 threads (W2 of the Fashion MLP, 32768
 * floats: znorm at 2 threads took longer split than whole). */
#define PAR_MIN (8 * (size_t)ENG_POOL_GRAIN)

/* Whether a pass of n_pieces over `floats` goes to the pool: threads, pieces and floats enough. */
static int use_pool(size_t n_pieces, size_t floats)
{
    return n_pieces >= 2 && floats >= PAR_MIN && eng_pool_threads() >= 2;
}

/* j over the pool (use_pool), else on this thread. */
static void run_pieces(const piece_job *j, size_t n_pieces, size_t floats)
{
    if (!use_pool(n_pieces, floats) || !eng_pool_run(eng_pool_threads(), piece_slab, (void *)j))
        piece_slab((void *)j, 0, 1);
}

/* The sums of g[0, n) about c (out: sum d, sum d^2, max |g| when want_max). sums: room for
 * 3 doubles per chunk, where the pool's slabs leave theirs (use_pool); else this thread
 * alone, folding as it goes (the same bits). */
static void sums_of(double *sums, const float *g, size_t n, float c, int want_max, double out[3])
{
    eng_isa isa = eng_isa_current();
    size_t nc = pieces(n, SUM_CHUNK);
    out[0] = out[1] = out[2] = 0;
    if (sums && use_pool(nc, n)) {
        piece_job j = { .kind = P_SUMS, .want_max = want_max, .isa = isa, .g = g, .n = n, .c = c, .sums = sums };
        run_pieces(&j, nc, n);
        for (size_t k = 0; k < nc; k++) fold_sums(out, sums + 3 * k);
        return;
    }
    for (size_t k = 0; k < nc; k++) {
        double o[3];
        chunk_sums(isa, g, n, c, want_max, k, o);
        fold_sums(out, o);
    }
}

/* The mean of a row of n floats, as centralize takes it off. */
static float row_mean(const float *restrict g, size_t n)
{
    double o[3];
    sums_of(NULL, g, n, 0.0f, 0, o);
    return (float)(o[0] / (double)n);
}

/* mean[c] = the mean of column c of W [rows x cols]. blocks: room for cols floats per block
 * of ENG_SPLIT_UNIT rows, where the pool's slabs leave theirs (use_pool); else this thread
 * adds each block's sums to mean as it goes (the same bits). */
static void col_means(float *blocks, const float *g, size_t rows, size_t cols, float *restrict mean)
{
    eng_isa isa = eng_isa_current();
    const size_t u = ENG_SPLIT_UNIT, nb = pieces(rows, u);
    memset(mean, 0, cols * sizeof *mean);
    if (blocks && use_pool(nb, rows * cols)) {
        piece_job j = { .kind = P_COLSUMS, .isa = isa, .g = g, .rows = rows, .cols = cols, .out = blocks };
        run_pieces(&j, nb, rows * cols);
        for (size_t b = 0; b < nb; b++)
            for (size_t c = 0; c < cols; c++) mean[c] += blocks[b * cols + c];
    } else {
        for (size_t b = 0; b < nb; b++) {
            size_t r0 = b * u, nr = rows - r0 < u ? rows - r0 : u;
            grad_colsum_isa[isa](g + r0 * cols, nr, cols, mean, 1);
        }
    }
    const float inv = 1.0f / (float)rows;
    for (size_t c = 0; c < cols; c++) mean[c] *= inv;
}

void eng_grad_stats(const float *restrict g, size_t n, double *mean, double *var, double *sumsq, double *maxabs)
{
    double o[3];
    sums_of(NULL, g, n, n ? g[0] : 0.0f, 1, o);
    moments(n ? g[0] : 0.0f, n, o[0], o[1], mean, var, sumsq);
    if (maxabs) *maxabs = o[2];
}

double eng_grad_sumsq(const float *restrict g, size_t n)
{
    double o[3];
    sums_of(NULL, g, n, 0.0f, 0, o);
    return o[1];
}

void eng_grad_scale(float *restrict g, size_t n, float s)
{
    grad_affine_isa[eng_isa_current()](g, n, 0.0f, s);
}

void eng_grad_clamp(float *restrict g, size_t n, float lim)
{
    grad_clamp_isa[eng_isa_current()](g, n, lim);
}

/* znorm's map of n >= 2 floats: g' = (g - *mu) * *s, from one pass (sum and sum of squares). */
static void znorm_map(double *sums, const float *restrict g, size_t n, float eps, float *mu, float *s)
{
    double o[3], mean, var;
    sums_of(sums, g, n, g[0], 0, o);
    moments(g[0], n, o[0], o[1], &mean, &var, NULL);
    *mu = (float)mean;
    *s = (float)(1.0 / (sqrt(var) + eps));
}

/* Pass 1: the map; pass 2: (g - mean) * 1/(std + eps). */
void eng_grad_znorm(float *restrict g, size_t n, float eps)
{
    if (n < 2) return;
    float mu, s;
    znorm_map(NULL, g, n, eps, &mu, &s);
    grad_affine_isa[eng_isa_current()](g, n, mu, s);
}

void eng_grad_centralize(float *restrict g, size_t rows, size_t cols, int by_col, float *restrict colsum)
{
    eng_isa isa = eng_isa_current();
    if (by_col) {
        /* dense W [in x out]: output c's fan-in is column c */
        if (rows < 2) return;
        col_means(NULL, g, rows, cols, colsum);
        grad_colcentre_isa[isa](g, rows, cols, colsum);
    } else {
        /* conv W [F x C*K*K]: filter r's fan-in is row r, still in cache for the subtract */
        if (cols < 2) return;
        for (size_t r = 0; r < rows; r++)
            grad_affine_isa[isa](g + r * cols, cols, row_mean(g + r * cols, cols), 1.0f);
    }
}

/* ---- the transform pipeline ----------------------------------------------------------- */

/* One profiler scope per transform (and one for telemetry); -1 when profiling is off. */
static int register_scope(prof_t *prof, const char *name, int *id)
{
    *id = -1;
    if (prof && (*id = prof_register(prof, name, NULL, PROF_OP)) < 0)
        return eng_fail(ENG_EINVAL, "gradient: the profiler's scope table is full at %s (%s)", name, prof_error());
    return ENG_OK;
}

void eng_model_param_view(eng_model *m, eng_param_view *v)
{
    memset(v, 0, sizeof *v);
    v->params = m->params;
    v->grads = m->grads;
    v->n_params = m->n_params;
    v->n_layers = m->n_layers;
    for (int l = 0; l < m->n_layers; l++) {
        const eng_layer *L = &m->layers[l];
        eng_param_layer *P = &v->layers[l];
        snprintf(P->name, sizeof P->name, "%s", L->name);
        P->w = L->w; P->dw = L->dw; P->b = L->b; P->db = L->db;
        P->n_w = L->n_w; P->n_b = L->n_b; P->w_off = L->w_off; P->b_off = L->b_off;
        /* dense W [in x out]: fan-in by column; conv W [F x C*K*K] and a residual projection
         * W [F x C]: by row */
        P->by_col = L->kind == ENG_LAYER_DENSE;
        P->one_block = L->kind == ENG_LAYER_SEQ;
        P->no_centre = L->kind == ENG_LAYER_BN;
        P->w_rows = P->by_col ? L->in_size : L->n_b;
        P->w_cols = P->by_col ? L->out_size : (L->n_b ? L->n_w / L->n_b : 0);
        if (L->act != ENG_ACT_NONE) { P->a = L->a; P->a_width = L->out_size; P->a_rows = &m->rows; }
    }
}

struct eng_grad {
    eng_param_view v;
    prof_t *prof;
    int n;
    eng_grad_kind kind[ENG_MAX_GRAD_TRANSFORMS];
    int scope[ENG_MAX_GRAD_TRANSFORMS];
    float eps, clip_norm, clip_value;
    /* centralize's means, layer l's from means + mean_off[l]: a dense W's columns or a conv
     * W's rows (they live until the update that a deferred map hands them to) */
    float *means;
    size_t mean_off[ENG_MAX_LAYERS];
    /* the pieces of a pass over the pool until their fold (sums_of, col_means) */
    double *sums;
    float *blocks;
};

int eng_grad_create(const eng_train_config *tc, eng_model *m, prof_t *prof, eng_grad **out)
{
    eng_param_view v;
    eng_model_param_view(m, &v);
    return eng_grad_create_view(tc, &v, prof, out);
}

/* Centralize's means and column-sum blocks; -1 when out of memory. */
static int alloc_centre(eng_grad *g)
{
    const eng_param_view *v = &g->v;
    size_t n_means = 0, n_blocks = 1;
    for (int l = 0; l < v->n_layers; l++) {
        const eng_param_layer *L = &v->layers[l];
        /* each layer's on a 64-byte line of its own: the update reads a column map's means
         * with the gradient's rows, a vector at a time */
        g->mean_off[l] = n_means;
        n_means += ((L->by_col ? L->w_cols : L->w_rows) + 15) / 16 * 16;
        size_t nb = L->by_col ? pieces(L->w_rows, ENG_SPLIT_UNIT) * L->w_cols : 0;
        n_blocks = nb > n_blocks ? nb : n_blocks;
    }
    g->means = prof_malloc((n_means ? n_means : 1) * sizeof(float));
    g->blocks = prof_malloc(n_blocks * sizeof(float));
    return g->means && g->blocks ? 0 : -1;
}

int eng_grad_create_view(const eng_train_config *tc, const eng_param_view *v, prof_t *prof, eng_grad **out)
{
    *out = NULL;
    if (tc->n_gradient < 0 || tc->n_gradient > ENG_MAX_GRAD_TRANSFORMS)
        return eng_fail(ENG_EINVAL, "gradient: at most %d transforms, got %d", ENG_MAX_GRAD_TRANSFORMS, tc->n_gradient);
    for (int i = 0; i < tc->n_gradient; i++) {
        if ((unsigned)tc->gradient[i] > ENG_GRAD_CLIP_VALUE)
            return eng_fail(ENG_EINVAL, "gradient: unknown transform %d", (int)tc->gradient[i]);
        if (tc->gradient[i] == ENG_GRAD_ZNORM && !(tc->znorm_eps > 0))
            return eng_fail(ENG_EINVAL, "gradient znorm: znorm_eps must be > 0, got %g", tc->znorm_eps);
        if (tc->gradient[i] == ENG_GRAD_CLIP_NORM && !(tc->clip_norm > 0))
            return eng_fail(ENG_EINVAL, "gradient clip_norm: clip_norm must be > 0, got %g", tc->clip_norm);
        if (tc->gradient[i] == ENG_GRAD_CLIP_VALUE && !(tc->clip_value > 0))
            return eng_fail(ENG_EINVAL, "gradient clip_value: clip_value must be > 0, got %g", tc->clip_value);
        for (int l = 0; l < v->n_layers && tc->gradient[i] == ENG_GRAD_CENTRALIZE; l++)
            if (v->layers[l].one_block)
                return eng_fail(ENG_EINVAL, "gradient centralize: layer %s is a sequence layer, whose parameters are "
                                "several matrices and vectors in one block; centralize covers dense and conv layers "
                                "(use znorm or clipping)", v->layers[l].name);
    }
    eng_grad *g = prof_calloc(1, sizeof *g);
    if (!g) return eng_fail(ENG_ENOMEM, "gradient: out of memory");
    g->v = *v;
    g->prof = prof;
    g->n = tc->n_gradient;
    g->eps = (float)tc->znorm_eps;
    g->clip_norm = (float)tc->clip_norm;
    g->clip_value = (float)tc->clip_value;
    if (!(g->sums = prof_malloc(3 * (pieces(v->n_params, SUM_CHUNK) + 1) * sizeof(double)))) {
        eng_grad_free(g);
        return eng_fail(ENG_ENOMEM, "gradient: out of memory");
    }
    for (int i = 0; i < g->n; i++) {
        g->kind[i] = tc->gradient[i];
        if (g->kind[i] == ENG_GRAD_CENTRALIZE && !g->means && alloc_centre(g)) {
            eng_grad_free(g);
            return eng_fail(ENG_ENOMEM, "gradient: out of memory");
        }
        char name[48];
        snprintf(name, sizeof name, "grad.%s", eng_grad_kind_name(g->kind[i]));
        int rc = register_scope(prof, name, &g->scope[i]);
        if (rc) { eng_grad_free(g); return rc; }
    }
    *out = g;
    return ENG_OK;
}

void eng_grad_free(eng_grad *g)
{
    if (!g) return;
    prof_free(g->means);
    prof_free(g->blocks);
    prof_free(g->sums);
    prof_free(g);
}

/* Bytes a transform moves over n floats in `reads` read passes and `writes` write passes (for the profiler). */
static uint64_t pass_bytes(size_t n, int reads, int writes) { return (uint64_t)n * sizeof(float) * (uint64_t)(reads + writes); }

/* One transform's work over the view, for its profiler scope. */
typedef struct {
    eng_grad *g;
    eng_optim *to;          /* the update the maps go to (the last transform), or NULL */
    uint64_t flops, bytes;
} apply_ctx;

/* In place, over the pool: elements [lo, hi) of a scalar map, rows [lo, hi) of a centring. */
typedef struct {
    const eng_optim_map *m;
    float *t, lim;
} range_ctx;

static void map_range(void *ctx, size_t lo, size_t hi)
{
    const range_ctx *c = ctx;
    const eng_optim_map *m = c->m;
    eng_isa isa = eng_isa_current();
    if (!m->sub) grad_affine_isa[isa](c->t + lo, hi - lo, m->mu, m->s);
    else if (!m->by_row) grad_colcentre_isa[isa](c->t + lo * m->cols, hi - lo, m->cols, m->sub);
    else
        for (size_t r = lo; r < hi; r++) grad_affine_isa[isa](c->t + r * m->cols, m->cols, m->sub[r], 1.0f);
}

static void clamp_range(void *ctx, size_t lo, size_t hi)
{
    const range_ctx *c = ctx;
    grad_clamp_isa[eng_isa_current()](c->t + lo, hi - lo, c->lim);
}

/* Map m (eng_optim_map) over the gradient: handed to the update when there is one to take
 * it, else applied here in a pass of its own (over the pool), with the same bits. The maps made here are
 * (g - mu) * s (no sub) or a centring (sub, mu 0, s 1). n floats of the map's tensor cost
 * `flops` per float beyond the pass that made the map. */
static void map_tensor(apply_ctx *a, const eng_optim_map *m, unsigned flops)
{
    a->flops += (uint64_t)flops * m->n;
    if (a->to && !eng_optim_defer(a->to, m)) return;
    range_ctx c = { m, a->g->v.grads + m->off, 0.0f };
    if (m->sub) eng_pool_for(m->n / m->cols, pieces(PAR_MIN / 2, m->cols), map_range, &c);
    else eng_pool_for(m->n, PAR_MIN / 2, map_range, &c);
    a->bytes += pass_bytes(m->n, 1, 1);
}

static size_t offset_of(const apply_ctx *a, const float *t) { return (size_t)(t - a->g->v.grads); }

static void znorm_tensor(apply_ctx *a, const float *t, size_t n)
{
    if (n < 2) return;
    eng_optim_map m = { .off = offset_of(a, t), .n = n, .cols = n };
    znorm_map(a->g->sums, t, n, a->g->eps, &m.mu, &m.s);
    a->flops += 3 * (uint64_t)n;
    a->bytes += pass_bytes(n, 1, 0);
    map_tensor(a, &m, 2);
}

/* A layer's W centred on its fan-in: the means (one read), then the map. */
static void centralize_layer(apply_ctx *a, int l)
{
    const eng_param_layer *L = &a->g->v.layers[l];
    size_t rows = L->w_rows, cols = L->w_cols;
    if (!L->n_w || L->no_centre || (L->by_col ? rows : cols) < 2) return;
    float *mean = a->g->means + a->g->mean_off[l];
    if (L->by_col) {
        col_means(a->g->blocks, L->dw, rows, cols, mean);
    } else {
        piece_job j = { .kind = P_ROWMEANS, .isa = eng_isa_current(), .g = L->dw, .rows = rows, .cols = cols,
                        .out = mean };
        run_pieces(&j, rows, L->n_w);
    }
    a->flops += L->n_w;
    a->bytes += pass_bytes(L->n_w, 1, 0);
    eng_optim_map m = { .off = offset_of(a, L->dw), .n = L->n_w, .cols = cols, .sub = mean,
                        .by_row = !L->by_col, .mu = 0.0f, .s = 1.0f };
    map_tensor(a, &m, 1);
}

static void apply_one(apply_ctx *a, eng_grad_kind kind)
{
    const eng_grad *g = a->g;
    const eng_param_view *v = &g->v;
    size_t np = v->n_params;
    switch (kind) {
    case ENG_GRAD_ZNORM:
        for (int l = 0; l < v->n_layers; l++) {
            znorm_tensor(a, v->layers[l].dw, v->layers[l].n_w);
            znorm_tensor(a, v->layers[l].db, v->layers[l].n_b);
        }
        break;
    case ENG_GRAD_CENTRALIZE:
        for (int l = 0; l < v->n_layers; l++) centralize_layer(a, l);
        break;
    case ENG_GRAD_CLIP_NORM: {
        double o[3];
        sums_of(g->sums, v->grads, np, 0.0f, 0, o);
        double norm = sqrt(o[1]);
        a->flops += 2 * (uint64_t)np;
        a->bytes += pass_bytes(np, 1, 0);
        eng_optim_map m = { .off = 0, .n = np, .cols = np, .mu = 0.0f, .s = (float)(g->clip_norm / norm) };
        if (norm > g->clip_norm) map_tensor(a, &m, 1);
        break;
    }
    case ENG_GRAD_CLIP_VALUE: {
        range_ctx c = { NULL, v->grads, g->clip_value };
        eng_pool_for(np, PAR_MIN / 2, clamp_range, &c);
        a->flops += 2 * (uint64_t)np;
        a->bytes += pass_bytes(np, 1, 1);
        break;
    }
    }
}

void eng_grad_apply(eng_grad *g, eng_optim *to)
{
    for (int t = 0; t < g->n; t++) {
        /* only the last transform's maps can wait for the update: the next one reads its result */
        apply_ctx a = { g, t == g->n - 1 ? to : NULL, 0, 0 };
        PROF_BEGIN(g->prof, g->scope[t]);
        apply_one(&a, g->kind[t]);
        PROF_END(g->prof, g->scope[t], a.flops, a.bytes);
    }
}

/* ---- telemetry ------------------------------------------------------------------------ */

enum { T_NORM, T_MEAN, T_STD, T_MAX, T_RATIO, T_PER_TENSOR };
static const char *const tkey[T_PER_TENSOR] = { "grad_norm", "grad_mean", "grad_std", "grad_max", "update_ratio" };

typedef struct {
    float *w, *g;           /* the tensor in params and in grads */
    size_t n, off;
} tensor_ref;

struct eng_telem {
    eng_param_view v;
    prof_t *prof;
    int scope;
    int n_tensors, n_act;
    tensor_ref tensors[2 * ENG_MAX_LAYERS];
    int act_layer[ENG_MAX_LAYERS];
    size_t n_values;
    char (*key_buf)[48];
    const char **keys;
    double *values;
    float *before;          /* the parameters before the step */
};

int eng_telem_create(eng_model *m, prof_t *prof, eng_telem **out)
{
    eng_param_view v;
    eng_model_param_view(m, &v);
    return eng_telem_create_view(&v, prof, out);
}

int eng_telem_create_view(const eng_param_view *v, prof_t *prof, eng_telem **out)
{
    *out = NULL;
    eng_telem *t = prof_calloc(1, sizeof *t);
    if (!t) return eng_fail(ENG_ENOMEM, "telemetry: out of memory");
    t->v = *v;
    t->prof = prof;
    t->scope = -1;
    for (int l = 0; l < v->n_layers; l++) {
        const eng_param_layer *L = &v->layers[l];
        if (L->n_w) t->tensors[t->n_tensors++] = (tensor_ref){ L->w, L->dw, L->n_w, L->w_off };
        if (L->n_b) t->tensors[t->n_tensors++] = (tensor_ref){ L->b, L->db, L->n_b, L->b_off };
        if (L->a) t->act_layer[t->n_act++] = l;
    }
    t->n_values = (size_t)t->n_tensors * T_PER_TENSOR + (size_t)t->n_act;
    size_t nv = t->n_values ? t->n_values : 1;
    t->key_buf = prof_calloc(nv, sizeof *t->key_buf);
    t->keys = prof_calloc(nv, sizeof *t->keys);
    t->values = prof_calloc(nv, sizeof *t->values);
    t->before = prof_malloc((v->n_params ? v->n_params : 1) * sizeof(float));
    if (!t->key_buf || !t->keys || !t->values || !t->before) {
        eng_telem_free(t);
        return eng_fail(ENG_ENOMEM, "telemetry: out of memory for %zu parameters", v->n_params);
    }
    size_t k = 0;
    for (int l = 0; l < v->n_layers; l++) {
        const eng_param_layer *L = &v->layers[l];
        for (int wb = 0; wb < 2; wb++) {
            if (!(wb ? L->n_b : L->n_w)) continue;
            for (int q = 0; q < T_PER_TENSOR; q++)
                snprintf(t->key_buf[k + (size_t)q * (size_t)t->n_tensors], sizeof t->key_buf[0], "%s/%s.%s",
                         tkey[q], L->name, wb ? "b" : "W");
            k++;
        }
    }
    for (int a = 0; a < t->n_act; a++)
        snprintf(t->key_buf[(size_t)t->n_tensors * T_PER_TENSOR + (size_t)a], sizeof t->key_buf[0], "zero_frac/%s",
                 v->layers[t->act_layer[a]].name);
    for (size_t i = 0; i < t->n_values; i++) t->keys[i] = t->key_buf[i];
    int rc = register_scope(prof, "grad.telemetry", &t->scope);
    if (rc) { eng_telem_free(t); return rc; }
    *out = t;
    return ENG_OK;
}

void eng_telem_free(eng_telem *t)
{
    if (!t) return;
    prof_free(t->key_buf);
    prof_free(t->keys);
    prof_free(t->values);
    prof_free(t->before);
    prof_free(t);
}

static size_t count_zeros(const float *restrict a, size_t n)
{
    size_t z = 0;
    for (size_t i = 0; i < n; i++) z += a[i] == 0.0f;
    return z;
}

void eng_telem_before(eng_telem *t)
{
    const eng_param_view *v = &t->v;
    PROF_BEGIN(t->prof, t->scope);
    size_t nt = (size_t)t->n_tensors;
    for (size_t i = 0; i < nt; i++) {
        const tensor_ref *r = &t->tensors[i];
        double mean, var, s2, mx;
        eng_grad_stats(r->g, r->n, &mean, &var, &s2, &mx);
        t->values[T_NORM * nt + i] = sqrt(s2);
        t->values[T_MEAN * nt + i] = mean;
        t->values[T_STD * nt + i] = sqrt(var);
        t->values[T_MAX * nt + i] = mx;
        t->values[T_RATIO * nt + i] = NAN;
    }
    for (int a = 0; a < t->n_act; a++) {
        const eng_param_layer *L = &v->layers[t->act_layer[a]];
        size_t n = (size_t)*L->a_rows * L->a_width;
        t->values[T_PER_TENSOR * nt + (size_t)a] = n ? (double)count_zeros(L->a, n) / (double)n : NAN;
    }
    memcpy(t->before, v->params, v->n_params * sizeof(float));
    PROF_END(t->prof, t->scope, 3 * (uint64_t)v->n_params, 2 * (uint64_t)v->n_params * sizeof(float));
}

void eng_telem_after(eng_telem *t)
{
    PROF_BEGIN(t->prof, t->scope);
    size_t nt = (size_t)t->n_tensors;
    for (size_t i = 0; i < nt; i++) {
        const tensor_ref *r = &t->tensors[i];
        const float *restrict w = r->w, *restrict b = t->before + r->off;
        /* ||w_after - w_before|| and ||w_before|| in one pass, LANES partial sums */
        double d2 = 0, w2 = 0;
        size_t j = 0;
        while (j + LANES <= r->n) {
            size_t end = j + BLOCK <= r->n ? j + BLOCK : r->n - (r->n - j) % LANES;
            float ad[LANES] = { 0 }, aw[LANES] = { 0 };
            for (; j < end; j += LANES)
                for (int k = 0; k < LANES; k++) {
                    float d = w[j + k] - b[j + k];
                    ad[k] += d * d;
                    aw[k] += b[j + k] * b[j + k];
                }
            for (int k = 0; k < LANES; k++) { d2 += ad[k]; w2 += aw[k]; }
        }
        for (; j < r->n; j++) {
            double d = (double)w[j] - b[j];
            d2 += d * d;
            w2 += (double)b[j] * b[j];
        }
        /* weights that were all zero (biases at step 1) have no relative update */
        t->values[T_RATIO * nt + i] = w2 > 0 ? sqrt(d2 / w2) : NAN;
    }
    PROF_END(t->prof, t->scope, 4 * (uint64_t)t->v.n_params, 2 * (uint64_t)t->v.n_params * sizeof(float));
}

void eng_telem_record(const eng_telem *t, eng_telemetry *rec)
{
    rec->n = t->n_values;
    rec->keys = t->keys;
    rec->values = t->values;
}
