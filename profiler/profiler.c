/* profiler.c — scopes (registered once; begin/end allocate nothing), nesting into self and
 * total time, PAPI clock and hardware counters, SDE publication, memory per scope, traces. */
#include <errno.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <papi.h>
#include <pthread.h>
#include <sde_lib.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAX_SCOPES 1024
#define MAX_DEPTH 64
#define NHW 6                     /* the hardware-counter columns of prof_row */
#define NCTR (NHW + 4)            /* ... then the software-event columns */
#define TRACE_DEFAULT_CAP 65536
/* The process CPU clock is a syscall (0.1-1.3 us on the VMs measured, more than most op
 * bodies), and so is each getrusage behind faults and csw: a scope reads them on one call
 * per SAMPLE_GAP_COSTS sampled calls' worth of its own wall time (the cost of a sampled
 * call's reads, measured at create), so that they cost it about 1/SAMPLE_GAP_COSTS = 0.1 %
 * of its time per nesting level (step > phase > op: ~0.3 % of a step); scopes at least
 * that long read them on every call. */
#define SAMPLE_GAP_COSTS 1000.0

/* The prof_row counter columns, in the order of its int64_t fields from cycles on. */
enum { C_CYC, C_INS, C_L1D, C_L2, C_L3, C_FP, C_TASK, C_FAULTS, C_CSW, C_MIGR };
static const char *const slot_names[NCTR] = { "cycles", "instructions", "l1d_miss", "l2_miss",
                                              "l3_miss", "fp_ops", "task_clock", "faults",
                                              "csw", "migrations" };
/* The default set: for each column, PAPI events to try in order of preference. The
 * hardware presets come first; the kernel software events are the fallback, tried only
 * when no hardware event could be added. */
static const char *const default_events[NCTR][3] = {
    { "PAPI_TOT_CYC", NULL, NULL },
    { "PAPI_TOT_INS", NULL, NULL },
    { "PAPI_L1_DCM", NULL, NULL },
    { "PAPI_L2_DCM", "PAPI_L2_TCM", NULL },
    { "PAPI_L3_TCM", "PAPI_L3_DCM", NULL },
    { "PAPI_SP_OPS", "PAPI_FP_OPS", "PAPI_VEC_SP" },
    /* PAPI counts the user domain by default, where a context switch or a migration never
     * happens (the kernel does them: 0 every time) and faults taken inside the kernel are
     * missed, so these ask for both levels; without the right to count the kernel level
     * (kernel.perf_event_paranoid), faults fall back to user level and the others go. */
    { "perf::TASK-CLOCK", NULL, NULL },
    { "perf::PAGE-FAULTS:u=1:k=1", "perf::PAGE-FAULTS", NULL },
    { "perf::CONTEXT-SWITCHES:u=1:k=1", NULL, NULL },
    { "perf::CPU-MIGRATIONS:u=1:k=1", NULL, NULL },
};

typedef struct {
    char name[48], layer[32];
    prof_kind kind;
    uint64_t calls, total_ns, self_ns, min_ns, max_ns, flops, bytes;
    long long ctr[NCTR];          /* self counts, by event-set position */
    long long ru[2];              /* self faults and context switches from getrusage, of the sampled calls */
    long long ru_first[2];        /* ... of the first call (always sampled; first-touch faults
                                   * land there, so it is kept out of the scaling) */
    uint64_t first_ns;            /* the first call's wall time */
    int64_t self_mem, peak_mem;
    uint64_t cpu_ns, cpu_wall_ns; /* process CPU time and wall time of the sampled calls */
    uint64_t cpu_since_ns;        /* wall time of the calls since (and with) the last sampled one */
    uint64_t cpu_next_ns;         /* the next call is sampled once cpu_since_ns reaches this (0: the
                                     first call is) */
} scope_stat;

typedef struct {
    int id, traced;
    uint64_t t0, child_ns, cpu0; /* cpu0 0: this call is not sampled */
    size_t peak_live;
    long long c0[NCTR], child_c[NCTR];
    long long ru0[2], ru_child[2];
} frame;

typedef struct {
    uint64_t ts, dur, flops, bytes; /* id -1: live bytes in flops; id <= -2: counter -2 - id,
                                       its value (a double) in dur's bits */
    int32_t id, depth;
    long step;
} trace_ev;

struct prof {
    scope_stat scopes[MAX_SCOPES + 1]; /* the extra one is scratch for overhead calibration */
    int n_scopes;
    frame stack[MAX_DEPTH];
    int depth, lost_depth;   /* lost_depth: begins past MAX_DEPTH, ignored until their ends */
    uint64_t events, unbalanced;
    double ns_per_event;
    long step;
    uint64_t t_origin;
    uint64_t t_sync;         /* prof_clock_sync's mark (0: none) */
    size_t alloc_base;       /* prof_mem_total() at create */
    int quiet;
    /* hardware counters */
    int eventset, n_ctr;     /* n_ctr 0: none counted, eventset unused */
    int slot_of[NCTR];       /* event-set position -> prof_row column */
    int n_hw, n_sw;          /* how many of n_ctr are hardware / software events */
    int ru_on;               /* faults and csw come from getrusage(RUSAGE_THREAD) (no perf event
                              * counts them): the fallback that works on any Linux */
    char hw_note[384], sw_note[384], counters_note[800], counters_used[256];
    char warnings[1200];     /* prof_warnings: lines for the caller to print */
    double peak_gflops;
    double bw_gbs;           /* calibrated memory bandwidth, 0 = none */
    double cpu_clock_ns;     /* cost of one process CPU clock read, measured at create */
    double sample_cost_ns;   /* cost of one sampled call's reads (2 CPU clock reads, + 2
                              * getrusage when ru_on), measured at create: sets the gap */
    uint64_t sample_ns;      /* wall time the sampled calls' reads took, measured as they run */
    uint64_t sde_flops, sde_bytes; /* counts not yet added to the SDE atomics (see prof_end) */
    uint64_t cpu_gap_ns;     /* mean wall time of a scope between its sampled calls */
    uint64_t cpu_bias_ns;    /* CPU time a sampled call's own two reads add (subtracted) */
    uint64_t cpu_rng;        /* xorshift state that jitters the gaps */
    uint64_t cpu_reads;      /* sampled calls (two reads each), for the overhead figure */
    /* trace */
    char *trace_path;
    long trace_first, trace_last;
    int trace_on, trace_written;
    trace_ev *trace;
    size_t trace_cap, trace_n, trace_dropped;
    size_t trace_last_live;
    int pid, tid;
    char track_name[PROF_TRACE_COUNTERS][48], track_series[PROF_TRACE_COUNTERS][32];
    int n_tracks;             /* prof_counter_register'd counter tracks */
};

/* prof_internal_fake_clocks: the test's CPU clock and the cost it stands for. */
static volatile uint64_t *fake_cpu;
static double fake_cpu_cost;
/* The profiler whose innermost scope gets this thread's allocations charged to it. */
static _Thread_local prof_t *tls_active;

