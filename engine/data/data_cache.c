/* data_cache.c — data.cache: the decoded, split and normalised dataset kept in one binary
 * file per data configuration, read back on later runs instead of decoding again.
 *
 * Where: $NNBENCH_CACHE_DIR, else $XDG_CACHE_HOME/nnbench, else $HOME/.cache/nnbench; the
 * file is data-<source base name>-<16 hex digits>.nnbc, the digits a hash of the key: every
 * [data] key that shapes the loaded arrays (eng_data_key walks the key table, so a new key
 * cannot be left out) and the seed. The file begins with the full key text, which also
 * holds every source file's size and mtime: a changed source fails the comparison and the
 * file is rebuilt in place.
 *
 * Layout (native byte order, this machine's floats): "NNBCACHE" u32 version u32 key_len,
 * key text, a header (meta: shapes, a checksum of each array and of the header itself),
 * then the arrays, each at a 64-byte aligned offset; when the training inputs are bytes of
 * one scale (data_codes.c), their byte copy at the next aligned offset and a trailer
 * ("NNBCODES", the scale, the copy's checksum); the file ends there. The
 * loader trusts nothing in it: it opens without blocking and only a regular file, checks
 * every header field against sane limits and the file's size (overflow-safe), maps the
 * file with every page resident, checksums every array and range-checks the labels; a
 * damaged file is named in a note (eng_data_cache_damage) and rebuilt from the source. */
#include "data_internal.h"
#include "../internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "NNBCACHE"
#define CACHE_VERSION 3u     /* 2: checksums (issue 22); 3: the byte copy; an older file is rebuilt */
#define CODES_MAGIC "NNBCODES"
#define KEY_MAX 16384
#define CACHE_MAX_BYTES (64LL << 30)
#define CACHE_MAX_DIM (1 << 24)          /* one in_shape entry */
#define CACHE_MAX_ROW (1LL << 28)        /* values in one sample */
#define CACHE_MAX_CLASSES (1 << 24)      /* classes, or regression targets */

static _Thread_local eng_cache_state last_state;
static _Thread_local char last_damage[1400];
eng_cache_state eng_data_cache_last(void) { return last_state; }
const char *eng_data_cache_damage(void) { return last_damage[0] ? last_damage : NULL; }

typedef struct {
    char name[64];
    int32_t classification, n_classes, n_targets, in_shape[3];
    uint64_t in_size;
    int32_t n_train, n_test;
    uint64_t sum[4];          /* eng_data_hash of x_train, labels train, x_test, labels test */
    uint64_t head_sum;        /* eng_data_hash of everything before the arrays, this field 0 */
} cache_meta;

/* After the byte copy of the training inputs, when there is one. */
typedef struct {
    char magic[8];            /* CODES_MAGIC */
    double scale;             /* eng_dataset.x_code_scale */
    uint64_t sum;             /* eng_data_hash of the copy */
} codes_trailer;

/* ---- the checksum ---------------------------------------------------------------------
 * Sixteen 32-bit multiply-rotate lanes (xxHash32's round) over 64-byte blocks, folded into
 * 64 bits with xxHash64's round: with AVX2 the lanes are two vector registers and the pass
 * runs near memory speed, so checking every array keeps a cache hit cheap (bench row 8:
 * Fashion-MNIST's whole cache load, mapping and checksums, 55-71 ms against 3.3 s of gz
 * decoding at load average 12; 8 scalar 64-bit lanes took 2-3x longer). The same
 * arithmetic without AVX2 gives the same value, only slower: a fingerprint means the same
 * on any machine (test_data_hash_paths). */
#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define Q1 0x9E3779B1u
#define Q2 0x85EBCA77u

typedef uint32_t u32x8 __attribute__((vector_size(32)));

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t round64(uint64_t acc, uint64_t in) { return rotl64(acc + in * P2, 31) * P1; }

