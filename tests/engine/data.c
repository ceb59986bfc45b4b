/* data.c — tests of the datasets: generators, IDX and CSV loaders (good, truncated and
 * malformed files, with their exact messages), normalisation and the batcher. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../../engine/core.h"
#include "../../engine/data/data_internal.h"
#include "../../engine/internal.h"

static char tmpdir[256];

/* Removes a directory tree (the tests only create plain files and directories). */
static int rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char p[1024];
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rc |= rm_tree(p);
        else rc |= remove(p);
    }
    closedir(d);
    return rc | rmdir(dir);
}

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nnbench-data-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    return rm_tree(tmpdir);
}

static char *tpath(const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static eng_data_config dcfg(eng_data_source s)
{
    eng_data_config c;
    memset(&c, 0, sizeof c);
    c.source = s;
    c.n = 200;
    c.test_fraction = 0.25;
    c.noise = -1;
    c.label_column = -1;
    c.header = -1;
    return c;
}

static int ds_equal(const eng_dataset *a, const eng_dataset *b)
{
    if (a->n_train != b->n_train || a->n_test != b->n_test || a->in_size != b->in_size) return 0;
    if (memcmp(a->x_train, b->x_train, (size_t)a->n_train * a->in_size * sizeof(float))) return 0;
    if (a->n_test && memcmp(a->x_test, b->x_test, (size_t)a->n_test * a->in_size * sizeof(float))) return 0;
    if (a->y_train && memcmp(a->y_train, b->y_train, (size_t)a->n_train * sizeof(int32_t))) return 0;
    if (a->t_train && memcmp(a->t_train, b->t_train, (size_t)a->n_train * sizeof(float))) return 0;
    return 1;
}

/* ---- generators -------------------------------------------------------------------- */

static void test_generators_shapes(void **state)
{
    (void)state;
    struct { eng_data_source s; const char *name; int cls, classes, features; } g[] = {
        { ENG_DATA_XOR, "xor", 1, 2, 2 },          { ENG_DATA_SPIRALS, "spirals", 1, 2, 2 },
        { ENG_DATA_BLOBS, "blobs", 1, 3, 2 },      { ENG_DATA_LINREG, "linreg", 0, 0, 4 },
        { ENG_DATA_POLYREG, "polyreg", 0, 0, 1 }, { ENG_DATA_SINE, "sine", 0, 0, 1 },
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        eng_data_config c = dcfg(g[i].s);
        eng_dataset *ds;
        assert_int_equal(eng_data_load(&c, 7, &ds), ENG_OK);
        assert_string_equal(ds->name, g[i].name);
        assert_int_equal(ds->n_train, 150);
        assert_int_equal(ds->n_test, 50);
        assert_int_equal(ds->classification, g[i].cls);
        assert_int_equal((int)ds->in_size, g[i].features);
        assert_int_equal(ds->in_shape[0], 1);
        assert_int_equal(ds->in_shape[1], 1);
        assert_int_equal(ds->in_shape[2], g[i].features);
        for (size_t j = 0; j < (size_t)ds->n_train * ds->in_size; j++) assert_true(isfinite(ds->x_train[j]));
        if (g[i].cls) {
            assert_int_equal(ds->n_classes, g[i].classes);
            assert_non_null(ds->y_train); assert_non_null(ds->y_test);
            assert_null(ds->t_train);
            int seen[8] = {0};
            for (int j = 0; j < ds->n_train; j++) {
                assert_in_range(ds->y_train[j], 0, ds->n_classes - 1);
                seen[ds->y_train[j]] = 1;
            }
            for (int j = 0; j < ds->n_test; j++) assert_in_range(ds->y_test[j], 0, ds->n_classes - 1);
            for (int k = 0; k < ds->n_classes; k++) assert_true(seen[k]);
        } else {
            assert_int_equal(ds->n_targets, 1);
            assert_non_null(ds->t_train); assert_non_null(ds->t_test);
            assert_null(ds->y_train);
            for (int j = 0; j < ds->n_train; j++) assert_true(isfinite(ds->t_train[j]));
        }
        eng_data_free(ds);
    }
}

static void test_generators_deterministic(void **state)
{
    (void)state;
    for (int s = ENG_DATA_SPIRALS; s <= ENG_DATA_SINE; s++) {
        eng_data_config c = dcfg((eng_data_source)s);
        eng_dataset *a, *b, *d;
        assert_int_equal(eng_data_load(&c, 42, &a), ENG_OK);
        assert_int_equal(eng_data_load(&c, 42, &b), ENG_OK);
        assert_int_equal(eng_data_load(&c, 43, &d), ENG_OK);
        assert_true(ds_equal(a, b));
        assert_false(ds_equal(a, d));
        eng_data_free(a); eng_data_free(b); eng_data_free(d);
    }
}

static void test_generator_options(void **state)
{
    (void)state;
    eng_dataset *ds;
    /* spirals: arms = classes, balanced over train + test */
    eng_data_config c = dcfg(ENG_DATA_SPIRALS);
    c.classes = 3; c.n = 300;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_classes, 3);
    int cnt[3] = {0};
    for (int j = 0; j < ds->n_train; j++) cnt[ds->y_train[j]]++;
    for (int j = 0; j < ds->n_test; j++) cnt[ds->y_test[j]]++;
    for (int k = 0; k < 3; k++) assert_int_equal(cnt[k], 100);
    for (int j = 0; j < ds->n_train; j++) {     /* radius at most 1 + noise */
        double r = hypot(ds->x_train[2 * j], ds->x_train[2 * j + 1]);
        assert_true(r < 1.5);
    }
    eng_data_free(ds);

    /* blobs: classes x features */
    c = dcfg(ENG_DATA_BLOBS);
    c.classes = 5; c.features = 7;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_classes, 5);
    assert_int_equal((int)ds->in_size, 7);
    eng_data_free(ds);

    /* xor: with little noise the label is whether the signs of x and y differ */
    c = dcfg(ENG_DATA_XOR);
    c.noise = 0.1;
    assert_int_equal(eng_data_load(&c, 3, &ds), ENG_OK);
    for (int j = 0; j < ds->n_train; j++)
        assert_int_equal(ds->y_train[j], (ds->x_train[2 * j] > 0) != (ds->x_train[2 * j + 1] > 0));
    eng_data_free(ds);

    /* sine without noise is sin(x) */
    c = dcfg(ENG_DATA_SINE);
    c.noise = 0;
    assert_int_equal(eng_data_load(&c, 3, &ds), ENG_OK);
    for (int j = 0; j < ds->n_train; j++) {
        assert_true(fabs(ds->x_train[j]) <= 3.1416);
        assert_true(fabs(ds->t_train[j] - sin(ds->x_train[j])) < 1e-6);
    }
    eng_data_free(ds);

    /* polynomial: degree respected (degree 1 without noise is a line) */
    c = dcfg(ENG_DATA_POLYREG);
    c.noise = 0; c.degree = 1;
    assert_int_equal(eng_data_load(&c, 3, &ds), ENG_OK);
    double slope = (ds->t_train[1] - ds->t_train[0]) / (ds->x_train[1] - ds->x_train[0]);
    for (int j = 2; j < ds->n_train; j++) {
        double s2 = (ds->t_train[j] - ds->t_train[0]) / (ds->x_train[j] - ds->x_train[0]);
        if (fabs(ds->x_train[j] - ds->x_train[0]) > 0.05) assert_true(fabs(s2 - slope) < 1e-3);
    }
    eng_data_free(ds);
    c.degree = 3;                                   /* a cubic is not a line */
    assert_int_equal(eng_data_load(&c, 3, &ds), ENG_OK);
    double maxdev = 0;
    slope = (ds->t_train[1] - ds->t_train[0]) / (ds->x_train[1] - ds->x_train[0]);
    for (int j = 2; j < ds->n_train; j++) {
        if (fabs(ds->x_train[j] - ds->x_train[0]) < 0.05) continue;
        double s2 = (ds->t_train[j] - ds->t_train[0]) / (ds->x_train[j] - ds->x_train[0]);
        if (fabs(s2 - slope) > maxdev) maxdev = fabs(s2 - slope);
    }
    assert_true(maxdev > 1e-2);
    eng_data_free(ds);
}

