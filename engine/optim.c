/* optim.c — first-order optimizers (SGD, momentum/Nesterov, Adam, AdamW) over the model's
 * flat parameter and gradient vectors, and the learning-rate schedules with warm-up.
 * State is allocated at create; a step allocates nothing. */
#include "internal.h"

/* -O2 in GCC 12 vectorises only loops that need no epilogue; the update loops run over
 * every parameter each step, so they get the full vectoriser (results are unchanged:
 * each element is computed the same way, in the same order). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include <math.h>
#include <string.h>

typedef struct eng_optim_job step_job;

struct eng_optim {
    eng_optimizer kind;
    size_t n;
    float mu, beta1, beta2, eps, wd;
    int nesterov;
    long t;                 /* steps taken (Adam's bias correction) */
    float *m, *v;           /* momentum / first moment, second moment */
    /* Weight matrices whose GEMMs cut them by rows (eng_optim_set_matrices): their updates
     * are cut alike, so that each thread updates the rows it computed. */
    int n_mats;
    struct optim_mat { size_t off; int rows, cols; } mats[ENG_OPTIM_MAX_MATS];
    /* maps handed for the next step (eng_optim_defer), and the step's own, in offset order */
    int n_pend;
    eng_optim_map pend[ENG_OPTIM_MAX_MAPS], maps[ENG_OPTIM_MAX_MAPS];
    /* the step eng_optim_step_begin set up: the ranges read it */
    struct eng_optim_job {
        const struct eng_optim *o;
        float *w;
        const float *grad;
        float lr, c1, c2;
        const eng_optim_map *maps;
        int n_maps;
    } job;
};

