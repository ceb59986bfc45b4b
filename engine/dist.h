/* dist.h — what train.c uses of data-parallel training (engine/dist.c). Private to engine/;
 * no MPI type appears here, so nothing but dist.c includes mpi.h. */
#ifndef NNBENCH_ENGINE_DIST_H
#define NNBENCH_ENGINE_DIST_H

#include <stdatomic.h>
#include <stddef.h>

#include "engine.h"

typedef struct eng_dist eng_dist;

/* For a run of n_params gradients; registers its profiler scopes (allreduce, agree) when
 * prof is given. stop: the run's stop flag (a stop requested on any rank stops all of them
 * at the same step). Free with eng_dist_free. */
int eng_dist_create(const eng_dist_config *dc, size_t n_params, prof_t *prof, atomic_int *stop,
                    eng_dist **out);
void eng_dist_free(eng_dist *d);
/* After forward: makes *loss and *correct the global batch's (from this rank's rows of
 * global_rows) and *stop 1 when any rank asked to stop. ENG_EIO when a rank is gone. */
int eng_dist_agree(eng_dist *d, double *loss, int *correct, int rows, int global_rows, int *stop);
/* After backward: grads (the mean over this rank's rows) become the mean over the global
 * batch, identical on every rank; compressed as configured. ENG_EIO when a rank is gone. */
int eng_dist_allreduce(eng_dist *d, float *grads, int rows, int global_rows);
/* Payload bytes this rank handed to MPI for gradients so far. */
unsigned long long eng_dist_bytes(const eng_dist *d);

#endif
