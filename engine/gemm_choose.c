/* gemm_choose.c — which backend serves which GEMM shape class on this machine: the cache
 * of probe results (one line per machine key, thread count, class and backend), the choice
 * a run makes from it (eng_gemm_prepare), and the account a run stores of what ran.
 *
 * The cache file ($NNBENCH_CACHE_DIR, else ~/.cache/nnbench, file gemm-choices) holds
 * tab-separated lines: "v1 KEY THREADS CLASS BACKEND STATUS GFLOPS MAXERR M N K". KEY names
 * the CPU model, the OpenBLAS build and core and the oneDNN version, so a library upgrade
 * or another core measures again. A line that does not parse is reported and the file is
 * rewritten without it. */
#include "gemm_internal.h"

#include <cblas.h>
#include <dnnl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int threads, cls, be;
    eng_gemm_result r;
    int M, N, K;
} cache_ent;

#define MAX_CLASSES 1024
typedef struct {
    int cls;
    eng_gemm_shape s;
    int be;                           /* the backend serving it */
    double flops;                     /* of all the calls of this class the model makes, weighted */
    eng_gemm_result r[ENG_GEMM_NB];   /* status -1: not measured */
} choice;

static struct {
    cache_ent *e;
    int n, cap;
    char key[600];
    char bad[300];                    /* the last unreadable cache line, said once */
} cache;

static struct {
    int n, threads;
    eng_gemm_policy pol;
    choice c[MAX_CLASSES];
    char notes[600];
} chosen;

static const char *const status_names[] = { "ok", "wrong", "refused", "crashed", "hung" };

static void machine_key(char *buf, size_t cap)
{
    char cpu[200];
    if (prof_cpu_model(cpu, sizeof cpu)) snprintf(cpu, sizeof cpu, "unknown");
    const dnnl_version_t *v = dnnl_version();
    const char *isa = getenv("DNNL_MAX_CPU_ISA"); /* oneDNN's JIT held to an older ISA is another kernel */
    snprintf(buf, cap, "%s|%s|%s|onednn-%d.%d.%d%s%.40s", cpu, openblas_get_config(), openblas_get_corename(), v->major,
             v->minor, v->patch, isa && *isa ? "-isa-" : "", isa && *isa ? isa : "");
    for (char *p = buf; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == ' ') *p = '_';
}


static int cache_path(char *buf, size_t cap)
{
    char dir[512];
    int rc = eng_cache_dir(dir, sizeof dir);
    if (rc) return rc;
    if ((size_t)snprintf(buf, cap, "%s/gemm-choices", dir) >= cap) return eng_fail(ENG_EINVAL, "cache path too long");
    return ENG_OK;
}

static int cache_add(const cache_ent *e)
{
    for (int i = 0; i < cache.n; i++) {
        cache_ent *o = &cache.e[i];
        if (o->threads == e->threads && o->cls == e->cls && o->be == e->be) { *o = *e; return 0; }
    }
    if (cache.n == cache.cap) {
        int cap = cache.cap ? 2 * cache.cap : 64;
        cache_ent *ne = realloc(cache.e, (size_t)cap * sizeof *ne);
        if (!ne) return -1;
        cache.e = ne, cache.cap = cap;
    }
    cache.e[cache.n++] = *e;
    return 0;
}

/* Loads this machine's lines; other machines' lines are kept in `others` for the rewrite. */
static void cache_load(const char *path, char **others, size_t *others_len)
{
    cache.n = 0;
    cache.bad[0] = 0;
    machine_key(cache.key, sizeof cache.key);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024], key[600];
    size_t cap = 0;
    for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
        cache_ent e;
        int st;
        if (sscanf(line, "v1\t%599[^\t]\t%d\t%d\t%d\t%d\t%lf\t%lf\t%d\t%d\t%d", key, &e.threads, &e.cls, &e.be, &st,
                   &e.r.gflops, &e.r.max_err, &e.M, &e.N, &e.K) != 10 ||
            e.cls < 0 || e.cls >= ENG_GEMM_CLASSES || e.be < 0 || e.be >= ENG_GEMM_NB || st < 0 || st > ENG_GEMM_HUNG ||
            e.threads < 1 || e.M < 1 || e.N < 1 || e.K < 1) {
            snprintf(cache.bad, sizeof cache.bad, "%s:%d: unreadable line dropped (measured again)", path, lineno);
            continue;
        }
        e.r.status = (eng_gemm_status)st;
        if (!strcmp(key, cache.key)) { cache_add(&e); continue; }
        size_t ll = strlen(line);
        if (*others_len + ll + 1 > cap) {
            cap = (cap + ll + 1) * 2;
            char *no = realloc(*others, cap);
            if (!no) break;
            *others = no;
        }
        memcpy(*others + *others_len, line, ll + 1);
        *others_len += ll;
    }
    fclose(f);
}

