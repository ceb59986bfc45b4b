/* data_idx.c — IDX files (MNIST, Fashion-MNIST), gzipped or not, read through zlib's gz*
 * API (which reads plain files transparently). Byte offsets in messages count bytes of
 * the uncompressed IDX stream. */
#include "data_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define PATH_MAX_LEN 512

/* One IDX file whose header has been read and checked; the samples follow. */
typedef struct {
    gzFile f;
    const char *path;
    int labels;           /* 1: a label file (1 dimension) */
    int ndim;
    long long dims[4];
    long long count;      /* dims[0] */
    size_t item;          /* bytes per sample: product of dims[1..] */
    long long hsize;      /* header bytes */
    long long disk_size;  /* bytes of the file on disk */
    uint32_t gz_isize;    /* gzip: the size field of the file's last 4 bytes */
    int gz_tail;          /* gzip: the file was long enough to have one */
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
                /* zlib prefixes its message with "<fd:N>" (the file came from gzdopen): drop it. */
                const char *sep = msg[0] == '<' ? strstr(msg, ">: ") : NULL;
                if (sep) msg = sep + 3;
                eng_fail(ENG_EFORMAT, "%s: corrupt gzip data after %lld good bytes: %s", path,
                         offset + (long long)got, zerr == Z_ERRNO ? strerror(errno) : msg);
                return -1;
            }
            break;
        }
        got += (size_t)r;
    }
    return (long long)got;
}

/* Opens one IDX file and validates its header. labels: a 1-dimensional label file is
 * expected, otherwise 2 to 4 dimensions of image data. On success the file stays open at
 * the first sample (idx_close closes it). */
static int idx_open(const char *path, int labels, idx_file *out)
{
    memset(out, 0, sizeof *out);
    out->path = path;
    out->labels = labels;
    long long disk_size;
    int fd = eng_open_input(path, ENG_MAX_IDX_BYTES, "IDX file", &disk_size);
    if (fd < 0) return ENG_EIO;
    /* The last 4 bytes of a gzip file give the uncompressed size (mod 2^32). */
    uint8_t tail[4] = {0};
    int have_tail = disk_size >= 18 && pread(fd, tail, 4, disk_size - 4) == 4;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return eng_fail(ENG_ENOMEM, "%s: cannot open: out of memory", path);
    }
    gzbuffer(f, 1u << 17);
    uint8_t hdr[4 + 4 * 4];
    int rc = ENG_OK;
    long long got = read_full(f, path, 0, hdr, 4);
    if (got < 0) { rc = ENG_EFORMAT; goto fail; }
    if (got < 4) {
        rc = eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of the 4-byte IDX magic number",
                      path, got);
        goto fail;
    }
    if (hdr[0] != 0 || hdr[1] != 0) {
        rc = eng_fail(ENG_EFORMAT,
                      "%s: bad magic number 0x%02x%02x%02x%02x at byte 0: not an IDX file "
                      "(IDX starts with 00 00, a type byte and a dimension count)",
                      path, hdr[0], hdr[1], hdr[2], hdr[3]);
        goto fail;
    }
    if (hdr[2] != 0x08) {
        rc = eng_fail(ENG_EFORMAT, "%s: IDX data type 0x%02x at byte 2 is not supported "
                      "(only 0x08, unsigned byte)", path, hdr[2]);
        goto fail;
    }
    int ndim = hdr[3];
    if (labels ? ndim != 1 : (ndim < 2 || ndim > 4)) {
        rc = eng_fail(ENG_EFORMAT, "%s: %d dimensions at byte 3, but a %s file has %s", path,
                      ndim, labels ? "label" : "image", labels ? "1" : "2 to 4 (n, [c,] h, w)");
        goto fail;
    }
    got = read_full(f, path, 4, hdr + 4, 4 * (size_t)ndim);
    if (got < 0) { rc = ENG_EFORMAT; goto fail; }
    if (got < 4 * ndim) {
        rc = eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of the %d-byte IDX header",
                      path, 4 + got, 4 + 4 * ndim);
        goto fail;
    }
    out->ndim = ndim;
    out->item = 1;
    for (int d = 0; d < ndim; d++) {
        const uint8_t *p = hdr + 4 + 4 * d;
        out->dims[d] = (long long)p[0] << 24 | (long long)p[1] << 16 | (long long)p[2] << 8 | p[3];
        if (out->dims[d] == 0 || (d == 0 && out->dims[d] > 0x7fffffff)) {
            rc = eng_fail(ENG_EFORMAT, "%s: dimension %d at byte %d is %lld", path, d, 4 + 4 * d,
                          out->dims[d]);
            goto fail;
        }
        if (d > 0) out->item *= (size_t)out->dims[d];
    }
    if (out->item > (1u << 24)) {
        rc = eng_fail(ENG_EFORMAT, "%s: samples of %zu bytes are too large", path, out->item);
        goto fail;
    }
    out->count = out->dims[0];
    out->hsize = 4 + 4LL * ndim;
    /* Trailing bytes, inside the IDX stream or after the gzip stream, mean the file is
     * not what its header says: an error, not silently ignored. */
    long long want = out->hsize + out->count * (long long)out->item;
    if (gzdirect(f) && disk_size > want) {   /* shorter: reading reports where it ends */
        rc = eng_fail(ENG_EFORMAT, "%s: %lld bytes, but the IDX header (%lld x %zu-byte samples) needs %lld: "
                      "trailing garbage after the last sample", path, disk_size, out->count, out->item, want);
        goto fail;
    }
    out->gz_isize = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24;
    out->gz_tail = have_tail;
    out->disk_size = disk_size;
    out->f = f;
    return ENG_OK;
