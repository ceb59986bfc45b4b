/* conv_onednn.c — conv2d by oneDNN's convolution primitives (forward, backward-data,
 * backward-weights; zero padding and stride; no bias: the engine's bias op adds it). The
 * engine's tensors stay NCHW (x, y, dx, dy) and OIHW (W, dW = [F x C*K*K]); a primitive set
 * is made per layer shape, rows per call, thread count and layout:
 *  - plain: the primitives work on NCHW/OIHW as stored (no reorder);
 *  - blocked: created with format `any`, so oneDNN picks its own formats (nChw16c, ...),
 *    and each argument whose format differs is reordered into the workspace and back.
 * Which layout a shape runs is measured once (eng_dnconv_prepare) and cached per machine
 * like the algorithm choice. Sets live for the process (as FFTW's plans do) in a table under
 * a mutex; their scratchpads (user mode) and reorder buffers are in the node's workspace
 * (n->col), sized by eng_dnconv_ws_floats, so the model's arena counts them. */
#define _POSIX_C_SOURCE 200809L

#include "conv_internal.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DN_FWD, DN_DATA, DN_WEIGHTS, DN_PRIMS };
enum { DN_PLAIN, DN_BLOCKED, DN_LAYOUTS };
static const char *const layout_names[DN_LAYOUTS] = { "plain", "blocked" };

/* One argument of a primitive: its oneDNN number, whether the primitive writes it, the
 * engine's (plain) descriptor and the primitive's; reo converts between them (NULL when they
 * are equal) through the workspace at off (floats), bytes long. */
typedef struct {
    int arg, out;
    dnnl_memory_desc_t umd, md;
    dnnl_primitive_t reo;
    size_t off, bytes;
} dn_port;

typedef struct {
    dnnl_primitive_t prim;
    dn_port port[3];
    dnnl_memory_desc_t scratch_md;
    size_t scratch;     /* bytes */
} dn_prim;

/* The key: C H W F K pad stride rows threads layout. */
#define DN_KEY 10
typedef struct {
    int key[DN_KEY];
    int ok;
    char why[96];       /* ok == 0: what failed */
    dn_prim p[DN_PRIMS];
    size_t floats;      /* workspace: scratchpad, reorder buffers, a dW for chunk sums */
    size_t dw_off;      /* that dW's offset (floats) */
} dn_set;

static pthread_mutex_t dn_mu = PTHREAD_MUTEX_INITIALIZER;
static dn_set **sets;
static size_t n_sets, cap_sets;
/* the layout picked per shape and threads (rows and layout fields of the key unused) */
static struct { int key[DN_KEY]; int layout; } picks[256];
static size_t n_picks;
static dnnl_engine_t dn_engine;
static int engine_state; /* 0 not tried, 1 ok, -1 failed */

#define DN_HOOK "NNBENCH_ONEDNN_CONV_FAIL"

static int threads_now(void)
{
    int t = openblas_get_num_threads();
    return t < 1 ? 1 : t;
}

static void key_of(const eng_node *n, int rows, int layout, int *key)
{
    conv_dims d = conv_get(n);
    int k[DN_KEY] = { d.C, d.H, d.W, d.F, d.K, d.pad, d.st, rows, threads_now(), layout };
    memcpy(key, k, sizeof k);
}

static size_t round_floats(size_t bytes) { return conv_round16((bytes + sizeof(float) - 1) / sizeof(float)); }

static int md_plain(dnnl_memory_desc_t *md, int a, int b, int c, int e, int any)
{
    dnnl_dims_t dims = { a, b, c, e };
    return dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, any ? dnnl_format_tag_any : dnnl_abcd) != dnnl_success;
}

/* The ports of a primitive made from pd: each argument's descriptor queried, a reorder where
 * it differs from the plain one, buffers placed from *off on. */
