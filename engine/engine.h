/* engine.h — nnbench's training engine: experiment configs, datasets, models, optimizers
 * and the training loop. The one public header of engine/.
 *
 * How a run goes:
 *   eng_experiment *ex;
 *   if (eng_experiment_load("samples/spirals-mlp.ini", overrides, n_overrides, &ex)) {
 *       fprintf(stderr, "%s\n", eng_error()); exit(2); }        // "FILE:LINE: key ..."
 *   for (size_t i = 0; i < ex->n_variants; i++) {
 *       eng_run *r;
 *       if (eng_run_create(&ex->variants[i], prof, &r)) { ... eng_error() ... }
 *       int rc = eng_run_train(r, &sink);   // events go to the sink; ENG_OK, ENG_EDIVERGED...
 *       eng_run_destroy(r);
 *   }
 *   eng_experiment_free(ex);
 *
 * Conventions: every function that can fail returns an eng_status (0 = ok) and leaves a
 * message for the user in eng_error() (thread-local). Memory that a function allocates for
 * the caller is freed by the matching *_free / *_destroy named next to it. Nothing here
 * prints, exits, or touches SQLite or the terminal: a run reports through an eng_sink.
 */
#ifndef NNBENCH_ENGINE_H
#define NNBENCH_ENGINE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "../profiler/profiler.h"

#define NNBENCH_VERSION "0.1.0"

/* ---- errors ------------------------------------------------------------------------ */

typedef enum {
    ENG_OK = 0,
    ENG_EINVAL = -1,     /* bad config, bad argument */
    ENG_EIO = -2,        /* a file could not be opened/read */
    ENG_EFORMAT = -3,    /* a file is malformed or truncated */
    ENG_ENOMEM = -4,
    ENG_EDIVERGED = -5,  /* loss became NaN/Inf */
    ENG_ESTOPPED = -6,   /* eng_run_request_stop() was honoured */
    ENG_ESINK = -7,      /* a sink callback failed (its message is in eng_error()) */
    ENG_ESOLVER = -8,    /* a Newton linear solve failed */
} eng_status;

/* The last error message set on this thread ("" if none). */
const char *eng_error(void);
/* Sets the thread's error message (printf-style) and returns code; for engine files and
 * for sinks that want their message to surface through eng_error(). */
int eng_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- fp32 GEMM backends and the OpenBLAS core (gemm*.c) -----------------------------
 * Every fp32 GEMM of the engine goes through one entry point with two backends, OpenBLAS
 * and oneDNN (dnnl_sgemm). Before a backend serves a shape class (transposes and the binary
 * magnitude of M, N, K) a child process checks it against a double reference and times it;
 * train.gemm = auto then lets the fastest that passed serve each class. Results are cached
 * per machine and thread count. A run records what served it (eng_gemm_describe). */

/* Call first in main(). When the user has not set OPENBLAS_CORETYPE, picks the fastest
 * OpenBLAS core that passes its check on this CPU (GEMM and LAPACK; measured once per
 * machine in child processes, cached) and, when it is not the core OpenBLAS loaded with,
 * re-executes the program with OPENBLAS_CORETYPE set to it (OpenBLAS reads it only when it
 * loads). Returns when nothing is to be done; eng_openblas_core_note says what happened.
 * NNBENCH_OPENBLAS_CANDIDATES=A,B restricts the cores tried; NNBENCH_OPENBLAS_SELECT=off
 * keeps the core as loaded, =force also treats a set OPENBLAS_CORETYPE as unset (tests). */
void eng_openblas_core_select(char **argv);
const char *eng_openblas_core_note(void);
/* The last prepared choice: "onednn 6/8, openblas 2/8 shape classes; auto, 2 threads, ..."
 * and per class "NN 128x256x784 onednn 57.0 GF/s (openblas 26.9); ...". */
void eng_gemm_describe(char *buf, size_t cap);
void eng_gemm_describe_classes(char *buf, size_t cap);
/* GEMM calls so far, in this process, of a shape class no eng_gemm_prepare measured (OpenBLAS
 * serves them, unchosen): a run counts its own (eng_run_result.gemm_unprepared_calls). */
long eng_gemm_unprepared_calls(void);
/* Why a backend was skipped in the last choice ("" when none was). */
const char *eng_gemm_notes(void);
/* nnbench sysinfo --calibrate: forgets this machine's cached choices, measures the
 * standard shapes (the Fashion MLP's at batch 128) again at 1..threads threads, and writes
 * one line per thread count into buf. */
int eng_gemm_calibrate(int threads, char *buf, size_t cap);
/* What the cache knows of this machine, one line per thread count, into buf. */
void eng_gemm_cached(char *buf, size_t cap);
/* Best and mean GFLOP/s of an n x n x n sgemm through the entry point (the backend the
 * choice gives that class at `threads` threads, named into backend), over reps calls. */
int eng_gemm_square_rate(int n, int reps, int threads, double *best, double *mean, char *backend, size_t cap);

