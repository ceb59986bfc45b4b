/* cmd_quant.c — `nnbench quantize RUN`: int8 post-training quantization of a stored run's
 * last checkpoint, fp32 and int8 side by side (model bytes, test loss and accuracy,
 * inference samples/s at batch 1 and 128 on one thread, the int8 path's op profile), stored
 * as a quantization record of the run; `nnbench export-model RUN --int8`: the same int8
 * model as a self-contained C file. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../store/store.h"
#include "cli.h"
#include "model_load.h"

#define BIG_BATCH CLI_QUANT_BIG_BATCH
typedef cli_qopts qopts;

/* --calibrate N and --scheme minmax|percentile, which quantize and export-model share: their
 * options structs start with the qopts. */
static int qopt_value(void *opts, const char *cmd, const char *name, char **vals)
{
    qopts *o = opts;
    const char *v = vals[0];
    if (!strcmp(name, "--calibrate")) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > 10000000) {
            fprintf(stderr, "nnbench %s: --calibrate: expected a number of training samples >= 1, got '%s'\n", cmd, v);
            return 2;
        }
        o->calibrate = (int)n;
    } else if (!strcmp(v, "minmax")) o->scheme = ENG_QSCHEME_MINMAX;
    else if (!strcmp(v, "percentile")) o->scheme = ENG_QSCHEME_PERCENTILE;
    else { fprintf(stderr, "nnbench %s: --scheme: expected minmax or percentile, got '%s'\n", cmd, v); return 2; }
    return 0;
}

static int n_outputs(const eng_dataset *ds) { return ds->classification ? ds->n_classes : ds->n_targets; }

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

typedef struct { qopts q; const char *db; int json, no_store; } quantize_opts;
static const cli_opt quantize_opt[] = {
    CLI_OPT_CALL("--calibrate", qopt_value, 1), CLI_OPT_CALL("--scheme", qopt_value, 1),
    CLI_OPT_VALUE("--kernel", NULL, quantize_opts, q.kernel), CLI_OPT_VALUE("--db", NULL, quantize_opts, db),
    CLI_OPT_FLAG("--json", NULL, quantize_opts, json), CLI_OPT_FLAG("--no-store", NULL, quantize_opts, no_store),
};
const cli_spec cmd_quantize_spec = { "quantize", cmd_quantize_help, quantize_opt, CLI_N(quantize_opt) };

int cmd_quantize(int argc, char **argv)
{
    quantize_opts opt = { .q = { .calibrate = 1000, .scheme = ENG_QSCHEME_PERCENTILE } };
    int n_pos, rc = cli_parse(&cmd_quantize_spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos > 1) { fprintf(stderr, "nnbench quantize: one run at a time (got '%s' and '%s')\n", argv[1], argv[2]); return 2; }
    const char *db_flag = opt.db, *spec = n_pos ? argv[1] : NULL;
    int json = opt.json, no_store = opt.no_store;
    qopts o = opt.q;
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
static int write_vectors(FILE *f, const cli_quant_job *j, int n)
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
static int export_write(const char *db_path, const char *path, const cli_quant_job *j, const char *prefix, int n)
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

typedef struct { qopts q; const char *db, *out, *prefix, *vec_path; int int8; long n_vec; } export_model_opts;

/* --vectors N FILE: N test vectors with their outputs, for a harness to check the C file. */
static int vectors_value(void *opts, const char *cmd, const char *name, char **vals)
{
    export_model_opts *o = opts;
    char *end;
    o->n_vec = strtol(vals[0], &end, 10);
    if (*end || o->n_vec < 1) { fprintf(stderr, "nnbench %s: %s: expected N >= 1, got '%s'\n", cmd, name, vals[0]); return 2; }
    o->vec_path = vals[1];
    return 0;
}

static const cli_opt export_model_opt[] = {
    CLI_OPT_CALL("--calibrate", qopt_value, 1), CLI_OPT_CALL("--scheme", qopt_value, 1),
    CLI_OPT_VALUE("--db", NULL, export_model_opts, db),
    CLI_OPT_FLAG("--int8", NULL, export_model_opts, int8), CLI_OPT_VALUE("-o", NULL, export_model_opts, out),
    CLI_OPT_VALUE("--prefix", NULL, export_model_opts, prefix), CLI_OPT_CALL("--vectors", vectors_value, 2),
};
const cli_spec cmd_export_model_spec = { "export-model", cmd_export_model_help, export_model_opt, CLI_N(export_model_opt) };

int cmd_export_model(int argc, char **argv)
{
    export_model_opts opt = { .q = { .calibrate = 1000, .scheme = ENG_QSCHEME_PERCENTILE }, .prefix = "nnb" };
    int n_pos, rc = cli_parse(&cmd_export_model_spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos > 1) { fprintf(stderr, "nnbench export-model: one run at a time (got '%s' and '%s')\n", argv[1], argv[2]); return 2; }
    const char *db_flag = opt.db, *spec = n_pos ? argv[1] : NULL, *out = opt.out, *prefix = opt.prefix, *vec_path = opt.vec_path;
    int int8 = opt.int8;
    long n_vec = opt.n_vec;
    qopts o = opt.q;
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
    cli_quant_job j;
    char err[1024];
    int code = cli_quant_job_load(db_path, spec, &o, 0, &j, err, sizeof err);
    if (code) { fprintf(stderr, "nnbench export-model: %s\n", err); cli_quant_job_free(&j); return code; }
    if (export_write(db_path, out, &j, prefix, 0)) { cli_quant_job_free(&j); return 1; }
    printf("run %lld: int8 model (%s, %d calibration samples, %zu bytes) written to %s\n", j.st.id,
           scheme_name(o.scheme), o.calibrate, eng_qmodel_bytes(j.q), out);
    if (vec_path) {
        const eng_dataset *ds = eng_run_dataset(j.st.run);
        int n = n_vec < ds->n_test ? (int)n_vec : ds->n_test;
        if (export_write(db_path, vec_path, &j, NULL, n)) { cli_quant_job_free(&j); return 1; }
        printf("%d test vectors with nnbench's int8 predictions written to %s\n", n, vec_path);
    }
    cli_quant_job_free(&j);
    return 0;
}
