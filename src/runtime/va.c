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

#include "runtime/runtime.h"

/* Fixed candidates: 16..72 TiB, far from where Linux puts libraries, stacks
 * and the program (x86-64 and aarch64 with 48-bit address spaces). */
#define SYMM__VA_FIXED_FIRST ((uintptr_t)1 << 44)
#define SYMM__VA_FIXED_STEP  ((uintptr_t)1 << 43)
#define SYMM__VA_FIXED_COUNT 8

/* Every PE says whether `mine` holds; 1 on every PE if all do. */
static symm_status_t all_true(int mine, int *all_ok) {
    int32_t m = mine != 0;
    int32_t *all = calloc((size_t)symm__rt.nranks, sizeof(int32_t));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    symm_status_t st = symm__bootstrap_allgather(symm__rt.boot, &m, all, sizeof(m));
    int ok = 1;
    for (int r = 0; st == SYMM_SUCCESS && r < symm__rt.nranks; r++)
        ok &= all[r] != 0;
    free(all);
    if (st == SYMM_SUCCESS)
        *all_ok = ok;
    return st;
}

symm_status_t symm__va_setup(void) {
    symm__runtime_t *rt = &symm__rt;
    symm__backend_t *be = rt->be;
    const size_t n = (size_t)rt->n_node, me = (size_t)rt->node_me;
    if (rt->stride > SIZE_MAX / (2 * n))
        return symm__error(SYMM_ERR_ENV, "heap stride %zu times %zu PEs overflows the address space",
                           rt->stride, n);
    const size_t window = (2 * n - 1) * rt->stride;
    uintptr_t own = 0;
    symm_status_t st = be->ops->reserve(be, window, 0, rt->heap_align, &own);
    if ((st = symm__agree(st, SYMM_SUCCESS, "reserving heap address space")) != SYMM_SUCCESS) {
        if (own)
            be->ops->unreserve(be, own, window);
        return st;
    }
    uint64_t *starts = calloc((size_t)rt->nranks, sizeof(uint64_t));
    if (!starts) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
        goto fail_own;
    }
    uint64_t own64 = own;
    if ((st = symm__bootstrap_allgather(rt->boot, &own64, starts, sizeof(own64))) != SYMM_SUCCESS)
        goto fail_starts;
    uintptr_t chosen = 0;
    for (int c = 0; c < rt->nranks + SYMM__VA_FIXED_COUNT && !chosen; c++) {
        uintptr_t cand = c < rt->nranks ? (uintptr_t)starts[c]
                                        : SYMM__VA_FIXED_FIRST +
                                              (uintptr_t)(c - rt->nranks) * SYMM__VA_FIXED_STEP;
        uintptr_t got = 0;
        int ok = cand == own;
        if (!ok && cand % rt->heap_align == 0)
            ok = be->ops->reserve(be, window, cand, rt->heap_align, &got) == SYMM_SUCCESS;
        int all_ok = 0;
        if ((st = all_true(ok, &all_ok)) != SYMM_SUCCESS) {
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
    rt->va_size = window;
    if (chosen) {
        if (chosen != own)
            be->ops->unreserve(be, own, window);
        rt->va_base = chosen;
        rt->slot0 = chosen + (n - 1 - me) * rt->stride;
    } else {
        /* (every window start is aligned to heap_align, and so every base) */
        SYMM_LOG_WARN("no address is free in every process for the heap; symmetric pointers "
                      "will differ between PEs (offsets still match)");
        rt->va_base = own;
        rt->slot0 = own;
    }
    return SYMM_SUCCESS;
fail_starts:
    free(starts);
fail_own:
    be->ops->unreserve(be, own, window);
    return st;
}

void symm__va_release(void) {
    symm__runtime_t *rt = &symm__rt;
    if (rt->va_base && rt->be)
        rt->be->ops->unreserve(rt->be, rt->va_base, rt->va_size);
    rt->va_base = rt->slot0 = 0;
    rt->va_size = 0;
}