/* The true weights come from their own stream: the same line for any n. */
static void test_linreg_truth_fixed(void **state)
{
    (void)state;
    double slope[2], icept[2];
    for (int k = 0; k < 2; k++) {
        eng_data_config c = dcfg(ENG_DATA_LINREG);
        c.features = 1; c.noise = 0; c.n = k ? 500 : 50;
        eng_dataset *ds;
        assert_int_equal(eng_data_load(&c, 9, &ds), ENG_OK);
        slope[k] = (ds->t_train[1] - ds->t_train[0]) / (ds->x_train[1] - ds->x_train[0]);
        icept[k] = ds->t_train[0] - slope[k] * ds->x_train[0];
        for (int j = 0; j < ds->n_train; j++)
            assert_true(fabs(ds->t_train[j] - (slope[k] * ds->x_train[j] + icept[k])) < 1e-4);
        eng_data_free(ds);
    }
    assert_true(fabs(slope[0] - slope[1]) < 1e-4);
    assert_true(fabs(icept[0] - icept[1]) < 1e-4);
}

static void test_generator_errors(void **state)
{
    (void)state;
    eng_dataset *ds = (eng_dataset *)1;
    eng_data_config c = dcfg(ENG_DATA_SPIRALS);
    c.test_fraction = 1.0;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EINVAL);
    assert_null(ds);
    assert_string_equal(eng_error(), "data.test_fraction: expected a number in [0, 1), got 1");
    c = dcfg(ENG_DATA_BLOBS);
    c.classes = 1;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EINVAL);
    assert_string_equal(eng_error(), "data.classes: expected an integer from 2 to 1000, got 1");
    c = dcfg(ENG_DATA_POLYREG);
    c.degree = 40;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EINVAL);
    assert_string_equal(eng_error(), "data.degree: expected an integer from 1 to 20, got 40");
    /* n = 0 means the default 2000 (as the config's data.n = 0 says); test_fraction 0
     * leaves no test set */
    c = dcfg(ENG_DATA_XOR);
    c.n = 0; c.test_fraction = 0;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_train, 2000);
    assert_int_equal(ds->n_test, 0);
    assert_null(ds->x_test);
    eng_data_free(ds);
}

/* ---- IDX --------------------------------------------------------------------------- */

static void write_file(const char *path, int gz, const void *buf, size_t n)
{
    if (gz) {
        gzFile g = gzopen(path, "wb");
        assert_non_null(g);
        assert_int_equal(gzwrite(g, buf, (unsigned)n), (int)n);
        assert_int_equal(gzclose(g), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
}

/* An IDX file of `count` samples of shape dims (ndim-1 of them), the first `bytes` bytes
 * of it (0 = all). Pixel i of image k is (k * 7 + i) % 256; label k is k % 3. */
static void write_idx(const char *path, int gz, int labels, int count, int h, int w,
                      size_t bytes, uint8_t type)
{
    int ndim = labels ? 1 : 3;
    size_t item = labels ? 1 : (size_t)h * w;
    size_t n = 4 + 4 * (size_t)ndim + (size_t)count * item;
    uint8_t *b = malloc(n);
    b[0] = 0; b[1] = 0; b[2] = type; b[3] = (uint8_t)ndim;
    int dims[3] = { count, h, w };
    for (int d = 0; d < ndim; d++)
        for (int j = 0; j < 4; j++) b[4 + 4 * d + j] = (uint8_t)(dims[d] >> (24 - 8 * j));
    uint8_t *p = b + 4 + 4 * ndim;
    for (int k = 0; k < count; k++)
        for (size_t i = 0; i < item; i++)
            p[(size_t)k * item + i] = labels ? (uint8_t)(k % 3) : (uint8_t)((k * 7 + i) % 256);
    write_file(path, gz, b, bytes ? bytes : n);
    free(b);
}

static void make_idx_dir(const char *dir, int gz)
{
    char p[600];
    mkdir(dir, 0700);
    const char *ext = gz ? ".gz" : "";
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte%s", dir, ext); write_idx(p, gz, 0, 10, 5, 4, 0, 8);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte%s", dir, ext); write_idx(p, gz, 1, 10, 0, 0, 0, 8);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte%s", dir, ext); write_idx(p, gz, 0, 6, 5, 4, 0, 8);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte%s", dir, ext); write_idx(p, gz, 1, 6, 0, 0, 0, 8);
}

static void check_idx_good(const eng_dataset *ds, int n_train, int n_test, double scale)
{
    assert_int_equal(ds->in_shape[0], 1);
    assert_int_equal(ds->in_shape[1], 5);
    assert_int_equal(ds->in_shape[2], 4);
    assert_int_equal((int)ds->in_size, 20);
    assert_int_equal(ds->n_train, n_train);
    assert_int_equal(ds->n_test, n_test);
    assert_int_equal(ds->classification, 1);
    assert_int_equal(ds->n_classes, 3);
    for (int k = 0; k < n_train; k++) {
        assert_int_equal(ds->y_train[k], k % 3);
        for (int i = 0; i < 20; i++)
            assert_float_equal(ds->x_train[k * 20 + i], (float)(((k * 7 + i) % 256) * scale), 1e-6);
    }
    for (int k = 0; k < n_test; k++) assert_int_equal(ds->y_test[k], k % 3);
}

static void test_idx_good(void **state)
{
    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        char *dir = tpath(gz ? "idxgz" : "idxplain");
        make_idx_dir(dir, gz);
        eng_data_config c = dcfg(ENG_DATA_IDX);
        c.n = 0;
        snprintf(c.path, sizeof c.path, "%s", dir);
        eng_dataset *ds;
        assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
        check_idx_good(ds, 10, 6, 1.0);
        assert_string_equal(ds->name, gz ? "idxgz" : "idxplain");
        eng_data_free(ds);
        /* scale = x/255; n and n_test take the first samples */
        c.normalize = ENG_NORM_SCALE; c.n = 4; c.n_test = 2;
        assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
        check_idx_good(ds, 4, 2, 1.0 / 255);
        eng_data_free(ds);
        /* explicit files; labels derived from the images' standard name */
        c = dcfg(ENG_DATA_IDX);
        c.n = 0;
        snprintf(c.path, sizeof c.path, "%s/train-images-idx3-ubyte%s", dir, gz ? ".gz" : "");
        snprintf(c.test_path, sizeof c.test_path, "%s/t10k-images-idx3-ubyte%s", dir, gz ? ".gz" : "");
        assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
        check_idx_good(ds, 10, 6, 1.0);
        eng_data_free(ds);
    }
    /* a directory without test files is split by test_fraction */
    char *dir = tpath("idxnotest");
    make_idx_dir(dir, 0);
    remove(tpath("idxnotest/t10k-images-idx3-ubyte"));
    remove(tpath("idxnotest/t10k-labels-idx1-ubyte"));
    eng_data_config c = dcfg(ENG_DATA_IDX);
    c.n = 0; c.test_fraction = 0.3;
    snprintf(c.path, sizeof c.path, "%s", dir);
    eng_dataset *ds;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_train, 7);
    assert_int_equal(ds->n_test, 3);
    eng_data_free(ds);
    /* fashion in the path names the dataset */
    char *fdir = tpath("Fashion-small");
    make_idx_dir(fdir, 1);
    snprintf(c.path, sizeof c.path, "%s", fdir);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_string_equal(ds->name, "fashion-mnist");
    eng_data_free(ds);
}