/* Process-wide software counters published as SDEs (sde:::nnbench::...). */
static atomic_llong sde_flops, sde_bytes;
static pthread_once_t papi_once = PTHREAD_ONCE_INIT;
static int papi_ok;                 /* PAPI_library_init succeeded */
static char papi_init_error[160];
static char papi_disabled_by_env[256]; /* components NNBENCH_PAPI_DISABLE switched off */
static papi_handle_t sde_handle;

static long long sde_read_live(void *arg) { (void)arg; return (long long)prof_mem_live(); }
static long long sde_read_peak(void *arg) { (void)arg; return (long long)prof_mem_peak(); }
static long long sde_read_total(void *arg) { (void)arg; return (long long)prof_mem_total(); }
static long long sde_read_atomic(void *arg) { return atomic_load((atomic_llong *)arg); }

static char clock_note[160] = "clock_gettime(CLOCK_MONOTONIC): PAPI not initialised";

/* ns per call of a clock, best of a few bursts. */
static double clock_cost(void)
{
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < 200; i++) (void)prof_now_ns();
        clock_gettime(CLOCK_MONOTONIC, &b);
        double per = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 200;
        if (per < best) best = per;
    }
    return best;
}

/* PAPI_get_real_nsec is the designated clock, but on some VMs it takes a slow path (1.4 us
 * per call measured on a bhyve guest, against 29 ns for the vDSO clock_gettime): that would
 * dominate small scopes and the overhead budget, so use it only when it is cheap. */
static void choose_clock(void)
{
    prof_internal_clock_use_papi(0);
    double mono = clock_cost();
    prof_internal_clock_use_papi(1);
    double papi = clock_cost();
    if (papi > 4 * mono + 50) {
        prof_internal_clock_use_papi(0);
        snprintf(clock_note, sizeof clock_note, "clock_gettime(CLOCK_MONOTONIC): PAPI_get_real_nsec "
                 "costs %.0f ns per call here vs %.0f ns", papi, mono);
    } else {
        snprintf(clock_note, sizeof clock_note, "PAPI_get_real_nsec (%.0f ns per call)", papi);
    }
}

static void papi_setup(void)
{
    /* SDEs first, so that the sde component finds them when PAPI initialises. */
    sde_handle = papi_sde_init("nnbench");
    if (sde_handle) {
        papi_sde_register_counter_cb(sde_handle, "flops", PAPI_SDE_RO | PAPI_SDE_DELTA,
                                     PAPI_SDE_long_long, sde_read_atomic, &sde_flops);
        papi_sde_register_counter_cb(sde_handle, "bytes", PAPI_SDE_RO | PAPI_SDE_DELTA,
                                     PAPI_SDE_long_long, sde_read_atomic, &sde_bytes);
        papi_sde_register_counter_cb(sde_handle, "live_bytes", PAPI_SDE_RO | PAPI_SDE_INSTANT,
                                     PAPI_SDE_long_long, sde_read_live, NULL);
        papi_sde_register_counter_cb(sde_handle, "peak_bytes", PAPI_SDE_RO | PAPI_SDE_INSTANT,
                                     PAPI_SDE_long_long, sde_read_peak, NULL);
        papi_sde_register_counter_cb(sde_handle, "alloc_bytes", PAPI_SDE_RO | PAPI_SDE_DELTA,
                                     PAPI_SDE_long_long, sde_read_total, NULL);
        /* No papi_sde_describe_counter: libsde 7.0 leaks each description (LeakSanitizer
         * flags every test binary); the meanings are in profiler.h and docs/profiling.md. */
    }
    /* NNBENCH_PAPI_DISABLE names components PAPI must not start (PAPI only takes this before
     * PAPI_library_init): with perf_event it forces the "no counters" path on any machine. */
    const char *off = getenv("NNBENCH_PAPI_DISABLE");
    if (off && *off && !PAPI_is_initialized()) {
        char list[256];
        snprintf(list, sizeof list, "%s", off);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            if (*t && PAPI_disable_component_by_name(t) == PAPI_OK) {
                size_t len = strlen(papi_disabled_by_env);
                snprintf(papi_disabled_by_env + len, sizeof papi_disabled_by_env - len, "%s%s",
                         len ? "," : "", t);
            }
        }
    }
    int rc = PAPI_is_initialized() ? (int)PAPI_VER_CURRENT : PAPI_library_init(PAPI_VER_CURRENT);
    if (rc == PAPI_VER_CURRENT) {
        papi_ok = 1;
        choose_clock();
    } else {
        snprintf(papi_init_error, sizeof papi_init_error, "PAPI_library_init: %s",
                 rc > 0 ? "version mismatch" : PAPI_strerror(rc));
    }
}

int prof_internal_papi_ready(const char **why)
{
    pthread_once(&papi_once, papi_setup);
    if (why) *why = papi_ok ? "" : papi_init_error;
    return papi_ok;
}

void prof_internal_no_counters_reason(char *buf, size_t n)
{
    if (!papi_ok) { snprintf(buf, n, "%s", papi_init_error); return; }
    int cidx = PAPI_get_component_index("perf_event");
    const PAPI_component_info_t *ci = cidx >= 0 ? PAPI_get_component_info(cidx) : NULL;
    if (!ci) snprintf(buf, n, "no perf_event component in this PAPI build");
    else if (ci->disabled) prof_internal_say(buf, n, "perf_event disabled: %s", ci->disabled_reason);
    else snprintf(buf, n, "PAPI reports %d hardware counters", PAPI_num_cmp_hwctrs(cidx));
}

/* Faults (minor + major) and context switches (voluntary + involuntary) of the calling
 * thread so far. */
static void thread_rusage(long long v[2])
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru)) { v[0] = v[1] = 0; return; }
    v[0] = (long long)ru.ru_minflt + ru.ru_majflt;
    v[1] = (long long)ru.ru_nvcsw + ru.ru_nivcsw;
}

/* ---- which events are counted, and why not ---------------------------------------- */

/* perf_event_open of one user-space event of the calling thread: 0 if the kernel opens it,
 * else errno. Asked only to explain a failure: PAPI's own error ("Event does not exist")
 * does not say whether the kernel, the VM or PAPI refused. */
static int probe_perf(uint32_t type, uint64_t config)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    errno = 0;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) return errno ? errno : EINVAL;
    close(fd);
    return 0;
}

static int read_paranoid(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    int v = INT_MIN;
    if (f) {
        if (fscanf(f, "%d", &v) != 1) v = INT_MIN;
        fclose(f);
    }
    return v;
}

/* "perf_event_open: No such file or directory — no PMU exposed to this virtual machine" */
static void say_probe(char *buf, size_t n, const char *what, int err, const prof_counter_facts *f)
{
    buf[0] = 0;
    if (err < 0) return;
    if (err == 0) { prof_internal_say(buf, n, "perf_event_open of %s works", what); return; }
    char why[128] = "";
    if (err == ENOENT)
        snprintf(why, sizeof why, " — %s", f->in_vm ? "no PMU exposed to this virtual machine"
                                                   : "the kernel knows no PMU for this CPU");
    else if ((err == EACCES || err == EPERM) && f->paranoid != INT_MIN)
        snprintf(why, sizeof why, " — kernel.perf_event_paranoid is %d; counting one's own "
                 "threads needs 2 or less", f->paranoid);
    else if (err == ENOSYS)
        snprintf(why, sizeof why, " — this kernel has no perf_event support");
    prof_internal_say(buf, n, "perf_event_open%s%s: %s%s", strcmp(what, "a hardware event") ? " of " : "",
                      strcmp(what, "a hardware event") ? what : "", strerror(err), why);
}

