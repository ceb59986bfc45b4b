/* conv_onednn.c — conv2d by oneDNN's convolution primitives (forward, backward-data,
 * backward-weights; zero padding and stride; no bias: the engine's bias op adds it). The
 * engine's tensors stay NCHW (x, y, dx, dy) and OIHW (W, dW = [F x C*K*K]); a primitive set
 * is made per layer shape, rows per call and layout:
 *  - plain: the primitives work on NCHW/OIHW as stored (no reorder);
 *  - blocked: created with format `any`, so oneDNN picks its own formats (nChw16c, ...),
 *    and each argument whose format differs is reordered into the workspace and back.
 * Which layout a shape runs is measured once (eng_dnconv_prepare) and cached per machine
 * like the algorithm choice. Sets live for the process (as FFTW's plans do) in a table under
 * a mutex; their scratchpads (user mode) and reorder buffers are in the node's workspace
 * (n->col), sized by eng_dnconv_ws_floats, so the model's arena counts them.
 *
 * Threads: every primitive runs on one thread; at T threads a pass splits its rows into T
 * slabs on the engine's pool (pool.c), each slab with its own part of the workspace, and
 * adds the slabs' dW. oneDNN's own OpenMP threads are never woken: they spin-wait after
 * each call and fought the pool's workers for the cores (2 threads ran this ResNet slower
 * than 1). Nor are OpenBLAS's: dW sums are added by add_dw, not cblas_saxpy, which splits a
 * vector of more than 10000 floats over OpenBLAS's threads, whose worker then spins beside
 * the pool's (docs/convolution.md, "Threads"). Per call nothing is looked up under a lock
 * nor created: the node keeps its layer record (layout, workspace room, the sets it ran),
 * each set keeps per slab the memory objects its primitives bind (re-pointed at each
 * call), each thread one stream. */
#define _POSIX_C_SOURCE 200809L

#include "conv_internal.h"
#include "lanes.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* The memory objects one execution of a primitive binds: the primitive's view of each
 * argument, the engine's where a reorder converts, the scratchpad; made without buffers,
 * pointed at the call's tensors with dnnl_memory_set_data_handle. */
typedef struct { dnnl_memory_t mem[3], user[3], scratch; } dn_mems;

/* A slab's memory objects for one set, made on its first call. busy while a call uses them:
 * two models of one shape run from two threads at once would otherwise re-point the same
 * objects (the second one then makes its own for the call, as every call once did). */
typedef struct {
    atomic_int busy;
    int made;           /* 0 not yet, 1 made, -1 failed */
    dn_mems m[DN_PRIMS];
} dn_exec;

/* The key: C H W F K pad stride rows layout. */
#define DN_KEY 9
typedef struct {
    int key[DN_KEY];
    int ok;
    char why[96];       /* ok == 0: what failed */
    dn_prim p[DN_PRIMS];
    size_t floats;      /* workspace: scratchpad, reorder buffers, a dW for chunk sums */
    size_t dw_off;      /* that dW's offset (floats) */
    dn_exec ex[ENG_POOL_MAX];
} dn_set;

/* A layer record, shared by the nodes of one key: C H W F K pad stride, rows per chunk,
 * slabs (the thread count). The layout its shape runs, one slab's workspace (floats: the
 * slab's dW sum, then the largest set's need) and the sets it ran, per layout, read
 * without the lock (published with release). Lives for the process. */
#define DN_LKEY 9
#define DN_CACHE 8
struct eng_dnconv {
    int key[DN_LKEY];
    atomic_int layout;
    atomic_size_t room;  /* 0 until the first pass computes it (any racer computes the same) */
    _Atomic(dn_set *) cache[DN_LAYOUTS][DN_CACHE];
};
typedef struct eng_dnconv dn_layer;

static pthread_mutex_t dn_mu = PTHREAD_MUTEX_INITIALIZER;
static dn_set **sets;
static size_t n_sets, cap_sets;
static dn_layer **layers;
static size_t n_layers, cap_layers;
static dnnl_engine_t dn_engine;
static int engine_state; /* 0 not tried, 1 ok, -1 failed */
static _Thread_local dnnl_stream_t tl_stream; /* this thread's, made on its first call */

