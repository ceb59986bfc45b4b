/* checkpoint.c — tests of checkpoints: the byte record round-trips exactly and refuses
 * corruption, truncation and another model; a run resumed in-process from any of its
 * checkpoints (with and without prefetch, momentum or adam, a stop mid-interval) logs
 * exactly what the uninterrupted run logs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/internal.h"
#include "../../engine/loop.h"

#include <sys/resource.h>

/* From text (eng_experiment_load_text, as resume rebuilds a stored run's config). */
static eng_experiment *load(const char *text, const char *const *sets, size_t n_sets)
{
    eng_experiment *ex = NULL;
    if (eng_experiment_load_text("checkpoint-test.ini", text, sets, n_sets, &ex)) fail_msg("%s", eng_error());
    return ex;
}

static void fill(float *a, size_t n, float k)
{
    for (size_t i = 0; i < n; i++) a[i] = k * (float)i - 0.5f * (float)(i % 7);
}

static void test_record_round_trip(void **state)
{
    (void)state;
    enum { N = 1000 };
    static float p[N], m[N], v[N], p2[N], m2[N], v2[N];
    fill(p, N, 0.25f); fill(m, N, -1.5f); fill(v, N, 3.0f);
    long t = 77, t2 = 0;
    eng_ckpt c = { .seed = 9, .total_steps = 500, .n_params = N, .n_train = 320, .batch = 32,
                   .optimizer = ENG_OPT_ADAM, .params = p, .m = m, .v = v, .opt_t = &t };
    c.loop = (eng_loop_state){ .step = 123, .epoch = 12, .wall = 1.25, .int_loss = 0.125, .int_rows = 64,
                               .best_train_loss = 0.01, .final_test_acc = NAN, .steps_to_target = -1,
                               .pool_steps = 120, .pool_step_s = 0.0625, .pool_joins = 1080,
                               .pool_wait_s = 0.00390625 };
    size_t len = eng_ckpt_size(&c);
    assert_true(len > 3 * N * sizeof(float));
    unsigned char *buf = malloc(len);
    assert_int_equal(eng_ckpt_write(&c, buf, len), len);
    assert_int_equal(eng_ckpt_write(&c, buf, len - 1), 0);   /* too small: nothing written */

    eng_ckpt d = c;
    d.params = p2; d.m = m2; d.v = v2; d.opt_t = &t2;
    memset(&d.loop, 0, sizeof d.loop);
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_OK);
    assert_memory_equal(p, p2, sizeof p);
    assert_memory_equal(m, m2, sizeof m);
    assert_memory_equal(v, v2, sizeof v);
    assert_int_equal(t2, 77);
    assert_int_equal(d.loop.step, 123);
    assert_int_equal(d.loop.epoch, 12);
    assert_true(d.loop.wall == 1.25 && d.loop.int_loss == 0.125 && d.loop.int_rows == 64);
    assert_true(isnan(d.loop.final_test_acc));
    assert_int_equal(d.loop.steps_to_target, -1);
    assert_int_equal(d.loop.pool_steps, 120);
    assert_int_equal(d.loop.pool_joins, 1080);
    assert_true(d.loop.pool_step_s == 0.0625 && d.loop.pool_wait_s == 0.00390625);

    /* one flipped bit anywhere after the header: the checksum refuses it */
    buf[len / 2] ^= 0x10;
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "checksum"));
    buf[len / 2] ^= 0x10;
    /* truncated, bad magic */
    assert_int_equal(eng_ckpt_read(&d, buf, len - 4, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "truncated"));
    buf[0] = 'X';
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_EFORMAT);
    buf[0] = 'N';
    /* another model, another setup */
    d.n_params = N - 1;
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "another model"));
    d.n_params = N;
    d.seed = 10;
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_EINVAL);
    assert_int_equal(eng_ckpt_read(&d, buf, len, 1), ENG_OK);  /* parameters only: any setup */
    free(buf);
}

/* A record with a NaN weight (or an inf optimizer moment) and a valid checksum, as a
 * diverged run or a crafted file holds: refused at load, naming what and where, and the
 * model it was to be read into is left as it was (quantize used to overflow an integer on
 * such weights, engine/quant/qgemm.c). */
