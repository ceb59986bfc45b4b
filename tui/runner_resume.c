/* runner_resume.c — continuing a stored run from its last checkpoint into the same run id:
 * the one resume path of `nnbench resume` and the workbench's Resume (runner.h). */
#include "model_load.h"
#include "runner.h"

#include "monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *runner_resume_refusal(const store_run *r, char *buf, size_t cap)
{
    if (store_run_resumable(r->status)) return NULL;
    snprintf(buf, cap, "run %lld is %s; only crashed, interrupted or failed runs are resumed%s", r->id,
             store_status_name(r->status), r->status == STORE_RUN_RUNNING ? " (its process is still alive)" : "");
    return buf;
}

/* The data loaded now against the fingerprint stored with the run: other data is refused
 * (err says what changed and the way out); a run stored before fingerprints gets a warning. */
static int data_refusal(const cli_stored *st, char *err, size_t cap, char *warn, size_t wcap)
{
    const char *now = eng_run_data_fingerprint(st->run);
    if (!st->row.data_fingerprint[0]) {
        if (now[0])
            snprintf(warn, wcap, "run %lld was stored without a fingerprint of its data (by an older nnbench): "
                     "the data cannot be checked against the checkpoint's", st->id);
        return 0;
    }
    char why[512];
    if (!eng_data_fingerprint_diff(st->row.data_fingerprint, now, why, sizeof why)) return 0;
    const char *path = st->ex->variants[0].data.path;
    snprintf(err, cap, "run %lld was trained on other data than %.150s%s now: %.200s; restore the run's data to "
             "resume it, or start a new run on this data (nnbench run)",
             st->id, path[0] ? path : "its generator", path[0] ? " holds" : " gives", why);
    return 1;
}

int runner_resume(const char *db_path, const char *spec, const runner_hooks *h, runner_resumed *r)
{
    memset(r, 0, sizeof *r);
    runner_variant *o = &r->out;
    o->rc = ENG_EINVAL;
    cli_stored st;
    r->code = cli_stored_open(db_path, spec, NULL, 0, 1, &st, o->error, sizeof o->error);
    if (r->code) return r->code;
    r->run_id = st.id;
    r->from_step = st.meta.step;
    r->from_epoch = st.meta.epoch;
    r->total_steps = st.row.total_steps;
    o->cfg = &st.ex->variants[0];
    char why[256];
    r->code = 1;
    if (runner_resume_refusal(&st.row, why, sizeof why)) {
        snprintf(o->error, sizeof o->error, "%s", why);
        cli_stored_free(&st);
        return r->code;
    }
    if (data_refusal(&st, o->error, sizeof o->error, r->data_warning, sizeof r->data_warning)) {
        cli_stored_free(&st);
        return r->code;
    }
    if (eng_run_resume(st.run, st.ckpt, st.ckpt_len)) {
        snprintf(o->error, sizeof o->error, "run %lld, checkpoint at step %ld: %.400s", st.id, st.meta.step, eng_error());
        cli_stored_free(&st);
        return r->code;
    }
    /* tests/e2e/resume_trust.sh lets another process resume and finish the same run here */
    store_test_hold("NNBENCH_TEST_HOLD_RESUME");
    /* The stored config's [monitor] serves the resumed run as it served the run; one that
     * cannot start refuses the resume before anything is written. */
    monitor *mon = NULL;
    if (monitor_open(o->cfg, 0, &mon, o->error, sizeof o->error)) { cli_stored_free(&st); return r->code; }
    cli_store_sink *ss = cli_store_sink_open(db_path, o->error, sizeof o->error);
    if (!ss) { monitor_close(mon, NULL, 0); cli_stored_free(&st); return r->code; }
    if (h->begin && h->begin(h->ud, 0, o->cfg)) {
        o->rc = ENG_ESTOPPED;
        r->code = 130;
        snprintf(o->error, sizeof o->error, "stopped before it resumed");
        cli_store_sink_close(ss, NULL, 0);
        monitor_close(mon, NULL, 0);
        cli_stored_free(&st);
        return r->code;
    }
    cli_store_sink_resume(ss, st.id);
    eng_sink store_sink = cli_store_sink_get(ss), mon_sink = monitor_sink(mon);
    eng_sink_tee tee = { .sinks = { h->sink, &store_sink, &mon_sink }, .n = 3 };
    eng_sink sink = eng_sink_tee_make(&tee);
    if (h->running) h->running(h->ud, st.run);
    o->rc = eng_run_train(st.run, &sink);
    if (h->running) h->running(h->ud, NULL);
    monitor_close(mon, o->monitor_warning, sizeof o->monitor_warning);
    if (cli_store_sink_run_id(ss) != st.id) {
        /* the reopen was refused (another process resumed the run meanwhile): no row of
         * the run was changed and nothing trained */
        snprintf(o->error, sizeof o->error, "%s", cli_store_sink_error(ss));
        o->rc = ENG_ESINK;
        cli_store_sink_close(ss, NULL, 0);
        cli_stored_free(&st);
        return r->code;
    }
    o->created = 1;
    o->res = *eng_run_result_get(st.run);
    if (o->res.error) snprintf(o->error, sizeof o->error, "%s", o->res.error);
    else if (o->rc && o->rc != ENG_ESTOPPED) snprintf(o->error, sizeof o->error, "%s", eng_error());
    o->res.error = NULL; /* points into the run, freed below */
    const char *swarn = cli_store_sink_warning(ss);
    if (swarn) snprintf(o->store_warning, sizeof o->store_warning, "%s", swarn);
    const char *serr = cli_store_sink_error(ss);
    if (serr) snprintf(o->store_error, sizeof o->store_error, "%s", serr);
    char cerr[700];
    int close_failed = cli_store_sink_close(ss, cerr, sizeof cerr);
    if (close_failed && !o->store_error[0]) snprintf(o->store_error, sizeof o->store_error, "%.500s", cerr);
    if (!o->store_error[0]) o->run_id = st.id;
    r->code = o->rc == ENG_OK ? (close_failed ? 1 : 0) : o->rc == ENG_ESTOPPED ? 130 : 1;
    o->cfg = NULL; /* freed with st */
    cli_stored_free(&st);
    return r->code;
}
