/* profiler.c — scopes (register once, begin/end with no allocation), nesting into self and
 * total time, memory charged to the open scope, aggregation into rows, summary. */
#include <stdlib.h>
#include <string.h>

#include "profiler.h"

#define MAX_SCOPES 1024
#define MAX_DEPTH 64

typedef struct {
    char name[48], layer[32];
    prof_kind kind;
    uint64_t calls, total_ns, self_ns, min_ns, max_ns, flops, bytes;
    int64_t self_mem, peak_mem;
} scope_stat;

typedef struct {
    int id;
    uint64_t t0, child_ns;
    size_t peak_live;
} frame;

struct prof {
    scope_stat scopes[MAX_SCOPES + 1]; /* the extra one is scratch for overhead calibration */
    int n_scopes;
    frame stack[MAX_DEPTH];
    int depth, lost_depth;   /* lost_depth: begins past MAX_DEPTH, ignored until their ends */
    uint64_t events, unbalanced;
    double ns_per_event;
    long step;
    prof_t *prev_active;
    char counters_note[256];
};

static _Thread_local char err_buf[256];
/* The profiler whose innermost scope gets this thread's allocations charged to it. */
static _Thread_local prof_t *tls_active;

const char *prof_error(void) { return err_buf; }

static void calibrate_overhead(prof_t *p)
{
    /* Best of a few bursts of empty scopes: the per-scope cost of begin+end. */
    const int burst = 200, rounds = 5;
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = prof_now_ns();
        for (int i = 0; i < burst; i++) {
            prof_begin(p, MAX_SCOPES);
            prof_end(p, MAX_SCOPES, 0, 0);
        }
        double per = (double)(prof_now_ns() - t0) / burst;
        if (r == 0 || per < best) best = per;
    }
    p->ns_per_event = best;
    memset(&p->scopes[MAX_SCOPES], 0, sizeof p->scopes[MAX_SCOPES]);
    p->events = 0;
}

prof_t *prof_create(const prof_options *opt)
{
    (void)opt;
    prof_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err_buf, sizeof err_buf, "profiler: out of memory (%zu bytes)", sizeof *p);
        return NULL;
    }
    snprintf(p->counters_note, sizeof p->counters_note, "hardware counters not enabled");
    p->prev_active = tls_active;
    tls_active = p;
    calibrate_overhead(p);
    return p;
}

void prof_destroy(prof_t *p)
{
    if (!p) return;
    if (tls_active == p) tls_active = p->prev_active;
    free(p);
}

int prof_register(prof_t *p, const char *name, const char *layer, prof_kind kind)
{
    if (!p || !name) return -1;
    if (p->n_scopes >= MAX_SCOPES) {
        snprintf(err_buf, sizeof err_buf, "profiler: more than %d scopes; '%s' not registered",
                 MAX_SCOPES, name);
        return -1;
    }
    scope_stat *s = &p->scopes[p->n_scopes];
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->layer, sizeof s->layer, "%s", layer ? layer : "");
    s->kind = kind;
    return p->n_scopes++;
}

void prof_begin(prof_t *p, int id)
{
    if (p->depth >= MAX_DEPTH || id < 0) { p->lost_depth++; return; }
    tls_active = p;
    frame *f = &p->stack[p->depth++];
    f->id = id;
    f->child_ns = 0;
    f->peak_live = prof_mem_live();
    f->t0 = prof_now_ns(); /* last, so the profiler's own work stays outside the scope */
}

void prof_end(prof_t *p, int id, uint64_t flops, uint64_t bytes)
{
    uint64_t t1 = prof_now_ns(); /* first, for the same reason */
    if (p->lost_depth) { p->lost_depth--; return; }
    if (p->depth == 0 || p->stack[p->depth - 1].id != id) { p->unbalanced++; return; }
    frame *f = &p->stack[--p->depth];
    uint64_t dur = t1 - f->t0;
    scope_stat *s = &p->scopes[id];
    uint64_t self = dur > f->child_ns ? dur - f->child_ns : 0;
    if (s->calls == 0 || dur < s->min_ns) s->min_ns = dur;
    if (dur > s->max_ns) s->max_ns = dur;
    s->calls++;
    s->total_ns += dur;
    s->self_ns += self;
    s->flops += flops;
    s->bytes += bytes;
    if ((int64_t)f->peak_live > s->peak_mem) s->peak_mem = (int64_t)f->peak_live;
    if (p->depth) {
        frame *parent = &p->stack[p->depth - 1];
        parent->child_ns += dur;
        if (f->peak_live > parent->peak_live) parent->peak_live = f->peak_live;
    }
    p->events++;
}

