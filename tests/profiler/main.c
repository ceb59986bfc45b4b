/* main.c — CMocka tests of the profiler: scope nesting, aggregation, memory accounting,
 * SDEs read through PAPI, traces, counter fallback, the table, calibration. */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <papi.h>

#include "../../profiler/profiler.h"

static void busy_ns(uint64_t ns)
{
    uint64_t t0 = prof_now_ns();
    while (prof_now_ns() - t0 < ns) {
    }
}

static prof_t *quiet_prof(void)
{
    prof_t *p = prof_create(&(prof_options){ .quiet = 1 });
    assert_non_null(p);
    return p;
}

static const prof_row *find_row(const prof_row *rows, size_t n, const char *name, const char *layer)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name) && (!layer || !strcmp(rows[i].layer, layer))) return &rows[i];
    return NULL;
}

/* ---- scopes ------------------------------------------------------------------------ */

static void test_nested_self_total(void **state)
{
    (void)state;
    prof_t *p = quiet_prof();
    int outer = prof_register(p, "outer", NULL, PROF_PHASE);
    int inner = prof_register(p, "inner", "l1", PROF_OP);
    int leaf = prof_register(p, "leaf", "l1", PROF_OP);
    uint64_t wall0 = prof_now_ns();
    for (int i = 0; i < 3; i++) {
        prof_begin(p, outer);
        busy_ns(1000000);
        prof_begin(p, inner);
        busy_ns(2000000);
        prof_begin(p, leaf);
        busy_ns(500000);
        prof_end(p, leaf, 0, 0);
        prof_end(p, inner, 100, 10);
        busy_ns(1000000);
        prof_end(p, outer, 0, 0);
    }
    uint64_t outside = prof_now_ns() - wall0 - 3 * 4500000ull; /* the loop less its busy bodies */
    prof_row *rows;
    size_t n;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
    assert_int_equal(n, 3);
    const prof_row *o = find_row(rows, n, "outer", NULL), *in = find_row(rows, n, "inner", NULL),
                   *lf = find_row(rows, n, "leaf", NULL);
    assert_non_null(o);
    assert_non_null(in);
    assert_non_null(lf);
    /* self + children = total, per scope (exact up to the ns of clamping, allow 1 us) */
    int64_t d_outer = (int64_t)o->total_ns - (int64_t)(o->self_ns + in->total_ns);
    int64_t d_inner = (int64_t)in->total_ns - (int64_t)(in->self_ns + lf->total_ns);
    printf("outer total %llu self %llu; inner total %llu self %llu; leaf %llu; diff %lld %lld ns\n",
           (unsigned long long)o->total_ns, (unsigned long long)o->self_ns,
           (unsigned long long)in->total_ns, (unsigned long long)in->self_ns,
           (unsigned long long)lf->total_ns, (long long)d_outer, (long long)d_inner);
    assert_true(llabs(d_outer) <= 1000);
    assert_true(llabs(d_inner) <= 1000);
    assert_true(lf->self_ns == lf->total_ns);
    assert_true(o->self_ns >= 3 * 2000000ull);
    assert_true(in->self_ns >= 3 * 2000000ull);
    assert_true(lf->total_ns >= 3 * 500000ull);
    assert_int_equal(o->calls, 3);
    assert_int_equal(in->flops, 300);
    assert_int_equal(in->bytes, 30);
    prof_summary s;
    prof_summary_get(p, &s);
    assert_int_equal(s.total_self_ns, o->self_ns + in->self_ns + lf->self_ns);
    assert_int_equal(s.events, 9);
    assert_true(s.ns_per_event > 0 && s.ns_per_event < 100000);
    /* the calibrated pair cost per scope, plus the time the sampled reads of these long
     * scopes (each first call, then one per gap) took: timed, so within the time the loop
     * spent outside its bodies */
    assert_true(s.cpu_reads >= 3 && s.cpu_reads <= 9);
    assert_int_equal(s.overhead_ns, (uint64_t)(s.ns_per_event * 9) + s.sample_ns);
    assert_true(s.sample_ns > 0 && s.sample_ns <= outside);
    free(rows);
    prof_destroy(p);
}

static void test_min_max_calls(void **state)
{
    (void)state;
    prof_t *p = quiet_prof();
    int id = prof_register(p, "work", NULL, PROF_OP);
    const uint64_t ms = 1000000;
    uint64_t waits[] = { 2 * ms, 1 * ms, 3 * ms };
    for (int i = 0; i < 3; i++) {
        prof_begin(p, id);
        busy_ns(waits[i]);
        prof_end(p, id, 0, 0);
    }
    prof_row *rows;
    size_t n;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].calls, 3);
    assert_true(rows[0].min_ns >= 1 * ms && rows[0].min_ns < rows[0].max_ns);
    assert_true(rows[0].max_ns >= 3 * ms);
    assert_true(rows[0].total_ns >= 6 * ms);
    assert_true(rows[0].min_ns <= rows[0].total_ns / 3 && rows[0].total_ns / 3 <= rows[0].max_ns);
    free(rows);
    prof_destroy(p);
}

