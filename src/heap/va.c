/*
 * va.c - the heap's address space, placed so that every PE's own heap starts
 * at the same virtual address: symm_malloc then returns the same pointer on
 * every PE, and pointers can be passed between PEs as values.
 *
 * Node PE i's heap sits at slot0 + i * stride in every process. For the own
 * heap to land on a common address H, process k needs [H - k*stride,
 * H + (n-k)*stride); all of these lie in one window of (2n-1) strides
 * starting at H - (n-1)*stride. Each PE reserves such a window wherever the
 * system puts it; then the PEs try each PE's window start (and a few fixed,
 * usually empty addresses) until one is free in every process. If none is,
 * the heap still works, with a per-PE base (a warning says so).
 */
#include <stdlib.h>

#include "heap/heap.h"
#include "bootstrap/agree.h"
#include "core/log.h"

/* Fixed candidates: 16..72 TiB, far from where Linux puts libraries, stacks
 * and the program (x86-64 and aarch64 with 48-bit address spaces). */
#define SYMM__VA_FIXED_FIRST ((uintptr_t)1 << 44)
#define SYMM__VA_FIXED_STEP  ((uintptr_t)1 << 43)
#define SYMM__VA_FIXED_COUNT 8

symm_status_t symm__va_setup(void) {
    symm__heap_t *h = &symm__heap;
    symm__backend_t *be = h->job.be;
    symm__bootstrap_t *boot = h->job.boot;
    const int nranks = symm__bootstrap_nranks(boot);
    const size_t n = (size_t)h->job.n_node, me = (size_t)h->job.node_me;
    if (h->stride > SIZE_MAX / (2 * n))
        return symm__error(SYMM_ERR_ENV, "heap stride %zu times %zu PEs overflows the address space",
                           h->stride, n);
    const size_t window = (2 * n - 1) * h->stride;
    uintptr_t own = 0;
    symm_status_t st = be->ops->reserve(be, window, 0, h->heap_align, &own);
    if ((st = symm__bootstrap_agree(boot, st, SYMM_SUCCESS, "reserving heap address space")) != SYMM_SUCCESS) {
        if (own)
            be->ops->unreserve(be, own, window);
        return st;
    }
    uint64_t *starts = calloc((size_t)nranks, sizeof(uint64_t));
    if (!starts) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
        goto fail_own;
    }
    uint64_t own64 = own;
    if ((st = symm__bootstrap_allgather(boot, &own64, starts, sizeof(own64))) != SYMM_SUCCESS)
        goto fail_starts;
    uintptr_t chosen = 0;
    for (int c = 0; c < nranks + SYMM__VA_FIXED_COUNT && !chosen; c++) {
        uintptr_t cand = c < nranks ? (uintptr_t)starts[c]
                                        : SYMM__VA_FIXED_FIRST +
                                              (uintptr_t)(c - nranks) * SYMM__VA_FIXED_STEP;
        uintptr_t got = 0;
        int ok = cand == own;
        if (!ok && cand % h->heap_align == 0)
            ok = be->ops->reserve(be, window, cand, h->heap_align, &got) == SYMM_SUCCESS;
        int all_ok = 0;
        if ((st = symm__bootstrap_all_true(boot, ok, &all_ok)) != SYMM_SUCCESS) {
            if (got)
                be->ops->unreserve(be, got, window);
            goto fail_starts;
        }
        if (all_ok)
            chosen = cand;
        else if (got)
            be->ops->unreserve(be, got, window);
    }
    free(starts);
    h->va_size = window;
    if (chosen) {
        if (chosen != own)
            be->ops->unreserve(be, own, window);
        h->va_base = chosen;
        h->slot0 = chosen + (n - 1 - me) * h->stride;
    } else {
        /* (every window start is aligned to heap_align, and so every base) */
        SYMM_LOG_WARN("no address is free in every process for the heap; symmetric pointers "
                      "will differ between PEs (offsets still match)");
        h->va_base = own;
        h->slot0 = own;
    }
    return SYMM_SUCCESS;
fail_starts:
    free(starts);
fail_own:
    be->ops->unreserve(be, own, window);
    return st;
}

void symm__va_release(void) {
    symm__heap_t *h = &symm__heap;
    if (h->va_base && h->job.be)
        h->job.be->ops->unreserve(h->job.be, h->va_base, h->va_size);
    h->va_base = h->slot0 = 0;
    h->va_size = 0;
}
