/* gnn.c — GraphSAGE node classification: sage layers built from op-table nodes (the
 * aggregate op is in aggregate.c)
 *     sage:H:relu   ->  [aggregate] [dense 2·in -> H] [bias] [relu]
 *     sage:H:maxk32 ->  [aggregate] [dense] [bias] [maxk]   (the next aggregate reads CBSR)
 * (W = [W_self; W_neigh] stacked, so z = h_self W_self + mean(h_neigh) W_neigh + b is one
 * multiply of the concatenation), and the training loop of a graph run: full-graph steps
 * or minibatches of seed nodes over sampled blocks (engine/graph/sample.c), evaluation on the
 * full graph, the usual metrics plus the sampler's and the partition's figures.
 */
#include "graph.h"
#include "../internal.h"
#include "../data/data_internal.h"
#include "../rng.h"
#include "../loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>


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
    int rows;                     /* rows (block destinations) of the last forward */
} sage_layer;

struct eng_gnn {
    const eng_config *cfg;
    eng_graph *g;
    char name[160];
    int L;
    sage_layer lay[ENG_GRAPH_MAX_LAYERS];
    eng_node loss;
    float *params, *grads;
    size_t n_params;
    eng_sampler *sampler;
    eng_block full;               /* the whole graph as one block (indptr/indices = CSR) */
    float *x0;                    /* gathered input features [n x f] */
    float *sel, *dsel, *probs;    /* logits of selected rows, their gradient, softmax [n x C] */
    int32_t *lab;                 /* labels of the selected rows */
    int32_t *ids[4];              /* node ids of each split (ENG_SPLIT_*) */
    int n_ids[4];
    int32_t *perm;
    int perm_epoch;               /* the epoch perm orders (-1: none yet) */
    eng_part_stats part;          /* partition figures (when graph.partition != none) */
    int32_t *part_of;
    int batch, bpe;
    long total_steps;
    prof_t *prof;
    int sc_gather;
    char summary[512];
    /* the step's batch (the task, loop.h) */
    eng_block *bl[ENG_GRAPH_MAX_LAYERS];
    const int32_t *seeds;         /* NULL: the whole graph's training nodes */
    const float *x0_cur;
    /* sampler figures since the last epoch end */
    double sample_time, edges;
    long batches;
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
        m->lay[l].rows = bl[l]->n_dst;
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

/* ---- eng_gnn_create, stage by stage -------------------------------------------------------- */

/* The model fits graph runs: softmax over the graph's classes, at most the layers a block
 * chain has. */
static int check_model(const eng_config *cfg, const eng_graph *g)
{
    const eng_model_config *mc = &cfg->model;
    if (mc->loss != ENG_LOSS_SOFTMAX_XENT)
        return eng_fail(ENG_EINVAL, "%s: graph runs classify nodes: use model.loss = softmax_xent", cfg->path);
    if (mc->n_layers > ENG_GRAPH_MAX_LAYERS)
        return eng_fail(ENG_EINVAL, "%s: at most %d sage layers", cfg->path, ENG_GRAPH_MAX_LAYERS);
    if (mc->layers[mc->n_layers - 1].units != g->classes)
        return eng_fail(ENG_EINVAL, "%s: the last sage layer gives %d outputs but the graph has %d classes; end the layers "
                        "with sage:%d", cfg->path, mc->layers[mc->n_layers - 1].units, g->classes, g->classes);
    return ENG_OK;
}

/* The node ids of each split (ENG_SPLIT_*). */
static int make_splits(eng_gnn *m)
{
    const eng_graph *g = m->g;
    for (int s = 1; s < 4; s++)
        if (!(m->ids[s] = prof_malloc((size_t)g->n * sizeof(int32_t))))
            return eng_fail(ENG_ENOMEM, "graph run: out of memory");
    for (int32_t v = 0; v < g->n; v++)
        if (g->split[v]) m->ids[g->split[v]][m->n_ids[g->split[v]]++] = v;
    if (m->n_ids[ENG_SPLIT_TRAIN] < 1) return eng_fail(ENG_EINVAL, "%s: no training nodes", m->cfg->path);
    return ENG_OK;
}

/* Each layer's widths, activation and place in the parameter buffer. */
static int plan_layers(eng_gnn *m)
{
    const eng_config *cfg = m->cfg;
    const eng_model_config *mc = &cfg->model;
    size_t off = 0;
    int in = m->g->f;
    m->L = mc->n_layers;
    for (int l = 0; l < m->L; l++) {
        const eng_layer_spec *sp = &mc->layers[l];
        sage_layer *y = &m->lay[l];
        y->in = in;
        y->out = sp->units;
        y->act = sp->act;
        y->k = sp->act == ENG_ACT_MAXK ? sp->k : 0;
        snprintf(y->name, sizeof y->name, "sage%d", l + 1);
        if (sp->act == ENG_ACT_MAXK && (l == m->L - 1 || sp->k < 1 || sp->k > sp->units))
            return eng_fail(ENG_EINVAL, "%s: layer %d: maxk%d needs 1 <= k <= %d and a sage layer after it", cfg->path,
                            l + 1, sp->k, sp->units);
        if (sp->act != ENG_ACT_NONE && sp->act != ENG_ACT_RELU && sp->act != ENG_ACT_MAXK && sp->act != ENG_ACT_TANH)
            return eng_fail(ENG_EINVAL, "%s: layer %d: sage layers take relu, tanh, maxkK or no activation", cfg->path, l + 1);
        y->n_w = (size_t)2 * in * y->out;
        y->w_off = off;
        y->b_off = off + y->n_w;
        off += y->n_w + (size_t)y->out;
        in = y->out;
    }
    m->n_params = off;
    return ENG_OK;
}

/* Parameters, gradients and every layer's activations: every block has at most n rows. */
static int alloc_buffers(eng_gnn *m)
{
    const eng_graph *g = m->g;
    size_t R = (size_t)g->n, C = (size_t)m->lay[m->L - 1].out;
    int bad = 0;
    m->params = falloc(m->n_params, &bad);
    m->grads = falloc(m->n_params, &bad);
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
        if (y->act == ENG_ACT_NONE) { y->A = y->Z; y->dA = y->dZ; continue; }
        size_t wa = y->k ? (size_t)y->k : (size_t)y->out;
        y->A = falloc(R * wa, &bad);
        y->dA = falloc(R * wa, &bad);
        if (y->k) { y->idx = prof_malloc(R * (size_t)y->k * sizeof(int32_t)); bad |= !y->idx; }
    }
    return bad ? eng_fail(ENG_ENOMEM, "graph run: out of memory for %d nodes", g->n) : ENG_OK;
}

