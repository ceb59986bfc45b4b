/* cli.c — helpers every command shares (no command of its own): the terminal (colour,
 * UTF-8, width), text made safe to print, opening the store and resolving run specs, a
 * report file, a stored run loaded with its error printed, `show`'s model lines, and
 * this program started again under mpirun (--ranks of run and allreduce). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../store/store.h"
#include "cli.h"
#include "model_load.h"

int cli_use_color(void)
{
    const char *nc = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(nc && *nc);
}

int cli_use_utf8(void)
{
    const char *vars[] = { "LC_ALL", "LC_CTYPE", "LANG" };
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return strcasestr(v, "utf-8") || strcasestr(v, "utf8");
    }
    return 0;
}

int cli_term_width(void)
{
    size_t t = prof_text_columns(stdout);
    if (t >= 40) return (int)t;
    const char *c = getenv("COLUMNS");
    int w = c ? atoi(c) : 0;
    return w >= 40 ? w : 100;
}

const char *cli_text(const char *s)
{
    static char ring[8][2048];
    static int k;
    k = (k + 1) % 8;
    return prof_text_visible(ring[k], sizeof ring[k], s ? s : "");
}

int cli_stored_load(const char *cmd, const char *db_path, const char *spec, const char *const *extra,
                    size_t n_extra, int need_ckpt, cli_stored *out)
{
    char err[1024];
    int code = cli_stored_open(db_path, spec, extra, n_extra, need_ckpt, out, err, sizeof err);
    if (code) fprintf(stderr, "nnbench %s: %s\n", cmd, err);
    return code;
}

/* ---- show ---------------------------------------------------------------------------- */

void cli_show_model(store *s, long long run)
{
    store_checkpoint *ck = NULL;
    size_t n = 0;
    char a[32];
    if (!store_checkpoints_list(s, run, &ck, &n) && n)
        printf("  checkpoints %zu kept, %s each; last at step %ld (epoch %d)\n", n,
               prof_fmt_bytes(a, sizeof a, (double)ck[0].bytes), ck[0].step, ck[0].epoch);
    free(ck);
    store_quant *q = NULL;
    if (store_quants_list(s, run, &q, &n) || !n) { free(q); return; }
    /* scheme and kernel are text any SQLite client may have written: shown visibly */
    printf("  int8 quantizations (newest first): fp32 -> int8\n");
    for (size_t i = 0; i < n; i++) {
        char fb[32], ib[32], fa[32], ia[32], fl[32], il[32];
        printf("    #%lld %s, calibrate %ld, %s: bytes %s -> %s (%.3fx), acc %s -> %s, loss %s -> %s\n",
               q[i].id, cli_text(q[i].scheme), q[i].calibrate, cli_text(q[i].kernel), prof_fmt_bytes(fb, sizeof fb, (double)q[i].fp32_bytes),
               prof_fmt_bytes(ib, sizeof ib, (double)q[i].int8_bytes),
               q[i].fp32_bytes > 0 ? (double)q[i].int8_bytes / (double)q[i].fp32_bytes : NAN,
               prof_fmt_num(fa, sizeof fa, q[i].fp32_acc), prof_fmt_num(ia, sizeof ia, q[i].int8_acc),
               prof_fmt_num(fl, sizeof fl, q[i].fp32_loss), prof_fmt_num(il, sizeof il, q[i].int8_loss));
        printf("       samples/s batch 1: %.0f -> %.0f (%.2fx); batch 128: %.0f -> %.0f (%.2fx)\n",
               q[i].fp32_sps_b1, q[i].int8_sps_b1, q[i].int8_sps_b1 / q[i].fp32_sps_b1,
               q[i].fp32_sps_b128, q[i].int8_sps_b128, q[i].int8_sps_b128 / q[i].fp32_sps_b128);
    }
    free(q);
}

int cli_report_write(const char *db_path, const long long *run_ids, size_t n, const char *path)
{
    store *s = cli_open_store(db_path, 0);
    if (!s) return 1;
    int rc = store_report_write(s, run_ids, n, path);
    if (rc) fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
    else fprintf(stderr, "wrote %s (%zu run%s)\n", path, n, n == 1 ? "" : "s");
    store_close(s);
    return rc ? 1 : 0;
}

/* Opens for reading: writable when allowed (so crashed runs get marked), else read-only. */
store *cli_open_store(const char *db_path, int flags)
{
    store *s;
    if (store_open(cli_db_path(db_path), flags, &s)) {
        fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        return NULL;
    }
    return s;
}

/* Resolves run specs ("12", "#12", "last"); prints the reason on failure. */
long long *cli_resolve_runs(store *s, char **specs, size_t n)
{
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) { fprintf(stderr, "nnbench: out of memory\n"); return NULL; }
    for (size_t i = 0; i < n; i++)
        if (store_run_resolve(s, specs[i], &ids[i])) {
            fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
            free(ids);
            return NULL;
        }
    return ids;
}

/* ---- mpirun on this program ---------------------------------------------------------- */

int cli_mpirun_self(int argc, char **argv, int at)
{
    char *end;
    long n = strtol(argv[at + 1], &end, 10);
    if (*end || n < 1 || n > 1024) {
        fprintf(stderr, "nnbench: --ranks: expected a number of ranks from 1 to 1024, got '%s'\n", argv[at + 1]);
        return 2;
    }
    /* The ranks' shared-memory transport, measured once per machine (dist_transport.c). */
    if (eng_mpi_transport_measure((int)n)) {
        fprintf(stderr, "nnbench: --ranks: %s\n", eng_error());
        return 2;
    }
    /* This binary, resolved now: /proc/self/exe in mpirun's hands would name mpirun. */
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) { fprintf(stderr, "nnbench: --ranks: cannot find this program: %s\n", strerror(errno)); return 1; }
    self[len] = '\0';
    char **av = calloc((size_t)argc + 8, sizeof *av);
    if (!av) { fprintf(stderr, "nnbench: out of memory\n"); return 1; }
    int k = 0;
    av[k++] = "mpirun";
    if (geteuid() == 0) av[k++] = "--allow-run-as-root"; /* Open MPI refuses root without it */
    av[k++] = "--oversubscribe";                          /* N may exceed the cores */
    av[k++] = "-np";
    av[k++] = argv[at + 1];
    av[k++] = self;
    for (int i = 0; i < argc; i++)
        if (i != at && i != at + 1) av[k++] = argv[i];
    av[k] = NULL;
    fflush(NULL);
    execvp("mpirun", av);
    fprintf(stderr, "nnbench: --ranks: cannot start mpirun: %s (install openmpi-bin: make deps)\n", strerror(errno));
    free(av);
    return 1;
}
