/* ckpt.c — fuzz target: the checkpoint record reader (engine/checkpoint.c, eng_ckpt_read)
 * that eval, quantize, export-model and resume run on the BLOB from the database. Each
 * input is read as it is and again with its checksum made valid for the version it claims
 * (so mutations get past the checksum into the fields), into a model of the size the record claims (at most 2^16
 * parameters, else one: the "another model" refusal) with the optimizer state its flags
 * name, once in full and once parameters only. A record accepted must hold finite
 * parameters only. In memory: no file, so not fuzz.h's scratch files. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_record(const uint8_t *rec, size_t n)
{
    uint64_t np = 1;
    int32_t fields[4] = { 0, 0, 0, 0 };   /* n_train, batch, optimizer, flags */
    eng_ckpt c;
    memset(&c, 0, sizeof c);
    if (n >= 80) {
        int64_t steps;
        memcpy(&c.seed, rec + 32, 8);
        memcpy(&steps, rec + 40, 8);
        memcpy(&np, rec + 48, 8);
        memcpy(fields, rec + 56, sizeof fields);
        c.total_steps = (long)steps;
    }
    if (np > (1u << 16)) np = 1;
    c.n_params = np;
    c.n_train = fields[0];
    c.batch = fields[1];
    c.optimizer = fields[2];
    size_t bytes = (size_t)(np ? np : 1) * sizeof(float);
    float *p = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    long t = 0;
    if (!p || !m || !v) abort();
    c.params = p;
    c.m = (fields[3] & 1) ? m : NULL;
    c.v = (fields[3] & 2) ? v : NULL;
    c.opt_t = &t;
    for (int params_only = 0; params_only < 2; params_only++) {
        memset(p, 0, bytes);
        if (eng_ckpt_read(&c, rec, n, params_only) != ENG_OK) continue;
        for (uint64_t i = 0; i < np; i++)
            if (!isfinite(p[i])) abort();   /* a non-finite weight got through */
    }
    free(p);
    free(m);
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_record(data, size);
    if (size < 32) return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed) return 0;
    memcpy(fixed, data, size);
    uint32_t version;
    memcpy(&version, fixed + 8, 4);
    uint64_t sum = eng_ckpt_checksum(version, fixed + 32, size - 32);
    memcpy(fixed + 24, &sum, 8);
    read_record(fixed, size);
    free(fixed);
    return 0;
}
