/* model.c — builds a model from layer specs (shapes, one parameter buffer, one gradient
 * buffer, one activation arena, seeded init), and runs its nodes forward and backward
 * through the op table at one call site, where profiling attaches. */
#include "dist.h"
#include "internal.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the one place every op runs ----------------------------------------------------- */

void eng_node_run(prof_t *prof, eng_node *n, eng_dir dir, int rows)
{
    if (n->fused & (dir == ENG_FWD ? ENG_FUSED_FWD : ENG_FUSED_BWD)) return; /* run by the dense node next to it */
    const eng_op *op = &eng_ops[n->op];
    void (*fn)(eng_node *, int) = dir == ENG_FWD ? op->forward : op->backward;
    if (!prof) { fn(n, rows); return; }
    int id = dir == ENG_FWD ? n->prof_fwd : n->prof_bwd;
    PROF_BEGIN(prof, id);
    fn(n, rows);
    PROF_END(prof, id, op->flops(n, rows, dir), op->bytes(n, rows, dir));
}

static inline void run_node(eng_model *m, eng_node *n, eng_dir dir, int rows) { eng_node_run(m->prof, n, dir, rows); }

/* ---- building ------------------------------------------------------------------------ */

/* Nodes whose output is their input (in place / a view): they own no buffers. A relu runs
 * in place too after a node whose backward does not read its own output (a bias, which
 * follows a dense, conv or cbsr_dense node: their backward reads x and dy; batch norm,
 * which reads x; a residual sum), and its backward gates on its output: y > 0 exactly when
 * x > 0. At two threads its own output buffer cost more than the op: lines the other core
 * had read, to be taken back at every write (relu.fwd of the Fashion MLP's first layer
 * 10-13 us a step against 2.7 in place; docs/performance.md). */
static int node_aliases(const eng_model *m, const eng_node *n)
{
    if (n->op == ENG_OP_RELU)
        return n > m->nodes && (n[-1].op == ENG_OP_BIAS || n[-1].op == ENG_OP_BATCHNORM || n[-1].op == ENG_OP_RES_ADD);
    return n->op == ENG_OP_BIAS || n->op == ENG_OP_FLATTEN || n->op == ENG_OP_ATTN_SOFTMAX ||
           n->op == ENG_OP_RES_FORK;
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* A node's own scratch (n->ws): the sequence ops' (attention.c), or the tile of W a
 * cbsr_dense node copies for its multiply (sparse.c). */
static size_t node_ws_floats(const eng_node *n, int max_batch)
{
    return n->op == ENG_OP_CBSR_DENSE ? ENG_CBSR_PACK_FLOATS(n->in_size) : eng_seq_ws_floats(n, max_batch);
}

static const char *kind_name(eng_layer_kind k)
{
    switch (k) {
    case ENG_LAYER_DENSE: return "dense";
    case ENG_LAYER_CONV: return "conv";
    case ENG_LAYER_POOL: return "pool";
    case ENG_LAYER_FLATTEN: return "flatten";
    case ENG_LAYER_SAGE: return "sage";
    case ENG_LAYER_AVGPOOL: return "avgpool";
    case ENG_LAYER_GAP: return "gap";
    case ENG_LAYER_SEQ: return "seq"; /* renamed by eng_seq_plan (embed1, encoder1, ...) */
    case ENG_LAYER_BN: return "bn";
    case ENG_LAYER_RES_BEGIN: case ENG_LAYER_RES: return "res";
    }
    return "?";
}

/* A conv layer's output shape and its conv2d + bias nodes (plan's case). */
static int plan_conv(eng_model *m, const eng_layer_spec *sp, int i, eng_layer *L, const int shape[3], int out[3])
{
    int F = sp->units, K = sp->kernel, pad = sp->pad, st = sp->stride ? sp->stride : 1;
    if (F <= 0 || K <= 0)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): conv needs filters > 0 and kernel > 0, got conv:%d:%d",
                        i + 1, L->name, F, K);
    if (pad < 0 || pad >= K || st < 0)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): conv:%d:%d needs 0 <= pad < kernel and stride >= 1, "
                        "got pad=%d stride=%d", i + 1, L->name, F, K, pad, sp->stride);
    if (shape[1] + 2 * pad < K || shape[2] + 2 * pad < K)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): a %dx%d kernel with pad %d does not fit its %dx%dx%d "
                        "input (conv needs image input: C,H,W with H + 2*pad and W + 2*pad >= kernel); "
                        "use a smaller kernel, more padding or fewer pooling layers before it",
                        i + 1, L->name, K, K, pad, shape[0], shape[1], shape[2]);
    /* PyTorch's sizes: positions past the last whole window are dropped */
    out[0] = F; out[1] = (shape[1] + 2 * pad - K) / st + 1; out[2] = (shape[2] + 2 * pad - K) / st + 1;
    L->kernel = K;
    L->pad = pad;
    L->stride = st;
    L->n_w = (size_t)F * shape[0] * K * K;
    L->n_b = (size_t)F;
    eng_node *cn = eng_model_add_node(m, ENG_OP_CONV2D, i, shape, out);
    cn->kernel = K;
    cn->pad = pad;
    cn->stride = st;
    eng_model_add_node(m, ENG_OP_BIAS, i, out, out);
    return ENG_OK;
}

/* An avgpool layer's output shape and node (plan's case). */
static int plan_avgpool(eng_model *m, const eng_layer_spec *sp, int i, eng_layer *L, const int shape[3], int out[3])
{
    int K = sp->kernel ? sp->kernel : 2, st = sp->stride ? sp->stride : K;
    if (K < 1 || st < 1)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): avgpool needs kernel >= 1 and stride >= 1, got avgpool:%d:%d",
                        i + 1, L->name, K, st);
    if (shape[1] < K || shape[2] < K)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): a %dx%d average pool does not fit its %dx%dx%d input; "
                        "use a smaller kernel or fewer pooling layers before it",
                        i + 1, L->name, K, K, shape[0], shape[1], shape[2]);
    out[0] = shape[0]; out[1] = (shape[1] - K) / st + 1; out[2] = (shape[2] - K) / st + 1;
    L->kernel = K;
    L->stride = st;
    eng_node *pn = eng_model_add_node(m, ENG_OP_AVGPOOL, i, shape, out);
    pn->kernel = K;
    pn->stride = st;
    return ENG_OK;
}

