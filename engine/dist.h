/* dist.h — what train.c uses of data-parallel training (engine/dist.c). Private to engine/;
 * no MPI type appears here, so nothing but dist.c includes mpi.h. */
#ifndef NNBENCH_ENGINE_DIST_H
#define NNBENCH_ENGINE_DIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct eng_dist eng_dist;

/* For a run of n_params gradients; registers its profiler scopes (allreduce, allreduce.wait, compress) when
 * prof is given. stop: the run's stop flag (a stop requested on any rank stops all of them
 * at the same step). Free with eng_dist_free. */
int eng_dist_create(const eng_dist_config *dc, size_t n_params, prof_t *prof, atomic_int *stop,
                    eng_dist **out);
void eng_dist_free(eng_dist *d);
/* The gradient buffer handed to eng_dist_step has this many floats past n_params: the
 * step's scalars travel in the same all-reduce as the gradients. */
#define ENG_DIST_SPARE 4
/* After backward, the step's one synchronisation: grads (this rank's, weighted by its
 * share of the batch: rows / global_rows times the mean over its rows, as
 * eng_model_backward_weighted makes them) become the mean over the global batch, identical on every rank, compressed as
 * configured; *loss and *correct (this rank's) become the global batch's; *stop is 1 when
 * any rank asked to stop. ENG_EIO when a rank is gone. */
int eng_dist_step(eng_dist *d, float *grads, double *loss, int *correct, int rows, int global_rows, int *stop);
/* IEEE half precision (the fp16 compression), round to nearest even; F16C on the avx2 and
 * avx512 paths, the same bits as the scalar code of NNBENCH_ISA=generic for every number
 * and infinity. add: b[i] = half(float(a[i]) + float(b[i])). */
void eng_fp16_from_float(const float *x, uint16_t *h, size_t n);
void eng_fp16_to_float(const uint16_t *h, float *x, size_t n);
void eng_fp16_add(const uint16_t *a, uint16_t *b, size_t n);
/* Payload bytes this rank handed to MPI for gradients so far. */
unsigned long long eng_dist_bytes(const eng_dist *d);

#endif
