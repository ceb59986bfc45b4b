/* dist_transport.c — how the ranks on one machine move an all-reduce's bytes. Open MPI 4's
 * shared-memory transport (the vader BTL) sends a message past its eager size by CMA
 * (process_vm_readv: one copy, but a system call and page pinning per fragment) unless
 * told btl_vader_single_copy_mechanism = none: then it copies through its shared buffers
 * (two copies, no system call), in fragments of btl_vader_max_send_size bytes. Which is
 * faster is the machine's: on the 2-core Zen 5 VM of docs/scale.md a 1 MiB all-reduce
 * between 2 ranks took 157 us by CMA and 78 us copied in 256 KiB fragments.
 *
 * So the launcher of `--ranks N` (eng_mpi_transport_measure) runs each candidate once per
 * machine, MPI library and rank count, in its own mpirun job that checks the sums before it
 * times them, and caches the fastest (file mpi-transport); every rank then sets that
 * candidate's variables before MPI_Init (eng_dist_init is here: the transport, then
 * dist.c's MPI start), under `--ranks` or a user's own mpirun. A variable the user set, or
 * NNBENCH_MPI_TRANSPORT naming a candidate, is respected and nothing is measured. No mpi.h
 * here: dist.c starts MPI and runs the probe; this file only calls it. */
#include "dist.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define VAR_COPY "OMPI_MCA_btl_vader_single_copy_mechanism"
#define VAR_SEND "OMPI_MCA_btl_vader_max_send_size"
#define PROBE_BYTES ((size_t)1 << 20)
#define PROBE_REPS 20
#define PROBE_TIMEOUT_S 20

typedef struct {
    const char *name, *copy, *send, *what;
} transport;

static const transport cands[] = {
    { "library", NULL, NULL, "Open MPI's defaults" },
    { "copy", "none", NULL, VAR_COPY "=none" },
    { "copy-256k", "none", "262144", VAR_COPY "=none " VAR_SEND "=262144" },
};
#define N_CANDS ((int)(sizeof cands / sizeof cands[0]))

static char note[512];

const char *eng_mpi_transport_note(void) { return note; }

static const transport *find(const char *name)
{
    for (int i = 0; i < N_CANDS; i++)
        if (!strcmp(cands[i].name, name)) return &cands[i];
    return NULL;
}

/* The variables the user set ("" when none): then nothing is chosen for them. */
static const char *user_vars(char *buf, size_t cap)
{
    const char *c = getenv(VAR_COPY), *s = getenv(VAR_SEND);
    snprintf(buf, cap, "%s%s%s%s%s", c ? VAR_COPY "=" : "", c ? c : "", c && s ? " " : "", s ? VAR_SEND "=" : "",
             s ? s : "");
    return buf;
}

/* Open MPI 4 (whose vader transport the candidates set): 1; else 0 and its name in lib. */
static int open_mpi_4(char *lib, size_t cap)
{
    eng_mpi_library(lib, cap);
    return !strncmp(lib, "Open MPI v4.", 12);
}

/* CPU model | MPI library | "ranks=": what decides the transports and their speed; the
 * rank count follows. */
static void key_prefix(char *buf, size_t cap)
{
    char cpu[200], lib[128];
    if (prof_cpu_model(cpu, sizeof cpu)) snprintf(cpu, sizeof cpu, "unknown");
    eng_mpi_library(lib, sizeof lib);
    snprintf(buf, cap, "%s|%s|ranks=", cpu, lib);
    for (char *p = buf; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == ' ') *p = '_';
}

static void key_of(int ranks, char *buf, size_t cap)
{
    key_prefix(buf, cap);
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%d", ranks);
}

/* A cached value "name us library_us": 1 readable, -1 not (*bad says what). */
static int parse_choice(const char *val, const transport **t, double *us, double *lib_us, char *bad, size_t cap)
{
    char name[32];
    if (sscanf(val, "%31s %lf %lf", name, us, lib_us) != 3 || !(*t = find(name)) || !(*us > 0) || !(*lib_us >= 0)) {
        snprintf(bad, cap, "'%.100s'", val);
        return -1;
    }
    return 1;
}

