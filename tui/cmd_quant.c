/* cmd_quant.c — `nnbench quantize RUN`: int8 post-training quantization of a stored run's
 * last checkpoint, fp32 and int8 side by side (model bytes, test loss and accuracy,
 * inference samples/s at batch 1 and 128 on one thread, the int8 path's op profile), stored
 * as a quantization record of the run; `nnbench export-model RUN --int8`: the same int8
 * model as a self-contained C file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../store/store.h"
#include "cli.h"
#include "model_load.h"

#define BIG_BATCH CLI_QUANT_BIG_BATCH
typedef cli_qopts qopts;

/* Parses the options quantize and export-model share; 1 = consumed (i advanced), 0 = not
 * ours, -1 = bad value (message printed). */
static int qopt_parse(const char *cmd, int argc, char **argv, int *i, qopts *o)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--calibrate") || !strcmp(a, "--scheme") || !strcmp(a, "--kernel")) {
        if (*i + 1 >= argc) { fprintf(stderr, "nnbench %s: %s needs a value\n", cmd, a); return -1; }
        const char *v = argv[++*i];
        if (!strcmp(a, "--calibrate")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 10000000) {
                fprintf(stderr, "nnbench %s: --calibrate: expected a number of training samples >= 1, got '%s'\n", cmd, v);
                return -1;
            }
            o->calibrate = (int)n;
        } else if (!strcmp(a, "--scheme")) {
            if (!strcmp(v, "minmax")) o->scheme = ENG_QSCHEME_MINMAX;
            else if (!strcmp(v, "percentile")) o->scheme = ENG_QSCHEME_PERCENTILE;
            else { fprintf(stderr, "nnbench %s: --scheme: expected minmax or percentile, got '%s'\n", cmd, v); return -1; }
        } else {
            o->kernel = v;
        }
        return 1;
    }
    return 0;
}

static int n_outputs(const eng_dataset *ds) { return ds->classification ? ds->n_classes : ds->n_targets; }

const char *cli_qscheme_name(eng_qscheme s) { return s == ENG_QSCHEME_PERCENTILE ? "percentile" : "minmax"; }
#define scheme_name cli_qscheme_name

void cmd_quantize_help(FILE *f)
{
    fprintf(f,
        "usage: nnbench quantize RUN [--calibrate N] [--scheme minmax|percentile] [--kernel K]\n"
        "                        [--json] [--no-store] [--db PATH]\n\n"
        "int8 post-training quantization of the run's last checkpoint: weights int8 symmetric\n"
        "per output channel, activations uint8 per tensor with ranges from N training samples\n"
        "(default 1000; min-max, or the 0.01/99.99 percentiles: the default), biases int32.\n"
        "Inference runs in integers (uint8 x int8 -> int32, requantized between layers) for\n"
        "dense and conv layers. Prints fp32 and int8 side by side: model bytes, test loss and\n"
        "accuracy, inference samples/s at batch 1 and %d on one thread, and the int8 path's\n"
        "op profile; stores them as a quantization record of the run (see `nnbench show`).\n\n"
        "  --kernel K   int8 GEMM: auto (the own kernel for this CPU), scalar, avx2, vnni or\n"
        "               onednn. Without it both the own kernel and oneDNN's int8 matmul are\n"
        "               timed at batch %d and the faster is used; both times are printed.\n",
        BIG_BATCH, BIG_BATCH);
}

/* Loads, quantizes twice (profiled for the accuracy pass, unprofiled for timing), chooses
 * the kernel. */
typedef struct {
    cli_stored st;
    eng_qmodel *q, *qt;       /* profiled / timing */
    prof_t *prof;
    eng_model *m128;          /* the fp32 model for batches up to BIG_BATCH */
    double own_sps[2], dnnl_sps[2]; /* int8 samples/s at batch BIG_BATCH and 1; NAN if not measured */
    double fp32_loss, fp32_acc;     /* the fp32 model on the test set */
    char own_name[16];
} quant_job;

static void job_free(quant_job *j)
{
    eng_qmodel_free(j->q);
    eng_qmodel_free(j->qt);
    eng_model_free(j->m128);
    prof_destroy(j->prof);
    cli_stored_free(&j->st);
}



