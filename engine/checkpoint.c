/* checkpoint.c — a run's state (parameters, optimizer state, training-loop state; the batch
 * order follows from the seed and the step) as one plain byte record that the sink stores
 * without knowing what is inside, and reading it back with every check a user needs.
 *
 * Record layout (native byte order; the marker refuses a record of the other order):
 *   0   8  magic "NNBCKPT\0"
 *   8   4  version (ENG_CKPT_VERSION)
 *   12  4  byte-order marker 0x01020304
 *   16  8  total bytes of the record
 *   24  8  checksum of bytes [32, total): XXH64 (seed 0) from version 2 on, FNV-1a 64 in
 *          version 1 (still read and verified with it)
 *   32     seed u64, total_steps i64, n_params u64, n_train i32, batch i32, optimizer i32,
 *          flags i32 (1: m present, 2: v present), opt_t i64,
 *          the loop state (eng_loop_state, field by field: i64 or f64),
 *          params f32[n_params], then m f32[n_params] and v f32[n_params] when present,
 *          then (flag 4: the model has batch norm) n_stats u64 and the running statistics
 *          f32[n_stats]. Records without flag 4 are those written before batch norm existed:
 *          read as before.
 *          From version 3 on, last: the pool figures of the steps so far (pool_steps i64,
 *          pool_step_s f64, pool_joins i64, pool_wait_s f64), so that a resumed run's cover
 *          the whole run; a record of version 1 or 2 resumes with them at 0.
 * Version 2 changed only the checksum: FNV-1a takes a dependent multiply per byte (2.3 ms
 * for the 1.8 MB Fashion MLP record, on the training thread at every checkpoint); XXH64
 * runs four independent 64-bit lanes over 8-byte words, ~20x faster, and still changes
 * with any flipped bit, moved word or truncation (docs/store.md, "Checkpoints"). Version 3
 * added the pool figures at the end: nothing before them moved.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

#define ENG_CKPT_VERSION 3u
#define ENG_CKPT_HEADER 32
static const char magic[8] = "NNBCKPT";

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}

/* XXH64 (Yann Collet's xxHash, 64-bit, seed 0) with native-order reads: the same value as
 * the reference on a little-endian machine (the record is native order anyway). */
#define XP1 0x9E3779B185EBCA87ull
#define XP2 0xC2B2AE3D27D4EB4Full
#define XP3 0x165667B19E3779F9ull
#define XP4 0x85EBCA77C2B2AE63ull
#define XP5 0x27D4EB2F165667C5ull
static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t load64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint64_t xround(uint64_t acc, uint64_t in) { return rotl64(acc + in * XP2, 31) * XP1; }
static uint64_t xmerge(uint64_t h, uint64_t v) { return (h ^ xround(0, v)) * XP1 + XP4; }

static uint64_t xxh64(const unsigned char *p, size_t n)
{
    const unsigned char *end = p + n;
    uint64_t h = XP5;
    if (n >= 32) {
        uint64_t v1 = XP1 + XP2, v2 = XP2, v3 = 0, v4 = 0 - XP1;
        for (; end - p >= 32; p += 32) {   /* four independent chains: no multiply waits on another */
            v1 = xround(v1, load64(p));
            v2 = xround(v2, load64(p + 8));
            v3 = xround(v3, load64(p + 16));
            v4 = xround(v4, load64(p + 24));
        }
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xmerge(xmerge(xmerge(xmerge(h, v1), v2), v3), v4);
    }
    h += (uint64_t)n;
    for (; end - p >= 8; p += 8) h = rotl64(h ^ xround(0, load64(p)), 27) * XP1 + XP4;
    if (end - p >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        h = rotl64(h ^ (uint64_t)w * XP1, 23) * XP2 + XP3;
        p += 4;
    }
    for (; p < end; p++) h = rotl64(h ^ *p * XP5, 11) * XP1;
    h ^= h >> 33;
    h *= XP2;
    h ^= h >> 29;
    h *= XP3;
    return h ^ (h >> 32);
}

uint64_t eng_ckpt_checksum(unsigned version, const void *p, size_t n)
{
    return version == 1 ? fnv1a(p, n) : xxh64(p, n);
}

/* The loop state's fields in record order: one table drives size, write and read. */
#define LOOP_FIELDS(L, D)                                                                    \
    L(step) L(epoch) D(wall) D(hybrid_extra) D(train_time) D(epoch_train_time) L(total_rows) \
    L(epoch_rows) D(int_loss) D(int_rows) D(int_correct) D(last_lr) D(final_train_loss)       \
    D(best_train_loss) D(final_test_loss) D(final_test_acc) D(best_test_acc)                  \
    L(steps_to_target) D(wall_to_target) D(hybrid_to_target)
