/* runner_quant.c — int8 quantization of a stored run, the one service behind `nnbench
 * quantize`, `nnbench export-model --int8` and the workbench's Quantize: load the run's last
 * checkpoint, quantize it, measure fp32 against int8, store the record. Prints nothing. */
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

const char *cli_qscheme_name(eng_qscheme s) { return s == ENG_QSCHEME_PERCENTILE ? "percentile" : "minmax"; }
#define scheme_name cli_qscheme_name

void cli_quant_job_free(cli_quant_job *j)
{
    eng_qmodel_free(j->q);
    eng_qmodel_free(j->qt);
    eng_model_free(j->m128);
    prof_destroy(j->prof);
    cli_stored_free(&j->st);
}



int cli_quant_job_load(const char *db_path, const char *spec, const qopts *o, int timing, cli_quant_job *j, char *err, size_t cap)
{
    memset(j, 0, sizeof *j);
    j->own_sps[0] = j->own_sps[1] = j->dnnl_sps[0] = j->dnnl_sps[1] = NAN;
    int code = cli_stored_open(db_path, spec, NULL, 0, 1, &j->st, err, cap);
    if (code) return code;
    eng_run *run = j->st.run;
    if (!eng_run_model(run)) { /* a graph run: its GraphSAGE layers have no int8 kernels */
        snprintf(err, cap, "run %lld is a graph run (data.source = graph): int8 quantization covers dense models, "
                 "and GraphSAGE layers have no int8 kernels", j->st.id);
        return 1;
    }
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
        int big = ds->n_test < BIG_BATCH ? ds->n_test : BIG_BATCH;
        eng_qmodel_choose_kernels(j->qt, ds, big, 0.25, j->own_name, j->own_sps, j->dnnl_sps);
        eng_qmodel_copy_kernels(j->q, j->qt);
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
    cli_quant_job j;
    int code = cli_quant_job_load(db_path, spec, o, 1, &j, err, cap);
    if (code) { cli_quant_job_free(&j); return code; }
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
        cli_quant_job_free(&j);
        return 1;
    }
    /* throughput, one thread: the fp32 engine's forward against the int8 path */
    if (eng_model_clone(m, BIG_BATCH, &j.m128)) {
        snprintf(err, cap, "%s", eng_error());
        cli_quant_job_free(&j);
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
    cli_quant_job_free(&j);
    return code;
}
