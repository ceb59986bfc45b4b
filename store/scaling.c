/* scaling.c — time and memory against a size: the runs of a comparison that differ in one
 * numeric key (data.seq_len) grouped into one series per variant, and the power law each
 * measure follows (least squares of log y on log x). `compare`, the workbench's Compare
 * screen, the reports, the attention bench and scripts/linformer_table.py read it. */
#include "internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const store_scale_def store_scale_defs[STORE_SCALE_N] = {
    { "step time", "step_s", "1 / samples/s, the time per sample (the step time at batch 1)", 0 },
    { "attention time", "attn_s", "self time per call of each attention scope, summed: one forward and one "
                                  "backward (a step at batch 1)", 0 },
    { "attention memory", "attn_bytes", "the attention scopes' memory column (scores, probabilities)", 1 },
    { "peak memory", "peak_bytes", "the engine's peak of live bytes", 1 },
};

int store_attention_scope(const char *name)
{
    static const char *const pre[] = { "attn_scores.", "attn_softmax.", "attn_wsum.", "linformer_proj.", "lsh_hash." };
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (!strncmp(name, pre[i], strlen(pre[i]))) return 1;
    return 0;
}

/* ---- the fit ------------------------------------------------------------------------ */

int store_fit_power(const double *x, const double *y, size_t n, store_fit *f)
{
    memset(f, 0, sizeof *f);
    f->exponent = f->coef = f->r2 = NAN;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0, xmin = INFINITY, xmax = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        /* log needs positive values: a zero time (not measured) or a negative one is left
         * out, never turned into -inf or NaN */
        if (!(isfinite(x[i]) && isfinite(y[i]) && x[i] > 0 && y[i] > 0)) { f->dropped++; continue; }
        double lx = log(x[i]), ly = log(y[i]);
        sx += lx; sy += ly; sxx += lx * lx; sxy += lx * ly; syy += ly * ly;
        if (x[i] < xmin) xmin = x[i];
        if (x[i] > xmax) xmax = x[i];
        f->used++;
    }
    if (f->used < 2 || !(xmax > xmin)) {
        snprintf(f->note, sizeof f->note, "not fitted: %zu point%s with positive values%s; a fit needs 2 sizes or more",
                 f->used, f->used == 1 ? "" : "s", f->used >= 2 ? ", all at one size" : "");
        return 0;
    }
    double m = (double)f->used, den = m * sxx - sx * sx;
    f->exponent = (m * sxy - sx * sy) / den;
    f->coef = exp((sy - f->exponent * sx) / m);
    double syy_c = syy - sy * sy / m, sxy_c = sxy - sx * sy / m, sxx_c = sxx - sx * sx / m;
    f->r2 = syy_c > 1e-300 ? (sxy_c * sxy_c) / (sxx_c * syy_c) : 1.0;
    if (f->dropped)
        snprintf(f->note, sizeof f->note, "%zu point%s left out (zero, negative or unknown)", f->dropped,
                 f->dropped == 1 ? "" : "s");
    return 1;
}

const char *store_fit_text(const store_fit *f, char *b, size_t cap)
{
    if (isfinite(f->exponent)) snprintf(b, cap, "%.2f", f->exponent);
    else snprintf(b, cap, "-");
    return b;
}

/* ---- the view ----------------------------------------------------------------------- */

void store_scaling_free(store_scaling *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_series; i++) {
        store_scale_series *sr = &s->series[i];
        free(sr->x);
        free(sr->run);
        for (int m = 0; m < STORE_SCALE_N; m++) free(sr->y[m]);
    }
    free(s->series);
    free(s->xs);
    free(s);
}

/* The series a run belongs to: its variant without a trailing size ("full-n256",
 * "lsh_1024" -> "full", "lsh"); a variant without one is a series of its own, a run
 * without a variant is named by its experiment. */