/* Rewrites the file: other machines' lines, then ours (temp file + rename). */
static void cache_save(const char *path, const char *others, size_t others_len)
{
    char dir[512], tmp[600];
    if (eng_cache_dir(dir, sizeof dir)) return;
    eng_mkdirs(dir);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    if (others_len) fwrite(others, 1, others_len, f);
    for (int i = 0; i < cache.n; i++) {
        const cache_ent *e = &cache.e[i];
        fprintf(f, "v1\t%s\t%d\t%d\t%d\t%d\t%.3f\t%.3g\t%d\t%d\t%d\n", cache.key, e->threads, e->cls, e->be,
                (int)e->r.status, e->r.gflops, e->r.max_err, e->M, e->N, e->K);
    }
    if (fclose(f) || rename(tmp, path)) unlink(tmp);
}

static const cache_ent *cache_find(int threads, int cls, int be)
{
    for (int i = 0; i < cache.n; i++)
        if (cache.e[i].threads == threads && cache.e[i].cls == cls && cache.e[i].be == be) return &cache.e[i];
    return NULL;
}

/* Distinct classes of shapes[n] into chosen.c (the first shape seen stands for its class). */
static int collect(const eng_gemm_shape *shapes, int n)
{
    chosen.n = 0;
    for (int i = 0; i < n; i++) {
        const eng_gemm_shape *s = &shapes[i];
        if (s->M < 1 || s->N < 1 || s->K < 1) continue;
        int cls = eng_gemm_class(s->ta, s->tb, s->M, s->N, s->K), j;
        double f = 2.0 * s->M * (double)s->N * s->K * (s->calls > 0 ? s->calls : 1);
        for (j = 0; j < chosen.n && chosen.c[j].cls != cls; j++) {}
        if (j < chosen.n) { chosen.c[j].flops += f; continue; }
        if (chosen.n == MAX_CLASSES) return eng_fail(ENG_EINVAL, "gemm: more than %d shape classes", MAX_CLASSES);
        choice *c = &chosen.c[chosen.n++];
        c->cls = cls, c->s = *s, c->be = -1, c->flops = f;
        for (int b = 0; b < ENG_GEMM_NB; b++) c->r[b].status = (eng_gemm_status)-1;
    }
    return ENG_OK;
}

/* Probes every (class, backend) among want[] that the cache lacks, in one child. 1 when
 * something was measured, 0 nothing to do, < 0 an error. */
static int measure_missing(int threads, const int *want)
{
    eng_gemm_shape todo[MAX_CLASSES];
    int idx[MAX_CLASSES], n = 0, need[ENG_GEMM_NB] = { 0 };
    for (int i = 0; i < chosen.n; i++) {
        int missing = 0;
        for (int b = 0; b < ENG_GEMM_NB; b++) {
            const cache_ent *e = want[b] ? cache_find(threads, chosen.c[i].cls, b) : NULL;
            if (e) chosen.c[i].r[b] = e->r;
            else if (want[b]) missing = need[b] = 1;
        }
        if (missing) todo[n] = chosen.c[i].s, idx[n++] = i;
    }
    if (!n) return 0;
    static eng_gemm_result res[MAX_CLASSES][ENG_GEMM_NB];
    int rc = eng_gemm_probe(need, NULL, threads, todo, n, res, NULL, 0);
    if (rc) return rc;
    for (int k = 0; k < n; k++) {
        choice *c = &chosen.c[idx[k]];
        for (int b = 0; b < ENG_GEMM_NB; b++) {
            if ((int)res[k][b].status < 0) continue;
            c->r[b] = res[k][b];
            cache_ent e = { threads, c->cls, b, res[k][b], c->s.M, c->s.N, c->s.K };
            cache_add(&e);
        }
    }
    return 1;
}

