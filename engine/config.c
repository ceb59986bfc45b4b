/* config.c — experiment files: INI (libinih) → validated eng_config per variant, with every
 * error located as FILE:LINE, and the key table that documents every key. */
#include "engine.h"
#include "data/data_internal.h"
#include "graph/graph.h"
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the key table ------------------------------------------------------------------
 * One X-macro list drives the parser and eng_key_docs, so docs/experiments.md's key table cannot
 * drift from what the parser accepts.
 * X(section, key, kind, field, lo, hi, enum-names, enum-values, doc-type, default, help)
 */
/* K_INT_AUTO / K_DBL_AUTO also take "auto", stored as 0 / -1: "the data generator's own
 * default" (engine/data/data_internal.h), resolved once the source is known. */
typedef enum { K_STR, K_U64, K_INT, K_INT_AUTO, K_LONG, K_DBL, K_DBL_AUTO, K_DBL_POS, K_BOOL, K_ENUM, K_LAYERS, K_GRADIENT } key_kind;

static const char *const E_SOURCE[] = { "spirals", "xor", "blobs", "linreg", "polyreg", "sine", "idx", "csv", "graph", "markers", NULL };
static const char *const E_SEQVIEW[] = { "none", "rows", "patches", "pixels", NULL };
static const int V_SEQVIEW[] = { ENG_SEQ_VIEW_NONE, ENG_SEQ_VIEW_ROWS, ENG_SEQ_VIEW_PATCHES, ENG_SEQ_VIEW_PIXELS };
static const int V_SOURCE[] = { ENG_DATA_SPIRALS, ENG_DATA_XOR, ENG_DATA_BLOBS, ENG_DATA_LINREG,
                                ENG_DATA_POLYREG, ENG_DATA_SINE, ENG_DATA_IDX, ENG_DATA_CSV, ENG_DATA_GRAPH, ENG_DATA_MARKERS };
static const char *const E_GSOURCE[] = { "sbm", "rmat", "file", NULL };
static const int V_GSOURCE[] = { ENG_GRAPH_SBM, ENG_GRAPH_RMAT, ENG_GRAPH_FILE };
static const char *const E_GMODE[] = { "sampled", "full", NULL };
static const int V_GMODE[] = { ENG_GRAPH_SAMPLED, ENG_GRAPH_FULL };
static const char *const E_SAMPLER[] = { "twopass", "fused", NULL };
static const int V_SAMPLER[] = { 0, 1 };
static const char *const E_PART[] = { "none", "random", "metis", NULL };
static const int V_PART[] = { ENG_PART_NONE, ENG_PART_RANDOM, ENG_PART_METIS };
static const char *const E_HEADER[] = { "auto", "true", "false", NULL };
static const int V_HEADER[] = { -1, 1, 0 };
/* "auto" (-1) is resolved after the source is known: scale for idx, none otherwise. */
static const char *const E_NORM[] = { "auto", "none", "scale", "standard", "minmax", NULL };
static const int V_NORM[] = { -1, ENG_NORM_NONE, ENG_NORM_SCALE, ENG_NORM_STANDARD, ENG_NORM_MINMAX };
static const char *const E_LOSS[] = { "softmax_xent", "mse", NULL };
static const int V_LOSS[] = { ENG_LOSS_SOFTMAX_XENT, ENG_LOSS_MSE };
static const char *const E_INIT[] = { "auto", "he", "xavier", NULL };
static const int V_INIT[] = { ENG_INIT_AUTO, ENG_INIT_HE, ENG_INIT_XAVIER };
static const char *const E_CONV[] = { "auto", "im2col", "direct", "winograd", "winograd4", "fft", "onednn", NULL };
static const int V_CONV[] = { ENG_CONV_AUTO, ENG_CONV_IM2COL, ENG_CONV_DIRECT, ENG_CONV_WINOGRAD, ENG_CONV_WINOGRAD4,
                              ENG_CONV_FFT, ENG_CONV_ONEDNN };
static const char *const E_OPT[] = { "sgd", "momentum", "adam", "adamw", "newton", NULL };
static const int V_OPT[] = { ENG_OPT_SGD, ENG_OPT_MOMENTUM, ENG_OPT_ADAM, ENG_OPT_ADAMW, ENG_OPT_NEWTON };
static const char *const E_SCHED[] = { "constant", "step", "cosine", "linear", NULL };
static const int V_SCHED[] = { ENG_SCHED_CONSTANT, ENG_SCHED_STEP, ENG_SCHED_COSINE, ENG_SCHED_LINEAR };
static const char *const E_CURV[] = { "hessian", "fisher", "gauss-newton", NULL };
static const int V_CURV[] = { ENG_CURV_HESSIAN, ENG_CURV_FISHER, ENG_CURV_GAUSS_NEWTON };
static const char *const E_BLOCKS[] = { "layer", "full", NULL };
static const int V_BLOCKS[] = { ENG_BLOCKS_LAYER, ENG_BLOCKS_FULL };
static const char *const E_POLICY[] = { "classical", "quantum", "threshold", "hybrid", NULL };
static const int V_POLICY[] = { ENG_QPOLICY_CLASSICAL, ENG_QPOLICY_QUANTUM, ENG_QPOLICY_THRESHOLD, ENG_QPOLICY_HYBRID };
static const char *const E_COMPRESS[] = { "none", "fp16", "int8", NULL };
static const int V_COMPRESS[] = { ENG_COMPRESS_NONE, ENG_COMPRESS_FP16, ENG_COMPRESS_INT8 };
static const char *const E_BALANCE[] = { "even", "measured", NULL };
static const int V_BALANCE[] = { ENG_BALANCE_EVEN, ENG_BALANCE_MEASURED };
static const char *const E_GEMM[] = { "auto", "openblas", "onednn", NULL };
static const int V_GEMM[] = { ENG_GEMM_POLICY_AUTO, ENG_GEMM_POLICY_OPENBLAS, ENG_GEMM_POLICY_ONEDNN };
static const char *const E_READOUT[] = { "none", "tomography", NULL };
static const int V_READOUT[] = { ENG_READOUT_NONE, ENG_READOUT_TOMOGRAPHY };

#define INF HUGE_VAL
#define DSTR ENG_DATA_STR

