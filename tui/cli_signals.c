/* cli_signals.c — Ctrl-C, SIGTERM and SIGHUP (kill, a closed terminal) stop a training
 * command the one way, for `run` and `resume` alike: the run stops at its next step, takes
 * its checkpoint, flushes what it logged and is stored as interrupted, and the command
 * exits 128 + the signal. */
#include <signal.h>
#include <string.h>

#include "cli.h"

static eng_run *volatile stop_run;
static volatile sig_atomic_t stop_sig;  /* the signal that stopped us, 0 if none */
static volatile sig_atomic_t stop_dist; /* under mpirun with more than one rank */
static const int stop_signals[3] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction stop_old[3];

static void on_stop(int sig)
{
    if (sig == SIGTERM && stop_dist) eng_dist_request_abort(); /* mpirun tears the job down: a rank died */
    else stop_sig = sig;
    eng_stop_builds(); /* a graph still being built (no run to stop yet) stops too */
    eng_run *r = stop_run;
    if (r) eng_run_request_stop(r);
}

void cli_stop_install(int dist_job)
{
    stop_dist = dist_job;
    stop_sig = 0;
    /* SA_RESETHAND: a second Ctrl-C ends the process at once. On an alternate stack, never
     * on that of a GEMM kernel (profiler/signals.c). */
    for (int i = 0; i < 3; i++) prof_signal_set(stop_signals[i], on_stop, SA_RESETHAND, &stop_old[i]);
    prof_signals_onstack(); /* and the handlers libraries set (MPI's, PAPI's) */
}

void cli_stop_restore(void)
{
    for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &stop_old[i], NULL);
    stop_run = NULL;
}

void cli_stop_target(eng_run *r)
{
    stop_run = r;
    if (r && stop_sig) eng_run_request_stop(r); /* the signal came between two runs */
}

int cli_stop_signal(void) { return stop_sig; }
