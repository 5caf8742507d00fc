/*
 * heap.c - the heap's state, its set-up and teardown, and the internal
 * allocation calls (heap.h). The public symm_malloc family, which first
 * checks that every PE passed the same arguments, is src/runtime/malloc.c.
 */
#include <stdlib.h>
#include <string.h>

#include "heap/heap.h"
#include "bootstrap/agree.h"
#include "core/log.h"

symm__heap_t symm__heap;

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Agree on stride, granularity, limit and growth step: every PE must use the
 * same ones, or offsets and mappings would differ. */
static symm_status_t agree_layout(void) {
    symm__heap_t *h = &symm__heap;
    const symm__heap_job_t *job = &h->job;
    int nranks = symm__bootstrap_nranks(job->boot);
    uint64_t mine[4] = {job->be->stride_hint, job->be->granularity, job->limit, job->chunk};
    uint64_t *all = calloc((size_t)nranks * 4, sizeof(uint64_t));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "init: out of host memory");
    symm_status_t st = symm__bootstrap_allgather(job->boot, mine, all, sizeof(mine));
    if (st != SYMM_SUCCESS) {
        free(all);
        return st;
    }
    uint64_t stride = 0, gran = 1, limit = UINT64_MAX, chunk = 0;
    for (int r = 0; r < nranks; r++) {
        const uint64_t *v = all + 4 * r;
        stride = v[0] > stride ? v[0] : stride;
        gran = v[1] > gran ? v[1] : gran; /* powers of two: the max is a multiple of all */
        if (v[2] && v[2] < limit)
            limit = v[2];
        chunk = v[3] > chunk ? v[3] : chunk;
    }
    free(all);
    stride = round_up(stride, gran);
    if (limit > stride)
        limit = stride;
    limit = limit / gran * gran;
    chunk = chunk ? round_up(chunk, gran) : gran;
    if (limit < gran)
        return symm__error(SYMM_ERR_ENV, "SYMM_HEAP_LIMIT (%llu) is below the allocation "
                           "granularity (%llu bytes)", (unsigned long long)job->limit,
                           (unsigned long long)gran);
    h->stride = stride;
    h->limit = limit;
    h->chunk_bytes = chunk;
    /* Heap bases aligned to the largest power of two dividing the stride
     * (va.c reserves so), at most SYMM__HEAP_ALIGN_MAX: symm_align's
     * offsets then give pointers aligned as asked, on every PE. */
    h->heap_align = stride & (~stride + 1);
    if (h->heap_align > SYMM__HEAP_ALIGN_MAX)
        h->heap_align = SYMM__HEAP_ALIGN_MAX;
    SYMM_LOG_INFO("heap: stride %zu, limit %zu, growth step %zu, granularity %llu, base alignment %zu",
                  h->stride, h->limit, h->chunk_bytes, (unsigned long long)gran, h->heap_align);
    return SYMM_SUCCESS;
}

/* A backend that maps the heap whole (heap_open): nothing grows later. */
static symm_status_t setup_whole(void) {
    symm__heap_t *h = &symm__heap;
    symm__backend_t *be = h->job.be;
    symm__heap_place_t place;
    memset(&place, 0, sizeof place);
    symm_status_t st = be->ops->heap_open(be, h->job.limit, &place);
    if (st != SYMM_SUCCESS)
        return st;
    h->whole = 1;
    h->base = place.base;
    h->stride = place.stride;
    h->limit = h->mapped = h->chunk_bytes = place.size;
    h->ldst_first = place.ldst_first;
    h->ldst_count = place.ldst_count;
    SYMM_LOG_INFO("heap: %zu bytes mapped whole by the %s backend", h->limit, be->ops->name);
    return SYMM_SUCCESS;
}

symm_status_t symm__heap_setup(const symm__heap_job_t *job) {
    symm__heap_t *h = &symm__heap;
    symm_status_t st;
    memset(h, 0, sizeof(*h));
    h->job = *job;
    h->me = symm__bootstrap_rank(job->boot);
    if (job->be->ops->heap_open) {
        if ((st = setup_whole()) != SYMM_SUCCESS)
            goto fail;
    } else {
        if ((st = agree_layout()) != SYMM_SUCCESS)
            goto fail;
        if ((st = symm__va_setup()) != SYMM_SUCCESS)
            goto fail;
        /* one node (the runtime checks it): node PE i is world PE i */
        h->base = h->slot0 + (uintptr_t)job->node_me * h->stride;
        h->ldst_first = 0;
        h->ldst_count = job->n_node;
    }
    st = symm__alloc_create(h->limit, &h->alloc);
    if (st != SYMM_SUCCESS)
        st = symm__error(st, "creating the heap allocator (limit %zu)", h->limit);
    if ((st = symm__bootstrap_agree(job->boot, st, SYMM_SUCCESS, "heap allocator creation")) != SYMM_SUCCESS)
        goto fail;
    return SYMM_SUCCESS;
fail:
    symm__heap_teardown();
    return st;
}

