/* data_cache.c — data.cache: the decoded, split and normalised dataset kept in one binary
 * file per data configuration, memory-mapped on later runs instead of decoding again.
 *
 * Where: $NNBENCH_CACHE_DIR, else $XDG_CACHE_HOME/nnbench, else $HOME/.cache/nnbench; the
 * file is data-<source base name>-<16 hex digits>.nnbc, the digits a hash of the data keys
 * (source, paths, caps, split, normalisation, csv options, seed). The file begins with the
 * full key text, which also holds every source file's size and mtime: a changed source
 * (or a key the hash missed) fails the comparison and the file is rebuilt in place.
 *
 * Layout (native byte order, this machine's floats): "NNBCACHE" u32 version u32 key_len,
 * key text, a header (meta), then the arrays, each at a 64-byte aligned offset. */
#include "data_internal.h"

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
#define CACHE_VERSION 1u
#define KEY_MAX 16384

static _Thread_local eng_cache_state last_state;
eng_cache_state eng_data_cache_last(void) { return last_state; }

typedef struct {
    char name[64];
    int32_t classification, n_classes, n_targets, in_shape[3];
    uint64_t in_size;
    int32_t n_train, n_test;
} cache_meta;

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 0x100000001b3ull; }
    return h;
}

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
    *len = 0;
    int rc = kappend(key, len, "source=%d n=%d n_test=%d test_fraction=%.17g normalize=%d "
                     "label_column=%d header=%d regression=%d seed=%llu\n",
                     (int)dc->source, dc->n, dc->n_test, dc->test_fraction, (int)dc->normalize,
                     dc->label_column, dc->header, dc->regression, (unsigned long long)seed);
    if (!rc) rc = kappend(key, len, "path=%s\nlabels=%s\ntest_path=%s\ntest_labels=%s\n",
                          dc->path, dc->labels, dc->test_path, dc->test_labels);
    if (rc) return eng_fail(ENG_EINVAL, "data.cache: key too long");
    if (!stats) return ENG_OK;
    if ((rc = key_file(key, len, "stat path", dc->path))) return rc;
    if ((rc = key_file(key, len, "stat labels", dc->labels))) return rc;
    if ((rc = key_file(key, len, "stat test_path", dc->test_path))) return rc;
    return key_file(key, len, "stat test_labels", dc->test_labels);
}

/* $NNBENCH_CACHE_DIR, else the directory of the profiler's calibration file
 * ($XDG_CACHE_HOME/nnbench, else ~/.cache/nnbench). */
static int cache_dir(char *buf, size_t cap)
{
    const char *d = getenv("NNBENCH_CACHE_DIR");
    int n = 0;
    if (d && d[0]) n = snprintf(buf, cap, "%s", d);
    else if (prof_calibration_path(buf, cap))
        return eng_fail(ENG_EINVAL, "data.cache: no cache directory: set NNBENCH_CACHE_DIR, XDG_CACHE_HOME or HOME");
    else {
        char *slash = strrchr(buf, '/');
        if (slash) *slash = '\0';
    }
    if (n < 0 || (size_t)n >= cap) return eng_fail(ENG_EINVAL, "data.cache: cache directory path too long");
    return ENG_OK;
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
    uint64_t h = rc ? 0 : fnv1a(key, len);
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

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

/* Offsets of the arrays after a header of hdr bytes: x_train, labels/targets train,
 * x_test, labels/targets test; returns the total size. */
static size_t layout(const cache_meta *m, size_t hdr, size_t off[4])
{
    size_t lab = m->classification ? sizeof(int32_t) : (size_t)m->n_targets * sizeof(float);
    size_t o = align64(hdr);
    off[0] = o; o = align64(o + (size_t)m->n_train * m->in_size * sizeof(float));
    off[1] = o; o = align64(o + (size_t)m->n_train * lab);
    off[2] = o; o = align64(o + (size_t)m->n_test * m->in_size * sizeof(float));
    off[3] = o; o += (size_t)m->n_test * lab;
    return o;
}

void eng_data_cache_unmap(eng_dataset *ds)
{
    if (ds->map) munmap(ds->map, ds->map_len);
    ds->map = NULL;
    ds->map_len = 0;
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
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { free(key); return ENG_OK; }           /* no cache yet */
    struct stat st;
    void *map = MAP_FAILED;
    size_t size = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        size = (size_t)st.st_size;
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    }
    close(fd);
    if (map == MAP_FAILED) { free(key); return ENG_OK; }
    const char *p = map;
    uint32_t ver, kl;
    cache_meta m;
    size_t off[4];
    int good = size >= 16 + sizeof m && !memcmp(p, CACHE_MAGIC, 8);
    if (good) {
        memcpy(&ver, p + 8, 4);
        memcpy(&kl, p + 12, 4);
        good = ver == CACHE_VERSION && kl == klen && size >= 16 + (size_t)kl + sizeof m &&
               !memcmp(p + 16, key, klen);
    }
    free(key);
    if (good) {
        memcpy(&m, p + 16 + kl, sizeof m);
        good = m.n_train > 0 && m.n_test >= 0 && m.in_size > 0 && m.name[63] == '\0' &&
               layout(&m, 16 + (size_t)kl + sizeof m, off) <= size;
    }
    if (!good) { munmap(map, size); return ENG_OK; }      /* stale or foreign: rebuilt */
    memcpy(ds->name, m.name, sizeof ds->name);
    ds->classification = m.classification;
    ds->n_classes = m.n_classes;
    ds->n_targets = m.n_targets;
    memcpy(ds->in_shape, m.in_shape, sizeof ds->in_shape);
    ds->in_size = (size_t)m.in_size;
    ds->n_train = m.n_train;
    ds->n_test = m.n_test;
    char *base = map;
    ds->x_train = (float *)(void *)(base + off[0]);
    ds->x_test = m.n_test ? (float *)(void *)(base + off[2]) : NULL;
    if (m.classification) {
        ds->y_train = (int32_t *)(void *)(base + off[1]);
        ds->y_test = m.n_test ? (int32_t *)(void *)(base + off[3]) : NULL;
    } else {
        ds->t_train = (float *)(void *)(base + off[1]);
        ds->t_test = m.n_test ? (float *)(void *)(base + off[3]) : NULL;
    }
    ds->map = map;
    ds->map_len = size;
    *hit = 1;
    return ENG_OK;
}

