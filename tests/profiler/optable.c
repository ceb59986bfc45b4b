/* optable.c — the one op-table model (profiler/table.c): columns shown only where some row
 * has the value, the same cell words for every renderer, ranks of data-parallel rows, the
 * display formats, the load imbalance across ranks on synthetic rows, and the text table
 * on a terminal: fitted to its width (a pseudo-terminal of 60 columns), whole to a file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../../profiler/profiler.h"

#define assert_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

static prof_row row(const char *name, prof_kind kind, uint64_t calls, uint64_t total_ns, uint64_t self_ns)
{
    prof_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    r.kind = kind;
    r.calls = calls;
    r.total_ns = total_ns;
    r.self_ns = self_ns;
    r.cycles = r.instructions = r.l1d_miss = r.l2_miss = r.l3_miss = r.fp_ops = -1;
    r.task_clock_ns = r.faults = r.csw = r.migrations = r.cpu_ns = -1;
    return r;
}

static void test_columns_and_cells(void **state)
{
    (void)state;
    prof_row r[3] = { row("dense.fwd", PROF_OP, 10, 3000000, 3000000), row("rank1:dense.fwd", PROF_OP, 10, 4000000, 4000000),
                      row("relu.fwd", PROF_OP, 4, 1000, 1000) };
    snprintf(r[0].layer, sizeof r[0].layer, "dense1");
    r[0].flops = 60000000;
    r[0].self_mem = -2048;   /* freed more than it allocated */
    r[1].bytes = 940600;     /* e.g. an all-reduce's payload: 940600 B in 4 ms = 0.24 GB/s */
    prof_table t;
    prof_table_init(&t, r, 3, 0, 0);
    /* always: name, self %, times, calls, GFLOP/s, bytes, memory; layer and rank where rows have them */
    assert_true(t.show[PROF_COL_NAME] && t.show[PROF_COL_SELF_PCT] && t.show[PROF_COL_GFLOPS] && t.show[PROF_COL_PEAK_MEM]);
    assert_true(t.show[PROF_COL_BYTES] && t.show[PROF_COL_GBPS]);
    assert_true(t.show[PROF_COL_LAYER]);
    assert_true(t.show[PROF_COL_RANK]);
    /* absent data (old schema, no counters, no calibration): no column */
    assert_false(t.show[PROF_COL_CPU] || t.show[PROF_COL_FAULTS] || t.show[PROF_COL_CSW]);
    assert_false(t.show[PROF_COL_IPC] || t.show[PROF_COL_L1MISS] || t.show[PROF_COL_PEAK_PCT]);
    assert_near(t.self_total_ns, 7001000, 0.5);
    char b[64];
    const struct { int row; prof_col col; const char *want; } cells[] = {
        { 1, PROF_COL_NAME, "dense.fwd" }, { 1, PROF_COL_RANK, "1" }, { 0, PROF_COL_RANK, "0" },
        { 1, PROF_COL_LAYER, "-" }, { 0, PROF_COL_GFLOPS, "20.00" }, { 1, PROF_COL_GFLOPS, "-" },
        { 0, PROF_COL_SELF, "3.00 ms" }, { 0, PROF_COL_AVG, "300 us" }, { 2, PROF_COL_AVG, "250 ns" },
        { 0, PROF_COL_SELF_MEM, "-2.0 KiB" }, { 0, PROF_COL_CPU, "-" }, { 0, PROF_COL_SELF_PCT, "42.9%" },
        { 1, PROF_COL_BYTES, "918.6 KiB" }, { 1, PROF_COL_GBPS, "0.24" }, { 0, PROF_COL_GBPS, "-" },
    };
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++)
        assert_string_equal(prof_table_cell(&t, &r[cells[i].row], cells[i].col, b, sizeof b), cells[i].want);
    /* the whole profile's self time, when given, is the denominator */
    prof_table_init(&t, r, 3, 30000000, 100);
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_SELF_PCT, b, sizeof b), "10.0%");
    assert_true(t.show[PROF_COL_PEAK_PCT]);
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_PEAK_PCT, b, sizeof b), "20.0%");
    /* counted values bring their columns */
    r[2].cpu_ns = 1900;
    r[2].faults = 3;
    prof_table_init(&t, r, 3, 0, 0);
    assert_true(t.show[PROF_COL_CPU] && t.show[PROF_COL_FAULTS]);
    assert_false(t.show[PROF_COL_CSW]);
    assert_string_equal(prof_table_cell(&t, &r[2], PROF_COL_CPU, b, sizeof b), "1.90");
    /* a name with an escape sequence is shown inert */
    prof_row h = row("x\x1b[2Jy", PROF_OP, 1, 1, 1);
    assert_null(strchr(prof_table_cell(&t, &h, PROF_COL_NAME, b, sizeof b), 0x1b));
    /* every column has a header word and a line of documentation */
    for (int c = 0; c < PROF_COL_N; c++) assert_true(prof_cols[c].title[0] && prof_cols[c].doc[0]);
}

