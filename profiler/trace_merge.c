/* trace_merge.c — joins Chrome traces written by prof_trace_write (one per process, e.g.
 * one per MPI rank) into one file with a named process row per source, as Perfetto shows
 * Horovod's timeline. Only this profiler's own trace format is read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char merge_err[1400];

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The events of one trace: the text between "traceEvents":[ and the closing ]}, with the
 * process name "nnbench" replaced by label. Appended to out. */
static int append_events(FILE *out, const char *path, const char *label, int first)
{
    size_t len = 0;
    char *t = slurp(path, &len);
    if (!t) {
        snprintf(merge_err, sizeof merge_err, "profiler: cannot read trace '%s': %s", path, strerror(errno));
        return -1;
    }
    /* prof_trace_write ends the array with "\n]}\n": the events end at the last "\n]}". */
    char *b = strstr(t, "\"traceEvents\":[\n"), *e = NULL;
    for (char *q = t; (q = strstr(q, "\n]}")); q++) e = q;
    if (!b || !e || e <= b) {
        free(t);
        snprintf(merge_err, sizeof merge_err, "profiler: '%s' is not a trace written by nnbench", path);
        return -1;
    }
    b += strlen("\"traceEvents\":[\n");
    *e = '\0';
    static const char pname[] = "\"args\":{\"name\":\"nnbench\"}";
    char *at = strstr(b, pname);
    if (!first) fputs(",\n", out);
    if (at) {
        fwrite(b, 1, (size_t)(at - b), out);
        fprintf(out, "\"args\":{\"name\":\"%s\"}", label);
        fputs(at + strlen(pname), out);
    } else {
        fputs(b, out);
    }
    free(t);
    return 0;
}

int prof_trace_merge(const char *dst, const char *const *srcs, const char *const *labels, size_t n)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.merge.tmp", dst);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        snprintf(merge_err, sizeof merge_err, "profiler: cannot write trace '%s': %s", tmp, strerror(errno));
        prof_internal_set_error(merge_err);
        return -1;
    }
    fprintf(out, "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"generator\":\"nnbench profiler\","
                 "\"merged\":%zu,\"note\":\"one process row per source; each row's time 0 is its own profiler's start\"},\n"
                 "\"traceEvents\":[\n", n);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) rc = append_events(out, srcs[i], labels[i], i == 0);
    fputs("\n]}\n", out);
    if ((ferror(out) | fclose(out)) && !rc) {
        snprintf(merge_err, sizeof merge_err, "profiler: writing trace '%s' failed: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (!rc && rename(tmp, dst)) {
        snprintf(merge_err, sizeof merge_err, "profiler: cannot write trace '%s': %s", dst, strerror(errno));
        rc = -1;
    }
    if (rc) { remove(tmp); prof_internal_set_error(merge_err); }
    return rc;
}
