// Probe: one-way latency of a flag ping-pong between GPU 0 and GPU 1, one process, by flag memory
// and by the load/store flavour, to find why symm-bench's raw ping-pong (0.775 us one way on 4x
// H200, bench/results/2026-11-21-h200-4gpu-rma-s3.md) is slower than the 0.58 us DESIGN.md records.
// Build: nvcc -O2 -arch=sm_90 -o pingpong_probe bench/probes/pingpong_probe.cu -lcuda
// Run:   ./pingpong_probe            (needs 2 GPUs with peer access)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <algorithm>
#include <vector>
#include <string>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_; cuGetErrorString(r_, &s_); printf("CU %s at %s:%d\n", s_, __FILE__, __LINE__); exit(1); } } while (0)

enum { VOLATILE = 0, RELAXED = 1, ACQREL = 2, NFLAVOURS };
static const char *flavour_name[] = {"volatile ld/st", "ld/st.relaxed.sys", "ld.acquire.sys / st.release.sys"};

__device__ __forceinline__ uint64_t gtimer() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ int ld_flag(const int *p, int f) {
    int v;
    if (f == VOLATILE) asm volatile("ld.volatile.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else if (f == RELAXED) asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_flag(int *p, int v, int f) {
    if (f == VOLATILE) asm volatile("st.volatile.global.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
    else if (f == RELAXED) asm volatile("st.relaxed.sys.global.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
    else asm volatile("st.release.sys.global.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// role 0 writes first; each polls `poll` and writes `write` (push: poll the local flag, write the
// peer's; pull: write the local flag, poll the peer's over NVLink); values never repeat
__global__ void pingpong(int role, int *poll, int *write, int base, int warm, int iters, int f,
                         unsigned long long *ns, int *err) {
    uint64_t t0 = 0, deadline = gtimer() + 5000000000ull;
    for (int k = 0; k < warm + iters; k++) {
        int v = base + k + 1;
        if (k == warm) t0 = gtimer();
        if (role == 0) st_flag(write, v, f);
        for (unsigned s = 0; ld_flag(poll, f) != v; s++)
            if ((s & 4095u) == 4095u && gtimer() > deadline) { *err = 1; return; }
        if (role == 1) st_flag(write, v, f);
    }
    if (role == 0) *ns = gtimer() - t0;
}

struct flags { int *f[2]; const char *name; };

static flags cudamalloc_flags() {
    flags fl; fl.name = "cudaMalloc + peer access";
    for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaMalloc(&fl.f[d], 4096)); CK(cudaMemset(fl.f[d], 0, 4096)); }
    return fl;
}

// One VMM allocation per GPU (2 MiB, its memory), mapped once in this process with access for both GPUs:
// the way symm's heap maps a peer's chunk (there through an imported POSIX fd).
static flags vmm_flags() {
    flags fl; fl.name = "cuMemCreate/cuMemMap (VMM)";
    for (int d = 0; d < 2; d++) {
        CUmemAllocationProp prop = {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = d;
        size_t gran = 0;
        CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CUmemGenericAllocationHandle h;
        CU(cuMemCreate(&h, gran, &prop, 0));
        CUdeviceptr p;
        CU(cuMemAddressReserve(&p, gran, gran, 0, 0));
        CU(cuMemMap(p, gran, 0, h, 0));
        CUmemAccessDesc acc[2] = {};
        for (int a = 0; a < 2; a++) {
            acc[a].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc[a].location.id = a;
            acc[a].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        }
        CU(cuMemSetAccess(p, gran, acc, 2));
        fl.f[d] = (int *)p;
        CK(cudaSetDevice(d));
        CK(cudaMemset(fl.f[d], 0, 4096));
    }
    return fl;
}

int main() {
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2) { printf("SKIP: needs 2 GPUs\n"); return 0; }
    for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceEnablePeerAccess(1 - d, 0)); CK(cudaFree(0)); }
    cudaStream_t s[2];
    unsigned long long *ns; int *err;
    for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking)); }
    // pinned host words, mapped for both GPUs (unified addressing: the same pointer in kernels)
    CK(cudaHostAlloc(&ns, sizeof(*ns), cudaHostAllocPortable | cudaHostAllocMapped));
    CK(cudaHostAlloc(&err, sizeof(*err), cudaHostAllocPortable | cudaHostAllocMapped));
    flags all[2] = {cudamalloc_flags(), vmm_flags()};
    const int warm = 200, iters = 10000;
    int base = 0;
    printf("| flag memory | flavour | one-way us (median of 7) |\n| --- | --- | ---: |\n");
    for (auto &fl : all)
        for (int f = 0; f < NFLAVOURS; f++) {
            std::vector<double> v;
            for (int r = 0; r < 7; r++) {
                *err = 0;
                for (int d = 1; d >= 0; d--) {  // the responder first, so it is resident when role 0 starts
                    CK(cudaSetDevice(d));
                    pingpong<<<1, 1, 0, s[d]>>>(d, fl.f[d], fl.f[1 - d], base, warm, iters, f, ns, err);
                    CK(cudaGetLastError());
                }
                for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaStreamSynchronize(s[d])); }
                base += warm + iters;
                if (*err) { printf("| %s | %s | timed out |\n", fl.name, flavour_name[f]); break; }
                v.push_back((double)*ns / iters / 2 / 1000.0);
            }
            if (v.size() == 7) {
                std::sort(v.begin(), v.end());
                printf("| %s | %s | %.3f |\n", fl.name, flavour_name[f], v[3]);
            }
            fflush(stdout);
        }

    // every pair of GPUs, volatile flags in cudaMalloc memory: push (as above) and pull
    {
        int g = n < 8 ? n : 8;
        int *fm[8];
        cudaStream_t gs[8];
        for (int d = 0; d < g; d++) {
            CK(cudaSetDevice(d));
            for (int e = 0; e < g; e++)
                if (e != d) {
                    cudaError_t pe = cudaDeviceEnablePeerAccess(e, 0);
                    if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled) CK(pe);
                    (void)cudaGetLastError();
                }
            CK(cudaMalloc(&fm[d], 4096));
            CK(cudaMemset(fm[d], 0, 4096));
            CK(cudaStreamCreateWithFlags(&gs[d], cudaStreamNonBlocking));
        }
        printf("\n| GPU pair | push: poll local, write peer (us) | pull: write local, poll peer (us) |\n"
               "| --- | ---: | ---: |\n");
        for (int a = 0; a < g; a++)
            for (int b = a + 1; b < g; b++) {
                double med[2] = {-1, -1};
                for (int pull = 0; pull < 2; pull++) {
                    std::vector<double> v;
                    int dev[2] = {a, b};
                    for (int r = 0; r < 7; r++) {
                        *err = 0;
                        for (int i = 1; i >= 0; i--) {
                            int d = dev[i], o = dev[1 - i];
                            CK(cudaSetDevice(d));
                            int *poll = pull ? fm[o] + 16 * i : fm[d] + 16 * i;   // distinct words per role
                            int *write = pull ? fm[d] + 16 * (1 - i) : fm[o] + 16 * (1 - i);
                            pingpong<<<1, 1, 0, gs[d]>>>(i, poll, write, base, warm, iters, VOLATILE, ns, err);
                            CK(cudaGetLastError());
                        }
                        for (int i = 0; i < 2; i++) { CK(cudaSetDevice(dev[i])); CK(cudaStreamSynchronize(gs[dev[i]])); }
                        base += warm + iters;
                        if (*err) break;
                        v.push_back((double)*ns / iters / 2 / 1000.0);
                    }
                    if (v.size() == 7) { std::sort(v.begin(), v.end()); med[pull] = v[3]; }
                }
                printf("| %d-%d | %s | %s |\n", a, b, med[0] < 0 ? "timed out" : std::to_string(med[0]).substr(0, 5).c_str(),
                       med[1] < 0 ? "timed out" : std::to_string(med[1]).substr(0, 5).c_str());
                fflush(stdout);
            }
    }
    return 0;
}