/* Roofline: peak 100 GFLOP/s over 20 GB/s puts the ridge at 5 FLOP/B. A GEMM-like row of
 * 16 FLOP/B is compute bound, a bias-like row of 0.25 memory bound; a row without bytes, or
 * any row without calibration, has no class. */
static void test_roofline(void **state)
{
    (void)state;
    prof_row r[3] = { row("dense.fwd", PROF_OP, 1, 1000000, 1000000), row("bias.fwd", PROF_OP, 1, 1000000, 1000000),
                      row("step", PROF_PHASE, 1, 2000000, 0) };
    r[0].flops = 16000000; r[0].bytes = 1000000;
    r[1].flops = 250000; r[1].bytes = 1000000;
    r[2].flops = 16250000;   /* no bytes counted */
    char b[64];
    prof_table t;
    prof_table_init(&t, r, 3, 0, 0);
    assert_true(t.show[PROF_COL_INTENSITY]);
    assert_false(t.show[PROF_COL_BW_PCT] || t.show[PROF_COL_BOUND]);  /* not calibrated */
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_INTENSITY, b, sizeof b), "16");
    assert_string_equal(prof_table_cell(&t, &r[1], PROF_COL_INTENSITY, b, sizeof b), "0.25");
    assert_string_equal(prof_table_cell(&t, &r[2], PROF_COL_INTENSITY, b, sizeof b), "-");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(prof_table_bound(&t, &r[i]), 0);
        assert_string_equal(prof_table_cell(&t, &r[i], PROF_COL_BOUND, b, sizeof b), "-");
    }
    /* bandwidth alone: % bw, but no class without the peak */
    prof_table_set_bw(&t, 20, 0);
    assert_true(t.show[PROF_COL_BW_PCT]);
    assert_false(t.show[PROF_COL_BOUND]);
    assert_string_equal(prof_table_cell(&t, &r[1], PROF_COL_BOUND, b, sizeof b), "-");
    /* both calibrated: classes on either side of the ridge */
    prof_table_init(&t, r, 3, 0, 100);
    prof_table_set_bw(&t, 20, 0);
    assert_true(t.show[PROF_COL_BOUND] && t.show[PROF_COL_BW_PCT]);
    assert_int_equal(prof_table_bound(&t, &r[0]), 1);
    assert_int_equal(prof_table_bound(&t, &r[1]), -1);
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_BOUND, b, sizeof b), "compute");
    assert_string_equal(prof_table_cell(&t, &r[1], PROF_COL_BOUND, b, sizeof b), "memory");
    assert_string_equal(prof_table_cell(&t, &r[2], PROF_COL_BOUND, b, sizeof b), "-");
    /* 1 MB in 1 ms = 1 GB/s = 5% of 20 GB/s */
    assert_string_equal(prof_table_cell(&t, &r[1], PROF_COL_BW_PCT, b, sizeof b), "5.0%");
    /* a bandwidth that moves the ridge above 16 FLOP/B turns the GEMM row memory bound */
    prof_table_set_bw(&t, 5, 0);
    assert_int_equal(prof_table_bound(&t, &r[0]), -1);
    /* the new sort keys: by name, and in order */
    prof_sort k;
    assert_int_equal(prof_sort_parse("intensity", &k), 0);
    prof_rows_sort(r, 3, k);
    assert_string_equal(r[0].name, "dense.fwd");
    assert_string_equal(r[2].name, "step");
    assert_int_equal(prof_sort_parse("gbps", &k), 0);
    r[0].total_ns = 4000000;   /* 0.25 GB/s, below bias.fwd's 1 GB/s */
    prof_rows_sort(r, 3, k);
    assert_string_equal(r[0].name, "bias.fwd");
}