#define KEYS(X)                                                                                   \
    X("experiment", "name", K_STR, name, 0, 0, NULL, NULL, "text", "(file name)",                 \
      "name of the experiment, shown in summaries and stored with each run")                      \
    X("experiment", "seed", K_U64, seed, 0, 0, NULL, NULL, "integer >= 0", "42",                  \
      "seeds data generation, shuffling and initialisation (`--seed N` overrides it)")           \
    X("experiment", "target_loss", K_DBL, target_loss, 0, INF, NULL, NULL, "number >= 0", "0",    \
      "train loss that counts as reached for steps/time-to-target; 0 = none")                      \
    X("data", "source", K_ENUM, data.source, 0, 0, E_SOURCE, V_SOURCE,                                \
      "spirals, xor, blobs, linreg, polyreg, sine, idx, csv, graph, markers", "spirals",           \
      "synthetic generator, IDX files (MNIST/Fashion-MNIST), a CSV file, a graph ([graph] section), or markers (long sequences of seq_len tokens: are the two flagged ones equal; docs/attention.md)") \
    X("data", "n", K_INT, data.n, 0, 1e9, NULL, NULL, "integer >= 0", "0",                         \
      "synthetic: samples generated (0 = " DSTR(ENG_DATA_DEF_N) "); idx/csv: at most this many training samples (0 = all)") \
    X("data", "n_test", K_INT, data.n_test, 0, 1e9, NULL, NULL, "integer >= 0", "0",               \
      "idx with test files / csv with test_path: at most this many test samples (0 = all)")       \
    X("data", "test_fraction", K_DBL, data.test_fraction, 0, 0.95, NULL, NULL, "number in [0, 0.95]", "0.2", \
      "share of generated (or single-file csv) data held out as the test set")                   \
    X("data", "noise", K_DBL_AUTO, data.noise, 0, INF, NULL, NULL, "number >= 0, or auto", "auto", \
      "synthetic: standard deviation of the noise added; auto = the generator's own: xor "          \
      DSTR(ENG_DATA_DEF_NOISE_XOR) ", spirals " DSTR(ENG_DATA_DEF_NOISE_SPIRALS) ", blobs "         \
      DSTR(ENG_DATA_DEF_NOISE_BLOBS) ", linreg/polyreg/sine " DSTR(ENG_DATA_DEF_NOISE_REG))          \
    X("data", "classes", K_INT_AUTO, data.classes, 2, 1000, NULL, NULL, "integer >= 2, or auto", "auto", \
      "spirals: number of arms (auto = " DSTR(ENG_DATA_DEF_ARMS) "); blobs: number of classes (auto = " \
      DSTR(ENG_DATA_DEF_BLOB_CLASSES) ")")                                                         \
    X("data", "features", K_INT_AUTO, data.features, 1, 100000, NULL, NULL, "integer >= 1, or auto", "auto", \
      "blobs/linreg/polyreg: input dimension; auto = blobs " DSTR(ENG_DATA_DEF_BLOB_FEATURES)        \
      ", linreg " DSTR(ENG_DATA_DEF_LINREG_FEATURES) ", polyreg " DSTR(ENG_DATA_DEF_POLY_FEATURES))  \
    X("data", "degree", K_INT_AUTO, data.degree, 1, 20, NULL, NULL, "integer in [1, 20], or auto", "auto", \
      "polyreg: degree of the polynomial (auto = " DSTR(ENG_DATA_DEF_DEGREE) ")")                  \
    X("data", "path", K_STR, data.path, 0, 0, NULL, NULL, "path", "",                              \
      "idx: training images file, or a directory holding the four standard files; csv: the file; "  \
      "this and the other relative data paths are looked up next to the experiment file first, then in the current directory") \
    X("data", "labels", K_STR, data.labels, 0, 0, NULL, NULL, "path", "",                          \
      "idx: training labels file (not needed when path is a directory)")                          \
    X("data", "test_path", K_STR, data.test_path, 0, 0, NULL, NULL, "path", "",                    \
      "idx: test images file; csv: optional separate test file")                                   \
    X("data", "test_labels", K_STR, data.test_labels, 0, 0, NULL, NULL, "path", "",               \
      "idx: test labels file")                                                                      \
    X("data", "label_column", K_INT, data.label_column, -1, 100000, NULL, NULL, "integer >= -1", "-1", \
      "csv: 0-based column of the target; -1 = the last column")                                   \
    X("data", "header", K_ENUM, data.header, 0, 0, E_HEADER, V_HEADER, "auto, true, false", "auto", \
      "csv: whether the first row is a header; auto = detect")                                    \
    X("data", "regression", K_BOOL, data.regression, 0, 0, NULL, NULL, "boolean", "false",         \
      "csv: the target is a real value (true) or a class index (false)")                          \
    X("data", "skip_rows", K_INT, data.skip_rows, 0, 1000000, NULL, NULL, "integer >= 0", "0",      \
      "csv: lines to skip at the start of the file (and of test_path) before the header or data, e.g. 1 for a leading counts line") \
    X("data", "stratify", K_BOOL, data.stratify, 0, 0, NULL, NULL, "boolean", "false",             \
      "classification: split test_fraction per class, so the test set keeps each class's share") \
    X("data", "normalize", K_ENUM, data.normalize, 0, 0, E_NORM, V_NORM,                              \
      "auto, none, scale, standard, minmax", "auto",                                                \
      "input scaling per feature, statistics from the training set: scale = x / max|x| (idx: x/255); standard = z-score; minmax = to [0, 1]; auto = scale for idx, standard for csv, none for generated data") \
    X("data", "shuffle", K_BOOL, data.shuffle, 0, 0, NULL, NULL, "boolean", "true",                \
      "reshuffle the training set every epoch")                                                    \
    X("data", "prefetch", K_BOOL, data.prefetch, 0, 0, NULL, NULL, "boolean", "false",             \
      "gather the next batch on a second thread while the current one trains")                     \
    X("data", "prefetch_depth", K_INT, data.prefetch_depth, 1, ENG_PREFETCH_MAX, NULL, NULL,          \
      "integer in [1, " DSTR(ENG_PREFETCH_MAX) "]", "1",                                                \
      "with prefetch: how many batches the prefetch thread may have ready ahead of training")    \
    X("data", "cache", K_BOOL, data.cache, 0, 0, NULL, NULL, "boolean", "false",                   \
      "idx/csv: write the decoded, normalised dataset once to a cache file ($NNBENCH_CACHE_DIR, else $XDG_CACHE_HOME/nnbench, else ~/.cache/nnbench) and memory-map it on later runs, checksummed; rebuilt when a source file's size or mtime or a key that shapes the data changes, or when the file is damaged (docs/data.md)") \
    X("data", "augment", K_STR, data.augment, 0, 0, NULL, NULL, "shift:N, flip, or none", "none", \
      "image data: on-the-fly transforms of each training row as it is gathered (on the prefetch thread when prefetch is on): random shift by up to N pixels, random horizontal flip; deterministic per seed") \
    X("data", "sequence", K_ENUM, data.sequence, 0, 0, E_SEQVIEW, V_SEQVIEW, "none, rows, patches, pixels", "none", \
      "image data read as a sequence for embed/encoder layers: rows (28 positions of 28 pixels for Fashion-MNIST), patches (4x4: 49 positions of 16), pixels (784 positions of 1)") \
    X("data", "seq_len", K_INT, data.seq_len, 8, 65536, NULL, NULL, "integer in [8, 65536]", "1024", \
      "markers: positions per sample (the two flagged ones lie in the first and the last quarter)") \
    X("data", "read_mbps", K_DBL, data.read_mbps, 0, INF, NULL, NULL, "number >= 0", "0",          \
      "throttle the batch source to this rate in MB/s (1e6 bytes of gathered rows), to study input-bound training; 0 = unthrottled") \
    X("data", "read_latency_ms", K_DBL, data.read_latency_ms, 0, 1e5, NULL, NULL, "number >= 0", "0", \
      "a fixed latency per batch read from the source, in ms (with or instead of read_mbps)")      \
    X("model", "layers", K_LAYERS, model, 0, 0, NULL, NULL, "layer list", "(required)",            \
      "comma-separated: dense:UNITS[:ACT], conv:FILTERS:KERNEL[:ACT][:pad=P][:stride=S][:algo=A] (defaults pad=0, stride=1, A = model.conv_algo), pool (2x2 max), avgpool[:K[:S]] (KxK mean, default 2, stride K), gap (mean per channel), flatten, bn[:ACT] (batch normalization), res(LAYERS)[:ACT] (residual block: shortcut added to LAYERS' output before ACT; a 1x1 projection when the shape changes); ACT = relu, tanh, sigmoid, gelu, none (dense also maxkK: keep the K largest per row, then a dense layer); sage:UNITS[:ACT] = GraphSAGE (data.source = graph); sequence layers embed:D, posenc[:learned], layernorm, encoder[:heads=H][:ff=F], meanpool (docs/attention.md); LAYER * N repeats a layer; the last layer gives the outputs") \
    X("model", "attention", K_STR, model.attention, 0, 0, NULL, NULL, "full, linformer:k=K, lsh:buckets=B:rounds=R", "full",  \
      "how encoder layers attend: full softmax(QK^T)V, Linformer (keys and values projected along the sequence to K rows by learned n x K matrices E, F shared by the heads of a layer), or Reformer LSH (shared QK hashed into B buckets by random rotations, R rounds, sorted and chunked: each query attends to its own and the previous chunk); docs/attention.md") \
    X("model", "loss", K_ENUM, model.loss, 0, 0, E_LOSS, V_LOSS, "softmax_xent, mse", "softmax_xent", \
      "softmax cross-entropy (classification) or mean squared error")                              \
    X("model", "init", K_ENUM, model.init, 0, 0, E_INIT, V_INIT, "auto, he, xavier", "auto",         \
      "weight initialisation; auto = He before relu/gelu, Xavier otherwise")                       \
    X("model", "conv_algo", K_ENUM, model.conv_algo, 0, 0, E_CONV, V_CONV, "auto, im2col, direct, winograd, winograd4, fft, onednn", "auto", \
      "how conv layers compute: im2col + sgemm; direct loops (stride 1); winograd = F(2x2,3x3), winograd4 = F(4x4,3x3) (3x3 stride 1); fft (FFTW, stride 1); onednn = oneDNN's convolution primitives (any stride); a layer that cannot run the one asked for uses im2col (the model summary says so); auto times every candidate per conv layer on its shape with the batch when the model is built and keeps the fastest (the model summary names the choice)") \
    X("train", "optimizer", K_ENUM, train.optimizer, 0, 0, E_OPT, V_OPT,                              \
      "sgd, momentum, adam, adamw, newton", "sgd", "the optimizer ([newton] and [quantum] apply to newton)") \
    X("train", "lr", K_DBL_POS, train.lr, 0, INF, NULL, NULL, "number > 0", "0.01",                \
      "learning rate (peak rate when a schedule or warm-up applies)")                              \
    X("train", "momentum", K_DBL, train.momentum, 0, 0.999999, NULL, NULL, "number in [0, 1)", "0.9", \
      "momentum: the velocity decay beta")                                                         \
    X("train", "nesterov", K_BOOL, train.nesterov, 0, 0, NULL, NULL, "boolean", "false",           \
      "momentum: use Nesterov's look-ahead form")                                                  \
    X("train", "beta1", K_DBL, train.beta1, 0, 0.999999, NULL, NULL, "number in [0, 1)", "0.9",   \
      "adam/adamw: first-moment decay")                                                            \
    X("train", "beta2", K_DBL, train.beta2, 0, 0.999999999, NULL, NULL, "number in [0, 1)", "0.999", \
      "adam/adamw: second-moment decay")                                                           \
    X("train", "eps", K_DBL_POS, train.eps, 0, INF, NULL, NULL, "number > 0", "1e-08",             \
      "adam/adamw: denominator epsilon")                                                            \
    X("train", "weight_decay", K_DBL, train.weight_decay, 0, INF, NULL, NULL, "number >= 0", "0",  \
      "adamw: decoupled decay; other optimizers: L2 term added to the gradient")                   \
    X("train", "batch", K_INT, train.batch, 0, 1e8, NULL, NULL, "integer >= 0", "32",              \
      "minibatch size; 0 = full batch (the whole training set each step)")                        \
    X("train", "epochs", K_INT, train.epochs, 0, 1e8, NULL, NULL, "integer >= 0", "10",            \
      "passes over the training set (ignored when max_steps > 0)")                                 \
    X("train", "max_steps", K_LONG, train.max_steps, 0, 1e12, NULL, NULL, "integer >= 0", "0",     \
      "if > 0: train exactly this many steps, however many epochs that takes")                    \
    X("train", "schedule", K_ENUM, train.schedule, 0, 0, E_SCHED, V_SCHED,                            \
      "constant, step, cosine, linear", "constant", "learning-rate schedule after warm-up")        \
    X("train", "warmup", K_LONG, train.warmup, 0, 1e12, NULL, NULL, "integer >= 0", "0",           \
      "linear warm-up steps (with any schedule)")                                                   \
    X("train", "step_size", K_LONG, train.step_size, 0, 1e12, NULL, NULL, "integer >= 0", "0",     \
      "step schedule: multiply the rate by gamma every step_size steps (required for step)")      \
    X("train", "gamma", K_DBL_POS, train.gamma, 0, INF, NULL, NULL, "number > 0", "0.1",          \
      "step schedule: decay factor")                                                                \
    X("train", "min_lr", K_DBL, train.min_lr, 0, INF, NULL, NULL, "number >= 0", "0",              \
      "cosine/linear schedules: the floor the rate decays to")                                     \
    X("train", "threads", K_INT, train.threads, 0, 1024, NULL, NULL, "integer >= 0", "0",         \
      "OpenBLAS threads; 0 = as the environment sets them (OPENBLAS_NUM_THREADS)")                 \
    X("train", "gemm", K_ENUM, train.gemm, 0, 0, E_GEMM, V_GEMM, "auto, openblas, onednn", "auto",  \
      "fp32 GEMM backend: auto = per shape class, the fastest one that passed its check on this machine "\
      "(measured once, cached); openblas or onednn force one (a backend that fails its check is skipped with a note)") \
    X("train", "eval_every", K_INT, train.eval_every, 0, 1e9, NULL, NULL, "integer >= 0", "0",    \
      "steps between test-set evaluations; 0 = at the end of each epoch (always also at the end)") \
    X("train", "log_every", K_INT, train.log_every, 1, 1e9, NULL, NULL, "integer >= 1", "1",      \
      "steps between logged train_loss/train_acc/lr points (each the mean over those steps)")     \
    X("train", "checkpoint_every", K_LONG, train.checkpoint_every, 0, 1e12, NULL, NULL, "integer >= 0", "0", \
      "steps between checkpoints stored with the run (for resume, eval, quantize); 0 = at the end of each epoch; always also at the end") \
    X("train", "gradient", K_GRADIENT, train.n_gradient, 0, 0, NULL, NULL,                          \
      "none, or a list of znorm, centralize, clip_norm, clip_value", "none",                        \
      "gradient transforms between backward and the optimizer step, applied in the order given (e.g. centralize, clip_norm)") \
    X("train", "znorm_eps", K_DBL_POS, train.znorm_eps, 0, INF, NULL, NULL, "number > 0", "1e-08", \
      "znorm: g = (g - mean) / (std + eps) per parameter tensor (tensors of one element are left alone)") \
    X("train", "clip_norm", K_DBL_POS, train.clip_norm, 0, INF, NULL, NULL, "number > 0", "1",     \
      "clip_norm: scale all gradients so their global L2 norm is at most this")                   \
    X("train", "clip_value", K_DBL_POS, train.clip_value, 0, INF, NULL, NULL, "number > 0", "1",   \
      "clip_value: clamp each gradient element to [-clip_value, clip_value]")                     \
    X("train", "telemetry", K_BOOL, train.telemetry, 0, 0, NULL, NULL, "boolean", "false",         \
      "every log_every steps store per-tensor grad_norm, grad_mean, grad_std, grad_max, update_ratio and per-activation zero_frac") \
    X("newton", "curvature", K_ENUM, newton.curvature, 0, 0, E_CURV, V_CURV,                          \
      "hessian, fisher, gauss-newton", "hessian", "curvature matrix of each block")               \
    X("newton", "blocks", K_ENUM, newton.blocks, 0, 0, E_BLOCKS, V_BLOCKS, "layer, full", "layer",   \
      "one block per parameter tensor (weights, biases) or one block for all parameters")         \
    X("newton", "normalization_epsilon", K_DBL, newton.normalization_epsilon, 0, INF, NULL, NULL,   \
      "number >= 0", "0.005", "eps_n: H += (max|H_ij| + damping) * eps_n * I")                     \
    X("newton", "damping", K_DBL, newton.damping, 0, INF, NULL, NULL, "number >= 0", "1e-10",      \
      "added to max|H_ij| in the diagonal shift")                                                   \
    X("newton", "prune_ratio", K_DBL_POS, newton.prune_ratio, 0, 1, NULL, NULL, "number in (0, 1]", "1", \
      "keep the floor(r*n) largest |H_ij| per row for the quantum route; 1 = keep all")           \
    X("newton", "clip", K_DBL_POS, newton.clip, 0, INF, NULL, NULL, "number > 0", "100",           \
      "clip the Newton direction elementwise to +-clip")                                           \
    X("newton", "max_block", K_INT, newton.max_block, 1, 1e6, NULL, NULL, "integer >= 1", "4096", \
      "refuse curvature blocks larger than this (memory guard: n^2 doubles)")                     \
    X("quantum", "policy", K_ENUM, quantum.policy, 0, 0, E_POLICY, V_POLICY,                          \
      "classical, quantum, threshold, hybrid", "hybrid", "how the scheduler routes each linear solve") \
    X("quantum", "kappa_max", K_DBL_POS, quantum.kappa_max, 0, INF, NULL, NULL, "number > 0", "10000", \
      "threshold/hybrid: route quantum only if the estimated condition number is at most this")   \
    X("quantum", "precision", K_DBL_POS, quantum.precision, 0, 1, NULL, NULL, "number in (0, 1]", "0.01", \
      "eps of the simulated quantum solver: relative error of its solution")                      \
    X("quantum", "query_time_ns", K_DBL_POS, quantum.query_time_ns, 0, INF, NULL, NULL, "number > 0", "100", \
      "modelled time of one QLSA query (not known from hardware: a parameter to sweep)")          \
    X("quantum", "readout", K_ENUM, quantum.readout, 0, 0, E_READOUT, V_READOUT, "none, tomography", "none", \
      "none = the paper's assumption; tomography adds O(n/eps^2) circuit repetitions")            \
    X("quantum", "exact_kappa_max_n", K_INT, quantum.exact_kappa_max_n, 0, 1e6, NULL, NULL,         \
      "integer >= 0", "256", "compute the exact condition number for blocks up to this size")      \
    X("dist", "compress", K_ENUM, dist.compress, 0, 0, E_COMPRESS, V_COMPRESS, "none, fp16, int8", "none", \
      "under mpirun: gradients sent as fp32, fp16, or int8 with error feedback (the rounding error is added to the next step's gradient)") \
    X("dist", "balance", K_ENUM, dist.balance, 0, 0, E_BALANCE, V_BALANCE, "even, measured", "even", \
      "under mpirun: split every global batch evenly, or by each rank's measured time per row (a slower rank gets fewer rows; reproducible to float tolerance, not bits)") \
    X("dist", "bucket_kb", K_INT, dist.bucket_kb, 0, 1048576, NULL, NULL, "integer >= 0", "0",     \
      "under mpirun: 0 = one all-reduce of all gradients after backward; N = an all-reduce per N KB of gradients, started as backward finishes them (compress = none only)") \
    X("dist", "timeout_s", K_DBL_POS, dist.timeout_s, 0, 86400, NULL, NULL, "number > 0", "30",     \
      "under mpirun: a collective the other ranks do not join in this many seconds fails the run (a rank died or hangs)") \
    X("profile", "enabled", K_BOOL, profile.enabled, 0, 0, NULL, NULL, "boolean", "false",         \
      "profile every op (as `--profile` does)")                                                     \
    X("profile", "counters", K_STR, profile.counters, 0, 0, NULL, NULL, "PAPI event list", "",     \
      "comma-separated PAPI events to count; empty = the default set (where the machine has them)") \
    X("monitor", "metrics", K_STR, monitor.metrics, 0, 0, NULL, NULL, "HOST:PORT[,PORT...]", "",   \
      "serve Prometheus /metrics there while training (as `--metrics`); rank k of mpirun serves on PORT+k or the k-th PORT; empty = off") \
    X("monitor", "tensorboard", K_STR, monitor.tensorboard, 0, 0, NULL, NULL, "path", "",          \
      "write TensorBoard event files under this directory while training (rank 0); empty = off") \
    GRAPH_KEYS(X)