static void test_unbalanced_and_null(void **state)
{
    (void)state;
    prof_t *p = quiet_prof();
    int a = prof_register(p, "a", NULL, PROF_OP), b = prof_register(p, "b", NULL, PROF_OP);
    prof_begin(p, a);
    prof_end(p, b, 0, 0); /* wrong scope: ignored, counted */
    prof_end(p, a, 0, 0);
    prof_summary s;
    prof_summary_get(p, &s);
    assert_int_equal(s.unbalanced, 1);
    assert_int_equal(s.events, 1);
    prof_destroy(p);

    prof_t *off = NULL; /* profiling off: the macros do nothing */
    PROF_BEGIN(off, 0);
    PROF_END(off, 0, 1, 1);
    prof_row *rows = (prof_row *)1;
    size_t n = 7;
    assert_int_equal(prof_rows(off, PROF_BY_OP, &rows, &n), -1);
    assert_null(rows);
    assert_int_equal(n, 0);
    prof_summary_get(NULL, &s);
    assert_int_equal(s.events, 0);
    assert_int_equal(prof_register(NULL, "x", NULL, PROF_OP), -1);
}

static void test_aggregation(void **state)
{
    (void)state;
    prof_t *p = quiet_prof();
    int fwd = prof_register(p, "forward", NULL, PROF_PHASE);
    int bwd = prof_register(p, "backward", NULL, PROF_PHASE);
    int d1 = prof_register(p, "dense.fwd", "dense1", PROF_OP);
    int d2 = prof_register(p, "dense.fwd", "dense2", PROF_OP);
    int r1 = prof_register(p, "relu.fwd", "dense1", PROF_OP);
    int b1 = prof_register(p, "dense.bwd", "dense1", PROF_OP);
    for (int step = 1; step <= 4; step++) {
        prof_step(p, step);
        prof_begin(p, fwd);
        prof_begin(p, d1); busy_ns(20000); prof_end(p, d1, 1000, 100);
        prof_begin(p, r1); prof_end(p, r1, 10, 8);
        prof_begin(p, d2); busy_ns(10000); prof_end(p, d2, 500, 50);
        prof_end(p, fwd, 0, 0);
        prof_begin(p, bwd);
        prof_begin(p, b1); prof_end(p, b1, 2000, 200);
        prof_end(p, bwd, 0, 0);
    }
    prof_row *rows;
    size_t n;
    assert_int_equal(prof_rows(p, PROF_BY_OP, &rows, &n), 0);
    assert_int_equal(n, 3); /* dense.fwd, relu.fwd, dense.bwd */
    const prof_row *df = find_row(rows, n, "dense.fwd", NULL);
    assert_non_null(df);
    assert_int_equal(df->calls, 8);
    assert_int_equal(df->flops, 4 * 1500);
    assert_int_equal(df->bytes, 4 * 150);
    assert_string_equal(df->layer, "");
    assert_string_equal(rows[0].name, "dense.fwd"); /* sorted by self time */
    free(rows);

    assert_int_equal(prof_rows(p, PROF_BY_LAYER, &rows, &n), 0);
    assert_int_equal(n, 2);
    const prof_row *l1 = find_row(rows, n, "dense1", NULL), *l2 = find_row(rows, n, "dense2", NULL);
    assert_non_null(l1);
    assert_non_null(l2);
    assert_int_equal(l1->calls, 12);
    assert_int_equal(l1->flops, 4 * 3010);
    assert_int_equal(l2->flops, 4 * 500);
    free(rows);

    assert_int_equal(prof_rows(p, PROF_BY_PHASE, &rows, &n), 0);
    assert_int_equal(n, 2);
    const prof_row *pf = find_row(rows, n, "forward", NULL);
    assert_non_null(pf);
    assert_int_equal(pf->calls, 4);
    assert_true(pf->total_ns >= 4 * 30000ull);
    free(rows);

    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
    assert_int_equal(n, 6);
    assert_non_null(find_row(rows, n, "dense.fwd", "dense2"));
    free(rows);
    prof_destroy(p);
}

/* ---- memory ------------------------------------------------------------------------ */

static void test_memory_peak(void **state)
{
    (void)state;
    size_t base = prof_mem_live();
    prof_mem_reset_peak();
    assert_int_equal(prof_mem_peak(), base);
    size_t total0 = prof_mem_total();
    char *a = prof_malloc(1000), *b = prof_malloc(2000);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal((uintptr_t)a % 64, 0);
    assert_int_equal((uintptr_t)b % 64, 0);
    memset(a, 1, 1000);
    memset(b, 2, 2000);
    assert_int_equal(prof_mem_live(), base + 3000);
    prof_free(a);
    unsigned char *c = prof_calloc(100, 5);
    assert_non_null(c);
    for (int i = 0; i < 500; i++) assert_int_equal(c[i], 0);
    assert_int_equal(prof_mem_live(), base + 2500);
    assert_int_equal(prof_mem_peak(), base + 3000);
    assert_int_equal(prof_mem_total(), total0 + 3500);
    prof_free(b);
    prof_free(c);
    prof_free(NULL);
    assert_int_equal(prof_mem_live(), base);
    assert_int_equal(prof_mem_peak(), base + 3000);
    prof_mem_reset_peak();
    assert_int_equal(prof_mem_peak(), base);
    assert_null(prof_calloc(SIZE_MAX / 2, 4)); /* overflow, not a tiny block */
    assert_null(prof_malloc(SIZE_MAX - 8));
    assert_true(prof_peak_rss() > 0);
}

