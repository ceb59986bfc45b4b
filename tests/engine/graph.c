/* graph.c (tests) — graph loaders (formats, cleaning, errors with FILE:LINE), generator
 * determinism and shape, and the block invariants of both neighbour samplers (every
 * sampled edge exists, fanout respected, relabelling a bijection) plus their identity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../engine/data/data_internal.h"
#include "../../engine/graph/graph.h"

static char tmpdir[64];

static const char *write_tmp(const char *name, const char *text)
{
    static char path[8][128];
    static int k;
    char *p = path[k++ & 7];
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/nnbench-graph-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
    }
    snprintf(p, 128, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static int has_edge(const eng_graph *g, int32_t v, int32_t u)
{
    for (int64_t e = g->rowptr[v]; e < g->rowptr[v + 1]; e++)
        if (g->col[e] == u) return 1;
    return 0;
}

static void test_load_edges(void **state)
{
    (void)state;
    /* header, comment, blank line, tab and comma separators, a self-loop, a duplicate */
    const char *p = write_tmp("e.csv", "src,dst\n# a comment\n0,1\n1\t2\n\n2 , 2\n0,1\n3,0\n");
    eng_graph *g;
    assert_int_equal(eng_graph_load_edges(p, 0, 0, &g), ENG_OK);
    assert_int_equal(g->n, 4);
    assert_int_equal(g->m, 3);                   /* 0->1, 1->2, 3->0 */
    assert_int_equal(g->self_loops, 1);
    assert_int_equal(g->duplicates, 1);
    assert_true(has_edge(g, 1, 0) && has_edge(g, 2, 1) && has_edge(g, 0, 3)); /* row = destination */
    assert_false(has_edge(g, 0, 1));
    eng_graph_free(g);
    assert_int_equal(eng_graph_load_edges(p, 1, 10, &g), ENG_OK);
    assert_int_equal(g->n, 10);
    assert_int_equal(g->m, 6);
    assert_true(has_edge(g, 0, 1) && has_edge(g, 1, 0));
    /* features, labels, masks */
    const char *fp = write_tmp("f.csv", "a,b\n1,2\n3,4\n5,6\n7,8\n9,10\n11,12\n13,14\n15,16\n17,18\n19,20\n");
    assert_int_equal(eng_graph_load_features(g, fp), ENG_OK);
    assert_int_equal(g->f, 2);
    assert_true(g->feat[19] == 20.0f);
    const char *lp = write_tmp("l.csv", "node,label\n9,1\n0,0\n1,1\n2,2\n3,0\n4,1\n5,2\n6,0\n7,1\n8,2\n");
    assert_int_equal(eng_graph_load_labels(g, lp), ENG_OK);
    assert_int_equal(g->classes, 3);
    assert_int_equal(g->label[9], 1);
    const char *mp = write_tmp("m.txt", "0\n1\n2\n");
    assert_int_equal(eng_graph_load_mask(g, mp, ENG_SPLIT_TRAIN), ENG_OK);
    assert_int_equal(g->split[2], ENG_SPLIT_TRAIN);
    assert_int_equal(g->split[3], ENG_SPLIT_NONE);
    assert_int_equal(eng_graph_load_mask(g, mp, ENG_SPLIT_TEST), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "m.txt:1: node 0 is in the train set already"));
    /* errors name the file and the line */
    const char *bad = write_tmp("b.csv", "0,1\n1,x\n");
    eng_graph *h;
    assert_int_equal(eng_graph_load_edges(bad, 0, 0, &h), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "b.csv:2: expected two node ids"));
    bad = write_tmp("b2.csv", "0,-4\n");
    assert_int_equal(eng_graph_load_edges(bad, 0, 0, &h), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "b2.csv:1: node ids must be in"));
    assert_int_equal(eng_graph_load_edges("/nonexistent/e.csv", 0, 0, &h), ENG_EIO);
    bad = write_tmp("f2.csv", "1,2\n3\n5,6\n7,8\n9,10\n11,12\n13,14\n15,16\n17,18\n19,20\n");
    assert_int_equal(eng_graph_load_features(g, bad), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "f2.csv:2: expected 2 features"));
    bad = write_tmp("f3.csv", "# two rows, and a comment long enough for ten\n1,2\n3,4\n");
    assert_int_equal(eng_graph_load_features(g, bad), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "2 feature rows, but the graph has 10 nodes"));
    bad = write_tmp("l2.csv", "0\n1\nq\n");
    assert_int_equal(eng_graph_load_labels(g, bad), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "l2.csv:3:"));
    assert_int_equal(eng_graph_random_split(g, 0.9, 0.2, 1), ENG_EINVAL);
    eng_graph_free(g);
}