static int job_load(const char *db_path, const char *spec, const qopts *o, int timing, quant_job *j, char *err, size_t cap)
{
    memset(j, 0, sizeof *j);
    j->own_sps[0] = j->own_sps[1] = j->dnnl_sps[0] = j->dnnl_sps[1] = NAN;
    int code = cli_stored_open(db_path, spec, NULL, 0, 1, &j->st, err, cap);
    if (code) return code;
    eng_run *run = j->st.run;
    if (eng_run_load_params(run, j->st.ckpt, j->st.ckpt_len)) {
        snprintf(err, cap, "run %lld: %s", j->st.id, eng_error());
        return 1;
    }
    const eng_dataset *ds = eng_run_dataset(run);
    if (ds->n_test < 1) {
        snprintf(err, cap, "run %lld's data has no test set to measure the int8 model on", j->st.id);
        return 1;
    }
    /* eval's check, for quantize and export-model alike: a model whose test loss is not
     * finite (a diverged run) is refused before it is quantized or written out. */
    if (eng_run_evaluate(run, &j->fp32_loss, &j->fp32_acc)) {
        snprintf(err, cap, "run %lld: %s", j->st.id, eng_error());
        return 1;
    }
    eng_inference_threads(1);
    prof_options po = { .counters = "none", .quiet = 1 };
    if (timing && !(j->prof = prof_create(&po))) {
        snprintf(err, cap, "profiler: %s", prof_error());
        return 1;
    }
    eng_model *m = eng_run_model(run);
    if (eng_quantize(m, ds, o->calibrate, o->scheme, BIG_BATCH, j->prof, &j->q) ||
        (timing && eng_quantize(m, ds, o->calibrate, o->scheme, BIG_BATCH, NULL, &j->qt))) {
        snprintf(err, cap, "run %lld: %s", j->st.id, eng_error());
        return 1;
    }
    if (o->kernel) {
        if (eng_qmodel_set_kernel(j->q, o->kernel) || (j->qt && eng_qmodel_set_kernel(j->qt, o->kernel))) {
            snprintf(err, cap, "%s", eng_error());
            return 2;
        }
    } else if (timing) {
        /* the own kernel against oneDNN's matmul, at each batch size: each is used where it
         * measured faster */
        snprintf(j->own_name, sizeof j->own_name, "%s", eng_qmodel_kernel(j->qt));
        int big = ds->n_test < BIG_BATCH ? ds->n_test : BIG_BATCH;
        for (int b = 0; b < 2; b++) j->own_sps[b] = eng_qmodel_inference_sps(j->qt, ds, b ? 1 : big, 0.25);
        if (!eng_qmodel_set_kernel(j->qt, "onednn"))
            for (int b = 0; b < 2; b++) j->dnnl_sps[b] = eng_qmodel_inference_sps(j->qt, ds, b ? 1 : big, 0.25);
        const char *pick[2];
        for (int b = 0; b < 2; b++) pick[b] = j->dnnl_sps[b] > j->own_sps[b] ? "onednn" : j->own_name;
        eng_qmodel_set_kernels(j->qt, pick[0], pick[1]);
        eng_qmodel_set_kernels(j->q, pick[0], pick[1]);
    }
    return 0;
}

void cli_quant_result_free(cli_quant_result *r)
{
    free(r->ops);
    r->ops = NULL;
    r->n_ops = 0;
}

static void say(void (*progress)(void *, const char *), void *ud, const char *stage)
{
    if (progress) progress(ud, stage);
}