/* Each layer's nodes (aggregate, dense, bias, activation) and the loss node, wired to the
 * buffers. */
static void wire_nodes(eng_gnn *m)
{
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
    m->loss.in_size = m->loss.out_size = (size_t)m->lay[m->L - 1].out;
    m->loss.y = m->probs;
    m->loss.dx = m->dsel;
    m->loss.labels = m->lab;
    m->loss.layer = -1;
    m->loss.prof_fwd = m->loss.prof_bwd = -1;
}

/* He before relu/maxk, Xavier otherwise, on fan_in = 2·in; one stream per layer. */
static void init_params(eng_gnn *m, uint64_t seed)
{
    for (int l = 0; l < m->L; l++) {
        sage_layer *y = &m->lay[l];
        eng_rng r;
        eng_rng_seed(&r, seed, ENG_STREAM_INIT + (uint64_t)l);
        float *W = m->params + y->w_off;
        double fin = 2.0 * y->in, fout = y->out;
        if (y->act == ENG_ACT_RELU || y->act == ENG_ACT_MAXK)
            for (size_t i = 0; i < y->n_w; i++) W[i] = (float)(sqrt(2.0 / fin) * eng_rng_normal(&r));
        else
            for (size_t i = 0; i < y->n_w; i++) W[i] = (float)(sqrt(6.0 / (fin + fout)) * (2.0 * eng_rng_uniform(&r) - 1.0));
    }
}

