/* input.c — hostile input to the engine: names with escape sequences or bidi controls,
 * Latin-1 and BOM experiment files, files that are not regular (/dev/zero, a FIFO, a
 * directory) or too large, IDX files with trailing garbage (plain and gzip), a stray label
 * and the out-of-memory hint. Each case checks the exact complaint, and that no message
 * carries a raw control byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "../../engine/core.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nnbench-input-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static const char *at(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static const char *put(const char *name, const void *data, size_t n)
{
    const char *p = at(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
    return p;
}

static const char *put_text(const char *name, const char *text) { return put(name, text, strlen(text)); }

/* No raw control character may reach a terminal through an error message. */
static void assert_inert(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20) fail_msg("raw control byte 0x%02x in: %s", *p, msg);
    assert_null(strstr(msg, "\xe2\x80\xae"));
}

static int load(const char *path, const char *const *sets, size_t n, eng_experiment **ex)
{
    *ex = NULL;
    int rc = eng_experiment_load(path, sets, n, ex);
    assert_inert(eng_error());
    return rc;
}

#define BODY "[data]\nsource = spirals\n[model]\nlayers = dense:8:tanh, dense:2\n"

static void test_hostile_names_refused(void **state)
{
    (void)state;
    eng_experiment *ex;
    const char *p = put_text("esc.ini", "[experiment]\nname = x\x1b]0;pwned\x07\x1b[2J\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), ":2: key 'name': a name may not hold control, bidirectional or "
                                        "non-UTF-8 characters; '\\x1b' at byte 2"));
    p = put_text("bidi.ini", "[experiment]\nname = abc\xe2\x80\xae" "fed\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "'\\u202e' at byte 4"));
    /* a newline through --set (a shell can pass one) */
    p = put_text("ok.ini", "[experiment]\nname = fine\n" BODY);
    const char *set[] = { "experiment.name=two\nlines" };
    assert_int_equal(load(p, set, 1, &ex), ENG_EINVAL);
    assert_string_equal(eng_error(), "--set experiment.name=two\\x0alines: key 'name': a name may not hold control, "
                                     "bidirectional or non-UTF-8 characters; '\\x0a' at byte 4");
    const char *set2[] = { "experiment.name=r\xe2\x80\xae" "x" };
    assert_int_equal(load(p, set2, 1, &ex), ENG_EINVAL);
    /* a variant name with an escape: refused, and the message shows it visibly */
    p = put_text("var.ini", "[experiment]\nname = v\n" BODY "[variant a\x1b[2Jb]\ntrain.lr = 0.1\n");
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "variant name 'a\\x1b[2Jb'"));
    p = put_text("var2.ini", "[experiment]\nname = v\n" BODY "[variant a\xe2\x80\xae" "b]\ntrain.lr = 0.1\n");
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "variant name 'a\\u202eb'"));
    /* plain UTF-8 names are fine */
    p = put_text("utf8.ini", "[experiment]\nname = caf\xc3\xa9-\xe4\xb8\xad\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_OK);
    assert_string_equal(ex->variants[0].name, "caf\xc3\xa9-\xe4\xb8\xad");
    eng_experiment_free(ex);
}

/* Every message that quotes the file stays inert (an unknown key, an unparseable line). */
static void test_config_errors_inert(void **state)
{
    (void)state;
    eng_experiment *ex;
    const char *p = put_text("key.ini", "[experiment]\nna\x1b[2Jme = x\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "unknown key 'na\\x1b[2Jme'"));
    p = put_text("line.ini", "[experiment]\n\x1b]0;t\x07 garbage\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), ":2: expected 'key = value' or '[section]', got '\\x1b]0;t\\x07 garbage'"));
    p = put_text("val.ini", "[experiment]\nname = x\n[data]\nsource = spi\x1b[1mrals\n[model]\nlayers = dense:2\n");
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "spi\\x1b[1mrals"));
}