/* The lanes over the whole 64-byte blocks of p; returns the bytes consumed. */
#define HASH_LANES(name, attr)                                                              \
    static attr size_t name(const unsigned char *p, size_t n, u32x8 lanes[2])               \
    {                                                                                       \
        u32x8 a = lanes[0], b = lanes[1];                                                   \
        size_t i = 0;                                                                       \
        for (; i + 64 <= n; i += 64) {                                                      \
            u32x8 w0, w1;                                                                   \
            memcpy(&w0, p + i, 32);                                                         \
            memcpy(&w1, p + i + 32, 32);                                                    \
            a += w0 * Q2; a = (a << 13) | (a >> 19); a *= Q1;                              \
            b += w1 * Q2; b = (b << 13) | (b >> 19); b *= Q1;                              \
        }                                                                                   \
        lanes[0] = a;                                                                       \
        lanes[1] = b;                                                                       \
        return i;                                                                           \
    }
HASH_LANES(lanes_generic, )
#if defined(__x86_64__) || defined(__i386__)
HASH_LANES(lanes_avx2, __attribute__((target("avx2"))))
#endif

static uint64_t hash_piece(const unsigned char *p, size_t n, uint64_t seed, int generic)
{
    u32x8 lanes[2];
    uint32_t init[16];
    for (int k = 0; k < 16; k++) init[k] = (uint32_t)seed + (uint32_t)k * Q1;
    memcpy(lanes, init, sizeof init);
#if defined(__x86_64__) || defined(__i386__)
    size_t i = !generic && __builtin_cpu_supports("avx2") ? lanes_avx2(p, n, lanes) : lanes_generic(p, n, lanes);
#else
    (void)generic;
    size_t i = lanes_generic(p, n, lanes);
#endif
    uint32_t v[16];
    memcpy(v, lanes, sizeof v);
    uint64_t h = seed ^ n;
    for (int k = 0; k < 8; k++) h = round64(h, (uint64_t)v[k] | (uint64_t)v[k + 8] << 32);
    for (; i < n; i++) h = rotl64(h ^ (p[i] * P3), 11) * P1;
    h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32;
    return h;
}

uint64_t eng_data_hash_path(const void *p, size_t n, int generic) { return hash_piece(p, n, P3, generic); }
uint64_t eng_data_hash(const void *p, size_t n) { return hash_piece(p, n, P3, 0); }

/* ---- the key ----------------------------------------------------------------------- */

