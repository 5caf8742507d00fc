/*
 * put_variants_kernel.cu - one copy-engine variant of symm_put_block for
 * put_variants.cu. Compiled once per variant with its macros
 * (SYMM_COPY_UNROLL, SYMM_COPY_VARIANT) and
 * PUT_VARIANT_FN naming the launchers (PUT_VARIANT_FN, PUT_VARIANT_FN_small);
 * the inline device API is static, so the variants live side by side in one
 * program.
 */
#include <cuda_runtime.h>
#include "symm/symm_device.h"

#define PV_CAT_(a, b) a##b
#define PV_CAT(a, b) PV_CAT_(a, b)

/* Block b puts its 256-byte-aligned slice of [0, n) to PE pe. */
__global__ static void PV_CAT(PUT_VARIANT_FN, _kernel)(const symm_ctx_t *ctx, char *dst, const char *src, size_t n,
                                                        int pe) {
    size_t per = (n / gridDim.x + 255) & ~(size_t)255;
    size_t lo = (size_t)blockIdx.x * per, hi = lo + per < n ? lo + per : n;
    if (lo < hi)
        symm_put_block(ctx, dst + lo, src + lo, hi - lo, pe);
}

extern "C" cudaError_t PUT_VARIANT_FN(const symm_ctx_t *ctx, char *dst, const char *src, size_t n, int pe,
                                      int blocks, int threads, cudaStream_t s) {
    PV_CAT(PUT_VARIANT_FN, _kernel)<<<blocks, threads, 0, s>>>(ctx, dst, src, n, pe);
    return cudaGetLastError();
}

/* put_variants.cu's small-put timing (small_variants): one block puts the
 * same n bytes `inner` times back to back; thread 0 times it with
 * %globaltimer up to a barrier and one fence.sc.sys (the bench's quiet). */
__global__ static void PV_CAT(PUT_VARIANT_FN, _small_kernel)(const symm_ctx_t *ctx, char *dst, const char *src,
                                                              size_t n, int pe, int inner, unsigned long long *ns) {
    uint64_t t0 = 0, t1;
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int it = 0; it < inner; ++it)
        symm_put_block(ctx, dst, src, n, pe);
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.sc.sys;" ::: "memory");
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        *ns = t1 - t0;
    }
}

extern "C" cudaError_t PV_CAT(PUT_VARIANT_FN, _small)(const symm_ctx_t *ctx, char *dst, const char *src, size_t n,
                                                       int pe, int inner, int threads, unsigned long long *ns) {
    PV_CAT(PUT_VARIANT_FN, _small_kernel)<<<1, threads, 0, 0>>>(ctx, dst, src, n, pe, inner, ns);
    return cudaGetLastError();
}
