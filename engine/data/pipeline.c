/* pipeline.c — the input pipeline's transforms: on-the-fly image augmentation (random
 * shift, horizontal flip, seeded per row) and the throttled source for I/O studies. */
#include "data_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "../rng.h"

int eng_augment_parse(const char *s, eng_augment *out, char *why, size_t cap)
{
    *out = (eng_augment){ 0, 0 };
    char buf[128];
    if (strlen(s) >= sizeof buf) { snprintf(why, cap, "too long"); return -1; }
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        size_t n = strlen(tok);
        while (n && isspace((unsigned char)tok[n - 1])) tok[--n] = '\0';
        if (!n || !strcmp(tok, "none")) continue;
        if (!strcmp(tok, "flip")) { out->flip = 1; continue; }
        if (!strncmp(tok, "shift:", 6)) {
            char *end;
            errno = 0;
            long v = strtol(tok + 6, &end, 10);
            if (end == tok + 6 || *end || errno || v < 1 || v > 64) {
                snprintf(why, cap, "'%s': the shift is a whole number of pixels from 1 to 64 (e.g. shift:2)", tok);
                return -1;
            }
            out->shift = (int)v;
            continue;
        }
        snprintf(why, cap, "'%s' is not a transform; use shift:N, flip, or none (e.g. augment = shift:2, flip)", tok);
        return -1;
    }
    return 0;
}

void eng_augment_row(const eng_augment *a, const int shape[3], uint64_t seed, uint64_t pos,
                     const float *src, float *dst)
{
    int C = shape[0], H = shape[1], W = shape[2];
    eng_rng r;
    eng_rng_seed(&r, seed ^ (pos * 0x9e3779b97f4a7c15ull), ENG_STREAM_DATA_AUGMENT);
    int dy = 0, dx = 0, flip = 0;
    if (a->shift > 0) {
        dy = (int)eng_rng_below(&r, (uint64_t)(2 * a->shift + 1)) - a->shift;
        dx = (int)eng_rng_below(&r, (uint64_t)(2 * a->shift + 1)) - a->shift;
    }
    if (a->flip) flip = eng_rng_next(&r) >> 63;
    for (int c = 0; c < C; c++) {
        const float *s = src + (size_t)c * H * W;
        float *d = dst + (size_t)c * H * W;
        float bg = s[0];
        for (int y = 0; y < H; y++) {
            int sy = y - dy;
            for (int x = 0; x < W; x++) {
                int sx = (flip ? W - 1 - x : x) - dx;
                d[(size_t)y * W + x] = sy >= 0 && sy < H && sx >= 0 && sx < W ? s[(size_t)sy * W + sx] : bg;
            }
        }
    }
}

/* ---- the throttled source ----------------------------------------------------------- */

struct eng_throttle {
    double ns_per_byte;
    atomic_llong busy_until;  /* CLOCK_MONOTONIC ns at which the device is free again */
};

eng_throttle *eng_throttle_new(double mbps)
{
    eng_throttle *t = prof_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ns_per_byte = mbps > 0 ? 1e3 / mbps : 0;   /* 1 MB/s = 1e6 bytes per 1e9 ns */
    atomic_init(&t->busy_until, 0);
    return t;
}

void eng_throttle_free(eng_throttle *t) { prof_free(t); }

/* CLOCK_MONOTONIC itself, not prof_now_ns (which may be PAPI's clock): the deadline goes to
 * clock_nanosleep on this clock. */
static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void eng_throttle_read(eng_throttle *t, size_t bytes, int64_t latency_ns)
{
    if (!t) return;
#ifdef PR_SET_TIMERSLACK
    /* The device is ready at its deadline: a thread that sleeps for it wakes within a few
     * us of it instead of Linux's default 50 us timer slack, which every batch read paid on
     * top of the device's time (once per thread) */
    static _Thread_local int precise;
    if (!precise) {
        precise = 1;
        (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* refused: the default slack */
    }
#endif
    long long dur = (long long)(t->ns_per_byte * (double)bytes) + latency_ns;
    if (dur <= 0) return;
    long long now = mono_ns(), cur = atomic_load(&t->busy_until), end;
    do end = (cur > now ? cur : now) + dur;
    while (!atomic_compare_exchange_weak(&t->busy_until, &cur, end));
    struct timespec ts = { .tv_sec = end / 1000000000LL, .tv_nsec = end % 1000000000LL };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}
