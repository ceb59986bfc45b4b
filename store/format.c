/* format.c — how numbers, durations, sizes and times read in tables and reports; one
 * place, so the CLI, the reports and the workbench print the same thing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "store.h"

const char *store_fmt_num(char *b, size_t cap, double v)
{
    if (!isfinite(v)) snprintf(b, cap, "-");
    else snprintf(b, cap, "%.4g", v);
    return b;
}

const char *store_fmt_duration(char *b, size_t cap, double s)
{
    if (!isfinite(s) || s < 0) snprintf(b, cap, "-");
    else if (s == 0) snprintf(b, cap, "0 s");
    else if (s < 1e-3) snprintf(b, cap, "%.3g us", s * 1e6);
    else if (s < 1e-2) snprintf(b, cap, "%.2f ms", s * 1e3);
    else if (s < 1) snprintf(b, cap, "%.0f ms", s * 1e3);
    else if (s < 60) snprintf(b, cap, "%.2f s", s);
    else if (s < 3600) snprintf(b, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(b, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    return b;
}

const char *store_fmt_bytes(char *b, size_t cap, double v)
{
    if (!isfinite(v) || v < 0) snprintf(b, cap, "-");
    else if (v < 1024) snprintf(b, cap, "%.0f B", v);
    else if (v < 1048576) snprintf(b, cap, "%.1f KiB", v / 1024);
    else if (v < 1073741824.0) snprintf(b, cap, "%.1f MiB", v / 1048576);
    else snprintf(b, cap, "%.2f GiB", v / 1073741824.0);
    return b;
}

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