static void series_label(const store_run *r, char *b, size_t cap)
{
    const char *v = r->variant[0] ? r->variant : r->name;
    size_t len = strlen(v), e = len;
    while (e > 0 && isdigit((unsigned char)v[e - 1])) e--;
    if (e < len && e > 0 && (v[e - 1] == 'n' || v[e - 1] == 'N')) e--;
    if (e < len && e > 1 && (v[e - 1] == '-' || v[e - 1] == '_')) len = e - 1;
    char head[sizeof r->variant > sizeof r->name ? sizeof r->variant : sizeof r->name];
    snprintf(head, sizeof head, "%.*s", (int)len, v);
    prof_text_fit(b, cap, head, (size_t)-1, 0);   /* made visible, cut between characters */
}

/* The measures of run i of c: NAN where the run does not say. */
static void run_measures(const store_compare *c, size_t i, double y[STORE_SCALE_N])
{
    const store_run *r = &c->runs[i];
    y[STORE_SCALE_STEP] = isfinite(r->samples_per_s) && r->samples_per_s > 0 ? 1.0 / r->samples_per_s : NAN;
    y[STORE_SCALE_PEAK] = r->peak_bytes > 0 ? (double)r->peak_bytes : NAN;
    double ns = 0, bytes = 0;
    int any = 0;
    for (size_t k = 0; k < c->n_ops[i]; k++) {
        const store_op_row *o = &c->ops[i][k];
        if (!store_attention_scope(o->name)) continue;
        any = 1;
        /* per call: the evaluation's forward passes (no backward) must not count as steps */
        if (o->calls) ns += (double)o->self_ns / (double)o->calls;
        bytes += (double)o->self_mem;
    }
    y[STORE_SCALE_ATTN] = any ? 1e-9 * ns : NAN;
    y[STORE_SCALE_ATTN_MEM] = any ? bytes : NAN;
}

static int add_x(store_scaling *s, double x)
{
    size_t j = 0;
    while (j < s->n_xs && s->xs[j] < x) j++;
    if (j < s->n_xs && s->xs[j] == x) return 0;
    double *nx = realloc(s->xs, (s->n_xs + 1) * sizeof *nx);
    if (!nx) return -1;
    s->xs = nx;
    memmove(s->xs + j + 1, s->xs + j, (s->n_xs - j) * sizeof *nx);
    s->xs[j] = x;
    s->n_xs++;
    return 0;
}

/* Puts run i at x into series sr, in x order; a second run at the same x replaces the
 * earlier one (the comparison's later run: a rerun). */
static int series_put(store_scale_series *sr, double x, long long run, const double y[STORE_SCALE_N], size_t *replaced)
{
    size_t j = 0;
    while (j < sr->n && sr->x[j] < x) j++;
    if (j < sr->n && sr->x[j] == x) {
        (*replaced)++;
    } else {
        double *nx = realloc(sr->x, (sr->n + 1) * sizeof *nx);
        if (nx) sr->x = nx;
        long long *nr = nx ? realloc(sr->run, (sr->n + 1) * sizeof *nr) : NULL;
        if (nr) sr->run = nr;
        if (!nx || !nr) return -1;
        for (int m = 0; m < STORE_SCALE_N; m++) {
            double *ny = realloc(sr->y[m], (sr->n + 1) * sizeof *ny);
            if (!ny) return -1;
            sr->y[m] = ny;
            memmove(ny + j + 1, ny + j, (sr->n - j) * sizeof *ny);
        }
        memmove(sr->x + j + 1, sr->x + j, (sr->n - j) * sizeof *sr->x);
        memmove(sr->run + j + 1, sr->run + j, (sr->n - j) * sizeof *sr->run);
        sr->n++;
    }
    sr->x[j] = x;
    sr->run[j] = run;
    for (int m = 0; m < STORE_SCALE_N; m++) sr->y[m][j] = y[m];
    return 0;
}

static store_scale_series *series_of(store_scaling *s, const char *label)
{
    for (size_t k = 0; k < s->n_series; k++)
        if (!strcmp(s->series[k].label, label)) return &s->series[k];
    store_scale_series *ns = realloc(s->series, (s->n_series + 1) * sizeof *ns);
    if (!ns) return NULL;
    s->series = ns;
    store_scale_series *sr = &s->series[s->n_series++];
    memset(sr, 0, sizeof *sr);
    snprintf(sr->label, sizeof sr->label, "%s", label);
    return sr;
}

