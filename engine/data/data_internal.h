/* data_internal.h — what the dataset files (data.c, data_idx.c, data_csv.c, batcher.c)
 * share: seed streams, the loaders' entry points and small allocation helpers. Private. */
#ifndef NNBENCH_ENGINE_DATA_INTERNAL_H
#define NNBENCH_ENGINE_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../core.h"

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
/* Frees ds->x_codes (data_codes.c's byte copy) unless it lies in a mapped cache file
 * (ds->map, a hit: data_cache.c), and clears it. */
void eng_data_codes_free(eng_dataset *ds);

/* Asks for huge pages over the whole 2 MiB pages inside [p, p + n), a large array written
 * once (the inputs, their byte copy): in a VM each 4 KiB page's first touch cost
 * microseconds, and Fashion-MNIST's 188 MB of inputs took longer to fault in than to read
 * (loading it went from 1.1 s to 0.5-1.0 s). Advice only: without THP, ordinary pages. */
void eng_data_advise_huge(void *p, size_t n);

/* Loaders fill ds (shape, labels/targets, train and possibly test arrays). *split is set
 * to 1 when the source had no separate test set, so that data.c splits the training
 * arrays by test_fraction (and then applies the n / n_test caps). */
int eng_data_load_idx(const eng_data_config *dc, eng_dataset *ds, int *split);
int eng_data_load_csv(const eng_data_config *dc, eng_dataset *ds, int *split);
/* data_seq.c: the markers generator (fills the training arrays; data.c splits them) and
 * the sequence views of image data (data.sequence), applied to both splits. */
int eng_data_gen_markers(const eng_data_config *dc, uint64_t seed, eng_dataset *ds);
int eng_data_seq_view(const eng_data_config *dc, eng_dataset *ds);

/* data_codes.c: keeps ds->x_codes, a byte copy of the training inputs, when every value
 * is (float)(c * k) for a byte c and one k (1 or 1/255: IDX images), checked value by
 * value; otherwise (or without memory for it) leaves it NULL. eng_data_decode writes
 * (float)(c[i] * k) for i < n, vectorised on the machine's ISA path, the same bits on each. */
void eng_data_codes_build(eng_dataset *ds);
/* 1 when k is a scale the byte copy is made with (a cache file's trailer is checked). */
int eng_data_code_scale_known(double k);
void eng_data_decode(const uint8_t *restrict c, size_t n, double k, float *restrict out);

/* With prefetch: how many rows the prefetch thread copied and how many the caller of
 * eng_batcher_next copied itself (batches or chunks the thread had not got to); 0 and 0
 * without prefetch. For the profiler's byte counts, tests and measurements. */
void eng_batcher_gather_counts(eng_batcher *b, long *by_thread, long *by_caller);
/* Gathers each next batch ahead on the engine's pool, in the time its workers wait for a
 * job (eng_pool_set_idle), into a second slot, with no thread of its own: what a prefetch
 * thread does, without a third thread on cores that two compute threads fill. Only before
 * the first batch, without prefetch, throttling or a full batch, with 2+ pool threads, and
 * while no other batcher has the pool's idle time: 1 if switched, else 0 (and nothing
 * changed). Batches and their order are those of the batcher gathering on its own.
 * eng_batcher_prefetching: batches are gathered ahead (a thread, or the pool). */
int eng_batcher_gather_on_pool(eng_batcher *b);
int eng_batcher_prefetching(const eng_batcher *b);
/* Tests only: called by a caller whose wait for the prefetch thread timed out, just before
 * it takes the batcher's mutex again (a sleep here opens the window in which the thread
 * completes batches unobserved). NULL in the product. */
extern void (*eng_batcher_test_pause)(void);

/* A whole field as a finite number: 1 and *out, or 0 for text, an empty field, nan or inf
 * (the one number check of the CSV and graph loaders). */
int eng_parse_number(const char *s, double *out);

/* Input files: each must be a regular file (not /dev/zero, a FIFO or a directory, which
 * would grow memory without end or block forever) no larger than its cap. */
#define ENG_MAX_CONFIG_BYTES (1LL << 20)    /* an experiment file */
#define ENG_MAX_CSV_BYTES (1LL << 30)       /* a CSV dataset */
#define ENG_MAX_IDX_BYTES (4LL << 30)       /* an IDX file, gzipped or not, on disk */
#define ENG_MAX_GRAPH_BYTES (4LL << 30)     /* a graph file: edges, features, labels, a mask */
#define ENG_GRAPH_MAX_LINE (1 << 22)        /* bytes of one line of a graph file */
/* Opens path for reading; checks after the open (fstat of the open descriptor, so no
 * race with a rename) that it is a regular file of at most max_bytes. what names the
 * file in messages ("experiment file"). Returns the descriptor (caller closes) and the
 * size in *size, or -1 with the reason in eng_error(). A FIFO is opened without blocking. */
int eng_open_input(const char *path, long long max_bytes, const char *what, long long *size);

/* ---- input pipeline (pipeline.c, data_cache.c) ------------------------------------- */

#define ENG_PREFETCH_MAX 8                    /* data.prefetch_depth's upper bound */
#define ENG_STREAM_DATA_AUGMENT 0x44415531ull /* "DAU1": per-row augmentation draws */

