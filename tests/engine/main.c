/* main.c — the engine's CMocka executable: runs each test group of tests/engine/. */
#include <stdio.h>

int test_engine_ops(void);
int test_engine_optim(void);
int test_engine_data(void);
int test_engine_config(void);
int test_engine_train(void);

int main(void)
{
    int failed = 0;
    failed += test_engine_ops();
    failed += test_engine_optim();
    failed += test_engine_data();
    failed += test_engine_config();
    failed += test_engine_train();
    return failed ? 1 : 0;
}
