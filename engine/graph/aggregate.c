/* aggregate.c — the aggregate op of sage layers (self + mean of sampled neighbours, dense
 * or CBSR input), one op of the op table (ops.c). Its own file so that the op table and
 * the graph task (gnn.c, which runs ops through the table) do not call each other.
 *
 * Aggregate counters (4 bytes per float or int32), R = rows (destinations), E = sampled
 * edges of the block, w = in (dense input) or k (CBSR input), 2·in outputs per row:
 *   fwd FLOPs E·w + R·in (sums, then the scale)     bytes/4  R·w + E·w + 2·R·in (+ R·k + E·k for CBSR indices)
 *   bwd FLOPs R·w + 2·E·w                            bytes/4  2·R·in + R·w + 2·E·w  (+ the same indices)
 */
#include "graph.h"
#include "../internal.h"

#include <string.h>

#define U64(x) ((uint64_t)(x))

/* ---- the aggregate op --------------------------------------------------------------- */

void eng_aggregate_fwd(eng_node *n, int rows)
{
    const eng_block *b = n->blk;
    size_t in = n->in_size, k = (size_t)n->k;
    for (int i = 0; i < rows; i++) {
        float *restrict self = n->y + (size_t)i * 2 * in, *restrict nb = self + in;
        int64_t a = b->indptr[i], z = b->indptr[i + 1];
        float inv = z > a ? 1.0f / (float)(z - a) : 0.0f;
        if (!k) {
            memcpy(self, n->x + (size_t)i * in, in * sizeof(float));
            memset(nb, 0, in * sizeof(float));
            for (int64_t e = a; e < z; e++) {
                const float *restrict h = n->x + (size_t)b->indices[e] * in;
                for (size_t c = 0; c < in; c++) nb[c] += h[c];
            }
        } else {
            memset(self, 0, 2 * in * sizeof(float));
            const float *v = n->x + (size_t)i * k;
            const int32_t *ix = n->idx + (size_t)i * k;
            for (size_t t = 0; t < k; t++) self[ix[t]] = v[t];
            for (int64_t e = a; e < z; e++) {
                size_t j = (size_t)b->indices[e];
                v = n->x + j * k;
                ix = n->idx + j * k;
                for (size_t t = 0; t < k; t++) nb[ix[t]] += v[t];
            }
        }
        for (size_t c = 0; c < in; c++) nb[c] *= inv;
    }
}

void eng_aggregate_bwd(eng_node *n, int rows)
{
    if (!n->dx) return;
    const eng_block *b = n->blk;
    size_t in = n->in_size, k = (size_t)n->k, w = k ? k : in;
    memset(n->dx, 0, (size_t)b->n_src * w * sizeof(float));
    for (int i = 0; i < rows; i++) {
        const float *dself = n->dy + (size_t)i * 2 * in, *dnb = dself + in;
        int64_t a = b->indptr[i], z = b->indptr[i + 1];
        float inv = z > a ? 1.0f / (float)(z - a) : 0.0f;
        if (!k) {
            float *restrict dh = n->dx + (size_t)i * in;
            for (size_t c = 0; c < in; c++) dh[c] += dself[c];
            for (int64_t e = a; e < z; e++) {
                float *restrict dj = n->dx + (size_t)b->indices[e] * in;
                for (size_t c = 0; c < in; c++) dj[c] += inv * dnb[c];
            }
        } else {
            float *dv = n->dx + (size_t)i * k;
            const int32_t *ix = n->idx + (size_t)i * k;
            for (size_t t = 0; t < k; t++) dv[t] += dself[ix[t]];
            for (int64_t e = a; e < z; e++) {
                size_t j = (size_t)b->indices[e];
                dv = n->dx + j * k;
                ix = n->idx + j * k;
                for (size_t t = 0; t < k; t++) dv[t] += inv * dnb[ix[t]];
            }
        }
    }
}

uint64_t eng_aggregate_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t E = U64(n->blk->indptr[rows]), w = n->k ? U64(n->k) : U64(n->in_size);
    return dir == ENG_FWD ? E * w + U64(rows) * n->in_size : U64(rows) * w + 2 * E * w;
}

uint64_t eng_aggregate_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t R = U64(rows), E = U64(n->blk->indptr[rows]), k = U64(n->k), w = k ? k : U64(n->in_size);
    uint64_t e = dir == ENG_FWD ? R * w + E * w + 2 * R * n->in_size : 2 * R * n->in_size + R * w + 2 * E * w;
    return 4 * (e + R * k + E * k);
}
