/* sample.c — neighbour sampling into per-layer blocks (bipartite, relabelled, CSR), two ways:
 *
 *  twopass  the baseline, as DGL's sample_neighbors + to_block: pass 1 samples every
 *           destination's neighbours into an edge list (COO, global ids at both ends);
 *           pass 2 relabels — a hash map from global to local ids filled with the
 *           destinations, then with every edge's source, then both ends of each edge mapped
 *           through it — and converts the COO to CSR by a counting sort over destinations.
 *  fused    one pass in the FastSample style: the CSR offsets are known before sampling
 *           (min(degree, fanout) per destination), so each picked neighbour is relabelled
 *           through a dense global-to-local array and written straight into its CSR slot;
 *           no edge list, no hash, no sort. The array is reset by walking the block's
 *           sources afterwards. Because the slots exist before the first draw, the pass
 *           is pipelined through them (draw positions, read ids, relabel, a few
 *           destinations apart), so the random reads of neighbour rows and of the array
 *           overlap instead of stalling one by one.
 *
 * Both draw the same random numbers in the same order (one stream per call; layers from
 * the output down, destinations in order, Floyd's sampling of fanout of degree offsets)
 * and number sources by first appearance, so they give identical blocks.
 */
#include "graph.h"
#include "../rng.h"

#include <stdlib.h>
#include <string.h>

#define ENG_STREAM_SAMPLE 0x534d504cull /* "SMPL" */

struct eng_sampler {
    const eng_graph *g;
    eng_sampler_kind kind;
    int layers;
    int fanout[ENG_GRAPH_MAX_LAYERS];
    int max_seeds;
    eng_block blocks[ENG_GRAPH_MAX_LAYERS];
    int32_t *g2l;                 /* fused: [n] local id or -1 */
    int32_t *coo_dst, *coo_src;   /* twopass: the edge list of one layer (global ids) */
    int32_t *coo_ldst;            /* twopass: its destinations mapped to local ids */
    int32_t *hkeys, *hvals;       /* twopass: open-addressing hash, cap entries */
    uint32_t hcap;
    int64_t *cnt;                 /* twopass: per-destination counts */
    prof_t *prof;
    int scope;
};

int eng_graph_parse_fanouts(const char *s, int *out, int max)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ') p++;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > ENG_MAX_FANOUT || n == max) return -1;
        out[n++] = (int)v;
        p = end;
        while (*p == ' ') p++;
        if (!*p) return n;
        if (*p++ != ',') return -1;
    }
}

const char *eng_sampler_name(eng_sampler_kind k) { return k == ENG_SAMPLER_FUSED ? "fused" : "twopass"; }

void eng_sampler_free(eng_sampler *s)
{
    if (!s) return;
    for (int l = 0; l < ENG_GRAPH_MAX_LAYERS; l++) {
        prof_free(s->blocks[l].src_ids);
        prof_free(s->blocks[l].indptr);
        prof_free(s->blocks[l].indices);
    }
    prof_free(s->g2l);
    prof_free(s->coo_dst);
    prof_free(s->coo_src);
    prof_free(s->coo_ldst);
    prof_free(s->hkeys);
    prof_free(s->hvals);
    prof_free(s->cnt);
    prof_free(s);
}