static void test_self_mem_per_scope(void **state)
{
    (void)state;
    prof_t *p = quiet_prof();
    int outer = prof_register(p, "outer", NULL, PROF_PHASE);
    int inner = prof_register(p, "inner", NULL, PROF_OP);
    int after = prof_register(p, "after", NULL, PROF_OP);
    size_t base = prof_mem_live();
    prof_begin(p, outer);
    void *x = prof_malloc(100);
    prof_begin(p, inner);
    void *y = prof_malloc(1000);
    void *z = prof_malloc(24);
    prof_free(z);
    prof_end(p, inner, 0, 0);
    prof_free(y);
    prof_begin(p, after);
    prof_end(p, after, 0, 0);
    prof_end(p, outer, 0, 0);
    prof_free(x);
    void *outside = prof_malloc(4096); /* no scope open: charged to nobody */
    prof_free(outside);
    prof_row *rows;
    size_t n;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
    const prof_row *o = find_row(rows, n, "outer", NULL), *in = find_row(rows, n, "inner", NULL),
                   *af = find_row(rows, n, "after", NULL);
    assert_int_equal(o->self_mem, 100);
    assert_int_equal(in->self_mem, 1024);
    assert_int_equal(af->self_mem, 0);
    assert_int_equal(in->peak_mem, (int64_t)(base + 1124));
    assert_int_equal(o->peak_mem, (int64_t)(base + 1124));
    assert_int_equal(af->peak_mem, (int64_t)(base + 100));
    prof_summary s;
    prof_summary_get(p, &s);
    assert_int_equal(s.total_alloc_bytes, 100 + 1000 + 24 + 4096); /* since prof_create */
    assert_int_equal(s.peak_bytes, base + 4096);
    assert_int_equal(s.live_bytes, base);
    free(rows);
    prof_destroy(p);
}

/* ---- SDE through PAPI -------------------------------------------------------------- */

static void test_sde_through_papi(void **state)
{
    (void)state;
    prof_t *p = quiet_prof(); /* initialises PAPI and registers the SDEs */
    assert_int_equal(PAPI_is_initialized(), PAPI_LOW_LEVEL_INITED);
    int es = PAPI_NULL;
    assert_int_equal(PAPI_create_eventset(&es), PAPI_OK);
    const char *names[] = { "sde:::nnbench::live_bytes", "sde:::nnbench::flops",
                            "sde:::nnbench::bytes", "sde:::nnbench::alloc_bytes",
                            "sde:::nnbench::peak_bytes" };
    for (int i = 0; i < 5; i++) {
        int rc = PAPI_add_named_event(es, names[i]);
        if (rc != PAPI_OK) fprintf(stderr, "%s: %s\n", names[i], PAPI_strerror(rc));
        assert_int_equal(rc, PAPI_OK);
    }
    long long v0[5], v1[5], v2[5];
    assert_int_equal(PAPI_start(es), PAPI_OK);
    assert_int_equal(PAPI_read(es, v0), PAPI_OK);
    int id = prof_register(p, "gemm", NULL, PROF_OP);
    void *buf = prof_malloc(8192);
    prof_begin(p, id);
    prof_end(p, id, 777, 333);
    assert_int_equal(PAPI_read(es, v1), PAPI_OK);
    assert_int_equal(v1[0] - v0[0], 8192);
    assert_int_equal(v1[1] - v0[1], 777);
    assert_int_equal(v1[2] - v0[2], 333);
    assert_int_equal(v1[3] - v0[3], 8192);
    assert_true(v1[4] >= v1[0]);
    prof_free(buf);
    assert_int_equal(PAPI_read(es, v2), PAPI_OK);
    assert_int_equal(v2[0], v0[0]);        /* live back down */
    assert_int_equal(v2[3] - v1[3], 0);    /* freeing allocates nothing */
    long long stop[5];
    assert_int_equal(PAPI_stop(es, stop), PAPI_OK);
    PAPI_cleanup_eventset(es);
    PAPI_destroy_eventset(&es);
    prof_destroy(p);
}

/* ---- hardware counters and their fallback ------------------------------------------ */

/* prof_destroy says whether the trace it had to write was written. */
static void test_destroy_trace_status(void **state)
{
    (void)state;
    prof_t *p = prof_create(&(prof_options){ .counters = "none", .quiet = 1,
                                             .trace_path = "/nonexistent-dir-nnbench/t.json", .trace_first = 1,
                                             .trace_last = 1 });
    assert_non_null(p);
    assert_string_equal(prof_warnings(p), "");
    assert_int_equal(prof_destroy(p), -1);
    assert_non_null(strstr(prof_error(), "/nonexistent-dir-nnbench/t.json"));
    assert_int_equal(prof_destroy(NULL), 0);
}

static void test_unavailable_counter_warns(void **state)
{
    (void)state;
    prof_t *p = prof_create(&(prof_options){ .counters = "PAPI_TOT_CYC,NNBENCH_NO_SUCH_EVENT", .quiet = 1 });
    assert_non_null(p); /* a warning, not a failure */
    prof_summary s;
    prof_summary_get(p, &s);
    printf("note: %s\n", s.counters_note);
    assert_non_null(strstr(s.counters_note, "NNBENCH_NO_SUCH_EVENT"));
    assert_false(strstr(s.counters_used, "NNBENCH_NO_SUCH_EVENT"));
    /* Never printed: the warning is handed to the caller. */
    assert_non_null(strstr(prof_warnings(p), "profiler: warning: "));
    assert_non_null(strstr(prof_warnings(p), "NNBENCH_NO_SUCH_EVENT"));
    int id = prof_register(p, "x", NULL, PROF_OP);
    prof_begin(p, id);
    prof_end(p, id, 5, 6);
    prof_row *rows;
    size_t n;
    assert_int_equal(prof_rows(p, PROF_BY_OP, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].calls, 1);
    assert_int_equal(rows[0].flops, 5);
    free(rows);
    prof_destroy(p);

    p = prof_create(&(prof_options){ .counters = "none", .quiet = 1 });
    assert_non_null(p);
    prof_summary_get(p, &s);
    assert_int_equal(s.hw_counters, 0);
    assert_non_null(strstr(s.counters_note, "off"));
    prof_destroy(p);
}

