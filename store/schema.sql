-- schema.sql — nnbench's SQLite schema, version 5 (PRAGMA user_version = 5).
-- Embedded in nnbench at build time (store/schema.c). Times are unix seconds
-- (REAL); durations are seconds; unknown values are NULL. NaN/Inf metric values are
-- stored as NULL (SQLite has no NaN). Statuses are stored by name:
-- running | finished | failed | diverged | interrupted | crashed.
-- nnbench turns foreign keys on in the connections it opens (its writer thread checks once
-- per batch instead, in the same transaction): deleting a run deletes its rows, and no row
-- can name a run that does not exist.

-- One row per training run (one variant of one experiment file).
CREATE TABLE IF NOT EXISTS runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- the run id users type; never reused
    name             TEXT NOT NULL,             -- [experiment] name
    variant          TEXT NOT NULL DEFAULT '',  -- [variant NAME], '' if none
    exp_path         TEXT,                      -- experiment file path
    exp_text         TEXT,                      -- the experiment file's full text
    seed             INTEGER,
    status           TEXT NOT NULL DEFAULT 'running',
    error            TEXT,                      -- why it failed/diverged/stopped/crashed
    started          REAL NOT NULL,
    ended            REAL,
    host             TEXT,
    pid              INTEGER,
    version          TEXT,                      -- nnbench version
    optimizer        TEXT,
    dataset          TEXT,
    model            TEXT,                      -- model summary
    n_params         INTEGER,
    threads          INTEGER,                   -- BLAS threads
    total_steps      INTEGER,                   -- planned
    n_train          INTEGER,
    n_test           INTEGER,
    target_loss      REAL,
    -- summary (refreshed at each flush while running, final at the end): fast `list`
    steps            INTEGER,
    epochs           INTEGER,
    wall_s           REAL,
    hybrid_s         REAL,                      -- Q-Newton hybrid clock
    final_train_loss REAL,
    best_train_loss  REAL,
    final_test_loss  REAL,
    final_test_acc   REAL,
    best_test_acc    REAL,
    samples_per_s    REAL,
    steps_to_target  INTEGER,                   -- NULL: target not reached / none
    wall_to_target   REAL,
    hybrid_to_target REAL,
    peak_bytes       INTEGER,                   -- engine allocations
    peak_rss         INTEGER,                   -- process peak RSS
    solves           INTEGER,                   -- Newton linear solves
    quantum_solves   INTEGER,
    kappa_first      REAL,
    kappa_last       REAL
);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);

-- Resolved config keys of a run ("train.lr" = "0.1"), defaults included.
CREATE TABLE IF NOT EXISTS params (
    run   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key   TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (run, key)
) WITHOUT ROWID;

-- Metric points, long format: one row per (run, key, step) — a later value for the same
-- step replaces the earlier one. Clustered on (run, key, step): one curve is one range.
-- key: train_loss train_acc test_loss test_acc lr samples_per_s ...
CREATE TABLE IF NOT EXISTS metrics (
    run    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    step   INTEGER NOT NULL,
    epoch  INTEGER,
    wall   REAL,                                -- seconds since run start
    hybrid REAL,                                -- Q-Newton hybrid clock
    value  REAL,
    PRIMARY KEY (run, key, step)
) WITHOUT ROWID;

-- The profiler's rows of a run (one per op/phase/step scope), as prof_row.
-- Hardware counter columns are NULL when the machine did not count them.
CREATE TABLE IF NOT EXISTS op_stats (
    run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,                 -- "dense.fwd", "forward", "step"
    layer        TEXT NOT NULL DEFAULT '',
    kind         INTEGER NOT NULL,              -- 0 op, 1 phase, 2 step
    calls        INTEGER,
    total_ns     INTEGER,
    self_ns      INTEGER,
    min_ns       INTEGER,
    max_ns       INTEGER,
    flops        INTEGER,
    bytes        INTEGER,
    cycles       INTEGER,
    instructions INTEGER,
    l1d_miss     INTEGER,
    l2_miss      INTEGER,
    l3_miss      INTEGER,
    fp_ops       INTEGER,
    self_mem     INTEGER,
    peak_mem     INTEGER
);
CREATE INDEX IF NOT EXISTS op_stats_run ON op_stats(run);

-- The profiler's summary of a run, as prof_summary.
CREATE TABLE IF NOT EXISTS run_profile (
    run               INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    total_self_ns     INTEGER,
    overhead_ns       INTEGER,
    events            INTEGER,
    hw_counters       INTEGER,                  -- hardware counters counted (0 on VMs)
    counters_note     TEXT,
    counters_used     TEXT,
    peak_bytes        INTEGER,
    live_bytes        INTEGER,
    total_alloc_bytes INTEGER,
    peak_rss          INTEGER,
    peak_gflops       REAL
);