int eng_sampler_create(const eng_graph *g, eng_sampler_kind kind, const int *fanouts, int layers,
                       int max_seeds, prof_t *prof, eng_sampler **out)
{
    *out = NULL;
    if (layers < 1 || layers > ENG_GRAPH_MAX_LAYERS)
        return eng_fail(ENG_EINVAL, "graph.fanouts: 1 to %d layers, got %d", ENG_GRAPH_MAX_LAYERS, layers);
    for (int l = 0; l < layers; l++)
        if (fanouts[l] < 1 || fanouts[l] > ENG_MAX_FANOUT)
            return eng_fail(ENG_EINVAL, "graph.fanouts: fanout %d of layer %d is outside 1..%d", fanouts[l], l + 1,
                            ENG_MAX_FANOUT);
    if (max_seeds < 1 || max_seeds > g->n)
        return eng_fail(ENG_EINVAL, "graph: batches of %d seeds on a graph of %d nodes", max_seeds, g->n);
    eng_sampler *s = prof_calloc(1, sizeof *s);
    if (!s) return eng_fail(ENG_ENOMEM, "sampler: out of memory");
    s->g = g;
    s->kind = kind;
    s->layers = layers;
    s->max_seeds = max_seeds;
    memcpy(s->fanout, fanouts, (size_t)layers * sizeof *fanouts);
    s->scope = -1;
    int bad = 0;
    int64_t dst = max_seeds, max_edges = 0, max_dst = 0;
    for (int l = layers - 1; l >= 0; l--) {
        int64_t e = dst * fanouts[l], src = dst + e;
        if (src > g->n) src = g->n;
        eng_block *b = &s->blocks[l];
        b->cap_src = src;
        b->cap_edges = e;
        b->src_ids = prof_malloc((size_t)src * sizeof(int32_t));
        b->indptr = prof_malloc((size_t)(dst + 1) * sizeof(int64_t));
        b->indices = prof_malloc((size_t)(e ? e : 1) * sizeof(int32_t));
        bad |= !b->src_ids || !b->indptr || !b->indices;
        if (e > max_edges) max_edges = e;
        if (dst > max_dst) max_dst = dst;
        dst = src;
    }
    if (kind == ENG_SAMPLER_FUSED && g->m >= INT32_MAX) {
        eng_sampler_free(s);
        return eng_fail(ENG_EINVAL, "sampler: the fused sampler keeps CSR positions in 32-bit slots; this graph has %lld "
                        "entries (use graph.sampler = twopass)", (long long)g->m);
    }
    if (kind == ENG_SAMPLER_FUSED) {
        s->g2l = prof_malloc((size_t)g->n * sizeof(int32_t));
        if (s->g2l) memset(s->g2l, 0xff, (size_t)g->n * sizeof(int32_t));
        bad |= !s->g2l;
    } else {
        s->coo_dst = prof_malloc((size_t)max_edges * sizeof(int32_t));
        s->coo_src = prof_malloc((size_t)max_edges * sizeof(int32_t));
        s->coo_ldst = prof_malloc((size_t)max_edges * sizeof(int32_t));
        s->cnt = prof_malloc((size_t)(max_dst + 1) * sizeof(int64_t));
        uint32_t cap = 16;
        while ((int64_t)cap < 2 * (max_dst + max_edges) && cap < (1u << 31)) cap <<= 1;
        s->hcap = cap;
        s->hkeys = prof_malloc((size_t)cap * sizeof(int32_t));
        s->hvals = prof_malloc((size_t)cap * sizeof(int32_t));
        bad |= !s->coo_dst || !s->coo_src || !s->coo_ldst || !s->cnt || !s->hkeys || !s->hvals;
    }
    if (bad) {
        eng_sampler_free(s);
        return eng_fail(ENG_ENOMEM, "sampler: out of memory for batches of %d seeds", max_seeds);
    }
    if (prof) {
        s->prof = prof;
        s->scope = prof_register(prof, kind == ENG_SAMPLER_FUSED ? "sample.fused" : "sample.twopass", "graph", PROF_OP);
        if (s->scope < 0) {
            eng_sampler_free(s);
            return eng_fail(ENG_EINVAL, "sampler: the profiler's scope table is full: %s", prof_error());
        }
    }
    *out = s;
    return ENG_OK;
}

/* Offsets (0..d-1) of f of the d neighbours, without replacement (Floyd's algorithm);
 * all of them in order when d <= f. Returns how many. */
static inline int pick(eng_rng *r, int64_t d, int f, int64_t *out)
{
    if (d <= f) {
        for (int64_t i = 0; i < d; i++) out[i] = i;
        return (int)d;
    }
    int n = 0;
    for (int64_t j = d - f; j < d; j++) {
        int64_t t = (int64_t)eng_rng_below(r, (uint64_t)j + 1);
        int seen = 0;
        for (int i = 0; i < n; i++) seen |= out[i] == t;
        out[n++] = seen ? j : t;
    }
    return n;
}

