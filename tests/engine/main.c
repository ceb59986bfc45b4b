/* main.c — the engine's CMocka executable: runs each test group of tests/engine/. */
#include <stdio.h>

/* Weak so a group still being written shows as missing (and fails) instead of breaking
 * the link for the others. */
#define GROUPS(X) X(ops) X(optim) X(data) X(config) X(train) X(newton) X(sparse) X(graph) X(gnn) X(pipeline) X(checkpoint) X(quant) X(gradient) X(input) X(isa) X(compress) X(balance) X(gemm) X(attention) X(norm) X(conv) X(pool)
#define DECL(g) int test_engine_##g(void) __attribute__((weak));
GROUPS(DECL)

int main(void)
{
    int failed = 0;
#define RUN(g)                                                                        \
    if (test_engine_##g) failed += test_engine_##g();                                 \
    else { printf("[  ERROR   ] test group engine_%s is missing\n", #g); failed++; }
    GROUPS(RUN)
    return failed ? 1 : 0;
}