/* A bn layer: the shape stays; gamma (W) and beta (b) per channel, and running statistics. */
static void plan_bn(eng_model *m, int i, eng_layer *L, const int shape[3], int out[3])
{
    memcpy(out, shape, 3 * sizeof(int));
    eng_node *bn = eng_model_add_node(m, ENG_OP_BATCHNORM, i, shape, out);
    L->n_w = L->n_b = (size_t)eng_bn_channels(bn);
    m->n_stats += 2 * L->n_w;
}

/* The RES layer closing the block opened at layer b: the shortcut (b's input) is added to
 * the block's output (shape) as it is when the shapes agree, else through a 1x1 projection
 * with the stride that maps one onto the other. */
static int plan_res(eng_model *m, int i, int b, eng_layer *L, const int shape[3], int out[3])
{
    const eng_layer *B = &m->layers[b];
    memcpy(out, shape, 3 * sizeof(int));
    eng_node *add = eng_model_add_node(m, ENG_OP_RES_ADD, i, shape, out);
    add->peer = &m->nodes[B->node_first];
    L->res_begin = b;
    if (!memcmp(B->in_shape, shape, 3 * sizeof(int))) return ENG_OK;
    int st = eng_res_proj_stride(B->in_shape, shape), C, F, P;
    if (!st)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): the residual block turns %dx%dx%d into %dx%dx%d, which "
                        "no 1x1 projection shortcut with a stride can match; make the block keep the size or "
                        "shrink it by a stride (conv ...:stride=S with pad = K/2)", i + 1, L->name,
                        B->in_shape[0], B->in_shape[1], B->in_shape[2], shape[0], shape[1], shape[2]);
    eng_res_dims(B->in_shape, &C, &P);
    eng_res_dims(shape, &F, &P);
    add->stride = L->stride = st;
    L->n_w = (size_t)F * C;
    L->n_b = (size_t)F;
    return ENG_OK;
}

/* Opens (begin) or closes a residual block in plan: the stack of open blocks, their
 * numbers (the res layer and its res( share "resN"), and the layer's name. */
typedef struct { int at[ENG_MAX_LAYERS], num[ENG_MAX_LAYERS], depth, count; } res_stack;

static int res_step(res_stack *st, const eng_layer_spec *sp, int i, eng_layer *L)
{
    if (sp->kind == ENG_LAYER_RES_BEGIN) {
        st->at[st->depth] = i;
        st->num[st->depth++] = ++st->count;
        snprintf(L->name, sizeof L->name, "res%d.in", st->count);
        return ENG_OK;
    }
    if (!st->depth)
        return eng_fail(ENG_EINVAL, "model: layer %d closes a residual block that was never opened (res( missing)", i + 1);
    snprintf(L->name, sizeof L->name, "res%d", st->num[--st->depth]);
    return ENG_OK;
}

/* Layer i's activation node, after its other nodes (plan's step). */
static int plan_act(eng_model *m, const eng_model_config *mc, int i, const eng_layer *L, const int out[3])
{
    const eng_layer_spec *sp = &mc->layers[i];
    if (sp->kind == ENG_LAYER_POOL || sp->kind == ENG_LAYER_FLATTEN || sp->kind == ENG_LAYER_AVGPOOL ||
        sp->kind == ENG_LAYER_GAP || sp->kind == ENG_LAYER_RES_BEGIN || sp->kind == ENG_LAYER_SEQ)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s) takes no activation (got %s); put it on the layer before",
                        i + 1, L->name, eng_act_name(sp->act));
    if (sp->act == ENG_ACT_MAXK) {
        int units = out[0] * out[1] * out[2];
        if (sp->kind != ENG_LAYER_DENSE || sp->k < 1 || sp->k > units)
            return eng_fail(ENG_EINVAL, "model: layer %d (%s): maxk%d needs a dense layer and 1 <= k <= %d units",
                            i + 1, L->name, sp->k, units);
        if (i + 1 >= mc->n_layers || mc->layers[i + 1].kind != ENG_LAYER_DENSE)
            return eng_fail(ENG_EINVAL, "model: layer %d (%s): maxk%d must be followed by a dense layer "
                            "(its output is sparse, CBSR); add one after it", i + 1, L->name, sp->k);
    }
    eng_model_add_node(m, (eng_op_id)eng_act_op(sp->act), i, out, out)->k = sp->k;
    return ENG_OK;
}

/* A dense layer's output shape and its dense (or cbsr_dense after maxk) + bias nodes. */
static int plan_dense(eng_model *m, const eng_model_config *mc, int i, eng_layer *L, const int shape[3], int out[3])
{
    int units = mc->layers[i].units;
    if (units <= 0)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): units must be a positive number, got %d", i + 1, L->name, units);
    out[0] = 1; out[1] = 1; out[2] = units;
    L->n_w = L->in_size * (size_t)units;
    L->n_b = (size_t)units;
    /* after a maxk layer the input is CBSR: the multiply reads k of the in rows of W */
    if (i > 0 && mc->layers[i - 1].act == ENG_ACT_MAXK)
        eng_model_add_node(m, ENG_OP_CBSR_DENSE, i, shape, out)->k = mc->layers[i - 1].k;
    else
        eng_model_add_node(m, ENG_OP_DENSE, i, shape, out);
    eng_model_add_node(m, ENG_OP_BIAS, i, out, out);
    return ENG_OK;
}

/* A 2x2 max-pool layer's output shape and node. */
static int plan_pool(eng_model *m, const eng_layer_spec *sp, int i, const eng_layer *L, const int shape[3], int out[3])
{
    if (sp->kernel != 0 && sp->kernel != 2)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): only 2x2 max-pooling is implemented, got kernel %d",
                        i + 1, L->name, sp->kernel);
    if (shape[1] < 2 || shape[2] < 2)
        return eng_fail(ENG_EINVAL, "model: layer %d (%s): 2x2 pooling needs an input of at least 2x2, got %dx%dx%d",
                        i + 1, L->name, shape[0], shape[1], shape[2]);
    out[0] = shape[0]; out[1] = shape[1] / 2; out[2] = shape[2] / 2;
    eng_model_add_node(m, ENG_OP_MAXPOOL, i, shape, out);
    return ENG_OK;
}