static inline uint32_t hash32(int32_t k) { return (uint32_t)k * 2654435761u; }

/* twopass: local id of global u, inserting next if absent */
static inline int32_t h_insert(eng_sampler *s, int32_t u, int32_t next, int *inserted)
{
    uint32_t mask = s->hcap - 1, h = hash32(u) & mask;
    while (s->hkeys[h] >= 0) {
        if (s->hkeys[h] == u) { *inserted = 0; return s->hvals[h]; }
        h = (h + 1) & mask;
    }
    s->hkeys[h] = u;
    s->hvals[h] = next;
    *inserted = 1;
    return next;
}

static inline int32_t h_find(const eng_sampler *s, int32_t u)
{
    uint32_t mask = s->hcap - 1, h = hash32(u) & mask;
    while (s->hkeys[h] != u) h = (h + 1) & mask;
    return s->hvals[h];
}

static int layer_twopass(eng_sampler *s, eng_block *b, const int32_t *dst, int32_t n_dst, int f, eng_rng *r)
{
    const eng_graph *g = s->g;
    int64_t picks[ENG_MAX_FANOUT];
    /* pass 1: sample_neighbors -> COO with global source ids */
    int64_t m = 0;
    for (int32_t i = 0; i < n_dst; i++) {
        int32_t v = dst[i];
        int64_t a = g->rowptr[v];
        int k = pick(r, g->rowptr[v + 1] - a, f, picks);
        for (int j = 0; j < k; j++) {
            s->coo_dst[m] = v;
            s->coo_src[m] = g->col[a + picks[j]];
            m++;
        }
    }
    /* pass 2: to_block — relabel through a hash map, then COO -> CSR */
    uint32_t used = s->hcap;
    memset(s->hkeys, 0xff, (size_t)used * sizeof(int32_t));
    int32_t n_src = 0;
    int ins;
    for (int32_t i = 0; i < n_dst; i++) {
        h_insert(s, dst[i], n_src, &ins);
        if (!ins) return eng_fail(ENG_EINVAL, "sampler: seed node %d appears twice in the batch", dst[i]);
        b->src_ids[n_src++] = dst[i];
    }
    for (int64_t e = 0; e < m; e++) {
        int32_t u = s->coo_src[e];
        h_insert(s, u, n_src, &ins);
        if (ins) b->src_ids[n_src++] = u;
    }
    memset(s->cnt, 0, (size_t)(n_dst + 1) * sizeof(int64_t));
    for (int64_t e = 0; e < m; e++) {
        int32_t ld = s->coo_ldst[e] = h_find(s, s->coo_dst[e]);
        s->cnt[ld + 1]++;
    }
    for (int32_t i = 0; i < n_dst; i++) s->cnt[i + 1] += s->cnt[i];
    memcpy(b->indptr, s->cnt, (size_t)(n_dst + 1) * sizeof(int64_t));
    for (int64_t e = 0; e < m; e++) b->indices[s->cnt[s->coo_ldst[e]]++] = h_find(s, s->coo_src[e]);
    b->n_dst = n_dst;
    b->n_src = n_src;
    b->n_edges = m;
    return ENG_OK;
}

