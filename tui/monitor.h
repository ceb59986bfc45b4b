/* monitor.h — live views of a run in the formats other tools read: a Prometheus /metrics
 * endpoint (monitor.c, text exposition 0.0.4 over libmicrohttpd) and TensorBoard event files
 * (monitor_tb.c, TFRecord frames of hand-encoded Event protobufs), live and exported from the
 * store. Both plug into a run as an eng_sink (the runner tees it in); the engine learns
 * nothing of HTTP or protobuf. (Private to tui/; docs/monitoring.md.)
 *
 *   monitor *m; char err[512];
 *   if (monitor_open(cfg, rank, &m, err, sizeof err)) ...fail the variant before training...
 *   eng_sink s = monitor_sink(m);     // tee it with the others; m NULL: an empty sink
 *   ...train...; monitor_close(m);
 *
 * The training thread never waits for a scrape: sink callbacks update a private state and
 * publish it under pthread_mutex_trylock (a busy lock skips this publication; the next one
 * carries it); the HTTP thread copies the last published snapshot and formats from the copy.
 * Event files are encoded and written by a writer thread of monitor_tb's own: the training
 * thread only queues the values.
 */
#ifndef NNBENCH_TUI_MONITOR_H
#define NNBENCH_TUI_MONITOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../engine/engine.h"

typedef struct monitor monitor;

/* Starts what cfg's [monitor] asks for: the endpoint (bound before this returns, so a port
 * in use fails here) and, on rank 0, the event-file writer (its first record written, so an
 * unwritable directory fails here). *out is NULL when nothing is asked for. 0 ok; else
 * ENG_EINVAL (a malformed value) or ENG_EIO (cannot bind, cannot write) with the reason,
 * naming the key and value, in err. Free with monitor_close. */
int monitor_open(const eng_config *cfg, int rank, monitor **out, char *err, size_t cap);
/* The sink feeding m (m NULL: a sink with no callbacks). Valid until monitor_close. */
eng_sink monitor_sink(monitor *m);
/* The endpoint's bound port (0 without one), for tests. */
int monitor_port(const monitor *m);
/* Tests: hold (1) or release (0) the snapshot lock as a scrape copying it would, to show
 * that the sink goes on without waiting. */
void monitor_test_hold(monitor *m, int hold);
/* Stops the endpoint, closes the event file. NULL is fine. Returns 0, or -1 when the event
 * file could not be completed (err says why). On 0, err may still hold a note for a warning
 * (the event writer fell behind: monitor_tb_close). */
int monitor_close(monitor *m, char *err, size_t cap);

/* ---- the exposition text (monitor.c), for tests ----------------------------------------- */

/* s as a Prometheus label value (without the quotes) into b: backslash, double quote and
 * newline escaped, invalid UTF-8 bytes as U+FFFD. Returns b (cut to cap). */
const char *monitor_prom_label(char *b, size_t cap, const char *s);
/* The exposition text of m's last published snapshot into a malloc'd string (caller frees);
 * NULL when out of memory. */
char *monitor_prom_text(monitor *m);
/* Resolves "HOST:PORT[,PORT...]" for rank: host and this rank's port. 0 ok; ENG_EINVAL with
 * why into err. */
int monitor_addr_parse(const char *v, int rank, char *host, size_t hcap, int *port, char *err, size_t cap);

/* ---- TensorBoard event files (monitor_tb.c) --------------------------------------------- */

typedef struct monitor_tb monitor_tb;
/* Creates DIR (and parents) and DIR/SUB/events.out.tfevents.<unix time>.<host>.<pid>, writes the
 * file_version record and starts the writer thread. sub is made a safe directory name. NULL
 * with the reason in err.
 *
 * One thread (the producer) calls scalar, telemetry and flush: they only copy tag ids and
 * values into a bounded queue (MONITOR_TB_QUEUE items; no allocation but for a tag never seen
 * before; no system call but to wake the writer for a flush or a half-full queue, or to wait
 * on a full one); the writer thread encodes, frames, writes and flushes them in the order
 * they came. A full queue makes the producer wait (counted: monitor_tb_behind); nothing is
 * dropped. They return 0, or -1 with errno once the writer has failed (a full disk): nothing
 * more is queued then, and close says why. */
monitor_tb *monitor_tb_open(const char *dir, const char *sub, char *err, size_t cap);
#define MONITOR_TB_QUEUE 8192
/* Scalar summary value `tag` (made valid UTF-8 without control characters). */
int monitor_tb_scalar(monitor_tb *w, const char *tag, long step, double wall_time, double value);
/* One layer-telemetry record: every key as a scalar, and per kind (the part before '/':
 * grad_norm, update_ratio, ...) a histogram (HistogramProto: min, max, num, sum, sum of
 * squares, up to 30 buckets) of its values over the tensors/layers. */
int monitor_tb_telemetry(monitor_tb *w, long step, double wall_time, const char *const *keys,
                         const double *values, size_t n);
/* Queues a flush: what came before it reaches the file (TensorBoard reads it then). */
int monitor_tb_flush(monitor_tb *w);
/* Times the producer found the queue full and waited for the writer. */
long monitor_tb_behind(monitor_tb *w);
/* Writes everything queued, flushes, joins the writer and closes. 0, or -1 when a write failed
 * (err: "tensorboard: FILE: reason", the first failure). err gets "tensorboard: the writer fell
 * behind N times ..." when the producer had to wait, else "" (when 0 is returned). */
int monitor_tb_close(monitor_tb *w, char *err, size_t cap);
/* Tests: hold (1: returns once the writer is idle, not touching the file) or release (0) the
 * writer; items queue up meanwhile. Close releases it. */
void monitor_tb_test_hold(monitor_tb *w, int hold);
/* Tests: the event file's descriptor made /dev/full's (hold the writer first), so the next
 * flush fails with ENOSPC as on a full disk. 0, or -1 with errno. */
int monitor_tb_test_full(monitor_tb *w);
/* CRC32C (Castagnoli) of n bytes, and TFRecord's mask of it. */
uint32_t monitor_crc32c(const void *p, size_t n);
uint32_t monitor_crc_mask(uint32_t crc);

/* `nnbench export RUN --tensorboard DIR`: every stored metric of run id as scalars (wall time
 * = the run's start + wall_s), telemetry keys also as per-step histograms, into
 * DIR/run<ID>-<name>/. Reads only. 0 ok; -1 with why in err. */
struct store;
int monitor_tb_export(struct store *s, long long id, const char *dir, char *err, size_t cap);

#endif
