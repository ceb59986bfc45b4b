/* wb.h — private header of the ncurses workbench: the app state, the Panel "class"
 * (draw / key / resize), and what its files share: the frame (wb_app.c), drawing helpers
 * (wb_draw.c), one file per screen, the live worker (wb_live.c).
 */
#ifndef NNBENCH_WB_H
#define NNBENCH_WB_H

#include <pthread.h>
#include <stdint.h>

#include "../engine/engine.h"
#include "../store/store.h"
#include "chart.h"
#include "model_load.h"
#include "tui.h"

typedef struct wb_app wb_app;

/* Colour pairs: 1-6 the chart series (same order as tui_series_ansi), then UI roles. */
enum { WB_PAIR_TITLE = 10, WB_PAIR_STATUS, WB_PAIR_GOOD, WB_PAIR_BAD, WB_PAIR_WARN, WB_PAIR_RUNNING, WB_PAIR_DIM };
/* The Layers tab's heat map: WB_HEAT_LEVELS pairs from WB_PAIR_HEAT. */
#define WB_PAIR_HEAT 40
#define WB_HEAT_LEVELS 10

/* A screen. Panels live in a stack: the top one is drawn and gets the keys. */
typedef struct wb_panel {
    const char *title;
    unsigned screen;                       /* TUI_SCR_* for the key table */
    void (*draw)(wb_app *a);               /* draws rows 1 .. rows-2 */
    /* Returns 1 if the action/key was used. ch is the raw key for text fields. */
    int (*key)(wb_app *a, tui_action act, int ch);
    void (*resize)(wb_app *a);             /* may be NULL */
    void (*leave)(wb_app *a);              /* popped; may be NULL */
    void (*reload)(wb_app *a);             /* the database changed; may be NULL */
    /* Whether the status bar offers act now (1) or not (0: it would do nothing, or only
     * say why not); may be NULL: every key of the screen. */
    int (*offers)(wb_app *a, tui_action act);
    /* A left click at screen row y, column x (ncurses mouse); may be NULL. */
    void (*click)(wb_app *a, int y, int x);
    void *st;                              /* the screen's state: made when the screen is
                                              opened, freed when it is left */
} wb_panel;

/* A growable x/y series the worker appends to and the screen reads (under the mutex). */
typedef struct {
    double *step, *wall, *hybrid, *value;
    size_t n, cap;
} wb_series;

#define WB_MAX_COMPARE 16  /* runs on the Compare screen (6 marked, or a batch of up to 16:
                              samples/attention-scaling.ini makes 15) */

enum { WB_LIVE_TRAIN_LOSS, WB_LIVE_TEST_LOSS, WB_LIVE_TRAIN_ACC, WB_LIVE_TEST_ACC, WB_LIVE_N };

enum { WB_JOB_NONE, WB_JOB_RESUME, WB_JOB_QUANT };

/* The Run screen's Resume or Quantize job on the worker (wb_model.c); one at a time:
 * wb_live_running is checked before one starts. Written by the UI thread before the worker
 * starts; stage under the live mutex. */
typedef struct {
    int kind;
    long long run;
    char spec[32];
    long from_step;
    cli_qopts o;
    char stage[160];         /* what a quantization is doing now */
    int announced;           /* its result was shown as a message */
    unsigned gen;            /* finished jobs (the Int8 tab reloads after one) */
} wb_job;

/* The training run started from New run; everything below mu is shared with the worker. */
typedef struct {
    pthread_t th;
    int thread_started;      /* joinable (main thread only) */
    pthread_mutex_t mu;
    int running;             /* worker is training */
    int stop_requested;
    eng_run *run;            /* current run, for eng_run_request_stop */
    int variant_idx, n_variants;
    char label[192];         /* "spirals-mlp/sgd" */
    long step, total;
    int epoch;
    double loss, sps;
    double t_start;          /* monotonic s when the current variant began */
    long long run_id;        /* store id of the current/last run */
    long long batch[WB_MAX_COMPARE]; /* ids of the runs of the last start, in order */
    int n_batch;
    wb_series live[WB_LIVE_N];
    prof_row *ops;           /* op rows so far (profiled runs), sorted by self time */
    size_t n_ops;
    int finished;            /* worker done */
    int rc;                  /* last eng_run_train status */
    char result[512];        /* "finished: 1200 steps in 3.2s" or the error */
    /* Inputs (set before the thread starts, owned by it). */
    eng_experiment *ex;
    char db_path[512];
    wb_job job;              /* a Resume or Quantize (wb_model.c) */
} wb_live;

