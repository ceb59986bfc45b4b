/* monitor_tb.c — TensorBoard event files: TFRecord frames (length, masked CRC32C of it,
 * data, masked CRC32C of it) around tensorflow.Event protobufs encoded by hand (a handful of
 * fields: Event.wall_time/step/file_version/summary, Summary.Value.tag/simple_value/histo,
 * HistogramProto). Written live by the monitor sink and by `nnbench export --tensorboard`.
 * The caller's thread only copies tag ids and values into a bounded queue; a writer thread
 * of its own encodes, frames, writes and flushes (docs/monitoring.md, "How the live writer
 * works"). */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../store/store.h"

enum { TB_SCALAR, TB_TELEM, TB_HISTO, TB_FLUSH };

/* One queued value: a scalar, a member of a telemetry record (TB_TELEM: a scalar, and a value
 * of its kind's histogram; TB_HISTO: the histogram value only), or a flush. */
typedef struct {
    unsigned char kind;            /* TB_* */
    unsigned char last;            /* ends a TB_TELEM / TB_HISTO record: its histograms follow */
    uint32_t tag;                  /* index into tags */
    long step;
    double wall, value;
} tb_item;

#define TB_BATCH 256               /* items the writer takes out per lock */

struct monitor_tb {
    FILE *f;
    char path[1024];
    pthread_t thread;
    pthread_mutex_t mu;            /* guards everything down to tags_cap */
    pthread_cond_t work;           /* to the writer: items, a release, close */
    pthread_cond_t room;           /* to a producer waiting on a full queue */
    pthread_cond_t parked;         /* to a test holding the writer: it is idle now */
    tb_item *items;                /* ring of MONITOR_TB_QUEUE: [head, head + count) */
    size_t head, count;
    int closing, hold, idle, waiting;
    long behind;                   /* puts that found the queue full and waited */
    int failed, err_no;
    char err[1200];                /* the first failure: "PATH: reason" */
    /* Tags by id: only the producer adds (under mu) and looks up (its own array); the writer
     * reads the strings' addresses under mu (they never move: the array does). */
    char **tags;
    size_t ntags, tags_cap, tag_next;
    /* The writer thread's own. */
    tb_item batch[TB_BATCH];
    const char *batch_tag[TB_BATCH];
    const char **gkeys;            /* the telemetry record being received */
    double *gvals;
    size_t gn, gcap;
};

/* ---- CRC32C ----------------------------------------------------------------------------- */

uint32_t monitor_crc32c(const void *p, size_t n)
{
    static uint32_t table[256];
    static int ready; /* benign race: every thread computes the same table */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *b = p;
    uint32_t c = 0xFFFFFFFFu;
    while (n--) c = table[(c ^ *b++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t monitor_crc_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- protobuf encoding -------------------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int oom;
} pb;

static void pb_raw(pb *b, const void *d, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2 + 64;
        unsigned char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v)
{
    unsigned char t[10];
    size_t n = 0;
    do { t[n++] = (unsigned char)((v & 0x7F) | (v > 0x7F ? 0x80 : 0)); v >>= 7; } while (v);
    pb_raw(b, t, n);
}

static void pb_le(pb *b, uint64_t v, int bytes)
{
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    pb_raw(b, t, (size_t)bytes);
}

static void pb_double(pb *b, int field, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    pb_varint(b, (uint64_t)field << 3 | 1);
    pb_le(b, u, 8);
}

static void pb_float(pb *b, int field, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    pb_varint(b, (uint64_t)field << 3 | 5);
    pb_le(b, u, 4);
}

static void pb_bytes(pb *b, int field, const void *d, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, d, n);
}

/* A tag as a valid proto3 string: invalid UTF-8 bytes become U+FFFD, control characters '_'. */
static void pb_tag(pb *b, int field, const char *s)
{
    pb t = { 0 };
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = prof_utf8_decode(s + i, n - i, NULL);
        if (!l) { pb_raw(&t, "\xef\xbf\xbd", 3); i++; continue; }
        if (l == 1 && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)) pb_raw(&t, "_", 1);
        else pb_raw(&t, s + i, l);
        i += l;
    }
    pb_bytes(b, field, t.p ? (const void *)t.p : "", t.n);
    b->oom |= t.oom;
    free(t.p);
}

/* ---- records (the writer thread; at open, the caller's) ------------------------------- */

