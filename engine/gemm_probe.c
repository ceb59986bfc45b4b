/* gemm_probe.c — verify, then choose: before a GEMM backend serves a shape class, a child
 * process checks it against a double-precision reference on that class and times it; the
 * fastest backend that passed serves the class. The child is this very executable started
 * again (/proc/self/exe) with NNBENCH_GEMM_PROBE set: a constructor below turns it into
 * the probe before main runs, so a backend that crashes or hangs takes down only the probe.
 * Results are cached per machine (CPU model, OpenBLAS build and core, oneDNN version) and
 * thread count in $NNBENCH_CACHE_DIR or ~/.cache/nnbench/gemm-choices; a run only probes
 * the classes its model issues that the cache does not know yet.
 *
 * Test hooks (for forcing every path on any machine): NNBENCH_GEMM_FAIL=BACKEND makes the
 * probe of that backend return a wrong element (it fails its check), BACKEND:crash makes
 * the probe die on a signal; several, comma-separated. */
#include "gemm_internal.h"

#include <cblas.h>
#include <dnnl.h>
#include <lapacke.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const backend_names[ENG_GEMM_NB] = { "openblas", "onednn" };

const char *eng_gemm_backend_name(eng_gemm_backend be)
{
    return (unsigned)be < ENG_GEMM_NB ? backend_names[be] : "?";
}

static int backend_parse(const char *s, size_t len)
{
    for (int i = 0; i < ENG_GEMM_NB; i++)
        if (strlen(backend_names[i]) == len && !strncmp(s, backend_names[i], len)) return i;
    return -1;
}

/* ---- the probe (runs in the child) ------------------------------------------------------ */

/* Deterministic values in [-1, 1). */
static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
}

static float at(const float *X, int t, int ld, int r, int c) { return t ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c]; }

/* Checks one call with padded strides, alpha and beta against double sums at up to 256
 * sampled outputs, and that the padding of C is untouched. The worst relative error
 * (error / sum of |terms|), or +inf when something outside C was written. */
static double verify(eng_gemm_backend be, const eng_gemm_shape *s, int corrupt)
{
    int ar = s->ta ? s->K : s->M, ac = s->ta ? s->M : s->K;
    int br = s->tb ? s->N : s->K, bc = s->tb ? s->K : s->N;
    int lda = ac + 3, ldb = bc + 5, ldc = s->N + 7;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)s->M * ldc;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C),
          *C0 = malloc(nc * sizeof *C0);
    double worst = INFINITY;
    if (!A || !B || !C || !C0) goto out;
    fill(A, na, 1u), fill(B, nb, 2u), fill(C0, nc, 3u);
    memcpy(C, C0, nc * sizeof *C);
    const float alpha = 1.25f, beta = 0.5f;
    gemm_call c = { s->ta, s->tb, s->M, s->N, s->K, alpha, A, lda, B, ldb, beta, C, ldc, ENG_SPLIT_AUTO, NULL };
    if (eng_gemm_run(be, &c)) goto out;
    if (corrupt) C[(size_t)(s->M / 2) * ldc + s->N / 2] += 0.5f;
    worst = 0;
    for (int i = 0; i < s->M; i++)
        for (int j = s->N; j < ldc; j++)
            if (C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j]) { worst = INFINITY; goto out; }
    uint32_t seed = 7u;
    for (int k = 0; k < 256; k++) {
        int i, j;
        if (k < 4) i = k & 1 ? s->M - 1 : 0, j = k & 2 ? s->N - 1 : 0;
        else if (k == 4) i = s->M / 2, j = s->N / 2;
        else {
            seed = seed * 1664525u + 1013904223u;
            i = (int)((seed >> 8) % (uint32_t)s->M);
            seed = seed * 1664525u + 1013904223u;
            j = (int)((seed >> 8) % (uint32_t)s->N);
        }
        double sum = 0, mag = 0;
        for (int q = 0; q < s->K; q++) {
            double t = (double)at(A, s->ta, lda, i, q) * at(B, s->tb, ldb, q, j);
            sum += t;
            mag += fabs(t);
        }
        double c0 = C0[(size_t)i * ldc + j];
        double ref = alpha * sum + beta * c0, den = fabs(alpha) * mag + fabs(beta * c0) + 1e-30;
        double e = fabs(C[(size_t)i * ldc + j] - ref) / den;
        if (!(e <= worst)) worst = e; /* NaN counts as the worst */
    }
