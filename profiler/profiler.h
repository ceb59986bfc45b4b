/* profiler.h — op/phase/step scopes timed with PAPI, hardware counters where present,
 * software counters (FLOPs, bytes, memory) also published as PAPI SDEs, traces.
 * The one public header of profiler/; depends on nothing else of nnbench.
 *
 * How to use:
 *   prof_t *p = prof_create(&(prof_options){ .counters = "" }); // NULL: see prof_error()
 *   int id = prof_register(p, "dense.fwd", "dense1", PROF_OP);   // once, at build time
 *   prof_begin(p, id); ...work...; prof_end(p, id, flops, bytes);
 *   prof_step(p, step);                                          // at each step start
 *   prof_rows(p, PROF_BY_OP, &rows, &n); prof_print_table(stdout, ...); free(rows);
 *   prof_destroy(p);
 * A NULL prof_t* means "profiling off": callers guard with PROF_BEGIN/PROF_END, which cost
 * one predictable branch. Nothing here allocates per event.
 *
 * Memory accounting: every engine allocation goes through prof_malloc/prof_calloc/
 * prof_free, which keep process-wide live/peak/total byte counts (atomics) and charge the
 * bytes to the innermost open scope of the calling thread's profiler, if any.
 *
 * Counters: the default set is PAPI's hardware presets (cycles, instructions, cache misses,
 * FP ops). Where no hardware event can be added (perf_event disabled, or a VM without a PMU)
 * it falls back to the kernel's software events through the same PAPI event set
 * (perf::TASK-CLOCK, PAGE-FAULTS, CONTEXT-SWITCHES, CPU-MIGRATIONS): these count the thread
 * that created the profiler. Independently of PAPI, every scope also samples the process
 * CPU clock (all threads: OpenBLAS workers, the prefetch thread) for the `cpu` column: its
 * first call, then about one call per 1000 sampled calls' reads' worth of its wall time
 * (see cpu_ns).
 * prof_summary.hw_note / sw_note say what is counted and, if nothing, why not.
 * Environment: NNBENCH_PAPI_DISABLE=perf_event[,COMPONENT...] disables PAPI components before
 * PAPI initialises (forces the "no counters" path); NNBENCH_PROF_HW_EVENTS=A,B replaces the
 * default hardware presets (a name that does not exist forces the software fallback).
 *
 * PAPI Software Defined Events of this process (readable with PAPI_add_named_event once a
 * profiler was created): sde:::nnbench::flops and ::bytes (sums of prof_end's counts),
 * ::live_bytes, ::peak_bytes (instant), ::alloc_bytes (bytes ever allocated).
 */
#ifndef NNBENCH_PROFILER_H
#define NNBENCH_PROFILER_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct prof prof_t;

typedef enum { PROF_OP = 0, PROF_PHASE = 1, PROF_STEP = 2 } prof_kind;

typedef struct {
    const char *counters;     /* comma-separated PAPI event names; NULL or "" = default set */
    const char *trace_path;   /* Chrome trace JSON written at prof_destroy/prof_trace_write; NULL = none */
    long trace_first, trace_last; /* step window for the trace (inclusive, 1-based) */
    int quiet;                /* 1: no "no hardware counters" notice in prof_warnings */
    size_t trace_capacity;    /* trace events buffered (preallocated at create); 0 = 65536 */
} prof_options;

/* NULL on error (message in prof_error()). A machine without hardware counters is not an
 * error: the profiler notes it (prof_summary.counters_note) and counts time + software. */
prof_t *prof_create(const prof_options *opt);
/* Frees p; writes the trace first when trace_path was set and prof_trace_write has not
 * run. 0 ok, -1 when that write failed (prof_error() says why). NULL is fine. */
int prof_destroy(prof_t *p);
const char *prof_error(void);
/* What the profiler would have warned about at create (counters that cannot be counted,
 * unknown columns, and once per process the "no hardware counters" notice unless quiet):
 * lines starting "profiler: ", "" when none. The profiler never prints; callers say these. */
