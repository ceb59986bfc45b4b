/* output.c — files nnbench writes besides the database (reports, exports, traces): never the
 * database itself or its -wal/-shm/-journal (same device and inode, symlinks followed), and
 * always through a new temporary file in the same directory renamed into place, so a failed
 * write leaves the old file as it was and nothing nnbench did not create is ever removed. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int store_output_check(const char *db_path, const char *out)
{
    struct stat o;
    if (!db_path || !out || stat(out, &o)) return STORE_OK; /* a new file cannot be the database */
    static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
    for (int i = 0; i < 4; i++) {
        char p[1100];
        struct stat d;
        snprintf(p, sizeof p, "%s%s", db_path, sfx[i]);
        if (!stat(p, &d) && d.st_dev == o.st_dev && d.st_ino == o.st_ino)
            return store_fail(STORE_EINVAL, "refusing to write %s: it is the database %s%s%s; "
                              "give another output file (-o)", out, db_path, i ? "'s " : "",
                              i ? sfx[i] + 1 : "");
    }
    return STORE_OK;
}

/* The process umask, without changing it (umask(2) cannot only read it, and other threads
 * may be creating files). */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    unsigned m = 022;
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Umask: %o", &m) == 1) break;
        fclose(f);
    }
    return (mode_t)m;
}

int store_output_open(const char *db_path, const char *path, store_output *o)
{
    memset(o, 0, sizeof *o);
    int st = store_output_check(db_path, path);
    if (st) return st;
    if (strlen(path) + 1 > sizeof o->path)
        return store_fail(STORE_EINVAL, "output path too long: %s", path);
    memcpy(o->path, path, strlen(path) + 1);
    const char *slash = strrchr(path, '/');
    snprintf(o->tmp, sizeof o->tmp, "%.*s.nnbench-XXXXXX", slash ? (int)(slash - path + 1) : 0, path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) return store_fail(STORE_EIO, "cannot write %s: %s", path, strerror(errno));
    struct stat old;
    mode_t mode = !stat(path, &old) ? old.st_mode & 07777 : 0666 & ~current_umask();
    if (fchmod(fd, mode)) { /* keeps mkstemp's 0600: still a correct file */ }
    if (!(o->f = fdopen(fd, "w"))) {
        st = store_fail(STORE_EIO, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        return st;
    }
    return STORE_OK;
}

int store_output_close(store_output *o, int st)
{
    if (!o->f) return st;
    int bad = ferror(o->f);
    if ((fclose(o->f) || bad) && !st)
        st = store_fail(STORE_EIO, "writing %s failed (disk full?); it was left as it was", o->path);
    o->f = NULL;
    if (!st && rename(o->tmp, o->path))
        st = store_fail(STORE_EIO, "cannot write %s: %s", o->path, strerror(errno));
    if (st) unlink(o->tmp); /* our own temporary file, never the target */
    return st;
}