/* The cached choice: 1 found and readable, 0 none, -1 unreadable (*bad says what). */
static int cache_get(int ranks, const transport **t, double *us, double *lib_us, char *bad, size_t cap)
{
    char key[400], val[200];
    key_of(ranks, key, sizeof key);
    if (!eng_choice_get("mpi-transport", key, val, sizeof val)) return 0;
    return parse_choice(val, t, us, lib_us, bad, cap);
}

/* NNBENCH_MPI_TRANSPORT: 1 and *name when it names a transport, 0 when unset or auto,
 * ENG_EINVAL (message) otherwise. */
static int transport_forced(const char **name)
{
    *name = getenv("NNBENCH_MPI_TRANSPORT");
    if (!*name || !**name || !strcmp(*name, "auto")) return 0;
    if (find(*name)) return 1;
    return eng_fail(ENG_EINVAL,
                    "NNBENCH_MPI_TRANSPORT=%s: not a transport (auto, library, copy or copy-256k: docs/scale.md, "
                    "\"The shared-memory transport\")",
                    *name);
}

static void set_vars(const transport *t)
{
    if (t->copy) setenv(VAR_COPY, t->copy, 1);
    if (t->send) setenv(VAR_SEND, t->send, 1);
}

/* Before MPI_Init on every rank: the variables of the transport chosen for this machine and
 * world size, unless the user set them; ENG_EINVAL for a bad NNBENCH_MPI_TRANSPORT. */
static int transport_apply(int world)
{
    char u[300], bad[160];
    const char *forced;
    int f = transport_forced(&forced);
    if (f < 0) return f;
    if (user_vars(u, sizeof u)[0]) {
        snprintf(note, sizeof note, "as set by %s (respected)", u);
        return ENG_OK;
    }
    if (f) {
        set_vars(find(forced));
        snprintf(note, sizeof note, "%s (%s), as set by NNBENCH_MPI_TRANSPORT", forced, find(forced)->what);
        return ENG_OK;
    }
    const transport *t;
    double us, lib_us;
    char lib[128];
    if (!open_mpi_4(lib, sizeof lib)) {
        snprintf(note, sizeof note, "as %s sets it (nnbench measures Open MPI 4's transports only)", lib);
        return ENG_OK;
    }
    int c = cache_get(world, &t, &us, &lib_us, bad, sizeof bad);
    if (c == 1) {
        set_vars(t);
        char vs[80];
        if (lib_us > 0) snprintf(vs, sizeof vs, "against %.0f us for Open MPI's defaults", lib_us);
        else snprintf(vs, sizeof vs, "Open MPI's defaults failed their check");
        snprintf(note, sizeof note, "%s (%s): the fastest checked, %.0f us a 1 MiB all-reduce of %d ranks (%s)", t->name,
                 t->what, us, world, vs);
    } else {
        snprintf(note, sizeof note, "library (Open MPI's defaults; %s for %d ranks: nnbench run --ranks %d measures them)",
                 c < 0 ? "the cached choice is unreadable" : "not measured", world, world);
    }
    return ENG_OK;
}

#define LISTED_RANKS 64

/* eng_choice_each: the value in force per rank count (the last line of each). */
static void listed(void *ud, const char *rest, const char *val)
{
    char (*vals)[200] = ud, *end;
    long r = strtol(rest, &end, 10);
    if (!*end && r >= 2 && r <= LISTED_RANKS) snprintf(vals[r], sizeof vals[r], "%s", val);
}

