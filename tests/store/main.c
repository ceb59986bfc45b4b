/* main.c — test_store: runs every group of tests/store/ (schema and migrations, writing and
 * batching, statuses, queries, files that are not databases, read-only, the sink, the CLI). */
#include "util.h"

int test_store_core(void);
int test_store_sink(void);
int test_store_cli(void);

/* Weak so a group still being written shows as missing (and fails) instead of breaking
 * the link. */
int test_store_cli(void) __attribute__((weak));

int main(void)
{
    int failed = 0;
    failed += test_store_core();
    failed += test_store_sink();
    if (test_store_cli) failed += test_store_cli();
    else { printf("[  ERROR   ] test group store_cli is missing\n"); failed++; }
    return failed ? 1 : 0;
}