fail:
    gzclose(f);
    return rc;
}

static void idx_close(idx_file *x)
{
    if (x->f) gzclose(x->f);
    x->f = NULL;
}

/* Reads the next `rows` samples, converting each byte through lut (images into x) or
 * storing it as a class index (labels into y); in chunks, so no byte copy of the whole
 * file is ever held. */
static int idx_read_rows(idx_file *in, int rows, const float *lut, float *x, int32_t *y)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = prof_malloc(CHUNK);
    if (!buf) return eng_fail(ENG_ENOMEM, "%s: out of memory", in->path);
    size_t want = (size_t)rows * in->item, done = 0;
    int rc = ENG_OK;
    while (done < want) {
        size_t n = want - done < CHUNK ? want - done : CHUNK;
        long long got = read_full(in->f, in->path, in->hsize + (long long)done, buf, n);
        if (got < 0) { rc = ENG_EFORMAT; break; }
        if (x) for (long long i = 0; i < got; i++) x[done + (size_t)i] = lut[buf[i]];
        else for (long long i = 0; i < got; i++) y[done + (size_t)i] = buf[i];
        done += (size_t)got;
        if ((size_t)got < n) {
            rc = eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of %lld (%s %lld)", in->path,
                          in->hsize + (long long)done,
                          in->hsize + in->count * (long long)in->item,
                          in->labels ? "label" : "image", (long long)(done / in->item));
            break;
        }
    }
    prof_free(buf);
    return rc;
}

/* Before memory is allocated for rows samples: can the file hold them? A header is only
 * a claim; a 20-byte file saying 2^31 images must not make nnbench allocate for them.
 * gzip's deflate expands at most 1032-fold. */
static int idx_check_room(const idx_file *in, long long rows)
{
    if (!in->f) return ENG_OK;
    long long need = in->hsize + rows * (long long)in->item;
    if (gzdirect(in->f) && need > in->disk_size)
        return eng_fail(ENG_EFORMAT, "%s: truncated at byte %lld of %lld (%s %lld)", in->path, in->disk_size,
                        in->hsize + in->count * (long long)in->item, in->labels ? "label" : "image",
                        (in->disk_size - in->hsize) / (long long)in->item);
    if (!gzdirect(in->f) && need / 1032 > in->disk_size)
        return eng_fail(ENG_EFORMAT, "%s: the IDX header says %lld x %zu-byte samples, more than a %lld-byte gzip "
                        "file can hold: truncated or not an IDX file", in->path, in->count, in->item, in->disk_size);
    return ENG_OK;
}

/* After rows samples were read: a gzip file read to the end must end where its header
 * says: the IDX stream holds nothing more, and since zlib itself ignores bytes after the
 * gzip stream, its size field (the last 4 bytes, the uncompressed size mod 2^32) matches. */