out:
    free(A), free(B), free(C), free(C0);
    return worst;
}

/* Times every backend in bes[nb] on s: the best of five rounds of ~4 ms each (one call when
 * a call takes longer). At one thread the rounds are interleaved (A B A B ...: load from
 * elsewhere hits all alike). At more, each backend's rounds run together, oneDNN's first:
 * OpenBLAS's workers spin for a while after each call (2^28 cycles by default), and every
 * oneDNN round after an OpenBLAS one lost a core to them (so they are stopped first, in
 * this disposable child): interleaved, fresh probes on the idle 2-core VM measured oneDNN
 * on the Fashion MLP's 128x256x784 class at 135, 153 and 382 GFLOP/s, and OpenBLAS served it
 * in two of the three (docs/performance.md, "Kernels"). */
/* OpenBLAS 0.3's own (exported, not in its headers): joins its workers, which start again
 * at its next threaded call. Weak: an OpenBLAS without it leaves them spinning. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

/* The order of the blocks: bes[]'s indices with oneDNN's first, the others as they come. */
static void onednn_first(const int *bes, int nb, int *order)
{
    int k = 0;
    for (int i = 0; i < nb; i++)
        if (bes[i] == ENG_GEMM_ONEDNN) order[k++] = i;
    for (int i = 0; i < nb; i++)
        if (bes[i] != ENG_GEMM_ONEDNN) order[k++] = i;
}

static void timeit(const int *bes, int nb, const eng_gemm_shape *s, double *gflops)
{
    int ar = s->ta ? s->K : s->M, ac = s->ta ? s->M : s->K;
    int br = s->tb ? s->N : s->K, bc = s->tb ? s->K : s->N;
    size_t na = (size_t)ar * ac, nbb = (size_t)br * bc, nc = (size_t)s->M * s->N;
    float *A = malloc(na * sizeof *A), *B = malloc(nbb * sizeof *B), *C = calloc(nc, sizeof *C);
    int reps[ENG_GEMM_NB];
    for (int i = 0; i < nb; i++) gflops[i] = 0;
    if (A && B && C) {
        fill(A, na, 4u), fill(B, nbb, 5u);
        gemm_call c = { s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, ac, B, bc, 0.0f, C, s->N, ENG_SPLIT_AUTO, NULL };
        for (int i = 0; i < nb; i++) {
            double t0 = prof_now_s();
            eng_gemm_run((eng_gemm_backend)bes[i], &c);
            double one = prof_now_s() - t0;
            reps[i] = one > 0.004 ? 1 : (int)(0.004 / (one > 1e-7 ? one : 1e-7)) + 1;
            if (reps[i] > 2000) reps[i] = 2000;
        }
        double flops = 2.0 * s->M * (double)s->N * s->K;
        int blocks = eng_gemm_threads() > 1, order[ENG_GEMM_NB];
        onednn_first(bes, nb, order);
        /* the checks and the calls above left OpenBLAS's workers spinning */
        if (blocks && blas_thread_shutdown_) blas_thread_shutdown_();
        for (int k = 0; k < 5 * nb; k++) {
            /* interleaved: round k / nb of backend k % nb; in blocks: oneDNN's five, then
             * the others' in order */
            int i = blocks ? order[k / 5] : k % nb;
            double t0 = prof_now_s();
            for (int r = 0; r < reps[i]; r++) eng_gemm_run((eng_gemm_backend)bes[i], &c);
            double g = flops * reps[i] / (prof_now_s() - t0) / 1e9;
            if (g > gflops[i]) gflops[i] = g;
        }
    }
    free(A), free(B), free(C);
}

