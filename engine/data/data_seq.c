/* data_seq.c — data read as sequences for the sequence layers (engine/attention.c): an
 * image [1 x H x W] seen as rows, PxP patches or single pixels (data.sequence), and the
 * generated long-sequence task "markers" whose label depends on two far-apart positions. */
#include "data_internal.h"
#include "../rng.h"

#include <string.h>

#define PATCH 4

/* Rows: H positions of W pixels (the image's own layout); pixels: H·W positions of 1;
 * patches: (H/4)·(W/4) positions of 16 pixels, row-major patches, each row-major inside
 * (trailing rows or columns that do not fill a patch are dropped, as a stride-4 conv
 * would). Only patches moves data; in place per row through one row of scratch. */
int eng_data_seq_view(const eng_data_config *dc, eng_dataset *ds)
{
    if (dc->sequence == ENG_SEQ_VIEW_NONE) return ENG_OK;
    int C = ds->in_shape[0], H = ds->in_shape[1], W = ds->in_shape[2];
    if (C != 1 || H < 2)
        return eng_fail(ENG_EINVAL, "data.sequence: needs single-channel images [1 x H x W] (idx image files), "
                        "got %dx%dx%d rows; set sequence = none", C, H, W);
    if (dc->sequence == ENG_SEQ_VIEW_ROWS) return ENG_OK;
    if (dc->sequence == ENG_SEQ_VIEW_PIXELS) {
        ds->in_shape[1] = H * W;
        ds->in_shape[2] = 1;
        return ENG_OK;
    }
    int ph = H / PATCH, pw = W / PATCH;
    if (ph < 1 || pw < 1)
        return eng_fail(ENG_EINVAL, "data.sequence: %dx%d patches need images of at least %dx%d, got %dx%d", PATCH,
                        PATCH, PATCH, PATCH, H, W);
    size_t out = (size_t)ph * pw * PATCH * PATCH;
    float *tmp = prof_malloc(out * sizeof(float));
    if (!tmp) return eng_fail(ENG_ENOMEM, "data.sequence: out of memory");
    float *sets[2] = { ds->x_train, ds->x_test };
    int rows[2] = { ds->n_train, ds->n_test };
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < rows[s]; r++) {
            const float *img = sets[s] + (size_t)r * ds->in_size;
            float *o = tmp;
            for (int py = 0; py < ph; py++)
                for (int px = 0; px < pw; px++)
                    for (int y = 0; y < PATCH; y++, o += PATCH)
                        memcpy(o, img + (size_t)(py * PATCH + y) * W + px * PATCH, PATCH * sizeof(float));
            /* rows are in_size apart in the arrays; the shorter patched row goes first */
            memcpy(sets[s] + (size_t)r * out, tmp, out * sizeof(float));
        }
    prof_free(tmp);
    ds->in_shape[1] = ph * pw;
    ds->in_shape[2] = PATCH * PATCH;
    ds->in_size = out;
    return ENG_OK;
}

/* markers: n positions of 5 features: a one-hot token of 4, and a flag. Two positions
 * are flagged, one in the first quarter of the sequence and one in the last; the label
 * is 1 when their tokens are equal (half of the samples, by construction), else 0. The
 * unflagged positions carry random tokens, so only attention that links the two flagged
 * positions, ~n/2 or more apart, does better than chance. */
#define MARK_VOCAB 4

int eng_data_gen_markers(const eng_data_config *dc, uint64_t seed, eng_dataset *ds)
{
    int n = dc->n ? dc->n : ENG_DATA_DEF_N, L = dc->seq_len;
    if (n < 2 || L < 8)
        return eng_fail(ENG_EINVAL, "data: markers needs n >= 2 samples and seq_len >= 8, got n = %d, seq_len = %d", n, L);
    if ((double)n * L * (MARK_VOCAB + 1) > 2e9)
        return eng_fail(ENG_EINVAL, "data.n: %d samples of %d positions is too large; use fewer samples", n, L);
    strcpy(ds->name, "markers");
    ds->classification = 1;
    ds->n_classes = 2;
    ds->in_shape[0] = 1; ds->in_shape[1] = L; ds->in_shape[2] = MARK_VOCAB + 1;
    ds->in_size = (size_t)L * (MARK_VOCAB + 1);
    int rc = eng_data_alloc(ds, n, 0);
    if (rc) return rc;
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_DATA_GEN);
    int q = L / 4;
    for (int s = 0; s < n; s++) {
        float *x = ds->x_train + (size_t)s * ds->in_size;
        memset(x, 0, ds->in_size * sizeof(float));
        for (int p = 0; p < L; p++) x[(size_t)p * (MARK_VOCAB + 1) + eng_rng_below(&r, MARK_VOCAB)] = 1.0f;
        int i = (int)eng_rng_below(&r, (uint64_t)q), j = L - q + (int)eng_rng_below(&r, (uint64_t)q);
        int same = (int)eng_rng_below(&r, 2), ti = (int)eng_rng_below(&r, MARK_VOCAB);
        int tj = same ? ti : (ti + 1 + (int)eng_rng_below(&r, MARK_VOCAB - 1)) % MARK_VOCAB;
        float *xi = x + (size_t)i * (MARK_VOCAB + 1), *xj = x + (size_t)j * (MARK_VOCAB + 1);
        memset(xi, 0, MARK_VOCAB * sizeof(float));
        memset(xj, 0, MARK_VOCAB * sizeof(float));
        xi[ti] = xj[tj] = 1.0f;
        xi[MARK_VOCAB] = xj[MARK_VOCAB] = 1.0f;
        ds->y_train[s] = same;
    }
    return ENG_OK;
}