/* Appends printf output to key (len tracked); returns -1 when it would not fit. */
static int kappend(char *key, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int kappend(char *key, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(key + *len, KEY_MAX - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= KEY_MAX - *len) return -1;
    *len += (size_t)n;
    return 0;
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* One source path's identity: its size and mtime; for a directory (idx), every regular
 * file in it, by name. */
static int key_file(char *key, size_t *len, const char *what, const char *path)
{
    if (!path[0]) return kappend(key, len, "%s=\n", what);
    struct stat st;
    if (stat(path, &st) != 0)
        return eng_fail(ENG_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return kappend(key, len, "%s=%s size=%lld mtime=%lld.%09ld\n", what, path, (long long)st.st_size,
                       (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec) ? eng_fail(ENG_EINVAL, "data.cache: key too long") : 0;
    DIR *d = opendir(path);
    if (!d) return eng_fail(ENG_EIO, "%s: cannot open: %s", path, strerror(errno));
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        if (e->d_name[0] == '.') continue;
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = kappend(key, len, "%s=%s (directory)\n", what, path);
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (!rc && stat(p, &st) == 0 && S_ISREG(st.st_mode))
            rc = kappend(key, len, "  %s size=%lld mtime=%lld.%09ld\n", names[i], (long long)st.st_size,
                         (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        free(names[i]);
    }
    return rc ? eng_fail(ENG_EINVAL, "data.cache: key too long") : 0;
}


/* The configuration part of the key (what names the file) and, with stats, the sources'
 * identities (what decides whether the file is still good). */
static int make_key(const eng_data_config *dc, uint64_t seed, int stats, char *key, size_t *len)
{
    int rc = eng_data_key(dc, key, KEY_MAX, len);
    if (rc) return rc;
    if (kappend(key, len, "experiment.seed=%llu\n", (unsigned long long)seed))
        return eng_fail(ENG_EINVAL, "data.cache: key too long");
    if (!stats) return ENG_OK;
    if ((rc = key_file(key, len, "stat path", dc->path))) return rc;
    if ((rc = key_file(key, len, "stat labels", dc->labels))) return rc;
    if ((rc = key_file(key, len, "stat test_path", dc->test_path))) return rc;
    return key_file(key, len, "stat test_labels", dc->test_labels);
}

/* The cache directory (eng_cache_dir), its failure said as data.cache's. */
static int cache_dir(char *buf, size_t cap)
{
    int rc = eng_cache_dir(buf, cap);
    return rc ? eng_fail(rc, "data.cache: %s", eng_error()) : ENG_OK;
}

int eng_data_cache_path(const eng_data_config *dc, uint64_t seed, char *buf, size_t cap)
{
    char dir[512];
    int rc = cache_dir(dir, sizeof dir);
    if (rc) return rc;
    char *key = malloc(KEY_MAX);
    if (!key) return eng_fail(ENG_ENOMEM, "data.cache: out of memory");
    size_t len;
    rc = make_key(dc, seed, 0, key, &len);
    uint64_t h = rc ? 0 : eng_data_hash(key, len);
    free(key);
    if (rc) return rc;
    char base[64];
    snprintf(base, sizeof base, "%s", eng_data_basename(dc->path));
    for (char *p = base; *p; p++)
        if (*p == '/' || *p == ' ') *p = '_';
    int n = snprintf(buf, cap, "%s/data-%s-%016llx.nnbc", dir, base, (unsigned long long)h);
    if (n < 0 || (size_t)n >= cap) return eng_fail(ENG_EINVAL, "data.cache: cache path too long");
    return ENG_OK;
}

/* ---- layout ------------------------------------------------------------------------ */

static int add_ok(size_t a, size_t b, size_t *out) { *out = a + b; return *out >= a; }
static int mul_ok(size_t a, size_t b, size_t *out) { *out = a * b; return !a || *out / a == b; }
static int align64_ok(size_t v, size_t *out)
{
    if (!add_ok(v, 63, out)) return 0;
    *out &= ~(size_t)63;
    return 1;
}

/* Offsets and sizes of the arrays after a header of hdr bytes: x_train, labels/targets
 * train, x_test, labels/targets test; the total size into *total. 0 when a size would
 * overflow (a damaged header). */
static int layout(const cache_meta *m, size_t hdr, size_t off[4], size_t sz[4], size_t *total)
{
    size_t lab = m->classification ? sizeof(int32_t) : (size_t)m->n_targets * sizeof(float);
    size_t row, o;
    if (!mul_ok((size_t)m->in_size, sizeof(float), &row) || !align64_ok(hdr, &o)) return 0;
    int ok = mul_ok((size_t)m->n_train, row, &sz[0]) && mul_ok((size_t)m->n_train, lab, &sz[1]) &&
             mul_ok((size_t)m->n_test, row, &sz[2]) && mul_ok((size_t)m->n_test, lab, &sz[3]);
    for (int i = 0; ok && i < 4; i++) {
        off[i] = o;
        ok = add_ok(o, sz[i], &o) && (i == 3 || align64_ok(o, &o));
    }
    *total = o;
    return ok;
}

/* Why m cannot describe a dataset ("in_shape[0] = 100000"), or NULL when it can. Limits
 * first, so that layout's arithmetic stays far from overflow on any field. */
static const char *meta_invalid(const cache_meta *m, char *why, size_t cap)
{
    if (m->name[sizeof m->name - 1] != '\0') return "the dataset name is not terminated";
    if (m->classification != 0 && m->classification != 1)
        return snprintf(why, cap, "classification = %d", (int)m->classification), why;
    int32_t k = m->classification ? m->n_classes : m->n_targets;
    if (k < 1 || k > CACHE_MAX_CLASSES)
        return snprintf(why, cap, "%s = %d", m->classification ? "n_classes" : "n_targets", (int)k), why;
    long long vol = 1;
    for (int i = 0; i < 3; i++) {
        if (m->in_shape[i] < 1 || m->in_shape[i] > CACHE_MAX_DIM)
            return snprintf(why, cap, "in_shape[%d] = %d", i, (int)m->in_shape[i]), why;
        vol *= m->in_shape[i];
        if (vol > CACHE_MAX_ROW) return snprintf(why, cap, "in_shape %dx%dx%d is too large", (int)m->in_shape[0],
                                                 (int)m->in_shape[1], (int)m->in_shape[2]), why;
    }
    if (m->in_size != (uint64_t)vol)
        return snprintf(why, cap, "in_size = %llu, but in_shape gives %lld", (unsigned long long)m->in_size, vol), why;
    if (m->n_train < 1 || m->n_test < 0)
        return snprintf(why, cap, "n_train = %d, n_test = %d", (int)m->n_train, (int)m->n_test), why;
    return NULL;
}

/* ---- loading ----------------------------------------------------------------------- */

enum { C_MISS, C_HIT, C_DAMAGED, C_FAILED };

/* The four arrays, in file order (labels: class indices or regression targets). */
static const char *const array_names[4] = { "training inputs", "training labels", "test inputs", "test labels" };

/* n bytes at off into dst; 0 when the file ends first or the read fails. */
static int read_at(int fd, void *dst, size_t n, size_t off)
{
    char *p = dst;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        p += r;
        off += (size_t)r;
        n -= (size_t)r;
    }
    return 1;
}

void eng_data_cache_unmap(eng_dataset *ds)
{
    if (ds->map) munmap(ds->map, ds->map_len);
    ds->map = NULL;
    ds->map_len = 0;
}

/* Reads the magic, version, key and header; C_HIT (m filled, checked) when they are this
 * key's and intact, C_MISS when the file is another version's or another key's. */
static int read_head(int fd, size_t size, const char *key, size_t klen, cache_meta *m, char *why, size_t cap)
{
    size_t hdr = 16 + klen + sizeof *m;
    char head[16];
    if (size < 16 || !read_at(fd, head, 16, 0))
        return snprintf(why, cap, "%zu bytes is too short for a cache file", size), C_DAMAGED;
    if (memcmp(head, CACHE_MAGIC, 8)) return snprintf(why, cap, "it does not begin with " CACHE_MAGIC), C_DAMAGED;
    uint32_t ver, kl;
    memcpy(&ver, head + 8, 4);
    memcpy(&kl, head + 12, 4);
    if (ver != CACHE_VERSION || kl != klen) return C_MISS;     /* an older nnbench's, or a changed source */
    if (size < hdr) return snprintf(why, cap, "%zu bytes is too short for its header", size), C_DAMAGED;
    char *buf = malloc(hdr);
    if (!buf) return eng_fail(ENG_ENOMEM, "data.cache: out of memory"), C_FAILED;
    int st = C_HIT;
    if (!read_at(fd, buf, hdr, 0)) st = (snprintf(why, cap, "it cannot be read"), C_DAMAGED);
    else if (memcmp(buf + 16, key, klen)) st = C_MISS;
    if (st == C_HIT) {
        memcpy(m, buf + 16 + klen, sizeof *m);
        uint64_t want = m->head_sum;
        memset(buf + 16 + klen + offsetof(cache_meta, head_sum), 0, sizeof want);
        if (eng_data_hash(buf, hdr) != want) st = (snprintf(why, cap, "the header's checksum does not match"), C_DAMAGED);
    }
    free(buf);
    char bad[160];
    const char *b = st == C_HIT ? meta_invalid(m, bad, sizeof bad) : NULL;
    if (b) st = (snprintf(why, cap, "its header is impossible: %s", b), C_DAMAGED);
    return st;
}

/* A class index outside 0..n_classes-1 (the checksum aside: what the loss would index). */
static int labels_valid(const eng_dataset *ds, char *why, size_t cap)
{
    for (int part = 0; part < 2; part++) {
        const int32_t *y = part ? ds->y_test : ds->y_train;
        int n = part ? ds->n_test : ds->n_train;
        for (int i = 0; y && i < n; i++)
            if (y[i] < 0 || y[i] >= ds->n_classes) {
                snprintf(why, cap, "%s label %d is %d, outside the %d classes", part ? "test" : "training", i + 1,
                         (int)y[i], ds->n_classes);
                return 0;
            }
    }
    return 1;
}

/* Where the byte copy of the training inputs lies in a file of size bytes whose arrays end
 * at end: 0 when the file ends with the arrays (no copy), 1 with *off and *len set when it
 * holds a copy and its trailer, -1 when its size fits neither. */
static int codes_span(const cache_meta *m, size_t end, size_t size, size_t *off, size_t *len)
{
    if (size == end) return 0;
    size_t o, e;
    if (!align64_ok(end, &o) || !mul_ok((size_t)m->n_train, (size_t)m->in_size, len) || !add_ok(o, *len, &e) ||
        !add_ok(e, sizeof(codes_trailer), &e) || e != size)
        return -1;
    *off = o;
    return 1;
}

/* The byte copy at off (len bytes, its trailer after it) of the mapped file: its trailer
 * and checksum checked, then served as ds->x_codes (eng_data_codes_free leaves it to the
 * unmap). Building it again on every hit, a pass over every training value, took longer
 * than mapping and checksumming the whole file. */
static int map_codes(const char *map, size_t off, size_t len, eng_dataset *ds, char *why, size_t cap)
{
    codes_trailer t;
    memcpy(&t, map + off + len, sizeof t);
    if (memcmp(t.magic, CODES_MAGIC, 8) || !eng_data_code_scale_known(t.scale))
        return snprintf(why, cap, "the trailer of the training inputs' byte copy is not valid"), C_DAMAGED;
    if (eng_data_hash(map + off, len) != t.sum)
        return snprintf(why, cap, "the checksum of the training inputs' byte copy does not match"), C_DAMAGED;
    ds->x_codes = (uint8_t *)(uintptr_t)(map + off);
    ds->x_code_scale = t.scale;
    return C_HIT;
}

/* 0 after writing why, when the file no longer has the size it had when it was opened (a
 * truncated mapping faults on its next read: checked before each checksum pass). */
static int same_size(int fd, size_t size, char *why, size_t cap)
{
    struct stat st;
    if (!fstat(fd, &st) && (size_t)st.st_size == size) return 1;
    snprintf(why, cap, "it changed size while it was read");
    return 0;
}

/* The arrays of a checked header: mapped, checksummed, their labels checked.
 *
 * Mapped, not read: on a VM that returns freed memory to its host, a copy into fresh
 * memory cost 300-1000 ms for Fashion-MNIST's 220 MB (as slow as decoding the gz files;
 * bench row 8 measured the decode/load ratio at 2-4 instead of >= 10), while mapping the
 * page cache costs a few ms. MAP_POPULATE makes every page resident before the checksum
 * pass, and the size is checked again before each array's checksum, so a truncation
 * during the load is caught (short of one landing between that check and the sum). A
 * mapping cannot be protected from a truncation by another process later, while the run
 * trains (the kernel unmaps the pages: SIGBUS): nnbench itself never truncates a cache in
 * place (it replaces it by rename, which leaves a running mapping intact). */
static int map_arrays(int fd, size_t size, size_t klen, const cache_meta *m, eng_dataset *ds, char *why, size_t cap)
{
    size_t off[4], sz[4], total, coff = 0, clen = 0;
    if (!layout(m, 16 + klen + sizeof *m, off, sz, &total))
        return snprintf(why, cap, "its header's array sizes overflow"), C_DAMAGED;
    int codes = codes_span(m, total, size, &coff, &clen);
    if (codes < 0)   /* the limits meta_invalid checked keep these sums far from overflow */
        return snprintf(why, cap, "its header describes %zu bytes of data, or %zu with a byte copy of the inputs; "
                        "the file has %zu", total, ((total + 63) & ~(size_t)63) + (size_t)m->n_train * (size_t)m->in_size +
                        sizeof(codes_trailer), size), C_DAMAGED;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) return snprintf(why, cap, "it cannot be mapped: %s", strerror(errno)), C_DAMAGED;
    ds->map = map;
    ds->map_len = size;
    memcpy(ds->name, m->name, sizeof ds->name);
    ds->classification = m->classification;
    ds->n_classes = m->classification ? m->n_classes : 0;
    ds->n_targets = m->classification ? 0 : m->n_targets;
    memcpy(ds->in_shape, m->in_shape, sizeof ds->in_shape);
    ds->in_size = (size_t)m->in_size;
    ds->n_train = m->n_train;
    ds->n_test = m->n_test;
    void *part[4];
    for (int i = 0; i < 4; i++) part[i] = sz[i] ? (char *)map + off[i] : NULL;
    ds->x_train = part[0];
    ds->x_test = part[2];
    if (ds->classification) { ds->y_train = part[1]; ds->y_test = part[3]; }
    else { ds->t_train = part[1]; ds->t_test = part[3]; }
    for (int i = 0; i < 4; i++) {
        if (!same_size(fd, size, why, cap)) return C_DAMAGED;
        ds->sum[i] = eng_data_hash(part[i], sz[i]);
        if (ds->sum[i] != m->sum[i]) return snprintf(why, cap, "the checksum of the %s does not match", array_names[i]), C_DAMAGED;
    }
    if (ds->classification && !labels_valid(ds, why, cap)) return C_DAMAGED;
    if (codes && (!same_size(fd, size, why, cap) || map_codes(map, coff, clen, ds, why, cap) != C_HIT)) return C_DAMAGED;
    ds->sum_set = 1;
    return C_HIT;
}

/* Opens path without blocking (a FIFO there would block forever) and checks it is a
 * regular file of a sane size; then the header, then the arrays. */
static int load_file(const char *path, const char *key, size_t klen, eng_dataset *ds, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return C_MISS;                  /* no cache yet */
        return snprintf(why, cap, "it cannot be opened: %s", strerror(errno)), C_DAMAGED;
    }
    struct stat st;
    int rc = C_DAMAGED;
    cache_meta m;
    if (fstat(fd, &st)) snprintf(why, cap, "it cannot be read: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode)) snprintf(why, cap, "it is not a regular file");
    else if (st.st_size > CACHE_MAX_BYTES) snprintf(why, cap, "%lld bytes is over the cap", (long long)st.st_size);
    else if ((rc = read_head(fd, (size_t)st.st_size, key, klen, &m, why, cap)) == C_HIT)
        rc = map_arrays(fd, (size_t)st.st_size, klen, &m, ds, why, cap);
    close(fd);
    return rc;
}

int eng_data_cache_load(const eng_data_config *dc, uint64_t seed, eng_dataset *ds, int *hit)
{
    *hit = 0;
    char path[1024];
    int rc = eng_data_cache_path(dc, seed, path, sizeof path);
    if (rc) return rc;
    char *key = malloc(KEY_MAX);
    if (!key) return eng_fail(ENG_ENOMEM, "data.cache: out of memory");
    size_t klen;
    if ((rc = make_key(dc, seed, 1, key, &klen))) { free(key); return rc; }
    char why[300] = "";
    int st = load_file(path, key, klen, ds, why, sizeof why);
    free(key);
    if (st == C_HIT) { *hit = 1; return ENG_OK; }
    eng_data_cache_unmap(ds);                                 /* what a damaged file filled */
    memset(ds, 0, sizeof *ds);
    if (st == C_FAILED) return ENG_ENOMEM;
    if (st == C_DAMAGED)
        snprintf(last_damage, sizeof last_damage, "data.cache: %.1000s was damaged (%.300s); rebuilt from the source", path, why);
    return ENG_OK;
}

/* ---- writing ----------------------------------------------------------------------- */


static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int pad_to(int fd, size_t *at, size_t to)
{
    static const char zero[64];
    if (to > *at && write_all(fd, zero, to - *at)) return -1;
    *at = to;
    return 0;
}

/* The four arrays of ds in file order, with their sizes (labels or targets). */
static void parts_of(const eng_dataset *ds, const void *parts[4], size_t sizes[4])
{
    size_t lab = ds->classification ? sizeof(int32_t) : (size_t)ds->n_targets * sizeof(float);
    size_t row = ds->in_size * sizeof(float);
    parts[0] = ds->x_train;
    parts[1] = ds->classification ? (const void *)ds->y_train : (const void *)ds->t_train;
    parts[2] = ds->x_test;
    parts[3] = ds->classification ? (const void *)ds->y_test : (const void *)ds->t_test;
    sizes[0] = (size_t)ds->n_train * row;
    sizes[1] = (size_t)ds->n_train * lab;
    sizes[2] = (size_t)ds->n_test * row;
    sizes[3] = (size_t)ds->n_test * lab;
}

void eng_data_sums(eng_dataset *ds)
{
    if (ds->sum_set) return;
    const void *parts[4];
    size_t sizes[4];
    parts_of(ds, parts, sizes);
    for (int i = 0; i < 4; i++) ds->sum[i] = eng_data_hash(sizes[i] ? parts[i] : NULL, sizes[i]);
    ds->sum_set = 1;
}

/* The byte copy of the training inputs and its trailer, from the next 64-byte boundary
 * after *at (advanced past them). */
static int write_codes(int fd, size_t *at, const eng_dataset *ds)
{
    size_t n = (size_t)ds->n_train * ds->in_size, o;
    codes_trailer t;
    memset(&t, 0, sizeof t);
    memcpy(t.magic, CODES_MAGIC, 8);
    t.scale = ds->x_code_scale;
    t.sum = eng_data_hash(ds->x_codes, n);
    if (!align64_ok(*at, &o) || pad_to(fd, at, o) || write_all(fd, ds->x_codes, n) || write_all(fd, &t, sizeof t))
        return -1;
    *at += n + sizeof t;
    return 0;
}

/* magic, version, key and the header with its own checksum, in one buffer of *len bytes. */
static char *header_of(eng_dataset *ds, const char *key, size_t klen, size_t *len)
{
    cache_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", ds->name);
    m.classification = ds->classification;
    m.n_classes = ds->n_classes;
    m.n_targets = ds->n_targets;
    memcpy(m.in_shape, ds->in_shape, sizeof m.in_shape);
    m.in_size = ds->in_size;
    m.n_train = ds->n_train;
    m.n_test = ds->n_test;
    eng_data_sums(ds);
    memcpy(m.sum, ds->sum, sizeof m.sum);
    *len = 16 + klen + sizeof m;
    char *h = malloc(*len);
    if (!h) return NULL;
    uint32_t ver = CACHE_VERSION, kl = (uint32_t)klen;
    memcpy(h, CACHE_MAGIC, 8);
    memcpy(h + 8, &ver, 4);
    memcpy(h + 12, &kl, 4);
    memcpy(h + 16, key, klen);
    memcpy(h + 16 + klen, &m, sizeof m);
    m.head_sum = eng_data_hash(h, *len);
    memcpy(h + 16 + klen, &m, sizeof m);
    return h;
}

int eng_data_cache_store(const eng_data_config *dc, uint64_t seed, eng_dataset *ds)
{
    char path[1024], dir[512], tmp[1100];
    int rc = eng_data_cache_path(dc, seed, path, sizeof path);
    if (!rc) rc = cache_dir(dir, sizeof dir);
    if (rc) return rc;
    if (eng_mkdirs(dir))
        return eng_fail(ENG_EIO, "data.cache: cannot create the cache directory %s: %s (set NNBENCH_CACHE_DIR "
                        "to a writable directory, or cache = false)", dir, strerror(errno));
    char *key = malloc(KEY_MAX);
    if (!key) return eng_fail(ENG_ENOMEM, "data.cache: out of memory");
    size_t klen, hlen;
    if ((rc = make_key(dc, seed, 1, key, &klen))) { free(key); return rc; }
    char *head = header_of(ds, key, klen, &hlen);
    free(key);
    if (!head) return eng_fail(ENG_ENOMEM, "data.cache: out of memory");
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(head);
        return eng_fail(ENG_EIO, "data.cache: cannot write %s: %s (set NNBENCH_CACHE_DIR to a writable "
                        "directory, or cache = false)", tmp, strerror(errno));
    }
    const void *parts[4];
    size_t sizes[4], off[4], total, at = hlen;
    parts_of(ds, parts, sizes);
    cache_meta m;
    memcpy(&m, head + hlen - sizeof m, sizeof m);
    layout(&m, hlen, off, sizes, &total);
    int bad = write_all(fd, head, hlen);
    free(head);
    for (int i = 0; i < 4 && !bad; i++) {
        bad = pad_to(fd, &at, off[i]);
        if (!bad && sizes[i]) bad = write_all(fd, parts[i], sizes[i]);
        at += sizes[i];
    }
    if (!bad && ds->x_codes) bad = write_codes(fd, &at, ds);
    int err = errno;
    if (close(fd) && !bad) { bad = 1; err = errno; }
    if (bad || rename(tmp, path)) {
        if (!bad) err = errno;
        unlink(tmp);
        return eng_fail(ENG_EIO, "data.cache: cannot write %s: %s (free some space, set NNBENCH_CACHE_DIR "
                        "elsewhere, or cache = false)", path, strerror(err));
    }
    return ENG_OK;
}

/* Used by eng_data_load: records the state for eng_data_cache_last (and forgets the damage
 * note of an earlier load when a new one starts). */
void eng_data_cache_note(eng_cache_state s)
{
    if (s == ENG_CACHE_OFF) last_damage[0] = '\0';
    last_state = s;
}

/* ---- the data's fingerprint (stored with a run; resume compares it) ------------------- */

#define FP_FORMAT "nnbd1 rows=%d+%d shape=%dx%dx%d out=%d x=%016llx y=%016llx tx=%016llx ty=%016llx"

void eng_data_fingerprint(const eng_dataset *ds, char *buf, size_t cap)
{
    eng_dataset copy = *ds;          /* the sums of a set that has none yet, without writing ds */
    eng_data_sums(&copy);
    snprintf(buf, cap, FP_FORMAT, ds->n_train, ds->n_test, ds->in_shape[0], ds->in_shape[1], ds->in_shape[2],
             ds->classification ? ds->n_classes : ds->n_targets, (unsigned long long)copy.sum[0],
             (unsigned long long)copy.sum[1], (unsigned long long)copy.sum[2], (unsigned long long)copy.sum[3]);
}

typedef struct { int rows[2], shape[3], out; unsigned long long sum[4]; } fp_parts;

static int fp_parse(const char *s, fp_parts *p)
{
    return sscanf(s, FP_FORMAT, &p->rows[0], &p->rows[1], &p->shape[0], &p->shape[1], &p->shape[2], &p->out,
                  &p->sum[0], &p->sum[1], &p->sum[2], &p->sum[3]) == 10;
}

int eng_data_fingerprint_diff(const char *was, const char *now, char *why, size_t cap)
{
    if (!strcmp(was, now)) return 0;
    fp_parts a, b;
    if (!fp_parse(was, &a) || !fp_parse(now, &b)) {
        snprintf(why, cap, "the data's fingerprint differs (stored '%.100s')", was);
        return 1;
    }
    /* Each part is bounded (numbers and fixed words): under 400 bytes in all. */
    char t[512];
    size_t n = 0;
    if (a.rows[0] != b.rows[0] || a.rows[1] != b.rows[1])
        n += (size_t)snprintf(t + n, sizeof t - n, "rows %d train + %d test then, %d + %d now; ", a.rows[0], a.rows[1],
                              b.rows[0], b.rows[1]);
    if (memcmp(a.shape, b.shape, sizeof a.shape) || a.out != b.out)
        n += (size_t)snprintf(t + n, sizeof t - n, "shape %dx%dx%d -> %d then, %dx%dx%d -> %d now; ", a.shape[0],
                              a.shape[1], a.shape[2], a.out, b.shape[0], b.shape[1], b.shape[2], b.out);
    for (int i = 0; i < 4; i++)
        if (a.sum[i] != b.sum[i]) n += (size_t)snprintf(t + n, sizeof t - n, "the %s differ; ", array_names[i]);
    if (n >= 2) t[n - 2] = '\0';
    snprintf(why, cap, "%s", t);
    return 1;
}