/* 0, or -1 with errno. */
static int write_record(monitor_tb *w, const pb *data)
{
    if (data->oom) { errno = ENOMEM; return -1; }
    unsigned char head[12];
    uint64_t len = data->n;
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)(len >> (8 * i));
    uint32_t c = monitor_crc_mask(monitor_crc32c(head, 8));
    for (int i = 0; i < 4; i++) head[8 + i] = (unsigned char)(c >> (8 * i));
    uint32_t d = monitor_crc_mask(monitor_crc32c(data->p, data->n));
    unsigned char tail[4] = { (unsigned char)d, (unsigned char)(d >> 8), (unsigned char)(d >> 16), (unsigned char)(d >> 24) };
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(data->p, 1, data->n, w->f) != data->n || fwrite(tail, 1, 4, w->f) != 4) {
        return -1;
    }
    return 0;
}

/* Event{wall_time=1, step=2, summary=5{value=1{...}}} around one encoded Summary.Value. */
static int write_value(monitor_tb *w, long step, double wall_time, const pb *value)
{
    pb summary = { 0 }, ev = { 0 };
    pb_bytes(&summary, 1, value->p, value->n);
    summary.oom |= value->oom;
    pb_double(&ev, 1, wall_time);
    pb_varint(&ev, 2 << 3);
    pb_varint(&ev, (uint64_t)step);
    pb_bytes(&ev, 5, summary.p, summary.n);
    ev.oom |= summary.oom;
    int rc = write_record(w, &ev);
    free(summary.p);
    free(ev.p);
    return rc;
}

static int write_scalar(monitor_tb *w, const char *tag, long step, double wall_time, double value)
{
    pb v = { 0 };
    pb_tag(&v, 1, tag);
    pb_float(&v, 2, (float)value);
    int rc = write_value(w, step, wall_time, &v);
    free(v.p);
    return rc;
}

#define TB_BUCKETS 30

/* A HistogramProto (min, max, num, sum, sum of squares, buckets) of the finite v[0..n). */
static int write_histogram(monitor_tb *w, const char *tag, long step, double wall_time, const double *v, size_t n)
{
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0, num = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue; /* a diverged layer: its scalar shows it */
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
        sum += v[i];
        sq += v[i] * v[i];
        num++;
    }
    if (!num) return 0;
    /* Equal-width buckets over [lo, hi]; bucket k holds (limit[k-1], limit[k]] as in TF. */
    int k = num < TB_BUCKETS ? (int)num : TB_BUCKETS;
    if (hi == lo) k = 1;
    double limit[TB_BUCKETS], count[TB_BUCKETS] = { 0 };
    for (int i = 0; i < k; i++) limit[i] = i == k - 1 ? hi : lo + (hi - lo) * (i + 1) / k;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        int j = 0;
        while (j < k - 1 && v[i] > limit[j]) j++;
        count[j]++;
    }
    pb h = { 0 }, lim = { 0 }, cnt = { 0 }, val = { 0 };
    pb_double(&h, 1, lo);
    pb_double(&h, 2, hi);
    pb_double(&h, 3, num);
    pb_double(&h, 4, sum);
    pb_double(&h, 5, sq);
    for (int i = 0; i < k; i++) {
        uint64_t a, c;
        memcpy(&a, &limit[i], 8);
        memcpy(&c, &count[i], 8);
        pb_le(&lim, a, 8);
        pb_le(&cnt, c, 8);
    }
    pb_bytes(&h, 6, lim.p, lim.n); /* packed repeated double */
    pb_bytes(&h, 7, cnt.p, cnt.n);
    pb_tag(&val, 1, tag);
    pb_bytes(&val, 5, h.p, h.n);
    val.oom |= h.oom | lim.oom | cnt.oom;
    int rc = write_value(w, step, wall_time, &val);
    free(h.p), free(lim.p), free(cnt.p), free(val.p);
    return rc;
}

/* The telemetry kind of a key ("grad_norm/dense1.W" -> 9 = strlen("grad_norm")); 0 if none. */
static size_t kind_len(const char *key)
{
    const char *s = strchr(key, '/');
    return s ? (size_t)(s - key) : 0;
}

