/* graph.c — graphs for node classification: CSR building (self-loops and duplicates
 * dropped and counted), the edge-list / features / labels / mask loaders (errors name
 * FILE:LINE), a seeded random split, and the SBM and R-MAT generators. */
#include "graph.h"
#include "../rng.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/data_internal.h"

#define ENG_STREAM_GRAPH 0x47525048ull /* "GRPH" */
/* Every 2^20 iterations of a build loop: was a stop requested (eng_stop_builds)? A few ms
 * apart, so a SIGTERM during a graph of 10^8 nodes is obeyed within a second. */
#define STOP_CHECK(i) (((i) & 0xfffff) == 0 && eng_builds_stopped())

void eng_graph_free(eng_graph *g)
{
    if (!g) return;
    prof_free(g->rowptr);
    prof_free(g->col);
    prof_free(g->feat);
    prof_free(g->label);
    prof_free(g->split);
    prof_free(g);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void sort_i32(int32_t *v, int64_t n)
{
    if (n > 24) { qsort(v, (size_t)n, sizeof *v, cmp_i32); return; }
    for (int64_t i = 1; i < n; i++) {
        int32_t x = v[i];
        int64_t j = i;
        while (j > 0 && v[j - 1] > x) { v[j] = v[j - 1]; j--; }
        v[j] = x;
    }
}

int eng_graph_build_csr(eng_graph *g, const int32_t *src, const int32_t *dst, int64_t m, int undirected)
{
    int32_t n = g->n;
    int64_t total = undirected ? 2 * m : m;
    int64_t *ptr = prof_calloc((size_t)n + 1, sizeof *ptr);
    int32_t *col = prof_malloc((size_t)(total ? total : 1) * sizeof *col);
    if (!ptr || !col) {
        prof_free(ptr); prof_free(col);
        return eng_fail(ENG_ENOMEM, "graph: out of memory for %lld edges", (long long)total);
    }
    /* counting sort by destination (row = the node that aggregates) */
    for (int64_t i = 0; i < m; i++) {
        if (STOP_CHECK(i)) { prof_free(ptr); prof_free(col); return eng_build_stop_error("graph"); }
        ptr[dst[i] + 1]++;
        if (undirected) ptr[src[i] + 1]++;
    }
    for (int32_t v = 0; v < n; v++) ptr[v + 1] += ptr[v];
    int64_t *fill = prof_malloc((size_t)(n ? n : 1) * sizeof *fill);
    if (!fill) { prof_free(ptr); prof_free(col); return eng_fail(ENG_ENOMEM, "graph: out of memory"); }
    memcpy(fill, ptr, (size_t)n * sizeof *fill);
    for (int64_t i = 0; i < m; i++) {
        col[fill[dst[i]]++] = src[i];
        if (undirected) col[fill[src[i]]++] = dst[i];
    }
    prof_free(fill);
    /* per row: sort, drop self-loops and repeats, compact in place */
    int64_t out = 0, loops = 0, dups = 0;
    for (int32_t v = 0; v < n; v++) {
        if (STOP_CHECK(v)) { prof_free(ptr); prof_free(col); return eng_build_stop_error("graph"); }
        int64_t a = ptr[v], b = ptr[v + 1];
        sort_i32(col + a, b - a);
        ptr[v] = out;
        for (int64_t i = a; i < b; i++) {
            int32_t u = col[i];
            if (u == v) { loops++; continue; }
            if (out > ptr[v] && col[out - 1] == u) { dups++; continue; }
            col[out++] = u;
        }
    }
    ptr[n] = out;
    prof_free(g->rowptr);
    prof_free(g->col);
    g->rowptr = ptr;
    g->col = col;
    g->m = out;
    g->self_loops = undirected ? loops / 2 : loops;
    g->duplicates = dups;
    return ENG_OK;
}

/* ---- loaders ------------------------------------------------------------------------- */

typedef struct {
    const char *path;
    FILE *f;
    char *line;
    size_t cap;
    long no;
    long long size;       /* the file's size in bytes */
    int rc;               /* a read error or an over-long line: the loader stops with it */
} reader;

/* Opens a graph file: a regular file of at most ENG_MAX_GRAPH_BYTES (eng_open_input: not
 * /dev/zero, a FIFO or a directory, which would grow one line without end or block). */
static int rd_open(reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    int fd = eng_open_input(path, ENG_MAX_GRAPH_BYTES, "graph file", &r->size);
    if (fd < 0) return ENG_EIO;
    r->f = fdopen(fd, "r");
    if (!r->f) { close(fd); return eng_fail(ENG_ENOMEM, "%s: out of memory", path); }
    return ENG_OK;
}

/* Next line that is not blank or a '#' comment, without its newline; NULL at the end or
 * on an error (r->rc set). Lines are at most ENG_GRAPH_MAX_LINE bytes: one that is longer
 * is not a graph file's line, and a bound keeps a file without newlines from taking its
 * whole size as one buffer. */
static char *rd_next(reader *r)
{
    for (;;) {
        size_t len = 0;
        int c = EOF;
        for (;;) {
            if (len + 1 >= r->cap) {   /* room for this byte and the NUL, also of an empty line */
                if (r->cap >= ENG_GRAPH_MAX_LINE) {
                    r->rc = eng_fail(ENG_EFORMAT, "%s:%ld: a line longer than %d bytes: not a graph file's line "
                                     "(one edge, feature row or label per line)", r->path, r->no + 1, ENG_GRAPH_MAX_LINE);
                    return NULL;
                }
                size_t nc = r->cap ? 2 * r->cap : 256;
                char *t = realloc(r->line, nc);
                if (!t) { r->rc = eng_fail(ENG_ENOMEM, "%s: out of memory", r->path); return NULL; }
                r->line = t;
                r->cap = nc;
            }
            if ((c = getc_unlocked(r->f)) == EOF || c == '\n') break;
            if (!c) {
                r->rc = eng_fail(ENG_EFORMAT, "%s:%ld: a NUL byte: not a text file", r->path, r->no + 1);
                return NULL;
            }
            r->line[len++] = (char)c;
        }
        if (ferror(r->f)) {
            r->rc = eng_fail(ENG_EIO, "%s:%ld: read error: %s", r->path, r->no + 1, strerror(errno));
            return NULL;
        }
        if (c == EOF && len == 0) return NULL;
        r->no++;
        if (eng_builds_stopped()) { r->rc = eng_build_stop_error(r->path); return NULL; }
        while (len > 0 && r->line[len - 1] == '\r') len--;
        r->line[len] = 0;
        char *p = r->line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p && *p != '#') return p;
    }
}

