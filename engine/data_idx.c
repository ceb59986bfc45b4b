/* data_idx.c — IDX files (MNIST, Fashion-MNIST), gzipped or not, read through zlib's gz*
 * API (which reads plain files transparently). Byte offsets in messages count bytes of
 * the uncompressed IDX stream. */
#include "data_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define PATH_MAX_LEN 512

typedef struct {
    int ndim;
    long long dims[4];
    long long count;      /* dims[0] */
    size_t item;          /* bytes per sample: product of dims[1..] */
    int rows;             /* samples read (after the cap) */
    uint8_t *data;        /* rows * item */
} idx_file;

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Reads exactly len bytes; returns the count read (< len at end of data) or -1 with a
 * message when the gzip stream is corrupt. */
static long long read_full(gzFile f, const char *path, long long offset, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        size_t want = len - got > (1u << 30) ? (1u << 30) : len - got;
        int r = gzread(f, (char *)buf + got, (unsigned)want);
        if (r < 0 || r == 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            if (zerr != Z_OK && zerr != Z_BUF_ERROR) {
                eng_fail(ENG_EFORMAT, "%s: corrupt data after byte %lld: %s", path,
                         offset + (long long)got, zerr == Z_ERRNO ? strerror(errno) : msg);
                return -1;
            }
            break;
        }
        got += (size_t)r;
    }
    return (long long)got;
}

/* Opens and validates one IDX file; reads the first `cap` samples (0 = all). labels: a
 * 1-dimensional label file is expected, otherwise 2 to 4 dimensions of image data. */
static int idx_read(const char *path, int labels, int cap, idx_file *out)
{
    memset(out, 0, sizeof *out);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return eng_fail(ENG_EIO, "%s: cannot open: %s", path,
                        errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1u << 17);
    const char *what = labels ? "label" : "image";
    uint8_t hdr[4 + 4 * 4];
    int rc = ENG_OK;
    long long got = read_full(f, path, 0, hdr, 4);
    if (got < 0) { rc = ENG_EFORMAT; goto done; }
    if (got < 4) {
        rc = eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of the 4-byte IDX magic number",
                      path, got);
        goto done;
    }
    if (hdr[0] != 0 || hdr[1] != 0) {
        rc = eng_fail(ENG_EFORMAT,
                      "%s: bad magic number 0x%02x%02x%02x%02x at byte 0: not an IDX file "
                      "(IDX starts with 00 00, a type byte and a dimension count)",
                      path, hdr[0], hdr[1], hdr[2], hdr[3]);
        goto done;
    }
    if (hdr[2] != 0x08) {
        rc = eng_fail(ENG_EFORMAT, "%s: IDX data type 0x%02x at byte 2 is not supported "
                      "(only 0x08, unsigned byte)", path, hdr[2]);
        goto done;
    }
    int ndim = hdr[3];
    if (labels ? ndim != 1 : (ndim < 2 || ndim > 4)) {
        rc = eng_fail(ENG_EFORMAT, "%s: %d dimensions at byte 3, but a %s file has %s", path,
                      ndim, labels ? "label" : "image", labels ? "1" : "2 to 4 (n, [c,] h, w)");
        goto done;
    }
    got = read_full(f, path, 4, hdr + 4, 4 * (size_t)ndim);
    if (got < 0) { rc = ENG_EFORMAT; goto done; }
    if (got < 4 * ndim) {
        rc = eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of the %d-byte IDX header",
                      path, 4 + got, 4 + 4 * ndim);
        goto done;
    }
    out->ndim = ndim;
    out->item = 1;
    for (int d = 0; d < ndim; d++) {
        const uint8_t *p = hdr + 4 + 4 * d;
        out->dims[d] = (long long)p[0] << 24 | (long long)p[1] << 16 | (long long)p[2] << 8 | p[3];
        if (out->dims[d] == 0 || (d == 0 && out->dims[d] > 0x7fffffff)) {
            rc = eng_fail(ENG_EFORMAT, "%s: dimension %d at byte %d is %lld", path, d, 4 + 4 * d,
                          out->dims[d]);
            goto done;
        }
        if (d > 0) out->item *= (size_t)out->dims[d];
    }
    if (out->item > (1u << 24)) {
        rc = eng_fail(ENG_EFORMAT, "%s: samples of %zu bytes are too large", path, out->item);
        goto done;
    }
    out->count = out->dims[0];
    long long hsize = 4 + 4LL * ndim;
    long long total = hsize + out->count * (long long)out->item;
    int rows = cap > 0 && cap < out->count ? cap : (int)out->count;
    out->data = prof_malloc((size_t)rows * out->item);
    if (!out->data) {
        rc = eng_fail(ENG_ENOMEM, "%s: out of memory for %d %ss", path, rows, what);
        goto done;
    }
    size_t want = (size_t)rows * out->item;
    got = read_full(f, path, hsize, out->data, want);
    if (got < 0) { rc = ENG_EFORMAT; goto done; }
    if ((size_t)got < want) {
        rc = eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of %lld (%s %lld)", path,
                      hsize + got, total, what, got / (long long)out->item);
        goto done;
    }
    out->rows = rows;
