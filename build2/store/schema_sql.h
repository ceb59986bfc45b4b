/* Generated from store/schema.sql by scripts/embed_schema.awk: do not edit. */
#define SCHEMA_BASE \
    "-- schema.sql — nnbench's SQLite schema, version 5 (PRAGMA user_version = 5).\n" \
    "-- Embedded in nnbench at build time (store/schema.c). Times are unix seconds\n" \
    "-- (REAL); durations are seconds; unknown values are NULL. NaN/Inf metric values are\n" \
    "-- stored as NULL (SQLite has no NaN). Statuses are stored by name:\n" \
    "-- running | finished | failed | diverged | interrupted | crashed.\n" \
    "-- nnbench turns foreign keys on in the connections it opens (its writer thread checks once\n" \
    "-- per batch instead, in the same transaction): deleting a run deletes its rows, and no row\n" \
    "-- can name a run that does not exist.\n" \
    "\n" \
    "-- One row per training run (one variant of one experiment file).\n" \
    "CREATE TABLE IF NOT EXISTS runs (\n" \
    "    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- the run id users type; never reused\n" \
    "    name             TEXT NOT NULL,             -- [experiment] name\n" \
    "    variant          TEXT NOT NULL DEFAULT '',  -- [variant NAME], '' if none\n" \
    "    exp_path         TEXT,                      -- experiment file path\n" \
    "    exp_text         TEXT,                      -- the experiment file's full text\n" \
    "    seed             INTEGER,\n" \
    "    status           TEXT NOT NULL DEFAULT 'running',\n" \
    "    error            TEXT,                      -- why it failed/diverged/stopped/crashed\n" \
    "    started          REAL NOT NULL,\n" \
    "    ended            REAL,\n" \
    "    host             TEXT,\n" \
    "    pid              INTEGER,\n" \
    "    version          TEXT,                      -- nnbench version\n" \
    "    optimizer        TEXT,\n" \
    "    dataset          TEXT,\n" \
    "    model            TEXT,                      -- model summary\n" \
    "    n_params         INTEGER,\n" \
    "    threads          INTEGER,                   -- BLAS threads\n" \
    "    total_steps      INTEGER,                   -- planned\n" \
    "    n_train          INTEGER,\n" \
    "    n_test           INTEGER,\n" \
    "    target_loss      REAL,\n" \
    "    -- summary (refreshed at each flush while running, final at the end): fast `list`\n" \
    "    steps            INTEGER,\n" \
    "    epochs           INTEGER,\n" \
    "    wall_s           REAL,\n" \
    "    hybrid_s         REAL,                      -- Q-Newton hybrid clock\n" \
    "    final_train_loss REAL,\n" \
    "    best_train_loss  REAL,\n" \
    "    final_test_loss  REAL,\n" \
    "    final_test_acc   REAL,\n" \
    "    best_test_acc    REAL,\n" \
    "    samples_per_s    REAL,\n" \
    "    steps_to_target  INTEGER,                   -- NULL: target not reached / none\n" \
    "    wall_to_target   REAL,\n" \
    "    hybrid_to_target REAL,\n" \
    "    peak_bytes       INTEGER,                   -- engine allocations\n" \
    "    peak_rss         INTEGER,                   -- process peak RSS\n" \
    "    solves           INTEGER,                   -- Newton linear solves\n" \
    "    quantum_solves   INTEGER,\n" \
    "    kappa_first      REAL,\n" \
    "    kappa_last       REAL\n" \
    ");\n" \
    "CREATE INDEX IF NOT EXISTS runs_status ON runs(status);\n" \
    "\n" \
    "-- Resolved config keys of a run (\"train.lr\" = \"0.1\"), defaults included.\n" \
    "CREATE TABLE IF NOT EXISTS params (\n" \
    "    run   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    key   TEXT NOT NULL,\n" \
    "    value TEXT,\n" \
    "    PRIMARY KEY (run, key)\n" \
    ") WITHOUT ROWID;\n" \
    "\n" \
    "-- Metric points, long format: one row per (run, key, step) — a later value for the same\n" \
    "-- step replaces the earlier one. Clustered on (run, key, step): one curve is one range.\n" \
    "-- key: train_loss train_acc test_loss test_acc lr samples_per_s ...\n" \
    "CREATE TABLE IF NOT EXISTS metrics (\n" \
    "    run    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    key    TEXT NOT NULL,\n" \
    "    step   INTEGER NOT NULL,\n" \
    "    epoch  INTEGER,\n" \
    "    wall   REAL,                                -- seconds since run start\n" \
    "    hybrid REAL,                                -- Q-Newton hybrid clock\n" \
    "    value  REAL,\n" \
    "    PRIMARY KEY (run, key, step)\n" \
    ") WITHOUT ROWID;\n" \
    "\n" \
    "-- The profiler's rows of a run (one per op/phase/step scope), as prof_row.\n" \
    "-- Hardware counter columns are NULL when the machine did not count them.\n" \
    "CREATE TABLE IF NOT EXISTS op_stats (\n" \
    "    run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    name         TEXT NOT NULL,                 -- \"dense.fwd\", \"forward\", \"step\"\n" \
    "    layer        TEXT NOT NULL DEFAULT '',\n" \
    "    kind         INTEGER NOT NULL,              -- 0 op, 1 phase, 2 step\n" \
    "    calls        INTEGER,\n" \
    "    total_ns     INTEGER,\n" \
    "    self_ns      INTEGER,\n" \
    "    min_ns       INTEGER,\n" \
    "    max_ns       INTEGER,\n" \
    "    flops        INTEGER,\n" \
    "    bytes        INTEGER,\n" \
    "    cycles       INTEGER,\n" \
    "    instructions INTEGER,\n" \
    "    l1d_miss     INTEGER,\n" \
    "    l2_miss      INTEGER,\n" \
    "    l3_miss      INTEGER,\n" \
    "    fp_ops       INTEGER,\n" \
    "    self_mem     INTEGER,\n" \
    "    peak_mem     INTEGER\n" \
    ");\n" \
    "CREATE INDEX IF NOT EXISTS op_stats_run ON op_stats(run);\n" \
    "\n" \
    "-- The profiler's summary of a run, as prof_summary.\n" \
    "CREATE TABLE IF NOT EXISTS run_profile (\n" \
    "    run               INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    total_self_ns     INTEGER,\n" \
    "    overhead_ns       INTEGER,\n" \
    "    events            INTEGER,\n" \
    "    hw_counters       INTEGER,                  -- hardware counters counted (0 on VMs)\n" \
    "    counters_note     TEXT,\n" \
    "    counters_used     TEXT,\n" \
    "    peak_bytes        INTEGER,\n" \
    "    live_bytes        INTEGER,\n" \
    "    total_alloc_bytes INTEGER,\n" \
    "    peak_rss          INTEGER,\n" \
    "    peak_gflops       REAL\n" \
    ");\n" \
    "\n" \
    "-- One row per Newton linear solve H d = -g, as qm_solve_event (times in ns).\n" \
    "CREATE TABLE IF NOT EXISTS solver_events (\n" \
    "    run                   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    step                  INTEGER NOT NULL,\n" \
    "    block                 INTEGER NOT NULL,\n" \
    "    n                     INTEGER,\n" \
    "    nnz_per_row           REAL,\n" \
    "    kappa_fro             REAL,\n" \
    "    kappa_lapack          REAL,\n" \
    "    kappa_gersh           REAL,\n" \
    "    kappa_exact           REAL,\n" \
    "    kappa_used            REAL,\n" \
    "    est_ns                REAL,\n" \
    "    route                 INTEGER,              -- 0 classical, 1 quantum\n" \
    "    pred_classical_ns     REAL,\n" \
    "    pred_quantum_ns       REAL,\n" \
    "    measured_classical_ns REAL,\n" \
    "    simulated_quantum_ns  REAL,\n" \
    "    residual              REAL,\n" \
    "    shift                 REAL,\n" \
    "    shift_raised          INTEGER\n" \
    ");\n" \
    "CREATE INDEX IF NOT EXISTS solver_events_run ON solver_events(run, step, block);\n" \
    "\n" \
    "-- Facts about the machine a run ran on: cpu, cores, blas_core, blas_threads,\n" \
    "-- papi_hw_counters, counters_note ...\n" \
    "CREATE TABLE IF NOT EXISTS system_info (\n" \
    "    run   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    key   TEXT NOT NULL,\n" \
    "    value TEXT,\n" \
    "    PRIMARY KEY (run, key)\n" \
    ") WITHOUT ROWID;\n" \
    "\n" \
    ""

