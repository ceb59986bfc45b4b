/* core.h — the engine's building blocks that its files and its tests share but the layers
 * above (tui/, store/) do not use: batches, the model's step functions, optimizers and
 * schedules, gradient transforms. engine.h stays the API of runs; internal.h adds what only
 * the engine's own files see (the model's layout, nodes, the op table). */
#ifndef NNBENCH_ENGINE_CORE_H
#define NNBENCH_ENGINE_CORE_H

#include "engine.h"

/* ---- batches (data/batcher.c) --------------------------------------------------------- */

/* Serves shuffled minibatches of the training set into preallocated buffers; with
 * prefetch on, the next batch is gathered on a second thread while the caller trains. */
typedef struct eng_batcher eng_batcher;
typedef struct {
    const float *x;       /* rows * in_size */
    const int32_t *y;     /* rows labels, or NULL */
    const float *t;       /* rows * n_targets, or NULL */
    int rows;             /* batch size (the last batch of an epoch may be smaller) */
    int epoch;            /* 0-based epoch this batch belongs to */
    int last_in_epoch;    /* 1 for the final batch of its epoch */
    int global_rows;      /* rows of the whole batch across ranks (== rows in one process) */
} eng_batch;
int eng_batcher_create(const eng_dataset *ds, int batch, int shuffle, int prefetch,
                       uint64_t seed, eng_batcher **out);
/* Valid until the next call. */
int eng_batcher_next(eng_batcher *b, eng_batch *out);
int eng_batcher_batches_per_epoch(const eng_batcher *b);
void eng_batcher_destroy(eng_batcher *b);

/* ---- the model's steps (model.c) ------------------------------------------------------ */

/* Builds the model for inputs of in_shape and n_out outputs, with buffers for batches of
 * up to max_batch rows; parameters initialised from seed. prof may be NULL (no profiling).
 * Free with eng_model_free. */
int eng_model_build(const eng_model_config *mc, const int in_shape[3], int n_out,
                    int max_batch, uint64_t seed, prof_t *prof, eng_model **out);
/* Chooses the GEMM backend of every shape class the model issues on `rows` rows at
 * `threads` threads (train.gemm = auto), as a run does before it trains: for code that
 * steps a model itself (the benches), so that its GEMMs are not served unchosen. */
int eng_model_prepare_gemms(const eng_model *m, int rows, int threads);
/* Forward through the layers and the loss. Exactly one of labels/targets is non-NULL.
 * Returns the mean loss over the rows; *correct (may be NULL) gets the number of rows
 * whose argmax matches the label (classification only). */
double eng_model_forward(eng_model *m, const float *x, int rows, const int32_t *labels,
                         const float *targets, int *correct);
/* Backward from the loss of the last forward: fills the gradient buffer (overwritten). */
void eng_model_backward(eng_model *m);
float *eng_model_params(eng_model *m);
float *eng_model_grads(eng_model *m);
/* Human summary: "dense(2->16) tanh, dense(16->16) tanh, dense(16->2)  [354 params]". */
const char *eng_model_summary(const eng_model *m);
/* Training mode (the default after build) or evaluation mode: batch-norm layers normalise
 * with the batch's statistics and update their running statistics in training, and use the
 * running statistics (nothing updated) in evaluation. Other layers behave the same in both. */
void eng_model_set_training(eng_model *m, int training);

/* ---- optimizers and schedules ------------------------------------------------------ */

typedef struct eng_optim eng_optim;
/* First-order optimizers (sgd, momentum, adam, adamw). Free with eng_optim_free. */
int eng_optim_create(const eng_train_config *tc, size_t n_params, eng_optim **out);
void eng_optim_step(eng_optim *o, float *params, const float *grads, double lr);
/* The same step in pieces: begin, then ranges of [0, n_params) each updated once, in any
 * order (the loop updates each layer's slice as soon as backward has finished it, while
 * its gradient is still in cache); together the bits of eng_optim_step. */
void eng_optim_step_begin(eng_optim *o, float *params, const float *grads, double lr);
void eng_optim_step_range(eng_optim *o, size_t lo, size_t hi);
/* Row-major weight matrices among the parameters (rows x cols at off, in offset order) whose
 * GEMMs cut them by rows (a dense layer's weight gradient, its forward's K cut): with
 * several threads their update is cut by the same rows (eng_split_range), so that each
 * thread's part of W, of its gradient and of the optimizer state stays in that thread's
 * cache. Any cut gives the same bits. */
#define ENG_OPTIM_MAX_MATS 64
void eng_optim_set_matrices(eng_optim *o, const size_t *off, const int *rows, const int *cols, int n);
/* A gradient transform's last map, deferred into the update (one pass over the gradient
 * fewer): the update reads each of the n elements from off (a matrix of `cols` columns) as
 *   g' = (g - mu) * s       when sub is NULL (znorm, clip_norm's scale),
 *   g' = g - sub[c]         by column c (centralize on a dense W),
 *   g' = (g - sub[r]) * 1   by row r, when by_row (centralize on a conv W);
 * the bits of the map applied in a pass of its own. sub must live until the step is taken. */
typedef struct {
    size_t off, n, cols;
    const float *sub;
    int by_row;
    float mu, s;
} eng_optim_map;
#define ENG_OPTIM_MAX_MAPS 128
/* Hands m to the next step (the one the next eng_optim_step_begin starts, and only that
 * one). Maps must not overlap. 0, or -1 when the list is full, m is outside the parameters
 * or a centring map is not whole rows: then apply it yourself. */
int eng_optim_defer(eng_optim *o, const eng_optim_map *m);
void eng_optim_free(eng_optim *o);
/* Learning rate at step (0-based) of total_steps, for the config's schedule + warm-up. */
double eng_lr_at(const eng_train_config *tc, long step, long total_steps);

/* ---- gradient transforms (engine/gradient.c) --------------------------------------- */

typedef struct eng_grad eng_grad;
/* The transforms tc names (tc->gradient[0..n_gradient)) over m's parameter tensors, each a
 * profiled scope "grad.NAME" per layer when prof is non-NULL. Scratch is allocated here;
 * eng_grad_apply allocates nothing. Free with eng_grad_free. */
int eng_grad_create(const eng_train_config *tc, eng_model *m, prof_t *prof, eng_grad **out);
/* Transforms the model's gradient buffer in place (after backward, before the step). With
 * an optimizer `to`, the last transform's maps (znorm, centralize, clip_norm's scale) are
 * handed to its next step (eng_optim_defer) instead, which applies them as it reads the
 * gradient: the same update, one pass over the gradient fewer; the buffer then keeps the
 * gradient as the earlier transforms left it. NULL: every transform in place. */
void eng_grad_apply(eng_grad *g, eng_optim *to);
void eng_grad_free(eng_grad *g);
const char *eng_grad_kind_name(eng_grad_kind k); /* "znorm", "centralize", ... */

#endif