int cli_quantize(const char *db_path, const char *spec, const qopts *o, int store_it,
                 void (*progress)(void *ud, const char *stage), void *ud, cli_quant_result *out)
{
    memset(out, 0, sizeof *out);
    char *err = out->error;
    size_t cap = sizeof out->error;
    say(progress, ud, "loading the run and calibrating");
    quant_job j;
    int code = job_load(db_path, spec, o, 1, &j, err, cap);
    if (code) { job_free(&j); return code; }
    eng_run *run = j.st.run;
    const eng_dataset *ds = eng_run_dataset(run);
    eng_model *m = eng_run_model(run);
    store_quant rec;
    memset(&rec, 0, sizeof rec);
    rec.run = j.st.id;
    rec.created = NAN;
    rec.step = j.st.meta.step;
    snprintf(rec.scheme, sizeof rec.scheme, "%s", scheme_name(o->scheme));
    rec.calibrate = o->calibrate < ds->n_train ? o->calibrate : ds->n_train;
    snprintf(rec.kernel, sizeof rec.kernel, "%s", eng_qmodel_kernel(j.q));
    rec.fp32_bytes = (long long)(eng_model_n_params(m) * sizeof(float));
    rec.int8_bytes = (long long)eng_qmodel_bytes(j.q);
    say(progress, ud, "evaluating fp32 and int8 on the test set");
    rec.fp32_loss = j.fp32_loss;
    rec.fp32_acc = j.fp32_acc;
    if (eng_qmodel_evaluate(j.q, ds->x_test, ds->y_test, ds->t_test, ds->n_test, &rec.int8_loss, &rec.int8_acc)) {
        snprintf(err, cap, "%s", eng_error());
        job_free(&j);
        return 1;
    }
    /* throughput, one thread: the fp32 engine's forward against the int8 path */
    if (eng_model_clone(m, BIG_BATCH, &j.m128)) {
        snprintf(err, cap, "%s", eng_error());
        job_free(&j);
        return 1;
    }
    say(progress, ud, "measuring inference samples/s (batch 1 and 128, 1 thread)");
    int big = ds->n_test < BIG_BATCH ? ds->n_test : BIG_BATCH;
    rec.fp32_sps_b1 = eng_model_inference_sps(j.m128, ds, 1, 0.4);
    rec.int8_sps_b1 = eng_qmodel_inference_sps(j.qt, ds, 1, 0.4);
    rec.fp32_sps_b128 = eng_model_inference_sps(j.m128, ds, big, 0.4);
    rec.int8_sps_b128 = eng_qmodel_inference_sps(j.qt, ds, big, 0.4);

    prof_row *rows = NULL;
    size_t nr = 0;
    store_quant_op *ops = NULL;
    size_t nops = 0;
    if (!prof_rows(j.prof, PROF_BY_SCOPE, &rows, &nr)) {
        prof_rows_sort(rows, nr, PROF_SORT_SELF);
        ops = calloc(nr ? nr : 1, sizeof *ops);
        for (size_t i = 0; ops && i < nr; i++) {
            if (rows[i].kind != PROF_OP || !rows[i].calls) continue;
            ops[nops++] = rows[i];   /* the store keeps name, layer, calls, total and self */
        }
    }
    free(rows);
    if (store_it) {
        say(progress, ud, "storing the quantization record");
        store *db = NULL;
        if (store_open(db_path, STORE_OPEN_WRITE, &db) || store_quant_put(db, &rec, ops, nops, &rec.id)) {
            snprintf(err, cap, "%s", store_error());
            code = 1;
        } else {
            out->stored = 1;
        }
        store_close(db);
    }
    out->rec = rec;
    out->ops = ops;
    out->n_ops = nops;
    out->big = big;
    out->n_test = ds->n_test;
    snprintf(out->own_name, sizeof out->own_name, "%s", j.own_name);
    for (int b = 0; b < 2; b++) { out->own_sps[b] = j.own_sps[b]; out->dnnl_sps[b] = j.dnnl_sps[b]; }
    job_free(&j);
    return code;
}

