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

#include "heap/heap.h"
#include "bootstrap/agree.h"
#include "core/log.h"

symm_status_t symm__heap_grow(size_t new_mapped) {
    symm__heap_t *h = &symm__heap;
    symm__backend_t *be = h->job.be;
    symm__bootstrap_t *boot = h->job.boot;
    const int n_node = h->job.n_node;
    const size_t off = h->mapped, size = new_mapped - h->mapped;
    symm__chunk_t *c = NULL;
    int *fds = NULL;
    uintptr_t *addrs = NULL;
    symm_status_t st;

    if (h->n_chunks == h->cap_chunks) {
        int cap = h->cap_chunks ? 2 * h->cap_chunks : 16;
        symm__heap_chunk_t *nc = realloc(h->chunks, (size_t)cap * sizeof(*nc));
        st = nc ? SYMM_SUCCESS : symm__error(SYMM_ERR_NO_MEMORY, "heap growth: out of host memory");
        if (nc) {
            h->chunks = nc;
            h->cap_chunks = cap;
        }
        if ((st = symm__bootstrap_agree(boot, st, SYMM_ERR_HEAP_EXHAUSTED, "heap growth")) != SYMM_SUCCESS)
            return st;
    }

    st = be->ops->chunk_create(be, size, &c);
    if ((st = symm__bootstrap_agree(boot, st, SYMM_ERR_HEAP_EXHAUSTED, "heap growth")) != SYMM_SUCCESS)
        goto out;

    fds = malloc((size_t)n_node * sizeof(int));
    addrs = malloc((size_t)n_node * sizeof(uintptr_t));
    if (!fds || !addrs) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "heap growth: out of host memory");
        goto out; /* the exchange below never started: peers fail on this PE's exit */
    }
    st = symm__ipc_allgather_fd(h->job.ipc, be->ops->chunk_fd(c), ++h->ipc_tag, fds);
    if (st != SYMM_SUCCESS)
        goto out;
    for (int i = 0; i < n_node; i++)
        addrs[i] = h->slot0 + (uintptr_t)i * h->stride + off;
    st = be->ops->chunk_map(be, c, addrs, fds, n_node, h->job.node_me);
    for (int i = 0; i < n_node; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if ((st = symm__bootstrap_agree(boot, st, SYMM_ERR_HEAP_EXHAUSTED, "heap growth")) != SYMM_SUCCESS)
        goto out;

    h->chunks[h->n_chunks++] = (symm__heap_chunk_t){off, size, c};
    c = NULL;
    h->mapped = new_mapped;
    SYMM_LOG_DEBUG("heap grew to %zu bytes", new_mapped);
    st = h->on_grow ? h->on_grow(h->on_grow_arg) : SYMM_SUCCESS;
out:
    if (c)
        be->ops->chunk_destroy(be, c);
    free(addrs);
    free(fds);
    return st;
}

void symm__heap_unmap_all(void) {
    symm__heap_t *h = &symm__heap;
    for (int i = h->n_chunks - 1; i >= 0; i--)
        h->job.be->ops->chunk_destroy(h->job.be, h->chunks[i].chunk);
    free(h->chunks);
    h->chunks = NULL;
    h->n_chunks = h->cap_chunks = 0;
    h->mapped = 0;
}