const char *prof_warnings(const prof_t *p);

/* Registers a scope; returns its id (>= 0) or -1 if the table is full. name is the op or
 * phase ("dense.fwd", "forward", "step"); layer may be NULL ("dense1"). Strings copied. */
int prof_register(prof_t *p, const char *name, const char *layer, prof_kind kind);
void prof_begin(prof_t *p, int id);
/* flops/bytes: software counts for this call, computed by the caller from shapes. */
void prof_end(prof_t *p, int id, uint64_t flops, uint64_t bytes);
void prof_step(prof_t *p, long step);

#define PROF_BEGIN(p, id) do { if (p) prof_begin((p), (id)); } while (0)
#define PROF_END(p, id, flops, bytes) do { if (p) prof_end((p), (id), (flops), (bytes)); } while (0)

/* One row of the profile (aggregated per scope, per layer or per op name). */
typedef struct {
    char name[48];
    char layer[32];
    prof_kind kind;
    uint64_t calls;
    uint64_t total_ns, self_ns, min_ns, max_ns;
    uint64_t flops, bytes;
    /* hardware counters: -1 when not counted on this machine */
    int64_t cycles, instructions, l1d_miss, l2_miss, l3_miss, fp_ops;
    /* kernel software events through PAPI (the profiler's thread only): -1 when not counted */
    int64_t task_clock_ns, faults, csw, migrations;
    int64_t self_mem;         /* bytes allocated inside the scope itself */
    int64_t peak_mem;         /* peak live bytes seen while the scope was open */
    /* process CPU time (every thread) while the scope was open (nested scopes included),
     * estimated from a sample of the calls (the first, then about one per 1000 sampled calls'
     * reads' worth of the scope's wall time; long scopes: every call), scaled by total_ns over their
     * wall time; -1 when unknown. The `cpu` column is cpu_ns / total_ns: 1.00 = one core. */
    int64_t cpu_ns;
} prof_row;

typedef struct {
    uint64_t total_self_ns;   /* sum of self time over all rows */
    uint64_t overhead_ns;     /* the profiler's own time: ns_per_event x events + sample_ns */
    uint64_t events;
    int hw_counters;          /* how many hardware events are being counted (usable, not listed) */
    int sw_counters;          /* how many kernel software events (perf::...) are being counted */
    char hw_note[384];        /* "hardware events: 6 counted (...)" or "... none usable (why)" */
    char sw_note[384];        /* "software events: ... counted ..." or "... none (why)" */
    char counters_note[800];  /* hw_note; sw_note (what the store keeps) */
    char counters_used[256];  /* comma-separated names counted */
    size_t peak_bytes, live_bytes, total_alloc_bytes; /* since prof_create (it resets the peak) */
    size_t peak_rss;          /* process peak RSS, bytes */
    double peak_gflops;       /* calibrated sgemm peak, 0 if not calibrated */
    double bw_gbs;            /* calibrated memory bandwidth GB/s, 0 if not measured */
    double ns_per_event;      /* measured cost of one begin+end pair (at prof_create), without
                                 CPU clock reads */
    uint64_t cpu_reads;       /* sampled scope calls: they read the process CPU clock (twice
                                 each) and, where faults/csw come from it, getrusage (twice) */
    double ns_per_cpu_read;   /* measured cost of one process CPU clock read */
    uint64_t sample_ns;       /* wall time the sampled calls' reads took (timed as they ran;
                                 part of overhead_ns) */
    uint64_t unbalanced;      /* prof_end calls that did not match the open scope (ignored) */
    char clock[160];          /* "PAPI_get_real_nsec" or "clock_gettime (PAPI unavailable: ...)" */
} prof_summary;

typedef enum { PROF_BY_SCOPE, PROF_BY_OP, PROF_BY_LAYER, PROF_BY_PHASE } prof_group;