#define DN_HOOK "NNBENCH_ONEDNN_CONV_FAIL"

/* Slabs a pass splits its rows into: the BLAS thread count the run set, as the GEMMs use. */
static int slabs_now(void)
{
    int t = openblas_get_num_threads();
    return t < 1 ? 1 : t > ENG_POOL_MAX ? ENG_POOL_MAX : t;
}

static void lkey_of(const eng_node *n, int *key)
{
    conv_dims d = conv_get(n);
    int k[DN_LKEY] = { d.C, d.H, d.W, d.F, d.K, d.pad, d.st, n->chunk > 0 ? n->chunk : 1, slabs_now() };
    memcpy(key, k, sizeof k);
}

/* Grows a table of pointers by one free place; 0, or -1 out of memory. */
static int grow(void ***tab, size_t n, size_t *cap)
{
    if (n < *cap) return 0;
    void **g = realloc(*tab, (2 * *cap + 8) * sizeof *g);
    if (!g) return -1;
    *tab = g;
    *cap = 2 * *cap + 8;
    return 0;
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
    int C = k[0], H = k[1], W = k[2], F = k[3], K = k[4], pad = k[5], st = k[6], N = k[7], any = k[8] == DN_BLOCKED;
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
    /* oneDNN sizes its per-thread buffers by the OpenMP count at creation: one */
    omp_set_num_threads(1);
    if (engine_state > 0 && !build_prims(s, &why)) s->ok = 1;
    else snprintf(s->why, sizeof s->why, "failed: %s", why);
    return s;
}

/* The set of key, made on first use (a failure is kept too, so it is not retried); NULL
 * only when out of memory. */
static dn_set *set_get(const int *key)
{
    pthread_mutex_lock(&dn_mu);
    dn_set *s = NULL;
    for (size_t i = 0; i < n_sets && !s; i++)
        if (!memcmp(sets[i]->key, key, sizeof sets[i]->key)) s = sets[i];
    if (!s && !grow((void ***)&sets, n_sets, &cap_sets) && (s = make_set(key))) sets[n_sets++] = s;
    pthread_mutex_unlock(&dn_mu);
    return s;
}

/* The record of n's key, made on first use; NULL only when out of memory. */
static dn_layer *layer_get(const eng_node *n)
{
    int key[DN_LKEY];
    lkey_of(n, key);
    if (n->dn && !memcmp(n->dn->key, key, sizeof key)) return n->dn;
    pthread_mutex_lock(&dn_mu);
    dn_layer *L = NULL;
    for (size_t i = 0; i < n_layers && !L; i++)
        if (!memcmp(layers[i]->key, key, sizeof key)) L = layers[i];
    if (!L && !grow((void ***)&layers, n_layers, &cap_layers) && (L = calloc(1, sizeof *L))) {
        memcpy(L->key, key, sizeof key);
        atomic_init(&L->layout, DN_PLAIN);
        layers[n_layers++] = L;
    }
    pthread_mutex_unlock(&dn_mu);
    return L;
}

/* The node's record, kept on the node for its next calls. */
static dn_layer *layer_of(eng_node *n) { return n->dn = layer_get(n); }

/* The set of L's shape for rows rows under layout: from L's list without a lock, else
 * looked up (and listed while there is room). */
static dn_set *set_for(dn_layer *L, int rows, int layout)
{
    _Atomic(dn_set *) *c = L->cache[layout];
    for (int i = 0; i < DN_CACHE; i++) {
        dn_set *s = atomic_load_explicit(&c[i], memory_order_acquire);
        if (!s) break;
        if (s->key[7] == rows) return s;
    }
    int key[DN_KEY];
    memcpy(key, L->key, 7 * sizeof(int));
    key[7] = rows;
    key[8] = layout;
    dn_set *s = set_get(key);
    if (!s) return NULL;
    pthread_mutex_lock(&dn_mu);
    int i = 0;
    while (i < DN_CACHE && atomic_load_explicit(&c[i], memory_order_relaxed) &&
           atomic_load_explicit(&c[i], memory_order_relaxed) != s)
        i++;
    if (i < DN_CACHE) atomic_store_explicit(&c[i], s, memory_order_release);
    pthread_mutex_unlock(&dn_mu);
    return s;
}