/* Per kind, a histogram of its values over the tensors (keys of one record, any order). */
static int telemetry_histograms(monitor_tb *w, long step, double wall_time, const char *const *keys,
                                const double *values, size_t n)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) { errno = ENOMEM; return -1; }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t kl = kind_len(keys[i]), m = 0, seen = 0;
        if (!kl) continue;
        for (size_t j = 0; j < i; j++) seen |= kind_len(keys[j]) == kl && !strncmp(keys[j], keys[i], kl);
        if (seen) continue; /* that kind's histogram is written */
        for (size_t j = i; j < n; j++)
            if (kind_len(keys[j]) == kl && !strncmp(keys[j], keys[i], kl)) v[m++] = values[j];
        char tag[80];
        snprintf(tag, sizeof tag, "%.*s", (int)(kl < 60 ? kl : 60), keys[i]);
        rc = write_histogram(w, tag, step, wall_time, v, m);
    }
    free(v);
    return rc;
}

/* ---- the queue --------------------------------------------------------------------------- */

/* Keeps the first failure (error number e) for the producer's next put and for close. The
 * caller holds mu. */
static void fail_locked(monitor_tb *w, int e)
{
    if (w->failed) return;
    w->failed = 1;
    w->err_no = e ? e : EIO;
    snprintf(w->err, sizeof w->err, "%s: %s", w->path, strerror(w->err_no));
    pthread_cond_broadcast(&w->room); /* a producer waiting for room hears it now */
}

static void fail(monitor_tb *w, int e)
{
    pthread_mutex_lock(&w->mu);
    fail_locked(w, e);
    pthread_mutex_unlock(&w->mu);
}

/* Writes one item; 0, or -1 with errno. A telemetry record's values are gathered until its
 * last one, then its histograms written: the records come out as monitor_tb_telemetry's
 * synchronous predecessor wrote them, scalars first. */
static int write_item(monitor_tb *w, const tb_item *it, const char *tag)
{
    if (it->kind == TB_FLUSH) return fflush(w->f) ? -1 : 0;
    if (it->kind != TB_HISTO && write_scalar(w, tag, it->step, it->wall, it->value)) return -1;
    if (it->kind == TB_SCALAR) return 0;
    if (w->gn == w->gcap) {
        size_t cap = w->gcap * 2 + 64;
        const char **k = realloc(w->gkeys, cap * sizeof *k);
        if (k) w->gkeys = k;
        double *v = realloc(w->gvals, cap * sizeof *v);
        if (v) w->gvals = v;
        if (!k || !v) { errno = ENOMEM; return -1; }
        w->gcap = cap;
    }
    w->gkeys[w->gn] = tag;
    w->gvals[w->gn++] = it->value;
    if (!it->last) return 0;
    size_t n = w->gn;
    w->gn = 0;
    return telemetry_histograms(w, it->step, it->wall, w->gkeys, w->gvals, n);
}

/* The writer thread: takes up to TB_BATCH items under mu, writes them without it. After a
 * failure it still empties the queue (so no producer waits for ever) but writes nothing. */