void prof_internal_explain(const prof_counter_facts *f, char *hw, size_t hn, char *sw, size_t sn)
{
    char ph[200], ps[200], by[300] = "";
    say_probe(ph, sizeof ph, "a hardware event", f->probe_hw, f);
    say_probe(ps, sizeof ps, "a software event", f->probe_sw, f);
    const char *sep_h = ph[0] ? "; " : "", *sep_s = ps[0] ? "; " : "";
    if (f->forced && *f->forced) prof_internal_say(by, sizeof by, " (NNBENCH_PAPI_DISABLE=%s)", f->forced);
    if (f->off) {
        snprintf(hw, hn, "hardware events: off (counters = none)");
        snprintf(sw, sn, "software events: off (counters = none)");
        return;
    }
    if (!f->papi_ok) {
        prof_internal_say(hw, hn, "hardware events: none (PAPI unavailable: %s)", f->papi_error);
        snprintf(sw, sn, "software events: none (PAPI unavailable)");
        return;
    }
    if (f->hw_added)
        prof_internal_say(hw, hn, "hardware events: %d counted (%s)", f->hw_added, f->hw_used);
    else if (!f->hw_tried && f->explicit_list)
        snprintf(hw, hn, "hardware events: none in the counters list");
    else if (!f->pe_found)
        snprintf(hw, hn, "hardware events: none usable (this PAPI has no perf_event component)");
    else if (f->pe_disabled)
        prof_internal_say(hw, hn, "hardware events: none usable (PAPI's perf_event component is "
                          "disabled%s: %s%s%s)", by, f->pe_reason, sep_h, ph);
    else if (!f->hw_tried)
        prof_internal_say(hw, hn, "hardware events: none (%s)", f->hw_error);
    else
        prof_internal_say(hw, hn, "hardware events: none usable (PAPI's perf_event component lists %d "
                          "counters, but none of %d events could be added: %s%s%s)", f->pe_listed,
                          f->hw_tried, f->hw_error, sep_h, ph);

    if (f->sw_added)
        prof_internal_say(sw, sn, "software events: %d counted (%s), of the profiling thread only",
                          f->sw_added, f->sw_used);
    else if (!f->sw_tried && f->explicit_list)
        snprintf(sw, sn, "software events: none in the counters list");
    else if (!f->sw_tried && f->hw_added)
        snprintf(sw, sn, "software events: not counted (hardware events are; list both in "
                 "[profile] counters to count them too, e.g. faults=perf::PAGE-FAULTS)");
    else if (!f->pe_found)
        snprintf(sw, sn, "software events: none (this PAPI has no perf_event component)");
    else if (f->pe_disabled)
        prof_internal_say(sw, sn, "software events: none (PAPI reads them through its perf_event "
                          "component, which is disabled%s%s%s)", by, sep_s, ps);
    else if (!f->sw_tried)
        prof_internal_say(sw, sn, "software events: none (%s)", f->sw_error);
    else
        prof_internal_say(sw, sn, "software events: none (none of %d could be added: %s%s%s)",
                          f->sw_tried, f->sw_error, sep_s, ps);
}

/* A warning for the caller (prof_warnings): the profiler never prints. */
static void warn_add(prof_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_add(prof_t *p, const char *fmt, ...)
{
    size_t len = strlen(p->warnings);
    if (len + 1 >= sizeof p->warnings) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->warnings + len, sizeof p->warnings - len, fmt, ap);
    va_end(ap);
    len = strlen(p->warnings);
    if (len + 1 < sizeof p->warnings) { p->warnings[len] = '\n'; p->warnings[len + 1] = 0; }
}

const char *prof_warnings(const prof_t *p) { return p ? p->warnings : ""; }

static void note_append(prof_t *p, const char *msg)
{
    size_t len = strlen(p->counters_note);
    snprintf(p->counters_note + len, sizeof p->counters_note - len, "%s%s", len ? "; " : "", msg);
}

/* Length of a perf:: event's name without its qualifiers ("perf::PAGE-FAULTS:k=1" -> 17). */
static size_t base_len(const char *ev)
{
    const char *q = strncmp(ev, "perf::", 6) ? NULL : strchr(ev + 6, ':');
    return q ? (size_t)(q - ev) : strlen(ev);
}

static int slot_by_name(const char *ev)
{
    for (int s = 0; s < NCTR; s++)
        for (int k = 0; k < 3 && default_events[s][k]; k++) {
            const char *d = default_events[s][k];
            if (base_len(ev) == base_len(d) && !strncmp(ev, d, base_len(d))) return s;
        }
    if (!strcmp(ev, "PAPI_FP_INS") || !strcmp(ev, "PAPI_FP_OPS") || !strcmp(ev, "PAPI_VEC_SP") ||
        !strcmp(ev, "PAPI_SP_OPS"))
        return C_FP;
    return -1;
}

static int slot_taken(const prof_t *p, int s)
{
    for (int i = 0; i < p->n_ctr; i++)
        if (p->slot_of[i] == s) return 1;
    return 0;
}

/* Adds one event to the set for column slot; warn: say why when it cannot be counted.
 * The first PAPI error goes to err (if err[0] is still empty). */
static int add_counter(prof_t *p, const char *ev, int slot, int warn, char *err, size_t errn)
{
    if (slot_taken(p, slot)) {
        if (warn) {
            char msg[200];
            snprintf(msg, sizeof msg, "counter %s: column %s already counted; skipped", ev, slot_names[slot]);
            note_append(p, msg);
            warn_add(p, "profiler: warning: %s", msg);
        }
        return -1;
    }
    int rc = PAPI_add_named_event(p->eventset, ev);
    if (rc != PAPI_OK) {
        if (err && !err[0]) prof_internal_say(err, errn, "PAPI: %s: %s", ev, PAPI_strerror(rc));
        if (warn) {
            char msg[200];
            snprintf(msg, sizeof msg, "counter %s not counted (PAPI: %s)", ev, PAPI_strerror(rc));
            note_append(p, msg);
            warn_add(p, "profiler: warning: %s", msg);
        }
        return -1;
    }
    p->slot_of[p->n_ctr++] = slot;
    if (slot < NHW) p->n_hw++;
    else p->n_sw++;
    size_t len = strlen(p->counters_used);
    snprintf(p->counters_used + len, sizeof p->counters_used - len, "%s%s", len ? "," : "", ev);
    return 0;
}

/* The names counted in [from, to) columns, comma-separated. */
static void used_in(const prof_t *p, int from, int to, char *buf, size_t n)
{
    buf[0] = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", p->counters_used);
    int i = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save), i++) {
        if (p->slot_of[i] < from || p->slot_of[i] >= to) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? "," : "", t);
    }
}