static void shape_text(const eng_gemm_shape *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%c%c %dx%dx%d", s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K);
}

/* With several threads one backend serves the whole model: OpenBLAS's workers spin for a
 * while after each call, and would compete with the oneDNN pool's between mixed calls. It
 * is the backend that passed on every class with the least estimated time; -1 none. */
static int whole_model_backend(void)
{
    int best = -1;
    double best_t = 0;
    for (int b = 0; b < ENG_GEMM_NB; b++) {
        double t = 0;
        int i;
        for (i = 0; i < chosen.n && chosen.c[i].r[b].status == ENG_GEMM_OK; i++)
            t += chosen.c[i].flops / (chosen.c[i].r[b].gflops * 1e9);
        if (i == chosen.n && (best < 0 || t < best_t)) best = b, best_t = t;
    }
    return best;
}

/* Picks per class: under auto the fastest backend that passed (with several threads, the
 * fastest for the whole model); under a forced policy that backend if it passed, else the
 * fastest other. */
static int pick(eng_gemm_policy pol, int threads)
{
    int forced = pol == ENG_GEMM_POLICY_OPENBLAS ? ENG_GEMM_OPENBLAS : pol == ENG_GEMM_POLICY_ONEDNN ? ENG_GEMM_ONEDNN : -1;
    if (forced < 0 && threads > 1) forced = whole_model_backend();
    int failed[ENG_GEMM_NB] = { 0 }, fail_st[ENG_GEMM_NB] = { 0 };
    chosen.notes[0] = 0;
    for (int i = 0; i < chosen.n; i++) {
        choice *c = &chosen.c[i];
        int best = -1;
        for (int b = 0; b < ENG_GEMM_NB; b++) {
            if ((int)c->r[b].status < 0) continue;
            if (c->r[b].status != ENG_GEMM_OK) { failed[b]++, fail_st[b] = c->r[b].status; continue; }
            if (best < 0 || c->r[b].gflops > c->r[best].gflops) best = b;
        }
        if (forced >= 0 && c->r[forced].status == ENG_GEMM_OK) best = forced;
        if (best < 0) {
            char sh[64];
            shape_text(&c->s, sh, sizeof sh);
            return eng_fail(ENG_EINVAL, "gemm: no backend passed its check on %s at %d threads (openblas %s, onednn %s); "
                            "see nnbench sysinfo", sh, threads, status_names[c->r[0].status < 0 ? 0 : c->r[0].status],
                            status_names[c->r[1].status < 0 ? 0 : c->r[1].status]);
        }
        c->be = best;
        eng_gemm_class_set(c->cls, (eng_gemm_backend)best);
    }
    size_t len = 0;
    for (int b = 0; b < ENG_GEMM_NB; b++)
        if (failed[b] && len < sizeof chosen.notes)
            len += (size_t)snprintf(chosen.notes + len, sizeof chosen.notes - len,
                                    "%s%s failed its check on %d of %d shape classes (%s) and was skipped there",
                                    len ? "; " : "", eng_gemm_backend_name((eng_gemm_backend)b), failed[b], chosen.n, status_names[fail_st[b]]);
    if (cache.bad[0] && len < sizeof chosen.notes)
        snprintf(chosen.notes + len, sizeof chosen.notes - len, "%s%s", len ? "; " : "", cache.bad);
    return ENG_OK;
}

/* oneDNN compiles a kernel the first time a process meets a shape (tens of milliseconds
 * for a small model's shapes): one call per class it serves, here, keeps that out of the
 * first training steps and their profile. */