/* LAPACK and double BLAS on the core the child runs: a Cholesky factor of an SPD matrix
 * (built with dgemm) must reproduce it. 1 passes. */
static int lapack_ok(void)
{
    enum { N = 300 };
    double *G = malloc(sizeof(double) * N * N), *A = malloc(sizeof(double) * N * N), *L = malloc(sizeof(double) * N * N);
    int ok = 0;
    if (G && A && L) {
        uint32_t seed = 11u;
        for (int i = 0; i < N * N; i++) {
            seed = seed * 1664525u + 1013904223u;
            G[i] = (double)(seed >> 8) / 8388608.0 - 1.0;
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0 / N, G, N, G, N, 0.0, A, N);
        for (int i = 0; i < N; i++) A[i * N + i] += 1.0;
        memcpy(L, A, sizeof(double) * N * N);
        if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', N, L, N) == 0) {
            double worst = 0, norm = 0;
            for (int i = 0; i < N; i++)
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int k = 0; k <= j; k++) s += L[i * N + k] * L[j * N + k];
                    double e = fabs(s - A[i * N + j]);
                    if (!(e <= worst)) worst = e;
                    if (fabs(A[i * N + j]) > norm) norm = fabs(A[i * N + j]);
                }
            ok = worst <= 1e-10 * norm;
        }
    }
    free(G), free(A), free(L);
    return ok;
}

/* NNBENCH_GEMM_FAIL (comma-separated BACKEND or BACKEND:crash) names this backend: 1 return
 * a wrong element, 2 crash; 0 not named. */
static int fail_mode(int be)
{
    const char *fail = getenv("NNBENCH_GEMM_FAIL");
    size_t bl = strlen(backend_names[be]);
    for (const char *p = fail; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len >= bl && !strncmp(p, backend_names[be], bl) && (len == bl || p[bl] == ':'))
            return len == bl + 6 && !strncmp(p + bl, ":crash", 6) ? 2 : 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* One shape: "check NAME" before each backend's check (a crash then names it), a result
 * line per backend, then "done". */
static void probe_shape(const int *bes, int nb, const eng_gemm_shape *s)
{
    int ok[ENG_GEMM_NB], nok = 0;
    double err[ENG_GEMM_NB], g[ENG_GEMM_NB];
    for (int i = 0; i < nb; i++) {
        printf("check %s\n", backend_names[bes[i]]);
        fflush(stdout);
        int mode = fail_mode(bes[i]);
        if (mode == 2) raise(SIGSEGV);
        err[i] = verify((eng_gemm_backend)bes[i], s, mode == 1);
        if (err[i] <= ENG_GEMM_TOL) ok[nok++] = bes[i];
    }
    timeit(ok, nok, s, g);
    for (int i = 0, k = 0; i < nb; i++) {
        int passed = err[i] <= ENG_GEMM_TOL;
        printf("result %s %s %.3f %.3g %s\n", backend_names[bes[i]], isinf(err[i]) ? "refused" : passed ? "ok" : "wrong",
               passed ? g[k++] : 0.0, isinf(err[i]) ? -1.0 : err[i], openblas_get_corename());
    }
    printf("done\n");
    fflush(stdout);
}

/* The child: reads "threads T", "shape ta tb M N K" and "lapack" lines until "end" on
 * stdin; spec names the backends to check, comma-separated. */
static void probe_serve(const char *spec)
{
    int bes[ENG_GEMM_NB], nb = 0;
    for (const char *p = spec; *p && nb < ENG_GEMM_NB;) {
        size_t len = strcspn(p, ",");
        int be = backend_parse(p, len);
        if (be < 0) _exit(3);
        bes[nb++] = be;
        p += len + (p[len] == ',');
    }
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        eng_gemm_shape s;
        int t;
        if (sscanf(line, "threads %d", &t) == 1) {
            openblas_set_num_threads(t);
            eng_gemm_set_threads(t);
        } else if (sscanf(line, "shape %d %d %d %d %d", &s.ta, &s.tb, &s.M, &s.N, &s.K) == 5) {
            probe_shape(bes, nb, &s);
        } else if (!strncmp(line, "lapack", 6)) {
            printf("result openblas %s 0 0 %s\ndone\n", lapack_ok() && !fail_mode(ENG_GEMM_OPENBLAS) ? "ok" : "wrong",
                   openblas_get_corename());
            fflush(stdout);
        } else break;
    }
    _exit(0);
}