/* Shapes and nodes of every layer; parameter offsets. No allocation. */
static int plan(eng_model *m, const eng_model_config *mc)
{
    int shape[3] = { m->in_shape[0], m->in_shape[1], m->in_shape[2] };
    int counts[ENG_LAYER_KINDS] = { 0 }, has_params = 0;
    size_t off = 0;
    res_stack rs = { .depth = 0, .count = 0 };
    for (int i = 0; i < mc->n_layers; i++) {
        const eng_layer_spec *sp = &mc->layers[i];
        eng_layer *L = &m->layers[i];
        memset(L, 0, sizeof *L);
        L->kind = sp->kind;
        L->act = sp->act;
        if (sp->kind == ENG_LAYER_SAGE)
            return eng_fail(ENG_EINVAL, "model: layer %d is a sage layer: it needs graph data (data.source = graph)", i + 1);
        if ((unsigned)sp->kind >= ENG_LAYER_KINDS)
            return eng_fail(ENG_EINVAL, "model: layer %d has an unknown kind %d", i + 1, (int)sp->kind);
        if ((unsigned)sp->act > ENG_ACT_MAXK)
            return eng_fail(ENG_EINVAL, "model: layer %d has an unknown activation %d", i + 1, (int)sp->act);
        if (sp->kind == ENG_LAYER_RES_BEGIN || sp->kind == ENG_LAYER_RES) {
            int rc = res_step(&rs, sp, i, L);
            if (rc) return rc;
        } else {
            snprintf(L->name, sizeof L->name, "%s%d", kind_name(sp->kind), ++counts[sp->kind]);
        }
        memcpy(L->in_shape, shape, sizeof shape);
        L->in_size = (size_t)shape[0] * shape[1] * shape[2];
        L->node_first = m->n_nodes;
        int out[3];
        switch (sp->kind) {
        case ENG_LAYER_DENSE: {
            int rc = plan_dense(m, mc, i, L, shape, out);
            if (rc) return rc;
            break;
        }
        case ENG_LAYER_CONV: {
            int rc = plan_conv(m, sp, i, L, shape, out);
            if (rc) return rc;
            break;
        }
        case ENG_LAYER_POOL: {
            int rc = plan_pool(m, sp, i, L, shape, out);
            if (rc) return rc;
            break;
        }
        case ENG_LAYER_FLATTEN:
            out[0] = 1; out[1] = 1; out[2] = (int)L->in_size;
            eng_model_add_node(m, ENG_OP_FLATTEN, i, shape, out);
            break;
        case ENG_LAYER_AVGPOOL: {
            int rc = plan_avgpool(m, sp, i, L, shape, out);
            if (rc) return rc;
            break;
        }
        case ENG_LAYER_GAP:
            out[0] = shape[0]; out[1] = 1; out[2] = 1;
            eng_model_add_node(m, ENG_OP_GAP, i, shape, out);
            break;
        case ENG_LAYER_SEQ: {
            int rc = eng_seq_plan(m, sp, i, L, shape, out);
            if (rc) return rc;
            break;
        }
        case ENG_LAYER_BN: plan_bn(m, i, L, shape, out); break;
        case ENG_LAYER_RES_BEGIN:
            memcpy(out, shape, sizeof out);
            eng_model_add_node(m, ENG_OP_RES_FORK, i, shape, out);
            break;
        case ENG_LAYER_RES: {
            int rc = plan_res(m, i, rs.at[rs.depth], L, shape, out);
            if (rc) return rc;
            break;
        }
        case ENG_LAYER_SAGE: return ENG_EINVAL; /* refused above */
        }
        if (sp->act != ENG_ACT_NONE) {
            int rc = plan_act(m, mc, i, L, out);
            if (rc) return rc;
        }
        L->n_nodes = m->n_nodes - L->node_first;
        memcpy(L->out_shape, out, sizeof out);
        L->out_size = (size_t)out[0] * out[1] * out[2];
        if (L->n_w) {
            has_params = 1;
            L->w_off = off;
            L->b_off = off + L->n_w;
            off += L->n_w + L->n_b;
        }
        memcpy(shape, out, sizeof shape);
    }
    if (rs.depth)
        return eng_fail(ENG_EINVAL, "model: the residual block opened at layer %d is never closed", rs.at[rs.depth - 1] + 1);
    if (!has_params)
        return eng_fail(ENG_EINVAL, "model: needs at least one dense or conv layer");
    const eng_layer *last = &m->layers[mc->n_layers - 1];
    if (last->out_size != (size_t)m->n_out)
        return eng_fail(ENG_EINVAL, "model: the last layer (%s) gives %zu outputs but the data has %d %s; "
                        "end the layers with dense:%d",
                        last->name, last->out_size, m->n_out,
                        mc->loss == ENG_LOSS_SOFTMAX_XENT ? "classes" : "outputs", m->n_out);
    int lo[3] = { 1, 1, m->n_out };
    eng_model_add_node(m, mc->loss == ENG_LOSS_MSE ? ENG_OP_MSE : ENG_OP_SOFTMAX_XENT, -1, lo, lo);
    m->loss = &m->nodes[m->n_nodes - 1];
    m->n_params = off;
    return ENG_OK;
}

/* Conv workspace rows per sgemm: as many rows as fit in about 8 MB of im2col. */
#define CONV_WS_FLOATS ((size_t)2 << 20)

static int conv_chunk(const eng_node *n, int max_batch)
{
    size_t P = n->out_size / (size_t)n->out_shape[0];
    size_t per_row = (size_t)n->in_shape[0] * n->kernel * n->kernel * P;
    size_t c = CONV_WS_FLOATS / (per_row ? per_row : 1);
    if (c < 1) c = 1;
    if (c > (size_t)max_batch) c = (size_t)max_batch;
    return (int)c;
}

/* Floats of a node's own buffers besides y and dy (batchnorm's saved statistics; a
 * projection's strided shortcut, its GEMMs' products and the shortcut's gradient). */
