/*
 * symm_test_cuda.h - CUDA side of the test helpers: error checks and the
 * GPU-count skip. Include after symm_test.h in .cu tests.
 */
#ifndef SYMM_TEST_CUDA_H
#define SYMM_TEST_CUDA_H

#include <cuda_runtime.h>
#include "symm_test.h"

#define CUDA_CHECK(call)                                                          \
    do {                                                                          \
        cudaError_t e__ = (call);                                                 \
        if (e__ != cudaSuccess)                                                   \
            TEST_FAIL("%s -> %s", #call, cudaGetErrorString(e__));                \
    } while (0)

/* Launch check: the launch itself and, synchronously, the kernel. */
#define CUDA_CHECK_KERNEL()                                                       \
    do {                                                                          \
        CUDA_CHECK(cudaGetLastError());                                           \
        CUDA_CHECK(cudaDeviceSynchronize());                                      \
    } while (0)

/* Skip (exit 77) unless this node has at least `need` GPUs. Call before
 * symm_init, on every PE, so all PEs skip together. */
static inline void symm_test_require_gpus(int need) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        TEST_SKIP("no CUDA device on this machine");
    if (n < need)
        TEST_SKIP("needs %d GPUs, found %d", need, n);
}

#endif /* SYMM_TEST_CUDA_H */