struct wb_app {
    store *db;
    char db_path[512];
    int utf8, color;
    int rows, cols, too_small;
    wb_panel *stack[8];
    int depth;
    int quit;
    char msg[256];
    double msg_until;
    int msg_live;            /* msg speaks of the worker's job: gone when the job ends */
    /* runs list (Runs screen) */
    store_run *all;
    size_t n_all;
    store_run *view;         /* filtered + sorted copy of all */
    size_t n_view;
    uint64_t token;
    double last_poll;
    int sel, top;
    long long marked[6];
    int n_marked;
    char filter[128];
    int sort_col, sort_desc;
    int sort_shown;          /* run columns the Runs table showed last (s cycles those) */
    /* The column titles of the table drawn last (row hdr_y, reset each frame; -1: none):
     * a click on one sorts by hdr_key[i] (a run column or a prof_sort; -1 not sortable). */
    int hdr_y, hdr_n;
    int hdr_x0[32], hdr_x1[32], hdr_key[32];
    /* shared chart toggles */
    int log_y, x_axis, smooth_idx, x_scale;
    /* Run / Compare */
    long long open_id;
    wb_live live;
    /* Opens the help on a screen's keys (set by cmd_tui.c: the frame names no screen). */
    void (*open_help)(wb_app *a, unsigned screen);
};

extern wb_panel wb_runs_panel, wb_run_panel, wb_compare_panel, wb_new_panel, wb_help_panel;