static void *writer_main(void *arg)
{
    monitor_tb *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        /* Re-checked under mu before every sleep: a put, a release or a close that came
         * while the last batch was being written is seen here, never slept through. */
        while (!w->closing && (w->hold || !w->count)) {
            w->idle = 1;
            pthread_cond_broadcast(&w->parked);
            pthread_cond_wait(&w->work, &w->mu);
            w->idle = 0;
        }
        if (!w->count) break; /* closing, and everything is written */
        size_t n = w->count < TB_BATCH ? w->count : TB_BATCH;
        for (size_t i = 0; i < n; i++) {
            w->batch[i] = w->items[(w->head + i) % MONITOR_TB_QUEUE];
            w->batch_tag[i] = w->batch[i].kind == TB_FLUSH ? NULL : w->tags[w->batch[i].tag];
        }
        w->head = (w->head + n) % MONITOR_TB_QUEUE;
        w->count -= n;
        if (w->waiting) pthread_cond_broadcast(&w->room);
        int failed = w->failed;
        pthread_mutex_unlock(&w->mu);
        for (size_t i = 0; i < n && !failed; i++)
            if (write_item(w, &w->batch[i], w->batch_tag[i])) {
                fail(w, errno);
                failed = 1;
            }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Waits (the caller holds mu) until the queue has room, counting the first wait of a put as
 * the writer falling behind. 0, or -1 with errno when the writer has failed. */
static int wait_room(monitor_tb *w, int *waited)
{
    while (w->count == MONITOR_TB_QUEUE && !w->failed) {
        if (!*waited) w->behind++;
        *waited = 1;
        w->waiting++;
        pthread_cond_signal(&w->work); /* it may sleep on a queue it was not woken for */
        pthread_cond_wait(&w->room, &w->mu);
        w->waiting--;
    }
    if (w->failed) { errno = w->err_no; return -1; }
    return 0;
}

/* Appends an item (the caller holds mu and made room). The writer is woken only for a flush
 * or a half-full queue, not per item: a put is then no system call. */
static void push(monitor_tb *w, const tb_item *it)
{
    w->items[(w->head + w->count++) % MONITOR_TB_QUEUE] = *it;
    if (w->idle && (it->kind == TB_FLUSH || w->count >= MONITOR_TB_QUEUE / 2)) pthread_cond_signal(&w->work);
}

/* The id of tag, added if new (the caller holds mu). A run logs the same keys in the same
 * order at every step, so the last hit and its successor are tried first. 0, or -1 (ENOMEM). */
static int tag_id(monitor_tb *w, const char *tag, uint32_t *id)
{
    for (size_t k = 0; k < w->ntags; k++) {
        size_t i = (w->tag_next + k) % w->ntags;
        if (!strcmp(w->tags[i], tag)) {
            *id = (uint32_t)(w->tag_next = i);
            return 0;
        }
    }
    if (w->ntags >= UINT32_MAX) { errno = ENOMEM; return -1; }
    if (w->ntags == w->tags_cap) {
        size_t cap = w->tags_cap * 2 + 64;
        char **t = realloc(w->tags, cap * sizeof *t);
        if (!t) { errno = ENOMEM; return -1; }
        w->tags = t;
        w->tags_cap = cap;
    }
    if (!(w->tags[w->ntags] = strdup(tag))) { errno = ENOMEM; return -1; }
    *id = (uint32_t)(w->tag_next = w->ntags++);
    return 0;
}

/* Queues n values of one kind at one step (a telemetry record: `last` on its final one). */
static int put(monitor_tb *w, int kind, long step, double wall_time, const char *const *tags,
               const double *values, size_t n)
{
    int rc = 0, waited = 0;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < n && !rc; i++) {
        tb_item it = { .kind = (unsigned char)kind, .last = i + 1 == n, .step = step, .wall = wall_time, .value = values[i] };
        rc = wait_room(w, &waited);
        if (!rc && (rc = tag_id(w, tags[i], &it.tag))) fail_locked(w, errno);
        if (!rc) push(w, &it);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int monitor_tb_scalar(monitor_tb *w, const char *tag, long step, double wall_time, double value)
{
    return put(w, TB_SCALAR, step, wall_time, &tag, &value, 1);
}

int monitor_tb_telemetry(monitor_tb *w, long step, double wall_time, const char *const *keys,
                         const double *values, size_t n)
{
    return put(w, TB_TELEM, step, wall_time, keys, values, n);
}

int monitor_tb_flush(monitor_tb *w)
{
    int waited = 0;
    pthread_mutex_lock(&w->mu);
    int rc = wait_room(w, &waited);
    if (!rc) push(w, &(tb_item){ .kind = TB_FLUSH });
    pthread_mutex_unlock(&w->mu);
    return rc;
}

long monitor_tb_behind(monitor_tb *w)
{
    pthread_mutex_lock(&w->mu);
    long n = w->behind;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void monitor_tb_test_hold(monitor_tb *w, int hold)
{
    pthread_mutex_lock(&w->mu);
    w->hold = hold;
    if (!hold) pthread_cond_signal(&w->work);
    while (hold && !w->idle) pthread_cond_wait(&w->parked, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

int monitor_tb_test_full(monitor_tb *w)
{
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    int rc = fd < 0 || dup2(fd, fileno(w->f)) < 0 ? -1 : 0;
    if (fd >= 0) close(fd);
    return rc;
}

/* ---- files -------------------------------------------------------------------------------- */

/* mkdir -p; 0 or -1 with errno. */
static int make_dirs(const char *dir)
{
    char p[1024];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) { errno = ENAMETOOLONG; return -1; }
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) && errno != EEXIST) return -1;
        if (!c) break;
        *s = c;
    }
    struct stat st;
    if (stat(p, &st)) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    return 0;
}

static void release(monitor_tb *w)
{
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->room);
    pthread_cond_destroy(&w->parked);
    for (size_t i = 0; i < w->ntags; i++) free(w->tags[i]);
    free(w->tags);
    free(w->items);
    free(w->gkeys);
    free(w->gvals);
    free(w);
}