/* Aggregated rows (malloc'd, caller frees) sorted by self time, descending. */
int prof_rows(prof_t *p, prof_group by, prof_row **rows, size_t *n);
/* The same grouping of rows already made per scope (a stored profile: store_op_row is
 * prof_row): by op (layers merged), layer (ops merged), phase (the non-op scopes) or
 * scope (as given). Sorted by self time; malloc'd, caller frees. 0 ok, -1 out of memory. */
int prof_rows_group(const prof_row *in, size_t n_in, prof_group by, prof_row **rows, size_t *n);
void prof_summary_get(prof_t *p, prof_summary *s);

/* Sort keys and groupings as the CLI spells them: "self", "total", "calls", "avg",
 * "flops", "bytes", "mem", "name"; "op", "layer", "phase", "scope". 0 ok, -1 unknown. */
typedef enum { PROF_SORT_SELF, PROF_SORT_TOTAL, PROF_SORT_CALLS, PROF_SORT_AVG,
               PROF_SORT_FLOPS, PROF_SORT_BYTES, PROF_SORT_MEM, PROF_SORT_NAME,
               PROF_SORT_GFLOPS, /* the GFLOP/s column: flops / total time */
               PROF_SORT_INTENSITY, /* FLOP/B: flops / bytes (also orders the bound column) */
               PROF_SORT_GBPS,   /* GB/s (and % bw): bytes / total time */
               PROF_SORT_N } prof_sort;
int prof_sort_parse(const char *s, prof_sort *out);
const char *prof_sort_name(prof_sort s);   /* "self", ...; "?" out of range */
int prof_group_parse(const char *s, prof_group *out);
const char *prof_group_name(prof_group g); /* "scope", "op", ...; "?" out of range */
/* The one sort order of op tables: by the key (numbers largest first), then name, then layer. */
void prof_rows_sort(prof_row *rows, size_t n, prof_sort by);

/* ---- the one op table (table.c) ---------------------------------------------------- */
/* Every op table — `nnbench run --profile`, `nnbench show`, the workbench's Profile tab and
 * New run, the Markdown/HTML reports — is this model rendered: the same columns, in this
 * order, with these words, and cells formatted here. Stored rows are prof_row too
 * (store_op_row is this type). Rows of MPI rank k > 0 are named "rankK:name" (engine/dist.c);
 * the model shows the rank in its own column and the name without the prefix.
 * How to add a column: docs/architecture.md. */
typedef enum {
    PROF_COL_NAME, PROF_COL_LAYER, PROF_COL_RANK, PROF_COL_SELF_PCT, PROF_COL_SELF, PROF_COL_TOTAL,
    PROF_COL_AVG, PROF_COL_CALLS, PROF_COL_GFLOPS, PROF_COL_PEAK_PCT, PROF_COL_IPC, PROF_COL_L1MISS,
    PROF_COL_CPU, PROF_COL_FAULTS, PROF_COL_CSW, PROF_COL_BYTES, PROF_COL_GBPS, PROF_COL_SELF_MEM, PROF_COL_PEAK_MEM,
    /* the roofline view, last so that they are the first to go on a narrow terminal */
    PROF_COL_INTENSITY, PROF_COL_BW_PCT, PROF_COL_BOUND,
    PROF_COL_N
} prof_col;

typedef struct {
    const char *title;        /* the header word, the same everywhere: "self %", "GFLOP/s" */
    const char *doc;          /* what the cell is, one line (docs and the help of `show`) */
    int width;                /* text tables: the width of a number column (wider cells widen it);
                                 names and layers: the most they take */
    int min_width;            /* names and layers: what they keep before a column is dropped
                                 (the workbench); numbers are never cut */
    int right;                /* 1: right-aligned (numbers) */
    /* 0: always shown; else shown only when some row has the value (counters not counted,
     * an old schema without cpu_ns/faults/csw, no calibration, one rank) */
    int optional;
} prof_col_def;
extern const prof_col_def prof_cols[PROF_COL_N];

