/* data_internal.h — what the dataset files (data.c, data_idx.c, data_csv.c, batcher.c)
 * share: seed streams, the loaders' entry points and small allocation helpers. Private. */
#ifndef NNBENCH_ENGINE_DATA_INTERNAL_H
#define NNBENCH_ENGINE_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* Seed streams (engine/rng.h): one per independent use of the run's seed, so that e.g.
 * changing n does not change the true weights of a regression, and the batch order does
 * not depend on how the data were generated. ASCII tags, distinct from ENG_STREAM_INIT. */
#define ENG_STREAM_DATA_GEN     0x44474e31ull /* "DGN1": synthetic samples */
#define ENG_STREAM_DATA_TRUTH   0x44545231ull /* "DTR1": true weights / centres */
#define ENG_STREAM_DATA_SPLIT   0x44535031ull /* "DSP1": shuffle before train/test split */
#define ENG_STREAM_DATA_SHUFFLE 0x44534831ull /* "DSH1": batcher's per-epoch permutation */

/* Defaults of the synthetic generators: a config field at 0 (n, classes, features,
 * degree) or negative (noise) means "the generator's own". The one place these numbers
 * live: data.c generates with them and config.c's key help and resolved values
 * (ENG_DATA_STR) quote them. */
#define ENG_DATA_DEF_N 2000
#define ENG_DATA_DEF_NOISE_XOR 0.3
#define ENG_DATA_DEF_NOISE_SPIRALS 0.05
#define ENG_DATA_DEF_NOISE_BLOBS 1.0
#define ENG_DATA_DEF_NOISE_REG 0.1      /* linreg, polyreg, sine */
#define ENG_DATA_DEF_ARMS 2             /* spirals */
#define ENG_DATA_DEF_BLOB_CLASSES 3
#define ENG_DATA_DEF_BLOB_FEATURES 2
#define ENG_DATA_DEF_LINREG_FEATURES 4
#define ENG_DATA_DEF_POLY_FEATURES 1
#define ENG_DATA_DEF_DEGREE 3
#define ENG_DATA_STR_(x) #x
#define ENG_DATA_STR(x) ENG_DATA_STR_(x)   /* ENG_DATA_STR(ENG_DATA_DEF_N) -> "2000" */

/* Replaces the "generator's own" fields of a synthetic config (see above) with the values
 * the generator uses; fields the source ignores and file sources are left as they are. */
void eng_data_synth_defaults(eng_data_config *dc);

/* Allocates the train (n_train) and test (n_test) arrays of ds for its in_size,
 * classification flag and n_targets; frees whatever ds held before. Zero rows → NULL. */
int eng_data_alloc(eng_dataset *ds, int n_train, int n_test);

/* Loaders fill ds (shape, labels/targets, train and possibly test arrays). *split is set
 * to 1 when the source had no separate test set, so that data.c splits the training
 * arrays by test_fraction (and then applies the n / n_test caps). */
int eng_data_load_idx(const eng_data_config *dc, eng_dataset *ds, int *split);
int eng_data_load_csv(const eng_data_config *dc, eng_dataset *ds, int *split);

/* With prefetch: how many rows the prefetch thread copied and how many the caller of
 * eng_batcher_next copied itself (batches or chunks the thread had not got to); 0 and 0
 * without prefetch. For the profiler's byte counts, tests and measurements. */
void eng_batcher_gather_counts(eng_batcher *b, long *by_thread, long *by_caller);

/* Input files: each must be a regular file (not /dev/zero, a FIFO or a directory, which
 * would grow memory without end or block forever) no larger than its cap. */
#define ENG_MAX_CONFIG_BYTES (1LL << 20)    /* an experiment file */
#define ENG_MAX_CSV_BYTES (1LL << 30)       /* a CSV dataset */
#define ENG_MAX_IDX_BYTES (4LL << 30)       /* an IDX file, gzipped or not, on disk */
/* Opens path for reading; checks after the open (fstat of the open descriptor, so no
 * race with a rename) that it is a regular file of at most max_bytes. what names the
 * file in messages ("experiment file"). Returns the descriptor (caller closes) and the
 * size in *size, or -1 with the reason in eng_error(). A FIFO is opened without blocking. */
int eng_open_input(const char *path, long long max_bytes, const char *what, long long *size);

/* Base name of a path without its directory (points into path). */
const char *eng_data_basename(const char *path);

#endif