static size_t extra_floats(const eng_node *n, size_t B)
{
    if (n->op == ENG_OP_BATCHNORM) return round16(2 * (size_t)eng_bn_channels(n));
    if (n->op != ENG_OP_RES_ADD || !n->stride) return 0;
    int C, P, F, Pin;
    eng_res_dims(n->peer->in_shape, &C, &Pin);
    eng_res_dims(n->out_shape, &F, &P);
    size_t cp = (size_t)C * P;
    return round16(B * cp) + round16(eng_res_proj_dcol_floats(n, B)) + round16(B * n->peer->in_size);
}

/* Points a node's extra buffers (extra_floats) into the arena at *p and advances it. */
static void carve_extra(eng_model *m, eng_node *n, float **p, float **stats)
{
    size_t B = (size_t)m->max_batch;
    if (n->op == ENG_OP_BATCHNORM) {
        n->save = *p;
        n->stats = *stats;
        *stats += 2 * (size_t)eng_bn_channels(n);
        n->training = 1;
    } else if (n->op == ENG_OP_RES_ADD && n->stride) {
        int C, P, F, Pin;
        eng_res_dims(n->peer->in_shape, &C, &Pin);
        eng_res_dims(n->out_shape, &F, &P);
        size_t cp = (size_t)C * P;
        n->col = *p;
        n->dcol = n->col + round16(B * cp);
        n->dskip = n->dcol + round16(eng_res_proj_dcol_floats(n, B));
    } else if (n->op == ENG_OP_RES_ADD) {
        n->dskip = n->dy;   /* identity: dL/dshortcut is dL/dy */
    }
    if (n->op == ENG_OP_RES_ADD) n->peer->dskip = n->dskip;
    *p += extra_floats(n, B);
}

/* Buffers: sizes first, then one arena carved in order; the same walk assigns pointers. */
static int allocate(eng_model *m)
{
    size_t B = (size_t)m->max_batch, floats = 0, ints = 0, col = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        if (n == m->loss) {
            if (n->op == ENG_OP_SOFTMAX_XENT) floats += round16(B * n->out_size);
            continue;
        }
        if (!node_aliases(m, n)) floats += 2 * round16(B * n->out_size);
        floats += extra_floats(n, B);
        if (n->op == ENG_OP_MAXPOOL) ints += B * n->out_size;
        if (n->op == ENG_OP_MAXK) ints += B * (size_t)n->k;
        floats += round16(node_ws_floats(n, m->max_batch));
        if (n->op == ENG_OP_CONV2D) {
            n->chunk = conv_chunk(n, m->max_batch);
            /* room for either algorithm: auto may time both on this workspace */
            size_t c = eng_conv_ws_floats(n, n->chunk);
            if (c > col) col = c;
            /* a whole batch fits: keep this layer's im2col for its backward */
            n->col_kept = n->chunk == m->max_batch;
            if (n->col_kept) floats += round16(c);
        }
    }
    floats += 2 * round16(col);
    m->params = prof_calloc(m->n_params, sizeof(float));
    /* the spare tail carries a data-parallel step's scalars in the gradient all-reduce */
    m->grads = prof_calloc(m->n_params + eng_dist_spare(), sizeof(float));
    m->arena = prof_calloc(floats ? floats : 1, sizeof(float));
    m->iarena = ints ? prof_calloc(ints, sizeof(int32_t)) : NULL;
    m->stats = m->n_stats ? prof_calloc(m->n_stats, sizeof(float)) : NULL;
    if (!m->params || !m->grads || !m->arena || (ints && !m->iarena) || (m->n_stats && !m->stats)) {
        /* Say which part is too big: the fix differs (smaller layers vs a smaller batch). */
        double pmb = 2.0 * (double)m->n_params * sizeof(float) / 1048576.0;   /* + gradients */
        double amb = ((double)floats * sizeof(float) + (double)ints * sizeof(int32_t)) / 1048576.0;
        if (pmb >= amb)
            return eng_fail(ENG_ENOMEM, "model: out of memory: the parameters are too big: %zu parameters take "
                            "%.0f MB with their gradients (activations for batches of %d rows: %.0f MB); use "
                            "fewer or smaller layers (model.layers)", m->n_params, pmb, m->max_batch, amb);
        return eng_fail(ENG_ENOMEM, "model: out of memory: the batch is too big: activations for batches of %d "
                        "rows take %.0f MB (%zu parameters: %.0f MB with gradients); use a smaller train.batch",
                        m->max_batch, amb, m->n_params, pmb);
    }

    float *p = m->arena;
    int32_t *ip = m->iarena;
    float *ws_col = p; p += round16(col);
    float *ws_dcol = p; p += round16(col);
    const float *x = NULL;   /* the input: wired at each forward */
    float *dx = NULL;        /* no gradient for the input unless enabled */
    int32_t *xidx = NULL;    /* CBSR column indices of x (after a maxk node) */
    float *stats = m->stats;
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        n->x = x;
        n->dx = dx;
        if (n == m->loss) {
            if (n->op == ENG_OP_SOFTMAX_XENT) { n->y = p; p += round16(B * n->out_size); }
            break;
        }
        if (node_aliases(m, n)) {
            n->y = (float *)x;
            n->dy = dx;
        } else {
            n->y = p; p += round16(B * n->out_size);
            n->dy = p; p += round16(B * n->out_size);
        }
        carve_extra(m, n, &p, &stats);
        if (n->op == ENG_OP_MAXPOOL) { n->argmax = ip; ip += B * n->out_size; }
        if (n->op == ENG_OP_CBSR_DENSE) n->idx = xidx;
        xidx = NULL;
        if (n->op == ENG_OP_MAXK) { n->idx = xidx = ip; ip += B * (size_t)n->k; }
        if (node_ws_floats(n, m->max_batch)) { n->ws = p; p += round16(node_ws_floats(n, m->max_batch)); }
        if (n->op == ENG_OP_CONV2D) {
            n->dcol = ws_dcol;
            if (n->col_kept) {
                n->col = p;
                p += round16(eng_conv_ws_floats(n, n->chunk));
            } else {
                n->col = ws_col;
            }
        }
        x = n->y;
        dx = n->dy;
    }
    /* parameters, and each layer's view of its nodes' buffers */
    for (int i = 0; i < m->n_layers; i++) {
        eng_layer *L = &m->layers[i];
        eng_node *first = &m->nodes[L->node_first], *lastn = &m->nodes[L->node_first + L->n_nodes - 1];
        if (L->kind == ENG_LAYER_SEQ) {
            eng_seq_wire(m, L);
        } else if (L->n_w) {
            L->w = m->params + L->w_off; L->b = m->params + L->b_off;
            L->dw = m->grads + L->w_off; L->db = m->grads + L->b_off;
            first->w = L->w; first->dw = L->dw; first->n_w = L->n_w;
            /* the weight node also knows its bias, for anyone inspecting it (batchnorm and
             * res_add apply it themselves: no bias node follows them) */
            first->b = L->b; first->db = L->db; first->n_b = L->n_b;
            eng_node *bias = L->n_nodes > 1 && first[1].op == ENG_OP_BIAS ? first + 1 : first;
            bias->b = L->b; bias->db = L->db; bias->n_b = L->n_b;
            L->z = bias->y; L->dz = bias->dy;
        } else {
            L->z = first->y; L->dz = first->dy;
        }
        L->x = first->x;
        L->a = lastn->y; L->da = lastn->dy;
    }
    m->logits = m->loss->x;
    m->dlogits = m->loss->dx;
    m->probs = m->loss->op == ENG_OP_SOFTMAX_XENT ? m->loss->y : NULL;
    return ENG_OK;
}

