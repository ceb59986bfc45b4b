/* main.c — the quantum module's CMocka executable (test_quantum): runs every group. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

int test_quantum_estimators(void);
int test_quantum_solvers(void);
int test_quantum_sched(void);
int test_quantum_shift(void);

int main(void)
{
    int failed = 0;
    failed += test_quantum_estimators();
    failed += test_quantum_solvers();
    failed += test_quantum_sched();
    failed += test_quantum_shift();
    return failed ? 1 : 0;
}