/* ---- instruction-set paths of the vectorised kernels (isa.c) ------------------------
 * The activation kernels (ops.c) and the MaxK / CBSR kernels (sparse.c) are compiled once
 * per path; one path serves them all, chosen on first use: NNBENCH_ISA if set, else the
 * widest this CPU has. Every path gives the same bits (nothing fused into FMA), so the choice
 * changes speed only. Tests and benchmarks force each path with eng_isa_set. */

typedef enum { ENG_ISA_GENERIC = 0, ENG_ISA_AVX2 = 1, ENG_ISA_AVX512 = 2 } eng_isa;
#define ENG_ISA_N 3

const char *eng_isa_name(eng_isa isa);             /* "generic", "avx2", "avx512" */
int eng_isa_parse(const char *s, eng_isa *out);     /* ENG_EINVAL naming the three */
int eng_isa_available(eng_isa isa);                 /* 1 if this CPU (and build) runs it */
eng_isa eng_isa_best(void);                         /* the widest available */
/* The path in use (resolved from NNBENCH_ISA / the CPU on the first call). */
eng_isa eng_isa_current(void);
/* Resolves the path now; ENG_EINVAL with a message if NNBENCH_ISA names an unknown path or
 * one this CPU lacks (the kernels then run the widest available). eng_model_build calls it. */
int eng_isa_init(void);
/* Forces a path for every later kernel call; ENG_EINVAL if this CPU lacks it. Not for use
 * while kernels run on other threads. */
int eng_isa_set(eng_isa isa);

/* ---- run statuses (persisted by number and by name: append-only) ------------------- */

typedef enum {
    ENG_RUN_RUNNING = 0,
    ENG_RUN_FINISHED = 1,
    ENG_RUN_FAILED = 2,
    ENG_RUN_DIVERGED = 3,
    ENG_RUN_INTERRUPTED = 4,
    ENG_RUN_CRASHED = 5,
} eng_run_status;
const char *eng_run_status_name(eng_run_status s); /* "running", "finished", ... */

/* ---- experiment configuration ------------------------------------------------------ */

typedef enum {
    ENG_DATA_SPIRALS, ENG_DATA_XOR, ENG_DATA_BLOBS, ENG_DATA_LINREG, ENG_DATA_POLYREG,
    ENG_DATA_SINE, ENG_DATA_IDX, ENG_DATA_CSV,
    ENG_DATA_GRAPH,        /* node classification on a graph: the [graph] section */
    ENG_DATA_MARKERS,      /* long sequences: are the two flagged tokens equal (engine/data/data_seq.c) */
} eng_data_source;
/* data.sequence: an image read as a sequence of rows, 4x4 patches or pixels (data_seq.c) */
typedef enum { ENG_SEQ_VIEW_NONE, ENG_SEQ_VIEW_ROWS, ENG_SEQ_VIEW_PATCHES, ENG_SEQ_VIEW_PIXELS } eng_seq_view;

typedef enum { ENG_NORM_NONE, ENG_NORM_SCALE /* x/255 for idx */, ENG_NORM_STANDARD /* z-score per feature, stats from train */, ENG_NORM_MINMAX } eng_norm;

typedef struct {
    eng_data_source source;
    int n;                 /* synthetic: samples generated; idx/csv: max training samples (0 = all) */
    int n_test;            /* idx with test files / csv: max test samples (0 = all) */
    double test_fraction;  /* split of generated/csv data when no separate test file */
    double noise;          /* synthetic: noise std */
    int classes;           /* blobs: number of classes; spirals: arms */
    int features;          /* blobs/linreg/polyreg: input dimension */
    int degree;            /* polyreg: polynomial degree */
    char path[512];        /* idx: training images file (or a directory holding the 4 standard files); csv: file */
    char labels[512];      /* idx: training labels file */
    char test_path[512];   /* idx: test images; csv: optional test file */
    char test_labels[512]; /* idx: test labels */
    int label_column;      /* csv: column of the target (-1 = last) */
    int header;            /* csv: first row is a header (1) or not (0); -1 = detect */
    int regression;        /* csv: target is a real value (1) or a class index (0) */
    int skip_rows;         /* csv: lines skipped at the start of each file (before the header) */
    int stratify;          /* split test_fraction per class (classification) */
    eng_norm normalize;
    int shuffle;           /* shuffle training data every epoch */
    int prefetch;          /* gather the next batch on a second thread */
    /* input pipeline (engine/data/data_cache.c, engine/data/pipeline.c) */
    int cache;             /* idx/csv: keep the decoded, normalised set in a memory-mapped cache file */
    char augment[64];      /* image data: "shift:N, flip" (random shift by up to N pixels, horizontal flip); "" = none */
    double read_mbps;      /* throttle the batch source to this many MB/s (1e6 bytes); 0 = unthrottled */
    double read_latency_ms;/* fixed latency per batch read from the source; 0 = none */
    int prefetch_depth;    /* batches the prefetch thread may have ready ahead (1..8) */
    eng_seq_view sequence; /* image data read as a sequence (rows, patches, pixels) */
    int seq_len;           /* markers: positions per sample */
} eng_data_config;

