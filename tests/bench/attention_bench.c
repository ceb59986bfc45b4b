/* attention_bench.c — attention as the sequence grows (docs/attention.md), and row 10 of
 * `make bench`. One encoder layer (embed:32, posenc, encoder:heads=2:ff=64, meanpool,
 * dense:2) on the markers task (data.source = markers) at n = 256, 512, ... for each
 * attention variant: full, linformer (k = 64), lsh (chunks of 32: buckets = n/32, 2 rounds).
 * Per n: the step time (forward + backward, median of the reps after a warm-up step), the
 * attention time (the attn_scores, attn_softmax, attn_wsum, linformer_proj and lsh_hash
 * scopes' self time, forward and backward, median per step), the attention memory (those scopes' memory column: the buffers they
 * hold) and the run's peak memory; then the log-log exponent of each against n.
 * Batch 1, BLAS 1-threaded (train.threads = 1's setting), the same seed for every size.
 *
 *   attention_bench [--quick] [--max-n N] [--reps R]
 * Default sizes 256..4096 (under 2 minutes idle); --max-n 8192 adds the largest size
 * (full attention then holds 2 x 2 x 8192^2 floats: 1 GiB); --quick stops at 1024.
 * Output: a table on stdout, and "ROW<TAB>10<TAB>..." lines for tests/bench/run.sh.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/core.h"
#include "../../profiler/profiler.h"
#include "bench.h"

#define MAX_SIZES 8
#define LIN_K 64
#define LSH_CHUNK 32
enum { V_FULL, V_LIN, V_LSH, N_VAR };
static const char *const VAR_NAME[N_VAR] = { "full", "linformer k=64", "lsh chunk 32 r2" };

typedef struct {
    double step_s, attn_s, attn_bytes, peak_bytes;
} point;

/* The attention scopes' self time so far (ns) and memory column (bytes). */
static void attention_sums(prof_t *p, double *ns, double *bytes)
{
    prof_row *rows;
    size_t nr;
    *ns = *bytes = 0.0;
    if (prof_rows(p, PROF_BY_SCOPE, &rows, &nr)) return;
    for (size_t i = 0; i < nr; i++)
        if (store_attention_scope(rows[i].name)) {
            *ns += (double)rows[i].self_ns;
            *bytes += (double)rows[i].self_mem;
        }
    free(rows);
}

static int measure(int var, int n, int reps, point *out)
{
    eng_data_config dc = { .source = ENG_DATA_MARKERS, .n = 4, .seq_len = n };
    eng_dataset *ds;
    if (eng_data_load(&dc, 1, &ds)) { fprintf(stderr, "attention_bench: %s\n", eng_error()); return -1; }
    eng_model_config mc = { .n_layers = 5, .loss = ENG_LOSS_SOFTMAX_XENT };
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_SEQ, .seq = ENG_SEQ_EMBED, .units = 32 };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_SEQ, .seq = ENG_SEQ_POSENC };
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_SEQ, .seq = ENG_SEQ_ENCODER, .heads = 2, .ff = 64 };
    mc.layers[3] = (eng_layer_spec){ .kind = ENG_LAYER_SEQ, .seq = ENG_SEQ_MEANPOOL };
    mc.layers[4] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 2 };
    mc.attn = var == V_FULL ? ENG_ATTN_FULL : var == V_LIN ? ENG_ATTN_LINFORMER : ENG_ATTN_LSH;
    mc.attn_k = LIN_K;
    mc.attn_buckets = 2 * ((n / LSH_CHUNK + 1) / 2);
    mc.attn_rounds = 2;
    prof_t *p = prof_create(&(prof_options){ .quiet = 1 });
    if (!p) { fprintf(stderr, "attention_bench: %s\n", prof_error()); eng_data_free(ds); return -1; }
    size_t live0 = prof_mem_live();
    prof_mem_reset_peak();
    eng_model *m;
    m = NULL;
    if (eng_model_build(&mc, ds->in_shape, 2, 1, 1, p, &m) || eng_model_prepare_gemms(m, 1, 1)) {
        fprintf(stderr, "attention_bench: n=%d %s: %s\n", n, VAR_NAME[var], eng_error());
        eng_model_free(m);
        prof_destroy(p);
        eng_data_free(ds);
        return -1;
    }
    /* the first step is a warm-up (first touch of the buffers); each later one is timed
     * whole and, through the profiler's running sums, for its attention scopes alone */
    double t[64], at[64], before = 0.0, after, bytes;
    for (int r = 0; r <= reps && r < 64; r++) {
        double t0 = now_s();
        eng_model_forward(m, ds->x_train + (size_t)(r % ds->n_train) * ds->in_size, 1,
                          ds->y_train + r % ds->n_train, NULL, NULL);
        eng_model_backward(m);
        double t1 = now_s();
        attention_sums(p, &after, &bytes);
        if (r) { t[r - 1] = t1 - t0; at[r - 1] = 1e-9 * (after - before); }
        before = after;
    }
    out->step_s = stats_of(t, reps).med;
    out->attn_s = stats_of(at, reps).med;
    out->attn_bytes = bytes;
    out->peak_bytes = (double)(prof_mem_peak() - live0);
    eng_model_free(m);
    prof_destroy(p);
    eng_data_free(ds);
    return 0;
}