static size_t dw_floats(const eng_node *n)
{
    conv_dims d = conv_get(n);
    return conv_round16((size_t)d.F * d.CKK);
}

/* One slab's workspace for chunks of `chunk` rows: its dW sum and the largest need of the
 * sets it may run (either layout, as prepare times both; one row, the fallback). */
static size_t slab_room(const eng_node *n, dn_layer *L, int chunk)
{
    size_t most = 0;
    for (int l = 0; l < DN_LAYOUTS; l++)
        for (int r = 0; r < 2; r++) {
            const dn_set *s = set_for(L, r ? 1 : chunk, l);
            if (s && s->ok && s->floats > most) most = s->floats;
        }
    return dw_floats(n) + most;
}

const char *eng_dnconv_unusable(const eng_node *n)
{
    const char *hook = getenv(DN_HOOK);
    if (hook && *hook) return "failed: " DN_HOOK " is set";
    dn_layer *L = layer_get(n);
    const dn_set *s = L ? set_for(L, n->chunk > 0 ? n->chunk : 1, atomic_load(&L->layout)) : NULL;
    return !s ? "failed: out of memory" : s->ok ? "" : s->why;
}

size_t eng_dnconv_ws_floats(const eng_node *n, int chunk)
{
    dn_layer *L = layer_get(n);
    return L ? (size_t)L->key[8] * slab_room(n, L, chunk) : 0;
}

/* ---- running -------------------------------------------------------------------------- */

static void mems_free(dn_mems *m)
{
    for (int i = 0; i < 3; i++) {
        if (m->mem[i]) dnnl_memory_destroy(m->mem[i]);
        if (m->user[i]) dnnl_memory_destroy(m->user[i]);
    }
    if (m->scratch) dnnl_memory_destroy(m->scratch);
    memset(m, 0, sizeof *m);
}

static int mems_make(const dn_prim *p, dn_mems *m)
{
    memset(m, 0, sizeof *m);
    int bad = dnnl_memory_create(&m->scratch, &p->scratch_md, dn_engine, DNNL_MEMORY_NONE) != dnnl_success;
    for (int i = 0; i < 3 && !bad; i++) {
        const dn_port *o = &p->port[i];
        bad = dnnl_memory_create(&m->mem[i], &o->md, dn_engine, DNNL_MEMORY_NONE) != dnnl_success ||
              (o->reo && dnnl_memory_create(&m->user[i], &o->umd, dn_engine, DNNL_MEMORY_NONE) != dnnl_success);
    }
    if (bad) mems_free(m);
    return bad ? -1 : 0;
}

/* Points m at this call's buffers: ptr[i] is port i's tensor as the engine stores it, ws
 * the slab's part of the workspace. */
static int mems_point(const dn_prim *p, dn_mems *m, void *ptr[3], float *ws)
{
    int bad = dnnl_memory_set_data_handle(m->scratch, ws) != dnnl_success;
    for (int i = 0; i < 3 && !bad; i++) {
        const dn_port *o = &p->port[i];
        bad = dnnl_memory_set_data_handle(m->mem[i], o->reo ? (void *)(ws + o->off) : ptr[i]) != dnnl_success ||
              (o->reo && dnnl_memory_set_data_handle(m->user[i], ptr[i]) != dnnl_success);
    }
    return bad ? -1 : 0;
}

static int exec_make(const dn_set *s, dn_exec *e)
{
    for (int i = 0; i < DN_PRIMS; i++)
        if (mems_make(&s->p[i], &e->m[i])) {
            for (int j = 0; j < i; j++) mems_free(&e->m[j]);
            return -1;
        }
    return 0;
}

/* Executes prim on this thread's stream with args, waiting for it. */
static int exec(dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args)
{
    if (!tl_stream && dnnl_stream_create(&tl_stream, dn_engine, dnnl_stream_default_flags) != dnnl_success) {
        tl_stream = NULL;
        return -1;
    }
    return dnnl_primitive_execute(prim, tl_stream, nargs, args) != dnnl_success ||
           dnnl_stream_wait(tl_stream) != dnnl_success;
}

