/* cache.c — fuzz target: the data cache file loader (engine/data/data_cache.c) through
 * eng_data_load with data.cache on. A fixed CSV source (fixed size and mtime) makes the
 * cache key the same in every process. The first input byte picks how the rest becomes
 * the cache file:
 *   bit 0 clear: the real magic, version and key of this config, then the rest (header and
 *                arrays), so that mutations reach past the key comparison;
 *   bit 0 set:   the rest is the whole file (magic, version and key included);
 *   bit 1 clear: the header's own checksum is then recomputed, as a hostile file would do
 *                (and must be: the key it covers names this process's scratch directory),
 *                so that mutated header fields reach the validation behind it;
 *   bit 1 set:   the header's checksum is the input's.
 * Whatever the file holds, the load must not crash or hang: it is a hit whose arrays are
 * readable and whose labels are class indices, or a rebuild from the source. */
#include "fuzz.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>

#include "../../engine/data/data_internal.h"

#define META_SIZE 144          /* engine/data/data_cache.c cache_meta (versions 2 and 3) */
#define META_HEAD_SUM 136

static eng_data_config dc;
static uint8_t prefix[4096];   /* magic, version, key_len, key */
static size_t prefix_len;
static char cache_path[1024];

static void setup(void)
{
    static const char src[] = "a,b,label\n0,1,0\n1,0,1\n2,2,2\n3,1,0\n4,0,1\n5,2,2\n6,1,0\n7,0,1\n";
    const char *p = fuzz_file("src.csv", src, sizeof src - 1);
    struct timespec ts[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
    if (utimensat(AT_FDCWD, p, ts, 0)) abort();
    char dir[200];
    snprintf(dir, sizeof dir, "%s/cache", fuzz_dir_);
    setenv("NNBENCH_CACHE_DIR", dir, 1);
    memset(&dc, 0, sizeof dc);
    dc.source = ENG_DATA_CSV;
    snprintf(dc.path, sizeof dc.path, "%s", p);
    dc.label_column = -1;
    dc.header = -1;
    dc.test_fraction = 0.25;
    dc.normalize = ENG_NORM_STANDARD;
    dc.cache = 1;
    eng_dataset *ds = NULL;
    if (eng_data_load(&dc, 1, &ds) || eng_data_cache_path(&dc, 1, cache_path, sizeof cache_path)) abort();
    eng_data_free(ds);
    FILE *f = fopen(cache_path, "rb");
    uint32_t kl;
    if (!f || fread(prefix, 1, 16, f) != 16) abort();
    memcpy(&kl, prefix + 12, 4);
    if (16 + (size_t)kl > sizeof prefix || fread(prefix + 16, 1, kl, f) != kl) abort();
    prefix_len = 16 + kl;
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!prefix_len) setup();
    if (!size) return 0;
    uint8_t mode = data[0];
    size_t n = size - 1, at = mode & 1 ? 0 : prefix_len;
    uint8_t *file = malloc(at + n + 1);
    if (!file) abort();
    memcpy(file, prefix, at);
    memcpy(file + at, data + 1, n);
    n += at;
    if (!(mode & 2) && n >= prefix_len + META_SIZE) {
        size_t hdr = prefix_len + META_SIZE;
        memset(file + prefix_len + META_HEAD_SUM, 0, 8);
        uint64_t h = eng_data_hash(file, hdr);
        memcpy(file + prefix_len + META_HEAD_SUM, &h, 8);
    }
    FILE *f = fopen(cache_path, "wb");
    if (!f || (n && fwrite(file, 1, n, f) != n) || fclose(f)) abort();
    free(file);
    eng_dataset *ds = NULL;
    if (eng_data_load(&dc, 1, &ds) != ENG_OK) return 0;
    /* Touch every value: a hit's arrays must all be there, its labels in range. */
    double s = 0;
    for (size_t i = 0; i < (size_t)ds->n_train * ds->in_size; i++) s += ds->x_train[i];
    for (size_t i = 0; i < (size_t)ds->n_test * ds->in_size; i++) s += ds->x_test[i];
    for (int part = 0; part < 2 && ds->classification; part++) {
        const int32_t *y = part ? ds->y_test : ds->y_train;
        for (int i = 0; i < (part ? ds->n_test : ds->n_train); i++)
            if (y[i] < 0 || y[i] >= ds->n_classes) abort();
    }
    if (isnan(s) && !ds->map) abort();               /* a rebuild from the source is finite */
    eng_data_free(ds);
    return 0;
}