/* [graph] (issue 16, docs/graphs.md): only read when data.source = graph. */
#define GRAPH_KEYS(X)                                                                             \
    X("graph", "source", K_ENUM, graph.source, 0, 0, E_GSOURCE, V_GSOURCE, "sbm, rmat, file", "sbm", \
      "stochastic block model, R-MAT (a,b,c = 0.57,0.19,0.19), or edge/feature/label files")      \
    X("graph", "nodes", K_INT, graph.nodes, 2, 1e8, NULL, NULL, "integer >= 2", "3000", "sbm: number of nodes") \
    X("graph", "classes", K_INT, graph.classes, 2, 1000, NULL, NULL, "integer >= 2", "4",         \
      "sbm: communities (= classes); rmat: random labels in this many classes")                   \
    X("graph", "features", K_INT, graph.features, 1, 100000, NULL, NULL, "integer >= 1", "16",    \
      "sbm/rmat: features per node")                                                              \
    X("graph", "degree", K_DBL_POS, graph.degree, 0, INF, NULL, NULL, "number > 0", "10", "sbm: mean degree of a node") \
    X("graph", "homophily", K_DBL, graph.homophily, 0, 1, NULL, NULL, "number in [0, 1]", "0.8",  \
      "sbm: share of each node's edges inside its community")                                     \
    X("graph", "noise", K_DBL, graph.noise, 0, INF, NULL, NULL, "number >= 0", "2",               \
      "sbm: feature noise std around the community centroids (N(0,1) each): the difficulty knob") \
    X("graph", "scale", K_INT, graph.scale, 1, 30, NULL, NULL, "integer in [1, 30]", "14", "rmat: the graph has 2^scale nodes") \
    X("graph", "edge_factor", K_INT, graph.edge_factor, 1, 1024, NULL, NULL, "integer >= 1", "16", \
      "rmat: edges drawn per node")                                                              \
    X("graph", "edges", K_STR, graph.edges, 0, 0, NULL, NULL, "path", "",                          \
      "file: edge list, one 'src,dst' per line (comma, tab or blanks; optional header)")           \
    X("graph", "node_features", K_STR, graph.node_features, 0, 0, NULL, NULL, "path", "",          \
      "file: one row of numbers per node, in id order")                                            \
    X("graph", "labels", K_STR, graph.labels, 0, 0, NULL, NULL, "path", "",                        \
      "file: one class per line in node order, or 'node,label' lines")                            \
    X("graph", "train_mask", K_STR, graph.train_mask, 0, 0, NULL, NULL, "path", "",                \
      "file: node ids of the training set, one per line (with val_mask/test_mask; else a random split)") \
    X("graph", "val_mask", K_STR, graph.val_mask, 0, 0, NULL, NULL, "path", "", "file: validation node ids") \
    X("graph", "test_mask", K_STR, graph.test_mask, 0, 0, NULL, NULL, "path", "", "file: test node ids") \
    X("graph", "undirected", K_BOOL, graph.undirected, 0, 0, NULL, NULL, "boolean", "true",      \
      "file: add the reverse of every edge")                                                      \
    X("graph", "train_fraction", K_DBL, graph.train_fraction, 0, 1, NULL, NULL, "number in (0, 1)", "0.6", \
      "random split: share of nodes for training (seeded)")                                      \
    X("graph", "val_fraction", K_DBL, graph.val_fraction, 0, 1, NULL, NULL, "number in [0, 1)", "0.2", \
      "random split: share for validation; the rest is the test set")                            \
    X("graph", "mode", K_ENUM, graph.mode, 0, 0, E_GMODE, V_GMODE, "sampled, full", "sampled",     \
      "sampled = minibatches of train.batch seed nodes over sampled blocks; full = the whole graph each step") \
    X("graph", "fanouts", K_STR, graph.fanouts, 0, 0, NULL, NULL, "comma-separated integers", "10,5", \
      "neighbours sampled per node, one per sage layer, input layer first (as DGL)")               \
    X("graph", "sampler", K_ENUM, graph.sampler, 0, 0, E_SAMPLER, V_SAMPLER, "twopass, fused", "fused", \
      "twopass = sample_neighbors then to_block (DGL-style baseline); fused = one pass (FastSample-style)") \
    X("graph", "partition", K_ENUM, graph.partition, 0, 0, E_PART, V_PART, "none, random, metis", "none", \
      "partition the graph and report edge cut and modelled cross-partition traffic per minibatch") \
    X("graph", "parts", K_INT, graph.parts, 2, 1024, NULL, NULL, "integer >= 2", "4", "number of partitions (graph.partition)")

typedef struct {
    const char *section, *key;
    key_kind kind;
    size_t off, size;
    double lo, hi;
    const char *const *enames;
    const int *evals;
    const char *type, *def;
} keydef;

#define DEF_ROW(sec, k, kind, field, lo, hi, en, ev, type, def, help) \
    { sec, k, kind, offsetof(eng_config, field), sizeof(((eng_config *)0)->field), lo, hi, en, ev, type, def },
static const keydef defs[] = { KEYS(DEF_ROW) };
#define NKEYS (sizeof defs / sizeof defs[0])

#define DOC_ROW(sec, k, kind, field, lo, hi, en, ev, type, def, help) \
    { sec "." k, type, def, help },
const eng_key_doc eng_key_docs[] = { KEYS(DOC_ROW) { NULL, NULL, NULL, NULL } };

_Static_assert(sizeof(eng_data_source) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(eng_norm) == sizeof(int), "enums are stored as int");

static const char *const sections[] = { "experiment", "data", "model", "train", "newton",
                                        "quantum", "profile", "graph", "dist", "monitor", NULL };

/* ---- small helpers ----------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static int levenshtein(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

static int find_key(const char *section, const char *key)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(defs[i].section, section) && !strcmp(defs[i].key, key)) return (int)i;
    return -1;
}

static int is_section(const char *s)
{
    for (int i = 0; sections[i]; i++)
        if (!strcmp(sections[i], s)) return 1;
    return 0;
}

/* " (did you mean 'lr'?)" or " (it belongs in [train])" or "" — a hint for an unknown key. */
static void key_hint(char *out, size_t cap, const char *section, const char *key, int qualified)
{
    int best = -1, bestd = 3;
    for (size_t i = 0; i < NKEYS; i++) {
        if (!qualified && strcmp(defs[i].section, section)) continue;
        char full[96];
        snprintf(full, sizeof full, "%s.%s", defs[i].section, defs[i].key);
        int d = levenshtein(key, qualified ? full : defs[i].key);
        if (d < bestd) { bestd = d; best = (int)i; }
    }
    if (best >= 0) {
        if (qualified) snprintf(out, cap, " (did you mean '%s.%s'?)", defs[best].section, defs[best].key);
        else snprintf(out, cap, " (did you mean '%s'?)", defs[best].key);
        return;
    }
    if (!qualified)
        for (size_t i = 0; i < NKEYS; i++)
            if (!strcmp(defs[i].key, key)) {
                snprintf(out, cap, " (it belongs in [%s])", defs[i].section);
                return;
            }
    snprintf(out, cap, " (`nnbench run --keys` lists every key)");
}

