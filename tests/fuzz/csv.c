/* csv.c — fuzz target: the CSV reader (engine/data/data_csv.c) through eng_data_load. The first
 * byte picks the options (header detect/0/1, label column last/first, classification or
 * regression, normalisation); the rest is the file. */
#include "fuzz.h"

#include "../../engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    uint8_t o = data[0];
    eng_data_config dc;
    memset(&dc, 0, sizeof dc);
    dc.source = ENG_DATA_CSV;
    dc.header = (int)(o & 3) % 3 - 1;
    dc.label_column = o & 4 ? 0 : -1;
    dc.regression = (o & 8) != 0;
    dc.normalize = (eng_norm)((o >> 4) & 3);
    dc.test_fraction = 0.2;
    snprintf(dc.path, sizeof dc.path, "%s", fuzz_file("data.csv", data + 1, size - 1));
    eng_dataset *ds = NULL;
    if (eng_data_load(&dc, 1, &ds) == ENG_OK) eng_data_free(ds);
    return 0;
}
