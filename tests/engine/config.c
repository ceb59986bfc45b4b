/* config.c — tests of experiment files: good files and the structs they give, variants,
 * --set, every error form with its exact message, and that the key docs cover the parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../engine/engine.h"

static char path[256];

/* Writes text to a fresh temporary .ini file (path), replacing the previous one. */
static const char *write_ini(const char *text)
{
    if (path[0]) unlink(path);
    snprintf(path, sizeof path, "/tmp/nnbench-cfg-XXXXXX.ini");
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static int teardown(void **state)
{
    (void)state;
    if (path[0]) unlink(path);
    path[0] = '\0';
    return 0;
}

static const eng_kv *kv_find(const eng_config *c, const char *key)
{
    for (size_t i = 0; i < c->n_kv; i++)
        if (!strcmp(c->kv[i].key, key)) return &c->kv[i];
    return NULL;
}

/* Loads text and expects failure with exactly "FILE" + suffix (suffix starts with ':'). */
static void expect_error(const char *text, const char *const *sets, size_t n_sets, int code, const char *suffix)
{
    const char *p = write_ini(text);
    eng_experiment *ex = (eng_experiment *)0x1;
    int rc = eng_experiment_load(p, sets, n_sets, &ex);
    assert_int_equal(rc, code);
    assert_null(ex);
    char want[1024];
    if (suffix[0] == ':' ) snprintf(want, sizeof want, "%s%s", p, suffix);
    else snprintf(want, sizeof want, "%s", suffix);
    assert_string_equal(eng_error(), want);
}

static const char *GOOD =
    "; a comment\n"
    "[experiment]\n"
    "name = demo\n"
    "seed = 123456789012\n"
    "target_loss = 0.05\n"
    "\n"
    "[data]\n"
    "source = blobs\n"
    "n = 500\n"
    "classes = 3\n"
    "features = 4\n"
    "noise = 0.5   ; inline comment\n"
    "\n"
    "[model]\n"
    "layers = dense:16:tanh, dense:8:relu,\n"
    "   dense:3\n"
    "loss = softmax_xent\n"
    "\n"
    "[train]\n"
    "optimizer = momentum\n"
    "lr = 0.05\n"
    "nesterov = yes\n"
    "batch = 0\n"
    "epochs = 7\n"
    "schedule = cosine\n"
    "min_lr = 0.001\n"
    "\n"
    "[newton]\n"
    "curvature = gauss-newton\n"
    "[quantum]\n"
    "policy = threshold\n"
    "kappa_max = 500\n"
    "[profile]\n"
    "enabled = true\n"
    "counters = PAPI_TOT_CYC,PAPI_TOT_INS\n"
    "\n"
    "[variant base]\n"
    "[variant fast]\n"
    "train.lr = 0.5\n"
    "data.n = 900\n"
    "[variant adam]\n"
    "train.optimizer = adam\n";

static void test_good_file(void **state)
{
    (void)state;
    const char *p = write_ini(GOOD);
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_non_null(ex);
    assert_string_equal(ex->text, GOOD);
    assert_string_equal(ex->path, p);
    assert_int_equal(ex->n_variants, 3);
    const eng_config *c = &ex->variants[0];
    assert_string_equal(c->variant, "base");
    assert_string_equal(c->name, "demo");
    assert_true(c->seed == 123456789012ull);
    assert_true(c->target_loss == 0.05);
    assert_int_equal(c->data.source, ENG_DATA_BLOBS);
    assert_int_equal(c->data.n, 500);
    assert_int_equal(c->data.classes, 3);
    assert_int_equal(c->data.features, 4);
    assert_true(c->data.noise == 0.5);
    assert_true(c->data.test_fraction == 0.2);  /* default */
    assert_int_equal(c->data.normalize, ENG_NORM_NONE); /* auto, not idx */
    assert_int_equal(c->data.shuffle, 1);
    assert_int_equal(c->model.n_layers, 3);
    assert_int_equal(c->model.layers[0].kind, ENG_LAYER_DENSE);
    assert_int_equal(c->model.layers[0].units, 16);
    assert_int_equal(c->model.layers[0].act, ENG_ACT_TANH);
    assert_int_equal(c->model.layers[1].act, ENG_ACT_RELU);
    assert_int_equal(c->model.layers[2].units, 3);
    assert_int_equal(c->model.layers[2].act, ENG_ACT_NONE);
    assert_int_equal(c->model.loss, ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(c->train.optimizer, ENG_OPT_MOMENTUM);
    assert_true(c->train.lr == 0.05);
    assert_true(c->train.momentum == 0.9);
    assert_int_equal(c->train.nesterov, 1);
    assert_int_equal(c->train.batch, 0);
    assert_int_equal(c->train.epochs, 7);
    assert_int_equal(c->train.schedule, ENG_SCHED_COSINE);
    assert_int_equal(c->train.log_every, 1);
    assert_int_equal(c->newton.curvature, ENG_CURV_GAUSS_NEWTON);
    assert_true(c->newton.normalization_epsilon == 5e-3);
    assert_true(c->newton.damping == 1e-10);
    assert_true(c->newton.prune_ratio == 1);
    assert_true(c->newton.clip == 100);
    assert_int_equal(c->quantum.policy, ENG_QPOLICY_THRESHOLD);
    assert_true(c->quantum.kappa_max == 500);
    assert_true(c->quantum.precision == 1e-2);
    assert_int_equal(c->profile.enabled, 1);
    assert_string_equal(c->profile.counters, "PAPI_TOT_CYC,PAPI_TOT_INS");

    /* kv: every key, sorted, with where it came from */
    size_t n_docs = 0;
    while (eng_key_docs[n_docs].key) n_docs++;
    assert_int_equal(c->n_kv, n_docs);
    for (size_t i = 1; i < c->n_kv; i++) assert_true(strcmp(c->kv[i - 1].key, c->kv[i].key) < 0);
    const eng_kv *kv = kv_find(c, "train.lr");
    assert_non_null(kv);
    assert_string_equal(kv->value, "0.05");
    assert_int_equal(kv->line, 21);
    kv = kv_find(c, "model.layers");
    assert_string_equal(kv->value, "dense:16:tanh, dense:8:relu, dense:3");
    assert_int_equal(kv->line, 15);
    kv = kv_find(c, "train.beta2");
    assert_string_equal(kv->value, "0.999");
    assert_int_equal(kv->line, 0);
    kv = kv_find(c, "data.normalize");
    assert_string_equal(kv->value, "none");
    {   /* auto is z-score for CSV features (scale for idx, none for generated data) */
        const char *csv[] = { "data.source=csv", "data.path=x.csv" };
        eng_experiment *ex2 = NULL;
        assert_int_equal(eng_experiment_load(p, csv, 2, &ex2), ENG_OK);
        assert_int_equal(ex2->variants[0].data.normalize, ENG_NORM_STANDARD);
        assert_string_equal(kv_find(&ex2->variants[0], "data.normalize")->value, "standard");
        eng_experiment_free(ex2);
    }

    /* variants: base + overrides, in file order */
    const eng_config *f = &ex->variants[1];
    assert_string_equal(f->variant, "fast");
    assert_true(f->train.lr == 0.5);
    assert_int_equal(f->data.n, 900);
    assert_int_equal(f->train.optimizer, ENG_OPT_MOMENTUM);
    assert_int_equal(kv_find(f, "train.lr")->line, 39);
    const eng_config *a = &ex->variants[2];
    assert_string_equal(a->variant, "adam");
    assert_int_equal(a->train.optimizer, ENG_OPT_ADAM);
    assert_true(a->train.lr == 0.05);
    assert_int_equal(a->data.n, 500);
    eng_experiment_free(ex);
}

static void test_no_variants_and_defaults(void **state)
{
    (void)state;
    const char *p = write_ini("[model]\nlayers = dense:2\n");
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_int_equal(ex->n_variants, 1);
    const eng_config *c = &ex->variants[0];
    assert_string_equal(c->variant, "");
    /* name defaults to the file's base name without .ini */
    char base[256];
    const char *b = strrchr(p, '/') + 1;
    snprintf(base, sizeof base, "%.*s", (int)(strlen(b) - 4), b);
    assert_string_equal(c->name, base);
    assert_int_equal(c->data.source, ENG_DATA_SPIRALS);
    assert_int_equal(c->data.n, 2000); /* 0 = 2000 for synthetic data */
    assert_string_equal(kv_find(c, "data.n")->value, "2000");
    assert_true(c->seed == 42);
    assert_int_equal(c->train.optimizer, ENG_OPT_SGD);
    assert_int_equal(c->train.batch, 32);
    eng_experiment_free(ex);
}

static void test_set_overrides(void **state)
{
    (void)state;
    const char *p = write_ini(GOOD);
    const char *sets[] = { "train.lr=0.25", "experiment.seed = 9", "model.layers=dense:4:gelu,dense:3" };
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, sets, 3, &ex), ENG_OK);
    for (size_t v = 0; v < ex->n_variants; v++) {
        const eng_config *c = &ex->variants[v];
        /* --set beats the variant's own train.lr = 0.5 */
        assert_true(c->train.lr == 0.25);
        assert_true(c->seed == 9);
        assert_int_equal(c->model.n_layers, 2);
        assert_int_equal(c->model.layers[0].act, ENG_ACT_GELU);
        assert_int_equal(kv_find(c, "train.lr")->line, -1);
        assert_string_equal(kv_find(c, "train.lr")->value, "0.25");
    }
    eng_experiment_free(ex);
}

