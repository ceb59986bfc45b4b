/* util.h — helpers shared by the store tests: temp dirs, file digests, CMocka includes. */
#ifndef NNBENCH_TESTS_STORE_UTIL_H
#define NNBENCH_TESTS_STORE_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fresh directory under /tmp (mode 0755 so a child dropped to 'nobody' can read it). */
static inline void tmp_dir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/nnbench-store-test-XXXXXX");
    assert_non_null(mkdtemp(out));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "chmod 755 '%s'", out);
    assert_int_equal(system(cmd), 0);
}

static inline void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", dir);
}

/* FNV-1a of a whole file, and its size: enough to see that a file was not touched. */
static inline uint64_t file_digest(const char *path, long *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint64_t h = 1469598103934665603ull;
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) { h = (h ^ (uint64_t)c) * 1099511628211ull; n++; }
    fclose(f);
    if (size) *size = n;
    return h;
}

#endif