int cmd_quantize(int argc, char **argv)
{
    const char *db_flag = NULL, *spec = NULL;
    int json = 0, no_store = 0;
    qopts o = { .calibrate = 1000, .scheme = ENG_QSCHEME_PERCENTILE };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = qopt_parse("quantize", argc, argv, &i, &o);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cmd_quantize_help(stdout); return 0; }
        else if (!strcmp(a, "--db") && i + 1 < argc) db_flag = argv[++i];
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--no-store")) no_store = 1;
        else if (a[0] == '-') return cli_unknown_option("quantize", a);
        else if (!spec) spec = a;
        else { fprintf(stderr, "nnbench quantize: one run at a time (got '%s' and '%s')\n", spec, a); return 2; }
    }
    if (!spec) { fprintf(stderr, "nnbench quantize: which run? usage: nnbench quantize RUN\n"); return 2; }
    const char *db_path = cli_db_path(db_flag);
    cli_quant_result qr;
    int code = cli_quantize(db_path, spec, &o, !no_store, NULL, NULL, &qr);
    if (code && !qr.n_test) {
        fprintf(stderr, "nnbench quantize: %s\n", qr.error);
        cli_quant_result_free(&qr);
        return code;
    }
    if (code) fprintf(stderr, "nnbench quantize: storing the result: %s\n", qr.error);
    const store_quant *rec = &qr.rec;
    const store_quant_op *ops = qr.ops;
    size_t nops = qr.n_ops;
    int big = qr.big;
    double ratio = (double)rec->int8_bytes / (double)rec->fp32_bytes;
    if (json) {
        prof_json w;   /* the one JSON writer (profiler/json.c) */
        prof_json_begin(&w, stdout, 1);
        prof_json_object(&w);
        prof_json_kint(&w, "run", rec->run);
        prof_json_kint(&w, "quantization", rec->id);
        prof_json_kint(&w, "step", rec->step);
        prof_json_kstr(&w, "scheme", rec->scheme);
        prof_json_kint(&w, "calibrate", rec->calibrate);
        prof_json_kstr(&w, "kernel", rec->kernel);
        prof_json_kstr(&w, "own_kernel", qr.own_name);
        static const char *const keys[4] = { "own_sps_b128", "own_sps_b1", "onednn_sps_b128", "onednn_sps_b1" };
        const double vals[4] = { qr.own_sps[0], qr.own_sps[1], qr.dnnl_sps[0], qr.dnnl_sps[1] };
        for (int k = 0; k < 4; k++) { prof_json_key(&w, keys[k]); prof_json_numg(&w, vals[k], 6); }
        char bigk[32];
        snprintf(bigk, sizeof bigk, "samples_per_s_b%d", BIG_BATCH);
        const struct { const char *k; long long bytes; double loss, acc, b1, bb; } part[2] = {
            { "fp32", rec->fp32_bytes, rec->fp32_loss, rec->fp32_acc, rec->fp32_sps_b1, rec->fp32_sps_b128 },
            { "int8", rec->int8_bytes, rec->int8_loss, rec->int8_acc, rec->int8_sps_b1, rec->int8_sps_b128 } };
        for (int k = 0; k < 2; k++) {
            prof_json_key(&w, part[k].k);
            prof_json_object(&w);
            prof_json_kint(&w, "bytes", part[k].bytes);
            prof_json_key(&w, "loss");
            prof_json_numg(&w, part[k].loss, 10);
            prof_json_key(&w, "accuracy");
            prof_json_numg(&w, part[k].acc, 10);
            prof_json_key(&w, "samples_per_s_b1");
            prof_json_numg(&w, part[k].b1, 6);
            prof_json_key(&w, bigk);
            prof_json_numg(&w, part[k].bb, 6);
            prof_json_close(&w);
        }
        prof_json_key(&w, "bytes_ratio");
        prof_json_numg(&w, ratio, 6);
        prof_json_key(&w, "ops");
        prof_json_array(&w);
        for (size_t i = 0; i < nops; i++) {
            prof_json_object(&w);
            prof_json_kstr(&w, "name", ops[i].name);
            prof_json_kstr(&w, "layer", ops[i].layer);
            prof_json_kint(&w, "calls", (long long)ops[i].calls);
            prof_json_kint(&w, "self_ns", (long long)ops[i].self_ns);
            prof_json_close(&w);
        }
        prof_json_close(&w);
        prof_json_close(&w);
        prof_json_end(&w);
    } else {
        char a[32], b[32];
        printf("run %lld, checkpoint at step %ld: int8 (%s, %ld calibration samples, kernel %s)\n", rec->run, rec->step,
               rec->scheme, rec->calibrate, rec->kernel);
        if (isfinite(qr.own_sps[0])) {
            printf("  int8 kernels, samples/s of the whole int8 forward: own %s %.0f (batch %d), %.0f (batch 1)", qr.own_name,
                   qr.own_sps[0], big, qr.own_sps[1]);
            if (isfinite(qr.dnnl_sps[0])) printf("; oneDNN %.0f, %.0f\n", qr.dnnl_sps[0], qr.dnnl_sps[1]);
            else printf("; oneDNN not available\n");
        }
        printf("  %-22s %14s %14s %10s\n", "", "fp32", "int8", "int8/fp32");
        printf("  %-22s %14s %14s %10.3f\n", "model bytes", prof_fmt_bytes(a, sizeof a, (double)rec->fp32_bytes),
               prof_fmt_bytes(b, sizeof b, (double)rec->int8_bytes), ratio);
        printf("  %-22s %14.5f %14.5f %10s\n", "test loss", rec->fp32_loss, rec->int8_loss, "");
        if (isfinite(rec->fp32_acc))
            printf("  %-22s %14.4f %14.4f %+9.2f pt\n", "test accuracy", rec->fp32_acc, rec->int8_acc,
                   100.0 * (rec->int8_acc - rec->fp32_acc));
        printf("  %-22s %14.0f %14.0f %10.2f\n", "samples/s, batch 1", rec->fp32_sps_b1, rec->int8_sps_b1, rec->int8_sps_b1 / rec->fp32_sps_b1);
        snprintf(a, sizeof a, "samples/s, batch %d", big);
        printf("  %-22s %14.0f %14.0f %10.2f\n", a, rec->fp32_sps_b128, rec->int8_sps_b128, rec->int8_sps_b128 / rec->fp32_sps_b128);
        printf("\n  int8 path profile (test set, %d samples):\n", qr.n_test);
        prof_table t;   /* the op table of run --profile, show and the workbench */
        prof_table_init(&t, ops, nops, 0, 0);
        prof_table_print(stdout, &t, 0, 24, "  ");
        if (!no_store && !code) printf("\nstored as quantization %lld of run %lld in %s\n", rec->id, rec->run, db_path);
    }
    cli_quant_result_free(&qr);
    return code;
}