/* Writes and flushes the file_version record on the caller's thread, so that a file that
 * cannot be written fails here, then starts the writer. 0, or -1 with why in err. */
static int start(monitor_tb *w, char *err, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pb ev = { 0 };
    pb_double(&ev, 1, ts.tv_sec + ts.tv_nsec * 1e-9);
    pb_bytes(&ev, 3, "brain.Event:2", 13); /* file_version: readers check it first */
    int rc = write_record(w, &ev) || fflush(w->f) ? -1 : 0;
    free(ev.p);
    if (rc) {
        snprintf(err, cap, "tensorboard: %s: %s", w->path, strerror(errno));
        return -1;
    }
    if (!(w->items = malloc(MONITOR_TB_QUEUE * sizeof *w->items))) {
        snprintf(err, cap, "tensorboard: out of memory");
        return -1;
    }
    if ((rc = prof_thread_create(&w->thread, NULL, writer_main, w))) {
        snprintf(err, cap, "tensorboard: cannot start the writer thread: %s", strerror(rc));
        return -1;
    }
    return 0;
}

monitor_tb *monitor_tb_open(const char *dir, const char *sub, char *err, size_t cap)
{
    /* A run name is a directory name here: only [A-Za-z0-9._-], never "." or ".." */
    char safe[160];
    size_t k = 0;
    for (const char *s = sub; *s && k + 1 < sizeof safe; s++)
        safe[k++] = (strchr("._-", *s) || (*s >= '0' && *s <= '9') || ((*s | 32) >= 'a' && (*s | 32) <= 'z')) ? *s : '_';
    safe[k] = 0;
    if (!k) snprintf(safe, sizeof safe, "run");
    if (safe[0] == '.') safe[0] = '_';
    char host[64] = "localhost", path[1024];
    gethostname(host, sizeof host - 1);
    for (char *h = host; *h; h++) if (*h == '/') *h = '_';
    snprintf(path, sizeof path, "%s/%s", dir, safe);
    monitor_tb *w = calloc(1, sizeof *w);
    if (!w) { snprintf(err, cap, "tensorboard: out of memory"); return NULL; }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->room, NULL);
    pthread_cond_init(&w->parked, NULL);
    /* Two writers of one process in one second (a resumed run, a bench's repetitions) get
     * the same name: the later ones take a suffix .1, .2, ..., which sorts after it, so
     * TensorBoard reads the files in the order they were written. */
    long now = (long)time(NULL), pid = (long)getpid();
    int fd = -1;
    if (!make_dirs(path))
        for (int t = 0; t < 1000 && fd < 0; t++) {
            int n = t ? snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%ld.%s.%ld.%d", path, now, host, pid, t)
                      : snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%ld.%s.%ld", path, now, host, pid);
            if (n >= (int)sizeof w->path) { errno = ENAMETOOLONG; break; }
            fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST) break;
        }
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        snprintf(err, cap, "tensorboard: cannot write event files under '%s': %s (choose a writable directory)", path, strerror(errno));
        if (fd >= 0) close(fd);
        release(w);
        return NULL;
    }
    if (start(w, err, cap)) {
        fclose(w->f);
        unlink(w->path);
        release(w);
        return NULL;
    }
    return w;
}

int monitor_tb_close(monitor_tb *w, char *err, size_t cap)
{
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    w->closing = 1;
    w->hold = 0;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL); /* it writes everything queued first */
    if (fflush(w->f)) fail(w, errno);
    if (fclose(w->f)) fail(w, errno);
    int rc = w->failed ? -1 : 0;
    char behind[160] = "";
    if (w->behind)
        snprintf(behind, sizeof behind, "the writer fell behind %ld times (the training thread waited for room in its queue)", w->behind);
    if (err && cap) {
        if (rc) snprintf(err, cap, "tensorboard: %s%s%s", w->err, behind[0] ? "; " : "", behind);
        else if (behind[0]) snprintf(err, cap, "tensorboard: %s", behind);
        else err[0] = 0;
    }
    release(w);
    return rc;
}

