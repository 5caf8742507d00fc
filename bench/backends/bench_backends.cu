/*
 * bench_backends.cu - see bench_backends.h. The kernels are the plain uses of
 * the device API a kernel author writes; what differs between the columns of
 * the "backends" table is only the context's backend, so the dispatch of
 * include/symm/device/backend/dispatch.h picks the path.
 */
#include <cuda_runtime.h>

#include "bench_backends.h"
#include "../bench_slice.h"
#include "symm/symm_device.h"
#include "symm/device/backend/list.h"

/* native, and every far backend of the list compiled in (its SYMM__BE_IF_<name>) */
#define BENCH_BE_BIT(name, KIND, dev, ...) SYMM__BE_DEV_##dev(name, b |= 1u << SYMM_BACKEND_##KIND;)
extern "C" unsigned bench_be_kernels_backends(void) {
    unsigned b = 1u << SYMM_BACKEND_NATIVE;
    SYMM__BACKEND_LIST(BENCH_BE_BIT)
    return b;
}
#undef BENCH_BE_BIT

__global__ static void put_kernel(const symm_ctx_t *ctx, char *dst, const char *src, size_t n, int inner, int pe) {
    size_t off;
    size_t len = bench_slice(n, blockIdx.x, gridDim.x, &off);
    for (int it = 0; it < inner; ++it)
        if (len) /* uniform per block: the block-scope call is safe */
            symm_put_block(ctx, dst + off, src + off, len, pe);
    symm_quiet_block(ctx);
}

extern "C" int bench_be_put(const symm_ctx_t *ctx, void *dst, const void *src, size_t n, int blocks, int inner,
                            int pe, void *stream) {
    put_kernel<<<blocks, 512, 0, (cudaStream_t)stream>>>(ctx, (char *)dst, (const char *)src, n, inner, pe);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* words: [0] signal, [1] payload, [2] source of the payload. */
__global__ static void ping_kernel(const symm_ctx_t *ctx, uint64_t *w, int role, int pe, int warm, int iters,
                                   uint64_t base, unsigned long long *d_ns, unsigned long long *d_err) {
    uint64_t t0 = 0;
    unsigned long long bad = 0;
    const int self = pe == symm_ctx_my_pe(ctx);
    for (int k = 0; k < warm + iters; ++k) {
        uint64_t v = 2 * (base + (uint64_t)k) + 1;
        if (k == warm)
            t0 = bench_globaltimer();
        if (self) { /* to itself and back: two signals per round trip */
            w[2] = v;
            symm_put_signal(ctx, &w[1], &w[2], 8, &w[0], v, SYMM_SIGNAL_SET, pe);
            symm_signal_wait_until(ctx, &w[0], SYMM_CMP_EQ, v);
            w[2] = v + 1;
            symm_put_signal(ctx, &w[1], &w[2], 8, &w[0], v + 1, SYMM_SIGNAL_SET, pe);
            symm_signal_wait_until(ctx, &w[0], SYMM_CMP_EQ, v + 1);
            bad += *(volatile uint64_t *)&w[1] != v + 1;
            continue;
        }
        if (role == 1) {
            symm_signal_wait_until(ctx, &w[0], SYMM_CMP_EQ, v);
            bad += *(volatile uint64_t *)&w[1] != v;
        }
        w[2] = v;
        symm_put_signal(ctx, &w[1], &w[2], 8, &w[0], v, SYMM_SIGNAL_SET, pe);
        if (role == 0) {
            symm_signal_wait_until(ctx, &w[0], SYMM_CMP_EQ, v);
            bad += *(volatile uint64_t *)&w[1] != v;
        }
    }
    if (role == 0)
        *d_ns = bench_globaltimer() - t0;
    *d_err = bad;
}

extern "C" int bench_be_ping(const symm_ctx_t *ctx, uint64_t *words, int role, int pe, int warm, int iters,
                             uint64_t base, unsigned long long *d_ns, unsigned long long *d_err, void *stream) {
    ping_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ctx, words, role, pe, warm, iters, base, d_ns, d_err);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

__global__ static void fetch_add_kernel(const symm_ctx_t *ctx, uint64_t *word, int pe, int warm, int iters,
                                        unsigned long long *d_ns, unsigned long long *d_last) {
    uint64_t t0 = 0, old = 0;
    for (int k = 0; k < warm + iters; ++k) {
        if (k == warm)
            t0 = bench_globaltimer();
        /* the value added depends on the last answer (always 1): one round trip each */
        old = symm_atomic_fetch_add_u64(ctx, word, 1 + (old >> 62), pe);
    }
    *d_ns = bench_globaltimer() - t0;
    *d_last = old;
}

extern "C" int bench_be_fetch_add(const symm_ctx_t *ctx, uint64_t *word, int pe, int warm, int iters,
                                  unsigned long long *d_ns, unsigned long long *d_last, void *stream) {
    fetch_add_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ctx, word, pe, warm, iters, d_ns, d_last);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
