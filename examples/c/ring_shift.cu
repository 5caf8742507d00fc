/* ring_shift: every PE sends its buffer into the next PE's (PE p -> p + 1). */
#include <stdio.h>
#include <stdlib.h>
#include <symm/symm.h>
#include <symm/symm_device.h>

/* Stop with the reason (symm_last_error() names the PE) when a call fails. */
#define CHECK(call)                                                                  \
    do {                                                                             \
        symm_status_t st_ = (call);                                                  \
        if (st_ != SYMM_SUCCESS) {                                                   \
            fprintf(stderr, "%s: %s\n", #call, symm_last_error());                   \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#define CUDA_CHECK(call)                                                             \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));              \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

__global__ void fill(float *x, size_t n, int pe) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = (float)(pe * 100000 + i % 100000);
}

__global__ void shift(const symm_ctx_t *ctx, float *dst, const float *src, size_t n) {
    int me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx);
    symm_put_block(ctx, dst, src, n * sizeof(float), (me + 1) % npes);
    symm_barrier_block(ctx); /* includes quiet: every PE's dst is complete after it */
}

int main(void) {
    const symm_ctx_t *ctx;
    float *src, *dst;
    size_t n = 1 << 20;
    CHECK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes(), prev = (me + npes - 1) % npes;
    CHECK(symm_ctx(&ctx));
    CHECK(symm_malloc(n * sizeof(float), (void **)&src));
    CHECK(symm_malloc(n * sizeof(float), (void **)&dst));
    fill<<<64, 256>>>(src, n, me);
    shift<<<1, 256>>>(ctx, dst, src, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());

    float *host = (float *)malloc(n * sizeof(float));
    CUDA_CHECK(host ? cudaMemcpy(host, dst, n * sizeof(float), cudaMemcpyDeviceToHost) : cudaErrorMemoryAllocation);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += host[i] != (float)(prev * 100000 + i % 100000);
    printf("PE %d of %d: %zu floats from PE %d, %s\n", me, npes, n, prev, bad ? "WRONG" : "ok");
    free(host);
    CHECK(symm_free(dst));
    CHECK(symm_free(src));
    CHECK(symm_finalize());
    return bad ? 1 : 0;
}
