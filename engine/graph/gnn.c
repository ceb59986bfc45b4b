/* gnn.c — GraphSAGE node classification: the aggregate op (self + mean of sampled
 * neighbours, dense or CBSR input), sage layers built from op-table nodes
 *     sage:H:relu   ->  [aggregate] [dense 2·in -> H] [bias] [relu]
 *     sage:H:maxk32 ->  [aggregate] [dense] [bias] [maxk]   (the next aggregate reads CBSR)
 * (W = [W_self; W_neigh] stacked, so z = h_self W_self + mean(h_neigh) W_neigh + b is one
 * multiply of the concatenation), and the training loop of a graph run: full-graph steps
 * or minibatches of seed nodes over sampled blocks (engine/graph/sample.c), evaluation on the
 * full graph, the usual metrics plus the sampler's and the partition's figures.
 *
 * Aggregate counters (4 bytes per float or int32), R = rows (destinations), E = sampled
 * edges of the block, w = in (dense input) or k (CBSR input), 2·in outputs per row:
 *   fwd FLOPs E·w + R·in (sums, then the scale)     bytes/4  R·w + E·w + 2·R·in (+ R·k + E·k for CBSR indices)
 *   bwd FLOPs R·w + 2·E·w                            bytes/4  2·R·in + R·w + 2·E·w  (+ the same indices)
 */
#include "graph.h"
#include "../internal.h"
#include "../data/data_internal.h"
#include "../rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define U64(x) ((uint64_t)(x))

/* ---- the aggregate op --------------------------------------------------------------- */

void eng_aggregate_fwd(eng_node *n, int rows)
{
    const eng_block *b = n->blk;
    size_t in = n->in_size, k = (size_t)n->k;
    for (int i = 0; i < rows; i++) {
        float *restrict self = n->y + (size_t)i * 2 * in, *restrict nb = self + in;
        int64_t a = b->indptr[i], z = b->indptr[i + 1];
        float inv = z > a ? 1.0f / (float)(z - a) : 0.0f;
        if (!k) {
            memcpy(self, n->x + (size_t)i * in, in * sizeof(float));
            memset(nb, 0, in * sizeof(float));
            for (int64_t e = a; e < z; e++) {
                const float *restrict h = n->x + (size_t)b->indices[e] * in;
                for (size_t c = 0; c < in; c++) nb[c] += h[c];
            }
        } else {
            memset(self, 0, 2 * in * sizeof(float));
            const float *v = n->x + (size_t)i * k;
            const int32_t *ix = n->idx + (size_t)i * k;
            for (size_t t = 0; t < k; t++) self[ix[t]] = v[t];
            for (int64_t e = a; e < z; e++) {
                size_t j = (size_t)b->indices[e];
                v = n->x + j * k;
                ix = n->idx + j * k;
                for (size_t t = 0; t < k; t++) nb[ix[t]] += v[t];
            }
        }
        for (size_t c = 0; c < in; c++) nb[c] *= inv;
    }
}

void eng_aggregate_bwd(eng_node *n, int rows)
{
    if (!n->dx) return;
    const eng_block *b = n->blk;
    size_t in = n->in_size, k = (size_t)n->k, w = k ? k : in;
    memset(n->dx, 0, (size_t)b->n_src * w * sizeof(float));
    for (int i = 0; i < rows; i++) {
        const float *dself = n->dy + (size_t)i * 2 * in, *dnb = dself + in;
        int64_t a = b->indptr[i], z = b->indptr[i + 1];
        float inv = z > a ? 1.0f / (float)(z - a) : 0.0f;
        if (!k) {
            float *restrict dh = n->dx + (size_t)i * in;
            for (size_t c = 0; c < in; c++) dh[c] += dself[c];
            for (int64_t e = a; e < z; e++) {
                float *restrict dj = n->dx + (size_t)b->indices[e] * in;
                for (size_t c = 0; c < in; c++) dj[c] += inv * dnb[c];
            }
        } else {
            float *dv = n->dx + (size_t)i * k;
            const int32_t *ix = n->idx + (size_t)i * k;
            for (size_t t = 0; t < k; t++) dv[t] += dself[ix[t]];
            for (int64_t e = a; e < z; e++) {
                size_t j = (size_t)b->indices[e];
                dv = n->dx + j * k;
                ix = n->idx + j * k;
                for (size_t t = 0; t < k; t++) dv[t] += inv * dnb[ix[t]];
            }
        }
    }
}

uint64_t eng_aggregate_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t E = U64(n->blk->indptr[rows]), w = n->k ? U64(n->k) : U64(n->in_size);
    return dir == ENG_FWD ? E * w + U64(rows) * n->in_size : U64(rows) * w + 2 * E * w;
}

uint64_t eng_aggregate_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t R = U64(rows), E = U64(n->blk->indptr[rows]), k = U64(n->k), w = k ? k : U64(n->in_size);
    uint64_t e = dir == ENG_FWD ? R * w + E * w + 2 * R * n->in_size : 2 * R * n->in_size + R * w + 2 * E * w;
    return 4 * (e + R * k + E * k);
}

/* ---- the model ------------------------------------------------------------------------ */

typedef struct {
    int in, out, k;               /* k: maxk of this layer's output (0 = dense output) */
    eng_act act;
    char name[16];
    eng_node nodes[4];            /* aggregate, dense, bias, act */
    int n_nodes;
    size_t w_off, b_off, n_w;
    float *C, *dC, *Z, *dZ, *A, *dA;
    int32_t *idx;
} sage_layer;

enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_EVAL, PH_STEP, N_PHASES };
static const char *const phase_names[N_PHASES] = { "data", "forward", "backward", "optimizer", "eval", "step" };