void eng_mpi_transport_cached(char *buf, size_t cap)
{
    char lib[128], bad[160], prefix[400], vals[LISTED_RANKS + 1][200] = { { 0 } };
    if (!open_mpi_4(lib, sizeof lib)) {
        snprintf(buf, cap, "%s: its transport is left as the library sets it (nnbench measures Open MPI 4's)", lib);
        return;
    }
    key_prefix(prefix, sizeof prefix);
    eng_choice_each("mpi-transport", prefix, listed, vals);
    int w = snprintf(buf, cap, "%s", lib), found = 0;
    size_t n = w > 0 && (size_t)w < cap ? (size_t)w : 0;
    for (int r = 2; r <= LISTED_RANKS && n < cap; r++) {
        const transport *t;
        double us, lib_us;
        if (!vals[r][0]) continue;
        char vs[64] = "failed their check";
        int c = parse_choice(vals[r], &t, &us, &lib_us, bad, sizeof bad);
        if (c > 0 && lib_us > 0) snprintf(vs, sizeof vs, "%.0f us", lib_us);
        w = c > 0 ? snprintf(buf + n, cap - n, "\n%d ranks: %s (%s), %.0f us a 1 MiB all-reduce, Open MPI's defaults %s", r,
                             t->name, t->what, us, vs)
                  : snprintf(buf + n, cap - n, "\n%d ranks: the cached entry is unreadable (%s): measured again by the next --ranks %d",
                             r, bad, r);
        if (w > 0) n += (size_t)w, found = 1;
    }
    if (!found && n < cap) snprintf(buf + n, cap - n, "\nnot measured yet (nnbench run --ranks N measures it once for N ranks)");
}

int eng_dist_init(int *rank, int *world)
{
    *rank = 0;
    *world = 1;
    int n = eng_dist_job_size();
    if (n <= 1) return ENG_OK;
    int rc = transport_apply(n);
    if (!rc) rc = eng_dist_start(rank, world);
    char t[300];
    size_t len = strlen(note);
    if (!rc && !eng_dist_transport_readback(t, sizeof t))
        snprintf(note + len, sizeof note - len, "; Open MPI runs with %s", t);
    return rc;
}

/* ---- measuring (the launcher of --ranks N, before it starts mpirun) ---------------------- */

/* The child's environment: ours with NNBENCH_MPI_TRANSPORT set to the candidate, built
 * before fork (no setenv after a fork). */
static char **probe_env(const char *name, char *var, size_t cap)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "NNBENCH_MPI_TRANSPORT=", 22)) env[k++] = environ[i];
    snprintf(var, cap, "NNBENCH_MPI_TRANSPORT=%s", name);
    env[k++] = var;
    env[k] = NULL;
    return env;
}

/* Reads the probe job's answer line ("PROBE <seconds>" or "PROBE-FAILED <why>") until the
 * deadline; 1 read, 0 not. */
static int read_answer(int fd, char *buf, size_t cap, double deadline)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double left = deadline - ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
        struct pollfd p = { fd, POLLIN, 0 };
        if (left <= 0) return 0;
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got <= 0) break;
        n += (size_t)got;
        buf[n] = '\0';
        if (strstr(buf, "PROBE") && strchr(strstr(buf, "PROBE"), '\n')) return 1;
    }
    buf[n] = '\0';
    return strstr(buf, "PROBE") != NULL;
}

/* mpirun's path on $PATH (resolved before a fork: execvpe may allocate); 0 found. */
static int mpirun_path(char *buf, size_t cap)
{
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t len = strcspn(p, ":");
        if ((size_t)snprintf(buf, cap, "%.*s/mpirun", (int)len, len ? p : ".") < cap && !access(buf, X_OK)) return 0;
        p += len + (p[len] == ':');
    }
    return -1;
}