int store_scaling_build(const store_compare *c, store_scaling **out)
{
    *out = NULL;
    store_scaling *s = calloc(1, sizeof *s);
    if (!s) return store_fail(STORE_ENOMEM, "out of memory building the scaling view");
    snprintf(s->x_key, sizeof s->x_key, "%s", STORE_SCALING_X_KEY);
    size_t replaced = 0;
    for (size_t i = 0; i < c->n; i++) {
        const char *v = store_kv_find(c->params[i], c->n_params[i], s->x_key);
        char *end = NULL;
        double x = v ? strtod(v, &end) : NAN;
        if (!v || end == v || *end || !isfinite(x) || x <= 0) { s->skipped++; continue; }
        char label[64];
        series_label(&c->runs[i], label, sizeof label);
        double y[STORE_SCALE_N];
        run_measures(c, i, y);
        store_scale_series *sr = series_of(s, label);
        if (!sr || series_put(sr, x, c->runs[i].id, y, &replaced) || add_x(s, x)) {
            store_scaling_free(s);
            return store_fail(STORE_ENOMEM, "out of memory building the scaling view");
        }
    }
    for (size_t k = 0; k < s->n_series; k++)
        for (int m = 0; m < STORE_SCALE_N; m++)
            store_fit_power(s->series[k].x, s->series[k].y[m], s->series[k].n, &s->series[k].fit[m]);
    if (s->n_xs < 2)
        snprintf(s->note, sizeof s->note, "no scaling view: the runs do not differ in %s (%zu value%s)", s->x_key,
                 s->n_xs, s->n_xs == 1 ? "" : "s");
    else if (replaced || s->skipped)
        snprintf(s->note, sizeof s->note, "%zu run%s without %s left out; %zu rerun%s at the same size: the later one is shown",
                 s->skipped, s->skipped == 1 ? "" : "s", s->x_key, replaced, replaced == 1 ? "" : "s");
    *out = s;
    return STORE_OK;
}

double store_scale_value(const store_scale_series *sr, double x, store_scale_measure m)
{
    for (size_t j = 0; j < sr->n; j++)
        if (sr->x[j] == x) return sr->y[m][j];
    return NAN;
}

const char *store_scale_cell(const store_scale_series *sr, double x, store_scale_measure m, char *b, size_t cap)
{
    double v = store_scale_value(sr, x, m);
    if (!isfinite(v)) snprintf(b, cap, "-");
    else if (store_scale_defs[m].bytes) prof_fmt_bytes(b, cap, v);
    else prof_fmt_duration(b, cap, v);
    return b;
}

void store_scaling_json(prof_json *j, const store_scaling *s)
{
    prof_json_key(j, "scaling");
    prof_json_object(j);
    prof_json_kstr(j, "x_key", s->x_key);
    prof_json_kstr(j, "note", s->note);
    prof_json_key(j, "series");
    prof_json_array(j);
    for (size_t k = 0; k < s->n_series; k++) {
        const store_scale_series *sr = &s->series[k];
        prof_json_object(j);
        prof_json_kstr(j, "label", sr->label);
        prof_json_key(j, "points");
        prof_json_array(j);
        for (size_t p = 0; p < sr->n; p++) {
            prof_json_object(j);
            prof_json_knum(j, "x", sr->x[p]);
            prof_json_kint(j, "run", sr->run[p]);
            for (int m = 0; m < STORE_SCALE_N; m++) prof_json_knum(j, store_scale_defs[m].key, sr->y[m][p]);
            prof_json_close(j);
        }
        prof_json_close(j);
        prof_json_key(j, "exponents");
        prof_json_object(j);
        for (int m = 0; m < STORE_SCALE_N; m++) prof_json_knum(j, store_scale_defs[m].key, sr->fit[m].exponent);
        prof_json_close(j);
        prof_json_key(j, "fit_notes");
        prof_json_object(j);
        for (int m = 0; m < STORE_SCALE_N; m++) prof_json_kstr(j, store_scale_defs[m].key, sr->fit[m].note);
        prof_json_close(j);
        prof_json_close(j);
    }
    prof_json_close(j);
    prof_json_close(j);
}
