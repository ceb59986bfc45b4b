/* graph_features.c — fuzz target: the node-features loader (engine/graph/graph.c) and the row
 * count that fixes a file graph's node count. The first byte is the node count 1..256;
 * the rest is the file. */
#include "fuzz.h"

#include <math.h>

#include "../../engine/graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    const char *path = fuzz_file("features.csv", data + 1, size - 1);
    int32_t rows = 0;
    eng_graph_count_rows(path, &rows);
    eng_graph *g = prof_calloc(1, sizeof *g);
    if (!g) return 0;
    g->n = 1 + data[0];
    if (eng_graph_load_features(g, path) == ENG_OK) {
        if (rows != g->n) abort();          /* the count and the loader agree on the rows */
        for (size_t i = 0; i < (size_t)g->n * (size_t)g->f; i++)
            if (!isfinite(g->feat[i])) abort(); /* nan and inf never get in */
    }
    eng_graph_free(g);
    return 0;
}
