/* quant_bench.c — the int8 and checkpoint rows of `make bench` (section 10): trains the
 * Fashion-MNIST MLP and CNN samples and the spirals sample, each writing its checkpoints into
 * a real store, then quantizes each run's final model and measures, in one process:
 *   int8 / fp32 model bytes (MLP, CNN)                 goal <= 0.26
 *   test accuracy drop fp32 - int8, points (MLP, CNN, spirals variants, rings)   goal <= 1.0
 *   int8 / fp32 inference samples/s at batch 128 and 1, 1 thread, MLP   goal >= 2
 *     (interleaved fp32, int8, fp32, int8 ... over the reps)
 *   checkpoint time / training time at the default interval (each epoch), MLP  goal <= 0.02
 * Prints ROW lines (see run.sh) and ENV lines. Asserts nothing about time.
 * usage: quant_bench [--quick] [--reps N] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "../../store/store.h"
#include "bench.h"

static const char *top_dir(void)
{
    const char *t = getenv("NNBENCH_TOP");
    return t && *t ? t : ".";
}

typedef struct {
    store *db;
    long long run;
    void *last;
    size_t len;
} ck_sink;

/* What `nnbench run`'s store sink does with a checkpoint (tui/runner_store.c), nothing more:
 * the final model is read back from the store after training, as eval and quantize do. */
static int on_ck(void *ud, const eng_checkpoint *ck)
{
    ck_sink *s = ud;
    if (store_checkpoint_put(s->db, s->run, ck->step, ck->epoch, ck->data, ck->len)) {
        eng_fail(ENG_ESINK, "%s", store_error());
        return -1;
    }
    return 0;
}

static void row(const char *label, stats st, const char *abs, const char *goal, int met)
{
    printf("ROW\t10\t%s\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\n", label, st.med, st.min, st.max, abs, goal, met ? "met" : "MISSED");
}

static stats one(double v) { stats s = { v, v, v }; return s; }

/* Trains one variant of a sample (overrides applied), quantizes its final model and
 * reports. what: bit 1 bytes row, bit 2 speed rows, bit 4 checkpoint row. */