/* ---- value parsing ------------------------------------------------------------------ */

static int parse_double(const char *s, double *out)
{
    if (!*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long long *out)
{
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const t[] = { "true", "yes", "on", "1" }, *const f[] = { "false", "no", "off", "0" };
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, t[i])) { *out = 1; return 0; }
        if (!strcasecmp(s, f[i])) { *out = 0; return 0; }
    }
    return -1;
}

static int parse_act(const char *s, eng_act *out)
{
    static const char *const names[] = { "none", "relu", "tanh", "sigmoid", "gelu", "linear" };
    static const eng_act vals[] = { ENG_ACT_NONE, ENG_ACT_RELU, ENG_ACT_TANH, ENG_ACT_SIGMOID, ENG_ACT_GELU, ENG_ACT_NONE };
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, names[i])) { *out = vals[i]; return 0; }
    return -1;
}

/* conv:F:K[:ACT][:pad=P][:stride=S][:algo=A] (options in any order after K) from
 * parts[0..np) into L and *algo (model.layer_algo); -1 with why (the caller adds the
 * layer's number and text). */
#define LAYER_PARTS 7
static int parse_conv(char *const *parts, int np, eng_layer_spec *L, unsigned char *algo, char *why, size_t cap)
{
    long long a = 0, b = 0, v = 0;
    L->kind = ENG_LAYER_CONV;
    L->stride = 1;
    int bad = np < 3 || np > LAYER_PARTS || parse_long(parts[1], &a) || a < 1 || a > 100000 ||
              parse_long(parts[2], &b) || b < 1 || b > 64;
    int seen_act = 0, seen_pad = 0, seen_stride = 0, seen_algo = 0;
    for (int i = 3; i < np && !bad; i++) {
        const char *p = parts[i];
        int is_pad = !strncmp(p, "pad=", 4), is_stride = !strncmp(p, "stride=", 7);
        if (!strncmp(p, "algo=", 5)) {
            /* this layer's model.conv_algo */
            int k = 0;
            while (E_CONV[k] && strcmp(E_CONV[k], p + 5)) k++;
            if (seen_algo++ || !E_CONV[k]) {
                snprintf(why, cap, seen_algo > 1 ? "algo is given twice"
                                                 : "algo must be one of auto, im2col, direct, winograd, winograd4, fft, onednn");
                return -1;
            }
            *algo = (unsigned char)(1 + V_CONV[k]);
            continue;
        }
        if (!is_pad && !is_stride) {
            bad = seen_act++ || parse_act(p, &L->act);
            continue;
        }
        if ((is_pad ? seen_pad++ : seen_stride++)) {
            snprintf(why, cap, "%s is given twice", is_pad ? "pad" : "stride");
            return -1;
        }
        const char *num = p + (is_pad ? 4 : 7);
        if (is_pad && (parse_long(num, &v) || v < 0 || v >= b)) {
            snprintf(why, cap, "pad must be an integer in 0..%lld (less than the kernel: a wider border only adds "
                     "outputs that see nothing but zeros)", b - 1);
            return -1;
        }
        if (is_stride && (parse_long(num, &v) || v < 1 || v > 64)) {
            snprintf(why, cap, "stride must be an integer in 1..64");
            return -1;
        }
        *(is_pad ? &L->pad : &L->stride) = (int)v;
    }
    if (bad) {
        /* the wording of the plain form predates pad and stride; docs/engine.md has both */
        snprintf(why, cap, "expected conv:FILTERS:KERNEL[:ACT] with FILTERS, KERNEL >= 1 and ACT one of relu, tanh, "
                 "sigmoid, gelu, none");
        return -1;
    }
    L->units = (int)a;
    L->kernel = (int)b;
    return 0;
}

/* One layer "dense:16:tanh", "conv:8:5:relu:pad=1", "bn:relu", ... (t is modified) into
 * mc->layers[n]; -1 with why. */
static int parse_layer(char *t, int n, eng_model_config *mc, char *why, size_t cap)
{
    char orig[128];
    copy_str(orig, sizeof orig, t);
    eng_layer_spec *L = &mc->layers[n];
    memset(L, 0, sizeof *L);
    char *parts[LAYER_PARTS + 1] = { 0 };
    int np = 0;
    char *s2 = NULL;
    for (char *p = strtok_r(t, ":", &s2); p && np <= LAYER_PARTS; p = strtok_r(NULL, ":", &s2)) parts[np++] = trim(p);
    long long a = 0, b = 0;
    const char *expect = NULL;
    if (np == 0) expect = "dense:UNITS[:ACT], conv:FILTERS:KERNEL[:ACT], pool or flatten";
    else if (!strcmp(parts[0], "dense") || !strcmp(parts[0], "sage")) {
        L->kind = parts[0][0] == 's' ? ENG_LAYER_SAGE : ENG_LAYER_DENSE;
        /* maxk:K (or maxkK) keeps the K largest of each row: engine/sparse.c */
        if (np == 4 && !strcmp(parts[2], "maxk") && !parse_long(parts[3], &b)) { parts[2] = "maxk"; np = 3; }
        else if (np == 3 && !strncmp(parts[2], "maxk", 4) && parts[2][4] && !parse_long(parts[2] + 4, &b)) parts[2] = "maxk";
        if (np < 2 || np > 3 || parse_long(parts[1], &a) || a < 1 || a > 1000000 ||
            (np == 3 && strcmp(parts[2], "maxk") && parse_act(parts[2], &L->act)) ||
            (np == 3 && !strcmp(parts[2], "maxk") && (b < 1 || b > a)))
            expect = "dense:UNITS[:ACT] (or sage:UNITS[:ACT]) with UNITS >= 1 and ACT one of relu, tanh, sigmoid, gelu, none, maxkK (1 <= K <= UNITS)";
        if (np == 3 && !strcmp(parts[2], "maxk")) { L->act = ENG_ACT_MAXK; L->k = (int)b; }
        L->units = (int)a;
    } else if (!strcmp(parts[0], "conv")) {
        char cw[300];
        if (parse_conv(parts, np, L, &mc->layer_algo[n], cw, sizeof cw)) {
            snprintf(why, cap, "layer %d: %s, got '%s'", n + 1, cw, orig);
            return -1;
        }
    } else if (!strcmp(parts[0], "pool")) {
        L->kind = ENG_LAYER_POOL;
        L->kernel = 2;
        if (np > 2 || (np == 2 && strcmp(parts[1], "2"))) expect = "pool or pool:2 (2x2 max-pool)";
    } else if (!strcmp(parts[0], "avgpool")) {
        /* avgpool[:K[:S]]: KxK mean, stride S (default K); K defaults to 2 */
        L->kind = ENG_LAYER_AVGPOOL;
        L->kernel = 2;
        if (np > 3 || (np >= 2 && (parse_long(parts[1], &a) || a < 1 || a > 64)) ||
            (np == 3 && (parse_long(parts[2], &b) || b < 1 || b > 64)))
            expect = "avgpool, avgpool:K or avgpool:K:S (KxK mean, stride S, default S = K; 1 <= K, S <= 64)";
        if (np >= 2) L->kernel = (int)a;
        L->stride = np == 3 ? (int)b : L->kernel;
    } else if (!strcmp(parts[0], "gap")) {
        L->kind = ENG_LAYER_GAP;
        if (np != 1) expect = "gap (global average pooling: the mean of each channel)";
    } else if (!strcmp(parts[0], "bn")) {
        L->kind = ENG_LAYER_BN;
        if (np > 2 || (np == 2 && parse_act(parts[1], &L->act)))
            expect = "bn or bn:ACT (batch normalization, then ACT one of relu, tanh, sigmoid, gelu, none)";
    } else if (!strcmp(parts[0], "flatten")) {
        L->kind = ENG_LAYER_FLATTEN;
        if (np != 1) expect = "flatten";
    } else {
        char sw[200];
        int rc = eng_seq_layer_parse(parts, np, L, sw, sizeof sw);
        if (rc < 0) { snprintf(why, cap, "layer %d: %s, got '%s'", n + 1, sw, orig); return -1; }
        if (rc > 0)
            expect = "dense:UNITS[:ACT], conv:FILTERS:KERNEL[:ACT], bn[:ACT], res(LAYERS)[:ACT], pool, flatten, or a sequence "
                     "layer (embed:D, posenc, layernorm, encoder, meanpool)";
    }
    if (expect) { snprintf(why, cap, "layer %d: expected %s, got '%s'", n + 1, expect, orig); return -1; }
    if ((L->kind == ENG_LAYER_CONV || L->kind == ENG_LAYER_POOL || L->kind == ENG_LAYER_AVGPOOL ||
         L->kind == ENG_LAYER_GAP) && n > 0) {
        for (int j = 0; j < n; j++)
            if (mc->layers[j].kind == ENG_LAYER_DENSE || mc->layers[j].kind == ENG_LAYER_FLATTEN) {
                snprintf(why, cap, "layer %d: '%s' cannot follow a dense or flatten layer (the data is flat by then)", n + 1, orig);
                return -1;
            }
    }
    return 0;
}

/* "LAYER * N" repeats a layer N times (encoder:heads=4 * 6): cuts " * N" off t and returns
 * N (1 without a star); -1 with why. */
static int parse_repeat(char *t, int n, char *why, size_t cap)
{
    char *star = strchr(t, '*');
    if (!star) return 1;
    long long reps = 0;
    char orig[128];
    copy_str(orig, sizeof orig, t);
    *star = '\0';
    if (parse_long(trim(star + 1), &reps) || reps < 1 || reps > ENG_MAX_LAYERS) {
        snprintf(why, cap, "layer %d: expected LAYER * N with N in 1..%d, got '%s'", n + 1, ENG_MAX_LAYERS, orig);
        return -1;
    }
    char *e = star;
    while (e > t && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
    return (int)reps;
}

/* Residual blocks nest at most this deep. */
#define RES_DEPTH 4

/* The ")[:ACT]" closing a residual block at *pp (just past the ')'): the act, *pp past it. */
static int parse_res_close(char **pp, eng_layer_spec *L, char *why, size_t cap)
{
    char *p = *pp;
    memset(L, 0, sizeof *L);
    L->kind = ENG_LAYER_RES;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == ':') {
        size_t len = strcspn(p + 1, ",)");
        char act[32];
        copy_str(act, sizeof act, p + 1);
        if (len < sizeof act) act[len] = '\0';
        if (len >= sizeof act || parse_act(trim(act), &L->act)) {
            snprintf(why, cap, "a residual block ends with ')' or '):ACT' with ACT one of relu, tanh, sigmoid, gelu, "
                     "none, got ')%.*s'", (int)(len + 1 < 40 ? len + 1 : 40), p);
            return -1;
        }
        p += 1 + len;
    }
    *pp = p;
    return 0;
}

/* Parses "conv:8:3:pad=1, bn:relu, res(conv:8:3:pad=1, bn:relu, conv:8:3:pad=1, bn):relu, gap,
 * dense:10" into mc->layers: a residual block res(...) becomes a RES_BEGIN layer, its
 * layers, and a RES layer carrying the block's activation. */