/* ---- traces ------------------------------------------------------------------------ */

static const char *trace_checker =
    "import json,sys\n"
    "d=json.load(open(sys.argv[1]))\n"
    "first,last=int(sys.argv[2]),int(sys.argv[3])\n"
    "ev=d['traceEvents']\n"
    "X=[e for e in ev if e['ph']=='X']\n"
    "C=[e for e in ev if e['ph']=='C']\n"
    "assert X, 'no X events'\n"
    "assert C, 'no C events'\n"
    "for e in X:\n"
    "  assert first<=e['args']['step']<=last, ('step outside window', e)\n"
    "  assert e['dur']>=0 and 'flops' in e['args'] and 'bytes' in e['args']\n"
    "for e in C: assert e['args']['live_bytes']>=0\n"
    "X.sort(key=lambda e:(e['ts'],-e['dur']))\n"
    "stack=[]; eps=0.002; depth=0\n"
    "for e in X:\n"
    "  while stack and e['ts']>=stack[-1]['ts']+stack[-1]['dur']-eps: stack.pop()\n"
    "  if stack: assert e['ts']+e['dur']<=stack[-1]['ts']+stack[-1]['dur']+eps, ('overlap', e, stack[-1])\n"
    "  stack.append(e); depth=max(depth,len(stack))\n"
    "assert depth>=3, 'no nesting: depth %d' % depth\n"
    "assert len(C)>=2 and len({e['args']['live_bytes'] for e in C})>=2, 'live bytes never change'\n"
    "print('trace ok: %d X, %d C, depth %d, steps %s' % (len(X), len(C), depth, sorted({e['args']['step'] for e in X})))\n";

static void run_trace(const char *dir, size_t cap, const char *name, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/%s", dir, name);
    prof_t *p = prof_create(&(prof_options){ .trace_path = path, .trace_first = 2, .trace_last = 3,
                                             .quiet = 1, .trace_capacity = cap });
    assert_non_null(p);
    int st = prof_register(p, "step", NULL, PROF_STEP);
    int fw = prof_register(p, "forward", NULL, PROF_PHASE);
    int op = prof_register(p, "dense.fwd", "dense\"1", PROF_OP); /* a name that needs escaping */
    for (long s = 1; s <= 5; s++) {
        prof_step(p, s);
        prof_begin(p, st);
        prof_begin(p, fw);
        for (int k = 0; k < 2; k++) {
            prof_begin(p, op);
            void *m = prof_malloc(256 * (size_t)(k + 1));
            busy_ns(20000);
            prof_free(m);
            prof_end(p, op, 1000, 64);
        }
        prof_end(p, fw, 0, 0);
        prof_end(p, st, 0, 0);
    }
    prof_destroy(p); /* writes the trace */
}

