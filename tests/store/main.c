/* main.c — test_store: runs every group of tests/store/ (schema and migrations, writing and
 * batching, statuses, queries, files that are not databases, read-only, the sink, the CLI,
 * the scaling view). */
#include "util.h"

int test_store_core(void);
int test_store_sink(void);
int test_store_cli(void);
int test_store_checkpoint(void);
int test_store_ops_v2(void);
int test_store_telemetry(void);
int test_store_diff(void);
int test_store_perf(void);
int test_store_compare1(void);
int test_store_scaling(void);

int main(void)
{
    int failed = 0;
    failed += test_store_core();
    failed += test_store_sink();
    failed += test_store_cli();
    failed += test_store_checkpoint();
    failed += test_store_ops_v2();
    failed += test_store_telemetry();
    failed += test_store_diff();
    failed += test_store_perf();
    failed += test_store_compare1();
    failed += test_store_scaling();
    return failed ? 1 : 0;
}