/* ENG_ACT_MAXK keeps the k largest values of each row (eng_layer_spec.k) and zeroes the rest;
 * its output is held sparse (CBSR) and must feed a dense layer (engine/sparse.c). */
typedef enum { ENG_ACT_NONE, ENG_ACT_RELU, ENG_ACT_TANH, ENG_ACT_SIGMOID, ENG_ACT_GELU, ENG_ACT_MAXK } eng_act;
typedef enum { ENG_LAYER_DENSE, ENG_LAYER_CONV, ENG_LAYER_POOL, ENG_LAYER_FLATTEN,
               ENG_LAYER_SAGE, /* GraphSAGE, mean aggregator: graph data only (engine/graph/gnn.c) */
               ENG_LAYER_AVGPOOL, /* KxK mean, stride S (kernel, stride) */
               ENG_LAYER_GAP,     /* global average pooling: C x H x W -> C */
               ENG_LAYER_SEQ,     /* sequence layers (engine/attention.c): eng_layer_spec.seq says which */
               ENG_LAYER_BN,      /* batch normalization: per channel (C x H x W) or per feature (flat) */
               ENG_LAYER_RES_BEGIN, /* res( ... ): where a residual block's shortcut leaves the chain */
               ENG_LAYER_RES      /* ... ):ACT: shortcut added to the block's output, then ACT */ } eng_layer_kind;
#define ENG_LAYER_KINDS 11

/* Sequence layers read one row as n positions of d features ([1 x n x d]; an image
 * [1 x H x W] is H positions of W pixels). */
typedef enum {
    ENG_SEQ_EMBED,     /* embed:D        a linear projection of each position to D features */
    ENG_SEQ_POSENC,    /* posenc[:learned] sinusoidal (fixed) or learned positional encoding, added */
    ENG_SEQ_LAYERNORM, /* layernorm      per position over the features, with gain and shift */
    ENG_SEQ_ENCODER,   /* encoder:heads=H:ff=F  pre-norm transformer block (attention + GELU MLP) */
    ENG_SEQ_MEANPOOL   /* meanpool       mean over the positions: [1 x n x d] -> d */
} eng_seq_kind;

/* model.attention: how encoder layers attend (engine/attention.c). */
typedef enum { ENG_ATTN_FULL = 0, ENG_ATTN_LINFORMER = 1, ENG_ATTN_LSH = 2 } eng_attn_kind;

typedef struct {
    eng_layer_kind kind;
    int units;     /* dense: outputs; conv: filters */
    int kernel;    /* conv: square kernel size; pool: 2; avgpool: K (0 means 2) */
    eng_act act;
    int k;         /* maxk: values kept per row (1 <= k <= units) */
    int pad;       /* conv: zeros added on every side of the input (0 <= pad < kernel) */
    int stride;    /* conv: step between receptive fields, 0 means 1 (a zeroed spec is valid);
                      avgpool: 0 means the kernel */
    eng_seq_kind seq; /* ENG_LAYER_SEQ: which one (units = embed's D) */
    int heads, ff;    /* encoder: attention heads (dividing the width), hidden width of its MLP */
    int learned;      /* posenc: 1 = learned table, 0 = sinusoidal */
} eng_layer_spec;

typedef enum { ENG_LOSS_SOFTMAX_XENT, ENG_LOSS_MSE } eng_loss_kind;
typedef enum { ENG_INIT_AUTO, ENG_INIT_HE, ENG_INIT_XAVIER } eng_init_kind;
/* model.conv_algo: how conv2d layers compute (engine/conv.c). im2col is 0 so that a zeroed
 * config keeps the algorithm models had before the key existed. */
typedef enum { ENG_CONV_IM2COL = 0, ENG_CONV_DIRECT = 1, ENG_CONV_AUTO = 2, ENG_CONV_WINOGRAD = 3,
               ENG_CONV_WINOGRAD4 = 4, ENG_CONV_FFT = 5, ENG_CONV_ONEDNN = 6 } eng_conv_algo;

#define ENG_MAX_LAYERS 64        /* a ResNet-14: 40 layers (each res( ) counts 2 besides its layers) */
typedef struct {
    int n_layers;
    eng_layer_spec layers[ENG_MAX_LAYERS];
    eng_loss_kind loss;
    eng_init_kind init;    /* auto: He before relu/gelu, Xavier otherwise */
    eng_conv_algo conv_algo; /* auto: per conv layer, the fastest on its shape at build */
    /* conv layer i's own :algo=X as 1 + its eng_conv_algo; 0 = conv_algo (here, not in the
     * layer spec, so that specs written out in full stay valid) */
    unsigned char layer_algo[ENG_MAX_LAYERS];
    char attention[48];    /* model.attention as written ("" = full); parsed into the next fields */
    eng_attn_kind attn;    /* encoder layers: full, linformer (attn_k) or lsh (buckets, rounds) */
    int attn_k, attn_buckets, attn_rounds;
} eng_model_config;

