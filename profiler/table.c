/* table.c — the one op-table model (columns, words, cells, sort order), the display
 * formats every module uses, the text rendering of `run --profile` and `show`, and the
 * load balance across MPI ranks. The workbench and the reports render the same model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* ---- display formats ------------------------------------------------------------------ */

const char *prof_fmt_num(char *b, size_t cap, double v)
{
    if (!isfinite(v)) snprintf(b, cap, "-");
    else snprintf(b, cap, "%.4g", v);
    return b;
}

const char *prof_fmt_duration(char *b, size_t cap, double s)
{
    if (!isfinite(s) || s < 0) snprintf(b, cap, "-");
    else if (s == 0) snprintf(b, cap, "0 s");
    else if (s < 1e-6) snprintf(b, cap, "%.0f ns", s * 1e9);
    else if (s < 1e-3) snprintf(b, cap, "%.3g us", s * 1e6);
    else if (s < 1e-2) snprintf(b, cap, "%.2f ms", s * 1e3);
    else if (s < 1) snprintf(b, cap, "%.0f ms", s * 1e3);
    else if (s < 60) snprintf(b, cap, "%.2f s", s);
    else if (s < 3600) snprintf(b, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(b, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    return b;
}

const char *prof_fmt_bytes(char *b, size_t cap, double v)
{
    if (!isfinite(v) || v < 0) snprintf(b, cap, "-");
    else if (v < 1024) snprintf(b, cap, "%.0f B", v);
    else if (v < 1048576) snprintf(b, cap, "%.1f KiB", v / 1024);
    else if (v < 1073741824.0) snprintf(b, cap, "%.1f MiB", v / 1048576);
    else snprintf(b, cap, "%.2f GiB", v / 1073741824.0);
    return b;
}

/* ---- sorting ------------------------------------------------------------------------- */

static const char *const sort_names[PROF_SORT_N] = { "self", "total", "calls", "avg", "flops", "bytes", "mem", "name",
                                                     "gflops", "intensity", "gbps" };
static const char *const group_names[] = { "scope", "op", "layer", "phase" };

int prof_sort_parse(const char *s, prof_sort *out)
{
    for (size_t i = 0; s && i < PROF_SORT_N; i++)
        if (!strcmp(s, sort_names[i])) { *out = (prof_sort)i; return 0; }
    return -1;
}

const char *prof_sort_name(prof_sort s) { return (unsigned)s < PROF_SORT_N ? sort_names[s] : "?"; }

int prof_group_parse(const char *s, prof_group *out)
{
    for (size_t i = 0; s && i < sizeof group_names / sizeof *group_names; i++)
        if (!strcmp(s, group_names[i])) { *out = (prof_group)i; return 0; }
    return -1;
}

const char *prof_group_name(prof_group g)
{
    return (unsigned)g < sizeof group_names / sizeof *group_names ? group_names[g] : "?";
}

static int cmp_u64_desc(uint64_t a, uint64_t b) { return a < b ? 1 : a > b ? -1 : 0; }

/* num / den (0 when den is 0), largest first: the rate and ratio sort keys */
static int cmp_ratio_desc(uint64_t an, uint64_t ad, uint64_t bn, uint64_t bd)
{
    double x = ad ? (double)an / (double)ad : 0, y = bd ? (double)bn / (double)bd : 0;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int row_cmp(const void *va, const void *vb, void *ctx)
{
    const prof_row *a = va, *b = vb;
    int c = 0;
    switch (*(const prof_sort *)ctx) {
    case PROF_SORT_SELF: c = cmp_u64_desc(a->self_ns, b->self_ns); break;
    case PROF_SORT_TOTAL: c = cmp_u64_desc(a->total_ns, b->total_ns); break;
    case PROF_SORT_CALLS: c = cmp_u64_desc(a->calls, b->calls); break;
    case PROF_SORT_AVG: c = cmp_ratio_desc(a->total_ns, a->calls, b->total_ns, b->calls); break;
    case PROF_SORT_FLOPS: c = cmp_u64_desc(a->flops, b->flops); break;
    case PROF_SORT_BYTES: c = cmp_u64_desc(a->bytes, b->bytes); break;
    case PROF_SORT_MEM: c = a->self_mem < b->self_mem ? 1 : a->self_mem > b->self_mem ? -1 : 0; break;
    case PROF_SORT_GFLOPS: c = cmp_ratio_desc(a->flops, a->total_ns, b->flops, b->total_ns); break;
    case PROF_SORT_INTENSITY: c = cmp_ratio_desc(a->flops, a->bytes, b->flops, b->bytes); break;
    case PROF_SORT_GBPS: c = cmp_ratio_desc(a->bytes, a->total_ns, b->bytes, b->total_ns); break;
    case PROF_SORT_NAME: case PROF_SORT_N: break;
    }
    if (!c) c = strcmp(a->name, b->name);
    if (!c) c = strcmp(a->layer, b->layer);
    return c;
}

void prof_rows_sort(prof_row *rows, size_t n, prof_sort by)
{
    if (n > 1) qsort_r(rows, n, sizeof *rows, row_cmp, &by);
}

/* ---- the columns ---------------------------------------------------------------------- */

const prof_col_def prof_cols[PROF_COL_N] = {
    [PROF_COL_NAME] = { "name", "the scope: an op (dense.fwd), a phase (forward) or the step", 24, 16, 0, 0 },
    [PROF_COL_LAYER] = { "layer", "the layer an op belongs to (- for phases)", 12, 6, 0, 1 },
    [PROF_COL_RANK] = { "rank", "the MPI rank whose profile the row is (data-parallel runs)", 4, 4, 1, 1 },
    [PROF_COL_SELF_PCT] = { "self %", "self time as a share of the whole profile's self time", 6, 6, 1, 0 },
    [PROF_COL_SELF] = { "self", "time in the scope itself, nested scopes excluded", 9, 7, 1, 0 },
    [PROF_COL_TOTAL] = { "total", "wall time in the scope, nested scopes included", 9, 7, 1, 0 },
    [PROF_COL_AVG] = { "avg", "total / calls", 9, 7, 1, 0 },
    [PROF_COL_CALLS] = { "calls", "times the scope ran", 7, 5, 1, 0 },
    [PROF_COL_GFLOPS] = { "GFLOP/s", "FLOPs counted from shapes / total", 7, 7, 1, 0 },
    [PROF_COL_PEAK_PCT] = { "% peak", "GFLOP/s as a share of the calibrated sgemm peak (nnbench sysinfo --calibrate)", 6, 6, 1, 1 },
    [PROF_COL_IPC] = { "IPC", "instructions / cycles (hardware counters)", 5, 4, 1, 1 },
    [PROF_COL_L1MISS] = { "L1 miss/kFLOP", "L1 data-cache misses per 1000 FLOPs (hardware counters)", 13, 6, 1, 1 },
    [PROF_COL_CPU] = { "cpu", "CPU time of every thread / total, from a sample of the calls (1.00 = one core busy)", 5, 4, 1, 1 },
    [PROF_COL_FAULTS] = { "faults", "page faults of the profiling thread (perf software events, else getrusage: the Counters note says which)", 7, 6, 1, 1 },
    [PROF_COL_CSW] = { "csw", "context switches of the profiling thread (perf software events, else getrusage: the Counters note says which)", 6, 4, 1, 1 },
    [PROF_COL_BYTES] = { "bytes", "bytes the op read and wrote, counted from shapes", 9, 7, 1, 0 },
    [PROF_COL_GBPS] = { "GB/s", "bytes / total: the bandwidth achieved (allreduce: the payload handed to MPI)", 6, 5, 1, 0 },
    [PROF_COL_SELF_MEM] = { "self mem", "bytes allocated in the scope itself", 9, 8, 1, 0 },
    [PROF_COL_PEAK_MEM] = { "peak mem", "peak live bytes while the scope was open", 9, 8, 1, 0 },
    [PROF_COL_INTENSITY] = { "FLOP/B", "arithmetic intensity: FLOPs / bytes, both counted from shapes", 6, 6, 1, 1 },
    [PROF_COL_BW_PCT] = { "% bw", "GB/s as a share of the calibrated memory bandwidth (nnbench sysinfo --calibrate)", 5, 5, 1, 1 },
    [PROF_COL_BOUND] = { "bound", "roofline class: compute when FLOP/B is above the ridge point peak GFLOP/s / bandwidth GB/s, else memory", 7, 7, 0, 1 },
};

int prof_row_rank(const prof_row *r, const char **base)
{
    const char *p = r->name;
    if (base) *base = p;
    if (strncmp(p, "rank", 4) || p[4] < '0' || p[4] > '9') return 0;
    char *end;
    long k = strtol(p + 4, &end, 10);
    if (*end != ':' || k < 0 || k > 1000000) return 0;
    if (base) *base = end + 1;
    return (int)k;
}

void prof_table_init(prof_table *t, const prof_row *rows, size_t n, uint64_t total_self_ns, double peak_gflops)
{
    memset(t, 0, sizeof *t);
    t->rows = rows;
    t->n = n;
    t->peak_gflops = peak_gflops > 0 ? peak_gflops : 0;
    double self = 0;
    for (int c = 0; c < PROF_COL_N; c++) t->show[c] = !prof_cols[c].optional;
    t->show[PROF_COL_PEAK_PCT] = t->peak_gflops > 0;
    for (size_t i = 0; i < n; i++) {
        const prof_row *r = &rows[i];
        self += (double)r->self_ns;
        if (r->layer[0]) t->show[PROF_COL_LAYER] = 1;
        if (prof_row_rank(r, NULL) > 0) t->show[PROF_COL_RANK] = 1;
        if (r->cycles > 0 && r->instructions >= 0) t->show[PROF_COL_IPC] = 1;
        if (r->l1d_miss >= 0) t->show[PROF_COL_L1MISS] = 1;
        if (r->cpu_ns >= 0) t->show[PROF_COL_CPU] = 1;
        if (r->faults >= 0) t->show[PROF_COL_FAULTS] = 1;
        if (r->csw >= 0) t->show[PROF_COL_CSW] = 1;
        if (r->flops && r->bytes) t->show[PROF_COL_INTENSITY] = 1;
    }
    /* Self % is of the whole profile's self time, so rows of one grouping add up to their share. */
    t->self_total_ns = total_self_ns ? (double)total_self_ns : self;
}

void prof_table_set_bw(prof_table *t, double bw_gbs, int show_unknown)
{
    t->bw_gbs = bw_gbs > 0 && isfinite(bw_gbs) ? bw_gbs : 0;
    int known = t->bw_gbs > 0 && t->peak_gflops > 0;
    t->show[PROF_COL_BW_PCT] = t->bw_gbs > 0 || (show_unknown && t->show[PROF_COL_INTENSITY]);
    t->show[PROF_COL_BOUND] = t->show[PROF_COL_INTENSITY] && (known || show_unknown);
}

int prof_table_bound(const prof_table *t, const prof_row *r)
{
    if (!r->flops || !r->bytes || t->peak_gflops <= 0 || t->bw_gbs <= 0) return 0;
    /* at the ridge point the memory roof and the compute roof meet */
    return (double)r->flops / (double)r->bytes > t->peak_gflops / t->bw_gbs ? 1 : -1;
}

/* The widest vector ISA an OpenBLAS core's kernels use: 0 SSE, 1 AVX, 2 AVX2, 3 AVX-512;
 * -1 a core not listed (no warning). */
static int core_level(const char *core)
{
    static const struct { const char *name; int level; } cores[] = {
        { "Prescott", 0 }, { "Core2", 0 }, { "Penryn", 0 }, { "Dunnington", 0 }, { "Nehalem", 0 },
        { "Atom", 0 }, { "Barcelona", 0 }, { "Opteron", 0 }, { "Bobcat", 0 }, { "Katmai", 0 },
        { "Sandybridge", 1 }, { "Bulldozer", 1 }, { "Piledriver", 1 }, { "Steamroller", 1 }, { "Excavator", 1 },
        { "Haswell", 2 }, { "Zen", 2 }, { "SkylakeX", 3 }, { "Cooperlake", 3 }, { "SapphireRapids", 3 },
    };
    for (size_t i = 0; core && i < sizeof cores / sizeof *cores; i++)
        if (!strcasecmp(core, cores[i].name)) return cores[i].level;
    return -1;
}

/* Sums of the rows whose name (without a "rankK:" prefix) is name, over layers and ranks:
 * an op's figures across the model, as grouping by op gives them. */
static void sum_named(const prof_row *rows, size_t n, const char *name, double *total_ns, double *cpu_ns)
{
    *total_ns = *cpu_ns = 0;
    for (size_t i = 0; i < n; i++) {
        const char *base;
        prof_row_rank(&rows[i], &base);
        if (strcmp(base, name)) continue;
        *total_ns += (double)rows[i].total_ns;
        /* a row without the CPU clock makes the op's cpu unknown */
        *cpu_ns = rows[i].cpu_ns < 0 || *cpu_ns < 0 ? -1 : *cpu_ns + (double)rows[i].cpu_ns;
    }
}

/* 1 when rows[i] is the first row named like it (the one that speaks for its op). */
static int first_named(const prof_row *rows, size_t i)
{
    const char *a, *b;
    prof_row_rank(&rows[i], &a);
    for (size_t j = 0; j < i; j++)
        if (prof_row_rank(&rows[j], &b), !strcmp(a, b)) return 0;
    return 1;
}

int prof_perf_warnings(const prof_row *rows, size_t n, uint64_t total_self_ns, int gemm_threads, const char *blas_core,
                  const char *cpu_isa, char *out, size_t cap)
{
    size_t len = 0;
    int count = 0;
    char line[320];
    if (cap) out[0] = 0;
    double self = (double)total_self_ns;
    for (size_t i = 0; !total_self_ns && i < n; i++) self += (double)rows[i].self_ns;
    int isa = !cpu_isa ? -1 : !strcmp(cpu_isa, "avx512") ? 3 : !strcmp(cpu_isa, "avx2") ? 2 : -1;
    int core = core_level(blas_core);
    for (size_t i = 0; i <= n; i++) {
        line[0] = 0;
        const char *base = "";
        if (i < n) prof_row_rank(&rows[i], &base);
        double total = 0, cpu = 0;
        if (i == n) {
            if (core >= 0 && isa > core)
                snprintf(line, sizeof line, "the BLAS core %s is weaker than this CPU (%s): GEMMs leave speed "
                         "unused; see sysinfo's core choice, or set OPENBLAS_CORETYPE", blas_core, cpu_isa);
        } else if (!first_named(rows, i)) {
            continue;
        } else if (!strncmp(base, "dense.", 6) && rows[i].kind == PROF_OP && gemm_threads > 1) {
            sum_named(rows, n, base, &total, &cpu);
            /* shown rounded down: 0.998 is below 1 and must not read "1.00 below 1" */
            if (cpu >= 0 && total > 0 && cpu < total)
                snprintf(line, sizeof line, "%s: cpu %.2f below 1 with a %d-thread GEMM: its threads wait "
                         "(a loaded machine, or too many threads for the shape)", base,
                         floor(cpu / total * 100 + 1e-9) / 100, gemm_threads);
        } else if (!strcmp(base, "data.wait") && self > 0) {
            sum_named(rows, n, base, &total, &cpu);
            if (total > 0.05 * self)
                snprintf(line, sizeof line, "data.wait is %.1f%% of the steps (above 5%%): training waits for "
                         "batches; try data.prefetch", 100.0 * total / self);
        }
        if (!line[0] || len + strlen(line) + 2 > cap) continue;
        len += (size_t)snprintf(out + len, cap - len, "%s\n", line);
        count++;
    }
    return count;
}

int prof_col_sort(prof_col c)
{
    switch (c) {
    case PROF_COL_NAME: return PROF_SORT_NAME;
    case PROF_COL_SELF_PCT: case PROF_COL_SELF: return PROF_SORT_SELF;
    case PROF_COL_TOTAL: return PROF_SORT_TOTAL;
    case PROF_COL_AVG: return PROF_SORT_AVG;
    case PROF_COL_CALLS: return PROF_SORT_CALLS;
    case PROF_COL_GFLOPS: case PROF_COL_PEAK_PCT: return PROF_SORT_GFLOPS;
    case PROF_COL_BYTES: return PROF_SORT_BYTES;
    case PROF_COL_GBPS: case PROF_COL_BW_PCT: return PROF_SORT_GBPS;
    case PROF_COL_SELF_MEM: return PROF_SORT_MEM;
    case PROF_COL_INTENSITY: case PROF_COL_BOUND: return PROF_SORT_INTENSITY;
    default: return -1;
    }
}

static const char *dash(char *b, size_t cap)
{
    snprintf(b, cap, "-");
    return b;
}

double prof_table_self_share(const prof_table *t, const prof_row *r)
{
    double d = t->self_total_ns;
    if (t->ranks && t->ranks->ranks > 1) {
        int k = prof_row_rank(r, NULL);
        d = k < PROF_RANKS_MAX ? t->ranks->self_s[k] * 1e9 : 0;
    }
    return d > 0 ? (double)r->self_ns / d : 0;
}

const char *prof_table_cell(const prof_table *t, const prof_row *r, prof_col c, char *b, size_t cap)
{
    double total = (double)r->total_ns;
    double gflops = r->flops && r->total_ns ? (double)r->flops / total : NAN;
    switch (c) {
    case PROF_COL_NAME: {
        const char *base;
        prof_row_rank(r, &base);
        return prof_text_visible(b, cap, base);
    }
    case PROF_COL_LAYER: return r->layer[0] ? prof_text_visible(b, cap, r->layer) : dash(b, cap);
    case PROF_COL_RANK: snprintf(b, cap, "%d", prof_row_rank(r, NULL)); return b;
    case PROF_COL_SELF_PCT:
        snprintf(b, cap, "%.1f%%", 100.0 * prof_table_self_share(t, r));
        return b;
    case PROF_COL_SELF: return prof_fmt_duration(b, cap, (double)r->self_ns * 1e-9);
    case PROF_COL_TOTAL: return prof_fmt_duration(b, cap, total * 1e-9);
    case PROF_COL_AVG: return r->calls ? prof_fmt_duration(b, cap, total / (double)r->calls * 1e-9) : dash(b, cap);
    case PROF_COL_CALLS: snprintf(b, cap, "%llu", (unsigned long long)r->calls); return b;
    case PROF_COL_GFLOPS:
        if (isnan(gflops)) return dash(b, cap);
        snprintf(b, cap, "%.2f", gflops);
        return b;
    case PROF_COL_PEAK_PCT:
        if (isnan(gflops) || t->peak_gflops <= 0) return dash(b, cap);
        snprintf(b, cap, "%.1f%%", 100.0 * gflops / t->peak_gflops);
        return b;
    case PROF_COL_IPC:
        if (r->cycles <= 0 || r->instructions < 0) return dash(b, cap);
        snprintf(b, cap, "%.2f", (double)r->instructions / (double)r->cycles);
        return b;
    case PROF_COL_L1MISS:
        if (r->l1d_miss < 0 || !r->flops) return dash(b, cap);
        snprintf(b, cap, "%.2f", (double)r->l1d_miss * 1000.0 / (double)r->flops);
        return b;
    case PROF_COL_CPU:
        if (r->cpu_ns < 0 || !r->total_ns) return dash(b, cap);
        snprintf(b, cap, "%.2f", (double)r->cpu_ns / total);
        return b;
    case PROF_COL_FAULTS:
        if (r->faults < 0) return dash(b, cap);
        snprintf(b, cap, "%lld", (long long)r->faults);
        return b;
    case PROF_COL_CSW:
        if (r->csw < 0) return dash(b, cap);
        snprintf(b, cap, "%lld", (long long)r->csw);
        return b;
    case PROF_COL_BYTES: return r->bytes ? prof_fmt_bytes(b, cap, (double)r->bytes) : dash(b, cap);
    case PROF_COL_GBPS:
        if (!r->bytes || !r->total_ns) return dash(b, cap);
        snprintf(b, cap, "%.2f", (double)r->bytes / total);   /* bytes per ns = GB/s */
        return b;
    case PROF_COL_SELF_MEM:
        /* freed more than it allocated: a negative count */
        if (r->self_mem < 0 && cap > 1) { b[0] = '-'; prof_fmt_bytes(b + 1, cap - 1, -(double)r->self_mem); return b; }
        return prof_fmt_bytes(b, cap, (double)r->self_mem);
    case PROF_COL_PEAK_MEM: return prof_fmt_bytes(b, cap, (double)r->peak_mem);
    case PROF_COL_INTENSITY:
        if (!r->flops || !r->bytes) return dash(b, cap);
        snprintf(b, cap, "%.3g", (double)r->flops / (double)r->bytes);
        return b;
    case PROF_COL_BW_PCT:
        if (!r->bytes || !r->total_ns || t->bw_gbs <= 0) return dash(b, cap);
        snprintf(b, cap, "%.1f%%", 100.0 * (double)r->bytes / total / t->bw_gbs);
        return b;
    case PROF_COL_BOUND: {
        int k = prof_table_bound(t, r);
        snprintf(b, cap, "%s", k > 0 ? "compute" : k < 0 ? "memory" : "-");
        return b;
    }
    case PROF_COL_N: break;
    }
    return dash(b, cap);
}

/* One cell of a text table: cut to w characters ("..." when a name is cut), padded. */
static void put_cell(FILE *f, const char *s, size_t w, int right)
{
    char cut[256], out[1024];
    size_t chars = prof_text_chars(s);
    if (right && chars > w) w = chars;   /* numbers are never cut */
    if (chars > w && w > 3) {
        prof_text_fit(cut, sizeof cut - 3, s, w - 3, 0);
        strcat(cut, "...");
        s = cut;
    }
    prof_text_pad(out, sizeof out, s, w, right ? PROF_TEXT_RIGHT : 0);
    fputs(out, f);
}

/* Fits the shown columns (show, widths w) into cols characters after indent: names and
 * layers give up width down to their model minimum, then whole columns go from the right
 * (never the name or self %), which dropped[] marks. */
static void fit_columns(unsigned char *show, size_t *w, size_t cols, size_t indent, int *dropped)
{
    size_t total = indent;
    int n = 0;
    for (int c = 0; c < PROF_COL_N; c++)
        if (show[c]) total += w[c] + (n++ ? 1 : 0);
    for (int c = PROF_COL_NAME; c <= PROF_COL_LAYER && total > cols; c++) {
        size_t min = (size_t)prof_cols[c].min_width, give = w[c] > min ? w[c] - min : 0;
        if (!show[c] || !give) continue;
        if (give > total - cols) give = total - cols;
        w[c] -= give;
        total -= give;
    }
    for (int c = PROF_COL_N - 1; c > PROF_COL_SELF_PCT && total > cols; c--) {
        if (!show[c]) continue;
        show[c] = 0;
        dropped[c] = 1;
        total -= w[c] + 1;
    }
}

/* "(left out for N columns: a, b, c)" under the table, its lines within cols. */
static void print_left_out(FILE *f, const int *dropped, size_t cols, const char *indent)
{
    char head[64];
    snprintf(head, sizeof head, "(left out for %zu columns:", cols);
    size_t x = prof_text_chars(indent) + strlen(head), n = 0;
    fprintf(f, "%s%s", indent, head);
    for (int c = 0; c < PROF_COL_N; c++) {
        if (!dropped[c]) continue;
        const char *t = prof_cols[c].title;
        size_t need = 1 + strlen(t) + 1;                   /* " title" and "," or ")" */
        if (n && x + need > cols) { fprintf(f, "\n%s ", indent); x = prof_text_chars(indent) + 1; }
        fprintf(f, " %s", t);
        n++;
        x += need;
        int more = 0;
        for (int d = c + 1; d < PROF_COL_N; d++) more |= dropped[d];
        fputc(more ? ',' : ')', f);
    }
    fputc('\n', f);
}

/* The whole profile's self time that no row of the table holds: grouped by op or layer,
 * the time spent between ops (the phases' and the step's own time: the loop, the data wait,
 * the optimizer's bookkeeping). A row of it makes the self % add up to 100. 0 when the rows
 * hold it all (by phase or scope) or are split by rank. */
double prof_table_rest_ns(const prof_table *t)
{
    if (t->ranks && t->ranks->ranks > 1) return 0;
    double held = 0;
    for (size_t i = 0; i < t->n; i++) held += (double)t->rows[i].self_ns;
    double rest = t->self_total_ns - held;
    return rest > 0.0005 * t->self_total_ns ? rest : 0;
}

#define REST_NAME "(other / between ops)"

/* One line of the table; self_only: only name, self % and self (the rest row). */
static void print_row(FILE *f, const prof_table *t, const prof_row *r, const unsigned char *show, const size_t *w,
                      const char *indent, int self_only)
{
    char b[256];
    int first = 1;
    fputs(indent, f);
    for (int c = 0; c < PROF_COL_N; c++) {
        if (!show[c]) continue;
        if (!first) fputc(' ', f);
        first = 0;
        int have = !self_only || c == PROF_COL_NAME || c == PROF_COL_SELF_PCT || c == PROF_COL_SELF;
        put_cell(f, have ? prof_table_cell(t, r, (prof_col)c, b, sizeof b) : "", w[c], prof_cols[c].right);
    }
    fputc('\n', f);
}

/* The rest row: its name, self % and self time; the other columns are blank. */
static void print_rest(FILE *f, const prof_table *t, const unsigned char *show, const size_t *w, const char *indent)
{
    double rest = prof_table_rest_ns(t);
    if (rest <= 0) return;
    prof_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", REST_NAME);
    r.self_ns = (uint64_t)rest;
    print_row(f, t, &r, show, w, indent, 1);
}

void prof_table_print(FILE *f, const prof_table *t, size_t max_rows, size_t name_max, const char *indent)
{
    size_t shown = max_rows && max_rows < t->n ? max_rows : t->n;
    size_t w[PROF_COL_N];
    unsigned char show[PROF_COL_N];
    char b[256];
    if (!name_max) name_max = 40;
    for (int c = 0; c < PROF_COL_N; c++) {
        size_t tw = strlen(prof_cols[c].title);
        /* names and layers as wide as the longest shown (within limits), numbers as wide
         * as their widest cell (never cut) */
        w[c] = c == PROF_COL_NAME || c == PROF_COL_LAYER ? tw : (size_t)prof_cols[c].width;
        if (w[c] < tw) w[c] = tw;
        show[c] = t->show[c];
    }
    if (prof_table_rest_ns(t) > 0 && w[PROF_COL_NAME] < strlen(REST_NAME)) w[PROF_COL_NAME] = strlen(REST_NAME);
    for (size_t i = 0; i < shown; i++)
        for (int c = 0; c < PROF_COL_N; c++) {
            if (!show[c]) continue;
            size_t l = prof_text_chars(prof_table_cell(t, &t->rows[i], (prof_col)c, b, sizeof b));
            if (c == PROF_COL_NAME || c == PROF_COL_LAYER) {
                size_t cap = c == PROF_COL_NAME ? name_max : 16;
                if (l > cap) l = cap;
            }
            if (l > w[c]) w[c] = l;
        }
    /* On a terminal the table fits its width: wrapped lines are unreadable. */
    int dropped[PROF_COL_N] = { 0 }, any = 0;
    size_t cols = prof_text_columns(f);
    if (cols) fit_columns(show, w, cols, prof_text_chars(indent), dropped);
    for (int c = 0; c < PROF_COL_N; c++) any |= dropped[c];
    size_t width = 0;
    fputs(indent, f);
    for (int c = 0; c < PROF_COL_N; c++) {
        if (!show[c]) continue;
        if (width) fputc(' ', f);
        put_cell(f, prof_cols[c].title, w[c], prof_cols[c].right);
        width += w[c] + (width ? 1 : 0);
    }
    fputc('\n', f);
    fputs(indent, f);
    for (size_t i = 0; i < width; i++) fputc('-', f);
    fputc('\n', f);
    for (size_t i = 0; i < shown; i++) print_row(f, t, &t->rows[i], show, w, indent, 0);
    print_rest(f, t, show, w, indent);
    fputs(indent, f);
    for (size_t i = 0; i < width; i++) fputc('-', f);
    fputc('\n', f);
    if (any) print_left_out(f, dropped, cols, indent);
}

/* ---- load balance across ranks --------------------------------------------------------- */

void prof_balance_get(const prof_row *rows, size_t n, prof_balance *out)
{
    memset(out, 0, sizeof *out);
    out->imbalance = NAN;
    double step[PROF_RANKS_MAX] = { 0 };
    for (size_t i = 0; i < n; i++) {
        const char *base;
        int k = prof_row_rank(&rows[i], &base);
        if (k >= PROF_RANKS_MAX) continue;
        out->self_s[k] += (double)rows[i].self_ns * 1e-9;
        if (!strcmp(base, "step") && rows[i].kind == PROF_STEP) {
            step[k] += (double)rows[i].total_ns * 1e-9;
            out->steps[k] += (long)rows[i].calls;
        } else if (!strncmp(base, "allreduce", 9)) {
            out->comm_s[k] += (double)rows[i].total_ns * 1e-9;
        }
    }
    /* Ranks count up to the highest one with steps (a rank that sent no profile is absent). */
    for (int k = 0; k < PROF_RANKS_MAX; k++)
        if (out->steps[k] > 0) out->ranks = k + 1;
    double sum = 0;
    int have = 0;
    for (int k = 0; k < out->ranks; k++) {
        if (out->steps[k] <= 0) continue;
        out->comm_s[k] /= (double)out->steps[k];
        out->compute_s[k] = step[k] / (double)out->steps[k] - out->comm_s[k];
        if (out->compute_s[k] < 0) out->compute_s[k] = 0;
        sum += out->compute_s[k];
        if (!have++ || out->compute_s[k] > out->max_s) { out->max_s = out->compute_s[k]; out->slowest = k; }
    }
    if (have) out->mean_s = sum / have;
    if (have >= 2 && out->mean_s > 0) out->imbalance = out->max_s / out->mean_s;
}

const char *prof_balance_line(const prof_balance *bal, char *b, size_t cap)
{
    if (isnan(bal->imbalance)) { if (cap) b[0] = 0; return b; }
    char mx[32], mean[32];
    snprintf(b, cap, "load imbalance %.2f (max/mean compute per step over %d ranks: slowest rank %d %s, mean %s)",
             bal->imbalance, bal->ranks, bal->slowest, prof_fmt_duration(mx, sizeof mx, bal->max_s),
             prof_fmt_duration(mean, sizeof mean, bal->mean_s));
    return b;
}

/* ---- `nnbench run --profile` ------------------------------------------------------------ */

void prof_print_table(FILE *f, const prof_row *rows, size_t n, const prof_summary *sum,
                      prof_sort sort, size_t max_rows)
{
    prof_row *sorted = calloc(n ? n : 1, sizeof *sorted);
    if (!sorted) {
        fprintf(f, "profiler: out of memory for the table (%zu rows)\n", n);
        return;
    }
    if (n) memcpy(sorted, rows, n * sizeof *rows);
    prof_rows_sort(sorted, n, sort);
    size_t shown = max_rows && max_rows < n ? max_rows : n;
    prof_table t;
    prof_table_init(&t, sorted, n, sum ? sum->total_self_ns : 0, sum ? sum->peak_gflops : 0);
    prof_table_set_bw(&t, sum ? sum->bw_gbs : 0, 0);
    prof_table_print(f, &t, max_rows, 40, "");
    if (shown < n) fprintf(f, "(%zu of %zu rows shown, sorted by %s)\n", shown, n, sort_names[sort]);
    if (sum) {
        double max_pct = 0; /* above 100% means the calibration was taken on a busy machine */
        for (size_t i = 0; sum->peak_gflops > 0 && i < shown; i++)
            if (sorted[i].flops && sorted[i].total_ns) {
                double pct = 100.0 * (double)sorted[i].flops / (double)sorted[i].total_ns / sum->peak_gflops;
                if (pct > max_pct) max_pct = pct;
            }
        char t1[24], t2[24], t3[24], t4[24], b1[24], b2[24], b3[24], reads[96] = "";
        double profiled = (double)sum->total_self_ns;
        if (sum->cpu_reads)
            snprintf(reads, sizeof reads, ", + %s in the %llu sampled calls' clock reads",
                     prof_fmt_duration(t4, sizeof t4, (double)sum->sample_ns * 1e-9), (unsigned long long)sum->cpu_reads);
        fprintf(f, "Self time total: %s; profiler overhead: %s (%.2f%% of it; %llu scopes x %s%s)\n",
                prof_fmt_duration(t1, sizeof t1, profiled * 1e-9), prof_fmt_duration(t2, sizeof t2, (double)sum->overhead_ns * 1e-9),
                profiled > 0 ? 100.0 * (double)sum->overhead_ns / profiled : 0.0,
                (unsigned long long)sum->events, prof_fmt_duration(t3, sizeof t3, sum->ns_per_event * 1e-9), reads);
        fprintf(f, "Memory: peak %s live, %s allocated in all, peak RSS %s\n",
                prof_fmt_bytes(b1, sizeof b1, (double)sum->peak_bytes),
                prof_fmt_bytes(b2, sizeof b2, (double)sum->total_alloc_bytes),
                prof_fmt_bytes(b3, sizeof b3, (double)sum->peak_rss));
        if (sum->peak_gflops > 0)
            fprintf(f, "%% peak: of the calibrated sgemm peak %.1f GFLOP/s (nnbench sysinfo --calibrate)%s\n",
                    sum->peak_gflops, max_pct > 100.0 ? "; an op ran above it, so the calibration "
                    "was likely taken on a busy machine: rerun it on an idle one" : "");
        if (t.show[PROF_COL_BOUND])
            fprintf(f, "bound: compute above the ridge point %.3g FLOP/B = %.1f GFLOP/s peak / %.1f GB/s "
                    "memory bandwidth, else memory\n", sum->peak_gflops / sum->bw_gbs, sum->peak_gflops, sum->bw_gbs);
        if (sum->hw_note[0]) {
            /* What is counted and why not, one line each; cpu needs no PAPI. */
            fprintf(f, "Counters: %s\n          %s\n", sum->hw_note, sum->sw_note);
            fprintf(f, "          cpu = CPU time of every thread (process CPU clock, sampled calls) / wall time (total); "
                       "faults, csw: the profiling thread only (%s)\n",
                    strstr(sum->sw_note, "getrusage") ? "getrusage(RUSAGE_THREAD) of the thread that ran the scope"
                                                      : "perf events count the thread that opened them");
            const char *extra = strstr(sum->counters_note, sum->sw_note);
            if (extra) extra += strlen(sum->sw_note);
            if (extra && *extra) fprintf(f, "          warnings%s\n", extra);
        } else {
            fprintf(f, "Counters: %s\n", sum->counters_note[0] ? sum->counters_note : "-");
        }
        if (sum->clock[0]) fprintf(f, "Clock: %s\n", sum->clock);
        if (sum->unbalanced)
            fprintf(f, "Warning: %llu prof_end calls did not match the open scope and were ignored\n",
                    (unsigned long long)sum->unbalanced);
    }
    free(sorted);
}