static void test_record_non_finite(void **state)
{
    (void)state;
    enum { N = 300 };
    static float p[N], m[N], v[N], p2[N], m2[N], v2[N];
    fill(p, N, 0.25f); fill(m, N, -1.5f); fill(v, N, 3.0f);
    long t = 5, t2 = 0;
    eng_ckpt c = { .seed = 1, .total_steps = 50, .n_params = N, .n_train = 32, .batch = 8,
                   .optimizer = ENG_OPT_ADAM, .params = p, .m = m, .v = v, .opt_t = &t };
    size_t len = eng_ckpt_size(&c);
    unsigned char *buf = malloc(len);
    eng_ckpt d = c;
    d.params = p2; d.m = m2; d.v = v2; d.opt_t = &t2;
    const float bad[3] = { NAN, INFINITY, -INFINITY };
    for (int k = 0; k < 3; k++) {
        p[17] = bad[k];
        assert_int_equal(eng_ckpt_write(&c, buf, len), len);
        for (size_t i = 0; i < N; i++) p2[i] = 1.0f;
        for (int params_only = 0; params_only < 2; params_only++) {
            assert_int_equal(eng_ckpt_read(&d, buf, len, params_only), ENG_EFORMAT);
            assert_non_null(strstr(eng_error(), "parameter 17 of 300 is"));
            assert_non_null(strstr(eng_error(), k ? "inf" : "nan"));
            for (size_t i = 0; i < N; i++) assert_true(p2[i] == 1.0f);   /* untouched */
        }
        p[17] = 0.5f;
    }
    v[299] = INFINITY;
    assert_int_equal(eng_ckpt_write(&c, buf, len), len);
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "optimizer moment v 299"));
    /* eval, quantize and export read the parameters only: the moments do not matter there */
    assert_int_equal(eng_ckpt_read(&d, buf, len, 1), ENG_OK);
    assert_memory_equal(p, p2, sizeof p);
    free(buf);
}

/* The record's checksum from version 2 on is XXH64 (seed 0): the values of the reference
 * implementation (libxxhash 0.8) for inputs that reach each part of it (empty, the 1-, 4-
 * and 8-byte tails, one and several 32-byte stripes). */
static void test_checksum_vectors(void **state)
{
    (void)state;
    static const struct { size_t n; uint64_t h; } want[] = {
        { 0, 0xef46db3751d8e999ull },   { 1, 0x1f25c8d0bc1f4bb6ull },   { 3, 0x31d2363f52e564c9ull },
        { 4, 0x9bb64b7d66ee9fdaull },   { 7, 0x9a7b149959ce60d8ull },   { 8, 0xdab99d95c6f90092ull },
        { 31, 0xa2aa5f33cc4a6119ull },  { 32, 0x23c3c17ef790fd97ull },  { 33, 0x50a7cfc7ba588784ull },
        { 100, 0xa61f8d4c170fe531ull }, { 1000, 0x5f235fa033f1a3fbull } };
    unsigned char b[1000];
    for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(i * 7 + 3);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        uint64_t got = eng_ckpt_checksum(2, b, want[k].n);
        if (got != want[k].h)
            fail_msg("XXH64 of %zu bytes: %016llx, the reference gives %016llx", want[k].n,
                     (unsigned long long)got, (unsigned long long)want[k].h);
    }
    /* version 1: FNV-1a 64 ("a" is the published test vector) */
    assert_true(eng_ckpt_checksum(1, "a", 1) == 0xaf63dc4c8601ec8cull);
}

/* The test's own FNV-1a 64: what the version-1 writer (nnbench before the XXH64 checksum)
 * stored, so a version-1 record can be made here without the engine's help. */
static uint64_t fnv1a_ref(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}

/* rec (a current record of len bytes) as version `version` wrote it: without the pool
 * figures of format 3, its length and checksum (FNV-1a in version 1) its own; the bytes
 * into out, their count returned. */
static size_t older_record(const unsigned char *rec, size_t len, uint32_t version, unsigned char *out)
{
    size_t n = len - 32;   /* format 3's last 32 bytes: the pool figures */
    uint64_t total = n;
    memcpy(out, rec, n);
    memcpy(out + 8, &version, 4);
    memcpy(out + 16, &total, 8);
    uint64_t sum = version == 1 ? fnv1a_ref(out + 32, n - 32) : eng_ckpt_checksum(2, out + 32, n - 32);
    memcpy(out + 24, &sum, 8);
    return n;
}