__attribute__((constructor)) static void probe_child_main(void)
{
    const char *spec = getenv("NNBENCH_GEMM_PROBE");
    if (spec && *spec) probe_serve(spec);
}

/* ---- the parent: one child per backend ------------------------------------------------- */

static int write_str(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one line within timeout_s; 1 got one, 0 end of file, -1 timed out. */
static int read_line(int fd, char *buf, size_t cap, double timeout_s)
{
    size_t n = 0;
    double end = prof_now_s() + timeout_s;
    while (n + 1 < cap) {
        struct pollfd p = { fd, POLLIN, 0 };
        int left = (int)((end - prof_now_s()) * 1000);
        if (left <= 0) return -1;
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t g = read(fd, buf + n, 1);
        if (g < 0 && errno == EINTR) continue;
        if (g <= 0) { buf[n] = 0; return 0; }
        if (buf[n] == '\n') { buf[n] = 0; return 1; }
        n++;
    }
    buf[n] = 0;
    return 1;
}

extern char **environ;

/* This program's file, resolved when it starts (before anything may change directory):
 * the path it was executed by (AT_EXECFN). Not /proc/self/exe: under valgrind that is the
 * tool, which a re-execution would start natively. */
static char self_exe[4096];

__attribute__((constructor)) static void self_exe_init(void)
{
    const char *fn = (const char *)getauxval(AT_EXECFN);
    if (!fn || !realpath(fn, self_exe)) self_exe[0] = 0;
}

void eng_self_exe(char *buf, size_t cap) { snprintf(buf, cap, "%s", self_exe[0] ? self_exe : "/proc/self/exe"); }

/* The child's environment, built before fork (setenv after a fork in a threaded process
 * can deadlock): ours with NNBENCH_GEMM_PROBE = spec and, when core is given,
 * OPENBLAS_CORETYPE = core. Free with free(). */
static char **child_env(const char *spec, const char *core, char *probe_var, size_t pcap, char *core_var, size_t ccap)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = malloc((n + 3) * sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "NNBENCH_GEMM_PROBE=", 19) && !(core && !strncmp(environ[i], "OPENBLAS_CORETYPE=", 18)))
            env[k++] = environ[i];
    snprintf(probe_var, pcap, "NNBENCH_GEMM_PROBE=%s", spec);
    env[k++] = probe_var;
    if (core) {
        snprintf(core_var, ccap, "OPENBLAS_CORETYPE=%s", core);
        env[k++] = core_var;
    }
    env[k] = NULL;
    return env;
}

/* Starts the probe child for `spec` ("openblas", "onednn,openblas") with OPENBLAS_CORETYPE
 * = core when core is not NULL; *fd is the parent's end of a socket that is the child's
 * stdin and stdout (a socket: send() with MSG_NOSIGNAL never raises SIGPIPE here). */
