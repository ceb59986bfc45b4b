/* store.c — fuzz target: opening a database file (store/store.c: header check, schema
 * version, migrations, crash marking) and reading what it holds (list, each run with its
 * params, system info, metrics, ops and solver events), as `list` and `show` would. */
#include "fuzz.h"

#include "../../store/store.h"

static void read_run(store *s, long long id)
{
    store_run r;
    if (store_run_get(s, id, &r) == STORE_OK) store_run_clear(&r);
    store_kv *kv;
    size_t n;
    if (store_params_get(s, id, &kv, &n) == STORE_OK) free(kv);
    if (store_sysinfo_get(s, id, &kv, &n) == STORE_OK) free(kv);
    char **keys;
    size_t nk;
    if (store_metric_keys(s, id, &keys, &nk) == STORE_OK) {
        for (size_t k = 0; k < nk && k < 4; k++) {
            store_series sr;
            if (store_metric_get(s, id, keys[k], &sr) == STORE_OK) store_series_free(&sr);
        }
        store_strings_free(keys, nk);
    }
    store_op_row *ops;
    if (store_op_stats_get(s, id, 0, &ops, &n) == STORE_OK) free(ops);
    store_profile p;
    store_profile_get(s, id, &p);
    store_solver_event *ev;
    if (store_solver_events_get(s, id, &ev, &n) == STORE_OK) free(ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("f.db", data, size);
    /* A fresh file each time: drop what SQLite left beside the last one. */
    char side[160];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    store *s = NULL;
    if (store_open(path, 0, &s) != STORE_OK) return 0;
    store_run *runs = NULL;
    size_t n = 0;
    if (store_runs_list(s, NULL, &runs, &n) == STORE_OK) {
        for (size_t i = 0; i < n && i < 8; i++) read_run(s, runs[i].id);
        free(runs);
    }
    store_close(s);
    return 0;
}
