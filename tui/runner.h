/* runner.h — the one variant loop of nnbench, shared by `nnbench run` and the workbench's
 * New run: for each variant of an experiment, make its profiler, create the run, train it
 * through the caller's sink teed with the store sink, hand the outcome back, free it all.
 * A variant that fails or diverges does not stop the batch; the caller's begin hook does.
 * Nothing here prints: outcomes and messages go to the hooks. (Private to tui/.)
 */
#ifndef NNBENCH_TUI_RUNNER_H
#define NNBENCH_TUI_RUNNER_H

#include <stddef.h>

#include "cli.h"

/* What one variant came to. */
typedef struct {
    size_t index;            /* in ex->variants */
    const eng_config *cfg;
    int rc;                  /* ENG_OK, or why it ended (eng_run_create's or eng_run_train's) */
    int created;             /* the run was created and trained: res holds its result */
    int profiler_failed;     /* prof_create failed (error says why); nothing ran */
    eng_run_result res;      /* res.error is NULL: the message is in error */
    char error[512];         /* "" when finished */
    long long run_id;        /* the stored run, 0 without a store or when it was not stored */
    char store_error[512];   /* why the run was not stored completely ("" when it was) */
    char store_warning[512]; /* a write that failed and was retried ("" when none) */
    char prof_warnings[1200];/* prof_warnings() of the variant's profiler ("" when none) */
    int trace_tried;         /* the profiler had a trace path: the runner wrote it */
    char trace_error[512];   /* why writing it failed ("" when it was written) */
    int monitor_failed;      /* [monitor] could not start (error says why); nothing ran */
    char monitor_warning[512];/* a live TensorBoard write that failed ("" when none) */
} runner_variant;

typedef struct {
    void *ud;
    /* Before variant v: non-zero ends the batch there (a stop was asked for). May be NULL. */
    int (*begin)(void *ud, size_t v, const eng_config *cfg);
    /* The profiler of variant v: fill po and return 1 to profile, 0 not to. NULL: profile
     * when cfg->profile.enabled, counters from the config, quiet. */
    int (*profile)(void *ud, size_t v, const eng_config *cfg, prof_options *po);
    /* The run is created and about to train (to ask it to stop from elsewhere); ended
     * (run NULL) once it has trained. May be NULL. */
    void (*running)(void *ud, eng_run *run);
    /* The variant is over (its trace, if any, written); prof (NULL when not profiled) can
     * still be read. May be NULL. */
    void (*done)(void *ud, const runner_variant *out, prof_t *prof);
    const eng_sink *sink;    /* the caller's own sink (progress lines, the screen); may be NULL */
} runner_hooks;

/* The counts of a batch. */
typedef struct {
    size_t ran;              /* variants begun */
    size_t finished, failed, config_errors, stopped;
    size_t not_stored;       /* trained but not stored completely (counted in failed) */
} runner_summary;

/* Runs the variants of ex in order, storing each in store (NULL: not stored). */
void runner_run(const eng_experiment *ex, cli_store_sink *store, const runner_hooks *h, runner_summary *sum);

/* ---- resume (runner_resume.c): `nnbench resume` and the workbench's Resume ------------- */

typedef struct {
    long long run_id;        /* the run continued (same id) */
    long from_step, total_steps;
    int from_epoch;
    int code;                /* exit status: 0 finished; 1 failed or nothing resumed (out.error
                                says why); 2 its config no longer loads; 130 stopped */
    runner_variant out;      /* rc, created, res, error, store_error, store_warning as a variant's */
    char data_warning[300];  /* the run predates data fingerprints: its data was not checked ("" else) */
} runner_resumed;

/* Continues run spec (an id or name, as `nnbench resume RUN`) of db_path from its last
 * checkpoint into the same run id, through h->sink teed with the store sink. Refuses (code 1)
 * when the data loaded now is not the data the run was stored with (its fingerprint). Hooks: begin
 * (v 0; the checkpoint is loaded and r's from_* are set; non-zero: not resumed), running
 * (to ask it to stop); profile and done are not used. Prints nothing. Returns r->code. */
int runner_resume(const char *db_path, const char *spec, const runner_hooks *h, runner_resumed *r);

#endif
