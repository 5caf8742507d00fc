/*
 * device_test.h - what the device-API GPU tests share: a seeded byte stream
 * that kernels generate and check on the GPU (so every byte of a 256 MiB
 * transfer is checked without a host round trip), setup/teardown, and a
 * device-side error counter.
 *
 * Byte i of stream `seed` is dt_byte(seed, i). A destination is poisoned with
 * the complement of the bytes it should receive, so a byte that was never
 * written always fails the check.
 */
#ifndef SYMM_DEVICE_TEST_H
#define SYMM_DEVICE_TEST_H

#include <time.h>

#include "symm/symm_device.h"
#include "symm_test.h"
#include "symm_test_cuda.h"

__host__ __device__ static inline uint64_t dt_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__host__ __device__ static inline uint8_t dt_byte(uint64_t seed, size_t i) {
    uint64_t z = dt_mix(seed * 0x9e3779b97f4a7c15ull + (uint64_t)(i >> 3));
    return (uint8_t)(z >> ((i & 7) * 8));
}

/* A seed per (test, iteration, pe): different for every one of them. */
static inline uint64_t dt_seed(uint64_t test, uint64_t iter, int pe) {
    return dt_mix((test << 40) ^ (iter << 8) ^ (uint64_t)(pe + 1));
}

/* p[i] = stream byte i (invert: its complement). */
__global__ static void dt_fill_kernel(uint8_t *p, size_t n, uint64_t seed, int invert) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = invert ? (uint8_t)~dt_byte(seed, i) : dt_byte(seed, i);
}

__global__ static void dt_fill_byte_kernel(uint8_t *p, size_t n, uint8_t v) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = v;
}

/* Count the bytes that differ from the stream (or from `v` when seed == 0
 * and use_byte); remember the first bad index. */
__global__ static void dt_check_kernel(const uint8_t *p, size_t n, uint64_t seed, int use_byte, uint8_t v,
                                       unsigned long long *bad, unsigned long long *first) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint8_t want = use_byte ? v : dt_byte(seed, i);
        if (p[i] != want) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
    }
}

typedef struct dt_env {
    int me, npes;
    const symm_ctx_t *ctx;   /* device pointer */
    symm_ctx_t hctx;         /* host copy, for printing */
    unsigned long long *d_err; /* [0] count, [1] first index, [2..] test-specific */
    unsigned long long *h_err; /* pinned mirror */
    time_t t_start;          /* dt_init's time (dt_progress) */
} dt_env_t;

/* A count of the full run, or of the sanitizer-sized one (symm_test_small). */
static inline long dt_n(long full, long small) {
    return symm_test_small() ? small : full;
}

static inline void dt_init(dt_env_t *e, int need_pes) {
    e->t_start = time(NULL);
    symm_test_require_pes(need_pes);
    SYMM_CHECK(symm_init());
    e->me = symm_my_pe();
    e->npes = symm_n_pes();
    if (e->npes < need_pes) {
        symm_finalize();
        TEST_SKIP("needs %d PEs, run with %d", need_pes, e->npes);
    }
    if (e->me == 0 && symm_test_small()) {
        printf("NOTE: SYMM_TEST_SMALL is set: every kind of case, fewer repetitions and sizes\n");
        fflush(stdout);
    }
    SYMM_CHECK(symm_ctx(&e->ctx));
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &e->hctx));
    TEST_ASSERT(e->hctx.my_pe == e->me && e->hctx.n_pes == e->npes, "context PE %d/%d", e->hctx.my_pe,
                e->hctx.n_pes);
    CUDA_CHECK(cudaMalloc(&e->d_err, 64 * sizeof(unsigned long long)));
    CUDA_CHECK(cudaMallocHost(&e->h_err, 64 * sizeof(unsigned long long)));
}

static inline void dt_fini(dt_env_t *e) {
    CUDA_CHECK(cudaFree(e->d_err));
    CUDA_CHECK(cudaFreeHost(e->h_err));
    SYMM_CHECK(symm_finalize());
}

/* Blocks of 256 threads for a helper kernel over n bytes: no more than the
 * bytes need; few in the sanitizer-sized run, where every launched block
 * costs (racecheck sets up each block's shared-memory state) while the
 * kernels' grid-stride loops cover any n with any grid. */
static inline unsigned dt_grid(size_t n) {
    size_t want = (n + 255) / 256, most = symm_test_small() ? 32 : 1024;
    return (unsigned)(want < most ? want : most);
}

/* Sanitizer-sized runs: PE 0 says which part of the test is done (and the
 * seconds since it started), so a run cut off by its time limit shows where
 * it was. */
static inline void dt_progress(const dt_env_t *e, const char *what) {
    if (!symm_test_small() || e->me != 0)
        return;
    printf("NOTE: %s done (%lds)\n", what, (long)(time(NULL) - e->t_start));
    fflush(stdout);
}

static inline void dt_fill(void *p, size_t n, uint64_t seed, int invert) {
    if (n == 0)
        return;
    dt_fill_kernel<<<dt_grid(n), 256>>>((uint8_t *)p, n, seed, invert);
    CUDA_CHECK(cudaGetLastError());
}

static inline void dt_fill_byte(void *p, size_t n, uint8_t v) {
    if (n == 0)
        return;
    dt_fill_byte_kernel<<<dt_grid(n), 256>>>((uint8_t *)p, n, v);
    CUDA_CHECK(cudaGetLastError());
}

/* Check n bytes at p against stream `seed` (or all equal to v); fail with
 * `what` and the first bad byte. Synchronises the device. */
static inline void dt_check(dt_env_t *e, const void *p, size_t n, uint64_t seed, int use_byte, uint8_t v,
                            const char *what) {
    if (n == 0)
        return;
    unsigned long long init[2] = {0, ~0ull};
    CUDA_CHECK(cudaMemcpy(e->d_err, init, sizeof init, cudaMemcpyHostToDevice));
    dt_check_kernel<<<dt_grid(n), 256>>>((const uint8_t *)p, n, seed, use_byte, v, e->d_err, e->d_err + 1);
    CUDA_CHECK_KERNEL();
    CUDA_CHECK(cudaMemcpy(e->h_err, e->d_err, 2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    if (e->h_err[0] != 0) {
        uint8_t got;
        CUDA_CHECK(cudaMemcpy(&got, (const uint8_t *)p + e->h_err[1], 1, cudaMemcpyDeviceToHost));
        TEST_FAIL("%s: %llu of %zu bytes wrong, first at %llu: got 0x%02x want 0x%02x", what, e->h_err[0], n,
                  e->h_err[1], got, use_byte ? v : dt_byte(seed, e->h_err[1]));
    }
}

/* Device-side error counter for tests that check inside kernels. */
static inline void dt_err_reset(dt_env_t *e) {
    CUDA_CHECK(cudaMemset(e->d_err, 0, 64 * sizeof(unsigned long long)));
}

static inline unsigned long long dt_err_read(dt_env_t *e, int idx) {
    CUDA_CHECK(cudaMemcpy(e->h_err, e->d_err, 64 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    return e->h_err[idx];
}

#endif /* SYMM_DEVICE_TEST_H */
