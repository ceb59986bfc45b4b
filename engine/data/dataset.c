/* dataset.c — what every loader and the config share: a dataset's arrays, a file's base
 * name and the generators' defaults. Its own file so that the loaders (data.c, data_csv.c,
 * data_idx.c, data_cache.c) and config.c call it without calling each other back. */
#include "data_internal.h"

#include <string.h>
#include <sys/mman.h>

const char *eng_data_basename(const char *path)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;   /* "dir/" names dir */
    const char *end = path + len, *p = end;
    while (p > path && p[-1] != '/') p--;
    return p;
}

void eng_data_advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + n) & ~(huge - 1);
    if (b > a) madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

void eng_data_codes_free(eng_dataset *ds)
{
    const char *c = (const char *)ds->x_codes, *m = ds->map;
    if (c && !(m && c >= m && c < m + ds->map_len)) prof_free(ds->x_codes);
    ds->x_codes = NULL;
}

int eng_data_alloc(eng_dataset *ds, int n_train, int n_test)
{
    prof_free(ds->x_train); prof_free(ds->x_test);
    prof_free(ds->y_train); prof_free(ds->y_test);
    prof_free(ds->t_train); prof_free(ds->t_test);
    eng_data_codes_free(ds);
    ds->x_train = ds->x_test = NULL; ds->y_train = ds->y_test = NULL;
    ds->t_train = ds->t_test = NULL;
    ds->n_train = n_train; ds->n_test = n_test;
    int nt = ds->n_targets > 0 ? ds->n_targets : 1;
    for (int part = 0; part < 2; part++) {
        size_t rows = (size_t)(part ? n_test : n_train);
        if (!rows) continue;
        float *x = prof_malloc(rows * ds->in_size * sizeof(float));
        if (x) eng_data_advise_huge(x, rows * ds->in_size * sizeof(float));
        void *lab = ds->classification ? prof_malloc(rows * sizeof(int32_t))
                                       : prof_malloc(rows * (size_t)nt * sizeof(float));
        if (part) { ds->x_test = x; if (ds->classification) ds->y_test = lab; else ds->t_test = lab; }
        else { ds->x_train = x; if (ds->classification) ds->y_train = lab; else ds->t_train = lab; }
        if (!x || !lab)
            return eng_fail(ENG_ENOMEM, "data: out of memory for %zu samples of %zu values",
                            rows, ds->in_size);
    }
    return ENG_OK;
}

void eng_data_synth_defaults(eng_data_config *dc)
{
    double noise = 0;
    switch (dc->source) {
    case ENG_DATA_XOR: noise = ENG_DATA_DEF_NOISE_XOR; break;
    case ENG_DATA_SPIRALS:
        noise = ENG_DATA_DEF_NOISE_SPIRALS;
        if (dc->classes <= 0) dc->classes = ENG_DATA_DEF_ARMS;
        break;
    case ENG_DATA_BLOBS:
        noise = ENG_DATA_DEF_NOISE_BLOBS;
        if (dc->classes <= 0) dc->classes = ENG_DATA_DEF_BLOB_CLASSES;
        if (dc->features <= 0) dc->features = ENG_DATA_DEF_BLOB_FEATURES;
        break;
    case ENG_DATA_LINREG:
        noise = ENG_DATA_DEF_NOISE_REG;
        if (dc->features <= 0) dc->features = ENG_DATA_DEF_LINREG_FEATURES;
        break;
    case ENG_DATA_POLYREG:
        noise = ENG_DATA_DEF_NOISE_REG;
        if (dc->features <= 0) dc->features = ENG_DATA_DEF_POLY_FEATURES;
        if (dc->degree <= 0) dc->degree = ENG_DATA_DEF_DEGREE;
        break;
    case ENG_DATA_SINE: noise = ENG_DATA_DEF_NOISE_REG; break;
    default: return;                               /* idx, csv: nothing generated */
    }
    if (dc->n <= 0) dc->n = ENG_DATA_DEF_N;
    if (dc->noise < 0) dc->noise = noise;
}