#define COUNT_ONE(f) + 8
#define LOOP_BYTES (0 LOOP_FIELDS(COUNT_ONE, COUNT_ONE))
#define FIXED_BYTES (ENG_CKPT_HEADER + 8 + 8 + 8 + 4 * 4 + 8 + LOOP_BYTES)
/* The loop state's fields after the arrays (format 3 on). */
#define POOL_FIELDS(L, D) L(pool_steps) D(pool_step_s) L(pool_joins) D(pool_wait_s)
#define POOL_BYTES (0 POOL_FIELDS(COUNT_ONE, COUNT_ONE))
static size_t pool_bytes(uint32_t version) { return version >= 3 ? POOL_BYTES : 0; }

/* The trailing batch-norm section: its count and floats, or nothing. */
static size_t stats_bytes(uint64_t n_stats) { return n_stats ? 8 + (size_t)n_stats * sizeof(float) : 0; }

size_t eng_ckpt_size(const eng_ckpt *c)
{
    size_t arrays = 1 + (c->m != NULL) + (c->v != NULL);
    return FIXED_BYTES + arrays * (size_t)c->n_params * sizeof(float) + stats_bytes(c->n_stats) +
           pool_bytes(ENG_CKPT_VERSION);
}

typedef struct { unsigned char *p; } wr;
static void put(wr *w, const void *v, size_t n) { memcpy(w->p, v, n); w->p += n; }
static void put_i64(wr *w, int64_t v) { put(w, &v, 8); }
static void put_u64(wr *w, uint64_t v) { put(w, &v, 8); }
static void put_i32(wr *w, int32_t v) { put(w, &v, 4); }
static void put_f64(wr *w, double v) { put(w, &v, 8); }

size_t eng_ckpt_write(const eng_ckpt *c, void *buf, size_t cap)
{
    size_t total = eng_ckpt_size(c);
    if (cap < total) return 0;
    wr w = { buf };
    uint32_t version = ENG_CKPT_VERSION, marker = 0x01020304u;
    put(&w, magic, 8);
    put(&w, &version, 4);
    put(&w, &marker, 4);
    put_u64(&w, total);
    put_u64(&w, 0);                       /* checksum, filled below */
    put_u64(&w, c->seed);
    put_i64(&w, c->total_steps);
    put_u64(&w, c->n_params);
    put_i32(&w, c->n_train);
    put_i32(&w, c->batch);
    put_i32(&w, c->optimizer);
    put_i32(&w, (c->m ? 1 : 0) | (c->v ? 2 : 0) | (c->n_stats ? 4 : 0));
    put_i64(&w, c->opt_t ? *c->opt_t : 0);
    const eng_loop_state *L = &c->loop;
#define W_L(f) put_i64(&w, (int64_t)L->f);
#define W_D(f) put_f64(&w, L->f);
    LOOP_FIELDS(W_L, W_D)
    size_t nb = (size_t)c->n_params * sizeof(float);
    put(&w, c->params, nb);
    if (c->m) put(&w, c->m, nb);
    if (c->v) put(&w, c->v, nb);
    if (c->n_stats) {
        put_u64(&w, c->n_stats);
        put(&w, c->stats, (size_t)c->n_stats * sizeof(float));
    }
    POOL_FIELDS(W_L, W_D)
    unsigned char *b = buf;
    uint64_t sum = eng_ckpt_checksum(ENG_CKPT_VERSION, b + ENG_CKPT_HEADER, total - ENG_CKPT_HEADER);
    memcpy(b + 24, &sum, 8);
    return total;
}

/* The index of the first non-finite float of the n at p (unaligned bytes), or -1. A NaN
 * or inf weight with a valid checksum is a diverged or crafted state: every user of it
 * (eval, quantize, export, resume) would compute garbage or overflow an integer. */
static long first_non_finite(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + i * sizeof x, sizeof x);
        if (!isfinite(x)) return (long)i;
    }
    return -1;
}

typedef struct { const unsigned char *p; } rd;
static void get(rd *r, void *v, size_t n) { memcpy(v, r->p, n); r->p += n; }
static int64_t get_i64(rd *r) { int64_t v; get(r, &v, 8); return v; }
static uint64_t get_u64(rd *r) { uint64_t v; get(r, &v, 8); return v; }
static int32_t get_i32(rd *r) { int32_t v; get(r, &v, 4); return v; }
static double get_f64(rd *r) { double v; get(r, &v, 8); return v; }

