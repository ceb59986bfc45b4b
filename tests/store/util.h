/* util.h — helpers shared by the store tests: temp dirs, file digests, CMocka includes. */
#ifndef NNBENCH_TESTS_STORE_UTIL_H
#define NNBENCH_TESTS_STORE_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
    char cmd[2048];
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

/* Forks a process that holds the write lock of the database at path (BEGIN IMMEDIATE and an
 * uncommitted params row (1,'lock','1')) and returns once it holds it. The lock is kept
 * until lock_holder_release (or 10 s), so a caller that waits for it sees it gone first. */
typedef struct {
    pid_t pid;
    int release;             /* write end: one byte lets the holder commit */
} lock_holder;

static inline lock_holder lock_holder_start(const char *path)
{
    int locked[2], release[2];
    assert_int_equal(pipe(locked), 0);
    assert_int_equal(pipe(release), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sqlite3 *db;
        sqlite3_open(path, &db);
        sqlite3_exec(db, "BEGIN IMMEDIATE; INSERT INTO params VALUES(1,'lock','1');", NULL, NULL, NULL);
        if (write(locked[1], "x", 1) != 1) _exit(2);
        struct pollfd pf = { .fd = release[0], .events = POLLIN };
        poll(&pf, 1, 10000);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
        _exit(0);
    }
    char c;
    assert_int_equal(read(locked[0], &c, 1), 1);
    close(locked[0]);
    close(locked[1]);
    close(release[0]);
    return (lock_holder){ child, release[1] };
}

/* Lets the holder commit its row and waits for it to exit. */
static inline void lock_holder_release(lock_holder *h)
{
    assert_int_equal(write(h->release, "x", 1), 1);
    waitpid(h->pid, NULL, 0);
    close(h->release);
}

#endif
