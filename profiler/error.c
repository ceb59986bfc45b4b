/* error.c — the profiler's last error message (prof_error), thread-local, and the message
 * helpers every profiler file uses to set it. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char err_buf[512];

const char *prof_error(void) { return err_buf; }

void prof_internal_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
}

void prof_internal_say(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}