struct eng_gnn {
    const eng_config *cfg;
    eng_graph *g;
    char name[160];
    int L;
    sage_layer lay[ENG_GRAPH_MAX_LAYERS];
    eng_node loss;
    float *params, *grads;
    size_t n_params;
    eng_optim *opt;
    eng_sampler *sampler;
    eng_block full;               /* the whole graph as one block (indptr/indices = CSR) */
    float *x0;                    /* gathered input features [n x f] */
    float *sel, *dsel, *probs;    /* logits of selected rows, their gradient, softmax [n x C] */
    int32_t *lab;                 /* labels of the selected rows */
    int32_t *ids[4];              /* node ids of each split (ENG_SPLIT_*) */
    int n_ids[4];
    int32_t *perm;
    eng_part_stats part;          /* partition figures (when graph.partition != none) */
    int32_t *part_of;
    int batch, bpe;
    long total_steps;
    prof_t *prof;
    int ph[N_PHASES], sc_gather;
    char summary[512];
};

void eng_gnn_free(eng_gnn *m)
{
    if (!m) return;
    for (int l = 0; l < m->L; l++) {
        sage_layer *y = &m->lay[l];
        prof_free(y->C); prof_free(y->dC); prof_free(y->Z); prof_free(y->dZ);
        if (y->act != ENG_ACT_NONE) { prof_free(y->A); prof_free(y->dA); }
        prof_free(y->idx);
    }
    prof_free(m->params); prof_free(m->grads);
    eng_optim_free(m->opt);
    eng_sampler_free(m->sampler);
    prof_free(m->x0); prof_free(m->sel); prof_free(m->dsel); prof_free(m->probs); prof_free(m->lab);
    for (int s = 0; s < 4; s++) prof_free(m->ids[s]);
    prof_free(m->perm);
    prof_free(m->part_of);
    eng_graph_free(m->g);
    prof_free(m);
}

/* ---- the memory estimate ---------------------------------------------------------------- */

/* What one process may allocate: physical memory, or less under ulimit -v / -d. */
static double memory_limit(void)
{
    double lim = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    int which[2] = { RLIMIT_AS, RLIMIT_DATA };
    for (int i = 0; i < 2; i++) {
        struct rlimit rl;
        if (!getrlimit(which[i], &rl) && rl.rlim_cur != RLIM_INFINITY && (double)rl.rlim_cur < lim)
            lim = (double)rl.rlim_cur;
    }
    return lim;
}

int eng_gnn_check_memory(const eng_config *cfg, int64_t n, int64_t entries, int64_t drawn, int f, int classes,
                         double limit)
{
    const eng_model_config *mc = &cfg->model;
    double N = (double)n, M = (double)entries, F = f;
    /* the graph itself (CSR, features, labels, split), and what building it adds at its
     * peak: the drawn edge list and the CSR's fill pointers */
    double graph = 8 * (N + 1) + 4 * M + 4 * N * F + 5 * N, build = 8 * (double)drawn + 8 * N;
    /* eng_gnn_create's buffers: every layer's activations for all n nodes (a block has at
     * most n rows), the split ids, the gathered inputs and the loss's rows */
    double act = 4 * N * (5 + F + 3.0 * classes);
    for (int l = 0, in = f; l < mc->n_layers; l++) {
        const eng_layer_spec *sp = &mc->layers[l];
        double out = sp->units, k = sp->act == ENG_ACT_MAXK ? sp->k : 0;
        act += 4 * N * (4.0 * in + 2 * out + (sp->act == ENG_ACT_NONE ? 0 : 2 * (k ? k : out)) + k);
        in = sp->units;
    }
    /* METIS k-way: its coarsened copies of the graph; ~10x the CSR in 32-bit indices is a
     * round upper figure (libmetis does not say), far below the activations of a model */
    double metis = cfg->graph.partition == ENG_PART_METIS ? 40 * (N + M) : 0;
    double total = graph + (build > act + metis ? build : act + metis);
    if (limit <= 0) limit = memory_limit();
    if (total <= limit) return ENG_OK;
    char part[64] = "";
    if (metis > 0) snprintf(part, sizeof part, "; METIS about %.0f MB", metis / 1048576);
    return eng_fail(ENG_ENOMEM, "graph: out of memory: the graph is too big: %.0f nodes with %.0f edge entries and %d "
                    "features take an estimated %.0f MB (the graph %.0f MB; building it %.0f MB more; activations of the "
                    "%d sage layers for every node %.0f MB%s), over the %.0f MB this process may use (physical memory, "
                    "ulimit -v/-d); use fewer graph.nodes (or a smaller graph.scale, degree, features or layers)",
                    N, M, f, total / 1048576, graph / 1048576, build / 1048576, mc->n_layers, act / 1048576, part,
                    limit / 1048576);
}

/* Before a generator builds anything: the sizes it will build, estimated. */
static int check_generated(const eng_config *cfg)
{
    const eng_graph_config *gc = &cfg->graph;
    int64_t n, drawn;
    if (gc->source == ENG_GRAPH_SBM) {
        n = gc->nodes;
        drawn = (int64_t)(gc->degree * (double)n / 2.0 + 0.5);
    } else {
        n = (int64_t)1 << gc->scale;
        drawn = (int64_t)gc->edge_factor * n;
    }
    return eng_gnn_check_memory(cfg, n, 2 * drawn, drawn, gc->features, gc->classes, 0);
}

