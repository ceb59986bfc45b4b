/* cmd_model.c — commands on a stored run's model: `nnbench resume` (continue a crashed or
 * interrupted run from its last checkpoint, into the same run id), `nnbench eval`
 * (evaluate the stored model), and the int8 ones in cmd_quant.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"
#include "model_load.h"
#include "runner.h"

/* ---- loading a stored run ------------------------------------------------------------- */

void cli_stored_free(cli_stored *st)
{
    if (!st) return;
    eng_run_destroy(st->run);
    eng_experiment_free(st->ex);
    free(st->ckpt);
    store_run_clear(&st->row);
    memset(st, 0, sizeof *st);
}

int cli_stored_open(const char *db_path, const char *spec, const char *const *extra, size_t n_extra, int need_ckpt,
                    cli_stored *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    store_run_init(&out->row);
    store *db;
    if (store_open(db_path, 0, &db)) {
        snprintf(err, cap, "%s", store_error());
        return 1;
    }
    store_kv *kv = NULL;
    size_t n_kv = 0;
    const char **sets = NULL;
    int code = 1;
    if (store_run_resolve(db, spec, &out->id) || store_run_get(db, out->id, &out->row)) {
        snprintf(err, cap, "%s", store_error());
        goto done;
    }
    if (!out->row.exp_text) {
        snprintf(err, cap, "run %lld has no stored experiment text to rebuild its model from", out->id);
        goto done;
    }
    if (store_params_get(db, out->id, &kv, &n_kv)) {
        snprintf(err, cap, "%s", store_error());
        goto done;
    }
    /* A graph run has no checkpoint because its training loop takes none: say that,
     * not the store's "written before checkpoints". */
    for (size_t i = 0; need_ckpt && i < n_kv; i++)
        if (!strcmp(kv[i].key, "data.source") && !strcmp(kv[i].value, "graph")) {
            snprintf(err, cap, "run %lld is a graph run (data.source = graph): graph runs store no checkpoints (their "
                     "training loop takes none), so there is no model to resume, evaluate, quantize or export", out->id);
            goto done;
        }
    if (need_ckpt && store_checkpoint_get(db, out->id, &out->meta, &out->ckpt, &out->ckpt_len)) {
        snprintf(err, cap, "%s", store_error());
        goto done;
    }
    /* The run's resolved keys (defaults and --set included) as overrides of its stored
     * text: the config is the one the run had, whatever the file says today. */
    sets = calloc(n_kv + n_extra + 1, sizeof *sets);
    char *buf = calloc(n_kv + 1, sizeof kv->key + sizeof kv->value + 2);
    if (!sets || !buf) {
        free(buf);
        snprintf(err, cap, "out of memory");
        goto done;
    }
    out->sets_buf = buf;
    size_t ns = 0;
    for (size_t i = 0; i < n_kv; i++) {
        char *p = buf + i * (sizeof kv->key + sizeof kv->value + 2);
        snprintf(p, sizeof kv->key + sizeof kv->value + 2, "%s=%s", kv[i].key, kv[i].value);
        sets[ns++] = p;
    }
    for (size_t i = 0; i < n_extra; i++) sets[ns++] = extra[i];
    if (eng_experiment_load_text(out->row.exp_path, out->row.exp_text, sets, ns, &out->ex) ||
        (out->row.variant[0] && eng_experiment_select(out->ex, out->row.variant))) {
        snprintf(err, cap, "rebuilding run %lld's config: %s", out->id, eng_error());
        code = 2;
        goto done;
    }
    if (eng_run_create(&out->ex->variants[0], out->ex->text, NULL, &out->run)) {
        snprintf(err, cap, "run %lld: %s", out->id, eng_error());
        goto done;
    }
    code = 0;
done:
    free(sets);
    free(kv);
    free(out->sets_buf);
    out->sets_buf = NULL;
    store_close(db);
    if (code) cli_stored_free(out);
    return code;
}

int cli_stored_load(const char *cmd, const char *db_path, const char *spec, const char *const *extra,
                    size_t n_extra, int need_ckpt, cli_stored *out)
{
    char err[1024];
    int code = cli_stored_open(db_path, spec, extra, n_extra, need_ckpt, out, err, sizeof err);
    if (code) fprintf(stderr, "nnbench %s: %s\n", cmd, err);
    return code;
}

/* ---- show ---------------------------------------------------------------------------- */

