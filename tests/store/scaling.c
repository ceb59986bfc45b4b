/* scaling.c — the power-law fit (store_fit_power) on synthetic data with known exponents,
 * too few points and non-positive values (a note, no NaN printed), and the scaling view
 * (store_scaling_build) of a comparison made by hand: series per variant, sizes in order,
 * measures from the run rows and the attention op rows, reruns and runs without a size. */
#include "util.h"

#include <math.h>

#include "../../store/store.h"

static void test_fit_known_exponents(void **st)
{
    (void)st;
    double x[6], y2[6], y1[6], ynlogn[6];
    for (int i = 0; i < 6; i++) {
        x[i] = 256.0 * pow(2, i);
        y2[i] = 3e-9 * x[i] * x[i];
        y1[i] = 0.5 * x[i];
        ynlogn[i] = x[i] * log(x[i]);
    }
    store_fit f;
    assert_int_equal(store_fit_power(x, y2, 6, &f), 1);
    assert_true(fabs(f.exponent - 2.0) < 1e-9);
    assert_true(fabs(f.coef - 3e-9) < 1e-15);
    assert_true(fabs(f.r2 - 1.0) < 1e-9);
    assert_int_equal(f.used, 6);
    assert_string_equal(f.note, "");
    assert_int_equal(store_fit_power(x, y1, 6, &f), 1);
    assert_true(fabs(f.exponent - 1.0) < 1e-9);
    /* n log n over 256..8192: between 1 and 2, a little above 1 (1 + 1/ln n on average) */
    assert_int_equal(store_fit_power(x, ynlogn, 6, &f), 1);
    assert_true(f.exponent > 1.1 && f.exponent < 1.2);
    char b[32];
    assert_string_equal(store_fit_text(&f, b, sizeof b), "1.14");   /* about 1 + ln(ln 8192 / ln 256) / ln 32 */
    /* noise: a slope still near its truth, r2 below 1 */
    double yn[6] = { 1.1, 3.8, 17.0, 63.0, 260.0, 1010.0 };
    assert_int_equal(store_fit_power(x, yn, 6, &f), 1);
    assert_true(fabs(f.exponent - 2.0) < 0.05);
    assert_true(f.r2 < 1.0 && f.r2 > 0.99);
}

static void test_fit_too_few_and_non_positive(void **st)
{
    (void)st;
    store_fit f;
    char b[32];
    double x[4] = { 256, 512, 1024, 2048 }, y[4] = { 1, 4, 16, 64 };
    assert_int_equal(store_fit_power(x, y, 0, &f), 0);
    assert_true(isnan(f.exponent));
    assert_string_equal(store_fit_text(&f, b, sizeof b), "-");
    assert_non_null(strstr(f.note, "not fitted: 0 points"));
    assert_int_equal(store_fit_power(x, y, 1, &f), 0);
    assert_non_null(strstr(f.note, "1 point with positive values"));
    assert_string_equal(store_fit_text(&f, b, sizeof b), "-");
    /* two points at one size: no slope */
    double xs[2] = { 512, 512 }, ys[2] = { 1, 2 };
    assert_int_equal(store_fit_power(xs, ys, 2, &f), 0);
    assert_non_null(strstr(f.note, "all at one size"));
    /* zero, negative and NaN values are left out and named; the rest still fit */
    double yz[4] = { 0, 4, 16, 64 }, yneg[4] = { 1, -4, NAN, 64 };
    assert_int_equal(store_fit_power(x, yz, 4, &f), 1);
    assert_true(fabs(f.exponent - 2.0) < 1e-9);
    assert_int_equal(f.dropped, 1);
    assert_string_equal(f.note, "1 point left out (zero, negative or unknown)");
    assert_int_equal(store_fit_power(x, yneg, 4, &f), 1);
    assert_true(fabs(f.exponent - 2.0) < 1e-9);
    assert_int_equal(f.dropped, 2);
    double yall[4] = { 0, -1, 0, NAN };
    assert_int_equal(store_fit_power(x, yall, 4, &f), 0);
    assert_true(isnan(f.exponent) && isnan(f.coef) && isnan(f.r2));
    assert_string_equal(store_fit_text(&f, b, sizeof b), "-");
    assert_non_null(strstr(f.note, "0 points with positive values"));
    /* a non-positive size is left out as well (log of it is not a number) */
    double xneg[3] = { -1, 256, 1024 }, y3[3] = { 5, 1, 4 };
    assert_int_equal(store_fit_power(xneg, y3, 3, &f), 1);
    assert_true(fabs(f.exponent - 1.0) < 1e-9);
}