/* ---- export from the store ----------------------------------------------------------------- */

typedef struct {
    long step;
    double wall;
    const char *key;               /* into the keys list */
    double value;
} tb_point;

static int point_cmp(const void *a, const void *b)
{
    const tb_point *x = a, *y = b;
    return (x->step > y->step) - (x->step < y->step);
}

/* The telemetry keys' points grouped by step, each group queued as one record: histograms.
 * A failure is the writer's: its close says why. */
static void export_histograms(monitor_tb *w, tb_point *pt, size_t n, double t0)
{
    qsort(pt, n, sizeof *pt, point_cmp);
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    double *vals = malloc((n ? n : 1) * sizeof *vals);
    int rc = keys && vals ? 0 : -1;
    if (rc) fail(w, ENOMEM);
    for (size_t i = 0; i < n && !rc;) {
        size_t j = i;
        for (; j < n && pt[j].step == pt[i].step; j++) {
            keys[j - i] = pt[j].key;
            vals[j - i] = pt[j].value;
        }
        rc = put(w, TB_HISTO, pt[i].step, t0 + pt[i].wall, keys, vals, j - i);
        i = j;
    }
    free(keys);
    free(vals);
}

/* The telemetry kinds (eng_telemetry's keys): only these become histograms, as live. */
static int is_telemetry(const char *key)
{
    static const char *const kinds[] = { "grad_norm/", "grad_mean/", "grad_std/", "grad_max/", "update_ratio/", "zero_frac/" };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strncmp(key, kinds[i], strlen(kinds[i]))) return 1;
    return 0;
}

/* Every point of every key as a scalar; the telemetry keys' points kept in *pt. 0; 1 when
 * the writer failed (its close says why); -1 with why in err when the store did. */
static int export_scalars(store *s, long long id, monitor_tb *w, char **keys, size_t nk, double t0,
                          tb_point **pt, size_t *npt, char *err, size_t cap)
{
    size_t cap_pt = 0;
    int rc = 0;
    for (size_t k = 0; k < nk && !rc; k++) {
        store_series sr;
        if (store_metric_get(s, id, keys[k], &sr)) { snprintf(err, cap, "%s", store_error()); return -1; }
        for (size_t i = 0; i < sr.n && !rc; i++) {
            if (monitor_tb_scalar(w, keys[k], sr.step[i], t0 + sr.wall[i], sr.value[i])) rc = 1;
            if (rc || !is_telemetry(keys[k])) continue;
            if (*npt == cap_pt) {
                tb_point *q = realloc(*pt, (cap_pt = cap_pt * 2 + 256) * sizeof *q);
                if (!q) { fail(w, ENOMEM); rc = 1; break; }
                *pt = q;
            }
            (*pt)[(*npt)++] = (tb_point){ sr.step[i], sr.wall[i], keys[k], sr.value[i] };
        }
        store_series_free(&sr);
    }
    return rc;
}

int monitor_tb_export(store *s, long long id, const char *dir, char *err, size_t cap)
{
    store_run r;
    if (store_run_get(s, id, &r)) { snprintf(err, cap, "%s", store_error()); return -1; }
    char sub[300];
    snprintf(sub, sizeof sub, "run%lld-%s%s%s", id, r.name, r.variant[0] ? "-" : "", r.variant);
    double t0 = isfinite(r.started) ? r.started : 0;
    store_run_clear(&r);
    char **keys = NULL;
    size_t nk = 0, npt = 0;
    if (store_metric_keys(s, id, &keys, &nk)) { snprintf(err, cap, "%s", store_error()); return -1; }
    monitor_tb *w = monitor_tb_open(dir, sub, err, cap);
    tb_point *pt = NULL;
    int rc = w ? export_scalars(s, id, w, keys, nk, t0, &pt, &npt, err, cap) : -1;
    if (!rc) export_histograms(w, pt, npt, t0);
    char path[sizeof w->path] = "";
    if (w) snprintf(path, sizeof path, "%s", w->path);
    /* A writer's failure (rc 1, or one in the histograms) is told by its close. */
    if (w && monitor_tb_close(w, rc < 0 ? NULL : err, cap)) rc = -1;
    if (rc && path[0]) unlink(path); /* no half file that looks like a whole run */
    free(pt);
    store_strings_free(keys, nk);
    return rc ? -1 : 0;
}