static pid_t probe_spawn(const char *spec, const char *core, int *fd)
{
    int sv[2];
    char probe_var[96], core_var[96], exe[4096];
    eng_self_exe(exe, sizeof exe);
    char **env = child_env(spec, core, probe_var, sizeof probe_var, core_var, sizeof core_var);
    if (!env) return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) { free(env); return -1; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* only async-signal-safe calls until exec */
        dup2(sv[1], 0), dup2(sv[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        char *argv[] = { (char *)"nnbench-gemm-probe", NULL };
        execve(exe, argv, env);
        _exit(127);
    }
    free(env);
    close(sv[1]);
    if (pid < 0) { close(sv[0]); return -1; }
    *fd = sv[0];
    return pid;
}

/* Reads one shape's answer: fills res[] per backend; 1 done, 0 the child died or hung
 * while checking *cur (a backend index). */
static int read_answer(int from, eng_gemm_result *res, int *cur, int *hung, char *core_out, size_t core_cap)
{
    char line[256];
    for (;;) {
        int r = read_line(from, line, sizeof line, 60.0);
        if (r != 1) { *hung = r < 0; return 0; }
        char name[32], st[16], cname[64] = "";
        double g, err;
        if (sscanf(line, "check %31s", name) == 1) *cur = backend_parse(name, strlen(name));
        else if (sscanf(line, "result %31s %15s %lf %lf %63s", name, st, &g, &err, cname) >= 4) {
            int be = backend_parse(name, strlen(name));
            if (be < 0) continue;
            res[be].status = !strcmp(st, "ok") ? ENG_GEMM_OK : !strcmp(st, "wrong") ? ENG_GEMM_WRONG : ENG_GEMM_REFUSED;
            res[be].gflops = g;
            res[be].max_err = err;
            if (core_out && cname[0]) snprintf(core_out, core_cap, "%s", cname);
        } else if (!strcmp(line, "done")) return 1;
    }
}

static void probe_close(pid_t pid, int fd, int kill_it)
{
    write_str(fd, "end\n");
    if (kill_it) kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    close(fd);
}

int eng_gemm_probe_lapack(const char *core)
{
    int fd, cur = -1, hung = 0;
    pid_t pid = probe_spawn("openblas", core, &fd);
    if (pid < 0) return -1;
    eng_gemm_result res[ENG_GEMM_NB] = { { ENG_GEMM_CRASHED, 0, 0 }, { ENG_GEMM_CRASHED, 0, 0 } };
    int done = !write_str(fd, "lapack\n") && read_answer(fd, res, &cur, &hung, NULL, 0);
    probe_close(pid, fd, !done);
    return done && res[ENG_GEMM_OPENBLAS].status == ENG_GEMM_OK ? 0 : -1;
}

int eng_gemm_probe(const int *want, const char *core, int threads, const eng_gemm_shape *shapes, int n,
                   eng_gemm_result (*res)[ENG_GEMM_NB], char *core_out, size_t core_cap)
{
    int active[ENG_GEMM_NB];
    for (int b = 0; b < ENG_GEMM_NB; b++) active[b] = want[b];
    for (int i = 0; i < n; i++)
        for (int b = 0; b < ENG_GEMM_NB; b++) res[i][b] = (eng_gemm_result){ (eng_gemm_status)-1, 0, 0 };
    int i = 0;
    while (i < n) {
        char spec[64] = "", line[128];
        for (int b = 0; b < ENG_GEMM_NB; b++)
            if (active[b]) snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%s", spec[0] ? "," : "", backend_names[b]);
        if (!spec[0]) break;
        int fd;
        pid_t pid = probe_spawn(spec, core, &fd);
        if (pid < 0) return eng_fail(ENG_EIO, "gemm probe: cannot start a child process: %s", strerror(errno));
        snprintf(line, sizeof line, "threads %d\n", threads);
        int ok = !write_str(fd, line), cur = -1, hung = 0;
        for (; ok && i < n; i++) {
            const eng_gemm_shape *s = &shapes[i];
            snprintf(line, sizeof line, "shape %d %d %d %d %d\n", s->ta, s->tb, s->M, s->N, s->K);
            if (write_str(fd, line) || !read_answer(fd, res[i], &cur, &hung, core_out, core_cap)) { ok = 0; break; }
        }
        probe_close(pid, fd, !ok);
        if (ok) break;
        /* the backend being checked died or hung: it fails this shape and the rest */
        if (cur < 0) return eng_fail(ENG_EIO, "gemm probe: the child process failed before checking anything");
        for (int k = i; k < n; k++) res[k][cur] = (eng_gemm_result){ hung ? ENG_GEMM_HUNG : ENG_GEMM_CRASHED, 0, 0 };
        active[cur] = 0; /* the others check shape i again in a new child */
    }
    return ENG_OK;
}
