/* data.c — datasets: the synthetic generators, the seeded train/test split, normalisation
 * (statistics from the training set only) and eng_data_load/eng_data_free. */
#include "data_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"

#define SPIRAL_TURNS 1.5
#define BLOB_BOX 5.0        /* blob centres uniform in [-BLOB_BOX, BLOB_BOX]^features */

static void set_flat(eng_dataset *ds, int features)
{
    ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = features;
    ds->in_size = (size_t)features;
}

/* ---- synthetic generators ----------------------------------------------------------
 * Each fills the training arrays with all n samples; data.c splits them afterwards. */

static void gen_xor(eng_dataset *ds, int n, double noise, eng_rng *r)
{
    /* Four clusters at (+-1, +-1); the class is whether the signs differ. */
    for (int i = 0; i < n; i++) {
        int q = i % 4;
        double cx = (q & 1) ? 1.0 : -1.0, cy = (q & 2) ? 1.0 : -1.0;
        ds->x_train[2 * i] = (float)(cx + noise * eng_rng_normal(r));
        ds->x_train[2 * i + 1] = (float)(cy + noise * eng_rng_normal(r));
        ds->y_train[i] = (cx > 0) != (cy > 0);
    }
}

static void gen_spirals(eng_dataset *ds, int n, int arms, double noise, eng_rng *r)
{
    /* Arm k: radius 0.1..1 while the angle turns SPIRAL_TURNS times, offset by 2*pi*k/arms;
     * the inner 0.1 is left out because every arm meets there. */
    const double two_pi = 6.283185307179586;
    for (int i = 0; i < n; i++) {
        int k = i % arms;
        double t = eng_rng_uniform(r);
        double rad = 0.1 + 0.9 * t;
        double th = two_pi * k / arms + two_pi * SPIRAL_TURNS * t;
        ds->x_train[2 * i] = (float)(rad * cos(th) + noise * eng_rng_normal(r));
        ds->x_train[2 * i + 1] = (float)(rad * sin(th) + noise * eng_rng_normal(r));
        ds->y_train[i] = k;
    }
}

static int gen_blobs(eng_dataset *ds, int n, int classes, int features, double noise,
                     eng_rng *r, eng_rng *truth)
{
    float *centres = prof_malloc((size_t)classes * (size_t)features * sizeof(float));
    if (!centres) return eng_fail(ENG_ENOMEM, "data: out of memory for blob centres");
    for (size_t j = 0; j < (size_t)classes * (size_t)features; j++)
        centres[j] = (float)(BLOB_BOX * (2.0 * eng_rng_uniform(truth) - 1.0));
    for (int i = 0; i < n; i++) {
        int k = i % classes;
        for (int f = 0; f < features; f++)
            ds->x_train[(size_t)i * features + f] =
                (float)(centres[(size_t)k * features + f] + noise * eng_rng_normal(r));
        ds->y_train[i] = k;
    }
    prof_free(centres);
    return ENG_OK;
}

/* y = w.x + b + noise, x ~ N(0,1); w, b ~ N(0,1) from the truth stream. */
static int gen_linreg(eng_dataset *ds, int n, int features, double noise, eng_rng *r,
                      eng_rng *truth)
{
    double *w = prof_malloc(((size_t)features + 1) * sizeof(double));
    if (!w) return eng_fail(ENG_ENOMEM, "data: out of memory for regression weights");
    for (int f = 0; f <= features; f++) w[f] = eng_rng_normal(truth);
    for (int i = 0; i < n; i++) {
        double y = w[features];
        for (int f = 0; f < features; f++) {
            double x = eng_rng_normal(r);
            ds->x_train[(size_t)i * features + f] = (float)x;
            y += w[f] * x;
        }
        ds->t_train[i] = (float)(y + noise * eng_rng_normal(r));
    }
    prof_free(w);
    return ENG_OK;
}

