/* pipeline.c — tests of the input pipeline: the dataset cache (hit, invalidation by source
 * and key, rebuild of a damaged file, unwritable directory), augmentation (valid transforms,
 * deterministic per seed whoever gathers), prefetch depth, data-parallel shards, the
 * throttled source, data.wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../engine/data/data_internal.h"

static char dir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nnbench-pipe-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char c[300];
    snprintf(c, sizeof c, "%s/cache", dir);
    setenv("NNBENCH_CACHE_DIR", c, 1);
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("NNBENCH_CACHE_DIR");
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Creates NAME in the test directory for writing; its path into path. */
static FILE *create_in_dir(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    return f;
}

/* A CSV of n rows "a,b,label" whose values depend on k (to tell versions apart). */
static void write_csv(const char *p, int n, int k)
{
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "a,b,label\n");
    for (int i = 0; i < n; i++) fprintf(f, "%d,%d,%d\n", i * k, i + k, i % 3);
    assert_int_equal(fclose(f), 0);
}

static eng_data_config csv_cfg(const char *p)
{
    eng_data_config c;
    memset(&c, 0, sizeof c);
    c.source = ENG_DATA_CSV;
    snprintf(c.path, sizeof c.path, "%s", p);
    c.label_column = -1;
    c.header = -1;
    c.test_fraction = 0.25;
    c.normalize = ENG_NORM_STANDARD;
    c.cache = 1;
    return c;
}

static void assert_same_ds(const eng_dataset *a, const eng_dataset *b)
{
    assert_int_equal(a->n_train, b->n_train);
    assert_int_equal(a->n_test, b->n_test);
    assert_int_equal(a->in_size, b->in_size);
    assert_int_equal(a->n_classes, b->n_classes);
    assert_string_equal(a->name, b->name);
    assert_memory_equal(a->x_train, b->x_train, (size_t)a->n_train * a->in_size * sizeof(float));
    assert_memory_equal(a->y_train, b->y_train, (size_t)a->n_train * sizeof(int32_t));
    assert_memory_equal(a->x_test, b->x_test, (size_t)a->n_test * a->in_size * sizeof(float));
    assert_memory_equal(a->y_test, b->y_test, (size_t)a->n_test * sizeof(int32_t));
}

static eng_dataset *load(const eng_data_config *c, uint64_t seed, eng_cache_state want)
{
    eng_dataset *ds = NULL;
    if (eng_data_load(c, seed, &ds)) fail_msg("%s", eng_error());
    assert_int_equal(eng_data_cache_last(), want);
    return ds;
}

static void test_cache_hit_and_invalidation(void **state)
{
    char csv[300], cpath[1100];
    snprintf(csv, sizeof csv, "%s/d.csv", dir);
    write_csv(csv, 40, 1);
    eng_data_config c = csv_cfg(csv);
    eng_data_config plain = c;
    plain.cache = 0;

    eng_dataset *ref = load(&plain, 3, ENG_CACHE_OFF);
    eng_dataset *w = load(&c, 3, ENG_CACHE_WRITTEN);
    assert_same_ds(ref, w);
    assert_int_equal(eng_data_cache_path(&c, 3, cpath, sizeof cpath), ENG_OK);
    assert_non_null(strstr(cpath, dir));
    assert_int_equal(access(cpath, R_OK), 0);
    eng_dataset *h = load(&c, 3, ENG_CACHE_HIT);
    assert_same_ds(ref, h);              /* the cached set is the decoded, normalised one */
    eng_data_free(h);

    /* A key that shapes the arrays: another file, rebuilt; then both are hits. */
    eng_data_config other = c;
    other.normalize = ENG_NORM_MINMAX;
    char cpath2[1100];
    assert_int_equal(eng_data_cache_path(&other, 3, cpath2, sizeof cpath2), ENG_OK);
    assert_string_not_equal(cpath, cpath2);
    eng_data_free(load(&other, 3, ENG_CACHE_WRITTEN));
    eng_data_free(load(&other, 3, ENG_CACHE_HIT));
    eng_data_free(load(&c, 4, ENG_CACHE_WRITTEN));  /* the seed decides the split */
    eng_data_free(load(&c, 3, ENG_CACHE_HIT));

    /* The source changes (content, size and mtime): the cache must not serve the old set. */
    write_csv(csv, 44, 2);
    struct timespec ts[2] = { { .tv_sec = 1000000000, .tv_nsec = 0 }, { .tv_sec = 1000000000, .tv_nsec = 0 } };
    assert_int_equal(utimensat(AT_FDCWD, csv, ts, 0), 0);
    eng_dataset *ref2 = load(&plain, 3, ENG_CACHE_OFF);
    eng_dataset *w2 = load(&c, 3, ENG_CACHE_WRITTEN);
    assert_same_ds(ref2, w2);
    eng_data_free(load(&c, 3, ENG_CACHE_HIT));
    /* Same size, other mtime only: rebuilt too. */
    ts[1].tv_sec = 1000000100;
    assert_int_equal(utimensat(AT_FDCWD, csv, ts, 0), 0);
    eng_data_free(load(&c, 3, ENG_CACHE_WRITTEN));

    /* A damaged cache file (truncated) is rebuilt, never served. */
    assert_int_equal(truncate(cpath, 100), 0);
    eng_dataset *w3 = load(&c, 3, ENG_CACHE_WRITTEN);
    assert_same_ds(ref2, w3);
    eng_data_free(load(&c, 3, ENG_CACHE_HIT));

    eng_data_free(ref); eng_data_free(w); eng_data_free(ref2); eng_data_free(w2); eng_data_free(w3);
}