static int load_graph(const eng_config *cfg, eng_graph **out, char *name, size_t cap)
{
    const eng_graph_config *gc = &cfg->graph;
    int rc = gc->source == ENG_GRAPH_FILE ? ENG_OK : check_generated(cfg);
    if (rc) return rc;
    eng_graph *g = NULL;
    switch (gc->source) {
    case ENG_GRAPH_SBM:
        rc = eng_graph_sbm(gc->nodes, gc->classes, gc->degree, gc->homophily, gc->features, gc->noise, cfg->seed, &g);
        snprintf(name, cap, "sbm(n=%d, c=%d, deg=%g, h=%g, f=%d, noise=%g)", gc->nodes, gc->classes, gc->degree,
                 gc->homophily, gc->features, gc->noise);
        break;
    case ENG_GRAPH_RMAT:
        rc = eng_graph_rmat(gc->scale, gc->edge_factor, cfg->seed, &g);
        if (!rc) {
            /* structure only: random features and labels (a scale test, not a learnable task) */
            g->f = gc->features;
            g->classes = gc->classes;
            g->feat = prof_malloc((size_t)g->n * g->f * sizeof(float));
            g->label = prof_malloc((size_t)g->n * sizeof(int32_t));
            if (!g->feat || !g->label) rc = eng_fail(ENG_ENOMEM, "graph: out of memory for R-MAT features");
            eng_rng r;
            eng_rng_seed(&r, cfg->seed, 0x524d4154ull);
            for (size_t i = 0; !rc && i < (size_t)g->n * g->f; i++) g->feat[i] = (float)eng_rng_normal(&r);
            for (int32_t v = 0; !rc && v < g->n; v++) g->label[v] = (int32_t)eng_rng_below(&r, (uint64_t)g->classes);
        }
        snprintf(name, cap, "rmat(scale=%d, ef=%d)", gc->scale, gc->edge_factor);
        break;
    default: {
        /* The features file fixes the node count (one row per node): the edge list's ids
         * are checked against it before anything is sized by them. */
        int32_t n = 0;
        rc = eng_graph_count_rows(gc->node_features, &n);
        if (!rc && n < 1) rc = eng_fail(ENG_EFORMAT, "%s: no feature rows (one row per node)", gc->node_features);
        if (!rc) rc = eng_graph_load_edges(gc->edges, gc->undirected, n, &g);
        if (!rc) rc = eng_graph_load_features(g, gc->node_features);
        if (!rc) rc = eng_graph_load_labels(g, gc->labels);
        if (!rc && gc->train_mask[0]) rc = eng_graph_load_mask(g, gc->train_mask, ENG_SPLIT_TRAIN);
        if (!rc && gc->val_mask[0]) rc = eng_graph_load_mask(g, gc->val_mask, ENG_SPLIT_VAL);
        if (!rc && gc->test_mask[0]) rc = eng_graph_load_mask(g, gc->test_mask, ENG_SPLIT_TEST);
        if (!rc) rc = eng_gnn_check_memory(cfg, g->n, g->m, 0, g->f, g->classes, 0);
        snprintf(name, cap, "%s", eng_data_basename(gc->edges));
        break;
    }
    }
    if (!rc && !g->split) rc = eng_graph_random_split(g, gc->train_fraction, gc->val_fraction, cfg->seed);
    if (rc) { eng_graph_free(g); return rc; }
    *out = g;
    return ENG_OK;
}

static float *falloc(size_t n, int *bad)
{
    float *p = prof_calloc(n ? n : 1, sizeof(float));
    *bad |= !p;
    return p;
}

/* Wires layer l's nodes to block b (rows = its destinations) and to its input. */
static void wire(eng_gnn *m, int l, const eng_block *b, const float *x)
{
    sage_layer *y = &m->lay[l];
    y->nodes[0].blk = b;
    if (l == 0) y->nodes[0].x = x;
}

static void forward_layers(eng_gnn *m, eng_block *const *bl, const float *x0)
{
    for (int l = 0; l < m->L; l++) {
        wire(m, l, bl[l], x0);
        for (int i = 0; i < m->lay[l].n_nodes; i++) eng_node_run(m->prof, &m->lay[l].nodes[i], ENG_FWD, bl[l]->n_dst);
    }
}

static void backward_layers(eng_gnn *m, eng_block *const *bl)
{
    for (int l = m->L - 1; l >= 0; l--)
        for (int i = m->lay[l].n_nodes - 1; i >= 0; i--) eng_node_run(m->prof, &m->lay[l].nodes[i], ENG_BWD, bl[l]->n_dst);
}

/* Loss over rows `ids` of the last layer's output (or all its rows, in order, when ids is
 * NULL); the rows are gathered into m->sel. Returns the mean loss; *correct counted. */
static double loss_on(eng_gnn *m, const int32_t *ids, int n, int *correct)
{
    sage_layer *last = &m->lay[m->L - 1];
    size_t C = (size_t)last->out;
    for (int i = 0; i < n; i++) {
        int32_t v = ids ? ids[i] : i;
        memcpy(m->sel + (size_t)i * C, last->A + (size_t)v * C, C * sizeof(float));
    }
    m->loss.x = m->sel;
    eng_node_run(m->prof, &m->loss, ENG_FWD, n);
    *correct = m->loss.correct;
    return m->loss.loss;
}

static void loss_backward(eng_gnn *m, const int32_t *ids, int n, int rows_out)
{
    sage_layer *last = &m->lay[m->L - 1];
    size_t C = (size_t)last->out;
    eng_node_run(m->prof, &m->loss, ENG_BWD, n);
    if (ids) memset(last->dA, 0, (size_t)rows_out * C * sizeof(float));
    for (int i = 0; i < n; i++) {
        int32_t v = ids ? ids[i] : i;
        memcpy(last->dA + (size_t)v * C, m->dsel + (size_t)i * C, C * sizeof(float));
    }
}