static void test_set_errors(void **state)
{
    (void)state;
    const char *bad_val[] = { "train.lr=fast" };
    expect_error(GOOD, bad_val, 1, ENG_EINVAL, "--set train.lr=fast: key 'lr': expected a positive number, got 'fast'");
    const char *bad_key[] = { "train.lrr=1" };
    expect_error(GOOD, bad_key, 1, ENG_EINVAL, "--set train.lrr=1: unknown key 'train.lrr' (did you mean 'train.lr'?)");
    const char *no_eq[] = { "train.lr" };
    expect_error(GOOD, no_eq, 1, ENG_EINVAL, "--set train.lr: expected section.key=value (e.g. --set train.lr=0.1)");
    /* a cross-key problem caused by --set names the --set */
    const char *idx[] = { "data.source=idx" };
    expect_error(GOOD, idx, 1, ENG_EINVAL,
                 "--set data.source=idx: key 'source': idx needs data.path (the images file, or a directory with the four IDX files, "
                 "e.g. /usr/share/datasets/fashion-mnist) (variant base)");
}

static void test_error_messages(void **state)
{
    (void)state;
    expect_error("[model]\nlayers = dense:2\n[train]\nlr = fast\n", NULL, 0, ENG_EINVAL,
                 ":4: key 'lr': expected a positive number, got 'fast'");
    expect_error("[model]\nlayers = dense:2\n[train]\nlr = -1\n", NULL, 0, ENG_EINVAL,
                 ":4: key 'lr': expected a positive number, got '-1'");
    expect_error("[train]\nepochs = 1.5\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'epochs': expected a non-negative integer, got '1.5'");
    expect_error("[train]\nlrr = 0.1\n", NULL, 0, ENG_EINVAL,
                 ":2: unknown key 'lrr' in [train] (did you mean 'lr'?)");
    expect_error("[data]\noptimizer = sgd\n", NULL, 0, ENG_EINVAL,
                 ":2: unknown key 'optimizer' in [data] (it belongs in [train])");
    expect_error("\n[trian]\nlr = 1\n", NULL, 0, ENG_EINVAL,
                 ":2: unknown section [trian] (did you mean [train]?)");
    expect_error("[zzzzzz]\n", NULL, 0, ENG_EINVAL,
                 ":1: unknown section [zzzzzz] (sections: experiment, data, model, train, newton, quantum, profile, graph, dist, monitor, variant NAME)");
    expect_error("[train]\noptimizer = lbfgs\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'optimizer': expected one of sgd, momentum, adam, adamw, newton, got 'lbfgs'");
    expect_error("[data]\nshuffle = maybe\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'shuffle': expected true or false, got 'maybe'");
    expect_error("[model]\nlayers = dense:16:tanh, conv:8\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': layer 2: expected conv:FILTERS:KERNEL[:ACT] with FILTERS, KERNEL >= 1 and ACT one of "
                 "relu, tanh, sigmoid, gelu, none, got 'conv:8'");
    expect_error("[model]\nlayers = dense:16:swish, dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': layer 1: expected dense:UNITS[:ACT] (or sage:UNITS[:ACT]) with UNITS >= 1 and ACT one of "
                 "relu, tanh, sigmoid, gelu, none, maxkK (1 <= K <= UNITS), got 'dense:16:swish'");
    expect_error("[model]\nlayers = lstm:4, dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': layer 1: expected dense:UNITS[:ACT], conv:FILTERS:KERNEL[:ACT], bn[:ACT], res(LAYERS)[:ACT], pool, flatten, or a sequence layer (embed:D, posenc, layernorm, encoder, meanpool), got 'lstm:4'");
    expect_error("[model]\nlayers = dense:8, pool, dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': layer 2: 'pool' cannot follow a dense or flatten layer (the data is flat by then)");
    expect_error("[model]\nlayers = ,\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': expected a comma-separated layer list (e.g. dense:16:tanh, dense:2), got ','");
    expect_error("[model]\nlayers = conv:4:3, flatten\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': the last layer must be dense (it gives the outputs), got 'flatten'");
    expect_error("[data]\ntest_fraction = 1.5\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'test_fraction': expected a number in [0, 0.95], got '1.5'");
    expect_error("[train]\nlr = 0.1\nlr = 0.2\n", NULL, 0, ENG_EINVAL,
                 ":3: key 'lr' is set twice in [train] (first at line 2)");
    expect_error("lr = 0.1\n", NULL, 0, ENG_EINVAL,
                 ":1: key 'lr' is outside any section; put it under [experiment], [data], [model], [train], ...");
    expect_error("[train]\nthis line has no equals sign\n", NULL, 0, ENG_EINVAL,
                 ":2: expected 'key = value' or '[section]', got 'this line has no equals sign'");
    expect_error("[model]\nlayers = dense:2\n[variant a]\nlr = 1\n", NULL, 0, ENG_EINVAL,
                 ":4: key 'lr' in [variant a] must name its section, as section.key (did you mean 'train.lr'?)");
    expect_error("[model]\nlayers = dense:2\n[variant a]\ntrain.optimiser = adam\n", NULL, 0, ENG_EINVAL,
                 ":4: unknown key 'train.optimiser' in [variant a] (did you mean 'train.optimizer'?)");
    expect_error("[model]\nlayers = dense:2\n[variant a]\ntrain.lr = x\n", NULL, 0, ENG_EINVAL,
                 ":4: key 'lr': expected a positive number, got 'x'");
    expect_error("[model]\nlayers = dense:2\n[variant a]\n[variant a]\n", NULL, 0, ENG_EINVAL,
                 ":4: variant 'a' is defined twice (first at line 3)");
    expect_error("[model]\nlayers = dense:2\n[variant]\n", NULL, 0, ENG_EINVAL,
                 ":3: [variant] needs a name: [variant NAME]");
    expect_error("[train]\nlr = 0.1\n", NULL, 0, ENG_EINVAL,
                 ": [model] layers is required (e.g. layers = dense:16:tanh, dense:2)");
    /* cross-key checks, at the line of the key to change */
    expect_error("[data]\nsource = idx\n[model]\nlayers = dense:10\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'source': idx needs data.path (the images file, or a directory with the four IDX files, "
                 "e.g. /usr/share/datasets/fashion-mnist)");
    expect_error("[data]\nsource = sine\n[model]\nlayers = dense:1\n", NULL, 0, ENG_EINVAL,
                 ": key 'loss': softmax_xent needs a classification dataset, but data.source = sine gives real-valued "
                 "targets; use loss = mse");
    expect_error("[model]\nlayers = dense:2\n[train]\nschedule = step\n", NULL, 0, ENG_EINVAL,
                 ":4: key 'schedule': step needs train.step_size > 0 (steps between decays)");
    expect_error("[model]\nlayers = dense:2\n[train]\nlr = 0.1\nmin_lr = 0.5\n[variant x]\n", NULL, 0, ENG_EINVAL,
                 ":5: key 'min_lr': must not exceed train.lr (0.1), got 0.5 (variant x)");
    /* a line too long to be anything sensible */
    char *big = malloc(6000);
    strcpy(big, "[profile]\ncounters = ");
    memset(big + strlen(big), 'x', 5000);
    big[21 + 5000] = '\0';
    strcat(big, "\n");
    expect_error(big, NULL, 0, ENG_EINVAL, ":2: line is longer than 4000 characters");
    free(big);
}