void cli_show_model(store *s, long long run)
{
    store_checkpoint *ck = NULL;
    size_t n = 0;
    char a[32];
    if (!store_checkpoints_list(s, run, &ck, &n) && n)
        printf("  checkpoints %zu kept, %s each; last at step %ld (epoch %d)\n", n,
               prof_fmt_bytes(a, sizeof a, (double)ck[0].bytes), ck[0].step, ck[0].epoch);
    free(ck);
    store_quant *q = NULL;
    if (store_quants_list(s, run, &q, &n) || !n) { free(q); return; }
    /* scheme and kernel are text any SQLite client may have written: shown visibly */
    printf("  int8 quantizations (newest first): fp32 -> int8\n");
    for (size_t i = 0; i < n; i++) {
        char fb[32], ib[32], fa[32], ia[32], fl[32], il[32];
        printf("    #%lld %s, calibrate %ld, %s: bytes %s -> %s (%.3fx), acc %s -> %s, loss %s -> %s\n",
               q[i].id, cli_text(q[i].scheme), q[i].calibrate, cli_text(q[i].kernel), prof_fmt_bytes(fb, sizeof fb, (double)q[i].fp32_bytes),
               prof_fmt_bytes(ib, sizeof ib, (double)q[i].int8_bytes),
               q[i].fp32_bytes > 0 ? (double)q[i].int8_bytes / (double)q[i].fp32_bytes : NAN,
               prof_fmt_num(fa, sizeof fa, q[i].fp32_acc), prof_fmt_num(ia, sizeof ia, q[i].int8_acc),
               prof_fmt_num(fl, sizeof fl, q[i].fp32_loss), prof_fmt_num(il, sizeof il, q[i].int8_loss));
        printf("       samples/s batch 1: %.0f -> %.0f (%.2fx); batch 128: %.0f -> %.0f (%.2fx)\n",
               q[i].fp32_sps_b1, q[i].int8_sps_b1, q[i].int8_sps_b1 / q[i].fp32_sps_b1,
               q[i].fp32_sps_b128, q[i].int8_sps_b128, q[i].int8_sps_b128 / q[i].fp32_sps_b128);
    }
    free(q);
}

/* ---- resume ------------------------------------------------------------------------------ */

static int resume_begin(void *ud, size_t v, const eng_config *cfg)
{
    const runner_resumed *r = ud;
    (void)v;
    (void)cfg;
    fprintf(stderr, "nnbench resume: run %lld from its checkpoint at step %ld (epoch %d)\n", r->run_id, r->from_step,
            r->from_epoch);
    if (r->data_warning[0]) fprintf(stderr, "nnbench resume: warning: %s\n", r->data_warning);
    return 0;
}

static void resume_running(void *ud, eng_run *run)
{
    (void)ud;
    cli_stop_target(run);
    const char *note = run ? eng_run_data_note(run) : NULL;
    if (note) fprintf(stderr, "nnbench resume: note: %s\n", cli_text(note));
}

void cmd_resume_help(FILE *f)
{
    fprintf(f,
        "usage: nnbench resume RUN [--db PATH]\n\n"
        "Continues a crashed, interrupted or failed run from its last checkpoint, into the same\n"
        "run id: the config, data and seed are the run's own, and the finished run's curve and\n"
        "final loss equal an uninterrupted run's (bit for bit at 1 thread). Checkpoints are\n"
        "taken every train.checkpoint_every steps (default: each epoch), at the end and when a\n"
        "run is stopped; newton runs take none.\n\n"
        "Exit status: 0 finished; 1 failed (or nothing to resume); 2 bad usage; 128+N stopped\n"
        "by signal N: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP (stored as interrupted, with a\n"
        "checkpoint: resume it again).\n");
}

int cmd_resume(int argc, char **argv)
{
    const char *db_flag = NULL, *spec = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { cmd_resume_help(stdout); return 0; }
        else if (!strcmp(argv[i], "--db") && i + 1 < argc) db_flag = argv[++i];
        else if (argv[i][0] == '-') return cli_unknown_option("resume", argv[i]);
        else if (!spec) spec = argv[i];
        else { fprintf(stderr, "nnbench resume: one run at a time (got '%s' and '%s')\n", spec, argv[i]); return 2; }
    }
    if (!spec) { fprintf(stderr, "nnbench resume: which run? usage: nnbench resume RUN\n"); return 2; }
    runner_resumed r;
    runner_hooks h = { .ud = &r, .begin = resume_begin, .running = resume_running };
    /* SIGINT, SIGTERM and SIGHUP stop it as they stop `run`: checkpoint, 'interrupted' */
    cli_stop_install(0);
    int code = runner_resume(cli_db_path(db_flag), spec, &h, &r);
    cli_stop_restore();
    if (cli_stop_signal() && code == 130) code = 128 + cli_stop_signal();
    const runner_variant *o = &r.out;
    if (!o->created) {
        fprintf(stderr, "nnbench resume: %s\n", o->error);
        return code;
    }
    if (o->store_warning[0]) fprintf(stderr, "nnbench resume: warning: %s\n", o->store_warning);
    if (o->monitor_warning[0]) fprintf(stderr, "nnbench resume: warning: %s\n", o->monitor_warning);
    if (o->store_error[0]) fprintf(stderr, "nnbench resume: %s\n", o->store_error);
    printf("run %lld: %s at step %ld/%ld, final train loss %.6g, test loss %.6g, test acc %.4f\n", r.run_id,
           eng_run_status_name(o->res.status), o->res.steps, r.total_steps, o->res.final_train_loss,
           o->res.final_test_loss, o->res.final_test_acc);
    if (o->rc && o->rc != ENG_ESTOPPED) fprintf(stderr, "nnbench resume: %s\n", o->error);
    return code;
}