/* Records written by earlier versions (format 1, FNV-1a; format 2, XXH64, both without the
 * pool figures) are still read and verified with their own checksum, the pool figures then
 * 0; the new checksum detects every single flipped bit (in each of the four lanes and in the
 * tail), two equal flips in two words (which would cancel in a sum of words), two words
 * swapped (which a per-lane sum would miss) and a version-1 checksum on a version-3
 * record. */
static void test_record_versions(void **state)
{
    (void)state;
    enum { N = 333 };   /* odd: the record ends in a tail shorter than a 32-byte stripe */
    static float p[N], m[N], p2[N], m2[N];
    fill(p, N, 0.75f); fill(m, N, -2.5f);
    long t = 3, t2 = 0;
    eng_ckpt c = { .seed = 4, .total_steps = 90, .n_params = N, .n_train = 64, .batch = 16,
                   .optimizer = ENG_OPT_MOMENTUM, .params = p, .m = m, .opt_t = &t };
    c.loop = (eng_loop_state){ .step = 30, .epoch = 7, .steps_to_target = -1, .pool_steps = 30, .pool_joins = 270 };
    size_t len = eng_ckpt_size(&c);
    unsigned char *buf = malloc(len), *v1 = malloc(len);
    assert_int_equal(eng_ckpt_write(&c, buf, len), len);
    uint32_t version;
    memcpy(&version, buf + 8, 4);
    assert_int_equal(version, 3);
    eng_ckpt d = c;
    d.params = p2; d.m = m2; d.opt_t = &t2;
    /* records of versions 1 and 2: read, the pool figures 0 */
    for (uint32_t ver = 1; ver <= 2; ver++) {
        size_t n = older_record(buf, len, ver, v1);
        memset(p2, 0, sizeof p2);
        d.loop.pool_steps = d.loop.pool_joins = 99;
        assert_int_equal(eng_ckpt_read(&d, v1, n, 0), ENG_OK);
        assert_memory_equal(p, p2, sizeof p);
        assert_memory_equal(m, m2, sizeof m);
        assert_int_equal(t2, 3);
        assert_int_equal(d.loop.step, 30);
        assert_true(d.loop.pool_steps == 0 && d.loop.pool_joins == 0);
        v1[n - 1] ^= 0x01;   /* damaged: refused by its own checksum */
        assert_int_equal(eng_ckpt_read(&d, v1, n, 0), ENG_EFORMAT);
        assert_non_null(strstr(eng_error(), "checksum"));
    }
    /* a version-2 record that ends with the pool figures: its length does not fit */
    version = 2;
    memcpy(v1, buf, len);
    memcpy(v1 + 8, &version, 4);
    uint64_t sum = eng_ckpt_checksum(2, v1 + 32, len - 32);
    memcpy(v1 + 24, &sum, 8);
    assert_int_equal(eng_ckpt_read(&d, v1, len, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "do not fit"));
    /* a version-3 record carrying a version-1 checksum is refused */
    memcpy(v1, buf, len);
    sum = fnv1a_ref(v1 + 32, len - 32);
    memcpy(v1 + 24, &sum, 8);
    assert_int_equal(eng_ckpt_read(&d, v1, len, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "checksum"));
    /* a future version is refused by name */
    memcpy(v1, buf, len);
    version = 4;
    memcpy(v1 + 8, &version, 4);
    assert_int_equal(eng_ckpt_read(&d, v1, len, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "format version 4"));

    /* every bit of the first 40 bytes after the header (all four lanes), of the last 40
     * (the tail) and of every 97th byte between */
    for (size_t i = 32; i < len; i = (i < 72 || i >= len - 41) ? i + 1 : (i + 97 < len - 41 ? i + 97 : len - 41))
        for (int bit = 0; bit < 8; bit++) {
            memcpy(v1, buf, len);
            v1[i] ^= (unsigned char)(1u << bit);
            if (eng_ckpt_read(&d, v1, len, 0) != ENG_EFORMAT || !strstr(eng_error(), "checksum"))
                fail_msg("a flipped bit %d of byte %zu of %zu was not detected", bit, i, len);
        }
    /* the top bit of two words of one lane: a multiply-only lane would keep it in bit 63 and
     * two of them would cancel */
    memcpy(v1, buf, len);
    v1[32 + 7] ^= 0x80;
    v1[32 + 32 + 7] ^= 0x80;
    assert_int_equal(eng_ckpt_read(&d, v1, len, 0), ENG_EFORMAT);
    /* two 8-byte words of the parameters swapped */
    memcpy(v1, buf, len);
    memcpy(v1 + 256, buf + 288, 8);
    memcpy(v1 + 288, buf + 256, 8);
    assert_true(memcmp(v1, buf, len) != 0);
    assert_int_equal(eng_ckpt_read(&d, v1, len, 0), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "checksum"));
    free(v1);
    free(buf);
}