/* He (normal, std sqrt(2/fan_in)) before relu/gelu or batch norm, Xavier (uniform ±sqrt(6/(fan_in+fan_out)))
 * otherwise, unless the config forces one; biases stay 0. One stream per layer. */
static void init_params(eng_model *m, uint64_t seed)
{
    for (int i = 0; i < m->n_layers; i++) {
        eng_layer *L = &m->layers[i];
        if (!L->n_w || L->kind == ENG_LAYER_BN) continue;
        if (L->kind == ENG_LAYER_SEQ) { eng_seq_init(m, L, seed, i); continue; }
        double fan_in, fan_out;
        if (L->kind == ENG_LAYER_RES) {
            /* the projection: a 1x1 convolution, W [F x C] */
            fan_in = (double)(L->n_w / L->n_b);
            fan_out = (double)L->n_b;
        } else if (L->kind == ENG_LAYER_CONV) {
            double kk = (double)L->kernel * L->kernel;
            fan_in = L->in_shape[0] * kk;
            fan_out = L->out_shape[0] * kk;
        } else {
            fan_in = (double)L->in_size;
            fan_out = (double)L->out_size;
        }
        /* before batch norm the scale is normalised away, except in the running statistics:
         * Xavier's small outputs (variance ~0.01 for a first conv) take the running variance
         * from its 1 at start to the truth only after ~50 steps, so an early evaluation sees
         * a wrong scale; He keeps them of order 1 (and matches PyTorch's peer) */
        int before_bn = i + 1 < m->n_layers && m->layers[i + 1].kind == ENG_LAYER_BN;
        int he = m->cfg.init == ENG_INIT_HE ||
                 (m->cfg.init == ENG_INIT_AUTO &&
                  (L->act == ENG_ACT_RELU || L->act == ENG_ACT_GELU || L->act == ENG_ACT_MAXK || before_bn));
        eng_rng r;
        eng_rng_seed(&r, seed, ENG_STREAM_INIT + (uint64_t)i);
        if (he) {
            double sd = sqrt(2.0 / fan_in);
            for (size_t k = 0; k < L->n_w; k++) L->w[k] = (float)(sd * eng_rng_normal(&r));
        } else {
            double lim = sqrt(6.0 / (fan_in + fan_out));
            for (size_t k = 0; k < L->n_w; k++) L->w[k] = (float)(lim * (2.0 * eng_rng_uniform(&r) - 1.0));
        }
        memset(L->b, 0, L->n_b * sizeof(float));
    }
}

/* Batch norm starts as the identity (gamma 1, beta 0) with running mean 0 and variance 1,
 * as PyTorch's. */
static void init_bn(eng_model *m)
{
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        if (n->op != ENG_OP_BATCHNORM) continue;
        size_t C = n->n_w;
        for (size_t c = 0; c < C; c++) { n->w[c] = 1.0f; n->b[c] = 0.0f; n->stats[c] = 0.0f; n->stats[C + c] = 1.0f; }
    }
}

/* The conv algorithm a conv2d node's layer asks for: its :algo=X, else model.conv_algo. */
static eng_conv_algo conv_want(const eng_model *m, const eng_node *n)
{
    int a = m->cfg.layer_algo[n->layer];
    return a ? (eng_conv_algo)(a - 1) : m->cfg.conv_algo;
}

/* The layer's conv algorithm note (eng_conv_tag: what ran, and why a forced one fell back). */
static int conv_algo_tag(const eng_model *m, const eng_layer *L, char *s, size_t cap)
{
    const eng_node *n = &m->nodes[L->node_first];
    return eng_conv_tag(n, conv_want(m, n), s, cap);
}

/* model.conv_algo, or the layer's :algo=X, on every conv2d node (eng_conv_select): the
 * given algorithm (one the layer cannot run falls back to im2col), or for auto the fastest
 * on the node's shape with max_batch rows, timed on the model's own buffers before the
 * parameters are set (it overwrites activations, gradients and workspace; the parameters
 * are still zero). A first layer has no input buffer yet: a zeroed one stands in. */
#define CONV_CHOOSE_REPS 3

static int choose_conv_algos(eng_model *m)
{
    float *zeros = NULL;
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        if (n->op != ENG_OP_CONV2D) continue;
        const float *x = n->x;
        if (!x && conv_want(m, n) == ENG_CONV_AUTO) {
            if (!zeros) zeros = prof_calloc((size_t)m->max_batch * n->in_size, sizeof(float));
            if (!zeros) return eng_fail(ENG_ENOMEM, "model: out of memory timing the conv algorithms");
            n->x = zeros;
        }
        int rc = eng_conv_select(n, conv_want(m, n), m->max_batch, CONV_CHOOSE_REPS);
        n->x = x;
        if (rc) { prof_free(zeros); return rc; }
    }
    prof_free(zeros);
    return ENG_OK;
}