/* A comparison made by hand: runs with a variant, a seq_len, samples/s, peak memory and
 * attention op rows; what store_scaling_build reads of it. */
#define NR 7
typedef struct {
    store_compare c;
    store_run runs[NR];
    store_kv kv[NR][2];
    size_t n_kv[NR];
    store_kv *params[NR];
    store_op_row ops[NR][3];
    store_op_row *opp[NR];
    size_t n_ops[NR];
} fake_cmp;

static void add_run(fake_cmp *f, const char *variant, const char *seq_len, double n, double attn_exp, int profiled)
{
    size_t i = f->c.n++;
    store_run *r = &f->runs[i];
    store_run_init(r);
    r->id = 10 + (long long)i;
    snprintf(r->name, sizeof r->name, "attention-scaling");
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    r->steps = 4;
    r->samples_per_s = 1.0 / (1e-6 * n);           /* step time exactly linear in n */
    r->peak_bytes = (long long)(100.0 * n);
    f->n_kv[i] = 0;
    if (seq_len) {
        snprintf(f->kv[i][0].key, sizeof f->kv[i][0].key, "data.seq_len");
        snprintf(f->kv[i][0].value, sizeof f->kv[i][0].value, "%s", seq_len);
        f->n_kv[i] = 1;
    }
    f->params[i] = f->kv[i];
    memset(f->ops[i], 0, sizeof f->ops[i]);
    f->n_ops[i] = 0;
    if (profiled) {
        /* attention: scores + softmax grow as n^attn_exp, the forward called 3 times per
         * step (4 steps and 8 evaluation passes), the backward once; a dense op that must
         * not count */
        snprintf(f->ops[i][0].name, sizeof f->ops[i][0].name, "attn_scores.fwd");
        f->ops[i][0].calls = 12;
        f->ops[i][0].self_ns = (uint64_t)(12 * 3.0 * pow(n, attn_exp));
        f->ops[i][0].self_mem = (int64_t)(8.0 * pow(n, attn_exp));
        snprintf(f->ops[i][1].name, sizeof f->ops[i][1].name, "attn_softmax.bwd");
        f->ops[i][1].calls = 4;
        f->ops[i][1].self_ns = (uint64_t)(4 * 1.0 * pow(n, attn_exp));
        snprintf(f->ops[i][2].name, sizeof f->ops[i][2].name, "dense.fwd");
        f->ops[i][2].self_ns = 123456789;
        f->ops[i][2].calls = 1;
        f->ops[i][2].self_mem = 1 << 30;
        f->n_ops[i] = 3;
    }
    f->opp[i] = f->ops[i];
}

static void fake_init(fake_cmp *f)
{
    memset(f, 0, sizeof *f);
    f->c.runs = f->runs;
    f->c.params = f->params;
    f->c.n_params = f->n_kv;
    f->c.ops = f->opp;
    f->c.n_ops = f->n_ops;
}