typedef enum { ENG_OPT_SGD, ENG_OPT_MOMENTUM, ENG_OPT_ADAM, ENG_OPT_ADAMW, ENG_OPT_NEWTON } eng_optimizer;
typedef enum { ENG_SCHED_CONSTANT, ENG_SCHED_STEP, ENG_SCHED_COSINE, ENG_SCHED_LINEAR } eng_schedule;
/* Gradient transforms applied between backward and the optimizer step (engine/gradient.c). */
typedef enum { ENG_GRAD_ZNORM, ENG_GRAD_CENTRALIZE, ENG_GRAD_CLIP_NORM, ENG_GRAD_CLIP_VALUE } eng_grad_kind;
#define ENG_MAX_GRAD_TRANSFORMS 8

/* train.gemm: which fp32 GEMM backend serves the model (engine/gemm*.c). */
typedef enum { ENG_GEMM_POLICY_AUTO = 0, ENG_GEMM_POLICY_OPENBLAS = 1, ENG_GEMM_POLICY_ONEDNN = 2 } eng_gemm_policy;

typedef struct {
    eng_optimizer optimizer;
    double lr;
    double momentum;       /* momentum: beta (default 0.9) */
    int nesterov;
    double beta1, beta2, eps;
    double weight_decay;   /* adamw: decoupled; others: L2 added to the gradient */
    int batch;             /* 0 = full batch */
    int epochs;
    long max_steps;        /* 0 = epochs decide */
    eng_schedule schedule;
    long warmup;           /* linear warm-up steps (any schedule) */
    long step_size;        /* step schedule: decay every step_size steps */
    double gamma;          /* step schedule: factor */
    double min_lr;         /* cosine/linear: floor */
    int threads;           /* BLAS threads; 0 = leave as the environment sets it */
    eng_gemm_policy gemm;  /* fp32 GEMM backend choice */
    int eval_every;        /* steps between test evaluations; 0 = once per epoch */
    int log_every;         /* steps between logged train metrics (default 1) */
    long checkpoint_every; /* steps between checkpoints; 0 = at the end of each epoch */
    int n_gradient;        /* gradient transforms, applied in order (0 = none) */
    eng_grad_kind gradient[ENG_MAX_GRAD_TRANSFORMS];
    double znorm_eps;      /* znorm: g' = (g - mean) / (std + eps) */
    double clip_norm;      /* clip_norm: max global L2 norm of the gradient */
    double clip_value;     /* clip_value: max |g_i| */
    int telemetry;         /* per-tensor gradient telemetry every log_every steps */
} eng_train_config;

typedef enum { ENG_CURV_HESSIAN, ENG_CURV_FISHER, ENG_CURV_GAUSS_NEWTON } eng_curvature;
typedef enum { ENG_BLOCKS_LAYER, ENG_BLOCKS_FULL } eng_blocks;

typedef struct {
    eng_curvature curvature;
    eng_blocks blocks;
    double normalization_epsilon; /* 5e-3 */
    double damping;               /* 1e-10 */
    double prune_ratio;           /* 1 = keep all */
    double clip;                  /* 100 */
    int max_block;                /* refuse blocks larger than this (memory guard) */
} eng_newton_config;

typedef enum { ENG_QPOLICY_CLASSICAL, ENG_QPOLICY_QUANTUM, ENG_QPOLICY_THRESHOLD, ENG_QPOLICY_HYBRID } eng_qpolicy;
typedef enum { ENG_READOUT_NONE, ENG_READOUT_TOMOGRAPHY } eng_readout;

typedef struct {
    eng_qpolicy policy;
    double kappa_max;     /* 1e4 */
    double precision;     /* eps, 1e-2 */
    double query_time_ns; /* cost of one QLSA query */
    eng_readout readout;
    int exact_kappa_max_n; /* compute the exact kappa for blocks up to this size */
} eng_quantum_config;

typedef struct {
    int enabled;
    char counters[256];   /* comma-separated PAPI event names; "" = the default set */
} eng_profile_config;

/* [monitor]: live views of a run outside nnbench (tui/monitor.h, docs/monitoring.md); the
 * engine only carries them. */
typedef struct {
    char metrics[128];    /* Prometheus endpoint "HOST:PORT[,PORT...]"; "" = off */
    char tensorboard[512];/* event-file directory; "" = off */
} eng_monitor_config;