/* Page faults of the calling thread so far (minor and major). */
static long thread_faults(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_THREAD, &ru), 0);
    return ru.ru_minflt + ru.ru_majflt;
}

/* The checkpoint slot's record buffer is paged in when the run is created: the first
 * checkpoint, in mid-training, writes its 4 MB without a page fault per 4 KiB page (it
 * took ~1000 here before: ~20 us each on a loaded VM). The bound leaves room for a few
 * faults of the arrays' own pages. */
static void test_record_buffer_paged_in(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    float *p = calloc(N, sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < N; i++) p[i] = 0.001f * (float)(i % 977);   /* the source's pages are in */
    eng_ckpt c = { .seed = 2, .total_steps = 10, .n_params = N, .n_train = 8, .batch = 8,
                   .optimizer = ENG_OPT_SGD, .params = p };
    eng_loop_record rec;
    assert_int_equal(eng_loop_record_init(&rec, &c), ENG_OK);
    eng_loop_checkpoint slot = eng_loop_record_slot(&rec);
    eng_loop_state L = { .step = 5, .steps_to_target = -1 };
    const void *data = NULL;
    size_t len = 0;
    long before = thread_faults();
    assert_int_equal(slot.write(slot.ud, &L, &data, &len), ENG_OK);
    long faults = thread_faults() - before;
    assert_int_equal(len, eng_ckpt_size(&c));
    if (faults > 64) fail_msg("the first checkpoint write took %ld page faults for %zu bytes", faults, len);
    float back[4];
    memcpy(back, (const unsigned char *)data + len - 32 - sizeof back, sizeof back);   /* before the pool figures */
    assert_true(back[3] == p[N - 1]);
    eng_loop_record_free(&rec);
    free(p);
}

/* A sink that records every logged value (but throughput) and keeps every checkpoint. */
typedef struct {
    char keys[8192][16];
    long steps[8192];
    double vals[8192];
    size_t n;
    void *ck[64];
    size_t ck_len[64];
    long ck_step[64];
    size_t n_ck;
    size_t n_telem;             /* telemetry records */
    char telem_key[48];         /* the first key of the last record */
    long resumed_step;
    int resumed_partial;
    eng_run *stop_run;
    long stop_at;
} rec;

static int r_begin(void *ud, const eng_run_info *info)
{
    rec *r = ud;
    r->resumed_step = info->resumed_step;
    r->resumed_partial = info->resumed_partial;
    return 0;
}
static int r_metric(void *ud, const eng_metric *m)
{
    rec *r = ud;
    /* throughput is the clock's; the sampler's epoch figures restart at a resume (docs/graphs.md) */
    if (!strcmp(m->key, "samples_per_s") || !strncmp(m->key, "sample", 6)) return 0;
    assert_true(r->n < 8192);
    snprintf(r->keys[r->n], sizeof r->keys[0], "%s", m->key);
    r->steps[r->n] = m->step;
    r->vals[r->n++] = m->value;
    return 0;
}
static int r_ckpt(void *ud, const eng_checkpoint *ck)
{
    rec *r = ud;
    assert_true(r->n_ck < 64);
    r->ck[r->n_ck] = malloc(ck->len);
    memcpy(r->ck[r->n_ck], ck->data, ck->len);
    r->ck_len[r->n_ck] = ck->len;
    r->ck_step[r->n_ck++] = ck->step;
    return 0;
}
static int r_telem(void *ud, const eng_telemetry *t)
{
    rec *r = ud;
    r->n_telem++;
    if (t->n) snprintf(r->telem_key, sizeof r->telem_key, "%s", t->keys[0]);
    return 0;
}
static void r_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    rec *r = ud;
    if (r->stop_run && step == r->stop_at) eng_run_request_stop(r->stop_run);
}
static void rec_free(rec *r)
{
    for (size_t i = 0; i < r->n_ck; i++) free(r->ck[i]);
}

