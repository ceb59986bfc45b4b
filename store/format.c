/* format.c — times of day and the natural order of names in tables and reports (numbers,
 * durations and sizes: prof_fmt_* in profiler/table.c, one place for every module). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "store.h"

const char *store_fmt_time(char *b, size_t cap, double unix_s, const char *strftime_fmt)
{
    if (!isfinite(unix_s)) { snprintf(b, cap, "-"); return b; }
    time_t tt = (time_t)unix_s;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(b, cap, strftime_fmt, &tm);
    return b;
}

int store_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            char *ea, *eb;
            unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
            if (x != y) return x < y ? -1 : 1;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