static void make_summary(eng_model *m)
{
    char *s = m->summary;
    size_t cap = sizeof m->summary, len = 0;
    for (int i = 0; i < m->n_layers && len < cap; i++) {
        const eng_layer *L = &m->layers[i];
        const int *a = L->in_shape, *b = L->out_shape;
        /* nothing between "res(" and the block's first layer, nor before its ")" */
        const char *sep = i && m->layers[i - 1].kind != ENG_LAYER_RES_BEGIN && L->kind != ENG_LAYER_RES ? ", " : "";
        int w = 0;
        switch (L->kind) {
        case ENG_LAYER_DENSE: w = snprintf(s + len, cap - len, "%sdense(%zu->%zu)", sep, L->in_size, L->out_size); break;
        case ENG_LAYER_CONV:
            w = snprintf(s + len, cap - len, "%sconv(%dx%dx%d->%dx%dx%d k%d", sep, a[0], a[1], a[2], b[0], b[1], b[2], L->kernel);
            if (w > 0) len += (size_t)w;
            /* the defaults keep the summary stored with earlier runs */
            w = L->pad && len < cap ? snprintf(s + len, cap - len, " p%d", L->pad) : 0;
            if (w > 0) len += (size_t)w;
            w = L->stride > 1 && len < cap ? snprintf(s + len, cap - len, " s%d", L->stride) : 0;
            if (w > 0) len += (size_t)w;
            w = len < cap ? conv_algo_tag(m, L, s + len, cap - len) : 0;
            if (w > 0) len += (size_t)w;
            w = len < cap ? snprintf(s + len, cap - len, ")") : 0;
            break;
        case ENG_LAYER_POOL:
            w = snprintf(s + len, cap - len, "%spool(%dx%dx%d->%dx%dx%d)", sep, a[0], a[1], a[2], b[0], b[1], b[2]);
            break;
        case ENG_LAYER_FLATTEN: w = snprintf(s + len, cap - len, "%sflatten(%dx%dx%d->%zu)", sep, a[0], a[1], a[2], L->out_size); break;
        case ENG_LAYER_AVGPOOL:
            w = snprintf(s + len, cap - len, "%savgpool(%dx%dx%d->%dx%dx%d k%d s%d)", sep, a[0], a[1], a[2], b[0], b[1], b[2],
                         L->kernel, L->stride);
            break;
        case ENG_LAYER_GAP: w = snprintf(s + len, cap - len, "%sgap(%dx%dx%d->%d)", sep, a[0], a[1], a[2], b[0]); break;
        case ENG_LAYER_BN: w = snprintf(s + len, cap - len, "%sbn(%zu)", sep, L->n_w); break;
        case ENG_LAYER_RES_BEGIN: w = snprintf(s + len, cap - len, "%sres(", sep); break;
        case ENG_LAYER_RES:
            w = L->n_w ? snprintf(s + len, cap - len, " + proj 1x1 s%d)", L->stride) : snprintf(s + len, cap - len, ")");
            break;
        case ENG_LAYER_SAGE: break; /* never built here (engine/graph/gnn.c) */
        case ENG_LAYER_SEQ: w = len < cap ? snprintf(s + len, cap - len, "%s", sep) : 0;
            if (w > 0) len += (size_t)w;
            w = len < cap ? eng_seq_summary(m, L, s + len, cap - len) : 0;
            break;
        }
        if (w > 0) len += (size_t)w;
        if (L->act == ENG_ACT_MAXK && len < cap) {
            int k = m->nodes[L->node_first + L->n_nodes - 1].k;
            w = snprintf(s + len, cap - len, " maxk%d", k);
            if (w > 0) len += (size_t)w;
        } else if (L->act != ENG_ACT_NONE && len < cap) {
            w = snprintf(s + len, cap - len, " %s", eng_act_name(L->act));
            if (w > 0) len += (size_t)w;
        }
    }
    if (len < cap) snprintf(s + len, cap - len, "  [%zu params]", m->n_params);
}

static int register_scopes(eng_model *m)
{
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        const char *layer = n->layer < 0 ? "loss" : m->layers[n->layer].name;
        char name[48];
        snprintf(name, sizeof name, "%s.fwd", eng_ops[n->op].name);
        n->prof_fwd = prof_register(m->prof, name, layer, PROF_OP);
        snprintf(name, sizeof name, "%s.bwd", eng_ops[n->op].name);
        n->prof_bwd = prof_register(m->prof, name, layer, PROF_OP);
        if (n->prof_fwd < 0 || n->prof_bwd < 0 || (n->op == ENG_OP_CONV2D && eng_conv_register_stages(m->prof, n, layer)))
            return eng_fail(ENG_EINVAL, "model: the profiler's scope table is full (%s %s): %s",
                            layer, eng_ops[n->op].name, prof_error());
    }
    return ENG_OK;
}

int eng_model_build(const eng_model_config *mc, const int in_shape[3], int n_out,
                    int max_batch, uint64_t seed, prof_t *prof, eng_model **out)
{
    *out = NULL;
    if (eng_isa_init()) return ENG_EINVAL; /* NNBENCH_ISA names a path this CPU cannot run */
    if (!mc || mc->n_layers < 1 || mc->n_layers > ENG_MAX_LAYERS)
        return eng_fail(ENG_EINVAL, "model: needs 1 to %d layers, got %d", ENG_MAX_LAYERS, mc ? mc->n_layers : 0);
    if (in_shape[0] < 1 || in_shape[1] < 1 || in_shape[2] < 1)
        return eng_fail(ENG_EINVAL, "model: bad input shape %dx%dx%d", in_shape[0], in_shape[1], in_shape[2]);
    if (n_out < 1)
        return eng_fail(ENG_EINVAL, "model: the data must have at least 1 output (got %d)", n_out);
    if (max_batch < 1)
        return eng_fail(ENG_EINVAL, "model: max_batch must be at least 1 (got %d)", max_batch);
    if (mc->loss != ENG_LOSS_SOFTMAX_XENT && mc->loss != ENG_LOSS_MSE)
        return eng_fail(ENG_EINVAL, "model: unknown loss %d", (int)mc->loss);
    if (mc->loss == ENG_LOSS_SOFTMAX_XENT && n_out < 2)
        return eng_fail(ENG_EINVAL, "model: softmax_xent needs at least 2 classes (the data has %d output); "
                        "use loss = mse for regression", n_out);
    eng_model *m = prof_calloc(1, sizeof *m);
    if (!m) return eng_fail(ENG_ENOMEM, "model: out of memory");
    m->cfg = *mc;
    memcpy(m->in_shape, in_shape, sizeof m->in_shape);
    m->in_size = (size_t)in_shape[0] * in_shape[1] * in_shape[2];
    m->n_out = n_out;
    m->max_batch = max_batch;
    m->n_layers = mc->n_layers;
    m->prof = prof;
    int rc = plan(m, mc);
    if (!rc) rc = allocate(m);
    if (!rc) rc = eng_model_set_fusion(m, 1);
    if (!rc) rc = choose_conv_algos(m);
    if (!rc && prof) rc = register_scopes(m);
    if (rc) { eng_model_free(m); return rc; }
    eng_seq_charge(m);
    init_params(m, seed);
    init_bn(m);
    m->training = 1;
    make_summary(m);
    *out = m;
    return ENG_OK;
}