static int train(const eng_config *c, const char *text, rec *r, const void *ck, size_t len, long stop_at)
{
    eng_run *run = NULL;
    if (eng_run_create(c, text, NULL, &run)) fail_msg("%s", eng_error());
    if (ck && eng_run_resume(run, ck, len)) fail_msg("%s", eng_error());
    r->stop_run = stop_at ? run : NULL;
    r->stop_at = stop_at;
    eng_sink s = { .ud = r, .run_begin = r_begin, .metric = r_metric, .checkpoint = r_ckpt, .telemetry = r_telem,
                   .progress = r_progress };
    int rc = eng_run_train(run, &s);
    eng_run_destroy(run);
    return rc;
}

/* The points of `a` logged after step `from` (and at it unless partial) equal `b`'s. */
static void assert_tail_equal(const rec *a, const rec *b, long from)
{
    size_t i = 0;
    while (i < a->n && a->steps[i] <= from) i++;
    assert_int_equal(a->n - i, b->n);
    for (size_t j = 0; j < b->n; j++, i++) {
        assert_string_equal(a->keys[i], b->keys[j]);
        assert_int_equal(a->steps[i], b->steps[j]);
        if (memcmp(&a->vals[i], &b->vals[j], sizeof(double)))
            fail_msg("%s at step %ld: %.17g (uninterrupted) vs %.17g (resumed)", a->keys[i], a->steps[i], a->vals[i], b->vals[j]);
    }
}

static const char *SPIRALS =
    "[experiment]\nseed = 3\ntarget_loss = 0.4\n"
    "[data]\nsource = spirals\nn = 400\n"
    "[model]\nlayers = dense:16:tanh, dense:16:tanh, dense:2\ninit = he\n"
    "[train]\noptimizer = adam\nlr = 0.01\nbatch = 32\nepochs = 6\nlog_every = 3\ncheckpoint_every = 7\nthreads = 1\n";

static void resume_each(const char *const *sets, size_t n_sets)
{
    eng_experiment *ex = load(SPIRALS, sets, n_sets);
    static rec full;
    memset(&full, 0, sizeof full);
    assert_int_equal(train(&ex->variants[0], ex->text, &full, NULL, 0, 0), ENG_OK);
    /* 10 steps per epoch, 60 steps: every 7th step and the last one */
    assert_int_equal(full.n_ck, 60 / 7 + 1);
    assert_int_equal(full.ck_step[full.n_ck - 1], 60);
    for (size_t k = 0; k < full.n_ck; k++) {
        static rec part;
        memset(&part, 0, sizeof part);
        assert_int_equal(train(&ex->variants[0], ex->text, &part, full.ck[k], full.ck_len[k], 0), ENG_OK);
        assert_int_equal(part.resumed_step, full.ck_step[k]);
        assert_tail_equal(&full, &part, full.ck_step[k]);
        rec_free(&part);
    }
    rec_free(&full);
    eng_experiment_free(ex);
}

static void test_resume_equals_uninterrupted(void **state)
{
    (void)state;
    resume_each(NULL, 0);
    const char *mom[] = { "train.optimizer=momentum", "data.prefetch=true" };
    resume_each(mom, 2);
    /* batch norm's running statistics travel with the checkpoint: the test loss logged
     * after a resume equals the uninterrupted run's */
    const char *bn[] = { "model.layers=dense:16, bn:tanh, res(dense:16, bn:tanh, dense:16, bn):tanh, dense:2" };
    resume_each(bn, 1);
    const char *sgd[] = { "train.optimizer=sgd", "train.schedule=cosine", "train.checkpoint_every=0" };
    (void)sgd; /* checkpoint_every = 0: one per epoch, checked below */
    eng_experiment *ex = load(SPIRALS, sgd, 3);
    static rec r;
    memset(&r, 0, sizeof r);
    assert_int_equal(train(&ex->variants[0], ex->text, &r, NULL, 0, 0), ENG_OK);
    assert_int_equal(r.n_ck, 6);
    for (size_t k = 0; k < r.n_ck; k++) assert_int_equal(r.ck_step[k], 10 * (long)(k + 1));
    rec_free(&r);
    eng_experiment_free(ex);
}

