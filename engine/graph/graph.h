/* graph.h — graphs for node classification inside the engine (private to engine/ and its
 * tests/benches): CSR adjacency, node features, labels and a train/val/test split; the
 * edge-list loader, the SBM and R-MAT generators (graph.c), neighbour sampling into
 * blocks (sample.c) and partitioning (partition.c).
 *
 * Adjacency: row v of the CSR lists the nodes v aggregates from — the sources of the edges
 * that end at v — ascending, without duplicates and without v itself (self-loops are
 * dropped: a GraphSAGE layer has its own self weight). An undirected graph stores both
 * directions. Node ids are 0..n-1 (int32).
 */
#ifndef NNBENCH_ENGINE_GRAPH_H
#define NNBENCH_ENGINE_GRAPH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../loop.h"

enum { ENG_SPLIT_NONE = 0, ENG_SPLIT_TRAIN = 1, ENG_SPLIT_VAL = 2, ENG_SPLIT_TEST = 3 };

typedef struct {
    int32_t n;            /* nodes */
    int64_t m;            /* CSR entries (directed edges after cleaning) */
    int64_t *rowptr;      /* [n + 1] */
    int32_t *col;         /* [m] */
    int f;                /* features per node (0 = none) */
    float *feat;          /* [n x f] or NULL */
    int32_t *label;       /* [n] or NULL */
    int classes;          /* 1 + the largest label (0 without labels) */
    uint8_t *split;       /* [n] ENG_SPLIT_* or NULL */
    int64_t self_loops, duplicates; /* dropped while building (for the loader's report) */
} eng_graph;

void eng_graph_free(eng_graph *g); /* frees the arrays and g itself; NULL is fine */

/* Builds the CSR of g (n set, other arrays untouched) from m edges src[i] -> dst[i];
 * undirected adds dst -> src too. Self-loops and duplicates are dropped and counted. */
int eng_graph_build_csr(eng_graph *g, const int32_t *src, const int32_t *dst, int64_t m, int undirected);

/* Graph files (edges, features, labels, masks) must be regular files of at most
 * ENG_MAX_GRAPH_BYTES with lines of at most ENG_GRAPH_MAX_LINE bytes (data_internal.h);
 * every loader stops with ENG_ESTOPPED once eng_stop_builds() was called.
 *
 * Loads an edge list: one "src,dst" per line (comma, tab or blanks between), '#' comments
 * and blank lines skipped, an optional header (a first line that is not two integers).
 * n_nodes 0: n = 1 + the largest id; else the graph has exactly n_nodes nodes and an id
 * >= n_nodes is an error at its line, found before anything is sized by it. Errors name
 * FILE:LINE. *out: free with eng_graph_free. */
int eng_graph_load_edges(const char *path, int undirected, int32_t n_nodes, eng_graph **out);
/* Data rows of a features file (the node count: one row per node), without its header. */
int eng_graph_count_rows(const char *path, int32_t *n);
/* Node features: one line per node in id order, f finite numbers each (optional header;
 * nan and inf refused as the CSV loader refuses them). The file must have exactly g->n rows. */
int eng_graph_load_features(eng_graph *g, const char *path);
/* Labels: one integer >= 0 per line in node order, or "node,label" pairs (any order,
 * every node once). */
int eng_graph_load_labels(eng_graph *g, const char *path);
/* Split: from a mask file of node ids (one per line) for which (ENG_SPLIT_*), or at random
 * by fractions train, val (the rest is test), seeded. */
int eng_graph_load_mask(eng_graph *g, const char *path, int which);
int eng_graph_random_split(eng_graph *g, double train, double val, uint64_t seed);

/* Stochastic block model: n nodes in c equal communities (label = community), average
 * degree deg, a fraction homophily of each node's edges inside its community; features
 * f-dimensional around a unit-norm-scale centroid per community with noise std (the
 * difficulty knob, with homophily). Undirected. Seeded: same arguments, same graph. */
int eng_graph_sbm(int32_t n, int c, double deg, double homophily, int f, double noise, uint64_t seed,
                  eng_graph **out);
/* R-MAT (Graph500 a, b, c = 0.57, 0.19, 0.19): 2^scale nodes, edge_factor * 2^scale edges
 * drawn, undirected; no features or labels. Seeded. */
int eng_graph_rmat(int scale, int edge_factor, uint64_t seed, eng_graph **out);

/* Parses "10,5" into out (at most max); returns the count, or -1 when malformed or a
 * fanout is outside 1..ENG_MAX_FANOUT. (sample.c) */
int eng_graph_parse_fanouts(const char *s, int *out, int max);

/* ---- sampling (sample.c) -------------------------------------------------------------- */

/* One block (a bipartite message-flow graph of one layer): n_dst destination nodes, n_src
 * source nodes whose first n_dst are the destinations themselves (same order); edges as a
 * CSR over the destinations with LOCAL source ids. src_ids maps local -> global ids. */
typedef struct eng_block {
    int32_t n_dst, n_src;
    int64_t n_edges;
    int32_t *src_ids;     /* [n_src] global ids (a bijection onto the distinct nodes) */
    int64_t *indptr;      /* [n_dst + 1] */
    int32_t *indices;     /* [n_edges] local source ids */
    int64_t cap_src, cap_edges; /* allocated */
} eng_block;

typedef enum { ENG_SAMPLER_TWOPASS = 0, ENG_SAMPLER_FUSED = 1 } eng_sampler_kind;

