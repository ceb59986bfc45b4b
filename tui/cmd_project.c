/* cmd_project.c — planning past one machine. `nnbench allreduce` measures MPI all-reduces on
 * this machine and fits the alpha-beta cost model of a ring all-reduce; `nnbench project RUN`
 * projects a stored run's step time, samples/s and efficiency to N nodes with that model. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../store/store.h"

/* ---- the alpha-beta model and its file ------------------------------------------------ */

typedef struct { double alpha_s, beta_Bps; int world; } ab_fit;

/* Ring all-reduce of `bytes` on n nodes: 2(n-1) steps of latency alpha, each node sending
 * and receiving 2(n-1)/n of the data at beta bytes/s. */
static double ring_allreduce_s(const ab_fit *f, double bytes, int n)
{
    if (n < 2) return 0;
    return 2.0 * (n - 1) * f->alpha_s + 2.0 * (n - 1) / n * bytes / f->beta_Bps;
}

/* Ring all-gather of `bytes` per node (int8 compression: int8 sums do not fit int8). */
static double ring_allgather_s(const ab_fit *f, double bytes, int n)
{
    if (n < 2) return 0;
    return (n - 1) * f->alpha_s + (n - 1) * bytes / f->beta_Bps;
}

/* Beside the sgemm calibration: $XDG_CACHE_HOME/nnbench (else ~/.cache/nnbench). */
static int fit_path(char *buf, size_t cap)
{
    if (prof_calibration_path(buf, cap)) return -1;
    char *slash = strrchr(buf, '/');
    size_t at = slash ? (size_t)(slash + 1 - buf) : 0;
    if (at + sizeof "allreduce-fit" > cap) return -1;
    memcpy(buf + at, "allreduce-fit", sizeof "allreduce-fit");
    return 0;
}

static int fit_load(ab_fit *f, char *path, size_t cap)
{
    if (fit_path(path, cap)) return -1;
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    int ok = fscanf(fp, "alpha_s %lf beta_Bps %lf world %d", &f->alpha_s, &f->beta_Bps, &f->world) == 3 &&
             f->alpha_s >= 0 && f->beta_Bps > 0;
    fclose(fp);
    return ok ? 0 : -1;
}

static int fit_save(const ab_fit *f, char *path, size_t cap)
{
    if (fit_path(path, cap)) return -1;
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    for (char *p = dir + 1; *p; p++)       /* mkdir -p of the directory */
        if (*p == '/') { *p = '\0'; mkdir(dir, 0755); *p = '/'; }
    mkdir(dir, 0755);
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    fprintf(fp, "alpha_s %.9g beta_Bps %.9g world %d\n", f->alpha_s, f->beta_Bps, f->world);
    return fclose(fp) ? -1 : 0;
}

/* ---- nnbench allreduce ------------------------------------------------------------------ */

void cmd_allreduce_help(FILE *f)
{
    fprintf(f, "usage: nnbench allreduce --ranks N [--reps R]   (or: mpirun -np N nnbench allreduce)\n\n"
               "Times in-place MPI_Allreduce (sum of floats) from 1 KB to 4 MB between N ranks on this\n"
               "machine (median of R reps, default 20, the slowest rank's time), fits the ring model\n"
               "t = 2(N-1) alpha + 2(N-1)/N bytes / beta by least squares on relative error, and checks it\n"
               "on a 940584-byte "
               "all-reduce (the gradients of the Fashion MLP). The fit is kept in\n"
               "$XDG_CACHE_HOME/nnbench/allreduce-fit (else ~/.cache/nnbench/allreduce-fit) for\n"
               "nnbench project. Lines FIT and CHECK are for scripts.\n\n"
               "--ranks N first measures Open MPI's shared-memory transports once for this machine\n"
               "(docs/scale.md, \"The shared-memory transport\"). --probe is that measurement's job:\n"
               "one checked 1 MiB all-reduce, timed; rank 0 prints PROBE <seconds> or PROBE-FAILED <why>.\n");
}

typedef struct { const char *ranks, *reps; int probe; } allreduce_opts;
static const cli_opt allreduce_opt[] = {
    CLI_OPT_VALUE("--ranks", NULL, allreduce_opts, ranks), CLI_OPT_VALUE("--reps", NULL, allreduce_opts, reps),
    CLI_OPT_FLAG("--probe", NULL, allreduce_opts, probe),
};
const cli_spec cmd_allreduce_spec = { "allreduce", cmd_allreduce_help, allreduce_opt, CLI_N(allreduce_opt) };