/* A stop request mid logging interval: a checkpoint is taken where it stopped, and the
 * resumed run logs the rest as if it had never stopped. */
static void test_stop_then_resume(void **state)
{
    (void)state;
    eng_experiment *ex = load(SPIRALS, NULL, 0);
    static rec full, a, b;
    memset(&full, 0, sizeof full);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_int_equal(train(&ex->variants[0], ex->text, &full, NULL, 0, 0), ENG_OK);
    assert_int_equal(train(&ex->variants[0], ex->text, &a, NULL, 0, 23), ENG_ESTOPPED);
    assert_true(a.n_ck >= 1);
    assert_int_equal(a.ck_step[a.n_ck - 1], 23);
    assert_int_equal(train(&ex->variants[0], ex->text, &b, a.ck[a.n_ck - 1], a.ck_len[a.n_ck - 1], 0), ENG_OK);
    assert_int_equal(b.resumed_step, 23);
    assert_int_equal(b.resumed_partial, 1);  /* 23 is inside a 3-step logging interval */
    assert_tail_equal(&full, &b, 23);
    /* another model's checkpoint is refused */
    const char *other[] = { "model.layers=dense:8:tanh, dense:2" };
    eng_experiment *ex2 = load(SPIRALS, other, 1);
    eng_run *run = NULL;
    if (eng_run_create(&ex2->variants[0], ex2->text, NULL, &run)) fail_msg("%s", eng_error());
    assert_int_equal(eng_run_resume(run, a.ck[0], a.ck_len[0]), ENG_EINVAL);
    eng_run_destroy(run);
    eng_experiment_free(ex2);
    rec_free(&full); rec_free(&a); rec_free(&b);
    eng_experiment_free(ex);
}

/* Issue 23: a graph run goes through the same loop, so its slots are the dense run's:
 * checkpoints (resumable to the same curve), telemetry records and gradient transforms. */
static const char *GRAPH =
    "[experiment]\nseed = 5\n"
    "[data]\nsource = graph\n"
    "[graph]\nsource = sbm\nnodes = 300\nclasses = 3\ndegree = 6\nfeatures = 8\nnoise = 2\n"
    "mode = sampled\nfanouts = 4,3\npartition = none\n"
    "[model]\nlayers = sage:8:relu, sage:3\n"
    "[train]\noptimizer = adam\nlr = 0.02\nbatch = 64\nepochs = 4\nlog_every = 2\ncheckpoint_every = 5\n"
    "threads = 1\n";

static void test_graph_checkpoint_resume(void **state)
{
    (void)state;
    const char *modes[][2] = { { "graph.mode=sampled", "train.epochs=4" }, { "graph.mode=full", "train.epochs=12" } };
    for (int mode = 0; mode < 2; mode++) {
        eng_experiment *ex = load(GRAPH, modes[mode], 2);
        static rec full, part;
        memset(&full, 0, sizeof full);
        assert_int_equal(train(&ex->variants[0], ex->text, &full, NULL, 0, 0), ENG_OK);
        assert_true(full.n_ck >= 2);
        for (size_t k = 0; k + 1 < full.n_ck; k++) {  /* the last one is the end */
            memset(&part, 0, sizeof part);
            assert_int_equal(train(&ex->variants[0], ex->text, &part, full.ck[k], full.ck_len[k], 0), ENG_OK);
            assert_int_equal(part.resumed_step, full.ck_step[k]);
            assert_tail_equal(&full, &part, full.ck_step[k]);
            rec_free(&part);
        }
        /* a stop mid epoch: the checkpoint where it stopped resumes to the same curve */
        memset(&part, 0, sizeof part);
        assert_int_equal(train(&ex->variants[0], ex->text, &part, NULL, 0, 4), ENG_ESTOPPED);
        assert_int_equal(part.ck_step[part.n_ck - 1], 4);
        static rec rest;
        memset(&rest, 0, sizeof rest);
        assert_int_equal(train(&ex->variants[0], ex->text, &rest, part.ck[part.n_ck - 1], part.ck_len[part.n_ck - 1], 0),
                         ENG_OK);
        assert_tail_equal(&full, &rest, 4);
        rec_free(&part); rec_free(&rest); rec_free(&full);
        eng_experiment_free(ex);
    }
}