static void component_facts(prof_counter_facts *f)
{
    f->papi_ok = papi_ok;
    f->papi_error = papi_init_error;
    f->forced = papi_disabled_by_env;
    f->probe_hw = f->probe_sw = -1;
    f->paranoid = INT_MIN;
    f->pe_reason = "";
    if (!papi_ok) return;
    int cidx = PAPI_get_component_index("perf_event");
    const PAPI_component_info_t *ci = cidx >= 0 ? PAPI_get_component_info(cidx) : NULL;
    f->pe_found = ci != NULL;
    f->pe_disabled = ci && ci->disabled;
    if (ci && ci->disabled) f->pe_reason = ci->disabled_reason;
    f->pe_listed = ci && !ci->disabled ? ci->num_cntrs : 0;
    const PAPI_hw_info_t *hwi = PAPI_get_hardware_info();
    f->in_vm = hwi && hwi->virtualized;
}

/* The default events of columns [from, to), each column's first that PAPI adds. Test hook:
 * the names in the environment variable `hook` (NNBENCH_PROF_HW_EVENTS for the hardware
 * columns, NNBENCH_PROF_SW_EVENTS for the software ones) replace them, each in its own
 * column or the first free one of the range; a name that does not exist forces the next
 * fallback (software events, then getrusage) on any machine. */
static void add_default_range(prof_t *p, const char *hook, int from, int to, int *tried, char *err, size_t errn)
{
    const char *env = getenv(hook);
    if (!env || !*env) {
        for (int s = from; s < to; s++)
            for (int k = 0; k < 3 && default_events[s][k]; k++) {
                (*tried)++;
                if (add_counter(p, default_events[s][k], s, 0, err, errn) == 0) break;
            }
        return;
    }
    char list[256];
    snprintf(list, sizeof list, "%s", env);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int slot = slot_by_name(t);
        if (slot < from || slot >= to) slot = -1;
        for (int s = from; slot < 0 && s < to; s++)
            if (!slot_taken(p, s)) slot = s;
        if (slot < 0) break;
        (*tried)++;
        add_counter(p, t, slot, 0, err, errn);
    }
}

/* counters: "" = default set; "none" = no counters; else a list of PAPI names, each
 * optionally "column=EVENT" to count a native event in a column (e.g.
 * "cycles=perf::CYCLES"). The default set: the hardware presets (or NNBENCH_PROF_HW_EVENTS),
 * and, only when none of them can be added, the kernel software events. */
static void setup_counters(prof_t *p, const char *counters)
{
    p->eventset = PAPI_NULL;
    prof_counter_facts f;
    memset(&f, 0, sizeof f);
    component_facts(&f);
    char hw_err[160] = "", sw_err[160] = "";
    f.hw_error = hw_err;
    f.sw_error = sw_err;
    int explicit_list = counters && *counters;
    f.explicit_list = explicit_list;
    if (explicit_list && !strcmp(counters, "none")) f.off = 1;
    int rc = PAPI_OK;
    if (!f.off && papi_ok && (rc = PAPI_create_eventset(&p->eventset)) != PAPI_OK) {
        p->eventset = PAPI_NULL;
        prof_internal_say(hw_err, sizeof hw_err, "PAPI_create_eventset: %s", PAPI_strerror(rc));
        snprintf(sw_err, sizeof sw_err, "%s", hw_err);
    }
    if (!f.off && p->eventset != PAPI_NULL && !explicit_list) {
        add_default_range(p, "NNBENCH_PROF_HW_EVENTS", 0, NHW, &f.hw_tried, hw_err, sizeof hw_err);
        if (!p->n_hw) add_default_range(p, "NNBENCH_PROF_SW_EVENTS", NHW, NCTR, &f.sw_tried, sw_err, sizeof sw_err);
    } else if (!f.off && explicit_list) {
        char list[256];
        snprintf(list, sizeof list, "%s", counters);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            int slot = -1;
            char *eq = strchr(t, '=');
            if (eq) {
                *eq = 0;
                for (int s = 0; s < NCTR; s++)
                    if (!strcmp(t, slot_names[s])) slot = s;
                if (slot < 0) {
                    char msg[200];
                    snprintf(msg, sizeof msg, "counter column '%s' unknown (use one of cycles, "
                             "instructions, l1d_miss, l2_miss, l3_miss, fp_ops, task_clock, faults, "
                             "csw, migrations)", t);
                    note_append(p, msg);
                    warn_add(p, "profiler: warning: %s", msg);
                    continue;
                }
                t = eq + 1;
            } else {
                slot = slot_by_name(t);
            }
            if (slot < 0) {
                char msg[200];
                snprintf(msg, sizeof msg, "counter %s has no column; write COLUMN=%s (cycles, "
                         "instructions, l1d_miss, l2_miss, l3_miss, fp_ops, task_clock, faults, "
                         "csw, migrations)", t, t);
                note_append(p, msg);
                warn_add(p, "profiler: warning: %s", msg);
                continue;
            }
            if (slot < NHW) f.hw_tried++;
            else f.sw_tried++;
            if (p->eventset != PAPI_NULL) add_counter(p, t, slot, 1, slot < NHW ? hw_err : sw_err, sizeof hw_err);
            else warn_add(p, "profiler: warning: counter %s not counted (%s)", t,
                         papi_ok ? hw_err : papi_init_error);
        }
    }
    if (p->n_ctr && (rc = PAPI_start(p->eventset)) != PAPI_OK) {
        char msg[200];
        snprintf(msg, sizeof msg, "PAPI_start: %s; counters off", PAPI_strerror(rc));
        note_append(p, msg);
        /* The events were added but cannot run together: that is the reason to give. */
        if (!hw_err[0]) prof_internal_say(hw_err, sizeof hw_err, "PAPI_start: %s", PAPI_strerror(rc));
        if (!sw_err[0]) prof_internal_say(sw_err, sizeof sw_err, "PAPI_start: %s", PAPI_strerror(rc));
        warn_add(p, "profiler: warning: %s", msg);
        p->n_ctr = p->n_hw = p->n_sw = 0;
        p->counters_used[0] = 0;
    }
    if (!p->n_ctr && p->eventset != PAPI_NULL) {
        PAPI_cleanup_eventset(p->eventset);
        PAPI_destroy_eventset(&p->eventset);
        p->eventset = PAPI_NULL;
    }
    char hw_used[256], sw_used[256];
    used_in(p, 0, NHW, hw_used, sizeof hw_used);
    used_in(p, NHW, NCTR, sw_used, sizeof sw_used);
    f.hw_added = p->n_hw;
    f.sw_added = p->n_sw;
    f.hw_used = hw_used;
    f.sw_used = sw_used;
    if (!f.off && papi_ok) {
        f.paranoid = read_paranoid();
        if (!p->n_hw) f.probe_hw = probe_perf(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
        if (!p->n_sw && (f.sw_tried || f.pe_disabled || !f.pe_found))
            f.probe_sw = probe_perf(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
    }
    prof_internal_explain(&f, p->hw_note, sizeof p->hw_note, p->sw_note, sizeof p->sw_note);
    /* The default set without perf events for faults and csw (perf_event disabled, as on a VM
     * without a PMU, or hardware events counted instead) takes them from getrusage, which
     * every Linux has, and says so where the columns are explained. */
    if (!f.off && !explicit_list && !slot_taken(p, C_FAULTS) && !slot_taken(p, C_CSW)) {
        p->ru_on = 1;
        size_t len = strlen(p->sw_note);
        snprintf(p->sw_note + len, sizeof p->sw_note - len, "; faults, csw from getrusage(RUSAGE_THREAD)");
    }
    char warnings[800];
    snprintf(warnings, sizeof warnings, "%s", p->counters_note);
    prof_internal_say(p->counters_note, sizeof p->counters_note, "%s; %s%s%s", p->hw_note, p->sw_note,
                      warnings[0] ? "; " : "", warnings);
    /* Once per process: a run of several variants creates several profilers. */
    static atomic_flag told = ATOMIC_FLAG_INIT;
    if (!p->n_hw && !f.off && !p->quiet && !atomic_flag_test_and_set(&told))
        warn_add(p, "profiler: %s; %s", p->hw_note, p->sw_note);
}

void prof_internal_counters_probe(int *hw, int *sw, char *hw_note, size_t hn, char *sw_note, size_t sn)
{
    *hw = *sw = 0;
    hw_note[0] = sw_note[0] = 0;
    prof_t *p = calloc(1, sizeof *p);
    if (!p) return;
    prof_internal_papi_ready(NULL);
    p->quiet = 1;
    setup_counters(p, "");
    *hw = p->n_hw;
    *sw = p->n_sw;
    snprintf(hw_note, hn, "%s", p->hw_note);
    snprintf(sw_note, sn, "%s", p->sw_note);
    if (p->eventset != PAPI_NULL) {
        long long v[NCTR];
        PAPI_stop(p->eventset, v);
        PAPI_cleanup_eventset(p->eventset);
        PAPI_destroy_eventset(&p->eventset);
    }
    free(p);
}

static uint64_t proc_cpu_ns(void);
static void sde_publish(prof_t *p);

/* ns per process CPU clock read (rusage 0), or per sampled call's reads (rusage 1: two
 * CPU clock reads, and two getrusage when p->ru_on), best of a few bursts. */
static double sample_read_cost(const prof_t *p, int rusage)
{
    if (fake_cpu) return fake_cpu_cost * (rusage ? 2 : 1);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = prof_now_ns();
        for (int i = 0; i < 20; i++) {
            (void)proc_cpu_ns();
            if (!rusage) continue;
            (void)proc_cpu_ns();
            long long v[2];
            for (int k = 0; k < 2 * p->ru_on; k++) thread_rusage(v);
        }
        double per = (double)(prof_now_ns() - t0) / 20;
        if (per < best) best = per;
    }
    return best;
}