/* ---- export-model ------------------------------------------------------------------------ */

void cmd_export_model_help(FILE *f)
{
    fprintf(f,
        "usage: nnbench export-model RUN --int8 -o FILE.c [--prefix NAME] [--calibrate N]\n"
        "                            [--scheme minmax|percentile] [--vectors N FILE] [--db PATH]\n\n"
        "Writes the run's int8 model (as `nnbench quantize` builds it with the same options) as\n"
        "one self-contained C file: int8 weights, int32 biases, scales, and NAME_logits() /\n"
        "NAME_predict() doing the integer inference for one sample (float input as nnbench\n"
        "feeds it). It compiles with `cc -c`; no dependencies beyond <stdint.h> and <math.h>.\n"
        "  --vectors N FILE  also write the first N test samples with nnbench's int8 logits and\n"
        "                    predictions (int32 n, in, out; then per sample float x[in], int32\n"
        "                    class, float logits[out]) to check a build of the file against.\n");
}

/* The first n test samples with nnbench's int8 logits and predictions (--vectors): int32
 * n, in, out; then per sample float x[in], int32 class, float logits[out]. */
static int write_vectors(FILE *f, const quant_job *j, int n)
{
    const eng_dataset *ds = eng_run_dataset(j->st.run);
    int in = (int)ds->in_size, no = n_outputs(ds);
    float *lg = malloc((size_t)no * sizeof(float));
    if (!lg) return eng_fail(ENG_ENOMEM, "out of memory");
    int32_t hdr[3] = { n, in, no };
    fwrite(hdr, sizeof hdr, 1, f);
    for (int r = 0; r < n; r++) {
        const float *x = ds->x_test + (size_t)r * in;
        eng_qmodel_forward(j->q, x, 1, lg);
        int32_t best = 0;
        for (int c = 1; c < no; c++) if (lg[c] > lg[best]) best = c;
        fwrite(x, sizeof(float), (size_t)in, f);
        fwrite(&best, sizeof best, 1, f);
        fwrite(lg, sizeof(float), (size_t)no, f);
    }
    free(lg);
    return ferror(f) ? eng_fail(ENG_EIO, "write error (disk full?)") : ENG_OK;
}