static void row(const char *label, double v, const char *absolute, const char *goal, int met)
{
    printf("ROW\t10\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\n", label, v, v, v, absolute, goal,
           goal[0] == '-' ? "info" : met ? "met" : "MISSED");
}

int main(int argc, char **argv)
{
    int max_n = 4096, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) max_n = 1024;
        else if (!strcmp(argv[i], "--max-n") && i + 1 < argc) max_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else { fprintf(stderr, "usage: attention_bench [--quick] [--max-n N] [--reps R]\n"); return 2; }
    }
    if (max_n < 512 || max_n > 65536 || reps < 1 || reps > 63) {
        fprintf(stderr, "attention_bench: --max-n must be in 512..65536 and --reps in 1..63\n");
        return 2;
    }
    openblas_set_num_threads(1);
    printf("ENV\tattention_threads\t1\n");
    int ns[MAX_SIZES], nn = 0;
    for (int n = 256; n <= max_n && nn < MAX_SIZES; n *= 2) ns[nn++] = n;
    point pt[N_VAR][MAX_SIZES];
    printf("ENV\tattention_sizes\t%d..%d\n", ns[0], ns[nn - 1]);
    printf("%-16s %6s %10s %10s %12s %12s\n", "variant", "n", "step ms", "attn ms", "attn MiB", "peak MiB");
    for (int k = 0; k < nn; k++)
        for (int v = 0; v < N_VAR; v++) {
            fprintf(stderr, "attention_bench: n=%d %s\n", ns[k], VAR_NAME[v]);
            if (measure(v, ns[k], reps, &pt[v][k])) return 1;
            printf("%-16s %6d %10.2f %10.2f %12.2f %12.2f\n", VAR_NAME[v], ns[k], 1e3 * pt[v][k].step_s,
                   1e3 * pt[v][k].attn_s, pt[v][k].attn_bytes / 1048576.0, pt[v][k].peak_bytes / 1048576.0);
        }
    double x[MAX_SIZES], y[N_VAR][4][MAX_SIZES], e[N_VAR][4];
    for (int k = 0; k < nn; k++) x[k] = ns[k];
    printf("\nlog-log exponents over n = %d..%d:\n%-16s %8s %8s %8s %8s\n", ns[0], ns[nn - 1], "variant", "step", "attn",
           "attn mem", "peak");
    for (int v = 0; v < N_VAR; v++) {
        for (int k = 0; k < nn; k++) {
            y[v][0][k] = pt[v][k].step_s; y[v][1][k] = pt[v][k].attn_s;
            y[v][2][k] = pt[v][k].attn_bytes; y[v][3][k] = pt[v][k].peak_bytes;
        }
        for (int c = 0; c < 4; c++) e[v][c] = fit_exponent(x, y[v][c], nn);
        printf("%-16s %8.2f %8.2f %8.2f %8.2f\n", VAR_NAME[v], e[v][0], e[v][1], e[v][2], e[v][3]);
    }
    int L = nn - 1;
    char label[128], abs[160];
    double rt = pt[V_FULL][L].attn_s / pt[V_LIN][L].attn_s, rm = pt[V_FULL][L].attn_bytes / pt[V_LIN][L].attn_bytes;
    snprintf(label, sizeof label, "attention time at n=%d: full / linformer(k=%d)", ns[L], LIN_K);
    snprintf(abs, sizeof abs, "%.1f ms vs %.2f ms per step", 1e3 * pt[V_FULL][L].attn_s, 1e3 * pt[V_LIN][L].attn_s);
    row(label, rt, abs, ">= 10", rt >= 10.0);
    snprintf(label, sizeof label, "attention memory at n=%d: full / linformer(k=%d)", ns[L], LIN_K);
    snprintf(abs, sizeof abs, "%.1f MiB vs %.2f MiB (peak %.0f vs %.0f MiB)", pt[V_FULL][L].attn_bytes / 1048576.0,
             pt[V_LIN][L].attn_bytes / 1048576.0, pt[V_FULL][L].peak_bytes / 1048576.0,
             pt[V_LIN][L].peak_bytes / 1048576.0);
    row(label, rm, abs, ">= 10", rm >= 10.0);
    snprintf(abs, sizeof abs, "attention time, n = %d..%d", ns[0], ns[L]);
    row("fitted exponent: full attention time", e[V_FULL][1], abs, "1.8..2.2", e[V_FULL][1] >= 1.8 && e[V_FULL][1] <= 2.2);
    row("fitted exponent: linformer attention time", e[V_LIN][1], abs, "0.8..1.2", e[V_LIN][1] >= 0.8 && e[V_LIN][1] <= 1.2);
    row("fitted exponent: lsh attention time", e[V_LSH][1], abs, "-", 1);
    return 0;
}