/* What one slab's call runs with: the node, its part of the workspace, and whether this
 * thread (the pass's caller) enters the profiler's stage scopes (the profiler is the
 * training thread's). */
typedef struct {
    eng_node *n;
    float *ws;
    int slab, prof;
} dn_call;

#define STAGE_BEGIN(c, dir, st) do { if ((c)->prof) CONV_STAGE_BEGIN((c)->n, dir, st); } while (0)
#define STAGE_END(c, dir, st) do { if ((c)->prof) CONV_STAGE_END((c)->n, dir, st); } while (0)

/* Runs primitive `which` of s: inputs reordered into the workspace first, outputs out of
 * it after. The reorders are the stage CONV_ST_REORDER, the primitive stage st. */
static int run_prim(const dn_call *c, int dir, int st, dn_set *s, int which, void *ptr[3])
{
    const dn_prim *p = &s->p[which];
    dn_exec *e = &s->ex[c->slab];
    dn_mems tmp, *m = &tmp;
    int own = !atomic_exchange_explicit(&e->busy, 1, memory_order_acquire);
    if (own && !e->made) e->made = exec_make(s, e) ? -1 : 1;
    int bad = 0;
    if (own && e->made > 0) m = &e->m[which];
    else bad = mems_make(p, &tmp);
    bad = bad || mems_point(p, m, ptr, c->ws);
    for (int pass = 0; pass < 2 && !bad; pass++) {
        /* pass 0: the inputs' reorders, then the primitive; pass 1: the outputs' reorders
         * (the scope is entered only where there is one, so its calls count reorders run) */
        int any = 0;
        for (int i = 0; i < 3; i++) any |= p->port[i].reo && p->port[i].out == pass;
        if (any) STAGE_BEGIN(c, dir, CONV_ST_REORDER);
        for (int i = 0; i < 3 && !bad; i++) {
            const dn_port *o = &p->port[i];
            if (!o->reo || o->out != pass) continue;
            dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, pass ? m->mem[i] : m->user[i] },
                                     { DNNL_ARG_TO, pass ? m->user[i] : m->mem[i] } };
            bad = exec(o->reo, 2, a);
        }
        if (any) STAGE_END(c, dir, CONV_ST_REORDER);
        if (pass || bad) continue;
        dnnl_exec_arg_t a[4] = { { p->port[0].arg, m->mem[0] }, { p->port[1].arg, m->mem[1] },
                                 { p->port[2].arg, m->mem[2] }, { DNNL_ARG_SCRATCHPAD, m->scratch } };
        STAGE_BEGIN(c, dir, st);
        bad = exec(p->prim, 4, a);
        STAGE_END(c, dir, st);
    }
    if (m == &tmp) mems_free(&tmp);
    if (own) atomic_store_explicit(&e->busy, 0, memory_order_release);
    return bad ? -1 : 0;
}

/* dw += part, element by element (what cblas_saxpy with alpha 1 computes, bit for bit), on
 * the calling thread only. */
static void add_dw(float *dw, const float *part, size_t n) { lanes_add(part, dw, dw, n); }

/* Rows r0 .. r0+S-1 by set s: forward, or backward (dx when the node wants it; dW written
 * to dw when first, else added to it through the set's chunk dW). */
static int run_rows(const dn_call *c, dn_set *s, int r0, int S, int bwd, float *dw, int first)
{
    eng_node *n = c->n;
    float *x = (float *)n->x + (size_t)r0 * n->in_size, *dy = n->dy + (size_t)r0 * n->out_size;
    if (!bwd) {
        void *ptr[3] = { x, n->w, n->y + (size_t)r0 * n->out_size };
        return run_prim(c, 0, CONV_ST_PRIM, s, DN_FWD, ptr);
    }
    if (n->dx) {
        void *ptr[3] = { dy, n->w, n->dx + (size_t)r0 * n->in_size };
        if (run_prim(c, 1, CONV_ST_PRIM, s, DN_DATA, ptr)) return -1;
    }
    float *to = first ? dw : c->ws + s->dw_off;
    void *ptr[3] = { x, dy, to };
    if (run_prim(c, 1, CONV_ST_WEIGHTS, s, DN_WEIGHTS, ptr)) return -1;
    if (!first) add_dw(dw, to, n->n_w);
    return 0;
}

