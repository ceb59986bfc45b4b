/* replay.c — a main() for the fuzz harnesses without libFuzzer (gcc, `make check`): runs
 * every file named, or every file in every directory named, through
 * LLVMFuzzerTestOneInput once. Exit 0 when all ran; a crash is the sanitizers' to report. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) { uint8_t *nb = realloc(buf, cap *= 2); if (!nb) { free(buf); buf = NULL; } else buf = nb; }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "replay: out of memory for %s\n", path); return 1; }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    int bad = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) { fprintf(stderr, "replay: no %s\n", argv[i]); bad = 1; continue; }
        if (!S_ISDIR(st.st_mode)) { bad |= run_file(argv[i]); files++; continue; }
        DIR *d = opendir(argv[i]);
        if (!d) { fprintf(stderr, "replay: cannot read %s\n", argv[i]); bad = 1; continue; }
        char **names = NULL;
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char **nn = realloc(names, (n + 1) * sizeof *names);
            if (!nn) break;
            names = nn;
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[n] = malloc(l);
            if (names[n]) snprintf(names[n++], l, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp);   /* the same order everywhere */
        for (size_t k = 0; k < n; k++) { bad |= run_file(names[k]); files++; free(names[k]); }
        free(names);
    }
    printf("replayed %d input%s\n", files, files == 1 ? "" : "s");
    return bad;
}