/* One output of export-model: the C file (prefix given) or n test vectors, written as
 * reports are (store_output: never the database, a temporary file renamed into place, so a
 * failed export leaves the previous file as it was). Prints the reason; non-zero if failed. */
static int export_write(const char *db_path, const char *path, const quant_job *j, const char *prefix, int n)
{
    store_output so;
    if (store_output_open(db_path, path, &so)) {
        fprintf(stderr, "nnbench export-model: %s\n", cli_text(store_error()));
        return 1;
    }
    int rc = prefix ? eng_qmodel_export_c(j->q, so.f, prefix) : write_vectors(so.f, j, n);
    if (rc) fprintf(stderr, "nnbench export-model: %s: %s\n", cli_text(path), eng_error());
    if (store_output_close(&so, rc ? STORE_EIO : STORE_OK) && !rc) {
        fprintf(stderr, "nnbench export-model: %s\n", cli_text(store_error()));
        rc = 1;
    }
    return rc != 0;
}

int cmd_export_model(int argc, char **argv)
{
    const char *db_flag = NULL, *spec = NULL, *out = NULL, *prefix = "nnb", *vec_path = NULL;
    int int8 = 0;
    long n_vec = 0;
    qopts o = { .calibrate = 1000, .scheme = ENG_QSCHEME_PERCENTILE };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = qopt_parse("export-model", argc, argv, &i, &o);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cmd_export_model_help(stdout); return 0; }
        else if (!strcmp(a, "--db") && i + 1 < argc) db_flag = argv[++i];
        else if (!strcmp(a, "--int8")) int8 = 1;
        else if (!strcmp(a, "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(a, "--prefix") && i + 1 < argc) prefix = argv[++i];
        else if (!strcmp(a, "--vectors") && i + 2 < argc) {
            char *end;
            n_vec = strtol(argv[++i], &end, 10);
            if (*end || n_vec < 1) { fprintf(stderr, "nnbench export-model: --vectors: expected N >= 1, got '%s'\n", argv[i]); return 2; }
            vec_path = argv[++i];
        }
        else if (a[0] == '-') return cli_unknown_option("export-model", a);
        else if (!spec) spec = a;
        else { fprintf(stderr, "nnbench export-model: one run at a time (got '%s' and '%s')\n", spec, a); return 2; }
    }
    if (!spec || !out) { fprintf(stderr, "nnbench export-model: usage: nnbench export-model RUN --int8 -o FILE.c\n"); return 2; }
    if (!int8) { fprintf(stderr, "nnbench export-model: only --int8 export exists; add --int8\n"); return 2; }
    for (const char *c = prefix; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || (c != prefix && *c >= '0' && *c <= '9'))) {
            fprintf(stderr, "nnbench export-model: --prefix '%s' is not a C identifier\n", prefix);
            return 2;
        }
    const char *db_path = cli_db_path(db_flag);
    /* Before any work: neither output may be the database (or a link to it). */
    const char *outs[2] = { out, vec_path };
    for (int k = 0; k < 2 && outs[k]; k++) {
        char err[1024];
        if (cli_output_check(db_path, outs[k], err, sizeof err)) {
            fprintf(stderr, "nnbench export-model: %s; nothing was written\n", cli_text(err));
            return 1;
        }
    }
    quant_job j;
    char err[1024];
    int code = job_load(db_path, spec, &o, 0, &j, err, sizeof err);
    if (code) { fprintf(stderr, "nnbench export-model: %s\n", err); job_free(&j); return code; }
    if (export_write(db_path, out, &j, prefix, 0)) { job_free(&j); return 1; }
    printf("run %lld: int8 model (%s, %d calibration samples, %zu bytes) written to %s\n", j.st.id,
           scheme_name(o.scheme), o.calibrate, eng_qmodel_bytes(j.q), out);
    if (vec_path) {
        const eng_dataset *ds = eng_run_dataset(j.st.run);
        int n = n_vec < ds->n_test ? (int)n_vec : ds->n_test;
        if (export_write(db_path, vec_path, &j, NULL, n)) { job_free(&j); return 1; }
        printf("%d test vectors with nnbench's int8 predictions written to %s\n", n, vec_path);
    }
    job_free(&j);
    return 0;
}