/* Closes r; returns its read error (ENG_OK when none). */
static int rd_close(reader *r)
{
    if (r->f) fclose(r->f);
    free(r->line);
    return r->rc;
}

/* Splits a line in place: at commas if it has any, else at tabs if it has any, else at
 * runs of blanks; fields are trimmed. Returns the field count; out[] gets at most max. */
static int fields_of(char *p, char **out, int max)
{
    char sep = strchr(p, ',') ? ',' : strchr(p, '\t') ? '\t' : ' ';
    int n = 0;
    for (;;) {
        while (*p == ' ' || (sep != '\t' && *p == '\t')) p++;
        if (sep == ' ' && !*p) break;
        char *s = p;
        while (*p && *p != sep && !(sep == ' ' && *p == '\t')) p++;
        char *e = p;
        int more = *p != 0;
        if (more) p++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
        *e = 0;
        if (n < max) out[n] = s;
        n++;
        if (!more) break;
    }
    return n;
}

/* Fields of a line without splitting it (for sizing). */
static int count_fields(const char *p)
{
    char sep = strchr(p, ',') ? ',' : strchr(p, '\t') ? '\t' : ' ';
    if (sep != ' ') {
        int n = 1;
        for (; *p; p++) n += *p == sep;
        return n;
    }
    int n = 0, in = 0;
    for (; *p; p++) {
        int blank = *p == ' ' || *p == '\t';
        n += !blank && !in;
        in = !blank;
    }
    return n;
}

static int parse_id(const char *s, long long *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno) return -1;
    *v = x;
    return 0;
}