/* Byte-valued inputs (the CSV's integers 0..43, not normalised) keep their byte copy from a
 * cache hit as from the file (data_codes.c): the copy decodes to the mapped floats. A
 * standardised set has none either way. */
static void test_cache_hit_keeps_codes(void **state)
{
    char csv[300];
    snprintf(csv, sizeof csv, "%s/b.csv", dir);
    write_csv(csv, 40, 1);
    eng_data_config c = csv_cfg(csv);
    c.normalize = ENG_NORM_NONE;
    for (int hit = 0; hit < 2; hit++) {
        eng_dataset *ds = load(&c, 3, hit ? ENG_CACHE_HIT : ENG_CACHE_WRITTEN);
        assert_non_null(ds->x_codes);
        assert_true(ds->x_code_scale == 1.0);
        size_t n = (size_t)ds->n_train * ds->in_size;
        float *back = malloc(n * sizeof(float));
        eng_data_decode(ds->x_codes, n, ds->x_code_scale, back);
        assert_memory_equal(back, ds->x_train, n * sizeof(float));
        free(back);
        eng_data_free(ds);
    }
    c.normalize = ENG_NORM_STANDARD;
    eng_data_free(load(&c, 3, ENG_CACHE_WRITTEN));
    eng_dataset *ds = load(&c, 3, ENG_CACHE_HIT);
    assert_null(ds->x_codes);
    eng_data_free(ds);
}

static void test_cache_errors(void **state)
{
    char csv[300], blocker[300], bad[400];
    snprintf(csv, sizeof csv, "%s/e.csv", dir);
    write_csv(csv, 20, 1);
    /* A cache directory under a regular file cannot be made (even as root). */
    snprintf(blocker, sizeof blocker, "%s/file", dir);
    write_csv(blocker, 1, 1);
    snprintf(bad, sizeof bad, "%s/sub", blocker);
    setenv("NNBENCH_CACHE_DIR", bad, 1);
    eng_data_config c = csv_cfg(csv);
    eng_dataset *ds = NULL;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EIO);
    assert_null(ds);
    assert_non_null(strstr(eng_error(), bad));
    assert_non_null(strstr(eng_error(), "NNBENCH_CACHE_DIR"));
    /* A generated source has nothing to cache. */
    eng_data_config g;
    memset(&g, 0, sizeof g);
    g.source = ENG_DATA_SPIRALS;
    g.n = 100;
    g.noise = -1;
    g.cache = 1;
    assert_int_equal(eng_data_load(&g, 1, &ds), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "data.cache"));
    char c2[300];
    snprintf(c2, sizeof c2, "%s/cache", dir);
    setenv("NNBENCH_CACHE_DIR", c2, 1);
}

/* n images of 1 x H x W whose pixels are all distinct: pixel j of image i = i * 1000 + j;
 * label i. */
enum { IH = 5, IW = 6 };
static eng_dataset *image_ds(int n)
{
    eng_dataset *ds = calloc(1, sizeof *ds);
    ds->n_train = n;
    ds->in_shape[0] = 1; ds->in_shape[1] = IH; ds->in_shape[2] = IW;
    ds->in_size = IH * IW;
    ds->classification = 1;
    ds->n_classes = n;
    snprintf(ds->name, sizeof ds->name, "images");
    ds->x_train = malloc((size_t)n * IH * IW * sizeof(float));
    ds->y_train = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        ds->y_train[i] = i;
        for (int j = 0; j < IH * IW; j++) ds->x_train[(size_t)i * IH * IW + j] = (float)(i * 1000 + j);
    }
    return ds;
}

static void free_ds(eng_dataset *ds) { free(ds->x_train); free(ds->y_train); free(ds); }

