/* model.c — this machine's Cholesky cost model t(n) = a n^3 + b n^2 + c, fitted by least
 * squares to measured dpotrf+dpotrs timings, calibrated once and kept in a cache file. */
#include "internal.h"

#include <cblas.h>
#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../profiler/profiler.h"

int qm_chol_model_fit(const int *n, const double *ns, int m, qm_chol_model *out)
{
    if (m < 3) return qm_fail(QM_EINVAL, "Cholesky cost model: %d timings, need at least 3", m);
    /* Relative least squares: divide each row by its time, so the small sizes (where the
     * scheduler decides most often) are fitted as well as the large ones. */
    double *a = prof_malloc((size_t)m * 3 * sizeof *a), *b = prof_malloc((size_t)m * sizeof *b);
    if (!a || !b) { prof_free(a); prof_free(b); return qm_fail(QM_ENOMEM, "Cholesky cost model: out of memory"); }
    for (int i = 0; i < m; i++) {
        if (!(ns[i] > 0) || n[i] <= 0) {
            prof_free(a); prof_free(b);
            return qm_fail(QM_EINVAL, "Cholesky cost model: timing %d (n = %d, %g ns) is not positive", i, n[i], ns[i]);
        }
        double x = n[i];
        a[i * 3 + 0] = x * x * x / ns[i];
        a[i * 3 + 1] = x * x / ns[i];
        a[i * 3 + 2] = 1 / ns[i];
        b[i] = 1;
    }
    /* Columns differ by orders of magnitude: scale them before dgels. */
    double sc[3] = { 0, 0, 0 };
    for (int j = 0; j < 3; j++) {
        for (int i = 0; i < m; i++) sc[j] = fmax(sc[j], fabs(a[i * 3 + j]));
        for (int i = 0; i < m; i++) a[i * 3 + j] /= sc[j];
    }
    lapack_int info = LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', m, 3, 1, a, 3, b, 1);
    if (info != 0) { prof_free(a); prof_free(b); return qm_fail(QM_EINVAL, "Cholesky cost model: least squares failed (info %d)", (int)info); }
    out->a = b[0] / sc[0];
    out->b = b[1] / sc[1];
    out->c = b[2] / sc[2];
    out->valid = 1;
    prof_free(a);
    prof_free(b);
    return QM_OK;
}

double qm_chol_model_predict(const qm_chol_model *m, int n)
{
    double x = n;
    double t = m->a * x * x * x + m->b * x * x + m->c;
    /* A fitted polynomial can dip below zero at sizes it was not fitted on. */
    return t > 1 ? t : 1;
}

static const int cal_n[] = { 16, 32, 64, 96, 128, 192, 256, 384, 512, 768 };
#define CAL_M ((int)(sizeof cal_n / sizeof cal_n[0]))

int qm_chol_model_calibrate(qm_chol_model *out)
{
    int nmax = cal_n[CAL_M - 1];
    size_t nn = (size_t)nmax * nmax;
    double *A = prof_malloc(nn * sizeof *A), *L = prof_malloc(nn * sizeof *L), *x = prof_malloc((size_t)nmax * sizeof *x);
    if (!A || !L || !x) { prof_free(A); prof_free(L); prof_free(x); return qm_fail(QM_ENOMEM, "Cholesky calibration: out of memory"); }
    double ts[CAL_M];
    uint64_t rng = 12345;
    int rc = QM_OK;
    for (int s = 0; s < CAL_M && rc == QM_OK; s++) {
        int n = cal_n[s];
        /* Symmetric, strictly diagonally dominant: positive definite; the time of
         * Cholesky does not depend on the values. */
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++) {
                double v = i == j ? n + 1.0 : 2 * qm_rng_uniform(&rng) - 1;
                A[(size_t)i * n + j] = A[(size_t)j * n + i] = v;
            }
        double t[5];
        int reps = n <= 256 ? 5 : 3;
        for (int r = 0; r < reps && rc == QM_OK; r++) {
            for (int i = 0; i < n; i++) x[i] = 1;
            uint64_t t0 = prof_now_ns();
            rc = qm_cholesky(n, A, L, NULL);
            if (rc == QM_OK) qm_cholesky_solve(n, L, x, x, NULL);
            t[r] = (double)(prof_now_ns() - t0);
        }
        if (rc != QM_OK) break;
        /* The median: one preemption on a shared VM should not bend the fit. */
        for (int i = 1; i < reps; i++)
            for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double tmp = t[j]; t[j] = t[j - 1]; t[j - 1] = tmp; }
        ts[s] = t[reps / 2];
    }
    prof_free(A);
    prof_free(L);
    prof_free(x);
    if (rc) return rc;
    return qm_chol_model_fit(cal_n, ts, CAL_M, out);
}

int qm_chol_model_path(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && *xdg) w = snprintf(buf, len, "%s/nnbench/cholesky-model", xdg);
    else if (home && *home) w = snprintf(buf, len, "%s/.cache/nnbench/cholesky-model", home);
    else return qm_fail(QM_EIO, "Cholesky cost model: neither XDG_CACHE_HOME nor HOME is set");
    if (w < 0 || (size_t)w >= len) return qm_fail(QM_EINVAL, "Cholesky cost model: path too long");
    return QM_OK;
}

static void blas_tag(char *buf, size_t len)
{
    const char *core = openblas_get_corename();
    snprintf(buf, len, "core=%s threads=%d", core ? core : "unknown", openblas_get_num_threads());
}

/* mkdir -p of the directory part of path. */
static int mkdirs_for(const char *path)
{
    char d[1024];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash) return 0;
    *slash = 0;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(d, 0755) && errno != EEXIST) return -1;
    return 0;
}

int qm_chol_model_load(const char *path, qm_chol_model *out, int *calibrated)
{
    char pbuf[1024];
    if (!path) {
        int rc = qm_chol_model_path(pbuf, sizeof pbuf);
        if (rc) return rc;
        path = pbuf;
    }
    if (calibrated) *calibrated = 0;
    char tag[128], line[256], ftag[256] = "";
    blas_tag(tag, sizeof tag);
    FILE *f = fopen(path, "r");
    if (f) {
        qm_chol_model m = { 0 };
        int have = 0;
        while (fgets(line, sizeof line, f)) {
            if (line[0] == '#') continue;
            if (!strncmp(line, "core=", 5)) { line[strcspn(line, "\n")] = 0; snprintf(ftag, sizeof ftag, "%s", line); }
            else if (sscanf(line, "a=%lg b=%lg c=%lg", &m.a, &m.b, &m.c) == 3) have = 1;
        }
        fclose(f);
        if (have && !strcmp(ftag, tag) && isfinite(m.a) && isfinite(m.b) && isfinite(m.c)) {
            m.valid = 1;
            *out = m;
            return QM_OK;
        }
    }
    int rc = qm_chol_model_calibrate(out);
    if (rc) return rc;
    if (calibrated) *calibrated = 1;
    if (mkdirs_for(path) == 0 && (f = fopen(path, "w"))) {
        fprintf(f, "# nnbench Cholesky cost model: t_ns = a*n^3 + b*n^2 + c (dpotrf+dpotrs, float64).\n"
                   "# Delete this file to recalibrate.\n%s\na=%.17g b=%.17g c=%.17g\n",
                tag, out->a, out->b, out->c);
        if (fclose(f) == 0) return QM_OK;
    }
    qm_fail(QM_EIO, "Cholesky cost model: could not write %s (%s); calibrated for this run only",
            path, strerror(errno));
    return QM_OK;
}