/* y = c0 + sum_f sum_{k=1..degree} c[f][k] x_f^k + noise, x ~ U(-1,1), c ~ N(0,1). */
static int gen_polyreg(eng_dataset *ds, int n, int features, int degree, double noise,
                       eng_rng *r, eng_rng *truth)
{
    size_t nc = (size_t)features * (size_t)degree + 1;
    double *c = prof_malloc(nc * sizeof(double));
    if (!c) return eng_fail(ENG_ENOMEM, "data: out of memory for polynomial coefficients");
    for (size_t j = 0; j < nc; j++) c[j] = eng_rng_normal(truth);
    for (int i = 0; i < n; i++) {
        double y = c[nc - 1];
        for (int f = 0; f < features; f++) {
            double x = 2.0 * eng_rng_uniform(r) - 1.0, p = 1.0;
            ds->x_train[(size_t)i * features + f] = (float)x;
            for (int k = 0; k < degree; k++) { p *= x; y += c[(size_t)f * degree + k] * p; }
        }
        ds->t_train[i] = (float)(y + noise * eng_rng_normal(r));
    }
    prof_free(c);
    return ENG_OK;
}

static void gen_sine(eng_dataset *ds, int n, double noise, eng_rng *r)
{
    const double pi = 3.141592653589793;
    for (int i = 0; i < n; i++) {
        double x = pi * (2.0 * eng_rng_uniform(r) - 1.0);
        ds->x_train[i] = (float)x;
        ds->t_train[i] = (float)(sin(x) + noise * eng_rng_normal(r));
    }
}

static int check_range(const char *key, int v, int lo, int hi)
{
    if (v < lo || v > hi)
        return eng_fail(ENG_EINVAL, "data.%s: expected an integer from %d to %d, got %d",
                        key, lo, hi, v);
    return ENG_OK;
}

static int generate(const eng_data_config *cfg, uint64_t seed, eng_dataset *ds)
{
    eng_data_config dcv = *cfg;
    const eng_data_config *dc = &dcv;
    eng_data_synth_defaults(&dcv);
    int n = dc->n;
    int rc;
    if ((rc = check_range("n", n, 2, 100000000))) return rc;
    if (!(dc->noise >= 0) || !isfinite(dc->noise))
        return eng_fail(ENG_EINVAL, "data.noise: expected a finite number >= 0, got %g", dc->noise);
    eng_rng r, truth;
    eng_rng_seed(&r, seed, ENG_STREAM_DATA_GEN);
    eng_rng_seed(&truth, seed, ENG_STREAM_DATA_TRUTH);

    /* xor and sine have fixed shapes: their classes/features keys are ignored. */
    int features = 2, classes = 2;
    switch (dc->source) {
    case ENG_DATA_XOR: strcpy(ds->name, "xor"); break;
    case ENG_DATA_SPIRALS:
        strcpy(ds->name, "spirals");
        classes = dc->classes;
        if ((rc = check_range("classes", classes, 2, 64))) return rc;
        break;
    case ENG_DATA_BLOBS:
        strcpy(ds->name, "blobs");
        classes = dc->classes;
        features = dc->features;
        if ((rc = check_range("classes", classes, 2, 1000))) return rc;
        break;
    case ENG_DATA_LINREG:
        strcpy(ds->name, "linreg");
        features = dc->features;
        break;
    case ENG_DATA_POLYREG:
        strcpy(ds->name, "polyreg");
        features = dc->features;
        if ((rc = check_range("degree", dc->degree, 1, 20))) return rc;
        break;
    case ENG_DATA_SINE: strcpy(ds->name, "sine"); features = 1; break;
    default: return eng_fail(ENG_EINVAL, "data.source: unknown source %d", (int)dc->source);
    }
    if ((rc = check_range("features", features, 1, 100000))) return rc;
    if ((double)n * features > 4e9)
        return eng_fail(ENG_EINVAL, "data.n: %d samples x %d features is too large", n, features);

    int cls = dc->source == ENG_DATA_XOR || dc->source == ENG_DATA_SPIRALS || dc->source == ENG_DATA_BLOBS;
    ds->classification = cls;
    ds->n_classes = cls ? classes : 0;
    ds->n_targets = cls ? 0 : 1;
    set_flat(ds, features);
    if ((rc = eng_data_alloc(ds, n, 0))) return rc;

    switch (dc->source) {
    case ENG_DATA_XOR: gen_xor(ds, n, dc->noise, &r); break;
    case ENG_DATA_SPIRALS: gen_spirals(ds, n, classes, dc->noise, &r); break;
    case ENG_DATA_BLOBS: return gen_blobs(ds, n, classes, features, dc->noise, &r, &truth);
    case ENG_DATA_LINREG: return gen_linreg(ds, n, features, dc->noise, &r, &truth);
    case ENG_DATA_POLYREG: return gen_polyreg(ds, n, features, dc->degree, dc->noise, &r, &truth);
    case ENG_DATA_SINE: gen_sine(ds, n, dc->noise, &r); break;
    default: break;
    }
    return ENG_OK;
}