/* All rows of `epochs` epochs (rows * in_size floats; caller frees). */
static float *gather(const eng_dataset *ds, int batch, const eng_batcher_options *o, uint64_t seed, int epochs)
{
    eng_batcher *b;
    if (eng_batcher_create_opts(ds, batch, o, seed, &b)) fail_msg("%s", eng_error());
    size_t row = ds->in_size, at = 0;
    float *all = malloc((size_t)epochs * ds->n_train * row * sizeof(float));
    int32_t *lab = malloc((size_t)epochs * ds->n_train * sizeof(int32_t));
    for (int k = 0; k < epochs * eng_batcher_batches_per_epoch(b); k++) {
        eng_batch bt;
        assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
        memcpy(all + at * row, bt.x, (size_t)bt.rows * row * sizeof(float));
        memcpy(lab + at, bt.y, (size_t)bt.rows * sizeof(int32_t));
        at += (size_t)bt.rows;
    }
    eng_batcher_destroy(b);
    assert_int_equal(at, (size_t)epochs * ds->n_train);
    /* Every row is some shift (within o->augment.shift) and flip of its own image. */
    int S = o->augment.shift, moved = 0, flipped = 0;
    for (size_t r = 0; r < at; r++) {
        const float *src = ds->x_train + (size_t)lab[r] * row, *got = all + r * row;
        int found = 0;
        for (int f = 0; f <= (o->augment.flip ? 1 : 0) && !found; f++)
            for (int dy = -S; dy <= S && !found; dy++)
                for (int dx = -S; dx <= S && !found; dx++) {
                    int ok = 1;
                    for (int y = 0; y < IH && ok; y++)
                        for (int x = 0; x < IW && ok; x++) {
                            int sy = y - dy, sx = (f ? IW - 1 - x : x) - dx;
                            float want = sy >= 0 && sy < IH && sx >= 0 && sx < IW ? src[sy * IW + sx] : src[0];
                            ok = got[y * IW + x] == want;
                        }
                    if (ok) { found = 1; moved += dx || dy; flipped += f; }
                }
        if (!found) fail_msg("row %zu (image %d) is not a shift/flip of its image", r, lab[r]);
    }
    if (S) assert_true(moved > 0);
    if (o->augment.flip) assert_true(flipped > 0 && flipped < (int)at);
    free(lab);
    return all;
}

static void test_augment_deterministic(void **state)
{
    eng_dataset *ds = image_ds(37);
    size_t bytes = (size_t)3 * 37 * IH * IW * sizeof(float);
    eng_batcher_options o = { .shuffle = 1, .depth = 1, .wait_scope = -1, .gather_scope = -1 };
    float *plain = gather(ds, 8, &o, 7, 3);
    assert_int_equal(eng_augment_parse("shift:2, flip", &o.augment, (char[64]){0}, 64), 0);
    float *a = gather(ds, 8, &o, 7, 3);
    float *b = gather(ds, 8, &o, 7, 3);
    assert_memory_equal(a, b, bytes);              /* same seed: same transforms */
    assert_memory_not_equal(a, plain, bytes);
    for (int depth = 1; depth <= ENG_PREFETCH_MAX; depth += 3) {
        o.prefetch = 1;                            /* whichever thread gathers a row */
        o.depth = depth;
        float *p = gather(ds, 8, &o, 7, 3);
        assert_memory_equal(a, p, bytes);
        free(p);
    }
    o.prefetch = 0;
    float *c = gather(ds, 8, &o, 8, 3);            /* another seed: other transforms */
    assert_memory_not_equal(a, c, bytes);
    o.augment = (eng_augment){ .shift = 0, .flip = 1 };
    free(gather(ds, 37, &o, 7, 2));                /* full batch: gathered, not served in place */
    free(plain); free(a); free(b); free(c);
    free_ds(ds);
}

static void test_augment_errors(void **state)
{
    eng_augment a;
    char why[200];
    assert_int_equal(eng_augment_parse("none", &a, why, sizeof why), 0);
    assert_false(eng_augment_on(&a));
    assert_int_equal(eng_augment_parse(" flip ,shift:3", &a, why, sizeof why), 0);
    assert_int_equal(a.shift, 3);
    assert_int_equal(a.flip, 1);
    assert_int_equal(eng_augment_parse("rotate", &a, why, sizeof why), -1);
    assert_non_null(strstr(why, "'rotate'"));
    assert_int_equal(eng_augment_parse("shift:0", &a, why, sizeof why), -1);
    assert_int_equal(eng_augment_parse("shift:two", &a, why, sizeof why), -1);
    assert_non_null(strstr(why, "shift:two"));
    /* Flat data cannot be shifted. */
    eng_dataset flat = { .n_train = 4, .in_shape = { 1, 1, 3 }, .in_size = 3 };
    float x[12] = { 0 };
    flat.x_train = x;
    eng_batcher_options o = { .depth = 1, .augment = { .shift = 1 }, .wait_scope = -1, .gather_scope = -1 };
    eng_batcher *b = NULL;
    assert_int_equal(eng_batcher_create_opts(&flat, 2, &o, 1, &b), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "data.augment"));
}

/* A one-process batcher and n rank batchers (shards) of ds with options o. */
static void open_shards(eng_dataset *ds, eng_batcher_options o, int n, eng_batcher **one, eng_batcher **rk)
{
    o.shard_size = 1;
    assert_int_equal(eng_batcher_create_opts(ds, 8, &o, 9, one), ENG_OK);
    for (int r = 0; r < n; r++) {
        o.shard_rank = r;
        o.shard_size = n;
        assert_int_equal(eng_batcher_create_opts(ds, 8, &o, 9, &rk[r]), ENG_OK);
    }
}

static void close_shards(int n, eng_batcher *one, eng_batcher **rk)
{
    for (int r = 0; r < n; r++) eng_batcher_destroy(rk[r]);
    eng_batcher_destroy(one);
}