/* Each warning forced on hand-made rows, and absent when its condition is not met. */
static void test_warnings(void **state)
{
    (void)state;
    prof_row r[3] = { row("dense.fwd", PROF_OP, 10, 1000000, 1000000), row("data.wait", PROF_PHASE, 10, 40000, 40000),
                      row("relu.fwd", PROF_OP, 10, 960000, 960000) };
    r[0].cpu_ns = 1800000;   /* cpu 1.80: the 2 GEMM threads busy */
    r[2].cpu_ns = 500000;    /* not a GEMM: its cpu 0.5 is no warning */
    char w[1024];
    /* data.wait 2% of 2 ms, cores matching the ISA: nothing */
    assert_int_equal(prof_perf_warnings(r, 3, 0, 2, "Haswell", "avx2", w, sizeof w), 0);
    assert_string_equal(w, "");
    assert_int_equal(prof_perf_warnings(r, 3, 0, 2, "SkylakeX", "avx2", w, sizeof w), 0);  /* stronger is fine */
    assert_int_equal(prof_perf_warnings(r, 3, 0, 2, "SomeNewCore", "avx512", w, sizeof w), 0); /* unknown: silent */
    /* a weaker core */
    assert_int_equal(prof_perf_warnings(r, 3, 0, 2, "Haswell", "avx512", w, sizeof w), 1);
    assert_non_null(strstr(w, "BLAS core Haswell is weaker than this CPU (avx512)"));
    assert_int_equal(prof_perf_warnings(r, 3, 0, 2, "Prescott", "avx2", w, sizeof w), 1);
    /* cpu below 1 on the GEMM row: only when the GEMM is multi-threaded */
    r[0].cpu_ns = 700000;
    assert_int_equal(prof_perf_warnings(r, 3, 0, 1, "Haswell", "avx2", w, sizeof w), 0);
    assert_int_equal(prof_perf_warnings(r, 3, 0, 2, "Haswell", "avx2", w, sizeof w), 1);
    assert_non_null(strstr(w, "dense.fwd: cpu 0.70 below 1 with a 2-thread GEMM"));
    /* data.wait (a phase scope, as the engine registers it) at 6% of the steps */
    r[0].cpu_ns = 1800000;
    r[1].total_ns = r[1].self_ns = 120000;
    assert_int_equal(prof_perf_warnings(r, 3, 2000000, 2, "Haswell", "avx2", w, sizeof w), 1);
    assert_non_null(strstr(w, "data.wait is 6.0% of the steps"));
    /* all three, one line each */
    r[0].cpu_ns = 700000;
    assert_int_equal(prof_perf_warnings(r, 3, 2000000, 2, "Haswell", "avx512", w, sizeof w), 3);
    assert_true(strchr(w, '\n') && w[strlen(w) - 1] == '\n');
}

/* Stored rows are per scope: a GEMM's layers (and ranks) are one op, named once, with its
 * cpu over all of them; a row without the CPU clock leaves the op's cpu unknown. */
