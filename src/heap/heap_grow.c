/*
 * heap_grow.c - collective growth of the mapped heap, all or nothing.
 *
 * Every PE creates its piece of the new chunk; if any PE fails (limit, out
 * of device memory) every PE drops its piece. Otherwise the descriptors go
 * round the node (symm__ipc_allgather_fd), every PE maps every piece at its
 * slot, and again all PEs agree or all unmap. Either way the PEs leave with
 * the same mapped size.
 */
#include <stdlib.h>
#include <unistd.h>

#include "runtime/runtime.h"

symm_status_t symm__heap_grow(size_t new_mapped) {
    symm__runtime_t *rt = &symm__rt;
    symm__backend_t *be = rt->be;
    const size_t off = rt->mapped, size = new_mapped - rt->mapped;
    symm__chunk_t *c = NULL;
    int *fds = NULL;
    uintptr_t *addrs = NULL;
    symm_status_t st;

    if (rt->n_chunks == rt->cap_chunks) {
        int cap = rt->cap_chunks ? 2 * rt->cap_chunks : 16;
        symm__heap_chunk_t *nc = realloc(rt->chunks, (size_t)cap * sizeof(*nc));
        st = nc ? SYMM_SUCCESS : symm__error(SYMM_ERR_NO_MEMORY, "heap growth: out of host memory");
        if (nc) {
            rt->chunks = nc;
            rt->cap_chunks = cap;
        }
        if ((st = symm__agree(st, SYMM_ERR_HEAP_EXHAUSTED, "heap growth")) != SYMM_SUCCESS)
            return st;
    }

    st = be->ops->chunk_create(be, size, &c);
    if ((st = symm__agree(st, SYMM_ERR_HEAP_EXHAUSTED, "heap growth")) != SYMM_SUCCESS)
        goto out;

    fds = malloc((size_t)rt->n_node * sizeof(int));
    addrs = malloc((size_t)rt->n_node * sizeof(uintptr_t));
    if (!fds || !addrs) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "heap growth: out of host memory");
        goto out; /* the exchange below never started: peers fail on this PE's exit */
    }
    st = symm__ipc_allgather_fd(rt->ipc, be->ops->chunk_fd(c), ++rt->ipc_tag, fds);
    if (st != SYMM_SUCCESS)
        goto out;
    for (int i = 0; i < rt->n_node; i++)
        addrs[i] = rt->slot0 + (uintptr_t)i * rt->stride + off;
    st = be->ops->chunk_map(be, c, addrs, fds, rt->n_node, rt->node_me);
    for (int i = 0; i < rt->n_node; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if ((st = symm__agree(st, SYMM_ERR_HEAP_EXHAUSTED, "heap growth")) != SYMM_SUCCESS)
        goto out;

    rt->chunks[rt->n_chunks++] = (symm__heap_chunk_t){off, size, c};
    c = NULL;
    rt->mapped = new_mapped;
    SYMM_LOG_DEBUG("heap grew to %zu bytes", new_mapped);
    st = symm__teams_update_heap_size();
out:
    if (c)
        be->ops->chunk_destroy(be, c);
    free(addrs);
    free(fds);
    return st;
}

void symm__heap_unmap_all(void) {
    symm__runtime_t *rt = &symm__rt;
    for (int i = rt->n_chunks - 1; i >= 0; i--)
        rt->be->ops->chunk_destroy(rt->be, rt->chunks[i].chunk);
    free(rt->chunks);
    rt->chunks = NULL;
    rt->n_chunks = rt->cap_chunks = 0;
    rt->mapped = 0;
}