int eng_gnn_create(const eng_config *cfg, prof_t *prof, eng_gnn **out)
{
    *out = NULL;
    eng_gnn *m = prof_calloc(1, sizeof *m);
    if (!m) return eng_fail(ENG_ENOMEM, "graph run: out of memory");
    m->cfg = cfg;
    m->prof = prof;
    for (int i = 0; i < N_PHASES; i++) m->ph[i] = -1;
    m->sc_gather = -1;
    int rc = load_graph(cfg, &m->g, m->name, sizeof m->name);
    if (rc) { eng_gnn_free(m); return rc; }
    eng_graph *g = m->g;
    const eng_model_config *mc = &cfg->model;
    if (mc->loss != ENG_LOSS_SOFTMAX_XENT) { eng_gnn_free(m); return eng_fail(ENG_EINVAL, "%s: graph runs classify nodes: use model.loss = softmax_xent", cfg->path); }
    if (mc->n_layers > ENG_GRAPH_MAX_LAYERS) { eng_gnn_free(m); return eng_fail(ENG_EINVAL, "%s: at most %d sage layers", cfg->path, ENG_GRAPH_MAX_LAYERS); }
    if (mc->layers[mc->n_layers - 1].units != g->classes) {
        rc = eng_fail(ENG_EINVAL, "%s: the last sage layer gives %d outputs but the graph has %d classes; end the layers with sage:%d",
                      cfg->path, mc->layers[mc->n_layers - 1].units, g->classes, g->classes);
        eng_gnn_free(m); /* frees g: the message is made first */
        return rc;
    }
    /* splits */
    for (int s = 1; s < 4; s++) {
        m->ids[s] = prof_malloc((size_t)g->n * sizeof(int32_t));
        if (!m->ids[s]) { eng_gnn_free(m); return eng_fail(ENG_ENOMEM, "graph run: out of memory"); }
    }
    for (int32_t v = 0; v < g->n; v++)
        if (g->split[v]) m->ids[g->split[v]][m->n_ids[g->split[v]]++] = v;
    if (m->n_ids[ENG_SPLIT_TRAIN] < 1) { eng_gnn_free(m); return eng_fail(ENG_EINVAL, "%s: no training nodes", cfg->path); }

    /* layers, parameters, buffers: every block has at most n rows */
    size_t R = (size_t)g->n, off = 0;
    int in = g->f, bad = 0;
    m->L = mc->n_layers;
    size_t w = 0;
    for (int l = 0; l < m->L; l++) {
        const eng_layer_spec *sp = &mc->layers[l];
        sage_layer *y = &m->lay[l];
        y->in = in;
        y->out = sp->units;
        y->act = sp->act;
        y->k = sp->act == ENG_ACT_MAXK ? sp->k : 0;
        snprintf(y->name, sizeof y->name, "sage%d", l + 1);
        if (sp->act == ENG_ACT_MAXK && (l == m->L - 1 || sp->k < 1 || sp->k > sp->units)) {
            eng_gnn_free(m);
            return eng_fail(ENG_EINVAL, "%s: layer %d: maxk%d needs 1 <= k <= %d and a sage layer after it", cfg->path, l + 1, sp->k, sp->units);
        }
        if (sp->act != ENG_ACT_NONE && sp->act != ENG_ACT_RELU && sp->act != ENG_ACT_MAXK && sp->act != ENG_ACT_TANH) {
            eng_gnn_free(m);
            return eng_fail(ENG_EINVAL, "%s: layer %d: sage layers take relu, tanh, maxkK or no activation", cfg->path, l + 1);
        }
        y->n_w = (size_t)2 * in * y->out;
        y->w_off = off;
        y->b_off = off + y->n_w;
        off += y->n_w + (size_t)y->out;
        if (y->n_w > w) w = y->n_w;
        in = y->out;
    }
    m->n_params = off;
    m->params = falloc(off, &bad);
    m->grads = falloc(off, &bad);
    size_t C = (size_t)m->lay[m->L - 1].out;
    m->x0 = falloc(R * (size_t)g->f, &bad);
    m->sel = falloc(R * C, &bad);
    m->dsel = falloc(R * C, &bad);
    m->probs = falloc(R * C, &bad);
    m->lab = prof_malloc(R * sizeof(int32_t));
    m->perm = prof_malloc(R * sizeof(int32_t));
    bad |= !m->lab || !m->perm;
    for (int l = 0; l < m->L && !bad; l++) {
        sage_layer *y = &m->lay[l];
        y->C = falloc(R * 2 * (size_t)y->in, &bad);
        y->dC = falloc(R * 2 * (size_t)y->in, &bad);
        y->Z = falloc(R * (size_t)y->out, &bad);
        y->dZ = falloc(R * (size_t)y->out, &bad);
        if (y->act == ENG_ACT_NONE) { y->A = y->Z; y->dA = y->dZ; }
        else {
            size_t wa = y->k ? (size_t)y->k : (size_t)y->out;
            y->A = falloc(R * wa, &bad);
            y->dA = falloc(R * wa, &bad);
            if (y->k) { y->idx = prof_malloc(R * (size_t)y->k * sizeof(int32_t)); bad |= !y->idx; }
        }
    }
    if (bad) {
        rc = eng_fail(ENG_ENOMEM, "graph run: out of memory for %d nodes", g->n);
        eng_gnn_free(m);
        return rc;
    }

    /* nodes */
    for (int l = 0; l < m->L; l++) {
        sage_layer *y = &m->lay[l], *p = l ? &m->lay[l - 1] : NULL;
        eng_node *n = y->nodes;
        memset(n, 0, sizeof y->nodes);
        for (int i = 0; i < 4; i++) { n[i].prof_fwd = n[i].prof_bwd = -1; n[i].layer = l; }
        n[0].op = ENG_OP_AGGREGATE;
        n[0].in_size = (size_t)y->in;
        n[0].out_size = 2 * (size_t)y->in;
        n[0].x = p ? p->A : NULL;
        n[0].k = p ? p->k : 0;
        n[0].idx = p ? p->idx : NULL;
        n[0].y = y->C; n[0].dy = y->dC;
        n[0].dx = p ? p->dA : NULL;
        n[1].op = ENG_OP_DENSE;
        n[1].in_size = 2 * (size_t)y->in; n[1].out_size = (size_t)y->out;
        n[1].x = y->C; n[1].y = y->Z; n[1].dy = y->dZ; n[1].dx = y->dC;
        n[1].w = m->params + y->w_off; n[1].dw = m->grads + y->w_off; n[1].n_w = y->n_w;
        n[2].op = ENG_OP_BIAS;
        n[2].in_size = n[2].out_size = (size_t)y->out;
        n[2].x = n[2].y = y->Z; n[2].dx = n[2].dy = y->dZ;
        n[2].b = m->params + y->b_off; n[2].db = m->grads + y->b_off; n[2].n_b = (size_t)y->out;
        y->n_nodes = 3;
        if (y->act != ENG_ACT_NONE) {
            n[3].op = (eng_op_id)eng_act_op(y->act);
            n[3].in_size = n[3].out_size = (size_t)y->out;
            n[3].x = y->Z; n[3].y = y->A; n[3].dy = y->dA; n[3].dx = y->dZ;
            n[3].k = y->k; n[3].idx = y->idx;
            y->n_nodes = 4;
        }
    }
    m->loss.op = ENG_OP_SOFTMAX_XENT;
    m->loss.in_size = m->loss.out_size = C;
    m->loss.y = m->probs;
    m->loss.dx = m->dsel;
    m->loss.labels = m->lab;
    m->loss.layer = -1;
    m->loss.prof_fwd = m->loss.prof_bwd = -1;

    /* init: He before relu/maxk, Xavier otherwise, on fan_in = 2·in; one stream per layer */
    for (int l = 0; l < m->L; l++) {
        sage_layer *y = &m->lay[l];
        eng_rng r;
        eng_rng_seed(&r, cfg->seed, ENG_STREAM_INIT + (uint64_t)l);
        float *W = m->params + y->w_off;
        double fin = 2.0 * y->in, fout = y->out;
        if (y->act == ENG_ACT_RELU || y->act == ENG_ACT_MAXK)
            for (size_t i = 0; i < y->n_w; i++) W[i] = (float)(sqrt(2.0 / fin) * eng_rng_normal(&r));
        else
            for (size_t i = 0; i < y->n_w; i++) W[i] = (float)(sqrt(6.0 / (fin + fout)) * (2.0 * eng_rng_uniform(&r) - 1.0));
    }

    m->full = (eng_block){ .n_dst = g->n, .n_src = g->n, .n_edges = g->m, .indptr = g->rowptr, .indices = g->col };
    const eng_train_config *tc = &cfg->train;
    int ntr = m->n_ids[ENG_SPLIT_TRAIN];
    if (cfg->graph.mode == ENG_GRAPH_FULL) {
        m->batch = ntr;
        m->bpe = 1;
    } else {
        m->batch = tc->batch <= 0 || tc->batch > ntr ? ntr : tc->batch;
        m->bpe = (ntr + m->batch - 1) / m->batch;
        int fan[ENG_GRAPH_MAX_LAYERS];
        int nf = eng_graph_parse_fanouts(cfg->graph.fanouts, fan, ENG_GRAPH_MAX_LAYERS);
        rc = eng_sampler_create(g, (eng_sampler_kind)cfg->graph.sampler, fan, nf, m->batch, prof, &m->sampler);
        if (rc) { eng_gnn_free(m); return rc; }
    }
    m->total_steps = tc->max_steps > 0 ? tc->max_steps : (long)tc->epochs * m->bpe;
    rc = eng_optim_create(tc, m->n_params, &m->opt);
    if (!rc && cfg->graph.partition != ENG_PART_NONE) {
        m->part_of = prof_malloc((size_t)g->n * sizeof(int32_t));
        rc = m->part_of ? eng_graph_partition(g, cfg->graph.partition, cfg->graph.parts, cfg->seed, m->part_of)
                        : eng_fail(ENG_ENOMEM, "graph run: out of memory");
        if (!rc) eng_part_edge_cut(g, m->part_of, cfg->graph.parts, &m->part);
        if (!rc && m->sampler) {
            int fan[ENG_GRAPH_MAX_LAYERS];
            int nf = eng_graph_parse_fanouts(cfg->graph.fanouts, fan, ENG_GRAPH_MAX_LAYERS);
            int pb = m->batch < g->n / cfg->graph.parts / 2 ? m->batch : g->n / cfg->graph.parts / 2;
            rc = eng_part_traffic(g, m->part_of, fan, nf, pb > 0 ? pb : 1, 4, cfg->seed, &m->part);
        }
    }
    if (rc) { eng_gnn_free(m); return rc; }

    if (prof) {
        for (int l = 0; l < m->L && !rc; l++)
            for (int i = 0; i < m->lay[l].n_nodes; i++) {
                eng_node *n = &m->lay[l].nodes[i];
                char nm[48];
                snprintf(nm, sizeof nm, "%s.fwd", eng_ops[n->op].name);
                n->prof_fwd = prof_register(prof, nm, m->lay[l].name, PROF_OP);
                snprintf(nm, sizeof nm, "%s.bwd", eng_ops[n->op].name);
                n->prof_bwd = prof_register(prof, nm, m->lay[l].name, PROF_OP);
                if (n->prof_fwd < 0 || n->prof_bwd < 0) rc = ENG_EINVAL;
            }
        m->loss.prof_fwd = prof_register(prof, "softmax_xent.fwd", "loss", PROF_OP);
        m->loss.prof_bwd = prof_register(prof, "softmax_xent.bwd", "loss", PROF_OP);
        m->sc_gather = prof_register(prof, "gather", "graph", PROF_OP);
        for (int i = 0; i < N_PHASES; i++)
            m->ph[i] = prof_register(prof, phase_names[i], NULL, i == PH_STEP ? PROF_STEP : PROF_PHASE);
        for (int i = 0; i < N_PHASES; i++) rc |= m->ph[i] < 0;
        if (rc || m->sc_gather < 0 || m->loss.prof_fwd < 0 || m->loss.prof_bwd < 0) {
            eng_gnn_free(m);
            return eng_fail(ENG_EINVAL, "graph run: the profiler's scope table is full (%s)", prof_error());
        }
    }
    /* summary */
    size_t len = 0;
    for (int l = 0; l < m->L && len < sizeof m->summary; l++) {
        const sage_layer *y = &m->lay[l];
        int wr = snprintf(m->summary + len, sizeof m->summary - len, "%ssage(%d->%d)", l ? ", " : "", y->in, y->out);
        if (wr > 0) len += (size_t)wr;
        if (y->k && len < sizeof m->summary) wr = snprintf(m->summary + len, sizeof m->summary - len, " maxk%d", y->k);
        else if (y->act != ENG_ACT_NONE && len < sizeof m->summary)
            wr = snprintf(m->summary + len, sizeof m->summary - len, " %s", eng_act_name(y->act));
        else wr = 0;
        if (wr > 0) len += (size_t)wr;
    }
    if (len < sizeof m->summary)
        snprintf(m->summary + len, sizeof m->summary - len, "  [%zu params; %s, %s]", m->n_params,
                 cfg->graph.mode == ENG_GRAPH_FULL ? "full graph" : "sampled",
                 cfg->graph.mode == ENG_GRAPH_FULL ? "no sampler" : eng_sampler_name((eng_sampler_kind)cfg->graph.sampler));
    *out = m;
    return ENG_OK;
}

