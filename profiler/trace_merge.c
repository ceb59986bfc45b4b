/* trace_merge.c — the header every Chrome trace of ours starts with, and the joining of
 * traces written by prof_trace_write (one per process, e.g. one per MPI rank) into one file
 * with a named process per source (pid k + 1 for source k, so that ranks on different hosts
 * with the same pid stay apart), as Perfetto shows Horovod's timeline, aligned on the
 * sources' prof_clock_sync marks, with flow arrows linking each all-reduce across the
 * ranks. Only this profiler's own trace format is read: the writer escapes every string,
 * so a bare "ts": or the process-name record can only be what the writer put there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void prof_internal_trace_head(prof_json *j, void (*other)(prof_json *j, const void *ctx), const void *ctx)
{
    prof_json_object(j);
    prof_json_kstr(j, "displayTimeUnit", "ms");
    prof_json_key(j, "otherData");
    prof_json_object(j);
    prof_json_kstr(j, "generator", "nnbench profiler");
    if (other) other(j, ctx);
    prof_json_close(j);
    prof_json_key(j, "traceEvents");
    prof_json_array(j);
}

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

/* One all-reduce scope of a source: where it is on the merged time line. */
typedef struct {
    double ts, end;      /* us, shifted */
    long step, tid;
} collective;