/* A rank's part is rows [at, at + part->rows) of the one-process batch. */
static void assert_part_of(const eng_dataset *ds, const eng_batch *whole, const eng_batch *part, int at)
{
    assert_int_equal(part->global_rows, whole->rows);
    if (!part->rows) return;
    assert_memory_equal(part->x, whole->x + (size_t)at * ds->in_size, (size_t)part->rows * ds->in_size * sizeof(float));
    assert_memory_equal(part->y, whole->y + at, (size_t)part->rows * sizeof(int32_t));
}

/* Data-parallel shards: rank r of N serves rows [G r/N, G (r+1)/N) of every global batch
 * of G rows, augmented as one process would (so the ranks together train exactly on the
 * one-process batches); a shard may be empty; with or without prefetch. */
static void test_shards(void **state)
{
    eng_dataset *ds = image_ds(41);                 /* batch 8: 5 batches of 8, one of 1 */
    eng_batcher_options o = { .shuffle = 1, .depth = 2, .wait_scope = -1, .gather_scope = -1,
                              .augment = { .shift = 1, .flip = 1 } };
    enum { N = 3 };
    for (int prefetch = 0; prefetch <= 1; prefetch++) {
        eng_batcher *one_p, *rk[N];
        o.prefetch = prefetch;
        open_shards(ds, o, N, &one_p, rk);
        for (int k = 0; k < 2 * 6; k++) {
            eng_batch whole, part;
            assert_int_equal(eng_batcher_next(one_p, &whole), ENG_OK);
            assert_int_equal(whole.global_rows, whole.rows);
            int at = 0;
            for (int r = 0; r < N; r++) {
                assert_int_equal(eng_batcher_next(rk[r], &part), ENG_OK);
                assert_int_equal(part.rows, whole.rows * (r + 1) / N - whole.rows * r / N);
                assert_int_equal(part.epoch, whole.epoch);
                assert_int_equal(part.last_in_epoch, whole.last_in_epoch);
                assert_part_of(ds, &whole, &part, at);
                at += part.rows;
            }
            assert_int_equal(at, whole.rows);
        }
        close_shards(N, one_p, rk);
    }
    free_ds(ds);
}

/* Shares set during the run (dist.balance = measured): after every step each rank passes
 * the same partition; the batch it applies to (nslots after the one held: the first no
 * prefetch thread can have set up, here even after it was given time to run ahead) is cut
 * there on every rank, batches before the first call are split evenly, and the ranks
 * together still serve exactly the one-process batches; empty shares included. */
static void test_shares_set(void **state)
{
    eng_dataset *ds = image_ds(41);                 /* batch 8: 5 batches of 8, one of 1 */
    eng_batcher_options o = { .shuffle = 1, .depth = 2, .wait_scope = -1, .gather_scope = -1 };
    enum { N = 3, STEPS = 24 };
    for (int prefetch = 0; prefetch <= 1; prefetch++) {
        eng_batcher *one_p, *rk[N];
        o.prefetch = prefetch;
        open_shards(ds, o, N, &one_p, rk);
        double cuts[STEPS + 8][N + 1];
        int set[STEPS + 8] = { 0 };
        for (int k = 0; k < STEPS; k++) {
            eng_batch whole, part;
            assert_int_equal(eng_batcher_next(one_p, &whole), ENG_OK);
            int at = 0;
            for (int r = 0; r < N; r++) {
                assert_int_equal(eng_batcher_next(rk[r], &part), ENG_OK);
                int lo = whole.rows * r / N, hi = whole.rows * (r + 1) / N;
                if (set[k]) {
                    lo = (int)lround(whole.rows * cuts[k][r]);
                    hi = (int)lround(whole.rows * cuts[k][r + 1]);
                }
                assert_int_equal(part.rows, hi - lo);
                assert_int_equal(at, lo);
                assert_part_of(ds, &whole, &part, at);
                at += part.rows;
            }
            assert_int_equal(at, whole.rows);
            /* a partition of this step: 0 < c1 <= c2 < 1, every third one giving rank 1 nothing */
            double c1 = 0.1 + 0.8 * fmod(k * 0.37, 1.0), c2 = k % 3 ? c1 + (1 - c1) * fmod(k * 0.61, 1.0) : c1;
            if (prefetch) usleep(2000);             /* the prefetch thread fills every free slot */
            long applies = -1;
            for (int r = 0; r < N; r++) {
                double c[N + 1] = { 0, c1, c2, 1 };
                long a = eng_batcher_set_share(rk[r], c[r], c[r + 1]);
                assert_true(r == 0 || a == applies);
                applies = a;
            }
            assert_int_equal(applies, k + (prefetch ? o.depth + 1 : 1));
            double c[N + 1] = { 0, c1, c2, 1 };
            memcpy(cuts[applies], c, sizeof c);
            set[applies] = 1;
        }
        assert_int_equal(eng_batcher_set_share(one_p, 0, 1), -1);   /* one process: nothing */
        close_shards(N, one_p, rk);
    }
    free_ds(ds);
}

/* The source's rate bounds an epoch's time from below, with or without prefetch (readers
 * share one rate), and a per-batch latency adds per batch. Only lower bounds: a loaded
 * machine makes everything slower, never faster. */