static int parse_layers(const char *value, eng_model_config *mc, char *why, size_t cap)
{
    memset(mc->layer_algo, 0, sizeof mc->layer_algo); /* a --set layers list replaces the file's */
    char buf[1024];
    copy_str(buf, sizeof buf, value);
    int n = 0, depth = 0, open_at[RES_DEPTH], closed = 0; /* closed: a block just ended at p */
    if (!*trim(buf)) { snprintf(why, cap, "expected a comma-separated layer list (e.g. dense:16:tanh, dense:2), got ''"); return -1; }
    char *p = buf;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!strncmp(p, "res", 3) && p[3 + strspn(p + 3, " \t")] == '(') {
            if (depth == RES_DEPTH) { snprintf(why, cap, "residual blocks nest at most %d deep", RES_DEPTH); return -1; }
            if (n == ENG_MAX_LAYERS) break;
            memset(&mc->layers[n], 0, sizeof mc->layers[n]);
            mc->layers[n].kind = ENG_LAYER_RES_BEGIN;
            open_at[depth++] = n++;
            p = strchr(p, '(') + 1;
            continue;
        }
        size_t len = strcspn(p, ",)");
        char end = p[len];
        p[len] = '\0';
        char *t = trim(p);
        if (*t) {
            if (n == ENG_MAX_LAYERS) break;
            int reps = parse_repeat(t, n, why, cap);
            if (reps < 0 || parse_layer(t, n, mc, why, cap)) return -1;
            if (n + reps > ENG_MAX_LAYERS) { snprintf(why, cap, "at most %d layers, got more", ENG_MAX_LAYERS); return -1; }
            for (int r = 1; r < reps; r++) {
                mc->layers[n + r] = mc->layers[n];
                mc->layer_algo[n + r] = mc->layer_algo[n];
            }
            n += reps;
            closed = 0;
        } else if (n == 0 && !depth) {
            break;  /* reported below as an empty list */
        } else if (end != ')' || !depth || !(closed || open_at[depth - 1] == n - 1)) {
            snprintf(why, cap, "layer %d is empty (two commas in a row, a trailing comma or 'res()')", n + 1);
            return -1;
        }
        p += len;
        if (end == ')') {
            if (!depth) { snprintf(why, cap, "')' after layer %d closes no 'res('", n); return -1; }
            if (open_at[depth - 1] == n - 1) { snprintf(why, cap, "layer %d: a residual block needs at least one layer inside res( )", n); return -1; }
            if (n == ENG_MAX_LAYERS) break;
            p++;
            if (parse_res_close(&p, &mc->layers[n], why, cap)) return -1;
            n++;
            depth--;
            closed = 1;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == ',') { p++; closed = 0; }
            else if (*p && *p != ')') { snprintf(why, cap, "expected ',' after the residual block ending at layer %d, got '%.20s'", n, p); return -1; }
            else if (!*p) break;
            continue;
        }
        if (!end) break;
        p++;
    }
    if (n == ENG_MAX_LAYERS && (*p || depth)) { snprintf(why, cap, "at most %d layers (each res( ) counts 2 besides its layers), got more", ENG_MAX_LAYERS); return -1; }
    if (depth) { snprintf(why, cap, "'res(' opened at layer %d is not closed: add ')'", open_at[depth - 1] + 1); return -1; }
    if (n == 0) { snprintf(why, cap, "expected a comma-separated layer list (e.g. dense:16:tanh, dense:2), got '%s'", value); return -1; }
    if (mc->layers[n - 1].kind != ENG_LAYER_DENSE && mc->layers[n - 1].kind != ENG_LAYER_SAGE) {
        static const char *const kinds[ENG_LAYER_KINDS] = { "dense", "conv", "pool", "flatten", "sage", "avgpool", "gap",
                                                            "sequence", "bn", "res(", "res" };
        snprintf(why, cap, "the last layer must be dense (it gives the outputs), got '%s'", kinds[mc->layers[n - 1].kind]);
        return -1;
    }
    mc->n_layers = n;
    return 0;
}

/* Parses "none" or "centralize, clip_norm" into tc->gradient. */
static int parse_gradient(const char *value, eng_train_config *tc, char *why, size_t cap)
{
    static const char *const names[] = { "znorm", "centralize", "clip_norm", "clip_value" };
    char buf[256];
    copy_str(buf, sizeof buf, value);
    tc->n_gradient = 0;
    if (!strcmp(trim(buf), "none")) return 0;
    char *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *t = trim(tok);
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(t, names[i])) k = i;
        if (k < 0) {
            snprintf(why, cap, "transform %d: expected one of znorm, centralize, clip_norm, clip_value (or none alone), got '%s'", n + 1, t);
            return -1;
        }
        if (n == ENG_MAX_GRAD_TRANSFORMS) { snprintf(why, cap, "at most %d transforms, got more", ENG_MAX_GRAD_TRANSFORMS); return -1; }
        tc->gradient[n++] = (eng_grad_kind)k;
    }
    if (n == 0) { snprintf(why, cap, "expected none or a comma-separated list such as 'centralize, clip_norm', got '%s'", value); return -1; }
    tc->n_gradient = n;
    return 0;
}

/* Applies one key's value to c. On error writes the "expected ..., got '...'" part to why. */
static int apply_key(eng_config *c, const keydef *d, const char *value, char *why, size_t cap)
{
    char *dst = (char *)c + d->off;
    double x;
    long long v;
    int b;
    switch (d->kind) {
    case K_STR:
        if (strlen(value) >= d->size) { snprintf(why, cap, "expected at most %zu characters, got %zu", d->size - 1, strlen(value)); return -1; }
        if (d->off == offsetof(eng_config, name)) {
            /* The name is shown in tables, terminals and reports: it stays plain text. */
            const char *bad = prof_text_find_unsafe(value);
            if (bad) {
                char one[5] = "", shown[16];
                size_t l = prof_utf8_decode(bad, strlen(bad), NULL);
                memcpy(one, bad, l ? l : 1);
                prof_text_visible(shown, sizeof shown, one);
                snprintf(why, cap, "a name may not hold control, bidirectional or non-UTF-8 characters; "
                         "'%s' at byte %zu", shown, (size_t)(bad - value) + 1);
                return -1;
            }
        }
        memcpy(dst, value, strlen(value) + 1);
        return 0;
    case K_U64: {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(value, &end, 10);
        if (!*value || *end || errno == ERANGE || value[0] == '-') break;
        uint64_t u64 = u;
        memcpy(dst, &u64, sizeof u64);
        return 0;
    }
    case K_INT_AUTO:
        if (!strcmp(value, "auto")) { int zero = 0; memcpy(dst, &zero, sizeof zero); return 0; }
        /* fall through */
    case K_INT:
    case K_LONG:
        if (parse_long(value, &v) || (double)v < d->lo || (double)v > d->hi) break;
        if (d->kind != K_LONG) { int iv = (int)v; memcpy(dst, &iv, sizeof iv); }
        else { long lv = (long)v; memcpy(dst, &lv, sizeof lv); }
        return 0;
    case K_DBL_AUTO:
        if (!strcmp(value, "auto")) { x = -1; memcpy(dst, &x, sizeof x); return 0; }
        /* fall through */
    case K_DBL:
        if (parse_double(value, &x) || x < d->lo || x > d->hi) break;
        memcpy(dst, &x, sizeof x);
        return 0;
    case K_DBL_POS:
        if (parse_double(value, &x) || x <= d->lo || x > d->hi) break;
        memcpy(dst, &x, sizeof x);
        return 0;
    case K_BOOL:
        if (parse_bool(value, &b)) break;
        memcpy(dst, &b, sizeof b);
        return 0;
    case K_ENUM:
        for (int i = 0; d->enames[i]; i++)
            if (!strcmp(value, d->enames[i])) { memcpy(dst, &d->evals[i], sizeof(int)); return 0; }
        break;
    case K_LAYERS:
        return parse_layers(value, &c->model, why, cap);
    case K_GRADIENT:
        return parse_gradient(value, &c->train, why, cap);
    }
    /* The message names what was expected in words. */
    const char *what;
    char tmp[160];
    switch (d->kind) {
    case K_U64: what = "a non-negative integer"; break;
    case K_INT: case K_INT_AUTO: case K_LONG:
        if (d->hi >= 1e8) snprintf(tmp, sizeof tmp, d->lo == 0 ? "a non-negative integer" : d->lo == 1 ? "a positive integer" : "an integer >= %g", d->lo);
        else snprintf(tmp, sizeof tmp, "an integer in [%g, %g]", d->lo, d->hi);
        what = tmp; break;
    case K_DBL: case K_DBL_AUTO:
        if (d->hi == INF) what = "a number >= 0";
        else { snprintf(tmp, sizeof tmp, "a number in [%g, %g]", d->lo, d->hi); what = tmp; }
        break;
    case K_DBL_POS:
        if (d->hi == INF) what = "a positive number";
        else { snprintf(tmp, sizeof tmp, "a number in (0, %g]", d->hi); what = tmp; }
        break;
    case K_BOOL: what = "true or false"; break;
    case K_ENUM: snprintf(tmp, sizeof tmp, "one of %s", d->type); what = tmp; break;
    default: what = "a valid value"; break;
    }
    snprintf(why, cap, "expected %s%s, got '%s'", what,
             d->kind == K_INT_AUTO || d->kind == K_DBL_AUTO ? " or auto" : "", value);
    return -1;
}

/* ---- parse state -------------------------------------------------------------------- */

typedef struct { int key; char value[1024]; int line; } setting;

#define MAX_LINE 4000

typedef struct {
    char name[64];
    int line;
    setting *s;
    size_t n, cap;
} variant;

typedef struct {
    const char *path;
    const char *text;
    size_t pos;
    int line;               /* line number of the line most recently handed to inih */
    int line_indented;      /* that line starts with whitespace (an inih continuation) */
    int prev_ended;         /* the previous chunk ended with '\n' */
    size_t line_len;        /* characters of the current line handed over so far */
    /* current section: -2 none yet, -1 a known section (sec_name), >= 0 a variant index */
    int cur;
    char sec_name[32];
    int last_key, last_var; /* for continuation lines */
    setting base[NKEYS];
    int base_set[NKEYS];
    variant *vars;
    size_t n_vars, cap_vars;
    int err;                /* first error: code, message in eng_error() */
} parse_state;