int eng_graph_load_edges(const char *path, int undirected, int32_t n_nodes, eng_graph **out)
{
    *out = NULL;
    reader r;
    int rc = rd_open(&r, path);
    if (rc) return rc;
    int64_t cap = 1024, m = 0;
    int32_t *src = prof_malloc((size_t)cap * sizeof *src), *dst = prof_malloc((size_t)cap * sizeof *dst);
    long long maxid = -1;
    char *p;
    int first = 1;
    while (!rc && (p = rd_next(&r))) {
        char *f[3];
        int nf = fields_of(p, f, 3);
        long long a, b;
        int ok = nf == 2 && !parse_id(f[0], &a) && !parse_id(f[1], &b);
        if (!ok && first) { first = 0; continue; } /* a header */
        first = 0;
        if (!ok) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: expected two node ids 'src,dst' (comma, tab or blank between), got '%s'",
                          path, r.no, r.line);
            break;
        }
        if (a < 0 || b < 0 || a >= INT32_MAX || b >= INT32_MAX) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: node ids must be in 0..%d, got %lld,%lld", path, r.no,
                          INT32_MAX - 1, a, b);
            break;
        }
        /* Checked here, before the CSR is sized by the largest id: one stray id of 2^27
         * would otherwise allocate for 2^27 nodes before anything else is compared. */
        if (n_nodes > 0 && (a >= n_nodes || b >= n_nodes)) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: node %lld is past the graph's %d nodes (ids 0..%d: one feature row "
                          "per node); fix the id or add its feature row", path, r.no, a >= n_nodes ? a : b, n_nodes,
                          n_nodes - 1);
            break;
        }
        if (m == cap) {
            int32_t *s2 = prof_malloc((size_t)cap * 2 * sizeof *src), *d2 = prof_malloc((size_t)cap * 2 * sizeof *dst);
            if (s2) memcpy(s2, src, (size_t)cap * sizeof *src);
            if (d2) memcpy(d2, dst, (size_t)cap * sizeof *dst);
            prof_free(src); prof_free(dst);
            src = s2; dst = d2;
            cap *= 2;
        }
        if (!src || !dst) { rc = eng_fail(ENG_ENOMEM, "%s: out of memory at line %ld", path, r.no); break; }
        src[m] = (int32_t)a;
        dst[m] = (int32_t)b;
        m++;
        if (a > maxid) maxid = a;
        if (b > maxid) maxid = b;
    }
    int rrc = rd_close(&r);
    if (!rc) rc = rrc;
    if (!rc && m == 0) rc = eng_fail(ENG_EFORMAT, "%s: no edges (expected lines 'src,dst')", path);
    eng_graph *g = NULL;
    if (!rc) {
        g = prof_calloc(1, sizeof *g);
        if (!g) rc = eng_fail(ENG_ENOMEM, "%s: out of memory", path);
    }
    if (!rc) {
        g->n = (int32_t)(maxid + 1 > n_nodes ? maxid + 1 : n_nodes);
        rc = eng_graph_build_csr(g, src, dst, m, undirected);
    }
    prof_free(src);
    prof_free(dst);
    if (rc) { eng_graph_free(g); return rc; }
    *out = g;
    return ENG_OK;
}

/* A first row whose first field is text (not even nan or inf) is a header. */
static int header_field(const char *s)
{
    char *end;
    strtod(s, &end);
    return end == s || *end;
}

int eng_graph_count_rows(const char *path, int32_t *n)
{
    *n = 0;
    reader r;
    int rc = rd_open(&r, path);
    if (rc) return rc;
    long long rows = 0;
    char *p;
    while ((p = rd_next(&r))) {
        char *f0;
        if (rows == 0 && fields_of(p, &f0, 1) >= 1 && header_field(f0)) { rows = -1; continue; }
        if (rows < 0) rows = 0;
        if (++rows >= INT32_MAX) { r.rc = eng_fail(ENG_EFORMAT, "%s:%ld: more than %d rows", path, r.no, INT32_MAX - 1); break; }
    }
    rc = rd_close(&r);
    if (!rc) *n = (int32_t)(rows > 0 ? rows : 0);
    return rc;
}

