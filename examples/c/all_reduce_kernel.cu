/*
 * all_reduce_kernel: an all-reduce inside a kernel, between the computation
 * that produces the data and the epilogue that uses the sum, with no return
 * to the host in between (the shape of a fused GEMM + all-reduce). One block
 * per PE computes x, all-reduces it into `sum` with symm_all_reduce_block,
 * and writes the mean over PEs. Runs a small size (packets through the
 * team's scratch) and a large one (directly between the symmetric buffers).
 */
#include <symm/symm_device.h>

#include "example.h"

/* PE pe's contribution to element i: small integers, so float sums are exact
 * in any order. */
__host__ __device__ static float contribution(int pe, size_t i) { return (float)((pe + 1) * (int)(i % 1000)); }

/* A device collective's call site needs more than 128 registers per thread
 * unless told otherwise: the launch bound caps it for the 512 threads used. */
__global__ void __launch_bounds__(512) compute_reduce_mean(const symm_ctx_t *ctx, float *x, float *sum, float *mean, size_t n) {
    int me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        x[i] = contribution(me, i);
    __syncthreads(); /* every thread's part of x is written before the call reads it */
    symm_all_reduce_block(ctx, sum, x, n, SYMM_DTYPE_F32, SYMM_OP_SUM);
    __syncthreads(); /* and every part of sum is in place before the epilogue */
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        mean[i] = sum[i] / (float)npes;
}

int main(void) {
    SYMM_CHECK(symm_init());
    int npes = symm_n_pes();
    const symm_ctx_t *ctx;
    SYMM_CHECK(symm_ctx(&ctx));
    const size_t sizes[] = {4096, (size_t)1 << 18}; /* 16 KiB and 1 MiB of floats */
    const size_t nmax = sizes[1];
    float *x, *sum, *mean; /* x and sum are symmetric: the collective reads and writes them on every PE */
    SYMM_CHECK(symm_malloc(nmax * sizeof(float), (void **)&x));
    SYMM_CHECK(symm_malloc(nmax * sizeof(float), (void **)&sum));
    CUDA_CHECK(cudaMalloc(&mean, nmax * sizeof(float)));
    float *host = (float *)malloc(nmax * sizeof(float));
    if (!host) {
        fprintf(stderr, "all_reduce_kernel: out of host memory\n");
        return 1;
    }

    long bad = 0;
    for (int s = 0; s < 2; s++) {
        size_t n = sizes[s];
        compute_reduce_mean<<<1, 512>>>(ctx, x, sum, mean, n);
        CUDA_CHECK_KERNEL();
        CUDA_CHECK(cudaMemcpy(host, mean, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int p = 0; p < npes; p++)
                want += contribution(p, i);
            bad += host[i] != want / (float)npes;
        }
    }
    int rc = example_report("all_reduce_kernel", bad, "means of 4096 and 262144 floats");
    free(host);
    CUDA_CHECK(cudaFree(mean));
    SYMM_CHECK(symm_free(sum));
    SYMM_CHECK(symm_free(x));
    SYMM_CHECK(symm_finalize());
    return rc;
}