static int fail_at(parse_state *st, int code, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(parse_state *st, int code, int line, const char *fmt, ...)
{
    if (st->err) return 0;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    st->err = eng_fail(code, "%s:%d: %s", st->path, line, msg);
    return 0;
}

static int valid_variant_name(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_-.+", *s)) return 0;
    return 1;
}

/* Sees each line before inih does, so it knows the line number (Debian's libinih is built
 * without INI_HANDLER_LINENO) and every section header, including empty [variant] ones that
 * inih never reports. */
static void on_section_line(parse_state *st, const char *raw)
{
    char buf[512];
    copy_str(buf, sizeof buf, raw);
    char *s = trim(buf);
    char *close = strchr(s, ']');
    if (!close) return; /* inih reports the syntax error */
    *close = '\0';
    char *name = trim(s + 1);
    if (!strncmp(name, "variant", 7) && (name[7] == '\0' || isspace((unsigned char)name[7]))) {
        char *vn = trim(name + 7);
        if (!*vn) { fail_at(st, ENG_EINVAL, st->line, "[variant] needs a name: [variant NAME]"); return; }
        if (!valid_variant_name(vn) || strlen(vn) >= sizeof st->vars[0].name) {
            fail_at(st, ENG_EINVAL, st->line, "variant name '%s': expected letters, digits, '_', '-', '.', '+' (at most 63), got '%s'", vn, vn);
            return;
        }
        for (size_t i = 0; i < st->n_vars; i++)
            if (!strcmp(st->vars[i].name, vn)) {
                fail_at(st, ENG_EINVAL, st->line, "variant '%s' is defined twice (first at line %d)", vn, st->vars[i].line);
                return;
            }
        if (st->n_vars == st->cap_vars) {
            size_t nc = st->cap_vars ? 2 * st->cap_vars : 8;
            variant *nv = realloc(st->vars, nc * sizeof *nv);
            if (!nv) { st->err = eng_fail(ENG_ENOMEM, "out of memory"); return; }
            st->vars = nv;
            st->cap_vars = nc;
        }
        variant *v = &st->vars[st->n_vars];
        memset(v, 0, sizeof *v);
        copy_str(v->name, sizeof v->name, vn);
        v->line = st->line;
        st->cur = (int)st->n_vars++;
        return;
    }
    if (!is_section(name)) {
        int best = -1, bestd = 3;
        for (int i = 0; sections[i]; i++) {
            int d = levenshtein(name, sections[i]);
            if (d < bestd) { bestd = d; best = i; }
        }
        if (best >= 0) fail_at(st, ENG_EINVAL, st->line, "unknown section [%s] (did you mean [%s]?)", name, sections[best]);
        else fail_at(st, ENG_EINVAL, st->line, "unknown section [%s] (sections: experiment, data, model, train, newton, quantum, profile, graph, dist, monitor, variant NAME)", name);
        return;
    }
    st->cur = -1;
    copy_str(st->sec_name, sizeof st->sec_name, name);
}

static char *reader(char *str, int num, void *stream)
{
    parse_state *st = stream;
    if (st->err || !st->text[st->pos]) return NULL;
    const char *start = st->text + st->pos;
    const char *nl = strchr(start, '\n');
    size_t len = nl ? (size_t)(nl - start) + 1 : strlen(start);
    if (st->prev_ended) {
        st->line++;
        st->line_len = 0;
        st->line_indented = (*start == ' ' || *start == '\t');
        size_t i = 0;
        while (start[i] == ' ' || start[i] == '\t') i++;
        if (start[i] == '[') {
            char raw[512];
            size_t n = len < sizeof raw - 1 ? len : sizeof raw - 1;
            memcpy(raw, start, n);
            raw[n] = '\0';
            on_section_line(st, raw);
        }
    }
    if (len > (size_t)num - 1) len = (size_t)num - 1; /* inih grows its buffer and asks again */
    st->line_len += len;
    if (st->line_len > MAX_LINE) {
        fail_at(st, ENG_EINVAL, st->line, "line is longer than %d characters", MAX_LINE);
        return NULL;
    }
    memcpy(str, start, len);
    str[len] = '\0';
    st->pos += len;
    st->prev_ended = (len && start[len - 1] == '\n') || !st->text[st->pos];
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    parse_state *st = user;
    (void)section; /* the reader tracked it, with the full variant name */
    if (st->err) return 0;
    char val[1024];
    copy_str(val, sizeof val, value ? value : "");
    char *v = trim(val);
    if (st->cur == -2)
        return fail_at(st, ENG_EINVAL, st->line, "key '%s' is outside any section; put it under [experiment], [data], [model], [train], ...", name);

    int k;
    setting *slot;
    if (st->cur == -1) {
        k = find_key(st->sec_name, name);
        if (k < 0) {
            char hint[160];
            key_hint(hint, sizeof hint, st->sec_name, name, 0);
            return fail_at(st, ENG_EINVAL, st->line, "unknown key '%s' in [%s]%s", name, st->sec_name, hint);
        }
        slot = &st->base[k];
        if (st->base_set[k]) {
            if (!(st->line_indented && st->last_key == k && st->last_var == -1))
                return fail_at(st, ENG_EINVAL, st->line, "key '%s' is set twice in [%s] (first at line %d)", name, st->sec_name, slot->line);
        }
    } else {
        variant *var = &st->vars[st->cur];
        char qual[128];
        copy_str(qual, sizeof qual, name);
        char *dot = strchr(qual, '.');
        if (!dot) {
            char hint[160] = "";
            for (size_t i = 0; i < NKEYS && !hint[0]; i++)
                if (!strcmp(defs[i].key, name)) snprintf(hint, sizeof hint, " (did you mean '%s.%s'?)", defs[i].section, defs[i].key);
            if (!hint[0]) key_hint(hint, sizeof hint, "", name, 1);
            return fail_at(st, ENG_EINVAL, st->line, "key '%s' in [variant %s] must name its section, as section.key%s", name, var->name, hint);
        }
        *dot = '\0';
        k = find_key(qual, dot + 1);
        if (k < 0) {
            char hint[160];
            key_hint(hint, sizeof hint, "", name, 1);
            return fail_at(st, ENG_EINVAL, st->line, "unknown key '%s' in [variant %s]%s", name, var->name, hint);
        }
        slot = NULL;
        for (size_t i = 0; i < var->n; i++)
            if (var->s[i].key == k) slot = &var->s[i];
        if (slot && !(st->line_indented && st->last_key == k && st->last_var == st->cur))
            return fail_at(st, ENG_EINVAL, st->line, "key '%s' is set twice in [variant %s] (first at line %d)", name, var->name, slot->line);
        if (!slot) {
            if (var->n == var->cap) {
                size_t nc = var->cap ? 2 * var->cap : 8;
                setting *ns = realloc(var->s, nc * sizeof *ns);
                if (!ns) { st->err = eng_fail(ENG_ENOMEM, "out of memory"); return 0; }
                var->s = ns;
                var->cap = nc;
            }
            slot = &var->s[var->n++];
            slot->key = k;
            slot->value[0] = '\0';
            slot->line = 0;
        }
    }
    /* An indented line after the same key continues its value (inih's multi-line form). */
    char joined[2048];
    int continuing = slot->line != 0 && st->last_key == k && st->line_indented;
    if (continuing) snprintf(joined, sizeof joined, "%s %s", slot->value, v);
    else copy_str(joined, sizeof joined, v);
    if (strlen(joined) >= sizeof slot->value)
        return fail_at(st, ENG_EINVAL, st->line, "key '%s': expected a value of at most %zu characters", defs[k].key, sizeof slot->value - 1);
    eng_config scratch;
    memset(&scratch, 0, sizeof scratch);
    char why[512];
    /* a list ending in ',' goes on on the next (indented) line: resolve checks the whole */
    size_t jl = strlen(joined);
    int open_list = jl && joined[jl - 1] == ',';
    if (!open_list && apply_key(&scratch, &defs[k], joined, why, sizeof why))
        return fail_at(st, ENG_EINVAL, st->line, "key '%s': %s", defs[k].key, why);
    copy_str(slot->value, sizeof slot->value, joined);
    if (!continuing) slot->line = st->line;
    if (st->cur == -1) st->base_set[k] = 1;
    st->last_key = k;
    st->last_var = st->cur;
    return 1;
}

/* ---- resolving a variant ------------------------------------------------------------ */

typedef struct { int key; char value[1024]; char orig[1100]; } cli_set;

/* "FILE:LINE" for a file value, "--set key=value" for a command-line one. */
static void where(char *out, size_t cap, const char *path, const setting *s, const cli_set *sets, size_t n_sets)
{
    if (s->line > 0) snprintf(out, cap, "%s:%d", path, s->line);
    else if (s->line == 0) snprintf(out, cap, "%s", path);
    else {
        for (size_t i = n_sets; i-- > 0;)
            if (sets[i].key == s->key) { snprintf(out, cap, "--set %.500s", sets[i].orig); return; } /* a message, not data */
        snprintf(out, cap, "--set");
    }
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const eng_kv *)a)->key, ((const eng_kv *)b)->key);
}

static int is_regression_source(eng_data_source s)
{
    return s == ENG_DATA_LINREG || s == ENG_DATA_POLYREG || s == ENG_DATA_SINE;
}

/* A relative data path written in the experiment file names a file next to the experiment
 * file when one exists there, so a file runs from any directory; else the path as written,
 * from the current directory, if that exists (files written for the repository root keep
 * working); if neither exists, the file-relative one, so that the loader's "cannot open"
 * names where it looked. Absolute paths and --set values (typed in a shell, hence relative
 * to it) are left alone. The run uses, and kv reports, the resolved path. */
static int resolve_data_path(const char *exp_path, char *field, size_t cap, setting *v)
{
    if (!field[0] || field[0] == '/' || v->line <= 0) return 0;
    const char *slash = strrchr(exp_path, '/');
    if (!slash) return 0;                        /* the file is in the current directory */
    char cand[1100];
    int len = snprintf(cand, sizeof cand, "%.*s/%s", (int)(slash - exp_path), exp_path, field);
    if (len < 0 || (size_t)len >= cap) return -1;
    struct stat sb;
    if (stat(cand, &sb) != 0 && stat(field, &sb) == 0) return 0;
    memcpy(field, cand, (size_t)len + 1);
    /* kv holds 1023 characters: a longer path is reported as written (it is still used) */
    if ((size_t)len < sizeof v->value) memcpy(v->value, cand, (size_t)len + 1);
    return 0;
}

/* resolve's stages, in order: merge the layers of settings, apply every key, resolve the
 * data paths, fill the defaults that depend on other keys, check across keys, record kv.
 * vals holds NKEYS settings, indexed by key. */

/* Defaults, then the file's base section, then the variant, then --set (line -1). */
static void merge_settings(const parse_state *st, const variant *var, const cli_set *sets, size_t n_sets,
                           setting *vals)
{
    for (size_t i = 0; i < NKEYS; i++) {
        vals[i].key = (int)i;
        copy_str(vals[i].value, sizeof vals[i].value, defs[i].def);
        vals[i].line = 0;
        if (st->base_set[i]) vals[i] = st->base[i];
    }
    if (var)
        for (size_t i = 0; i < var->n; i++) vals[var->s[i].key] = var->s[i];
    for (size_t i = 0; i < n_sets; i++) {
        copy_str(vals[sets[i].key].value, sizeof vals[0].value, sets[i].value);
        vals[sets[i].key].line = -1;
    }
    for (size_t i = 0; i < NKEYS; i++) vals[i].key = (int)i;
}

static int apply_settings(const parse_state *st, const cli_set *sets, size_t n_sets, setting *vals, eng_config *c)
{
    char why[512], loc[600];
    int k_layers = find_key("model", "layers");
    for (size_t i = 0; i < NKEYS; i++) {
        if ((int)i == k_layers && vals[i].line == 0) {
            return eng_fail(ENG_EINVAL, "%s: [model] layers is required (e.g. layers = dense:16:tanh, dense:2)", st->path);
        }
        if ((int)i == find_key("experiment", "name") && vals[i].line == 0) {
            /* default: the file's base name without .ini */
            const char *b = strrchr(st->path, '/');
            b = b ? b + 1 : st->path;
            copy_str(vals[i].value, sizeof vals[i].value, b);
            char *dot = strrchr(vals[i].value, '.');
            if (dot && !strcmp(dot, ".ini")) *dot = '\0';
        }
        if (apply_key(c, &defs[i], vals[i].value, why, sizeof why)) {
            where(loc, sizeof loc, st->path, &vals[i], sets, n_sets);
            return eng_fail(ENG_EINVAL, "%s: key '%s': %s", loc, defs[i].key, why);
        }
    }
    return 0;
}