int eng_graph_load_features(eng_graph *g, const char *path)
{
    reader r;
    int rc = rd_open(&r, path);
    if (rc) return rc;
    int f = 0;
    int32_t row = 0;
    float *feat = NULL;
    char *p;
    char **fl = NULL;
    int flcap = 0, header = 0;
    while (!rc && (p = rd_next(&r))) {
        int nf = count_fields(p);
        if (nf > flcap) {
            char **t = realloc(fl, (size_t)nf * sizeof *fl);
            if (!t) { rc = eng_fail(ENG_ENOMEM, "%s: out of memory", path); break; }
            fl = t;
            flcap = nf;
        }
        nf = fields_of(p, fl, flcap);
        if (row == 0 && !f && !header && header_field(fl[0])) { header = 1; continue; }
        if (!f) {
            f = nf;
            /* A row of f numbers takes at least 2f bytes (a digit and a separator or the
             * newline each): a file too small for one row per node is refused before
             * n x f floats are allocated for it. */
            if ((double)g->n * 2.0 * f > (double)r.size + 1) {
                rc = eng_fail(ENG_EFORMAT, "%s:%ld: %d features per row (as this row) for %d nodes need at least %.0f "
                              "bytes, but the file has %lld: it cannot hold one row per node", path, r.no, f, g->n,
                              (double)g->n * 2.0 * f, r.size);
                break;
            }
            feat = prof_malloc((size_t)g->n * (size_t)f * sizeof *feat);
            if (!feat) { rc = eng_fail(ENG_ENOMEM, "%s: out of memory for %d x %d features", path, g->n, f); break; }
        }
        if (nf != f) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: expected %d features (as the first row), got %d", path, r.no, f, nf);
            break;
        }
        if (row >= g->n) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: more feature rows than the graph's %d nodes", path, r.no, g->n);
            break;
        }
        for (int j = 0; j < f; j++) {
            double v;
            if (!eng_parse_number(fl[j], &v) || fabs(v) > FLT_MAX) {
                rc = eng_fail(ENG_EFORMAT, "%s:%ld: column %d: expected a finite number in float range (nan and inf "
                              "are refused, as in CSV files), got '%.40s'", path, r.no, j + 1, fl[j]);
                break;
            }
            feat[(size_t)row * f + j] = (float)v;
        }
        row++;
    }
    int rrc = rd_close(&r);
    if (!rc) rc = rrc;
    free(fl);
    if (!rc && row != g->n)
        rc = eng_fail(ENG_EFORMAT, "%s: %d feature rows, but the graph has %d nodes (one row per node, in id order)",
                      path, row, g->n);
    if (rc) { prof_free(feat); return rc; }
    prof_free(g->feat);
    g->feat = feat;
    g->f = f;
    return ENG_OK;
}

int eng_graph_load_labels(eng_graph *g, const char *path)
{
    reader r;
    int rc = rd_open(&r, path);
    if (rc) return rc;
    int32_t *lab = prof_malloc((size_t)g->n * sizeof *lab);
    if (!lab) { rd_close(&r); return eng_fail(ENG_ENOMEM, "%s: out of memory", path); }
    for (int32_t i = 0; i < g->n; i++) lab[i] = -1;
    int32_t row = 0, maxl = -1;
    int first = 1, pairs = -1;
    char *p;
    while (!rc && (p = rd_next(&r))) {
        char *f[3];
        int nf = fields_of(p, f, 3);
        long long a = 0, b = 0;
        int ok = (nf == 1 && !parse_id(f[0], &b)) || (nf == 2 && !parse_id(f[0], &a) && !parse_id(f[1], &b));
        if (!ok && first) { first = 0; continue; }
        first = 0;
        if (!ok || (pairs >= 0 && pairs != (nf == 2))) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: expected a label (an integer >= 0) or 'node,label' like the other lines, got '%s'",
                          path, r.no, r.line);
            break;
        }
        pairs = nf == 2;
        if (!pairs) a = row;
        if (a < 0 || a >= g->n || b < 0 || b > 1000000) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: node %lld / label %lld out of range (nodes 0..%d, labels 0..1000000)",
                          path, r.no, a, b, g->n - 1);
            break;
        }
        if (lab[a] >= 0) { rc = eng_fail(ENG_EFORMAT, "%s:%ld: node %lld has a label already", path, r.no, a); break; }
        lab[a] = (int32_t)b;
        if (b > maxl) maxl = (int32_t)b;
        row++;
    }
    int rrc = rd_close(&r);
    if (!rc) rc = rrc;
    if (!rc && row != g->n)
        rc = eng_fail(ENG_EFORMAT, "%s: %d labels, but the graph has %d nodes (every node needs one)", path, row, g->n);
    if (rc) { prof_free(lab); return rc; }
    prof_free(g->label);
    g->label = lab;
    g->classes = maxl + 1;
    return ENG_OK;
}