/* ---- eval ------------------------------------------------------------------------------- */

void cmd_eval_help(FILE *f)
{
    fprintf(f,
        "usage: nnbench eval RUN [--data FILE [--labels FILE]] [--json] [--db PATH]\n\n"
        "Evaluates the run's model (its last checkpoint) on its test set, or on FILE: an IDX\n"
        "images file (with --labels, its labels file) or a CSV file laid out as the run's data.\n"
        "The inputs are normalised with the statistics of the run's own training set.\n");
}

int cmd_eval(int argc, char **argv)
{
    const char *db_flag = NULL, *spec = NULL, *data = NULL, *labels = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cmd_eval_help(stdout); return 0; }
        else if (!strcmp(a, "--db") && i + 1 < argc) db_flag = argv[++i];
        else if (!strcmp(a, "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(a, "--labels") && i + 1 < argc) labels = argv[++i];
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] == '-') return cli_unknown_option("eval", a);
        else if (!spec) spec = a;
        else { fprintf(stderr, "nnbench eval: one run at a time (got '%s' and '%s')\n", spec, a); return 2; }
    }
    if (!spec) { fprintf(stderr, "nnbench eval: which run? usage: nnbench eval RUN [--data FILE]\n"); return 2; }
    if (labels && !data) { fprintf(stderr, "nnbench eval: --labels goes with --data (the images file)\n"); return 2; }
    char set_path[600], set_labels[600], set_n[32];
    const char *extra[3] = { NULL, NULL, NULL };
    size_t n_extra = 0;
    if (data) {
        snprintf(set_path, sizeof set_path, "data.test_path=%s", data);
        extra[n_extra++] = set_path;
        snprintf(set_n, sizeof set_n, "data.n_test=0");
        extra[n_extra++] = set_n;
        if (labels) {
            snprintf(set_labels, sizeof set_labels, "data.test_labels=%s", labels);
            extra[n_extra++] = set_labels;
        }
    }
    cli_stored st;
    int code = cli_stored_load("eval", cli_db_path(db_flag), spec, extra, n_extra, 1, &st);
    if (code) return code;
    const eng_config *cfg = &st.ex->variants[0];
    if (data && cfg->data.source != ENG_DATA_IDX && cfg->data.source != ENG_DATA_CSV) {
        fprintf(stderr, "nnbench eval: run %lld trained on generated data; --data takes the IDX or CSV file "
                "of a run that trained on files\n", st.id);
        cli_stored_free(&st);
        return 2;
    }
    double loss, acc;
    if (eng_run_load_params(st.run, st.ckpt, st.ckpt_len) || eng_run_evaluate(st.run, &loss, &acc)) {
        fprintf(stderr, "nnbench eval: run %lld: %s\n", st.id, cli_text(eng_error()));
        cli_stored_free(&st);
        return 1;
    }
    const eng_dataset *ds = eng_run_dataset(st.run);
    const char *on = data ? data : "its test set";
    if (json) {
        prof_json w;   /* the one JSON writer (profiler/json.c); NaN is null */
        prof_json_begin(&w, stdout, 0);
        prof_json_object(&w);
        prof_json_kint(&w, "run", st.id);
        prof_json_kint(&w, "step", st.meta.step);
        prof_json_kstr(&w, "data", data ? "file" : "test");
        prof_json_kint(&w, "samples", ds->n_test);
        prof_json_key(&w, "loss");
        prof_json_numg(&w, loss, 10);
        prof_json_key(&w, "accuracy");
        prof_json_numg(&w, acc, 10);
        prof_json_close(&w);
        prof_json_end(&w);
    } else {
        printf("run %lld (checkpoint at step %ld) on %s: %d samples, loss %.6g", st.id, st.meta.step, on, ds->n_test, loss);
        if (!isnan(acc)) printf(", accuracy %.4f", acc);
        printf("\n");
    }
    cli_stored_free(&st);
    return 0;
}