/* CPU time a sampled call's own two reads add to its delta: each read takes the clock
 * somewhere inside a syscall, so c1 - c0 holds about one syscall more than the wall time
 * between them (which excludes the reads). The least of a few pairs read as prof_begin and
 * prof_end do (other threads' time arrives in tick-sized steps, which the least avoids). */
static uint64_t cpu_read_bias(void)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 16; i++) {
        uint64_t c0 = proc_cpu_ns(), t0 = prof_now_ns(), t1 = prof_now_ns(), c1 = proc_cpu_ns();
        uint64_t d = c1 > c0 ? c1 - c0 : 0, w = t1 - t0;
        d = d > w ? d - w : 0;
        if (d < best) best = d;
    }
    return best;
}

static void calibrate_overhead(prof_t *p)
{
    /* Best of a few bursts of empty scopes: the cost of one begin+end pair without CPU clock
     * reads (the summary adds the reads actually made). */
    const int burst = 200, rounds = 5;
    double best = 0;
    p->scopes[MAX_SCOPES].cpu_next_ns = UINT64_MAX;
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
    p->cpu_reads = 0;
    p->sample_ns = 0;
}

prof_t *prof_create(const prof_options *opt)
{
    static const prof_options defaults = { 0 };
    if (!opt) opt = &defaults;
    long first = opt->trace_first, last = opt->trace_last;
    if (first == 0 && last == 0) { first = 1; last = 5; }
    if (opt->trace_path && (last < first)) {
        prof_internal_errorf("profiler: trace steps %ld:%ld: the last step is "
                 "before the first; write A:B with A <= B", first, last);
        return NULL;
    }
    prof_t *p = calloc(1, sizeof *p);
    if (!p) {
        prof_internal_errorf("profiler: out of memory (%zu bytes)", sizeof *p);
        return NULL;
    }
    p->quiet = opt->quiet;
    p->trace_first = first;
    p->trace_last = last;
    p->pid = (int)getpid();
    p->tid = (int)syscall(SYS_gettid);
    if (opt->trace_path) {
        p->trace_cap = opt->trace_capacity ? opt->trace_capacity : TRACE_DEFAULT_CAP;
        p->trace_path = strdup(opt->trace_path);
        p->trace = malloc(p->trace_cap * sizeof *p->trace);
        if (!p->trace_path || !p->trace) {
            prof_internal_errorf("profiler: out of memory for a trace buffer of "
                     "%zu events", p->trace_cap);
            free(p->trace_path);
            free(p->trace);
            free(p);
            return NULL;
        }
    }
    prof_internal_papi_ready(NULL);
    setup_counters(p, opt->counters);
    prof_calibration cal;
    if (prof_calibration_load(&cal) == 0) {
        p->peak_gflops = cal.peak_gflops;
        p->bw_gbs = cal.bw_gbs;
    }
    tls_active = p;
    p->cpu_clock_ns = sample_read_cost(p, 0);
    p->sample_cost_ns = sample_read_cost(p, 1);
    p->cpu_gap_ns = (uint64_t)(SAMPLE_GAP_COSTS * p->sample_cost_ns);
    p->cpu_bias_ns = cpu_read_bias();
    p->cpu_rng = 0x9e3779b97f4a7c15u; /* fixed: the same clocks give the same samples */
    calibrate_overhead(p);
    /* The summary's memory figures are per profiler (per run), not since process start. */
    prof_mem_reset_peak();
    p->alloc_base = prof_mem_total();
    p->t_origin = prof_now_ns();
    p->trace_on = p->trace && p->step >= p->trace_first && p->step <= p->trace_last;
    return p;
}

int prof_destroy(prof_t *p)
{
    if (!p) return 0;
    sde_publish(p);
    int rc = p->trace_path && !p->trace_written && prof_trace_write(p, p->trace_path) ? -1 : 0;
    if (p->eventset != PAPI_NULL) {
        long long v[NCTR];
        if (p->n_ctr) PAPI_stop(p->eventset, v);
        PAPI_cleanup_eventset(p->eventset);
        PAPI_destroy_eventset(&p->eventset);
    }
    /* Another live profiler becomes active again at its next prof_begin. */
    if (tls_active == p) tls_active = NULL;
    free(p->trace);
    free(p->trace_path);
    free(p);
    return rc;
}