typedef struct eng_sampler eng_sampler;
#define ENG_MAX_FANOUT 1024
#define ENG_GRAPH_MAX_LAYERS 8
/* A sampler for g with per-layer fanouts (fanouts[0] for the input layer, the last for the
 * output layer, as DGL's; each 1..ENG_MAX_FANOUT) and up to max_seeds seeds per batch; it
 * owns its blocks and workspaces, sized once here (sampling allocates nothing). Each
 * sample call is one profiler scope "sample.twopass" / "sample.fused" when prof is set. */
int eng_sampler_create(const eng_graph *g, eng_sampler_kind kind, const int *fanouts, int layers,
                       int max_seeds, prof_t *prof, eng_sampler **out);
void eng_sampler_free(eng_sampler *s);
/* Samples the blocks of one batch: blocks[0] is the input layer's, blocks[layers-1] has
 * the seeds as destinations. The draws depend on (seed, the seeds) only, in the same order
 * for both kinds, so both give identical blocks. Returns the blocks (owned by s). */
int eng_sampler_sample(eng_sampler *s, const int32_t *seeds, int n_seeds, uint64_t seed, eng_block **blocks);
const char *eng_sampler_name(eng_sampler_kind k); /* "twopass", "fused" */

/* ---- partitioning (partition.c) -------------------------------------------------------- */

typedef struct {
    int parts;
    int64_t cut;                  /* undirected edges whose ends are in different parts */
    double cut_fraction;          /* cut / all undirected edges */
    double batch_input_nodes;     /* per sampled minibatch: nodes whose features the batch needs */
    double batch_cross_nodes;     /* ... of which live in another part than the batch's seeds */
    double batch_cross_bytes;     /* MODELLED: cross nodes x features x 4 bytes a distributed
                                   * sampler would fetch from other parts */
} eng_part_stats;

/* Parts 0..parts-1 per node into part[n]: METIS k-way (edge cut minimised; needs an
 * undirected graph) or uniformly at random; both seeded. */
int eng_graph_partition(const eng_graph *g, eng_partitioner kind, int parts, uint64_t seed, int32_t *part);
void eng_part_edge_cut(const eng_graph *g, const int32_t *part, int parts, eng_part_stats *st);
/* Cross-partition traffic per minibatch as a distributed trainer would see it: for each part,
 * `batches` batches of `batch` seeds drawn from that part, sampled (fused sampler, fanouts);
 * the input nodes in other parts are the ones it would fetch. Averages into st. */
int eng_part_traffic(const eng_graph *g, const int32_t *part, const int *fanouts, int layers, int batch,
                     int batches, uint64_t seed, eng_part_stats *st);

/* ---- graph runs (gnn.c) --------------------------------------------------- */

typedef struct eng_gnn eng_gnn;
typedef struct {
    double sample_s;              /* time inside the sampler */
    int64_t edges;                /* sampled edges over all blocks (full graph: L x m) */
    int64_t input_nodes;          /* nodes whose features the step read */
} eng_gnn_step_stats;

/* The memory a graph run of cfg's model takes for a graph of n nodes, `entries` CSR
 * entries (directed; both directions of an undirected edge), f features and `classes`
 * classes, built from `drawn` generated edges (0 for a loaded graph): estimated, against
 * limit bytes (0: this process's, physical memory or ulimit -v/-d). ENG_ENOMEM with
 * "graph: out of memory: the graph is too big: ..." (the model's "parameters are too big"
 * style: the parts, and what to change) when over it. */
int eng_gnn_check_memory(const eng_config *cfg, int64_t n, int64_t entries, int64_t drawn, int f, int classes,
                         double limit);
/* Loads or generates the graph, builds the sage layers, the sampler (sampled mode) and
 * the partition figures (graph.partition); the run adds the optimizer. Free with eng_gnn_free. */
int eng_gnn_create(const eng_config *cfg, prof_t *prof, eng_gnn **out);
void eng_gnn_free(eng_gnn *m);
/* The graph as the loop's task (loop.h), and its own metrics (graph, partition and
 * sampler figures) as the extra-metrics slot. */
void eng_gnn_task(eng_gnn *m, eng_loop_task *t, eng_loop_metrics *extra);
/* What gradient transforms and telemetry see of the sage layers. */
void eng_gnn_param_view(eng_gnn *m, eng_param_view *v);
int eng_gnn_batch(const eng_gnn *m);          /* seeds per step (all training nodes: full) */
long eng_gnn_total_steps(const eng_gnn *m);
const char *eng_gnn_name(const eng_gnn *m);   /* the graph's name, as runs store it */
double eng_gnn_loss_grad(eng_gnn *m, const int32_t *seeds, int n_seeds, uint64_t seed, int backward);
void eng_gnn_evaluate(eng_gnn *m, int which, double *loss, double *acc);
float *eng_gnn_params(eng_gnn *m);
float *eng_gnn_grads(eng_gnn *m);
size_t eng_gnn_n_params(const eng_gnn *m);
const char *eng_gnn_summary(const eng_gnn *m);
const eng_graph *eng_gnn_graph(const eng_gnn *m);
int eng_gnn_split_size(const eng_gnn *m, int which);
/* The GEMM shapes the sage layers can issue, into out (eng_gemm_prepare): a block's
 * destinations are any number up to the graph's nodes, so one row count per power-of-two
 * class of rows from 1 to the node count, and the node count itself (the full graph). The
 * count written. */
int eng_gnn_gemm_shapes(const eng_gnn *m, eng_gemm_shape *out, int cap);

#endif