done:
    gzclose(f);
    if (rc) { prof_free(out->data); out->data = NULL; }
    return rc;
}

/* Finds dir/name or dir/name.gz. */
static int find_std(const char *dir, const char *name, char *out)
{
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    snprintf(out, PATH_MAX_LEN, "%s%s%s", dir, sep, name);
    if (is_file(out)) return 1;
    snprintf(out, PATH_MAX_LEN, "%s%s%s.gz", dir, sep, name);
    if (is_file(out)) return 1;
    snprintf(out, PATH_MAX_LEN, "%s%s%s[.gz]", dir, sep, name);
    return 0;
}

/* The labels file that goes with an images file of a standard name: "images-idx3" ->
 * "labels-idx1" in the base name. 0 when the name is not standard. */
static int derive_labels(const char *images, char *out)
{
    const char *base = eng_data_basename(images);
    const char *hit = strstr(base, "images-idx3");
    if (!hit) return 0;
    size_t pre = (size_t)(hit - images);
    snprintf(out, PATH_MAX_LEN, "%.*slabels-idx1%s", (int)pre, images, hit + strlen("images-idx3"));
    return 1;
}

static int contains_ci(const char *s, const char *word)
{
    size_t w = strlen(word);
    for (; *s; s++) {
        size_t i = 0;
        while (i < w && s[i] && tolower((unsigned char)s[i]) == word[i]) i++;
        if (i == w) return 1;
    }
    return 0;
}

/* Images + labels of one part (train or test), checked against each other. */
static int load_pair(const char *img_path, const char *lab_path, int cap, idx_file *img,
                     idx_file *lab)
{
    int rc = idx_read(img_path, 0, cap, img);
    if (rc) return rc;
    rc = idx_read(lab_path, 1, cap, lab);
    if (rc) { prof_free(img->data); img->data = NULL; return rc; }
    if (img->count != lab->count) {
        prof_free(img->data); prof_free(lab->data);
        img->data = lab->data = NULL;
        return eng_fail(ENG_EFORMAT, "%s holds %lld images but %s holds %lld labels",
                        img_path, img->count, lab_path, lab->count);
    }
    return ENG_OK;
}