/* ---- split and caps ---------------------------------------------------------------- */

static void copy_row(const eng_dataset *ds, const float *x, const int32_t *y, const float *t,
                     size_t from, float *xo, int32_t *yo, float *to, size_t at)
{
    memcpy(xo + at * ds->in_size, x + from * ds->in_size, ds->in_size * sizeof(float));
    if (y) yo[at] = y[from];
    if (t) memcpy(to + at * (size_t)ds->n_targets, t + from * (size_t)ds->n_targets,
                  (size_t)ds->n_targets * sizeof(float));
}

/* Stratified order: the same rows as perm, reordered so that the first n_test of them
 * hold each class's share of the test set. Class c gets round(f * (n_0 + .. + n_c)) -
 * round(f * (n_0 + .. + n_c-1)) test rows (so the shares add up to exactly n_test), taken
 * in perm's (shuffled) order; the training rows keep perm's order too. */
static int stratify_order(const eng_dataset *ds, int32_t *perm, int n, double fraction)
{
    int k = ds->n_classes;
    int32_t *count = prof_calloc((size_t)k + 1, sizeof(int32_t));
    int32_t *out = prof_malloc((size_t)n * sizeof(int32_t));
    if (!count || !out) {
        prof_free(count); prof_free(out);
        return eng_fail(ENG_ENOMEM, "data: out of memory for the stratified split");
    }
    for (int i = 0; i < n; i++) count[ds->y_train[i]]++;
    /* count[c] becomes class c's test quota */
    long cum = 0, before = 0;
    for (int c = 0; c < k; c++) {
        cum += count[c];
        long upto = (long)floor(fraction * (double)cum + 0.5);
        count[c] = (int32_t)(upto - before);
        before = upto;
    }
    int t = 0, r = (int)before;
    for (int i = 0; i < n; i++) {
        int32_t c = ds->y_train[perm[i]];
        if (count[c] > 0) { count[c]--; out[t++] = perm[i]; }
        else out[r++] = perm[i];
    }
    memcpy(perm, out, (size_t)n * sizeof(int32_t));
    prof_free(count); prof_free(out);
    return ENG_OK;
}

/* Shuffles all training rows with the split stream, puts the first round(n*fraction) into
 * the test set (per class when stratify) and the rest into the training set, then caps
 * both counts. */
