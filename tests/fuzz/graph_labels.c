/* graph_labels.c — fuzz target: the labels and mask loaders (engine/graph/graph.c). The first
 * byte: the node count 1..128 (bits 1-7) and labels (bit 0 clear) or a train mask; the
 * rest is the file. */
#include "fuzz.h"

#include "../../engine/graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    const char *path = fuzz_file("labels.csv", data + 1, size - 1);
    eng_graph *g = prof_calloc(1, sizeof *g);
    if (!g) return 0;
    g->n = 1 + (data[0] >> 1);
    if (!(data[0] & 1)) {
        if (eng_graph_load_labels(g, path) == ENG_OK)
            for (int32_t v = 0; v < g->n; v++)
                if (g->label[v] < 0 || g->label[v] >= g->classes) abort();
    } else if (eng_graph_load_mask(g, path, ENG_SPLIT_TRAIN) == ENG_OK) {
        for (int32_t v = 0; v < g->n; v++)
            if (g->split[v] != ENG_SPLIT_NONE && g->split[v] != ENG_SPLIT_TRAIN) abort();
    }
    eng_graph_free(g);
    return 0;
}