typedef struct {
    const prof_row *rows;     /* in display order (prof_rows_sort) */
    size_t n;
    double self_total_ns;     /* denominator of "self %": the whole profile's self time */
    double peak_gflops;       /* calibrated peak for "% peak"; 0 = none (column absent) */
    double bw_gbs;            /* calibrated memory bandwidth for "% bw" and "bound"; 0 = none
                                 (prof_table_set_bw) */
    unsigned char show[PROF_COL_N]; /* 1: the column has data (prof_table_init decides) */
    /* Rows of several MPI ranks: each rank's own self time is the denominator of its rows'
     * "self %" (prof_balance.self_s); NULL = self_total_ns for every row. Set by the caller. */
    const struct prof_balance *ranks;
} prof_table;

/* The profile's self time no row holds (grouped by op or layer: the time between ops; 0 by
 * phase or scope, or split by rank): the table's "(other / between ops)" row. */
double prof_table_rest_ns(const prof_table *t);

/* Sets t over rows (not copied: they must outlive t). total_self_ns 0 = the sum of the
 * rows' self time; peak_gflops 0 = no calibration. */
void prof_table_init(prof_table *t, const prof_row *rows, size_t n, uint64_t total_self_ns, double peak_gflops);
/* Sets the calibrated memory bandwidth (GB/s; 0 = none) after prof_table_init: "% bw" and,
 * with a calibrated peak too, "bound" then show. show_unknown 1 (a stored run's table):
 * both columns show wherever FLOP/B does, with "-" when the run stored no calibration, so
 * that a run from before calibrations were stored says so instead of losing the columns. */
void prof_table_set_bw(prof_table *t, double bw_gbs, int show_unknown);
/* Roofline class of row r: 1 compute bound (FLOP/byte above the ridge point peak_gflops /
 * bw_gbs), -1 memory bound, 0 unknown (no FLOPs or bytes counted, or no calibration). */
int prof_table_bound(const prof_table *t, const prof_row *r);
/* What a performance engineer should look at, one line each into out (empty: nothing), from
 * a profile's rows as stored (per scope; any grouping of them gives the same lines) and the
 * run's facts: blas_core (OpenBLAS core name, "" = unknown) weaker than cpu_isa (eng_isa_name
 * of the widest ISA: "generic", "avx2", "avx512"); cpu below 1 on a dense (GEMM) op, its
 * layers and ranks summed, while the GEMM runs gemm_threads > 1 threads; data.wait above 5%
 * of total_self_ns (the steps; 0 = the rows' self time). The one source of these warnings:
 * `run --profile`, `show`, the reports and the Profile tab. Returns how many lines. */
int prof_perf_warnings(const prof_row *rows, size_t n, uint64_t total_self_ns, int gemm_threads, const char *blas_core,
                  const char *cpu_isa, char *out, size_t cap);
/* The sort key that orders column c (a click on its header, the sort picker): "self %" and
 * "self" by self, "% peak" by GFLOP/s, "% bw" by GB/s, "bound" by FLOP/B, "self mem" by
 * mem; -1 for a column no key orders (layer, rank, counters, peak mem). */
int prof_col_sort(prof_col c);
/* The text of column c for row r into b (made visible: names come from databases); "-"
 * where the value is not known. Returns b. */
const char *prof_table_cell(const prof_table *t, const prof_row *r, prof_col c, char *b, size_t cap);
/* A row's share of its profile's self time (0..1): what "self %" and the workbench's bar show. */
double prof_table_self_share(const prof_table *t, const prof_row *r);
/* Rank of a row (0 for rows without a "rankK:" prefix); *base (may be NULL) gets the name
 * without the prefix. */
