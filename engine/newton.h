/* newton.h — Newton's method for the engine, with each block's linear solve routed by the
 * Q-Newton scheduler (quantum/). Private to engine/: train.c calls it, newton.c has it. */
#ifndef NNBENCH_ENGINE_NEWTON_H
#define NNBENCH_ENGINE_NEWTON_H

#include "core.h"

typedef struct eng_newton eng_newton;

/* Sets up curvature blocks and the scheduler for the model; prof may be NULL. Free with
 * eng_newton_free. */
int eng_newton_create(const eng_config *cfg, eng_model *m, prof_t *prof, eng_newton **out);
/* One Newton step on batch b. Precondition: eng_model_forward + eng_model_backward ran on
 * the same batch, so eng_model_grads() holds its gradient. Updates the parameters
 * (w -= lr * clip(H^-1 g)), reports every solve to sink->solver (sink may be NULL), and
 * sets *hybrid_delta_s to (simulated quantum time [+ readout] - measured time of the
 * solves routed quantum) for the hybrid clock, *kappa_mean to the mean routing estimate. */
int eng_newton_step(eng_newton *nt, const eng_batch *b, double lr, long step,
                    const eng_sink *sink, double *hybrid_delta_s, double *kappa_mean);
void eng_newton_counts(const eng_newton *nt, long *solves, long *quantum_solves);
/* The unshifted curvature of block bi (in the order eng_newton_step solves them) for batch
 * b; precondition: eng_model_forward ran on b (the first dense layer's input is read from
 * it). What the tests compare with finite differences. H (caller's,
 * at least n*n doubles for the largest block) gets it; *n and *off get the block's size
 * and parameter offset. ENG_EINVAL for a block index out of range. */
int eng_newton_curvature(eng_newton *nt, const eng_batch *b, int bi, double *H, int *n, size_t *off);
void eng_newton_free(eng_newton *nt);

#endif
