/*
 * put_variants_kernel.cu - one copy-engine variant of symm_put_block for
 * put_variants.cu. Compiled once per variant with its macros
 * (SYMM_COPY_UNROLL, SYMM_COPY_VARIANT, SYMM_PUT_BLOCK_TMA, ...) and
 * PUT_VARIANT_FN naming the launcher; the inline device API is static, so the
 * variants live side by side in one program.
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