int cmd_allreduce(int argc, char **argv)
{
    allreduce_opts opt = { 0 };
    /* --ranks N starts this command again under mpirun, with argv as given */
    int at = cli_option_at(&cmd_allreduce_spec, argc, argv, "--ranks");
    if (at > 0 && at + 1 < argc) return cli_mpirun_self(argc, argv, at);
    int n_pos, prc = cli_parse(&cmd_allreduce_spec, &opt, argc, argv, &n_pos);
    if (prc >= 0) return prc;
    if (n_pos) return cli_usage_error("allreduce", "unexpected argument '%s'", argv[1]);
    int reps = opt.reps ? atoi(opt.reps) : 20;
    int rank = 0, world = 1;
    if (eng_dist_init(&rank, &world)) { fprintf(stderr, "nnbench allreduce: %s\n", eng_error()); return 1; }
    if (world < 2) {
        fprintf(stderr, "nnbench allreduce: needs 2 or more ranks: nnbench allreduce --ranks 2\n");
        return 2;
    }
    if (opt.probe) {
        double s;
        int prc2 = eng_mpi_transport_probe(&s);
        if (rank == 0) {
            if (prc2) printf("PROBE-FAILED %s\n", eng_error());
            else printf("PROBE %.9g\n", s);
            fflush(stdout);
        }
        eng_dist_finalize(prc2 ? 1 : 0);
        return prc2 ? 1 : 0;
    }
    static const double sizes[] = { 1024, 4096, 16384, 65536, 262144, 1048576, 4194304 };
    enum { NS = sizeof sizes / sizeof sizes[0] };
    double t[NS], check = NAN, check_bytes = 940584;
    int rc = 0;
    for (int i = 0; i < NS && !rc; i++) rc = eng_dist_time_allreduce((size_t)sizes[i], reps, &t[i]);
    if (!rc) rc = eng_dist_time_allreduce((size_t)check_bytes, reps, &check);
    if (rc) {
        if (rank == 0) fprintf(stderr, "nnbench allreduce: %s\n", eng_error());
        eng_dist_finalize(1);
        return 1;
    }
    if (rank == 0) {
        /* t = a + b * x with x = 2(N-1)/N bytes: alpha = a / (2(N-1)), beta = 1 / b. */
        /* Weighted by 1/t^2 (relative error): unweighted, the largest sizes alone would
         * decide alpha, and one delayed rep of them would decide beta. */
        double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, k = 2.0 * (world - 1) / world;
        for (int i = 0; i < NS; i++) {
            double x = k * sizes[i], w = 1.0 / (t[i] * t[i]);
            sw += w; sx += w * x; sy += w * t[i]; sxx += w * x * x; sxy += w * x * t[i];
        }
        double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx), a = (sy - b * sx) / sw;
        ab_fit f = { .alpha_s = a > 0 ? a / (2.0 * (world - 1)) : 0, .beta_Bps = b > 0 ? 1.0 / b : INFINITY, .world = world };
        printf("MPI_Allreduce (in place, float sum) between %d ranks on this machine, median of %d:\n\n", world, reps);
        printf("%12s %12s %14s %14s %12s\n", "bytes", "measured us", "algbw GB/s", "busbw GB/s", "model us");
        for (int i = 0; i < NS; i++)
            printf("%12.0f %12.1f %14.3f %14.3f %12.1f\n", sizes[i], 1e6 * t[i], sizes[i] / t[i] / 1e9,
                   k * sizes[i] / t[i] / 1e9, 1e6 * ring_allreduce_s(&f, sizes[i], world));
        double model = ring_allreduce_s(&f, check_bytes, world);
        printf("\nfitted (least squares, relative error): alpha = %.2f us per step, beta = %.3f GB/s\n", 1e6 * f.alpha_s, f.beta_Bps / 1e9);
        printf("check, %.0f bytes (the Fashion MLP's gradients): measured %.1f us, modelled %.1f us, ratio %.2f\n",
               check_bytes, 1e6 * check, 1e6 * model, check / model);
        char path[600];
        if (fit_save(&f, path, sizeof path)) fprintf(stderr, "nnbench allreduce: cannot save the fit (%s)\n", strerror(errno));
        else printf("fit saved in %s\n", path);
        printf("FIT\t%.9g\t%.9g\t%d\n", f.alpha_s, f.beta_Bps, world);
        printf("CHECK\t%.0f\t%.9g\t%.9g\n", check_bytes, check, model);
    }
    fflush(NULL);
    eng_dist_finalize(0);
    return 0;
}

/* ---- nnbench project ---------------------------------------------------------------------- */