/* Seeds per step and steps: the whole graph each step (full), or minibatches of seeds
 * over sampled blocks. */
static int make_batches(eng_gnn *m)
{
    const eng_config *cfg = m->cfg;
    const eng_train_config *tc = &cfg->train;
    const eng_graph *g = m->g;
    m->full = (eng_block){ .n_dst = g->n, .n_src = g->n, .n_edges = g->m, .indptr = g->rowptr, .indices = g->col };
    int ntr = m->n_ids[ENG_SPLIT_TRAIN], rc = ENG_OK;
    if (cfg->graph.mode == ENG_GRAPH_FULL) {
        m->batch = ntr;
        m->bpe = 1;
    } else {
        m->batch = tc->batch <= 0 || tc->batch > ntr ? ntr : tc->batch;
        m->bpe = (ntr + m->batch - 1) / m->batch;
        int fan[ENG_GRAPH_MAX_LAYERS];
        int nf = eng_graph_parse_fanouts(cfg->graph.fanouts, fan, ENG_GRAPH_MAX_LAYERS);
        rc = eng_sampler_create(g, (eng_sampler_kind)cfg->graph.sampler, fan, nf, m->batch, m->prof, &m->sampler);
    }
    m->total_steps = tc->max_steps > 0 ? tc->max_steps : (long)tc->epochs * m->bpe;
    return rc;
}

/* graph.partition: the parts, their edge cut and (sampled) the traffic per batch. */
static int make_partition(eng_gnn *m)
{
    const eng_config *cfg = m->cfg;
    const eng_graph *g = m->g;
    if (cfg->graph.partition == ENG_PART_NONE) return ENG_OK;
    if (!(m->part_of = prof_malloc((size_t)g->n * sizeof(int32_t)))) return eng_fail(ENG_ENOMEM, "graph run: out of memory");
    int rc = eng_graph_partition(g, cfg->graph.partition, cfg->graph.parts, cfg->seed, m->part_of);
    if (rc) return rc;
    eng_part_edge_cut(g, m->part_of, cfg->graph.parts, &m->part);
    if (!m->sampler) return ENG_OK;
    int fan[ENG_GRAPH_MAX_LAYERS];
    int nf = eng_graph_parse_fanouts(cfg->graph.fanouts, fan, ENG_GRAPH_MAX_LAYERS);
    int pb = m->batch < g->n / cfg->graph.parts / 2 ? m->batch : g->n / cfg->graph.parts / 2;
    return eng_part_traffic(g, m->part_of, fan, nf, pb > 0 ? pb : 1, 4, cfg->seed, &m->part);
}

/* The profiler's op scopes of every node, the loss and the gather. */
static int register_scopes(eng_gnn *m)
{
    prof_t *prof = m->prof;
    int bad = 0;
    for (int l = 0; l < m->L; l++)
        for (int i = 0; i < m->lay[l].n_nodes; i++) {
            eng_node *n = &m->lay[l].nodes[i];
            char nm[48];
            snprintf(nm, sizeof nm, "%s.fwd", eng_ops[n->op].name);
            n->prof_fwd = prof_register(prof, nm, m->lay[l].name, PROF_OP);
            snprintf(nm, sizeof nm, "%s.bwd", eng_ops[n->op].name);
            n->prof_bwd = prof_register(prof, nm, m->lay[l].name, PROF_OP);
            bad |= n->prof_fwd < 0 || n->prof_bwd < 0;
        }
    m->loss.prof_fwd = prof_register(prof, "softmax_xent.fwd", "loss", PROF_OP);
    m->loss.prof_bwd = prof_register(prof, "softmax_xent.bwd", "loss", PROF_OP);
    m->sc_gather = prof_register(prof, "gather", "graph", PROF_OP);
    if (bad || m->sc_gather < 0 || m->loss.prof_fwd < 0 || m->loss.prof_bwd < 0)
        return eng_fail(ENG_EINVAL, "graph run: the profiler's scope table is full (%s)", prof_error());
    return ENG_OK;
}

