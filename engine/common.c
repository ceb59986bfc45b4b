/* common.c — the engine's error message, run-status names and the sink tee. */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char err_msg[1024];

const char *eng_error(void) { return err_msg; }

int eng_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *eng_run_status_name(eng_run_status s)
{
    static const char *const names[] = { "running", "finished", "failed", "diverged",
                                         "interrupted", "crashed" };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

/* The tee forwards each event to every sink in order; the first failure stops it. */
#define TEE_EACH(tee, cb, ...)                                                         \
    for (size_t i_ = 0; i_ < (tee)->n; i_++) {                                       \
        const eng_sink *s_ = (tee)->sinks[i_];                                        \
        if (s_ && s_->cb) { int rc_ = s_->cb(s_->ud, __VA_ARGS__); if (rc_) return rc_; } \
    }
#define TEE_EACH_VOID(tee, cb, ...)                                                    \
    for (size_t i_ = 0; i_ < (tee)->n; i_++) {                                       \
        const eng_sink *s_ = (tee)->sinks[i_];                                        \
        if (s_ && s_->cb) s_->cb(s_->ud, __VA_ARGS__);                                \
    }

static int tee_begin(void *ud, const eng_run_info *info) { TEE_EACH((eng_sink_tee *)ud, run_begin, info); return 0; }
static int tee_metric(void *ud, const eng_metric *m) { TEE_EACH((eng_sink_tee *)ud, metric, m); return 0; }
static int tee_ops(void *ud, const prof_row *rows, size_t n, const prof_summary *sum) { TEE_EACH((eng_sink_tee *)ud, op_stats, rows, n, sum); return 0; }
static int tee_solver(void *ud, const struct qm_solve_event *ev) { TEE_EACH((eng_sink_tee *)ud, solver, ev); return 0; }
static int tee_telemetry(void *ud, const eng_telemetry *t) { TEE_EACH((eng_sink_tee *)ud, telemetry, t); return 0; }
static void tee_progress(void *ud, long step, long total, int epoch, double loss, double sps) { TEE_EACH_VOID((eng_sink_tee *)ud, progress, step, total, epoch, loss, sps); }
static int tee_checkpoint(void *ud, const eng_checkpoint *ck) { TEE_EACH((eng_sink_tee *)ud, checkpoint, ck); return 0; }
static void tee_end(void *ud, const eng_run_result *res) { TEE_EACH_VOID((eng_sink_tee *)ud, run_end, res); }

eng_sink eng_sink_tee_make(eng_sink_tee *tee)
{
    return (eng_sink){ .ud = tee, .run_begin = tee_begin, .metric = tee_metric,
                       .op_stats = tee_ops, .solver = tee_solver, .telemetry = tee_telemetry,
                       .progress = tee_progress, .run_end = tee_end,
                       .checkpoint = tee_checkpoint };
}
