/* signals.c — CMocka tests of profiler/signals.c: a handler set by prof_signal_set runs on
 * the alternate stack it gives the thread; prof_signals_onstack moves a handler someone
 * else installed there and leaves the default and ignored dispositions alone; a thread
 * from prof_thread_create blocks the asynchronous signals (a signal sent to the process
 * reaches the thread with the stack) but not the ones a fault raises, and the caller's
 * mask is as before. (tests/engine/gemm.c replays the GEMM that made this necessary.) */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../profiler/profiler.h"

static volatile sig_atomic_t handled, on_alt;

static void on_usr(int sig)
{
    (void)sig;
    stack_t cur;
    handled++;
    if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_ONSTACK)) on_alt++;
}

static void test_handler_on_alt_stack(void **state)
{
    (void)state;
    struct sigaction old, now;
    handled = on_alt = 0;
    assert_int_equal(prof_signal_set(SIGUSR1, on_usr, SA_RESTART, &old), 0);
    assert_int_equal(sigaction(SIGUSR1, NULL, &now), 0);
    assert_true(now.sa_flags & SA_ONSTACK);
    assert_true(now.sa_flags & SA_RESTART);
    stack_t st;
    assert_int_equal(sigaltstack(NULL, &st), 0);
    assert_false(st.ss_flags & SS_DISABLE); /* ours, or one a sanitizer set */
    raise(SIGUSR1);
    assert_int_equal(handled, 1);
    assert_int_equal(on_alt, 1);
    /* a second call keeps the stack the thread has */
    stack_t again;
    assert_int_equal(prof_signal_set(SIGUSR1, on_usr, 0, NULL), 0);
    assert_int_equal(sigaltstack(NULL, &again), 0);
    assert_ptr_equal(again.ss_sp, st.ss_sp);
    sigaction(SIGUSR1, &old, NULL);
}

static void test_onstack_moves_others(void **state)
{
    (void)state;
    struct sigaction old1, old2, old3, now;
    handled = on_alt = 0;
    signal(SIGUSR2, on_usr); /* as a library would: no SA_ONSTACK */
    sigaction(SIGUSR2, NULL, &old2);
    assert_false(old2.sa_flags & SA_ONSTACK);
    sigaction(SIGUSR1, NULL, &old1);
    signal(SIGUSR1, SIG_IGN);
    sigaction(SIGPIPE, NULL, &old3);
    signal(SIGPIPE, SIG_DFL);
    assert_int_equal(prof_signals_onstack(), 0);
    sigaction(SIGUSR2, NULL, &now);
    assert_true(now.sa_flags & SA_ONSTACK);
    assert_ptr_equal(now.sa_handler, on_usr);
    raise(SIGUSR2);
    assert_int_equal(handled, 1);
    assert_int_equal(on_alt, 1);
    sigaction(SIGUSR1, NULL, &now);
    assert_ptr_equal(now.sa_handler, SIG_IGN);
    assert_false(now.sa_flags & SA_ONSTACK);
    sigaction(SIGPIPE, NULL, &now);
    assert_ptr_equal(now.sa_handler, SIG_DFL);
    assert_false(now.sa_flags & SA_ONSTACK);
    signal(SIGUSR2, SIG_DFL);
    sigaction(SIGUSR1, &old1, NULL);
    sigaction(SIGPIPE, &old3, NULL);
}

static void *read_mask(void *arg)
{
    pthread_sigmask(SIG_BLOCK, NULL, arg);
    return NULL;
}

static void test_thread_blocks_async(void **state)
{
    (void)state;
    sigset_t before, after, in_thread;
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    pthread_t t;
    assert_int_equal(prof_thread_create(&t, NULL, read_mask, &in_thread), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    static const int async[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGALRM, SIGUSR1, SIGCHLD };
    for (size_t i = 0; i < sizeof async / sizeof async[0]; i++) assert_true(sigismember(&in_thread, async[i]));
    static const int sync[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t i = 0; i < sizeof sync / sizeof sync[0]; i++) assert_false(sigismember(&in_thread, sync[i]));
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    for (int s = 1; s < NSIG; s++) assert_int_equal(sigismember(&before, s), sigismember(&after, s));
}

int test_profiler_signals(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handler_on_alt_stack),
        cmocka_unit_test(test_onstack_moves_others),
        cmocka_unit_test(test_thread_blocks_async),
    };
    return cmocka_run_group_tests_name("profiler_signals", tests, NULL, NULL);
}