/* "sage(16->64) relu, sage(64->4)  [N params; sampled, fused]" */
static void write_summary(eng_gnn *m)
{
    const eng_config *cfg = m->cfg;
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
}

int eng_gnn_create(const eng_config *cfg, prof_t *prof, eng_gnn **out)
{
    *out = NULL;
    eng_gnn *m = prof_calloc(1, sizeof *m);
    if (!m) return eng_fail(ENG_ENOMEM, "graph run: out of memory");
    m->cfg = cfg;
    m->prof = prof;
    m->sc_gather = -1;
    m->perm_epoch = -1;
    int rc = load_graph(cfg, &m->g, m->name, sizeof m->name);
    if (!rc) rc = check_model(cfg, m->g);
    if (!rc) rc = make_splits(m);
    if (!rc) rc = plan_layers(m);
    if (!rc) rc = alloc_buffers(m);
    if (!rc) {
        wire_nodes(m);
        init_params(m, cfg->seed);
        rc = make_batches(m);
    }
    if (!rc) rc = make_partition(m);
    if (!rc && prof) rc = register_scopes(m);
    /* eng_gnn_free frees the graph, but the message is made already */
    if (rc) { eng_gnn_free(m); return rc; }
    write_summary(m);
    *out = m;
    return ENG_OK;
}

const char *eng_gnn_summary(const eng_gnn *m) { return m->summary; }
size_t eng_gnn_n_params(const eng_gnn *m) { return m->n_params; }
int eng_gnn_split_size(const eng_gnn *m, int which) { return m->n_ids[which]; }
const eng_graph *eng_gnn_graph(const eng_gnn *m) { return m->g; }

int eng_gnn_gemm_shapes(const eng_gnn *m, eng_gemm_shape *out, int cap)
{
    int n = 0, most = m->g->n;
    for (int rows = 1;; rows = rows * 2 < most ? rows * 2 : most) {
        for (int l = 0; l < m->L; l++)
            for (int i = 0; i < m->lay[l].n_nodes; i++)
                n += eng_node_gemm_shapes(&m->lay[l].nodes[i], rows, out + n, cap - n);
        if (rows >= most) return n;
    }
}

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

/* The blocks and input rows of a batch: the seeds' sampled blocks and their gathered
 * source features, or the whole graph (seeds NULL: *n_seeds becomes the training nodes);
 * the labels of the rows in m->lab; *st gets the sampler's figures. */
static int gather_batch(eng_gnn *m, const int32_t *seeds, int *n_seeds, uint64_t seed, eng_gnn_step_stats *st)
{
    const eng_graph *g = m->g;
    memset(st, 0, sizeof *st);
    m->seeds = seeds;
    m->x0_cur = g->feat;
    if (!seeds) {
        for (int l = 0; l < m->L; l++) m->bl[l] = &m->full;
        *n_seeds = m->n_ids[ENG_SPLIT_TRAIN];
        for (int i = 0; i < *n_seeds; i++) m->lab[i] = g->label[m->ids[ENG_SPLIT_TRAIN][i]];
        st->edges = (int64_t)m->L * g->m;
        st->input_nodes = g->n;
        return ENG_OK;
    }
    eng_block *blocks;
    uint64_t t0 = prof_now_ns();
    int rc = eng_sampler_sample(m->sampler, seeds, *n_seeds, seed, &blocks);
    st->sample_s = 1e-9 * (double)(prof_now_ns() - t0);
    if (rc) return rc;
    for (int l = 0; l < m->L; l++) { m->bl[l] = &blocks[l]; st->edges += blocks[l].n_edges; }
    /* gather: the input layer's source features, contiguous */
    const eng_block *b0 = m->bl[0];
    PROF_BEGIN(m->prof, m->sc_gather);
    for (int32_t i = 0; i < b0->n_src; i++)
        memcpy(m->x0 + (size_t)i * g->f, g->feat + (size_t)b0->src_ids[i] * g->f, (size_t)g->f * sizeof(float));
    for (int i = 0; i < *n_seeds; i++) m->lab[i] = g->label[seeds[i]];
    PROF_END(m->prof, m->sc_gather, 0, (uint64_t)b0->n_src * g->f * 4 + (uint64_t)*n_seeds * 4);
    m->x0_cur = m->x0;
    st->input_nodes = b0->n_src;
    return ENG_OK;
}