-- One row per Newton linear solve H d = -g, as qm_solve_event (times in ns).
CREATE TABLE IF NOT EXISTS solver_events (
    run                   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step                  INTEGER NOT NULL,
    block                 INTEGER NOT NULL,
    n                     INTEGER,
    nnz_per_row           REAL,
    kappa_fro             REAL,
    kappa_lapack          REAL,
    kappa_gersh           REAL,
    kappa_exact           REAL,
    kappa_used            REAL,
    est_ns                REAL,
    route                 INTEGER,              -- 0 classical, 1 quantum
    pred_classical_ns     REAL,
    pred_quantum_ns       REAL,
    measured_classical_ns REAL,
    simulated_quantum_ns  REAL,
    residual              REAL,
    shift                 REAL,
    shift_raised          INTEGER
);
CREATE INDEX IF NOT EXISTS solver_events_run ON solver_events(run, step, block);

-- Facts about the machine a run ran on: cpu, cores, blas_core, blas_threads,
-- papi_hw_counters, counters_note ...
CREATE TABLE IF NOT EXISTS system_info (
    run   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key   TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (run, key)
) WITHOUT ROWID;

-- ---- version 3 (issue 14): checkpoints and int8 quantizations --------------------------
-- (embedded as its own string too: the v2 -> v3 migration runs it.)

-- A run's checkpoints: the engine's state as one opaque record (engine/checkpoint.c:
-- magic, version, checksum, parameters, optimizer and loop state). The store never reads
-- inside; it keeps the latest two per run (the newer one may be the one being written).
CREATE TABLE IF NOT EXISTS checkpoints (
    run     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step    INTEGER NOT NULL,                    -- steps done when it was taken
    epoch   INTEGER,                             -- epochs done
    created REAL,
    bytes   INTEGER,                             -- length(data)
    data    BLOB NOT NULL,
    PRIMARY KEY (run, step)
);

-- int8 post-training quantizations of a run's last checkpoint: fp32 and int8 side by side.
CREATE TABLE IF NOT EXISTS quantizations (
    id            INTEGER PRIMARY KEY,
    run           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    created       REAL,
    step          INTEGER,                       -- the checkpoint quantized
    scheme        TEXT,                          -- minmax | percentile
    calibrate     INTEGER,                       -- training samples for activation ranges
    kernel        TEXT,                          -- int8 GEMM used (and the ISA path)
    fp32_bytes    INTEGER,                       -- parameters as float32
    int8_bytes    INTEGER,                       -- int8 weights + int32 biases + scales
    fp32_loss     REAL,
    int8_loss     REAL,
    fp32_acc      REAL,
    int8_acc      REAL,
    fp32_sps_b1   REAL,                          -- inference samples/s, batch 1
    int8_sps_b1   REAL,
    fp32_sps_b128 REAL,                          -- inference samples/s, batch 128
    int8_sps_b128 REAL
);
CREATE INDEX IF NOT EXISTS quantizations_run ON quantizations(run);

-- The int8 inference path's profile of one quantization (quantize, gemm_s8, requantize...).
CREATE TABLE IF NOT EXISTS quant_ops (
    quant    INTEGER NOT NULL REFERENCES quantizations(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    layer    TEXT NOT NULL DEFAULT '',
    calls    INTEGER,
    total_ns INTEGER,
    self_ns  INTEGER
);
CREATE INDEX IF NOT EXISTS quant_ops_quant ON quant_ops(quant);

-- ---- version 4 (issue 11): the profiler's software columns -------------------------------
-- (embedded as its own string too: the v3 -> v4 migration runs it.)
-- NULL in rows written before, and where the machine does not count them.
ALTER TABLE op_stats ADD COLUMN cpu_ns INTEGER; -- process CPU ns (all threads) during the scope's total time
ALTER TABLE op_stats ADD COLUMN faults INTEGER; -- page faults, profiling thread
ALTER TABLE op_stats ADD COLUMN csw    INTEGER; -- context switches, profiling thread

-- ---- version 5 (issue 22): the fingerprint of a run's data ---------------------------------
-- (embedded as its own string too: the v4 -> v5 migration runs it.)
-- The engine's one-line fingerprint of the loaded data (row counts, shape and a checksum of
-- each array: "nnbd1 rows=..."); the store keeps it as text and never reads inside. `resume`
-- compares it with the data it loads again. NULL for runs stored before, and graph runs.
ALTER TABLE runs ADD COLUMN data_fingerprint TEXT;