static void test_warnings_scope_rows(void **state)
{
    (void)state;
    prof_row r[4] = { row("dense.fwd", PROF_OP, 10, 1000000, 1000000), row("dense.fwd", PROF_OP, 10, 1000000, 1000000),
                      row("rank1:dense.fwd", PROF_OP, 10, 1000000, 1000000), row("step", PROF_STEP, 10, 0, 3000000) };
    snprintf(r[0].layer, sizeof r[0].layer, "dense1");
    snprintf(r[1].layer, sizeof r[1].layer, "dense2");
    r[0].cpu_ns = 200000;    /* one layer waits, */
    r[1].cpu_ns = 1900000;   /* the others keep both threads busy: */
    r[2].cpu_ns = 1900000;   /* 4.0 ms of CPU in 3.0 ms, no warning */
    char w[1024];
    assert_int_equal(prof_perf_warnings(r, 4, 0, 2, "Haswell", "avx2", w, sizeof w), 0);
    r[2].cpu_ns = 100000;    /* 2.2 ms in 3.0 ms: one line for the op */
    assert_int_equal(prof_perf_warnings(r, 4, 0, 2, "Haswell", "avx2", w, sizeof w), 1);
    assert_string_equal(w, "dense.fwd: cpu 0.73 below 1 with a 2-thread GEMM: its threads wait "
                           "(a loaded machine, or too many threads for the shape)\n");
    /* 2.994 ms in 3.0 ms: 0.998, shown as 0.99, never "1.00 below 1" */
    r[0].cpu_ns = 200000;
    r[1].cpu_ns = 1900000;
    r[2].cpu_ns = 894000;
    assert_int_equal(prof_perf_warnings(r, 4, 0, 2, "Haswell", "avx2", w, sizeof w), 1);
    assert_non_null(strstr(w, "dense.fwd: cpu 0.99 below 1"));
    r[1].cpu_ns = -1;        /* not counted (an old schema) */
    assert_int_equal(prof_perf_warnings(r, 4, 0, 2, "Haswell", "avx2", w, sizeof w), 0);
}

/* A stored run's table keeps "% bw" and "bound" with "-" when the run stored no
 * calibration (show_unknown), and leaves them out of a live table without one. */
static void test_bw_unknown(void **state)
{
    (void)state;
    prof_row r[1] = { row("dense.fwd", PROF_OP, 10, 1000000, 1000000) };
    r[0].flops = 16000000;
    r[0].bytes = 1000000;
    prof_table t;
    char b[32];
    prof_table_init(&t, r, 1, 0, 0);
    prof_table_set_bw(&t, 0, 0);
    assert_false(t.show[PROF_COL_BW_PCT]);
    assert_false(t.show[PROF_COL_BOUND]);
    prof_table_set_bw(&t, 0, 1);
    assert_true(t.show[PROF_COL_BW_PCT]);
    assert_true(t.show[PROF_COL_BOUND]);
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_BW_PCT, b, sizeof b), "-");
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_BOUND, b, sizeof b), "-");
    prof_table_init(&t, r, 1, 0, 100);
    prof_table_set_bw(&t, 20, 1);
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_BW_PCT, b, sizeof b), "5.0%");
    assert_string_equal(prof_table_cell(&t, &r[0], PROF_COL_BOUND, b, sizeof b), "compute");
}

static void test_rank_prefix(void **state)
{
    (void)state;
    const char *base;
    prof_row r = row("rank12:allreduce.wait", PROF_OP, 1, 1, 1);
    assert_int_equal(prof_row_rank(&r, &base), 12);
    assert_string_equal(base, "allreduce.wait");
    r = row("rankings", PROF_OP, 1, 1, 1);       /* not a prefix */
    assert_int_equal(prof_row_rank(&r, &base), 0);
    assert_string_equal(base, "rankings");
    r = row("rank3", PROF_OP, 1, 1, 1);
    assert_int_equal(prof_row_rank(&r, NULL), 0);
}