static int split(eng_dataset *ds, double fraction, int stratify, int cap_train, int cap_test, uint64_t seed)
{
    int n = ds->n_train;
    int n_test = (int)floor(n * fraction + 0.5);
    int n_train = n - n_test;
    if (n_train < 1)
        return eng_fail(ENG_EINVAL, "data.test_fraction = %g leaves no training samples out of %d",
                        fraction, n);
    if (cap_train > 0 && n_train > cap_train) n_train = cap_train;
    if (cap_test > 0 && n_test > cap_test) n_test = cap_test;

    int32_t *perm = prof_malloc((size_t)n * sizeof(int32_t));
    if (!perm) return eng_fail(ENG_ENOMEM, "data: out of memory for the split");
    for (int i = 0; i < n; i++) perm[i] = i;
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_DATA_SPLIT);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)eng_rng_below(&r, (uint64_t)i + 1);
        int32_t tmp = perm[i]; perm[i] = perm[j]; perm[j] = tmp;
    }
    if (stratify && ds->classification) {
        int rc = stratify_order(ds, perm, n, fraction);
        if (rc) { prof_free(perm); return rc; }
    }

    /* Take the old arrays out of ds so eng_data_alloc makes new ones. */
    float *x = ds->x_train, *t = ds->t_train;
    int32_t *y = ds->y_train;
    ds->x_train = NULL; ds->t_train = NULL; ds->y_train = NULL;
    int rc = eng_data_alloc(ds, n_train, n_test);
    if (!rc) {
        int total_test = (int)floor(n * fraction + 0.5); /* before the cap */
        for (int i = 0; i < n_test; i++)
            copy_row(ds, x, y, t, (size_t)perm[i], ds->x_test, ds->y_test, ds->t_test, (size_t)i);
        for (int i = 0; i < n_train; i++)
            copy_row(ds, x, y, t, (size_t)perm[total_test + i], ds->x_train, ds->y_train,
                     ds->t_train, (size_t)i);
    }
    prof_free(x); prof_free(y); prof_free(t); prof_free(perm);
    return rc;
}

/* ---- normalisation ----------------------------------------------------------------- */

/* Per-feature affine map x -> (x - shift) * mul from training statistics, applied to both
 * sets (idx's scale excepted: x/255 needs no statistics and is applied by the loader).
 * A constant feature (zero spread) is only shifted, never divided by zero. */
static int normalize(eng_dataset *ds, eng_norm how, int idx)
{
    if (how == ENG_NORM_NONE) return ENG_OK;
    if (how != ENG_NORM_SCALE && how != ENG_NORM_STANDARD && how != ENG_NORM_MINMAX)
        return eng_fail(ENG_EINVAL, "data.normalize: unknown normalisation %d", (int)how);
    if (how == ENG_NORM_SCALE && idx) return ENG_OK;    /* x/255 was applied while reading */
    size_t d = ds->in_size, n = (size_t)ds->n_train;
    double *shift = prof_calloc(d, sizeof(double)), *mul = prof_calloc(d, sizeof(double));
    double *a = prof_calloc(d, sizeof(double)), *b = prof_calloc(d, sizeof(double));
    if (!shift || !mul || !a || !b) {
        prof_free(shift); prof_free(mul); prof_free(a); prof_free(b);
        return eng_fail(ENG_ENOMEM, "data: out of memory for normalisation statistics");
    }
    if (how == ENG_NORM_SCALE) {          /* a: max |x| */
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < d; f++) {
                double v = fabs(ds->x_train[i * d + f]);
                if (v > a[f]) a[f] = v;
            }
        for (size_t f = 0; f < d; f++) mul[f] = a[f] > 0 ? 1.0 / a[f] : 1.0;
    } else if (how == ENG_NORM_STANDARD) {       /* a: mean, b: sum of squared deviations */
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < d; f++) a[f] += ds->x_train[i * d + f];
        for (size_t f = 0; f < d; f++) a[f] /= (double)n;
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < d; f++) {
                double v = ds->x_train[i * d + f] - a[f];
                b[f] += v * v;
            }
        for (size_t f = 0; f < d; f++) {
            double sd = sqrt(b[f] / (double)n);
            shift[f] = a[f];
            mul[f] = sd > 0 ? 1.0 / sd : 1.0;
        }
    } else {                                     /* minmax: a: min, b: max */
        for (size_t f = 0; f < d; f++) { a[f] = INFINITY; b[f] = -INFINITY; }
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < d; f++) {
                double v = ds->x_train[i * d + f];
                if (v < a[f]) a[f] = v;
                if (v > b[f]) b[f] = v;
            }
        for (size_t f = 0; f < d; f++) {
            shift[f] = a[f];
            mul[f] = b[f] > a[f] ? 1.0 / (b[f] - a[f]) : 1.0;
        }
    }
    for (int part = 0; part < 2; part++) {
        float *x = part ? ds->x_test : ds->x_train;
        size_t rows = (size_t)(part ? ds->n_test : ds->n_train);
        for (size_t i = 0; i < rows; i++)
            for (size_t f = 0; f < d; f++)
                x[i * d + f] = (float)((x[i * d + f] - shift[f]) * mul[f]);
    }
    prof_free(shift); prof_free(mul); prof_free(a); prof_free(b);
    return ENG_OK;
}