/* conv:F:K[:ACT][:pad=P][:stride=S][:algo=A]: the options in any order, the defaults, and
 * each bad value named with its bound. */
static void test_conv_options(void **state)
{
    (void)state;
    const char *p = write_ini("[model]\nlayers = conv:8:3:relu:pad=1:stride=2, conv:4:5:stride=3:pad=4:tanh:algo=fft, "
                              "conv:2:3:algo=im2col, flatten, dense:2\n");
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    const eng_layer_spec *L = ex->variants[0].model.layers;
    assert_int_equal(L[0].kernel, 3);
    assert_int_equal(L[0].pad, 1);
    assert_int_equal(L[0].stride, 2);
    assert_int_equal(L[0].act, ENG_ACT_RELU);
    assert_int_equal(L[1].pad, 4);
    assert_int_equal(L[1].stride, 3);
    assert_int_equal(L[1].act, ENG_ACT_TANH);
    assert_int_equal(L[2].pad, 0);
    assert_int_equal(L[2].stride, 1);
    assert_int_equal(L[2].act, ENG_ACT_NONE);
    const unsigned char *la = ex->variants[0].model.layer_algo;
    assert_int_equal(la[0], 0);                       /* model.conv_algo */
    assert_int_equal(la[1], 1 + ENG_CONV_FFT);
    assert_int_equal(la[2], 1 + ENG_CONV_IM2COL);
    eng_experiment_free(ex);
    /* a --set list replaces the file's, algos included */
    const char *relist[] = { "model.layers=conv:8:3, conv:4:3, flatten, dense:2" };
    assert_int_equal(eng_experiment_load(p, relist, 1, &ex), ENG_OK);
    assert_int_equal(ex->variants[0].model.layer_algo[1], 0);
    eng_experiment_free(ex);

    static const char *const pad_msg = "pad must be an integer in 0..2 (less than the kernel: a wider border only adds "
                                       "outputs that see nothing but zeros)";
    static const struct { const char *layer, *why; } bad[] = {
        { "conv:8:3:pad=3", NULL },
        { "conv:8:3:pad=-1", NULL },
        { "conv:8:3:relu:stride=0", "stride must be an integer in 1..64" },
        { "conv:8:3:pad=1:pad=1", "pad is given twice" },
        { "conv:8:3:algo=winograd8", "algo must be one of auto, im2col, direct, winograd, winograd4, fft, onednn" },
        { "conv:8:3:algo=fft:algo=fft", "algo is given twice" },
        { "conv:8:3:relu:tanh", "expected conv:FILTERS:KERNEL[:ACT] with FILTERS, KERNEL >= 1 and ACT one of relu, tanh, "
                                "sigmoid, gelu, none" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char ini[128], msg[400];
        snprintf(ini, sizeof ini, "[model]\nlayers = %s, flatten, dense:2\n", bad[i].layer);
        snprintf(msg, sizeof msg, ":2: key 'layers': layer 1: %s, got '%s'", bad[i].why ? bad[i].why : pad_msg,
                 bad[i].layer);
        expect_error(ini, NULL, 0, ENG_EINVAL, msg);
    }
    p = write_ini("[model]\nlayers = conv:8:3, avgpool, avgpool:3, avgpool:3:1, gap, dense:2\n");
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    L = ex->variants[0].model.layers;
    assert_true(L[1].kind == ENG_LAYER_AVGPOOL && L[1].kernel == 2 && L[1].stride == 2);
    assert_true(L[2].kind == ENG_LAYER_AVGPOOL && L[2].kernel == 3 && L[2].stride == 3);
    assert_true(L[3].kind == ENG_LAYER_AVGPOOL && L[3].kernel == 3 && L[3].stride == 1);
    assert_int_equal(L[4].kind, ENG_LAYER_GAP);
    eng_experiment_free(ex);
    expect_error("[model]\nlayers = conv:8:3, avgpool:0, dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': layer 2: expected avgpool, avgpool:K or avgpool:K:S (KxK mean, stride S, default "
                 "S = K; 1 <= K, S <= 64), got 'avgpool:0'");
    expect_error("[model]\nlayers = dense:8, gap, dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': layer 2: 'gap' cannot follow a dense or flatten layer (the data is flat by then)");
    expect_error("[model]\nlayers = conv:8:3, gap\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'layers': the last layer must be dense (it gives the outputs), got 'gap'");
    /* model.conv_algo: auto by default, the two algorithms by name, anything else named */
    p = write_ini("[model]\nlayers = conv:8:3, flatten, dense:2\n");
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_int_equal(ex->variants[0].model.conv_algo, ENG_CONV_AUTO);
    eng_experiment_free(ex);
    const char *algo[] = { "model.conv_algo=direct" };
    assert_int_equal(eng_experiment_load(p, algo, 1, &ex), ENG_OK);
    assert_int_equal(ex->variants[0].model.conv_algo, ENG_CONV_DIRECT);
    eng_experiment_free(ex);
    static const struct { const char *set; eng_conv_algo want; } fast[] = {
        { "model.conv_algo=winograd", ENG_CONV_WINOGRAD }, { "model.conv_algo=winograd4", ENG_CONV_WINOGRAD4 },
        { "model.conv_algo=fft", ENG_CONV_FFT }, { "model.conv_algo=onednn", ENG_CONV_ONEDNN },
    };
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++) {
        assert_int_equal(eng_experiment_load(p, &fast[i].set, 1, &ex), ENG_OK);
        assert_int_equal(ex->variants[0].model.conv_algo, fast[i].want);
        eng_experiment_free(ex);
    }
    expect_error("[model]\nlayers = conv:8:3, flatten, dense:2\nconv_algo = winograd8\n", NULL, 0, ENG_EINVAL,
                 ":3: key 'conv_algo': expected one of auto, im2col, direct, winograd, winograd4, fft, onednn, got 'winograd8'");
    const char *set[] = { "model.layers=conv:8:3:stride=x, flatten, dense:2" };
    expect_error("[model]\nlayers = dense:2\n", set, 1, ENG_EINVAL,
                 "--set model.layers=conv:8:3:stride=x, flatten, dense:2: key 'layers': layer 1: stride must be an "
                 "integer in 1..64, got 'conv:8:3:stride=x'");
}