static void warm_up(void)
{
    size_t need = 0;
    for (int i = 0; i < chosen.n; i++) {
        const eng_gemm_shape *s = &chosen.c[i].s;
        size_t m = (size_t)s->M * s->K + (size_t)s->K * s->N + (size_t)s->M * s->N;
        if (chosen.c[i].be == ENG_GEMM_ONEDNN && m > need) need = m;
    }
    float *buf = need ? calloc(need, sizeof *buf) : NULL;
    if (!buf) return;
    for (int i = 0; i < chosen.n; i++) {
        const eng_gemm_shape *s = &chosen.c[i].s;
        if (chosen.c[i].be != ENG_GEMM_ONEDNN) continue;
        const float *A = buf, *B = buf + (size_t)s->M * s->K;
        float *C = buf + (size_t)s->M * s->K + (size_t)s->K * s->N;
        gemm_call c = { s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, s->ta ? s->M : s->K, B, s->tb ? s->K : s->N, 0.0f, C, s->N, ENG_SPLIT_AUTO, NULL };
        eng_gemm_run(ENG_GEMM_ONEDNN, &c);
    }
    free(buf);
}

static unsigned generation; /* eng_gemm_generation */

unsigned eng_gemm_generation(void) { return generation; }

int eng_gemm_prepare(eng_gemm_policy pol, int threads, const eng_gemm_shape *shapes, int n)
{
    generation++;
    if (threads < 1) threads = 1;
    eng_gemm_classes_clear();
    eng_gemm_set_threads(threads);
    eng_pool_set_threads(1);
    chosen.threads = threads;
    chosen.pol = pol;
    int rc = collect(shapes, n);
    if (rc) return rc;
    char path[600];
    char *others = NULL;
    size_t others_len = 0;
    int have_path = cache_path(path, sizeof path) == ENG_OK;
    if (have_path) cache_load(path, &others, &others_len);
    else machine_key(cache.key, sizeof cache.key), cache.n = 0;
    int want[ENG_GEMM_NB];
    for (int b = 0; b < ENG_GEMM_NB; b++) want[b] = 1; /* forced policies still need a fallback measured */
    rc = measure_missing(threads, want);
    if (rc > 0 || cache.bad[0]) {
        if (have_path) cache_save(path, others, others_len);
        rc = rc < 0 ? rc : 0;
    }
    free(others);
    if (rc) return rc;
    if ((rc = pick(pol, threads))) return rc;
    /* The elementwise loops share the pool only when the GEMMs run on it: OpenBLAS's own
     * workers spin after each call and would compete with the pool's. */
    for (int i = 0; i < chosen.n; i++)
        if (chosen.c[i].be == ENG_GEMM_ONEDNN) eng_pool_set_threads(threads);
    warm_up();
    return ENG_OK;
}

int eng_gemm_prepare_add(const eng_gemm_shape *shapes, int n)
{
    int have = chosen.n;
    eng_gemm_shape *all = malloc((size_t)(have + n + 1) * sizeof *all);
    if (!all) return eng_fail(ENG_ENOMEM, "gemm: out of memory for the shape classes");
    for (int i = 0; i < have; i++) {
        const eng_gemm_shape *s = &chosen.c[i].s;
        all[i] = *s;
        all[i].calls = chosen.c[i].flops / (2.0 * s->M * (double)s->N * s->K);
    }
    if (n) memcpy(all + have, shapes, (size_t)n * sizeof *all);
    int prepared = chosen.threads > 0;
    int rc = eng_gemm_prepare(prepared ? chosen.pol : ENG_GEMM_POLICY_AUTO, prepared ? chosen.threads : eng_gemm_threads(),
                              all, have + n);
    free(all);
    return rc;
}

const char *eng_gemm_notes(void) { return chosen.notes; }
const char *eng_gemm_cache_warning(void) { return cache.bad; }

void eng_gemm_describe(char *buf, size_t cap)
{
    int count[ENG_GEMM_NB] = { 0 };
    for (int i = 0; i < chosen.n; i++) count[chosen.c[i].be]++;
    size_t len = 0;
    for (int b = 0; b < ENG_GEMM_NB && len < cap; b++)
        if (count[b])
            len += (size_t)snprintf(buf + len, cap - len, "%s%s %d/%d", len ? ", " : "", eng_gemm_backend_name((eng_gemm_backend)b), count[b],
                                    chosen.n);
    if (!chosen.n && cap) len = (size_t)snprintf(buf, cap, "openblas (no shapes prepared)");
    if (len < cap)
        snprintf(buf + len, cap - len, " shape classes; %s, %d thread%s, OpenBLAS core %s",
                 chosen.pol == ENG_GEMM_POLICY_AUTO ? "auto" : chosen.pol == ENG_GEMM_POLICY_ONEDNN ? "onednn forced"
                                                                                                : "openblas forced",
                 chosen.threads, chosen.threads == 1 ? "" : "s", openblas_get_corename());
}