typedef struct {
    eng_node *n;
    dn_layer *L;
    int rows, bwd, layout;
    pthread_t caller;
    atomic_int failed;
} dn_job;

/* The rows of `slab` of nslab in that workspace part, in chunks of n->chunk; its dW goes
 * to n->dw (slab 0) or to its part's dW sum (the caller adds those). A chunk whose set
 * needs more room than the part has (or could not be made) runs row by row, whose set the
 * part was sized for. */
static void dn_slab(void *p, int slab, int nslab)
{
    dn_job *j = p;
    eng_node *n = j->n;
    float *part = n->col + (size_t)slab * j->L->room;
    dn_call c = { n, part + dw_floats(n), slab, pthread_equal(pthread_self(), j->caller) };
    float *dw = slab ? part : n->dw;
    size_t room = j->L->room - dw_floats(n);
    int r0 = (int)((long)j->rows * slab / nslab), r1 = (int)((long)j->rows * (slab + 1) / nslab), failed = 0;
    for (int r = r0; r < r1; r += n->chunk) {
        int S = r1 - r < n->chunk ? r1 - r : n->chunk;
        dn_set *s = set_for(j->L, S, j->layout);
        if (s && s->ok && s->floats <= room) {
            failed |= run_rows(&c, s, r, S, j->bwd, dw, r == r0);
            continue;
        }
        dn_set *one = set_for(j->L, 1, j->layout);
        for (int q = r; q < r + S; q++) failed |= !one || !one->ok || run_rows(&c, one, q, 1, j->bwd, dw, q == r0);
    }
    if (failed) atomic_store(&j->failed, 1);
}

/* Slabs worth running for rows rows: each keeps at least ~1 MFLOP (tens of microseconds
 * against the few a hand-over to a worker costs). */
static int slabs_for(const eng_node *n, const dn_layer *L, int rows)
{
    conv_dims d = conv_get(n);
    double per_row = 2.0 * d.F * (double)d.CKK * (double)d.P;
    int k = L->key[8] < rows ? L->key[8] : rows;
    while (k > 1 && per_row * rows / k < 1e6) k--;
    return k;
}

static void dn_pass(eng_node *n, int rows, int bwd)
{
    dn_layer *L = layer_of(n);
    if (L && !atomic_load_explicit(&L->room, memory_order_relaxed))
        atomic_store_explicit(&L->room, slab_room(n, L, L->key[7]), memory_order_relaxed);
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    dn_job j = { n, L, rows, bwd, L ? atomic_load(&L->layout) : DN_PLAIN, pthread_self(), 0 };
    int nslab = L ? slabs_for(n, L, rows) : 1;
    if (L && (nslab < 2 || !eng_pool_run(nslab, dn_slab, &j))) {
        nslab = 1; /* unsplit (one slab, or the pool is driven already) */
        dn_slab(&j, 0, 1);
    }
    /* the slabs' dW sums, in slab order (the same bits at the same thread count) */
    for (int s = 1; bwd && s < nslab && !atomic_load(&j.failed); s++)
        add_dw(n->dw, n->col + (size_t)s * L->room, n->n_w);
    /* only a primitive that worked when it was made and fails now lands here: say so loudly
     * in the values rather than train on stale ones */
    if (!L || atomic_load(&j.failed)) {
        float nan = __builtin_nanf("");
        float *o = bwd ? n->dw : n->y;
        size_t cnt = bwd ? n->n_w : (size_t)rows * n->out_size;
        for (size_t i = 0; i < cnt; i++) o[i] = nan;
    }
}

void eng_dnconv_fwd(eng_node *n, int rows) { dn_pass(n, rows, 0); }
void eng_dnconv_bwd(eng_node *n, int rows) { dn_pass(n, rows, 1); }

/* Bytes: the primitive reads and writes each tensor once, and each reorder reads and writes
 * its tensor once more (per chunk of each slab). */