static int resolve_paths(const parse_state *st, const cli_set *sets, size_t n_sets, setting *vals, eng_config *c)
{
    char loc[600];
    /* The files' relative paths as resolve_data_path finds them; kv shows those. */
    struct { const char *sec, *key; char *field; size_t cap; } paths[] = {
        { "data", "path", c->data.path, sizeof c->data.path },
        { "data", "labels", c->data.labels, sizeof c->data.labels },
        { "data", "test_path", c->data.test_path, sizeof c->data.test_path },
        { "data", "test_labels", c->data.test_labels, sizeof c->data.test_labels },
        { "graph", "edges", c->graph.edges, sizeof c->graph.edges },
        { "graph", "node_features", c->graph.node_features, sizeof c->graph.node_features },
        { "graph", "labels", c->graph.labels, sizeof c->graph.labels },
        { "graph", "train_mask", c->graph.train_mask, sizeof c->graph.train_mask },
        { "graph", "val_mask", c->graph.val_mask, sizeof c->graph.val_mask },
        { "graph", "test_mask", c->graph.test_mask, sizeof c->graph.test_mask },
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        setting *v = &vals[find_key(paths[i].sec, paths[i].key)];
        if (resolve_data_path(st->path, paths[i].field, paths[i].cap, v)) {
            where(loc, sizeof loc, st->path, v, sets, n_sets);
            return eng_fail(ENG_EINVAL, "%s: key '%s': '%s' taken from the experiment file's directory is longer than %zu characters",
                            loc, paths[i].key, paths[i].field, paths[i].cap - 1);
        }
    }
    return 0;
}

/* Defaults that depend on other keys; kv then shows what the run really uses. */
static void derived_defaults(eng_config *c, setting *vals)
{
    /* The generator's own n / noise / classes / features / degree come from the loader's
     * table (engine/data/data.c), so the config cannot disagree with what is generated. */
    int k_norm = find_key("data", "normalize");
    eng_data_config before = c->data;
    eng_data_synth_defaults(&c->data);
    struct { const char *key; int was, now; double dwas, dnow; } auto_keys[] = {
        { "n", before.n, c->data.n, 0, 0 },
        { "classes", before.classes, c->data.classes, 0, 0 },
        { "features", before.features, c->data.features, 0, 0 },
        { "degree", before.degree, c->data.degree, 0, 0 },
        { "noise", 0, 0, before.noise, c->data.noise },
    };
    for (size_t i = 0; i < sizeof auto_keys / sizeof auto_keys[0]; i++) {
        setting *v = &vals[find_key("data", auto_keys[i].key)];
        if (auto_keys[i].was != auto_keys[i].now) snprintf(v->value, sizeof v->value, "%d", auto_keys[i].now);
        if (auto_keys[i].dwas != auto_keys[i].dnow) snprintf(v->value, sizeof v->value, "%g", auto_keys[i].dnow);
    }
    if ((int)c->data.normalize == -1) {
        eng_data_source src = c->data.source;
        c->data.normalize = src == ENG_DATA_IDX ? ENG_NORM_SCALE : src == ENG_DATA_CSV ? ENG_NORM_STANDARD : ENG_NORM_NONE;
        copy_str(vals[k_norm].value, sizeof vals[k_norm].value,
                 src == ENG_DATA_IDX ? "scale" : src == ENG_DATA_CSV ? "standard" : "none");
    }
}

static int cross_check(const parse_state *st, const cli_set *sets, size_t n_sets, setting *vals, const variant *var,
                       eng_config *c)
{
    char loc[600];
    /* Cross-key checks, each reported at the key that has to change. */
#define CROSS(key_sec, key_name, ...)                                                       \
    do {                                                                                    \
        int kk_ = find_key(key_sec, key_name);                                              \
        where(loc, sizeof loc, st->path, &vals[kk_], sets, n_sets);                         \
        char m_[400];                                                                       \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                               \
        return eng_fail(ENG_EINVAL, "%s: key '%s': %s%s%s%s", loc, key_name, m_,           \
                        var ? " (variant " : "", var ? var->name : "", var ? ")" : "");     \
    } while (0)
    if ((c->data.source == ENG_DATA_IDX || c->data.source == ENG_DATA_CSV) && !c->data.path[0])
        CROSS("data", "source", "%s needs data.path (%s)", c->data.source == ENG_DATA_IDX ? "idx" : "csv",
              c->data.source == ENG_DATA_IDX ? "the images file, or a directory with the four IDX files, e.g. /usr/share/datasets/fashion-mnist"
                                             : "the CSV file");
    if (c->model.loss == ENG_LOSS_SOFTMAX_XENT &&
        (is_regression_source(c->data.source) || (c->data.source == ENG_DATA_CSV && c->data.regression)))
        CROSS("model", "loss", "softmax_xent needs a classification dataset, but data.source = %s gives real-valued targets; use loss = mse",
              E_SOURCE[c->data.source]);
    {
        eng_augment aug;
        char aw[200];
        if (eng_augment_parse(c->data.augment, &aug, aw, sizeof aw))
            CROSS("data", "augment", "%s", aw);
    }
    if (c->data.cache && c->data.source != ENG_DATA_IDX && c->data.source != ENG_DATA_CSV)
        CROSS("data", "cache", "caches a file source (idx or csv); data.source = %s is generated in memory, set cache = false",
              E_SOURCE[c->data.source]);
    {
        char aw[200];
        if (eng_attn_parse(c->model.attention, &c->model, aw, sizeof aw)) CROSS("model", "attention", "%s", aw);
    }
    if (c->data.sequence > ENG_SEQ_VIEW_ROWS && c->data.augment[0] && strcmp(c->data.augment, "none"))
        CROSS("data", "augment", "shifts and flips images, but data.sequence = %s has reordered them; use sequence = rows "
              "or augment = none", E_SEQVIEW[c->data.sequence]);
    if (c->train.schedule == ENG_SCHED_STEP && c->train.step_size <= 0)
        CROSS("train", "schedule", "step needs train.step_size > 0 (steps between decays)");
    if (c->train.min_lr > c->train.lr)
        CROSS("train", "min_lr", "must not exceed train.lr (%g), got %g", c->train.lr, c->train.min_lr);
    if (c->train.epochs == 0 && c->train.max_steps == 0)
        CROSS("train", "epochs", "epochs = 0 needs train.max_steps > 0 (nothing would train)");
    {   /* graphs: sage layers and the [graph] keys go together (engine/graph/gnn.c) */
        int n_sage = 0, fan[ENG_GRAPH_MAX_LAYERS];
        for (int i = 0; i < c->model.n_layers; i++) n_sage += c->model.layers[i].kind == ENG_LAYER_SAGE;
        int graph = c->data.source == ENG_DATA_GRAPH;
        if (graph && n_sage != c->model.n_layers)
            CROSS("model", "layers", "data.source = graph needs sage layers only (e.g. sage:64:relu, sage:%d)", c->graph.classes);
        if (!graph && n_sage)
            CROSS("model", "layers", "sage layers need data.source = graph (and a [graph] section)");
        int nf = graph ? eng_graph_parse_fanouts(c->graph.fanouts, fan, ENG_GRAPH_MAX_LAYERS) : 0;
        if (graph && nf < 0)
            CROSS("graph", "fanouts", "expected 1 to %d comma-separated integers in 1..%d, got '%s'",
                  ENG_GRAPH_MAX_LAYERS, ENG_MAX_FANOUT, c->graph.fanouts);
        if (graph && c->graph.mode == ENG_GRAPH_SAMPLED && nf != n_sage)
            CROSS("graph", "fanouts", "one fanout per sage layer: %d given for %d layers", nf, n_sage);
        if (graph && c->graph.source == ENG_GRAPH_FILE && (!c->graph.edges[0] || !c->graph.node_features[0] || !c->graph.labels[0]))
            CROSS("graph", "source", "file needs graph.edges, graph.node_features and graph.labels");
        if (graph && c->graph.train_fraction + c->graph.val_fraction >= 1)
            CROSS("graph", "train_fraction", "train_fraction + val_fraction must be below 1 (the rest is the test set)");
        /* Keys a graph run does not honour: refused, never silently ignored. The graph
         * task (engine/graph/gnn.c) reads no input pipeline; transforms, telemetry and
         * checkpoints are loop slots (engine/loop.c) and so work for it as for any task. */
        eng_augment aug;
        char aw[8];
        int aug_on = !eng_augment_parse(c->data.augment, &aug, aw, sizeof aw) && eng_augment_on(&aug);
        struct { const char *sec, *key; int used; } ignored[] = {
            { "data", "augment", aug_on }, { "data", "prefetch", c->data.prefetch },
            { "data", "read_mbps", c->data.read_mbps > 0 }, { "data", "read_latency_ms", c->data.read_latency_ms > 0 },
        };
        for (size_t i = 0; graph && i < sizeof ignored / sizeof ignored[0]; i++)
            if (ignored[i].used)
                CROSS(ignored[i].sec, ignored[i].key, "graph runs (data.source = graph) do not use %s.%s (the graph is "
                      "read whole, without augmentation or the input pipeline); remove it",
                      ignored[i].sec, ignored[i].key);
    }
#undef CROSS
    return 0;
}

static int record_kv(eng_config *c, const setting *vals)
{
    c->kv = calloc(NKEYS, sizeof *c->kv);
    if (!c->kv) return eng_fail(ENG_ENOMEM, "out of memory");
    for (size_t i = 0; i < NKEYS; i++) {
        snprintf(c->kv[i].key, sizeof c->kv[i].key, "%s.%s", defs[i].section, defs[i].key);
        copy_str(c->kv[i].value, sizeof c->kv[i].value, vals[i].value);
        c->kv[i].line = vals[i].line;
    }
    c->n_kv = NKEYS;
    qsort(c->kv, c->n_kv, sizeof *c->kv, cmp_kv);
    return ENG_OK;
}

static int resolve(const parse_state *st, const variant *var, const cli_set *sets, size_t n_sets,
                   eng_config *c)
{
    setting vals[NKEYS];
    merge_settings(st, var, sets, n_sets, vals);
    memset(c, 0, sizeof *c);
    copy_str(c->path, sizeof c->path, st->path);
    if (var) copy_str(c->variant, sizeof c->variant, var->name);
    int rc = apply_settings(st, sets, n_sets, vals, c);
    if (!rc) rc = resolve_paths(st, sets, n_sets, vals, c);
    if (rc) return rc;
    derived_defaults(c, vals);
    rc = cross_check(st, sets, n_sets, vals, var, c);
    return rc ? rc : record_kv(c, vals);
}

