/* model_load.h — a stored run rebuilt for the commands on its model (resume, eval,
 * quantize, export-model): its row, config, last checkpoint and an eng_run. Private to tui/. */
#ifndef NNBENCH_TUI_MODEL_LOAD_H
#define NNBENCH_TUI_MODEL_LOAD_H

#include "../engine/engine.h"
#include "../store/store.h"

typedef struct {
    long long id;
    store_run row;
    eng_experiment *ex;          /* one variant: the run's own config */
    eng_run *run;                /* created (data loaded, model built), parameters not loaded */
    store_checkpoint meta;       /* the last checkpoint (need_ckpt) */
    void *ckpt;
    size_t ckpt_len;
    char *sets_buf;
} cli_stored;

/* Loads run `spec` of db_path with its config rebuilt from the stored text and resolved
 * keys, plus extra "section.key=value" overrides; with need_ckpt, its last checkpoint.
 * Prints why on stderr (prefixed "nnbench CMD:") and returns the exit status on failure. (cli.c) */
int cli_stored_load(const char *cmd, const char *db_path, const char *spec, const char *const *extra,
                    size_t n_extra, int need_ckpt, cli_stored *out);
void cli_stored_free(cli_stored *st);
/* The same, printing nothing: the message goes to err (without the "nnbench CMD:" prefix).
 * (runner_stored.c) */
int cli_stored_open(const char *db_path, const char *spec, const char *const *extra, size_t n_extra, int need_ckpt,
                    cli_stored *out, char *err, size_t cap);

/* Why a run cannot be resumed by its status ("run 3 is finished; ..."), or NULL if it can
 * (crashed, interrupted or failed); whether it has a checkpoint is asked separately
 * (runner_resume.c). */
const char *runner_resume_refusal(const store_run *r, char *buf, size_t cap);

/* ---- int8 quantization of a stored run (runner_quant.c): `nnbench quantize`,
 * export-model and the workbench's Quantize share it ---------------------------------------------------------- */

#define CLI_QUANT_BIG_BATCH 128

typedef struct {
    int calibrate;               /* training samples for the activation ranges */
    eng_qscheme scheme;
    const char *kernel;          /* NULL: measure the own kernel and oneDNN, keep the faster */
} cli_qopts;

typedef struct {
    store_quant rec;             /* fp32 and int8 side by side; rec.id set once stored */
    store_quant_op *ops;         /* the int8 path's op profile, by self time (malloc'd) */
    size_t n_ops;
    char own_name[16];           /* the own kernel measured against oneDNN ("" when not) */
    double own_sps[2], dnnl_sps[2]; /* int8 samples/s at batch `big` and 1; NAN if not measured */
    int big;                     /* the large batch (CLI_QUANT_BIG_BATCH or the test set) */
    int n_test;                  /* test samples of the profile pass */
    int stored;                  /* the record is in the database */
    char error[1024];            /* why it failed (code != 0), or why it was not stored */
} cli_quant_result;

/* A stored run loaded and quantized twice (profiled for the accuracy pass, unprofiled for
 * timing), with the kernel chosen: what quantize and export-model share. */
typedef struct {
    cli_stored st;
    eng_qmodel *q, *qt;       /* profiled / timing */
    prof_t *prof;
    eng_model *m128;          /* the fp32 model for batches up to CLI_QUANT_BIG_BATCH */
    double own_sps[2], dnnl_sps[2]; /* int8 samples/s at batch CLI_QUANT_BIG_BATCH and 1; NAN if not measured */
    double fp32_loss, fp32_acc;     /* the fp32 model on the test set */
    char own_name[16];
} cli_quant_job;

/* Loads run spec's last checkpoint and quantizes it (with timing: also times the kernels and
 * keeps the faster). 0, or the exit status with the reason in err; free j either way. */
int cli_quant_job_load(const char *db_path, const char *spec, const cli_qopts *o, int timing, cli_quant_job *j,
                       char *err, size_t cap);
void cli_quant_job_free(cli_quant_job *j);

/* Quantizes run spec's last checkpoint, measures fp32 against int8 and (with store_it)
 * stores the record. progress (may be NULL) hears each stage ("calibrating", ...). Prints
 * nothing. Returns 0, 1 (failed: error says why) or 2 (bad option). Free with
 * cli_quant_result_free. */
int cli_quantize(const char *db_path, const char *spec, const cli_qopts *o, int store_it,
                 void (*progress)(void *ud, const char *stage), void *ud, cli_quant_result *out);
void cli_quant_result_free(cli_quant_result *r);
const char *cli_qscheme_name(eng_qscheme s);

#endif