void eng_gemm_describe_classes(char *buf, size_t cap)
{
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < chosen.n && len < cap; i++) {
        const choice *c = &chosen.c[i];
        char sh[64], alt[96] = "", one[256];
        shape_text(&c->s, sh, sizeof sh);
        size_t al = 0;
        for (int b = 0; b < ENG_GEMM_NB && al < sizeof alt; b++) {
            if (b == c->be || (int)c->r[b].status < 0) continue;
            if (c->r[b].status == ENG_GEMM_OK)
                al += (size_t)snprintf(alt + al, sizeof alt - al, " %s %.1f", eng_gemm_backend_name((eng_gemm_backend)b), c->r[b].gflops);
            else
                al += (size_t)snprintf(alt + al, sizeof alt - al, " %s %s", eng_gemm_backend_name((eng_gemm_backend)b), status_names[c->r[b].status]);
        }
        int w = snprintf(one, sizeof one, "%s%s %s %.1f GF/s%s%s%s", len ? "; " : "", sh,
                         eng_gemm_backend_name((eng_gemm_backend)c->be), c->r[c->be].gflops, al ? " (" : "", al ? alt + 1 : "",
                         al ? ")" : "");
        if (w < 0) return;
        if (w >= (int)sizeof one) w = (int)sizeof one - 1; /* what one holds: memcpy below reads no further */
        /* whole entries only, and room left to say how many did not fit */
        char more[48];
        int wm = i + 1 < chosen.n ? snprintf(more, sizeof more, "; and %d more classes", chosen.n - i - 1) : 0;
        if (len + (size_t)w + (size_t)wm >= cap) {
            snprintf(more, sizeof more, "%sand %d more classes", len ? "; " : "", chosen.n - i);
            if (len + strlen(more) < cap) memcpy(buf + len, more, strlen(more) + 1);
            return;
        }
        memcpy(buf + len, one, (size_t)w + 1);
        len += (size_t)w;
    }
}

/* The Fashion MLP step at batch 128: the shapes calibrate measures. */
static const eng_gemm_shape std_shapes[] = {
    { 0, 0, 128, 256, 784, 1 }, { 0, 0, 128, 128, 256, 1 }, { 0, 0, 128, 10, 128, 1 }, { 1, 0, 784, 256, 128, 1 },
    { 1, 0, 256, 128, 128, 1 }, { 1, 0, 128, 10, 128, 1 },  { 0, 1, 128, 256, 128, 1 }, { 0, 1, 128, 128, 10, 1 },
};

int eng_gemm_calibrate(int threads, char *buf, size_t cap)
{
    char path[600];
    char *others = NULL;
    size_t others_len = 0, len = 0;
    if (cache_path(path, sizeof path)) return ENG_EINVAL;
    cache_load(path, &others, &others_len);
    cache.n = 0; /* forget this machine's results */
    int rc = ENG_OK;
    if (cap) buf[0] = 0;
    for (int t = 1; t <= threads && !rc; t++) {
        eng_gemm_classes_clear();
        chosen.threads = t, chosen.pol = ENG_GEMM_POLICY_AUTO;
        if ((rc = collect(std_shapes, (int)(sizeof std_shapes / sizeof std_shapes[0])))) break;
        int want[ENG_GEMM_NB] = { 1, 1 };
        if ((rc = measure_missing(t, want)) < 0) break;
        rc = pick(ENG_GEMM_POLICY_AUTO, t);
        double secs[ENG_GEMM_NB] = { 0 }, best = 0;
        for (int i = 0; i < chosen.n; i++) {
            const choice *c = &chosen.c[i];
            double f = 2.0 * c->s.M * (double)c->s.N * c->s.K;
            for (int b = 0; b < ENG_GEMM_NB; b++)
                secs[b] += c->r[b].status == ENG_GEMM_OK ? f / (c->r[b].gflops * 1e9) : 1e30;
            if (c->be >= 0) best += f / (c->r[c->be].gflops * 1e9);
        }
        if (len < cap)
            len += (size_t)snprintf(buf + len, cap - len,
                                    "%d thread%s: GEMM-only bound of the Fashion MLP step (b128) openblas %.1fk, onednn %.1fk, "
                                    "chosen per class %.1fk samples/s\n", t, t == 1 ? "" : "s",
                                    secs[0] < 1e29 ? 128 / secs[0] / 1e3 : 0.0, secs[1] < 1e29 ? 128 / secs[1] / 1e3 : 0.0,
                                    best > 0 ? 128 / best / 1e3 : 0.0);
    }
    cache_save(path, others, others_len);
    free(others);
    return rc;
}