/* Parses "section.key=value" from --set. */
static int parse_set(const char *arg, cli_set *out)
{
    memset(out, 0, sizeof *out);
    copy_str(out->orig, sizeof out->orig, arg);
    char buf[1100];
    copy_str(buf, sizeof buf, arg);
    char *eq = strchr(buf, '=');
    if (!eq) return eng_fail(ENG_EINVAL, "--set %s: expected section.key=value (e.g. --set train.lr=0.1)", arg);
    *eq = '\0';
    char *key = trim(buf), *val = trim(eq + 1);
    char *dot = strchr(key, '.');
    int k = -1;
    if (dot) {
        *dot = '\0';
        k = find_key(key, dot + 1);
        *dot = '.';
    }
    if (k < 0) {
        char hint[160];
        key_hint(hint, sizeof hint, "", key, 1);
        return eng_fail(ENG_EINVAL, "--set %s: unknown key '%s'%s", arg, key, hint);
    }
    eng_config scratch;
    memset(&scratch, 0, sizeof scratch);
    char why[1400];
    if (strlen(val) >= sizeof out->value)
        return eng_fail(ENG_EINVAL, "--set %s: key '%s': expected a value of at most %zu characters", arg, defs[k].key, sizeof out->value - 1);
    if (apply_key(&scratch, &defs[k], val, why, sizeof why))
        return eng_fail(ENG_EINVAL, "--set %s: key '%s': %s", arg, defs[k].key, why);
    out->key = k;
    copy_str(out->value, sizeof out->value, val);
    return ENG_OK;
}

/* ---- public ------------------------------------------------------------------------- */

static char *read_file(const char *path, int *rc)
{
    long long size;
    int fd = eng_open_input(path, ENG_MAX_CONFIG_BYTES, "experiment file", &size);
    if (fd < 0) { *rc = ENG_EIO; return NULL; }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); *rc = eng_fail(ENG_ENOMEM, "out of memory"); return NULL; }
    /* The cap holds while reading too: the file may grow after the fstat. */
    size_t cap = (size_t)ENG_MAX_CONFIG_BYTES + 2, n = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); *rc = eng_fail(ENG_ENOMEM, "out of memory"); return NULL; }
    size_t got;
    while (n < cap - 1 && (got = fread(buf + n, 1, cap - 1 - n, f)) > 0) n += got;
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); *rc = eng_fail(ENG_EIO, "%s: read error", path); return NULL; }
    if (n > (size_t)ENG_MAX_CONFIG_BYTES) {
        free(buf);
        *rc = eng_fail(ENG_EINVAL, "%s: grew past the %lld MiB cap for experiment files while being read", path,
                       ENG_MAX_CONFIG_BYTES >> 20);
        return NULL;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) { free(buf); *rc = eng_fail(ENG_EFORMAT, "%s: contains a NUL byte: not a text file", path); return NULL; }
    /* A UTF-8 byte order mark (editors on Windows write one) is not part of the text. */
    if (n >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) memmove(buf, buf + 3, (n -= 3) + 1);
    size_t badat = prof_utf8_check(buf, n);
    if (badat < n) {
        int line = 1, col = 1;
        for (size_t i = 0; i < badat; i++) {
            if (buf[i] == '\n') { line++; col = 1; }
            else if (((unsigned char)buf[i] & 0xc0) != 0x80) col++;
        }
        *rc = eng_fail(ENG_EFORMAT, "%s:%d: byte 0x%02x at column %d is not UTF-8 (Latin-1?): save the "
                       "file as UTF-8, e.g. iconv -f latin1 -t utf-8", path, line, (unsigned char)buf[badat], col);
        free(buf);
        return NULL;
    }
    *rc = 0;
    return buf;
}

static void free_state(parse_state *st)
{
    for (size_t i = 0; i < st->n_vars; i++) free(st->vars[i].s);
    free(st->vars);
}

static int load_text(const char *path, char *text, const char *const *overrides, size_t n_overrides,
                     eng_experiment **out);

int eng_experiment_load(const char *path, const char *const *overrides, size_t n_overrides,
                        eng_experiment **out)
{
    *out = NULL;
    int rc;
    char *text = read_file(path, &rc);
    if (!text) return rc;
    return load_text(path, text, overrides, n_overrides, out);
}

int eng_experiment_load_text(const char *path, const char *text, const char *const *overrides,
                             size_t n_overrides, eng_experiment **out)
{
    *out = NULL;
    size_t n = strlen(text) + 1;
    char *copy = malloc(n);
    if (!copy) return eng_fail(ENG_ENOMEM, "out of memory");
    memcpy(copy, text, n);
    return load_text(path, copy, overrides, n_overrides, out);
}

/* Takes ownership of text. */
static int load_text(const char *path, char *text, const char *const *overrides, size_t n_overrides,
                     eng_experiment **out)
{
    int rc;

    cli_set *sets = n_overrides ? calloc(n_overrides, sizeof *sets) : NULL;
    if (n_overrides && !sets) { free(text); return eng_fail(ENG_ENOMEM, "out of memory"); }
    for (size_t i = 0; i < n_overrides; i++)
        if ((rc = parse_set(overrides[i], &sets[i]))) { free(sets); free(text); return rc; }

    parse_state *st = calloc(1, sizeof *st);
    if (!st) { free(sets); free(text); return eng_fail(ENG_ENOMEM, "out of memory"); }
    st->path = path;
    st->text = text;
    st->prev_ended = 1;
    st->cur = -2;
    st->last_key = -1;
    /* Heap line buffer that may grow: values (layer lists, counters) can be long. */
    ini_use_stack = false;
    ini_allow_realloc = true;
    ini_initial_alloc = 256;
    ini_max_line = 2 * MAX_LINE;
    ini_stop_on_first_error = true;
    int perr = ini_parse_stream(reader, st, handler, st);
    if (!st->err && perr > 0) {
        /* A line inih could not parse: show it. */
        const char *s = text;
        for (int l = 1; l < perr && s; l++) { s = strchr(s, '\n'); if (s) s++; }
        char line[128] = "";
        if (s) { size_t n = strcspn(s, "\n"); if (n > sizeof line - 1) n = sizeof line - 1; memcpy(line, s, n); line[n] = '\0'; }
        fail_at(st, ENG_EINVAL, perr, "expected 'key = value' or '[section]', got '%s'", trim(line));
    } else if (!st->err && perr < 0) {
        st->err = eng_fail(ENG_ENOMEM, "%s: out of memory while parsing", path);
    }
    if (st->err) {
        rc = st->err;
        free_state(st); free(st); free(sets); free(text);
        return rc;
    }

    eng_experiment *ex = calloc(1, sizeof *ex);
    size_t nv = st->n_vars ? st->n_vars : 1;
    if (ex) ex->variants = calloc(nv, sizeof *ex->variants);
    if (!ex || !ex->variants) {
        free(ex); free_state(st); free(st); free(sets); free(text);
        return eng_fail(ENG_ENOMEM, "out of memory");
    }
    copy_str(ex->path, sizeof ex->path, path);
    ex->text = text;
    for (size_t i = 0; i < nv; i++) {
        rc = resolve(st, st->n_vars ? &st->vars[i] : NULL, sets, n_overrides, &ex->variants[i]);
        if (rc) {
            ex->n_variants = i;
            eng_experiment_free(ex);
            free_state(st); free(st); free(sets);
            return rc;
        }
        ex->n_variants = i + 1;
    }
    free_state(st);
    free(st);
    free(sets);
    *out = ex;
    return ENG_OK;
}

void eng_experiment_free(eng_experiment *ex)
{
    if (!ex) return;
    for (size_t i = 0; i < ex->n_variants; i++) free(ex->variants[i].kv);
    free(ex->variants);
    free(ex->text);
    free(ex);
}

int eng_experiment_select(eng_experiment *ex, const char *name)
{
    size_t found = ex->n_variants;
    for (size_t i = 0; i < ex->n_variants; i++)
        if (!strcmp(ex->variants[i].variant, name)) found = i;
    if (found == ex->n_variants) {
        if (ex->n_variants == 1 && !ex->variants[0].variant[0])
            return eng_fail(ENG_EINVAL, "%s has no [variant] sections, so there is no variant '%s'", ex->path, name);
        char list[512] = "";
        size_t len = 0;
        for (size_t i = 0; i < ex->n_variants && len < sizeof list - 70; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", ex->variants[i].variant);
        return eng_fail(ENG_EINVAL, "%s: no variant '%s' (variants: %s)", ex->path, name, list);
    }
    for (size_t i = 0; i < ex->n_variants; i++)
        if (i != found) free(ex->variants[i].kv);
    if (found) ex->variants[0] = ex->variants[found];
    ex->n_variants = 1;
    return ENG_OK;
}

/* [data] keys that act only on how batches are served (batcher and input pipeline), never
 * on the loaded arrays. eng_data_key leaves out these and nothing else: a [data] key added
 * later is part of the cache key until it is listed here, so forgetting it costs a rebuild,
 * never a wrong dataset (issue 22). */
static const char *const data_serving_keys[] = { "shuffle", "prefetch", "prefetch_depth", "cache",
                                                 "augment", "read_mbps", "read_latency_ms", NULL };

int eng_data_key_shapes_data(const char *key)
{
    for (const char *const *k = data_serving_keys; *k; k++)
        if (!strcmp(*k, key)) return 0;
    return 1;
}

int eng_data_key(const eng_data_config *dc, char *buf, size_t cap, size_t *len)
{
    const size_t base = offsetof(eng_config, data);
    size_t at = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        const keydef *d = &defs[i];
        if (strcmp(d->section, "data") || !eng_data_key_shapes_data(d->key)) continue;
        const char *src = (const char *)dc + (d->off - base);
        int iv;
        double dv;
        long lv;
        uint64_t uv;
        int n;
        switch (d->kind) {
        case K_STR: n = snprintf(buf + at, cap - at, "data.%s=%s\n", d->key, src); break;
        case K_DBL: case K_DBL_AUTO: case K_DBL_POS:
            memcpy(&dv, src, sizeof dv);
            n = snprintf(buf + at, cap - at, "data.%s=%.17g\n", d->key, dv);
            break;
        case K_LONG:
            memcpy(&lv, src, sizeof lv);
            n = snprintf(buf + at, cap - at, "data.%s=%ld\n", d->key, lv);
            break;
        case K_U64:
            memcpy(&uv, src, sizeof uv);
            n = snprintf(buf + at, cap - at, "data.%s=%llu\n", d->key, (unsigned long long)uv);
            break;
        default:                                  /* int, enum, bool: stored as int */
            memcpy(&iv, src, sizeof iv);
            n = snprintf(buf + at, cap - at, "data.%s=%d\n", d->key, iv);
            break;
        }
        if (n < 0 || (size_t)n >= cap - at) return eng_fail(ENG_EINVAL, "data.cache: key too long");
        at += (size_t)n;
    }
    *len = at;
    return ENG_OK;
}

static const eng_kv *kv_of(const eng_config *c, const char *key)
{
    for (size_t i = 0; i < c->n_kv; i++)
        if (!strcmp(c->kv[i].key, key)) return &c->kv[i];
    return NULL;
}

const char *eng_config_value(const eng_config *c, const char *key)
{
    const eng_kv *kv = kv_of(c, key);
    return kv ? kv->value : NULL;
}

void eng_config_where(const eng_config *c, const char *key, char *buf, size_t cap)
{
    const eng_kv *kv = kv_of(c, key);
    if (kv && kv->line > 0) snprintf(buf, cap, "%s:%d", c->path, kv->line);
    else if (kv && kv->line < 0) snprintf(buf, cap, "--set %s=%s", key, kv->value);
    else snprintf(buf, cap, "%s", c->path);
}