typedef struct {
    char *text;          /* the whole file */
    char *events;        /* its events: the text between "traceEvents":[ and the closing ] */
    double sync_us;      /* its prof_clock_sync mark; < 0: none */
    collective *ar;      /* its "allreduce" scopes in time order */
    size_t n_ar;
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

/* The "allreduce" scopes of s's events (prof_trace_write writes a scope as
 * {"name":N,"cat":C,"ph":"X","ts":T,"dur":D,"pid":P,"tid":I,"args":{"step":S,...}}). */
static int find_collectives(source *s, double shift_us)
{
    static const char head[] = "{\"name\":\"allreduce\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":";
    size_t cap = 0;
    for (const char *q = strstr(s->events, head); q; q = strstr(q + 1, head)) {
        collective c;
        const char *dur = strstr(q, "\"dur\":"), *tid = strstr(q, "\"tid\":"), *step = strstr(q, "\"step\":");
        if (!dur || !tid || !step) break;
        c.ts = strtod(q + strlen(head), NULL) + shift_us;
        c.end = c.ts + strtod(dur + 6, NULL);
        c.tid = strtol(tid + 6, NULL, 10);
        c.step = strtol(step + 7, NULL, 10);
        if (s->n_ar == cap) {
            cap = cap ? 2 * cap : 64;
            collective *na = realloc(s->ar, cap * sizeof *na);
            if (!na) return -1;
            s->ar = na;
        }
        s->ar[s->n_ar++] = c;
    }
    return 0;
}

/* Flow arrows ("ph" s, t, f; Perfetto binds each to the slice open at its time on its
 * thread, "bp":"e" makes the last one bind to its enclosing slice too) linking the k-th
 * all-reduce of every source: one event in the middle of each rank's own slice, chained in
 * the time order of those middles (a flow must start before it ends, and the ranks enter
 * and leave a collective at different times: the earliest is the one that waited most).
 * Returns the flows (out NULL: counts them only); *skipped counts all-reduces whose steps
 * differ between the sources (a dropped event shifts the pairing: they are left out). */
static size_t write_flows(FILE *out, const source *s, size_t n, size_t *skipped)
{
    size_t m = n ? s[0].n_ar : 0, flows = 0, order[PROF_RANKS_MAX];
    for (size_t i = 1; i < n; i++) if (s[i].n_ar < m) m = s[i].n_ar;
    *skipped = 0;
    if (n < 2 || n > PROF_RANKS_MAX) return 0;
    for (size_t k = 0; k < m; k++) {
        int same = 1;
        for (size_t i = 0; i < n; i++) {
            same &= s[i].ar[k].step == s[0].ar[k].step;
            /* insertion by middle time: n is a handful of ranks */
            double mid = 0.5 * (s[i].ar[k].ts + s[i].ar[k].end);
            size_t j = i;
            for (; j > 0 && 0.5 * (s[order[j - 1]].ar[k].ts + s[order[j - 1]].ar[k].end) > mid; j--) order[j] = order[j - 1];
            order[j] = i;
        }
        if (!same) { (*skipped)++; continue; }
        for (size_t r = 0; r < n && out; r++) {
            const collective *c = &s[order[r]].ar[k];
            fprintf(out, ",\n{\"name\":\"allreduce\",\"cat\":\"allreduce\",\"ph\":\"%s\",\"id\":%zu,\"ts\":%.15g,"
                    "\"pid\":%zu,\"tid\":%ld%s,\"args\":{\"step\":%ld}}", r == 0 ? "s" : r + 1 == n ? "f" : "t", k + 1,
                    0.5 * (c->ts + c->end), order[r] + 1, c->tid, r + 1 == n ? ",\"bp\":\"e\"" : "", c->step);
        }
        flows++;
    }
    return flows;
}

/* Copies src's events to out with every "ts" moved by shift_us, every "pid" made pid, and
 * the process name "nnbench" replaced by label (escaped by the JSON writer). */
static void copy_events(FILE *out, const char *ev, double shift_us, long pid, const char *label)
{
    static const char ts[] = "\"ts\":", pd[] = "\"pid\":", pname[] = "\"args\":{\"name\":\"nnbench\"}";
    const char *q = ev;
    for (;;) {
        const char *t = strstr(q, ts), *pn = strstr(q, pname), *pi = strstr(q, pd);
        const char *next = t;
        if (pi && (!next || pi < next)) next = pi;
        if (pn && (!next || pn < next)) next = pn;
        if (!next) break;
        fwrite(q, 1, (size_t)(next - q), out);
        if (next == t) {
            char *end;
            double v = strtod(t + strlen(ts), &end);
            fprintf(out, "%s%.15g", ts, v + shift_us);
            q = end;
        } else if (next == pi) {
            char *end;
            strtol(pi + strlen(pd), &end, 10);
            fprintf(out, "%s%ld", pd, pid);
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

typedef struct {
    size_t n;
    int aligned;
    size_t flows, skipped;
} merge_info;

static void merge_other(prof_json *j, const void *ctx)
{
    const merge_info *m = ctx;
    prof_json_kint(j, "merged", (long long)m->n);
    prof_json_kstr(j, "note", m->aligned ? "one process per source (pid = source index + 1), aligned on a barrier all "
                                           "of them passed before the first step (prof_clock_sync)"
                                         : "one process per source (pid = source index + 1); each one's time 0 is its "
                                           "own profiler's start (a source had no clock-sync mark): no flow arrows");
    prof_json_kint(j, "allreduce_flows", (long long)m->flows);
    prof_json_kint(j, "allreduce_flows_skipped", (long long)m->skipped);
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
    for (size_t i = 0; i < n && !rc; i++)
        if (find_collectives(&s[i], aligned ? latest - s[i].sync_us : 0)) {
            snprintf(merge_err, sizeof merge_err, "profiler: out of memory joining %zu traces", n);
            rc = -1;
        }
    if (!rc) {
        /* Each source is moved so that its mark lands on the latest one: no time < 0. */
        merge_info info = { n, aligned, 0, 0 };
        if (aligned) info.flows = write_flows(NULL, s, n, &info.skipped);   /* unaligned clocks: no arrows */
        prof_json j;
        prof_json_begin(&j, out, 0);
        prof_internal_trace_head(&j, merge_other, &info);   /* left open: the sources' events go in as they are */
        fputc('\n', out);
        for (size_t i = 0; i < n; i++) {
            if (i) fputs(",\n", out);
            copy_events(out, s[i].events, aligned ? latest - s[i].sync_us : 0, (long)i + 1, labels[i]);
        }
        if (aligned) write_flows(out, s, n, &info.skipped);
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
    for (size_t i = 0; s && i < n; i++) { free(s[i].text); free(s[i].ar); }
    free(s);
    if (rc) prof_internal_errorf("%s", merge_err);
    return rc;
}
