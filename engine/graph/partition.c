/* partition.c — graph partitioning for the communication a distributed sampler would cause:
 * METIS k-way (libmetis) against uniformly random parts; the edge cut, and per sampled
 * minibatch the input nodes that live in another part than the batch's seeds and their
 * feature bytes (a model of the traffic, not a measurement: nothing is sent). */
#include "graph.h"
#include "../rng.h"

#include <metis.h>
#include <string.h>

_Static_assert(sizeof(idx_t) == sizeof(int32_t), "libmetis is built with 32-bit indices (IDXTYPEWIDTH 32)");

/* Every edge v <- u has its reverse u <- v (rows are sorted: binary search). */
static int symmetric(const eng_graph *g)
{
    for (int32_t v = 0; v < g->n; v++)
        for (int64_t e = g->rowptr[v]; e < g->rowptr[v + 1]; e++) {
            int32_t u = g->col[e];
            int64_t lo = g->rowptr[u], hi = g->rowptr[u + 1];
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (g->col[mid] < v) lo = mid + 1;
                else hi = mid;
            }
            if (lo == g->rowptr[u + 1] || g->col[lo] != v) return 0;
        }
    return 1;
}

int eng_graph_partition(const eng_graph *g, eng_partitioner kind, int parts, uint64_t seed, int32_t *part)
{
    if (parts < 2 || parts > g->n)
        return eng_fail(ENG_EINVAL, "graph.parts = %d: needs 2 <= parts <= %d nodes", parts, g->n);
    if (kind == ENG_PART_RANDOM) {
        eng_rng r;
        eng_rng_seed(&r, seed, 0x50415254ull);
        for (int32_t v = 0; v < g->n; v++) part[v] = (int32_t)eng_rng_below(&r, (uint64_t)parts);
        return ENG_OK;
    }
    if (g->m >= INT32_MAX) return eng_fail(ENG_EINVAL, "graph: %lld edges is beyond METIS's 32-bit indices", (long long)g->m);
    if (!symmetric(g))
        return eng_fail(ENG_EINVAL, "graph.partition = metis needs an undirected graph (every edge in both directions); "
                        "set graph.undirected = true or use graph.partition = random");
    idx_t *xadj = prof_malloc(((size_t)g->n + 1) * sizeof *xadj);
    if (!xadj) return eng_fail(ENG_ENOMEM, "partition: out of memory");
    for (int32_t v = 0; v <= g->n; v++) xadj[v] = (idx_t)g->rowptr[v];
    idx_t nv = g->n, ncon = 1, np = parts, cut = 0, opt[METIS_NOPTIONS];
    METIS_SetDefaultOptions(opt);
    opt[METIS_OPTION_SEED] = (idx_t)(seed & 0x7fffffff);
    int rc = METIS_PartGraphKway(&nv, &ncon, xadj, (idx_t *)g->col, NULL, NULL, NULL, &np, NULL, NULL, opt, &cut,
                                 (idx_t *)part);
    prof_free(xadj);
    if (rc != METIS_OK)
        return eng_fail(ENG_EINVAL, "partition: METIS_PartGraphKway failed (%s) on %d nodes, %d parts",
                        rc == METIS_ERROR_MEMORY ? "out of memory" : rc == METIS_ERROR_INPUT ? "bad input: is the graph undirected?" : "error",
                        g->n, parts);
    return ENG_OK;
}

void eng_part_edge_cut(const eng_graph *g, const int32_t *part, int parts, eng_part_stats *st)
{
    int64_t cut = 0;
    for (int32_t v = 0; v < g->n; v++)
        for (int64_t e = g->rowptr[v]; e < g->rowptr[v + 1]; e++) cut += part[g->col[e]] != part[v];
    st->parts = parts;
    st->cut = cut / 2;
    st->cut_fraction = g->m ? (double)cut / (double)g->m : 0;
}

int eng_part_traffic(const eng_graph *g, const int32_t *part, const int *fanouts, int layers, int batch,
                     int batches, uint64_t seed, eng_part_stats *st)
{
    int parts = st->parts;
    int32_t *members = prof_malloc((size_t)g->n * sizeof *members);
    if (!members) return eng_fail(ENG_ENOMEM, "partition: out of memory");
    eng_sampler *s;
    int rc = eng_sampler_create(g, ENG_SAMPLER_FUSED, fanouts, layers, batch, NULL, &s);
    if (rc) { prof_free(members); return rc; }
    eng_rng r;
    eng_rng_seed(&r, seed, 0x54524146ull);
    double in_nodes = 0, cross = 0;
    long n_batches = 0;
    for (int p = 0; p < parts && !rc; p++) {
        int32_t n = 0;
        for (int32_t v = 0; v < g->n; v++)
            if (part[v] == p) members[n++] = v;
        for (int b = 0; b < batches && n >= batch && !rc; b++) {
            if (eng_builds_stopped()) { rc = eng_build_stop_error("partition figures"); break; }
            for (int i = 0; i < batch; i++) {   /* a partial shuffle: batch distinct seeds of part p */
                int32_t j = i + (int32_t)eng_rng_below(&r, (uint64_t)(n - i)), t = members[i];
                members[i] = members[j]; members[j] = t;
            }
            eng_block *bl;
            rc = eng_sampler_sample(s, members, batch, eng_rng_next(&r), &bl);
            if (rc) break;
            const eng_block *b0 = &bl[0];
            for (int32_t i = 0; i < b0->n_src; i++) cross += part[b0->src_ids[i]] != p;
            in_nodes += b0->n_src;
            n_batches++;
        }
    }
    eng_sampler_free(s);
    prof_free(members);
    if (rc) return rc;
    st->batch_input_nodes = n_batches ? in_nodes / n_batches : 0;
    st->batch_cross_nodes = n_batches ? cross / n_batches : 0;
    st->batch_cross_bytes = st->batch_cross_nodes * (double)g->f * 4.0;
    return ENG_OK;
}