void symm__heap_teardown(void) {
    symm__heap_t *h = &symm__heap;
    symm__alloc_destroy(h->alloc);
    if (h->whole) {
        h->job.be->ops->heap_close(h->job.be);
    } else {
        symm__heap_unmap_all();
        symm__va_release();
    }
    memset(h, 0, sizeof(*h));
}

void symm__heap_set_on_grow(symm_status_t (*fn)(void *arg), void *arg) {
    symm__heap.on_grow = fn;
    symm__heap.on_grow_arg = arg;
}

int symm__heap_offset(const void *p, size_t n, size_t *off) {
    uintptr_t a = (uintptr_t)p, base = symm__heap_base();
    if (!p || n == 0 || !symm__heap.mapped || a < base || a - base >= symm__heap.mapped ||
        n > symm__heap.mapped - (a - base))
        return 0;
    if (off)
        *off = a - base;
    return 1;
}

void *symm__heap_peer(const void *p, int pe) {
    const symm__heap_t *h = &symm__heap;
    size_t off;
    if (!symm__heap_offset(p, 1, &off))
        return NULL;
    if (pe >= h->ldst_first && pe < h->ldst_first + h->ldst_count)
        return (void *)(h->base + (uintptr_t)((int64_t)(pe - h->me) * (int64_t)h->stride) + off);
    if (h->whole && h->job.be->ops->peer_ptr)
        return h->job.be->ops->peer_ptr(h->job.be, p, pe);
    return NULL;
}

symm_status_t symm__heap_alloc(size_t size, size_t alignment, int zero, size_t *offset) {
    symm__heap_t *h = &symm__heap;
    size_t off = 0;
    symm_status_t st = symm__alloc_place(h->alloc, size, alignment, &off);
    if (st == SYMM_ERR_HEAP_EXHAUSTED)
        return symm__error(st, "no free range of %zu bytes aligned to %zu in the heap (limit %zu "
                           "bytes, %zu in use; raise SYMM_HEAP_LIMIT/SYMM_HEAP_RESERVE)",
                           size, alignment, h->limit, symm__alloc_live_bytes(h->alloc));
    if (st != SYMM_SUCCESS)
        return symm__error(st, "allocating %zu bytes aligned to %zu", size, alignment);
    size_t end = off + round_up(size, SYMM__ALLOC_MIN_ALIGN);
    if (end > h->mapped) {
        size_t target = round_up(end, h->chunk_bytes);
        if (target > h->limit)
            target = h->limit; /* end <= limit: the allocator never places past it */
        if ((st = symm__heap_grow(target)) != SYMM_SUCCESS)
            return st;
    }
    if ((st = symm__alloc_commit(h->alloc, off, size)) != SYMM_SUCCESS)
        return symm__error(st, "recording a %zu-byte block at offset %zu", size, off);
    if (zero) {
        symm__backend_t *be = h->job.be;
        st = be->ops->memset_sync(be, (void *)(symm__heap_base() + off), 0, size);
        /* No PE may store into a peer's copy before that peer zeroed it:
         * the agreement doubles as the barrier. */
        if ((st = symm__bootstrap_agree(h->job.boot, st, SYMM_SUCCESS, "zeroing a heap block")) !=
            SYMM_SUCCESS) {
            (void)symm__alloc_free(h->alloc, off, NULL);
            return st;
        }
    }
    *offset = off;
    return SYMM_SUCCESS;
}

symm_status_t symm__heap_malloc(size_t size, int zero, void **ptr) {
    size_t off;
    symm_status_t st = symm__heap_alloc(size, SYMM__ALLOC_MIN_ALIGN, zero, &off);
    if (st == SYMM_SUCCESS)
        *ptr = (void *)(symm__heap_base() + off);
    return st;
}

symm_status_t symm__heap_release(void *p) {
    size_t off;
    if (!symm__heap_offset(p, 1, &off))
        return symm__error(SYMM_ERR_NOT_SYMMETRIC, "releasing %p: not in the symmetric heap", p);
    symm_status_t st = symm__alloc_free(symm__heap.alloc, off, NULL);
    if (st != SYMM_SUCCESS)
        return symm__error(st, "releasing %p (offset %zu): not the start of a live block", p, off);
    return SYMM_SUCCESS;
}