int prof_row_rank(const prof_row *r, const char **base);
/* Text rendering: header, a rule, up to max_rows rows (0 = all), a rule; each line starts
 * with indent. The name column is at most name_max characters (0 = 40). */
void prof_table_print(FILE *f, const prof_table *t, size_t max_rows, size_t name_max, const char *indent);

/* Load balance across MPI ranks, computed in one place for `show`, `project`, the Profile
 * tab and the reports. A rank's compute per step is its `step` scope's total time minus
 * the communication scopes (every scope named "allreduce*": the transfer, the wait for
 * the slower ranks, the loss agreement), divided by its step count; the imbalance is
 * max / mean over ranks of it (1.00 = balanced). */
#define PROF_RANKS_MAX 256
typedef struct prof_balance {
    int ranks;                       /* ranks with a step row; 0 = not profiled per step */
    double compute_s[PROF_RANKS_MAX];/* compute per step of rank k, seconds */
    double comm_s[PROF_RANKS_MAX];   /* allreduce* per step of rank k, seconds */
    long steps[PROF_RANKS_MAX];
    double self_s[PROF_RANKS_MAX];   /* rank k's whole self time (every row of it), seconds */
    double mean_s, max_s, imbalance; /* imbalance NAN with fewer than 2 ranks */
    int slowest;                     /* rank with max_s */
} prof_balance;
void prof_balance_get(const prof_row *rows, size_t n, prof_balance *out);
/* "load imbalance 1.18 (max/mean compute per step over 2 ranks; slowest rank 1: 40.2 ms,
 * mean 34.1 ms)" into b; "" when fewer than 2 ranks. Returns b. */
const char *prof_balance_line(const prof_balance *bal, char *b, size_t cap);

/* Display formats shared by every module (CLI, workbench, reports, this table); each
 * writes into b and returns it; "-" for NaN/inf/negative: "0.1234", "850 ms" / "4.20 s" /
 * "4m05s" / "2h03m", "1.5 KiB". */
const char *prof_fmt_num(char *b, size_t cap, double v);
const char *prof_fmt_duration(char *b, size_t cap, double seconds);
const char *prof_fmt_bytes(char *b, size_t cap, double bytes);

/* The key_averages table of `nnbench run --profile`: the op table above plus a footer
 * with total self time, overhead, memory, what is counted and the clock. max_rows 0 = all. */
void prof_print_table(FILE *f, const prof_row *rows, size_t n, const prof_summary *sum,
                      prof_sort sort, size_t max_rows);
/* Writes the Chrome trace of the configured step window now (also done by prof_destroy
 * when trace_path was set). 0 ok, -1 with prof_error(). */
int prof_trace_write(prof_t *p, const char *path);
/* Counter tracks of the trace ("ph":"C", one track per name, drawn by Perfetto as "NAME
 * SERIES"): a value the caller samples when it knows it (samples/s and the step time at
 * each step's end, the prefetch queue's depth at each batch). Recorded only while the
 * trace's step window is open, else nothing (no cost but a branch). Registering a name
 * again returns its id (a resumed run registers twice); -1 when p is NULL or
 * PROF_TRACE_COUNTERS names are taken. name and series are copied. The live-bytes track
 * ("memory live_bytes") is the profiler's own. */
#define PROF_TRACE_COUNTERS 16
int prof_counter_register(prof_t *p, const char *name, const char *series);
void prof_counter(prof_t *p, int counter, double value);
/* Marks now as an instant every process of a job shares (call it right after a barrier
 * all of them pass); the trace records it, and prof_trace_merge aligns the processes'
 * rows on it. */
void prof_clock_sync(prof_t *p);
/* Joins n traces written by prof_trace_write (e.g. one per MPI rank) into dst, one process
 * row per source named labels[i] (dst may be one of the sources). When every source has a
 * prof_clock_sync mark, the rows are shifted so that the marks coincide; else each row's
 * time 0 is its own profiler's start (the file's otherData says which). 0 ok, -1
 * prof_error(). */