static void test_scaling_view(void **st)
{
    (void)st;
    fake_cmp f;
    fake_init(&f);
    /* given out of order, with a rerun of full at 512 and a run without a size */
    add_run(&f, "full-n1024", "1024", 1024, 2, 1);
    add_run(&f, "linformer-n256", "256", 256, 1, 1);
    add_run(&f, "full-n256", "256", 256, 2, 1);
    add_run(&f, "full-n512", "512", 512, 2.5, 1);
    add_run(&f, "linformer-n1024", "1024", 1024, 1, 0);   /* not profiled: no attention */
    add_run(&f, "full-n512", "512", 512, 2, 1);           /* the rerun replaces the one above */
    add_run(&f, "other", NULL, 0, 1, 1);
    store_scaling *s = NULL;
    assert_int_equal(store_scaling_build(&f.c, &s), STORE_OK);
    assert_string_equal(s->x_key, "data.seq_len");
    assert_int_equal(s->n_xs, 3);
    assert_true(s->xs[0] == 256 && s->xs[1] == 512 && s->xs[2] == 1024);
    assert_int_equal(s->skipped, 1);
    assert_non_null(strstr(s->note, "1 run without data.seq_len left out; 1 rerun"));
    assert_int_equal(s->n_series, 2);
    const store_scale_series *full = &s->series[0], *lin = &s->series[1];
    assert_string_equal(full->label, "full");
    assert_string_equal(lin->label, "linformer");
    assert_int_equal(full->n, 3);
    assert_true(full->x[0] == 256 && full->x[2] == 1024);
    assert_int_equal(full->run[1], 15);
    assert_true(fabs(full->fit[STORE_SCALE_ATTN].exponent - 2.0) < 1e-3);
    assert_true(fabs(full->fit[STORE_SCALE_ATTN_MEM].exponent - 2.0) < 1e-3);
    assert_true(fabs(full->fit[STORE_SCALE_STEP].exponent - 1.0) < 1e-9);
    assert_true(fabs(full->fit[STORE_SCALE_PEAK].exponent - 1.0) < 1e-9);
    /* attention of one step: (3 + 1) x n^2 ns, per call (the 8 evaluation forwards do not
     * count as steps); the dense op is not attention */
    assert_true(fabs(store_scale_value(full, 256, STORE_SCALE_ATTN) - 4e-9 * 256.0 * 256.0) < 1e-12);
    assert_true(fabs(store_scale_value(full, 256, STORE_SCALE_ATTN_MEM) - 8.0 * 256 * 256) < 1);
    assert_true(isnan(store_scale_value(full, 333, STORE_SCALE_ATTN)));
    /* linformer: 2 points, one of them without attention rows: its attention is not fitted */
    assert_int_equal(lin->n, 2);
    assert_true(isnan(lin->fit[STORE_SCALE_ATTN].exponent));
    assert_non_null(strstr(lin->fit[STORE_SCALE_ATTN].note, "not fitted"));
    assert_true(fabs(lin->fit[STORE_SCALE_STEP].exponent - 1.0) < 1e-9);
    char b[32];
    assert_string_equal(store_scale_cell(lin, 1024, STORE_SCALE_ATTN, b, sizeof b), "-");
    assert_string_equal(store_scale_cell(lin, 512, STORE_SCALE_STEP, b, sizeof b), "-");
    assert_string_equal(store_fit_text(&lin->fit[STORE_SCALE_ATTN], b, sizeof b), "-");
    store_scaling_free(s);
}

static void test_scaling_labels_and_no_view(void **st)
{
    (void)st;
    fake_cmp f;
    fake_init(&f);
    add_run(&f, "lsh_n128", "128", 128, 1, 1);
    add_run(&f, "lsh-256", "256", 256, 1, 1);
    add_run(&f, "n512", "512", 512, 1, 1);         /* nothing left without the size: kept whole */
    add_run(&f, "", "64", 64, 1, 1);               /* no variant: the experiment's name */
    add_run(&f, "x", "abc", 64, 1, 1);             /* not a number: left out */
    add_run(&f, "gr\xc3\xb6\xc3\x9f" "e-n64", "64", 64, 1, 1);    /* the size cut by bytes, not characters */
    add_run(&f, "gr\xc3\xb6\xc3\x9f" "e-n128", "128", 128, 1, 1);
    store_scaling *s = NULL;
    assert_int_equal(store_scaling_build(&f.c, &s), STORE_OK);
    assert_int_equal(s->n_series, 4);
    assert_string_equal(s->series[0].label, "lsh");
    assert_int_equal(s->series[0].n, 2);
    assert_string_equal(s->series[1].label, "n512");
    assert_string_equal(s->series[2].label, "attention-scaling");
    assert_string_equal(s->series[3].label, "gr\xc3\xb6\xc3\x9f" "e");
    assert_int_equal(s->series[3].n, 2);
    assert_int_equal(s->skipped, 1);
    store_scaling_free(s);
    /* one size only: no view, and the note says why */
    fake_init(&f);
    add_run(&f, "full", "49", 49, 2, 1);
    add_run(&f, "linformer", "49", 49, 1, 1);
    assert_int_equal(store_scaling_build(&f.c, &s), STORE_OK);
    assert_int_equal(s->n_xs, 1);
    assert_string_equal(s->note, "no scaling view: the runs do not differ in data.seq_len (1 value)");
    store_scaling_free(s);
}

int test_store_scaling(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit_known_exponents),
        cmocka_unit_test(test_fit_too_few_and_non_positive),
        cmocka_unit_test(test_scaling_view),
        cmocka_unit_test(test_scaling_labels_and_no_view),
    };
    return cmocka_run_group_tests_name("store_scaling", tests, NULL, NULL);
}