/* data.augment parsed: "shift:N, flip" in any order, "none" or "" for nothing. */
typedef struct { int shift, flip; } eng_augment;
/* 0, or -1 with a reason in why ("'rotate' is not a transform; use shift:N or flip"). */
int eng_augment_parse(const char *s, eng_augment *out, char *why, size_t cap);
static inline int eng_augment_on(const eng_augment *a) { return a->shift > 0 || a->flip; }
/* Writes row src (one sample of shape C,H,W) transformed into dst: the transform of the
 * sample at position pos of the training stream (batch index * batch + row), drawn from
 * its own seeded generator, so the result never depends on which thread gathers it.
 * Pixels shifted in take the value of the image's corner pixel (its background). */
void eng_augment_row(const eng_augment *a, const int shape[3], uint64_t seed, uint64_t pos,
                     const float *src, float *dst);

/* A throttled source: every read of `bytes` (plus `latency_ns` once per batch) occupies the
 * one simulated device for bytes / rate; readers queue behind each other, so two threads
 * reading at once still share one rate. Sleeps until this read's turn is over. */
typedef struct eng_throttle eng_throttle;
eng_throttle *eng_throttle_new(double mbps);   /* mbps 0: latency only; NULL = out of memory */
void eng_throttle_free(eng_throttle *t);
void eng_throttle_read(eng_throttle *t, size_t bytes, int64_t latency_ns);

/* What the batcher does besides gathering (the public eng_batcher_create: all off). */
typedef struct {
    int shuffle, prefetch;
    int depth;                /* prefetch: batches ready ahead, 1..ENG_PREFETCH_MAX */
    eng_augment augment;
    double read_mbps, read_latency_ms;
    /* The training thread's profiler and scopes for its waiting (throttled reads, waits
     * for the prefetch thread) and its own copying; prof NULL = none. */
    prof_t *prof;
    int wait_scope, gather_scope;
    /* Data-parallel: this rank serves rows [G*rank/size, G*(rank+1)/size) of every global
     * batch of G rows (same permutation and augmentation as one process); size 0 or 1 = all. */
    int shard_rank, shard_size;
    /* Start at this batch index (0-based: steps already taken), serving the batches an
     * uninterrupted batcher serves from there on (resume from a checkpoint). */
    long start;
} eng_batcher_options;
int eng_batcher_create_opts(const eng_dataset *ds, int batch, const eng_batcher_options *o,
                            uint64_t seed, eng_batcher **out);
/* Data-parallel (dist.balance = measured): this rank serves the fraction [lo, hi) of the
 * global batch of G rows, rows [round(G lo), round(G hi)), from the first batch that no
 * rank can have set up yet (the batch nslots after the one the caller holds; call it
 * after every step, every rank with the same step's partition, so that each batch has
 * one). Returns that batch's index; -1 (nothing to do) for one process. */
long eng_batcher_set_share(eng_batcher *b, double lo, double hi);

/* data.cache: the cache file for dc (path into buf), its state after eng_data_load. */
typedef enum { ENG_CACHE_OFF, ENG_CACHE_HIT, ENG_CACHE_WRITTEN } eng_cache_state;
/* Loads ds from dc's cache file if its key matches (sources' sizes and mtimes, every data
 * key that shapes the arrays) and it is intact: *hit = 1 and ds holds the arrays, read
 * into a private region (ds->map; its sums set). A damaged file is a miss too: eng_data_cache_damage then says why. */
int eng_data_cache_load(const eng_data_config *dc, uint64_t seed, eng_dataset *ds, int *hit);
/* Writes the loaded, normalised ds as dc's cache file (temporary file + rename); sets
 * ds's sums. */
int eng_data_cache_store(const eng_data_config *dc, uint64_t seed, eng_dataset *ds);
/* The cache file's path for dc into buf. -1 with a message when no directory is known. */
int eng_data_cache_path(const eng_data_config *dc, uint64_t seed, char *buf, size_t cap);
/* Frees the region of a cache hit's arrays (eng_data_free does). */
void eng_data_cache_unmap(eng_dataset *ds);
/* What the last eng_data_load on this thread did with the cache. */
eng_cache_state eng_data_cache_last(void);
void eng_data_cache_note(eng_cache_state s);
/* The note of the last eng_data_load on this thread when it found its cache file damaged
 * ("data.cache: PATH was damaged (why); rebuilt from the source"), else NULL. */
const char *eng_data_cache_damage(void);

/* The text of every [data] key that shapes the loaded arrays, "data.KEY=VALUE\n" each, in
 * key-table order (config.c): every [data] key except those that only say how batches are
 * served. -1 (eng_error) when it does not fit in cap. */
int eng_data_key(const eng_data_config *dc, char *buf, size_t cap, size_t *len);
/* 0 for a [data] key (without "data.") that only acts on how batches are served. */
int eng_data_key_shapes_data(const char *key);

/* A 64-bit checksum at memory speed (not cryptographic): of the cache's arrays and keys. */
uint64_t eng_data_hash(const void *p, size_t n);
/* The same with the portable code forced (generic = 1), for the test that both agree. */
uint64_t eng_data_hash_path(const void *p, size_t n, int generic);
/* Sets ds->sum (eng_data_hash of each array) unless already set. */
void eng_data_sums(eng_dataset *ds);

/* eng_batcher_create, starting at batch index start (0-based; start = steps already
 * taken): the batches served are those an uninterrupted batcher serves from there on. */
int eng_batcher_create_at(const eng_dataset *ds, int batch, int shuffle, int prefetch,
                          uint64_t seed, long start, eng_batcher **out);

/* Base name of a path without its directory (points into path). */
const char *eng_data_basename(const char *path);

#endif
