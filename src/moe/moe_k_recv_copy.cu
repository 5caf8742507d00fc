/*
 * moe_k_recv_copy.cu - the kernel of symm_moe_ht_recv_copy: a high-throughput
 * dispatch's received sources, top-k indices and weights copied into the
 * caller's tensors in DeepEP's forms (int32 or int64 indices, weights 0 where
 * the index is -1), rows past num_recv filled as empty, and the counts, in
 * one launch where torch took one kernel per tensor and two for the weights.
 */
#include <cuda_runtime.h>

extern "C" {
#include "core/log.h"
#include "moe/moe_recv_copy.h"
}

#define RECV_COPY_THREADS 256
#define RECV_COPY_MAX_BLOCKS 1024

__global__ void __launch_bounds__(RECV_COPY_THREADS) symm__k_moe_recv_copy(const symm__moe_recv_copy_kargs_t a) {
    const uint64_t nrecv = (uint64_t)(uint32_t)*a.num_recv;
    const uint64_t stride = (uint64_t)gridDim.x * RECV_COPY_THREADS;
    const uint64_t first = (uint64_t)blockIdx.x * RECV_COPY_THREADS + threadIdx.x;
    const uint64_t slots = a.rows * a.k;
    if (a.o_idx != NULL || a.o_w != NULL)
        for (uint64_t i = first; i < slots; i += stride) {
            const int live = i / a.k < nrecv;
            const int32_t e = live ? a.idx[i] : -1;
            if (a.o_idx != NULL) {
                if (a.idx64)
                    ((int64_t *)a.o_idx)[i] = e;
                else
                    ((int32_t *)a.o_idx)[i] = e;
            }
            if (a.o_w != NULL)
                a.o_w[i] = e >= 0 ? a.w[i] : 0.0f;
        }
    if (a.o_src != NULL)
        for (uint64_t r = first; r < a.rows; r += stride)
            a.o_src[r] = r < nrecv ? a.src[2 * r + 1] : -1;
    if (a.o_counts != NULL && blockIdx.x == 0)
        for (uint32_t x = threadIdx.x; x <= a.local; x += RECV_COPY_THREADS)
            a.o_counts[x] = x == 0 ? *a.num_recv : a.per_expert[x - 1];
}

extern "C" symm_status_t symm__moe_recv_copy_launch(const symm__moe_recv_copy_kargs_t *a, symm_stream_t stream) {
    const uint64_t work = a->rows * (a->k > 1 ? a->k : 1);
    uint64_t blocks = (work + RECV_COPY_THREADS - 1) / RECV_COPY_THREADS;
    if (blocks < 1)
        blocks = 1;
    if (blocks > RECV_COPY_MAX_BLOCKS)
        blocks = RECV_COPY_MAX_BLOCKS;
    symm__k_moe_recv_copy<<<(unsigned)blocks, RECV_COPY_THREADS, 0, (cudaStream_t)stream>>>(*a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "symm_moe_ht_recv_copy: launching its kernel: %s (%s)",
                           cudaGetErrorName(e), cudaGetErrorString(e));
    return SYMM_SUCCESS;
}