int eng_data_load_idx(const eng_data_config *dc, eng_dataset *ds, int *split)
{
    char img[PATH_MAX_LEN], lab[PATH_MAX_LEN], timg[PATH_MAX_LEN], tlab[PATH_MAX_LEN];
    int have_test = 0;
    if (!dc->path[0])
        return eng_fail(ENG_EINVAL, "data.path: required for source = idx (a directory with "
                        "train-images-idx3-ubyte.gz etc., or the training images file)");
    if (is_dir(dc->path)) {
        if (!find_std(dc->path, "train-images-idx3-ubyte", img))
            return eng_fail(ENG_EIO, "%s: cannot open: No such file or directory", img);
        if (dc->labels[0]) snprintf(lab, sizeof lab, "%s", dc->labels);
        else if (!find_std(dc->path, "train-labels-idx1-ubyte", lab))
            return eng_fail(ENG_EIO, "%s: cannot open: No such file or directory", lab);
        int ti = find_std(dc->path, "t10k-images-idx3-ubyte", timg);
        int tl = find_std(dc->path, "t10k-labels-idx1-ubyte", tlab);
        if (ti != tl)
            return eng_fail(ENG_EIO, "%s: cannot open: No such file or directory (the directory "
                            "has test %s but not test %s)", ti ? tlab : timg,
                            ti ? "images" : "labels", ti ? "labels" : "images");
        have_test = ti;
    } else {
        snprintf(img, sizeof img, "%s", dc->path);
        if (dc->labels[0]) snprintf(lab, sizeof lab, "%s", dc->labels);
        else if (!derive_labels(img, lab))
            return eng_fail(ENG_EINVAL, "data.labels: required: '%s' is not a standard "
                            "*-images-idx3-ubyte name to derive the labels file from", img);
    }
    if (dc->test_path[0]) {
        snprintf(timg, sizeof timg, "%s", dc->test_path);
        if (dc->test_labels[0]) snprintf(tlab, sizeof tlab, "%s", dc->test_labels);
        else if (!derive_labels(timg, tlab))
            return eng_fail(ENG_EINVAL, "data.test_labels: required: '%s' is not a standard "
                            "*-images-idx3-ubyte name to derive the labels file from", timg);
        have_test = 1;
    } else if (dc->test_labels[0]) {
        return eng_fail(ENG_EINVAL, "data.test_labels is set but data.test_path is not");
    }

    idx_file tr_i, tr_l, te_i = {0}, te_l = {0};
    /* Without a test set every sample is read: the split picks from all of them. */
    int rc = load_pair(img, lab, have_test ? dc->n : 0, &tr_i, &tr_l);
    if (rc) return rc;
    if (have_test) {
        rc = load_pair(timg, tlab, dc->n_test, &te_i, &te_l);
        if (!rc && (te_i.item != tr_i.item || te_i.ndim != tr_i.ndim ||
                    memcmp(te_i.dims + 1, tr_i.dims + 1, sizeof(long long) * (size_t)(tr_i.ndim - 1)))) {
            rc = eng_fail(ENG_EFORMAT, "%s: test images are %lldx%lld but the training images "
                          "(%s) are %lldx%lld", timg, te_i.dims[te_i.ndim - 2],
                          te_i.dims[te_i.ndim - 1], img, tr_i.dims[tr_i.ndim - 2],
                          tr_i.dims[tr_i.ndim - 1]);
        }
    }
    if (!rc) {
        ds->classification = 1;
        ds->n_targets = 0;
        if (tr_i.ndim == 2) { ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = (int)tr_i.dims[1]; }
        else if (tr_i.ndim == 3) { ds->in_shape[0] = 1; ds->in_shape[1] = (int)tr_i.dims[1]; ds->in_shape[2] = (int)tr_i.dims[2]; }
        else { ds->in_shape[0] = (int)tr_i.dims[1]; ds->in_shape[1] = (int)tr_i.dims[2]; ds->in_shape[2] = (int)tr_i.dims[3]; }
        ds->in_size = tr_i.item;
        rc = eng_data_alloc(ds, tr_i.rows, te_i.rows);
    }
    if (!rc) {
        int maxlab = 0;
        for (int part = 0; part < 2; part++) {
            const idx_file *im = part ? &te_i : &tr_i, *lb = part ? &te_l : &tr_l;
            float *x = part ? ds->x_test : ds->x_train;
            int32_t *y = part ? ds->y_test : ds->y_train;
            size_t nv = (size_t)im->rows * im->item;
            for (size_t i = 0; i < nv; i++) x[i] = (float)im->data[i];
            for (int i = 0; i < lb->rows; i++) {
                y[i] = lb->data[i];
                if (y[i] > maxlab) maxlab = y[i];
            }
        }
        ds->n_classes = maxlab + 1;
        const char *nm = contains_ci(dc->path, "fashion") ? "fashion-mnist"
                       : contains_ci(dc->path, "mnist") ? "mnist" : eng_data_basename(dc->path);
        snprintf(ds->name, sizeof ds->name, "%s", nm);
    }
    prof_free(tr_i.data); prof_free(tr_l.data); prof_free(te_i.data); prof_free(te_l.data);
    *split = !have_test;
    return rc;
}