/* The loss of the gathered batch's n rows, and its gradients. */
static double batch_forward(eng_gnn *m, int n, int *correct)
{
    forward_layers(m, m->bl, m->x0_cur);
    return loss_on(m, m->seeds ? NULL : m->ids[ENG_SPLIT_TRAIN], n, correct);
}

static void batch_backward(eng_gnn *m, int n)
{
    loss_backward(m, m->seeds ? NULL : m->ids[ENG_SPLIT_TRAIN], n, m->bl[m->L - 1]->n_dst);
    backward_layers(m, m->bl);
}

float *eng_gnn_params(eng_gnn *m) { return m->params; }
float *eng_gnn_grads(eng_gnn *m) { return m->grads; }
int eng_gnn_batch(const eng_gnn *m) { return m->batch; }
long eng_gnn_total_steps(const eng_gnn *m) { return m->total_steps; }
const char *eng_gnn_name(const eng_gnn *m) { return m->name; }

/* Forward + backward of the loss over the given seeds' blocks (or the full graph) without
 * an optimizer step: for gradient checks. Returns the loss. */
double eng_gnn_loss_grad(eng_gnn *m, const int32_t *seeds, int n_seeds, uint64_t seed, int backward)
{
    eng_gnn_step_stats st;
    int correct;
    if (gather_batch(m, seeds, &n_seeds, seed, &st)) return NAN;
    double loss = batch_forward(m, n_seeds, &correct);
    if (backward) batch_backward(m, n_seeds);
    return loss;
}

void eng_gnn_evaluate(eng_gnn *m, int which, double *loss, double *acc) { evaluate(m, which, loss, acc); }

/* The seeds of step s (0-based) of its epoch's permutation (made when the epoch is not
 * the one perm orders: at each epoch's first step, and at a resume); returns how many. */
static int gnn_batch(eng_gnn *m, long s, const int32_t **seeds, int *last_in_epoch, int *epoch)
{
    int ntr = m->n_ids[ENG_SPLIT_TRAIN];
    int b = (int)(s % m->bpe);
    *epoch = (int)(s / m->bpe);
    if (*epoch != m->perm_epoch) {
        memcpy(m->perm, m->ids[ENG_SPLIT_TRAIN], (size_t)ntr * sizeof(int32_t));
        eng_rng r;
        eng_rng_seed(&r, m->cfg->seed, 0x47534831ull + (uint64_t)*epoch);
        for (int i = ntr - 1; i > 0; i--) {
            int j = (int)eng_rng_below(&r, (uint64_t)i + 1);
            int32_t t = m->perm[i]; m->perm[i] = m->perm[j]; m->perm[j] = t;
        }
        m->perm_epoch = *epoch;
    }
    *last_in_epoch = b == m->bpe - 1;
    int start = b * m->batch, n = ntr - start < m->batch ? ntr - start : m->batch;
    *seeds = m->perm + start;
    return n;
}

/* ---- the task (loop.h) ------------------------------------------------------------------ */

static int task_next(void *self, long s, eng_loop_batch *b, uint64_t *bytes)
{
    eng_gnn *m = self;
    const int32_t *seeds = NULL;
    int last = 1, epoch = (int)s, n = m->n_ids[ENG_SPLIT_TRAIN];
    if (m->sampler) n = gnn_batch(m, s, &seeds, &last, &epoch);
    eng_gnn_step_stats st;
    int rc = gather_batch(m, seeds, &n, m->cfg->seed * 1000003u + (uint64_t)s, &st);
    if (rc) return rc;
    m->sample_time += st.sample_s;
    m->edges += (double)st.edges;
    m->batches++;
    *b = (eng_loop_batch){ .rows = n, .global_rows = n, .epoch = epoch, .last_in_epoch = last };
    *bytes = 0;
    return ENG_OK;
}