const char *eng_gnn_summary(const eng_gnn *m) { return m->summary; }
size_t eng_gnn_n_params(const eng_gnn *m) { return m->n_params; }
int eng_gnn_split_size(const eng_gnn *m, int which) { return m->n_ids[which]; }
const eng_graph *eng_gnn_graph(const eng_gnn *m) { return m->g; }

/* Full-graph inference: loss and accuracy over the nodes of one split. */
static void evaluate(eng_gnn *m, int which, double *loss, double *acc)
{
    eng_block *bl[ENG_GRAPH_MAX_LAYERS];
    for (int l = 0; l < m->L; l++) bl[l] = &m->full;
    forward_layers(m, bl, m->g->feat);
    int n = m->n_ids[which], correct = 0;
    for (int i = 0; i < n; i++) m->lab[i] = m->g->label[m->ids[which][i]];
    *loss = n ? loss_on(m, m->ids[which], n, &correct) : NAN;
    *acc = n ? (double)correct / n : NAN;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One training step on the seeds (sampled) or the whole graph (seeds == NULL). */
static int gnn_step(eng_gnn *m, const int32_t *seeds, int n_seeds, uint64_t seed, double lr, double *loss,
                    int *correct, eng_gnn_step_stats *st)
{
    eng_block *bl[ENG_GRAPH_MAX_LAYERS];
    const float *x0 = m->g->feat;
    const eng_graph *g = m->g;
    prof_t *p = m->prof;
    memset(st, 0, sizeof *st);
    PROF_BEGIN(p, m->ph[PH_DATA]);
    if (seeds) {
        eng_block *blocks;
        double t0 = now_s();
        int rc = eng_sampler_sample(m->sampler, seeds, n_seeds, seed, &blocks);
        st->sample_s = now_s() - t0;
        if (rc) { PROF_END(p, m->ph[PH_DATA], 0, 0); return rc; }
        for (int l = 0; l < m->L; l++) { bl[l] = &blocks[l]; st->edges += blocks[l].n_edges; }
        /* gather: the input layer's source features, contiguous */
        const eng_block *b0 = bl[0];
        PROF_BEGIN(p, m->sc_gather);
        for (int32_t i = 0; i < b0->n_src; i++)
            memcpy(m->x0 + (size_t)i * g->f, g->feat + (size_t)b0->src_ids[i] * g->f, (size_t)g->f * sizeof(float));
        for (int i = 0; i < n_seeds; i++) m->lab[i] = g->label[seeds[i]];
        PROF_END(p, m->sc_gather, 0, (uint64_t)b0->n_src * g->f * 4 + (uint64_t)n_seeds * 4);
        x0 = m->x0;
        st->input_nodes = b0->n_src;
    } else {
        for (int l = 0; l < m->L; l++) bl[l] = &m->full;
        for (int i = 0; i < m->n_ids[ENG_SPLIT_TRAIN]; i++) m->lab[i] = g->label[m->ids[ENG_SPLIT_TRAIN][i]];
        n_seeds = m->n_ids[ENG_SPLIT_TRAIN];
        st->edges = (int64_t)m->L * g->m;
        st->input_nodes = g->n;
    }
    PROF_END(p, m->ph[PH_DATA], 0, 0);
    PROF_BEGIN(p, m->ph[PH_FORWARD]);
    forward_layers(m, bl, x0);
    *loss = loss_on(m, seeds ? NULL : m->ids[ENG_SPLIT_TRAIN], n_seeds, correct);
    PROF_END(p, m->ph[PH_FORWARD], 0, 0);
    if (!isfinite(*loss)) return ENG_EDIVERGED;
    PROF_BEGIN(p, m->ph[PH_BACKWARD]);
    loss_backward(m, seeds ? NULL : m->ids[ENG_SPLIT_TRAIN], n_seeds, bl[m->L - 1]->n_dst);
    backward_layers(m, bl);
    PROF_END(p, m->ph[PH_BACKWARD], 0, 0);
    PROF_BEGIN(p, m->ph[PH_OPTIMIZER]);
    eng_optim_step(m->opt, m->params, m->grads, lr);
    PROF_END(p, m->ph[PH_OPTIMIZER], 0, 0);
    return ENG_OK;
}

float *eng_gnn_params(eng_gnn *m) { return m->params; }
float *eng_gnn_grads(eng_gnn *m) { return m->grads; }

/* Forward + backward of the loss over the given seeds' blocks (or the full graph) without
 * an optimizer step: for gradient checks. Returns the loss. */
double eng_gnn_loss_grad(eng_gnn *m, const int32_t *seeds, int n_seeds, uint64_t seed, int backward)
{
    eng_block *bl[ENG_GRAPH_MAX_LAYERS];
    const float *x0 = m->g->feat;
    if (seeds) {
        eng_block *blocks;
        if (eng_sampler_sample(m->sampler, seeds, n_seeds, seed, &blocks)) return NAN;
        for (int l = 0; l < m->L; l++) bl[l] = &blocks[l];
        for (int32_t i = 0; i < bl[0]->n_src; i++)
            memcpy(m->x0 + (size_t)i * m->g->f, m->g->feat + (size_t)bl[0]->src_ids[i] * m->g->f, (size_t)m->g->f * sizeof(float));
        for (int i = 0; i < n_seeds; i++) m->lab[i] = m->g->label[seeds[i]];
        x0 = m->x0;
    } else {
        for (int l = 0; l < m->L; l++) bl[l] = &m->full;
        n_seeds = m->n_ids[ENG_SPLIT_TRAIN];
        for (int i = 0; i < n_seeds; i++) m->lab[i] = m->g->label[m->ids[ENG_SPLIT_TRAIN][i]];
    }
    int correct;
    forward_layers(m, bl, x0);
    double loss = loss_on(m, seeds ? NULL : m->ids[ENG_SPLIT_TRAIN], n_seeds, &correct);
    if (backward) {
        loss_backward(m, seeds ? NULL : m->ids[ENG_SPLIT_TRAIN], n_seeds, bl[m->L - 1]->n_dst);
        backward_layers(m, bl);
    }
    return loss;
}

void eng_gnn_evaluate(eng_gnn *m, int which, double *loss, double *acc) { evaluate(m, which, loss, acc); }

/* The seeds of step s (0-based) of the epoch's permutation; returns how many. */
static int gnn_batch(eng_gnn *m, long s, const int32_t **seeds, int *last_in_epoch, int *epoch)
{
    int ntr = m->n_ids[ENG_SPLIT_TRAIN];
    int b = (int)(s % m->bpe);
    *epoch = (int)(s / m->bpe);
    if (b == 0) {
        memcpy(m->perm, m->ids[ENG_SPLIT_TRAIN], (size_t)ntr * sizeof(int32_t));
        eng_rng r;
        eng_rng_seed(&r, m->cfg->seed, 0x47534831ull + (uint64_t)*epoch);
        for (int i = ntr - 1; i > 0; i--) {
            int j = (int)eng_rng_below(&r, (uint64_t)i + 1);
            int32_t t = m->perm[i]; m->perm[i] = m->perm[j]; m->perm[j] = t;
        }
    }
    *last_in_epoch = b == m->bpe - 1;
    int start = b * m->batch, n = ntr - start < m->batch ? ntr - start : m->batch;
    *seeds = m->perm + start;
    return n;
}

/* ---- the training loop (the protocol of train.c's eng_run_train) ---------------------- */

typedef struct {
    const eng_sink *sink;
    long step;
    int epoch;
    double t0;
} gctx;

static int emit(gctx *c, const char *key, double value)
{
    if (!c->sink || !c->sink->metric) return 0;
    double wall = now_s() - c->t0;
    eng_metric mt = { .step = c->step, .epoch = c->epoch, .wall_s = wall, .hybrid_s = wall, .key = key, .value = value };
    return c->sink->metric(c->sink->ud, &mt) ? ENG_ESINK : 0;
}

int eng_gnn_train(eng_gnn *m, const char *experiment_text, int threads, const eng_sink *sink,
                  atomic_int *stop, eng_run_result *res, char *err, size_t errcap)
{
    const eng_config *cfg = m->cfg;
    const eng_train_config *tc = &cfg->train;
    prof_t *p = m->prof;
    *res = (eng_run_result){ .status = ENG_RUN_RUNNING, .final_train_loss = NAN, .best_train_loss = NAN,
                             .final_test_loss = NAN, .final_test_acc = NAN, .best_test_acc = NAN,
                             .steps_to_target = -1, .wall_to_target = NAN, .hybrid_to_target = NAN,
                             .kappa_first = NAN, .kappa_last = NAN };
    eng_run_info info = { .cfg = cfg, .experiment_text = experiment_text, .dataset = m->name,
                          .model_summary = m->summary, .n_params = m->n_params, .threads = threads,
                          .total_steps = m->total_steps, .n_train = m->n_ids[ENG_SPLIT_TRAIN],
                          .n_test = m->n_ids[ENG_SPLIT_TEST] };
    gctx c = { .sink = sink };
    int rc = ENG_OK;
    if (sink && sink->run_begin && sink->run_begin(sink->ud, &info)) {
        snprintf(err, errcap, "%s", eng_error());
        res->status = ENG_RUN_FAILED;
        res->error = err;
        if (sink->run_end) sink->run_end(sink->ud, res);
        return ENG_ESINK;
    }
    /* data-parallel (each rank trains the whole graph): the ranks agree on the config and
     * hear each other's set-up errors before the first step, as eng_run_train's do */
    if (eng_dist_world() > 1 && (rc = eng_dist_agree(cfg, NULL))) {
        res->status = ENG_RUN_FAILED;
        snprintf(err, errcap, "before the first step: %s", eng_error());
    }
    c.t0 = now_s();
    /* the graph's and the partition's figures, once, at step 0 */
    const eng_part_stats *ps = m->part_of ? &m->part : NULL;
    if (!rc) rc = emit(&c, "graph_nodes", m->g->n);
    if (!rc) rc = emit(&c, "graph_edges", (double)m->g->m / 2);
    if (!rc && ps) rc = emit(&c, "partition_edge_cut", ps->cut_fraction);
    if (!rc && ps && m->sampler) rc = emit(&c, "partition_cross_nodes_per_batch", ps->batch_cross_nodes);
    if (!rc && ps && m->sampler) rc = emit(&c, "partition_cross_bytes_per_batch_modelled", ps->batch_cross_bytes);
    double train_time = 0, sample_time = 0, ep_time = 0;
    long rows_total = 0, ep_rows = 0, batches = 0;
    double il = 0, ir = 0, ic = 0, ie = 0, lr = tc->lr;
    for (long s = 0; s < m->total_steps && !rc; s++) {
        if (atomic_load(stop)) {
            res->status = ENG_RUN_INTERRUPTED;
            snprintf(err, errcap, "interrupted at step %ld of %ld (stop requested)", s, m->total_steps);
            rc = ENG_ESTOPPED;
            break;
        }
        double ts = now_s();
        if (p) prof_step(p, s + 1);
        PROF_BEGIN(p, m->ph[PH_STEP]);
        const int32_t *seeds = NULL;
        int last = 1, n = m->n_ids[ENG_SPLIT_TRAIN];
        c.epoch = (int)s;
        if (m->sampler) n = gnn_batch(m, s, &seeds, &last, &c.epoch);
        lr = eng_lr_at(tc, s, m->total_steps);
        double loss = NAN;
        int correct = 0;
        eng_gnn_step_stats st;
        rc = gnn_step(m, seeds, n, cfg->seed * 1000003u + (uint64_t)s, lr, &loss, &correct, &st);
        PROF_END(p, m->ph[PH_STEP], 0, 0);
        double dt = now_s() - ts;
        if (rc == ENG_EDIVERGED) {
            res->status = ENG_RUN_DIVERGED;
            snprintf(err, errcap, "diverged at step %ld: loss is %s", s + 1, isnan(loss) ? "nan" : "inf");
            break;
        }
        if (rc) { res->status = ENG_RUN_FAILED; snprintf(err, errcap, "step %ld: %s", s + 1, eng_error()); break; }
        c.step = s + 1;
        res->steps = c.step;
        res->epochs = c.epoch + (last ? 1 : 0);
        train_time += dt; ep_time += dt; sample_time += st.sample_s;
        rows_total += n; ep_rows += n; batches++;
        il += loss * n; ir += n; ic += correct; ie += (double)st.edges;
        int fin = c.step == m->total_steps;
        if (c.step % tc->log_every == 0 || fin) {
            double l = il / ir;
            if ((rc = emit(&c, "train_loss", l)) || (rc = emit(&c, "train_acc", ic / ir)) || (rc = emit(&c, "lr", lr))) break;
            res->final_train_loss = l;
            if (!(l >= res->best_train_loss)) res->best_train_loss = l;
            if (cfg->target_loss > 0 && res->steps_to_target < 0 && l <= cfg->target_loss) {
                res->steps_to_target = c.step;
                res->wall_to_target = res->hybrid_to_target = now_s() - c.t0;
            }
            il = ir = ic = 0;
        }
        if ((tc->eval_every > 0 && c.step % tc->eval_every == 0) || (tc->eval_every == 0 && last) || fin) {
            double tl, ta, vl, va;
            PROF_BEGIN(p, m->ph[PH_EVAL]);
            evaluate(m, ENG_SPLIT_VAL, &vl, &va);
            evaluate(m, ENG_SPLIT_TEST, &tl, &ta);
            PROF_END(p, m->ph[PH_EVAL], 0, 0);
            if (m->n_ids[ENG_SPLIT_VAL] && (rc = emit(&c, "val_acc", va))) break;
            if (m->n_ids[ENG_SPLIT_TEST] && ((rc = emit(&c, "test_loss", tl)) || (rc = emit(&c, "test_acc", ta)))) break;
            res->final_test_loss = tl;
            res->final_test_acc = ta;
            if (!(ta <= res->best_test_acc)) res->best_test_acc = ta;
        }
        if (last) {
            if (ep_time > 0 && (rc = emit(&c, "samples_per_s", ep_rows / ep_time))) break;
            if (m->sampler && sample_time > 0 && ((rc = emit(&c, "sampler_batches_per_s", batches / sample_time)) ||
                                                  (rc = emit(&c, "sampled_edges_per_batch", ie / batches))))
                break;
            ep_rows = 0; ep_time = 0; ie = 0; batches = 0; sample_time = 0;
        }
        if (sink && sink->progress)
            sink->progress(sink->ud, c.step, m->total_steps, c.epoch, loss, train_time > 0 ? rows_total / train_time : 0);
    }
    double wall = now_s() - c.t0;
    if (rc == ENG_ESINK || (rc && res->status == ENG_RUN_RUNNING)) {
        res->status = ENG_RUN_FAILED;
        snprintf(err, errcap, "%s", eng_error());
    }
    if (res->status == ENG_RUN_RUNNING) res->status = ENG_RUN_FINISHED;
    res->wall_s = res->hybrid_s = wall;
    res->samples_per_s = train_time > 0 ? rows_total / train_time : 0;
    res->peak_bytes = prof_mem_peak();
    res->peak_rss = prof_peak_rss();
    res->error = res->status == ENG_RUN_FINISHED ? NULL : err;
    if (rc != ENG_ESINK && eng_sink_op_stats(p, sink) && rc == ENG_OK) {
        rc = ENG_ESINK;
        res->status = ENG_RUN_FAILED;
        snprintf(err, errcap, "%s", eng_error());
        res->error = err;
    }
    if (sink && sink->run_end) sink->run_end(sink->ud, res);
    if (rc == ENG_OK) return ENG_OK;
    eng_fail(rc, "%s", err);
    return rc;
}