/* ---- entry points ------------------------------------------------------------------ */

int eng_data_load(const eng_data_config *dc, uint64_t seed, eng_dataset **out)
{
    *out = NULL;
    if (!(dc->test_fraction >= 0.0 && dc->test_fraction < 1.0))
        return eng_fail(ENG_EINVAL, "data.test_fraction: expected a number in [0, 1), got %g",
                        dc->test_fraction);
    if (dc->n < 0 || dc->n_test < 0)
        return eng_fail(ENG_EINVAL, "data.%s: expected a count >= 0, got %d",
                        dc->n < 0 ? "n" : "n_test", dc->n < 0 ? dc->n : dc->n_test);
    eng_dataset *ds = prof_calloc(1, sizeof *ds);
    if (!ds) return eng_fail(ENG_ENOMEM, "data: out of memory");
    int rc, need_split = 1, idx = 0, hit = 0;
    eng_data_cache_note(ENG_CACHE_OFF);
    if (dc->cache) {
        if (dc->source != ENG_DATA_IDX && dc->source != ENG_DATA_CSV) {
            prof_free(ds);
            return eng_fail(ENG_EINVAL, "data.cache: caches a file source (idx or csv), not a generated one; set cache = false");
        }
        if ((rc = eng_data_cache_load(dc, seed, ds, &hit))) { prof_free(ds); return rc; }
        if (hit) {
            eng_data_cache_note(ENG_CACHE_HIT);
            if (!ds->x_codes) eng_data_codes_build(ds);   /* a file whose inputs were not bytes */
            *out = ds;
            return ENG_OK;
        }
    }
    switch (dc->source) {
    case ENG_DATA_IDX: idx = 1; rc = eng_data_load_idx(dc, ds, &need_split); break;
    case ENG_DATA_CSV: rc = eng_data_load_csv(dc, ds, &need_split); break;
    case ENG_DATA_MARKERS: rc = eng_data_gen_markers(dc, seed, ds); break;
    default: rc = generate(dc, seed, ds); break;
    }
    if (!rc && need_split) {
        int file = dc->source == ENG_DATA_IDX || dc->source == ENG_DATA_CSV;
        rc = split(ds, dc->test_fraction, dc->stratify, file ? dc->n : 0, file ? dc->n_test : 0, seed);
    }
    if (!rc) rc = normalize(ds, dc->normalize, idx);
    if (!rc) rc = eng_data_seq_view(dc, ds);
    if (!rc) eng_data_codes_build(ds);                  /* before the cache, which keeps it */
    if (!rc && dc->cache && !(rc = eng_data_cache_store(dc, seed, ds)))
        eng_data_cache_note(ENG_CACHE_WRITTEN);
    if (rc) { eng_data_free(ds); return rc; }
    *out = ds;
    return ENG_OK;
}

void eng_data_free(eng_dataset *ds)
{
    if (!ds) return;
    eng_data_codes_free(ds);
    if (ds->map) {
        eng_data_cache_unmap(ds);           /* a cache hit: the arrays live in its region */
    } else {
        prof_free(ds->x_train); prof_free(ds->x_test);
        prof_free(ds->y_train); prof_free(ds->y_test);
        prof_free(ds->t_train); prof_free(ds->t_test);
    }
    prof_free(ds);
}
