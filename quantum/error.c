/* error.c — quantum/'s thread-local error message. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char err_msg[512];

const char *qm_error(void) { return err_msg; }

int qm_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}
