/* fuzz.h — what the fuzz harnesses share: each harness defines LLVMFuzzerTestOneInput;
 * built with clang's libFuzzer by `make fuzz`, or linked with replay.c (any compiler) so
 * `make test` / `make check` run every file of tests/fuzz/corpus/ through it. */
#ifndef NNBENCH_FUZZ_H
#define NNBENCH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir_[64];

static void fuzz_cleanup_(void)
{
    if (!fuzz_dir_[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_);
    if (system(cmd)) { /* best effort */ }
}

/* Writes n bytes to NAME in this process's scratch directory (made on first use, removed
 * at exit); returns the path. The loaders under test read real files. */
static const char *fuzz_file(const char *name, const void *data, size_t n)
{
    if (!fuzz_dir_[0]) {
        snprintf(fuzz_dir_, sizeof fuzz_dir_, "/tmp/nnbench-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir_)) abort();
        atexit(fuzz_cleanup_);
    }
    static char path[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", fuzz_dir_, name);
    FILE *f = fopen(path[k], "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) abort();
    return path[k];
}

#endif