/* [graph]: node classification (data.source = graph); see engine/graph/gnn.c and docs/graphs.md */
typedef enum { ENG_GRAPH_SBM, ENG_GRAPH_RMAT, ENG_GRAPH_FILE } eng_graph_source;
typedef enum { ENG_GRAPH_SAMPLED, ENG_GRAPH_FULL } eng_graph_mode;
typedef enum { ENG_PART_NONE, ENG_PART_RANDOM, ENG_PART_METIS } eng_partitioner;
typedef struct {
    eng_graph_source source;
    int nodes, classes, features;   /* sbm */
    double degree, homophily, noise; /* sbm: mean degree, share of edges inside a community, feature noise */
    int scale, edge_factor;         /* rmat */
    char edges[512], node_features[512], labels[512];          /* file */
    char train_mask[512], val_mask[512], test_mask[512];       /* file: optional */
    int undirected;                 /* file */
    double train_fraction, val_fraction; /* random split when there are no mask files */
    eng_graph_mode mode;            /* minibatches of sampled blocks, or the full graph per step */
    char fanouts[64];               /* "10,5": per layer, input layer first */
    int sampler;                    /* 0 = twopass, 1 = fused (engine/graph/sample.c) */
    eng_partitioner partition;
    int parts;
} eng_graph_config;
/* Data-parallel training ([dist]; used when the run was started by mpirun with N > 1). */
typedef enum { ENG_COMPRESS_NONE, ENG_COMPRESS_FP16, ENG_COMPRESS_INT8 } eng_compress;
/* How the global batch is split: even shares, or shares that follow each rank's measured
 * time per row (a slower rank gets fewer rows; runs are then reproducible to float
 * tolerance, not bits). */
typedef enum { ENG_BALANCE_EVEN, ENG_BALANCE_MEASURED } eng_balance;
typedef struct {
    eng_compress compress; /* gradients sent as fp32, fp16, or int8 with error feedback */
    eng_balance balance;
    int bucket_kb;         /* 0: one all-reduce after backward; else one per bucket_kb KB of
                              gradients, started as backward finishes them (compress = none) */
    double timeout_s;      /* a collective not answered in this time fails the run */
} eng_dist_config;

/* One resolved key of a variant: "train.lr" = "0.1", from FILE:LINE. */
typedef struct {
    char key[64];
    char value[1024];     /* a ResNet's model.layers runs to several hundred characters */
    int line;             /* 0 = default, -1 = command line */
} eng_kv;

/* One run's complete configuration: base keys + variant overrides + --set overrides. */
typedef struct {
    char name[128];       /* [experiment] name */
    char variant[64];     /* "" when the file has no variants */
    char path[512];       /* experiment file */
    uint64_t seed;
    double target_loss;   /* 0 = none */
    eng_data_config data;
    eng_model_config model;
    eng_train_config train;
    eng_newton_config newton;
    eng_quantum_config quantum;
    eng_profile_config profile;
    eng_graph_config graph;
    eng_dist_config dist;
    eng_monitor_config monitor;
    eng_kv *kv;           /* every key, resolved (defaults included), sorted by key */
    size_t n_kv;
} eng_config;

/* The resolved value of key ("train.lr") in c, or NULL: the one lookup of config keys. */
const char *eng_config_value(const eng_config *c, const char *key);
/* Where key's value came from, for messages: "FILE:LINE", "--set key=value", or "FILE"
 * for a default. */
void eng_config_where(const eng_config *c, const char *key, char *buf, size_t cap);

typedef struct {
    char path[512];
    char *text;           /* the file's full text (stored with each run) */
    eng_config *variants; /* one per [variant] section, or one when there is none */
    size_t n_variants;
} eng_experiment;

/* Loads and validates an experiment file. overrides: "section.key=value" strings applied
 * to every variant after the file (as --set does). Errors: ENG_EIO, ENG_EINVAL with
 * "FILE:LINE: key 'lr': expected a positive number, got 'fast'". Free with
 * eng_experiment_free. */
int eng_experiment_load(const char *path, const char *const *overrides, size_t n_overrides,
                        eng_experiment **out);
/* The same from the file's text (as stored with a run); path names it in messages and
 * anchors relative data paths. */
int eng_experiment_load_text(const char *path, const char *text, const char *const *overrides,
                             size_t n_overrides, eng_experiment **out);
void eng_experiment_free(eng_experiment *ex);
/* Keeps only the named variant; ENG_EINVAL naming the variants that exist if absent. */
int eng_experiment_select(eng_experiment *ex, const char *variant);
/* The documented keys: for help text and docs/experiments.md. NULL-terminated. */
typedef struct { const char *key, *type, *def, *help; } eng_key_doc;
extern const eng_key_doc eng_key_docs[];

/* ---- datasets ---------------------------------------------------------------------- */

