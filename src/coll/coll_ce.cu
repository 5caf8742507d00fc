/*
 * coll_ce.cu - all-gather and all-to-all of large pieces through the copy
 * engines: each PE copies its pieces straight into the peers' symmetric recv
 * with cudaMemcpyAsync, between two stream-ordered team barriers.
 *
 * Why: one copy-engine stream visiting the peers in turn moves more than SM
 * stores at these sizes (256 MiB per peer: 378 against 350 GB/s,
 * bench/results/latest/copy-engine-probe.md), and more than copies to
 * several peers at once (197), so the peers are visited one after the
 * other, PE me + 1 first: at any moment each PE receives from about one
 * sender. Below some tens of MiB per peer the per-copy cost makes the SM
 * kernels win; SYMM_COLL_CE_MIN sets the crossover.
 *
 * Synchronisation: the first barrier makes every PE's recv free (its
 * earlier stream work is done), the second tells each PE that every copy
 * into its recv has completed (a copy completes before the sender's next
 * stream operation, the barrier kernel, starts; the barrier's release and
 * acquire carry that to the receiver). Both barriers keep their state in
 * device memory, so the sequence captures into CUDA graphs. This PE's own
 * piece goes on a side stream, forked and joined with events (graph edges
 * under capture), so it overlaps the remote copies. The copies say
 * cudaMemcpyDefault: send may be any memory the GPU can access (host memory
 * mapped for it included), and unified addressing knows where it lives.
 * The all-reduce does not use this path: copies of one chunk's result do not
 * overlap the next chunk's reduce-scatter kernel (docs/tuning.md).
 */
#include <new>

#include <cuda_runtime.h>

extern "C" {
#include "core/log.h"
#include "heap/heap.h"
#include "coll/coll.h"
}
#include "coll/coll_ce.h"


static symm_status_t ce_fail(const char *what, cudaError_t e) {
    return symm__error(SYMM_ERR_CUDA, "collectives (copy engines): %s: %s", what, cudaGetErrorString(e));
}

extern "C" symm_status_t symm__coll_ce_create(symm__coll_ce_t **out) {
    symm__coll_ce_t *ce = new (std::nothrow) symm__coll_ce_t();
    cudaStream_t *streams[3];
    cudaEvent_t *events[5];
    cudaError_t e = cudaSuccess;
    int ns = 0, nev = 0;
    if (ce == NULL)
        return symm__error(SYMM_ERR_NO_MEMORY, "collectives: no memory for the copy-engine state");
    streams[0] = &ce->side;
    streams[1] = &ce->sig;
    streams[2] = &ce->red;
    events[0] = &ce->fork;
    events[1] = &ce->join;
    events[2] = &ce->join_sig;
    events[3] = &ce->join_red;
    events[4] = &ce->step;
    for (; ns < 3 && e == cudaSuccess; ns++)
        if ((e = cudaStreamCreateWithFlags(streams[ns], cudaStreamNonBlocking)) != cudaSuccess)
            break;
    for (; e == cudaSuccess && nev < 5; nev++)
        if ((e = cudaEventCreateWithFlags(events[nev], cudaEventDisableTiming)) != cudaSuccess)
            break;
    if (e == cudaSuccess) {
        *out = ce;
        return SYMM_SUCCESS;
    }
    while (nev-- > 0)
        cudaEventDestroy(*events[nev]);
    while (ns-- > 0)
        cudaStreamDestroy(*streams[ns]);
    delete ce;
    return ce_fail("creating its streams and events", e);
}

extern "C" void symm__coll_ce_destroy(symm__coll_ce_t *ce) {
    if (ce == NULL)
        return;
    cudaEventDestroy(ce->step);
    cudaEventDestroy(ce->join_red);
    cudaEventDestroy(ce->join_sig);
    cudaEventDestroy(ce->join);
    cudaEventDestroy(ce->fork);
    cudaStreamDestroy(ce->red);
    cudaStreamDestroy(ce->sig);
    cudaStreamDestroy(ce->side);
    delete ce;
}

extern "C" symm_status_t symm__coll_ce_move(symm__coll_ce_t *ce, symm_team_t team, const void *send, void *recv,
                                            uint64_t nbytes, uint64_t src_piece, uint64_t out_piece,
                                            symm_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team);
    char *mine = (char *)recv + (uint64_t)me * out_piece;
    const char *my_src = (const char *)send + (uint64_t)me * src_piece;
    int local = mine != my_src;
    symm_status_t st;
    cudaError_t e;
    if ((st = symm_team_barrier_on_stream(team, stream)) != SYMM_SUCCESS)
        return st;
    if (local) {
        if ((e = cudaEventRecord(ce->fork, s)) != cudaSuccess || (e = cudaStreamWaitEvent(ce->side, ce->fork, 0)) !=
            cudaSuccess)
            return ce_fail("forking the side stream", e);
        if ((e = cudaMemcpyAsync(mine, my_src, nbytes, cudaMemcpyDefault, ce->side)) != cudaSuccess)
            return ce_fail("copying this PE's piece", e);
        if ((e = cudaEventRecord(ce->join, ce->side)) != cudaSuccess)
            return ce_fail("joining the side stream", e);
    }
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        /* one node (the native backend's rule): world PE wp is node PE wp */
        int wp = symm_team_translate_pe(team, p, symm_team_world());
        void *dst = wp < 0 ? NULL : symm__heap_peer(mine, wp);
        if (dst == NULL)
            return symm__error(SYMM_ERR_INTERNAL, "collectives (copy engines): no address of PE %d's recv", p);
        if ((e = cudaMemcpyAsync(dst, (const char *)send + (uint64_t)p * src_piece, nbytes,
                                 cudaMemcpyDefault, s)) != cudaSuccess)
            return ce_fail("copying to a peer", e);
    }
    if (local && (e = cudaStreamWaitEvent(s, ce->join, 0)) != cudaSuccess)
        return ce_fail("joining the side stream", e);
    return symm_team_barrier_on_stream(team, stream);
}