int eng_ckpt_read(eng_ckpt *c, const void *buf, size_t len, int params_only)
{
    const unsigned char *b = buf;
    if (!buf || len < FIXED_BYTES || memcmp(b, magic, 8))
        return eng_fail(ENG_EFORMAT, "checkpoint: not an nnbench checkpoint (%zu bytes, bad magic)", len);
    rd r = { b + 8 };
    uint32_t version, marker;
    get(&r, &version, 4);
    get(&r, &marker, 4);
    if (marker != 0x01020304u)
        return eng_fail(ENG_EFORMAT, "checkpoint: written on a machine of the other byte order");
    if (version < 1 || version > ENG_CKPT_VERSION)
        return eng_fail(ENG_EFORMAT, "checkpoint: format version %u, this nnbench reads versions 1 to %u",
                        version, ENG_CKPT_VERSION);
    uint64_t total = get_u64(&r), sum = get_u64(&r);
    if (total != len)
        return eng_fail(ENG_EFORMAT, "checkpoint: truncated or padded: %zu bytes, the record says %llu",
                        len, (unsigned long long)total);
    uint64_t got = eng_ckpt_checksum(version, b + ENG_CKPT_HEADER, len - ENG_CKPT_HEADER);
    if (got != sum)
        return eng_fail(ENG_EFORMAT, "checkpoint: checksum mismatch (stored %016llx, computed %016llx): "
                        "the record is corrupt", (unsigned long long)sum, (unsigned long long)got);
    uint64_t seed = get_u64(&r);
    long total_steps = (long)get_i64(&r);
    uint64_t n_params = get_u64(&r);
    int n_train = get_i32(&r), batch = get_i32(&r), optimizer = get_i32(&r), flags = get_i32(&r);
    long opt_t = (long)get_i64(&r);
    if (n_params != c->n_params)
        return eng_fail(ENG_EINVAL, "checkpoint: holds %llu parameters, the model has %llu: "
                        "it belongs to another model", (unsigned long long)n_params,
                        (unsigned long long)c->n_params);
    size_t arrays = 1 + ((flags & 1) != 0) + ((flags & 2) != 0);
    size_t body = FIXED_BYTES + arrays * (size_t)n_params * sizeof(float);
    uint64_t n_stats = 0;
    if ((flags & 4) && len >= body + 8) memcpy(&n_stats, b + body, 8);
    if (n_stats > (len - body) / sizeof(float) || len != body + stats_bytes(n_stats) + pool_bytes(version) ||
        ((flags & 4) && !n_stats))
        return eng_fail(ENG_EFORMAT, "checkpoint: %zu bytes do not fit %llu parameters", len,
                        (unsigned long long)n_params);
    if (n_stats != c->n_stats)
        return eng_fail(ENG_EINVAL, "checkpoint: holds %llu batch-norm statistics, the model has %llu: "
                        "it belongs to another model", (unsigned long long)n_stats, (unsigned long long)c->n_stats);
    if (n_stats) {
        long bad = first_non_finite(b + body + 8, (size_t)n_stats);
        if (bad >= 0)
            return eng_fail(ENG_EFORMAT, "checkpoint: batch-norm statistic %ld of %llu is not finite: the record "
                            "holds a diverged or damaged state and cannot be used", bad, (unsigned long long)n_stats);
    }
    if (!params_only) {
        if (seed != c->seed || total_steps != c->total_steps || n_train != c->n_train ||
            batch != c->batch || optimizer != c->optimizer)
            return eng_fail(ENG_EINVAL, "checkpoint: written by a different run setup (seed %llu, %ld steps, "
                            "%d training rows, batch %d, optimizer %d; this run: %llu, %ld, %d, %d, %d)",
                            (unsigned long long)seed, total_steps, n_train, batch, optimizer,
                            (unsigned long long)c->seed, c->total_steps, c->n_train, c->batch, c->optimizer);
        if (((flags & 1) != 0) != (c->m != NULL) || ((flags & 2) != 0) != (c->v != NULL))
            return eng_fail(ENG_EINVAL, "checkpoint: its optimizer state does not match the optimizer's");
    }
    /* Checked in the record, before anything is copied out: a refused record leaves the
     * model as it was. */
    const char *what[3] = { "parameter", (flags & 1) ? "optimizer moment m" : "optimizer moment v",
                            "optimizer moment v" };
    const unsigned char *arr = b + FIXED_BYTES;
    for (size_t a = 0; a < (params_only ? 1 : arrays); a++, arr += (size_t)n_params * sizeof(float)) {
        long bad = first_non_finite(arr, (size_t)n_params);
        if (bad >= 0) {
            float x;
            memcpy(&x, arr + (size_t)bad * sizeof x, sizeof x);
            return eng_fail(ENG_EFORMAT, "checkpoint: %s %ld of %llu is %s: the record holds a non-finite state "
                            "(a diverged or damaged run) and cannot be used", what[a], bad,
                            (unsigned long long)n_params, isnan(x) ? "nan" : "inf");
        }
    }
    eng_loop_state L;
    memset(&L, 0, sizeof L);
    rd tail = { b + body + stats_bytes(n_stats) }, *at = &r; /* the loop fields, then (format 3) the tail's */
#define R_L(f) L.f = get_i64(at);
#define R_D(f) L.f = get_f64(at);
    LOOP_FIELDS(R_L, R_D)
    at = &tail;
    if (version >= 3) { POOL_FIELDS(R_L, R_D) }
    size_t nb = (size_t)n_params * sizeof(float);
    get(&r, c->params, nb);
    /* the running statistics are part of the model: eval, export and resume all need them */
    if (n_stats) memcpy(c->stats, b + body + 8, (size_t)n_stats * sizeof(float));
    if (params_only) { c->loop = L; return ENG_OK; }
    if (flags & 1) get(&r, c->m, nb);
    if (flags & 2) get(&r, c->v, nb);
    if (c->opt_t) *c->opt_t = opt_t;
    c->loop = L;
    return ENG_OK;
}