void eng_model_free(eng_model *m)
{
    if (!m) return;
    prof_free(m->params);
    prof_free(m->grads);
    prof_free(m->arena);
    prof_free(m->iarena);
    prof_free(m->dinput);
    prof_free(m->stats);
    prof_free(m->kwork);
    prof_free(m->bpart);
    prof_free(m);
}

void eng_model_set_training(eng_model *m, int training)
{
    m->training = training != 0;
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == ENG_OP_BATCHNORM) m->nodes[i].training = m->training;
}

int eng_model_enable_input_grad(eng_model *m)
{
    if (m->dinput) return ENG_OK;
    m->dinput = prof_calloc((size_t)m->max_batch * m->in_size, sizeof(float));
    if (!m->dinput) return eng_fail(ENG_ENOMEM, "model: out of memory for the input gradient");
    /* the first nodes up to the first one that owns its output see the input's gradient */
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        n->dx = m->dinput;
        if (!node_aliases(m, n)) break;
        n->dy = m->dinput;
    }
    return ENG_OK;
}

/* ---- running ------------------------------------------------------------------------- */

/* Points the first nodes and layers (up to the first that owns its output) at x. */
static void wire_input(eng_model *m, const float *x)
{
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        n->x = x;
        if (!node_aliases(m, n)) break;
        n->y = (float *)x;
    }
    for (int i = 0; i < m->n_layers; i++) {
        eng_layer *L = &m->layers[i];
        L->x = x;
        if (L->kind != ENG_LAYER_FLATTEN && L->kind != ENG_LAYER_RES_BEGIN) break;
        L->z = L->a = (float *)x;
    }
}

double eng_model_forward(eng_model *m, const float *x, int rows, const int32_t *labels,
                         const float *targets, int *correct)
{
    if (correct) *correct = 0;
    if (rows < 1 || rows > m->max_batch) {
        eng_fail(ENG_EINVAL, "model: forward of %d rows, but the model was built for 1 to %d", rows, m->max_batch);
        return NAN;
    }
    if (!labels == !targets) {
        eng_fail(ENG_EINVAL, "model: forward needs exactly one of labels and targets");
        return NAN;
    }
    if (labels)
        for (int r = 0; r < rows; r++)
            if (labels[r] < 0 || labels[r] >= m->n_out) {
                eng_fail(ENG_EINVAL, "model: label %d of row %d is outside 0..%d", (int)labels[r], r, m->n_out - 1);
                return NAN;
            }
    wire_input(m, x);
    m->rows = rows;
    m->loss->labels = labels;
    m->loss->targets = targets;
    for (int i = 0; i < m->n_nodes; i++) run_node(m, &m->nodes[i], ENG_FWD, rows);
    if (correct) *correct = m->loss->correct;
    return m->loss->loss;
}

void eng_model_backward(eng_model *m)
{
    if (m->rows < 1) return; /* no forward yet: nothing to differentiate */
    for (int i = m->n_nodes - 1; i >= 0; i--) run_node(m, &m->nodes[i], ENG_BWD, m->rows);
}

/* The nodes below the loss, last to first: run backward (unless only replaying) and tell
 * ready where the finished gradients begin. Layers own increasing slices of the gradient
 * buffer (weights, then biases) and their nodes run in the reverse order, so after a node
 * every gradient from its lowest one to the end is final. */
static void backward_nodes(eng_model *m, int compute, eng_grads_ready ready, void *ud)
{
    size_t from = m->n_params;
    for (int i = m->n_nodes - 2; i >= 0; i--) {
        eng_node *n = &m->nodes[i];
        if (compute) run_node(m, n, ENG_BWD, m->rows);
        if (n->dw && (size_t)(n->dw - m->grads) < from) from = (size_t)(n->dw - m->grads);
        if (n->db && (size_t)(n->db - m->grads) < from) from = (size_t)(n->db - m->grads);
        if (ready) ready(ud, i ? from : 0);
    }
}

void eng_model_backward_weighted(eng_model *m, float w, eng_grads_ready ready, void *ud)
{
    if (m->rows < 1) return;
    run_node(m, m->loss, ENG_BWD, m->rows);
    /* every gradient is linear in dL/dlogits: scale the rows x n_out values, not the
     * parameters' gradients */
    size_t n = (size_t)m->rows * m->n_out;
    for (size_t i = 0; i < n; i++) m->dlogits[i] *= w;
    backward_nodes(m, 1, ready, ud);
}

void eng_model_grads_ready(eng_model *m, eng_grads_ready ready, void *ud) { backward_nodes(m, 0, ready, ud); }

void eng_model_backward_from(eng_model *m, const float *dlogits)
{
    if (m->rows < 1) return;
    if (dlogits != m->dlogits)
        memmove(m->dlogits, dlogits, (size_t)m->rows * m->n_out * sizeof(float));
    backward_nodes(m, 1, NULL, NULL);
}

float *eng_model_params(eng_model *m) { return m->params; }
float *eng_model_grads(eng_model *m) { return m->grads; }
size_t eng_model_n_params(const eng_model *m) { return m->n_params; }
const char *eng_model_summary(const eng_model *m) { return m->summary; }

