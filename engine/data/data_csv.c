/* data_csv.c — numeric CSV files, plain or gzipped: comma-separated, optional leading lines
 * to skip, optional header, one label/target column; every malformed row is reported as
 * FILE:LINE: column C: ... */
#include "data_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Labels that are non-negative integers below this are used as class indices directly;
 * anything else is remapped (see remap_labels). */
#define CSV_MAX_DIRECT_CLASS 65536

typedef struct {
    const char *path;
    int cols;             /* columns of every row */
    int cols_line;        /* the line that fixed cols (for the ragged-row message) */
    long rows;
    long cap;             /* allocated rows */
    double *v;            /* rows * cols, as parsed */
} csv_table;

/* The whole file as text; zlib's gzread inflates a gzip file (.csv.gz) and passes any
 * other file through as it is. */
static int slurp(const char *path, char **text, size_t *len)
{
    long long size;
    int fd = eng_open_input(path, ENG_MAX_CSV_BYTES, "CSV file", &size);
    if (fd < 0) return ENG_EIO;
    gzFile f = gzdopen(fd, "rb");
    if (!f) { close(fd); return eng_fail(ENG_ENOMEM, "%s: out of memory", path); }
    gzbuffer(f, 1u << 17);
    size_t cap = 1 << 16, n = 0;
    char *buf = prof_malloc(cap + 1);
    int bad = 0;
    while (buf) {
        unsigned want = (unsigned)(cap - n > (1u << 30) ? (1u << 30) : cap - n);
        int r = gzread(f, buf + n, want);
        if (r < 0) { bad = 1; break; }
        n += (size_t)r;
        if ((unsigned)r < want) break;
        if (n < cap) continue;
        if (n > (size_t)ENG_MAX_CSV_BYTES) { /* a gzip bomb, or a file that grew after the fstat */
            int plain = gzdirect(f);
            prof_free(buf);
            gzclose(f);
            return eng_fail(ENG_EINVAL, "%s: more than the %lld MiB cap for CSV files%s", path,
                            ENG_MAX_CSV_BYTES >> 20, plain ? " (it grew while being read)" : " once gunzipped");
        }
        char *nb = prof_malloc(2 * cap + 1);
        if (nb) memcpy(nb, buf, n);
        prof_free(buf);
        buf = nb;
        cap *= 2;
    }
    if (bad) {
        int zerr;
        char msg[160];
        const char *m = gzerror(f, &zerr), *sep = m[0] == '<' ? strstr(m, ">: ") : NULL;
        snprintf(msg, sizeof msg, "%s", sep ? sep + 3 : m);   /* without zlib's "<fd:N>: " */
        gzclose(f);
        prof_free(buf);
        return eng_fail(ENG_EFORMAT, "%s: corrupt gzip data after %zu good bytes: %s", path, n, msg);
    }
    gzclose(f);
    if (!buf) return eng_fail(ENG_ENOMEM, "%s: out of memory reading the file", path);
    buf[n] = 0;
    *text = buf; *len = n;
    return ENG_OK;
}

/* Splits a line (no newline, NUL-terminated, modified in place) at commas; trims blanks.
 * Returns the field count; fields[] gets at most max of them. */
static int split_fields(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *end = strchr(p, ',');
        if (end) *end = 0;
        while (*p == ' ' || *p == '\t') p++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
        if (n < max) fields[n] = p;
        n++;
        if (!end) break;
        p = end + 1;
    }
    return n;
}