static void test_idx_truncated(void **state)
{
    (void)state;
    char *dir = tpath("idxtrunc");
    make_idx_dir(dir, 1);
    /* 10 images of 5x4: header 16 + 200 bytes; keep 16 + 3.5 images = 86 */
    char *img = tpath("idxtrunc/train-images-idx3-ubyte.gz");
    write_idx(img, 1, 0, 10, 5, 4, 86, 8);
    eng_data_config c = dcfg(ENG_DATA_IDX);
    c.n = 0;
    snprintf(c.path, sizeof c.path, "%s", dir);
    eng_dataset *ds;
    char want[2048];
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: truncated at byte 86 of 216 (image 3)", img);
    assert_string_equal(eng_error(), want);
    /* the cap stops before the cut: fine */
    c.n = 3;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    eng_data_free(ds);
    c.n = 0;

    /* a cut inside the gzip stream itself (the compressed file ends early) */
    write_idx(img, 1, 0, 10, 5, 4, 0, 8);
    FILE *f = fopen(img, "rb");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_file(img, 0, buf, n / 2);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: truncated at byte ", img);
    assert_memory_equal(eng_error(), want, strlen(want));
    assert_non_null(strstr(eng_error(), " of 216 (image "));

    /* a damaged gzip stream (the CRC in its trailer) */
    write_idx(img, 1, 0, 10, 5, 4, 0, 8);
    f = fopen(img, "r+b");
    fseek(f, -8, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -8, SEEK_END);
    fputc(ch ^ 0xff, f);
    fclose(f);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: corrupt gzip data after 0 good bytes: incorrect data check", img);
    assert_string_equal(eng_error(), want);

    /* a truncated plain labels file */
    char *pdir = tpath("idxtrunc2");
    make_idx_dir(pdir, 0);
    char *lab = tpath("idxtrunc2/train-labels-idx1-ubyte");
    write_idx(lab, 0, 1, 10, 0, 0, 8 + 4, 8);
    snprintf(c.path, sizeof c.path, "%s", pdir);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: truncated at byte 12 of 18 (label 4)", lab);
    assert_string_equal(eng_error(), want);
    /* a header cut short */
    write_idx(lab, 0, 1, 10, 0, 0, 6, 8);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: truncated at byte 6 of the 8-byte IDX header", lab);
    assert_string_equal(eng_error(), want);
}

static void test_idx_malformed(void **state)
{
    (void)state;
    char *dir = tpath("idxbad");
    make_idx_dir(dir, 0);
    char *img = tpath("idxbad/train-images-idx3-ubyte");
    eng_data_config c = dcfg(ENG_DATA_IDX);
    c.n = 0;
    snprintf(c.path, sizeof c.path, "%s", dir);
    eng_dataset *ds;
    char want[2048];

    write_file(img, 0, "GIF89a......................", 28);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: bad magic number 0x47494638 at byte 0: not an IDX file "
             "(IDX starts with 00 00, a type byte and a dimension count)", img);
    assert_string_equal(eng_error(), want);

    write_idx(img, 0, 0, 10, 5, 4, 0, 0x0D);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: IDX data type 0x0d at byte 2 is not supported (only 0x08, "
             "unsigned byte)", img);
    assert_string_equal(eng_error(), want);

    /* labels file given where images are expected */
    write_idx(img, 0, 1, 10, 0, 0, 0, 8);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: 1 dimensions at byte 3, but a image file has 2 to 4 (n, [c,] h, w)", img);
    assert_string_equal(eng_error(), want);

    /* label count mismatch */
    write_idx(img, 0, 0, 9, 5, 4, 0, 8);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s holds 9 images but %s holds 10 labels", img,
             tpath("idxbad/train-labels-idx1-ubyte"));
    assert_string_equal(eng_error(), want);

    /* test images of another size */
    write_idx(img, 0, 0, 10, 5, 4, 0, 8);
    write_idx(tpath("idxbad/t10k-images-idx3-ubyte"), 0, 0, 6, 4, 4, 0, 8);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: test images are 4x4 but the training images (%s) are 5x4",
             tpath("idxbad/t10k-images-idx3-ubyte"), img);
    assert_string_equal(eng_error(), want);
}