/* Issue 22 #9: a graph file must be a regular file (not /dev/zero: one endless line; not a
 * FIFO: blocks forever), lines are bounded, and edge ids are checked against the node count
 * (the features file's rows) before the CSR is sized by them. */
static void test_loader_limits(void **state)
{
    (void)state;
    eng_graph *g = NULL;
    assert_int_equal(eng_graph_load_edges("/dev/zero", 0, 0, &g), ENG_EIO);
    assert_non_null(strstr(eng_error(), "/dev/zero: is a character device, not a regular file"));
    char fifo[160];
    write_tmp("x", "");
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    eng_graph *h = prof_calloc(1, sizeof *h);
    h->n = 3;
    assert_int_equal(eng_graph_load_features(h, fifo), ENG_EIO);   /* returns: no writer needed */
    assert_non_null(strstr(eng_error(), "a FIFO (named pipe), not a regular file"));
    assert_int_equal(eng_graph_load_labels(h, "/dev/zero"), ENG_EIO);
    /* a line without end is cut at ENG_GRAPH_MAX_LINE, not read into one buffer */
    char *big = malloc((size_t)ENG_GRAPH_MAX_LINE + 16);
    memset(big, '1', (size_t)ENG_GRAPH_MAX_LINE + 8);
    big[ENG_GRAPH_MAX_LINE + 8] = 0;
    const char *lp = write_tmp("long.csv", big);
    free(big);
    assert_int_equal(eng_graph_load_edges(lp, 0, 0, &g), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "long.csv:1: a line longer than"));
    /* a file that starts with an empty line (make fuzz found the reader writing its
     * terminator before it had a buffer) */
    assert_int_equal(eng_graph_load_edges(write_tmp("blank.csv", "\n0,1\n"), 0, 0, &g), ENG_OK);
    assert_int_equal(g->n, 2);
    eng_graph_free(g);
    /* one stray id far past the nodes: refused at its line, nothing sized by it */
    const char *ep = write_tmp("stray.csv", "0,1\n1,2\n2,134217728\n");
    size_t before = prof_mem_peak();
    assert_int_equal(eng_graph_load_edges(ep, 0, 3, &g), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "stray.csv:3: node 134217728 is past the graph's 3 nodes"));
    assert_true(prof_mem_peak() - before < (1u << 20));
    /* the node count comes from the features file's data rows (header and comments aside) */
    int32_t n = -1;
    assert_int_equal(eng_graph_count_rows(write_tmp("fc.csv", "a,b\n# c\n1,2\n\n3,4\n5,6\n"), &n), ENG_OK);
    assert_int_equal(n, 3);
    /* a features file too small for one row per node is refused before n x f is allocated */
    h->n = 1000000;
    before = prof_mem_peak();
    assert_int_equal(eng_graph_load_features(h, write_tmp("wide.csv", "1,2,3,4,5,6,7,8\n")), ENG_EFORMAT);
    assert_non_null(strstr(eng_error(), "cannot hold one row per node"));
    assert_true(prof_mem_peak() - before < (1u << 20));
    eng_graph_free(h);
}

/* Issue 22 #21: nan and inf are refused in graph features, as the CSV loader refuses them. */
static void test_features_finite(void **state)
{
    (void)state;
    eng_graph *h = prof_calloc(1, sizeof *h);
    h->n = 2;
    const char *bad[] = { "1,2\nnan,4\n", "1,inf\n3,4\n", "1,2\n3,-INF\n", "1,1e39\n3,4\n" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(eng_graph_load_features(h, write_tmp("nf.csv", bad[i])), ENG_EFORMAT);
        assert_non_null(strstr(eng_error(), "expected a finite number"));
    }
    assert_int_equal(eng_graph_load_features(h, write_tmp("ok.csv", "x,y\n1,2e3\n-3.5,4\n")), ENG_OK);
    assert_true(h->feat[1] == 2000.0f && h->feat[2] == -3.5f);
    eng_graph_free(h);
}

/* Issue 22 #10: a stop requested while a graph is built ends the build (the flag is for the
 * whole process from then on: checked in a child). */
