/*
 * coll_k_direct.cu - direct kernels between the PEs' buffers: reduce-scatter,
 * all-gather / all-to-all / broadcast, and all_to_allv.
 */
#include <string.h>

#include "coll/coll_kernels.cuh"

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_rs_direct(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                  char *dst, const char *src, uint64_t nbytes, uint64_t piece, int kind, int op) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_rs_direct(&ctx, &ws, dst, src, nbytes, piece, kind, op, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_REDUCE_SCATTER, SYMM_COLL_ALGO_TWOSHOT, SYMM_TRACE_F_STREAM, nbytes);
}

/* the chain (symm__c_bcast_chain) moves data with whole warps */
static_assert(SYMM__COLL_THREADS % 32 == 0, "the stream kernels' blocks must be whole warps");

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_move_direct(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                    char *dst, const char *src, uint64_t nbytes, uint64_t piece, uint64_t out_off, int root,
                    uint64_t chain) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_move_direct(&ctx, &ws, dst, src, nbytes, piece, out_off, root, chain, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, root >= 0 ? SYMM_TRACE_COLL_BROADCAST : piece ? SYMM_TRACE_COLL_ALL_TO_ALL : SYMM_TRACE_COLL_ALL_GATHER, SYMM_COLL_ALGO_TWOSHOT, SYMM_TRACE_F_STREAM, nbytes);
}

/* The four count/displacement arrays travel as a kernel parameter, so the
 * call needs no device buffer and captures into graphs as it is. */
struct symm__a2av_params {
    uint64_t v[4][SYMM_COLL_MAX_PES];
};

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_a2av_direct(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                    char *dst, const char *src, const __grid_constant__ symm__a2av_params a, uint32_t esz) {
    SYMM__TRACE_START(&ctx, t_, SYMM__G_BLOCK);
    symm__c_a2av_direct(&ctx, &ws, dst, src, a.v[0], a.v[1], a.v[2], a.v[3], esz, blockIdx.x, gridDim.x);
    SYMM__TRACE_COLL(&ctx, t_, SYMM_TRACE_COLL_ALL_TO_ALLV, SYMM_COLL_ALGO_TWOSHOT, SYMM_TRACE_F_STREAM, 0);
}

symm_status_t symm__coll_launch_direct(const symm__coll_launch_t *l, cudaStream_t s) {
    switch (l->kernel) {
    case SYMM__CK_RS_DIRECT:
        symm__k_rs_direct<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst, (const char *)l->src,
                                                             l->nbytes, l->piece, l->kind, l->op);
        return symm__coll_launched("the direct reduce-scatter kernel");
    case SYMM__CK_MOVE_DIRECT:
        symm__k_move_direct<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst,
                                                               (const char *)l->src, l->nbytes, l->piece, l->out,
                                                               l->root, l->chain);
        return symm__coll_launched("the direct data-movement kernel");
    default: {
        symm__a2av_params a;
        int n = l->ctx.n_pes;
        memset(&a, 0, sizeof(a));
        for (int i = 0; i < 4; i++)
            memcpy(a.v[i], l->a2av + (size_t)i * n, (size_t)n * sizeof(uint64_t));
        symm__k_a2av_direct<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->ws, (char *)l->dst,
                                                               (const char *)l->src, a, l->esz);
        return symm__coll_launched("the all_to_allv kernel");
    }
    }
}
