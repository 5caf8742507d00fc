/*
 * malloc.c - symm_malloc / calloc / align / free / ptr / heap_info: the
 * public face of the heap (src/heap).
 *
 * Every collective call first gathers (op, size, alignment) from every PE, so
 * a PE that disagrees is reported on every PE and nothing happens anywhere;
 * after that all PEs run the same allocator steps and get the same offsets.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

enum { OP_MALLOC = 1, OP_CALLOC = 2, OP_ALIGN = 3, OP_FREE = 4 };
/* rec.bad: */
enum { REC_OK = 0, REC_BAD_ARG = 1, REC_NULL = 2, REC_OUTSIDE = 3 };

typedef struct heap_rec {
    uint32_t op;
    int32_t bad;
    uint64_t size;  /* bytes, or the offset for a free */
    uint64_t align;
} heap_rec_t;

static const char *op_name(uint32_t op) {
    switch (op) {
    case OP_MALLOC: return "symm_malloc";
    case OP_CALLOC: return "symm_calloc";
    case OP_ALIGN: return "symm_align";
    case OP_FREE: return "symm_free";
    default: return "?";
    }
}

/* Gather every PE's record; SYMM_ERR_MISMATCH (same message everywhere,
 * listing each PE's arguments) when they differ. */
static symm_status_t gather_check(const heap_rec_t *mine, const char *what) {
    symm__runtime_t *rt = &symm__rt;
    heap_rec_t *all = calloc((size_t)rt->nranks, sizeof(*all));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "%s: out of host memory", what);
    symm_status_t st = symm__bootstrap_allgather(rt->boot, mine, all, sizeof(*mine));
    if (st != SYMM_SUCCESS)
        goto out;
    int same = 1;
    for (int r = 1; r < rt->nranks; r++)
        same &= all[r].op == all[0].op && all[r].bad == all[0].bad &&
                all[r].size == all[0].size && all[r].align == all[0].align;
    if (!same) {
        char msg[1200];
        size_t len = 0;
        for (int r = 0; r < rt->nranks && len < sizeof(msg) - 100; r++) {
            const heap_rec_t *x = &all[r];
            int n;
            if (x->op == OP_FREE)
                n = snprintf(msg + len, sizeof(msg) - len, "%sPE %d: %s(%s %" PRIu64 ")",
                             r ? "; " : "", r, op_name(x->op),
                             x->bad == REC_NULL ? "NULL" : x->bad == REC_OUTSIDE ? "outside heap"
                                                                                 : "offset",
                             x->bad == REC_OK ? x->size : 0);
            else
                n = snprintf(msg + len, sizeof(msg) - len,
                             "%sPE %d: %s(size %" PRIu64 ", alignment %" PRIu64 "%s)",
                             r ? "; " : "", r, op_name(x->op), x->size, x->align,
                             x->bad ? ", invalid" : "");
            if (n < 0)
                break;
            len += (size_t)n;
        }
        if (len >= sizeof(msg) - 100)
            snprintf(msg + sizeof(msg) - 100, 100, "; ...");
        st = symm__error(SYMM_ERR_MISMATCH, "%s: arguments differ across PEs: %s", what, msg);
    }
out:
    free(all);
    return st;
}

static symm_status_t user_alloc(uint32_t op, size_t size, size_t alignment, int bad, void **ptr) {
    const char *what = op_name(op);
    SYMM__REQUIRE_INIT(what);
    if (!ptr)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: ptr is NULL", what);
    heap_rec_t rec = {op, bad, size, alignment};
    symm_status_t st = gather_check(&rec, what);
    if (st != SYMM_SUCCESS)
        return st;
    if (bad == 2)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "%s: alignment %zu is above the %zu bytes every PE's heap base is aligned to "
                           "(a power-of-two SYMM_HEAP_RESERVE raises it, up to 1 GiB)",
                           what, alignment, symm__heap.heap_align);
    if (bad)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s", what,
                           op == OP_CALLOC ? "count * size overflows"
                                           : "alignment must be a power of two");
    if (size == 0) {
        *ptr = NULL;
        return SYMM_SUCCESS;
    }
    size_t off;
    if ((st = symm__heap_alloc(size, alignment, op == OP_CALLOC, &off)) != SYMM_SUCCESS)
        return st;
    *ptr = (void *)(symm__heap_base() + off);
    return SYMM_SUCCESS;
}

symm_status_t symm_malloc(size_t size, void **ptr) {
    return user_alloc(OP_MALLOC, size, SYMM__ALLOC_MIN_ALIGN, 0, ptr);
}

symm_status_t symm_calloc(size_t count, size_t size, void **ptr) {
    int overflow = size != 0 && count > SIZE_MAX / size;
    return user_alloc(OP_CALLOC, overflow ? 0 : count * size, SYMM__ALLOC_MIN_ALIGN, overflow, ptr);
}

symm_status_t symm_align(size_t alignment, size_t size, void **ptr) {
    /* the offset's alignment is the pointer's only up to the bases' own */
    int bad = alignment == 0 || (alignment & (alignment - 1)) != 0 ? 1
            : symm__rt.initialized && alignment > symm__heap.heap_align ? 2
                                                                        : 0;
    return user_alloc(OP_ALIGN, size, alignment, bad, ptr);
}

symm_status_t symm_free(void *ptr) {
    SYMM__REQUIRE_INIT("symm_free");
    symm__runtime_t *rt = &symm__rt;
    heap_rec_t rec = {OP_FREE, REC_OK, 0, 0};
    size_t off = 0;
    if (!ptr)
        rec.bad = REC_NULL;
    else if (!symm__heap_offset(ptr, 1, &off))
        rec.bad = REC_OUTSIDE;
    rec.size = off;
    /* Kernels of this PE that use the block finish first. The gather below
     * returns on a PE only once every PE contributed, i.e. once every PE's
     * device is drained too: it is the barrier that makes reuse safe. */
    symm_status_t st_sync = rt->be->ops->synchronize(rt->be);
    symm_status_t st = gather_check(&rec, "symm_free");
    if (st != SYMM_SUCCESS)
        return st;
    if (rec.bad == REC_NULL)
        return st_sync;
    if (rec.bad == REC_OUTSIDE)
        return symm__error(SYMM_ERR_NOT_SYMMETRIC, "symm_free: %p is not in the symmetric heap", ptr);
    size_t start = 0;
    st = symm__alloc_free(symm__heap.alloc, off, NULL);
    if (st == SYMM_ERR_INVALID_POINTER)
        return symm__alloc_lookup(symm__heap.alloc, off, &start, NULL)
                   ? symm__error(st, "symm_free: %p is inside the block at offset %zu, not its start",
                                 ptr, start)
                   : symm__error(st, "symm_free: %p (offset %zu) is not a live allocation (already "
                                 "freed, or never allocated)", ptr, off);
    if (st != SYMM_SUCCESS)
        return symm__error(st, "symm_free: %p", ptr);
    return st_sync;
}

void *symm_ptr(const void *ptr, int pe) {
    if (!symm__rt.initialized || pe < 0 || pe >= symm__rt.nranks)
        return NULL;
    return symm__heap_peer(ptr, pe); /* the window's arithmetic, else the backend's answer */
}

symm_status_t symm_heap_info(size_t *mapped, size_t *limit) {
    SYMM__REQUIRE_INIT("symm_heap_info");
    if (!mapped || !limit)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_heap_info: NULL output");
    *mapped = symm__heap.mapped;
    *limit = symm__heap.limit;
    return SYMM_SUCCESS;
}