static int layer_fused(eng_sampler *s, eng_block *b, const int32_t *dst, int32_t n_dst, int f, eng_rng *r)
{
    const eng_graph *g = s->g;
    int32_t *g2l = s->g2l;
    int64_t picks[ENG_MAX_FANOUT];
    int32_t n_src = 0;
    int rc = ENG_OK;
    b->indptr[0] = 0;
    for (int32_t i = 0; i < n_dst; i++) {
        int32_t v = dst[i];
        if (i + 16 < n_dst) __builtin_prefetch(&g->rowptr[dst[i + 16]]); /* rows are random: fetch ahead */
        if (g2l[v] >= 0 && !rc) rc = eng_fail(ENG_EINVAL, "sampler: seed node %d appears twice in the batch", v);
        g2l[v] = n_src;
        b->src_ids[n_src++] = v;
        int64_t d = g->rowptr[v + 1] - g->rowptr[v];
        b->indptr[i + 1] = b->indptr[i] + (d < f ? d : f);
    }
    /* a three-stage software pipeline over the destinations, all in the block's own CSR
     * slots: destination i draws its neighbours' positions in the CSR and prefetches them;
     * destination i - LAG reads the neighbour ids there (arrived by now) and prefetches
     * their g2l entries; destination i - 2 LAG relabels. Draws and relabelling stay in
     * destination and slot order, so the blocks are the two-pass sampler's. */
    enum { LAG = 16 };
    for (int32_t i = 0; i < n_dst + 2 * LAG && !rc; i++) {
        if (i < n_dst) {
            int32_t v = dst[i];
            int64_t a = g->rowptr[v], pos = b->indptr[i];
            int k = pick(r, g->rowptr[v + 1] - a, f, picks);
            for (int j = 0; j < k; j++) {
                __builtin_prefetch(&g->col[a + picks[j]]);
                b->indices[pos + j] = (int32_t)(a + picks[j]); /* fits: m < 2^31 (checked at create) */
            }
        }
        if (i >= LAG && i - LAG < n_dst) {
            int32_t q = i - LAG;
            for (int64_t e = b->indptr[q]; e < b->indptr[q + 1]; e++) {
                int32_t u = g->col[b->indices[e]];
                __builtin_prefetch(&g2l[u], 1);
                b->indices[e] = u;
            }
        }
        if (i >= 2 * LAG) {
            int32_t q = i - 2 * LAG;
            for (int64_t e = b->indptr[q]; e < b->indptr[q + 1]; e++) {
                int32_t u = b->indices[e];
                int32_t l = g2l[u];
                if (l < 0) { l = g2l[u] = n_src; b->src_ids[n_src++] = u; }
                b->indices[e] = l;
            }
        }
    }
    for (int32_t i = 0; i < n_src; i++) g2l[b->src_ids[i]] = -1;
    b->n_dst = n_dst;
    b->n_src = n_src;
    b->n_edges = b->indptr[n_dst];
    return rc;
}

int eng_sampler_sample(eng_sampler *s, const int32_t *seeds, int n_seeds, uint64_t seed, eng_block **blocks)
{
    if (n_seeds < 1 || n_seeds > s->max_seeds)
        return eng_fail(ENG_EINVAL, "sampler: a batch of %d seeds (the sampler was made for 1..%d)", n_seeds, s->max_seeds);
    for (int i = 0; i < n_seeds; i++)
        if (seeds[i] < 0 || seeds[i] >= s->g->n)
            return eng_fail(ENG_EINVAL, "sampler: seed node %d is not in the graph (0..%d)", seeds[i], s->g->n - 1);
    PROF_BEGIN(s->prof, s->scope);
    eng_rng r;
    eng_rng_seed(&r, seed, ENG_STREAM_SAMPLE);
    const int32_t *dst = seeds;
    int32_t n_dst = n_seeds;
    int rc = ENG_OK;
    uint64_t edges = 0, nodes = 0;
    for (int l = s->layers - 1; l >= 0 && !rc; l--) {
        eng_block *b = &s->blocks[l];
        rc = s->kind == ENG_SAMPLER_FUSED ? layer_fused(s, b, dst, n_dst, s->fanout[l], &r)
                                          : layer_twopass(s, b, dst, n_dst, s->fanout[l], &r);
        dst = b->src_ids;
        n_dst = b->n_src;
        edges += (uint64_t)b->n_edges;
        nodes += (uint64_t)b->n_src;
    }
    /* bytes: the sampled neighbour ids read and the block arrays written (4 each) */
    PROF_END(s->prof, s->scope, 0, 4 * (2 * edges + nodes));
    if (rc) return rc;
    *blocks = s->blocks;
    return ENG_OK;
}