int eng_parse_number(const char *s, double *out)
{
    if (!*s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

/* skip: lines skipped first (counted in line numbers). header: 1 skip the first row, 0 it
 * is data, -1 it is a header when any field of it is not a number. ref_cols: columns a
 * test file must have (0 = any). */
static int csv_parse(const char *path, int skip, int header, int ref_cols, const char *ref_path,
                     csv_table *t)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    char *text = NULL;
    size_t len = 0;
    int rc = slurp(path, &text, &len);
    if (rc) return rc;
    int maxf = 4096;
    char **fields = prof_malloc((size_t)maxf * sizeof(char *));
    char *line = prof_malloc(len + 1);
    if (!fields || !line) { rc = eng_fail(ENG_ENOMEM, "%s: out of memory", path); goto done; }
    size_t pos = 0;
    int lineno = 0, first = 1;
    while (pos < len) {
        size_t e = pos;
        while (e < len && text[e] != '\n') e++;
        size_t ll = e - pos;
        memcpy(line, text + pos, ll);
        line[ll] = 0;
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        pos = e + 1;
        lineno++;
        if (lineno <= skip) continue;
        const char *q = line;
        while (*q == ' ' || *q == '\t') q++;
        if (!*q || *q == '#') continue;                   /* blank lines and comments */
        int nf = split_fields(line, fields, maxf);
        if (nf > maxf) {
            rc = eng_fail(ENG_EFORMAT, "%s:%d: %d columns; at most %d are supported", path,
                          lineno, nf, maxf);
            goto done;
        }
        int is_header = 0;
        if (first) {
            first = 0;
            if (nf < 2) {
                rc = eng_fail(ENG_EFORMAT, "%s:%d: %d column; a CSV dataset needs at least 2 "
                              "(features and a label)", path, lineno, nf);
                goto done;
            }
            if (ref_cols && nf != ref_cols) {
                rc = eng_fail(ENG_EFORMAT, "%s:%d: expected %d columns as in %s, got %d", path,
                              lineno, ref_cols, ref_path, nf);
                goto done;
            }
            t->cols = nf; t->cols_line = lineno;
            if (header == 1) is_header = 1;
            else if (header == -1) {
                double dummy;
                for (int i = 0; i < nf && !is_header; i++)
                    if (!eng_parse_number(fields[i], &dummy)) is_header = 1;
            }
            if (is_header) continue;
        }
        if (nf != t->cols) {
            rc = eng_fail(ENG_EFORMAT, "%s:%d: expected %d columns as on line %d, got %d", path,
                          lineno, t->cols, t->cols_line, nf);
            goto done;
        }
        if (t->rows == t->cap) {
            long nc = t->cap ? 2 * t->cap : 1024;
            double *nv = prof_malloc((size_t)nc * (size_t)t->cols * sizeof(double));
            if (!nv) { rc = eng_fail(ENG_ENOMEM, "%s:%d: out of memory", path, lineno); goto done; }
            if (t->v) memcpy(nv, t->v, (size_t)t->rows * (size_t)t->cols * sizeof(double));
            prof_free(t->v);
            t->v = nv; t->cap = nc;
        }
        double *row = t->v + (size_t)t->rows * (size_t)t->cols;
        for (int i = 0; i < nf; i++)
            if (!eng_parse_number(fields[i], &row[i])) {
                rc = eng_fail(ENG_EFORMAT, "%s:%d: column %d: expected a number, got '%.40s'",
                              path, lineno, i + 1, fields[i]);
                goto done;
            }
        t->rows++;
        if (t->rows > 0x7ffffffe) {
            rc = eng_fail(ENG_EFORMAT, "%s:%d: too many rows", path, lineno);
            goto done;
        }
    }
    if (t->rows == 0)
        rc = eng_fail(ENG_EFORMAT, "%s: no data rows (%d lines read%s)", path, lineno,
                      skip ? ", data.skip_rows skipped some" : "");
done:
    prof_free(text); prof_free(fields); prof_free(line);
    if (rc) { prof_free(t->v); t->v = NULL; }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Class of every label value. Non-negative integers (below CSV_MAX_DIRECT_CLASS, over both
 * files) are used as they are, so n_classes = max + 1; otherwise the distinct values,
 * sorted ascending, become classes 0..K-1 (e.g. -1/1 -> 0/1, 2.5/7 -> 0/1). */
static int remap_labels(const csv_table *tr, const csv_table *te, int lc, eng_dataset *ds,
                        double **distinct, int *n_distinct)
{
    int direct = 1;
    double maxv = 0;
    long total = tr->rows + (te ? te->rows : 0);
    for (int part = 0; part < 2; part++) {
        const csv_table *t = part ? te : tr;
        if (!t) continue;
        for (long i = 0; i < t->rows; i++) {
            double v = t->v[(size_t)i * t->cols + lc];
            if (v < 0 || v >= CSV_MAX_DIRECT_CLASS || v != floor(v)) direct = 0;
            if (v > maxv) maxv = v;
        }
    }
    *distinct = NULL; *n_distinct = 0;
    if (direct) {
        ds->n_classes = (int)maxv + 1;
        for (int part = 0; part < 2 && !ds->label_max_at[0]; part++) {
            const csv_table *t = part ? te : tr;
            for (long i = 0; t && i < t->rows; i++)
                if (t->v[(size_t)i * t->cols + lc] == maxv) {
                    snprintf(ds->label_max_at, sizeof ds->label_max_at, "%s: data row %ld", t->path, i + 1);
                    break;
                }
        }
        return ENG_OK;
    }
    double *d = prof_malloc((size_t)total * sizeof(double));
    if (!d) return eng_fail(ENG_ENOMEM, "%s: out of memory for labels", tr->path);
    long k = 0;
    for (int part = 0; part < 2; part++) {
        const csv_table *t = part ? te : tr;
        if (!t) continue;
        for (long i = 0; i < t->rows; i++) d[k++] = t->v[(size_t)i * t->cols + lc];
    }
    qsort(d, (size_t)total, sizeof(double), cmp_double);
    long u = 0;
    for (long i = 0; i < total; i++)
        if (!u || d[i] != d[u - 1]) d[u++] = d[i];
    if (u > CSV_MAX_DIRECT_CLASS) {
        prof_free(d);
        return eng_fail(ENG_EFORMAT, "%s: label column %d has %ld distinct values; is this a "
                        "regression target (data.regression = true)?", tr->path, lc + 1, u);
    }
    ds->n_classes = (int)u;
    *distinct = d; *n_distinct = (int)u;
    return ENG_OK;
}

static int32_t class_of(double v, const double *distinct, int n)
{
    if (!distinct) return (int32_t)v;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (distinct[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static void fill(const csv_table *t, long rows, int lc, const double *distinct, int nd,
                 eng_dataset *ds, float *x, int32_t *y, float *tg)
{
    for (long i = 0; i < rows; i++) {
        const double *row = t->v + (size_t)i * t->cols;
        size_t f = 0;
        for (int c = 0; c < t->cols; c++) {
            if (c == lc) continue;
            x[(size_t)i * ds->in_size + f++] = (float)row[c];
        }
        if (y) y[i] = class_of(row[lc], distinct, nd);
        else tg[i] = (float)row[lc];
    }
}

int eng_data_load_csv(const eng_data_config *dc, eng_dataset *ds, int *split)
{
    if (!dc->path[0]) return eng_fail(ENG_EINVAL, "data.path: required for source = csv");
    if (dc->header < -1 || dc->header > 1)
        return eng_fail(ENG_EINVAL, "data.header: expected -1 (detect), 0 or 1, got %d", dc->header);
    csv_table tr, te = {0};
    int have_test = dc->test_path[0] != 0;
    int rc = csv_parse(dc->path, dc->skip_rows, dc->header, 0, NULL, &tr);
    if (rc) return rc;
    if (have_test && (rc = csv_parse(dc->test_path, dc->skip_rows, dc->header, tr.cols, dc->path, &te))) {
        prof_free(tr.v);
        return rc;
    }
    int lc = dc->label_column < 0 ? tr.cols + dc->label_column : dc->label_column;
    double *distinct = NULL;
    int nd = 0;
    if (lc < 0 || lc >= tr.cols) {
        rc = eng_fail(ENG_EINVAL, "data.label_column = %d, but %s has %d columns (0 to %d, or "
                      "-1 for the last)", dc->label_column, dc->path, tr.cols, tr.cols - 1);
        goto done;
    }
    ds->classification = !dc->regression;
    ds->n_targets = dc->regression ? 1 : 0;
    ds->in_shape[0] = 1; ds->in_shape[1] = 1; ds->in_shape[2] = tr.cols - 1;
    ds->in_size = (size_t)(tr.cols - 1);
    if (ds->classification && (rc = remap_labels(&tr, have_test ? &te : NULL, lc, ds, &distinct, &nd)))
        goto done;
    long ntr = tr.rows, nte = have_test ? te.rows : 0;
    /* With a test file the caps apply here; without one, after data.c's split. */
    if (have_test && dc->n > 0 && ntr > dc->n) ntr = dc->n;
    if (have_test && dc->n_test > 0 && nte > dc->n_test) nte = dc->n_test;
    if ((rc = eng_data_alloc(ds, (int)ntr, (int)nte))) goto done;
    fill(&tr, ntr, lc, distinct, nd, ds, ds->x_train, ds->y_train, ds->t_train);
    if (have_test) fill(&te, nte, lc, distinct, nd, ds, ds->x_test, ds->y_test, ds->t_test);
    {
        const char *base = eng_data_basename(dc->path);
        size_t blen = strlen(base);
        if (blen > 3 && !strcmp(base + blen - 3, ".gz")) blen -= 3;   /* "wine.csv.gz" -> "wine" */
        const char *dot = memrchr(base, '.', blen);
        int bl = dot && dot != base ? (int)(dot - base) : (int)blen;
        snprintf(ds->name, sizeof ds->name, "%.*s", bl > 63 ? 63 : bl, base);
    }
    *split = !have_test;
done:
    prof_free(distinct);
    prof_free(tr.v);
    if (have_test) prof_free(te.v);
    return rc;
}
