/*
 * tma_ring_probe.cu - what compute-sanitizer racecheck makes of a shared slot
 * that one thread fills twice with bulk loads (cp.async.bulk global ->
 * shared), each load's completion awaited on an mbarrier before the next is
 * issued: the TMA put's staging ring (include/symm/device/impl_tma.h) does
 * this within one put (the next phase of the same mbarrier) and from one put
 * to the next (the mbarriers invalidated and initialised again in between).
 * One kernel per way, so racecheck's report names the ways it flags:
 *   probe_next_phase     second load on the barrier's next phase
 *   probe_reinit         barrier invalidated and initialised between loads
 *   probe_reinit_synced  the same with a block barrier before the second load
 * Every way is ordered: the issuing thread observed the first load's
 * completion before it issued the second. Each kernel also copies the slot
 * out, and the host checks it holds the second load's bytes.
 *
 * Usage: tma_ring_probe (sm_90; scripts/gpu_sanitize.sh runs it under
 * racecheck and lists the kernels racecheck flags). Exit 77 below sm_90.
 */
#include "device_test.h"

#define PROBE_BYTES 4096

enum { WAY_NEXT_PHASE, WAY_REINIT, WAY_REINIT_SYNCED };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ static void probe_body(const uint8_t *a, const uint8_t *b, uint8_t *out, int way) {
    __shared__ __align__(128) uint8_t slot[PROBE_BYTES];
    __shared__ __align__(8) uint64_t bar;
    uint32_t sslot = symm__smem_addr(slot), sbar = symm__smem_addr(&bar);
    if (threadIdx.x == 0) {
        symm__fence_proxy_async_global();
        symm__mbar_init(sbar);
        symm__fence_mbar_init();
        symm__tma_load(sslot, a, PROBE_BYTES, sbar);
        symm__mbar_wait(sbar, 0);
    }
    if (way == WAY_REINIT_SYNCED)
        __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t parity = 1;
        if (way != WAY_NEXT_PHASE) {
            symm__mbar_inval(sbar);
            symm__mbar_init(sbar);
            symm__fence_mbar_init();
            parity = 0;
        }
        symm__tma_load(sslot, b, PROBE_BYTES, sbar);
        symm__mbar_wait(sbar, parity);
        symm__mbar_inval(sbar);
        for (int i = 0; i < PROBE_BYTES; i++)
            out[i] = slot[i];
    }
}
#else
__device__ static void probe_body(const uint8_t *a, const uint8_t *b, uint8_t *out, int way) {
    (void)a; (void)b; (void)out; (void)way;
}
#endif

__global__ static void probe_next_phase(const uint8_t *a, const uint8_t *b, uint8_t *out) {
    probe_body(a, b, out, WAY_NEXT_PHASE);
}
__global__ static void probe_reinit(const uint8_t *a, const uint8_t *b, uint8_t *out) {
    probe_body(a, b, out, WAY_REINIT);
}
__global__ static void probe_reinit_synced(const uint8_t *a, const uint8_t *b, uint8_t *out) {
    probe_body(a, b, out, WAY_REINIT_SYNCED);
}

int main(void) {
    int dev, major = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 9)
        TEST_SKIP("tma_ring_probe needs sm_90 (bulk copies), this GPU is sm_%d", major * 10);
    static uint8_t host[PROBE_BYTES];
    uint8_t *a, *b, *out;
    CUDA_CHECK(cudaMalloc(&a, PROBE_BYTES));
    CUDA_CHECK(cudaMalloc(&b, PROBE_BYTES));
    CUDA_CHECK(cudaMalloc(&out, PROBE_BYTES));
    CUDA_CHECK(cudaMemset(a, 0x11, PROBE_BYTES));
    CUDA_CHECK(cudaMemset(b, 0x22, PROBE_BYTES));
    for (int way = WAY_NEXT_PHASE; way <= WAY_REINIT_SYNCED; way++) {
        CUDA_CHECK(cudaMemset(out, 0, PROBE_BYTES));
        if (way == WAY_NEXT_PHASE) probe_next_phase<<<1, 32>>>(a, b, out);
        else if (way == WAY_REINIT) probe_reinit<<<1, 32>>>(a, b, out);
        else probe_reinit_synced<<<1, 32>>>(a, b, out);
        CUDA_CHECK_KERNEL();
        CUDA_CHECK(cudaMemcpy(host, out, PROBE_BYTES, cudaMemcpyDeviceToHost));
        for (int i = 0; i < PROBE_BYTES; i++)
            TEST_ASSERT(host[i] == 0x22, "way %d: slot byte %d is 0x%02x, want the second load's 0x22", way, i,
                        host[i]);
    }
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    CUDA_CHECK(cudaFree(out));
    printf("tma_ring_probe: the slot holds the second load's bytes in every way: OK\n");
    return 0;
}