int prof_register(prof_t *p, const char *name, const char *layer, prof_kind kind)
{
    if (!p || !name) return -1;
    if (p->n_scopes >= MAX_SCOPES) {
        prof_internal_errorf("profiler: more than %d scopes; '%s' not registered",
                 MAX_SCOPES, name);
        return -1;
    }
    scope_stat *s = &p->scopes[p->n_scopes];
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->layer, sizeof s->layer, "%s", layer ? layer : "");
    s->kind = kind;
    return p->n_scopes++;
}

/* CPU time of every thread of the process (OpenBLAS workers, the prefetch thread): perf's
 * per-thread counts would miss the workers, whose inherited counts arrive only at exit. */
static uint64_t proc_cpu_ns(void)
{
    if (fake_cpu) { /* a read uses fake_cpu_cost of CPU and takes the clock halfway through */
        uint64_t v = *fake_cpu + (uint64_t)fake_cpu_cost / 2;
        *fake_cpu += (uint64_t)fake_cpu_cost;
        return v;
    }
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The wall time of a scope until its next sampled call: uniform in [gap/2, 3 gap/2), mean
 * the gap. The jitter keeps a fixed gap from locking onto a pattern of the calls (every
 * 4th call of a scope whose odd calls differ would see only even ones). */
static uint64_t cpu_next_gap(prof_t *p)
{
    uint64_t x = p->cpu_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p->cpu_rng = x;
    return p->cpu_gap_ns ? p->cpu_gap_ns / 2 + x % p->cpu_gap_ns : 0;
}

void prof_begin(prof_t *p, int id)
{
    if (p->depth >= MAX_DEPTH || (unsigned)id > MAX_SCOPES) { p->lost_depth++; return; }
    tls_active = p;
    frame *f = &p->stack[p->depth++];
    f->id = id;
    f->traced = p->trace_on;
    f->child_ns = 0;
    f->peak_live = prof_mem_live();
    if (p->n_ctr) {
        memset(f->child_c, 0, sizeof f->child_c);
        PAPI_read(p->eventset, f->c0);
    }
    /* The process CPU clock is a syscall: a call reads it once the scope has run for a gap
     * (SAMPLE_GAP_COSTS) since its last sampled call; the first call always does. getrusage
     * (faults, csw: two more syscalls) is read on the same sampled calls. */
    scope_stat *s = &p->scopes[id];
    f->cpu0 = 0;
    if (s->cpu_since_ns >= s->cpu_next_ns) {
        /* a sampled call times its reads (one more clock read): the footer's overhead
         * then holds what they really took, load and all */
        uint64_t ta = prof_now_ns();
        if (p->ru_on) {
            f->ru_child[0] = f->ru_child[1] = 0;
            thread_rusage(f->ru0);
        }
        f->cpu0 = proc_cpu_ns();
        p->cpu_reads += f->cpu0 != 0;
        f->t0 = prof_now_ns();
        p->sample_ns += f->t0 - ta;
        return;
    }
    f->t0 = prof_now_ns(); /* last, so the profiler's own work stays outside the scope */
}

static void trace_counter(prof_t *p, uint64_t ts, size_t live)
{
    if (p->trace_n >= p->trace_cap) { p->trace_dropped++; return; }
    trace_ev *e = &p->trace[p->trace_n++];
    memset(e, 0, sizeof *e);
    e->ts = ts;
    e->flops = live;
    e->id = -1;
    e->step = p->step;
    p->trace_last_live = live;
}

int prof_counter_register(prof_t *p, const char *name, const char *series)
{
    if (!p || !name || !series) return -1;
    for (int k = 0; k < p->n_tracks; k++)
        if (!strcmp(p->track_name[k], name) && !strcmp(p->track_series[k], series)) return k;
    if (p->n_tracks >= PROF_TRACE_COUNTERS) return -1;
    snprintf(p->track_name[p->n_tracks], sizeof p->track_name[0], "%s", name);
    snprintf(p->track_series[p->n_tracks], sizeof p->track_series[0], "%s", series);
    return p->n_tracks++;
}

void prof_counter(prof_t *p, int counter, double value)
{
    if (!p || !p->trace_on || counter < 0 || counter >= p->n_tracks) return;
    if (p->trace_n >= p->trace_cap) { p->trace_dropped++; return; }
    trace_ev *e = &p->trace[p->trace_n++];
    memset(e, 0, sizeof *e);
    e->ts = prof_now_ns();
    e->id = -2 - counter;
    e->step = p->step;
    memcpy(&e->dur, &value, sizeof value);
}

static void trace_push(prof_t *p, const frame *f, uint64_t t1, uint64_t flops, uint64_t bytes)
{
    if (p->trace_n >= p->trace_cap) { p->trace_dropped++; return; }
    trace_ev *e = &p->trace[p->trace_n++];
    e->ts = f->t0;
    e->dur = t1 - f->t0;
    e->flops = flops;
    e->bytes = bytes;
    e->id = f->id;
    e->depth = p->depth;
    e->step = p->step;
    size_t live = prof_mem_live();
    if (live != p->trace_last_live || p->trace_n == 1) trace_counter(p, t1, live);
}

/* The CPU clock and getrusage reads that close a sampled call (right after its end time,
 * timed like prof_begin's). */
static void end_sampled(prof_t *p, const frame *f, scope_stat *s, frame *parent, uint64_t t1, uint64_t dur)
{
    uint64_t c1 = proc_cpu_ns(), d = c1 > f->cpu0 ? c1 - f->cpu0 : 0;
    if (p->ru_on) {
        long long r1[2];
        thread_rusage(r1);
        for (int k = 0; k < 2; k++) {
            long long dk = r1[k] - f->ru0[k];
            s->ru[k] += dk - f->ru_child[k];
            if (!s->calls) s->ru_first[k] = dk - f->ru_child[k];
            if (parent) parent->ru_child[k] += dk;
        }
    }
    p->sample_ns += prof_now_ns() - t1;
    s->cpu_ns += d > p->cpu_bias_ns ? d - p->cpu_bias_ns : 0;
    s->cpu_wall_ns += dur;
    s->cpu_since_ns = 0;
    s->cpu_next_ns = cpu_next_gap(p);
}

static void sde_publish(prof_t *p)
{
    if (!(p->sde_flops | p->sde_bytes)) return;
    atomic_fetch_add_explicit(&sde_flops, (long long)p->sde_flops, memory_order_relaxed);
    atomic_fetch_add_explicit(&sde_bytes, (long long)p->sde_bytes, memory_order_relaxed);
    p->sde_flops = p->sde_bytes = 0;
}

void prof_end(prof_t *p, int id, uint64_t flops, uint64_t bytes)
{
    uint64_t t1 = prof_now_ns(); /* first, for the same reason */
    if (p->lost_depth) { p->lost_depth--; return; }
    if (p->depth == 0 || p->stack[p->depth - 1].id != id) { p->unbalanced++; return; }
    frame *f = &p->stack[--p->depth];
    frame *parent = p->depth ? &p->stack[p->depth - 1] : NULL;
    scope_stat *s = &p->scopes[id];
    uint64_t dur = t1 - f->t0;
    if (f->cpu0) end_sampled(p, f, s, parent, t1, dur);
    s->cpu_since_ns += dur;
    if (p->n_ctr) {
        long long c1[NCTR];
        PAPI_read(p->eventset, c1);
        for (int i = 0; i < p->n_ctr; i++) {
            long long d = c1[i] - f->c0[i];
            s->ctr[i] += d - f->child_c[i];
            if (parent) parent->child_c[i] += d;
        }
    }
    uint64_t self = dur > f->child_ns ? dur - f->child_ns : 0;
    if (s->calls == 0) s->first_ns = dur;
    if (s->calls == 0 || dur < s->min_ns) s->min_ns = dur;
    if (dur > s->max_ns) s->max_ns = dur;
    s->calls++;
    s->total_ns += dur;
    s->self_ns += self;
    if (flops | bytes) {
        s->flops += flops;
        s->bytes += bytes;
        p->sde_flops += flops;
        p->sde_bytes += bytes;
    }
    /* The SDE sums are process-wide atomics (a locked add each): published once the
     * outermost scope closes (each step), not at every op. */
    if (!p->depth) sde_publish(p);
    if ((int64_t)f->peak_live > s->peak_mem) s->peak_mem = (int64_t)f->peak_live;
    if (parent) {
        parent->child_ns += dur;
        if (f->peak_live > parent->peak_live) parent->peak_live = f->peak_live;
    }
    if (f->traced) trace_push(p, f, t1, flops, bytes);
    p->events++;
}

void prof_internal_charge(size_t n, size_t live)
{
    prof_t *p = tls_active;
    if (!p) return;
    /* Allocations are rare (none inside a training step), so the trace can afford a counter
     * event at each one; scope ends alone would miss blocks freed inside the scope. */
    if (p->trace_on) trace_counter(p, prof_now_ns(), live);
    if (p->depth == 0) return;
    frame *f = &p->stack[p->depth - 1];
    p->scopes[f->id].self_mem += (int64_t)n;
    if (live > f->peak_live) f->peak_live = live;
}

void prof_charge(prof_t *p, int id, size_t bytes)
{
    if (!p || id < 0 || id >= p->n_scopes) return;
    p->scopes[id].self_mem += (int64_t)bytes;
}

void prof_step(prof_t *p, long step)
{
    p->step = step;
    p->trace_on = p->trace && step >= p->trace_first && step <= p->trace_last;
    /* One sample per step keeps the memory track continuous when nothing is allocated. */
    if (p->trace_on) trace_counter(p, prof_now_ns(), prof_mem_live());
}

static void row_from(const prof_t *p, prof_row *r, const scope_stat *s)
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
    int64_t *cols = &r->cycles;
    for (int c = 0; c < NCTR; c++) cols[c] = -1;
    for (int i = 0; i < p->n_ctr; i++) cols[p->slot_of[i]] = s->ctr[i];
    if (p->ru_on) {
        /* sampled like cpu: the first call as it was, the other sampled calls scaled to all
         * the others by wall time */
        uint64_t rest_wall = s->cpu_wall_ns > s->first_ns ? s->cpu_wall_ns - s->first_ns : 0;
        double k = rest_wall ? (double)(s->total_ns - s->first_ns) / (double)rest_wall : 0;
        r->faults = s->ru_first[0] + (int64_t)((double)(s->ru[0] - s->ru_first[0]) * k + 0.5);
        r->csw = s->ru_first[1] + (int64_t)((double)(s->ru[1] - s->ru_first[1]) * k + 0.5);
    }
    r->self_mem = s->self_mem;
    r->peak_mem = s->peak_mem;
    /* Scaled from the sampled calls to all of them; -1 when none was sampled. */
    r->cpu_ns = s->cpu_wall_ns ? (int64_t)((double)s->cpu_ns * (double)s->total_ns / (double)s->cpu_wall_ns)
                               : (s->calls ? -1 : 0);
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
    int64_t *a = &into->cycles;
    const int64_t *b = &r->cycles;
    for (int i = 0; i < NCTR; i++)
        if (a[i] >= 0 && b[i] >= 0) a[i] += b[i];
    into->self_mem += r->self_mem;
    if (r->peak_mem > into->peak_mem) into->peak_mem = r->peak_mem;
    if (into->cpu_ns >= 0 && r->cpu_ns >= 0) into->cpu_ns += r->cpu_ns;
}