void eng_gemm_cached(char *buf, size_t cap)
{
    char path[600];
    char *others = NULL;
    size_t others_len = 0, len = 0;
    if (cap) buf[0] = 0;
    if (cache_path(path, sizeof path)) return;
    cache_load(path, &others, &others_len);
    free(others);
    for (int t = 1; t <= 64 && len < cap; t++) {
        int classes = 0, fastest[ENG_GEMM_NB] = { 0 }, failed[ENG_GEMM_NB] = { 0 };
        for (int i = 0; i < cache.n; i++) {
            const cache_ent *e = &cache.e[i];
            if (e->threads != t) continue;
            if (e->r.status != ENG_GEMM_OK) { failed[e->be]++; continue; }
            int best = 1;
            for (int j = 0; j < cache.n; j++)
                if (j != i && cache.e[j].threads == t && cache.e[j].cls == e->cls && cache.e[j].r.status == ENG_GEMM_OK &&
                    (cache.e[j].r.gflops > e->r.gflops || (cache.e[j].r.gflops == e->r.gflops && j < i)))
                    best = 0;
            if (best) classes++, fastest[e->be]++;
        }
        if (!classes && !failed[0] && !failed[1]) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%d thread%s: %d shape classes measured; fastest openblas %d, onednn %d",
                                t, t == 1 ? "" : "s", classes, fastest[0], fastest[1]);
        for (int b = 0; b < ENG_GEMM_NB && len < cap; b++)
            if (failed[b])
                len += (size_t)snprintf(buf + len, cap - len, "; %s failed its check on %d", eng_gemm_backend_name((eng_gemm_backend)b),
                                        failed[b]);
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "\n");
    }
    if (!len && cap) snprintf(buf, cap, "nothing measured yet (a run measures its shapes once)\n");
}

int eng_gemm_square_rate(int n, int reps, int threads, double *best, double *mean, char *backend, size_t cap)
{
    eng_gemm_shape s = { 0, 0, n, n, n, 1 };
    int rc = eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, threads, &s, 1);
    if (rc) return rc;
    snprintf(backend, cap, "%s", eng_gemm_backend_name(chosen.c[0].be >= 0 ? (eng_gemm_backend)chosen.c[0].be : ENG_GEMM_OPENBLAS));
    size_t nn = (size_t)n * (size_t)n;
    float *a = prof_malloc(nn * sizeof *a), *b = prof_malloc(nn * sizeof *b), *c = prof_malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        prof_free(a), prof_free(b), prof_free(c);
        return eng_fail(ENG_ENOMEM, "out of memory for three %dx%d matrices; try a smaller size", n, n);
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7919u) % 1000) / 1000.0f - 0.5f;
        b[i] = (float)((i * 104729u) % 1000) / 1000.0f - 0.5f;
    }
    double flops = 2.0 * n * (double)n * n, sum = 0;
    *best = 0;
    eng_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = prof_now_ns();
        eng_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = flops / ((double)(prof_now_ns() - t0) * 1e-9) / 1e9;
        sum += g;
        if (g > *best) *best = g;
    }
    *mean = sum / reps;
    prof_free(a), prof_free(b), prof_free(c);
    return ENG_OK;
}