int prof_trace_merge(const char *dst, const char *const *srcs, const char *const *labels, size_t n);

/* ---- calibration and system information (sysinfo.c) ------------------------------- */
/* The machine's measured peak sgemm rate, kept in $XDG_CACHE_HOME/nnbench/calibration
 * (else ~/.cache/nnbench/calibration); prof_create loads it into prof_summary.peak_gflops. */
typedef struct {
    double peak_gflops;       /* best of reps */
    double mean_gflops;
    int m, n, k, reps, threads;
    char core[32];            /* OpenBLAS core, e.g. "Haswell" */
    char when[32];            /* ISO 8601 UTC */
    double bw_gbs;            /* best STREAM-like triad memory bandwidth, GB/s; 0 = not measured
                                 (a calibration file from before it was measured) */
    int bw_mib;               /* MiB per triad buffer (three of them) */
} prof_calibration;
/* Path of the calibration file into buf. 0 ok, -1 when neither XDG_CACHE_HOME nor HOME is set. */
int prof_calibration_path(char *buf, size_t n);
/* 0 loaded, 1 no calibration file, -1 unreadable/malformed (prof_error() says where). */
int prof_calibration_load(prof_calibration *c);
/* Creates the directory as needed. 0 ok, -1 with prof_error(). */
int prof_calibration_save(const prof_calibration *c);
/* Memory bandwidth by a one-thread STREAM triad a[i] = b[i] + s*c[i] over three float buffers
 * of mib MiB each (well beyond the last-level cache for the default 64), best of reps, in
 * GB/s counting 12 bytes per element as STREAM does. 0 ok, -1 with prof_error(). */
int prof_membw_measure(int mib, int reps, double *best_gbs);

typedef struct {
    char name[64];
    char description[128];
    int disabled;             /* 0 enabled; else PAPI's code */
    char disabled_reason[256];
    int counters;             /* hardware counters of the component */
    int native_events, preset_events;
} prof_component;

typedef struct {
    int papi_ok;              /* PAPI_library_init succeeded */
    char papi_version[32];    /* "7.0.0.0" */
    char papi_error[160];     /* why PAPI is unavailable, when !papi_ok */
    char cpu_model[128], vendor[64];
    int cores, threads_per_core, sockets, mhz, in_vm;
    char vm_vendor[64];
    int hw_counters;          /* counters PAPI's perf_event component LISTS (not all usable) */
    char no_counters_reason[256]; /* PAPI's reason when hw_counters == 0 */
    int hw_usable, sw_usable; /* events of the profiler's default set that could be added */
    char hw_note[384], sw_note[384]; /* as prof_summary: what is counted, or why not */
    int n_components;
    prof_component components[16];
    char presets_available[512]; /* comma-separated preset events that can be added */
    int n_presets_available;
    char clock[160];          /* the profiler's clock and why (see prof_summary.clock) */
} prof_sysinfo;
/* Fills s from PAPI (initialising it if needed). 0 ok; -1 if PAPI cannot initialise
 * (papi_error says why; CPU fields then come from /proc/cpuinfo). */
int prof_sysinfo_get(prof_sysinfo *s);
/* The CPU's model name from /proc/cpuinfo into out; 0 ok, -1 when there is none (out ""). */
int prof_cpu_model(char *out, size_t cap);

/* ---- where two threads run (placement.c) ---------------------------------------------
 * The median of v[0..n) (sorted in place), NAN when n is 0: the one median of measured
 * repetitions (the round trip below, the all-reduce's timing). */