static void test_throttle(void **state)
{
    eng_dataset *ds = image_ds(200);           /* rows of 30 floats + a label: 124 bytes */
    double bytes = 200.0 * (IH * IW * 4 + 4);
    for (int prefetch = 0; prefetch <= 1; prefetch++) {
        eng_batcher_options o = { .shuffle = 1, .prefetch = prefetch, .depth = 2,
                                  .read_mbps = bytes / 0.15 / 1e6,  /* an epoch in 0.15 s */
                                  .wait_scope = -1, .gather_scope = -1 };
        double t0 = now();
        free(gather(ds, 20, &o, 1, 1));
        double t = now() - t0;
        assert_true(t >= 0.15 * 0.99);
        o.read_mbps = 0;
        o.read_latency_ms = 10;                 /* 10 batches: >= 100 ms */
        t0 = now();
        free(gather(ds, 20, &o, 1, 1));
        t = now() - t0;
        assert_true(t >= 0.1 * 0.99);
    }
    free_ds(ds);
}

/* A throttled run shows its stall as data.wait, apart from the copying (data.gather). */
static void test_data_wait_scope(void **state)
{
    char ini[300];
    FILE *f = create_in_dir("t.ini", ini, sizeof ini);
    fputs("[data]\nsource = blobs\nn = 400\nread_latency_ms = 4\n"
          "[model]\nlayers = dense:4:tanh, dense:3\n"
          "[train]\nbatch = 40\nepochs = 1\n", f);
    fclose(f);
    eng_experiment *ex = NULL;
    if (eng_experiment_load(ini, NULL, 0, &ex)) fail_msg("%s", eng_error());
    prof_t *p = prof_create(&(prof_options){ .quiet = 1 });
    assert_non_null(p);
    eng_run *r = NULL;
    if (eng_run_create(&ex->variants[0], NULL, p, &r)) fail_msg("%s", eng_error());
    assert_int_equal(eng_run_train(r, NULL), ENG_OK);
    prof_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
    int saw_wait = 0, saw_gather = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].name, "data.wait")) {
            saw_wait = 1;
            assert_int_equal(rows[i].calls, 8);   /* 320 training rows in batches of 40 */
            assert_true(rows[i].total_ns >= 8 * 4000000ull * 99 / 100);
        }
        if (!strcmp(rows[i].name, "data.gather")) { saw_gather = 1; assert_int_equal(rows[i].calls, 8); }
    }
    assert_true(saw_wait && saw_gather);
    free(rows);
    eng_run_destroy(r);
    prof_destroy(p);
    eng_experiment_free(ex);
    /* Bad values are refused with the key named. */
    const char *sets[] = { "data.augment=shift:2, spin" };
    assert_int_not_equal(eng_experiment_load(ini, sets, 1, &ex), ENG_OK);
    assert_non_null(strstr(eng_error(), "augment"));
    assert_non_null(strstr(eng_error(), "'spin'"));
    const char *sets2[] = { "data.cache=true" };
    assert_int_not_equal(eng_experiment_load(ini, sets2, 1, &ex), ENG_OK);
    assert_non_null(strstr(eng_error(), "cache"));
    const char *sets3[] = { "data.prefetch_depth=9" };
    assert_int_not_equal(eng_experiment_load(ini, sets3, 1, &ex), ENG_OK);
    assert_non_null(strstr(eng_error(), "prefetch_depth"));
}


/* ---- issue 22: the key, damage, hostile files ----------------------------------------- */

/* A base experiment on a CSV, with one override (NULL: none); its data config. */
static int load_cfg(const char *csv, const char *set, eng_experiment **ex)
{
    char text[600];
    snprintf(text, sizeof text, "[data]\nsource = csv\npath = %s\ncache = true\n"
             "[model]\nlayers = dense:3\nloss = mse\n[train]\nepochs = 1\n", csv);
    const char *sets[] = { set };
    return eng_experiment_load_text("k.ini", text, sets, set ? 1 : 0, ex);
}

/* Every [data] key of the key table, changed alone, changes the cache key unless it only
 * says how batches are served: a key added later cannot be left out silently. */