typedef struct {
    char name[64];        /* "spirals", "fashion-mnist", file name for csv */
    int classification;   /* 1: labels hold class indices; 0: targets hold real values */
    int n_classes;        /* classification */
    int n_targets;        /* regression: values per sample */
    int in_shape[3];      /* C,H,W (for flat data: 1,1,features) */
    size_t in_size;       /* C*H*W */
    int n_train, n_test;
    float *x_train, *x_test;         /* n * in_size, row-major */
    int32_t *y_train, *y_test;       /* classification labels, else NULL */
    float *t_train, *t_test;         /* regression targets n * n_targets, else NULL */
    char label_max_at[160];          /* file loaders: where the largest label is ("f.csv: data row 57") */
    void *map;            /* private: the region a cache hit's arrays live in (data_cache.c), or NULL */
    size_t map_len;
    uint64_t sum[4];      /* private (data_cache.c): checksums of the four arrays, once sum_set */
    int sum_set;
    /* private (data_codes.c): x_train as bytes when every value is (float)(c * x_code_scale)
     * for a byte c, else NULL; the batcher gathers from it. x_train is read-only once
     * eng_data_load returns. */
    uint8_t *x_codes;
    double x_code_scale;
} eng_dataset;

/* Builds or loads the dataset the config names (deterministic for the seed), splits and
 * normalises it. Errors name the file and byte offset for bad IDX/CSV input. */
int eng_data_load(const eng_data_config *dc, uint64_t seed, eng_dataset **out);
void eng_data_free(eng_dataset *ds);
/* The loaded data's fingerprint: row counts, shape and a checksum of each array, as one
 * line of text (stored with a run; resume compares it). */
#define ENG_DATA_FP_MAX 160
void eng_data_fingerprint(const eng_dataset *ds, char *buf, size_t cap);
/* 0 when two fingerprints are the same data; else 1 and what changed into why ("the
 * training inputs differ; the training labels differ"). */
int eng_data_fingerprint_diff(const char *was, const char *now, char *why, size_t cap);

/* ---- models ------------------------------------------------------------------------ */

typedef struct eng_model eng_model;
/* Free with eng_model_free; the rest of the model's API is in core.h. */
void eng_model_free(eng_model *m);
size_t eng_model_n_params(const eng_model *m);

/* ---- runs and sinks ---------------------------------------------------------------- */

typedef struct {
    long step;            /* optimizer steps done (1-based after the first step) */
    int epoch;
    double wall_s;        /* since run start */
    double hybrid_s;      /* Q-Newton clock (== wall_s unless solves were routed quantum) */
    const char *key;      /* "train_loss", "train_acc", "test_loss", "test_acc", "lr", "samples_per_s" */
    double value;
} eng_metric;

typedef struct {
    const eng_config *cfg;
    const char *experiment_text; /* full text of the experiment file, or NULL */
    const char *dataset;         /* dataset name */
    const char *model_summary;
    size_t n_params;
    int threads;                 /* BLAS threads in use */
    long total_steps;
    int n_train, n_test;
    long resumed_step;           /* 0, or the checkpoint's step when the run was resumed */
    const char *gemm;            /* what served the fp32 GEMMs (eng_gemm_describe), or NULL */
    const char *gemm_classes;    /* per shape class (eng_gemm_describe_classes), or NULL */
    const char *gemm_notes;      /* backends skipped for failing their check, or "" */
    const char *data_fingerprint;/* eng_data_fingerprint of the loaded data; "" for graph data */
    /* With threads > 1: the round trip of a cache line between two of this process's
     * threads at the start of the run (prof_core_round_trip_ns; NAN when it could not be
     * measured), i.e. whether the CPUs the split ops run on share a cache. NAN at 1 thread
     * (nothing measured, nothing to record). */
    double core_round_trip_ns;
    int resumed_partial;         /* the checkpoint was taken inside a logging interval (a stop):
                                  * train_loss/train_acc/lr logged at resumed_step were that
                                  * interval's partial mean and are logged again later */
} eng_run_info;

typedef struct {
    eng_run_status status;
    const char *error;           /* NULL unless failed/diverged/interrupted */
    long steps;
    int epochs;
    double wall_s, hybrid_s;
    double final_train_loss, best_train_loss;
    double final_test_loss, final_test_acc, best_test_acc; /* NAN where not measured */
    double samples_per_s;
    long steps_to_target;        /* -1 if the target loss was not reached (or none set) */
    double wall_to_target, hybrid_to_target;
    size_t peak_bytes;           /* engine allocations (prof_mem) */
    size_t peak_rss;             /* process peak RSS, bytes */
    long gemm_unprepared_calls;  /* GEMM calls of the run on a shape class nothing measured */
    /* The run's training steps (evaluation not included; a resumed run's include those before
     * its checkpoint, kept by records of format 3 on, docs/quantization.md): how many, their time,
     * the jobs they split over the worker pool (0 at one thread), and how long the training
     * thread waited at the jobs' ends for the other threads' slabs: the hand-over and the
     * imbalance between the slabs, what two threads lose beside the work */
    struct {
        long steps, joins;
        double step_s, wait_s;
    } pool;
    long solves, quantum_solves; /* Newton only */
    double kappa_first, kappa_last; /* mean routing kappa estimate at first/last Newton step; NAN otherwise */
    long checkpoints;            /* checkpoints handed to the sink by this process */
    size_t checkpoint_bytes;     /* bytes of one checkpoint record */
    double checkpoint_s;         /* time spent serialising and in the sink's checkpoint callback */
} eng_run_result;

