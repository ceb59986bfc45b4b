/* graph_edges.c — fuzz target: the graph edge-list loader (engine/graph/graph.c). The first byte
 * picks undirected (bit 0) and the node count 1..128 (the rest), as a run gets it from its
 * features file; the rest is the file. */
#include "fuzz.h"

#include "../../engine/graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    eng_graph *g = NULL;
    if (eng_graph_load_edges(fuzz_file("edges.csv", data + 1, size - 1), data[0] & 1, 1 + (data[0] >> 1), &g) == ENG_OK) {
        /* the CSR a loaded graph promises: rows ascending, ids in range, no self-loops */
        for (int32_t v = 0; v < g->n; v++)
            for (int64_t e = g->rowptr[v]; e < g->rowptr[v + 1]; e++)
                if (g->col[e] < 0 || g->col[e] >= g->n || g->col[e] == v || (e > g->rowptr[v] && g->col[e - 1] >= g->col[e]))
                    abort();
        eng_graph_free(g);
    }
    return 0;
}
