/* signals.c — the signals nnbench handles and the threads it starts, set up so that a
 * handler never runs on the stack of a thread inside a GEMM kernel.
 *
 * A handler runs on the stack of the thread the signal interrupts, just below its stack
 * pointer, unless the handler was installed with SA_ONSTACK and the thread has an
 * alternate stack. Interrupting Debian's oneDNN 2.6 inside dnnl_sgemm that way corrupted
 * the heap: Ctrl-C or a SIGTERM during a Fashion MLP run (1 or 2 threads, the oneDNN
 * kernels) often ended in "corrupted size vs. prev_size" or a segfault instead of the
 * interrupted run it should store. tests/engine/gemm.c (test_signals_during_gemm) replays
 * it: the engine's GEMM under an interval timer whose handler only counts, which fails
 * with SA_ONSTACK left out and passes with it.
 *
 * So: every handler nnbench installs runs on an alternate stack (prof_signal_set), the
 * handlers a library installed are moved there too (prof_signals_onstack: ncurses'
 * SIGWINCH and SIGTSTP), and every thread nnbench starts blocks the asynchronous signals
 * (prof_thread_create), so that a signal sent to the process reaches the thread that
 * installed the handlers and has the stack. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The calling thread's alternate stack, made once and kept for the thread's life (a
 * handler may run on it until the process ends): 64 KiB, or four times what this CPU's
 * signal frame needs when that is more (AVX-512 state makes the frame several KiB; the
 * workbench's crash handler restores the terminal from it). */
static _Thread_local void *alt_stack;

static int ensure_alt_stack(void)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return 0; /* one is set (ours, ASan's) */
    long need = sysconf(_SC_SIGSTKSZ);
    size_t n = need > 0 && (size_t)need * 4 > (64u << 10) ? (size_t)need * 4 : (64u << 10);
    void *p = alt_stack ? alt_stack : malloc(n);
    if (!p) return -1;
    stack_t ss = { .ss_sp = p, .ss_size = n, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL)) {
        if (p != alt_stack) free(p);
        return -1;
    }
    alt_stack = p;
    return 0;
}

int prof_signal_set(int sig, void (*fn)(int), int flags, struct sigaction *old)
{
    if (ensure_alt_stack()) return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, old);
}

int prof_signals_onstack(void)
{
    if (ensure_alt_stack()) return -1;
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa)) continue;
        int fn = (sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
        if (!fn || (sa.sa_flags & SA_ONSTACK)) continue;
        sa.sa_flags |= SA_ONSTACK;
        sigaction(sig, &sa, NULL);
    }
    return 0;
}

/* The signals a thread nnbench starts blocks: every one but those the kernel sends to the
 * thread that caused them (a fault, a bad instruction), which must stay deliverable. */
static void async_signals(sigset_t *set)
{
    sigfillset(set);
    static const int sync[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT };
    for (size_t i = 0; i < sizeof sync / sizeof sync[0]; i++) sigdelset(set, sync[i]);
}

int prof_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    sigset_t block, saved;
    async_signals(&block);
    int rc = pthread_sigmask(SIG_BLOCK, &block, &saved);
    if (rc) return rc;
    rc = pthread_create(t, attr, fn, arg); /* the new thread starts with the mask blocked */
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return rc;
}