static void test_utf8_and_bom(void **state)
{
    (void)state;
    eng_experiment *ex;
    const char *p = put_text("latin1.ini", "[experiment]\nname = ok\n; caf\xe9\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_EFORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s:3: byte 0xe9 at column 6 is not UTF-8 (Latin-1?): save the file as UTF-8, "
             "e.g. iconv -f latin1 -t utf-8", p);
    assert_string_equal(eng_error(), want);
    p = put_text("bom.ini", "\xef\xbb\xbf[experiment]\nname = bom\n" BODY);
    assert_int_equal(load(p, NULL, 0, &ex), ENG_OK);
    assert_string_equal(ex->variants[0].name, "bom");
    assert_int_equal(ex->text[0], '[');
    eng_experiment_free(ex);
}

static void test_not_regular_files(void **state)
{
    (void)state;
    eng_experiment *ex;
    assert_int_equal(load("/dev/zero", NULL, 0, &ex), ENG_EIO);
    assert_string_equal(eng_error(), "/dev/zero: is a character device, not a regular file: give the experiment "
                                     "file as a file");
    assert_int_equal(load(dir, NULL, 0, &ex), ENG_EIO);
    assert_non_null(strstr(eng_error(), ": is a directory, not a regular file"));
    /* a FIFO with no writer: refused at once instead of blocking forever */
    const char *fifo = at("fifo.ini");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(load(fifo, NULL, 0, &ex), ENG_EIO);
    assert_non_null(strstr(eng_error(), ": is a FIFO (named pipe), not a regular file"));
    /* a file over the cap (sparse: no disk used) */
    const char *big = put_text("big.ini", "[experiment]\n");
    assert_int_equal(truncate(big, (1 << 20) + 1), 0);
    assert_int_equal(load(big, NULL, 0, &ex), ENG_EIO);
    char want[512];
    snprintf(want, sizeof want, "%s: 1048577 bytes is over the 1 MiB cap for experiment files; is this the "
             "right file?", big);
    assert_string_equal(eng_error(), want);

    /* data files: CSV and IDX get the same check */
    eng_dataset *ds;
    eng_data_config dc;
    memset(&dc, 0, sizeof dc);
    dc.source = ENG_DATA_CSV;
    dc.header = -1;
    dc.label_column = -1;
    dc.test_fraction = 0.2;
    snprintf(dc.path, sizeof dc.path, "%s", fifo);
    assert_int_equal(eng_data_load(&dc, 1, &ds), ENG_EIO);
    assert_non_null(strstr(eng_error(), ": is a FIFO (named pipe), not a regular file: give the CSV file as a file"));
    snprintf(dc.path, sizeof dc.path, "/dev/zero");
    assert_int_equal(eng_data_load(&dc, 1, &ds), ENG_EIO);
    assert_non_null(strstr(eng_error(), "/dev/zero: is a character device"));
    dc.source = ENG_DATA_IDX;
    snprintf(dc.path, sizeof dc.path, "/dev/zero");
    snprintf(dc.labels, sizeof dc.labels, "/dev/zero");
    assert_int_equal(eng_data_load(&dc, 1, &ds), ENG_EIO);
    assert_non_null(strstr(eng_error(), "/dev/zero: is a character device, not a regular file: give the IDX file"));
    /* over the caps (sparse files: nothing is read, fstat says no) */
    const char *bigidx = put_text("big.idx", "");
    assert_int_equal(truncate(bigidx, (4LL << 30) + 1), 0);
    snprintf(dc.path, sizeof dc.path, "%s", bigidx);
    assert_int_equal(eng_data_load(&dc, 1, &ds), ENG_EIO);
    assert_non_null(strstr(eng_error(), "big.idx: 4294967297 bytes is over the 4096 MiB cap for IDX files"));
    dc.source = ENG_DATA_CSV;
    const char *bigcsv = put_text("big.csv", "");
    assert_int_equal(truncate(bigcsv, (1LL << 30) + 1), 0);
    snprintf(dc.path, sizeof dc.path, "%s", bigcsv);
    assert_int_equal(eng_data_load(&dc, 1, &ds), ENG_EIO);
    assert_non_null(strstr(eng_error(), "big.csv: 1073741825 bytes is over the 1024 MiB cap for CSV files"));
}