static int ensure_split(eng_graph *g)
{
    if (g->split) return ENG_OK;
    g->split = prof_calloc((size_t)g->n, 1);
    return g->split ? ENG_OK : eng_fail(ENG_ENOMEM, "graph: out of memory for the split");
}

int eng_graph_load_mask(eng_graph *g, const char *path, int which)
{
    int rc = ensure_split(g);
    if (rc) return rc;
    reader r;
    if ((rc = rd_open(&r, path))) return rc;
    char *p;
    int first = 1;
    static const char *const names[] = { "", "train", "val", "test" };
    while (!rc && (p = rd_next(&r))) {
        char *f[2];
        long long a;
        int nf = fields_of(p, f, 2);
        int ok = nf == 1 && !parse_id(f[0], &a);
        if (!ok && first) { first = 0; continue; }
        first = 0;
        if (!ok || a < 0 || a >= g->n) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: expected one node id in 0..%d per line, got '%s'", path, r.no, g->n - 1, r.line);
            break;
        }
        if (g->split[a] && g->split[a] != which) {
            rc = eng_fail(ENG_EFORMAT, "%s:%ld: node %lld is in the %s set already (the sets must not overlap)",
                          path, r.no, a, names[g->split[a]]);
            break;
        }
        g->split[a] = (uint8_t)which;
    }
    int rrc = rd_close(&r);
    return rc ? rc : rrc;
}

int eng_graph_random_split(eng_graph *g, double train, double val, uint64_t seed)
{
    if (train <= 0 || val < 0 || train + val >= 1)
        return eng_fail(ENG_EINVAL, "graph: split fractions train %g, val %g: need train > 0, val >= 0 and "
                        "train + val < 1 (the rest is test)", train, val);
    int rc = ensure_split(g);
    if (rc) return rc;
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_GRAPH + 1);
    for (int32_t v = 0; v < g->n; v++) {
        double u = eng_rng_uniform(&r);
        g->split[v] = u < train ? ENG_SPLIT_TRAIN : u < train + val ? ENG_SPLIT_VAL : ENG_SPLIT_TEST;
    }
    return ENG_OK;
}

/* ---- generators ---------------------------------------------------------------------- */

