/* table.c — the key_averages-style table of profile rows: sorting, parsing CLI keys, printing. */
#include <stdlib.h>
#include <string.h>

#include "profiler.h"

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

static prof_sort sort_key;

static int cmp_u64_desc(uint64_t a, uint64_t b) { return a < b ? 1 : a > b ? -1 : 0; }

static int row_cmp(const void *va, const void *vb)
{
    const prof_row *a = va, *b = vb;
    int c = 0;
    switch (sort_key) {
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
    /* qsort has no context argument in C11; the table is built on one thread. */
    sort_key = by;
    if (n > 1) qsort(rows, n, sizeof *rows, row_cmp);
}

void prof_print_table(FILE *f, const prof_row *rows, size_t n, const prof_summary *sum,
                      prof_sort sort, size_t max_rows)
{
    (void)sort;
    (void)max_rows;
    (void)sum;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-40s %12llu %12llu %8llu\n", rows[i].name,
                (unsigned long long)rows[i].self_ns, (unsigned long long)rows[i].total_ns,
                (unsigned long long)rows[i].calls);
}

int prof_trace_write(prof_t *p, const char *path)
{
    (void)p;
    (void)path;
    fprintf(stderr, "profiler: traces are not written yet (being implemented)\n");
    return -1;
}