int prof_rows_group(const prof_row *in, size_t n_in, prof_group by, prof_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    prof_row *out = calloc(n_in ? n_in : 1, sizeof *out);
    if (!out) {
        prof_internal_errorf("profiler: out of memory for %zu rows", n_in);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n_in; i++) {
        prof_row r = in[i];
        int merge = 1;
        switch (by) {
        case PROF_BY_SCOPE: merge = 0; break;
        case PROF_BY_OP:
            if (r.kind != PROF_OP) continue;
            r.layer[0] = 0;
            break;
        case PROF_BY_LAYER:
            if (r.kind != PROF_OP) continue;
            snprintf(r.name, sizeof r.name, "%s", in[i].layer[0] ? in[i].layer : "(no layer)");
            r.layer[0] = 0;
            break;
        case PROF_BY_PHASE:
            if (r.kind == PROF_OP) continue;
            r.layer[0] = 0;
            break;
        }
        size_t j = m;
        if (merge)
            for (j = 0; j < m; j++)
                if (!strcmp(out[j].name, r.name) && out[j].kind == r.kind) break;
        if (j < m) row_merge(&out[j], &r);
        else out[m++] = r;
    }
    prof_rows_sort(out, m, PROF_SORT_SELF);
    *rows = out;
    *n = m;
    return 0;
}

int prof_rows(prof_t *p, prof_group by, prof_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (!p) {
        prof_internal_errorf("profiler: no profiler (profiling is off)");
        return -1;
    }
    prof_row *all = calloc(p->n_scopes ? (size_t)p->n_scopes : 1, sizeof *all);
    if (!all) {
        prof_internal_errorf("profiler: out of memory for %d rows", p->n_scopes);
        return -1;
    }
    for (int i = 0; i < p->n_scopes; i++) row_from(p, &all[i], &p->scopes[i]);
    int rc = prof_rows_group(all, (size_t)p->n_scopes, by, rows, n);
    free(all);
    return rc;
}