static void test_cache_key_every_data_key(void **state)
{
    char csv[300];
    snprintf(csv, sizeof csv, "%s/k.csv", dir);
    write_csv(csv, 30, 1);
    eng_experiment *base = NULL;
    if (load_cfg(csv, NULL, &base)) fail_msg("%s", eng_error());
    static char a[16384], b[16384];
    size_t la, lb;
    assert_int_equal(eng_data_key(&base->variants[0].data, a, sizeof a, &la), ENG_OK);
    static const char *const tries[] = { "7", "3", "0.3", "true", "false", "idx", "minmax", "shift:1", "/tmp/x",
                                         "auto", "none", "rows", "64", NULL };
    int keys = 0, shaping = 0;
    for (const eng_key_doc *d = eng_key_docs; d->key; d++) {
        if (strncmp(d->key, "data.", 5)) continue;
        keys++;
        const char *before = eng_config_value(&base->variants[0], d->key);
        int changed = 0;
        for (const char *const *t = tries; *t && !changed; t++) {
            char set[300];
            snprintf(set, sizeof set, "%s=%s", d->key, *t);
            eng_experiment *ex = NULL;
            if (load_cfg(csv, set, &ex)) continue;
            const char *after = eng_config_value(&ex->variants[0], d->key);
            if (before && after && strcmp(before, after)) {
                changed = 1;
                assert_int_equal(eng_data_key(&ex->variants[0].data, b, sizeof b, &lb), ENG_OK);
                int differs = la != lb || memcmp(a, b, la);
                if (differs != eng_data_key_shapes_data(d->key + 5))
                    fail_msg("%s: the cache key %s although the key %s the loaded data", set,
                             differs ? "changes" : "stays", eng_data_key_shapes_data(d->key + 5) ? "shapes" : "does not shape");
                shaping += differs;
            }
            eng_experiment_free(ex);
        }
        if (!changed) fail_msg("%s: no value tried changes it; add one to tries[]", d->key);
    }
    assert_true(keys >= 20);
    assert_true(shaping >= 13);
    assert_true(eng_data_key_shapes_data("stratify") && eng_data_key_shapes_data("skip_rows"));
    assert_false(eng_data_key_shapes_data("prefetch"));
    eng_experiment_free(base);
}

/* Defect 4: stratify and skip_rows each get their own cache file, never the other's rows. */
static void test_cache_stratify_skip_rows(void **state)
{
    char csv[300];
    FILE *f = create_in_dir("s.csv", csv, sizeof csv);
    for (int i = 0; i < 60; i++) fprintf(f, "%d,%d,%d\n", i, i * 3 % 7, i < 48 ? 0 : i % 2 + 1);
    assert_int_equal(fclose(f), 0);
    eng_data_config c = csv_cfg(csv);
    c.header = 0;
    eng_data_free(load(&c, 5, ENG_CACHE_WRITTEN));
    eng_data_config strat = c, plain = c;
    strat.stratify = 1;
    plain.stratify = 1;
    plain.cache = 0;
    eng_dataset *ref = load(&plain, 5, ENG_CACHE_OFF);
    eng_dataset *got = load(&strat, 5, ENG_CACHE_WRITTEN);
    assert_same_ds(ref, got);
    eng_data_free(ref); eng_data_free(got);
    eng_data_config skip = c;
    skip.skip_rows = 10;
    plain = skip;
    plain.cache = 0;
    ref = load(&plain, 5, ENG_CACHE_OFF);
    got = load(&skip, 5, ENG_CACHE_WRITTEN);
    assert_same_ds(ref, got);
    eng_data_free(ref); eng_data_free(got);
    eng_data_free(load(&skip, 5, ENG_CACHE_HIT));
}

/* Header offsets of cache version 2 (engine/data/data_cache.c cache_meta). */
enum { M_SHAPE = 76, M_INSIZE = 88, M_HEADSUM = 136, M_SIZE = 144 };

/* Where the arrays of a cache file begin: after magic, version, key and header, aligned. */
static long arrays_at(const char *cpath)
{
    FILE *f = fopen(cpath, "rb");
    assert_non_null(f);
    char head[16];
    assert_int_equal(fread(head, 1, 16, f), 16);
    fclose(f);
    uint32_t kl;
    memcpy(&kl, head + 12, 4);
    return (long)((16 + kl + M_SIZE + 63) & ~63u);
}

static void poke(const char *p, long at, const void *bytes, size_t n)
{
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, n, at), (ssize_t)n);
    close(fd);
}

/* A load that finds the cache damaged: rebuilt (the same set as without a cache), the note
 * names the file and the reason; the next load is a clean hit. */
static void expect_rebuilt(const eng_data_config *c, const eng_dataset *ref, const char *cpath, const char *reason)
{
    eng_dataset *ds = load(c, 3, ENG_CACHE_WRITTEN);
    const char *note = eng_data_cache_damage();
    if (!note) fail_msg("no damage note (want '%s')", reason);
    assert_non_null(strstr(note, cpath));
    if (!strstr(note, reason)) fail_msg("note '%s' does not say '%s'", note, reason);
    assert_same_ds(ref, ds);
    eng_data_free(ds);
    eng_data_free(load(c, 3, ENG_CACHE_HIT));
    assert_null(eng_data_cache_damage());
}

/* A CSV NAME of rows rows (version k) with its cache written: the config into c, the
 * cache file's path into cpath; returns the set loaded without the cache. */
static eng_dataset *cached_csv(const char *name, int rows, int k, eng_data_config *c, char *cpath, size_t cap)
{
    char csv[300];
    snprintf(csv, sizeof csv, "%s/%s", dir, name);
    write_csv(csv, rows, k);
    *c = csv_cfg(csv);
    eng_data_config plain = *c;
    plain.cache = 0;
    assert_int_equal(eng_data_cache_path(c, 3, cpath, cap), ENG_OK);
    eng_dataset *ref = load(&plain, 3, ENG_CACHE_OFF);
    eng_data_free(load(c, 3, ENG_CACHE_WRITTEN));
    return ref;
}

/* Defect 5: damaged arrays fail their checksum, labels out of range are refused, and either
 * way the file is rebuilt from the source with a note naming it. */
