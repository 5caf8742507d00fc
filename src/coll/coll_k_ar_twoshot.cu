/*
 * coll_k_ar_twoshot.cu - the TWOSHOT all-reduces (reduce-scatter, then
 * all-gather): between the symmetric buffers, loading from the peers; the
 * stores-only form (each piece into its owner's plain-data region, then the
 * owner's result into every PE's recv); and the multimem twin (used only
 * with a multicast address).
 */
#include "coll/coll_kernels.cuh"

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_ar_twoshot(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                   char *dst, const char *src, uint64_t nbytes, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_ar_twoshot(&ctx, &ws, dst, src, nbytes, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_ALL_REDUCE, SYMM_COLL_ALGO_TWOSHOT, SYMM_TRACE_F_STREAM, nbytes);
}

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_ar_twoshot_st(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                      char *dst, const char *src, uint64_t nbytes, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_ar_twoshot_st(&ctx, &ws, dst, src, nbytes, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_ALL_REDUCE, SYMM_COLL_ALGO_TWOSHOT, SYMM_TRACE_F_STREAM, nbytes);
}

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_ar_multimem(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                    uint64_t mc_dst, uint64_t mc_src, uint64_t nbytes, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_ar_multimem(&ctx, &ws, mc_dst, mc_src, nbytes, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_ALL_REDUCE, SYMM_COLL_ALGO_MULTIMEM, SYMM_TRACE_F_STREAM, nbytes);
}

symm_status_t symm__coll_launch_twoshot(const symm__coll_launch_t *l, cudaStream_t s) {
    switch (l->kernel) {
    case SYMM__CK_AR_MULTIMEM:
        symm__k_ar_multimem<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, l->mc_dst, l->mc_src, l->nbytes,
                                                               l->kind, l->op);
        return symm__coll_launched("the multimem all-reduce kernel");
    case SYMM__CK_AR_TWOSHOT_ST:
        symm__k_ar_twoshot_st<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst,
                                                                 (const char *)l->src, l->nbytes, l->kind, l->op);
        return symm__coll_launched("the stores-only two-shot all-reduce kernel");
    default:
        symm__k_ar_twoshot<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst, (const char *)l->src,
                                                              l->nbytes, l->kind, l->op);
        return symm__coll_launched("the two-shot all-reduce kernel");
    }
}
