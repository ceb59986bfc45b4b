/* schema.c — store/schema.sql embedded as strings: the whole file, which creates a new
 * database, and each later version's part, which migrates an older one. The strings are
 * generated at build time (scripts/embed_schema.awk -> BUILD/store/schema_sql.h: one
 * macro up to the first "-- ---- version N" line, then one per version). */
#include "internal.h"

/* The schema is one string on purpose (sqlite3_exec runs it whole); C11 only promises
 * 4095-byte literals, which gcc and clang both exceed without trouble. */
#pragma GCC diagnostic ignored "-Woverlength-strings"

#include "schema_sql.h"

/* A new database runs this whole text and is then at the latest version. */
const char store_schema_sql[] = SCHEMA_BASE SCHEMA_V3 SCHEMA_V4 SCHEMA_V5;

/* v1 -> v2 (issue 10): run ids are never reused (AUTOINCREMENT; SQLite cannot add it to a
 * table, so runs is rebuilt the documented way: create, copy, drop, rename), and rows left
 * behind by runs deleted while they were written (foreign keys were off) are removed, so
 * that no later run inherits them. Runs with foreign keys off (store_migrate_with). */
#define V2_COLS                                                                              \
    "id,name,variant,exp_path,exp_text,seed,status,error,started,ended,host,pid,version,"     \
    "optimizer,dataset,model,n_params,threads,total_steps,n_train,n_test,target_loss,steps,"  \
    "epochs,wall_s,hybrid_s,final_train_loss,best_train_loss,final_test_loss,final_test_acc," \
    "best_test_acc,samples_per_s,steps_to_target,wall_to_target,hybrid_to_target,peak_bytes," \
    "peak_rss,solves,quantum_solves,kappa_first,kappa_last"
static const char migration_v2[] =
    "CREATE TABLE runs_v2 (\n"
    "    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, variant TEXT NOT NULL DEFAULT '',\n"
    "    exp_path TEXT, exp_text TEXT, seed INTEGER, status TEXT NOT NULL DEFAULT 'running', error TEXT,\n"
    "    started REAL NOT NULL, ended REAL, host TEXT, pid INTEGER, version TEXT, optimizer TEXT,\n"
    "    dataset TEXT, model TEXT, n_params INTEGER, threads INTEGER, total_steps INTEGER,\n"
    "    n_train INTEGER, n_test INTEGER, target_loss REAL, steps INTEGER, epochs INTEGER,\n"
    "    wall_s REAL, hybrid_s REAL, final_train_loss REAL, best_train_loss REAL,\n"
    "    final_test_loss REAL, final_test_acc REAL, best_test_acc REAL, samples_per_s REAL,\n"
    "    steps_to_target INTEGER, wall_to_target REAL, hybrid_to_target REAL, peak_bytes INTEGER,\n"
    "    peak_rss INTEGER, solves INTEGER, quantum_solves INTEGER, kappa_first REAL, kappa_last REAL);\n"
    "INSERT INTO runs_v2 SELECT " V2_COLS " FROM runs;\n"
    /* Ids a deleted run's stray rows still name are not given out again either. */
    "DELETE FROM sqlite_sequence WHERE name='runs_v2';\n"
    "INSERT INTO sqlite_sequence(name, seq) SELECT 'runs_v2', max(coalesce((SELECT max(id) FROM runs),0),\n"
    "    coalesce((SELECT max(run) FROM params),0), coalesce((SELECT max(run) FROM metrics),0),\n"
    "    coalesce((SELECT max(run) FROM op_stats),0), coalesce((SELECT max(run) FROM run_profile),0),\n"
    "    coalesce((SELECT max(run) FROM solver_events),0), coalesce((SELECT max(run) FROM system_info),0));\n"
    "DELETE FROM params WHERE run NOT IN (SELECT id FROM runs);\n"
    "DELETE FROM metrics WHERE run NOT IN (SELECT id FROM runs);\n"
    "DELETE FROM op_stats WHERE run NOT IN (SELECT id FROM runs);\n"
    "DELETE FROM run_profile WHERE run NOT IN (SELECT id FROM runs);\n"
    "DELETE FROM solver_events WHERE run NOT IN (SELECT id FROM runs);\n"
    "DELETE FROM system_info WHERE run NOT IN (SELECT id FROM runs);\n"
    "DROP TABLE runs;\n"
    "ALTER TABLE runs_v2 RENAME TO runs;\n"
    "CREATE INDEX IF NOT EXISTS runs_status ON runs(status);\n";

/* v2 -> v3 (issue 14): checkpoints, quantizations, quant_ops. */
static const char migration_v3[] = SCHEMA_V3;
/* v3 -> v4 (issue 11): op_stats' cpu_ns, faults, csw. */
static const char migration_v4[] = SCHEMA_V4;
/* v4 -> v5 (issue 22): runs.data_fingerprint. */
static const char migration_v5[] = SCHEMA_V5;

/* store_migrations[v] takes a database from version v to v+1; [0] creates a new database
 * at the latest version (store_migrate_with then skips the rest). Append only. */
const char *const store_migrations[] = { store_schema_sql, migration_v2, migration_v3, migration_v4, migration_v5 };
const int store_n_migrations = sizeof store_migrations / sizeof store_migrations[0];