static const char *opt_name(eng_optimizer k)
{
    static const char *const names[] = { "sgd", "momentum", "adam", "adamw", "newton" };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

int eng_optim_create(const eng_train_config *tc, size_t n_params, eng_optim **out)
{
    *out = NULL;
    if (tc->optimizer == ENG_OPT_NEWTON)
        return eng_fail(ENG_EINVAL, "optimizer 'newton' is second-order: it is created with eng_newton_create "
                        "(engine/newton.h), not eng_optim_create");
    if ((unsigned)tc->optimizer > ENG_OPT_NEWTON)
        return eng_fail(ENG_EINVAL, "optimizer: unknown kind %d", (int)tc->optimizer);
    if (!(tc->weight_decay >= 0.0))
        return eng_fail(ENG_EINVAL, "optimizer %s: weight_decay must be >= 0, got %g", opt_name(tc->optimizer), tc->weight_decay);
    if (tc->optimizer == ENG_OPT_MOMENTUM && !(tc->momentum >= 0.0 && tc->momentum < 1.0))
        return eng_fail(ENG_EINVAL, "optimizer momentum: momentum must be in [0, 1), got %g", tc->momentum);
    if (tc->optimizer == ENG_OPT_ADAM || tc->optimizer == ENG_OPT_ADAMW) {
        if (!(tc->beta1 >= 0.0 && tc->beta1 < 1.0) || !(tc->beta2 >= 0.0 && tc->beta2 < 1.0))
            return eng_fail(ENG_EINVAL, "optimizer %s: beta1 and beta2 must be in [0, 1), got %g and %g",
                            opt_name(tc->optimizer), tc->beta1, tc->beta2);
        if (!(tc->eps > 0.0))
            return eng_fail(ENG_EINVAL, "optimizer %s: eps must be > 0, got %g", opt_name(tc->optimizer), tc->eps);
    }
    eng_optim *o = prof_calloc(1, sizeof *o);
    if (!o) return eng_fail(ENG_ENOMEM, "optimizer: out of memory");
    o->kind = tc->optimizer;
    o->n = n_params;
    o->mu = (float)tc->momentum;
    o->nesterov = tc->nesterov;
    o->beta1 = (float)tc->beta1;
    o->beta2 = (float)tc->beta2;
    o->eps = (float)tc->eps;
    o->wd = (float)tc->weight_decay;
    size_t n = n_params ? n_params : 1;
    if (o->kind != ENG_OPT_SGD) o->m = prof_calloc(n, sizeof(float));
    if (o->kind == ENG_OPT_ADAM || o->kind == ENG_OPT_ADAMW) o->v = prof_calloc(n, sizeof(float));
    if ((o->kind != ENG_OPT_SGD && !o->m) || ((o->kind == ENG_OPT_ADAM || o->kind == ENG_OPT_ADAMW) && !o->v)) {
        eng_optim_free(o);
        return eng_fail(ENG_ENOMEM, "optimizer: out of memory for the state of %zu parameters", n_params);
    }
    *out = o;
    return ENG_OK;
}

void eng_optim_free(eng_optim *o)
{
    if (!o) return;
    prof_free(o->m);
    prof_free(o->v);
    prof_free(o);
}

void eng_optim_state(eng_optim *o, float **m, float **v, long **t)
{
    *m = o->m;
    *v = o->v;
    *t = &o->t;
}

/* How an update span reads its gradient (a constant once inlined: one loop per variant):
 * as it is, as (g - gmu) * gs (a scalar map), or as g - sub[i] (a column map). */
enum { READ_PLAIN, READ_SCALAR, READ_SUB };
#define GRAD_AT(i)                                                                                  \
    (read == READ_PLAIN ? grad[i] : read == READ_SCALAR ? (grad[i] - gmu) * gs : grad[i] - sub[i])

/* Elements [lo, hi) of the update: each element alone, so the pool's split (eng_pool_for)
 * gives the bits of one thread. Compiled per ISA path (internal.h), the same bits on each:
 * its data come from L2 and L3, which 4-float loads and stores could not keep busy (one
 * update of the Fashion MLP's 784 x 256 W, pool_bench's last table: 48.5 us at 4 floats a
 * vector, 28 us at 16). A deferred map is two more operations an element inside the same
 * loop, which waits on memory (docs/gradient-lab.md). */
ENG_ISA_BODY update_core(const step_job *j, size_t lo, size_t hi, int read, float gmu, float gs,
                         const float *restrict sub)
{
    const eng_optim *o = j->o;
    const float lr = j->lr, wd = o->wd, mu = o->mu;
    /* State in restrict locals, one loop per variant: with o->m read through o and the
     * Nesterov test inside, GCC kept the loop scalar (6-15% of a Fashion-MNIST step). */
    float *restrict w = j->w + lo;
    const float *restrict grad = j->grad + lo;
    float *restrict m = o->m ? o->m + lo : NULL, *restrict v = o->v ? o->v + lo : NULL;
    const size_t n = hi - lo;
    switch (o->kind) {
    case ENG_OPT_SGD:
        for (size_t i = 0; i < n; i++) w[i] -= lr * (GRAD_AT(i) + wd * w[i]);
        break;
    case ENG_OPT_MOMENTUM:
        if (o->nesterov)
            for (size_t i = 0; i < n; i++) {
                float g = GRAD_AT(i) + wd * w[i];
                float vi = mu * m[i] + g;
                m[i] = vi;
                w[i] -= lr * (g + mu * vi);
            }
        else
            for (size_t i = 0; i < n; i++) {
                float vi = mu * m[i] + (GRAD_AT(i) + wd * w[i]);
                m[i] = vi;
                w[i] -= lr * vi;
            }
        break;
    case ENG_OPT_ADAM:
    case ENG_OPT_ADAMW: {
        const float b1 = o->beta1, b2 = o->beta2, eps = o->eps, c1 = j->c1, c2 = j->c2;
        /* AdamW decays w directly and feeds the raw gradient; Adam adds the L2 term. */
        const float wdecay = o->kind == ENG_OPT_ADAMW ? wd : 0.0f;
        const float wl2 = o->kind == ENG_OPT_ADAMW ? 0.0f : wd;
        for (size_t i = 0; i < n; i++) {
            float wi = w[i] - lr * wdecay * w[i];
            float g = GRAD_AT(i) + wl2 * w[i];
            float mi = b1 * m[i] + (1.0f - b1) * g;
            float vi = b2 * v[i] + (1.0f - b2) * g * g;
            m[i] = mi;
            v[i] = vi;
            w[i] = wi - lr * (mi * c1) / (sqrtf(vi * c2) + eps);
        }
        break;
    }
    case ENG_OPT_NEWTON:
        break; /* refused by eng_optim_create */
    }
}
#undef GRAD_AT

/* [lo, hi) of the update, inside map mp (NULL: outside every map), cut where a centring
 * map's rows end; *r, *c: lo's row and column in mp, moved on to hi's (a division per
 * piece cost as much as the map). A centring map by rows is the scalar map (g - sub[r]) * 1,
 * the bits of the centring applied in a pass of its own (grad_affine with s = 1). */
ENG_ISA_BODY update_span(const step_job *j, const eng_optim_map *mp, size_t lo, size_t hi, size_t *r, size_t *c)
{
    if (!mp) { update_core(j, lo, hi, READ_PLAIN, 0.0f, 1.0f, NULL); return; }
    if (!mp->sub) { update_core(j, lo, hi, READ_SCALAR, mp->mu, mp->s, NULL); return; }
    for (size_t i = lo; i < hi;) {
        size_t left = mp->cols - *c, e = hi - i < left ? hi : i + left;
        if (mp->by_row) update_core(j, i, e, READ_SCALAR, mp->sub[*r], 1.0f, NULL);
        else update_core(j, i, e, READ_SUB, 0.0f, 1.0f, mp->sub + *c);
        *c += e - i;
        if (*c == mp->cols) { *c = 0; ++*r; }
        i = e;
    }
}

/* The update in blocks of UPDATE_BLOCK floats, the next block's lines of w asked for
 * writing before each (eng_prefetch_w): at 2 threads the rows of a W both cores read in the
 * step (its forward and dx cut by rows of the batch) are shared when the update writes
 * them, and a store waits for each line alone (docs/engine.md, "Threads"). Each block is cut
 * where the step's deferred maps begin and end. */
#define UPDATE_BLOCK 256
ENG_ISA_BODY update_body(const step_job *j, size_t lo, size_t hi)
{
    int k = 0, at = -1;  /* the first map not wholly before the piece; the map r, c are in */
    size_t r = 0, c = 0;
    size_t ahead = hi - lo < UPDATE_BLOCK ? hi - lo : UPDATE_BLOCK;
    eng_prefetch_w_range(j->w + lo, ahead * sizeof(float));
    for (size_t b0 = lo; b0 < hi; b0 += UPDATE_BLOCK) {
        size_t b1 = hi - b0 < UPDATE_BLOCK ? hi : b0 + UPDATE_BLOCK;
        size_t next = hi - b1 < UPDATE_BLOCK ? hi - b1 : UPDATE_BLOCK;
        eng_prefetch_w_range(j->w + b1, next * sizeof(float));
        for (size_t i = b0; i < b1;) {
            while (k < j->n_maps && j->maps[k].off + j->maps[k].n <= i) k++;
            const eng_optim_map *mp = k < j->n_maps && j->maps[k].off <= i ? &j->maps[k] : NULL;
            size_t end = mp ? mp->off + mp->n : k < j->n_maps ? j->maps[k].off : b1;
            end = end < b1 ? end : b1;
            if (mp && mp->sub && at != k) {
                at = k;
                r = (i - mp->off) / mp->cols;
                c = (i - mp->off) - r * mp->cols;
            }
            update_span(j, mp, i, end, &r, &c);
            i = end;
        }
    }
}
ENG_ISA_KERNEL(update, (const step_job *j, size_t lo, size_t hi), (j, lo, hi))

static void step_range(void *ctx, size_t lo, size_t hi) { update_isa[eng_isa_current()](ctx, lo, hi); }

/* With g = grad + wd·w (L2; AdamW instead decays w directly):
 *   sgd:       w -= lr g
 *   momentum:  v = mu v + g;  w -= lr v                  (classical)
 *                             w -= lr (g + mu v)         (Nesterov, as PyTorch)
 *   adam:      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²
 *              w -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *   adamw:     w -= lr wd w, then the Adam step with the raw gradient.
 * Split over the engine's pool (a Fashion MLP's 235k parameters are ~4.7 MB of traffic a
 * step: one core's bandwidth is the limit). */
void eng_optim_step(eng_optim *o, float *restrict w, const float *restrict grad, double lr_d)
{
    eng_optim_step_begin(o, w, grad, lr_d);
    eng_optim_step_range(o, 0, o->n);
}

/* The step counted and its scalars fixed once; the ranges then update elements alone, so
 * any order of ranges covering [0, n) once gives the bits of eng_optim_step. */
void eng_optim_step_begin(eng_optim *o, float *w, const float *grad, double lr_d)
{
    o->t++;
    /* the maps handed for this step, in offset order (a few per layer: insertion sort) */
    for (int i = 0; i < o->n_pend; i++) {
        int k = i;
        for (; k > 0 && o->maps[k - 1].off > o->pend[i].off; k--) o->maps[k] = o->maps[k - 1];
        o->maps[k] = o->pend[i];
    }
    o->job = (step_job){ o, w, grad, (float)lr_d, 1.0f, 1.0f, o->maps, o->n_pend };
    o->n_pend = 0;
    if (o->kind == ENG_OPT_ADAM || o->kind == ENG_OPT_ADAMW) {
        o->job.c1 = (float)(1.0 / (1.0 - pow(o->beta1, (double)o->t)));
        o->job.c2 = (float)(1.0 / (1.0 - pow(o->beta2, (double)o->t)));
    }
}

void eng_optim_set_matrices(eng_optim *o, const size_t *off, const int *rows, const int *cols, int n)
{
    o->n_mats = 0;
    for (int i = 0; i < n && o->n_mats < ENG_OPTIM_MAX_MATS; i++)
        if (rows[i] > 0 && cols[i] > 0 && off[i] + (size_t)rows[i] * (size_t)cols[i] <= o->n)
            o->mats[o->n_mats++] = (struct optim_mat){ off[i], rows[i], cols[i] };
}

int eng_optim_defer(eng_optim *o, const eng_optim_map *m)
{
    if (o->n_pend >= ENG_OPTIM_MAX_MAPS || m->off > o->n || m->n > o->n - m->off) return -1;
    if (m->sub && (!m->cols || m->n % m->cols)) return -1; /* a centring map is whole rows */
    o->pend[o->n_pend++] = *m;
    return 0;
}

/* The update of [lo, hi) in nslab slabs: a registered matrix lying wholly inside is cut by
 * rows as eng_split_range cuts a GEMM's rows (each thread the rows of W whose gradient it
 * computed), everything else by elements on whole lines. */
typedef struct {
    const eng_optim *o;
    size_t lo, hi;
} range_job;

/* Slab s of nslab of [a, b), in units of `unit` floats. */
static void part_slab(const step_job *j, size_t a, size_t b, size_t unit, int s, int nslab)
{
    size_t u0, u1;
    if (b <= a) return;
    eng_split_range((b - a) / unit, ENG_SPLIT_UNIT, s, nslab, &u0, &u1);
    if (u0 < u1) step_range((void *)j, a + u0 * unit, a + u1 * unit);
}

static void update_slab(void *ctx, int s, int nslab)
{
    const range_job *r = ctx;
    const eng_optim *o = r->o;
    size_t at = r->lo;
    for (int i = 0; i < o->n_mats; i++) {
        size_t cols = (size_t)o->mats[i].cols, m0 = o->mats[i].off, m1 = m0 + (size_t)o->mats[i].rows * cols;
        if (m0 < at || m1 > r->hi) continue; /* not wholly inside (the list is in offset order) */
        part_slab(&o->job, at, m0, 1, s, nslab);
        part_slab(&o->job, m0, m1, cols, s, nslab);
        at = m1;
    }
    part_slab(&o->job, at, r->hi, 1, s, nslab);
}

void eng_optim_step_range(eng_optim *o, size_t lo, size_t hi)
{
    if (hi > o->n) hi = o->n;
    if (lo >= hi) return;
    range_job r = { o, lo, hi };
    int nslab = eng_pool_threads();
    if (hi - lo < 2 * (size_t)ENG_POOL_GRAIN || nslab < 2 || !eng_pool_run(nslab, update_slab, &r)) update_slab(&r, 0, 1);
}

/* Warm-up: lr·(step+1)/warmup for the first `warmup` steps. After it, with s = step - warmup
 * and T = total_steps - warmup (the steps the schedule spans), p = min(s/T, 1):
 *   constant: lr
 *   step:     lr · gamma^floor(s / step_size)          (step_size <= 0: never decays)
 *   cosine:   min_lr + (lr - min_lr) · (1 + cos(pi p)) / 2
 *   linear:   lr + (min_lr - lr) · p
 * min_lr is reached at step total_steps, one past the last step. */
double eng_lr_at(const eng_train_config *tc, long step, long total_steps)
{
    double lr = tc->lr;
    if (step < 0) step = 0;
    if (tc->warmup > 0 && step < tc->warmup) return lr * (double)(step + 1) / (double)tc->warmup;
    long s = step - (tc->warmup > 0 ? tc->warmup : 0);
    long T = total_steps - (tc->warmup > 0 ? tc->warmup : 0);
    double p = T > 0 ? (double)s / (double)T : 0.0;
    if (p > 1.0) p = 1.0;
    switch (tc->schedule) {
    case ENG_SCHED_CONSTANT: return lr;
    case ENG_SCHED_STEP: return tc->step_size > 0 ? lr * pow(tc->gamma, (double)(s / tc->step_size)) : lr;
    case ENG_SCHED_COSINE: return tc->min_lr + (lr - tc->min_lr) * 0.5 * (1.0 + cos(M_PI * p));
    case ENG_SCHED_LINEAR: return lr + (tc->min_lr - lr) * p;
    }
    return lr;
}