/* ---- wb_app.c: the frame (panel stack, main loop, dialogs, status bar) ----------------- */
void wb_push(wb_app *a, wb_panel *p);
void wb_pop(wb_app *a);
void wb_message(wb_app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A small list in a box over the screen (the sort picker): items[cur] marked, the cursor
 * on it; Enter or a click picks. Returns the index picked, -1 when cancelled (Esc). */
int wb_pick(wb_app *a, const char *title, const char *const *items, int n, int cur);
/* Records one column title of the table being drawn (wb_app.hdr_*), for wb_header_hit. */
void wb_header_add(wb_app *a, int y, int x, int w, int key);
/* The sort key of the column title at (y, x) of the last frame; -1 none. */
int wb_header_hit(const wb_app *a, int y, int x);
/* Sorting by key: a new key ascending, the current one reversed (a click, the picker). */
void wb_sort_by(int *cur, int *desc, int key);
/* Yes/no question in a box over the screen; 1 = yes. */
int wb_confirm(wb_app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Single-line input in a framed box above the footer row (the status bar keeps its hints);
 * 1 = accepted. on_change (may be NULL) sees each edit. */
int wb_prompt(wb_app *a, const char *label, char *buf, size_t n, void (*on_change)(wb_app *, const char *));
/* Runs the frame on the terminal until the user quits: the panel at the bottom of the stack
 * (pushed by the caller) is loaded through its reload and follows the database. 0, or 1
 * when the terminal cannot be set up (said on stderr). The worker is joined on return. */
int wb_app_run(wb_app *a, int no_color);

/* ---- wb_draw.c: drawing helpers the screens share ------------------------------------- */
double wb_now(void);                      /* monotonic seconds */
void wb_colours_init(wb_app *a);          /* the colour pairs (a->color: else monochrome) */
/* Text fitted to w cells at (y, x), with attributes. */
void wb_text(wb_app *a, int y, int x, int w, int right, const char *s);
void wb_fill(wb_app *a, int y, int x, int w);
/* Colour attribute of a series (chart colours) and of a run status. */
int wb_series_attr(wb_app *a, int series);
int wb_status_attr(wb_app *a, int status);
/* Draws a chart canvas at (y, x). */
void wb_draw_canvas(wb_app *a, int y, int x, const tui_canvas *c);
/* A chart of the series in w x h cells at (y, x) with the shared toggles (x axis, scale,
 * smoothing); "(chart: not enough room)" when it does not fit. */
void wb_chart_at(wb_app *a, int y, int x, int w, int h, const tui_series *s, size_t ns,
                 const char *title, const char *ylab, int log_y);
/* "x: step  y: linear  smoothing: off": the chart toggles in words. */
void wb_toggles_text(wb_app *a, char *b, size_t n);
/* A horizontal bar of `frac` of w cells (block characters or '#'). */
void wb_bar(wb_app *a, int y, int x, int w, double frac);
/* The op-table model (profiler/table.c) as a curses table at row y: header, then page rows
 * from scroll, its shown columns fitted to the screen (dropped from the right when narrow),
 * a bar of each row's self share after "self %". The Profile tab and New run draw with it. */
void wb_draw_op_table(wb_app *a, const prof_table *t, int y, int page, int scroll);
/* A scrolling list of text lines in rows y0..y1; *scroll is clamped. */
int wb_draw_lines(wb_app *a, char **lines, size_t n, int y0, int y1, int *scroll);
/* Scroll arithmetic shared by text views: applies a navigation action. 1 if it was one. */
int wb_scroll_key(tui_action act, int *scroll, int total, int page);
/* The chart toggles every chart screen shares (L, x, X, m); 1 if act was one. */
int wb_chart_toggle(wb_app *a, tui_action act);
/* Picks x values of a stored series for the x-axis toggle (0 step, 1 wall, 2 hybrid). */
const double *wb_pick_x(int axis, const double *step, const double *wall, const double *hybrid);
extern const double wb_smooth_levels[3];
extern const char *const wb_x_names[3];
/* The four curves of the Run screen and the first metrics of Compare. */
extern const char *const wb_metric_keys[4];

/* ---- the screens: wb_runs.c, wb_run.c, wb_compare.c, wb_newrun.c, wb_help.c ----------- */
/* Reloads the runs list from the store (keeps the selection on the same run id). */
void wb_reload_runs(wb_app *a);
void wb_open_run(wb_app *a, long long id);
void wb_open_compare_ids(wb_app *a, const long long *ids, int n);
void wb_open_new(wb_app *a);
void wb_new_free(wb_app *a);               /* the New run form (kept while the workbench runs) */
void wb_open_help(wb_app *a, unsigned screen); /* the keys of `screen` first */

/* ---- wb_layers.c (the Run screen's Layers tab) ----------------------------------- */
#define WB_LAYER_STATS 6
#define WB_LAYER_ROWS 128
/* The tab's state, part of the Run screen's (zeroed = empty, first statistic). */
typedef struct {
    int stat;                   /* statistic shown in the heat map */
    /* per statistic: the row names (tensor "dense1.W" or layer "dense1") and their series */
    int n[WB_LAYER_STATS];
    char name[WB_LAYER_STATS][WB_LAYER_ROWS][40];
    store_series s[WB_LAYER_STATS][WB_LAYER_ROWS];
} wb_layers_view;
void wb_layers_load(wb_app *a, wb_layers_view *v, long long run); /* the run's layer telemetry series */
void wb_layers_clear(wb_layers_view *v);       /* frees the series; keeps the statistic */
/* Draws the tab in rows y0..y1; *scroll is the first row of its table (clamped). */
void wb_layers_draw(wb_app *a, wb_layers_view *v, int y0, int y1, int *scroll);
int wb_layers_rows(const wb_layers_view *v);   /* rows of its table, for scrolling */
int wb_layers_key(wb_app *a, wb_layers_view *v, tui_action act); /* v: the next statistic */
/* Layer telemetry keys of the runs, union, sorted; free with store_strings_free. */
size_t wb_layers_metric_keys(store *db, const long long *runs, int n, char ***out);

/* ---- wb_live.c: the live worker -------------------------------------------------------- */
int wb_live_running(wb_app *a);
void wb_live_stop(wb_app *a);             /* asks the worker to stop */
void wb_live_join(wb_app *a);             /* waits for it (at quit) */
void wb_live_free(wb_app *a);
/* One line for the title bar while a run is going ("" otherwise). */
void wb_live_summary(wb_app *a, char *buf, size_t n);
/* The sink that feeds the live view (progress, curves, op rows) from the worker. */
eng_sink wb_live_sink(wb_live *l);
/* Starts fn(&a->live) as the worker (one at a time; the caller checked wb_live_running),
 * the live state reset and labelled; fn ends by setting result, rc, running = 0 and
 * finished = 1 under the mutex. -1 if the thread cannot start. */
int wb_live_launch(wb_app *a, void *(*fn)(void *), const char *label, int n_variants);
/* Forgets the previous run's status line, curves and op table. */
void wb_live_clear(wb_live *l);
/* The worker of New run: runs l->ex's variants through runner_run into the store (frees ex). */
void *wb_live_train(void *l);

/* ---- wb_model.c (the Run screen's Resume and Quantize, and its Int8 tab) --------------- */
/* R, Q and K on the Run screen of run r; 1 if act was one of them. */
int wb_model_key(wb_app *a, tui_action act, const store_run *r);
/* The Int8 tab's text, part of the Run screen's state (zeroed = not loaded: run ids start
 * at 1); reloaded when the run changes, a job ends, or every 2 s. */
typedef struct {
    long long run;
    unsigned gen;
    double at;
    char **l;
    size_t n;
} wb_quant_view;
/* The Int8 tab in rows y0..y1: the run's quantizations, fp32 vs int8 side by side. */
void wb_quant_draw(wb_app *a, wb_quant_view *qv, const store_run *r, int y0, int y1, int *scroll);
int wb_quant_rows(const wb_quant_view *qv);    /* rows of its text, for scrolling */
void wb_quant_free(wb_quant_view *qv);         /* the tab's text */
/* Shows the result of a Resume or Quantize that ended (the Run screen calls it as it draws). */
void wb_model_tick(wb_app *a);
/* Why Resume is not offered for r (a sentence), or NULL when it is. */
const char *wb_resume_refusal(wb_app *a, const store_run *r, char *buf, size_t cap);
/* Why Quantize is not offered for r, or NULL when it is. */
const char *wb_quant_refusal(wb_app *a, const store_run *r, char *buf, size_t cap);
/* K for run r: stops the workbench's own job, else r when another nnbench process on this
 * host runs it (SIGINT to its pid: it stops at the next step, as Ctrl-C would, with its
 * stop checkpoint), else says why it cannot. r may be NULL (nothing selected). */
void wb_stop_key(wb_app *a, const store_run *r);
/* Whether K can stop something: the workbench's job or r (NULL: no run) running on this host. */
int wb_stop_offered(wb_app *a, const store_run *r);

#endif