static void test_missing_file(void **state)
{
    (void)state;
    eng_experiment *ex = (eng_experiment *)0x1;
    assert_int_equal(eng_experiment_load("/nonexistent/x.ini", NULL, 0, &ex), ENG_EIO);
    assert_null(ex);
    assert_string_equal(eng_error(), "/nonexistent/x.ini: cannot open: No such file or directory");
}

static void test_select(void **state)
{
    (void)state;
    const char *p = write_ini(GOOD);
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_int_equal(eng_experiment_select(ex, "nope"), ENG_EINVAL);
    char want[512];
    snprintf(want, sizeof want, "%s: no variant 'nope' (variants: base, fast, adam)", p);
    assert_string_equal(eng_error(), want);
    assert_int_equal(ex->n_variants, 3);
    assert_int_equal(eng_experiment_select(ex, "fast"), ENG_OK);
    assert_int_equal(ex->n_variants, 1);
    assert_string_equal(ex->variants[0].variant, "fast");
    assert_true(ex->variants[0].train.lr == 0.5);
    eng_experiment_free(ex);
}

/* Every documented key is accepted by the parser with its documented default, and every
 * key the parser resolves is documented (kv is built from the same table; this proves it). */
static void test_key_docs_cover_parser(void **state)
{
    (void)state;
    const char *p = write_ini("[model]\nlayers = dense:2\n");
    size_t n = 0;
    for (const eng_key_doc *d = eng_key_docs; d->key; d++, n++) {
        assert_non_null(d->type);
        assert_non_null(d->help);
        assert_true(strlen(d->help) > 10);
        char set[512];
        const char *v = d->def;
        if (!strcmp(d->key, "model.layers")) v = "dense:2";
        else if (v[0] == '(') v = "x";              /* (file name) */
        snprintf(set, sizeof set, "%s=%s", d->key, v);
        const char *sets[] = { set };
        eng_experiment *ex = NULL;
        int rc = eng_experiment_load(p, sets, 1, &ex);
        if (rc) fail_msg("documented key %s with its default '%s' rejected: %s", d->key, v, eng_error());
        eng_experiment_free(ex);
    }
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_int_equal(ex->variants[0].n_kv, n);
    for (size_t i = 0; i < ex->variants[0].n_kv; i++) {
        int found = 0;
        for (const eng_key_doc *d = eng_key_docs; d->key; d++) found |= !strcmp(d->key, ex->variants[0].kv[i].key);
        if (!found) fail_msg("resolved key %s is not documented", ex->variants[0].kv[i].key);
    }
    eng_experiment_free(ex);
    /* and a key that is not documented is refused */
    const char *sets[] = { "train.turbo=1" };
    assert_int_equal(eng_experiment_load(p, sets, 1, &ex), ENG_EINVAL);
}