/* A run's state as one opaque byte record (engine/checkpoint.c: magic, version, checksum,
 * parameters, optimizer state, loop state). A store keeps it as it is; eng_run_resume and
 * eng_run_load_params read it back. */
typedef struct {
    long step;                   /* steps done when it was taken */
    int epoch;                   /* epochs done */
    const void *data;            /* valid during the callback only */
    size_t len;
} eng_checkpoint;

/* Per-layer telemetry of one log step, sent as ONE record: values[i] is the point for
 * keys[i]. Keys: grad_norm/T, grad_mean/T, grad_std/T, grad_max/T (the raw gradient of
 * tensor T, before any transform; grad_max = max |g|), update_ratio/T (||dw|| / ||w||
 * of the step's update, w before it) with T = "dense1.W", "dense1.b", "conv1.W", ...; and
 * zero_frac/L, the share of exactly-zero outputs of activation layer L in the step's batch. */
typedef struct {
    long step;
    int epoch;
    double wall_s, hybrid_s;
    size_t n;
    const char *const *keys;
    const double *values;
} eng_telemetry;

struct qm_solve_event; /* quantum/quantum.h */

/* A run reports through a sink; each callback may be NULL. A non-zero return from
 * run_begin/metric/op_stats/solver stops the run with ENG_ESINK (set eng_fail() first).
 * Callbacks run on the training thread. */
typedef struct eng_sink {
    void *ud;
    int (*run_begin)(void *ud, const eng_run_info *info);
    int (*metric)(void *ud, const eng_metric *m);
    /* Profiler rows once per run, at the end, before run_end (only when profiling). */
    int (*op_stats)(void *ud, const prof_row *rows, size_t n, const prof_summary *sum);
    int (*solver)(void *ud, const struct qm_solve_event *ev);
    /* Layer telemetry every log_every steps when train.telemetry is on (one call per step). */
    int (*telemetry)(void *ud, const eng_telemetry *t);
    /* Progress, every step: cheap, for progress lines and live views. */
    void (*progress)(void *ud, long step, long total_steps, int epoch, double loss, double samples_per_s);
    void (*run_end)(void *ud, const eng_run_result *res);
    /* The op rows so far (by scope), for live views: between steps, at most every
     * ops_live_every_s seconds (0: never), only when profiling. The rows are the engine's:
     * copy what you keep. Live views read the profiler this way, never directly. */
    void (*ops_live)(void *ud, const prof_row *rows, size_t n);
    double ops_live_every_s;
    /* A checkpoint, every train.checkpoint_every steps (0: each epoch), at the end and when
     * a stop is honoured; not for newton runs. Non-zero stops the run with ENG_ESINK. */
    int (*checkpoint)(void *ud, const eng_checkpoint *ck);
} eng_sink;

typedef struct eng_run eng_run;
/* Loads the data and builds model and optimizer for one config; prof may be NULL.
 * Free with eng_run_destroy. */
int eng_run_create(const eng_config *cfg, const char *experiment_text, prof_t *prof,
                   eng_run **out);
/* Trains to the end (or divergence, or a stop request); sink may be NULL. Returns ENG_OK,
 * ENG_EDIVERGED ("diverged at step N: loss is nan"), ENG_ESTOPPED, ENG_ESINK, ... The
 * result (also passed to run_end) stays readable until eng_run_destroy. */
int eng_run_train(eng_run *r, const eng_sink *sink);
const eng_run_result *eng_run_result_get(const eng_run *r);
/* Before eng_run_train: continue from a checkpoint of this run's config (same seed,
 * model, optimizer, data and batch). The run then trains from the checkpoint's step on and
 * logs exactly what the uninterrupted run logs from there (bit-identical at 1 thread).
 * ENG_EFORMAT for a corrupt record, ENG_EINVAL when it belongs to another setup. */
int eng_run_resume(eng_run *r, const void *data, size_t len);
/* Loads only the parameters of a checkpoint into the run's model (eval, quantize). */
int eng_run_load_params(eng_run *r, const void *data, size_t len);
/* Mean loss and accuracy (NAN for regression) of the current model on the test set. */
int eng_run_evaluate(eng_run *r, double *loss, double *acc);
/* The run's model and data (owned by the run), for eval and quantization. */
eng_model *eng_run_model(eng_run *r);
const eng_dataset *eng_run_dataset(const eng_run *r);
/* The fingerprint of the run's data ("" for graph data, whose loaders have none yet). */
const char *eng_run_data_fingerprint(const eng_run *r);
/* What loading the data had to say ("data.cache: PATH was damaged (...); rebuilt from the
 * source"), or NULL: for the front end to show once. */
const char *eng_run_data_note(const eng_run *r);
/* Thread- and signal-safe: the run stops at the next step boundary. */
void eng_run_request_stop(eng_run *r);
/* Async-signal-safe, for this whole process from then on: long builds inside
 * eng_run_create (graph generation and loading, CSR building, sampler and partition
 * figures) stop at their next check with ENG_ESTOPPED, so that a stop that arrives before
 * there is a run to stop is honoured within about a second. For `nnbench run`, whose
 * signal ends every variant; a process that starts more runs afterwards does not call it. */
