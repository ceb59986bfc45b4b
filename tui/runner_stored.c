/* runner_stored.c — a stored run rebuilt from the database (its row, its config from the
 * stored text and resolved keys, its last checkpoint, an eng_run): the one loading behind
 * resume, eval, quantize, export-model and the workbench's Resume/Quantize. Prints nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"
#include "model_load.h"

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