static int make_ports(dn_prim *p, const_dnnl_primitive_desc_t pd, const int arg[3], const dnnl_query_t q[3],
                      const int out[3], const dnnl_memory_desc_t *umd[3], size_t *off)
{
    for (int i = 0; i < 3; i++) {
        dn_port *o = &p->port[i];
        o->arg = arg[i];
        o->out = out[i];
        o->umd = *umd[i];
        o->md = *dnnl_primitive_desc_query_md(pd, q[i], 0);
        if (dnnl_memory_desc_equal(&o->md, &o->umd)) continue;
        dnnl_primitive_desc_t rpd = NULL;
        const dnnl_memory_desc_t *from = out[i] ? &o->md : &o->umd, *to = out[i] ? &o->umd : &o->md;
        int bad = dnnl_reorder_primitive_desc_create(&rpd, from, dn_engine, to, dn_engine, NULL) != dnnl_success ||
                  dnnl_primitive_create(&o->reo, rpd) != dnnl_success;
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        if (bad) return -1;
        o->bytes = dnnl_memory_desc_get_size(&o->md);
        o->off = *off;
        *off += round_floats(o->bytes);
    }
    p->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->scratch = dnnl_memory_desc_get_size(&p->scratch_md);
    return dnnl_primitive_create(&p->prim, pd) != dnnl_success;
}