static void test_cache_damage_rebuilt(void **state)
{
    char cpath[1100];
    eng_data_config c;
    eng_dataset *ref = cached_csv("d.csv", 1000, 3, &c, cpath, sizeof cpath);
    eng_data_config plain = c;
    plain.cache = 0;
    /* Overwritten pixels: inside x_train (the first array after the header). */
    const float junk[4] = { 1e30f, -1e30f, 1e30f, -1e30f };
    poke(cpath, arrays_at(cpath) + 640, junk, sizeof junk);
    expect_rebuilt(&c, ref, cpath, "checksum of the training inputs");
    /* A label 99 among 3 classes, checksums valid (written that way): refused too. */
    eng_dataset *bad = load(&plain, 3, ENG_CACHE_OFF);
    bad->y_train[7] = 99;
    assert_int_equal(eng_data_cache_store(&c, 3, bad), ENG_OK);
    eng_data_free(bad);
    expect_rebuilt(&c, ref, cpath, "label 8 is 99");
    eng_data_free(ref);
}

/* Byte-valued inputs: the cache keeps their byte copy after the arrays, and a hit serves
 * it from the mapped file (not built again); a damaged copy, trailer or size is named and
 * rebuilt like a damaged array. */
static void test_cache_codes_damage(void **state)
{
    char csv[300], cpath[1100];
    snprintf(csv, sizeof csv, "%s/codes.csv", dir);
    write_csv(csv, 40, 1);
    eng_data_config c = csv_cfg(csv), plain;
    c.normalize = ENG_NORM_NONE;
    plain = c;
    plain.cache = 0;
    assert_int_equal(eng_data_cache_path(&c, 3, cpath, sizeof cpath), ENG_OK);
    eng_dataset *ref = load(&plain, 3, ENG_CACHE_OFF);
    assert_non_null(ref->x_codes);
    eng_data_free(load(&c, 3, ENG_CACHE_WRITTEN));
    eng_dataset *h = load(&c, 3, ENG_CACHE_HIT);
    const char *m = h->map;
    assert_true(h->x_codes && (const char *)h->x_codes >= m && (const char *)h->x_codes < m + h->map_len);
    assert_memory_equal(h->x_codes, ref->x_codes, (size_t)ref->n_train * ref->in_size);
    assert_true(h->x_code_scale == ref->x_code_scale);
    eng_data_free(h);
    struct stat st;
    assert_int_equal(stat(cpath, &st), 0);
    const unsigned char flip = 0x5a;
    poke(cpath, (long)st.st_size - 24 - 3, &flip, 1);          /* in the copy */
    expect_rebuilt(&c, ref, cpath, "byte copy does not match");
    poke(cpath, (long)st.st_size - 24, "NNBXXXXX", 8);          /* the trailer's magic */
    expect_rebuilt(&c, ref, cpath, "trailer");
    assert_int_equal(truncate(cpath, st.st_size - 1), 0);       /* one byte short */
    expect_rebuilt(&c, ref, cpath, "byte copy of the inputs");
    eng_data_free(ref);
}

/* Writes v at meta offset at of the cache file and recomputes the header's checksum, as a
 * hostile file would. */
static void forge(const char *cpath, int at, const void *v, size_t n)
{
    FILE *f = fopen(cpath, "r+b");
    assert_non_null(f);
    char head[16];
    assert_int_equal(fread(head, 1, 16, f), 16);
    uint32_t kl;
    memcpy(&kl, head + 12, 4);
    size_t hlen = 16 + kl + M_SIZE;
    char *buf = malloc(hlen);
    assert_non_null(buf);
    rewind(f);
    assert_int_equal(fread(buf, 1, hlen, f), hlen);
    memcpy(buf + 16 + kl + at, v, n);
    memset(buf + 16 + kl + M_HEADSUM, 0, 8);
    uint64_t h = eng_data_hash(buf, hlen);
    memcpy(buf + 16 + kl + M_HEADSUM, &h, 8);
    rewind(f);
    assert_int_equal(fwrite(buf, 1, hlen, f), hlen);
    assert_int_equal(fclose(f), 0);
    free(buf);
}

static void on_alarm(int sig) { (void)sig; fail_msg("the cache loader blocked (a FIFO at the cache path?)"); }

/* Defect 8: header fields that lie (with a valid header checksum), a FIFO at the cache
 * path, a truncated cache, a cache replaced while a run holds the old one. */