int eng_graph_sbm(int32_t n, int c, double deg, double homophily, int f, double noise, uint64_t seed,
                  eng_graph **out)
{
    *out = NULL;
    if (n < 2 || c < 2 || c > n || deg <= 0 || deg >= n || homophily < 0 || homophily > 1 || f < 1 || noise < 0)
        return eng_fail(ENG_EINVAL, "graph: sbm needs n >= 2, 2 <= classes <= n, 0 < degree < n, homophily in "
                        "[0, 1], features >= 1, noise >= 0 (got n %d, classes %d, degree %g, homophily %g, "
                        "features %d, noise %g)", n, c, deg, homophily, f, noise);
    eng_graph *g = prof_calloc(1, sizeof *g);
    int64_t m = (int64_t)(deg * n / 2.0 + 0.5);
    int32_t *src = prof_malloc((size_t)m * sizeof *src), *dst = prof_malloc((size_t)m * sizeof *dst);
    if (g) {
        g->n = n;
        g->f = f;
        g->classes = c;
        g->label = prof_malloc((size_t)n * sizeof *g->label);
        g->feat = prof_malloc((size_t)n * f * sizeof *g->feat);
    }
    float *cent = prof_malloc((size_t)c * f * sizeof *cent);
    if (!g || !src || !dst || !g->label || !g->feat || !cent) {
        prof_free(src); prof_free(dst); prof_free(cent); eng_graph_free(g);
        return eng_fail(ENG_ENOMEM, "graph: out of memory for an SBM of %d nodes", n);
    }
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_GRAPH + 2);
    /* community i % c; members of community k are k, k + c, k + 2c, ... */
    for (int32_t v = 0; v < n; v++) g->label[v] = v % c;
    for (int64_t e = 0; e < m; e++) {
        if (STOP_CHECK(e)) break;
        int32_t a = (int32_t)eng_rng_below(&r, (uint64_t)n), b;
        int k = a % c;
        int32_t size_k = (n - k + c - 1) / c;
        if (eng_rng_uniform(&r) < homophily) {
            b = k + c * (int32_t)eng_rng_below(&r, (uint64_t)size_k);
        } else {
            do b = (int32_t)eng_rng_below(&r, (uint64_t)n); while (b % c == k);
        }
        src[e] = a;
        dst[e] = b;
    }
    /* centroids: N(0, 1) per coordinate; features centroid + noise * N(0, 1) */
    for (size_t i = 0; i < (size_t)c * f; i++) cent[i] = (float)eng_rng_normal(&r);
    for (int32_t v = 0; v < n && !eng_builds_stopped(); v++)
        for (int j = 0; j < f; j++)
            g->feat[(size_t)v * f + j] = cent[(size_t)(v % c) * f + j] + (float)(noise * eng_rng_normal(&r));
    int rc = eng_builds_stopped() ? eng_build_stop_error("graph: sbm") : eng_graph_build_csr(g, src, dst, m, 1);
    prof_free(src); prof_free(dst); prof_free(cent);
    if (rc) { eng_graph_free(g); return rc; }
    *out = g;
    return ENG_OK;
}

int eng_graph_rmat(int scale, int edge_factor, uint64_t seed, eng_graph **out)
{
    *out = NULL;
    if (scale < 1 || scale > 30 || edge_factor < 1 || edge_factor > 1024)
        return eng_fail(ENG_EINVAL, "graph: rmat needs 1 <= scale <= 30 and 1 <= edge_factor <= 1024 (got %d, %d)",
                        scale, edge_factor);
    int32_t n = (int32_t)1 << scale;
    int64_t m = (int64_t)edge_factor * n;
    eng_graph *g = prof_calloc(1, sizeof *g);
    int32_t *src = prof_malloc((size_t)m * sizeof *src), *dst = prof_malloc((size_t)m * sizeof *dst);
    if (!g || !src || !dst) {
        prof_free(src); prof_free(dst); prof_free(g);
        return eng_fail(ENG_ENOMEM, "graph: out of memory for R-MAT scale %d (%lld edges)", scale, (long long)m);
    }
    g->n = n;
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_GRAPH + 3);
    /* each level picks a quadrant from 16 random bits: four levels per 64-bit draw */
    const uint32_t A = (uint32_t)(0.57 * 65536), AB = (uint32_t)(0.76 * 65536), ABC = (uint32_t)(0.95 * 65536);
    for (int64_t e = 0; e < m; e++) {
        if (STOP_CHECK(e)) break;
        uint32_t u = 0, v = 0;
        uint64_t bits = 0;
        for (int l = 0; l < scale; l++) {
            if ((l & 3) == 0) bits = eng_rng_next(&r);
            uint32_t q = (uint32_t)(bits & 0xffff);
            bits >>= 16;
            u <<= 1; v <<= 1;
            if (q < A) { }
            else if (q < AB) v |= 1;
            else if (q < ABC) u |= 1;
            else { u |= 1; v |= 1; }
        }
        src[e] = (int32_t)u;
        dst[e] = (int32_t)v;
    }
    int rc = eng_builds_stopped() ? eng_build_stop_error("graph: rmat") : eng_graph_build_csr(g, src, dst, m, 1);
    prof_free(src); prof_free(dst);
    if (rc) { eng_graph_free(g); return rc; }
    *out = g;
    return ENG_OK;
}