/* "auto" data keys: the config resolves them from the loader's own table, so what kv
 * reports is what eng_data_load generates (one source of truth, engine/data/data_internal.h). */
static void test_data_auto_defaults(void **state)
{
    (void)state;
    static const struct {
        const char *source; int classes, features, degree; double noise;
        const char *kv_classes, *kv_features, *kv_noise;
    } want[] = {
        { "xor", 0, 0, 0, 0.3, "auto", "auto", "0.3" },
        { "spirals", 2, 0, 0, 0.05, "2", "auto", "0.05" },
        { "blobs", 3, 2, 0, 1.0, "3", "2", "1" },
        { "linreg", 0, 4, 0, 0.1, "auto", "4", "0.1" },
        { "polyreg", 0, 1, 3, 0.1, "auto", "1", "0.1" },
        { "sine", 0, 0, 0, 0.1, "auto", "auto", "0.1" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char text[256];
        int reg = i >= 3;
        snprintf(text, sizeof text, "[data]\nsource = %s\nn = 100\n[model]\nlayers = dense:%d\nloss = %s\n",
                 want[i].source, reg ? 1 : want[i].classes ? want[i].classes : 2, reg ? "mse" : "softmax_xent");
        const char *p = write_ini(text);
        eng_experiment *ex = NULL;
        if (eng_experiment_load(p, NULL, 0, &ex)) fail_msg("%s: %s", want[i].source, eng_error());
        const eng_config *c = &ex->variants[0];
        assert_int_equal(c->data.classes, want[i].classes);
        assert_int_equal(c->data.features, want[i].features);
        assert_int_equal(c->data.degree, want[i].degree);
        assert_true(c->data.noise == want[i].noise);
        assert_string_equal(kv_find(c, "data.classes")->value, want[i].kv_classes);
        assert_string_equal(kv_find(c, "data.features")->value, want[i].kv_features);
        assert_string_equal(kv_find(c, "data.noise")->value, want[i].kv_noise);
        assert_string_equal(kv_find(c, "data.degree")->value, want[i].degree ? "3" : "auto");
        assert_int_equal(kv_find(c, "data.noise")->line, 0);
        /* the loader agrees: the same shapes with the resolved values as with auto */
        eng_dataset *ds = NULL;
        assert_int_equal(eng_data_load(&c->data, 5, &ds), ENG_OK);
        eng_data_config autoc = c->data;
        autoc.classes = autoc.features = autoc.degree = 0;
        autoc.noise = -1;
        eng_dataset *ds2 = NULL;
        assert_int_equal(eng_data_load(&autoc, 5, &ds2), ENG_OK);
        if (want[i].features) assert_int_equal((int)ds->in_size, want[i].features);
        if (want[i].classes) assert_int_equal(ds->n_classes, want[i].classes);
        assert_int_equal((int)ds->in_size, (int)ds2->in_size);
        assert_int_equal(ds->n_classes, ds2->n_classes);
        assert_memory_equal(ds->x_train, ds2->x_train, (size_t)ds->n_train * ds->in_size * sizeof(float));
        eng_data_free(ds);
        eng_data_free(ds2);
        eng_experiment_free(ex);
    }
    /* written values win; auto may be written too */
    const char *p = write_ini("[data]\nsource = blobs\nclasses = auto\nfeatures = 5\nnoise = 0.25\n[model]\nlayers = dense:3\n");
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_int_equal(ex->variants[0].data.classes, 3);
    assert_int_equal(ex->variants[0].data.features, 5);
    assert_true(ex->variants[0].data.noise == 0.25);
    assert_string_equal(kv_find(&ex->variants[0], "data.noise")->value, "0.25");
    assert_int_equal(kv_find(&ex->variants[0], "data.classes")->line, 3);
    eng_experiment_free(ex);
    /* file sources keep auto: nothing is generated */
    p = write_ini("[data]\nsource = csv\npath = x.csv\n[model]\nlayers = dense:3\n");
    assert_int_equal(eng_experiment_load(p, NULL, 0, &ex), ENG_OK);
    assert_string_equal(kv_find(&ex->variants[0], "data.noise")->value, "auto");
    assert_string_equal(kv_find(&ex->variants[0], "data.n")->value, "0");
    eng_experiment_free(ex);
    expect_error("[data]\nnoise = -1\n[model]\nlayers = dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'noise': expected a number >= 0 or auto, got '-1'");
    expect_error("[data]\nclasses = 1\n[model]\nlayers = dense:2\n", NULL, 0, ENG_EINVAL,
                 ":2: key 'classes': expected an integer in [2, 1000] or auto, got '1'");
}

/* Relative data paths from the file: next to the experiment file when the file exists
 * there, else as written (cwd); absolute paths and --set values untouched. */
static void test_relative_data_paths(void **state)
{
    (void)state;
    char dir[64] = "/tmp/nnbench-rel-XXXXXX", ini[128], csv[128], sub[128], cwd_file[128];
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/d", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(csv, sizeof csv, "%s/d/train.csv", dir);
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    fputs("a,b\n1,0\n2,1\n", f);
    fclose(f);
    /* a file only the current directory has (the tests run from the repository root) */
    snprintf(cwd_file, sizeof cwd_file, "nnbench-rel-cwd-%ld.csv", (long)getpid());
    f = fopen(cwd_file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(ini, sizeof ini, "%s/exp.ini", dir);
    f = fopen(ini, "w");
    assert_non_null(f);
    fprintf(f, "[data]\nsource = csv\npath = d/train.csv\ntest_path = %s\nlabels = /abs/x\n"
               "test_labels = missing.idx\n[model]\nlayers = dense:2\n", cwd_file);
    fclose(f);

    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load(ini, NULL, 0, &ex), ENG_OK);
    const eng_config *c = &ex->variants[0];
    assert_string_equal(c->data.path, csv);                          /* next to exp.ini */
    assert_string_equal(kv_find(c, "data.path")->value, csv);
    assert_int_equal(kv_find(c, "data.path")->line, 3);
    assert_string_equal(c->data.test_path, cwd_file);                /* only in the cwd */
    assert_string_equal(c->data.labels, "/abs/x");                   /* absolute */
    char want[160];
    snprintf(want, sizeof want, "%s/missing.idx", dir);              /* nowhere: file-relative */
    assert_string_equal(c->data.test_labels, want);
    eng_experiment_free(ex);

    /* --set is relative to the shell's directory */
    const char *sets[] = { "data.path=d/train.csv" };
    assert_int_equal(eng_experiment_load(ini, sets, 1, &ex), ENG_OK);
    assert_string_equal(ex->variants[0].data.path, "d/train.csv");
    eng_experiment_free(ex);

    /* the data really loads through the resolved path */
    f = fopen(ini, "w");
    assert_non_null(f);
    fputs("[data]\nsource = csv\npath = d/train.csv\ntest_fraction = 0\n[model]\nlayers = dense:2\n", f);
    fclose(f);
    assert_int_equal(eng_experiment_load(ini, NULL, 0, &ex), ENG_OK);
    eng_dataset *ds = NULL;
    if (eng_data_load(&ex->variants[0].data, 1, &ds)) fail_msg("%s", eng_error());
    assert_int_equal(ds->n_train, 2);
    eng_data_free(ds);
    eng_experiment_free(ex);

    /* issue 22 #17: the graph's files are looked up the same way (edges, features,
     * labels and the masks) */
    f = fopen(ini, "w");
    assert_non_null(f);
    fprintf(f, "[data]\nsource = graph\n[graph]\nsource = file\nedges = d/train.csv\nnode_features = d/train.csv\n"
               "labels = d/train.csv\ntrain_mask = d/train.csv\nval_mask = %s\ntest_mask = missing.txt\n"
               "fanouts = 5\n[model]\nlayers = sage:2\n", cwd_file);
    fclose(f);
    if (eng_experiment_load(ini, NULL, 0, &ex)) fail_msg("%s", eng_error());
    c = &ex->variants[0];
    assert_string_equal(c->graph.edges, csv);
    assert_string_equal(c->graph.node_features, csv);
    assert_string_equal(c->graph.labels, csv);
    assert_string_equal(c->graph.train_mask, csv);
    assert_string_equal(kv_find(c, "graph.edges")->value, csv);
    assert_string_equal(c->graph.val_mask, cwd_file);
    snprintf(want, sizeof want, "%s/missing.txt", dir);
    assert_string_equal(c->graph.test_mask, want);
    eng_experiment_free(ex);

    assert_int_equal(unlink(cwd_file), 0);
    assert_int_equal(unlink(csv), 0);
    assert_int_equal(unlink(ini), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_samples_load(void **state)
{
    (void)state;
    static const char *const samples[] = { "samples/spirals-mlp.ini", "samples/regression.ini",
                                           "samples/fashion-mnist-mlp.ini", "samples/fashion-mnist-cnn.ini",
                                           "samples/data/rings.ini", "samples/data/friedman1.ini" };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        eng_experiment *ex = NULL;
        if (eng_experiment_load(samples[i], NULL, 0, &ex)) fail_msg("%s", eng_error());
        assert_true(ex->n_variants >= 1);
        eng_experiment_free(ex);
    }
}

int test_engine_config(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_good_file, teardown),
        cmocka_unit_test_teardown(test_no_variants_and_defaults, teardown),
        cmocka_unit_test_teardown(test_set_overrides, teardown),
        cmocka_unit_test_teardown(test_set_errors, teardown),
        cmocka_unit_test_teardown(test_error_messages, teardown),
        cmocka_unit_test_teardown(test_conv_options, teardown),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test_teardown(test_select, teardown),
        cmocka_unit_test_teardown(test_key_docs_cover_parser, teardown),
        cmocka_unit_test_teardown(test_data_auto_defaults, teardown),
        cmocka_unit_test(test_relative_data_paths),
        cmocka_unit_test(test_samples_load),
    };
    return cmocka_run_group_tests_name("engine_config", tests, NULL, NULL);
}
