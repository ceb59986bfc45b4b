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
 *   bit 1 set:   the header's checksum is the input's;
 *   bit 2 set:   the source is a CSV of bytes read as they are (normalize = none), whose
 *                cache holds the byte copy of its inputs and its trailer after the arrays;
 *                clear: a standardised CSV, no copy;
 *   bit 3 set:   (with bit 0 clear) the rest's bytes after the header go to the file's
 *                next 64-byte boundary, where the arrays begin: the key's length (this
 *                process's scratch path, the data keys) moves that boundary, and a seed
 *                stored with the padding of one key length stops reaching the arrays when
 *                the key grows (the first seeds had: "valid" read as a damaged size).
 * Whatever the file holds, the load must not crash or hang: it is a hit whose arrays (and
 * byte copy) are readable and whose labels are class indices, or a rebuild from the
 * source. */
#include "fuzz.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>

#include "../../engine/data/data_internal.h"

#define META_SIZE 144          /* engine/data/data_cache.c cache_meta (versions 2 and 3) */
#define META_HEAD_SUM 136

/* Two sources (input bit 2): each its config, the magic, version, key_len and key of its
 * cache file, and the file's path. */
typedef struct {
    eng_data_config dc;
    uint8_t prefix[4096];
    size_t prefix_len;
    char cache_path[1024];
} source;
static source srcs[2];

static void setup_one(source *s, const char *name, const char *text, eng_norm norm)
{
    const char *p = fuzz_file(name, text, strlen(text));
    struct timespec ts[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
    if (utimensat(AT_FDCWD, p, ts, 0)) abort();
    eng_data_config *dc = &s->dc;
    memset(dc, 0, sizeof *dc);
    dc->source = ENG_DATA_CSV;
    snprintf(dc->path, sizeof dc->path, "%s", p);
    dc->label_column = -1;
    dc->header = -1;
    dc->test_fraction = 0.25;
    dc->normalize = norm;
    dc->cache = 1;
    eng_dataset *ds = NULL;
    if (eng_data_load(dc, 1, &ds) || eng_data_cache_path(dc, 1, s->cache_path, sizeof s->cache_path)) abort();
    if ((norm == ENG_NORM_NONE) != (ds->x_codes != NULL)) abort();   /* bit 2's source has the copy */
    eng_data_free(ds);
    FILE *f = fopen(s->cache_path, "rb");
    uint32_t kl;
    if (!f || fread(s->prefix, 1, 16, f) != 16) abort();
    memcpy(&kl, s->prefix + 12, 4);
    if (16 + (size_t)kl > sizeof s->prefix || fread(s->prefix + 16, 1, kl, f) != kl) abort();
    s->prefix_len = 16 + kl;
    fclose(f);
}

static void setup(void)
{
    char dir[200];
    snprintf(dir, sizeof dir, "%s/cache", fuzz_dir_);
    setenv("NNBENCH_CACHE_DIR", dir, 1);
    setup_one(&srcs[0], "src.csv", "a,b,label\n0,1,0\n1,0,1\n2,2,2\n3,1,0\n4,0,1\n5,2,2\n6,1,0\n7,0,1\n",
              ENG_NORM_STANDARD);
    setup_one(&srcs[1], "bytes.csv", "a,b,label\n0,255,0\n17,3,1\n200,2,2\n3,1,0\n4,90,1\n5,2,2\n6,1,0\n7,0,1\n",
              ENG_NORM_NONE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srcs[0].prefix_len) setup();
    if (!size) return 0;
    uint8_t mode = data[0];
    const source *src = &srcs[(mode >> 2) & 1];
    const uint8_t *prefix = src->prefix;
    size_t prefix_len = src->prefix_len;
    size_t n = size - 1, at = mode & 1 ? 0 : prefix_len, gap = 0;
    if ((mode & 9) == 8 && n > META_SIZE) gap = (64 - (prefix_len + META_SIZE) % 64) % 64;
    uint8_t *file = calloc(1, at + n + gap + 1);
    if (!file) abort();
    memcpy(file, prefix, at);
    if (gap) {
        memcpy(file + at, data + 1, META_SIZE);
        memcpy(file + at + META_SIZE + gap, data + 1 + META_SIZE, n - META_SIZE);
    } else {
        memcpy(file + at, data + 1, n);
    }
    n += at + gap;
    if (!(mode & 2) && n >= prefix_len + META_SIZE) {
        size_t hdr = prefix_len + META_SIZE;
        memset(file + prefix_len + META_HEAD_SUM, 0, 8);
        uint64_t h = eng_data_hash(file, hdr);
        memcpy(file + prefix_len + META_HEAD_SUM, &h, 8);
    }
    FILE *f = fopen(src->cache_path, "wb");
    if (!f || (n && fwrite(file, 1, n, f) != n) || fclose(f)) abort();
    free(file);
    eng_dataset *ds = NULL;
    if (eng_data_load(&src->dc, 1, &ds) != ENG_OK) return 0;
    /* Touch every value: a hit's arrays must all be there, its labels in range. */
    double s = 0;
    for (size_t i = 0; i < (size_t)ds->n_train * ds->in_size; i++) s += ds->x_train[i];
    for (size_t i = 0; i < (size_t)ds->n_test * ds->in_size; i++) s += ds->x_test[i];
    for (size_t i = 0; ds->x_codes && i < (size_t)ds->n_train * ds->in_size; i++) s += ds->x_codes[i];
    for (int part = 0; part < 2 && ds->classification; part++) {
        const int32_t *y = part ? ds->y_test : ds->y_train;
        for (int i = 0; i < (part ? ds->n_test : ds->n_train); i++)
            if (y[i] < 0 || y[i] >= ds->n_classes) abort();
    }
    if (isnan(s) && !ds->map) abort();               /* a rebuild from the source is finite */
    eng_data_free(ds);
    return 0;
}
