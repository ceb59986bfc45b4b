/* common.c — the engine's error message, run-status names and the sink tee. */
#include "engine.h"
#include "data/data_internal.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static _Thread_local char err_msg[1024];

const char *eng_error(void) { return err_msg; }

int eng_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char raw[sizeof err_msg];
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Messages quote values from files and the command line: never raw escape sequences,
     * nor a newline that would break the one line a message is. */
    prof_text_visible(err_msg, sizeof err_msg, raw);
    return code;
}

int eng_open_input(const char *path, long long max_bytes, const char *what, long long *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { eng_fail(ENG_EIO, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st)) {
        eng_fail(ENG_EIO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                     : S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket" : NULL;
    if (!S_ISREG(st.st_mode)) {
        eng_fail(ENG_EINVAL, "%s: is %s, not a regular file: give the %s as a file", path,
                 kind ? kind : "not a regular file", what);
        close(fd);
        return -1;
    }
    if ((long long)st.st_size > max_bytes) {
        eng_fail(ENG_EINVAL, "%s: %lld bytes is over the %lld MiB cap for %ss; is this the right file?",
                 path, (long long)st.st_size, max_bytes >> 20, what);
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (size) *size = (long long)st.st_size;
    return fd;
}

static volatile sig_atomic_t builds_stopped;

void eng_stop_builds(void) { builds_stopped = 1; }
int eng_builds_stopped(void) { return builds_stopped != 0; }

int eng_build_stop_error(const char *what)
{
    return eng_fail(ENG_ESTOPPED, "%s: stopped while building (stop requested); nothing was trained", what);
}

const char *eng_run_status_name(eng_run_status s)
{
    static const char *const names[] = { "running", "finished", "failed", "diverged",
                                         "interrupted", "crashed" };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

/* The tee forwards each event to every sink in order; the first failure stops it. */
#define TEE_EACH(tee, cb, ...)                                                         \
    for (size_t i_ = 0; i_ < (tee)->n; i_++) {                                       \
        const eng_sink *s_ = (tee)->sinks[i_];                                        \
        if (s_ && s_->cb) { int rc_ = s_->cb(s_->ud, __VA_ARGS__); if (rc_) return rc_; } \
    }
#define TEE_EACH_VOID(tee, cb, ...)                                                    \
    for (size_t i_ = 0; i_ < (tee)->n; i_++) {                                       \
        const eng_sink *s_ = (tee)->sinks[i_];                                        \
        if (s_ && s_->cb) s_->cb(s_->ud, __VA_ARGS__);                                \
    }

static int tee_begin(void *ud, const eng_run_info *info) { TEE_EACH((eng_sink_tee *)ud, run_begin, info); return 0; }
static int tee_metric(void *ud, const eng_metric *m) { TEE_EACH((eng_sink_tee *)ud, metric, m); return 0; }
static int tee_ops(void *ud, const prof_row *rows, size_t n, const prof_summary *sum) { TEE_EACH((eng_sink_tee *)ud, op_stats, rows, n, sum); return 0; }
static int tee_solver(void *ud, const struct qm_solve_event *ev) { TEE_EACH((eng_sink_tee *)ud, solver, ev); return 0; }
static int tee_telemetry(void *ud, const eng_telemetry *t) { TEE_EACH((eng_sink_tee *)ud, telemetry, t); return 0; }
static void tee_progress(void *ud, long step, long total, int epoch, double loss, double sps) { TEE_EACH_VOID((eng_sink_tee *)ud, progress, step, total, epoch, loss, sps); }
static int tee_checkpoint(void *ud, const eng_checkpoint *ck) { TEE_EACH((eng_sink_tee *)ud, checkpoint, ck); return 0; }
static void tee_end(void *ud, const eng_run_result *res) { TEE_EACH_VOID((eng_sink_tee *)ud, run_end, res); }
static void tee_ops_live(void *ud, const prof_row *rows, size_t n) { TEE_EACH_VOID((eng_sink_tee *)ud, ops_live, rows, n); }

eng_sink eng_sink_tee_make(eng_sink_tee *tee)
{
    /* The tee's live op rows come as often as its most eager sink asks. */
    double every = 0;
    for (size_t i = 0; i < tee->n; i++) {
        const eng_sink *s = tee->sinks[i];
        if (s && s->ops_live && s->ops_live_every_s > 0 && (every == 0 || s->ops_live_every_s < every))
            every = s->ops_live_every_s;
    }
    return (eng_sink){ .ud = tee, .run_begin = tee_begin, .metric = tee_metric,
                       .op_stats = tee_ops, .solver = tee_solver, .telemetry = tee_telemetry,
                       .progress = tee_progress, .run_end = tee_end,
                       .ops_live = every > 0 ? tee_ops_live : NULL, .ops_live_every_s = every,
                       .checkpoint = tee_checkpoint };
}

int eng_cache_dir(char *buf, size_t cap)
{
    const char *d = getenv("NNBENCH_CACHE_DIR");
    if (d && d[0]) {
        int n = snprintf(buf, cap, "%s", d);
        return n < 0 || (size_t)n >= cap ? eng_fail(ENG_EINVAL, "NNBENCH_CACHE_DIR: path too long") : ENG_OK;
    }
    if (prof_calibration_path(buf, cap))
        return eng_fail(ENG_EINVAL, "no cache directory: set NNBENCH_CACHE_DIR, XDG_CACHE_HOME or HOME");
    char *slash = strrchr(buf, '/');
    if (slash) *slash = '\0';
    return ENG_OK;
}

int eng_mkdirs(const char *dir)
{
    char p[512];
    if ((size_t)snprintf(p, sizeof p, "%s", dir) >= sizeof p) { errno = ENAMETOOLONG; return -1; }
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* The choices file `name` in the cache directory: "KEY<TAB>VALUE" lines, the last one of a
 * key wins, appended with one write (O_APPEND: concurrent processes do not interleave). */
static int choice_path(const char *name, char *buf, size_t cap)
{
    char dir[512];
    if (eng_cache_dir(dir, sizeof dir)) return -1;
    return (size_t)snprintf(buf, cap, "%s/%s", dir, name) < cap ? 0 : -1;
}

int eng_choice_each(const char *name, const char *prefix, void (*fn)(void *ud, const char *rest, const char *val),
                    void *ud)
{
    char path[600], line[1024];
    if (choice_path(name, path, sizeof path)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t pl = strlen(prefix);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab || strncmp(line, prefix, pl) || (size_t)(tab - line) < pl) continue;
        line[strcspn(line, "\n")] = 0;
        *tab = 0;
        fn(ud, line + pl, tab + 1);
        n++;
    }
    fclose(f);
    return n;
}

typedef struct { char *val; size_t cap; int found; } choice_one;

static void choice_exact(void *ud, const char *rest, const char *val)
{
    choice_one *o = ud;
    if (rest[0]) return; /* a longer key that begins with this one */
    snprintf(o->val, o->cap, "%s", val);
    o->found = 1;
}

int eng_choice_get(const char *name, const char *key, char *val, size_t cap)
{
    choice_one o = { val, cap, 0 };
    eng_choice_each(name, key, choice_exact, &o);
    return o.found;
}

void eng_choice_put(const char *name, const char *key, const char *val)
{
    char path[600], dir[512], line[1024];
    if (choice_path(name, path, sizeof path) || eng_cache_dir(dir, sizeof dir)) return;
    eng_mkdirs(dir);
    int n = snprintf(line, sizeof line, "%s\t%s\n", key, val);
    if (n < 0 || (size_t)n >= sizeof line) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (write(fd, line, (size_t)n) != n) { /* a lost line is measured again next time */ }
    close(fd);
}