#define SCHEMA_V3 \
    "-- ---- version 3 (issue 14): checkpoints and int8 quantizations --------------------------\n" \
    "-- (embedded as its own string too: the v2 -> v3 migration runs it.)\n" \
    "\n" \
    "-- A run's checkpoints: the engine's state as one opaque record (engine/checkpoint.c:\n" \
    "-- magic, version, checksum, parameters, optimizer and loop state). The store never reads\n" \
    "-- inside; it keeps the latest two per run (the newer one may be the one being written).\n" \
    "CREATE TABLE IF NOT EXISTS checkpoints (\n" \
    "    run     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    step    INTEGER NOT NULL,                    -- steps done when it was taken\n" \
    "    epoch   INTEGER,                             -- epochs done\n" \
    "    created REAL,\n" \
    "    bytes   INTEGER,                             -- length(data)\n" \
    "    data    BLOB NOT NULL,\n" \
    "    PRIMARY KEY (run, step)\n" \
    ");\n" \
    "\n" \
    "-- int8 post-training quantizations of a run's last checkpoint: fp32 and int8 side by side.\n" \
    "CREATE TABLE IF NOT EXISTS quantizations (\n" \
    "    id            INTEGER PRIMARY KEY,\n" \
    "    run           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    created       REAL,\n" \
    "    step          INTEGER,                       -- the checkpoint quantized\n" \
    "    scheme        TEXT,                          -- minmax | percentile\n" \
    "    calibrate     INTEGER,                       -- training samples for activation ranges\n" \
    "    kernel        TEXT,                          -- int8 GEMM used (and the ISA path)\n" \
    "    fp32_bytes    INTEGER,                       -- parameters as float32\n" \
    "    int8_bytes    INTEGER,                       -- int8 weights + int32 biases + scales\n" \
    "    fp32_loss     REAL,\n" \
    "    int8_loss     REAL,\n" \
    "    fp32_acc      REAL,\n" \
    "    int8_acc      REAL,\n" \
    "    fp32_sps_b1   REAL,                          -- inference samples/s, batch 1\n" \
    "    int8_sps_b1   REAL,\n" \
    "    fp32_sps_b128 REAL,                          -- inference samples/s, batch 128\n" \
    "    int8_sps_b128 REAL\n" \
    ");\n" \
    "CREATE INDEX IF NOT EXISTS quantizations_run ON quantizations(run);\n" \
    "\n" \
    "-- The int8 inference path's profile of one quantization (quantize, gemm_s8, requantize...).\n" \
    "CREATE TABLE IF NOT EXISTS quant_ops (\n" \
    "    quant    INTEGER NOT NULL REFERENCES quantizations(id) ON DELETE CASCADE,\n" \
    "    name     TEXT NOT NULL,\n" \
    "    layer    TEXT NOT NULL DEFAULT '',\n" \
    "    calls    INTEGER,\n" \
    "    total_ns INTEGER,\n" \
    "    self_ns  INTEGER\n" \
    ");\n" \
    "CREATE INDEX IF NOT EXISTS quant_ops_quant ON quant_ops(quant);\n" \
    "\n" \
    ""

