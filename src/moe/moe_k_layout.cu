/*
 * moe_k_layout.cu - the kernel of symm_moe_layout (DeepEP's dispatch
 * layout): one launch, no state between calls, no atomics to global memory
 * (so nothing needs zeroing first, and a graph replays it as it is).
 *
 * Block b < count_blocks reads every token's indices and counts, in shared
 * memory, the slots naming each expert of its chunk; block 0 also forms each
 * token's set of ranks (a 64-bit mask, one bit per rank however many of its
 * experts live there), writes it as the token's row of is_token_in_rank and
 * counts the tokens per rank by warp votes. Every block reads all indices
 * (from L2 after the first): a dispatch's batch of them is a few hundred KB.
 */
#include <cuda_runtime.h>

extern "C" {
#include "core/log.h"
#include "moe/moe_layout.h"
}

#define LAYOUT_WARPS (SYMM__MOE_LAYOUT_THREADS / 32)
#define LAYOUT_MAX_RANKS 64
#define LAYOUT_LOADS 8 /* indices of a token loaded before any is used */

template <int KIND>
__device__ __forceinline__ int64_t layout_index(const void *p, uint64_t i) {
    if (KIND == 0)
        return (int64_t)__ldg((const unsigned int *)p + i);
    if (KIND == 1)
        return (int64_t)__ldg((const int *)p + i);
    return (int64_t)__ldg((const long long *)p + i);
}

template <int KIND>
__global__ void __launch_bounds__(SYMM__MOE_LAYOUT_THREADS) symm__k_moe_layout(const symm__moe_layout_kargs_t a) {
    extern __shared__ unsigned int ecnt[]; /* [chunk] */
    __shared__ unsigned int rcnt[LAYOUT_WARPS][LAYOUT_MAX_RANKS];
    const unsigned int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const unsigned int b = blockIdx.x, K = a.topk, E = a.experts, n = a.n;
    const unsigned int lo = b * a.chunk, hi = lo + a.chunk < E ? lo + a.chunk : E;
    const int ranks = b == 0;
    for (unsigned int x = tid; x < hi - lo; x += SYMM__MOE_LAYOUT_THREADS)
        ecnt[x] = 0;
    if (ranks)
        for (unsigned int r = lane; r < n; r += 32)
            rcnt[warp][r] = 0;
    __syncthreads();
    /* a thread per token; the loop is warp-uniform (the votes need every lane) */
    for (uint64_t base = (uint64_t)warp * 32; base < a.tokens; base += SYMM__MOE_LAYOUT_THREADS) {
        const uint64_t t = base + lane;
        uint64_t mask = 0;
        if (t < a.tokens) {
            for (unsigned int k0 = 0; k0 < K; k0 += LAYOUT_LOADS) {
                int64_t xs[LAYOUT_LOADS];
#pragma unroll
                for (unsigned int i = 0; i < LAYOUT_LOADS; i++)
                    xs[i] = k0 + i < K ? layout_index<KIND>(a.idx, t * K + k0 + i) : -1;
#pragma unroll
                for (unsigned int i = 0; i < LAYOUT_LOADS; i++) {
                    const int64_t e = xs[i];
                    if (e < 0 || e >= (int64_t)E)
                        continue; /* -1 and every other value outside the experts count nowhere */
                    const unsigned int ue = (unsigned int)e;
                    if (ue >= lo && ue < hi)
                        atomicAdd(&ecnt[ue - lo], 1u);
                    if (ranks)
                        mask |= 1ull << (ue / a.local);
                }
            }
            if (ranks)
                for (unsigned int r = 0; r < n; r++)
                    a.in_rank[t * n + r] = (uint8_t)((mask >> r) & 1u);
        }
        if (ranks)
            for (unsigned int r = 0; r < n; r++) {
                const unsigned int c = __popc(__ballot_sync(0xffffffffu, (mask >> r) & 1u));
                if (lane == 0)
                    rcnt[warp][r] += c;
            }
    }
    __syncthreads();
    for (unsigned int x = tid; x < hi - lo; x += SYMM__MOE_LAYOUT_THREADS)
        a.per_expert[lo + x] = (int32_t)ecnt[x];
    if (ranks && tid < n) {
        unsigned int c = 0;
        for (unsigned int w = 0; w < LAYOUT_WARPS; w++)
            c += rcnt[w][tid];
        a.per_rank[tid] = (int32_t)c;
    }
}

extern "C" symm_status_t symm__moe_layout_launch(const symm__moe_layout_kargs_t *a, symm_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const size_t smem = (size_t)a->chunk * sizeof(unsigned int);
    switch (a->kind) {
    case 0: symm__k_moe_layout<0><<<a->count_blocks, SYMM__MOE_LAYOUT_THREADS, smem, s>>>(*a); break;
    case 1: symm__k_moe_layout<1><<<a->count_blocks, SYMM__MOE_LAYOUT_THREADS, smem, s>>>(*a); break;
    default: symm__k_moe_layout<2><<<a->count_blocks, SYMM__MOE_LAYOUT_THREADS, smem, s>>>(*a); break;
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "symm_moe_layout: launching the layout kernel: %s (%s)",
                           cudaGetErrorName(e), cudaGetErrorString(e));
    return SYMM_SUCCESS;
}