static int idx_check_end(idx_file *in, long long rows)
{
    /* Plain files were checked at open. With a cap (data.n) the samples past it are never
     * read, and a file cut short after them is fine (docs/data.md): its last 4 bytes are
     * then deflate data, not a size, and say nothing. */
    if (!in->f || gzdirect(in->f) || rows < in->count) return ENG_OK;
    long long want = in->hsize + in->count * (long long)in->item;
    uint8_t extra;
    long long got = read_full(in->f, in->path, want, &extra, 1);
    if (got < 0) return ENG_EFORMAT;
    if (got > 0)
        return eng_fail(ENG_EFORMAT, "%s: trailing garbage after the last sample (byte %lld of the IDX stream; "
                        "the header says %lld x %zu-byte samples)", in->path, want, in->count, in->item);
    if (!in->gz_tail || in->gz_isize != (uint32_t)want)
        return eng_fail(ENG_EFORMAT, "%s: the gzip stream's size field says %u bytes, but the IDX header (%lld x "
                        "%zu-byte samples) needs %lld (mod 2^32): trailing garbage after the gzip stream, or "
                        "several gzip members (recompress it with gzip)", in->path, in->gz_isize, in->count,
                        in->item, want);
    return ENG_OK;
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

/* Opens images + labels of one part (train or test) and checks them against each other. */
static int open_pair(const char *img_path, const char *lab_path, idx_file *img, idx_file *lab)
{
    int rc = idx_open(img_path, 0, img);
    if (rc) return rc;
    rc = idx_open(lab_path, 1, lab);
    if (rc) { idx_close(img); return rc; }
    if (img->count != lab->count) {
        idx_close(img); idx_close(lab);
        return eng_fail(ENG_EFORMAT, "%s holds %lld images but %s holds %lld labels",
                        img_path, img->count, lab_path, lab->count);
    }
    return ENG_OK;
}

static int capped(long long count, int cap) { return cap > 0 && cap < count ? cap : (int)count; }

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
        struct stat st;
        if (stat(dc->path, &st) != 0)
            return eng_fail(ENG_EIO, "%s: cannot open: %s", dc->path, strerror(errno));
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
    int rc = open_pair(img, lab, &tr_i, &tr_l);
    if (rc) return rc;
    if (have_test) {
        rc = open_pair(timg, tlab, &te_i, &te_l);
        if (!rc && (te_i.item != tr_i.item || te_i.ndim != tr_i.ndim ||
                    memcmp(te_i.dims + 1, tr_i.dims + 1, sizeof(long long) * (size_t)(tr_i.ndim - 1)))) {
            rc = eng_fail(ENG_EFORMAT, "%s: test images are %lldx%lld but the training images "
                          "(%s) are %lldx%lld", timg, te_i.dims[te_i.ndim - 2],
                          te_i.dims[te_i.ndim - 1], img, tr_i.dims[tr_i.ndim - 2],
                          tr_i.dims[tr_i.ndim - 1]);
        }
    }
    /* Without a test set every sample is read: the split picks from all of them. */
    int n_tr = capped(tr_i.count, have_test ? dc->n : 0);
    int n_te = have_test ? capped(te_i.count, dc->n_test) : 0;
    if (!rc) rc = idx_check_room(&tr_i, n_tr);
    if (!rc) rc = idx_check_room(&tr_l, n_tr);
    if (!rc && have_test) rc = idx_check_room(&te_i, n_te);
    if (!rc && have_test) rc = idx_check_room(&te_l, n_te);
    if (!rc) {
        ds->classification = 1;
        ds->n_targets = 0;
        if (tr_i.ndim == 2) { ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = (int)tr_i.dims[1]; }
        else if (tr_i.ndim == 3) { ds->in_shape[0] = 1; ds->in_shape[1] = (int)tr_i.dims[1]; ds->in_shape[2] = (int)tr_i.dims[2]; }
        else { ds->in_shape[0] = (int)tr_i.dims[1]; ds->in_shape[1] = (int)tr_i.dims[2]; ds->in_shape[2] = (int)tr_i.dims[3]; }
        ds->in_size = tr_i.item;
        rc = eng_data_alloc(ds, n_tr, n_te);
    }
    /* scale (x/255) is applied here, byte by byte through the table, instead of in a
     * second pass over the floats. */
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = dc->normalize == ENG_NORM_SCALE ? (float)(v * (1.0 / 255.0)) : (float)v;
    if (!rc) rc = idx_read_rows(&tr_i, n_tr, lut, ds->x_train, NULL);
    if (!rc) rc = idx_read_rows(&tr_l, n_tr, NULL, NULL, ds->y_train);
    if (!rc && have_test) rc = idx_read_rows(&te_i, n_te, lut, ds->x_test, NULL);
    if (!rc && have_test) rc = idx_read_rows(&te_l, n_te, NULL, NULL, ds->y_test);
    if (!rc) rc = idx_check_end(&tr_i, n_tr);
    if (!rc) rc = idx_check_end(&tr_l, n_tr);
    if (!rc && have_test) rc = idx_check_end(&te_i, n_te);
    if (!rc && have_test) rc = idx_check_end(&te_l, n_te);
    if (!rc) {
        int maxlab = 0, at = -1, at_test = 0;
        for (int i = 0; i < n_tr; i++) if (ds->y_train[i] > maxlab || at < 0) { maxlab = ds->y_train[i]; at = i; }
        for (int i = 0; i < n_te; i++) if (ds->y_test[i] > maxlab) { maxlab = ds->y_test[i]; at = i; at_test = 1; }
        const idx_file *lf = at_test ? &te_l : &tr_l;
        snprintf(ds->label_max_at, sizeof ds->label_max_at, "%s: label %d (byte %lld)", lf->path, at + 1,
                 lf->hsize + at);
        ds->n_classes = maxlab + 1;
        const char *nm = contains_ci(dc->path, "fashion") ? "fashion-mnist"
                       : contains_ci(dc->path, "mnist") ? "mnist" : eng_data_basename(dc->path);
        snprintf(ds->name, sizeof ds->name, "%s", nm);
    }
    idx_close(&tr_i); idx_close(&tr_l); idx_close(&te_i); idx_close(&te_l);
    *split = !have_test;
    return rc;
}
