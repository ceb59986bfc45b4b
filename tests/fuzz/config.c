/* config.c — fuzz target: the experiment-file parser (engine/config.c, eng_experiment_load:
 * UTF-8 and BOM handling, inih, sections, variants, keys, layer lists, cross-key checks).
 * The first line of the input, if it starts with "#set ", is passed as one --set. */
#include "fuzz.h"

#include "../../engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *set = NULL;
    char setbuf[512];
    if (size > 5 && !memcmp(data, "#set ", 5)) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t l = (nl ? (size_t)(nl - data) : size) - 5;
        if (l >= sizeof setbuf) l = sizeof setbuf - 1;
        memcpy(setbuf, data + 5, l);
        setbuf[l] = '\0';
        set = setbuf;
    }
    const char *path = fuzz_file("exp.ini", data, size);
    eng_experiment *ex = NULL;
    if (eng_experiment_load(path, set ? &set : NULL, set ? 1 : 0, &ex) == ENG_OK) {
        if (ex->n_variants > 1) eng_experiment_select(ex, ex->variants[ex->n_variants - 1].variant);
        eng_experiment_free(ex);
    }
    return 0;
}