/* The three primitives of a set; 0 or the failing step's name in *why. */
static int build_prims(dn_set *s, const char **why)
{
    const int *k = s->key;
    int C = k[0], H = k[1], W = k[2], F = k[3], K = k[4], pad = k[5], st = k[6], N = k[7], any = k[9] == DN_BLOCKED;
    int OH = (H + 2 * pad - K) / st + 1, OW = (W + 2 * pad - K) / st + 1;
    /* the right padding that makes oneDNN's output size ours (positions past the last whole
     * window dropped, as PyTorch does) */
    dnnl_dims_t strides = { st, st }, pl = { pad, pad }, pr = { (OH - 1) * st + K - H - pad, (OW - 1) * st + K - W - pad };
    dnnl_memory_desc_t src, wei, dst, usrc, uwei, udst;
    if (md_plain(&usrc, N, C, H, W, 0) || md_plain(&uwei, F, C, K, K, 0) || md_plain(&udst, N, F, OH, OW, 0) ||
        md_plain(&src, N, C, H, W, any) || md_plain(&wei, F, C, K, K, any) || md_plain(&dst, N, F, OH, OW, any)) {
        *why = "memory descriptors";
        return -1;
    }
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd[DN_PRIMS] = { NULL, NULL, NULL };
    dnnl_convolution_desc_t cd[DN_PRIMS];
    int rc = -1;
    *why = "attributes";
    if (dnnl_primitive_attr_create(&attr) || dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto out;
    *why = "no convolution descriptor for this shape";
    if (dnnl_convolution_forward_desc_init(&cd[DN_FWD], dnnl_forward_training, dnnl_convolution_direct, &src, &wei, NULL,
                                           &dst, strides, pl, pr) ||
        dnnl_convolution_backward_data_desc_init(&cd[DN_DATA], dnnl_convolution_direct, &src, &wei, &dst, strides, pl, pr) ||
        dnnl_convolution_backward_weights_desc_init(&cd[DN_WEIGHTS], dnnl_convolution_direct, &src, &wei, NULL, &dst,
                                                    strides, pl, pr))
        goto out;
    *why = "no convolution primitive for this shape";
    for (int i = 0; i < DN_PRIMS; i++)
        if (dnnl_primitive_desc_create(&pd[i], &cd[i], attr, dn_engine, i ? pd[DN_FWD] : NULL)) goto out;
    static const int arg[DN_PRIMS][3] = { { DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST },
                                          { DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC },
                                          { DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS } };
    static const dnnl_query_t q[DN_PRIMS][3] = { { dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md },
                                                 { dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md },
                                                 { dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md } };
    static const int out[3] = { 0, 0, 1 };
    const dnnl_memory_desc_t *umd[DN_PRIMS][3] = { { &usrc, &uwei, &udst }, { &udst, &uwei, &usrc }, { &usrc, &udst, &uwei } };
    /* [scratchpad (the largest) | a dW of the chunk | the running primitive's buffers] */
    size_t dw_floats = conv_round16((size_t)F * C * K * K), most = 0, scratch = 0;
    *why = "reorders";
    for (int i = 0; i < DN_PRIMS; i++) {
        size_t off = 0;
        if (make_ports(&s->p[i], pd[i], arg[i], q[i], out, umd[i], &off)) goto out;
        if (off > most) most = off;
        if (s->p[i].scratch > scratch) scratch = s->p[i].scratch;
    }
    s->dw_off = round_floats(scratch);
    size_t base = s->dw_off + dw_floats;
    for (int i = 0; i < DN_PRIMS; i++)
        for (int j = 0; j < 3; j++) s->p[i].port[j].off += base;
    s->floats = base + most;
    rc = 0;
out:
    for (int i = 0; i < DN_PRIMS; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

static dn_set *make_set(const int *key)
{
    dn_set *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    memcpy(s->key, key, sizeof s->key);
    const char *why = "no CPU engine";
    if (!engine_state) engine_state = dnnl_engine_create(&dn_engine, dnnl_cpu, 0) == dnnl_success ? 1 : -1;
    /* oneDNN sizes its per-thread buffers by the OpenMP count at creation */
    omp_set_num_threads(key[8]);
    if (engine_state > 0 && !build_prims(s, &why)) s->ok = 1;
    else snprintf(s->why, sizeof s->why, "failed: %s", why);
    return s;
}

/* The set of key, made on first use (a failure is kept too, so it is not retried); NULL
 * only when out of memory. */
static const dn_set *set_get(const int *key)
{
    pthread_mutex_lock(&dn_mu);
    dn_set *s = NULL;
    for (size_t i = 0; i < n_sets && !s; i++)
        if (!memcmp(sets[i]->key, key, sizeof sets[i]->key)) s = sets[i];
    if (!s && n_sets == cap_sets) {
        dn_set **grown = realloc(sets, (2 * cap_sets + 8) * sizeof *sets);
        if (grown) { sets = grown; cap_sets = 2 * cap_sets + 8; }
    }
    if (!s && n_sets < cap_sets) {
        s = make_set(key);
        if (s) sets[n_sets++] = s;
    }
    pthread_mutex_unlock(&dn_mu);
    return s;
}

static int layout_of(const eng_node *n)
{
    int key[DN_KEY], layout = DN_PLAIN;
    key_of(n, 0, 0, key);
    pthread_mutex_lock(&dn_mu);
    for (size_t i = 0; i < n_picks; i++)
        if (!memcmp(picks[i].key, key, sizeof key)) layout = picks[i].layout;
    pthread_mutex_unlock(&dn_mu);
    return layout;
}

static void layout_set(const eng_node *n, int layout)
{
    int key[DN_KEY];
    key_of(n, 0, 0, key);
    pthread_mutex_lock(&dn_mu);
    size_t i = 0;
    while (i < n_picks && memcmp(picks[i].key, key, sizeof key)) i++;
    if (i < sizeof picks / sizeof picks[0]) {
        memcpy(picks[i].key, key, sizeof key);
        picks[i].layout = layout;
        if (i == n_picks) n_picks++;
    }
    pthread_mutex_unlock(&dn_mu);
}

static const dn_set *set_of(const eng_node *n, int rows, int layout)
{
    int key[DN_KEY];
    key_of(n, rows, layout, key);
    return set_get(key);
}

const char *eng_dnconv_unusable(const eng_node *n)
{
    const char *hook = getenv(DN_HOOK);
    if (hook && *hook) return "failed: " DN_HOOK " is set";
    const dn_set *s = set_of(n, n->chunk > 0 ? n->chunk : 1, layout_of(n));
    return !s ? "failed: out of memory" : s->ok ? "" : s->why;
}

size_t eng_dnconv_ws_floats(const eng_node *n, int chunk)
{
    size_t most = 0;
    for (int l = 0; l < DN_LAYOUTS; l++)
        for (int r = 0; r < 2; r++) {
            const dn_set *s = set_of(n, r ? 1 : chunk, l);
            if (s && s->ok && s->floats > most) most = s->floats;
        }
    return most;
}

/* Runs primitive p of s: inputs reordered into the workspace first, outputs out of it
 * after; ptr[i] is port i's tensor as the engine stores it. The reorders are the stage
 * CONV_ST_REORDER, the primitive stage st. */
static int run_prim(eng_node *n, int dir, int st, const dn_prim *p, void *ptr[3], float *ws)
{
    dnnl_stream_t stream = NULL;
    dnnl_memory_t mem[3] = { NULL, NULL, NULL }, user[3] = { NULL, NULL, NULL }, scratch = NULL;
    int bad = dnnl_stream_create(&stream, dn_engine, dnnl_stream_default_flags) != dnnl_success ||
              dnnl_memory_create(&scratch, &p->scratch_md, dn_engine, ws) != dnnl_success;
    for (int i = 0; i < 3 && !bad; i++) {
        const dn_port *o = &p->port[i];
        bad = dnnl_memory_create(&mem[i], &o->md, dn_engine, o->reo ? (void *)(ws + o->off) : ptr[i]) != dnnl_success ||
              (o->reo && dnnl_memory_create(&user[i], &o->umd, dn_engine, ptr[i]) != dnnl_success);
    }
    for (int pass = 0; pass < 2 && !bad; pass++) {
        /* pass 0: the inputs' reorders, then the primitive; pass 1: the outputs' reorders
         * (the scope is entered only where there is one, so its calls count reorders run) */
        int any = 0;
        for (int i = 0; i < 3; i++) any |= p->port[i].reo && p->port[i].out == pass;
        if (any) CONV_STAGE_BEGIN(n, dir, CONV_ST_REORDER);
        for (int i = 0; i < 3 && !bad; i++) {
            const dn_port *o = &p->port[i];
            if (!o->reo || o->out != pass) continue;
            dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, pass ? mem[i] : user[i] }, { DNNL_ARG_TO, pass ? user[i] : mem[i] } };
            bad = dnnl_primitive_execute(o->reo, stream, 2, a) != dnnl_success || dnnl_stream_wait(stream) != dnnl_success;
        }
        if (any) CONV_STAGE_END(n, dir, CONV_ST_REORDER);
        if (pass || bad) continue;
        dnnl_exec_arg_t a[4] = { { p->port[0].arg, mem[0] }, { p->port[1].arg, mem[1] }, { p->port[2].arg, mem[2] },
                                 { DNNL_ARG_SCRATCHPAD, scratch } };
        CONV_STAGE_BEGIN(n, dir, st);
        bad = dnnl_primitive_execute(p->prim, stream, 4, a) != dnnl_success || dnnl_stream_wait(stream) != dnnl_success;
        CONV_STAGE_END(n, dir, st);
    }
    for (int i = 0; i < 3; i++) {
        if (mem[i]) dnnl_memory_destroy(mem[i]);
        if (user[i]) dnnl_memory_destroy(user[i]);
    }
    if (scratch) dnnl_memory_destroy(scratch);
    if (stream) dnnl_stream_destroy(stream);
    return bad ? -1 : 0;
}

/* Rows r0 .. r0+S-1 by set s: forward, or backward (dx when the node wants it; dW written
 * when first, else added through the workspace's dW). */
static int run_rows(eng_node *n, const dn_set *s, int r0, int S, int bwd, int first)
{
    float *ws = n->col, *x = (float *)n->x + (size_t)r0 * n->in_size;
    float *dy = n->dy + (size_t)r0 * n->out_size;
    if (!bwd) {
        void *ptr[3] = { x, n->w, n->y + (size_t)r0 * n->out_size };
        return run_prim(n, 0, CONV_ST_PRIM, &s->p[DN_FWD], ptr, ws);
    }
    if (n->dx) {
        void *ptr[3] = { dy, n->w, n->dx + (size_t)r0 * n->in_size };
        if (run_prim(n, 1, CONV_ST_PRIM, &s->p[DN_DATA], ptr, ws)) return -1;
    }
    float *dw = first ? n->dw : ws + s->dw_off;
    void *ptr[3] = { x, dy, dw };
    if (run_prim(n, 1, CONV_ST_WEIGHTS, &s->p[DN_WEIGHTS], ptr, ws)) return -1;
    if (!first) cblas_saxpy((int)n->n_w, 1.0f, dw, 1, n->dw, 1);
    return 0;
}

/* A pass over rows in chunks of n->chunk; a chunk whose set needs more workspace than the
 * node has (or could not be made) runs row by row, whose set the workspace was sized for. */
static void dn_pass(eng_node *n, int rows, int bwd)
{
    int layout = layout_of(n), failed = 0;
    size_t room = eng_dnconv_ws_floats(n, n->chunk);
    omp_set_num_threads(threads_now());
    for (int r0 = 0; r0 < rows; r0 += n->chunk) {
        int S = rows - r0 < n->chunk ? rows - r0 : n->chunk;
        const dn_set *s = set_of(n, S, layout);
        if (s && s->ok && s->floats <= room) {
            failed |= run_rows(n, s, r0, S, bwd, r0 == 0);
            continue;
        }
        const dn_set *one = set_of(n, 1, layout);
        for (int r = r0; r < r0 + S; r++) failed |= !one || !one->ok || run_rows(n, one, r, 1, bwd, r == 0);
    }
    /* only a primitive that worked when it was made and fails now lands here: say so loudly
     * in the values rather than train on stale ones */
    if (failed) {
        float nan = __builtin_nanf("");
        float *o = bwd ? n->dw : n->y;
        size_t cnt = bwd ? n->n_w : (size_t)rows * n->out_size;
        for (size_t i = 0; i < cnt; i++) o[i] = nan;
    }
}

void eng_dnconv_fwd(eng_node *n, int rows) { dn_pass(n, rows, 0); }
void eng_dnconv_bwd(eng_node *n, int rows) { dn_pass(n, rows, 1); }

/* Bytes: the primitive reads and writes each tensor once, and each reorder reads and writes
 * its tensor once more. */
uint64_t eng_dnconv_bytes(const eng_node *n, int rows, eng_dir dir)
{
    const dn_set *s = set_of(n, rows < n->chunk ? rows : n->chunk, layout_of(n));
    uint64_t B = (uint64_t)rows, x = B * n->in_size, w = (uint64_t)n->n_w, y = B * n->out_size, extra = 0;
    int first = dir == ENG_FWD ? DN_FWD : DN_DATA, last = dir == ENG_FWD ? DN_FWD : DN_WEIGHTS;
    for (int i = first; s && s->ok && i <= last; i++)
        for (int j = 0; j < 3; j++) extra += s->p[i].port[j].reo ? 2 * s->p[i].port[j].bytes : 0;
    uint64_t chunks = n->chunk > 0 ? (B + (uint64_t)n->chunk - 1) / (uint64_t)n->chunk : 1;
    if (dir == ENG_FWD) return 4 * (x + w + y) + extra * chunks;
    uint64_t e = x + y + w + (n->dx ? y + w + x : 0);
    return 4 * e + extra * chunks;
}

/* The fastest of reps forward + backward passes of the node under layout (after one
 * warm-up), as conv.c times the algorithms. */
static double time_layout(eng_node *n, int rows, int layout, int reps)
{
    layout_set(n, layout);
    double best = 1e300;
    for (int r = -1; r < reps; r++) {
        uint64_t t0 = prof_now_ns();
        dn_pass(n, rows, 0);
        dn_pass(n, rows, 1);
        double t = (double)(prof_now_ns() - t0);
        if (r >= 0 && t < best) best = t;
    }
    return best;
}

int eng_dnconv_prepare(eng_node *n, int rows, int reps)
{
    const dn_set *pl = set_of(n, n->chunk, DN_PLAIN), *bl = set_of(n, n->chunk, DN_BLOCKED);
    int have_pl = pl && pl->ok, have_bl = bl && bl->ok;
    if (!have_pl && !have_bl) return eng_fail(ENG_EINVAL, "conv: oneDNN %s", pl ? pl->why : "out of memory");
    char key[400], val[32];
    eng_conv_choice_key(n, rows, "onednn-layout", key, sizeof key);
    int layout = have_pl ? DN_PLAIN : DN_BLOCKED;
    if (eng_choice_get("conv-choices", key, val, sizeof val)) {
        int l = !strcmp(val, layout_names[DN_BLOCKED]) ? DN_BLOCKED : DN_PLAIN;
        if (l == DN_BLOCKED ? have_bl : have_pl) { layout_set(n, l); return ENG_OK; }
    }
    if (have_pl && have_bl) {
        /* the values do not matter to the time; a first layer has no input yet (the model
         * lends one only to auto): a zeroed one stands in */
        const float *x = n->x;
        float *zeros = x ? NULL : prof_calloc((size_t)rows * n->in_size, sizeof(float));
        if (!x && !zeros) return eng_fail(ENG_ENOMEM, "conv: out of memory timing oneDNN's layouts");
        if (!x) n->x = zeros;
        double tp = time_layout(n, rows, DN_PLAIN, reps), tb = time_layout(n, rows, DN_BLOCKED, reps);
        n->x = x;
        prof_free(zeros);
        layout = tb < tp ? DN_BLOCKED : DN_PLAIN;
    }
    layout_set(n, layout);
    eng_choice_put("conv-choices", key, layout_names[layout]);
    return ENG_OK;
}

void eng_dnconv_force_layout(const eng_node *n, int blocked) { layout_set(n, blocked ? DN_BLOCKED : DN_PLAIN); }

const char *eng_dnconv_layout_name(const eng_node *n) { return layout_names[layout_of(n)]; }

int eng_dnconv_reorders(const eng_node *n, int rows)
{
    const dn_set *s = set_of(n, rows, layout_of(n));
    int k = 0;
    for (int i = 0; s && s->ok && i < DN_PRIMS; i++)
        for (int j = 0; j < 3; j++) k += s->p[i].port[j].reo != NULL;
    return k;
}