void prof_summary_get(prof_t *p, prof_summary *s)
{
    memset(s, 0, sizeof *s);
    s->peak_bytes = prof_mem_peak();
    s->live_bytes = prof_mem_live();
    s->total_alloc_bytes = prof_mem_total();
    s->peak_rss = prof_peak_rss();
    if (!p) return;
    s->total_alloc_bytes -= p->alloc_base;
    sde_publish(p);
    for (int i = 0; i < p->n_scopes; i++) s->total_self_ns += p->scopes[i].self_ns;
    s->events = p->events;
    /* The calibrated pair cost has no sampled reads in it: add the time they took. */
    s->overhead_ns = (uint64_t)(p->ns_per_event * (double)p->events) + p->sample_ns;
    s->sample_ns = p->sample_ns;
    s->hw_counters = p->n_hw;
    s->sw_counters = p->n_sw;
    snprintf(s->hw_note, sizeof s->hw_note, "%s", p->hw_note);
    snprintf(s->sw_note, sizeof s->sw_note, "%s", p->sw_note);
    snprintf(s->counters_note, sizeof s->counters_note, "%s", p->counters_note);
    snprintf(s->counters_used, sizeof s->counters_used, "%s", p->counters_used);
    s->peak_gflops = p->peak_gflops;
    s->bw_gbs = p->bw_gbs;
    s->ns_per_event = p->ns_per_event;
    s->cpu_reads = p->cpu_reads;
    s->ns_per_cpu_read = p->cpu_clock_ns;
    s->unbalanced = p->unbalanced;
    if (!papi_ok) prof_internal_say(s->clock, sizeof s->clock, "clock_gettime(CLOCK_MONOTONIC): PAPI unavailable: %s", papi_init_error);
    else prof_internal_say(s->clock, sizeof s->clock, "%s", clock_note);
}

/* ---- Chrome trace ----------------------------------------------------------------- */

void prof_clock_sync(prof_t *p)
{
    if (p) p->t_sync = prof_now_ns();
}

/* The trace's own otherData members (after the generator). */
static void trace_other(prof_json *j, const void *ctx)
{
    const prof_t *p = ctx;
    char steps[48];
    snprintf(steps, sizeof steps, "%ld:%ld", p->trace_first, p->trace_last);
    prof_json_kstr(j, "steps", steps);
    prof_json_kint(j, "events", (long long)p->trace_n);
    prof_json_kint(j, "capacity", (long long)p->trace_cap);
    prof_json_kint(j, "dropped_events", (long long)p->trace_dropped);
    prof_json_kstr(j, "counters", p->counters_note);
    if (p->t_sync >= p->t_origin) {   /* prof_trace_merge aligns processes on it */
        prof_json_key(j, "sync_us");
        prof_json_numg(j, (double)(p->t_sync - p->t_origin) / 1e3, 15);
    }
    if (p->trace_dropped) {
        char note[160];
        snprintf(note, sizeof note, "trace buffer full: %zu events after the first %zu were dropped",
                 p->trace_dropped, p->trace_n);
        prof_json_kstr(j, "note", note);
    }
}

/* One event: a scope ("X"), the live bytes or a registered counter ("C"). */
static void trace_event(prof_json *j, const prof_t *p, const trace_ev *e)
{
    static const char *cat[] = { "op", "phase", "step" };
    double ts = e->ts < p->t_origin ? 0 : (double)(e->ts - p->t_origin) / 1e3;
    const scope_stat *s = e->id >= 0 ? &p->scopes[e->id] : NULL;
    prof_json_object(j);
    if (e->id == -1) {
        prof_json_kstr(j, "name", "memory");
    } else if (!s) {
        prof_json_kstr(j, "name", p->track_name[-2 - e->id]);
    } else {
        prof_json_kstr(j, "name", s->name);
        prof_json_kstr(j, "cat", cat[s->kind <= PROF_STEP ? s->kind : 0]);
    }
    prof_json_kstr(j, "ph", s ? "X" : "C");
    prof_json_key(j, "ts");
    prof_json_numg(j, ts, 15);
    if (s) {
        prof_json_key(j, "dur");
        prof_json_numg(j, (double)e->dur / 1e3, 15);
    }
    prof_json_kint(j, "pid", p->pid);
    prof_json_kint(j, "tid", p->tid);
    prof_json_key(j, "args");
    prof_json_object(j);
    if (e->id == -1) {
        prof_json_key(j, "live_bytes");
        prof_json_uint(j, (unsigned long long)e->flops);
    } else if (!s) {
        double v;
        memcpy(&v, &e->dur, sizeof v);
        prof_json_key(j, p->track_series[-2 - e->id]);
        prof_json_numg(j, v, 10);
    } else {
        prof_json_kint(j, "step", e->step);
        prof_json_key(j, "flops");
        prof_json_uint(j, (unsigned long long)e->flops);
        prof_json_key(j, "bytes");
        prof_json_uint(j, (unsigned long long)e->bytes);
        if (s->layer[0]) prof_json_kstr(j, "layer", s->layer);
    }
    prof_json_close(j);
    prof_json_close(j);
}

int prof_trace_write(prof_t *p, const char *path)
{
    if (!p || !p->trace) {
        prof_internal_errorf("profiler: no trace recorded: tracing is enabled by "
                 "prof_options.trace_path (--trace FILE)");
        return -1;
    }
    if (!path) path = p->trace_path;
    FILE *f = fopen(path, "w");
    if (!f) {
        prof_internal_errorf("profiler: cannot write trace '%s': %s", path, strerror(errno));
        return -1;
    }
    prof_json j;
    prof_json_begin(&j, f, 0);
    prof_internal_trace_head(&j, trace_other, p);
    /* The process is named "nnbench" (prof_trace_merge names each rank's), its thread. */
    static const char *meta[][2] = { { "process_name", "nnbench" }, { "thread_name", "training" } };
    for (int m = 0; m < 2; m++) {
        prof_json_object(&j);
        prof_json_kstr(&j, "name", meta[m][0]);
        prof_json_kstr(&j, "ph", "M");
        prof_json_kint(&j, "pid", p->pid);
        prof_json_kint(&j, "tid", p->tid);
        prof_json_key(&j, "args");
        prof_json_object(&j);
        prof_json_kstr(&j, "name", meta[m][1]);
        prof_json_close(&j);
        prof_json_close(&j);
    }
    for (size_t i = 0; i < p->trace_n; i++) trace_event(&j, p, &p->trace[i]);
    prof_json_close(&j);
    prof_json_close(&j);
    if (prof_json_end(&j) && !ferror(f)) {
        fclose(f);
        prof_internal_errorf("profiler: trace '%s': the JSON writer was misused (a bug)", path);
        return -1;
    }
    if (ferror(f) | fclose(f)) {
        prof_internal_errorf("profiler: writing trace '%s' failed: %s", path, strerror(errno));
        return -1;
    }
    p->trace_written = 1;
    return 0;
}

const char *prof_internal_clock_note(void)
{
    prof_internal_papi_ready(NULL);
    return papi_ok ? clock_note : "clock_gettime(CLOCK_MONOTONIC): PAPI unavailable";
}

void prof_internal_sample_every_call(prof_t *p)
{
    p->cpu_gap_ns = 0; /* cpu_next_gap is then 0: the next call after each is sampled */
    for (int i = 0; i < p->n_scopes; i++) p->scopes[i].cpu_next_ns = 0;
}

void prof_internal_fake_clocks(const volatile uint64_t *wall, volatile uint64_t *cpu, double cpu_read_ns)
{
    prof_internal_papi_ready(NULL); /* PAPI's set-up times the real clocks: before the fake */
    fake_cpu = cpu;
    fake_cpu_cost = cpu_read_ns;
    prof_internal_fake_wall(wall);
}