void cmd_project_help(FILE *f)
{
    fprintf(f, "usage: nnbench project RUN --nodes 2,8,64,256 [--link-gbps G --latency-us U] [--db PATH]\n\n"
               "Projects data-parallel training of a stored run to N nodes, each keeping the run's\n"
               "per-rank batch (weak scaling): step = the run's measured compute per step + a ring\n"
               "all-reduce of its gradients, 2(N-1) alpha + 2(N-1)/N bytes / beta; with fp16 (half the\n"
               "bytes), int8 (an all-gather of a quarter of the bytes, as nnbench sends it), and with\n"
               "the all-reduce overlapped with backward (ideal: step = compute - backward +\n"
               "max(backward, all-reduce)). alpha and beta: --latency-us and --link-gbps (the\n"
               "cluster's network), else this machine's fit from nnbench allreduce --ranks 2.\n"
               "Every projected figure is modelled, never measured; the run needs a profile\n"
               "(made by nnbench run --profile).\n");
}

static double op_total(const store_op_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return 1e-9 * (double)rows[i].total_ns;
    return 0;
}

static long long op_calls(const store_op_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return rows[i].calls;
    return 0;
}

/* --nodes 2,8,64: up to 32 node counts into nodes; their number, or -1 (said). */
static int parse_nodes(const char *nodes_s, int nodes[32])
{
    int n_nodes = 0;
    for (const char *p = nodes_s; *p && n_nodes < 32;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1000000 || (*end && *end != ',')) {
            fprintf(stderr, "nnbench project: --nodes: expected a list like 2,8,64,256, got '%s'\n", nodes_s);
            return -1;
        }
        nodes[n_nodes++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n_nodes;
}

typedef struct { const char *nodes, *link_gbps, *latency_us, *db; } project_opts;
static const cli_opt project_opt[] = {
    CLI_OPT_VALUE("--nodes", NULL, project_opts, nodes), CLI_OPT_VALUE("--link-gbps", NULL, project_opts, link_gbps),
    CLI_OPT_VALUE("--latency-us", NULL, project_opts, latency_us), CLI_OPT_VALUE("--db", NULL, project_opts, db),
};
const cli_spec cmd_project_spec = { "project", cmd_project_help, project_opt, CLI_N(project_opt) };

int cmd_project(int argc, char **argv)
{
    project_opts opt = { 0 };
    int n_pos, prc = cli_parse(&cmd_project_spec, &opt, argc, argv, &n_pos);
    if (prc >= 0) return prc;
    if (n_pos > 1) { fprintf(stderr, "nnbench project: one run at a time (got '%s' and '%s')\n", argv[1], argv[2]); return 2; }
    const char *spec = n_pos ? argv[1] : NULL, *nodes_s = opt.nodes, *db_flag = opt.db;
    double gbps = opt.link_gbps ? strtod(opt.link_gbps, NULL) : NAN, lat_us = opt.latency_us ? strtod(opt.latency_us, NULL) : NAN;
    if (!spec || !nodes_s) { cmd_project_help(stderr); return 2; }
    if (isnan(gbps) != isnan(lat_us) || (!isnan(gbps) && !(gbps > 0 && lat_us >= 0))) {
        fprintf(stderr, "nnbench project: --link-gbps G (> 0) and --latency-us U (>= 0) go together\n");
        return 2;
    }
    int nodes[32], n_nodes = parse_nodes(nodes_s, nodes);
    if (n_nodes < 0) return 2;
    ab_fit machine = { 0 }, net;
    char fpath[600];
    int have_fit = fit_load(&machine, fpath, sizeof fpath) == 0;
    if (!isnan(gbps)) net = (ab_fit){ .alpha_s = lat_us * 1e-6, .beta_Bps = gbps * 1e9 / 8 };
    else if (have_fit) net = machine;
    else {
        fprintf(stderr, "nnbench project: no network given and no fit of this machine: give --link-gbps G "
                        "--latency-us U, or measure with nnbench allreduce --ranks 2\n");
        return 2;
    }

    store *db = NULL;
    const char *path = cli_db_path(db_flag);
    if (store_open(path, STORE_OPEN_READONLY, &db)) { fprintf(stderr, "nnbench: %s\n", store_error()); return 1; }
    long long id;
    store_run run;
    store_run_init(&run);
    store_kv *kv = NULL;
    size_t nkv = 0;
    store_op_row *rows = NULL;
    size_t nr = 0;
    int code = 1;
    if (store_run_resolve(db, spec, &id) || store_run_get(db, id, &run) || store_params_get(db, id, &kv, &nkv) ||
        store_op_stats_get(db, id, -1, &rows, &nr)) {
        fprintf(stderr, "nnbench project: %s\n", store_error());
        goto out;
    }
    long long steps = op_calls(rows, nr, "step");
    if (steps <= 0) {
        fprintf(stderr, "nnbench project: run %lld has no profile (step times); run it with --profile\n", id);
        code = 2;
        goto out;
    }
    const char *ws = store_kv_find(kv, nkv, "dist.world_size"), *bs = store_kv_find(kv, nkv, "train.batch");
    int world = ws ? atoi(ws) : 1, batch = bs ? atoi(bs) : 0;
    if (batch <= 0) batch = run.n_train;
    double step = op_total(rows, nr, "step") / steps;
    /* The transfer (allreduce), and the waits: for the slower rank (allreduce.wait, i.e.
     * load imbalance) and, in runs stored before the loss rode with the gradients, the
     * separate per-step loss agreement (allreduce.loss), which includes such waits too. */
    double ar = op_total(rows, nr, "allreduce") / steps;
    double waits = (op_total(rows, nr, "allreduce.wait") + op_total(rows, nr, "allreduce.loss")) / steps;
    double bwd = op_total(rows, nr, "backward") / steps;
    /* Compute per step and the load imbalance across ranks: prof_balance_get, the one
     * definition (`show`, the Profile tab and the reports use it too). */
    prof_balance bal;
    prof_balance_get(rows, nr, &bal);
    double compute = bal.ranks ? bal.compute_s[0] : step - ar - waits;
    double per_rank = (double)batch / world, bytes = 4.0 * (double)run.n_params;

    printf("Projection of run %lld (%s/%s): %d rank%s, batch %d (%.0f rows per rank), %lld parameters = %.0f bytes of gradients\n",
           id, run.name, run.variant[0] ? run.variant : "-", world, world == 1 ? "" : "s", batch, per_rank,
           run.n_params, bytes);
    printf("measured in the run, per step (rank 0): compute %.3f ms (of which backward %.3f ms), all-reduce %.3f ms,\n"
           "waits for other ranks %.3f ms\n", 1e3 * compute, 1e3 * bwd, 1e3 * ar, 1e3 * waits);
    char bl[256];
    if (prof_balance_line(&bal, bl, sizeof bl)[0]) printf("%s\n", bl);
    printf("network: alpha %.2f us, beta %.3f GB/s (%s)\n", 1e6 * net.alpha_s, net.beta_Bps / 1e9,
           isnan(gbps) ? "this machine's fit from nnbench allreduce" : "--link-gbps / --latency-us");
    printf("\nMODELLED (weak scaling: every node keeps %.0f rows per step; nothing below was measured)\n\n", per_rank);
    printf("| nodes | all-reduce ms | step ms | samples/s | efficiency | step ms, overlapped | efficiency, overlapped | step ms, fp16 | step ms, int8 (all-gather) |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_nodes; i++) {
        int n = nodes[i];
        double c = ring_allreduce_s(&net, bytes, n);
        double t = compute + c;
        double to = compute - bwd + (bwd > c ? bwd : c);
        double t16 = compute + ring_allreduce_s(&net, bytes / 2, n);
        double t8 = compute + ring_allgather_s(&net, bytes / 4 + 8, n);
        printf("| %d | %.3f | %.3f | %.0f | %.1f%% | %.3f | %.1f%% | %.3f | %.3f |\n", n, 1e3 * c, 1e3 * t,
               n * per_rank / t, 100 * compute / t, 1e3 * to, 100 * compute / to, 1e3 * t16, 1e3 * t8);
    }
    printf("\nefficiency = compute / step (the share of a step that trains); fp16/int8 columns leave out\n"
           "the conversion's own time, which the run's 'compress' op shows when it was measured.\n");
    if (have_fit) {
        printf("\nModel check on this machine (fit: alpha %.2f us, beta %.3f GB/s, from %d ranks):\n",
               1e6 * machine.alpha_s, machine.beta_Bps / 1e9, machine.world);
        if (world >= 2) {
            double m = ring_allreduce_s(&machine, bytes, world);
            printf("  all-reduce per step, %d ranks: modelled %.3f ms, measured %.3f ms (ratio %.2f)\n",
                   world, 1e3 * m, 1e3 * ar, ar / m);
            printf("  step: modelled %.3f ms, measured %.3f ms\n", 1e3 * (compute + m), 1e3 * step);
        } else {
            double m = ring_allreduce_s(&machine, bytes, 2);
            printf("  this run is 1 rank: 2 ranks here, each with half the batch, would take (modelled, compute halved)\n"
                   "  %.3f ms per step (all-reduce %.3f ms) vs %.3f ms measured on 1 rank; compare with a 2-rank run\n",
                   1e3 * (compute / 2 + m), 1e3 * m, 1e3 * step);
        }
    }
    code = 0;
out:
    free(rows);
    free(kv);
    store_run_clear(&run);
    store_close(db);
    return code;
}
