/* runner.c — the variant loop (runner.h): profiler, run, train through the teed sinks,
 * outcome, free; the same for `nnbench run` and New run. */
#include "runner.h"

#include "monitor.h"

#include <stdio.h>
#include <string.h>

void runner_run(const eng_experiment *ex, cli_store_sink *store, const runner_hooks *h, runner_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    eng_sink store_sink = { 0 };
    if (store) store_sink = cli_store_sink_get(store);
    eng_sink_tee tee = { .sinks = { h->sink, store ? &store_sink : NULL }, .n = 2 };
    eng_sink teed = eng_sink_tee_make(&tee);
    /* Data-parallel ranks (mpirun): the other ranks forward to rank 0; one process: teed. */
    eng_dist_sink_state dist_st;
    eng_sink sink = eng_dist_sink(&teed, &dist_st);
    for (size_t v = 0; v < ex->n_variants && !eng_dist_broken(); v++) {
        const eng_config *cfg = &ex->variants[v];
        if (h->begin && h->begin(h->ud, v, cfg)) break;
        sum->ran++;
        runner_variant out = { .index = v, .cfg = cfg, .rc = ENG_OK };
        prof_t *prof = NULL;
        prof_options po = { .counters = cfg->profile.counters, .quiet = 1 };
        int want = h->profile ? h->profile(h->ud, v, cfg, &po) : cfg->profile.enabled;
        if (want && !(prof = prof_create(&po))) {
            out.rc = ENG_EINVAL;
            out.profiler_failed = 1;
            snprintf(out.error, sizeof out.error, "profiler: %s", prof_error());
            eng_dist_agree(cfg, out.error); /* data-parallel: the others hear why before their first step */
            sum->failed++;
            if (h->done) h->done(h->ud, &out, NULL);
            continue;
        }
        if (prof) snprintf(out.prof_warnings, sizeof out.prof_warnings, "%s", prof_warnings(prof));
        /* Before the data loads and before a run row exists: a port in use or an unwritable
         * directory fails the variant here, with nothing stored. */
        monitor *mon = NULL;
        out.rc = monitor_open(cfg, eng_dist_rank(), &mon, out.error, sizeof out.error);
        eng_run *run = NULL;
        if (!out.rc) out.rc = eng_run_create(cfg, ex->text, prof, &run);
        else out.monitor_failed = 1;
        if (out.rc) {
            monitor_close(mon, NULL, 0);
            if (!out.monitor_failed) snprintf(out.error, sizeof out.error, "%s", eng_error());
            eng_dist_agree(cfg, out.error); /* data-parallel: the others hear why before their first step */
            if (out.rc == ENG_EINVAL) sum->config_errors++;
            else sum->failed++;
            if (h->done) h->done(h->ud, &out, prof);
            prof_destroy(prof); /* no trace: nothing was run */
            continue;
        }
        /* Outside the data-parallel sink: every rank reports to its own endpoint. */
        eng_sink mon_sink = monitor_sink(mon);
        eng_sink_tee outer = { .sinks = { &sink, &mon_sink }, .n = 2 };
        eng_sink all = eng_sink_tee_make(&outer);
        if (h->running) h->running(h->ud, run);
        out.rc = eng_run_train(run, &all);
        /* A failed event-file write is a warning: the run itself trained and is stored. */
        monitor_close(mon, out.monitor_warning, sizeof out.monitor_warning);
        if (h->running) h->running(h->ud, NULL);
        out.created = 1;
        out.res = *eng_run_result_get(run);
        if (out.res.error) snprintf(out.error, sizeof out.error, "%s", out.res.error);
        else if (out.rc && out.rc != ENG_ESTOPPED) snprintf(out.error, sizeof out.error, "%s", eng_error());
        out.res.error = NULL; /* points into the run, freed below */
        /* Stored only once its end record is committed; a store error fails the variant. */
        const char *serr = store ? cli_store_sink_error(store) : NULL;
        const char *swarn = store ? cli_store_sink_warning(store) : NULL;
        if (swarn) snprintf(out.store_warning, sizeof out.store_warning, "%s", swarn);
        if (serr) {
            snprintf(out.store_error, sizeof out.store_error, "%s", serr);
            if (!out.error[0]) snprintf(out.error, sizeof out.error, "not stored: %.490s", serr);
            sum->not_stored++;
        } else if (store) {
            out.run_id = cli_store_sink_run_id(store);
        }
        if (out.rc == ENG_OK && !serr) sum->finished++;
        else if (out.rc == ENG_ESTOPPED) sum->stopped++;
        else sum->failed++;
        eng_run_destroy(run);
        /* The trace is written here, its status checked; prof_destroy then has none to write. */
        if (prof && po.trace_path) {
            out.trace_tried = 1;
            if (prof_trace_write(prof, NULL)) snprintf(out.trace_error, sizeof out.trace_error, "%s", prof_error());
        }
        if (h->done) h->done(h->ud, &out, prof);
        if (prof_destroy(prof) && !out.trace_error[0]) sum->failed++; /* cannot happen: written above */
        if (out.rc == ENG_ESTOPPED) break;
    }
}