static void test_formats(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(prof_fmt_duration(b, sizeof b, 12345e-9), "12.3 us");
    assert_string_equal(prof_fmt_duration(b, sizeof b, 37.4e-9), "37 ns");
    assert_string_equal(prof_fmt_duration(b, sizeof b, 0.5), "500 ms");
    assert_string_equal(prof_fmt_duration(b, sizeof b, NAN), "-");
    assert_string_equal(prof_fmt_bytes(b, sizeof b, 3 * 1048576.0), "3.0 MiB");
    assert_string_equal(prof_fmt_bytes(b, sizeof b, -1), "-");
    assert_string_equal(prof_fmt_num(b, sizeof b, 0.123456), "0.1235");
}

/* Two ranks of 10 steps: rank 0 steps 100 ms with 30 ms of allreduce*, rank 1 steps 100 ms
 * with 10 ms: compute 7 ms and 9 ms per step, mean 8, imbalance 9/8. */
static void test_balance(void **state)
{
    (void)state;
    prof_row r[] = {
        row("step", PROF_STEP, 10, 100000000, 1000), row("allreduce", PROF_OP, 10, 20000000, 20000000),
        row("allreduce.wait", PROF_OP, 10, 10000000, 10000000), row("forward", PROF_PHASE, 10, 40000000, 1),
        row("rank1:step", PROF_STEP, 10, 100000000, 1000), row("rank1:allreduce", PROF_OP, 10, 9000000, 9000000),
        row("rank1:allreduce.loss", PROF_OP, 10, 1000000, 1000000), row("rank1:dense.fwd", PROF_OP, 10, 5000000, 5000000),
        row("compress", PROF_OP, 10, 5000000, 5000000),   /* work: stays in compute */
    };
    size_t n = sizeof r / sizeof r[0];
    prof_balance b;
    prof_balance_get(r, n, &b);
    assert_int_equal(b.ranks, 2);
    assert_int_equal(b.steps[0], 10);
    assert_near(b.compute_s[0], 7e-3, 1e-12);
    assert_near(b.compute_s[1], 9e-3, 1e-12);
    assert_near(b.comm_s[0], 3e-3, 1e-12);
    assert_near(b.mean_s, 8e-3, 1e-12);
    assert_near(b.max_s, 9e-3, 1e-12);
    assert_int_equal(b.slowest, 1);
    assert_near(b.imbalance, 1.125, 1e-12);
    char l[256];
    prof_balance_line(&b, l, sizeof l);
    assert_non_null(strstr(l, "load imbalance 1.12"));   /* %.2f of 1.125 */
    assert_non_null(strstr(l, "over 2 ranks"));
    assert_non_null(strstr(l, "slowest rank 1"));
    /* self % of a rank's row is of that rank's own self time (every row of it) */
    assert_near(b.self_s[1], (1000 + 9000000 + 1000000 + 5000000) * 1e-9, 1e-12);
    prof_table t;
    prof_table_init(&t, r, n, 0, 0);
    t.ranks = &b;
    assert_near(prof_table_self_share(&t, &r[7]), 5000000.0 / 15001000.0, 1e-12);
    assert_near(prof_table_self_share(&t, &r[1]), 20000000.0 / b.self_s[0] * 1e-9, 1e-12);
    /* one rank only: no imbalance, no line */
    prof_balance_get(r, 4, &b);
    assert_int_equal(b.ranks, 1);
    assert_true(isnan(b.imbalance));
    assert_string_equal(prof_balance_line(&b, l, sizeof l), "");
    /* not profiled per step */
    prof_balance_get(r + 1, 2, &b);
    assert_int_equal(b.ranks, 0);
    assert_true(isnan(b.imbalance));
    /* a rank's rows can be anywhere in the list, and a later rank may be missing */
    prof_row s[] = { r[4], r[5], r[0], r[1], row("rank3:step", PROF_STEP, 5, 50000000, 1) };
    prof_balance_get(s, 5, &b);
    assert_int_equal(b.ranks, 4);
    assert_int_equal(b.steps[2], 0);
    assert_near(b.compute_s[3], 10e-3, 1e-12);
    assert_near(b.mean_s, (8e-3 + 9.1e-3 + 10e-3) / 3, 1e-12);
}