/* n images of 2x2 (or n labels), plus extra bytes inside the IDX stream; gz: gzipped, with
 * after_gz bytes of garbage after the gzip stream. */
static const char *idx_file(const char *name, int labels, int n, int extra, int gz, int after_gz)
{
    unsigned char b[256];
    size_t len = 0;
    b[len++] = 0; b[len++] = 0; b[len++] = 8; b[len++] = labels ? 1 : 3;
    int dims[3] = { n, 2, 2 };
    for (int d = 0; d < (labels ? 1 : 3); d++) {
        b[len++] = 0; b[len++] = 0; b[len++] = 0; b[len++] = (unsigned char)dims[d];
    }
    for (int i = 0; i < n * (labels ? 1 : 4) + extra; i++) b[len++] = (unsigned char)(labels ? i % 2 : i * 7);
    const char *p = at(name);
    if (!gz) return put(name, b, len);
    gzFile f = gzopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, b, (unsigned)len), (int)len);
    gzclose(f);
    FILE *g = fopen(p, "ab");
    for (int i = 0; i < after_gz; i++) fputc('G', g);
    fclose(g);
    return p;
}

static int load_idx(const char *img, const char *lab, eng_dataset **ds)
{
    eng_data_config dc;
    memset(&dc, 0, sizeof dc);
    dc.source = ENG_DATA_IDX;
    dc.test_fraction = 0.25;
    snprintf(dc.path, sizeof dc.path, "%s", img);
    snprintf(dc.labels, sizeof dc.labels, "%s", lab);
    return eng_data_load(&dc, 1, ds);
}

static void test_idx_trailing_garbage(void **state)
{
    (void)state;
    eng_dataset *ds;
    char lab[256];
    snprintf(lab, sizeof lab, "%s", idx_file("l", 1, 8, 0, 0, 0));
    assert_int_equal(load_idx(idx_file("ok", 0, 8, 0, 0, 0), lab, &ds), ENG_OK);
    eng_data_free(ds);
    assert_int_equal(load_idx(idx_file("ok.gz", 0, 8, 0, 1, 0), lab, &ds), ENG_OK);
    eng_data_free(ds);
    /* plain: 3 bytes more than 8 images of 4 bytes */
    const char *p = idx_file("plain", 0, 8, 3, 0, 0);
    assert_int_equal(load_idx(p, lab, &ds), ENG_EFORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s: 51 bytes, but the IDX header (8 x 4-byte samples) needs 48: trailing garbage "
             "after the last sample", p);
    assert_string_equal(eng_error(), want);
    /* gzip: the extra bytes inside the compressed stream */
    p = idx_file("in.gz", 0, 8, 3, 1, 0);
    assert_int_equal(load_idx(p, lab, &ds), ENG_EFORMAT);
    snprintf(want, sizeof want, "%s: trailing garbage after the last sample (byte 48 of the IDX stream; the header "
             "says 8 x 4-byte samples)", p);
    assert_string_equal(eng_error(), want);
    /* gzip: garbage after the gzip stream, which zlib alone would ignore */
    p = idx_file("after.gz", 0, 8, 0, 1, 5);
    assert_int_equal(load_idx(p, lab, &ds), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "but the IDX header (8 x 4-byte samples) needs 48 (mod 2^32): trailing "
                                        "garbage after the gzip stream"));
    /* the labels file is checked as well */
    p = idx_file("lab.gz", 1, 8, 2, 1, 0);
    assert_int_equal(load_idx(idx_file("ok2", 0, 8, 0, 0, 0), p, &ds), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "trailing garbage after the last sample"));
}

