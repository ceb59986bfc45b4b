/* table.c — the key_averages-style table of profile rows: sorting, parsing CLI keys, printing. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *sort_names[] = { "self", "total", "calls", "avg", "flops", "bytes", "mem", "name" };
static const char *group_names[] = { "scope", "op", "layer", "phase" };

int prof_sort_parse(const char *s, prof_sort *out)
{
    for (size_t i = 0; s && i < sizeof sort_names / sizeof *sort_names; i++)
        if (!strcmp(s, sort_names[i])) { *out = (prof_sort)i; return 0; }
    return -1;
}

int prof_group_parse(const char *s, prof_group *out)
{
    for (size_t i = 0; s && i < sizeof group_names / sizeof *group_names; i++)
        if (!strcmp(s, group_names[i])) { *out = (prof_group)i; return 0; }
    return -1;
}

static int cmp_u64_desc(uint64_t a, uint64_t b) { return a < b ? 1 : a > b ? -1 : 0; }

static int row_cmp(const void *va, const void *vb, void *ctx)
{
    const prof_row *a = va, *b = vb;
    int c = 0;
    switch (*(const prof_sort *)ctx) {
    case PROF_SORT_SELF: c = cmp_u64_desc(a->self_ns, b->self_ns); break;
    case PROF_SORT_TOTAL: c = cmp_u64_desc(a->total_ns, b->total_ns); break;
    case PROF_SORT_CALLS: c = cmp_u64_desc(a->calls, b->calls); break;
    case PROF_SORT_AVG: {
        double x = a->calls ? (double)a->total_ns / (double)a->calls : 0;
        double y = b->calls ? (double)b->total_ns / (double)b->calls : 0;
        c = x < y ? 1 : x > y ? -1 : 0;
        break;
    }
    case PROF_SORT_FLOPS: c = cmp_u64_desc(a->flops, b->flops); break;
    case PROF_SORT_BYTES: c = cmp_u64_desc(a->bytes, b->bytes); break;
    case PROF_SORT_MEM: c = a->self_mem < b->self_mem ? 1 : a->self_mem > b->self_mem ? -1 : 0; break;
    case PROF_SORT_NAME: break;
    }
    if (!c) c = strcmp(a->name, b->name);
    if (!c) c = strcmp(a->layer, b->layer);
    return c;
}

void prof_rows_sort(prof_row *rows, size_t n, prof_sort by)
{
    if (n > 1) qsort_r(rows, n, sizeof *rows, row_cmp, &by);
}

/* Human units: ns/us/ms/s for time, B/KB/MB/GB (powers of 1024) for bytes. */
static const char *fmt_time(char *buf, size_t n, double ns)
{
    if (ns < 1e3) snprintf(buf, n, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(buf, n, "%.1f us", ns / 1e3);
    else if (ns < 1e9) snprintf(buf, n, "%.2f ms", ns / 1e6);
    else snprintf(buf, n, "%.3f s", ns / 1e9);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, double b)
{
    const char *neg = b < 0 ? "-" : "";
    if (b < 0) b = -b;
    if (b < 1024) snprintf(buf, n, "%s%.0f B", neg, b);
    else if (b < 1024.0 * 1024) snprintf(buf, n, "%s%.1f KB", neg, b / 1024);
    else if (b < 1024.0 * 1024 * 1024) snprintf(buf, n, "%s%.1f MB", neg, b / (1024.0 * 1024));
    else snprintf(buf, n, "%s%.2f GB", neg, b / (1024.0 * 1024 * 1024));
    return buf;
}

static void row_label(char *buf, size_t n, const prof_row *r)
{
    if (r->layer[0]) snprintf(buf, n, "%s %s", r->layer, r->name);
    else snprintf(buf, n, "%s", r->name);
}

void prof_print_table(FILE *f, const prof_row *rows, size_t n, const prof_summary *sum,
                      prof_sort sort, size_t max_rows)
{
    prof_row *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) {
        fprintf(f, "profiler: out of memory for the table (%zu rows)\n", n);
        return;
    }
    if (n) memcpy(sorted, rows, n * sizeof *rows);
    prof_rows_sort(sorted, n, sort);
    size_t shown = max_rows && max_rows < n ? max_rows : n;

    int show_ipc = 0, show_miss = 0, show_peak = sum && sum->peak_gflops > 0;
    int show_cpu = 0, show_faults = 0, show_csw = 0;
    uint64_t self_sum = 0;
    int name_w = 4;
    for (size_t i = 0; i < n; i++) {
        if (sorted[i].cycles > 0 && sorted[i].instructions >= 0) show_ipc = 1;
        if (sorted[i].l1d_miss >= 0) show_miss = 1;
        if (sorted[i].cpu_ns >= 0) show_cpu = 1;
        if (sorted[i].faults >= 0) show_faults = 1;
        if (sorted[i].csw >= 0) show_csw = 1;
        self_sum += sorted[i].self_ns;
    }
    for (size_t i = 0; i < shown; i++) {
        char label[96];
        row_label(label, sizeof label, &sorted[i]);
        int len = (int)strlen(label);
        if (len > name_w) name_w = len;
    }
    if (name_w > 40) name_w = 40;
    /* Self % is of the whole profile's self time, so rows of one grouping add up to their share. */
    uint64_t denom = sum && sum->total_self_ns ? sum->total_self_ns : self_sum;

    fprintf(f, "%-*s %7s %10s %10s %10s %8s %8s", name_w, "Name", "Self %", "Self", "Total", "Avg",
            "Calls", "GFLOP/s");
    if (show_peak) fprintf(f, " %7s", "% peak");
    if (show_ipc) fprintf(f, " %5s", "IPC");
    if (show_miss) fprintf(f, " %11s", "L1miss/kFL");
    if (show_cpu) fprintf(f, " %5s", "cpu");
    if (show_faults) fprintf(f, " %8s", "faults");
    if (show_csw) fprintf(f, " %7s", "csw");
    fprintf(f, " %10s %10s %10s\n", "Bytes", "Self Mem", "Peak Mem");
    int width = name_w + 8 + 11 * 4 + 9 * 2 + (show_peak ? 8 : 0) + (show_ipc ? 6 : 0) +
                (show_miss ? 12 : 0) + (show_cpu ? 6 : 0) + (show_faults ? 9 : 0) +
                (show_csw ? 8 : 0) + 11 * 3;
    for (int i = 0; i < width; i++) fputc('-', f);
    fputc('\n', f);

    double max_pct = 0; /* above 100% means the calibration was taken on a busy machine */
    for (size_t i = 0; i < shown; i++) {
        const prof_row *r = &sorted[i];
        char label[96], t1[24], t2[24], t3[24], b1[24], b2[24], b3[24], gf[24];
        row_label(label, sizeof label, r);
        if ((int)strlen(label) > name_w) { label[name_w - 3] = 0; strcat(label, "..."); }
        double gflops = r->total_ns ? (double)r->flops / (double)r->total_ns : 0;
        if (r->flops) snprintf(gf, sizeof gf, "%.2f", gflops);
        else snprintf(gf, sizeof gf, "-");
        fprintf(f, "%-*s %6.1f%% %10s %10s %10s %8llu %8s", name_w, label,
                denom ? 100.0 * (double)r->self_ns / (double)denom : 0.0,
                fmt_time(t1, sizeof t1, (double)r->self_ns), fmt_time(t2, sizeof t2, (double)r->total_ns),
                fmt_time(t3, sizeof t3, r->calls ? (double)r->total_ns / (double)r->calls : 0),
                (unsigned long long)r->calls, gf);
        if (show_peak) {
            double pct = 100.0 * gflops / sum->peak_gflops;
            if (pct > max_pct) max_pct = pct;
            if (r->flops) fprintf(f, " %6.1f%%", pct);
            else fprintf(f, " %7s", "-");
        }
        if (show_ipc) {
            if (r->cycles > 0 && r->instructions >= 0)
                fprintf(f, " %5.2f", (double)r->instructions / (double)r->cycles);
            else fprintf(f, " %5s", "-");
        }
        if (show_miss) {
            if (r->l1d_miss >= 0 && r->flops)
                fprintf(f, " %11.2f", (double)r->l1d_miss * 1000.0 / (double)r->flops);
            else fprintf(f, " %11s", "-");
        }
        /* cpu: CPU time of every thread over the scope's wall time (Total). */
        if (show_cpu) {
            if (r->cpu_ns >= 0 && r->total_ns > 0) fprintf(f, " %5.2f", (double)r->cpu_ns / (double)r->total_ns);
            else fprintf(f, " %5s", "-");
        }
        if (show_faults) {
            if (r->faults >= 0) fprintf(f, " %8lld", (long long)r->faults);
            else fprintf(f, " %8s", "-");
        }
        if (show_csw) {
            if (r->csw >= 0) fprintf(f, " %7lld", (long long)r->csw);
            else fprintf(f, " %7s", "-");
        }
        fprintf(f, " %10s %10s %10s\n", r->bytes ? fmt_bytes(b1, sizeof b1, (double)r->bytes) : "-",
                fmt_bytes(b2, sizeof b2, (double)r->self_mem), fmt_bytes(b3, sizeof b3, (double)r->peak_mem));
    }
    for (int i = 0; i < width; i++) fputc('-', f);
    fputc('\n', f);
    if (shown < n) fprintf(f, "(%zu of %zu rows shown, sorted by %s)\n", shown, n, sort_names[sort]);
    if (sum) {
        char t1[24], t2[24], t3[24], b1[24], b2[24], b3[24];
        double profiled = (double)sum->total_self_ns;
        fprintf(f, "Self time total: %s; profiler overhead: %s (%.2f%% of it; %llu scopes x %s)\n",
                fmt_time(t1, sizeof t1, profiled), fmt_time(t2, sizeof t2, (double)sum->overhead_ns),
                profiled > 0 ? 100.0 * (double)sum->overhead_ns / profiled : 0.0,
                (unsigned long long)sum->events, fmt_time(t3, sizeof t3, sum->ns_per_event));
        fprintf(f, "Memory: peak %s live, %s allocated in all, peak RSS %s\n",
                fmt_bytes(b1, sizeof b1, (double)sum->peak_bytes),
                fmt_bytes(b2, sizeof b2, (double)sum->total_alloc_bytes),
                fmt_bytes(b3, sizeof b3, (double)sum->peak_rss));
        if (sum->peak_gflops > 0)
            fprintf(f, "%% peak: of the calibrated sgemm peak %.1f GFLOP/s (nnbench sysinfo --calibrate)%s\n",
                    sum->peak_gflops, max_pct > 100.0 ? "; an op ran above it, so the calibration "
                    "was likely taken on a busy machine: rerun it on an idle one" : "");
        if (sum->hw_note[0]) {
            /* What is counted and why not, one line each; cpu needs no PAPI. */
            fprintf(f, "Counters: %s\n          %s\n", sum->hw_note, sum->sw_note);
            fprintf(f, "          cpu = CPU time of every thread (process CPU clock) / wall time (Total); "
                       "faults, csw: the profiling thread only (perf events count the thread that "
                       "opened them)\n");
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