double prof_median(double *v, size_t n);
/* The round trip of a cache line between two threads of this process, in ns: `rounds`
 * passes (after an untimed one) timed in blocks of PROF_ROUND_TRIP_BLOCK, the median block
 * per pass, so that the blocks a descheduled thread stretches (other threads of the
 * process spinning, a loaded machine) do not count. ~100 ns when the CPUs the two threads
 * run on share a last-level cache, several hundred when not; every line a split op moves
 * between the threads costs that. Past 200 ms (a busy machine) the blocks done so far
 * count if there are 16 or more; NAN when there are fewer (the two threads did not get two
 * CPUs: one CPU online, or a loaded machine) or their median is over 100 us (time slices,
 * not a cache line). 2000 rounds take ~1-4 ms. */
#define PROF_ROUND_TRIP_BLOCK 16
#define PROF_SHARED_CACHE_NS 250.0
double prof_core_round_trip_ns(long rounds);
/* "shared cache" (under PROF_SHARED_CACHE_NS), "apart", or "unmeasured" (NAN). */
const char *prof_placement_class(double ns);
/* What the round trip says, for sysinfo, a run's header and its record: "CPUs sharing a
 * last-level cache (...)", "CPUs not sharing ..." or "not measured: ...". */
void prof_placement_text(double ns, char *buf, size_t cap);

/* ---- signals and threads (signals.c) --------------------------------------------------
 * A handler that ran on the stack of a thread inside Debian oneDNN 2.6's dnnl_sgemm
 * corrupted the heap (signals.c says how it was found). So:
 * prof_signal_set installs fn for sig like sigaction (flags: SA_RESETHAND, ...; old may be
 * NULL) to run on an alternate stack, which it gives the calling thread if it has none;
 * prof_signals_onstack moves every handler already installed (a library's: ncurses'
 * SIGWINCH, SIGTSTP) onto that stack; both return 0, or -1 when no stack could be set
 * (nothing is installed or moved then: a handler on a GEMM's stack is worse than none).
 * prof_thread_create is pthread_create with every asynchronous signal blocked in the new
 * thread, so that the signals sent to the process reach the thread that set the handlers:
 * every thread nnbench starts is started by it. */
int prof_signal_set(int sig, void (*fn)(int), int flags, struct sigaction *old);
int prof_signals_onstack(void);
int prof_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

/* ---- memory accounting ------------------------------------------------------------- */
void *prof_malloc(size_t n);
void *prof_calloc(size_t count, size_t size);
void prof_free(void *ptr);
size_t prof_mem_live(void);
size_t prof_mem_peak(void);
void prof_mem_reset_peak(void);
size_t prof_peak_rss(void);
/* Bytes ever allocated through prof_malloc/prof_calloc in this process. */
size_t prof_mem_total(void);
/* Charges bytes to scope id's self memory as if allocated inside it: for buffers an op
 * owns that were carved from one block at build time (an attention layer's score matrices),
 * so the op table's memory column shows what the op holds. Nothing for p NULL or id < 0. */
void prof_charge(prof_t *p, int id, size_t bytes);

/* Wall clock in ns (PAPI_get_real_nsec once PAPI is initialised, else CLOCK_MONOTONIC). */
uint64_t prof_now_ns(void);
/* The same clock in seconds: the one clock of the engine's timings and timeouts. */
double prof_now_s(void);

/* ---- text from outside, made inert (text.c) ---------------------------------------- */
/* Here at the bottom layer because every module shows or stores text it did not write.
 * "Hostile" characters are C0/C1 controls and DEL, the bidirectional controls (U+061C,
 * U+200E/F, U+202A-E, U+2066-9) and U+2028/9: a terminal or a page would act on them. */
/* Length (1-4) of the valid, shortest-form UTF-8 sequence at s (n bytes available), its
 * code point in *cp (may be NULL); 0 if s does not start one. */
size_t prof_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Offset of the first byte of s[0..n) that is not valid UTF-8; n when all of it is. */
size_t prof_utf8_check(const char *s, size_t n);
int prof_text_is_hostile(uint32_t cp);
/* The first hostile character or invalid UTF-8 byte of s; NULL when s is clean. */
const char *prof_text_find_unsafe(const char *s);
enum { PROF_TEXT_KEEP_NL = 1,   /* leave '\n' and '\t' as they are (multi-line messages) */
       PROF_TEXT_RIGHT = 2 };   /* prof_text_pad: align right */