static void test_graph_telemetry_and_transforms(void **state)
{
    (void)state;
    const char *tel[] = { "train.telemetry=true" };
    eng_experiment *ex = load(GRAPH, tel, 1);
    static rec t;
    memset(&t, 0, sizeof t);
    assert_int_equal(train(&ex->variants[0], ex->text, &t, NULL, 0, 0), ENG_OK);
    size_t logs = 0;   /* one record a log step, as train_loss */
    for (size_t i = 0; i < t.n; i++) logs += !strcmp(t.keys[i], "train_loss");
    assert_true(logs >= 2);
    assert_int_equal(t.n_telem, logs);
    assert_string_equal(t.telem_key, "grad_norm/sage1.W");
    rec_free(&t);
    eng_experiment_free(ex);
    /* a transform changes the curve; its absence leaves it as it was */
    static rec plain, clip;
    memset(&plain, 0, sizeof plain);
    memset(&clip, 0, sizeof clip);
    ex = load(GRAPH, NULL, 0);
    assert_int_equal(train(&ex->variants[0], ex->text, &plain, NULL, 0, 0), ENG_OK);
    eng_experiment_free(ex);
    const char *cv[] = { "train.gradient=clip_value", "train.clip_value=0.001" };
    ex = load(GRAPH, cv, 2);
    assert_int_equal(train(&ex->variants[0], ex->text, &clip, NULL, 0, 0), ENG_OK);
    eng_experiment_free(ex);
    assert_int_equal(plain.n, clip.n);
    assert_string_equal(plain.keys[0], "graph_nodes");
    size_t differ = 0;
    for (size_t i = 0; i < plain.n; i++)
        if (!strcmp(plain.keys[i], "train_loss")) differ += plain.vals[i] != clip.vals[i];
    assert_true(differ > 0);
    rec_free(&plain); rec_free(&clip);
}

/* A sink that refuses the run at run_begin: run_end still comes, with the run failed and
 * nothing measured (NAN, not 0, so that a store keeps no made-up loss); a graph run's
 * eng_run_evaluate says why it has none instead of reading a dataset it does not have. */
static int refuse_begin(void *ud, const eng_run_info *info) { return eng_fail(ENG_ESINK, "sink: refused"); }
static void keep_end(void *ud, const eng_run_result *res) { *(eng_run_result *)ud = *res; }
static void test_run_begin_refused(void **state)
{
    (void)state;
    eng_experiment *ex = load(GRAPH, NULL, 0);
    eng_run *run = NULL;
    if (eng_run_create(&ex->variants[0], ex->text, NULL, &run)) fail_msg("%s", eng_error());
    double loss, acc;
    assert_int_equal(eng_run_evaluate(run, &loss, &acc), ENG_EINVAL);
    eng_run_result got;
    memset(&got, 0, sizeof got);
    eng_sink s = { .ud = &got, .run_begin = refuse_begin, .run_end = keep_end };
    assert_int_equal(eng_run_train(run, &s), ENG_ESINK);
    assert_int_equal(got.status, ENG_RUN_FAILED);
    assert_true(isnan(got.final_train_loss) && isnan(got.best_train_loss) && isnan(got.final_test_acc));
    assert_int_equal(got.steps_to_target, -1);
    assert_non_null(strstr(got.error, "sink: refused"));
    eng_run_destroy(run);
    eng_experiment_free(ex);
}

int test_engine_checkpoint(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_round_trip),
        cmocka_unit_test(test_record_non_finite),
        cmocka_unit_test(test_checksum_vectors),
        cmocka_unit_test(test_record_versions),
        cmocka_unit_test(test_record_buffer_paged_in),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_stop_then_resume),
        cmocka_unit_test(test_graph_checkpoint_resume),
        cmocka_unit_test(test_graph_telemetry_and_transforms),
        cmocka_unit_test(test_run_begin_refused),
    };
    return cmocka_run_group_tests_name("engine_checkpoint", tests, NULL, NULL);
}