int eng_model_dense_matrices(const eng_model *m, size_t *off, int *rows, int *cols, int cap)
{
    int n = 0;
    for (int i = 0; i < m->n_nodes && n < cap; i++) {
        const eng_node *nd = &m->nodes[i];
        if (nd->op != ENG_OP_DENSE || !nd->w) continue;
        off[n] = (size_t)(nd->w - m->params);
        rows[n] = (int)nd->in_size;
        cols[n++] = (int)nd->out_size;
    }
    return n;
}

/* ---- bias and activation fused into the dense nodes' GEMMs (ops.c) ----------------------- */

static int is_act(const eng_node *n)
{
    return n->op == ENG_OP_RELU || n->op == ENG_OP_TANH || n->op == ENG_OP_SIGMOID || n->op == ENG_OP_GELU;
}

/* A bias over a dense output's columns (one per column, in place). */
static int is_dense_bias(const eng_node *n) { return n->op == ENG_OP_BIAS && n->n_b == n->out_size; }

/* Floats of a fused bias b's backward blocks: one row of n_b sums per ENG_SPLIT_UNIT rows
 * of the largest batch. */
static size_t bias_block_floats(const eng_model *m, const eng_node *b)
{
    return (((size_t)m->max_batch + ENG_SPLIT_UNIT - 1) / ENG_SPLIT_UNIT) * b->n_b;
}

/* What dense node d = nodes[i] runs in its slabs: after it in the forward, its bias reading
 * y in place, then an activation of that; before it in the backward, an activation whose
 * dL/dy is d's dx, then a bias whose dL/dy is that activation's dL/dx (or a bias alone).
 * Checked on the buffers, not only the order: a node whose input another one feeds is left
 * alone. */
static void plan_fusion(eng_model *m, int i, size_t *blocks_floats)
{
    eng_node *d = &m->nodes[i], *nx = i + 1 < m->n_nodes ? &m->nodes[i + 1] : NULL;
    if (nx && nx != m->loss && is_dense_bias(nx) && nx->x == d->y) {
        d->fuse_fwd[0] = nx;
        nx = i + 2 < m->n_nodes ? &m->nodes[i + 2] : NULL;
        if (nx && nx != m->loss && is_act(nx) && nx->x == d->fuse_fwd[0]->y) d->fuse_fwd[1] = nx;
    } else if (nx && nx != m->loss && is_act(nx) && nx->x == d->y) {
        d->fuse_fwd[1] = nx;
    }
    eng_node *pv = i > 0 ? &m->nodes[i - 1] : NULL;
    if (!d->dx || !pv || pv->accum) return;
    const float *dy = d->dx;
    if (is_act(pv) && pv->dy == dy) {
        d->fuse_bwd[0] = pv;
        dy = pv->dx;
        pv = i > 1 ? &m->nodes[i - 2] : NULL;
    }
    if (pv && is_dense_bias(pv) && pv->dy == dy && !pv->accum) {
        d->fuse_bwd[1] = pv;
        *blocks_floats += bias_block_floats(m, pv);
    }
}

int eng_model_set_fusion(eng_model *m, int on)
{
    size_t need = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *n = &m->nodes[i];
        n->fused = 0;
        n->bpart = NULL;
        memset(n->fuse_fwd, 0, sizeof n->fuse_fwd);
        memset(n->fuse_bwd, 0, sizeof n->fuse_bwd);
    }
    for (int i = 0; on && i < m->n_nodes; i++)
        if (m->nodes[i].op == ENG_OP_DENSE) plan_fusion(m, i, &need);
    if (need && !m->bpart && !(m->bpart = prof_malloc(need * sizeof(float))))
        return eng_fail(ENG_ENOMEM, "model: out of memory for %zu floats of bias gradient blocks", need);
    float *p = m->bpart;
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *d = &m->nodes[i];
        if (d->op != ENG_OP_DENSE) continue;
        d->prof = m->prof;
        for (int k = 0; k < 2; k++) {
            if (d->fuse_fwd[k]) d->fuse_fwd[k]->fused |= ENG_FUSED_FWD;
            if (d->fuse_bwd[k]) d->fuse_bwd[k]->fused |= ENG_FUSED_BWD;
        }
        if (d->fuse_bwd[1]) {
            d->fuse_bwd[1]->bpart = p;
            p += bias_block_floats(m, d->fuse_bwd[1]);
        }
    }
    return ENG_OK;
}

int eng_model_plan_ksplit(eng_model *m)
{
    size_t need = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const eng_node *nd = &m->nodes[i];
        if (nd->op != ENG_OP_DENSE || nd->n_w < ENG_KSPLIT_MIN_W) continue;
        size_t f = eng_sgemm_ksplit_floats(m->max_batch, (int)nd->out_size, (int)nd->in_size);
        if (f > need) need = f;
    }
    prof_free(m->kwork);
    m->kwork = need ? prof_malloc(need * sizeof(float)) : NULL;
    if (need && !m->kwork) return eng_fail(ENG_ENOMEM, "model: out of memory for %zu floats of GEMM partials", need);
    for (int i = 0; i < m->n_nodes; i++) {
        eng_node *nd = &m->nodes[i];
        int cut = nd->op == ENG_OP_DENSE && nd->n_w >= ENG_KSPLIT_MIN_W && need;
        nd->kwork = cut ? m->kwork : NULL;
        nd->kwork_floats = cut ? need : 0;
    }
    return ENG_OK;
}

int eng_model_prepare_gemms(const eng_model *m, int rows, int threads)
{
    int cap = 2 * m->n_nodes * ENG_OP_MAX_GEMMS + 1;
    eng_gemm_shape *sh = malloc((size_t)cap * sizeof *sh);
    if (!sh) return eng_fail(ENG_ENOMEM, "gemm: out of memory for the model's shapes");
    int rc = eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, threads, sh, eng_model_gemm_shapes(m, rows, sh, cap));
    free(sh);
    return rc;
}

int eng_model_gemm_shapes(const eng_model *m, int rows, eng_gemm_shape *out, int cap)
{
    int n = 0;
    for (int i = 0; i < m->n_nodes; i++) n += eng_node_gemm_shapes(&m->nodes[i], rows, out + n, cap - n);
    return n;
}
