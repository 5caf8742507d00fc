/*
 * coll_k_packet.cu - PACKET kernels: reductions (all-reduce, reduce-scatter)
 * and data movement (all-gather, all-to-all, broadcast) with the flag in the
 * data; all-reduce also in two shots (to the piece's owner, then from it)
 * and broadcast in two hops (root -> one non-root -> the others).
 */
#include "coll/coll_kernels.cuh"

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_red_packet(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                   char *dst, const char *src, uint64_t nbytes, uint64_t piece, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_red_packet(&ctx, &ws, dst, src, nbytes, piece, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, piece ? SYMM_TRACE_COLL_REDUCE_SCATTER : SYMM_TRACE_COLL_ALL_REDUCE, SYMM_COLL_ALGO_PACKET, SYMM_TRACE_F_STREAM, nbytes);
}

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_ar_packet2(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                   char *dst, const char *src, uint64_t nbytes, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_ar_packet2(&ctx, &ws, dst, src, nbytes, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_ALL_REDUCE, SYMM_COLL_ALGO_PACKET, SYMM_TRACE_F_STREAM, nbytes);
}

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_move_packet(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                    char *dst, const char *src, uint64_t nbytes, uint64_t piece, uint64_t out_stride,
                    int root) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_move_packet(&ctx, &ws, dst, src, nbytes, piece, out_stride, root, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, root >= 0 ? SYMM_TRACE_COLL_BROADCAST : piece ? SYMM_TRACE_COLL_ALL_TO_ALL : SYMM_TRACE_COLL_ALL_GATHER, SYMM_COLL_ALGO_PACKET, SYMM_TRACE_F_STREAM, nbytes);
}

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_bcast_packet2(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                      char *dst, const char *src, uint64_t nbytes, int root) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_bcast_packet2(&ctx, &ws, dst, src, nbytes, root, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_BROADCAST, SYMM_COLL_ALGO_PACKET, SYMM_TRACE_F_STREAM, nbytes);
}

symm_status_t symm__coll_launch_packet(const symm__coll_launch_t *l, cudaStream_t s) {
    if (l->kernel == SYMM__CK_BCAST_PACKET2) {
        symm__k_bcast_packet2<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst,
                                                                 (const char *)l->src, l->nbytes, l->root);
        return symm__coll_launched("the two-hop packet broadcast kernel");
    }
    if (l->kernel == SYMM__CK_RED_PACKET) {
        symm__k_red_packet<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst,
                                                              (const char *)l->src, l->nbytes, l->piece,
                                                              l->kind, l->op);
        return symm__coll_launched("the packet reduction kernel");
    }
    if (l->kernel == SYMM__CK_AR_PACKET2) {
        symm__k_ar_packet2<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst,
                                                              (const char *)l->src, l->nbytes, l->kind, l->op);
        return symm__coll_launched("the two-shot packet all-reduce kernel");
    }
    symm__k_move_packet<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst, (const char *)l->src,
                                                           l->nbytes, l->piece, l->out, l->root);
    return symm__coll_launched("the packet data-movement kernel");
}