static void test_build_stops(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        eng_stop_builds();
        eng_graph *g = NULL;
        int a = eng_graph_sbm(3000000, 4, 4, 0.8, 2, 1, 1, &g);
        int b = eng_graph_rmat(20, 4, 1, &g);
        int c = eng_graph_load_edges(write_tmp("stop.csv", "0,1\n"), 0, 0, &g);
        _exit(a == ENG_ESTOPPED && b == ENG_ESTOPPED && c == ENG_ESTOPPED && strstr(eng_error(), "stopped while building")
                  ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void assert_same_graph(const eng_graph *a, const eng_graph *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->m, b->m);
    assert_memory_equal(a->rowptr, b->rowptr, ((size_t)a->n + 1) * sizeof(int64_t));
    assert_memory_equal(a->col, b->col, (size_t)a->m * sizeof(int32_t));
    assert_int_equal(a->f, b->f);
    if (a->f) assert_memory_equal(a->feat, b->feat, (size_t)a->n * a->f * sizeof(float));
}

static void test_generators(void **state)
{
    (void)state;
    eng_graph *a, *b, *c;
    assert_int_equal(eng_graph_sbm(600, 3, 10, 0.8, 4, 1.0, 7, &a), ENG_OK);
    assert_int_equal(eng_graph_sbm(600, 3, 10, 0.8, 4, 1.0, 7, &b), ENG_OK);
    assert_int_equal(eng_graph_sbm(600, 3, 10, 0.8, 4, 1.0, 8, &c), ENG_OK);
    assert_same_graph(a, b);
    assert_true(a->m != c->m || memcmp(a->col, c->col, (size_t)a->m * sizeof(int32_t)));
    /* homophily: the fraction of edges inside a community, near 0.8 */
    int64_t inside = 0;
    for (int32_t v = 0; v < a->n; v++)
        for (int64_t e = a->rowptr[v]; e < a->rowptr[v + 1]; e++) inside += a->label[a->col[e]] == a->label[v];
    double h = (double)inside / (double)a->m;
    printf("  sbm: %d nodes, %lld edges, homophily %.3f (asked 0.8), mean degree %.2f\n", a->n, (long long)a->m, h,
           (double)a->m / a->n);
    assert_true(h > 0.75 && h < 0.85);
    assert_int_equal(a->label[5], 5 % 3);
    eng_graph_free(a); eng_graph_free(b); eng_graph_free(c);
    assert_int_equal(eng_graph_rmat(10, 8, 3, &a), ENG_OK);
    assert_int_equal(eng_graph_rmat(10, 8, 3, &b), ENG_OK);
    assert_same_graph(a, b);
    /* skew: R-MAT's a = 0.57 puts the most edges on low ids */
    int64_t maxdeg = 0;
    for (int32_t v = 0; v < a->n; v++)
        if (a->rowptr[v + 1] - a->rowptr[v] > maxdeg) maxdeg = a->rowptr[v + 1] - a->rowptr[v];
    printf("  rmat: %d nodes, %lld entries, max degree %lld (mean %.1f)\n", a->n, (long long)a->m,
           (long long)maxdeg, (double)a->m / a->n);
    assert_true(maxdeg > 10 * a->m / a->n);
    for (int32_t v = 0; v < a->n; v++)   /* symmetric */
        for (int64_t e = a->rowptr[v]; e < a->rowptr[v + 1]; e++) assert_true(has_edge(a, a->col[e], v));
    eng_graph_free(a); eng_graph_free(b);
    assert_int_equal(eng_graph_sbm(10, 1, 3, 0.5, 2, 1, 1, &a), ENG_EINVAL);
    assert_int_equal(eng_graph_rmat(0, 8, 1, &a), ENG_EINVAL);
}

/* Invariants of one batch's blocks; returns a hash of everything in them. */
static uint64_t check_blocks(const eng_graph *g, const eng_block *bl, int layers, const int *fan,
                             const int32_t *seeds, int n_seeds)
{
    uint64_t h = 1469598103934665603ull;
    const int32_t *dst = seeds;
    int32_t n_dst = n_seeds;
    char *seen = calloc((size_t)g->n, 1);
    for (int l = layers - 1; l >= 0; l--) {
        const eng_block *b = &bl[l];
        assert_int_equal(b->n_dst, n_dst);
        /* the destinations are the first sources, in order */
        assert_memory_equal(b->src_ids, dst, (size_t)n_dst * sizeof(int32_t));
        /* relabelling: local -> global is injective */
        for (int32_t i = 0; i < b->n_src; i++) {
            assert_false(seen[b->src_ids[i]]);
            seen[b->src_ids[i]] = 1;
        }
        for (int32_t i = 0; i < b->n_src; i++) seen[b->src_ids[i]] = 0;
        assert_int_equal(b->indptr[0], 0);
        assert_int_equal(b->indptr[n_dst], b->n_edges);
        char *used = calloc((size_t)b->n_src, 1);
        for (int32_t i = 0; i < n_dst; i++) used[i] = 1;
        for (int32_t i = 0; i < n_dst; i++) {
            int32_t v = b->src_ids[i];
            int64_t deg = g->rowptr[v + 1] - g->rowptr[v], k = b->indptr[i + 1] - b->indptr[i];
            assert_int_equal(k, deg < fan[l] ? deg : fan[l]);      /* fanout respected */
            for (int64_t e = b->indptr[i]; e < b->indptr[i + 1]; e++) {
                int32_t s = b->indices[e];
                assert_true(s >= 0 && s < b->n_src);
                assert_true(has_edge(g, v, b->src_ids[s]));         /* the edge exists */
                for (int64_t e2 = b->indptr[i]; e2 < e; e2++) assert_int_not_equal(b->indices[e2], s); /* no repeats */
                used[s] = 1;
                h = (h ^ (uint64_t)b->src_ids[s]) * 1099511628211ull;
            }
        }
        for (int32_t i = 0; i < b->n_src; i++) assert_true(used[i]);  /* surjective onto sampled nodes */
        free(used);
        dst = b->src_ids;
        n_dst = b->n_src;
    }
    free(seen);
    return h;
}

static void test_samplers(void **state)
{
    (void)state;
    eng_graph *g;
    assert_int_equal(eng_graph_rmat(11, 8, 5, &g), ENG_OK);
    int fan[2] = { 10, 5 };
    eng_sampler *tp, *fu;
    assert_int_equal(eng_sampler_create(g, ENG_SAMPLER_TWOPASS, fan, 2, 64, NULL, &tp), ENG_OK);
    assert_int_equal(eng_sampler_create(g, ENG_SAMPLER_FUSED, fan, 2, 64, NULL, &fu), ENG_OK);
    int32_t seeds[64];
    for (int batch = 0; batch < 20; batch++) {
        for (int i = 0; i < 64; i++) seeds[i] = (int32_t)((batch * 64 + i) * 7 % g->n);
        eng_block *b1, *b2;
        assert_int_equal(eng_sampler_sample(tp, seeds, 64, (uint64_t)batch, &b1), ENG_OK);
        uint64_t h1 = check_blocks(g, b1, 2, fan, seeds, 64);
        assert_int_equal(eng_sampler_sample(fu, seeds, 64, (uint64_t)batch, &b2), ENG_OK);
        uint64_t h2 = check_blocks(g, b2, 2, fan, seeds, 64);
        /* same seed, same blocks: ids, offsets and local indices */
        assert_true(h1 == h2);
        for (int l = 0; l < 2; l++) {
            assert_int_equal(b1[l].n_src, b2[l].n_src);
            assert_memory_equal(b1[l].src_ids, b2[l].src_ids, (size_t)b1[l].n_src * sizeof(int32_t));
            assert_memory_equal(b1[l].indices, b2[l].indices, (size_t)b1[l].n_edges * sizeof(int32_t));
        }
        /* a different seed samples differently (somewhere in 20 batches) */
    }
    eng_block *b;
    seeds[1] = seeds[0];
    assert_int_equal(eng_sampler_sample(tp, seeds, 64, 1, &b), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "appears twice"));
    assert_int_equal(eng_sampler_sample(fu, seeds, 64, 1, &b), ENG_EINVAL);
    seeds[1] = 1;
    assert_int_equal(eng_sampler_sample(fu, seeds, 64, 1, &b), ENG_OK); /* g2l was reset after the error */
    check_blocks(g, b, 2, fan, seeds, 64);
    int bad[1] = { 0 };
    eng_sampler *x;
    assert_int_equal(eng_sampler_create(g, ENG_SAMPLER_FUSED, bad, 1, 64, NULL, &x), ENG_EINVAL);
    eng_sampler_free(tp);
    eng_sampler_free(fu);
    eng_graph_free(g);
}

static int teardown(void **state)
{
    (void)state;
    if (tmpdir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd)) return 0;
    }
    return 0;
}

int test_engine_graph(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_edges),
        cmocka_unit_test(test_loader_limits),
        cmocka_unit_test(test_features_finite),
        cmocka_unit_test(test_build_stops),
        cmocka_unit_test(test_generators),
        cmocka_unit_test(test_samplers),
    };
    return cmocka_run_group_tests_name("engine_graph", tests, NULL, teardown);
}