/* Writes text to DIR/check.py; its path in script. */
static void write_script(char *script, size_t cap, const char *dir, const char *text)
{
    snprintf(script, cap, "%s/check.py", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_trace_json(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-prof-XXXXXX", path[256], cmd[1024];
    assert_non_null(mkdtemp(dir));
    run_trace(dir, 0, "t.json", path, sizeof path);
    char script[300];
    write_script(script, sizeof script, dir, trace_checker);
    snprintf(cmd, sizeof cmd, "python3 %s %s 2 3", script, path);
    assert_int_equal(system(cmd), 0);
    /* a bad window is refused at create with a message */
    assert_null(prof_create(&(prof_options){ .trace_path = path, .trace_first = 4, .trace_last = 2 }));
    assert_non_null(strstr(prof_error(), "4:2"));
    /* a tiny buffer overflows: the file says so and still parses */
    run_trace(dir, 5, "small.json", path, sizeof path);
    snprintf(cmd, sizeof cmd, "python3 -c \"import json,sys; d=json.load(open('%s')); "
             "o=d['otherData']; assert o['dropped_events']>0 and 'dropped' in o['note']; "
             "assert len([e for e in d['traceEvents'] if e['ph']!='M'])==5\"", path);
    assert_int_equal(system(cmd), 0);
    /* no trace configured: prof_trace_write says how to get one */
    prof_t *p = quiet_prof();
    assert_int_equal(prof_trace_write(p, path), -1);
    assert_non_null(strstr(prof_error(), "trace_path"));
    prof_destroy(p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A trace of steps 1-3 whose clock-sync mark (when sync) comes delay_ns after create. */
static void sync_trace(const char *path, int sync, long delay_ns)
{
    prof_t *p = prof_create(&(prof_options){ .trace_path = path, .trace_first = 1, .trace_last = 3, .quiet = 1 });
    assert_non_null(p);
    int op = prof_register(p, "allreduce", NULL, PROF_OP);
    busy_ns(delay_ns);
    if (sync) prof_clock_sync(p);
    for (long s = 1; s <= 3; s++) {
        prof_step(p, s);
        prof_begin(p, op);
        busy_ns(10000);
        prof_end(p, op, 0, 8);
    }
    assert_int_equal(prof_destroy(p), 0);
}

/* Joined traces: every event moved so that the sources' sync marks coincide (none
 * before 0), labels escaped, valid JSON; without a mark in every source, nothing moves. */
static void test_trace_merge(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-merge-XXXXXX", a[300], b[300], m[300], cmd[2048];
    assert_non_null(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    snprintf(m, sizeof m, "%s/m.json", dir);
    sync_trace(a, 1, 3000000);   /* its mark 3 ms after its start */
    sync_trace(b, 1, 0);
    const char *srcs[] = { a, b }, *labels[] = { "rank \"0\"\n", "rank 1" };
    assert_int_equal(prof_trace_merge(m, srcs, labels, 2), 0);
    static const char check[] =
        "import json,sys\n"
        "src=[json.load(open(p)) for p in sys.argv[1:3]]; out=json.load(open(sys.argv[3])); al=int(sys.argv[4])\n"
        "sync=[d['otherData'].get('sync_us') for d in src]\n"
        "latest=max(sync) if al else 0\n"
        "want=[]\n"
        "for d,s in zip(src,sync): want+=[e['ts']+((latest-s) if al else 0) for e in d['traceEvents'] if 'ts' in e]\n"
        "got=[e['ts'] for e in out['traceEvents'] if 'ts' in e and e['ph'] not in 'stf']\n"
        "fl=[e for e in out['traceEvents'] if e['ph'] in 'stf']\n"
        "assert len(fl)==2*out['otherData']['allreduce_flows'] and (al or not fl), fl\n"
        "assert sorted({e['pid'] for e in out['traceEvents']})==[1,2]\n"
        "assert len(got)==len(want) and all(abs(x-y)<1e-3 for x,y in zip(got,want)), (got,want)\n"
        "assert min(got)>=0\n"
        "names=[e['args']['name'] for e in out['traceEvents'] if e['name']=='process_name']\n"
        "assert names==['rank \"0\"\\n','rank 1'], names\n"
        "assert ('aligned' in out['otherData']['note'])==bool(al), out['otherData']\n"
        "if al: assert abs(sync[0]-sync[1])>=2500, sync\n";
    char script[320];
    write_script(script, sizeof script, dir, check);
    FILE *f;
    snprintf(cmd, sizeof cmd, "python3 %s %s %s %s 1", script, a, b, m);
    assert_int_equal(system(cmd), 0);
    /* one source without a mark: rows keep their own time 0, and the note says so */
    sync_trace(b, 0, 0);
    assert_int_equal(prof_trace_merge(m, srcs, labels, 2), 0);
    snprintf(cmd, sizeof cmd, "python3 %s %s %s %s 0", script, a, b, m);
    assert_int_equal(system(cmd), 0);
    /* not a trace of ours: refused, dst untouched */
    f = fopen(b, "w");
    assert_non_null(f);
    fputs("{\"traceEvents\":[]}\n", f);
    fclose(f);
    assert_int_equal(prof_trace_merge(m, srcs, labels, 2), -1);
    assert_non_null(strstr(prof_error(), "not a trace written by nnbench"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A trace file as prof_trace_write writes it: sync mark at sync_us, one "allreduce" scope
 * per (ts, dur) pair, of steps[i] (NULL: steps 1, 2, ...). */
static void fake_trace(const char *path, int pid, double sync_us, const double *ar, int n, const int *steps)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"nnbench profiler\",\"sync_us\":%g},"
               "\"traceEvents\":[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"nnbench\"}}",
            sync_us, pid, pid);
    for (int i = 0; i < n; i++)
        fprintf(f, ",{\"name\":\"allreduce\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":%g,\"dur\":%g,\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"step\":%d,\"flops\":0,\"bytes\":8}}", ar[2 * i], ar[2 * i + 1], pid, pid + 1,
                steps ? steps[i] : i + 1);
    fputs("]}\n", f);
    fclose(f);
}

/* Flow arrows of the merge: one s -> t -> f chain per all-reduce, in the time order of the
 * ranks' slices (whichever rank came first starts it), each event on its own rank's
 * process (pid source + 1) and thread, inside that rank's all-reduce slice of the same step
 * after alignment; none when a step differs. */
static void test_trace_merge_flows(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-flows-XXXXXX", p[3][300], m[300], cmd[2048], script[320];
    assert_non_null(mkdtemp(dir));
    for (int i = 0; i < 3; i++) snprintf(p[i], sizeof p[i], "%s/%d.json", dir, i);
    snprintf(m, sizeof m, "%s/m.json", dir);
    /* rank 1 passed the barrier 100 us later on its clock: aligned, ranks 0 and 2 move +100 */
    const double a0[] = { 1000, 50, 2000, 50, 3000, 10 }, a1[] = { 1050, 40, 2150, 20, 3096, 20 },
                 a2[] = { 1010, 60, 2010, 50, 3000, 20 };
    fake_trace(p[0], 4000, 0, a0, 3, NULL);
    fake_trace(p[1], 4000, 100, a1, 3, NULL);   /* the same pid on another host */
    fake_trace(p[2], 77, 0, a2, 3, NULL);
    const char *srcs[] = { p[0], p[1], p[2] }, *labels[] = { "r0", "r1", "r2" };
    static const char check[] =
        "import json,sys\n"
        "d=json.load(open(sys.argv[1])); n=int(sys.argv[2]); want=[int(x) for x in sys.argv[3].split(',')]\n"
        "ev=d['traceEvents']; X=[e for e in ev if e['ph']=='X']; F=[e for e in ev if e['ph'] in 'stf']\n"
        "assert sorted({e['pid'] for e in ev})==list(range(1,n+1)), 'one process per source'\n"
        "names={e['pid']:e['args']['name'] for e in ev if e['name']=='process_name'}\n"
        "assert names=={k+1:'r%d'%k for k in range(n)}, names\n"
        "o=d['otherData']; assert o['allreduce_flows']==len(want) and o['allreduce_flows_skipped']==int(sys.argv[5]), o\n"
        "assert sorted({e['id'] for e in F})==want, F\n"
        "first=sys.argv[4].split(',')\n"
        "for i in want:\n"
        "  ch=sorted([e for e in F if e['id']==i], key=lambda e: e['ts'])\n"
        "  assert [e['ph'] for e in ch]==['s']+['t']*(n-2)+['f'], ch\n"
        "  assert sorted(e['pid'] for e in ch)==list(range(1,n+1)) and ch[0]['pid']==int(first[i-1]), ch\n"
        "  assert ch[-1].get('bp')=='e' and all(e['cat']=='allreduce' and e['name']=='allreduce' for e in ch)\n"
        "  assert all(a['ts']<b['ts'] for a,b in zip(ch,ch[1:])), 'flow times not increasing'\n"
        "  for e in ch:\n"
        "    sl=[x for x in X if x['pid']==e['pid'] and x['tid']==e['tid'] and x['ts']<e['ts']<x['ts']+x['dur']]\n"
        "    assert len(sl)==1 and sl[0]['name']=='allreduce' and sl[0]['args']['step']==e['args']['step'], (e, sl)\n";
    write_script(script, sizeof script, dir, check);
    /* 2 ranks, aligned: all-reduce 1 is rank 1 (1050..1090) then rank 0 (1100..1150); 2 and
     * 3 start on rank 0 (2100..2150 before 2150..2170; middles 3105 before 3106) */
    assert_int_equal(prof_trace_merge(m, srcs, labels, 2), 0);
    snprintf(cmd, sizeof cmd, "python3 %s %s 2 1,2,3 2,1,1 0", script, m);
    assert_int_equal(system(cmd), 0);
    /* 3 ranks: s, t, f in time order of the middles */
    assert_int_equal(prof_trace_merge(m, srcs, labels, 3), 0);
    snprintf(cmd, sizeof cmd, "python3 %s %s 3 1,2,3 2,1,1 0", script, m);
    assert_int_equal(system(cmd), 0);
    /* a step that differs (a dropped event): that all-reduce gets no arrow */
    const double a3[] = { 1010, 60, 3000, 20 };
    const int st3[] = { 1, 3 };
    fake_trace(p[2], 77, 0, a3, 2, st3);   /* its step 2 was dropped */
    assert_int_equal(prof_trace_merge(m, srcs, labels, 3), 0);
    snprintf(cmd, sizeof cmd, "python3 %s %s 3 1 2 1", script, m);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Counter tracks: registered once per name, recorded only inside the trace window, each
 * a "C" event named after its track with the series as its argument. */
static void test_trace_counters(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-ctr-XXXXXX", path[300], cmd[2048], script[320];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/c.json", dir);
    prof_t *p = prof_create(&(prof_options){ .trace_path = path, .trace_first = 2, .trace_last = 3, .quiet = 1 });
    assert_non_null(p);
    int a = prof_counter_register(p, "throughput", "samples_per_s");
    assert_int_equal(prof_counter_register(p, "throughput", "samples_per_s"), a);
    int b = prof_counter_register(p, "step_time", "ms");
    assert_true(a >= 0 && b >= 0 && a != b);
    assert_int_equal(prof_counter_register(NULL, "x", "y"), -1);
    for (int k = 2; k < PROF_TRACE_COUNTERS; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%d", k);
        assert_true(prof_counter_register(p, nm, "v") >= 0);
    }
    assert_int_equal(prof_counter_register(p, "one too many", "v"), -1);
    prof_counter(p, a, 1.0);               /* step 0: outside the window */
    for (long s = 1; s <= 4; s++) {
        prof_step(p, s);
        prof_counter(p, a, 1000.0 * (double)s);
        prof_counter(p, b, 0.5 * (double)s);
        prof_counter(p, 99, 1);             /* not registered: ignored */
    }
    prof_counter(NULL, a, 1);
    assert_int_equal(prof_destroy(p), 0);
    static const char check[] =
        "import json,sys\n"
        "ev=json.load(open(sys.argv[1]))['traceEvents']\n"
        "t=[e for e in ev if e['ph']=='C' and e['name']=='throughput']; s=[e for e in ev if e['ph']=='C' and e['name']=='step_time']\n"
        "assert [e['args']['samples_per_s'] for e in t]==[2000,3000], t\n"
        "assert [e['args']['ms'] for e in s]==[1.0,1.5], s\n"
        "assert all(a['ts']<b['ts'] for a,b in zip(t,t[1:]))\n";
    write_script(script, sizeof script, dir, check);
    snprintf(cmd, sizeof cmd, "python3 %s %s", script, path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- table ------------------------------------------------------------------------- */

static char *table_text(const prof_row *rows, size_t n, const prof_summary *s, prof_sort sort, size_t max)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    prof_print_table(f, rows, n, s, sort, max);
    fclose(f);
    return buf;
}

static void test_table(void **state)
{
    (void)state;
    prof_row rows[3];
    memset(rows, 0, sizeof rows);
    const char *names[] = { "dense.fwd", "relu.fwd", "softmax_xent" };
    uint64_t self[] = { 3000000, 500000, 1500000 }, calls[] = { 10, 300, 20 };
    for (int i = 0; i < 3; i++) {
        snprintf(rows[i].name, sizeof rows[i].name, "%s", names[i]);
        rows[i].calls = calls[i];
        rows[i].self_ns = rows[i].total_ns = self[i];
        rows[i].min_ns = rows[i].max_ns = self[i] / calls[i];
        rows[i].cycles = rows[i].instructions = rows[i].l1d_miss = rows[i].l2_miss =
            rows[i].l3_miss = rows[i].fp_ops = -1;
        rows[i].task_clock_ns = rows[i].faults = rows[i].csw = rows[i].migrations = rows[i].cpu_ns = -1;
    }
    rows[0].flops = 60000000; /* 20 GFLOP/s */
    rows[0].bytes = 3 * 1024 * 1024;
    rows[0].self_mem = 2048;
    rows[0].peak_mem = 5 * 1024 * 1024;
    prof_summary s;
    memset(&s, 0, sizeof s);
    s.total_self_ns = 5000000;
    s.overhead_ns = 12345;
    s.events = 330;
    s.ns_per_event = 37.4;
    snprintf(s.counters_note, sizeof s.counters_note, "no hardware counters (PAPI: test)");

    char *t = table_text(rows, 3, &s, PROF_SORT_SELF, 0);
    printf("%s", t);
    const char *cols[] = { "name", "self %", "self", "total", "avg", "calls", "GFLOP/s", "bytes",
                           "self mem", "peak mem" };
    for (int i = 0; i < 10; i++) assert_non_null(strstr(t, cols[i]));
    assert_null(strstr(t, "IPC"));      /* not counted */
    assert_null(strstr(t, " cpu "));
    assert_null(strstr(t, "faults"));
    assert_null(strstr(t, "% peak"));   /* not calibrated */
    assert_non_null(strstr(t, "20.00")); /* GFLOP/s */
    assert_non_null(strstr(t, "60.0%"));
    assert_non_null(strstr(t, "3.00 ms"));
    assert_non_null(strstr(t, "3.0 MiB"));
    assert_non_null(strstr(t, "5.0 MiB"));
    assert_non_null(strstr(t, "2.0 KiB"));
    assert_non_null(strstr(t, "profiler overhead: 12.3 us"));
    assert_non_null(strstr(t, "no hardware counters (PAPI: test)"));
    assert_true(strstr(t, "dense.fwd") < strstr(t, "softmax_xent"));
    assert_true(strstr(t, "softmax_xent") < strstr(t, "relu.fwd"));
    free(t);

    /* sorted by calls, two rows, calibrated and counted: % peak and IPC appear */
    s.peak_gflops = 100;
    rows[1].cycles = 1000;
    rows[1].instructions = 2500;
    t = table_text(rows, 3, &s, PROF_SORT_CALLS, 2);
    printf("%s", t);
    assert_non_null(strstr(t, "% peak"));
    assert_non_null(strstr(t, "IPC"));
    assert_non_null(strstr(t, "2.50"));
    assert_non_null(strstr(t, "(2 of 3 rows shown, sorted by calls)"));
    assert_null(strstr(t, "dense.fwd"));
    assert_true(strstr(t, "relu.fwd") < strstr(t, "softmax_xent"));
    free(t);

    t = table_text(rows, 3, &s, PROF_SORT_SELF, 1);
    assert_non_null(strstr(t, "20.0%")); /* 20 GFLOP/s of a 100 GFLOP/s peak */
    assert_non_null(strstr(t, "(1 of 3 rows shown, sorted by self)"));
    assert_null(strstr(t, "busy machine"));
    assert_null(strstr(t, "ridge point"));   /* no bandwidth calibrated */
    free(t);
    s.bw_gbs = 20;                            /* ridge at 100 / 20 = 5 FLOP/B */
    t = table_text(rows, 3, &s, PROF_SORT_SELF, 1);
    assert_non_null(strstr(t, "ridge point 5 FLOP/B"));
    free(t);
    s.bw_gbs = 0;

    /* an op faster than the calibrated peak: the footer says the calibration is suspect */
    s.peak_gflops = 10;
    t = table_text(rows, 3, &s, PROF_SORT_SELF, 1);
    assert_non_null(strstr(t, "200.0%"));
    assert_non_null(strstr(t, "busy machine"));
    free(t);
    s.peak_gflops = 100;

    /* cpu (all threads' CPU / self wall), faults and csw, and the footer's two notes */
    rows[0].cpu_ns = 5700000; /* 1.90 x the 3 ms self time */
    rows[0].faults = 16385;
    rows[0].csw = 42;
    snprintf(s.hw_note, sizeof s.hw_note, "hardware events: none usable (test)");
    snprintf(s.sw_note, sizeof s.sw_note, "software events: 4 counted (test)");
    snprintf(s.counters_note, sizeof s.counters_note, "%s", "hardware events: none usable (test); "
             "software events: 4 counted (test); counter X not counted (PAPI: test)");
    t = table_text(rows, 3, &s, PROF_SORT_SELF, 0);
    printf("%s", t);
    assert_non_null(strstr(t, " cpu "));
    assert_non_null(strstr(t, "faults"));
    assert_non_null(strstr(t, "csw"));
    assert_non_null(strstr(t, " 1.90 "));
    assert_non_null(strstr(t, " 16385 "));
    assert_non_null(strstr(t, " 42 "));
    assert_non_null(strstr(t, "Counters: hardware events: none usable (test)\n          software events: 4 counted (test)\n"));
    assert_non_null(strstr(t, "every thread"));
    assert_non_null(strstr(t, "warnings; counter X not counted (PAPI: test)"));
    free(t);

    prof_rows_sort(rows, 3, PROF_SORT_NAME);
    assert_string_equal(rows[0].name, "dense.fwd");
    assert_string_equal(rows[2].name, "softmax_xent");
    prof_rows_sort(rows, 3, PROF_SORT_FLOPS);
    assert_string_equal(rows[0].name, "dense.fwd");
}

static void test_parse(void **state)
{
    (void)state;
    prof_sort so;
    prof_group g;
    const char *keys[] = { "self", "total", "calls", "avg", "flops", "bytes", "mem", "name" };
    for (int i = 0; i < 8; i++) {
        assert_int_equal(prof_sort_parse(keys[i], &so), 0);
        assert_int_equal(so, i);
    }
    assert_int_equal(prof_sort_parse("speed", &so), -1);
    assert_int_equal(prof_sort_parse(NULL, &so), -1);
    assert_int_equal(prof_group_parse("op", &g), 0);
    assert_int_equal(g, PROF_BY_OP);
    assert_int_equal(prof_group_parse("layer", &g), 0);
    assert_int_equal(g, PROF_BY_LAYER);
    assert_int_equal(prof_group_parse("phase", &g), 0);
    assert_int_equal(g, PROF_BY_PHASE);
    assert_int_equal(prof_group_parse("scope", &g), 0);
    assert_int_equal(g, PROF_BY_SCOPE);
    assert_int_equal(prof_group_parse("module", &g), -1);
}

/* ---- calibration ------------------------------------------------------------------- */

static void test_calibration_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-cal-XXXXXX", cmd[300], path[512];
    assert_non_null(mkdtemp(dir));
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    prof_calibration c;
    assert_int_equal(prof_calibration_load(&c), 1); /* none yet */
    prof_calibration w = { .peak_gflops = 93.5, .mean_gflops = 90.25, .m = 1024, .n = 1024,
                           .k = 1024, .reps = 10, .threads = 2, .bw_mib = 64 };
    /* a real (small) triad: a positive finite figure, kept and reloaded beside the peak */
    assert_int_equal(prof_membw_measure(4, 2, &w.bw_gbs), 0);
    assert_true(w.bw_gbs > 0 && isfinite(w.bw_gbs));
    double dummy = 1;
    assert_int_equal(prof_membw_measure(0, 2, &dummy), -1);
    assert_true(dummy == 0);
    snprintf(w.core, sizeof w.core, "Haswell");
    snprintf(w.when, sizeof w.when, "2026-01-01T00:00:00Z");
    assert_int_equal(prof_calibration_save(&w), 0);
    assert_int_equal(prof_calibration_load(&c), 0);
    assert_true(c.peak_gflops > 93.49 && c.peak_gflops < 93.51);
    assert_int_equal(c.reps, 10);
    assert_string_equal(c.core, "Haswell");
    assert_true(fabs(c.bw_gbs - w.bw_gbs) < 0.001);
    assert_int_equal(c.bw_mib, 64);
    prof_t *p = quiet_prof();
    prof_summary s;
    prof_summary_get(p, &s);
    assert_true(s.peak_gflops > 93.49 && s.peak_gflops < 93.51);
    assert_true(fabs(s.bw_gbs - w.bw_gbs) < 0.001);
    prof_destroy(p);
    /* a damaged file is an error naming the file and line */
    assert_int_equal(prof_calibration_path(path, sizeof path), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("peak_gflops = 12\ngarbage!\n", f);
    fclose(f);
    assert_int_equal(prof_calibration_load(&c), -1);
    assert_non_null(strstr(prof_error(), "line 2"));
    if (old) { setenv("XDG_CACHE_HOME", old, 1); free(old); }
    else unsetenv("XDG_CACHE_HOME");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_sysinfo(void **state)
{
    (void)state;
    prof_sysinfo si;
    int rc = prof_sysinfo_get(&si);
    assert_true(si.cores >= 1);
    assert_true(si.clock[0] != 0);
    if (rc == 0) {
        assert_true(si.papi_ok);
        assert_true(si.n_components > 0);
        if (si.hw_counters == 0) assert_true(si.no_counters_reason[0] != 0);
        int sde = 0;
        for (int i = 0; i < si.n_components; i++)
            if (!strcmp(si.components[i].name, "sde") && !si.components[i].disabled) sde = 1;
        assert_true(sde); /* our SDEs make the sde component active in this executable */
    } else {
        assert_true(si.papi_error[0] != 0);
    }
}

int test_profiler_counters(void);
int test_profiler_text(void); /* text.c */
int test_profiler_optable(void); /* optable.c */
int test_profiler_sampling(void); /* sampling.c */
int test_profiler_placement(void); /* placement.c */
int test_profiler_signals(void); /* signals.c */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_self_total),
        cmocka_unit_test(test_min_max_calls),
        cmocka_unit_test(test_unbalanced_and_null),
        cmocka_unit_test(test_aggregation),
        cmocka_unit_test(test_memory_peak),
        cmocka_unit_test(test_self_mem_per_scope),
        cmocka_unit_test(test_sde_through_papi),
        cmocka_unit_test(test_unavailable_counter_warns),
        cmocka_unit_test(test_destroy_trace_status),
        cmocka_unit_test(test_trace_json),
        cmocka_unit_test(test_trace_merge),
        cmocka_unit_test(test_trace_merge_flows),
        cmocka_unit_test(test_trace_counters),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_calibration_file),
        cmocka_unit_test(test_sysinfo),
    };
    int failed = cmocka_run_group_tests_name("profiler", tests, NULL, NULL);
    failed += test_profiler_counters(); /* counters.c */
    failed += test_profiler_text();
    failed += test_profiler_optable();
    failed += test_profiler_sampling();
    failed += test_profiler_placement();
    failed += test_profiler_signals();
    return failed ? 1 : 0;
}