void eng_stop_builds(void);
int eng_builds_stopped(void);
/* ENG_ESTOPPED with "WHAT: stopped while building (stop requested)" in eng_error(). */
int eng_build_stop_error(const char *what);
void eng_run_destroy(eng_run *r);

/* ---- data-parallel training on MPI (engine/dist.c, the only includer of mpi.h) ------ *
 * `mpirun -np N nnbench run FILE`: every rank runs the same variants; each takes its share
 * of every global batch, gradients are averaged with MPI_Allreduce, every rank applies the
 * same update. Rank 0 alone reports: other ranks get eng_dist_sink, which forwards their
 * profile rows to rank 0 and reports nothing else. Without mpirun (or with N = 1) MPI is
 * never initialised and runs are plain single-process runs. */
/* Initialises MPI when this process was started by mpirun with more than one process,
 * first setting the shared-memory transport (dist_transport.c); *rank, *world get 0 and 1
 * otherwise. ENG_EIO with a message when MPI fails, ENG_EINVAL for a bad
 * NNBENCH_MPI_TRANSPORT. */
int eng_dist_init(int *rank, int *world);
int eng_dist_world(void);   /* 1 unless eng_dist_init found a job of N > 1 */
int eng_dist_rank(void);
/* A collective failed or timed out, or the job is being torn down: further variants cannot
 * run. Then eng_dist_finalize aborts the job instead of waiting for the others. */
int eng_dist_broken(void);
/* Async-signal-safe: mpirun is stopping the job (SIGTERM): collectives stop waiting. */
void eng_dist_request_abort(void);
void eng_dist_finalize(int exit_code);
/* The sink of a rank: on rank 0 it wraps inner and adds the other ranks' profile rows (as
 * "rankK:name") to inner's op_stats; on the others it sends its rows to rank 0 and reports
 * nothing. With one process it is inner itself. st lives as long as the sink. */
typedef struct { const eng_sink *inner; } eng_dist_sink_state;
eng_sink eng_dist_sink(const eng_sink *inner, eng_dist_sink_state *st);
/* The shared-memory transport of Open MPI 4's ranks on one machine (dist_transport.c,
 * docs/scale.md "The shared-memory transport"). measure: in the launcher of `--ranks N`,
 * before mpirun starts: unless the user set the transport (Open MPI's variables or
 * NNBENCH_MPI_TRANSPORT) or the cache knows this machine, library and N, each candidate
 * runs in its own mpirun job (`nnbench allreduce --probe`), checked and timed, and the
 * fastest is cached (progress and skipped candidates on stderr); ENG_EINVAL for a bad
 * NNBENCH_MPI_TRANSPORT. probe: that job's work on every rank (eng_dist_init first): the
 * checked 1 MiB all-reduce's median time. note: what this rank runs on and why, for the
 * run's record (empty outside mpirun). */
int eng_mpi_transport_measure(int ranks);
int eng_mpi_transport_probe(double *median_s);
const char *eng_mpi_transport_note(void);
/* What the cache holds for this machine and library, one line per rank count. */
void eng_mpi_transport_cached(char *buf, size_t cap);
/* Collective (every rank calls it): the median over reps of the time of an in-place
 * MPI_Allreduce (sum) of `bytes` of floats, the slowest rank's time each rep. */
int eng_dist_time_allreduce(size_t bytes, int reps, double *median_s);
/* Collective, once per variant before its first step (eng_run_train calls it; a rank
 * whose eng_run_create failed calls it with its message, and a rank whose experiment did
 * not load with cfg NULL): every rank's outcome and a hash of its resolved config (every
 * key, after variant overrides and --set, and the variant's name), waited for at most
 * cfg's dist.timeout_s. ENG_OK when every rank set up the same config; else ENG_EINVAL
 * with, in this order, "mpi: the ranks' configurations differ: train.lr is '0.1' on rank 0
 * but '0.2' on rank 1; ..." (on rank 0; the first differing key) or "mpi: rank 1 could not
 * start: <its message>" (the first failing rank's); ENG_EIO when a rank did not answer.
 * After a rank that leaves (cfg NULL), eng_dist_broken() is true on every rank. */
int eng_dist_agree(const eng_config *cfg, const char *local_error);
/* Collective: returns when every rank has called it (ENG_EIO after dist.timeout_s's
 * default of 30 s, or when the job is being stopped). No-op in one process. */
int eng_dist_barrier(void);

/* Fans one sink's events out to several (NULL entries skipped). */
typedef struct { const eng_sink *sinks[4]; size_t n; } eng_sink_tee;
eng_sink eng_sink_tee_make(eng_sink_tee *tee);

/* The int8 API (engine/int8.h), part of this header for the layers above. */
#include "int8.h"

#endif
