/*
 * coll_k_ar_oneshot.cu - the ONESHOT reductions: every PE stores its whole
 * input (all-reduce) or each peer's piece (reduce-scatter) into the peer's
 * plain-data region, one flag per peer, and reduces locally.
 */
#include "coll/coll_kernels.cuh"

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_ar_oneshot(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                   char *dst, const char *src, uint64_t nbytes, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_ar_oneshot(&ctx, &ws, dst, src, nbytes, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_ALL_REDUCE, SYMM_COLL_ALGO_ONESHOT, SYMM_TRACE_F_STREAM, nbytes);
}

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_rs_oneshot(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                   char *dst, const char *src, uint64_t nbytes, uint64_t piece, int kind, int op) {
    symm__c_rs_oneshot(&ctx, &ws, dst, src, nbytes, piece, kind, op, blockIdx.x, gridDim.x);
}

symm_status_t symm__coll_launch_oneshot(const symm__coll_launch_t *l, cudaStream_t s) {
    if (l->kernel == SYMM__CK_RS_ONESHOT) {
        symm__k_rs_oneshot<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst, (const char *)l->src,
                                                              l->nbytes, l->piece, l->kind, l->op);
        return symm__coll_launched("the one-shot reduce-scatter kernel");
    }
    symm__k_ar_oneshot<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst, (const char *)l->src,
                                                          l->nbytes, l->kind, l->op);
    return symm__coll_launched("the one-shot all-reduce kernel");
}
