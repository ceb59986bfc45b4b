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
 * step's scalars (loss, correct count, stop vote, and every rank's time per row) travel in
 * the same all-reduce as the gradients. 4 + the world size. */
size_t eng_dist_spare(void);
/* After backward, the step's one synchronisation: grads (this rank's, weighted by its
 * share of the batch: rows / global_rows times the mean over its rows, as
 * eng_model_backward_weighted makes them) become the mean over the global batch, identical on every rank, compressed as
 * configured; *loss and *correct (this rank's) become the global batch's; *stop is 1 when
 * any rank asked to stop. ENG_EIO when a rank is gone. Each rank also reports the time it
 * was busy since the previous step's collective (its rows' data, forward, backward, the
 * previous optimizer step and whatever else it did), per row: with dist.balance =
 * measured this sets the next shares (eng_dist_cuts). */
int eng_dist_step(eng_dist *d, float *grads, double *loss, int *correct, int rows, int global_rows, int *stop);
/* dist.bucket_kb > 0: before each backward, the gradient buffer its buckets come from;
 * eng_dist_grads_ready (an eng_grads_ready, ud = the eng_dist) then starts an all-reduce
 * for every bucket_kb KB of gradients backward has finished, and tests those in flight so
 * that they progress; eng_dist_step starts the rest and waits for all. No-ops otherwise. */
void eng_dist_backward_begin(eng_dist *d, float *grads);
void eng_dist_grads_ready(void *d, size_t from);
/* The partition of the global batch after the last step: rank r serves the fraction
 * [cuts[r], cuts[r+1]) of it; world + 1 values from 0 to 1, the same on every rank. Even
 * shares until dist.balance = measured has measured every rank. */
const double *eng_dist_cuts(const eng_dist *d);
/* dist.balance = measured, one update (pure; every rank runs it on the same numbers and
 * gets the same cuts): per_row[r] is rank r's busy time per row in the step just done, 0
 * when not measured (no rows, or its first step); ema[r] the smoothed time per row (0 =
 * none yet), updated; cuts[0..n] rewritten with shares proportional to 1/ema, each at
 * least a quarter of an even share — unchanged until every rank has been measured. */
void eng_dist_balance(double *ema, const float *per_row, int n, double *cuts);
/* The rows a rank's share of a global batch of `global` rows can hold among `world` ranks
 * (pure): [*lo, *hi]. Even shares: the even cut's, within one row; dist.balance = measured
 * (`measured` != 0): anything from the floor share up to all but the others' floors. Every
 * GEMM shape class those rows give is prepared before the run (train.c), so that no rank
 * meets a class that was never measured. */
void eng_dist_rows_range(int global, int world, int measured, int *lo, int *hi);
/* IEEE half precision (the fp16 compression), round to nearest even; F16C on the avx2 and
 * avx512 paths, the same bits as the scalar code of NNBENCH_ISA=generic for every number
 * and infinity. add: b[i] = half(float(a[i]) + float(b[i])). */
void eng_fp16_from_float(const float *x, uint16_t *h, size_t n);
void eng_fp16_to_float(const uint16_t *h, float *x, size_t n);
void eng_fp16_add(const uint16_t *a, uint16_t *b, size_t n);
/* int8 compression with error feedback, the same bits on every path for finite values
 * (AVX2 on the avx2 and avx512 paths, scalar with NNBENCH_ISA=generic): res[i] += g[i], returning the
 * largest |res[i]| (NaNs ignored); q[i] = res[i] / scale rounded half away from zero and
 * clamped to +-127, res[i] -= float(q[i] * scale) (what rounding left out); g[i] += s * q[i]. */
float eng_int8_residual_add(float *res, const float *g, size_t n);
void eng_int8_quantize(float *res, int8_t *q, size_t n, double scale);
void eng_int8_accumulate(float *g, const int8_t *q, size_t n, float s);
/* The MPI library's name and version ("Open MPI v4.1.4"); callable before MPI_Init. */
void eng_mpi_library(char *buf, size_t cap);
/* Collective: an in-place all-reduce of `bytes` of small integers checked against their
 * exact sums (ENG_EIO naming the first wrong element; corrupt != 0 makes rank 0's sum
 * wrong, for tests), then eng_dist_time_allreduce's median of reps. */
int eng_dist_probe_transport(size_t bytes, int reps, int corrupt, double *median_s);
/* The start of a job, in the order eng_dist_init (dist_transport.c) runs them: the size
 * of the mpirun job this process belongs to (1: none, or one process); MPI_Init and this
 * rank's place (ENG_EIO with a message); after it, the shared-memory transport's variables
 * as Open MPI read them ("btl_vader_single_copy_mechanism=none btl_vader_max_send_size=
 * 262144"; -1 when it does not say). */
int eng_dist_job_size(void);
int eng_dist_start(int *rank, int *world);
int eng_dist_transport_readback(char *buf, size_t cap);
/* Payload bytes this rank handed to MPI for gradients so far. */
unsigned long long eng_dist_bytes(const eng_dist *d);

#endif