/* Terminal cells of code point c: 2 for East Asian wide and fullwidth characters and
 * emoji, else 1 (whatever the locale). Widths below are in cells. */
int prof_text_cell_width(uint32_t c);
/* Copies src into dst (cap bytes, always NUL-terminated) with each hostile character
 * written as \x1b or \u202e and each invalid byte as \xff, at most max_chars cells (a
 * wide character counts two, an escape its length). Never cuts inside an escape (also one
 * already in src, from text made visible before) or a UTF-8 sequence. Returns the cells
 * written. */
size_t prof_text_fit(char *dst, size_t cap, const char *src, size_t max_chars, int flags);
/* prof_text_fit without a length limit; returns dst, for use inside printf arguments. */
const char *prof_text_visible(char *dst, size_t cap, const char *src);
/* Cells s takes on a terminal (prof_text_cell_width; an invalid byte counts one). */
size_t prof_text_chars(const char *s);
/* A table cell: src made visible, cut to width characters and padded with spaces to
 * width (left-aligned, or right with PROF_TEXT_RIGHT) — printf's %-*.*s counts bytes and
 * would cut UTF-8 characters and escapes in half. Returns the bytes written. */
int prof_text_pad(char *dst, size_t cap, const char *src, size_t width, int flags);
/* The width of the terminal f writes to; 0 when f is no terminal (a pipe, a file). */
size_t prof_text_columns(FILE *f);

/* ---- the one JSON writer (json.c) --------------------------------------------------- */
/* Streaming: values go straight to f; the writer places commas, escapes strings (hostile
 * characters as \uXXXX) and replaces invalid UTF-8 by U+FFFD, so output is always valid
 * JSON. Non-finite numbers are written as null. Misuse (a value without a key inside an
 * object, unbalanced closes, nesting deeper than PROF_JSON_MAX_DEPTH) is reported by
 * prof_json_end, as are write errors.
 *   prof_json j; prof_json_begin(&j, f, 0);
 *   prof_json_object(&j); prof_json_kstr(&j, "name", s); prof_json_key(&j, "xs");
 *   prof_json_array(&j); prof_json_num(&j, 1.5); prof_json_close(&j); prof_json_close(&j);
 *   if (prof_json_end(&j)) ...                                                           */
#define PROF_JSON_MAX_DEPTH 32
typedef struct {
    FILE *f;
    int pretty;               /* 1: two-space indentation, one member per line */
    int depth, after_key, done, bad;
    unsigned char is_obj[PROF_JSON_MAX_DEPTH];
    size_t count[PROF_JSON_MAX_DEPTH];
} prof_json;
void prof_json_begin(prof_json *j, FILE *f, int pretty);
void prof_json_object(prof_json *j);
void prof_json_array(prof_json *j);
void prof_json_close(prof_json *j);   /* closes the innermost object or array */
void prof_json_key(prof_json *j, const char *key);
void prof_json_str(prof_json *j, const char *s);          /* NULL writes "" */
void prof_json_strn(prof_json *j, const char *s, size_t n);
void prof_json_num(prof_json *j, double v);               /* %.17g: round-trips */
void prof_json_numg(prof_json *j, double v, int digits);  /* %.*g */
void prof_json_int(prof_json *j, long long v);
void prof_json_uint(prof_json *j, unsigned long long v);
void prof_json_bool(prof_json *j, int v);
void prof_json_null(prof_json *j);
void prof_json_kstr(prof_json *j, const char *key, const char *s);
void prof_json_knum(prof_json *j, const char *key, double v);
void prof_json_kint(prof_json *j, const char *key, long long v);
/* 0 when exactly one complete value was written and f had no error; else -1. */
int prof_json_end(prof_json *j);

#endif