static int mkdirs(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

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

int eng_data_cache_store(const eng_data_config *dc, uint64_t seed, const eng_dataset *ds)
{
    char path[1024], dir[512], tmp[1100];
    int rc = eng_data_cache_path(dc, seed, path, sizeof path);
    if (!rc) rc = cache_dir(dir, sizeof dir);
    if (rc) return rc;
    if (mkdirs(dir))
        return eng_fail(ENG_EIO, "data.cache: cannot create the cache directory %s: %s (set NNBENCH_CACHE_DIR "
                        "to a writable directory, or cache = false)", dir, strerror(errno));
    char *key = malloc(KEY_MAX);
    if (!key) return eng_fail(ENG_ENOMEM, "data.cache: out of memory");
    size_t klen;
    if ((rc = make_key(dc, seed, 1, key, &klen))) { free(key); return rc; }
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
    size_t off[4];
    size_t hdr = 16 + klen + sizeof m;
    layout(&m, hdr, off);
    size_t lab = m.classification ? sizeof(int32_t) : (size_t)m.n_targets * sizeof(float);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(key);
        return eng_fail(ENG_EIO, "data.cache: cannot write %s: %s (set NNBENCH_CACHE_DIR to a writable "
                        "directory, or cache = false)", tmp, strerror(errno));
    }
    uint32_t ver = CACHE_VERSION, kl = (uint32_t)klen;
    size_t at = hdr;
    const void *parts[4] = { ds->x_train, ds->classification ? (const void *)ds->y_train : (const void *)ds->t_train,
                             ds->x_test, ds->classification ? (const void *)ds->y_test : (const void *)ds->t_test };
    size_t sizes[4] = { (size_t)m.n_train * m.in_size * sizeof(float), (size_t)m.n_train * lab,
                        (size_t)m.n_test * m.in_size * sizeof(float), (size_t)m.n_test * lab };
    int bad = write_all(fd, CACHE_MAGIC, 8) || write_all(fd, &ver, 4) || write_all(fd, &kl, 4) ||
              write_all(fd, key, klen) || write_all(fd, &m, sizeof m);
    for (int i = 0; i < 4 && !bad; i++) {
        bad = pad_to(fd, &at, off[i]);
        if (!bad && sizes[i]) bad = write_all(fd, parts[i], sizes[i]);
        at += sizes[i];
    }
    int err = errno;
    if (close(fd) && !bad) { bad = 1; err = errno; }
    free(key);
    if (bad || rename(tmp, path)) {
        if (!bad) err = errno;
        unlink(tmp);
        return eng_fail(ENG_EIO, "data.cache: cannot write %s: %s (free some space, set NNBENCH_CACHE_DIR "
                        "elsewhere, or cache = false)", path, strerror(err));
    }
    return ENG_OK;
}

/* Used by eng_data_load: records the state for eng_data_cache_last. */
void eng_data_cache_note(eng_cache_state s) { last_state = s; }
