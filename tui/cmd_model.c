/* cmd_model.c — commands on a stored run's model: `nnbench resume` (continue a crashed or
 * interrupted run from its last checkpoint, into the same run id), `nnbench eval`
 * (evaluate the stored model), and the int8 ones in cmd_quant.c. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"
#include "model_load.h"
#include "runner.h"

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

typedef struct { const char *db; } resume_opts;
static const cli_opt resume_opt[] = { CLI_OPT_VALUE("--db", NULL, resume_opts, db) };
const cli_spec cmd_resume_spec = { "resume", cmd_resume_help, resume_opt, CLI_N(resume_opt) };

int cmd_resume(int argc, char **argv)
{
    resume_opts opt = { 0 };
    int n_pos, rc = cli_parse(&cmd_resume_spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos > 1) { fprintf(stderr, "nnbench resume: one run at a time (got '%s' and '%s')\n", argv[1], argv[2]); return 2; }
    const char *db_flag = opt.db, *spec = n_pos ? argv[1] : NULL;
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

typedef struct { const char *db, *data, *labels; int json; } eval_opts;
static const cli_opt eval_opt[] = {
    CLI_OPT_VALUE("--db", NULL, eval_opts, db), CLI_OPT_VALUE("--data", NULL, eval_opts, data),
    CLI_OPT_VALUE("--labels", NULL, eval_opts, labels), CLI_OPT_FLAG("--json", NULL, eval_opts, json),
};
const cli_spec cmd_eval_spec = { "eval", cmd_eval_help, eval_opt, CLI_N(eval_opt) };

int cmd_eval(int argc, char **argv)
{
    eval_opts opt = { 0 };
    int n_pos, rc = cli_parse(&cmd_eval_spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos > 1) { fprintf(stderr, "nnbench eval: one run at a time (got '%s' and '%s')\n", argv[1], argv[2]); return 2; }
    const char *db_flag = opt.db, *spec = n_pos ? argv[1] : NULL, *data = opt.data, *labels = opt.labels;
    int json = opt.json;
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