uint64_t eng_dnconv_bytes(const eng_node *n, int rows, eng_dir dir)
{
    dn_layer *L = layer_get(n);
    int nslab = L && rows > 0 ? slabs_for(n, L, rows) : 1, per = (rows + nslab - 1) / nslab;
    int S = per < n->chunk ? per : n->chunk;
    const dn_set *s = L && S > 0 ? set_for(L, S, atomic_load(&L->layout)) : NULL;
    uint64_t B = (uint64_t)rows, x = B * n->in_size, w = (uint64_t)n->n_w, y = B * n->out_size, extra = 0;
    int first = dir == ENG_FWD ? DN_FWD : DN_DATA, last = dir == ENG_FWD ? DN_FWD : DN_WEIGHTS;
    for (int i = first; s && s->ok && i <= last; i++)
        for (int j = 0; j < 3; j++) extra += s->p[i].port[j].reo ? 2 * s->p[i].port[j].bytes : 0;
    uint64_t chunks = S > 0 ? (uint64_t)nslab * (uint64_t)((per + S - 1) / S) : 1;
    if (dir == ENG_FWD) return 4 * (x + w + y) + extra * chunks;
    uint64_t e = x + y + w + (n->dx ? y + w + x : 0) + (nslab - 1) * 2 * w; /* + the slabs' dW sums */
    return 4 * e + extra * chunks;
}

/* The fastest of reps forward + backward passes of the node under layout (after one
 * warm-up), as conv.c times the algorithms. */
static double time_layout(eng_node *n, dn_layer *L, int rows, int layout, int reps)
{
    atomic_store(&L->layout, layout);
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
    dn_layer *L = layer_of(n);
    if (!L) return eng_fail(ENG_ENOMEM, "conv: out of memory for oneDNN's primitives");
    const dn_set *pl = set_for(L, n->chunk, DN_PLAIN), *bl = set_for(L, n->chunk, DN_BLOCKED);
    int have_pl = pl && pl->ok, have_bl = bl && bl->ok;
    if (!have_pl && !have_bl) return eng_fail(ENG_EINVAL, "conv: oneDNN %s", pl ? pl->why : "out of memory");
    char key[400], val[32];
    eng_conv_choice_key(n, rows, "onednn-layout", key, sizeof key);
    int layout = have_pl ? DN_PLAIN : DN_BLOCKED;
    if (eng_choice_get("conv-choices", key, val, sizeof val)) {
        int l = !strcmp(val, layout_names[DN_BLOCKED]) ? DN_BLOCKED : DN_PLAIN;
        if (l == DN_BLOCKED ? have_bl : have_pl) { atomic_store(&L->layout, l); return ENG_OK; }
    }
    if (have_pl && have_bl) {
        /* the values do not matter to the time; a first layer has no input yet (the model
         * lends one only to auto): a zeroed one stands in */
        const float *x = n->x;
        float *zeros = x ? NULL : prof_calloc((size_t)rows * n->in_size, sizeof(float));
        if (!x && !zeros) return eng_fail(ENG_ENOMEM, "conv: out of memory timing oneDNN's layouts");
        if (!x) n->x = zeros;
        double tp = time_layout(n, L, rows, DN_PLAIN, reps), tb = time_layout(n, L, rows, DN_BLOCKED, reps);
        n->x = x;
        prof_free(zeros);
        layout = tb < tp ? DN_BLOCKED : DN_PLAIN;
    }
    atomic_store(&L->layout, layout);
    eng_choice_put("conv-choices", key, layout_names[layout]);
    return ENG_OK;
}

void eng_dnconv_force_layout(const eng_node *n, int blocked)
{
    dn_layer *L = layer_get(n);
    if (L) atomic_store(&L->layout, blocked ? DN_BLOCKED : DN_PLAIN);
}

const char *eng_dnconv_layout_name(const eng_node *n)
{
    dn_layer *L = layer_get(n);
    return layout_names[L ? atomic_load(&L->layout) : DN_PLAIN];
}

int eng_dnconv_reorders(const eng_node *n, int rows)
{
    dn_layer *L = layer_get(n);
    const dn_set *s = L ? set_for(L, rows, atomic_load(&L->layout)) : NULL;
    int k = 0;
    for (int i = 0; s && s->ok && i < DN_PRIMS; i++)
        for (int j = 0; j < 3; j++) k += s->p[i].port[j].reo != NULL;
    return k;
}