void prof_internal_charge(size_t n, size_t live)
{
    prof_t *p = tls_active;
    if (!p || p->depth == 0) return;
    frame *f = &p->stack[p->depth - 1];
    p->scopes[f->id].self_mem += (int64_t)n;
    if (live > f->peak_live) f->peak_live = live;
}

void prof_step(prof_t *p, long step) { p->step = step; }

static void row_from(prof_row *r, const scope_stat *s)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", s->name);
    snprintf(r->layer, sizeof r->layer, "%s", s->layer);
    r->kind = s->kind;
    r->calls = s->calls;
    r->total_ns = s->total_ns;
    r->self_ns = s->self_ns;
    r->min_ns = s->min_ns;
    r->max_ns = s->max_ns;
    r->flops = s->flops;
    r->bytes = s->bytes;
    r->cycles = r->instructions = r->l1d_miss = r->l2_miss = r->l3_miss = r->fp_ops = -1;
    r->self_mem = s->self_mem;
    r->peak_mem = s->peak_mem;
}

static void row_merge(prof_row *into, const prof_row *r)
{
    if (into->calls == 0 || (r->calls && r->min_ns < into->min_ns)) into->min_ns = r->min_ns;
    if (r->max_ns > into->max_ns) into->max_ns = r->max_ns;
    into->calls += r->calls;
    into->total_ns += r->total_ns;
    into->self_ns += r->self_ns;
    into->flops += r->flops;
    into->bytes += r->bytes;
    int64_t *a = &into->cycles, *b = (int64_t *)&r->cycles;
    for (int i = 0; i < 6; i++)
        a[i] = (a[i] < 0 || b[i] < 0) ? (a[i] < 0 ? b[i] : a[i]) : a[i] + b[i];
    into->self_mem += r->self_mem;
    if (r->peak_mem > into->peak_mem) into->peak_mem = r->peak_mem;
}

int prof_rows(prof_t *p, prof_group by, prof_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (!p) return -1;
    prof_row *out = calloc(p->n_scopes ? (size_t)p->n_scopes : 1, sizeof *out);
    if (!out) {
        snprintf(err_buf, sizeof err_buf, "profiler: out of memory for %d rows", p->n_scopes);
        return -1;
    }
    size_t m = 0;
    for (int i = 0; i < p->n_scopes; i++) {
        const scope_stat *s = &p->scopes[i];
        prof_row r;
        row_from(&r, s);
        const char *key = NULL;
        switch (by) {
        case PROF_BY_SCOPE: break;
        case PROF_BY_OP:
            if (s->kind != PROF_OP) continue;
            key = s->name;
            r.layer[0] = 0;
            break;
        case PROF_BY_LAYER:
            if (s->kind != PROF_OP) continue;
            snprintf(r.name, sizeof r.name, "%s", s->layer[0] ? s->layer : "(no layer)");
            r.layer[0] = 0;
            key = r.name;
            break;
        case PROF_BY_PHASE:
            if (s->kind == PROF_OP) continue;
            key = s->name;
            r.layer[0] = 0;
            break;
        }
        size_t j = m;
        if (key)
            for (j = 0; j < m; j++)
                if (!strcmp(out[j].name, key) && out[j].kind == r.kind) break;
        if (j < m) row_merge(&out[j], &r);
        else out[m++] = r;
    }
    prof_rows_sort(out, m, PROF_SORT_SELF);
    *rows = out;
    *n = m;
    return 0;
}

void prof_summary_get(prof_t *p, prof_summary *s)
{
    memset(s, 0, sizeof *s);
    s->peak_bytes = prof_mem_peak();
    s->live_bytes = prof_mem_live();
    s->total_alloc_bytes = prof_mem_total();
    s->peak_rss = prof_peak_rss();
    if (!p) return;
    for (int i = 0; i < p->n_scopes; i++) s->total_self_ns += p->scopes[i].self_ns;
    s->events = p->events;
    s->overhead_ns = (uint64_t)(p->ns_per_event * (double)p->events);
    snprintf(s->counters_note, sizeof s->counters_note, "%s", p->counters_note);
}