/* The rows of test_columns_and_cells printed to f (max line width returned via *widest). */
static void print_rows(FILE *f)
{
    prof_row r[2] = { row("dense.fwd", PROF_OP, 10, 3000000, 3000000), row("allreduce", PROF_OP, 10, 4000000, 4000000) };
    snprintf(r[0].layer, sizeof r[0].layer, "dense1");
    r[0].flops = 60000000;
    r[1].bytes = 940600;
    prof_table t;
    prof_table_init(&t, r, 2, 0, 0);
    prof_table_print(f, &t, 0, 28, "  ");
    fflush(f);
}

static size_t widest_line(const char *s)
{
    size_t m = 0, l = 0;
    for (; *s; s++) {
        if (*s == '\n') { if (l > m) m = l; l = 0; }
        else if (*s != '\r') l++;
    }
    return l > m ? l : m;
}

static void test_text_fits_terminal(void **state)
{
    (void)state;
    /* to a file: every column, no note */
    char buf[8192];
    FILE *f = tmpfile();
    assert_non_null(f);
    print_rows(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    assert_non_null(strstr(buf, "peak mem"));
    assert_null(strstr(buf, "left out"));
    size_t full = widest_line(buf);
    assert_true(full > 60);
    /* to a terminal of 60 columns: within 60, the name and self % kept, the rest named */
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m)) { if (m >= 0) close(m); skip(); }
    int s = open(ptsname(m), O_RDWR | O_NOCTTY);
    assert_true(s >= 0);
    struct winsize ws = { .ws_row = 24, .ws_col = 60 };
    assert_int_equal(ioctl(s, TIOCSWINSZ, &ws), 0);
    FILE *tty = fdopen(s, "w");
    assert_non_null(tty);
    print_rows(tty);
    fclose(tty);
    n = 0;
    /* the slave is closed: the master reads everything written, then fails (EIO) */
    for (ssize_t k; n < sizeof buf - 1 && (k = read(m, buf + n, sizeof buf - 1 - n)) > 0;) n += (size_t)k;
    buf[n] = 0;
    close(m);
    assert_true(widest_line(buf) <= 60);
    assert_non_null(strstr(buf, "dense.fwd"));
    assert_non_null(strstr(buf, "self %"));
    assert_non_null(strstr(buf, "(left out for 60 columns: calls, GFLOP/s,"));
    assert_non_null(strstr(buf, " peak mem)"));
}

/* Rows by op hold 7 ms of a 10 ms profile: the other 3 ms (between ops) get their row, so
 * the self % add up to 100 (issue 27: a by-op table totalled 76.4%). Rows that hold it all
 * get none. */
static void test_rest_row(void **state)
{
    (void)state;
    prof_row r[2] = { row("dense.fwd", PROF_OP, 10, 3000000, 3000000), row("tanh.fwd", PROF_OP, 10, 4000000, 4000000) };
    prof_table t;
    prof_table_init(&t, r, 2, 10000000, 0);
    assert_near(prof_table_rest_ns(&t), 3e6, 1);
    char buf[8192];
    FILE *f = tmpfile();
    assert_non_null(f);
    prof_table_print(f, &t, 0, 28, "");
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    const char *rest = strstr(buf, "(other / between ops)");
    assert_non_null(rest);
    assert_non_null(strstr(rest, "30.0%"));
    prof_table_init(&t, r, 2, 7000000, 0);
    assert_true(prof_table_rest_ns(&t) == 0);
}

int test_profiler_optable(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_and_cells),
        cmocka_unit_test(test_roofline),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_warnings_scope_rows),
        cmocka_unit_test(test_bw_unknown),
        cmocka_unit_test(test_rank_prefix),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_balance),
        cmocka_unit_test(test_text_fits_terminal),
        cmocka_unit_test(test_rest_row),
    };
    return cmocka_run_group_tests_name("profiler_optable", tests, NULL, NULL);
}