/* One candidate's mpirun job: its time in seconds, or 0 with *why set. */
static double probe_one(const char *self, int ranks, const transport *t, char *why, size_t cap)
{
    char var[64], np[16], out[512] = "";
    snprintf(np, sizeof np, "%d", ranks);
    const char *argv[] = { "mpirun", "--oversubscribe", "-np", np, self, "allreduce", "--probe", NULL, NULL };
    if (geteuid() == 0) { /* Open MPI refuses root without it */
        memmove(&argv[2], &argv[1], 6 * sizeof *argv);
        argv[1] = "--allow-run-as-root";
    }
    char **env = probe_env(t->name, var, sizeof var), exe[4096];
    int pfd[2];
    if (!env || mpirun_path(exe, sizeof exe) || pipe(pfd)) {
        free(env);
        snprintf(why, cap, "could not be started (mpirun)");
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* only async-signal-safe calls until exec; a new group, so that a hung job dies whole */
        setpgid(0, 0);
        dup2(pfd[1], 1);
        close(pfd[1]);
        close(pfd[0]);
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) dup2(dn, 2), close(dn);
        execve(exe, (char *const *)argv, env);
        _exit(127);
    }
    free(env);
    close(pfd[1]);
    if (pid < 0) { close(pfd[0]); snprintf(why, cap, "could not be started"); return 0; }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int answered = read_answer(pfd[0], out, sizeof out, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + PROBE_TIMEOUT_S);
    if (!answered) kill(-pid, SIGKILL);
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    double s = 0;
    const char *p = strstr(out, "PROBE");
    if (!answered) snprintf(why, cap, "gave no answer in %d s", PROBE_TIMEOUT_S);
    else if (!strncmp(p, "PROBE-FAILED", 12)) snprintf(why, cap, "failed its check: %.*s", (int)strcspn(p + 13, "\n"), p + 13);
    else if (sscanf(p, "PROBE %lf", &s) != 1 || !(s > 0) || !WIFEXITED(st) || WEXITSTATUS(st))
        snprintf(why, cap, "ended without a time (exit status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)), s = 0;
    return s;
}

int eng_mpi_transport_measure(int ranks)
{
    char u[300], bad[160], lib[128], self[4096], key[400], val[200];
    const char *forced;
    const transport *t;
    double us, lib_us;
    int f = transport_forced(&forced);
    if (f < 0) return f;
    if (ranks < 2 || f || user_vars(u, sizeof u)[0] || !open_mpi_4(lib, sizeof lib)) return ENG_OK;
    int c = cache_get(ranks, &t, &us, &lib_us, bad, sizeof bad);
    char dir[512], mpirun[512];
    if (c == 1 || mpirun_path(mpirun, sizeof mpirun)) return ENG_OK; /* no mpirun: the launcher says so */
    if (eng_cache_dir(dir, sizeof dir)) snprintf(dir, sizeof dir, "(no cache directory)");
    if (c < 0)
        fprintf(stderr, "nnbench: %s/mpi-transport: the entry for %d ranks is unreadable (%s): measured again\n", dir,
                ranks, bad);
    fprintf(stderr, "nnbench: measuring Open MPI's shared-memory transports for %d ranks (once for this machine; "
                    "kept in %s/mpi-transport)\n", ranks, dir);
    eng_self_exe(self, sizeof self);
    const transport *best = NULL;
    double best_s = 0, lib_s = 0;
    for (int i = 0; i < N_CANDS; i++) {
        char why[200];
        double s = probe_one(self, ranks, &cands[i], why, sizeof why);
        if (s <= 0) {
            fprintf(stderr, "nnbench: note: the MPI transport %s %s and was skipped\n", cands[i].name, why);
            continue;
        }
        fprintf(stderr, "nnbench:   %-10s %7.1f us a 1 MiB all-reduce\n", cands[i].name, 1e6 * s);
        if (i == 0) lib_s = s;
        if (!best || s < best_s) best = &cands[i], best_s = s;
    }
    if (!best) return ENG_OK; /* nothing passed: the library's defaults, the note says so */
    key_of(ranks, key, sizeof key);
    snprintf(val, sizeof val, "%s %.1f %.1f", best->name, 1e6 * best_s, 1e6 * lib_s); /* lib_s 0: it failed */
    eng_choice_put("mpi-transport", key, val);
    return ENG_OK;
}

int eng_mpi_transport_probe(double *median_s)
{
    const char *f = getenv("NNBENCH_MPI_TRANSPORT_FAIL"), *name = getenv("NNBENCH_MPI_TRANSPORT");
    int corrupt = f && name && !strcmp(f, name);
    return eng_dist_probe_transport(PROBE_BYTES, PROBE_REPS, corrupt, median_s);
}