static void test_idx_missing(void **state)
{
    (void)state;
    eng_data_config c = dcfg(ENG_DATA_IDX);
    eng_dataset *ds;
    char want[2048];
    snprintf(c.path, sizeof c.path, "%s", tpath("nope/train-images-idx3-ubyte.gz"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EIO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", c.path);
    assert_string_equal(eng_error(), want);
    /* an empty directory */
    char *dir = tpath("emptydir");
    mkdir(dir, 0700);
    snprintf(c.path, sizeof c.path, "%s", dir);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EIO);
    snprintf(want, sizeof want, "%s/train-images-idx3-ubyte[.gz]: cannot open: No such file or directory", dir);
    assert_string_equal(eng_error(), want);
    /* labels that cannot be derived */
    snprintf(c.path, sizeof c.path, "%s", tpath("images.bin"));
    write_idx(c.path, 0, 0, 2, 2, 2, 0, 8);
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EINVAL);
    snprintf(want, sizeof want, "data.labels: required: '%s' is not a standard "
             "*-images-idx3-ubyte name to derive the labels file from", c.path);
    assert_string_equal(eng_error(), want);
    /* explicit labels that do not exist */
    snprintf(c.labels, sizeof c.labels, "%s", tpath("labels.bin"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EIO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", c.labels);
    assert_string_equal(eng_error(), want);
}

static void test_fashion_mnist(void **state)
{
    (void)state;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat st;
    if (stat(dir, &st) != 0) {
        print_message("%s is not installed (apt-get install dataset-fashion-mnist): skipped\n", dir);
        skip();
    }
    eng_data_config c = dcfg(ENG_DATA_IDX);
    c.n = 1000; c.n_test = 500; c.normalize = ENG_NORM_SCALE;
    snprintf(c.path, sizeof c.path, "%s", dir);
    eng_dataset *ds;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_string_equal(ds->name, "fashion-mnist");
    assert_int_equal(ds->in_shape[0], 1);
    assert_int_equal(ds->in_shape[1], 28);
    assert_int_equal(ds->in_shape[2], 28);
    assert_int_equal(ds->n_train, 1000);
    assert_int_equal(ds->n_test, 500);
    assert_int_equal(ds->n_classes, 10);
    int seen[10] = {0};
    for (int i = 0; i < ds->n_train; i++) { assert_in_range(ds->y_train[i], 0, 9); seen[ds->y_train[i]]++; }
    for (int k = 0; k < 10; k++) assert_true(seen[k] > 50);
    float mx = 0;
    for (size_t i = 0; i < (size_t)ds->n_train * ds->in_size; i++) {
        assert_true(ds->x_train[i] >= 0 && ds->x_train[i] <= 1);
        if (ds->x_train[i] > mx) mx = ds->x_train[i];
    }
    assert_float_equal(mx, 1.0, 1e-6);
    eng_data_free(ds);
}

/* ---- CSV --------------------------------------------------------------------------- */

static char *write_csv(const char *name, const char *text)
{
    char *p = tpath(name);
    write_file(p, 0, text, strlen(text));
    return p;
}

static void test_csv_good(void **state)
{
    (void)state;
    eng_dataset *ds;
    eng_data_config c = dcfg(ENG_DATA_CSV);
    c.n = 0; c.test_fraction = 0;
    /* no header, classification, label last */
    snprintf(c.path, sizeof c.path, "%s", write_csv("plain.csv", "1,2,0\n3,4,1\n\n5, 6 ,2\r\n# a comment\n7,8,1\n"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_string_equal(ds->name, "plain");
    assert_int_equal(ds->n_train, 4);
    assert_int_equal((int)ds->in_size, 2);
    assert_int_equal(ds->n_classes, 3);
    assert_non_null(ds->y_train);
    /* test_fraction 0: the rows keep... a seeded shuffle; check the set of rows */
    int sum_y = 0; float sum_x = 0;
    for (int i = 0; i < 4; i++) { sum_y += ds->y_train[i]; sum_x += ds->x_train[2 * i] + ds->x_train[2 * i + 1]; }
    assert_int_equal(sum_y, 4);
    assert_float_equal(sum_x, 36, 0);
    for (int i = 0; i < 4; i++)              /* each row keeps its label */
        assert_int_equal(ds->y_train[i], (int)(ds->x_train[2 * i] == 1 ? 0 : ds->x_train[2 * i] == 3 ? 1 : ds->x_train[2 * i] == 5 ? 2 : 1));
    eng_data_free(ds);

    /* header detected; label in column 0; explicit test file; regression */
    c.label_column = 0; c.regression = 1;
    snprintf(c.path, sizeof c.path, "%s", write_csv("reg.csv", "y,a,b\n0.5,1,2\n1.5,3,4\n2.5,5,6\n"));
    snprintf(c.test_path, sizeof c.test_path, "%s", write_csv("reg-test.csv", "y,a,b\n-1,7,8\n"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_train, 3);
    assert_int_equal(ds->n_test, 1);
    assert_int_equal(ds->classification, 0);
    assert_int_equal(ds->n_targets, 1);
    assert_null(ds->y_train);
    float want_t[] = { 0.5f, 1.5f, 2.5f }, want_x[] = { 1, 2, 3, 4, 5, 6 };
    assert_memory_equal(ds->t_train, want_t, sizeof want_t);   /* file order with a test file */
    assert_memory_equal(ds->x_train, want_x, sizeof want_x);
    assert_float_equal(ds->t_test[0], -1, 0);
    assert_float_equal(ds->x_test[1], 8, 0);
    eng_data_free(ds);

    /* explicit header = 1 and caps */
    c = dcfg(ENG_DATA_CSV);
    c.header = 1; c.n = 2; c.n_test = 1;
    snprintf(c.path, sizeof c.path, "%s", write_csv("h1.csv", "1,2,3\n1,2,0\n3,4,1\n5,6,1\n"));
    snprintf(c.test_path, sizeof c.test_path, "%s", write_csv("h1t.csv", "a,b,c\n1,1,0\n2,2,1\n"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_train, 2);
    assert_int_equal(ds->n_test, 1);
    assert_int_equal(ds->y_train[0], 0);
    assert_int_equal(ds->y_train[1], 1);
    eng_data_free(ds);

    /* split by test_fraction without a test file */
    c = dcfg(ENG_DATA_CSV);
    c.n = 0; c.test_fraction = 0.25;
    char big[4096] = "x1,x2,label\n";
    for (int i = 0; i < 40; i++) snprintf(big + strlen(big), sizeof big - strlen(big), "%d,%d,%d\n", i, -i, i % 2);
    snprintf(c.path, sizeof c.path, "%s", write_csv("big.csv", big));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_train, 30);
    assert_int_equal(ds->n_test, 10);
    for (int i = 0; i < 30; i++) {
        assert_float_equal(ds->x_train[2 * i + 1], -ds->x_train[2 * i], 0);
        assert_int_equal(ds->y_train[i], (int)ds->x_train[2 * i] % 2);
    }
    eng_data_free(ds);
}

static void test_csv_labels_remap(void **state)
{
    (void)state;
    eng_dataset *ds;
    eng_data_config c = dcfg(ENG_DATA_CSV);
    c.test_fraction = 0; c.n = 0;
    snprintf(c.path, sizeof c.path, "%s", write_csv("pm.csv", "1,-1\n2,1\n3,-1\n"));
    snprintf(c.test_path, sizeof c.test_path, "%s", write_csv("pm-t.csv", "4,2.5\n"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_classes, 3);         /* -1, 1, 2.5 -> 0, 1, 2 */
    assert_int_equal(ds->y_train[0], 0);
    assert_int_equal(ds->y_train[1], 1);
    assert_int_equal(ds->y_train[2], 0);
    assert_int_equal(ds->y_test[0], 2);
    eng_data_free(ds);
    /* non-negative integers are class indices as they are */
    c.test_path[0] = 0;
    snprintf(c.path, sizeof c.path, "%s", write_csv("idx.csv", "1,4\n2,1.0\n"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
    assert_int_equal(ds->n_classes, 5);
    eng_data_free(ds);
}

static void test_csv_errors(void **state)
{
    (void)state;
    eng_dataset *ds;
    char want[2048];
    eng_data_config c = dcfg(ENG_DATA_CSV);
    struct { const char *name, *text; int header; const char *msg; } cases[] = {
        { "bad.csv", "a,b,c\n1,2,0\n3,abc,1\n", -1, "%s:3: column 2: expected a number, got 'abc'" },
        { "ragged.csv", "1,2,0\n3,4,1\n\n5,6\n", -1, "%s:4: expected 3 columns as on line 1, got 2" },
        { "trunc.csv", "1,2,0\n3,4,1\n5,", -1, "%s:3: expected 3 columns as on line 1, got 2" },
        { "trunc2.csv", "1,2,0\n3,4,1\n5,6,", -1, "%s:3: column 3: expected a number, got ''" },
        { "hdr0.csv", "a,b,c\n1,2,0\n", 0, "%s:1: column 1: expected a number, got 'a'" },
        { "nan.csv", "1,2,0\nnan,4,1\n", -1, "%s:2: column 1: expected a number, got 'nan'" },
        { "empty.csv", "a,b,c\n\n", -1, "%s: no data rows (2 lines read)" },
        { "one.csv", "1\n2\n", -1, "%s:1: 1 column; a CSV dataset needs at least 2 (features and a label)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(c.path, sizeof c.path, "%s", write_csv(cases[i].name, cases[i].text));
        c.header = cases[i].header;
        assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
        snprintf(want, sizeof want, cases[i].msg, c.path);
        assert_string_equal(eng_error(), want);
    }
    c.header = -1;
    /* test file with other columns */
    snprintf(c.path, sizeof c.path, "%s", write_csv("a.csv", "1,2,0\n"));
    snprintf(c.test_path, sizeof c.test_path, "%s", write_csv("b.csv", "1,0\n"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s:1: expected 3 columns as in %s, got 2", c.test_path, c.path);
    assert_string_equal(eng_error(), want);
    c.test_path[0] = 0;
    /* label column out of range */
    c.label_column = 3;
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EINVAL);
    snprintf(want, sizeof want, "data.label_column = 3, but %s has 3 columns (0 to 2, or -1 for the last)", c.path);
    assert_string_equal(eng_error(), want);
    /* missing */
    snprintf(c.path, sizeof c.path, "%s", tpath("absent.csv"));
    assert_int_equal(eng_data_load(&c, 1, &ds), ENG_EIO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", c.path);
    assert_string_equal(eng_error(), want);
}

/* CSV as people have it: gzipped, a leading counts line (sklearn's breast_cancer.csv and
 * wine_data.csv start with "569,30,malignant,benign"), a stratified split. */
static void test_csv_as_people_have_it(void **state)
{
    (void)state;
    eng_dataset *a, *b;
    eng_data_config c = dcfg(ENG_DATA_CSV);
    c.n = 0; c.test_fraction = 0.3;
    char text[8192] = "12,2,first,second\n";          /* the counts line: 4 fields, not 3 */
    /* 90 rows of class 0, 10 of class 1: stratification matters */
    for (int i = 0; i < 100; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%d,%d,%d\n", i, 2 * i, i % 10 == 0);
    snprintf(c.path, sizeof c.path, "%s", write_csv("counts.csv", text));
    assert_int_equal(eng_data_load(&c, 1, &a), ENG_EFORMAT);     /* without skip_rows: ragged */
    char want[1200];
    snprintf(want, sizeof want, "%s:2: expected 4 columns as on line 1, got 3", c.path);
    assert_string_equal(eng_error(), want);
    c.skip_rows = 1;
    assert_int_equal(eng_data_load(&c, 1, &a), ENG_OK);
    assert_int_equal(a->n_train + a->n_test, 100);
    assert_int_equal(a->n_test, 30);
    /* the same file gzipped (name.csv.gz) loads the same rows; the name drops .csv.gz */
    write_file(tpath("counts.csv.gz"), 1, text, strlen(text));
    snprintf(c.path, sizeof c.path, "%s", tpath("counts.csv.gz"));
    assert_int_equal(eng_data_load(&c, 1, &b), ENG_OK);
    assert_true(ds_equal(a, b));
    assert_string_equal(b->name, "counts");
    eng_data_free(b);
    /* skip_rows counts in line numbers; too many leaves no data */
    c.skip_rows = 200;
    assert_int_equal(eng_data_load(&c, 1, &b), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: no data rows (101 lines read, data.skip_rows skipped some)", c.path);
    assert_string_equal(eng_error(), want);
    c.skip_rows = 1;
    /* stratified: the test set holds exactly 30% of each class (27 + 3), rows intact */
    c.stratify = 1;
    assert_int_equal(eng_data_load(&c, 1, &b), ENG_OK);
    assert_int_equal(b->n_test, 30);
    int ones = 0;
    for (int i = 0; i < b->n_test; i++) {
        ones += b->y_test[i];
        assert_int_equal(b->y_test[i], (int)b->x_test[2 * i] % 10 == 0);
        assert_float_equal(b->x_test[2 * i + 1], 2 * b->x_test[2 * i], 0);
    }
    assert_int_equal(ones, 3);
    float seen = 0;                            /* train + test = every row once */
    for (int i = 0; i < b->n_train; i++) seen += b->x_train[2 * i];
    for (int i = 0; i < b->n_test; i++) seen += b->x_test[2 * i];
    assert_float_equal(seen, 4950, 0);
    eng_data_free(b);
    /* the same seed gives the same stratified split; classes' shares add up exactly */
    assert_int_equal(eng_data_load(&c, 1, &b), ENG_OK);
    eng_dataset *b2;
    assert_int_equal(eng_data_load(&c, 1, &b2), ENG_OK);
    assert_true(ds_equal(b, b2));
    eng_data_free(b); eng_data_free(b2);
    eng_data_free(a);
    /* a corrupt gzip stream is reported, not read as text */
    unsigned char junk[64] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff };
    snprintf(c.path, sizeof c.path, "%s", tpath("bad.csv.gz"));
    write_file(c.path, 0, junk, sizeof junk);
    assert_int_equal(eng_data_load(&c, 1, &b), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "corrupt gzip data"));
}

/* ---- normalisation ----------------------------------------------------------------- */

static void test_normalize_train_stats(void **state)
{
    (void)state;
    eng_data_config c = dcfg(ENG_DATA_BLOBS);
    c.features = 3; c.n = 400;
    eng_dataset *raw, *ds;
    assert_int_equal(eng_data_load(&c, 5, &raw), ENG_OK);
    size_t d = raw->in_size;
    double mean[3] = {0}, sd[3] = {0}, mn[3], mx[3], amax[3] = {0};
    for (size_t f = 0; f < d; f++) { mn[f] = INFINITY; mx[f] = -INFINITY; }
    for (int i = 0; i < raw->n_train; i++)
        for (size_t f = 0; f < d; f++) {
            double v = raw->x_train[i * d + f];
            mean[f] += v;
            if (v < mn[f]) mn[f] = v;
            if (v > mx[f]) mx[f] = v;
            if (fabs(v) > amax[f]) amax[f] = fabs(v);
        }
    for (size_t f = 0; f < d; f++) mean[f] /= raw->n_train;
    for (int i = 0; i < raw->n_train; i++)
        for (size_t f = 0; f < d; f++) sd[f] += pow(raw->x_train[i * d + f] - mean[f], 2);
    for (size_t f = 0; f < d; f++) sd[f] = sqrt(sd[f] / raw->n_train);

    eng_norm kinds[] = { ENG_NORM_STANDARD, ENG_NORM_MINMAX, ENG_NORM_SCALE };
    for (int k = 0; k < 3; k++) {
        c.normalize = kinds[k];
        assert_int_equal(eng_data_load(&c, 5, &ds), ENG_OK);
        for (int part = 0; part < 2; part++) {
            const float *x = part ? ds->x_test : ds->x_train, *rx = part ? raw->x_test : raw->x_train;
            int rows = part ? ds->n_test : ds->n_train;
            for (int i = 0; i < rows; i++)
                for (size_t f = 0; f < d; f++) {
                    double v = rx[i * d + f], want =
                        kinds[k] == ENG_NORM_STANDARD ? (v - mean[f]) / sd[f]
                        : kinds[k] == ENG_NORM_MINMAX ? (v - mn[f]) / (mx[f] - mn[f]) : v / amax[f];
                    assert_float_equal(x[i * d + f], want, 1e-4);
                }
        }
        /* the test set is not used for statistics: it is not exactly standardised */
        if (kinds[k] == ENG_NORM_STANDARD) {
            double tm = 0;
            for (int i = 0; i < ds->n_test; i++) tm += ds->x_test[i * d];
            assert_true(fabs(tm / ds->n_test) > 1e-4);
        }
        eng_data_free(ds);
    }
    eng_data_free(raw);

    /* a constant feature stays finite */
    eng_data_config cc = dcfg(ENG_DATA_CSV);
    cc.normalize = ENG_NORM_STANDARD; cc.test_fraction = 0;
    snprintf(cc.path, sizeof cc.path, "%s", write_csv("const.csv", "1,5,0\n1,7,1\n1,9,0\n"));
    assert_int_equal(eng_data_load(&cc, 1, &ds), ENG_OK);
    for (int i = 0; i < 3; i++) assert_float_equal(ds->x_train[2 * i], 0, 0);
    eng_data_free(ds);
}

/* ---- batcher ----------------------------------------------------------------------- */

/* n samples whose single feature is their index; label = index % 5, target = 2 * index. */
static eng_dataset *index_ds(int n, int regression)
{
    eng_dataset *ds = calloc(1, sizeof *ds);
    ds->n_train = n;
    ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = 2;
    ds->in_size = 2;
    ds->x_train = malloc((size_t)n * 2 * sizeof(float));
    if (regression) { ds->n_targets = 1; ds->t_train = malloc((size_t)n * sizeof(float)); }
    else { ds->classification = 1; ds->n_classes = 5; ds->y_train = malloc((size_t)n * sizeof(int32_t)); }
    for (int i = 0; i < n; i++) {
        ds->x_train[2 * i] = (float)i; ds->x_train[2 * i + 1] = (float)-i;
        if (regression) ds->t_train[i] = 2.0f * i; else ds->y_train[i] = i % 5;
    }
    return ds;
}

static void index_ds_free(eng_dataset *ds)
{
    free(ds->x_train); free(ds->y_train); free(ds->t_train); free(ds);
}

/* Every sample exactly once per epoch; rows, epoch and last_in_epoch as documented.
 * Returns the order seen (epochs * n indices; caller frees). */
static int *run_epochs(const eng_dataset *ds, int batch, int shuffle, int prefetch, uint64_t seed, int epochs)
{
    eng_batcher *b;
    assert_int_equal(eng_batcher_create(ds, batch, shuffle, prefetch, seed, &b), ENG_OK);
    int n = ds->n_train, bpe = eng_batcher_batches_per_epoch(b);
    int eff = batch <= 0 || batch >= n ? n : batch;
    assert_int_equal(bpe, (n + eff - 1) / eff);
    int *order = malloc((size_t)epochs * n * sizeof(int));
    int *seen = malloc((size_t)n * sizeof(int));
    for (int e = 0; e < epochs; e++) {
        memset(seen, 0, (size_t)n * sizeof(int));
        int pos = 0;
        for (int k = 0; k < bpe; k++) {
            eng_batch bt;
            assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
            assert_int_equal(bt.epoch, e);
            assert_int_equal(bt.last_in_epoch, k == bpe - 1);
            assert_int_equal(bt.rows, k < bpe - 1 ? eff : n - (bpe - 1) * eff);
            for (int r = 0; r < bt.rows; r++) {
                int idx = (int)bt.x[2 * r];
                assert_in_range(idx, 0, n - 1);
                assert_float_equal(bt.x[2 * r + 1], -idx, 0);
                if (ds->y_train) assert_int_equal(bt.y[r], idx % 5); else assert_null(bt.y);
                if (ds->t_train) assert_float_equal(bt.t[r], 2.0f * idx, 0); else assert_null(bt.t);
                seen[idx]++;
                order[e * n + pos++] = idx;
            }
        }
        assert_int_equal(pos, n);
        for (int i = 0; i < n; i++) assert_int_equal(seen[i], 1);
    }
    free(seen);
    eng_batcher_destroy(b);
    return order;
}

static void test_batcher_epochs(void **state)
{
    (void)state;
    eng_dataset *ds = index_ds(103, 0);
    int *a = run_epochs(ds, 10, 1, 0, 7, 4);      /* 10 full batches + one of 3 */
    int *b = run_epochs(ds, 10, 1, 0, 7, 4);
    int *c = run_epochs(ds, 10, 1, 0, 8, 4);
    int *d = run_epochs(ds, 10, 0, 0, 7, 2);
    assert_memory_equal(a, b, 4 * 103 * sizeof(int));                  /* same seed */
    assert_memory_not_equal(a, c, 4 * 103 * sizeof(int));              /* other seed */
    assert_memory_not_equal(a, a + 103, 103 * sizeof(int));            /* new order each epoch */
    for (int i = 0; i < 2 * 103; i++) assert_int_equal(d[i], i % 103);  /* no shuffle */
    free(a); free(b); free(c); free(d);
    /* batch 0 and batch >= n: the full set, every call a new epoch */
    free(run_epochs(ds, 0, 1, 1, 7, 3));
    free(run_epochs(ds, 500, 1, 0, 7, 3));
    free(run_epochs(ds, 1, 1, 1, 7, 2));
    free(run_epochs(ds, 103, 1, 1, 7, 2));
    index_ds_free(ds);
    ds = index_ds(37, 1);
    free(run_epochs(ds, 8, 1, 1, 3, 3));
    index_ds_free(ds);
}

static atomic_int gather_posts;
static void count_gather_post(void) { atomic_fetch_add(&gather_posts, 1); }

/* Without a prefetch thread a batch of ENG_EW_SPLIT_MIN floats or more is gathered over
 * the engine's pool, cut by rows: every row whole and in the same order as one thread
 * gathers it, at 1 to 3 pool threads, with or without PREFETCHW, with one pool job per
 * such batch from 2 threads on; a smaller batch (the epoch's last, 4 rows) is copied
 * whole by the training thread. */
static void test_batcher_gather_rows(void **state)
{
    (void)state;
    enum { N = 300, D = 500, BATCH = 37 };
    eng_dataset *ds = calloc(1, sizeof *ds);
    ds->n_train = N;
    ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = D;
    ds->in_size = D;
    ds->classification = 1; ds->n_classes = 3;
    ds->x_train = malloc(sizeof(float) * N * D);
    ds->y_train = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < D; c++) ds->x_train[i * D + c] = (float)(i * 1000 + c);
        ds->y_train[i] = i % 3;
    }
    float *ref = malloc(sizeof(float) * 2 * N * D);
    for (int run = 0; run < 6; run++) {
        int t = 1 + run / 2;
        eng_pool_set_threads(t);
        eng_prefetchw_set(run % 2 ? 0 : -1);
        eng_batcher *b;
        assert_int_equal(eng_batcher_create(ds, BATCH, 1, 0, 4, &b), ENG_OK);
        atomic_store(&gather_posts, 0);
        atomic_store(&eng_pool_post_hook, count_gather_post);
        int at = 0, split = 0, small = 0;
        while (at < 2 * N) {
            eng_batch bt;
            assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
            if ((size_t)bt.rows * D >= ENG_EW_SPLIT_MIN) split++;
            else small++;
            for (int r = 0; r < bt.rows; r++, at++) {
                int idx = (int)(bt.x[r * D] / 1000.0f);
                for (int c = 0; c < D; c++) assert_float_equal(bt.x[r * D + c], idx * 1000 + c, 0);
                assert_int_equal(bt.y[r], idx % 3);
                if (run == 0) memcpy(ref + at * D, bt.x + r * D, sizeof(float) * D);
                else assert_memory_equal(ref + at * D, bt.x + r * D, sizeof(float) * D);
            }
        }
        atomic_store(&eng_pool_post_hook, NULL);
        assert_int_equal(small, 2);
        assert_int_equal(atomic_load(&gather_posts), t == 1 ? 0 : split);
        eng_batcher_destroy(b);
    }
    eng_prefetchw_set(-1);
    eng_pool_set_threads(1);
    free(ref);
    free(ds->x_train); free(ds->y_train); free(ds);
}

/* ---- the byte copy of the inputs (data_codes.c) -------------------------------------- */

/* A dataset of n_train rows of d values v(i) (i the flat index), unowned arrays. */
static eng_dataset *values_ds(int n, int d, float (*v)(size_t))
{
    eng_dataset *ds = calloc(1, sizeof *ds);
    ds->n_train = n;
    ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = d;
    ds->in_size = (size_t)d;
    ds->classification = 1; ds->n_classes = 3;
    ds->x_train = malloc(sizeof(float) * (size_t)n * (size_t)d);
    ds->y_train = malloc(sizeof(int32_t) * (size_t)n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++) ds->x_train[i] = v(i);
    for (int i = 0; i < n; i++) ds->y_train[i] = i % 3;
    return ds;
}

static void values_ds_free(eng_dataset *ds)
{
    prof_free(ds->x_codes);
    free(ds->x_train); free(ds->y_train); free(ds);
}

static float v_scaled(size_t i) { return (float)((int)(i * 7 % 256) * (1.0 / 255.0)); }
static float v_raw(size_t i) { return (float)(i * 7 % 256); }
static float v_zero(size_t i) { (void)i; return 0.0f; }

/* Codes are kept exactly when every value is (float)(c * k) for a byte c and one k (1 or
 * 1/255), and decode to the floats bit for bit; one value that is not, anywhere (the first
 * block, a middle one, the short tail), and there are none. 3 blocks of 4096 and a tail. */
static void test_data_codes(void **state)
{
    (void)state;
    enum { N = 211, D = 59 };  /* 12449 values */
    float (*const good[])(size_t) = { v_scaled, v_raw, v_zero };
    const double scale[] = { 1.0 / 255.0, 1.0, -1 };
    for (int g = 0; g < 3; g++) {
        eng_dataset *ds = values_ds(N, D, good[g]);
        eng_data_codes_build(ds);
        assert_non_null(ds->x_codes);
        if (scale[g] > 0) assert_true(ds->x_code_scale == scale[g]);
        float *back = malloc(sizeof(float) * N * D);
        eng_data_decode(ds->x_codes, (size_t)N * D, ds->x_code_scale, back);
        assert_memory_equal(back, ds->x_train, sizeof(float) * N * D);
        free(back);
        values_ds_free(ds);
    }
    const float bad[] = { 0.5f / 255.0f, NAN, -0.0f, -1.0f, 256.0f, 1.0f + 1.0f / 255.0f, 1e30f };
    const size_t where[] = { 0, 100, 4096 * 2 + 5, (size_t)N * D - 1 };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
        for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
            eng_dataset *ds = values_ds(N, D, b == 4 ? v_raw : v_scaled);
            ds->x_train[where[w]] = bad[b];
            eng_data_codes_build(ds);
            if (ds->x_codes) fail_msg("value %g at %zu was kept as a code", (double)bad[b], where[w]);
            values_ds_free(ds);
        }
}

/* The decoder gives (float)(c * k) on every ISA path this CPU has, for every byte, at every
 * length (each path's vector body and its scalar tail) and alignment. */
static void test_data_decode_paths(void **state)
{
    (void)state;
    uint8_t c[300];
    for (int i = 0; i < 300; i++) c[i] = (uint8_t)(i * 37 % 256);
    const double ks[] = { 1.0, 1.0 / 255.0, 0.1 };
    float out[300], ref[300];
    eng_isa before = eng_isa_current();
    int checked = 0;
    for (int isa = 0; isa < ENG_ISA_N; isa++) {
        if (!eng_isa_available((eng_isa)isa)) continue;
        assert_int_equal(eng_isa_set((eng_isa)isa), ENG_OK);
        for (size_t k = 0; k < 3; k++)
            for (size_t off = 0; off < 3; off++)
                for (size_t n = 0; n + off <= 300; n += n < 40 ? 1 : 37) {
                    for (size_t i = 0; i < n; i++) ref[i] = (float)(c[off + i] * ks[k]);
                    memset(out, 0xff, sizeof out);
                    eng_data_decode(c + off, n, ks[k], out);
                    assert_memory_equal(out, ref, n * sizeof(float));
                    assert_true(n == 300 || f2u(out[n]) == 0xffffffffu); /* nothing past n */
                }
        checked++;
    }
    assert_int_equal(eng_isa_set(before), ENG_OK);
    printf("  decode checked on %d path(s), up to %s\n", checked, eng_isa_name(eng_isa_best()));
}

/* Loaded IDX images keep their codes when scaled or raw, not when standardised; and the
 * batcher gathers the same batches from the codes as from the floats, at 1 to 3 pool
 * threads (cut by columns) and with the prefetch thread. */
static void test_batcher_codes_same_batches(void **state)
{
    (void)state;
    char *dir = tpath("idxcodes");
    char p[600];
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir); write_idx(p, 0, 0, 300, 10, 10, 0, 8);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", dir); write_idx(p, 0, 1, 300, 0, 0, 0, 8);
    eng_data_config c = dcfg(ENG_DATA_IDX);
    c.n = 0; c.test_fraction = 0.2;
    snprintf(c.path, sizeof c.path, "%s", dir);
    const eng_norm norms[] = { ENG_NORM_NONE, ENG_NORM_STANDARD, ENG_NORM_SCALE };
    eng_dataset *ds = NULL;
    for (int i = 0; i < 3; i++) {
        eng_data_free(ds);
        c.normalize = norms[i];
        assert_int_equal(eng_data_load(&c, 1, &ds), ENG_OK);
        if (norms[i] == ENG_NORM_STANDARD) assert_null(ds->x_codes);
        else assert_non_null(ds->x_codes);
    }
    assert_true(ds->x_code_scale == 1.0 / 255.0);
    /* the same dataset without its codes */
    eng_dataset plain = *ds;
    plain.x_codes = NULL;
    const size_t d = ds->in_size;
    enum { BATCH = 37, STEPS = 20 };
    for (int t = 1; t <= 3; t++)
        for (int prefetch = 0; prefetch < 2; prefetch++) {
            eng_pool_set_threads(t);
            eng_batcher *a, *b;
            assert_int_equal(eng_batcher_create(ds, BATCH, 1, prefetch, 5, &a), ENG_OK);
            assert_int_equal(eng_batcher_create(&plain, BATCH, 1, prefetch, 5, &b), ENG_OK);
            for (int k = 0; k < STEPS; k++) {
                eng_batch x, y;
                assert_int_equal(eng_batcher_next(a, &x), ENG_OK);
                assert_int_equal(eng_batcher_next(b, &y), ENG_OK);
                assert_int_equal(x.rows, y.rows);
                assert_memory_equal(x.x, y.x, (size_t)x.rows * d * sizeof(float));
                assert_memory_equal(x.y, y.y, (size_t)x.rows * sizeof(int32_t));
            }
            eng_batcher_destroy(a);
            eng_batcher_destroy(b);
        }
    eng_pool_set_threads(1);
    eng_data_free(ds);
}

static void test_batcher_prefetch_same_order(void **state)
{
    (void)state;
    for (int reg = 0; reg < 2; reg++) {
        eng_dataset *ds = index_ds(1001, reg);
        int batches[] = { 1, 7, 64, 1000 };
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
            int *a = run_epochs(ds, batches[i], 1, 0, 11, 3);
            int *b = run_epochs(ds, batches[i], 1, 1, 11, 3);
            assert_memory_equal(a, b, 3 * 1001 * sizeof(int));
            free(a); free(b);
        }
        index_ds_free(ds);
    }
}

/* Gathering ahead on the pool's idle workers (eng_batcher_gather_on_pool): at 2 and 3 pool
 * threads, the batches and their order are those of the batcher alone, with shuffles, a
 * short last batch and mixed pace (a trivial pool job before each batch keeps a worker
 * spinning, so it gathers in its idle time); every row is copied once (by a worker or by
 * the caller); some by a worker. It switches only before the first batch, without a
 * prefetch thread, with 2+ pool threads and while no other batcher has the idle time; and a
 * batcher destroyed while a worker is inside its idle task waits for it (make check). */
static void noop_slab(void *ctx, int s, int nslab) { (void)ctx; (void)s; (void)nslab; }

static void test_batcher_gather_on_pool(void **state)
{
    (void)state;
    eng_dataset *ds = index_ds(1001, 0);
    int *want = run_epochs(ds, 7, 1, 0, 5, 3);
    eng_batcher *b, *other;
    /* refused: one pool thread; a prefetch thread; a batch already served */
    eng_pool_set_threads(1);
    assert_int_equal(eng_batcher_create(ds, 7, 1, 0, 5, &b), ENG_OK);
    assert_int_equal(eng_batcher_gather_on_pool(b), 0);
    eng_batcher_destroy(b);
    eng_pool_set_threads(2);
    assert_int_equal(eng_batcher_create(ds, 7, 1, 1, 5, &b), ENG_OK);
    assert_int_equal(eng_batcher_gather_on_pool(b), 0);
    eng_batcher_destroy(b);
    eng_batch bt;
    assert_int_equal(eng_batcher_create(ds, 7, 1, 0, 5, &b), ENG_OK);
    assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
    assert_int_equal(eng_batcher_gather_on_pool(b), 0);
    eng_batcher_destroy(b);
    long workers = 0;
    for (int th = 2; th <= 3; th++) {
        eng_pool_set_threads(th);
        assert_int_equal(eng_batcher_create(ds, 7, 1, 0, 5, &b), ENG_OK);
        assert_int_equal(eng_batcher_gather_on_pool(b), 1);
        assert_true(eng_batcher_prefetching(b));
        assert_int_equal(eng_batcher_create(ds, 7, 1, 0, 5, &other), ENG_OK);
        assert_int_equal(eng_batcher_gather_on_pool(other), 0);   /* the idle time is taken */
        eng_batcher_destroy(other);
        int bpe = eng_batcher_batches_per_epoch(b), pos = 0;
        uint32_t lcg = 777;
        for (int k = 0; k < 3 * bpe; k++) {
            assert_int_equal(eng_pool_run(th, noop_slab, NULL), 1);
            lcg = lcg * 1103515245u + 12345u;
            if ((lcg >> 16) % 2 == 0) usleep(100 + (lcg >> 8) % 200);
            assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
            for (int r = 0; r < bt.rows; r++) assert_int_equal((int)bt.x[2 * r], want[pos++]);
        }
        assert_int_equal(pos, 3 * 1001);
        long by_thread, by_caller;
        eng_batcher_gather_counts(b, &by_thread, &by_caller);
        assert_in_range(by_thread + by_caller, 3 * 1001, 3 * 1001 + 7);
        print_message("  gathered on the pool, %d threads: rows copied by its workers %ld, by the caller %ld\n", th,
                      by_thread, by_caller);
        workers += by_thread;
        eng_batcher_destroy(b);
    }
    assert_true(workers > 0);
    /* destroyed at once, a worker perhaps inside its idle task */
    for (int k = 0; k < 40; k++) {
        assert_int_equal(eng_batcher_create(ds, 7, 1, 0, 5, &b), ENG_OK);
        assert_int_equal(eng_batcher_gather_on_pool(b), 1);
        assert_int_equal(eng_pool_run(2, noop_slab, NULL), 1);
        if (k % 2) usleep(20);
        eng_batcher_destroy(b);
    }
    eng_pool_set_threads(1);
    free(want);
    index_ds_free(ds);
}

/* The caller's wait for the thread timed out and, before it took the mutex again, the
 * thread completed its batch and the next one and went to sleep on a full ring: a caller
 * that then slept too without looking again never woke (the CI machine hung here). The
 * test pause opens that window on every timed-out wait; the read latency makes the thread
 * slow enough for the waits to time out. A watchdog turns a hang into a failure. */
static int pauses;
static void pause_2ms(void) { pauses++; usleep(2000); }
static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "batcher: deadlock, the caller and the prefetch thread both sleep\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void test_batcher_prefetch_no_lost_wakeup(void **state)
{
    (void)state;
    eng_dataset *ds = index_ds(101, 0);
    int *want = run_epochs(ds, 1, 1, 0, 3, 2);
    eng_batcher_options o = { .shuffle = 1, .prefetch = 1, .depth = 1, .wait_scope = -1,
                              .gather_scope = -1, .read_latency_ms = 0.3 };
    eng_batcher *b;
    assert_int_equal(eng_batcher_create_opts(ds, 1, &o, 3, &b), ENG_OK);
    eng_batcher_test_pause = pause_2ms;
    signal(SIGALRM, watchdog);
    alarm(60);
    for (int k = 0; k < 2 * 101; k++) {
        eng_batch bt;
        assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
        assert_int_equal((int)bt.x[0], want[k]);
        usleep(100);    /* a short step: the thread claims the next batch first */
    }
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    eng_batcher_test_pause = NULL;
    print_message("  pauses %d\n", pauses);
    eng_batcher_destroy(b);
    free(want);
    index_ds_free(ds);
}

/* Prefetch with a caller whose pace varies (no work: it outruns the thread and gathers
 * batches, or the rest of one, itself; some work: the thread gathers ahead): the same
 * batches in the same order as without prefetch, every row copied once by one side. */
static void test_batcher_prefetch_mixed_pace(void **state)
{
    (void)state;
    eng_dataset *ds = index_ds(1001, 0);
    int *want = run_epochs(ds, 7, 1, 0, 5, 3);
    eng_batcher *b;
    assert_int_equal(eng_batcher_create(ds, 7, 1, 1, 5, &b), ENG_OK);
    int bpe = eng_batcher_batches_per_epoch(b), pos = 0;
    uint32_t lcg = 12345;
    for (int k = 0; k < 3 * bpe; k++) {
        eng_batch bt;
        assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
        for (int r = 0; r < bt.rows; r++) assert_int_equal((int)bt.x[2 * r], want[pos++]);
        lcg = lcg * 1103515245u + 12345u;
        if ((lcg >> 16) % 4 == 0) usleep(200 + (lcg >> 8) % 300);     /* a quarter of the steps train a while */
    }
    assert_int_equal(pos, 3 * 1001);
    long by_thread, by_caller;
    eng_batcher_gather_counts(b, &by_thread, &by_caller);
    /* rows copied: every row taken, once, plus up to two batches the thread gathered past
     * the last one taken */
    assert_in_range(by_thread + by_caller, 3 * 1001, 3 * 1001 + 2 * 7);
    print_message("  prefetch, mixed pace: %d batches; rows copied by the thread %ld, by the caller %ld\n",
                  3 * bpe, by_thread, by_caller);
    eng_batcher_destroy(b);
    /* without prefetch nothing is counted */
    assert_int_equal(eng_batcher_create(ds, 7, 1, 0, 5, &b), ENG_OK);
    eng_batch bt;
    assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
    eng_batcher_gather_counts(b, &by_thread, &by_caller);
    assert_int_equal(by_thread + by_caller, 0);
    eng_batcher_destroy(b);
    free(want);
    index_ds_free(ds);
}

/* Wide rows (one row per chunk): the caller and the thread copy parts of the same batch,
 * and a caller arriving just as a batch completes must not touch the next one. Every batch
 * equals the one gathered without prefetch, value for value, over many epochs. */
static void test_batcher_prefetch_shared_batches(void **state)
{
    (void)state;
    const int n = 203, w = 4100, batch = 16, epochs = 12;
    eng_dataset *ds = calloc(1, sizeof *ds);
    ds->n_train = n;
    ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = w;
    ds->in_size = (size_t)w;
    ds->classification = 1; ds->n_classes = 7;
    ds->x_train = malloc((size_t)n * w * sizeof(float));
    ds->y_train = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < w; j++) ds->x_train[(size_t)i * w + j] = (float)(i * 10000 + j);
        ds->y_train[i] = i % 7;
    }
    eng_batcher *a, *b;
    assert_int_equal(eng_batcher_create(ds, batch, 1, 0, 9, &a), ENG_OK);
    assert_int_equal(eng_batcher_create(ds, batch, 1, 1, 9, &b), ENG_OK);
    int steps = epochs * eng_batcher_batches_per_epoch(a);
    float *want = malloc((size_t)batch * w * sizeof(float));
    uint32_t lcg = 777;
    for (int k = 0; k < steps; k++) {
        eng_batch ba, bb;
        assert_int_equal(eng_batcher_next(a, &ba), ENG_OK);
        memcpy(want, ba.x, (size_t)ba.rows * w * sizeof(float));
        assert_int_equal(eng_batcher_next(b, &bb), ENG_OK);
        assert_int_equal(bb.rows, ba.rows);
        assert_int_equal(bb.epoch, ba.epoch);
        assert_int_equal(bb.last_in_epoch, ba.last_in_epoch);
        assert_memory_equal(bb.x, want, (size_t)ba.rows * w * sizeof(float));
        assert_memory_equal(bb.y, ba.y, (size_t)ba.rows * sizeof(int32_t));
        lcg = lcg * 1103515245u + 12345u;
        if ((lcg >> 16) % 3 == 0) usleep((lcg >> 8) % 60);
    }
    long by_thread, by_caller;
    eng_batcher_gather_counts(b, &by_thread, &by_caller);
    assert_in_range(by_thread + by_caller, (long)epochs * n, (long)epochs * n + 2 * batch);
    print_message("  prefetch, wide rows: %d batches; rows copied by the thread %ld, by the caller %ld\n",
                  steps, by_thread, by_caller);
    eng_batcher_destroy(a);
    eng_batcher_destroy(b);
    free(want);
    index_ds_free(ds);
}

static void test_batcher_destroy_early(void **state)
{
    (void)state;
    eng_dataset *ds = index_ds(50, 0);
    for (int k = 0; k < 4; k++) {             /* destroy after 0..3 batches */
        eng_batcher *b;
        assert_int_equal(eng_batcher_create(ds, 8, 1, 1, 1, &b), ENG_OK);
        for (int j = 0; j < k; j++) { eng_batch bt; assert_int_equal(eng_batcher_next(b, &bt), ENG_OK); }
        eng_batcher_destroy(b);
    }
    eng_dataset empty = { .n_train = 0 };
    eng_batcher *b;
    assert_int_equal(eng_batcher_create(&empty, 8, 1, 1, 1, &b), ENG_EINVAL);
    assert_string_equal(eng_error(), "batcher: the training set is empty");
    index_ds_free(ds);
}

/* A real dataset through the batcher: gathered rows equal the stored rows. */
static void test_batcher_real_rows(void **state)
{
    (void)state;
    eng_data_config c = dcfg(ENG_DATA_BLOBS);
    c.features = 5; c.n = 300;
    eng_dataset *ds;
    assert_int_equal(eng_data_load(&c, 2, &ds), ENG_OK);
    eng_batcher *b;
    assert_int_equal(eng_batcher_create(ds, 32, 0, 1, 2, &b), ENG_OK);
    for (int k = 0; k < eng_batcher_batches_per_epoch(b); k++) {
        eng_batch bt;
        assert_int_equal(eng_batcher_next(b, &bt), ENG_OK);
        assert_memory_equal(bt.x, ds->x_train + (size_t)k * 32 * 5, (size_t)bt.rows * 5 * sizeof(float));
        assert_memory_equal(bt.y, ds->y_train + (size_t)k * 32, (size_t)bt.rows * sizeof(int32_t));
    }
    eng_batcher_destroy(b);
    eng_data_free(ds);
}

int test_engine_data(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generators_shapes),
        cmocka_unit_test(test_generators_deterministic),
        cmocka_unit_test(test_generator_options),
        cmocka_unit_test(test_linreg_truth_fixed),
        cmocka_unit_test(test_generator_errors),
        cmocka_unit_test(test_idx_good),
        cmocka_unit_test(test_idx_truncated),
        cmocka_unit_test(test_idx_malformed),
        cmocka_unit_test(test_idx_missing),
        cmocka_unit_test(test_fashion_mnist),
        cmocka_unit_test(test_csv_good),
        cmocka_unit_test(test_csv_labels_remap),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_csv_as_people_have_it),
        cmocka_unit_test(test_normalize_train_stats),
        cmocka_unit_test(test_batcher_epochs),
        cmocka_unit_test(test_batcher_gather_rows),
        cmocka_unit_test(test_data_codes),
        cmocka_unit_test(test_data_decode_paths),
        cmocka_unit_test(test_batcher_codes_same_batches),
        cmocka_unit_test(test_batcher_prefetch_same_order),
        cmocka_unit_test(test_batcher_prefetch_mixed_pace),
        cmocka_unit_test(test_batcher_gather_on_pool),
        cmocka_unit_test(test_batcher_prefetch_no_lost_wakeup),
        cmocka_unit_test(test_batcher_prefetch_shared_batches),
        cmocka_unit_test(test_batcher_destroy_early),
        cmocka_unit_test(test_batcher_real_rows),
    };
    return cmocka_run_group_tests_name("engine_data", tests, setup_tmp, teardown_tmp);
}
