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
 * Prints why on stderr (prefixed "nnbench CMD:") and returns the exit status on failure. */
int cli_stored_load(const char *cmd, const char *db_path, const char *spec, const char *const *extra,
                    size_t n_extra, int need_ckpt, cli_stored *out);
void cli_stored_free(cli_stored *st);

#endif
