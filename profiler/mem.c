/* mem.c — the engine's one allocator wrapper: 64-byte aligned blocks with a size header,
 * process-wide live/peak/total byte counts (atomics, also published as SDEs), peak RSS. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "internal.h"

/* The header is a full alignment unit so that the user block stays 64-byte aligned (AVX-512
 * loads, no false sharing between blocks); it stores the requested size for prof_free. */
#define PROF_ALIGN 64
#define PROF_MAGIC 0x6e6e62656e6368ULL /* "nnbench": catches frees of foreign pointers */

typedef struct {
    size_t size;
    uint64_t magic;
} block_header;

_Static_assert(sizeof(block_header) <= PROF_ALIGN, "header must fit in one alignment unit");

static atomic_size_t mem_live, mem_peak, mem_total;

static void note_alloc(size_t n)
{
    size_t live = atomic_fetch_add_explicit(&mem_live, n, memory_order_relaxed) + n;
    atomic_fetch_add_explicit(&mem_total, n, memory_order_relaxed);
    size_t peak = atomic_load_explicit(&mem_peak, memory_order_relaxed);
    while (live > peak &&
           !atomic_compare_exchange_weak_explicit(&mem_peak, &peak, live, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
    prof_internal_charge(n, live);
}

void *prof_malloc(size_t n)
{
    if (n > SIZE_MAX - PROF_ALIGN) return NULL;
    void *raw = NULL;
    if (posix_memalign(&raw, PROF_ALIGN, PROF_ALIGN + n)) return NULL;
    block_header *h = raw;
    h->size = n;
    h->magic = PROF_MAGIC;
    note_alloc(n);
    return (char *)raw + PROF_ALIGN;
}

void *prof_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    size_t n = count * size;
    void *p = prof_malloc(n);
    if (p) memset(p, 0, n);
    return p;
}

void prof_free(void *ptr)
{
    if (!ptr) return;
    block_header *h = (block_header *)((char *)ptr - PROF_ALIGN);
    /* A pointer that did not come from prof_malloc would corrupt the counts: stop here. */
    if (h->magic != PROF_MAGIC) abort();
    h->magic = 0;
    size_t live = atomic_fetch_sub_explicit(&mem_live, h->size, memory_order_relaxed) - h->size;
    free(h);
    prof_internal_charge(0, live);
}

size_t prof_mem_live(void) { return atomic_load_explicit(&mem_live, memory_order_relaxed); }
size_t prof_mem_peak(void) { return atomic_load_explicit(&mem_peak, memory_order_relaxed); }
size_t prof_mem_total(void) { return atomic_load_explicit(&mem_total, memory_order_relaxed); }

void prof_mem_reset_peak(void)
{
    atomic_store_explicit(&mem_peak, prof_mem_live(), memory_order_relaxed);
}

size_t prof_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