#define SCHEMA_V4 \
    "-- ---- version 4 (issue 11): the profiler's software columns -------------------------------\n" \
    "-- (embedded as its own string too: the v3 -> v4 migration runs it.)\n" \
    "-- NULL in rows written before, and where the machine does not count them.\n" \
    "ALTER TABLE op_stats ADD COLUMN cpu_ns INTEGER; -- process CPU ns (all threads) during the scope's total time\n" \
    "ALTER TABLE op_stats ADD COLUMN faults INTEGER; -- page faults, profiling thread\n" \
    "ALTER TABLE op_stats ADD COLUMN csw    INTEGER; -- context switches, profiling thread\n" \
    "\n" \
    ""

#define SCHEMA_V5 \
    "-- ---- version 5 (issue 22): the fingerprint of a run's data ---------------------------------\n" \
    "-- (embedded as its own string too: the v4 -> v5 migration runs it.)\n" \
    "-- The engine's one-line fingerprint of the loaded data (row counts, shape and a checksum of\n" \
    "-- each array: \"nnbd1 rows=...\"); the store keeps it as text and never reads inside. `resume`\n" \
    "-- compares it with the data it loads again. NULL for runs stored before, and graph runs.\n" \
    "ALTER TABLE runs ADD COLUMN data_fingerprint TEXT;\n" \
    ""
