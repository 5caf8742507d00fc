/*
 * symm_test_cuda.h - CUDA side of the test helpers: error checks, the
 * GPU/PE requirement and grid sizes for PEs sharing a GPU. Include after
 * symm_test.h in .cu tests.
 */
#ifndef SYMM_TEST_CUDA_H
#define SYMM_TEST_CUDA_H

#include <cuda_runtime.h>
#include <unistd.h>
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

/* Is an MPS control daemon there for this process to join (its pipe in
 * CUDA_MPS_PIPE_DIRECTORY, by default /tmp/nvidia-mps)? */
static inline int symm_test_mps_running(void) {
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[4096];
    snprintf(path, sizeof path, "%s/control", dir && dir[0] ? dir : "/tmp/nvidia-mps");
    return access(path, F_OK) == 0;
}

/* After a client's fault an MPS server refuses new clients
 * (cudaErrorMpsServerNotReady) until it has recreated the GPU's context; the
 * CUDA runtime keeps a failed start for the life of the process, so the test
 * starts itself again, every 250 ms for up to 10 s, before anything else ran. */
#define SYMM_TEST_MPS_TRIES 40
static inline void symm_test_restart_for_mps(void) {
    const char *v = getenv("SYMM_TEST_MPS_TRY");
    int k = v ? atoi(v) : 0;
    if (k >= SYMM_TEST_MPS_TRIES)
        return;
    static char buf[65536];
    char *argv[256];
    int argc = 0;
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    for (size_t i = 0; i < len && argc < 255; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    argv[argc] = NULL;
    if (argc == 0)
        return;
    char next[16];
    snprintf(next, sizeof next, "%d", k + 1);
    setenv("SYMM_TEST_MPS_TRY", next, 1);
    fflush(stdout);
    fflush(stderr);
    usleep(250000);
    execv("/proc/self/exe", argv);
}

/* A GPU test asks for PEs, not GPUs: it skips (exit 77) only when there is
 * no GPU. With fewer GPUs than PEs the PEs share them (README, "Develop on
 * one GPU"), which rank 0 says in a line; more than two PEs on one GPU need
 * an MPS daemon (without one every wait on a peer costs a time slice), so
 * the test skips without one. Call before symm_init, on every PE, so all PEs
 * decide alike. */
static inline void symm_test_require_pes(int npes) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorMpsServerNotReady)
        symm_test_restart_for_mps(); /* returns only once the tries are spent */
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || (e == cudaSuccess && n == 0))
        TEST_SKIP("no CUDA device on this machine");
    /* Any other error is a broken GPU or MPS daemon, not a machine without a
     * GPU: a skip here would leave the other PEs waiting for this one. */
    if (e != cudaSuccess)
        TEST_FAIL("cudaGetDeviceCount: %s (%s)%s", cudaGetErrorName(e), cudaGetErrorString(e),
                  e == cudaErrorMpsServerNotReady ? " for 10 s" : "");
    if (n >= npes)
        return;
    int per_gpu = (npes + n - 1) / n;
    if (per_gpu > 2 && !symm_test_mps_running())
        TEST_SKIP("%d PEs on %d GPU%s need an MPS daemon (time-sliced, each wait on a peer costs "
                  "milliseconds): start one (README, 'Develop on one GPU'; scripts/gpu_suite.sh does)",
                  npes, n, n == 1 ? "" : "s");
    const char *rank = getenv("RANK");
    if (!rank || strcmp(rank, "0") == 0)
        printf("NOTE: %d PEs share %d GPU%s (%d per GPU%s): not a measure of NVLink\n", npes, n,
               n == 1 ? "" : "s", per_gpu, symm_test_mps_running() ? ", under MPS" : ", time-sliced");
    fflush(stdout);
}

/* Grid size for a kernel whose blocks wait on the peers' blocks: `want`, or
 * fewer when PEs share the GPU (symm_sm_share). */
static inline int symm_test_waiting_grid(int want) {
    int share = 0;
    SYMM_CHECK(symm_sm_share(&share));
    return want < share ? want : share;
}

#endif /* SYMM_TEST_CUDA_H */