/* A label of 200 among classes 0..9 is named with its row, not turned into "dense:201". */
static void test_stray_label(void **state)
{
    (void)state;
    char csv[8192] = "x,y,label\n";
    size_t len = strlen(csv);
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(csv + len, sizeof csv - len, "%d.5,%d,%d\n", i, i % 7, i == 56 ? 200 : i % 10);
    put_text("d.csv", csv);
    const char *p = put_text("lab.ini", "[experiment]\nname = lab\n[data]\nsource = csv\npath = d.csv\n"
                                        "[model]\nlayers = dense:8:tanh, dense:10\n[train]\nepochs = 1\n");
    eng_experiment *ex;
    assert_int_equal(load(p, NULL, 0, &ex), ENG_OK);
    eng_run *r = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &r), ENG_EFORMAT);
    char want[512];
    snprintf(want, sizeof want, "d: label 200 (at %s: data row 57) is outside the 10 classes the model's last "
             "layer (dense:10) gives; the data uses 11 distinct labels: fix that label (class indices are 0..9), "
             "or if the classes really go up to 200, end the layers with dense:201", at("d.csv"));
    assert_string_equal(eng_error(), want);
    eng_experiment_free(ex);
    /* really 10 classes and a 2-way layer: the model's own message */
    len = strlen("x,y,label\n");
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(csv + len, sizeof csv - len, "%d.5,%d,%d\n", i, i % 7, i % 10);
    put_text("d.csv", csv);
    p = put_text("lab.ini", "[experiment]\nname = lab\n[data]\nsource = csv\npath = d.csv\n"
                            "[model]\nlayers = dense:8:tanh, dense:2\n[train]\nepochs = 1\n");
    assert_int_equal(load(p, NULL, 0, &ex), ENG_OK);
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &r), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "end the layers with dense:10"));
    eng_experiment_free(ex);
}

/* In a child with its address space capped a little above what it uses now, so an
 * allocation of the size asked for fails on every machine. */
static void expect_oom(int in, int units, int batch, const char *want)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        long pages = 0, page = sysconf(_SC_PAGESIZE);
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1) _exit(3);
        fclose(f);
        rlim_t cap = (rlim_t)pages * (rlim_t)page + (256u << 20);
        struct rlimit rl = { cap, cap };
        if (setrlimit(RLIMIT_AS, &rl)) _exit(3);
        eng_model_config mc;
        memset(&mc, 0, sizeof mc);
        mc.n_layers = 2;
        mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = units, .act = ENG_ACT_TANH };
        mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 2 };
        mc.loss = ENG_LOSS_SOFTMAX_XENT;
        eng_model *m = NULL;
        int shape[3] = { 1, 1, in };
        int rc = eng_model_build(&mc, shape, 2, batch, 1, NULL, &m);
        if (rc != ENG_ENOMEM) _exit(4);
        if (!strstr(eng_error(), want)) { fprintf(stderr, "got: %s\n", eng_error()); _exit(5); }
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_oom_names_the_culprit(void **state)
{
    (void)state;
    if (getenv("NNBENCH_SANITIZED")) {
        /* ASan reserves terabytes of shadow address space: a cap on it cannot work there. */
        printf("skipped: an address-space cap does not work under AddressSanitizer\n");
        skip();
    }
    expect_oom(20000, 20000, 1, "out of memory: the parameters are too big: 400060002 parameters take");
    expect_oom(100, 64, 2000000, "out of memory: the batch is too big: activations for batches of 2000000 rows");
}

int test_engine_input(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_names_refused),
        cmocka_unit_test(test_config_errors_inert),
        cmocka_unit_test(test_utf8_and_bom),
        cmocka_unit_test(test_not_regular_files),
        cmocka_unit_test(test_idx_trailing_garbage),
        cmocka_unit_test(test_stray_label),
        cmocka_unit_test(test_oom_names_the_culprit),
    };
    return cmocka_run_group_tests_name("engine_input", tests, setup, teardown);
}