static double task_forward(void *self, eng_loop_batch *b, int *correct) { return batch_forward(self, b->rows, correct); }

static void task_backward(void *self, eng_loop_batch *b, float w, eng_grads_ready ready, void *ud)
{
    batch_backward(self, b->rows);
}

static void task_evaluate(void *self, eng_loop_eval *e)
{
    eng_gnn *m = self;
    double val_loss;
    evaluate(m, ENG_SPLIT_VAL, &val_loss, &e->val_acc);
    evaluate(m, ENG_SPLIT_TEST, &e->test_loss, &e->test_acc);
    e->has_val = m->n_ids[ENG_SPLIT_VAL] > 0;
    e->has_test = m->n_ids[ENG_SPLIT_TEST] > 0;
}

/* The graph's and the partition's figures once at step 0; the sampler's at epoch ends. */
static int task_metrics(void *ud, eng_loop *lp, int when)
{
    eng_gnn *m = ud;
    int rc = 0;
    if (when == ENG_LOOP_AT_BEGIN) {
        const eng_part_stats *ps = m->part_of ? &m->part : NULL;
        if (!rc) rc = eng_loop_emit(lp, "graph_nodes", m->g->n);
        if (!rc) rc = eng_loop_emit(lp, "graph_edges", (double)m->g->m / 2);
        if (!rc && ps) rc = eng_loop_emit(lp, "partition_edge_cut", ps->cut_fraction);
        if (!rc && ps && m->sampler) rc = eng_loop_emit(lp, "partition_cross_nodes_per_batch", ps->batch_cross_nodes);
        if (!rc && ps && m->sampler)
            rc = eng_loop_emit(lp, "partition_cross_bytes_per_batch_modelled", ps->batch_cross_bytes);
    } else if (when == ENG_LOOP_AT_EPOCH) {
        if (m->sampler && m->sample_time > 0) {
            rc = eng_loop_emit(lp, "sampler_batches_per_s", (double)m->batches / m->sample_time);
            if (!rc) rc = eng_loop_emit(lp, "sampled_edges_per_batch", m->edges / (double)m->batches);
        }
        m->edges = 0; m->batches = 0; m->sample_time = 0;
    }
    return rc;
}

void eng_gnn_task(eng_gnn *m, eng_loop_task *t, eng_loop_metrics *extra)
{
    *t = (eng_loop_task){ .self = m, .classification = 1, .can_eval = 1, .next = task_next,
                          .forward = task_forward, .backward = task_backward, .evaluate = task_evaluate };
    *extra = (eng_loop_metrics){ .ud = m, .emit = task_metrics };
}

void eng_gnn_param_view(eng_gnn *m, eng_param_view *v)
{
    memset(v, 0, sizeof *v);
    v->params = m->params;
    v->grads = m->grads;
    v->n_params = m->n_params;
    v->n_layers = m->L;
    for (int l = 0; l < m->L; l++) {
        sage_layer *y = &m->lay[l];
        eng_param_layer *P = &v->layers[l];
        snprintf(P->name, sizeof P->name, "%s", y->name);
        P->w = m->params + y->w_off; P->dw = m->grads + y->w_off; P->n_w = y->n_w; P->w_off = y->w_off;
        P->b = m->params + y->b_off; P->db = m->grads + y->b_off; P->n_b = (size_t)y->out; P->b_off = y->b_off;
        P->by_col = 1;  /* the dense op's W [2·in x out] */
        P->w_rows = 2 * (size_t)y->in;
        P->w_cols = (size_t)y->out;
        if (y->act != ENG_ACT_NONE) { P->a = y->A; P->a_width = y->k ? (size_t)y->k : (size_t)y->out; P->a_rows = &y->rows; }
    }
}
