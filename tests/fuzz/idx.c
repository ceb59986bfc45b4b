/* idx.c — fuzz target: the IDX reader (engine/data/data_idx.c), plain and gzipped, through
 * eng_data_load. The input is the images file, then the 4 bytes "LBLS", then the labels
 * file; without that separator both files get the whole input. */
#include "fuzz.h"

#include "../../engine/engine.h"

static const uint8_t *find(const uint8_t *d, size_t n, const char *pat, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(d + i, pat, m)) return d + i;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sep = find(data, size, "LBLS", 4);
    size_t ni = sep ? (size_t)(sep - data) : size;
    eng_data_config dc;
    memset(&dc, 0, sizeof dc);
    dc.source = ENG_DATA_IDX;
    dc.test_fraction = 0.25;
    dc.normalize = ENG_NORM_SCALE;
    snprintf(dc.path, sizeof dc.path, "%s", fuzz_file("images", data, ni));
    snprintf(dc.labels, sizeof dc.labels, "%s",
             sep ? fuzz_file("labels", sep + 4, size - ni - 4) : fuzz_file("labels", data, size));
    eng_dataset *ds = NULL;
    if (eng_data_load(&dc, 1, &ds) == ENG_OK) eng_data_free(ds);
    return 0;
}