static void test_cache_hostile(void **state)
{
    char cpath[1100];
    eng_data_config c;
    eng_dataset *ref = cached_csv("h.csv", 64, 2, &c, cpath, sizeof cpath);
    int32_t big = 100000;
    forge(cpath, M_SHAPE, &big, 4);
    expect_rebuilt(&c, ref, cpath, "in_shape gives 200000");
    uint64_t huge = 1ull << 62;
    forge(cpath, M_INSIZE, &huge, 8);
    expect_rebuilt(&c, ref, cpath, "in_size");
    int32_t two = 2;                       /* consistent with in_size only if it is 2x2 */
    forge(cpath, M_SHAPE + 4, &two, 4);
    expect_rebuilt(&c, ref, cpath, "in_size");
    /* A FIFO: not opened for reading in a blocking way, refused, replaced. */
    assert_int_equal(unlink(cpath), 0);
    assert_int_equal(mkfifo(cpath, 0644), 0);
    signal(SIGALRM, on_alarm);
    alarm(20);
    expect_rebuilt(&c, ref, cpath, "not a regular file");
    alarm(0);
    /* Rebuilt (renamed over) by another run while this one trains from it: the arrays
     * this one loaded stay readable and unchanged. */
    eng_dataset *h = load(&c, 3, ENG_CACHE_HIT);
    assert_int_equal(eng_data_cache_store(&c, 3, ref), ENG_OK);
    double sum = 0;
    for (size_t i = 0; i < (size_t)h->n_train * h->in_size; i++) sum += h->x_train[i];
    for (int i = 0; i < h->n_train; i++) sum += h->y_train[i];
    assert_true(isfinite(sum));
    assert_same_ds(ref, h);
    eng_data_free(h);
    /* Truncated: refused, rebuilt. */
    assert_int_equal(truncate(cpath, 0), 0);
    expect_rebuilt(&c, ref, cpath, "too short");
    eng_data_free(ref);
}

/* The checksum's AVX2 and portable code give the same value (a fingerprint stored on one
 * machine is compared on another), for every tail length, and it tells swapped words. */
static void test_data_hash_paths(void **state)
{
    size_t n = (1u << 20) + 77;
    unsigned char *p = malloc(n);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + (i >> 9));
    for (size_t len = 0; len < 200; len++)
        assert_true(eng_data_hash_path(p, len, 0) == eng_data_hash_path(p, len, 1));
    uint64_t h = eng_data_hash_path(p, n, 1);
    assert_true(eng_data_hash_path(p, n, 0) == h);
    assert_true(eng_data_hash(p, n) == h);
    unsigned char t[4];
    memcpy(t, p + 64, 4); memcpy(p + 64, p + 128, 4); memcpy(p + 128, t, 4);   /* same lane */
    assert_true(eng_data_hash(p, n) != h);
    free(p);
}

/* Defect 6's engine half: the fingerprint tells the same data from other values or
 * permuted labels, and says which arrays changed. */
static void test_data_fingerprint(void **state)
{
    char csv[300], a[ENG_DATA_FP_MAX], b[ENG_DATA_FP_MAX], why[512];
    snprintf(csv, sizeof csv, "%s/f.csv", dir);
    write_csv(csv, 50, 1);
    eng_data_config plain = csv_cfg(csv);
    plain.cache = 0;
    eng_dataset *ds = load(&plain, 3, ENG_CACHE_OFF);
    eng_data_fingerprint(ds, a, sizeof a);
    eng_dataset *again = load(&plain, 3, ENG_CACHE_OFF);
    eng_data_fingerprint(again, b, sizeof b);
    assert_string_equal(a, b);
    assert_int_equal(eng_data_fingerprint_diff(a, b, why, sizeof why), 0);
    eng_data_config cached = plain;                  /* written, then a hit: the same data */
    cached.cache = 1;
    for (int k = 0; k < 2; k++) {
        eng_dataset *c = load(&cached, 3, k ? ENG_CACHE_HIT : ENG_CACHE_WRITTEN);
        eng_data_fingerprint(c, b, sizeof b);
        assert_string_equal(a, b);
        eng_data_free(c);
    }
    int32_t t = again->y_train[0];
    again->y_train[0] = again->y_train[1];
    again->y_train[1] = t == again->y_train[0] ? (t + 1) % 3 : t;
    eng_data_fingerprint(again, b, sizeof b);
    assert_int_equal(eng_data_fingerprint_diff(a, b, why, sizeof why), 1);
    assert_string_equal(why, "the training labels differ");
    eng_data_free(again);
    write_csv(csv, 52, 2);
    again = load(&plain, 3, ENG_CACHE_OFF);
    eng_data_fingerprint(again, b, sizeof b);
    assert_int_equal(eng_data_fingerprint_diff(a, b, why, sizeof why), 1);
    assert_non_null(strstr(why, "rows 37 train + 13 test then, 39 + 13 now"));
    assert_non_null(strstr(why, "training inputs differ"));
    assert_int_equal(eng_data_fingerprint_diff("junk", b, why, sizeof why), 1);
    eng_data_free(again);
    eng_data_free(ds);
}

int test_engine_pipeline(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cache_hit_and_invalidation, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_hit_keeps_codes, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_errors, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_key_every_data_key, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_stratify_skip_rows, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_damage_rebuilt, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_hostile, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_cache_codes_damage, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_data_fingerprint, setup_dir, teardown_dir),
        cmocka_unit_test(test_data_hash_paths),
        cmocka_unit_test(test_augment_deterministic),
        cmocka_unit_test(test_augment_errors),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_shares_set),
        cmocka_unit_test(test_throttle),
        cmocka_unit_test_setup_teardown(test_data_wait_scope, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests_name("engine_pipeline", tests, NULL, NULL);
}