static int bench_sample(const char *file, const char *variant, const char *const *sets, size_t n_sets, const char *name,
                        int what, int reps, store *db)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/samples/%s", top_dir(), file);
    eng_experiment *ex;
    if (eng_experiment_load(path, sets, n_sets, &ex) || (variant && eng_experiment_select(ex, variant))) {
        fprintf(stderr, "quant_bench: %s\n", eng_error());
        return 1;
    }
    eng_run *run;
    if (eng_run_create(&ex->variants[0], ex->text, NULL, &run)) {
        fprintf(stderr, "quant_bench: %s: %s\n", name, eng_error());
        eng_experiment_free(ex);
        return 1;
    }
    store_run sr;
    store_run_init(&sr);
    snprintf(sr.name, sizeof sr.name, "%s", name);
    ck_sink cs = { .db = db };
    if (store_run_begin(db, &sr, &cs.run)) { fprintf(stderr, "quant_bench: %s\n", store_error()); return 1; }
    eng_sink sink = { .ud = &cs, .checkpoint = on_ck };
    fprintf(stderr, "quant_bench: training %s\n", name);
    if (eng_run_train(run, &sink)) { fprintf(stderr, "quant_bench: %s: %s\n", name, eng_error()); return 1; }
    const eng_run_result *res = eng_run_result_get(run);
    char abs[256];
    if (what & 4) {
        double train = res->wall_s - res->checkpoint_s - 0.0;
        snprintf(abs, sizeof abs, "%ld checkpoints of %.0f KiB: %.3f s of %.1f s training", res->checkpoints,
                 res->checkpoint_bytes / 1024.0, res->checkpoint_s, train);
        double r = res->checkpoint_s / train;
        row("checkpoint write / training time, Fashion MLP, default interval (each epoch)", one(r), abs, "<= 0.02", r <= 0.02);
    }
    eng_model *m = eng_run_model(run);
    store_checkpoint meta;
    if (store_flush(db) || store_checkpoint_get(db, cs.run, &meta, &cs.last, &cs.len)) {
        fprintf(stderr, "quant_bench: %s: %s\n", name, store_error());
        return 1;
    }
    if (eng_run_load_params(run, cs.last, cs.len)) { fprintf(stderr, "quant_bench: %s\n", eng_error()); return 1; }
    const eng_dataset *ds = eng_run_dataset(run);
    eng_qmodel *q;
    double fl, fa, il, ia;
    if (eng_quantize(m, ds, 1000, ENG_QSCHEME_PERCENTILE, 128, NULL, &q) || eng_run_evaluate(run, &fl, &fa) ||
        eng_qmodel_evaluate(q, ds->x_test, ds->y_test, ds->t_test, ds->n_test, &il, &ia)) {
        fprintf(stderr, "quant_bench: %s: %s\n", name, eng_error());
        return 1;
    }
    char label[160];
    double drop = 100.0 * (fa - ia);
    snprintf(label, sizeof label, "test accuracy drop fp32 - int8, points, %s", name);
    snprintf(abs, sizeof abs, "fp32 %.4f, int8 %.4f (percentile, 1000 calibration samples)", fa, ia);
    row(label, one(drop), abs, "<= 1.0", drop <= 1.0);
    if (what & 1) {
        double fb = (double)eng_model_n_params(m) * 4, ib = (double)eng_qmodel_bytes(q);
        snprintf(label, sizeof label, "model bytes int8 / fp32, %s", name);
        snprintf(abs, sizeof abs, "%.1f KiB vs %.1f KiB", ib / 1024, fb / 1024);
        row(label, one(ib / fb), abs, "<= 0.26", ib / fb <= 0.26);
    }
    if (what & 2) {
        eng_inference_threads(1);
        eng_model *m128;
        if (eng_model_clone(m, 128, &m128)) { fprintf(stderr, "quant_bench: %s\n", eng_error()); return 1; }
        /* the int8 side on the kernels `nnbench quantize` chooses, as the fp32 side is on
         * the GEMM backends its shapes chose */
        char own[16];
        double own_sps[2], dnnl_sps[2];
        eng_qmodel_choose_kernels(q, ds, 128, 0.25, own, own_sps, dnnl_sps);
        char chosen[48];
        snprintf(chosen, sizeof chosen, "%s", eng_qmodel_kernel(q));
        for (int b = 0; b < 2; b++) {
            int batch = b ? 1 : 128;
            double r[64], f[64], i8[64];
            for (int k = 0; k < reps && k < 64; k++) {
                f[k] = eng_model_inference_sps(m128, ds, batch, 0.3);
                i8[k] = eng_qmodel_inference_sps(q, ds, batch, 0.3);
                r[k] = i8[k] / f[k];
            }
            stats st = stats_of(r, reps), sf = stats_of(f, reps), si = stats_of(i8, reps);
            snprintf(label, sizeof label, "int8 / fp32 inference samples/s, %s, batch %d, 1T", name, batch);
            snprintf(abs, sizeof abs, "int8 (%s) %.0f vs fp32 %.0f samples/s", chosen, si.med, sf.med);
            row(label, st, abs, ">= 2.0", st.med >= 2.0);
        }
        eng_model_free(m128);
        /* the int8 GEMM paths against each other, interleaved: the own kernel of this CPU,
         * its AVX2 path forced (what an AVX2-only machine runs), oneDNN's int8 matmul */
        static const char *const paths[] = { "avx2", "onednn" };
        for (int b = 0; b < 2; b++) {
            int batch = b ? 1 : 128;
            for (int p = 0; p < 2; p++) {
                if (!strcmp(own, paths[p]) || eng_qmodel_set_kernel(q, paths[p])) continue;
                double r[64], a[64], o[64];
                for (int k = 0; k < reps && k < 64; k++) {
                    eng_qmodel_set_kernel(q, own);
                    o[k] = eng_qmodel_inference_sps(q, ds, batch, 0.3);
                    eng_qmodel_set_kernel(q, paths[p]);
                    a[k] = eng_qmodel_inference_sps(q, ds, batch, 0.3);
                    r[k] = o[k] / a[k];
                }
                stats st = stats_of(r, reps), so = stats_of(o, reps), sa = stats_of(a, reps);
                snprintf(label, sizeof label, "int8 path: own %s / %s%s, %s, batch %d, 1T", own, paths[p],
                         p ? " matmul" : " (forced)", name, batch);
                snprintf(abs, sizeof abs, "%s %.0f vs %s %.0f samples/s (whole int8 forward)", own, so.med, paths[p], sa.med);
                printf("ROW\t10\t%s\t%.4f\t%.4f\t%.4f\t%s\t-\tinfo\n", label, st.med, st.min, st.max, abs);
            }
        }
    }
    eng_qmodel_free(q);
    free(cs.last);
    eng_run_destroy(run);
    eng_experiment_free(ex);
    return 0;
}

int main(int argc, char **argv)
{
    int quick = 0, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    }
    if (reps < 1) reps = 1;
    char dbp[] = "/tmp/nnbench-quant-bench-XXXXXX";
    int fd = mkstemp(dbp);
    if (fd < 0) { perror("quant_bench: mkstemp"); return 1; }
    close(fd);
    unlink(dbp);
    store *db;
    if (store_open(dbp, STORE_OPEN_CREATE, &db)) { fprintf(stderr, "quant_bench: %s\n", store_error()); return 1; }
    /* --quick: a third of the training set, one epoch (the ratios, not the accuracies, are
     * what it is for) */
    const char *qmlp[] = { "data.n=20000", "train.epochs=1" };
    const char *qcnn[] = { "data.n=6000", "train.epochs=1" };
    const char *qsp[] = { "train.epochs=30" };
    int rc = 0;
    rc |= bench_sample("fashion-mnist-mlp.ini", NULL, quick ? qmlp : NULL, quick ? 2 : 0, "Fashion MLP", 1 | 2 | 4, reps, db);
    rc |= bench_sample("fashion-mnist-cnn.ini", NULL, quick ? qcnn : NULL, quick ? 2 : 0, "Fashion CNN", 1, reps, db);
    static const char *const vars[] = { "sgd", "momentum", "adam" };
    for (int v = 0; v < 3; v++) {
        char name[64];
        snprintf(name, sizeof name, "spirals-mlp/%s", vars[v]);
        rc |= bench_sample("spirals-mlp.ini", vars[v], quick ? qsp : NULL, quick ? 1 : 0, name, 0, reps, db);
    }
    rc |= bench_sample("data/rings.ini", NULL, NULL, 0, "rings (CSV)", 0, reps, db);
    store_close(db);
    unlink(dbp);
    char side[1100];
    snprintf(side, sizeof side, "%s-wal", dbp); unlink(side);
    snprintf(side, sizeof side, "%s-shm", dbp); unlink(side);
    return rc;
}
