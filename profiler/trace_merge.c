/* trace_merge.c — joins Chrome traces written by prof_trace_write (one per process, e.g.
 * one per MPI rank) into one file with a named process row per source, as Perfetto shows
 * Horovod's timeline, aligned on the sources' prof_clock_sync marks. Only this profiler's
 * own trace format is read: the writer escapes every string, so a bare "ts": or the
 * process-name record can only be what the writer put there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char merge_err[1400];

static char *slurp(const char *path)
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
    return buf;
}

typedef struct {
    char *text;          /* the whole file */
    char *events;        /* its events: the text between "traceEvents":[ and the closing ] */
    double sync_us;      /* its prof_clock_sync mark; < 0: none */
} source;

static int load(source *s, const char *path)
{
    static const char head[] = "\"traceEvents\":[";
    s->text = slurp(path);
    if (!s->text) {
        snprintf(merge_err, sizeof merge_err, "profiler: cannot read trace '%s': %s", path, strerror(errno));
        return -1;
    }
    char *b = strstr(s->text, head), *e = strrchr(s->text, ']');
    if (!b || !e || e < b + strlen(head) || strncmp(s->text, "{\"displayTimeUnit\"", 18)) {
        snprintf(merge_err, sizeof merge_err, "profiler: '%s' is not a trace written by nnbench", path);
        return -1;
    }
    *b = '\0';                       /* otherData is searched up to the events only */
    s->events = b + strlen(head);
    *e = '\0';
    const char *m = strstr(s->text, "\"sync_us\":");
    s->sync_us = m ? strtod(m + strlen("\"sync_us\":"), NULL) : -1;
    return 0;
}

/* Copies src's events to out with every "ts" moved by shift_us and the process name
 * "nnbench" replaced by label (escaped by the JSON writer). */
static void copy_events(FILE *out, const char *ev, double shift_us, const char *label)
{
    static const char ts[] = "\"ts\":", pname[] = "\"args\":{\"name\":\"nnbench\"}";
    const char *q = ev;
    for (;;) {
        const char *t = strstr(q, ts), *pn = strstr(q, pname);
        const char *next = t && (!pn || t < pn) ? t : pn;
        if (!next) break;
        fwrite(q, 1, (size_t)(next - q), out);
        if (next == t) {
            char *end;
            double v = strtod(t + strlen(ts), &end);
            fprintf(out, "%s%.15g", ts, v + shift_us);
            q = end;
        } else {
            prof_json j;
            fputs("\"args\":{\"name\":", out);
            prof_json_begin(&j, out, 0);
            prof_json_str(&j, label);
            prof_json_end(&j);
            fputc('}', out);
            q = pn + strlen(pname);
        }
    }
    fputs(q, out);
}

int prof_trace_merge(const char *dst, const char *const *srcs, const char *const *labels, size_t n)
{
    source *s = calloc(n ? n : 1, sizeof *s);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.merge.tmp", dst);
    FILE *out = NULL;
    int rc = 0, aligned = n > 0;
    double latest = 0;
    if (!s) {
        snprintf(merge_err, sizeof merge_err, "profiler: out of memory joining %zu traces", n);
        rc = -1;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        rc = load(&s[i], srcs[i]);
        if (!rc && s[i].sync_us < 0) aligned = 0;
        if (!rc && s[i].sync_us > latest) latest = s[i].sync_us;
    }
    if (!rc && !(out = fopen(tmp, "w"))) {
        snprintf(merge_err, sizeof merge_err, "profiler: cannot write trace '%s': %s", tmp, strerror(errno));
        rc = -1;
    }
    if (!rc) {
        /* Each source is moved so that its mark lands on the latest one: no time < 0. */
        prof_json j;
        prof_json_begin(&j, out, 0);
        prof_json_object(&j);
        prof_json_kstr(&j, "displayTimeUnit", "ms");
        prof_json_key(&j, "otherData");
        prof_json_object(&j);
        prof_json_kstr(&j, "generator", "nnbench profiler");
        prof_json_kint(&j, "merged", (long long)n);
        prof_json_kstr(&j, "note", aligned ? "one process row per source, aligned on a barrier all of them passed "
                                             "before the first step (prof_clock_sync)"
                                           : "one process row per source; each row's time 0 is its own profiler's "
                                             "start (a source had no clock-sync mark)");
        prof_json_close(&j);
        prof_json_key(&j, "traceEvents");
        prof_json_array(&j);   /* left open: the sources' events go in as they are */
        fputc('\n', out);
        for (size_t i = 0; i < n; i++) {
            if (i) fputs(",\n", out);
            copy_events(out, s[i].events, aligned ? latest - s[i].sync_us : 0, labels[i]);
        }
        fputs("\n]}\n", out);
        if (ferror(out) | fclose(out)) {
            snprintf(merge_err, sizeof merge_err, "profiler: writing trace '%s' failed: %s", tmp, strerror(errno));
            rc = -1;
        } else if (rename(tmp, dst)) {
            snprintf(merge_err, sizeof merge_err, "profiler: cannot write trace '%s': %s", dst, strerror(errno));
            rc = -1;
        }
        if (rc) remove(tmp);
    }
    for (size_t i = 0; s && i < n; i++) free(s[i].text);
    free(s);
    if (rc) prof_internal_errorf("%s", merge_err);
    return rc;
}
